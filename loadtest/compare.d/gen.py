#!/usr/bin/env python3
"""gen.py - configurations and request lists for loadtest/compare.

`gen.py configs`: from a route table (lines `METHOD PATTERN`, fox-style `{param}` and
`*{catchall}` segments, `#` comments) and its request list (one `METHOD PATH`
per route, same order) this writes into --dir:

  nginx.conf       one worker, keep-alive upstream, one location per pattern
  haproxy.cfg      nbthread 1, one acl + use_backend per route
  switchyard.json  the gateway's config, one route per line of the table
  hit.txt          the requests, `METHOD PATH` per line (all must answer 200)
  miss.txt         paths that match no route (all must answer 404)

`gen.py curl` turns a request list into a curl -K config for the
correctness pre-check.

It also checks its own work with a small fox-semantics matcher: every hit
request must match its route (or one at least as specific taking the same
method), and no miss path may match any route. Standard library only.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import sys

BODY_METHODS = {"POST", "PUT", "PATCH"}
# ACCESS_LOG=1 (loadtest/compare): Switchyard writes its JSON access log and
# nginx its combined one, each to a file in the run's directory, instead of
# no log at all: the cost of a log line, measured the same way for both.
ACCESS_LOG = os.environ.get("ACCESS_LOG") == "1"
# HEALTH=1 (loadtest/compare): Switchyard's pool gets active health checks
# (once a second, off the workers); HEALTH=2 adds outlier detection, which
# the workers feed on every response: the cost of both on a proxied hit.
HEALTH = os.environ.get("HEALTH", "0")
# POLICY=rate_limit, cors, api_key, basic, jwt or forward_auth
# (loadtest/compare): every Switchyard route gets that policy (a rate limit
# per client address that never refuses; CORS for one origin, which the
# requests do not send; an API key, Basic credentials or an HS256 token that
# client.py and the curl check send, for the callgrind runs only: BENCH=0;
# a forward_auth subrequest to the same bench_upstream, which answers it 200,
# with the Authorization field the client sends, and nginx gets the same
# through auth_request), to measure its cost per request. Empty: no policies.
POLICY = os.environ.get("POLICY", "")
POLICIES = {
    "rate_limit": {"type": "rate_limit", "rate": 1000000000, "burst": 1000000000},
    "cors": {"type": "cors", "origins": ["https://app.example"]},
    # sha256("bench-key")
    "api_key": {"type": "api_key", "keys": [{"name": "bench", "sha256":
                "b0962662e937d44c699c8305d90cbf190b3150c59b13863d1380b5cc3c711bb7"}]},
    # bench:bench-pw, bcrypt at cost 10 (a checked password stays in each
    # worker's cache: this measures the cached path)
    "basic": {"type": "basic", "htpasswd": "bench.htpasswd"},
    # an HS256 token valid until 2100 with its sub copied upstream (the
    # same token on every request: this measures the worker's cached path)
    "jwt": {"type": "jwt", "hs256_secret_file": "bench.secret", "issuer": "https://id.example",
            "audiences": ["api"], "claims_to_headers": {"sub": "X-User"}},
    # a subrequest per request, to its own pool on the bench upstream
    # (keep-alive, as nginx's auth_request to the same upstream block);
    # bench_upstream sends no X-User: the lookup runs, nothing is copied
    "forward_auth": {"type": "forward_auth", "upstream": "auth", "path": "/verify",
                     "request_headers": ["Authorization"], "response_headers": ["X-User"]},
}
BENCH_SECRET = b"bench-secret-of-at-least-32-bytes-long"


def bench_token():
    """The HS256 token POLICY=jwt sends, signed with BENCH_SECRET."""
    def b64u(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=")
    head = b64u(b'{"alg":"HS256","typ":"JWT"}')
    body = b64u(b'{"iss":"https://id.example","aud":"api","sub":"bench","exp":4102444800}')
    sig = hmac.new(BENCH_SECRET, head + b"." + body, hashlib.sha256).digest()
    return (head + b"." + body + b"." + b64u(sig)).decode()


POLICY_HEADERS = {"api_key": "X-API-Key: bench-key",
                  "basic": "Authorization: Basic YmVuY2g6YmVuY2gtcHc=",
                  "jwt": "Authorization: Bearer " + bench_token(),
                  "forward_auth": "Authorization: Bearer bench"}
POLICY_HEADER = POLICY_HEADERS.get(POLICY)
BENCH_HTPASSWD = "bench:$2b$10$L8Ye855YqzRzFV3wq/fu5eTfzAUYnVI.CvhORTnU1jW88pNO8n9Dm\n"


def read_table(path):
    """Returns [(method, text)] for the non-comment lines of <path>."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{lineno}: expected 'METHOD PATH', got {line!r}")
            rows.append((parts[0].upper(), parts[1]))
    return rows


