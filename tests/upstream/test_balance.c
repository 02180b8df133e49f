/*
 * test_balance.c - upstream/balance.c: the interface every balancer sits
 * behind. Each balancer never picks a tried or a down server, answers
 * UP_NONE when every server is down (or, in panic mode, ignores health),
 * never fails a pick because slow start held back every usable server, and
 * the in-flight counts follow request start and end; the tried set.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static const enum up_balance all[] = {UP_ROUND_ROBIN, UP_LEAST_CONN, UP_RANDOM_TWO, UP_HASH};

START_TEST(tried_set)
{
    struct up_tried t = {0};

    ck_assert(!up_tried_has(&t, 3));
    ck_assert(!up_tried_has(NULL, 3));
    for (size_t s = 0; s < UP_TRIED_MAX + 2; s++)
        up_tried_add(&t, s);
    ck_assert_uint_eq(t.n, UP_TRIED_MAX);
    ck_assert(!up_tried_has(&t, 0) && !up_tried_has(&t, 1)); /* oldest forgotten */
    ck_assert(up_tried_has(&t, 2) && up_tried_has(&t, UP_TRIED_MAX + 1));
}
END_TEST

START_TEST(never_tried_nor_down)
{
    for (size_t b = 0; b < NELEM(all); b++) {
        struct up_pool_opts o = {.balance = all[b], .fallback = 1, .table_size = 1009};
        unsigned weights[] = {1, 2, 3, 4, 5};
        up_pool *p = ut_pool_opts(weights, 5, 1, 1, &o);
        struct up_tried tried = {0};
        struct up_pick rq = {.tried = &tried};

        up_tried_add(&tried, 1);
        up_health_set(p, 3, UP_H_EJECTED, 1, 5);
        for (unsigned i = 0; i < 2000; i++) {
            rq.hash = up_hash(&i, sizeof(i));
            size_t s = up_select(p, 0, &rq);
            ck_assert_msg(s == 0 || s == 2 || s == 4, "balancer %zu picked %zu", b, s);
        }
        up_tried_add(&tried, 0);
        up_tried_add(&tried, 2);
        up_tried_add(&tried, 4);
        ck_assert_uint_eq(up_select(p, 0, &rq), UP_NONE);
        up_pool_release(p);
    }
}
END_TEST

START_TEST(all_down_and_panic)
{
    for (size_t b = 0; b < NELEM(all); b++) {
        for (int panic = 0; panic <= 1; panic++) {
            struct up_pool_opts o = {
                .balance = all[b], .panic = panic, .table_size = 101, .fallback = 1};
            up_pool *p = ut_pool_opts(NULL, 3, 1, 1, &o);
            unsigned count[3];

            ck_assert_int_eq(up_health_set(p, 0, UP_H_CHECK, 1, 1), 0);
            ck_assert_int_eq(up_health_set(p, 1, UP_H_CHECK, 1, 1), 0);
            ck_assert(!up_pool_all_down(p));
            ck_assert_int_eq(up_health_set(p, 2, UP_H_EJECTED, 1, 2), 1); /* transition */
            ck_assert(up_pool_all_down(p));
            if (!panic) {
                ck_assert_uint_eq(up_pick(p, 0), UP_NONE);
            } else {
                ut_picks(p, NULL, 300, 0, count);
                ck_assert(b == 3 || (count[0] && count[1] && count[2])); /* hash: one key */
            }
            ck_assert_int_eq(up_health_set(p, 1, UP_H_CHECK, 0, 3), 1); /* back */
            ck_assert(!up_pool_all_down(p));
            ck_assert_uint_eq(up_pick(p, 0), 1);
            up_pool_release(p);
        }
    }
}
END_TEST

