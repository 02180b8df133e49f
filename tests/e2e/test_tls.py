#!/usr/bin/env python3
"""test_tls.py - TLS termination end to end, against the real binary with
openssl s_client, curl and Python's ssl module; every certificate is made
here with the openssl CLI.

- SNI: per name, the one-label wildcard, the default for an unknown name and
  for no SNI; RSA against ECDSA by the client's signature algorithms.
- Versions: 1.1 refused (and counted), 1.2 and 1.3 accepted; ALPN (h2 first
  whatever the client's order, http/1.0 for curl -0 and s_client, no ALPN
  when nothing is in common).
- listeners[].protocols: what ALPN selects for each set (s_client and curl
  --http2), a push that changes it (new connections see it), h2 alone
  refusing a client without it, TLS 1.2 without an ephemeral AEAD suite
  never getting h2, and refused values with their JSON paths.
- The access log's tls_version and sni, null on a plain listener.
- Resumption by ticket across two workers for 1.2 and 1.3, after a
  ticket-key rotation within the grace period and not after it; not across
  a client-auth boundary; not with session_tickets off. Across two gateways
  with one ticket_secret, not to a third with another; the secret redacted
  in GET /config, kept by a push of the marker, changed live, refused when
  short or with tickets off.
- A fleet node's TLS listener without certificates: every handshake gets
  unrecognized_name, the other listeners serve (skipped while the build
  does not know "fleet").
- X-Forwarded-Proto: https, and redirect_https on a plain listener.
- A certificate push during HTTPS load: new connections get the new
  certificate, an open keep-alive connection keeps working; the same with
  ten inline certificates, one of them rotated while new connections to
  every name and a keep-alive one flow: no request fails.
- Refused configurations, each with its JSON path (PUT /config and --check).
- mTLS: required, refused, optional; the subject and fingerprint headers;
  client-sent ones stripped; 421 for a Host of another certificate.
- Upstream TLS: verification passing, failing (502 and a log line), SNI.
- GET /certificates and the expiry metric.
"""
import hashlib
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

from harness import (SY_BIN, TIMEOUT, Client, Closed, GatewayCase, free_port, gateway_config,
                     main, upstream_cfg, wait_for)

CERTS = r"""
set -e; cd "$1"; Q='-nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256'
ca() { openssl req -x509 $Q -keyout $1.key -out $1.pem -subj "/CN=$1" -days 30 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign 2>/dev/null; }
leaf() { n=$1; ca=$2; san=$3; shift 3
  openssl req -new "$@" -keyout $n.key -out $n.csr -subj "/CN=$n" 2>/dev/null
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$san" > $n.ext
  openssl x509 -req -in $n.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -days 30 \
    -extfile $n.ext -out $n.pem 2>/dev/null; }
ca ca; ca otherca
leaf ec ca DNS:api.example.com $Q
leaf rsa ca DNS:api.example.com -nodes -newkey rsa:2048
leaf wild ca 'DNS:*.w.example.com' $Q
leaf dflt ca DNS:default.example.com $Q
leaf ec2 ca DNS:api.example.com $Q
leaf client ca email:client@example.com $Q
leaf stranger otherca email:stranger@example.com $Q
leaf backend ca 'DNS:backend.example.com,IP:127.0.0.1' $Q
openssl req -new $Q -keyout expired.key -out expired.csr -subj /CN=old.example.com 2>/dev/null
openssl x509 -req -in expired.csr -signkey expired.key -days -1 -out expired.pem 2>/dev/null
for i in 0 1 2 3 4 5 6 7 8 9; do leaf many$i ca DNS:h$i.example.com $Q; done
leaf many3b ca DNS:h3.example.com $Q
"""

# A TLS backend: Python's http.server behind ssl, echoing a few request
# fields as JSON (a real process on 127.0.0.1, like sy_test_backend).
TLS_BACKEND = r"""
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        b = json.dumps({"path": self.path, "headers": list(self.headers.items()),
                        "sni": getattr(self.connection, "sni", None),
                        "resumed": self.connection.session_reused}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
def sni(sock, name, c):
    sock.sni = name
ctx.sni_callback = sni
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("listening", flush=True)
srv.serve_forever()
"""


class Conn:
    def __init__(self, version, session, session_reused):
        self.version, self.session, self.session_reused = version, session, session_reused

    def close(self):
        pass


def fingerprint(pem_path):
    with open(pem_path) as f:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(f.read())).hexdigest()


def values(echo, name):
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


