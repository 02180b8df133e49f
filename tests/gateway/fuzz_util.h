/*
 * tests/gateway/fuzz_util.h - what the gateway's fuzz harnesses and their
 * replay driver share: a check that aborts (so libFuzzer and ctest both see
 * a failure) and a small deterministic generator.
 */
#ifndef SY_TESTS_FUZZ_UTIL_H
#define SY_TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* xorshift64: *s must not be 0 */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

#endif
