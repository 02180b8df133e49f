/*
 * test_pool.c - upstream/pool.c, servers.c and slab.c: a pool copies its
 * definitions, counts references, and lays every worker's writable state
 * out on cache lines no other worker writes, with the reference count
 * away from what picks read (checked by address arithmetic on the real
 * layout).
 */
#include "upstream/up_int.h"
#include "utest.h"

#include <check.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(copies_definitions)
{
    unsigned weights[] = {3, 0, 7};
    up_pool *p = ut_pool(weights, 3, 2, 4);
    socklen_t len = 0;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)up_server_sockaddr(p, 2, &len);

    ck_assert_str_eq(up_pool_name(p), "t");
    ck_assert_str_eq(up_pool_key(p), "key");
    ck_assert_uint_eq(up_pool_nservers(p), 3);
    ck_assert_str_eq(up_server_address(p, 1), "127.0.0.1:9002");
    ck_assert_uint_eq(len, sizeof(*sin));
    ck_assert_uint_eq(ntohs(sin->sin_port), 9003);
    ck_assert_uint_eq(p->weight[1], 1); /* 0 means 1 */
    ck_assert_int_eq(p->total_weight, 11);
    up_pool_release(p);
}
END_TEST

START_TEST(refuses_empty)
{
    struct up_server_def none = {0};

    ck_assert_ptr_null(up_pool_new("t", "", &none, 0, 1, 1));
    ck_assert_ptr_null(up_pool_new("t", "", &none, 1, 0, 1));
    up_pool_release(NULL);
}
END_TEST

START_TEST(reference_count)
{
    up_pool *p = ut_pool(NULL, 1, 1, 1);

    up_pool_retain(p);
    ck_assert_uint_eq(up_pool_refs(p), 2);
    up_pool_release(p);
    ck_assert_uint_eq(atomic_load(&p->refs), 1);
    ck_assert_uint_eq(up_pool_refs(p), 1);
    up_pool_release(p); /* frees: ASan builds catch a leak or a double free */
}
END_TEST

/* A byte range [lo, hi) and the worker that writes it. */
struct span {
    uintptr_t lo, hi;
    unsigned w;
};

static size_t add(struct span *s, size_t k, const void *base, size_t len, unsigned w)
{
    s[k].lo = (uintptr_t)base;
    s[k].hi = (uintptr_t)base + len;
    s[k].w = w;
    return k + 1;
}

/* For every pair of ranges written by different workers, no cache line holds
 * bytes of both: the last line of one ends before the first line of the
 * other begins. */
static void check_separate(const struct span *s, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        ck_assert(s[i].lo < s[i].hi);
        for (size_t j = 0; j < k; j++) {
            if (s[i].w == s[j].w)
                continue;
            uintptr_t ilo = s[i].lo / UP_CACHE_LINE, ihi = (s[i].hi - 1) / UP_CACHE_LINE;
            uintptr_t jlo = s[j].lo / UP_CACHE_LINE, jhi = (s[j].hi - 1) / UP_CACHE_LINE;
            ck_assert_msg(ihi < jlo || jhi < ilo, "workers %u and %u share a line", s[i].w, s[j].w);
        }
    }
}

