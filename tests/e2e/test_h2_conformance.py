#!/usr/bin/python3
"""test_h2_conformance.py - HTTP/2 at the frame level, after h2spec's case list.

Each case sends frames (by hand where h2 would refuse: h2client.RawConn)
and asserts what RFC 9113 (sections 3.4 to 8) or RFC 7541 requires: which
frame comes back, with which error code. The server is h2case's target
(SY_H2_TARGET: switchyard, the default, or nginx: run it against nginx to
see every case pass on a server of today). Cases are named after h2spec's
sections (http2/<section>/<n>).

  connection error  a GOAWAY with the code, then the TCP close (9113 5.4.1:
                    "after sending the GOAWAY frame for an error condition,
                    the endpoint MUST close the TCP connection")
  stream error      RST_STREAM with the code on that stream, or the same as
                    a connection error (5.4.1: an endpoint MAY treat a
                    stream error as a connection error)
  ignored           a PING is still answered, in order

Run it with /usr/bin/python3 (python3-h2). Every wait is bounded by
harness.TIMEOUT; only a failing case waits that long.
"""
import struct

from h2case import H2Case, deviation
from h2client import (ACK, COMPRESSION_ERROR, CONTINUATION, DATA, ENABLE_PUSH, END_HEADERS,
                      END_STREAM, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, GOAWAY, HEADER_TABLE_SIZE,
                      HEADERS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, NO_ERROR, PADDED, PING,
                      PREFACE, PRIORITY, PROTOCOL_ERROR, PUSH_PROMISE, REFUSED_STREAM, RST_STREAM,
                      SETTINGS, STREAM_CLOSED, WINDOW_UPDATE, H2Client, RawConn, Timeout,
                      data_frame, frame, goaway_frame, literal, literal_block, outcome,
                      ping_frame, priority_frame, rst_frame, settings_frame, window_update_frame)
from harness import main

NGINX_LAX = "nginx 1.22 accepts it (no error)"


class ResponseOutcome:
    def __init__(self, kind, code, ended=False, seen=()):
        self.kind, self.code, self.ended, self.seen = kind, code, ended, list(seen)

    def __repr__(self):
        return "<%s %s ended=%s; %r>" % (self.kind, self.code, self.ended, self.seen[-8:])


def outcome_or_response(c, s):
    """The next of: RST_STREAM on <s> or GOAWAY (kind "rst"/"goaway", code),
    a response head on <s> (kind "response", code = status; ended when the
    stream ended with it or with the DATA after it), a close ("closed") or
    nothing ("timeout")."""
    try:
        f = c.wait(lambda f: f.type == GOAWAY or (f.stream == s and f.type in (
            RST_STREAM, HEADERS)))
    except Timeout:
        return ResponseOutcome("timeout", None, seen=c.seen)
    if f is None:
        return ResponseOutcome("closed", None, seen=c.seen)
    if f.type != HEADERS:
        return ResponseOutcome("rst" if f.type == RST_STREAM else "goaway", f.error_code,
                               seen=c.seen)
    block = f.payload
    while not f.flags & END_HEADERS:
        f = c.read_frame()
        if f is None or f.type != CONTINUATION:
            return ResponseOutcome("broken header block", None, seen=c.seen)
        block += f.payload
    status = int(dict((k.decode(), v.decode()) for k, v in c.dec.decode(block, raw=True))[":status"])
    ended = bool(f.flags & END_STREAM) if f.type == HEADERS else False
    while not ended:
        try:
            f = c.wait(lambda f: f.type == GOAWAY or (f.stream == s and f.type in (
                RST_STREAM, DATA, HEADERS)))
        except Timeout:
            break
        if f is None or f.type in (GOAWAY, RST_STREAM):
            break
        ended = bool(f.flags & END_STREAM)
    return ResponseOutcome("response", status, ended, c.seen)


class Base(H2Case):
    def conn(self, tls=False, **kw):
        c = RawConn(self.h2 if tls else self.h2c, **kw)
        self.addCleanup(c.close)
        return c

    def assertConnError(self, c, *codes):
        o = outcome(c, stream=0)
        self.assertEqual(o.kind, "goaway", "a connection error must send GOAWAY: %r" % o)
        self.assertIn(o.code, codes, o)
        self.assertTrue(c.wait_closed(), "still open after the GOAWAY of an error: %r" % c.seen[-5:])

    def assertStreamError(self, c, stream, *codes):
        o = outcome(c, stream)
        self.assertIn(o.kind, ("rst", "goaway"), "no RST_STREAM %d nor GOAWAY: %r" % (stream, o))
        self.assertIn(o.code, codes, o)

    def assertIgnored(self, c):
        self.assertTrue(c.ping(), "the connection did not go on: %r" % c.seen[-5:])

    def assertMalformed(self, c, s, upstream=False):
        """8.1.1: a malformed request is a stream error PROTOCOL_ERROR; "a
        server MAY send an HTTP response prior to closing or resetting the
        stream" (a 4xx here). Unless <upstream> (a body found wrong once its
        head went on), nothing reaches the upstream."""
        status = None
        while True:
            o = outcome_or_response(c, s)
            if o.kind in ("rst", "goaway"):
                self.assertEqual(o.code, PROTOCOL_ERROR, o)
                break
            self.assertEqual(o.kind, "response", o)
            status = o.code
            self.assertTrue(400 <= status < 500, "malformed request answered %d" % status)
            if o.ended:
                break
        if not upstream:
            self.assertEqual(self.backend.stats()["requests"], 0, "the upstream got it")
        return status

    def assertServed(self, c, stream, status=200):
        st, _, body, _ = c.read_response(stream)
        self.assertEqual(st, status, body[:200])
        return body

    def post_open(self, c, path="/", headers=()):
        """A POST whose body is still to come; its stream id."""
        s = c.new_stream()
        c.headers(s, c.request_fields("POST", path, headers), end_stream=False)
        return s


