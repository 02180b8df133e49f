#!/usr/bin/python3
"""test_h2_upstream.py - plain HTTP (not gRPC) through Switchyard to HTTP/2
servers: pools of protocol "h2c" (prior knowledge) and "h2" (TLS, ALPN h2),
issue 25 section 1, end to end against h2_backend.py (python3-h2; run under
/usr/bin/python3).

- An HTTP/1.1 client (raw sockets, harness.Client) and an HTTP/2 client
  (curl --http2-prior-knowledge to a listener of protocols h1 and h2c) reach
  an h2c pool: GET, a 5 MB POST, a chunked upload, HEAD, 204, 304, and an
  answer without content-length (chunked to HTTP/1.1, close-delimited to
  HTTP/1.0).
- Forwarding as for HTTP/1 pools (compared with an h1 pool's, field by
  field): :authority from Host, X-Forwarded-For, X-Request-Id, a route's
  request_headers and strip_prefix; no connection-specific field ever
  reaches the server (RFC 9113 8.2.2), names in lower case (8.2.1).
- Response trailers: to an HTTP/2 client; to HTTP/1.1 only with TE: trailers.
- Multiplexing per worker up to the server's SETTINGS_MAX_CONCURRENT_STREAMS
  (5: four connections or more for 20 slow requests, also as a burst to a
  cold pool whose server sends its SETTINGS late; 100: one), and
  max_connections counting streams, not sockets.
- A graceful GOAWAY below POSTs in flight and REFUSED_STREAM: the streams
  the server never processed go again (RFC 9113 6.8, 8.7); no client sees
  an error.
- Failures: a killed server (the other serves), a dead pool (502), a slow
  server (504 after the route's timeout_ms, its stream cancelled), a slow
  HTTP/1.1 or HTTP/2 client of a 50 MB answer (it arrives whole, and
  Switchyard's RSS grows by far less: windows and watermarks bound it).
- "h2" over TLS with ALPN; a server that offers only http/1.1: 502 and a
  log line that says why.
Every wait is bounded; nothing asserts a duration.
"""
import hashlib
import os
import re
import socket
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.events

from h2_backend import H2Backend
from h2client import H2Client
from harness import (TIMEOUT, Client, Closed, GatewayCase, RssWatch, asan_env, build_request,
                     chunked, gateway_config, main, metrics_text, pattern_bytes, pattern_sha256,
                     upstream_cfg, wait_for)

CURL_TIMEOUT = int(TIMEOUT)
BIG = 50 << 20  # the slow clients' answer
# connection-specific fields (RFC 9113 8.2.2) and Host (8.3.1: :authority)
NOT_FORWARDED = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
                 "x-hop", "host"}


def h2c_config(upstreams, routes, workers=1, **kw):
    """A gateway config whose listener speaks HTTP/1.x and h2c."""
    cfg = gateway_config(upstreams=upstreams, routes=routes, workers=workers, **kw)
    cfg["listeners"][0]["protocols"] = ["h1", "h2c"]
    return cfg


def pool(*servers, protocol="h2c", **kw):
    return upstream_cfg(*servers, protocol=protocol, **kw)


def fields_of(rec):
    """{name: [values]} of a logged stream's fields."""
    out = {}
    for k, v in rec["fields"]:
        out.setdefault(k, []).append(v)
    return out


