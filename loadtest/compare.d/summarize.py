#!/usr/bin/env python3
"""summarize.py - the Markdown report of loadtest/compare.

  summarize.py --runs runs.tsv [--callgrind callgrind.tsv] [--title T]
               [--meta 'key: value' ...] [--note TEXT ...]

runs.tsv (tab-separated, with a header line): one row per wrk run,
  scenario server round rps p50_us p99_us cpu_us requests failed other_pct
  [server_pct client_pct]
(other_pct: CPU the rest of the machine used during the run, in %;
server_pct, client_pct: how busy the server's core and the client's core
(wrk + upstream) were, in % of one core)
callgrind.tsv: one row per server and scenario,
  scenario server n1 ir1 n2 ir2

Prints the main table (medians across rounds; failed is the sum over all
rounds) and the ratio table: switchyard against nginx and HAProxy, and the
gap between the two names under which the same Switchyard was measured
("switchyard" and "switchyard-control"), which is the noise floor of the
run. Standard library only.
"""
import argparse
import csv
import statistics
import sys

SCENARIOS = ["hit", "miss", "one"]
SERVERS = ["switchyard", "switchyard-control", "nginx", "haproxy", "direct"]


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def order(value, known):
    return (known.index(value), value) if value in known else (len(known), value)


def fmt_us(us):
    if us is None:
        return "–"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"


def fmt_num(x, digits=0):
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"


def summarize(runs, cg):
    """{(scenario, server): {metric: value}}"""
    groups = {}
    for r in runs:
        groups.setdefault((r["scenario"], r["server"]), []).append(r)
    out = {}
    for key, rows in groups.items():

        def med(col, rows=rows):
            vals = [float(r[col]) for r in rows if r[col] not in ("", "nan")]
            return statistics.median(vals) if vals else None

        out[key] = {
            "rps": med("rps"),
            "p50": med("p50_us"),
            "p99": med("p99_us"),
            "cpu": med("cpu_us"),
            "other": med("other_pct") if "other_pct" in rows[0] else None,
            "srv_pct": med("server_pct") if "server_pct" in rows[0] else None,
            "cli_pct": med("client_pct") if "client_pct" in rows[0] else None,
            "other_all": [r.get("other_pct", "") for r in rows],
            "failed": sum(int(r["failed"]) for r in rows),
            "requests": sum(int(r["requests"]) for r in rows),
            "rounds": len(rows),
            "rps_all": [float(r["rps"]) for r in rows],
        }
    for r in cg:
        key = (r["scenario"], r["server"])
        n1, n2, ir1, ir2 = int(r["n1"]), int(r["n2"]), int(r["ir1"]), int(r["ir2"])
        ipr = (ir2 - ir1) / (n2 - n1) if n2 != n1 else None
        out.setdefault(key, {"rps": None, "p50": None, "p99": None, "cpu": None, "other": None,
                             "srv_pct": None, "cli_pct": None,
                             "failed": None, "requests": None, "rounds": 0, "rps_all": [],
                             "other_all": []})
        out[key]["instr"] = ipr
    return out


def main_table(res):
    lines = [
        "| scenario | server | req/s (median) | p50 | p99 | CPU µs/req | instr/req | failed "
        "| server core % | client core % | other CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(res, key=lambda k: (order(k[0], SCENARIOS), order(k[1], SERVERS))):
        m = res[key]
        failed = "–" if m["failed"] is None else f"{m['failed']} / {m['requests']:,}"
        lines.append(
            f"| {key[0]} | {key[1]} | {fmt_num(m['rps'])} | {fmt_us(m['p50'])} | "
            f"{fmt_us(m['p99'])} | {fmt_num(m['cpu'], 2)} | {fmt_num(m.get('instr'))} | {failed} "
            f"| {fmt_num(m['srv_pct'])} | {fmt_num(m['cli_pct'])} | {fmt_num(m['other'], 1)} |"
        )
    return lines


def ratio_table(res):
    lines = [
        "| scenario | comparison | req/s | p99 | CPU µs/req | instr/req |",
        "|---|---|---:|---:|---:|---:|",
    ]
    scenarios = sorted({k[0] for k in res}, key=lambda s: order(s, SCENARIOS))
    for sc in scenarios:
        for a, b in [("switchyard", "nginx"), ("switchyard", "haproxy"), ("haproxy", "nginx")]:
            ma, mb = res.get((sc, a)), res.get((sc, b))
            if not ma or not mb:
                continue
            lines.append(
                f"| {sc} | {a} / {b} | {fmt_ratio(ma['rps'], mb['rps'])} | "
                f"{fmt_ratio(ma['p99'], mb['p99'])} | {fmt_ratio(ma['cpu'], mb['cpu'])} | "
                f"{fmt_ratio(ma.get('instr'), mb.get('instr'))} |"
            )
        sy, ctl = res.get((sc, "switchyard")), res.get((sc, "switchyard-control"))
        if sy and ctl and sy["rps"] and ctl["rps"]:
            gap = 100.0 * abs(sy["rps"] - ctl["rps"]) / sy["rps"]
            cgap = "–"
            if sy["cpu"] and ctl["cpu"]:
                cgap = f"{100.0 * abs(sy['cpu'] - ctl['cpu']) / sy['cpu']:.1f} %"
            lines.append(f"| {sc} | control gap (same switchyard, twice) | {gap:.1f} % | – | "
                         f"{cgap} | – |")
    return lines if len(lines) > 2 else []


def spread_lines(res):
    """Each server's req/s per round (and the other CPU % of that run), to
    judge the noise by eye."""
    lines = []
    for key in sorted(res, key=lambda k: (order(k[0], SCENARIOS), order(k[1], SERVERS))):
        rounds = res[key]["rps_all"]
        others = res[key]["other_all"]
        if rounds:
            cells = [
                f"{x:,.0f}" + (f" ({o} %)" if o not in ("", None) else "")
                for x, o in zip(rounds, others)
            ]
            lines.append(f"- {key[0]} / {key[1]}: " + ", ".join(cells))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--callgrind")
    ap.add_argument("--title", default="Switchyard vs nginx vs HAProxy")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--note", action="append", default=[])
    a = ap.parse_args()

    runs = read_tsv(a.runs)
    cg = read_tsv(a.callgrind) if a.callgrind else []
    if not runs and not cg:
        sys.exit("summarize.py: no results")
    res = summarize(runs, cg)

    out = [f"# {a.title}", ""]
    out += [f"- {m}" for m in a.meta]
    out += ["", "## Results", ""] + main_table(res)
    ratios = ratio_table(res)
    if ratios:
        out += ["", "## Ratios (medians)", ""] + ratios
    spread = spread_lines(res)
    if spread:
        out += ["", "## req/s per round (other CPU %)", ""] + spread
    if a.note:
        out += ["", "## Notes", ""] + [f"- {n}" for n in a.note]
    print("\n".join(out))


if __name__ == "__main__":
    main()
