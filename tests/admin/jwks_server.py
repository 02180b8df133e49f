#!/usr/bin/python3
"""jwks_server.py - the JWKS URL of test_jwks_fetch.c: HTTPS on 127.0.0.1
with the given certificate and key, serving the files of a directory (404
when absent); /slow answers after 5 s. Writes its port to PORTFILE once
listening, and stops by itself after 120 s.

    jwks_server.py CERT KEY DIR PORTFILE
"""
import http.server
import os
import ssl
import sys
import threading
import time

cert, key, root, portfile = sys.argv[1:5]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/slow":
            time.sleep(5)
        try:
            with open(os.path.join(root, self.path.lstrip("/")), "rb") as f:
                data = f.read()
            self.send_response(200)
        except OSError:
            data = b""
            self.send_response(404)
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


server = Server(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
stop = threading.Timer(120, server.shutdown)
stop.daemon = True
stop.start()
server.serve_forever()
