"""h2client.py - HTTP/2 clients of the end-to-end tests (python3-h2).

Runs under /usr/bin/python3, where Debian's python3-h2 (4.1.0) and the
hpack package it depends on are installed. Every connection is one TCP
socket to 127.0.0.1, plain (prior knowledge, "h2c") or TLS (ALPN "h2", no
certificate verification: the tests' certificates are self-signed).

- H2Client: the h2 state machine. request(method, path, headers, body)
  returns (status, headers, body, trailers); start() and collect() run
  several streams at once; request bodies follow the peer's flow control
  windows, and the windows of responses are opened as bytes arrive unless
  auto_window is False.
- RawConn: frames by hand (a 9-byte header and a payload, header blocks
  from hpack or literal), for the conformance and attack cases where h2's
  state machine would refuse to send the bad thing, and read_frame() /
  wait() to see exactly what the server answers.
- Client and get(): the shape of harness.Client and harness.get() (they
  return a harness.Response), so that an HTTP/1.1 suite can be run over
  HTTP/2 by swapping the two names (clients_for()).

Every read has a timeout (harness.TIMEOUT unless given); nothing waits
longer than that, and only a failing test waits that long.
"""
import socket
import ssl
import struct
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack

import harness
from harness import TIMEOUT

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types (RFC 9113 section 6)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
FRAME_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING",
               "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"]
# flags
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
# error codes (section 7)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, \
    FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, \
    ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, HTTP_1_1_REQUIRED = range(14)
ERROR_NAMES = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
               "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
               "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
               "HTTP_1_1_REQUIRED"]
# settings (section 6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)


def error_name(code):
    return ERROR_NAMES[code] if 0 <= code < len(ERROR_NAMES) else "0x%x" % code


class Target:
    """Where a test connects: 127.0.0.1:<port>, plain (h2c prior
    knowledge) or <tls>, with <authority> as :authority (and SNI)."""

    def __init__(self, port, tls=False, authority="localhost", host="127.0.0.1"):
        self.port, self.tls, self.authority, self.host = port, tls, authority, host

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    def __repr__(self):
        return "<%s %s:%d>" % ("h2" if self.tls else "h2c", self.host, self.port)


def tls_context(alpn=("h2",)):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(list(alpn))
    return ctx


def connect(target, timeout=TIMEOUT, alpn=("h2",), rcvbuf=None):
    """A connected socket to <target> (TLS handshake done, ALPN checked to
    be h2 when <alpn> asks for it), with <timeout> on every operation.
    <rcvbuf>: SO_RCVBUF set before the connect (a small one makes a client
    that does not read push back on the server sooner)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        s.connect((target.host, target.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.tls:
            s = tls_context(alpn).wrap_socket(s, server_hostname=target.authority)
            got = s.selected_alpn_protocol()
            if "h2" in alpn and got != "h2":
                raise AssertionError("ALPN chose %r, not h2" % got)
    except BaseException:
        s.close()
        raise
    return s


# ---------------------------------------------------------------------------
# frames by hand


def frame(ftype, flags, stream, payload=b"", length=None):
    """One frame's bytes. <length> overrides the length field (to lie)."""
    n = len(payload) if length is None else length
    return struct.pack("!I", n)[1:] + struct.pack("!BBI", ftype, flags, stream) + payload


def settings_frame(pairs=(), ack=False):
    """SETTINGS with [(id, value)] in order (duplicates kept)."""
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack("!HI", k, v)
                                                          for k, v in pairs))


def ping_frame(data=b"h2client", ack=False):
    return frame(PING, ACK if ack else 0, 0, data)


def window_update_frame(stream, increment):
    return frame(WINDOW_UPDATE, 0, stream, struct.pack("!I", increment))


def rst_frame(stream, code):
    return frame(RST_STREAM, 0, stream, struct.pack("!I", code))


def priority_frame(stream, depends_on=0, weight=16, exclusive=False):
    return frame(PRIORITY, 0, stream, struct.pack("!IB", depends_on | (exclusive << 31),
                                                  weight - 1))


def goaway_frame(last_stream, code, debug=b""):
    return frame(GOAWAY, 0, 0, struct.pack("!II", last_stream, code) + debug)


