/*
 * test_least_conn.c - upstream/least_conn.c: the fewest requests in flight
 * per unit of weight wins, ties take turns in weight proportion (an idle
 * pool follows its weights exactly), slow start ramps a returning server
 * up, each worker balances on its own counts, and the buckets by key stay
 * right through any order of starts, ends and picks, checked against a
 * brute-force reference: equal and unequal weights, keys above the last
 * bucket, weights 1 and 1000, the rounded keys of a pool whose exact scale
 * is too large, and the linear scan a long walk falls back to.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static up_pool *lc_pool(const unsigned *weights, size_t n, unsigned nworkers)
{
    struct up_pool_opts o = {.balance = UP_LEAST_CONN};

    return ut_pool_opts(weights, n, nworkers, 1, &o);
}

START_TEST(prefers_less_loaded)
{
    up_pool *p = lc_pool(NULL, 3, 1);

    up_request_start(p, 0, 0);
    up_request_start(p, 0, 0);
    up_request_start(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 2);
    up_request_start(p, 0, 2);
    /* 1 and 2 tie at one: they take turns (1 first: never picked yet) */
    unsigned count[3] = {0};
    ck_assert_uint_eq(up_pick(p, 0), 1);
    for (int i = 0; i < 99; i++)
        count[up_pick(p, 0)]++;
    ck_assert_uint_eq(count[0], 0);
    ck_assert_uint_ge(count[1], 48);
    ck_assert_uint_ge(count[2], 49);
    up_request_end(p, 0, 0);
    up_request_end(p, 0, 0);
    ck_assert_uint_eq(up_pick(p, 0), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_server_gets_less)
{
    /* A slow backend holds its requests ten times longer: the fast one
     * takes about nine new requests in ten. */
    up_pool *p = lc_pool(NULL, 2, 1);
    unsigned count[2] = {0};

    for (unsigned i = 0; i < 10000; i++) {
        size_t s = up_pick(p, 0);
        count[s]++;
        up_request_start(p, 0, s);
        /* server 0 finishes one request per tick, server 1 one per ten */
        if (up_inflight(p, 0))
            up_request_end(p, 0, 0);
        if (i % 10 == 9 && up_inflight(p, 1))
            up_request_end(p, 0, 1);
    }
    ck_assert_uint_gt(count[0], 8 * count[1]);
    ck_assert_uint_gt(count[1], 0);
    up_pool_release(p);
}
END_TEST

START_TEST(weighted_load)
{
    /* weight 3 vs 1: server 0 holds three in flight before server 1 gets
     * its second */
    unsigned weights[] = {3, 1};
    up_pool *p = lc_pool(weights, 2, 1);

    up_request_start(p, 0, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(up_pick(p, 0), 0);
        up_request_start(p, 0, 0);
    }
    /* now 3/3 and 1/1 tie */
    up_request_start(p, 0, up_pick(p, 0));
    ck_assert_uint_eq(up_inflight(p, 0) + up_inflight(p, 1), 5);
    up_pool_release(p);
}
END_TEST

START_TEST(per_worker_counts)
{
    up_pool *p = lc_pool(NULL, 2, 2);

    up_request_start(p, 1, 0);
    up_request_start(p, 1, 0);
    ck_assert_uint_eq(up_pick(p, 1), 1);
    ck_assert_uint_eq(up_pick(p, 0), 0); /* worker 0 sees no load: ties, round robin */
    ck_assert_uint_eq(up_pick(p, 0), 1);
    up_request_end(p, 1, 0);
    up_request_end(p, 1, 0);
    up_pool_release(p);
}
END_TEST

START_TEST(slow_start_ramps)
{
    ut_check_slow_start(UP_LEAST_CONN);
}
END_TEST

/* <ops> random starts, ends, picks, tried sets and health changes on <N>
 * servers (at most 128) of weights 1..5, or all 1 when <equal>: every pick
 * has the least load per weight of the usable servers, as a scan of them
 * all finds it. */
