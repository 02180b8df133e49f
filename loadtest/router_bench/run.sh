#!/bin/sh
# run.sh - builds router_bench in Release and runs it; the Markdown report
# goes to stdout, the build's chatter to stderr.
#
#   loadtest/router_bench/run.sh [-q] [ROUTES_DIR]
#
# BUILD_DIR overrides the build directory (default: <repo>/build-bench).
# Nothing is pinned: the report prints nproc and the CPU model instead.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >&2
cmake --build "$build" -j"$jobs" --target router_bench >&2

echo "<!-- router_bench: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm), nproc $(nproc) -->"
exec "$build/loadtest/router_bench/router_bench" "$@"
