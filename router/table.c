/*
 * table.c - routing table versions and the copy-on-write writer.
 *
 * A transaction starts from a version's two roots (host tree, path tree) and
 * walks down the shape key of the route it changes, copying each node that
 * an older version also holds ("owning" it) and mutating in place the nodes
 * it already owns. Everything off that path stays shared. Nodes and routes
 * are reference counted by their parents across all live versions, so
 * freeing a version frees exactly what no other version still reaches, in
 * whatever order versions are freed. Only the writer thread runs this file.
 */
#define _POSIX_C_SOURCE 200809L
#include "router/router_int.h"

#include <stdlib.h>
#include <string.h>

struct rt_txn {
    struct rt_table t; /* the version being built; roots owned by the txn */
    uint32_t gen;
};

/* ---- nodes ---- */

/* The child block: n pointers, then n first bytes padded with zeros to a
 * multiple of 16 so lookups may compare them 16 at a time. */
static size_t kids_size(size_t n)
{
    return n * sizeof(struct rt_node *) + ((n + 15) & ~(size_t)15);
}

static unsigned char *firsts_mut(struct rt_node *n)
{
    return (unsigned char *)(n->kids + n->nkids);
}

static struct rt_node *node_new(struct rt_family *fam, uint32_t gen, enum rt_node_kind kind,
                                const char *label, size_t len)
{
    struct rt_node *n = calloc(1, sizeof(*n) + len);

    if (!n)
        return NULL;
    n->kind = (uint8_t)kind;
    n->label_len = (uint16_t)len;
    if (len)
        memcpy(n->label, label, len);
    n->gen = gen;
    n->refs = 1;
    fam->live_nodes++;
    return n;
}

static void route_release(struct rt_route *r)
{
    if (!r || --r->refs > 0)
        return;
    if (r->fam->udata_free && r->udata)
        r->fam->udata_free(r->udata);
    free(r);
}

/* Drops one reference to <n>; frees it and releases its children at zero. */
static void node_release(struct rt_family *fam, struct rt_node *n)
{
    if (!n || --n->refs > 0)
        return;
    for (size_t i = 0; i < n->nkids; i++)
        node_release(fam, n->kids[i]);
    node_release(fam, n->param);
    node_release(fam, n->catchall);
    node_release(fam, n->paths);
    for (size_t i = 0; i < n->nrx; i++) {
        node_release(fam, n->rx[i].node);
        rt_regex_release(n->rx[i].re);
    }
    for (size_t i = 0; i < n->nroutes; i++)
        route_release(n->routes[i]);
    free(n->kids);
    free(n->routes);
    free(n->rx);
    free(n);
    fam->live_nodes--;
}

/* A private copy of <n> (with <label> instead of n's own when label != NULL)
 * holding new references to everything n points to. */
static struct rt_node *node_copy(struct rt_family *fam, uint32_t gen, const struct rt_node *n,
                                 const char *label, size_t label_len)
{
    struct rt_node *c;

    if (!label) {
        label = n->label;
        label_len = n->label_len;
    }
    c = node_new(fam, gen, (enum rt_node_kind)n->kind, label, label_len);
    if (!c)
        return NULL;
    if (n->nkids) {
        c->kids = malloc(kids_size(n->nkids));
        if (!c->kids)
            goto fail;
        memcpy(c->kids, n->kids, kids_size(n->nkids));
        c->nkids = n->nkids;
        for (size_t i = 0; i < n->nkids; i++)
            n->kids[i]->refs++;
    }
    if (n->nroutes) {
        c->routes = malloc(n->nroutes * sizeof(*c->routes));
        if (!c->routes)
            goto fail;
        memcpy(c->routes, n->routes, n->nroutes * sizeof(*c->routes));
        c->nroutes = n->nroutes;
        for (size_t i = 0; i < n->nroutes; i++)
            n->routes[i]->refs++;
    }
    if (n->nrx) {
        c->rx = malloc(n->nrx * sizeof(*c->rx));
        if (!c->rx)
            goto fail;
        memcpy(c->rx, n->rx, n->nrx * sizeof(*c->rx));
        c->nrx = n->nrx;
        for (size_t i = 0; i < n->nrx; i++) {
            n->rx[i].node->refs++;
            rt_regex_retain(n->rx[i].re);
        }
    }
    if ((c->param = n->param))
        c->param->refs++;
    if ((c->catchall = n->catchall))
        c->catchall->refs++;
    if ((c->paths = n->paths))
        c->paths->refs++;
    return c;
fail:
    node_release(fam, c);
    return NULL;
}

