#!/usr/bin/env python3
"""test_admin_security.py - what the admin API checks on a request's head
before it reads a byte of its body, and what a client can make it hold:

- cross-site requests and DNS rebinding: a Host that is not the admin
  address, localhost or a name of admin.origins is a 403, and so is an
  Origin that is not allowed; a write whose body is not
  Content-Type: application/json is a 415; admin.origins adds names, live;
- the token is checked on the head: an unauthenticated PUT announcing a
  60 MB body gets its 401 after the head alone, and the body is never
  buffered (the server's RSS stays small);
- connections over the cap get a 503 and the close, bodies over the
  in-flight budget a 503, a head that dribbles in a 408."""
import json
import socket
import threading
import time

from adminlib import (TIMEOUT, AdminCase, Client, admin_port, data_get, gateway_config,
                      local_route, main, wait_for)
from harness import Closed, asan_env, rss_kib  # noqa: E402 - adminlib puts it on the path

TOKEN = "s3cr3t-token_0123456789"
BIG = 62914560  # 60 MiB: under the 64 MiB body limit
MAX_CONNS = 64  # admin/api.c's http_limits
PWN = '{"id":"pwn","path":"/pwn","response":{"status":200,"body":"pwned"}}'



class SecurityCase(AdminCase):
    def start(self, token=None, **admin):
        cfg = gateway_config(routes=[local_route("ping", "/ping")])
        cfg["admin"].update(admin)
        env = dict(asan_env(), SWITCHYARD_ADMIN_TOKEN=token or "")
        self.gw = self.own_gateway(cfg, env=env)
        self.aport = admin_port(cfg)
        self.api = self.admin_for(self.gw, token=token)
        return self.api

    def raw(self, method, path, headers, body=None, host="localhost"):
        """One request on a fresh connection: the response, and whether the
        connection closed after it (asked only when the answer says it will)."""
        with Client(self.aport) as c:
            r = c.request(method, path, headers=headers, body=body, host=host)
            return r, r.header("Connection") == "close" and c.wait_closed()

    def assertRefused(self, r, closed, status, error):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.json()["error"], error, r)
        self.assertEqual(r.header("Connection"), "close", r)
        if status in (401, 403):  # nothing of the config without the right to see it
            self.assertIsNone(r.header("ETag"), r)
        self.assertTrue(closed)

    def assertNoPwn(self):
        self.assertEqual(self.api.get("/routes/pwn").status, 404)
        self.assertEqual(data_get(self.gw.port, "/pwn").status, 404)