class Preface(Base):
    def test_3_4_1_preface_and_settings(self):
        """3.4: the server's preface is a SETTINGS frame, and ours is acked."""
        c = self.conn()
        self.assertIn(True, [f.type == SETTINGS and not f.flags & ACK for f in c.seen[:1]])
        self.assertTrue(c.acked)
        self.assertServed(c, c.get("/"))

    def test_3_4_1_tls(self):
        c = self.conn(tls=True)
        self.assertServed(c, c.get("/"))

    def assertBadPreface(self, c):
        """3.4: an invalid preface is a connection error PROTOCOL_ERROR, whose
        GOAWAY MAY be omitted (the peer may not speak HTTP/2 at all)."""
        o = outcome(c, stream=0)
        self.assertIn(o.kind, ("goaway", "closed"), o)
        if o.kind == "goaway":
            self.assertEqual(o.code, PROTOCOL_ERROR, o)
            self.assertTrue(c.wait_closed())

    def test_3_4_2_invalid_preface(self):
        c = self.conn(handshake=False)
        c.auto_ack = False
        c.send(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + settings_frame())
        self.assertBadPreface(c)

    @deviation("nginx", "answers the PING that stands in for the preface's SETTINGS")
    def test_3_4_3_first_frame_not_settings(self):
        """3.4: the preface's SETTINGS comes first: a PING in its place makes
        the preface invalid."""
        c = self.conn(handshake=False)
        c.auto_ack = False
        c.send(PREFACE + ping_frame())
        self.assertBadPreface(c)


class FrameFormat(Base):
    def test_4_1_1_unknown_type_ignored(self):
        c = self.conn()
        c.send(frame(0x16, 0, 0, b"\0" * 8))
        self.assertIgnored(c)

    def test_4_1_2_undefined_flag_ignored(self):
        c = self.conn()
        c.send(frame(PING, 0x16, 0, b"\0" * 8))
        f = c.wait(lambda f: f.type == PING)
        self.assertTrue(f and f.flags & ACK and f.payload == b"\0" * 8, f)

    def test_4_1_3_reserved_bit_ignored(self):
        c = self.conn()
        c.send(frame(PING, 0, 0x80000000, b"\0" * 8))
        f = c.wait(lambda f: f.type in (PING, GOAWAY))
        self.assertTrue(f and f.type == PING and f.flags & ACK, f)

    def test_4_2_1_data_of_max_frame_size(self):
        c = self.conn()
        s = self.post_open(c, "/?x=1", [("content-length", "16384")])
        c.send(data_frame(s, b"x" * 16384, end_stream=True))
        body = self.assertServed(c, s)
        self.assertIn(b'"body_bytes": 16384', body)

    def max_frame(self, c):
        """The advertised SETTINGS_MAX_FRAME_SIZE; the case is skipped when it
        is 2^24-1, the most a frame's 24-bit length can say."""
        n = c.server_settings.get(MAX_FRAME_SIZE, 16384)
        if n >= (1 << 24) - 1:
            self.skipTest("the server allows frames of 2^24-1 octets: none can be larger")
        return n

    def test_4_2_2_data_over_max_frame_size(self):
        """4.2: a frame over the SETTINGS_MAX_FRAME_SIZE the server advertised
        is a FRAME_SIZE_ERROR."""
        c = self.conn()
        s = self.post_open(c)
        c.send(data_frame(s, b"x" * (self.max_frame(c) + 1), end_stream=True))
        self.assertStreamError(c, s, FRAME_SIZE_ERROR)

    def test_4_2_3_headers_over_max_frame_size(self):
        """4.2: a frame that can alter the connection state (HEADERS) over the
        maximum is a connection error FRAME_SIZE_ERROR."""
        c = self.conn()
        s = c.new_stream()
        want = self.max_frame(c) + 1
        block = c.block(c.request_fields())
        n = want - len(block) - len(literal("x-pad", ""))
        while len(block + literal("x-pad", "v" * n)) > want:
            n -= 1
        block += literal("x-pad", "v" * n)
        block += b"\x82" * (want - len(block))  # :method GET again, if need be: one octet each
        self.assertEqual(len(block), want)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, s, block))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    def test_4_3_1_invalid_header_block(self):
        """4.3: a header block that cannot be decoded: COMPRESSION_ERROR."""
        c = self.conn()
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x00\x7f\xff\xff\xff\xff\xff"))
        self.assertConnError(c, COMPRESSION_ERROR)

    def test_4_3_2_priority_inside_header_block(self):
        """4.3/6.10: a header block is contiguous: a PRIORITY between HEADERS
        and CONTINUATION is a connection error PROTOCOL_ERROR."""
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:4]) + priority_frame(1, 0, 16) +
               frame(CONTINUATION, END_HEADERS, 1, block[4:]))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_4_3_3_headers_of_another_stream_inside_header_block(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:4]) +
               frame(HEADERS, END_STREAM | END_HEADERS, 3, block))
        self.assertConnError(c, PROTOCOL_ERROR)


