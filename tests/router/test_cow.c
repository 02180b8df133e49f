/*
 * test_cow.c - versions and path copying (router/table.c): random insert,
 * update and delete sequences, one transaction each (some aborted, some
 * started from an older version), every new version checked against the
 * reference; older versions keep answering exactly as before until freed, in
 * any order; udata_free runs exactly once per route, when the last version
 * holding it is freed; deleting every GitHub route leaves an empty table with
 * the node count of a new one; and nothing leaks (run under ASan:
 * -DSY_SANITIZE=address).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "reference.h"
#include "rtest.h"

/* ---- udata accounting: every udata is a record of this array ---- */

#define MAX_UD 40000

struct ud {
    int freed;     /* udata_free calls */
    int owned;     /* an insert or update with it succeeded */
    int committed; /* some committed version held it */
};

static struct ud uds[MAX_UD];
static size_t nud;
static int ud_bad_calls;

static struct ud *ud_new(void)
{
    RTEST_REQUIRE(nud < MAX_UD, "too many udata records");
    memset(&uds[nud], 0, sizeof(uds[nud]));
    return &uds[nud++];
}

static intptr_t ud_id(void *p)
{
    return (intptr_t)((struct ud *)p - uds);
}

static void ud_free(void *p)
{
    struct ud *u = p;

    if (u < uds || u >= uds + nud) {
        ud_bad_calls++;
        return;
    }
    u->freed++;
}

/* ---- live versions and their reference snapshots ---- */

#define MAX_LIVE 8

struct version {
    rt_table *t;
    struct ref_table ref;
    size_t gen;
};

struct world {
    struct version live[MAX_LIVE];
    size_t nlive;
    struct rtest_groute pool[512]; /* routes generated so far, probed after deletion too */
    size_t npool;
    struct rtest_rng rng;
    uint64_t seed;
};

static void pool_add(struct world *w, const char *spec, const char *pattern)
{
    struct rtest_groute *g = &w->pool[w->npool % 512];
    snprintf(g->methods, sizeof(g->methods), "%s", spec);
    snprintf(g->pattern, sizeof(g->pattern), "%s", pattern);
    w->npool++;
}

static void ref_spec(const struct ref_route *r, char *spec, size_t cap)
{
    spec[0] = '\0';
    if (r->nmethods == 0)
        snprintf(spec, cap, "*");
    for (size_t i = 0; i < r->nmethods; i++) {
        size_t k = strlen(spec);
        snprintf(spec + k, cap - k, "%s%s", i ? "," : "", r->methods[i]);
    }
}

/* Every udata a live version holds is unfreed; every committed udata no live
 * version holds was freed exactly once. */
static void check_udata(const struct world *w, const char *when)
{
    static unsigned char held[MAX_UD];

    memset(held, 0, nud);
    for (size_t v = 0; v < w->nlive; v++)
        for (size_t i = 0; i < w->live[v].ref.n; i++)
            held[w->live[v].ref.routes[i].id] = 1;
    RTEST_REQUIRE(ud_bad_calls == 0, "udata_free called with a pointer never given");
    for (size_t i = 0; i < nud; i++) {
        RTEST_REQUIRE(uds[i].freed <= 1, "seed %llu %s: udata %zu freed %d times",
                      (unsigned long long)w->seed, when, i, uds[i].freed);
        if (held[i])
            RTEST_REQUIRE(uds[i].freed == 0, "seed %llu %s: udata %zu freed while held",
                          (unsigned long long)w->seed, when, i);
        else if (uds[i].committed)
            RTEST_REQUIRE(uds[i].freed == 1,
                          "seed %llu %s: udata %zu not freed though no live version holds it",
                          (unsigned long long)w->seed, when, i);
    }
}

static int cmp_intptr(const void *a, const void *b)
{
    intptr_t x = *(const intptr_t *)a, y = *(const intptr_t *)b;
    return (x > y) - (x < y);
}

struct collect {
    intptr_t *ids;
    size_t n, cap;
};

