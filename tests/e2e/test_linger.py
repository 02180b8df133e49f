#!/usr/bin/env python3
"""test_linger.py - the lingering close (RFC 9112 9.6, nginx's
`lingering_close on`): when Switchyard answers and closes while the client
may still be sending (a 413 for a body over the limit, an Expect request
answered before any 100), it half-closes, reads and drops what comes, and
closes on the client's EOF, after 5 s without data, or timeouts.lingering_ms
(30 s) in all; so the kernel never meets unread input at the close and
sends no RST that would destroy the answer. A body read away after an early
answer has the same total. A close after a request read whole, and an idle
keep-alive close, still happen at once; a drain closes a lingering
connection at once."""
import re
import socket
import ssl
import threading
import time

from harness import (TIMEOUT, Client, EarlyServer, GatewayCase, gateway_config, main, self_signed,
                     metrics_text, upstream_cfg, wait_for)

MAX_BODY = 1000
FLOOD = 4 << 20  # body bytes the client keeps sending after the head
IDLE_MS = 300
LINGERING_MS = 1500


def conns_open(gw):
    return int(re.search(r"^switchyard_connections_open (\d+)$", metrics_text(gw), re.M).group(1))


def flood(port, head, total=FLOOD):
    """Sends <head>, then <total> body bytes from a thread (a reset or a
    broken pipe ends the sending, it does not fail here), then reads until
    EOF. (the bytes read, the error the read ended on or None, the bytes
    sent, the error the sending ended on or None). Linux hands a reset to
    the first call that looks, so the sender often sees it, not the reader."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.settimeout(TIMEOUT)
    s.sendall(head)
    sent, werr = [0], [None]

    def write():
        chunk = b"x" * 65536
        deadline = time.monotonic() + TIMEOUT
        try:
            while sent[0] < total and time.monotonic() < deadline:
                sent[0] += s.send(chunk[:total - sent[0]])
        except OSError as e:  # EPIPE, ECONNRESET, or our timeout
            werr[0] = e

    t = threading.Thread(target=write)
    t.start()
    t.join(TIMEOUT + 5)
    got, err = bytearray(), None
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError as e:
        err = e
    s.close()
    return bytes(got), err, sent[0], werr[0]


class LingerTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.gw = cls.shared_gateway(cls.config())

    @classmethod
    def config(cls):
        return gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                              routes=[{"id": "all", "path": "/up/*{rest}", "upstream": "b"}],
                              limits={"max_body_bytes": MAX_BODY},
                              timeouts={"client_idle_ms": IDLE_MS})

    def setUp(self):
        # no connection of an earlier case still open: the counts below are ours
        self.assertTrue(self.wait_conns(0), "connections left open before the case")
        self.b.reset()

    def wait_conns(self, n, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if conns_open(self.gw) == n:
                return True
            time.sleep(0.02)
        return False

    def assertWhole(self, got, err, status):
        m = re.match(rb"HTTP/1\.1 (\d{3}) [^\r]*\r\n(.*?)\r\n\r\n", got, re.S)
        self.assertIsNotNone(m, "no answer head (read ended on %r): %r" % (err, got[:300]))
        self.assertEqual(int(m.group(1)), status, got[:300])
        cl = re.search(rb"(?im)^content-length: *(\d+)", m.group(2))
        self.assertIsNotNone(cl, got[:300])
        self.assertEqual(len(got) - m.end(), int(cl.group(1)), "body cut short: %r" % got)
        self.assertIsNone(err, "the answer ended on %r, not an EOF" % err)
        self.assertRegex(m.group(2), rb"(?im)^connection: close")

    def test_413_reaches_a_client_still_sending(self):
        # Content-Length far over max_body_bytes: refused at the head, while
        # the client goes on sending its 4 MiB
        for i in range(3):
            got, err, sent, werr = flood(self.gw.port, b"POST /up/x HTTP/1.1\r\nHost: a\r\n"
                                         b"Content-Length: 104857600\r\n\r\n")
            self.assertWhole(got, err, 413)
            # read and dropped: the whole flood was taken, none of it reset
            self.assertEqual((sent, werr), (FLOOD, None), "try %d" % i)
        self.assertEqual(self.b.stats()["requests"], 0)

    def test_expect_refused_before_100_reaches_a_client_still_sending(self):
        # no route: 404 before any 100 Continue; the client sends its body
        # anyway (chunked: no length to refuse at the head)
        got, err, sent, werr = flood(self.gw.port, b"POST /nowhere HTTP/1.1\r\nHost: a\r\n"
                                     b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.assertWhole(got, err, 404)
        self.assertEqual((sent, werr), (FLOOD, None))

    def test_pipelined_after_connection_close(self):
        # requests pipelined after a Connection: close one, in the same
        # write (so buffered when the answer closes), and more after them:
        # never served, and they do not reset the answer away. (What comes
        # only after the close, with nothing buffered, is not looked for:
        # that would cost a system call on every close.)
        more = b"GET /up/y HTTP/1.1\r\nHost: a\r\n\r\n" * 2000
        got, err, sent, werr = flood(self.gw.port, b"GET /up/x HTTP/1.1\r\nHost: a\r\n"
                                     b"Connection: close\r\n\r\n" + more)
        self.assertWhole(got, err, 200)
        self.assertEqual((sent, werr), (FLOOD, None))
        self.assertEqual(self.b.stats()["requests"], 1)

    def test_lingering_connection_is_open_until_the_client_is_done(self):
        # a client that stops sending but keeps its socket: the connection
        # lingers (still counted open), then goes after 5 s without data
        with Client(self.gw.port) as c:
            c.send(b"POST /up/x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"
                   + b"x" * 50000)
            r = c.read_response()
            self.assertEqual(r.status, 413)
            self.assertClosed(c)  # our write side is shut: the client sees its EOF
            t0 = time.monotonic()
            time.sleep(0.5)
            self.assertEqual(conns_open(self.gw), 1, "not lingering")
            c.send(b"y" * 10000)  # read and dropped, no RST
            self.assertTrue(self.wait_conns(0), "a lingering connection never closed")
            self.assertGreater(time.monotonic() - t0, 3, "closed before 5 s without data")

    def test_close_after_a_request_read_whole_is_at_once(self):
        # Connection: close after a request read whole: no lingering, the
        # socket closes at once though the client keeps its own open
        for body in (b"", b"hello"):
            with Client(self.gw.port) as c:
                c.send(b"POST /up/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                r = c.read_response()
                self.assertEqual(r.status, 200)
                self.assertClosed(c)
                self.assertTrue(self.wait_conns(0, timeout=1), "lingered after a whole request")

    def test_408_closes_at_once(self):
        # a head too slow for client_header_ms gets its 408 and the close
        # at once (nginx does not linger after a request timeout): well
        # before the 5 s a lingering connection waits for a quiet client
        cfg = self.config()
        cfg["timeouts"]["client_header_ms"] = 300
        gw = self.own_gateway(cfg)
        with Client(gw.port) as c:
            c.send(b"GET /up/x HTTP/1.1\r\nHost: a\r\n")  # and no end of head
            r = c.read_response()
            self.assertEqual(r.status, 408)
            # our side is gone (not only shut for writing) while the client
            # still holds its socket open
            deadline = time.monotonic() + 1.5
            while conns_open(gw) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual(conns_open(gw), 0, "lingered after a 408")

    def test_idle_keepalive_close_is_at_once(self):
        with Client(self.gw.port) as c:
            c.send(b"GET /up/x HTTP/1.1\r\nHost: a\r\n\r\n")
            self.assertEqual(c.read_response().status, 200)
            t0 = time.monotonic()
            self.assertClosed(c)
            self.assertTrue(self.wait_conns(0, timeout=1), "lingered after an idle close")
            self.assertLess(time.monotonic() - t0, IDLE_MS / 1e3 + 2)

    def test_tls_lingers_through_tls(self):
        # close_notify and the FIN, then the client's records are read and
        # dropped through TLS: the whole 4 MiB goes, the connection stays
        # open (lingering, not failed) until the client closes
        cfg = self.config()
        cfg["listeners"][0]["tls"] = {"certificates": [self_signed(self.tmp)]}
        gw = self.own_gateway(cfg, name="tls")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        raw = socket.create_connection(("127.0.0.1", gw.port), timeout=TIMEOUT)
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"POST /up/x HTTP/1.1\r\nHost: a\r\nContent-Length: 104857600\r\n\r\n")
            chunk, sent = b"x" * 16384, 0
            while sent < FLOOD:  # one thread: an SSL object is not shared
                s.sendall(chunk)
                sent += len(chunk)
            got = bytearray()
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                b = s.recv(65536)
                if not b:
                    break
                got += b
            self.assertWhole(bytes(got), None, 413)
            self.assertEqual(conns_open(gw), 1, "not lingering")
        deadline = time.monotonic() + TIMEOUT
        while conns_open(gw) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(conns_open(gw), 0, "the client's close did not end the linger")

    def test_reading_after_the_answer_has_a_total_cap(self):
        # after a local 404, or an upstream's 403 before the body, the body
        # is read away (the connection was to go on); after a 413 the
        # connection lingers. Either way a client that trickles a byte
        # every 0.2 s (well within client_body_ms and the linger's 5 s) is
        # read for timeouts.lingering_ms in all, then closed, not for as
        # long as it likes; its whole answer reached it first
        early = EarlyServer(403)
        self.addCleanup(early.close)
        cfg = self.config()
        cfg["upstreams"]["early"] = upstream_cfg(early.addr)
        cfg["routes"].insert(0, {"id": "early", "path": "/early", "upstream": "early"})
        cfg["timeouts"]["lingering_ms"] = LINGERING_MS
        gw = self.own_gateway(cfg, name="cap")
        # under max_body_bytes (3 minutes at this pace), and over it
        for target, length, status in (("/nowhere", MAX_BODY - 1, 404),
                                       ("/early", MAX_BODY - 1, 403),
                                       ("/up/x", MAX_BODY + 1, 413)):
            with self.subTest(status=status), Client(gw.port) as c:
                c.send(b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\nx"
                       % (target.encode(), length))
                r = c.read_response("POST")
                self.assertEqual(r.status, status)
                self.assertEqual(int(r.header("Content-Length")), len(r.body))
                self.assertEqual(r.header("Connection"), "close" if status == 413 else None)
                t0 = time.monotonic()
                while conns_open(gw) and time.monotonic() - t0 < 15:
                    try:
                        c.send(b"x")
                    except OSError:  # reset: our byte met the closed socket
                        break
                    time.sleep(0.2)
                wait_for(lambda: conns_open(gw) == 0, timeout=2, what="the close")
                took = time.monotonic() - t0
                self.assertTrue(c.wait_closed(2), "the client did not see the close")
                self.assertGreater(took, 1, "closed before lingering_ms")
                self.assertLess(took, LINGERING_MS / 1e3 + 4, "still read %.1f s after the answer"
                                % took)
        self.assertEqual(early.heads, 1)

    def test_drain_closes_a_lingering_connection_at_once(self):
        gw = self.own_gateway(self.config(), name="drain")
        with Client(gw.port) as c:
            c.send(b"POST /up/x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"
                   + b"x" * 50000)
            self.assertEqual(c.read_response().status, 413)
            self.assertClosed(c)
            self.assertEqual(conns_open(gw), 1, "not lingering")
            t0 = time.monotonic()
            self.assertEqual(gw.stop(), 0)
            self.assertLess(time.monotonic() - t0, 3, "the drain waited for the linger")


if __name__ == "__main__":
    main()
