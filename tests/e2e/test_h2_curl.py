#!/usr/bin/python3
"""test_h2_curl.py - curl over HTTP/2: `curl --http2` (TLS, ALPN) and
`curl --http2-prior-knowledge` (h2c) against h2case's target
(SY_H2_TARGET: switchyard, the default, or nginx).

GET, POST with a 1 MiB body, HEAD, a 32 MiB response (its sha256), response
trailers from a chunked upstream answer, request trailers (from
h2client.RawConn: curl cannot send them), and the access log's line in
combined format naming HTTP/2.0. Run it with /usr/bin/python3 (python3-h2,
for the request trailers). Every curl runs under a timeout.
"""
import hashlib
import os
import re
import subprocess
import urllib.parse

from h2case import H2Case, deviation
from h2client import RawConn, data_frame
from harness import TIMEOUT, main, pattern_sha256, wait_for

CURL_TIMEOUT = int(TIMEOUT)


class Curl(H2Case):
    ACCESS_LOG = True

    def curl(self, tls, path, *args):
        """(http_version, status, headers text, body) of one curl run over
        h2 (<tls>) or h2c."""
        t = self.h2 if tls else self.h2c
        url = "%s://127.0.0.1:%d%s" % (t.scheme, t.port, path)
        head = self.tmp.file("curl-head")
        body = self.tmp.file("curl-body")
        mode = ["-k", "--http2"] if tls else ["--http2-prior-knowledge"]
        r = subprocess.run(["curl", "-sS", "--max-time", str(CURL_TIMEOUT), "-D", head, "-o", body,
                            "-w", "%{http_version} %{http_code}", "-H", "Host: localhost"] +
                           mode + list(args) + [url],
                           capture_output=True, timeout=CURL_TIMEOUT + 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        version, status = r.stdout.decode().split()
        with open(head, "rb") as f:
            h = f.read().decode("latin-1")
        with open(body, "rb") as f:
            b = f.read()
        return version, int(status), h, b

    def both(self):
        return (True, False)

    def test_get(self):
        for tls in self.both():
            v, st, h, b = self.curl(tls, "/get?x=1")
            self.assertEqual((v, st), ("2", 200), (tls, h))
            self.assertRegex(h, r"^HTTP/2 200")
            self.assertIn(b'"path": "/get"', b)

    def test_post_body(self):
        data = os.urandom(1 << 20)
        f = self.tmp.file("post-body")
        with open(f, "wb") as out:
            out.write(data)
        for tls in self.both():
            v, st, _, b = self.curl(tls, "/post", "--data-binary", "@" + f)
            self.assertEqual((v, st), ("2", 200))
            self.assertIn(b'"body_bytes": 1048576', b)
            self.assertIn(('"body_sha256": "%s"' % hashlib.sha256(data).hexdigest()).encode(), b)

    def test_head(self):
        for tls in self.both():
            v, st, h, b = self.curl(tls, "/?mode=fixed&size=12345", "-I")
            self.assertEqual((v, st), ("2", 200))
            self.assertEqual(b.decode("latin-1"), h, "-I writes the head alone: no body came")
            self.assertRegex(h, r"(?im)^content-length: 12345\r?$")

    def test_large_response(self):
        n = 32 << 20
        for tls in self.both():
            v, st, _, b = self.curl(tls, "/?mode=fixed&size=%d" % n)
            self.assertEqual((v, st, len(b)), ("2", 200, n))
            self.assertEqual(hashlib.sha256(b).hexdigest(), pattern_sha256(n))

    @deviation("nginx", "does not pass an upstream's trailers on")
    def test_response_trailers(self):
        raw = ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-checksum\r\n\r\n"
               "5\r\nhello\r\n0\r\nx-checksum: abc123\r\nset-cookie: s=1\r\n"
               "content-length: 99\r\n\r\n")
        path = "/?mode=raw&data=" + urllib.parse.quote(raw, safe="")
        for tls in self.both():
            v, st, h, b = self.curl(tls, path)
            self.assertEqual((v, st, b), ("2", 200, b"hello"))
            self.assertRegex(h, r"(?im)^x-checksum: abc123\r?$")
            # what may not be a trailer (RFC 9110 6.5.1) is not passed on
            self.assertNotRegex(h, r"(?im)^(set-cookie|content-length: 99)")

    @deviation("nginx", "has no request trailers over HTTP/2 (GOAWAY PROTOCOL_ERROR)")
    def test_request_trailers(self):
        with RawConn(self.h2c) as c:
            s = c.new_stream()
            c.headers(s, c.request_fields("POST", "/trailers"), end_stream=False)
            c.send(data_frame(s, b"hello"))
            c.headers(s, [("x-checksum", "abc123"), ("host", "evil"), ("authorization", "x"),
                          ("cookie", "a=1")], end_stream=True)
            st, _, body, _ = c.read_response(s)
        self.assertEqual(st, 200)
        self.assertIn(b'"body_bytes": 5', body)
        # only x-checksum: what may not be a trailer (RFC 9110 6.5.1) stays here
        self.assertIn(b'"trailers": [["x-checksum", "abc123"]]', body.lower())

    def test_access_log_says_http2(self):
        for tls in self.both():
            self.curl(tls, "/logged-%s" % ("h2" if tls else "h2c"))

        def lines():
            try:
                with open(self.access_log) as f:
                    text = f.read()
            except OSError:
                return None
            return text if "/logged-h2 " in text and "/logged-h2c " in text else None

        text = wait_for(lines, what="the access-log lines")
        for p in ("/logged-h2", "/logged-h2c"):
            self.assertRegex(text, r'"GET %s HTTP/2\.0" 200 ' % re.escape(p))


if __name__ == "__main__":
    main()