static void collect_route(const rt_route *r, void *arg)
{
    struct collect *c = arg;
    if (c->n < c->cap)
        c->ids[c->n] = ud_id(rt_route_udata(r));
    c->n++;
}

/* <v> answers like its reference: count, foreach, and <nreq> requests near
 * its routes and the pool's. */
static void check_version(struct world *w, const struct version *v, size_t nreq, const char *when)
{
    size_t n = v->ref.n, nroutes;
    intptr_t *want = malloc((n + 1) * sizeof(*want)), *got = malloc((n + 1) * sizeof(*got));
    struct collect c = {got, 0, n + 1};
    struct rtest_groute *routes;
    char why[4096];

    RTEST_REQUIRE(rt_table_count(v->t) == n, "seed %llu %s: gen %zu: count %zu, want %zu",
                  (unsigned long long)w->seed, when, v->gen, rt_table_count(v->t), n);
    rt_table_foreach(v->t, collect_route, &c);
    RTEST_REQUIRE(c.n == n, "gen %zu: foreach visited %zu routes, want %zu", v->gen, c.n, n);
    for (size_t i = 0; i < n; i++)
        want[i] = v->ref.routes[i].id;
    qsort(want, n, sizeof(*want), cmp_intptr);
    qsort(got, n, sizeof(*got), cmp_intptr);
    RTEST_REQUIRE(n == 0 || memcmp(want, got, n * sizeof(*want)) == 0,
                  "seed %llu %s: gen %zu: foreach routes differ", (unsigned long long)w->seed, when,
                  v->gen);
    free(want);
    free(got);

    nroutes = n + (w->npool < 512 ? w->npool : 512);
    routes = malloc((nroutes + 1) * sizeof(*routes));
    RTEST_REQUIRE(routes != NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        ref_spec(&v->ref.routes[i], routes[i].methods, sizeof(routes[i].methods));
        snprintf(routes[i].pattern, sizeof(routes[i].pattern), "%s", v->ref.routes[i].pattern);
    }
    memcpy(routes + n, w->pool, (nroutes - n) * sizeof(*routes));
    for (size_t q = 0; q < nreq; q++) {
        struct rtest_greq r;
        rtest_gen_request(&w->rng, routes, nroutes, &r);
        if (!rtest_agree(v->t, &v->ref, ud_id, r.method, r.has_host ? r.host : NULL,
                         r.has_host ? strlen(r.host) : 0, r.path, strlen(r.path), why, sizeof(why)))
            ck_abort_msg("seed %llu %s: version gen %zu (%zu routes): %s",
                         (unsigned long long)w->seed, when, v->gen, n, why);
    }
    free(routes);
}

/* Frees live version <i>; the others keep their order (oldest first). */
static void free_version(struct world *w, size_t i)
{
    rt_table_free(w->live[i].t);
    ref_clear(&w->live[i].ref);
    memmove(&w->live[i], &w->live[i + 1], (w->nlive - i - 1) * sizeof(w->live[0]));
    w->nlive--;
}

/* One transaction of 1..6 random operations from live version <from>, each
 * checked against the reference; committed (pushed) or aborted. */