/* Makes *slot private to the transaction, copying it if an older version
 * may hold it. Returns the node, NULL on out of memory (slot unchanged). */
static struct rt_node *own(struct rt_txn *tx, struct rt_node **slot)
{
    struct rt_node *n = *slot, *c;

    if (n->gen == tx->gen)
        return n;
    c = node_copy(tx->t.fam, tx->gen, n, NULL, 0);
    if (!c)
        return NULL;
    node_release(tx->t.fam, n);
    *slot = c;
    return c;
}

static int kid_find(const struct rt_node *n, unsigned char c)
{
    const unsigned char *f, *p;

    if (!n->nkids)
        return -1;
    f = rt_node_firsts(n);
    p = memchr(f, c, n->nkids);
    return p ? (int)(p - f) : -1;
}

/* Adds static child <k> (whose reference moves to n). */
static int kid_add(struct rt_node *n, struct rt_node *k)
{
    size_t cnt = n->nkids;
    struct rt_node **blk = calloc(1, kids_size(cnt + 1));
    unsigned char *f;

    if (!blk)
        return -1;
    if (cnt)
        memcpy(blk, n->kids, cnt * sizeof(*blk));
    blk[cnt] = k;
    f = (unsigned char *)(blk + cnt + 1);
    if (cnt)
        memcpy(f, rt_node_firsts(n), cnt);
    f[cnt] = (unsigned char)k->label[0];
    free(n->kids);
    n->kids = blk;
    n->nkids = (uint16_t)(cnt + 1);
    return 0;
}

/* Removes static child <i> without touching its reference. */
static void kid_remove(struct rt_node *n, size_t i)
{
    unsigned char *f = firsts_mut(n);
    size_t cnt = n->nkids;

    /* shift pointers, then the first bytes down by one pointer's room */
    memmove(n->kids + i, n->kids + i + 1, (cnt - i - 1) * sizeof(*n->kids));
    {
        unsigned char tmp[256];
        size_t nb = 0;
        for (size_t j = 0; j < cnt; j++)
            if (j != i)
                tmp[nb++] = f[j];
        n->nkids = (uint16_t)(cnt - 1);
        memcpy(firsts_mut(n), tmp, nb);
    }
    if (n->nkids == 0) {
        free(n->kids);
        n->kids = NULL;
    }
}

static int node_empty(const struct rt_node *n)
{
    return !n->nroutes && !n->nkids && !n->param && !n->catchall && !n->paths && !n->nrx;
}

/* ---- families, versions ---- */

static void fam_release(struct rt_family *fam)
{
    if (!fam || --fam->refs > 0)
        return;
    for (size_t i = RT_NKNOWN_METHODS; i < RT_MAX_METHODS; i++)
        free(fam->methods[i]);
    free(fam);
}

rt_table *rt_table_new(const struct rt_options *opts, void (*udata_free)(void *udata))
{
    struct rt_family *fam = calloc(1, sizeof(*fam));
    struct rt_table *t = calloc(1, sizeof(*t));

    if (!fam || !t)
        goto fail;
    fam->refs = 1;
    fam->udata_free = udata_free;
    t->fam = fam;
    t->nmethods = RT_NKNOWN_METHODS;
    if (opts)
        t->opts = *opts;
    t->root = node_new(fam, 0, RT_N_STATIC, "", 0);
    t->hroot = node_new(fam, 0, RT_N_STATIC, "", 0);
    if (!t->root || !t->hroot)
        goto fail;
    return t;
fail:
    if (t && fam) {
        node_release(fam, t->root);
        node_release(fam, t->hroot);
    }
    free(t);
    free(fam);
    return NULL;
}

void rt_table_free(rt_table *t)
{
    if (!t)
        return;
    node_release(t->fam, t->root);
    node_release(t->fam, t->hroot);
    fam_release(t->fam);
    free(t);
}

size_t rt_table_count(const rt_table *t)
{
    return t->nroutes;
}

size_t rt_table_max_params(const rt_table *t)
{
    return t->max_params;
}

