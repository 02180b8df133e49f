#!/usr/bin/env python3
"""test_fleet_tls.py - TLS on a fleet on a real etcd (etcd.py; issue 24): a
listener whose certificates is "fleet" serves <prefix>certificates/* by SNI;
a certificate rotated by one etcd put while HTTPS requests flow on new and
kept-alive connections loses none of them; the ticket secret under
<prefix>tls/ticket_secret lets a session ticket issued by one node resume
on another, and a node on another fleet does not resume it. Certificates
are made with the openssl CLI. Every loop is bounded in count and time."""
import hashlib
import http.client
import json
import socket
import ssl
import subprocess
import threading
import time

from etcd import Etcd
from harness import TIMEOUT, Client, GatewayCase, free_port, main, wait_for
from test_fleet import PREFIX, fleet, node_config

SECRET = "a fleet's ticket secret, 32 bytes or longer"


def make_cert(tmp, name, cn="localhost"):
    """A self-signed P-256 certificate for <cn>: (cert PEM, key PEM, sha256 of DER)."""
    cert, key = tmp.file(name + ".pem"), tmp.file(name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-subj", "/CN=" + cn, "-addext", "subjectAltName=DNS:" + cn, "-days", "30"],
                   check=True, capture_output=True, timeout=60)
    with open(cert) as c, open(key) as k:
        pem, kpem = c.read(), k.read()
    der = ssl.PEM_cert_to_DER_cert(pem)
    return pem, kpem, hashlib.sha256(der).hexdigest()


def ctx(version=None):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    if version:
        c.minimum_version = c.maximum_version = version
    return c


