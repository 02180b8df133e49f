#!/usr/bin/env python3
"""test_limits.py - an upstream pool's retries, retry budget, connection
limits and request buffering (issue 12), end to end: the real gateway in
front of sy_test_backend and Python http.server processes (py_backend.py).

- retry_on_status: a GET answered 503 goes on to the other server; a POST
  is never sent twice; the retry budget caps the extra load (backend hits
  counted) and counts what it refused, also across pushes that change the
  pool during the outage.
- max_connections / max_pending / queue_timeout_ms: a full queue answers
  503 with Retry-After at once, a queued request is served when the slot
  frees, a request that waits too long is answered 503, and queued again
  after a wake-up it keeps the deadline of its first wait; a push that
  changes the pool keeps the slots its older requests hold, and the order
  of its queue (those queued before it go first); a server back up serves
  the queue without waiting for a busy one's slot.
- a streamed POST goes on after a refused connect, its body still unsent;
- request_buffering: a chunked upload reaches a Content-Length-only
  backend whole; over max_buffered_body_bytes answers 413; a buffered POST
  goes on after a connect failure but never after its body reached a
  server.
Every loop is bounded; nothing asserts a duration, only orders of events.
"""
import json
import os
import select
import subprocess
import sys
import threading
import urllib.request

import harness
from harness import (Client, GatewayCase, build_request, chunked, free_port, gateway_config,
                     main, metrics_text, upstream_cfg, wait_for)
from test_health import admin_accepts, health

PY_BACKEND = os.path.join(harness.HERE, "py_backend.py")


