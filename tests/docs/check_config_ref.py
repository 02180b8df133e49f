#!/usr/bin/env python3
"""check_config_ref.py - docs/reference/config.md against the config parser, both ways.

The parser's keys are rows of its key tables (admin/config*.c, read as
tests/admin/check_fuzz_dict.py reads them) and the key lists of the objects
tls_config.c checks by hand. TABLES below says where in a config each table's
object sits. From them this builds every key's path (`upstreams.NAME.retries`,
`listeners[].tls.min_version`) and fails when:

  - a key has no block in config.md, or a block names a key the parser does
    not have (a block is a `### ` heading whose code spans are its keys);
  - a table is not in TABLES, or TABLES names a table that is gone;
  - a block lacks its type | default | values | applies row, or its json
    example, or the example is not JSON;
  - a key read through its table as a number documents another range than
    the table's min..max, or a flag is not a boolean;
  - the keys whose block says `restart` are not exactly the keys
    admin/config_lifecycle.c refuses to change without a restart.

Then, with SY_BIN set, it asks the real parser: one config holding every
documented key (each null) and one unknown key in every object is given to
`switchyard --check`; every unknown key must be named unknown (the parser did
read that object) and no documented key may be.

Usage: check_config_ref.py SOURCE_DIR   (SY_BIN: the switchyard binary)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "admin"))
from check_fuzz_dict import block_after, key_macros, rows, strip_comments  # noqa: E402

# Where each table's object sits: the paths of the objects it reads.
TABLES = {
    "config.c:root_fields": [""],
    "config_listeners.c:listener_fields": ["listeners[]"],
    "tls_config.c:parse_listener": ["listeners[].tls"],
    "tls_config.c:parse_cert": ["listeners[].tls.certificates[]"],
    "tls_config.c:parse_client_auth": ["listeners[].tls.client_auth"],
    "config_clientip.c:cip_fields": ["client_ip", "listeners[].client_ip"],
    "config_upstreams.c:upstream_fields": ["upstreams.NAME"],
    "config_upstreams.c:server_fields": ["upstreams.NAME.servers[]"],
    "config_upstreams.c:check_fields": ["upstreams.NAME.health_check"],
    "config_upstreams.c:outlier_fields": ["upstreams.NAME.outlier"],
    "tls_config.c:upstream_cb": ["upstreams.NAME.tls"],
    "config_routes.c:route_fields": ["routes[]"],
    "config_routes.c:response_fields": ["routes[].response"],
    "config_routes.c:redirect_fields": ["routes[].redirect"],
    "config_headers.c:hdr_fields": ["routes[].request_headers", "routes[].response_headers"],
    "config_settings.c:router_fields": ["router"],
    "config_settings.c:limits_fields": ["limits"],
    "config_settings.c:timeouts_fields": ["timeouts"],
    "config_settings.c:http2_fields": ["http2"],
    "config_settings.c:resolver_fields": ["resolver"],
    "config_admin.c:admin_fields": ["admin"],
    "config_fleet.c:fleet_fields": ["fleet"],
    "config_fleet.c:etcd_fields": ["fleet.etcd"],
    "config_fleet.c:tls_fields": ["fleet.etcd.tls"],
    "config_rollout.c:rollout_fields": ["rollout"],
}

PROPS = ["type", "default", "values", "applies"]


def defines(src):
    """Object-like #defines of admin/config_int.h, for the tables' bounds."""
    text = open(os.path.join(src, "admin", "config_int.h"), encoding="utf-8").read()
    return dict(re.findall(r"#define\s+([A-Z_][A-Z0-9_]*)\s+([^/\n]+?)\s*(?:/\*.*)?$", text, re.M))


def evaluate(expr, defs):
    for _ in range(5):
        expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: "(%s)" % defs.get(m.group(0), m.group(0)),
                      expr)
    expr = re.sub(r"\b(\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU]?)\b", r"\1", expr)
    if not re.fullmatch(r"[\d\s()<>+*-]+", expr):
        raise ValueError("cannot evaluate %r" % expr)
    return eval(expr)  # digits, parentheses, shifts and arithmetic only (checked above)


