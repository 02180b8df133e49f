#!/usr/bin/env python3
"""test_etcd_harness.py - the self-test of etcd.py, the real etcd that the
fleet's tests run against: a single member's key helpers (put, get, delete,
keys, revision, a physical compaction, txn_put in one revision), its data
across a restart and a SIGKILL, freeze/thaw, a progress notification on a
watch (--experimental-watch-progress-notify-interval), TLS with client
certificates, auth (user root) and both at once (a client certificate with
a CN refused by the JSON gateway then), and a three-member cluster
that keeps accepting writes with one member killed and takes it back after
its restart. Fails, not skips, when etcd is not installed. Every wait is
bounded (harness.TIMEOUT)."""
import http.client
import json
import ssl
import time
import unittest
import urllib.error
import urllib.request

from etcd import Etcd, EtcdCluster, EtcdError, b64
from harness import TIMEOUT, TempDir, main, wait_for


class EtcdHarnessCase(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir(prefix="sy-etcd-")
        self.addCleanup(self.tmp.cleanup)

    def member(self, **kw):
        e = Etcd(self.tmp, **kw).start()
        self.addCleanup(e.kill)
        return e

    def test_single_member_keys(self):
        e = self.member()
        r0 = e.revision()
        r1 = e.put("/sy/a", "1")
        self.assertEqual(r1, r0 + 1)
        self.assertEqual(e.get("/sy/a"), ("1", r1))
        r2 = e.put("/sy/b", '{"x": "\u00e9"}')
        self.assertEqual(e.get("/sy/b"), ('{"x": "\u00e9"}', r2))
        e.put("/other", "z")
        self.assertEqual(e.keys("/sy/"), {"/sy/a": "1", "/sy/b": '{"x": "\u00e9"}'})
        self.assertEqual(len(e.keys()), 3)
        self.assertEqual(e.delete("/sy/a"), 1)
        self.assertIsNone(e.get("/sy/a"))
        self.assertEqual(e.delete("/sy/a"), 0)
        self.assertEqual(e.revision(), r2 + 2)
        self.assertEqual(e.get("/sy/b")[1], r2)  # mod_revision, not the store's

        rc = e.compact()
        self.assertEqual(rc, e.revision())
        with self.assertRaisesRegex(EtcdError, "compacted"):
            e._post("/v3/kv/range", {"key": b64("/sy/b"), "revision": str(r1)})
        self.assertEqual(e.get("/sy/b")[0], '{"x": "\u00e9"}')  # the latest stays
        self.assertEqual(e.delete("/sy/", prefix=True), 1)
        self.assertEqual(e.keys("/sy/"), {})

    def test_txn_put_is_one_revision(self):
        e = self.member()
        e.put("/sy/old", "x")
        rev = e.txn_put({"/sy/a": "1", "/sy/b": "2", "/sy/c": "3"}, deletes=["/sy/old"])
        self.assertEqual(e.revision(), rev)
        for k, v in (("/sy/a", "1"), ("/sy/b", "2"), ("/sy/c", "3")):
            self.assertEqual(e.get(k), (v, rev))
        self.assertIsNone(e.get("/sy/old"))

    def test_restart_and_kill_keep_data(self):
        e = self.member()
        port = e.client_port
        rev = e.put("/sy/k", "kept")
        e.restart()
        self.assertEqual(e.client_port, port)
        self.assertEqual(e.get("/sy/k"), ("kept", rev))
        rev2 = e.put("/sy/k2", "acked")
        self.assertNotEqual(e.kill(), 0)
        self.assertFalse(e.alive())
        e.start()
        self.assertEqual(e.get("/sy/k2"), ("acked", rev2))  # acknowledged = durable
        self.assertEqual(e.revision(), rev2)

    def test_freeze_thaw(self):
        e = self.member()
        e.put("/sy/f", "1")
        e.freeze()
        with self.assertRaises(OSError):  # a frozen member answers nothing
            e._post("/v3/kv/range", {"key": b64("/sy/f")}, timeout=0.5)
        e.thaw()
        self.assertEqual(e.get("/sy/f")[0], "1")
        e.freeze()
        self.assertIsNotNone(e.stop())  # SIGTERM reaches a frozen member too

    def test_progress_notify(self):
        # a watch that sees no event still gets a response every interval:
        # what the fleet's watchdog relies on
        e = self.member(progress_ms=200)
        rev = e.put("/sy/w", "1")
        c = http.client.HTTPConnection("127.0.0.1", e.client_port, timeout=TIMEOUT)
        self.addCleanup(c.close)
        c.request("POST", "/v3/watch", json.dumps({"create_request": {
            "key": b64("/sy/"), "range_end": b64("/sy0"), "start_revision": str(rev + 1),
            "progress_notify": True}}), {"Content-Type": "application/json"})
        resp = c.getresponse()
        self.assertEqual(resp.status, 200)
        created = json.loads(resp.readline())["result"]
        self.assertTrue(created.get("created"))
        t0 = time.monotonic()
        progress = json.loads(resp.readline())["result"]
        self.assertNotIn("events", progress)
        self.assertEqual(progress["header"]["revision"], str(rev))
        self.assertLess(time.monotonic() - t0, TIMEOUT)

    def test_tls_client_certs(self):
        e = self.member(tls=True)
        self.assertTrue(e.endpoint.startswith("https://127.0.0.1:"))
        rev = e.put("/sy/t", "tls")
        self.assertEqual(e.get("/sy/t"), ("tls", rev))
        # the CA alone, no client certificate: refused in the handshake
        bare = ssl.create_default_context(cafile=e.certs["ca"])
        with self.assertRaises(OSError):
            urllib.request.urlopen(e.endpoint + "/health", timeout=TIMEOUT, context=bare).read()
        with self.assertRaises(OSError):  # plain HTTP
            urllib.request.urlopen("http://127.0.0.1:%d/health" % e.client_port,
                                   timeout=TIMEOUT).read()
        self.assertEqual(e.ctl("get", "--print-value-only", "/sy/t").strip(), "tls")

    def test_auth(self):
        e = self.member(auth=True)
        rev = e.put("/sy/a", "secret")
        self.assertEqual(e.get("/sy/a"), ("secret", rev))
        with self.assertRaisesRegex(EtcdError, "user name is empty"):
            e._request("/v3/kv/range", {"key": b64("/sy/a")})
        with self.assertRaisesRegex(EtcdError, "invalid auth token"):
            e._request("/v3/kv/range", {"key": b64("/sy/a")}, token="bogus")
        self.assertEqual(e.ctl("get", "--print-value-only", "/sy/a").strip(), "secret")
        with open(e.password_file) as f:
            self.assertEqual(f.read().strip(), e.password)
        e.restart()  # the old token is invalid now: fetched again
        self.assertEqual(e.get("/sy/a"), ("secret", rev))

    def test_tls_and_auth(self):
        e = self.member(tls=True, auth=True)
        rev = e.put("/sy/b", "both")
        self.assertEqual(e.get("/sy/b"), ("both", rev))
        # without a token the gateway's own connection (the server's
        # certificate, CN=etcd-server) is the user: not one with rights
        with self.assertRaisesRegex(EtcdError, "permission denied"):
            e._request("/v3/kv/range", {"key": b64("/sy/b")})
        self.assertEqual(e.ctl("get", "--print-value-only", "/sy/b").strip(), "both")
        # 3.4.23's JSON gateway with auth on refuses a client certificate
        # that has a CN (the fleet's client must be told): etcd_certs' own
        # client certificate has none
        cn = ssl.create_default_context(cafile=e.certs["ca"])
        cn.load_cert_chain(e.certs["client_cn_cert"], e.certs["client_cn_key"])
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(e.endpoint + "/v3/auth/authenticate", timeout=TIMEOUT,
                                   context=cn, data=json.dumps({"name": "root", "password":
                                                                e.password}).encode())
        self.assertEqual(ctx.exception.code, 400)
        self.assertIn(b"CommonName", ctx.exception.read())

    def test_cluster_member_loss(self):
        c = EtcdCluster(self.tmp, n=3).start()
        self.addCleanup(lambda: [m.kill() for m in c.members])
        self.assertEqual(len(set(c.endpoints)), 3)
        rev = c.put("/sy/c", "1")
        self.assertEqual(c.get("/sy/c"), ("1", rev))
        lead = c.leader()
        c.kill_member(lead)  # the hardest one to lose: a new election
        self.assertFalse(c.members[lead].alive())
        rev2 = c.txn_put({"/sy/c": "2", "/sy/d": "3"})
        self.assertEqual(c.keys("/sy/"), {"/sy/c": "2", "/sy/d": "3"})
        self.assertNotEqual(c.leader(), lead)
        c.restart_member(lead)
        m = c.members[lead]

        def caught_up():  # the member's own copy, not a read through the leader
            r = m._post("/v3/kv/range", {"key": b64("/sy/d"), "serializable": True})
            return r.get("kvs") and int(r["kvs"][0]["mod_revision"]) == rev2

        wait_for(caught_up, what="the restarted member to catch up")
        self.assertEqual(m.get("/sy/c"), ("2", rev2))
        self.assertIn(c.leader(), range(3))


if __name__ == "__main__":
    main()
