#!/usr/bin/python3
"""jwks_server.py - the JWKS URL of test_jwks_fetch.c and of
tests/e2e/test_policy_jwks_url.py: HTTPS on 127.0.0.1 with the given
certificate and key, serving the files of a directory (404 when absent;
when NAME.status exists beside file NAME, that status and no body);
/slow answers after 5 s. Writes its port to PORTFILE once listening, and
stops by itself after LIFETIME seconds (120 by default).

    jwks_server.py CERT KEY DIR PORTFILE [PORT [LIFETIME]]
"""
import http.server
import os
import ssl
import sys
import threading
import time

cert, key, root, portfile = sys.argv[1:5]
port = int(sys.argv[5]) if len(sys.argv) > 5 else 0
lifetime = float(sys.argv[6]) if len(sys.argv) > 6 else 120


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        """The status and body for the file the path names."""
        path = os.path.join(root, self.path.lstrip("/"))
        try:
            with open(path + ".status") as f:
                return int(f.read()), b""
        except (OSError, ValueError):
            pass
        try:
            with open(path, "rb") as f:
                return 200, f.read()
        except OSError:
            return 404, b""

    def do_GET(self):
        if self.path == "/slow":
            time.sleep(5)
        status, data = self.answer()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the tests' refused handshakes and given-up requests


Server.allow_reuse_address = True  # a restart on the same port
server = Server(("127.0.0.1", port), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
stop = threading.Timer(lifetime, server.shutdown)
stop.daemon = True
stop.start()
server.serve_forever()
