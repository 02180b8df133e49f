"""etcd.py - a real etcd (Debian's etcd-server 3.4.23) for the fleet's end-to-end tests.

- Etcd is one member on free 127.0.0.1 client and peer ports (harness.free_port),
  with its own data dir and log file under the test's TempDir; EtcdCluster is
  three (or n) members joined by a static --initial-cluster.
- The processes run in process groups of their own and are registered with
  harness's atexit hook, so a failed or crashed test leaves no etcd behind.
- The key helpers (put, get, delete, keys, revision, compact, txn_put) speak
  etcd's v3 JSON gateway with urllib: one HTTP request per call and no
  etcdctl process. On 3.4.23 keys and values are base64 and every int64 is a
  JSON string; the helpers take and return str and int.
- tls=True (or a dict from etcd_certs()) serves the client URLs over HTTPS
  with --client-cert-auth: the CA, server and client certificates are made
  with the openssl CLI. auth=True creates user root with a password and runs
  `auth enable`; the helpers then authenticate and re-authenticate when a
  restart has made their token invalid. Found on 3.4.23 with both on: the
  JSON gateway answers 400 to a client certificate that has a CN (so
  etcd_certs' client certificate has none), and a request without a token
  runs as the CN of the server's certificate (the gateway dials its own
  member with it), here "etcd-server", a user with no rights.
- ctl(*args) runs etcdctl (ETCDCTL_API=3) with the same endpoints, certs and
  user, for what the helpers do not cover.
If the etcd binary is missing (SY_ETCD or etcd on PATH), constructing one
fails with a message naming the packages. Every wait is bounded by
harness.TIMEOUT.
"""
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import harness
from harness import TIMEOUT, free_port, wait_for

ETCD_BIN = os.environ.get("SY_ETCD") or shutil.which("etcd")
ETCDCTL_BIN = os.environ.get("SY_ETCDCTL") or shutil.which("etcdctl")

# etcd's gRPC status codes that the JSON gateway passes on in "code"
CODE_UNAVAILABLE = 14  # no leader, leader changed, request timed out
CODE_UNAUTHENTICATED = 16  # invalid auth token (e.g. the server restarted)

CERTS = r"""
set -e; cd "$1"; Q='-nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256'
openssl req -x509 $Q -keyout etcd-ca.key -out etcd-ca.pem -subj /CN=etcd-ca -days 30 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign 2>/dev/null
leaf() { n=$1; subj=$2; ext=$3
  openssl req -new $Q -keyout $n.key -out $n.csr -subj "$subj" 2>/dev/null
  printf '%s\nbasicConstraints=CA:FALSE\n' "$ext" > $n.ext
  openssl x509 -req -in $n.csr -CA etcd-ca.pem -CAkey etcd-ca.key -CAcreateserial -days 30 \
    -extfile $n.ext -out $n.pem 2>/dev/null; }
# the server's certificate is a client one too: 3.4's JSON gateway dials
# the member's own gRPC port with it when --client-cert-auth is on
leaf etcd-server /CN=etcd-server 'subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth'
# no CN: with auth on, 3.4.23's JSON gateway answers 400 "CommonName of
# client sending a request against gateway will be ignored" to a client
# certificate that has one
leaf etcd-client /O=switchyard 'extendedKeyUsage=clientAuth'
leaf etcd-client-cn /CN=etcd-client 'extendedKeyUsage=clientAuth'
"""


def _require_etcd():
    if not ETCD_BIN or not os.access(ETCD_BIN, os.X_OK):
        raise AssertionError("etcd not found (SY_ETCD or etcd on PATH): the fleet tests need a "
                             "real etcd; install Debian's etcd-server and etcd-client "
                             "(.ci/setup does)")


def etcd_certs(tmp):
    """Makes a CA, a server certificate for 127.0.0.1/localhost and client
    certificates in <tmp> with the openssl CLI; returns the paths as {"ca",
    "server_cert", "server_key", "client_cert", "client_key", "client_cn_cert",
    "client_cn_key"}. client_cert has no CN (what the JSON gateway needs
    when auth is on too), client_cn_cert has CN=etcd-client."""
    subprocess.run(["sh", "-c", CERTS, "sh", tmp.path], check=True, capture_output=True,
                   timeout=60)
    return {"ca": tmp.file("etcd-ca.pem"),
            "server_cert": tmp.file("etcd-server.pem"), "server_key": tmp.file("etcd-server.key"),
            "client_cert": tmp.file("etcd-client.pem"), "client_key": tmp.file("etcd-client.key"),
            "client_cn_cert": tmp.file("etcd-client-cn.pem"),
            "client_cn_key": tmp.file("etcd-client-cn.key")}


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def unb64(s):
    return base64.b64decode(s).decode()


