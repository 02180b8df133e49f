/*
 * test_outlier.c - upstream/outlier.c, step by step: five failures in a row
 * eject, a success resets the row of failures, ejections last 30 s times
 * their row up to 300 s, the row decays while the server stays up, at
 * most 10 % of a pool (at least one server) is ejected at a time, a pool
 * of one server never is, nor the last server of a pool that is up, and a new object for a changed
 * server list takes a server's row and ejection over from the old one.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

#define S 1000ull /* one second in ms */

/* Four failures of server <s> of pool <p> (may be NULL) at <now> that do
 * not eject it, then the fifth that does. */
static void eject_in(up_outlier *o, const up_pool *p, size_t s, uint64_t now)
{
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(up_outlier_report(o, p, s, 1, now), 0);
    ck_assert_int_eq(up_outlier_report(o, p, s, 1, now), 1);
    ck_assert(up_outlier_ejected(o, s));
}

static void eject(up_outlier *o, size_t s, uint64_t now)
{
    eject_in(o, NULL, s, now);
}

START_TEST(defaults_step_by_step)
{
    up_outlier *o = up_outlier_new(NULL, 10);
    uint64_t next = 0;

    /* four failures, a success: the row starts again */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(up_outlier_report(o, NULL, 3, 1, 0), 0);
    ck_assert_int_eq(up_outlier_report(o, NULL, 3, 0, 0), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(up_outlier_report(o, NULL, 3, 1, 0), 0);
    ck_assert(!up_outlier_ejected(o, 3));
    ck_assert_int_eq(up_outlier_report(o, NULL, 3, 1, 10 * S), 1); /* fifth in a row */
    ck_assert_uint_eq(up_outlier_ejection_ms(o, 3), 30 * S);
    ck_assert_uint_eq(up_outlier_ejections(o, 3), 1);
    /* reports while ejected change nothing */
    ck_assert_int_eq(up_outlier_report(o, NULL, 3, 1, 11 * S), 0);
    ck_assert_uint_eq(up_outlier_expire(o, 39 * S, &next), UP_NONE);
    ck_assert_uint_eq(next, 40 * S);
    ck_assert_uint_eq(up_outlier_expire(o, 40 * S, &next), 3);
    ck_assert(!up_outlier_ejected(o, 3));
    ck_assert_uint_eq(up_outlier_expire(o, 40 * S, &next), UP_NONE);
    ck_assert_uint_eq(next, 0);
    up_outlier_free(o);
}
END_TEST

START_TEST(longer_each_time_capped)
{
    up_outlier *o = up_outlier_new(NULL, 10);
    uint64_t now = 0;

    /* ejected again right after each return: 30, 60, ... capped at 300 s */
    for (unsigned row = 1; row <= 12; row++) {
        eject(o, 0, now);
        uint64_t want = 30 * S * row < 300 * S ? 30 * S * row : 300 * S;
        ck_assert_uint_eq(up_outlier_ejection_ms(o, 0), want);
        ck_assert_uint_eq(up_outlier_ejections(o, 0), row);
        now += want;
        ck_assert_uint_eq(up_outlier_expire(o, now, NULL), 0);
    }
    up_outlier_free(o);
}
END_TEST

START_TEST(row_decays_while_up)
{
    up_outlier *o = up_outlier_new(NULL, 10);

    eject(o, 0, 0);
    ck_assert_uint_eq(up_outlier_expire(o, 30 * S, NULL), 0);
    eject(o, 0, 31 * S); /* up for 1 s: the row holds, 2 */
    ck_assert_uint_eq(up_outlier_ejection_ms(o, 0), 60 * S);
    ck_assert_uint_eq(up_outlier_expire(o, 91 * S, NULL), 0);
    eject(o, 0, 91 * S + 35 * S); /* up for 35 s: one off, then one on: 2 */
    ck_assert_uint_eq(up_outlier_ejections(o, 0), 2);
    ck_assert_uint_eq(up_outlier_expire(o, 186 * S, NULL), 0);
    eject(o, 0, 186 * S + 3600 * S); /* an hour up: the row starts over */
    ck_assert_uint_eq(up_outlier_ejections(o, 0), 1);
    ck_assert_uint_eq(up_outlier_ejection_ms(o, 0), 30 * S);
    up_outlier_free(o);
}
END_TEST

START_TEST(max_percent)
{
    struct up_outlier_cfg cfg = {.max_ejection_percent = 20};
    up_outlier *o = up_outlier_new(NULL, 3), *o20 = up_outlier_new(&cfg, 10);

    /* 10 % of 3 is none: at least one is ejected anyway, not a second */
    eject(o, 0, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(up_outlier_report(o, NULL, 1, 1, 0), 0);
    ck_assert(!up_outlier_ejected(o, 1));
    /* once the first is back, the second can go */
    ck_assert_uint_eq(up_outlier_expire(o, 30 * S, NULL), 0);
    eject(o, 1, 30 * S);
    /* 20 % of 10: two */
    eject(o20, 4, 0);
    eject(o20, 5, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(up_outlier_report(o20, NULL, 6, 1, 0), 0);
    up_outlier_free(o);
    up_outlier_free(o20);
}
END_TEST

START_TEST(lone_server_never_ejected)
{
    /* nginx: a pool of one server is never taken out, whatever the percent */
    struct up_outlier_cfg cfg = {.consecutive_failures = 1, .max_ejection_percent = 100};
    up_outlier *o = up_outlier_new(&cfg, 1), *two = up_outlier_new(&cfg, 2);

    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(up_outlier_report(o, NULL, 0, 1, (uint64_t)i * S), 0);
    ck_assert(!up_outlier_ejected(o, 0));
    /* two servers: the first failure ejects */
    ck_assert_int_eq(up_outlier_report(two, NULL, 1, 1, 0), 1);
    up_outlier_free(o);
    up_outlier_free(two);
}
END_TEST

START_TEST(last_server_up_never_ejected)
{
    /* two servers, one down by its active check: failures of the other
     * leave it up (ejected, the pool would answer 503 while it works) */
    up_pool *p = ut_pool(NULL, 2, 1, 1);
    up_outlier *o = up_outlier_new(NULL, 2);

    up_health_set(p, 0, UP_H_CHECK, 1, 0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(up_outlier_report(o, p, 1, 1, 0), 0);
    ck_assert(!up_outlier_ejected(o, 1));
    ck_assert(!up_pool_all_down(p));
    /* nor one whose address is not known yet */
    up_health_set(p, 0, UP_H_CHECK, 0, 0);
    up_health_set(p, 0, UP_H_RESOLVING, 1, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(up_outlier_report(o, p, 1, 1, 0), 0);
    /* the other back up: the next row of failures ejects, once */
    up_health_set(p, 0, UP_H_RESOLVING, 0, 0);
    eject_in(o, p, 1, 0);
    up_health_set(p, 1, UP_H_EJECTED, 1, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(up_outlier_report(o, p, 0, 1, 0), 0);
    ck_assert(!up_pool_all_down(p));
    up_outlier_free(o);
    up_pool_release(p);
}
END_TEST

START_TEST(custom_thresholds)
{
    struct up_outlier_cfg cfg = {.consecutive_failures = 2,
                                 .base_ejection_ms = 100,
                                 .max_ejection_ms = 250,
                                 .max_ejection_percent = 100};
    up_outlier *o = up_outlier_new(&cfg, 2);

    ck_assert_int_eq(up_outlier_report(o, NULL, 1, 1, 0), 0);
    ck_assert_int_eq(up_outlier_report(o, NULL, 1, 1, 0), 1);
    ck_assert_int_eq(up_outlier_report(o, NULL, 0, 1, 0), 0);
    ck_assert_int_eq(up_outlier_report(o, NULL, 0, 1, 0), 1); /* 100 %: both */
    ck_assert_uint_eq(up_outlier_expire(o, 100, NULL), 0);
    ck_assert_uint_eq(up_outlier_expire(o, 100, NULL), 1);
    up_outlier_report(o, NULL, 1, 1, 100);
    up_outlier_report(o, NULL, 1, 1, 100);
    ck_assert_uint_eq(up_outlier_ejection_ms(o, 1), 200);
    ck_assert_uint_eq(up_outlier_expire(o, 300, NULL), 1);
    up_outlier_report(o, NULL, 1, 1, 300);
    up_outlier_report(o, NULL, 1, 1, 300);
    ck_assert_uint_eq(up_outlier_ejection_ms(o, 1), 250); /* capped */
    ck_assert_ptr_null(up_outlier_new(&cfg, 0));
    up_outlier_free(o);
    up_outlier_free(NULL);
}
END_TEST

START_TEST(carried_to_a_new_server_list)
{
    up_outlier *o = up_outlier_new(NULL, 3), *n = up_outlier_new(NULL, 4), *m;
    uint64_t next = 0;

    /* server 2 ejected twice in a row, then ejected now (60 s, until 110 s) */
    eject(o, 2, 0);
    ck_assert_uint_eq(up_outlier_expire(o, 30 * S, NULL), 2);
    eject(o, 2, 50 * S);
    ck_assert_uint_eq(up_outlier_ejections(o, 2), 2);
    /* a server added in front: old 2 is new 3, old 0 new 1 */
    up_outlier_carry(n, 3, o, 2);
    up_outlier_carry(n, 1, o, 0);
    ck_assert(up_outlier_ejected(n, 3));
    ck_assert_uint_eq(up_outlier_ejections(n, 3), 2);
    ck_assert_uint_eq(up_outlier_ejection_ms(n, 3), 60 * S);
    /* its ejection counts: no other server of 4 (10 %: one) is ejected */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(up_outlier_report(n, NULL, 0, 1, 60 * S), 0);
    ck_assert_uint_eq(up_outlier_expire(n, 100 * S, &next), UP_NONE);
    ck_assert_uint_eq(next, 110 * S); /* ends when it would have */
    ck_assert_uint_eq(up_outlier_expire(n, 110 * S, NULL), 3);
    /* ejected again at once: the third in a row, 90 s */
    eject(n, 3, 110 * S);
    ck_assert_uint_eq(up_outlier_ejection_ms(n, 3), 90 * S);
    ck_assert_uint_eq(up_outlier_ejections(n, 3), 3);
    /* carried over an ejected one: the count of ejected servers follows */
    m = up_outlier_new(NULL, 4);
    up_outlier_carry(m, 0, n, 3);
    up_outlier_carry(m, 0, o, 0); /* replaced by one that is up */
    eject(m, 1, 110 * S);
    ck_assert_uint_eq(up_outlier_ejections(m, 1), 1);
    up_outlier_free(m);
    up_outlier_free(n);
    up_outlier_free(o);
}
END_TEST

START_TEST(carried_within_the_new_cap)
{
    /* [A, B] with A ejected shrinks to [A]: a lone server is not ejected,
     * so A is back at once, its row kept */
    struct up_outlier_cfg cfg = {.max_ejection_percent = 100};
    up_outlier *o = up_outlier_new(&cfg, 2), *one = up_outlier_new(NULL, 1), *four;

    eject(o, 0, 0);
    eject(o, 1, 0);
    up_outlier_carry(one, 0, o, 0);
    ck_assert(!up_outlier_ejected(one, 0));
    ck_assert_uint_eq(up_outlier_ejections(one, 0), 1);
    ck_assert_uint_eq(up_outlier_expire(one, 1, NULL), UP_NONE);
    /* two ejected carried into four servers (10 %: one): the first stays */
    four = up_outlier_new(NULL, 4);
    up_outlier_carry(four, 2, o, 0);
    up_outlier_carry(four, 3, o, 1);
    ck_assert(up_outlier_ejected(four, 2));
    ck_assert(!up_outlier_ejected(four, 3));
    /* the one back has its row, decaying from when its ejection began */
    ck_assert_uint_eq(up_outlier_expire(four, 30 * S, NULL), 2);
    eject(four, 3, 30 * S); /* one quiet 30 s: the row is 0, then 1 */
    ck_assert_uint_eq(up_outlier_ejection_ms(four, 3), 30 * S);
    up_outlier_free(four);
    up_outlier_free(one);
    up_outlier_free(o);
}
END_TEST

START_TEST(drives_health)
{
    /* the owner's loop: decisions applied to the pool's health words */
    up_pool *p = ut_pool(NULL, 2, 1, 1);
    up_outlier *o = up_outlier_new(NULL, 2);
    size_t s;

    for (int i = 0; i < 5; i++)
        if (up_outlier_report(o, NULL, 1, 1, 1000))
            up_health_set(p, 1, UP_H_EJECTED, 1, 1000);
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(up_pick(p, 0), 0);
    while ((s = up_outlier_expire(o, 31000, NULL)) != UP_NONE)
        up_health_set(p, s, UP_H_EJECTED, 0, 31000);
    ck_assert_uint_eq(up_pick(p, 0), 1);
    up_outlier_free(o);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_outlier");
    TCase *tc = tcase_create("outlier");

    tcase_add_test(tc, defaults_step_by_step);
    tcase_add_test(tc, longer_each_time_capped);
    tcase_add_test(tc, row_decays_while_up);
    tcase_add_test(tc, max_percent);
    tcase_add_test(tc, lone_server_never_ejected);
    tcase_add_test(tc, last_server_up_never_ejected);
    tcase_add_test(tc, custom_thresholds);
    tcase_add_test(tc, carried_to_a_new_server_list);
    tcase_add_test(tc, carried_within_the_new_cap);
    tcase_add_test(tc, drives_health);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
