/*
 * pipeline.c - the admin thread's one apply pipeline (admin/pipeline.h):
 * a whole config validated, checked for what the next start would refuse
 * and for what only a restart applies, the listeners it adds bound, its
 * snapshot built, persisted into the state and swapped in, then the
 * resolver's names swept. Every source of a config reaches it: the -c
 * file at start, or the persisted state that wins over it
 * (adm_pipeline_publish_first); SIGHUP (gateway/persist.c); the admin API
 * (PUT /config and the /upstreams writes, api_apply.c); and a fleet node's
 * etcd watcher, one etcd revision at a time (fleet_sync.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/pipeline.h"
#include "admin/fleet_sync.h"
#include "admin/policy.h"
#include "admin/tls.h"

#include <stdatomic.h>
#include <assert.h>
#include <stdio.h>

static struct adm_snapshot *live_snap(const struct adm_pipeline *p)
{
    return atomic_load_explicit(&p->sw->current, memory_order_acquire);
}

void adm_pipeline_init(struct adm_pipeline *p, struct adm_swap *sw, struct adm_state *st,
                       const struct adm_pipeline_hooks *hooks, struct adm_resolver *resolver)
{
    p->sw = sw;
    p->st = st;
    p->hooks = *hooks;
    p->resolver = resolver;
    p->fleet = NULL;
    p->rollout_abort = NULL;
    p->rollout_arg = NULL;
}

int adm_pipeline_publish_first(struct adm_pipeline *p, struct adm_config *cfg,
                               struct adm_errors *errs)
{
    struct adm_snapshot *s = adm_snapshot_build_res(cfg, NULL, p->sw->nworkers, p->resolver, errs);

    if (!s)
        return -1;
    adm_swap_publish(p->sw, s);
    if (p->resolver) /* the build looked up every name the config uses */
        adm_resolver_sweep(p->resolver);
    return 0;
}

/* After check_lifecycle() accepted <cfg>: its new listeners are handed to
 * the workers when <published>, else closed again. */
static void listeners_done(struct adm_pipeline *p, const struct adm_config *cfg, int published)
{
    if (p->hooks.listeners_done)
        p->hooks.listeners_done(p->hooks.arg, live_snap(p) ? live_snap(p)->cfg : NULL, cfg,
                                published);
}

/* What a push is checked for beyond the schema (<cfg> valid): what the next
 * start would refuse (files, the admin rule), listeners it adds that cannot
 * be bound, and the keys only a restart applies, compared with the running
 * config. Every problem goes to <errs>. 0 fine (the new listeners are bound:
 * listeners_done() must follow), -1 refused (some error is not a
 * restart-only one), -3 refused only for restart-only keys (a 409). */
static int check_lifecycle(struct adm_pipeline *p, const struct adm_config *cfg,
                           struct adm_errors *errs)
{
    const struct adm_config *live = live_snap(p) ? live_snap(p)->cfg : NULL;
    size_t nenv = adm_config_check_env(cfg, errs);
    size_t nrestart = live ? adm_config_restart_diff(live, cfg, errs) : 0;
    size_t nbind =
        p->hooks.listeners_prepare ? p->hooks.listeners_prepare(p->hooks.arg, live, cfg, errs) : 0;
    int rc = nenv || nbind ? -1 : nrestart ? -3 : 0;

    if (rc)
        listeners_done(p, cfg, 0);
    return rc;
}

int adm_pipeline_check(struct adm_pipeline *p, const struct adm_config *cfg,
                       struct adm_errors *errs)
{
    int rc = check_lifecycle(p, cfg, errs);

    if (rc == 0)
        listeners_done(p, cfg, 0); /* bindable: that is all a dry run asks */
    return rc;
}

/* The hashes of <doc> the state keeps: of everything but the routes
 * (<hb>), and of the routes each (<hr>, XORed: their order does not
 * matter). */
static void doc_hashes(json_t *doc, uint64_t *hb, uint64_t *hr)
{
    json_t *routes = json_object_get(doc, "routes"), *r, *tmp;
    size_t i;

    *hr = 0;
    json_array_foreach(routes, i, r) *hr ^= adm_json_hash(r);
    tmp = json_copy(doc);
    json_object_del(tmp, "routes");
    *hb = adm_json_hash(tmp);
    json_decref(tmp);
}

/* <doc> (a reference taken on success: callers hand over a fresh one)
 * becomes the state's document, saved (<raw>, <rawlen>: its text as it
 * came, NULL to encode it). -1 with <msg> and the state as it was. */
