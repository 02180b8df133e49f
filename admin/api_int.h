/*
 * api_int.h - what the admin API's files share: the API's state, the
 * live snapshot, and the helpers more than one endpoint file needs
 * (api.c: endpoints and dispatch; api_guard.c: the checks of a request's
 * head; api_query.c: query strings;
 * api_apply.c: the answers of a whole config's push; api_routes.c: /routes;
 * api_metrics.c: /metrics; api_upstreams.c: /upstreams).
 */
#ifndef SY_ADMIN_API_INT_H
#define SY_ADMIN_API_INT_H

#include "admin/api.h"
#include "admin/clock.h"
#include "admin/http.h"
#include "admin/pipeline.h"

#include <stdatomic.h>
#include <time.h>

/* A write's ?canary=P and its options (api_rollout.c), read before its
 * handler runs; pct 0: no canary. */
struct adm_canary_opts {
    unsigned pct;      /* 1..99 */
    unsigned window_s; /* canary_s */
    int by_request;    /* canary_key: 0 client_ip, 1 request */
    double threshold;  /* canary_threshold, percentage points */
    unsigned min_requests;
};

struct adm_rollout; /* api_rollout.c */

struct adm_api {
    struct event_base *base;
    struct adm_http *http;
    /* the admin thread's apply pipeline, which every whole config the API
     * takes goes through (borrowed); sw and st are its swap and state. On a
     * fleet node (pipe->fleet set) the route and upstream writes go to etcd. */
    struct adm_pipeline *pipe;
    struct adm_swap *sw;
    struct adm_state *st;
    struct adm_api_hooks hooks;
    rt_table *endpoints; /* the dispatch table, routed */
    char *token;
    time_t started;
    struct adm_clock_wall wall; /* the health words' since as wall-clock time */
    /* the revision the request being handled named in If-Match on a fleet
     * node (0: none), set by adm_api_if_match_ok() */
    int64_t if_rev;
    int fleet_dropped;             /* the PUT /config being answered had routes or upstreams */
    struct adm_canary_opts canary; /* the write being handled: its ?canary */
    struct adm_rollout *ro;        /* the staged rollout, running or the last one */
};

/* A handler gets the pattern's one parameter ({id}, {name}) as a checked
 * name, or NULL when the pattern has none. It answers exactly once. */
typedef void (*endpoint_fn)(struct adm_api *api, struct adm_req *req, const char *name);

/* A query parameter an endpoint takes: free text, or a flag (1, true, 0,
 * false). */
struct qparam {
    const char *name;
    enum { QP_TEXT, QP_FLAG } kind;
};

/* One row of the dispatch table (api.c); the query check reads its query. */
struct endpoint {
    const char *methods[4]; /* the router's method tokens; HEAD comes with GET */
    const char *pattern;    /* a router pattern (router/router.h) */
    endpoint_fn fn;
    unsigned flags;
    const char *missing;        /* the 404 for a parameter that cannot be a name */
    const struct qparam *query; /* the query parameters it takes */
    const char *does;           /* what it is for, in GET /'s index */
};

static inline struct adm_snapshot *current(struct adm_api *api)
{
    return atomic_load_explicit(&api->sw->current, memory_order_acquire);
}

/* The head check of every request, before its body is read (api_guard.c):
 * Host, Origin, the bearer token, Content-Type; a refusal is answered. */
void adm_api_guard(struct adm_req *req, void *arg);
/* 1 when <req> names an endpoint that needs no token (/healthz). */
int adm_api_endpoint_open(struct adm_api *api, struct adm_req *req);
/* 500 when an answer cannot even be built. */
void adm_api_send_oom(struct adm_req *req);
/* Sends <body> (stolen) as JSON with <code>, the live ETag along except on
 * 401 and 403. */
void adm_api_reply(struct adm_api *api, struct adm_req *req, int code, json_t *body);
/* {"error": <msg>, "errors": <errors>} (stolen, NULL: none) with <code>. */
void adm_api_reply_error(struct adm_api *api, struct adm_req *req, int code, const char *msg,
                         json_t *errors);
/* The request body as JSON; NULL with the answer (400) sent. */
json_t *adm_api_read_body(struct adm_api *api, struct adm_req *req);
/* If-Match absent, "*" or naming the live ETag: 1; else 0 with 412 sent. */
int adm_api_if_match_ok(struct adm_api *api, struct adm_req *req);
/* What an accepted write changed: routes (by id) and upstreams (by name)
 * added, replaced and removed, and the other top-level keys whose value
 * changed. Every write answers it, so that all answers share one shape. */
enum { ADM_ADDED, ADM_REPLACED, ADM_REMOVED };
struct adm_changes {
    size_t routes[3], upstreams[3];
    json_t *settings; /* an array of key names, owned; NULL: none */
};
/* What the config <doc> (borrowed) changes against the live one, into <ch>
 * (api_apply.c); its settings then belong to the caller. */
void adm_api_changes_of(struct adm_api *api, const json_t *doc, struct adm_changes *ch);
/* Validates <doc> (borrowed) as the next config and, unless <dry>, swaps it
 * in (<raw>, <rawlen>: its text to persist, NULL to encode it). Answers the
 * request: <code> on success, the write answer of <what> and <name>
 * (api_apply.c). */
