/*
 * api.h - the admin HTTP API, served by the admin thread (admin/http.c on the
 * admin event_base). Every accepted change becomes one new snapshot,
 * persisted before it is acknowledged; route-level changes go through the
 * router's copy-on-write transactions, so their cost does not grow with the
 * table. See docs/reference/admin-api.md for the endpoints.
 */
#ifndef SY_ADMIN_API_H
#define SY_ADMIN_API_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "admin/snapshot.h"
#include "admin/state.h"

#define ADM_HIST_BUCKETS 14
extern const double adm_hist_bounds[ADM_HIST_BUCKETS]; /* seconds (api_metrics.c) */

/* Requests by the protocol they came in on: [0] HTTP/1.x ("h1"), [1]
 * HTTP/2 over TLS ("h2"), [2] HTTP/2 by prior knowledge ("h2c"), the
 * names of listeners[].protocols. */
#define ADM_NPROTOS 3

/* gRPC statuses counted one by one: 0 (OK) to 16 (UNAUTHENTICATED). */
#define ADM_GRPC_NCODES 17

/* The gateway's counters, summed over workers when scraped. */
struct adm_gw_stats {
    unsigned workers;
    uint64_t conns_open, conns_total, conns_dropped;
    uint64_t conns_reclaimed[2]; /* closed for new ones: [0] idle, [1] pending */
    uint64_t requests, status[6];
    uint64_t requests_proto[ADM_NPROTOS];
    uint64_t grpc[ADM_GRPC_NCODES]; /* gRPC requests answered, by grpc-status */
    uint64_t bytes_in, bytes_out, upstream_errors;
    uint64_t access_log_dropped;        /* access-log lines lost: failed writes */
    uint64_t dur[ADM_HIST_BUCKETS + 1]; /* request duration, last = +Inf */
    double dur_sum;
    uint64_t up[ADM_HIST_BUCKETS + 1]; /* upstream time to response head */
    double up_sum;
    uint64_t tls_handshakes[ADM_TLS_NVERSIONS][2]; /* [version][resumed] */
    uint64_t tls_failures[ADM_TLS_NFAIL];
};

struct evbuffer;
/* The TLS lines of /metrics (admin/tls_report.c). */
void adm_tls_metrics(struct evbuffer *b, const struct adm_config *cfg,
                     const struct adm_gw_stats *gs);

/* What the gateway's health thread knows of one server of a pool, or of
 * the pool itself (gateway/health.c). */
struct adm_srv_health {
    int last_status; /* the last check's status, 0: no answer, -1: none yet */
    double last_ms;  /* the last check's latency */
    uint64_t checks, check_failures;
    uint64_t ejections; /* by outlier detection, since the server was first seen */
    uint64_t all_down;  /* pool only: times every server went down */
};

/* What the admin layer needs from the gateway above it. */
struct adm_api_hooks {
    void (*stats)(void *arg, struct adm_gw_stats *st);
    /* fills <out> for server <server> of <pool> (UP_NONE: the pool's
     * fields), found by index, not by address: a pool may list one address
     * twice; leaves zeroes with last_status -1 when the checker knows
     * neither */
    void (*health)(void *arg, const up_pool *pool, size_t server, struct adm_srv_health *out);
    /* <line>: one accepted change, to log (NULL: not logged) */
    void (*audit)(void *arg, const char *line);
    /* Listeners are live: a whole config <cfg> checked to replace <live>
     * gets the listeners it adds bound first (errors at their paths in
     * <errs>; the number of them), and then, once <cfg> is published or
     * refused after all, done (<published> 1 or 0). NULL: not called. */
    size_t (*listeners_prepare)(void *arg, const struct adm_config *live,
                                const struct adm_config *cfg, struct adm_errors *errs);
    void (*listeners_done)(void *arg, const struct adm_config *live, const struct adm_config *cfg,
                           int published);
    void *arg;
    /* server host names for the snapshots the API builds (NULL: none are
     * resolved); borrowed, outlives the API */
    struct adm_resolver *resolver;
};

struct adm_api;

/* Starts the API on <addr> in <base>. <sw> is the process's swap (current
 * snapshot published), <st> the document state (its doc set). <token> is
 * the bearer token (copied; NULL: none). NULL with <msg> filled on error. */
struct adm_api *adm_api_new(struct event_base *base, const struct adm_addr *addr,
                            struct adm_swap *sw, struct adm_state *st,
                            const struct adm_api_hooks *hooks, const char *token, char *msg,
                            size_t cap);
void adm_api_free(struct adm_api *api);

/* Makes <doc> the live config: validate, build, persist, swap. The state
 * keeps a reference to <doc> on success: the caller must not change it.
 * 0 swapped, 1 identical to the live one (nothing done), -1 invalid (errors
 * in <errs>: the schema, or what the next start would refuse), -2 not
 * persisted (<msg>; nothing changed), -3 it changes keys only a restart
 * applies (each named in <errs>; nothing changed). */
int adm_api_apply(struct adm_api *api, json_t *doc, struct adm_errors *errs, char *msg, size_t cap);

/* A fleet node: <fs> composes every document applied (a node document)
 * with the fleet's objects, and takes the route and upstream writes
 * (admin/fleet_sync.h). NULL: not a fleet node. */
struct adm_fleet_sync;
void adm_api_set_fleet(struct adm_api *api, struct adm_fleet_sync *fs);
struct adm_fleet_sync *adm_api_fleet(const struct adm_api *api);

#endif
