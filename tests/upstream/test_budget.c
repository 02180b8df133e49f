/*
 * test_budget.c - upstream/budget.c: retries in flight are capped at 20 %
 * of the requests in flight, or 3 when that is more; ending retries frees
 * the budget; refusals are counted; a retry of a try that reached no
 * server is admitted outside the budget, as a first attempt; new settings
 * keep the counts.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

START_TEST(floor_of_three)
{
    struct up_budget b;

    up_budget_init(&b, 0, 0);
    ck_assert_uint_eq(b.percent, 20);
    ck_assert_uint_eq(b.floor, 3);
    up_budget_start(&b);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_budget_retry(&b, 1), 0);
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
    ck_assert_uint_eq(b.exhausted, 1);
    up_budget_end(&b, 1);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0); /* one ended, one more allowed */
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
    ck_assert_uint_eq(b.exhausted, 2);
}
END_TEST

START_TEST(twenty_percent)
{
    struct up_budget b;
    int admitted = 0;

    up_budget_init(&b, 20, 3);
    for (int i = 0; i < 100; i++)
        up_budget_start(&b);
    /* retries count as requests in flight: r <= 20 % of (100 + r) -> 25 */
    while (up_budget_retry(&b, 1) == 0)
        admitted++;
    ck_assert_int_eq(admitted, 25);
    ck_assert_uint_eq(b.retries, 25);
    ck_assert_uint_eq(b.active, 125);
    /* first attempts ending shrink the budget: no new retry until below */
    for (int i = 0; i < 50; i++)
        up_budget_end(&b, 0);
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
    for (int i = 0; i < 25; i++)
        up_budget_end(&b, 1);
    ck_assert_uint_eq(b.active, 50);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0); /* 0 < 10 */
}
END_TEST

START_TEST(custom)
{
    struct up_budget b;

    up_budget_init(&b, 50, 1);
    up_budget_start(&b);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0);  /* the floor */
    ck_assert_int_eq(up_budget_retry(&b, 1), -1); /* 2 retries of 3 > 50 % */
    up_budget_start(&b);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0); /* 2 of 4 */
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
}
END_TEST

/* <b> at 20 % and 3, with 10 requests in flight that took the floor's 3
 * retries. */
static void floor_spent(struct up_budget *b)
{
    up_budget_init(b, 20, 3);
    for (int i = 0; i < 10; i++)
        up_budget_start(b);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_budget_retry(b, 1), 0);
}

START_TEST(unreached_is_not_a_retry)
{
    struct up_budget b;

    floor_spent(&b);
    ck_assert_int_eq(up_budget_retry(&b, 1), -1); /* the floor is spent */
    ck_assert_uint_eq(b.exhausted, 1);
    /* a burst of refused connects: each is admitted, none counted */
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(up_budget_retry(&b, 0), 1);
        up_budget_end(&b, 0); /* the refused try */
        up_budget_start(&b);  /* its retry, a first attempt still */
    }
    ck_assert_uint_eq(b.retries, 3);
    ck_assert_uint_eq(b.active, 13);
    ck_assert_uint_eq(b.exhausted, 1);
    /* and they leave the budget as they found it */
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
    up_budget_end(&b, 1);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0);
}
END_TEST

START_TEST(new_settings_keep_the_counts)
{
    struct up_budget b;

    floor_spent(&b);
    up_budget_set(&b, 0, 0); /* the defaults */
    ck_assert_uint_eq(b.percent, 20);
    ck_assert_uint_eq(b.floor, 3);
    ck_assert_int_eq(up_budget_retry(&b, 1), -1);
    up_budget_set(&b, 50, 3);
    ck_assert_uint_eq(b.active, 13);
    ck_assert_uint_eq(b.retries, 3);
    ck_assert_uint_eq(b.exhausted, 1);
    ck_assert_int_eq(up_budget_retry(&b, 1), 0); /* 4 of 14 <= 50 % */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_budget");
    TCase *tc = tcase_create("budget");

    tcase_add_test(tc, floor_of_three);
    tcase_add_test(tc, twenty_percent);
    tcase_add_test(tc, custom);
    tcase_add_test(tc, unreached_is_not_a_retry);
    tcase_add_test(tc, new_settings_keep_the_counts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
