/*
 * api.c - the admin HTTP API.
 *
 *   GET  /                       an index of the endpoints
 *   GET  /config                 the live config (ETag); PUT replaces it
 *                                (If-Match, ?dry_run=1)
 *   GET  /routes, POST /routes   list, add one
 *   GET|PUT|DELETE /routes/{id}
 *   GET  /routes/match?method=&host=&path=   which route a request hits
 *   GET  /upstreams, POST /upstreams, GET|PUT|DELETE /upstreams/{name}
 *   GET  /upstreams/{name}/health
 *   GET  /status, /healthz, /metrics
 *   POST /rollout/promote, /rollout/abort   a staged rollout (?canary=P on
 *                                a write: api_rollout.c), by hand
 *
 * Every request's head is checked before its body is read (Host, Origin,
 * the bearer token, Content-Type: api_guard.c). The handlers of
 * /routes..., /metrics and /upstreams... live in api_routes.c,
 * api_metrics.c and api_upstreams.c; a whole config (PUT /config, the
 * /upstreams writes) is answered by api_apply.c and applied by the admin
 * thread's pipeline (admin/pipeline.c), reading and checking query strings
 * is api_query.c (api_int.h: what they share with this file).
 *
 * The endpoints are one table of (methods, pattern, handler), routed by
 * Switchyard's own router: the most specific pattern wins (/routes/match
 * before /routes/{id}), and a method a path does not serve is a 405 with
 * the path's methods in Allow.
 *
 * The API is strict, like its config parser: a query parameter an endpoint
 * does not take is a 400 naming it, and a flag takes 1, true, 0 or false
 * only, so that a misspelled ?dry_run never applies a config live. Every
 * accepted change is one audit line (the hooks' audit): who, what, and the
 * generations before and after; and every accepted write answers in one
 * shape (adm_api_reply_written): whether the config changed, what was
 * written, what it changed, and the generation and ETag now live.
 *
 * Everything runs on the admin thread, so writes are serialized: of two
 * writers with the same If-Match, the second gets 412.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api.h"
#include "admin/api_int.h"
#include "admin/fleet_sync.h"
#include "admin/http.h"
#include "admin/http1/path.h"
#include "admin/http1/status.h"
#include "admin/tls.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/* What a client may make the admin thread hold (admin/http.h): one body
 * of 64 MiB (a 10k-route config is about 2 MiB), two of them at once, and
 * 64 connections: the API serves one request at a time, so more only
 * wait. */
static const struct adm_http_limits http_limits = {
    .max_body = 64u << 20,
    .max_bodies = 128u << 20,
    .max_conns = 64,
};

/* "<generation>-<hash>"; on a fleet node "-r<revision>" too: the etcd
 * revision the config was composed at, which If-Match on a route or
 * upstream write turns into a compare on the key (adm_api_if_match_ok). */
static void etag_of(struct adm_api *api, char *buf, size_t cap)
{
    if (api->pipe->fleet)
        snprintf(buf, cap, "\"%llu-%016llx-r%lld\"", (unsigned long long)current(api)->gen,
                 (unsigned long long)adm_state_hash(api->st),
                 (long long)adm_fleet_sync_revision(api->pipe->fleet));
    else
        snprintf(buf, cap, "\"%llu-%016llx\"", (unsigned long long)current(api)->gen,
                 (unsigned long long)adm_state_hash(api->st));
}

/* 500 when an answer cannot even be built. */
void adm_api_send_oom(struct adm_req *req)
{
    adm_req_reply(req, 500, "Internal Server Error", NULL);
}

/* Sends <body> (stolen) as JSON; the ETag of the live config goes along,
 * except on 401 and 403: a caller without the token learns nothing of the
 * config, not even whether it changed. */
void adm_api_reply(struct adm_api *api, struct adm_req *req, int code, json_t *body)
{
    struct evbuffer *b = evbuffer_new();
    struct evkeyvalq *h = adm_req_out(req);
    char *s =
        body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
    char etag[64];

    json_decref(body);
    if (!b || !s) {
        free(s);
        if (b)
            evbuffer_free(b);
        adm_api_send_oom(req);
        return;
    }
    evbuffer_add(b, s, strlen(s));
    evbuffer_add(b, "\n", 1);
    free(s);
    evhttp_add_header(h, "Content-Type", "application/json");
    if (code != 401 && code != 403) {
        etag_of(api, etag, sizeof(etag));
        evhttp_add_header(h, "ETag", etag);
    }
    adm_req_reply(req, code, h1_status_reason(code), b);
    evbuffer_free(b);
}

