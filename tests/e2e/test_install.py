#!/usr/bin/env python3
"""test_install.py - `cmake --install` into a temporary prefix (SY_BUILD_DIR
is the build tree): switchyard and switchyard-route, the systemd unit
(ExecStart on the installed program and config, ExecReload sends SIGHUP, it
stops with SIGTERM) and the example config with its state directory. The
installed config passes the installed `switchyard --check`; the installed
program, started on a copy of it moved to free ports and temporary
directories, serves, persists a change in its state directory, reloads on
SIGHUP (what ExecReload sends) and drains on SIGTERM. A second install keeps
an operator's edited config; DESTDIR stages without changing the paths the
unit names."""
import json
import os
import signal
import socket
import subprocess

import harness
from harness import TIMEOUT, Gateway, GatewayCase, free_port, get, main

BUILD = os.environ.get("SY_BUILD_DIR") or os.path.dirname(os.path.dirname(harness.SY_BIN))


def install(prefix, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT * 4)
    assert r.returncode == 0, r.stdout.decode(errors="replace")
    return r.stdout.decode(errors="replace")


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
        return True
    except OSError:
        return False


def unit_keys(path):
    """The unit file's key=value lines as {key: [values]}."""
    keys = {}
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if ln and not ln.startswith(("#", "[")):
                k, v = ln.split("=", 1)
                keys.setdefault(k, []).append(v)
    return keys


class InstallTest(GatewayCase):
    def setUp(self):
        super().setUp()
        self.prefix = self.tmp.file("prefix")
        self.out = install(self.prefix)
        self.bin = os.path.join(self.prefix, "bin", "switchyard")
        self.conf = os.path.join(self.prefix, "etc", "switchyard", "switchyard.json")
        self.unit = os.path.join(self.prefix, "lib", "systemd", "system", "switchyard.service")

    def test_files(self):
        for p in (self.bin, os.path.join(self.prefix, "bin", "switchyard-route")):
            self.assertTrue(os.path.isfile(p) and os.access(p, os.X_OK), (p, self.out))
        for p in (self.conf, self.conf.replace("switchyard.json", "switchyard.example.json"),
                  self.unit):
            self.assertTrue(os.path.isfile(p), (p, self.out))

    def test_unit(self):
        k = unit_keys(self.unit)
        self.assertEqual(k["ExecStart"], ["%s -c %s" % (self.bin, self.conf)])
        self.assertEqual(k["ExecStartPre"], ["%s --check %s" % (self.bin, self.conf)])
        self.assertEqual(k["ExecReload"], ["/bin/kill -HUP $MAINPID"])
        self.assertEqual(k["KillSignal"], ["SIGTERM"])
        # the example config's state and log directories are the unit's
        with open(self.conf) as f:
            cfg = json.load(f)
        self.assertEqual(k["StateDirectory"], ["switchyard"])
        self.assertEqual(cfg["admin"]["state_dir"], "/var/lib/switchyard")
        self.assertEqual(k["LogsDirectory"], ["switchyard"])
        self.assertEqual(os.path.dirname(cfg["access_log"]), "/var/log/switchyard")

    def test_installed_config_checks_ok(self):
        # --check also checks the state and log directories, which systemd
        # makes before ExecStartPre: here they are temporary ones
        with open(self.conf) as f:
            cfg = json.load(f)
        cfg["admin"]["state_dir"] = self.tmp.file("check-state")
        cfg["access_log"] = self.tmp.file("check-access.log")
        path = self.tmp.file("check.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        r = subprocess.run([self.bin, "--check", path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"ok"), r.stdout)

    def test_installed_program_runs_the_example(self):
        with open(self.conf) as f:
            cfg = json.load(f)
        port, admin = free_port(), free_port()
        cfg["listeners"] = [{"address": "127.0.0.1:%d" % port}]
        cfg["admin"]["address"] = "127.0.0.1:%d" % admin
        cfg["admin"]["state_dir"] = self.tmp.file("state")
        cfg["access_log"] = self.tmp.file("access.log")
        cfg["workers"] = 1
        os.mkdir(cfg["admin"]["state_dir"])
        saved = harness.SY_BIN
        harness.SY_BIN = self.bin  # Gateway starts harness.SY_BIN
        try:
            gw = Gateway(self.tmp, cfg, name="installed", port=port)
            self.addCleanup(gw.stop)
            gw.start()
        finally:
            harness.SY_BIN = saved
        r = get(port, "/ping")
        self.assertEqual((r.status, r.body), (200, b"pong\n"), r)
        # a change through the admin API is persisted in the state directory
        route = {"id": "x", "path": "/x", "response": {"status": 200, "body": "x"}}
        harness.wait_for(lambda: port_open(admin), what="admin API")
        with harness.Client(admin) as c:
            r = c.request("POST", "/routes", body=json.dumps(route).encode(),
                          headers=[("Content-Type", "application/json")])
        self.assertEqual(r.status, 201, r)
        self.assertTrue(os.listdir(cfg["admin"]["state_dir"]))
        # what ExecReload sends
        since = gw.log_size()
        gw.signal(signal.SIGHUP)
        gw.wait_log(r"config reloaded|reload refused", since)
        self.assertEqual(get(port, "/ping").status, 200)
        # what systemctl stop sends: a drain, exit 0
        self.assertEqual(gw.stop(), 0, gw.log())

    def test_reinstall_keeps_an_edited_config(self):
        with open(self.conf) as f:
            cfg = json.load(f)
        cfg["workers"] = 3
        with open(self.conf, "w") as f:
            json.dump(cfg, f)
        out = install(self.prefix)
        self.assertIn("Keeping: " + self.conf, out)
        with open(self.conf) as f:
            self.assertEqual(json.load(f)["workers"], 3)

    def test_destdir_stages_with_the_final_paths(self):
        stage = self.tmp.file("stage")
        install("/opt/sy", env={"DESTDIR": stage})
        root = stage + "/opt/sy"
        self.assertTrue(os.path.isfile(root + "/bin/switchyard"))
        self.assertTrue(os.path.isfile(root + "/etc/switchyard/switchyard.json"))
        k = unit_keys(root + "/lib/systemd/system/switchyard.service")
        self.assertEqual(k["ExecStart"], ["/opt/sy/bin/switchyard -c "
                                          "/opt/sy/etc/switchyard/switchyard.json"])


if __name__ == "__main__":
    main()
