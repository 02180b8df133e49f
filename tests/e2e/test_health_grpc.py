#!/usr/bin/python3
"""test_health_grpc.py - health_check.type "grpc" (gateway/health_grpc.c)
against real gRPC servers: Debian's python3-grpcio (1.51) serving
grpc.health.v1.Health/Check with generic handlers and bytes
(grpc_health_server.py, a process of its own per server, so that a test
can kill it), whose answers a test switches through a state file.

Over h2c (prior knowledge) two servers share a pool checked for the
service "sy.Echo": a server answering NOT_SERVING goes down after
unhealthy_threshold checks (GET /upstreams/{name}/health says so, the log
says why, and requests through the gateway avoid it) and up again after
healthy_threshold SERVING answers; so do UNKNOWN, an answer cut short,
one too large, and a killed server; a server that never answers fails
by timeout_ms; SERVING among fields the health proto does not have
passes. A service the server does not know (NOT_FOUND) fails; no service
at all asks about the server as a whole; the server sees the service
name we encoded, our user-agent and a deadline. An HTTP/1.1 server fails
a gRPC check. Over TLS (protocol "h2", a certificate made
with the openssl CLI, grpc.ssl_server_credentials) the same checks pass
and fail.

Run it with /usr/bin/python3 (python3-grpcio). Every wait is bounded
(harness.wait_for).
"""
import json
import os
import re
import signal
import socket
import subprocess

from harness import (HERE, TIMEOUT, Client, GatewayCase, free_port, gateway_config, main,
                     write_atomic, wait_for)
from test_grpc_errors import cert_with_san
from test_health import admin_accepts, health

SERVER = os.path.join(HERE, "grpc_health_server.py")
ALL_SERVING = {"": "SERVING", "sy.Echo": "SERVING"}


def check(**extra):
    c = {"type": "grpc", "interval_ms": 150, "timeout_ms": 150, "healthy_threshold": 2,
         "unhealthy_threshold": 2}
    c.update(extra)
    return c


class GrpcHealthServer:
    """One grpc_health_server.py process on a fixed port; restartable."""

    def __init__(self, tmp, name, tls=None):
        self.tmp, self.name, self.tls = tmp, name, tls
        self.port = free_port()
        self.state = tmp.file("%s.state" % name)
        self.calls_file = tmp.file("%s.calls" % name)
        self.proc = None
        self.set(ALL_SERVING)

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def set(self, state):
        write_atomic(self.state, json.dumps(state))

    def start(self):
        args = ["/usr/bin/python3", SERVER, str(self.port), self.state, self.calls_file]
        if self.tls:
            args += [self.tls["cert"], self.tls["key"]]
        err = open(self.tmp.file("%s.err" % self.name), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                                     start_new_session=True)
        err.close()

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError("%s exited with %s" % (self.name, self.proc.returncode))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT).close()
                return True
            except OSError:
                return False

        wait_for(listening, interval=0.05, what="gRPC server %s" % self.name)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(TIMEOUT)

    def calls(self):
        try:
            with open(self.calls_file) as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except OSError:
            return []


class Base(GatewayCase):
    servers = ()

    @classmethod
    def start_server(cls, name, tls=None):
        s = GrpcHealthServer(cls.tmp, name, tls)
        cls.addClassCleanup(s.kill)
        return s.start()

    @classmethod
    def start_gateway(cls, upstreams):
        cfg = gateway_config(upstreams=upstreams, workers=1,
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "g"}])
        cls.gw = cls.shared_gateway(cfg)
        wait_for(lambda: admin_accepts(cls.gw), what="the admin API")

    def setUp(self):
        for s in self.servers:
            s.set(ALL_SERVING)
            if not s.alive():
                s.start()
        for s in self.servers:
            wait_for(lambda: self.server(s)["healthy"], what="%s healthy" % s.name)

    def server(self, s, pool="g"):
        return health(self.gw, pool)[0][s.addr]

    def goes(self, s, healthy, why, pool="g"):
        """Waits for <s> to go down (<healthy> False) with <why> in the log
        line, or to come up."""
        since = self.gw.log_size()
        wait_for(lambda: self.server(s, pool)["healthy"] == healthy,
                 what="%s %s" % (s.name, "up" if healthy else "down"))
        if healthy:
            self.gw.wait_log(r"upstream %s server %s: passed 2 checks: up" %
                             (pool, re.escape(s.addr)), since=since)
        else:
            self.gw.wait_log(r"upstream %s server %s: failed 2 checks \(%s\): down" %
                             (pool, re.escape(s.addr), why), since=since)
            self.assertEqual(self.server(s, pool)["reason"], "active_check")


