#!/usr/bin/env python3
"""variants.py - the A and B configs of loadtest/swap.

  variants.py --dir DIR --swap-path /__swap

Reads what `compare.d/gen.py configs` wrote into DIR (switchyard.json,
nginx.conf, haproxy.cfg) and writes, per server, two variants that differ in
exactly one route: GET <swap-path> answered by the server itself with the
body "a\\n" (variant a) or "b\\n" (variant b). The route table of the hit mix
is the same in both, so the hit mix answers the same whatever variant is
live; the probe asks <swap-path> to see which one is.

  switchyard-a.json, switchyard-b.json   + route {"id": "swap", ...}
  nginx-a.conf, nginx-b.conf             master process on (reloads need it),
                                         error_log at notice ("reconfiguring"
                                         lines count the reloads), + one
                                         `location = <swap-path>`
  haproxy-a.cfg, haproxy-b.cfg           + one `http-request return` rule

--h2c (loadtest/swap PROTO=h2): the listener serves HTTP/2 by prior
knowledge: Switchyard's gets "protocols": ["h1", "h2c"], nginx's `listen
... http2`, HAProxy's bind `proto h2`.

gen.py's own files are left as they are. Standard library only.
"""
import argparse
import json
import sys


def sub_once(text, old, new, what):
    if text.count(old) != 1:
        sys.exit(f"variants.py: expected exactly one {old!r} in {what}")
    return text.replace(old, new)


def switchyard(doc, swap_path, body, state_dir, h2c=False):
    doc = json.loads(json.dumps(doc))
    if h2c:
        doc["listeners"][0]["protocols"] = ["h1", "h2c"]
    doc["routes"].append({
        "id": "swap",
        "methods": ["GET"],
        "path": swap_path,
        "response": {"status": 200, "body": body},
    })
    if state_dir:
        doc["admin"]["state_dir"] = state_dir
    return json.dumps(doc, indent=1) + "\n"


def nginx(text, swap_path, body, h2c=False):
    text = sub_once(text, "master_process off;", "master_process on;", "nginx.conf")
    if h2c:
        lines = [l for l in text.splitlines() if l.strip().startswith("listen ")]
        if len(lines) != 1:
            sys.exit("variants.py: expected exactly one listen line in nginx.conf")
        text = text.replace(lines[0], lines[0].replace(";", " http2;"))
    text = sub_once(text, " warn;\n", " notice;\n", "nginx.conf")
    esc = body.replace("\n", "\\n")
    loc = (f"        location = {swap_path} {{\n"
           f"            if ($request_method !~ ^(GET|HEAD)$) {{ return 405; }}\n"
           f'            return 200 "{esc}";\n'
           f"        }}\n")
    return sub_once(text, "        location / { return 404; }\n",
                    loc + "        location / { return 404; }\n", "nginx.conf")


def haproxy(text, swap_path, body, h2c=False):
    # Right after the bind line, ahead of the use_backend rules (HAProxy
    # evaluates http-request rules first anyway; this keeps it quiet).
    lines = text.splitlines(keepends=True)
    idx = [i for i, l in enumerate(lines) if l.startswith("    bind ")]
    if len(idx) != 1:
        sys.exit("variants.py: expected exactly one bind line in haproxy.cfg")
    if h2c:
        lines[idx[0]] = lines[idx[0]].rstrip("\n") + " proto h2\n"
    word = body.strip()
    rule = (f"    http-request return status 200 content-type text/plain "
            f'string "{word}" if METH_GET {{ path {swap_path} }}\n')
    lines.insert(idx[0] + 1, rule)
    return "".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--swap-path", default="/__swap")
    ap.add_argument("--state-dir", default="",
                    help="set admin.state_dir in the switchyard variants")
    ap.add_argument("--h2c", action="store_true",
                    help="listeners that serve HTTP/2 by prior knowledge")
    a = ap.parse_args()
    d = a.dir
    with open(f"{d}/switchyard.json", encoding="utf-8") as f:
        sy = json.load(f)
    with open(f"{d}/nginx.conf", encoding="utf-8") as f:
        ng = f.read()
    with open(f"{d}/haproxy.cfg", encoding="utf-8") as f:
        hp = f.read()
    for v in ("a", "b"):
        body = f"{v}\n"
        with open(f"{d}/switchyard-{v}.json", "w", encoding="utf-8") as f:
            f.write(switchyard(sy, a.swap_path, body, a.state_dir, a.h2c))
        with open(f"{d}/nginx-{v}.conf", "w", encoding="utf-8") as f:
            f.write(nginx(ng, a.swap_path, body, a.h2c))
        with open(f"{d}/haproxy-{v}.cfg", "w", encoding="utf-8") as f:
            f.write(haproxy(hp, a.swap_path, body, a.h2c))
    print(f"variants.py: a/b variants of switchyard, nginx and haproxy in {d}")


if __name__ == "__main__":
    main()