class PyBackend:
    """One py_backend.py process (Python's http.server)."""

    def __init__(self, tmp, name, status=200, delay_ms=0):
        self.tmp, self.name, self.status, self.delay_ms = tmp, name, status, delay_ms
        self.proc, self.port = None, 0

    def start(self):
        pf = self.tmp.file("py-%s.port" % self.name)
        self.proc = subprocess.Popen(
            [sys.executable, PY_BACKEND, "--port-file", pf, "--status", str(self.status),
             "--delay-ms", str(self.delay_ms)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        harness._live.append(self.proc)
        self.port = harness.wait_port_file(self.proc, pf, "py backend %s" % self.name)
        return self

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def hits(self):
        with Client(self.port) as c:
            return json.loads(c.request("GET", "/__hits").body)["hits"]

    def stop(self):
        harness._killpg(self.proc, 15)
        self.proc.wait(harness.TIMEOUT)
        if self.proc in harness._live:
            harness._live.remove(self.proc)


def metrics(gw, upstream="u"):
    """The switchyard_upstream_* lines of /metrics labelled only with pool
    <upstream>, by name without the label (the admin API may still be
    starting: waited for)."""
    text = metrics_text(gw)
    label = '{upstream="%s"}' % upstream
    out = {}
    for line in text.splitlines():
        if line.startswith("switchyard_upstream_") and " " in line:
            k, v = line.split(" ", 1)
            if k.endswith(label):
                out[k[:-len(label)]] = float(v)
    return out


def burst(gw, n):
    """The statuses of <n> GETs sent to <gw> at the same instant, each on a
    connection of its own."""
    statuses = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def one(i):
        with Client(gw.port) as c:
            go.wait(harness.TIMEOUT)
            r = c.request("GET", "/b/%d" % i)
            with lock:
                statuses.append(r.status)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(harness.TIMEOUT * 2)
    return statuses


def put_upstream(gw, name, u):
    """PUT /upstreams/<name> with definition <u>; asserts the 200."""
    req = urllib.request.Request(
        "http://%s/upstreams/%s" % (gw.cfg["admin"]["address"], name), method="PUT",
        data=json.dumps(u).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=harness.TIMEOUT) as r:
        assert r.status == 200, r.status


class LimitsCase(GatewayCase):
    def py_backend(self, name, **kw):
        b = PyBackend(self.tmp, name, **kw)
        self.addCleanup(b.stop)
        return b.start()


class RetryOnStatusTest(LimitsCase):
    def test_503_goes_to_the_other_server(self):
        bad = self.py_backend("bad", status=503)
        good = self.own_backend("good")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(bad.addr, good, retries=1, retry_on_status=[503])},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        with Client(gw.port) as c:
            for i in range(6):
                r = c.request("GET", "/g/%d" % i)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["backend"], "good")
        # each one the bad server answered went on once
        hits = bad.hits()
        self.assertGreaterEqual(hits, 3)
        self.assertEqual(metrics(gw)["switchyard_upstream_retries_total"], hits)
        self.assertIn("answered 503; retrying on another server", gw.log())
        # a POST reached the bad server: its 503 is the answer, never a second send
        with Client(gw.port) as c:
            statuses = [c.request("POST", "/p/%d" % i, body=b"x" * 10).status for i in range(4)]
        self.assertEqual(sorted(set(statuses)), [200, 503], statuses)
        self.assertEqual(bad.hits(), hits + statuses.count(503))
        self.assertEqual(metrics(gw)["switchyard_upstream_retries_total"], hits)

    def test_budget_caps_the_extra_load(self):
        # two slow servers that always answer 503: without a budget each of
        # N requests in flight at once would be sent twice
        a = self.py_backend("a", status=503, delay_ms=800)
        b = self.py_backend("b", status=503, delay_ms=800)
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(a.addr, b.addr, retries=1, retry_on_status=[503],
                                         retry_budget_percent=10)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        n = 30
        self.assertEqual(burst(gw, n), [503] * n)
        hits = a.hits() + b.hits()
        m = metrics(gw)
        # retries in flight at most max(3, 10 % of those in flight): far
        # below one per request
        self.assertLess(hits, n + n // 2, (hits, m))
        self.assertEqual(hits, n + m["switchyard_upstream_retries_total"], m)
        self.assertGreater(m["switchyard_upstream_retry_budget_exhausted_total"], 0, m)


    def test_a_push_storm_does_not_refill_the_budget(self):
        # an outage: "fast" answers 503 at once, "slow" after 60 s (after the
        # test, however loaded the machine: its answers never count). Round
        # robin sends some of each wave's first tries to fast (a new pool's
        # first pick is fast); their retries go to slow and stay there, so
        # the first wave spends the budget's floor (3 retries). Each push
        # between the waves changes the pool (its percent): the new version
        # must find the budget spent by the old one's retries still in
        # flight, not a fresh floor. (How many first tries go to fast
        # depends on how the retries' picks interleave with them: counted.)
        fast = self.py_backend("fast", status=503)
        slow = self.py_backend("slow", status=503, delay_ms=60000)

        def pool(percent):
            return upstream_cfg(fast.addr, slow.addr, retries=1, retry_on_status=[503],
                                retry_budget_percent=percent)

        gw = self.own_gateway(gateway_config(
            upstreams={"u": pool(10)}, routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}],
            workers=1))
        metrics(gw)  # the admin API is up
        clients = []

        def settled():
            """(fast's tries, retries, refused) once every request sent has
            reached a server and every 503 from fast has had its retry
            admitted or refused; None before."""
            m = metrics(gw)
            f, r = fast.hits(), m["switchyard_upstream_retries_total"]
            x = m["switchyard_upstream_retry_budget_exhausted_total"]
            return (f, r, x) if f + slow.hits() - r == len(clients) and r + x == f else None

        try:
            before = 0
            for wave, percent in enumerate((10, 9, 8)):
                if wave:
                    put_upstream(gw, "u", pool(percent))
                for i in range(12 if wave == 0 else 4):
                    clients.append(Client(gw.port))
                    clients[-1].send(build_request("GET", "/w%d/%d" % (wave, i)))
                f, retries, refused = wait_for(settled, what="wave %d settled" % wave)
                self.assertGreaterEqual(f - before, 3 if wave == 0 else 1, (wave, f))
                before = f
            # the floor's 3 retries, all in the first wave; none after a push
            self.assertEqual((retries, refused), (3, f - 3), metrics(gw))
            self.assertEqual(slow.hits(), len(clients) - f + 3)
        finally:
            for c in clients:
                c.close()
            slow.stop()  # its tries end now: the gateway's drain need not wait for them

    def test_refused_connects_are_retried_outside_the_budget(self):
        # a server that died: every request that picks it in the same
        # instant is refused. Its retry is no extra load on any server, so
        # the budget (here its floor, 3) must not fail the burst.
        dead = "127.0.0.1:%d" % free_port()
        live = self.py_backend("live", delay_ms=800)
        # no ejection (on by default): every request that picks the dead
        # server is refused, not only those before its ejection
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(dead, live.addr, retries=1, retry_budget_percent=10,
                                         outlier={"consecutive_failures": 0})},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        n = 30
        self.assertEqual(burst(gw, n), [200] * n)
        self.assertEqual(live.hits(), n)
        m = metrics(gw)
        # far more retries than the budget's floor, none refused
        self.assertGreater(m["switchyard_upstream_retries_total"], 3, m)
        self.assertEqual(m["switchyard_upstream_retry_budget_exhausted_total"], 0, m)