const struct rt_options *rt_table_options(const rt_table *t)
{
    return &t->opts;
}

uint64_t rt_table_methods(const rt_table *t)
{
    uint64_t m = 0;

    if (t->any_routes)
        return RT_ANY_METHOD;
    for (size_t i = 0; i < RT_MAX_METHODS; i++)
        if (t->mcount[i])
            m |= UINT64_C(1) << i;
    return m;
}

static void walk_routes(const struct rt_node *n, void (*fn)(const rt_route *, void *), void *arg)
{
    for (size_t i = 0; i < n->nroutes; i++)
        fn(n->routes[i], arg);
    for (size_t i = 0; i < n->nkids; i++)
        walk_routes(n->kids[i], fn, arg);
    for (size_t i = 0; i < n->nrx; i++)
        walk_routes(n->rx[i].node, fn, arg);
    if (n->param)
        walk_routes(n->param, fn, arg);
    if (n->catchall)
        walk_routes(n->catchall, fn, arg);
    if (n->paths)
        walk_routes(n->paths, fn, arg);
}

void rt_table_foreach(const rt_table *t, void (*fn)(const rt_route *r, void *arg), void *arg)
{
    walk_routes(t->hroot, fn, arg);
    walk_routes(t->root, fn, arg);
}

static void stat_walk(const struct rt_node *n, struct rt_stats *st)
{
    st->nodes++;
    st->bytes += sizeof(*n) + n->label_len + kids_size(n->nkids) + n->nroutes * sizeof(*n->routes) +
                 n->nrx * sizeof(*n->rx);
    for (size_t i = 0; i < n->nroutes; i++) {
        const struct rt_route *r = n->routes[i];
        st->routes++;
        st->bytes += sizeof(*r) + r->nparams * sizeof(uint16_t) + strlen(r->pattern) + 1 +
                     (r->name ? strlen(r->name) + 1 : 0);
        for (size_t j = 0; j < r->nparams; j++)
            st->bytes += strlen(rt_route_param_name(r, j)) + 1;
    }
    for (size_t i = 0; i < n->nkids; i++)
        stat_walk(n->kids[i], st);
    for (size_t i = 0; i < n->nrx; i++)
        stat_walk(n->rx[i].node, st);
    if (n->param)
        stat_walk(n->param, st);
    if (n->catchall)
        stat_walk(n->catchall, st);
    if (n->paths)
        stat_walk(n->paths, st);
}

void rt_table_stats(const rt_table *t, struct rt_stats *st)
{
    memset(st, 0, sizeof(*st));
    stat_walk(t->root, st);
    stat_walk(t->hroot, st);
    st->live_nodes = t->fam->live_nodes;
}

/* ---- routes ---- */

const char *rt_route_pattern(const rt_route *r)
{
    return r->pattern;
}

const char *rt_route_name(const rt_route *r)
{
    return r->name;
}

void *rt_route_udata(const rt_route *r)
{
    return r->udata;
}

uint64_t rt_route_methods(const rt_route *r)
{
    return r->any ? RT_ANY_METHOD : r->methods;
}

size_t rt_route_nparams(const rt_route *r)
{
    return r->nparams;
}

const char *rt_route_param_name(const rt_route *r, size_t i)
{
    return (const char *)(r->poff + r->nparams) + r->poff[i];
}

/* A route: the pattern, name and parameter names copied into one block. */
static struct rt_route *route_new(struct rt_family *fam, const struct rt_pat *p,
                                  const char *pattern, const char *name, uint64_t mask, int any,
                                  void *udata)
{
    size_t plen = strlen(pattern) + 1, nlen = name ? strlen(name) + 1 : 0, names = 0;
    struct rt_route *r;
    char *s;

    for (size_t i = 0; i < p->nparams; i++)
        names += p->names[i].len + 1;
    r = calloc(1, sizeof(*r) + p->nparams * sizeof(uint16_t) + names + plen + nlen);
    if (!r)
        return NULL;
    r->refs = 1;
    r->nparams = (uint16_t)p->nparams;
    r->any = (uint8_t)any;
    r->methods = any ? 0 : mask;
    r->udata = udata;
    r->fam = fam;
    s = (char *)(r->poff + p->nparams);
    {
        size_t o = 0;
        for (size_t i = 0; i < p->nparams; i++) {
            r->poff[i] = (uint16_t)o;
            memcpy(s + o, pattern + p->names[i].off, p->names[i].len);
            s[o + p->names[i].len] = '\0';
            o += p->names[i].len + 1;
        }
        s += o;
    }
    memcpy(s, pattern, plen);
    r->pattern = s;
    if (name) {
        memcpy(s + plen, name, nlen);
        r->name = s + plen;
    }
    return r;
}