def tls_get(port, sni="localhost", context=None, session=None):
    """One GET / on a new TLS connection: (status, served fingerprint, session, reused)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s = (context or ctx()).wrap_socket(s, server_hostname=sni, session=session)
    fp = hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()
    with Client(port, sock=s) as c:
        r = c.request("GET", "/", headers=[("Host", sni)])
        return r.status, fp, s.session, s.session_reused


def served(port):
    """(status, fingerprint) of one GET /, or None while the node refuses
    handshakes (no certificate from the fleet yet)."""
    try:
        return tls_get(port)[:2]
    except (OSError, ssl.SSLError):
        return None


class FleetTLS(GatewayCase):
    def etcd(self):
        e = Etcd(self.tmp, name="etcd-%d" % free_port(), progress_ms=500)
        self.addCleanup(e.stop)
        return e.start()

    def tls_node(self, e):
        cfg = node_config([e.endpoint], self.tmp.file("state-%d" % free_port()), workers=2)
        cfg["listeners"][0]["tls"] = {"certificates": "fleet"}
        return self.own_gateway(cfg, name="tlsnode")

    def put_cert(self, e, name, pem, kpem):
        return e.put(PREFIX + "certificates/" + name,
                     json.dumps({"cert_pem": pem, "key_pem": kpem, "hosts": ["localhost"]}))

    def test_rotation_by_one_put_under_traffic(self):
        e = self.etcd()
        old = make_cert(self.tmp, "old")
        new = make_cert(self.tmp, "new")
        self.put_cert(e, "site", old[0], old[1])
        e.put(PREFIX + "routes/r", json.dumps({"path": "/", "response": {"body": "ok\n"}}))
        gw = self.tls_node(e)
        wait_for(lambda: served(gw.port) == (200, old[2]), what="the old certificate")
        stop = threading.Event()
        failures, seen, count = [], set(), [0]

        def load():
            # new connections, one request each, and one kept-alive connection
            kept = ctx().wrap_socket(socket.create_connection(("127.0.0.1", gw.port),
                                                              timeout=TIMEOUT),
                                     server_hostname="localhost")
            with Client(gw.port, sock=kept) as kc:
                deadline = time.monotonic() + 30
                while not stop.is_set() and time.monotonic() < deadline and count[0] < 5000:
                    try:
                        st, fp, _, _ = tls_get(gw.port)
                        seen.add(fp)
                        if st != 200:
                            failures.append(st)
                        r = kc.request("GET", "/", headers=[("Host", "localhost")])
                        if r.status != 200:
                            failures.append(("kept", r.status))
                    except Exception as x:  # noqa: BLE001 - every failure counts
                        failures.append(repr(x))
                    count[0] += 1

        threads = [threading.Thread(target=load) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: count[0] >= 50, what="traffic before the rotation")
            rev = self.put_cert(e, "site", new[0], new[1])
            wait_for(lambda: new[2] in seen, what="the new certificate served")
            n = count[0]
            wait_for(lambda: count[0] >= n + 50, what="traffic after the rotation")
        finally:
            stop.set()
            for t in threads:
                t.join(TIMEOUT)
        self.assertEqual(failures, [])
        self.assertEqual(seen, {old[2], new[2]})
        self.assertGreaterEqual(fleet(gw)["revision"], rev)
        self.assertEqual(tls_get(gw.port)[1], new[2])

    def test_config_round_trip_keeps_the_fleet_certificates(self):
        """GET /config shows "certificates": "fleet" (not the fleet's
        certificates inline); pushed back, the listener still follows the
        fleet: the next rotation is served."""
        e = self.etcd()
        old, new = make_cert(self.tmp, "rt-old"), make_cert(self.tmp, "rt-new")
        self.put_cert(e, "site", old[0], old[1])
        e.put(PREFIX + "tls/ticket_secret", SECRET)
        e.put(PREFIX + "routes/r", json.dumps({"path": "/", "response": {"body": "ok\n"}}))
        gw = self.tls_node(e)
        wait_for(lambda: served(gw.port) == (200, old[2]), what="the old certificate")
        port = int(gw.cfg["admin"]["address"].rsplit(":")[1])
        h = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        h.request("GET", "/config")
        doc = json.loads(h.getresponse().read())
        self.assertEqual(doc["listeners"][0]["tls"]["certificates"], "fleet")
        self.assertNotIn("ticket_secret", doc["listeners"][0]["tls"])
        self.assertEqual([r["id"] for r in doc["routes"]], ["r"])
        doc["log_level"] = "warn"
        h.request("PUT", "/config", body=json.dumps(doc),
                  headers={"Content-Type": "application/json"})
        r = h.getresponse()
        body = json.loads(r.read())
        h.close()
        self.assertEqual(r.status, 200, body)
        self.assertEqual(body["fleet"], "a fleet node: this push changed node-local keys only")
        self.put_cert(e, "site", new[0], new[1])
        wait_for(lambda: served(gw.port) == (200, new[2]), what="the rotated certificate")

    def test_ticket_resumes_on_another_node(self):
        e = self.etcd()
        pem, kpem, _ = make_cert(self.tmp, "site")
        self.put_cert(e, "site", pem, kpem)
        e.put(PREFIX + "tls/ticket_secret", SECRET)
        e.put(PREFIX + "routes/r", json.dumps({"path": "/", "response": {"body": "ok\n"}}))
        a, b = self.tls_node(e), self.tls_node(e)
        # a node of another fleet: the same certificate, another secret
        other = Etcd(self.tmp, name="etcd-other-%d" % free_port())
        self.addCleanup(other.stop)
        other.start()
        self.put_cert(other, "site", pem, kpem)
        other.put(PREFIX + "tls/ticket_secret", SECRET.replace("a fleet", "another"))
        other.put(PREFIX + "routes/r", json.dumps({"path": "/", "response": {"body": "ok\n"}}))
        c = self.tls_node(other)
        for n in (a, b, c):
            wait_for(lambda: (served(n.port) or (0,))[0] == 200, what="%s serving TLS" % n.name)
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            cx = ctx(v)  # a session resumes only through the context it came from
            st, _, sess, reused = tls_get(a.port, context=cx)
            self.assertEqual((st, reused), (200, False))
            st, _, _, reused = tls_get(b.port, context=cx, session=sess)
            self.assertEqual(st, 200)
            self.assertTrue(reused, "%s: a ticket of node a not resumed on node b" % v)
            st, _, _, reused = tls_get(c.port, context=cx, session=sess)
            self.assertEqual(st, 200)
            self.assertFalse(reused, v)
        # the secret and the keys redacted in GET /config
        h = http.client.HTTPConnection("127.0.0.1", int(a.cfg["admin"]["address"].rsplit(":")[1]),
                                       timeout=TIMEOUT)
        h.request("GET", "/config")
        text = h.getresponse().read().decode()
        h.close()
        self.assertNotIn(SECRET, text)
        self.assertNotIn("PRIVATE KEY", text)


if __name__ == "__main__":
    main()
