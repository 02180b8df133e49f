#!/usr/bin/env python3
"""test_failures.py - what a client sees when things go wrong: an upstream
that refuses connections or speaks garbage (502), one that never answers
(504), one that dies mid-body (the client connection is closed short of the
announced length), and clients that stall (408). And how /metrics counts
each failure against its server, by kind, and the requests in flight. With
the default pool settings a killed server of two fails no request, and no
POST is sent twice."""
import signal

from harness import (h1_only, Client, Closed, GatewayCase, build_request, free_port, gateway_config, get,
                     main, metrics_text, pattern_bytes, upstream_cfg, wait_for)


class FailureTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        dead = free_port()  # nothing listens there
        ups = {"b": upstream_cfg(cls.b), "dead": upstream_cfg("127.0.0.1:%d" % dead),
               # one dead server and one live one, with and without retries
               # (and ejection: both are on by default)
               "half": upstream_cfg("127.0.0.1:%d" % dead, cls.b, retries=0,
                                    outlier={"consecutive_failures": 0}),
               "retry": upstream_cfg("127.0.0.1:%d" % dead, cls.b, retries=1)}
        routes = [{"id": "dead", "path": "/dead/*{r}", "upstream": "dead"},
                  {"id": "half", "path": "/half/*{r}", "upstream": "half"},
                  {"id": "retry", "path": "/retry/*{r}", "upstream": "retry"},
                  {"id": "slow", "path": "/slow/*{r}", "upstream": "b", "timeout_ms": 500},
                  {"id": "all", "path": "/*{r}", "upstream": "b"}]
        cfg = gateway_config(upstreams=ups, routes=routes,
                             timeouts={"client_header_ms": 500, "client_body_ms": 500,
                                       "client_idle_ms": 700})
        cls.gw = cls.shared_gateway(cfg)

    def client(self):
        return Client(self.gw.port)

    def still_usable(self, c):
        r = c.request("GET", "/ok")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json()["path"], "/ok")

    def test_502_connection_refused(self):
        with self.client() as c:
            r = c.request("GET", "/dead/x")
            self.assertEqual(r.status, 502)
            self.assertEqual(int(r.header("Content-Length")), len(r.body))
            self.still_usable(c)
        # the warning names the pool, the server, the route and the request
        # (the id the client got in X-Request-Id)
        rid = r.header("X-Request-Id")
        self.assertRegex(rid or "", r"^[0-9a-f]{24}$")
        self.assertRegex(self.gw.log(), r"\[warn\] upstream dead server 127\.0\.0\.1:\d+ route dead "
                         r"request %s: " % rid)

    def test_502_connection_refused_with_body(self):
        with self.client() as c:
            r = c.request("POST", "/dead/x", body=b"x" * 1000)
            self.assertEqual(r.status, 502)

    def test_retries_go_to_another_server(self):
        # with retries and ejection off, round robin sends every other
        # request to the dead one
        with self.client() as c:
            statuses = [c.request("GET", "/half/%d" % i).status for i in range(10)]
        self.assertEqual(sorted(set(statuses)), [200, 502], statuses)
        # with one retry, a refused connect goes on to the live server
        with self.client() as c:
            for i in range(10):
                for method in ("GET", "POST"):  # a body-less POST reached no server either
                    r = c.request(method, "/retry/%d" % i)
                    self.assertEqual(r.status, 200, (method, i))
                    self.assertEqual(r.json()["path"], "/retry/%d" % i)
        self.assertIn("retrying on another server", self.gw.log())

    def test_request_with_body_goes_on_after_a_refused_connect(self):
        # its body waits in the gateway until the connection is open: the
        # refused connect took none of it, so the POST goes on whole (before,
        # the body went into the dead server's connection and the POST got
        # 502); test_limits.py checks that a body that reached a server is
        # never sent twice
        with self.client() as c:
            for i in range(6):
                r = c.request("POST", "/retry/%d" % i, body=b"x" * 100)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_bytes"], 100)

    def test_502_garbage(self):
        with self.client() as c:
            r = c.request("GET", "/g?mode=garbage")
            self.assertEqual(r.status, 502)
            self.still_usable(c)

    def test_502_bad_status_line(self):
        with self.client() as c:
            r = c.request("GET", "/g?mode=raw&data=HTTP/1.1%20abc%20OK%0D%0A%0D%0A")
            self.assertEqual(r.status, 502)

    def test_502_fields_llhttp_would_let_through(self):
        # heads admin/http1/response.c refuses although llhttp takes them:
        # an empty field name, and a Transfer-Encoding llhttp does not read
        # as chunked ("chunked<HTAB>": it would read the body up to the
        # close, the client would decode chunks and take what follows, a
        # whole second response, for the answer to its next request)
        smuggled = ("HTTP/1.1%20200%20OK%0D%0AContent-Length:%204%0D%0A"
                    "X-Smuggled:%20yes%0D%0A%0D%0Aevil")
        for head in ("HTTP/1.1%20200%20OK%0D%0A:%20x%0D%0AContent-Length:%202%0D%0A%0D%0Aok",
                     "HTTP/1.1%20200%20OK%0D%0ATransfer-Encoding:%20chunked%09%0D%0A%0D%0A"
                     "2%0D%0Aok%0D%0A0%0D%0A%0D%0A" + smuggled):
            with self.subTest(head=head[:60]), self.client() as c:
                r = c.request("GET", "/g?mode=raw&data=" + head)
                self.assertEqual(r.status, 502, r)
                self.assertIsNone(r.header("X-Smuggled"))
                self.still_usable(c)

    def test_502_reset_before_answer(self):
        with self.client() as c:
            r = c.request("GET", "/g?mode=reset")
            self.assertEqual(r.status, 502)
            self.still_usable(c)

    def test_502_closed_before_answer(self):
        with self.client() as c:
            r = c.request("GET", "/g?mode=raw&data=")
            self.assertEqual(r.status, 502)

    def test_504_never_answers(self):
        with self.client() as c:
            r = c.request("GET", "/slow/x?mode=never")
            self.assertEqual(r.status, 504)
            self.still_usable(c)

    def test_504_answer_too_late(self):
        with self.client() as c:
            r = c.request("GET", "/slow/x?delay_ms=5000")
            self.assertEqual(r.status, 504)
            self.still_usable(c)

    def test_upstream_dies_mid_body(self):
        with self.client() as c:
            c.send(build_request("GET", "/cut?mode=cutoff&size=200000&after=100000"))
            with self.assertRaises(Closed) as cm:
                c.read_response()
            r = cm.exception.response
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("Content-Length"), "200000")
            # every byte the upstream sent goes on, then the close
            self.assertEqual(r.body, pattern_bytes(100000))
            self.assertTrue(c.eof)

    def test_upstream_dies_mid_chunked_body(self):
        # a chunked body that ends without its last chunk
        with self.client() as c:
            c.send(build_request("GET", "/cut?mode=raw&data=HTTP/1.1%20200%20OK%0D%0A"
                                 "Transfer-Encoding:%20chunked%0D%0A%0D%0A5%0D%0Ahello%0D%0A"))
            with self.assertRaises(Closed) as cm:
                c.read_response()
            self.assertEqual(cm.exception.response.body, b"hello")

    def test_408_stalled_head(self):
        with self.client() as c:
            c.send(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Half")
            r = c.read_response()
            self.assertEqual(r.status, 408)
            self.assertEqual((r.header("Connection") or "").lower(), "close")
            self.assertClosed(c)

    def test_408_trickled_head(self):
        # one byte every 100 ms: client_header_ms (500) bounds the whole
        # head, not the gap between two reads
        with self.client() as c:
            head = b"GET /x HTTP/1.1\r\nHost: a\r\nX-Slow: " + b"a" * 200
            answered = False
            for ch in head:  # at most ~20 s: far beyond the 500 ms deadline
                try:
                    c.send(bytes([ch]))
                except OSError:
                    break
                if not c.silent_for(0.1):
                    answered = True
                    break
            self.assertTrue(answered, "a trickled head was never timed out")
            r = c.read_response()
            self.assertEqual(r.status, 408)
            self.assertClosed(c)

    def test_408_stalled_body(self):
        with self.client() as c:
            c.send(build_request("POST", "/x", [("Content-Length", "100")]) + b"0123456789")
            r = c.read_response()
            self.assertEqual(r.status, 408)
            self.assertClosed(c)

    @h1_only("an idle HTTP/1.1 connection closes without a byte; HTTP/2 sends GOAWAY (test_h2_floods)")
    def test_idle_keep_alive_connection_closed_quietly(self):
        # between requests, an idle connection is closed without a 408
        with self.client() as c:
            self.still_usable(c)
            self.assertClosed(c)
            self.assertEqual(bytes(c.buf), b"")

class FailureCountTest(GatewayCase):
    """switchyard_upstream_failures_total{upstream,server,kind} counts each
    failed try against its server; switchyard_upstream_in_flight shows the
    requests on a server now."""

    def server_lines(self, gw, name):
        """The lines of /metrics named <name>, by their label text."""
        text = metrics_text(gw)
        out = {}
        for line in text.splitlines():
            if line.startswith(name + "{"):
                k, v = line.split(" ", 1)
                out[k[len(name):]] = float(v)
        return out

    def test_each_kind_counted_against_its_server(self):
        b = self.own_backend("b")
        dead = "127.0.0.1:%d" % free_port()
        gw = self.own_gateway(gateway_config(
            # "t" speaks TLS to the plain backend: its handshakes fail
            upstreams={"u": upstream_cfg(b), "d": upstream_cfg(dead),
                       "t": upstream_cfg(b, tls={"verify": False})},
            routes=[{"id": "d", "path": "/d/*{r}", "upstream": "d"},
                    {"id": "t", "path": "/t/*{r}", "upstream": "t"},
                    {"id": "never", "path": "/never", "upstream": "u", "timeout_ms": 400},
                    {"id": "u", "path": "/*{r}", "upstream": "u"}], workers=1))
        lab = lambda up, srv, kind: '{upstream="%s",server="%s",kind="%s"}' % (up, srv, kind)
        zero = self.server_lines(gw, "switchyard_upstream_failures_total")
        self.assertEqual(len(zero), 3 * 5, zero)  # three servers, five kinds
        self.assertEqual(set(zero.values()), {0.0}, zero)
        with Client(gw.port) as c:
            self.assertEqual(c.request("GET", "/d/x").status, 502)
        with Client(gw.port) as c:
            self.assertEqual(c.request("GET", "/t/x").status, 502)
        for path, status in (("/?mode=status&status=503", 503), ("/?mode=status&status=500", 500),
                             ("/never?mode=never", 504), ("/?mode=reset", 502)):
            with Client(gw.port) as c:
                self.assertEqual(c.request("GET", path).status, status, path)
        with Client(gw.port) as c:  # dies mid-body: the client is closed short
            c.send(build_request("GET", "/?mode=cutoff&size=4096"))
            with self.assertRaises(Closed):
                c.read_response()
        with Client(gw.port) as c:  # a success and a 404 count as nothing
            self.assertEqual(c.request("GET", "/ok").status, 200)
            self.assertEqual(c.request("GET", "/?mode=status&status=404").status, 404)
        f = self.server_lines(gw, "switchyard_upstream_failures_total")
        want = {lab("d", dead, "connect"): 1, lab("t", b.addr, "tls"): 1, lab("u", b.addr, "5xx"): 2,
                lab("u", b.addr, "timeout"): 1, lab("u", b.addr, "reset"): 2}
        for k, v in f.items():
            self.assertEqual(v, want.get(k, 0), (k, f))

        # in flight: a request held 1.5 s by the backend shows, then goes
        flight = lambda: self.server_lines(gw, "switchyard_upstream_in_flight")
        key = '{upstream="u",server="%s"}' % b.addr
        self.assertEqual(flight()[key], 0)
        with Client(gw.port) as c:
            c.send(build_request("GET", "/slow?delay_ms=1500&mode=echo"))
            wait_for(lambda: flight()[key] == 1, what="the request in flight")
            self.assertEqual(c.read_response().status, 200)
        wait_for(lambda: flight()[key] == 0, what="the request over")


class DefaultPoolTest(GatewayCase):
    """A pool with the defaults (no retries, outlier or health_check key)
    in front of two real backends, one of them killed: no request fails
    (a refused connect is retried on the other server, and the dead one is
    ejected), and no POST is sent twice (each backend counts what it got)."""

    def test_a_killed_server_fails_nothing(self):
        b1, b2, b3 = self.own_backend("b1"), self.own_backend("b2"), self.own_backend("b3")
        ups = {"app": upstream_cfg(b1, b2), "post": upstream_cfg(b1, b2),
               "reset": upstream_cfg(b1, b3)}
        routes = [{"id": "app", "path": "/app/*{r}", "upstream": "app"},
                  {"id": "post", "path": "/post/*{r}", "upstream": "post"},
                  {"id": "reset", "path": "/reset/*{r}", "upstream": "reset"}]
        gw = self.own_gateway(gateway_config(upstreams=ups, routes=routes))
        # both serve, over pooled keep-alive connections
        with Client(gw.port) as c:
            seen = {c.request("GET", "/app/warm%d" % i).header("X-Backend") for i in range(8)}
        self.assertEqual(seen, {"b1", "b2"})
        b2.stop(signal.SIGKILL)  # a real process killed: its connections reset
        b1.reset()

        # 200 GETs, each on a connection of its own (spread over the
        # workers) and on one kept-alive connection
        statuses = [get(gw.port, "/app/new%d" % i).status for i in range(100)]
        with Client(gw.port) as c:
            statuses += [c.request("GET", "/app/kept%d" % i).status for i in range(100)]
        self.assertEqual([s for s in statuses if s != 200], [], gw.log()[-3000:])
        self.assertEqual(b1.stats()["requests"], 200)  # each sent once, all to the live one

        # POSTs whose pool has not ejected the dead server yet: those that
        # pick it are refused before any byte went out, and go on whole to
        # the live one, once each
        b1.reset()
        for i in range(10):
            r = get(gw.port, "/post/%d" % i, method="POST", body=b"p" * 3000)
            self.assertEqual((r.status, r.json()["body_bytes"]), (200, 3000), r)
        self.assertEqual(b1.stats()["requests"], 10)
        self.assertRegex(gw.log(), r"upstream post server 127\.0\.0\.1:%d route post request "
                         r"\w+: Connection refused; retrying on another server" % b2.port)

        # a POST that reached a server which then failed (it reads the body
        # and resets) is answered 502, never sent to the other one
        b1.reset()
        b3.reset()
        for i in range(6):
            r = get(gw.port, "/reset/%d?mode=reset" % i, method="POST", body=b"x" * 5000)
            self.assertEqual(r.status, 502)
        self.assertEqual(b1.stats()["requests"] + b3.stats()["requests"], 6)


if __name__ == "__main__":
    main()
