#!/usr/bin/env python3
"""client.py - exact counts of TLS work, for loadtest/tls.

  client.py keepalive --port P --requests FILE -n N [-c C]
      N requests over C keep-alive HTTPS connections (handshakes done first)
  client.py full --port P --requests FILE -n N
      N new connections, each a full handshake and one request
  client.py idle --port P --requests FILE -n N --pid PID
      N connections with one request each, left idle: PID's RSS growth per
      connection
  client.py resumed --port P --requests FILE -n N
      one connection to get a session, then N new connections resuming it,
      each with one request; exits 1 when one of them was not resumed

callgrind needs two runs whose counts differ by a known number, which wrk
and openssl s_time cannot give. Every response must be 200 (exit 1
otherwise). TLS 1.3, ECDSA, no certificate verification (the benchmark's
self-signed certificate). Standard library only.
"""
import argparse
import socket
import ssl
import sys
import time


def load(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 or parts[0].startswith("#"):
                continue
            head = f"{parts[0]} {parts[1]} HTTP/1.1\r\nHost: bench.example.com\r\n"
            if parts[0] in ("POST", "PUT", "PATCH"):
                head += "Content-Length: 0\r\n"
            out.append((head + "\r\n").encode("ascii"))
    return out


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def context():
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    c.minimum_version = ssl.TLSVersion.TLSv1_3
    c.set_alpn_protocols(["http/1.1"])
    return c


def connect(ctx, port, session=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(s, server_hostname="bench.example.com", session=session)


def exchange(s, req, buf):
    """Sends <req>, reads one response; returns (status, leftover bytes)."""
    s.sendall(req)
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].decode("latin1").split("\r\n")
            length = 0
            for h in head[1:]:
                k, _, v = h.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            if len(buf) >= end + 4 + length:
                return int(head[0].split()[1]), buf[end + 4 + length:]
        d = s.recv(65536)
        if not d:
            sys.exit("client.py: connection closed")
        buf += d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("keepalive", "full", "resumed", "idle"))
    ap.add_argument("--pid", type=int, help="idle: the server whose RSS to read")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("-c", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    reqs = load(a.requests)
    ctx = context()
    deadline = time.monotonic() + a.timeout
    bad = not_resumed = 0
    if a.mode == "idle":
        # N connections, one request each, then left idle: the server's RSS
        # growth per idle keep-alive TLS connection (from a warm server: the
        # rows before have run)
        before = rss_kib(a.pid)
        conns = []
        for i in range(a.n):
            s = connect(ctx, a.port)
            st, _ = exchange(s, reqs[i % len(reqs)], b"")
            bad += st != 200
            conns.append(s)
        time.sleep(1)
        after = rss_kib(a.pid)
        print(f"client.py: idle n={a.n} rss_before_kib={before} rss_after_kib={after} "
              f"per_conn_kib={(after - before) / a.n:.2f}")
        for s in conns:
            s.close()
        sys.exit(1 if bad else 0)
    if a.mode == "keepalive":
        conns = [[connect(ctx, a.port), b""] for _ in range(min(a.c, a.n))]
        for i in range(a.n):
            c = conns[i % len(conns)]
            st, c[1] = exchange(c[0], reqs[i % len(reqs)], c[1])
            bad += st != 200
            if i % 256 == 0 and time.monotonic() > deadline:
                sys.exit("client.py: timeout")
        for c in conns:
            c[0].close()
    else:
        session = None
        if a.mode == "resumed":
            s = connect(ctx, a.port)
            exchange(s, reqs[0], b"")  # TLS 1.3 tickets arrive with it
            session = s.session
            s.close()
        for i in range(a.n):
            s = connect(ctx, a.port, session)
            st, _ = exchange(s, reqs[i % len(reqs)], b"")
            bad += st != 200
            not_resumed += a.mode == "resumed" and not s.session_reused
            s.close()
            if time.monotonic() > deadline:
                sys.exit("client.py: timeout")
    print(f"client.py: {a.mode} n={a.n} non-200={bad} not-resumed={not_resumed}")
    sys.exit(1 if bad or not_resumed else 0)


if __name__ == "__main__":
    main()
