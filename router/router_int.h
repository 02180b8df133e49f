/*
 * router_int.h - private structures of the routing tree, shared by
 * pattern.c (parsing), table.c (versions and writes) and match.c (lookups).
 *
 * A tree is a radix tree over "shape keys": the pattern's static bytes, with
 * every {param} replaced by RT_MARK_PARAM and every *{catchall} by
 * RT_MARK_CATCHALL (bytes that a valid pattern cannot contain). Two routes
 * have the same shape exactly when they conflict apart from their methods.
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
#define RT_MAX_PATTERN 4096
#define RT_MAX_PARAMS 128
#define RT_HOST_MAX 253
#define RT_NKNOWN_METHODS 9
#define RT_MAX_METHODS 64

enum rt_node_kind { RT_N_STATIC = 0, RT_N_PARAM, RT_N_CATCHALL };

struct rt_node {
    uint32_t refs;
    uint32_t gen;       /* transaction that created it */
    uint16_t label_len; /* static nodes only */
    uint8_t kind;       /* enum rt_node_kind */
    uint8_t nroutes;
    uint16_t nkids;
    struct rt_node **kids;    /* static children; the block also holds nkids first bytes */
    struct rt_node *param;    /* at most one {param} child */
    struct rt_node *catchall; /* at most one *{catchall} child */
    struct rt_node *paths;    /* host trees: the path tree of this host */
    struct rt_route **routes; /* routes ending here, nroutes of them */
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

/* pattern.c */
int rt_pat_parse(const char *pattern, struct rt_pat *p, struct rt_error *err);
void rt_err_set(struct rt_error *err, enum rt_errcode code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rt_method_is_token(const char *m, size_t len);
uint64_t rt_known_method_bit(const char *m, size_t len);

#endif
