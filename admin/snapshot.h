/*
 * snapshot.h - the immutable routing snapshot workers read, and its swap.
 *
 * The admin thread builds a snapshot from a validated config, off the
 * workers' path, and publishes it with one atomic release store. A worker
 * reads the current snapshot with one acquire load and pins it for the
 * length of a request in its own per-worker counter (a single-writer store
 * on a cache line no other thread writes). The old snapshot is freed by the
 * admin thread once every worker has acknowledged the swap (a grace period:
 * the worker then can no longer load it) and every pin count is zero.
 *
 * Snapshots share what did not change: an upstream pool whose definition is
 * identical is carried over (same object), so its balancer state, counters
 * and idle connections survive a route-only change. A changed pool is new,
 * but takes over from the previous snapshot's pool of the same name the
 * state of every server it keeps at the same socket address, however it is
 * written (up_pool_match, up_pool_carry_map):
 * health, counters, and idle connections unless its TLS setup changed.
 */
#ifndef SY_ADMIN_SNAPSHOT_H
#define SY_ADMIN_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/config.h"
#include "admin/policy.h"
#include "admin/http1/token.h"
#include "admin/resolve.h"
#include "admin/sample.h"
#include "admin/rollout.h"
#include "admin/tls.h"
#include "router/router.h"
#include "upstream/upstream.h"

/* A piece of a rewrite template: literal text, or a route parameter. */
struct adm_rw_part {
    int param; /* index into the route's params, or -1 for literal text */
    const char *s;
    size_t len;
};

/* A route's header actions encoded once (route_headers.c): the fields to
 * append as bytes with slots for what each request fills in, and the
 * names of the fields to drop (removed, or replaced by a set). */
enum {
    ADM_HS_BYTES = -1,      /* s[0..len) as they are */
    ADM_HS_CLIENT_IP = -2,  /* {client_ip} */
    ADM_HS_REQUEST_ID = -3, /* {request_id} */
    ADM_HS_HOST = -4,       /* {host} */
};                          /* >= 0: the route's parameter of that index */
struct adm_hpart {
    int slot;
    const char *s;
    size_t len;
};
struct adm_shdrs {
    struct adm_hpart *parts; /* "Name: value\r\n" for every set and add, in order */
    size_t nparts;
    struct h1_slice *drop; /* lower-case names whose fields are dropped */
    size_t ndrop;
    int sets_host; /* request_headers.set has Host: the client's is dropped */
    char *bytes;   /* what the parts point into */
};

/* Encodes <a> for a route with pattern <pattern>; NULL on out of memory
 * (or a template the validator would refuse). */
struct adm_shdrs *adm_shdrs_new(const struct adm_hdr_actions *a, const char *pattern);
void adm_shdrs_free(struct adm_shdrs *h);

/* Per-worker, per-route counters (single writer each: relaxed stores). */
struct adm_rctr {
    _Atomic uint64_t status[6]; /* by class, [0] unused */
    char pad[64 - 6 * sizeof(uint64_t) % 64];
};

/* A route's counters, one cache line per worker. A route of a later config
 * with the same id takes them over (refs, admin thread only), so a config
 * push resets no route's counters. */
struct adm_rctrs {
    unsigned refs;
    unsigned nworkers;
    char pad[64 - 2 * sizeof(unsigned)];
    struct adm_rctr w[];
};

/* What a worker needs to act on a matched route; the router's udata. It
 * owns copies of everything it uses, so it can be shared by every snapshot
 * whose table still holds the route (route-level changes copy nothing
 * else). Freed through the router's udata_free when the last table holding
 * it goes. */