class StreamStates(Base):
    # idle: anything but HEADERS and PRIORITY is a connection error PROTOCOL_ERROR
    @deviation("nginx", "ignores DATA on an idle stream")
    def test_5_1_1_idle_data(self):
        c = self.conn()
        c.send(data_frame(1, b"x", end_stream=True))
        self.assertConnError(c, PROTOCOL_ERROR)

    @deviation("nginx", "ignores RST_STREAM on an idle stream")
    def test_5_1_2_idle_rst_stream(self):
        c = self.conn()
        c.send(rst_frame(1, 8))
        self.assertConnError(c, PROTOCOL_ERROR)

    @deviation("nginx", "ignores WINDOW_UPDATE on an idle stream")
    def test_5_1_3_idle_window_update(self):
        c = self.conn()
        c.send(window_update_frame(1, 100))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_5_1_4_idle_continuation(self):
        c = self.conn()
        c.send(frame(CONTINUATION, END_HEADERS, 1, c.block(c.request_fields())))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_5_1_5_idle_priority_accepted(self):
        c = self.conn()
        c.send(priority_frame(5, 0, 16))
        self.assertIgnored(c)
        self.assertServed(c, c.get("/", stream=7))

    # half-closed (remote): the request ended, its response still to come
    def slow(self, c):
        return c.get("/?delay_ms=1500")

    def test_5_1_6_half_closed_data(self):
        """5.1: frames other than WINDOW_UPDATE, PRIORITY and RST_STREAM on a
        half-closed (remote) stream: stream error STREAM_CLOSED."""
        c = self.conn()
        s = self.slow(c)
        c.send(data_frame(s, b"x", end_stream=True))
        self.assertStreamError(c, s, STREAM_CLOSED)

    @deviation("nginx", "a second HEADERS on a half-closed (remote) stream gets GOAWAY PROTOCOL_ERROR, not STREAM_CLOSED")
    def test_5_1_7_half_closed_headers(self):
        c = self.conn()
        s = self.slow(c)
        c.headers(s, c.request_fields())
        self.assertStreamError(c, s, STREAM_CLOSED)

    def test_5_1_8_half_closed_continuation(self):
        """A CONTINUATION without a HEADERS before it: PROTOCOL_ERROR, or
        STREAM_CLOSED for the stream state."""
        c = self.conn()
        s = self.slow(c)
        c.send(frame(CONTINUATION, END_HEADERS, s, c.block([("x-a", "b")])))
        self.assertStreamError(c, s, STREAM_CLOSED, PROTOCOL_ERROR)

    def test_5_1_9_half_closed_window_update_and_priority_allowed(self):
        c = self.conn()
        s = c.get("/?delay_ms=300")
        c.send(window_update_frame(s, 1000) + priority_frame(s, 0, 200))
        self.assertServed(c, s)

    # closed: 9113 5.1 "An endpoint MAY treat receipt of any other type of
    # frame on a closed stream as a connection error of type STREAM_CLOSED":
    # either that, or the frame is discarded and the connection goes on
    def assertClosedStreamFrame(self, c, s):
        c.send(ping_frame(b"closed.."))
        f = c.wait(lambda f: (f.type == PING and f.payload == b"closed..") or f.type == GOAWAY or (
            f.type == RST_STREAM and f.stream == s))
        self.assertIsNotNone(f, "closed without a GOAWAY: %r" % c.seen[-5:])
        if f.type != PING:
            self.assertEqual(f.error_code, STREAM_CLOSED, f)

    def test_5_1_10_closed_by_rst_data(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(rst_frame(s, 8))
        c.send(data_frame(s, b"x", end_stream=True))
        self.assertClosedStreamFrame(c, s)

    def test_5_1_11_closed_by_rst_headers(self):
        """A HEADERS on a closed stream is no new request: STREAM_CLOSED, or
        PROTOCOL_ERROR for a stream id that does not increase (5.1.1)."""
        c = self.conn()
        s = self.post_open(c)
        c.send(rst_frame(s, 8))
        self.backend.reset()
        c.headers(s, c.request_fields())
        self.assertStreamError(c, s, STREAM_CLOSED, PROTOCOL_ERROR)
        self.assertEqual(self.backend.stats()["requests"], 0)

    def test_5_1_12_closed_by_end_stream_data(self):
        c = self.conn()
        s = c.get("/")
        self.assertServed(c, s)
        c.send(data_frame(s, b"x", end_stream=True))
        self.assertClosedStreamFrame(c, s)

    def test_5_1_13_closed_by_end_stream_headers(self):
        c = self.conn()
        s = c.get("/")
        self.assertServed(c, s)
        self.backend.reset()
        c.headers(s, c.request_fields())
        self.assertStreamError(c, s, STREAM_CLOSED, PROTOCOL_ERROR)
        self.assertEqual(self.backend.stats()["requests"], 0)

    def test_5_1_14_closed_priority_allowed(self):
        c = self.conn()
        s = c.get("/")
        self.assertServed(c, s)
        c.send(priority_frame(s, 0, 10))
        self.assertIgnored(c)

    # stream identifiers
    def test_5_1_1_1_even_stream_id(self):
        c = self.conn()
        c.headers(2, c.request_fields())
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_5_1_1_2_decreasing_stream_id(self):
        c = self.conn()
        self.assertServed(c, c.get("/", stream=5))
        c.headers(3, c.request_fields())
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_5_1_2_1_over_concurrent_streams(self):
        """5.1.2: a HEADERS over the advertised SETTINGS_MAX_CONCURRENT_STREAMS:
        stream error PROTOCOL_ERROR or REFUSED_STREAM."""
        c = self.conn()
        limit = c.server_settings.get(3)
        self.assertIsNotNone(limit, "no SETTINGS_MAX_CONCURRENT_STREAMS advertised")
        self.assertLessEqual(limit, 1000)
        sids = [c.get("/?delay_ms=2000") for _ in range(limit)]
        extra = c.get("/?delay_ms=2000")
        self.assertStreamError(c, extra, PROTOCOL_ERROR, REFUSED_STREAM)
        del sids

    # priority
    def test_5_3_1_1_headers_depends_on_itself(self):
        c = self.conn()
        c.headers(1, c.request_fields(), priority=(1, 16))
        self.assertStreamError(c, 1, PROTOCOL_ERROR)

    def test_5_3_1_2_priority_depends_on_itself(self):
        c = self.conn()
        c.send(priority_frame(1, 1, 16))
        self.assertStreamError(c, 1, PROTOCOL_ERROR)

    # error handling
    def test_5_4_1_1_goaway_then_close(self):
        """5.4.1: after the GOAWAY of a connection error, the TCP close."""
        c = self.conn()
        c.send(frame(PING, 0, 1, b"\0" * 8))  # PING on a stream: PROTOCOL_ERROR
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_5_5_1_unknown_extension_frame_ignored(self):
        c = self.conn()
        c.send(frame(0xFF, 0, 0, b"\0" * 8))
        self.assertIgnored(c)

    def test_5_5_2_unknown_extension_frame_inside_header_block(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:4]) + frame(0xFF, 0, 1, b"\0" * 8) +
               frame(CONTINUATION, END_HEADERS, 1, block[4:]))
        self.assertConnError(c, PROTOCOL_ERROR)