def tokens(pattern):
    """Fox priority key: one token per static byte (0, byte), (1,) per
    {param}, (2,) for *{catchall}. Sorting keys ascending puts the most
    specific of any two patterns that match the same path first: at the
    first token where they differ, static < param < catch-all, and a
    pattern that ended (a prefix of the other) sorts first."""
    out = []
    for m in re.finditer(r"\*\{[^}]*\}|\{[^}]*\}|.", pattern, re.S):
        t = m.group(0)
        if t.startswith("*{"):
            out.append((2, ""))
        elif t.startswith("{"):
            out.append((1, ""))
        else:
            out.append((0, t))
    return out


def regex(pattern):
    """The PCRE (and Python re) equivalent of a fox pattern, anchored."""
    out = []
    for m in re.finditer(r"\*\{[^}]*\}|\{[^}]*\}|[^{*]+|\*", pattern):
        t = m.group(0)
        if t.startswith("*{"):
            out.append(".*")
        elif t.startswith("{"):
            out.append("[^/]+")
        else:
            out.append(re.escape(t))
    return "^" + "".join(out) + "$"


def is_static(pattern):
    return "{" not in pattern


def method_set(methods):
    """A route's methods as fox serves them: GET also takes HEAD."""
    s = set(methods)
    if "GET" in s:
        s.add("HEAD")
    return s


def group_patterns(routes):
    """[(pattern, sorted methods)] with one entry per distinct pattern, in
    first-seen order."""
    groups = {}
    for method, pattern in routes:
        groups.setdefault(pattern, set()).add(method)
    return [(p, sorted(method_set(m))) for p, m in groups.items()]


def fox_match(routes, method, path):
    """The most specific route taking <method> that matches <path>; or
    'not-allowed' when only other methods match; or None."""
    matching = [(tokens(p), m, p) for m, p in routes if re.match(regex(p), path)]
    if not matching:
        return None
    takes = [r for r in matching if method in method_set([r[1]])]
    if not takes:
        return "not-allowed"
    return min(takes)[2]


