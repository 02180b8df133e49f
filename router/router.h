/*
 * router.h - Switchyard's routing tree: patterns -> route entries.
 *
 * A routing table is an immutable version of a radix tree. One writer derives
 * new versions from old ones through a transaction (rt_txn_*): insert, update
 * and delete copy only the nodes along the changed path and share every other
 * node with the version they started from (path copying). Any number of
 * threads may look up in any published version at the same time, without
 * locks, atomics or heap allocation. The router never decides when a version
 * may be freed: the caller retires a version with rt_table_free() once no
 * reader can reach it, and that frees exactly the nodes no other live version
 * uses.
 *
 * Patterns follow the fox router's rules:
 *   /users/{id}           {name} matches one non-empty segment
 *   /users/uuid:{id}      ... or the rest of a segment after a static prefix
 *   /src/ + *{filepath}   *{name} matches the rest of the path, maybe empty
 *   /a/ + *{p} + /thumb   ... or, before a '/', at least one byte of it
 *   api.example.com/x     a pattern that does not start with '/' is host/path
 *   {tenant}.example.com/x  host labels may be parameters too
 *   *{any}.example.com/x  ... and the first one a catch-all of whole labels
 *   /users/{id:[0-9]+}    a parameter whose whole value matches a regexp
 * Priority at every branching point: static, then regexp parameters (in
 * registration order), then {param}, then an infix catch-all (shortest
 * first), then a suffix catch-all, with backtracking, so the most specific
 * route wins. Host routes are tried before host-less ones.
 *
 * Not thread-safe for writers: one thread at a time runs transactions and
 * frees versions. Lookups are safe from any thread on any version that has
 * not been freed.
 */
#ifndef SY_ROUTER_H
#define SY_ROUTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct rt_table rt_table; /* one immutable version */
typedef struct rt_txn rt_txn;     /* a writer building the next version */
typedef struct rt_route rt_route; /* one registered route */
typedef struct rt_ctx rt_ctx;     /* one thread's scratch for regexp matching */

/* Trailing-slash policy when a path has no route but its twin with (or
 * without) a final '/' has one. */
enum rt_trailing_slash {
    RT_TS_STRICT = 0, /* 404 */
    RT_TS_REDIRECT,   /* 301 for GET/HEAD, 308 otherwise, to the twin */
    RT_TS_RELAXED,    /* serve the twin's route as if the slash matched */
};

struct rt_options {
    enum rt_trailing_slash trailing_slash;
    int auto_options; /* answer OPTIONS with Allow when no route takes it */
};

/* Errors carry the byte offset in the pattern and, for conflicts, the
 * existing route (borrowed from the table the transaction started from or
 * built; valid while that table or transaction lives). */
enum rt_errcode {
    RT_OK = 0,
    RT_EINVAL,    /* invalid pattern or method */
    RT_ECONFLICT, /* an identical route (method, host, shape) exists */
    RT_ENOENT,    /* update/delete: no such route */
    RT_ENOMEM,
    RT_ELIMIT, /* too many distinct methods or parameters */
};

struct rt_error {
    enum rt_errcode code;
    size_t offset;         /* byte offset in the pattern, for RT_EINVAL */
    const rt_route *other; /* the conflicting route, for RT_ECONFLICT */
    char msg[160];         /* a complete human sentence, no trailing newline */
};

/* Methods. Known methods have fixed bits; other tokens get bits when a route
 * first uses them (at most 64 distinct methods per table). A method set is a
 * uint64_t mask; RT_ANY_METHOD means the route takes every method. */
#define RT_M_GET (UINT64_C(1) << 0)
#define RT_M_HEAD (UINT64_C(1) << 1)
#define RT_M_POST (UINT64_C(1) << 2)
#define RT_M_PUT (UINT64_C(1) << 3)
#define RT_M_DELETE (UINT64_C(1) << 4)
#define RT_M_CONNECT (UINT64_C(1) << 5)
#define RT_M_OPTIONS (UINT64_C(1) << 6)
#define RT_M_TRACE (UINT64_C(1) << 7)
#define RT_M_PATCH (UINT64_C(1) << 8)
#define RT_ANY_METHOD UINT64_MAX

/* ---- versions ---- */

/* An empty table with <opts> (NULL: strict slashes, no auto OPTIONS).
 * <udata_free>, if not NULL, is called with a route's user pointer when the
 * last version holding that route is freed. */
rt_table *rt_table_new(const struct rt_options *opts, void (*udata_free)(void *udata));

/* Retires <t>: frees every node and route that no other live version shares.
 * The caller guarantees no reader still uses <t>. rt_table_free(NULL) is a
 * no-op. Returns nothing; see rt_table_stats() for accounting. */
void rt_table_free(rt_table *t);

/* Number of routes, and the params array capacity a lookup needs so that
 * every route's parameters fit. */
size_t rt_table_count(const rt_table *t);
size_t rt_table_max_params(const rt_table *t);
const struct rt_options *rt_table_options(const rt_table *t);

/* Calls <fn> for every route of <t>, in no particular order. */
void rt_table_foreach(const rt_table *t, void (*fn)(const rt_route *r, void *arg), void *arg);

struct rt_stats {
    size_t nodes;      /* nodes reachable from this version */
    size_t routes;     /* routes reachable from this version */
    size_t bytes;      /* heap bytes of those nodes and routes */
    size_t live_nodes; /* nodes alive in all versions of this table family */
};
void rt_table_stats(const rt_table *t, struct rt_stats *st);

/* ---- writing ---- */

/* Starts a transaction from <base>; <base> stays valid and unchanged. Nodes
 * created inside one transaction are mutated in place, so building a large
 * table in one transaction copies nothing. Returns NULL on out of memory. */
