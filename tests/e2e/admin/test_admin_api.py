#!/usr/bin/env python3
"""test_admin_api.py - every admin endpoint and status code through real HTTP
against the running binary: GET/PUT /config (ETag, If-Match, dry_run, an
identical config, invalid configs), route and upstream CRUD, /routes/match,
/status, /healthz, /metrics, body limits and malformed JSON, and two writers
racing with the same If-Match. Each test runs its own gateway (the API
changes it) in front of one shared backend."""
import json
import threading

from adminlib import (ETAG_RE, AdminCase, Admin, Client, admin_port, answered_by, data_get,
                      etag_gen, gateway_config, local_route, metric, metric_sum,
                      parse_prometheus, upstream_cfg, wait_for, main)


class ApiCase(AdminCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b1 = cls.shared_backend("b1")
        cls.b2 = cls.shared_backend("b2")

    def base_config(self, **sections):
        routes = [
            {"id": "echo", "path": "/e/*{rest}", "upstream": "u"},
            local_route("ping", "/ping", methods=["GET"]),
            local_route("user", "/users/{id}", methods=["GET"]),
            local_route("dir", "/dir/", methods=["GET"]),
        ]
        return gateway_config(upstreams={"u": upstream_cfg(self.b1)}, routes=routes,
                              router={"trailing_slash": "redirect"}, **sections)

    def start(self, cfg=None):
        self.cfg = cfg or self.base_config()
        self.gw = self.own_gateway(self.cfg)
        self.port = self.gw.port
        self.api = self.admin_for(self.gw)
        return self.api

    def answer(self, path, method="GET", host="localhost"):
        """(status, route id named by the body) of one data-plane request."""
        r = data_get(self.port, path, method=method, host=host)
        return r.status, answered_by(r)

    def snapshot(self):
        """Everything a failed write must leave unchanged."""
        cfg, etag, raw = self.api.config()
        st = self.api.get("/status").json
        return etag, raw, st["generation"], st["swaps"]

    def assertUnchanged(self, before):
        self.assertEqual(self.snapshot(), before)


# ---------------------------------------------------------------------------


class ConfigTest(ApiCase):
    def test_get_config_etag(self):
        api = self.start()
        r = api.get("/config")
        self.assertStatus(r, 200)
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertRegex(r.etag, ETAG_RE)
        self.assertEqual(etag_gen(r.etag), api.generation())
        self.assertEqual(r.json, self.cfg)  # the config as pushed
        # the same bytes and ETag until something changes
        r2 = api.get("/config")
        self.assertEqual((r2.body, r2.etag), (r.body, r.etag))
        st = api.get("/status").json
        self.assertEqual(st["etag"], r.etag)

    def test_put_config_new_generation(self):
        api = self.start()
        _, etag0, _ = api.config()
        new = dict(self.cfg)
        new["routes"] = self.cfg["routes"] + [local_route("fresh", "/fresh")]
        r = api.put("/config", new)
        et = self.assertWrite(r, 200, prev_gen=etag_gen(etag0))
        self.assertNotEqual(et, etag0)
        self.assertTrue(r.json["changed"])
        cfg, etag, _ = api.config()
        self.assertEqual(etag, et)
        self.assertEqual(cfg, new)
        self.assertEqual(self.answer("/fresh"), (200, "fresh"))
        self.assertEqual(self.answer("/ping"), (200, "ping"))

    def test_put_config_if_match(self):
        api = self.start()
        _, etag0, _ = api.config()
        new = dict(self.cfg, routes=self.cfg["routes"] + [local_route("a", "/a")])
        r = api.put("/config", new, headers={"If-Match": etag0})
        etag1 = self.assertWrite(r, 200, prev_gen=etag_gen(etag0))
        # etag0 is stale now: 412, nothing changes
        before = self.snapshot()
        newer = dict(self.cfg, routes=self.cfg["routes"] + [local_route("b", "/b")])
        r = api.put("/config", newer, headers={"If-Match": etag0})
        self.assertStatus(r, 412)
        self.assertEqual(r.json["error"].split()[0], "If-Match")
        self.assertEqual(r.etag, etag1)  # the answer tells the live ETag
        self.assertUnchanged(before)
        self.assertEqual(self.answer("/b")[0], 404)
        self.assertEqual(self.answer("/a"), (200, "a"))
        # a made-up ETag and a weak one are stale too
        for bad in ('"999-0000000000000000"', "W/" + etag1, etag1.strip('"')):
            self.assertStatus(api.put("/config", newer, headers={"If-Match": bad}), 412)
        self.assertUnchanged(before)
        # a list matches when it names the live ETag (RFC 9110 13.1.1)
        self.assertStatus(api.put("/config", newer, headers={"If-Match": etag0 + ", W/" + etag1}),
                          412)
        self.assertUnchanged(before)
        r = api.put("/config", newer, headers={"If-Match": etag0 + ", " + etag1})
        etag2 = self.assertWrite(r, 200, prev_gen=etag_gen(etag1))
        self.assertEqual(self.answer("/b"), (200, "b"))
        # "*" matches any config
        r = api.put("/config", new, headers={"If-Match": "*"})
        self.assertWrite(r, 200, prev_gen=etag_gen(etag2))
        self.assertEqual(self.answer("/b")[0], 404)

    def test_dry_run_changes_nothing(self):
        api = self.start()
        before = self.snapshot()
        new = dict(self.cfg, routes=[local_route("only", "/only")])
        for q in ("dry_run=1", "dry_run=true"):
            r = api.put("/config?" + q, new)
            self.assertStatus(r, 200)
            self.assertEqual(r.json.get("valid"), True, r)
            self.assertUnchanged(before)
            self.assertEqual(r.etag, before[0])
        # an invalid config: the errors, and still nothing changes
        bad = dict(self.cfg, routes=[{"id": "x", "path": "/x", "upstream": "nope"}])
        r = api.put("/config?dry_run=1", bad)
        self.assertStatus(r, 400)
        self.assertIn("/routes/0/upstream", [e["path"] for e in r.json["errors"]])
        self.assertUnchanged(before)
        # a stale If-Match is refused before validating
        r = api.put("/config?dry_run=1", new, headers={"If-Match": '"1-0000000000000000"'})
        self.assertStatus(r, 412)
        # the data plane still runs the old config
        self.assertEqual(self.answer("/ping"), (200, "ping"))
        self.assertEqual(self.answer("/only")[0], 404)
        self.assertUnchanged(before)

    def test_identical_config_keeps_generation(self):
        api = self.start()
        cfg, etag0, raw = api.config()
        swaps = api.get("/status").json["swaps"]
        # the same document, however it is written: other key order, spacing
        texts = [raw, json.dumps(cfg, indent=3),
                 json.dumps(json.loads(raw, object_pairs_hook=lambda kv: dict(reversed(kv))))]
        for text in texts:
            r = api.put("/config", text)
            self.assertStatus(r, 200)
            self.assertEqual(r.json["changed"], False, r)
            self.assertEqual(r.json["generation"], etag_gen(etag0))
            self.assertEqual(r.etag, etag0)
        self.assertEqual(api.config()[1], etag0)
        self.assertEqual(api.get("/status").json["swaps"], swaps)

    def test_invalid_config_reports_every_error(self):
        api = self.start()
        before = self.snapshot()
        bad = dict(self.cfg)
        bad["workers"] = "two"
        bad["bogus"] = 1
        bad["upstreams"] = {"u": {"servers": [{"address": "127.0.0.1:99999"}]}}
        bad["routes"] = [
            {"id": "r0", "path": "/x", "upstream": "missing"},
            {"id": "r1", "path": "no-slash", "response": {"body": "x"}},
            local_route("r2", "/same/{a}"),
            local_route("r3", "/same/{b}"),
            {"id": "r4", "path": "/y", "upstream": "u", "colour": "red"},
        ]
        r = api.put("/config", bad)
        self.assertStatus(r, 400)
        self.assertEqual(r.json["error"], "invalid config")
        paths = [e["path"] for e in r.json["errors"]]
        for p in ("/workers", "/bogus", "/upstreams/u/servers/0/address", "/routes/0/upstream",
                  "/routes/1/path", "/routes/4/colour"):
            self.assertIn(p, paths, r.json)
        self.assertTrue(any(e["path"].startswith("/routes/3") and "r2" in e["message"]
                            for e in r.json["errors"]), r.json)
        for e in r.json["errors"]:
            self.assertTrue(e["message"], e)
        self.assertUnchanged(before)

    def test_garbage_configs_are_400_never_500(self):
        api = self.start()
        before = self.snapshot()
        docs = ["[]", "{}", '{"listeners": 5}', '{"listeners": [{}]}', '"str"', "123", "null",
                "true", '{"routes": [null]}', '{"routes": {"a": 1}}', "[" * 5000 + "]" * 5000,
                json.dumps(dict(self.cfg, routes=[{}])),
                json.dumps(dict(self.cfg, routes=[{"id": "", "path": ""}])),
                json.dumps(dict(self.cfg, routes=[{"id": "a", "path": "/{", "response": {}}])),
                json.dumps(dict(self.cfg, routes=[{"id": "a", "path": "/a",
                                                   "response": {"status": 99}}])),
                json.dumps(dict(self.cfg, upstreams={"u": {"servers": []}})),
                json.dumps(dict(self.cfg, admin=[])), json.dumps(dict(self.cfg, workers=-1)),
                json.dumps(dict(self.cfg, workers=2 ** 70)), "\x00", "{\"a\":1,\"a\":2}",
                "\xff\xfe"]
        for d in docs:
            r = api.put("/config", d)
            self.assertStatus(r, 400, "%r -> %r" % (d[:60], r))
            self.assertTrue(r.json["errors"], r)
        self.assertUnchanged(before)
        self.assertStatus(api.get("/healthz"), 200)

    def test_head_is_get_without_body(self):
        # on one keep-alive connection: a HEAD answer carries no body bytes
        # (they would be read as the next answer)
        api = self.start()
        cfg, etag, raw = api.config()
        with Client(admin_port(self.cfg)) as c:
            for path, status in (("/config", 200), ("/healthz", 200), ("/status", 200),
                                 ("/routes/nope", 404), ("/metrics", 200)):
                r = c.request("HEAD", path)
                self.assertEqual(r.status, status, (path, r))
                self.assertEqual(r.body, b"")
                r2 = c.request("GET", "/healthz")
                self.assertEqual((r2.status, r2.body), (200, b'{"ok":true}\n'), path)
            r = c.request("HEAD", "/config")
            self.assertEqual(r.header("ETag"), etag)
            self.assertEqual(int(r.header("Content-Length")), len(raw))

    def test_config_methods(self):
        api = self.start()
        for m in ("POST", "DELETE", "PATCH"):
            r = api.request(m, "/config", b"{}")
            self.assertStatus(r, 405)
            self.assertEqual(r.header("Allow"), "GET, PUT")

    def test_unknown_endpoint(self):
        api = self.start()
        for p in ("/nope", "/configs", "/routes/a/b", "/upstreams/u/other", "/routes/%41"):
            self.assertStatus(api.get(p), 404, p)


# ---------------------------------------------------------------------------


class RoutesTest(ApiCase):
    def test_list_routes(self):
        api = self.start()
        r = api.get("/routes")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["routes"], self.cfg["routes"])

    def test_post_route(self):
        api = self.start()
        g0 = api.generation()
        r = api.post("/routes", local_route("new", "/new/{x}", methods=["GET", "POST"]))
        et = self.assertWrite(r, 201, prev_gen=g0)
        self.assertEqual(r.json["id"], "new")
        self.assertEqual(api.config()[1], et)
        self.assertEqual(self.answer("/new/1"), (200, "new"))
        self.assertEqual(self.answer("/new/1", method="POST"), (200, "new"))
        g = api.get("/routes/new")
        self.assertStatus(g, 200)
        self.assertEqual(g.json, local_route("new", "/new/{x}", methods=["GET", "POST"]))
        self.assertIn(g.json, api.get("/routes").json["routes"])
        self.assertIn(g.json, api.config()[0]["routes"])

    def test_post_existing_id_409(self):
        api = self.start()
        before = self.snapshot()
        r = api.post("/routes", local_route("ping", "/elsewhere"))
        self.assertStatus(r, 409)
        self.assertIn("exists", r.json["error"])
        self.assertUnchanged(before)
        self.assertEqual(self.answer("/elsewhere")[0], 404)

    def test_post_conflicting_route_409_names_the_other(self):
        api = self.start()
        before = self.snapshot()
        cases = [
            (local_route("c1", "/ping", methods=["GET", "POST"]), "ping", "/ping"),
            (local_route("c3", "/users/{name}", methods=["GET"]), "user", "/users/{id}"),
            ({"id": "c4", "path": "/e/*{tail}", "upstream": "u"}, "echo", "/e/*{rest}"),
        ]
        for route, other, pattern in cases:
            r = api.post("/routes", route)
            self.assertStatus(r, 409, route)
            errs = r.json["errors"]
            self.assertEqual(errs[0]["route"], other, r)
            self.assertEqual(errs[0]["pattern"], pattern, r)
            self.assertIn(other, errs[0]["message"])
        self.assertUnchanged(before)
        # two any-method routes of the same shape conflict
        self.assertWrite(api.post("/routes", local_route("any1", "/any/{a}")), 201)
        r = api.post("/routes", local_route("any2", "/any/{b}"))
        self.assertStatus(r, 409)
        self.assertEqual((r.json["errors"][0]["route"], r.json["errors"][0]["pattern"]),
                         ("any1", "/any/{a}"))
        # an any-method route coexists with explicit ones; they win for their methods
        self.assertWrite(api.post("/routes", local_route("ping-any", "/ping")), 201)
        self.assertEqual(self.answer("/ping"), (200, "ping"))
        self.assertEqual(self.answer("/ping", method="DELETE"), (200, "ping-any"))
        # disjoint methods on the same pattern do not conflict
        r = api.post("/routes", local_route("ping-post", "/ping", methods=["POST"]))
        self.assertWrite(r, 201)
        self.assertEqual(self.answer("/ping", method="POST"), (200, "ping-post"))
        self.assertEqual(self.answer("/ping"), (200, "ping"))
        # host routes conflict only on the same host
        self.assertWrite(api.post("/routes", local_route("h1", "/h", host="a.example")), 201)
        self.assertWrite(api.post("/routes", local_route("h2", "/h", host="b.example")), 201)
        r = api.post("/routes", local_route("h3", "/h", host="a.example"))
        self.assertStatus(r, 409)
        self.assertEqual(r.json["errors"][0]["route"], "h1")
        self.assertEqual(r.json["errors"][0]["pattern"], "a.example/h")
        self.assertEqual(self.answer("/h", host="b.example"), (200, "h2"))

    def test_get_put_delete_route(self):
        api = self.start()
        r = api.get("/routes/ping")
        self.assertStatus(r, 200)
        self.assertEqual(r.json, local_route("ping", "/ping", methods=["GET"]))
        # replace: new path and body
        g0 = api.generation()
        r = api.put("/routes/ping", local_route("ping", "/pong", methods=["GET"]))
        et = self.assertWrite(r, 200, prev_gen=g0)
        self.assertEqual(api.config()[1], et)
        self.assertEqual(self.answer("/pong"), (200, "ping"))
        self.assertEqual(self.answer("/ping")[0], 404)
        # the id may come from the URL alone
        r = api.put("/routes/ping", {"path": "/ping2", "response": {"body": "route=ping\n"}})
        self.assertWrite(r, 200)
        self.assertEqual(api.get("/routes/ping").json["id"], "ping")
        self.assertEqual(self.answer("/ping2"), (200, "ping"))
        self.assertEqual(self.answer("/pong")[0], 404)
        # replacing a route with itself-like pattern is no conflict
        r = api.put("/routes/user", local_route("user", "/users/{uid}", methods=["GET"]))
        self.assertWrite(r, 200)
        self.assertEqual(self.answer("/users/7"), (200, "user"))
        # delete
        g1 = api.generation()
        r = api.delete("/routes/ping")
        et = self.assertWrite(r, 200, prev_gen=g1)
        self.assertEqual(r.json["id"], "ping")
        self.assertEqual(api.config()[1], et)
        self.assertEqual(self.answer("/ping2")[0], 404)
        self.assertStatus(api.get("/routes/ping"), 404)
        self.assertNotIn("ping", [x["id"] for x in api.get("/routes").json["routes"]])

    def test_unknown_route_404(self):
        api = self.start()
        before = self.snapshot()
        self.assertStatus(api.get("/routes/nope"), 404)
        self.assertStatus(api.put("/routes/nope", local_route("nope", "/nope")), 404)
        self.assertStatus(api.delete("/routes/nope"), 404)
        self.assertUnchanged(before)
        self.assertEqual(self.answer("/nope")[0], 404)

    def test_put_route_conflict_and_mismatch(self):
        api = self.start()
        before = self.snapshot()
        r = api.put("/routes/dir", local_route("dir", "/ping", methods=["GET"]))
        self.assertStatus(r, 409)
        self.assertEqual(r.json["errors"][0]["route"], "ping")
        r = api.put("/routes/dir", local_route("other", "/x"))
        self.assertStatus(r, 400)
        self.assertEqual(r.json["errors"][0]["path"], "/id")
        self.assertUnchanged(before)
        # the failed replace left the old route in place
        self.assertEqual(self.answer("/dir/"), (200, "dir"))

    def test_invalid_route_400_with_paths(self):
        api = self.start()
        before = self.snapshot()
        r = api.post("/routes", {"id": "bad", "path": "no-slash", "upstream": "missing",
                                 "methods": ["GET", 5], "extra": True})
        self.assertStatus(r, 400)
        paths = [e["path"] for e in r.json["errors"]]
        for p in ("/path", "/upstream", "/methods/1", "/extra"):
            self.assertIn(p, paths, r.json)
        r = api.post("/routes", {"path": "/noid", "response": {"body": "x"}})
        self.assertStatus(r, 400)
        self.assertIn("/id", [e["path"] for e in r.json["errors"]])
        # two actions
        r = api.post("/routes", {"id": "two", "path": "/two", "upstream": "u",
                                 "response": {"body": "x"}})
        self.assertStatus(r, 400)
        self.assertUnchanged(before)

    def test_route_named_match(self):
        # "match" is a valid id; GET /routes/match is always the match
        # endpoint (static beats {id}), PUT and DELETE reach /routes/{id}
        api = self.start()
        self.assertWrite(api.post("/routes", local_route("match", "/m")), 201)
        self.assertStatus(api.get("/routes/match"), 400)  # a question without a query
        self.assertIn(local_route("match", "/m"), api.get("/routes").json["routes"])
        r = api.get("/routes/match?path=/m")
        self.assertEqual((r.json["status"], r.json["route"]["id"]), (200, "match"))
        self.assertWrite(api.put("/routes/match", local_route("match", "/m2")), 200)
        self.assertEqual(self.answer("/m2"), (200, "match"))
        self.assertWrite(api.delete("/routes/match"), 200)
        self.assertEqual(self.answer("/m2")[0], 404)
        self.assertStatus(api.get("/routes/match"), 400)  # the match endpoint still

    def test_routes_methods(self):
        api = self.start()
        r = api.request("DELETE", "/routes")
        self.assertStatus(r, 405)
        self.assertEqual(r.header("Allow"), "GET, POST")
        r = api.request("POST", "/routes/ping", local_route("ping", "/ping"))
        self.assertStatus(r, 405)
        self.assertEqual(r.header("Allow"), "GET, PUT, DELETE")
        # GET is the match endpoint; PUT and DELETE on the path reach /routes/{id}
        r = api.request("POST", "/routes/match?path=/")
        self.assertStatus(r, 405)
        self.assertEqual(r.header("Allow"), "GET, PUT, DELETE")


