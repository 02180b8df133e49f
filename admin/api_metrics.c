/*
 * api_metrics.c - GET /metrics: Prometheus text for routes, request
 * latencies, limits and retries, upstream health and TLS, read from the
 * live snapshot and the gateway's counters on the admin thread.
 */
#define _POSIX_C_SOURCE 200809L /* admin/clock.h, through api_int.h */
#include "admin/api_int.h"
#include "admin/fleet_sync.h"
#include "admin/http1/coding.h"
#include "admin/jwks_remote.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

/* The upper bounds of the duration histograms: the gateway's workers count
 * into them (gateway.h), /metrics prints them. */
const double adm_hist_bounds[ADM_HIST_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};

struct route_metrics {
    struct evbuffer *b;
};

static void route_metric(const rt_route *r, void *arg)
{
    struct route_metrics *rm = arg;
    const struct adm_sroute *sr = rt_route_udata(r);

    for (int cls = 1; cls <= 5; cls++) {
        uint64_t n = 0;
        for (unsigned w = 0; w < sr->nworkers; w++)
            n += atomic_load_explicit(&sr->ctr[w].status[cls], memory_order_relaxed);
        if (n)
            evbuffer_add_printf(
                rm->b, "switchyard_route_requests_total{route=\"%s\",code=\"%dxx\"} %llu\n", sr->id,
                cls, (unsigned long long)n);
    }
}

static void histogram(struct evbuffer *b, const char *name, const char *help, const uint64_t *v,
                      double sum)
{
    uint64_t acc = 0;

    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < ADM_HIST_BUCKETS; i++) {
        acc += v[i];
        evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, adm_hist_bounds[i],
                            (unsigned long long)acc);
    }
    acc += v[ADM_HIST_BUCKETS];
    evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                        (unsigned long long)acc, name, sum, name, (unsigned long long)acc);
}

/* The HELP and TYPE lines of metric switchyard_upstream_<name>. */
static void upstream_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP switchyard_upstream_%s %s\n# TYPE switchyard_upstream_%s %s\n",
                        name, help, name, type);
}

/* The lines of the pools' retries and queues: one per pool, labelled
 * upstream="NAME" as the per-server lines are (config_upstreams.c allows
 * only letters, digits, '_', '.' and '-' in a name: nothing to escape).
 * The counts are per pool name (up_pool_count): they go on across a push
 * that changes the pool, and go with it when it is removed. */
static void limits_metrics(struct evbuffer *b, const struct adm_snapshot *s)
{
    static const struct {
        enum up_pool_counter k;
        const char *name, *type, *help;
    } m[] = {
        {UP_PC_RETRIES, "retries_total", "counter", "Tries sent again to another server."},
        {UP_PC_BUDGET_EXHAUSTED, "retry_budget_exhausted_total", "counter",
         "Retries the retry budget refused."},
        {UP_PC_QUEUED, "queue_length", "gauge",
         "Requests waiting for an upstream connection slot."},
        {UP_PC_QUEUE_OVERFLOWS, "queue_overflows_total", "counter",
         "Requests answered 503: the queue was full."},
        {UP_PC_QUEUE_TIMEOUTS, "queue_timeouts_total", "counter",
         "Requests answered 503 after queue_timeout_ms."},
    };

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        upstream_head(b, m[i].name, m[i].type, m[i].help);
        for (size_t j = 0; j < s->npools; j++)
            evbuffer_add_printf(b, "switchyard_upstream_%s{upstream=\"%s\"} %llu\n", m[i].name,
                                up_pool_name(s->pools[j]),
                                (unsigned long long)up_pool_counted(s->pools[j], m[i].k));
    }
}

/* Per rate_limit policy: requests allowed and limited, the keys its
 * table remembers now (at most its max_keys), and live keys evicted to
 * make room. */
