/*
 * utest.h - helpers shared by the upstream/ unit tests: pools built from a
 * list of weights, on distinct 127.0.0.1 ports.
 */
#ifndef SY_UTEST_H
#define SY_UTEST_H

#include "upstream/upstream.h"

#include <check.h>
#include <stddef.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A pool "t" of <n> servers 127.0.0.1:(9001 + i) with <weights> (NULL: all
 * 1). Aborts the test (ck_assert) on failure. */
up_pool *ut_pool(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive);
/* The same with options (NULL: none); ut_pool_try may return NULL. */
up_pool *ut_pool_try(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive,
                     const struct up_pool_opts *opts);
up_pool *ut_pool_opts(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive,
                      const struct up_pool_opts *opts);

/* Makes <picks> picks on worker 0 with <rq> (may be NULL), each request
 * starting at its pick; <window> requests stay in flight, the oldest ending
 * when a new one starts (0: each ends before the next pick). Counts the picks
 * per server into <count> (n entries, zeroed here). */
void ut_picks(up_pool *p, const struct up_pick *rq, unsigned picks, unsigned window,
              unsigned *count);
/* Asserts that <count> (over <picks>) follows <weights> (NULL: equal) within
 * <tolerance> of the share, in absolute terms (0.03: three points). */
void ut_check_shares(const unsigned *count, const unsigned *weights, size_t n, unsigned picks,
                     double tolerance);

/* Two servers of weight 1 on balancer <b> with slow start over 1 s, the
 * second just back up: it gets about 0.1 / 1.1 of 10k sequential picks,
 * 0.5 / 1.5 half way, and half once the ramp is over. */
void ut_check_slow_start(enum up_balance b);
/* The same pool's picks of the second server (of 10k each, <window> in
 * flight as ut_picks) at the ramp's start, half way and after it, into
 * <got> (3 entries), for a balancer whose draws need their own margins. */
void ut_slow_start_counts(enum up_balance b, unsigned window, unsigned *got);

/* Runs <s> and returns main()'s exit status. */
int ut_run(Suite *s);

#endif
