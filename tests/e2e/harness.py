"""harness.py - shared helpers of Switchyard's end-to-end tests (stdlib only).

The tests start the real `switchyard` binary (SY_BIN) in front of real
sy_test_backend processes (SY_BACKEND, see backend/README.md), all on
127.0.0.1 with free ports and generated configs, and talk to them over raw
sockets so that malformed input, pipelining and framing stay under control.

- Backend / Gateway own one process each, started in a process group of its
  own and killed (SIGKILL to the group) by stop()/kill(); an atexit hook kills
  whatever a crashed test left behind.
- Gateway.stop() sends SIGTERM, waits for the drain and returns the exit
  status; check_clean() fails the test when the process did not exit 0 or its
  stderr holds a sanitizer report (the suite also runs under ASan+UBSan and,
  for the "concurrency" label, TSan).
- Client is a blocking HTTP/1.1 client over one socket with a timeout, reading
  responses the way RFC 9112 section 6.3 says (HEAD, 1xx, 204, 304, chunked,
  Content-Length, close-delimited).
Every wait is bounded (TIMEOUT seconds, more under sanitizers via
SY_E2E_TIMEOUT); nothing asserts on timing.
"""
import atexit
import base64
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(HERE))
SY_BIN = os.environ.get("SY_BIN") or os.path.join(_ROOT, "build-e2e", "gateway", "switchyard")
SY_BACKEND = os.environ.get("SY_BACKEND") or os.path.join(
    _ROOT, "build-e2e", "tests", "e2e", "backend", "sy_test_backend")

# Upper bound of every single wait (a socket read, a process start, a log
# line). Generous: sanitizer builds are several times slower. Only failures
# ever wait this long.
TIMEOUT = float(os.environ.get("SY_E2E_TIMEOUT", "30"))

PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer",
                   "ERROR: UndefinedBehaviorSanitizer")

_live = []  # every process started and not yet reaped


def _kill_all():
    for p in list(_live):
        _killpg(p, signal.SIGKILL)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


atexit.register(_kill_all)


def _killpg(p, sig):
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def pattern_bytes(n, start=0):
    """The first <n> bytes (from offset <start>) of a generated backend body."""
    reps = (start + n) // len(PATTERN) + 1
    return (PATTERN * reps)[start:start + n]


def pattern_sha256(n):
    """sha256 hex of the <n>-byte generated body, computed in 1 MiB blocks."""
    block = PATTERN * (1 << 14)  # 1 MiB, a whole number of periods
    h = hashlib.sha256()
    left = n
    while left >= len(block):
        h.update(block)
        left -= len(block)
    h.update(block[:left])
    return h.hexdigest()


_ports = set()
# Ports handed out come from one counter that every test process on the
# machine shares (ctest runs several at once), kept in a locked file, and
# from below the kernel's ephemeral range (32768 and up here), where
# bind(0) and outgoing connections never take them. bind(0)'s answer, used
# before, could be another process's port in the while between its test
# taking it and its server binding it, or for good in a test's "dead" port.
PORT_BASE, PORT_SPAN = 20000, 12000
_PORT_FILE = os.path.join(tempfile.gettempdir(), "switchyard-e2e-ports")


def _bindable(p):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    """A port nothing listens on right now, not handed out before to this
    or any other test process that shares the counter file."""
    with open(_PORT_FILE, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read().strip()
        n = int(text) if text.isdigit() else os.getpid()
        for _ in range(PORT_SPAN):
            n = (n + 1) % PORT_SPAN
            p = PORT_BASE + n
            if p not in _ports and _bindable(p):
                break
        else:
            raise RuntimeError("no free port in %d-%d" % (PORT_BASE, PORT_BASE + PORT_SPAN - 1))
        f.seek(0)
        f.truncate()
        f.write("%d\n" % n)
    _ports.add(p)
    return p


def wait_for(cond, timeout=TIMEOUT, interval=0.01, what="condition"):
    """Polls cond() until it returns a true value (returned) or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def metrics_text(gw):
    """The text of <gw>'s GET /metrics (the admin API may still be starting:
    waited for)."""
    def fetch():
        try:
            with urllib.request.urlopen("http://%s/metrics" % gw.cfg["admin"]["address"],
                                        timeout=TIMEOUT) as r:
                return r.read().decode()
        except urllib.error.URLError:
            return None

    return wait_for(fetch, what="/metrics")


def wait_port_file(proc, pf, what, stderr=lambda: ""):
    """The port a starting server <proc> writes to <pf> (atomically, as
    "PORT\\n"), waited for; fails when <proc> exits first."""
    def ready():
        if proc.poll() is not None:
            raise AssertionError("%s exited with %s: %s" % (what, proc.returncode, stderr()))
        try:
            with open(pf) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    return wait_for(ready, what="%s port file" % what)


def rss_kib(pid, field="VmRSS"):
    """VmRSS of <pid> in KiB (from /proc/PID/status); <field> "VmHWM": its peak."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no %s for %d" % (field, pid))


