/*
 * api_apply.c - the admin API's side of applying a whole config (PUT
 * /config, the /upstreams writes): what a write changes, the dry run's
 * answer, and the answers of a push. The applying itself (validate, check,
 * bind, build, persist, swap) is the admin thread's one apply pipeline
 * (admin/pipeline.c), which the reload and the etcd watcher reach too.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"
#include "admin/fleet_sync.h"
#include "admin/impact.h"

#include <stdio.h>
#include <string.h>

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
    adm_fleet_sync_write(api->pipe->fleet, req, "upstream", name,
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

    if (api->canary.pct && !dry) { /* a staged rollout: api_rollout.c */
        adm_api_canary_start(api, req, doc, what, name);
        return;
    }
    if (api->pipe->fleet && strcmp(what, "upstream") == 0 && !dry) {
        fleet_upstream(api, req, doc, name, code);
        return;
    }
    adm_errors_init(&errs);
    if (api->pipe->fleet && strcmp(what, "config") == 0) {
        /* PUT /config: the node's keys, the fleet's objects as they are */
        node = doc;
        if (!(doc = adm_fleet_sync_compose_node(api->pipe->fleet, node, &dropped, &errs))) {
            adm_api_reply_errs(api, req, 400, "invalid config", &errs);
            adm_errors_clear(&errs);
            return;
        }
        raw = NULL;
    }
    adm_api_changes_of(api, doc, &ch); /* against the live config, before it is replaced */
    if (dry) {
        /* the validator's table, kept: the replay's proposed router */
        struct adm_route_binder bind = adm_impact_binder();
        struct adm_config *cfg = adm_config_from_json_bound(doc, &bind, &errs);
        if (cfg && (rc = adm_pipeline_check(api->pipe, cfg, &errs)) < 0) {
            adm_config_free(cfg);
            cfg = NULL;
        } else if (!cfg) {
            rc = -1;
        }
        if (!cfg) {
            adm_api_reply_errs(api, req, rc == -3 ? 409 : 400, refusal(rc), &errs);
        } else {
            /* what the push would change, in the write answer's terms */
            json_t *o = json_pack("{s:b,s:I}", "valid", 1, "routes", (json_int_t)cfg->nroutes);
            adm_api_written_changes(o, &ch);
            json_object_set_new(o, "impact",
                                adm_impact_json(api->sw, api->st->doc, cfg->table, doc));
            adm_api_reply(api, req, 200, o);
            adm_config_free(cfg);
        }
        goto out;
    }
    rc = adm_pipeline_apply(api->pipe, doc, raw, rawlen, &errs, msg, sizeof(msg));
    if (node && rc >= 0)
        adm_fleet_sync_node_applied(api->pipe->fleet, node);
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