def nginx_conf(routes, listen_port, upstream_port, prefix):
    lines = [
        "# Generated by loadtest/compare.d/gen.py: nginx in front of bench_upstream.",
        "worker_processes 1;",
        "daemon off;",
        "master_process off;",
        "pcre_jit on;",
        f"pid {prefix}/nginx.pid;",
        f"error_log {prefix}/error.log warn;",
        "events { worker_connections 4096; }",
        "http {",
        (f"    access_log {prefix}/access.log combined;" if ACCESS_LOG
         else "    access_log off;"),
        "    keepalive_requests 100000000;",
        "    keepalive_timeout 75s;",
        f"    client_body_temp_path {prefix}/client_body;",
        f"    proxy_temp_path {prefix}/proxy;",
        f"    fastcgi_temp_path {prefix}/fastcgi;",
        f"    uwsgi_temp_path {prefix}/uwsgi;",
        f"    scgi_temp_path {prefix}/scgi;",
        "    upstream bench {",
        f"        server 127.0.0.1:{upstream_port};",
        "        keepalive 64;",
        "        keepalive_requests 100000000;",
        "    }",
        "    proxy_http_version 1.1;",
        '    proxy_set_header Connection "";',
        "    server {",
        f"        listen 127.0.0.1:{listen_port};",
    ]
    if POLICY == "forward_auth":  # what Switchyard's forward_auth does, the nginx way
        lines += [
            "        auth_request /_auth;",
            "        auth_request_set $auth_user $upstream_http_x_user;",
            '        proxy_set_header Connection "";',  # a level's own list replaces http's
            "        proxy_set_header X-User $auth_user;",
            "        location = /_auth {",
            "            internal;",
            "            auth_request off;",
            "            proxy_pass http://bench/verify;",
            "            proxy_pass_request_body off;",
            '            proxy_set_header Content-Length "";',
            '            proxy_set_header Connection "";',
            "            proxy_set_header X-Forwarded-Method $request_method;",
            "            proxy_set_header X-Forwarded-Uri $request_uri;",
            "            proxy_set_header X-Forwarded-Host $host;",
            "            proxy_set_header X-Forwarded-Proto $scheme;",
            "            proxy_set_header X-Forwarded-For $remote_addr;",
            "        }",
        ]
    groups = group_patterns(routes)
    # Exact locations win over regexes in nginx, as static routes win in fox;
    # regexes are tried in order, so the most specific comes first.
    statics = [g for g in groups if is_static(g[0])]
    params = sorted((g for g in groups if not is_static(g[0])), key=lambda g: tokens(g[0]))
    for pattern, methods in statics + params:
        if is_static(pattern):
            lines.append(f"        location = {pattern} {{")
        else:
            lines.append(f'        location ~ "{regex(pattern)}" {{')
        lines.append(
            f"            if ($request_method !~ ^({'|'.join(methods)})$) {{ return 405; }}"
        )
        lines.append("            proxy_pass http://bench;")
        lines.append("        }")
    lines += [
        "        location / { return 404; }",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def haproxy_cfg(routes, listen_port, upstream_port):
    lines = [
        "# Generated by loadtest/compare.d/gen.py: HAProxy in front of bench_upstream.",
        "global",
        "    nbthread 1",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    option http-keep-alive",
        "    http-reuse always",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout http-request 10s",
        "    timeout http-keep-alive 60s",
        "frontend fe",
        f"    bind 127.0.0.1:{listen_port}",
    ]
    methods = sorted({m for m, _ in routes})
    for m in methods:
        extra = " HEAD" if m == "GET" else ""
        lines.append(f"    acl m_{m} method {m}{extra}")
    acl_of = {}
    for _, pattern in routes:
        if pattern in acl_of:
            continue
        name = f"p{len(acl_of)}"
        acl_of[pattern] = name
        if is_static(pattern):
            lines.append(f"    acl {name} path {pattern}")
        else:
            lines.append(f"    acl {name} path_reg {regex(pattern)}")
    # The method test comes first: it is the cheaper one and rules out most.
    for method, pattern in routes:
        lines.append(f"    use_backend bench if m_{method} {acl_of[pattern]}")
    lines += [
        "    default_backend notfound",
        "backend bench",
        f"    server up 127.0.0.1:{upstream_port}",
        "backend notfound",
        "    http-request return status 404",
    ]
    return "\n".join(lines) + "\n"


def switchyard_json(routes, listen_port, upstream_port, admin_port, log_dir):
    pool = {"servers": [{"address": f"127.0.0.1:{upstream_port}"}],
            "keepalive": 64}  # as nginx's keepalive 64
    if HEALTH in ("1", "2"):
        pool["health_check"] = {"path": "/", "interval_ms": 1000, "timeout_ms": 500}
    if HEALTH == "2":
        pool["outlier"] = {"consecutive_failures": 5}
    doc = {
        "workers": 1,
        "listeners": [{"address": f"127.0.0.1:{listen_port}"}],
        "upstreams": {"bench": pool},
        "routes": [
            {"id": f"r{i}", "methods": [m], "path": p, "upstream": "bench"}
            for i, (m, p) in enumerate(routes)
        ],
        "access_log": f"{log_dir}/switchyard-access.log" if ACCESS_LOG else "off",
        "admin": {"address": f"127.0.0.1:{admin_port}"},
    }
    if POLICY:
        doc["policies"] = {"p": json.loads(json.dumps(POLICIES[POLICY]))}
        if POLICY == "basic":
            ht = os.path.join(log_dir, "bench.htpasswd")
            write(ht, BENCH_HTPASSWD)
            doc["policies"]["p"]["htpasswd"] = ht
        if POLICY == "jwt":
            sec = os.path.join(log_dir, "bench.secret")
            write(sec, BENCH_SECRET.decode())
            doc["policies"]["p"]["hs256_secret_file"] = sec
        if POLICY == "forward_auth":
            doc["upstreams"]["auth"] = dict(pool)
        for r in doc["routes"]:
            r["policies"] = ["p"]
    return json.dumps(doc, indent=1) + "\n"


def miss_paths(routes, requests):
    """Each request path with a `/zzz` suffix; a path that some route would
    still match gets the prefix `/nope` instead."""
    out = []
    for method, path in requests:
        for cand in (path.rstrip("/") + "/zzz", "/nope" + path):
            if fox_match(routes, method, cand) is None:
                out.append((method, cand))
                break
        else:
            sys.exit(f"gen.py: cannot build a miss path for {method} {path}")
    return out


def curl_config(requests, port):
    """A curl -K config: one transfer per request, `next` between them, each
    printing its status code on a line of its own."""
    parts = []
    for method, path in requests:
        block = [
            f'url = "http://127.0.0.1:{port}{path}"',
            f'request = "{method}"',
            'output = "/dev/null"',
            'write-out = "%{http_code}\\n"',
        ]
        if method in BODY_METHODS:
            block.append('header = "Content-Length: 0"')
        if POLICY_HEADER:
            block.append(f'header = "{POLICY_HEADER}"')
        parts.append("\n".join(block))
    return "\nnext\n".join(parts) + "\n"


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def cmd_configs(a):
    routes = read_table(a.routes)
    requests = read_table(a.requests)
    if len(routes) != len(requests):
        sys.exit(f"gen.py: {len(routes)} routes but {len(requests)} requests")
    for (rm, rp), (qm, qp) in zip(routes, requests):
        got = fox_match(routes, qm, qp)
        if rm != qm or got is None or got == "not-allowed":
            sys.exit(f"gen.py: request {qm} {qp} does not hit route {rm} {rp} (got {got})")
    misses = miss_paths(routes, requests)

    d = a.dir
    write(f"{d}/nginx.conf", nginx_conf(routes, a.nginx_port, a.upstream_port, a.nginx_prefix))
    write(f"{d}/haproxy.cfg", haproxy_cfg(routes, a.haproxy_port, a.upstream_port))
    write(
        f"{d}/switchyard.json",
        switchyard_json(routes, a.switchyard_port, a.upstream_port, a.admin_port, d),
    )
    write(f"{d}/hit.txt", "".join(f"{m} {p}\n" for m, p in requests))
    write(f"{d}/miss.txt", "".join(f"{m} {p}\n" for m, p in misses))
    print(f"gen.py: {len(routes)} routes, {len(group_patterns(routes))} patterns -> {d}")


def cmd_curl(a):
    sys.stdout.write(curl_config(read_table(a.requests), a.port))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("configs", help="write the configs and request lists into --dir")
    c.add_argument("--routes", required=True)
    c.add_argument("--requests", required=True)
    c.add_argument("--dir", required=True)
    c.add_argument("--upstream-port", type=int, required=True)
    c.add_argument("--nginx-port", type=int, required=True)
    c.add_argument("--haproxy-port", type=int, required=True)
    c.add_argument("--switchyard-port", type=int, required=True)
    c.add_argument("--admin-port", type=int, required=True)
    c.add_argument("--nginx-prefix", required=True)
    c.set_defaults(func=cmd_configs)
    c = sub.add_parser("curl", help="print a curl -K config for a request list")
    c.add_argument("--requests", required=True)
    c.add_argument("--port", type=int, required=True)
    c.set_defaults(func=cmd_curl)
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
