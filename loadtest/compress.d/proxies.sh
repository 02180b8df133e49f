# proxies.sh - sourced by loadtest/compress (E2E=1): the same bodies served
# by one upstream (nginx, static, gzip off, on $CLIENT_CPU), proxied by
# Switchyard (workers 1, a route with a compress policy of gzip only at
# $LEVEL) and by nginx (proxy_pass with upstream keepalive, gzip on,
# gzip_comp_level $LEVEL), each pinned to $SERVER_CPU, each also without
# compression; wrk as for nginx's static row. Appends its table to $OUT.
# Uses compress's TMP, PIDS, BUILD, ROUNDS, DUR, CONNS, LEVEL, log, median,
# cpu_run.

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_up() {
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/body.json" && return
        sleep 0.1
    done
    log "nothing answers on port $1"
    exit 1
}

# <name> <port> <pid>: the ratio and the CPU median of a running proxy,
# into E_RATIO and E_MED [<name>.<file>]; a compressing one's answers must
# decode to the body.
proxy_measure() {
    local name=$1 port=$2 pid=$3 f got
    for f in body.json body.html; do
        got=$(curl -s -H 'Accept-Encoding: gzip' -o "$TMP/got.$name.$f" -w '%{size_download}' \
            "http://127.0.0.1:$port/$f")
        E_RATIO[$name.$f]=$(awk -v g="$got" -v s="$(stat -c %s "$TMP/www/$f")" \
            'BEGIN {printf "%.3f", g / s}')
        if [ "${name%.on}" != "$name" ]; then
            gzip -dc "$TMP/got.$name.$f" | cmp -s - "$TMP/www/$f" ||
                { log "$name's gzip of $f does not decode"; exit 1; }
        fi
        cpu_run "$pid" "$port" "$f" >/dev/null # warm-up
        for _ in $(seq "$ROUNDS"); do cpu_run "$pid" "$port" "$f"; done >"$TMP/e2e.$name.$f"
        E_MED[$name.$f]=$(median <"$TMP/e2e.$name.$f")
    done
}

run_proxy() { # <name> <port> <command...>: measured while it runs on $SERVER_CPU
    local name=$1 port=$2 pid
    shift 2
    taskset -c "$SERVER_CPU" "$@" 2>"$TMP/$name.log" &
    pid=$!
    PIDS+=("$pid")
    wait_up "$port"
    proxy_measure "$name" "$port" "$pid"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

nginx_main() { # <dir>: the start of a one-process nginx's config, into http {
    cat <<CONF
daemon off;
master_process off;
worker_processes 1;
error_log $1/error.log warn;
pid $1/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
CONF
}

nginx_proxy_conf() { # <gzip on|off> <port> <upstream port>
    nginx_main "$TMP/px"
    cat <<CONF
    upstream u { server 127.0.0.1:$3; keepalive 32; }
    gzip $1;
    gzip_comp_level $LEVEL;
    gzip_types application/json;
    gzip_min_length 1024;
    server {
        listen 127.0.0.1:$2;
        location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
CONF
}

switchyard_conf() { # <gzip on|off> <port> <upstream port> <admin port>
    local pol='"policies": ["gz"],'
    [ "$1" = on ] || pol=''
    cat <<CONF
{"workers": 1, "access_log": "off", "log_level": "warn",
 "listeners": [{"address": "127.0.0.1:$2"}],
 "admin": {"address": "127.0.0.1:$4"},
 "upstreams": {"u": {"servers": [{"address": "127.0.0.1:$3"}]}},
 "policies": {"gz": {"type": "compress", "encodings": ["gzip"],
                     "types": ["text/html", "application/json"], "min_length": 1024,
                     "levels": {"gzip": $LEVEL}}},
 "routes": [{"id": "all", "path": "/*{rest}", "upstream": "u", $pol "methods": ["GET"]}]}
CONF
}

declare -A E_MED E_RATIO
mkdir -p "$TMP/up/logs" "$TMP/px/logs"
uport=$(free_port)
{
    nginx_main "$TMP/up"
    cat <<CONF
    types { text/html html; application/json json; }
    sendfile on;
    server { listen 127.0.0.1:$uport; root $TMP/www; }
}
CONF
} >"$TMP/up.conf"
taskset -c "$CLIENT_CPU" nginx -e "$TMP/up/error.log" -c "$TMP/up.conf" -p "$TMP/up/" &
PIDS+=("$!")
wait_up "$uport"
for gz in on off; do
    port=$(free_port)
    nginx_proxy_conf "$gz" "$port" "$uport" >"$TMP/px.conf"
    run_proxy "nginx.$gz" "$port" nginx -e "$TMP/px/error.log" -c "$TMP/px.conf" -p "$TMP/px/"
    port=$(free_port)
    switchyard_conf "$gz" "$port" "$uport" "$(free_port)" >"$TMP/sy.json"
    run_proxy "switchyard.$gz" "$port" "$BUILD/gateway/switchyard" -c "$TMP/sy.json"
done
{
    echo
    echo "## Through a proxy (same upstream, gzip level $LEVEL, wrk -c$CONNS ${DUR}s, medians of $ROUNDS)"
    echo
    echo "The proxy's CPU time (all its threads) per MB of body, with and without gzip, and the"
    echo "ratio a client got. Switchyard: one worker, a compress policy of gzip only; nginx:"
    echo "proxy_pass with upstream keepalive, gzip on. Both pinned to CPU $SERVER_CPU; the"
    echo "upstream (nginx, static files) and wrk on CPU $CLIENT_CPU."
    echo
    echo "| body | proxy | gzip on: CPU ms/MB | gzip off: CPU ms/MB | gzip's cost ms/MB | ratio (on) |"
    echo "|---|---|---:|---:|---:|---:|"
    for f in body.json body.html; do
        for p in switchyard nginx; do
            awk -v f="$f" -v p="$p" -v on="${E_MED[$p.on.$f]}" -v off="${E_MED[$p.off.$f]}" \
                -v r="${E_RATIO[$p.on.$f]}" \
                'BEGIN {printf "| %s | %s | %.2f | %.2f | %.2f | %s |\n", f, p, on, off, on - off, r}'
        done
    done
} >>"$OUT"
