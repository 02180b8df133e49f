/*
 * health.h - the health thread (health.c): active health checks of every
 * pool's servers on an event_base of its own, and the one owner of passive
 * outlier ejection. Both publish to the pools' health words
 * (up_health_set), which the workers read with relaxed loads: a server
 * marked down or ejected is avoided by every worker at once.
 *
 * Who owns what. Each worker counts its own failures in a row per server
 * (up_failure_row, in its own cache lines of the pool: a success writes
 * nothing unless a row was running). When a worker's row reaches the
 * pool's consecutive_failures it hands (pool, server) to the health thread
 * through a lock-free ring of its own and a wake-up byte, and starts its
 * row again. The health thread alone holds each pool's up_outlier object:
 * it decides the ejection (max_ejection_percent, the growing duration) and
 * ends it. So the request path takes no lock and writes no shared line,
 * the ejection decision has one owner, and "in a row" means as one worker
 * saw it (a dead server fails on every worker alike; a flaky one is not
 * ejected because successes on one worker hide failures on another).
 *
 * The checker's state lives per (pool name, server address): a push that
 * does not change a pool, or changes it but keeps a server, keeps that
 * server's check counts, thresholds and ejection; a changed interval
 * re-arms its timer.
 */
#ifndef SY_GATEWAY_HEALTH_H
#define SY_GATEWAY_HEALTH_H

#include <jansson.h>

#include "admin/api.h"
#include "admin/snapshot.h"
#include "upstream/upstream.h"

/* Starts the health thread for <nworkers> workers' rings. 0 or -1. */
int gw_health_start(unsigned nworkers);
/* Admin thread, after each publish (and once after the start): the
 * snapshot <s> becomes what the checker checks. Never blocks on I/O. */
void gw_health_update(const struct adm_snapshot *s);
/* Stops the thread and frees its state (after the workers stopped). */
void gw_health_stop(void);
/* The admin API's hook (struct adm_api_hooks.health). */
void gw_health_info(void *arg, const up_pool *pool, size_t server, struct adm_srv_health *out);

/* An upgrade: what the checker knows of every pool's servers (check and
 * ejection state, counts) as JSON (a new reference); and in the new
 * process, before it accepts, another process's taken: a server down
 * there stays down here. Waits (at most 2 s) until the health thread
 * applied it; -1 when it did not. */
json_t *gw_health_export(void);
int gw_health_import(const json_t *pools);

/* Worker <w>: server <s> of <pool> failed consecutive_failures times in a
 * row on this worker; the health thread decides whether to eject it. */
void gw_health_report(unsigned w, up_pool *pool, size_t s);

/* Worker <w>: one outcome of a request to server <s> of upstream <up> of
 * snapshot <snap> (<failed>: connect failure, reset, close or timeout
 * before a response). A response's status goes through
 * gw_health_status(). Inline: with outlier detection off it costs one
 * load and a branch, on a success a load more. */
static inline void gw_health_outcome(unsigned w, const struct adm_snapshot *snap, size_t up,
                                     size_t s, int failed)
{
    const struct adm_outlier *o = &snap->cfg->upstreams[up].outlier;

    if (!o->on || !o->consecutive_failures)
        return;
    if (up_failure_row(snap->pools[up], w, s, failed) >= o->consecutive_failures) {
        up_failure_row_reset(snap->pools[up], w, s);
        gw_health_report(w, snap->pools[up], s);
    }
}

/* The same for a response with <status>: a failure when outlier.statuses
 * has it. */
static inline void gw_health_status(unsigned w, const struct adm_snapshot *snap, size_t up,
                                    size_t s, unsigned status)
{
    const struct adm_outlier *o = &snap->cfg->upstreams[up].outlier;

    if (o->on)
        gw_health_outcome(w, snap, up, s, adm_statuses_has(&o->statuses, status));
}

#endif
