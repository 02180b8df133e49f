/*
 * sample.h - a live sample of real traffic: each worker's ring of its
 * recent requests (method, host, normalized path, and what the router
 * answered), which a dry run replays against the proposed routes.
 *
 * A worker writes its own ring (adm_sample_put, inline below) with plain
 * stores, without a lock and without writing any cache line another thread
 * writes. The admin thread never reads memory a worker may be writing: a
 * ring has two halves, and the worker writes only the active one. To read,
 * the admin thread asks for a flip (a release store of the ring's request
 * counter) and wakes the worker; the worker, outside any request (on its
 * notify event, adm_sample_serve), makes the other half active and
 * publishes the flip with a release store of its ack counter. The admin
 * thread, having loaded the ack with acquire, reads the half the worker
 * left, and asks for the next flip only once it has read it: each half
 * changes hands through a release/acquire pair, both ways.
 *
 * A half holds "sampling" entries: the half a flip leaves holds the most
 * recent ones since the flip before (a half starts empty when it becomes
 * active). The admin thread folds them into the set's own ring of the
 * last "sampling" entries of each worker (kept), which a dry run replays:
 * a dry run right after another still sees the whole sample.
 *
 * Nothing else of a request is kept: no query string, no header field.
 *
 * A set (one ring per worker) is shared by the snapshots of one size
 * (refs, admin thread only): a push that keeps "sampling" keeps the
 * samples. No logging; adm_sample_collect sleeps (50 ms at most).
 */
#ifndef SY_ADMIN_SAMPLE_H
#define SY_ADMIN_SAMPLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ADM_SAMPLE_DEFAULT 4096u /* entries per worker */
#define ADM_SAMPLE_MAX 65536u    /* the largest "sampling" (config.c says it too) */
#define ADM_SAMPLE_TEXT 240u     /* the strings of an entry, in all */
#define ADM_SAMPLE_WAIT_MS 50    /* adm_sample_collect's wait for the workers, in all */

/* A slot's method when the text holds it: a method llhttp does not know
 * (admin/http1's H1_METHOD_OTHER); any other is llhttp's method id, and
 * the reader names it (llhttp_method_name). */
#define ADM_SAMPLE_METHOD_OTHER 255u
/* The route id is read 32 bytes at a time up to this length: the writer's
 * <route> must have that many bytes readable (adm_sroute's id does). */
#define ADM_SAMPLE_ROUTE_PAD 32u

/* One entry: 256 bytes, four cache lines. Plain memory: whoever holds
 * its half reads or writes it. The text holds the route id, the method
 * (only an unknown one), the host and the path, one after another: the
 * route first, since its copy may write past its end. The head's fields
 * are volatile for the writer's sake only: each is one store then, where
 * gcc would otherwise merge them into a word built by shifts and ors,
 * which costs twice as many instructions. */
struct adm_sample_slot {
    volatile uint8_t len[4];  /* route id, method (0: by id), host, path */
    volatile uint16_t status; /* the router's */
    volatile uint8_t method;  /* llhttp's method id, or ADM_SAMPLE_METHOD_OTHER */
    volatile uint8_t truncated;
    char text[ADM_SAMPLE_TEXT];
    char pad[256 - 8 - ADM_SAMPLE_TEXT];
};

/* One worker's ring: two halves of <size> slots each (slots[0, size) and
 * slots[size, 2 size)). Its first cache line is the worker's; then the
 * admin thread's request counter; then the worker's ack counter; then the
 * slots. */
struct adm_sample_ring {
    struct adm_sample_slot *next; /* the active half's next slot (worker only) */
    uint64_t room;                /* slots from next to the half's end (worker only) */
    uint64_t size;                /* slots per half */
    uint64_t wrapped;             /* the active half wrapped since its flip (worker only) */
    uint64_t seen;                /* the last request served (worker only) */
    uint64_t left_pos, left_n;    /* the half the last flip left: its next slot and entries;
                                   * the worker writes them in a flip, the admin thread
                                   * reads them after the ack */
    char pad1[64 - 6 * sizeof(uint64_t) - sizeof(void *)];
    _Atomic uint64_t req; /* flips asked for (admin thread only writes it) */
    char pad2[64 - sizeof(uint64_t)];
    _Atomic uint64_t ack; /* flips done (the worker only writes it) */
    char pad3[64 - sizeof(uint64_t)];
    struct adm_sample_slot slots[];
};

/* The admin thread's own copy of a worker's last entries (kept). */
struct adm_sample_kept {
    struct adm_sample_slot *slots; /* <size> of them, a ring */
    size_t pos, n;                 /* the next slot; entries held */
    uint64_t folded;               /* the last flip whose half is in slots */
};