static const char *const known_methods[RT_NKNOWN_METHODS] = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
};

static const char *method_name(const rt_table *t, size_t bit)
{
    if (bit < RT_NKNOWN_METHODS)
        return known_methods[bit];
    return bit < t->nmethods ? t->fam->methods[bit] : NULL;
}

/* Writes the names of <mask>'s methods separated by <sep> into <buf>
 * (snprintf-like: NUL-terminated when cap > 0; returns the length needed). */
static size_t format_mask(const rt_table *t, uint64_t mask, const char *sep, char *buf, size_t cap)
{
    size_t len = 0, sl = strlen(sep);

    if (cap)
        buf[0] = '\0';
    for (size_t b = 0; b < RT_MAX_METHODS; b++) {
        const char *m;
        size_t ml;
        if (!(mask & (UINT64_C(1) << b)) || !(m = method_name(t, b)))
            continue;
        ml = strlen(m);
        if (len) {
            if (len + sl < cap)
                memcpy(buf + len, sep, sl);
            len += sl;
        }
        if (len + ml < cap)
            memcpy(buf + len, m, ml);
        len += ml;
        if (len < cap)
            buf[len] = '\0';
    }
    if (len >= cap && cap)
        buf[cap - 1] = '\0';
    return len;
}

size_t rt_methods_format(const rt_table *t, uint64_t mask, char *buf, size_t cap)
{
    return format_mask(t, (mask & RT_M_GET) ? mask | RT_M_HEAD : mask, ", ", buf, cap);
}

size_t rt_route_methods_format(const rt_table *t, const rt_route *r, char *buf, size_t cap)
{
    if (r->any) {
        if (cap > 1) {
            buf[0] = '*';
            buf[1] = '\0';
        }
        return 1;
    }
    return format_mask(t, r->methods, " ", buf, cap);
}

uint64_t rt_method_bit(const rt_table *t, const char *method, size_t mlen)
{
    uint64_t b = rt_known_method_bit(method, mlen);

    if (b)
        return b;
    for (size_t i = RT_NKNOWN_METHODS; i < t->nmethods; i++) {
        const char *m = t->fam->methods[i];
        if (strlen(m) == mlen && memcmp(m, method, mlen) == 0)
            return UINT64_C(1) << i;
    }
    return 0;
}

/* ---- transactions ---- */

rt_txn *rt_txn_begin(const rt_table *base)
{
    struct rt_txn *tx = malloc(sizeof(*tx));

    if (!tx)
        return NULL;
    tx->t = *base;
    tx->t.root->refs++;
    tx->t.hroot->refs++;
    tx->t.fam->refs++;
    tx->gen = ++tx->t.fam->gen;
    return tx;
}

void rt_txn_abort(rt_txn *tx)
{
    if (!tx)
        return;
    node_release(tx->t.fam, tx->t.root);
    node_release(tx->t.fam, tx->t.hroot);
    fam_release(tx->t.fam);
    free(tx);
}

rt_table *rt_txn_commit(rt_txn *tx)
{
    struct rt_table *t = malloc(sizeof(*t));

    if (!t) {
        rt_txn_abort(tx);
        return NULL;
    }
    *t = tx->t; /* the roots' and family's references move to the version */
    free(tx);
    return t;
}