static void one_txn(struct world *w, size_t from, size_t gen)
{
    struct version nv;
    rt_txn *tx = rt_txn_begin(w->live[from].t);
    size_t nops = 1 + rtest_below(&w->rng, 6);
    char why[1024];

    ck_assert_ptr_nonnull(tx);
    ref_init(&nv.ref);
    ref_copy(&nv.ref, &w->live[from].ref);
    nv.gen = gen;
    for (size_t op = 0; op < nops; op++) {
        size_t r = rtest_below(&w->rng, 100);
        struct rtest_groute g;
        struct rtest_methods ms;
        struct rt_error err;
        char pattern[sizeof(g.pattern)];
        const char *what;
        int rc, rrc;
        struct ud *u = NULL;

        if (r < 12 && nv.ref.n > 0) {
            /* delete an existing route, maybe with renamed params and the
             * methods in another order */
            const struct ref_route *e = &nv.ref.routes[rtest_below(&w->rng, nv.ref.n)];
            ref_spec(e, g.methods, sizeof(g.methods));
            snprintf(g.pattern, sizeof(g.pattern), "%s", e->pattern);
        } else if (r < 50 || nv.ref.n == 0) {
            rtest_gen_route(&w->rng, 25, &g);
        } else {
            const struct ref_route *e = &nv.ref.routes[rtest_below(&w->rng, nv.ref.n)];
            ref_spec(e, g.methods, sizeof(g.methods));
            snprintf(g.pattern, sizeof(g.pattern), "%s", e->pattern);
        }
        rtest_methods_parse(&ms, g.methods);
        if (ms.n > 1 && rtest_below(&w->rng, 2)) { /* another order, same set */
            const char *tmp = ms.ptr[0];
            ms.ptr[0] = ms.ptr[ms.n - 1];
            ms.ptr[ms.n - 1] = tmp;
        }
        if (rtest_below(&w->rng, 2))
            rtest_rename_params(&w->rng, g.pattern, pattern, sizeof(pattern));
        else
            snprintf(pattern, sizeof(pattern), "%s", g.pattern);
        pool_add(w, g.methods, pattern);

        memset(&err, 0, sizeof(err));
        r = rtest_below(&w->rng, 100);
        if (r < 45) {
            what = "insert";
            u = ud_new();
            rc = rt_txn_insert(tx, ms.ptr, ms.n, pattern, NULL, u, &err);
            rrc = ref_insert(&nv.ref, ms.ptr, ms.n, pattern, ud_id(u), NULL, 0, NULL);
        } else if (r < 75) {
            what = "delete";
            rc = rt_txn_delete(tx, ms.ptr, ms.n, pattern, &err);
            rrc = ref_delete(&nv.ref, ms.ptr, ms.n, pattern, NULL);
        } else {
            what = "update";
            u = ud_new();
            rc = rt_txn_update(tx, ms.ptr, ms.n, pattern, NULL, u, &err);
            rrc = ref_update(&nv.ref, ms.ptr, ms.n, pattern, ud_id(u), NULL);
        }
        snprintf(why, sizeof(why),
                 "seed %llu gen %zu: %s %s %s: tree rc %d code %d (%s), reference %d",
                 (unsigned long long)w->seed, gen, what, g.methods, pattern, rc, (int)err.code,
                 err.msg, rrc);
        RTEST_REQUIRE((rc == 0) == (rrc == REF_OK), "%s", why);
        if (rrc == REF_ECONFLICT)
            RTEST_REQUIRE(err.code == RT_ECONFLICT, "%s", why);
        if (rrc == REF_ENOENT)
            RTEST_REQUIRE(err.code == RT_ENOENT, "%s", why);
        if (rc == 0 && u)
            u->owned = 1;
    }

    if (rtest_below(&w->rng, 10) == 0) {
        rt_txn_abort(tx);
        ref_clear(&nv.ref);
        check_udata(w, "after abort");
        return;
    }
    nv.t = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(nv.t);
    for (size_t i = 0; i < nv.ref.n; i++)
        uds[nv.ref.routes[i].id].committed = 1;
    ck_assert_uint_lt(w->nlive, MAX_LIVE);
    w->live[w->nlive++] = nv;
    check_version(w, &w->live[w->nlive - 1], 60, "new version");
    check_udata(w, "after commit");
}

