#!/usr/bin/env python3
"""test_policies.py - route policies (issue 27) end to end: rate_limit
(429 with Retry-After and the RateLimit fields, a key flood bounded by
max_keys in /metrics, the table kept across a push), cors (preflights
answered here and never upstream, allowed and disallowed origins), api_key
(header and query keys, the query key stripped upstream and from the
access log, the consumer header, a client's forged copy dropped, 401),
and bad pushes refused at their JSON paths while the live config serves."""
import base64
import ctypes
import hashlib
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "admin"))

from adminlib import Admin, admin_port, metric, parse_prometheus, wait_ready  # noqa: E402
from harness import (Client, GatewayCase, gateway_config, h1_only,  # noqa: E402
                     main, metrics_text, upstream_cfg, wait_for, ws_frame, ws_handshake,
                     ws_read)

KEY = "s3cret-key-alice"


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def values(echo, name):
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


class PolicyCase(GatewayCase):
    """A gateway whose routes use cls.policies, on the backend cls.b, with
    its access log at cls.log and its admin API (test_policy_jwt.py too)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.log = cls.tmp.file("access.log")

    @classmethod
    def start_gateway(cls, routes):
        cls.cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)}, routes=routes,
                                 policies=cls.policies, access_log=cls.log,
                                 router={"trailing_slash": "redirect"})
        cls.gw = cls.shared_gateway(cls.cfg)
        wait_ready(cls.gw)
        cls.api = Admin(admin_port(cls.cfg))

    def get(self, target, headers=None, method="GET"):
        with Client(self.gw.port) as c:
            return c.request(method, target, headers=headers or [])

    def refused_at(self, new, path, hint=None):
        """Pushes config <new>: refused with an error at <path> (saying <hint>)."""
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 400, r)
        errs = r.json["errors"]
        self.assertIn(path, [e["path"] for e in errs], errs)
        if hint:
            self.assertIn(hint, json.dumps(errs))


class PoliciesTest(PolicyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keys_file = cls.tmp.file("api-keys.txt")
        with open(keys_file, "w") as f:
            f.write("# name:sha256\nbob:%s\n" % sha("bobs-key"))
        cls.policies = {
            "slow": {"type": "rate_limit", "rate": 1, "per_ms": 60000, "burst": 2,
                     "key": ["client_ip", "header:X-Tenant"]},
            "flood": {"type": "rate_limit", "rate": 1, "per_ms": 60000, "burst": 0,
                      "key": "header:X-K", "max_keys": 50},
            "web": {"type": "cors", "origins": ["https://app.example", "https://*.corp.example"],
                    "methods": ["GET", "POST"], "headers": ["Content-Type"],
                    "expose_headers": ["X-Total"], "credentials": True, "max_age_s": 600},
            "tight": {"type": "rate_limit", "rate": 1, "per_ms": 60000, "burst": 0,
                      "key": "header:X-T"},
            "keys": {"type": "api_key", "keys": [{"name": "alice", "sha256": sha(KEY)}],
                     "keys_file": keys_file, "query": "api_key", "header": "X-API-Key",
                     "consumer_header": "X-Consumer"},
            "tokens": {"type": "api_key", "keys": [{"name": "carol", "sha256": sha("t")}],
                       "query": "token"},
            "cntweb": {"type": "cors", "origins": ["https://app.example"]},
            "cntkeys": {"type": "api_key", "keys": [{"name": "dave", "sha256": sha("d")}]},
        }
        routes = [
            {"id": "rl", "path": "/rl/*{rest}", "upstream": "b", "policies": ["slow"]},
            {"id": "flood", "path": "/flood", "upstream": "b", "policies": ["flood"]},
            {"id": "cors", "path": "/cors/*{rest}", "upstream": "b", "policies": ["web"]},
            {"id": "local", "path": "/hello", "response": {"body": "hi"}, "policies": ["web"]},
            {"id": "key", "path": "/key/*{rest}", "upstream": "b", "policies": ["keys"]},
            {"id": "keyweb", "path": "/keyweb/*{rest}", "upstream": "b",
             "policies": ["keys", "web"]},
            {"id": "rlkey", "path": "/rlkey/*{rest}", "upstream": "b",
             "policies": ["tight", "keys"]},
            {"id": "open", "path": "/open", "upstream": "b"},
            {"id": "counted", "path": "/counted", "upstream": "b",
             "policies": ["cntkeys", "cntweb"]},
        ]
        cls.start_gateway(routes)

    # ---- rate_limit ----

    def test_rate_limit_burst_then_429(self):
        hs = [("X-Tenant", "t-burst")]
        for i in range(3):
            r = self.get("/rl/x", hs)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("RateLimit-Policy"), '"slow";q=1;w=60')
            self.assertEqual(r.header("RateLimit"), '"slow";r=%d;t=%d' % (2 - i, 60 * (i + 1)))
        r = self.get("/rl/x", hs)
        self.assertEqual(r.status, 429)
        self.assertEqual(r.header("Retry-After"), "60")
        self.assertEqual(r.header("RateLimit"), '"slow";r=0;t=180')
        # another tenant is another key
        self.assertEqual(self.get("/rl/x", [("X-Tenant", "t-other")]).status, 200)

    def test_upstream_ratelimit_fields_dropped(self):
        r = self.get("/rl/u?mode=headers&h=RateLimit:bogus&h=RateLimit-Policy:bogus",
                     [("X-Tenant", "up-fields")])
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("bogus", r.headers_all("RateLimit") + r.headers_all("RateLimit-Policy"))
        self.assertEqual(len(r.headers_all("RateLimit")), 1)

    def test_rate_limit_key_flood_is_bounded(self):
        for i in range(300):
            self.get("/flood", [("X-K", "k%d" % i)])
        _, m = parse_prometheus(metrics_text(self.gw))
        self.assertLessEqual(metric(m, "switchyard_rate_limit_keys", policy="flood"), 50)
        self.assertGreater(metric(m, "switchyard_rate_limit_evictions_total", policy="flood"), 0)
        # a huge key is one key like any other
        r = self.get("/flood", [("X-K", "z" * 20000)])
        self.assertIn(r.status, (200, 429))

    def test_push_keeps_the_limits(self):
        hs = [("X-Tenant", "t-push")]
        while self.get("/rl/x", hs).status == 200:
            pass
        new = json.loads(json.dumps(self.cfg))
        new["routes"].append({"id": "extra", "path": "/extra", "response": {"body": "x"}})
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.get("/rl/x", hs).status, 429)  # the same table
        r = self.api.put("/config", self.cfg)
        self.assertEqual(r.status, 200, r)

    # ---- cors ----

    def test_preflight_answered_here(self):
        before = self.b.stats()["requests"]
        r = self.get("/cors/a", [("Origin", "https://app.example"),
                                 ("Access-Control-Request-Method", "POST")], method="OPTIONS")
        self.assertEqual(r.status, 204)
        self.assertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
        self.assertEqual(r.header("Access-Control-Allow-Methods"), "GET, POST")
        self.assertEqual(r.header("Access-Control-Allow-Headers"), "Content-Type")
        self.assertEqual(r.header("Access-Control-Max-Age"), "600")
        self.assertEqual(r.header("Access-Control-Allow-Credentials"), "true")
        self.assertEqual(r.header("Vary"), "Origin")
        r = self.get("/cors/a", [("Origin", "https://evil.example"),
                                 ("Access-Control-Request-Method", "POST")], method="OPTIONS")
        self.assertEqual(r.status, 204)
        self.assertIsNone(r.header("Access-Control-Allow-Origin"))
        self.assertIsNone(r.header("Access-Control-Allow-Methods"))
        self.assertEqual(self.b.stats()["requests"], before)

    def test_every_policy_counts_its_results(self):
        """/metrics: switchyard_policy_requests_total{policy,type,result}, a
        pass or the status a policy answered; a preflight answered before
        the key is checked counts for cors alone."""
        def counts():
            _, m = parse_prometheus(metrics_text(self.gw))
            return {(p, res): metric(m, "switchyard_policy_requests_total", policy=p,
                                     type=t, result=res) or 0
                    for p, t in (("cntkeys", "api_key"), ("cntweb", "cors"))
                    for res in ("passed", "401", "204")}

        before = counts()
        origin = [("Origin", "https://app.example")]
        for _ in range(2):
            self.assertEqual(self.get("/counted", origin + [("X-API-Key", "d")]).status, 200)
        for _ in range(3):
            self.assertEqual(self.get("/counted", origin).status, 401)
        r = self.get("/counted", origin + [("Access-Control-Request-Method", "GET")],
                     method="OPTIONS")
        self.assertEqual(r.status, 204, r)
        after = counts()
        self.assertEqual({k: after[k] - before[k] for k in after},
                         {("cntkeys", "passed"): 2, ("cntkeys", "401"): 3,
                          ("cntkeys", "204"): 0, ("cntweb", "passed"): 2,
                          ("cntweb", "401"): 0, ("cntweb", "204"): 1})

    def test_preflight_before_auth(self):
        """A preflight never carries the key: cors answers it even when
        listed after the api_key; other requests still need the key."""
        r = self.get("/keyweb/a", [("Origin", "https://app.example"),
                                   ("Access-Control-Request-Method", "POST")], method="OPTIONS")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
        self.assertEqual(self.get("/keyweb/a", [("Origin", "https://app.example")],
                                  method="OPTIONS").status, 401)
        r = self.get("/keyweb/a", [("Origin", "https://app.example"), ("X-API-Key", KEY)])
        self.assertEqual(r.status, 200, r)

    def test_upstream_cors_fields_dropped(self):
        q = ("/cors/a?mode=headers&h=Access-Control-Allow-Origin:*"
             "&h=Access-Control-Allow-Credentials:true&h=X-Other:kept")
        r = self.get(q, [("Origin", "https://evil.example")])
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.header("Access-Control-Allow-Origin"))
        self.assertIsNone(r.header("Access-Control-Allow-Credentials"))
        self.assertEqual(r.header("X-Other"), "kept")
        r = self.get(q, [("Origin", "https://app.example")])
        self.assertEqual(r.headers_all("Access-Control-Allow-Origin"), ["https://app.example"])
        # a route without cors passes them on
        r = self.get(q.replace("/cors/a", "/open"))
        self.assertEqual(r.header("Access-Control-Allow-Origin"), "*")

    def test_cors_on_answers(self):
        r = self.get("/cors/a", [("Origin", "https://x.y.corp.example")])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Access-Control-Allow-Origin"), "https://x.y.corp.example")
        self.assertEqual(r.header("Access-Control-Expose-Headers"), "X-Total")
        self.assertIn("Origin", r.headers_all("Vary"))
        for bad in ("https://corp.example", "https://evil.example", "http://app.example",
                    "https://app.example.evil", "https://a/b.corp.example", "x" * 5000):
            r = self.get("/cors/a", [("Origin", bad)])
            self.assertEqual(r.status, 200)
            self.assertIsNone(r.header("Access-Control-Allow-Origin"), bad)
            self.assertEqual(r.header("Vary"), "Origin")
        r = self.get("/hello", [("Origin", "https://app.example")])  # a direct response too
        self.assertEqual((r.status, r.header("Access-Control-Allow-Origin")),
                         (200, "https://app.example"))

    @h1_only("a bad head on a kept-alive connection")
    def test_bad_head_after_a_policy_request(self):
        """A connection's next answer given before its request starts (a bad
        head) carries no field of the policies the one before had."""
        with Client(self.gw.port) as c:
            r = c.request("GET", "/cors/a", headers=[("Origin", "https://app.example")])
            self.assertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
            c.send(b"GET /cors/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                   b"Content-Length: 2\r\n\r\n")
            r = c.read_response("GET")
            self.assertEqual(r.status, 400)
            self.assertIsNone(r.header("Access-Control-Allow-Origin"))
            self.assertIsNone(r.header("Vary"))
        self.assertEqual(self.get("/open").status, 200)

    # ---- api_key ----

    def test_api_key_header(self):
        r = self.get("/key/a", [("X-API-Key", KEY), ("X-Consumer", "mallory")])
        self.assertEqual(r.status, 200, r)
        e = r.json()
        self.assertEqual(values(e, "X-Consumer"), ["alice"])
        self.assertEqual(values(e, "X-API-Key"), [])
        r = self.get("/key/a", [("X-API-Key", "bobs-key")])
        self.assertEqual(values(r.json(), "X-Consumer"), ["bob"])
        for hs in ([], [("X-API-Key", "wrong")], [("X-API-Key", KEY[:-1])],
                   [("X-API-Key", "k" * 30000)]):
            r = self.get("/key/a", hs)
            self.assertEqual(r.status, 401)
            self.assertEqual(r.header("WWW-Authenticate"), 'ApiKey realm="keys"')

    def test_forged_consumer_in_any_spelling(self):
        r = self.get("/key/a", [("X-API-Key", KEY), ("X_Consumer", "mallory"),
                                ("x-CONSUMER", "mallory"), ("X_API_KEY", "k")])
        self.assertEqual(r.status, 200, r)
        e = r.json()
        self.assertEqual([v for k, v in e["headers"]
                          if k.lower().replace("_", "-") == "x-consumer"], ["alice"])
        self.assertEqual([k for k, v in e["headers"]
                          if k.lower().replace("_", "-") == "x-api-key"], [])

    def test_forged_consumer_in_trailers(self):
        """HTTP/2 request trailers go upstream: the policy's fields are
        dropped from them as from the head (runs where python3-h2 is: the
        HTTP/2 run)."""
        import socket
        try:
            import h2.config
            import h2.connection
            import h2.events
        except ImportError:
            self.skipTest("python3-h2 is not installed for this interpreter")
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "POST"), (":scheme", "http"),
                              (":authority", "localhost"), (":path", "/key/t"),
                              ("x-api-key", KEY), ("te", "trailers")])
        conn.send_data(1, b"hello")
        conn.send_headers(1, [("x-consumer", "mallory"), ("x_consumer", "mallory"),
                              ("x-kept", "yes")], end_stream=True)
        sock.sendall(conn.data_to_send())
        body, done = b"", False
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    done = True
            sock.sendall(conn.data_to_send())
        sock.close()
        self.assertTrue(done, body)
        e = json.loads(body)
        names = [k.lower() for k, v in e["trailers"]]
        self.assertIn("x-kept", names)
        self.assertEqual([n for n in names if n.replace("_", "-") == "x-consumer"], [])
        self.assertEqual(values(e, "X-Consumer"), ["alice"])

    def test_api_key_query_stripped(self):
        for target, up in (("/key/q?api_key=%s" % KEY, "/key/q"),
                           ("/key/q?a=1&api_key=%s" % KEY, "/key/q?a=1"),
                           ("/key/q?api_key=%s&b=2" % KEY, "/key/q?b=2"),
                           ("/key/q?a=1&api_key=%s&b=2" % KEY, "/key/q?a=1&b=2")):
            r = self.get(target)
            self.assertEqual(r.status, 200, target)
            self.assertEqual(r.json()["target"], up)
            rid = r.header("X-Request-Id")

            def logged():
                try:
                    with open(self.log) as f:
                        for line in f:
                            rec = json.loads(line)
                            if rec["request_id"] == rid:
                                return rec
                except OSError:
                    return None
                return None
            rec = wait_for(logged, what="the access-log line")
            self.assertEqual(rec["target"], up)
        with open(self.log) as f:
            self.assertNotIn(KEY, f.read())

    def logged_target(self, rid=None, prefix=None):
        def find():
            try:
                with open(self.log) as f:
                    for line in f:
                        rec = json.loads(line)
                        if (rid and rec["request_id"] == rid) or \
                                (prefix and rec["target"].startswith(prefix)):
                            return rec
            except OSError:
                return None
            return None
        return wait_for(find, what="the access-log line")["target"]

    def test_api_key_never_logged(self):
        """Whatever answers (a rate limit before the key, the key's own 401)
        and however the request ends (a WebSocket, logged at its close after
        its snapshot is released), no copy nor spelling of the parameter
        goes upstream or into the log."""
        secrets = ["dupe-secret-1", "enc-secret-2", "wrong-secret-3", "ws-secret-4"]
        # every copy, any case or percent-encoding of the name
        r = self.get("/key/d?api_key=%s&api_key=%s&a=1&API%%5fkey=%s" % (KEY, *secrets[:2]))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["target"], "/key/d?a=1")
        self.assertEqual(self.logged_target(r.header("X-Request-Id")), "/key/d?a=1")
        # a wrong key's 401
        r = self.get("/key/w?api_key=%s&b=2" % secrets[2])
        self.assertEqual(r.status, 401)
        self.assertEqual(self.logged_target(r.header("X-Request-Id")), "/key/w?b=2")
        # a rate limit listed before the key answers 429: the valid key stays out
        for want in (200, 429):
            r = self.get("/rlkey/x?api_key=%s" % KEY, [("X-T", "never-logged")])
            self.assertEqual(r.status, want, r)
            self.assertEqual(self.logged_target(r.header("X-Request-Id")), "/rlkey/x")
        # a WebSocket with the key in its query (browsers cannot set its headers)
        with Client(self.gw.port) as c:
            r, _ = ws_handshake(c, "/key/ws?api_key=%s&x=%s" % (KEY, "1"))
            self.assertEqual(r.status, 101, r)
            c.send(ws_frame(b"hi"))
            self.assertEqual(ws_read(c)[2], b"hi")
        self.assertEqual(self.logged_target(prefix="/key/ws"), "/key/ws?x=1")
        with Client(self.gw.port) as c:
            r, _ = ws_handshake(c, "/key/ws2?api_key=%s" % secrets[3])
            self.assertEqual(r.status, 401, r)
        self.assertEqual(self.logged_target(prefix="/key/ws2"), "/key/ws2")
        with open(self.log) as f:
            text = f.read()
        for s in [KEY] + secrets:
            self.assertNotIn(s, text)

    def test_api_key_never_logged_off_its_routes(self):
        """The log leaves the parameter out whatever answers: the router (a
        404, a trailing-slash redirect) or a route without the policy, which
        still gets the query as sent (the parameter may be its own)."""
        secrets = ["nf-secret-5", "ts-secret-6", "open-secret-7", "tok-secret-8"]
        r = self.get("/nowhere?api_key=%s&z=1&Token=%s" % (secrets[0], secrets[3]))
        self.assertEqual(r.status, 404)
        self.assertEqual(self.logged_target(r.header("X-Request-Id") or None,
                                            prefix="/nowhere"), "/nowhere?z=1")
        r = self.get("/open/?API_KEY=%s" % secrets[1])
        self.assertIn(r.status, (301, 308), r)
        self.assertEqual(self.logged_target(prefix="/open/"), "/open/")
        r = self.get("/open?api_key=%s&o=1" % secrets[2])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["target"], "/open?api_key=%s&o=1" % secrets[2])
        self.assertEqual(self.logged_target(r.header("X-Request-Id")), "/open?o=1")
        with open(self.log) as f:
            text = f.read()
        for s in secrets:
            self.assertNotIn(s, text)

    # ---- refusals ----

    def test_bad_pushes_refused_at_their_paths(self):
        cases = [
            ({"p": {"type": "rate_limt", "rate": 1}}, ["p"], "/policies/p/type", "rate_limit"),
            ({"p": {"type": "rate_limit", "rate": 1, "brust": 2}}, ["p"], "/policies/p/brust",
             None),
            ({"p": {"type": "cors", "origins": ["*"], "credentials": True}}, ["p"],
             "/policies/p/credentials", None),
            ({"p": {"type": "rate_limit", "rate": 1}}, ["q"], "/routes/0/policies/0", None),
            ({"k1": self.policies["keys"], "k2": self.policies["keys"]}, ["k1", "k2"],
             "/routes/0/policies/1", None),
            ({"p": {"type": "rate_limit", "rate": 1, "key": "cookie:x"}}, ["p"],
             "/policies/p/key", None),
            ({"p": dict(self.policies["keys"], consumer_header="Transfer-Encoding")}, ["p"],
             "/policies/p/consumer_header", "hop-by-hop"),
            ({"p": dict(self.policies["keys"], header="Proxy-Authorization")}, ["p"],
             "/policies/p/header", "a Proxy-* field"),
        ]
        for pols, names, path, hint in cases:
            with self.subTest(path=path):
                new = json.loads(json.dumps(self.cfg))
                new["policies"] = pols
                new["routes"] = [{"id": "r", "path": "/r", "upstream": "b", "policies": names}]
                self.refused_at(new, path, hint)
        self.assertEqual(self.get("/open").status, 200)
        # the route endpoints check names against the live policies
        r = self.api.put("/routes/open", {"id": "open", "path": "/open", "upstream": "b",
                                          "policies": ["slo"]})
        self.assertEqual(r.status, 400, r)
        self.assertIn("did you mean", json.dumps(r.json["errors"]))
        r = self.api.put("/routes/open", {"id": "open", "path": "/open", "upstream": "b",
                                          "policies": ["keys", "web"]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.get("/open").status, 401)
        self.assertEqual(self.get("/open", [("X-API-Key", KEY)]).status, 200)
        r = self.api.put("/routes/open", {"id": "open", "path": "/open", "upstream": "b"})
        self.assertEqual(r.status, 200, r)


def crypt_hash(password, prefix, cost):
    """A hash of <password> by libcrypt itself: bcrypt ("$2b$") or yescrypt ("$y$")."""
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(prefix.encode(), cost, None, 0)
    return lib.crypt(password.encode(), salt).decode()


def basic(user, password):
    return ("Authorization", "Basic " + base64.b64encode(
        ("%s:%s" % (user, password)).encode()).decode())


class BasicTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.log = cls.tmp.file("access.log")
        ht = cls.tmp.file("staff.htpasswd")
        with open(ht, "w") as f:
            f.write("# staff\nalice:%s\nbob:%s\n" % (crypt_hash("alice-pw", "$2b$", 10),
                                                       crypt_hash("bob-pw", "$y$", 0)))
        cfg = gateway_config(
            upstreams={"b": upstream_cfg(cls.b)},
            routes=[{"id": "staff", "path": "/staff/*{rest}", "upstream": "b",
                     "policies": ["staff"]},
                    {"id": "nocache", "path": "/nocache", "upstream": "b",
                     "policies": ["strict"]}],
            policies={"staff": {"type": "basic", "htpasswd": ht, "realm": "Staff only"},
                      "strict": {"type": "basic", "htpasswd": ht, "cache_ttl_s": 0}},
            access_log=cls.log)
        cls.gw = cls.shared_gateway(cfg)

    def get(self, target, headers=None):
        with Client(self.gw.port) as c:
            return c.request("GET", target, headers=headers or [])

    def test_users_of_both_kinds(self):
        for user, pw in (("alice", "alice-pw"), ("bob", "bob-pw")):
            r = self.get("/staff/x", [basic(user, pw)])
            self.assertEqual(r.status, 200, (user, r))
            r = self.get("/staff/x", [basic(user, pw)])  # remembered now
            self.assertEqual(r.status, 200, (user, r))
        with open(self.log) as f:
            text = f.read()
        self.assertNotIn("alice-pw", text)
        self.assertNotIn(base64.b64encode(b"alice:alice-pw").decode(), text)

    def test_credentials_stay_user_goes_up(self):
        """The password never goes upstream (nginx's proxy_set_header
        Authorization ""); the user does, in user_header, and a client's own
        copies of it in any spelling (X_User: '_' folds into '-') are dropped."""
        r = self.get("/staff/x", [basic("alice", "alice-pw"), ("X-User", "root"),
                                  ("x_user", "root"), ("X-USER", "root")])
        self.assertEqual(r.status, 200, r)
        e = r.json()
        self.assertEqual([v for k, v in e["headers"] if k.lower() in ("x-user", "x_user")],
                         ["alice"])
        self.assertEqual(values(e, "Authorization"), [])

    def test_refused(self):
        bad = [[], [basic("alice", "wrong")], [basic("mallory", "alice-pw")],
               [("Authorization", "Basic !!!!")], [("Authorization", "Bearer x")],
               [("Authorization", "Basic " + base64.b64encode(b"alice:alice-pw\0x").decode())],
               [("Authorization", "Basic " + "QUFB" * 5000)], [basic("alice", "")]]
        for hs in bad:
            r = self.get("/staff/x", hs)
            self.assertEqual(r.status, 401, hs)
            self.assertEqual(r.header("WWW-Authenticate"),
                             'Basic realm="Staff only", charset="UTF-8"')

    def test_unknown_user_costs_a_check(self):
        """An unknown user is checked against a real hash: it takes about
        what a wrong password takes (bcrypt cost 10: tens of ms), never the
        microseconds of a lookup that failed."""
        def median(user):
            ts = []
            for _ in range(5):
                t0 = time.monotonic()
                self.assertEqual(self.get("/nocache", [basic(user, "nope")]).status, 401)
                ts.append(time.monotonic() - t0)
            return statistics.median(ts)
        wrong, unknown = median("alice"), median("nobody-at-all")
        self.assertGreater(unknown, wrong / 3, (wrong, unknown))


if __name__ == "__main__":
    main()
