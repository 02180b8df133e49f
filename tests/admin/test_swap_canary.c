/*
 * test_swap_canary.c - the swap's second arm (admin/snapshot.c) under
 * threads, for TSan (label "concurrency"): worker threads pin the current
 * snapshot or the canary as gw_req_start does, read it, count the arm as
 * gw_req_account does, unpin, and acknowledge between "requests"; the
 * admin thread meanwhile starts rollouts, sums the counts, and promotes or
 * drops each canary, reclaiming as it goes. Nothing may be freed while
 * pinned or loadable (ASan and TSan see a use after free), and in
 * the end everything retired is freed. Bounded in count and time.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin/snapshot.h"

#define NW 3
#define ROLLOUTS 150

static const char CFG[] =
    "{\"listeners\": [{\"address\": \"127.0.0.1:1\"}],"
    " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:2\"}]}},"
    " \"routes\": [{\"id\": \"r\", \"path\": \"/x\", \"upstream\": \"u\"}]}";

static struct adm_swap sw;
static atomic_int stop;
static atomic_ulong seen_canary, seen_base, bad;

static struct adm_snapshot *build(const struct adm_snapshot *prev)
{
    struct adm_errors e;
    struct adm_config *cfg;
    struct adm_snapshot *s;

    adm_errors_init(&e);
    cfg = adm_config_parse(CFG, sizeof(CFG) - 1, &e);
    ck_assert_ptr_nonnull(cfg);
    s = adm_snapshot_build(cfg, prev, NW, &e);
    ck_assert_ptr_nonnull(s);
    adm_errors_clear(&e);
    return s;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A worker: gw_req_start's pinning, gw_req_account's counting. */
static void *worker(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    uint64_t x = 88172645463325252ull + w;
    unsigned long n = 0;

    while (!atomic_load(&stop) && n < 5000000) {
        struct adm_snapshot *s = adm_swap_pin(&sw, w), *c;
        unsigned arm = 0;
        uint64_t ro = 0;

        if (atomic_load_explicit(&sw.canary, memory_order_relaxed) &&
            (c = atomic_load_explicit(&sw.canary, memory_order_acquire))) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ro = c->rollout;
            arm = 1;
            if (x % 100 < c->canary_pct) {
                adm_swap_pin_snap(c, w);
                adm_swap_unpin(s, w);
                s = c;
                arm = 2;
            }
        }
        /* "the request": read what a worker reads */
        if (s->npools != 1 || rt_table_count(s->rt) != 1 || s->nworkers != NW || !s->gen)
            atomic_fetch_add(&bad, 1);
        if (arm) {
            if (ro == atomic_load_explicit(&sw.rollout, memory_order_relaxed))
                adm_ro_count(&sw.roctr[w], arm - 1, (x & 7) ? 200 : 502, (double)(x % 50));
            atomic_fetch_add(arm == 2 ? &seen_canary : &seen_base, 1);
        }
        adm_swap_unpin(s, w);
        if (++n % 16 == 0)
            adm_swap_ack(&sw, w); /* between requests */
    }
    return NULL;
}

START_TEST(pin_both_arms_while_rolling_out)
{
    pthread_t th[NW];
    double deadline = now_s() + 8;
    struct adm_ro_arm sum[2];
    unsigned rollouts = 0, promoted = 0;

    ck_assert_int_eq(adm_swap_init(&sw, NW, NULL, NULL), 0);
    adm_swap_publish(&sw, build(NULL));
    for (unsigned w = 0; w < NW; w++)
        ck_assert_int_eq(pthread_create(&th[w], NULL, worker, (void *)(uintptr_t)w), 0);
    while (rollouts < ROLLOUTS && now_s() < deadline) {
        struct adm_snapshot *c = build(atomic_load(&sw.current));
        struct timespec pause = {0, 200000};

        adm_swap_canary_start(&sw, c, 1 + rollouts % 99, rollouts & 1, rollouts, rollouts + 1);
        for (int i = 0; i < 3; i++) {
            nanosleep(&pause, NULL);
            adm_ro_sum(sw.roctr, NW, sum); /* the admin's look, while workers count */
            adm_swap_reclaim(&sw);
        }
        if (rollouts % 3 == 0) {
            adm_swap_canary_promote(&sw);
            promoted++;
        } else {
            adm_swap_canary_drop(&sw);
        }
        ck_assert_ptr_null(atomic_load(&sw.canary));
        adm_swap_reclaim(&sw);
        rollouts++;
    }
    atomic_store(&stop, 1);
    for (unsigned w = 0; w < NW; w++) {
        pthread_join(th[w], NULL);
        adm_swap_ack(&sw, w);
    }
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 0);
    ck_assert_uint_eq(atomic_load(&bad), 0);
    ck_assert_uint_gt(rollouts, 10);
    ck_assert_uint_gt(atomic_load(&seen_canary), 0);
    ck_assert_uint_gt(atomic_load(&seen_base), 0);
    ck_assert_uint_eq(sw.swaps, promoted);
    adm_ro_sum(sw.roctr, NW, sum);
    ck_assert_uint_gt(sum[0].requests + sum[1].requests, 0);
    adm_swap_destroy(&sw);
}
END_TEST

/* A dropped canary waits for the workers' acknowledgement and its pins. */
START_TEST(dropped_canary_waits_for_ack_and_pins)
{
    struct adm_snapshot *c;

    ck_assert_int_eq(adm_swap_init(&sw, 2, NULL, NULL), 0);
    adm_swap_publish(&sw, build(NULL));
    adm_swap_ack(&sw, 0);
    adm_swap_ack(&sw, 1);
    c = build(atomic_load(&sw.current));
    adm_swap_canary_start(&sw, c, 50, 1, 7, 1);
    ck_assert_ptr_eq(atomic_load(&sw.canary), c);
    ck_assert_uint_eq(atomic_load(&sw.rollout), 1);
    adm_swap_pin_snap(c, 1); /* worker 1 runs a canary request */
    adm_swap_canary_drop(&sw);
    ck_assert_uint_eq(atomic_load(&sw.rollout), 0);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 1); /* nobody acknowledged */
    adm_swap_ack(&sw, 0);
    adm_swap_ack(&sw, 1);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 1); /* still pinned */
    adm_swap_unpin(c, 1);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 0);
    /* a promoted canary is current; the baseline is retired */
    c = build(atomic_load(&sw.current));
    adm_swap_canary_start(&sw, c, 10, 0, 9, 2);
    adm_swap_canary_promote(&sw);
    ck_assert_ptr_eq(atomic_load(&sw.current), c);
    ck_assert_ptr_null(atomic_load(&sw.canary));
    ck_assert_uint_eq(c->gen, 3); /* 2 went to the dropped one, never to be reused */
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 1);
    adm_swap_ack(&sw, 0);
    adm_swap_ack(&sw, 1);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 0);
    adm_swap_destroy(&sw);
}
END_TEST

static Suite *swap_canary_suite(void)
{
    Suite *s = suite_create("admin_swap_canary");
    TCase *tc = tcase_create("swap_canary");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dropped_canary_waits_for_ack_and_pins);
    tcase_add_test(tc, pin_both_arms_while_rolling_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(swap_canary_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
