"""h2case.py - the server under test of the HTTP/2 suites (test_h2_*.py).

SY_H2_TARGET picks it:
  switchyard (default)  the real binary (SY_BIN): a plaintext listener with
                        "protocols": ["h1", "h2c"] and a TLS listener with the
                        default protocols (h1 and h2 by ALPN), routed to a
                        sy_test_backend
  nginx                 nginx (>= 1.22, http_v2) on a temporary config in
                        front of the same backend: `listen PORT http2`
                        (prior knowledge) and `listen PORT ssl http2`; the
                        suites are proved against it, a correct server of
                        today
Both get the same timeouts (class attributes IDLE_MS, HEADER_MS, BODY_MS),
32 KiB of header list at most (Switchyard's limits.max_header_bytes,
nginx's large_client_header_buffers), 100 concurrent streams, and an
access log in combined format when ACCESS_LOG is set.

A case that a target answers otherwise than the RFC says is marked with
deviation(target, why): there, the case runs as an expected failure, so the
run proves the note true (an unexpected success fails the suite).
"""
import os
import signal
import subprocess
import unittest

import harness
from harness import TIMEOUT, GatewayCase, gateway_config, self_signed, upstream_cfg, wait_for
from h2client import Target

TARGET = os.environ.get("SY_H2_TARGET", "switchyard")
if TARGET not in ("switchyard", "nginx"):
    raise SystemExit("SY_H2_TARGET is switchyard or nginx, not %r" % TARGET)


def deviation(target, why):
    """Marks a case in which <target> deviates from the RFC (<why>): it is
    run as an expected failure against that target only."""
    def mark(fn):
        if target == TARGET:
            fn = unittest.expectedFailure(fn)
            fn.__doc__ = (fn.__doc__ or "") + " [%s deviates: %s]" % (target, why)
        return fn
    return mark


class Nginx:
    """One nginx process (master_process off: the worker is the process
    whose RSS a test reads) on a config written into <tmp>."""

    def __init__(self, tmp, backend, cert, idle_ms, header_ms, body_ms, max_streams,
                 max_header_bytes, access_log=None):
        self.tmp = tmp
        self.h2c_port, self.tls_port = harness.free_port(), harness.free_port()
        self.prefix = tmp.file("nginx")
        os.makedirs(self.prefix, exist_ok=True)
        self.conf = tmp.file("nginx.conf")
        self.err = os.path.join(self.prefix, "error.log")
        self.access_log = access_log
        # four buffers of a quarter each: a request head whose fields add up
        # to more than max_header_bytes cannot fit
        buf_kib = max(1, max_header_bytes // 4 // 1024)
        text = """
worker_processes 1;
daemon off;
master_process off;
pid {p}/nginx.pid;
error_log {p}/error.log info;
events {{ worker_connections 1024; }}
http {{
    {log}
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    keepalive_timeout {idle}ms;
    client_header_timeout {header}ms;
    client_body_timeout {body}ms;
    send_timeout {body}ms;
    http2_max_concurrent_streams {streams};
    large_client_header_buffers 4 {buf}k;
    upstream b {{
        server {backend};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{h2c} http2;
        listen 127.0.0.1:{tls} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://b;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
""".format(p=self.prefix, idle=idle_ms, header=header_ms, body=body_ms, streams=max_streams,
           buf=buf_kib, backend=backend.addr, h2c=self.h2c_port, tls=self.tls_port,
           cert=cert["cert"], key=cert["key"],
           log=("access_log %s combined;" % access_log) if access_log else "access_log off;")
        with open(self.conf, "w") as f:
            f.write(text)
        self.proc = None
        self.rc = None

    def start(self):
        out = open(self.tmp.file("nginx.out"), "ab")
        self.proc = subprocess.Popen(["nginx", "-e", self.err, "-c", self.conf, "-p", self.prefix],
                                     stdout=out, stderr=out, start_new_session=True)
        out.close()
        harness._live.append(self.proc)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("nginx exited with %s: %s" % (self.proc.returncode,
                                                                    self.log()))
            return all(_accepts(p) for p in (self.h2c_port, self.tls_port))

        wait_for(up, what="nginx listening")
        return self

    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.err, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful, as a drain
        try:
            self.rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            harness._killpg(self.proc, signal.SIGKILL)
            self.rc = self.proc.wait(TIMEOUT)
        if self.proc in harness._live:
            harness._live.remove(self.proc)
        return self.rc


def _accepts(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
        return True
    except OSError:
        return False


class H2Case(GatewayCase):
    """A backend and the target in front of it, shared by the class:
    cls.h2c (prior knowledge) and cls.h2 (TLS) are the Targets, cls.server
    the process (pid() for RSS), cls.target its name."""

    IDLE_MS = 60000
    HEADER_MS = 10000
    BODY_MS = 30000
    MAX_STREAMS = 100
    MAX_HEADER_BYTES = 32768
    ACCESS_LOG = False
    WORKERS = 1

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.target = TARGET
        cls.backend = cls.shared_backend("b1")
        cert = self_signed(cls.tmp)
        cls.access_log = cls.tmp.file("access.log") if cls.ACCESS_LOG else None
        if TARGET == "nginx":
            cls.server = Nginx(cls.tmp, cls.backend, cert, cls.IDLE_MS, cls.HEADER_MS, cls.BODY_MS,
                               cls.MAX_STREAMS, cls.MAX_HEADER_BYTES, cls.access_log)
            cls._procs.append(cls.server)
            cls.server.start()
            h2c_port, tls_port = cls.server.h2c_port, cls.server.tls_port
        else:
            h2c_port, tls_port = harness.free_port(), harness.free_port()
            cfg = gateway_config(
                upstreams={"b": upstream_cfg(cls.backend)},
                routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                workers=cls.WORKERS,
                timeouts={"client_idle_ms": cls.IDLE_MS, "client_header_ms": cls.HEADER_MS,
                          "client_body_ms": cls.BODY_MS},
                limits={"max_header_bytes": cls.MAX_HEADER_BYTES},
                http2={"max_concurrent_streams": cls.MAX_STREAMS,
                       "initial_window_bytes": 65535})
            cfg["listeners"] = [
                {"address": "127.0.0.1:%d" % h2c_port, "protocols": ["h1", "h2c"]},
                {"address": "127.0.0.1:%d" % tls_port, "tls": {"certificates": [cert]}},
            ]
            if cls.access_log:
                cfg["access_log"] = cls.access_log
                cfg["access_log_format"] = "combined"
            cls.server = cls.shared_gateway(cfg, env=harness.asan_env())
        cls.h2c = Target(h2c_port)
        cls.h2 = Target(tls_port, tls=True)