void adm_api_reply_error(struct adm_api *api, struct adm_req *req, int code, const char *msg,
                         json_t *errors)
{
    json_t *o = json_pack("{s:s}", "error", msg);

    if (o && errors)
        json_object_set_new(o, "errors", errors);
    else
        json_decref(errors);
    adm_api_reply(api, req, code, o);
}

json_t *adm_api_one_error(const char *path, const char *fmt, ...)
{
    struct adm_errors e;
    json_t *list;
    va_list ap;

    adm_errors_init(&e);
    va_start(ap, fmt);
    adm_errors_vadd(&e, path, fmt, ap);
    va_end(ap);
    list = adm_errors_json(&e);
    adm_errors_clear(&e);
    return list;
}

void adm_api_reply_errs(struct adm_api *api, struct adm_req *req, int code, const char *msg,
                        struct adm_errors *errs)
{
    adm_api_reply_error(api, req, code, msg, adm_errors_json(errs));
}

json_t *adm_api_ms(double ms)
{
    /* 0.412 rather than 0.41200000047683716: nobody reads beyond the µs */
    return json_real(ms > 0 ? (double)(long long)(ms * 1000 + 0.5) / 1000 : 0);
}

/* {"added": n, "replaced": n, "removed": n} of <n>. */
static json_t *counts_json(const size_t n[3])
{
    return json_pack("{s:I,s:I,s:I}", "added", (json_int_t)n[ADM_ADDED], "replaced",
                     (json_int_t)n[ADM_REPLACED], "removed", (json_int_t)n[ADM_REMOVED]);
}

void adm_api_written_changes(json_t *o, struct adm_changes *ch)
{
    json_object_set_new(o, "changes",
                        json_pack("{s:o,s:o,s:o}", "routes", counts_json(ch->routes), "upstreams",
                                  counts_json(ch->upstreams), "settings",
                                  ch->settings ? ch->settings : json_array()));
    ch->settings = NULL;
}

void adm_api_reply_written(struct adm_api *api, struct adm_req *req, int code, int changed,
                           const char *what, const char *name, struct adm_changes *ch)
{
    char etag[64];
    struct adm_snapshot *s = current(api);
    struct adm_fleet_sync *fs = api->pipe->fleet;
    json_t *o = json_pack("{s:b,s:s}", "changed", changed, "what", what);

    etag_of(api, etag, sizeof(etag));
    if (o && name)
        json_object_set_new(o, strcmp(what, "route") == 0 ? "id" : "name", json_string(name));
    if (o) {
        adm_api_written_changes(o, ch);
        json_object_set_new(o, "generation", json_integer((json_int_t)s->gen));
        json_object_set_new(o, "etag", json_string(etag));
        json_object_set_new(o, "build_ms", adm_api_ms(s->build_ms));
        if (fs) {
            json_object_set_new(o, "revision",
                                json_integer((json_int_t)adm_fleet_sync_revision(fs)));
            if (strcmp(what, "config") == 0)
                json_object_set_new(
                    o, "fleet",
                    json_string(api->fleet_dropped
                                    ? "a fleet node: this push changed node-local keys only; its "
                                      "routes and upstreams were ignored (they live in etcd: "
                                      "write them through /routes and /upstreams)"
                                    : "a fleet node: this push changed node-local keys only"));
        }
    }
    adm_api_reply(api, req, code, o);
}

