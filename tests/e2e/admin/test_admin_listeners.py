#!/usr/bin/env python3
"""test_admin_listeners.py - listeners are live: a push (PUT /config or a
SIGHUP of the -c file) that adds a listener accepts on it at once, on every
worker; one that removes a listener stops accepting there, its idle
connections close and its in-flight request completes with Connection:
close; requests on the listeners that stay never fail meanwhile. A
listener address that cannot be bound (in use, or a port below 1024 after
dropping root) refuses the push with its path, before anything is
persisted, and the live config keeps serving. Labelled "concurrency": CI
also runs these under TSan."""
import json
import os
import socket
import ssl
import subprocess
import threading
import time
import unittest

from adminlib import (TIMEOUT, AdminCase, Client, data_get, free_port, gateway_config,
                      local_route, main, port_is_bound, upstream_cfg, wait_for)

LOAD_REQUESTS = 600  # on the listener that stays, over one keep-alive connection
CYCLES = 4           # listeners added and removed meanwhile
FRESH = 16           # fresh connections to a new listener: the kernel spreads them over workers


def addr(port):
    return {"address": "127.0.0.1:%d" % port}


def port_of(listener):
    return int(listener["address"].rsplit(":", 1)[1])


def refused(port):
    """True when a connection to <port> is refused: nobody listens."""
    s = socket.socket()
    try:
        s.settimeout(TIMEOUT)
        s.connect(("127.0.0.1", port))
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # a SYN that reached a socket in the middle of closing: it is
        # going away, but not refused yet; the next attempt tells
        return False
    finally:
        s.close()


class ListenersCase(AdminCase):
    def setUp(self):
        super().setUp()
        self.be = self.own_backend("be")
        self.cfg = gateway_config(workers=2, upstreams={"be": upstream_cfg(self.be)},
                                  routes=[local_route("ping", "/ping"),
                                          {"id": "slow", "path": "/slow", "upstream": "be"}])
        self.gw = self.own_gateway(self.cfg)
        self.api = self.admin_for(self.gw)

    def with_listeners(self, listeners):
        c = json.loads(json.dumps(self.cfg))
        c["listeners"] = listeners
        return c

    def assertServes(self, port, n=FRESH):
        """<n> fresh connections to <port>, each answered: with SO_REUSEPORT
        they land on every worker's socket."""
        for _ in range(n):
            self.assertEqual(data_get(port, "/ping").status, 200)


class LiveListenersTest(ListenersCase):
    def test_added_and_removed_under_load(self):
        """A keep-alive client requests on the first listener throughout
        while pushes add and remove a second one: no request fails, each
        added listener serves on every worker as soon as the push is
        answered, each removed one refuses connections soon after."""
        stay = self.cfg["listeners"][0]
        failures, done = [], [0]

        def load():
            try:
                with Client(port_of(stay)) as c:
                    for _ in range(LOAD_REQUESTS):
                        r = c.request("GET", "/ping")
                        if r.status != 200 or r.header("Connection") == "close":
                            failures.append(r.status)
                        done[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure counts
                failures.append(repr(e))

        t = threading.Thread(target=load)
        t.start()
        try:
            for i in range(CYCLES):
                extra = addr(free_port())
                r = self.api.put("/config", self.with_listeners([stay, extra]))
                self.assertWrite(r, 200)
                self.assertServes(port_of(extra))
                r = self.api.put("/config", self.with_listeners([stay]))
                self.assertWrite(r, 200)
                wait_for(lambda: refused(port_of(extra)), timeout=1.0,
                         what="the removed listener to refuse connections")
        finally:
            t.join(TIMEOUT * 4)
        self.assertFalse(t.is_alive())
        self.assertEqual(failures, [])
        self.assertEqual(done[0], LOAD_REQUESTS)

    def test_removed_listener_finishes_its_requests(self):
        """Removed: an idle keep-alive connection on it is closed, one with
        a request in flight gets its whole response with Connection: close
        and is closed after it, and new connections are refused; the
        listener that stays keeps its keep-alive connections."""
        stay, extra = self.cfg["listeners"][0], addr(free_port())
        self.assertWrite(self.api.put("/config", self.with_listeners([stay, extra])), 200)
        idle, busy, kept = (Client(port_of(extra)), Client(port_of(extra)),
                            Client(port_of(stay)))
        for c in (idle, busy, kept):
            self.addCleanup(c.close)
            self.assertEqual(c.request("GET", "/ping").status, 200)
        busy.send(b"GET /slow?mode=fixed&delay_ms=800&size=5000 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)  # the request is upstream now
        self.assertWrite(self.api.put("/config", self.with_listeners([stay])), 200)
        self.assertClosed(idle)
        r = busy.read_response()
        self.assertEqual((r.status, len(r.body)), (200, 5000))
        self.assertHeader(r, "Connection", "close")
        self.assertClosed(busy)
        wait_for(lambda: refused(port_of(extra)), timeout=1.0, what="connections refused")
        r = kept.request("GET", "/ping")
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header("Connection"))

    def test_sighup_adds_and_removes(self):
        stay, extra = self.cfg["listeners"][0], addr(free_port())
        since = self.gw.log_size()
        self.gw.reload(self.with_listeners([stay, extra]))
        self.gw.wait_log(r"config reloaded: generation", since)
        self.assertServes(port_of(extra))
        since = self.gw.log_size()
        self.gw.reload(self.with_listeners([stay]))
        self.gw.wait_log(r"config reloaded: generation", since)
        wait_for(lambda: refused(port_of(extra)), timeout=1.0, what="connections refused")
        self.assertServes(port_of(stay))

    def test_removed_and_added_back(self):
        """An address removed and added back by the next push is bound
        again, even while the workers may still be closing it."""
        stay, extra = self.cfg["listeners"][0], addr(free_port())
        for _ in range(3):
            self.assertWrite(self.api.put("/config", self.with_listeners([stay, extra])), 200)
            self.assertWrite(self.api.put("/config", self.with_listeners([stay])), 200)
        self.assertWrite(self.api.put("/config", self.with_listeners([extra, stay])), 200)
        self.assertServes(port_of(extra))
        self.assertServes(port_of(stay))


class LiveTLSTest(ListenersCase):
    def test_tls_added_and_removed_on_a_listener(self):
        """A listener added with tls speaks TLS at once; the same address
        pushed without tls speaks plain HTTP to its next connections, and
        TLS again when it comes back."""
        cert, key = self.tmp.file("l.pem"), self.tmp.file("l.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost"], check=True,
                       capture_output=True, timeout=60)
        stay, port = self.cfg["listeners"][0], free_port()
        tls = dict(addr(port), tls={"certificates": [{"cert": cert, "key": key}]})
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

        def over_tls():
            with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
                with ctx.wrap_socket(s, server_hostname="localhost") as t:
                    c = Client(port, sock=t)
                    return c.request("GET", "/ping").status

        for listener, speaks in ((tls, "tls"), (addr(port), "plain"), (tls, "tls")):
            self.assertWrite(self.api.put("/config", self.with_listeners([stay, listener])), 200)
            for _ in range(4):
                if speaks == "tls":
                    self.assertEqual(over_tls(), 200)
                else:
                    self.assertEqual(data_get(port, "/ping").status, 200)


