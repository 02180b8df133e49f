/*
 * api_apply.c - applying a whole config: validate it, check what the next
 * start would refuse and what only a restart applies, bind the listeners it
 * adds, build its snapshot, persist it and swap it in. PUT /config, the
 * /upstreams writes and the gateway's reload (SIGHUP) all come through here.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"
#include "admin/fleet_sync.h"
#include "admin/tls.h"

#include <stdio.h>
#include <string.h>

/* After check_lifecycle() accepted <cfg>: its new listeners are handed to
 * the workers when <published>, else closed again. */
static void listeners_done(struct adm_api *api, const struct adm_config *cfg, int published)
{
    if (api->hooks.listeners_done)
        api->hooks.listeners_done(api->hooks.arg, current(api) ? current(api)->cfg : NULL, cfg,
                                  published);
}

/* What a push is checked for beyond the schema (<cfg> valid): what the next
 * start would refuse (files, the admin rule), listeners it adds that cannot
 * be bound, and the keys only a restart applies, compared with the running
 * config. Every problem goes to <errs>. 0 fine (the new listeners are bound:
 * listeners_done() must follow), -1 refused (some error is not a
 * restart-only one), -3 refused only for restart-only keys (a 409). */
static int check_lifecycle(struct adm_api *api, const struct adm_config *cfg,
                           struct adm_errors *errs)
{
    const struct adm_config *live = current(api) ? current(api)->cfg : NULL;
    size_t nenv = adm_config_check_env(cfg, errs);
    size_t nrestart = live ? adm_config_restart_diff(live, cfg, errs) : 0;
    size_t nbind = api->hooks.listeners_prepare
                       ? api->hooks.listeners_prepare(api->hooks.arg, live, cfg, errs)
                       : 0;
    int rc = nenv || nbind ? -1 : nrestart ? -3 : 0;

    if (rc)
        listeners_done(api, cfg, 0);
    return rc;
}

/* adm_api_apply, with the document's text when the caller has it (a pushed
 * body): then it is persisted as it came instead of encoded again. */
static int apply_doc(struct adm_api *api, json_t *doc, const char *raw, size_t rawlen,
                     struct adm_errors *errs, char *msg, size_t cap)
{
    struct adm_config *cfg;
    struct adm_route_binder binder;
    struct adm_bind_ctx bctx;
    struct adm_snapshot *s;
    const struct adm_config *live;
    struct adm_state *st = api->st;
    json_t *copy, *old, *routes, *r, *tmp;
    uint64_t hb, hr = 0;
    double t0;
    size_t i;
    int rc;
    int same;

