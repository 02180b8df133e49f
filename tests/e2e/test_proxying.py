#!/usr/bin/env python3
"""test_proxying.py - what the gateway does to requests and responses on the
way through: hop-by-hop fields, Host, X-Forwarded-*, X-Request-Id, request
and response bodies in every framing, interim responses, Expect:
100-continue, and the access log (and the lines a full disk makes it lose)."""
import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import threading
import time
from urllib.parse import quote

from harness import (h1_only, TIMEOUT, Client, GatewayCase, HeadServer, RssWatch, asan_env, build_request,
                     chunked, gateway_config, get, main, metrics_text, pattern_bytes,
                     pattern_sha256, upstream_cfg, wait_for)

HOP = ("connection", "keep-alive", "te", "trailer", "proxy-connection", "upgrade")


def names(echo):
    return [k.lower() for k, _ in echo["headers"]]


def values(echo, name):
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


class ProxyTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        ups = {"b": upstream_cfg(cls.b)}
        routes = [{"id": "all", "path": "/*{rest}", "upstream": "b"},
                  {"id": "local", "path": "/local", "response": {"body": "local\n"}}]
        cls.gw = cls.shared_gateway(gateway_config(upstreams=ups, routes=routes), name="untrusted")
        cls.tgw = cls.shared_gateway(gateway_config(upstreams=ups, routes=routes,
                                                    trusted_proxies=["127.0.0.1/32"]),
                                     name="trusted")

    def echo(self, c, method="GET", target="/e", headers=None, body=None, **kw):
        r = c.request(method, target, headers=headers, body=body, **kw)
        self.assertEqual(r.status, 200, r)
        return r, r.json()

    # ---- hop-by-hop

    def test_hop_by_hop_request_fields_removed(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, headers=[
                ("Connection", "X-Foo, x-bar"), ("Connection", "keep-alive"),
                ("X-Foo", "1"), ("X-Bar", "2"), ("X-Keep", "3"),
                ("Keep-Alive", "timeout=5"), ("TE", "trailers"), ("Trailer", "X-T"),
                ("Proxy-Connection", "keep-alive"), ("Upgrade", "h2c")])
            got = names(e)
            for h in HOP + ("x-foo", "x-bar"):
                self.assertNotIn(h, got, e["headers"])
            self.assertEqual(values(e, "X-Keep"), ["3"])
            # the client connection is still usable
            self.assertEqual(self.echo(c)[1]["conn_requests"], e["conn_requests"] + 1)

    def test_connection_cannot_remove_framing_fields(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, "POST", headers=[("Connection", "Content-Length, Host")],
                             body=b"hello")
            self.assertEqual(e["body_bytes"], 5)
            self.assertEqual(values(e, "Content-Length"), ["5"])
            self.assertEqual(values(e, "Host"), ["localhost"])

    def test_hop_by_hop_response_fields_removed(self):
        q = ("mode=headers&h=Connection:X-Foo,%20X-Baz&h=X-Foo:bar&h=X-Baz:baz"
             "&h=Keep-Alive:timeout%3D5&h=Proxy-Connection:keep-alive&h=X-Keep:yes")
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?" + q)
            self.assertEqual(r.status, 200)
            got = [k.lower() for k, _ in r.headers]
            for h in ("connection", "x-foo", "x-baz", "keep-alive", "proxy-connection"):
                self.assertNotIn(h, got, r.headers)
            self.assertEqual(r.header("X-Keep"), "yes")
            self.assertEqual(c.request("GET", "/e").status, 200)

    def test_date_on_proxied_responses(self):
        # the backend sends no Date: a forwarder adds one (RFC 9110 6.6.1)
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e")
            self.assertEqual(len(r.headers_all("Date")), 1, r.headers)
            self.assertRegex(r.header("Date"),
                             r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$")
            # the upstream's own Date is kept as it is
            r = c.request("GET", "/e?h=Date:Sun,%2006%20Nov%201994%2008:49:37%20GMT")
            self.assertEqual(r.headers_all("Date"), ["Sun, 06 Nov 1994 08:49:37 GMT"])

    def test_date_is_current(self):
        # the second it shows is at most one sweep (100 ms) old, not up to 2 s
        from email.utils import parsedate_to_datetime
        worst = 0.0
        with Client(self.gw.port) as c:
            deadline = time.time() + 2.2
            while time.time() < deadline:
                r = c.request("GET", "/e")
                shown = parsedate_to_datetime(r.header("Date")).timestamp()
                worst = max(worst, time.time() - shown)
                time.sleep(0.05)
        self.assertLess(worst, 1.5, "Date lagged the clock by %.2f s" % worst)

    def test_upstream_close_does_not_close_client(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?close=1")
            self.assertEqual(r.status, 200)
            self.assertNotEqual((r.header("Connection") or "").lower(), "close")
            self.assertEqual(c.request("GET", "/e").status, 200)

    # ---- Host, X-Forwarded-*, X-Request-Id

    def test_host_preserved(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, host="example.test:1234")
            self.assertEqual(values(e, "Host"), ["example.test:1234"])
            self.assertEqual(values(e, "X-Forwarded-Host"), ["example.test:1234"])

    def test_absolute_form_host(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, target="http://abs.example:81/e?x=1", host="other.example")
            self.assertEqual(values(e, "Host"), ["abs.example:81"])
            self.assertEqual(e["target"], "/e?x=1")

    def test_forwarded_fields_untrusted_client(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, headers=[
                ("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-For", "5.6.7.8"),
                ("Forwarded", "for=1.2.3.4;proto=https"), ("X-Forwarded-Proto", "https"),
                ("X-Forwarded-Host", "evil.example")], host="real.example")
            self.assertEqual(values(e, "X-Forwarded-For"), ["127.0.0.1"])
            self.assertEqual(values(e, "Forwarded"), [])
            self.assertEqual(values(e, "X-Forwarded-Proto"), ["http"])
            self.assertEqual(values(e, "X-Forwarded-Host"), ["real.example"])

    def test_forwarded_fields_trusted_proxy(self):
        with Client(self.tgw.port) as c:
            r, e = self.echo(c, headers=[
                ("X-Forwarded-For", "1.2.3.4"), ("Forwarded", "for=1.2.3.4;proto=https"),
                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "orig.example")],
                host="real.example")
            self.assertEqual(values(e, "X-Forwarded-For"), ["1.2.3.4, 127.0.0.1"])
            self.assertEqual(values(e, "Forwarded"), ["for=1.2.3.4;proto=https"])
            self.assertEqual(values(e, "X-Forwarded-Proto"), ["https"])
            self.assertEqual(values(e, "X-Forwarded-Host"), ["orig.example"])
            # nothing sent: the gateway's own values
            r, e = self.echo(c, host="real.example")
            self.assertEqual(values(e, "X-Forwarded-For"), ["127.0.0.1"])
            self.assertEqual(values(e, "X-Forwarded-Proto"), ["http"])
            self.assertEqual(values(e, "X-Forwarded-Host"), ["real.example"])

    def test_forwarded_for_several_fields_trusted(self):
        # several X-Forwarded-For fields are one list (RFC 9110 5.3): keep all
        with Client(self.tgw.port) as c:
            r, e = self.echo(c, headers=[("X-Forwarded-For", "1.1.1.1"),
                                         ("X-Forwarded-For", "2.2.2.2, 3.3.3.3")])
            self.assertEqual(values(e, "X-Forwarded-For"),
                             ["1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1"])

    def test_http10_request_without_host_gets_one(self):
        # the upstream request is HTTP/1.1, which requires a Host: the
        # gateway supplies the upstream's address (as nginx's $proxy_host)
        with Client(self.gw.port) as c:
            c.send(b"GET /e HTTP/1.0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200)
            e = r.json()
            self.assertEqual(e["version"], "1.1")
            self.assertEqual(values(e, "Host"), [self.b.addr])

    def test_request_id_generated(self):
        with Client(self.gw.port) as c:
            r1, e1 = self.echo(c)
            r2, e2 = self.echo(c)
        for r, e in ((r1, e1), (r2, e2)):
            rid = r.header("X-Request-Id")
            self.assertTrue(rid)
            self.assertEqual(r.headers_all("X-Request-Id"), [rid])
            self.assertEqual(values(e, "X-Request-Id"), [rid])
        self.assertNotEqual(r1.header("X-Request-Id"), r2.header("X-Request-Id"))

    def test_request_id_passed_through(self):
        with Client(self.gw.port) as c:
            r, e = self.echo(c, headers=[("X-Request-Id", "abc-123")])
            self.assertEqual(values(e, "X-Request-Id"), ["abc-123"])
            self.assertEqual(r.headers_all("X-Request-Id"), ["abc-123"])
            # the next request on the connection gets a fresh one again
            r, e = self.echo(c)
            self.assertNotEqual(r.header("X-Request-Id"), "abc-123")
            self.assertEqual(values(e, "X-Request-Id"), [r.header("X-Request-Id")])

    def test_request_id_unusable_ones_replaced(self):
        # empty, repeated or too long: the backend and the client still see
        # one and the same id
        cases = ([("X-Request-Id", "")], [("X-Request-Id", "r" * 300)],
                 [("X-Request-Id", "first"), ("X-Request-Id", "second")])
        with Client(self.gw.port) as c:
            for hs in cases:
                with self.subTest(hs=hs):
                    r, e = self.echo(c, headers=hs)
                    ids = values(e, "X-Request-Id")
                    self.assertEqual(len(ids), 1, e["headers"])
                    self.assertTrue(ids[0])
                    self.assertEqual(r.headers_all("X-Request-Id"), ids)
            self.assertEqual(values(self.echo(c, headers=cases[2])[1], "X-Request-Id"), ["first"])

    def test_request_id_from_backend_kept(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?h=X-Request-Id:from-backend")
            self.assertEqual(r.headers_all("X-Request-Id"), ["from-backend"])

    # ---- request bodies

    def test_chunked_request_body(self):
        parts = [os.urandom(n) for n in (1, 100, 4096, 70000, 3)]
        data = b"".join(parts)
        with Client(self.gw.port) as c:
            c.send(build_request("POST", "/e", [("Transfer-Encoding", "chunked")]) +
                   chunked(parts, trailers=[("X-Trailer", "t")], ext=b"name=value"))
            r = c.read_response()
            self.assertEqual(r.status, 200)
            e = r.json()
            self.assertEqual(e["body_bytes"], len(data))
            self.assertEqual(e["body_sha256"], hashlib.sha256(data).hexdigest())
            self.assertEqual(e["body_framing"], "chunked")
            # empty chunked body
            c.send(build_request("POST", "/e", [("Transfer-Encoding", "chunked")]) + b"0\r\n\r\n")
            e = c.read_response().json()
            self.assertEqual(e["body_bytes"], 0)

    def test_chunked_request_body_trickled(self):
        parts = [b"a" * 10, b"b" * 2000, b"c"]
        wire = build_request("POST", "/e", [("Transfer-Encoding", "chunked")]) + chunked(parts)
        with Client(self.gw.port) as c:
            for i in range(0, len(wire), 7):
                c.send(wire[i:i + 7])
            e = c.read_response().json()
            self.assertEqual(e["body_sha256"], hashlib.sha256(b"".join(parts)).hexdigest())

    def test_content_length_request_body(self):
        data = os.urandom(300 * 1024)
        with Client(self.gw.port) as c:
            r, e = self.echo(c, "PUT", body=data)
            self.assertEqual(e["body_bytes"], len(data))
            self.assertEqual(e["body_sha256"], hashlib.sha256(data).hexdigest())
            self.assertEqual(e["body_framing"], "length")
            r, e = self.echo(c, "POST", body=b"")
            self.assertEqual(e["body_bytes"], 0)

    def test_via(self):
        # RFC 9110 7.6.3: each hop adds itself, with the protocol it received
        with Client(self.gw.port) as c:
            _, e = self.echo(c)
            self.assertEqual(values(e, "Via"), ["1.1 switchyard"])
            _, e = self.echo(c, headers=[("Via", "1.1 edge, 1.0 cache")])
            self.assertEqual(values(e, "Via"), ["1.1 edge, 1.0 cache", "1.1 switchyard"])
        with Client(self.gw.port) as c:
            _, e = self.echo(c, version="1.0")
            self.assertEqual(values(e, "Via"), ["1.0 switchyard"])

    @h1_only("TRACE reflects the head as received; an HTTP/2 head has lower-case names")
    def test_max_forwards(self):
        # RFC 9110 7.6.2: OPTIONS and TRACE stop at the hop whose
        # Max-Forwards is 0; above 0 it goes on one less; other methods ignore it
        with Client(self.gw.port) as c:
            r = c.request("OPTIONS", "/e", headers=[("Max-Forwards", "0")])
            self.assertEqual(r.status, 200, r)
            self.assertIsNone(r.header("X-Backend"), r)
            allow = {m.strip() for m in r.header("Allow").split(",")}
            self.assertTrue({"OPTIONS", "GET", "POST"} <= allow, allow)
            r = c.request("TRACE", "/e?q=1", headers=[
                ("Max-Forwards", "0"), ("X-A", "1"), ("Cookie", "secret=1"),
                ("Authorization", "Bearer secret")])
            self.assertEqual(r.status, 200, r)
            self.assertIsNone(r.header("X-Backend"), r)
            self.assertEqual(r.header("Content-Type"), "message/http")
            self.assertTrue(r.body.startswith(b"TRACE /e?q=1 HTTP/1.1\r\n"), r.body)
            self.assertIn(b"\r\nX-A: 1\r\n", r.body)
            self.assertTrue(r.body.endswith(b"\r\n\r\n"), r.body)
            self.assertNotIn(b"secret", r.body)
            _, e = self.echo(c, "OPTIONS", "/e", headers=[("Max-Forwards", "5")])
            self.assertEqual(values(e, "Max-Forwards"), ["4"])
            _, e = self.echo(c, "TRACE", "/e", headers=[("Max-Forwards", "1")])
            self.assertEqual(values(e, "Max-Forwards"), ["0"])
            _, e = self.echo(c, "GET", "/e", headers=[("Max-Forwards", "0")])
            self.assertEqual(values(e, "Max-Forwards"), ["0"])
            # a body sent with it is read and dropped; the connection goes on
            r = c.request("OPTIONS", "/e", headers=[("Max-Forwards", "0")], body=b"abc")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(self.echo(c)[1]["method"], "GET")

    def test_empty_bodies_on_a_reused_upstream_connection(self):
        # Content-Length: 0 has nothing to wait for: its head goes straight
        # to a pooled connection, and framing and order are kept
        with Client(self.gw.port) as c:
            _, first = self.echo(c, "GET", "/e/0")
            for i, m in enumerate(["POST", "PUT", "PATCH", "GET", "POST"], 1):
                _, e = self.echo(c, m, "/e/%d" % i, body=b"" if m != "GET" else None)
                self.assertEqual((e["method"], e["target"]), (m, "/e/%d" % i))
                self.assertEqual(e["body_bytes"], 0)
                if m != "GET":
                    self.assertEqual(values(e, "Content-Length"), ["0"])
                self.assertEqual(e["conn_requests"], first["conn_requests"] + i)

    # ---- response bodies

    def test_empty_response_bodies_from_a_kept_upstream(self):
        # "Content-Length: 0" from an upstream that keeps its connection:
        # the answer ends at its head, the next requests (pipelined too)
        # are answered, and the upstream connection is reused
        with Client(self.gw.port) as c:
            c.send(b"".join(build_request("GET", "/z%d?mode=fixed&size=0&status=%d" % (i, st))
                            for i, st in enumerate((200, 201, 404, 200))))
            rs = [c.read_response() for _ in range(4)]
            self.assertEqual([(r.status, r.body, r.header("Content-Length")) for r in rs],
                             [(st, b"", "0") for st in (200, 201, 404, 200)])
            self.assertEqual(len({r.header("X-Conn-Id") for r in rs}), 1)
            self.assertEqual([r.header("X-Conn-Requests") for r in rs],
                             [str(int(rs[0].header("X-Conn-Requests")) + i) for i in range(4)])
            _, e = self.echo(c)
            self.assertEqual(str(e["conn_id"]), rs[0].header("X-Conn-Id"))

    @h1_only("chunked framing passes to an HTTP/1.1 client as it came")
    def test_chunked_response(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=chunked&size=300001&chunk=7000")
            self.assertEqual(r.status, 200)
            self.assertEqual((r.header("Transfer-Encoding") or "").lower(), "chunked")
            self.assertIsNone(r.header("Content-Length"))
            self.assertEqual(r.body, pattern_bytes(300001))
            self.assertEqual(c.request("GET", "/e?mode=chunked&size=0").body, b"")
            self.assertEqual(c.request("GET", "/e").status, 200)

    def test_chunked_response_to_http10(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=chunked&size=50000&chunk=999", version="1.0")
            self.assertEqual(r.status, 200)
            self.assertIsNone(r.header("Transfer-Encoding"))
            self.assertEqual(r.body, pattern_bytes(50000))
            self.assertClosed(c)

    @h1_only("a close-delimited body ends an HTTP/1.1 connection")
    def test_close_delimited_response(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=close&size=200000")
            self.assertEqual(r.status, 200)
            self.assertIsNone(r.header("Content-Length"))
            self.assertIsNone(r.header("Transfer-Encoding"))
            self.assertEqual(r.body, pattern_bytes(200000))
            self.assertTrue(c.eof)

    def test_slow_client_gets_whole_bodies(self):
        # the upstream is done (and closed) long before the client has read:
        # the buffered rest must still reach it, in every framing
        for q, n in (("mode=close&size=%d" % (4 << 20), 4 << 20),
                     ("mode=fixed&close=1&size=%d" % (4 << 20), 4 << 20),
                     ("mode=chunked&close=1&size=%d" % (3 << 20), 3 << 20)):
            with self.subTest(q=q), Client(self.gw.port) as c:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
                c.send(build_request("GET", "/e?" + q))
                time.sleep(0.3)
                h = hashlib.sha256()
                r = c.read_response(sink=h.update)
                self.assertEqual(r.status, 200)
                self.assertEqual(r.body_len, n)
                self.assertEqual(h.hexdigest(), pattern_sha256(n))

    def test_fixed_response(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=fixed&size=123457")
            self.assertEqual(r.header("Content-Length"), "123457")
            self.assertEqual(r.body, pattern_bytes(123457))

    def test_head_response_framing(self):
        with Client(self.gw.port) as c:
            r = c.request("HEAD", "/e?mode=fixed&size=5000")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("Content-Length"), "5000")
            r = c.request("HEAD", "/e?mode=chunked&size=5000")
            self.assertEqual(r.status, 200)
            r = c.request("GET", "/e?mode=fixed&size=5000")
            self.assertEqual(r.body, pattern_bytes(5000))
            self.assertEqual(c.request("GET", "/e").status, 200)

    def test_204_and_304_framing(self):
        with Client(self.gw.port) as c:
            for st in (204, 304, 204):
                r = c.request("GET", "/e?mode=status&status=%d" % st)
                self.assertEqual(r.status, st)
                self.assertEqual(r.body, b"")
                self.assertIsNone(r.header("Transfer-Encoding"))
            r = c.request("GET", "/e?mode=fixed&size=10")
            self.assertEqual(r.body, pattern_bytes(10))

    def test_error_statuses_passed_through(self):
        with Client(self.gw.port) as c:
            for st in (404, 500, 503, 599):
                r = c.request("GET", "/e?mode=status&status=%d" % st)
                self.assertEqual(r.status, st)
                self.assertEqual(r.header("X-Backend"), "b")

    def test_1xx_forwarded(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=1xx")
            self.assertEqual([i.status for i in r.interim], [103])
            self.assertEqual(r.interim[0].header("Link"),
                             "</early-hint.css>; rel=preload; as=style")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["path"], "/e")
            r = c.request("GET", "/e?mode=1xx&interim=102&delay_ms=50")
            self.assertEqual([i.status for i in r.interim], [102])
            self.assertEqual(r.status, 200)
            r = c.request("GET", "/e")
            self.assertEqual(r.interim, [])
        # never to an HTTP/1.0 client (the upstream request is HTTP/1.1)
        with Client(self.gw.port) as c:
            r = c.request("GET", "/e?mode=1xx", version="1.0")
            self.assertEqual((r.interim, r.status), ([], 200))

    def test_expect_100_continue(self):
        data = os.urandom(50000)
        with Client(self.gw.port) as c:
            c.send(build_request("POST", "/e", [("Expect", "100-continue"),
                                                ("Content-Length", str(len(data)))]))
            interim = c.read_head()
            self.assertEqual(interim.status, 100)
            c.send(data)
            r = c.read_response()
            self.assertEqual(r.interim, [])  # exactly one 100
            self.assertEqual(r.status, 200)
            e = r.json()
            self.assertEqual(e["body_sha256"], hashlib.sha256(data).hexdigest())
            self.assertEqual(values(e, "Expect"), [])
            # chunked, and the connection goes on
            c.send(build_request("POST", "/e", [("Expect", "100-continue"),
                                                ("Transfer-Encoding", "chunked")]))
            self.assertEqual(c.read_head().status, 100)
            c.send(chunked([b"abc", b"def"]))
            r = c.read_response()
            self.assertEqual(r.interim, [])
            self.assertEqual(r.json()["body_sha256"], hashlib.sha256(b"abcdef").hexdigest())

    def test_expect_on_local_route(self):
        # a local answer to an Expect request: no 100, the answer, which
        # says the connection closes (the body may or may not follow, RFC
        # 9110 10.1.1), and the close
        for target, status, body in (("/local", 200, b"local\n"),):
            with self.subTest(target=target), Client(self.gw.port) as c:
                c.send(build_request("POST", target, [("Expect", "100-continue"),
                                                      ("Content-Length", "5")]))
                r = c.read_response()
                self.assertEqual(r.status, status)
                self.assertEqual(r.interim, [])
                if body:
                    self.assertEqual(r.body, body)
                self.assertEqual(r.header("Connection"), "close")
                self.assertClosed(c)


class InterimServer(HeadServer):
    """Answers every request with <count> interim heads of <status> (each
    with an X-Pad field of <pad> bytes), <gap> seconds apart, then 200 with
    the body "final\n". Its sends block: a gateway that stops reading it
    holds it back. <sent>: the interim heads sent so far; <done>: set once
    the 200 went out."""

    def __init__(self, count, status=103, pad=0, gap=0.0):
        self.count, self.gap = count, gap
        field = b"X-Pad: %s\r\n" % (b"p" * pad) if pad else b""
        self.head = b"HTTP/1.1 %d Interim\r\n%s\r\n" % (status, field)
        self.sent = 0
        self.done = threading.Event()
        super().__init__()

    def answer(self, s):
        # a flood goes out in writes of some 64 KiB
        batch = 1 if self.gap else max(1, 65536 // len(self.head))
        while self.sent < self.count:
            n = min(batch, self.count - self.sent)
            s.sendall(self.head * n)
            self.sent += n
            if self.gap:
                time.sleep(self.gap)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nfinal\n")
        self.done.set()


class InterimTest(GatewayCase):
    """An upstream's interim responses: at most INTERIM_MAX of a request go
    to the client and later ones are dropped, so a flood of them to a
    client that does not read costs the gateway no memory; while the
    client's output is over GW_HWM the upstream is not read; and they do
    not restart the response timeout, which runs to the final head."""

    INTERIM_MAX = 32  # GW_UP_INTERIM_MAX

    def gateway(self, srv, **route):
        self.addCleanup(srv.close)
        b = self.own_backend("b")
        return self.own_gateway(gateway_config(
            upstreams={"i": upstream_cfg(srv.addr), "b": upstream_cfg(b)},
            routes=[dict({"id": "i", "path": "/i/*{r}", "upstream": "i"}, **route),
                    {"id": "b", "path": "/*{r}", "upstream": "b"}], workers=1), env=asan_env())

    def test_flood_to_a_client_that_does_not_read(self):
        # 100,000 heads of 1 KB (some 100 MB): the gateway once queued
        # every one for the client and grew by as much
        srv = InterimServer(100000, pad=1000)
        gw = self.gateway(srv)
        gw.wait_log(r"admin API on")  # its heap reserve is touched: not in the baseline
        with Client(gw.port) as other:
            self.assertEqual(other.request("GET", "/warm").status, 200)
            watch = RssWatch(gw.pid())
            with Client(gw.port) as c:
                c.send(build_request("GET", "/i/x"))  # and reads nothing yet
                self.assertTrue(srv.done.wait(TIMEOUT), "the upstream was held back after "
                                "%d of its heads" % srv.sent)
                # another client is served meanwhile, on the same worker
                self.assertEqual(other.request("GET", "/during").status, 200)
                grew = watch.finish()
                self.assertLess(grew, 32 << 10, "gateway RSS grew by %d KiB (%d samples)"
                                % (grew, watch.samples))
                r = c.read_response()
                self.assertEqual([i.status for i in r.interim], [103] * self.INTERIM_MAX)
                self.assertEqual(len(r.interim[0].header("X-Pad")), 1000)
                self.assertEqual((r.status, r.body), (200, b"final\n"))
                self.assertEqual(c.request("GET", "/after").status, 200)
        self.assertRegex(gw.log(), r"\[info\] upstream i server [^ ]+ route i request [0-9a-f]+: "
                         r"over %d interim responses" % self.INTERIM_MAX)

    def test_large_heads_wait_for_a_client_that_does_not_read(self):
        # 1,500 heads of 60 KB (90 MB): the 32 the client is sent (1.9 MB)
        # fill its output past GW_HWM, and then the upstream is not read
        # until the client drains (it was held after ~54 heads). Without
        # that pause the gateway read the upstream to its end (dropping the
        # rest) however far behind the client was; the flood above cannot
        # tell, its 32 heads being 32 KB.
        count = 1500
        srv = InterimServer(count, pad=60000)
        gw = self.gateway(srv)
        s = socket.socket()
        # before connect, so that the kernel does not take the 1.9 MB: a
        # small window, and a small MSS (the gateway's send buffer is sized
        # from it: with loopback's 64 KB one it starts at ~4 MB)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
        s.settimeout(TIMEOUT)
        s.connect(("127.0.0.1", gw.port))
        with Client(gw.port, sock=s) as c:
            c.send(build_request("GET", "/i/x"))  # and reads nothing yet
            # wait until the upstream's sends stall (its kernel buffers and
            # the gateway's are full), or it got all of them out
            last, still = -1, 0
            for _ in range(int(TIMEOUT / 0.25)):
                if srv.done.is_set():
                    break
                still = still + 1 if srv.sent == last else 0
                if still >= 8:  # no progress for 2 s
                    break
                last = srv.sent
                time.sleep(0.25)
            self.assertFalse(srv.done.is_set(), "the upstream sent all its %d heads to a client "
                             "that reads nothing" % count)
            self.assertLess(srv.sent, count // 2, "the upstream was held back only after "
                            "%d of its %d heads" % (srv.sent, count))
            with Client(gw.port) as other:  # the worker serves others meanwhile
                self.assertEqual(other.request("GET", "/during").status, 200)
            r = c.read_response()
            self.assertTrue(srv.done.wait(TIMEOUT), "the upstream still held back after "
                            "%d of its heads" % srv.sent)
            self.assertEqual([i.status for i in r.interim], [103] * self.INTERIM_MAX)
            self.assertEqual({len(i.header("X-Pad")) for i in r.interim}, {60000})
            self.assertEqual((r.status, r.body), (200, b"final\n"))
            self.assertEqual(c.request("GET", "/after").status, 200)

    def test_interim_responses_do_not_restart_the_response_timeout(self):
        # one every 0.5 s, for 10 s, against timeout_ms 2000: a 504 after
        # about 2 s (each of them used to restart it: the 200 came after 10 s)
        for status in (100, 103):
            with self.subTest(status=status):
                srv = InterimServer(20, status=status, gap=0.5)
                gw = self.gateway(srv, timeout_ms=2000)
                with Client(gw.port) as c:
                    t0 = time.monotonic()
                    r = c.request("GET", "/i/x")
                    took = time.monotonic() - t0
                self.assertEqual(r.status, 504, r)
                self.assertLess(took, 5, "the 504 took %.1f s" % took)
                # 100 is never passed on (Switchyard answers Expect itself)
                self.assertEqual({i.status for i in r.interim}, {103} if status == 103 else set())


class ResponseHeadTest(GatewayCase):
    """Malformed upstream response heads (sent with mode=raw) are never
    passed on in a form the client could frame differently than the
    gateway did: RFC 9112 5.1/5.2 let a proxy answer 502 instead."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.gw = cls.shared_gateway(gateway_config(
            upstreams={"b": upstream_cfg(cls.b)},
            routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
            limits={"max_request_line": 200000}))  # long h= queries

    def raw(self, c, data):
        c.send(build_request("GET", "/raw?mode=raw&data=" + quote(data, safe="")))
        return c.read_response()

    def in_step(self, c):
        r = c.request("GET", "/after")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json()["path"], "/after")

    def test_obs_fold_in_response(self):
        with Client(self.gw.port) as c:
            r = self.raw(c, "HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\n"
                            "Content-Length: 2\r\n\r\nok")
            # either refused, or the fold replaced by SP (RFC 9112 5.2)
            if r.status != 502:
                self.assertEqual((r.status, r.header("X-A"), r.body), (200, "one two", b"ok"))
            self.in_step(c)

    def test_space_before_colon_in_response(self):
        for name in ("X-A ", "Content-Length ", "Transfer-Encoding\t"):
            with self.subTest(name=name), Client(self.gw.port) as c:
                # Client.read_head() refuses whitespace before a colon
                r = self.raw(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%s: 1\r\n\r\nok"
                             % name)
                self.assertIn(r.status, (200, 502))
                if r.status == 200:
                    self.assertEqual(r.body, b"ok")
                self.in_step(c)

    def test_conflicting_framing_in_response(self):
        for head in ("Content-Length: 5\r\nTransfer-Encoding: chunked",
                     "Content-Length: 5\r\nContent-Length: 6",
                     "Content-Length: 5\r\nContent-Length: 5",
                     "Content-Length: 5, 6",
                     "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                     "Transfer-Encoding: chunked, chunked",
                     "Transfer-Encoding: gzip, chunked",
                     "Transfer-Encoding: xchunked"):
            with self.subTest(head=head), Client(self.gw.port) as c:
                r = self.raw(c, "HTTP/1.1 200 OK\r\n%s\r\n\r\n0\r\n\r\nhello!" % head)
                self.assertEqual(r.status, 502)
                self.in_step(c)

    def test_invalid_status_line(self):
        # llhttp takes all of these; none may reach the client
        for line in ("HTTP/1.1 20 OK", "HTTP/1.1 0200 OK", "HTTP/1.1 2000 OK",
                     "HTTP/1.2 200 OK", "HTTP/2.0 200 OK", "HTTP/1.1  200 OK"):
            with self.subTest(line=line), Client(self.gw.port) as c:
                r = self.raw(c, line + "\r\nContent-Length: 0\r\n\r\n")
                self.assertEqual(r.status, 502)
                self.in_step(c)
        with Client(self.gw.port) as c:  # no reason phrase is fine
            r = self.raw(c, "HTTP/1.1 299\r\nContent-Length: 2\r\n\r\nok")
            self.assertEqual((r.status, r.body), (299, b"ok"))
            self.in_step(c)

    def test_empty_body_then_upstream_close(self):
        # the answer is whole at its head: the upstream's close after it
        # is not a cut-off body, and the client connection stays
        for st in (200, 201, 302, 600, 999):
            with self.subTest(status=st), Client(self.gw.port) as c:
                r = self.raw(c, "HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % st)
                self.assertEqual((r.status, r.body), (st, b""))
                self.in_step(c)

    def test_control_characters_in_response_field(self):
        for v in ("a\x00b", "a\x01b", "a\rb"):
            with self.subTest(v=v), Client(self.gw.port) as c:
                r = self.raw(c, "HTTP/1.1 200 OK\r\nX-A: %s\r\nContent-Length: 0\r\n\r\n" % v)
                self.assertEqual(r.status, 502)
                self.in_step(c)


    def test_body_after_head_response(self):
        # a HEAD answered with a body: the body is not passed on, and the
        # upstream connection is not reused
        with Client(self.gw.port) as c:
            c.send(build_request("HEAD", "/raw?mode=raw&hold=1&data=" + quote(
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", safe="")))
            r = c.read_response("HEAD")
            self.assertEqual((r.status, r.header("Content-Length")), (200, "5"))
            self.in_step(c)

    def test_101_without_upgrade_request(self):
        with Client(self.gw.port) as c:
            r = self.raw(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                            "Connection: Upgrade\r\n\r\n")
            self.assertEqual(r.status, 502)
            self.in_step(c)

    def test_many_response_fields(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/m?mode=headers" + "".join("&h=X-F%d:%d" % (i, i)
                                                              for i in range(200)))
            self.assertEqual(r.status, 200)
            self.assertEqual([r.header("X-F%d" % i) for i in range(200)],
                             [str(i) for i in range(200)])
            # far too many: refused rather than truncated
            r = c.request("GET", "/m?mode=headers" + "".join("&h=X-F%d:%d" % (i, i)
                                                              for i in range(1000)))
            self.assertEqual(r.status, 502)
            self.in_step(c)

    @h1_only("a 100 KB :path is over nghttp2's 64 KiB field limit (COMPRESSION_ERROR)")
    def test_large_response_head(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/m?mode=headers&h=X-Big:" + "b" * 50000)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("X-Big"), "b" * 50000)
            r = c.request("GET", "/m?mode=headers&h=X-Big:" + "b" * 100000)
            self.assertEqual(r.status, 502)
            self.in_step(c)


class AccessLogTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.log = cls.tmp.file("access.log")
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "api", "path": "/api/*{rest}", "upstream": "b"},
                                     {"id": "ping", "path": "/ping",
                                      "response": {"body": "pong"}}],
                             access_log=cls.log)
        cls.gw = cls.shared_gateway(cfg)

    def test_access_log_lines(self):
        with Client(self.gw.port) as c:
            port = c.local_port()
            r1 = c.request("POST", "/api/x?q=1", body=b"12345")
            r2 = c.request("GET", "/nope")
            r3 = c.request("GET", "/ping")
        self.assertEqual((r1.status, r2.status, r3.status), (200, 404, 200))

        def lines():
            try:
                with open(self.log) as f:
                    ls = f.read().splitlines()
            except OSError:
                return None
            return ls if len(ls) >= 3 else None

        ls = wait_for(lines, what="3 access-log lines")
        self.assertEqual(len(ls), 3, ls)
        recs = [json.loads(l) for l in ls]
        # issue 13's fields: host, the target as received, upstream time, user
        # agent, and the TLS ones (null on a plain listener); issue 25's
        # grpc_status (null: no gRPC request here)
        fields = {"time", "client", "method", "host", "target", "path", "status", "grpc_status",
                  "bytes_in", "bytes_out", "duration_ms", "upstream_ms", "route", "upstream",
                  "request_id", "user_agent", "tls_version", "sni"}
        for rec in recs:
            self.assertEqual(set(rec), fields, rec)
            self.assertEqual(rec["client"], "127.0.0.1:%d" % port)
            self.assertRegex(rec["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIsInstance(rec["duration_ms"], (int, float))
            self.assertGreaterEqual(rec["duration_ms"], 0)
            self.assertGreater(rec["bytes_in"], 0)
            self.assertGreater(rec["bytes_out"], 0)
            self.assertEqual(rec["host"], "localhost")
            self.assertIsNone(rec["tls_version"])
            self.assertIsNone(rec["sni"])
            self.assertIsNone(rec["grpc_status"])
            self.assertRegex(rec["request_id"], r"^\S+$")  # local answers too
        a, b, c = recs
        self.assertEqual((a["method"], a["path"], a["status"]), ("POST", "/api/x", 200))
        self.assertEqual((a["target"], b["target"]), ("/api/x?q=1", "/nope"))
        self.assertIsInstance(a["upstream_ms"], (int, float))
        self.assertGreaterEqual(a["upstream_ms"], 0)
        self.assertLessEqual(a["upstream_ms"], a["duration_ms"])
        self.assertIsNone(b["upstream_ms"])
        self.assertEqual(b["request_id"], r2.header("X-Request-Id"))
        self.assertEqual(a["route"], "api")
        self.assertEqual(a["upstream"], self.b.addr)
        self.assertEqual(a["request_id"], r1.header("X-Request-Id"))
        self.assertGreaterEqual(a["bytes_in"], 5)
        self.assertGreaterEqual(a["bytes_out"], len(r1.body))
        self.assertEqual((b["method"], b["path"], b["status"]), ("GET", "/nope", 404))
        self.assertIsNone(b["route"])
        self.assertIsNone(b["upstream"])
        self.assertEqual((c["path"], c["status"], c["route"]), ("/ping", 200, "ping"))
        self.assertIsNone(c["upstream"])


    def test_lines_reach_the_file_within_100_ms(self):
        """A line reaches the file within 100 ms of its request's end (issue
        23: it could wait up to a second in its worker's buffer): the
        worker's sweep flushes a buffer that has lines. Asserted with room
        for a loaded machine (500 ms); with the old once-a-second flush, ten
        lines at staggered moments all make it one time in a thousand."""
        log = self.tmp.file("latency.log")
        g = self.own_gateway(gateway_config(
            routes=[{"id": "ping", "path": "/ping", "response": {"body": "pong"}}],
            access_log=log, workers=1))

        def nlines():
            try:
                with open(log) as f:
                    return f.read().count("\n")
            except OSError:
                return 0

        waits = []
        for i in range(10):
            time.sleep(0.037 * i % 0.25)  # at another moment of the flush period each time
            self.assertEqual(get(g.port, "/ping").status, 200)
            t0 = time.monotonic()
            wait_for(lambda: nlines() > i, interval=0.002, what="line %d" % (i + 1))
            waits.append(time.monotonic() - t0)
        self.assertLess(max(waits), 0.5, ["%.3f" % w for w in waits])


class AccessLogCombinedTest(GatewayCase):
    """access_log_format: combined writes nginx's combined line, escapes included."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.log = cls.tmp.file("combined.log")
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "api", "path": "/api/*{rest}", "upstream": "b"}],
                             access_log=cls.log, access_log_format="combined")
        cls.gw = cls.shared_gateway(cfg)

    @h1_only("its fields are latin-1 bytes and its request line says HTTP/1.1 (test_h2_curl checks HTTP/2.0)")
    def test_combined_lines(self):
        basic = "Basic " + base64.b64encode(b"alice:s3cret:x").decode()
        with Client(self.gw.port) as c:
            r1 = c.request("GET", "/api/x?q=1",
                           headers=[("Referer", "http://a/\"q\""), ("User-Agent", "ua/1 \xe9")])
            r3 = c.request("GET", "/api/user", headers=[("Authorization", basic)])
            r4 = c.request("HEAD", "/api/head", headers=[("Authorization", "Basic OnB3")])
            r2 = c.request("GET", "/nope", version="1.0")
        self.assertEqual((r1.status, r3.status, r4.status, r2.status), (200, 200, 200, 404))

        def lines():
            try:
                with open(self.log, "rb") as f:
                    ls = f.read().splitlines()
            except OSError:
                return None
            return ls if len(ls) >= 4 else None

        ls = wait_for(lines, what="4 access-log lines")
        self.assertEqual(len(ls), 4, ls)
        t = rb"\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]"
        # $body_bytes_sent is the body alone (0 for a HEAD), and $remote_user
        # the Basic user name: nginx's fields
        self.assertTrue(r1.body and r3.body and r2.body)
        self.assertRegex(ls[0], rb"^127\.0\.0\.1 - - " + t +
                         rb' "GET /api/x\?q=1 HTTP/1\.1" 200 %d "http://a/\\x22q\\x22"'
                         % len(r1.body) + rb' "ua/1 \\xE9"$')
        self.assertRegex(ls[1], rb"^127\.0\.0\.1 - alice " + t +
                         rb' "GET /api/user HTTP/1\.1" 200 %d "-" "-"$' % len(r3.body))
        # an empty user name is no user ("-"), as in nginx
        self.assertRegex(ls[2], rb"^127\.0\.0\.1 - - " + t + rb' "HEAD /api/head HTTP/1\.1" 200 0 "-" "-"$')
        self.assertRegex(ls[3], rb"^127\.0\.0\.1 - - " + t +
                         rb' "GET /nope HTTP/1\.0" 404 %d "-" "-"$' % len(r2.body))


class AccessLogFailureTest(GatewayCase):
    """Access-log lines a write loses (a full disk) are counted in /metrics
    and said in the error log at most once every 10 s; requests never wait
    for the log."""

    DROPPED = re.compile(r"switchyard_access_log_dropped_lines_total (\d+)")
    SAID = r"\[error\] access log: (\d+) lines? dropped: write failed: No space left on device"

    def gateway(self, log):
        return self.own_gateway(gateway_config(
            routes=[{"id": "ping", "path": "/ping", "response": {"body": "pong"}}],
            access_log=log))

    def dropped(self, gw):
        m = self.DROPPED.search(metrics_text(gw))
        self.assertIsNotNone(m, "no switchyard_access_log_dropped_lines_total in /metrics")
        return int(m.group(1))

    def requests(self, gw, n):
        with Client(gw.port) as c:
            for i in range(n):
                self.assertEqual(c.request("GET", "/ping").status, 200)

    def test_dev_full(self):
        gw = self.gateway("/dev/full")  # every write fails with ENOSPC
        t0 = time.monotonic()
        self.requests(gw, 40)
        # old code: no such metric, nothing said
        wait_for(lambda: self.dropped(gw) == 40, what="40 dropped lines counted")
        m = gw.wait_log(self.SAID)
        self.requests(gw, 25)
        wait_for(lambda: self.dropped(gw) == 65, what="65 dropped lines counted")
        said = re.findall(self.SAID, gw.log())
        # at most once every 10 s, each with the lines lost since the last one
        self.assertLessEqual(len(said), 1 + (time.monotonic() - t0) // 10, said)
        self.assertGreater(int(m.group(1)), 0)

    def test_full_tmpfs(self):
        # a 64 KiB tmpfs filled but for a few KiB: the log's writes fill it
        # (a line may be cut in the middle), then fail; every line is either
        # in the file whole or counted as dropped
        mnt = self.tmp.file("full-fs")
        os.mkdir(mnt)
        try:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt],
                           check=True, capture_output=True, timeout=TIMEOUT)
        except (OSError, subprocess.SubprocessError) as e:
            self.skipTest("cannot mount a tmpfs here (needs root): %s" % e)
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], timeout=TIMEOUT)
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.write(b"x" * (56 * 1024))
        log = os.path.join(mnt, "access.log")
        gw = self.gateway(log)
        n = 100  # about 35 KiB of lines

        def whole_lines():
            with open(log, "rb") as f:
                data = f.read()
            return [json.loads(l) for l in data.split(b"\n")[:-1]]

        for i in range(4):
            self.requests(gw, n // 4)
        wait_for(lambda: len(whole_lines()) + self.dropped(gw) == n,
                 what="every line written whole or counted as dropped")
        self.assertGreater(self.dropped(gw), 0)
        self.assertGreater(len(whole_lines()), 0)
        gw.wait_log(self.SAID)


if __name__ == "__main__":
    main()
