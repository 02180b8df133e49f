#!/usr/bin/env python3
"""test_policy_forward_auth.py - the forward_auth policy end to end: the
real switchyard in front of sy_test_backend (the upstream, which echoes
what it got) and auth_backend.py (the auth service, a Python http.server
process answering by the Authorization field). A 2xx lets the request
through with X-User copied and the client's forged copies dropped; 401
and 403 come back with their body and their fields (nothing else of
them); 500 and 302 from the service, a malformed answer, a 401 body over
64 KiB, a slow service and a killed one answer 503 or 500; the other
routes keep serving meanwhile; the subrequests reuse their connections;
a POST body waits and reaches the upstream intact; HTTP/2 clients go
through it too; clients that leave mid-subrequest leak nothing (the
ASan build's log is checked at the end); /metrics counts; credentials
never reach the access log; bad policies are refused at their paths.
RawAuth, a raw-socket service of the test's own, writes the answers
http.server cannot: chunked and close-delimited bodies, 1xx heads up to
the limit and past it, heads at the 16 KiB bound and past it, bytes after
an answer (its connection never reused), 204 and empty yeses, answers
with both Transfer-Encoding and Content-Length (500); and a pool at its
max_connections answers 503 at once.
Every wait is bounded (harness.TIMEOUT, or less)."""
import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "admin"))

import harness  # noqa: E402
import h2client  # noqa: E402
from adminlib import Admin, admin_port, metric, parse_prometheus, wait_ready  # noqa: E402
from harness import (Client, GatewayCase, gateway_config, h1_only, main,  # noqa: E402
                     metrics_text, upstream_cfg)

AUTH_BACKEND = os.path.join(HERE, "auth_backend.py")
TIMEOUT_MS = 500
RAW_TIMEOUT_MS = 5000  # RawAuth answers at once: only a bug waits this long
ONE_TIMEOUT_MS = 20000  # longer than any wait of the max_connections test


