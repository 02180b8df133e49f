#!/usr/bin/env python3
"""test_upgrade.py - `switchyard -c FILE --upgrade` (issue 28): a new process
takes the running one's listening sockets over <state_dir>/upgrade.sock and
the old one drains and exits 0. Under keep-alive load and under a fresh
connection per request: no failed request, no refused connection. A
WebSocket open across the upgrade closes at the drain deadline with a close
frame (1001). A new process that fails (a bad config, a port taken) leaves
the old one serving. Two upgrades in a row. What is carried: /metrics'
counters, GET /config's ETag, a server the checks marked down, TLS session
tickets (openssl s_client -sess_out/-sess_in). A second instance without --upgrade is still refused."""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request

from harness import (SANITIZER_MARKS, SY_BIN, TIMEOUT, Client, Closed, Gateway, GatewayCase,
                     gateway_config, get, main, self_signed, upstream_cfg, wait_for, ws_frame,
                     ws_handshake, ws_read)

DRAIN_MS = 2000
THREADS = 6
MAX_REQUESTS = 20000  # per thread: every loop ends by count too


def admin_get(cfg, path):
    with urllib.request.urlopen("http://%s%s" % (cfg["admin"]["address"], path),
                                timeout=TIMEOUT) as r:
        return r.status, dict(r.headers), r.read()


def requests_total(cfg):
    _, _, body = admin_get(cfg, "/metrics")
    n = 0
    for line in body.decode().splitlines():
        if line.startswith("switchyard_requests_total{"):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def metric(cfg, name):
    _, _, body = admin_get(cfg, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


class Load:
    """<THREADS> clients requesting until stopped: keep-alive ones reconnect
    only after a Connection: close; the others open a connection per
    request. Every request that does not get its 200 is a failure."""

    def __init__(self, port, keepalive):
        self.port, self.keepalive = port, keepalive
        self.ok = 0
        self.failures = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(THREADS)]

    def run(self, i):
        c = None
        deadline = time.monotonic() + 4 * TIMEOUT
        for n in range(MAX_REQUESTS):
            if self.stop.is_set() or time.monotonic() > deadline:
                break
            try:
                if c is None:
                    c = Client(self.port)
                hdrs = [] if self.keepalive else [("Connection", "close")]
                r = c.request("GET", "/who/%d-%d" % (i, n), headers=hdrs)
                if r.status != 200:
                    raise AssertionError("status %s" % r.status)
                with self.lock:
                    self.ok += 1
                if not self.keepalive or (r.header("Connection") or "").lower() == "close":
                    c.close()
                    c = None
            except (OSError, Closed, AssertionError) as e:
                with self.lock:
                    self.failures.append("%s: %r" % (type(e).__name__, e))
                if c is not None:
                    c.close()
                c = None
        if c is not None:
            c.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(TIMEOUT)