struct adm_sroute {
    char *id;      /* ADM_SAMPLE_ROUTE_PAD bytes at least, for the live sample's writer */
    size_t id_len; /* for the live sample's writer, which must not strlen it */
    char *pattern;
    enum adm_action action;
    unsigned status; /* direct response or redirect status */
    char *upstream_name;
    size_t upstream;    /* index into the snapshot's pools */
    char *strip_prefix; /* NULL if none */
    size_t strip_len;
    char *rewrite_src;           /* the template the parts point into */
    struct adm_rw_part *rewrite; /* NULL if none */
    size_t nrewrite;
    char **upgrades; /* the route's; NULL: only "websocket" (gw_forward_upgrade) */
    size_t nupgrades;
    unsigned timeout_ms;
    struct adm_shdrs *reqh, *resph;   /* request_headers, response_headers; NULL: none */
    int request_buffering;            /* read the body whole before going upstream */
    uint64_t max_buffered_body_bytes; /* the largest body so read; more answers 413 */
    /* direct responses and redirects, encoded once: head (status line and
     * fixed fields), then Date and maybe "Connection: close" are added by
     * the worker, then tail (Content-Length and the blank line), then body */
    char *head, *tail, *body;
    size_t head_len, tail_len, body_len;
    /* the route's policies, in order: indexes into the snapshot's
     * policies (gateway/policy.h runs them); npol 0: none */
    unsigned char npol;
    unsigned char pol[ADM_POL_MAX];
    unsigned nworkers;
    struct adm_rctr *ctr;   /* one per worker: ctrs->w */
    struct adm_rctrs *ctrs; /* a reference */
};

/* A config shared by the snapshots derived from it by route-level changes
 * (admin thread only). Its routes array is the one it was parsed with:
 * workers never read it; they read the router table. */
struct adm_cfgref {
    struct adm_config *cfg;
    unsigned refs;
    /* built with it: per listener its TLS context (NULL: plain), per
     * upstream its client SSL_CTX (NULL: plain); one reference each */
    struct adm_tls_ctx **tls;
    SSL_CTX **uptls;
};

struct adm_pin {
    _Atomic uint64_t n;
    char pad[64 - sizeof(uint64_t)];
};

struct adm_snapshot {
    uint64_t gen;           /* the config generation: a re-resolved snapshot keeps it */
    uint64_t seq;           /* the publication's number, for the grace period */
    struct adm_config *cfg; /* = base->cfg */
    struct adm_cfgref *base;
    rt_table *rt;    /* owned; udata are struct adm_sroute */
    up_pool **pools; /* one reference each, index = cfg->upstreams index */
    size_t npools;
    /* one reference each, index = cfg->policies index; a policy whose
     * name and definition stay is the same object (its state kept) */
    struct adm_spolicy **policies;
    size_t npolicies;
    /* the query parameters kept out of the access log on every request
     * (adm_policies_log_query): log_qlen 0 and log_q_whole 0: none */
    char log_q[128];
    unsigned char log_qlen, log_q_whole;
    struct adm_tls_ctx *const *tls; /* = base->tls: index = cfg->listeners index */
    SSL_CTX *const *uptls;          /* = base->uptls: index = cfg->upstreams index */
    unsigned nworkers;
    struct adm_pin *pins; /* one per worker */
    /* the live sample's rings, one per worker (a reference; NULL: sampling
     * is off): the same set as the previous snapshot's while "sampling"
     * keeps its value, so a push keeps the samples */
    struct adm_sample_set *samples;
    /* a canary (adm_swap_canary_start), set before it is shown to the
     * workers: the share of new requests it takes, how they are split, and
     * the rollout it belongs to (what its requests are counted under) */
    unsigned canary_pct;        /* 1..99 */
    unsigned canary_by_request; /* 1: each request draws; 0: the client address decides */
    uint64_t canary_salt;       /* mixed into the client address's hash */
    uint64_t rollout;           /* the rollout's number, never 0 */
    /* admin side */
    struct adm_snapshot *next_retired;
    uint64_t replaced_by; /* seq of the snapshot that replaced it */
    double build_ms;
};

/* Builds a snapshot from <cfg>, taking ownership of it (freed on failure
 * too). Pools are reused from <prev> (may be NULL) when their definition is
 * unchanged, and so are TLS contexts whose identity (admin/tls.h) is: their
 * ticket keys survive the push. NULL with errors appended to <errs> on
 * failure. When cfg->table is set it becomes the snapshot's router table as
 * it is: it must come from adm_config_from_json_bound() with
 * adm_snapshot_binder() for nworkers. Server host names are taken from
 * <res> (admin/resolve.h), which is never waited for: each address a name
 * has is one server, and a name without any yet is one server that stays
 * down (UP_H_RESOLVING) until adm_snapshot_reresolve() brings its
 * addresses. The resolver takes cfg's "resolver" settings first. With
 * <res> NULL every host name is such a server (unit tests). */
