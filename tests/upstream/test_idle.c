/*
 * test_idle.c - upstream/idle.c: per-worker, per-server stacks of idle
 * connections: last in first out, bounded by keepalive, removable from the
 * middle, and kept apart between workers and servers.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static int conns[8]; /* opaque pointers to park */

START_TEST(lifo_and_bounded)
{
    up_pool *p = ut_pool(NULL, 2, 1, 3);

    ck_assert_ptr_null(up_idle_get(p, 0, 0));
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_idle_put(p, 0, 0, &conns[i]), 0);
    ck_assert_int_eq(up_idle_put(p, 0, 0, &conns[3]), -1); /* full: caller closes it */
    ck_assert_uint_eq(up_idle_count(p, 0, 0), 3);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[2]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[1]);
    ck_assert_int_eq(up_idle_put(p, 0, 0, &conns[4]), 0);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[4]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[0]);
    ck_assert_ptr_null(up_idle_get(p, 0, 0));
    ck_assert_uint_eq(up_idle_count(p, 0, 0), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(remove_from_middle)
{
    up_pool *p = ut_pool(NULL, 1, 1, 4);

    for (int i = 0; i < 4; i++)
        up_idle_put(p, 0, 0, &conns[i]);
    ck_assert_int_eq(up_idle_remove(p, 0, 0, &conns[1]), 0);
    ck_assert_int_eq(up_idle_remove(p, 0, 0, &conns[1]), -1);
    ck_assert_int_eq(up_idle_remove(p, 0, 0, &conns[7]), -1);
    ck_assert_uint_eq(up_idle_count(p, 0, 0), 3);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[3]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[2]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 0), &conns[0]);
    up_pool_release(p);
}
END_TEST

START_TEST(apart_by_worker_and_server)
{
    up_pool *p = ut_pool(NULL, 3, 2, 2);

    up_idle_put(p, 0, 1, &conns[0]);
    up_idle_put(p, 1, 1, &conns[1]);
    up_idle_put(p, 0, 2, &conns[2]);
    up_idle_put(p, 0, 2, &conns[3]);
    ck_assert_uint_eq(up_idle_count(p, 0, 0), 0);
    ck_assert_uint_eq(up_idle_count(p, 0, 1), 1);
    ck_assert_uint_eq(up_idle_count(p, 1, 1), 1);
    ck_assert_uint_eq(up_idle_count(p, 0, 2), 2);
    ck_assert_int_eq(up_idle_remove(p, 1, 2, &conns[2]), -1);
    ck_assert_ptr_eq(up_idle_get(p, 1, 1), &conns[1]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 1), &conns[0]);
    ck_assert_ptr_eq(up_idle_get(p, 0, 2), &conns[3]);
    up_pool_release(p);
}
END_TEST

START_TEST(keepalive_zero_keeps_none)
{
    up_pool *p = ut_pool(NULL, 2, 1, 0);

    ck_assert_int_eq(up_idle_put(p, 0, 1, &conns[0]), -1);
    ck_assert_ptr_null(up_idle_get(p, 0, 1));
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_idle");
    TCase *tc = tcase_create("idle");

    tcase_add_test(tc, lifo_and_bounded);
    tcase_add_test(tc, remove_from_middle);
    tcase_add_test(tc, apart_by_worker_and_server);
    tcase_add_test(tc, keepalive_zero_keeps_none);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
