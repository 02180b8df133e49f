#!/usr/bin/python3
"""test_h2_floods.py - HTTP/2 attacks: each one ended, bounded, and survived.

h2case's target (SY_H2_TARGET: switchyard, the default, or nginx) in front
of a sy_test_backend, attacked from h2client.RawConn:

  rapid reset (CVE-2023-44487)   streams opened and reset at once, by the
                                 thousand: the connection ends (GOAWAY or
                                 close) before 10,000, and the upstream
                                 connections it holds stay bounded
  MadeYouReset (CVE-2025-8671)   streams the server has to reset itself
                                 (WINDOW_UPDATE of 0 or over 2^31-1 on the
                                 stream, DATA or HEADERS after END_STREAM):
                                 the same bound
  CONTINUATION flood             a header block that never ends: GOAWAY and
  (CVE-2024-28182)               the close before 1 MiB of it went in
  HPACK bomb                     a 4 KiB field in the dynamic table, named
                                 10,000 times by one-octet references: 431,
                                 RST_STREAM or GOAWAY, never the upstream, and
                                 the server's memory bounded
  SETTINGS, PING, PRIORITY,      100,000 frames from a client that reads
  WINDOW_UPDATE, empty DATA      nothing: GOAWAY ENHANCE_YOUR_CALM or a close
  floods                         before they are all answered
  zero-window stall              a large response to a client whose window
                                 never opens (it PINGs to look alive): ended
                                 within seconds by the client timeouts
  idle connection                GOAWAY(NO_ERROR) after timeouts.client_idle_ms
  max_concurrent_streams         the stream over the advertised 100 is refused
                                 (REFUSED_STREAM or PROTOCOL_ERROR)

After each attack the server is alive and serves a fresh client (h2c and
h2). Every loop is bounded in count and in time; the server's RSS is
sampled (harness.RssWatch) where memory is the point. Run it with
/usr/bin/python3 (python3-h2).
"""
import os
import socket
import ssl
import time

from h2case import H2Case, deviation
from h2client import (CANCEL, DATA, ENABLE_PUSH, ENHANCE_YOUR_CALM, GOAWAY, HEADERS,
                      INITIAL_WINDOW_SIZE, MAX_CONCURRENT_STREAMS, NO_ERROR, PING,
                      PROTOCOL_ERROR, REFUSED_STREAM, RST_STREAM, H2Client, RawConn,
                      Timeout, data_frame, error_name, frame, hpack_int, literal, literal_block,
                      ping_frame, priority_frame, rst_frame, settings_frame, window_update_frame)
from harness import TIMEOUT, RssWatch, main

CONTINUATION = 9
END_HEADERS, END_STREAM = 0x4, 0x1
MIB = 1 << 20
# the most a server's RSS may grow during one attack
RSS_BOUND_KIB = int(os.environ.get("SY_H2_RSS_BOUND_KIB", 64 * 1024))


class Attack(H2Case):
    """Shared checks: the end of an attacked connection, a fresh client
    served afterwards, the backend's open connections."""

    HEADER_MS = 5000
    BODY_MS = 3000

    def conn(self, tls=False, **kw):
        c = RawConn(self.h2 if tls else self.h2c, **kw)
        self.addCleanup(c.close)
        return c

    def note(self, what):
        """With SY_H2_VERBOSE=1, what an attack ended with, on stderr."""
        if os.environ.get("SY_H2_VERBOSE") == "1":
            print("\n    %s: %s" % (self.id().rsplit(".", 1)[-1], what), end=" ", flush=True)

    def tearDown(self):
        self.assertServedFresh()

    def assertServedFresh(self):
        self.assertTrue(self.server.alive(), "the server died")
        for t in (self.h2c, self.h2):
            with H2Client(target=t) as c:
                st, _, body, _ = c.request("GET", "/fresh-client")
                self.assertEqual(st, 200, body[:200])

    def drain(self, c, until=None):
        """Reads the frames already there (waits 1 ms at most for each);
        returns the GOAWAY, "closed", or None."""
        while True:
            try:
                f = c.read_frame(0.001)
            except Timeout:
                return None
            if f is None:
                return "closed"
            if f.type == GOAWAY:
                return f
            if until and until(f):
                return None

    def send_or_end(self, c, data, stall=5):
        """Sends <data>; returns False when the server closed (or stopped
        reading for <stall> seconds) instead of taking it."""
        c.sock.settimeout(stall)
        try:
            c.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, socket.timeout, ssl.SSLError):
            return False
        finally:
            c.sock.settimeout(c.timeout)

    def ended(self, c, timeout=None):
        """The GOAWAY the server sends, or "closed"; fails when neither
        comes within <timeout>."""
        try:
            f = c.wait(lambda f: f.type == GOAWAY, timeout)
        except Timeout:
            self.fail("the connection was neither closed nor sent GOAWAY: %r" % c.seen[-10:])
        return "closed" if f is None else f

    def assertEndedAfterGoaway(self, c):
        self.assertTrue(c.wait_closed(), "open after its GOAWAY")

    def open_upstream(self):
        return self.backend.stats()["open"]


