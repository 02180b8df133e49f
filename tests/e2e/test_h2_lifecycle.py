#!/usr/bin/python3
"""test_h2_lifecycle.py - an HTTP/2 connection's life in switchyard, from
a frame-level client (h2client.RawConn, python3-h2: run it with
/usr/bin/python3):

- SIGTERM: the double GOAWAY (RFC 9113 6.8), the first with the largest
  stream id and a PING, the last one, at the PING's ACK, with the last
  stream the client started before it; those streams are answered, a later
  one is not, and the process exits once they are done;
- a listener removed by a push gets the same GOAWAYs on its connections;
- a push mid-connection keeps every stream going: a stream answers by the
  config it started under, the next one by the new config;
- a stream for a name of another client-auth group than SNI's gets 421;
- /metrics counts requests by protocol (h1, h2 over TLS, h2c).
"""
import signal
import subprocess
import time

from h2client import (ACK, DATA, END_STREAM, GOAWAY, HEADERS, NO_ERROR, PING, RST_STREAM,
                      RawConn, Target, ping_frame, window_update_frame)
from harness import (GatewayCase, free_port, gateway_config, get, main, metrics_text, self_signed,
                     upstream_cfg, wait_for)

LARGEST = 0x7FFFFFFF


class Lifecycle(GatewayCase):
    def setUp(self):
        self.b = self.own_backend("b")

    def gateway(self, **kw):
        cfg = gateway_config(upstreams={"b": upstream_cfg(self.b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             workers=1, **kw)
        cfg["listeners"][0]["protocols"] = ["h1", "h2c"]
        return cfg

    def conn(self, target):
        c = RawConn(target)
        c.others = []
        self.addCleanup(c.close)
        return c

    def answered(self, c, streams, timeout=10):
        """The final status of each of <streams> as it ends (the client's
        windows given back as DATA comes); the frames other than theirs
        are kept in c.others."""
        status, ended = {}, set()
        deadline = time.monotonic() + timeout
        while len(ended) < len(streams):
            f = c.read_frame(max(0.01, deadline - time.monotonic()))
            self.assertIsNotNone(f, "closed with %s of %s ended: %r" % (ended, streams, c.seen[-8:]))
            if f.stream not in streams:
                c.others.append(f)
                if f.type == PING and not f.flags & ACK:
                    c.send(ping_frame(f.payload, ack=True))
                continue
            self.assertNotEqual(f.type, RST_STREAM, f)
            if f.type == HEADERS:
                for k, v in c.dec.decode(f.payload, raw=True):
                    if k == b":status" and not v.startswith(b"1"):
                        status[f.stream] = int(v)
            if f.type == DATA and f.payload:
                c.send(window_update_frame(0, len(f.payload)))
            if f.type in (HEADERS, DATA) and f.flags & END_STREAM:
                ended.add(f.stream)
        return status

    def goaway(self, c, timeout=10):
        """The next GOAWAY (a server's PING on the way is answered)."""
        def pred(f):
            if f.type == PING and not f.flags & ACK:
                c.send(ping_frame(f.payload, ack=True))
            return f.type == GOAWAY
        f = c.wait(pred, timeout)
        self.assertIsNotNone(f, "closed without GOAWAY: %r" % c.seen[-8:])
        return f

    def test_sigterm_double_goaway(self):
        """The first GOAWAY says the largest id: a stream the client opens
        then is still served; the PING that follows comes back acked and
        the last GOAWAY names that stream; one opened after it is not
        served, and the gateway exits once the two are answered."""
        g = self.own_gateway(self.gateway(timeouts={"drain_ms": 20000}))
        c = self.conn(Target(g.port))
        s1 = c.get("/a?delay_ms=1500")
        time.sleep(0.3)  # s1 is upstream
        g.signal(signal.SIGTERM)
        first = c.wait(lambda f: f.type in (GOAWAY, PING), 10)
        self.assertIsNotNone(first, c.seen[-8:])
        pings = [first] if first.type == PING else []
        if first.type == PING:
            first = c.wait(lambda f: f.type == GOAWAY, 10)
        self.assertEqual((first.last_stream, first.error_code), (LARGEST, NO_ERROR), first)
        s2 = c.get("/b?delay_ms=300")  # before the PING's ACK: still served
        if not pings:
            pings = [c.wait(lambda f: f.type == PING and not f.flags & ACK, 10)]
        self.assertIsNotNone(pings[0], "no PING after the first GOAWAY: %r" % c.seen[-8:])
        time.sleep(0.2)  # s2 reached the gateway before the ACK
        c.send(ping_frame(pings[0].payload, ack=True))
        last = c.wait(lambda f: f.type == GOAWAY, 10)
        self.assertIsNotNone(last, c.seen[-8:])
        self.assertEqual((last.last_stream, last.error_code), (s2, NO_ERROR), last)
        s3 = c.get("/c")  # after the last GOAWAY: not served
        self.assertEqual(self.answered(c, {s1, s2}), {s1: 200, s2: 200})
        self.assertFalse([f for f in c.others if f.stream == s3 and f.type == HEADERS])
        self.assertTrue(c.wait_closed(10), "still open after its streams: %r" % c.seen[-8:])
        self.assertEqual(g.proc.wait(10), 0)
        stats = self.b.stats()
        self.assertEqual(stats["requests"], 2, stats)

    def test_listener_removed(self):
        """A push that removes a listener: its HTTP/2 connections get the
        double GOAWAY, their streams are answered, then they close; the
        other listener goes on."""
        cfg = self.gateway()
        keep = dict(cfg["listeners"][0])
        cfg["listeners"].append({"address": "127.0.0.1:%d" % free_port(),
                                 "protocols": ["h1", "h2c"]})
        g = self.own_gateway(cfg)
        gone = int(cfg["listeners"][1]["address"].rsplit(":", 1)[1])
        c = self.conn(Target(gone))
        s1 = c.get("/a?delay_ms=1500")
        time.sleep(0.3)
        g.reload(dict(cfg, listeners=[keep]))
        f = self.goaway(c)
        self.assertEqual((f.last_stream, f.error_code), (LARGEST, NO_ERROR), f)
        f = self.goaway(c)
        self.assertEqual((f.last_stream, f.error_code), (s1, NO_ERROR), f)
        self.assertEqual(self.answered(c, {s1}), {s1: 200})
        self.assertTrue(c.wait_closed(10), "still open after its stream: %r" % c.seen[-8:])
        self.assertEqual(get(g.port, "/x").status, 200)

    def test_push_keeps_streams(self):
        """A stream answers by the snapshot it started under: the push that
        replaces its route by a direct answer does not touch it, and the
        next stream on the same connection gets the new answer."""
        cfg = self.gateway()
        g = self.own_gateway(cfg)
        c = self.conn(Target(g.port))
        s1 = c.get("/a?delay_ms=1000")
        time.sleep(0.3)
        g.reload(dict(cfg, routes=[{"id": "all", "path": "/*{rest}",
                                    "response": {"status": 299, "body": "new"}}]))
        g.wait_log(r"config reloaded: generation")
        deadline = time.monotonic() + 10
        while True:  # the swap reaches the worker a moment after the log line
            s2 = c.get("/b")
            st = self.answered(c, {s2})[s2]
            if st == 299 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st, 299)
        self.assertEqual(self.answered(c, {s1}), {s1: 200})
        self.assertTrue(c.ping())


class Misdirected(GatewayCase):
    def test_421_for_another_client_auth_group(self):
        """RFC 9110 15.5.20 (nginx's CVE-2025-23419) over HTTP/2: on a
        listener that verifies clients, a stream whose :authority belongs to
        another certificate than the one SNI picked is answered 421, as
        HTTP/1.1's Host is; the connection goes on."""
        b = self.own_backend("b")
        dflt = self_signed(self.tmp, "dflt")
        api = {"cert": self.tmp.file("api.pem"), "key": self.tmp.file("api.key")}
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", api["key"],
                        "-out", api["cert"], "-subj", "/CN=api.example.com", "-addext",
                        "subjectAltName=DNS:api.example.com", "-days", "30"],
                       check=True, capture_output=True, timeout=60)
        cfg = gateway_config(upstreams={"b": upstream_cfg(b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             workers=1)
        cfg["listeners"][0]["tls"] = {
            "certificates": [dflt, dict(api, hosts=["api.example.com"])],
            "client_auth": {"ca_file": dflt["cert"], "mode": "optional"}}
        g = self.own_gateway(cfg)
        c = Lifecycle.conn(self, Target(g.port, tls=True, authority="api.example.com"))
        s1 = c.get("/same")
        s2 = c.new_stream()
        c.headers(s2, c.request_fields("GET", "/other", authority="localhost"))
        self.assertEqual(Lifecycle.answered(self, c, {s1, s2}), {s1: 200, s2: 421})
        self.assertTrue(c.ping())


class Metrics(GatewayCase):
    def test_requests_by_protocol(self):
        """switchyard_requests_by_protocol_total{protocol}: h1, h2 (TLS,
        ALPN) and h2c (prior knowledge) each count their own."""
        b = self.own_backend("b")
        cert = self_signed(self.tmp)
        cfg = gateway_config(upstreams={"b": upstream_cfg(b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             workers=1)
        cfg["listeners"][0]["protocols"] = ["h1", "h2c"]
        tls_port = free_port()
        cfg["listeners"].append({"address": "127.0.0.1:%d" % tls_port,
                                 "tls": {"certificates": [cert]}})
        g = self.own_gateway(cfg)
        self.assertEqual(get(g.port, "/h1").status, 200)
        for target, n in ((Target(g.port), 2), (Target(tls_port, tls=True), 3)):
            c = Lifecycle.conn(self, target)
            streams = {c.get("/%d" % i) for i in range(n)}
            self.assertEqual(set(Lifecycle.answered(self, c, streams).values()), {200})

        def counts():
            text = metrics_text(g)
            got = {}
            for p in ("h1", "h2", "h2c"):
                key = 'switchyard_requests_by_protocol_total{protocol="%s"} ' % p
                line = [ln for ln in text.splitlines() if ln.startswith(key)]
                got[p] = int(line[0].split()[-1]) if line else None
            return got if got == {"h1": 1, "h2": 3, "h2c": 2} else None

        self.assertIsNotNone(wait_for(counts, what="the counts by protocol", timeout=10))


if __name__ == "__main__":
    main()
