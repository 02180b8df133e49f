#!/usr/bin/env python3
"""test_admin_canary.py - staged rollouts (issue 26, part 3): a write with
?canary=P serves P % of new requests from the proposed config beside the live
one and promotes or rolls it back by itself.

Under steady load from a pool of client threads (keep-alive connections,
every request's status and start time kept): a push pointing the busy route
at a dead pool (a port nothing listens on) with canary=10, canary_key=request
is rolled back by itself, about 10 % of the requests of the window fail and
none after it, and GET /config never changed; a good push is promoted with
no failed request and GET /config then shows it. A restart during a rollout
comes back on the baseline (nothing was persisted). A write during a rollout
is a 409 naming it, a dry run is not; POST /rollout/abort and
/rollout/promote act by hand (409 when none runs); a SIGHUP that replaces the
baseline aborts a rollout first (one that changes nothing or is refused does
not); /status's rollout object in each state. canary_key=client_ip keeps a
client (its X-Forwarded-For address from a trusted proxy, by the listener's
client_ip) on one arm, and each arm's upstream gets its X-Real-IP. A
canary that changes the listeners or log_level is refused. Every wait is
bounded; no assertion is on timing."""
import http.client
import json
import os
import signal
import threading
import time

from adminlib import (TIMEOUT, AdminCase, Admin, Gateway, admin_port, free_port, gateway_config,
                      start_gateway, upstream_cfg, wait_for, main)


class Load:
    """<n> client threads sending GET <path> over keep-alive connections to
    <port> until stopped; each request's (start, status, backend) is kept
    (status 0: the connection failed)."""

    def __init__(self, port, path="/api/x", n=4, headers=None):
        self.port, self.path, self.n = port, path, n
        self.headers = headers or {}
        self.stop_at = None
        self.done = threading.Event()
        self.results = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(n)]

    def start(self):
        self.deadline = time.monotonic() + 120  # bounded even if never stopped
        for t in self.threads:
            t.start()
        return self

    def run(self):
        conn, mine = None, []
        while not self.done.is_set() and time.monotonic() < self.deadline:
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
                conn.request("GET", self.path, headers=self.headers)
                r = conn.getresponse()
                r.read()
                mine.append((t0, r.status, r.getheader("X-Backend")))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                mine.append((t0, 0, None))
                if conn:
                    conn.close()
                conn = None
        if conn:
            conn.close()
        with self.lock:
            self.results.extend(mine)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(TIMEOUT * 2)
        self.results.sort()
        return self.results


def failed(rs):
    return [r for r in rs if r[1] == 0 or r[1] >= 500]


