#!/usr/bin/env python3
"""client.py - send exactly N HTTP/1.1 requests, for loadtest/compare.

wrk runs for a time, not for a count; the callgrind measurement needs two
runs whose request counts differ by a known number. This client cycles
through a request list (`METHOD PATH` lines) over C keep-alive connections,
one request in flight per connection, until N responses have arrived, and
prints the status codes it saw:

  client.py --port P --requests FILE -n N [-c C] [--expect 200]

Exit status 1 when a response was not --expect, or on any I/O error or
timeout (default 120 s for the whole run). Standard library only.
"""
import argparse
import collections
import selectors
import socket
import sys
import time

from gen import POLICY_HEADER  # the credentials POLICY=api_key or basic needs

BODY_METHODS = {"POST", "PUT", "PATCH"}


def load(path, port):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 or parts[0].startswith("#"):
                continue
            method, target = parts
            head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            if method in BODY_METHODS:
                head += "Content-Length: 0\r\n"
            if POLICY_HEADER:
                head += POLICY_HEADER + "\r\n"
            out.append((head + "\r\n").encode("ascii"))
    if not out:
        sys.exit(f"client.py: no requests in {path}")
    return out


class Conn:
    """One keep-alive connection and the response it is reading."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = b""

    def response(self):
        """Returns the status of one complete response taken from the
        buffer, or None when more bytes are needed."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end].decode("latin1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        length, chunked = 0, False
        for h in head[1:]:
            name, _, value = h.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        pos = end + 4
        if chunked:
            while True:
                eol = self.buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                size = int(self.buf[pos:eol].split(b";")[0], 16)
                if size == 0:
                    trailer = self.buf.find(b"\r\n\r\n", eol)
                    if trailer < 0:
                        return None
                    pos = trailer + 4
                    break
                pos = eol + 2 + size + 2
                if pos > len(self.buf):
                    return None
        else:
            if len(self.buf) < pos + length:
                return None
            pos += length
        self.buf = self.buf[pos:]
        return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("-c", type=int, default=10)
    ap.add_argument("--expect", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()

    reqs = load(a.requests, a.port)
    sel = selectors.DefaultSelector()
    sent = done = 0
    codes = collections.Counter()
    deadline = time.monotonic() + a.timeout

    def send_next(c):
        nonlocal sent
        c.sock.sendall(reqs[sent % len(reqs)])  # tiny: fits the socket buffer
        sent += 1

    for _ in range(min(a.c, a.n)):
        c = Conn(a.port)
        sel.register(c.sock, selectors.EVENT_READ, c)
        send_next(c)
    while done < a.n:
        if time.monotonic() > deadline:
            sys.exit(f"client.py: timeout after {done} of {a.n} responses")
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            data = c.sock.recv(65536)
            if not data:
                sys.exit(f"client.py: connection closed after {done} responses")
            c.buf += data
            while True:
                status = c.response()
                if status is None:
                    break
                codes[status] += 1
                done += 1
                if sent < a.n:
                    send_next(c)
    for key in list(sel.get_map().values()):
        key.data.sock.close()
    print("client.py: " + " ".join(f"{k}={v}" for k, v in sorted(codes.items())))
    if set(codes) != {a.expect}:
        sys.exit(f"client.py: expected only {a.expect}")


if __name__ == "__main__":
    main()
