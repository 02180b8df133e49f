/*
 * test_counters.c - upstream/counters.c: per-worker counts, summed over the
 * workers per server, requests and connects apart; failure rows per worker.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

START_TEST(sums_over_workers)
{
    up_pool *p = ut_pool(NULL, 2, 3, 1);

    for (unsigned w = 0; w < 3; w++)
        for (unsigned i = 0; i <= w; i++)
            up_count_request(p, w, 1);
    up_count_connect(p, 2, 0);
    up_count_connect(p, 0, 0);
    ck_assert_uint_eq(up_requests(p, 0), 0);
    ck_assert_uint_eq(up_requests(p, 1), 6);
    ck_assert_uint_eq(up_connects(p, 0), 2);
    ck_assert_uint_eq(up_connects(p, 1), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(failure_rows_per_worker)
{
    up_pool *p = ut_pool(NULL, 2, 2, 1);

    ck_assert_uint_eq(up_failure_row(p, 0, 1, 1), 1);
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 1), 2);
    ck_assert_uint_eq(up_failure_row(p, 1, 1, 1), 1); /* each worker its own row */
    ck_assert_uint_eq(up_failure_row(p, 0, 0, 1), 1); /* and each server */
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 1), 3);
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 0), 0); /* a success ends the row */
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 1), 1);
    up_failure_row_reset(p, 0, 1);
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 0), 0);
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 1), 1);
    /* rows are not requests nor connects */
    ck_assert_uint_eq(up_requests(p, 1), 0);
    ck_assert_uint_eq(up_connects(p, 1), 0);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_counters");
    TCase *tc = tcase_create("counters");

    tcase_add_test(tc, sums_over_workers);
    tcase_add_test(tc, failure_rows_per_worker);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