/* The request body as JSON; on failure the answer has been sent. */
json_t *adm_api_read_body(struct adm_api *api, struct adm_req *req)
{
    struct evbuffer *in = adm_req_body(req);
    size_t n = evbuffer_get_length(in);
    json_error_t je;
    json_t *j;
    const char *p = n ? (const char *)evbuffer_pullup(in, (ev_ssize_t)n) : "";

    if (adm_json_blank(p, n) == n) { /* named as such, not as jansson's "'[' or '{' expected" */
        char m[256];
        snprintf(m, sizeof(m), "%s %s takes a JSON object; the request body %s",
                 adm_req_method_name(req), adm_req_path(req),
                 n ? "has nothing but white space" : "is empty");
        adm_api_reply_error(api, req, 400, "empty request body",
                            json_pack("[{s:s,s:s}]", "path", "", "message", m));
        return NULL;
    }
    j = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        char m[256];
        snprintf(m, sizeof(m), "line %d, column %d: %s", je.line, je.column, je.text);
        adm_api_reply_error(api, req, 400, "malformed JSON",
                            json_pack("[{s:s,s:s}]", "path", "", "message", m));
    }
    return j;
}

/* 1 when the If-Match value <v> lists <etag>: RFC 9110 13.1.1, a list of
 * entity-tags compared strongly (a weak tag never matches). */
static int etag_listed(const char *v, const char *etag)
{
    size_t elen = strlen(etag);

    for (;;) {
        const char *q;
        int weak = 0;

        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        if (!*v)
            return 0;
        if (v[0] == 'W' && v[1] == '/') {
            weak = 1;
            v += 2;
        }
        if (*v != '"' || !(q = strchr(v + 1, '"')))
            return 0; /* not an entity-tag: nothing after it counts */
        if (!weak && (size_t)(q + 1 - v) == elen && memcmp(v, etag, elen) == 0)
            return 1;
        v = q + 1;
    }
}

/* The revision a fleet ETag in the If-Match value <v> names: its first
 * strong entity-tag ending in "-r<N>"; 0: none. */
static int64_t etag_revision(const char *v)
{
    const char *q, *r;

    while (*v == ' ' || *v == '\t' || *v == ',')
        v++;
    if (*v != '"' || !(q = strchr(v + 1, '"')))
        return 0;
    for (r = q; r > v && r[-1] >= '0' && r[-1] <= '9'; r--)
        ;
    if (r == q || r - v < 3 || r[-1] != 'r' || r[-2] != '-' || q - r > 18)
        return 0; /* 18 digits at most: the compare adds one */
    return strtoll(r, NULL, 10);
}

/* If-Match: absent, "*", or a list naming the live ETag (every field line
 * counts); otherwise 412, answered here. On a fleet node a route or
 * upstream write takes any ETag this API gave (it names a revision): etcd
 * then compares the key's mod_revision with it (api->if_rev). */
int adm_api_if_match_ok(struct adm_api *api, struct adm_req *req)
{
    struct evkeyvalq *h = adm_req_in(req);
    struct evkeyval *kv;
    char etag[64];
    int seen = 0;

    api->if_rev = 0;
    if (api->pipe->fleet && strncmp(adm_req_path(req), "/config", 7) != 0) {
        TAILQ_FOREACH(kv, h, next)
        {
            if (evutil_ascii_strcasecmp(kv->key, "If-Match") != 0)
                continue;
            if ((api->if_rev = etag_revision(kv->value)) > 0)
                return 1;
            seen = 1;
            if (kv->value[strspn(kv->value, " \t")] == '*')
                return 1;
        }
        if (!seen)
            return 1;
        adm_api_reply_error(api, req, 412, "If-Match names no revision of this fleet",
                            adm_api_one_error("", "send an ETag this API gave, like %s",
                                              (etag_of(api, etag, sizeof(etag)), etag)));
        return 0;
    }
    etag_of(api, etag, sizeof(etag));
    TAILQ_FOREACH(kv, h, next)
    {
        const char *v = kv->value;
        if (evutil_ascii_strcasecmp(kv->key, "If-Match") != 0)
            continue;
        seen = 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if ((v[0] == '*' && v[1 + strspn(v + 1, " \t")] == '\0') || etag_listed(v, etag))
            return 1;
    }
    if (!seen)
        return 1;
    adm_api_reply_error(api, req, 412, "If-Match does not match the live config's ETag",
                        json_pack("[{s:s,s:s}]", "path", "", "message", etag));
    return 0;
}

/* Logs one audit line for an accepted change of <req>: the client, the
 * method and path, the generation before (<before>) and after, and the
 * route id of a route change (<route>, NULL for others). */
