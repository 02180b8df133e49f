/*
 * reference.h - a brute-force reference router for the router's tests.
 *
 * Written from router/SEMANTICS.md alone and sharing no code with router/:
 * a flat list of (methods, pattern, id) and a lookup that matches every
 * pattern against the request and ranks the matches by the priority rules.
 * Slow on purpose (routes x length per lookup); it exists to be obviously
 * right, so the property tests can compare the tree against it.
 *
 * Patterns given to ref_insert() must be valid (checking syntax is the job of
 * test_pattern.c). Status codes are the HTTP numbers of enum rt_status.
 */
#ifndef SY_TESTS_ROUTER_REFERENCE_H
#define SY_TESTS_ROUTER_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#define REF_MAX_METHODS 8
#define REF_METHOD_LEN 32
#define REF_MAX_PARAMS 64
#define REF_MAX_PATH 8192
#define REF_MAX_ALLOW 64

enum ref_code { REF_OK = 0, REF_ECONFLICT, REF_ENOENT };

/* Trailing-slash modes, numbered like enum rt_trailing_slash. */
enum ref_ts { REF_TS_STRICT = 0, REF_TS_REDIRECT, REF_TS_RELAXED };

struct ref_tok;

struct ref_route {
    char *pattern;   /* as registered */
    char *shape;     /* lower-cased host + path with parameter names erased */
    intptr_t id;     /* the caller's id */
    size_t nmethods; /* 0: takes any method */
    char methods[REF_MAX_METHODS][REF_METHOD_LEN];
    int has_host;
    struct ref_tok *htok, *ptok; /* host and path tokens */
    size_t nhtok, nptok;
};

/* Regexp parameters at one position are tried in registration order: a
 * slot is the shape of a pattern up to and including a regexp, ranked by
 * when a live route first had it. */
struct ref_slot {
    char *prefix;
    unsigned long seq;
};

struct ref_table {
    struct ref_route *routes;
    size_t n, cap;
    struct ref_slot *slots;
    size_t nslots, slotcap;
    unsigned long seq;
};

struct ref_param {
    const char *name;  /* borrowed from the route */
    const char *value; /* slice of the host or path, or of ref_result.twin */
    size_t len;
};

/* The answer to one lookup. Holds pointers into itself (twin path): do not
 * copy it by value after ref_lookup() filled it. */
struct ref_result {
    int status;                    /* 200, 204 (auto OPTIONS, answered 200), 301, 308, 404, 405 */
    const struct ref_route *route; /* hit or redirect target */
    intptr_t id;                   /* route->id, 0 without route */
    int slash;
    size_t nparams;
    struct ref_param params[REF_MAX_PARAMS];
    int allow_any; /* "OPTIONS *" over a route taking any method: allow is every method */
    size_t nallow; /* distinct method tokens of the matching routes */
    char allow[REF_MAX_ALLOW][REF_METHOD_LEN];
    char twin[REF_MAX_PATH + 2];
};

void ref_init(struct ref_table *t);
/* Frees every route of <t>; <t> is empty afterwards. */
void ref_clear(struct ref_table *t);
/* Makes <dst> (initialized, empty) an independent copy of <src>. */
void ref_copy(struct ref_table *dst, const struct ref_table *src);

/* Adds a route (<nmethods> 0 = any method). On conflict returns REF_ECONFLICT
 * and stores up to <cap> ids of the conflicting routes in <other> and their
 * number in <*nother> (both may be NULL/0). */
int ref_insert(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t id, intptr_t *other, size_t cap, size_t *nother);
/* Replaces the route of the same shape and exactly the same method set. */
int ref_update(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t id, intptr_t *old_id);
/* Deletes the route of the same shape and exactly the same method set. */
int ref_delete(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t *old_id);

/* Answers a request like rt_lookup() would. <host> may be NULL. */
void ref_lookup(const struct ref_table *t, int trailing_slash, int auto_options, const char *method,
                size_t mlen, const char *host, size_t hlen, const char *path, size_t plen,
                struct ref_result *r);

/* Number of parameters of the route with the most. */
size_t ref_max_params(const struct ref_table *t);

#endif
