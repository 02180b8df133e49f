/*
 * sample.h - a live sample of real traffic: each worker's ring of its
 * recent requests (method, host, normalized path, and what the router
 * answered), which a dry run replays against the proposed routes.
 *
 * A worker writes its own ring (adm_sample_put, inline below) without a
 * lock and without writing any cache line another thread writes: the ring,
 * its write position and its slots belong to that worker. The admin thread
 * copies a ring (adm_sample_copy) at any time without stopping the worker:
 * every slot carries a sequence number, odd while the worker writes it
 * (a seqlock), so a copy keeps only the entries it read whole. The slot's
 * words are relaxed atomics, so the concurrent reads are not data races.
 *
 * Nothing else of a request is kept: no query string, no header field.
 *
 * A set (one ring per worker) is shared by the snapshots of one size
 * (refs, admin thread only): a push that keeps "sampling" keeps the
 * samples. Pure: no I/O, no logging.
 */
#ifndef SY_ADMIN_SAMPLE_H
#define SY_ADMIN_SAMPLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ADM_SAMPLE_DEFAULT 4096u /* entries per worker */
#define ADM_SAMPLE_MAX 65536u    /* the largest "sampling" (config.c says it too) */
#define ADM_SAMPLE_WORDS 30u     /* text words of a slot: 240 bytes (an even number) */
#define ADM_SAMPLE_TEXT (ADM_SAMPLE_WORDS * 8u)

/* The meta word: the four lengths (method, host, path, route id; a byte
 * each), the router's status (16 bits) and the truncated flag. */
#define ADM_SAMPLE_TRUNCATED (UINT64_C(1) << 48)

/* One entry: 256 bytes, four cache lines. */
struct adm_sample_slot {
    _Atomic uint64_t seq; /* 2n+1 while entry n is written, 2n+2 once whole; 0: never */
    _Atomic uint64_t meta;
    _Atomic uint64_t w[ADM_SAMPLE_WORDS]; /* method, host, path, route, one after another */
};

/* One worker's ring. The first cache line is the worker's (its position);
 * the slots follow. */
struct adm_sample_ring {
    _Atomic uint64_t head; /* entries written so far */
    uint64_t pos;          /* the next slot (the worker's only) */
    uint64_t size;         /* slots */
    char pad[64 - 3 * sizeof(uint64_t)];
    struct adm_sample_slot slots[];
};

/* The rings of every worker, shared by the snapshots with the same size. */
struct adm_sample_set {
    unsigned refs; /* admin thread only */
    unsigned nworkers;
    size_t size;
    struct adm_sample_ring *rings[];
};

/* A set of <nworkers> rings of <size> entries (size > 0). NULL on out of
 * memory. */
struct adm_sample_set *adm_sample_set_new(unsigned nworkers, size_t size);
/* Drops a reference; the last one frees the set. NULL is a no-op. */
void adm_sample_set_release(struct adm_sample_set *set);
/* The set a snapshot of <size> entries per worker uses: <prev>'s with one
 * more reference when it has that size and worker count (the samples
 * survive), else a new one; NULL for size 0 or out of memory (no samples). */
struct adm_sample_set *adm_sample_set_for(struct adm_sample_set *prev, unsigned nworkers,
                                          size_t size);

/* Copies <n> bytes of <s> to <d>: short strings (a method, a host, a
 * route id, most paths) by two overlapping loads and stores, without the
 * call and the size dispatch of memcpy. */
static inline void adm_sample_cpy(char *d, const char *s, size_t n)
{
    uint64_t a, b, c, e;
    uint32_t x, y;

    if (n > 32) {
        memcpy(d, s, n);
    } else if (n > 16) {
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        memcpy(&c, s + n - 16, 8);
        memcpy(&e, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + 8, &b, 8);
        memcpy(d + n - 16, &c, 8);
        memcpy(d + n - 8, &e, 8);
    } else if (n >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        memcpy(&x, s, 4);
        memcpy(&y, s + n - 4, 4);
        memcpy(d, &x, 4);
        memcpy(d + n - 4, &y, 4);
    } else if (n) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

/* Records one request in worker's ring <r>: its method, host (len 0:
 * none), the normalized path the router was given, the route id it hit
 * (<route> NULL: none) and the router's <status>. An entry whose strings
 * pass 240 bytes in all keeps only its status and the truncated flag. The strings are laid end to
 * end in a buffer on the stack first, which then goes into the slot a word at a time: the slot's
 * words must be atomic stores, and each string's own last word would cost
 * more than the copy. Worker only; no lock, no allocation. */
static inline void adm_sample_put(struct adm_sample_ring *r, const char *m, size_t ml,
                                  const char *h, size_t hl, const char *p, size_t pl,
                                  const char *route, size_t rl, unsigned status)
{
    uint64_t n = atomic_load_explicit(&r->head, memory_order_relaxed), v, v2;
    struct adm_sample_slot *sl = &r->slots[r->pos];
    uint64_t meta = (uint64_t)status << 32;
    size_t t = ml + hl + pl + rl;
    char buf[ADM_SAMPLE_TEXT + 16];

    atomic_store_explicit(&sl->seq, 2 * n + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* the odd seq before any word */
    if (t > ADM_SAMPLE_TEXT) {                 /* then each one fits its byte of meta too */
        meta |= ADM_SAMPLE_TRUNCATED;
    } else {
        meta |= ml | hl << 8 | pl << 16 | (uint64_t)rl << 24;
        adm_sample_cpy(buf, m, ml);
        adm_sample_cpy(buf + ml, h, hl);
        adm_sample_cpy(buf + ml + hl, p, pl);
        adm_sample_cpy(buf + ml + hl + pl, route, rl);
        memset(buf + t, 0, 16); /* the bytes past the text that the last turn stores */
        for (size_t k = 0; 8 * k < t; k += 2) { /* two words a turn (an even number of them) */
            memcpy(&v, buf + 8 * k, 8);
            memcpy(&v2, buf + 8 * k + 8, 8);
            atomic_store_explicit(&sl->w[k], v, memory_order_relaxed);
            atomic_store_explicit(&sl->w[k + 1], v2, memory_order_relaxed);
        }
    }
    atomic_store_explicit(&sl->meta, meta, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, 2 * n + 2, memory_order_release);
    atomic_store_explicit(&r->head, n + 1, memory_order_relaxed);
    r->pos = r->pos + 1 == r->size ? 0 : r->pos + 1;
}

/* An entry as the admin thread copied it. */
struct adm_sample {
    uint64_t n;                               /* its number in its ring */
    unsigned status;                          /* the router's (200 for a hit) */
    int truncated;                            /* strings did not fit: only the status is kept */
    const char *method, *host, *path, *route; /* into text; route NULL: none */
    size_t mlen, hlen, plen, rlen;
    char text[ADM_SAMPLE_TEXT];
};

/* Copies the whole entries of slots [<from>, <from> + <n>) of ring <r>
 * (clamped to its size) into <out> (room for <n>), never waiting for the
 * writer: a slot being written, or rewritten while it was read, is tried
 * again a few times and then left out. Returns how many it copied. An
 * entry's pointers point into itself: do not move one. Any thread. */
size_t adm_sample_copy(const struct adm_sample_ring *r, size_t from, size_t n,
                       struct adm_sample *out);

#endif