/* Turns a method list into a mask, giving new tokens a bit. */
static int methods_mask(struct rt_txn *tx, const char *const *methods, size_t n, uint64_t *mask,
                        int *any, struct rt_error *err)
{
    struct rt_family *fam = tx->t.fam;

    *mask = 0;
    *any = n == 0;
    for (size_t i = 0; i < n; i++) {
        const char *m = methods[i];
        size_t ml = m ? strlen(m) : 0;
        uint64_t b;
        size_t j;

        if (!rt_method_is_token(m, ml)) {
            rt_err_set(err, RT_EINVAL, 0, "invalid method token \"%.40s\"", m ? m : "");
            return -1;
        }
        b = rt_known_method_bit(m, ml);
        if (!b) {
            for (j = RT_NKNOWN_METHODS; j < RT_MAX_METHODS && fam->methods[j]; j++)
                if (strcmp(fam->methods[j], m) == 0)
                    break;
            if (j == RT_MAX_METHODS) {
                rt_err_set(err, RT_ELIMIT, 0, "more than %d distinct methods", RT_MAX_METHODS);
                return -1;
            }
            if (!fam->methods[j] && !(fam->methods[j] = strdup(m))) {
                rt_err_set(err, RT_ENOMEM, 0, "out of memory");
                return -1;
            }
            if (tx->t.nmethods < j + 1)
                tx->t.nmethods = (uint32_t)(j + 1);
            b = UINT64_C(1) << j;
        }
        *mask |= b;
    }
    return 0;
}

/* The length of the regexp text of the RT_MARK_REGEXP at key[0]. */
static size_t regexp_len(const char *key, size_t klen)
{
    const char *e = memchr(key, RT_MARK_REGEXP_END, klen);
    return (size_t)(e - key) - 1;
}

/* The index of <n>'s regexp child for src[0..len), or -1. */
static int rx_find(const struct rt_node *n, const char *src, size_t len)
{
    for (size_t i = 0; i < n->nrx; i++)
        if (rt_regex_is(n->rx[i].re, src, len))
            return (int)i;
    return -1;
}

/* Adds a regexp child for src[0..len) after the others (registration
 * order is the order of lookups) and returns its node, NULL on out of
 * memory (or RT_MAX_REGEXPS). */
static struct rt_node *rx_add(struct rt_txn *tx, struct rt_node *n, const char *src, size_t len)
{
    struct rt_rx *rx;
    struct rt_regex *re;
    struct rt_node *k;

    if (n->nrx == RT_MAX_REGEXPS)
        return NULL;
    if (!(rx = realloc(n->rx, (n->nrx + 1u) * sizeof(*rx))))
        return NULL;
    n->rx = rx;
    if (!(re = rt_regex_new(src, len)))
        return NULL;
    if (!(k = node_new(tx->t.fam, tx->gen, RT_N_REGEXP, "", 0))) {
        rt_regex_release(re);
        return NULL;
    }
    rx[n->nrx].re = re;
    rx[n->nrx].node = k;
    n->nrx++;
    return k;
}

/* Removes regexp child <i>, keeping the others' order. */
static void rx_remove(struct rt_family *fam, struct rt_node *n, size_t i)
{
    node_release(fam, n->rx[i].node);
    rt_regex_release(n->rx[i].re);
    memmove(n->rx + i, n->rx + i + 1, (n->nrx - i - 1) * sizeof(*n->rx));
    if (--n->nrx == 0) {
        free(n->rx);
        n->rx = NULL;
    }
}

/* Finds the node at the end of <key> below <n>, without changing anything. */
static const struct rt_node *find_shape(const struct rt_node *n, const char *key, size_t klen)
{
    size_t pos = 0;

    while (n && pos < klen) {
        unsigned char c = (unsigned char)key[pos];
        int i;
        if (c == (unsigned char)RT_MARK_PARAM) {
            n = n->param;
            pos++;
            continue;
        }
        if (c == (unsigned char)RT_MARK_CATCHALL) {
            n = n->catchall;
            pos++;
            continue;
        }
        if (c == (unsigned char)RT_MARK_REGEXP) { /* held by the {param} child */
            size_t len = regexp_len(key + pos, klen - pos);
            if (!n->param || (i = rx_find(n->param, key + pos + 1, len)) < 0)
                return NULL;
            n = n->param->rx[i].node;
            pos += len + 2;
            continue;
        }
        if ((i = kid_find(n, c)) < 0)
            return NULL;
        n = n->kids[i];
        if (n->label_len > klen - pos || memcmp(n->label, key + pos, n->label_len) != 0)
            return NULL;
        pos += n->label_len;
    }
    return n;
}

static const struct rt_node *find_leaf(const struct rt_table *t, const struct rt_pat *p)
{
    if (p->hlen) {
        const struct rt_node *h = find_shape(t->hroot, p->host, p->hlen);
        return h && h->paths ? find_shape(h->paths, p->path, p->plen) : NULL;
    }
    return find_shape(t->root, p->path, p->plen);
}

