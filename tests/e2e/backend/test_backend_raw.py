#!/usr/bin/env python3
"""test_backend_raw.py - raw-socket checks of sy_test_backend (stdlib only).

Usage: test_backend_raw.py PORT

Covers what curl cannot show: pipelining order, HTTP/1.0, interim responses,
Expect: 100-continue, cut-off/garbage/reset/never, malformed requests, the
WebSocket handshake and echo. Every socket has a timeout; exits 1 on failure.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import time

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/"
FAILS = []


def body_of(n, start=0):
    """The first n bytes of a generated body (pattern repeated)."""
    reps = (start + n) // len(PATTERN) + 1
    return (PATTERN * reps)[start:start + n]


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:600]))
    if not cond:
        FAILS.append(name)


def conn(timeout=5.0):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_all(s, quiet=0.5):
    """Read until EOF, RST or <quiet> s of silence; returns (bytes, how)."""
    s.settimeout(quiet)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, "eof"
            out += d
    except socket.timeout:
        return out, "timeout"
    except ConnectionResetError:
        return out, "rst"


class Reader:
    """Minimal HTTP/1.1 response reader over a socket."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("eof")
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self):
        status = int(self.line().split(b" ")[1])
        hdrs = []
        while True:
            ln = self.line()
            if not ln:
                return status, hdrs
            k, v = ln.split(b":", 1)
            hdrs.append((k.decode().lower(), v.strip().decode()))

    def response(self, head_only=False):
        """Returns (status, headers dict, body, interim statuses)."""
        interim = []
        while True:
            status, hdrs = self.head()
            if 100 <= status < 200:
                interim.append(status)
                continue
            break
        h = dict(hdrs)
        if head_only or status in (204, 304):
            return status, h, b"", interim
        if "content-length" in h:
            return status, h, self.take(int(h["content-length"])), interim
        if h.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                n = int(self.line().split(b";")[0], 16)
                if n == 0:
                    while self.line():
                        pass
                    return status, h, body, interim
                body += self.take(n)
                self.take(2)
        while True:  # delimited by close
            try:
                self.fill()
            except EOFError:
                body, self.buf = self.buf, b""
                return status, h, body, interim


def test_pipelining():
    s = conn()
    reqs = (b"GET /1?mode=fixed&size=70000 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /2?mode=chunked&size=5000&chunk=777 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"POST /3 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
            b"HEAD /4?mode=fixed&size=1234 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /5?mode=status&status=204 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /6 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
            b"GET /7-never-answered HTTP/1.1\r\nHost: t\r\n\r\n")
    s.sendall(reqs)
    r = Reader(s)
    st, h, b, _ = r.response()
    check("pipeline 1 fixed", st == 200 and b == body_of(70000), (st, len(b)))
    st, h, b, _ = r.response()
    check("pipeline 2 chunked", h.get("transfer-encoding") == "chunked" and b == body_of(5000))
    st, h, b, _ = r.response()
    j = json.loads(b)
    check("pipeline 3 echo", j["path"] == "/3" and j["body_bytes"] == 3 and j["conn_requests"] == 3
          and j["body_sha256"] == hashlib.sha256(b"abc").hexdigest(), j)
    st, h, b, _ = r.response(head_only=True)
    check("pipeline 4 HEAD", h.get("content-length") == "1234" and b == b"", h)
    st, h, b, _ = r.response()
    check("pipeline 5 204", st == 204 and "content-length" not in h, (st, h))
    st, h, b, _ = r.response()
    j = json.loads(b)
    check("pipeline 6 close", j["path"] == "/6" and h.get("connection") == "close", h)
    rest, how = read_all(s)
    check("pipeline stops after Connection: close", rest == b"" and how == "eof", (rest, how))
    s.close()