def prefix_end(prefix):
    """The range_end that makes a range read of every key under <prefix>."""
    b = bytearray(prefix.encode())
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return b"\0"
    b[-1] += 1
    return bytes(b)


class EtcdError(Exception):
    """etcd's answer to a JSON gateway call that failed: <code> is the gRPC
    status code, <message> etcd's text."""

    def __init__(self, path, status, code, message):
        super().__init__("%s: HTTP %s, code %s: %s" % (path, status, code, message))
        self.status, self.code, self.message = status, code, message


class _KV:
    """The key helpers, over self._post(path, body) -> the decoded answer."""

    def put(self, key, value):
        """Sets <key> to <value>; returns the revision of the put."""
        r = self._post("/v3/kv/put", {"key": b64(key), "value": b64(value)})
        return int(r["header"]["revision"])

    def get(self, key):
        """(value, mod_revision) of <key>, or None when it does not exist."""
        kvs = self._post("/v3/kv/range", {"key": b64(key)}).get("kvs") or []
        if not kvs:
            return None
        return unb64(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])

    def delete(self, key, prefix=False):
        """Deletes <key> (every key under it with <prefix>); returns how many."""
        body = {"key": b64(key)}
        if prefix:
            body["range_end"] = b64(prefix_end(key))
        return int(self._post("/v3/kv/deleterange", body).get("deleted", "0"))

    def keys(self, prefix=""):
        """{key: value} of every key under <prefix> ("": all of them)."""
        r = self._post("/v3/kv/range", {"key": b64(prefix or "\0"),
                                        "range_end": b64(prefix_end(prefix))})
        return {unb64(kv["key"]): unb64(kv.get("value", "")) for kv in r.get("kvs") or []}

    def revision(self):
        """The store's current revision."""
        r = self._post("/v3/kv/range", {"key": b64("\0"), "count_only": True})
        return int(r["header"]["revision"])

    def compact(self, rev=None):
        """Compacts up to <rev> (the current revision by default), physically:
        it returns once the old revisions are gone. Returns the revision."""
        rev = rev if rev is not None else self.revision()
        self._post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def txn_put(self, puts, deletes=()):
        """Puts every key of dict <puts> and deletes every key of <deletes> in
        one transaction: one revision, returned."""
        ops = [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in puts.items()]
        ops += [{"request_delete_range": {"key": b64(k)}} for k in deletes]
        r = self._post("/v3/kv/txn", {"success": ops})
        if not r.get("succeeded"):
            raise EtcdError("/v3/kv/txn", 200, None, "transaction not applied: %r" % r)
        return int(r["header"]["revision"])

    def status(self):
        """/v3/maintenance/status of the member answering (ints as etcd sends:
        strings)."""
        return self._post("/v3/maintenance/status", {})


