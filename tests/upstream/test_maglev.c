/*
 * test_maglev.c - upstream/maglev.c: a key always goes to the same server,
 * the table follows the weights, removing one server of N moves at most
 * 1.2/N of the keys (at least its own; at 100 and 1,000 servers exactly its
 * own), the slots are shared within a bound at 100 and 1,000 servers, and
 * fallback sends an unusable server's keys to a next candidate that does
 * not change.
 */
#include "utest.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>

#define KEYS 100000

static up_pool *mg_pool(const unsigned *weights, size_t n, int fallback)
{
    struct up_pool_opts o = {.balance = UP_HASH, .fallback = fallback};

    return ut_pool_opts(weights, n, 1, 1, &o);
}

static size_t pick_key(up_pool *p, unsigned key)
{
    struct up_pick rq = {.hash = up_hash(&key, sizeof(key))};

    return up_select(p, 0, &rq);
}

START_TEST(stable)
{
    up_pool *a = mg_pool(NULL, 7, 0), *b = mg_pool(NULL, 7, 0);

    for (unsigned k = 0; k < 1000; k++) {
        size_t s = pick_key(a, k);
        ck_assert_uint_eq(pick_key(a, k), s);
        ck_assert_uint_eq(pick_key(b, k), s); /* a rebuilt pool agrees */
    }
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

/* Pool of servers 127.0.0.1:(9001 + i) for i in <ids> (n of them). */
static up_pool *pool_of(const unsigned *ids, size_t n)
{
    struct up_server_def defs[16];
    struct sockaddr_in sin = {.sin_family = AF_INET};
    char names[16][32];
    struct up_pool_opts o = {.balance = UP_HASH};
    up_pool *p;

    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "127.0.0.1:%u", 9001 + ids[i]);
        defs[i] = (struct up_server_def){names[i], (const struct sockaddr *)&sin, sizeof(sin), 1};
    }
    p = up_pool_new_opts("t", "", defs, n, 1, 1, &o);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(removing_one_moves_few)
{
    for (size_t n = 3; n <= 16; n += 13) {
        unsigned ids[16];
        for (unsigned i = 0; i < n; i++)
            ids[i] = i;
        for (size_t gone = 0; gone < n; gone += n - 1) {
            up_pool *all = pool_of(ids, n);
            unsigned rest[16], moved = 0;
            size_t k = 0;
            for (unsigned i = 0; i < n; i++)
                if (i != gone)
                    rest[k++] = i;
            up_pool *less = pool_of(rest, n - 1);
            for (unsigned key = 0; key < KEYS; key++) {
                size_t before = ids[pick_key(all, key)], after = rest[pick_key(less, key)];
                moved += before != after; /* its keys, and a few others */
            }
            ck_assert_msg(moved <= 1.2 * KEYS / n, "n=%zu moved %u of %u", n, moved, KEYS);
            ck_assert_msg(moved >= 0.8 * KEYS / n, "n=%zu moved %u of %u", n, moved, KEYS);
            up_pool_release(all);
            up_pool_release(less);
        }
    }
}
END_TEST

/* Server <i>'s weight in many()'s pools. */
static unsigned many_weight(size_t i, int equal)
{
    return equal ? 1 : 1 + (unsigned)(i % 4);
}

/* <n> servers 10.0.x.y:80 of weights 1..4 (all 1 when <equal>), without
 * server <skip> (SIZE_MAX: none), the others keeping their addresses. */
static up_pool *many(size_t n, size_t skip, int equal)
{
    struct up_server_def *defs = calloc(n, sizeof(*defs));
    char(*names)[32] = calloc(n, sizeof(*names));
    struct sockaddr_in sin = {.sin_family = AF_INET};
    struct up_pool_opts o = {.balance = UP_HASH};
    size_t k = 0;
    up_pool *p;

    ck_assert(defs && names);
    for (size_t i = 0; i < n; i++) {
        if (i == skip)
            continue;
        snprintf(names[k], sizeof(names[k]), "10.0.%zu.%zu:80", i / 256, i % 256);
        defs[k] = (struct up_server_def){names[k], (const struct sockaddr *)&sin, sizeof(sin),
                                         many_weight(i, equal)};
        k++;
    }
    p = up_pool_new_opts("t", "", defs, k, 1, 1, &o);
    ck_assert_ptr_nonnull(p);
    free(defs);
    free(names);
    return p;
}

/* The test at the sizes where Maglev's own fill missed it (1.6/N
 * at 100 servers, 6.7/N at 1,000): every slot (key hash = slot number)
 * that moves was the removed server's, and they are at most 1.2/N of the
 * table (at least 0.8/N: the server had its share). */
START_TEST(removing_one_of_many_moves_its_keys_only)
{
    static const size_t ns[] = {100, 1000};

    for (size_t a = 0; a < 2; a++) {
        for (int equal = 1; equal >= 0; equal--) {
            size_t n = ns[a], gone = n / 3, moved = 0;
            up_pool *all = many(n, SIZE_MAX, equal), *less = many(n, gone, equal);
            for (uint64_t x = 0; x < UP_MAGLEV_SIZE; x++) {
                struct up_pick rq = {.hash = x};
                size_t before = up_select(all, 0, &rq), after = up_select(less, 0, &rq);
                after += after >= gone; /* the indices past it shift down */
                if (before != after) {
                    ck_assert_msg(before == gone, "n=%zu slot %llu: %zu -> %zu", n,
                                  (unsigned long long)x, before, after);
                    moved++;
                }
            }
            if (equal) {
                ck_assert_msg(moved <= 1.2 * UP_MAGLEV_SIZE / n, "n=%zu moved %zu", n, moved);
                ck_assert_msg(moved >= 0.8 * UP_MAGLEV_SIZE / n, "n=%zu moved %zu", n, moved);
            }
            up_pool_release(all);
            up_pool_release(less);
        }
    }
}
END_TEST

