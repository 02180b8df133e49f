"""adminlib.py - helpers of the admin API's end-to-end tests (stdlib only).

Builds on ../harness.py (processes, free ports, the raw-socket Client,
sanitizer checks) and adds what the admin tests need on top:

- Admin: a small HTTP/1.1 client for the admin API over http.client, one
  keep-alive connection (re-opened when the server closes it), optional
  bearer token; every call returns an AdminResponse with status, headers,
  raw body and the parsed JSON (None when the body is not JSON).
- AdminCase: a GatewayCase with helpers to start a gateway and get an Admin
  client for it.
- local_route(): a route answering directly with a body that names it, so a
  data-plane request says which route answered without any backend.
- parse_prometheus(): a strict parser of the Prometheus text format.
"""
import http.client
import json
import os
import re
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402

# hermetic: a token in the caller's environment would change every test
os.environ.pop("SWITCHYARD_ADMIN_TOKEN", None)
# re-exported for the tests
from harness import (SY_BIN, TIMEOUT, Client, Closed, Gateway, GatewayCase,  # noqa: E402,F401
                     TempDir, gateway_config, get, main, upstream_cfg, wait_for)


def admin_port(cfg):
    return int(cfg["admin"]["address"].rsplit(":", 1)[1])


class AdminResponse:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # [(name, value)]
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def header(self, name):
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    @property
    def etag(self):
        return self.header("ETag")

    def __repr__(self):
        return "<AdminResponse %s %r>" % (self.status, self.body[:500])


class Admin:
    """Admin API client: one keep-alive connection to 127.0.0.1:<port>."""

    def __init__(self, port, token=None, timeout=TIMEOUT):
        self.port, self.token, self.timeout = port, token, timeout
        self.conn = None

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, headers=None, token=True, raw=False):
        """<body>: a dict/list (sent as JSON), bytes/str (sent as is) or None.
        <token>: True = the client's token, None/False = none, a string = that."""
        hs = {}
        if token is True:
            token = self.token
        if token:
            hs["Authorization"] = "Bearer %s" % token
        if headers:
            hs.update(headers)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        if body is not None:
            hs.setdefault("Content-Type", "application/json")
        for attempt in range(2):
            reused = self.conn is not None
            if not reused:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                       timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=hs)
                r = self.conn.getresponse()
                data = r.read()
                resp = AdminResponse(r.status, r.getheaders(), data)
                if r.will_close:
                    self.close()
                return resp
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest):
                # the server closed an idle keep-alive connection before
                # reading the request: retry once on a fresh one
                self.close()
                if attempt or not reused:
                    raise

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def config(self):
        """(config dict, ETag, raw bytes) of GET /config; asserts 200."""
        r = self.get("/config")
        assert r.status == 200, r
        return r.json, r.etag, r.body

    def generation(self):
        r = self.get("/status")
        assert r.status == 200, r
        return r.json["generation"]


def local_route(rid, path, methods=None, host=None, status=200):
    """A route answering directly with body "route=<id>\\n"."""
    r = {"id": rid, "path": path,
         "response": {"status": status, "body": "route=%s\n" % rid}}
    if methods:
        r["methods"] = methods
    if host:
        r["host"] = host
    return r


def answered_by(resp):
    """The route id a local_route() answer names, or None."""
    m = re.match(rb"^route=([A-Za-z0-9_.:-]+)\n$", resp.body or b"")
    return m.group(1).decode() if m else None


ETAG_RE = re.compile(r'^"(\d+)-([0-9a-f]{16})"$')


def etag_gen(etag):
    m = ETAG_RE.match(etag or "")
    assert m, "bad ETag %r" % etag
    return int(m.group(1))


# ---------------------------------------------------------------------------
# Prometheus text format (version 0.0.4)

_METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
_SAMPLE_RE = re.compile(r"^(%s)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$" % _METRIC_NAME)
_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def _parse_value(s):
    if s in ("+Inf", "Inf"):
        return float("inf")
    if s == "-Inf":
        return float("-inf")
    if s == "NaN":
        return float("nan")
    return float(s)


