/*
 * test_concurrency.c - lock-free lookups while a writer publishes versions.
 *
 * One writer (the test's thread) derives version g+1 from version g in a
 * transaction, publishes it through a C11 atomic pointer and retires g; reader
 * threads look up in whatever version they loaded. Retirement uses one hazard
 * slot per reader, implemented here: a reader announces the version it loaded
 * and re-checks that it is still current before using it; the writer frees a
 * retired version only when no slot holds it. (seq_cst on the slot store and
 * the re-check pairs with the writer's publish and slot scan, Dekker style;
 * the reader's release of its slot is what orders its last lookup before the
 * writer's rt_table_free.)
 *
 * Version g carries g in the udata of GET /gen. Readers check each answer
 * against the g of the version they hold: /always/{x} and the GitHub routes
 * hit in every version, /odd only in odd ones, /even/{x} only in even ones,
 * /g/<g> and /churn/<g-2..g>/{x} only around g. Bounded by 2000 versions or
 * 5 seconds. Run it under TSan (-DSY_SANITIZE=thread).
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router/router.h"
#include "rtest.h"

#define NREADERS 3
#define MAX_VERSIONS 2000
#define MAX_SECONDS 5.0
#define ALWAYS_UD 1000000
#define GITHUB_UD 2000000

static _Atomic(rt_table *) current;
static _Atomic(rt_table *) hazard[NREADERS];
static atomic_int done;

static struct rtest_line *gh_reqs;
static size_t gh_n;

struct reader {
    pthread_t thread;
    int idx;
    unsigned long iterations;
    unsigned long generations_seen;
    char error[512]; /* first inconsistency, empty if none */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Loads the current version and pins it in the reader's slot. */
static rt_table *pin(int idx)
{
    rt_table *t;

    for (;;) {
        t = atomic_load_explicit(&current, memory_order_acquire);
        atomic_store_explicit(&hazard[idx], t, memory_order_seq_cst);
        if (atomic_load_explicit(&current, memory_order_seq_cst) == t)
            return t;
    }
}

static void unpin(int idx)
{
    atomic_store_explicit(&hazard[idx], NULL, memory_order_release);
}

/* GET <path> in <t>: the status, the route's udata in <*ud>, param 0 in <p0>. */
static enum rt_status get(const rt_table *t, const char *path, intptr_t *ud, struct rt_param *p0)
{
    struct rt_param params[8];
    struct rt_match m;
    size_t cap = rt_table_max_params(t);

    *ud = -1;
    if (cap > 8)
        return (enum rt_status) - 1;
    rt_lookup(t, "GET", 3, NULL, 0, path, strlen(path), params, cap, &m);
    *ud = m.status == RT_HIT ? (intptr_t)rt_route_udata(m.route) : -1;
    if (p0 && m.status == RT_HIT && m.nparams > 0)
        *p0 = params[0];
    return m.status;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(rd->error, sizeof(rd->error), __VA_ARGS__);                                       \
        goto out;                                                                                  \
    } while (0)

