#!/usr/bin/env python3
"""h2load_result.py - an h2load run as cycle.lua's SYRESULT line, for
loadtest/swap PROTO=h2.

  h2load_result.py H2LOAD_OUTPUT LOG_FILE

Prints `SYRESULT requests=N duration_us=N connect=0 read=N write=0 status=N
timeout=N p50_us=N p99_us=N` from h2load's summary (requests done; read =
requests that failed for other reasons than their status or a timeout:
reset streams, closed connections; status = requests answered outside
2xx/3xx) and its --log-file (one line per request, the third column its
time in microseconds; failed requests, status -1, are left out). Prints nothing when h2load did not run HTTP/2 to the
end: loadtest/swap then says what it printed. Standard library only.
"""
import re
import sys


def main():
    text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text, re.M)
    fin = re.search(r"^finished in ([0-9.]+)(m?s),", text, re.M)
    proto = re.search(r"^Application protocol: (\S+)", text, re.M)
    if not (m and fin and proto) or proto.group(1) not in ("h2", "h2c"):
        return
    done, failed, errored, timeout = (int(m.group(i)) for i in (3, 5, 6, 7))
    lat = []
    with open(sys.argv[2], encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            # a failed request's line has status -1 and no time of its own
            if len(parts) == 3 and parts[1] != "-1" and parts[2].isdigit():
                lat.append(int(parts[2]))
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0

    secs = float(fin.group(1)) / (1000 if fin.group(2) == "ms" else 1)
    print("SYRESULT requests=%d duration_us=%d connect=0 read=%d write=0 status=%d timeout=%d "
          "p50_us=%d p99_us=%d" % (done, secs * 1e6, max(0, errored - timeout), failed - errored,
                                   timeout, pct(0.5), pct(0.99)))


if __name__ == "__main__":
    main()