class Resets(Attack):
    N = 10000
    BATCH = 100

    def stream_loop(self, c, one):
        """Opens up to N streams, one(stream) giving each one's frames, in
        batches; returns (streams sent, end, most backend connections open)."""
        sent, most, end = 0, 0, None
        deadline = time.monotonic() + 4 * TIMEOUT
        s = 1
        while sent < self.N and time.monotonic() < deadline:
            batch = b"".join(one(s + 2 * i) for i in range(self.BATCH))
            s += 2 * self.BATCH
            if not self.send_or_end(c, batch):
                end = "closed"
                break
            sent += self.BATCH
            end = self.drain(c)
            if end is not None:
                break
            if sent % 1000 == 0:
                most = max(most, self.open_upstream())
        return sent, end, most

    def get_block(self, c, path):
        return literal_block(c.request_fields("GET", path))

    def assertCut(self, c, sent, end, most):
        if end is None:
            end = self.ended(c)
        self.note("%r after %d streams, %d upstream connections at most" % (end, sent, most))
        self.assertLess(sent, self.N, "all %d streams were taken, the connection is still up" %
                        self.N)
        if end != "closed":
            self.assertEndedAfterGoaway(c)
        self.assertLessEqual(most, self.MAX_STREAMS + 16, "upstream connections held")

    def test_rapid_reset(self):
        """CVE-2023-44487: HEADERS then RST_STREAM(CANCEL), stream after
        stream, each to an upstream that takes 2 s to answer."""
        c = self.conn()
        rss = RssWatch(self.server.pid())
        block = self.get_block(c, "/?delay_ms=2000")
        sent, end, most = self.stream_loop(
            c, lambda s: frame(HEADERS, END_STREAM | END_HEADERS, s, block) + rst_frame(s, CANCEL))
        grew = rss.finish()
        self.assertCut(c, sent, end, most)
        self.assertLess(grew, RSS_BOUND_KIB)

    def made_you_reset(self, provoke, end_stream=True):
        c = self.conn()
        block = self.get_block(c, "/?delay_ms=2000")
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        sent, end, most = self.stream_loop(
            c, lambda s: frame(HEADERS, flags, s, block) + provoke(s))
        self.assertCut(c, sent, end, most)

    def test_made_you_reset_window_update_0(self):
        """CVE-2025-8671: a WINDOW_UPDATE of 0 on the stream, which the
        server must reset (PROTOCOL_ERROR)."""
        self.made_you_reset(lambda s: window_update_frame(s, 0))

    def test_made_you_reset_window_overflow(self):
        self.made_you_reset(lambda s: window_update_frame(s, 0x7FFFFFFF))

    def test_made_you_reset_data_after_end_stream(self):
        self.made_you_reset(lambda s: data_frame(s, b"x", end_stream=True))

    def test_made_you_reset_headers_after_end_stream(self):
        self.made_you_reset(lambda s: frame(HEADERS, END_STREAM | END_HEADERS, s,
                                            literal_block([("x-trailer", "a")])))


