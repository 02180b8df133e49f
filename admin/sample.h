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
#define ADM_SAMPLE_MAX 1048576u  /* the largest "sampling" (config.c says it too) */
#define ADM_SAMPLE_WORDS 30u     /* text words of a slot: 240 bytes */
#define ADM_SAMPLE_TEXT (ADM_SAMPLE_WORDS * 8u)

/* The meta word: the four lengths (method, host, path, route id; a byte
 * each), the router's status (16 bits) and the truncated flag. */
#define ADM_SAMPLE_TRUNCATED (UINT64_C(1) << 48)

/* One entry: 256 bytes, four cache lines. */
struct adm_sample_slot {
    _Atomic uint64_t seq; /* 2n+1 while entry n is written, 2n+2 once whole; 0: never */
    _Atomic uint64_t meta;
    _Atomic uint64_t w[ADM_SAMPLE_WORDS]; /* method, host, path, route: each from a word */
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

/* The last <n> bytes (0 < n < 8) of the string <s> of <len> bytes as a
 * word, its first byte lowest, as adm_sample_copy() unpacks it. */
static inline uint64_t adm_sample_tail(const char *s, size_t len, size_t n)
{
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t a;
    uint16_t b;
    unsigned sh = 0;

    if (len >= 8) { /* one load of the last 8 bytes, the tail shifted down */
        memcpy(&v, s + len - 8, 8);
        return v >> (8 * (8 - n));
    }
    s += len - n;
    if (n & 4) {
        memcpy(&a, s, 4);
        v = a;
        s += 4;
        sh = 32;
    }
    if (n & 2) {
        memcpy(&b, s, 2);
        v |= (uint64_t)b << sh;
        s += 2;
        sh += 16;
    }
    if (n & 1)
        v |= (uint64_t)(unsigned char)*s << sh;
#else
    s += len - n;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)(unsigned char)s[i] << (8 * i);
#endif
    return v;
}

/* Stores the <n> bytes of <s> from word <w> on; returns the words used. */
static inline size_t adm_sample_words(_Atomic uint64_t *w, const char *s, size_t n)
{
    size_t k = 0, len = n;
    uint64_t v;

    for (; n >= 8; n -= 8, s += 8) {
        memcpy(&v, s, 8);
        atomic_store_explicit(&w[k++], v, memory_order_relaxed);
    }
    if (!n)
        return k;
    atomic_store_explicit(&w[k], adm_sample_tail(s + n - len, len, n), memory_order_relaxed);
    return k + 1;
}

/* Records one request in worker's ring <r>: its method, host (len 0:
 * none), the normalized path the router was given, the route id it hit
 * (<route> NULL: none) and the router's <status>. An entry whose strings
 * do not fit a slot keeps only its status and the truncated flag. Worker
 * only; no lock, no allocation. */
static inline void adm_sample_put(struct adm_sample_ring *r, const char *m, size_t ml,
                                  const char *h, size_t hl, const char *p, size_t pl,
                                  const char *route, size_t rl, unsigned status)
{
    uint64_t n = atomic_load_explicit(&r->head, memory_order_relaxed);
    struct adm_sample_slot *sl = &r->slots[r->pos];
    uint64_t meta = (uint64_t)status << 32;
    size_t k = 0;

    atomic_store_explicit(&sl->seq, 2 * n + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* the odd seq before any word */
    if (((ml + 7) >> 3) + ((hl + 7) >> 3) + ((pl + 7) >> 3) + ((rl + 7) >> 3) > ADM_SAMPLE_WORDS ||
        (ml | hl | pl | rl) > 255) {
        meta |= ADM_SAMPLE_TRUNCATED;
    } else {
        meta |= ml | hl << 8 | pl << 16 | (uint64_t)rl << 24;
        k = adm_sample_words(sl->w, m, ml);
        k += adm_sample_words(sl->w + k, h, hl);
        k += adm_sample_words(sl->w + k, p, pl);
        adm_sample_words(sl->w + k, route, rl);
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
    char text[ADM_SAMPLE_TEXT + 4];
};

/* Copies the whole entries of slots [<from>, <from> + <n>) of ring <r>
 * (clamped to its size) into <out> (room for <n>), never waiting for the
 * writer: a slot being written, or rewritten while it was read, is tried
 * again a few times and then left out. Returns how many it copied. An
 * entry's pointers point into itself: do not move one. Any thread. */
size_t adm_sample_copy(const struct adm_sample_ring *r, size_t from, size_t n,
                       struct adm_sample *out);

#endif
