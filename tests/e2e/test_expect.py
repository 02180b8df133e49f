#!/usr/bin/env python3
"""test_expect.py - Expect: 100-continue through a pool that fails (RFC 9110
10.1.1), end to end: the real gateway in front of sy_test_backend processes,
a port where nothing listens, and small servers of the test's own that
answer before the body.

The gateway answers the expectation itself (as nginx and Envoy do: the
field is not sent upstream) once the request's first try has a server,
and the body waits in the client's buffer until an upstream connection is
open, so that:
- a refused connect, or one that hangs past connect_timeout_ms, goes on
  to the next server (retries: 1): one 100, one final 200, the whole body
  upstream exactly once, the connection kept; for a client that waits for
  the 100 and for curl's way (which sends the body after a second anyway);
- a request that fails once the 100 went out (no server left) gets a clean
  502 and, its body being read away, the connection stays open;
- a final status from the upstream before the body (a 413, a 417) is
  passed on and the rest of the body read away: the connection stays open;
  an upstream's own 100 is not passed on (the client had ours); one that
  resets under the body gets the client a 502, the rest of its body read
  away, the connection kept;
- an expectation other than 100-continue is answered 417 (a server MAY,
  RFC 9110 10.1.1) and nothing goes upstream; HTTP/1.0's is ignored.
Every wait is bounded; nothing asserts a duration.
"""
import hashlib
import re
import os
import subprocess

import harness
from harness import (Client, EarlyServer, GatewayCase, build_request, chunked, free_port,
                     gateway_config, main, upstream_cfg)


def send_expect(c, target, body, headers=(), wait=True):
    """Sends a POST of <body> to <target> with Expect: 100-continue: its
    head, then (with <wait>) the interim response it waits for, then the
    body. Returns (the interim responses read before the body, the final
    response)."""
    c.send(build_request("POST", target, [("Expect", "100-continue"),
                                          ("Content-Length", str(len(body)))] + list(headers)))
    before = []
    if wait:
        before.append(c.read_head())
    c.send(body)
    r = c.read_response("POST")
    return before, r


class ExpectTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        dead = "127.0.0.1:%d" % free_port()  # nothing listens there
        cls.dead = dead
        cls.gw = cls.shared_gateway(gateway_config(
            upstreams={"retry": upstream_cfg(dead, cls.b, retries=1),
                       "dead": upstream_cfg(dead, "127.0.0.1:%d" % free_port(), retries=1),
                       "b": upstream_cfg(cls.b)},
            routes=[{"id": "retry", "path": "/retry/*{p}", "upstream": "retry"},
                    {"id": "dead", "path": "/dead/*{p}", "upstream": "dead"},
                    {"id": "ping", "path": "/ping", "response": {"status": 200, "body": "pong"}},
                    {"id": "all", "path": "/*{p}", "upstream": "b"}],
            workers=1))

    def still_usable(self, c):
        r = c.request("GET", "/ping")
        self.assertEqual((r.status, r.body), (200, b"pong"))

    def test_retry_after_a_refused_connect(self):
        # round robin with the dead server first or second: every POST gets
        # one 100 and one 200, its body reaches the live server whole and
        # once, on one connection kept throughout
        self.b.reset()
        since = self.gw.log_size()
        n = 4
        with Client(self.gw.port) as c:
            for i in range(n):
                data = os.urandom(20000 + i)
                before, r = send_expect(c, "/retry/%d" % i, data)
                self.assertEqual([h.status for h in before], [100])
                self.assertEqual(r.interim, [])  # one 100 only
                self.assertEqual(r.status, 200, r)
                self.assertIsNone(r.header("Connection"))
                e = r.json()
                self.assertEqual(e["body_sha256"], hashlib.sha256(data).hexdigest())
                self.assertNotIn("expect", [k.lower() for k, _ in e["headers"]])
            # chunked, the same
            c.send(build_request("POST", "/retry/c", [("Expect", "100-continue"),
                                                      ("Transfer-Encoding", "chunked")]))
            self.assertEqual(c.read_head().status, 100)
            c.send(chunked([b"a" * 3000, b"b" * 3000]))
            r = c.read_response("POST")
            self.assertEqual((r.interim, r.status), ([], 200))
            self.assertEqual(r.json()["body_bytes"], 6000)
            self.still_usable(c)
        self.assertEqual(self.b.stats()["requests"], n + 1)  # each exactly once
        # this test's own retries (the /dead/ tests' lines are older)
        self.gw.wait_log(r"upstream retry server %s route retry .*retrying on another server"
                         % re.escape(self.dead), since=since)

    def curl_uploads(self, prefix, data):
        """curl's way: two POSTs of <data> to <prefix>1 and <prefix>2 in one
        run (curl waits a second for the 100 at most, then sends the body
        anyway). Its -v trace, after a run that exited 0, and its output."""
        path = self.tmp.file("upload.bin")
        with open(path, "wb") as f:
            f.write(data)
        url = "http://127.0.0.1:%d%s" % (self.gw.port, prefix)
        p = subprocess.run(["curl", "-sv", "--max-time", str(int(harness.TIMEOUT)),
                            "-H", "Expect: 100-continue", "--data-binary", "@" + path,
                            url + "1", url + "2"],
                           capture_output=True, timeout=harness.TIMEOUT * 2)
        err = p.stderr.decode("latin-1")
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err.count("< HTTP/1.1 100 Continue"), 2, err)
        return err, p.stdout

    def test_retry_the_curl_way(self):
        # both uploads share one connection
        self.b.reset()
        data = os.urandom(300000)
        err, out = self.curl_uploads("/retry/curl", data)
        self.assertEqual(err.count("< HTTP/1.1 200 OK"), 2, err)
        self.assertIn("Re-using existing connection", err)
        self.assertEqual(out.count(hashlib.sha256(data).hexdigest().encode()), 2)
        self.assertEqual(self.b.stats()["requests"], 2)

    def test_retry_after_a_connect_that_hangs(self):
        # the first server's connect hangs past connect_timeout_ms: the
        # body, sent after our 100, waits in the gateway through the
        # timeout and goes whole to the retry's server
        hang = self.hanging_server()
        b = self.own_backend("b2")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(hang, b, retries=1, connect_timeout_ms=400,
                                         keepalive=0)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        with Client(gw.port) as c:
            for i in range(2):  # round robin: one of the two picks the hanging server first
                data = os.urandom(100000)
                before, r = send_expect(c, "/h%d" % i, data)
                self.assertEqual([h.status for h in before], [100])
                self.assertEqual((r.interim, r.status), ([], 200))
                self.assertEqual(r.json()["body_sha256"], hashlib.sha256(data).hexdigest())
        self.assertEqual(b.stats()["requests"], 2)
        self.assertIn("connect timed out; retrying on another server", gw.log())

    def test_no_server_left_after_the_100(self):
        # both servers refuse: the 100 went out, so the body comes and is
        # read away after the 502, and the connection goes on (before, it
        # closed under the body the client was sending)
        with Client(self.gw.port) as c:
            for i in range(3):
                before, r = send_expect(c, "/dead/%d" % i, b"x" * 50000)
                self.assertEqual([h.status for h in before], [100])
                self.assertEqual((r.interim, r.status), ([], 502))
                self.assertIsNone(r.header("Connection"))
                self.still_usable(c)
            # chunked, and a body that was already on its way
            c.send(build_request("POST", "/dead/c", [("Expect", "100-continue"),
                                                     ("Transfer-Encoding", "chunked")]) +
                   chunked([b"y" * 5000]))
            r = c.read_response("POST")
            self.assertEqual(([i.status for i in r.interim], r.status), ([100], 502))
            self.still_usable(c)

    def test_curl_way_no_server_left(self):
        # the same 502 to curl, once each, and no reset: curl itself closes
        # a connection it stopped sending on ("HTTP error before end of
        # send"), or reuses it when its upload was done first
        err, _ = self.curl_uploads("/dead/curl", b"z" * 200000)
        self.assertEqual(err.count("< HTTP/1.1 502 Bad Gateway"), 2, err)
        self.assertNotIn("Connection: close", err)
        self.assertNotIn("reset", err.lower())

    def early(self, status):
        s = EarlyServer(status)
        self.addCleanup(s.close)
        gw = self.own_gateway(gateway_config(
            upstreams={"e": upstream_cfg(s.addr)},
            routes=[{"id": "ping", "path": "/ping", "response": {"status": 200, "body": "pong"}},
                    {"id": "e", "path": "/*{p}", "upstream": "e"}],
            workers=1))
        return s, gw

    def test_final_status_from_upstream_before_the_body(self):
        # the upstream answers after the head and the first bytes of the
        # body: its answer goes on, the rest of the body is read away, and
        # the connection stays (before: closed after an answer that did not
        # say so, under the body the client was still sending)
        for status in (413, 417):
            with self.subTest(status=status):
                s, gw = self.early(status)
                with Client(gw.port) as c:
                    for i in range(2):
                        total = 1 << 20
                        c.send(build_request("POST", "/up/%d" % i,
                                             [("Expect", "100-continue"),
                                              ("Content-Length", str(total))]))
                        self.assertEqual(c.read_head().status, 100)
                        c.send(b"q" * 65536)
                        r = c.read_response("POST")
                        self.assertEqual((r.interim, r.status), ([], status))
                        self.assertEqual(r.body, b"early %d\n" % status)
                        self.assertIsNone(r.header("Connection"))
                        c.send(b"q" * (total - 65536))
                        self.still_usable(c)
                self.assertEqual(s.heads, 2)

    def test_one_100_also_when_the_upstream_sends_one(self):
        # an upstream's own 100 (unasked: the field does not go up) is
        # dropped: the client, which had ours, gets no second one
        with Client(self.gw.port) as c:
            before, r = send_expect(c, "/x?mode=1xx&interim=100", b"w" * 3000)
            self.assertEqual([h.status for h in before], [100])
            self.assertEqual((r.interim, r.status), ([], 200))
            self.assertEqual(r.json()["body_bytes"], 3000)

    def test_upstream_reset_under_the_body(self):
        # the upstream takes the head and the first bytes of the body, then
        # resets: a POST whose body began to go is not retried, so 502; the
        # client, told to send its body, is still sending it: it is read
        # away and the connection stays (before: closed under it)
        # (without Expect the same)
        s, gw = self.early(0)
        with Client(gw.port) as c:
            for i in range(2):
                total = 1 << 20
                expect = [("Expect", "100-continue")] if i == 0 else []
                c.send(build_request("POST", "/up/%d" % i,
                                     expect + [("Content-Length", str(total))]))
                if expect:
                    self.assertEqual(c.read_head().status, 100)
                c.send(b"r" * 65536)
                r = c.read_response("POST")
                self.assertEqual((r.interim, r.status), ([], 502))
                self.assertIsNone(r.header("Connection"))
                c.send(b"r" * (total - 65536))
                self.still_usable(c)
        self.assertEqual(s.heads, 2)

    def test_other_expectations(self):
        # anything but 100-continue is refused with 417, and the connection
        # closes (the client's next bytes may be a body or not); nothing
        # goes upstream
        self.b.reset()
        for value in ("200-ok", "100-continue, foo"):
            with self.subTest(value=value), Client(self.gw.port) as c:
                c.send(build_request("POST", "/x", [("Expect", value),
                                                    ("Content-Length", "5")]) + b"hello")
                r = c.read_response("POST")
                self.assertEqual((r.interim, r.status), ([], 417))
                self.assertEqual(r.header("Connection"), "close")
                self.assertClosed(c)
        self.assertEqual(self.b.stats()["requests"], 0)
        # an HTTP/1.0 client's expectation is ignored: no 100, the body is
        # read and goes upstream, without the field
        with Client(self.gw.port) as c:
            c.send(build_request("POST", "/ten", [("Expect", "100-continue"),
                                                  ("Content-Length", "5")], version="1.0") +
                   b"hello")
            r = c.read_response("POST")
            self.assertEqual((r.interim, r.status), ([], 200))
            self.assertEqual(r.json()["body_bytes"], 5)
            self.assertNotIn("expect", [k.lower() for k, _ in r.json()["headers"]])


if __name__ == "__main__":
    main()
