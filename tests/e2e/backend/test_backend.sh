#!/bin/sh
# test_backend.sh - self-test of sy_test_backend with curl and python3.
#
# Usage: test_backend.sh /path/to/sy_test_backend
#
# Starts the backend on port 0, checks the echo JSON, generated bodies,
# HEAD, keep-alive, /__stats, large streamed uploads, then hands the
# raw-socket and WebSocket checks to test_backend_raw.py, and finally checks
# that SIGTERM exits 0. Also runs a short round with --threads 2. Every curl
# has a timeout; the whole run takes a few seconds.
set -u

BIN=${1:?usage: test_backend.sh /path/to/sy_test_backend}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
PID=
FAILED=0
CURL="curl -s -m 10"

cleanup() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null
        wait "$PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

ok() { echo "ok   $1"; }
fail() {
    echo "FAIL $1"
    FAILED=$((FAILED + 1))
}
# expect NAME ACTUAL WANTED
expect() {
    if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi
}
# jcheck NAME JSON PYTHON-EXPR-ON-j: queued, evaluated by jflush in one
# python3 run (starting python per check is slow on a loaded machine).
jcheck() {
    printf '%s\n%s\n%s\n' "$1" "$3" "$(printf '%s' "$2" | tr -d '\n')" >>"$TMP/jchecks"
}
jflush() {
    [ -s "$TMP/jchecks" ] || return 0
    python3 - "$TMP/jchecks" >"$TMP/jout" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n")
for i in range(0, len(lines) - 2, 3):
    name, expr, text = lines[i:i + 3]
    try:
        good = bool(eval(expr, {"j": json.loads(text)}))
    except Exception as e:
        good, text = False, "%s (%r)" % (text, e)
    print(("ok   " if good else "FAIL ") + name + ("" if good else ": " + expr + " on " + text[:500]))
PY
    cat "$TMP/jout"
    FAILED=$((FAILED + $(grep -c '^FAIL' "$TMP/jout")))
    rm -f "$TMP/jchecks"
}
# num_ge NAME ACTUAL MIN (decimals allowed)
num_ge() {
    if awk -v a="$2" -v m="$3" 'BEGIN { exit !(a + 0 >= m + 0) }'; then ok "$1"; else fail "$1: $2 < $3"; fi
}

# start NAME [ARGS...]: run the backend on port 0, wait for its port file.
start() {
    name=$1
    shift
    "$BIN" --listen 127.0.0.1:0 --name "$name" --port-file "$TMP/port" "$@" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    i=0
    while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    PORT=$(cat "$TMP/port" 2>/dev/null)
    [ -n "$PORT" ] || { echo "FAIL backend did not start: $(cat "$TMP/err")"; exit 1; }
    sleep 0.05
    expect "prints its address" "$(cat "$TMP/out")" "listening 127.0.0.1:$PORT"
    URL="http://127.0.0.1:$PORT"
}

