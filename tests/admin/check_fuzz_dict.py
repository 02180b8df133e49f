#!/usr/bin/env python3
"""check_fuzz_dict.py - fails when fuzz_config.dict lacks a config key or value.

The config parser's keys live in tables in admin/config*.c and
admin/tls_config.c; libFuzzer only reaches the code behind a key quickly when
its dictionary holds it. This reads the tables the parser itself uses:

  - every row of a `struct adm_cf_field NAME[] = {...}` table: `.key = "k"`,
    or a macro `M(k, ...)` whose definition says `.key = #k`; a row in any
    other form is an error here, so that a new way of writing keys cannot
    slip past;
  - every `static const char *const keys[]` (objects checked by hand);
  - the values of `static const char *const names[]` (adm_cf_enum's lists)
    and the first string of each row of a struct table named `keys[]`
    (hash_key's "client_ip", "path", "header:", "cookie:").

Each key and value must be in the dictionary as a JSON string ("\\"k\\""); a
value ending in ':' is a prefix, and its opening quote is enough ("\\"header:").

Usage: check_fuzz_dict.py SOURCE_DIR
"""
import glob
import os
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def block_after(text, start):
    """The text between the '{' at or after <start> and its matching '}'."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    raise ValueError("unbalanced braces")


def rows(body):
    """The top-level comma-separated rows of an initializer list."""
    out, depth, cur = [], 0, ""
    for ch in body:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def key_macros(text):
    """Macros M(k, ...) whose body names the key #k."""
    macros = {}
    for m in re.finditer(r"#define\s+(\w+)\((\w+)[^)]*\)((?:[^\n]*\\\n)*[^\n]*)", text):
        name, arg, body = m.groups()
        if re.search(r"\.key\s*=\s*#" + arg + r"\b", body):
            macros[name] = True
    return macros


def harvest(path, keys, values, errors):
    raw = open(path, encoding="utf-8").read()
    text = strip_comments(raw)
    macros = key_macros(raw)
    where = os.path.basename(path)
    for m in re.finditer(r"struct\s+adm_cf_field\s+(\w+)\s*\[\]\s*=", text):
        for row in rows(block_after(text, m.end())):
            k = re.search(r'\.key\s*=\s*"([^"]+)"', row)
            mm = re.match(r"(\w+)\s*\(\s*(\w+)", row)
            if k:
                keys.add(k.group(1))
            elif mm and mm.group(1) in macros:
                keys.add(mm.group(2))
            else:
                errors.append("%s: %s: a row this check cannot read: %s" % (where, m.group(1), row))
    for m in re.finditer(r"static\s+const\s+char\s*\*\s*const\s+(keys|names)\s*\[\]\s*=", text):
        found = re.findall(r'"([^"]*)"', block_after(text, m.end()))
        (keys if m.group(1) == "keys" else values).update(found)
    for m in re.finditer(r"static\s+const\s+struct\s*\{[^}]*\}\s*keys\s*\[\]\s*=", text):
        for row in rows(block_after(text, m.end())):
            s = re.search(r'"([^"]*)"', row)
            if s:
                values.add(s.group(1))


def main():
    src = sys.argv[1]
    files = sorted(glob.glob(os.path.join(src, "admin", "config*.c")))
    files.append(os.path.join(src, "admin", "tls_config.c"))
    dict_path = os.path.join(src, "tests", "admin", "fuzz_config.dict")
    keys, values, errors = set(), set(), []
    for f in files:
        harvest(f, keys, values, errors)
    tokens = set()
    for line in open(dict_path, encoding="utf-8"):
        line = line.strip()
        if line.startswith('"') and line.endswith('"') and len(line) >= 2:
            tokens.add(line[1:-1].replace('\\"', '"').replace("\\\\", "\\"))
    if len(keys) < 50:  # the parser has well over 50: the reading broke
        errors.append("only %d keys read from %s: this check no longer reads the tables"
                      % (len(keys), ", ".join(files)))
    for k in sorted(keys):
        if '"%s"' % k not in tokens:
            errors.append('key "%s" is not in %s: add the line "\\"%s\\""' % (k, dict_path, k))
    for v in sorted(values):
        want = '"%s' % v if v.endswith(":") else '"%s"' % v
        if want not in tokens:
            line = want.replace('"', '\\"')
            errors.append('value "%s" is not in %s: add the line "%s"' % (v, dict_path, line))
    for e in errors:
        print(e)
    print("%d keys, %d values read; %d problems" % (len(keys), len(values), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