class TLSCase(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.d = cls.tmp.file("certs")
        os.mkdir(cls.d)
        script = os.path.join(cls.d, "gen.sh")
        with open(script, "w") as f:
            f.write(CERTS)
        subprocess.run(["sh", script, cls.d], check=True, timeout=120)
        cls.fp = {n: fingerprint(cls.c(n)) for n in
                  ("ec", "rsa", "wild", "dflt", "ec2", "client", "many3", "many3b")}
        cls.b = cls.shared_backend("b")

    @classmethod
    def c(cls, name, ext="pem"):
        return os.path.join(cls.d, "%s.%s" % (name, ext))

    @classmethod
    def cert(cls, name, hosts=None):
        e = {"cert": cls.c(name), "key": cls.c(name, "key")}
        if hosts:
            e["hosts"] = hosts
        return e

    @classmethod
    def inline(cls, name, hosts=None):
        """The certificate <name> as inline PEM (cert_pem, key_pem)."""
        with open(cls.c(name)) as f, open(cls.c(name, "key")) as k:
            e = {"cert_pem": f.read(), "key_pem": k.read()}
        if hosts:
            e["hosts"] = hosts
        return e

    @classmethod
    def std_tls(cls, **extra):
        t = {"certificates": [cls.cert("dflt"), cls.cert("ec", ["api.example.com"]),
                              cls.cert("rsa", ["api.example.com"]),
                              cls.cert("wild", ["*.w.example.com"])]}
        t.update(extra)
        return t

    @classmethod
    def tls_config(cls, tls=None, workers=2, extra_listeners=(), **sections):
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             workers=workers, **sections)
        cfg["listeners"][0]["tls"] = tls or cls.std_tls()
        cfg["listeners"] += list(extra_listeners)
        return cfg

    # ---- clients

    @classmethod
    def ctx(cls, version=None, alpn=None, cert=None):
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        c.check_hostname = False
        c.verify_mode = ssl.CERT_NONE
        if version:
            c.minimum_version = c.maximum_version = version
        if alpn:
            c.set_alpn_protocols(alpn)
        if cert:
            c.load_cert_chain(cls.c(cert), cls.c(cert, "key"))
        return c

    @classmethod
    def connect(cls, port, sni=None, ctx=None, session=None):
        s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        try:
            return (ctx or cls.ctx()).wrap_socket(s, server_hostname=sni, session=session)
        except Exception:
            s.close()
            raise

    def served(self, port, sni=None, **kw):
        """The fingerprint of the certificate served for <sni>."""
        with self.connect(port, sni, **kw) as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()

    def get(self, port, target="/e", sni="api.example.com", headers=None, ctx=None,
            session=None):
        """One request on a new TLS connection; the response, and what the
        connection was (version, session, session_reused), after it closed."""
        s = self.connect(port, sni, ctx=ctx, session=session)
        with Client(port, sock=s) as c:
            r = c.request("GET", target, headers=headers or [("Host", sni or "x")])
            info = Conn(s.version(), s.session, s.session_reused)
        return r, info

    def s_client(self, port, *args):
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] +
                           list(args), input=b"", capture_output=True, timeout=TIMEOUT)
        return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")

    def assertRefused(self, gw, doc, path, msg):
        """<doc> is refused with an error at <path> containing <msg>, by
        PUT /config (400) and by --check."""
        st, body = self.admin(gw, "PUT", "/config", doc)
        self.assertEqual(st, 400, body)
        self.assertIn(path, [e["path"] for e in body["errors"]], body)
        self.assertTrue(any(msg in e["message"] for e in body["errors"] if e["path"] == path),
                        body)
        f = self.tmp.file("check.json")
        with open(f, "w") as o:
            json.dump(doc, o)
        p = subprocess.run([SY_BIN, "--check", f], capture_output=True, timeout=TIMEOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(path + ": ", (p.stdout + p.stderr).decode())

    def metrics(self, gw):
        self.admin(gw, "GET", "/healthz")
        with urllib.request.urlopen("http://%s/metrics" % gw.cfg["admin"]["address"],
                                    timeout=TIMEOUT) as r:
            return r.read().decode()

    def admin(self, gw, method, path, body=None):
        """One admin API call: (status, JSON body). Waits for the API to be
        up (it opens after the listeners)."""

        def up():
            try:
                socket.create_connection(tuple(gw.cfg["admin"]["address"].split(":")[:1]) +
                                         (int(gw.cfg["admin"]["address"].split(":")[1]),),
                                         timeout=TIMEOUT).close()
                return True
            except OSError:
                return False

        wait_for(up, what="the admin API")
        req = urllib.request.Request("http://%s%s" % (gw.cfg["admin"]["address"], path),
                                     method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


class ServingTest(TLSCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.gw = cls.shared_gateway(cls.tls_config(), name="tls")

    def test_sni_picks_the_certificate(self):
        p = self.gw.port
        self.assertEqual(self.served(p, "api.example.com"), self.fp["ec"])
        self.assertEqual(self.served(p, "API.Example.com"), self.fp["ec"])
        self.assertEqual(self.served(p, "x.w.example.com"), self.fp["wild"])
        self.assertEqual(self.served(p, "a.b.w.example.com"), self.fp["dflt"])  # one label
        self.assertEqual(self.served(p, "unknown.example.org"), self.fp["dflt"])
        self.assertEqual(self.served(p, None), self.fp["dflt"])

    def test_rsa_or_ecdsa_by_signature_algorithms(self):
        for version in ("-tls1_3", "-tls1_2"):
            rc, out = self.s_client(self.gw.port, "-servername", "api.example.com", version,
                                    "-sigalgs", "rsa_pss_rsae_sha256:rsa_pkcs1_sha256")
            self.assertEqual(rc, 0, out)
            self.assertRegex(out, r"subject=CN ?= ?rsa", out)
            rc, out = self.s_client(self.gw.port, "-servername", "api.example.com", version,
                                    "-sigalgs", "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256")
            self.assertEqual(rc, 0, out)
            self.assertRegex(out, r"subject=CN ?= ?ec\b", out)

    def test_versions(self):
        before = self.metrics(self.gw)
        rc, out = self.s_client(self.gw.port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0")
        self.assertNotEqual(rc, 0, out)
        m = re.search(r'reason="protocol_version"\} (\d+)', before)
        wait_for(lambda: int(re.search(r'reason="protocol_version"\} (\d+)',
                                       self.metrics(self.gw)).group(1)) > int(m.group(1)),
                 what="a counted protocol_version failure")
        for v, name in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
            r, s = self.get(self.gw.port, ctx=self.ctx(v))
            self.assertEqual(r.status, 200)
            self.assertEqual(s.version, name)
        self.assertRegex(self.metrics(self.gw),
                         r'switchyard_tls_handshakes_total\{version="TLSv1.2",resumed="false"\} [1-9]')

    def test_plain_http_on_the_tls_port_is_a_400(self):
        """Plain HTTP sent to a TLS port gets a 400 in plain text that says
        so, as nginx's "plain HTTP request was sent to HTTPS port", with
        Connection: close and then the close; not a silent close (issue 23).
        It counts as a not_tls handshake failure; nothing goes upstream."""
        def not_tls():
            m = re.search(r'reason="not_tls"\} (\d+)', self.metrics(self.gw))
            return int(m.group(1)) if m else 0

        before, upstream = not_tls(), self.b.stats()
        for method, body in (("GET", None), ("POST", b"x" * 70000), ("DELETE", None)):
            with Client(self.gw.port) as c:
                r = c.request(method, "/a", body=body)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.header("Connection"), "close", r)
                self.assertEqual(r.header("Content-Type"), "text/plain; charset=utf-8", r)
                self.assertIn(b"a plain HTTP request was sent to an HTTPS port", r.body)
                self.assertClosed(c)
        wait_for(lambda: not_tls() >= before + 3, what="three not_tls failures")
        self.assertEqual(self.b.stats(), upstream)
        # TLS clients are served as before
        r, s = self.get(self.gw.port)
        self.assertEqual(r.status, 200)

    def test_alpn(self):
        # the server's order: h2 (a TLS listener's default protocols), then
        # http/1.1, then http/1.0, whatever the client's
        for offer in (["h2", "http/1.1"], ["http/1.1", "h2"]):
            with self.connect(self.gw.port, "api.example.com", ctx=self.ctx(alpn=offer)) as s:
                self.assertEqual(s.selected_alpn_protocol(), "h2", offer)
        with self.connect(self.gw.port, "api.example.com",
                          ctx=self.ctx(alpn=["http/1.0", "http/1.1"])) as s:
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")  # ours first

    def test_alpn_without_a_protocol_in_common(self):
        # no overlap is no ALPN, not a no_application_protocol alert (as
        # nginx and HAProxy carry on): the client speaks HTTP/1.1 anyway
        for offer in (["spdy/3.1"], ["foo"]):
            r, s = self.get(self.gw.port, ctx=self.ctx(alpn=offer))
            self.assertEqual(r.status, 200, offer)
        with self.connect(self.gw.port, "api.example.com", ctx=self.ctx(alpn=["foo"])) as s:
            self.assertIsNone(s.selected_alpn_protocol())

    def test_alpn_http10(self):
        # openssl s_client -alpn http/1.0: http/1.0 is selected and served
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.gw.port,
                            "-servername", "api.example.com", "-alpn", "http/1.0", "-ign_eof"],
                           input=b"GET /e10 HTTP/1.0\r\nHost: api.example.com\r\n\r\n",
                           capture_output=True, timeout=TIMEOUT)
        out = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
        self.assertIn("ALPN protocol: http/1.0", out)
        self.assertRegex(out, r"HTTP/1\.1 200 OK\r?\n", out)
        self.assertIn('"path":"/e10"', out.replace(" ", ""))
        # curl -0 offers http/1.0 alone
        out = subprocess.run(["curl", "-sk", "-0", "-v", "--resolve",
                              "api.example.com:%d:127.0.0.1" % self.gw.port,
                              "https://api.example.com:%d/e0" % self.gw.port],
                             capture_output=True, timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out)
        self.assertEqual(json.loads(out.stdout)["path"], "/e0", out)
        self.assertIn(b"ALPN: server accepted http/1.0", out.stderr)

    def test_forwarded_proto_and_curl(self):
        r, s = self.get(self.gw.port, headers=[("Host", "api.example.com"),
                                               ("X-Forwarded-Proto", "http")])
        s.close()
        self.assertEqual(r.status, 200)
        self.assertEqual(values(r.json(), "X-Forwarded-Proto"), ["https"])
        # --http1.1: curl offers h2 first, and a request over h2 waits for
        # the HTTP/2 codec (issue 22), whose suites run this one over h2 too
        out = subprocess.run(["curl", "-sk", "--http1.1", "--resolve",
                              "api.example.com:%d:127.0.0.1" % self.gw.port,
                              "https://api.example.com:%d/e?x=1" % self.gw.port],
                             capture_output=True, timeout=TIMEOUT)
        self.assertEqual(json.loads(out.stdout)["query"], "x=1", out)

    def test_client_cert_fields_stripped(self):
        r, s = self.get(self.gw.port, headers=[("Host", "api.example.com"),
                                               ("X-Client-Cert-Subject", "CN=forged"),
                                               ("x-client-cert-sha256", "00")])
        s.close()
        e = r.json()
        self.assertEqual(values(e, "X-Client-Cert-Subject"), [])
        self.assertEqual(values(e, "X-Client-Cert-Sha256"), [])

    def test_resumption_across_workers(self):
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.ctx(v)
            r, s = self.get(self.gw.port, ctx=ctx)  # a request: 1.3 tickets come after it
            sess = s.session
            self.assertFalse(s.session_reused)
            s.close()
            # 20 connections spread by SO_REUSEPORT over both workers: with
            # per-worker keys about half of them would not resume
            for i in range(20):
                r, s = self.get(self.gw.port, ctx=ctx, session=sess)
                self.assertEqual(r.status, 200)
                self.assertTrue(s.session_reused, "connection %d (%s) not resumed" % (i, v))
                s.close()
        self.assertRegex(self.metrics(self.gw),
                         r'switchyard_tls_handshakes_total\{version="TLSv1.3",resumed="true"\} '
                         r'(2\d|[3-9]\d|\d{3,})')

    def test_certificates_and_expiry_metric(self):
        st, body = self.admin(self.gw, "GET", "/certificates")
        self.assertEqual(st, 200)
        certs = body["certificates"]
        self.assertEqual(len(certs), 4)
        ec = certs[1]
        self.assertEqual(ec["listener"], self.gw.cfg["listeners"][0]["address"])
        self.assertEqual(ec["hosts"], ["api.example.com"])
        self.assertEqual(ec["names"], ["api.example.com"])
        self.assertEqual(ec["subject"], "CN=ec")
        self.assertEqual(ec["issuer"], "CN=ca")
        self.assertEqual(ec["key_type"], "ECDSA")
        self.assertEqual(certs[2]["key_type"], "RSA")
        self.assertEqual(ec["sha256"], self.fp["ec"])
        self.assertTrue(certs[0]["default"])
        m = re.search(r'switchyard_tls_certificate_expiry_timestamp_seconds\{listener="%s",'
                      r'name="api.example.com"\} (\d+)' % re.escape(ec["listener"]),
                      self.metrics(self.gw))
        self.assertIsNotNone(m)
        self.assertEqual(int(m.group(1)), min(certs[1]["not_after_unix"],
                                              certs[2]["not_after_unix"]))


class ResumptionTest(TLSCase):
    def test_no_resumption_across_client_auth(self):
        auth_port = free_port()
        auth = {"address": "127.0.0.1:%d" % auth_port,
                "tls": {"certificates": [self.cert("ec")],
                        "client_auth": {"ca_file": self.c("ca"), "mode": "optional"}}}
        gw = self.own_gateway(self.tls_config({"certificates": [self.cert("ec")]},
                                              extra_listeners=[auth]))
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.ctx(v)
            r, s = self.get(gw.port, ctx=ctx)
            sess = s.session
            s.close()
            r, s = self.get(auth_port, ctx=ctx, session=sess)
            self.assertEqual(r.status, 200)
            self.assertFalse(s.session_reused, v)
            s.close()
            r, s = self.get(gw.port, ctx=ctx, session=sess)  # and still on its own
            self.assertTrue(s.session_reused, v)
            s.close()

    def test_tickets_off(self):
        gw = self.own_gateway(self.tls_config(self.std_tls(session_tickets=False)))
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.ctx(v)
            r, s = self.get(gw.port, ctx=ctx)
            sess = s.session
            s.close()
            r, s = self.get(gw.port, ctx=ctx, session=sess)
            self.assertFalse(s.session_reused, v)
            s.close()

    def test_rotation_grace(self):
        """With ticket_rotation_s 1, a ticket sealed in second t opens in
        t + 1 and not in t + 2. The gateway's period is time() (whole
        seconds of the kernel's coarse clock, which turns up to a tick,
        1 to 10 ms, after time.time()'s second): a get placed in a second by
        time.time() therefore begins SETTLE after that second began, when
        time() has turned too, and ends before the next one. SETTLE is 25 to
        250 ticks, far beyond the coarse clock's lag."""
        settle = 0.25
        gw = self.own_gateway(self.tls_config(self.std_tls(ticket_rotation_s=1)))

        def at(second):
            time.sleep(max(0.0, second + settle - time.time()))

        def get_in(second, ctx, session=None):
            """A get that the gateway saw wholly in <second>, or None when
            it ended after that second (the machine was too slow)."""
            at(second)
            r, s = self.get(gw.port, ctx=ctx, session=session)
            return (r, s) if time.time() < second + 1 else None

        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.ctx(v)
            # a slow get proves nothing either way (its ticket's key and the
            # one it is opened with may be a second further apart): tried
            # again, a bounded number of times
            for _ in range(5):
                t = int(time.time()) + 1
                got = get_in(t, ctx)
                if not got:
                    continue
                sess = got[1].session
                got = get_in(t + 1, ctx, sess)  # the key rotated: the previous one opens it
                if got:
                    break
            else:
                self.fail("no two gets within their seconds in 5 tries (machine too slow)")
            self.assertTrue(got[1].session_reused, v)
            at(t + 2)  # two rotations: gone
            r, s = self.get(gw.port, ctx=ctx, session=sess)
            self.assertEqual(r.status, 200)
            self.assertFalse(s.session_reused, v)


SECRET_A = "e2e ticket secret A, 32 bytes or more!"
SECRET_B = "e2e ticket secret B, 32 bytes or more!"


class TicketSecretTest(TLSCase):
    def test_tickets_resume_across_gateways(self):
        """Two gateways with one ticket_secret open each other's tickets,
        for TLS 1.2 and 1.3; a third with another secret does not."""
        gws = [self.own_gateway(self.tls_config(self.std_tls(ticket_secret=secret)), name="tk")
               for secret in (SECRET_A, SECRET_A, SECRET_B)]
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.ctx(v)
            for issuer, other in ((0, 1), (1, 0)):
                # a request first: TLS 1.3 tickets arrive after the handshake
                r, s = self.get(gws[issuer].port, ctx=ctx)
                self.assertEqual((r.status, s.session_reused), (200, False))
                sess = s.session
                r, s = self.get(gws[other].port, ctx=ctx, session=sess)
                self.assertEqual(r.status, 200)
                self.assertTrue(s.session_reused, "%s: %d -> %d" % (v, issuer, other))
            r, s = self.get(gws[2].port, ctx=ctx, session=sess)
            self.assertEqual(r.status, 200)
            self.assertFalse(s.session_reused, v)

    def test_secret_redacted_and_applied_live(self):
        gw = self.own_gateway(self.tls_config(self.std_tls(ticket_secret=SECRET_A)))
        peer = self.own_gateway(self.tls_config(self.std_tls(ticket_secret=SECRET_B)))
        st, shown = self.admin(gw, "GET", "/config")
        self.assertEqual(st, 200)
        self.assertEqual(shown["listeners"][0]["tls"]["ticket_secret"], "[redacted]")
        self.assertNotIn(SECRET_A, json.dumps(shown))
        # the GET's output pushed back keeps the live secret: no change
        st, body = self.admin(gw, "PUT", "/config", shown)
        self.assertEqual((st, body["changed"]), (200, False), body)
        ctx = self.ctx(ssl.TLSVersion.TLSv1_3)
        r, s = self.get(gw.port, ctx=ctx)
        old = s.session
        # the secret alone changed: a new context with the new keys, live
        new = json.loads(json.dumps(gw.cfg))
        new["listeners"][0]["tls"]["ticket_secret"] = SECRET_B
        st, body = self.admin(gw, "PUT", "/config", new)
        self.assertEqual((st, body["changed"]), (200, True), body)
        r, s = self.get(gw.port, ctx=ctx, session=old)
        self.assertEqual(r.status, 200)
        self.assertFalse(s.session_reused)  # sealed with the old secret: a full handshake
        r, s = self.get(peer.port, ctx=ctx, session=s.session)
        self.assertTrue(s.session_reused)  # sealed with B: the peer with B opens it
        base = self.tls_config()
        for tls, msg in ((self.std_tls(ticket_secret="short"), "too short: 5 bytes"),
                         (self.std_tls(ticket_secret=SECRET_A, session_tickets=False),
                          "set while session_tickets is false"),
                         (self.std_tls(ticket_secret=7), "expected a string")):
            self.assertRefused(gw, dict(base, listeners=[dict(gw.cfg["listeners"][0], tls=tls)]),
                               "/listeners/0/tls/ticket_secret", msg)


class FleetNoCertificatesTest(TLSCase):
    """On a fleet node a TLS listener may have no certificates yet: it
    refuses every handshake with an alert, and the node's other listeners
    serve. A fleet node is one whose config has "fleet": the test runs a
    real etcd for it."""

    def etcd(self):
        """A single-member etcd on free ports, stopped when the test ends;
        its client URL."""
        client, peer = free_port(), free_port()
        url, purl = "http://127.0.0.1:%d" % client, "http://127.0.0.1:%d" % peer
        log = open(self.tmp.file("etcd-%d.log" % client), "wb")
        p = subprocess.Popen(["etcd", "--name", "e2e", "--data-dir",
                              self.tmp.file("etcd-%d" % client), "--listen-client-urls", url,
                              "--advertise-client-urls", url, "--listen-peer-urls", purl,
                              "--initial-advertise-peer-urls", purl,
                              "--initial-cluster", "e2e=" + purl],
                             stdout=log, stderr=log, start_new_session=True)
        log.close()

        def stop():
            p.terminate()
            try:
                p.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(TIMEOUT)

        self.addCleanup(stop)

        def up():
            try:
                with urllib.request.urlopen(url + "/health", timeout=TIMEOUT) as r:
                    return b"true" in r.read()
            except OSError:
                return False

        wait_for(up, what="etcd")
        return url

    def test_listener_without_certificates_refuses_handshakes(self):
        empty, plain = free_port(), free_port()
        cfg = gateway_config(workers=2)
        cfg["listeners"] = [
            {"address": "127.0.0.1:%d" % empty, "tls": {"certificates": []}},
            {"address": "127.0.0.1:%d" % free_port(), "tls": self.std_tls()},
            {"address": "127.0.0.1:%d" % plain}]
        cfg["fleet"] = {"etcd": {"endpoints": ["http://127.0.0.1:9"], "prefix": "/sy-e2e-tls/"}}
        f = self.tmp.file("fleet-check.json")
        with open(f, "w") as o:
            json.dump(cfg, o)
        p = subprocess.run([SY_BIN, "--check", f], capture_output=True, timeout=TIMEOUT)
        out = (p.stdout + p.stderr).decode()
        if re.search(r"^/fleet\S*: unknown key", out, re.M):
            self.skipTest("this build does not know \"fleet\" yet (config_fleet.c)")
        self.assertNotIn("/listeners/0/tls/certificates", out)
        cfg["fleet"]["etcd"]["endpoints"] = [self.etcd()]
        gw = self.own_gateway(cfg)
        good = int(cfg["listeners"][1]["address"].rsplit(":", 1)[1])
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            for sni in ("api.example.com", None):
                with self.assertRaisesRegex(ssl.SSLError, "UNRECOGNIZED_NAME"):
                    self.connect(empty, sni, ctx=self.ctx(v)).close()
            # the node's other listeners serve meanwhile
            self.assertEqual(self.served(good, "api.example.com", ctx=self.ctx(v)), self.fp["ec"])
        with Client(plain) as c:
            self.assertLess(c.request("GET", "/").status, 500)
        self.assertRegex(self.metrics(gw),
                         r'switchyard_tls_handshake_failures_total\{reason="other"\} ([4-9]|\d\d+)\b')


class RedirectTest(TLSCase):
    def test_redirect_https(self):
        plain = free_port()
        cfg = self.tls_config(extra_listeners=[{"address": "127.0.0.1:%d" % plain,
                                                "redirect_https": 8443}])
        gw = self.own_gateway(cfg)
        with Client(plain) as c:
            r = c.request("GET", "/a/b?x=1&y=2", headers=[("Host", "api.example.com:%d" % plain)])
            self.assertEqual(r.status, 308)
            self.assertEqual(r.header("Location"), "https://api.example.com:8443/a/b?x=1&y=2")
            r = c.request("POST", "/p", headers=[("Host", "Example.com"),
                                                 ("Content-Length", "0")])
            self.assertEqual(r.status, 308)
            self.assertEqual(r.header("Location"), "https://example.com:8443/p")
        cfg["listeners"][1]["redirect_https"] = 443
        gw2 = self.own_gateway(dict(cfg, listeners=[
            dict(cfg["listeners"][0], address="127.0.0.1:%d" % free_port()),
            {"address": "127.0.0.1:%d" % free_port(), "redirect_https": 443}],
            admin={"address": "127.0.0.1:%d" % free_port()}))
        port2 = int(gw2.cfg["listeners"][1]["address"].rsplit(":", 1)[1])
        with Client(port2) as c:
            r = c.request("GET", "/x", headers=[("Host", "api.example.com")])
            self.assertEqual(r.header("Location"), "https://api.example.com/x")


class AccessLogTLSTest(TLSCase):
    def test_tls_fields_in_the_access_log(self):
        # tls_version and sni on a TLS listener (sni null without one),
        # both null on a plain listener of the same gateway
        log = self.tmp.file("tls-access.log")
        plain = free_port()
        gw = self.own_gateway(self.tls_config(
            extra_listeners=[{"address": "127.0.0.1:%d" % plain}], access_log=log))
        r, s = self.get(gw.port, "/e?n=1", sni="api.example.com")
        self.assertEqual((r.status, s.version), (200, "TLSv1.3"))
        r, s = self.get(gw.port, "/e?n=2", sni=None, ctx=self.ctx(ssl.TLSVersion.TLSv1_2))
        self.assertEqual((r.status, s.version), (200, "TLSv1.2"))
        with Client(plain) as c:
            self.assertEqual(c.request("GET", "/e?n=3").status, 200)

        def lines():
            try:
                with open(log) as f:
                    recs = [json.loads(l) for l in f.read().splitlines()]
            except OSError:
                return None
            return recs if len(recs) >= 3 else None

        recs = {r["target"]: r for r in wait_for(lines, what="3 access-log lines")}
        self.assertEqual((recs["/e?n=1"]["tls_version"], recs["/e?n=1"]["sni"]),
                         ("TLSv1.3", "api.example.com"))
        self.assertEqual((recs["/e?n=2"]["tls_version"], recs["/e?n=2"]["sni"]),
                         ("TLSv1.2", None))
        self.assertEqual((recs["/e?n=3"]["tls_version"], recs["/e?n=3"]["sni"]), (None, None))


class PushTest(TLSCase):
    def test_certificate_push_under_load(self):
        cfg = self.tls_config({"certificates": [self.cert("ec")]}, workers=2)
        gw = self.own_gateway(cfg)
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec"])
        stop = threading.Event()
        errors, done = [], [0]

        def load():
            try:
                s = self.connect(gw.port, "api.example.com")
                with Client(gw.port, sock=s) as c:
                    while not stop.is_set() and done[0] < 100000:
                        r = c.request("GET", "/e", headers=[("Host", "api.example.com")])
                        if r.status != 200:
                            errors.append(r.status)
                        done[0] += 1
            except Exception as e:  # any failure of the open connection
                errors.append(repr(e))

        t = threading.Thread(target=load)
        t.start()
        try:
            wait_for(lambda: done[0] > 20, what="requests on the keep-alive connection")
            for i, name in enumerate(("ec2", "ec", "ec2")):
                new = dict(cfg)
                new["listeners"] = [dict(cfg["listeners"][0],
                                         tls={"certificates": [self.cert(name)]})]
                st, body = self.admin(gw, "PUT", "/config", new)
                self.assertEqual(st, 200, body)
                self.assertEqual(self.served(gw.port, "api.example.com"), self.fp[name])
                n = done[0]
                wait_for(lambda: done[0] > n + 10, what="requests after push %d" % i)
        finally:
            stop.set()
            t.join(TIMEOUT)
        self.assertEqual(errors, [])

    def test_inline_certificate_rotation_under_load(self):
        """Ten inline certificates, one name each, and pushes that change
        one of them while clients open new TLS connections to every name and
        a keep-alive connection to the changed one goes on: no request
        fails, the changed name serves its new certificate at once, the
        others keep theirs."""
        def tls(h3):
            return {"certificates": [self.inline(h3 if i == 3 else "many%d" % i,
                                                 ["h%d.example.com" % i]) for i in range(10)]}

        cfg = self.tls_config(tls("many3"), workers=2)
        gw = self.own_gateway(cfg)
        fp0 = fingerprint(self.c("many0"))
        stop = threading.Event()
        errors, done, lock = [], [0], threading.Lock()

        def count():
            with lock:
                done[0] += 1

        def new_connections(first):
            for i in range(first, first + 100000):  # bounded; stopped long before
                if stop.is_set():
                    return
                host = "h%d.example.com" % (i % 10)
                try:
                    r, _ = self.get(gw.port, sni=host)
                    if r.status != 200:
                        errors.append((host, r.status))
                except Exception as e:  # a failed handshake or request
                    errors.append((host, repr(e)))
                count()

        def keep_alive():
            try:
                s = self.connect(gw.port, "h3.example.com")
                with Client(gw.port, sock=s) as c:
                    for _ in range(100000):
                        if stop.is_set():
                            return
                        r = c.request("GET", "/e", headers=[("Host", "h3.example.com")])
                        if r.status != 200:
                            errors.append(("keep-alive", r.status))
                        count()
            except Exception as e:
                errors.append(("keep-alive", repr(e)))

        threads = [threading.Thread(target=new_connections, args=(k * 3,)) for k in range(3)]
        threads.append(threading.Thread(target=keep_alive))
        for t in threads:
            t.start()
        try:
            wait_for(lambda: done[0] > 30, what="requests before the first push")
            for i, name in enumerate(("many3b", "many3", "many3b")):
                new = dict(cfg, listeners=[dict(cfg["listeners"][0], tls=tls(name))])
                st, body = self.admin(gw, "PUT", "/config", new)
                self.assertEqual((st, body.get("changed")), (200, True), body)
                self.assertEqual(self.served(gw.port, "h3.example.com"), self.fp[name])
                self.assertEqual(self.served(gw.port, "h0.example.com"), fp0)
                n = done[0]
                wait_for(lambda: done[0] > n + 30, what="requests after push %d" % i)
        finally:
            stop.set()
            for t in threads:
                t.join(TIMEOUT)
        self.assertEqual(errors, [])

    def test_same_document_rereads_files(self):
        cfg = self.tls_config({"certificates": [self.cert("ec")]})
        gw = self.own_gateway(cfg)
        st, body = self.admin(gw, "PUT", "/config", cfg)
        self.assertEqual((st, body["changed"]), (200, False))
        # the file rewritten in place: the same document is a change now
        with open(self.c("ec2")) as f, open(self.tmp.file("live.pem"), "w") as o:
            o.write(f.read())
        with open(self.c("ec2", "key")) as f, open(self.tmp.file("live.key"), "w") as o:
            o.write(f.read())
        cfg2 = dict(cfg, listeners=[dict(cfg["listeners"][0], tls={"certificates": [
            {"cert": self.tmp.file("live.pem"), "key": self.tmp.file("live.key")}]})])
        st, body = self.admin(gw, "PUT", "/config", cfg2)
        self.assertEqual((st, body["changed"]), (200, True))
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec2"])
        for n in ("pem", "key"):
            with open(self.c("ec", n)) as f, open(self.tmp.file("live." + n), "w") as o:
                o.write(f.read())
        st, body = self.admin(gw, "PUT", "/config", cfg2)
        self.assertEqual((st, body["changed"]), (200, True))
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec"])

    def test_get_config_redacts_inline_keys(self):
        cfg = self.tls_config({"certificates": [self.inline("dflt"),
                                                self.cert("wild", ["*.w.example.com"])]})
        state = self.tmp.file("state-redact")
        os.mkdir(state)
        cfg["admin"]["state_dir"] = state
        gw = self.own_gateway(cfg)
        url = "http://%s/config" % gw.cfg["admin"]["address"]
        self.admin(gw, "GET", "/healthz")  # waits for the admin API
        with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
            raw = r.read().decode()
        self.assertNotIn("PRIVATE KEY", raw)
        shown = json.loads(raw)
        certs = shown["listeners"][0]["tls"]["certificates"]
        self.assertEqual(certs[0]["key_pem"], "[redacted]")
        self.assertEqual(certs[0]["cert_pem"], cfg["listeners"][0]["tls"]["certificates"][0]
                         ["cert_pem"])
        self.assertEqual(certs[1]["key"], self.c("wild", "key"))  # a path is not a secret
        # the GET's output pushed back: the live key is kept, nothing changes
        st, body = self.admin(gw, "PUT", "/config", shown)
        self.assertEqual((st, body["changed"]), (200, False), body)
        st, body = self.admin(gw, "PUT", "/config?dry_run=1", shown)
        self.assertEqual(st, 200, body)
        # edited: another certificate added, the redacted one still served with its key
        certs.append(self.inline("ec", ["api.example.com"]))
        st, body = self.admin(gw, "PUT", "/config", shown)
        self.assertEqual((st, body["changed"]), (200, True), body)
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec"])
        self.assertEqual(self.served(gw.port, "unknown.test"), self.fp["dflt"])
        # a marker whose certificate the live config does not have: refused at its path
        bad = json.loads(json.dumps(shown))
        bad["listeners"][0]["tls"]["certificates"][0]["cert_pem"] = self.inline("rsa")["cert_pem"]
        st, body = self.admin(gw, "PUT", "/config", bad)
        self.assertEqual(st, 400, body)
        self.assertEqual([e["path"] for e in body["errors"]],
                         ["/listeners/0/tls/certificates/0/key_pem"], body)
        self.assertIn("send the key", body["errors"][0]["message"])
        # outside PUT /config the marker is not a key: --check says why
        f = self.tmp.file("redacted.json")
        with open(f, "w") as o:
            o.write(raw)
        p = subprocess.run([SY_BIN, "--check", f], capture_output=True, timeout=TIMEOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/listeners/0/tls/certificates/0/key_pem: \"[redacted]\" is what GET "
                      "/config shows", (p.stdout + p.stderr).decode())
        # what was persisted holds the keys themselves: a restart serves both
        gw.stop()
        gw.start()
        self.admin(gw, "GET", "/healthz")
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec"])
        self.assertEqual(self.served(gw.port, "unknown.test"), self.fp["dflt"])
        with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
            self.assertNotIn("PRIVATE KEY", r.read().decode())

    def test_refused_configs(self):
        gw = self.own_gateway(self.tls_config())
        base = self.tls_config()
        cases = [
            ({"certificates": [self.cert("dflt"), self.cert("ec", ["api.example.com"]),
                               {"cert": self.c("rsa"), "key": self.c("ec", "key"),
                                "hosts": ["api.example.com"]}]},
             "/listeners/0/tls/certificates/2/key", "does not match"),
            ({"certificates": [{"cert": self.c("nope"), "key": self.c("ec", "key")}]},
             "/listeners/0/tls/certificates/0/cert", "cannot read"),
            ({"certificates": [{"cert_pem": "garbage", "key": self.c("ec", "key")}]},
             "/listeners/0/tls/certificates/0/cert_pem", "cannot parse"),
            ({"certificates": [self.cert("expired")]},
             "/listeners/0/tls/certificates/0/cert", "expired"),
            ({"certificates": [self.cert("ec", ["api.example.com", "other.example.com"])]},
             "/listeners/0/tls/certificates/0/hosts/1", "does not cover"),
            ({"certificates": [self.cert("ec"), self.cert("dflt")]},
             "/listeners/0/tls/certificates/1", "second default"),
            (dict(self.std_tls(), min_version="1.1"), "/listeners/0/tls/min_version",
             "not supported"),
        ]
        for tls, path, msg in cases:
            self.assertRefused(gw, dict(base, listeners=[dict(gw.cfg["listeners"][0], tls=tls)]),
                               path, msg)
        # the live config kept serving
        self.assertEqual(self.served(gw.port, "api.example.com"), self.fp["ec"])


class ProtocolsTest(TLSCase):
    """listeners[].protocols and ALPN, checked at the handshake only: until
    the HTTP/2 codec lands a connection that selected h2 is not served as
    HTTP/2, so nothing here sends a request over h2. The request-level h2
    tests (curl --http2 and --http2-prior-knowledge requests, frame-level
    clients) come with the codec."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.gw = cls.shared_gateway(cls.tls_config(), name="protocols")

    def alpn(self, port, offer="h2,http/1.1", *args):
        """What `openssl s_client -alpn <offer>` negotiated: the protocol,
        None for no ALPN, or "failed" for a handshake that did not complete
        (with s_client's output)."""
        rc, out = self.s_client(port, "-servername", "api.example.com", "-alpn", offer, *args)
        if rc != 0 or "Cipher is (NONE)" in out:
            return "failed", out
        m = re.search(r"^ALPN protocol: (\S+)", out, re.M)
        if m:
            return m.group(1), out
        self.assertIn("No ALPN negotiated", out)
        return None, out

    def curl_alpn(self, port):
        """What curl --http2 was answered in ALPN (the request itself is
        not looked at: over h2 it waits for the codec)."""
        p = subprocess.run(["curl", "-sk", "-v", "--http2", "--max-time", str(int(TIMEOUT)),
                            "--resolve", "api.example.com:%d:127.0.0.1" % port,
                            "https://api.example.com:%d/e" % port],
                           capture_output=True, timeout=TIMEOUT + 5)
        m = re.search(rb"ALPN: server accepted (\S+)", p.stderr)
        return m.group(1).decode() if m else None

    def with_protocols(self, cfg, *protocols):
        """<cfg> with its first listener's protocols set (none: the key
        left out, the default)."""
        listener = {k: v for k, v in cfg["listeners"][0].items() if k != "protocols"}
        if protocols:
            listener["protocols"] = list(protocols)
        return dict(cfg, listeners=[listener] + cfg["listeners"][1:])

    def test_alpn_follows_protocols_live(self):
        h1_port = free_port()
        cfg = self.tls_config(extra_listeners=[
            {"address": "127.0.0.1:%d" % h1_port, "tls": self.std_tls(), "protocols": ["h1"]}])
        gw = self.own_gateway(cfg)
        self.admin(gw, "GET", "/healthz")
        # the default of a TLS listener, ["h1", "h2"]: h2 preferred
        self.assertEqual(self.alpn(gw.port)[0], "h2")
        self.assertEqual(self.alpn(gw.port, "http/1.1,h2")[0], "h2")
        self.assertEqual(self.alpn(gw.port, "http/1.1")[0], "http/1.1")
        self.assertEqual(self.curl_alpn(gw.port), "h2")
        # ["h1"]: never h2; curl --http2 falls back to HTTP/1.1 and is served
        self.assertEqual(self.alpn(h1_port)[0], "http/1.1")
        self.assertIsNone(self.alpn(h1_port, "h2")[0])  # no overlap: no ALPN
        self.assertEqual(self.curl_alpn(h1_port), "http/1.1")
        p = subprocess.run(["curl", "-sk", "--http2", "--resolve",
                            "api.example.com:%d:127.0.0.1" % h1_port,
                            "https://api.example.com:%d/e?h1" % h1_port],
                           capture_output=True, timeout=TIMEOUT)
        self.assertEqual(json.loads(p.stdout)["query"], "h1", p)

        # a push that changes only the protocols: the next connection sees
        # them, with no rebind (the listener keeps its address and sockets)
        accepting = gw.log().count("listener %s: accepting" % cfg["listeners"][0]["address"])
        held = self.connect(gw.port, "api.example.com", ctx=self.ctx(alpn=["h2", "http/1.1"]))
        self.addCleanup(held.close)
        self.assertEqual(held.selected_alpn_protocol(), "h2")
        for protocols, want in ((("h1",), "http/1.1"), ((), "h2"), (("h2", "h1"), "h2")):
            doc = self.with_protocols(cfg, *protocols)
            st, body = self.admin(gw, "PUT", "/config", doc)
            self.assertEqual((st, body.get("changed")), (200, True), body)
            self.assertEqual(self.alpn(gw.port)[0], want, protocols)
            st, live = self.admin(gw, "GET", "/config")
            self.assertEqual(live["listeners"][0].get("protocols"), doc["listeners"][0].get(
                "protocols"))
        # nothing was bound again
        self.assertEqual(gw.log().count("listener %s: accepting" % cfg["listeners"][0]["address"]),
                         accepting)
        self.assertEqual(held.selected_alpn_protocol(), "h2")  # an open one kept its own

        # ["h2"] alone: a client that cannot speak it is refused at the
        # handshake with no_application_protocol (RFC 7301), and counted
        st, body = self.admin(gw, "PUT", "/config", self.with_protocols(cfg, "h2"))
        self.assertEqual(st, 200, body)
        self.assertEqual(self.alpn(gw.port)[0], "h2")
        before = self.metrics(gw)
        got, out = self.alpn(gw.port, "http/1.1")
        self.assertEqual(got, "failed", out)
        self.assertRegex(out, r"no application protocol|alert number 120", out)
        rc, out = self.s_client(gw.port, "-servername", "api.example.com")  # no ALPN at all
        self.assertNotEqual(rc, 0, out)

        def alpn_failures(text):
            return int(re.search(r'handshake_failures_total\{reason="no_application_protocol"\} '
                                 r'(\d+)', text).group(1))

        n = alpn_failures(before)
        wait_for(lambda: alpn_failures(self.metrics(gw)) >= n + 2, what="2 counted ALPN failures")
        # the other listener was never touched
        self.assertEqual(self.alpn(h1_port)[0], "http/1.1")

    def test_tls12_without_an_ephemeral_aead_suite_never_gets_h2(self):
        """RFC 9113 9.2.2: over TLS 1.2, h2 needs an ephemeral AEAD suite.
        The listener's TLS 1.2 list (Mozilla intermediate) holds nothing else,
        so a client offering only CBC suites gets no handshake at all, let
        alone h2; the ALPN callback's own check (a CBC suite negotiated
        selects http/1.1) is unit-tested in tests/admin/test_tls_ctx.c."""
        gw = self.gw
        for cipher in ("ECDHE-RSA-AES128-SHA256", "ECDHE-ECDSA-AES128-SHA256", "AES128-SHA256"):
            got, out = self.alpn(gw.port, "h2,http/1.1", "-tls1_2", "-cipher", cipher)
            self.assertEqual(got, "failed", out)
            self.assertNotIn("ALPN protocol: h2", out)
        got, out = self.alpn(gw.port, "h2,http/1.1", "-tls1_2")
        self.assertEqual(got, "h2", out)
        self.assertRegex(out, r"Cipher is ECDHE-(ECDSA|RSA)-(AES\d+-GCM|CHACHA20)", out)
        got, out = self.alpn(gw.port, "h2,http/1.1", "-tls1_2", "-cipher",
                             "ECDHE-RSA-AES128-GCM-SHA256", "-sigalgs", "rsa_pss_rsae_sha256")
        self.assertEqual(got, "h2", out)

    def test_refused_protocols_and_http2(self):
        gw = self.gw
        plain = {"address": "127.0.0.1:%d" % free_port()}
        tls0 = gw.cfg["listeners"][0]
        cases = [
            ([tls0, dict(plain, protocols=["h1", "h2"])], {}, "/listeners/1/protocols/1",
             '"h2" needs tls'),
            ([dict(tls0, protocols=["h2c"])], {}, "/listeners/0/protocols/0",
             '"h2c" is HTTP/2 without TLS'),
            ([dict(tls0, protocols=["http/1.1"])], {}, "/listeners/0/protocols/0",
             'write "h1"'),
            ([dict(tls0, protocols=["h1", "h1"])], {}, "/listeners/0/protocols/1",
             "listed twice"),
            ([dict(tls0, protocols=[])], {}, "/listeners/0/protocols",
             "at least one protocol"),
            ([tls0], {"http2": {"max_concurrent_streams": 0}}, "/http2/max_concurrent_streams",
             "between 1 and 10000"),
            ([tls0], {"http2": {"initial_window_bytes": 1024}}, "/http2/initial_window_bytes",
             "between 65535 and 2147483647"),
            ([tls0], {"http2": {"max_header_list_size": 8192}}, "/http2/max_header_list_size",
             "unknown key"),
        ]
        for listeners, extra, path, msg in cases:
            self.assertRefused(gw, dict(gw.cfg, listeners=listeners, **extra), path, msg)
        # what is allowed: h2c alone on a plain listener, and the http2 section
        doc = dict(gw.cfg, listeners=[tls0, dict(plain, protocols=["h2c"])],
                   http2={"max_concurrent_streams": 250, "initial_window_bytes": 1048576})
        st, body = self.admin(gw, "PUT", "/config", doc)
        self.assertEqual(st, 200, body)
        st, live = self.admin(gw, "GET", "/config")
        self.assertEqual(live["http2"], doc["http2"])
        self.assertEqual(live["listeners"][1]["protocols"], ["h2c"])
        st, body = self.admin(gw, "PUT", "/config", gw.cfg)
        self.assertEqual(st, 200, body)
        self.assertEqual(self.alpn(gw.port)[0], "h2")


class ClientAuthTest(TLSCase):
    def auth_gw(self, mode):
        tls = {"certificates": [self.cert("dflt"), self.cert("ec", ["api.example.com"])],
               "client_auth": {"ca_file": self.c("ca"), "mode": mode}}
        return self.own_gateway(self.tls_config(tls))

    def test_required(self):
        gw = self.auth_gw("require")
        with self.assertRaises((ssl.SSLError, ConnectionError, Closed)):
            r, s = self.get(gw.port)  # 1.3: the alert comes with the first read
            s.close()
        with self.assertRaises((ssl.SSLError, ConnectionError, Closed)):
            r, s = self.get(gw.port, ctx=self.ctx(cert="stranger"))
            s.close()
        r, s = self.get(gw.port, ctx=self.ctx(cert="client"),
                        headers=[("Host", "api.example.com"),
                                 ("X-Client-Cert-Subject", "CN=forged")])
        s.close()
        self.assertEqual(r.status, 200)
        e = r.json()
        self.assertEqual(values(e, "X-Client-Cert-Subject"), ["CN=client"])
        self.assertEqual(values(e, "X-Client-Cert-Sha256"), [self.fp["client"]])
        m = self.metrics(gw)
        self.assertRegex(m, r'reason="no_client_certificate"\} [1-9]')
        self.assertRegex(m, r'reason="bad_client_certificate"\} [1-9]')

    def test_optional_and_misdirected(self):
        gw = self.auth_gw("optional")
        r, s = self.get(gw.port, headers=[("Host", "api.example.com"),
                                          ("X-Client-Cert-Sha256", "ab")])
        s.close()
        self.assertEqual(r.status, 200)
        self.assertEqual(values(r.json(), "X-Client-Cert-Sha256"), [])
        r, s = self.get(gw.port, ctx=self.ctx(cert="client"))
        s.close()
        self.assertEqual(values(r.json(), "X-Client-Cert-Subject"), ["CN=client"])
        # SNI picked api.example.com's certificate, Host names the default's
        r, s = self.get(gw.port, sni="api.example.com",
                        headers=[("Host", "default.example.com")])
        s.close()
        self.assertEqual(r.status, 421)
        r, s = self.get(gw.port, sni="api.example.com",
                        headers=[("Host", "API.example.com:%d" % gw.port)])
        s.close()
        self.assertEqual(r.status, 200)


class UpstreamTLSTest(TLSCase):
    def backend(self):
        port = free_port()
        p = subprocess.Popen([sys.executable, "-c", TLS_BACKEND, str(port), self.c("backend"),
                              self.c("backend", "key")], stdout=subprocess.PIPE,
                             start_new_session=True)
        self.addCleanup(lambda: (p.kill(), p.wait(TIMEOUT), p.stdout.close()))
        self.assertEqual(p.stdout.readline().strip(), b"listening")
        return port

    def test_upstream_tls(self):
        port = self.backend()
        addr = "127.0.0.1:%d" % port
        ups = {"good": {"servers": [{"address": addr}],
                        "tls": {"ca_file": self.c("ca"), "server_name": "backend.example.com"}},
               "nosni": {"servers": [{"address": addr}], "tls": {"ca_file": self.c("ca")}},
               "wrongca": {"servers": [{"address": addr}], "tls": {"ca_file": self.c("otherca")}},
               "system": {"servers": [{"address": addr}], "tls": {}},
               "noverify": {"servers": [{"address": addr}], "tls": {"verify": False}},
               "nopool": {"servers": [{"address": addr}], "keepalive": 0,
                          "tls": {"ca_file": self.c("ca"), "server_name": "backend.example.com"}}}
        routes = [{"id": n, "path": "/%s/*{rest}" % n, "upstream": n} for n in ups]
        cfg = gateway_config(upstreams=ups, routes=routes, workers=1)
        gw = self.own_gateway(cfg)
        with Client(gw.port) as c:
            for i in range(3):  # pooled: one connection, kept alive
                r = c.request("GET", "/good/x", headers=[("Host", "a")])
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["sni"], "backend.example.com")
            r = c.request("GET", "/nosni/x", headers=[("Host", "a")])
            self.assertEqual(r.status, 200, r)  # verified against the IP SAN
            self.assertIsNone(r.json()["sni"])  # no SNI for an IP literal
            r = c.request("GET", "/noverify/x", headers=[("Host", "a")])
            self.assertEqual(r.status, 200, r)
            # a new connection each time: resumed with the worker's session
            r = c.request("GET", "/nopool/x", headers=[("Host", "a")])
            self.assertEqual(r.status, 200, r)
            for i in range(3):
                r = c.request("GET", "/nopool/x", headers=[("Host", "a")])
                self.assertEqual(r.status, 200, r)
                self.assertTrue(r.json()["resumed"], r.json())
            for bad in ("wrongca", "system"):
                r = c.request("GET", "/%s/x" % bad, headers=[("Host", "a")])
                self.assertEqual(r.status, 502, r)
        gw.wait_log(r"upstream wrongca.*127\.0\.0\.1:%d.*certificate verify failed" % port)

    def test_upstream_tls_health_checks(self):
        # active checks go over TLS with the pool's client context: verified
        # and with SNI they pass, against the wrong CA they fail
        port = self.backend()
        addr = "127.0.0.1:%d" % port
        chk = {"path": "/hz", "interval_ms": 200, "timeout_ms": 200, "healthy_threshold": 1,
               "unhealthy_threshold": 1}
        ups = {"good": {"servers": [{"address": addr}], "health_check": chk,
                        "tls": {"ca_file": self.c("ca"), "server_name": "backend.example.com"}},
               "wrongca": {"servers": [{"address": addr}], "health_check": chk,
                           "tls": {"ca_file": self.c("otherca")}}}
        routes = [{"id": n, "path": "/%s/*{rest}" % n, "upstream": n} for n in ups]
        cfg = gateway_config(upstreams=ups, routes=routes, workers=1)
        gw = self.own_gateway(cfg)
        aport = int(cfg["admin"]["address"].rsplit(":", 1)[1])

        def server(pool):
            try:
                c = http.client.HTTPConnection("127.0.0.1", aport, timeout=TIMEOUT)
                c.request("GET", "/upstreams/%s/health" % pool)
                h = json.loads(c.getresponse().read())
                c.close()
                return h["servers"][0]
            except OSError:  # the admin API opens after the listeners
                return None

        wait_for(lambda: (server("good") or {}).get("last_check", {}).get("status") == 200,
                 what="a TLS check that passes")
        self.assertTrue(server("good")["healthy"])
        wait_for(lambda: server("wrongca") and not server("wrongca")["healthy"],
                 what="a TLS check that fails")
        self.assertEqual(server("wrongca")["last_check"]["status"], 0)
        self.assertEqual(server("wrongca")["reason"], "active_check")
        with Client(gw.port) as c:
            self.assertEqual(c.request("GET", "/good/x", headers=[("Host", "a")]).status, 200)
            self.assertEqual(c.request("GET", "/wrongca/x", headers=[("Host", "a")]).status, 503)


if __name__ == "__main__":
    main()
