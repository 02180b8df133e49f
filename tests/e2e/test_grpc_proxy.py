#!/usr/bin/python3
"""test_grpc_proxy.py - gRPC proxied through Switchyard to HTTP/2 upstreams
(issue 25, sections 1, 2 and 5), between a real gRPC client and real gRPC
servers: Debian's python3-grpcio (1.51) on both ends, generic methods with
bytes (grpc_backend.py, one process per server), no protoc.

The gateway has a plaintext listener that takes HTTP/2 by prior knowledge
("protocols": ["h1", "h2c"]) and a TLS listener (h1 and h2 by ALPN), in
front of h2c pools and one h2 (TLS) pool. Cases, over both client
transports where the transport matters:
- a unary call; a 10,000-message server stream; a client stream; a
  1,000-round bidirectional ping-pong; 4 MiB messages each way;
- metadata and trailing metadata, a -bin field of every byte value among
  them, intact both ways; an upstream's NOT_FOUND with a non-ASCII message
  (percent-encoded on the wire) and its trailing metadata, intact;
- a deadline against a slow handler: DEADLINE_EXCEEDED, and the handler
  sees its call end; a raw stream with grpc-timeout and no deadline of its
  own gets status 4 too, and so does one to a server that never answers
  (only Switchyard's timer, capped by grpc-timeout, can end that one: the
  server sees its stream reset);
- a client's cancel mid-stream reaches the handler;
- a server killed mid-stream: UNAVAILABLE, then calls go to the pool's
  other server;
- 50 calls held open at once reach the server over fewer connections;
- an h2 (TLS, ALPN) pool;
- an HTTP/1.1 client to an h2c pool: with TE: trailers the chunked answer
  ends with grpc-status trailers, without it with none (against an HTTP/2
  server of the test's own that sends trailers whatever the TE: a gRPC
  server refuses a request without "te: trailers").
Switchyard's own gRPC errors (no route, a dead pool) are
test_grpc_errors.py's.

Run it with /usr/bin/python3 (python3-grpcio, python3-h2). Every call has
a deadline; every wait is bounded by harness.TIMEOUT; nothing asserts on
timing.
"""
import base64
import hashlib
import json
import os
import queue
import re
import socket
import struct
import urllib.parse
import uuid

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions

from grpc_backend import ERR_BIN, FAIL_MESSAGE, MAX_MESSAGE, GrpcBackend, stream_message
from h2client import RawConn, Target, data_frame
from harness import TIMEOUT, Client, GatewayCase, free_port, gateway_config, main, wait_for
from test_grpc_errors import Lasting, cert_with_san

OPTS = [("grpc.enable_http_proxy", 0),
        # a failed call must fail: no transparent retry by the client
        ("grpc.enable_retries", 0),
        ("grpc.max_receive_message_length", MAX_MESSAGE),
        ("grpc.max_send_message_length", MAX_MESSAGE)]
BIN = bytes(range(256)) + b"\xff\xfe\x00"  # not UTF-8, NUL, CR, LF: base64 on the wire


def frame(msg):
    """<msg> in gRPC's length-prefixed framing, uncompressed."""
    return b"\0" + struct.pack(">I", len(msg)) + msg


def unb64(text):
    """A -bin field's value as sent unpadded (gRPC's PROTOCOL-HTTP2)."""
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def md(metadata, key):
    """The values of <key> in a call's metadata."""
    return [v for k, v in metadata or () if k == key]


