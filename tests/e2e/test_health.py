#!/usr/bin/env python3
"""test_health.py - upstream health (gateway/health.c) with real backends
that the tests kill and restart: active checks mark a dead server down after
unhealthy_threshold failed checks and up again after healthy_threshold
passes; passive outlier detection ejects a server after consecutive_failures
failed requests, for base_ejection_ms, and lets it back; initially_unhealthy
keeps a new server out until it passes; a push that does not touch a pool,
or changes it but keeps its servers, keeps their health, also when it
writes a server's address another way (localhost:PORT, 127.0.0.1:PORT: the
same socket address); a pool listing one address twice keeps a state for
each; a push that adds a server keeps the ejection history of the others;
the all-down 503 is logged once per transition; a hash key whose server is
down gets 503 without fallback, its next candidate with; GET
/upstreams/{name}/health and /metrics say all of it (the health block of
/metrics checked whole). Every wait is bounded (harness.wait_for)."""
import datetime
import http.client
import json
import re
import socket
import time

from harness import (TIMEOUT, Client, GatewayCase, free_port, gateway_config, main, upstream_cfg,
                     wait_for)


def admin_port(gw):
    return int(gw.cfg["admin"]["address"].rsplit(":", 1)[1])


def admin(gw, method, path, body=None):
    """(status, parsed JSON or text) of one admin API call."""
    c = http.client.HTTPConnection("127.0.0.1", admin_port(gw), timeout=TIMEOUT)
    try:
        hs = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hs)
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    if r.getheader("Content-Type", "").startswith("application/json"):
        return r.status, json.loads(data)
    return r.status, data.decode()


def admin_accepts(gw):
    try:
        socket.create_connection(("127.0.0.1", admin_port(gw)), timeout=TIMEOUT).close()
        return True
    except OSError:
        return False


def stamp(rfc3339):
    return datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def health(gw, pool="u"):
    st, h = admin(gw, "GET", "/upstreams/%s/health" % pool)
    assert st == 200, (st, h)
    return {s["address"]: s for s in h["servers"]}, h


def get(gw, path):
    with Client(gw.port) as c:
        return c.request("GET", path)


CHECK = {"path": "/hz", "interval_ms": 100, "timeout_ms": 100, "healthy_threshold": 2,
         "unhealthy_threshold": 2}


