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

/* Runs <s> and returns main()'s exit status. */
int ut_run(Suite *s);

#endif