class CrossSiteTest(SecurityCase):
    def test_issue_repro_is_refused(self):
        # the issue's curl, from a page at attacker.example that rebound its
        # name to 127.0.0.1: loopback, no token
        self.start()
        r, closed = self.raw("POST", "/routes", [("Origin", "http://attacker.example"),
                                                 ("Content-Type", "text/plain")],
                             PWN.encode(), host="attacker.example")
        self.assertRefused(r, closed, 403, "host not allowed")
        self.assertIn("Host attacker.example is not", r.json()["errors"][0]["message"])
        self.assertNoPwn()

    def test_wrong_host(self):
        self.start()
        p = self.aport
        for host in ("127.0.0.1:%d" % p, "127.0.0.1", "localhost", "LocalHost:%d" % p,
                     "[::1]:%d" % p, "[::1]"):
            r, _ = self.raw("GET", "/status", [], host=host)
            self.assertEqual(r.status, 200, (host, r))
        # HTTP/1.0 without Host: no browser sends one
        with Client(p) as c:
            c.send(b"GET /status HTTP/1.0\r\n\r\n")
            self.assertEqual(c.read_response().status, 200)
        for host in ("attacker.example", "attacker.example:%d" % self.aport,
                     "localhost:%d" % (self.aport + 1), "127.0.0.2:%d" % self.aport,
                     "127.0.0.1.nip.io:%d" % self.aport):
            # reads too: a rebound page could read the config
            r, closed = self.raw("GET", "/config", [], host=host)
            self.assertRefused(r, closed, 403, "host not allowed")
            r, closed = self.raw("POST", "/routes", [("Content-Type", "application/json")],
                                 PWN.encode(), host=host)
            self.assertRefused(r, closed, 403, "host not allowed")
        self.assertNoPwn()

    def test_wrong_origin(self):
        api = self.start()
        p = self.aport
        for i, origin in enumerate(("http://127.0.0.1:%d" % p, "http://localhost:%d" % p,
                                    "http://[::1]:%d" % p)):
            r, _ = self.raw("POST", "/routes", [("Origin", origin),
                                                ("Content-Type", "application/json")],
                            json.dumps(local_route("o%d" % i, "/o%d" % i)).encode())
            self.assertEqual(r.status, 201, (origin, r))
        self.assertEqual(api.get("/routes/o2").status, 200)
        for origin in ("http://attacker.example", "http://localhost:%d" % (self.aport + 1),
                       "https://127.0.0.1", "null", "http://attacker.example:%d" % self.aport,
                       "file://"):
            r, closed = self.raw("POST", "/routes", [("Origin", origin),
                                                     ("Content-Type", "application/json")],
                                 PWN.encode())
            self.assertRefused(r, closed, 403, "origin not allowed")
            r, closed = self.raw("GET", "/config", [("Origin", origin)])
            self.assertRefused(r, closed, 403, "origin not allowed")
        self.assertNoPwn()

    def test_writes_need_json(self):
        api = self.start()
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                      "application/jsonx", "application/json-patch+json", None):
            for method, path in (("POST", "/routes"), ("PUT", "/routes/pwn"),
                                 ("PUT", "/config?dry_run=1"), ("DELETE", "/routes/ping")):
                hs = [("Content-Type", ctype)] if ctype else []
                r, closed = self.raw(method, path, hs, PWN.encode())
                self.assertRefused(r, closed, 415, "a body must be JSON")
        self.assertNoPwn()
        # parameters and case are fine; a DELETE without a body needs no type
        r, _ = self.raw("POST", "/routes", [("Content-Type", "application/json; charset=utf-8")],
                        PWN.encode())
        self.assertEqual(r.status, 201, r)
        r, _ = self.raw("PUT", "/routes/pwn", [("Content-Type", "Application/JSON")], PWN.encode())
        self.assertEqual(r.status, 200, r)
        r, _ = self.raw("DELETE", "/routes/pwn", [])
        self.assertEqual(r.status, 200, r)
        # reads carry no type
        self.assertEqual(api.get("/config").status, 200)

    def test_configured_origins(self):
        api = self.start(origins=["admin.example.com", "https://ops.example.com:8443"])
        p = self.aport
        for host in ("admin.example.com", "admin.example.com:%d" % p, "admin.example.com:443",
                     "ops.example.com:8443"):
            r, _ = self.raw("GET", "/status", [], host=host)
            self.assertEqual(r.status, 200, (host, r))
        r, closed = self.raw("GET", "/status", [], host="ops.example.com:443")
        self.assertRefused(r, closed, 403, "host not allowed")
        r, _ = self.raw("POST", "/routes", [("Origin", "https://ops.example.com:8443"),
                                            ("Content-Type", "application/json")],
                        json.dumps(local_route("ops", "/ops")).encode())
        self.assertEqual(r.status, 201, r)
        for origin in ("http://ops.example.com:8443", "https://ops.example.com",
                       "https://evil.example.com:8443"):
            r, closed = self.raw("GET", "/status", [("Origin", origin)])
            self.assertRefused(r, closed, 403, "origin not allowed")
        r, _ = self.raw("GET", "/status", [("Origin", "https://admin.example.com")])
        self.assertEqual(r.status, 200, r)
        # live: a push changes them for the next request
        cfg, etag, _ = api.config()
        cfg["admin"]["origins"] = ["new.example.com"]
        self.assertEqual(api.put("/config", cfg).status, 200)
        r, _ = self.raw("GET", "/status", [], host="new.example.com")
        self.assertEqual(r.status, 200, r)
        r, closed = self.raw("GET", "/status", [], host="admin.example.com")
        self.assertRefused(r, closed, 403, "host not allowed")
        # a bad entry is refused at its path, nothing changed
        cfg["admin"]["origins"] = ["new.example.com", "*.example.com"]
        r = api.put("/config", cfg)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.json["errors"][0]["path"], "/admin/origins/1", r)
        r, _ = self.raw("GET", "/status", [], host="new.example.com")
        self.assertEqual(r.status, 200, r)

    def test_default_ports(self):
        # behind a TLS-terminating proxy the Host has no port: an entry with
        # its scheme's default port (either, without a scheme) allows it; an
        # entry without a port allows the default one; any other port is
        # another site
        self.start(origins=["https://tls.example.com:443", "http://web.example.com:80",
                            "any.example.com:443", "alt.example.com:8443",
                            "https://bare.example.com", "https://odd.example.com:80"])
        for host in ("tls.example.com", "TLS.example.com", "tls.example.com:443",
                     "web.example.com", "web.example.com:80", "any.example.com",
                     "bare.example.com", "bare.example.com:443"):
            r, _ = self.raw("GET", "/status", [], host=host)
            self.assertEqual(r.status, 200, (host, r))
        for host in ("tls.example.com:80", "tls.example.com:8443", "web.example.com:443",
                     "any.example.com:80", "alt.example.com", "alt.example.com:443",
                     "odd.example.com", "odd.example.com:443"):
            r, closed = self.raw("GET", "/status", [], host=host)
            self.assertRefused(r, closed, 403, "host not allowed")
        # an Origin without a port has its scheme's default
        for origin in ("https://tls.example.com", "https://tls.example.com:443",
                       "http://web.example.com", "https://any.example.com",
                       "http://any.example.com:443", "https://bare.example.com"):
            r, _ = self.raw("GET", "/status", [("Origin", origin)], host="tls.example.com")
            self.assertEqual(r.status, 200, (origin, r))
        for origin in ("http://tls.example.com", "https://web.example.com",
                       "http://any.example.com", "https://alt.example.com",
                       "https://odd.example.com", "http://odd.example.com"):
            r, closed = self.raw("GET", "/status", [("Origin", origin)],
                                 host="tls.example.com")
            self.assertRefused(r, closed, 403, "origin not allowed")


