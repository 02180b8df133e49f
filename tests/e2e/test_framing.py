#!/usr/bin/env python3
"""test_framing.py - request smuggling and limits: every ambiguous or
malformed request is refused with the parser's documented status
(admin/http1/request.h: 400, 501 for a transfer coding we do not implement, 505
for another HTTP major version, 413/414/431 for limits), the connection is
closed, and not one byte reaches the backend."""
import time

from harness import Client, GatewayCase, gateway_config, main, upstream_cfg

MAX_BODY = 1000


class FramingTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "all", "path": "/*{rest}", "upstream": "b"}],
                             limits={"max_body_bytes": MAX_BODY})
        cls.gw = cls.shared_gateway(cfg)

    def setUp(self):
        self.b.reset()

    def refused(self, raw, status=400):
        """Sends <raw> in one write; expects <status>, Connection: close, the
        connection closed, and the backend untouched."""
        with Client(self.gw.port) as c:
            c.send(raw)
            r = c.read_response()
            self.assertEqual(r.status, status, "%r -> %r" % (raw[:200], r))
            self.assertEqual((r.header("Connection") or "").lower(), "close", r)
            self.assertEqual(int(r.header("Content-Length")), len(r.body))
            self.assertClosed(c)
        time.sleep(0.05)  # anything the gateway had sent would have arrived
        st = self.b.stats()
        self.assertEqual(st["requests"], 0, "backend saw a request for %r" % raw[:200])
        self.assertEqual(st["bytes_in"], 0, "backend received bytes for %r" % raw[:200])
        return r

    def test_valid_request_reaches_backend(self):
        # the control case: the same kind of request, well-formed, gets through
        with Client(self.gw.port) as c:
            c.send(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
            r = c.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_bytes"], 5)
        st = self.b.stats()
        self.assertEqual(st["requests"], 1)
        self.assertGreater(st["bytes_in"], 0)

    def test_cl_and_te(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nX")
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                     b"Content-Length: 6\r\n\r\n0\r\n\r\nX")

    def test_two_different_content_lengths(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                     b"Content-Length: 5\r\n\r\nhello")

    def test_two_equal_content_lengths(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                     b"Content-Length: 5\r\n\r\nhello")

    def test_content_length_list(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\nX")

    def test_bad_content_length(self):
        for v in (b"abc", b"-1", b"+5", b"5 5", b"0x10", b"", b"99999999999999999999999"):
            with self.subTest(cl=v):
                self.b.reset()
                self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: " + v +
                             b"\r\n\r\nhello")

    def test_te_chunked_not_last(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity"
                     b"\r\n\r\n0\r\n\r\n")

    def test_te_identity(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n"
                     b"0\r\n\r\n")

    def test_te_xchunked(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"
                     b"0\r\n\r\n")

    def test_te_chunked_twice(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")

    def test_te_unknown_coding_before_chunked_is_501(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                     b"0\r\n\r\n", status=501)
        self.b.reset()
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked"
                     b"\r\n\r\n0\r\n\r\n", status=501)

    def test_te_in_http10(self):
        self.refused(b"POST /x HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n0\r\n\r\n")

    def test_bad_chunk_size(self):
        for line in (b"zz", b"-1", b"1 2", b"0x5", b"fffffffffffffffffff", b" 5"):
            with self.subTest(size=line):
                self.b.reset()
                self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
                             line + b"\r\nhello\r\n0\r\n\r\n")

    def test_chunk_data_without_crlf(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhelloXX0\r\n\r\n")

    def test_obs_fold(self):
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n")
        self.b.reset()
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nX-A: one\r\n\ttwo\r\n\r\n")

    def test_space_before_colon(self):
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nX-A : one\r\n\r\n")
        self.b.reset()
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello")

    def test_nul_and_ctl_in_value(self):
        for ch in (b"\x00", b"\x01", b"\x1f", b"\x7f", b"\r"):
            with self.subTest(ch=ch):
                self.b.reset()
                self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nX-A: on" + ch + b"e\r\n\r\n")

    def test_missing_host_http11(self):
        self.refused(b"GET /x HTTP/1.1\r\nX-A: 1\r\n\r\n")

    def test_two_hosts(self):
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        self.b.reset()
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n")

    def test_invalid_host(self):
        for h in (b"exa mple.com", b"a/b", b"user@host", b"host:port", b"host:99999", b"",
                  b"[::1", b"a..b"):
            with self.subTest(host=h):
                self.b.reset()
                self.refused(b"GET /x HTTP/1.1\r\nHost: " + h + b"\r\n\r\n")

    def test_http09_request(self):
        self.refused(b"GET /x\r\n\r\n")

    def test_http09_version(self):
        self.refused(b"GET /x HTTP/0.9\r\nHost: a\r\n\r\n", status=505)

    def test_http2_version(self):
        self.refused(b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n", status=505)

    def test_bad_version(self):
        self.refused(b"GET /x HTTP/1.1x\r\nHost: a\r\n\r\n")
        self.b.reset()
        self.refused(b"GET /x http/1.1\r\nHost: a\r\n\r\n")

    def test_fragment_in_target(self):
        self.refused(b"GET /x#frag HTTP/1.1\r\nHost: a\r\n\r\n")

    def test_bad_request_line(self):
        for line in (b"GET  /x HTTP/1.1", b"GET /x  HTTP/1.1", b"GET /x y HTTP/1.1",
                     b"GET\t/x HTTP/1.1", b"GET /\x7f HTTP/1.1", b"GET /\xc3\xa9 HTTP/1.1"):
            with self.subTest(line=line):
                self.b.reset()
                self.refused(line + b"\r\nHost: a\r\n\r\n")

    # ---- limits

    def test_414_request_line(self):
        self.refused(b"GET /" + b"a" * (9 * 1024) + b" HTTP/1.1\r\nHost: a\r\n\r\n", status=414)

    def test_431_header_bytes(self):
        fields = b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 1000) for i in range(34))
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n", status=431)

    def test_431_header_count(self):
        fields = b"".join(b"X-F%d: v\r\n" % i for i in range(101))
        self.refused(b"GET /x HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n", status=431)

    def test_100_headers_accepted(self):
        # 99 fields plus Host: exactly the limit
        fields = b"".join(b"X-F%d: v\r\n" % i for i in range(99))
        with Client(self.gw.port) as c:
            c.send(b"GET /x HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(len(r.json()["headers"]), 100 + 5)  # + X-Forwarded-*, X-Request-Id, Via

    def test_413_content_length(self):
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)
                     + b"x" * (MAX_BODY + 1), status=413)
        self.b.reset()
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000\r\n\r\n",
                     status=413)

    def test_413_chunked(self):
        body = b"x" * 600
        self.refused(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body, len(body), body),
                     status=413)

    def test_body_at_limit_accepted(self):
        with Client(self.gw.port) as c:
            r = c.request("POST", "/x", body=b"y" * MAX_BODY)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.json()["body_bytes"], MAX_BODY)


if __name__ == "__main__":
    main()