rt_txn *rt_txn_begin(const rt_table *base);

/* Adds a route: <methods> is an array of <nmethods> method tokens (0 for every
 * method), <pattern> the pattern, <name> an optional label used in errors
 * (copied), <udata> the caller's pointer (owned by the table family from now
 * on when the call succeeds: freed through udata_free). On error fills <err>,
 * leaves the transaction as it was and returns -1. */
int rt_txn_insert(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  const char *name, void *udata, struct rt_error *err);

/* Replaces the route with the same method set and pattern shape; the old
 * route's udata is released when the last version holding it is freed. */
int rt_txn_update(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  const char *name, void *udata, struct rt_error *err);

/* The user pointer of the route with exactly this method set and pattern
 * shape in the transaction's current state, or NULL when there is none. */
void *rt_txn_find(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern);

/* Deletes the route with exactly this method set and pattern shape. */
int rt_txn_delete(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  struct rt_error *err);

/* Finishes the transaction: returns the new version (which the caller frees
 * with rt_table_free) and frees <tx>. Returns NULL on out of memory (the
 * transaction is freed either way). */
rt_table *rt_txn_commit(rt_txn *tx);

/* Drops the transaction and everything it created. */
void rt_txn_abort(rt_txn *tx);

/* Checks a pattern without inserting it. 0 or -1 with <err> filled. */
int rt_pattern_check(const char *pattern, struct rt_error *err);

/* Parameter <i> of a valid <pattern>, in the order lookups report them (host
 * first, then path): sets *off and *len to its name's place in <pattern>
 * and returns 0; -1 when there is no such parameter or the pattern is
 * invalid. For config checks that map names to indices (rewrite templates);
 * parses the whole pattern on every call. */
int rt_pattern_param(const char *pattern, size_t i, size_t *off, size_t *len);

/* ---- routes ---- */

const char *rt_route_pattern(const rt_route *r); /* as registered */
const char *rt_route_name(const rt_route *r);    /* NULL if none */
void *rt_route_udata(const rt_route *r);
uint64_t rt_route_methods(const rt_route *r); /* RT_ANY_METHOD or a mask */
size_t rt_route_nparams(const rt_route *r);
const char *rt_route_param_name(const rt_route *r, size_t i);

/* Formats "GET, POST" for <mask> into <buf> (always NUL-terminated when
 * cap > 0); HEAD is listed wherever GET is. Returns the length it needed. */
size_t rt_methods_format(const rt_table *t, uint64_t mask, char *buf, size_t cap);
/* Writes "GET POST" style description of a route's methods ("*" for any). */
size_t rt_route_methods_format(const rt_table *t, const rt_route *r, char *buf, size_t cap);

/* ---- looking up ---- */

enum rt_status {
    RT_HIT = 200,          /* route found; params filled */
    RT_OPTIONS_AUTO = 204, /* auto OPTIONS: answer 200 with <allow>, which lists
                            * OPTIONS (the value only tells it from RT_HIT) */
    RT_REDIRECT_301 = 301, /* trailing-slash redirect to the twin path */
    RT_REDIRECT_308 = 308,
    RT_NOT_FOUND = 404,
    RT_NOT_ALLOWED = 405, /* <allow> holds the methods that would match, plus
                           * OPTIONS when auto_options is on */
};

struct rt_param {
    const char *name;  /* the route's parameter name (NUL-terminated) */
    const char *value; /* slice into the host or path given to rt_lookup */
    size_t len;
};

struct rt_match {
    enum rt_status status;
    const rt_route *route; /* RT_HIT, and the twin's route on redirects */
    uint64_t allow;        /* RT_NOT_ALLOWED, RT_OPTIONS_AUTO */
    size_t nparams;
    int slash; /* on redirect or relaxed hit: +1 add '/', -1 remove it */
};

/* A lookup context: the PCRE2 match data that regexp parameters need, made
 * in advance so that a lookup allocates nothing. One per thread that looks
 * up (the caller owns it; it serves any table). NULL on out of memory.
 * rt_ctx_free(NULL) is a no-op. */
rt_ctx *rt_ctx_new(void);
void rt_ctx_free(rt_ctx *ctx);

/* Looks up a request. <method> is the request's method token, <host> its Host
 * (port and a final dot ignored, case-insensitive; NULL or length 0 for none),
 * <path> the normalized path without query, or "*" for "OPTIONS *" (with
 * auto_options: RT_OPTIONS_AUTO listing every method of the table), <ctx>
 * the calling thread's context. Parameters are written to
 * <params>, which must hold rt_table_max_params(t) entries; <cap> is its
 * size. Never allocates, locks or writes shared memory. Returns m->status. */
enum rt_status rt_lookup_ctx(const rt_table *t, rt_ctx *ctx, const char *method, size_t mlen,
                             const char *host, size_t hlen, const char *path, size_t plen,
                             struct rt_param *params, size_t cap, struct rt_match *m);

/* rt_lookup_ctx() without a context, for callers off the request path
 * (admin, tools): when the walk meets a regexp parameter it makes a context
 * for this one lookup (a heap allocation; out of memory: the regexp does not
 * match) and frees it before returning. Tables without regexp routes never
 * need one. */
enum rt_status rt_lookup(const rt_table *t, const char *method, size_t mlen, const char *host,
                         size_t hlen, const char *path, size_t plen, struct rt_param *params,
                         size_t cap, struct rt_match *m);

/* "OPTIONS *": every method any route of the table takes. */
uint64_t rt_table_methods(const rt_table *t);

/* The bit for <method> in <t>, 0 if no route of t names it. */
uint64_t rt_method_bit(const rt_table *t, const char *method, size_t mlen);

#endif
