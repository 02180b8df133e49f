/*
 * test_counters.c - upstream/counters.c: per-worker counts, summed over the
 * workers per server, requests, connects and failures by kind apart, kept
 * by a changed pool for the servers it keeps; failure rows per worker;
 * pool counters summed over the workers, each worker's on a line of its
 * own, carried to a changed pool of the same name and never set back.
 */
#include "upstream/up_int.h"
#include "utest.h"

#include <check.h>
#include <stdint.h>
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

START_TEST(failures_by_kind)
{
    up_pool *p = ut_pool(NULL, 2, 2, 1);
    up_pool *q;

    up_count_failure(p, 0, 1, UP_F_CONNECT);
    up_count_failure(p, 1, 1, UP_F_CONNECT);
    up_count_failure(p, 1, 1, UP_F_5XX);
    up_count_failure(p, 0, 0, UP_F_TIMEOUT);
    ck_assert_uint_eq(up_failures(p, 1, UP_F_CONNECT), 2);
    ck_assert_uint_eq(up_failures(p, 1, UP_F_5XX), 1);
    ck_assert_uint_eq(up_failures(p, 1, UP_F_TIMEOUT), 0);
    ck_assert_uint_eq(up_failures(p, 0, UP_F_TIMEOUT), 1);
    ck_assert_uint_eq(up_failures(p, 0, UP_F_RESET), 0);
    ck_assert_uint_eq(up_failures(p, 0, UP_F_TLS), 0);
    /* not requests, connects nor a row */
    ck_assert_uint_eq(up_requests(p, 1), 0);
    ck_assert_uint_eq(up_connects(p, 1), 0);
    ck_assert_uint_eq(up_failure_row(p, 0, 1, 0), 0);
    ck_assert_str_eq(up_failure_name(UP_F_CONNECT), "connect");
    ck_assert_str_eq(up_failure_name(UP_F_TLS), "tls");
    ck_assert_str_eq(up_failure_name(UP_F_TIMEOUT), "timeout");
    ck_assert_str_eq(up_failure_name(UP_F_RESET), "reset");
    ck_assert_str_eq(up_failure_name(UP_F_5XX), "5xx");
    /* in the server's state: a changed pool that keeps the server keeps them */
    q = ut_pool(NULL, 3, 2, 1);
    ck_assert_uint_eq(up_pool_carry(q, p, 1), 2);
    ck_assert_uint_eq(up_failures(q, 1, UP_F_CONNECT), 2);
    ck_assert_uint_eq(up_failures(q, 2, UP_F_CONNECT), 0);
    up_pool_release(p);
    up_pool_release(q);
}
END_TEST

START_TEST(pool_counts_sum_over_workers)
{
    up_pool *p = ut_pool(NULL, 2, 3, 1);

    for (unsigned w = 0; w < 3; w++)
        for (unsigned i = 0; i <= w; i++)
            up_pool_count(p, w, UP_PC_RETRIES, 1);
    up_pool_count(p, 2, UP_PC_QUEUE_TIMEOUTS, 1);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_RETRIES), 6);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_QUEUE_TIMEOUTS), 1);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_BUDGET_EXHAUSTED), 0);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_QUEUE_OVERFLOWS), 0);
    /* the gauge: each worker adds and takes off its own */
    up_pool_count(p, 0, UP_PC_QUEUED, 1);
    up_pool_count(p, 1, UP_PC_QUEUED, 1);
    up_pool_count(p, 1, UP_PC_QUEUED, 1);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_QUEUED), 3);
    up_pool_count(p, 1, UP_PC_QUEUED, -1);
    up_pool_count(p, 0, UP_PC_QUEUED, -1);
    ck_assert_uint_eq(up_pool_counted(p, UP_PC_QUEUED), 1);
    /* pool counts are not the servers' */
    ck_assert_uint_eq(up_requests(p, 0) + up_requests(p, 1), 0);
    up_pool_release(p);
}
END_TEST

