#!/usr/bin/env python3
"""test_admin_refusals.py - a config is accepted only if the next start
would accept it too, and never accepted and then ignored:
- a push (and a dry run, and a SIGHUP) that changes a restart-only key
  (workers, admin.*, user, group) is a 409 naming each path; nothing
  changes (listeners are live: test_admin_listeners.py);
- a push whose files a start would refuse (a token file that cannot be read,
  an access log that cannot be opened, a state directory that is a file) or
  that opens the admin API off loopback without a token is a 400 naming the
  path, together with every other error of the same push;
- --check refuses each config that fails to start, naming the path;
- one instance per address: a listener address that anyone listens on,
  another Switchyard included, fails the start with "address in use";
- limits.max_routes: a config over it is refused at /routes, from a push,
  POST /routes, a SIGHUP, --check and a start alike."""
import json
import os
import socket
import subprocess

from adminlib import (SY_BIN, TIMEOUT, AdminCase, Gateway, admin_port, answered_by, data_get,
                      free_port, gateway_config, local_route, main, port_is_bound, wait_for)


def paths(r):
    return sorted(e["path"] for e in (r.json or {}).get("errors", []))


def start_to_exit(tmp, cfg, name):
    """Starts switchyard on <cfg>, which must not start; (exit status, stderr)."""
    g = Gateway(tmp, cfg, name=name)
    g.write_config()
    p = subprocess.run([SY_BIN, "-c", g.cfg_path], capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p.returncode, p.stderr


class RefusalCase(AdminCase):
    def setUp(self):
        super().setUp()
        self.cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=1,
                                  upstreams={"u": {"servers": [{"address": "127.0.0.1:9"}]}})
        self.gw = self.own_gateway(self.cfg)
        self.api = self.admin_for(self.gw)

    def live(self):
        return json.loads(json.dumps(self.cfg))

    def assertNothingChanged(self, gen):
        self.assertEqual(self.api.generation(), gen)
        self.assertEqual(self.api.get("/routes/new").status, 404)


class RestartOnlyTest(RefusalCase):
    def changes(self):
        yield "/workers", dict(self.live(), workers=2)
        c = self.live()
        c["admin"] = dict(c["admin"], address="127.0.0.1:%d" % free_port())
        yield "/admin/address", c
        c = self.live()
        c["admin"] = dict(c["admin"], heap_reserve_mb=0)
        yield "/admin/heap_reserve_mb", c
        c = self.live()
        c["user"] = "nobody"
        yield "/user", c

    def test_push_of_a_restart_only_key_is_409(self):
        gen = self.api.generation()
        for path, c in self.changes():
            c["routes"] = c["routes"] + [local_route("new", "/new")]
            for q in ("", "?dry_run=1"):
                r = self.api.put("/config" + q, c)
                self.assertEqual(r.status, 409, (path, q, r))
                self.assertEqual(paths(r), [path], r)
                self.assertIn("restart", r.json["errors"][0]["message"], r)
            self.assertNothingChanged(gen)
        # the same values, written out explicitly: nothing to restart for
        c = self.live()
        c["workers"] = 1
        c["admin"] = dict(c["admin"], heap_reserve_mb=48)
        c["routes"] = c["routes"] + [local_route("new", "/new")]
        self.assertWrite(self.api.put("/config", c), 200, gen)
        self.assertEqual(self.api.get("/routes/new").status, 200)

    def test_sighup_of_a_restart_only_key_is_refused(self):
        gen = self.api.generation()
        since = self.gw.log_size()
        self.gw.reload(dict(self.live(), workers=3,
                            routes=self.cfg["routes"] + [local_route("new", "/new")]))
        m = self.gw.wait_log(r"reload refused \(409[^\n]*\n[^\n]*/workers: needs a restart", since)
        self.assertTrue(m)
        self.assertNothingChanged(gen)


