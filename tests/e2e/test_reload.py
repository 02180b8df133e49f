#!/usr/bin/env python3
"""test_reload.py - config swaps and the drain, under traffic: SIGHUP with a
bad file or one over the size cap a start applies, 100 SIGHUP reloads
alternating two configs while clients keep requesting (no failure, every
answer from the backend the config named at that moment, keep-alive
connections kept), a WebSocket tunnel that lives through reloads, and
SIGTERM draining an in-flight request. Labelled
"concurrency": CI also runs these under TSan."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

from harness import (SY_BIN, TIMEOUT, Client, Closed, GatewayCase, build_request, gateway_config,
                     get, main, upstream_cfg, wait_for, ws_frame, ws_handshake, ws_read)

RELOADS = 100
CONFIG_CAP = 64 << 20  # the largest -c file a start or a reload reads (admin/config.c)
CLIENT_THREADS = 4


def two_configs(a, b, workers=2, both_upstreams=True):
    """Config dicts "A" and "B": the same listener and paths, /who/* and
    /ws going to backend a in "A" and to backend b in "B"."""
    base = gateway_config(workers=workers)
    out = {}
    for name, be in (("A", a), ("B", b)):
        cfg = json.loads(json.dumps(base))
        key = name.lower()
        if both_upstreams:
            cfg["upstreams"] = {"a": upstream_cfg(a), "b": upstream_cfg(b)}
        else:
            cfg["upstreams"] = {key: upstream_cfg(be)}
        cfg["routes"] = [
            {"id": "who", "path": "/who/*{r}", "upstream": key},
            {"id": "ws", "path": "/ws", "upstream": key},
            {"id": "gen", "path": "/config-name", "response": {"body": name}},
        ]
        out[name] = cfg
    return out


class ReloadTest(GatewayCase):
    def setUp(self):
        self.a = self.own_backend("A")
        self.b = self.own_backend("B")

    def reload_and_wait(self, g, cfg=None, text=None):
        """SIGHUP with a new file; returns the log text the reload wrote."""
        since = g.log_size()
        g.reload(cfg, text)
        m = g.wait_log(r"config reloaded: generation (\d+)|reload refused[^\n]*\n(?:[^\n]*\n)*",
                       since=since)
        return m

    def test_removed_upstream_idle_connections_close(self):
        """A swap that drops an upstream closes its idle pooled connections
        right away instead of keeping them until upstream_idle_ms."""
        cfgs = two_configs(self.a, self.b, both_upstreams=False)
        g = self.own_gateway(cfgs["A"])
        for i in range(4):
            self.assertEqual(get(g.port, "/who/%d" % i).header("X-Backend"), "A")
        wait_for(lambda: self.a.stats()["open"] >= 1, what="a pooled connection to A")
        self.reload_and_wait(g, cfgs["B"])
        self.assertEqual(get(g.port, "/who/x").header("X-Backend"), "B")
        wait_for(lambda: self.a.stats()["open"] == 0, timeout=10,
                 what="idle connections to the removed upstream closed")

    def test_sighup_bad_file_keeps_old_config(self):
        cfgs = two_configs(self.a, self.b)
        g = self.own_gateway(cfgs["A"])
        self.assertEqual(get(g.port, "/who/1").header("X-Backend"), "A")
        # not JSON at all
        since = g.log_size()
        g.reload(text="{ this is not json")
        g.wait_log(r"reload refused", since=since)
        g.wait_log(r"line \d+", since=since)
        self.assertEqual(get(g.port, "/who/2").header("X-Backend"), "A")
        # valid JSON, invalid config: the error names its JSON path
        bad = json.loads(json.dumps(cfgs["B"]))
        bad["routes"][0]["upstream"] = "nope"
        since = g.log_size()
        g.reload(bad)
        g.wait_log(r"reload refused", since=since)
        g.wait_log(r"/routes/0/upstream: [^\n]*nope", since=since)
        self.assertEqual(get(g.port, "/who/3").header("X-Backend"), "A")
        self.assertEqual(get(g.port, "/config-name").body, b"A")
        # a file that vanished
        since = g.log_size()
        os.unlink(g.cfg_path)
        g.signal(signal.SIGHUP)
        g.wait_log(r"reload refused", since=since)
        self.assertEqual(get(g.port, "/who/4").header("X-Backend"), "A")
        # and a good one is taken
        since = g.log_size()
        g.reload(cfgs["B"])
        g.wait_log(r"config reloaded: generation 2\b", since=since)
        self.assertEqual(get(g.port, "/who/5").header("X-Backend"), "B")
        self.assertNotIn("config reloaded: generation 3", g.log())

    def test_sighup_missing_file_says_so(self):
        """A SIGHUP after the -c file was removed names the file and the OS
        error in plain words (not jansson's "line -1, column -1"), and the
        running config keeps serving."""
        cfgs = two_configs(self.a, self.b)
        g = self.own_gateway(cfgs["A"])
        g.wait_log(r"\[notice\] switchyard \S+: 2 workers, 1 listener \(127\.0\.0\.1:\d+\), "
                   r"admin API 127\.0\.0\.1:\d+, 3 routes, config ")
        self.assertEqual(get(g.port, "/who/1").header("X-Backend"), "A")
        since = g.log_size()
        os.unlink(g.cfg_path)
        g.signal(signal.SIGHUP)
        m = g.wait_log(r"\[error\] reload refused, the running config keeps serving: "
                       r"cannot open (\S+): No such file or directory\n", since=since)
        self.assertEqual(m.group(1), g.cfg_path)
        self.assertNotIn("line -1", g.log())
        self.assertEqual(get(g.port, "/who/2").header("X-Backend"), "A")
        self.assertEqual(get(g.port, "/config-name").body, b"A")

    def test_sighup_file_over_the_cap_is_refused(self):
        """A start refuses a -c file over 64 MiB; a SIGHUP applies the same
        cap with the same message, and the running config keeps serving
        (the file is a valid config padded with spaces: without the cap it
        would be taken)."""
        cfgs = two_configs(self.a, self.b)
        g = self.own_gateway(cfgs["A"])
        self.assertEqual(get(g.port, "/who/1").header("X-Backend"), "A")
        big = json.dumps(cfgs["B"]) + " " * CONFIG_CAP
        # what a start (and --check) says of it
        path = self.tmp.file("big.json")
        with open(path, "w") as f:
            f.write(big)
        p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual((p.returncode, p.stderr),
                         (1, "%s: larger than %d bytes\n" % (path, CONFIG_CAP)))
        since = g.log_size()
        g.reload(text=big)
        m = g.wait_log(r"\[error\] reload refused, the running config keeps serving:\n"
                       r"[^\n]*\[error\]   (\S+): larger than (\d+) bytes\n", since=since)
        self.assertEqual((m.group(1), int(m.group(2))), (g.cfg_path, CONFIG_CAP))
        self.assertNotIn("config reloaded", g.log())
        self.assertEqual(get(g.port, "/who/2").header("X-Backend"), "A")
        self.assertEqual(get(g.port, "/config-name").body, b"A")
        # the same config within the cap is taken
        since = g.log_size()
        g.reload(cfgs["B"])
        g.wait_log(r"config reloaded: generation 2\b", since=since)
        self.assertEqual(get(g.port, "/who/3").header("X-Backend"), "B")

    def test_reloads_under_load(self):
        cfgs = two_configs(self.a, self.b)
        g = self.own_gateway(cfgs["A"])
        lock = threading.Lock()
        # epoch changes around every reload; "expect" is only valid while
        # stable: from the log line of a generation until the next SIGHUP
        state = {"epoch": 0, "stable": True, "expect": "A"}
        stop = threading.Event()
        stats = [{"ok": 0, "connects": 0, "failures": [], "wrong": [], "checked": 0}
                 for _ in range(CLIENT_THREADS)]

        def snap():
            with lock:
                return state["epoch"], state["stable"], state["expect"]

        def client(tid):
            st = stats[tid]
            c = None
            n = 0
            deadline = time.monotonic() + 10 * TIMEOUT
            while not stop.is_set() and n < 200000 and time.monotonic() < deadline:
                if c is None:
                    c = Client(g.port)
                    st["connects"] += 1
                before = snap()
                try:
                    r = c.request("GET", "/who/t%d/%d" % (tid, n))
                except (Closed, OSError) as e:
                    st["failures"].append("request %d: %r" % (n, e))
                    c.close()
                    c = None
                    continue
                after = snap()
                n += 1
                be = r.header("X-Backend")
                if r.status != 200 or be not in ("A", "B"):
                    st["failures"].append("request %d: %s from %s" % (n, r.status, be))
                    continue
                st["ok"] += 1
                if before == after and before[1]:
                    st["checked"] += 1
                    if be != before[2]:
                        st["wrong"].append("request %d: %s while %s was live" % (n, be, before[2]))
            if c:
                c.close()

        threads = [threading.Thread(target=client, args=(i,), daemon=True)
                   for i in range(CLIENT_THREADS)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: all(s["ok"] > 0 for s in stats), what="clients running")
            gen = 1
            for i in range(RELOADS):
                target = "B" if i % 2 == 0 else "A"
                with lock:
                    state["stable"] = False
                    state["epoch"] += 1
                since = g.log_size()
                g.reload(cfgs[target])
                gen += 1
                g.wait_log(r"config reloaded: generation %d\b" % gen, since=since)
                with lock:
                    state["expect"] = target
                    state["stable"] = True
                    state["epoch"] += 1
                # a request that starts now must see the new generation
                with Client(g.port) as c:
                    r = c.request("GET", "/who/main/%d" % i)
                    self.assertEqual(r.status, 200)
                    self.assertEqual(r.header("X-Backend"), target, "after generation %d" % gen)
                    self.assertEqual(c.request("GET", "/config-name").body, target.encode())
        finally:
            stop.set()
            for t in threads:
                t.join(TIMEOUT)
        self.assertNotIn("reload refused", g.log())
        for tid, st in enumerate(stats):
            self.assertEqual(st["failures"], [], "client %d" % tid)
            self.assertEqual(st["wrong"], [], "client %d" % tid)
            self.assertEqual(st["connects"], 1, "client %d: keep-alive lost" % tid)
        total = sum(s["ok"] for s in stats)
        self.assertGreater(total, RELOADS)
        self.assertGreater(self.a.stats()["requests"], 0)
        self.assertGreater(self.b.stats()["requests"], 0)

    def test_websocket_survives_reloads(self):
        # the two configs do not even share the upstream the tunnel uses
        cfgs = two_configs(self.a, self.b, both_upstreams=False)
        g = self.own_gateway(cfgs["A"])
        with Client(g.port) as ws:
            r, accept = ws_handshake(ws, "/ws")
            self.assertEqual(r.status, 101)
            self.assertEqual(r.header("Sec-WebSocket-Accept"), accept)
            gen = 1
            for i in range(10):
                target = "B" if i % 2 == 0 else "A"
                since = g.log_size()
                g.reload(cfgs[target])
                gen += 1
                g.wait_log(r"config reloaded: generation %d\b" % gen, since=since)
                msg = b"frame %d" % i
                ws.send(ws_frame(msg))
                self.assertEqual(ws_read(ws), (1, True, msg))
                self.assertEqual(get(g.port, "/who/x").header("X-Backend"), target)
            ws.send(ws_frame(os.urandom(100000), 2, fin=True))
            op, fin, payload = ws_read(ws)
            self.assertEqual((op, fin, len(payload)), (2, True, 100000))
            ws.send(ws_frame(b"\x03\xe8", 8))
            self.assertEqual(ws_read(ws)[0], 8)
            self.assertClosed(ws)
        self.assertEqual(get(g.port, "/who/y").status, 200)


class DrainTest(GatewayCase):
    def test_sigterm_drains_in_flight_request(self):
        b = self.own_backend("b")
        cfg = gateway_config(upstreams={"b": upstream_cfg(b)},
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}])
        g = self.own_gateway(cfg, check=False)
        idle = Client(g.port)  # keep-alive, between requests when the drain starts
        self.addCleanup(idle.close)
        self.assertEqual(idle.request("GET", "/idle").status, 200)
        slow = Client(g.port)
        self.addCleanup(slow.close)
        b.reset()
        slow.send(build_request("GET", "/slow?delay_ms=1500&mode=fixed&size=100000"))
        wait_for(lambda: b.stats()["requests"] == 1, what="the slow request at the backend")
        since = g.log_size()
        g.signal(signal.SIGTERM)
        g.wait_log(r"draining", since=since)

        def refused():
            try:
                socket.create_connection(("127.0.0.1", g.port), timeout=TIMEOUT).close()
                return False
            except ConnectionRefusedError:
                return True
            except ConnectionResetError:
                # it reached a listener's backlog just as the listener closed:
                # not served, but not yet the refusal this waits for
                return False

        wait_for(refused, what="new connections refused")
        for _ in range(5):
            self.assertTrue(refused())
        self.assertClosed(idle, "an idle keep-alive connection stays open during the drain")
        r = slow.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body_len, 100000)
        self.assertEqual((r.header("Connection") or "").lower(), "close")
        self.assertClosed(slow)
        rc = g.proc.wait(TIMEOUT)
        g.rc = rc
        self.assertEqual(rc, 0, g.log())
        g.check_clean()
        self.assertIn("drained, exiting", g.log())
        self.assertNotIn("drain timeout", g.log())


if __name__ == "__main__":
    main()