class UpgradeTest(GatewayCase):
    def setUp(self):
        self.b = self.own_backend("B")
        self.state = self.tmp.file("state-%s" % self._testMethodName)

    def config(self, **extra):
        cfg = gateway_config(
            upstreams={"b": upstream_cfg(self.b)},
            routes=[{"id": "who", "path": "/who/*{r}", "upstream": "b"},
                    {"id": "ws", "path": "/ws", "upstream": "b"}],
            timeouts={"drain_ms": DRAIN_MS}, **extra)
        cfg["admin"]["state_dir"] = self.state
        return cfg

    def new_gateway(self, cfg, **kw):
        """A Gateway stopped and checked clean (exit 0, no sanitizer report)
        at the test's end."""
        g = Gateway(self.tmp, cfg, **kw)

        def done():
            g.stop()
            g.check_clean()
        self.addCleanup(done)
        return g

    def start_old(self, cfg):
        g = Gateway(self.tmp, cfg, name="old")
        self.addCleanup(g.stop)
        g.start()
        g.wait_log(r"switchyard [0-9.]+: ")  # its start line: upgrade.sock is there
        return g

    def upgrade(self, old, cfg=None):
        """Starts `--upgrade` beside <old>; returns the new Gateway once <old>
        exited 0 and the new one serves."""
        new = self.new_gateway(cfg or old.cfg, name="new", args=["--upgrade"])
        since = old.log_size()
        new.start()
        new.wait_log(r"switchyard [0-9.]+: ")
        rc = old.proc.wait(TIMEOUT + DRAIN_MS / 1000)
        self.assertEqual(rc, 0, old.log())
        self.assertIn("upgrade: handed over", old.log()[since:])
        old.rc = 0
        old.check_clean()
        return new

    def upgrade_start(self, old):
        """`--upgrade` beside <old>, returned once it serves (<old> drains)."""
        new = self.new_gateway(old.cfg, name="new", args=["--upgrade"])
        new.start()
        new.wait_log(r"switchyard [0-9.]+: ")
        return new

    def failed_upgrade(self, old, cfg_text):
        """Runs `--upgrade` on <cfg_text>; it must exit non-zero. Returns its log."""
        path = self.tmp.file("failing.json")
        with open(path, "w") as f:
            f.write(cfg_text)
        p = subprocess.run([SY_BIN, "-c", path, "--upgrade"], capture_output=True,
                           timeout=4 * TIMEOUT)
        self.assertNotEqual(p.returncode, 0, p.stderr.decode())
        for m in SANITIZER_MARKS:
            self.assertNotIn(m, p.stderr.decode())
        return p.stderr.decode()

    def test_keepalive_load(self):
        g = self.start_old(self.config())
        with Load(g.port, keepalive=True) as load:
            wait_for(lambda: load.ok > 200, what="load running")
            new = self.upgrade(g)
            n = load.ok
            wait_for(lambda: load.ok > n + 200, what="load served by the new process")
        self.assertEqual(load.failures, [])
        self.assertIn("upgrade: adopted 2 listening sockets and the admin API's", new.log())

    def test_fresh_connections_load_two_upgrades(self):
        g = self.start_old(self.config())
        with Load(g.port, keepalive=False) as load:
            wait_for(lambda: load.ok > 200, what="load running")
            g2 = self.upgrade(g)
            n = load.ok
            wait_for(lambda: load.ok > n + 200, what="load after the first upgrade")
            g3 = self.upgrade(g2)
            n = load.ok
            wait_for(lambda: load.ok > n + 200, what="load after the second upgrade")
        self.assertEqual(load.failures, [])
        self.assertEqual(get(g3.port, "/who/x").status, 200)

    def test_more_workers_and_fewer(self):
        """A new process with more workers opens the missing sockets beside
        the old ones; one with fewer accepts on several."""
        cfg = self.config()
        g = self.start_old(cfg)
        more = dict(cfg, workers=4)
        g2 = self.upgrade(g, more)
        self.assertIn("adopted 2 listening sockets", g2.log())
        fewer = dict(cfg, workers=1)
        with Load(g2.port, keepalive=True) as load:
            wait_for(lambda: load.ok > 100, what="load running")
            g3 = self.upgrade(g2, fewer)
            n = load.ok
            wait_for(lambda: load.ok > n + 100, what="load after the upgrade")
        self.assertEqual(load.failures, [])
        self.assertIn("adopted 4 listening sockets", g3.log())

    def test_address_written_another_way(self):
        """The new config writes a listener's address another way ([0::1]
        for [::1]): the same socket address, so its sockets are adopted,
        not bound beside them (which would fail: address in use)."""
        try:
            s = socket.socket(socket.AF_INET6)
            s.bind(("::1", 0))
            port = s.getsockname()[1]
            s.close()
        except OSError:
            self.skipTest("no IPv6 loopback")
        cfg = self.config()
        v4 = cfg["listeners"][0]
        cfg["listeners"].append({"address": "[::1]:%d" % port})
        # the harness waits on 127.0.0.1: the first listener's port
        g = Gateway(self.tmp, cfg, name="old", port=int(v4["address"].rsplit(":", 1)[1]))
        self.addCleanup(g.stop)
        g.start()
        g.wait_log(r"switchyard [0-9.]+: ")
        other = json.loads(json.dumps(cfg))
        other["listeners"] = [v4, {"address": "[0::1]:%d" % port}]
        new = self.new_gateway(other, name="new", args=["--upgrade"], port=g.port)
        new.start()
        new.wait_log(r"switchyard [0-9.]+: ")
        self.assertEqual(g.proc.wait(TIMEOUT + DRAIN_MS / 1000), 0, g.log())
        g.rc = 0
        self.assertIn("adopted 4 listening sockets", new.log())
        c = socket.create_connection(("::1", port), timeout=TIMEOUT)
        c.sendall(b"GET /who/v6 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertTrue(c.recv(64).startswith(b"HTTP/1.1 200"))
        c.close()

    def test_websocket_closes_at_the_deadline(self):
        g = self.start_old(self.config())
        ws = Client(g.port)
        r, expect = ws_handshake(ws, "/ws")
        self.assertEqual(r.status, 101)
        ws.send(ws_frame(b"before"))
        self.assertEqual(ws_read(ws)[2], b"before")
        self.upgrade_started = time.monotonic()
        new = self.new_gateway(g.cfg, name="new", args=["--upgrade"])
        new.start()
        g.wait_log(r"upgrade: handed over")
        # still open, still echoing, through the draining old process
        ws.send(ws_frame(b"during"))
        self.assertEqual(ws_read(ws)[2], b"during")
        op, fin, payload = ws_read(ws)
        self.assertEqual((op, fin), (8, True))
        self.assertEqual(struct.unpack("!H", payload[:2])[0], 1001)
        self.assertGreaterEqual(time.monotonic() - self.upgrade_started, DRAIN_MS / 1000 * 0.9)
        self.assertEqual(g.proc.wait(TIMEOUT), 0)
        g.rc = 0
        self.assertEqual(get(new.port, "/who/after").status, 200)
        ws.close()

    def test_websocket_close_waits_for_the_frame_under_way(self):
        """At the deadline the server is half-way through a frame (the echo
        of one the client sent only part of): the close frame comes after
        that frame's last byte, never inside it."""
        g = self.start_old(self.config())
        ws = Client(g.port)
        r, _ = ws_handshake(ws, "/ws")
        self.assertEqual(r.status, 101)
        size, first = 60000, 1000
        payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
        # a binary frame, FIN, masked with a zero key: the payload as it is
        ws.send(struct.pack("!BBH", 0x82, 0x80 | 126, size) + b"\0\0\0\0" + payload[:first])
        b0, b1 = ws.read_exact(2)
        self.assertEqual((b0, b1 & 0x7F), (0x82, 126))
        self.assertEqual(struct.unpack("!H", ws.read_exact(2))[0], size)
        self.assertEqual(ws.read_exact(first), payload[:first])
        self.upgrade_start(g)
        g.wait_log(r"upgrade drain: deadline")
        time.sleep(0.2)  # the deadline reached the worker
        ws.send(payload[first:])
        self.assertEqual(ws.read_exact(size - first), payload[first:])
        op, fin, body = ws_read(ws)
        self.assertEqual((op, fin, struct.unpack("!H", body[:2])[0]), (8, True, 1001))
        self.assertEqual(g.proc.wait(TIMEOUT), 0)
        g.rc = 0
        ws.close()

    def test_http2_goaway_and_streams_finish(self):
        """An HTTP/2 connection open across the upgrade gets a GOAWAY from the
        old process, and its stream in flight is answered before the close."""
        try:
            from h2client import (ACK, DATA, END_STREAM, GOAWAY, HEADERS, PING, RawConn, Target,
                                  ping_frame)
        except ImportError as e:  # python3-h2: Debian's /usr/bin/python3 has it
            self.skipTest("h2client: %s" % e)
        cfg = self.config()
        cfg["listeners"][0]["protocols"] = ["h1", "h2c"]
        g = self.start_old(cfg)
        c = RawConn(Target(g.port))
        self.addCleanup(c.close)
        s1 = c.get("/who/slow?delay_ms=1500")
        time.sleep(0.3)  # upstream by now
        new = self.upgrade_start(g)
        status, ended, goaway = None, False, None
        deadline = time.monotonic() + TIMEOUT
        while not (ended and goaway) and time.monotonic() < deadline:
            f = c.read_frame(max(0.01, deadline - time.monotonic()))
            self.assertIsNotNone(f, "closed early: %r" % c.seen[-8:])
            if f.type == PING and not f.flags & ACK:
                c.send(ping_frame(f.payload, ack=True))
            elif f.type == GOAWAY:
                goaway = f
            elif f.stream == s1 and f.type == HEADERS:
                status = dict(c.dec.decode(f.payload, raw=True)).get(b":status")
            if f.stream == s1 and f.type in (HEADERS, DATA) and f.flags & END_STREAM:
                ended = True
        self.assertIsNotNone(goaway)
        self.assertEqual(status, b"200")
        self.assertTrue(c.wait_closed(10))
        self.assertEqual(g.proc.wait(TIMEOUT), 0)
        g.rc = 0
        self.assertEqual(get(new.port, "/who/after").status, 200)

    def test_bad_config_leaves_the_old_one_serving(self):
        g = self.start_old(self.config())
        err = self.failed_upgrade(g, "{ not json")
        self.assertIn("failing.json", err)
        bad = self.config()
        bad["admin"] = g.cfg["admin"]
        bad["workers"] = "two"
        since = g.log_size()
        err = self.failed_upgrade(g, json.dumps(bad))
        self.assertIn("/workers", err)
        # it reached the running process, which logs why
        g.wait_log(r"upgrade: the new process gave up before the hand-over \([^)]*/workers",
                   since=since)
        self.assertTrue(g.alive())
        self.assertEqual(get(g.port, "/who/still").status, 200)
        self.upgrade(g)  # and a good one works after them

    def test_port_taken_leaves_the_old_one_serving(self):
        g = self.start_old(self.config())
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        self.addCleanup(taken.close)
        cfg = json.loads(json.dumps(g.cfg))
        cfg["listeners"].append({"address": "127.0.0.1:%d" % taken.getsockname()[1]})
        since = g.log_size()
        err = self.failed_upgrade(g, json.dumps(cfg))
        self.assertIn("address in use", err)
        g.wait_log(r"upgrade: the new process gave up before the hand-over \(.*address in use",
                   since=since)
        with Load(g.port, keepalive=True) as load:
            wait_for(lambda: load.ok > 50, what="the old one serving")
        self.assertEqual(load.failures, [])

    def test_protocol_mismatch_refused(self):
        """A new process that speaks another hand-over version is refused
        before anything changes, and the refusal is logged."""
        g = self.start_old(self.config())
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(TIMEOUT)
        s.connect(os.path.join(self.state, "upgrade.sock"))
        hello = json.dumps({"version": 99, "pid": os.getpid()}).encode()
        s.sendall(struct.pack("!I", len(hello)) + hello)
        n = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))[0]
        answer = json.loads(s.recv(n, socket.MSG_WAITALL))
        s.close()
        self.assertIn("version 99", answer["error"])
        g.wait_log(r"upgrade: pid \d+ refused: hand-over protocol version 99")
        self.assertEqual(get(g.port, "/who/still").status, 200)
        self.upgrade(g)  # the real one after it

    def test_running_process_silent(self):
        """Something on upgrade.sock that never answers: the new process
        gives up with the reason (after the hand-over step's 10 s)."""
        os.makedirs(self.state)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(os.path.join(self.state, "upgrade.sock"))
        srv.listen(1)
        self.addCleanup(srv.close)
        path = self.tmp.file("silent.json")
        with open(path, "w") as f:
            json.dump(self.config(), f)
        p = subprocess.run([SY_BIN, "-c", path, "--upgrade"], capture_output=True,
                           timeout=4 * TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn("did not answer the hello: timed out", p.stderr.decode())

    def test_state_carried(self):
        g = self.start_old(self.config())
        for i in range(30):
            self.assertEqual(get(g.port, "/who/%d" % i).status, 200)
        before = requests_total(g.cfg)
        self.assertGreaterEqual(before, 30)
        # a swap, counted: switchyard_config_swaps_total carries over too
        req = urllib.request.Request(
            "http://%s/routes" % g.cfg["admin"]["address"], method="POST",
            data=json.dumps({"id": "extra", "path": "/extra", "response": {"body": "x"}}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            self.assertEqual(r.status, 201)
        swaps = metric(g.cfg, "switchyard_config_swaps_total")
        self.assertGreaterEqual(swaps, 1)
        _, h1, body1 = admin_get(g.cfg, "/config")
        new = self.upgrade(g)
        _, h2, body2 = admin_get(new.cfg, "/config")
        self.assertEqual(h1["ETag"], h2["ETag"])
        self.assertEqual(body1, body2)
        self.assertGreaterEqual(requests_total(new.cfg), before)
        self.assertEqual(metric(new.cfg, "switchyard_config_swaps_total"), swaps)
        # an If-Match with the ETag from before the upgrade holds
        req = urllib.request.Request(
            "http://%s/config" % new.cfg["admin"]["address"], data=body2, method="PUT",
            headers={"If-Match": h1["ETag"], "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            self.assertEqual(r.status, 200)

    def test_server_down_stays_down(self):
        """A server the checks marked down is down in the new process too:
        back up, it needs healthy_threshold passing checks there as well,
        at an interval that keeps it out for the whole test."""
        b2 = self.own_backend("B2")
        check = {"path": "/hz", "interval_ms": 100, "timeout_ms": 100,
                 "healthy_threshold": 1000, "unhealthy_threshold": 2}
        cfg = self.config()
        cfg["upstreams"] = {"b": upstream_cfg(self.b, b2, health_check=check)}
        g = self.start_old(cfg)

        def healthy(gw):
            _, _, body = admin_get(gw.cfg, "/upstreams/b/health")
            return {s["address"]: s["healthy"] for s in json.loads(body)["servers"]}

        b2.stop()
        wait_for(lambda: not healthy(g)[b2.addr], what="B2 down")
        b2.start()
        new = self.upgrade(g)
        self.assertEqual(healthy(new), {self.b.addr: True, b2.addr: False})
        for i in range(20):
            self.assertEqual(get(new.port, "/who/%d" % i).header("X-Backend"), "B")

    def test_sigusr2(self):
        """SIGUSR2 starts the binary again with --upgrade (nginx's USR2):
        the child takes over, the old process exits 0, under load."""
        g = self.start_old(self.config())
        with Load(g.port, keepalive=True) as load:
            wait_for(lambda: load.ok > 100, what="load running")
            g.signal(signal.SIGUSR2)
            self.assertEqual(g.proc.wait(TIMEOUT + DRAIN_MS / 1000), 0, g.log())
            g.rc = 0
            child = int(re.search(r"SIGUSR2: started \S+ --upgrade as pid (\d+)", g.log()).group(1))
            n = load.ok
            wait_for(lambda: load.ok > n + 100, what="load served by the child")
        self.assertEqual(load.failures, [])
        self.assertIn("upgrade: adopted", g.log())  # the child writes to the same stderr
        os.kill(child, signal.SIGTERM)
        wait_for(lambda: not os.path.exists("/proc/%d" % child), what="the child's exit")

    def test_sd_notify(self):
        """READY=1 at start; the new process says MAINPID=<its pid> with
        READY=1 (the unit is Type=notify, NotifyAccess=all)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        path = self.tmp.file("notify.sock")
        sock.bind(path)
        sock.settimeout(TIMEOUT)
        self.addCleanup(sock.close)
        g = Gateway(self.tmp, self.config(), name="old", env={"NOTIFY_SOCKET": path})
        self.addCleanup(g.stop)
        g.start()
        self.assertEqual(sock.recv(256), b"READY=1")
        new = self.new_gateway(g.cfg, name="new", args=["--upgrade"],
                               env={"NOTIFY_SOCKET": path})
        new.start()
        self.assertEqual(sock.recv(256), b"MAINPID=%d\nREADY=1" % new.pid())
        self.assertEqual(g.proc.wait(TIMEOUT + DRAIN_MS / 1000), 0)
        g.rc = 0

    def test_second_plain_instance_refused(self):
        g = self.start_old(self.config())
        new = self.upgrade(g)
        p = subprocess.run([SY_BIN, "-c", new.cfg_path], capture_output=True, timeout=4 * TIMEOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("in use by another switchyard process", p.stderr.decode())
        self.assertEqual(get(new.port, "/who/x").status, 200)

    def test_tls_ticket_resumes_across(self):
        if not shutil.which("openssl"):
            self.skipTest("openssl not installed")
        cfg = self.config()
        cfg["listeners"] = [{"address": cfg["listeners"][0]["address"],
                             "tls": {"certificates": [self_signed(self.tmp, "upg")]}}]
        g = self.start_old(cfg)
        sess = self.tmp.file("sess.pem")

        def s_client(*args):
            p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % g.port,
                                "-tls1_3", "-ign_eof"] + list(args),
                               input=b"GET /who/t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                               capture_output=True, timeout=TIMEOUT)
            return p.stdout.decode(errors="replace")

        out = s_client("-sess_out", sess)
        self.assertIn("200", out)
        self.assertIn("New,", out)
        self.upgrade(g)
        out = s_client("-sess_in", sess)
        self.assertIn("Reused,", out)


if __name__ == "__main__":
    main()
