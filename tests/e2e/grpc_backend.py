#!/usr/bin/python3
"""grpc_backend.py - a real gRPC server for the end-to-end tests, one
process per server: Debian's python3-grpcio (1.51) with generic method
handlers and bytes in and out, so no protoc and no generated code.

    grpc_backend.py --port P --port-file FILE --events FILE --name NAME
                    [--service pkg.Svc ...] [--tls CERT KEY]

It listens on 127.0.0.1:P (plaintext, HTTP/2 prior knowledge; with --tls,
TLS whose ALPN is h2), writes P to FILE once it serves, and serves every
method below under each --service (default echo.Echo). Every response's
initial metadata carries x-server: NAME, so a test knows which server of
a pool answered. What only the server can see (a cancel, a deadline) goes
to the events file, one line per event, written whole with O_APPEND:
"<what> <id> <detail>". Messages may be 8 MiB each way; up to 100
streams share one connection (SETTINGS_MAX_CONCURRENT_STREAMS); 128
threads serve calls. SIGTERM or SIGKILL ends it. GrpcBackend is the
tests' side: it starts one such process and reads its events.

Methods (a request's "id" is its bytes as text, for the events):
- Echo (unary): the request back.
- Stream (server stream): request b"COUNT SIZE": COUNT messages, message
  i being i as 8 big-endian bytes, then harness's pattern up to SIZE bytes.
- Collect (client stream): b"COUNT SHA256HEX" of the messages received.
- PingPong (bidi): each message back as it comes.
- Meta (unary): initial metadata x-init*, trailing metadata x-trail*, each
  the request's x-md* fields renamed (x-md-bin -> x-init-bin); the
  response is JSON {key: hex of the value} of every x-md* field received.
- Fail (unary): trailing metadata x-err-bin: ERR_BIN, then the status
  NOT_FOUND with FAIL_MESSAGE (non-ASCII and a '%': percent-encoded on the
  wire).
- Slow (unary): waits, up to 60 s, while the call is active; then the
  event "slow ID cancelled" (the call ended under it: a cancel or its
  deadline) or "slow ID ended"; "slow ID callback" when the call is over.
- Hold (server stream): a message every 10 ms, up to 6,000, while the
  call is active; the event "hold ID started", and at the end "hold ID
  cancelled" or "hold ID ended"; "hold ID callback" when the call is over.
- Flaky (unary): UNAVAILABLE, Trailers-Only, on a server started with
  --unavailable (it did not act on the call: the event "flaky ID
  refused"), else the request back ("flaky ID served").
- Barrier (unary): request b"GROUP N": waits (up to 60 s) until N calls of
  GROUP are in at once, then answers JSON {"arrived", "ports"}: how many
  came, and the client ports (the gateway's connections) they came on.
"""
import argparse
import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

import harness
from harness import TIMEOUT, free_port, pattern_bytes, wait_port_file

MAX_MESSAGE = 8 << 20
ERR_BIN = bytes([0xff, 0x00, 0xfe, 0x80, 0x0a, 0x0d])
FAIL_MESSAGE = "kein Eintrag f\u00fcr \u00abSchl\u00fcssel\u00bb \u2013 100% \u2713"
WAIT_S = 60  # the longest any handler waits (the tests' own waits are shorter)


def stream_message(i, size):
    return struct.pack(">Q", i) + pattern_bytes(max(size - 8, 0))