class QueueTest(LimitsCase):
    def setUp(self):
        self.b = self.own_backend("b")

    def gateway(self, **limits):
        return self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(self.b, max_connections=1, **limits)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))

    @staticmethod
    def pending(c):
        """Whether nothing has arrived on client <c> yet."""
        return not select.select([c.sock], [], [], 0)[0]

    def test_overflow_is_503_at_once_and_the_queued_one_is_served(self):
        gw = self.gateway(max_pending=1, queue_timeout_ms=60000)
        slow, queued, over = Client(gw.port), Client(gw.port), Client(gw.port)
        try:
            slow.send(build_request("GET", "/slow?delay_ms=3000"))
            wait_for(lambda: self.b.stats()["requests"] == 1, what="the slow request upstream")
            queued.send(build_request("GET", "/queued"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 1,
                     what="the second request queued")
            r = over.request("GET", "/over")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("Retry-After"), "1")
            # answered while the slot is still taken and the queued one waits
            self.assertTrue(self.pending(slow))
            self.assertTrue(self.pending(queued))
            self.assertEqual(self.b.stats()["requests"], 1)
            self.assertEqual(slow.read_response().status, 200)
            r = queued.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["path"], "/queued")
        finally:
            for c in (slow, queued, over):
                c.close()
        m = metrics(gw)
        self.assertEqual(m["switchyard_upstream_queue_overflows_total"], 1, m)
        self.assertEqual(m["switchyard_upstream_queue_length"], 0, m)

    def test_queue_timeout_is_503(self):
        gw = self.gateway(max_pending=4, queue_timeout_ms=200)
        with Client(gw.port) as slow, Client(gw.port) as waiting:
            slow.send(build_request("GET", "/slow?delay_ms=4000"))
            wait_for(lambda: self.b.stats()["requests"] == 1, what="the slow request upstream")
            r = waiting.request("GET", "/waits")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("Retry-After"), "1")
            self.assertTrue(self.pending(slow))  # timed out before the slot freed
            self.assertEqual(slow.read_response().status, 200)
        m = metrics(gw)
        self.assertEqual(m["switchyard_upstream_queue_timeouts_total"], 1, m)
        self.assertEqual(self.b.stats()["requests"], 1)

    def test_no_queue_is_503_at_once(self):
        gw = self.gateway(max_pending=0)
        with Client(gw.port) as slow, Client(gw.port) as other:
            slow.send(build_request("GET", "/slow?delay_ms=3000"))
            wait_for(lambda: self.b.stats()["requests"] == 1, what="the slow request upstream")
            r = other.request("GET", "/other")
            self.assertEqual(r.status, 503)
            self.assertTrue(self.pending(slow))
            self.assertEqual(slow.read_response().status, 200)
            # the slot is free again: served
            self.assertEqual(other.request("GET", "/other").status, 200)

    def test_the_limit_holds_across_a_push(self):
        # a push that adds a server makes a new pool, with limits of its
        # own on the worker: the slow request of the old pool still holds
        # b's one slot there. The added server refuses connections, so a
        # request that tries it is retried on b: it must queue behind the
        # slow one, not reach b beside it.
        limits = dict(retries=1, max_pending=4, queue_timeout_ms=60000)
        gw = self.gateway(**limits)
        dead = "127.0.0.1:%d" % free_port()
        with Client(gw.port) as slow, Client(gw.port) as second:
            slow.send(build_request("GET", "/slow?delay_ms=5000"))
            wait_for(lambda: self.b.stats()["requests"] == 1, what="the slow request upstream")
            metrics(gw)  # the admin API is up
            put_upstream(gw, "u", upstream_cfg(self.b, dead, max_connections=1, **limits))
            second.send(build_request("GET", "/second"))
            wait_for(lambda: (metrics(gw)["switchyard_upstream_queue_length"] == 1 or
                              self.b.stats()["requests"] > 1),
                     what="the second request queued or upstream")
            self.assertEqual(self.b.stats()["requests"], 1)
            self.assertTrue(self.pending(slow))
            self.assertEqual(slow.read_response().status, 200)
            # the old pool's slot freed: the queued request of the new one goes on
            r = second.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["path"], "/second")
        self.assertEqual(self.b.stats()["requests"], 2)

    def test_a_push_keeps_the_queue_in_order(self):
        # a request queued before a push that changes the pool waits in the
        # old pool's limits, one queued after it in the new one's, for the
        # same slot: when the slot frees, the older request goes first
        gw = self.gateway(max_pending=4, queue_timeout_ms=60000)
        with Client(gw.port) as slow, Client(gw.port) as old, Client(gw.port) as new:
            slow.send(build_request("GET", "/slow?delay_ms=3000"))
            wait_for(lambda: self.b.stats()["requests"] == 1, what="the slow request upstream")
            old.send(build_request("GET", "/old?delay_ms=2000"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 1,
                     what="the old request queued")
            put_upstream(gw, "u", upstream_cfg(self.b, max_connections=1, max_pending=5,
                                               queue_timeout_ms=60000))
            new.send(build_request("GET", "/new?delay_ms=2000"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 2,
                     what="the new request queued")
            self.assertEqual(slow.read_response().status, 200)
            # each holds the one slot 2 s: the first answered is the first served
            ready, _, _ = select.select([old.sock, new.sock], [], [], harness.TIMEOUT)
            self.assertEqual(ready, [old.sock], "the request queued after the push went first")
            r = old.read_response()
            self.assertEqual((r.status, r.json()["path"]), (200, "/old"))
            r = new.read_response()
            self.assertEqual((r.status, r.json()["path"]), (200, "/new"))
        self.assertEqual(metrics(gw)["switchyard_upstream_queue_timeouts_total"], 0)

    def test_a_server_back_up_serves_the_queue(self):
        # b's one slot is taken and c is down: a request waits. When c
        # passes its checks again it has a slot free, and no request gives
        # one back: the queue must still go on, to c, while b is busy
        c = self.own_backend("c")
        c.stop()
        check = {"path": "/hz", "interval_ms": 100, "timeout_ms": 100,
                 "healthy_threshold": 1, "unhealthy_threshold": 1}
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(self.b, c, max_connections=1, max_pending=4,
                                         queue_timeout_ms=60000, health_check=check)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        wait_for(lambda: not health(gw)[0][c.addr]["healthy"], what="c down")
        with Client(gw.port) as slow, Client(gw.port) as queued:
            slow.send(build_request("GET", "/slow?delay_ms=10000"))
            # (b's own count has its health checks too)
            wait_for(lambda: health(gw)[0][self.b.addr]["in_flight"] == 1,
                     what="the slow request upstream")
            queued.send(build_request("GET", "/queued"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 1,
                     what="the second request queued")
            c.start()  # the same port: its check passes
            wait_for(lambda: health(gw)[0][c.addr]["healthy"], what="c back up")
            ready, _, _ = select.select([slow.sock, queued.sock], [], [], harness.TIMEOUT)
            self.assertEqual(ready, [queued.sock], "the queued request waited for b's slot")
            r = queued.read_response()
            self.assertEqual((r.status, r.header("X-Backend")), (200, "c"))
            self.assertEqual(slow.read_response().status, 200)
        self.assertEqual(metrics(gw)["switchyard_upstream_queue_timeouts_total"], 0)


class RetryQueueTest(LimitsCase):
    def bad_and_good(self, bad_name, queue_timeout_ms):
        """A pool of "bad" (a py_backend named <bad_name> answering 503) and
        "good" (sy_test_backend, reset), one slot each, and its gateway."""
        bad = self.py_backend(bad_name, status=503)
        good = self.own_backend("good")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(bad.addr, good, retries=1, retry_on_status=[503],
                                         max_connections=1, max_pending=4,
                                         queue_timeout_ms=queue_timeout_ms)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        good.reset()
        return good, gw

    @staticmethod
    def slow_then_queued(gw, good, slow, delay_ms, c, path):
        """Client <slow> holds good's slot for <delay_ms>; then <c>'s GET
        <path>, retried off bad, waits in the queue."""
        slow.send(build_request("GET", "/slow?delay_ms=%d" % delay_ms))
        wait_for(lambda: good.stats()["requests"] == 1, what="the slow request on good")
        c.send(build_request("GET", path))
        wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 1,
                 what="the retry of %s queued" % path)

    def test_a_queued_retry_waits_while_only_its_failed_server_is_free(self):
        # "bad" answers 503 at once, "good" holds its one slot with a slow
        # request: a GET retried off "bad" queues for "good". When bad's
        # slot frees, the queued retry cannot use it (tried): it must wait
        # for good's slot, not spin the worker re-queueing itself.
        good, gw = self.bad_and_good("bad", 60000)
        slow, r2, r3 = Client(gw.port), Client(gw.port), Client(gw.port)
        try:
            self.slow_then_queued(gw, good, slow, 2500, r2, "/two")
            retries = metrics(gw)["switchyard_upstream_retries_total"]
            # its retry frees bad's slot while /two waits: the wake-up
            r3.send(build_request("GET", "/three"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_retries_total"] == retries + 1,
                     what="the second retry")
            self.assertEqual(slow.read_response().status, 200)
            for c, path in ((r2, "/two"), (r3, "/three")):
                r = c.read_response()
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["path"], path)
        finally:
            for c in (slow, r2, r3):
                c.close()
        m = metrics(gw)
        self.assertEqual(m["switchyard_upstream_queue_length"], 0, m)
        self.assertEqual(good.stats()["requests"], 3)

    def test_a_requeued_request_keeps_its_first_deadline(self):
        # /a is retried off "bad" and queued for "good" (held by a slow
        # request). POSTs to "bad" (answered 503, never retried) free bad's
        # slot every ~300 ms: each wakes /a, which finds only its tried
        # server free and is queued again. queue_timeout_ms counts from its
        # first wait: it is answered 503 while the POSTs still come, long
        # before the slow request frees good.
        good, gw = self.bad_and_good("bad-2", 1000)  # not the other test's port file
        slow, a = Client(gw.port), Client(gw.port)
        try:
            self.slow_then_queued(gw, good, slow, 6000, a, "/a")
            posts = 0
            with Client(gw.port) as p:
                while posts < 15 and QueueTest.pending(a):
                    self.assertEqual(p.request("POST", "/p", body=b"x").status, 503)
                    posts += 1
                    select.select([], [], [], 0.3)
            self.assertFalse(QueueTest.pending(a), "/a still waits after %d wake-ups" % posts)
            r = a.read_response()
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.header("Retry-After"), "1")
            self.assertGreater(posts, 0)
            self.assertTrue(QueueTest.pending(slow))
            self.assertEqual(slow.read_response().status, 200)
        finally:
            for c in (slow, a):
                c.close()
        m = metrics(gw)
        self.assertEqual(m["switchyard_upstream_queue_timeouts_total"], 1, m)
        self.assertEqual(good.stats()["requests"], 1)

    def test_a_retry_after_a_sent_try_waits_anew(self):
        # /r queues (both slots held), gets bad's slot when a POST there
        # ends, is answered 503 by bad 1.5 s later and queues again for
        # good. That is a new wait: its first deadline (3 s after it first
        # queued) has about passed by then, and good frees only later (the
        # slow request's 4.2 s). /r must be served by good, not answered 503.
        bad = self.py_backend("bad-3", status=503, delay_ms=1500)
        good = self.own_backend("good")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(bad.addr, good, retries=1, retry_on_status=[503],
                                         max_connections=1, max_pending=4,
                                         queue_timeout_ms=3000)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1))
        good.reset()
        slow, post, r = Client(gw.port), Client(gw.port), Client(gw.port)
        try:
            slow.send(build_request("GET", "/slow?delay_ms=4200"))
            wait_for(lambda: good.stats()["requests"] == 1, what="the slow request on good")
            base = bad.hits()  # 1 when the slow GET went to bad first and was retried
            post.send(build_request("POST", "/p", body=b"x"))
            wait_for(lambda: bad.hits() == base + 1, what="the POST on bad")
            r.send(build_request("GET", "/r"))
            wait_for(lambda: metrics(gw)["switchyard_upstream_queue_length"] == 1,
                     what="/r queued")
            self.assertEqual(post.read_response().status, 503)
            self.assertEqual(slow.read_response().status, 200)
            resp = r.read_response()
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.json()["path"], "/r")
        finally:
            for c in (slow, post, r):
                c.close()
        m = metrics(gw)
        self.assertEqual(m["switchyard_upstream_queue_timeouts_total"], 0, m)
        self.assertEqual(bad.hits(), base + 2)  # the POST and /r's first try


