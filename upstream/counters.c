/*
 * counters.c - per-worker, per-server counters (enum up_counter), in the
 * server's state (state.c), so they survive a swap; and per-worker, per-pool
 * counters (enum up_pool_counter) in a block the pools of one name share
 * (struct up_pcounts), for the same reason. Each is written by its worker
 * alone and summed by readers on other threads (the admin API, metrics)
 * with relaxed loads. UP_C_FAILROW, in the server's block, is a worker's
 * failures in a row on a server (up_failure_row).
 */
#include "upstream/up_int.h"

#include <stdlib.h>
#include <string.h>

/* Single-writer counters: a relaxed load and store, no read-modify-write. */
static void bump(up_pool *p, unsigned w, size_t s, enum up_counter k)
{
    _Atomic uint64_t *c = &p->ws[w].sw[s]->counts[k];

    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static uint64_t sum(const up_pool *p, size_t s, enum up_counter k)
{
    uint64_t n = 0;

    for (unsigned w = 0; w < p->nworkers; w++)
        n += atomic_load_explicit(&p->ws[w].sw[s]->counts[k], memory_order_relaxed);
    return n;
}

void up_count_request(up_pool *p, unsigned w, size_t s)
{
    bump(p, w, s, UP_C_REQUESTS);
}

void up_count_connect(up_pool *p, unsigned w, size_t s)
{
    bump(p, w, s, UP_C_CONNECTS);
}

uint64_t up_requests(const up_pool *p, size_t s)
{
    return sum(p, s, UP_C_REQUESTS);
}

uint64_t up_connects(const up_pool *p, size_t s)
{
    return sum(p, s, UP_C_CONNECTS);
}

void up_count_failure(up_pool *p, unsigned w, size_t s, enum up_failure kind)
{
    bump(p, w, s, (enum up_counter)(UP_C_FAILURES + kind));
}

uint64_t up_failures(const up_pool *p, size_t s, enum up_failure kind)
{
    return sum(p, s, (enum up_counter)(UP_C_FAILURES + kind));
}

const char *up_failure_name(enum up_failure kind)
{
    static const char *const names[UP_NFAILURES] = {"connect", "tls", "timeout", "reset", "5xx"};
    return (unsigned)kind < UP_NFAILURES ? names[kind] : "?";
}

unsigned up_failure_row(up_pool *p, unsigned w, size_t s, int failed)
{
    _Atomic uint64_t *c = &p->ws[w].sw[s]->counts[UP_C_FAILROW];
    uint64_t n = atomic_load_explicit(c, memory_order_relaxed);

    if (!failed) {
        if (n)
            atomic_store_explicit(c, 0, memory_order_relaxed);
        return 0;
    }
    atomic_store_explicit(c, n + 1, memory_order_relaxed);
    return (unsigned)(n + 1);
}

void up_failure_row_reset(up_pool *p, unsigned w, size_t s)
{
    atomic_store_explicit(&p->ws[w].sw[s]->counts[UP_C_FAILROW], 0, memory_order_relaxed);
}

struct up_pcounts *up_pcounts_new(unsigned nworkers)
{
    size_t size = sizeof(struct up_pcounts) + (size_t)nworkers * sizeof(struct up_pcworker);
    struct up_pcounts *pc;

    /* both sizes are whole lines (the members' alignment), as aligned_alloc wants */
    if (nworkers == 0 || !(pc = aligned_alloc(UP_CACHE_LINE, size)))
        return NULL;
    memset(pc, 0, size);
    atomic_init(&pc->refs, 1);
    pc->nworkers = nworkers;
    for (unsigned w = 0; w < nworkers; w++)
        for (size_t k = 0; k < UP_NPOOL_COUNTERS; k++)
            atomic_init(&pc->w[w].counts[k], 0);
    return pc;
}

void up_pcounts_release(struct up_pcounts *pc)
{
    if (pc && atomic_fetch_sub_explicit(&pc->refs, 1, memory_order_acq_rel) == 1)
        free(pc);
}

/* Shared when both have as many workers (always: workers is restart-only),
 * else copied worker by worker, so that a count never goes back. */
void up_pcounts_carry(up_pool *p, const up_pool *from)
{
    struct up_pcounts *old = from->pc;

    if (old == p->pc)
        return;
    if (old->nworkers == p->pc->nworkers) {
        atomic_fetch_add_explicit(&old->refs, 1, memory_order_relaxed);
        up_pcounts_release(p->pc);
        p->pc = old;
        return;
    }
    for (unsigned w = 0; w < p->pc->nworkers && w < old->nworkers; w++)
        for (size_t k = 0; k < UP_NPOOL_COUNTERS; k++)
            atomic_store_explicit(&p->pc->w[w].counts[k],
                                  atomic_load_explicit(&old->w[w].counts[k], memory_order_relaxed),
                                  memory_order_relaxed);
}

void up_pool_count(up_pool *p, unsigned w, enum up_pool_counter k, int64_t d)
{
    _Atomic uint64_t *c = &p->pc->w[w].counts[k];

    /* a negative <d> wraps: the sum over workers comes out right */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
                          memory_order_relaxed);
}

uint64_t up_pool_counted(const up_pool *p, enum up_pool_counter k)
{
    uint64_t n = 0;

    for (unsigned w = 0; w < p->pc->nworkers; w++)
        n += atomic_load_explicit(&p->pc->w[w].counts[k], memory_order_relaxed);
    return n;
}
