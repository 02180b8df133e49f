#!/usr/bin/env python3
"""auth_backend.py - a forward-auth service for test_policy_forward_auth.py:
HTTP/1.1 with keep-alive (Python's http.server, one thread per
connection), answering each request by its Authorization field:

    Bearer good      200, X-User: alice, X-Internal: not-for-upstream, body "ok"
    Bearer deny      401, WWW-Authenticate, Content-Type, Set-Cookie, X-Secret,
                     body "who are you"
    Bearer forbid    403, Content-Type: application/json, a JSON body
    Bearer boom      500
    Bearer moved     302 with a Location
    Bearer garbage   "HTTP/1.1 20 OK" (no valid status line), then a close
    Bearer big       401 with a 70000-byte body
    Bearer bigok     200 with a 70000-byte body
    Bearer slow      waits 3 s, then 200
    Bearer hangup    closes the connection without an answer
    anything else    401

GET /__stats answers {"connections": N, "requests": [...]} (each request's
method, path and fields) and GET /__reset clears both; these two carry no
Authorization. SIGTERM ends it.

    auth_backend.py --port-file FILE
"""
import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time

lock = threading.Lock()
state = {"connections": 0, "requests": []}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 drops the SYNs of a burst


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        with lock:
            state["connections"] += 1

    def answer(self, code, body=b"", fields=()):
        self.send_response(code)
        for k, v in fields:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self):
        if self.path == "/__reset":
            with lock:
                state["connections"] = 1  # this one
                state["requests"] = []
        with lock:
            body = json.dumps(state).encode()
        self.answer(200, body, [("Content-Type", "application/json")])

    def handle_any(self):
        if self.path.startswith("/__"):
            return self.control()
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        with lock:
            state["requests"].append({"method": self.command, "path": self.path,
                                      "headers": list(self.headers.items())})
        auth = self.headers.get("Authorization", "")
        if auth == "Bearer good":
            self.answer(200, b"ok", [("X-User", "alice"), ("X-Internal", "not-for-upstream")])
        elif auth == "Bearer deny":
            self.answer(401, b"who are you", [("WWW-Authenticate", 'Bearer realm="auth"'),
                                              ("Content-Type", "text/plain"),
                                              ("Set-Cookie", "sid=none; Path=/"),
                                              ("X-Secret", "leak")])
        elif auth == "Bearer forbid":
            self.answer(403, b'{"error": "forbidden"}', [("Content-Type", "application/json")])
        elif auth == "Bearer boom":
            self.answer(500, b"oops")
        elif auth == "Bearer moved":
            self.answer(302, b"", [("Location", "https://login.example/")])
        elif auth == "Bearer garbage":
            self.wfile.write(b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n")
            self.close_connection = True
        elif auth == "Bearer big":
            self.answer(401, b"x" * 70000, [("Content-Type", "text/plain")])
        elif auth == "Bearer bigok":
            self.answer(200, b"x" * 70000, [("X-User", "bob")])
        elif auth == "Bearer slow":
            time.sleep(3)
            self.answer(200, b"late")
        elif auth == "Bearer hangup":
            self.close_connection = True
        else:
            self.answer(401, b"no", [("WWW-Authenticate", 'Bearer realm="auth"')])

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = handle_any


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = "%s.tmp.%d" % (args.port_file, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    srv.serve_forever()


if __name__ == "__main__":
    main()
