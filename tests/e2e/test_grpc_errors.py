#!/usr/bin/python3
"""test_grpc_errors.py - Switchyard's own answers to gRPC requests are
gRPC-shaped (issue 25, section 3), seen by a real gRPC stack: Debian's
python3-grpcio (1.51) calling generic methods with bytes, no protoc.

Over h2c (prior knowledge) and over TLS with ALPN h2, a call gets:
- no route: UNIMPLEMENTED, "no route for /PATH";
- a pool whose only server refuses connections: UNAVAILABLE;
- a server that never answers, past the route's timeout_ms:
  DEADLINE_EXCEEDED from us ("upstream request timeout"), not the
  client's own deadline;
- a pool at its max_connections with no queue: RESOURCE_EXHAUSTED.
Each answer is one HEADERS frame with END_STREAM (Trailers-Only, read
frame by frame with h2client.RawConn): 200, application/grpc,
grpc-status and a percent-encoded grpc-message. A request without gRPC's
Content-Type to the same missing route still gets the plain 404, and so
does a gRPC request over HTTP/1.1 (gRPC needs HTTP/2). The
access log has grpc_status beside status (null for the plain 404; an
upstream's grpc-status in its response head counts too), and /metrics
counts switchyard_grpc_responses_total by code.

Run it with /usr/bin/python3 (python3-grpcio, python3-h2). Every call has
a deadline of its own (TIMEOUT), longer than anything the gateway waits.
"""
import json
import re
import socket
import subprocess
import threading

import grpc

from h2client import END_STREAM, HEADERS, H2Client, RawConn, Target
from harness import (TIMEOUT, Client, GatewayCase, HeadServer, free_port, gateway_config, main,
                     metrics_text, wait_for)

# no proxy from the environment: every channel goes straight to 127.0.0.1
OPTS = [("grpc.enable_http_proxy", 0), ("grpc.enable_retries", 0)]
GRPC_CT = [("content-type", "application/grpc"), ("te", "trailers")]


class Lasting(HeadServer):
    """A HeadServer that keeps accepting however long no connection comes
    (HeadServer's accept gives up after TIMEOUT), until close()."""

    def run(self):
        while not self.stop:
            try:
                s, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()


class Silent(Lasting):
    """Reads each request and never answers: the connection stays open."""

    def __init__(self):
        self.heads = 0
        super().__init__()

    def answer(self, s):
        self.heads += 1
        return True


class GrpcStatusServer(Lasting):
    """Answers each request as a gRPC server would over HTTP/1.1: 200 and
    grpc-status 5 with its message, in the head (<in_head>: a Trailers-Only
    response, Content-Length: 0) or in the trailers of an empty chunked
    body."""

    def __init__(self, in_head):
        self.in_head = in_head
        super().__init__()

    def answer(self, s):
        status = b"grpc-status: 5\r\ngrpc-message: not%20here\r\n"
        if self.in_head:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n" + status +
                      b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\nConnection: close\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n0\r\n" + status + b"\r\n")
        return False  # one answer a connection: closed


def cert_with_san(tmp):
    """A P-256 certificate for localhost (a subjectAltName, which gRPC's
    TLS checks), made with the openssl CLI."""
    cert, key = tmp.file("grpc.pem"), tmp.file("grpc.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-days", "30"], check=True, capture_output=True, timeout=60)
    return {"cert": cert, "key": key}