void adm_api_audit(struct adm_api *api, struct adm_req *req, uint64_t before, const char *route)
{
    char line[1024];

    if (!api->hooks.audit)
        return;
    snprintf(line, sizeof(line), "audit: %s %s %s generation %llu -> %llu%s%s", adm_req_peer(req),
             adm_req_method_name(req), adm_req_path(req), (unsigned long long)before,
             (unsigned long long)current(api)->gen, route ? " route " : "", route ? route : "");
    api->hooks.audit(api->hooks.arg, line);
}

/* ---- /config ---- */

static void config_get(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct adm_state *st = api->st;
    struct adm_snapshot *s = current(api);
    struct evbuffer *b = NULL;
    char etag[64];

    (void)unused;
    if (api->pipe->fleet) { /* the node's document, encoded each time: it is small */
        json_t *doc = adm_fleet_sync_config(api->pipe->fleet);
        json_t *shown = doc ? adm_tls_redact(doc) : NULL;
        char *js = shown ? json_dumps(shown, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(doc);
        json_decref(shown);
        if (!js || !(b = evbuffer_new()) || evbuffer_add(b, js, strlen(js)) < 0 ||
            evbuffer_add(b, "\n", 1) < 0) {
            free(js);
            if (b)
                evbuffer_free(b);
            adm_api_send_oom(req);
            return;
        }
        free(js);
        goto send;
    }
    if (!st->canon || st->canon_gen != s->gen) {
        json_t *shown = adm_tls_redact(st->doc); /* never a private key */
        free(st->canon);
        st->canon = shown ? json_dumps(shown, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(shown);
        st->canon_len = st->canon ? strlen(st->canon) : 0;
        st->canon_gen = s->gen;
    }
    /* the bytes encoded once for this generation, copied: a reference
     * would outlive them when a slow reader is still being sent this
     * answer after the next change frees them */
    if (!st->canon || !(b = evbuffer_new()) || evbuffer_add(b, st->canon, st->canon_len) < 0 ||
        evbuffer_add(b, "\n", 1) < 0) { /* a JSON answer ends its line, as every other does */
        if (b)
            evbuffer_free(b);
        adm_api_send_oom(req);
        return;
    }
send:
    etag_of(api, etag, sizeof(etag));
    evhttp_add_header(adm_req_out(req), "Content-Type", "application/json");
    evhttp_add_header(adm_req_out(req), "ETag", etag);
    adm_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void config_put(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct evbuffer *in = adm_req_body(req);
    int dry = adm_api_query_flag(adm_req_query(req), "dry_run"), kept;
    struct adm_errors errs;
    json_t *doc;
    size_t n;

    (void)unused;
    if (dry < 0) {
        adm_api_send_oom(req); /* never a dry run applied for want of memory */
        return;
    }
    if (!adm_api_if_match_ok(api, req) || !(doc = adm_api_read_body(api, req)))
        return;
    /* GET /config's "[redacted]" keys: the live ones are kept */
    adm_errors_init(&errs);
    if ((kept = adm_tls_unredact(doc, api->st->doc, &errs)) < 0) {
        if (errs.n)
            adm_api_reply_errs(api, req, 400, "invalid config", &errs);
        else
            adm_api_send_oom(req);
        adm_errors_clear(&errs);
        json_decref(doc);
        return;
    }
    adm_errors_clear(&errs);
    /* the body as pushed: persisted as it came (as the keys restored into
     * it when it had markers: those bytes would not load again) */
    n = evbuffer_get_length(in);
    adm_api_apply_full(api, req, doc, dry, "config", NULL, 200,
                       kept ? NULL : (const char *)evbuffer_pullup(in, (ev_ssize_t)n),
                       kept ? 0 : n);
    json_decref(doc);
}

/* ---- status ---- */

static void handle_status(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct adm_snapshot *s = current(api);
    struct adm_fleet_sync *fs = api->pipe->fleet;
    struct adm_gw_stats gs;
    char etag[64];
    json_t *o;

    (void)unused;
    memset(&gs, 0, sizeof(gs));
    if (api->hooks.stats)
        api->hooks.stats(api->hooks.arg, &gs);
    etag_of(api, etag, sizeof(etag));
    o = json_pack("{s:I,s:s,s:I,s:i,s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:o*}", "generation",
                  (json_int_t)s->gen, "etag", etag, "uptime_s",
                  (json_int_t)(time(NULL) - api->started), "workers", (int)api->sw->nworkers,
                  "connections_open", (json_int_t)gs.conns_open, "requests",
                  (json_int_t)gs.requests, "swaps", (json_int_t)api->sw->swaps, "routes",
                  (json_int_t)rt_table_count(s->rt), "last_build_ms", adm_api_ms(s->build_ms),
                  "retired_snapshots", (json_int_t)api->sw->nretired, "upstreams",
                  (json_int_t)s->npools, "fleet", fs ? adm_fleet_sync_status(fs) : NULL);
    if (o)
        json_object_set_new(o, "rollout", adm_api_rollout_json(api));
    adm_api_reply(api, req, 200, o);
}

/* ---- health and certificates ---- */

static void certificates(struct adm_api *api, struct adm_req *req, const char *unused)
{
    (void)unused;
    adm_api_reply(api, req, 200, adm_tls_certificates_json(current(api)->cfg));
}

static void healthz(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct adm_snapshot *s = current(api);

    (void)unused;
    adm_api_reply(api, req, s ? 200 : 503, json_pack("{s:b}", "ok", s != NULL));
}

/* ---- dispatch ---- */

#define EP_OPEN 1u /* answered without the bearer token */

/* The query parameters of each endpoint, ended by a NULL name. */
static const struct qparam q_none[] = {{NULL, QP_TEXT}};
/* a write: ?dry_run=1 answers its impact only; ?canary=P and its options
 * start a staged rollout (api_rollout.c) */
static const struct qparam q_write[] = {
    {"dry_run", QP_FLAG},    {"canary", QP_TEXT},           {"canary_s", QP_TEXT},
    {"canary_key", QP_TEXT}, {"canary_threshold", QP_TEXT}, {"canary_min_requests", QP_TEXT},
    {NULL, QP_TEXT}};
static const struct qparam q_match[] = {
    {"method", QP_TEXT}, {"host", QP_TEXT}, {"path", QP_TEXT}, {NULL, QP_TEXT}};

/* The admin API. The router picks the most specific pattern (static
 * /routes/match beats /routes/{id}) and answers 405 with the path's methods
 * for every method a path does not serve. */
static void api_index(struct adm_api *api, struct adm_req *req, const char *unused);

static const struct endpoint endpoints[] = {
    {{"GET"}, "/", api_index, 0, NULL, q_none, "this index of the endpoints"},
    {{"GET"},
     "/healthz",
     healthz,
     EP_OPEN,
     NULL,
     q_none,
     "200 once a config is live (no token needed)"},
    {{"GET"}, "/config", config_get, 0, NULL, q_none, "the live config, with its ETag"},
    {{"PUT"},
     "/config",
     config_put,
     0,
     NULL,
     q_write,
     "replace the config (If-Match; ?dry_run=1 validates only; ?canary=P rolls it out)"},
    {{"GET"}, "/routes", adm_api_routes_list, 0, NULL, q_none, "every route"},
    {{"POST"},
     "/routes",
     adm_api_route_put,
     0,
     NULL,
     q_write,
     "add a route (409 when its id exists; ?dry_run=1 answers its impact only)"},
    {{"GET"},
     "/routes/match",
     adm_api_route_match,
     0,
     NULL,
     q_match,
     "which route a request would hit, and why"},
    {{"GET"}, "/routes/{id}", adm_api_route_get, 0, "no such route", q_none, "one route"},
    {{"PUT"},
     "/routes/{id}",
     adm_api_route_put,
     0,
     "no such route",
     q_write,
     "replace a route (404 when there is none; ?dry_run=1)"},
    {{"DELETE"},
     "/routes/{id}",
     adm_api_route_delete,
     0,
     "no such route",
     q_write,
     "delete a route (?dry_run=1)"},
    {{"GET"}, "/upstreams", adm_api_upstreams_list, 0, NULL, q_none, "every upstream pool"},
    {{"POST"},
     "/upstreams",
     adm_api_upstream_put,
     0,
     NULL,
     q_write,
     "add a pool, {\"name\": ..., \"servers\": ...} (409 when the name exists; ?dry_run=1)"},
    {{"GET"}, "/upstreams/{name}", adm_api_upstream_get, 0, "no such upstream", q_none, "one pool"},
    {{"PUT"},
     "/upstreams/{name}",
     adm_api_upstream_put,
     0,
     "no such upstream",
     q_write,
     "replace a pool (404 when there is none; ?dry_run=1)"},
    {{"DELETE"},
     "/upstreams/{name}",
     adm_api_upstream_delete,
     0,
     "no such upstream",
     q_write,
     "delete a pool no route uses (?dry_run=1)"},
    {{"GET"},
     "/upstreams/{name}/health",
     adm_api_upstream_health,
     0,
     "no such upstream",
     q_none,
     "a pool's servers as the balancer and the health checks see them"},
    {{"GET"},
     "/status",
     handle_status,
     0,
     NULL,
     q_none,
     "generation, uptime, connections, requests, swaps"},
    {{"GET"}, "/metrics", adm_api_metrics, 0, NULL, q_none, "Prometheus metrics"},
    {{"GET"}, "/certificates", certificates, 0, NULL, q_none, "every listener certificate"},
    {{"POST"},
     "/rollout/promote",
     adm_api_rollout_promote,
     0,
     NULL,
     q_none,
     "promote the running rollout's canary now (409 when none runs)"},
    {{"POST"},
     "/rollout/abort",
     adm_api_rollout_abort,
     0,
     NULL,
     q_none,
     "roll the running rollout back now (409 when none runs)"},
};

/* GET /: the endpoints, from the table that dispatches them, so that the
 * index never lists one that is not served (Envoy's admin home page). */
static void api_index(struct adm_api *api, struct adm_req *req, const char *unused)
{
    json_t *list = json_array();

    (void)unused;
    for (size_t i = 0; list && i < sizeof(endpoints) / sizeof(endpoints[0]); i++) {
        const struct endpoint *e = &endpoints[i];
        json_t *o = json_pack("{s:s,s:s,s:s}", "method", e->methods[0], "path", e->pattern, "does",
                              e->does);
        if (o && e->query[0].name) {
            json_t *q = json_array();
            for (const struct qparam *p = e->query; p->name; p++)
                json_array_append_new(q, json_string(p->name));
            json_object_set_new(o, "query", q);
        }
        json_array_append_new(list, o);
    }
    adm_api_reply(api, req, 200, json_pack("{s:o}", "endpoints", list));
}

/* The endpoints as a router table, each route's udata its endpoint. NULL
 * with <msg> filled on error. */
static rt_table *endpoints_table(char *msg, size_t cap)
{
    rt_table *t = rt_table_new(NULL, NULL);
    rt_txn *tx = t ? rt_txn_begin(t) : NULL;
    struct rt_error err;

    if (!tx)
        goto fail_oom;
    for (size_t i = 0; i < sizeof(endpoints) / sizeof(endpoints[0]); i++) {
        const struct endpoint *e = &endpoints[i];
        size_t nm = 0;
        while (nm < 4 && e->methods[nm])
            nm++;
        if (rt_txn_insert(tx, e->methods, nm, e->pattern, e->pattern, (void *)e, &err) < 0) {
            snprintf(msg, cap, "admin API: endpoint %s: %s", e->pattern, err.msg);
            rt_txn_abort(tx);
            rt_table_free(t);
            return NULL;
        }
    }
    rt_table *built = rt_txn_commit(tx);
    rt_table_free(t);
    if (!built)
        goto fail_oom;
    return built;
fail_oom:
    rt_table_free(t);
    snprintf(msg, cap, "admin API: out of memory");
    return NULL;
}

/* The endpoint <req> names, in <m> (its parameter in <param>); NULL when
 * none serves its method and path. */
static const struct endpoint *endpoint_of(struct adm_api *api, struct adm_req *req,
                                          struct rt_param *param, struct rt_match *m)
{
    const char *path = adm_req_path(req), *method = adm_req_method_name(req);

    rt_lookup(api->endpoints, method, strlen(method), NULL, 0, path, strlen(path), param, 1, m);
    return m->status == RT_HIT ? rt_route_udata(m->route) : NULL;
}

int adm_api_endpoint_open(struct adm_api *api, struct adm_req *req)
{
    struct rt_param param;
    struct rt_match m;
    const struct endpoint *e = endpoint_of(api, req, &param, &m);

    return e && (e->flags & EP_OPEN);
}

/* 405 with the path's methods in Allow (HEAD, served wherever GET is, left
 * out as before). */
static void not_allowed(struct adm_api *api, struct adm_req *req, uint64_t allow)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } names[] = {{RT_M_GET, "GET"},
                 {RT_M_POST, "POST"},
                 {RT_M_PUT, "PUT"},
                 {RT_M_DELETE, "DELETE"},
                 {RT_M_PATCH, "PATCH"}};
    char buf[64] = "";

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (allow & names[i].bit) {
            size_t o = strlen(buf);
            snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? ", " : "", names[i].name);
        }
    evhttp_add_header(adm_req_out(req), "Allow", buf);
    adm_api_reply_error(api, req, 405, "method not allowed", NULL);
}