START_TEST(slow_start_never_fails_a_pick)
{
    /* each ramping server is admitted with its ramp's probability (10 % at
     * the start): with the only server up ramping, or every server back at
     * once, a pick must still find one */
    for (size_t b = 0; b < NELEM(all); b++) {
        struct up_pool_opts o = {
            .balance = all[b], .slow_start_ms = 10000, .table_size = 101, .fallback = 1};
        up_pool *p = ut_pool_opts(NULL, 3, 1, 1, &o);
        struct up_pick rq = {.now_ms = 100000};

        for (size_t s = 0; s < 3; s++)
            up_health_set(p, s, UP_H_CHECK, 1, 90000);
        up_health_set(p, 1, UP_H_CHECK, 0, 100000); /* the only one up, ramping */
        for (unsigned i = 0; i < 500; i++) {
            rq.hash = i;
            ck_assert_uint_eq(up_select(p, 0, &rq), 1);
        }
        up_health_set(p, 0, UP_H_CHECK, 0, 100000);
        up_health_set(p, 2, UP_H_CHECK, 0, 100000); /* all back at once */
        for (unsigned i = 0; i < 500; i++) {
            rq.hash = i;
            ck_assert_uint_lt(up_select(p, 0, &rq), 3);
        }
        up_pool_release(p);
    }
}
END_TEST

START_TEST(panic_spreads_without_ramp)
{
    /* every server down in a panicking pool with slow start: each is picked
     * as often as the others (none ramps: its since is when it went down),
     * with or without the ramp's clock */
    for (size_t b = 0; b + 1 < NELEM(all); b++) { /* the hash: one key, one server */
        struct up_pool_opts o = {.balance = all[b], .panic = 1, .slow_start_ms = 10000};
        up_pool *p = ut_pool_opts(NULL, 2, 1, 1, &o);
        struct up_pick rq = {.now_ms = 100000};
        unsigned count[2];

        up_health_set(p, 0, UP_H_CHECK, 1, 50000);
        ck_assert(!up_pool_panicking(p));
        up_health_set(p, 1, UP_H_CHECK, 1, 99999); /* down just now */
        ck_assert(up_pool_panicking(p));
        ut_picks(p, &rq, 4000, 0, count);
        ut_check_shares(count, NULL, 2, 4000, 0.05);
        up_pool_release(p);
    }
}
END_TEST

START_TEST(panic_hash_without_fallback)
{
    /* without fallback a key goes to its own server or nowhere: in panic,
     * to its own server, down as it is */
    struct up_pool_opts o = {.balance = UP_HASH, .panic = 1, .table_size = 101};
    up_pool *p = ut_pool_opts(NULL, 3, 1, 1, &o);
    struct up_pick rq = {0};
    size_t own[50];

    for (unsigned i = 0; i < 50; i++) {
        rq.hash = up_hash(&i, sizeof(i));
        own[i] = up_select(p, 0, &rq);
    }
    for (size_t s = 0; s < 3; s++)
        up_health_set(p, s, UP_H_CHECK, 1, 10);
    ck_assert(up_pool_panicking(p));
    for (unsigned i = 0; i < 50; i++) {
        rq.hash = up_hash(&i, sizeof(i));
        ck_assert_uint_eq(up_select(p, 0, &rq), own[i]);
    }
    o.panic = 0;
    up_pool *q = ut_pool_opts(NULL, 3, 1, 1, &o);
    up_health_set(q, own[0], UP_H_CHECK, 1, 10);
    ck_assert(!up_pool_panicking(q));
    for (unsigned i = 0; i < 50; i++) {
        rq.hash = up_hash(&i, sizeof(i));
        ck_assert_uint_eq(up_select(q, 0, &rq), own[i] == own[0] ? UP_NONE : own[i]);
    }
    up_pool_release(p);
    up_pool_release(q);
}
END_TEST