static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    struct rtest_rng rng = {(uint64_t)rd->idx * 7919 + 1};
    intptr_t last_g = -1;

    while (!atomic_load_explicit(&done, memory_order_acquire)) {
        rt_table *t = pin(rd->idx);
        char path[64], val[16];
        struct rt_param p0;
        intptr_t g = -1, ud = -1, g2 = -1;
        size_t i;

        if (get(t, "/gen", &g, NULL) != RT_HIT)
            FAIL("GET /gen missed");
        if (g < last_g)
            FAIL("generation went back from %ld to %ld", (long)last_g, (long)g);
        if (g != last_g)
            rd->generations_seen++;
        last_g = g;

        snprintf(val, sizeof(val), "v%u", (unsigned)rtest_below(&rng, 1000));
        snprintf(path, sizeof(path), "/always/%s", val);
        memset(&p0, 0, sizeof(p0));
        if (get(t, path, &ud, &p0) != RT_HIT || ud != ALWAYS_UD)
            FAIL("gen %ld: %s missed (udata %ld)", (long)g, path, (long)ud);
        if (p0.len != strlen(val) || memcmp(p0.value, val, p0.len) != 0 ||
            strcmp(p0.name, "x") != 0)
            FAIL("gen %ld: %s: bad param", (long)g, path);

        enum rt_status st = get(t, "/odd", &ud, NULL);
        if ((g % 2 == 1) != (st == RT_HIT) || (st == RT_HIT && ud != g))
            FAIL("gen %ld: /odd status %d udata %ld", (long)g, (int)st, (long)ud);
        st = get(t, "/even/zz", &ud, NULL);
        if ((g % 2 == 0) != (st == RT_HIT) || (st == RT_HIT && ud != g))
            FAIL("gen %ld: /even/zz status %d udata %ld", (long)g, (int)st, (long)ud);

        snprintf(path, sizeof(path), "/g/%ld", (long)g);
        if (get(t, path, &ud, NULL) != RT_HIT || ud != g)
            FAIL("gen %ld: %s missed", (long)g, path);
        snprintf(path, sizeof(path), "/g/%ld", (long)g + 1);
        if (get(t, path, &ud, NULL) != RT_NOT_FOUND)
            FAIL("gen %ld: %s present", (long)g, path);
        if (g > 0) {
            snprintf(path, sizeof(path), "/g/%ld", (long)g - 1);
            if (get(t, path, &ud, NULL) != RT_NOT_FOUND)
                FAIL("gen %ld: %s present", (long)g, path);
        }
        for (intptr_t k = g - 3; k <= g; k++) {
            if (k < 0)
                continue;
            snprintf(path, sizeof(path), "/churn/%ld/a", (long)k);
            st = get(t, path, &ud, NULL);
            if ((k > g - 3) != (st == RT_HIT) || (st == RT_HIT && ud != k))
                FAIL("gen %ld: %s status %d udata %ld", (long)g, path, (int)st, (long)ud);
        }

        i = rtest_below(&rng, gh_n);
        if (strcmp(gh_reqs[i].method, "GET") == 0) {
            if (get(t, gh_reqs[i].path, &ud, NULL) != RT_HIT || ud != GITHUB_UD + (intptr_t)i)
                FAIL("gen %ld: %s missed", (long)g, gh_reqs[i].path);
        }

        /* the version does not change under the reader */
        if (get(t, "/gen", &g2, NULL) != RT_HIT || g2 != g)
            FAIL("gen %ld: /gen changed to %ld", (long)g, (long)g2);
        unpin(rd->idx);
        rd->iterations++;
    }
    return NULL;
out:
    unpin(rd->idx);
    return NULL;
}

static void must(int rc, const char *what, intptr_t g, const struct rt_error *err)
{
    ck_assert_msg(rc == 0, "gen %ld: %s: %s", (long)g, what, err->msg);
}

static void ins(rt_txn *tx, const char *pattern, intptr_t ud, intptr_t g)
{
    const char *m[1] = {"GET"};
    struct rt_error err;
    must(rt_txn_insert(tx, m, 1, pattern, NULL, (void *)ud, &err), pattern, g, &err);
}

static void del(rt_txn *tx, const char *pattern, intptr_t g)
{
    const char *m[1] = {"GET"};
    struct rt_error err;
    must(rt_txn_delete(tx, m, 1, pattern, &err), pattern, g, &err);
}

/* Frees the retired versions no reader holds; returns how many are left. */
static size_t scan(rt_table **retired, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        int busy = 0;
        for (int r = 0; r < NREADERS; r++)
            busy |= atomic_load_explicit(&hazard[r], memory_order_seq_cst) == retired[i];
        if (busy)
            retired[k++] = retired[i];
        else
            rt_table_free(retired[i]);
    }
    return k;
}

