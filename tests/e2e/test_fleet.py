#!/usr/bin/env python3
"""test_fleet.py - a fleet of switchyard nodes on a real etcd (etcd.py; issue
24): the nodes converge on the objects under the prefix; a write through one
node's admin API is answered once that node serves it, and reaches the
others; If-Match is a compare on the key's mod_revision; an invalid object
is not applied (the node keeps its last good config and names the key in
GET /status) until it is fixed or deleted; etcd killed and restarted; a
node stopped while changes and a compaction happen, then restarted; a node
frozen (SIGSTOP) across a compaction; a node started while etcd is down,
with and without a persisted fleet; a three-member cluster that loses a
member; PUT /config on a fleet node changes node-local keys only; a write
with ?canary (a staged rollout) is refused on a fleet node. The TLS
cases (a certificate rotated by one put under HTTPS traffic, a session
ticket resumed on another node) are in test_fleet_tls.py. Every wait is
bounded (harness.wait_for)."""
import http.client
import json
import signal
import socket
import threading
import time

from etcd import Etcd, EtcdCluster
from harness import TIMEOUT, Client, GatewayCase, free_port, main, wait_for

PREFIX = "/switchyard/"


def admin_port(gw):
    return int(gw.cfg["admin"]["address"].rsplit(":", 1)[1])


def admin(gw, method, path, body=None, headers=None):
    """(status, parsed JSON, headers) of one admin API call."""
    c = http.client.HTTPConnection("127.0.0.1", admin_port(gw), timeout=TIMEOUT)
    try:
        hs = dict(headers or {})
        if body is not None:
            hs["Content-Type"] = "application/json"
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hs)
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    if r.getheader("Content-Type", "").startswith("application/json"):
        return r.status, json.loads(data), dict(r.getheaders())
    return r.status, data.decode(), dict(r.getheaders())


def fleet(gw):
    """GET /status's "fleet" object (waiting for the admin API, which opens
    after the listeners)."""
    def up():
        try:
            socket.create_connection(("127.0.0.1", admin_port(gw)), timeout=TIMEOUT).close()
            return True
        except OSError:
            return False

    wait_for(up, what="the admin API")
    st, s, _ = admin(gw, "GET", "/status")
    assert st == 200, (st, s)
    return s["fleet"]


def body_of(gw, path):
    """The body of GET <path> on <gw>'s listener, or the status when not 200."""
    with Client(gw.port) as c:
        r = c.request("GET", path)
    return r.body.decode() if r.status == 200 else r.status