static void policy_metrics(struct evbuffer *b, const struct adm_snapshot *s)
{
    static const char *const m[][3] = {
        {"allowed_total", "counter", "Requests a rate_limit policy let through."},
        {"limited_total", "counter", "Requests a rate_limit policy answered 429."},
        {"keys", "gauge", "Keys a rate_limit policy's table remembers (at most max_keys)."},
        {"evictions_total", "counter", "Live keys evicted to make room for new ones."},
    };
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        evbuffer_add_printf(
            b, "# HELP switchyard_rate_limit_%s %s\n# TYPE switchyard_rate_limit_%s %s\n", m[i][0],
            m[i][2], m[i][0], m[i][1]);
        for (size_t j = 0; j < s->npolicies; j++) {
            const struct adm_spolicy *p = s->policies[j];
            uint64_t v[4];
            if (p->type != ADM_POL_RATE_LIMIT)
                continue;
            adm_rl_counts(p->state, &v[0], &v[1], &v[3]);
            v[2] = i == 2 ? adm_rl_keys(p->state, now) : 0;
            evbuffer_add_printf(b, "switchyard_rate_limit_%s{policy=\"%s\"} %llu\n", m[i][0],
                                p->name, (unsigned long long)v[i]);
        }
    }
}

/* Per policy of every type: what its request phase did, let through
 * ("passed", always shown) or answered with a status (each shown once
 * seen): a rate limit's 429s, an authentication's 401s and 403s, a cors
 * policy's preflights. */
static void policy_results(struct evbuffer *b, const struct adm_snapshot *s)
{
    evbuffer_add_printf(b, "# HELP switchyard_policy_requests_total Requests a route policy let "
                           "through (result=\"passed\") or answered, by status.\n"
                           "# TYPE switchyard_policy_requests_total counter\n");
    for (size_t j = 0; j < s->npolicies; j++) {
        const struct adm_spolicy *p = s->policies[j];
        uint64_t v[ADM_POLR_N];
        adm_spolicy_counts(p, v);
        for (int i = 0; i < ADM_POLR_N; i++)
            if (i == ADM_POLR_PASSED || v[i])
                evbuffer_add_printf(
                    b,
                    "switchyard_policy_requests_total{policy=\"%s\",type=\"%s\",result=\"%s\"} "
                    "%llu\n",
                    p->name, adm_pol_kinds[p->type].name, adm_pol_result_names[i],
                    (unsigned long long)v[i]);
    }
}

/* Per compress policy: the responses it encoded, by coding, and the body
 * bytes it took in and gave out (their ratio: what it saves). */
static void compress_metrics(struct evbuffer *b, const struct adm_snapshot *s)
{
    static const char *const m[][2] = {
        {"responses_total", "Responses a compress policy encoded, by coding."},
        {"in_bytes_total", "Body bytes a compress policy took in (from the upstream)."},
        {"out_bytes_total", "Body bytes a compress policy gave out (encoded)."},
    };

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        evbuffer_add_printf(
            b, "# HELP switchyard_compress_%s %s\n# TYPE switchyard_compress_%s counter\n", m[i][0],
            m[i][1], m[i][0]);
        for (size_t j = 0; j < s->npolicies; j++) {
            const struct adm_spolicy *p = s->policies[j];
            uint64_t coded[H1_CODING_COUNT], in, out;
            if (p->type != ADM_POL_COMPRESS)
                continue;
            adm_spolicy_coded(p, coded, &in, &out);
            if (i == 0) {
                for (int c = H1_CODING_GZIP; c <= H1_CODING_ZSTD; c++)
                    evbuffer_add_printf(b,
                                        "switchyard_compress_responses_total{policy=\"%s\","
                                        "coding=\"%s\"} %llu\n",
                                        p->name, h1_codings[c].name, (unsigned long long)coded[c]);
            } else {
                evbuffer_add_printf(b, "switchyard_compress_%s{policy=\"%s\"} %llu\n", m[i][0],
                                    p->name, (unsigned long long)(i == 1 ? in : out));
            }
        }
    }
}

/* Per forward_auth policy: subrequests whose answer let the request
 * through, refused it (401, 403), failed (no server, a connect, a
 * status other than 2xx/401/403, a malformed answer: 503 or 500), or
 * ran out of timeout_ms. */