class RawH2Server(Lasting):
    """An HTTP/2 server of the test's own (prior knowledge, python3-h2) for
    what a gRPC server never does. Silent (<answer> False), it reads
    requests and never answers them: only the gateway's timer can end a
    call to it. Answering, it sends each request's body back with
    "x-server: raw" in the head and "grpc-status: 0" in trailers, whatever
    the request's TE (a gRPC server refuses a request without "te:
    trailers"). .requests: the paths received; .resets: the streams the
    gateway reset, or whose connection it closed, before their answer.
    close() stops accepting."""

    def __init__(self, answer):
        self.answer = answer
        self.requests, self.resets = [], []
        super().__init__()

    def serve(self, s):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                    header_encoding="utf-8"))
        conn.initiate_connection()
        s.settimeout(0.2)
        bodies = {}  # stream -> the request body so far, until answered
        try:
            s.sendall(conn.data_to_send())
            while not self.stop:
                try:
                    data = s.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                for ev in conn.receive_data(data):
                    self.event(conn, ev, bodies)
                s.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            self.resets.extend(bodies)  # ended with the connection
            s.close()

    def event(self, conn, ev, bodies):
        if isinstance(ev, h2.events.RequestReceived):
            self.requests.append(dict(ev.headers)[":path"])
            bodies[ev.stream_id] = b""
        elif isinstance(ev, h2.events.DataReceived):
            bodies[ev.stream_id] += ev.data
            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            self.resets.append(ev.stream_id)
            bodies.pop(ev.stream_id, None)
        elif isinstance(ev, h2.events.StreamEnded) and self.answer:
            body = bodies.pop(ev.stream_id)
            conn.send_headers(ev.stream_id, [(":status", "200"), ("content-type",
                                                                  "application/grpc"),
                                             ("x-server", "raw")])
            conn.send_data(ev.stream_id, body)
            conn.send_headers(ev.stream_id, [("grpc-status", "0")], end_stream=True)