# ---------------------------------------------------------------------------


class UpstreamsTest(ApiCase):
    def backend_of(self, path):
        r = data_get(self.port, path)
        self.assertEqual(r.status, 200, r)
        return r.json()["backend"]

    def test_list_and_get(self):
        api = self.start()
        r = api.get("/upstreams")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["upstreams"], self.cfg["upstreams"])
        r = api.get("/upstreams/u")
        self.assertStatus(r, 200)
        self.assertEqual(r.json, self.cfg["upstreams"]["u"])
        self.assertStatus(api.get("/upstreams/nope"), 404)

    def test_post_upstream(self):
        api = self.start()
        g0 = api.generation()
        r = api.post("/upstreams", {"name": "v", "servers": [{"address": self.b2.addr}]})
        et = self.assertWrite(r, 201, prev_gen=g0)
        self.assertEqual(api.config()[1], et)
        self.assertEqual(api.get("/upstreams/v").json, {"servers": [{"address": self.b2.addr}]})
        self.assertWrite(api.post("/routes", {"id": "v", "path": "/v/*{r}", "upstream": "v"}),
                         201)
        self.assertEqual(self.backend_of("/v/x"), "b2")
        self.assertEqual(self.backend_of("/e/x"), "b1")
        # an existing name: 409, nothing changes
        before = self.snapshot()
        r = api.post("/upstreams", {"name": "v", "servers": [{"address": self.b1.addr}]})
        self.assertStatus(r, 409)
        self.assertUnchanged(before)
        # no name, an invalid definition, not an object
        self.assertStatus(api.post("/upstreams", {"servers": [{"address": self.b1.addr}]}), 400)
        r = api.post("/upstreams", {"name": "w", "servers": [{"address": "nowhere"}]})
        self.assertStatus(r, 400)
        self.assertTrue(any(e["path"].startswith("/upstreams/w/servers/0")
                            for e in r.json["errors"]), r.json)
        r = api.post("/upstreams", {"name": "w", "servers": [], "colour": 1})
        self.assertStatus(r, 400)
        self.assertStatus(api.post("/upstreams", [1, 2]), 400)
        self.assertUnchanged(before)

    def test_put_upstream(self):
        api = self.start()
        self.assertEqual(self.backend_of("/e/x"), "b1")
        g0 = api.generation()
        r = api.put("/upstreams/u", {"servers": [{"address": self.b2.addr}]})
        et = self.assertWrite(r, 200, prev_gen=g0)
        self.assertEqual(api.config()[1], et)
        self.assertEqual(self.backend_of("/e/x"), "b2")
        # PUT replaces and never creates (like PUT /routes/{id}): an unknown name is a 404
        # that changes nothing, valid body or not; POST /upstreams creates
        before = self.snapshot()
        r = api.put("/upstreams/fresh", {"servers": [{"address": self.b1.addr}]})
        self.assertStatus(r, 404)
        self.assertEqual(r.json["error"], "no such upstream")
        self.assertStatus(api.put("/upstreams/fresh", {"servers": []}), 404)
        self.assertUnchanged(before)
        self.assertStatus(api.get("/upstreams/fresh"), 404)
        r = api.post("/upstreams", {"name": "fresh", "servers": [{"address": self.b1.addr}]})
        self.assertWrite(r, 201)
        self.assertStatus(api.get("/upstreams/fresh"), 200)
        # an invalid one changes nothing
        before = self.snapshot()
        r = api.put("/upstreams/u", {"servers": [{"address": self.b1.addr, "weight": 0}]})
        self.assertStatus(r, 400)
        self.assertUnchanged(before)
        # a name in the body is the URL's, or the call is refused
        r = api.put("/upstreams/u", {"name": "other", "servers": [{"address": self.b1.addr}]})
        self.assertStatus(r, 400)
        self.assertEqual(r.json["errors"][0]["path"], "/name")
        self.assertUnchanged(before)
        self.assertEqual(self.backend_of("/e/x"), "b2")
        r = api.put("/upstreams/u", {"name": "u", "servers": [{"address": self.b1.addr}]})
        self.assertWrite(r, 200)
        self.assertEqual(self.backend_of("/e/x"), "b1")

    def test_every_upstream_key_served(self):
        # panic and slow_start_ms were refused as "not served yet" until the
        # gateway acted on them; now every pool key is accepted
        api = self.start()
        before = self.snapshot()
        # a bad value is still its own error, at its path
        r = api.put("/upstreams/u", {"servers": [{"address": self.b2.addr}],
                                     "slow_start_ms": -1})
        self.assertStatus(r, 400)
        self.assertTrue(any(e["path"].endswith("/slow_start_ms") for e in r.json["errors"]),
                        r.json)
        self.assertUnchanged(before)
        r = api.put("/upstreams/u", {"servers": [{"address": self.b2.addr}], "retries": 11})
        self.assertStatus(r, 400)
        self.assertTrue(any(e["path"].endswith("/retries") and "between 0 and 10" in e["message"]
                            for e in r.json["errors"]), r.json)
        self.assertEqual(self.backend_of("/e/x"), "b1")
        # what is served still is (retries, buffering and limits since issue 12),
        # and panic and slow_start_ms are too
        r = api.put("/upstreams/u", {"servers": [{"address": self.b2.addr}],
                                     "balance": "round_robin", "response_timeout_ms": 5000,
                                     "retry_on_status": [503], "max_connections": 10,
                                     "panic": True, "slow_start_ms": 3000})
        self.assertWrite(r, 200)
        self.assertEqual(self.backend_of("/e/x"), "b2")
        r = api.get("/upstreams/u")
        self.assertEqual((r.json["panic"], r.json["slow_start_ms"]), (True, 3000), r.json)

    def test_h2_pool_keys(self):
        # a pool of gRPC servers (issue 25) through the API: taken as
        # written, and each mistake refused at its path, changing nothing
        api = self.start()
        g = {"servers": [{"address": "127.0.0.1:9"}], "protocol": "h2c",
             "retry_on_grpc_status": ["unavailable", "Resource-Exhausted", 13],
             "health_check": {"type": "grpc", "service": "pkg.Svc", "interval_ms": 60000,
                              "timeout_ms": 1000}}
        self.assertWrite(api.post("/upstreams", dict(g, name="g")), 201)
        self.assertEqual(api.get("/upstreams/g").json, g)
        before = self.snapshot()
        for change, path, text in (
                ({"protocol": "h2"}, "/upstreams/g/protocol", 'it needs "tls"'),
                ({"protocol": "http2"}, "/upstreams/g/protocol", 'write "h2c"'),
                ({"retry_on_grpc_status": [0]}, "/upstreams/g/retry_on_grpc_status/0",
                 "a success, not a failure"),
                ({"protocol": "h1"}, "/upstreams/g/health_check/type",
                 'needs the pool\'s "protocol"')):
            r = api.put("/upstreams/g", dict(g, **change))
            self.assertStatus(r, 400)
            self.assertTrue(any(e["path"] == path and text in e["message"]
                                for e in r.json["errors"]), r.json)
            self.assertUnchanged(before)
        self.assertEqual(self.backend_of("/e/x"), "b1")

    def test_delete_upstream(self):
        api = self.start()
        self.assertWrite(api.post("/routes", {"id": "echo2", "path": "/e2/{x}", "upstream": "u"}),
                         201)
        before = self.snapshot()
        r = api.delete("/upstreams/u")
        self.assertStatus(r, 409)
        self.assertEqual(sorted(r.json["routes"]), ["echo", "echo2"])
        self.assertUnchanged(before)
        self.assertEqual(self.backend_of("/e/x"), "b1")
        # unused: deleted
        self.assertWrite(api.post("/upstreams", {"name": "spare",
                                                 "servers": [{"address": self.b2.addr}]}),
                         201)
        g0 = api.generation()
        r = api.delete("/upstreams/spare")
        et = self.assertWrite(r, 200, prev_gen=g0)
        self.assertEqual(api.config()[1], et)
        self.assertStatus(api.get("/upstreams/spare"), 404)
        self.assertStatus(api.delete("/upstreams/spare"), 404)
        # once its routes are gone, u can go too
        self.assertWrite(api.delete("/routes/echo"), 200)
        self.assertWrite(api.delete("/routes/echo2"), 200)
        self.assertWrite(api.delete("/upstreams/u"), 200)
        self.assertEqual(api.get("/upstreams").json["upstreams"], {})

    def test_upstream_health(self):
        api = self.start()
        for _ in range(3):
            self.backend_of("/e/x")
        r = api.get("/upstreams/u/health")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["upstream"], "u")
        self.assertEqual([s["address"] for s in r.json["servers"]], [self.b1.addr])
        self.assertEqual(r.json["servers"][0]["requests"], 3)
        self.assertGreaterEqual(r.json["servers"][0]["connects"], 1)
        self.assertStatus(api.get("/upstreams/nope/health"), 404)

    def test_route_change_keeps_upstream(self):
        api = self.start()
        self.backend_of("/e/x")
        self.assertWrite(api.post("/routes", local_route("z", "/z")), 201)
        # the pool (and its counters) survive a route-only change
        self.assertEqual(api.get("/upstreams/u/health").json["servers"][0]["requests"], 1)

    def test_upstreams_methods(self):
        api = self.start()
        r = api.request("DELETE", "/upstreams")
        self.assertStatus(r, 405)
        self.assertEqual(r.header("Allow"), "GET, POST")
        r = api.request("POST", "/upstreams/u", {"servers": []})
        self.assertStatus(r, 405)
        self.assertEqual(r.header("Allow"), "GET, PUT, DELETE")


