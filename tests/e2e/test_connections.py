#!/usr/bin/env python3
"""test_connections.py - connection handling: client keep-alive, HTTP/1.0,
pipelining, upstream connection reuse and the retry of a dead pooled
connection, WebSocket tunnels (their idle timeout, TCP keepalive and
access-log line), and limits.max_connections."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

from harness import (TIMEOUT, Client, GatewayCase, build_request, gateway_config, get, main,
                     upstream_cfg, wait_for, ws_frame, ws_handshake, ws_read)


class ConnectionTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        routes = [{"id": "all", "path": "/*{rest}", "upstream": "b"},
                  {"id": "local", "path": "/local/{n}", "response": {"body": "local\n"}}]
        cls.gw = cls.shared_gateway(gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                                                   routes=routes, workers=2))

    def test_keep_alive_many_requests(self):
        with Client(self.gw.port) as c:
            conn_ids = set()
            for i in range(50):
                r = c.request("GET", "/k/%d" % i)
                self.assertEqual(r.status, 200)
                e = r.json()
                self.assertEqual(e["path"], "/k/%d" % i)
                conn_ids.add(e["conn_id"])
                self.assertIsNone(r.header("Connection"))
            # one client connection, served over one upstream connection
            self.assertEqual(len(conn_ids), 1)

    def test_http10_without_keep_alive(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/h10", version="1.0")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.version, "1.1")
            self.assertEqual((r.header("Connection") or "").lower(), "close")
            self.assertClosed(c)
        with Client(self.gw.port) as c:  # no Host is fine in HTTP/1.0
            c.send(b"GET /h10b HTTP/1.0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200)
            self.assertClosed(c)

    def test_http10_keep_alive(self):
        with Client(self.gw.port) as c:
            for i in range(3):
                r = c.request("GET", "/h10k/%d" % i, version="1.0",
                              headers=[("Connection", "keep-alive")])
                self.assertEqual(r.status, 200)
                self.assertEqual((r.header("Connection") or "").lower(), "keep-alive")
                self.assertEqual(r.json()["path"], "/h10k/%d" % i)
            r = c.request("GET", "/local/1", version="1.0", headers=[("Connection", "keep-alive")])
            self.assertEqual(r.body, b"local\n")
            self.assertEqual((r.header("Connection") or "").lower(), "keep-alive")
            # the last one without keep-alive closes
            r = c.request("GET", "/h10k/last", version="1.0")
            self.assertEqual(r.status, 200)
            self.assertClosed(c)

    def test_connection_close_request(self):
        with Client(self.gw.port) as c:
            r = c.request("GET", "/cc", headers=[("Connection", "close")])
            self.assertEqual(r.status, 200)
            self.assertEqual((r.header("Connection") or "").lower(), "close")
            self.assertClosed(c)

    def test_half_close_after_request(self):
        # the client shuts its sending side after the request: it still
        # gets the whole answer, then the connection closes
        for i in range(10):
            for target, want in (("/hc/%d" % i, None), ("/local/%d" % i, b"local\n")):
                with self.subTest(target=target), Client(self.gw.port) as c:
                    c.send(build_request("GET", target))
                    c.sock.shutdown(socket.SHUT_WR)
                    r = c.read_response()
                    self.assertEqual(r.status, 200)
                    if want:
                        self.assertEqual(r.body, want)
                    else:
                        self.assertEqual(r.json()["path"], target)
                    self.assertClosed(c)

    def test_pipelined_requests_then_half_close(self):
        # requests pipelined before a half-close are all answered, in order
        # (proxied, local, with a body, a big one), then the connection
        # closes; a head cut off by the half-close gets nothing
        reqs = [build_request("GET", "/hp/0"),
                build_request("POST", "/hp/1", body=b"y" * 300),
                build_request("GET", "/local/2"),
                build_request("GET", "/hp/3?mode=chunked&size=200000"),
                build_request("GET", "/hp/4")]
        for cut in (False, True):
            with self.subTest(cut=cut), Client(self.gw.port) as c:
                c.send(b"".join(reqs) + (b"GET /hp/5 HTTP/1.1\r\nHost: x\r\n" if cut else b""))
                c.sock.shutdown(socket.SHUT_WR)
                got = [c.read_response() for _ in reqs]
                self.assertEqual([r.status for r in got], [200] * 5)
                self.assertEqual(got[0].json()["path"], "/hp/0")
                self.assertEqual(got[1].json()["body_bytes"], 300)
                self.assertEqual(got[2].body, b"local\n")
                self.assertEqual(got[3].body_len, 200000)
                self.assertEqual(got[4].json()["path"], "/hp/4")
                self.assertClosed(c)

    def test_pipelining(self):
        reqs = []
        for i in range(20):
            if i % 5 == 3:
                reqs.append(build_request("GET", "/local/%d" % i))
            elif i % 5 == 4:
                reqs.append(build_request("POST", "/pp/%d" % i, body=b"x" * (i * 100)))
            elif i % 5 == 2:
                reqs.append(build_request("GET", "/pp/%d?mode=chunked&size=%d" % (i, i * 1000)))
            else:
                reqs.append(build_request("GET", "/pp/%d" % i))
        with Client(self.gw.port) as c:
            c.send(b"".join(reqs))  # one write
            for i in range(20):
                r = c.read_response()
                self.assertEqual(r.status, 200, (i, r))
                if i % 5 == 3:
                    self.assertEqual(r.body, b"local\n")
                elif i % 5 == 2:
                    self.assertEqual(r.body_len, i * 1000)
                else:
                    e = r.json()
                    self.assertEqual(e["path"], "/pp/%d" % i)
                    self.assertEqual(e["body_bytes"], i * 100 if i % 5 == 4 else 0)
            # and the connection goes on
            self.assertEqual(c.request("GET", "/after").json()["path"], "/after")

    def test_pipelined_head_and_get(self):
        with Client(self.gw.port) as c:
            c.send(build_request("HEAD", "/p?mode=fixed&size=100") +
                   build_request("GET", "/p?mode=fixed&size=7") +
                   build_request("GET", "/p?mode=status&status=204") +
                   build_request("GET", "/p?mode=fixed&size=3"))
            r = c.read_response("HEAD")
            self.assertEqual(r.header("Content-Length"), "100")
            self.assertEqual(c.read_response().body, b"0123456")
            self.assertEqual(c.read_response().status, 204)
            self.assertEqual(c.read_response().body, b"012")

    def test_upstream_connection_reuse(self):
        self.b.reset()
        for i in range(100):
            r = get(self.gw.port, "/reuse/%d" % i)  # a new client connection each time
            self.assertEqual(r.status, 200)
        st = self.b.stats()
        self.assertEqual(st["requests"], 100)
        self.assertLessEqual(st["connections"], self.gw.nworkers, st)

    def test_websocket_echo(self):
        with Client(self.gw.port) as c:
            r, accept = ws_handshake(c, "/ws")
            self.assertEqual(r.status, 101)
            self.assertEqual(r.header("Sec-WebSocket-Accept"), accept)
            self.assertEqual((r.header("Upgrade") or "").lower(), "websocket")
            self.assertIn("upgrade", (r.header("Connection") or "").lower())
            msgs = [(1, b"hello"), (2, os.urandom(300)), (2, os.urandom(70000)), (1, b"")]
            for op, payload in msgs:
                c.send(ws_frame(payload, op))
                self.assertEqual(ws_read(c), (op, True, payload))
            c.send(ws_frame(b"ping!", 9))
            self.assertEqual(ws_read(c), (10, True, b"ping!"))
            # several frames in one write, fragmented message
            c.send(ws_frame(b"a", 1, fin=False) + ws_frame(b"b", 0, fin=False) +
                   ws_frame(b"c", 0))
            self.assertEqual([ws_read(c) for _ in range(3)],
                             [(1, False, b"a"), (0, False, b"b"), (0, True, b"c")])
            c.send(ws_frame(b"\x03\xe8bye", 8))
            self.assertEqual(ws_read(c), (8, True, b"\x03\xe8bye"))
            self.assertClosed(c)

    def test_websocket_refused_upgrade_stays_http(self):
        with Client(self.gw.port) as c:
            r, _ = ws_handshake(c, "/ws?mode=status&status=403")
            self.assertEqual(r.status, 403)
            self.assertEqual(c.request("GET", "/after-ws").json()["path"], "/after-ws")


class TunnelCloseTest(GatewayCase):
    def test_client_close_ends_upstream_tunnel(self):
        b = self.own_backend("ws")
        g = self.own_gateway(gateway_config(upstreams={"b": upstream_cfg(b)}, workers=1,
                                            routes=[{"id": "all", "path": "/*{r}",
                                                     "upstream": "b"}]))
        c = Client(g.port)
        r, _ = ws_handshake(c, "/ws")
        self.assertEqual(r.status, 101)
        c.send(ws_frame(b"x"))
        self.assertEqual(ws_read(c), (1, True, b"x"))
        self.assertEqual(b.stats()["open"], 1)
        c.close()  # no close frame: the TCP connection just goes
        wait_for(lambda: b.stats()["open"] == 0, what="the upstream side of the tunnel closed")


def ws_server_frame_len(n):
    """Bytes of an unmasked server frame with an <n>-byte payload."""
    return n + (2 if n < 126 else 4 if n < 65536 else 10)


class TunnelIdleTest(GatewayCase):
    """timeouts.tunnel_idle_ms closes a tunnel with no byte either way for
    that long, on both sides; TCP keepalive is on for both of its sockets."""

    IDLE_MS = 1000

    def tunnel(self, idle_ms=IDLE_MS):
        b = self.own_backend("ws")
        g = self.own_gateway(gateway_config(
            upstreams={"b": upstream_cfg(b)}, workers=1,
            routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}],
            timeouts={"tunnel_idle_ms": idle_ms}))
        c = Client(g.port)
        self.addCleanup(c.close)
        r, _ = ws_handshake(c, "/ws")
        self.assertEqual(r.status, 101)
        c.send(ws_frame(b"x"))
        self.assertEqual(ws_read(c), (1, True, b"x"))
        return b, g, c

    def test_quiet_tunnel_closes_both_sides(self):
        b, g, c = self.tunnel()
        t0 = time.monotonic()
        self.assertEqual(b.stats()["open"], 1)
        # old code: never closed
        self.assertTrue(c.wait_closed(timeout=10 * self.IDLE_MS / 1000),
                        "a quiet tunnel still open after 10 times tunnel_idle_ms")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9 * self.IDLE_MS / 1000)
        wait_for(lambda: b.stats()["open"] == 0, what="the upstream side of the tunnel closed")

    def test_talking_tunnel_stays_open(self):
        b, g, c = self.tunnel()
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < 3 * self.IDLE_MS / 1000:  # ~15 rounds
            i += 1
            c.send(ws_frame(b"m%d" % i))
            self.assertEqual(ws_read(c), (1, True, b"m%d" % i))
            time.sleep(self.IDLE_MS / 5000)
        self.assertEqual(b.stats()["open"], 1)
        c.send(ws_frame(b"still"))
        self.assertEqual(ws_read(c), (1, True, b"still"))

    def test_keepalive_on_both_sockets(self):
        # ss -o shows the keepalive timer (60 s before the first probe) of
        # Switchyard's socket to the client and of its socket to the backend;
        # while sent bytes wait for their ACK it shows the retransmission
        # timer instead ("on"): asked again until they are acknowledged
        b, g, c = self.tunnel(idle_ms=60000)
        bport = b.addr.rsplit(":", 1)[1]
        for side, flt in (("client", "( sport = :%d and dport = :%d )" % (g.port, c.local_port())),
                          ("upstream", "( dport = :%s )" % bport)):
            def timer():
                out = subprocess.run(["ss", "-tnoH", "state", "established", flt],
                                     capture_output=True, text=True, timeout=TIMEOUT).stdout
                lines = out.strip().splitlines()
                self.assertEqual(len(lines), 1, (side, out))
                return lines[0] if "timer:(on," not in lines[0] else None

            ln = wait_for(timer, what="the %s socket's timer" % side)
            m = re.search(r"timer:\(keepalive,(\d+)(min|sec)", ln)
            self.assertTrue(m, (side, ln))  # old code: no timer at all
            secs = int(m.group(1)) * (60 if m.group(2) == "min" else 1)
            self.assertTrue(40 <= secs <= 60, (side, ln))


class TunnelLogTest(GatewayCase):
    """A tunnel's access-log line is written when it closes, with its bytes
    both ways and its whole duration (JSON and combined)."""

    def echo_1mib(self, fmt):
        b = self.own_backend("ws")
        log = self.tmp.file("tunnel-%s.log" % fmt)
        g = self.own_gateway(gateway_config(
            upstreams={"b": upstream_cfg(b)}, workers=1,
            routes=[{"id": "ws", "path": "/*{r}", "upstream": "b"}],
            access_log=log, access_log_format=fmt))
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        req = build_request("GET", "/ws", [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                           ("Sec-WebSocket-Key", key),
                                           ("Sec-WebSocket-Version", "13")])
        sent, got = len(req), 0
        with Client(g.port) as c:
            c.send(req)
            r = c.read_response()
            self.assertEqual(r.status, 101)
            t_open = time.monotonic()
            head = len(r.raw_head)
            payload = os.urandom(65536)
            for i in range(16):  # 1 MiB each way
                f = ws_frame(payload, 2)
                c.send(f)
                sent += len(f)
                self.assertEqual(ws_read(c), (2, True, payload))
                got += ws_server_frame_len(len(payload))
            time.sleep(0.3)
            # the tunnel began before the 101 reached us and ends after
            # the close frame reached the backend: it lasted at least this
            lasted_ms = (time.monotonic() - t_open) * 1000
            f = ws_frame(b"\x03\xe8bye", 8)
            c.send(f)
            sent += len(f)
            self.assertEqual(ws_read(c), (8, True, b"\x03\xe8bye"))
            got += ws_server_frame_len(5)
            self.assertClosed(c)

        def line():
            try:
                with open(log) as f:
                    ls = f.read().splitlines()
            except OSError:
                return None
            return ls if ls else None

        ls = wait_for(line, what="the tunnel's access-log line")
        self.assertEqual(len(ls), 1, ls)
        return ls[0], sent, head, got, lasted_ms

    def test_json_line_at_close(self):
        ln, sent, head, got, lasted_ms = self.echo_1mib("json")
        rec = json.loads(ln)
        self.assertEqual(rec["status"], 101)
        # old code: bytes_out was the 101's head, the duration ended at it
        self.assertEqual(rec["bytes_in"], sent)
        self.assertEqual(rec["bytes_out"], head + got)
        self.assertGreaterEqual(rec["duration_ms"], lasted_ms)
        self.assertEqual(rec["route"], "ws")
        self.assertIsNotNone(rec["upstream"])

    def test_combined_line_at_close(self):
        ln, sent, head, got, lasted_ms = self.echo_1mib("combined")
        # $body_bytes_sent: the tunnelled bytes from the upstream
        self.assertRegex(ln, r'"GET /ws HTTP/1\.1" 101 %d "-" "-"$' % got)


class HalfCloseBeforeUpstreamTest(GatewayCase):
    def test_body_buffered_when_the_client_half_closes(self):
        # The upstream's accept queue is full, so the gateway's connect
        # hangs (its SYN is dropped). Meanwhile the client sends a request
        # with its whole body and half-closes: the request still gets its
        # answer (here the connect timeout's 504) instead of a bare close.
        hang = self.hanging_server()
        g = self.own_gateway(gateway_config(
            upstreams={"slow": upstream_cfg(hang)},
            routes=[{"id": "all", "path": "/*{r}", "upstream": "slow"}], workers=1,
            timeouts={"upstream_connect_ms": 300}))
        for body in (b"x" * 300, b""):
            with self.subTest(body=len(body)), Client(g.port) as c:
                c.send(build_request("POST", "/p", body=body) +
                       build_request("GET", "/after"))
                time.sleep(0.05)  # the gateway is connecting now
                c.sock.shutdown(socket.SHUT_WR)
                self.assertEqual([c.read_response().status for _ in range(2)], [504, 504])
                self.assertClosed(c)


class PoolConnectTimeoutTest(GatewayCase):
    def test_pool_connect_timeout_wins_over_the_global_one(self):
        # a connect that hangs (the upstream's accept queue is full) ends at
        # the pool's connect_timeout_ms, not at timeouts.upstream_connect_ms
        hang = self.hanging_server()
        ups = {"slow": upstream_cfg(hang,
                                    connect_timeout_ms=200)}
        g = self.own_gateway(gateway_config(
            upstreams=ups, routes=[{"id": "all", "path": "/*{r}", "upstream": "slow"}],
            workers=1, timeouts={"upstream_connect_ms": 30000}))
        with Client(g.port) as c:
            t0 = time.monotonic()
            self.assertEqual(c.request("GET", "/x").status, 504)
            self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("connect timed out", g.log())


class BalanceTest(GatewayCase):
    def test_weighted_round_robin(self):
        a, b = self.own_backend("A"), self.own_backend("B")
        ups = {"ab": {"servers": [{"address": a.addr, "weight": 2}, {"address": b.addr}]}}
        g = self.own_gateway(gateway_config(upstreams=ups, workers=1,
                                            routes=[{"id": "all", "path": "/*{r}",
                                                     "upstream": "ab"}]))
        seen = {"A": 0, "B": 0}
        with Client(g.port) as c:
            for i in range(30):
                r = c.request("GET", "/rr/%d" % i)
                self.assertEqual(r.status, 200)
                seen[r.header("X-Backend")] += 1
        self.assertEqual(seen, {"A": 20, "B": 10})


class RetryTest(GatewayCase):
    def test_retry_dead_pooled_connection(self):
        b = self.own_backend("b")
        g = self.own_gateway(gateway_config(upstreams={"b": upstream_cfg(b)},
                                            routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}],
                                            workers=1))
        with Client(g.port) as c:
            r = c.request("GET", "/first")
            self.assertEqual(r.status, 200)
            first_conn = r.header("X-Conn-Id")
            b.restart()  # same port; the pooled connection is dead
            r = c.request("GET", "/second")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], "/second")
            self.assertEqual(r.header("X-Conn-Id"), "1")  # a new process, its first connection
            self.assertEqual(first_conn, "1")
            # a request with a body is not retried blindly, but a fresh
            # connection is used once the dead one is known: it works too
            r = c.request("POST", "/third", body=b"abc")
            self.assertEqual(r.status, 200)

    def test_retry_goes_to_the_same_server(self):
        # the server closed an idle pooled connection: that is no failure of
        # the server, so the retry goes to it again on a fresh connection
        # and the round robin keeps its order
        a, b = self.own_backend("A"), self.own_backend("B")
        g = self.own_gateway(gateway_config(upstreams={"ab": upstream_cfg(a, b)},
                                            routes=[{"id": "all", "path": "/*{r}",
                                                     "upstream": "ab"}], workers=1))
        with Client(g.port) as c:
            seen = [c.request("GET", "/r/%d" % i).header("X-Backend") for i in range(2)]
            first_a = int(a.stats()["connections"])
            # The gateway is stopped while the request arrives and A closes
            # its connections, so that it takes the pooled connection before
            # it sees the close: the retry path, not the idle-close path.
            g.signal(signal.SIGSTOP)
            try:
                c.send(build_request("GET", "/r/2"))
                time.sleep(0.05)
                a.restart()
                time.sleep(0.05)
            finally:
                g.signal(signal.SIGCONT)
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            seen.append(r.header("X-Backend"))
            seen += [c.request("GET", "/r/%d" % i).header("X-Backend") for i in range(3, 6)]
        self.assertEqual(seen, ["A", "B"] * 3)
        self.assertEqual(first_a, 1)

    def test_pooled_connection_killed_by_upstream_idle_close(self):
        # the backend closes its side after the answer (close=1): the next
        # request must not be sent on that connection
        b = self.own_backend("b")
        g = self.own_gateway(gateway_config(upstreams={"b": upstream_cfg(b)},
                                            routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}],
                                            workers=1))
        with Client(g.port) as c:
            for i in range(20):
                r = c.request("POST", "/c/%d?close=1" % i, body=b"data")
                self.assertEqual(r.status, 200)
                self.assertEqual(r.json()["conn_requests"], 1)


class FlakyUpstream:
    """A tiny upstream that answers GETs with keep-alive, except that its
    first connection dies (FIN, no answer) when a second request arrives on
    it: a pooled connection that the upstream closed as it was reused."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.ls.settimeout(0.2)
        self.port = self.ls.getsockname()[1]
        self.seen = []  # (connection number, request number, request line)
        self.stop = False
        self.threads = []
        self.t = threading.Thread(target=self.accept_loop, daemon=True)
        self.t.start()

    def accept_loop(self):
        n = 0
        while not self.stop:
            try:
                s, _ = self.ls.accept()
            except socket.timeout:
                continue
            n += 1
            t = threading.Thread(target=self.serve, args=(s, n), daemon=True)
            t.start()
            self.threads.append(t)

    def serve(self, s, n):
        s.settimeout(30)
        buf = b""
        k = 0
        try:
            while not self.stop:
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                k += 1
                self.seen.append((n, k, head.split(b"\r\n")[0].decode()))
                if n == 1 and k == 2:
                    return  # dies without answering
                body = b"%d:%d" % (n, k)
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass
        finally:
            s.close()

    def close(self):
        self.stop = True
        self.t.join(5)
        self.ls.close()


