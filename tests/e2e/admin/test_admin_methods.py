#!/usr/bin/env python3
"""test_admin_methods.py - every method on every admin endpoint: the methods
an endpoint serves reach its handler, and every other one is a 405 whose
Allow lists the path's methods, as JSON like every admin error. The admin
paths are routed by Switchyard's own router (admin/api.c), so /routes/match
is the static pattern and PUT or DELETE on it reach /routes/{id}. No served
write changes anything here: each carries an If-Match that is not the live
ETag (412)."""
from adminlib import AdminCase, gateway_config, local_route, main

# concrete path -> the methods its patterns serve (HEAD comes with GET)
ENDPOINTS = {
    "/": {"GET"},  # the index of the endpoints (issue 23)
    "/healthz": {"GET"},
    "/config": {"GET", "PUT"},
    "/routes": {"GET", "POST"},
    "/routes/match?path=/ping": {"GET", "PUT", "DELETE"},
    "/routes/ping": {"GET", "PUT", "DELETE"},
    "/upstreams": {"GET", "POST"},
    "/upstreams/u": {"GET", "PUT", "DELETE"},
    "/upstreams/u/health": {"GET"},
    "/status": {"GET"},
    "/metrics": {"GET"},
    "/certificates": {"GET"},
}
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PURGE",
           "PROPFIND", "LINK"]
ORDER = ["GET", "POST", "PUT", "DELETE", "PATCH"]  # the order Allow lists them in
STALE = {"If-Match": '"0-0000000000000000"'}
# served writes answer 412 for the stale If-Match, except where the query is
# checked first: PUT and DELETE on /routes/match reach /routes/{id}, which
# takes no query parameter, so ?path= is a 400 there before anything else
NO_SUCH = {("PUT", "/routes/match?path=/ping"): 400, ("DELETE", "/routes/match?path=/ping"): 400}


class MethodsTest(AdminCase):
    def setUp(self):
        super().setUp()
        cfg = gateway_config(upstreams={"u": {"servers": [{"address": "127.0.0.1:9"}]}},
                             routes=[local_route("ping", "/ping")])
        self.api = self.admin_for(self.own_gateway(cfg))

    def call(self, method, path):
        body = b"{}" if method in ("POST", "PUT", "PATCH", "PURGE", "PROPFIND", "LINK") else None
        return self.api.request(method, path, body, headers=STALE)

    def test_every_method_on_every_endpoint(self):
        gen = self.api.generation()
        for path, served in ENDPOINTS.items():
            allow = ", ".join(m for m in ORDER if m in served)
            for method in METHODS:
                what = "%s %s" % (method, path)
                r = self.call(method, path)
                if method in served or (method == "HEAD" and "GET" in served):
                    self.assertNotEqual(r.status, 405, what)
                    if method in ("GET", "HEAD"):
                        self.assertEqual(r.status, 200, (what, r))
                    else:  # a write with a stale If-Match
                        self.assertEqual(r.status, NO_SUCH.get((method, path), 412), (what, r))
                    continue
                self.assertEqual(r.status, 405, (what, r))
                self.assertEqual(r.header("Allow"), allow, what)
                self.assertEqual(r.header("Content-Type"), "application/json", what)
                self.assertEqual(r.json, {"error": "method not allowed"}, what)
                self.assertEqual(int(r.header("Content-Length")), len(r.body), what)
        # nothing was written
        self.assertEqual(self.api.generation(), gen)
        self.assertEqual(self.api.get("/routes/ping").json, local_route("ping", "/ping"))

    def test_unknown_paths_are_404_for_every_method(self):
        for path in ("/nope", "/config/", "/routes/", "/routes/a/b", "/upstreams/u/x",
                     "/statusx", "//status"):
            for method in METHODS:
                r = self.call(method, path)
                self.assertEqual(r.status, 404, (method, path, r))
                if method != "HEAD":
                    self.assertEqual(r.json, {"error": "no such endpoint"}, (method, path))


if __name__ == "__main__":
    main()