static void random_history(uint64_t seed, size_t steps)
{
    struct world *w = calloc(1, sizeof(*w));
    struct rt_options o;

    ck_assert_ptr_nonnull(w);
    w->seed = seed;
    w->rng.s = seed;
    o.trailing_slash = (enum rt_trailing_slash)rtest_below(&w->rng, 3);
    o.auto_options = (int)rtest_below(&w->rng, 2);
    w->live[0].t = rt_table_new(&o, ud_free);
    ck_assert_ptr_nonnull(w->live[0].t);
    ref_init(&w->live[0].ref);
    w->nlive = 1;

    for (size_t step = 1; step <= steps; step++) {
        /* mostly from the newest version, sometimes a branch from an older */
        size_t from = w->nlive - 1;
        if (rtest_below(&w->rng, 5) == 0)
            from = rtest_below(&w->rng, w->nlive);
        one_txn(w, from, step);

        if (w->nlive >= MAX_LIVE - 1 || (w->nlive > 1 && rtest_below(&w->rng, 3) == 0)) {
            size_t victim = rtest_below(&w->rng, w->nlive);
            /* still answering exactly as when it was committed */
            check_version(w, &w->live[victim], 60, "before free");
            free_version(w, victim);
            check_udata(w, "after free");
        }
        if (step % 25 == 0)
            for (size_t v = 0; v < w->nlive; v++)
                check_version(w, &w->live[v], 40, "periodic");
    }
    while (w->nlive > 0) {
        size_t victim = rtest_below(&w->rng, w->nlive);
        check_version(w, &w->live[victim], 40, "final");
        free_version(w, victim);
        check_udata(w, "final free");
    }
    for (size_t i = 0; i < nud; i++)
        RTEST_REQUIRE(uds[i].freed == uds[i].owned,
                      "seed %llu: udata %zu: freed %d times, owned by the table: %d",
                      (unsigned long long)seed, i, uds[i].freed, uds[i].owned);
    free(w);
}

START_TEST(test_random_history)
{
    uint64_t base = rtest_seed(777);
    size_t runs = rtest_iters(12);

    for (size_t i = 0; i < runs; i++) {
        nud = 0;
        random_history(base + (uint64_t)i, 150);
    }
}
END_TEST

/* ---- GitHub routes: delete them all ---- */