# ---------------------------------------------------------------------------


class MatchTest(ApiCase):
    def test_match(self):
        api = self.start()
        self.assertWrite(api.post("/routes", local_route("tenant", "/t", host="{sub}.example")),
                         201)
        r = api.get("/routes/match?method=GET&path=/users/42")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["status"], 200)
        self.assertEqual(r.json["route"]["id"], "user")
        self.assertEqual(r.json["route"]["pattern"], "/users/{id}")
        self.assertEqual(r.json["params"], {"id": "42"})
        r = api.get("/routes/match?method=GET&path=/e/a/b/c")
        self.assertEqual((r.json["route"]["id"], r.json["params"]), ("echo", {"rest": "a/b/c"}))
        # host routes, the label captured
        r = api.get("/routes/match?method=GET&host=acme.example&path=/t")
        self.assertEqual(r.json["status"], 200, r)
        self.assertEqual((r.json["route"]["id"], r.json["params"]), ("tenant", {"sub": "acme"}))
        # the path is normalized like the data plane does
        r = api.get("/routes/match?method=GET&path=/users/./x/../42")
        self.assertEqual((r.json["status"], r.json["path"]), (200, "/users/42"))
        # 404 and why
        r = api.get("/routes/match?method=GET&path=/nothing")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["status"], 404)
        self.assertNotIn("route", r.json)
        self.assertTrue(r.json["why"])
        r = api.get("/routes/match?method=GET&host=other.test&path=/t")
        self.assertEqual(r.json["status"], 404)
        # 405 with the allowed methods
        r = api.get("/routes/match?method=DELETE&path=/users/42")
        self.assertEqual(r.json["status"], 405)
        self.assertEqual(r.json["allow"], "GET, HEAD")
        # trailing-slash redirects both ways
        r = api.get("/routes/match?method=GET&path=/ping/")
        self.assertEqual((r.json["status"], r.json["location"]), (301, "/ping"))
        self.assertEqual(r.json["route"]["id"], "ping")
        r = api.get("/routes/match?method=GET&path=/dir")
        self.assertEqual((r.json["status"], r.json["location"]), (301, "/dir/"))
        # the method defaults to GET
        r = api.get("/routes/match?path=/ping")
        self.assertEqual((r.json["status"], r.json["route"]["id"]), (200, "ping"))
        # the data plane agrees
        self.assertEqual(self.answer("/users/42"), (200, "user"))
        self.assertEqual(data_get(self.port, "/users/42", method="DELETE").status, 405)
        self.assertEqual(data_get(self.port, "/ping/").status, 301)

    def test_match_bad_queries(self):
        api = self.start()
        for q in ("", "?method=GET", "?path=nope", "?path=/a%zz", "?path="):
            r = api.get("/routes/match" + q)
            self.assertStatus(r, 400, q)
            self.assertTrue(r.json["error"])


