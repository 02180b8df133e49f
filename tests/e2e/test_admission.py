#!/usr/bin/env python3
"""test_admission.py - who gets a place among limits.max_connections: at the
cap an idle keep-alive connection is closed for a new one (the oldest of
its worker, or another worker's when the accepting one has none);
connections that have not sent a whole first head have their own budget,
limits.max_pending_connections, and timeouts.client_header_ms from the
accept on; the descriptor limit is raised at the start, a low one is
warned about, and accept failures at it pause accepting instead of filling
the log."""
import re
import resource
import signal
import socket
import subprocess
import time

from harness import (Client, GatewayCase, gateway_config, main, metrics_text, self_signed,
                     upstream_cfg, wait_for)

LOCAL = [{"id": "local", "path": "/*{r}", "response": {"body": "local\n"}}]
FAST = 5  # seconds a client waits for an answer that must come at once


def metric(gw, name):
    m = re.search(r"^%s (\d+)$" % re.escape(name), metrics_text(gw), re.M)
    return int(m.group(1))


def conns_open(gw):
    return metric(gw, "switchyard_connections_open")


def reclaimed(gw, reason):
    return metric(gw, 'switchyard_connections_reclaimed_total{reason="%s"}' % reason)


def worker_of(resp):
    """The worker that answered: digits 8-9 of the request id are its number."""
    return int(resp.header("X-Request-Id")[8:10], 16)