/* A name segment of the URL: ids and names are plain tokens, never escaped. */
static int segment_ok(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || strchr("_.:-", s[i])))
            return 0;
    return 1;
}

/* A request adm_api_guard() let through, whole. */
static void handle(struct adm_req *req, void *arg)
{
    struct adm_api *api = arg;
    struct rt_param param;
    struct rt_match m;
    const struct endpoint *e = endpoint_of(api, req, &param, &m);
    char name[256];

    if (m.status == RT_NOT_ALLOWED) {
        not_allowed(api, req, m.allow);
        return;
    }
    if (!e) {
        adm_api_reply_error(api, req, 404, "no such endpoint", NULL);
        return;
    }
    if (adm_api_query_check(api, req, e) < 0 || adm_api_rollout_gate(api, req, e) < 0)
        return;
    if (!m.nparams) {
        e->fn(api, req, NULL);
        return;
    }
    if (param.len >= sizeof(name)) {
        adm_api_reply_error(api, req, 404, "no such endpoint", NULL);
        return;
    }
    if (!segment_ok(param.value, param.len)) {
        adm_api_reply_error(api, req, 404, e->missing, NULL);
        return;
    }
    memcpy(name, param.value, param.len);
    name[param.len] = '\0';
    e->fn(api, req, name);
}

