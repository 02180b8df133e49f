/*
 * test_rr.c - upstream/rr.c: smooth weighted round robin (up_pick) gives
 * nginx's exact sequence, each worker its own, in weight proportion over
 * every period and over 10k picks; the precomputed schedule and the live
 * algorithm (pools whose period is too long) both match nginx's loop, kept
 * here as the oracle; unusable servers are skipped.
 */
#include "utest.h"

#include "upstream/up_int.h"

#include <check.h>
#include <stdlib.h>

/* One worker's picks over a pool of <weights> repeat <want> round after
 * round. */
static void expect_sequence(const unsigned *weights, size_t n, const size_t *want, size_t nwant)
{
    up_pool *p = ut_pool(weights, n, 1, 1);

    for (int round = 0; round < 10; round++)
        for (size_t i = 0; i < nwant; i++)
            ck_assert_uint_eq(up_pick(p, 0), want[i]);
    up_pool_release(p);
}

START_TEST(nginx_sequence)
{
    /* nginx's documented example: weights a=5 b=1 c=1 -> a a b a c a a */
    unsigned weights[] = {5, 1, 1};
    static const size_t want[] = {0, 0, 1, 0, 2, 0, 0};

    expect_sequence(weights, NELEM(weights), want, NELEM(want));
}
END_TEST

START_TEST(equal_weights_rotate)
{
    up_pool *p = ut_pool(NULL, 4, 1, 1);

    for (size_t i = 0; i < 12; i++)
        ck_assert_uint_eq(up_pick(p, 0), i % 4);
    up_pool_release(p);
}
END_TEST

START_TEST(single_server)
{
    unsigned weights[] = {9};
    up_pool *p = ut_pool(weights, 1, 1, 1);

    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(up_pick(p, 0), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(workers_are_independent)
{
    unsigned weights[] = {5, 1, 1};
    static const size_t want[] = {0, 0, 1, 0, 2, 0, 0};
    up_pool *p = ut_pool(weights, 3, 3, 1);

    /* Worker 1 picks a lot; worker 2 still starts at the beginning. */
    for (int i = 0; i < 1000; i++)
        up_pick(p, 1);
    for (size_t i = 0; i < NELEM(want); i++) {
        ck_assert_uint_eq(up_pick(p, 2), want[i]);
        ck_assert_uint_eq(up_pick(p, 0), want[i]);
    }
    up_pool_release(p);
}
END_TEST

START_TEST(proportions)
{
    unsigned weights[] = {1, 2, 3, 4, 10};
    unsigned total = 20, count[5] = {0};
    up_pool *p = ut_pool(weights, 5, 1, 1);

    /* Every window of one period (sum of weights) holds each server exactly
     * weight times; 10k picks are 500 whole periods. */
    for (int period = 0; period < 500; period++) {
        unsigned in_period[5] = {0};
        for (unsigned i = 0; i < total; i++)
            in_period[up_pick(p, 0)]++;
        for (size_t s = 0; s < 5; s++) {
            ck_assert_uint_eq(in_period[s], weights[s]);
            count[s] += in_period[s];
        }
    }
    for (size_t s = 0; s < 5; s++)
        ck_assert_uint_eq(count[s], 10000 * weights[s] / total);
    up_pool_release(p);
}
END_TEST

START_TEST(smooth)
{
    /* Smoothness: the heavy server never runs more than its share in a row;
     * with weights 3:1 the light one comes once in every four picks, and
     * 2:3 alternates as far as it can. */
    unsigned w31[] = {3, 1}, w23[] = {2, 3};
    static const size_t want31[] = {0, 0, 1, 0}, want23[] = {1, 0, 1, 0, 1};

    expect_sequence(w31, 2, want31, NELEM(want31));
    expect_sequence(w23, 2, want23, NELEM(want23));
}
END_TEST

/* nginx's loop, as pool.c ran it before the schedule: the oracle. */
static size_t oracle(const unsigned *weights, size_t n, long long *cw)
{
    long long total = 0;
    size_t best = 0;

    for (size_t i = 0; i < n; i++) {
        total += weights[i];
        cw[i] += weights[i];
        if (cw[i] > cw[best])
            best = i;
    }
    cw[best] -= total;
    return best;
}

static void check_against_oracle(const unsigned *weights, size_t n, unsigned picks, int live)
{
    up_pool *p = ut_pool(weights, n, 2, 1);
    long long *cw = calloc(n, sizeof(*cw));
    const struct up_rr *r = p->lb;

    ck_assert_ptr_nonnull(cw);
    ck_assert_int_eq(r->sched == NULL, live);
    for (unsigned i = 0; i < picks; i++)
        ck_assert_uint_eq(up_pick(p, 1), oracle(weights, n, cw));
    free(cw);
    up_pool_release(p);
}

START_TEST(schedule_matches_nginx)
{
    unsigned weights[64];
    uint64_t x = 42;

    /* random pools: 2..64 servers, weights 1..1000, three periods or more */
    for (int round = 0; round < 40; round++) {
        size_t n = 2 + (size_t)round % 63;
        unsigned total = 0;
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            weights[i] = 1 + (unsigned)((x >> 33) % (round % 2 ? 1000 : 5));
            total += weights[i];
        }
        check_against_oracle(weights, n, total < 3000 ? 3 * total : 9000, total > 65536);
    }
}
END_TEST

START_TEST(live_matches_nginx)
{
    unsigned weights[100];

    /* a period of 95,050 picks: too long to precompute, run live */
    for (size_t i = 0; i < 100; i++)
        weights[i] = 1000 - (unsigned)i;
    check_against_oracle(weights, 100, 5000, 1);
}
END_TEST

START_TEST(skips_unusable)
{
    unsigned weights[] = {5, 1, 1};
    up_pool *p = ut_pool(weights, 3, 1, 1);
    struct up_tried tried = {0};
    struct up_pick rq = {.tried = &tried};
    unsigned count[3];

    up_tried_add(&tried, 1);
    /* 1's turn goes to the next in the sequence: 5:1 between the others */
    ut_picks(p, &rq, 600, 0, count);
    ck_assert_uint_eq(count[1], 0);
    ck_assert_uint_eq(count[0], 500);
    up_health_set(p, 0, UP_H_CHECK, 1, 10);
    ut_picks(p, &rq, 100, 0, count);
    ck_assert_uint_eq(count[2], 100);
    up_tried_add(&tried, 2);
    ck_assert_uint_eq(up_select(p, 0, &rq), UP_NONE);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_start_ramps)
{
    ut_check_slow_start(UP_ROUND_ROBIN);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_rr");
    TCase *tc = tcase_create("round_robin");
    /* the oracle comparisons take a second or more under ASan on a busy machine */
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, nginx_sequence);
    tcase_add_test(tc, equal_weights_rotate);
    tcase_add_test(tc, single_server);
    tcase_add_test(tc, workers_are_independent);
    tcase_add_test(tc, proportions);
    tcase_add_test(tc, smooth);
    tcase_add_test(tc, schedule_matches_nginx);
    tcase_add_test(tc, live_matches_nginx);
    tcase_add_test(tc, skips_unusable);
    tcase_add_test(tc, slow_start_ramps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