def expand(row, macros_text):
    """A macro row M(k, a, b) as the designated initializers its #define writes."""
    m = re.match(r"(\w+)\s*\((.*)\)\s*$", row, re.S)
    if not m:
        return row
    d = re.search(r"#define\s+%s\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)" % m.group(1), macros_text)
    if not d:
        return row
    params = [p.strip() for p in d.group(1).split(",")]
    args = [a.strip() for a in m.group(2).split(",")]
    body = d.group(2).replace("\\\n", " ")
    for p, a in zip(params, args):
        body = re.sub(r"#%s\b" % p, '"%s"' % a, body)
        body = re.sub(r"\b%s\b" % p, a, body)
    return body


def enclosing_function(text, pos):
    fns = [m for m in re.finditer(r"^[a-z][^\n;]*?\b(\w+)\s*\([^;{]*\)\s*\{", text, re.M | re.S)
           if m.start() < pos]
    return fns[-1].group(1) if fns else "?"


def harvest(src, defs):
    """{table id: [row dicts]}: key, kind, min, max; misplaced rows left out."""
    tables = {}
    admin = os.path.join(src, "admin")
    files = sorted(f for f in os.listdir(admin) if re.fullmatch(r"config\w*\.c", f))
    for f in files + ["tls_config.c"]:
        raw = open(os.path.join(admin, f), encoding="utf-8").read()
        text = strip_comments(raw)
        macros = key_macros(raw)
        for m in re.finditer(r"struct\s+adm_cf_field\s+(\w+)\s*\[\]\s*=", text):
            out = []
            for row in rows(block_after(text, m.end())):
                mm = re.match(r"(\w+)\s*\(", row)
                body = expand(row, text) if mm and mm.group(1) in macros else row
                k = re.search(r'\.key\s*=\s*"([^"]+)"', body)
                if not k:
                    raise SystemExit("%s: %s: a row this check cannot read: %s"
                                     % (f, m.group(1), row))
                if re.search(r"\.misplaced\s*=", body):
                    continue
                kind = re.search(r"\.kind\s*=\s*(\w+)", body)
                r = {"key": k.group(1), "kind": kind.group(1) if kind else None}
                for b in ("min", "max"):
                    v = re.search(r"\.%s\s*=\s*([^,]+?)\s*(?:,|$)" % b, body.strip().rstrip("}"))
                    if v:
                        r[b] = evaluate(v.group(1), defs)
                out.append(r)
            tables["%s:%s" % (f, m.group(1))] = out
        for m in re.finditer(r"static\s+const\s+char\s*\*\s*const\s+keys\s*\[\]\s*=", text):
            keys = re.findall(r'"([^"]*)"', block_after(text, m.end()))
            tables["%s:%s" % (f, enclosing_function(text, m.start()))] = [
                {"key": k, "kind": None} for k in keys]
    return tables


def parser_keys(tables, problems):
    keys = {}
    for tid, parents in TABLES.items():
        if tid not in tables:
            problems.append("TABLES names %s, which the parser no longer has" % tid)
    for tid, rws in tables.items():
        if tid not in TABLES:
            problems.append("the parser's table %s (keys %s) is not in TABLES: say where its "
                            "object sits" % (tid, ", ".join(r["key"] for r in rws)))
            continue
        for parent in TABLES[tid]:
            for r in rws:
                keys[(parent + "." if parent else "") + r["key"]] = r
    return keys


def doc_blocks(path, problems):
    """{key path: block} from the ### headings of config.md."""
    text = open(path, encoding="utf-8").read()
    blocks = {}
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    for i in range(1, len(parts), 2):
        head, body = parts[i], parts[i + 1]
        if not head.startswith("### "):
            continue
        keys = re.findall(r"`([^`]+)`", head)
        if not keys:
            problems.append("config.md: %r: a block whose heading names no key" % head)
        for k in keys:
            if k in blocks:
                problems.append("config.md: %s has two blocks" % k)
            blocks[k] = {"head": head, "body": body, "shared": len(keys) > 1}
    return blocks