class Etcd(_KV):
    """One etcd member (alone, or one of an EtcdCluster's)."""

    def __init__(self, tmp, name="etcd", progress_ms=None, tls=False, auth=False):
        """<progress_ms>: --experimental-watch-progress-notify-interval.
        <tls>: True or a dict of etcd_certs(): HTTPS client URLs with
        --client-cert-auth. <auth>: user root with self.password (also in
        self.password_file), `auth enable`d once the member first answers."""
        _require_etcd()
        self.tmp, self.name, self.progress_ms = tmp, name, progress_ms
        self.client_port, self.peer_port = free_port(), free_port()
        self.data_dir = tmp.file(name + ".data")
        self.log_path = tmp.file(name + ".log")
        self.certs = (etcd_certs(tmp) if tls is True else tls) or None
        self.auth = auth
        self.user, self.password = "root", "sy-root-pw"  # one for a whole cluster
        self.password_file = tmp.file(name + ".password")
        with open(self.password_file, "w") as f:
            f.write(self.password + "\n")
        self.auth_ready = False  # `auth enable` done (it persists in the data dir)
        self.initial_cluster = "%s=%s" % (name, self.peer_url)
        self.proc = None
        self._token = None
        self._ssl = None

    # -- addresses

    @property
    def endpoint(self):
        return "%s://127.0.0.1:%d" % ("https" if self.certs else "http", self.client_port)

    @property
    def peer_url(self):
        return "http://127.0.0.1:%d" % self.peer_port

    def ssl_context(self):
        """The client side of TLS mode: trusts the CA, shows the client cert."""
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=self.certs["ca"])
            self._ssl.load_cert_chain(self.certs["client_cert"], self.certs["client_key"])
        return self._ssl

    # -- the process

    def args(self):
        a = [ETCD_BIN, "--name", self.name, "--data-dir", self.data_dir, "--logger", "zap",
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", "sy-" + os.path.basename(self.tmp.path)]
        if self.progress_ms is not None:
            a += ["--experimental-watch-progress-notify-interval", "%dms" % self.progress_ms]
        if self.certs:
            a += ["--cert-file", self.certs["server_cert"], "--key-file", self.certs["server_key"],
                  "--trusted-ca-file", self.certs["ca"], "--client-cert-auth"]
        return a

    def start(self, wait=True):
        """Starts the member (again: the same data dir and ports); with <wait>
        returns once it answers /health (and auth mode is set up)."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        harness._live.append(self.proc)
        self._token = None
        if wait:
            self.wait_healthy()
            if self.auth and not self.auth_ready:
                self.enable_auth()
        return self

    def wait_healthy(self, timeout=TIMEOUT):
        def healthy():
            if self.proc.poll() is not None:
                raise AssertionError("etcd %s exited with %s:\n%s" % (
                    self.name, self.proc.returncode, self.log()[-5000:]))
            try:
                with urllib.request.urlopen(self.endpoint + "/health", timeout=2,
                                            context=self._ctx()) as r:
                    return json.loads(r.read()).get("health") == "true"
            except (OSError, ValueError):
                return False

        wait_for(healthy, timeout=timeout, interval=0.05, what="etcd %s healthy" % self.name)

    def enable_auth(self):
        """User root (role root) with self.password, then `auth enable`."""
        self._post("/v3/auth/role/add", {"name": "root"})
        self._post("/v3/auth/user/add", {"name": self.user, "password": self.password})
        self._post("/v3/auth/user/grant", {"user": self.user, "role": "root"})
        self._post("/v3/auth/enable", {})
        self.auth_ready = True

    def log(self):
        """The member's log, every start's ("" before the first)."""
        if not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        harness._killpg(self.proc, sig)

    def stop(self, sig=signal.SIGTERM):
        """Sends <sig> (SIGKILL after TIMEOUT) and reaps; returns the status."""
        if not self.proc:
            return None
        self.send_signal(sig)
        self.send_signal(signal.SIGCONT)  # a frozen member handles its SIGTERM
        try:
            rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.send_signal(signal.SIGKILL)
            rc = self.proc.wait(TIMEOUT)
        if self.proc in harness._live:
            harness._live.remove(self.proc)
        return rc

    def kill(self):
        return self.stop(signal.SIGKILL)

    def restart(self, wait=True):
        self.stop()
        return self.start(wait)

    def freeze(self):
        """SIGSTOP, then waits until every thread is stopped: kill() returns
        while a thread on another CPU may still answer a request."""
        self.send_signal(signal.SIGSTOP)
        wait_for(lambda: self._thread_states() <= {"T", "t"}, what="etcd %s stopped" % self.name)

    def thaw(self):
        self.send_signal(signal.SIGCONT)

    def _thread_states(self):
        """The set of /proc states (R, S, T...) of the process's threads."""
        states = set()
        task = "/proc/%d/task" % self.proc.pid
        for tid in os.listdir(task):
            try:
                with open("%s/%s/stat" % (task, tid)) as f:
                    states.add(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:  # a thread that ended
                pass
        return states

    # -- requests

    def _ctx(self):
        return self.ssl_context() if self.certs else None

    def _request(self, path, body, timeout=TIMEOUT, token=None):
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        if token:
            req.add_header("Authorization", token)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ctx()) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                err = json.loads(text)
            except ValueError:
                err = {"message": text}
            raise EtcdError(path, e.code, err.get("code"), err.get("message")) from None

    def _authenticate(self, timeout):
        r = self._request("/v3/auth/authenticate",
                          {"name": self.user, "password": self.password}, timeout)
        self._token = r["token"]

    def _post(self, path, body, timeout=TIMEOUT):
        """One JSON gateway call; in auth mode with a token, fetched again
        once when etcd says it is invalid (tokens do not survive a restart)."""
        if not (self.auth and self.auth_ready):
            return self._request(path, body, timeout)
        if not self._token:
            self._authenticate(timeout)
        try:
            return self._request(path, body, timeout, self._token)
        except EtcdError as e:
            if e.code != CODE_UNAUTHENTICATED:
                raise
        self._authenticate(timeout)
        return self._request(path, body, timeout, self._token)

    def ctl_args(self, endpoints=None):
        """etcdctl's flags for this member (or <endpoints>): certs, user."""
        a = ["--endpoints", ",".join(endpoints or [self.endpoint]), "--dial-timeout", "5s"]
        if self.certs:
            a += ["--cacert", self.certs["ca"], "--cert", self.certs["client_cert"],
                  "--key", self.certs["client_key"]]
        if self.auth and self.auth_ready:
            a += ["--user", "%s:%s" % (self.user, self.password)]
        return a

    def ctl(self, *args, endpoints=None, check=True):
        """Runs `etcdctl <args>` (ETCDCTL_API=3) against this member; returns
        its stdout. <check>: a failure raises with etcdctl's stderr."""
        if not ETCDCTL_BIN:
            raise AssertionError("etcdctl not found: install Debian's etcd-client")
        env = dict(os.environ, ETCDCTL_API="3")
        p = subprocess.run([ETCDCTL_BIN] + self.ctl_args(endpoints) + list(args), env=env,
                           capture_output=True, text=True, timeout=TIMEOUT)
        if check and p.returncode != 0:
            raise AssertionError("etcdctl %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                               p.stderr))
        return p.stdout


class EtcdCluster(_KV):
    """<n> members (etcd-0, etcd-1, ...) with a static --initial-cluster. The
    key helpers go to the first live member that answers and retry, for up
    to TIMEOUT, while a leader is being elected (code 14 or no connection):
    a retried put may then apply twice (the same value, a later revision)."""

    def __init__(self, tmp, n=3, **member_kw):
        """<member_kw>: Etcd's progress_ms, tls, auth (the same for all)."""
        kw = dict(member_kw)
        if kw.get("tls") is True:
            kw["tls"] = etcd_certs(tmp)  # one CA for the whole cluster
        self.members = [Etcd(tmp, "etcd-%d" % i, **kw) for i in range(n)]
        initial = ",".join("%s=%s" % (m.name, m.peer_url) for m in self.members)
        for m in self.members:
            m.initial_cluster = initial

    @property
    def endpoints(self):
        return [m.endpoint for m in self.members]

    def start(self):
        """Starts every member at once (each waits for the others to elect a
        leader), then waits until all answer /health."""
        for m in self.members:
            m.start(wait=False)
        for m in self.members:
            m.wait_healthy()
        if self.members[0].auth:
            self.members[0].enable_auth()
            for m in self.members:
                m.auth_ready = True
        return self

    def stop(self):
        for m in self.members:
            m.stop()

    def kill_member(self, i):
        return self.members[i].kill()

    def restart_member(self, i):
        """Starts member <i> again on its data dir; returns once it answers
        /health (it has rejoined: it knows the leader)."""
        m = self.members[i]
        if m.alive():
            m.stop()
        m.start(wait=False)
        m.wait_healthy()
        return m

    def leader(self):
        """The index of the member that is the leader, as a live member sees
        it; waited for while there is none."""
        def find():
            ids, leader = {}, None
            for i, m in enumerate(self.members):
                if not m.alive():
                    continue
                try:
                    st = m._post("/v3/maintenance/status", {}, timeout=2)
                except (OSError, EtcdError):
                    continue
                ids[st["header"]["member_id"]] = i
                leader = st.get("leader") if st.get("leader", "0") != "0" else leader
            # a tuple: member 0 is a true answer to wait_for
            return (ids[leader],) if leader in ids else None

        return wait_for(find, interval=0.1, what="an etcd leader")[0]

    def _post(self, path, body, timeout=5):
        deadline = time.monotonic() + TIMEOUT
        last = None
        while True:
            for m in self.members:
                if not m.alive():
                    continue
                try:
                    return m._post(path, body, timeout)
                except EtcdError as e:
                    if e.code != CODE_UNAVAILABLE:
                        raise
                    last = e
                except OSError as e:  # refused, reset, timed out: the next one
                    last = e
            if time.monotonic() > deadline:
                raise AssertionError("no etcd member answered %s: %s" % (path, last))
            time.sleep(0.1)