START_TEST(test_github_delete_all)
{
    struct rtest_line *routes, *reqs;
    size_t n = rtest_load("github.txt", &routes), nreq = rtest_load("github-requests.txt", &reqs);
    struct rtest_rng rng = {rtest_seed(4242)};
    rt_table *fresh = rt_table_new(NULL, NULL), *v0 = rt_table_new(NULL, ud_free), *full;
    struct rt_stats empty_st, st;
    struct ref_table fullref;
    struct world *w = calloc(1, sizeof(*w));
    size_t *order = malloc(n * sizeof(*order));
    rt_txn *tx;
    char why[4096];

    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(order);
    ck_assert_uint_eq(n, 203);
    ck_assert_uint_eq(nreq, n);
    nud = 0;
    w->seed = rng.s;
    rt_table_stats(fresh, &empty_st);
    ck_assert_uint_eq(empty_st.routes, 0);

    /* all routes in one transaction */
    ref_init(&fullref);
    tx = rt_txn_begin(v0);
    for (size_t i = 0; i < n; i++) {
        struct ud *u = ud_new();
        const char *m[1] = {routes[i].method};
        struct rt_error err;
        ck_assert_int_eq(rt_txn_insert(tx, m, 1, routes[i].path, NULL, u, &err), 0);
        ck_assert_int_eq(ref_insert(&fullref, m, 1, routes[i].path, ud_id(u), NULL, 0, NULL), 0);
        u->owned = u->committed = 1;
    }
    full = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(full);
    rt_table_free(v0);
    rt_table_stats(full, &st);
    ck_assert_uint_eq(st.routes, n);
    ck_assert_uint_gt(st.nodes, empty_st.nodes);
    ck_assert_uint_gt(st.bytes, empty_st.bytes);
    ck_assert_uint_eq(st.live_nodes, st.nodes);

    w->live[0].t = full;
    ref_init(&w->live[0].ref);
    ref_copy(&w->live[0].ref, &fullref);
    w->nlive = 1;
    for (size_t i = 0; i < n; i++)
        pool_add(w, routes[i].method, routes[i].path);

    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rtest_below(&rng, i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }

    for (size_t k = 0; k < n; k++) {
        const struct version *last = &w->live[w->nlive - 1];
        const struct rtest_line *l = &routes[order[k]];
        const char *m[1] = {l->method};
        struct version nv;
        struct rt_error err;

        tx = rt_txn_begin(last->t);
        RTEST_REQUIRE(rt_txn_delete(tx, m, 1, l->path, &err) == 0, "delete %s %s: %s", l->method,
                      l->path, err.msg);
        ck_assert_int_eq(rt_txn_delete(tx, m, 1, l->path, &err), -1);
        ck_assert_int_eq(err.code, RT_ENOENT);
        nv.t = rt_txn_commit(tx);
        ck_assert_ptr_nonnull(nv.t);
        ref_init(&nv.ref);
        ref_copy(&nv.ref, &last->ref);
        ck_assert_int_eq(ref_delete(&nv.ref, m, 1, l->path, NULL), 0);
        nv.gen = k + 1;
        w->live[w->nlive++] = nv;
        if (k % 10 == 0 || k + 1 == n)
            check_version(w, &w->live[w->nlive - 1], 80, "github delete");
        /* keep the full version (slot 0) and at most 4 others */
        if (w->nlive > 5) {
            size_t victim = 1 + rtest_below(&rng, w->nlive - 2);
            free_version(w, victim);
            check_udata(w, "github free");
        }
    }

    /* the newest version is empty and as small as a new table */
    {
        const struct version *last = &w->live[w->nlive - 1];
        for (size_t v = 0; v < w->nlive; v++)
            if (w->live[v].ref.n == 0)
                last = &w->live[v];
        ck_assert_uint_eq(rt_table_count(last->t), 0);
        rt_table_stats(last->t, &st);
        ck_assert_uint_eq(st.routes, 0);
        ck_assert_uint_eq(st.nodes, empty_st.nodes);
        ck_assert_uint_eq(rt_table_methods(last->t), 0);
    }

    /* the full version still answers every request with its own route */
    for (size_t i = 0; i < nreq; i++) {
        struct rtest_res r;
        ck_assert_int_eq(rtest_lookup(full, reqs[i].method, NULL, reqs[i].path, &r), RT_HIT);
        RTEST_REQUIRE(ud_id(rt_route_udata(r.m.route)) == (intptr_t)i, "%s %s: got %s",
                      reqs[i].method, reqs[i].path, rt_route_pattern(r.m.route));
        ck_assert_int_eq(rtest_agree(full, &fullref, ud_id, reqs[i].method, NULL, 0, reqs[i].path,
                                     strlen(reqs[i].path), why, sizeof(why)),
                         1);
    }

    /* free everything but the empty version, in random order */
    while (w->nlive > 1) {
        size_t victim = rtest_below(&rng, w->nlive);
        if (w->live[victim].ref.n == 0)
            continue;
        free_version(w, victim);
        check_udata(w, "github final");
    }
    rt_table_stats(w->live[0].t, &st);
    ck_assert_uint_eq(st.nodes, empty_st.nodes);
    ck_assert_uint_eq(st.live_nodes, st.nodes);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(uds[i].freed, 1);
    free_version(w, 0);

    ref_clear(&fullref);
    rt_table_free(fresh);
    rtest_lines_free(routes, n);
    rtest_lines_free(reqs, nreq);
    free(order);
    free(w);
}
END_TEST

