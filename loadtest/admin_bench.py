#!/usr/bin/env python3
"""How fast a config change goes live through the admin API.

For route tables of 1k, 10k and 100k routes (copies of the GitHub API's 203
route shapes under distinct prefixes), measures:
  - PUT /config of the whole table (validated, built, persisted, live),
  - POST /routes of one new route, and DELETE /routes/{id} of it,
each acknowledged only after the change is persisted (state_dir set) and the
new snapshot published. Medians over repeated runs; a control row repeats the
POST measurement under another name to show the noise.

    loadtest/admin_bench.py [--bin build/gateway/switchyard] [--sizes 1000,10000,100000]
                            [--repeat 50] [--no-persist] [--heap-reserve-mb N]

Markdown on stdout. Only 127.0.0.1 is used.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HEAP_RESERVE_MB = None  # --heap-reserve-mb: admin.heap_reserve_mb (unset: the default)
ROUTES = os.path.join(HERE, "..", "tests", "data", "routes")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def github_routes():
    out = []
    with open(os.path.join(ROUTES, "github.txt")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                m, p = line.split(None, 1)
                out.append((m, p))
    return out


def table(n, gh):
    routes = []
    k = 0
    while len(routes) < n:
        for m, p in gh:
            if len(routes) == n:
                break
            routes.append({"id": "r%d" % len(routes), "methods": [m],
                           "path": "/v%d%s" % (k, p), "upstream": "bench"})
        k += 1
    return routes


def config(port, admin, state, routes):
    adm = {"address": "127.0.0.1:%d" % admin}
    if HEAP_RESERVE_MB is not None:
        adm["heap_reserve_mb"] = HEAP_RESERVE_MB
    if state:
        adm["state_dir"] = state
    return {"workers": 1,
            "listeners": [{"address": "127.0.0.1:%d" % port}],
            "upstreams": {"bench": {"servers": [{"address": "127.0.0.1:9"}]}},
            "routes": routes,
            "access_log": "off",
            "admin": adm}


class Admin:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        t0 = time.perf_counter()
        self.c.request(method, path, body=data,
                       headers={"Content-Type": "application/json"} if data else {})
        r = self.c.getresponse()
        out = r.read()
        dt = time.perf_counter() - t0
        return r.status, out, dt


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def med(xs):
    return statistics.median(xs) * 1e3


def p90(xs):
    xs = sorted(xs)
    return xs[int(0.9 * (len(xs) - 1))] * 1e3


def run_size(binary, n, repeat, gh, persist):
    tmp = tempfile.mkdtemp(prefix="sy-admin-bench-")
    port, admin = free_port(), free_port()
    state = os.path.join(tmp, "state") if persist else None
    base = config(port, admin, state, [])
    path = os.path.join(tmp, "base.json")
    with open(path, "w") as f:
        json.dump(base, f)
    proc = subprocess.Popen([binary, "-c", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    rows = {}
    try:
        wait_port(admin)
        a = Admin(admin)
        full = config(port, admin, state, table(n, gh))
        alt = config(port, admin, state, table(n, gh)[:-1])
        puts = []
        for i in range(8):
            st, out, dt = a.call("PUT", "/config", alt if i % 2 else full)
            if st != 200:
                raise RuntimeError("PUT /config: %d %s" % (st, out[:300]))
            puts.append(dt)
        st, out, dt = a.call("PUT", "/config", full)
        rows["put_config"] = puts
        for name in ("post", "post (control)"):
            posts, dels = [], []
            for i in range(repeat):
                rid = "bench-%d" % i
                route = {"id": rid, "methods": ["GET"], "path": "/bench/%d/{x}" % i,
                         "upstream": "bench"}
                st, out, dt = a.call("POST", "/routes", route)
                if st != 201:
                    raise RuntimeError("POST /routes: %d %s" % (st, out[:300]))
                posts.append(dt)
                st, out, dt = a.call("DELETE", "/routes/" + rid)
                if st != 200:
                    raise RuntimeError("DELETE: %d %s" % (st, out[:300]))
                dels.append(dt)
            rows[name] = posts
            if name == "post":
                rows["delete"] = dels
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "gateway", "switchyard"))
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--no-persist", action="store_true", help="no state_dir: no fsync in the path")
    ap.add_argument("--heap-reserve-mb", type=int, default=None,
                    help="admin.heap_reserve_mb for the gateway (default: its own default)")
    args = ap.parse_args()
    global HEAP_RESERVE_MB
    HEAP_RESERVE_MB = args.heap_reserve_mb
    gh = github_routes()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("Admin API change latency (client round trip, %s), median and p90 in ms;"
          % ("live, not persisted" if args.no_persist else "persisted + live"))
    print("`post (control)` repeats `post`: its gap is the noise.\n")
    print("PUT /config: the first push after start, the second, and the median of the next "
          "six. admin.heap_reserve_mb: %s (the heap the admin thread touches at start; "
          "without it the first pushes fault in every page they use).\n"
          % ("default (48)" if HEAP_RESERVE_MB is None else HEAP_RESERVE_MB))
    print("| routes | PUT /config first | second | median of next 6 | POST /routes median | p90 "
          "| POST (control) median | DELETE /routes/{id} median | p90 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = run_size(os.path.abspath(args.bin), n, args.repeat, gh, not args.no_persist)
        pc = r["put_config"]
        print("| %d | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f |" % (
            n, pc[0] * 1e3, pc[1] * 1e3, med(pc[2:]), med(r["post"]), p90(r["post"]),
            med(r["post (control)"]), med(r["delete"]), p90(r["delete"])))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