def still_open(sock):
    """Whether the gateway has not closed <sock> (which sent nothing)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


class AdmissionTest(GatewayCase):
    def gateway(self, **kw):
        g = self.own_gateway(gateway_config(**kw))
        # the start's probe connections are gone: every place is ours
        wait_for(lambda: conns_open(g) == 0, what="no connection open")
        return g

    def client(self, port, timeout=FAST):
        c = Client(port, timeout=timeout)
        self.addCleanup(c.close)
        return c

    def test_the_oldest_idle_connection_makes_room(self):
        g = self.gateway(routes=LOCAL, workers=1, limits={"max_connections": 20},
                         timeouts={"client_idle_ms": 600000})
        idle = []
        for i in range(20):
            c = self.client(g.port)
            self.assertEqual(c.request("GET", "/idle/%d" % i).status, 200)
            idle.append(c)
        # at the cap: each new client is served at once, and the oldest idle
        # connection left in its place, in the order they went idle
        for k in range(3):
            r = self.client(g.port).request("GET", "/new/%d" % k)
            self.assertEqual(r.status, 200)
            self.assertTrue(idle[k].wait_closed(FAST), "idle connection %d still open" % k)
        self.assertEqual(reclaimed(g, "idle"), 3)
        self.assertEqual(reclaimed(g, "pending"), 0)
        # the younger ones were not touched, and the cap holds
        for i, c in enumerate(idle[3:], 3):
            self.assertEqual(c.request("GET", "/again/%d" % i).status, 200)
        self.assertEqual(conns_open(g), 20)

    def test_another_workers_idle_connection_makes_room(self):
        # the kernel hashes a new connection to a worker that may hold no idle
        # connection while another does: that one closes its oldest
        b = self.own_backend("b")
        g = self.gateway(upstreams={"b": upstream_cfg(b)},
                         routes=[{"id": "up", "path": "/up/*{r}", "upstream": "b"}] + LOCAL,
                         workers=2, limits={"max_connections": 20},
                         timeouts={"client_idle_ms": 600000, "client_body_ms": 600000})
        held = []
        for i in range(20):
            c = self.client(g.port)
            r = c.request("GET", "/fill/%d" % i)
            self.assertEqual(r.status, 200)
            held.append((c, worker_of(r)))
        # worker 0's connections turn busy: a body the upstream waits for
        busy = [c for c, w in held if w == 0]
        if len(busy) == len(held):
            self.skipTest("the kernel gave worker 0 every connection")
        for c in busy:
            c.send(b"POST /up/busy HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
        wait_for(lambda: b.stats()["requests"] >= len(busy), what="the busy requests upstream")
        for k in range(40):  # until the kernel gives worker 0 one (2^-40 that it never does)
            r = self.client(g.port).request("GET", "/new/%d" % k)
            self.assertEqual(r.status, 200)
            if worker_of(r) == 0:
                break
        else:
            self.fail("no new connection went to worker 0")
        self.assertEqual(reclaimed(g, "idle"), k + 1)
        for c in busy:  # untouched, and they finish
            c.send(b"67890")
            r = c.read_response()
            self.assertEqual((r.status, r.json()["body_bytes"]), (200, 10))
        self.assertEqual(conns_open(g), 20)

    def test_silent_connections_do_not_lock_clients_out(self):
        # connections that send nothing hold max_pending_connections places at
        # most (a quarter of the cap by default): the oldest is closed for a
        # new one, and a client that sends its request is served
        g = self.gateway(routes=LOCAL, workers=1, limits={"max_connections": 20},
                         timeouts={"client_header_ms": 600000, "client_idle_ms": 600000})
        silent = []
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", g.port), timeout=FAST)
            self.addCleanup(s.close)
            silent.append(s)
        for k in range(3):
            self.assertEqual(self.client(g.port).request("GET", "/real/%d" % k).status, 200)
        wait_for(lambda: sum(map(still_open, silent)) <= 5, what="at most 5 silent ones open")
        left = sum(map(still_open, silent))
        # the oldest went first
        self.assertEqual([still_open(s) for s in silent], [False] * (60 - left) + [True] * left)
        self.assertEqual(reclaimed(g, "pending"), 60 - left)
        self.assertEqual(reclaimed(g, "idle"), 0)

    def test_the_header_timeout_closes_a_connection_that_sends_nothing(self):
        g = self.gateway(routes=LOCAL, workers=1,
                         timeouts={"client_header_ms": 300, "client_idle_ms": 600000})
        silent = self.client(g.port)
        self.assertTrue(silent.wait_closed(FAST), "a silent connection waited for client_idle_ms")
        # after a request the connection is kept: client_idle_ms applies
        kept = self.client(g.port)
        self.assertEqual(kept.request("GET", "/k").status, 200)
        self.assertTrue(kept.silent_for(1.0))
        self.assertEqual(kept.request("GET", "/k2").status, 200)

    def test_a_tls_handshake_never_begun_ends_at_client_header_ms(self):
        # the handshake is part of the first head's time: a client that never
        # sends its ClientHello is closed then, counted as a handshake timeout
        cfg = gateway_config(routes=LOCAL, workers=1,
                             timeouts={"client_header_ms": 300, "client_idle_ms": 600000})
        cfg["listeners"][0]["tls"] = {"certificates": [self_signed(self.tmp)]}
        g = self.own_gateway(cfg)
        s = socket.create_connection(("127.0.0.1", g.port), timeout=FAST)
        self.addCleanup(s.close)
        try:
            self.assertEqual(s.recv(1), b"", "a silent TLS connection waited for client_idle_ms")
        except ConnectionResetError:
            pass
        self.assertRegex(metrics_text(g),
                         r'switchyard_tls_handshake_failures_total\{reason="timeout"\} 1\n')

    def test_a_first_head_is_due_within_client_header_ms_of_the_accept(self):
        # a client that waits, then trickles its head: the deadline stays the
        # accept's, it does not start again at the first byte
        # (a deadline from the first byte would answer at 2.0 + 3.0 s at the
        # earliest; from the accept it answers at about 3.0 s)
        g = self.gateway(routes=LOCAL, workers=1,
                         timeouts={"client_header_ms": 3000, "client_idle_ms": 600000})
        c = self.client(g.port)
        t0 = time.monotonic()
        time.sleep(2.0)
        for byte in b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"y" * 200:
            c.send(bytes([byte]))
            if not c.silent_for(0.1):
                break
        self.assertEqual(c.read_response().status, 408)
        self.assertLess(time.monotonic() - t0, 4.3, "the deadline started at the first byte")

    def test_a_later_head_begun_is_reclaimable_as_a_first_one(self):
        # one cheap request, then part of the next head: such a connection
        # holds no place out of max_pending_connections, it is closed, oldest
        # first, for a new one as a first head's would be
        g = self.gateway(routes=LOCAL, workers=1,
                         limits={"max_connections": 20, "max_pending_connections": 20},
                         timeouts={"client_header_ms": 600000, "client_idle_ms": 600000})
        held = []
        for i in range(20):
            c = self.client(g.port)
            self.assertEqual(c.request("GET", "/a/%d" % i).status, 200)
            c.send(b"GET /b HTTP/1.1\r\nHost: x\r\n")
            held.append(c)
        self.assertTrue(held[-1].silent_for(0.3))  # the partial heads are read
        self.assertEqual(self.client(g.port).request("GET", "/new").status, 200)
        self.assertTrue(held[0].wait_closed(FAST), "the oldest partial head still open")
        self.assertEqual(reclaimed(g, "pending"), 1)
        self.assertEqual(reclaimed(g, "idle"), 0)
        # the younger ones were not touched: their heads finish
        for i, c in enumerate(held[1:4], 1):
            c.send(b"\r\n")
            self.assertEqual(c.read_response().status, 200, "connection %d" % i)
        self.assertEqual(conns_open(g), 20)

    def test_a_drain_closes_parked_connections(self):
        # a connection parked at the cap (accepted, never read) does not keep
        # a draining worker alive until drain_ms: it closes with the drain.
        # It parks only when it comes in after the last place went and
        # before the next sweep pauses the listener: tried a few times.
        g = self.gateway(routes=LOCAL, workers=1, limits={"max_connections": 1},
                         timeouts={"drain_ms": 60000, "client_body_ms": 600000,
                                   "client_idle_ms": 600000})
        for _ in range(10):
            busy = self.client(g.port)  # a body the gateway reads away
            busy.send(b"POST /busy HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
            self.assertEqual(busy.read_response().status, 200)
            parked = socket.create_connection(("127.0.0.1", g.port), timeout=FAST)
            self.addCleanup(parked.close)
            time.sleep(0.2)
            if conns_open(g) == 2:
                break
            # in the backlog instead: both go, and once more
            busy.send(b"67890")
            parked.close()
            wait_for(lambda: conns_open(g) <= 1, what="the connections gone")
            busy.close()
            wait_for(lambda: conns_open(g) == 0, what="no connection open")
        else:
            self.skipTest("no connection parked in 10 tries")
        self.assertTrue(still_open(parked))
        g.signal(signal.SIGTERM)
        busy.send(b"67890")  # the last request in flight ends
        self.assertTrue(busy.wait_closed(FAST))
        t0 = time.monotonic()
        try:
            g.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.fail("a parked connection kept the drain waiting for drain_ms")
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual(g.proc.returncode, 0)
        self.assertFalse(still_open(parked))


class DescriptorLimitTest(GatewayCase):
    def test_a_low_limit_warns_and_pauses_accepting(self):
        g = self.own_gateway(gateway_config(routes=LOCAL, workers=1,
                                            timeouts={"client_header_ms": 600000}),
                             nofile=(48, 48))
        self.assertRegex(g.log(), r"\[warn\] descriptor limit \(RLIMIT_NOFILE\) 48, hard 48: "
                                  r"limits.max_connections 10000 needs about \d+")
        metrics_text(g)  # the admin API has its socket: the start is over
        # more clients than descriptors: accept fails with EMFILE, and pauses
        since = g.log_size()
        clients = []
        for _ in range(80):
            s = socket.create_connection(("127.0.0.1", g.port), timeout=FAST)
            self.addCleanup(s.close)
            clients.append(s)
        g.wait_log(r"accept: Too many open files \(descriptor limit 48\): accepting pauses",
                   since=since)
        time.sleep(2.5)
        with open(g.log_path, "rb") as f:
            f.seek(since)
            lines = f.read().decode(errors="replace").count("Too many open files")
        self.assertLessEqual(lines, 4, "EMFILE lines in 2.5 s:\n" + g.log()[-3000:])
        # the clients go: accepting resumes
        for s in clients:
            s.close()
        with Client(g.port, timeout=10) as c:
            self.assertEqual(c.request("GET", "/after").status, 200)

    def test_the_soft_limit_is_raised_to_the_hard_one(self):
        hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
        if hard < 1024:
            self.skipTest("hard descriptor limit %d" % hard)
        cfg = gateway_config(routes=LOCAL, workers=1, limits={"max_connections": 100})
        g = self.own_gateway(cfg, nofile=(200, hard))
        with open("/proc/%d/limits" % g.pid()) as f:
            self.assertRegex(f.read(), r"Max open files\s+%d\s+%d\s" % (hard, hard))
        self.assertIn("descriptor limit (RLIMIT_NOFILE) raised from 200 to %d" % hard, g.log())
        self.assertNotIn("[warn] descriptor limit", g.log())
        # a cap that the limit does not cover, pushed live: warned about
        cfg["limits"]["max_connections"] = hard
        g.reload(cfg)
        g.wait_log(r"\[warn\] descriptor limit \(RLIMIT_NOFILE\) %d, hard %d: "
                   r"limits.max_connections %d needs about" % (hard, hard, hard))


if __name__ == "__main__":
    main()
