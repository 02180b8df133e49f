#!/usr/bin/env python3
"""test_policy_jwks_url.py - the jwt policy's jwks_url (issue 27) end to
end: a real HTTPS JWKS server on 127.0.0.1 (tests/admin/jwks_server.py,
Python's ssl module) whose certificate is signed by a CA made with the
openssl CLI and named by jwks_ca_file, refreshed every second:

- a token of key A passes; the set rotated to key B: B's token passes and
  A's is refused, even a token of A that the workers had cached;
- a 500, garbage, a body over the bound, and the server killed: the last
  good set keeps serving, each failure streak logged once and counted in
  /metrics;
- before the first good fetch (nothing listening): 503 with Retry-After
  where the URL's keys might verify, 401 for what no key could, a
  secret beside the URL verifying at once; the server started late: its
  keys arrive;
- a push that keeps the URL keeps the fetcher and its set (no new fetch,
  no window without keys); a push that drops it stops the fetcher;
- a kid the set lacks fetches early, at most once in 30 s;
- a push, a dry run and --check naming a server whose connects hang
  answer at once: nothing waits on the network but the admin thread's
  fetch."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "admin"))

from adminlib import Admin, admin_port  # noqa: E402
from harness import (SY_BIN, TIMEOUT, Client, Gateway, free_port, gateway_config,  # noqa: E402
                     main, metrics_text, upstream_cfg, wait_for)
from test_policies import PolicyCase, values  # noqa: E402
from test_policy_jwt import ISS, SECRET, Keys, bearer, claims, openssl  # noqa: E402

SERVER = os.path.join(os.path.dirname(HERE), "admin", "jwks_server.py")
# each rotation, failure or recovery is seen within a few refreshes of 1 s
SETTLE = 15


class JwksServer:
    """jwks_server.py on a fixed port, serving the files of <root>."""

    def __init__(self, tmp, cert, key, root, port):
        self.tmp, self.cert, self.key, self.root, self.port = tmp, cert, key, root, port
        self.proc = None

    def start(self):
        pf = self.tmp.file("jwks-%d.port" % self.port)
        if os.path.exists(pf):
            os.unlink(pf)
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, self.cert, self.key, self.root, pf, str(self.port),
             "900"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        wait_for(lambda: os.path.exists(pf), what="jwks_server.py listening")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(TIMEOUT)
        self.proc = None


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


class JwksUrlTest(PolicyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        d = cls.tmp.file("pki")
        os.mkdir(d)
        # a CA, and the server's certificate for IP 127.0.0.1 signed by it
        cls.ca = os.path.join(d, "ca.pem")
        cakey, cert, key = (os.path.join(d, n) for n in ("ca.key", "srv.pem", "srv.key"))
        csr, ext = os.path.join(d, "srv.csr"), os.path.join(d, "srv.ext")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", cakey, "-out", cls.ca, "-subj", "/CN=sy-test-ca",
                "-days", "2")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", csr, "-CA", cls.ca, "-CAkey", cakey,
                "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
        cls.cert, cls.key = cert, key
        cls.ka = Keys(d, "a")
        cls.kb = Keys(d, "b")
        cls.www = cls.tmp.file("www")
        os.mkdir(cls.www)
        cls.serve("jwks.json", cls.ka)
        cls.serve("slow.json", cls.ka)
        cls.srv_port, cls.late_port = free_port(), free_port()
        cls.srv = JwksServer(cls.tmp, cert, key, cls.www, cls.srv_port).start()
        cls.late = JwksServer(cls.tmp, cert, key, cls.www, cls.late_port)
        cls.addClassCleanup(cls.srv.stop)
        cls.addClassCleanup(cls.late.stop)
        cls.secret = cls.tmp.file("hs.secret")
        with open(cls.secret, "wb") as f:
            f.write(SECRET + b"\n")
        cls.url = "https://127.0.0.1:%d/jwks.json" % cls.srv_port
        cls.late_url = "https://127.0.0.1:%d/jwks.json" % cls.late_port
        cls.slow_url = "https://127.0.0.1:%d/slow.json" % cls.srv_port
        # a host name: looked up with evdns (/etc/hosts), checked against the
        # certificate; where localhost is 127.0.0.1 (the server listens
        # there; the fetch tries each address, ::1 too, in turn)
        cls.named_url = "https://localhost:%d/jwks.json" % cls.srv_port
        cls.named = "127.0.0.1" in {a[4][0] for a in socket.getaddrinfo("localhost", 0)}
        cls.common = common = {"type": "jwt", "jwks_ca_file": cls.ca, "jwks_refresh_s": 1,
                  "jwks_timeout_ms": 2000, "issuer": ISS, "audiences": ["api"],
                  "claims_to_headers": {"sub": "X-User"}}
        cls.policies = {
            "remote": dict(common, jwks_url=cls.url),
            "late": dict(common, jwks_url=cls.late_url),
            "mixed": dict(common, jwks_url=cls.late_url, hs256_secret_file=cls.secret),
            "slow": dict(common, jwks_url=cls.slow_url, jwks_refresh_s=3600),
        }
        if cls.named:
            cls.policies["named"] = dict(common, jwks_url=cls.named_url)
        cls.routes = [
            {"id": "remote", "path": "/remote", "upstream": "b", "policies": ["remote"]},
            {"id": "late", "path": "/late", "upstream": "b", "policies": ["late"]},
            {"id": "mixed", "path": "/mixed", "upstream": "b", "policies": ["mixed"]},
            {"id": "slow", "path": "/slow", "upstream": "b", "policies": ["slow"]},
        ]
        if cls.named:
            cls.routes.append({"id": "named", "path": "/named", "upstream": "b",
                               "policies": ["named"]})
        cls.start_gateway(cls.routes)
        cls.tok_a = cls.ka.sign("RS256", claims(sub="alice"))
        cls.tok_b = cls.kb.sign("RS256", claims(sub="bob"))
        # the first fetch: A's keys arrive
        wait_for(lambda: cls.status("/remote", cls.tok_a) == 200, timeout=SETTLE,
                 what="the first fetch of " + cls.url)

    @classmethod
    def serve(cls, name, keys=None, raw=None):
        write_atomic(os.path.join(cls.www, name),
                     raw if raw is not None else json.dumps(keys.jwks).encode())

    @classmethod
    def status(cls, target, tok):
        with Client(cls.gw.port) as c:
            return c.request("GET", target, headers=[bearer(tok)]).status

    def metric(self, name, url, extra=""):
        rx = re.compile(r'^%s\{url="%s",ca="[0-9a-z]*"%s\} (\S+)$' % (
            name, re.escape(url), re.escape(extra)), re.M)
        m = rx.search(metrics_text(self.gw))
        return float(m.group(1)) if m else None

    def failures(self, url=None):
        return self.metric("switchyard_jwks_fetches_total", url or self.url, ',result="failed"')

    def wait_failures(self, more, url=None):
        """Waits until <more> fetches of <url> failed beyond now."""
        start = self.failures(url)
        wait_for(lambda: self.failures(url) >= start + more, timeout=SETTLE,
                 interval=0.1, what="%d failed fetches" % more)

    def refused(self, target, tok, why):
        r = self.get(target, [bearer(tok)])
        self.assertEqual(r.status, 401, r)
        self.assertIn('error_description="%s"' % why, r.header("WWW-Authenticate"))

    def rotate_back(self):
        self.serve("jwks.json", self.ka)
        wait_for(lambda: self.status("/remote", self.tok_a) == 200, timeout=SETTLE,
                 what="key A back")

    def test_upgrade_and_restart_keep_the_key_set(self):
        """Each jwks_url's last good set is saved in the state directory and
        carried by an upgrade (--upgrade): a new process verifies from its
        first request, though the JWKS server is gone by then (it would
        answer 503 until a fetch). A URL no policy names any more loses its
        saved set; a process's exit does not."""
        srv = JwksServer(self.tmp, self.cert, self.key, self.www, free_port()).start()
        self.addCleanup(srv.stop)
        url = "https://127.0.0.1:%d/jwks.json" % srv.port
        cfg = gateway_config(
            upstreams={"b": upstream_cfg(self.b)},
            routes=[{"id": "up", "path": "/up", "upstream": "b", "policies": ["up"]}],
            policies={"up": dict(self.common, jwks_url=url, jwks_refresh_s=3600)})
        state = cfg["admin"]["state_dir"] = self.tmp.file("state-upgrade")

        def status(g):
            with Client(g.port) as c:
                return c.request("GET", "/up", headers=[bearer(self.tok_a)]).status

        def saved():
            return [n for n in os.listdir(state) if re.match(r"jwks-[0-9a-f]{16}\.json$", n)]

        def started(name, args=None):
            g = Gateway(self.tmp, cfg, name=name, args=args)
            self.addCleanup(g.stop)
            g.start()
            g.wait_log(r"switchyard [0-9.]+: ")
            return g

        old = started("jwks-old")
        wait_for(lambda: status(old) == 200, timeout=SETTLE, what="the old process's keys")
        wait_for(lambda: len(saved()) == 1, what="the set saved")
        srv.stop()
        # an upgrade carries the set, the saved file gone (a full disk)
        os.unlink(os.path.join(state, saved()[0]))
        new = started("jwks-new", ["--upgrade"])
        self.assertEqual(old.proc.wait(TIMEOUT + 10), 0, old.log())
        old.rc = 0
        for _ in range(4):  # every worker
            self.assertEqual(status(new), 200, new.log())
        self.assertRegex(new.log(), r"the running process.s key set of [0-9]+ keys?, until a fetch")
        age = float(re.search(r'^switchyard_jwks_age_seconds\{url="%s",[^}]*\} (\S+)$'
                              % re.escape(url), metrics_text(new), re.M).group(1))
        self.assertTrue(0 <= age < 60, age)
        self.assertEqual(len(saved()), 1)  # and saved again
        # a stop keeps it; a plain start while the server is down uses it,
        # and removes what an earlier run saved for a URL it does not name
        # once too old to use (a recent one may come back with its policy)
        self.assertEqual(new.stop(), 0, new.log())
        self.assertEqual(len(saved()), 1)
        kept = saved()[0]
        week = time.time() - 8 * 86400
        for name, t in (("jwks-0123456789abcdef.json", week), ("jwks-fedcba9876543210.json", None)):
            with open(os.path.join(state, name), "w") as f:
                f.write('{"fetch_key": "https://gone.example/j system", "doc": "{}"}')
            if t:
                os.utime(os.path.join(state, name), (t, t))
        again = started("jwks-again")
        for _ in range(4):
            self.assertEqual(status(again), 200, again.log())
        self.assertRegex(again.log(), r"the key set saved [0-9]+ s ago, of [0-9]+ keys?, until")
        self.assertEqual(sorted(saved()), sorted([kept, "jwks-fedcba9876543210.json"]))
        os.unlink(os.path.join(state, "jwks-fedcba9876543210.json"))
        # a saved set over a week old is not used
        self.assertEqual(again.stop(), 0, again.log())
        os.utime(os.path.join(state, kept), (week, week))
        stale = started("jwks-stale")
        self.assertEqual(status(stale), 503, stale.log())
        self.assertIn("the key set saved 8 days ago is too old to use", stale.log())
        # a push that drops the URL drops its saved set
        api = Admin(admin_port(cfg))
        r = api.put("/config", dict(cfg, routes=[], policies={}))
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: not saved(), what="the saved set dropped")
        self.assertEqual(stale.stop(), 0, stale.log())

    def test_a_rotation_refuses_the_old_key_even_cached(self):
        for _ in range(3):  # the later ones from the workers' caches
            r = self.get("/remote", [bearer(self.tok_a)])
            self.assertEqual(r.status, 200, r)
            self.assertEqual(values(r.json(), "X-User"), ["alice"])
        self.refused("/remote", self.tok_b, "no key fits the token's alg and kid")
        self.addCleanup(self.rotate_back)
        self.serve("jwks.json", self.kb)
        wait_for(lambda: self.status("/remote", self.tok_b) == 200, timeout=SETTLE,
                 what="key B after the rotation")
        # every worker: each connection may land on either
        for _ in range(6):
            self.refused("/remote", self.tok_a, "no key fits the token's alg and kid")
            r = self.get("/remote", [bearer(self.tok_b)])
            self.assertEqual(r.status, 200, r)
            self.assertEqual(values(r.json(), "X-User"), ["bob"])
        self.assertEqual(self.metric("switchyard_jwks_keys", self.url), 2)
        age = self.metric("switchyard_jwks_age_seconds", self.url)
        self.assertTrue(0 <= age < 10, age)

    def test_b_failures_keep_the_last_good_set(self):
        jwks = os.path.join(self.www, "jwks.json")
        self.addCleanup(lambda: os.path.exists(jwks + ".status") and os.unlink(jwks + ".status"))
        self.addCleanup(self.rotate_back)
        cases = [
            ("500", lambda: write_atomic(jwks + ".status", b"500"), "HTTP status 500"),
            ("garbage", lambda: self.serve("jwks.json", raw=b"<html>not json"), "line 1"),
            ("huge", lambda: self.serve("jwks.json", raw=b" " * (2 << 20)), "too large"),
        ]
        for name, breakit, said in cases:
            with self.subTest(failure=name):
                since = self.gw.log_size()
                breakit()
                self.wait_failures(3)
                self.assertEqual(self.status("/remote", self.tok_a), 200)
                self.refused("/remote", self.tok_b, "no key fits the token's alg and kid")
                # logged once for the streak, not once per retry
                with open(self.gw.log_path, "rb") as f:
                    f.seek(since)
                    text = f.read().decode(errors="replace")
                lines = [ln for ln in text.splitlines() if self.url in ln and said in ln]
                self.assertEqual(len(lines), 1, text)
                self.assertIn("the last good key set stays in use", lines[0])
                if os.path.exists(jwks + ".status"):
                    os.unlink(jwks + ".status")
                self.serve("jwks.json", self.ka)
                self.gw.wait_log(re.escape(self.url) + ": fetched again", since=since,
                                 timeout=SETTLE)
        # the server killed: the set stays; back, fetched again
        since = self.gw.log_size()
        self.srv.stop()
        try:
            self.wait_failures(2)
            for _ in range(4):
                self.assertEqual(self.status("/remote", self.tok_a), 200)
        finally:
            self.srv.start()
        self.gw.wait_log(re.escape(self.url) + ": fetched again", since=since, timeout=SETTLE)
        self.assertGreater(self.metric("switchyard_jwks_fetches_total", self.url,
                                       ',result="ok"'), 0)

    def test_c_before_the_first_fetch(self):
        # nothing listens on late_port yet
        for tok in (self.tok_a, self.ka.sign("ES256", claims())):
            r = self.get("/late", [bearer(tok)])
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.header("Retry-After"), "5")
            self.assertEqual(self.get("/mixed", [bearer(tok)]).status, 503)
        # what no key could ever verify is still the client's fault
        self.assertEqual(self.get("/late", []).status, 401)
        self.refused("/late", "a.b", "not three dot-separated parts")
        self.refused("/late", self.ka.sign("none", claims()), "the token's alg is none or unknown")
        # the secret beside the URL verifies at once
        r = self.get("/mixed", [bearer(self.ka.sign("HS256", claims(sub="hs")))])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.metric("switchyard_jwks_keys", self.late_url), 0)
        self.assertEqual(self.metric("switchyard_jwks_age_seconds", self.late_url), -1)
        self.assertGreater(self.failures(self.late_url), 0)
        self.assertIn(self.late_url + ": ", self.gw.log())
        self.assertIn("no key set from it yet", self.gw.log())
        # the server comes: its keys arrive, for both policies (one fetcher)
        self.late.start()
        wait_for(lambda: self.status("/late", self.tok_a) == 200, timeout=SETTLE,
                 what="the late server's keys")
        self.assertEqual(self.status("/mixed", self.tok_a), 200)
        self.assertEqual(self.status("/mixed", self.ka.sign("HS256", claims())), 200)
        self.refused("/late", self.tok_b, "no key fits the token's alg and kid")
        starts = self.gw.log().count(self.late_url + ": fetching every")
        self.assertEqual(starts, 1)

    def test_d_pushes_keep_the_fetcher(self):
        log = self.gw.log()
        starts = log.count(self.url + ": fetching every")
        self.assertEqual(starts, 1, log)
        ok = self.metric("switchyard_jwks_fetches_total", self.url, ',result="ok"')
        # a route added, and the policy itself changed (a new state): the
        # same fetcher, its set in use at once
        new = json.loads(json.dumps(self.cfg))
        new["routes"].append({"id": "open", "path": "/open", "upstream": "b"})
        new["policies"]["remote"]["claims_to_headers"] = {"sub": "X-Sub"}
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 200, r)
        r = self.get("/remote", [bearer(self.tok_a)])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(values(r.json(), "X-Sub"), ["alice"])
        self.assertEqual(self.gw.log().count(self.url + ": fetching every"), starts)
        self.assertGreaterEqual(
            self.metric("switchyard_jwks_fetches_total", self.url, ',result="ok"'), ok)
        # a config without the slow policy: its fetcher stops
        since = self.gw.log_size()
        new["policies"].pop("slow")
        new["routes"] = [rt for rt in new["routes"] if rt["id"] != "slow"]
        self.assertEqual(self.api.put("/config", new).status, 200)
        self.gw.wait_log(re.escape(self.slow_url) + ": no policy names it any more", since=since)
        self.assertIsNone(self.metric("switchyard_jwks_keys", self.slow_url))
        # the first config again: the slow policy's fetcher starts anew
        since = self.gw.log_size()
        self.assertEqual(self.api.put("/config", self.cfg).status, 200)
        self.gw.wait_log(re.escape(self.slow_url) + ": fetching every 3600 s", since=since)
        wait_for(lambda: self.status("/slow", self.tok_a) == 200, timeout=SETTLE,
                 what="the slow policy's keys again")
        self.assertEqual(self.gw.log().count(self.url + ": fetching every"), starts)

    def test_e_unknown_kid_fetches_early(self):
        def early():
            return self.metric("switchyard_jwks_early_fetches_total", self.slow_url)
        wait_for(lambda: self.status("/slow", self.tok_a) == 200, timeout=SETTLE,
                 what="the slow policy's keys")
        before = early()
        self.addCleanup(self.serve, "slow.json", self.ka)
        self.serve("slow.json", self.kb)
        # refreshed hourly, but a kid the set lacks asks for a fetch now
        self.refused("/slow", self.tok_b, "no key fits the token's alg and kid")
        wait_for(lambda: self.status("/slow", self.tok_b) == 200, timeout=SETTLE,
                 what="key B fetched early")
        self.assertEqual(early(), before + 1)
        # and no more than once in 30 s, whatever kids clients send
        self.serve("slow.json", self.ka)
        for _ in range(5):
            self.refused("/slow", self.tok_a, "no key fits the token's alg and kid")
        time.sleep(0.5)  # ticks of the admin thread (100 ms) that must not fetch
        self.assertEqual(early(), before + 1)
        self.refused("/slow", self.tok_a, "no key fits the token's alg and kid")

    def test_f_host_name(self):
        if not self.named:
            self.skipTest("localhost is not 127.0.0.1 alone here")
        wait_for(lambda: self.status("/named", self.tok_a) == 200, timeout=SETTLE,
                 what="the first fetch of " + self.named_url)
        self.refused("/named", self.tok_b, "no key fits the token's alg and kid")

    def test_g_nothing_waits_on_the_network(self):
        hang = self.hanging_server()
        url = "https://%s/jwks.json" % hang
        new = json.loads(json.dumps(self.cfg))
        new["policies"]["hang"] = {"type": "jwt", "jwks_url": url, "jwks_timeout_ms": 60000}
        new["routes"].append({"id": "hang", "path": "/hang", "upstream": "b",
                              "policies": ["hang"]})
        path = self.tmp.file("hang.json")
        with open(path, "w") as f:
            json.dump(new, f)
        t0 = time.monotonic()
        p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.api.put("/config?dry_run=1", new).status, 200)
        self.addCleanup(self.api.put, "/config", self.cfg)
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 200, r)
        # the connect hangs for up to a minute: none of the above waited for it
        self.assertLess(time.monotonic() - t0, 5)
        r = self.get("/hang", [bearer(self.tok_a)])
        self.assertEqual(r.status, 503, r)
        self.assertEqual(self.status("/remote", self.tok_a), 200)
        self.assertLess(time.monotonic() - t0, 5)


if __name__ == "__main__":
    main()
