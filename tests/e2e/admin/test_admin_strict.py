#!/usr/bin/env python3
"""test_admin_strict.py - the admin API is as strict as its config parser:
a query parameter an endpoint does not take is a 400 naming it (so that a
misspelled ?dry_run never applies a config live), a flag takes 1, true, 0
or false and nothing else, a 401 says nothing about the config (no ETag, no
config data), and every accepted change is one audit line in the log with
the client, method, path, generations before and after, and the route id
of a route change."""
import re

from adminlib import AdminCase, gateway_config, local_route, main

# every endpoint, with a query each takes (None: it takes none)
ENDPOINTS = [("GET", "/"), ("GET", "/healthz"), ("GET", "/config"), ("GET", "/routes"),
             ("GET", "/routes/ping"), ("GET", "/upstreams"), ("GET", "/upstreams/u"),
             ("GET", "/upstreams/u/health"), ("GET", "/status"), ("GET", "/metrics")]
# misspellings and bad values of dry_run: each a 400 naming the parameter
BAD_DRY_RUN = [("dryrun=1", "dryrun"), ("dry-run=1", "dry-run"), ("dry_run=yes", "dry_run"),
               ("dry_run", "dry_run"), ("dry_run=", "dry_run"), ("dry_run=2", "dry_run"),
               ("dry_run=TRUE", "dry_run"), ("Dry_run=1", "Dry_run"),
               ("dry_run=1&dry_run=1", "dry_run"), ("dry_run=1&x=1", "x"),
               ("dry_run=%ff", "dry_run"), ("%ff=1", "?")]
AUDIT_RE = re.compile(r"\[notice\] audit: 127\.0\.0\.1:\d+ (\S+) (\S+) generation (\d+) -> (\d+)"
                      r"(?: route (\S+))?$", re.M)


