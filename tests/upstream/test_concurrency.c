/*
 * test_concurrency.c - upstream/ under threads, as the gateway uses it: two
 * worker threads pick, start and end requests on the same pool (each on
 * its own worker slot) while an owner thread flips health words. No pick
 * ever lands on a server that was down the whole time, the counts add up,
 * and TSan builds (SY_SANITIZE=thread) see no race. Every loop is bounded.
 */
#include "utest.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PICKS 200000
#define FLIPS 20000

struct run {
    up_pool *p;
    unsigned w;
    unsigned long picked[4], none;
};

static _Atomic int stop;

static void *worker(void *arg)
{
    struct run *r = arg;

    for (unsigned i = 0; i < PICKS; i++) {
        struct up_pick rq = {.hash = up_hash(&i, sizeof(i)), .now_ms = 1000 + i / 100};
        size_t s = up_select(r->p, r->w, &rq);
        if (s == UP_NONE) {
            r->none++;
            continue;
        }
        r->picked[s]++;
        up_request_start(r->p, r->w, s);
        up_count_request(r->p, r->w, s);
        up_request_end(r->p, r->w, s);
    }
    return NULL;
}

/* The owner: server 3 stays down; 0 and 2 go down and up by turns. */
static void *owner(void *arg)
{
    up_pool *p = arg;

    for (unsigned i = 0; i < FLIPS && !atomic_load(&stop); i++) {
        up_health_set(p, i % 2 ? 0 : 2, UP_H_CHECK, 1, 1000 + i);
        up_health_set(p, i % 2 ? 0 : 2, UP_H_CHECK, 0, 1000 + i);
    }
    return NULL;
}

START_TEST(workers_and_owner)
{
    static const enum up_balance all[] = {UP_ROUND_ROBIN, UP_LEAST_CONN, UP_RANDOM_TWO, UP_HASH};

    for (size_t b = 0; b < NELEM(all); b++) {
        struct up_pool_opts o = {.balance = all[b], .fallback = 1, .slow_start_ms = 50};
        up_pool *p = ut_pool_opts(NULL, 4, 2, 1, &o);
        struct run r[2] = {{.p = p, .w = 0}, {.p = p, .w = 1}};
        pthread_t t[3];

        up_health_set(p, 3, UP_H_EJECTED, 1, 0);
        atomic_store(&stop, 0);
        ck_assert_int_eq(pthread_create(&t[2], NULL, owner, p), 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &r[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        atomic_store(&stop, 1);
        pthread_join(t[2], NULL);
        for (int i = 0; i < 2; i++) {
            ck_assert_uint_eq(r[i].picked[3], 0);
            ck_assert_uint_eq(r[i].none, 0); /* server 1 is never down */
            ck_assert_uint_eq(r[i].picked[0] + r[i].picked[1] + r[i].picked[2], PICKS);
        }
        for (size_t s = 0; s < 4; s++) {
            ck_assert_uint_eq(up_requests(p, s), r[0].picked[s] + r[1].picked[s]);
            ck_assert_uint_eq(up_inflight(p, s), 0);
        }
        up_pool_release(p);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_concurrency");
    TCase *tc = tcase_create("threads");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, workers_and_owner);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
