/*
 * rtest.h - helpers shared by the router's unit tests: building tables from
 * "METHODS PATTERN" lines, one-call lookups, the route files of tests/data/routes,
 * a seeded PRNG, random route sets and requests, and the comparison of the
 * tree against the reference router (reference.h).
 *
 * Helpers fail the running Check test (ck_assert) on misuse; they never
 * return errors the caller would have to test.
 */
#ifndef SY_TESTS_ROUTER_RTEST_H
#define SY_TESTS_ROUTER_RTEST_H

#include <stddef.h>
#include <stdint.h>

#include "router/router.h"
#include "reference.h"

/* Fails the running Check test with a message when <cond> is false. Unlike
 * ck_assert it costs nothing when the condition holds (Check reports every
 * passing ck_assert to its runner through a pipe), so hot loops use it. */
#define RTEST_REQUIRE(cond, ...)                                                                   \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

#define RTEST_MAX_METHODS 8
#define RTEST_MAX_PARAMS 64

/* A method spec split into tokens: "GET,POST" or "*" (any method). */
struct rtest_methods {
    size_t n; /* 0: any method */
    char buf[RTEST_MAX_METHODS][32];
    const char *ptr[RTEST_MAX_METHODS];
};
void rtest_methods_parse(struct rtest_methods *ms, const char *spec);

/* Inserts <pattern> for the methods of <spec> with udata (void *)<id>. */
int rtest_insert(rt_txn *tx, const char *spec, const char *pattern, intptr_t id,
                 struct rt_error *err);
int rtest_update(rt_txn *tx, const char *spec, const char *pattern, intptr_t id,
                 struct rt_error *err);
int rtest_delete(rt_txn *tx, const char *spec, const char *pattern, struct rt_error *err);

/* A table from lines "METHODS PATTERN" (e.g. "GET,POST /users/{id}"); line i
 * gets udata (void *)(i + 1). Every insert must succeed. */
rt_table *rtest_build(const struct rt_options *o, const char *const *lines, size_t n);

/* One lookup with room for every parameter. <host> may be NULL. */
struct rtest_res {
    struct rt_match m;
    struct rt_param params[RTEST_MAX_PARAMS];
};
enum rt_status rtest_lookup(const rt_table *t, const char *method, const char *host,
                            const char *path, struct rtest_res *r);
/* The udata of the matched route as an id, 0 without route. */
intptr_t rtest_id(const struct rtest_res *r);
/* Whether parameter <i> is <name> = <value>. */
int rtest_param_is(const struct rtest_res *r, size_t i, const char *name, const char *value);

/* <s>, or "(no host)" when NULL. */
const char *rtest_nz(const char *s);

/* Assertions on one lookup, for the Check tests. */
/* Lookup <meth> <host> <path> in <t> into the local <r>; want <st> and route
 * udata <id> (0: no route). */
#define EXPECT(t, meth, host, path, st, id)                                                        \
    do {                                                                                           \
        enum rt_status st_ = rtest_lookup((t), (meth), (host), (path), &r);                        \
        ck_assert_msg(st_ == (st) && rtest_id(&r) == (intptr_t)(id),                               \
                      "%s %s %s: got status %d route %ld (%s), want %d route %ld", (meth),         \
                      rtest_nz(host), (path), (int)st_, (long)rtest_id(&r),                        \
                      r.m.route ? rt_route_pattern(r.m.route) : "-", (int)(st), (long)(id));       \
    } while (0)

#define HIT(t, meth, host, path, id) EXPECT(t, meth, host, path, RT_HIT, id)
#define MISS(t, meth, host, path) EXPECT(t, meth, host, path, RT_NOT_FOUND, 0)

/* Parameter <i> of the local <r> is <name> = <value>. */
#define PARAM(pi, pname, pvalue)                                                                   \
    ck_assert_msg(rtest_param_is(&r, (pi), (pname), (pvalue)),                                     \
                  "param %d: got %s=\"%.*s\" (nparams %zu), want %s=\"%s\"", (int)(pi),            \
                  (size_t)(pi) < r.m.nparams && r.params[pi].name ? r.params[pi].name : "-",       \
                  (size_t)(pi) < r.m.nparams ? (int)r.params[pi].len : 0,                          \
                  (size_t)(pi) < r.m.nparams && r.params[pi].value ? r.params[pi].value : "",      \
                  r.m.nparams, (pname), (pvalue))

#define NPARAMS(n) ck_assert_uint_eq(r.m.nparams, (n))

/* The allow mask of the local <r>, HEAD folded into GET, must be <mask>. */
#define ALLOW(t, mask)                                                                             \
    ck_assert_uint_eq(rtest_norm_mask((t), r.m.allow), rtest_norm_mask((t), (mask)))

/* A route file of shared/routes: lines "METHOD PATH", '#' lines skipped. */
struct rtest_line {
    char method[32];
    char *path;
};
size_t rtest_load(const char *file, struct rtest_line **out);
void rtest_lines_free(struct rtest_line *lines, size_t n);

/* splitmix64: the same sequence on every platform. */
struct rtest_rng {
    uint64_t s;
};
uint64_t rtest_rand(struct rtest_rng *r);
size_t rtest_below(struct rtest_rng *r, size_t n);
/* <dflt>, or the SY_SEED environment variable when set. */
uint64_t rtest_seed(uint64_t dflt);
/* <dflt> scaled by the SY_ITERS_PCT environment variable (percent). */
size_t rtest_iters(size_t dflt);

/* ---- random routes and requests ---- */

struct rtest_groute {
    char methods[48]; /* spec: "GET,POST" or "*" */
    char pattern[320];
};
/* A random valid route from a small vocabulary, so that routes overlap,
 * backtrack and conflict often. <hostpct>: percent of host routes. */
void rtest_gen_route(struct rtest_rng *rng, int hostpct, struct rtest_groute *out);
/* The same route shape with parameters renamed (still valid). */
void rtest_rename_params(struct rtest_rng *rng, const char *pattern, char *out, size_t cap);

struct rtest_greq {
    const char *method;
    int has_host;
    char host[128];
    char path[512];
};
/* A request near one of <routes> (params filled in, then maybe mutated), or
 * a random one. */
void rtest_gen_request(struct rtest_rng *rng, const struct rtest_groute *routes, size_t n,
                       struct rtest_greq *out);

/* ---- tree versus reference ---- */

/* Maps a route's udata to the id the reference knows it by; NULL: the udata
 * is the id itself. */
typedef intptr_t (*rtest_idfn)(void *udata);

/* Looks the request up in both; returns 1 when they agree on status, route,
 * params (names and values), slash and allow mask, else 0 with the
 * difference described in <why>. */
int rtest_agree(const rt_table *t, const struct ref_table *ref, rtest_idfn idfn, const char *method,
                const char *host, size_t hlen, const char *path, size_t plen, char *why,
                size_t cap);

/* Allow mask of reference method tokens in table <t>, HEAD added where GET. */
uint64_t rtest_norm_mask(const rt_table *t, uint64_t mask);

#endif
