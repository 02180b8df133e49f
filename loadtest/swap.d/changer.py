#!/usr/bin/env python3
"""changer.py - push config changes at a steady rate, for loadtest/swap.

  changer.py MODE --duration S [--rate 10] [--out FILE] [mode options]

One change every 1/rate s on an absolute schedule (a change that runs late
delays the next one; more than one interval behind, the schedule restarts
from now and the skipped ticks are counted as "late"), for --duration s.

Modes:
  idle
      wake on the same schedule and build an admin-put request body, but send
      nothing: what the changer costs the client CPU, which it shares with
      wrk, without any change. The baseline and control runs use it, so that
      a change scenario differs from them by the changes alone.
  admin-put   --admin-port P [--swap-path /__swap]
      PUT /routes/swap over ONE keep-alive connection (http.client),
      alternating the direct-response body "b\\n" and "a\\n" of route
      "swap" (variants.py puts it in the config). ok = 2xx answers.
  admin-postdelete   --admin-port P
      alternately POST /routes a route "swap2" (GET /__swap2, a direct
      response) and DELETE /routes/swap2, same connection. ok = 201/200.
  admin-cert  --admin-port P --cert-a PEM --key-a KEY --cert-b PEM --key-b KEY
      PUT /config over ONE keep-alive connection: the live config (GET
      /config once, at the start) with the certificates of its TLS listener
      replaced by certificate b, then a, alternately, inline (cert_pem and
      key_pem, as a push that carries the certificate itself). ok = 2xx.
  signal      --pid PID --live LINK --a FILE --b FILE [--signal HUP]
      point the symlink LINK at the other of FILE a / FILE b (a new symlink
      renamed over LINK: atomic), then kill(PID, SIGHUP). For switchyard
      (-c LINK) and the nginx master (-c LINK). ok = signals delivered.
  command     --live LINK --a FILE --b FILE -- COMMAND...
      the same symlink swap, then run COMMAND (e.g. `nginx -s reload ...`);
      ok = exit status 0 within 5 s.
  haproxy-cli --master-sock PATH --live LINK --a FILE --b FILE
      the same symlink swap, then `reload` on HAProxy's master CLI (a unix
      socket; what `echo reload | socat` does). ok = command sent. The
      master refuses CLI connections while it re-executes itself; those
      connects are retried for up to 90 % of the interval (busy_retries),
      then the change counts as failed.

Prints one JSON object: attempted, ok, failed, late, errors (first few),
and for the admin modes the call latency (p50, p99, max, in ms).
Standard library only.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time


def pct(vals, p):
    if not vals:
        return None
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class Admin:
    """A keep-alive admin client that reconnects after an error."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def call(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            text = r.read()
            if r.will_close:
                self.conn.close()
                self.conn = None
            return r.status, text
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise


