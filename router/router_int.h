/*
 * router_int.h - private structures of the routing tree, shared by
 * pattern.c (parsing), table.c (versions and writes) and match.c (lookups).
 *
 * A tree is a radix tree over "shape keys": the pattern's static bytes, with
 * every {param} replaced by RT_MARK_PARAM, every *{catchall} by
 * RT_MARK_CATCHALL and every {name:regexp} by RT_MARK_REGEXP, the regexp's
 * text and RT_MARK_REGEXP_END (bytes that a valid pattern cannot contain).
 * Two routes have the same shape exactly when they conflict apart from their
 * methods: a regexp's text is part of the shape, its parameter's name not.
 *
 * Nodes are reference counted by their parents in every live version, and
 * the roots by the versions themselves. Only the writer thread touches the
 * counts. A node created inside the running transaction (gen == txn gen) is
 * private to it and mutated in place; any other node is copied before change.
 */
#ifndef SY_ROUTER_INT_H
#define SY_ROUTER_INT_H

#include "router/router.h"

#include <stdint.h>

#define RT_MARK_PARAM '\x01'
#define RT_MARK_CATCHALL '\x02'
#define RT_MARK_REGEXP '\x04'
#define RT_MARK_REGEXP_END '\x05'
#define RT_MARK_LAST 5 /* static key bytes are above it */
#define RT_MAX_PATTERN 4096
#define RT_MAX_PARAMS 128
#define RT_HOST_MAX 253
#define RT_NKNOWN_METHODS 9
#define RT_MAX_METHODS 64

enum rt_node_kind { RT_N_STATIC = 0, RT_N_PARAM, RT_N_CATCHALL, RT_N_REGEXP };

struct rt_regex; /* regex.c: one compiled regexp, reference counted */

/* A {name:regexp} child: its regexp and the node below it. A node's regexp
 * children are held by its {param} child (created empty when the position
 * has regexps but no plain {param}), so that a walk through static nodes
 * never looks at them. */
struct rt_rx {
    struct rt_regex *re;
    struct rt_node *node;
};

#define RT_MAX_REGEXPS 255   /* regexp children of one node */
#define RT_INFIX_BUDGET 4096 /* infix catch-all values one walk may try (match.c) */

struct rt_node {
    uint32_t refs;
    uint32_t gen;       /* transaction that created it */
    uint16_t label_len; /* static nodes only */
    uint8_t kind;       /* enum rt_node_kind */
    uint8_t nroutes;
    uint16_t nkids;
    uint8_t nrx;              /* {param} nodes: the regexp children of their parent */
    struct rt_node **kids;    /* static children; the block also holds nkids first bytes */
    struct rt_node *param;    /* at most one {param} child */
    struct rt_node *catchall; /* at most one *{catchall} child */
    struct rt_node *paths;    /* host trees: the path tree of this host */
    struct rt_route **routes; /* routes ending here, nroutes of them */
    struct rt_rx *rx;         /* nrx regexp children, in registration order */
    char label[];
};

/* The first bytes of a node's static children, stored after the pointers. */
static inline const unsigned char *rt_node_firsts(const struct rt_node *n)
{
    return (const unsigned char *)(n->kids + n->nkids);
}

struct rt_family;

struct rt_route {
    uint32_t refs;
    uint16_t nparams;
    uint8_t any; /* takes every method */
    uint64_t methods;
    void *udata;
    struct rt_family *fam;
    const char *pattern;
    const char *name;
    uint16_t poff[]; /* offsets of param names in strings, then the strings */
};

/* What all versions derived from one rt_table_new() share. Written only by
 * the writer; method slots are written before any version naming them is
 * published and never change after. */
struct rt_family {
    uint32_t refs;
    uint32_t gen; /* last transaction number */
    void (*udata_free)(void *);
    size_t live_nodes;
    char *methods[RT_MAX_METHODS]; /* custom tokens, from bit RT_NKNOWN_METHODS on */
};

struct rt_table {
    struct rt_family *fam;
    struct rt_node *root;  /* host-less path tree; never NULL */
    struct rt_node *hroot; /* host tree; never NULL */
    struct rt_options opts;
    size_t nroutes;
    size_t max_params;
    uint32_t nmethods; /* methods known to this version (bits below it) */
    uint32_t any_routes;
    uint32_t mcount[RT_MAX_METHODS]; /* routes per method bit */
};

/* A parsed pattern. */
struct rt_pat {
    size_t hlen, plen;
    char host[RT_HOST_MAX + 1]; /* host shape key, lower-case; hlen 0: host-less */
    char path[RT_MAX_PATTERN + 1];
    size_t nparams;
    struct {
        uint16_t off, len;
    } names[RT_MAX_PARAMS]; /* positions in the original pattern */
};

/* regex.c (the only file that includes pcre2.h) */
/* 0 when src[0..len) compiles, else -1 with the offset of the fault in it
 * and PCRE2's message in <msg>. */
int rt_regex_check(const char *src, size_t len, size_t *erroff, char *msg, size_t cap);
struct rt_regex *rt_regex_new(const char *src, size_t len); /* NULL: out of memory */
void rt_regex_retain(struct rt_regex *re);
void rt_regex_release(struct rt_regex *re); /* NULL: no-op */
int rt_regex_is(const struct rt_regex *re, const char *src, size_t len);
/* 1 when the whole of v[0..len) matches. */
int rt_regex_match(const struct rt_regex *re, rt_ctx *ctx, const char *v, size_t len);

/* pattern.c */
int rt_pat_parse(const char *pattern, struct rt_pat *p, struct rt_error *err);
void rt_err_set(struct rt_error *err, enum rt_errcode code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rt_method_is_token(const char *m, size_t len);
uint64_t rt_known_method_bit(const char *m, size_t len);

#endif
