#!/usr/bin/env python3
"""test_forwarding.py - what goes upstream (issue 14's forwarding half): the
request target byte for byte as the client sent it (RFC 9110 7.7), routed on
its normalized path; the normalized path instead with router.forward_path
"normalized"; a route's strip_prefix and rewrite working on the normalized
path. (test_routing.py runs its path cases in the normalized mode.)
router.escaped_slashes (issue 21): an escaped slash or backslash, or "..;",
is 400 by default, routed and sent up decoded with "decode", kept with
"keep"; a deny route cannot be reached around under the first two, "%00" is
400 under all three, and a strip_prefix result never climbs above its root.
And which upgrades are tunnelled: WebSocket by default, a route's
"upgrades" as well, h2c never (its Upgrade is dropped and the request goes up
plain)."""
import json
import socket
import urllib.error
import urllib.request
from urllib.parse import quote

from harness import (h1_only, Client, GatewayCase, gateway_config, get, main, upstream_cfg, wait_for,
                     ws_frame, ws_handshake, ws_read)


class ForwardPathTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        routes = [
            {"id": "raw", "path": "/raw/*{rest}", "upstream": "b"},
            {"id": "enc", "path": "/enc/{name}", "upstream": "b"},
            {"id": "strip", "path": "/svc/*{rest}", "strip_prefix": "/svc", "upstream": "b"},
            {"id": "rw", "path": "/users/{id}", "rewrite": "/v2/{id}", "upstream": "b"},
        ]
        ups = {"b": upstream_cfg(cls.b)}
        # "keep": the cases below hold escaped slashes (EscapedSlashesTest has the default)
        cls.gw = cls.shared_gateway(gateway_config(upstreams=ups, routes=routes,
                                                   router={"escaped_slashes": "keep"}))
        cls.norm = cls.shared_gateway(
            gateway_config(upstreams=ups, routes=routes,
                           router={"forward_path": "normalized", "escaped_slashes": "keep"}),
            name="norm")

    def echo(self, gw, target):
        r = get(gw.port, target)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("X-Backend"), "b", r)
        return r.json()

    # (sent, routed as, normalized target)
    CASES = [
        ("/raw/a%2Fb?q=%7E&x=%2f", "/raw/a%2Fb?q=%7E&x=%2f"),
        ("/raw/%7Euser/%41", "/raw/~user/A"),
        ("/raw//a///b", "/raw/a/b"),
        ("/raw/a;v=1/b;p?k", "/raw/a;v=1/b;p?k"),
        ("/raw/a/./b/../c", "/raw/a/c"),
        ("/raw/x/%2e%2E/y", "/raw/y"),
        ("/x/../raw/z?", "/raw/z?"),
        ("/enc/%2e%2e%2fetc", "/enc/..%2Fetc"),
    ]

    def test_as_received_by_default(self):
        for sent, _ in self.CASES:
            with self.subTest(sent=sent):
                self.assertEqual(self.echo(self.gw, sent)["target"], sent)

    def test_normalized_mode(self):
        for sent, want in self.CASES:
            with self.subTest(sent=sent):
                self.assertEqual(self.echo(self.norm, sent)["target"], want)

    def test_absolute_form_goes_up_in_origin_form(self):
        self.assertEqual(self.echo(self.gw, "http://h.example/raw//%7e?a")["target"], "/raw//%7e?a")

    def test_rewrites_send_the_normalized_result(self):
        for gw in (self.gw, self.norm):
            e = self.echo(gw, "/svc//a/./b%7E?q=%7E")
            self.assertEqual(e["target"], "/a/b~?q=%7E")
            e = self.echo(gw, "/users/%41b?x=%2F")
            self.assertEqual(e["target"], "/v2/Ab?x=%2F")