/* Walks <key> below *slot, creating and owning nodes; returns the end node. */
static struct rt_node *ensure_shape(struct rt_txn *tx, struct rt_node **slot, const char *key,
                                    size_t klen)
{
    struct rt_family *fam = tx->t.fam;
    struct rt_node *n = own(tx, slot);
    size_t pos = 0;

    while (n && pos < klen) {
        unsigned char c = (unsigned char)key[pos];
        struct rt_node **ks, *k;
        size_t run, l;
        int i;

        if (c == (unsigned char)RT_MARK_PARAM || c == (unsigned char)RT_MARK_CATCHALL) {
            int param = c == (unsigned char)RT_MARK_PARAM;
            ks = param ? &n->param : &n->catchall;
            if (!*ks) {
                *ks = node_new(fam, tx->gen, param ? RT_N_PARAM : RT_N_CATCHALL, "", 0);
                n = *ks;
            } else {
                n = own(tx, ks);
            }
            pos++;
            continue;
        }
        if (c == (unsigned char)RT_MARK_REGEXP) { /* held by the {param} child */
            size_t len = regexp_len(key + pos, klen - pos);
            struct rt_node *h = n->param ? own(tx, &n->param)
                                         : (n->param = node_new(fam, tx->gen, RT_N_PARAM, "", 0));
            if (!h)
                return NULL;
            if ((i = rx_find(h, key + pos + 1, len)) < 0)
                n = rx_add(tx, h, key + pos + 1, len);
            else
                n = own(tx, &h->rx[i].node);
            pos += len + 2;
            continue;
        }
        for (run = pos; run < klen && (unsigned char)key[run] > RT_MARK_LAST; run++)
            ;
        run -= pos;
        if ((i = kid_find(n, c)) < 0) {
            k = node_new(fam, tx->gen, RT_N_STATIC, key + pos, run);
            if (!k)
                return NULL;
            if (kid_add(n, k) < 0) {
                node_release(fam, k);
                return NULL;
            }
            n = k;
            pos += run;
            continue;
        }
        ks = &n->kids[i];
        if (!(k = own(tx, ks)))
            return NULL;
        for (l = 0; l < k->label_len && l < run && k->label[l] == key[pos + l]; l++)
            ;
        if (l < k->label_len) {
            /* split: mid takes the common prefix, k keeps the rest below it */
            struct rt_node *mid = node_new(fam, tx->gen, RT_N_STATIC, k->label, l);
            if (!mid)
                return NULL;
            memmove(k->label, k->label + l, k->label_len - l);
            k->label_len = (uint16_t)(k->label_len - l);
            if (kid_add(mid, k) < 0) {
                memmove(k->label + l, k->label, k->label_len);
                memcpy(k->label, mid->label, l);
                k->label_len = (uint16_t)(k->label_len + l);
                node_release(fam, mid);
                return NULL;
            }
            *ks = mid;
            k = mid;
        }
        n = k;
        pos += l;
    }
    return n;
}

static void count_route(struct rt_table *t, const struct rt_route *r, int delta)
{
    t->nroutes = (size_t)((long)t->nroutes + delta);
    if (r->any)
        t->any_routes = (uint32_t)((int)t->any_routes + delta);
    for (size_t b = 0; b < RT_MAX_METHODS; b++)
        if (r->methods & (UINT64_C(1) << b))
            t->mcount[b] = (uint32_t)((int)t->mcount[b] + delta);
    if (delta > 0 && r->nparams > t->max_params)
        t->max_params = r->nparams;
}

/* The route of <leaf> whose methods overlap (mode 0) or equal (mode 1). */
static struct rt_route *leaf_route(const struct rt_node *leaf, uint64_t mask, int any, int equal)
{
    if (!leaf)
        return NULL;
    for (size_t i = 0; i < leaf->nroutes; i++) {
        struct rt_route *r = leaf->routes[i];
        if (equal ? (r->any == any && r->methods == mask)
                  : ((r->any && any) || (r->methods & mask)))
            return r;
    }
    return NULL;
}

static struct rt_node *ensure_leaf(struct rt_txn *tx, const struct rt_pat *p)
{
    struct rt_node *h;