def swap_link(live, target):
    tmp = f"{live}.tmp{os.getpid()}"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(os.path.abspath(target), tmp)
    os.replace(tmp, live)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["idle", "admin-put", "admin-postdelete", "admin-cert", "signal", "command",
                                     "haproxy-cli"])
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--admin-port", type=int)
    ap.add_argument("--swap-path", default="/__swap")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--signal", default="HUP")
    ap.add_argument("--master-sock")
    ap.add_argument("--live")
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--out")
    for k in ("cert-a", "key-a", "cert-b", "key-b"):
        ap.add_argument("--" + k)
    argv = sys.argv[1:]
    command = []
    if "--" in argv:
        k = argv.index("--")
        argv, command = argv[:k], argv[k + 1:]
    a = ap.parse_args(argv)
    a.command = command
    if a.mode == "command" and not a.command:
        sys.exit("changer.py: mode command needs a command after --")

    interval = 1.0 / a.rate
    res = {"mode": a.mode, "attempted": 0, "ok": 0, "failed": 0, "late": 0, "errors": []}
    lat = []
    admin = Admin(a.admin_port) if a.mode.startswith("admin") else None
    sig = getattr(signal, "SIG" + a.signal) if a.mode == "signal" else None

    # Which state is live now decides the first change.
    flip = 0
    if a.mode in ("signal", "command", "haproxy-cli"):
        flip = 1 if os.path.realpath(a.live) == os.path.realpath(a.a) else 0
    elif a.mode == "admin-put":
        st, body = admin.call("GET", "/routes/swap")
        if st != 200:
            sys.exit(f"changer.py: GET /routes/swap answered {st}: {body[:200]!r}")
        cur = json.loads(body)
        cur = cur.get("route", cur)
        flip = 1 if cur.get("response", {}).get("body") == "a\n" else 0
    elif a.mode == "admin-postdelete":
        st, _ = admin.call("GET", "/routes/swap2")
        flip = 1 if st == 200 else 0  # 1: it exists, delete first
    elif a.mode == "admin-cert":
        st, body = admin.call("GET", "/config")
        if st != 200:
            sys.exit(f"changer.py: GET /config answered {st}: {body[:200]!r}")
        doc = json.loads(body)
        doc = doc.get("config", doc)
        tls = [lst["tls"] for lst in doc.get("listeners", []) if "tls" in lst]
        if len(tls) != 1:
            sys.exit("changer.py: admin-cert needs exactly one TLS listener in the live config")
        pems = [[{"cert_pem": open(c).read(), "key_pem": open(k).read()}]
                for c, k in ((a.cert_a, a.key_a), (a.cert_b, a.key_b))]
        flip = 1  # the listener starts with certificate a

    def change():
        nonlocal flip
        if a.mode == "idle":
            json.dumps({"methods": ["GET"], "path": a.swap_path,
                        "response": {"status": 200, "body": "b\n" if flip else "a\n"}})
            return
        if a.mode == "admin-put":
            body = {"methods": ["GET"], "path": a.swap_path,
                    "response": {"status": 200, "body": "b\n" if flip else "a\n"}}
            t = time.monotonic()
            st, text = admin.call("PUT", "/routes/swap", body)
            lat.append((time.monotonic() - t) * 1000)
            ok = 200 <= st < 300
        elif a.mode == "admin-postdelete":
            t = time.monotonic()
            if flip:
                st, text = admin.call("DELETE", "/routes/swap2")
            else:
                st, text = admin.call("POST", "/routes", {
                    "id": "swap2", "methods": ["GET"], "path": "/__swap2",
                    "response": {"status": 200, "body": "swap2\n"}})
            lat.append((time.monotonic() - t) * 1000)
            ok = 200 <= st < 300
        elif a.mode == "admin-cert":
            tls[0]["certificates"] = pems[flip]
            t = time.monotonic()
            st, text = admin.call("PUT", "/config", doc)
            lat.append((time.monotonic() - t) * 1000)
            ok = 200 <= st < 300
        elif a.mode == "signal":
            swap_link(a.live, a.b if flip else a.a)
            os.kill(a.pid, sig)
            st, text, ok = 0, b"", True
        elif a.mode == "command":
            swap_link(a.live, a.b if flip else a.a)
            p = subprocess.run(a.command, capture_output=True, timeout=5, check=False)
            st, text, ok = p.returncode, p.stderr, p.returncode == 0
        else:
            swap_link(a.live, a.b if flip else a.a)
            # While the master re-executes itself (a reload in progress) its
            # CLI socket refuses connections: retry every 5 ms, for at most
            # 90 % of the interval; still refused, the change failed.
            give_up = time.monotonic() + 0.9 * interval
            while True:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(2)
                try:
                    s.connect(a.master_sock)
                    break
                except (ConnectionRefusedError, FileNotFoundError):
                    s.close()
                    if time.monotonic() >= give_up:
                        raise RuntimeError("master CLI refused: a reload still in progress")
                    res["busy_retries"] = res.get("busy_retries", 0) + 1
                    time.sleep(0.005)
            try:
                s.sendall(b"reload\n")
                # The master re-executes itself and drops the connection; its
                # answer (if any) is not waited for beyond a short while.
                s.settimeout(interval / 2)
                try:
                    s.recv(4096)
                except OSError:
                    pass
            finally:
                s.close()
            st, text, ok = 0, b"", True
        if ok:
            flip ^= 1
        else:
            raise RuntimeError(f"status {st}: {text[:160]!r}")

    start = time.monotonic()
    deadline = start + a.duration
    nxt = start
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if nxt > now:
            time.sleep(min(nxt, deadline) - now)
            if time.monotonic() >= deadline:
                break
        if a.mode == "idle":  # not a change: counted apart
            change()
            res["wakeups"] = res.get("wakeups", 0) + 1
        else:
            res["attempted"] += 1
            try:
                change()
                res["ok"] += 1
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                res["failed"] += 1
                if len(res["errors"]) < 5:
                    res["errors"].append(
                        f"{time.monotonic() - start:.3f}s: {type(e).__name__}: {e}")
        nxt += interval
        now = time.monotonic()
        if now - nxt > interval:
            res["late"] += int((now - nxt) / interval)
            nxt = now
    res["elapsed_s"] = round(time.monotonic() - start, 3)
    if lat:
        res["lat_ms"] = {"p50": round(pct(lat, 50), 2), "p99": round(pct(lat, 99), 2),
                         "max": round(max(lat), 2)}
    text = json.dumps(res)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