static void random_ops(size_t N, int equal, int ops)
{
    unsigned weights[128];
    size_t held[128] = {0};
    uint64_t x = 7;

    ck_assert_uint_le(N, 128);
    for (size_t s = 0; s < N; s++)
        weights[s] = equal ? 1 : 1 + (unsigned)(s % 5);
    up_pool *p = lc_pool(weights, N, 1);
    for (int op = 0; op < ops; op++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t s = (size_t)((x >> 33) % N);
        switch ((x >> 20) % 4) {
        case 0:
            up_request_start(p, 0, s);
            held[s]++;
            break;
        case 1:
            if (held[s]) {
                up_request_end(p, 0, s);
                held[s]--;
            }
            break;
        case 2:
            up_health_set(p, s, UP_H_CHECK, (x >> 40) % 4 == 0, 1);
            break;
        default: {
            struct up_tried tried = {0};
            struct up_pick rq = {.tried = &tried};
            for (unsigned k = 0; k < (x >> 44) % 4; k++)
                up_tried_add(&tried, (size_t)((x >> (k * 6)) % N));
            if (!tried.n) /* as a first try passes it: the common pick, not the walk */
                rq.tried = NULL;
            size_t got = up_select(p, 0, &rq), want = UP_NONE;
            for (size_t c = 0; c < N; c++) {
                if (up_health_flags(p, c) || up_tried_has(&tried, c))
                    continue;
                if (want == UP_NONE || held[c] * weights[want] < held[want] * weights[c])
                    want = c;
            }
            ck_assert_int_eq(got == UP_NONE, want == UP_NONE);
            if (got != UP_NONE)
                ck_assert_uint_eq(held[got] * weights[want], held[want] * weights[got]);
        }
        }
    }
    for (size_t s = 0; s < N; s++)
        while (held[s]--)
            up_request_end(p, 0, s);
    up_pool_release(p);
}

START_TEST(heap_stays_right)
{
    /* once a heap and a scan; now the same buckets as equal weights */
    random_ops(50, 0, 20000);
    random_ops(5, 0, 20000);
}
END_TEST

START_TEST(buckets_stay_right)
{
    random_ops(100, 1, 100000);
    random_ops(3, 1, 100000);
}
END_TEST