    if (!p->hlen)
        return ensure_shape(tx, &tx->t.root, p->path, p->plen);
    if (!(h = ensure_shape(tx, &tx->t.hroot, p->host, p->hlen)))
        return NULL;
    if (!h->paths && !(h->paths = node_new(tx->t.fam, tx->gen, RT_N_STATIC, "", 0)))
        return NULL;
    return ensure_shape(tx, &h->paths, p->path, p->plen);
}

/* Shared front half of insert and update: parse, resolve methods, find the
 * current leaf. A big struct rt_pat lives in the caller's frame. */
static int prepare(struct rt_txn *tx, const char *const *methods, size_t nmethods,
                   const char *pattern, struct rt_pat *p, uint64_t *mask, int *any,
                   const struct rt_node **leaf, struct rt_error *err)
{
    if (err) {
        err->code = RT_OK;
        err->other = NULL;
        err->msg[0] = '\0';
    }
    if (rt_pat_parse(pattern, p, err) < 0)
        return -1;
    if (methods_mask(tx, methods, nmethods, mask, any, err) < 0)
        return -1;
    *leaf = find_leaf(&tx->t, p);
    return 0;
}

static int put_route(struct rt_txn *tx, const char *const *methods, size_t nmethods,
                     const char *pattern, const char *name, void *udata, int update,
                     struct rt_error *err)
{
    struct rt_pat p;
    const struct rt_node *found;
    struct rt_node *leaf;
    struct rt_route *r, *old;
    uint64_t mask;
    int any;

    if (prepare(tx, methods, nmethods, pattern, &p, &mask, &any, &found, err) < 0)
        return -1;
    old = leaf_route(found, mask, any, update);
    if (!update && old) {
        char mb[128];
        rt_route_methods_format(&tx->t, old, mb, sizeof(mb));
        rt_err_set(err, RT_ECONFLICT, 0, "conflicts with route%s%s%s (%s %s)",
                   old->name ? " \"" : "", old->name ? old->name : "", old->name ? "\"" : "", mb,
                   old->pattern);
        err->other = old;
        return -1;
    }
    if (update && !old) {
        rt_err_set(err, RT_ENOENT, 0, "no route with these methods and pattern");
        return -1;
    }
    if (!(r = route_new(tx->t.fam, &p, pattern, name, mask, any, udata)))
        goto fail_oom;
    if (!(leaf = ensure_leaf(tx, &p)))
        goto fail_route;
    if (update) {
        for (size_t i = 0; i < leaf->nroutes; i++) {
            if (leaf->routes[i] == old) {
                count_route(&tx->t, old, -1);
                leaf->routes[i] = r;
                route_release(old);
                break;
            }
        }
    } else {
        struct rt_route **rs = realloc(leaf->routes, (leaf->nroutes + 1u) * sizeof(*rs));
        if (!rs)
            goto fail_route;
        rs[leaf->nroutes++] = r;
        leaf->routes = rs;
    }
    count_route(&tx->t, r, +1);
    return 0;
fail_route:
    r->udata = NULL; /* the caller keeps its udata on failure */
    route_release(r);
fail_oom:
    rt_err_set(err, RT_ENOMEM, 0, "out of memory");
    return -1;
}

int rt_txn_insert(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  const char *name, void *udata, struct rt_error *err)
{
    return put_route(tx, methods, nmethods, pattern, name, udata, 0, err);
}

int rt_txn_update(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  const char *name, void *udata, struct rt_error *err)
{
    return put_route(tx, methods, nmethods, pattern, name, udata, 1, err);
}

/* Replaces static child <i> of <n> (no routes, no wildcard children, one
 * static child) by a node joining its label with its child's. */
static int merge_kid(struct rt_txn *tx, struct rt_node *n, size_t i)
{
    struct rt_node *k = n->kids[i], *g = k->kids[0], *m;
    char buf[RT_MAX_PATTERN + 1];
    size_t len = (size_t)k->label_len + g->label_len;

    memcpy(buf, k->label, k->label_len);
    memcpy(buf + k->label_len, g->label, g->label_len);
    if (!(m = node_copy(tx->t.fam, tx->gen, g, buf, len)))
        return -1;
    n->kids[i] = m;
    node_release(tx->t.fam, k);
    return 0;
}

/* Removes route <r> from the leaf at <key> (then <key2> below its paths)
 * under *slot, pruning nodes left empty and re-joining single-child chains. */
