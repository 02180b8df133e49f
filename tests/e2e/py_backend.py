#!/usr/bin/env python3
"""py_backend.py - a backend built on Python's http.server, for the tests
that need what sy_test_backend does not do: a server that takes request
bodies by Content-Length only (http.server's BaseHTTPRequestHandler reads
no chunked body), and one that answers every request the same way
whatever its query (so two servers of one pool can answer differently).

    py_backend.py --port-file FILE [--status S] [--delay-ms D]

Every request (any method, any path but /__hits) has its Content-Length
body read, waits D ms, and is answered with status S (200) and the JSON
{"method", "path", "body_bytes", "body_sha256", "content_length",
"transfer_encoding"}. GET /__hits answers {"hits": N}: the requests so far.
Threaded (one thread per connection); HTTP/1.0, so each connection carries
one request. SIGTERM ends it.
"""
import argparse
import hashlib
import http.server
import json
import os
import signal
import sys
import threading
import time

hits = 0
lock = threading.Lock()


def make_handler(status, delay_ms):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle_any(self):
            global hits
            if self.path == "/__hits":
                with lock:
                    self.answer(200, {"hits": hits})
                return
            with lock:
                hits += 1
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n) if n else b""
            if delay_ms:
                time.sleep(delay_ms / 1000.0)
            self.answer(status, {"method": self.command, "path": self.path,
                                 "body_bytes": len(data),
                                 "body_sha256": hashlib.sha256(data).hexdigest(),
                                 "content_length": self.headers.get("Content-Length"),
                                 "transfer_encoding": self.headers.get("Transfer-Encoding")})

        do_GET = do_POST = do_PUT = do_DELETE = handle_any

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--status", type=int, default=200)
    ap.add_argument("--delay-ms", type=int, default=0)
    a = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(a.status, a.delay_ms))
    srv.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = "%s.tmp.%d" % (a.port_file, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