void adm_api_apply_full(struct adm_api *api, struct adm_req *req, json_t *doc, int dry,
                        const char *what, const char *name, int code, const char *raw,
                        size_t rawlen);
/* A one-error list for adm_api_reply_error: <path> and the message made
 * from <fmt>. */
json_t *adm_api_one_error(const char *path, const char *fmt, ...) ADM_PRINTF(2, 3);
/* adm_api_reply_error with the errors of <errs> (borrowed). */
void adm_api_reply_errs(struct adm_api *api, struct adm_req *req, int code, const char *msg,
                        struct adm_errors *errs);
/* The answer of every accepted write, with <code>: {"changed": <changed>,
 * "what": <what> ("config", "route" or "upstream"), "id" or "name": <name>
 * (a route's or an upstream's; NULL: none), "changes": <ch>, and the
 * generation, ETag and build time now live}. <ch>'s settings are taken. */
void adm_api_reply_written(struct adm_api *api, struct adm_req *req, int code, int changed,
                           const char *what, const char *name, struct adm_changes *ch);
/* Sets "changes" in <o> to <ch>, whose settings it takes: the part of the
 * write answer a dry run shares. */
void adm_api_written_changes(json_t *o, struct adm_changes *ch);
/* A duration in milliseconds as JSON, rounded to the microsecond. */
json_t *adm_api_ms(double ms);
/* Logs one audit line for an accepted change of <req>; <before> is the
 * generation it replaced, <route> the id of a route change (NULL: none). */
void adm_api_audit(struct adm_api *api, struct adm_req *req, uint64_t before, const char *route);
/* Query strings (api_query.c). Calls <fn>(<arg>, key, value) on each
 * parameter of the query <q> (NULL: none), both decoded, the value NULL when
 * bare; stops at the first nonzero return of <fn> and returns it, -1 out of
 * memory. */
int adm_api_query_each(const char *q, int (*fn)(void *arg, const char *key, const char *val),
                       void *arg);
/* The flag <name> in <query>, already checked by adm_api_query_check(): 1
 * for 1 or true, 0 for 0, false or absent, -1 out of memory. */
int adm_api_query_flag(const char *query, const char *name);
/* Checks the query of <req> against what <e> takes: every parameter known,
 * none twice, flags 1, true, 0 or false. 0 ok; -1 with the answer sent. */
int adm_api_query_check(struct adm_api *api, struct adm_req *req, const struct endpoint *e);
/* Staged rollouts (api_rollout.c). The rollout state of <api>, and the
 * timer of its looks: 0, or -1 out of memory. */
int adm_api_rollout_init(struct adm_api *api);
void adm_api_rollout_free(struct adm_api *api);
/* Before the handler of endpoint <e>: when it is a write (it takes
 * ?canary), reads its canary options into api->canary, and refuses it
 * (409) while a rollout runs unless it is a dry run. 0 go on; -1 with the
 * answer sent. */
int adm_api_rollout_gate(struct adm_api *api, struct adm_req *req, const struct endpoint *e);
/* Starts a rollout of <doc> (borrowed: the whole config the write makes)
 * under api->canary: validated and built like a push, shown to the workers
 * beside the live snapshot, neither persisted nor published. Answers the
 * request: 202 with the rollout, or why not. <what>, <name>: as
 * adm_api_apply_full's. */
void adm_api_canary_start(struct adm_api *api, struct adm_req *req, json_t *doc, const char *what,
                          const char *name);
/* The rollout object of GET /status: null before any. */
json_t *adm_api_rollout_json(struct adm_api *api);
/* POST /rollout/promote and POST /rollout/abort. */
void adm_api_rollout_promote(struct adm_api *api, struct adm_req *req, const char *unused);
void adm_api_rollout_abort(struct adm_api *api, struct adm_req *req, const char *unused);
/* The checker's view of server <server> of <pool> (UP_NONE: the pool's). */
void adm_api_srv_health(const struct adm_api *api, const up_pool *pool, size_t server,
                        struct adm_srv_health *h);
/* GET /metrics (api_metrics.c). */
void adm_api_metrics(struct adm_api *api, struct adm_req *req, const char *unused);
/* The route endpoints (api_routes.c): GET and POST /routes, GET, PUT and
 * DELETE /routes/{id}, GET /routes/match. */
void adm_api_routes_list(struct adm_api *api, struct adm_req *req, const char *unused);
void adm_api_route_get(struct adm_api *api, struct adm_req *req, const char *id);
void adm_api_route_put(struct adm_api *api, struct adm_req *req, const char *path_id);
void adm_api_route_delete(struct adm_api *api, struct adm_req *req, const char *id);
void adm_api_route_match(struct adm_api *api, struct adm_req *req, const char *unused);
/* The upstream endpoints (api_upstreams.c): GET and POST /upstreams, GET,
 * PUT and DELETE /upstreams/{name}, GET /upstreams/{name}/health. */
void adm_api_upstreams_list(struct adm_api *api, struct adm_req *req, const char *unused);
void adm_api_upstream_get(struct adm_api *api, struct adm_req *req, const char *name);
void adm_api_upstream_put(struct adm_api *api, struct adm_req *req, const char *name);
void adm_api_upstream_delete(struct adm_api *api, struct adm_req *req, const char *name);
void adm_api_upstream_health(struct adm_api *api, struct adm_req *req, const char *name);

#endif
