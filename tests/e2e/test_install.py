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
unit names.

The man pages render without a warning, `man` finds them under the prefix,
and each names every option its program's usage prints. The README and
docs/ go under share/doc/switchyard.

The tools come from .ci/setup: man-db and groff-base."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

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


def run(args, env=None, stdin=None):
    """<args>' exit status, stdout and stderr (text); a missing tool fails
    the test naming .ci/setup."""
    if not shutil.which(args[0]):
        raise AssertionError("%s not found: .ci/setup installs it" % args[0])
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(args, env=e, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT * 4)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def options_of(usage):
    """The options a usage text names: -c, --check, ..."""
    return set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", usage))


class InstallTest(GatewayCase):
    def setUp(self):
        super().setUp()
        self.prefix = self.tmp.file("prefix")
        self.out = install(self.prefix)
        self.bin = os.path.join(self.prefix, "bin", "switchyard")
        self.conf = os.path.join(self.prefix, "etc", "switchyard", "switchyard.json")
        self.unit = os.path.join(self.prefix, "lib", "systemd", "system", "switchyard.service")
        self.man = os.path.join(self.prefix, "share", "man")
        self.pages = {"switchyard": "man8/switchyard.8",
                      "switchyard-route": "man1/switchyard-route.1",
                      "switchyard.json": "man5/switchyard.json.5"}
        self.doc = os.path.join(self.prefix, "share", "doc", "switchyard")

    def start_installed(self, cfg, name="installed", **kw):
        """The installed switchyard on <cfg>, stopped when the test ends."""
        saved = harness.SY_BIN
        harness.SY_BIN = self.bin  # Gateway starts harness.SY_BIN
        try:
            gw = Gateway(self.tmp, cfg, name=name, **kw)
            self.addCleanup(gw.stop)
            gw.start()
        finally:
            harness.SY_BIN = saved
        return gw

    def example_on_free_ports(self, **more):
        """The installed example config on a free port, its state directory
        and access log in temporary ones."""
        d = tempfile.mkdtemp(dir=self.tmp.path)
        with open(self.conf) as f:
            cfg = json.load(f)
        cfg["listeners"] = [{"address": "127.0.0.1:%d" % free_port()}]
        cfg["admin"]["address"] = "127.0.0.1:%d" % free_port()
        cfg["admin"]["state_dir"] = os.path.join(d, "state")
        cfg["access_log"] = os.path.join(d, "access.log")
        cfg.update(more)
        os.mkdir(cfg["admin"]["state_dir"])
        return cfg

    def expected_files(self, root):
        """What an install under <root> must hold: the programs, the config
        and its example, the unit, the man pages, the README and every file
        of docs/ (when the tree has one) beside it, as the README's links
        expect."""
        files = ["bin/switchyard", "bin/switchyard-route", "etc/switchyard/switchyard.json",
                 "etc/switchyard/switchyard.example.json",
                 "lib/systemd/system/switchyard.service", "share/doc/switchyard/README.md"]
        files += ["share/man/" + page for page in self.pages.values()]
        src_docs = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "docs")
        for d, _, names in os.walk(src_docs):
            files += [os.path.join("share/doc/switchyard/docs",
                                   os.path.relpath(os.path.join(d, n), src_docs)) for n in names]
        return [os.path.join(root, f) for f in files]

    def test_files(self):
        for p in self.expected_files(self.prefix):
            self.assertTrue(os.path.isfile(p), (p, self.out))
        for p in (self.bin, os.path.join(self.prefix, "bin", "switchyard-route")):
            self.assertTrue(os.access(p, os.X_OK), p)

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

    def test_man_pages_render_without_warnings(self):
        for page in self.pages.values():
            path = os.path.join(self.man, page)
            rc, out, err = run(["groff", "-man", "-ww", "-z", path])
            self.assertEqual((rc, out + err), (0, ""), page)
            rc, out, err = run(["man", "--warnings", "-l", path], env={"MANWIDTH": "80"})
            self.assertEqual((rc, err), (0, ""), page)
            self.assertIn("SEE ALSO", out, page)

    def test_man_finds_the_pages(self):
        # `man switchyard` under the prefix's man directory
        for name, page in self.pages.items():
            rc, out, err = run(["man", "-w", name], env={"MANPATH": self.man})
            self.assertEqual((rc, out.strip()), (0, os.path.join(self.man, page)), err)

    def test_man_pages_name_every_option(self):
        # the options each program's usage prints, in its man page as rendered
        route = os.path.join(self.prefix, "bin", "switchyard-route")
        for prog, page in ((self.bin, "man8/switchyard.8"), (route, "man1/switchyard-route.1")):
            rc, usage, err = run([prog, "--help"])
            self.assertEqual(rc, 0, err)
            opts = options_of(usage)
            self.assertGreaterEqual(len(opts), 4, usage)
            rc, text, err = run(["man", "--nh", "--nj", "-l", os.path.join(self.man, page)],
                                env={"MANWIDTH": "1000", "LC_ALL": "C"})
            self.assertEqual(rc, 0, err)
            self.assertEqual(sorted(opts - options_of(text)), [], page)

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
        cfg = self.example_on_free_ports(workers=1)
        gw = self.start_installed(cfg)
        port = gw.port
        admin = int(cfg["admin"]["address"].rsplit(":", 1)[1])
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
        for p in self.expected_files(root):
            self.assertTrue(os.path.isfile(p), p)
        k = unit_keys(root + "/lib/systemd/system/switchyard.service")
        self.assertEqual(k["ExecStart"], ["/opt/sy/bin/switchyard -c "
                                          "/opt/sy/etc/switchyard/switchyard.json"])


if __name__ == "__main__":
    main()
