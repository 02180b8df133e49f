#!/usr/bin/env python3
"""test_access_log_live.py - access_log is live: a push that sets it to a
file makes the next requests' lines go there (within the per-worker buffer's
one-second flush), from there to another file, to off (no more lines) and
back; SIGUSR1 reopens it under the same name after a rotation (logrotate's
postrotate): the renamed file gets no more lines, the new one does. Local
answers (a 404, a configured response) carry a request id too, the same in
X-Request-Id and in their access-log line."""
import json
import os
import signal

import time

from adminlib import (TIMEOUT, AdminCase, data_get, gateway_config, get, local_route, main,
                      wait_for)

import harness  # noqa: E402 (adminlib puts its folder on the path)


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f]
    except FileNotFoundError:
        return []


class AccessLogLiveTest(AdminCase):
    def setUp(self):
        super().setUp()
        self.cfg = gateway_config(routes=[local_route("t", "/t/*{tag}")], workers=2)
        self.gw = self.own_gateway(self.cfg)
        self.api = self.admin_for(self.gw)

    def push(self, target):
        self.assertWrite(self.api.put("/config", dict(self.cfg, access_log=target)), 200)

    def hit(self, tag, n=3):
        for _ in range(n):
            self.assertEqual(data_get(self.gw.port, "/t/" + tag).status, 200)

    def tagged(self, path, tag):
        return [l for l in lines(path) if l.get("path") == "/t/" + tag]

    def wait_tagged(self, path, tag, n=3):
        wait_for(lambda: len(self.tagged(path, tag)) >= n, what="%s lines in %s" % (tag, path))

    def test_push_changes_the_access_log(self):
        a, b = self.tmp.file("a.log"), self.tmp.file("b.log")
        self.hit("off")
        self.push(a)
        self.hit("one")
        self.wait_tagged(a, "one")
        self.push(b)
        self.hit("two")
        self.wait_tagged(b, "two")
        self.assertEqual(self.tagged(a, "two"), [])
        self.push("off")
        self.hit("three")
        self.push(a)
        self.hit("four")
        self.wait_tagged(a, "four")
        # nothing was logged while it was off, nor before it was on
        self.assertEqual(self.tagged(a, "three") + self.tagged(b, "three"), [])
        self.assertEqual(self.tagged(a, "off"), [])
        self.assertRegex(self.gw.log(), r"access log: " + a)

    def test_a_request_logs_by_the_config_it_started_under(self):
        # a request in flight under access_log "off" while a push turns the
        # log on gets no line (the switch follows the snapshot; the request
        # keeps the one it pinned), and one that began under the new config
        # does
        import threading
        b = self.own_backend("slow")
        cfg = dict(self.cfg, upstreams={"u": harness.upstream_cfg(b)},
                   routes=self.cfg["routes"] + [{"id": "slow", "path": "/slow/*{tag}",
                                                 "upstream": "u"}])
        self.assertWrite(self.api.put("/config", cfg), 200)
        a = self.tmp.file("a.log")
        got = {}

        def slow():
            got["status"] = data_get(self.gw.port, "/slow/early?delay_ms=1500").status

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)  # the request is at the backend, under "off"
        self.assertWrite(self.api.put("/config", dict(cfg, access_log=a)), 200)
        t.join(TIMEOUT)
        self.assertEqual(got.get("status"), 200)
        self.assertEqual(data_get(self.gw.port, "/slow/late").status, 200)
        wait_for(lambda: [l for l in lines(a) if l.get("path") == "/slow/late"],
                 what="the late request's line")
        self.assertEqual([l for l in lines(a) if l.get("path") == "/slow/early"], [])

    def test_sigusr1_reopens_after_a_rotation(self):
        path = self.tmp.file("rot.log")
        self.push(path)
        self.hit("before")
        self.wait_tagged(path, "before")
        os.rename(path, path + ".1")
        since = self.gw.log_size()
        self.gw.signal(signal.SIGUSR1)
        self.gw.wait_log(r"SIGUSR1: access log \S+ reopened", since)
        self.hit("after")
        self.wait_tagged(path, "after")
        self.assertEqual(self.tagged(path + ".1", "after"), [])
        self.assertEqual(len(self.tagged(path + ".1", "before")), 3)
        # the process is fine and drains as usual
        self.assertEqual(data_get(self.gw.port, "/t/x").status, 200)


class LocalRequestIdTest(AdminCase):
    def test_local_answers_have_request_ids(self):
        log = self.tmp.file("ids.log")
        cfg = gateway_config(routes=[local_route("t", "/t/*{tag}")], workers=1, access_log=log)
        gw = self.own_gateway(cfg)
        got = {}
        for path, status in (("/t/a", 200), ("/nothing", 404), ("/t/b", 200)):
            r = data_get(gw.port, path)
            self.assertEqual(r.status, status)
            rid = r.header("X-Request-Id")
            self.assertRegex(rid or "", r"^[0-9a-f]{24}$", r)
            got[path] = rid
        self.assertEqual(len(set(got.values())), 3)
        wait_for(lambda: len(lines(log)) >= 3, what="three access-log lines")
        self.assertEqual({l["path"]: l["request_id"] for l in lines(log)}, got)

    def test_target_as_received_and_user_agent(self):
        log = self.tmp.file("ua.log")
        cfg = gateway_config(routes=[local_route("t", "/t/*{tag}")], workers=1, access_log=log)
        gw = self.own_gateway(cfg)
        r = get(gw.port, "/t//a/../b%7e?x=1&y=%22", headers=[("User-Agent", 'sy "test"/1')],
                host="Example.COM:8080")
        self.assertEqual(r.status, 200)
        wait_for(lambda: lines(log), what="an access-log line")
        rec = lines(log)[0]
        self.assertEqual(rec["target"], "/t//a/../b%7e?x=1&y=%22")
        self.assertEqual(rec["path"], "/t/b~")
        self.assertEqual(rec["host"], "Example.COM:8080")
        self.assertEqual(rec["user_agent"], 'sy "test"/1')


if __name__ == "__main__":
    main()