/* Path copying: one more route copies a path, not the table. */
START_TEST(test_sharing)
{
    struct rtest_line *routes;
    size_t n = rtest_load("github.txt", &routes);
    const char *lines[300];
    rt_table *v1, *v2;
    rt_txn *tx;
    struct rt_stats s1, s2;
    struct rt_error err;
    const char *get[] = {"GET"};

    ck_assert_uint_le(n, 300);
    for (size_t i = 0; i < n; i++) {
        char *l = malloc(strlen(routes[i].method) + strlen(routes[i].path) + 2);
        ck_assert_ptr_nonnull(l);
        sprintf(l, "%s %s", routes[i].method, routes[i].path);
        lines[i] = l;
    }
    v1 = rtest_build(NULL, lines, n);
    rt_table_stats(v1, &s1);
    tx = rt_txn_begin(v1);
    ck_assert_int_eq(rt_txn_insert(tx, get, 1, "/repos/{owner}/{repo}/zzz/{id}", NULL, NULL, &err),
                     0);
    v2 = rt_txn_commit(tx);
    rt_table_stats(v2, &s2);
    ck_assert_uint_eq(s2.routes, s1.routes + 1);
    ck_assert_uint_gt(s2.nodes, s1.nodes);
    rt_table_stats(v1, &s1);
    ck_assert_uint_eq(s1.live_nodes, s2.live_nodes); /* one family */
    RTEST_REQUIRE(s2.live_nodes - s1.nodes < 40,
                  "one insert made %zu new nodes (table of %zu nodes): not path copying",
                  s2.live_nodes - s1.nodes, s1.nodes);
    rt_table_free(v1);
    rt_table_stats(v2, &s2);
    ck_assert_uint_eq(s2.live_nodes, s2.nodes);
    rt_table_free(v2);
    for (size_t i = 0; i < n; i++)
        free((char *)lines[i]);
    rtest_lines_free(routes, n);
}
END_TEST

/* ---- udata lifetime, case by case ---- */

static void insert_ud(rt_txn *tx, const char *spec, const char *pattern, struct ud *u)
{
    struct rtest_methods ms;
    struct rt_error err;

    rtest_methods_parse(&ms, spec);
    ck_assert_int_eq(rt_txn_insert(tx, ms.ptr, ms.n, pattern, NULL, u, &err), 0);
}

static intptr_t hit_ud(const rt_table *t, const char *path)
{
    struct rtest_res r;
    ck_assert_int_eq(rtest_lookup(t, "GET", NULL, path, &r), RT_HIT);
    return ud_id(rt_route_udata(r.m.route));
}

START_TEST(test_udata_update)
{
    for (int order = 0; order < 2; order++) {
        rt_table *t0 = rt_table_new(NULL, ud_free), *v1, *v2;
        struct ud *a, *b, *c;
        struct rt_error err;
        const char *get[] = {"GET"};
        rt_txn *tx;

        nud = 0;
        a = ud_new();
        b = ud_new();
        c = ud_new();
        tx = rt_txn_begin(t0);
        insert_ud(tx, "GET", "/a", a);
        insert_ud(tx, "GET", "/b", b);
        v1 = rt_txn_commit(tx);
        tx = rt_txn_begin(v1);
        ck_assert_int_eq(rt_txn_update(tx, get, 1, "/a", NULL, c, &err), 0);
        v2 = rt_txn_commit(tx);
        ck_assert_int_eq(hit_ud(v1, "/a"), ud_id(a));
        ck_assert_int_eq(hit_ud(v2, "/a"), ud_id(c));
        ck_assert_int_eq(hit_ud(v2, "/b"), ud_id(b));
        rt_table_free(t0);
        ck_assert_int_eq(a->freed + b->freed + c->freed, 0);
        if (order == 0) {
            rt_table_free(v2);
            ck_assert_int_eq(c->freed, 1);
            ck_assert_int_eq(a->freed, 0);
            ck_assert_int_eq(b->freed, 0);
            ck_assert_int_eq(hit_ud(v1, "/a"), ud_id(a));
            rt_table_free(v1);
        } else {
            rt_table_free(v1);
            ck_assert_int_eq(a->freed, 1);
            ck_assert_int_eq(b->freed, 0);
            ck_assert_int_eq(c->freed, 0);
            ck_assert_int_eq(hit_ud(v2, "/a"), ud_id(c));
            rt_table_free(v2);
        }
        ck_assert_int_eq(a->freed, 1);
        ck_assert_int_eq(b->freed, 1);
        ck_assert_int_eq(c->freed, 1);
        ck_assert_int_eq(ud_bad_calls, 0);
    }
}
END_TEST

