/*
 * test_least_conn.c - upstream/least_conn.c: the fewest requests in flight
 * per unit of weight wins, ties go by smooth weighted round robin, slow
 * start scales the weight, and each worker balances on its own counts.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static up_pool *lc_pool(const unsigned *weights, size_t n, unsigned nworkers)
{
    struct up_pool_opts o = {.balance = UP_LEAST_CONN};

    return ut_pool_opts(weights, n, nworkers, 1, &o);
}

START_TEST(prefers_less_loaded)
{
    up_pool *p = lc_pool(NULL, 3, 1);

    up_request_start(p, 0, 0);
    up_request_start(p, 0, 0);
    up_request_start(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 2);
    up_request_start(p, 0, 2);
    ck_assert_uint_eq(up_pick(p, 0), 1); /* 1 and 2 tie at one: round robin */
    ck_assert_uint_eq(up_pick(p, 0), 2);
    up_request_end(p, 0, 0);
    up_request_end(p, 0, 0);
    ck_assert_uint_eq(up_pick(p, 0), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_server_gets_less)
{
    /* A slow backend holds its requests ten times longer: the fast one
     * takes about nine new requests in ten. */
    up_pool *p = lc_pool(NULL, 2, 1);
    unsigned count[2] = {0};

    for (unsigned i = 0; i < 10000; i++) {
        size_t s = up_pick(p, 0);
        count[s]++;
        up_request_start(p, 0, s);
        /* server 0 finishes one request per tick, server 1 one per ten */
        if (up_inflight(p, 0))
            up_request_end(p, 0, 0);
        if (i % 10 == 9 && up_inflight(p, 1))
            up_request_end(p, 0, 1);
    }
    ck_assert_uint_gt(count[0], 8 * count[1]);
    ck_assert_uint_gt(count[1], 0);
    up_pool_release(p);
}
END_TEST

START_TEST(weighted_load)
{
    /* weight 3 vs 1: server 0 holds three in flight before server 1 gets
     * its second */
    unsigned weights[] = {3, 1};
    up_pool *p = lc_pool(weights, 2, 1);

    up_request_start(p, 0, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(up_pick(p, 0), 0);
        up_request_start(p, 0, 0);
    }
    /* now 3/3 and 1/1 tie */
    up_request_start(p, 0, up_pick(p, 0));
    ck_assert_uint_eq(up_inflight(p, 0) + up_inflight(p, 1), 5);
    up_pool_release(p);
}
END_TEST

START_TEST(per_worker_counts)
{
    up_pool *p = lc_pool(NULL, 2, 2);

    up_request_start(p, 1, 0);
    up_request_start(p, 1, 0);
    ck_assert_uint_eq(up_pick(p, 1), 1);
    ck_assert_uint_eq(up_pick(p, 0), 0); /* worker 0 sees no load: ties, round robin */
    ck_assert_uint_eq(up_pick(p, 0), 1);
    up_request_end(p, 1, 0);
    up_request_end(p, 1, 0);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_start_scales_weight)
{
    struct up_pool_opts o = {.balance = UP_LEAST_CONN, .slow_start_ms = 1000};
    up_pool *p = ut_pool_opts(NULL, 2, 1, 1, &o);
    struct up_pick rq = {.now_ms = 5000};

    up_health_set(p, 1, UP_H_CHECK, 1, 4000);
    up_health_set(p, 1, UP_H_CHECK, 0, 5000); /* back at 5000: weighs 10 % */
    up_request_start(p, 0, 1);
    for (int i = 0; i < 9; i++) {
        ck_assert_uint_eq(up_select(p, 0, &rq), 0);
        up_request_start(p, 0, 0);
    }
    rq.now_ms = 6000; /* ramp over: 9 vs 1 in flight, equal weights */
    ck_assert_uint_eq(up_select(p, 0, &rq), 1);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_least_conn");
    TCase *tc = tcase_create("least_conn");

    tcase_add_test(tc, prefers_less_loaded);
    tcase_add_test(tc, slow_server_gets_less);
    tcase_add_test(tc, weighted_load);
    tcase_add_test(tc, per_worker_counts);
    tcase_add_test(tc, slow_start_scales_weight);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
