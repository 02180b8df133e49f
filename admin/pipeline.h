/*
 * pipeline.h - the admin thread's one way in for a whole config: every
 * source of one reaches the live snapshot through here (pipeline.c):
 * validate, check what the next start would refuse, bind the listeners it
 * adds, build its snapshot, persist it, swap it in. The sources: the -c
 * file (or the persisted state) at start, SIGHUP (gateway/persist.c), the
 * admin API (api_apply.c) and a fleet node's etcd watcher (fleet_sync.c).
 */
#ifndef SY_ADMIN_PIPELINE_H
#define SY_ADMIN_PIPELINE_H

#include <stddef.h>

#include <jansson.h>

#include "admin/errors.h"
#include "admin/snapshot.h"
#include "admin/state.h"

struct adm_fleet_sync;

/* What applying needs of the gateway above. Listeners are live: a whole
 * config <cfg> checked to replace <live> gets the listeners it adds bound
 * first (errors at their paths in <errs>; the number of them), and then,
 * once <cfg> is published or refused after all, done (<published> 1 or
 * 0). NULL: not called. */
struct adm_pipeline_hooks {
    size_t (*listeners_prepare)(void *arg, const struct adm_config *live,
                                const struct adm_config *cfg, struct adm_errors *errs);
    void (*listeners_done)(void *arg, const struct adm_config *live, const struct adm_config *cfg,
                           int published);
    void *arg;
};

struct adm_pipeline {
    struct adm_swap *sw;  /* the process's swap: its workers, the live snapshot */
    struct adm_state *st; /* the live document and its persistence */
    struct adm_pipeline_hooks hooks;
    /* server host names for the snapshots built here (NULL: none are
     * resolved); borrowed, outlives the pipeline */
    struct adm_resolver *resolver;
    /* a fleet node's etcd source, which composes every node document
     * applied with the fleet's objects (admin/fleet_sync.h); set by the
     * sync itself. NULL: not a fleet node. */
    struct adm_fleet_sync *fleet;
    /* a staged rollout's owner (the admin API: api_rollout.c), which
     * adm_pipeline_apply() asks to end one that runs before a whole config
     * from elsewhere (SIGHUP, an etcd revision) replaces the baseline under
     * it; NULL: none */
    void (*rollout_abort)(void *arg, const char *why);
    void *rollout_arg;
};

/* Fills <p> for the swap <sw> and the state <st> (both borrowed), with
 * <hooks> (copied) and <resolver> (borrowed, NULL: none). */
void adm_pipeline_init(struct adm_pipeline *p, struct adm_swap *sw, struct adm_state *st,
                       const struct adm_pipeline_hooks *hooks, struct adm_resolver *resolver);

/* The first snapshot, built from <cfg> (taken, freed on failure too) and
 * published into the swap (initialized, nothing published yet). 0, or -1
 * with the errors in <errs>. */
int adm_pipeline_publish_first(struct adm_pipeline *p, struct adm_config *cfg,
                               struct adm_errors *errs);

/* Makes <doc> the live config: validate, build, persist, swap. <raw>,
 * <rawlen>: its text to persist as it came (a pushed body), NULL to encode
 * it. The state keeps a reference to <doc> on success: the caller must not
 * change it. On a fleet node <doc> must already be composed with the
 * fleet's objects. 0 swapped, 1 identical to the live one (nothing done),
 * -1 invalid (errors in <errs>: the schema, or what the next start would
 * refuse), -2 not persisted (<msg>; nothing changed), -3 it changes keys
 * only a restart applies (each named in <errs>; nothing changed). */
int adm_pipeline_apply(struct adm_pipeline *p, json_t *doc, const char *raw, size_t rawlen,
                       struct adm_errors *errs, char *msg, size_t cap);

/* Makes <doc> (a reference taken on success) the live config with <s>, the
 * snapshot already built from it against the live one (a rollout's
 * canary, shown to the workers beside it): persisted, then published
 * through adm_swap_canary_promote() (<s> must be the swap's canary). 0, or -2 not persisted (<msg>; nothing changed, <s>
 * still the caller's). The listeners must be the live ones. */
int adm_pipeline_apply_built(struct adm_pipeline *p, json_t *doc, struct adm_snapshot *s, char *msg,
                             size_t cap);

/* adm_pipeline_apply() of a node's own document (a file's: SIGHUP): on a
 * fleet node it is composed with the fleet's last good objects first, and
 * becomes the node's document once applied. Same returns. */
int adm_pipeline_apply_node(struct adm_pipeline *p, json_t *doc, struct adm_errors *errs, char *msg,
                            size_t cap);

/* What a dry run checks of the valid <cfg> beyond the schema: what the next
 * start would refuse (files, the admin rule), listeners it adds that cannot
 * be bound (bound and closed again), and the keys only a restart applies,
 * compared with the live config. Every problem goes to <errs>. 0 fine, -1
 * refused (some error is not a restart-only one), -3 refused only for
 * restart-only keys. */
int adm_pipeline_check(struct adm_pipeline *p, const struct adm_config *cfg,
                       struct adm_errors *errs);

#endif
