#!/usr/bin/env python3
"""test_admin_privileges.py - "user" and "group": switchyard started as root
binds its listeners and admin API, opens its logs and state, then drops to
that user and group (as nginx's user does), and keeps working: its state
directory and access log stay writable (a pushed change is persisted; the
access log gets its lines), a SIGHUP re-reads the config file, and it
drains on SIGTERM. Unknown accounts are refused by --check and by a start.
Only when the tests run as root (skipped otherwise)."""
import json
import os
import pwd
import grp
import subprocess
import unittest

from adminlib import (SY_BIN, TIMEOUT, AdminCase, Gateway, data_get, free_port, gateway_config,
                      local_route, main, start_gateway, Admin, admin_port, port_is_bound,
                      wait_for)

USER, GROUP = "nobody", "nogroup"


def ids(pid):
    with open("/proc/%d/status" % pid) as f:
        st = dict(l.split(":", 1) for l in f if ":" in l)
    return [int(x) for x in st["Uid"].split()], [int(x) for x in st["Gid"].split()]


@unittest.skipUnless(os.geteuid() == 0, "needs root")
class PrivilegesTest(AdminCase):
    def test_drop_after_binding(self):
        uid, gid = pwd.getpwnam(USER).pw_uid, grp.getgrnam(GROUP).gr_gid
        os.chmod(self.tmp.path, 0o755)  # the user must reach its files in here
        state, log = self.tmp.file("priv-state"), self.tmp.file("priv-access.log")
        cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=2, user=USER,
                             group=GROUP, access_log=log,
                             admin={"address": "127.0.0.1:%d" % free_port(), "state_dir": state})
        g = Gateway(self.tmp, cfg, name="priv")
        self.addCleanup(g.stop)
        start_gateway(g)
        api = Admin(admin_port(cfg))
        self.addCleanup(api.close)
        self.assertEqual(ids(g.pid()), ([uid] * 4, [gid] * 4))
        self.assertRegex(g.log(), r"running as uid %d, gid %d" % (uid, gid))
        # the state stays writable: a change is persisted
        self.assertWrite(api.post("/routes", local_route("a", "/a")), 201)
        for name in os.listdir(state):
            self.assertEqual(os.stat(os.path.join(state, name)).st_uid, uid, name)
        self.assertEqual(data_get(g.port, "/a").status, 200)
        # the access log too (flushed within a second)
        wait_for(lambda: os.path.getsize(log) > 0, what="access log lines")
        self.assertEqual(os.stat(log).st_uid, uid)
        # SIGHUP re-reads the file as the user
        since = g.log_size()
        g.reload(dict(cfg, routes=[local_route("ping", "/ping"), local_route("b", "/b")]))
        g.wait_log(r"config reloaded", since)
        self.assertEqual(data_get(g.port, "/b").status, 200)
        self.assertEqual(g.stop(), 0, g.log())
        g.check_clean()

    def test_push_below_1024_after_the_drop(self):
        """Listeners are live, but after the drop a port below 1024 cannot be
        bound: such a push is refused at its path, saying why, and the
        gateway keeps serving; a port above 1023 still binds."""
        cfg = gateway_config(routes=[local_route("ping", "/ping")], workers=2, user=USER,
                             group=GROUP)
        g = Gateway(self.tmp, cfg, name="low")
        self.addCleanup(g.stop)
        start_gateway(g)
        api = Admin(admin_port(cfg))
        self.addCleanup(api.close)
        low = next(p for p in range(1000, 500, -1) if not port_is_bound(p))
        r = api.put("/config", dict(cfg, listeners=cfg["listeners"] +
                                    [{"address": "127.0.0.1:%d" % low}]))
        self.assertStatus(r, 400)
        self.assertEqual([e["path"] for e in r.json["errors"]], ["/listeners/1/address"], r)
        self.assertIn("below 1024", r.json["errors"][0]["message"])
        self.assertEqual(data_get(g.port, "/ping").status, 200)
        high = free_port()
        r = api.put("/config", dict(cfg, listeners=cfg["listeners"] +
                                    [{"address": "127.0.0.1:%d" % high}]))
        self.assertWrite(r, 200)
        self.assertEqual(data_get(high, "/ping").status, 200)
        self.assertEqual(g.stop(), 0, g.log())

    def test_unknown_accounts_are_refused(self):
        for key, name in (("user", "no-such-user-sy"), ("group", "no-such-group-sy")):
            cfg = gateway_config(routes=[local_route("ping", "/ping")], **{key: name})
            path = self.tmp.file("acct.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            p = subprocess.run([SY_BIN, "--check", path], capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(p.returncode, 1, p)
            self.assertIn("/%s: no %s %s" % (key, key, name), p.stderr)
            p = subprocess.run([SY_BIN, "-c", path], capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertNotEqual(p.returncode, 0, p)
            self.assertIn(name, p.stderr)


if __name__ == "__main__":
    main()