# ---------------------------------------------------------------------------


class StatusMetricsTest(ApiCase):
    def test_healthz(self):
        api = self.start()
        r = api.get("/healthz")
        self.assertStatus(r, 200)
        self.assertEqual(r.json, {"ok": True})

    def test_status(self):
        api = self.start()
        r = api.get("/status")
        self.assertStatus(r, 200)
        st = r.json
        for k in ("generation", "etag", "uptime_s", "workers", "connections_open", "requests",
                  "swaps", "routes", "last_build_ms", "upstreams"):
            self.assertIn(k, st)
        self.assertEqual(st["etag"], api.config()[1])
        self.assertEqual(etag_gen(st["etag"]), st["generation"])
        self.assertEqual(st["workers"], self.cfg["workers"])
        self.assertEqual(st["routes"], len(self.cfg["routes"]))
        self.assertEqual(st["upstreams"], 1)
        self.assertGreaterEqual(st["uptime_s"], 0)
        self.assertGreaterEqual(st["last_build_ms"], 0)
        # requests count, connections open
        with Client(self.port) as c:
            for _ in range(5):
                self.assertEqual(c.request("GET", "/ping").status, 200)
            st2 = wait_for(lambda: (lambda s: s if s["requests"] >= st["requests"] + 5 else None)(
                api.get("/status").json), what="5 requests counted")
            self.assertGreaterEqual(st2["connections_open"], 1)
        # one write, one swap, one generation
        self.assertWrite(api.post("/routes", local_route("s", "/s")), 201)
        st3 = api.get("/status").json
        self.assertEqual(st3["swaps"], st["swaps"] + 1)
        self.assertEqual(st3["generation"], st["generation"] + 1)
        self.assertEqual(st3["routes"], st["routes"] + 1)

    def scrape(self, api):
        r = api.get("/metrics")
        self.assertStatus(r, 200)
        self.assertTrue(r.header("Content-Type").startswith("text/plain"), r.headers)
        return parse_prometheus(r.body.decode())

    def check_histogram(self, types, samples, name):
        self.assertEqual(types.get(name), "histogram")
        buckets = [(l["le"], v) for n, l, v in samples if n == name + "_bucket"]
        self.assertTrue(buckets)
        self.assertEqual(buckets[-1][0], "+Inf")
        les = [float(le) for le, _ in buckets]
        self.assertEqual(les, sorted(les))
        counts = [v for _, v in buckets]
        self.assertEqual(counts, sorted(counts), "buckets not cumulative: %r" % buckets)
        self.assertEqual(metric(samples, name + "_count"), counts[-1])
        self.assertIsNotNone(metric(samples, name + "_sum"))
        return counts[-1]

    def test_metrics(self):
        api = self.start()
        types, samples = self.scrape(api)
        for name, t in (("switchyard_requests_total", "counter"),
                        ("switchyard_route_requests_total", "counter"),
                        ("switchyard_connections_open", "gauge"),
                        ("switchyard_config_swaps_total", "counter"),
                        ("switchyard_config_generation", "gauge")):
            self.assertEqual(types.get(name), t, name)
        self.check_histogram(types, samples, "switchyard_request_duration_seconds")
        self.check_histogram(types, samples, "switchyard_upstream_response_seconds")
        self.assertEqual(metric(samples, "switchyard_config_generation"), api.generation())
        swaps0 = metric(samples, "switchyard_config_swaps_total")
        ping0 = metric(samples, "switchyard_route_requests_total", route="ping", code="2xx") or 0
        echo0 = metric(samples, "switchyard_route_requests_total", route="echo", code="2xx") or 0
        n4xx0 = metric(samples, "switchyard_requests_total", code="4xx")
        # data-plane requests: 4 to ping, 3 proxied, 2 misses
        with Client(self.port) as c:
            for _ in range(4):
                self.assertEqual(c.request("GET", "/ping").status, 200)
            for _ in range(3):
                self.assertEqual(c.request("GET", "/e/x").status, 200)
            for _ in range(2):
                self.assertEqual(c.request("GET", "/missing").status, 404)

        def counted():
            t, s = self.scrape(api)
            ok = ((metric(s, "switchyard_route_requests_total", route="ping", code="2xx") or 0)
                  >= ping0 + 4 and
                  (metric(s, "switchyard_route_requests_total", route="echo", code="2xx") or 0)
                  >= echo0 + 3 and
                  metric(s, "switchyard_requests_total", code="4xx") >= n4xx0 + 2)
            return (t, s) if ok else None

        types, samples = wait_for(counted, what="per-route counters")
        self.assertEqual(metric(samples, "switchyard_route_requests_total", route="ping",
                                code="2xx"), ping0 + 4)
        self.assertEqual(metric(samples, "switchyard_route_requests_total", route="echo",
                                code="2xx"), echo0 + 3)
        self.assertEqual(metric_sum(samples, "switchyard_upstream_requests_total", upstream="u"),
                         3)
        total = self.check_histogram(types, samples, "switchyard_request_duration_seconds")
        self.assertGreaterEqual(total, 9)
        self.assertGreaterEqual(
            self.check_histogram(types, samples, "switchyard_upstream_response_seconds"), 3)
        # a write: one more swap, the generation follows
        self.assertWrite(api.post("/routes", local_route("m", "/m")), 201)
        self.assertWrite(api.delete("/routes/m"), 200)
        types, samples = self.scrape(api)
        self.assertEqual(metric(samples, "switchyard_config_swaps_total"), swaps0 + 2)
        self.assertEqual(metric(samples, "switchyard_config_generation"), api.generation())
        # the counters of untouched routes survive route-level swaps
        self.assertEqual(metric(samples, "switchyard_route_requests_total", route="ping",
                                code="2xx"), ping0 + 4)

    def test_route_counters_survive_config_pushes(self):
        # a route keeps its counters across whole-config pushes and PUT
        # /routes/{id} as long as its id stays; a new id starts at zero
        api = self.start()

        def pings():
            return metric(self.scrape(api)[1], "switchyard_route_requests_total",
                          route="ping", code="2xx") or 0

        def hit(path, n):
            with Client(self.port) as c:
                for _ in range(n):
                    self.assertEqual(c.request("GET", path).status, 200)

        hit("/ping", 3)
        wait_for(lambda: pings() >= 3 or None, what="ping counted")
        # the running config with one more route (its listeners, which the
        # test keeps using, and its admin address, which needs a restart)
        cfg = json.loads(json.dumps(self.cfg))
        cfg["routes"].append(local_route("new", "/new"))
        self.assertWrite(api.put("/config", cfg), 200)
        self.assertEqual(pings(), 3)
        hit("/ping", 2)
        wait_for(lambda: pings() >= 5 or None, what="ping counted after a push")
        self.assertEqual(pings(), 5)
        # a new definition under the same id: counting goes on
        self.assertWrite(api.put("/routes/ping", local_route("ping", "/pong", methods=["GET"])),
                         200)
        hit("/pong", 1)
        wait_for(lambda: pings() >= 6 or None, what="ping counted after PUT /routes/ping")
        self.assertEqual(pings(), 6)
        # deleted, then added again: a new route
        self.assertWrite(api.delete("/routes/ping"), 200)
        self.assertWrite(api.post("/routes", local_route("ping", "/ping", methods=["GET"])), 201)
        self.assertEqual(pings(), 0)