class PooledRetryTest(GatewayCase):
    def start(self):
        up = FlakyUpstream()
        self.addCleanup(up.close)
        g = self.own_gateway(gateway_config(upstreams={"f": {"servers": [
            {"address": "127.0.0.1:%d" % up.port}]}},
            routes=[{"id": "all", "path": "/*{r}", "upstream": "f"}], workers=1))
        return up, g

    def test_idempotent_request_retried_on_fresh_connection(self):
        up, g = self.start()
        with Client(g.port) as c:
            r = c.request("GET", "/a")
            self.assertEqual((r.status, r.body), (200, b"1:1"))
            r = c.request("GET", "/b")  # sent on the pooled connection, which dies
            self.assertEqual((r.status, r.body), (200, b"2:1"))
        self.assertEqual([x[:2] for x in up.seen], [(1, 1), (1, 2), (2, 1)])

    def test_post_not_retried(self):
        up, g = self.start()
        with Client(g.port) as c:
            self.assertEqual(c.request("GET", "/a").body, b"1:1")
            r = c.request("POST", "/p", body=b"")
            self.assertEqual(r.status, 502)
        self.assertEqual([x[2] for x in up.seen], ["GET /a HTTP/1.1", "POST /p HTTP/1.1"])


class MaxConnectionsTest(GatewayCase):
    """The cap held by busy connections (a request whose body the upstream
    still waits for): idle ones would make room (test_admission.py)."""

    def busy(self, port, b, n):
        """Connection <n> (from 1), its request /<n> upstream at backend <b>
        before the next connects: one not read yet would be a pending one,
        which the next would close with the smallest max_pending_connections."""
        c = Client(port)
        self.addCleanup(c.close)
        c.send(b"POST /%d HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345" % n)
        wait_for(lambda: b.stats()["requests"] == n, what="request %d upstream" % n)
        return c

    def finish(self, c, target):
        c.send(b"67890")
        r = c.read_response()
        self.assertEqual((r.status, r.json()["path"], r.json()["body_bytes"]), (200, target, 10))

    def test_connection_limit(self):
        b = self.own_backend("b")
        g = self.own_gateway(gateway_config(upstreams={"b": upstream_cfg(b)},
                                            routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}],
                                            workers=1, limits={"max_connections": 2}))
        c1, c2 = self.busy(g.port, b, 1), self.busy(g.port, b, 2)
        # the third connection is not served while two are busy
        c3 = Client(g.port)
        self.addCleanup(c3.close)
        c3.send(build_request("GET", "/3"))
        self.assertTrue(c3.silent_for(1.0), "a third connection was served")
        # one is answered, and idle: the waiting one takes its place
        self.finish(c1, "/1")
        r = c3.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json()["path"], "/3")
        self.assertClosed(c1)
        self.finish(c2, "/2")
        self.assertEqual(c3.request("GET", "/3b").status, 200)

    def test_connection_limit_is_global_and_live(self):
        # two workers share one count (the kernel may give one worker every
        # connection), and a reloaded limit applies without a restart
        b = self.own_backend("b")
        cfg = gateway_config(upstreams={"b": upstream_cfg(b)},
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}],
                             workers=2, limits={"max_connections": 3})
        g = self.own_gateway(cfg)
        cs = [self.busy(g.port, b, n) for n in (1, 2, 3)]
        extra = Client(g.port)
        self.addCleanup(extra.close)
        extra.send(build_request("GET", "/extra"))
        self.assertTrue(extra.silent_for(1.0), "a fourth connection was served")
        # a higher limit, by SIGHUP: the waiting connection is served
        cfg["limits"]["max_connections"] = 4
        g.reload(cfg)
        r = extra.read_response()
        self.assertEqual((r.status, r.json()["path"]), (200, "/extra"))
        for n, c in enumerate(cs, 1):
            self.finish(c, "/%d" % n)


if __name__ == "__main__":
    main()