class HealthTest(GatewayCase):
    def gateway(self, ups, workers=1):
        cfg = gateway_config(upstreams=ups, workers=workers,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "u"}])
        gw = self.own_gateway(cfg)
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        return gw

    def backend_names(self, gw, n):
        names = []
        for i in range(n):
            r = get(gw, "/n/%d" % i)
            names.append((r.status, r.header("X-Backend")))
        return names

    def test_active_check_marks_down_and_up(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=CHECK)})
        wait_for(lambda: health(gw)[0][b2.addr]["last_check"]["status"] == 200,
                 what="a first check")
        s = health(gw)[0][b2.addr]
        self.assertTrue(s["healthy"])
        self.assertIsNone(s["reason"])
        self.assertGreaterEqual(s["last_check"]["latency_ms"], 0)
        self.assertEqual(s["last_check"]["failures"], 0)
        b2.stop()
        wait_for(lambda: not health(gw)[0][b2.addr]["healthy"], what="b2 down")
        s = health(gw)[0][b2.addr]
        self.assertEqual(s["reason"], "active_check")
        self.assertRegex(s["since"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(s["last_check"]["status"], 0)  # no answer
        # down after exactly unhealthy_threshold failed checks
        gw.wait_log(r"server %s: failed 2 checks \(no answer\): down" % re.escape(b2.addr))
        # every request now goes to the live server: no 502
        self.assertEqual(set(self.backend_names(gw, 10)), {(200, "b1")})
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_server_healthy{upstream="u",server="%s"} 0' % b2.addr,
                      m)
        self.assertIn('switchyard_upstream_server_healthy{upstream="u",server="%s"} 1' % b1.addr,
                      m)
        self.assertRegex(m, r'switchyard_upstream_health_check_failures_total\{upstream="u",'
                            r'server="%s"\} [1-9]' % re.escape(b2.addr))
        b2.start()  # same port
        wait_for(lambda: health(gw)[0][b2.addr]["healthy"], what="b2 back up")
        gw.wait_log(r"server %s: passed 2 checks: up" % re.escape(b2.addr))
        self.assertIn((200, "b2"), self.backend_names(gw, 10))

    def test_check_status(self):
        b1 = self.own_backend("b1")
        # a check that answers 503 fails; expect_status decides
        chk = dict(CHECK, path="/hz?status=503")
        gw = self.gateway({"u": upstream_cfg(b1, health_check=chk)})
        wait_for(lambda: not health(gw)[0][b1.addr]["healthy"], what="503 checks fail")
        self.assertEqual(health(gw)[0][b1.addr]["last_check"]["status"], 503)
        r = get(gw, "/x")
        self.assertEqual(r.status, 503)  # every server down: at once
        self.assertEqual(health(gw)[1]["all_down"], True)
        # logged once per transition, not per request
        for _ in range(5):
            self.assertEqual(get(gw, "/x").status, 503)
        self.assertEqual(len(re.findall(r"upstream u: every server is down", gw.log())), 1)
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_all_down_total{upstream="u"} 1', m)
        # the same status accepted: it comes back
        chk["expect_status"] = [200, "500-503"]
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, health_check=chk))
        self.assertEqual(st, 200)
        wait_for(lambda: health(gw)[0][b1.addr]["healthy"], what="503 accepted")
        gw.wait_log(r"upstream u: server %s is up: the pool serves again" % re.escape(b1.addr))
        self.assertEqual(get(gw, "/x").status, 200)

    def test_initially_unhealthy(self):
        port = free_port()  # nothing listens there yet
        gw = self.gateway({"u": upstream_cfg("127.0.0.1:%d" % port, health_check=CHECK,
                                             initially_unhealthy=True)})
        s = health(gw)[0]["127.0.0.1:%d" % port]
        self.assertFalse(s["healthy"])
        self.assertEqual(s["reason"], "active_check")
        self.assertEqual(get(gw, "/x").status, 503)  # never tried: not a 502
        b = self.own_backend("late", port=port)
        wait_for(lambda: health(gw)[0][b.addr]["healthy"], what="the server passes")
        self.assertEqual(get(gw, "/x").status, 200)

    def test_hash_key_of_a_down_server_answers_503(self):
        """hash without fallback: a key whose server is down, while another
        is up, gets 503 with Retry-After (nothing was tried: not a 502); with
        fallback the key's next candidate answers."""
        b = self.own_backend("live")
        dead = "127.0.0.1:%d" % free_port()  # nothing listens there
        cfg = upstream_cfg(b, dead, balance="hash", hash_key="header:X-Key",
                           health_check=CHECK, initially_unhealthy=True)
        gw = self.gateway({"u": cfg})
        wait_for(lambda: health(gw)[0][b.addr]["healthy"], what="the live server passes")
        statuses = {}
        with Client(gw.port) as c:
            for i in range(40):
                r = c.request("GET", "/x", headers=[("X-Key", "k%d" % i)])
                statuses[r.status] = statuses.get(r.status, 0) + 1
                if r.status == 503:
                    self.assertEqual(r.header("Retry-After"), "1", r)
        self.assertEqual(sorted(statuses), [200, 503], statuses)
        self.assertEqual(health(gw)[0][dead]["requests"], 0)  # never tried
        st, _ = admin(gw, "PUT", "/upstreams/u", dict(cfg, fallback=True))
        self.assertEqual(st, 200)
        with Client(gw.port) as c:
            for i in range(40):
                self.assertEqual(c.request("GET", "/x", headers=[("X-Key", "k%d" % i)]).status,
                                 200)

    def test_without_initially_unhealthy_a_server_starts_up(self):
        port = free_port()
        chk = dict(CHECK, interval_ms=60000, timeout_ms=1000)
        gw = self.gateway({"u": upstream_cfg("127.0.0.1:%d" % port, health_check=chk)})
        self.assertTrue(health(gw)[0]["127.0.0.1:%d" % port]["healthy"])
        self.assertEqual(get(gw, "/x").status, 502)  # tried, refused

    def test_outlier_ejects_and_lets_back(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        outlier = {"consecutive_failures": 3, "base_ejection_ms": 3000, "max_ejection_ms": 9000,
                   "max_ejection_percent": 50}
        # no retries (on by default): the failures reach the client
        gw = self.gateway({"u": upstream_cfg(b1, b2, outlier=outlier, keepalive=0, retries=0)})
        self.assertEqual(sorted(set(self.backend_names(gw, 4))), [(200, "b1"), (200, "b2")])
        b2.stop()
        # round robin alternates: 4 requests, 2 to the dead server
        got = self.backend_names(gw, 4)
        self.assertEqual(sorted(got), [(200, "b1"), (200, "b1"), (502, None), (502, None)])
        time.sleep(0.3)
        self.assertTrue(health(gw)[0][b2.addr]["healthy"])  # 2 failures: not yet
        got += self.backend_names(gw, 2)  # the third failure ejects
        wait_for(lambda: not health(gw)[0][b2.addr]["healthy"], what="b2 ejected")
        s = health(gw)[0][b2.addr]
        self.assertEqual(s["reason"], "ejected")
        self.assertEqual(s["ejections"], 1)
        self.assertEqual([st for st, _ in got].count(502), 3)
        gw.wait_log(r"server %s: ejected for 3000 ms" % re.escape(b2.addr))
        self.assertEqual(set(self.backend_names(gw, 6)), {(200, "b1")})
        _, m = admin(gw, "GET", "/metrics")
        self.assertIn('switchyard_upstream_ejections_total{upstream="u",server="%s"} 1' % b2.addr,
                      m)
        b2.start()
        wait_for(lambda: health(gw)[0][b2.addr]["healthy"], what="the ejection ends")
        gw.wait_log(r"server %s: ejection over" % re.escape(b2.addr))
        self.assertIn((200, "b2"), self.backend_names(gw, 6))

    def test_outlier_with_two_workers(self):
        # each worker counts its own row: a dead server is ejected after
        # consecutive_failures failures on one worker, so between 3 and 3 x 2
        # failed requests in all, and the ejection holds for both workers
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        outlier = {"consecutive_failures": 3, "max_ejection_percent": 50}
        gw = self.gateway({"u": upstream_cfg(b1, b2, outlier=outlier, keepalive=0, retries=0)},
                          workers=2)
        b2.stop()
        failed = 0
        for i in range(60):  # a new connection each: the kernel spreads them over the workers
            failed += get(gw, "/w/%d" % i).status == 502
            if not health(gw)[0][b2.addr]["healthy"]:
                break
        self.assertFalse(health(gw)[0][b2.addr]["healthy"])
        self.assertGreaterEqual(failed, 3)
        self.assertLessEqual(failed, 6)
        self.assertEqual({get(gw, "/after/%d" % i).status for i in range(20)}, {200})

    def test_outlier_statuses_and_percent(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        # 5xx when asked for (none by default); at most 50 % of two servers: one
        outlier = {"consecutive_failures": 2, "max_ejection_percent": 50,
                   "statuses": "500-599"}
        gw = self.gateway({"u": upstream_cfg(b1, b2, outlier=outlier)})
        for i in range(8):
            get(gw, "/x?status=500")
        wait_for(lambda: [s["healthy"] for s in health(gw)[0].values()].count(False) == 1,
                 what="one ejection")
        time.sleep(0.3)
        self.assertEqual([s["healthy"] for s in health(gw)[0].values()].count(False), 1)
        self.assertEqual(get(gw, "/x").status, 200)  # the other one still serves

    def test_push_keeps_the_ejection_history(self):
        # a dead server ejected twice in a row (2 s, then 4 s); a push adds
        # another server during the second ejection: it stays ejected, and
        # its next ejection is the third in a row (6 s), not a first one.
        # Each re-ejection follows the end of the last one within a few
        # requests, far less than the base_ejection_ms that would take one
        # off the row.
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        dead = "127.0.0.1:%d" % free_port()
        outlier = {"consecutive_failures": 1, "base_ejection_ms": 2000,
                   "max_ejection_ms": 60000, "max_ejection_percent": 50}
        gw = self.gateway({"u": upstream_cfg(b1, dead, outlier=outlier, keepalive=0)})
        ejected = r"server %s: ejected for (\d+) ms" % re.escape(dead)
        over = r"server %s: ejection over" % re.escape(dead)

        def eject_again(n):
            """Requests until <dead>'s <n>th ejection; its duration (ms)."""
            for i in range(20):
                get(gw, "/e%d/%d" % (n, i))
                found = re.findall(ejected, gw.log())
                if len(found) >= n:
                    return int(found[n - 1])
            self.fail("no ejection number %d:\n%s" % (n, gw.log()))

        self.assertEqual(eject_again(1), 2000)
        wait_for(lambda: len(re.findall(over, gw.log())) == 1, what="the first ejection over")
        self.assertEqual(eject_again(2), 4000)
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, dead, b2, outlier=outlier,
                                                              keepalive=0))
        self.assertEqual(st, 200)
        s = health(gw)[0][dead]
        self.assertFalse(s["healthy"])
        self.assertEqual(s["reason"], "ejected")
        self.assertEqual(s["ejections"], 2)
        self.assertIn((200, "b2"), self.backend_names(gw, 6))  # the new pool serves
        wait_for(lambda: len(re.findall(over, gw.log())) == 2, what="the second ejection over")
        self.assertEqual(eject_again(3), 6000)
        self.assertEqual(health(gw)[0][dead]["ejections"], 3)

    def test_push_keeps_health(self):
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        gw = self.gateway({"u": upstream_cfg(b1, b2, health_check=CHECK),
                           "v": upstream_cfg(b1)}, workers=2)
        b2.stop()
        wait_for(lambda: not health(gw)[0][b2.addr]["healthy"], what="b2 down")
        since = health(gw)[0][b2.addr]["since"]
        # a route-only push
        st, _ = admin(gw, "POST", "/routes", {"id": "z", "path": "/z", "upstream": "v"})
        self.assertEqual(st, 201)
        s = health(gw)[0][b2.addr]
        self.assertFalse(s["healthy"])
        # the same moment, to the character: one state change renders one time
        self.assertEqual(s["since"], since)
        # another pool changes
        st, _ = admin(gw, "PUT", "/upstreams/v", upstream_cfg(b1, keepalive=3))
        self.assertEqual(st, 200)
        self.assertFalse(health(gw)[0][b2.addr]["healthy"])
        # this pool changes but keeps its servers: their state stays
        n = health(gw)[0][b2.addr]["last_check"]["checks"]
        chk = dict(CHECK, interval_ms=150, timeout_ms=150)
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2, health_check=chk))
        self.assertEqual(st, 200)
        s = health(gw)[0][b2.addr]
        self.assertFalse(s["healthy"])
        self.assertGreaterEqual(s["last_check"]["checks"], n)  # counts kept, not reset
        self.assertEqual(set(self.backend_names(gw, 6)), {(200, "b1")})
        # the changed interval re-armed the checks: they go on
        wait_for(lambda: health(gw)[0][b2.addr]["last_check"]["checks"] > n + 2,
                 what="checks at the new interval")
        self.assertEqual(len(re.findall(r"server %s: failed 2 checks" % re.escape(b2.addr),
                                        gw.log())), 1)
        # a pool without checks any more: its servers come up
        st, _ = admin(gw, "PUT", "/upstreams/u", upstream_cfg(b1, b2))
        self.assertEqual(st, 200)
        wait_for(lambda: health(gw)[0][b2.addr]["healthy"], what="no checks, no check flag")
        self.assertIsNone(health(gw)[0][b2.addr]["last_check"])

    def test_push_that_respells_an_address_keeps_its_check_state(self):
        # "localhost:PORT" (the test's hosts file says 127.0.0.1) and
        # "127.0.0.1:PORT" are one socket address: a server its checks took
        # down stays down, with its counts and its since, across a push that
        # writes it the other way and changes the pool otherwise (a weight),
        # both ways, and its next failed checks do not take it down anew
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        hosts = self.tmp.file("hosts-respell")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
        named, numeric = "localhost:%d" % b2.port, b2.addr
        shown = {named: "%s (127.0.0.1)" % named, numeric: numeric}  # as the pool names them
        chk = dict(CHECK, interval_ms=200, timeout_ms=200)

        def pool(address, weight):
            return {"servers": [{"address": b1.addr, "weight": weight}, {"address": address}],
                    "health_check": chk}

        cfg = gateway_config(upstreams={"u": pool(named, 1)}, workers=1,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "u"}],
                             resolver={"hosts_file": hosts, "timeout_ms": 300, "attempts": 1,
                                       "nameservers": ["127.0.0.1:%d" % free_port()]})
        gw = self.own_gateway(cfg)
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        wait_for(lambda: (health(gw)[0].get(shown[named]) or {}).get("last_check", {})
                 .get("status") == 200, what="localhost resolved and checked")
        b2.stop()
        wait_for(lambda: not health(gw)[0][shown[named]]["healthy"], what="b2 down")
        downs = r"failed \d+ checks \(no answer\): down"
        self.assertEqual(len(re.findall(downs, gw.log())), 1, gw.log())
        since = health(gw)[0][shown[named]]["since"]
        for address, weight in ((numeric, 2), (named, 3)):
            before = health(gw)[0]
            old = before[shown[numeric if address == named else named]]
            st, _ = admin(gw, "PUT", "/upstreams/u", pool(address, weight))
            self.assertEqual(st, 200)
            self.assertEqual(set(health(gw)[0]), {b1.addr, shown[address]})

            def still_down():
                s = health(gw)[0][shown[address]]
                self.assertFalse(s["healthy"], (address, s))
                self.assertEqual(s["reason"], "active_check")
                self.assertEqual(s["since"], since)  # the same moment, to the character
                self.assertGreaterEqual(s["last_check"]["checks"], old["last_check"]["checks"])
                return s["last_check"]["checks"] >= old["last_check"]["checks"] + 3

            # three checks more (each fails), down all along
            wait_for(still_down, what="three more checks of %s" % address)
            self.assertEqual(set(self.backend_names(gw, 6)), {(200, "b1")})
            self.assertEqual(len(re.findall(downs, gw.log())), 1, gw.log())

    def test_an_address_listed_twice_keeps_two_states(self):
        # "127.0.0.1:PORT" and "localhost:PORT" in one pool are one socket
        # address twice (the config refuses only the same spelling twice; a
        # host name's answer can repeat an address too). Each entry has
        # state of its own, as nginx's peers and HAProxy's servers do: the
        # n-th at an address takes over the n-th's, and a new one starts
        # afresh instead of copying the first's.
        b1, b2 = self.own_backend("b1"), self.own_backend("b2")
        hosts = self.tmp.file("hosts-twice")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
        numeric, named = b2.addr, "localhost:%d (127.0.0.1)" % b2.port

        def pool(*servers, weight=1):
            return {"servers": [{"address": b1.addr, "weight": weight}] +
                    [{"address": a} for a in servers], "health_check": CHECK}

        cfg = gateway_config(upstreams={"u": pool(numeric)}, workers=1,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "u"}],
                             resolver={"hosts_file": hosts, "timeout_ms": 300, "attempts": 1,
                                       "nameservers": ["127.0.0.1:%d" % free_port()]})
        gw = self.own_gateway(cfg)
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        b2.stop()
        wait_for(lambda: health(gw)[0][numeric]["last_check"]["checks"] >= 8,
                 what="eight checks of b2")
        self.assertFalse(health(gw)[0][numeric]["healthy"])
        since = health(gw)[0][numeric]["since"]
        st, _ = admin(gw, "PUT", "/upstreams/u", pool(numeric, "localhost:%d" % b2.port))
        self.assertEqual(st, 200)
        wait_for(lambda: health(gw)[0][named]["last_check"]["status"] is not None,
                 what="the new entry checked")
        h = health(gw)[0]
        self.assertEqual(set(h), {b1.addr, numeric, named})
        self.assertFalse(h[numeric]["healthy"])
        self.assertEqual(h[numeric]["since"], since)
        self.assertGreaterEqual(h[numeric]["last_check"]["checks"], 8)
        # its own counts, from none (both are checked as often)
        self.assertLessEqual(h[named]["last_check"]["checks"] + 4,
                             h[numeric]["last_check"]["checks"], h)
        # the new entry goes down by its own checks, logged as its own
        gw.wait_log(r"server %s: failed 2 checks \(no answer\): down" % re.escape(named))
        # a push that changes a weight: each entry keeps its own counts
        wait_for(lambda: health(gw)[0][named]["last_check"]["checks"] >= 3,
                 what="three checks of the new entry")
        h = health(gw)[0]
        st, _ = admin(gw, "PUT", "/upstreams/u", pool(numeric, "localhost:%d" % b2.port,
                                                      weight=2))
        self.assertEqual(st, 200)
        g = health(gw)[0]
        for a in (numeric, named):
            self.assertFalse(g[a]["healthy"], a)
            self.assertGreaterEqual(g[a]["last_check"]["checks"], h[a]["last_check"]["checks"])
        self.assertLessEqual(g[named]["last_check"]["checks"] + 4,
                             g[numeric]["last_check"]["checks"], g)
        self.assertEqual(set(self.backend_names(gw, 6)), {(200, "b1")})

    def test_metrics_health_lines(self):
        # the health block of /metrics, whole and in order: per server up or
        # down, ejections, failed checks, then per pool all-down transitions
        # and panic, on states that stand still (checks a minute apart)
        b1 = self.own_backend("b1")
        dead, dead2 = ("127.0.0.1:%d" % free_port() for _ in range(2))
        slow = {"path": "/hz", "interval_ms": 60000, "timeout_ms": 1000,
                "healthy_threshold": 2, "unhealthy_threshold": 1}
        ups = {"a": upstream_cfg(b1, dead),
               "b": upstream_cfg(b1, health_check=slow, initially_unhealthy=True, panic=True),
               "c": upstream_cfg(dead2, health_check=slow)}
        cfg = gateway_config(upstreams=ups, workers=1,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "a"}])
        gw = self.own_gateway(cfg)
        wait_for(lambda: admin_accepts(gw), what="the admin API")
        for pool, addr, status in (("b", b1.addr, 200), ("c", dead2, 0)):
            wait_for(lambda: (health(gw, pool)[0][addr]["last_check"] or {}).get("status")
                     == status, what="the first check of %s" % pool)
        _, m = admin(gw, "GET", "/metrics")
        start = m.index("# HELP switchyard_upstream_server_healthy ")
        end = m.index("switchyard_upstream_panic{upstream=\"c\"}")
        block = m[start:m.index("\n", end) + 1]
        want = (
            "# HELP switchyard_upstream_server_healthy 1 when the server takes requests.\n"
            "# TYPE switchyard_upstream_server_healthy gauge\n"
            "switchyard_upstream_server_healthy{upstream=\"a\",server=\"%(b1)s\"} 1\n"
            "switchyard_upstream_server_healthy{upstream=\"a\",server=\"%(dead)s\"} 1\n"
            "switchyard_upstream_server_healthy{upstream=\"b\",server=\"%(b1)s\"} 0\n"
            "switchyard_upstream_server_healthy{upstream=\"c\",server=\"%(dead2)s\"} 0\n"
            "# HELP switchyard_upstream_ejections_total Ejections by outlier detection.\n"
            "# TYPE switchyard_upstream_ejections_total counter\n"
            "switchyard_upstream_ejections_total{upstream=\"a\",server=\"%(b1)s\"} 0\n"
            "switchyard_upstream_ejections_total{upstream=\"a\",server=\"%(dead)s\"} 0\n"
            "switchyard_upstream_ejections_total{upstream=\"b\",server=\"%(b1)s\"} 0\n"
            "switchyard_upstream_ejections_total{upstream=\"c\",server=\"%(dead2)s\"} 0\n"
            "# HELP switchyard_upstream_health_check_failures_total Failed active checks.\n"
            "# TYPE switchyard_upstream_health_check_failures_total counter\n"
            "switchyard_upstream_health_check_failures_total{upstream=\"a\",server=\"%(b1)s\"} 0\n"
            "switchyard_upstream_health_check_failures_total{upstream=\"a\",server=\"%(dead)s\"}"
            " 0\n"
            "switchyard_upstream_health_check_failures_total{upstream=\"b\",server=\"%(b1)s\"} 0\n"
            "switchyard_upstream_health_check_failures_total{upstream=\"c\",server=\"%(dead2)s\"}"
            " 1\n"
            "# HELP switchyard_upstream_all_down_total Times every server of a pool was down.\n"
            "# TYPE switchyard_upstream_all_down_total counter\n"
            "switchyard_upstream_all_down_total{upstream=\"a\"} 0\n"
            "switchyard_upstream_all_down_total{upstream=\"b\"} 1\n"
            "switchyard_upstream_all_down_total{upstream=\"c\"} 1\n"
            "# HELP switchyard_upstream_panic 1 while every server is down and the pool spreads"
            " over them all (panic).\n"
            "# TYPE switchyard_upstream_panic gauge\n"
            "switchyard_upstream_panic{upstream=\"a\"} 0\n"
            "switchyard_upstream_panic{upstream=\"b\"} 1\n"
            "switchyard_upstream_panic{upstream=\"c\"} 0\n") % {
                "b1": b1.addr, "dead": dead, "dead2": dead2}
        self.assertEqual(block, want)


if __name__ == "__main__":
    main()