START_TEST(ties_take_turns_in_order)
{
    /* equal weights: a pick, or a request's start and end, sends the server
     * to the back of its count's line */
    up_pool *p = lc_pool(NULL, 5, 1);

    for (size_t i = 0; i < 20; i++)
        ck_assert_uint_eq(up_pick(p, 0), i % 5);
    for (size_t i = 0; i < 20; i++) {
        size_t s = up_pick(p, 0);
        ck_assert_uint_eq(s, i % 5);
        up_request_start(p, 0, s);
        up_request_end(p, 0, s);
    }
    /* 3 and 1 hold one each: 0, 2, 4 take turns, then 3 (in first), 1 */
    up_request_start(p, 0, 3);
    up_request_start(p, 0, 1);
    for (size_t i = 0; i < 6; i++)
        ck_assert_uint_eq(up_pick(p, 0), (2 * i) % 6);
    for (size_t s = 0; s < 5; s += 2)
        up_request_start(p, 0, s);
    ck_assert_uint_eq(up_pick(p, 0), 3);
    ck_assert_uint_eq(up_pick(p, 0), 1);
    ck_assert_uint_eq(up_pick(p, 0), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(tried_and_down_skipped)
{
    up_pool *p = lc_pool(NULL, 4, 1);
    struct up_tried tried = {0};
    struct up_pick rq = {.tried = &tried};

    up_health_set(p, 0, UP_H_CHECK, 1, 1);
    up_tried_add(&tried, 1);
    ck_assert_uint_eq(up_select(p, 0, &rq), 2);
    up_tried_add(&tried, 2);
    ck_assert_uint_eq(up_select(p, 0, &rq), 3);
    /* the lowest bucket has nothing usable: the next one's first */
    up_request_start(p, 0, 3);
    up_request_start(p, 0, 3);
    ck_assert_uint_eq(up_select(p, 0, &rq), 3);
    up_request_start(p, 0, 1);
    up_request_start(p, 0, 2);
    tried.n = 0;
    ck_assert_uint_eq(up_select(p, 0, &rq), 1);
    up_health_set(p, 1, UP_H_EJECTED, 1, 1);
    up_health_set(p, 2, UP_H_EJECTED, 1, 1);
    up_health_set(p, 3, UP_H_EJECTED, 1, 1);
    /* every server down and no panic: none */
    ck_assert_uint_eq(up_select(p, 0, &rq), UP_NONE);
    up_health_set(p, 3, UP_H_EJECTED, 0, 2);
    ck_assert_uint_eq(up_select(p, 0, &rq), 3);
    up_pool_release(p);
}
END_TEST

START_TEST(counts_above_bucket_cap)
{
    /* above the last bucket (4,095): the overflow bucket is searched for
     * its lowest count, and the servers come back down through the buckets */
    enum { HIGH = 4200 };
    up_pool *p = lc_pool(NULL, 3, 1);

    for (int i = 0; i < HIGH; i++)
        for (size_t s = 0; s < 3; s++)
            up_request_start(p, 0, s);
    up_request_end(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 1);
    up_request_end(p, 0, 2);
    up_request_end(p, 0, 2);
    ck_assert_uint_eq(up_pick(p, 0), 2);
    /* every request of 0 ends: it is the least from its third end on (2
     * holds HIGH - 2), through the overflow bucket and every bucket below */
    for (int i = 0; i < HIGH; i++) {
        up_request_end(p, 0, 0);
        if (i >= 2)
            ck_assert_uint_eq(up_pick(p, 0), 0);
    }
    /* 1 comes down to 0 too: 0 and 1 tie, and take turns */
    for (int i = 0; i < HIGH - 1; i++)
        up_request_end(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 0);
    ck_assert_uint_eq(up_pick(p, 0), 1);
    ck_assert_uint_eq(up_pick(p, 0), 0);
    for (int i = 0; i < HIGH - 2; i++)
        up_request_end(p, 0, 2);
    ck_assert_uint_eq(up_inflight(p, 0) + up_inflight(p, 1) + up_inflight(p, 2), 0);
    up_pool_release(p);
}
END_TEST

/* The brute-force reference: the usable server (not down, not in <tried>)
 * with the least held / weight, UP_NONE if none. */
static size_t ref_least(const up_pool *p, const size_t *held, const unsigned *weights, size_t N,
                        const struct up_tried *tried)
{
    size_t want = UP_NONE;

    for (size_t c = 0; c < N; c++) {
        if (up_health_flags(p, c) || up_tried_has(tried, c))
            continue;
        if (want == UP_NONE ||
            (uint64_t)held[c] * weights[want] < (uint64_t)held[want] * weights[c])
            want = c;
    }
    return want;
}

/* 100k random steps on <N> servers (at most 128) of <weights>: the first
 * 40 % mostly starts (keys climb, into the overflow bucket for small pools),
 * then even, then mostly ends (back down through every bucket). Each pick
 * (with a random tried set; health flips now and then) is checked against
 * ref_least: the same held / weight, or, when <slack> (rounded keys: the
 * pool's exact scale is over the cap), within 1 / <slack> of it. Returns
 * the most requests one server held at a time. */
static size_t against_reference(const unsigned *weights, size_t N, unsigned slack)
{
    enum { STEPS = 100000 };
    size_t held[128] = {0};
    uint64_t x = 12345 + N;
    unsigned picked = 0;
    size_t peak = 0;

    ck_assert_uint_le(N, 128);
    up_pool *p = lc_pool(weights, N, 1);
    for (int op = 0; op < STEPS; op++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t s = (size_t)((x >> 33) % N);
        unsigned r = (unsigned)((x >> 20) % 100);
        /* start, end: 60/15, 35/35 or 15/60 of 100; then 5 health, 20 pick */
        unsigned st = op < STEPS * 4 / 10 ? 60 : op < STEPS * 7 / 10 ? 35 : 15, en = 75 - st;
        if (r < st) {
            up_request_start(p, 0, s);
            if (++held[s] > peak)
                peak = held[s];
        } else if (r < st + en) {
            if (held[s]) {
                up_request_end(p, 0, s);
                held[s]--;
            }
        } else if (r < 80) {
            up_health_set(p, s, UP_H_CHECK, (x >> 40) % 3 == 0, 1);
        } else {
            struct up_tried tried = {0};
            struct up_pick rq = {.tried = &tried};
            for (unsigned k = 0; k < (x >> 44) % 4; k++)
                up_tried_add(&tried, (size_t)((x >> (k * 6)) % N));
            if (!tried.n) /* as a first try passes it: the common pick, not the walk */
                rq.tried = NULL;
            size_t got = up_select(p, 0, &rq), want = ref_least(p, held, weights, N, &tried);
            ck_assert_int_eq(got == UP_NONE, want == UP_NONE);
            if (got == UP_NONE)
                continue;
            picked++;
            ck_assert_msg(!up_health_flags(p, got) && !up_tried_has(&tried, got),
                          "picked %zu: down or tried", got);
            uint64_t a = (uint64_t)held[got] * weights[want],
                     b = (uint64_t)held[want] * weights[got];
            if (!slack)
                ck_assert_msg(a == b, "step %d: picked %zu (%zu/%u), least %zu (%zu/%u)", op, got,
                              held[got], weights[got], want, held[want], weights[want]);
            else
                ck_assert_msg(a >= b && (a - b) * slack < (uint64_t)weights[got] * weights[want],
                              "step %d: picked %zu (%zu/%u), least %zu (%zu/%u)", op, got,
                              held[got], weights[got], want, held[want], weights[want]);
        }
    }
    ck_assert_uint_gt(picked, STEPS / 20);
    for (size_t s = 0; s < N; s++)
        while (held[s]--)
            up_request_end(p, 0, s);
    up_pool_release(p);
    return peak;
}

START_TEST(weight_mixes_against_reference)
{
    unsigned w[128];

    for (size_t s = 0; s < 128; s++)
        w[s] = 1 + (unsigned)(s % 4); /* the bench's 1..4: keys step 12/w */
    against_reference(w, 100, 0);
    /* weight 1's key is 12 a request: the overflow bucket from 342 held */
    ck_assert_uint_gt(against_reference(w, 7, 0), 342);
    for (size_t s = 0; s < 128; s++)
        w[s] = 1 + (unsigned)(s % 5); /* lcm 60 over 5^2: the scale is 25 */
    against_reference(w, 40, 0);
    against_reference(w, 5, 0);
    for (size_t s = 0; s < 128; s++)
        w[s] = 2 * (1 + (unsigned)(s % 3)); /* 2, 4, 6: the gcd 2 divides out */
    against_reference(w, 9, 0);
    for (size_t s = 0; s < 128; s++)
        w[s] = 1 + (unsigned)(s % 10); /* 1..10: the scale is 100 */
    against_reference(w, 30, 0);
    for (size_t s = 0; s < 128; s++)
        w[s] = s % 2 ? 1000 : 1;                         /* 1 and 1000: the scale is 1000 */
    ck_assert_uint_gt(against_reference(w, 2, 0), 4095); /* both overflow */
    against_reference(w, 10, 0);
    for (size_t s = 0; s < 128; s++)
        w[s] = 1;
    ck_assert_uint_gt(against_reference(w, 3, 0), 4095); /* the overflow bucket */
    /* weights 1..1000 at random: an exact scale would be ~10^6, so keys are
     * rounded to 1/1024 of a request per unit of weight */
    uint64_t x = 99;
    for (size_t s = 0; s < 128; s++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        w[s] = s == 0 ? 1 : 1 + (unsigned)((x >> 33) % 1000);
    }
    against_reference(w, 60, 1024);
    against_reference(w, 6, 1024);
}
END_TEST

START_TEST(idle_pool_follows_weights)
{
    /* every key 0 (each request ends before the next pick): a server's turn
     * is its weight in picks, resumed after its request's start and end */
    unsigned weights[] = {1, 2, 3};
    static const size_t order[] = {0, 1, 1, 2, 2, 2};
    up_pool *p = lc_pool(weights, 3, 1);
    unsigned count[3];

    for (size_t i = 0; i < 60; i++) {
        size_t s = up_pick(p, 0);
        ck_assert_uint_eq(s, order[i % 6]);
        up_request_start(p, 0, s);
        up_request_end(p, 0, s);
    }
    ut_picks(p, NULL, 6000, 0, count);
    ck_assert_uint_eq(count[0], 1000);
    ck_assert_uint_eq(count[1], 2000);
    ck_assert_uint_eq(count[2], 3000);
    up_pool_release(p);
}
END_TEST

START_TEST(loaded_ties_follow_weights)
{
    /* A few requests in flight, the oldest ending first: the least loaded
     * per weight ties often (weights 1 and 3 holding 1 and 3), and the
     * ties take turns by weight, so the shares are the weights' at every
     * load, not only when idle (with plain turns at loaded ties, weight 1
     * got 40 % at 4 in flight, 33 % at 8) */
    static const unsigned windows[] = {4, 8, 12, 16, 32};
    unsigned weights[] = {1, 3}, count[4];

    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
        up_pool *p = lc_pool(weights, 2, 1);
        ut_picks(p, NULL, 12000, windows[i], count);
        ck_assert_msg(count[0] >= 2880 && count[0] <= 3120,
                      "%u in flight: weight 1 got %u of 12000", windows[i], count[0]);
        up_pool_release(p);
    }
    /* 1..4 at 10 in flight: 1,062, 2,122, 3,180 and 3,636 (exact least
     * load per weight takes weight 4 a little under its share here) */
    unsigned w4[] = {1, 2, 3, 4};
    up_pool *p = lc_pool(w4, 4, 1);
    ut_picks(p, NULL, 10000, 10, count);
    for (size_t s = 0; s < 4; s++)
        ck_assert_msg(count[s] >= 1000 * w4[s] - 500 && count[s] <= 1000 * w4[s] + 500,
                      "server %zu (weight %u): %u of 10000", s, w4[s], count[s]);
    up_pool_release(p);
}
END_TEST

START_TEST(weights_1_and_1000)
{
    /* 0 weighs 1, 1 weighs 1000: idle, 1 takes 1000 picks in a row, then 0
     * one; loaded, 1 holds 1000 requests for each of 0's, into and through
     * the overflow bucket (0 is there from 5 held, 1 from 4,095) */
    unsigned weights[] = {1, 1000};
    up_pool *p = lc_pool(weights, 2, 1);
    unsigned count[2];

    ut_picks(p, NULL, 10010, 0, count);
    ck_assert_uint_eq(count[0], 10);
    ck_assert_uint_eq(count[1], 10000);
    up_request_start(p, 0, 0);
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_eq(up_pick(p, 0), 1);
        up_request_start(p, 0, 1);
    }
    /* 1/1 and 1000/1000 tie: 0 (in the bucket first, its turn of one) */
    ck_assert_uint_eq(up_pick(p, 0), 0);
    for (int i = 0; i < 3; i++)
        up_request_start(p, 0, 0);
    for (int i = 1000; i < 3999; i++)
        up_request_start(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 1); /* 3,999/1000 under 4/1 */
    for (int i = 3999; i < 4094; i++)
        up_request_start(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 0); /* 4/1 under 4,094/1000 */
    up_request_start(p, 0, 0);           /* 5/1: the overflow bucket */
    ck_assert_uint_eq(up_pick(p, 0), 1);
    for (int i = 4094; i < 5001; i++)
        up_request_start(p, 0, 1);       /* 5,001/1000: the overflow bucket too */
    ck_assert_uint_eq(up_pick(p, 0), 0); /* 5/1 under 5,001/1000 */
    up_request_end(p, 0, 1);
    up_request_end(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 1); /* 4,999/1000 under 5/1 */
    up_request_start(p, 0, 1);
    up_request_start(p, 0, 1);
    for (int i = 0; i < 5001; i++)
        up_request_end(p, 0, 1);
    ck_assert_uint_eq(up_pick(p, 0), 1);
    for (int i = 0; i < 5; i++)
        up_request_end(p, 0, 0);
    ck_assert_uint_eq(up_inflight(p, 0) + up_inflight(p, 1), 0);
    up_pool_release(p);
}
END_TEST

