#!/usr/bin/env python3
"""test_admin_impact.py - the blast radius of a dry run (admin/impact.c):
a known sample of real requests goes through the running gateway (its
workers' rings, admin/sample.h), then dry runs of PUT /config, of a route
PUT and DELETE and of an upstream PUT answer the exact groups, counts,
route and upstream lists and same_route entries, and nothing is applied;
"sampling": 0 samples nothing; an invalid config's dry run is still a 400
with JSON paths."""
import copy
import threading
import time

from adminlib import AdminCase, data_get, gateway_config, local_route, main, upstream_cfg

# the sample: (method, path, how many), and where each goes in the live config
SAMPLE = [("GET", "/users/%d", 5), ("GET", "/orders/%d", 3), ("GET", "/old", 2),
          ("GET", "/nothing", 4), ("POST", "/users/9", 1)]
TOTAL = sum(n for _, _, n in SAMPLE)


class ImpactCase(AdminCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b1 = cls.shared_backend("b1")
        cls.b2 = cls.shared_backend("b2")

    def config(self, **sections):
        routes = [
            {"id": "users", "path": "/users/{id}", "methods": ["GET"], "upstream": "app"},
            {"id": "orders", "path": "/orders/{id}", "methods": ["GET"], "upstream": "app"},
            local_route("old", "/old"),
        ]
        return gateway_config(upstreams={"app": upstream_cfg(self.b1),
                                         "other": upstream_cfg(self.b2)},
                              routes=routes, **sections)

    def start(self, cfg):
        self.cfg = cfg
        self.gw = self.own_gateway(cfg)
        self.api = self.admin_for(self.gw)
        for method, path, n in SAMPLE:
            for i in range(n):
                r = data_get(self.gw.port, path % i if "%d" in path else path, method=method)
                self.assertIn(r.status, (200, 404, 405))
        return self.api

    def state(self):
        cfg, etag, raw = self.api.config()
        st = self.api.get("/status").json
        return etag, raw, st["generation"], st["swaps"]

    def impact(self, r):
        self.assertEqual(r.status, 200, r)
        self.assertIs(r.json.get("valid"), True, r)
        return r.json["impact"]


class ImpactTest(ImpactCase):
    def test_config_dry_run(self):
        api = self.start(self.config())
        before = self.state()
        new = copy.deepcopy(self.cfg)
        new["upstreams"]["app"] = upstream_cfg(self.b1, self.b2)
        new["routes"] = [
            {"id": "users", "path": "/users/{id}", "methods": ["GET"], "upstream": "other"},
            {"id": "orders", "path": "/orders/{id}", "methods": ["GET"], "upstream": "app",
             "timeout_ms": 5000},
            local_route("new", "/nothing"),
        ]
        im = self.impact(api.put("/config?dry_run=1", new))
        self.assertEqual(im["sampled"], TOTAL)
        self.assertEqual(im["truncated"], 0)
        self.assertEqual(im["workers_skipped"], 0)
        self.assertEqual(im["unchanged"], TOTAL - 6)
        self.assertEqual(im["changed"], [
            {"from": "404", "to": "new", "count": 4, "example": "GET /nothing"},
            {"from": "old", "to": "404", "count": 2, "example": "GET /old"}])
        self.assertEqual(im["routes"], {"added": ["new"], "removed": ["old"],
                                        "changed": ["orders", "users"]})
        self.assertEqual(im["route_keys"], {"orders": ["timeout_ms"], "users": ["upstream"]})
        self.assertEqual(im["upstreams"], {"added": [], "removed": [], "changed": ["app"]})
        self.assertEqual(im["servers"], {"app": {"in": [self.b2.addr], "out": []}})
        same = sorted(im["same_route"], key=lambda g: g["route"])
        self.assertEqual(len(same), 2, im)
        self.assertEqual((same[0]["route"], same[0]["count"], same[0]["changes"]),
                         ("orders", 3, ["pool"]))
        self.assertRegex(same[0]["example"], r"^GET /orders/\d$")
        self.assertEqual((same[1]["route"], same[1]["count"], same[1]["changes"]),
                         ("users", 5, ["upstream"]))
        self.assertEqual(self.state(), before)  # nothing applied

    def test_route_and_upstream_dry_runs(self):
        api = self.start(self.config())
        before = self.state()
        # a route PUT: POST /users/9 was a 405 and now reaches users
        r = api.put("/routes/users?dry_run=1",
                    {"path": "/users/{id}", "methods": ["GET", "POST"], "upstream": "app"})
        im = self.impact(r)
        self.assertIn("changes", r.json)
        self.assertEqual((im["sampled"], im["unchanged"]), (TOTAL, TOTAL - 1))
        self.assertEqual(im["changed"], [
            {"from": "405", "to": "users", "count": 1, "example": "POST /users/9"}])
        self.assertEqual(im["routes"], {"added": [], "removed": [], "changed": ["users"]})
        self.assertEqual(im["route_keys"], {"users": ["methods"]})
        self.assertEqual(im["same_route"], [])
        # a route DELETE
        im = self.impact(api.delete("/routes/orders?dry_run=1"))
        self.assertEqual(im["changed"], [{"from": "orders", "to": "404", "count": 3,
                                          "example": im["changed"][0]["example"]}])
        self.assertRegex(im["changed"][0]["example"], r"^GET /orders/\d$")
        self.assertEqual(im["routes"], {"added": [], "removed": ["orders"], "changed": []})
        # a new route by POST
        im = self.impact(api.post("/routes?dry_run=1", local_route("new", "/nothing")))
        self.assertEqual(im["changed"], [
            {"from": "404", "to": "new", "count": 4, "example": "GET /nothing"}])
        self.assertEqual(im["routes"]["added"], ["new"])
        # an upstream PUT: every request keeps its route, their pool changes
        im = self.impact(api.put("/upstreams/app?dry_run=1", upstream_cfg(self.b2)))
        self.assertEqual((im["sampled"], im["unchanged"], im["changed"]), (TOTAL, TOTAL, []))
        self.assertEqual(im["upstreams"], {"added": [], "removed": [], "changed": ["app"]})
        self.assertEqual(im["servers"], {"app": {"in": [self.b2.addr], "out": [self.b1.addr]}})
        self.assertEqual(sorted((g["route"], g["count"], g["changes"]) for g in im["same_route"]),
                         [("orders", 3, ["pool"]), ("users", 5, ["pool"])])
        # a new upstream by POST, and a DELETE of one no route uses
        im = self.impact(api.post("/upstreams?dry_run=1",
                                  dict(upstream_cfg(self.b2), name="spare")))
        self.assertEqual(im["upstreams"]["added"], ["spare"])
        im = self.impact(api.delete("/upstreams/other?dry_run=1"))
        self.assertEqual(im["upstreams"]["removed"], ["other"])
        self.assertEqual(self.state(), before)  # nothing applied
        self.assertEqual(data_get(self.gw.port, "/users/9", method="POST").status, 405)

    def test_dry_runs_while_traffic_flows(self):
        """The workers write their rings while the admin thread copies them
        (under TSan in CI): every answer whole, every sample one of ours."""
        cfg = self.config(sampling=64)
        api = self.start(cfg)
        new = copy.deepcopy(self.cfg)
        new["routes"] = new["routes"][:1]
        stop = threading.Event()
        sent = [0]

        def traffic():
            deadline = time.monotonic() + 20
            while not stop.is_set() and sent[0] < 2000 and time.monotonic() < deadline:
                data_get(self.gw.port, "/orders/%d" % (sent[0] % 1000))
                sent[0] += 1

        t = threading.Thread(target=traffic)
        t.start()
        try:
            for _ in range(30):
                im = self.impact(api.put("/config?dry_run=1", new))
                self.assertLessEqual(im["sampled"], 2 * 64)
                self.assertEqual(im["truncated"], 0)
                for g in im["changed"]:  # start()'s sample and ours
                    self.assertIn((g["from"], g["to"]), [("orders", "404"), ("old", "404")], im)
                    self.assertRegex(g["example"], r"^GET /(orders/\d+|old)$")
        finally:
            stop.set()
            t.join(30)
        self.assertGreater(sent[0], 0)

    def test_sampling_off(self):
        api = self.start(self.config(sampling=0))
        new = copy.deepcopy(self.cfg)
        new["routes"] = []
        im = self.impact(api.put("/config?dry_run=1", new))
        self.assertEqual((im["sampled"], im["unchanged"], im["changed"]), (0, 0, []))
        self.assertEqual(im["routes"]["removed"], ["old", "orders", "users"])

    def test_sampling_live(self):
        """"sampling" is live: a push that keeps it keeps the samples, one that
        changes it starts new rings."""
        api = self.start(self.config())
        new = copy.deepcopy(self.cfg)
        new["log_level"] = "warn"
        self.assertEqual(api.put("/config", new).status, 200)
        im = self.impact(api.put("/config?dry_run=1", new))
        self.assertEqual(im["sampled"], TOTAL)
        new["sampling"] = 64
        self.assertEqual(api.put("/config", new).status, 200)
        im = self.impact(api.put("/config?dry_run=1", new))
        self.assertEqual(im["sampled"], 0)
        data_get(self.gw.port, "/old")
        im = self.impact(api.put("/config?dry_run=1", new))
        self.assertEqual(im["sampled"], 1)

    def test_invalid_dry_run(self):
        api = self.start(self.config())
        bad = dict(copy.deepcopy(self.cfg), sampling=-1)
        bad["routes"].append({"id": "x", "path": "/x", "upstream": "nope"})
        r = api.put("/config?dry_run=1", bad)
        self.assertEqual(r.status, 400, r)
        paths = [e["path"] for e in r.json["errors"]]
        self.assertIn("/routes/3/upstream", paths)
        self.assertIn("/sampling", paths)
        self.assertNotIn("impact", r.json)
        r = api.put("/routes/users?dry_run=1", {"path": "/users/{id}", "upstream": "nope"})
        self.assertEqual(r.status, 400, r)
        self.assertIn("/upstream", [e["path"] for e in r.json["errors"]])


if __name__ == "__main__":
    main()
