#!/usr/bin/env python3
"""test_compress.py - the "compress" policy (issue 27) end to end: bodies
of many sizes and framings (a known length around min_length, large text,
JSON, chunked, a slow chunked stream with pauses) fetched with curl over
HTTP/1.1 and HTTP/2 (h2c) with Accept-Encoding q-values choosing each
coding, decoded by the reference tools (gzip -dc, brotli -dc, zstd -dc)
and compared byte for byte with what the backend sent; the head's edits
(Content-Encoding, Vary, a weakened ETag, no Content-Length, chunked on
HTTP/1.1); a slow stream's pieces decodable as they come (flushed); every
never-compress case; a client gone mid-body; bad configs refused at their
JSON paths. The backend is the test's own (HeadServer): it answers each
path with the head and body the test chose."""
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "admin"))

from adminlib import Admin, admin_port, metric, parse_prometheus, wait_ready  # noqa: E402
from h2_backend import H2Backend  # noqa: E402
from harness import (TIMEOUT, GatewayCase, HeadServer, free_port, gateway_config,  # noqa: E402
                     main, metrics_text, pattern_bytes, upstream_cfg, wait_for)

MIN = 1024
DECODE = {"gzip": ["gzip", "-dc"], "br": ["brotli", "-dc"], "zstd": ["zstd", "-dc"]}
CHOOSE = {  # an Accept-Encoding whose q-values pick each coding
    "gzip": "zstd;q=0.2, br;q=0.5, gzip;q=1.0, identity;q=0.1",
    "br": "gzip;q=0.8, br;q=0.9, zstd;q=0",
    "zstd": "gzip;q=0.5, zstd, br;q=0.99",
}


def text(n, seed=0):
    words = [b"switchyard", b"proxy", b"compress", b"stream", b"route", b"policy",
             b"upstream", b"gateway", b"zstd", b"brotli", b"gzip"]
    out, i = bytearray(), seed
    while len(out) < n:
        i = (i * 1103515245 + 12345) & 0x7fffffff
        out += words[i % len(words)] + (b"\n" if i % 13 == 0 else b" ")
    return bytes(out[:n])


def json_body(n):
    items, size = [], 0
    while size < n:
        item = {"id": len(items), "name": "item-%d" % len(items), "tags": ["a", "b"],
                "price": len(items) * 1.25}
        items.append(item)
        size += len(json.dumps(item)) + 2
    return json.dumps(items).encode()