static void forward_auth_metrics(struct evbuffer *b, const struct adm_snapshot *s)
{
    static const char *const m[][2] = {
        {"allowed_total", "Requests a forward_auth policy's answer (2xx) let through."},
        {"denied_total", "Requests a forward_auth policy's answer (401, 403) refused."},
        {"errors_total", "forward_auth subrequests that failed (answered 503 or 500)."},
        {"timeouts_total", "forward_auth subrequests that ran out of timeout_ms (503)."},
    };

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        evbuffer_add_printf(
            b, "# HELP switchyard_forward_auth_%s %s\n# TYPE switchyard_forward_auth_%s counter\n",
            m[i][0], m[i][1], m[i][0]);
        for (size_t j = 0; j < s->npolicies; j++) {
            const struct adm_spolicy *p = s->policies[j];
            uint64_t v[4];
            if (p->type != ADM_POL_FORWARD_AUTH)
                continue;
            adm_fa_counts(p->state, v);
            evbuffer_add_printf(b, "switchyard_forward_auth_%s{policy=\"%s\"} %llu\n", m[i][0],
                                p->name, (unsigned long long)v[i]);
        }
    }
}

/* One line per upstream server: <name>, whose value <get> reads. */
static void per_server(struct evbuffer *b, const struct adm_snapshot *s, const char *name,
                       const char *type, const char *help, uint64_t (*get)(const up_pool *, size_t))
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (size_t i = 0; i < s->npools; i++)
        for (size_t k = 0; k < up_pool_nservers(s->pools[i]); k++)
            evbuffer_add_printf(b, "%s{upstream=\"%s\",server=\"%s\"} %llu\n", name,
                                up_pool_name(s->pools[i]), up_server_address(s->pools[i], k),
                                (unsigned long long)get(s->pools[i], k));
}

/* The traffic lines of /metrics per upstream server: requests sent, in
 * flight now, and the tries that failed, by kind (up_failure_name). */
static void server_metrics(struct evbuffer *b, const struct adm_snapshot *s)
{
    per_server(b, s, "switchyard_upstream_requests_total", "counter",
               "Requests sent per upstream server.", up_requests);
    per_server(b, s, "switchyard_upstream_in_flight", "gauge",
               "Requests on an upstream server now.", up_inflight);
    evbuffer_add_printf(b, "# HELP switchyard_upstream_failures_total Tries on an upstream server "
                           "that failed, by kind.\n"
                           "# TYPE switchyard_upstream_failures_total counter\n");
    for (size_t i = 0; i < s->npools; i++)
        for (size_t k = 0; k < up_pool_nservers(s->pools[i]); k++)
            for (unsigned f = 0; f < UP_NFAILURES; f++)
                evbuffer_add_printf(b,
                                    "switchyard_upstream_failures_total{upstream=\"%s\",server="
                                    "\"%s\",kind=\"%s\"} %llu\n",
                                    up_pool_name(s->pools[i]), up_server_address(s->pools[i], k),
                                    up_failure_name(f),
                                    (unsigned long long)up_failures(s->pools[i], k, f));
}

/* The values of the health lines, per server: of server <k> of <p>, given
 * what the health thread knows of it (<h>)... */
static uint64_t server_healthy(const up_pool *p, size_t k, const struct adm_srv_health *h)
{
    (void)h;
    return up_health_flags(p, k) == 0;
}

static uint64_t server_ejections(const up_pool *p, size_t k, const struct adm_srv_health *h)
{
    (void)p;
    (void)k;
    return h->ejections;
}

static uint64_t server_check_failures(const up_pool *p, size_t k, const struct adm_srv_health *h)
{
    (void)p;
    (void)k;
    return h->check_failures;
}

/* ... and per pool: of <p>, given what the health thread knows of it. */
static uint64_t pool_all_down(const up_pool *p, const struct adm_srv_health *h)
{
    (void)p;
    return h->all_down;
}

static uint64_t pool_panic(const up_pool *p, const struct adm_srv_health *h)
{
    (void)h;
    return (uint64_t)up_pool_panicking(p);
}

/* The health lines of /metrics: per server up or down, ejections and
 * failed checks, per pool the times every server went down and whether it
 * is in panic now; what the health thread knows read through the API's
 * hook (adm_api_srv_health). */
