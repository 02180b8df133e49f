#!/usr/bin/env python3
"""test_forwarding.py - what goes upstream (issue 14's forwarding half): the
request target byte for byte as the client sent it (RFC 9110 7.7), routed on
its normalized path; the normalized path instead with router.forward_path
"normalized"; a route's strip_prefix and rewrite working on the normalized
path. (test_routing.py runs its path cases in the normalized mode.)"""
from harness import GatewayCase, gateway_config, get, main, upstream_cfg


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


if __name__ == "__main__":
    main()
