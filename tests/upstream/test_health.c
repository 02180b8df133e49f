/*
 * test_health.c - upstream/health.c: the health word's flags and since,
 * the down count and its transitions, slow start's ramp, a server added to
 * a pool stamped as up since then.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

START_TEST(flags_and_since)
{
    up_pool *p = ut_pool(NULL, 2, 1, 1);

    ck_assert_uint_eq(up_health_flags(p, 0), 0);
    ck_assert_uint_eq(up_health_since(p, 0), 0);
    up_health_set(p, 0, UP_H_CHECK, 1, 100);
    up_health_set(p, 0, UP_H_EJECTED, 1, 200); /* already down: since stays */
    ck_assert_uint_eq(up_health_flags(p, 0), UP_H_CHECK | UP_H_EJECTED);
    ck_assert_uint_eq(up_health_since(p, 0), 100);
    up_health_set(p, 0, UP_H_CHECK, 0, 300); /* still ejected */
    ck_assert_uint_eq(up_health_flags(p, 0), UP_H_EJECTED);
    ck_assert_uint_eq(up_health_since(p, 0), 100);
    up_health_set(p, 0, UP_H_EJECTED, 0, 400);
    ck_assert_uint_eq(up_health_flags(p, 0), 0);
    ck_assert_uint_eq(up_health_since(p, 0), 400);
    up_health_set(p, 0, UP_H_EJECTED, 0, 500); /* no change */
    ck_assert_uint_eq(up_health_since(p, 0), 400);
    ck_assert_uint_eq(up_health_flags(p, 1), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(transitions_once)
{
    up_pool *p = ut_pool(NULL, 2, 1, 1);

    ck_assert_int_eq(up_health_set(p, 0, UP_H_CHECK, 1, 1), 0);
    ck_assert_int_eq(up_health_set(p, 1, UP_H_CHECK, 1, 1), 1); /* all down */
    ck_assert_int_eq(up_health_set(p, 1, UP_H_EJECTED, 1, 2), 0);
    ck_assert(up_pool_all_down(p));
    ck_assert_int_eq(up_health_set(p, 1, UP_H_CHECK, 0, 3), 0);   /* still ejected */
    ck_assert_int_eq(up_health_set(p, 1, UP_H_EJECTED, 0, 4), 1); /* back */
    ck_assert_int_eq(up_health_set(p, 0, UP_H_CHECK, 0, 5), 0);
    ck_assert(!up_pool_all_down(p));
    up_pool_release(p);
}
END_TEST

START_TEST(slow_start)
{
    ck_assert_uint_eq(up_slow_start_permille(1000, 1000, 0), 1000); /* off */
    ck_assert_uint_eq(up_slow_start_permille(1000, 1000, 10000), 100);
    ck_assert_uint_eq(up_slow_start_permille(1000, 1500, 10000), 100); /* floor 10 % */
    ck_assert_uint_eq(up_slow_start_permille(1000, 3500, 10000), 250);
    ck_assert_uint_eq(up_slow_start_permille(1000, 10999, 10000), 999);
    ck_assert_uint_eq(up_slow_start_permille(1000, 11000, 10000), 1000);
    ck_assert_uint_eq(up_slow_start_permille(1000, 500, 10000), 1000); /* clock behind */
}
END_TEST

START_TEST(added_is_up_since_then)
{
    up_pool *p = ut_pool(NULL, 2, 1, 1);

    up_health_added(p, 0, 700);
    ck_assert_uint_eq(up_health_flags(p, 0), 0);
    ck_assert_uint_eq(up_health_since(p, 0), 700);
    ck_assert_uint_eq(up_slow_start_permille(up_health_since(p, 0), 700, 1000), 100);
    /* down: nothing to ramp, its since stays when it went down */
    up_health_set(p, 1, UP_H_CHECK, 1, 100);
    up_health_added(p, 1, 800);
    ck_assert_uint_eq(up_health_flags(p, 1), UP_H_CHECK);
    ck_assert_uint_eq(up_health_since(p, 1), 100);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_health");
    TCase *tc = tcase_create("health");

    tcase_add_test(tc, flags_and_since);
    tcase_add_test(tc, transitions_once);
    tcase_add_test(tc, slow_start);
    tcase_add_test(tc, added_is_up_since_then);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