class Upstream(HeadServer):
    """Answers GET and HEAD /<name> from self.bodies[name]: (status,
    [(field, value)], body, framing) with framing "cl" (Content-Length),
    "chunked" (pieces of 1000), "slow" (pieces with a pause, or until
    self.go is set, between them) or "close" (ends by the close). One
    request a connection."""

    def __init__(self):
        self.bodies = {}
        self.go = threading.Event()
        self.sent_first = threading.Event()
        super().__init__()

    def answer_head(self, s, head):
        method, target = head.split(b"\r\n", 1)[0].decode().split(" ")[:2]
        self.answer_req(s, method, target.lstrip("/").split("?")[0])
        return False  # one request a connection: closed

    def answer_req(self, s, method, name):
        status, fields, body, framing = self.bodies[name]
        head = "HTTP/1.1 %d X\r\nConnection: close\r\n" % status
        head += "".join("%s: %s\r\n" % f for f in fields)
        if framing == "cl":
            head += "Content-Length: %d\r\n" % len(body)
        elif framing in ("chunked", "slow"):
            head += "Transfer-Encoding: chunked\r\n"
        s.sendall(head.encode() + b"\r\n")
        if method == "HEAD" or status in (204, 304):
            return
        if framing in ("cl", "close"):
            s.sendall(body)
            return
        step = 1000 if framing == "chunked" else max(1, len(body) // 4)
        for i in range(0, len(body), step):
            piece = body[i:i + step]
            s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            if framing == "slow":
                if i == 0:
                    self.sent_first.set()
                    self.go.wait(0.3)
                else:
                    time.sleep(0.1)
        s.sendall(b"0\r\n\r\n")


def parse_head(raw):
    """The last head of curl's -D output: (status, {lower name: [values]})."""
    heads = [h for h in raw.decode("latin-1").split("\r\n\r\n") if h.strip()]
    lines = heads[-1].split("\r\n")
    fields = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        fields.setdefault(k.strip().lower(), []).append(v.strip())
    return int(lines[0].split(" ")[1]), fields


class CompressTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.up = Upstream()
        cls.addClassCleanup(cls.up.close)
        cls.policies = {
            "squeeze": {"type": "compress", "encodings": ["zstd", "br", "gzip"],
                        "types": ["text/*", "application/json"], "min_length": MIN,
                        "levels": {"zstd": 3, "br": 4, "gzip": 6}},
        }
        cls.h2b = H2Backend(cls.tmp, "h2b")
        cls._procs.append(cls.h2b)
        cls.h2b.start()
        cls.cfg = gateway_config(
            upstreams={"u": upstream_cfg(cls.up.addr),
                       "h2": upstream_cfg(cls.h2b, protocol="h2c")},
            routes=[{"id": "h2", "path": "/h2/*{rest}", "upstream": "h2",
                     "policies": ["squeeze"]},
                    {"id": "z", "path": "/*{rest}", "upstream": "u", "policies": ["squeeze"]}],
            policies=cls.policies)
        cls.cfg["listeners"] = [{"address": "127.0.0.1:%d" % free_port(),
                                 "protocols": ["h1", "h2c"]}]
        cls.gw = cls.shared_gateway(cls.cfg)
        wait_ready(cls.gw)
        cls.api = Admin(admin_port(cls.cfg))
        tx = [("Content-Type", "text/plain; charset=utf-8"), ("ETag", '"v1"')]
        js = [("Content-Type", "application/json"), ("Vary", "Origin")]
        cls.cases = {
            "below": (200, tx, text(MIN - 1), "cl"),
            "at": (200, tx, text(MIN, 1), "cl"),
            "above": (200, tx, text(MIN + 1, 2), "cl"),
            "large": (200, tx, text(3 << 20, 3), "cl"),
            "json": (200, js, json_body(200000), "cl"),
            "chunked": (200, tx, text(300000, 4), "chunked"),
            "small-chunked": (200, tx, text(700, 5), "chunked"),
            "close": (200, tx, text(50000, 6), "close"),
            "slow": (200, tx, text(40000, 7), "slow"),
        }
        cls.up.bodies.update(cls.cases)

    def curl(self, name, ae, proto="1.1", head=False, extra=()):
        hdr, body = self.tmp.file("h"), self.tmp.file("b")
        args = ["curl", "-sS", "--max-time", "30", "-D", hdr, "-o", body,
                "--http1.1" if proto == "1.1" else
                ("--http1.0" if proto == "1.0" else "--http2-prior-knowledge")]
        if ae is not None:
            args += ["-H", "Accept-Encoding: " + ae]
        if head:
            args.append("-I")
        args += list(extra)
        args.append("http://127.0.0.1:%d/%s" % (self.gw.port, name))
        subprocess.run(args, check=True, timeout=60)
        with open(hdr, "rb") as f:
            status, fields = parse_head(f.read())
        with open(body, "rb") as f:
            return status, fields, f.read()

    def decode(self, coding, data):
        p = subprocess.run(DECODE[coding], input=data, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_round_trips(self):
        for coding, ae in CHOOSE.items():
            for proto in ("1.1", "2"):
                for name, (_, fields, body, framing) in self.cases.items():
                    with self.subTest(coding=coding, proto=proto, body=name):
                        status, h, got = self.curl(name, ae, proto)
                        self.assertEqual(status, 200)
                        if name == "below":
                            self.assertNotIn("content-encoding", h)
                            self.assertEqual(got, body)
                            self.assertEqual(h.get("vary", []),
                                             [v for k, v in fields if k == "Vary"])
                            continue
                        self.assertEqual(h.get("content-encoding"), [coding], h)
                        self.assertEqual(self.decode(coding, got), body)
                        self.assertNotIn("content-length", h)
                        vary = ", ".join(h.get("vary", [])).lower()
                        self.assertIn("accept-encoding", vary)
                        if name == "json":
                            self.assertIn("origin", vary)
                        else:
                            self.assertEqual(h.get("etag"), ['W/"v1"'])
                        if proto == "1.1":
                            self.assertEqual(h.get("transfer-encoding"), ["chunked"])
                        else:
                            self.assertNotIn("transfer-encoding", h)
                        if name in ("large", "json"):
                            self.assertLess(len(got), len(body) // 2)

    def test_metrics_count_what_was_encoded(self):
        """/metrics: switchyard_compress_responses_total{policy,coding} and the
        body bytes in and out; an answer left as it is counts in none."""
        def counts():
            _, m = parse_prometheus(metrics_text(self.gw))
            return ([metric(m, "switchyard_compress_responses_total", policy="squeeze",
                            coding=c) for c in ("gzip", "br", "zstd")],
                    metric(m, "switchyard_compress_in_bytes_total", policy="squeeze"),
                    metric(m, "switchyard_compress_out_bytes_total", policy="squeeze"))

        (n0, in0, out0) = counts()
        body = self.cases["json"][2]
        for ae, proto in (("gzip", "1.1"), ("gzip", "2"), ("zstd", "1.1")):
            status, h, got = self.curl("json", ae, proto)
            self.assertEqual(h.get("content-encoding"), [ae])
        self.curl("below", "gzip")  # under min_length: as it is
        self.curl("json", None)  # no Accept-Encoding: as it is
        (n1, in1, out1) = counts()
        self.assertEqual([b - a for a, b in zip(n0, n1)], [2, 0, 1])
        self.assertEqual(in1 - in0, 3 * len(body))
        self.assertGreater(out1 - out0, 0)
        self.assertLess(out1 - out0, (in1 - in0) // 2)

    def test_http2_upstream(self):
        # an h2c pool's answers (proxy_h2.c): with and without a length, slow
        queries = {
            "sized": (300000, "size=300000&type=text/plain"),
            "unsized": (300000, "size=300000&nolength=1&type=text/html"),
            "slow": (50000, "size=50000&nolength=1&body_delay=0.2&type=text/plain"),
            "short": (500, "size=500&type=text/plain"),
        }
        for coding, ae in CHOOSE.items():
            for proto in ("1.1", "2"):
                for name, (n, q) in queries.items():
                    with self.subTest(coding=coding, proto=proto, body=name):
                        status, h, got = self.curl("h2/x?" + q, ae, proto)
                        self.assertEqual(status, 200)
                        if name == "short":
                            self.assertNotIn("content-encoding", h)
                            self.assertEqual(got, pattern_bytes(n))
                            continue
                        self.assertEqual(h.get("content-encoding"), [coding], h)
                        self.assertNotIn("content-length", h)
                        self.assertEqual(self.decode(coding, got), pattern_bytes(n))
                        if proto == "1.1":
                            self.assertEqual(h.get("transfer-encoding"), ["chunked"])

    def test_http10_client_close_delimited(self):
        status, h, got = self.curl("above", "gzip", "1.0")
        self.assertEqual(status, 200)
        self.assertEqual(h.get("content-encoding"), ["gzip"])
        self.assertNotIn("transfer-encoding", h)
        self.assertEqual(self.decode("gzip", got), self.cases["above"][2])

    def test_keep_alive_after_a_compressed_answer(self):
        # two answers on one HTTP/1.1 connection: the chunked framing ended right
        url = "http://127.0.0.1:%d/" % self.gw.port
        out = self.tmp.file("two")
        subprocess.run(["curl", "-sS", "--http1.1", "-H", "Accept-Encoding: gzip", "-o", out,
                        url + "above", "-o", out + "2", url + "chunked"], check=True, timeout=60)
        for path, name in ((out, "above"), (out + "2", "chunked")):
            with open(path, "rb") as f:
                self.assertEqual(self.decode("gzip", f.read()), self.cases[name][2])

    def test_slow_stream_is_flushed(self):
        # the first piece is decodable before the backend sends the second
        body = self.cases["slow"][2]
        self.up.go.clear()
        self.up.sent_first.clear()
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=TIMEOUT)
        self.addCleanup(s.close)
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        self.assertTrue(self.up.sent_first.wait(TIMEOUT))
        raw, plain = b"", b""
        deadline = time.time() + TIMEOUT
        while len(plain) < len(body) // 4 and time.time() < deadline:
            raw += s.recv(65536)
            head, sep, rest = raw.partition(b"\r\n\r\n")
            if not sep:
                continue
            plain = zlib.decompressobj(wbits=31).decompress(dechunk(rest)[0])
        self.up.go.set()
        self.assertEqual(plain, body[:len(body) // 4])

    def test_never_compressed(self):
        big = text(5000, 9)
        tx = ("Content-Type", "text/plain")
        cases = {
            "n-204": (204, [tx], b"", "cl"),
            "n-304": (304, [tx, ("ETag", '"e"')], b"", "cl"),
            "n-206": (206, [tx, ("Content-Range", "bytes 0-4999/9000")], big, "cl"),
            "n-encoded": (200, [tx, ("Content-Encoding", "br")], big, "cl"),
            "n-no-transform": (200, [tx, ("Cache-Control", "public, no-transform")], big, "cl"),
            "n-type": (200, [("Content-Type", "image/png")], big, "cl"),
            "n-no-type": (200, [], big, "cl"),
            "n-short": (200, [tx], big[:100], "cl"),
            "n-grpc": (200, [("Content-Type", "application/grpc+json")], big, "cl"),
        }
        self.up.bodies.update(cases)
        for proto in ("1.1", "2"):
            for name, (status, fields, body, _) in cases.items():
                with self.subTest(proto=proto, case=name):
                    st, h, got = self.curl(name, "gzip, br, zstd", proto)
                    self.assertEqual(st, status)
                    ce = [v for k, v in fields if k == "Content-Encoding"]
                    self.assertEqual(h.get("content-encoding", []), ce)
                    self.assertEqual(got, body)
                    self.assertNotIn("W/", " ".join(h.get("etag", [])))
        for proto in ("1.1", "2"):
            with self.subTest(proto=proto, case="HEAD"):
                st, h, got = self.curl("large", "gzip", proto, head=True)
                self.assertEqual(st, 200)
                self.assertNotIn("content-encoding", h)
                self.assertEqual(h.get("content-length"), [str(3 << 20)])
        # what could have been compressed says it varies by Accept-Encoding
        for case, ae in (("no Accept-Encoding", None),
                         ("identity only", "gzip;q=0, br;q=0, zstd;q=0, identity")):
            for name, vary in (("large", ["Accept-Encoding"]), ("json", ["Origin", "Accept-Encoding"])):
                with self.subTest(case=case, body=name):
                    st, h, got = self.curl(name, ae)
                    self.assertNotIn("content-encoding", h)
                    self.assertEqual(got, self.cases[name][2])
                    self.assertEqual(h.get("vary"), vary)
        self.up.bodies["n-varies"] = (200, [("Content-Type", "text/plain"),
                                            ("Vary", "accept-encoding")], text(5000), "cl")
        st, h, got = self.curl("n-varies", None)
        self.assertEqual(h.get("vary"), ["accept-encoding"])

    def test_client_gone_mid_body(self):
        # clients that leave mid-body: the encoders go with their requests
        # (ASan's leak check at exit says so in a sanitizer build)
        for proto, coding, path in itertools.product(
                ("1.1", "2"), ("gzip", "br", "zstd"),
                ("large", "h2/x?size=3000000&nolength=1&type=text/plain")):
            with self.subTest(proto=proto, coding=coding, path=path):
                args = ["curl", "-sS", "--max-time", "30", "-H", "Accept-Encoding: " + coding,
                        "--http1.1" if proto == "1.1" else "--http2-prior-knowledge",
                        "--limit-rate", "200k",
                        "http://127.0.0.1:%d/%s" % (self.gw.port, path)]
                p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                p.stdout.read(20000)
                p.kill()
                p.wait(timeout=TIMEOUT)
                p.stdout.close()
        st, h, got = self.curl("above", "zstd", "2")
        self.assertEqual(self.decode("zstd", got), self.cases["above"][2])

    def push_errors(self, policies, names):
        """The errors of a push of <policies> with a route naming <names>
        (which must be refused)."""
        new = dict(self.cfg, policies=policies,
                   routes=[{"id": "r", "path": "/r", "upstream": "u", "policies": names}])
        r = self.api.put("/config", new)
        self.assertEqual(r.status, 400, r)
        return r.json["errors"]

    def test_bad_configs_refused_at_their_paths(self):
        bad = [
            ({"type": "compress", "encodings": ["zstd", "lz4"]}, "/policies/p/encodings/1", "lz4"),
            ({"type": "compress", "levels": {"gzip": 10}}, "/policies/p/levels/gzip", "between 1 and 9"),
            ({"type": "compress", "levels": {"zstd": 20}}, "/policies/p/levels/zstd", None),
            ({"type": "compress", "levels": {"deflate": 1}}, "/policies/p/levels/deflate", None),
            ({"type": "compress", "types": ["text"]}, "/policies/p/types/0", "type/subtype"),
            ({"type": "compress", "min_lenght": 5}, "/policies/p/min_lenght", None),
        ]
        for pol, path, hint in bad:
            with self.subTest(path=path):
                errs = self.push_errors({"p": pol}, ["p"])
                self.assertIn(path, [e["path"] for e in errs], errs)
                self.assertIn(hint or "", json.dumps(errs))
        errs = self.push_errors({"p": {"type": "compress"}, "q": {"type": "compress"}}, ["p", "q"])
        self.assertIn("/routes/0/policies/1", [e["path"] for e in errs])
        wait_for(lambda: self.curl("above", "gzip")[1].get("content-encoding") == ["gzip"],
                 what="the live config still compressing")


def dechunk(data):
    """The payload of chunked <data> as far as it is whole."""
    out, i = b"", 0
    while True:
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        n = int(data[i:j].split(b";")[0], 16)
        if n == 0 or j + 2 + n + 2 > len(data):
            break
        out += data[j + 2:j + 2 + n]
        i = j + 2 + n + 2
    return out, i


if __name__ == "__main__":
    main()
