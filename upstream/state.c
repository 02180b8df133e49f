/*
 * state.c - what a server keeps across swaps: its health word, its
 * counters and its idle connections (struct up_sstate), one object per
 * server address, reference counted and shared by every pool that has the
 * address. A snapshot build makes a changed pool from scratch and then
 * up_pool_carry() hands it the states of the servers the previous pool
 * already had, so a push that adds a server or changes a weight keeps the
 * health, the counts and the warm connections of the others.
 *
 * up_pool_carry() also hands the new pool the old one's pool counters
 * (counters.c): they belong to the pool's name, not to its definition.
 *
 * In-flight counts are not part of it: they stay with the pool a request
 * started on, because least_conn keeps each server in the bucket of its
 * key (its count per weight) and a count moved by another pool's request
 * would leave the server in a bucket not its own, behind the balancer's
 * back.
 */
#include "upstream/up_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct up_sstate *up_sstate_new(const struct sockaddr *sa, socklen_t salen, unsigned nworkers,
                                unsigned keepalive)
{
    size_t line = UP_CACHE_LINE, part, size;
    struct up_sstate *st;

    if (keepalive > (SIZE_MAX - 2 * line) / sizeof(void *) || salen > sizeof(st->ss))
        return NULL;
    part = (sizeof(struct up_sworker) + keepalive * sizeof(void *) + line - 1) / line * line;
    if (nworkers == 0 || part > (SIZE_MAX - UP_SS_HEAD) / nworkers)
        return NULL;
    size = UP_SS_HEAD + part * nworkers; /* a multiple of the line, as aligned_alloc wants */
    if (!(st = aligned_alloc(line, size)))
        return NULL;
    memset(st, 0, size);
    atomic_init(&st->health, 0);
    atomic_init(&st->refs, 1);
    st->nworkers = nworkers;
    st->keepalive = keepalive;
    st->stride = part;
    memcpy(&st->ss, sa, salen);
    st->salen = salen;
    for (unsigned w = 0; w < nworkers; w++)
        for (size_t k = 0; k < UP_NCOUNTERS; k++)
            atomic_init(&up_sstate_worker(st, w)->counts[k], 0);
    return st;
}

void up_sstate_release(struct up_sstate *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1)
        free(st);
}

static int same_address(const struct up_sstate *a, const struct up_sstate *b)
{
    return a->salen == b->salen && memcmp(&a->ss, &b->ss, a->salen) == 0;
}

/* <to> (fresh, not shared yet) takes <from>'s health word and counts. */
static void copy_state(struct up_sstate *to, const struct up_sstate *from)
{
    atomic_store_explicit(&to->health, atomic_load_explicit(&from->health, memory_order_relaxed),
                          memory_order_relaxed);
    for (unsigned w = 0; w < to->nworkers && w < from->nworkers; w++)
        for (size_t k = 0; k < UP_NCOUNTERS; k++)
            atomic_store_explicit(
                &up_sstate_worker(to, w)->counts[k],
                atomic_load_explicit(&up_sstate_worker((struct up_sstate *)from, w)->counts[k],
                                     memory_order_relaxed),
                memory_order_relaxed);
}

/* Makes <st> (a reference taken here) server <s>'s state in <p>. */
static void share(up_pool *p, size_t s, struct up_sstate *st)
{
    atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
    up_sstate_release(p->st[s]);
    p->st[s] = st;
    for (unsigned w = 0; w < p->nworkers; w++)
        p->ws[w].sw[s] = up_sstate_worker(st, w);
}

size_t up_pool_match(const up_pool *p, const up_pool *from, size_t *map)
{
    unsigned char *taken = calloc(from->n, 1);
    size_t kept = 0;

    if (!taken)
        return UP_NONE;
    for (size_t s = 0; s < p->n; s++) {
        map[s] = UP_NONE;
        for (size_t o = 0; o < from->n; o++) {
            if (taken[o] || !same_address(p->st[s], from->st[o]))
                continue;
            taken[o] = 1; /* a server listed twice takes two old ones, in order */
            map[s] = o;
            kept++;
            break;
        }
    }
    free(taken);
    return kept;
}

void up_pool_carry_map(up_pool *p, const up_pool *from, const size_t *map, int share_idle)
{
    if (!from || p == from)
        return;
    up_pcounts_carry(p, from); /* a pool's counts go on under its name */
    for (size_t s = 0; s < p->n; s++) {
        struct up_sstate *old = map[s] == UP_NONE ? NULL : from->st[map[s]];
        if (!old)
            continue;
        if (share_idle && old->keepalive == p->keepalive && old->nworkers == p->nworkers)
            share(p, s, old);
        else
            copy_state(p->st[s], old);
    }
}

size_t *up_pool_match_new(const up_pool *p, const up_pool *from, size_t *kept)
{
    size_t *map = malloc((p->n ? p->n : 1) * sizeof(*map));
    size_t n;

    if (map && (n = up_pool_match(p, from, map)) != UP_NONE) {
        if (kept)
            *kept = n;
        return map;
    }
    free(map);
    return NULL;
}

size_t up_pool_carry(up_pool *p, const up_pool *from, int share_idle)
{
    size_t *map, kept = 0;

    if (!from || p == from)
        return 0;
    if ((map = up_pool_match_new(p, from, &kept)))
        up_pool_carry_map(p, from, map, share_idle);
    else
        up_pcounts_carry(p, from); /* out of memory: the pool's counts at least */
    free(map);
    return kept;
}

size_t up_pool_same_server(const up_pool *p, const up_pool *other, size_t s)
{
    if (p == other)
        return s;
    for (size_t i = 0; i < p->n; i++)
        if (p->st[i] == other->st[s])
            return i;
    return UP_NONE;
}
