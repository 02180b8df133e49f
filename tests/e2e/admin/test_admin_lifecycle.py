#!/usr/bin/env python3
"""test_admin_lifecycle.py - the config lifecycle across restarts, with
admin.state_dir: the persisted config wins over an unchanged -c file, an
edited -c file wins over it (one log line naming both; the replaced state
is kept in replaced-<time>/), --reset-state moves the state aside and
starts from the file, a SIGHUP makes the file the state's source again, a
SIGHUP decides between the file and the running state as a start does, and
a start that fails persists nothing. Also the command line: an unknown
option, a missing FILE and --help."""
import json
import os
import signal
import socket
import subprocess

from adminlib import (SY_BIN, TIMEOUT, AdminCase, Gateway, answered_by, data_get, free_port,
                      gateway_config, local_route, main)
from test_admin_persist import PersistCase

REPLACED = r"state: \S+ wins over the persisted config in (\S+) \((.*)\); that one is kept in (\S+)"


def tree(d):
    """{relative path: bytes} of every file under <d> (upgrade.sock, the
    running process's socket, as a name only)."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.isfile(p):
                out[os.path.relpath(p, d)] = "(not a file)"
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


class LifecycleCase(PersistCase):
    """PersistCase's start/stop helpers, on one-worker gateways of local routes."""

    def make(self, name, routes=None, args=None):
        self.state = self.tmp.file("state-" + name)
        cfg = gateway_config(routes=routes or [local_route("ping", "/ping")], workers=1,
                             admin={"address": "127.0.0.1:%d" % free_port(),
                                    "state_dir": self.state})
        g = Gateway(self.tmp, cfg, name=name, args=args)
        self.addCleanup(g.stop)
        return g

    def who(self, g, path):
        r = data_get(g.port, path)
        return r.status, answered_by(r)


class FileAgainstStateTest(LifecycleCase):
    def test_unchanged_file_keeps_the_state(self):
        g = self.make("same")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        self.stop_clean(g)
        self.start(g)  # rewrites the same bytes
        self.assertRegex(self.log_since(g), r"persisted config in .* wins over")
        self.assertNotRegex(self.log_since(g), REPLACED)
        self.assertEqual(self.who(g, "/api"), (200, "api"))
        self.stop_clean(g)

    def test_edited_file_wins_and_the_state_is_kept(self):
        g = self.make("edited")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        persisted = api.config()[0]
        self.stop_clean(g)
        cfg = dict(g.cfg, routes=[local_route("ping", "/ping"), local_route("new", "/new")])
        g.write_config(cfg)
        self.start(g)
        log = self.log_since(g)
        self.assertRegex(log, REPLACED)
        lines = [l for l in log.splitlines() if "wins over the persisted config" in l]
        self.assertEqual(len(lines), 1, log)
        self.assertIn(g.cfg_path, lines[0])
        self.assertIn(self.state, lines[0])
        self.assertIn("file changed", lines[0])
        self.assertNotRegex(log, r"persisted config in .* wins over")
        self.assertEqual(self.who(g, "/new"), (200, "new"))
        self.assertEqual(self.who(g, "/api")[0], 404)
        # the replaced state is kept whole
        kept = lines[0].rsplit(" ", 1)[1]
        self.assertTrue(kept.startswith(os.path.join(self.state, "replaced-")), kept)
        files = tree(kept)
        self.assertIn("config.json", files)
        with open(os.path.join(kept, "config.json")) as f:
            base = json.load(f)
        ids = [r["id"] for r in base["routes"]]
        # config.json plus its journal hold the API's route
        self.assertTrue("api" in ids or b"api" in files.get("journal", b""), files)
        self.assertEqual(persisted["routes"][-1]["id"], "api")
        # and from now on this file is the source: a restart keeps the state
        self.stop_clean(g)
        self.start(g)
        self.assertRegex(self.log_since(g), r"persisted config in .* wins over")
        self.assertEqual(self.who(g, "/new"), (200, "new"))
        self.stop_clean(g)

    def test_reset_state(self):
        g = self.make("reset")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        self.stop_clean(g)
        g.args = ["--reset-state"]
        self.start(g)
        log = self.log_since(g)
        self.assertRegex(log, REPLACED)
        self.assertIn("--reset-state", log)
        self.assertEqual(self.who(g, "/api")[0], 404)
        self.assertEqual(self.who(g, "/ping"), (200, "ping"))
        self.stop_clean(g)
        kept = [d for d in os.listdir(self.state) if d.startswith("replaced-")]
        self.assertEqual(len(kept), 1, os.listdir(self.state))

    def test_reload_makes_the_file_the_source(self):
        g = self.make("reload")
        api = self.start(g)
        cfg = dict(g.cfg, routes=[local_route("ping", "/ping"), local_route("hup", "/hup")])
        since = g.log_size()
        g.reload(cfg)
        g.wait_log(r"config reloaded", since)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        self.stop_clean(g)
        # the file is as the reload read it (start() rewrites the same text)
        self.start(g)
        self.assertRegex(self.log_since(g), r"persisted config in .* wins over")
        self.assertEqual(self.who(g, "/api"), (200, "api"))
        self.assertEqual(self.who(g, "/hup"), (200, "hup"))
        self.stop_clean(g)


