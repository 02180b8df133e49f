/*
 * counters.c - per-worker, per-server counters (enum up_counter), in the
 * server's state (state.c), so they survive a swap. Each is written by its
 * worker alone and summed by readers on other threads (the admin API,
 * metrics) with relaxed loads. UP_C_FAILROW, in the same block, is a
 * worker's failures in a row on a server (up_failure_row).
 */
#include "upstream/up_int.h"

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