class Events:
    """The events file: one line per write, appended whole."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, what, ident, detail=""):
        os.write(self.fd, ("%s %s %s\n" % (what, ident, detail)).strip().encode() + b"\n")


class Handlers:
    def __init__(self, name, events, unavailable=False):
        self.name, self.events, self.unavailable = name, events, unavailable
        self.lock = threading.Condition()
        self.groups = {}  # barrier group -> [peer port of each call in]

    def hello(self, context):
        context.send_initial_metadata((("x-server", self.name),))

    # unary and streams
    def echo(self, request, context):
        self.hello(context)
        return request

    def stream(self, request, context):
        self.hello(context)
        count, size = map(int, request.split())
        for i in range(count):
            yield stream_message(i, size)

    def collect(self, request_iterator, context):
        self.hello(context)
        n, h = 0, hashlib.sha256()
        for m in request_iterator:
            n += 1
            h.update(m)
        return b"%d %s" % (n, h.hexdigest().encode())

    def ping_pong(self, request_iterator, context):
        self.hello(context)
        for m in request_iterator:
            yield m

    # metadata and statuses
    def meta(self, request, context):
        got = [(k, v) for k, v in context.invocation_metadata() if k.startswith("x-md")]
        context.send_initial_metadata([("x-server", self.name)] +
                                      [("x-init" + k[4:], v) for k, v in got])
        context.set_trailing_metadata([("x-trail" + k[4:], v) for k, v in got])
        return json.dumps({k: (v if isinstance(v, bytes) else v.encode()).hex()
                           for k, v in got}).encode()

    def flaky(self, request, context):
        if self.unavailable:  # Trailers-Only: no metadata before the status
            self.events("flaky", request.decode(), "refused")
            context.abort(grpc.StatusCode.UNAVAILABLE, "not taking calls")
        self.hello(context)
        self.events("flaky", request.decode(), "served")
        return request

    def fail(self, request, context):
        self.hello(context)
        context.set_trailing_metadata((("x-err-bin", ERR_BIN),))
        context.abort(grpc.StatusCode.NOT_FOUND, FAIL_MESSAGE)

    # cancels and deadlines: what the server sees
    def slow(self, request, context):
        ident = request.decode()
        self.events("slow", ident, "started")
        context.add_callback(lambda: self.events("slow", ident, "callback"))
        end = time.monotonic() + WAIT_S
        while context.is_active() and time.monotonic() < end:
            time.sleep(0.01)
        self.events("slow", ident, "ended" if context.is_active() else "cancelled")
        return b"slow " + request

    def hold(self, request, context):
        ident = request.decode()
        self.hello(context)
        self.events("hold", ident, "started")
        context.add_callback(lambda: self.events("hold", ident, "callback"))
        try:
            for i in range(6000):
                if not context.is_active():
                    break
                yield stream_message(i, 64)
                time.sleep(0.01)
        finally:
            # a cancel ends the generator at its yield (GeneratorExit) with
            # the call already inactive
            self.events("hold", ident, "ended" if context.is_active() else "cancelled")

    def barrier(self, request, context):
        self.hello(context)
        group, n = request.decode().split()
        port = int(context.peer().rsplit(":", 1)[1])
        end = time.monotonic() + WAIT_S
        with self.lock:
            seen = self.groups.setdefault(group, [])
            seen.append(port)
            self.lock.notify_all()
            while len(seen) < int(n) and context.is_active():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.lock.wait(min(left, 0.1))
            return json.dumps({"arrived": len(seen), "ports": sorted(set(seen))}).encode()


def generic_handler(service, h):
    unary, sstream = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
    cstream, bidi = grpc.stream_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler
    return grpc.method_handlers_generic_handler(service, {
        "Echo": unary(h.echo),
        "Stream": sstream(h.stream),
        "Collect": cstream(h.collect),
        "PingPong": bidi(h.ping_pong),
        "Meta": unary(h.meta),
        "Fail": unary(h.fail),
        "Flaky": unary(h.flaky),
        "Slow": unary(h.slow),
        "Hold": sstream(h.hold),
        "Barrier": unary(h.barrier),
    })


class GrpcBackend:
    """The test side: one grpc_backend.py process under /usr/bin/python3
    (this file's own interpreter), in a process group of its own, killed
    with it by harness's atexit hook if a test leaves it behind."""

    def __init__(self, tmp, name, services=("echo.Echo",), tls=None, unavailable=False):
        """<tls>: harness.self_signed()'s {"cert", "key"} to serve TLS;
        <unavailable>: Flaky answers UNAVAILABLE."""
        self.tmp, self.name, self.services, self.tls = tmp, name, services, tls
        self.unavailable = unavailable
        self.port = free_port()
        self.events_path = tmp.file("grpc-%s.events" % name)
        self.proc = None

    def start(self):
        pf = self.tmp.file("grpc-%s.port" % self.name)
        if os.path.exists(pf):
            os.unlink(pf)
        args = [sys.executable, os.path.abspath(__file__), "--port", str(self.port),
                "--port-file", pf, "--events", self.events_path, "--name", self.name]
        for s in self.services:
            args += ["--service", s]
        if self.tls:
            args += ["--tls", self.tls["cert"], self.tls["key"]]
        if self.unavailable:
            args.append("--unavailable")
        with open(self.tmp.file("grpc-%s.err" % self.name), "ab") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        harness._live.append(self.proc)
        wait_port_file(self.proc, pf, "grpc backend %s" % self.name, self.stderr)
        return self

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def stderr(self):
        try:
            with open(self.tmp.file("grpc-%s.err" % self.name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def events(self, what=None, ident=None, detail=None):
        """The event lines so far, split: [(what, id, detail)], those of
        <what>, <ident> and <detail> when given."""
        try:
            with open(self.events_path) as f:
                text = f.read()
        except OSError:
            return []
        lines = [tuple((ln.split(None, 2) + ["", ""])[:3]) for ln in text.splitlines() if ln]
        want = (what, ident, detail)
        return [e for e in lines if all(w is None or w == v for w, v in zip(want, e))]

    def stop(self, sig=signal.SIGTERM):
        if not self.proc:
            return
        harness._killpg(self.proc, sig)
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            harness._killpg(self.proc, signal.SIGKILL)
            self.proc.wait(TIMEOUT)
        if self.proc in harness._live:
            harness._live.remove(self.proc)

    def kill(self):
        """SIGKILL: the kernel closes its connections, the handlers run no more."""
        self.stop(signal.SIGKILL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--service", action="append")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--unavailable", action="store_true")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    h = Handlers(a.name, Events(a.events), a.unavailable)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=128),
        handlers=[generic_handler(s, h) for s in (a.service or ["echo.Echo"])],
        options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                 ("grpc.max_send_message_length", MAX_MESSAGE),
                 ("grpc.max_concurrent_streams", 100),
                 # a port of its own: no second process shares it
                 ("grpc.so_reuseport", 0)])
    addr = "127.0.0.1:%d" % a.port
    if a.tls:
        with open(a.tls[0], "rb") as f:
            cert = f.read()
        with open(a.tls[1], "rb") as f:
            key = f.read()
        bound = server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
    else:
        bound = server.add_insecure_port(addr)
    if bound != a.port:
        sys.exit("grpc_backend: cannot listen on %s" % addr)
    server.start()
    tmp = "%s.tmp.%d" % (a.port_file, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % a.port)
    os.rename(tmp, a.port_file)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
