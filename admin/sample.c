/*
 * sample.c - the rings of the live traffic sample (admin/sample.h): their
 * sets, and the admin thread's consistent copy of a ring that a worker
 * keeps writing (the reader's half of a per-slot seqlock).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/sample.h"

#include <stdlib.h>

static struct adm_sample_ring *ring_new(size_t size)
{
    size_t bytes = sizeof(struct adm_sample_ring) + size * sizeof(struct adm_sample_slot);
    struct adm_sample_ring *r = aligned_alloc(64, (bytes + 63) & ~(size_t)63);

    if (!r)
        return NULL;
    atomic_init(&r->head, 0);
    r->pos = 0;
    r->size = size;
    for (size_t i = 0; i < size; i++) {
        atomic_init(&r->slots[i].seq, 0);
        atomic_init(&r->slots[i].meta, 0);
        for (size_t k = 0; k < ADM_SAMPLE_WORDS; k++)
            atomic_init(&r->slots[i].w[k], 0);
    }
    return r;
}

struct adm_sample_set *adm_sample_set_new(unsigned nworkers, size_t size)
{
    struct adm_sample_set *set = calloc(1, sizeof(*set) + nworkers * sizeof(set->rings[0]));

    if (!set)
        return NULL;
    set->refs = 1;
    set->nworkers = nworkers;
    set->size = size;
    for (unsigned w = 0; w < nworkers; w++)
        if (!(set->rings[w] = ring_new(size)))
            goto fail;
    return set;
fail:
    adm_sample_set_release(set);
    return NULL;
}

void adm_sample_set_release(struct adm_sample_set *set)
{
    if (!set || --set->refs > 0)
        return;
    for (unsigned w = 0; w < set->nworkers; w++)
        free(set->rings[w]);
    free(set);
}

struct adm_sample_set *adm_sample_set_for(struct adm_sample_set *prev, unsigned nworkers,
                                          size_t size)
{
    if (!size)
        return NULL;
    if (prev && prev->size == size && prev->nworkers == nworkers) {
        prev->refs++;
        return prev;
    }
    return adm_sample_set_new(nworkers, size);
}

/* Reads slot <sl> once: 1 with <e> filled when it held a whole entry that
 * did not change while read, 0 when it never held one, -1 when the writer
 * was in it. */
static int read_slot(const struct adm_sample_slot *sl, struct adm_sample *e)
{
    uint64_t s1 = atomic_load_explicit(&sl->seq, memory_order_acquire), s2, meta;
    uint64_t w[ADM_SAMPLE_WORDS];
    size_t lens[4], t = 0, nw;

    if (s1 == 0)
        return 0;
    if (s1 & 1)
        return -1;
    meta = atomic_load_explicit(&sl->meta, memory_order_relaxed);
    for (int i = 0; i < 4; i++)
        t += lens[i] = meta >> (8 * i) & 0xff;
    if (t > ADM_SAMPLE_TEXT) /* torn: the seq check below refuses it */
        t = 0;
    nw = (t + 7) / 8;
    for (size_t i = 0; i < nw; i++)
        w[i] = atomic_load_explicit(&sl->w[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the words before the second seq */
    s2 = atomic_load_explicit(&sl->seq, memory_order_relaxed);
    if (s1 != s2 || t != lens[0] + lens[1] + lens[2] + lens[3])
        return -1;
    memcpy(e->text, w, 8 * nw); /* as the writer's memcpy laid them out */
    e->n = s1 / 2 - 1;
    e->status = (unsigned)(meta >> 32 & 0xffff);
    e->truncated = (meta & ADM_SAMPLE_TRUNCATED) != 0;
    e->mlen = lens[0];
    e->hlen = lens[1];
    e->plen = lens[2];
    e->rlen = lens[3];
    e->method = e->text;
    e->host = e->method + e->mlen;
    e->path = e->host + e->hlen;
    e->route = e->rlen ? e->path + e->plen : NULL;
    return 1;
}

size_t adm_sample_copy(const struct adm_sample_ring *r, size_t from, size_t count,
                       struct adm_sample *out)
{
    size_t n = 0, end = from + count < r->size ? from + count : r->size;

    for (size_t i = from; i < end; i++) {
        int rc = -1;
        /* a few tries: the writer passes a slot in a few hundred
         * nanoseconds, and comes back to it only a ring later */
        for (int t = 0; t < 4 && rc < 0; t++)
            rc = read_slot(&r->slots[i], &out[n]);
        n += rc > 0;
    }
    return n;
}
