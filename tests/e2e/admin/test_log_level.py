#!/usr/bin/env python3
"""test_log_level.py - log_level (error, warn, info, debug; warn by default)
decides which error-log lines are written, and a push changes it at once on
every worker. At the default level the notices (the start-up line, the audit
line of an accepted change) and the warnings are written, info lines (the
admin API's address) are not; "info" adds them; "error" drops the warnings
until a push brings them back. An invalid level is a 400 naming
/log_level."""
import re

from adminlib import (AdminCase, data_get, free_port, gateway_config, main, upstream_cfg)

# one dead upstream per phase: a request to it logs one warning naming its port
PHASES = ("quiet", "loud")


class LogLevelTest(AdminCase):
    def config(self, **kw):
        ports = {p: free_port() for p in PHASES}  # nothing listens on them
        cfg = gateway_config(upstreams={p: upstream_cfg("127.0.0.1:%d" % ports[p]) for p in PHASES},
                             routes=[{"id": p, "path": "/%s/*{rest}" % p, "upstream": p}
                                     for p in PHASES], workers=2, **kw)
        if "log_level" not in kw:
            del cfg["log_level"]  # the harness sets info: here the default is under test
        return cfg, ports

    def fail(self, gw, phase, n=4):
        # new connections, so that both workers see requests
        for i in range(n):
            self.assertEqual(data_get(gw.port, "/%s/%d" % (phase, i)).status, 502)

    def test_default_is_warn(self):
        cfg, ports = self.config()
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        self.assertRegex(gw.log(), r"\[notice\] switchyard \S+: 2 workers")
        self.assertNotIn("admin API on", gw.log())  # an info line
        self.fail(gw, "loud")
        self.assertRegex(gw.log(), r"\[warn\] upstream [^\n]*127\.0\.0\.1:%d" % ports["loud"])
        since = gw.log_size()
        self.assertWrite(api.post("/routes", {"id": "x", "path": "/x",
                                              "response": {"status": 200}}), 201)
        gw.wait_log(r"\[notice\] audit: \S+ POST /routes generation \d+ -> \d+", since)

    def test_info_adds_info_lines(self):
        cfg, _ = self.config(log_level="info")
        gw = self.own_gateway(cfg)
        self.assertRegex(gw.log(), r"\[info\] admin API on http://")

    def test_push_changes_the_level_at_once(self):
        cfg, ports = self.config()
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        self.assertWrite(api.put("/config", dict(cfg, log_level="error")), 200)
        self.fail(gw, "quiet")
        self.assertWrite(api.put("/config", dict(cfg, log_level="warn")), 200)
        self.fail(gw, "loud")
        # each warning is written before its 502 is sent: the loud ones are
        # all there, and the quiet ones, had they been written, would be too
        text = gw.log()
        self.assertEqual(len(re.findall(r"\[warn\] upstream [^\n]*127\.0\.0\.1:%d\b"
                                        % ports["loud"], text)), 4, text)
        self.assertNotIn("127.0.0.1:%d" % ports["quiet"], text)
        self.assertEqual(api.config()[0].get("log_level"), "warn")

    def test_invalid_level_is_refused(self):
        cfg, _ = self.config()
        gw = self.own_gateway(cfg)
        api = self.admin_for(gw)
        for bad in ("notice", "WARN", 3, None):
            r = api.put("/config", dict(cfg, log_level=bad))
            self.assertStatus(r, 400)
            self.assertIn("/log_level", r.body.decode(), r)


if __name__ == "__main__":
    main()