class RssWatch:
    """Samples a process's VmRSS every few milliseconds in a thread: finish()
    is the most it grew (KiB) since the watch started."""

    def __init__(self, pid):
        self.pid = pid
        self.start = rss_kib(pid)
        self.peak = self.start
        self.samples = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.005):
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
                self.samples += 1
            except (OSError, RuntimeError):
                return

    def finish(self):
        self.stop.set()
        self.t.join(10)
        self.peak = max(self.peak, rss_kib(self.pid))
        return self.peak - self.start


def asan_env():
    """The environment of a gateway whose RSS a test measures: ASan keeps
    freed memory in a quarantine (256 MiB by default) that would show up as
    RSS, so it is kept small and RSS measures the gateway."""
    opts = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (opts + ":" if opts else "") + "quarantine_size_mb=16"}


class TempDir:
    def __init__(self, prefix="sy-e2e-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def file(self, name):
        return os.path.join(self.path, name)

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


# ---------------------------------------------------------------------------
# processes


class Backend:
    """One sy_test_backend process (see backend/README.md)."""

    def __init__(self, tmp, name, port=0, threads=1, host="127.0.0.1"):
        self.tmp, self.name, self.port, self.threads = tmp, name, port, threads
        self.host = host  # any 127.0.0.0/8 address
        self.proc = None

    def start(self):
        pf = self.tmp.file("backend-%s.port" % self.name)
        if os.path.exists(pf):
            os.unlink(pf)
        args = [SY_BACKEND, "--listen", "%s:%d" % (self.host, self.port), "--name", self.name,
                "--port-file", pf]
        if self.threads > 1:
            args += ["--threads", str(self.threads)]
        err = open(self.tmp.file("backend-%s.err" % self.name), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                                     start_new_session=True)
        err.close()
        _live.append(self.proc)

        self.port = wait_port_file(self.proc, pf, "backend %s" % self.name, self.stderr)
        return self

    def stderr(self):
        try:
            with open(self.tmp.file("backend-%s.err" % self.name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @property
    def addr(self):
        return "%s:%d" % (self.host, self.port)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if not self.proc:
            return None
        _killpg(self.proc, sig)
        try:
            rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            _killpg(self.proc, signal.SIGKILL)
            rc = self.proc.wait(TIMEOUT)
        if self.proc in _live:
            _live.remove(self.proc)
        return rc

    def restart(self):
        """Stops the process and starts a new one on the same port."""
        self.stop()
        return self.start()

    def _control(self, path):
        c = Client(self.port, host=self.host)
        try:
            r = c.request("GET", path, headers=[("Connection", "close")])
        finally:
            c.close()
        assert r.status == 200, (path, r.status, r.body)
        return json.loads(r.body)

    def stats(self):
        return self._control("/__stats")

    def reset(self):
        return self._control("/__reset")


class HeadServer:
    """A server of the test's own on 127.0.0.1 (a port from free_port()):
    each connection, in a thread of its own, has its first request head
    read, then answer(sock) answers it; unless that returns False, whatever
    else comes is read and dropped until the gateway closes. Every wait is
    bounded by TIMEOUT. close() stops accepting."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", free_port()))
        self.lsock.listen(8)
        self.lsock.settimeout(TIMEOUT)
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while not self.stop:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        s.settimeout(TIMEOUT)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            if self.answer_head(s, buf) is False:
                return
            while s.recv(65536):  # the rest is dropped
                pass
        except OSError:
            pass
        finally:
            s.close()

    def answer_head(self, s, head):
        """Answers the request whose head (and whatever followed) is <head>."""
        return self.answer(s)

    def answer(self, s):
        raise NotImplementedError

    def close(self):
        self.stop = True
        self.lsock.close()


class EarlyServer(HeadServer):
    """Answers every request <status> as soon as its head is read, before
    any of its body, keeps the connection and counts the heads. With
    <status> 0 it answers nothing: it resets the connection instead."""

    def __init__(self, status):
        self.status = status
        self.heads = 0
        super().__init__()

    def answer(self, s):
        self.heads += 1
        if not self.status:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        body = b"early %d\n" % self.status
        s.sendall(b"HTTP/1.1 %d Early\r\nContent-Length: %d\r\n\r\n%s" %
                  (self.status, len(body), body))
        return True


def self_signed(tmp, name="tls"):
    """A P-256 certificate for CN=localhost, made with the openssl CLI in
    <tmp>: a listener's {"cert", "key"} entry."""
    cert, key = tmp.file(name + ".pem"), tmp.file(name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-subj", "/CN=localhost", "-days", "30"],
                   check=True, capture_output=True, timeout=60)
    return {"cert": cert, "key": key}


def upstream_cfg(*backends_or_addrs, **extra):
    servers = []
    for b in backends_or_addrs:
        servers.append({"address": b if isinstance(b, str) else b.addr})
    u = {"servers": servers}
    u.update(extra)
    return u


def gateway_config(upstreams=None, routes=None, workers=2, **sections):
    """A config dict for one 127.0.0.1 listener on a free port; the admin
    address gets a free port too, access_log defaults to "off" and log_level
    to "info" (tests wait for info lines; the default level is warn)."""
    cfg = {
        "workers": workers,
        "listeners": [{"address": "127.0.0.1:%d" % free_port()}],
        "upstreams": upstreams or {},
        "routes": routes or [],
        "admin": {"address": "127.0.0.1:%d" % free_port()},
        "access_log": "off",
        "log_level": "info",
    }
    cfg.update(sections)
    if E2E_PROTO == "h2c":
        for li in cfg.get("listeners", []):
            if "tls" not in li and "protocols" not in li:
                li["protocols"] = ["h1", "h2c"]
                _H2C_PORTS.add(int(li["address"].rsplit(":", 1)[1]))
    return cfg


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


class Gateway:
    """One switchyard process on a generated config file."""

    _count = 0

    def __init__(self, tmp, cfg, name="gw", env=None, args=None, port=None, nofile=None,
                 cwd=None):
        """<cfg> None: no -c, the embedded default config (give <port>).
        <nofile>: (soft, hard) RLIMIT_NOFILE to start it with. <cwd>: the
        directory it starts in (the test's by default).
        Files are named after <name> plus a sequence number: one log each."""
        Gateway._count += 1
        name = "%s-%d" % (name, Gateway._count)
        self.tmp, self.cfg, self.name = tmp, cfg, name
        self._port = port
        self.env, self.args, self.nofile, self.cwd = env, args, nofile, cwd
        self.proc = None
        self.rc = None
        self.cfg_path = tmp.file(name + ".json")
        self.log_path = tmp.file(name + ".log")
        self.out_path = tmp.file(name + ".out")

    @property
    def port(self):
        if self._port:
            return self._port
        return int(self.cfg["listeners"][0]["address"].rsplit(":", 1)[1])

    @property
    def nworkers(self):
        return (self.cfg or {}).get("workers", 1)

    def write_config(self, cfg=None, text=None):
        if cfg is not None:
            self.cfg = cfg
        write_atomic(self.cfg_path, text if text is not None else json.dumps(self.cfg, indent=1))

    def start(self):
        args = [SY_BIN]
        if self.cfg is not None:
            self.write_config()
            args += ["-c", self.cfg_path]
        args += self.args or []
        env = dict(os.environ)
        # the embedded default keeps its state in $XDG_STATE_HOME/switchyard:
        # a test's, never the real home's (a test may give its own)
        env["XDG_STATE_HOME"] = self.tmp.file("xdg-state")
        if self.env:
            env.update(self.env)
        log = open(self.log_path, "ab")
        out = open(self.out_path, "ab")
        limit = None
        if self.nofile:
            def limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)
        self.proc = subprocess.Popen(args, stdout=out, stderr=log, env=env, cwd=self.cwd,
                                     start_new_session=True, preexec_fn=limit)
        log.close()
        out.close()
        _live.append(self.proc)

        # every listener, not only the first: a test that goes straight to
        # its second listener must not find it still unbound under load
        ports = self.listener_ports()

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("switchyard exited with %s:\n%s" % (
                    self.proc.returncode, self.log()))
            return all(self._accepts(p) for p in ports)

        wait_for(ready, what="switchyard listening on port%s %s" % (
            "s" if len(ports) > 1 else "", ", ".join(map(str, ports))))
        return self

    def listener_ports(self):
        if self._port or not self.cfg:
            return [self.port]
        return [int(l["address"].rsplit(":", 1)[1]) for l in self.cfg["listeners"]]

    def _accepts(self, port=None):
        try:
            socket.create_connection(("127.0.0.1", port or self.port), timeout=TIMEOUT).close()
            return True
        except OSError:
            return False

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def wait_log(self, regex, since=0, timeout=TIMEOUT):
        """Waits until <regex> matches the log after byte <since>; returns
        the match (its end() is relative to <since>)."""
        rx = re.compile(regex)

        def found():
            if self.proc.poll() is not None:
                raise AssertionError("switchyard exited with %s while waiting for %r:\n%s" % (
                    self.proc.returncode, regex, self.log()))
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return rx.search(f.read().decode(errors="replace"))

        return wait_for(found, timeout=timeout, interval=0.005, what="log line %r" % regex)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reload(self, cfg=None, text=None):
        self.write_config(cfg, text)
        self.signal(signal.SIGHUP)

    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, wait for the drain; returns the exit status."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.rc = self.proc.wait(TIMEOUT * 2)
        except subprocess.TimeoutExpired:
            _killpg(self.proc, signal.SIGKILL)
            self.proc.wait(TIMEOUT)
            self.rc = "killed after the drain did not finish"
        _killpg(self.proc, signal.SIGKILL)  # anything left in its group
        if self.proc in _live:
            _live.remove(self.proc)
        return self.rc

    def check_clean(self):
        """Raises unless the process exited 0 without sanitizer reports."""
        text = self.log()
        for m in SANITIZER_MARKS:
            if m in text:
                raise AssertionError("sanitizer report in %s's log:\n%s" % (self.name, text[-20000:]))
        if self.rc != 0:
            raise AssertionError("%s exited with %s:\n%s" % (self.name, self.rc, text[-5000:]))


class GatewayCase(unittest.TestCase):
    """A TestCase with a temp dir and helpers that stop what they start."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        cls._procs = []
        # runs even when a subclass's setUpClass fails half-way
        cls.addClassCleanup(cls._stop_shared)

    @classmethod
    def _stop_shared(cls):
        errors = []
        for p in reversed(cls._procs):
            try:
                p.stop()
                if isinstance(p, Gateway):
                    p.check_clean()
            except AssertionError as e:
                errors.append(str(e))
        cls._procs = []
        cls.tmp.cleanup()
        if errors:
            raise AssertionError("\n".join(errors))

    @classmethod
    def shared_backend(cls, name, **kw):
        b = Backend(cls.tmp, name, **kw)
        cls._procs.append(b)
        return b.start()

    @classmethod
    def shared_gateway(cls, cfg, name="gw", **kw):
        g = Gateway(cls.tmp, cfg, name=name, **kw)
        cls._procs.append(g)
        return g.start()

    # per-test processes: stopped (and checked) at the end of the test
    def hanging_server(self):
        """The address of a server whose connects hang: it listens with a
        backlog of 0 that one connection fills, so a new SYN is dropped.
        Closed when the test ends."""
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)
        filler = socket.create_connection(lsock.getsockname())  # fills the queue
        self.addCleanup(lsock.close)
        self.addCleanup(filler.close)
        return "127.0.0.1:%d" % lsock.getsockname()[1]

    def own_backend(self, name, **kw):
        b = Backend(self.tmp, name, **kw)
        self.addCleanup(b.stop)
        return b.start()

    def own_gateway(self, cfg, name="gw", check=True, **kw):
        g = Gateway(self.tmp, cfg, name=name, **kw)

        def done():
            g.stop()
            if check:
                g.check_clean()

        self.addCleanup(done)
        return g.start()

    # assertions
    def assertClosed(self, client, msg=None):
        self.assertTrue(client.wait_closed(), msg or "connection still open")

    def assertHeader(self, resp, name, value):
        self.assertEqual(resp.header(name), value, "%s in %s" % (name, resp.headers))


# ---------------------------------------------------------------------------
# HTTP client


class Response:
    def __init__(self):
        self.version = None
        self.status = None
        self.reason = None
        self.headers = []  # [(name, value)] as received
        self.body = b""
        self.interim = []  # 1xx responses before this one
        self.raw_head = b""
        self.body_len = 0  # bytes of body received (also when a sink took them)
        self.complete = False

    def header(self, name):
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    def headers_all(self, name):
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def has(self, name):
        return self.header(name) is not None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %s %s %r>" % (self.status, self.headers, self.body[:200])


class Closed(Exception):
    """The peer closed (or reset) the connection before the expected bytes.
    .response holds the partial response when its head had arrived."""

    response = None


class SocketOwner:
    """A client of one socket, self.sock: close() (never raises) and a
    context manager that closes it."""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# SY_E2E_PROTO=h2c runs a suite over HTTP/2 with prior knowledge (the
# suites are registered twice, tests/e2e/CMakeLists.txt): gateway_config()
# lets its plaintext listeners take h2c, get() and every Client whose first
# use is a request() that HTTP/2 can carry speak HTTP/2 (h2client.py), and
# what a test writes as raw bytes stays HTTP/1.1 on the same listener.
# A test of a behaviour only HTTP/1.1 has says so with @h1_only.
E2E_PROTO = os.environ.get("SY_E2E_PROTO", "h1")
_H2C_PORTS = set()  # listeners gateway_config() opened to h2c: HTTP/2 goes only there
_H2_FIELDS_NOT = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


def h1_only(why):
    """Marks a test of HTTP/1.1's own behaviour: skipped in an HTTP/2 run."""
    return unittest.skipIf(E2E_PROTO != "h1", "HTTP/1.1 only: " + why)


def _h2_form(headers, body):
    """<headers> and <body> as HTTP/2 carries them: a chunked body (whole,
    trailers none) is a body without a length; None when HTTP/2 cannot
    carry them (connection-specific fields, TE other than trailers)."""
    hs, chunked = [], False
    for k, v in headers or []:
        n = k.lower()
        if n == "transfer-encoding" and v.lower() == "chunked" and body is not None:
            chunked = True
            out, rest = b"", body
            while True:
                size, _, rest = rest.partition(b"\r\n")
                n_ = int(size.split(b";")[0], 16)
                if n_ == 0:
                    break
                out, rest = out + rest[:n_], rest[n_ + 2:]
            body = out
        elif n in _H2_FIELDS_NOT or (n == "te" and v.lower() != "trailers"):
            return None
        else:
            hs.append((k, v))
    if body is not None and not chunked and not any(k.lower() == "content-length" for k, _ in hs):
        hs.append(("Content-Length", str(len(body))))  # as build_request() frames it
    return hs, body


def _h2_can_carry(method, target, headers, version):
    return (version == "1.1" and method != "CONNECT" and target.startswith("/") and
            _h2_form(headers, None) is not None)


class Client(SocketOwner):
    """A blocking HTTP/1.1 client over one TCP connection (under
    SY_E2E_PROTO=h2c, one HTTP/2 connection when its first use is a
    request HTTP/2 can carry)."""

    def __init__(self, port, host="127.0.0.1", timeout=TIMEOUT, sock=None):
        self.port = port
        self._host, self._timeout = host, timeout
        self._sock = sock
        self._h2 = None
        if sock is None and E2E_PROTO == "h1":
            self._sock = socket.create_connection((host, port), timeout=timeout)
        if self._sock is not None:
            self._sock.settimeout(timeout)
        self.buf = bytearray()
        self.eof = False

    @property
    def sock(self):
        if self._h2 is not None:
            return self._h2.h2.sock
        if self._sock is None:  # an HTTP/2 run's client used as HTTP/1.1
            self._sock = socket.create_connection((self._host, self.port), timeout=self._timeout)
            self._sock.settimeout(self._timeout)
        return self._sock

    @sock.setter
    def sock(self, s):
        self._sock = s

    def close(self):
        if self._h2 is not None:
            self._h2.close()
        elif self._sock is not None:
            SocketOwner.close(self)

    def local_port(self):
        return self.sock.getsockname()[1]

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, n=65536):
        if self.eof:
            raise Closed("connection closed")
        try:
            d = self.sock.recv(n)
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof = True
            raise Closed("connection closed")
        self.buf += d

    def _take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, sep, limit=1 << 20):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                return self._take(i + len(sep))
            if len(self.buf) > limit:
                raise AssertionError("no %r within %d bytes" % (sep, limit))
            self._fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        return self._take(n)

    def read_head(self):
        """One response head (status line + fields), CRLF line ends."""
        raw = self.read_until(b"\r\n\r\n")
        r = Response()
        r.raw_head = raw
        lines = raw[:-4].split(b"\r\n")
        m = re.match(rb"^HTTP/(\d\.\d) (\d{3})(?: (.*))?$", lines[0])
        if not m:
            raise AssertionError("bad status line %r" % lines[0])
        r.version = m.group(1).decode()
        r.status = int(m.group(2))
        r.reason = (m.group(3) or b"").decode("latin-1")
        for ln in lines[1:]:
            if b":" not in ln or ln[:1] in (b" ", b"\t"):
                raise AssertionError("bad field line %r in %r" % (ln, raw))
            k, v = ln.split(b":", 1)
            if k != k.strip():
                raise AssertionError("whitespace around field name %r" % ln)
            r.headers.append((k.decode("latin-1"), v.strip(b" \t").decode("latin-1")))
        return r

    def read_response(self, method="GET", sink=None, max_body=1 << 30):
        """The next final response (1xx collected in .interim). With <sink>,
        body bytes go to sink(bytes) instead of .body. A close-delimited
        body is read until EOF. Raises Closed when the connection ends
        before the message does (the partial response is in exc.response)."""
        interim = []
        while True:
            r = self.read_head()
            if 100 <= r.status < 200:
                interim.append(r)
                if len(interim) > 100:
                    raise AssertionError("more than 100 interim responses")
                if r.status == 101:
                    r.interim = interim[:-1]
                    r.complete = True
                    return r
                continue
            break
        r.interim = interim
        parts = []

        def put(b):
            r.body_len += len(b)
            if r.body_len > max_body:
                raise AssertionError("response body over %d bytes" % max_body)
            if sink:
                sink(b)
            else:
                parts.append(b)

        try:
            if method == "HEAD" or r.status in (204, 304):
                pass
            elif r.header("Transfer-Encoding") is not None:
                te = r.header("Transfer-Encoding").lower()
                if te != "chunked":
                    raise AssertionError("unexpected Transfer-Encoding %r" % te)
                while True:
                    line = self.read_until(b"\r\n")
                    size = int(line.split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.read_until(b"\r\n") != b"\r\n":
                            pass  # trailers
                        break
                    self._body_n(size, put)
                    if self.read_exact(2) != b"\r\n":
                        raise AssertionError("chunk data not followed by CRLF")
            elif r.header("Content-Length") is not None:
                self._body_n(int(r.header("Content-Length")), put)
            else:
                while True:
                    if self.buf:
                        put(self._take(len(self.buf)))
                    try:
                        self._fill(1 << 20)
                    except Closed:
                        break
        except Closed as e:
            r.body = b"".join(parts)
            e.response = r
            raise
        r.body = b"".join(parts)
        r.complete = True
        return r

    def _body_n(self, n, put):
        while n > 0:
            if not self.buf:
                self._fill(1 << 20)
            k = min(n, len(self.buf))
            put(self._take(k))
            n -= k

    def request(self, method, target, headers=None, body=None, version="1.1", host="localhost",
                sink=None):
        if self._h2 is None and self._sock is None and self.port in _H2C_PORTS and _h2_can_carry(
                method, target, headers, version):
            import h2client
            self._h2 = h2client.Client(self.port, host=self._host, timeout=self._timeout,
                                       tls=E2E_PROTO == "h2")
        if self._h2 is not None:
            form = _h2_form(headers, body)
            if form is None:
                raise ValueError("%s %s: this request has no HTTP/2 form" % (method, target))
            return self._h2.request(method, target, headers=form[0], body=form[1], host=host,
                                    sink=sink)
        self.send(build_request(method, target, headers, body, version, host))
        return self.read_response(method, sink=sink)

    def wait_closed(self, timeout=TIMEOUT):
        """True when the peer closes (EOF or RST) within <timeout> without
        sending anything more; False on timeout or on unexpected bytes."""
        if self.buf:
            return False
        if self.eof:
            return True
        self.sock.settimeout(timeout)
        try:
            d = self.sock.recv(4096)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(TIMEOUT)
        if d:
            self.buf += d
            return False
        self.eof = True
        return True

    def silent_for(self, seconds):
        """True when nothing arrives (and no close) for <seconds>."""
        if self.buf or self.eof:
            return False
        self.sock.settimeout(seconds)
        try:
            d = self.sock.recv(4096)
        except socket.timeout:
            return True
        except ConnectionResetError:
            self.eof = True
            return False
        finally:
            self.sock.settimeout(TIMEOUT)
        if d:
            self.buf += d
        else:
            self.eof = True
        return False


def build_request(method, target, headers=None, body=None, version="1.1", host="localhost"):
    """Request bytes; Host first unless <host> is None or headers has one;
    Content-Length added for a body unless headers frame it."""
    hs = list(headers or [])
    names = {k.lower() for k, _ in hs}
    lines = ["%s %s HTTP/%s" % (method, target, version)]
    if host is not None and "host" not in names:
        lines.append("Host: %s" % host)
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        hs.append(("Content-Length", str(len(body))))
    for k, v in hs:
        lines.append("%s: %s" % (k, v))
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is not None:
        data += body
    return data


def get(port, target, headers=None, method="GET", body=None, host="localhost", version="1.1"):
    """One request on a fresh connection (closed afterwards)."""
    with Client(port) as c:
        return c.request(method, target, headers=headers, body=body, host=host, version=version)


def chunked(parts, trailers=None, ext=None):
    """Chunked encoding of <parts> (bytes), optional trailer fields."""
    out = b""
    for p in parts:
        out += b"%x%s\r\n" % (len(p), (b";" + ext) if ext else b"") + p + b"\r\n"
    out += b"0\r\n"
    for k, v in trailers or []:
        out += ("%s: %s\r\n" % (k, v)).encode()
    return out + b"\r\n"


# ---------------------------------------------------------------------------
# WebSocket (RFC 6455) client side


def ws_handshake(client, target, host="localhost", extra_headers=None):
    key = base64.b64encode(os.urandom(16)).decode()
    hs = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", key),
          ("Sec-WebSocket-Version", "13")] + list(extra_headers or [])
    client.send(build_request("GET", target, hs, host=host))
    r = client.read_response()
    expect = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    return r, expect


def ws_frame(payload, opcode=1, fin=True):
    mask = os.urandom(4)
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


def ws_read(client):
    """(opcode, fin, payload) of the next (unmasked) server frame."""
    b0, b1 = client.read_exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", client.read_exact(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", client.read_exact(8))[0]
    if b1 & 0x80:
        raise AssertionError("server frame is masked")
    return b0 & 0x0F, bool(b0 & 0x80), client.read_exact(n)


def main():
    unittest.main(verbosity=2)
