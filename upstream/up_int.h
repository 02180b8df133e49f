/*
 * up_int.h - private structures of upstream/: the pool, its servers, the
 * per-server state pools share (struct up_sstate), the per-worker block,
 * the balancer interface (struct up_lb_ops) and the inline per-server tests
 * the balancers share. Only the sources of upstream/ and its tests include
 * this.
 *
 * Memory layout. Everything a worker writes lives on lines no other worker
 * writes. A pool's own per-worker state (balancer position, in-flight
 * counts) is that worker's block of one slab: the slab starts on a cache
 * line and every block is a whole number of lines long. A server's state
 * (health word, counters, idle stacks: what survives a swap, see state.c)
 * is one object per server address, its header (written by the health
 * owner) on lines of its own and then one part per worker, each a whole
 * number of lines (tests/upstream/test_pool.c checks both by address
 * arithmetic). What the workers only read (servers, weights, the
 * per-worker pointer tables) is written once by up_pool_new() (and
 * up_pool_carry(), before the pool is published) and never again, so it
 * can share lines freely.
 */
#ifndef SY_UPSTREAM_INT_H
#define SY_UPSTREAM_INT_H

#include "upstream/upstream.h"

#include <stdatomic.h>
#include <sys/socket.h>

/* The line size assumed for separation. 64 bytes on x86-64 and most arm64. */
#define UP_CACHE_LINE 64

/* The per-worker, per-server counters (counters.c). */
/* UP_C_FAILROW is not a count but worker w's failures in a row on the
 * server (outlier detection: up_failure_row). From UP_C_FAILURES on, one
 * count per enum up_failure. */
enum up_counter {
    UP_C_REQUESTS,
    UP_C_CONNECTS,
    UP_C_FAILROW,
    UP_C_FAILURES,
    UP_NCOUNTERS = UP_C_FAILURES + UP_NFAILURES
};

struct up_server {
    char *address;
    struct sockaddr_storage ss;
    socklen_t salen;
};

/* A worker's scalars, at the start of its block. */
struct up_wfix {
    uint64_t rng;  /* xorshift64* state: random_two, slow start */
    size_t cursor; /* round robin: the next entry of its schedule */
    void *slot;    /* the worker's own pointer (up_pool_worker_slot) */
};

/* One worker's part of a server's state (struct up_sstate): written by
 * that worker alone, on lines of its own. */
struct up_sworker {
    _Atomic uint64_t counts[UP_NCOUNTERS]; /* summed by readers (metrics) */
    unsigned nidle;                        /* idle connections parked */
    void *idle[];                          /* a stack of <keepalive> slots */
};

/* What a server keeps across swaps: shared, reference counted, by every
 * pool that has its address with the same keepalive (state.c). The header
 * is read by every worker's picks and written only by the health owner
 * (and the reference count, when a pool is made or freed); the worker parts
 * follow it from the next line on, <stride> bytes each. */
struct up_sstate {
    /* (since_ms << UP_FLAG_BITS) | flags, written by the owner with a
     * compare-and-swap, read with relaxed loads */
    _Atomic uint64_t health;
    _Atomic unsigned refs;
    unsigned nworkers, keepalive;
    size_t stride;
    struct sockaddr_storage ss; /* what pools match it by */
    socklen_t salen;
};

/* Where the worker parts start: the header rounded up to whole lines. */
#define UP_SS_HEAD ((sizeof(struct up_sstate) + UP_CACHE_LINE - 1) / UP_CACHE_LINE * UP_CACHE_LINE)

static inline struct up_sworker *up_sstate_worker(struct up_sstate *st, unsigned w)
{
    return (struct up_sworker *)((char *)st + UP_SS_HEAD + (size_t)w * st->stride);
}

/* A pool's own counters (enum up_pool_counter, counters.c): reference
 * counted and shared by every pool of the same name that up_pool_carry()
 * linked, so they outlive a changed definition. The header is written
 * only when a pool takes or drops a reference (admin thread); each
 * worker's part is a whole line of its own after it. */
struct up_pcworker {
    _Alignas(UP_CACHE_LINE) _Atomic uint64_t counts[UP_NPOOL_COUNTERS];
};
struct up_pcounts {
    _Alignas(UP_CACHE_LINE) _Atomic unsigned refs;
    unsigned nworkers;
    struct up_pcworker w[]; /* nworkers of them */
};

