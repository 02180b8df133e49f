#!/usr/bin/env python3
"""test_pool_mistakes.py - the mistakes a new operator makes with upstream
pools (issue 12's keys, docs/guides/retries-and-limits.md and
pools-and-health.md), each answered with its JSON path and what to write instead, and
none of them changing the live config: PUT of a pool that does not exist
(404: POST creates), POST of one that does (409: PUT replaces), a POST
without a string name, a DELETE of a pool routes use (409 naming each
route's path), a body that is no object, and pool values that look right
and are not (a route's timeout_ms on a pool, a URL for a server, a status
code in quotes, a 2xx to retry, initially_unhealthy without health_check or
inside it). The same file given to --check names the same paths.
Real switchyard and sy_test_backend processes on 127.0.0.1; every wait is
bounded (harness.TIMEOUT)."""
import json
import subprocess

from harness import (SY_BIN, TIMEOUT, Client, GatewayCase, gateway_config, main, upstream_cfg,
                     wait_for)
from test_health import admin, admin_accepts


class PoolMistakesTest(GatewayCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = cls.shared_backend("b")
        cls.cfg = gateway_config(upstreams={"u": upstream_cfg(cls.b)}, workers=1,
                                 routes=[{"id": "all", "path": "/*{r}", "upstream": "u"}])
        cls.gw = cls.shared_gateway(cls.cfg)
        wait_for(lambda: admin_accepts(cls.gw), what="the admin API")

    def live(self):
        """The live config and ETag, and that it still serves."""
        st, status = admin(self.gw, "GET", "/status")
        self.assertEqual(st, 200)
        with Client(self.gw.port) as c:
            self.assertEqual(c.request("GET", "/x").status, 200)
        _, cfg = admin(self.gw, "GET", "/config")
        return status["etag"], cfg

    def refused(self, method, path, body, code, where, needle):
        before = self.live()
        st, r = admin(self.gw, method, path, body)
        self.assertEqual(st, code, r)
        self.assertTrue(any(e["path"] == where and needle in e["message"]
                            for e in r.get("errors", [])), r)
        self.assertEqual(self.live(), before)
        return r

    def test_put_of_an_unknown_pool_says_post_creates(self):
        r = self.refused("PUT", "/upstreams/fresh", {"servers": [{"address": self.b.addr}]},
                         404, "", 'upstream "fresh" does not exist: POST /upstreams creates it')
        self.assertEqual(r["error"], "no such upstream")
        self.assertEqual(admin(self.gw, "GET", "/upstreams/fresh")[0], 404)

    def test_post_of_an_existing_pool_says_put_replaces(self):
        self.refused("POST", "/upstreams", {"name": "u", "servers": [{"address": self.b.addr}]},
                     409, "/name", 'upstream "u" exists: PUT /upstreams/u replaces it')

    def test_post_name_must_be_a_string(self):
        servers = [{"address": self.b.addr}]
        self.refused("POST", "/upstreams", {"name": 5, "servers": servers}, 400, "/name",
                     "must be a string")
        self.refused("POST", "/upstreams", {"u": {"servers": servers}}, 400, "/name",
                     'a name is required (POST /upstreams takes {"name": ..., "servers": ...})')

    def test_delete_of_a_used_pool_names_each_route(self):
        r = self.refused("DELETE", "/upstreams/u", None, 409, "/routes/0/upstream",
                         'route "all" uses it')
        self.assertEqual(r["routes"], ["all"])

    def test_body_that_is_no_object(self):
        self.refused("PUT", "/upstreams/u", [{"address": self.b.addr}], 400, "",
                     "an upstream must be an object")

    # pool values that look right, as pushed and as --check reads them
    MISTAKES = [
        ({"timeout_ms": 100}, "/upstreams/u/timeout_ms",
         'a pool has "connect_timeout_ms" and "response_timeout_ms"'),
        ({"servers": [{"address": "http://127.0.0.1:9"}]}, "/upstreams/u/servers/0/address",
         "a server is HOST:PORT, without a scheme"),
        ({"health_check": {"expect_status": "200"}}, "/upstreams/u/health_check/expect_status",
         "a single code is a number: 200, without quotes"),
        ({"outlier": {"statuses": "5xx"}}, "/upstreams/u/outlier/statuses", '"500-599"'),
        ({"retries": 1, "retry_on_status": [503, 200]}, "/upstreams/u/retry_on_status/1",
         "200 is an answer, not a failure: only 400-599 can be retried"),
        ({"initially_unhealthy": True}, "/upstreams/u/initially_unhealthy",
         'only allowed with "health_check"'),
        ({"health_check": {"initially_unhealthy": True}},
         "/upstreams/u/health_check/initially_unhealthy", "a key of the pool"),
    ]

    def test_pushed_mistakes_are_named_and_change_nothing(self):
        for extra, where, needle in self.MISTAKES:
            with self.subTest(extra=extra):
                body = upstream_cfg(self.b, **extra)
                self.refused("PUT", "/upstreams/u", body, 400, where, needle)

    def test_check_names_the_same_paths(self):
        for extra, where, needle in self.MISTAKES:
            with self.subTest(extra=extra):
                cfg = dict(self.cfg, upstreams={"u": upstream_cfg(self.b, **extra)})
                path = self.tmp.file("mistake.json")
                with open(path, "w") as f:
                    json.dump(cfg, f)
                p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                                   timeout=TIMEOUT)
                self.assertEqual(p.returncode, 1, p.stdout)
                self.assertIn("%s: " % where, p.stderr)
                self.assertIn(needle, p.stderr)


if __name__ == "__main__":
    main()