class StrictTest(AdminCase):
    def setUp(self):
        super().setUp()
        self.cfg = gateway_config(upstreams={"u": {"servers": [{"address": "127.0.0.1:9"}]}},
                                  routes=[local_route("ping", "/ping")])
        self.gw = self.own_gateway(self.cfg)
        self.api = self.admin_for(self.gw)

    def changed_cfg(self):
        c = dict(self.cfg)
        c["routes"] = [local_route("ping", "/ping"), local_route("new", "/new")]
        return c

    def assertRefused(self, r, name, what):
        self.assertEqual(r.status, 400, (what, r))
        self.assertIsNotNone(r.json, (what, r))
        self.assertIn(name, r.json["error"], (what, r))
        self.assertEqual(r.json["errors"][0]["parameter"], name, (what, r))

    def test_bad_dry_run_is_refused_and_applies_nothing(self):
        gen = self.api.generation()
        for q, name in BAD_DRY_RUN:
            r = self.api.put("/config?" + q, self.changed_cfg())
            self.assertRefused(r, name, q)
        self.assertEqual(self.api.generation(), gen)
        r = self.api.get("/routes/new")
        self.assertEqual(r.status, 404, r)

    def test_good_dry_run_values(self):
        gen = self.api.generation()
        for q in ("dry_run=1", "dry_run=true", "&dry_run=true&"):
            r = self.api.put("/config?" + q, self.changed_cfg())
            self.assertEqual(r.status, 200, (q, r))
            self.assertEqual((r.json["valid"], r.json["routes"]), (True, 2), q)
            self.assertEqual(r.json["changes"]["routes"]["added"], 1, q)  # what it would do
        self.assertEqual(self.api.generation(), gen)
        r = self.api.put("/config?dry_run=false", self.changed_cfg())
        self.assertWrite(r, 200, gen)
        self.assertEqual(self.api.get("/routes/new").status, 200)
        r = self.api.put("/config?dry_run=0", self.cfg)
        self.assertWrite(r, 200, gen + 1)
        self.assertEqual(self.api.get("/routes/new").status, 404)

    def test_unknown_parameter_on_every_endpoint(self):
        for method, path in ENDPOINTS:
            for q, name in (("x=1", "x"), ("dry_run=1", "dry_run"), ("bare", "bare")):
                r = self.api.request(method, path + "?" + q)
                self.assertRefused(r, name, (method, path, q))
        # the route and upstream writes take dry_run (their impact), and
        # misspell it at their peril: a 400 naming it, nothing applied
        gen = self.api.generation()
        for method, path, body, status in (
                ("POST", "/routes", local_route("a", "/a"), 200),
                ("PUT", "/routes/ping", local_route("ping", "/p"), 200),
                ("DELETE", "/routes/ping", None, 200),
                ("POST", "/upstreams", {"name": "v", "servers": []}, 400),
                ("PUT", "/upstreams/u", {"servers": []}, 400),
                ("DELETE", "/upstreams/u", None, 200)):
            r = self.api.request(method, path + "?dry_run=1", body)
            self.assertEqual(r.status, status, (method, path, r))
            self.assertEqual(r.json.get("valid") is True, status == 200, r)
            self.assertEqual("impact" in r.json, status == 200, r)
            r = self.api.request(method, path + "?dryrun=1", body)
            self.assertRefused(r, "dryrun", (method, path))
        self.assertEqual(self.api.generation(), gen)
        # /routes/match takes method, host and path, and only those
        r = self.api.get("/routes/match?method=GET&host=&path=/ping")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["route"]["id"], "ping")
        self.assertRefused(self.api.get("/routes/match?path=/ping&paht=/x"), "paht", "match")
        self.assertRefused(self.api.get("/routes/match?path=/ping&path=/x"), "path", "twice")
        # percent-encoded names are decoded before they are compared
        r = self.api.put("/config?dry%5Frun=1", self.changed_cfg())
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json.get("valid"), True, r)

    def test_audit_line_per_accepted_change(self):
        since = self.gw.log_size()
        g0 = self.api.generation()
        self.assertWrite(self.api.post("/routes", local_route("a", "/a")), 201)
        self.assertWrite(self.api.put("/routes/a", local_route("a", "/a2")), 200)
        self.assertWrite(self.api.delete("/routes/a"), 200)
        w = {"name": "w", "servers": [{"address": "127.0.0.1:9"}]}
        self.assertWrite(self.api.post("/upstreams", w), 201)
        self.assertWrite(self.api.delete("/upstreams/w"), 200)
        self.assertWrite(self.api.put("/config", self.changed_cfg()), 200)
        # refused and read-only calls are not audited
        self.assertEqual(self.api.post("/routes", {"id": "b"}).status, 400)
        self.assertEqual(self.api.put("/config?dry_run=1", self.cfg).status, 200)
        self.assertEqual(self.api.put("/config?dryrun=1", self.cfg).status, 400)
        self.assertEqual(self.api.get("/config").status, 200)
        want = [("POST", "/routes", g0, g0 + 1, "a"),
                ("PUT", "/routes/a", g0 + 1, g0 + 2, "a"),
                ("DELETE", "/routes/a", g0 + 2, g0 + 3, "a"),
                ("POST", "/upstreams", g0 + 3, g0 + 4, None),
                ("DELETE", "/upstreams/w", g0 + 4, g0 + 5, None),
                ("PUT", "/config", g0 + 5, g0 + 6, None)]
        self.gw.wait_log(r"audit: \S+ PUT /config generation %d" % (g0 + 5), since)
        got = [(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), m.group(5))
               for m in AUDIT_RE.finditer(self.gw.log()[since:])]
        self.assertEqual(got, want, self.gw.log()[since:])


class TokenTest(AdminCase):
    def test_401_carries_no_etag_and_no_config(self):
        path = self.tmp.file("admin.token")
        with open(path, "w") as f:
            f.write("tok-123")
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"]["token_file"] = path
        gw = self.own_gateway(cfg, name="token")
        api = self.admin_for(gw, token="tok-123")
        good = api.get("/config")
        self.assertEqual(good.status, 200)
        self.assertIsNotNone(good.etag)
        for method, p, body in (("GET", "/config", None), ("GET", "/status", None),
                                ("GET", "/routes", None), ("PUT", "/config", cfg),
                                ("POST", "/routes", local_route("x", "/x")),
                                ("GET", "/nope", None), ("DELETE", "/status", None),
                                ("PUT", "/config?dryrun=1", cfg)):
            for tok in (None, "wrong"):
                r = api.request(method, p, body, token=tok)
                self.assertEqual(r.status, 401, (method, p, r))
                self.assertIsNone(r.etag, (method, p, r.headers))
                self.assertEqual(set(r.json), {"error"}, (method, p, r))
                self.assertNotIn(b"ping", r.body)
                self.assertNotIn(b"generation", r.body)
        # with the token the query is checked
        r = api.put("/config?dryrun=1", cfg)
        self.assertEqual(r.status, 400, r)


if __name__ == "__main__":
    main()