struct adm_snapshot *adm_snapshot_build_res(struct adm_config *cfg, const struct adm_snapshot *prev,
                                            unsigned nworkers, struct adm_resolver *res,
                                            struct adm_errors *errs);
/* adm_snapshot_build_res() without a resolver. */
struct adm_snapshot *adm_snapshot_build(struct adm_config *cfg, const struct adm_snapshot *prev,
                                        unsigned nworkers, struct adm_errors *errs);
/* The live snapshot <cur> again with the pools whose host names resolve
 * to other addresses now rebuilt from <res>; the servers whose address
 * stays keep their health. Same config, routes and (once published with
 * adm_swap_republish) generation. Returns 0 with *out NULL when no pool
 * changed, -1 on out of memory. */
int adm_snapshot_reresolve(const struct adm_snapshot *cur, struct adm_resolver *res,
                           struct adm_snapshot **out);
/* A new snapshot sharing <cur>'s config, pools and counters, with router
 * table <rt> (owned from now on; derived from cur->rt by a transaction).
 * NULL on out of memory (rt is freed then too). */
struct adm_snapshot *adm_snapshot_derive(const struct adm_snapshot *cur, rt_table *rt);

/* Builds the route data for <r>, validated against <s>'s upstreams (the
 * pool is found by name); it takes over the counters of <prev> (may be NULL),
 * the route it replaces. NULL on out of memory or an unknown upstream. */
struct adm_sroute *adm_sroute_new(const struct adm_route *r, const struct adm_snapshot *s,
                                  const struct adm_sroute *prev);
/* CLOCK_MONOTONIC in milliseconds, for build times. */
double adm_now_ms(void);

/* What the binder below needs: the number of workers, and the routes of the
 * live snapshot by id, whose counters the new config's routes take over. */
struct adm_bind_ctx {
    unsigned nworkers;
    const struct adm_sroute **byid; /* open addressing, cap a power of two */
    size_t cap;
};
/* Fills <ctx> for <nworkers> workers and the routes of <prev> (may be NULL).
 * On out of memory the index stays empty: counters then start from zero. */
void adm_bind_ctx_init(struct adm_bind_ctx *ctx, unsigned nworkers,
                       const struct adm_snapshot *prev);
void adm_bind_ctx_clear(struct adm_bind_ctx *ctx);

/* The binder that lets the validator's table serve as a snapshot's table
 * (<ctx> must stay valid while it is used). */
struct adm_route_binder adm_snapshot_binder(const struct adm_bind_ctx *ctx);
void adm_sroute_free(void *udata);

/* Frees a snapshot nobody can reach any more. NULL is a no-op. */
void adm_snapshot_free(struct adm_snapshot *s);

/* The swap: one per process, shared by the admin thread and the workers. */
struct adm_ack {
    _Atomic uint64_t seq;
    char pad[64 - sizeof(uint64_t)];
};

struct adm_swap {
    _Atomic(struct adm_snapshot *) current;
    /* a rollout's second arm, NULL when none runs: the normal path costs one
     * load and a branch */
    _Atomic(struct adm_snapshot *) canary;
    /* the last publication's number (a snapshot's, or a canary's going):
     * what a worker's acknowledgement says it has seen */
    _Atomic uint64_t epoch;
    _Atomic uint64_t rollout; /* the running rollout's number, 0: none */
    unsigned nworkers;
    struct adm_ack *acks;      /* per worker: the last publication it acknowledged */
    struct adm_ro_wctr *roctr; /* per worker: the arms' counts (admin/rollout.h) */
    /* admin side only */
    uint64_t gen, seq;
    struct adm_snapshot *retired;
    size_t nretired;
    uint64_t swaps;
    /* wakes worker <w> so that it calls adm_swap_ack() soon */
    void (*notify)(void *arg, unsigned w);
    void *notify_arg;
};