HUP_REPLACED = (r"\[warn\] SIGHUP: (\S+) changed since the running config was derived from it: "
                r"it replaces (\d+) API changes?, (?:kept in (\S+)|lost \(no admin.state_dir "
                r"keeps them\))\n")
HUP_UNCHANGED = (r"\[notice\] config reloaded: \S+ is unchanged since the running config was "
                 r"derived from it: the running config stands, with (no|\d+) API changes?")


def replayed_route_ids(d):
    """The route ids of the state in <d>: config.json with its journal replayed."""
    with open(os.path.join(d, "config.json")) as f:
        ids = [r["id"] for r in json.load(f).get("routes", [])]
    if os.path.exists(os.path.join(d, "journal")):
        with open(os.path.join(d, "journal")) as f:
            for line in f:
                op = json.loads(line)
                if op["op"] == "put_route" and op["route"]["id"] not in ids:
                    ids.append(op["route"]["id"])
                elif op["op"] == "delete_route":
                    ids.remove(op["id"])
    return sorted(ids)


class ReloadAgainstStateTest(LifecycleCase):
    """SIGHUP follows the rule a start follows: a file unchanged since the
    running config was derived from it leaves the API's changes standing
    (a no-op reload); a changed file wins, the state it replaces is kept in
    replaced-<time>/ and one warning names how many API changes went and
    where. Without admin.state_dir the same, and the warning says they are
    lost; a start says once that API changes will not survive a restart."""

    def test_unchanged_file_keeps_the_api_changes(self):
        g = self.make("hup-same")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        since = g.log_size()
        g.signal(signal.SIGHUP)
        m = g.wait_log(HUP_UNCHANGED, since)
        self.assertEqual(m.group(1), "1")
        self.assertEqual(self.who(g, "/api"), (200, "api"))
        self.assertEqual(self.who(g, "/ping"), (200, "ping"))
        self.assertNotRegex(g.log()[since:], HUP_REPLACED)
        self.assertEqual([d for d in os.listdir(self.state) if d.startswith("replaced-")], [])
        # a restart keeps them too
        self.stop_clean(g)
        self.start(g)
        self.assertRegex(self.log_since(g), r"persisted config in .* wins over")
        self.assertEqual(self.who(g, "/api"), (200, "api"))
        self.stop_clean(g)

    def test_changed_file_replaces_them_with_a_backup(self):
        g = self.make("hup-edit")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        self.assertWrite(api.post("/routes", local_route("api2", "/api2")), 201)
        self.assertWrite(api.delete("/routes/ping"), 200)
        persisted = sorted(r["id"] for r in api.config()[0]["routes"])
        since = g.log_size()
        g.reload(dict(g.cfg, routes=[local_route("ping", "/ping"), local_route("new", "/new")]))
        m = g.wait_log(HUP_REPLACED, since)
        g.wait_log(r"\[notice\] config reloaded: generation", since)
        self.assertEqual((m.group(1), m.group(2)), (g.cfg_path, "3"))
        self.assertEqual(len([l for l in g.log()[since:].splitlines() if "API change" in l]), 1)
        kept = m.group(3)
        self.assertTrue(kept.startswith(os.path.join(self.state, "replaced-")), kept)
        # the file won
        self.assertEqual(self.who(g, "/new"), (200, "new"))
        self.assertEqual(self.who(g, "/ping"), (200, "ping"))
        self.assertEqual(self.who(g, "/api")[0], 404)
        # the backup holds the replaced state whole
        self.assertEqual(replayed_route_ids(kept), persisted)
        # the file is the source now: SIGHUP and a restart keep what runs
        self.assertWrite(api.post("/routes", local_route("later", "/later")), 201)
        since = g.log_size()
        g.signal(signal.SIGHUP)
        self.assertEqual(g.wait_log(HUP_UNCHANGED, since).group(1), "1")
        self.assertEqual(len([d for d in os.listdir(self.state) if d.startswith("replaced-")]), 1)
        self.stop_clean(g)
        self.start(g)
        self.assertRegex(self.log_since(g), r"persisted config in .* wins over")
        self.assertEqual(self.who(g, "/new"), (200, "new"))
        self.assertEqual(self.who(g, "/later"), (200, "later"))
        self.assertEqual(self.who(g, "/api")[0], 404)
        self.stop_clean(g)

    def test_refused_file_sets_nothing_aside(self):
        g = self.make("hup-bad")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        before = tree(self.state)
        for text in ("{ not json", json.dumps(dict(g.cfg, bogus=1))):
            since = g.log_size()
            g.reload(text=text)
            g.wait_log(r"reload refused, the running config keeps serving", since)
            self.assertEqual(tree(self.state), before)
            self.assertEqual(self.who(g, "/api"), (200, "api"))
        self.stop_clean(g)

    def test_without_state_dir(self):
        cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=1,
                             admin={"address": "127.0.0.1:%d" % free_port()})
        g = Gateway(self.tmp, cfg, name="hup-nostate")
        self.addCleanup(g.stop)
        api = self.start(g)
        notice = "[notice] admin.state_dir is not set: changes made through the admin API will " \
                 "not survive a restart"
        self.assertEqual(g.log().count(notice), 1)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        since = g.log_size()
        g.signal(signal.SIGHUP)
        self.assertEqual(g.wait_log(HUP_UNCHANGED, since).group(1), "1")
        self.assertEqual(self.who(g, "/api"), (200, "api"))
        since = g.log_size()
        g.reload(dict(g.cfg, routes=[local_route("ping", "/ping"), local_route("new", "/new")]))
        m = g.wait_log(HUP_REPLACED, since)
        self.assertEqual((m.group(2), m.group(3)), ("1", None))
        g.wait_log(r"\[notice\] config reloaded: generation", since)
        self.assertEqual(self.who(g, "/api")[0], 404)
        self.assertEqual(self.who(g, "/new"), (200, "new"))
        self.assertEqual(g.log().count(notice), 1)  # at the start only
        self.stop_clean(g)


