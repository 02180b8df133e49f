#!/usr/bin/env python3
"""test_cli.py - the command line: `switchyard --check` and the embedded
default config, whose API changes persist in $XDG_STATE_HOME/switchyard."""
import errno
import glob
import json
import os
import re
import socket
import subprocess

from harness import (SY_BIN, TIMEOUT, GatewayCase, free_port, get, gateway_config, main, rss_kib,
                     self_signed)


class CheckTest(GatewayCase):
    def check(self, text):
        path = self.tmp.file("check.json")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        return p.returncode, p.stdout, p.stderr

    def test_check_ok(self):
        cfg = gateway_config(
            upstreams={"app": {"servers": [{"address": "127.0.0.1:9"}]}},
            routes=[{"id": "app", "path": "/*{rest}", "upstream": "app"},
                    {"id": "ping", "path": "/ping", "methods": ["GET"],
                     "response": {"status": 200, "body": "pong"}}])
        rc, out, err = self.check(json.dumps(cfg))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "ok")

    def test_check_errors_name_json_paths(self):
        cfg = gateway_config(
            upstreams={"a": {"servers": [{"address": "127.0.0.1:1"}]}},
            routes=[{"id": "r0", "path": "/x", "upstream": "nope"},
                    {"id": "r1", "path": "/y", "upstream": "a", "bogus": 1}])
        cfg["listeners"][0]["address"] = "127.0.0.1:99999"
        rc, out, err = self.check(json.dumps(cfg))
        self.assertEqual(rc, 1)
        self.assertNotIn("ok", out)
        lines = err.splitlines()
        # every error on its own line, starting with its JSON pointer
        self.assertTrue(any(l.startswith("/listeners/0/address:") for l in lines), err)
        self.assertTrue(any(l.startswith("/routes/0/upstream:") and "nope" in l
                            for l in lines), err)
        self.assertTrue(any(l.startswith("/routes/1/bogus:") for l in lines), err)

    def test_check_accepts_panic_and_slow_start(self):
        # the last pool keys to be served (refused as "not served yet" before)
        cfg = gateway_config(
            upstreams={"a": {"servers": [{"address": "127.0.0.1:1"}],
                             "slow_start_ms": 3000, "panic": True}},
            routes=[{"id": "r0", "path": "/x", "upstream": "a"}])
        rc, out, err = self.check(json.dumps(cfg))
        self.assertEqual(rc, 0, err)
        self.assertIn("ok", out)
        self.assertNotIn("not served", err)

    def test_readme_configs_pass_check(self):
        # every config the README and docs/ write with cat > /tmp/NAME.json <<'JSON' and
        # then start is one a new user copies first: it must pass --check as written
        top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        text = ""
        for path in [os.path.join(top, "README.md")] + sorted(
                glob.glob(os.path.join(top, "docs", "**", "*.md"), recursive=True)):
            with open(path) as f:
                text += f.read()
        blocks = re.findall(r"cat > (/tmp/[\w.-]+\.json) <<'JSON'\n(.*?)\nJSON\n", text, re.S)
        self.assertGreaterEqual(len(blocks), 2)
        for name, body in blocks:
            rc, out, err = self.check(body)
            self.assertEqual((name, rc), (name, 0), err)
            self.assertEqual(out.strip(), "ok")

    def test_check_syntax_error(self):
        # a syntax error names the file it is in (issue 23), as a schema
        # error names its JSON path
        rc, out, err = self.check("{\n \"listeners\": [\n")
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"^%s: line 3, column \d+: " % re.escape(self.tmp.file("check.json")))

    def test_empty_file_is_named_as_such(self):
        # not jansson's "'[' or '{' expected near end of file" (issue 23)
        path = self.tmp.file("check.json")
        for text, what in (("", "is empty"), (" \n\n", "holds nothing but white space")):
            rc, out, err = self.check(text)
            self.assertEqual(rc, 1)
            self.assertEqual(err, "%s: the file %s: a config is a JSON object ({...})\n"
                             % (path, what))
            p = subprocess.run([SY_BIN, "-c", path], capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(p.returncode, 1)
            self.assertRegex(p.stderr, r"^\S+Z \[error\] %s: the file %s: " % (
                re.escape(path), what))
            self.assertNotIn("expected", p.stderr)

    def test_start_syntax_error_names_the_file_once(self):
        path = self.tmp.file("syntax.json")
        with open(path, "w") as f:
            f.write('{"workers": 1,}')
        p = subprocess.run([SY_BIN, "-c", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"^\S+Z \[error\] %s: line 1, column 15: [^\n]*\n$"
                         % re.escape(path))

    def test_c_twice_is_an_error(self):
        # the last -c is not taken silently: which one was meant? (issue 23)
        a, b = self.tmp.file("a.json"), self.tmp.file("b.json")
        for args in (["-c", a, "-c", b], ["--check", a, "--check", b]):
            p = subprocess.run([SY_BIN] + args, capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, "")
            first = p.stderr.splitlines()[0]
            self.assertEqual(first, "switchyard: %s given twice (%s, then %s): give one FILE"
                             % (args[0], a, b))
            self.assertIn("usage: switchyard", p.stderr)

    def test_usage_names_version(self):
        p = subprocess.run([SY_BIN, "--help"], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0)
        self.assertIn("switchyard --version", p.stdout)
        v = subprocess.run([SY_BIN, "--version"], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(v.returncode, 0)
        self.assertRegex(v.stdout, r"^switchyard \d+\.\d+\.\d+\n$")

    def test_check_missing_file(self):
        p = subprocess.run([SY_BIN, "--check", self.tmp.file("absent.json")],
                           capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn("absent.json", p.stderr)

    def test_start_missing_file_says_it_once(self):
        path = self.tmp.file("absent.json")
        p = subprocess.run([SY_BIN, "-c", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"^\S+Z \[error\] %s: No such file or directory\n$"
                         % re.escape(path))

    def test_start_refuses_bad_config(self):
        cfg = gateway_config(routes=[{"id": "r", "path": "/x", "upstream": "nope"}])
        path = self.tmp.file("bad.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([SY_BIN, "-c", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn("/routes/0/upstream", p.stderr)


def port_busy(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((addr, port))
        return False
    except OSError as e:
        return e.errno in (errno.EADDRINUSE, errno.EACCES)
    finally:
        s.close()


class DefaultConfigTest(GatewayCase):
    def test_default_config_welcome_page(self):
        if port_busy("0.0.0.0", 8080) or port_busy("127.0.0.1", 9901):
            self.skipTest("port 8080 or 9901 is busy")
        # no -c: the embedded default config (0.0.0.0:8080, GET / page)
        g = self.own_gateway(None, name="default", port=8080)
        g.wait_log(r"embedded default")
        r = get(8080, "/")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.body.startswith(b"Switchyard is running."), r.body[:100])
        # the push it shows starts from a file the reader can make
        made = r.body.find(b"switchyard --print-default > switchyard.json")
        self.assertGreater(made, 0, r.body)
        self.assertGreater(r.body.find(b"--data-binary @switchyard.json"), made, r.body)
        self.assertEqual(r.header("Content-Type"), "text/plain; charset=utf-8")
        self.assertEqual(int(r.header("Content-Length")), len(r.body))
        self.assertTrue(r.has("Date"))
        # the page is GET only, everything else is a miss
        self.assertEqual(get(8080, "/", method="POST", body=b"").status, 405)
        self.assertEqual(get(8080, "/nothing-here").status, 404)
        # last, as they add a route for every path
        self.run_page_commands(r.body.decode())

    def run_page_commands(self, page):
        """Runs the page's own commands as a reader would paste them: the
        file it makes first, then each curl, which the admin API must take
        (2xx), as written."""
        lines = [l.strip() for l in page.splitlines()]
        cmds, cur = [], ""
        for l in lines:
            cur = (cur + " " + l) if cur else l
            if cur.endswith("\\"):
                cur = cur[:-1].rstrip()
                continue
            if cur.startswith(("switchyard ", "curl ")):
                cmds.append(cur.split("  #")[0].strip())
            cur = ""
        self.assertEqual([c.split()[0] for c in cmds], ["switchyard", "curl", "curl", "curl"], cmds)
        made = subprocess.run(cmds[0].replace("switchyard", SY_BIN, 1), shell=True,
                              cwd=self.tmp.path, capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(made.returncode, 0, made.stderr)
        for c in cmds[1:]:
            c = c.replace("curl ", "curl -s -o /dev/null -w '%{http_code}' --max-time 10 ", 1)
            p = subprocess.run(c, shell=True, cwd=self.tmp.path, capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertRegex(p.stdout, r"^2\d\d$", "%s: %s %s" % (c, p.stdout, p.stderr))


class StartLineTest(GatewayCase):
    """The start line names every address it serves on (issue 23): each
    listener, or the first four and how many more, and the admin API."""

    def start_line(self, g):
        m = g.wait_log(r"\[notice\] (switchyard \S+: [^\n]*)\n")
        return m.group(1)

    def addrs(self, cfg):
        return [li["address"] for li in cfg["listeners"]]

    def test_every_listener_and_the_admin_api(self):
        cfg = gateway_config()
        cfg["listeners"].append({"address": "127.0.0.1:%d" % free_port(),
                                 "tls": {"certificates": [self_signed(self.tmp)]}})
        a = self.addrs(cfg)
        line = self.start_line(self.own_gateway(cfg))
        self.assertIn(", 2 listeners (%s, %s tls), admin API %s, 0 routes, config "
                      % (a[0], a[1], cfg["admin"]["address"]), line)

    def test_more_than_four_listeners(self):
        cfg = gateway_config()
        cfg["listeners"] += [{"address": "127.0.0.1:%d" % free_port()} for _ in range(5)]
        a = self.addrs(cfg)
        line = self.start_line(self.own_gateway(cfg))
        self.assertIn(", 6 listeners (%s and 2 more), admin API %s, "
                      % (", ".join(a[:4]), cfg["admin"]["address"]), line)


def admin_call(method, path, body=None):
    """(status, parsed JSON) of one call to the embedded default's admin API."""
    r = get(9901, path, method=method, body=json.dumps(body).encode() if body else None,
            headers=[("Content-Type", "application/json")] if body else None)
    return r.status, json.loads(r.body) if r.body else None


def tree(d):
    """{relative path: bytes} of every file under <d>, and its directories."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs:
            out[os.path.relpath(os.path.join(root, n), d) + "/"] = None
        for n in files:
            path = os.path.join(root, n)
            if not os.path.isfile(path):  # upgrade.sock, the running process's
                out[os.path.relpath(path, d)] = "(not a file)"
                continue
            with open(path, "rb") as f:
                out[os.path.relpath(path, d)] = f.read()
    return out


class DefaultStateTest(GatewayCase):
    """The embedded default keeps the API's changes in
    $XDG_STATE_HOME/switchyard (else ~/.local/state/switchyard): a restart
    serves them again; a second instance is refused before it writes
    there; a directory that cannot be made or named runs unpersisted,
    saying so."""

    def setUp(self):
        if port_busy("0.0.0.0", 8080) or port_busy("127.0.0.1", 9901):
            self.skipTest("port 8080 or 9901 is busy")

    def start_default(self, env, name="default"):
        g = self.own_gateway(None, name=name, port=8080, env=env)
        g.wait_log(r"switchyard .*config \(embedded default\), state ")
        return g

    def test_api_changes_survive_a_restart(self):
        xdg = self.tmp.file("xdg-restart")
        state = os.path.join(xdg, "switchyard")
        env = {"XDG_STATE_HOME": xdg}
        app = self.own_backend("app")
        g = self.start_default(env)
        # the start line names the directory, made 0700
        g.wait_log(r"config \(embedded default\), state %s\n" % re.escape(state))
        self.assertEqual(os.stat(state).st_mode & 0o777, 0o700)
        self.assertEqual(admin_call("POST", "/upstreams", {
            "name": "app", "servers": [{"address": app.addr}]})[0], 201)
        self.assertEqual(admin_call("POST", "/routes", {
            "id": "app", "path": "/app/*{rest}", "upstream": "app"})[0], 201)
        self.assertEqual(get(8080, "/app/x").status, 200)
        self.assertEqual(g.stop(), 0, g.log())

        g = self.start_default(env, name="again")
        g.wait_log(r"persisted config in %s wins over the embedded default" % re.escape(state))
        st, ups = admin_call("GET", "/upstreams")
        self.assertEqual((st, list(ups["upstreams"])), (200, ["app"]), ups)
        r = get(8080, "/app/x")
        self.assertEqual((r.status, r.json()["path"]), (200, "/app/x"))
        self.assertEqual(get(8080, "/").status, 200)  # the welcome page too

        # a second instance on the same state: refused before it writes
        # anything there (its ports are taken too, but the state is first)
        before = tree(state)
        p = subprocess.run([SY_BIN], capture_output=True, text=True, timeout=TIMEOUT,
                           env=dict(os.environ, XDG_STATE_HOME=xdg))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("state_dir %s is in use by another switchyard process" % state, p.stderr)
        self.assertEqual(tree(state), before)
        self.assertEqual(get(8080, "/app/y").status, 200)

    def test_no_directory_runs_unpersisted(self):
        blocker = self.tmp.file("not-a-dir")
        with open(blocker, "w") as f:
            f.write("x")
        for env, why in (({"XDG_STATE_HOME": "", "HOME": ""},
                          "neither XDG_STATE_HOME nor HOME names an absolute directory"),
                         ({"XDG_STATE_HOME": os.path.join(blocker, "sub")}, "Not a directory")):
            with self.subTest(why=why):
                g = self.start_default(env, name="unpersisted")
                log = g.log()
                self.assertRegex(log, r"\[error\] state: .*%s.*: running without a state "
                                 r"directory, so changes made through the admin API will not "
                                 r"survive a restart" % re.escape(why))
                self.assertIn("state not persisted", log)
                self.assertEqual(get(8080, "/").status, 200)
                self.assertEqual(admin_call("POST", "/routes", {
                    "id": "x", "path": "/x", "response": {"status": 204}})[0], 201)
                self.assertEqual(g.stop(), 0, log)


class HeapReserveTest(GatewayCase):
    def test_heap_reserve_is_touched_and_kept(self):
        # admin.heap_reserve_mb (48 by default): that much heap is touched
        # at start, before the admin API opens, and stays resident
        cfg = gateway_config(routes=[])
        cfg["admin"]["heap_reserve_mb"] = 0
        base = self.own_gateway(cfg, name="plain")
        g = self.own_gateway(gateway_config(routes=[]), name="reserve")
        for gw in (base, g):
            gw.wait_log(r"admin API on")
        self.assertGreaterEqual(rss_kib(g.pid()), rss_kib(base.pid()) + 48 * 1024 * 0.9)
        self.assertEqual(get(g.port, "/nothing").status, 404)

if __name__ == "__main__":
    main()
