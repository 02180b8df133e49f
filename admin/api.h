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

/* What the admin API needs from the gateway above it (what applying a
 * config needs is the pipeline's: admin/pipeline.h). */
struct adm_api_hooks {
    void (*stats)(void *arg, struct adm_gw_stats *st);
    /* fills <out> for server <server> of <pool> (UP_NONE: the pool's
     * fields), found by index, not by address: a pool may list one address
     * twice; leaves zeroes with last_status -1 when the checker knows
     * neither */
    void (*health)(void *arg, const up_pool *pool, size_t server, struct adm_srv_health *out);
    /* <line>: one accepted change, to log (NULL: not logged) */
    void (*audit)(void *arg, const char *line);
    void *arg;
};

struct adm_api;
struct adm_pipeline;

/* Starts the API on <addr> in <base>. <pipe> is the admin thread's apply
 * pipeline (admin/pipeline.h; borrowed, outlives the API): its swap has the
 * current snapshot published, its state the document set. <token> is the
 * bearer token (copied; NULL: none). NULL with <msg> filled on error. */
struct adm_api *adm_api_new(struct event_base *base, const struct adm_addr *addr,
                            struct adm_pipeline *pipe, const struct adm_api_hooks *hooks,
                            const char *token, char *msg, size_t cap);
/* The same on <fd>, a socket already listening on <addr> (an upgrade's,
 * taken; -1: bind <addr>). */
struct adm_api *adm_api_new_on(struct event_base *base, const struct adm_addr *addr, int fd,
                               struct adm_pipeline *pipe, const struct adm_api_hooks *hooks,
                               const char *token, char *msg, size_t cap);
/* Its listening socket, and whether it accepts (an upgrade's pause). */
int adm_api_listen_fd(const struct adm_api *api);
void adm_api_accepting(struct adm_api *api, int on);
void adm_api_free(struct adm_api *api);

#endif
