/*
 * api_rollout.c - staged rollouts: a write with ?canary=P becomes a whole
 * proposed config, validated and built like a push against the live one,
 * and shown to the workers as the swap's canary (admin/snapshot.h) for P %
 * of new requests, neither persisted nor published. Every 250 ms the admin
 * thread sums the workers' per-arm counts and asks admin/rollout.c for a
 * verdict: a rollback drops the canary (retired like any replaced
 * snapshot), a promotion persists its document and publishes it
 * (adm_pipeline_apply_built). Nothing is persisted before the promotion,
 * so a restart during a rollout comes back on the baseline. Each step is
 * one audit line; GET /status shows the running rollout or the last one.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <event2/event.h>

#define LOOK_MS 250

enum ro_state { RO_NONE = 0, RO_RUNNING, RO_PROMOTED, RO_ROLLED_BACK };

struct adm_rollout {
    struct adm_api *api;
    enum ro_state state;
    uint64_t n;                /* rollouts started: the running one's number */
    struct adm_snapshot *snap; /* running: the canary, the swap's */
    json_t *doc;               /* running: its whole document */
    char what[300];            /* "PUT /routes/users" */
    struct adm_canary_opts o;
    struct adm_ro_params params;
    time_t started;                /* wall clock, for /status */
    double t0;                     /* adm_now_ms() at the start */
    struct adm_ro_arm at_start[2]; /* the workers' cumulative counts then */
    struct adm_ro_arm arms[2];     /* since the start, at the last look */
    char reason[640];
    struct event *tick;
};

/* Top-level keys a canary may change: each is read per request from the
 * snapshot the request pinned. The others (listeners, admin, workers,
 * logs, the resolver...) act on the whole process as a snapshot is
 * published, so only a whole swap changes them. */
static const char *const canary_keys[] = {
    "routes",   "upstreams",         "router", "trusted_proxies", "client_ip",
    "timeouts", "access_log_format", "rollout"};

static int canary_key_ok(const char *key)
{
    for (size_t i = 0; i < sizeof(canary_keys) / sizeof(canary_keys[0]); i++)
        if (strcmp(key, canary_keys[i]) == 0)
            return 1;
    return 0;
}

/* The first top-level key <a> and <b> differ in that a canary cannot
 * change, or NULL. */
static const char *whole_swap_key(const json_t *a, const json_t *b)
{
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)a, key, v)
    {
        if (!canary_key_ok(key) && !json_equal(v, json_object_get(b, key)))
            return key;
    }
    json_object_foreach((json_t *)b, key, v)
    {
        if (!canary_key_ok(key) && !json_object_get(a, key))
            return key;
    }
    return NULL;
}

/* ---- the audit lines ---- */

static void audit(struct adm_api *api, const char *fmt, ...) ADM_PRINTF(2, 3);
static void audit(struct adm_api *api, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (!api->hooks.audit)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    api->hooks.audit(api->hooks.arg, line);
}

/* ---- the status object ---- */

static json_t *arm_json(const struct adm_ro_arm *a)
{
    return json_pack("{s:I,s:I,s:o,s:o}", "requests", (json_int_t)a->requests, "failed",
                     (json_int_t)a->failed, "p50_ms", adm_api_ms(adm_ro_quantile_ms(a, 0.5)),
                     "p99_ms", adm_api_ms(adm_ro_quantile_ms(a, 0.99)));
}

static void look(struct adm_rollout *ro);

json_t *adm_api_rollout_json(struct adm_api *api)
{
    static const char *const states[] = {"none", "running", "promoted", "rolled_back"};
    struct adm_rollout *ro = api->ro;
    char started[32];
    struct tm tm;
    json_t *o;

    if (!ro || ro->state == RO_NONE)
        return json_null();
    if (ro->state == RO_RUNNING) /* the counts now, not at the last look */
        look(ro);
    gmtime_r(&ro->started, &tm);
    strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", &tm);
    o = json_pack("{s:s,s:s,s:i,s:s,s:i,s:s,s:f,s:i,s:o,s:o}", "state", states[ro->state], "what",
                  ro->what, "percent", (int)ro->o.pct, "started", started, "window_s",
                  (int)ro->o.window_s, "key", ro->o.by_request ? "request" : "client_ip",
                  "threshold_pct", ro->o.threshold, "min_requests", (int)ro->o.min_requests,
                  "baseline", arm_json(&ro->arms[0]), "canary", arm_json(&ro->arms[1]));
    if (o && ro->state == RO_RUNNING)
        json_object_set_new(
            o, "elapsed_s",
            adm_api_ms(adm_now_ms() - ro->t0 > 0 ? (adm_now_ms() - ro->t0) / 1000 : 0));
    if (o && ro->state != RO_RUNNING)
        json_object_set_new(o, "reason", json_string(ro->reason));
    return o;
}