class Frames(Base):
    # 6.1 DATA
    def test_6_1_1_data_stream_0(self):
        c = self.conn()
        c.send(data_frame(0, b"x"))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_1_2_data_on_half_closed(self):
        c = self.conn()
        s = c.get("/?delay_ms=1500")
        c.send(data_frame(s, b"x"))
        self.assertStreamError(c, s, STREAM_CLOSED)

    def test_6_1_3_data_invalid_pad_length(self):
        """6.1: a Pad Length not less than the payload: connection error
        PROTOCOL_ERROR."""
        c = self.conn()
        s = self.post_open(c)
        c.send(frame(DATA, PADDED | END_STREAM, s, bytes([6]) + b"hello"))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_1_4_data_padded_accepted(self):
        c = self.conn()
        s = self.post_open(c, "/", [("content-length", "5")])
        c.send(data_frame(s, b"hello", end_stream=True, pad=10))
        self.assertIn(b'"body_bytes": 5', self.assertServed(c, s))

    # 6.2 HEADERS
    def test_6_2_1_continuation_after_end_headers(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(frame(CONTINUATION, END_HEADERS, s, c.block([("x-a", "b")])))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_2_2_headers_stream_0(self):
        c = self.conn()
        c.headers(0, c.request_fields())
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_2_3_headers_invalid_pad_length(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM | END_HEADERS | PADDED, 1,
                     bytes([len(block) + 1]) + block))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_2_4_headers_padded_with_priority_accepted(self):
        c = self.conn()
        c.headers(1, c.request_fields(), pad=7, priority=(0, 100))
        self.assertServed(c, 1)

    # 6.3 PRIORITY
    def test_6_3_1_priority_stream_0(self):
        c = self.conn()
        c.send(frame(PRIORITY, 0, 0, struct.pack("!IB", 1, 15)))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_3_2_priority_bad_length(self):
        """6.3: a PRIORITY of another length than 5: stream FRAME_SIZE_ERROR."""
        c = self.conn()
        s = self.post_open(c)
        c.send(frame(PRIORITY, 0, s, struct.pack("!IBB", 0, 15, 0)))
        self.assertStreamError(c, s, FRAME_SIZE_ERROR)

    # 6.4 RST_STREAM
    def test_6_4_1_rst_stream_0(self):
        c = self.conn()
        c.send(rst_frame(0, 8))
        self.assertConnError(c, PROTOCOL_ERROR)

    @deviation("nginx", "ignores RST_STREAM on an idle stream")
    def test_6_4_2_rst_idle(self):
        c = self.conn()
        c.send(rst_frame(3, 8))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_4_3_rst_bad_length(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(frame(RST_STREAM, 0, s, b"\0\0\0\x08\0"))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    # 6.5 SETTINGS
    def test_6_5_1_settings_ack_with_payload(self):
        c = self.conn()
        c.send(frame(SETTINGS, ACK, 0, b"\0" * 6))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    def test_6_5_2_settings_on_a_stream(self):
        c = self.conn()
        c.send(frame(SETTINGS, 0, 1, struct.pack("!HI", INITIAL_WINDOW_SIZE, 100)))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_5_3_settings_bad_length(self):
        c = self.conn()
        c.send(frame(SETTINGS, 0, 0, b"\0\x03\0\0\0"))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    def test_6_5_2_1_enable_push_2(self):
        c = self.conn()
        c.send(settings_frame([(ENABLE_PUSH, 2)]))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_5_2_2_initial_window_too_large(self):
        c = self.conn()
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 1 << 31)]))
        self.assertConnError(c, FLOW_CONTROL_ERROR)

    def test_6_5_2_3_max_frame_size_too_small(self):
        c = self.conn()
        c.send(settings_frame([(MAX_FRAME_SIZE, 16383)]))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_5_2_4_max_frame_size_too_large(self):
        c = self.conn()
        c.send(settings_frame([(MAX_FRAME_SIZE, 1 << 24)]))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_5_2_5_unknown_setting_ignored(self):
        c = self.conn()
        c.send(settings_frame([(0xFF, 1)]))
        f = c.wait(lambda f: f.type == SETTINGS and f.flags & ACK or f.type == GOAWAY)
        self.assertTrue(f is not None and f.type == SETTINGS, f)
        self.assertServed(c, c.get("/"))

    def test_6_5_3_1_last_value_wins(self):
        """6.5.3: values are processed in order: of two INITIAL_WINDOW_SIZE
        the last one holds (1 byte: the first DATA frame is 1 byte long)."""
        c = self.conn()
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 100), (INITIAL_WINDOW_SIZE, 1)]))
        c.wait(lambda f: f.type == SETTINGS and f.flags & ACK)
        s = c.get("/?mode=fixed&size=100")
        f = c.wait(lambda f: f.type == DATA and f.stream == s or f.type in (GOAWAY, RST_STREAM))
        self.assertTrue(f is not None and f.type == DATA, f)
        self.assertEqual(len(f.payload), 1, f)

    def test_6_5_3_2_settings_acked(self):
        c = self.conn()
        before = c.acked
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 65535)]))
        c.wait(lambda f: f.type == SETTINGS and f.flags & ACK)
        self.assertEqual(c.acked, before + 1)

    # 6.7 PING
    def test_6_7_1_ping_answered(self):
        c = self.conn()
        c.send(ping_frame(b"abcdefgh"))
        f = c.wait(lambda f: f.type == PING)
        self.assertTrue(f and f.flags & ACK and f.payload == b"abcdefgh", f)

    def test_6_7_2_ping_ack_not_answered(self):
        c = self.conn()
        c.send(ping_frame(b"unasked!", ack=True))
        self.assertTrue(c.ping(b"asked..."))
        self.assertFalse([f for f in c.seen if f.type == PING and f.payload == b"unasked!"])

    def test_6_7_3_ping_on_a_stream(self):
        c = self.conn()
        c.send(frame(PING, 0, 1, b"\0" * 8))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_7_4_ping_bad_length(self):
        c = self.conn()
        c.send(frame(PING, 0, 0, b"\0" * 6))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    # 6.8 GOAWAY
    def test_6_8_1_goaway_on_a_stream(self):
        c = self.conn()
        c.send(frame(GOAWAY, 0, 1, struct.pack("!II", 0, 0)))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_8_2_client_goaway_streams_finish(self):
        """6.8: a GOAWAY from the client does not cut the streams it already
        opened: the response comes, then the server may close. Its last
        stream id is the last one the server started (none: 0); nghttp2
        takes an odd one, a client's own, for a PROTOCOL_ERROR."""
        c = self.conn()
        s = c.get("/?delay_ms=300")
        c.send(goaway_frame(0, 0))
        self.assertServed(c, s)

    # 6.9 WINDOW_UPDATE
    def test_6_9_1_window_update_0_connection(self):
        c = self.conn()
        c.send(window_update_frame(0, 0))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_9_2_window_update_0_stream(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(window_update_frame(s, 0))
        self.assertStreamError(c, s, PROTOCOL_ERROR)

    def test_6_9_3_window_update_bad_length(self):
        c = self.conn()
        c.send(frame(WINDOW_UPDATE, 0, 0, b"\0\0\0\x01\0"))
        self.assertConnError(c, FRAME_SIZE_ERROR)

    def test_6_9_1_1_window_of_1(self):
        c = self.conn(settings=[(ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 1)])
        s = c.get("/?mode=fixed&size=100")
        f = c.wait(lambda f: f.type == DATA and f.stream == s or f.type in (GOAWAY, RST_STREAM))
        self.assertTrue(f is not None and f.type == DATA and len(f.payload) == 1, f)

    def test_6_9_1_2_connection_window_overflow(self):
        c = self.conn()
        c.send(window_update_frame(0, 0x7FFFFFFF) + window_update_frame(0, 0x7FFFFFFF))
        self.assertConnError(c, FLOW_CONTROL_ERROR)

    def test_6_9_1_3_stream_window_overflow(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(window_update_frame(s, 0x7FFFFFFF) + window_update_frame(s, 0x7FFFFFFF))
        self.assertStreamError(c, s, FLOW_CONTROL_ERROR)

    def test_6_9_2_1_initial_window_changed_after_headers(self):
        """6.9.2: a new SETTINGS_INITIAL_WINDOW_SIZE applies to the streams
        already open: from 0 to 1, one byte of DATA can go."""
        c = self.conn(settings=[(ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 0)])
        s = c.get("/?mode=fixed&size=100")
        c.wait(lambda f: f.type == HEADERS and f.stream == s)
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 1)]))
        f = c.wait(lambda f: f.type == DATA and f.stream == s or f.type in (GOAWAY, RST_STREAM))
        self.assertTrue(f is not None and f.type == DATA and len(f.payload) == 1, f)

    def test_6_9_2_2_negative_window(self):
        """6.9.2: a SETTINGS that makes a stream's window negative is legal;
        the stream waits until WINDOW_UPDATEs make it positive again."""
        c = self.conn(settings=[(ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 5)])
        s = c.get("/?mode=fixed&size=100")
        f = c.wait(lambda f: f.type == DATA and f.stream == s or f.type in (GOAWAY, RST_STREAM))
        self.assertTrue(f is not None and f.type == DATA and len(f.payload) == 5, f)
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 3)]))  # the window is now -2
        c.send(window_update_frame(s, 3))  # 1
        f = c.wait(lambda f: f.type == DATA and f.stream == s or f.type in (GOAWAY, RST_STREAM))
        self.assertTrue(f is not None and f.type == DATA and len(f.payload) == 1, f)

    def test_6_9_2_3_initial_window_too_large(self):
        c = self.conn()
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 0x80000000)]))
        self.assertConnError(c, FLOW_CONTROL_ERROR)

    @deviation("nginx", "resets the stream (RST_STREAM FLOW_CONTROL_ERROR) instead of a connection error")
    @deviation("switchyard", "nghttp2 resets the stream (RST_STREAM FLOW_CONTROL_ERROR), as nginx")
    def test_6_9_2_4_initial_window_overflows_a_stream(self):
        """6.9.2: a SETTINGS_INITIAL_WINDOW_SIZE change that overflows an open
        stream's window: connection error FLOW_CONTROL_ERROR."""
        c = self.conn()
        s = c.get("/?delay_ms=1500")
        c.send(window_update_frame(s, 0x7FFFFFFF - 65535))  # the window at its maximum
        c.send(settings_frame([(INITIAL_WINDOW_SIZE, 65536)]))
        self.assertConnError(c, FLOW_CONTROL_ERROR)

    # 6.10 CONTINUATION
    def test_6_10_1_continuations_accepted(self):
        c = self.conn()
        block = c.block(c.request_fields("GET", "/", [("x-a%d" % i, "v" * 50) for i in range(10)]))
        third = len(block) // 3
        c.send(frame(HEADERS, END_STREAM, 1, block[:third]) +
               frame(CONTINUATION, 0, 1, block[third:2 * third]) +
               frame(CONTINUATION, END_HEADERS, 1, block[2 * third:]))
        self.assertServed(c, 1)

    def test_6_10_2_other_frame_after_continuation(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:3]) + frame(CONTINUATION, 0, 1, block[3:6]) +
               data_frame(1, b"x"))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_10_3_continuation_stream_0(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:3]) + frame(CONTINUATION, END_HEADERS, 0,
                                                                  block[3:]))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_10_4_continuation_after_end_headers_continuation(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:3]) +
               frame(CONTINUATION, END_HEADERS, 1, block[3:]) +
               frame(CONTINUATION, END_HEADERS, 1, literal("x-a", "b")))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_10_5_continuation_after_data(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(data_frame(s, b"x") + frame(CONTINUATION, END_HEADERS, s, literal("x-a", "b")))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_6_10_6_continuation_of_another_stream(self):
        c = self.conn()
        block = c.block(c.request_fields())
        c.send(frame(HEADERS, END_STREAM, 1, block[:3]) +
               frame(CONTINUATION, END_HEADERS, 3, block[3:]))
        self.assertConnError(c, PROTOCOL_ERROR)


class ErrorCodes(Base):
    def test_7_1_goaway_unknown_code(self):
        """7: an unknown error code triggers nothing special: the PING after
        it is answered (or, the client having sent GOAWAY, the server closes
        without an error of its own)."""
        c = self.conn()
        c.send(goaway_frame(0, 0xFF) + ping_frame(b"unknown!"))
        f = c.wait(lambda f: f.type in (PING, GOAWAY))
        if f is not None and f.type == GOAWAY:
            self.assertEqual(f.error_code, NO_ERROR, f)

    def test_7_2_rst_unknown_code(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(rst_frame(s, 0xFF))
        self.assertIgnored(c)


class Requests(Base):
    """Section 8: HTTP semantics. A malformed request is a stream error
    PROTOCOL_ERROR (8.1.1) and must not reach the upstream."""

    def bad(self, fields):
        c = self.conn()
        s = c.new_stream()
        self.backend.reset()
        c.headers(s, block=literal_block(fields))
        self.assertMalformed(c, s)
        return c

    def req(self, method="GET", path="/"):
        return [(":method", method), (":scheme", self.h2c.scheme), (":authority", "localhost"),
                (":path", path)]

    def test_8_1_1_trailers_without_end_stream(self):
        """8.1: a second HEADERS (trailers) without END_STREAM: PROTOCOL_ERROR."""
        c = self.conn()
        s = self.post_open(c)
        c.send(data_frame(s, b"x"))
        c.headers(s, [("x-trailer", "a")], end_stream=False)
        self.assertStreamError(c, s, PROTOCOL_ERROR)

    @deviation("nginx", "has no request trailers over HTTP/2: GOAWAY PROTOCOL_ERROR")
    def test_8_1_2_trailers_accepted(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(data_frame(s, b"hello"))
        c.headers(s, [("x-trailer", "a")], end_stream=True)
        self.assertIn(b'"body_bytes": 5', self.assertServed(c, s))

    def test_8_2_1_uppercase_name(self):
        self.bad(self.req() + [("X-Upper", "a")])

    def test_8_2_2_name_with_space(self):
        self.bad(self.req() + [("x a", "b")])

    def test_8_2_3_name_with_colon(self):
        self.bad(self.req() + [("x:a", "b")])

    def test_8_2_4_empty_name(self):
        self.bad(self.req() + [("", "b")])

    def test_8_2_5_value_with_crlf(self):
        """8.2.1: CR, LF or NUL in a value make the request malformed (and
        must never become an injected HTTP/1.1 line upstream)."""
        self.bad(self.req() + [("x-a", "b\r\nx-injected: 1")])

    def test_8_2_6_value_with_nul(self):
        self.bad(self.req() + [("x-a", "b\0c")])

    @deviation("nginx", "forwards a value with leading whitespace")
    def test_8_2_7_value_with_leading_space(self):
        """8.2.1: a value with leading or trailing whitespace is malformed."""
        self.bad(self.req() + [("x-a", " b")])

    @deviation("nginx", "drops the field and forwards the request")
    def test_8_2_2_1_connection_header(self):
        self.bad(self.req() + [("connection", "keep-alive")])

    @deviation("nginx", "forwards a GET with Transfer-Encoding: chunked")
    def test_8_2_2_2_transfer_encoding(self):
        self.bad(self.req() + [("transfer-encoding", "chunked")])

    @deviation("nginx", "drops the fields and forwards the request")
    def test_8_2_2_3_keep_alive_and_upgrade(self):
        self.bad(self.req() + [("upgrade", "websocket")])
        self.bad(self.req() + [("keep-alive", "timeout=5")])
        self.bad(self.req() + [("proxy-connection", "keep-alive")])

    @deviation("nginx", "forwards a request with TE: gzip")
    def test_8_2_2_4_te_other_than_trailers(self):
        self.bad(self.req() + [("te", "gzip")])

    def test_8_2_2_5_te_trailers_accepted(self):
        c = self.conn()
        s = c.new_stream()
        c.headers(s, block=literal_block(self.req() + [("te", "trailers")]))
        self.assertServed(c, s)

    def test_8_3_1_unknown_pseudo(self):
        self.bad(self.req() + [(":foo", "bar")])

    def test_8_3_2_response_pseudo_in_request(self):
        self.bad(self.req() + [(":status", "200")])

    def test_8_3_3_pseudo_in_trailers(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(data_frame(s, b"x"))
        c.headers(s, block=literal_block([(":method", "GET")]), end_stream=True)
        self.assertStreamError(c, s, PROTOCOL_ERROR)

    @deviation("nginx", "forwards a request with a pseudo-header after a regular field")
    def test_8_3_4_pseudo_after_regular(self):
        r = self.req()
        self.bad(r[:3] + [("x-a", "b")] + r[3:])

    def test_8_3_1_1_empty_path(self):
        self.bad(self.req(path=""))

    def test_8_3_1_2_missing_method(self):
        self.bad(self.req()[1:])

    def test_8_3_1_3_missing_scheme(self):
        r = self.req()
        self.bad(r[:1] + r[2:])

    def test_8_3_1_4_missing_path(self):
        self.bad(self.req()[:3])

    def test_8_3_1_5_duplicate_method(self):
        self.bad(self.req() + [(":method", "GET")])

    def test_8_3_1_6_duplicate_scheme(self):
        r = self.req()
        self.bad(r[:2] + [(":scheme", r[1][1])] + r[2:])

    def test_8_3_1_7_duplicate_path(self):
        self.bad(self.req() + [(":path", "/")])

    def test_8_3_1_8_duplicate_authority(self):
        r = self.req()
        self.bad(r[:3] + [(":authority", "other")] + r[3:])

    def test_8_1_1_1_content_length_over_data(self):
        """8.1.1: a content-length that the DATA frames do not add up to is
        malformed: stream error PROTOCOL_ERROR."""
        c = self.conn()
        self.backend.reset()
        s = self.post_open(c, "/", [("content-length", "10")])
        c.send(data_frame(s, b"hello", end_stream=True))
        self.assertMalformed(c, s, upstream=True)

    def test_8_1_1_2_content_length_under_data(self):
        c = self.conn()
        self.backend.reset()
        s = self.post_open(c, "/", [("content-length", "3")])
        c.send(data_frame(s, b"he") + data_frame(s, b"llo", end_stream=True))
        self.assertMalformed(c, s, upstream=True)

    def test_8_1_1_3_content_length_without_data(self):
        c = self.conn()
        s = c.new_stream()
        self.backend.reset()
        c.headers(s, c.request_fields("POST", "/", [("content-length", "5")]), end_stream=True)
        self.assertMalformed(c, s)

    def test_8_4_1_push_promise_from_client(self):
        c = self.conn()
        s = self.post_open(c)
        c.send(frame(PUSH_PROMISE, END_HEADERS, s, struct.pack("!I", 2) +
                     c.block(c.request_fields())))
        self.assertConnError(c, PROTOCOL_ERROR)

    def test_8_3_1_9_cookie_crumbs_joined(self):
        """8.2.3: cookie crumbs reach an HTTP/1.1 upstream as one field,
        joined with "; "."""
        c = self.conn()
        s = c.new_stream()
        c.headers(s, block=literal_block(self.req() + [("cookie", "a=1"),
                                                                  ("cookie", "b=2")]))
        body = self.assertServed(c, s)
        self.assertIn(b'["Cookie", "a=1; b=2"]'.lower(), body.lower())


class Hpack(Base):
    """RFC 7541: a header block that cannot be decoded is a connection
    error COMPRESSION_ERROR (RFC 9113 4.3)."""

    def block_error(self, block):
        c = self.conn()
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
        self.assertConnError(c, COMPRESSION_ERROR)

    def test_2_3_3_1_index_out_of_range(self):
        self.block_error(b"\x82\x86\x84\xff\x3a")  # indexed 127 + 58 = 185, empty table

    def test_2_3_3_2_name_index_out_of_range(self):
        self.block_error(b"\x82\x86\x84\x7f\x3a\x01a")  # literal, name index 63 + 58 = 121

    @deviation("nginx", "accepts a table size update after a field")
    def test_4_2_1_table_size_update_after_a_field(self):
        """4.2: a dynamic table size update must come first in a block."""
        self.block_error(b"\x82\x86\x84\x20")

    def test_5_2_1_huffman_eos(self):
        self.block_error(b"\x82\x86\x84\x41\x84\xff\xff\xff\xff")  # :authority, value = EOS

    @deviation("nginx", "accepts Huffman padding longer than 7 bits")
    def test_5_2_2_huffman_padding_too_long(self):
        self.block_error(b"\x82\x86\x84\x41\x82\x1f\xff")  # "a" + 11 bits of padding

    def test_5_2_3_huffman_padding_not_eos(self):
        self.block_error(b"\x82\x86\x84\x41\x81\x18")  # "a" (00011) + padding 000

    def test_6_1_1_index_0(self):
        self.block_error(b"\x80\x82\x86\x84")

    def test_6_3_1_table_size_over_the_setting(self):
        """6.3: an update over SETTINGS_HEADER_TABLE_SIZE (4096 by default)."""
        self.block_error(b"\x3f\xe2\x1f\x82\x86\x84")  # 31 + 98 + 31 * 128 = 4097

    def test_dynamic_table_used(self):
        """Fields indexed in one request and referred to in the next."""
        c = self.conn()
        for _ in range(3):
            s = c.new_stream()
            c.headers(s, c.request_fields("GET", "/", [("x-indexed", "v" * 100)]))
            self.assertIn(b'"x-indexed"', self.assertServed(c, s).lower())

    def test_table_size_0_from_client(self):
        """A client that allows no dynamic table gets blocks without one."""
        c = self.conn(settings=[(ENABLE_PUSH, 0), (HEADER_TABLE_SIZE, 0)])
        for _ in range(2):
            self.assertServed(c, c.get("/"))


class Exchanges(Base):
    """Requests that must work, over h2 and h2c, through the h2 client."""

    def test_concurrent_streams_both_transports(self):
        for t in (self.h2c, self.h2):
            with H2Client(target=t) as c:
                sids = [c.start("GET", "/?mode=fixed&size=%d" % (1000 * i)) for i in range(1, 21)]
                res = c.collect(sids)
                for i, s in enumerate(sids, 1):
                    self.assertEqual((res[s].status, len(res[s].body)), (200, 1000 * i))

    def test_post_larger_than_the_windows(self):
        body = b"z" * 300000
        with H2Client(target=self.h2c) as c:
            st, _, rbody, _ = c.request("POST", "/", body=body)
        self.assertEqual(st, 200)
        self.assertIn(b'"body_bytes": 300000', rbody)

    def test_head(self):
        with H2Client(target=self.h2) as c:
            st, hs, body, _ = c.request("HEAD", "/?mode=fixed&size=1000")
        self.assertEqual((st, body), (200, b""))
        self.assertEqual(dict(hs).get("content-length"), "1000")


if __name__ == "__main__":
    main()
