#!/usr/bin/python3
"""probe_h2.py - probe.py over HTTP/2 by prior knowledge (h2c), for
loadtest/swap PROTO=h2.

C connections (default 20), each in a thread of its own, send one request
every INTERVAL ms (default 50) on a new stream and wait for its answer, one
in flight at a time, cycling through the GET requests of a request list;
a random quarter are `GET --swap-path`, whose body tells which config
variant is live. A connection the server ends is opened again after
INTERVAL. Counted as probe.py counts (same JSON keys, so report.py reads
both):
  requests, ok, non2xx (failed)
  lost          a request whose answer never came whole: the stream reset,
                the connection ended, or --timeout passed          (failed)
  connect_errors                                                   (failed)
  closed        connections the server ended: with a GOAWAY
                (closed_graceful), or EOF/reset while idle (closed_idle) or
                with a request in flight (closed_inflight, also lost)
  swap_flips    the --swap-path body changed between two answers on the
                same connection

  probe_h2.py --port P --requests FILE --duration S [-c 20] [--interval-ms 50]
              [--swap-path /__swap] [--timeout 5] [--out FILE]

Needs Debian's python3-h2 (run it with /usr/bin/python3).
"""
import collections
import random
import socket
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from probe import arguments, report


def load(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] == "GET":
                out.append(parts[1])
    if not out:
        raise SystemExit(f"probe_h2.py: no GET requests in {path}")
    return out


class Probe:
    def __init__(self, a):
        self.a = a
        self.paths = load(a.requests)
        self.cnt = collections.Counter()
        self.bodies = collections.Counter()
        self.events = []
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.deadline = self.start + a.duration
        self.next_path = 0

    def event(self, kind, idx, detail=""):
        with self.lock:
            self.cnt[kind] += 1
            if len(self.events) < 40:
                self.events.append(f"{time.monotonic() - self.start:7.3f}s conn {idx}: "
                                   f"{kind} {detail}".rstrip())

    def count(self, kind, n=1):
        with self.lock:
            self.cnt[kind] += n

    def path(self, rng):
        if rng.random() < 0.25:
            return self.a.swap_path, True
        with self.lock:
            self.next_path += 1
            return self.paths[self.next_path % len(self.paths)], False

    def run(self, idx):
        rng = random.Random(idx)
        time.sleep(idx * self.a.interval_ms / 1000 / self.a.c)  # spread out
        while time.monotonic() < self.deadline:
            self.connection(idx, rng)
            time.sleep(self.a.interval_ms / 1000)

    def connection(self, idx, rng):
        """One connection's life: requests until the run ends or the server
        ends it."""
        a = self.a
        try:
            sock = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
        except OSError as e:
            self.event("connect_errors", idx, str(e))
            return
        self.count("connects")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                   header_encoding="utf-8"))
        conn.initiate_connection()
        last_body = None
        try:
            sock.sendall(conn.data_to_send())
            while time.monotonic() < self.deadline:
                target, is_swap = self.path(rng)
                sid = conn.get_next_available_stream_id()
                conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                                        (":authority", f"127.0.0.1:{a.port}"),
                                        (":path", target)], end_stream=True)
                sock.sendall(conn.data_to_send())
                self.count("requests")
                sent = time.monotonic()
                status, body, why = self.answer(sock, conn, sid, sent + a.timeout)
                if why == "goaway":
                    if status is None:
                        self.event("lost", idx, "GOAWAY before the answer")
                    self.event("closed_graceful", idx, "GOAWAY")
                if status is None:
                    if why in ("eof", "reset"):
                        self.event("closed_inflight", idx, why)
                    if why != "goaway":
                        self.event("lost", idx, why)
                    return
                if 200 <= status < 300:
                    self.count("ok")
                else:
                    self.event("non2xx", idx, str(status))
                if is_swap and 200 <= status < 300:
                    b = body.strip().decode("latin1", "replace")
                    with self.lock:
                        self.bodies[b] += 1
                        if last_body is not None and b != last_body:
                            self.cnt["swap_flips"] += 1
                    last_body = b
                if why == "goaway":
                    return
                pause = sent + a.interval_ms / 1000 - time.monotonic()
                if pause > 0:
                    why = self.idle(sock, conn, pause)
                    if why:
                        self.event("closed_graceful" if why == "goaway" else "closed_idle",
                                   idx, why)
                        return
        except OSError as e:
            self.event("closed_inflight", idx, str(e))
            self.event("lost", idx, "send failed")
        finally:
            sock.close()

    def answer(self, sock, conn, sid, deadline):
        """(status, body, why): why is None, "goaway", "eof", "reset",
        "stream reset" or "timeout"."""
        status, parts, goaway = None, [], False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, b"", "timeout"
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                return None, b"", "timeout"
            except ConnectionResetError:
                return None, b"", "reset"
            if not data:
                return None, b"", "goaway" if goaway else "eof"
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as e:
                return None, b"", f"protocol error {e}"
            for ev in events:
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    parts.append(ev.data)
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    sock.sendall(conn.data_to_send())
                    return status, b"".join(parts), "goaway" if goaway else None
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    return None, b"", "stream reset"
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    goaway = True
                    if ev.last_stream_id < sid:
                        return None, b"", "goaway"
            sock.sendall(conn.data_to_send())

    def idle(self, sock, conn, pause):
        """Waits <pause> s reading what comes; "goaway", "eof" or "reset"
        when the server ends the connection, else None."""
        end = time.monotonic() + pause
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                return None
            except ConnectionResetError:
                return "reset"
            if not data:
                return "eof"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ConnectionTerminated):
                    return "goaway"
            sock.sendall(conn.data_to_send())


def main():
    a = arguments(__doc__, tls=False)
    p = Probe(a)
    threads = [threading.Thread(target=p.run, args=(i,), daemon=True) for i in range(a.c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.duration + 2 * a.timeout + 5)
    with p.lock:
        report(p.cnt, a.c, p.bodies, p.events, a.out)


if __name__ == "__main__":
    main()