class H2c(Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s1, cls.s2 = cls.start_server("s1"), cls.start_server("s2")
        cls.servers = (cls.s1, cls.s2)
        cls.plain = cls.shared_backend("plain")
        # connects complete (the kernel's backlog) but nothing ever answers
        cls.mute = socket.socket()
        cls.mute.bind(("127.0.0.1", 0))
        cls.mute.listen(128)
        cls.addClassCleanup(cls.mute.close)
        mute = "127.0.0.1:%d" % cls.mute.getsockname()[1]
        cls.start_gateway({
            "g": {"protocol": "h2c", "servers": [{"address": cls.s1.addr},
                                                 {"address": cls.s2.addr}],
                  "health_check": check(service="sy.Echo"),
                  # failed requests eject nobody: only the checks decide here
                  "outlier": {"consecutive_failures": 0}},
            "whole": {"protocol": "h2c", "servers": [{"address": cls.s1.addr}],
                      "health_check": check()},
            "nosuch": {"protocol": "h2c", "servers": [{"address": cls.s2.addr}],
                       "health_check": check(service="no.Such")},
            "plain": {"protocol": "h2c", "servers": [{"address": cls.plain.addr}],
                      "health_check": check()},
            # "http" checks of h2c pools: an HTTP/2 GET, as the pool speaks
            "get": {"protocol": "h2c", "servers": [{"address": cls.s1.addr}],
                    "health_check": check(type="http", path="/health")},
            "get1": {"protocol": "h2c", "servers": [{"address": cls.plain.addr}],
                     "health_check": check(type="http", path="/health")},
            "mute": {"protocol": "h2c", "servers": [{"address": mute}],
                     "health_check": check()},
        })

    def requests_to(self):
        servers = health(self.gw, "g")[0]
        return [servers[s.addr]["requests"] for s in self.servers]

    def test_not_serving_goes_down_and_back(self):
        self.s2.set({"": "SERVING", "sy.Echo": "NOT_SERVING"})
        self.goes(self.s2, False, "NOT_SERVING")
        # the server answered: HTTP 200, with a health status that fails
        self.assertEqual(self.server(self.s2)["last_check"]["status"], 200)
        # requests avoid it (whatever they get from a gRPC server)
        before = self.requests_to()
        for i in range(6):
            with Client(self.gw.port) as c:
                c.request("GET", "/n/%d" % i)
        after = self.requests_to()
        self.assertEqual(after[1], before[1])
        self.assertGreaterEqual(after[0], before[0] + 6)
        self.s2.set(ALL_SERVING)
        self.goes(self.s2, True, None)

    def test_unknown_and_malformed_answers(self):
        self.s2.set({"": "SERVING", "sy.Echo": "UNKNOWN"})
        self.goes(self.s2, False, "UNKNOWN")
        self.s2.set({"": "SERVING", "sy.Echo": "EXTRA"})  # fields we do not know: SERVING
        self.goes(self.s2, True, None)
        self.s2.set({"": "SERVING", "sy.Echo": "MALFORMED"})
        self.goes(self.s2, False, "malformed HealthCheckResponse")
        self.s2.set(ALL_SERVING)
        self.goes(self.s2, True, None)
        self.s2.set({"": "SERVING", "sy.Echo": "BIG"})  # past what a check keeps
        self.goes(self.s2, False, "answer over 512 bytes")

    def test_service_unknown_to_the_server(self):
        # NOT_FOUND, as grpc's own health servicer answers
        self.gw.wait_log(r"upstream nosuch server %s: failed 2 checks \(grpc-status 5\): down" %
                         re.escape(self.s2.addr))
        self.assertFalse(self.server(self.s2, "nosuch")["healthy"])
        # the same server passes for the service it knows
        self.assertTrue(self.server(self.s2)["healthy"])

    def test_the_request(self):
        # "whole" names no service: the server as a whole ("")
        wait_for(lambda: self.server(self.s1, "whole")["last_check"]["status"] == 200,
                 what="a check of the whole server")
        self.assertTrue(self.server(self.s1, "whole")["healthy"])
        wait_for(lambda: {"", "sy.Echo"} <= {c["service"] for c in self.s1.calls()},
                 what="both services asked of s1")
        calls = self.s1.calls() + self.s2.calls()
        self.assertEqual({c["service"] for c in calls}, {"", "sy.Echo", "no.Such"})
        for c in calls:
            self.assertIn("switchyard-health-check", c["user_agent"])
            self.assertTrue(c["deadline"])  # grpc-timeout

    def test_killed_server(self):
        self.s2.kill()
        self.goes(self.s2, False, "no answer")
        self.assertEqual(self.server(self.s2)["last_check"]["status"], 0)
        self.s2.start()
        self.goes(self.s2, True, None)

    def test_no_answer_in_time(self):
        addr = "127.0.0.1:%d" % self.mute.getsockname()[1]
        self.gw.wait_log(r"upstream mute server %s: failed 2 checks \(no answer\): down" %
                         re.escape(addr))
        self.assertEqual(health(self.gw, "mute")[0][addr]["last_check"]["status"], 0)

    def test_http_check_of_an_h2c_pool_speaks_http2(self):
        # a gRPC server answers any GET 200 (with a grpc-status of its own):
        # over HTTP/1.1 it would answer nothing, and the server go down
        wait_for(lambda: self.server(self.s1, "get")["last_check"]["status"] == 200,
                 what="an HTTP/2 GET check answered")
        self.assertTrue(self.server(self.s1, "get")["healthy"])
        # the same check of an HTTP/1.1 server fails: it was HTTP/2
        self.gw.wait_log(r"upstream get1 server %s: failed 2 checks" % re.escape(self.plain.addr))
        self.assertFalse(health(self.gw, "get1")[0][self.plain.addr]["healthy"])

    def test_http1_server_fails(self):
        # an HTTP/1.1 server reads our preface as a bad request
        self.gw.wait_log(r"upstream plain server %s: failed 2 checks \(HTTP/2: [^)]*\): down" %
                         re.escape(self.plain.addr))
        self.assertFalse(health(self.gw, "plain")[0][self.plain.addr]["healthy"])


class Tls(Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tls = cert_with_san(cls.tmp)
        cls.s1, cls.s2 = cls.start_server("t1", tls), cls.start_server("t2", tls)
        cls.servers = (cls.s1, cls.s2)
        cls.start_gateway({
            "g": {"protocol": "h2", "tls": {"ca_file": tls["cert"], "server_name": "localhost"},
                  "servers": [{"address": cls.s1.addr}, {"address": cls.s2.addr}],
                  "health_check": check(service="sy.Echo", host="localhost")},
        })

    def test_serving_over_tls(self):
        self.assertEqual(self.server(self.s1)["last_check"]["status"], 200)
        self.s1.set({"": "SERVING", "sy.Echo": "NOT_SERVING"})
        self.goes(self.s1, False, "NOT_SERVING")
        self.s1.set(ALL_SERVING)
        self.goes(self.s1, True, None)
        self.s2.kill()
        self.goes(self.s2, False, "no answer")


if __name__ == "__main__":
    main()