class CanaryCase(AdminCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b1 = cls.shared_backend("b1", threads=2)
        cls.b2 = cls.shared_backend("b2", threads=2)

    def make_config(self, **sections):
        dead = "127.0.0.1:%d" % free_port()
        ups = {"good": upstream_cfg(self.b1), "good2": upstream_cfg(self.b2),
               "dead": upstream_cfg(dead, connect_timeout_ms=1000)}
        routes = [{"id": "api", "path": "/api/{rest}", "upstream": "good"}]
        return gateway_config(upstreams=ups, routes=routes, **sections)

    def route(self, upstream):
        return {"id": "api", "path": "/api/{rest}", "upstream": upstream}

    def status(self, a):
        r = a.get("/status")
        self.assertStatus(r, 200)
        return r.json["rollout"]

    def wait_state(self, a, state, timeout=None):
        """Waits until the rollout ends (or is <state>); it must be <state>."""
        def ended():
            ro = self.status(a) or {}
            return (ro.get("state") == state or ro.get("state") not in (None, "running")) and ro

        ro = wait_for(ended, timeout=timeout or TIMEOUT * 3, interval=0.05,
                      what="rollout state %s" % state)
        self.assertEqual(ro["state"], state, ro)
        return ro

    def test_bad_push_rolls_back_under_load(self):
        gw = self.own_gateway(self.make_config())
        a = self.admin_for(gw)
        self.assertIsNone(self.status(a))
        before = a.get("/config").body
        load = Load(gw.port).start()
        time.sleep(1)  # steady load first
        t_start = time.monotonic()  # a request sent from here on may take the canary
        r = a.put("/routes/api?canary=10&canary_key=request&canary_s=10", self.route("dead"))
        self.assertStatus(r, 202)
        ro = r.json["rollout"]
        self.assertEqual((ro["state"], ro["percent"], ro["key"], ro["window_s"]),
                         ("running", 10, "request", 10), r)
        self.assertEqual(ro["what"], "PUT /routes/api")
        st = self.wait_state(a, "rolled_back", timeout=30)
        t_back = time.monotonic()
        self.assertIn("Agresti-Caffo", st["reason"])
        self.assertGreater(st["canary"]["failed"], 0, st)
        self.assertEqual(st["baseline"]["failed"], 0, st)
        time.sleep(1)  # the load goes on after the rollback
        rs = load.stop()
        window = [x for x in rs if t_start <= x[0] < t_back]
        after = [x for x in rs if x[0] > t_back + 0.05]
        self.assertGreater(len(window), 20)
        self.assertGreater(len(after), 20)
        share = len(failed(window)) / len(window)
        # about 10 %: each request draws; a small window leaves room for chance
        self.assertLess(share, 0.25, (len(failed(window)), len(window)))
        self.assertEqual(failed(after), [])
        self.assertEqual(failed([x for x in rs if x[0] < t_start]), [])
        self.assertEqual(a.get("/config").body, before)
        self.assertRegex(gw.log(), r"audit: .* started a rollout of PUT /routes/api")
        self.assertRegex(gw.log(), r"audit: rollout of PUT /routes/api rolled back: canary failed")

    def test_good_push_is_promoted(self):
        # latency judged only when the canary's median is twice the baseline's:
        # a loaded test machine's (or a sanitizer's) noise is not this test's
        # subject (tests/admin/test_rollout.c is)
        gw = self.own_gateway(self.make_config(rollout={"latency_pct": 100}))
        a = self.admin_for(gw)
        gen = a.generation()
        load = Load(gw.port).start()
        time.sleep(0.5)
        r = a.put("/routes/api?canary=10&canary_s=3&canary_key=request", self.route("good2"))
        self.assertStatus(r, 202)
        self.assertEqual(a.generation(), gen)  # nothing live changed yet
        st = self.wait_state(a, "promoted", timeout=30)
        self.assertGreater(st["canary"]["requests"], 20, st)
        self.assertEqual(st["canary"]["failed"], 0, st)
        time.sleep(0.5)
        rs = load.stop()
        self.assertEqual(failed(rs), [])
        self.assertGreater(a.generation(), gen)
        self.assertEqual(a.get("/routes/api").json["upstream"], "good2")
        self.assertEqual(rs[-1][2], "b2")  # the last requests go to the new pool
        self.assertRegex(gw.log(), r"audit: rollout of PUT /routes/api promoted: generation")

    def test_restart_during_rollout_is_on_baseline(self):
        state = self.tmp.file("state-restart")
        cfg = self.make_config(admin={"address": "127.0.0.1:%d" % free_port(),
                                      "state_dir": state})
        g = Gateway(self.tmp, cfg, name="restart")
        self.addCleanup(g.stop)
        start_gateway(g)
        a = Admin(admin_port(cfg))
        self.addCleanup(a.close)
        before = a.get("/config").body
        r = a.put("/config?canary=50&canary_s=60",
                  dict(cfg, routes=[self.route("good2")]))
        self.assertStatus(r, 202)
        self.assertEqual(self.status(a)["state"], "running")
        since = g.log_size()
        g.signal(signal.SIGTERM)
        g.proc.wait(TIMEOUT * 2)
        # the drain ended the rollout first: nothing of it can be promoted
        with open(g.log_path, "rb") as f:
            f.seek(since)
            self.assertRegex(f.read().decode(errors="replace"),
                             r"audit: rollout of PUT /config rolled back: aborted: the process "
                             r"is stopping")
        a.close()
        start_gateway(g)
        self.assertEqual(a.get("/config").body, before)
        self.assertIsNone(self.status(a))
        self.assertEqual(a.get("/routes/api").json["upstream"], "good")

    def test_by_hand_and_refusals(self):
        gw = self.own_gateway(self.make_config())
        a = self.admin_for(gw)
        for ep in ("/rollout/promote", "/rollout/abort"):
            r = a.post(ep)
            self.assertStatus(r, 409)
            self.assertIn("no rollout", r.json["error"])
        # bad options
        for q in ("canary=0", "canary=100", "canary=x", "canary=5&canary_key=ip",
                  "canary=5&canary_s=0", "canary_s=5", "canary=5&canary_threshold=-1"):
            r = a.put("/routes/api?" + q, self.route("good2"))
            self.assertStatus(r, 400, q)
        r = a.put("/routes/api?canary=20&canary_s=60", self.route("good2"))
        self.assertStatus(r, 202)
        ro = r.json["rollout"]
        for k in ("state", "percent", "started", "window_s", "key", "what", "baseline",
                  "canary"):
            self.assertIn(k, ro)
        for k in ("requests", "failed", "p50_ms", "p99_ms"):
            self.assertIn(k, ro["canary"])
        self.assertEqual(ro["key"], "client_ip")
        self.assertRegex(ro["started"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        # a second write is refused, naming the rollout; a dry run is not
        for method, path, body in (("POST", "/routes", {"id": "x", "path": "/x",
                                                        "upstream": "good"}),
                                   ("DELETE", "/routes/api", None),
                                   ("PUT", "/upstreams/good2", upstream_cfg(self.b1)),
                                   ("PUT", "/config", gw.cfg)):
            r = a.request(method, path, body)
            self.assertStatus(r, 409, path)
            self.assertIn("a rollout of PUT /routes/api is running", r.json["error"])
        self.assertStatus(a.put("/config?dry_run=1", gw.cfg), 200)
        # abort by hand: the baseline stays
        r = a.post("/rollout/abort")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["rollout"]["state"], "rolled_back")
        self.assertIn("aborted by hand", r.json["rollout"]["reason"])
        self.assertEqual(a.get("/routes/api").json["upstream"], "good")
        self.assertStatus(a.post("/rollout/abort"), 409)
        # promote by hand: the canary's config is live
        gen = a.generation()
        self.assertStatus(a.put("/routes/api?canary=20&canary_s=60", self.route("good2")), 202)
        r = a.post("/rollout/promote")
        self.assertStatus(r, 200)
        self.assertEqual(r.json["rollout"]["state"], "promoted")
        self.assertGreater(a.generation(), gen)
        self.assertEqual(a.get("/routes/api").json["upstream"], "good2")
        self.assertEqual(data_backend(gw.port), "b2")
        # an upstream write and a delete as canaries
        self.assertStatus(a.put("/upstreams/good2?canary=20&canary_s=60",
                                upstream_cfg(self.b1)), 202)
        self.assertStatus(a.post("/rollout/promote"), 200)
        self.assertEqual(a.get("/upstreams/good2").json["servers"][0]["address"], self.b1.addr)
        # a SIGHUP that changes nothing (the file as it was) or is refused
        # leaves a rollout running; one that replaces the baseline aborts it
        self.assertStatus(a.put("/routes/api?canary=20&canary_s=60", self.route("good")), 202)
        since = gw.log_size()
        gw.signal(signal.SIGHUP)
        gw.wait_log(r"config reloaded: .* is unchanged since", since)
        self.assertEqual(self.status(a)["state"], "running")
        since = gw.log_size()
        gw.reload(text="{not json")
        gw.wait_log(r"reload refused", since)
        self.assertEqual(self.status(a)["state"], "running")
        since = gw.log_size()
        cfg = dict(gw.cfg, routes=gw.cfg["routes"] + [
            {"id": "extra", "path": "/extra", "response": {"status": 200}}])
        gw.reload(cfg)
        st = self.wait_state(a, "rolled_back")
        self.assertIn("aborted: a whole config replaces the baseline", st["reason"])
        gw.wait_log(r"audit: rollout of PUT /routes/api rolled back: aborted", since)

    def test_client_ip_key_keeps_a_client_on_one_arm(self):
        # the listener's own client_ip: a canary request reads its listener's
        # definition from the canary's config, as every request does from its own
        cfg = self.make_config()
        cfg["listeners"][0]["client_ip"] = {"source": "x_forwarded_for",
                                            "trusted": ["127.0.0.1/32"]}
        gw = self.own_gateway(cfg)
        a = self.admin_for(gw)
        self.assertStatus(a.put("/routes/api?canary=50&canary_s=60", self.route("good2")), 202)
        arms = {}
        for i in range(24):
            ip = "10.0.%d.%d" % (i, i + 1)
            seen = set()
            c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=TIMEOUT)
            for _ in range(6):  # one keep-alive connection, then fresh ones
                c.request("GET", "/api/x", headers={"X-Forwarded-For": ip})
                r = c.getresponse()
                echo = json.loads(r.read())
                self.assertEqual(r.status, 200)
                seen.add(r.getheader("X-Backend"))
                self.assertEqual([v for k, v in echo["headers"] if k.lower() == "x-real-ip"],
                                 [ip], echo)
            c.close()
            seen.add(data_backend(gw.port, {"X-Forwarded-For": ip}))
            self.assertEqual(len(seen), 1, (ip, seen))
            arms[ip] = seen.pop()
        self.assertEqual(set(arms.values()), {"b1", "b2"}, arms)
        # stopped with the rollout running: the canary is freed with the swap
        # (the sanitizer builds check it at the cleanup)
        self.assertEqual(self.status(a)["state"], "running")

    def test_whole_swap_keys_are_refused(self):
        gw = self.own_gateway(self.make_config())
        a = self.admin_for(gw)
        # a route that conflicts is the same 409 with ?canary as without
        dup = {"id": "dup", "path": "/api/{rest}", "upstream": "good"}
        for q in ("", "?canary=10"):
            r = a.request("POST", "/routes" + q, dup)
            self.assertStatus(r, 409, q)
            self.assertIn("conflicts", r.json["error"], q)
        more = dict(gw.cfg, listeners=gw.cfg["listeners"] +
                    [{"address": "127.0.0.1:%d" % free_port()}])
        r = a.put("/config?canary=10", more)
        self.assertStatus(r, 409)
        self.assertEqual(r.json["errors"][0]["path"], "/listeners")
        r = a.put("/config?canary=10", dict(gw.cfg, log_level="debug"))
        self.assertStatus(r, 409)
        self.assertEqual(r.json["errors"][0]["path"], "/log_level")
        self.assertIsNone(self.status(a))
        # a dry run with canary is a dry run
        r = a.put("/config?dry_run=1&canary=10", dict(gw.cfg, routes=[self.route("good2")]))
        self.assertStatus(r, 200)
        self.assertIsNone(self.status(a))


def data_backend(port, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        c.request("GET", "/api/x", headers=headers or {})
        r = c.getresponse()
        r.read()
        return r.getheader("X-Backend")
    finally:
        c.close()


if __name__ == "__main__":
    main()