class HeadFirstTest(SecurityCase):
    def put_head(self, extra=b""):
        s = socket.create_connection(("127.0.0.1", self.aport), timeout=TIMEOUT)
        s.sendall(b"PUT /config HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Type: application/json\r\n" + extra +
                  b"Content-Length: %d\r\n\r\n" % BIG)
        return s

    def test_token_checked_before_the_body(self):
        # the issue's repro: 5 parallel unauthenticated PUTs announcing
        # 60 MB each; the 401 comes after the head alone
        self.start(token=TOKEN)
        pid = self.gw.proc.pid
        before = rss_kib(pid, "VmHWM")
        socks = [self.put_head() for _ in range(5)]
        try:
            for s in socks:
                c = Client(self.aport, sock=s)
                r = c.read_response()
                self.assertEqual(r.status, 401, r)
                self.assertEqual(r.header("Connection"), "close", r)
                self.assertIn("Bearer", r.header("WWW-Authenticate") or "")
                self.assertTrue(c.wait_closed())

            # the bodies sent anyway are read away, never buffered
            def push(s):
                chunk = b"x" * (1 << 20)
                try:
                    for _ in range(BIG >> 20):
                        s.sendall(chunk)
                except OSError:
                    pass  # closed on us: fine

            ts = [threading.Thread(target=push, args=(s,), daemon=True) for s in socks]
            for t in ts:
                t.start()
            for t in ts:
                t.join(TIMEOUT)
        finally:
            for s in socks:
                s.close()
        grown = rss_kib(pid, "VmHWM") - before  # the peak: nothing buffered, even for a while
        self.assertLess(grown, 32 * 1024, "peak RSS grew by %d KiB" % grown)
        self.assertEqual(self.api.get("/status").status, 200)

    def test_expect_continue_refused_without_a_100(self):
        self.start(token=TOKEN)
        s = self.put_head(b"Expect: 100-continue\r\n")
        with Client(self.aport, sock=s) as c:
            r = c.read_response()
            self.assertEqual((r.status, r.interim), (401, []))
            self.assertTrue(c.wait_closed())

    def test_host_checked_before_the_body_with_the_token(self):
        self.start(token=TOKEN)
        s = socket.create_connection(("127.0.0.1", self.aport), timeout=TIMEOUT)
        s.sendall(b"PUT /config HTTP/1.1\r\nHost: attacker.example\r\n"
                  b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % BIG)
        with Client(self.aport, sock=s) as c:
            r = c.read_response()
            self.assertEqual(r.status, 403, r)
            self.assertTrue(c.wait_closed())
        self.assertEqual(self.api.get("/status").status, 200)

    def test_bodies_in_flight_are_bounded(self):
        # two announced 60 MB bodies fill the 128 MiB budget; a third is a
        # 503 at its head; once they are gone a body is read again
        api = self.start(token=TOKEN)
        auth = b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        held = [self.put_head(auth) for _ in range(2)]
        try:
            for s in held:  # each is waiting for its body, unanswered
                self.assertTrue(Client(self.aport, sock=s).silent_for(0.3))
            with Client(self.aport, sock=self.put_head(auth)) as c:
                r = c.read_response()
                self.assertEqual(r.status, 503, r)
                self.assertEqual(r.json()["error"], "admin API busy")
                self.assertEqual(r.header("Retry-After"), "1")
                self.assertTrue(c.wait_closed())
        finally:
            for s in held:
                s.close()
        cfg, _, _ = api.config()
        wait_for(lambda: api.put("/config?dry_run=1", cfg).status == 200,
                 what="a body read once the others are gone")