class FailedStartTest(LifecycleCase):
    def run_to_exit(self, g):
        g.write_config()
        p = subprocess.run([SY_BIN, "-c", g.cfg_path] + (g.args or []), capture_output=True,
                           text=True, timeout=TIMEOUT)
        return p.returncode, p.stderr

    def test_failed_first_start_persists_nothing(self):
        g = self.make("fail1")
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        g.cfg["listeners"] = [{"address": "127.0.0.1:%d" % busy.getsockname()[1]}]
        rc, err = self.run_to_exit(g)
        self.assertNotEqual(rc, 0, err)
        # not even the state directory is made
        self.assertFalse(os.path.exists(self.state), err)

    def test_missing_token_file_persists_nothing(self):
        """A start whose token file is missing exits 1 saying so, before it
        writes anything: a missing state directory is not made, an empty
        one stays empty, a persisted one stays byte for byte (its torn
        journal line not cut, a leftover temporary file not removed)."""
        token = self.tmp.file("no-such-token")
        for case in ("missing", "empty", "persisted"):
            with self.subTest(case=case):
                g = self.make("notoken-" + case)
                if case == "empty":
                    os.makedirs(self.state)
                if case == "persisted":
                    api = self.start(g)
                    self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
                    self.stop_clean(g)
                    with open(os.path.join(self.state, "journal"), "ab") as f:
                        f.write(b'{"op":"put_route","rou')
                    with open(os.path.join(self.state, "config.json.tmp"), "wb") as f:
                        f.write(b"{")
                before = tree(self.state) if case != "missing" else None
                g.cfg["admin"]["token_file"] = token
                rc, err = self.run_to_exit(g)
                self.assertEqual(rc, 1, err)
                self.assertIn("admin.token_file: cannot read %s: No such file or directory" %
                              token, err)
                if case == "missing":
                    self.assertFalse(os.path.exists(self.state), err)
                else:
                    self.assertEqual(tree(self.state), before, err)

    def test_failed_start_keeps_the_state_as_it_was(self):
        g = self.make("fail2")
        api = self.start(g)
        self.assertWrite(api.post("/routes", local_route("api", "/api")), 201)
        self.stop_clean(g)
        before = tree(self.state)
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        # an edited file that cannot start: the state stays, byte for byte
        cfg = dict(g.cfg, listeners=[{"address": "127.0.0.1:%d" % busy.getsockname()[1]}])
        g.write_config(cfg)
        for args in (None, ["--reset-state"]):
            g.args = args
            rc, err = self.run_to_exit(g)
            self.assertNotEqual(rc, 0, err)
            self.assertEqual(tree(self.state), before, err)


class CommandLineTest(AdminCase):
    def run_sy(self, *args):
        return subprocess.run([SY_BIN] + list(args), capture_output=True, text=True,
                              timeout=TIMEOUT)

    def test_unknown_option(self):
        for opt in ("--bogus", "-x", "--check-config"):
            p = self.run_sy(opt)
            self.assertEqual(p.returncode, 2, p)
            self.assertIn("unknown option %s" % opt, p.stderr)
            self.assertIn("usage: switchyard", p.stderr)
            self.assertEqual(p.stdout, "")

    def test_missing_file_and_stray_argument(self):
        for args, want in ((["-c"], "a FILE must follow -c"),
                           (["--check"], "a FILE must follow --check"),
                           (["extra"], "unexpected argument extra")):
            p = self.run_sy(*args)
            self.assertEqual(p.returncode, 2, p)
            self.assertIn(want, p.stderr)
            self.assertIn("usage: switchyard", p.stderr)

    def test_help(self):
        for opt in ("--help", "-h"):
            p = self.run_sy(opt)
            self.assertEqual(p.returncode, 0, p)
            self.assertIn("usage: switchyard", p.stdout)
            self.assertIn("--reset-state", p.stdout)
            self.assertEqual(p.stderr, "")


if __name__ == "__main__":
    main()