class RefusedListenersTest(ListenersCase):
    def busy(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        self.addCleanup(s.close)
        return addr(s.getsockname()[1])

    def test_address_in_use_is_refused(self):
        stay, busy = self.cfg["listeners"][0], self.busy()
        gen = self.api.generation()
        for q in ("", "?dry_run=1"):
            r = self.api.put("/config" + q, self.with_listeners([stay, busy]))
            self.assertStatus(r, 400)
            errs = r.json["errors"]
            self.assertEqual([e["path"] for e in errs], ["/listeners/1/address"], r)
            self.assertIn("address in use", errs[0]["message"])
            self.assertIn(busy["address"], errs[0]["message"])
        self.assertEqual(self.api.generation(), gen)
        self.assertEqual(self.api.config()[0]["listeners"], [stay])
        self.assertServes(port_of(stay))

    def test_an_address_not_of_this_host_is_refused(self):
        """192.0.2.1 (TEST-NET-1) is no address of this host: EADDRNOTAVAIL,
        refused at its path like an address in use."""
        stay, bad = self.cfg["listeners"][0], addr(free_port())
        bad["address"] = bad["address"].replace("127.0.0.1", "192.0.2.1")
        gen = self.api.generation()
        r = self.api.put("/config", self.with_listeners([stay, bad]))
        self.assertStatus(r, 400)
        self.assertEqual([e["path"] for e in r.json["errors"]], ["/listeners/1/address"], r)
        self.assertIn(bad["address"], r.json["errors"][0]["message"])
        self.assertEqual(self.api.generation(), gen)
        self.assertServes(port_of(stay))

    def test_a_refused_push_binds_nothing(self):
        """One bindable and one busy listener: the push is refused and the
        bindable one is not left listening."""
        stay, free, busy = self.cfg["listeners"][0], addr(free_port()), self.busy()
        r = self.api.put("/config", self.with_listeners([stay, free, busy]))
        self.assertStatus(r, 400)
        self.assertTrue(refused(port_of(free)))
        # and a dry run that would succeed binds nothing either
        r = self.api.put("/config?dry_run=1", self.with_listeners([stay, free]))
        self.assertStatus(r, 200)
        self.assertTrue(refused(port_of(free)))

    def test_a_refused_push_persists_nothing(self):
        """With a state directory: the files stay as they were, byte for
        byte, and an accepted one is persisted with its listener."""
        state = self.tmp.file("lst-state")
        cfg = json.loads(json.dumps(self.cfg))
        cfg["listeners"] = [addr(free_port())]
        cfg["admin"] = {"address": "127.0.0.1:%d" % free_port(), "state_dir": state}
        g = self.own_gateway(cfg, name="persist")
        api = self.admin_for(g)

        def files():
            out = {}
            for name in sorted(os.listdir(state)):
                if not os.path.isfile(os.path.join(state, name)):  # upgrade.sock
                    continue
                with open(os.path.join(state, name), "rb") as f:
                    out[name] = f.read()
            return out

        before = files()
        r = api.put("/config", dict(cfg, listeners=cfg["listeners"] + [self.busy()]))
        self.assertStatus(r, 400)
        self.assertEqual(files(), before)
        extra = addr(free_port())
        self.assertWrite(api.put("/config", dict(cfg, listeners=cfg["listeners"] + [extra])), 200)
        self.assertIn(extra["address"].encode(), b"".join(files().values()))

    def test_sighup_to_an_address_in_use_is_refused(self):
        stay, busy = self.cfg["listeners"][0], self.busy()
        gen = self.api.generation()
        since = self.gw.log_size()
        self.gw.reload(self.with_listeners([stay, busy]))
        self.gw.wait_log(r"reload refused[^\n]*\n[^\n]*/listeners/1/address: %s: address in use"
                         % busy["address"], since)
        self.assertEqual(self.api.generation(), gen)
        self.assertServes(port_of(stay))


if __name__ == "__main__":
    main()