class PerPoolTest(LimitsCase):
    """The retry and queue lines are per pool (upstream="NAME"): traffic on
    one pool leaves the other's at 0, and a push that changes a pool's
    definition keeps its counts."""

    POOL_LINES = ("switchyard_upstream_retries_total",
                  "switchyard_upstream_retry_budget_exhausted_total",
                  "switchyard_upstream_queue_length",
                  "switchyard_upstream_queue_overflows_total",
                  "switchyard_upstream_queue_timeouts_total")

    def assertQuiet(self, gw, name):
        m = metrics(gw, name)
        self.assertEqual({k: m.get(k) for k in self.POOL_LINES},
                         {k: 0 for k in self.POOL_LINES}, m)

    def test_retries_count_on_their_pool_and_survive_a_change(self):
        bad = self.py_backend("bad", status=503)
        good, other = self.own_backend("good"), self.own_backend("other")
        busy = upstream_cfg(bad.addr, good, retries=1, retry_on_status=[503])
        gw = self.own_gateway(gateway_config(
            upstreams={"busy": busy,
                       "quiet": upstream_cfg(other, retries=1, retry_on_status=[503])},
            routes=[{"id": "b", "path": "/b/*{p}", "upstream": "busy"},
                    {"id": "q", "path": "/*{p}", "upstream": "quiet"}], workers=1))
        with Client(gw.port) as c:
            for i in range(6):
                self.assertEqual(c.request("GET", "/b/%d" % i).status, 200)
                self.assertEqual(c.request("GET", "/q/%d" % i).status, 200)
        hits = bad.hits()
        self.assertGreaterEqual(hits, 3)
        self.assertEqual(metrics(gw, "busy")["switchyard_upstream_retries_total"], hits)
        self.assertQuiet(gw, "quiet")
        # one line per pool, no unlabelled sum
        text = metrics_text(gw)
        self.assertNotIn("\nswitchyard_upstream_retries_total ", text)
        # a changed definition (a weight, one more retry) is a new pool
        # under the same name: its count goes on from where it was
        put_upstream(gw, "busy", upstream_cfg(bad.addr, good, retries=2, retry_on_status=[503]))
        self.assertEqual(metrics(gw, "busy")["switchyard_upstream_retries_total"], hits)
        with Client(gw.port) as c:
            for i in range(4):
                self.assertEqual(c.request("GET", "/b/again/%d" % i).status, 200)
        self.assertGreater(bad.hits(), hits)
        self.assertEqual(metrics(gw, "busy")["switchyard_upstream_retries_total"], bad.hits())
        self.assertQuiet(gw, "quiet")

    def test_queue_counts_on_their_pool_and_survive_a_change(self):
        b, other = self.own_backend("b"), self.own_backend("other")
        busy = upstream_cfg(b, max_connections=1, max_pending=1, queue_timeout_ms=60000)
        gw = self.own_gateway(gateway_config(
            upstreams={"busy": busy, "quiet": upstream_cfg(other, max_connections=1,
                                                           max_pending=1)},
            routes=[{"id": "b", "path": "/b/*{p}", "upstream": "busy"},
                    {"id": "q", "path": "/*{p}", "upstream": "quiet"}], workers=1))
        slow, queued, over = Client(gw.port), Client(gw.port), Client(gw.port)
        try:
            slow.send(build_request("GET", "/b/slow?delay_ms=3000"))
            wait_for(lambda: b.stats()["requests"] == 1, what="the slow request upstream")
            queued.send(build_request("GET", "/b/queued"))
            wait_for(lambda: metrics(gw, "busy")["switchyard_upstream_queue_length"] == 1,
                     what="the second request queued")
            self.assertEqual(over.request("GET", "/b/over").status, 503)
            self.assertQuiet(gw, "quiet")
            # changed while a request waits in its queue: the one queued
            # leaves the count it joined (no -1 on the new pool, no 1 left)
            put_upstream(gw, "busy", dict(busy, max_pending=2))
            m = metrics(gw, "busy")
            self.assertEqual(m["switchyard_upstream_queue_length"], 1, m)
            self.assertEqual(m["switchyard_upstream_queue_overflows_total"], 1, m)
            self.assertEqual(slow.read_response().status, 200)
            self.assertEqual(queued.read_response().status, 200)
        finally:
            for c in (slow, queued, over):
                c.close()
        m = metrics(gw, "busy")
        self.assertEqual(m["switchyard_upstream_queue_length"], 0, m)
        self.assertEqual(m["switchyard_upstream_queue_overflows_total"], 1, m)
        with Client(gw.port) as c:
            self.assertEqual(c.request("GET", "/q/x").status, 200)
        self.assertQuiet(gw, "quiet")