class ConnectionCapTest(SecurityCase):
    def test_connections_over_the_cap(self):
        self.start()
        # each slot is proved taken by a 200 on a connection kept open. The
        # start-up probe's connection may still hold a slot for a moment (the
        # server has not read its close yet): a 503 before 64 are served is
        # that, and the next connect tries again; 64 are never reached if the
        # cap is lower
        held, busy = [], 0
        deadline = time.monotonic() + TIMEOUT
        try:
            while len(held) < MAX_CONNS and busy < 50 and time.monotonic() < deadline:
                c = Client(self.aport)
                try:
                    r = c.request("GET", "/status")
                except Closed:  # over the cap and past 16 refusals at once: the close alone
                    r = None
                if r and r.status == 200 and r.header("Connection") != "close":
                    held.append(c)
                    continue
                c.close()
                if r:
                    self.assertEqual(r.status, 503, r)
                busy += 1
                time.sleep(0.05)
            self.assertEqual(len(held), MAX_CONNS, "served before the first refusal")
            # all 64 taken, idle: the next one is over the cap
            with Client(self.aport) as c:
                c.send(b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
                r = c.read_response()
                self.assertEqual(r.status, 503, r)
                self.assertEqual(r.json()["error"], "admin API busy")
                self.assertIn("too many admin connections", r.json()["errors"][0]["message"])
                self.assertTrue(c.wait_closed())
        finally:
            for c in held:
                c.close()

        # the slots come back, and a good client is answered
        def served():
            try:
                with Client(self.aport) as c:
                    return c.request("GET", "/status").status == 200
            except OSError:
                return False

        wait_for(served, what="the admin API serving again")

    def test_a_dribbled_head_times_out(self):
        # a head must be whole 10 s after it began, however it trickles in
        self.start()
        with Client(self.aport) as c:
            c.send(b"GET /status HTTP/1.1\r\nHost: localhost\r\n")
            deadline = time.monotonic() + 30
            got = None
            while time.monotonic() < deadline:
                try:
                    c.send(b"X-Slow: 1\r\n")
                except OSError:
                    break
                if not c.silent_for(1):
                    break
            try:
                got = c.read_response()
            except Exception as e:  # noqa: BLE001 - closed without a 408 fails below
                got = e
            self.assertEqual(getattr(got, "status", None), 408, got)


if __name__ == "__main__":
    main()
