#!/usr/bin/env python3
"""report.py - the Markdown report of loadtest/swap.

  report.py --runs runs.tsv [--title T] [--meta TEXT ...] [--note TEXT ...]

runs.tsv: one row per wrk run, with a header line (see loadtest/swap).
Prints the main table (medians over rounds of req/s, p50, p99; failed,
closed connections and changes summed over rounds; req/s and p99 as ratios
to the same server's baseline), the Switchyard verdict against its control
gap, the runs one by one, and the notes. Standard library only.
"""
import argparse
import csv
import statistics

SERVERS = ["switchyard", "nginx", "haproxy"]
SCENARIOS = ["baseline", "control", "api", "sighup", "reload", "https", "cert"]
LABEL = {
    "baseline": "baseline (no changes)",
    "control": "control (no changes, again)",
    "api": "10 admin API changes/s",
    "sighup": "10 SIGHUP reloads/s",
    "reload": "10 reloads/s",
    "https": "HTTPS baseline (no changes)",
    "cert": "HTTPS, 10 certificate pushes/s",
}
# The baseline each scenario is compared with (the HTTPS rows with theirs).
BASE_OF = {"cert": "https"}


def order(v, known):
    return (known.index(v), v) if v in known else (len(known), v)


def us(x):
    if x is None:
        return "–"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"


def ratio(a, b):
    return a / b if a is not None and b else None


def fr(x):
    return "–" if x is None else f"{x:.2f}×"


def num(r, k):
    v = r.get(k, "")
    return int(v) if v not in ("", None) else 0


def failed_of(r):
    return (num(r, "wrk_connect") + num(r, "wrk_read") + num(r, "wrk_write")
            + num(r, "wrk_timeout") + num(r, "wrk_non2xx") + num(r, "probe_failed"))


def summarize(runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["server"], r["scenario"]), []).append(r)
    out = {}
    for key, rows in groups.items():
        def med(col, rows=rows):
            vals = [float(r[col]) for r in rows if r.get(col, "") not in ("", "nan")]
            return statistics.median(vals) if vals else None

        reconn = [r["wrk_reconnects"] for r in rows if r.get("wrk_reconnects", "") != ""]
        out[key] = {
            "rps": med("rps"), "p50": med("p50_us"), "p99": med("p99_us"),
            "other": med("other_pct"),
            "failed": sum(failed_of(r) for r in rows),
            "wrk_err": sum(num(r, "wrk_connect") + num(r, "wrk_read") + num(r, "wrk_write")
                           + num(r, "wrk_timeout") for r in rows),
            "wrk_non2xx": sum(num(r, "wrk_non2xx") for r in rows),
            "probe_failed": sum(num(r, "probe_failed") for r in rows),
            "requests": sum(num(r, "requests") + num(r, "probe_requests") for r in rows),
            "closed": sum(num(r, "probe_closed") for r in rows),
            "reconn": sum(int(x) for x in reconn) if reconn else None,
            "attempted": sum(num(r, "changes_attempted") for r in rows),
            "ok": sum(num(r, "changes_ok") for r in rows),
            "chg_failed": sum(num(r, "changes_failed") for r in rows),
            "applied": sum(num(r, "applied") for r in rows),
            "rows": rows,
        }
    return out