START_TEST(long_walk_falls_back_to_scan)
{
    /* 150 of 200 servers down, all in the lowest bucket before the rest: a
     * pick walks past 64 of them and scans the pool instead, and still
     * finds the least loaded per weight among the usable */
    enum { N = 200, DOWN = 150 };
    unsigned weights[N];

    for (size_t s = 0; s < N; s++)
        weights[s] = 1 + (unsigned)(s % 4);
    up_pool *p = lc_pool(weights, N, 1);
    for (size_t s = 0; s < DOWN; s++)
        up_health_set(p, s, UP_H_CHECK, 1, 1);
    for (size_t s = DOWN; s < N; s++)
        up_request_start(p, 0, s);
    up_request_end(p, 0, N - 1); /* weight 4, none held: the least */
    ck_assert_uint_eq(up_pick(p, 0), N - 1);
    up_request_start(p, 0, N - 1);
    /* every usable holds one: the weight-4 servers (1/4) win, in turn */
    for (int i = 0; i < 40; i++) {
        size_t s = up_pick(p, 0);
        ck_assert_uint_ge(s, DOWN);
        ck_assert_uint_eq(weights[s], 4);
    }
    for (size_t s = DOWN; s < N; s++)
        up_request_end(p, 0, s);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_least_conn");
    TCase *tc = tcase_create("least_conn");
    /* 100k-key and 20k-step runs: seconds under ASan on a busy machine */
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, prefers_less_loaded);
    tcase_add_test(tc, slow_server_gets_less);
    tcase_add_test(tc, weighted_load);
    tcase_add_test(tc, per_worker_counts);
    tcase_add_test(tc, slow_start_ramps);
    tcase_add_test(tc, heap_stays_right);
    tcase_add_test(tc, buckets_stay_right);
    tcase_add_test(tc, ties_take_turns_in_order);
    tcase_add_test(tc, tried_and_down_skipped);
    tcase_add_test(tc, counts_above_bucket_cap);
    tcase_add_test(tc, weight_mixes_against_reference);
    tcase_add_test(tc, idle_pool_follows_weights);
    tcase_add_test(tc, loaded_ties_follow_weights);
    tcase_add_test(tc, weights_1_and_1000);
    tcase_add_test(tc, long_walk_falls_back_to_scan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