START_TEST(test_udata_delete)
{
    for (int order = 0; order < 2; order++) {
        rt_table *t0 = rt_table_new(NULL, ud_free), *v1, *v2;
        struct ud *d;
        struct rt_error err;
        const char *get[] = {"GET"};
        rt_txn *tx;

        nud = 0;
        d = ud_new();
        tx = rt_txn_begin(t0);
        insert_ud(tx, "GET", "/d/{x}", d);
        v1 = rt_txn_commit(tx);
        tx = rt_txn_begin(v1);
        ck_assert_int_eq(rt_txn_delete(tx, get, 1, "/d/{y}", &err), 0);
        v2 = rt_txn_commit(tx);
        rt_table_free(t0);
        if (order == 0) {
            rt_table_free(v2);
            ck_assert_int_eq(d->freed, 0);
            ck_assert_int_eq(hit_ud(v1, "/d/1"), ud_id(d));
            rt_table_free(v1);
        } else {
            rt_table_free(v1);
            ck_assert_int_eq(d->freed, 1);
            rt_table_free(v2);
        }
        ck_assert_int_eq(d->freed, 1);
    }
}
END_TEST

/* Refused inserts and updates leave the udata with the caller; an aborted
 * transaction drops what it created; a route inserted and replaced or
 * deleted inside one transaction is released once. */
START_TEST(test_udata_edges)
{
    rt_table *t0 = rt_table_new(NULL, ud_free), *v1, *v2;
    struct ud *a, *refused, *refused2, *aborted, *gone, *h, *i;
    struct rt_error err;
    const char *get[] = {"GET"};
    rt_txn *tx;

    nud = 0;
    a = ud_new();
    refused = ud_new();
    refused2 = ud_new();
    aborted = ud_new();
    gone = ud_new();
    h = ud_new();
    i = ud_new();

    tx = rt_txn_begin(t0);
    insert_ud(tx, "GET", "/a/{x}", a);
    ck_assert_int_eq(rt_txn_insert(tx, get, 1, "/a/{y}", NULL, refused, &err), -1);
    ck_assert_int_eq(rt_txn_update(tx, get, 1, "/nope", NULL, refused2, &err), -1);
    ck_assert_int_eq(rt_txn_insert(tx, get, 1, "/bad/{", NULL, refused2, &err), -1);
    insert_ud(tx, "GET", "/gone", gone);
    ck_assert_int_eq(rt_txn_delete(tx, get, 1, "/gone", &err), 0);
    insert_ud(tx, "GET", "/h", h);
    ck_assert_int_eq(rt_txn_update(tx, get, 1, "/h", NULL, i, &err), 0);
    v1 = rt_txn_commit(tx);
    ck_assert_int_eq(hit_ud(v1, "/h"), ud_id(i));

    tx = rt_txn_begin(v1);
    insert_ud(tx, "GET", "/aborted", aborted);
    ck_assert_int_eq(rt_txn_delete(tx, get, 1, "/a/{x}", &err), 0);
    rt_txn_abort(tx);
    ck_assert_int_eq(aborted->freed, 1);
    ck_assert_int_eq(a->freed, 0);
    ck_assert_int_eq(hit_ud(v1, "/a/1"), ud_id(a));

    tx = rt_txn_begin(v1);
    v2 = rt_txn_commit(tx); /* an empty transaction */
    ck_assert_int_eq(hit_ud(v2, "/a/1"), ud_id(a));
    rt_table_free(v1);
    rt_table_free(t0);
    ck_assert_int_eq(a->freed, 0);
    ck_assert_int_eq(i->freed, 0);
    rt_table_free(v2);

    ck_assert_int_eq(a->freed, 1);
    ck_assert_int_eq(i->freed, 1);
    ck_assert_int_eq(h->freed, 1);
    ck_assert_int_eq(gone->freed, 1);
    ck_assert_int_eq(aborted->freed, 1);
    ck_assert_int_eq(refused->freed, 0);
    ck_assert_int_eq(refused2->freed, 0);
    ck_assert_int_eq(ud_bad_calls, 0);
}
END_TEST