class StartChecksTest(RefusalCase):
    def test_files_a_start_would_refuse(self):
        gen = self.api.generation()
        bad_dir = self.tmp.file("a-file")
        with open(bad_dir, "w") as f:
            f.write("x")
        def admin(**kw):
            c = self.live()
            c["admin"] = dict(c["admin"], **kw)
            return c

        cases = [("/access_log", dict(self.live(), access_log="/nonexistent/dir/x.log")),
                 ("/admin/token_file", admin(token_file=self.tmp.file("missing.token"))),
                 ("/admin/state_dir", admin(state_dir=bad_dir)),
                 ("/admin/address", admin(address="0.0.0.0:%d" % free_port()))]
        for path, c in cases:
            c["routes"] = c["routes"] + [local_route("new", "/new")]
            for q in ("", "?dry_run=1"):
                r = self.api.put("/config" + q, c)
                # what a start refuses is a 400, listed with the restart-only key
                self.assertEqual(r.status, 400, (path, r))
                self.assertIn(path, paths(r), r)
                msgs = [e["message"] for e in r.json["errors"] if e["path"] == path]
                self.assertTrue(any("restart" not in m for m in msgs), r)
            self.assertNothingChanged(gen)

    def test_relative_paths_name_their_directory(self):
        """A relative path of a pushed config is resolved against the
        directory switchyard started in, whoever pushes it from wherever,
        and an error about one names that directory (issue 23)."""
        home = os.path.join(self.tmp.path, "home")
        os.mkdir(home)
        cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=1)
        gw = self.own_gateway(cfg, name="home", cwd=home)
        api = self.admin_for(gw)
        where = " (relative to %s, the directory switchyard started in)" % home
        c = dict(cfg, access_log="logs/access.log")
        for q in ("?dry_run=1", ""):
            r = api.put("/config" + q, c)
            self.assertEqual(r.status, 400, r)
            self.assertEqual(r.json["errors"], [{"path": "/access_log", "message":
                             "cannot create logs/access.log%s: logs: No such file or directory"
                             % where}])
        tok = dict(cfg, admin=dict(cfg["admin"], token_file="admin.token"))
        r = api.put("/config?dry_run=1", tok)
        self.assertIn({"path": "/admin/token_file", "message":
                       "cannot read admin.token%s: No such file or directory" % where},
                      r.json["errors"], r)
        # there, it is taken: the log is written where the message said
        os.mkdir(os.path.join(home, "logs"))
        self.assertEqual(api.put("/config", c).status, 200)
        self.assertEqual(data_get(gw.port, "/ping").status, 200)
        wait_for(lambda: os.path.exists(os.path.join(home, "logs", "access.log")),
                 what="the access log under the start directory")

    def test_every_error_in_one_answer(self):
        c = self.live()
        c["limits"] = {"max_headers": "many"}
        c["bogus"] = 1
        c["routes"] = c["routes"] + [{"id": "r", "path": "/r", "upstream": "nope"}]
        r = self.api.put("/config", c)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(paths(r), ["/bogus", "/limits/max_headers", "/routes/1/upstream"], r)