    /* an identical document keeps its generation (the live one is valid) */
    routes = json_object_get(doc, "routes");
    json_array_foreach(routes, i, r) hr ^= adm_json_hash(r);
    tmp = json_copy(doc);
    json_object_del(tmp, "routes");
    hb = adm_json_hash(tmp);
    json_decref(tmp);
    same = current(api) && (hb ^ hr) == adm_state_hash(st);
    if (same && !adm_tls_doc_reads_files(doc))
        return 1;
    /* the validator's conflict-finding table becomes the snapshot's */
    t0 = adm_now_ms();
    adm_bind_ctx_init(&bctx, api->sw->nworkers, current(api));
    binder = adm_snapshot_binder(&bctx);
    cfg = adm_config_from_json_bound(doc, &binder, errs);
    adm_bind_ctx_clear(&bctx);
    if (!cfg) {
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    if ((rc = check_lifecycle(api, cfg, errs)) < 0) {
        adm_config_free(cfg);
        snprintf(msg, cap, rc == -3 ? "needs a restart" : "invalid config");
        return rc;
    }
    if (same && adm_tls_same(cfg, current(api)->cfg)) { /* the files did not change either */
        listeners_done(api, cfg, 0);
        adm_config_free(cfg);
        return 1;
    }
    s = adm_snapshot_build_res(cfg, current(api), api->sw->nworkers, api->hooks.resolver, errs);
    if (!s) {
        listeners_done(api, NULL, 0);
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    s->build_ms = adm_now_ms() - t0; /* validation built the router table */
    /* the document is ours from now on: callers hand over a fresh one */
    copy = doc;
    json_incref(copy);
    old = st->doc;
    json_incref(old);
    if (adm_state_set_doc_hashed(st, copy, 1, hb, hr) < 0 ||
        (raw ? adm_state_save_bytes(st, raw, rawlen, msg, cap) : adm_state_save(st, msg, cap)) <
            0) {
        adm_state_set_doc(st, old);
        json_decref(copy);
        json_decref(old);
        listeners_done(api, s->cfg, 0);
        adm_snapshot_free(s);
        return -2;
    }
    json_decref(copy);
    json_decref(old);
    live = current(api)->cfg;
    adm_swap_publish(api->sw, s);
    if (api->hooks.resolver) /* the build looked up every name the config uses */
        adm_resolver_sweep(api->hooks.resolver);
    /* the old snapshot lives on until its grace period, on this thread */
    if (api->hooks.listeners_done)
        api->hooks.listeners_done(api->hooks.arg, live, s->cfg, 1);
    return 0;
}

int adm_api_apply_composed(struct adm_api *api, json_t *doc, struct adm_errors *errs, char *msg,
                           size_t cap)
{
    return apply_doc(api, doc, NULL, 0, errs, msg, cap);
}

/* On a fleet node every other source brings a node document: it is
 * composed with the fleet's last good objects first. */
int adm_api_apply(struct adm_api *api, json_t *doc, struct adm_errors *errs, char *msg, size_t cap)
{
    json_t *c;
    int rc;

    if (!api->fleet)
        return apply_doc(api, doc, NULL, 0, errs, msg, cap);
    if (!(c = adm_fleet_sync_compose_node(api->fleet, doc, NULL, errs))) {
        snprintf(msg, cap, "invalid config");
        return -1;
    }
    rc = apply_doc(api, c, NULL, 0, errs, msg, cap);
    json_decref(c);
    if (rc >= 0)
        adm_fleet_sync_node_applied(api->fleet, doc);
    return rc;
}

void adm_api_set_fleet(struct adm_api *api, struct adm_fleet_sync *fs)
{
    api->fleet = fs;
}

struct adm_fleet_sync *adm_api_fleet(const struct adm_api *api)
{
    return api->fleet;
}

/* Counts into <n> the members of <now> (a routes array keyed by "id" when
 * <ids> is not NULL, else an object keyed by name) added or replaced against
 * <before> (<ids>: the live routes by id), and those of <before> gone. */
static void count_changes(const json_t *before, const json_t *ids, const json_t *now, size_t n[3])
{
    size_t kept = 0, i, nbefore = ids ? json_object_size(ids) : json_object_size(before);
    const char *key;
    json_t *v, *old;

    if (ids) {
        json_array_foreach(now, i, v)
        {
            old = json_object_get(ids, json_string_value(json_object_get(v, "id")));
            kept += old != NULL;
            n[!old ? ADM_ADDED : ADM_REPLACED] += !old || !json_equal(old, v);
        }
    } else {
        json_object_foreach((json_t *)now, key, v)
        {
            old = json_object_get(before, key);
            kept += old != NULL;
            n[!old ? ADM_ADDED : ADM_REPLACED] += !old || !json_equal(old, v);
        }
    }
    n[ADM_REMOVED] = nbefore - kept;
}

/* Appends to <list> each top-level key of <a> but the routes and the
 * upstreams whose value <b> does not have alike (a key of one only counts). */
static void settings_changed(const json_t *a, const json_t *b, json_t *list, int skip_shared)
{
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)a, key, v)
    {
        json_t *w = json_object_get(b, key);
        if (strcmp(key, "routes") != 0 && strcmp(key, "upstreams") != 0 &&
            !(w && (skip_shared || json_equal(v, w))))
            json_array_append_new(list, json_string(key));
    }
}

void adm_api_changes_of(struct adm_api *api, const json_t *doc, struct adm_changes *ch)
{
    const json_t *live = api->st->doc;

    memset(ch, 0, sizeof(*ch));
    count_changes(NULL, api->st->ids, json_object_get(doc, "routes"), ch->routes);
    count_changes(json_object_get(live, "upstreams"), NULL, json_object_get(doc, "upstreams"),
                  ch->upstreams);
    if ((ch->settings = json_array())) {
        settings_changed(doc, live, ch->settings, 0);
        settings_changed(live, doc, ch->settings, 1); /* the keys <doc> dropped */
    }
}