# stop: SIGTERM must exit 0 promptly.
stop() {
    kill -TERM "$PID"
    i=0
    while kill -0 "$PID" 2>/dev/null && [ $i -lt 100 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    if kill -0 "$PID" 2>/dev/null; then
        fail "SIGTERM did not stop the backend"
        kill -KILL "$PID"
    fi
    wait "$PID"
    expect "exit status after SIGTERM" "$?" 0
    PID=
    if [ -s "$TMP/err" ]; then
        fail "backend wrote to stderr:"
        cat "$TMP/err"
    fi
    rm -f "$TMP/port"
}

# Expected sha256 of the first N generated body bytes.
pattern_sha() {
    yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/ | tr -d '\n' |
        head -c "$1" | sha256sum | cut -d' ' -f1
}

start b1

# --- echo
J=$($CURL -X POST --data-binary hello -H 'X-First: 1' -H 'X-Second: two words' "$URL/a/b?x=1&y=%41")
jcheck "echo backend/method/target" "$J" \
    "j['backend']=='b1' and j['method']=='POST' and j['target']=='/a/b?x=1&y=%41'"
jcheck "echo path/query/version" "$J" "j['path']=='/a/b' and j['query']=='x=1&y=%41' and j['version']=='1.1'"
jcheck "echo headers in order" "$J" \
    "[h[0] for h in j['headers'] if h[0].startswith('X-')]==['X-First','X-Second'] and ['X-Second','two words'] in j['headers']"
jcheck "echo body" "$J" \
    "j['body_bytes']==5 and j['body_sha256']=='2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824' and j['body_framing']=='length'"
jcheck "echo conn fields" "$J" "isinstance(j['conn_id'],int) and j['conn_requests']==1"
CT=$($CURL -o /dev/null -w '%{content_type}' "$URL/")
expect "echo content type" "$CT" "application/json"

# --- generated bodies
expect "fixed size" "$($CURL -o /dev/null -w '%{size_download}' "$URL/f?mode=fixed&size=100000")" 100000
expect "fixed bytes" "$($CURL "$URL/f?mode=fixed&size=100000" | sha256sum | cut -d' ' -f1)" \
    "$(pattern_sha 100000)"
expect "fixed size 0" "$($CURL -o /dev/null -w '%{size_download}' "$URL/f?mode=fixed&size=0")" 0
expect "chunked size" "$($CURL -o /dev/null -w '%{size_download}' "$URL/c?mode=chunked&size=100000&chunk=999")" 100000
expect "chunked bytes" "$($CURL "$URL/c?mode=chunked&size=100000" | sha256sum | cut -d' ' -f1)" \
    "$(pattern_sha 100000)"
H=$($CURL -D - -o /dev/null "$URL/c?mode=chunked&size=10" | tr -d '\r' | grep -i '^transfer-encoding')
expect "chunked header" "$H" "Transfer-Encoding: chunked"
expect "close size" "$($CURL -o /dev/null -w '%{size_download}' "$URL/c?mode=close&size=12345")" 12345
expect "big fixed size" "$($CURL -m 30 -o /dev/null -w '%{size_download}' "$URL/f?mode=fixed&size=268435456")" 268435456

# --- HEAD
H=$($CURL -I "$URL/f?mode=fixed&size=5000" | tr -d '\r' | grep -i '^content-length')
expect "HEAD content-length" "$H" "Content-Length: 5000"
expect "HEAD no body" "$($CURL -I -o /dev/null -w '%{size_download}' "$URL/f?mode=fixed&size=5000")" 0

# --- status, delay, headers, bad query
expect "status" "$($CURL -o /dev/null -w '%{http_code}' "$URL/?mode=status&status=503")" 503
expect "status on echo" "$($CURL -o /dev/null -w '%{http_code}' "$URL/?status=404")" 404
T=$($CURL -o /dev/null -w '%{time_starttransfer}' "$URL/?delay_ms=300")
num_ge "delay_ms (${T}s)" "$T" 0.3
H=$($CURL -D - -o /dev/null "$URL/?mode=headers&h=X-Foo:bar%20baz&h=Keep-Alive:timeout%3D5" | tr -d '\r' | grep -E '^(X-Foo|Keep-Alive):' | tr '\n' '|')
expect "response headers from h=" "$H" "X-Foo: bar baz|Keep-Alive: timeout=5|"
expect "bad query -> 400" "$($CURL -o /dev/null -w '%{http_code}' "$URL/?mode=nope")" 400

# --- keep-alive: two URLs in one curl reuse the connection
OUT=$($CURL "$URL/one" "$URL/two")
jcheck "keep-alive conn_requests" "[$(printf '%s\n' "$OUT" | grep . | paste -sd, -)]" \
    "len(j)==2 and j[1]['conn_requests']==2 and j[0]['conn_id']==j[1]['conn_id']"

# --- streamed uploads: chunked and Content-Length, 64 MiB each
SHA=$(head -c 67108864 /dev/zero | sha256sum | cut -d' ' -f1)
J=$(head -c 67108864 /dev/zero | $CURL -m 30 -T - -H 'Expect:' "$URL/up")
jcheck "chunked upload" "$J" "j['body_bytes']==67108864 and j['body_sha256']=='$SHA' and j['body_framing']=='chunked'"
head -c 67108864 /dev/zero >"$TMP/upload"
J=$($CURL -m 30 --data-binary @"$TMP/upload" "$URL/up")
jcheck "content-length upload with Expect" "$J" \
    "j['body_bytes']==67108864 and j['body_sha256']=='$SHA' and ['Expect','100-continue'] in j['headers']"
rm -f "$TMP/upload"
RSS=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
if ldd "$BIN" 2>/dev/null | grep -qE 'lib(a|t)san'; then
    echo "skip memory stayed flat (sanitizer build: its allocator quarantine dominates RSS)"
else
    if [ "$RSS" -lt 65536 ]; then ok "memory stayed flat (peak RSS $RSS kB)"; else fail "peak RSS $RSS kB"; fi
fi

# --- /__stats
$CURL -o /dev/null "$URL/__reset"
jcheck "stats after reset" "$($CURL "$URL/__stats")" \
    "j['connections']==0 and j['requests']==0 and j['bytes_in']==0"
$CURL -o /dev/null -o /dev/null "$URL/s1" "$URL/s2"
$CURL -o /dev/null "$URL/s3"
sleep 0.1
jcheck "stats counting" "$($CURL "$URL/__stats")" \
    "j['connections']==2 and j['requests']==3 and j['bytes_in']>0 and j['open']==0"

# --- WebSocket handshake with curl (RFC 6455 section 1.3 sample key); curl
# stops reading after the 101 head, so -m bounds it.
H=$(curl -s -m 2 -i -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
    -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Version: 13' "$URL/ws" |
    tr -d '\r' | grep -i '^sec-websocket-accept')
expect "ws handshake accept" "$H" "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

jflush

# --- raw sockets and WebSocket
if python3 "$HERE/test_backend_raw.py" "$PORT"; then ok "raw-socket checks"; else fail "raw-socket checks"; fi

stop

# --- a short round with two worker threads
start b2 --threads 2
$CURL -o /dev/null "$URL/__reset"
for i in 1 2 3 4 5 6; do $CURL -o /dev/null "$URL/t$i"; done
sleep 0.1
jcheck "threads: stats" "$($CURL "$URL/__stats")" "j['connections']==6 and j['requests']==6 and j['open']==0"
jflush
expect "threads: fixed size" "$($CURL -o /dev/null -w '%{size_download}' "$URL/f?mode=fixed&size=777777")" 777777
stop

# --- refuses anything but loopback
if "$BIN" --listen 0.0.0.0:0 >/dev/null 2>&1; then fail "binds 0.0.0.0"; else ok "refuses 0.0.0.0"; fi

if [ "$FAILED" -ne 0 ]; then
    echo "$FAILED check(s) failed"
    exit 1
fi
echo "all checks passed"
