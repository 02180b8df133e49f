#!/usr/bin/env python3
"""probe.py - keep-alive connections that notice when the server closes them.

wrk reconnects silently when a server ends a keep-alive connection cleanly
(`Connection: close`, or a FIN while no request is in flight), and counts
only the closes that cost it a request (as "read" errors). This probe holds
C keep-alive connections (default 20); each sends one request every
INTERVAL ms (default 50) and waits for its answer, one in flight at a time,
cycling through a request list (`METHOD PATH` lines). A random quarter of
the requests are `GET --swap-path`, whose body tells which config variant is
live (a or b, see variants.py).

  probe.py --port P --requests FILE --duration S [-c 20] [--interval-ms 50]
           [--swap-path /__swap] [--timeout 5] [--tls] [--out FILE]

--tls: HTTPS (SNI bench.example.com, no certificate verification); each
connection's handshake runs blocking (bounded by --timeout) once its connect
completes, and a failed one counts as a connect error.

Counted:
  requests    requests sent
  ok          2xx answers
  non2xx      other answers                                       (failed)
  lost        a request sent whose answer never (fully) came: the server
              closed or reset the connection, or --timeout passed (failed)
  connect_errors   connects that failed (refused, reset, timeout)    (failed)
  closed      connections the server ended: `Connection: close` answers
              (closed_graceful), EOF or reset while idle (closed_idle), or
              while a request was in flight (closed_inflight, also lost)
  swap_flips  times a connection saw the --swap-path body change from one
              answer to its next on the SAME connection (the new config
              reached an already open connection)
  swap_bodies counts of each --swap-path body seen

The result is one JSON object on stdout (and in --out). Standard library only.
"""
import argparse
import collections
import errno
import json
import random
import selectors
import socket
import ssl
import sys
import time

BODY_METHODS = {"POST", "PUT", "PATCH"}


def load(path, port):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 or parts[0].startswith("#"):
                continue
            out.append(fmt(parts[0], parts[1], port))
    if not out:
        sys.exit(f"probe.py: no requests in {path}")
    return out


def fmt(method, target, port):
    head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    if method in BODY_METHODS:
        head += "Content-Length: 0\r\n"
    return (head + "\r\n").encode("ascii")


def parse(buf, head_only):
    """(status, headers dict, body, rest) for one complete response at the
    start of buf, or None when more bytes are needed."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].decode("latin1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for h in lines[1:]:
        name, _, value = h.partition(":")
        headers[name.strip().lower()] = value.strip()
    pos = end + 4
    if head_only or status in (204, 304) or 100 <= status < 200:
        return status, headers, b"", buf[pos:]
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(buf[pos:eol].split(b";")[0], 16)
            if size == 0:
                trailer = buf.find(b"\r\n\r\n", eol)
                if trailer < 0:
                    return None
                return status, headers, body, buf[trailer + 4:]
            if len(buf) < eol + 2 + size + 2:
                return None
            body += buf[eol + 2:eol + 2 + size]
            pos = eol + 2 + size + 2
    length = int(headers.get("content-length", "0"))
    if len(buf) < pos + length:
        return None
    return status, headers, buf[pos:pos + length], buf[pos + length:]


class Conn:
    def __init__(self, idx):
        self.idx = idx
        self.sock = None
        self.state = "down"  # down, connecting, idle, busy
        self.buf = b""
        self.next_send = 0.0
        self.sent_at = 0.0
        self.conn_at = 0.0
        self.is_swap = False
        self.is_head = False
        self.n = 0
        self.last_body = None


def arguments(doc, tls=True):
    """The command line of a probe (probe.py, probe_h2.py)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("-c", type=int, default=20)
    ap.add_argument("--interval-ms", type=float, default=50)
    ap.add_argument("--swap-path", default="/__swap")
    ap.add_argument("--timeout", type=float, default=5)
    if tls:
        ap.add_argument("--tls", action="store_true")
    ap.add_argument("--out")
    return ap.parse_args()