static int persist(struct adm_state *st, json_t *doc, const char *raw, size_t rawlen, uint64_t hb,
                   uint64_t hr, char *msg, size_t cap)
{
    json_t *old = st->doc;

    json_incref(doc);
    json_incref(old);
    if (adm_state_set_doc_hashed(st, doc, 1, hb, hr) < 0 ||
        (raw ? adm_state_save_bytes(st, raw, rawlen, msg, cap) : adm_state_save(st, msg, cap)) <
            0) {
        adm_state_set_doc(st, old);
        json_decref(doc);
        json_decref(old);
        return -1;
    }
    json_decref(doc);
    json_decref(old);
    return 0;
}

int adm_pipeline_apply_built(struct adm_pipeline *p, json_t *doc, struct adm_snapshot *s, char *msg,
                             size_t cap)
{
    uint64_t hb, hr;

    doc_hashes(doc, &hb, &hr);
    if (persist(p->st, doc, NULL, 0, hb, hr, msg, cap) < 0)
        return -2;
    /* <s> is the running canary: anything else would have been retired */
    assert(atomic_load_explicit(&p->sw->canary, memory_order_relaxed) == s);
    (void)s;
    adm_swap_canary_promote(p->sw);
    if (p->resolver) /* the build looked up every name the config uses */
        adm_resolver_sweep(p->resolver);
    return 0;
}

int adm_pipeline_apply(struct adm_pipeline *p, json_t *doc, const char *raw, size_t rawlen,
                       struct adm_errors *errs, char *msg, size_t cap)
{
    struct adm_config *cfg;
    struct adm_route_binder binder;
    struct adm_bind_ctx bctx;
    struct adm_snapshot *s;
    const struct adm_config *live;
    struct adm_state *st = p->st;
    uint64_t hb, hr;
    double t0;
    int rc;
    int same;

    /* an identical document keeps its generation (the live one is valid) */
    doc_hashes(doc, &hb, &hr);
    same = live_snap(p) && (hb ^ hr) == adm_state_hash(st);
    if (same && !adm_tls_doc_reads_files(doc) &&
        !json_object_size(json_object_get(doc, "policies")))
        return 1;
    /* the validator's conflict-finding table becomes the snapshot's */
    t0 = adm_now_ms();
    adm_bind_ctx_init(&bctx, p->sw->nworkers, live_snap(p));
    binder = adm_snapshot_binder(&bctx);
    cfg = adm_config_from_json_bound(doc, &binder, errs);
    adm_bind_ctx_clear(&bctx);
    if (!cfg) {
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    if ((rc = check_lifecycle(p, cfg, errs)) < 0) {
        adm_config_free(cfg);
        snprintf(msg, cap, rc == -3 ? "needs a restart" : "invalid config");
        return rc;
    }
    /* the files did not change either (certificates, and the keys a policy reads) */
    if (same && adm_tls_same(cfg, live_snap(p)->cfg) && adm_policies_same(cfg, live_snap(p)->cfg)) {
        listeners_done(p, cfg, 0);
        adm_config_free(cfg);
        return 1;
    }
    s = adm_snapshot_build_res(cfg, live_snap(p), p->sw->nworkers, p->resolver, errs);
    if (!s) {
        listeners_done(p, NULL, 0);
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    s->build_ms = adm_now_ms() - t0; /* validation built the router table */
    /* only now, valid, built and not the live one: the baseline is about to
     * change under a running rollout (a refused or unchanged reload leaves
     * it running) */
    if (p->rollout_abort)
        p->rollout_abort(p->rollout_arg, "a whole config replaces the baseline");
    if (persist(st, doc, raw, rawlen, hb, hr, msg, cap) < 0) {
        listeners_done(p, s->cfg, 0);
        adm_snapshot_free(s);
        return -2;
    }
    live = live_snap(p)->cfg;
    adm_swap_publish(p->sw, s);
    if (p->resolver) /* the build looked up every name the config uses */
        adm_resolver_sweep(p->resolver);
    /* the old snapshot lives on until its grace period, on this thread */
    if (p->hooks.listeners_done)
        p->hooks.listeners_done(p->hooks.arg, live, s->cfg, 1);
    return 0;
}

int adm_pipeline_apply_node(struct adm_pipeline *p, json_t *doc, struct adm_errors *errs, char *msg,
                            size_t cap)
{
    json_t *c;
    int rc;

    if (!p->fleet)
        return adm_pipeline_apply(p, doc, NULL, 0, errs, msg, cap);
    if (!(c = adm_fleet_sync_compose_node(p->fleet, doc, NULL, errs))) {
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    rc = adm_pipeline_apply(p, c, NULL, 0, errs, msg, cap);
    json_decref(c);
    if (rc >= 0)
        adm_fleet_sync_node_applied(p->fleet, doc);
    return rc;
}