def run_all(fns, spacing=0.0):
    """Runs every fn in a thread of its own (started <spacing> s apart) and
    returns their results in order; an exception is returned as such."""
    out = [None] * len(fns)

    def run(i, fn):
        try:
            out[i] = fn()
        except Exception as e:  # noqa: BLE001 - the test asserts on it
            out[i] = e

    ts = [threading.Thread(target=run, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in ts:
        t.start()
        if spacing:
            time.sleep(spacing)
    for t in ts:
        t.join(TIMEOUT * 2)
    return out


def fetch(port, method, target, body=None, headers=None):
    """One request on a connection of its own: (status, body, response)."""
    with Client(port) as c:
        r = c.request(method, target, headers=headers, body=body)
        return r.status, r.body, r


def read_chunked(c):
    """The chunked body after a head read from <c>: (body, [trailer lines])."""
    body, trailers = b"", []
    while True:
        size = int(c.read_until(b"\r\n").split(b";")[0], 16)
        if size == 0:
            break
        body += c.read_exact(size)
        assert c.read_exact(2) == b"\r\n"
    while True:
        line = c.read_until(b"\r\n")
        if line == b"\r\n":
            return body, trailers
        trailers.append(line[:-2].decode("latin-1"))


class H2UpstreamCase(GatewayCase):
    def backend(self, name, **kw):
        b = H2Backend(self.tmp, name, **kw)
        self.addCleanup(b.stop)
        return b.start()

    def curl(self, port, path, *args):
        """(status, head text, body) of curl --http2-prior-knowledge."""
        head, body = self.tmp.file("curl-head"), self.tmp.file("curl-body")
        r = subprocess.run(["curl", "-sS", "--max-time", str(CURL_TIMEOUT), "-D", head, "-o", body,
                            "-w", "%{http_version} %{http_code}", "--http2-prior-knowledge"] +
                           list(args) + ["http://127.0.0.1:%d%s" % (port, path)],
                           capture_output=True, timeout=CURL_TIMEOUT + 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        version, status = r.stdout.decode().split()
        self.assertEqual(version, "2", "curl did not speak HTTP/2")
        with open(head, "rb") as f:
            h = f.read().decode("latin-1")
        with open(body, "rb") as f:
            b = f.read()
        return int(status), h, b


# ---------------------------------------------------------------------------


class Basics(H2UpstreamCase):
    """Both client protocols to one h2c pool, and forwarding compared with an
    HTTP/1 pool's."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.a = H2Backend(cls.tmp, "basic")
        cls._procs.append(cls.a)
        cls.a.start()
        cls.h1 = cls.shared_backend("h1")
        route_headers = {"set": {"X-Route": "{tenant}"}, "add": {"X-Trace": "t-{request_id}"}}
        cls.gw = cls.shared_gateway(h2c_config(
            {"app": pool(cls.a), "old": upstream_cfg(cls.h1)},
            [{"id": "api", "path": "/api/{tenant}/*{rest}", "upstream": "app",
              "strip_prefix": "/api", "request_headers": route_headers},
             {"id": "h1", "path": "/h1/{tenant}/*{rest}", "upstream": "old",
              "strip_prefix": "/h1", "request_headers": route_headers},
             {"id": "all", "path": "/*{rest}", "upstream": "app"}], workers=2))

    def setUp(self):
        self.a.reset()

    def answered(self, n=None):
        reqs = self.a.requests("answered")
        if n is not None:
            self.assertEqual(len(reqs), n, reqs)
        return reqs

    def test_get_h1_kept_alive(self):
        with Client(self.gw.port) as c:
            for i in range(3):
                r = c.request("GET", "/get?size=1000&i=%d" % i)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.header("Content-Length"), "1000")
                self.assertEqual(r.body, pattern_bytes(1000))
        reqs = self.answered(3)
        self.assertEqual([x["path"] for x in reqs], ["/get?size=1000&i=%d" % i for i in range(3)])
        self.assertEqual({(x["method"], x["scheme"], x["authority"]) for x in reqs},
                         {("GET", "http", "localhost")})
        # one client connection, one worker: its streams share one session
        self.assertEqual(len({x["conn"] for x in reqs}), 1, reqs)

    def test_empty_bodies_and_field_order(self):
        # Content-Length: 0 is no body: its HEADERS end the stream
        with Client(self.gw.port) as c:
            for m in ("POST", "GET", "DELETE"):
                r = c.request(m, "/empty-%s" % m, headers=[("Content-Length", "0")])
                self.assertEqual(r.status, 200, r)
        # the server checks that :authority comes with the other pseudo-
        # fields, before every field (RFC 9113 8.3), wherever Host was sent
        with Client(self.gw.port) as c:
            c.send(b"GET /late-host HTTP/1.1\r\nUser-Agent: t\r\nAccept: */*\r\n"
                   b"Host: late.example\r\n\r\n")
            self.assertEqual(c.read_response().status, 200)
        with Client(self.gw.port) as c:
            c.send(b"GET /no-host HTTP/1.0\r\nUser-Agent: t\r\n\r\n")
            self.assertEqual(c.read_response().status, 200)
        with Client(self.gw.port) as c:
            c.send(b"GET http://abs.example/abs HTTP/1.1\r\nUser-Agent: t\r\n"
                   b"Host: abs.example\r\n\r\n")
            self.assertEqual(c.read_response().status, 200)
        reqs = {x["path"]: x for x in self.answered()}
        self.assertEqual(reqs["/late-host"]["authority"], "late.example")
        self.assertEqual(reqs["/abs"]["authority"], "abs.example")
        self.assertIn("/no-host", reqs)
        for m in ("POST", "GET", "DELETE"):
            self.assertEqual(reqs["/empty-%s" % m]["body_bytes"], 0)

    def test_get_h2_client(self):
        st, h, b = self.curl(self.gw.port, "/get?size=70000")
        self.assertEqual(st, 200, h)
        self.assertEqual(b, pattern_bytes(70000))
        self.assertRegex(h, r"(?im)^content-length: 70000\r?$")
        rec = self.answered(1)[0]
        self.assertEqual((rec["method"], rec["path"]), ("GET", "/get?size=70000"))

    def test_post_5mb(self):
        data = os.urandom(5 << 20)
        sha = hashlib.sha256(data).hexdigest()
        with Client(self.gw.port) as c:
            r = c.request("POST", "/post", body=data)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["body_bytes"], r.json()["body_sha256"]), (5 << 20, sha))
        f = self.tmp.file("post-body")
        with open(f, "wb") as out:
            out.write(data)
        st, h, b = self.curl(self.gw.port, "/post", "--data-binary", "@" + f)
        self.assertEqual(st, 200, h)
        for rec in self.answered(2):
            self.assertEqual((rec["method"], rec["body_bytes"], rec["body_sha256"]),
                             ("POST", 5 << 20, sha))

    def test_chunked_upload_h1(self):
        parts = [os.urandom(100000 + i) for i in range(10)]
        data = b"".join(parts)
        with Client(self.gw.port) as c:
            r = c.request("POST", "/up", headers=[("Transfer-Encoding", "chunked")],
                          body=chunked(parts))
            self.assertEqual(r.status, 200, r)
            r2 = c.request("GET", "/after?size=10")  # the connection is still in step
            self.assertEqual((r2.status, r2.body), (200, pattern_bytes(10)))
        rec = self.answered(2)[0]
        self.assertEqual((rec["body_bytes"], rec["body_sha256"]),
                         (len(data), hashlib.sha256(data).hexdigest()))
        self.assertNotIn("transfer-encoding", fields_of(rec))

    def test_head_204_304(self):
        with Client(self.gw.port) as c:
            r = c.request("HEAD", "/h?size=12345")
            self.assertEqual((r.status, r.header("Content-Length"), r.body), (200, "12345", b""))
            for status in (204, 304):
                r = c.request("GET", "/n?status=%d" % status)
                self.assertEqual((r.status, r.body), (status, b""), r)
                self.assertIsNone(r.header("Transfer-Encoding"), r)
            r = c.request("GET", "/after?size=33")  # nothing stray was left in the stream
            self.assertEqual((r.status, r.body), (200, pattern_bytes(33)))
        st, h, b = self.curl(self.gw.port, "/h?size=12345", "-I")
        self.assertEqual(st, 200)
        self.assertRegex(h, r"(?im)^content-length: 12345\r?$")
        for status in (204, 304):
            st, h, b = self.curl(self.gw.port, "/n?status=%d" % status)
            self.assertEqual((st, b), (status, b""), h)
        reqs = self.answered(7)
        self.assertEqual([x["method"] for x in reqs], ["HEAD", "GET", "GET", "GET", "HEAD", "GET",
                                                        "GET"])

    def test_no_length_to_h11_is_chunked(self):
        n = 300000
        with Client(self.gw.port) as c:
            r = c.request("GET", "/c?size=%d&nolength=1" % n)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("Transfer-Encoding"), "chunked", r.headers)
            self.assertIsNone(r.header("Content-Length"))
            self.assertEqual(r.body, pattern_bytes(n))
            r = c.request("GET", "/after?size=5")  # kept alive after the last chunk
            self.assertEqual((r.status, r.body), (200, pattern_bytes(5)))
        st, h, b = self.curl(self.gw.port, "/c?size=%d&nolength=1" % n)
        self.assertEqual((st, b), (200, pattern_bytes(n)))

    def test_no_length_to_h10_is_close_delimited(self):
        n = 300000
        with Client(self.gw.port) as c:
            r = c.request("GET", "/c?size=%d&nolength=1" % n, version="1.0")
            self.assertEqual(r.status, 200, r)
            self.assertIsNone(r.header("Transfer-Encoding"), r.headers)
            self.assertIsNone(r.header("Content-Length"), r.headers)
            self.assertEqual(r.body, pattern_bytes(n))  # read until the close
            self.assertTrue(c.eof)

    # ---- forwarding

    def forward(self, prefix, rid=None):
        """The fields a server of <prefix>'s pool got for one request with
        connection-specific fields, and the response."""
        headers = [("Connection", "keep-alive, X-Hop"), ("X-Hop", "secret"),
                   ("Keep-Alive", "timeout=5"), ("Proxy-Connection", "keep-alive"),
                   ("TE", "gzip"), ("X-Custom", "v1")]
        if rid:
            headers.append(("X-Request-Id", rid))
        with Client(self.gw.port) as c:
            r = c.request("GET", "/%s/acme/thing?x=1" % prefix, headers=headers,
                          host="app.example.com:8080")
        self.assertEqual(r.status, 200, r)
        return r

    def test_forwarding_as_for_h1_pools(self):
        r = self.forward("api")
        rec = self.answered(1)[0]
        self.assertEqual(rec["path"], "/acme/thing?x=1")  # strip_prefix
        self.assertEqual(rec["authority"], "app.example.com:8080")  # from Host
        f = fields_of(rec)
        self.assertEqual(f.get("x-forwarded-for"), ["127.0.0.1"], f)
        self.assertEqual(f.get("x-request-id"), [r.header("X-Request-Id")], f)
        self.assertEqual(f.get("x-route"), ["acme"], f)
        self.assertEqual(f.get("x-trace"), ["t-" + r.header("X-Request-Id")], f)
        self.assertEqual(f.get("x-custom"), ["v1"], f)
        for k in f:
            self.assertEqual(k, k.lower(), "field names in lower case (RFC 9113 8.2.1)")
            self.assertNotIn(k, NOT_FORWARDED, "connection-specific field %s forwarded" % k)
        self.assertNotIn("te", f, "TE other than trailers forwarded (RFC 9113 8.2.2)")
        # the same request to an HTTP/1 pool: the same fields reach its server
        r1 = self.forward("h1")
        e = r1.json()
        self.assertEqual(e["target"], "/acme/thing?x=1")
        h1 = {}
        for k, v in e["headers"]:
            h1.setdefault(k.lower(), []).append(v)
        h1.pop("host")
        h1.pop("connection", None)  # Switchyard's own hop to an HTTP/1 server
        for name, values in (("x-request-id", [r1.header("X-Request-Id")]),
                             ("x-trace", ["t-" + r1.header("X-Request-Id")])):
            self.assertEqual(h1.pop(name), values)
        f.pop("x-request-id")
        f.pop("x-trace")
        self.assertEqual(f, h1, "an h2c pool's server gets what an HTTP/1 pool's gets")

    def test_request_id_passed_through(self):
        r = self.forward("api", rid="abc-123")
        self.assertEqual(r.header("X-Request-Id"), "abc-123")
        self.assertEqual(fields_of(self.answered(1)[0]).get("x-request-id"), ["abc-123"])

    def test_forwarding_from_h2_client(self):
        st, h, b = self.curl(self.gw.port, "/api/acme/thing?y=2", "-H", "Host: app.example.com",
                             "-H", "X-Custom: v2")
        self.assertEqual(st, 200, h)
        rid = re.search(r"(?im)^x-request-id: (\S+)\r?$", h).group(1)
        rec = self.answered(1)[0]
        self.assertEqual((rec["path"], rec["authority"]), ("/acme/thing?y=2", "app.example.com"))
        f = fields_of(rec)
        self.assertEqual(f.get("x-forwarded-for"), ["127.0.0.1"], f)
        self.assertEqual(f.get("x-request-id"), [rid])
        self.assertEqual((f.get("x-route"), f.get("x-custom")), (["acme"], ["v2"]))
        self.assertFalse(NOT_FORWARDED & set(f), f)

    # ---- trailers

    TRAILERS = "/t?size=11&nolength=1&trailers=x-checksum:abc123,x-count:2"

    def test_trailers_to_h2_client(self):
        st, h, b = self.curl(self.gw.port, self.TRAILERS)
        self.assertEqual((st, b), (200, pattern_bytes(11)))
        self.assertRegex(h, r"(?im)^x-checksum: abc123\r?$")
        self.assertRegex(h, r"(?im)^x-count: 2\r?$")

    def test_trailers_to_h11_only_with_te_trailers(self):
        with Client(self.gw.port) as c:
            c.send(build_request("GET", self.TRAILERS, [("TE", "trailers")]))
            r = c.read_head()
            self.assertEqual(r.status, 200, r.headers)
            self.assertEqual(r.header("Transfer-Encoding"), "chunked", r.headers)
            body, trailers = read_chunked(c)
            self.assertEqual(body, pattern_bytes(11))
            self.assertEqual([t.lower() for t in trailers], ["x-checksum: abc123", "x-count: 2"])
            # without TE: trailers, the same answer has none
            c.send(build_request("GET", self.TRAILERS))
            r = c.read_head()
            self.assertEqual(r.status, 200, r.headers)
            if r.header("Transfer-Encoding") == "chunked":
                body, trailers = read_chunked(c)
            else:
                body, trailers = c.read_exact(int(r.header("Content-Length"))), []
            self.assertEqual((body, trailers), (pattern_bytes(11), []))
        # the server saw TE: trailers only from the client that sent it
        reqs = self.answered(2)
        self.assertEqual(fields_of(reqs[0]).get("te"), ["trailers"])
        self.assertIsNone(fields_of(reqs[1]).get("te"))


# ---------------------------------------------------------------------------


class Multiplexing(H2UpstreamCase):
    """Streams per connection up to the server's SETTINGS_MAX_CONCURRENT_STREAMS,
    per worker ("workers": 1), and max_connections as streams."""

    def gateway(self, upstream):
        return self.own_gateway(h2c_config({"app": upstream},
                                           [{"id": "all", "path": "/*{rest}", "upstream": "app"}]))

    def slow_burst(self, gw, b, n, delay, spacing):
        out = run_all([lambda i=i: fetch(gw.port, "GET", "/slow?delay=%s&i=%d" % (delay, i))
                       for i in range(n)], spacing)
        got = [x if isinstance(x, Exception) else x[0] for x in out]
        seen = [(x["conn"], x["stream"], x["outcome"]) for x in b.requests()]
        self.assertTrue(got == [200] * n, "answers %s; the server saw (conn, stream, outcome) "
                        "%s\n%s" % (got, seen, gw.log()[-3000:]))
        return out

    def conns_of_slow(self, b):
        reqs = [x for x in b.requests("answered") if x["path"].startswith("/slow")]
        self.assertEqual(len(reqs), 20, reqs)
        return {x["conn"] for x in reqs}

    def test_max_concurrent_streams_5_opens_more_connections(self):
        b = self.backend("five", max_streams=5)
        gw = self.gateway(pool(b))
        self.assertEqual(fetch(gw.port, "GET", "/warm")[0], 200)  # its SETTINGS are known
        self.slow_burst(gw, b, 20, 3, 0.05)
        log = b.log()
        conns = self.conns_of_slow(b)
        self.assertGreaterEqual(len(conns), 4, log["conns"])
        for c in log["conns"]:
            self.assertLessEqual(c["peak"], 5, c)
        self.assertEqual([x for x in log["requests"] if x["outcome"] == "over_limit"], [],
                         "streams above the server's limit once its SETTINGS were known")

    def test_max_concurrent_streams_5_cold_burst(self):
        # all 20 at once to a cold pool whose server sends its SETTINGS a
        # moment after the accept: the streams sent before them beyond its
        # limit it refuses (RFC 9113 5.1.2), and they go again until served
        b = self.backend("fivecold", max_streams=5)
        b.set(settings_delay=0.3)
        gw = self.gateway(pool(b))
        self.slow_burst(gw, b, 20, 2, 0)
        self.assertGreaterEqual(len(self.conns_of_slow(b)), 4, b.log()["conns"])

    def test_max_concurrent_streams_100_one_connection(self):
        b = self.backend("hundred", max_streams=100)
        gw = self.gateway(pool(b))
        self.assertEqual(fetch(gw.port, "GET", "/warm")[0], 200)
        self.slow_burst(gw, b, 20, 2, 0.02)
        self.assertEqual(len(self.conns_of_slow(b)), 1, b.log()["conns"])
        self.assertGreaterEqual(b.log()["peak"], 10, "the slow requests were not concurrent")

    def test_max_connections_counts_streams(self):
        b = self.backend("limited", max_streams=100)
        gw = self.gateway(pool(b, max_connections=3, queue_timeout_ms=20000))
        out = run_all([lambda i=i: fetch(gw.port, "GET", "/slow?delay=0.5&i=%d" % i)
                       for i in range(10)])
        self.assertEqual([x if isinstance(x, Exception) else x[0] for x in out], [200] * 10)
        log = b.log()
        self.assertEqual(log["peak"], 3, "streams at once at the server (max_connections 3)")
        self.assertEqual(len(b.requests("answered")), 10)


# ---------------------------------------------------------------------------


class Unprocessed(H2UpstreamCase):
    """Streams the server never processed go again, even POSTs."""

    def setUp(self):
        self.b = self.backend("goaway")
        self.gw = self.own_gateway(h2c_config(
            {"app": pool(self.b)}, [{"id": "all", "path": "/*{rest}", "upstream": "app"}]))
        self.assertEqual(fetch(self.gw.port, "GET", "/warm")[0], 200)
        self.b.reset()

    def test_graceful_goaway_with_posts_in_flight(self):
        bodies = [os.urandom(20000 + i) for i in range(6)]
        self.b.set(goaway_at=6)
        out = run_all([lambda i=i: fetch(self.gw.port, "POST", "/g?i=%d" % i, body=bodies[i])
                       for i in range(6)], 0.05)
        for i, x in enumerate(out):
            self.assertFalse(isinstance(x, Exception), "POST %d: %r" % (i, x))
            self.assertEqual(x[0], 200, "POST %d: %r" % (i, x[2]))
            e = x[2].json()
            self.assertEqual((e["path"], e["body_sha256"]),
                             ("/g?i=%d" % i, hashlib.sha256(bodies[i]).hexdigest()))
        log = self.b.log()
        first = [c for c in log["conns"] if c["goaway_last"] is not None]
        self.assertEqual(len(first), 1, log["conns"])
        ignored = [x for x in log["requests"] if x["outcome"] == "ignored"]
        answered = [x for x in log["requests"] if x["outcome"] == "answered"]
        self.assertEqual(len(ignored), 3, log["requests"])
        self.assertEqual(sorted(x["path"] for x in answered), ["/g?i=%d" % i for i in range(6)])
        # those above the last stream id were answered on another connection
        retried = {x["path"] for x in ignored}
        for x in answered:
            self.assertEqual(x["conn"] != first[0]["id"], x["path"] in retried, x)

    def test_refused_stream_post_retried(self):
        data = os.urandom(30000)
        sha = hashlib.sha256(data).hexdigest()
        self.b.set(refuse=1)
        st, _, r = fetch(self.gw.port, "POST", "/r1", body=data)
        self.assertEqual(st, 200, r)
        self.assertEqual(r.json()["body_sha256"], sha)
        # a streamed (chunked) POST as well: what went before is sent again
        self.b.set(refuse=1)
        with Client(self.gw.port) as c:
            r = c.request("POST", "/r2", headers=[("Transfer-Encoding", "chunked")],
                          body=chunked([data[:10000], data[10000:]]))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["body_sha256"], sha)
        log = self.b.requests()
        self.assertEqual([(x["path"], x["outcome"]) for x in log],
                         [("/r1", "refused"), ("/r1", "answered"), ("/r2", "refused"),
                          ("/r2", "answered")])
        self.assertEqual({x["body_bytes"] for x in log if x["outcome"] == "answered"}, {30000})


    def test_post_given_up_while_connecting_never_reaches_that_server(self):
        # A server whose accept queue is full: a connect to it stays in
        # SYN_SENT. A POST's first try waits there past its timeout_ms and
        # goes to the other server; when the connect completes later,
        # nothing of that POST may reach the first server, or it would run
        # twice. (Frames queued before the connection opened did.)
        slow = socket.socket()
        slow.bind(("127.0.0.1", 0))
        slow.listen(0)
        self.addCleanup(slow.close)
        port = slow.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))  # the queue's one place
        self.addCleanup(filler.close)
        fast = self.backend("fast")
        gw = self.own_gateway(h2c_config(
            {"two": {"protocol": "h2c", "balance": "round_robin", "connect_timeout_ms": 15000,
                     "servers": [{"address": "127.0.0.1:%d" % port}, {"address": fast.addr}]}},
            [{"id": "all", "path": "/*{rest}", "upstream": "two", "timeout_ms": 400}]))
        retried = r"upstream two server 127\.0\.0\.1:%d .*retrying on another server" % port
        for i in range(4):
            since = gw.log_size()
            st, _, r = fetch(gw.port, "POST", "/once-%d" % i, body=b"x" * 1000)
            self.assertEqual(st, 200, r)
            if re.search(retried, gw.log()[since:]):
                break
        else:
            self.fail("no POST went to the server that does not accept\n" + gw.log()[-2000:])
        # the queue frees: the pending connect completes (a SYN sent again)
        held, _ = slow.accept()
        self.addCleanup(held.close)
        slow.settimeout(10)
        conn, _ = slow.accept()
        self.addCleanup(conn.close)
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        h2conn.initiate_connection()
        conn.sendall(h2conn.data_to_send())
        conn.settimeout(0.2)
        got, seen = [], b""
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                d = conn.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            seen += d
            for ev in h2conn.receive_data(d):
                if isinstance(ev, h2.events.RequestReceived):
                    got.append(dict(ev.headers).get(b":path"))
        self.assertTrue(seen.startswith(b"PRI * HTTP/2.0"), "the connection never opened: %r"
                        % seen[:40])
        self.assertEqual(got, [], "a POST given up before its connection opened reached "
                                  "the server")
        self.assertIn("/once-%d" % i, [x["path"] for x in fast.requests("answered")])


# ---------------------------------------------------------------------------


class Failures(H2UpstreamCase):
    def test_killed_server_then_dead_pool(self):
        a, b = self.backend("ka"), self.backend("kb")
        gw = self.own_gateway(h2c_config(
            {"app": pool(a, b), "lone": pool(a)},
            [{"id": "lone", "path": "/lone/*{rest}", "upstream": "lone"},
             {"id": "all", "path": "/*{rest}", "upstream": "app"}]))
        for i in range(4):
            self.assertEqual(fetch(gw.port, "GET", "/w%d" % i)[0], 200)
        self.assertTrue(a.requests("answered") and b.requests("answered"), "round robin")
        a.kill()
        b.reset()
        for i in range(6):
            method = "POST" if i % 2 else "GET"
            st, _, r = fetch(gw.port, method, "/after%d" % i, body=b"x" * 100 if i % 2 else None)
            self.assertEqual(st, 200, "%s /after%d: %r\n%s" % (method, i, r, gw.log()[-3000:]))
        self.assertEqual(len(b.requests("answered")), 6, "the other server serves them all")
        st, _, r = fetch(gw.port, "GET", "/lone/x")
        self.assertEqual(st, 502, r)
        b.kill()
        st, _, r = fetch(gw.port, "GET", "/y")
        self.assertIn(st, (502, 503), r)
        if st == 503:
            self.assertEqual(r.header("Retry-After"), "1")

    def test_slow_server_504(self):
        b = self.backend("slow")
        gw = self.own_gateway(h2c_config(
            {"app": pool(b)}, [{"id": "slow", "path": "/*{rest}", "upstream": "app",
                                "timeout_ms": 500}]))
        for method, body in (("GET", None), ("POST", b"p" * 1000)):
            st, _, r = fetch(gw.port, method, "/s?delay=5", body=body)
            self.assertEqual(st, 504, r)
        # the streams are cancelled at the server, not left to run
        wait_for(lambda: len(b.requests("reset")) == 2, what="both streams reset upstream")
        self.assertEqual(b.log()["inflight"], 0)

    def slow_client_gateway(self):
        b = self.backend("big")
        gw = self.own_gateway(h2c_config(
            {"app": pool(b)}, [{"id": "all", "path": "/*{rest}", "upstream": "app"}]),
            env=asan_env())
        self.assertEqual(fetch(gw.port, "GET", "/warm?size=100000")[0], 200)
        metrics_text(gw)  # the admin thread's start is behind it: RSS is settled
        return gw

    def assertBounded(self, grew, gw):
        self.assertLess(grew, 16 << 10, "RSS grew %d KiB for a %d MiB answer\n%s" % (
            grew, BIG >> 20, gw.log()[-3000:]))

    def test_slow_h1_client_of_50mb_bounded_rss(self):
        gw = self.slow_client_gateway()
        watch = RssWatch(gw.pid())
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        s.settimeout(TIMEOUT)
        s.connect(("127.0.0.1", gw.port))
        c = Client(gw.port, sock=s)
        h = hashlib.sha256()
        got = 0
        try:
            c.send(build_request("GET", "/big?size=%d" % BIG))
            r = c.read_head()
            self.assertEqual((r.status, r.header("Content-Length")), (200, str(BIG)))
            time.sleep(3)  # not reading: whatever Switchyard holds piles up now
            got = len(c.buf)
            h.update(bytes(c.buf))
            c.buf.clear()
            while got < BIG:
                try:
                    d = s.recv(min(256 << 10, BIG - got))
                except socket.timeout:
                    self.fail("nothing more after %d bytes of %d: the answer stalled\n%s" % (
                        got, BIG, gw.log()[-3000:]))
                if not d:
                    raise Closed("closed after %d bytes" % got)
                h.update(d)
                got += len(d)
                time.sleep(0.002)  # slower than the server
        finally:
            grew = watch.finish()
            c.close()
        self.assertEqual(h.hexdigest(), pattern_sha256(BIG))
        self.assertBounded(grew, gw)

    def test_clients_that_never_read_do_not_stall_the_others(self):
        # 70 clients that read nothing each hold their stream's window of
        # the one upstream connection; a connection's window covers all its
        # streams' windows, so another client's answer still flows
        gw = self.slow_client_gateway()
        socks = []
        try:
            for i in range(70):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(TIMEOUT)
                s.connect(("127.0.0.1", gw.port))
                s.sendall(build_request("GET", "/big?size=%d&i=%d" % (4 << 20, i)))
                socks.append(s)
            time.sleep(2)  # every window they take is taken by now
            t0 = time.monotonic()
            st, body, _ = fetch(gw.port, "GET", "/small?size=3")
            took = time.monotonic() - t0
        finally:
            for s in socks:
                s.close()
        self.assertEqual((st, body), (200, pattern_bytes(3)))
        self.assertLess(took, 5, "a 3-byte answer took %.1f s behind clients that do not read"
                        % took)

    def test_slow_h2_client_of_50mb_bounded_rss(self):
        gw = self.slow_client_gateway()
        watch = RssWatch(gw.pid())
        try:
            with H2Client(gw.port, rcvbuf=64 << 10) as c:
                sid = c.start("GET", "/big?size=%d" % BIG)
                time.sleep(3)  # not reading
                try:
                    res = c.collect([sid], timeout=TIMEOUT)[sid]
                except AssertionError as e:
                    got = sum(len(p) for p in c.results[sid].parts)
                    self.fail("%s: %d bytes of %d, the answer stalled\n%s" % (
                        e, got, BIG, gw.log()[-3000:]))
        finally:
            grew = watch.finish()
        self.assertEqual((res.status, len(res.body)), (200, BIG))
        self.assertEqual(hashlib.sha256(res.body).hexdigest(), pattern_sha256(BIG))
        self.assertBounded(grew, gw)


# ---------------------------------------------------------------------------

CERTS = r"""
set -e; cd "$1"; Q='-nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256'
openssl req -x509 $Q -keyout ca.key -out ca.pem -subj /CN=h2ca -days 30 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign 2>/dev/null
openssl req -new $Q -keyout backend.key -out backend.csr -subj /CN=backend 2>/dev/null
printf 'subjectAltName=DNS:backend.example.com,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > b.ext
openssl x509 -req -in backend.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile b.ext -out backend.pem 2>/dev/null
"""


class OverTLS(H2UpstreamCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        d = cls.tmp.file("certs")
        os.mkdir(d)
        subprocess.run(["sh", "-c", CERTS, "certs", d], check=True, timeout=60)
        cls.ca = os.path.join(d, "ca.pem")
        cls.cert = {"cert": os.path.join(d, "backend.pem"), "key": os.path.join(d, "backend.key")}

    def tls_pool(self, b):
        return pool(b, protocol="h2", tls={"ca_file": self.ca,
                                           "server_name": "backend.example.com"})

    def test_h2_pool_over_tls(self):
        b = self.backend("tls", tls=self.cert)
        gw = self.own_gateway(h2c_config(
            {"app": self.tls_pool(b)}, [{"id": "all", "path": "/*{rest}", "upstream": "app"}]))
        data = os.urandom(1 << 20)
        with Client(gw.port) as c:
            r = c.request("GET", "/get?size=100000")
            self.assertEqual((r.status, r.body), (200, pattern_bytes(100000)))
            r = c.request("POST", "/post", body=data)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body_sha256"], hashlib.sha256(data).hexdigest())
        st, h, body = self.curl(gw.port, "/get?size=1000")
        self.assertEqual((st, body), (200, pattern_bytes(1000)))
        log = b.log()
        self.assertEqual({c["alpn"] for c in log["conns"]}, {"h2"})
        self.assertEqual({x["scheme"] for x in log["requests"]}, {"https"})
        self.assertEqual(len(b.requests("answered")), 3)

    def test_h2_pool_server_offers_only_http11(self):
        b = self.backend("alpn11", tls=self.cert, alpn="http/1.1")
        gw = self.own_gateway(h2c_config(
            {"app": self.tls_pool(b)}, [{"id": "all", "path": "/*{rest}", "upstream": "app"}]))
        st, _, r = fetch(gw.port, "GET", "/x")
        self.assertEqual(st, 502, r)
        gw.wait_log(r"upstream app server 127\.0\.0\.1:%d: the server did not choose h2 by ALPN"
                    % b.port)
        # nothing was sent to it as HTTP/1.1 instead
        self.assertEqual([x for x in b.log()["http1"] if "line" in x], [])


if __name__ == "__main__":
    main()
