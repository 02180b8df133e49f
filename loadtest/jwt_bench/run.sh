#!/bin/sh
# loadtest/jwt_bench/run.sh - instructions per JWT verification, per
# algorithm, counted by callgrind (deterministic, unlike time on a shared
# machine), then the wall-clock table of jwt_bench itself. Markdown on stdout.
#   loadtest/jwt_bench/run.sh [BUILD_DIR]   (default: build; RelWithDebInfo or Release)
# Each count: N verifications between callgrind's collection toggles, after
# a warm-up one, divided by N; the median of 3 runs.
set -eu
build=${1:-build}
bench=$build/loadtest/jwt_bench/jwt_bench
[ -x "$bench" ] || { echo "no $bench: cmake --build $build --target jwt_bench" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# count WHAT N: the median over 3 runs of instructions per operation
count() {
  for r in 1 2 3; do
    valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$tmp/cg.$r" \
      "$bench" -a "$1" -n "$2" >/dev/null 2>&1
    awk -v n="$2" '/^totals:/ { printf "%d\n", $2 / n }' "$tmp/cg.$r"
  done | sort -n | sed -n 2p
}

echo "<!-- jwt_bench: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm), nproc $(nproc), $(openssl version) -->"
echo "## JWT verification cost"
echo
echo "| what | instructions / op (callgrind, median of 3) |"
echo "|---|---:|"
for a in RS256 RS384 RS512 PS256 ES256 ES384 EdDSA HS256; do
  case $a in ES384) n=20 ;; ES256|EdDSA) n=50 ;; *) n=200 ;; esac
  echo "| $a verify | $(count $a $n) |"
done
echo "| cache hit (adm_jwt_verify_cached), RS256 token | $(count RS256:cache 2000) |"
echo "| cache hit, no claims back (the jwt policy's call), RS256 token | $(count RS256:cache-clock 2000) |"
echo "| claims only (no signature), RS256 token | $(count RS256:claims 2000) |"
echo
echo "Wall clock (shared machine, load average $(cut -d' ' -f1 /proc/loadavg)):"
echo
"$bench" -r 7