# ---------------------------------------------------------------------------


class BodyTest(ApiCase):
    def test_body_over_limit_413(self):
        api = self.start()
        before = self.snapshot()
        for method, path in (("PUT", "/config"), ("POST", "/routes"), ("PUT", "/routes/ping")):
            with Client(admin_port(self.cfg)) as c:
                c.send(("%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n" % (method, path, 64 * 1024 * 1024 + 1))
                       .encode())
                r = c.read_response()
                self.assertEqual(r.status, 413, r)
                # in the API's JSON, before any body byte was read, then the close
                self.assertEqual(r.header("Content-Type"), "application/json")
                self.assertEqual(r.json()["error"], "request body too large")
                self.assertIn("over the limit of 67108864 bytes",
                              r.json()["errors"][0]["message"])
                self.assertEqual(r.header("Connection"), "close")
                self.assertTrue(c.wait_closed())
        # a chunked body is stopped once it passes the limit
        with Client(admin_port(self.cfg)) as c:
            c.send(b"PUT /config HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n4000001\r\n" + b"{" * 65536)
            r = c.read_response()
            self.assertEqual((r.status, r.json()["error"]), (413, "request body too large"))
        self.assertUnchanged(before)

    def test_protocol_errors_are_json(self):
        # what the HTTP layer refuses itself is answered in the API's form
        # too, and the connection closed after it
        self.start()
        cases = [
            (b"GET /status HTTP/1.1\r\nHost x\r\n\r\n", 400, "malformed request"),
            (b"GET /status HTTP/1.1\r\nHost: localhost\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431,
             "request head too large"),
            (b"PUT /routes/x HTTP/1.1\r\nHost: localhost\r\nExpect: teapot\r\nContent-Length: 2\r\n"
             b"\r\n{}", 417, "expectation not supported"),
            (b"POST /routes HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "malformed request"),
        ]
        for raw, status, error in cases:
            with self.subTest(status=status, error=error), Client(admin_port(self.cfg)) as c:
                c.send(raw)
                r = c.read_response()
                self.assertEqual((r.status, r.json()["error"]), (status, error))
                self.assertEqual(r.header("Connection"), "close")
                self.assertTrue(c.wait_closed())

    def test_strict_parser_refusals_are_json(self):
        # the admin API reads requests with the gateway's strict parser
        # (admin/http1/request.c): what a smuggler would try is refused in
        # the API's form, the connection closed after it
        self.start()
        cases = [
            (b"POST /routes HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
             b"Content-Length: 2\r\n\r\n{}", 400, "malformed request"),
            (b"POST /routes HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
             "malformed request"),
            (b"GET /status HTTP/1.1\r\nHost: localhost\r\nX: a\r\n b\r\n\r\n", 400,
             "malformed request"),
            (b"GET /status HTTP/1.1\r\n\r\n", 400, "malformed request"),
            (b"GET /status HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "HTTP version not supported"),
            (b"POST /routes HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
             501, "not implemented"),
            (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414,
             "request line too long"),
        ]
        for raw, status, error in cases:
            with self.subTest(raw=raw[:60]), Client(admin_port(self.cfg)) as c:
                c.send(raw)
                r = c.read_response()
                self.assertEqual((r.status, r.json()["error"]), (status, error))
                self.assertEqual(r.header("Content-Type"), "application/json")
                self.assertEqual(r.header("Connection"), "close")
                self.assertTrue(c.wait_closed())

    def test_connection_handling(self):
        self.start()
        port = admin_port(self.cfg)
        # keep-alive with pipelining: answers in order on one connection
        with Client(port) as c:
            c.send(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n" * 3)
            self.assertEqual([c.read_response().status for _ in range(3)], [200] * 3)
            r = c.request("HEAD", "/status")
            self.assertEqual((r.status, r.body), (200, b""))
            self.assertGreater(int(r.header("Content-Length")), 0)
            self.assertEqual(c.request("GET", "/healthz").status, 200)
        # Connection: close, and HTTP/1.0 without keep-alive: answered, closed
        for raw in (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                    b"GET /healthz HTTP/1.0\r\n\r\n"):
            with self.subTest(raw=raw), Client(port) as c:
                c.send(raw)
                r = c.read_response()
                self.assertEqual((r.status, r.json()), (200, {"ok": True}))
                self.assertEqual(r.header("Connection"), "close")
                self.assertTrue(c.wait_closed())
        # HTTP/1.0 with keep-alive stays open
        with Client(port) as c:
            c.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.header("Connection"), "keep-alive")
            self.assertEqual(c.request("GET", "/healthz").status, 200)
        # Expect: 100-continue gets its 100 before the body is sent
        with Client(port) as c:
            c.send(b"POST /routes HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
                   b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n")
            self.assertEqual(c.read_head().status, 100)
            c.send(b'{"id":"exp","path":"/exp","response":{"body":"x"}}')
            self.assertEqual(c.read_response().status, 201)

    def test_large_body_under_limit(self):
        api = self.start()
        big = "x" * (1 << 20)
        r = api.post("/routes", {"id": "big", "path": "/big", "response": {"body": big}})
        self.assertWrite(r, 201)
        resp = data_get(self.port, "/big")
        self.assertEqual((resp.status, len(resp.body)), (200, len(big)))

    def test_malformed_json_line_column(self):
        api = self.start()
        before = self.snapshot()
        text = '{\n  "id": "x",\n  "path": "/x"\n  "response": {}\n}'
        for method, path in (("PUT", "/config"), ("POST", "/routes"), ("PUT", "/routes/ping"),
                             ("POST", "/upstreams"), ("PUT", "/upstreams/u")):
            r = api.request(method, path, text)
            self.assertStatus(r, 400, path)
            self.assertEqual(r.json["error"], "malformed JSON")
            self.assertRegex(r.json["errors"][0]["message"], r"^line 4, column \d+", path)
        for text in ("{", "{\"id\": }", "nul", "{\"a\": 1,}", "{\"id\": \"a\", \"id\": \"b\"}"):
            r = api.post("/routes", text)
            self.assertStatus(r, 400, text)
            self.assertRegex(r.json["errors"][0]["message"], r"line \d+, column \d+", text)
        self.assertUnchanged(before)

    def test_non_object_route(self):
        api = self.start()
        before = self.snapshot()
        for body in ("[]", "[{\"id\": \"a\", \"path\": \"/a\", \"response\": {}}]", '"a"', "5",
                     "null", "true"):
            for method, path in (("POST", "/routes"), ("PUT", "/routes/ping")):
                r = api.request(method, path, body)
                self.assertStatus(r, 400, (path, body))
        self.assertUnchanged(before)

    def test_chunked_body(self):
        api = self.start()
        body = json.dumps(local_route("ch", "/ch")).encode()
        with Client(admin_port(self.cfg)) as c:
            c.send(b"POST /routes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n" +
                   b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            r = c.read_response()
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.answer("/ch"), (200, "ch"))


# ---------------------------------------------------------------------------


class NewcomerTest(ApiCase):
    """What a new operator hit first (issue 23): GET /, one shape for every
    write, the hints of a refused write, rounded floats, a newline after
    every JSON answer, an empty body named as such."""

    def test_index_lists_every_endpoint(self):
        api = self.start()
        r = api.get("/")
        self.assertStatus(r, 200)
        self.assertEqual(r.header("Content-Type"), "application/json")
        rows = r.json["endpoints"]
        got = {(e["method"], e["path"]) for e in rows}
        for want in (("GET", "/"), ("GET", "/config"), ("PUT", "/config"), ("POST", "/routes"),
                     ("GET", "/routes/match"), ("DELETE", "/upstreams/{name}"),
                     ("GET", "/upstreams/{name}/health"), ("GET", "/metrics"),
                     ("GET", "/healthz"), ("GET", "/status"), ("GET", "/certificates")):
            self.assertIn(want, got)
        for e in rows:
            self.assertTrue(e["does"], e)
        put = [e for e in rows if (e["method"], e["path"]) == ("PUT", "/config")][0]
        self.assertEqual(put["query"], ["dry_run", "canary", "canary_s", "canary_key",
                                        "canary_threshold", "canary_min_requests"])
        # every GET it lists that needs no parameter answers
        for e in rows:
            if e["method"] == "GET" and "{" not in e["path"] and "query" not in e:
                self.assertStatus(api.get(e["path"]), 200, e)
        self.assertStatus(api.post("/", {}), 405)

    def assertShape(self, r, status, what, changes, name=None, changed=True):
        """The one shape of a write's answer."""
        self.assertWrite(r, status)
        keys = {"changed", "what", "changes", "generation", "etag", "build_ms"}
        if name is not None:
            keys.add("id" if what == "route" else "name")
            self.assertEqual(r.json["id" if what == "route" else "name"], name, r)
        self.assertEqual(set(r.json), keys, r)
        self.assertEqual((r.json["changed"], r.json["what"]), (changed, what), r)
        zero = {"added": 0, "replaced": 0, "removed": 0}
        want = {"routes": dict(zero), "upstreams": dict(zero), "settings": []}
        for k, v in changes.items():
            if k == "settings":
                want[k] = v
            else:
                want[k[0]][k[1]] = v
        self.assertEqual(r.json["changes"], want, r)

    def test_writes_share_one_shape(self):
        api = self.start()
        R, U = "routes", "upstreams"
        self.assertShape(api.post("/routes", local_route("a", "/a")), 201, "route",
                         {(R, "added"): 1}, "a")
        self.assertShape(api.put("/routes/a", local_route("a", "/a2")), 200, "route",
                         {(R, "replaced"): 1}, "a")
        self.assertShape(api.delete("/routes/a"), 200, "route", {(R, "removed"): 1}, "a")
        pool = {"servers": [{"address": self.b2.addr}]}
        self.assertShape(api.post("/upstreams", dict(pool, name="v")), 201, "upstream",
                         {(U, "added"): 1}, "v")
        self.assertShape(api.put("/upstreams/v", dict(pool, keepalive=3)), 200, "upstream",
                         {(U, "replaced"): 1}, "v")
        self.assertShape(api.delete("/upstreams/v"), 200, "upstream", {(U, "removed"): 1}, "v")
        cfg, _, _ = api.config()
        new = dict(cfg, log_level="warn", routes=cfg["routes"][1:] + [local_route("n", "/n")])
        new["routes"][0] = dict(new["routes"][0], methods=["GET", "POST"])
        self.assertShape(api.put("/config", new), 200, "config",
                         {(R, "added"): 1, (R, "replaced"): 1, (R, "removed"): 1,
                          "settings": ["log_level"]})
        self.assertShape(api.put("/config", new), 200, "config", {}, changed=False)
        # a dry run tells what the push would change, in the same terms
        r = api.put("/config?dry_run=1", cfg)
        self.assertStatus(r, 200)
        self.assertEqual(r.json["changes"]["routes"], {"added": 1, "replaced": 1, "removed": 1})
        self.assertEqual(r.json["changes"]["settings"], ["log_level"])

    def test_refused_writes_say_what_to_do(self):
        api = self.start()
        before = self.snapshot()
        r = api.post("/routes", local_route("ping", "/other"))
        self.assertStatus(r, 409)
        self.assertEqual(r.json["errors"], [{"path": "/id", "message":
                         'route "ping" exists: PUT /routes/ping replaces it'}])
        r = api.put("/routes/nope", local_route("nope", "/nope"))
        self.assertStatus(r, 404)
        self.assertEqual(r.json["errors"][0]["message"],
                         'route "nope" does not exist: POST /routes creates it, '
                         'with {"id": "nope", ...}')
        r = api.post("/routes", {"id": "x", "path": "/x", "upstream": "uu"})
        self.assertStatus(r, 400)
        self.assertEqual(r.json["errors"], [{"path": "/upstream", "message":
                         'unknown upstream "uu" (did you mean "u"?)'}])
        self.assertUnchanged(before)

    def test_floats_rounded_and_newline(self):
        api = self.start()
        r = api.post("/routes", local_route("f", "/f"))
        self.assertRegex(r.body.decode(), r'"build_ms":\d+(\.\d{1,3})?[,}]')
        st = api.get("/status")
        self.assertRegex(st.body.decode(), r'"last_build_ms":\d+(\.\d{1,3})?[,}]')
        for path in ("/", "/config", "/routes", "/routes/ping", "/upstreams", "/status",
                     "/healthz", "/certificates", "/nothing", "/upstreams/u/health",
                     "/routes/match?path=/ping"):
            r = api.get(path)
            self.assertEqual(r.header("Content-Type"), "application/json", path)
            self.assertTrue(r.body.endswith(b"}\n"), (path, r.body[-20:]))

    def test_empty_body_named(self):
        api = self.start()
        before = self.snapshot()
        for method, path in (("PUT", "/config"), ("POST", "/routes"), ("PUT", "/routes/ping"),
                             ("POST", "/upstreams"), ("PUT", "/upstreams/u")):
            for body, what in (("", "is empty"), (" \r\n", "has nothing but white space")):
                r = api.request(method, path, body)
                self.assertStatus(r, 400, (path, body))
                self.assertEqual(r.json["error"], "empty request body")
                self.assertEqual(r.json["errors"][0]["message"],
                                 "%s %s takes a JSON object; the request body %s"
                                 % (method, path, what))
        self.assertUnchanged(before)


class RaceTest(ApiCase):
    def race(self, make_requests):
        """Runs the two requests at once; returns their responses."""
        out = [None, None]
        barrier = threading.Barrier(2)
        clients = [Admin(admin_port(self.cfg)), Admin(admin_port(self.cfg))]
        for c in clients:
            self.assertStatus(c.get("/healthz"), 200)  # connected before the race

        def run(i):
            barrier.wait()
            out[i] = make_requests[i](clients[i])

        ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for c in clients:
            c.close()
        return out

    def test_two_writers_same_if_match(self):
        api = self.start()
        for rnd in range(10):
            cfg, etag, _ = api.config()
            docs = [dict(cfg, routes=cfg["routes"] + [local_route("w%d-%d" % (rnd, i),
                                                                  "/w%d-%d" % (rnd, i))])
                    for i in range(2)]
            if rnd % 2:
                reqs = [lambda c, d=d: c.put("/config", d, headers={"If-Match": etag})
                        for d in docs]
            else:
                reqs = [lambda c, d=d: c.post("/routes", d["routes"][-1],
                                              headers={"If-Match": etag}) for d in docs]
            res = self.race(reqs)
            codes = sorted(r.status for r in res)
            self.assertEqual(codes, [200 if rnd % 2 else 201, 412], res)
            win = 0 if res[0].status != 412 else 1
            new_cfg, new_etag, _ = api.config()
            self.assertEqual(new_etag, res[win].etag)
            self.assertEqual(new_cfg, docs[win])
            self.assertEqual(etag_gen(new_etag), etag_gen(etag) + 1)
            self.assertEqual(self.answer("/w%d-%d" % (rnd, win)), (200, "w%d-%d" % (rnd, win)))
            self.assertEqual(self.answer("/w%d-%d" % (rnd, 1 - win))[0], 404)

    def test_two_deleters_same_if_match(self):
        api = self.start()
        _, etag, _ = api.config()
        res = self.race([lambda c: c.delete("/routes/ping", headers={"If-Match": etag}),
                         lambda c: c.delete("/routes/user", headers={"If-Match": etag})])
        self.assertEqual(sorted(r.status for r in res), [200, 412], res)
        ids = [r["id"] for r in api.get("/routes").json["routes"]]
        self.assertEqual(("ping" in ids) + ("user" in ids), 1, ids)


if __name__ == "__main__":
    main()