# the deny route: /secret is answered 403, whatever else serves /api
DENY_ROUTES = [
    {"id": "api", "path": "/api/*{rest}", "upstream": "api"},
    {"id": "secret", "path": "/secret/*{rest}", "response": {"status": 403, "body": "denied\n"}},
    {"id": "secret-root", "path": "/secret", "response": {"status": 403, "body": "denied\n"}},
    {"id": "s", "path": "/s/*{rest}", "strip_prefix": "/s", "upstream": "api"},
    {"id": "rw", "path": "/rw/*{rest}", "rewrite": "/v2/{rest}", "upstream": "api"},
]

# a ".." after a segment with no name but ";params": the router pops that
# segment, a servlet container drops the params, merges "//" and pops "api"
NAMELESS_POPS = ["/api/;x/../secret/a", "/api/;/../secret/a"]

# the ways past the deny route: "..%2f", "..%5c", "..\\" and "..;/"
BYPASSES = ["/api/..%2fsecret/x", "/api/..%2Fsecret/x", "/api/..%5csecret/x",
            "/api/..%5Csecret/x", "/api/..\\secret/x", "/api/%2e%2e%2fsecret/x",
            "/api/..;/secret/x", "/api/.;/..;/secret/x"]


class EscapedSlashesTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("api")
        ups = {"api": upstream_cfg(cls.b)}
        cls.default = cls.shared_gateway(gateway_config(upstreams=ups, routes=DENY_ROUTES),
                                         name="default")
        cls.decode = cls.shared_gateway(
            gateway_config(upstreams=ups, routes=DENY_ROUTES,
                           router={"escaped_slashes": "decode"}), name="decode")
        cls.keep = cls.shared_gateway(
            gateway_config(upstreams=ups, routes=DENY_ROUTES, router={"escaped_slashes": "keep"}),
            name="keep")

    def answer(self, gw, target):
        """(status, target the backend got or None)"""
        r = get(gw.port, target)
        if r.status == 200:
            self.assertEqual(r.header("X-Backend"), "api", r)
            return 200, r.json()["target"]
        return r.status, None

    def test_default_refuses_every_bypass(self):
        for target in BYPASSES:
            with self.subTest(target=target):
                self.assertEqual(self.answer(self.default, target), (400, None))
        # and an escaped slash with no dot: /secret%2Fx would be /secret/x to the backend
        self.assertEqual(self.answer(self.default, "/secret%2Fx"), (400, None))
        self.assertEqual(self.answer(self.default, "/api/a%2Fb"), (400, None))

    def test_a_dot_dot_after_a_nameless_segment_is_refused(self):
        for target in NAMELESS_POPS:
            with self.subTest(target=target):
                self.assertEqual(self.answer(self.default, target), (400, None))
                self.assertEqual(self.answer(self.decode, target), (400, None))
                # keep: routed as /api/secret/a, sent up as received (docs/guides/routing.md)
                self.assertEqual(self.answer(self.keep, target), (200, target))
        # a nameless segment nothing pops, or a named one popped: as before
        self.assertEqual(self.answer(self.default, "/api/;x/a"), (200, "/api/;x/a"))
        self.assertEqual(self.answer(self.default, "/api/a;x/../b"), (200, "/api/a;x/../b"))
        self.assertEqual(self.answer(self.default, "/api/;x/../../secret/a")[0], 400)

    def test_rewrite_never_sends_a_climbing_parameter(self):
        self.assertEqual(self.answer(self.default, "/rw/a/b;v=1"), (200, "/v2/a/b;v=1"))
        for target in ("/rw/..%2f..%2fsecret", "/rw/..;x/y", "/rw/a%2F..%2F..%2Fx",
                       "/rw/..%5Cx"):
            with self.subTest(target=target):
                self.assertEqual(self.answer(self.keep, target), (400, None))
        self.assertEqual(self.answer(self.keep, "/rw/a%2F..%2Fb"), (200, "/v2/a%2F..%2Fb"))

    @h1_only("a refused HTTP/1.1 request closes its connection (Connection: close)")
    def test_default_refused_request_closes(self):
        with Client(self.default.port) as c:
            r = c.request("GET", "/api/..%2fsecret/x")
            self.assertEqual(r.status, 400, r)
            self.assertEqual(r.header("Connection"), "close")
            self.assertClosed(c)

    def test_default_serves_plain_paths_as_before(self):
        self.assertEqual(self.answer(self.default, "/api/a/./b;v=1/%7e?q=%2F"),
                         (200, "/api/a/./b;v=1/%7e?q=%2F"))
        self.assertEqual(self.answer(self.default, "/api/../secret/x")[0], 403)
        self.assertEqual(self.answer(self.default, "/api/%2e%2e/secret/x")[0], 403)

    def test_decode_routes_on_the_decoded_path(self):
        for target in BYPASSES:
            with self.subTest(target=target):
                want = 400 if ";" in target else 403  # "..;" is refused, the rest is /secret/x
                self.assertEqual(self.answer(self.decode, target), (want, None))
        self.assertEqual(self.answer(self.decode, "/secret%2Fx")[0], 403)

    def test_decode_sends_up_what_it_routed(self):
        self.assertEqual(self.answer(self.decode, "/api/a%2Fb%5Cc\\d?q=%2F"),
                         (200, "/api/a/b/c/d?q=%2F"))
        self.assertEqual(self.answer(self.decode, "/x/..%2Fapi/y"), (200, "/api/y"))
        # nothing decoded: the target as received, as before
        self.assertEqual(self.answer(self.decode, "/api//a/%7e"), (200, "/api//a/%7e"))

    def test_keep_is_the_old_behaviour(self):
        # routed as one segment, sent up as received: a backend that decodes %2F
        # before it resolves dot segments serves /secret/x (docs/guides/routing.md says so)
        self.assertEqual(self.answer(self.keep, "/api/..%2fsecret/x"),
                         (200, "/api/..%2fsecret/x"))
        self.assertEqual(self.answer(self.keep, "/api/..;/secret/x"), (200, "/api/..;/secret/x"))

    def test_strip_prefix_never_sends_a_climb(self):
        # the repro: /s/..%2f..%2fsecret went up as /..%2F..%2Fsecret
        self.assertEqual(self.answer(self.default, "/s/..%2f..%2fsecret"), (400, None))
        self.assertEqual(self.answer(self.decode, "/s/..%2f..%2fsecret"), (403, None))
        for target in ("/s/..%2f..%2fsecret", "/s/..%5Cx", "/s/..\\x", "/s/..;x/y",
                       "/s/.%2F..%2Fx", "/s/a%2F..%2F..%2Fsecret"):
            with self.subTest(target=target):
                self.assertEqual(self.answer(self.keep, target), (400, None))
        # what stays below the root still goes up
        self.assertEqual(self.answer(self.keep, "/s/a%2F..%2Fb"), (200, "/a%2F..%2Fb"))
        self.assertEqual(self.answer(self.keep, "/s//..foo"), (200, "/..foo"))
        self.assertEqual(self.answer(self.decode, "/s/a%2Fb"), (200, "/a/b"))

    def test_nul_and_control_escapes_are_400_everywhere(self):
        for gw in (self.default, self.decode, self.keep):
            for target in ("/api/a%00b", "/api/%00", "/api/x%0d%0aSet-Cookie:%20a=b", "/api/%7f",
                           "/s/%00"):
                with self.subTest(gw=gw.name, target=target):
                    self.assertEqual(self.answer(gw, target), (400, None))
            # in the query it is the backend's to judge, as with nginx
            self.assertEqual(self.answer(gw, "/api/a?x=%00"), (200, "/api/a?x=%00"))

    def test_routes_match_says_the_same(self):
        def admin_up(gw):
            host, port = gw.cfg["admin"]["address"].rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                return True
            except OSError:
                return False

        def match(gw, path):
            url = "http://%s/routes/match?path=%s" % (gw.cfg["admin"]["address"],
                                                      quote(path, safe="/"))
            # the admin API opens after the listeners the harness waits for
            wait_for(lambda: admin_up(gw), what="admin API of " + gw.name)
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        status, body = match(self.default, "/api/..%2fsecret/x")
        self.assertEqual(status, 400, body)
        self.assertIn("escaped_slashes", body["error"])
        status, body = match(self.decode, "/api/..%2fsecret/x")
        self.assertEqual((status, body["path"], body["route"]["id"]), (200, "/secret/x", "secret"))
        status, body = match(self.keep, "/api/..%2fsecret/x")
        self.assertEqual((status, body["route"]["id"]), (200, "api"))
        self.assertEqual(match(self.keep, "/api/%00")[0], 400)