def data_frame(stream, data, end_stream=False, pad=None):
    if pad is None:
        return frame(DATA, END_STREAM if end_stream else 0, stream, data)
    flags = PADDED | (END_STREAM if end_stream else 0)
    return frame(DATA, flags, stream, bytes([pad]) + data + b"\0" * pad)


def hpack_int(value, prefix_bits, first=0):
    """An HPACK integer (RFC 7541 section 5.1) with <first>'s high bits."""
    top = (1 << prefix_bits) - 1
    if value < top:
        return bytes([first | value])
    out = [first | top]
    value -= top
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A literal field line without indexing and with a literal name (RFC
    7541 section 6.2.2), no Huffman: exactly the bytes given, case kept,
    and the dynamic table untouched."""
    name = name.encode("latin-1") if isinstance(name, str) else name
    value = value.encode("latin-1") if isinstance(value, str) else value
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def literal_block(fields):
    return b"".join(literal(k, v) for k, v in fields)


class Frame:
    """One frame as read: type, flags, stream, payload."""

    def __init__(self, ftype, flags, stream, payload):
        self.type, self.flags, self.stream, self.payload = ftype, flags, stream, payload

    @property
    def error_code(self):
        """RST_STREAM's or GOAWAY's error code."""
        if self.type == RST_STREAM:
            return struct.unpack("!I", self.payload[:4])[0]
        if self.type == GOAWAY:
            return struct.unpack("!I", self.payload[4:8])[0]
        raise ValueError("no error code in %r" % self)

    @property
    def last_stream(self):
        return struct.unpack("!I", self.payload[:4])[0] & 0x7FFFFFFF

    def settings(self):
        return [struct.unpack("!HI", self.payload[i:i + 6]) for i in range(0, len(self.payload), 6)]

    def __repr__(self):
        name = FRAME_NAMES[self.type] if self.type < len(FRAME_NAMES) else "0x%x" % self.type
        extra = ""
        if self.type in (RST_STREAM, GOAWAY) and len(self.payload) >= 4:
            extra = " " + error_name(self.error_code)
            if self.type == GOAWAY:
                extra += " last=%d debug=%r" % (self.last_stream, self.payload[8:60])
        return "<%s flags=0x%x stream=%d len=%d%s>" % (name, self.flags, self.stream,
                                                      len(self.payload), extra)


class Timeout(AssertionError):
    pass


class RawConn(harness.SocketOwner):
    """One HTTP/2 connection written frame by frame. The server's SETTINGS
    are acknowledged as they come (auto_ack); nothing else is answered by
    itself. Header blocks of responses are decoded (hpack.Decoder) so the
    dynamic table stays in step."""

    def __init__(self, target, settings=((ENABLE_PUSH, 0),), handshake=True, timeout=TIMEOUT,
                 rcvbuf=None):
        self.target, self.timeout = target, timeout
        self.sock = connect(target, timeout, rcvbuf=rcvbuf)
        self.buf = bytearray()
        self.eof = False
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.dec.max_allowed_table_size = 1 << 16
        self.server_settings = {}
        self.auto_ack = True
        self.acked = 0  # SETTINGS ACKs received (of ours)
        self.seen = []  # every frame read, for failure messages (the first 200)
        self.next_stream = 1
        if handshake:
            self.handshake(settings)

    # sending
    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, ftype, flags, stream, payload=b"", length=None):
        self.send(frame(ftype, flags, stream, payload, length))

    def handshake(self, settings=((ENABLE_PUSH, 0),)):
        """Preface and SETTINGS; waits for the server's SETTINGS (acked) and
        for the ACK of ours."""
        self.send(PREFACE + settings_frame(settings))
        deadline = time.monotonic() + self.timeout
        while not self.server_settings.get("_received") or not self.acked:
            f = self.read_frame(max(0.01, deadline - time.monotonic()))
            if f is None:
                raise AssertionError("closed during the handshake; frames: %r" % self.seen)

    def new_stream(self):
        s = self.next_stream
        self.next_stream += 2
        return s

    def request_fields(self, method="GET", path="/", headers=(), authority=None):
        return [(":method", method), (":scheme", self.target.scheme),
                (":authority", authority or self.target.authority), (":path", path)] + list(headers)

    def block(self, fields):
        """A header block of <fields> by hpack (indexing as it likes)."""
        return self.enc.encode(fields, huffman=False)

    def headers(self, stream, fields=None, block=None, end_stream=True, end_headers=True,
                pad=None, priority=None):
        """Sends HEADERS on <stream>: <block> as given, or hpack of <fields>
        (default: a GET /). <priority> (depends_on, weight) adds the
        PRIORITY flag."""
        if block is None:
            block = self.block(fields if fields is not None else self.request_fields())
        flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
        payload = block
        if priority is not None:
            flags |= PRIORITY_FLAG
            payload = struct.pack("!IB", priority[0], priority[1] - 1) + payload
        if pad is not None:
            flags |= PADDED
            payload = bytes([pad]) + payload + b"\0" * pad
        self.send_frame(HEADERS, flags, stream, payload)

    def get(self, path="/", stream=None, headers=()):
        """Sends a GET of <path>; returns its stream id."""
        stream = stream or self.new_stream()
        self.headers(stream, self.request_fields("GET", path, headers))
        return stream

    # reading
    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout("nothing more within the time; frames so far: %r" % self.seen[-20:])
        self.sock.settimeout(left)
        try:
            d = self.sock.recv(1 << 20)
        except socket.timeout:
            raise Timeout("nothing more within the time; frames so far: %r" % self.seen[-20:])
        except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
            d = b""
        finally:
            self.sock.settimeout(self.timeout)
        if not d:
            self.eof = True
        self.buf += d

    def read_frame(self, timeout=None):
        """The next frame, or None once the server closed (EOF or reset).
        Raises Timeout when nothing whole arrives within <timeout>."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    ftype, flags, stream = struct.unpack("!BBI", self.buf[3:9])
                    f = Frame(ftype, flags, stream & 0x7FFFFFFF, bytes(self.buf[9:9 + n]))
                    del self.buf[:9 + n]
                    self._note(f)
                    return f
            if self.eof:
                return None
            self._fill(deadline)

    def _note(self, f):
        if len(self.seen) < 200:
            self.seen.append(f)
        if f.type == SETTINGS:
            if f.flags & ACK:
                self.acked += 1
            else:
                self.server_settings["_received"] = True
                for k, v in f.settings():
                    self.server_settings[k] = v
                if self.auto_ack:
                    try:
                        self.send(settings_frame(ack=True))
                    except OSError:
                        pass

    def wait(self, pred, timeout=None, what="a frame"):
        """Reads until pred(frame) is true and returns that frame; None when
        the server closed first. Raises Timeout."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None or pred(f):
                return f

    def ping(self, data=b"h2client", timeout=None):
        """True when a PING is answered with its ACK before a close or a
        GOAWAY: the connection is alive and in step."""
        self.send(ping_frame(data))
        f = self.wait(lambda f: (f.type == PING and f.flags & ACK and f.payload == data)
                      or f.type == GOAWAY, timeout)
        return f is not None and f.type == PING

    def read_response(self, stream, timeout=None, window=True):
        """The response on <stream>: (status, headers, body, trailers), the
        header lists as [(str, str)] without pseudo-fields. With <window>
        the DATA read is given back at once (WINDOW_UPDATE on the stream and
        the connection). Raises AssertionError on RST_STREAM, GOAWAY or a
        close."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        heads, body, block = [], [], b""
        ends = False  # the HEADERS of the block being read carried END_STREAM
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None:
                raise AssertionError("closed before the end of stream %d: %r" % (stream,
                                                                                 self.seen[-20:]))
            if f.type == GOAWAY:
                raise AssertionError("GOAWAY before the end of stream %d: %r" % (stream, f))
            if f.stream != stream:
                continue
            if f.type == RST_STREAM:
                raise AssertionError("stream %d reset: %r" % (stream, f))
            if f.type in (HEADERS, CONTINUATION):
                p = f.payload
                if f.type == HEADERS:
                    ends = bool(f.flags & END_STREAM)
                    if f.flags & PADDED:
                        p = p[1:len(p) - p[0]]
                    if f.flags & PRIORITY_FLAG:
                        p = p[5:]
                block += p
                if f.flags & END_HEADERS:
                    heads.append([(_s(k), _s(v)) for k, v in self.dec.decode(block, raw=True)])
                    block = b""
                    if ends:
                        break
            elif f.type == DATA:
                p = f.payload
                if f.flags & PADDED:
                    p = p[1:len(p) - p[0]]
                body.append(p)
                if window and f.payload:
                    self.send(window_update_frame(0, len(f.payload)))
                    if not f.flags & END_STREAM:
                        self.send(window_update_frame(stream, len(f.payload)))
                if f.flags & END_STREAM:
                    break
        finals = [h for h in heads if not dict(h).get(":status", "").startswith("1")]
        first = finals[0]
        status = int(dict(first)[":status"])
        strip = lambda h: [(k, v) for k, v in h if not k.startswith(":")]  # noqa: E731
        return status, strip(first), b"".join(body), strip(finals[1]) if len(finals) > 1 else []


    def wait_closed(self, timeout=None):
        """True when the server closes (EOF or reset) within <timeout>,
        whatever frames come first; False on timeout."""
        try:
            return self.wait(lambda f: False, timeout) is None
        except Timeout:
            return False


