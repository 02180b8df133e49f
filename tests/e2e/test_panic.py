#!/usr/bin/env python3
"""test_panic.py - a pool's panic mode and slow start (upstream/balance.c,
gateway/health.c) with real backends that the tests take down and bring
back: with every server failing its active check a pool with "panic": true
still sends requests to all of them, one without answers 503 at once (no
server tried, Retry-After: 1), and either way the all-down transition is
logged and counted once, and so is the end of a panic when a server comes
back, and a push that turns panic on or off while every server is down is
logged once (not counted: the outage goes on); a server back up with slow_start_ms gets clearly fewer than its share
at the start of its ramp and its full share after it, with round_robin,
least_conn and random_two (hash does not ramp), and so does a server a push
adds to the pool.
Counts are of the backends' answers (X-Backend); proportions are asserted
with wide margins, never durations. Every wait is bounded (wait_for)."""
import re
import time

from harness import Client, GatewayCase, gateway_config, main, upstream_cfg, wait_for
from test_health import admin, admin_accepts, health, stamp

# the check's path answers 500 on every backend: both fail their checks
FAILING = {"path": "/hz?mode=status&status=500", "interval_ms": 100, "timeout_ms": 100,
           "healthy_threshold": 2, "unhealthy_threshold": 2}
PASSING = dict(FAILING, path="/hz")
# the two lines of a pool whose every server is down, with panic and without
PANIC = r"upstream u: every server is down: panic: requests go to all of them until one comes back"
NO_PANIC = r"upstream u: every server is down: requests get 503 until one comes back"