class EscapedSlashesLiveTest(GatewayCase):
    def test_a_reload_applies_to_open_connections(self):
        b = self.own_backend("api")
        cfg = gateway_config(upstreams={"api": upstream_cfg(b)}, routes=DENY_ROUTES)
        gw = self.own_gateway(cfg)
        with Client(gw.port) as c:
            self.assertEqual(c.request("GET", "/api/x").status, 200)
            cfg = dict(cfg, router={"escaped_slashes": "decode"})
            gw.reload(cfg)
            # new connections show when the new snapshot serves
            wait_for(lambda: get(gw.port, "/api/a%2Fb").status == 200, what="decode in force")
            # the connection opened before the reload follows it too
            r = c.request("GET", "/api/a%2Fb")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["target"], "/api/a/b")
            self.assertEqual(c.request("GET", "/api/..%2fsecret/x").status, 403)


H2C = [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
       ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")]


class UpgradeTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        routes = [
            {"id": "foo", "path": "/foo/*{r}", "upgrades": ["websocket", "foo"], "upstream": "b"},
            {"id": "all", "path": "/*{r}", "upstream": "b"},
        ]
        cls.gw = cls.shared_gateway(gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                                                   routes=routes))

    def fields(self, echo, name):
        return [v for k, v in echo["headers"] if k.lower() == name.lower()]

    def test_websocket_still_tunnelled(self):
        for target in ("/ws", "/foo/ws"):
            with Client(self.gw.port) as c:
                r, accept = ws_handshake(c, target)
                self.assertEqual(r.status, 101, r)
                self.assertEqual(r.header("Sec-WebSocket-Accept"), accept)
                c.send(ws_frame(b"through"))
                self.assertEqual(ws_read(c), (1, True, b"through"))

    def test_h2c_goes_up_as_a_plain_request(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/h2c?x=1", headers=H2C)
            self.assertEqual(r.status, 200, r)
            e = r.json()
            self.assertEqual(self.fields(e, "Upgrade"), [])
            self.assertEqual(self.fields(e, "HTTP2-Settings"), [])
            self.assertEqual(self.fields(e, "Connection"), [])
            # the connection stays HTTP/1.1
            self.assertEqual(c.request("GET", "/after").json()["target"], "/after")

    def test_h2c_101_from_the_backend_is_no_tunnel(self):
        # a backend that switches anyway was sent no Upgrade: 502, never a raw channel
        data = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
        with Client(self.gw.port) as c:
            r = c.request("GET", "/x?mode=raw&hold=1&data=" + quote(data, safe=""), headers=H2C)
            self.assertEqual(r.status, 502, r)

    def test_route_upgrades_allow_more(self):
        hs = [("Connection", "Upgrade"), ("Upgrade", "foo")]
        e = get(self.gw.port, "/foo/x", headers=hs).json()
        self.assertEqual(self.fields(e, "Upgrade"), ["foo"])
        self.assertEqual(self.fields(e, "Connection"), ["upgrade"])
        e = get(self.gw.port, "/other", headers=hs).json()  # the default: websocket only
        self.assertEqual(self.fields(e, "Upgrade"), [])
        e = get(self.gw.port, "/foo/x", headers=H2C).json()  # never h2c
        self.assertEqual(self.fields(e, "Upgrade"), [])


if __name__ == "__main__":
    main()