class AuthService:
    """One auth_backend.py process."""

    def __init__(self, tmp, name):
        self.tmp, self.name, self.proc, self.port = tmp, name, None, 0

    def start(self):
        pf = self.tmp.file("auth-%s.port" % self.name)
        self.proc = subprocess.Popen([sys.executable, AUTH_BACKEND, "--port-file", pf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        harness._live.append(self.proc)
        self.port = harness.wait_port_file(self.proc, pf, "auth service %s" % self.name)
        return self

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def control(self, path):
        with Client(self.port) as c:
            r = c.request("GET", path, headers=[("Connection", "close")])
        assert r.status == 200, r.status
        return json.loads(r.body)

    def stop(self, sig=15):
        if self.proc is None:
            return
        harness._killpg(self.proc, sig)
        self.proc.wait(harness.TIMEOUT)
        if self.proc in harness._live:
            harness._live.remove(self.proc)
        self.proc = None


class RawAuth:
    """An auth service of the test's own that writes exact bytes where
    http.server cannot (chunked and close-delimited bodies, 1xx heads, long
    heads, bytes after an answer): a listening socket on 127.0.0.1 and a
    thread per connection that reads request heads (a subrequest has no
    body but a POST's "Content-Length: 0") and answers each by its token
    ("Authorization: Bearer TOKEN") with the steps of scripts[TOKEN] (a
    401 without one): bytes are written as they are, a float sleeps that
    long between two writes (an answer in pieces, never a synchronization),
    a threading.Event is waited for (at most harness.TIMEOUT), "close"
    closes the connection. It numbers its connections and records each
    request's (connection, token) and each connection the gateway closed;
    every wait is bounded."""

    DENY = [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"]

    def __init__(self, scripts):
        self.scripts = scripts
        self.cv = threading.Condition()
        self.nconn = 0  # connections accepted, ever: their numbers
        self.base = 0  # nconn at the last reset()
        self.requests = []  # (connection, token) since the last reset()
        self.gone = set()  # connections the gateway closed
        self.open = {}  # connection -> socket, while open
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            with self.cv:
                self.nconn += 1
                n = self.nconn
                self.open[n] = s
            threading.Thread(target=self.serve, args=(s, n), daemon=True).start()

    @staticmethod
    def recv(s):
        d = s.recv(65536)
        if not d:
            raise ConnectionResetError("the gateway closed")
        return d

    def serve(self, s, n):
        s.settimeout(harness.TIMEOUT)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    buf += self.recv(s)
                head, buf = buf.split(b"\r\n\r\n", 1)
                token, length = "", 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"authorization":
                        token = v.strip().decode().replace("Bearer ", "")
                    elif k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += self.recv(s)
                buf = buf[length:]
                with self.cv:
                    if n > self.base:  # not one that reset() closed
                        self.requests.append((n, token))
                        self.cv.notify_all()
                for step in self.scripts.get(token, self.DENY):
                    if step == "close":
                        return
                    if isinstance(step, float):
                        time.sleep(step)
                    elif isinstance(step, threading.Event):
                        step.wait(harness.TIMEOUT)
                    else:
                        s.sendall(step)
        except socket.timeout:
            pass
        except OSError:  # a close, or a reset: bytes it never read
            with self.cv:
                if n > self.base:  # not one that reset() closed
                    self.gone.add(n)
                    self.cv.notify_all()
        finally:
            with self.cv:
                self.open.pop(n, None)
            s.close()

    def reset(self):
        """Closes every connection (the gateway's parked ones die: the next
        subrequest opens one) and forgets the records."""
        with self.cv:
            for s in self.open.values():
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.base = self.nconn
            self.requests = []

    @property
    def connections(self):
        """Connections accepted since the last reset()."""
        with self.cv:
            return self.nconn - self.base

    def wait_gone(self, n):
        """Waits until the gateway closes connection <n>."""
        with self.cv:
            return self.cv.wait_for(lambda: n in self.gone, harness.TIMEOUT)

    def wait_request(self, token):
        """Waits until a request with <token> came; its connection."""
        with self.cv:
            if not self.cv.wait_for(lambda: any(t == token for _, t in self.requests),
                                    harness.TIMEOUT):
                raise AssertionError("no request with %r came" % token)
            return [c for c, t in self.requests if t == token][0]

    def close(self):
        self.reset()
        self.lsock.close()


def sized_head(size, first, fields=(), pad=b"X-Pad"):
    """An answer's head of exactly <size> bytes, its blank line included:
    status line <first>, <fields>, then field <pad> filling the rest."""
    pre = first + b"\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in fields) + pad + b": "
    n = size - len(pre) - 4
    assert n > 0
    return pre + b"p" * n + b"\r\n\r\n"


OK_LINE = b"HTTP/1.1 200 OK\r\nX-User: carol\r\nContent-Length: 2\r\n\r\nok"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
CLOSE_BODY = harness.pattern_bytes(40000)  # over two of the gateway's reads
GW_SUB_HEAD_MAX = 16 * 1024  # subreq.h: a head, its blank line included
INTERIM_MAX = 8  # subreq.c: 1xx heads skipped before the final one


def raw_scripts():
    """RawAuth's answers for ForwardAuthTest, by token."""
    chunked401 = (b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"raw\"\r\n"
                  b"Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nwho a\r\n6;ext=1\r\nre you\r\n0\r\nX-Trailer: t\r\n\r\n")
    cut = chunked401.index(b"6;ext")
    return {
        # chunked
        "chunked401": [chunked401],
        "chunked401-pieces": [chunked401[:40], 0.02, chunked401[40:cut + 3], 0.02,
                              chunked401[cut + 3:-3], 0.02, chunked401[-3:]],
        "chunked200": [b"HTTP/1.1 200 OK\r\nX-User: carol\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"2\r\nok\r\n0\r\n\r\n"],
        "chunked-cut": [chunked401[:cut + 5], "close"],
        # close-delimited
        "close401": [b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
                     b"Connection: close\r\n\r\n", 0.02, CLOSE_BODY[:20000], 0.02,
                     CLOSE_BODY[20000:], "close"],
        "close200": [b"HTTP/1.1 200 OK\r\nX-User: carol\r\nConnection: close\r\n\r\nok", "close"],
        "close200-http10": [b"HTTP/1.0 200 OK\r\nX-User: carol\r\n\r\nok", "close"],
        # framed by Content-Length, but not to be kept: the service does not close
        "length-close401": [b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n"
                            b"Content-Length: 3\r\n\r\nwho"],
        "length-http10": [b"HTTP/1.0 200 OK\r\nX-User: carol\r\nContent-Length: 2\r\n\r\nok"],
        "length-cut": [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 100\r\n\r\nwho", "close"],
        # 1xx
        "interim200": [CONTINUE, 0.02, HINTS, 0.02, OK_LINE],
        "interim401": [CONTINUE + b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 11\r\n\r\n"
                       b"who are you"],
        "interim-max": [HINTS * (INTERIM_MAX - 1) + CONTINUE + OK_LINE],
        "interim-over": [HINTS * INTERIM_MAX + CONTINUE + OK_LINE],
        "switching": [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\n\r\n"],
        "interim-long": [sized_head(GW_SUB_HEAD_MAX + 1, b"HTTP/1.1 103 Early Hints",
                                    pad=b"Link") + OK_LINE],
        # the head's bound
        "head-max": [sized_head(GW_SUB_HEAD_MAX, b"HTTP/1.1 200 OK",
                                [(b"X-User", b"carol"), (b"Content-Length", b"2")]) + b"ok"],
        "head-max401": [sized_head(GW_SUB_HEAD_MAX, b"HTTP/1.1 401 Unauthorized",
                                   [(b"Content-Length", b"3")], pad=b"WWW-Authenticate") + b"who"],
        "head-over": [sized_head(GW_SUB_HEAD_MAX + 1, b"HTTP/1.1 200 OK",
                                 [(b"X-User", b"carol"), (b"Content-Length", b"2")]) + b"ok"],
        # bytes after a whole answer
        "then-response": [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nfirst"
                          b"HTTP/1.1 200 OK\r\nX-User: mallory\r\nContent-Length: 0\r\n\r\n"],
        "then-garbage": [OK_LINE + b"garbage\r\n"],
        "then-late": [OK_LINE, 0.05, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],
        "204-body": [b"HTTP/1.1 204 No Content\r\nX-User: carol\r\nContent-Length: 5\r\n\r\n"
                     b"hello"],
        # empty and doubly framed yeses
        "204": [b"HTTP/1.1 204 No Content\r\nX-User: carol\r\n\r\n"],
        "200-empty": [b"HTTP/1.1 200 OK\r\nX-User: carol\r\nContent-Length: 0\r\n\r\n"],
        "te-cl": [b"HTTP/1.1 200 OK\r\nX-User: carol\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n"],
        "cl-te": [b"HTTP/1.1 200 OK\r\nX-User: carol\r\nContent-Length: 3\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"],
        "cl-te401": [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n3\r\nwho\r\n0\r\n\r\n"],
        # max_connections (RawAuth rawone; "hold" is the test's)
        "quick": [OK_LINE],
    }


def values(msg, name):
    """The values of field <name> in <msg>: the upstream's echo, or a
    request the auth service saw."""
    return [v for k, v in msg["headers"] if k.lower() == name.lower()]


class ForwardAuthTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("app")
        cls.auth = AuthService(cls.tmp, "auth").start()
        cls.addClassCleanup(cls.auth.stop)
        cls.auth2 = AuthService(cls.tmp, "auth2").start()
        cls.addClassCleanup(cls.auth2.stop)
        cls.auth3 = AuthService(cls.tmp, "auth3").start()  # behind health checks
        cls.addClassCleanup(cls.auth3.stop)
        cls.raw = RawAuth(raw_scripts())  # exact bytes
        cls.addClassCleanup(cls.raw.close)
        cls.rawone = RawAuth(raw_scripts())  # behind max_connections 1
        cls.addClassCleanup(cls.rawone.close)
        cls.log = cls.tmp.file("access.log")
        policies = {
            "authsvc": {"type": "forward_auth", "upstream": "auth", "path": "/verify",
                        "request_headers": ["Authorization", "Cookie"],
                        "response_headers": ["X-User"], "timeout_ms": TIMEOUT_MS},
            "authdown": {"type": "forward_auth", "upstream": "auth2",
                         "request_headers": ["Authorization"]},
            "authhc": {"type": "forward_auth", "upstream": "auth3",
                       "request_headers": ["Authorization"]},
            "authall": {"type": "forward_auth", "upstream": "auth", "path": "/verify"},
            "patient": {"type": "forward_auth", "upstream": "auth", "path": "/verify",
                        "timeout_ms": 6000},
            "authnone": {"type": "forward_auth", "upstream": "auth", "path": "/verify",
                         "request_headers": []},
            "rawauth": {"type": "forward_auth", "upstream": "raw", "path": "/check",
                        "request_headers": ["Authorization"], "response_headers": ["X-User"],
                        "timeout_ms": RAW_TIMEOUT_MS},
            "rawone": {"type": "forward_auth", "upstream": "rawone", "path": "/check",
                       "request_headers": ["Authorization"], "response_headers": ["X-User"],
                       "timeout_ms": ONE_TIMEOUT_MS},
        }
        routes = [
            {"id": "fa", "path": "/fa/*{rest}", "upstream": "app", "policies": ["authsvc"]},
            {"id": "fa-local", "path": "/hello", "response": {"body": "hi"},
             "policies": ["authsvc"]},
            {"id": "down", "path": "/down", "upstream": "app", "policies": ["authdown"]},
            {"id": "hc", "path": "/hc", "upstream": "app", "policies": ["authhc"]},
            {"id": "open", "path": "/open", "upstream": "app"},
            {"id": "all", "path": "/all", "upstream": "app", "policies": ["authall"]},
            {"id": "patient", "path": "/patient", "upstream": "app", "policies": ["patient"]},
            {"id": "none", "path": "/none", "upstream": "app", "policies": ["authnone"]},
            {"id": "raw", "path": "/raw/*{rest}", "upstream": "app", "policies": ["rawauth"]},
            {"id": "one", "path": "/one/*{rest}", "upstream": "app", "policies": ["rawone"]},
        ]
        cls.cfg = gateway_config(
            upstreams={"app": upstream_cfg(cls.b), "auth": upstream_cfg(cls.auth.addr),
                       "auth2": upstream_cfg(cls.auth2.addr),
                       "raw": upstream_cfg(cls.raw.addr),
                       # max_connections is per worker: one HTTP/2 connection's
                       # streams meet it on theirs
                       "rawone": upstream_cfg(cls.rawone.addr, max_connections=1),
                       # a server that refuses connections, which its checks mark down
                       "auth3": upstream_cfg(cls.auth3.addr, "127.0.0.1:%d" % harness.free_port(),
                                             health_check={"path": "/__stats",
                                                           "interval_ms": 100, "timeout_ms": 100},
                                             initially_unhealthy=True)},
            routes=routes, policies=policies, access_log=cls.log,
            # shorter than the slow service's answer: waiting on it is not the client's delay
            timeouts={"client_body_ms": 1500})
        cls.cfg["listeners"][0]["protocols"] = ["h1", "h2c"]
        cls.tls_port = harness.free_port()
        cls.cfg["listeners"].append({
            "address": "127.0.0.1:%d" % cls.tls_port,
            "tls": {"certificates": [harness.self_signed(cls.tmp)]}})
        cls.gw = cls.shared_gateway(cls.cfg)
        wait_ready(cls.gw)
        cls.api = Admin(admin_port(cls.cfg))

    def get(self, target, token=None, headers=(), method="GET", body=None):
        hs = list(headers)
        if token:
            hs.append(("Authorization", "Bearer " + token))
        with Client(self.gw.port) as c:
            return c.request(method, target, headers=hs, body=body)

    def last_auth_request(self):
        return self.auth.control("/__stats")["requests"][-1]

    # ---- allowed ----

    def test_allow_copies_user_and_drops_forged_copies(self):
        r = self.get("/fa/x?q=1&r=2", "good", [("X-User", "mallory"), ("X_User", "m2"),
                                              ("x-user", "m3"), ("Cookie", "c=1")])
        self.assertEqual(r.status, 200, r.body)
        e = r.json()
        self.assertEqual([v for k, v in e["headers"]
                          if k.lower().replace("_", "-") == "x-user"], ["alice"])
        self.assertEqual(values(e, "X-Internal"), [])  # not in response_headers
        self.assertEqual(values(e, "Authorization"), ["Bearer good"])  # untouched
        a = self.last_auth_request()
        self.assertEqual((a["method"], a["path"]), ("GET", "/verify"))
        self.assertEqual(values(a, "X-Forwarded-Method"), ["GET"])
        self.assertEqual(values(a, "X-Forwarded-Uri"), ["/fa/x?q=1&r=2"])
        self.assertEqual(values(a, "X-Forwarded-Host"), ["localhost"])
        self.assertEqual(values(a, "X-Forwarded-Proto"), ["http"])
        self.assertEqual(values(a, "X-Forwarded-For"), ["127.0.0.1"])
        self.assertEqual(values(a, "Authorization"), ["Bearer good"])
        self.assertEqual(values(a, "Cookie"), ["c=1"])
        self.assertEqual(values(a, "X-User"), [])  # not in request_headers
        self.assertEqual(values(a, "Content-Length"), [])  # a GET has no content
        self.assertEqual(values(a, "Host"), [self.auth.addr])

    def test_request_headers_default_every_end_to_end_field(self):
        """Without request_headers the service sees the client's fields, as
        with nginx's auth_request and Traefik's ForwardAuth, but for the
        connection's own, framing, Host, Expect and forged X-Forwarded-*;
        an empty list sends none."""
        r = self.get("/all", "good", [("Cookie", "c=1"), ("X-Custom", "a"), ("X-Custom", "b"),
                                      ("X_Forwarded_For", "6.6.6.6"),
                                      ("X-Forwarded-Uri", "/forged"), ("Connection", "X-Hop"),
                                      ("X-Hop", "1")],
                     method="POST", body=b"data")
        self.assertEqual(r.status, 200, r.body)
        a = self.last_auth_request()
        self.assertEqual(values(a, "Authorization"), ["Bearer good"])
        self.assertEqual(values(a, "Cookie"), ["c=1"])
        self.assertEqual(values(a, "X-Custom"), ["a", "b"])
        self.assertEqual([k for k, v in a["headers"]
                          if k.lower().replace("_", "-") == "x-forwarded-for"],
                         ["X-Forwarded-For"])
        self.assertEqual(values(a, "X-Forwarded-For"), ["127.0.0.1"])
        self.assertEqual(values(a, "X-Forwarded-Uri"), ["/all"])
        self.assertEqual(values(a, "X-Hop"), [])
        self.assertEqual(values(a, "Content-Length"), ["0"])  # no body goes
        self.assertEqual(values(a, "Host"), [self.auth.addr])
        self.assertEqual(r.json()["body_sha256"], hashlib.sha256(b"data").hexdigest())
        r = self.get("/none", "good", [("Cookie", "c=1")])
        self.assertEqual(r.status, 401, r.body)  # the service never saw the token
        a = self.last_auth_request()
        self.assertEqual(values(a, "Authorization"), [])
        self.assertEqual(values(a, "Cookie"), [])

    def test_request_id_joins_service_and_upstream(self):
        """The service gets the X-Request-Id the upstream and the client
        get: the one made for the request, or the client's own, once."""
        for path in ("/fa/x", "/all", "/none"):
            r = self.get(path, "good")
            a = self.last_auth_request()
            ids = values(a, "X-Request-Id")
            self.assertEqual(len(ids), 1, a)
            self.assertEqual(r.header("X-Request-Id"), ids[0], path)
            if r.status == 200:
                self.assertEqual(values(r.json(), "X-Request-Id"), ids)
            r = self.get(path, "good", [("X-Request-Id", "abc-123"), ("X-Request-Id", "second")])
            a = self.last_auth_request()
            self.assertEqual(values(a, "X-Request-Id"), ["abc-123"])
            self.assertEqual(r.header("X-Request-Id"), "abc-123", path)
            if r.status == 200:
                self.assertEqual(values(r.json(), "X-Request-Id"), ["abc-123"])

    def test_allow_other_methods(self):
        r = self.get("/fa/h", "good", method="HEAD")
        self.assertEqual(r.status, 200)
        a = self.last_auth_request()
        self.assertEqual((a["method"], values(a, "Content-Length")), ("HEAD", []))
        r = self.get("/fa/d", "good", method="DELETE")
        self.assertEqual(r.status, 200)
        r = self.get("/hello", "good")  # a local answer behind the policy
        self.assertEqual((r.status, r.body), (200, b"hi"))
        self.assertEqual(self.get("/hello", "deny").status, 401)

    def test_post_body_waits_then_goes_up_intact(self):
        body = os.urandom(300 * 1024)
        r = self.get("/fa/up", "good", [("Content-Type", "application/octet-stream")],
                     method="POST", body=body)
        self.assertEqual(r.status, 200, r.body[:200])
        e = r.json()
        self.assertEqual(e["body_bytes"], len(body))
        self.assertEqual(e["body_sha256"], hashlib.sha256(body).hexdigest())
        self.assertEqual(values(e, "X-User"), ["alice"])
        a = self.last_auth_request()
        self.assertEqual((a["method"], values(a, "Content-Length")), ("POST", ["0"]))
        # refused, the body is read away and the connection stays usable
        with Client(self.gw.port) as c:
            r = c.request("POST", "/fa/up", headers=[("Authorization", "Bearer deny")],
                          body=body)
            self.assertEqual(r.status, 401)
            self.assertEqual(c.request("GET", "/open").status, 200)

    def test_expect_100_continue_only_after_a_yes(self):
        body = b"e" * 50000
        with Client(self.gw.port) as c:
            c.send(harness.build_request("POST", "/fa/e", [
                ("Expect", "100-continue"), ("Content-Length", str(len(body))),
                ("Authorization", "Bearer good")]))
            self.assertEqual(c.read_head().status, 100)  # after the service said yes
            c.send(body)
            r = c.read_response("POST")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_bytes"], len(body))
        with Client(self.gw.port) as c:  # refused: no 100, the body never asked for
            c.send(harness.build_request("POST", "/fa/e", [
                ("Expect", "100-continue"), ("Content-Length", str(len(body))),
                ("Authorization", "Bearer deny")]))
            r = c.read_response("POST")
            self.assertEqual((r.status, r.body), (401, b"who are you"))
            self.assertClosed(c)  # the body may come or not: the connection ends

    def test_body_timeout_counts_from_the_answer(self):
        """A wait on the service longer than client_body_ms is ours, not the
        client's: the body's clock starts when reading starts again."""
        body = b"p" * 1000
        with Client(self.gw.port) as c:
            c.send(harness.build_request("POST", "/patient", [
                ("Expect", "100-continue"), ("Content-Length", str(len(body))),
                ("Authorization", "Bearer slow")]))
            self.assertEqual(c.read_head().status, 100)  # about 3 s later
            time.sleep(0.2)
            c.send(body)
            r = c.read_response("POST")
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(r.json()["body_bytes"], len(body))

    @h1_only("pipelining is HTTP/1.1's")
    def test_pipelined_request_waits_its_turn(self):
        """A request sent behind one that waits on the service is neither
        parsed onto it nor timed out: it is answered after it, in order."""
        with Client(self.gw.port) as c:
            c.send(harness.build_request("GET", "/patient", [("Authorization", "Bearer slow")]) +
                   harness.build_request("GET", "/open?second=1", []))
            r1 = c.read_response("GET")
            self.assertEqual(r1.status, 200, r1.body)
            self.assertEqual(r1.json()["target"], "/patient")
            r2 = c.read_response("GET")
            self.assertEqual(r2.status, 200, r2.body)
            self.assertEqual(r2.json()["target"], "/open?second=1")

    def test_pushes_while_a_subrequest_waits(self):
        """Config swaps during a subrequest: the request ends on the snapshot
        it started with, whichever answers (under ASan in CI)."""
        out = {}

        def slow(i):
            out[i] = self.get("/patient", "slow").status

        ts = [threading.Thread(target=slow, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.3)
        for k in range(6):  # each push a new snapshot; the old ones retire
            new = json.loads(json.dumps(self.cfg))
            new["routes"].append({"id": "extra%d" % k, "path": "/extra%d" % k,
                                  "response": {"body": "x"}})
            r = self.api.put("/config", new)
            self.assertEqual(r.status, 200, r)
            time.sleep(0.2)
        for t in ts:
            t.join(harness.TIMEOUT)
        self.assertEqual(out, {0: 200, 1: 200, 2: 200})
        r = self.api.put("/config", self.cfg)
        self.assertEqual(r.status, 200, r)

    # ---- refused ----

    def test_401_with_body_and_challenge(self):
        before = self.b.stats()
        r = self.get("/fa/x", "deny")
        self.assertEqual(r.status, 401)
        self.assertEqual(r.body, b"who are you")
        self.assertEqual(r.header("WWW-Authenticate"), 'Bearer realm="auth"')
        self.assertEqual(r.header("Content-Type"), "text/plain")
        self.assertEqual(r.header("Set-Cookie"), "sid=none; Path=/")
        self.assertIsNone(r.header("X-Secret"))
        self.assertIsNone(r.header("X-User"))
        self.assertEqual(self.get("/fa/x").status, 401)  # no credentials at all
        self.assertEqual(self.b.stats()["requests"], before["requests"])  # never upstream

    def test_403_with_body(self):
        r = self.get("/fa/x", "forbid")
        self.assertEqual(r.status, 403)
        self.assertEqual(json.loads(r.body), {"error": "forbidden"})
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertIsNone(r.header("WWW-Authenticate"))

    # ---- failures ----

    def test_other_statuses_are_503(self):
        for token in ("boom", "moved"):
            self.assertEqual(self.get("/fa/x", token).status, 503, token)

    def test_malformed_answers_are_500(self):
        self.assertEqual(self.get("/fa/x", "garbage").status, 500)
        self.assertEqual(self.get("/fa/x", "big").status, 500)  # a 401 body over 64 KiB
        self.assertEqual(self.get("/fa/x", "hangup").status, 503)  # closed before answering
        self.assertEqual(self.get("/fa/x", "good").status, 200)

    def test_slow_service_is_503_while_others_serve(self):
        out = {}

        def slow():
            t0 = time.monotonic()
            out["status"] = self.get("/fa/x", "slow").status
            out["secs"] = time.monotonic() - t0

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.1)
        t0 = time.monotonic()
        for _ in range(5):  # the worker is not held: other routes and other auths go on
            self.assertEqual(self.get("/open").status, 200)
            self.assertEqual(self.get("/fa/x", "good").status, 200)
        self.assertLess(time.monotonic() - t0, TIMEOUT_MS / 1000.0 + 1)
        t.join(harness.TIMEOUT)
        self.assertEqual(out.get("status"), 503)
        self.assertGreaterEqual(out["secs"], TIMEOUT_MS / 1000.0 - 0.05)
        self.assertLess(out["secs"], TIMEOUT_MS / 1000.0 + 2)

    def test_killed_service_is_503(self):
        auth2 = ForwardAuthTest.auth2
        self.assertEqual(self.get("/down", "good").status, 200)
        since = self.gw.log_size()
        auth2.stop(9)
        for _ in range(3):
            self.assertEqual(self.get("/down", "good").status, 503)
        # the log names the server and what failed, as a proxied try's does
        self.gw.wait_log(r"forward_auth authdown route down: upstream auth2 server %s: "
                         r"Connection refused" % re.escape(auth2.addr), since=since)

    # ---- pooling ----

    def test_subrequests_reuse_connections(self):
        self.auth.control("/__reset")
        n = 30
        for i in range(n):
            self.assertEqual(self.get("/fa/k%d" % i, "good").status, 200)
        st = self.auth.control("/__stats")
        self.assertEqual(len(st["requests"]), n)
        # one connection per worker at most, and this stats one
        self.assertLessEqual(st["connections"], self.gw.nworkers + 2, st["connections"])

    def test_connection_kept_only_after_a_whole_answer(self):
        self.auth.control("/__reset")
        for _ in range(3):
            self.assertEqual(self.get("/fa/w", "good").status, 200)
        kept = self.auth.control("/__stats")["connections"]
        n = 6
        for _ in range(n):  # a body over 64 KiB is not read: each connection closes
            r = self.get("/fa/w", "bigok")
            self.assertEqual(r.status, 200)
            self.assertEqual(values(r.json(), "X-User"), ["bob"])
        # but for the first on each worker, which may find one parked before
        self.assertGreaterEqual(self.auth.control("/__stats")["connections"],
                                kept + n - self.gw.nworkers)

    def test_servers_down_are_not_asked(self):
        harness.wait_for(lambda: self.get("/hc", "good").status == 200,
                         what="the auth server checked up")
        # round robin over the two would send every other one to the dead server
        self.assertEqual([self.get("/hc", "good").status for _ in range(10)], [200] * 10)

    # ---- answers framed every way (RawAuth's exact bytes) ----

    def raw_get(self, c, token, target="/raw/x"):
        """<c>'s request, which RawAuth answers with script <token>: one
        client connection keeps its subrequests on one worker, so that
        RawAuth's connection numbers show which it reused."""
        return c.request("GET", target, headers=[("Authorization", "Bearer " + token)])

    def raw_conns(self):
        return [n for n, _ in self.raw.requests]

    def test_chunked_answers(self):
        """A chunked answer is decoded: a 401's body reaches the client
        whole and framed anew (without the chunks' sizes, extensions and
        trailer), also when it comes in pieces; a chunked 200 lets the
        request through; each answer read whole, the one connection serves
        every subrequest. An answer cut mid-chunk is a 503."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            for token in ("chunked401", "chunked401-pieces"):
                r = self.raw_get(c, token)
                self.assertEqual((r.status, r.body), (401, b"who are you"), token)
                self.assertEqual(r.header("Content-Length"), "11")
                self.assertEqual(r.header("WWW-Authenticate"), 'Bearer realm="raw"')
                self.assertEqual(r.header("Content-Type"), "text/plain")
                self.assertIsNone(r.header("X-Trailer"))
                r = self.raw_get(c, "chunked200")
                self.assertEqual(r.status, 200, r.body)
                self.assertEqual(values(r.json(), "X-User"), ["carol"])
        conns = self.raw_conns()
        self.assertEqual(len(conns), 4, self.raw.requests)
        self.assertEqual(set(conns), {conns[0]}, "reused after each whole chunked answer")
        self.assertEqual(self.get("/raw/x", "chunked-cut").status, 503)

    def test_close_delimited_answers(self):
        """An answer with neither Content-Length nor chunked ends at the
        close: a 401's 40000 bytes reach the client whole, a 200 (HTTP/1.1
        with Connection: close, or HTTP/1.0) lets the request through, and
        the next subrequest opens a new connection. An answer with a
        length but Connection: close, or HTTP/1.0 without keep-alive, is
        used, and the gateway closes its connection though the service
        keeps it open. One cut before its Content-Length is a 503."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            r = self.raw_get(c, "close401")
            self.assertEqual(r.status, 401)
            self.assertEqual(r.body, CLOSE_BODY)
            self.assertEqual(r.header("Content-Type"), "text/plain")
            for token in ("close200", "close200-http10"):
                r = self.raw_get(c, token)
                self.assertEqual(r.status, 200, r.body)
                self.assertEqual(values(r.json(), "X-User"), ["carol"])
            r = self.raw_get(c, "length-close401")
            self.assertEqual((r.status, r.body), (401, b"who"))
            self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]))
            r = self.raw_get(c, "length-http10")
            self.assertEqual(r.status, 200, r.body)
            self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]))
            self.assertEqual(self.raw_get(c, "chunked200").status, 200)
        conns = self.raw_conns()
        self.assertEqual(len(set(conns)), 6, self.raw.requests)
        self.assertEqual(self.get("/raw/x", "length-cut").status, 503)

    def test_interim_heads_are_skipped(self):
        """1xx heads (100 Continue, 103 Early Hints with a Link) before the
        final answer are skipped, never passed to the client: the 200 lets
        the request through with its X-User alone, the 401 comes back.
        Exactly INTERIM_MAX of them pass; one more, one over the head
        bound, or a 101 (nothing asked to switch) is a malformed answer
        (500), whose connection closes."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            for token in ("interim200", "interim-max"):
                r = self.raw_get(c, token)
                self.assertEqual((r.status, r.interim), (200, []), token)
                e = r.json()
                self.assertEqual(values(e, "X-User"), ["carol"])
                self.assertEqual(values(e, "Link"), [])
            r = self.raw_get(c, "interim401")
            self.assertEqual((r.status, r.interim, r.body), (401, [], b"who are you"))
            self.assertEqual(len(set(self.raw_conns())), 1, "reused after the whole answers")
            for token in ("interim-over", "interim-long", "switching"):
                self.assertEqual(self.raw_get(c, token).status, 500, token)
                self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]), token)

    def test_head_bound(self):
        """A final head of exactly GW_SUB_HEAD_MAX bytes (its blank line
        included) is read, a 401's long WWW-Authenticate passed on whole;
        one byte more is a malformed answer (500)."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            r = self.raw_get(c, "head-max")
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(values(r.json(), "X-User"), ["carol"])
            self.assertEqual(values(r.json(), "X-Pad"), [])
            r = self.raw_get(c, "head-max401")
            self.assertEqual((r.status, r.body), (401, b"who"))
            challenge = r.header("WWW-Authenticate")
            self.assertEqual(len(challenge), GW_SUB_HEAD_MAX - len(
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\nWWW-Authenticate: \r\n\r\n"))
            self.assertEqual(set(challenge), {"p"})
            self.assertEqual(self.raw_get(c, "head-over").status, 500)
            self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]))

    def test_bytes_after_an_answer_end_its_connection(self):
        """Bytes after a whole answer (a second, unasked answer; garbage; a
        204's body; or an answer that comes later, while the connection is
        parked) are no answer to anything: the first answer decides, and
        the gateway closes that connection rather than read them as the
        next subrequest's answer (as nginx and HAProxy do)."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            for token, status in (("then-response", 401), ("then-garbage", 200),
                                  ("204-body", 200), ("then-late", 200)):
                r = self.raw_get(c, token)
                self.assertEqual(r.status, status, token)
                if status == 401:
                    self.assertEqual(r.body, b"first")
                else:
                    self.assertEqual(values(r.json(), "X-User"), ["carol"], token)
                self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]), token)
            r = self.raw_get(c, "chunked200")
            self.assertEqual(r.status, 200)
        conns = self.raw_conns()
        self.assertEqual(len(set(conns)), len(conns), self.raw.requests)

    def test_empty_yes_answers(self):
        """A 204 and a 200 with Content-Length: 0 let the request through
        (with X-User), and their connection is reused: neither has a body
        to wait for."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            for token in ("204", "200-empty", "204", "200-empty"):
                r = self.raw_get(c, token)
                self.assertEqual(r.status, 200, token)
                self.assertEqual(values(r.json(), "X-User"), ["carol"], token)
        conns = self.raw_conns()
        self.assertEqual(len(conns), 4)
        self.assertEqual(set(conns), {conns[0]}, self.raw.requests)

    def test_both_lengths_are_malformed(self):
        """An answer with both Transfer-Encoding and Content-Length (either
        order, a 2xx or a 401) is refused as malformed (500; RFC 9112
        6.3 lets a recipient reject it): framed either way, it is what
        response splitting looks like, and a yes must not hang on it. Its
        connection closes; the next subrequest is framed right."""
        self.raw.reset()
        with Client(self.gw.port) as c:
            for token in ("te-cl", "cl-te", "cl-te401"):
                self.assertEqual(self.raw_get(c, token).status, 500, token)
                self.assertTrue(self.raw.wait_gone(self.raw_conns()[-1]), token)
            self.assertEqual(self.raw_get(c, "chunked200").status, 200)

    def test_full_pool_is_503_at_once(self):
        """With max_connections 1, a subrequest while another waits on the
        service gets 503 at once (no queue, no timeout_ms) and never
        reaches the service; once the first is answered the one connection
        serves the next ones. One HTTP/2 connection keeps the streams on
        one worker, whose share of the limit that is."""
        self.rawone.reset()
        hold = threading.Event()
        self.addCleanup(hold.set)
        self.rawone.scripts["hold"] = [hold, OK_LINE]
        h = h2client.H2Client(self.gw.port)
        self.addCleanup(h.close)
        quick = [("authorization", "Bearer quick")]
        first = h.start("GET", "/one/first", [("authorization", "Bearer hold")])
        self.rawone.wait_request("hold")
        t0 = time.monotonic()
        sid = h.start("GET", "/one/second", quick)
        r = h.collect([sid], timeout=ONE_TIMEOUT_MS / 2000.0)[sid]
        self.assertEqual(r.status, 503)
        self.assertLess(time.monotonic() - t0, ONE_TIMEOUT_MS / 2000.0)
        self.assertFalse(h.results[first].ended)  # still waiting on the service
        hold.set()
        r = h.collect([first])[first]
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(values(json.loads(r.body), "X-User"), ["carol"])
        for i in range(3):
            status, _, body, _ = h.request("GET", "/one/%d" % i, quick)
            self.assertEqual(status, 200, body)
        self.assertEqual([t for _, t in self.rawone.requests], ["hold"] + ["quick"] * 3)
        self.assertEqual(self.rawone.connections, 1)

    # ---- HTTP/2 clients ----

    def test_http2_client(self):
        with h2client.Client(self.gw.port) as c:
            r = c.request("GET", "/fa/h2?x=1", headers=[("authorization", "Bearer good"),
                                                       ("x-user", "mallory")])
            self.assertEqual(r.status, 200)
            self.assertEqual(values(r.json(), "X-User"), ["alice"])
            self.assertEqual(values(self.last_auth_request(), "X-Forwarded-Uri"), ["/fa/h2?x=1"])
            r = c.request("GET", "/fa/h2", headers=[("authorization", "Bearer deny")])
            self.assertEqual((r.status, r.body), (401, b"who are you"))
            self.assertEqual(r.header("www-authenticate"), 'Bearer realm="auth"')
            body = os.urandom(200 * 1024)  # past the initial windows: the body waits
            r = c.request("POST", "/fa/h2", headers=[("authorization", "Bearer good")],
                          body=body)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_sha256"], hashlib.sha256(body).hexdigest())
            self.assertEqual(c.request("GET", "/fa/h2", headers=[
                ("authorization", "Bearer slow")]).status, 503)

    def test_over_tls(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.tls_port),
                                                     timeout=harness.TIMEOUT))
        with Client(self.tls_port, sock=s) as c:
            r = c.request("GET", "/fa/tls", headers=[("Authorization", "Bearer good")])
            self.assertEqual(r.status, 200)
            self.assertEqual(values(r.json(), "X-User"), ["alice"])
            self.assertEqual(values(self.last_auth_request(), "X-Forwarded-Proto"), ["https"])
            r = c.request("GET", "/fa/tls", headers=[("Authorization", "Bearer deny")])
            self.assertEqual((r.status, r.body), (401, b"who are you"))
        with h2client.Client(self.tls_port, tls=True) as c:  # ALPN h2
            r = c.request("POST", "/fa/tls2", headers=[("authorization", "Bearer good")],
                          body=b"x" * 100000)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_bytes"], 100000)
            self.assertEqual(values(self.last_auth_request(), "X-Forwarded-Proto"), ["https"])

    def test_http2_streams_at_once(self):
        h = h2client.H2Client(self.gw.port)
        try:
            sids = [h.start("GET", "/fa/s%d" % i, [("authorization", "Bearer good")])
                    for i in range(8)]
            sids.append(h.start("GET", "/fa/s", [("authorization", "Bearer forbid")]))
            res = h.collect(sids)
            self.assertEqual([res[s].status for s in sids], [200] * 8 + [403])
        finally:
            h.close()

    # ---- clients that leave ----

    def test_client_leaves_mid_subrequest(self):
        for _ in range(5):  # HTTP/1.1: the request sent, then the close
            s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=harness.TIMEOUT)
            s.sendall(b"POST /fa/x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer slow\r\n"
                      b"Content-Length: 10\r\n\r\n01234")
            s.close()
        for _ in range(5):  # HTTP/2: a stream opened, then the connection gone
            h = h2client.H2Client(self.gw.port)
            h.start("GET", "/fa/x", [("authorization", "Bearer slow")])
            h.start("POST", "/fa/y", [("authorization", "Bearer slow")], body=b"abc",
                    end_stream=False)
            time.sleep(0.02)
            h.close()
        time.sleep(TIMEOUT_MS / 1000.0 + 0.5)  # every subrequest over
        self.assertEqual(self.get("/fa/x", "good").status, 200)
        self.assertEqual(self.get("/open").status, 200)

    # ---- observability ----

    def test_metrics_and_access_log(self):
        self.assertEqual(self.get("/fa/m", "good").status, 200)
        self.assertEqual(self.get("/fa/m", "deny").status, 401)
        self.assertEqual(self.get("/fa/m", "boom").status, 503)
        self.assertEqual(self.get("/fa/m", "slow").status, 503)
        _, s = parse_prometheus(metrics_text(self.gw))
        for name in ("allowed", "denied", "errors", "timeouts"):
            v = metric(s, "switchyard_forward_auth_%s_total" % name, policy="authsvc")
            self.assertGreaterEqual(v or 0, 1, name)
        self.assertIsNotNone(metric(s, "switchyard_forward_auth_allowed_total", policy="authdown"))
        harness.wait_for(lambda: os.path.exists(self.log) and "/fa/m" in open(self.log).read(),
                         what="the access log's lines")
        text = open(self.log).read()
        for secret in ("Bearer", "alice", "who are you"):
            self.assertNotIn(secret, text)

    # ---- config ----

    def test_bad_policies_refused_at_their_paths(self):
        def refused(policy, path, hint):
            new = json.loads(json.dumps(self.cfg))
            new["policies"]["bad"] = policy
            r = self.api.put("/config", new)
            self.assertEqual(r.status, 400, r)
            errs = r.json["errors"]
            self.assertIn(path, [e["path"] for e in errs], errs)
            self.assertIn(hint, json.dumps(errs))

        fa = {"type": "forward_auth", "upstream": "auth"}
        refused(dict(fa, upstream="auht"), "/policies/bad/upstream", "did you mean")
        refused(dict(fa, timeout_ms=0), "/policies/bad/timeout_ms", "")
        refused(dict(fa, request_headers=["Bad Name"]), "/policies/bad/request_headers/0",
                "invalid header name")
        refused(dict(fa, response_headers=["Content-Length"]),
                "/policies/bad/response_headers/0", "framing")
        refused(dict(fa, path="verify"), "/policies/bad/path", "origin-form")
        # two authentication policies on one route
        new = json.loads(json.dumps(self.cfg))
        new["policies"]["bad"] = fa
        new["routes"][0]["policies"] = ["authsvc", "bad"]
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 400, r)
        self.assertIn("/routes/0/policies/1", [e["path"] for e in r.json["errors"]])
        self.assertEqual(self.get("/fa/x", "good").status, 200)  # the live config serves

    def test_delete_of_the_auth_pool_names_its_policies(self):
        # as for a pool routes use: a 409 naming each user, not "unknown upstream"
        etag = self.api.get("/status").json["etag"]
        r = self.api.delete("/upstreams/auth2")
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.json["error"], "policies still use this upstream")
        self.assertEqual(r.json["policies"], ["authdown"])
        self.assertEqual(r.json["routes"], [])
        self.assertIn({"path": "/policies/authdown/upstream",
                       "message": 'forward_auth policy "authdown" asks it'}, r.json["errors"])
        self.assertEqual(self.api.get("/status").json["etag"], etag)


if __name__ == "__main__":
    main()