/* Each worker's part starts a line of its own, after the header's line. */
START_TEST(pool_counts_on_lines_of_their_own)
{
    up_pool *p = ut_pool(NULL, 1, 4, 1);
    uintptr_t head = (uintptr_t)p->pc;

    ck_assert_uint_eq(head % UP_CACHE_LINE, 0);
    for (unsigned w = 0; w < 4; w++) {
        uintptr_t a = (uintptr_t)&p->pc->w[w].counts[0];
        uintptr_t z = (uintptr_t)&p->pc->w[w].counts[UP_NPOOL_COUNTERS - 1];
        ck_assert_uint_eq(a % UP_CACHE_LINE, 0);
        ck_assert_uint_ge(a, head + UP_CACHE_LINE);
        ck_assert_uint_eq(a / UP_CACHE_LINE, z / UP_CACHE_LINE);
        if (w)
            ck_assert_uint_ge(a, (uintptr_t)&p->pc->w[w - 1].counts[UP_NPOOL_COUNTERS - 1] + 8);
    }
    up_pool_release(p);
}
END_TEST

/* A changed pool (new servers, other weights) shares the old one's
 * counters: counts through either are seen through both, and outlive the
 * old pool. */
START_TEST(pool_counts_carried_to_a_changed_pool)
{
    static const unsigned wb[] = {3, 1, 1};
    up_pool *a = ut_pool(NULL, 2, 2, 1), *b = ut_pool(wb, 3, 2, 1), *c;

    up_pool_count(a, 0, UP_PC_RETRIES, 1);
    up_pool_count(a, 1, UP_PC_QUEUE_OVERFLOWS, 1);
    up_pool_count(a, 1, UP_PC_QUEUED, 1);
    up_pool_count(b, 0, UP_PC_RETRIES, 1); /* before the carry: b's own, dropped */
    up_pool_carry(b, a, 1);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_RETRIES), 1);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_QUEUE_OVERFLOWS), 1);
    up_pool_count(b, 0, UP_PC_RETRIES, 1);
    ck_assert_uint_eq(up_pool_counted(a, UP_PC_RETRIES), 2);
    /* a request queued through the old pool leaves the queue */
    up_pool_count(a, 1, UP_PC_QUEUED, -1);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_QUEUED), 0);
    up_pool_release(a);
    up_pool_count(b, 1, UP_PC_BUDGET_EXHAUSTED, 1);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_RETRIES), 2);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_BUDGET_EXHAUSTED), 1);
    /* and on to the next change */
    c = ut_pool(NULL, 1, 2, 1);
    up_pool_carry(c, b, 0);
    up_pool_release(b);
    ck_assert_uint_eq(up_pool_counted(c, UP_PC_RETRIES), 2);
    ck_assert_uint_eq(up_pool_counted(c, UP_PC_QUEUE_OVERFLOWS), 1);
    up_pool_release(c); /* ASan builds catch a leak or a double free */
}
END_TEST

/* Pools for other worker counts cannot share a block: the counts are
 * copied, worker by worker, so they do not go back either. */
START_TEST(pool_counts_copied_across_worker_counts)
{
    up_pool *a = ut_pool(NULL, 1, 2, 1), *b = ut_pool(NULL, 1, 3, 1);

    up_pool_count(a, 0, UP_PC_RETRIES, 2);
    up_pool_count(a, 1, UP_PC_RETRIES, 1);
    up_pool_carry(b, a, 1);
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_RETRIES), 3);
    up_pool_count(b, 2, UP_PC_RETRIES, 1);
    ck_assert_uint_eq(up_pool_counted(a, UP_PC_RETRIES), 3); /* apart now */
    ck_assert_uint_eq(up_pool_counted(b, UP_PC_RETRIES), 4);
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_counters");
    TCase *tc = tcase_create("counters");

    tcase_add_test(tc, sums_over_workers);
    tcase_add_test(tc, failure_rows_per_worker);
    tcase_add_test(tc, failures_by_kind);
    tcase_add_test(tc, pool_counts_sum_over_workers);
    tcase_add_test(tc, pool_counts_on_lines_of_their_own);
    tcase_add_test(tc, pool_counts_carried_to_a_changed_pool);
    tcase_add_test(tc, pool_counts_copied_across_worker_counts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
