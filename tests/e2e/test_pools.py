#!/usr/bin/env python3
"""test_pools.py - upstream pools end to end: what a pool keeps across swaps
(idle connections, counted as the backends' accepted connections, and its
servers' counters, for a route-only swap and for a changed pool)."""
import json
import time

from harness import Client, GatewayCase, gateway_config, get, main, upstream_cfg, wait_for


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


if __name__ == "__main__":
    main()