class HeaderFloods(Attack):
    def test_continuation_flood(self):
        """CVE-2024-28182: HEADERS without END_HEADERS, then CONTINUATION
        frames of fields that never end, 16 KiB each, 5 ms apart, 4 MiB at
        most: a GOAWAY and the close before 1 MiB went in."""
        c = self.conn()
        rss = RssWatch(self.server.pid())
        block = literal_block(c.request_fields("GET", "/?flood=continuation"))
        c.send(frame(HEADERS, END_STREAM, 1, block))
        field = literal("x-flood", "c" * 90)
        chunk = field * (16384 // len(field))
        sent, end = len(block), None
        while sent < 4 * MIB:
            if not self.send_or_end(c, frame(CONTINUATION, 0, 1, chunk)):
                end = "closed"
                break
            sent += len(chunk)
            end = self.drain(c)
            if end is not None:
                break
            time.sleep(0.005)
        if end is None or end == "closed":
            end = self.ended(c)
        grew = rss.finish()
        self.note("%r after %d bytes of header block; RSS +%d KiB" % (end, sent, grew))
        self.assertNotEqual(end, "closed", "closed without a GOAWAY after %d bytes" % sent)
        self.assertLess(sent, MIB + 128 * 1024, "a GOAWAY only after %d bytes" % sent)
        self.assertEndedAfterGoaway(c)
        self.assertLess(grew, RSS_BOUND_KIB)

    def test_hpack_bomb(self):
        """A 4,000-octet field put in the dynamic table, then a request of
        10,000 one-octet references to it: 40 MB of header list. Refused
        (431, RST_STREAM or GOAWAY), not forwarded, memory bounded."""
        c = self.conn()
        rss = RssWatch(self.server.pid())
        base = (b"\x82\x84" + (b"\x86" if not c.target.tls else b"\x87") +
                literal(":authority", c.target.authority))
        name, value = b"x-bomb", b"b" * 4000
        indexed = b"\x40" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, base + indexed))
        st, _, _, _ = c.read_response(1)
        self.assertEqual(st, 200)
        self.backend.reset()
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 3, base + b"\xbe" * 10000))  # index 62
        f = c.wait(lambda f: f.type == GOAWAY or (f.stream == 3 and f.type in (RST_STREAM,
                                                                              HEADERS)))
        grew = rss.finish()
        self.note("%r; RSS +%d KiB" % (f, grew))
        if f is not None and f.type == HEADERS:
            status = dict(c.dec.decode(f.payload))[":status"]
            self.assertEqual(status, "431", "the bomb was answered %s" % status)
        self.assertEqual(self.backend.stats()["requests"], 0, "the bomb reached the upstream")
        self.assertLess(grew, RSS_BOUND_KIB)


class ControlFloods(Attack):
    """100,000 frames from a client whose receive buffer is small and who
    reads nothing, then a PING: ENHANCE_YOUR_CALM or a close, before that
    PING (and every frame before it) is answered."""

    N = 100000

    def flood(self, batch, opening=None):
        """Sends <batch> (1,000 frames) N / 1,000 times, after <opening>."""
        c = self.conn(rcvbuf=4096)
        rss = RssWatch(self.server.pid())
        if opening:
            c.send(opening)
        sent, end = 0, None
        deadline = time.monotonic() + 2 * TIMEOUT
        while sent < self.N and time.monotonic() < deadline:
            if not self.send_or_end(c, batch):
                break
            sent += 1000
        self.send_or_end(c, ping_frame(b"after..!"))
        try:
            f = c.wait(lambda f: f.type == GOAWAY or (f.type == PING and f.payload == b"after..!"),
                       10)
            end = "closed" if f is None else (f if f.type == GOAWAY else None)
        except Timeout:
            end = None
        grew = rss.finish()
        self.note("%r after %d frames; RSS +%d KiB" % (end, sent, grew))
        self.assertIsNotNone(end, "%d frames sent and the connection goes on" % sent)
        if end != "closed":
            self.assertEqual(end.error_code, ENHANCE_YOUR_CALM, end)
            self.assertEndedAfterGoaway(c)
        self.assertLess(grew, RSS_BOUND_KIB)

    def test_ping_flood(self):
        self.flood(ping_frame(b"flood...") * 1000)

    def test_settings_flood(self):
        self.flood(settings_frame([(INITIAL_WINDOW_SIZE, 65535)]) * 1000)

    def test_priority_flood(self):
        """PRIORITY frames for ever new idle streams (CVE-2019-9513's kind)."""
        self.flood(b"".join(priority_frame(1 + 2 * i, 0, 16) for i in range(1000)))

    @deviation("nginx", "has no bound on WINDOW_UPDATE frames")
    def test_window_update_flood(self):
        self.flood(window_update_frame(0, 1) * 1000)

    @deviation("nginx", "has no bound on empty DATA frames")
    def test_empty_data_flood(self):
        """Empty DATA frames without END_STREAM on a request whose body never
        ends (CVE-2019-9518)."""
        fields = [(":method", "POST"), (":scheme", "http"), (":authority", "localhost"),
                  (":path", "/?flood=data")]
        self.flood(data_frame(1, b"") * 1000,
                   opening=frame(HEADERS, END_HEADERS, 1, literal_block(fields)))


