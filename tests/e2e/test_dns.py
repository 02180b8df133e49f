"""test_dns.py - servers by host name: resolved asynchronously, re-resolved.

A DNS responder of the test's own (dnsserver.py, UDP on 127.0.0.1) is the
gateway's only nameserver ("resolver": {"nameservers": [...]}); backends
listen on several loopback addresses behind one name. The tests change the
responder's answers, make it fail or hang, or rewrite a hosts file, and
check that the pool's servers follow (without a new config generation),
that a failed resolution keeps the last addresses, and that the admin API
answers while a resolution hangs. Waits are bounded (TIMEOUT); nothing
asserts on timing.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "admin"))

import adminlib  # noqa: E402
from adminlib import Admin, get, wait_for  # noqa: E402
from dnsserver import DnsServer  # noqa: E402
from harness import free_port, write_atomic  # noqa: E402

NAME = "app.sy-test"
SLOW = "slow.sy-test"


class DnsCase(adminlib.AdminCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dns = DnsServer().start()
        cls.addClassCleanup(cls.dns.stop)
        # one port, three loopback addresses: a name's answer picks them
        cls.bport = free_port()
        cls.b = {}
        for last in (2, 3, 4):
            host = "127.0.0.%d" % last
            cls.b[host] = cls.shared_backend("b%d" % last, port=cls.bport, host=host)

    def start_gateway(self, upstreams, resolver=None, routes=None):
        cfg = adminlib.gateway_config(
            upstreams=upstreams,
            routes=routes or [{"id": "app", "path": "/*{rest}", "upstream": "app"}],
            resolver=resolver or {"nameservers": [self.dns.addr], "timeout_ms": 300,
                                  "attempts": 1})
        gw = self.own_gateway(cfg)
        api = Admin(adminlib.admin_port(cfg))
        self.addCleanup(api.close)
        return gw, api

    def pool(self, host, interval=1000):
        return {"servers": [{"address": "%s:%d" % (host, self.bport)}],
                "resolve_interval_ms": interval}

    def backend_of(self, gw, target="/x"):
        r = get(gw.port, target)
        return r.header("X-Backend") if r.status == 200 else r.status

    def wait_backends(self, gw, want, what):
        """Until requests reach exactly the backends <want> (names)."""
        seen = []

        def only_want():
            got = {self.backend_of(gw) for _ in range(6)}
            seen.append(got)
            return got == set(want)

        wait_for(only_want, interval=0.05, what="%s (last seen %s)" % (what, seen[-1:]))

    def health(self, api, name="app"):
        r = api.get("/upstreams/%s/health" % name)
        self.assertEqual(r.status, 200, r)
        return r.json["servers"]


class TestDns(DnsCase):
    def test_answer_changes_and_servers_follow(self):
        self.dns.set(NAME, ["127.0.0.2"])
        gw, api = self.start_gateway({"app": self.pool(NAME)})
        self.wait_backends(gw, {"b2"}, "the first answer served")
        gen = api.generation()
        # a changed answer: the servers follow within the interval
        self.dns.set(NAME, ["127.0.0.3"])
        self.wait_backends(gw, {"b3"}, "the new address served")
        # two addresses: two servers, named host:port with the address
        self.dns.set(NAME, ["127.0.0.4", "127.0.0.2"])
        self.wait_backends(gw, {"b2", "b4"}, "both addresses served")
        names = sorted(s["address"] for s in self.health(api))
        self.assertEqual(names, ["%s:%d (127.0.0.2)" % (NAME, self.bport),
                                 "%s:%d (127.0.0.4)" % (NAME, self.bport)])
        self.assertTrue(all(s["healthy"] for s in self.health(api)))
        # none of this was a new config
        self.assertEqual(api.generation(), gen)
        self.assertTrue(gw.wait_log(r"resolver: app\.sy-test: 127\.0\.0\.2, 127\.0\.0\.4 "
                                    r"\(was 127\.0\.0\.3\)"))
        # and the log says which generation stays
        self.assertTrue(gw.wait_log(r"follow their host names \(generation %d stays\)" % gen))

    def test_failed_resolution_keeps_last_addresses(self):
        name = "keep.sy-test"
        self.dns.set(name, ["127.0.0.3"])
        gw, api = self.start_gateway({"app": self.pool(name)})
        self.wait_backends(gw, {"b3"}, "the first answer served")
        # NXDOMAIN from now on: re-resolutions fail, the last address stays
        # (each resolution asks for A and AAAA)
        self.dns.fail(name)
        seen = self.dns.queries(name)
        wait_for(lambda: self.dns.queries(name) >= seen + 4, what="two failed re-resolutions")
        gw.wait_log(r"resolver: keep\.sy-test: .*its last addresses stay in use")
        for _ in range(10):
            self.assertEqual(self.backend_of(gw), "b3")
        # and a timeout (a nameserver that stops answering) is no different
        self.dns.hang(name)
        seen = self.dns.queries(name)
        wait_for(lambda: self.dns.queries(name) >= seen + 4, what="two hung re-resolutions")
        for _ in range(10):
            self.assertEqual(self.backend_of(gw), "b3")
        # answers again: a new address is taken
        self.dns.set(name, ["127.0.0.4"])
        self.wait_backends(gw, {"b4"}, "the address after the failures")
        gw.wait_log(r"resolver: keep\.sy-test resolves again")

    def test_admin_answers_while_a_resolution_hangs(self):
        self.dns.hang(SLOW)
        self.dns.set(NAME, ["127.0.0.2"])
        # a long timeout: the resolution provably still hangs below
        gw, api = self.start_gateway(
            {"app": self.pool(NAME)},
            resolver={"nameservers": [self.dns.addr], "timeout_ms": 20000, "attempts": 1})
        self.wait_backends(gw, {"b2"}, "the first pool served")
        gen = api.generation()
        # a push naming a host that does not answer is accepted at once
        r = api.post("/upstreams", dict(self.pool(SLOW), name="slow"))
        self.assertEqual(r.status, 201, r)
        r = api.post("/routes", {"id": "slow", "path": "/slow/*{rest}", "upstream": "slow"})
        self.assertEqual(r.status, 201, r)
        wait_for(lambda: self.dns.queries(SLOW) >= 1, what="the query sent")
        # while it hangs: the API answers, the server is down as "resolving",
        # its routes answer 503 and every other pool serves
        for _ in range(5):
            self.assertEqual(api.get("/status").status, 200)
            [srv] = self.health(api, "slow")
            self.assertEqual((srv["healthy"], srv["reason"]), (False, "resolving"))
            self.assertEqual(get(gw.port, "/slow/x").status, 503)
            self.assertEqual(self.backend_of(gw), "b2")
        self.assertEqual(api.generation(), gen + 2)

    def test_unknown_name_at_push_serves_once_it_resolves(self):
        name = "later.sy-test"
        self.dns.set(NAME, ["127.0.0.2"])
        gw, api = self.start_gateway({"app": self.pool(NAME)})
        self.wait_backends(gw, {"b2"}, "the first pool served")
        # NXDOMAIN at push time: accepted, down until the name resolves
        r = api.put("/upstreams/app", self.pool(name))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(get(gw.port, "/x").status, 503)
        [srv] = self.health(api)
        self.assertEqual(srv["reason"], "resolving")
        gw.wait_log(r"resolver: later\.sy-test: .*its servers stay down")
        self.dns.set(name, ["127.0.0.4"])
        self.wait_backends(gw, {"b4"}, "the name once it resolves")

    def test_hosts_file_rewritten(self):
        name = "files.sy-test"
        hosts = self.tmp.file("hosts")
        write_atomic(hosts, "127.0.0.2 %s\n" % name)
        gw, api = self.start_gateway(
            {"app": self.pool(name)},
            resolver={"nameservers": [self.dns.addr], "hosts_file": hosts})
        # the hosts file answers at once: served from the first snapshot on
        self.assertEqual(self.backend_of(gw), "b2")
        write_atomic(hosts, "127.0.0.3 %s\n" % name)
        self.wait_backends(gw, {"b3"}, "the rewritten hosts file")
        self.assertEqual(self.dns.queries(name), 0)

    def test_libevent_messages_in_the_log_format(self):
        """evdns's own messages (a nameserver that stops answering) come out
        as the error log's lines, not as libevent's raw "[msg] ..." ones."""
        name = "mute.sy-test"
        self.dns.hang(name)
        cfg = adminlib.gateway_config(
            upstreams={"app": self.pool(name)},
            routes=[{"id": "app", "path": "/*{rest}", "upstream": "app"}],
            resolver={"nameservers": [self.dns.addr], "timeout_ms": 200, "attempts": 1},
            log_level="debug")
        gw = self.own_gateway(cfg)
        gw.wait_log(r"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[debug\] libevent: "
                    r"Nameserver 127\.0\.0\.1:%d has failed: request timed out\.$" % self.dns.port)
        # every line is one of the error log's
        for line in gw.log().splitlines():
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\S+Z \[(error|warn|notice|info|debug)\] ")

    def test_resolver_settings_validated(self):
        gw, api = self.start_gateway({"app": self.pool(NAME)})
        cfg, etag, _ = api.config()
        for resolver, path in (({"nameservers": ["dns.example:53"]}, "/resolver/nameservers/0"),
                               ({"nameservers": []}, "/resolver/nameservers"),
                               ({"hosts_file": self.tmp.file("no-such-hosts")},
                                "/resolver/hosts_file"),
                               ({"timeout_ms": 0}, "/resolver/timeout_ms"),
                               ({"attempts": 1, "bogus": 1}, "/resolver/bogus")):
            doc = dict(cfg, resolver=resolver)
            r = api.put("/config", json.dumps(doc))
            self.assertEqual(r.status, 400, r)
            self.assertIn(path, [e["path"] for e in r.json["errors"]], r.json)
        self.assertEqual(api.config()[1], etag)


if __name__ == "__main__":
    adminlib.main()
