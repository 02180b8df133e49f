#!/usr/bin/env python3
"""test_forwarding.py - what goes upstream (issue 14's forwarding half): the
request target byte for byte as the client sent it (RFC 9110 7.7), routed on
its normalized path; the normalized path instead with router.forward_path
"normalized"; a route's strip_prefix and rewrite working on the normalized
path. (test_routing.py runs its path cases in the normalized mode.) And
which upgrades are tunnelled: WebSocket by default, a route's "upgrades" as
well, h2c never (its Upgrade is dropped and the request goes up plain)."""
from urllib.parse import quote

from harness import (Client, GatewayCase, gateway_config, get, main, upstream_cfg, ws_frame,
                     ws_handshake, ws_read)


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
        cls.gw = cls.shared_gateway(gateway_config(upstreams=ups, routes=routes))
        cls.norm = cls.shared_gateway(
            gateway_config(upstreams=ups, routes=routes, router={"forward_path": "normalized"}),
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
