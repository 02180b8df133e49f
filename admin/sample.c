/*
 * sample.c - the rings of the live traffic sample (admin/sample.h): their
 * sets; the worker's flip; and the admin thread's collection, which asks
 * every worker for a flip, waits for the acks and folds the halves they
 * left into its own copy of each worker's last entries.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/sample.h"

#include <llhttp.h>
#include <stdlib.h>
#include <time.h>

const char adm_sample_noroute[ADM_SAMPLE_ROUTE_PAD];

static struct adm_sample_ring *ring_new(size_t size)
{
    size_t bytes = sizeof(struct adm_sample_ring) + 2 * size * sizeof(struct adm_sample_slot);
    struct adm_sample_ring *r = aligned_alloc(64, (bytes + 63) & ~(size_t)63);

    if (!r)
        return NULL;
    memset(r, 0, sizeof(*r));
    r->next = r->slots;
    r->room = size;
    r->size = size;
    atomic_init(&r->req, 0);
    atomic_init(&r->ack, 0);
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
    if (!(set->kept = calloc(nworkers, sizeof(*set->kept))))
        goto fail;
    for (unsigned w = 0; w < nworkers; w++) {
        if (!(set->rings[w] = ring_new(size)))
            goto fail;
        if (!(set->kept[w].slots = malloc(size * sizeof(struct adm_sample_slot))))
            goto fail;
    }
    return set;
fail:
    adm_sample_set_release(set);
    return NULL;
}

void adm_sample_set_release(struct adm_sample_set *set)
{
    if (!set || --set->refs > 0)
        return;
    for (unsigned w = 0; w < set->nworkers; w++) {
        free(set->rings[w]);
        if (set->kept)
            free(set->kept[w].slots);
    }
    free(set->kept);
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

void adm_sample_flip(struct adm_sample_ring *r, uint64_t req)
{
    /* what the admin thread reads of the half left behind */
    struct adm_sample_slot *half = r->next + r->room - r->size; /* the active one's start */

    r->left_pos = r->size - r->room;
    r->left_n = r->wrapped ? r->size : r->left_pos;
    r->next = half == r->slots ? r->slots + r->size : r->slots;
    r->room = r->size;
    r->wrapped = 0;
    r->seen = req;
    /* every plain write to the half left (and to left_*) before the
     * admin thread's reads of it */
    atomic_store_explicit(&r->ack, req, memory_order_release);
}

/* Appends the half of ring <r> that flip number <flips> left to <k>,
 * oldest entry first. After the ack's acquire load only. */
static void fold(struct adm_sample_kept *k, const struct adm_sample_ring *r, uint64_t flips,
                 size_t size)
{
    /* flip 1 leaves the first half, flip 2 the second, and so on */
    const struct adm_sample_slot *half = flips % 2 ? r->slots : r->slots + size;
    size_t n = r->left_n;
    size_t first = n < size ? 0 : r->left_pos; /* the oldest once it wrapped */

    for (size_t i = 0; i < n; i++) {
        k->slots[k->pos] = half[(first + i) % size];
        k->pos = k->pos + 1 == size ? 0 : k->pos + 1;
    }
    k->n = k->n + n < size ? k->n + n : size;
}

static double mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

unsigned adm_sample_collect(struct adm_sample_set *set, void (*notify)(void *arg, unsigned w),
                            void *arg)
{
    const struct timespec step = {0, 200000}; /* 0.2 ms */
    double deadline = mono_ms() + ADM_SAMPLE_WAIT_MS;
    unsigned pending = 0, skipped = 0;
    char *done = calloc(set->nworkers, 1);

    if (!done)
        return set->nworkers;
    for (unsigned w = 0; w < set->nworkers; w++) {
        struct adm_sample_ring *r = set->rings[w];
        struct adm_sample_kept *k = &set->kept[w];
        uint64_t req = atomic_load_explicit(&r->req, memory_order_relaxed);
        uint64_t ack = atomic_load_explicit(&r->ack, memory_order_acquire);
        /* a worker skipped last time may have served its flip since: read
         * that half first; one that still owes it is asked for no second
         * one (the half it leaves must be read first) */
        if (ack == req && k->folded != ack) {
            fold(k, r, ack, set->size);
            k->folded = ack;
        }
        if (ack == req)
            atomic_store_explicit(&r->req, req + 1, memory_order_release);
        if (notify)
            notify(arg, w);
        pending++;
    }
    while (pending) {
        for (unsigned w = 0; w < set->nworkers; w++) {
            struct adm_sample_ring *r = set->rings[w];
            uint64_t ack;
            if (done[w])
                continue;
            ack = atomic_load_explicit(&r->ack, memory_order_acquire);
            if (ack != atomic_load_explicit(&r->req, memory_order_relaxed))
                continue;
            fold(&set->kept[w], r, ack, set->size);
            set->kept[w].folded = ack;
            done[w] = 1;
            pending--;
        }
        if (!pending || mono_ms() >= deadline)
            break;
        nanosleep(&step, NULL);
    }
    for (unsigned w = 0; w < set->nworkers; w++)
        skipped += !done[w];
    free(done);
    return skipped;
}

/* Fills <e> from the kept slot <sl>. */
static void decode(const struct adm_sample_slot *sl, struct adm_sample *e)
{
    unsigned mid = sl->method;
    size_t rl = sl->len[0], ml = sl->len[1];

    e->status = sl->status;
    e->truncated = sl->truncated;
    e->hlen = sl->len[2];
    e->plen = sl->len[3];
    if (e->truncated)
        rl = ml = e->hlen = e->plen = 0;
    memcpy(e->text, sl->text, rl + ml + e->hlen + e->plen);
    e->route = rl ? e->text : NULL;
    e->rlen = rl;
    if (mid == ADM_SAMPLE_METHOD_OTHER || e->truncated) {
        e->method = e->text + rl;
        e->mlen = ml;
    } else {
        e->method = llhttp_method_name((llhttp_method_t)mid);
        e->mlen = strlen(e->method);
    }
    e->host = e->text + rl + ml;
    e->path = e->host + e->hlen;
}

size_t adm_sample_copy(const struct adm_sample_set *set, unsigned w, size_t from, size_t count,
                       struct adm_sample *out)
{
    const struct adm_sample_kept *k = &set->kept[w];
    size_t oldest = k->n < set->size ? 0 : k->pos, n = 0;

    for (size_t i = from; i < k->n && n < count; i++)
        decode(&k->slots[(oldest + i) % set->size], &out[n++]);
    return n;
}