def parse_prometheus(text):
    """Parses exposition text strictly. Returns (types, samples): types maps a
    metric family name to its TYPE; samples is a list of (name, labels dict,
    value). Raises AssertionError on any malformed line, a TYPE given twice
    or after the family's samples, or a duplicate sample."""
    types, helps, samples, seen = {}, {}, [], set()
    assert text.endswith("\n"), "exposition must end with a newline"
    for ln in text.split("\n")[:-1]:
        if ln == "":
            continue
        if ln.startswith("#"):
            parts = ln.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                assert re.match("^%s$" % _METRIC_NAME, parts[2]), "bad name in %r" % ln
                if parts[1] == "TYPE":
                    assert len(parts) == 4 and parts[3] in _TYPES, "bad TYPE line %r" % ln
                    assert parts[2] not in types, "TYPE twice for %s" % parts[2]
                    assert not any(s[0] == parts[2] or s[0].startswith(parts[2] + "_")
                                   and s[0][len(parts[2]) + 1:] in ("bucket", "sum", "count")
                                   for s in samples), "TYPE after samples: %r" % ln
                    types[parts[2]] = parts[3]
                else:
                    assert parts[2] not in helps, "HELP twice for %s" % parts[2]
                    helps[parts[2]] = parts[3] if len(parts) == 4 else ""
            continue
        m = _SAMPLE_RE.match(ln)
        assert m, "bad sample line %r" % ln
        name, lbl, val = m.group(1), m.group(2), m.group(3)
        labels = {}
        if lbl:
            rest = lbl
            while rest:
                lm = re.match(_LABEL + r"(,|$)", rest)
                assert lm, "bad labels in %r" % ln
                assert lm.group(1) not in labels, "label twice in %r" % ln
                labels[lm.group(1)] = lm.group(2)
                rest = rest[lm.end():]
        try:
            v = _parse_value(val)
        except ValueError:
            raise AssertionError("bad value in %r" % ln)
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, "duplicate sample %r" % ln
        seen.add(key)
        samples.append((name, labels, v))
    return types, samples


def metric(samples, name, **labels):
    """The value of the sample <name> with exactly these labels (None if absent)."""
    for n, l, v in samples:
        if n == name and l == labels:
            return v
    return None


def metric_sum(samples, name, **labels):
    """The sum of every sample <name> whose labels include <labels>."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == x for k, x in labels.items()))


STARTED_RE = re.compile(r"switchyard \S+: \d+ workers?")


def wait_ready(gw, since=0):
    """Waits until <gw> (just started) logged its start-up line after byte
    <since> of its log and its admin API accepts connections: the harness's
    Gateway.start() only waits for the data-plane listener, which is bound
    before the admin API."""
    host, port = gw.cfg["admin"]["address"].rsplit(":", 1)
    port = int(port)

    def up():
        if gw.proc.poll() is not None:
            raise AssertionError("switchyard exited with %s:\n%s" % (gw.proc.returncode,
                                                                     gw.log()[-5000:]))
        return STARTED_RE.search(gw.log()[since:]) and port_is_bound(port, host)

    wait_for(up, what="switchyard start-up (admin API on port %d)" % port)


def start_gateway(gw):
    """(Re)starts <gw> and waits until it is ready; returns the log offset
    where this run's lines begin."""
    since = gw.log_size()
    gw.start()
    wait_ready(gw, since)
    return since


class AdminCase(GatewayCase):
    """GatewayCase plus admin helpers."""

    def own_gateway(self, cfg, name="gw", check=True, **kw):
        g = super().own_gateway(cfg, name=name, check=check, **kw)
        wait_ready(g)
        return g

    def admin_for(self, gw, token=None):
        a = Admin(admin_port(gw.cfg), token=token)
        self.addCleanup(a.close)
        return a

    @classmethod
    def shared_admin(cls, gw, token=None):
        a = Admin(admin_port(gw.cfg), token=token)
        cls.addClassCleanup(a.close)
        return a

    def assertStatus(self, resp, status, msg=None):
        self.assertEqual(resp.status, status, msg or resp)

    def assertWrite(self, resp, status, prev_gen=None):
        """A write's answer: <status>, a JSON body with the new generation
        and ETag, the ETag header equal to the body's; returns the ETag."""
        self.assertEqual(resp.status, status, resp)
        self.assertIsNotNone(resp.json, resp)
        et = resp.etag
        self.assertRegex(et or "", ETAG_RE, resp)
        self.assertEqual(resp.json.get("etag"), et, resp)
        self.assertEqual(resp.json.get("generation"), etag_gen(et), resp)
        if prev_gen is not None:
            self.assertGreater(resp.json["generation"], prev_gen, resp)
        return et


def data_get(port, path, host="localhost", method="GET"):
    """One data-plane request on a fresh connection; returns the harness Response."""
    return get(port, path, host=host, method=method)


def free_port():
    return harness.free_port()


def port_is_bound(port, addr="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(1)
        s.connect((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()