/* Versions freed oldest-first, newest-first and from the middle out. */
START_TEST(test_free_orders)
{
    for (int order = 0; order < 3; order++) {
        rt_table *v[6];
        struct ref_table refs[6];
        struct world *w = calloc(1, sizeof(*w));

        ck_assert_ptr_nonnull(w);
        nud = 0;
        w->seed = (uint64_t)order;
        w->rng.s = 99 + (uint64_t)order;
        v[0] = rt_table_new(NULL, ud_free);
        ref_init(&refs[0]);
        for (int k = 1; k < 6; k++) {
            rt_txn *tx = rt_txn_begin(v[k - 1]);
            ref_init(&refs[k]);
            ref_copy(&refs[k], &refs[k - 1]);
            for (int j = 0; j < 8; j++) {
                struct rtest_groute g;
                struct rtest_methods ms;
                struct rt_error err;
                struct ud *u = ud_new();
                rtest_gen_route(&w->rng, 20, &g);
                rtest_methods_parse(&ms, g.methods);
                int rc = rt_txn_insert(tx, ms.ptr, ms.n, g.pattern, NULL, u, &err);
                int rrc = ref_insert(&refs[k], ms.ptr, ms.n, g.pattern, ud_id(u), NULL, 0, NULL);
                ck_assert_int_eq(rc == 0, rrc == REF_OK);
                u->owned = rc == 0;
                pool_add(w, g.methods, g.pattern);
            }
            if (refs[k - 1].n > 0) { /* and delete one old route */
                const struct ref_route *e = &refs[k - 1].routes[0];
                char spec[64];
                struct rtest_methods ms;
                struct rt_error err;
                ref_spec(e, spec, sizeof(spec));
                rtest_methods_parse(&ms, spec);
                ck_assert_int_eq(rt_txn_delete(tx, ms.ptr, ms.n, e->pattern, &err), 0);
                ck_assert_int_eq(ref_delete(&refs[k], ms.ptr, ms.n, e->pattern, NULL), 0);
            }
            v[k] = rt_txn_commit(tx);
            ck_assert_ptr_nonnull(v[k]);
            for (size_t i = 0; i < refs[k].n; i++)
                uds[refs[k].routes[i].id].committed = 1;
        }
        for (int k = 0; k < 6; k++) {
            w->live[k].t = v[k];
            w->live[k].ref = refs[k];
            w->live[k].gen = (size_t)k;
        }
        w->nlive = 6;
        static const size_t orders[3][6] = {
            {0, 0, 0, 0, 0, 0}, /* oldest first */
            {5, 4, 3, 2, 1, 0}, /* newest first */
            {3, 1, 2, 0, 1, 0}, /* middle out */
        };
        for (int k = 0; k < 6; k++) {
            size_t victim = orders[order][k];
            ck_assert_uint_lt(victim, w->nlive);
            for (size_t x = 0; x < w->nlive; x++)
                check_version(w, &w->live[x], 30, "free orders");
            free_version(w, victim);
            check_udata(w, "free orders");
        }
        for (size_t i = 0; i < nud; i++)
            ck_assert_int_eq(uds[i].freed, uds[i].owned);
        free(w);
    }
}
END_TEST

static Suite *cow_suite(void)
{
    Suite *s = suite_create("router_cow");
    TCase *tc = tcase_create("cow");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_udata_update);
    tcase_add_test(tc, test_udata_delete);
    tcase_add_test(tc, test_udata_edges);
    tcase_add_test(tc, test_sharing);
    tcase_add_test(tc, test_free_orders);
    tcase_add_test(tc, test_github_delete_all);
    tcase_add_test(tc, test_random_history);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cow_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
