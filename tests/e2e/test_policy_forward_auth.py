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
        ]
        cls.cfg = gateway_config(
            upstreams={"app": upstream_cfg(cls.b), "auth": upstream_cfg(cls.auth.addr),
                       "auth2": upstream_cfg(cls.auth2.addr),
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