def block_props(key, body, problems):
    m = re.search(r"^\|\s*type\s*\|\s*default\s*\|\s*values\s*\|\s*applies\s*\|\s*\n"
                  r"^\|[-\s|]+\|\s*\n^\|(.*)\|\s*$", body, re.M)
    if not m:
        problems.append("config.md: %s: no | type | default | values | applies | row" % key)
        return None
    cells = [c.strip() for c in m.group(1).split("|")]
    if len(cells) != 4:
        problems.append("config.md: %s: %d cells in its row, not 4" % (key, len(cells)))
        return None
    props = dict(zip(PROPS, cells))
    if props["applies"] not in ("live", "restart"):
        problems.append("config.md: %s: applies is %r, not live or restart" % (key, props["applies"]))
    ex = re.search(r"```json( no-check)?\n(.*?)\n```", body, re.S)
    if not ex:
        problems.append("config.md: %s: no json example" % key)
        return props
    try:
        props["example"] = json.loads("{%s}" % ex.group(2))
    except ValueError as e:
        problems.append("config.md: %s: its example is not JSON members (%s)" % (key, e))
    if ex.group(1):
        props.pop("example", None)  # it names files this host need not have
    return props


def check_props(key, row, props, problems):
    kind = row.get("kind")
    if kind in ("FK_UINT", "FK_U64"):
        want = "%d..%d" % (row["min"], row["max"])
        if not props["type"].startswith("integer"):
            problems.append("config.md: %s: the parser reads an integer, the block says %r"
                            % (key, props["type"]))
        if want not in re.findall(r"\d+\.\.\d+", props["values"].replace(",", "")):
            problems.append("config.md: %s: the parser takes %s, the block says %r"
                            % (key, want, props["values"]))
    elif kind == "FK_BOOL" and props["type"] != "boolean":
        problems.append("config.md: %s: the parser reads a boolean, the block says %r"
                        % (key, props["type"]))


def restart_keys(src):
    text = open(os.path.join(src, "admin", "config_lifecycle.c"), encoding="utf-8").read()
    return {p.strip("/").replace("/", ".") for p in re.findall(r'needs_restart\(errs,\s*"([^"]+)"', text)}


# ---- the real parser ----

def pointer(path):
    """upstreams.NAME.servers[].weight -> /upstreams/app/servers/0/weight"""
    out = []
    for seg in path.split("."):
        name, arr = (seg[:-2], True) if seg.endswith("[]") else (seg, False)
        out.append("app" if name == "NAME" else name)
        if arr:
            out.append("0")
    return "/" + "/".join(out)


def probe_config(paths):
    """Every path set (null at the leaves) in one document."""
    root = {}

    def node(parent, seg, leaf):
        name, arr = (seg[:-2], True) if seg.endswith("[]") else (seg, False)
        name = "app" if name == "NAME" else name
        if arr:
            lst = parent.get(name)
            if not isinstance(lst, list):
                lst = parent[name] = [{}]
            return lst[0]
        if leaf:
            parent.setdefault(name, None)
            return None
        if not isinstance(parent.get(name), dict):
            parent[name] = {}
        return parent[name]

    for p in sorted(paths, key=lambda s: s.count(".")):
        cur, segs = root, p.split(".")
        for i, seg in enumerate(segs):
            cur = node(cur, seg, i == len(segs) - 1 and not any(
                q.startswith(p + ".") or q.startswith(p + "[]") for q in paths))
    objects = []

    # upstreams.NAME: an object of names, not of keys
    maps = {pointer(p.split(".NAME")[0]) for p in paths if ".NAME" in p}

    def bogus(d, ptr):
        if ptr not in maps:
            d["zz_not_a_key"] = None
            objects.append(ptr + "/zz_not_a_key")
        for k, v in list(d.items()):
            if isinstance(v, dict):
                bogus(v, "%s/%s" % (ptr, k))
            elif isinstance(v, list) and v and isinstance(v[0], dict):
                bogus(v[0], "%s/%s/0" % (ptr, k))

    bogus(root, "")
    return root, objects


BASE = {"listeners": [{"address": "127.0.0.1:8080"}],
        "upstreams": {"app": {"servers": [{"address": "127.0.0.1:3000"}]}}}
BASE_ROUTE = {"id": "example", "path": "/example/*{rest}", "upstream": "app"}


def merge(into, d):
    for k, v in d.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v