struct adm_api *adm_api_new(struct event_base *base, const struct adm_addr *addr,
                            struct adm_pipeline *pipe, const struct adm_api_hooks *hooks,
                            const char *token, char *msg, size_t cap)
{
    return adm_api_new_on(base, addr, -1, pipe, hooks, token, msg, cap);
}

int adm_api_listen_fd(const struct adm_api *api)
{
    return adm_http_listen_fd(api->http);
}

void adm_api_accepting(struct adm_api *api, int on)
{
    adm_http_accepting(api->http, on);
}

struct adm_api *adm_api_new_on(struct event_base *base, const struct adm_addr *addr, int fd,
                               struct adm_pipeline *pipe, const struct adm_api_hooks *hooks,
                               const char *token, char *msg, size_t cap)
{
    struct adm_api *api;

    /* never an open admin API off loopback, whatever the caller checked */
    if ((!token || !*token) && !adm_addr_is_loopback(addr)) {
        snprintf(msg, cap,
                 "admin API: %s is not loopback and no token is configured: refusing to start",
                 addr->text);
        return NULL;
    }
    if (!(api = calloc(1, sizeof(*api))))
        goto oom;
    api->base = base;
    api->pipe = pipe;
    api->sw = pipe->sw;
    api->st = pipe->st;
    api->hooks = *hooks;
    api->started = time(NULL);
    if (token && !(api->token = strdup(token)))
        goto oom;
    if (adm_api_rollout_init(api) < 0)
        goto oom;
    if (!(api->endpoints = endpoints_table(msg, cap))) {
        adm_api_free(api);
        return NULL;
    }
    if (!(api->http = adm_http_new_on(base, addr, fd, adm_api_guard, handle, api, &http_limits, msg,
                                      cap))) {
        adm_api_free(api);
        return NULL;
    }
    return api;
oom:
    snprintf(msg, cap, "admin API: out of memory");
    adm_api_free(api);
    return NULL;
}

void adm_api_free(struct adm_api *api)
{
    if (!api)
        return;
    adm_http_free(api->http);
    adm_api_rollout_free(api);
    rt_table_free(api->endpoints);
    free(api->token);
    free(api);
}