/* The balance bound of the rendezvous fill, every slot's owner counted
 * (key hash = slot number), each server's slots over its weight's share:
 * a server's count varies like a binomial one, about 1/sqrt(M x share),
 * so the bound loosens with N. Measured (loadtest/balancer_bench): 0.92
 * to 1.06, 2.5 % rms at 100 servers; 0.70 to 1.31, 8.9 % rms at 1,000
 * (0.57 to 1.30, 9.9 % with weights 1..4, whose weight-1 servers have 26
 * slots). The bounds leave a margin over those, and fail if a change to
 * the fill loses its exponential race (equal shares whatever the weights)
 * or its permutations' spread. */
START_TEST(balance_bound)
{
    static const struct {
        size_t n;
        double lo, hi, rms;
    } b[] = {{100, 0.90, 1.10, 0.035}, {1000, 0.50, 1.40, 0.11}};

    for (size_t a = 0; a < 2; a++) {
        for (int equal = 1; equal >= 0; equal--) {
            size_t n = b[a].n;
            up_pool *p = many(n, SIZE_MAX, equal);
            unsigned *count = calloc(n, sizeof(*count));
            double total = 0, lo = 1e9, hi = 0, sq = 0;
            ck_assert_ptr_nonnull(count);
            for (uint64_t x = 0; x < UP_MAGLEV_SIZE; x++) {
                struct up_pick rq = {.hash = x};
                count[up_select(p, 0, &rq)]++;
            }
            for (size_t i = 0; i < n; i++)
                total += many_weight(i, equal);
            for (size_t i = 0; i < n; i++) {
                double r = count[i] / (UP_MAGLEV_SIZE * many_weight(i, equal) / total);
                lo = r < lo ? r : lo;
                hi = r > hi ? r : hi;
                sq += (r - 1) * (r - 1);
            }
            ck_assert_msg(lo >= b[a].lo && hi <= b[a].hi, "n=%zu %s: min %.3f max %.3f", n,
                          equal ? "equal" : "1..4", lo, hi);
            ck_assert_msg(sqrt(sq / (double)n) <= b[a].rms, "n=%zu %s: rms %.4f", n,
                          equal ? "equal" : "1..4", sqrt(sq / (double)n));
            free(count);
            up_pool_release(p);
        }
    }
}
END_TEST

START_TEST(weighted_table)
{
    unsigned weights[] = {1, 3, 6}, count[3] = {0};
    up_pool *p = mg_pool(weights, 3, 0);

    for (unsigned k = 0; k < KEYS; k++)
        count[pick_key(p, k)]++;
    ut_check_shares(count, weights, 3, KEYS, 0.03);
    up_pool_release(p);
}
END_TEST

START_TEST(fallback)
{
    up_pool *strict = mg_pool(NULL, 4, 0), *fb = mg_pool(NULL, 4, 1);
    unsigned count[4] = {0}, none = 0;

    up_health_set(strict, 2, UP_H_EJECTED, 1, 1);
    up_health_set(fb, 2, UP_H_EJECTED, 1, 1);
    for (unsigned k = 0; k < 10000; k++) {
        size_t s = pick_key(strict, k), f = pick_key(fb, k);
        if (s == UP_NONE) {
            none++;
            ck_assert_uint_ne(f, 2);
            ck_assert_uint_ne(f, UP_NONE);
            ck_assert_uint_eq(pick_key(fb, k), f); /* the same next candidate */
            count[f]++;
        } else {
            ck_assert_uint_eq(s, f); /* other keys stay */
        }
    }
    /* about a quarter failed without fallback, spread over the other three */
    ck_assert_uint_gt(none, 2000);
    ck_assert_uint_lt(none, 3000);
    for (size_t s = 0; s < 4; s++)
        ck_assert(s == 2 ? count[s] == 0 : count[s] > none / 6);
    up_pool_release(strict);
    up_pool_release(fb);
}
END_TEST

START_TEST(default_size)
{
    struct up_pool_opts o = {.balance = UP_HASH, .table_size = 0};
    up_pool *p = ut_pool_opts(NULL, 2, 1, 1, &o);
    unsigned count[2] = {0};

    /* the default 65,537 slots, shared evenly by two servers (±3 points) */
    for (unsigned k = 0; k < KEYS; k++)
        count[pick_key(p, k)]++;
    ut_check_shares(count, NULL, 2, KEYS, 0.03);
    up_pool_release(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_maglev");
    TCase *tc = tcase_create("maglev");
    /* 100k-key and 20k-step runs: seconds under ASan on a busy machine */
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, stable);
    tcase_add_test(tc, removing_one_moves_few);
    tcase_add_test(tc, removing_one_of_many_moves_its_keys_only);
    tcase_add_test(tc, balance_bound);
    tcase_add_test(tc, weighted_table);
    tcase_add_test(tc, fallback);
    tcase_add_test(tc, default_size);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
