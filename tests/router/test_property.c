/*
 * test_property.c - the tree against the brute-force reference (reference.c)
 * on seeded random route sets and thousands of requests built near their
 * patterns, in all three trailing-slash modes with auto OPTIONS on and off.
 *
 * Each set is reproducible from its seed. A set stops at its first difference;
 * the first differences of each kind print the seed, the route set shrunk to
 * the routes still needed to show the difference, the request, expected and
 * got; the test fails at the end with a tally by kind. Rerun one set with
 * SY_SEED=<seed> SY_SETS=1; scale the work with SY_ITERS_PCT.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router.h"
#include "reference.h"
#include "rtest.h"

#define MAX_ROUTES 64

struct rset {
    struct rtest_groute r[MAX_ROUTES];
    size_t n;
    int chunked; /* build in several transactions */
};

/* How a family of sets is drawn. */
struct family {
    const char *name;
    uint64_t seed;
    size_t sets, requests;
    size_t min_routes, max_routes;
    int hostpct;
};

static void gen_set(struct rtest_rng *rng, const struct family *f, struct rset *s)
{
    s->n = f->min_routes + rtest_below(rng, f->max_routes - f->min_routes + 1);
    s->chunked = rtest_below(rng, 2) == 0;
    for (size_t i = 0; i < s->n; i++) {
        if (i > 0 && rtest_below(rng, 100) < 12) {
            /* the shape of an earlier route, renamed, maybe other methods:
             * conflicts and same-shape method preference */
            const struct rtest_groute *old = &s->r[rtest_below(rng, i)];
            struct rtest_groute tmp;
            rtest_gen_route(rng, f->hostpct, &tmp);
            memcpy(s->r[i].methods, rtest_below(rng, 2) ? old->methods : tmp.methods,
                   sizeof(s->r[i].methods));
            rtest_rename_params(rng, old->pattern, s->r[i].pattern, sizeof(s->r[i].pattern));
        } else {
            rtest_gen_route(rng, f->hostpct, &s->r[i]);
        }
    }
}

/* Builds the tree (and its intermediate versions, freed here) and the
 * reference from the routes of <s> that <keep> selects. Returns the table,
 * or NULL with <why> filled when they disagreed on an insert. */
static rt_table *build_both(const struct rset *s, const unsigned char *keep,
                            const struct rt_options *o, struct ref_table *ref, char *why,
                            size_t cap)
{
    rt_table *t = rt_table_new(o, NULL);
    rt_txn *tx;
    size_t since = 0;
    int bad = 0;

    ck_assert_ptr_nonnull(t);
    tx = rt_txn_begin(t);
    for (size_t i = 0; i < s->n && !bad; i++) {
        struct rtest_methods ms;
        struct rt_error err;
        intptr_t other[8];
        size_t nother = 0;
        int rc, rrc;

        if (keep && !keep[i])
            continue;
        rtest_methods_parse(&ms, s->r[i].methods);
        memset(&err, 0, sizeof(err));
        rc =
            rt_txn_insert(tx, ms.ptr, ms.n, s->r[i].pattern, NULL, (void *)(intptr_t)(i + 1), &err);
        rrc = ref_insert(ref, ms.ptr, ms.n, s->r[i].pattern, (intptr_t)(i + 1), other, 8, &nother);
        if (rc == 0 && rrc != REF_OK) {
            snprintf(why, cap, "insert %s %s accepted, reference: conflict with route %ld",
                     s->r[i].methods, s->r[i].pattern, (long)other[0]);
            bad = 1;
        } else if (rc != 0 && rrc == REF_OK) {
            snprintf(why, cap, "insert %s %s refused (code %d: %s), reference accepts it",
                     s->r[i].methods, s->r[i].pattern, (int)err.code, err.msg);
            bad = 1;
        } else if (rc != 0) {
            int found = 0;
            intptr_t oid = err.other ? (intptr_t)rt_route_udata(err.other) : -1;
            for (size_t k = 0; k < nother && k < 8; k++)
                found |= other[k] == oid;
            if (err.code != RT_ECONFLICT || !found) {
                snprintf(why, cap,
                         "insert %s %s: code %d other %ld (%s), want RT_ECONFLICT with route %ld",
                         s->r[i].methods, s->r[i].pattern, (int)err.code, (long)oid,
                         err.other ? rt_route_pattern(err.other) : "NULL", (long)other[0]);
                bad = 1;
            }
        }
        if (s->chunked && ++since >= 3 && !bad) {
            rt_table *nt = rt_txn_commit(tx);
            ck_assert_ptr_nonnull(nt);
            rt_table_free(t);
            t = nt;
            tx = rt_txn_begin(t);
            since = 0;
        }
    }
    if (bad) {
        rt_txn_abort(tx);
        rt_table_free(t);
        return NULL;
    }
    rt_table *nt = rt_txn_commit(tx);
    ck_assert_ptr_nonnull(nt);
    rt_table_free(t);
    if (rt_table_count(nt) != ref->n) {
        snprintf(why, cap, "rt_table_count %zu, reference has %zu routes", rt_table_count(nt),
                 ref->n);
        rt_table_free(nt);
        return NULL;
    }
    if (rt_table_max_params(nt) < ref_max_params(ref)) {
        snprintf(why, cap, "rt_table_max_params %zu < %zu params of a route",
                 rt_table_max_params(nt), ref_max_params(ref));
        rt_table_free(nt);
        return NULL;
    }
    return nt;
}