/* counters.c: new pool counters for <nworkers> workers, all 0, one
 * reference; NULL on out of memory. Release drops one (NULL: no-op). */
struct up_pcounts *up_pcounts_new(unsigned nworkers);
void up_pcounts_release(struct up_pcounts *pc);
/* counters.c: <p> (not published yet) takes <from>'s counters. */
void up_pcounts_carry(up_pool *p, const up_pool *from);

/* state.c: a new state for the server at <sa> (up, since 0, no counts, no
 * idle connections), one reference; NULL on out of memory. */
struct up_sstate *up_sstate_new(const struct sockaddr *sa, socklen_t salen, unsigned nworkers,
                                unsigned keepalive);
void up_sstate_release(struct up_sstate *st);

/* One worker's view of one pool: pointers into that worker's block of the
 * slab, and to its parts of the servers' states. The pointers themselves
 * are read-only once the pool is published. */
struct up_worker {
    struct up_wfix *fx;
    long long *cw;              /* smooth WRR current weights, per server */
    _Atomic uint32_t *inflight; /* requests in flight, per server, this worker's */
    struct up_sworker **sw;     /* per server: this worker's part of its state */
};

/* A balancer (h2o's {select, destroy}, with HAProxy lbprm's hooks). Its
 * shared state hangs off p->lb and is read-only after init; what it writes
 * per pick lives in the worker's block (struct up_worker). */
struct up_lb_ops {
    const char *name;
    /* Builds p->lb from the servers and p->opts. -1 on out of memory. */
    int (*init)(up_pool *p);
    /* Worker <w> picks a usable server (up_usable); when there is none, it
     * returns up_fallback(p, w, rq, ignore_health). */
    size_t (*select)(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health);
    /* Optional: a request starts or ends on <s> (worker <w>), after the
     * pool's own in-flight count moved to <load>. */
    void (*start)(up_pool *p, unsigned w, size_t s, uint32_t load);
    void (*end)(up_pool *p, unsigned w, size_t s, uint32_t load);
    /* Optional: server <s> went up or down, on the health owner's thread
     * while workers pick: a balancer that uses these publishes with atomics. */
    void (*server_up)(up_pool *p, size_t s);
    void (*server_down)(up_pool *p, size_t s);
    /* Frees p->lb (NULL is possible after a failed init). */
    void (*destroy)(up_pool *p);
};

extern const struct up_lb_ops up_lb_round_robin, up_lb_least_conn, up_lb_random_two, up_lb_hash;

struct up_pool {
    char *name, *key;
    size_t n;
    unsigned nworkers, keepalive;
    long long total_weight;
    struct up_server *servers; /* n of them */
    size_t *tags;              /* n of them, or NULL: all 0 */
    uint32_t *weight;          /* n of them, >= 1: packed, as balancers scan them */
    struct up_worker *ws;      /* nworkers of them */
    void *slab;                /* the per-worker blocks, ws[w] points into them */
    size_t stride;             /* bytes per block, a multiple of UP_CACHE_LINE */
    struct up_pool_opts opts;
    const struct up_lb_ops *lb_ops;
    void *lb; /* the balancer's shared, read-only state */
    /* per server: its state (health word, counters, idle stacks), maybe
     * shared with other pools that have its address (state.c) */
    struct up_sstate **st;
    struct up_pcounts *pc; /* the pool's own counters, maybe shared (counters.c) */
    /* Written whenever an upstream connection is made or freed: on a line
     * of its own, away from the fields every pick reads (the pool is
     * allocated on a line boundary). */
    _Alignas(UP_CACHE_LINE) _Atomic unsigned refs;
};

/* rr.c's shared state (here for its tests): the smooth weighted round
 * robin sequence over one period, or NULL when it runs live. */
struct up_rr {
    uint32_t *sched;
    size_t period;
};

/* For the balancers, inline because they run once per server on a pick. */

#define UP_FLAG_BITS 8 /* health word: (since_ms << UP_FLAG_BITS) | flags */
#define UP_FLAG_MASK ((1u << UP_FLAG_BITS) - 1)

static inline unsigned up_hflags(const up_pool *p, size_t s)
{
    return (unsigned)(atomic_load_explicit(&p->st[s]->health, memory_order_relaxed) & UP_FLAG_MASK);
}

