/*
 * fleet.c - a fleet node's start (gateway/fleet.h): the config it serves
 * first, composed from the node's document and the fleet last persisted
 * in the state directory, so that a node started while etcd is down
 * serves its last good config; and the etcd sync on the admin thread,
 * started once the admin API runs.
 */
#define _GNU_SOURCE
#include "gateway/fleet.h"
#include "admin/fleet_sync.h"

#include <stdio.h>
#include <string.h>

static json_t *node;           /* the node's document the start composed */
static struct adm_fleet *good; /* the fleet it composed it with (NULL: none yet) */
static struct adm_fleet_sync *sync_;

static void sync_log(void *arg, int level, const char *line)
{
    (void)arg;
    gw_log(level == 2 ? GW_LOG_ERROR : level == 1 ? GW_LOG_WARN : GW_LOG_NOTICE, "%s", line);
}

/* <n> joined with <f> (NULL: none), parsed; NULL with the errors in
 * <errs>, each on its etcd key or the node's JSON pointer. */
static struct adm_config *compose_parse(const struct adm_fleet *f, const json_t *n,
                                        const char *prefix, struct adm_errors *errs)
{
    struct adm_fleet *empty = f ? NULL : adm_fleet_new(prefix);
    struct adm_errors verrs;
    struct adm_config *cfg = NULL;
    json_t *doc;

    if (!f && !empty) {
        adm_errors_add(errs, "", "out of memory");
        return NULL;
    }
    doc = adm_fleet_compose(f ? f : empty, n, errs);
    if (doc) {
        adm_errors_init(&verrs);
        if (!(cfg = adm_config_from_json(doc, &verrs)))
            adm_fleet_blame(f ? f : empty, n, &verrs, errs);
        adm_errors_clear(&verrs);
        json_decref(doc);
    }
    adm_fleet_free(empty);
    return cfg;
}

size_t gw_fleet_check(const struct adm_config *cfg, struct adm_errors *errs)
{
    struct adm_config *c;
    size_t before = errs->n;

    if (!cfg->fleet)
        return 0;
    if ((c = compose_parse(NULL, cfg->json, cfg->fleet->prefix, errs)))
        adm_config_free(c);
    return errs->n - before;
}

struct adm_config *gw_fleet_load(struct adm_config *cfg, int from_state, const char *state_dir,
                                 const json_t *file_doc)
{
    struct adm_errors errs;
    struct adm_fleet *f = NULL;
    json_t *saved = NULL;
    struct adm_config *c;
    char prefix[1024];

    snprintf(prefix, sizeof(prefix), "%s", cfg->fleet->prefix);
    adm_errors_init(&errs);
    if (!state_dir)
        gw_log(GW_LOG_WARN, "fleet: no state directory: a start while etcd is down serves no "
                            "fleet objects (set admin.state_dir)");
    else if (adm_fleet_sync_load(state_dir, cfg->fleet, &f, &saved, &errs) < 0)
        gw_log_errors("fleet: the persisted fleet cannot be read; starting without it", &errs);
    adm_errors_clear(&errs);
    /* the node's document: the file's, or with the persisted config the
     * one persisted beside the fleet (the API's changes of node keys); the
     * persisted config itself is a composed one, whose listeners name the
     * fleet's certificates one by one: the last resort */
    if (from_state && !saved)
        gw_log(GW_LOG_WARN,
               "fleet: no node document persisted beside the config in %s: the "
               "node's keys come from its file",
               state_dir ? state_dir : "(none)");
    node = from_state && saved ? json_incref(saved)
           : file_doc          ? json_deep_copy(file_doc)
                               : json_deep_copy(cfg->json);
    json_decref(saved);
    if (!node) {
        gw_log(GW_LOG_ERROR, "config: out of memory");
        goto fail;
    }
    if (from_state && !saved && !file_doc) {
        json_object_del(node, "routes");
        json_object_del(node, "upstreams");
    }
    if (!(c = compose_parse(f, node, prefix, &errs)) && f) {
        gw_log_errors("fleet: the persisted fleet does not make a valid config with this node's; "
                      "starting without it until etcd answers",
                      &errs);
        adm_errors_clear(&errs);
        adm_fleet_free(f);
        f = NULL;
        c = compose_parse(NULL, node, prefix, &errs);
    }
    if (!c) {
        gw_log_errors("config", &errs);
        goto fail;
    }
    adm_errors_clear(&errs);
    if (f)
        gw_log(GW_LOG_NOTICE,
               "fleet: serving the fleet persisted at etcd revision %lld until etcd "
               "answers",
               (long long)adm_fleet_revision(f));
    good = f;
    adm_config_free(cfg);
    return c;
fail:
    adm_errors_clear(&errs);
    adm_fleet_free(f);
    json_decref(node);
    node = NULL;
    adm_config_free(cfg);
    return NULL;
}

int gw_fleet_start(struct adm_api *api, struct adm_pipeline *pipe, const struct adm_config *cfg,
                   const char *state_dir)
{
    struct adm_fleet_sync_hooks hooks = {sync_log, NULL};
    char why[512];

    if (!cfg->fleet)
        return 0;
    sync_ =
        adm_fleet_sync_new(api, pipe, cfg->fleet, node, good, state_dir, &hooks, why, sizeof(why));
    good = NULL; /* taken, or freed on failure */
    if (!sync_) {
        gw_log(GW_LOG_ERROR, "%s", why);
        return -1;
    }
    adm_fleet_sync_start(sync_);
    gw_log(GW_LOG_NOTICE, "fleet: etcd %s%s, prefix %s", cfg->fleet->endpoints[0],
           cfg->fleet->nendpoints > 1 ? " and others" : "", cfg->fleet->prefix);
    return 0;
}

void gw_fleet_stop(void)
{
    adm_fleet_sync_free(sync_);
    sync_ = NULL;
    adm_fleet_free(good);
    good = NULL;
    json_decref(node);
    node = NULL;
}