/* Whether the case (routes selected by <keep>, request <q> or only the build
 * when NULL) shows a difference; <why> says which. */
static int case_fails(const struct rset *s, const unsigned char *keep, const struct rt_options *o,
                      const struct rtest_greq *q, char *why, size_t cap)
{
    struct ref_table ref;
    rt_table *t;
    int fails = 0;

    ref_init(&ref);
    t = build_both(s, keep, o, &ref, why, cap);
    if (!t) {
        fails = 1;
    } else if (q) {
        fails = !rtest_agree(t, &ref, NULL, q->method, q->has_host ? q->host : NULL,
                             q->has_host ? strlen(q->host) : 0, q->path, strlen(q->path), why, cap);
    }
    rt_table_free(t);
    ref_clear(&ref);
    return fails;
}

/* Drops every route the difference does not need, then reports. */
static void shrink_and_report(const struct rset *s, const struct rt_options *o,
                              const struct rtest_greq *q, uint64_t seed, const char *first)
{
    unsigned char keep[MAX_ROUTES];
    char why[4096];
    int changed = 1;

    memset(keep, 1, sizeof(keep));
    while (changed) {
        changed = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (!keep[i])
                continue;
            keep[i] = 0;
            if (case_fails(s, keep, o, q, why, sizeof(why)))
                changed = 1;
            else
                keep[i] = 1;
        }
    }
    if (!case_fails(s, keep, o, q, why, sizeof(why)))
        snprintf(why, sizeof(why), "(not reproducible after shrinking) %.2000s", first);
    fprintf(stderr,
            "\n==== router property failure: rerun with SY_SEED=%llu SY_SETS=1 ====\n"
            "options: trailing_slash=%d auto_options=%d, built %s\nroutes (udata = line):\n",
            (unsigned long long)seed, (int)o->trailing_slash, o->auto_options,
            s->chunked ? "in transactions of 3 inserts" : "in one transaction");
    for (size_t i = 0; i < s->n; i++)
        if (keep[i])
            fprintf(stderr, "  %zu: %s %s\n", i + 1, s->r[i].methods, s->r[i].pattern);
    if (q)
        fprintf(stderr, "request: %s host=%s%s%s path=\"%s\"\n", q->method, q->has_host ? "\"" : "",
                q->has_host ? q->host : "NULL", q->has_host ? "\"" : "", q->path);
    fprintf(stderr, "%s\n==== first report before shrinking: %s\n", why, first);
}

/* Failures seen in one family, by kind (the first words of the report). */
#define MAX_KINDS 16
#define REPORTS_PER_KIND 2

struct tally {
    char kind[MAX_KINDS][96];
    size_t count[MAX_KINDS];
    char first[MAX_KINDS][1024];
    size_t nkinds, total;
};

/* Counts a failure; returns whether it deserves a shrunk report. */
static int tally_add(struct tally *ty, const char *why)
{
    const char *end = strstr(why, " for ");
    size_t len = end ? (size_t)(end - why) : strcspn(why, ":\n");
    size_t k;

    if (len >= sizeof(ty->kind[0]))
        len = sizeof(ty->kind[0]) - 1;
    ty->total++;
    for (k = 0; k < ty->nkinds; k++)
        if (strlen(ty->kind[k]) == len && memcmp(ty->kind[k], why, len) == 0)
            break;
    if (k == ty->nkinds) {
        if (k == MAX_KINDS)
            return 0;
        memcpy(ty->kind[k], why, len);
        ty->kind[k][len] = '\0';
        snprintf(ty->first[k], sizeof(ty->first[k]), "%s", why);
        ty->nkinds++;
    }
    return ty->count[k]++ < REPORTS_PER_KIND;
}