START_TEST(test_readers_and_writer)
{
    struct rtest_line *routes;
    size_t n = rtest_load("github.txt", &routes);
    rt_table *empty = rt_table_new(NULL, NULL), *cur;
    rt_table **retired = malloc((MAX_VERSIONS + 2) * sizeof(*retired));
    struct reader readers[NREADERS];
    size_t nretired = 0, maxretired = 0;
    intptr_t g = 0;
    double start = now();
    rt_txn *tx;
    char pat[64];

    ck_assert_ptr_nonnull(retired);
    gh_n = rtest_load("github-requests.txt", &gh_reqs);
    ck_assert_uint_eq(gh_n, n);

    /* version 0 */
    tx = rt_txn_begin(empty);
    for (size_t i = 0; i < n; i++) {
        const char *m[1] = {routes[i].method};
        struct rt_error err;
        must(rt_txn_insert(tx, m, 1, routes[i].path, NULL, (void *)(intptr_t)(GITHUB_UD + i), &err),
             routes[i].path, 0, &err);
    }
    ins(tx, "/always/{x}", ALWAYS_UD, 0);
    ins(tx, "/gen", 0, 0);
    ins(tx, "/g/0", 0, 0);
    ins(tx, "/even/{x}", 0, 0);
    ins(tx, "/churn/0/{x}", 0, 0);
    cur = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(cur);
    rt_table_free(empty);
    atomic_store_explicit(&current, cur, memory_order_release);
    for (int r = 0; r < NREADERS; r++)
        atomic_store(&hazard[r], NULL);
    atomic_store(&done, 0);

    for (int r = 0; r < NREADERS; r++) {
        memset(&readers[r], 0, sizeof(readers[r]));
        readers[r].idx = r;
        ck_assert_int_eq(pthread_create(&readers[r].thread, NULL, reader_main, &readers[r]), 0);
    }

    while (g < MAX_VERSIONS && now() - start < MAX_SECONDS) {
        const char *m[1] = {"GET"};
        struct rt_error err;
        rt_table *nv;

        g++;
        tx = rt_txn_begin(cur);
        ck_assert_ptr_nonnull(tx);
        must(rt_txn_update(tx, m, 1, "/gen", NULL, (void *)g, &err), "update /gen", g, &err);
        snprintf(pat, sizeof(pat), "/g/%ld", (long)g);
        ins(tx, pat, g, g);
        snprintf(pat, sizeof(pat), "/g/%ld", (long)g - 1);
        del(tx, pat, g);
        if (g % 2 == 1) {
            ins(tx, "/odd", g, g);
            del(tx, "/even/{y}", g);
        } else {
            del(tx, "/odd", g);
            ins(tx, "/even/{x}", g, g);
        }
        snprintf(pat, sizeof(pat), "/churn/%ld/{x}", (long)g);
        ins(tx, pat, g, g);
        if (g >= 3) {
            snprintf(pat, sizeof(pat), "/churn/%ld/{x}", (long)g - 3);
            del(tx, pat, g);
        }
        nv = rt_txn_commit(tx);
        ck_assert_ptr_nonnull(nv);

        /* publish, retire the old version, free what no reader holds */
        atomic_store_explicit(&current, nv, memory_order_seq_cst);
        retired[nretired++] = cur;
        cur = nv;
        nretired = scan(retired, nretired);
        if (nretired > maxretired)
            maxretired = nretired;
        ck_assert_uint_le(nretired, NREADERS);
    }
    atomic_store_explicit(&done, 1, memory_order_release);
    for (int r = 0; r < NREADERS; r++)
        ck_assert_int_eq(pthread_join(readers[r].thread, NULL), 0);
    nretired = scan(retired, nretired);
    ck_assert_uint_eq(nretired, 0);

    fprintf(stderr, "concurrency: %ld versions in %.2f s, at most %zu retired waiting;", (long)g,
            now() - start, maxretired);
    for (int r = 0; r < NREADERS; r++)
        fprintf(stderr, " reader %d: %lu lookups rounds, %lu generations;", r,
                readers[r].iterations, readers[r].generations_seen);
    fprintf(stderr, "\n");
    for (int r = 0; r < NREADERS; r++) {
        ck_assert_msg(readers[r].error[0] == '\0', "reader %d: %s", r, readers[r].error);
        ck_assert_uint_gt(readers[r].iterations, 0);
    }
    ck_assert_int_ge(g, 10);

    rt_table_free(cur);
    free(retired);
    rtest_lines_free(routes, n);
    rtest_lines_free(gh_reqs, gh_n);
}
END_TEST

static Suite *concurrency_suite(void)
{
    Suite *s = suite_create("router_concurrency");
    TCase *tc = tcase_create("concurrency");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_readers_and_writer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(concurrency_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
