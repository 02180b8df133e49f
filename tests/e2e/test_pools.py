#!/usr/bin/env python3
"""test_pools.py - upstream pools end to end: what a pool keeps across swaps
(idle connections, counted as the backends' accepted connections, and its
servers' counters, for a route-only swap and for a changed pool), every
balancer's share of 10k requests against its weights, least_conn and
random_two preferring a fast backend to a slow one, the hash balancer
moving few keys when a server goes, and every request's start ending
(least_conn still splits evenly after failures, aborts and tunnels)."""
import http.server
import json
import socket
import threading
import time

from harness import (Client, GatewayCase, gateway_config, get, main, upstream_cfg, wait_for,
                     ws_handshake)

N = 10000  # requests per distribution check
TOLERANCE = 0.03  # of the share, in absolute terms


class PyBackend:
    """A real HTTP/1.1 server (Python's) that answers every request after
    <delay> seconds, with X-Backend: <name>; a path with "fail" in it is
    closed without an answer. It knows no WebSocket nor the query
    parameters of sy_test_backend."""

    def __init__(self, name, delay):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                if "fail" in self.path:
                    self.close_connection = True
                    return
                time.sleep(outer.delay)
                self.send_response(200)
                self.send_header("X-Backend", outer.name)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.name, self.delay = name, delay
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class PoolTest(GatewayCase):
    def reload_and_wait(self, g, cfg):
        since = g.log_size()
        g.reload(cfg)
        g.wait_log(r"config reloaded: generation (\d+)", since=since)

    def admin_get(self, g, path):
        port = int(g.cfg["admin"]["address"].rsplit(":", 1)[1])
        r = get(port, path)
        self.assertEqual(r.status, 200, r.body)
        return json.loads(r.body)

    def server_counts(self, g, pool):
        h = self.admin_get(g, "/upstreams/%s/health" % pool)
        return {s["address"]: s for s in h["servers"]}

    def shares(self, port, n, target="/x", headers=None):
        """Backend name -> requests, for <n> sequential requests on one
        keep-alive client connection; <headers>(i) gives each one's fields."""
        count = {}
        deadline = time.monotonic() + 120
        with Client(port) as c:
            for i in range(n):
                r = c.request("GET", target, headers=headers(i) if headers else None)
                self.assertEqual(r.status, 200, r)
                name = r.header("X-Backend")
                count[name] = count.get(name, 0) + 1
                self.assertLess(time.monotonic(), deadline, "too slow: %d of %d" % (i, n))
        return count

    def assertShares(self, count, weights, n):
        total = sum(weights.values())
        for name, w in weights.items():
            got = count.get(name, 0) / n
            self.assertAlmostEqual(got, w / total, delta=TOLERANCE,
                                   msg="%s: %r against weights %r" % (name, count, weights))

    # ---- state across swaps

    def test_route_only_swap_keeps_idle_connections_and_counters(self):
        b1 = self.own_backend("b1")
        cfg = gateway_config(upstreams={"u": upstream_cfg(b1)}, workers=1,
                             routes=[{"id": "a", "path": "/a/*{r}", "upstream": "u"}])
        g = self.own_gateway(cfg)
        with Client(g.port) as c:
            for i in range(5):
                self.assertEqual(c.request("GET", "/a/%d" % i).status, 200)
        self.assertEqual(b1.stats()["connections"], 1)
        cfg["routes"].append({"id": "b", "path": "/b/*{r}", "upstream": "u"})
        self.reload_and_wait(g, cfg)
        b1.reset()
        with Client(g.port) as c:
            for i in range(5):
                self.assertEqual(c.request("GET", "/b/%d" % i).status, 200)
        # the pooled connection served the new route: no new connect
        self.assertEqual(b1.stats()["connections"], 0)
        s = self.server_counts(g, "u")[b1.addr]
        self.assertEqual((s["requests"], s["connects"]), (10, 1))

    def test_changed_pool_keeps_the_idle_connections_of_servers_that_stay(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        cfg = gateway_config(upstreams={"u": upstream_cfg(b1)}, workers=1,
                             routes=[{"id": "a", "path": "/*{r}", "upstream": "u"}])
        g = self.own_gateway(cfg)
        with Client(g.port) as c:
            for i in range(4):
                self.assertEqual(c.request("GET", "/w/%d" % i).header("X-Backend"), "b1")
        self.assertEqual(b1.stats()["connections"], 1)
        cfg["upstreams"]["u"] = upstream_cfg(b1, b2)  # a changed pool: one server more
        self.reload_and_wait(g, cfg)
        b1.reset()
        seen = self.shares(g.port, 10, "/after")
        self.assertEqual(seen, {"b1": 5, "b2": 5})
        self.assertEqual(b1.stats()["connections"], 0, "b1's pooled connection was dropped")
        self.assertEqual(b2.stats()["connections"], 1)
        servers = self.server_counts(g, "u")
        self.assertEqual((servers[b1.addr]["requests"], servers[b1.addr]["connects"]), (9, 1))
        self.assertEqual((servers[b2.addr]["requests"], servers[b2.addr]["connects"]), (5, 1))
        # a server removed: its idle connection closes, the other's stays
        cfg["upstreams"]["u"] = upstream_cfg(b2)
        self.reload_and_wait(g, cfg)
        wait_for(lambda: b1.stats()["open"] == 0, timeout=10, what="b1's idle connection closed")
        b2.reset()
        self.assertEqual(self.shares(g.port, 3, "/last"), {"b2": 3})
        self.assertEqual(b2.stats()["connections"], 0)

    def test_changed_keepalive_keeps_counters_not_connections(self):
        """Idle connections are shared only by pools that keep as many per
        server and worker: another keepalive makes new connections, but the
        servers' counters go on."""
        b1 = self.own_backend("b1")
        cfg = gateway_config(upstreams={"u": upstream_cfg(b1, keepalive=4)}, workers=1,
                             routes=[{"id": "a", "path": "/*{r}", "upstream": "u"}])
        g = self.own_gateway(cfg)
        self.assertEqual(self.shares(g.port, 3, "/k"), {"b1": 3})
        cfg["upstreams"]["u"] = upstream_cfg(b1, keepalive=8)
        self.reload_and_wait(g, cfg)
        b1.reset()
        self.assertEqual(self.shares(g.port, 3, "/k2"), {"b1": 3})
        # other stack sizes: a new connection, but the counts went on
        self.assertEqual(b1.stats()["connections"], 1)
        s = self.server_counts(g, "u")[b1.addr]
        self.assertEqual((s["requests"], s["connects"]), (6, 2))

    # ---- every balancer

    def distribution(self, balance, **extra):
        bs = [self.own_backend("d%d" % i) for i in range(3)]
        weights = {"d0": 1, "d1": 2, "d2": 3}
        u = {"servers": [{"address": b.addr, "weight": weights[b.name]} for b in bs],
             "balance": balance}
        u.update(extra)
        g = self.own_gateway(gateway_config(upstreams={"u": u}, workers=1,
                                            routes=[{"id": "a", "path": "/*{r}",
                                                     "upstream": "u"}]))
        return g, weights

    def test_round_robin_follows_weights(self):
        g, weights = self.distribution("round_robin")
        self.assertShares(self.shares(g.port, N), weights, N)

    def test_least_conn_follows_weights(self):
        g, weights = self.distribution("least_conn")
        self.assertShares(self.shares(g.port, N), weights, N)

    def test_random_two_follows_weights(self):
        g, weights = self.distribution("random_two")
        self.assertShares(self.shares(g.port, N), weights, N)

    def test_hash_follows_weights_over_keys(self):
        g, weights = self.distribution("hash", hash_key="header:X-Key")
        self.assertShares(self.shares(g.port, N, headers=lambda i: [("X-Key", "k%d" % i)]),
                          weights, N)

    def test_hash_keys(self):
        """The same key goes to the same server, whatever else differs; each
        hash_key reads its own part of the request."""
        bs = [self.own_backend("h%d" % i) for i in range(4)]
        ups = {k: upstream_cfg(*bs, balance="hash", hash_key=v)
               for k, v in (("hdr", "header:X-User"), ("ck", "cookie:sid"), ("path", "path"),
                            ("ip", "client_ip"))}
        routes = [{"id": k, "path": "/%s/*{r}" % k, "upstream": k} for k in ups]
        g = self.own_gateway(gateway_config(upstreams=ups, routes=routes, workers=2))

        def who(target, headers=None):
            r = get(g.port, target, headers=headers)
            self.assertEqual(r.status, 200)
            return r.header("X-Backend")

        for i in range(20):
            user = "user-%d" % i
            self.assertEqual(len({who("/hdr/%d" % j, [("X-User", user)]) for j in range(5)}), 1)
            self.assertEqual(len({who("/ck/%d" % j, [("Cookie", "a=%d; sid=%s; z=1" % (j, user))])
                                  for j in range(5)}), 1)
            self.assertEqual(len({who("/path/%s?q=%d" % (user, j)) for j in range(5)}), 1)
        # different keys spread over the servers
        self.assertGreater(len({who("/hdr/x", [("X-User", "u%d" % i)]) for i in range(64)}), 2)
        self.assertGreater(len({who("/ck/x", [("Cookie", "sid=u%d" % i)]) for i in range(64)}), 2)
        self.assertGreater(len({who("/path/u%d" % i) for i in range(64)}), 2)
        # one client address: one server, on every connection
        self.assertEqual(len({who("/ip/%d" % i) for i in range(20)}), 1)
        # a request without the field or cookie still goes somewhere
        self.assertIn(who("/hdr/none"), {"h0", "h1", "h2", "h3"})
        self.assertIn(who("/ck/none", [("Cookie", "other=1")]), {"h0", "h1", "h2", "h3"})

    def test_hash_client_ip_follows_client_ip_strategy(self):
        """Under client_ip, hash_key client_ip hashes the derived address:
        one client behind the trusted proxy (127.0.0.1) sticks to one server
        whatever its connection, and different clients spread."""
        bs = [self.own_backend("c%d" % i) for i in range(4)]
        g = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(*bs, balance="hash", hash_key="client_ip")},
            routes=[{"id": "a", "path": "/*{r}", "upstream": "u"}], workers=2,
            client_ip={"source": "x_forwarded_for", "trusted": ["127.0.0.0/8"]}))

        def who(client, i):
            r = get(g.port, "/x/%d" % i, headers=[("X-Forwarded-For", client)])
            self.assertEqual(r.status, 200)
            return r.header("X-Backend")

        for n in range(10):
            client = "198.51.100.%d" % n
            self.assertEqual(len({who(client, i) for i in range(5)}), 1, client)
        self.assertGreater(len({who("203.0.113.%d" % n, 0) for n in range(64)}), 2)

    def test_hash_moves_few_keys_when_a_server_goes(self):
        bs = [self.own_backend("m%d" % i) for i in range(5)]
        keys = 2000
        cfg = gateway_config(upstreams={"u": upstream_cfg(*bs, balance="hash",
                                                          hash_key="header:X-Key")},
                             workers=2, routes=[{"id": "a", "path": "/*{r}", "upstream": "u"}])
        g = self.own_gateway(cfg)

        def mapping():
            out = {}
            with Client(g.port) as c:
                for i in range(keys):
                    r = c.request("GET", "/m", headers=[("X-Key", "key-%d" % i)])
                    self.assertEqual(r.status, 200)
                    out[i] = r.header("X-Backend")
            return out

        before = mapping()
        cfg["upstreams"]["u"] = upstream_cfg(*bs[:2], *bs[3:], balance="hash",
                                             hash_key="header:X-Key")
        self.reload_and_wait(g, cfg)
        after = mapping()
        moved = sum(1 for i in range(keys) if before[i] != after[i])
        self.assertNotIn("m2", after.values())
        # the removed server's keys (about 1/5) had to move; few others did
        self.assertLessEqual(moved, keys * 1.2 / 5, "moved %d of %d" % (moved, keys))
        self.assertGreaterEqual(moved, sum(1 for v in before.values() if v == "m2"))

    def prefers_fast(self, balance, share):
        fast = self.own_backend("fast")
        slow = PyBackend("slow", 0.05)
        self.addCleanup(slow.stop)
        g = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(fast, slow.addr, balance=balance)}, workers=1,
            routes=[{"id": "a", "path": "/*{r}", "upstream": "u"}]))
        count = {}
        lock = threading.Lock()
        errors = []

        def client(k):
            try:
                with Client(g.port) as c:
                    for i in range(50):
                        r = c.request("GET", "/f/%d/%d" % (k, i))
                        with lock:
                            count[r.header("X-Backend")] = count.get(r.header("X-Backend"), 0) + 1
            except Exception as e:  # reported below, not lost in the thread
                errors.append(e)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(sum(count.values()), 400)
        # round robin would give each half; the slow one holds its requests
        # 50 ms, so a balancer on requests in flight sends it fewer
        self.assertGreater(count.get("fast", 0), share * 400, count)

    def test_least_conn_prefers_the_fast_backend(self):
        self.prefers_fast("least_conn", 0.8)

    def test_random_two_prefers_the_fast_backend(self):
        # both draws land on the slow one a quarter of the time: about 3/4
        self.prefers_fast("random_two", 0.6)

    def test_every_request_start_ends(self):
        """Failures, retries, client aborts and tunnels each end their
        request: least_conn, which balances on requests in flight, still
        alternates sequential requests afterwards. The failures happen on one
        server (py fails /fail), the tunnels and the aborts on the other (py
        knows no WebSocket and no delay_ms): a request that never ended would
        leave one of them looking busier."""
        e1 = self.own_backend("e1")
        py = PyBackend("py", 0)
        self.addCleanup(py.stop)
        e2 = self.own_backend("e2")
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
        self.addCleanup(dead.close)
        dead_addr = "127.0.0.1:%d" % dead.getsockname()[1]
        # u neither retries py's failures nor ejects it (both on by default)
        ups = {"u": upstream_cfg(e1, py.addr, balance="least_conn", retries=0,
                                 outlier={"consecutive_failures": 0}),
               "r": upstream_cfg(dead_addr, e1, e2, balance="least_conn", retries=2)}
        g = self.own_gateway(gateway_config(
            upstreams=ups, workers=1,
            routes=[{"id": "u", "path": "/u/*{r}", "upstream": "u"},
                    {"id": "r", "path": "/r/*{r}", "upstream": "r"}]))
        statuses = [get(g.port, "/u/fail%d" % i).status for i in range(8)]
        self.assertIn(502, statuses)  # py's
        self.assertIn(200, statuses)  # e1's
        for i in range(6):  # connect failures retried on another server
            self.assertEqual(get(g.port, "/r/%d" % i).status, 200)
        for i in range(6):  # clients gone while e1 is slow
            c = Client(g.port)
            c.send(b"GET /u/a%d?delay_ms=300 HTTP/1.1\r\nHost: x\r\n\r\n" % i)
            time.sleep(0.02)
            c.close()
        for i in range(4):  # WebSocket tunnels to e1, opened and closed
            c = Client(g.port)
            r, _ = ws_handshake(c, "/u/ws%d" % i)
            self.assertIn(r.status, (101, 200))
            c.close()
        time.sleep(0.6)  # the slow answers come and the tunnels' ends are seen
        seen = self.shares(g.port, 40, "/u/even")
        self.assertEqual(sum(seen.values()), 40)
        # each its turn, give or take where the virtual times stood (a
        # request that never ended would hold one of them back for good)
        self.assertGreaterEqual(min(seen.get("e1", 0), seen.get("py", 0)), 18, seen)
        # the dead server's turns retry on the others: near even, never one
        # server holding a leaked count
        seen = self.shares(g.port, 40, "/r/even")
        self.assertEqual(sum(seen.values()), 40)
        self.assertGreaterEqual(min(seen.get("e1", 0), seen.get("e2", 0)), 12, seen)


if __name__ == "__main__":
    main()