/* The error line of a refused config: -1 invalid, -3 restart-only keys. */
static const char *refusal(int rc)
{
    return rc == -3 ? "the config changes keys that only a restart applies" : "invalid config";
}

/* Validates <doc> (borrowed) as the next config, builds it and swaps it in
 * (unless <dry>). Answers the request, with <code> on success. */
/* An upstream write on a fleet node: <doc>, the whole config with it,
 * validated here, then the one object written to etcd. */
static void fleet_upstream(struct adm_api *api, struct adm_req *req, json_t *doc, const char *name,
                           int code)
{
    struct adm_errors errs;
    struct adm_changes ch;
    struct adm_config *cfg;

    adm_errors_init(&errs);
    if (!(cfg = adm_config_from_json(doc, &errs))) {
        adm_api_reply_errs(api, req, 400, "invalid config", &errs);
        adm_errors_clear(&errs);
        return;
    }
    adm_config_free(cfg);
    adm_errors_clear(&errs);
    adm_api_changes_of(api, doc, &ch);
    json_decref(ch.settings);
    ch.settings = NULL;
    adm_fleet_sync_write(api->fleet, req, "upstream", name,
                         json_object_get(json_object_get(doc, "upstreams"), name), code == 201,
                         api->if_rev, code, &ch);
}

void adm_api_apply_full(struct adm_api *api, struct adm_req *req, json_t *doc, int dry,
                        const char *what, const char *name, int code, const char *raw,
                        size_t rawlen)
{
    struct adm_errors errs;
    struct adm_changes ch;
    uint64_t before = current(api)->gen;
    char msg[512];
    json_t *node = NULL;
    int rc, dropped = 0;

    if (api->fleet && strcmp(what, "upstream") == 0) {
        fleet_upstream(api, req, doc, name, code);
        return;
    }
    adm_errors_init(&errs);
    if (api->fleet) { /* PUT /config: the node's keys, the fleet's objects as they are */
        node = doc;
        if (!(doc = adm_fleet_sync_compose_node(api->fleet, node, &dropped, &errs))) {
            adm_api_reply_errs(api, req, 400, "invalid config", &errs);
            adm_errors_clear(&errs);
            return;
        }
        raw = NULL;
    }
    adm_api_changes_of(api, doc, &ch); /* against the live config, before it is replaced */
    if (dry) {
        struct adm_config *cfg = adm_config_from_json(doc, &errs);
        if (cfg && (rc = check_lifecycle(api, cfg, &errs)) < 0) {
            adm_config_free(cfg);
            cfg = NULL;
        } else if (!cfg) {
            rc = -1;
        } else {
            listeners_done(api, cfg, 0); /* bindable: that is all a dry run asks */
        }
        if (!cfg) {
            adm_api_reply_errs(api, req, rc == -3 ? 409 : 400, refusal(rc), &errs);
        } else {
            /* what the push would change, in the write answer's terms */
            json_t *o = json_pack("{s:b,s:I}", "valid", 1, "routes", (json_int_t)cfg->nroutes);
            adm_api_written_changes(o, &ch);
            adm_api_reply(api, req, 200, o);
            adm_config_free(cfg);
        }
        goto out;
    }
    rc = apply_doc(api, doc, raw, rawlen, &errs, msg, sizeof(msg));
    if (node && rc >= 0)
        adm_fleet_sync_node_applied(api->fleet, node);
    if (rc == -1 || rc == -3)
        adm_api_reply_errs(api, req, rc == -3 ? 409 : 400, refusal(rc), &errs);
    else if (rc == -2)
        adm_api_reply_error(api, req, 500, "cannot persist the config; nothing changed",
                            json_pack("[{s:s,s:s}]", "path", "", "message", msg));
    else {
        adm_api_audit(api, req, before, NULL);
        api->fleet_dropped = dropped;
        adm_api_reply_written(api, req, code, rc == 0, what, name, &ch);
        api->fleet_dropped = 0;
    }
out:
    json_decref(ch.settings);
    adm_errors_clear(&errs);
    if (node)
        json_decref(doc);
}