class TcpProxy:
    """127.0.0.1:<port> forwarding to <target> (a port), whose connections
    cut() drops (and refuses new ones: accepted and closed) until heal()."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.cutting = False
        self.live = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.cutting:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=TIMEOUT)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.live += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.cutting = True
        with self.lock:
            for s in self.live:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.live = []

    def heal(self):
        self.cutting = False

    def close(self):
        self.closed = True
        self.cut()
        self.lsock.close()


def route(path, text):
    return json.dumps({"path": path, "response": {"body": text}})


def node_config(endpoints, state=None, **extra):
    cfg = {
        "workers": 1,
        "listeners": [{"address": "127.0.0.1:%d" % free_port()}],
        "admin": {"address": "127.0.0.1:%d" % free_port()},
        "access_log": "off",
        "log_level": "info",
        "fleet": {"etcd": {"endpoints": endpoints, "prefix": PREFIX, "watch_idle_ms": 1000,
                           "dial_timeout_ms": 500, "request_timeout_ms": 2000}},
    }
    if state:
        cfg["admin"]["state_dir"] = state
    cfg.update(extra)
    return cfg


class FleetCase(GatewayCase):
    def etcd(self, **kw):
        e = Etcd(self.tmp, name="etcd-%d" % free_port(), progress_ms=kw.pop("progress_ms", 500),
                 **kw)
        self.addCleanup(e.stop)
        return e.start()

    def node(self, etcd_or_endpoints, state=True, **extra):
        eps = etcd_or_endpoints if isinstance(etcd_or_endpoints, list) else [
            etcd_or_endpoints.endpoint]
        sd = self.tmp.file("state-%d" % free_port()) if state is True else state or None
        return self.own_gateway(node_config(eps, sd, **extra), name="node")

    def wait_body(self, nodes, path, want, timeout=TIMEOUT):
        for n in nodes:
            wait_for(lambda: body_of(n, path) == want, timeout=timeout,
                     what="%s serving %r at %s" % (n.name, want, path))


class Convergence(FleetCase):
    def test_nodes_converge_on_puts_and_deletes(self):
        e = self.etcd()
        e.put(PREFIX + "routes/a", route("/a", "a1\n"))
        nodes = [self.node(e) for _ in range(3)]
        self.wait_body(nodes, "/a", "a1\n")
        # one revision with two keys: one swap, both served
        rev = e.txn_put({PREFIX + "routes/a": route("/a", "a2\n"),
                         PREFIX + "routes/b": route("/b", "b1\n")})
        self.wait_body(nodes, "/a", "a2\n")
        self.wait_body(nodes, "/b", "b1\n")
        for n in nodes:
            f = fleet(n)
            wait_for(lambda: fleet(n)["revision"] >= rev, what="revision %d" % rev)
            self.assertTrue(f["connected"], f)
            self.assertEqual(f["errors"], [])
        e.delete(PREFIX + "routes/b")
        self.wait_body(nodes, "/b", 404)
        self.assertEqual(body_of(nodes[0], "/a"), "a2\n")
        # one watch a node, the whole time: no reconnect, no re-read
        st, m, _ = admin(nodes[0], "GET", "/status")
        self.assertEqual(m["fleet"]["reconnects"], 0, m)
        self.assertEqual(m["fleet"]["rereads"], 0, m)

    def test_upstream_and_route_to_it(self):
        e = self.etcd()
        b = self.own_backend("be")
        nodes = [self.node(e) for _ in range(2)]
        e.txn_put({PREFIX + "upstreams/app": json.dumps({"servers": [{"address": b.addr}]}),
                   PREFIX + "routes/app": json.dumps({"path": "/app/*{r}", "upstream": "app"})})
        for n in nodes:
            wait_for(lambda: body_of(n, "/app/x") not in (404, 502, 503),
                     what="the backend through %s" % n.name)
            st, u, _ = admin(n, "GET", "/upstreams/app")
            self.assertEqual(st, 200, u)

    def test_policy_key_applies_to_its_routes(self):
        """policies/NAME is a fleet object: a route naming it is limited on
        every node (each node counting its own), and a bad policy is
        reported at its key and not applied."""
        e = self.etcd()
        nodes = [self.node(e) for _ in range(2)]
        e.txn_put({PREFIX + "policies/two": json.dumps(
            {"type": "rate_limit", "rate": 1, "per_ms": 60000, "burst": 1}),
            PREFIX + "routes/lim": json.dumps({"path": "/lim", "response": {"body": "ok\n"},
                                               "policies": ["two"]})})
        self.wait_body(nodes, "/lim", "ok\n")
        for n in nodes:
            wait_for(lambda: body_of(n, "/lim") == 429, what="429 from %s" % n.name)
        e.put(PREFIX + "policies/two", json.dumps({"type": "rate_limit", "rate": 0}))
        for n in nodes:
            wait_for(lambda: any(x["key"] == PREFIX + "policies/two"
                                 for x in fleet(n)["errors"]),
                     what="the bad policy reported by %s" % n.name)
            self.assertEqual(body_of(n, "/lim"), 429)  # the last good config serves on


class Writes(FleetCase):
    def test_no_canary_on_a_fleet_node(self):
        # etcd revisions apply whole: a staged rollout is refused, nothing is written
        e = self.etcd()
        a = self.node(e)
        wait_for(lambda: fleet(a)["connected"], what="connected")
        for method, path, body in (("POST", "/routes?canary=10",
                                    {"id": "c", "path": "/c", "response": {"body": "c\n"}}),
                                   ("POST", "/upstreams?canary=10",
                                    {"name": "c", "servers": [{"address": "127.0.0.1:9"}]})):
            st, r, _ = admin(a, method, path, body)
            self.assertEqual(st, 409, r)
            self.assertEqual(r["error"], "no canary on a fleet node", r)
        self.assertIsNone(e.get(PREFIX + "routes/c"))
        self.assertIsNone(e.get(PREFIX + "upstreams/c"))
        self.assertIsNone(admin(a, "GET", "/status")[1]["rollout"])

    def test_write_through_one_node_seen_by_others(self):
        e = self.etcd()
        a, b = self.node(e), self.node(e)
        wait_for(lambda: fleet(a)["connected"] and fleet(b)["connected"], what="both connected")
        st, r, _ = admin(a, "POST", "/routes", {"id": "w", "path": "/w",
                                                 "response": {"body": "w\n"}})
        self.assertEqual(st, 201, r)
        # read-your-writes: answered once this node serves it
        self.assertEqual(body_of(a, "/w"), "w\n")
        self.assertGreater(r["revision"], 0, r)
        val, mod = e.get(PREFIX + "routes/w")
        self.assertEqual(json.loads(val)["path"], "/w")
        self.assertEqual(mod, r["revision"])
        self.wait_body([b], "/w", "w\n")
        # a second create of the same id: 409, through the other node too
        st, r2, _ = admin(b, "POST", "/routes", {"id": "w", "path": "/w2",
                                                  "response": {"body": "x\n"}})
        self.assertEqual(st, 409, r2)
        # upstream writes go to etcd as well
        st, u, _ = admin(b, "POST", "/upstreams", {"name": "u1",
                                                   "servers": [{"address": "127.0.0.1:9"}]})
        self.assertEqual(st, 201, u)
        self.assertIsNotNone(e.get(PREFIX + "upstreams/u1"))
        wait_for(lambda: admin(a, "GET", "/upstreams/u1")[0] == 200, what="u1 on a")
        # a replace of what another node deleted meanwhile: 404, nothing recreated
        e.put(PREFIX + "routes/z", route("/z", "z\n"))
        self.wait_body([a], "/z", "z\n")
        a.signal(signal.SIGSTOP)  # a has not heard of the delete yet
        try:
            e.delete(PREFIX + "routes/z")
        finally:
            a.signal(signal.SIGCONT)
        st, r3, _ = admin(a, "PUT", "/routes/z", {"path": "/z", "response": {"body": "z2\n"}})
        self.assertIn(st, (200, 404), r3)  # 200 only if a heard of the delete first (then: 404 too)
        if st == 404 or e.get(PREFIX + "routes/z") is None:
            self.assertIsNone(e.get(PREFIX + "routes/z"))
        # delete
        st, d, _ = admin(b, "DELETE", "/routes/w")
        self.assertEqual(st, 200, d)
        self.assertIsNone(e.get(PREFIX + "routes/w"))
        self.assertEqual(body_of(b, "/w"), 404)
        self.wait_body([a], "/w", 404)

    def test_pipelined_behind_a_write_and_a_client_gone(self):
        """A request pipelined behind a write that waits for its revision is
        answered after it, in order; a client that goes away while its
        write waits costs the node nothing."""
        e = self.etcd()
        a = self.node(e)
        wait_for(lambda: fleet(a)["connected"], what="connected")
        body = json.dumps({"id": "p", "path": "/p", "response": {"body": "p\n"}}).encode()
        req = (b"POST /routes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body) +
               b"GET /routes/p HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        s = socket.create_connection(("127.0.0.1", admin_port(a)), timeout=TIMEOUT)
        s.sendall(req)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        first, second = data.split(b"HTTP/1.1 ")[1:3]
        self.assertTrue(first.startswith(b"201"), data)
        self.assertTrue(second.startswith(b"200"), data)  # it saw the route: read your writes
        # a client gone while its write waits (etcd frozen: the write cannot finish)
        e.freeze()
        try:
            body = json.dumps({"id": "q", "path": "/q", "response": {"body": "q\n"}}).encode()
            s = socket.create_connection(("127.0.0.1", admin_port(a)), timeout=TIMEOUT)
            s.sendall(b"POST /routes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            time.sleep(0.2)
            s.close()
        finally:
            e.thaw()
        self.assertEqual(admin(a, "GET", "/healthz")[0], 200)
        wait_for(lambda: fleet(a)["connected"], what="connected again")

    def test_refused_write_never_reaches_etcd(self):
        e = self.etcd()
        a = self.node(e)
        wait_for(lambda: fleet(a)["connected"], what="connected")
        before = e.revision()
        st, r, _ = admin(a, "POST", "/routes", {"id": "bad", "path": "/x", "upstream": "nope"})
        self.assertEqual(st, 400, r)
        st, r, _ = admin(a, "POST", "/routes", {"id": "bad", "path": "/x", "bogus": 1})
        self.assertEqual(st, 400, r)
        self.assertEqual(e.revision(), before)
        self.assertIsNone(e.get(PREFIX + "routes/bad"))

    def test_if_match_is_a_compare_on_the_key(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        st, _, h = admin(a, "GET", "/routes/r")
        etag = h["ETag"]
        # another key changes: the ETag's revision is older, but r is not
        e.put(PREFIX + "routes/other", route("/o", "o\n"))
        self.wait_body([a], "/o", "o\n")
        st, r, _ = admin(a, "PUT", "/routes/r", {"path": "/r", "response": {"body": "2\n"}},
                         headers={"If-Match": etag})
        self.assertEqual(st, 200, r)
        self.assertEqual(body_of(a, "/r"), "2\n")
        # r itself changed since that ETag: 412, and etcd keeps "2"
        st, r, _ = admin(a, "PUT", "/routes/r", {"path": "/r", "response": {"body": "3\n"}},
                         headers={"If-Match": etag})
        self.assertEqual(st, 412, r)
        self.assertEqual(json.loads(e.get(PREFIX + "routes/r")[0])["response"]["body"], "2\n")

    def test_put_config_changes_node_keys_only(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        st, doc, _ = admin(a, "GET", "/config")
        self.assertEqual(st, 200)
        self.assertEqual([r["id"] for r in doc["routes"]], ["r"])
        doc["log_level"] = "warn"
        st, r, _ = admin(a, "PUT", "/config", doc)
        self.assertEqual(st, 200, r)
        # the fleet's routes came back as they were: nothing to say of them
        self.assertEqual(r["fleet"], "a fleet node: this push changed node-local keys only")
        doc["routes"] = []
        st, r2, _ = admin(a, "PUT", "/config", doc)
        self.assertEqual(st, 200, r2)
        self.assertIn("ignored", r2["fleet"])
        self.assertEqual(body_of(a, "/r"), "1\n")
        st, doc, _ = admin(a, "GET", "/config")
        self.assertEqual(doc["log_level"], "warn")
        # the fleet goes on after it
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        self.wait_body([a], "/r", "2\n")


class Secured(FleetCase):
    def test_etcd_with_tls_client_certificates_and_auth(self):
        """A node reaches an etcd that wants a client certificate and a
        user: it reads, watches and writes through both."""
        e = self.etcd(tls=True, auth=True)
        cfg = node_config([e.endpoint], self.tmp.file("state-secured"))
        cfg["fleet"]["etcd"].update({
            "tls": {"ca_file": e.certs["ca"], "cert_file": e.certs["client_cert"],
                    "key_file": e.certs["client_key"]},
            "username": e.user, "password_file": e.password_file})
        e.put(PREFIX + "routes/r", route("/r", "secured\n"))
        a = self.own_gateway(cfg, name="node")
        self.wait_body([a], "/r", "secured\n")
        st, r, _ = admin(a, "POST", "/routes", {"id": "w", "path": "/w",
                                                 "response": {"body": "w\n"}})
        self.assertEqual(st, 201, r)
        self.assertIsNotNone(e.get(PREFIX + "routes/w"))
        self.assertTrue(fleet(a)["connected"])


class Reload(FleetCase):
    def test_sighup_refuses_routes_in_the_node_file(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        cfg = json.loads(json.dumps(a.cfg))
        cfg["routes"] = [{"id": "local", "path": "/local", "response": {"body": "l\n"}}]
        since = a.log_size()
        a.reload(cfg)
        a.wait_log(r"reload refused.*\n.*/routes: on a fleet node the routes live in etcd",
                   since)
        self.assertEqual(body_of(a, "/local"), 404)
        # a valid change of the node's keys applies, the fleet's objects stay
        cfg.pop("routes")
        cfg["access_log"] = "stdout"
        since = a.log_size()
        a.reload(cfg)
        a.wait_log(r"config reloaded", since)
        self.assertEqual(body_of(a, "/r"), "1\n")
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        self.wait_body([a], "/r", "2\n")


class Invalid(FleetCase):
    def test_invalid_object_is_not_applied_until_repaired(self):
        e = self.etcd()
        a, b = self.node(e), self.node(e)
        e.put(PREFIX + "routes/good", route("/g", "g1\n"))
        self.wait_body([a, b], "/g", "g1\n")
        good_rev = fleet(a)["revision"]
        e.put(PREFIX + "routes/bad", "{not json")
        for n in (a, b):
            wait_for(lambda: fleet(n)["errors"], what="the error on %s" % n.name)
            errs = fleet(n)["errors"]
            self.assertEqual(errs[0]["key"], PREFIX + "routes/bad", errs)
            self.assertEqual(fleet(n)["revision"], good_rev)
        # a later valid change does not apply either: never a mixture
        e.put(PREFIX + "routes/good", route("/g", "g2\n"))
        time.sleep(0.3)
        self.assertEqual(body_of(a, "/g"), "g1\n")
        # a route to a missing upstream names its key too
        e.put(PREFIX + "routes/bad", json.dumps({"path": "/b", "upstream": "missing"}))
        wait_for(lambda: any("missing" in x["message"] for x in fleet(a)["errors"]),
                 what="the upstream error")
        self.assertEqual(fleet(a)["errors"][0]["key"], PREFIX + "routes/bad")
        st, m, _ = admin(a, "GET", "/metrics")
        self.assertIn("switchyard_fleet_errors 1\n", m)
        self.assertIn("switchyard_fleet_connected 1\n", m)
        # repaired: the fleet's state applies
        e.delete(PREFIX + "routes/bad")
        self.wait_body([a, b], "/g", "g2\n")
        for n in (a, b):
            self.assertEqual(fleet(n)["errors"], [])

    def test_unknown_key_and_mismatched_id(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "stuff/x", "1")
        wait_for(lambda: fleet(a)["errors"], what="the error")
        self.assertEqual(fleet(a)["errors"][0]["key"], PREFIX + "stuff/x")
        e.delete(PREFIX + "stuff/x")
        e.put(PREFIX + "routes/r1", json.dumps({"id": "other", "path": "/r",
                                                "response": {"body": "r\n"}}))
        wait_for(lambda: fleet(a)["errors"] and fleet(a)["errors"][0]["key"] ==
                 PREFIX + "routes/r1", what="the id error")
        e.put(PREFIX + "routes/r1", route("/r", "r\n"))
        self.wait_body([a], "/r", "r\n")


class Failures(FleetCase):
    def test_etcd_killed_and_restarted(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        e.kill()
        wait_for(lambda: not fleet(a)["connected"], what="the node noticing")
        for _ in range(20):  # it keeps serving
            self.assertEqual(body_of(a, "/r"), "1\n")
        e.restart()
        wait_for(lambda: fleet(a)["connected"], what="the node reconnecting")
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        self.wait_body([a], "/r", "2\n")
        self.assertGreaterEqual(fleet(a)["reconnects"], 1)

    def test_node_stopped_across_changes_and_compaction(self):
        e = self.etcd()
        sd = self.tmp.file("state-stopped")
        a = self.node(e, state=sd)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        e.put(PREFIX + "routes/gone", route("/gone", "x\n"))
        self.wait_body([a], "/r", "1\n")
        a.stop()
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        e.delete(PREFIX + "routes/gone")
        e.put(PREFIX + "routes/new", route("/new", "n\n"))
        e.compact()
        a2 = self.own_gateway(a.cfg, name="node")
        self.wait_body([a2], "/r", "2\n")
        self.wait_body([a2], "/new", "n\n")
        self.assertEqual(body_of(a2, "/gone"), 404)

    def test_watch_resumed_below_compaction(self):
        """The node's connection is cut while keys change and etcd compacts:
        its watch cannot resume from its revision, so it reads the prefix
        again and applies the difference, skipping nothing."""
        e = self.etcd()
        px = TcpProxy(int(e.endpoint.rsplit(":", 1)[1]))
        self.addCleanup(px.close)
        a = self.node([px.endpoint])
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        e.put(PREFIX + "routes/gone", route("/gone", "x\n"))
        self.wait_body([a], "/r", "1\n")
        px.cut()
        wait_for(lambda: not fleet(a)["connected"], what="the node noticing the cut")
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        e.delete(PREFIX + "routes/gone")
        e.put(PREFIX + "routes/new", route("/new", "n\n"))
        e.compact()
        px.heal()
        self.wait_body([a], "/r", "2\n")
        self.wait_body([a], "/new", "n\n")
        self.assertEqual(body_of(a, "/gone"), 404)
        f = fleet(a)
        self.assertGreaterEqual(f["rereads"], 1, f)
        self.assertEqual(f["revision"], e.revision())

    def test_node_frozen_across_compaction(self):
        e = self.etcd()
        a = self.node(e)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        a.signal(signal.SIGSTOP)
        try:
            for i in range(5):
                e.put(PREFIX + "routes/r", route("/r", "%d\n" % (i + 2)))
            e.put(PREFIX + "routes/k", route("/k", "k\n"))
            e.compact()
        finally:
            a.signal(signal.SIGCONT)
        self.wait_body([a], "/r", "6\n")
        self.wait_body([a], "/k", "k\n")
        self.assertEqual(fleet(a)["errors"], [])

    def test_node_started_with_etcd_down(self):
        e = self.etcd()
        sd = self.tmp.file("state-down")
        a = self.node(e, state=sd)
        e.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body([a], "/r", "1\n")
        a.stop()
        e.stop()
        # with its persisted fleet: serves the last good config
        a2 = self.own_gateway(a.cfg, name="node")
        self.assertEqual(body_of(a2, "/r"), "1\n")
        self.assertFalse(fleet(a2)["connected"])
        # and a fresh node with nothing persisted starts all the same
        fresh = self.node([e.endpoint], state=None)
        self.assertEqual(body_of(fresh, "/r"), 404)
        e.restart()
        e.put(PREFIX + "routes/r", route("/r", "2\n"))
        self.wait_body([a2, fresh], "/r", "2\n")

    def test_endpoints_by_name_one_unresolvable(self):
        """Endpoints named by host name resolve on the loop (evdns, the hosts
        file): one that does not resolve is skipped for the next, and the
        admin API answers all the while."""
        e = self.etcd()
        e.put(PREFIX + "routes/r", route("/r", "named\n"))
        named = e.endpoint.replace("127.0.0.1", "localhost")
        a = self.node(["http://no-such-host.invalid:2379", named])
        fleet(a)  # the admin API is up
        deadline = time.monotonic() + TIMEOUT
        while body_of(a, "/r") != "named\n" and time.monotonic() < deadline:
            t = time.monotonic()
            self.assertEqual(admin(a, "GET", "/healthz")[0], 200)
            self.assertLess(time.monotonic() - t, 1.0)
            time.sleep(0.05)
        self.assertEqual(body_of(a, "/r"), "named\n")
        self.assertIn("no-such-host.invalid", a.log())

    def test_cluster_loses_a_member(self):
        c = EtcdCluster(self.tmp, n=3, progress_ms=500)
        self.addCleanup(c.stop)
        c.start()
        nodes = [self.node(list(c.endpoints)) for _ in range(2)]
        c.put(PREFIX + "routes/r", route("/r", "1\n"))
        self.wait_body(nodes, "/r", "1\n")
        c.kill_member(c.leader())
        c.put(PREFIX + "routes/r", route("/r", "2\n"))
        self.wait_body(nodes, "/r", "2\n")


if __name__ == "__main__":
    main()