/* ---- the end of a rollout ---- */

/* The arms' counts since the start, into ro->arms. */
static void look(struct adm_rollout *ro)
{
    struct adm_swap *sw = ro->api->sw;

    adm_ro_sum(sw->roctr, sw->nworkers, ro->arms);
    adm_ro_sub(&ro->arms[0], &ro->at_start[0]);
    adm_ro_sub(&ro->arms[1], &ro->at_start[1]);
}

static void stop(struct adm_rollout *ro, enum ro_state to)
{
    look(ro);
    event_del(ro->tick);
    json_decref(ro->doc);
    ro->doc = NULL;
    ro->snap = NULL;
    ro->state = to;
}

/* Drops the canary: nothing of it was persisted. <why>: the reason kept. */
static void roll_back(struct adm_rollout *ro, const char *why)
{
    adm_swap_canary_drop(ro->api->sw);
    stop(ro, RO_ROLLED_BACK);
    snprintf(ro->reason, sizeof(ro->reason), "%s", why);
    audit(ro->api, "audit: rollout of %s rolled back: %s", ro->what, why);
}

/* Persists the canary's document and publishes it; a failed persist rolls
 * it back. 0 promoted. */
static int promote(struct adm_rollout *ro, const char *why)
{
    struct adm_api *api = ro->api;
    uint64_t before = current(api)->gen;
    char msg[512], r[700];

    if (adm_pipeline_apply_built(api->pipe, ro->doc, ro->snap, msg, sizeof(msg)) < 0) {
        snprintf(r, sizeof(r), "cannot persist the canary's config: %s", msg);
        roll_back(ro, r);
        return -1;
    }
    stop(ro, RO_PROMOTED);
    snprintf(ro->reason, sizeof(ro->reason), "%s", why);
    audit(api, "audit: rollout of %s promoted: generation %llu -> %llu: %s", ro->what,
          (unsigned long long)before, (unsigned long long)current(api)->gen, why);
    return 0;
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct adm_rollout *ro = arg;
    char why[600];
    int final;
    enum adm_ro_verdict v;

    (void)fd;
    (void)what;
    if (ro->state != RO_RUNNING)
        return;
    look(ro);
    final = adm_now_ms() - ro->t0 >= 1000.0 * ro->o.window_s;
    v = adm_ro_decide(&ro->params, &ro->arms[0], &ro->arms[1], final, why, sizeof(why));
    if (v == ADM_RO_ROLLBACK)
        roll_back(ro, why);
    else if (v == ADM_RO_PROMOTE)
        promote(ro, why);
}

/* The pipeline's hook: a whole config from elsewhere (SIGHUP, etcd) is
 * about to replace the baseline. */
static void pipe_abort(void *arg, const char *why)
{
    struct adm_rollout *ro = arg;
    char r[256];

    if (ro->state != RO_RUNNING)
        return;
    snprintf(r, sizeof(r), "aborted: %s", why);
    roll_back(ro, r);
}

int adm_api_rollout_init(struct adm_api *api)
{
    struct adm_rollout *ro = calloc(1, sizeof(*ro));

    if (!ro)
        return -1;
    ro->api = api;
    if (!(ro->tick = event_new(api->base, -1, EV_PERSIST, tick_cb, ro))) {
        free(ro);
        return -1;
    }
    api->ro = ro;
    api->pipe->rollout_abort = pipe_abort;
    api->pipe->rollout_arg = ro;
    return 0;
}

void adm_api_rollout_free(struct adm_api *api)
{
    struct adm_rollout *ro = api->ro;

    if (!ro)
        return;
    if (api->pipe->rollout_arg == ro) {
        api->pipe->rollout_abort = NULL;
        api->pipe->rollout_arg = NULL;
    }
    json_decref(ro->doc); /* a running canary stays the swap's: freed with it */
    event_free(ro->tick);
    free(ro);
    api->ro = NULL;
}

/* ---- the query of a write ---- */

struct opts_ctx {
    struct adm_canary_opts *o;
    int given, options; /* canary seen; one of its options seen */
    char why[256];
};

