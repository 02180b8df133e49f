#!/usr/bin/env python3
"""test_routing.py - routing as a client sees it: hits, 404, 405 + Allow,
automatic OPTIONS, trailing-slash redirects, OPTIONS *, host routes, regexp
parameters, infix catch-alls and the catch-all host label, direct
responses, redirects, strip_prefix, rewrite, the query passed through, and
the normalized path that reaches the backend (router.forward_path
"normalized": test_forwarding.py covers the default, the target as received)."""
from harness import h1_only, Client, GatewayCase, gateway_config, get, main, upstream_cfg


def allow_set(resp):
    return {m.strip() for m in (resp.header("Allow") or "").split(",") if m.strip()}


class RoutingTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        routes = [
            {"id": "user-get", "methods": ["GET"], "path": "/api/users/{id}", "upstream": "b"},
            {"id": "users-post", "methods": ["POST"], "path": "/api/users", "upstream": "b"},
            {"id": "dir", "methods": ["GET", "POST"], "path": "/dir/", "upstream": "b"},
            {"id": "noslash", "methods": ["GET"], "path": "/noslash", "upstream": "b"},
            {"id": "hello", "path": "/hello",
             "response": {"status": 201,
                          "headers": {"X-Hello": "world", "Content-Type": "text/plain"},
                          "body": "hi there\n"}},
            {"id": "old", "path": "/old",
             "redirect": {"status": 301, "location": "https://example.com/new"}},
            {"id": "old2", "path": "/old2", "redirect": {"location": "/elsewhere"}},
            {"id": "strip", "path": "/svc/*{rest}", "strip_prefix": "/svc", "upstream": "b"},
            {"id": "rw", "path": "/users/{id}/posts/{post}",
             "rewrite": "/v2/posts/{post}/by/{id}", "upstream": "b"},
            {"id": "host-a", "host": "a.example", "path": "/h",
             "response": {"body": "exact"}},
            {"id": "host-wild", "host": "{sub}.example", "path": "/h",
             "response": {"body": "wildcard"}},
            {"id": "host-any", "path": "/h", "response": {"body": "default"}},
            {"id": "norm", "path": "/n/*{rest}", "upstream": "b"},
            {"id": "enc", "path": "/enc/{name}", "upstream": "b"},
            {"id": "purge", "methods": ["PURGEALL"], "path": "/cache/{key}", "upstream": "b"},
            {"id": "st-501", "path": "/status/501", "response": {"status": 501}},
            {"id": "st-421", "path": "/status/421", "response": {"status": 421}},
            {"id": "st-413", "path": "/status/413", "response": {"status": 413}},
            {"id": "st-299", "path": "/status/299", "response": {"status": 299}},
            # issue 14: regexp parameters, an infix catch-all, the catch-all label
            {"id": "rx-num", "path": "/rx/{id:[0-9]+}", "response": {"body": "number"}},
            {"id": "rx-name", "path": "/rx/{name}", "response": {"body": "name"}},
            {"id": "rx-up", "path": "/rxu/{id:[0-9]{2}}/{$rest}", "rewrite": "/v/{$rest}/{id}",
             "upstream": "b"},
            {"id": "infix", "path": "/assets/*{path}/thumbnail", "rewrite": "/thumb/{path}",
             "upstream": "b"},
            {"id": "host-label", "host": "*{any}.wild.example", "path": "/w",
             "rewrite": "/w/{any}", "upstream": "b"},
        ]
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)}, routes=routes,
                             router={"trailing_slash": "redirect", "auto_options": True,
                                     "forward_path": "normalized",
                                     # its path cases keep "%2F" as one segment's
                                     "escaped_slashes": "keep"})
        cls.gw = cls.shared_gateway(cfg)
        cls.port = cls.gw.port

    def get(self, target, **kw):
        return get(self.port, target, **kw)

    def echo(self, target, **kw):
        r = get(self.port, target, **kw)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("X-Backend"), "b", r)
        return r.json()

    # ---- hit / miss / 405 / OPTIONS

    def test_hit(self):
        e = self.echo("/api/users/42")
        self.assertEqual(e["path"], "/api/users/42")
        self.assertEqual(e["method"], "GET")

    def test_404(self):
        r = self.get("/api/nothing")
        self.assertEqual(r.status, 404)
        self.assertEqual(int(r.header("Content-Length")), len(r.body))
        self.assertTrue(r.has("Date"))

    def test_405_with_allow(self):
        r = self.get("/api/users/42", method="DELETE")
        self.assertEqual(r.status, 405)
        allow = allow_set(r)
        self.assertIn("GET", allow)
        self.assertIn("OPTIONS", allow)  # automatic OPTIONS is on (issue 14)
        self.assertNotIn("DELETE", allow)
        self.assertNotIn("POST", allow)
        r = self.get("/api/users", method="GET")
        self.assertEqual(r.status, 405)
        self.assertIn("POST", allow_set(r))
        self.assertNotIn("GET", allow_set(r))

    def test_auto_options(self):
        r = self.get("/api/users", method="OPTIONS")
        self.assertEqual(r.status, 200)  # fox answers 200 (issue 14)
        self.assertEqual(r.body, b"")
        self.assertIn("POST", allow_set(r))
        self.assertIn("OPTIONS", allow_set(r))
        self.assertNotIn("GET", allow_set(r))

    def test_options_asterisk(self):
        with Client(self.port) as c:
            c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n")
            r = c.read_response("OPTIONS")
            self.assertIn(r.status, (200, 204))
            allow = allow_set(r)
            self.assertIn("OPTIONS", allow)
            self.assertIn("GET", allow)
            self.assertIn("POST", allow)
            # the connection goes on
            self.assertEqual(c.request("GET", "/hello").status, 201)

    def test_options_asterisk_without_routes(self):
        """OPTIONS * on a router without routes has no method to list: 404,
        as fox answers it (issue 23), and the connection goes on."""
        g = self.own_gateway(gateway_config(router={"auto_options": True}))
        with Client(g.port) as c:
            c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n")
            r = c.read_response("OPTIONS")
            self.assertEqual(r.status, 404, r)
            self.assertIsNone(r.header("Allow"), r)
            self.assertEqual(c.request("GET", "/").status, 404)

    # ---- trailing slash

    def test_trailing_slash_redirect_get_301(self):
        r = self.get("/dir?q=1&x=%20y")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "/dir/?q=1&x=%20y")
        r = self.get("/noslash/")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "/noslash")
        r = self.get("/dir", method="HEAD")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "/dir/")

    def test_trailing_slash_redirect_post_308(self):
        with Client(self.port) as c:
            r = c.request("POST", "/dir?q=1", body=b"abc")
            self.assertEqual(r.status, 308)
            self.assertEqual(r.header("Location"), "/dir/?q=1")
            # the body was read away: the next request on the connection works
            r = c.request("POST", "/dir/?q=2", body=b"hello")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_bytes"], 5)

    # ---- hosts

    def test_host_routes(self):
        self.assertEqual(self.get("/h", host="a.example").body, b"exact")
        self.assertEqual(self.get("/h", host="a.example:8080").body, b"exact")
        self.assertEqual(self.get("/h", host="A.Example").body, b"exact")
        self.assertEqual(self.get("/h", host="b.example").body, b"wildcard")
        self.assertEqual(self.get("/h", host="other.test").body, b"default")
        # absolute-form target: its authority is the host
        self.assertEqual(self.get("http://a.example/h", host="other.test").body, b"exact")

    def test_fox_patterns(self):
        # a regexp parameter before a plain one, matched in a gateway worker
        # with the worker's own match context
        for _ in range(3):
            self.assertEqual(self.get("/rx/42").body, b"number")
            self.assertEqual(self.get("/rx/4a2").body, b"name")
        e = self.echo("/rxu/42/x")  # a regexp's braces are not the template's
        self.assertEqual(e["path"], "/v/x/42")
        self.assertEqual(self.get("/rxu/421/x").status, 404)
        e = self.echo("/assets/photos/2021/thumbnail")
        self.assertEqual(e["path"], "/thumb/photos/2021")
        self.assertEqual(self.get("/assets/thumbnail").status, 404)
        e = self.echo("/w", host="a.b.wild.example")
        self.assertEqual(e["path"], "/w/a.b")
        self.assertEqual(self.get("/w", host="wild.example").status, 404)

    # ---- direct responses and redirects

    def test_direct_response(self):
        with Client(self.port) as c:
            r = c.request("GET", "/hello")
            self.assertEqual(r.status, 201)
            self.assertEqual(r.header("X-Hello"), "world")
            self.assertEqual(r.header("Content-Type"), "text/plain")
            self.assertEqual(r.header("Content-Length"), "9")
            self.assertEqual(r.body, b"hi there\n")
            self.assertRegex(r.header("Date") or "",
                             r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$")
            r = c.request("HEAD", "/hello")
            self.assertEqual(r.status, 201)
            self.assertEqual(r.header("Content-Length"), "9")
            self.assertTrue(r.has("Date"))
            # no body after the HEAD answer: the next response parses cleanly
            r = c.request("POST", "/hello", body=b"xyz")
            self.assertEqual(r.status, 201)
            self.assertEqual(r.body, b"hi there\n")

    @h1_only("HTTP/2 has no reason phrase")
    def test_direct_response_reason_phrases(self):
        # one table (RFC 9110's phrases) for configured answers and the
        # gateway's own: a configured 501 once said "Server Error"
        for status, reason in ((501, "Not Implemented"), (421, "Misdirected Request"),
                               (413, "Content Too Large"), (299, "Unknown")):
            r = self.get("/status/%d" % status)
            self.assertEqual((r.status, r.reason), (status, reason), r)
        r = self.get("/hello", headers=[("Transfer-Encoding", "gzip, chunked")],
                     method="POST")
        self.assertEqual((r.status, r.reason), (501, "Not Implemented"), r)

    def test_redirect(self):
        r = self.get("/old")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "https://example.com/new")
        self.assertTrue(r.has("Date"))
        r = self.get("/old2")
        self.assertEqual(r.status, 302)
        self.assertEqual(r.header("Location"), "/elsewhere")

    # ---- what reaches the backend

    def test_strip_prefix(self):
        e = self.echo("/svc/foo/bar?x=1")
        self.assertEqual(e["path"], "/foo/bar")
        self.assertEqual(e["query"], "x=1")
        e = self.echo("/svc/")
        self.assertEqual(e["path"], "/")
        self.assertEqual(e["target"], "/")

    def test_rewrite_with_params(self):
        e = self.echo("/users/42/posts/7?full=1&b=%2F")
        self.assertEqual(e["path"], "/v2/posts/7/by/42")
        self.assertEqual(e["query"], "full=1&b=%2F")

    def test_query_passed_unchanged(self):
        q = "b=2&a=1&a=%20+x&empty=&flag&%41=%2f&u=%E2%82%AC"
        e = self.echo("/n/q?" + q)
        self.assertEqual(e["target"], "/n/q?" + q)
        self.assertEqual(e["query"], q)
        e = self.echo("/n/q?")
        self.assertEqual(e["target"], "/n/q?")

    def test_path_normalization(self):
        cases = [
            ("/n/a/./b/../c", "/n/a/c"),
            ("/n/a/b/../../c/.", "/n/c/"),  # RFC 3986 5.2.4 keeps the slash
            ("/n//a///b", "/n/a/b"),
            ("/n/%41bc%7e", "/n/Abc~"),
            ("/n/a/%2e%2E/b", "/n/b"),
            ("/n/a%2fb", "/n/a%2Fb"),
            ("/n/x%20y", "/n/x%20y"),
            ("/x/../n/y", "/n/y"),
            ("/../../n/z", "/n/z"),
        ]
        for raw, want in cases:
            with self.subTest(raw=raw):
                e = self.echo(raw + "?k=v")
                self.assertEqual(e["path"], want)
                self.assertEqual(e["target"], want + "?k=v")

    def test_encoded_slash_is_not_a_separator(self):
        # /enc/{name} takes one segment: a%2Fb is one segment, a/b is two
        e = self.echo("/enc/a%2Fb")
        self.assertEqual(e["path"], "/enc/a%2Fb")
        self.assertEqual(self.get("/enc/a/b").status, 404)
        self.assertEqual(self.echo("/enc/%2e%2e%2fetc")["path"], "/enc/..%2Fetc")

    def test_any_method_token(self):
        # RFC 9110 9.1: a method is any token, compared case-sensitively;
        # ones no parser table knows are routed and forwarded like the rest
        with Client(self.port) as c:
            r = c.request("PURGEALL", "/cache/k1")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["method"], "PURGEALL")
            r = c.request("FOO", "/n/x", body=b"hello")
            self.assertEqual((r.status, r.json()["method"]), (200, "FOO"), r)
            self.assertEqual(r.json()["body_bytes"], 5)
            r = c.request("get", "/api/users/42")
            self.assertEqual(r.status, 405, r)
            self.assertIn("GET", allow_set(r))
            self.assertNotIn("get", allow_set(r))
            r = c.request("GET", "/cache/k1")
            self.assertEqual(r.status, 405, r)
            self.assertIn("PURGEALL", allow_set(r))
            self.assertEqual(c.request("GET", "/api/users/7").json()["path"], "/api/users/7")

    def test_head_to_upstream_route(self):
        with Client(self.port) as c:
            r = c.request("HEAD", "/api/users/1")
            self.assertEqual(r.status, 200)
            self.assertTrue(int(r.header("Content-Length")) > 0)
            self.assertEqual(r.body, b"")
            self.assertEqual(c.request("GET", "/api/users/2").json()["path"], "/api/users/2")


if __name__ == "__main__":
    main()
