#!/usr/bin/env python3
"""cgfile.py - the self cost (Ir) of the source lines of one file in a
callgrind output, inlined code included: callgrind records an inlined
function's instructions at its own file's lines (fi=/fe=), so the sum over
admin/sample.h is the ring writer, wherever the compiler put it.

  cgfile.py CALLGRIND_OUT SUFFIX   prints the sum for files ending in SUFFIX
"""
import re
import sys


def main(path, suffix):
    names = {}  # compressed "(n)" ids -> file names
    cur = fn_file = None
    total = 0
    skip_next = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for ln in f:
            m = re.match(r"^(fl|fi|fe)=\((\d+)\)(?: (.*))?$", ln.rstrip("\n"))
            if m:
                if m.group(3) is not None:
                    names[m.group(2)] = m.group(3)
                name = names.get(m.group(2), "")
                if m.group(1) == "fl":
                    fn_file = name
                cur = name
                continue
            if ln.startswith("fn="):
                cur = fn_file
                continue
            if ln.startswith("calls="):
                skip_next = True  # the next cost line is the call's inclusive cost
                continue
            if ln[:1] in "0123456789+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = ln.split()
                if len(parts) >= 2 and cur and cur.endswith(suffix):
                    total += int(parts[1])
    print(total)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