def report(cnt, conns, bodies, events, out):
    """The probe's JSON result on stdout (and in <out>)."""
    res = {k: cnt.get(k, 0) for k in (
        "requests", "ok", "non2xx", "lost", "connect_errors", "connects", "closed_graceful",
        "closed_idle", "closed_inflight", "swap_flips", "unexpected_bytes")}
    res["closed"] = res["closed_graceful"] + res["closed_idle"] + res["closed_inflight"]
    res["failed"] = res["non2xx"] + res["lost"] + res["connect_errors"] + res["unexpected_bytes"]
    res["conns"] = conns
    res["swap_bodies"] = dict(bodies)
    res["events"] = events
    text = json.dumps(res)
    print(text)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def main():
    a = arguments(__doc__)
    reqs = load(a.requests, a.port)
    swap_req = fmt("GET", a.swap_path, a.port)
    interval = a.interval_ms / 1000.0
    cnt = collections.Counter()
    bodies = collections.Counter()
    events = []
    sel = selectors.DefaultSelector()
    start = time.monotonic()
    deadline = start + a.duration
    conns = [Conn(i) for i in range(a.c)]
    ri = 0
    rng = random.Random(1)
    tls = None
    if a.tls:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE

    def event(kind, c, detail=""):
        cnt[kind] += 1
        if len(events) < 40:
            events.append(f"{time.monotonic() - start:7.3f}s conn {c.idx}: {kind} {detail}".rstrip())

    def drop(c):
        if c.sock is not None:
            try:
                sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
        c.sock = None
        c.state = "down"
        c.buf = b""
        c.last_body = None

    def connect(c, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        rc = s.connect_ex(("127.0.0.1", a.port))
        c.sock, c.buf, c.conn_at = s, b"", now
        if rc in (0, errno.EINPROGRESS):
            c.state = "connecting"
            sel.register(s, selectors.EVENT_WRITE, c)
            cnt["connects"] += 1
        else:
            event("connect_errors", c, errno.errorcode.get(rc, str(rc)))
            drop(c)
            c.next_send = now + interval

    def server_closed(c, why):
        """EOF or reset: in flight or idle."""
        if c.state == "busy":
            event("closed_inflight", c, why)
            event("lost", c, "in flight")
        else:
            event("closed_idle", c, why)
        drop(c)

    def send(c, now):
        nonlocal ri
        c.n += 1
        # Random, not every 4th: a fixed 200 ms period would alias with
        # the 100 ms a/b alternation and always see the same variant.
        c.is_swap = rng.random() < 0.25
        if c.is_swap:
            data = swap_req
        else:
            data = reqs[ri % len(reqs)]
            ri += 1
        c.is_head = data.startswith(b"HEAD ")
        try:
            c.sock.sendall(data)  # tiny: fits the socket buffer
        except OSError as e:
            cnt["requests"] += 1
            event("closed_inflight", c, f"send: {errno.errorcode.get(e.errno, e)}")
            event("lost", c, "send failed")
            drop(c)
            c.next_send = now + interval
            return
        cnt["requests"] += 1
        c.state = "busy"
        c.sent_at = now
        sel.modify(c.sock, selectors.EVENT_READ, c)

    for c in conns:
        c.next_send = start + c.idx * interval / a.c  # spread them out
        connect(c, start)

    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        # Due sends, reconnects and timeouts.
        wake = deadline
        for c in conns:
            if c.state == "down":
                if now >= c.next_send:
                    connect(c, now)
                else:
                    wake = min(wake, c.next_send)
            elif c.state == "connecting":
                if now - c.conn_at > a.timeout:
                    event("connect_errors", c, "timeout")
                    drop(c)
                    c.next_send = now + interval
                else:
                    wake = min(wake, c.conn_at + a.timeout)
            elif c.state == "idle":
                if now >= c.next_send:
                    send(c, now)
                    if c.state == "busy":
                        wake = min(wake, c.sent_at + a.timeout)
                else:
                    wake = min(wake, c.next_send)
            elif c.state == "busy":
                if now - c.sent_at > a.timeout:
                    event("lost", c, f"timeout {a.timeout}s")
                    drop(c)
                    c.next_send = now
                else:
                    wake = min(wake, c.sent_at + a.timeout)
        for key, _ in sel.select(timeout=max(0.0, wake - time.monotonic())):
            c = key.data
            now = time.monotonic()
            if c.sock is None or key.fileobj is not c.sock:
                continue
            if c.state == "connecting":
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    event("connect_errors", c, errno.errorcode.get(err, str(err)))
                    drop(c)
                    c.next_send = now + interval
                    continue
                if tls is not None:
                    sel.unregister(c.sock)
                    try:
                        c.sock.settimeout(a.timeout)
                        c.sock = tls.wrap_socket(c.sock, server_hostname="bench.example.com")
                        c.sock.setblocking(False)
                    except (OSError, ssl.SSLError) as e:
                        c.sock.close()
                        c.sock = None
                        event("connect_errors", c, f"handshake: {e}")
                        drop(c)
                        c.next_send = now + interval
                        continue
                    sel.register(c.sock, selectors.EVENT_READ, c)
                else:
                    sel.modify(c.sock, selectors.EVENT_READ, c)
                c.state = "idle"
                c.next_send = max(c.next_send, now)
                continue
            try:
                data = c.sock.recv(65536)
                while tls is not None and data and c.sock.pending():
                    data += c.sock.recv(65536)
            except ssl.SSLWantReadError:
                continue
            except ConnectionResetError:
                server_closed(c, "reset")
                c.next_send = now + interval
                continue
            except BlockingIOError:
                continue
            if not data:
                server_closed(c, "EOF")
                c.next_send = now + interval
                continue
            if c.state != "busy":
                event("unexpected_bytes", c, repr(data[:40]))
                drop(c)
                c.next_send = now + interval
                continue
            c.buf += data
            r = parse(c.buf, c.is_head)
            if r is None:
                continue
            status, headers, body, rest = r
            c.buf = rest
            if 200 <= status < 300:
                cnt["ok"] += 1
            else:
                event("non2xx", c, str(status))
            if c.is_swap and 200 <= status < 300:
                b = body.strip().decode("latin1", "replace")
                bodies[b] += 1
                if c.last_body is not None and b != c.last_body:
                    cnt["swap_flips"] += 1
                c.last_body = b
            c.state = "idle"
            c.next_send = max(c.sent_at + interval, now)
            if "close" in headers.get("connection", "").lower():
                event("closed_graceful", c, "Connection: close")
                drop(c)

    for c in conns:
        drop(c)
    report(cnt, a.c, bodies, events, a.out)


if __name__ == "__main__":
    main()
