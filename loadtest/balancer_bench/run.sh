#!/bin/sh
# run.sh - builds balancer_bench in Release and runs it; the Markdown report
# goes to stdout, the build's chatter to stderr.
#
#   loadtest/balancer_bench/run.sh [-q | -m]        (-m: keys moved and balance only, untimed)
#   loadtest/balancer_bench/run.sh -c BALANCER N [equal]   (for callgrind: see balancer_bench.c)
#
# BUILD_DIR overrides the build directory (default: <repo>/build-bench).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}

cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >&2
cmake --build "$build" -j2 --target balancer_bench >&2

echo "<!-- balancer_bench: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm), nproc $(nproc) -->"
exec "$build/loadtest/balancer_bench/balancer_bench" "$@"
