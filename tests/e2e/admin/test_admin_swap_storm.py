#!/usr/bin/env python3
"""test_admin_swap_storm.py - a route change costs live traffic nothing: 4
client threads make data-plane requests on keep-alive connections (a direct
answer, a proxied GET, a proxied POST with a body, a route that comes and
goes) while another thread pushes 200 changes through the admin API (route
adds, replacements, deletes, upstream changes and whole-config writes).
Zero failed requests, zero connection closes; afterwards every retired
snapshot is reclaimed although the connections stay open. Label
"concurrency": it also runs under TSan."""
import threading

from adminlib import (AdminCase, Client, answered_by, gateway_config, local_route,
                      upstream_cfg, wait_for, main)

CLIENTS = 4
CHANGES = 200


class SwapStormTest(AdminCase):
    def test_swap_storm(self):
        b1 = self.own_backend("b1", threads=2)
        b2 = self.own_backend("b2")
        stable = [local_route("stable", "/stable", methods=["GET"]),
                  {"id": "proxy", "path": "/p/*{rest}", "upstream": "u"}]
        cfg = gateway_config(upstreams={"u": upstream_cfg(b1), "spare": upstream_cfg(b2)},
                             routes=stable, workers=2)
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        st0 = api.get("/status").json

        stop = threading.Event()
        lock = threading.Lock()
        failures = []
        done = [0] * CLIENTS

        def fail(msg):
            with lock:
                failures.append(msg)
            stop.set()

        def client(n):
            try:
                c = Client(gw.port)
            except OSError as e:
                return fail("client %d: connect: %s" % (n, e))
            i = 0
            try:
                while not stop.is_set():
                    i += 1
                    step = i % 4
                    if step == 0:
                        r = c.request("GET", "/stable")
                        ok = r.status == 200 and answered_by(r) == "stable"
                    elif step == 1:
                        r = c.request("GET", "/p/c%d/%d" % (n, i))
                        ok = r.status == 200 and r.json()["path"] == "/p/c%d/%d" % (n, i)
                    elif step == 2:
                        body = b"x" * (i % 5000)
                        r = c.request("POST", "/p/post", body=body)
                        ok = r.status == 200 and r.json()["body_bytes"] == len(body)
                    else:
                        r = c.request("GET", "/churn/%d" % (i % 10))
                        ok = r.status == 404 or (r.status == 200 and
                                                 (answered_by(r) or "").startswith("churn"))
                    if not ok:
                        return fail("client %d request %d (step %d): %r" % (n, i, step, r))
                    if (r.header("Connection") or "").lower() == "close":
                        return fail("client %d request %d: Connection: close %r" % (n, i, r))
                    with lock:
                        done[n] += 1
            except Exception as e:  # Closed, timeouts, bad JSON: all failures
                fail("client %d request %d: %s: %s" % (n, i, type(e).__name__, e))
            finally:
                c.close()

        threads = [threading.Thread(target=client, args=(n,), daemon=True)
                   for n in range(CLIENTS)]
        for t in threads:
            t.start()
        wait_for(lambda: stop.is_set() or min(done) >= 5, what="clients running")

        # 200 changes while they run
        live = set()
        for k in range(CHANGES):
            if stop.is_set():
                break
            rid = "churn%d" % (k % 10)
            path = "/churn/%d" % (k % 10)
            if k % 50 == 49:
                routes = stable + [local_route(x, "/churn/" + x[5:]) for x in sorted(live)]
                doc = dict(cfg, routes=routes,
                           router={"merge_slashes": k % 100 == 49})
                r = api.put("/config", doc)
                want = 200
            elif k % 20 == 19:
                r = api.put("/upstreams/spare",
                            upstream_cfg(b2 if k % 40 == 19 else b1, keepalive=k % 7))
                want = 200
            elif rid in live and k % 3 == 0:
                r = api.delete("/routes/" + rid)
                live.discard(rid)
                want = 200
            elif rid in live:
                r = api.put("/routes/" + rid, local_route(rid, path))
                want = 200
            else:
                r = api.post("/routes", local_route(rid, path))
                live.add(rid)
                want = 201
            self.assertEqual(r.status, want, "change %d: %r" % (k, r))
            # interleave: some requests complete between two changes
            n = sum(done)
            wait_for(lambda: stop.is_set() or sum(done) >= n + 2, what="requests between swaps")

        # let every client make more requests on the last config, then stop
        after = list(done)
        wait_for(lambda: stop.is_set() or all(d >= a + 10 for d, a in zip(done, after)),
                 what="clients after the storm")
        stop.set()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a client thread hangs")
        self.assertEqual(failures, [], "%d failures, first: %s" % (len(failures), failures[:3]))
        self.assertTrue(all(d > 0 for d in done), done)
        self.assertGreaterEqual(sum(done), 2 * CHANGES)

        st = api.get("/status").json
        self.assertGreaterEqual(st["swaps"] - st0["swaps"], CHANGES - 10)  # identical configs
        # every old snapshot is freed once the workers moved on
        wait_for(lambda: api.get("/status").json["retired_snapshots"] == 0,
                 what="retired snapshots reclaimed")
        # the data plane still answers on the final config
        with Client(gw.port) as c:
            self.assertEqual(answered_by(c.request("GET", "/stable")), "stable")
            for x in live:
                self.assertEqual(answered_by(c.request("GET", "/churn/" + x[5:])), x)


if __name__ == "__main__":
    main()
