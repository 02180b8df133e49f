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

What goes with the unit: it runs as the user its sysusers.d file makes
(systemd-sysusers into a scratch root), hardened, with a LimitNOFILE under
which the example config starts without the descriptor warning, and
`systemd-analyze verify` finds nothing to say (its Documentation= man pages
included). The logrotate file passes `logrotate -d` and rotates a running
gateway's access log. The man pages render without a warning, `man` finds
them under the prefix, and each names every option its program's usage
prints. The README goes under share/doc/switchyard.

The tools come from .ci/setup: systemd (systemd-analyze, systemd-sysusers),
logrotate, man-db and groff-base."""
import grp
import json
import os
import pwd
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
        self.sysusers = os.path.join(self.prefix, "lib", "sysusers.d", "switchyard.conf")
        self.logrotate = os.path.join(self.prefix, "etc", "logrotate.d", "switchyard")
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
        and its example, the unit with its sysusers.d and logrotate files, the
        man pages, the README and every file of docs/ (when the tree has
        one) beside it, as the README's links expect."""
        files = ["bin/switchyard", "bin/switchyard-route", "etc/switchyard/switchyard.json",
                 "etc/switchyard/switchyard.example.json",
                 "lib/systemd/system/switchyard.service", "lib/sysusers.d/switchyard.conf",
                 "etc/logrotate.d/switchyard", "share/doc/switchyard/README.md"]
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

    def test_unit_runs_as_its_user_hardened(self):
        k = unit_keys(self.unit)
        self.assertEqual((k["User"], k["Group"]), (["switchyard"], ["switchyard"]))
        self.assertEqual(k["AmbientCapabilities"], ["CAP_NET_BIND_SERVICE"])
        self.assertEqual(k["CapabilityBoundingSet"], ["CAP_NET_BIND_SERVICE"])
        for key, value in (("NoNewPrivileges", "true"), ("ProtectSystem", "strict"),
                           ("ProtectHome", "true"), ("PrivateTmp", "true")):
            self.assertEqual(k[key], [value], key)
        # sd_notify at start, and MAINPID= from the process a USR2 upgrade starts
        self.assertEqual(k["Type"], ["notify"])
        self.assertEqual(k["NotifyAccess"], ["all"])
        # PCRE2's JIT maps memory writable and executable (regexp routes)
        self.assertNotIn("MemoryDenyWriteExecute", k)

    def test_unit_verifies(self):
        # offline, no systemd running needed; with the prefix's man pages on
        # MANPATH it also looks up each Documentation=man: page
        rc, out, err = run(["systemd-analyze", "verify", self.unit],
                           env={"MANPATH": self.man})
        self.assertEqual((rc, out + err), (0, ""))

    def test_sysusers_makes_the_unit_user(self):
        root = tempfile.mkdtemp(dir=self.tmp.path)
        os.mkdir(os.path.join(root, "etc"))
        rc, out, err = run(["systemd-sysusers", "--root=" + root, self.sysusers])
        self.assertEqual(rc, 0, out + err)
        with open(os.path.join(root, "etc", "passwd")) as f:
            users = {ln.split(":")[0]: ln.strip().split(":") for ln in f}
        with open(os.path.join(root, "etc", "group")) as f:
            groups = {ln.split(":")[0]: ln.strip().split(":") for ln in f}
        k = unit_keys(self.unit)
        user, group = k["User"][0], k["Group"][0]
        self.assertIn(user, users)
        self.assertEqual(users[user][3], groups[group][2])  # its primary group
        self.assertEqual(users[user][6], "/usr/sbin/nologin")

    def test_limit_nofile_fits_the_example(self):
        # the gateway warns at start when RLIMIT_NOFILE is below what
        # limits.max_connections needs, naming the number; the example's
        # (the default max_connections) with the most workers there can be
        # must fit under the unit's LimitNOFILE
        limit = int(unit_keys(self.unit)["LimitNOFILE"][0])
        gw = self.start_installed(self.example_on_free_ports(workers=256), nofile=(4096, 4096))
        need = re.search(r"descriptor limit \(RLIMIT_NOFILE\) 4096, hard 4096: "
                         r"limits.max_connections \d+ needs about (\d+)", gw.log())
        self.assertTrue(need, gw.log())
        self.assertGreaterEqual(limit, int(need.group(1)))

    def logrotate_conf(self, log_dir, postrotate=None):
        """The installed logrotate file for <log_dir>, its accounts mapped to
        this test's user (the host has no switchyard user), and its postrotate
        script replaced by <postrotate> when given."""
        with open(self.logrotate) as f:
            text = f.read()
        me, mine = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
        text = text.replace("/var/log/switchyard/", log_dir + "/")
        text = re.sub(r"(?m)^(\s*(su|create 0640)) switchyard switchyard$",
                      r"\1 %s %s" % (me, mine), text)
        if postrotate:
            text = re.sub(r"(?s)postrotate\n.*?endscript", "postrotate\n%s\nendscript" % postrotate,
                          text)
        path = os.path.join(tempfile.mkdtemp(dir=self.tmp.path), "switchyard")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_logrotate_file(self):
        with open(self.logrotate) as f:
            text = f.read()
        with open(self.conf) as f:
            access_log = json.load(f)["access_log"]
        # it rotates the example's access log, and tells the main process
        self.assertIn(os.path.dirname(access_log) + "/*.log {", text)
        self.assertRegex(text, r"postrotate\n(.*\n)*.*systemctl kill --kill-whom=main "
                               r"--signal=SIGUSR1 switchyard.service\n(.*\n)*\s*endscript")
        log_dir = tempfile.mkdtemp(dir=self.tmp.path)
        with open(os.path.join(log_dir, "access.log"), "w") as f:
            f.write("{}\n")
        state = os.path.join(log_dir, "status")
        rc, out, err = run(["logrotate", "-d", "-s", state, self.logrotate_conf(log_dir)])
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("error", (out + err).lower(), out + err)
        self.assertIn("rotating pattern: %s/*.log" % log_dir, out + err)

    def test_logrotate_rotates_a_running_gateway(self):
        # a rotation as logrotate makes it (rename, create, delaycompress),
        # with the postrotate signal sent to this gateway
        cfg = self.example_on_free_ports(workers=2)
        log_dir = os.path.dirname(cfg["access_log"])
        gw = self.start_installed(cfg)

        def tagged(path, tag):
            if not os.path.exists(path):
                return False
            with open(path) as f:
                return ("/ping?%s" % tag) in f.read()
        self.assertEqual(get(gw.port, "/ping?before").status, 200)
        harness.wait_for(lambda: tagged(cfg["access_log"], "before"), what="the line before")
        since = gw.log_size()
        conf = self.logrotate_conf(log_dir, postrotate="kill -USR1 %d" % gw.proc.pid)
        rc, out, err = run(["logrotate", "-f", "-s", os.path.join(log_dir, "status"), conf])
        self.assertEqual(rc, 0, out + err)
        gw.wait_log(r"SIGUSR1: access log \S+ reopened", since)
        self.assertEqual(get(gw.port, "/ping?after").status, 200)
        harness.wait_for(lambda: tagged(cfg["access_log"], "after"), what="the line after")
        rotated = cfg["access_log"] + ".1"
        self.assertTrue(tagged(rotated, "before"))  # not compressed yet: delaycompress
        self.assertFalse(tagged(rotated, "after"))
        self.assertEqual(os.stat(cfg["access_log"]).st_mode & 0o777, 0o640)  # create 0640

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