/* Runs every set of the family; a set stops at its first difference, which
 * is counted, and the first ones of each kind shrunk and printed. Fails at
 * the end if any set differed. */
static void run_family(const struct family *f)
{
    uint64_t base = rtest_seed(f->seed);
    const char *env_sets = getenv("SY_SETS");
    size_t nsets = env_sets && *env_sets ? strtoul(env_sets, NULL, 10) : rtest_iters(f->sets);
    size_t nreq = f->requests;
    size_t lookups = 0, badsets = 0;
    struct tally *ty = calloc(1, sizeof(*ty));

    ck_assert_ptr_nonnull(ty);
    for (size_t si = 0; si < nsets; si++) {
        uint64_t seed = base + si;
        struct rtest_rng rng = {seed};
        struct rset *s = malloc(sizeof(*s));
        int bad = 0;

        ck_assert_ptr_nonnull(s);
        gen_set(&rng, f, s);
        for (int ts = RT_TS_STRICT; ts <= RT_TS_RELAXED && !bad; ts++) {
            for (int ao = 0; ao <= 1 && !bad; ao++) {
                struct rt_options o = {(enum rt_trailing_slash)ts, ao};
                struct rtest_rng qrng = {seed ^ UINT64_C(0xa5a5a5a5a5a5a5a5)};
                struct ref_table ref;
                char why[4096];
                rt_table *t;

                ref_init(&ref);
                t = build_both(s, NULL, &o, &ref, why, sizeof(why));
                if (!t) {
                    bad = 1;
                    if (tally_add(ty, why))
                        shrink_and_report(s, &o, NULL, seed, why);
                    ref_clear(&ref);
                    break;
                }
                for (size_t qi = 0; qi < nreq && !bad; qi++) {
                    struct rtest_greq q;
                    rtest_gen_request(&qrng, s->r, s->n, &q);
                    lookups++;
                    if (!rtest_agree(t, &ref, NULL, q.method, q.has_host ? q.host : NULL,
                                     q.has_host ? strlen(q.host) : 0, q.path, strlen(q.path), why,
                                     sizeof(why))) {
                        bad = 1;
                        if (tally_add(ty, why))
                            shrink_and_report(s, &o, &q, seed, why);
                    }
                }
                rt_table_free(t);
                ref_clear(&ref);
            }
        }
        badsets += bad;
        free(s);
    }
    fprintf(stderr, "%s: %zu route sets (base seed %llu), %zu lookups, %zu sets differ\n", f->name,
            nsets, (unsigned long long)base, lookups, badsets);
    for (size_t k = 0; k < ty->nkinds; k++)
        fprintf(stderr, "  %zu x %s\n", ty->count[k], ty->kind[k]);
    if (badsets > 0) {
        char msg[2048];
        snprintf(msg, sizeof(msg), "%s: %zu of %zu route sets differ from the reference; first: %s",
                 f->name, badsets, nsets, ty->first[0]);
        free(ty);
        ck_abort_msg("%s", msg);
    }
    free(ty);
}

START_TEST(test_hostless)
{
    const struct family f = {"hostless", 1000, 250, 400, 3, 40, 0};
    run_family(&f);
}
END_TEST

START_TEST(test_hosts)
{
    const struct family f = {"hosts", 2000000, 250, 400, 3, 40, 30};
    run_family(&f);
}
END_TEST

/* Few routes, many requests: dense overlaps of one or two shapes. */
START_TEST(test_dense)
{
    const struct family f = {"dense", 3000000, 400, 300, 1, 8, 20};
    run_family(&f);
}
END_TEST

/* Big sets: deep trees with many shared prefixes. */
START_TEST(test_big)
{
    const struct family f = {"big", 4000000, 40, 1500, 40, 64, 25};
    run_family(&f);
}
END_TEST

static Suite *property_suite(void)
{
    Suite *s = suite_create("router_property");
    TCase *tc = tcase_create("property");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_hostless);
    tcase_add_test(tc, test_hosts);
    tcase_add_test(tc, test_dense);
    tcase_add_test(tc, test_big);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(property_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