class GrpcErrors(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.silent = Silent()
        cls.busy = Silent()
        cls.grpc_up = GrpcStatusServer(in_head=False)
        cls.grpc_head = GrpcStatusServer(in_head=True)
        for s in (cls.silent, cls.busy, cls.grpc_up, cls.grpc_head):
            cls.addClassCleanup(s.close)
        cert = cert_with_san(cls.tmp)
        with open(cert["cert"], "rb") as f:
            cls.ca = f.read()
        cls.access_log = cls.tmp.file("access.log")
        h2c_port, tls_port = free_port(), free_port()
        cfg = gateway_config(
            upstreams={
                "down": {"servers": [{"address": "127.0.0.1:%d" % free_port()}]},
                "silent": {"servers": [{"address": cls.silent.addr}]},
                "busy": {"servers": [{"address": cls.busy.addr}], "max_connections": 1,
                         "max_pending": 0},
                "grpc": {"servers": [{"address": cls.grpc_up.addr}]},
                "grpc-head": {"servers": [{"address": cls.grpc_head.addr}]},
            },
            routes=[
                {"id": "down", "path": "/down.Svc/*{m}", "upstream": "down"},
                {"id": "silent", "path": "/silent.Svc/*{m}", "upstream": "silent",
                 "timeout_ms": 300},
                {"id": "busy", "path": "/busy.Svc/*{m}", "upstream": "busy",
                 "timeout_ms": int(TIMEOUT * 1000)},
                {"id": "grpc", "path": "/up.Svc/*{m}", "upstream": "grpc"},
                {"id": "grpc-head", "path": "/head.Svc/*{m}", "upstream": "grpc-head"},
                {"id": "post-only", "path": "/only.Svc/Get", "methods": ["GET"],
                 "upstream": "grpc"},
            ],
            workers=1)
        cfg["listeners"] = [
            {"address": "127.0.0.1:%d" % h2c_port, "protocols": ["h1", "h2c"]},
            {"address": "127.0.0.1:%d" % tls_port, "tls": {"certificates": [cert]}},
        ]
        cfg["access_log"] = cls.access_log
        cls.gw = cls.shared_gateway(cfg)
        cls.h2c_port, cls.tls_port = h2c_port, tls_port

    # the two transports
    def channels(self):
        plain = grpc.insecure_channel("127.0.0.1:%d" % self.h2c_port, options=OPTS)
        creds = grpc.ssl_channel_credentials(root_certificates=self.ca)
        tls = grpc.secure_channel("127.0.0.1:%d" % self.tls_port, creds,
                                  options=OPTS + [("grpc.ssl_target_name_override", "localhost")])
        for ch in (plain, tls):
            self.addCleanup(ch.close)
        return (("h2c", plain), ("h2", tls))

    def call(self, channel, method, timeout=TIMEOUT):
        """The RpcError of a unary call of <method> with bytes."""
        stub = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as cm:
            stub(b"\x00hello", timeout=timeout)
        return cm.exception

    def log_lines(self, path_prefix, n):
        """The access log's records for paths starting with <path_prefix>,
        once there are <n> (the log is flushed within 100 ms)."""
        def lines():
            try:
                with open(self.access_log) as f:
                    recs = [json.loads(l) for l in f if l.strip()]
            except OSError:
                return None
            got = [r for r in recs if r["path"].startswith(path_prefix)]
            return got if len(got) >= n else None

        return wait_for(lines, what="%d access-log lines for %s" % (n, path_prefix))

    def grpc_metric(self, code):
        m = re.search(r'^switchyard_grpc_responses_total\{code="%d"\} (\d+)$' % code,
                      metrics_text(self.gw), re.M)
        self.assertIsNotNone(m, "no switchyard_grpc_responses_total for code %d" % code)
        return int(m.group(1))

    # the cases
    def test_no_route_is_unimplemented(self):
        before = self.grpc_metric(12)
        for name, ch in self.channels():
            e = self.call(ch, "/nope.Svc/Call")
            self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED, name)
            self.assertEqual(e.details(), "no route for /nope.Svc/Call", name)
        recs = self.log_lines("/nope.Svc/Call", 2)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 12)] * 2)
        self.assertEqual({r["method"] for r in recs}, {"POST"})
        wait_for(lambda: self.grpc_metric(12) >= before + 2, what="code 12 counted twice")

    def test_method_not_allowed_is_unimplemented(self):
        for name, ch in self.channels():
            e = self.call(ch, "/only.Svc/Get")
            self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED, name)
            self.assertEqual(e.details(), "method not allowed for /only.Svc/Get", name)

    def test_connect_refused_is_unavailable(self):
        before = self.grpc_metric(14)
        for name, ch in self.channels():
            e = self.call(ch, "/down.Svc/Call")
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, name)
            self.assertIn("upstream", e.details(), name)
        recs = self.log_lines("/down.Svc/", 2)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 14)] * 2)
        wait_for(lambda: self.grpc_metric(14) >= before + 2, what="code 14 counted twice")

    def test_upstream_timeout_is_deadline_exceeded(self):
        before = self.grpc_metric(4)
        for name, ch in self.channels():
            e = self.call(ch, "/silent.Svc/Call")
            self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED, name)
            # ours, after the route's 300 ms, not the client's own deadline
            self.assertEqual(e.details(), "upstream request timeout", name)
        recs = self.log_lines("/silent.Svc/", 2)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 4)] * 2)
        self.assertGreaterEqual(self.silent.heads, 2, self.gw.log())
        wait_for(lambda: self.grpc_metric(4) >= before + 2, what="code 4 counted twice")

    def test_full_pool_is_resource_exhausted(self):
        before = self.grpc_metric(8)
        for name, ch in self.channels():
            held = self.busy.heads
            stub = ch.unary_unary("/busy.Svc/Hold", request_serializer=None,
                                  response_deserializer=None)
            first = stub.future(b"hold", timeout=TIMEOUT)
            try:
                # the first call holds the pool's one connection
                wait_for(lambda: self.busy.heads > held, what="the first call upstream")
                e = self.call(ch, "/busy.Svc/Call")
                self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, name)
                self.assertIn("max_connections", e.details(), name)
            finally:
                first.cancel()
            # the cancel (RST_STREAM) gives the slot back
            wait_for(lambda: re.search(r'^switchyard_upstream_in_flight\{upstream="busy",[^}]*\} 0$',
                                       metrics_text(self.gw), re.M),
                     what="the held slot given back")
        recs = [r for r in self.log_lines("/busy.Svc/Call", 2)]
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 8)] * 2)
        wait_for(lambda: self.grpc_metric(8) >= before + 2, what="code 8 counted twice")

    def test_trailers_only_on_the_wire(self):
        # one HEADERS frame that ends the stream: no DATA, no second HEADERS
        for tls in (False, True):
            with RawConn(Target(self.tls_port if tls else self.h2c_port, tls=tls)) as c:
                s = c.new_stream()
                c.headers(s, c.request_fields("POST", "/nope.Svc/Wire", GRPC_CT))
                status, headers, body, trailers = c.read_response(s)
                mine = [f for f in c.seen if f.stream == s]
                self.assertEqual([(f.type, bool(f.flags & END_STREAM)) for f in mine],
                                 [(HEADERS, True)], tls)
                h = dict(headers)
                self.assertEqual(status, 200)
                self.assertEqual(h["content-type"], "application/grpc")
                self.assertEqual(h["grpc-status"], "12")
                self.assertEqual(h["grpc-message"], "no route for /nope.Svc/Wire")
                self.assertIn("x-request-id", h)
                self.assertNotIn("content-length", h)
                self.assertEqual((body, trailers), (b"", []))

    def test_message_is_percent_encoded(self):
        # the path keeps its escape "%25" (normalizing decodes only what is
        # safe to); grpc-message's own encoding escapes that '%' again
        with RawConn(Target(self.h2c_port)) as c:
            s = c.new_stream()
            c.headers(s, c.request_fields("POST", "/nope.Svc/100%25", GRPC_CT))
            _, headers, _, _ = c.read_response(s)
            self.assertEqual(dict(headers)["grpc-message"], "no route for /nope.Svc/100%2525")
        _, ch = self.channels()[0]
        e = self.call(ch, "/nope.Svc/100%25")
        self.assertEqual(e.details(), "no route for /nope.Svc/100%25")

    def test_plain_request_keeps_its_404(self):
        for tls in (False, True):
            c = H2Client(self.tls_port if tls else self.h2c_port, tls=tls)
            try:
                status, headers, body, _ = c.request("POST", "/nope.Svc/Plain",
                                                     [("content-type", "application/json")],
                                                     b"{}")
            finally:
                c.close()
            self.assertEqual(status, 404)
            self.assertNotIn("grpc-status", dict(headers))
            self.assertEqual(body, b"404 Not Found\n")
            # grpc-web is not gRPC over HTTP/2: its own 404
            c = H2Client(self.h2c_port)
            try:
                status, _, _, _ = c.request("POST", "/nope.Svc/Web",
                                            [("content-type", "application/grpc-web+proto")], b"")
            finally:
                c.close()
            self.assertEqual(status, 404)
        recs = self.log_lines("/nope.Svc/Plain", 2)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(404, None)] * 2)

    def test_http1_keeps_its_answers(self):
        # gRPC needs HTTP/2: over HTTP/1.1 our answers stay HTTP's
        with Client(self.h2c_port) as c:
            r = c.request("POST", "/nope.Svc/H1", [("Content-Type", "application/grpc")], b"")
            self.assertEqual(r.status, 404)
            self.assertIsNone(r.header("grpc-status"))
        recs = self.log_lines("/nope.Svc/H1", 1)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(404, None)])

    def test_upstream_grpc_status_is_logged(self):
        # an upstream's status passes as it came; the log and /metrics read
        # it from the trailers, or from the head of a Trailers-Only answer
        before = self.grpc_metric(5)
        for name, ch in self.channels():
            e = self.call(ch, "/up.Svc/Call")
            self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, name)
            self.assertEqual(e.details(), "not here", name)
        recs = self.log_lines("/up.Svc/", 2)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 5)] * 2)
        self.assertEqual({r["route"] for r in recs}, {"grpc"})
        with RawConn(Target(self.h2c_port)) as c:
            s = c.new_stream()
            c.headers(s, c.request_fields("POST", "/head.Svc/Call", GRPC_CT))
            status, headers, _, _ = c.read_response(s)
            self.assertEqual((status, dict(headers)["grpc-status"]), (200, "5"))
        recs = self.log_lines("/head.Svc/", 1)
        self.assertEqual([(r["status"], r["grpc_status"]) for r in recs], [(200, 5)])
        wait_for(lambda: self.grpc_metric(5) >= before + 3, what="code 5 counted three times")
        # a gRPC client reads that head's status, not UNKNOWN: the answer
        # ends with its HEADERS, no empty DATA frame after them
        for name, ch in self.channels():
            e = self.call(ch, "/head.Svc/Call")
            self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, name)
            self.assertEqual(e.details(), "not here", name)


if __name__ == "__main__":
    main()