START_TEST(workers_never_share_a_line)
{
    /* Sizes that make every array end mid-line if nothing pads them. */
    static const size_t ns[] = {1, 3, 5, 7};
    static const unsigned kas[] = {0, 1, 3};

    for (size_t a = 0; a < NELEM(ns); a++) {
        for (size_t b = 0; b < NELEM(kas); b++) {
            size_t n = ns[a];
            unsigned nw = 4, owner = nw; /* the health owner writes the states' headers */
            up_pool *p = ut_pool(NULL, n, nw, kas[b]);
            struct span s[4 * 4 + 7 * (1 + 4 * 3)];
            size_t k = 0;

            ck_assert_uint_eq((uintptr_t)p->slab % UP_CACHE_LINE, 0);
            ck_assert_uint_eq(p->stride % UP_CACHE_LINE, 0);
            for (unsigned w = 0; w < nw; w++) {
                const struct up_worker *st = &p->ws[w];
                uintptr_t blo = (uintptr_t)p->slab + w * p->stride;
                k = add(s, k, st->fx, sizeof(*st->fx), w);
                k = add(s, k, st->cw, n * sizeof(*st->cw), w);
                k = add(s, k, st->inflight, n * sizeof(*st->inflight), w);
                /* (st->sw is read-only once published, written by nobody) */
                /* and each array lies inside the worker's own block */
                for (size_t i = k - 3; i < k; i++)
                    ck_assert(s[i].lo >= blo && s[i].hi <= blo + p->stride);
            }
            /* each server's state: the header, then one part per worker */
            for (size_t i = 0; i < n; i++) {
                struct up_sstate *ss = p->st[i];
                uintptr_t base = (uintptr_t)ss;
                ck_assert_uint_eq(base % UP_CACHE_LINE, 0);
                ck_assert_uint_eq(ss->stride % UP_CACHE_LINE, 0);
                k = add(s, k, ss, sizeof(*ss), owner);
                for (unsigned w = 0; w < nw; w++) {
                    struct up_sworker *sw = p->ws[w].sw[i];
                    uintptr_t plo = base + UP_SS_HEAD + w * ss->stride;
                    ck_assert_ptr_eq(sw, up_sstate_worker(ss, w));
                    k = add(s, k, sw->counts, sizeof(sw->counts), w);
                    k = add(s, k, &sw->nidle, sizeof(sw->nidle), w);
                    k = add(s, k, sw->idle, (kas[b] ? kas[b] : 1) * sizeof(*sw->idle), w);
                    /* the idle stack's real slots fit the part */
                    ck_assert((uintptr_t)(sw->idle + kas[b]) <= plo + ss->stride);
                    ck_assert((uintptr_t)sw >= plo);
                }
            }
            check_separate(s, k);
            up_pool_release(p);
        }
    }
}
END_TEST

START_TEST(refs_on_a_line_of_its_own)
{
    up_pool *p = ut_pool(NULL, 3, 2, 1);
    uintptr_t refs = (uintptr_t)&p->refs / UP_CACHE_LINE;
    /* the fields a pick reads */
    const void *hot[] = {&p->n,      &p->weight, &p->ws, &p->opts,
                         &p->lb_ops, &p->lb,     &p->st, &p->total_weight};

    ck_assert_uint_eq((uintptr_t)p % UP_CACHE_LINE, 0);
    for (size_t i = 0; i < NELEM(hot); i++)
        ck_assert_uint_ne((uintptr_t)hot[i] / UP_CACHE_LINE, refs);
    up_pool_release(p);
}
END_TEST

START_TEST(slab_rounds_up)
{
    size_t stride = 0;
    char *slab = up_slab_new(3, 1, &stride);

    ck_assert_ptr_nonnull(slab);
    ck_assert_uint_eq(stride, UP_CACHE_LINE);
    ck_assert_uint_eq((uintptr_t)slab % UP_CACHE_LINE, 0);
    for (size_t i = 0; i < 3 * stride; i++)
        ck_assert_int_eq(slab[i], 0);
    free(slab);
    slab = up_slab_new(2, UP_CACHE_LINE + 1, &stride);
    ck_assert_uint_eq(stride, 2 * UP_CACHE_LINE);
    free(slab);
    ck_assert_ptr_null(up_slab_new(0, 8, &stride));
    ck_assert_ptr_null(up_slab_new(2, SIZE_MAX - 8, &stride));
    ck_assert_ptr_null(up_slab_new(4, SIZE_MAX / 2, &stride));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_pool");
    TCase *tc = tcase_create("pool");

    tcase_add_test(tc, copies_definitions);
    tcase_add_test(tc, refuses_empty);
    tcase_add_test(tc, reference_count);
    tcase_add_test(tc, workers_never_share_a_line);
    tcase_add_test(tc, refs_on_a_line_of_its_own);
    tcase_add_test(tc, slab_rounds_up);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