class Limits(Attack):
    """Timeouts and the stream limit (short timeouts for this class)."""

    IDLE_MS = 2000
    BODY_MS = 2000
    HEADER_MS = 3000

    def test_zero_window_stall(self):
        """A 64 MiB response to a client whose stream window is 0 and stays
        so; it PINGs every 0.5 s to look alive. The stream or the
        connection ends within the client timeouts, not never."""
        c = self.conn(settings=[(ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 0)])
        s = c.get("/?mode=fixed&size=%d" % (64 * MIB))
        bound = (self.HEADER_MS + self.BODY_MS + self.IDLE_MS) / 1000 + 10
        t0 = time.monotonic()
        end = None
        while time.monotonic() - t0 < bound:
            c.send(ping_frame(b"alive..."))
            try:
                f = c.wait(lambda f: f.type == GOAWAY or (f.type == RST_STREAM and f.stream == s),
                           0.5)
            except Timeout:
                continue
            end = "closed" if f is None else f
            break
        self.note("%r after %.1f s" % (end, time.monotonic() - t0))
        self.assertIsNotNone(end, "the stalled stream still held after %.0f s" % bound)

    def test_idle_goaway(self):
        """timeouts.client_idle_ms: an idle connection gets GOAWAY(NO_ERROR),
        then the close."""
        c = self.conn()
        st, _, _, _ = c.read_response(c.get("/"))
        self.assertEqual(st, 200)
        t0 = time.monotonic()
        f = c.wait(lambda f: f.type == GOAWAY, self.IDLE_MS / 1000 + 10)
        self.note("%r after %.1f s" % (f, time.monotonic() - t0))
        self.assertIsNotNone(f, "closed without GOAWAY")
        self.assertEqual(f.error_code, NO_ERROR, f)
        self.assertGreaterEqual(time.monotonic() - t0, self.IDLE_MS / 1000 * 0.9)
        self.assertEndedAfterGoaway(c)

    @deviation("switchyard", "nghttp2 takes a stream past the acknowledged limit for a connection "
                             "error (GOAWAY PROTOCOL_ERROR), and the streams under way go with it")
    def test_max_concurrent_streams(self):
        """The advertised SETTINGS_MAX_CONCURRENT_STREAMS is 100 and is
        enforced: stream 101 is refused, the 100 are answered."""
        c = self.conn()
        self.assertEqual(c.server_settings.get(MAX_CONCURRENT_STREAMS), self.MAX_STREAMS)
        sids = [c.get("/?delay_ms=1000") for _ in range(self.MAX_STREAMS)]
        extra = c.get("/?delay_ms=1000")
        f = c.wait(lambda f: f.type == GOAWAY or (f.type in (RST_STREAM, HEADERS) and
                                                  f.stream == extra))
        self.note("stream %d of %d: %r" % (len(sids) + 1, len(sids) + 1, f))
        self.assertTrue(f is not None and f.type == RST_STREAM, f)
        self.assertIn(f.error_code, (REFUSED_STREAM, PROTOCOL_ERROR), error_name(f.error_code))
        done = set()
        deadline = time.monotonic() + TIMEOUT
        while len(done) < len(sids) and time.monotonic() < deadline:
            f = c.read_frame(max(0.01, deadline - time.monotonic()))
            self.assertIsNotNone(f, "closed with %d of %d answered" % (len(done), len(sids)))
            self.assertNotEqual(f.type, GOAWAY, f)
            if f.type in (DATA, HEADERS) and f.flags & END_STREAM:
                done.add(f.stream)
            if f.type == RST_STREAM:
                self.fail("stream %d reset: %r" % (f.stream, f))
            if f.type == DATA and f.payload:
                c.send(window_update_frame(0, len(f.payload)))
        self.assertEqual(done, set(sids))


if __name__ == "__main__":
    main()