int adm_swap_init(struct adm_swap *sw, unsigned nworkers, void (*notify)(void *arg, unsigned w),
                  void *arg);
/* Frees the current and all retired snapshots: only when no worker runs. */
void adm_swap_destroy(struct adm_swap *sw);
/* Publishes <s> (admin thread): it becomes current, the previous one is
 * retired and every worker is notified. */
void adm_swap_publish(struct adm_swap *sw, struct adm_snapshot *s);
/* adm_swap_publish() keeping the current generation: for a snapshot of the
 * same config (adm_snapshot_reresolve). */
void adm_swap_republish(struct adm_swap *sw, struct adm_snapshot *s);
/* Shows <c> (built like any snapshot, never published; taken) to the
 * workers as the canary of rollout <rollout> (nonzero), with the next
 * generation (kept when it is promoted, never reused): from now on
 * <pct> % of new requests pin it, each request drawing when <by_request>,
 * else by its client address hashed with <salt>. None may be running. */
void adm_swap_canary_start(struct adm_swap *sw, struct adm_snapshot *c, unsigned pct,
                           int by_request, uint64_t salt, uint64_t rollout);
/* Takes the canary away (rollback, abort): it is retired like a replaced
 * snapshot, freed once every worker acknowledged its going and no request
 * pins it. No-op when none runs. */
void adm_swap_canary_drop(struct adm_swap *sw);
/* The canary becomes the current snapshot under the generation it got at
 * its start (published as adm_swap_publish does: the baseline is retired)
 * and the rollout ends. */
void adm_swap_canary_promote(struct adm_swap *sw);
/* A publication that changes no snapshot (admin thread): a new epoch, every
 * worker notified. Returns its number: once adm_swap_fenced() says so,
 * every worker has been between request steps since, so none still uses a
 * pointer that the admin thread replaced before the fence (a jwt policy's
 * key set: jwks_remote.c), and none can load it again. */
uint64_t adm_swap_fence(struct adm_swap *sw);
/* Whether every worker acknowledged publication <seq>. */
int adm_swap_fenced(const struct adm_swap *sw, uint64_t seq);
/* Frees retired snapshots past their grace period with no pins left.
 * Returns how many remain retired. Admin thread. */
size_t adm_swap_reclaim(struct adm_swap *sw);

/* Worker side. */
static inline struct adm_snapshot *adm_swap_pin(struct adm_swap *sw, unsigned w)
{
    struct adm_snapshot *s = atomic_load_explicit(&sw->current, memory_order_acquire);
    atomic_store_explicit(&s->pins[w].n,
                          atomic_load_explicit(&s->pins[w].n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return s;
}

/* Pins <s>, which worker <w> loaded from the swap (the canary) during this
 * request step. */
static inline void adm_swap_pin_snap(struct adm_snapshot *s, unsigned w)
{
    atomic_store_explicit(&s->pins[w].n,
                          atomic_load_explicit(&s->pins[w].n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static inline void adm_swap_unpin(struct adm_snapshot *s, unsigned w)
{
    atomic_store_explicit(&s->pins[w].n,
                          atomic_load_explicit(&s->pins[w].n, memory_order_relaxed) - 1,
                          memory_order_release);
}

/* Called by worker <w> outside any request step (e.g. on its notify event):
 * from now on it can only load the current snapshot or a newer one. It
 * also serves the admin thread's request for a flip of the worker's ring
 * of the live sample (admin/sample.h), which comes by the same notify. */
static inline void adm_swap_ack(struct adm_swap *sw, unsigned w)
{
    struct adm_snapshot *s = atomic_load_explicit(&sw->current, memory_order_acquire);
    if (s->samples) /* the live sample's hand-over (admin/sample.h), outside any request */
        adm_sample_serve(s->samples->rings[w]);
    atomic_store_explicit(&sw->acks[w].seq, atomic_load_explicit(&sw->epoch, memory_order_acquire),
                          memory_order_release);
}

#endif
