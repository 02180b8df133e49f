#!/usr/bin/env python3
"""test_client_ip.py - client_ip and a route's header actions (issue 14).

client_ip: the address a request is from,
derived by the strategy of the listener it came in on (or the top-level
one), end to end: what the upstream gets in X-Real-IP and what the access
log's "client" says, for each source, with spoofed X-Forwarded-For,
Forwarded and X-Real-IP from a peer that is not trusted. Every client here
is 127.0.0.1: a listener trusts it or not through its client_ip.trusted.

Header actions: request_headers and response_headers set (every copy
replaced), add and remove (every copy), with placeholders, on requests the
backend echoes and on its responses; a direct response is not touched;
refused configs name their JSON path."""
import json
import socket

from harness import Client, GatewayCase, free_port, gateway_config, main, upstream_cfg, wait_for

SPOOF = [("X-Forwarded-For", "6.6.6.6"), ("Forwarded", "for=6.6.6.6"), ("X-Real-IP", "6.6.6.6"),
         ("CF-Connecting-IP", "6.6.6.6")]


def values(echo, name):
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


def listener(source, trusted=None):
    ci = {"source": source}
    if trusted is not None:
        ci["trusted"] = trusted
    return {"address": "127.0.0.1:%d" % free_port(), "client_ip": ci}


class ClientIpTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.log = cls.tmp.file("access.log")
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             access_log=cls.log, trusted_proxies=["127.0.0.1/32"],
                             client_ip={"source": "x_forwarded_for"})
        # the top-level client_ip on listener 0 (trusting trusted_proxies),
        # a listener's own on the others
        cfg["listeners"] += [listener("forwarded"), listener("header:CF-Connecting-IP"),
                             listener("x_forwarded_for", ["10.0.0.0/8"]), listener("peer")]
        cls.ports = [int(l["address"].rsplit(":", 1)[1]) for l in cfg["listeners"]]
        cls.gw = cls.shared_gateway(cfg)
        cls.plain = cls.shared_gateway(
            gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                           routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}]),
            name="plain")

    def send(self, listener, headers, target="/e"):
        """The upstream's view of one request on <listener>: (X-Real-IP
        values, X-Forwarded-For values, request id)."""
        with Client(self.ports[listener]) as c:
            r = c.request("GET", target, headers=headers)
        self.assertEqual(r.status, 200, r)
        e = r.json()
        return values(e, "X-Real-IP"), values(e, "X-Forwarded-For"), r.header("X-Request-Id")

    def logged_client(self, reqid):
        def find():
            try:
                with open(self.log) as f:
                    for line in f:
                        rec = json.loads(line)
                        if rec["request_id"] == reqid:
                            return rec
            except OSError:
                return None
            return None
        return wait_for(find, what="the access-log line of " + reqid)["client"]

    def test_x_forwarded_for_rightmost_untrusted(self):
        real, xff, rid = self.send(0, [("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 127.0.0.1")])
        self.assertEqual(real, ["203.0.113.7"])
        # X-Forwarded-For itself is trusted_proxies' business: kept and appended to
        self.assertEqual(xff, ["6.6.6.6, 203.0.113.7, 127.0.0.1, 127.0.0.1"])
        self.assertEqual(self.logged_client(rid), "203.0.113.7")
        # several fields are one list; a client's own X-Real-IP is replaced
        real, _, _ = self.send(0, [("X-Forwarded-For", "198.51.100.1"), ("X-Real-IP", "6.6.6.6"),
                                   ("X-Forwarded-For", "2001:db8::7")])
        self.assertEqual(real, ["2001:db8::7"])
        # no list: the peer (with its port in the log)
        with Client(self.ports[0]) as c:
            port = c.local_port()
            r = c.request("GET", "/e")
        self.assertEqual(values(r.json(), "X-Real-IP"), ["127.0.0.1"])
        self.assertEqual(self.logged_client(r.header("X-Request-Id")), "127.0.0.1:%d" % port)

    def test_forwarded(self):
        real, _, rid = self.send(1, [("Forwarded",
                                      'for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=http')])
        self.assertEqual(real, ["2001:db8:cafe::17"])
        self.assertEqual(self.logged_client(rid), "2001:db8:cafe::17")
        # an obfuscated hop ends the walk at the trusted hop right of it
        real, _, _ = self.send(1, [("Forwarded", "for=192.0.2.43, for=_hidden, for=127.0.0.1")])
        self.assertEqual(real, ["127.0.0.1"])
        # X-Forwarded-For means nothing to this listener
        real, _, _ = self.send(1, [("X-Forwarded-For", "198.51.100.1")])
        self.assertEqual(real, ["127.0.0.1"])

    def test_one_header_from_a_trusted_peer(self):
        real, _, rid = self.send(2, [("CF-Connecting-IP", "198.51.100.77"),
                                     ("X-Real-IP", "6.6.6.6")])
        self.assertEqual(real, ["198.51.100.77"])
        self.assertEqual(self.logged_client(rid), "198.51.100.77")
        real, _, _ = self.send(2, [("CF-Connecting-IP", "198.51.100.77"),
                                   ("CF-Connecting-IP", "198.51.100.78")])
        self.assertEqual(real, ["127.0.0.1"])  # two copies: neither

    def test_spoofed_headers_from_an_untrusted_peer(self):
        for i in (3, 4):
            with self.subTest(listener=i):
                real, xff, rid = self.send(i, SPOOF)
                self.assertEqual(real, ["127.0.0.1"])
                self.assertTrue(self.logged_client(rid).startswith("127.0.0.1:"))

    def test_without_client_ip_nothing_changes(self):
        # no client_ip: no X-Real-IP of ours, the client's passes as before
        with Client(self.plain.port) as c:
            r = c.request("GET", "/e", headers=[("X-Real-IP", "6.6.6.6")])
        e = r.json()
        self.assertEqual(values(e, "X-Real-IP"), ["6.6.6.6"])
        self.assertEqual(values(e, "X-Forwarded-For"), ["127.0.0.1"])


class HeaderActionsTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        routes = [
            {"id": "acts", "path": "/t/{tenant}/*{rest}", "upstream": "b",
             "request_headers": {
                 "set": {"X-Tenant": "{tenant}", "User-Agent": "switchyard for {tenant}",
                         "Host": "{tenant}.internal"},
                 "add": {"X-Trace": "{request_id}@{host} from {client_ip}", "X-Literal": "{{x}"},
                 "remove": ["Cookie", "X-Debug"]},
             "response_headers": {
                 "set": {"Cache-Control": "no-store", "X-Served-For": "{tenant}"},
                 "add": {"X-Echo-Id": "{request_id}"},
                 "remove": ["Server", "X-Internal"]}},
            {"id": "plain", "path": "/p/*{rest}", "upstream": "b"},
            {"id": "local", "path": "/local", "response": {"body": "here\n"}},
        ]
        cls.cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)}, routes=routes,
                                 client_ip={"source": "x_forwarded_for",
                                            "trusted": ["127.0.0.1/32"]})
        cls.gw = cls.shared_gateway(cls.cfg)

    def test_request_headers(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/t/acme/x", headers=[
                ("User-Agent", "curl/8"), ("user-agent", "other"), ("Cookie", "a=1"),
                ("X-Debug", "1"), ("COOKIE", "b=2"), ("X-Tenant", "forged"), ("X-Keep", "k"),
                ("X-Request-Id", "rid-7"), ("X-Forwarded-For", "203.0.113.5")])
        self.assertEqual(r.status, 200, r)
        e = r.json()
        self.assertEqual(values(e, "X-Tenant"), ["acme"])
        self.assertEqual(values(e, "User-Agent"), ["switchyard for acme"])
        self.assertEqual(values(e, "Host"), ["acme.internal"])
        self.assertEqual(values(e, "X-Trace"), ["rid-7@localhost from 203.0.113.5"])
        self.assertEqual(values(e, "X-Literal"), ["{x}"])
        self.assertEqual(values(e, "Cookie"), [])
        self.assertEqual(values(e, "X-Debug"), [])
        self.assertEqual(values(e, "X-Keep"), ["k"])
        # a route without actions passes everything as before
        with Client(self.gw.port) as c:
            r = c.request("GET", "/p/x", headers=[("Cookie", "a=1"), ("User-Agent", "curl/8")])
        e = r.json()
        self.assertEqual(values(e, "Cookie"), ["a=1"])
        self.assertEqual(values(e, "User-Agent"), ["curl/8"])
        self.assertEqual(values(e, "Host"), ["localhost"])

    def test_response_headers(self):
        q = ("mode=headers&h=Server:backend/1&h=X-Internal:secret&h=Cache-Control:max-age%3D60"
             "&h=Cache-Control:public&h=X-Other:kept")
        with Client(self.gw.port) as c:
            r = c.request("GET", "/t/acme/y?" + q)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers_all("Cache-Control"), ["no-store"])
            self.assertEqual(r.headers_all("X-Served-For"), ["acme"])
            self.assertEqual(r.headers_all("X-Echo-Id"), [r.header("X-Request-Id")])
            self.assertFalse(r.has("Server"))
            self.assertFalse(r.has("X-Internal"))
            self.assertEqual(r.header("X-Other"), "kept")
            # the connection goes on
            self.assertEqual(c.request("GET", "/t/acme/z").status, 200)
            # a route without them, and a direct response, are untouched
            r = c.request("GET", "/p/y?" + q)
            self.assertEqual(r.header("Server"), "backend/1")
            self.assertEqual(r.headers_all("Cache-Control"), ["max-age=60", "public"])
            r = c.request("GET", "/local")
            self.assertFalse(r.has("X-Served-For"))

    def test_refused_configs_name_their_path(self):
        admin = int(self.cfg["admin"]["address"].rsplit(":", 1)[1])

        def admin_up():
            try:
                socket.create_connection(("127.0.0.1", admin), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(admin_up, what="the admin API")  # it may open after the listeners
        cases = [
            ({"request_headers": {"set": {"X-A": "a\r\nX-B: b"}}},
             "/routes/0/request_headers/set/X-A"),
            ({"request_headers": {"set": {"Connection": "close"}}},
             "/routes/0/request_headers/set/Connection"),
            ({"response_headers": {"remove": ["Transfer-Encoding"]}},
             "/routes/0/response_headers/remove/0"),
            ({"response_headers": {"add": {"X-A": "{nope}"}}},
             "/routes/0/response_headers/add/X-A"),
            ({"request_headers": {"add": {"Bad Name": "x"}}},
             "/routes/0/request_headers/add/Bad Name"),
        ]
        for extra, path in cases:
            with self.subTest(path=path):
                route = {"id": "x", "path": "/x/{id}", "upstream": "b"}
                route.update(extra)
                cfg = dict(self.cfg, routes=[route])
                with Client(admin) as c:
                    r = c.request("PUT", "/config?dry_run=1", body=json.dumps(cfg).encode(),
                                  headers=[("Content-Type", "application/json")])
                self.assertEqual(r.status, 400, r)
                body = r.json()
                self.assertIn(path, [e["path"] for e in body["errors"]], body)

if __name__ == "__main__":
    main()