class BufferingTest(LimitsCase):
    def test_chunked_upload_reaches_a_content_length_only_backend(self):
        py = self.py_backend("py")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(py.addr)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u", "request_buffering": True}],
            workers=1))
        data = bytes(range(256)) * (3 * 4096)  # 3 MiB
        parts = [data[i:i + 100000] for i in range(0, len(data), 100000)]
        with Client(gw.port) as c:
            r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")],
                          body=chunked(parts))
            self.assertEqual(r.status, 200, r)
            j = r.json()
            self.assertEqual(j["body_bytes"], len(data))
            self.assertEqual(j["content_length"], str(len(data)))
            self.assertIsNone(j["transfer_encoding"])
            import hashlib
            self.assertEqual(j["body_sha256"], hashlib.sha256(data).hexdigest())
            # Expect: 100-continue is answered by the gateway, which reads the body
            c2 = Client(gw.port)
            try:
                c2.send(build_request("PUT", "/e", headers=[("Expect", "100-continue"),
                                                            ("Content-Length", "5")]))
                c2.send(b"hello")
                r = c2.read_response()
                self.assertEqual(r.status, 200)
                self.assertEqual([i.status for i in r.interim], [100])
                self.assertEqual(r.json()["body_bytes"], 5)
            finally:
                c2.close()

    def test_over_the_limit_is_413(self):
        b = self.own_backend("b")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(b, request_buffering=True,
                                         max_buffered_body_bytes=1000)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"},
                    {"id": "big", "path": "/big/*{p}", "upstream": "u",
                     "max_buffered_body_bytes": 5000}],
            workers=1))
        b.reset()
        with Client(gw.port) as c:
            r = c.request("POST", "/x", body=b"y" * 1001)
            self.assertEqual(r.status, 413)
        with Client(gw.port) as c:
            r = c.request("POST", "/x", headers=[("Transfer-Encoding", "chunked")],
                          body=chunked([b"z" * 600, b"z" * 600]))
            self.assertEqual(r.status, 413)
        self.assertEqual(b.stats()["bytes_in"], 0)  # nothing went upstream
        with Client(gw.port) as c:
            r = c.request("POST", "/x", body=b"y" * 1000)  # at the limit: fine
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_framing"], "length")
            r = c.request("POST", "/big/x", headers=[("Transfer-Encoding", "chunked")],
                          body=chunked([b"z" * 2000, b"z" * 2000]))
            self.assertEqual(r.status, 200)  # the route's own limit
            self.assertEqual(r.json()["body_bytes"], 4000)
            self.assertEqual(r.json()["body_framing"], "length")

    def test_a_pool_replaced_while_a_body_is_buffered(self):
        # the request holds its pool's limits while its body is read: a
        # push that replaces the pool (its limits pruned at the next sweep)
        # must not free them under it (a use after free, seen by ASan)
        b = self.own_backend("b")
        up = upstream_cfg(b, retries=1, max_connections=4)
        gw = self.own_gateway(gateway_config(
            upstreams={"u": up},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u", "request_buffering": True}],
            workers=1))
        with Client(gw.port) as c:
            c.send(build_request("POST", "/slow-upload", headers=[("Content-Length", "10")]))
            c.send(b"01234")
            with Client(gw.port) as other:  # the worker has read the first one's head
                self.assertEqual(other.request("GET", "/other").status, 200)
            metrics(gw)  # the admin API is up
            put_upstream(gw, "u", dict(up, retries=2))
            # a request on the new pool, then a few sweeps (every 100 ms)
            with Client(gw.port) as other:
                self.assertEqual(other.request("GET", "/other").status, 200)
            select.select([], [], [], 0.5)
            c.send(b"56789")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body_bytes"], 10)

    def assert_post_sent_once(self, gw, b1, b2):
        """The server (b1 or b2, behind / with retries) reads the whole body,
        then resets: the POST is not sent again."""
        b1.reset()
        b2.reset()
        for i in range(4):
            with Client(gw.port) as c:
                r = c.request("POST", "/p%d?mode=reset" % i, body=b"x" * 5000)
                self.assertEqual(r.status, 502)
        self.assertEqual(b1.stats()["requests"] + b2.stats()["requests"], 4)

    def test_post_never_retried_once_its_body_was_sent(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        dead = "127.0.0.1:%d" % free_port()
        gw = self.own_gateway(gateway_config(
            # no ejection: a server that reset a POST stays in for the PUT
            upstreams={"u": upstream_cfg(b1, b2, retries=2, request_buffering=True,
                                         outlier={"consecutive_failures": 0}),
                       "d": upstream_cfg(dead, b1, retries=1, request_buffering=True)},
            routes=[{"id": "d", "path": "/d/*{p}", "upstream": "d"},
                    {"id": "r", "path": "/*{p}", "upstream": "u"}],
            workers=1))
        self.assert_post_sent_once(gw, b1, b2)
        # an idempotent PUT with the same buffered body is
        with Client(gw.port) as c:
            r = c.request("PUT", "/put?mode=reset", body=b"x" * 5000)
            self.assertEqual(r.status, 502)
        self.assertEqual(b1.stats()["requests"] + b2.stats()["requests"], 6)
        # a connect failure sent nothing: the buffered POST goes on
        with Client(gw.port) as c:
            for i in range(4):
                r = c.request("POST", "/d/%d" % i, body=b"q" * 3000)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_bytes"], 3000)

    def test_streamed_post_goes_on_after_a_refused_connect(self):
        # without request_buffering the body waits in the client's buffer
        # until the upstream connection is open: a refused connect took none
        # of it, so the POST goes to the next server whole (as nginx does);
        # once its body went to a server it is never sent again
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        dead = "127.0.0.1:%d" % free_port()
        gw = self.own_gateway(gateway_config(
            upstreams={"d": upstream_cfg(dead, b1, retries=1, keepalive=0),
                       "u": upstream_cfg(b1, b2, retries=2)},
            routes=[{"id": "d", "path": "/d/*{p}", "upstream": "d"},
                    {"id": "r", "path": "/*{p}", "upstream": "u"}],
            workers=1))
        for i in range(6):  # round robin: half of them pick the dead server first
            with Client(gw.port) as c:
                r = c.request("POST", "/d/%d" % i, body=b"q" * 3000)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_bytes"], 3000)
                r = c.request("POST", "/d/c%d" % i, headers=[("Transfer-Encoding", "chunked")],
                              body=chunked([b"w" * 1500, b"w" * 1500]))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_bytes"], 3000)
                self.assertEqual(r.json()["body_framing"], "chunked")
        self.assert_post_sent_once(gw, b1, b2)

    def test_a_slow_connect_is_not_the_clients_body_timeout(self):
        # the first server's connect hangs (its accept queue is full) for
        # longer than client_body_ms: the client, whose small body already
        # came, is not answered 408 while the gateway waits to send it, and
        # the retry on the live server answers
        hang = self.hanging_server()
        b = self.own_backend("b")
        gw = self.own_gateway(gateway_config(
            upstreams={"u": upstream_cfg(hang, b, retries=1, connect_timeout_ms=600,
                                         keepalive=0)},
            routes=[{"id": "r", "path": "/*{p}", "upstream": "u"}], workers=1,
            timeouts={"client_body_ms": 200}))
        for i in range(2):  # round robin: one of the two picks the hanging server first
            with Client(gw.port) as c:
                r = c.request("POST", "/s%d" % i, body=b"z" * 100)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["body_bytes"], 100)


if __name__ == "__main__":
    main()