class MaxRoutesTest(RefusalCase):
    def over(self, n, cap):
        return [{"path": "/routes",
                 "message": "%d routes, more than limits.max_routes (%d)" % (n, cap)}]

    def assertServing(self):
        r = data_get(self.gw.port, "/ping")
        self.assertEqual((r.status, answered_by(r)), (200, "ping"))

    def test_a_config_over_max_routes_is_refused(self):
        gen = self.api.generation()
        c = dict(self.live(), limits={"max_routes": 3})
        c["routes"] = c["routes"] + [local_route("r%d" % i, "/r%d" % i) for i in range(3)]
        for q in ("", "?dry_run=1"):
            r = self.api.put("/config" + q, c)
            self.assertEqual(r.status, 400, (q, r))
            self.assertEqual(r.json["errors"], self.over(4, 3), r)
        self.assertNothingChanged(gen)
        self.assertServing()

        # at the cap it is taken; a route more is a 409, a replacement is no route more
        c["routes"] = c["routes"][:3]
        gen = self.api.generation()
        self.assertWrite(self.api.put("/config", c), 200, gen)
        gen = self.api.generation()
        r = self.api.post("/routes", local_route("new", "/new"))
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.json["errors"], self.over(4, 3), r)
        self.assertNothingChanged(gen)
        self.assertWrite(self.api.put("/routes/r0", local_route("r0", "/r0b")), 200, gen)
        self.assertServing()

        # the file: a SIGHUP is refused, --check and a start refuse it
        gen = self.api.generation()
        over = dict(c, routes=c["routes"] + [local_route("new", "/new")])
        since = self.gw.log_size()
        self.gw.reload(over)
        self.gw.wait_log(r"reload refused, the running config keeps serving:\n[^\n]*"
                         r"/routes: 4 routes, more than limits.max_routes \(3\)", since)
        self.assertNothingChanged(gen)
        self.assertServing()
        p = subprocess.run([SY_BIN, "--check", self.gw.cfg_path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual((p.returncode, p.stderr),
                         (1, "/routes: 4 routes, more than limits.max_routes (3)\n"))
        fresh = dict(over, listeners=[{"address": "127.0.0.1:%d" % free_port()}],
                     admin={"address": "127.0.0.1:%d" % free_port()})
        rc, err = start_to_exit(self.tmp, fresh, "over")
        self.assertEqual(rc, 1, err)
        self.assertIn("/routes: 4 routes, more than limits.max_routes (3)", err)


class CheckTest(AdminCase):
    def check(self, cfg, env=None):
        path = self.tmp.file("check.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        e = dict(os.environ)
        e.pop("SWITCHYARD_ADMIN_TOKEN", None)
        e.update(env or {})
        p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                           timeout=TIMEOUT, env=e)
        return p.returncode, p.stdout, p.stderr

    def test_check_refuses_what_a_start_refuses(self):
        bad_dir = self.tmp.file("plain-file")
        with open(bad_dir, "w") as f:
            f.write("x")
        empty = self.tmp.file("empty.token")
        with open(empty, "w") as f:
            f.write("\n")
        for path, admin, extra in (
                ("/admin/token_file", {"token_file": self.tmp.file("none.token")}, {}),
                ("/admin/token_file", {"token_file": empty}, {}),
                ("/admin/address", {"address": "0.0.0.0:%d" % free_port()}, {}),
                ("/admin/state_dir", {"state_dir": bad_dir}, {}),
                ("/access_log", {}, {"access_log": "/nonexistent/dir/x.log"})):
            cfg = gateway_config(routes=[local_route("ping", "/ping")], **extra)
            cfg["admin"].update(admin)
            rc, out, err = self.check(cfg)
            self.assertEqual(rc, 1, (path, out, err))
            self.assertTrue(any(l.startswith(path + ":") for l in err.splitlines()), err)
            # and the start refuses it as well
            g = Gateway(self.tmp, cfg, name="refused")
            g.write_config()
            p = subprocess.run([SY_BIN, "-c", g.cfg_path], capture_output=True, timeout=TIMEOUT)
            self.assertNotEqual(p.returncode, 0, (path, p))
        # the admin rule is met by the environment's token
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"]["address"] = "0.0.0.0:%d" % free_port()
        self.assertEqual(self.check(cfg, {"SWITCHYARD_ADMIN_TOKEN": "t"})[0], 0)


class OneInstancePerAddressTest(AdminCase):
    def refused(self, cfg):
        rc, err = start_to_exit(self.tmp, cfg, "second")
        self.assertNotEqual(rc, 0, err)
        self.assertIn("address in use", err)
        self.assertIn(cfg["listeners"][-1]["address"], err)
        self.assertFalse(port_is_bound(admin_port(cfg)), err)
        return err

    def test_two_instances_on_one_address(self):
        first = gateway_config(routes=[local_route("first", "/")], workers=2)
        g = self.own_gateway(first, name="first")
        second = gateway_config(routes=[local_route("second", "/")], workers=2)
        second["listeners"] = [{"address": "127.0.0.1:%d" % free_port()},
                               first["listeners"][0]]
        self.refused(second)
        # the first one still answers every request, on each of its workers
        for _ in range(20):
            self.assertEqual(answered_by(data_get(g.port, "/")), "first")

    def test_two_instances_started_together(self):
        """Started at the same instant on the same addresses, exactly one
        wins and the other fails with "address in use": the probe and the
        binds after it are one step for every Switchyard (the bind lock).
        Several listeners and workers make the step long."""
        for rnd in range(6):
            addrs = [{"address": "127.0.0.1:%d" % free_port()} for _ in range(4)]
            gws, procs = [], []
            for i in range(2):
                cfg = gateway_config(routes=[local_route("n%d" % i, "/")], workers=4)
                cfg["listeners"] = addrs
                g = Gateway(self.tmp, cfg, name="together%d" % i)
                g.write_config()
                gws.append(g)
            for g in gws:
                with open(g.log_path, "ab") as log:
                    procs.append(subprocess.Popen([SY_BIN, "-c", g.cfg_path], stdout=log,
                                                  stderr=log, start_new_session=True))
            for p in procs:
                self.addCleanup(p.kill)
            # the loser exits on its own; the winner serves until stopped
            wait_for(lambda: any(p.poll() is not None for p in procs),
                     what="one of them to exit (both running: they share the addresses)")
            lost = [i for i, p in enumerate(procs) if p.poll() is not None]
            self.assertEqual(len(lost), 1, [g.log() for g in gws])
            won = 1 - lost[0]
            self.assertNotEqual(procs[lost[0]].returncode, 0)
            self.assertIn("address in use", gws[lost[0]].log())
            wait_for(lambda: port_is_bound(admin_port(gws[won].cfg)), what="the winner's API")
            self.assertIsNone(procs[won].poll(), gws[won].log())
            for a in addrs:
                port = int(a["address"].rsplit(":", 1)[1])
                for _ in range(8):
                    self.assertEqual(answered_by(data_get(port, "/")), "n%d" % won)
            procs[won].terminate()
            self.assertEqual(procs[won].wait(TIMEOUT), 0, gws[won].log())

    def test_another_process_holds_the_address(self):
        for reuseport in (0, 1):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuseport:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            self.addCleanup(s.close)
            cfg = gateway_config(routes=[local_route("x", "/")])
            cfg["listeners"] = [{"address": "127.0.0.1:%d" % s.getsockname()[1]}]
            self.refused(cfg)


if __name__ == "__main__":
    main()
