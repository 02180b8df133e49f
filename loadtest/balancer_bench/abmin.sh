#!/bin/bash
# abmin.sh - compares balancer_bench builds on a noisy machine: runs each
# binary's quick mode (-q) in turn, ROUNDS times, and prints every row's
# fastest run (the median of a -q run times its "min" column) per binary.
# A run the host slows only adds time, so the minimum over alternating
# rounds is the fairest figure a shared machine gives; the control row
# shows whether the minima reached the quiet state (8.2-8.6 ns here).
#
#   loadtest/balancer_bench/abmin.sh ROUNDS BIN [BIN ...]
set -eu
R=$1
shift
for r in $(seq "$R"); do
    for bin in "$@"; do
        "$bin" -q | awk -v tag="$(basename "$bin")" -F'|' '
            /^\| (round_robin|least_conn|random_two|hash)[a-z_ ()]* \| [0-9]+ \|/ {
                gsub(/ /, "", $2); gsub(/ /, "", $3); m = $5; gsub(/[ %]/, "", m)
                printf "%s %s/%s %.2f\n", tag, $2, $3, $4 * (1 + m / 100) }'
    done
done | awk '{k = $1 " " $2; if (!(k in m) || $3 < m[k]) m[k] = $3} END {for (k in m) print k, m[k]}' | sort
