#!/usr/bin/env python3
"""summarize.py - loadtest/upgrade's raw wrk and ab outputs into its Markdown
report: per server and load, the medians over the rounds of the failed
requests, the requests done, and the run's p99 and max latency.

Usage: summarize.py RAW_DIR ROUNDS CONNS DUR AT VERSIONS"""
import os
import re
import statistics
import sys

UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(t):
    errs = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
    detail = "-"
    if m:
        errs = sum(int(x) for x in m.groups())
        detail = "connect %s, read %s, write %s, timeout %s" % m.groups()
    non2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", t) or [0, 0])[1])
    done = int(re.search(r"(\d+) requests in", t).group(1))
    p99 = ms(re.search(r"99%\s+(\S+)", t).group(1))
    mx = ms(re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", t).group(1))
    return errs + non2xx, done, p99, mx, detail


def parse_ab(t):
    failed = int(re.search(r"Failed requests:\s+(\d+)", t).group(1))
    detail = re.search(r"Failed requests:\s+\d+\n\s*\((.*)\)", t)
    non2xx = int((re.search(r"Non-2xx responses:\s+(\d+)", t) or [0, 0])[1])
    done = int(re.search(r"Complete requests:\s+(\d+)", t).group(1))
    p99 = float(re.search(r"\n\s+99%\s+(\d+)", t).group(1))
    mx = float(re.search(r"100%\s+(\d+)", t).group(1))
    return failed + non2xx, done, p99, mx, detail.group(1) if detail else "-"


def main():
    raw, rounds, conns, dur, at, versions = sys.argv[1:7]
    rows = {}
    for f in sorted(os.listdir(raw)):
        m = re.match(r"(\w+)-(keepalive|fresh)-(base|upgrade)-(\d+)\.txt$", f)
        if not m:
            continue
        with open(os.path.join(raw, f), errors="replace") as fh:
            t = fh.read()
        try:
            r = (parse_wrk if m.group(2) == "keepalive" else parse_ab)(t)
        except (AttributeError, ValueError):
            r = None  # the client itself gave up: shown as such
        rows.setdefault((m.group(1), m.group(2), m.group(3)), []).append((int(m.group(4)), r))
    print("# Replacing the running binary under load (%s)\n" % os.path.basename(raw).replace(
        "sy-upgrade-raw-", "upgrade-"))
    print("`loadtest/upgrade`: each server in front of one sy_test_backend on 127.0.0.1, one "
          "worker each; %s connections for %s s, the upgrade %s s in. `keepalive`: wrk "
          "(keep-alive); `fresh`: ab without -k (a connection per request, -r). Switchyard: "
          "`switchyard -c FILE --upgrade`; nginx: USR2 then QUIT to the old master; HAProxy: "
          "USR2 to the master of `haproxy -W -S` (option idle-close-on-response). "
          "Medians over %s rounds; failed = wrk socket errors + non-2xx, ab failed + "
          "non-2xx; p99 and max over the whole run, which holds the upgrade.\n"
          % (conns, dur, at, rounds))
    print("Versions: %s\n" % versions)
    print("| server | load | run | failed (median) | failed per round | requests (median) "
          "| p99 ms | max ms |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---: |")
    order = ["switchyard", "nginx", "haproxy"]
    for (server, load, what), rs in sorted(rows.items(), key=lambda kv: (
            order.index(kv[0][0]) if kv[0][0] in order else 9, kv[0][1], kv[0][2])):
        good = [r for _, r in sorted(rs) if r]
        per = ", ".join(str(r[0]) if r else "client gave up" for _, r in sorted(rs))
        if not good:
            print("| %s | %s | %s | - | %s | - | - | - |" % (server, load, what, per))
            continue

        def med(i):
            return statistics.median(r[i] for r in good)
        print("| %s | %s | %s | %g | %s | %d | %.2f | %.1f |" % (
            server, load, what, med(0), per, med(1), med(2), med(3)))
    print("\nFailures in detail (wrk: socket errors; ab: its failure kinds), per round:\n")
    for (server, load, what), rs in sorted(rows.items()):
        for rnd, r in sorted(rs):
            if r and r[0]:
                print("- %s %s %s round %d: %d (%s)" % (server, load, what, rnd, r[0], r[4]))


if __name__ == "__main__":
    main()
