/*
 * utest.c - helpers shared by the upstream/ unit tests (see utest.h).
 */
#include "utest.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

up_pool *ut_pool(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive)
{
    return ut_pool_opts(weights, n, nworkers, keepalive, NULL);
}

up_pool *ut_pool_opts(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive,
                      const struct up_pool_opts *opts)
{
    up_pool *p = ut_pool_try(weights, n, nworkers, keepalive, opts);

    ck_assert_ptr_nonnull(p);
    return p;
}

up_pool *ut_pool_try(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive,
                     const struct up_pool_opts *opts)
{
    struct up_server_def *defs = calloc(n, sizeof(*defs));
    struct sockaddr_in *sin = calloc(n, sizeof(*sin));
    char(*names)[32] = calloc(n, sizeof(*names));
    up_pool *p;

    ck_assert(defs && sin && names);
    for (size_t i = 0; i < n; i++) {
        sin[i].sin_family = AF_INET;
        sin[i].sin_port = htons((uint16_t)(9001 + i));
        sin[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(names[i], sizeof(names[i]), "127.0.0.1:%zu", 9001 + i);
        defs[i].address = names[i];
        defs[i].sa = (const struct sockaddr *)&sin[i];
        defs[i].salen = sizeof(sin[i]);
        defs[i].weight = weights ? weights[i] : 1;
    }
    p = up_pool_new_opts("t", "key", defs, n, nworkers, keepalive, opts);
    free(defs);
    free(sin);
    free(names);
    return p;
}

int ut_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void ut_picks(up_pool *p, const struct up_pick *rq, unsigned picks, unsigned window,
              unsigned *count)
{
    size_t n = up_pool_nservers(p), *ring = calloc(window ? window : 1, sizeof(*ring));
    unsigned inflight = 0, head = 0;

    ck_assert_ptr_nonnull(ring);
    for (size_t s = 0; s < n; s++)
        count[s] = 0;
    for (unsigned i = 0; i < picks; i++) {
        size_t s = up_select(p, 0, rq);
        ck_assert_uint_lt(s, n);
        count[s]++;
        if (window && inflight == window) {
            up_request_end(p, 0, ring[head]);
            inflight--;
        }
        up_request_start(p, 0, s);
        if (!window) {
            up_request_end(p, 0, s);
            continue;
        }
        ring[head] = s;
        head = (head + 1) % window;
        inflight++;
    }
    for (unsigned i = 0; i < inflight; i++)
        up_request_end(p, 0, ring[(head + window - inflight + i) % window]);
    free(ring);
}

void ut_check_shares(const unsigned *count, const unsigned *weights, size_t n, unsigned picks,
                     double tolerance)
{
    double total = 0;

    for (size_t s = 0; s < n; s++)
        total += weights ? weights[s] : 1;
    for (size_t s = 0; s < n; s++) {
        double want = (weights ? weights[s] : 1) / total, got = (double)count[s] / picks;
        ck_assert_msg(got >= want - tolerance && got <= want + tolerance,
                      "server %zu: share %.4f, weight share %.4f", s, got, want);
    }
}

void ut_slow_start_counts(enum up_balance b, unsigned window, unsigned *got)
{
    static const uint64_t at[] = {100000, 100500, 101000};
    struct up_pool_opts o = {.balance = b, .slow_start_ms = 1000, .seed = 7};
    up_pool *p = ut_pool_opts(NULL, 2, 1, 1, &o);
    struct up_pick rq = {0};
    unsigned count[2];

    up_health_set(p, 1, UP_H_CHECK, 1, 99000);
    up_health_set(p, 1, UP_H_CHECK, 0, 100000);
    for (size_t i = 0; i < NELEM(at); i++) {
        rq.now_ms = at[i];
        ut_picks(p, &rq, 10000, window, count);
        got[i] = count[1];
    }
    up_pool_release(p);
}

void ut_check_slow_start(enum up_balance b)
{
    unsigned got[3];

    ut_slow_start_counts(b, 0, got);
    ck_assert_msg(got[0] > 800 && got[0] < 1020, "ramp start: %u of 10000", got[0]);
    ck_assert_msg(got[1] > 3150 && got[1] < 3500, "half way: %u of 10000", got[1]);
    ck_assert_msg(got[2] >= 4990 && got[2] <= 5010, "ramp over: %u of 10000", got[2]);
}