/* The rings of every worker, shared by the snapshots with the same size. */
struct adm_sample_set {
    unsigned refs; /* admin thread only */
    unsigned nworkers;
    size_t size;
    struct adm_sample_kept *kept; /* per worker; admin thread only */
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

/* Copies <n> bytes of <s> to <d> (apart): strings of up to 64 bytes (a
 * host, most paths) by overlapping moves, the short ones tested first,
 * without the call and the size dispatch of memcpy. */
static inline void adm_sample_cpy(char *restrict d, const char *restrict s, size_t n)
{
    uint64_t a, b;
    uint32_t x, y;

    if (n <= 16) {
        if (n >= 8) {
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
    } else if (n <= 32) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n <= 64) {
        memcpy(d, s, 16);
        memcpy(d + 16, s + 16, 16);
        memcpy(d + n - 32, s + n - 32, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else {
        memcpy(d, s, n);
    }
}

/* Records one request in worker's ring <r>: its method (<mid>, llhttp's
 * id, and the token <m> itself, which is copied only for
 * ADM_SAMPLE_METHOD_OTHER), host (len 0: none), the normalized path the
 * router was given, the route id it hit (<route> has ADM_SAMPLE_ROUTE_PAD
 * bytes readable when shorter; adm_sample_noroute and 0: none) and the router's
 * <status>. An entry whose strings pass 240 bytes in all keeps only its
 * status and the truncated flag. Plain stores into the active half: the
 * admin thread reads a half only after the worker has left it. Worker
 * only; no lock, no allocation. */
static inline void adm_sample_put(struct adm_sample_ring *r, unsigned mid, const char *m, size_t ml,
                                  const char *h, size_t hl, const char *p, size_t pl,
                                  const char *route, size_t rl, unsigned status)
{
    struct adm_sample_slot *sl = r->next;
    size_t t;

    ml = mid == ADM_SAMPLE_METHOD_OTHER ? ml : 0;
    t = rl + ml + hl + pl;
    sl->status = (uint16_t)status;
    sl->method = (uint8_t)mid;
    sl->truncated = t > ADM_SAMPLE_TEXT;
    if (t <= ADM_SAMPLE_TEXT) { /* then each length fits its byte */
        sl->len[0] = (uint8_t)rl;
        sl->len[1] = (uint8_t)ml;
        sl->len[2] = (uint8_t)hl;
        sl->len[3] = (uint8_t)pl;
        if (rl <= ADM_SAMPLE_ROUTE_PAD) { /* the bytes past it: overwritten next, or unused */
            memcpy(sl->text, route, 16);
            memcpy(sl->text + 16, route + 16, 16);
        } else {
            memcpy(sl->text, route, rl);
        }
        if (ml)
            memcpy(sl->text + rl, m, ml);
        adm_sample_cpy(sl->text + rl + ml, h, hl);
        adm_sample_cpy(sl->text + rl + ml + hl, p, pl);
    }
    r->next = sl + 1;
    if (--r->room == 0) {
        r->next -= r->size;
        r->room = r->size;
        r->wrapped = 1;
    }
}

/* The route id of a request without a route (length 0), readable as
 * adm_sample_put reads one. */
extern const char adm_sample_noroute[ADM_SAMPLE_ROUTE_PAD];

/* Makes the other half of <r> active and publishes the flip: the worker's
 * half of the hand-over (adm_sample_serve). */
void adm_sample_flip(struct adm_sample_ring *r, uint64_t req);

/* Serves the admin thread's request for a flip of worker's ring <r>, if
 * there is one. Worker only, outside any request (its notify event). */
static inline void adm_sample_serve(struct adm_sample_ring *r)
{
    uint64_t req = atomic_load_explicit(&r->req, memory_order_acquire);

    if (req != r->seen)
        adm_sample_flip(r, req);
}

/* Collects the workers' new entries into <set>'s kept rings: asks every
 * ring for a flip, wakes its worker with <notify>(<arg>, worker), waits
 * for the acks (ADM_SAMPLE_WAIT_MS in all, in short sleeps) and reads the
 * halves the workers left. A worker that does not answer in time (busy in
 * a long callback) is skipped: its entries wait for the next collection.
 * Returns how many were skipped. Admin thread only. */
unsigned adm_sample_collect(struct adm_sample_set *set, void (*notify)(void *arg, unsigned w),
                            void *arg);

/* An entry as the admin thread copied it. */
struct adm_sample {
    unsigned status;                          /* the router's (200 for a hit) */
    int truncated;                            /* strings did not fit: only the status is kept */
    const char *method, *host, *path, *route; /* into text; route NULL: none */
    size_t mlen, hlen, plen, rlen;
    char text[ADM_SAMPLE_TEXT];
};

/* Copies entries [<from>, <from> + <n>) of worker <w>'s kept entries in
 * <set> (oldest first; clamped to what it holds) into <out> (room for
 * <n>). Returns how many it copied. An entry's pointers point into itself:
 * do not move one. Admin thread only. */
size_t adm_sample_copy(const struct adm_sample_set *set, unsigned w, size_t from, size_t n,
                       struct adm_sample *out);

#endif
