/*
 * test_random_two.c - upstream/random_two.c: two weighted candidates, the
 * less loaded one wins: a loaded server loses most picks, a slow one gets
 * less, and with no load the weights hold (test_balance.c checks ±3 %);
 * slow start gives a server back up its ramp's share.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static up_pool *r2_pool(size_t n)
{
    struct up_pool_opts o = {.balance = UP_RANDOM_TWO, .seed = 1234};

    return ut_pool_opts(NULL, n, 1, 1, &o);
}

START_TEST(prefers_less_loaded)
{
    up_pool *p = r2_pool(2);
    unsigned count[2] = {0};

    /* server 0 busy: it wins only when drawn twice (1 in 4) */
    up_request_start(p, 0, 0);
    for (int i = 0; i < 10000; i++)
        count[up_pick(p, 0)]++;
    ck_assert_uint_gt(count[0], 2000);
    ck_assert_uint_lt(count[0], 3000);
    up_request_end(p, 0, 0);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_server_gets_less)
{
    /* three servers, server 2 ten times slower (as in test_least_conn.c) */
    up_pool *p = r2_pool(3);
    unsigned count[3] = {0};

    for (unsigned i = 0; i < 10000; i++) {
        size_t s = up_pick(p, 0);
        count[s]++;
        up_request_start(p, 0, s);
        for (size_t f = 0; f < 2; f++)
            if (up_inflight(p, f))
                up_request_end(p, 0, f);
        if (i % 10 == 9 && up_inflight(p, 2))
            up_request_end(p, 0, 2);
    }
    ck_assert_uint_lt(count[2], 10000 / 3 / 2);
    ck_assert_uint_gt(count[0], 10000 / 3);
    ck_assert_uint_gt(count[1], 10000 / 3);
    up_pool_release(p);
}
END_TEST

START_TEST(same_seed_same_picks)
{
    up_pool *a = r2_pool(5), *b = r2_pool(5);

    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(up_pick(a, 0), up_pick(b, 0));
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

START_TEST(slow_start_ramps)
{
    /* as ut_check_slow_start, with a random draw's margins: the second
     * server's share of 10k picks with no load is 0.1 / 1.1 at the start
     * (909), 0.5 / 1.5 half way (3333), a half after (5000); sd ~29, ~47
     * and 50. Under load (20 in flight) it stays well below half. */
    unsigned got[3];

    ut_slow_start_counts(UP_RANDOM_TWO, 0, got);
    ck_assert_msg(got[0] > 750 && got[0] < 1070, "ramp start: %u of 10000", got[0]);
    ck_assert_msg(got[1] > 3100 && got[1] < 3570, "half way: %u of 10000", got[1]);
    ck_assert_msg(got[2] > 4750 && got[2] < 5250, "ramp over: %u of 10000", got[2]);
    ut_slow_start_counts(UP_RANDOM_TWO, 20, got);
    ck_assert_msg(got[0] > 500 && got[0] < 2500, "loaded ramp start: %u", got[0]);
    ck_assert_msg(got[2] > 4000 && got[2] < 6000, "loaded ramp over: %u", got[2]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_random_two");
    TCase *tc = tcase_create("random_two");

    tcase_add_test(tc, prefers_less_loaded);
    tcase_add_test(tc, slow_server_gets_less);
    tcase_add_test(tc, same_seed_same_picks);
    tcase_add_test(tc, slow_start_ramps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