static int del_shape(struct rt_txn *tx, struct rt_node **slot, const char *key, size_t klen,
                     const char *key2, size_t klen2, const struct rt_route *r)
{
    struct rt_family *fam = tx->t.fam;
    struct rt_node *n = own(tx, slot), **cs;
    unsigned char c;
    int i;

    if (!n)
        return -1;
    if (klen == 0) {
        if (key2) {
            if (del_shape(tx, &n->paths, key2, klen2, NULL, 0, r) < 0)
                return -1;
            if (node_empty(n->paths)) {
                node_release(fam, n->paths);
                n->paths = NULL;
            }
            return 0;
        }
        for (size_t j = 0; j < n->nroutes; j++) {
            if (n->routes[j] == r) {
                memmove(n->routes + j, n->routes + j + 1, (n->nroutes - j - 1) * sizeof(r));
                n->nroutes--;
                if (!n->nroutes) {
                    free(n->routes);
                    n->routes = NULL;
                }
                count_route(&tx->t, r, -1);
                route_release((struct rt_route *)r);
                return 0;
            }
        }
        return -1;
    }
    c = (unsigned char)key[0];
    if (c == (unsigned char)RT_MARK_PARAM || c == (unsigned char)RT_MARK_CATCHALL) {
        cs = c == (unsigned char)RT_MARK_PARAM ? &n->param : &n->catchall;
        if (del_shape(tx, cs, key + 1, klen - 1, key2, klen2, r) < 0)
            return -1;
        if (node_empty(*cs)) {
            node_release(fam, *cs);
            *cs = NULL;
        }
        return 0;
    }
    if (c == (unsigned char)RT_MARK_REGEXP) { /* held by the {param} child */
        size_t len = regexp_len(key, klen);
        struct rt_node *h = n->param ? own(tx, &n->param) : NULL;
        if (!h || (i = rx_find(h, key + 1, len)) < 0)
            return -1;
        if (del_shape(tx, &h->rx[i].node, key + len + 2, klen - len - 2, key2, klen2, r) < 0)
            return -1;
        if (node_empty(h->rx[i].node))
            rx_remove(fam, h, (size_t)i);
        if (node_empty(h)) {
            node_release(fam, h);
            n->param = NULL;
        }
        return 0;
    }
    if ((i = kid_find(n, c)) < 0)
        return -1;
    {
        size_t ll = n->kids[i]->label_len;
        struct rt_node *k;
        if (del_shape(tx, &n->kids[i], key + ll, klen - ll, key2, klen2, r) < 0)
            return -1;
        k = n->kids[i];
        if (node_empty(k)) {
            kid_remove(n, (size_t)i);
            node_release(fam, k);
        } else if (!k->nroutes && !k->param && !k->catchall && !k->paths && !k->nrx &&
                   k->nkids == 1) {
            return merge_kid(tx, n, (size_t)i);
        }
    }
    return 0;
}

void *rt_txn_find(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern)
{
    struct rt_pat p;
    const struct rt_node *found;
    const struct rt_route *r;
    uint64_t mask;
    int any;

    if (prepare(tx, methods, nmethods, pattern, &p, &mask, &any, &found, NULL) < 0)
        return NULL;
    r = leaf_route(found, mask, any, 1);
    return r ? r->udata : NULL;
}

int rt_txn_delete(rt_txn *tx, const char *const *methods, size_t nmethods, const char *pattern,
                  struct rt_error *err)
{
    struct rt_pat p;
    const struct rt_node *found;
    const struct rt_route *old;
    uint64_t mask;
    int any, rc;

    if (prepare(tx, methods, nmethods, pattern, &p, &mask, &any, &found, err) < 0)
        return -1;
    if (!(old = leaf_route(found, mask, any, 1))) {
        rt_err_set(err, RT_ENOENT, 0, "no route with these methods and pattern");
        return -1;
    }
    if (p.hlen)
        rc = del_shape(tx, &tx->t.hroot, p.host, p.hlen, p.path, p.plen, old);
    else
        rc = del_shape(tx, &tx->t.root, p.path, p.plen, NULL, 0, old);
    if (rc < 0) {
        rt_err_set(err, RT_ENOMEM, 0, "out of memory");
        return -1;
    }
    return 0;
}
