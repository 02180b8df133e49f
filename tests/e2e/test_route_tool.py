#!/usr/bin/env python3
"""test_route_tool.py - switchyard-route's command line (SY_ROUTE): one
output line per request line, a bad one answered by an error line of its
own and the exit status 1 at the end; --help on stdout with exit 0; an
unknown option named, with the usage, exit 2; --config FILE.json routes as
the running gateway does with that same file (its /routes/match answers)."""
import json
import os
import subprocess
import http.client

from harness import TIMEOUT, GatewayCase, gateway_config, main, wait_for

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


if __name__ == "__main__":
    main()
