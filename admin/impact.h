/*
 * impact.h - a dry run's blast radius: what a proposed config does to the
 * routes, the upstreams and the live sample of traffic (admin/sample.h)
 * replayed against the live router and the proposed one (router/diff.h).
 * Admin thread; no I/O, no logging.
 */
#ifndef SY_ADMIN_IMPACT_H
#define SY_ADMIN_IMPACT_H

#include <jansson.h>

#include "admin/snapshot.h"

/* The "impact" object of a dry run (docs/reference/admin-api.md): the
 * live snapshot of <sw> (its router, its sample rings, whose new entries
 * it collects first, waking the workers through <sw>'s notify: up to
 * ADM_SAMPLE_WAIT_MS), the live document <live_doc>, and the proposed
 * document <new_doc> whose router table is <new_rt> (route names = route
 * ids; NULL: it has no routes). All borrowed. NULL on out of memory. */
json_t *adm_impact_json(struct adm_swap *sw, const json_t *live_doc, const rt_table *new_rt,
                        const json_t *new_doc);

/* The route binder of a table that only a dry run's replay reads: each
 * route's udata is its config route (borrowed from the config), so the
 * validator's table serves as the proposed router. */
struct adm_route_binder adm_impact_binder(void);

#endif