def test_http10():
    s = conn()
    s.sendall(b"GET /a?mode=chunked&size=10 HTTP/1.0\r\n\r\n")
    data, how = read_all(s)
    check("1.0 chunked becomes close-delimited",
          how == "eof" and b"Transfer-Encoding" not in data and data.endswith(b"\r\n\r\n" + body_of(10)),
          data)
    s.close()
    s = conn()
    s.sendall(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n")
    r = Reader(s)
    st, h, b, _ = r.response()
    j = json.loads(b)
    check("1.0 keep-alive", h.get("connection") == "keep-alive" and j["version"] == "1.0", h)
    st, h, b, _ = r.response()
    check("1.0 second request closes", json.loads(b)["conn_requests"] == 2
          and h.get("connection") == "close", h)
    s.close()


def test_interim():
    s = conn()
    s.sendall(b"GET /?mode=1xx HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    st, hdrs = r.head()
    check("103 Early Hints first", st == 103 and any(k == "link" for k, _ in hdrs), (st, hdrs))
    st, h, b, _ = r.response()
    check("then the echo", st == 200 and json.loads(b)["path"] == "/", st)
    s.close()
    s = conn()
    s.sendall(b"PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
    r = Reader(s)
    st, _ = r.head()
    check("100 Continue before the body", st == 100, st)
    s.sendall(b"data")
    st, h, b, _ = r.response()
    check("then the echo of the body", json.loads(b)["body_bytes"] == 4, b)
    s.close()


def test_endings():
    s = conn()
    s.sendall(b"GET /?mode=cutoff&size=1000&after=100 HTTP/1.1\r\nHost: t\r\n\r\n")
    data, how = read_all(s)
    head, _, body = data.partition(b"\r\n\r\n")
    check("cutoff", b"Content-Length: 1000" in head and body == body_of(100) and how == "eof",
          (head, len(body), how))
    s.close()
    s = conn()
    s.sendall(b"GET /?mode=garbage HTTP/1.1\r\nHost: t\r\n\r\n")
    data, how = read_all(s)
    check("garbage", data == b"THIS IS NOT HTTP\r\n\r\n" and how == "eof", (data, how))
    s.close()
    s = conn()
    s.sendall(b"GET /?mode=reset HTTP/1.1\r\nHost: t\r\n\r\n")
    data, how = read_all(s)
    check("reset", data == b"" and how == "rst", (data, how))
    s.close()
    s = conn()
    s.sendall(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\nGET /?mode=reset HTTP/1.1\r\nHost: t\r\n\r\n")
    data, how = read_all(s)
    check("reset after a pipelined answer", b'"path": "/first"' in data and how == "rst",
          (data[-80:], how))
    s.close()
    s = conn()
    s.sendall(b"GET /?mode=never HTTP/1.1\r\nHost: t\r\n\r\n")
    data, how = read_all(s, quiet=0.4)
    check("never", data == b"" and how == "timeout", (data, how))
    s.close()
    s = conn()
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
    data, how = read_all(s)
    check("malformed -> 400 and close", data.startswith(b"HTTP/1.1 400 ") and how == "eof", data)
    s.close()
    s = conn()
    s.sendall(b"GET /?mode=raw&data=HTTP/1.1%20299%20Odd%0D%0AContent-Length:%202%0D%0A%0D%0Aok HTTP/1.1\r\n\r\n")
    data, how = read_all(s)
    check("raw", data == b"HTTP/1.1 299 Odd\r\nContent-Length: 2\r\n\r\nok" and how == "eof", data)
    s.close()
    t = time.time()
    s = conn()
    s.sendall(b"GET /?mode=chunked&size=3&chunk=1&chunk_delay_ms=150 HTTP/1.1\r\nHost: t\r\n\r\n")
    st, h, b, _ = Reader(s).response()
    took = time.time() - t
    check("chunk_delay_ms", b == body_of(3) and took >= 0.45, took)  # 2 gaps + before last chunk
    s.close()


def ws_frame(op, payload, fin=True, mask=True):
    n = len(payload)
    b0 = (0x80 if fin else 0) | op
    mbit = 0x80 if mask else 0
    if n < 126:
        h = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        h = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return h + payload
    key = os.urandom(4)
    stream = (key * (n // 4 + 1))[:n]
    return h + key + (int.from_bytes(payload, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")


def ws_read(r):
    b0, b1 = r.take(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", r.take(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", r.take(8))[0]
    return bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), r.take(n)


def test_websocket():
    key = base64.b64encode(os.urandom(16)).decode()
    want = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                                         .encode()).digest()).decode()
    s = conn()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode()
              + ws_frame(1, b"coalesced with the handshake"))
    r = Reader(s)
    st, hdrs = r.head()
    h = dict(hdrs)
    check("ws 101", st == 101 and h.get("upgrade", "").lower() == "websocket", (st, hdrs))
    check("ws Sec-WebSocket-Accept", h.get("sec-websocket-accept") == want,
          (h.get("sec-websocket-accept"), want))
    check("ws early frame", ws_read(r) == (True, 1, False, b"coalesced with the handshake"))
    mid = os.urandom(300)
    s.sendall(ws_frame(2, mid))
    check("ws 16-bit length", ws_read(r) == (True, 2, False, mid))
    big = os.urandom(200000)
    s.sendall(ws_frame(2, big))
    check("ws 64-bit length", ws_read(r) == (True, 2, False, big))
    s.sendall(ws_frame(1, b"he", fin=False) + ws_frame(9, b"pi") + ws_frame(0, b"ll", fin=False)
              + ws_frame(0, b"o"))
    got = [ws_read(r) for _ in range(4)]
    check("ws fragments and ping", got == [(False, 1, False, b"he"), (True, 10, False, b"pi"),
                                           (False, 0, False, b"ll"), (True, 0, False, b"o")], got)
    s.sendall(ws_frame(8, struct.pack("!H", 1000) + b"bye"))
    check("ws close echoed", ws_read(r) == (True, 8, False, struct.pack("!H", 1000) + b"bye"))
    data, how = read_all(s)
    check("ws closed after close", data == b"" and how == "eof", (data, how))
    s.close()
    # RFC 6455 section 1.3's own sample, independent of the GUID typed above.
    s = conn()
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    st, hdrs = Reader(s).head()
    check("ws RFC 6455 sample accept",
          dict(hdrs).get("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", hdrs)
    s.close()
    s = conn()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\n\r\n" % key).encode() + ws_frame(1, b"x", mask=False))
    r = Reader(s)
    r.head()
    check("ws unmasked frame -> close 1002", ws_read(r) == (True, 8, False, struct.pack("!H", 1002)))
    s.close()


def test_stats():
    def get(path):
        s = conn()
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path).encode())
        st, h, b, _ = Reader(s).response()
        s.close()
        return json.loads(b)

    get("/__reset")
    st = get("/__stats")
    check("stats zero after reset (control connections excluded)",
          (st["connections"], st["requests"], st["bytes_in"]) == (0, 0, 0), st)
    s = conn()
    req = b"GET /counted HTTP/1.1\r\nHost: t\r\n\r\n"
    s.sendall(req + req)
    r = Reader(s)
    r.response()
    r.response()
    st = get("/__stats")
    check("stats count", (st["connections"], st["requests"], st["bytes_in"], st["open"])
          == (1, 2, 2 * len(req), 1), st)
    s.close()
    for _ in range(50):
        st = get("/__stats")
        if st["open"] == 0:
            break
        time.sleep(0.02)
    check("stats open drops on close", st["open"] == 0, st)


def main():
    for t in (test_pipelining, test_http10, test_interim, test_endings, test_websocket, test_stats):
        try:
            t()
        except Exception as e:  # a hung or broken exchange fails the test, not the run
            check(t.__name__, False, repr(e))
    print("raw checks: %d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