class PanicTest(GatewayCase):
    def gateway(self, ups):
        cfg = gateway_config(upstreams=ups, workers=1,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "u"}])
        gw = self.own_gateway(cfg)
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        return gw

    def answers(self, gw, n, path="/n"):
        """(status, X-Backend, Retry-After) of <n> requests on one connection."""
        got = []
        with Client(gw.port) as c:
            for i in range(n):
                r = c.request("GET", "%s/%d" % (path, i))
                got.append((r.status, r.header("X-Backend"), r.header("Retry-After")))
        return got

    def all_down_lines(self, gw):
        return re.findall(r"upstream u: every server is down", gw.log())

    def test_panic_spreads_then_503_without(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=FAILING, panic=True)})
        wait_for(lambda: health(gw)[1]["all_down"], what="both servers down")
        self.assertTrue(health(gw)[1]["panic"])
        gw.wait_log(r"upstream u: every server is down: panic: requests go to all of them")
        # panic: the backends answer, both of them (round robin over all)
        got = self.answers(gw, 20)
        self.assertEqual({st for st, _, _ in got}, {200}, got)
        self.assertEqual({b for _, b, _ in got}, {"b1", "b2"}, got)
        self.assertTrue(all(not health(gw)[0][b.addr]["healthy"] for b in (b1, b2)))
        # the transition is logged and counted once, not per request
        self.assertEqual(len(self.all_down_lines(gw)), 1)
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_all_down_total{upstream="u"} 1', m)
        self.assertIn('switchyard_upstream_panic{upstream="u"} 1', m)

        # panic off, the same servers and checks: their health is kept, and
        # every request is answered 503 by Switchyard (a backend would say
        # 200), with Retry-After as the queue's 503. The pool answers
        # otherwise now: logged once (not per request), the outage it is
        # in not counted again
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2, health_check=FAILING))
        self.assertEqual(st, 200)
        self.assertEqual((health(gw)[1]["all_down"], health(gw)[1]["panic"]), (True, False))
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_panic{upstream="u"} 0', m)
        got = self.answers(gw, 10)
        self.assertEqual(set(got), {(503, None, "1")}, got)
        gw.wait_log(NO_PANIC)
        self.assertEqual(len(re.findall(NO_PANIC, gw.log())), 1)
        self.assertEqual(len(self.all_down_lines(gw)), 2)
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_all_down_total{upstream="u"} 1', m)

        # checks that pass bring the pool back: logged once
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2, health_check=PASSING))
        self.assertEqual(st, 200)
        wait_for(lambda: not health(gw)[1]["all_down"], what="a server back")
        gw.wait_log(r"upstream u: server 127\.0\.0\.1:\d+ is up: the pool serves again")
        self.assertEqual({st for st, _, _ in self.answers(gw, 6)}, {200})
        self.assertEqual(len(self.all_down_lines(gw)), 2)
        self.assertEqual(len(re.findall(r"upstream u: server \S+ is up: the pool serves again",
                                        gw.log())), 1)

    def test_a_push_into_panic_while_all_are_down_says_so(self):
        # every server down and 503s, then a push turns panic on: a
        # transition of how the pool answers (requests reach the backends
        # again), logged once as the panic it is, while the outage goes on
        # (not counted again); a push that leaves panic as it is says
        # nothing, one that turns it off says so once
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=FAILING)})
        wait_for(lambda: health(gw)[1]["all_down"], what="both servers down")
        gw.wait_log(NO_PANIC)
        self.assertEqual(set(self.answers(gw, 4)), {(503, None, "1")})
        st, _ = admin(gw, "PUT", "/upstreams/u",
                      upstream_cfg(b1, b2, health_check=FAILING, panic=True))
        self.assertEqual(st, 200)
        self.assertEqual((health(gw)[1]["all_down"], health(gw)[1]["panic"]), (True, True))
        gw.wait_log(PANIC)
        got = self.answers(gw, 10)
        self.assertEqual({st for st, _, _ in got}, {200}, got)
        self.assertEqual(len(re.findall(PANIC, gw.log())), 1)
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_all_down_total{upstream="u"} 1', m)
        self.assertIn('switchyard_upstream_panic{upstream="u"} 1', m)
        # panic stays on (another key changes): nothing to say; then off
        st, _ = admin(gw, "PUT", "/upstreams/u",
                      upstream_cfg(b1, b2, health_check=FAILING, panic=True, max_pending=7))
        self.assertEqual(st, 200)
        since = gw.log_size()
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2, health_check=FAILING))
        self.assertEqual(st, 200)
        gw.wait_log(NO_PANIC, since=since)
        self.assertEqual(set(self.answers(gw, 4)), {(503, None, "1")})
        self.assertEqual(len(re.findall(PANIC, gw.log())), 1)
        self.assertEqual(len(re.findall(NO_PANIC, gw.log())), 2)
        self.assertEqual(len(self.all_down_lines(gw)), 3)
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_all_down_total{upstream="u"} 1', m)

    def test_a_server_back_ends_the_panic(self):
        # a pool in panic never stopped serving: a server back up ends the
        # panic (requests go to the servers up again), logged once as such,
        # not as the pool serving again
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=FAILING, panic=True)})
        wait_for(lambda: health(gw)[1]["panic"], what="both servers down: panic")
        st, _ = admin(gw, "PUT", "/upstreams/u",
                      upstream_cfg(b1, b2, health_check=PASSING, panic=True))
        self.assertEqual(st, 200)
        wait_for(lambda: all(s["healthy"] for s in health(gw)[0].values()), what="both back")
        over = r"upstream u: server 127\.0\.0\.1:\d+ is up: panic over: requests go to the " \
               r"servers that are up"
        gw.wait_log(over)
        self.assertEqual(len(re.findall(over, gw.log())), 1)
        self.assertNotIn("the pool serves again", gw.log())
        self.assertEqual((health(gw)[1]["all_down"], health(gw)[1]["panic"]), (False, False))
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_panic{upstream="u"} 0', m)
        self.assertEqual(len(self.all_down_lines(gw)), 1)
        self.assertEqual({st for st, _, _ in self.answers(gw, 6)}, {200})

    def ramp(self, balance):
        """b2 goes down and comes back in a pool of <balance> with slow start:
        far fewer than half of the next requests reach it, then about half."""
        ramp_ms = 8000
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=PASSING, balance=balance,
                                             slow_start_ms=ramp_ms)})
        # before any server went down nothing ramps: both take requests
        got = [b for _, b, _ in self.answers(gw, 20)]
        self.assertTrue(got.count("b1") and got.count("b2"), got)
        b2.stop()
        wait_for(lambda: not health(gw)[0][b2.addr]["healthy"], what="b2 down")
        b2.start()  # same port: its checks pass again
        wait_for(lambda: health(gw)[0][b2.addr]["healthy"], what="b2 back up")
        since = stamp(health(gw)[0][b2.addr]["since"])
        # the first part of the ramp: from 10 % of its weight up, so well
        # under its half (at a quarter of the ramp it would get 20 %)
        early = [b for _, b, _ in self.answers(gw, 40)]
        self.assertEqual(set(early) - {"b1", "b2"}, set(), early)
        self.assertLessEqual(early.count("b2"), 12, early)
        self.assertGreater(early.count("b1"), 2 * early.count("b2"), early)
        # after the ramp: its full share again (round robin: exactly half;
        # the others within wide margins of it)
        wait_for(lambda: time.time() > since + ramp_ms / 1000.0 + 0.2,
                 timeout=ramp_ms / 1000.0 + 30, what="the ramp's end")
        late = [b for _, b, _ in self.answers(gw, 80)]
        self.assertGreaterEqual(late.count("b2"), 28, late)
        self.assertGreaterEqual(late.count("b1"), 28, late)
        self.assertTrue(health(gw)[0][b2.addr]["healthy"])
        return late

    def test_slow_start_round_robin(self):
        self.assertEqual(self.ramp("round_robin").count("b2"), 40)

    def test_slow_start_least_conn(self):
        self.ramp("least_conn")

    def test_slow_start_random_two(self):
        self.ramp("random_two")

    def test_slow_start_of_a_server_added_by_a_push(self):
        # b2 joins a pool that is serving (a push): it ramps as a server
        # back up does (Envoy ramps new hosts). A pool's first servers do
        # not: nothing ramps before any push.
        ramp_ms = 8000
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, slow_start_ms=ramp_ms)})
        self.assertEqual({b for _, b, _ in self.answers(gw, 4)}, {"b1"})
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2, slow_start_ms=ramp_ms))
        self.assertEqual(st, 200)
        since = stamp(health(gw)[0][b2.addr]["since"])
        early = [b for _, b, _ in self.answers(gw, 40)]
        self.assertLessEqual(early.count("b2"), 12, early)
        self.assertGreater(early.count("b1"), 2 * early.count("b2"), early)
        wait_for(lambda: time.time() > since + ramp_ms / 1000.0 + 0.2,
                 timeout=ramp_ms / 1000.0 + 30, what="the ramp's end")
        self.assertEqual([b for _, b, _ in self.answers(gw, 80)].count("b2"), 40)


if __name__ == "__main__":
    main()