static int number(const char *val, double lo, double hi, double *out)
{
    char *end;
    double d;

    if (!val || !*val)
        return -1;
    d = strtod(val, &end);
    if (*end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

static int opts_one(void *arg, const char *key, const char *val)
{
    struct opts_ctx *c = arg;
    double d;

    if (strcmp(key, "canary") == 0) {
        if (number(val, 1, 99, &d) < 0 || d != (unsigned)d) {
            snprintf(c->why, sizeof(c->why), "canary takes a percentage from 1 to 99");
            return 1;
        }
        c->o->pct = (unsigned)d;
        c->given = 1;
    } else if (strcmp(key, "canary_s") == 0) {
        if (number(val, 1, 86400, &d) < 0 || d != (unsigned)d) {
            snprintf(c->why, sizeof(c->why), "canary_s takes whole seconds from 1 to 86400");
            return 1;
        }
        c->o->window_s = (unsigned)d;
        c->options = 1;
    } else if (strcmp(key, "canary_key") == 0) {
        if (!val || (strcmp(val, "client_ip") != 0 && strcmp(val, "request") != 0)) {
            snprintf(c->why, sizeof(c->why), "canary_key takes client_ip or request");
            return 1;
        }
        c->o->by_request = strcmp(val, "request") == 0;
        c->options = 1;
    } else if (strcmp(key, "canary_threshold") == 0) {
        if (number(val, 0, 100, &d) < 0) {
            snprintf(c->why, sizeof(c->why),
                     "canary_threshold takes percentage points from 0 to 100");
            return 1;
        }
        c->o->threshold = d;
        c->options = 1;
    } else if (strcmp(key, "canary_min_requests") == 0) {
        if (number(val, 1, 1e9, &d) < 0 || d != (unsigned)d) {
            snprintf(c->why, sizeof(c->why), "canary_min_requests takes a count from 1");
            return 1;
        }
        c->o->min_requests = (unsigned)d;
        c->options = 1;
    }
    return 0;
}

int adm_api_rollout_gate(struct adm_api *api, struct adm_req *req, const struct endpoint *e)
{
    const struct adm_rollout_cfg *d = &current(api)->cfg->rollout;
    struct adm_canary_opts *o = &api->canary;
    struct opts_ctx c = {.o = o};
    const struct qparam *p;
    int rc, dry;

    memset(o, 0, sizeof(*o));
    for (p = e->query; p->name && strcmp(p->name, "canary") != 0; p++)
        ;
    if (!p->name)
        return 0; /* not a write */
    *o = (struct adm_canary_opts){0, d->canary_s, d->key == ADM_CANARY_REQUEST,
                                  (double)d->threshold_pct, d->min_requests};
    rc = adm_api_query_each(adm_req_query(req), opts_one, &c);
    if (rc == 0 && c.options && !c.given) {
        snprintf(c.why, sizeof(c.why), "the canary_* options need canary=P (1 to 99)");
        rc = 1;
    }
    if ((dry = adm_api_query_flag(adm_req_query(req), "dry_run")) < 0 || rc < 0) {
        adm_api_send_oom(req);
        return -1;
    }
    if (rc > 0) {
        adm_api_reply_error(api, req, 400, c.why, adm_api_one_error("", "%s", c.why));
        return -1;
    }
    if (!c.given)
        o->pct = 0;
    if (api->ro && api->ro->state == RO_RUNNING && !dry) {
        char m[512];
        snprintf(m, sizeof(m),
                 "a rollout of %s is running: POST /rollout/abort or /rollout/promote first",
                 api->ro->what);
        adm_api_reply_error(api, req, 409, m, adm_api_one_error("", "%s", m));
        return -1;
    }
    return 0;
}

/* ---- the start ---- */

static uint64_t salt(void)
{
    uint64_t s = 0;

    if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
        s = (uint64_t)adm_now_ms() * 0x9e3779b97f4a7c15ull; /* a salt, not a secret */
    return s;
}

/* Refusals of a canary that only a whole swap could apply: 409, answered. */
static int refuse(struct adm_api *api, struct adm_req *req, const json_t *doc)
{
    const char *key;

    if (api->pipe->fleet) {
        adm_api_reply_error(api, req, 409, "no canary on a fleet node",
                            adm_api_one_error("", "a fleet node applies etcd revisions whole; "
                                                  "write without canary"));
        return -1;
    }
    if ((key = whole_swap_key(doc, api->st->doc))) {
        char path[128];
        snprintf(path, sizeof(path), "/%.100s", key);
        adm_api_reply_error(api, req, 409, "a canary cannot change this key",
                            adm_api_one_error(path,
                                              "\"%s\" acts on the whole process: only a whole "
                                              "swap changes it (push without canary)",
                                              key));
        return -1;
    }
    return 0;
}

/* The canary's snapshot of <doc>: validated, checked and built like a push
 * against the live one. NULL with the answer sent. */
static struct adm_snapshot *build(struct adm_api *api, struct adm_req *req, json_t *doc)
{
    struct adm_snapshot *live = current(api), *s;
    struct adm_errors errs;
    struct adm_bind_ctx bctx;
    struct adm_route_binder binder;
    struct adm_config *cfg;
    int rc;

    adm_errors_init(&errs);
    adm_bind_ctx_init(&bctx, api->sw->nworkers, live);
    binder = adm_snapshot_binder(&bctx);
    cfg = adm_config_from_json_bound(doc, &binder, &errs);
    adm_bind_ctx_clear(&bctx);
    if (!cfg) {
        adm_api_reply_errs(api, req, 400, "invalid config", &errs);
        goto out;
    }
    if ((rc = adm_pipeline_check(api->pipe, cfg, &errs)) < 0) {
        adm_config_free(cfg);
        adm_api_reply_errs(api, req, rc == -3 ? 409 : 400,
                           rc == -3 ? "the config changes keys that only a restart applies"
                                    : "invalid config",
                           &errs);
        cfg = NULL;
        goto out;
    }
    if (!(s = adm_snapshot_build_res(cfg, live, api->sw->nworkers, api->pipe->resolver, &errs)))
        adm_api_reply_errs(api, req, 400, "invalid config", &errs);
    adm_errors_clear(&errs);
    return s;
out:
    adm_errors_clear(&errs);
    return NULL;
}

void adm_api_canary_start(struct adm_api *api, struct adm_req *req, json_t *doc, const char *what,
                          const char *name)
{
    struct adm_rollout *ro = api->ro;
    struct adm_snapshot *s;
    struct adm_changes ch;
    json_t *o;

    if (refuse(api, req, doc) < 0)
        return;
    if (json_equal(doc, api->st->doc)) { /* nothing to roll out: an unchanged write */
        api->canary.pct = 0;
        adm_api_apply_full(api, req, doc, 0, what, name, 200, NULL, 0);
        return;
    }
    if (!(s = build(api, req, doc)))
        return;
    adm_api_changes_of(api, doc, &ch);
    ro->o = api->canary;
    ro->params = (struct adm_ro_params){.threshold_pct = ro->o.threshold,
                                        .min_requests = ro->o.min_requests,
                                        .latency_pct = current(api)->cfg->rollout.latency_pct};
    snprintf(ro->what, sizeof(ro->what), "%s %s", adm_req_method_name(req), adm_req_path(req));
    ro->doc = json_incref(doc);
    ro->snap = s;
    ro->started = time(NULL);
    ro->t0 = adm_now_ms();
    ro->reason[0] = '\0';
    memset(ro->arms, 0, sizeof(ro->arms));
    adm_ro_sum(api->sw->roctr, api->sw->nworkers, ro->at_start);
    ro->state = RO_RUNNING;
    /* counted from here: a request counts under the rollout it pinned */
    adm_swap_canary_start(api->sw, s, ro->o.pct, ro->o.by_request, salt(), ++ro->n);
    event_add(ro->tick, &(struct timeval){0, LOOK_MS * 1000});
    audit(api,
          "audit: %s started a rollout of %s: canary %u%% by %s for %u s (threshold %.2f "
          "points, at least %u requests)",
          adm_req_peer(req), ro->what, ro->o.pct, ro->o.by_request ? "request" : "client_ip",
          ro->o.window_s, ro->o.threshold, ro->o.min_requests);
    o = json_pack("{s:b,s:s}", "changed", 0, "what", what);
    if (o && name)
        json_object_set_new(o, strcmp(what, "route") == 0 ? "id" : "name", json_string(name));
    if (o) {
        adm_api_written_changes(o, &ch);
        json_object_set_new(o, "rollout", adm_api_rollout_json(api));
    }
    json_decref(ch.settings);
    adm_api_reply(api, req, 202, o);
}

/* ---- by hand ---- */

/* 409 when no rollout runs (answered): -1. */
static int running(struct adm_api *api, struct adm_req *req)
{
    if (api->ro && api->ro->state == RO_RUNNING)
        return 0;
    adm_api_reply_error(api, req, 409, "no rollout is running",
                        adm_api_one_error("", "start one with ?canary=P on a write"));
    return -1;
}

void adm_api_rollout_promote(struct adm_api *api, struct adm_req *req, const char *unused)
{
    char why[256];

    (void)unused;
    if (running(api, req) < 0)
        return;
    snprintf(why, sizeof(why), "promoted by hand (%s)", adm_req_peer(req));
    promote(api->ro, why);
    adm_api_reply(api, req, api->ro->state == RO_PROMOTED ? 200 : 500,
                  json_pack("{s:o}", "rollout", adm_api_rollout_json(api)));
}

void adm_api_rollout_abort(struct adm_api *api, struct adm_req *req, const char *unused)
{
    char why[256];

    (void)unused;
    if (running(api, req) < 0)
        return;
    snprintf(why, sizeof(why), "aborted by hand (%s)", adm_req_peer(req));
    roll_back(api->ro, why);
    adm_api_reply(api, req, 200, json_pack("{s:o}", "rollout", adm_api_rollout_json(api)));
}