# outcomes of RawConn.outcome(): what the server did about a bad frame
class Outcome:
    def __init__(self, kind, code=None, frame=None, seen=()):
        self.kind, self.code, self.frame, self.seen = kind, code, frame, list(seen)

    def __repr__(self):
        return "<%s%s; last frames %r>" % (self.kind, "" if self.code is None else " " +
                                           error_name(self.code), self.seen[-8:])


def outcome(conn, stream=None, timeout=None, ignore=()):
    """What the server does next: Outcome("goaway", code), ("rst", code) on
    <stream> (any stream when None; 0 for none), ("closed") without a
    GOAWAY, or ("timeout"). Frames of other kinds, and those whose type is
    in <ignore>, are skipped."""
    try:
        f = conn.wait(lambda f: f.type == GOAWAY or (f.type == RST_STREAM and stream != 0 and (
            stream is None or f.stream == stream)), timeout)
    except Timeout:
        return Outcome("timeout", seen=conn.seen)
    if f is None:
        return Outcome("closed", seen=conn.seen)
    return Outcome("goaway" if f.type == GOAWAY else "rst", f.error_code, f, conn.seen)


# ---------------------------------------------------------------------------
# the h2 state machine


class StreamError(AssertionError):
    """The server reset the stream (.code) or ended the connection."""

    def __init__(self, msg, code=None):
        super().__init__(msg)
        self.code = code