/* <s> is neither tried nor (unless <ignore_health>) down. */
static inline int up_usable(const up_pool *p, size_t s, const struct up_pick *rq, int ignore_health)
{
    if (!ignore_health && up_hflags(p, s) != 0)
        return 0;
    return !rq || !rq->tried || !up_tried_has(rq->tried, s);
}

/* Slow start's share of server <s> at <now_ms>, in thousandths. Only a
 * server that is up ramps: one that is down is picked only by a panicking
 * pool, which spreads over every server alike (its since is when it went
 * down, not when it came back). */
static inline unsigned up_ramp(const up_pool *p, size_t s, uint64_t now_ms)
{
    uint64_t h;

    if (!p->opts.slow_start_ms || !now_ms)
        return 1000;
    h = atomic_load_explicit(&p->st[s]->health, memory_order_relaxed);
    if (h & UP_FLAG_MASK)
        return 1000;
    /* the common case inline: up for longer than the ramp */
    if (now_ms >= (h >> UP_FLAG_BITS) && now_ms - (h >> UP_FLAG_BITS) >= p->opts.slow_start_ms)
        return 1000;
    return up_slow_start_permille(h >> UP_FLAG_BITS, now_ms, p->opts.slow_start_ms);
}

/* The greatest common divisor of <a> and <b> (of a pool's weights: rr's
 * period, least_conn's scale). */
static inline uint64_t up_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Worker <w>'s next pseudo-random number (xorshift64*). */
static inline uint64_t up_rand(up_pool *p, unsigned w)
{
    uint64_t x = p->ws[w].fx->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->ws[w].fx->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A number below <bound> (< 2^32) from the high bits of <r>, without a
 * division (Lemire's multiply-shift). */
static inline uint32_t up_below(uint64_t r, uint32_t bound)
{
    return (uint32_t)(((r >> 32) * bound) >> 32);
}

/* Worker <w>'s slow-start admission of <s>: 1 always when <s> is not
 * ramping, else with its ramp's probability. */
static inline int up_slow_admit(up_pool *p, unsigned w, size_t s, uint64_t now_ms)
{
    unsigned share = up_ramp(p, s, now_ms);

    return share >= 1000 || up_below(up_rand(p, w), 1000) < share;
}

/* <c> ? <a> : <b> with a mask, not a branch. Where <c> is as good as
 * random (which of two servers is lighter, which side of an alias slot a
 * coin falls on) a branch mispredicts half the time, ~15 cycles each, and
 * gcc turns such ternaries into branches. */
static inline size_t up_sel(int c, size_t a, size_t b)
{
    return b ^ ((a ^ b) & (0 - (size_t)(c != 0)));
}

/* Worker <w>'s in-flight count on <s>. */
static inline uint32_t up_load(const up_pool *p, unsigned w, size_t s)
{
    return atomic_load_explicit(&p->ws[w].inflight[s], memory_order_relaxed);
}

/* balance.c: the first usable server from <from> on, wrapping; UP_NONE if
 * none. */
size_t up_scan(const up_pool *p, size_t from, const struct up_pick *rq, int ignore_health);

/* balance.c: what a balancer's select returns when it found no server (the
 * re-picks of slow start and panic, or UP_NONE); up_found: <s>, or that. */
size_t up_fallback(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health);
static inline size_t up_found(up_pool *p, unsigned w, const struct up_pick *rq, int ignore_health,
                              size_t s)
{
    return s != UP_NONE ? s : up_fallback(p, w, rq, ignore_health);
}

/* hash.c: a 64-bit finalizer (murmur3's fmix64), for seeds and hashes. */
uint64_t up_mix64(uint64_t x);

/* servers.c: copies <n> definitions into a new array (NULL on out of memory
 * or an address too long for sockaddr_storage); frees one such array. */
struct up_server *up_servers_new(const struct up_server_def *defs, size_t n);
void up_servers_free(struct up_server *s, size_t n);
/* servers.c: a malloc'd copy of <s>, NULL on out of memory. */
char *up_strdup(const char *s);

/* slab.c: nworkers blocks of at least <bytes> each, zeroed, the first on a
 * cache line and each a whole number of lines; the block size is stored in
 * <*stride>. Freed with free(). NULL on out of memory or overflow. */
void *up_slab_new(unsigned nworkers, size_t bytes, size_t *stride);

#endif
