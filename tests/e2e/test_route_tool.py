#!/usr/bin/env python3
"""test_route_tool.py - switchyard-route's command line (SY_ROUTE): one
output line per request line, a bad one answered by an error line of its
own and the exit status 1 at the end; --help on stdout with exit 0; an
unknown option named, with the usage, exit 2; --config FILE.json routes as
the running gateway does with that same file (its /routes/match answers);
--diff OLD.json NEW.json groups request lines and JSON access-log lines as
the admin API's dry run groups the live sample."""
import json
import os
import subprocess
import http.client

from harness import TIMEOUT, GatewayCase, gateway_config, get, main, wait_for

SY_ROUTE = os.environ.get("SY_ROUTE")
HERE = os.path.dirname(os.path.abspath(__file__))
GITHUB = os.path.join(os.path.dirname(HERE), "data", "routes", "github.txt")


def route(args, stdin=""):
    return subprocess.run([SY_ROUTE] + args, input=stdin, capture_output=True, text=True,
                          timeout=TIMEOUT)


class RouteToolTest(GatewayCase):
    def test_one_output_line_per_request_line(self):
        lines = ["GET - /user", "bad", "PUT - /user", "GET - /user extra", "GET - /nothing"]
        p = route([GITHUB], "\n".join(lines) + "\n")
        out = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(len(out), len(lines), p.stdout)
        self.assertEqual([o.get("status") for o in out], [200, None, 405, None, 404])
        self.assertIn("error", out[1])
        self.assertIn("error", out[3])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(route([GITHUB], "GET - /user\n").returncode, 0)

    def test_help_and_unknown_option(self):
        for opt in ("--help", "-h"):
            p = route([opt])
            self.assertEqual((p.returncode, p.stderr), (0, ""), p)
            self.assertIn("usage: switchyard-route", p.stdout)
            self.assertIn("--config", p.stdout)
        for args, want in ((["--bogus", GITHUB], "unknown option --bogus"),
                           ([GITHUB, "extra"], "unexpected argument extra"),
                           (["--config"], "a value must follow --config")):
            p = route(args)
            self.assertEqual(p.returncode, 2, p)
            self.assertIn(want, p.stderr)
            self.assertIn("usage: switchyard-route", p.stderr)
            self.assertEqual(p.stdout, "")

    def test_config_routes_as_the_gateway_does(self):
        cfg = gateway_config(
            upstreams={"u": {"servers": [{"address": "127.0.0.1:9"}]}},
            routes=[{"id": "get-user", "host": "api.example.com", "methods": ["GET"],
                     "path": "/users/{id}", "upstream": "u"},
                    {"id": "post-user", "methods": ["POST"], "path": "/users/{id}",
                     "upstream": "u"},
                    {"id": "files", "path": "/src/*{path}", "upstream": "u"},
                    {"id": "ping", "path": "/ping", "response": {"status": 200}}],
            router={"trailing_slash": "redirect", "auto_options": True})
        gw = self.own_gateway(cfg)
        admin = int(cfg["admin"]["address"].rsplit(":", 1)[1])
        reqs = [("GET", "api.example.com", "/users/7"), ("GET", "", "/users/7"),
                ("POST", "other.example.com", "/users/8"), ("DELETE", "", "/users/8"),
                ("GET", "", "/src/a/b.c"), ("GET", "", "/ping/"), ("OPTIONS", "", "/users/1"),
                ("GET", "", "/nothing")]
        p = route(["--config", gw.cfg_path],
                  "".join("%s %s %s\n" % (m, h or "-", path) for m, h, path in reqs))
        self.assertEqual(p.returncode, 0, p.stderr)
        got = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(len(got), len(reqs), p.stdout)
        def match(m, h, path):
            c = http.client.HTTPConnection("127.0.0.1", admin, timeout=TIMEOUT)
            try:
                c.request("GET", "/routes/match?method=%s&host=%s&path=%s" % (m, h, path))
                return json.loads(c.getresponse().read())
            except OSError:
                return None
            finally:
                c.close()

        wait_for(lambda: match("GET", "", "/"), what="the admin API")
        for (m, h, path), g in zip(reqs, got):
            want = match(m, h, path)
            what = (m, h, path, g, want)
            self.assertEqual(g["status"], want["status"], what)
            self.assertEqual(g.get("route"), (want.get("route") or {}).get("id"), what)
            self.assertEqual(g.get("allow"), want.get("allow"), what)

    # --diff: two configs, and where requests go from one to the other
    OLD_ROUTES = [{"id": "users", "path": "/users/{id}", "methods": ["GET"], "upstream": "u"},
                  {"id": "old", "path": "/old", "response": {"status": 200}},
                  {"id": "ping", "path": "/ping", "response": {"status": 200}}]
    NEW_ROUTES = [{"id": "users", "path": "/users/{id}", "methods": ["GET", "POST"],
                   "upstream": "u"},
                  {"id": "new", "path": "/nothing", "response": {"status": 200}},
                  {"id": "ping", "path": "/ping", "response": {"status": 200}}]
    REQUESTS = [("GET", "/users/1"), ("GET", "/users/2?q=1"), ("POST", "/users/3"),
                ("GET", "/old"), ("GET", "/old?x=y"), ("GET", "/old"), ("GET", "/nothing"),
                ("GET", "/ping"), ("GET", "/ping")]
    WANT = {"sampled": 9, "unchanged": 4, "skipped": 0, "changed": [
        {"from": "old", "to": "404", "count": 3, "example": "GET /old"},
        {"from": "404", "to": "new", "count": 1, "example": "GET /nothing"},
        {"from": "405", "to": "users", "count": 1, "example": "POST /users/3"}]}

    def configs(self, **sections):
        ups = {"u": {"servers": [{"address": "127.0.0.1:9"}]}}
        old = gateway_config(upstreams=ups, routes=self.OLD_ROUTES, **sections)
        new = dict(old, routes=self.NEW_ROUTES)
        paths = []
        for name, c in (("old.json", old), ("new.json", new)):
            paths.append(self.tmp.file(name))
            with open(paths[-1], "w") as f:
                json.dump(c, f)
        return old, new, paths

    def test_diff_request_lines(self):
        old, new, (po, pn) = self.configs()
        lines = "".join("%s - %s\n" % r for r in self.REQUESTS)
        p = route(["--diff", po, pn], "# a comment\n" + lines)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), self.WANT)
        p = route(["--diff", po, pn], lines + "bad line\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(json.loads(p.stdout)["skipped"], 1)
        # a host with its port (as an access log has it) routes by its name
        hosted = [("GET", "a.example:8080", "/h"), ("GET", "[::1]:8443", "/h"),
                  ("GET", "a.example", "/h")]
        po2, pn2 = self.tmp.file("h-old.json"), self.tmp.file("h-new.json")
        for path, rs in ((po2, [{"id": "h", "host": "a.example", "path": "/h",
                                 "response": {"status": 200}}]), (pn2, [])):
            with open(path, "w") as f:
                json.dump(dict(old, routes=rs), f)
        p = route(["--diff", po2, pn2], "".join("%s %s %s\n" % r for r in hosted))
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        self.assertEqual(got["changed"], [{"from": "h", "to": "404", "count": 2,
                                           "example": "GET /h"}], got)
        p = route(["--diff", po], "")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--diff", p.stderr)

    def test_diff_access_log(self):
        log = self.tmp.file("access.log")
        old, new, (po, pn) = self.configs(access_log=log)
        gw = self.own_gateway(old)
        for m, path in self.REQUESTS:
            get(gw.port, path, method=m, host="localhost")
        def lines():
            if not os.path.exists(log):
                return 0
            with open(log) as f:
                return len(f.read().splitlines())

        wait_for(lambda: lines() >= len(self.REQUESTS), what="the access log lines")
        with open(log) as f:
            text = f.read()
        p = route(["--diff", po, pn], text)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), self.WANT)
        # the admin API's dry run groups the gateway's own sample alike
        admin = int(old["admin"]["address"].rsplit(":", 1)[1])
        c = http.client.HTTPConnection("127.0.0.1", admin, timeout=TIMEOUT)
        try:
            c.request("PUT", "/config?dry_run=1", body=json.dumps(new),
                      headers={"Content-Type": "application/json"})
            im = json.loads(c.getresponse().read())["impact"]
        finally:
            c.close()
        self.assertEqual((im["sampled"], im["unchanged"], im["changed"]),
                         (self.WANT["sampled"], self.WANT["unchanged"], self.WANT["changed"]))


if __name__ == "__main__":
    main()