def main_table(res):
    lines = [
        "| server | scenario | req/s (median) | p50 | p99 | failed | closed conns (probe) "
        "| wrk reconnects | changes applied / sent | req/s vs baseline | p99 vs baseline |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(res, key=lambda k: (order(k[0], SERVERS), order(k[1], SCENARIOS))):
        m = res[key]
        base = res.get((key[0], BASE_OF.get(key[1], "baseline")))
        if key[1] == "https":
            base = None
        changes = "–" if not m["attempted"] else f"{m['applied']} / {m['attempted']}"
        if m["chg_failed"]:
            changes += f" ({m['chg_failed']} failed)"
        failed = str(m["failed"])
        if m["failed"]:
            share = 100.0 * m["failed"] / m["requests"] if m["requests"] else 0.0
            failed = (f"{m['failed']:,} ({share:.2f} %: wrk errors {m['wrk_err']:,}, "
                      f"non-2xx {m['wrk_non2xx']:,}, probe {m['probe_failed']:,})")
        lines.append(
            f"| {key[0]} | {LABEL.get(key[1], key[1])} | {m['rps']:,.0f} | {us(m['p50'])} | "
            f"{us(m['p99'])} | {failed} | {m['closed']} | "
            f"{'–' if m['reconn'] is None else m['reconn']} | {changes} | "
            f"{fr(ratio(m['rps'], base and base['rps']))} | "
            f"{fr(ratio(m['p99'], base and base['p99']))} |")
    return lines


def verdict(res):
    base, ctl = res.get(("switchyard", "baseline")), res.get(("switchyard", "control"))
    if not base or not ctl or not base["rps"] or not base["p99"]:
        return []
    gap_rps = 100.0 * abs(ctl["rps"] - base["rps"]) / base["rps"]
    gap_p99 = 100.0 * abs(ctl["p99"] - base["p99"]) / base["p99"]
    lines = [
        f"Control gap (the same Switchyard, no changes, measured twice): req/s "
        f"**{gap_rps:.1f} %**, p99 **{gap_p99:.1f} %** "
        f"(control/baseline: req/s {ctl['rps'] / base['rps']:.3f}×, "
        f"p99 {ctl['p99'] / base['p99']:.3f}×). A scenario is within the gap when its "
        "req/s is at most the req/s gap below the baseline and its p99 at most the p99 gap "
        "above it (a change for the better always is); the gap is the measured noise of this "
        "run, so a wide gap makes a weak test.",
        "",
        "| switchyard scenario | req/s change | p99 change | failed | closed conns | wrk reconnects "
        "| within the control gap? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    plain = base
    for sc in ("api", "sighup", "cert"):
        m = res.get(("switchyard", sc))
        base = res.get(("switchyard", BASE_OF[sc])) if sc in BASE_OF else plain
        if not m or not base or not base["rps"] or not base["p99"]:
            continue
        d_rps = 100.0 * (m["rps"] - base["rps"]) / base["rps"]
        d_p99 = 100.0 * (m["p99"] - base["p99"]) / base["p99"]
        # Only the bad direction counts: slower, or a higher p99.
        ok_rps = -d_rps <= gap_rps
        ok_p99 = d_p99 <= gap_p99
        zero = m["failed"] == 0 and m["closed"] == 0 and not m["reconn"]
        parts = [
            "req/s " + ("yes" if ok_rps else "NO"),
            "p99 " + ("yes" if ok_p99 else "NO"),
            "zero failed and closed: " + ("yes" if zero else "NO"),
        ]
        lines.append(
            f"| {LABEL[sc]} | {d_rps:+.1f} % | {d_p99:+.1f} % | {m['failed']} | {m['closed']} | "
            f"{'–' if m['reconn'] is None else m['reconn']} | {'; '.join(parts)} |")
    return lines


def per_round(runs):
    """Each run against the same server's baseline of the same round: the
    rounds are interleaved, so a round shares its noise more than the
    medians do."""
    base = {(r["server"], r["round"], r["scenario"]): r for r in runs
            if r["scenario"] in ("baseline", "https")}
    lines = [
        "| server | scenario | round | req/s vs baseline | p99 vs baseline | other CPU % "
        "(run / baseline) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in sorted(runs, key=lambda r: (order(r["server"], SERVERS),
                                         order(r["scenario"], SCENARIOS), int(r["round"]))):
        b = base.get((r["server"], r["round"], BASE_OF.get(r["scenario"], "baseline")))
        if r["scenario"] in ("baseline", "https") or not b:
            continue
        lines.append(
            f"| {r['server']} | {r['scenario']} | {r['round']} | "
            f"{fr(ratio(float(r['rps']), float(b['rps'])))} | "
            f"{fr(ratio(float(r['p99_us']), float(b['p99_us'])))} | "
            f"{r['other_pct']} / {b['other_pct']} |")
    return lines if len(lines) > 2 else []


def runs_table(runs):
    lines = [
        "| server | scenario | round | req/s | p50 | p99 | wrk errors c/r/w/t | non-2xx "
        "| probe failed / sent | probe closed | swap flips | changes ok / sent (late) "
        "| applied | admin ms p50 / p99 / max | other CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(runs, key=lambda r: (order(r["server"], SERVERS),
                                         order(r["scenario"], SCENARIOS), int(r["round"]))):
        chg = "–"
        if num(r, "changes_attempted"):
            chg = f"{r['changes_ok']} / {r['changes_attempted']}"
            if num(r, "changes_late"):
                chg += f" ({r['changes_late']})"
        lat = "–"
        if r.get("admin_p50_ms"):
            lat = f"{r['admin_p50_ms']} / {r['admin_p99_ms']} / {r['admin_max_ms']}"
        lines.append(
            f"| {r['server']} | {r['scenario']} | {r['round']} | {float(r['rps']):,.0f} | "
            f"{us(float(r['p50_us']))} | {us(float(r['p99_us']))} | "
            f"{r['wrk_connect']}/{r['wrk_read']}/{r['wrk_write']}/{r['wrk_timeout']} | "
            f"{r['wrk_non2xx']} | {r['probe_failed']} / {r['probe_requests']} | "
            f"{r['probe_closed']} | {r['probe_flips']} | {chg} | "
            f"{r['applied'] if num(r, 'changes_attempted') else '–'} | {lat} | {r['other_pct']} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--title", default="Config changes under load")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--note", action="append", default=[])
    a = ap.parse_args()
    with open(a.runs, encoding="utf-8", newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    if not runs:
        raise SystemExit("report.py: no runs")
    res = summarize(runs)
    others = [float(r["other_pct"]) for r in runs]
    out = [f"# {a.title}", ""] + [f"- {m}" for m in a.meta]
    out += ["", "## Results", ""] + main_table(res)
    v = verdict(res)
    if v:
        out += ["", "## Switchyard against its control gap", ""] + v
    pr = per_round(runs)
    if pr:
        out += ["", "## Round by round, against the same round's baseline", ""] + pr
    out += ["", "## Runs", ""] + runs_table(runs)
    notes = [
        f"noise: the rest of the machine used {min(others):.1f}–{max(others):.1f} % of the CPUs "
        f"during the runs (median {statistics.median(others):.1f} %); \"other CPU %\" is busy "
        "ticks in /proc/stat minus the server (master and workers, live and reaped), "
        "bench_upstream, wrk, probe and changer, in % of all CPUs",
        "failed = wrk socket errors (connect, read, write, timeout) + wrk non-2xx + probe "
        "failures (non-2xx, a request that got no answer, failed connects), summed over rounds; "
        "the percentage is of wrk's and the probe's requests together",
        "closed conns: the probe's keep-alive connections that the server ended "
        "(`Connection: close`, EOF or reset), summed over rounds; wrk reconnects: Switchyard's "
        "accepted connections (switchyard_connections_total) beyond wrk's and the probe's own, "
        "i.e. wrk connections the server closed",
        "changes applied: Switchyard's config swaps (switchyard_config_swaps_total), nginx's "
        "\"reconfiguring\" log lines, HAProxy's \"Loading success.\" lines, per run; sent: what "
        "changer.py did (admin calls answered 2xx / signals / master CLI commands); nginx "
        "merges signals that arrive while it is still reconfiguring; HAProxy's master CLI "
        "refuses connections while the master re-executes itself for a reload: such a change "
        "is retried for 90 ms and then counted as failed, and `reload` commands that arrive "
        "while a reload is pending are merged",
        "swap flips: times a probe connection saw GET /__swap change body between two answers "
        "on the same connection, i.e. a new config reaching an open connection",
        "ratios: median of the scenario over median of the same server's baseline; p99 ratios "
        "swing more than req/s on a shared machine, and runs differ by 10-20 % even when "
        "other CPU % is near 0 (the host's own contention does not show in /proc/stat): "
        "read the control gap before any ratio",
    ]
    out += ["", "## Notes", ""] + [f"- {n}" for n in notes + a.note]
    print("\n".join(out))


if __name__ == "__main__":
    main()