def place(key, example):
    """A config with <example> (members of some object on <key>'s path) in its place."""
    doc = json.loads(json.dumps(BASE))
    first = next(iter(example))
    segs = key.split(".")
    names = [s[:-2] if s.endswith("[]") else s for s in segs]
    cut = max([i for i, n in enumerate(names) if n == first] or [0])
    cur = doc
    for seg in segs[:cut]:
        name, arr = (seg[:-2], True) if seg.endswith("[]") else (seg, False)
        name = "app" if name == "NAME" else name
        if arr:
            if name == "routes" and "routes" not in cur:
                cur["routes"] = [dict(BASE_ROUTE)]
            cur = cur[name][0]
        else:
            cur = cur.setdefault(name, {})
    merge(cur, example)
    if "fleet" in doc:  # a fleet node's file: its routes and upstreams live in etcd
        doc.pop("upstreams", None)
        doc.pop("routes", None)
    return doc


def check_examples(binary, blocks, problems):
    """Each block's example, in its place in a small config, passes --check."""
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "example.json")
        for key, props in sorted(blocks.items()):
            if "example" not in props:
                continue
            # a block for two keys (request_headers.set, response_headers.set) shows
            # one of them: its example is checked where it belongs
            first = next(iter(props["example"]), None)
            names = [s[:-2] if s.endswith("[]") else s for s in key.split(".")]
            if props["shared"] and first not in names and first not in BASE:
                continue
            with open(path, "w") as f:
                json.dump(place(key, props["example"]), f)
            p = subprocess.run([binary, "--check", path], capture_output=True, text=True,
                               timeout=60)
            n += 1
            if p.returncode != 0 or p.stdout.strip() != "ok":
                problems.append("config.md: %s: its example, in a config, fails --check: %s"
                                % (key, " ".join(p.stderr.split())[:300]))
    return n


def ask_parser(binary, paths, problems):
    doc, objects = probe_config(paths)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        p = subprocess.run([binary, "--check", path], capture_output=True, text=True, timeout=60)
    unknown = set()
    for line in p.stderr.splitlines():
        m = re.match(r"\s*(/\S*): (.*)$", line)
        if m and m.group(2).startswith("unknown key"):
            unknown.add(m.group(1))
    for ptr in objects:
        if ptr not in unknown:
            problems.append("the parser did not name %s unknown: it did not read that object, "
                            "so the keys documented there went unchecked" % ptr)
    for k in sorted(paths):
        if pointer(k) in unknown:
            problems.append("config.md documents %s; the parser refuses it as unknown" % k)
    return len(objects)


def main():
    src = os.path.abspath(sys.argv[1])
    problems = []
    tables = harvest(src, defines(src))
    keys = parser_keys(tables, problems)
    blocks = doc_blocks(os.path.join(src, "docs", "reference", "config.md"), problems)
    if len(keys) < 100:  # the parser has well over 100: the reading broke
        problems.append("only %d keys read: this check no longer reads the tables" % len(keys))
    for k in sorted(set(keys) - set(blocks)):
        problems.append("config.md has no block for %s" % k)
    for k in sorted(set(blocks) - set(keys)):
        problems.append("config.md documents %s, which no key table has" % k)
    restart, props_of = set(), {}
    for k, b in sorted(blocks.items()):
        props = block_props(k, b["body"], problems)
        if props is None:
            continue
        props["shared"] = b["shared"]
        props_of[k] = props
        if props["applies"] == "restart":
            restart.add(k)
        if k in keys:
            check_props(k, keys[k], props, problems)
    want = restart_keys(src)
    for k in sorted(want - restart):
        problems.append("config.md: %s needs a restart (config_lifecycle.c), its block says live" % k)
    for k in sorted(restart - want):
        # an object whose every key needs a restart (fleet.etcd) says so too
        kids = [c for c in blocks if c.startswith(k + ".")]
        if any(c in want for c in kids) and all(c in want or c in restart for c in kids):
            continue
        problems.append("config.md: %s says restart, config_lifecycle.c changes it live" % k)
    nobj = nex = 0
    binary = os.environ.get("SY_BIN")
    if binary:
        nobj = ask_parser(binary, set(blocks) & set(keys), problems)
        nex = check_examples(binary, props_of, problems)
    for p in problems:
        print(p)
    print("%d keys in %d tables, %d blocks, %d objects asked of the parser, %d examples "
          "checked; %d problems" % (len(keys), len(tables), len(blocks), nobj, nex, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