static void health_metrics(const struct adm_api *api, struct evbuffer *b,
                           const struct adm_snapshot *s)
{
    static const struct {
        const char *name, *type, *help;
        uint64_t (*get)(const up_pool *p, size_t k, const struct adm_srv_health *h);
        int asks; /* reads what the health thread knows: ask it (under its lock) */
    } srv[] = {
        {"server_healthy", "gauge", "1 when the server takes requests.", server_healthy, 0},
        {"ejections_total", "counter", "Ejections by outlier detection.", server_ejections, 1},
        {"health_check_failures_total", "counter", "Failed active checks.", server_check_failures,
         1},
    };
    static const struct {
        const char *name, *type, *help;
        uint64_t (*get)(const up_pool *p, const struct adm_srv_health *h);
    } pool[] = {
        {"all_down_total", "counter", "Times every server of a pool was down.", pool_all_down},
        {"panic", "gauge",
         "1 while every server is down and the pool spreads over them all (panic).", pool_panic},
    };
    struct adm_srv_health h;

    for (size_t i = 0; i < sizeof(srv) / sizeof(srv[0]); i++) {
        upstream_head(b, srv[i].name, srv[i].type, srv[i].help);
        for (size_t j = 0; j < s->npools; j++)
            for (size_t k = 0; k < up_pool_nservers(s->pools[j]); k++) {
                if (srv[i].asks)
                    adm_api_srv_health(api, s->pools[j], k, &h);
                evbuffer_add_printf(
                    b, "switchyard_upstream_%s{upstream=\"%s\",server=\"%s\"} %llu\n", srv[i].name,
                    up_pool_name(s->pools[j]), up_server_address(s->pools[j], k),
                    (unsigned long long)srv[i].get(s->pools[j], k, &h));
            }
    }
    for (size_t i = 0; i < sizeof(pool) / sizeof(pool[0]); i++) {
        upstream_head(b, pool[i].name, pool[i].type, pool[i].help);
        for (size_t j = 0; j < s->npools; j++) {
            adm_api_srv_health(api, s->pools[j], UP_NONE, &h);
            evbuffer_add_printf(b, "switchyard_upstream_%s{upstream=\"%s\"} %llu\n", pool[i].name,
                                up_pool_name(s->pools[j]),
                                (unsigned long long)pool[i].get(s->pools[j], &h));
        }
    }
}