class GrpcProxy(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cert = cert_with_san(cls.tmp)
        with open(cls.cert["cert"], "rb") as f:
            cls.ca = f.read()

        def server(name, service, tls=None, unavailable=False):
            b = GrpcBackend(cls.tmp, name, services=(service,), tls=tls, unavailable=unavailable)
            cls._procs.append(b)  # stopped after the gateway
            return b.start()

        cls.a = server("a", "echo.Echo")
        cls.mux = server("mux", "mux.Echo")
        cls.k1, cls.k2 = server("k1", "kill.Echo"), server("k2", "kill.Echo")
        cls.t = server("t", "tls.Echo", tls=cls.cert)
        # one server of the pool answers Flaky UNAVAILABLE
        cls.u1 = server("u1", "retry.Echo", unavailable=True)
        cls.u2 = server("u2", "retry.Echo")
        cls.silent, cls.raw = RawH2Server(answer=False), RawH2Server(answer=True)
        for r in (cls.silent, cls.raw):
            cls.addClassCleanup(r.close)
        cls.access_log = cls.tmp.file("access.log")
        cfg = gateway_config(
            upstreams={
                "echo": {"protocol": "h2c", "servers": [{"address": cls.a.addr}]},
                "mux": {"protocol": "h2c", "servers": [{"address": cls.mux.addr}]},
                "kill": {"protocol": "h2c", "balance": "round_robin",
                         "servers": [{"address": cls.k1.addr}, {"address": cls.k2.addr}]},
                "silent": {"protocol": "h2c", "servers": [{"address": cls.silent.addr}]},
                "raw": {"protocol": "h2c", "servers": [{"address": cls.raw.addr}]},
                "retry": {"protocol": "h2c", "balance": "round_robin",
                          "servers": [{"address": cls.u1.addr}, {"address": cls.u2.addr}]},
                "noretry": {"protocol": "h2c", "balance": "round_robin",
                            "retry_on_grpc_status": [],
                            "servers": [{"address": cls.u1.addr}, {"address": cls.u2.addr}]},
                "tls": {"protocol": "h2", "servers": [{"address": cls.t.addr}],
                        "tls": {"ca_file": cls.cert["cert"], "server_name": "localhost"}},
            },
            routes=[
                # long route timeouts: what ends a slow call is its grpc-timeout
                {"id": "echo", "path": "/echo.Echo/*{m}", "upstream": "echo",
                 "timeout_ms": 120000},
                {"id": "mux", "path": "/mux.Echo/*{m}", "upstream": "mux", "timeout_ms": 120000},
                {"id": "silent", "path": "/silent.Echo/*{m}", "upstream": "silent",
                 "timeout_ms": 120000},
                {"id": "raw", "path": "/raw.Echo/*{m}", "upstream": "raw"},
                {"id": "kill", "path": "/kill.Echo/*{m}", "upstream": "kill"},
                {"id": "tls", "path": "/tls.Echo/*{m}", "upstream": "tls"},
                {"id": "retry", "path": "/retry.Echo/*{m}", "upstream": "retry"},
                {"id": "noretry", "host": "noretry", "path": "/retry.Echo/*{m}",
                 "upstream": "noretry"},
            ],
            workers=2)
        cls.h2c_port, cls.tls_port = free_port(), free_port()
        cfg["listeners"] = [
            {"address": "127.0.0.1:%d" % cls.h2c_port, "protocols": ["h1", "h2c"]},
            {"address": "127.0.0.1:%d" % cls.tls_port, "tls": {"certificates": [cls.cert]}},
        ]
        cfg["access_log"] = cls.access_log
        cls.gw = cls.shared_gateway(cfg)

    # helpers
    def sy_log(self):
        """Switchyard's log and access log, the end of each, for a failure."""
        try:
            with open(self.access_log, errors="replace") as f:
                access = f.read()
        except OSError:
            access = ""
        return "\n--- switchyard log:\n%s\n--- access log:\n%s" % (self.gw.log()[-4000:],
                                                                 access[-3000:])

    def channel(self, transport):
        if transport == "h2c":
            ch = grpc.insecure_channel("127.0.0.1:%d" % self.h2c_port, options=OPTS)
        else:
            creds = grpc.ssl_channel_credentials(root_certificates=self.ca)
            ch = grpc.secure_channel("127.0.0.1:%d" % self.tls_port, creds,
                                     options=OPTS + [("grpc.ssl_target_name_override",
                                                      "localhost")])
        self.addCleanup(ch.close)
        return ch

    def channels(self):
        """Both client transports: h2c (prior knowledge) and TLS with ALPN h2."""
        return [(t, self.channel(t)) for t in ("h2c", "tls")]

    def method(self, ch, kind, path):
        """A multi-callable of <kind> (unary_unary, ...) for <path>, bytes both ways."""
        return getattr(ch, kind)(path, request_serializer=None, response_deserializer=None)

    def wait_event(self, server, what, ident, detail):
        """Waits until <server>'s handler reported <what> <ident> <detail>."""
        try:
            wait_for(lambda: server.events(what, ident, detail),
                     what="%s %s %s on server %s" % (what, ident, detail, server.name))
        except AssertionError as e:
            raise AssertionError("%s; its events: %r%s" % (e, server.events(what, ident),
                                                           self.sy_log())) from None

    # calls of every shape
    def test_unary(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                call = self.method(ch, "unary_unary", "/echo.Echo/Echo")
                for i in range(10):
                    req = b"\x00hello %d \xff" % i
                    resp, c = call.with_call(req, timeout=TIMEOUT)
                    self.assertEqual(resp, req)
                    self.assertEqual(c.code(), grpc.StatusCode.OK)
                    self.assertEqual(md(c.initial_metadata(), "x-server"), ["a"])

    def test_server_stream_10000_messages(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                it = self.method(ch, "unary_stream", "/echo.Echo/Stream")(b"10000 100",
                                                                          timeout=TIMEOUT)
                n = 0
                for m in it:
                    self.assertEqual(m, stream_message(n, 100), "message %d" % n)
                    n += 1
                    self.assertLessEqual(n, 10000)
                self.assertEqual(n, 10000)
                self.assertEqual(it.code(), grpc.StatusCode.OK)

    def test_client_stream(self):
        msgs = [os.urandom(1 + (i * 37) % 3000) for i in range(1000)]
        want = b"%d %s" % (len(msgs), hashlib.sha256(b"".join(msgs)).hexdigest().encode())
        for name, ch in self.channels():
            with self.subTest(transport=name):
                got = self.method(ch, "stream_unary", "/echo.Echo/Collect")(iter(msgs),
                                                                            timeout=TIMEOUT)
                self.assertEqual(got, want)

    def test_bidi_ping_pong_1000_rounds(self):
        # each ping waits for its pong: the stream flows message by message
        # both ways, nothing held back until the other side's end
        for name, ch in self.channels():
            with self.subTest(transport=name):
                q = queue.Queue()

                def requests():
                    while True:
                        m = q.get(timeout=TIMEOUT)
                        if m is None:
                            return
                        yield m

                it = self.method(ch, "stream_stream", "/echo.Echo/PingPong")(requests(),
                                                                             timeout=TIMEOUT * 2)
                try:
                    for i in range(1000):
                        ping = b"ping %d " % i + os.urandom(i % 200)
                        q.put(ping)
                        self.assertEqual(next(it), ping, "round %d" % i)
                finally:
                    q.put(None)
                self.assertEqual(list(it), [])
                self.assertEqual(it.code(), grpc.StatusCode.OK)

    def test_4mib_messages_each_way(self):
        # three calls a transport: a response stalled under flow control
        # showed in about one 4 MiB call in ten
        for name, ch in self.channels():
            call = self.method(ch, "unary_unary", "/echo.Echo/Echo")
            for i in range(3):
                with self.subTest(transport=name, call=i):
                    req = os.urandom(4 << 20)
                    try:
                        resp = call(req, timeout=TIMEOUT)
                    except grpc.RpcError as e:
                        self.fail("%r%s" % (e, self.sy_log()))
                    self.assertEqual(len(resp), len(req))
                    self.assertTrue(resp == req, "4 MiB came back changed")

    # metadata and statuses
    def test_metadata_and_trailing_metadata(self):
        sent = [("x-md", "plain value"), ("x-md-bin", BIN), ("x-md-two-bin", b"\x80\x00")]
        for name, ch in self.channels():
            with self.subTest(transport=name):
                resp, c = self.method(ch, "unary_unary", "/echo.Echo/Meta").with_call(
                    b"", metadata=sent, timeout=TIMEOUT)
                # what the server received
                self.assertEqual(json.loads(resp), {
                    "x-md": b"plain value".hex(), "x-md-bin": BIN.hex(),
                    "x-md-two-bin": "8000"})
                # what came back, in the head and in the trailers
                self.assertEqual(md(c.initial_metadata(), "x-init"), ["plain value"])
                self.assertEqual(md(c.initial_metadata(), "x-init-bin"), [BIN])
                self.assertEqual(md(c.initial_metadata(), "x-init-two-bin"), [b"\x80\x00"])
                self.assertEqual(md(c.trailing_metadata(), "x-trail"), ["plain value"])
                self.assertEqual(md(c.trailing_metadata(), "x-trail-bin"), [BIN])
                self.assertEqual(md(c.trailing_metadata(), "x-trail-two-bin"), [b"\x80\x00"])

    def test_upstream_error_status_intact(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.method(ch, "unary_unary", "/echo.Echo/Fail")(b"", timeout=TIMEOUT)
                e = cm.exception
                self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, self.sy_log())
                self.assertEqual(e.details(), FAIL_MESSAGE)
                self.assertEqual(md(e.trailing_metadata(), "x-err-bin"), [ERR_BIN])
        # on the wire: grpc-message is percent-encoded ASCII, as it came
        with RawConn(Target(self.h2c_port)) as c:
            s = c.new_stream()
            c.headers(s, c.request_fields("POST", "/echo.Echo/Fail", [
                ("content-type", "application/grpc"), ("te", "trailers")]), end_stream=False)
            c.send(data_frame(s, frame(b""), end_stream=True))
            status, headers, body, trailers = c.read_response(s)
        self.assertEqual(status, 200)
        fields = dict(headers + trailers)
        self.assertEqual(fields.get("grpc-status"), "5", (headers, trailers))
        wire = fields["grpc-message"]
        self.assertTrue(wire.isascii() and "%C3%BC" in wire.upper(), wire)
        self.assertEqual(urllib.parse.unquote(wire, errors="strict"), FAIL_MESSAGE)
        self.assertEqual(unb64(fields["x-err-bin"]), ERR_BIN)

    # deadlines and cancels: what the server sees
    def test_deadline_against_slow_handler(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                ident = "deadline-%s-%s" % (name, uuid.uuid4().hex[:8])
                with self.assertRaises(grpc.RpcError) as cm:
                    self.method(ch, "unary_unary", "/echo.Echo/Slow")(ident.encode(), timeout=1.0)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
                # the route's timeout is 120 s: the call's end reached the handler
                self.wait_event(self.a, "slow", ident, "started")
                self.wait_event(self.a, "slow", ident, "cancelled")

    def grpc_timeout_call(self, path, ident):
        """A call of <path> by a client that sets no deadline of its own and
        never resets: only its grpc-timeout (500 ms) can end it, long
        before the route's 120 s. (status, grpc-status, the fields)."""
        with RawConn(Target(self.h2c_port)) as c:
            s = c.new_stream()
            c.headers(s, c.request_fields("POST", path, [
                ("content-type", "application/grpc"), ("te", "trailers"),
                ("grpc-timeout", "500m")]), end_stream=False)
            c.send(data_frame(s, frame(ident.encode()), end_stream=True))
            status, headers, _, trailers = c.read_response(s)
        fields = dict(headers + trailers)
        return status, fields.get("grpc-status"), fields

    def test_grpc_timeout_without_a_client_deadline(self):
        # grpc-timeout reaches the call's handler (the gateway's timer or the
        # header passed on: the server's own deadline)
        ident = "grpc-timeout-" + uuid.uuid4().hex[:8]
        status, code, fields = self.grpc_timeout_call("/echo.Echo/Slow", ident)
        self.assertEqual((status, code), (200, "4"), "%r%s" % (fields, self.sy_log()))
        self.wait_event(self.a, "slow", ident, "cancelled")

    def test_grpc_timeout_caps_the_upstream_wait(self):
        # a server that never answers, whatever its deadline: the gateway's
        # own timer, capped by grpc-timeout, ends the call and the stream
        before, resets = len(self.silent.requests), len(self.silent.resets)
        status, code, fields = self.grpc_timeout_call("/silent.Echo/Call", "silent")
        self.assertEqual((status, code), (200, "4"), "%r%s" % (fields, self.sy_log()))
        self.assertEqual(self.silent.requests[before:], ["/silent.Echo/Call"])
        wait_for(lambda: len(self.silent.resets) > resets, what="the upstream stream reset")

    def test_client_cancel_reaches_upstream(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                ident = "cancel-%s-%s" % (name, uuid.uuid4().hex[:8])
                it = self.method(ch, "unary_stream", "/echo.Echo/Hold")(ident.encode(),
                                                                        timeout=TIMEOUT)
                for i in range(5):
                    self.assertEqual(next(it), stream_message(i, 64))
                self.assertEqual(self.a.events("hold", ident, "cancelled"), [])
                it.cancel()
                self.assertEqual(it.code(), grpc.StatusCode.CANCELLED)
                self.wait_event(self.a, "hold", ident, "cancelled")

    def test_server_killed_mid_stream(self):
        ch = self.channel("h2c")
        ident = "kill-" + uuid.uuid4().hex[:8]
        it = self.method(ch, "unary_stream", "/kill.Echo/Hold")(ident.encode(), timeout=TIMEOUT)
        for i in range(3):
            self.assertEqual(next(it), stream_message(i, 64))
        [served] = md(it.initial_metadata(), "x-server")
        victim, other = (self.k1, self.k2) if served == "k1" else (self.k2, self.k1)
        victim.kill()
        n = 3
        with self.assertRaises(grpc.RpcError, msg="the stream ended without an error") as cm:
            for m in it:
                # what was on its way before the kill
                self.assertEqual(m, stream_message(n, 64))
                n += 1
                self.assertLess(n, 6000)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE,
                         "%r%s" % (cm.exception, self.sy_log()))
        # the next calls go to the server that is left
        call = self.method(ch, "unary_unary", "/kill.Echo/Echo")
        for i in range(4):
            try:
                resp, c = call.with_call(b"after %d" % i, timeout=TIMEOUT)
            except grpc.RpcError as e:
                self.fail("call %d after %s was killed: %r%s" % (i, victim.name, e, self.sy_log()))
            self.assertEqual(resp, b"after %d" % i)
            self.assertEqual(md(c.initial_metadata(), "x-server"), [other.name])

    def test_unavailable_is_retried_on_the_other_server(self):
        # retry_on_grpc_status defaults to ["unavailable"]: a server that
        # says it did not act on a call costs the client nothing
        call = self.method(self.channel("h2c"), "unary_unary", "/retry.Echo/Flaky")
        for i in range(8):
            ident = "r-%s-%d" % (uuid.uuid4().hex[:6], i)
            try:
                resp, c = call.with_call(ident.encode(), timeout=TIMEOUT)
            except grpc.RpcError as e:
                self.fail("call %d: %r%s" % (i, e, self.sy_log()))
            self.assertEqual(resp, ident.encode())
            self.assertEqual(md(c.initial_metadata(), "x-server"), ["u2"])
        self.assertTrue(self.u1.events("flaky", None, "refused"), "u1 was never tried")
        self.gw.wait_log(r"upstream retry server %s route retry request \S+: answered "
                         r"grpc-status 14; retrying on another server" % re.escape(self.u1.addr))

    def test_unavailable_passes_when_not_retried(self):
        # "retry_on_grpc_status": [] turns it off: the status reaches the client
        ch = grpc.insecure_channel("127.0.0.1:%d" % self.h2c_port,
                                   options=OPTS + [("grpc.default_authority", "noretry")])
        self.addCleanup(ch.close)
        call = self.method(ch, "unary_unary", "/retry.Echo/Flaky")
        codes = []
        for i in range(6):
            try:
                call(b"n-%d" % i, timeout=TIMEOUT)
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code().name)
        self.assertIn("UNAVAILABLE", codes)
        self.assertIn("OK", codes)

    def test_multiplexing_fewer_connections_than_calls(self):
        # 50 calls held open together by the server (a barrier) arrive over
        # fewer gateway connections than calls: streams share connections
        n = 50
        group = uuid.uuid4().hex[:8]
        call = self.method(self.channel("h2c"), "unary_unary", "/mux.Echo/Barrier")
        futs = [call.future(b"%s %d" % (group.encode(), n), timeout=TIMEOUT) for _ in range(n)]
        answers = [json.loads(f.result()) for f in futs]
        self.assertEqual({a["arrived"] for a in answers}, {n}, self.sy_log())
        ports = set(p for a in answers for p in a["ports"])
        self.assertLess(len(ports), n, "%d calls came over %d connections" % (n, len(ports)))

    # the h2 (TLS) pool
    def test_h2_tls_upstream_pool(self):
        for name, ch in self.channels():
            with self.subTest(transport=name):
                resp, c = self.method(ch, "unary_unary", "/tls.Echo/Echo").with_call(
                    b"over TLS", timeout=TIMEOUT)
                self.assertEqual((resp, md(c.initial_metadata(), "x-server")), (b"over TLS", ["t"]))
                got = list(self.method(ch, "unary_stream", "/tls.Echo/Stream")(b"1000 300",
                                                                              timeout=TIMEOUT))
                self.assertEqual(got, [stream_message(i, 300) for i in range(1000)])
                resp, c = self.method(ch, "unary_unary", "/tls.Echo/Meta").with_call(
                    b"", metadata=[("x-md-bin", BIN)], timeout=TIMEOUT)
                self.assertEqual(md(c.trailing_metadata(), "x-trail-bin"), [BIN])
                with self.assertRaises(grpc.RpcError) as cm:
                    self.method(ch, "unary_unary", "/tls.Echo/Fail")(b"", timeout=TIMEOUT)
                self.assertEqual((cm.exception.code(), cm.exception.details()),
                                 (grpc.StatusCode.NOT_FOUND, FAIL_MESSAGE))

    # an HTTP/1.1 client to an h2c pool
    def h1_call(self, path, msg, te):
        """An HTTP/1.1 POST of one gRPC message to <path>, with TE: trailers
        when <te>: (response, body, [trailer (name, value)])."""
        hs = [("Content-Type", "application/grpc")]
        if te:
            hs += [("TE", "trailers"), ("Connection", "TE")]  # RFC 9110 10.1.4
        with Client(self.h2c_port) as c:
            c.send(b"POST %s HTTP/1.1\r\nHost: localhost\r\n" % path.encode() +
                   b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in hs) +
                   b"Content-Length: %d\r\n\r\n" % len(frame(msg)) + frame(msg))
            r = c.read_head()
            self.assertEqual(r.status, 200, "%r%s" % (r, self.sy_log()))
            body, trailers = b"", []
            if (r.header("Transfer-Encoding") or "").lower() == "chunked":
                while True:
                    size = int(c.read_until(b"\r\n").split(b";")[0].strip(), 16)
                    if size == 0:
                        break
                    body += c.read_exact(size)
                    self.assertEqual(c.read_exact(2), b"\r\n")
                while True:
                    line = c.read_until(b"\r\n")
                    if line == b"\r\n":
                        break
                    k, v = line[:-2].split(b":", 1)
                    trailers.append((k.decode().strip().lower(), v.decode().strip()))
            elif r.header("Content-Length") is not None:
                body = c.read_exact(int(r.header("Content-Length")))
            return r, body, trailers

    def test_http1_client_gets_trailers_with_te(self):
        r, body, trailers = self.h1_call("/echo.Echo/Echo", b"from h1", te=True)
        self.assertEqual(r.header("Transfer-Encoding"), "chunked", r)
        self.assertEqual(r.header("x-server"), "a")
        self.assertEqual(body, frame(b"from h1"))
        self.assertEqual(dict(trailers).get("grpc-status"), "0", (r, trailers))
        # an error in the trailers, its message as it was on the wire
        r, body, trailers = self.h1_call("/echo.Echo/Fail", b"", te=True)
        t = dict(trailers)
        self.assertEqual(t.get("grpc-status"), "5", (r, trailers))
        self.assertEqual(urllib.parse.unquote(t["grpc-message"], errors="strict"), FAIL_MESSAGE)
        self.assertEqual(unb64(t["x-err-bin"]), ERR_BIN)

    def test_http1_client_without_te_gets_no_trailers(self):
        # the raw server sends its trailers whatever the request's TE (a
        # gRPC server would refuse the request): the gateway keeps them
        for te in (True, False):
            with self.subTest(te=te):
                r, body, trailers = self.h1_call("/raw.Echo/Call", b"from h1", te=te)
                self.assertEqual(r.header("x-server"), "raw", r)
                self.assertEqual(body, frame(b"from h1"))
                self.assertEqual(trailers, [("grpc-status", "0")] if te else [])
                self.assertIsNone(r.header("grpc-status"), r)

if __name__ == "__main__":
    main()