START_TEST(hash_has_no_slow_start)
{
    /* a ramping server keeps its keys (Envoy ramps round robin and least
     * request only): moving keys away and back would defeat the hash */
    struct up_pool_opts o = {.balance = UP_HASH, .slow_start_ms = 10000, .table_size = 101};
    up_pool *p = ut_pool_opts(NULL, 3, 1, 1, &o), *q = ut_pool_opts(NULL, 3, 1, 1, &o);
    struct up_pick rq = {.now_ms = 100000};

    up_health_set(p, 1, UP_H_CHECK, 1, 90000);
    up_health_set(p, 1, UP_H_CHECK, 0, 100000);
    for (unsigned i = 0; i < 1000; i++) {
        rq.hash = up_hash(&i, sizeof(i));
        ck_assert_uint_eq(up_select(p, 0, &rq), up_select(q, 0, &rq));
    }
    up_pool_release(p);
    up_pool_release(q);
}
END_TEST

START_TEST(inflight_counts)
{
    up_pool *p = ut_pool(NULL, 2, 3, 1);

    up_request_start(p, 0, 1);
    up_request_start(p, 2, 1);
    up_request_start(p, 2, 0);
    ck_assert_uint_eq(up_inflight(p, 1), 2);
    ck_assert_uint_eq(up_inflight(p, 0), 1);
    up_request_end(p, 2, 1);
    up_request_end(p, 2, 0);
    ck_assert_uint_eq(up_inflight(p, 1), 1);
    ck_assert_uint_eq(up_inflight(p, 0), 0);
    up_request_end(p, 0, 1);
    up_pool_release(p);
}
END_TEST

START_TEST(weights_within_3_percent)
{
    /* every balancer over 10k picks, each request ending before the next
     * one; all but the hash again with 30 requests in flight */
    unsigned weights[] = {1, 2, 3, 4};
    unsigned c[4];

    for (size_t b = 0; b < NELEM(all); b++) {
        for (unsigned window = 0; window <= 30; window += 30) {
            struct up_pool_opts o = {.balance = all[b], .seed = 99};
            up_pool *p = ut_pool_opts(weights, 4, 1, 1, &o);
            struct up_pick rq = {0};
            if (window && all[b] != UP_HASH) {
                ut_picks(p, NULL, 10000, window, c);
            } else {
                for (size_t s = 0; s < 4; s++)
                    c[s] = 0;
                for (unsigned i = 0; i < 10000; i++) {
                    rq.hash = up_hash(&i, sizeof(i)); /* 10k distinct keys */
                    size_t s = up_select(p, 0, &rq);
                    ck_assert_uint_lt(s, 4);
                    c[s]++;
                    up_request_start(p, 0, s);
                    up_request_end(p, 0, s);
                }
            }
            ut_check_shares(c, weights, 4, 10000, 0.03);
            up_pool_release(p);
        }
    }
}
END_TEST

START_TEST(refuses_bad_options)
{
    struct up_pool_opts o = {.balance = UP_HASH, .table_size = 1000};

    ck_assert_ptr_null(ut_pool_try(NULL, 3, 1, 1, &o)); /* not a prime */
    o.table_size = 3;
    ck_assert_ptr_null(ut_pool_try(NULL, 3, 1, 1, &o)); /* not above n */
    o.table_size = 5;
    up_pool_release(ut_pool_try(NULL, 3, 1, 1, &o));
    o.balance = (enum up_balance)9;
    ck_assert_ptr_null(ut_pool_try(NULL, 3, 1, 1, &o));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_balance");
    TCase *tc = tcase_create("interface");
    /* 10k picks per balancer take a second or more under ASan on a busy machine */
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, tried_set);
    tcase_add_test(tc, never_tried_nor_down);
    tcase_add_test(tc, all_down_and_panic);
    tcase_add_test(tc, slow_start_never_fails_a_pick);
    tcase_add_test(tc, panic_spreads_without_ramp);
    tcase_add_test(tc, panic_hash_without_fallback);
    tcase_add_test(tc, hash_has_no_slow_start);
    tcase_add_test(tc, inflight_counts);
    tcase_add_test(tc, weights_within_3_percent);
    tcase_add_test(tc, refuses_bad_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