class Result:
    def __init__(self, stream):
        self.stream = stream
        self.status = None
        self.headers = []  # [(str, str)], pseudo-fields left out
        self.interim = []  # [(status, headers)]
        self.body = b""
        self.trailers = []
        self.reset = None  # the RST_STREAM error code
        self.ended = False
        self.parts = []


def _s(x):
    return x.decode("latin-1") if isinstance(x, bytes) else x


class H2Client(harness.SocketOwner):
    """An HTTP/2 client on h2's state machine over one connection.

    request() is one exchange; start() opens a stream and returns its id,
    collect() reads until the given streams end. <settings>: the local
    SETTINGS to announce ({h2.settings.SettingCodes.X: value}).
    <auto_window> False: response DATA is not acknowledged, the windows
    stay as the bytes consumed them (a client that never reads)."""

    def __init__(self, port=None, tls=False, authority="localhost", host="127.0.0.1",
                 timeout=TIMEOUT, settings=None, auto_window=True, target=None, rcvbuf=None):
        self.target = target or Target(port, tls, authority, host)
        self.timeout = timeout
        self.sock = connect(self.target, timeout, rcvbuf=rcvbuf)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=True, header_encoding=None))
        self.auto_window = auto_window
        self.results = {}
        self.pending = {}  # stream -> [remaining body bytes, end]
        self.goaway = None  # the ConnectionTerminated event
        self.closed = False
        self.events = []
        self.conn.initiate_connection()
        local = {h2.settings.SettingCodes.ENABLE_PUSH: 0}
        local.update(settings or {})
        self.conn.update_settings(local)
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def fields(self, method, path, headers=(), authority=None):
        hs = [(":method", method), (":scheme", self.target.scheme),
              (":authority", authority or self.target.authority), (":path", path)]
        return hs + [(k.lower() if isinstance(k, str) else k, v) for k, v in headers]

    def start(self, method="GET", path="/", headers=(), body=None, authority=None,
              end_stream=None):
        """Opens a stream with the request head (and its body, sent as the
        windows allow while collect() runs). Returns the stream id.
        <end_stream> False keeps the request open after <body>."""
        sid = self.conn.get_next_available_stream_id()
        done = end_stream if end_stream is not None else True
        self.conn.send_headers(sid, self.fields(method, path, headers, authority),
                               end_stream=done and not body)
        self.results[sid] = Result(sid)
        if body:
            self.pending[sid] = [memoryview(body), done]
        self._send_bodies()
        self.flush()
        return sid

    def send_body(self, sid, data, end=True):
        """Queues more of <sid>'s request body."""
        cur = self.pending.get(sid)
        rest = bytes(cur[0]) if cur else b""
        self.pending[sid] = [memoryview(rest + data), end]
        self._send_bodies()
        self.flush()

    def _send_bodies(self):
        for sid in list(self.pending):
            left, end = self.pending[sid]
            while left:
                n = min(len(left), self.conn.local_flow_control_window(sid),
                        self.conn.max_outbound_frame_size)
                if n <= 0:
                    break
                self.conn.send_data(sid, bytes(left[:n]))
                left = left[n:]
            self.pending[sid][0] = left
            if not left:
                del self.pending[sid]
                if end:
                    self.conn.end_stream(sid)

    def pump(self, timeout=None):
        """Reads once (waiting at most <timeout>) and handles the events.
        Returns False once the connection is closed."""
        if self.closed:
            return False
        self.sock.settimeout(self.timeout if timeout is None else max(timeout, 0.001))
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return True
        except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
            data = b""
        finally:
            self.sock.settimeout(self.timeout)
        if not data:
            self.closed = True
            return False
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            raise AssertionError("the server broke HTTP/2: %r" % e)
        for ev in events:
            self._event(ev)
        self._send_bodies()
        try:
            self.flush()
        except OSError:
            self.closed = True
            return False
        return True

    def _event(self, ev):
        if len(self.events) < 1000:
            self.events.append(ev)
        r = self.results.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived):
            hs = [(_s(k), _s(v)) for k, v in ev.headers]
            r.status = int(dict(hs)[":status"])
            r.headers = [(k, v) for k, v in hs if not k.startswith(":")]
        elif isinstance(ev, h2.events.InformationalResponseReceived):
            hs = [(_s(k), _s(v)) for k, v in ev.headers]
            r.interim.append((int(dict(hs)[":status"]),
                              [(k, v) for k, v in hs if not k.startswith(":")]))
        elif isinstance(ev, h2.events.TrailersReceived):
            r.trailers = [(_s(k), _s(v)) for k, v in ev.headers]
        elif isinstance(ev, h2.events.DataReceived):
            r.parts.append(ev.data)
            if self.auto_window and ev.flow_controlled_length:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            r.ended = True
            self.pending.pop(ev.stream_id, None)
        elif isinstance(ev, h2.events.StreamReset):
            if r is not None:
                r.reset = ev.error_code
            self.pending.pop(ev.stream_id, None)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev

    def collect(self, sids=None, timeout=None):
        """Reads until every stream of <sids> (default: all started) has
        ended or been reset; returns {sid: Result}. Raises StreamError when
        the connection ends first, AssertionError on timeout."""
        sids = list(self.results) if sids is None else list(sids)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)

        def done(s):
            r = self.results[s]
            return r.ended or r.reset is not None

        while not all(done(s) for s in sids):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("streams %s not done within the time" % [
                    s for s in sids if not done(s)])
            if not self.pump(left):
                raise StreamError("connection closed before streams %s ended (GOAWAY %s)" % (
                    [s for s in sids if not done(s)], self.goaway and error_name(
                        self.goaway.error_code)), self.goaway and self.goaway.error_code)
            if self.goaway is not None and any(s > self.goaway.last_stream_id and not done(s)
                                               for s in sids):
                raise StreamError("GOAWAY %s (last stream %d) before streams %s ended" % (
                    error_name(self.goaway.error_code), self.goaway.last_stream_id, sids),
                    self.goaway.error_code)
        for s in sids:
            r = self.results[s]
            r.body = b"".join(r.parts)
        return {s: self.results[s] for s in sids}

    def exchange(self, method="GET", path="/", headers=(), body=None, authority=None,
                 timeout=None):
        """One request; its Result (reset streams included)."""
        sid = self.start(method, path, headers, body, authority)
        return self.collect([sid], timeout)[sid]

    def request(self, method="GET", path="/", headers=(), body=None, authority=None,
                timeout=None):
        """One request: (status, headers, body, trailers). Raises
        StreamError when the stream is reset."""
        r = self.exchange(method, path, headers, body, authority, timeout)
        if r.reset is not None:
            raise StreamError("stream %d reset with %s" % (r.stream, error_name(r.reset)), r.reset)
        return r.status, r.headers, r.body, r.trailers

    def ping(self, timeout=None):
        """True when a PING is answered."""
        data = b"alive?\0\0"
        self.conn.ping(data)
        self.flush()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            if any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == data
                   for e in self.events):
                self.events = [e for e in self.events if not isinstance(
                    e, h2.events.PingAckReceived)]
                return True
            if not self.pump(deadline - time.monotonic()):
                return False
        return False

    def wait_closed(self, timeout=None):
        """True when the server closes within <timeout> (frames before that
        are handled: a GOAWAY lands in .goaway)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            if not self.pump(deadline - time.monotonic()):
                return True
        return False


# ---------------------------------------------------------------------------
# the shape of harness.Client / harness.get, over HTTP/2

# Fields HTTP/2 forbids (RFC 9113 section 8.2.2): a test written for
# HTTP/1.1 that sends one of these cannot be run over HTTP/2 as it is.
CONNECTION_SPECIFIC = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                       "upgrade"}


class Client:
    """harness.Client's request() over HTTP/2: one connection, one stream
    per request. Host (from <host> or a Host header) becomes :authority;
    the version argument is accepted and ignored; a connection-specific
    field raises ValueError (it has no HTTP/2 form). A reset stream or a
    GOAWAY raises harness.Closed, as a close does over HTTP/1.1."""

    def __init__(self, port, host="127.0.0.1", timeout=TIMEOUT, tls=False, server_name="localhost"):
        self.port = port
        self.h2 = H2Client(port, tls=tls, authority=server_name, host=host, timeout=timeout)

    def close(self):
        self.h2.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def local_port(self):
        return self.h2.sock.getsockname()[1]

    def request(self, method, target, headers=None, body=None, version=None, host="localhost",
                sink=None):
        hs = []
        authority = host
        for k, v in headers or []:
            if k.lower() == "host":
                authority = v
            elif k.lower() in CONNECTION_SPECIFIC or (k.lower() == "te" and v != "trailers"):
                raise ValueError("%s: %s has no HTTP/2 form" % (k, v))
            else:
                hs.append((k, v))
        if authority is None:
            authority = self.h2.target.authority
        r = self.h2.exchange(method, target, hs, body, authority)
        if r.reset is not None:
            e = harness.Closed("stream %d reset with %s" % (r.stream, error_name(r.reset)))
            e.code = r.reset
            raise e
        resp = harness.Response()
        resp.version = "2.0"
        resp.status = r.status
        resp.reason = ""
        resp.headers = r.headers
        resp.interim = []
        for st, hs in r.interim:
            i = harness.Response()
            i.version, i.status, i.headers, i.complete = "2.0", st, hs, True
            resp.interim.append(i)
        resp.trailers = r.trailers
        resp.body_len = len(r.body)
        if sink:
            sink(r.body)
        else:
            resp.body = r.body
        resp.complete = True
        return resp

    def wait_closed(self, timeout=TIMEOUT):
        return self.h2.wait_closed(timeout)


def get(port, target, headers=None, method="GET", body=None, host="localhost", version=None,
        tls=False):
    """harness.get() over HTTP/2: one request on a fresh connection."""
    with Client(port, tls=tls) as c:
        return c.request(method, target, headers=headers, body=body, host=host)


def clients_for(proto):
    """(Client, get) for <proto>: "h1" harness's own, "h2c" HTTP/2 over
    prior knowledge, "h2" HTTP/2 over TLS (the port a TLS listener's)."""
    if proto == "h1":
        return harness.Client, harness.get
    if proto not in ("h2", "h2c"):
        raise ValueError("protocol %r: h1, h2 or h2c" % proto)
    tls = proto == "h2"

    def client(port, host="127.0.0.1", timeout=TIMEOUT):
        return Client(port, host=host, timeout=timeout, tls=tls)

    def get_(port, target, headers=None, method="GET", body=None, host="localhost",
             version=None):
        return get(port, target, headers, method, body, host, version, tls=tls)

    return client, get_
