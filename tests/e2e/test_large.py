#!/usr/bin/env python3
"""test_large.py - one 256 MiB upload and one 256 MiB download through the
gateway, bodies checked by length and sha256, while the gateway's resident
memory (VmRSS) stays within RSS_SLACK of what it was before: bodies stream
with backpressure and are never buffered whole."""
import hashlib
import os

from harness import (Client, GatewayCase, RssWatch, asan_env, build_request, gateway_config, main,
                     pattern_sha256, upstream_cfg)

SIZE = 256 << 20
RSS_SLACK_KIB = 64 << 10


class LargeBodyTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cfg = gateway_config(upstreams={"b": upstream_cfg(cls.b)},
                             routes=[{"id": "all", "path": "/*{r}", "upstream": "b"}], workers=1)
        cls.gw = cls.shared_gateway(cfg, env=asan_env())

    def warm(self, c):
        # one small exchange first, so that the baseline includes the
        # connection and the pooled upstream connection
        r = c.request("POST", "/warm", body=b"x" * 100000)
        self.assertEqual(r.status, 200)

    def test_upload_256mib(self):
        block = os.urandom(1 << 20)
        with Client(self.gw.port) as c:
            self.warm(c)
            watch = RssWatch(self.gw.pid())
            h = hashlib.sha256()
            c.send(build_request("PUT", "/upload", [("Content-Length", str(SIZE))]))
            for i in range(SIZE // len(block)):
                chunk = block[i % 7:] + block[:i % 7]  # not the same bytes every time
                h.update(chunk)
                c.send(chunk)
            r = c.read_response()
            grew = watch.finish()
        self.assertEqual(r.status, 200)
        e = r.json()
        self.assertEqual(e["body_bytes"], SIZE)
        self.assertEqual(e["body_sha256"], h.hexdigest())
        self.assertLess(grew, RSS_SLACK_KIB, "gateway RSS grew by %d KiB during the upload "
                        "(%d samples)" % (grew, watch.samples))

    def test_download_256mib(self):
        want = pattern_sha256(SIZE)
        with Client(self.gw.port) as c:
            self.warm(c)
            watch = RssWatch(self.gw.pid())
            h = hashlib.sha256()
            r = c.request("GET", "/download?mode=fixed&size=%d" % SIZE, sink=h.update)
            grew = watch.finish()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("Content-Length"), str(SIZE))
            self.assertEqual(r.body_len, SIZE)
            self.assertEqual(h.hexdigest(), want)
            # still in step afterwards
            self.assertEqual(c.request("GET", "/after").status, 200)
        self.assertLess(grew, RSS_SLACK_KIB, "gateway RSS grew by %d KiB during the download "
                        "(%d samples)" % (grew, watch.samples))


if __name__ == "__main__":
    main()