void adm_api_metrics(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct adm_snapshot *s = current(api);
    struct evbuffer *b = evbuffer_new();
    struct adm_gw_stats gs;
    struct route_metrics rm = {b};

    (void)unused;
    if (!b) {
        adm_api_send_oom(req);
        return;
    }
    memset(&gs, 0, sizeof(gs));
    if (api->hooks.stats)
        api->hooks.stats(api->hooks.arg, &gs);
    evbuffer_add_printf(b, "# HELP switchyard_requests_total Requests answered, by status class.\n"
                           "# TYPE switchyard_requests_total counter\n");
    for (int cls = 1; cls <= 5; cls++)
        evbuffer_add_printf(b, "switchyard_requests_total{code=\"%dxx\"} %llu\n", cls,
                            (unsigned long long)gs.status[cls]);
    evbuffer_add_printf(b, "# HELP switchyard_requests_by_protocol_total Requests answered, by "
                           "the protocol they came in on.\n"
                           "# TYPE switchyard_requests_by_protocol_total counter\n");
    for (int p = 0; p < ADM_NPROTOS; p++)
        evbuffer_add_printf(b, "switchyard_requests_by_protocol_total{protocol=\"%s\"} %llu\n",
                            (const char *[]){"h1", "h2", "h2c"}[p],
                            (unsigned long long)gs.requests_proto[p]);
    evbuffer_add_printf(b, "# HELP switchyard_grpc_responses_total gRPC requests answered, by "
                           "grpc-status: Switchyard's own answers, and an upstream's whose status "
                           "was in its response head or trailers.\n"
                           "# TYPE switchyard_grpc_responses_total counter\n");
    for (int g = 0; g < ADM_GRPC_NCODES; g++)
        evbuffer_add_printf(b, "switchyard_grpc_responses_total{code=\"%d\"} %llu\n", g,
                            (unsigned long long)gs.grpc[g]);
    evbuffer_add_printf(
        b, "# HELP switchyard_route_requests_total Requests by route and status class.\n"
           "# TYPE switchyard_route_requests_total counter\n");
    rt_table_foreach(s->rt, route_metric, &rm);
    histogram(b, "switchyard_request_duration_seconds",
              "Time from the request head to the end of the response.", gs.dur, gs.dur_sum);
    histogram(b, "switchyard_upstream_response_seconds",
              "Time from sending a request upstream to its response head.", gs.up, gs.up_sum);
    evbuffer_add_printf(
        b,
        "# HELP switchyard_connections_open Client connections open.\n"
        "# TYPE switchyard_connections_open gauge\nswitchyard_connections_open %llu\n"
        "# HELP switchyard_connections_total Client connections accepted.\n"
        "# TYPE switchyard_connections_total counter\nswitchyard_connections_total %llu\n"
        "# HELP switchyard_connections_dropped_total Connections refused for memory or limits.\n"
        "# TYPE switchyard_connections_dropped_total counter\nswitchyard_connections_dropped_total "
        "%llu\n"
        "# HELP switchyard_connections_reclaimed_total Connections closed to admit new ones: idle "
        "keep-alive ones at limits.max_connections, ones without a whole first request head at "
        "limits.max_pending_connections.\n"
        "# TYPE switchyard_connections_reclaimed_total counter\n"
        "switchyard_connections_reclaimed_total{reason=\"idle\"} %llu\n"
        "switchyard_connections_reclaimed_total{reason=\"pending\"} %llu\n"
        "# HELP switchyard_received_bytes_total Bytes received from clients.\n"
        "# TYPE switchyard_received_bytes_total counter\nswitchyard_received_bytes_total %llu\n"
        "# HELP switchyard_sent_bytes_total Bytes sent to clients.\n"
        "# TYPE switchyard_sent_bytes_total counter\nswitchyard_sent_bytes_total %llu\n"
        "# HELP switchyard_upstream_errors_total Upstream failures answered 5xx or cut off.\n"
        "# TYPE switchyard_upstream_errors_total counter\nswitchyard_upstream_errors_total %llu\n"
        "# HELP switchyard_access_log_dropped_lines_total Access-log lines lost (failed writes, "
        "a full disk).\n"
        "# TYPE switchyard_access_log_dropped_lines_total counter\n"
        "switchyard_access_log_dropped_lines_total %llu\n"
        "# HELP switchyard_config_swaps_total Snapshots swapped in after the first.\n"
        "# TYPE switchyard_config_swaps_total counter\nswitchyard_config_swaps_total %llu\n"
        "# HELP switchyard_config_generation Generation of the live config.\n"
        "# TYPE switchyard_config_generation gauge\nswitchyard_config_generation %llu\n"
        "# HELP switchyard_config_build_seconds Build time of the live snapshot.\n"
        "# TYPE switchyard_config_build_seconds gauge\nswitchyard_config_build_seconds %.6f\n"
        "# HELP switchyard_routes Routes in the live config.\n"
        "# TYPE switchyard_routes gauge\nswitchyard_routes %zu\n"
        "# HELP switchyard_state_write_failures_total Writes to admin.state_dir that failed "
        "(a refused change, or a start that could not save).\n"
        "# TYPE switchyard_state_write_failures_total counter\n"
        "switchyard_state_write_failures_total %llu\n"
        "# HELP switchyard_state_write_failing 1 while the last write to admin.state_dir "
        "failed.\n"
        "# TYPE switchyard_state_write_failing gauge\nswitchyard_state_write_failing %d\n",
        (unsigned long long)gs.conns_open, (unsigned long long)gs.conns_total,
        (unsigned long long)gs.conns_dropped, (unsigned long long)gs.conns_reclaimed[0],
        (unsigned long long)gs.conns_reclaimed[1], (unsigned long long)gs.bytes_in,
        (unsigned long long)gs.bytes_out, (unsigned long long)gs.upstream_errors,
        (unsigned long long)gs.access_log_dropped, (unsigned long long)api->sw->swaps,
        (unsigned long long)s->gen, s->build_ms / 1000.0, rt_table_count(s->rt),
        (unsigned long long)api->st->persist_failures, api->st->persist_failing);
    server_metrics(b, s);
    limits_metrics(b, s);
    policy_metrics(b, s);
    forward_auth_metrics(b, s);
    policy_results(b, s);
    compress_metrics(b, s);
    adm_rjwks_metrics(b);
    health_metrics(api, b, s);
    adm_tls_metrics(b, s->cfg, &gs);
    if (api->pipe->fleet)
        adm_fleet_sync_metrics(api->pipe->fleet, b);
    evhttp_add_header(adm_req_out(req), "Content-Type", "text/plain; version=0.0.4");
    adm_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
