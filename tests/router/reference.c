/*
 * reference.c - the brute-force reference router (see reference.h).
 *
 * Every rule here is read off router/SEMANTICS.md, in the same words where
 * possible, and nothing is shared with router/: a lookup matches each pattern
 * on its own (matching is deterministic because a parameter runs to the next
 * separator), records for each match the kind of pattern token that consumed
 * each request position, and keeps the match whose record is lowest.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "reference.h"

#include <assert.h>
#include <pcre2.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Path tokens: static text, {param}, {param:regexp}, *{infix} (a catch-all
 * with more pattern after it), *{catchall} (ending the pattern). Host
 * tokens: static text, {param}, *{label} (the catch-all label). */
enum ref_kind { TOK_STATIC, TOK_PARAM, TOK_REGEXP, TOK_INFIX, TOK_CATCHALL, TOK_HCATCH };

struct ref_tok {
    enum ref_kind kind;
    const char *s; /* static text (host: lower-cased) or parameter name */
    size_t len;
    char *own;      /* heap copy backing <s> */
    pcre2_code *re; /* TOK_REGEXP: the regexp as written */
    char *slot;     /* TOK_REGEXP: the shape up to this token (see ref_slot) */
};

/* Ranks of the tokens walked over a request, lower first: "pattern ended" <
 * catch-all matching the empty rest; static byte < regexp param (then its
 * registration rank) < param < infix or host catch-all (then its length,
 * shorter first) < suffix catch-all. */
enum {
    KEY_END = 1,
    KEY_STATIC = 2,
    KEY_REGEXP = 3,
    KEY_PARAM = 4,
    KEY_INFIX = 5,
    KEY_CATCHALL = 6
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* The index of the '}' closing the '{' at s[i]. A name ends at the first
 * '}' or ':' (a backslash is an ordinary byte of a name); inside a regexp,
 * after the ':', braces nest and a backslash escapes the next byte. */
static size_t close_brace(const char *s, size_t len, size_t i)
{
    size_t depth = 0, j = i + 1;

    while (j < len && s[j] != '}' && s[j] != ':')
        j++;
    if (j < len && s[j] == '}')
        return j;
    for (j++; j < len; j++) {
        if (s[j] == '\\')
            j++;
        else if (s[j] == '{')
            depth++;
        else if (s[j] == '}' && depth-- == 0)
            return j;
    }
    abort(); /* patterns given to the reference are valid */
}

/* A regexp of a valid pattern; the whole value must match, which the
 * reference asks at match time (see whole_match). */
static pcre2_code *compile_regexp(const char *re, size_t len)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, len, 0, &code, &off, NULL);

    assert(c != NULL);
    return c;
}

/* Splits one part of a valid pattern (<s>, <len>) into tokens; <host> lower-
 * cases static text and makes *{name} the catch-all label. Returns a heap
 * array, its size in <*n>. */
static struct ref_tok *tokenize(const char *s, size_t len, int host, size_t *n)
{
    struct ref_tok *tok = calloc(len + 1, sizeof(*tok));
    size_t i = 0, k = 0;

    if (!tok)
        abort();
    while (i < len) {
        if (s[i] == '{' || (s[i] == '*' && i + 1 < len && s[i + 1] == '{')) {
            int star = s[i] == '*';
            size_t start = i + (star ? 2 : 1), end = close_brace(s, len, start - 1), colon = start;
            while (colon < end && s[colon] != ':')
                colon++;
            if (!star)
                tok[k].kind = colon < end ? TOK_REGEXP : TOK_PARAM;
            else if (host)
                tok[k].kind = TOK_HCATCH;
            else
                tok[k].kind = end + 1 < len ? TOK_INFIX : TOK_CATCHALL;
            tok[k].own = xstrndup(s + start, colon - start);
            tok[k].s = tok[k].own;
            tok[k].len = colon - start;
            if (colon < end)
                tok[k].re = compile_regexp(s + colon + 1, end - colon - 1);
            k++;
            i = end + 1;
        } else {
            size_t end = i;
            while (end < len && s[end] != '{' &&
                   !(s[end] == '*' && end + 1 < len && s[end + 1] == '{'))
                end++;
            tok[k].kind = TOK_STATIC;
            tok[k].own = xstrndup(s + i, end - i);
            if (host)
                for (size_t j = 0; j < end - i; j++)
                    tok[k].own[j] = lower(tok[k].own[j]);
            tok[k].s = tok[k].own;
            tok[k].len = end - i;
            k++;
            i = end;
        }
    }
    *n = k;
    return tok;
}

static void toks_free(struct ref_tok *tok, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(tok[i].own);
        free(tok[i].slot);
        pcre2_code_free(tok[i].re);
    }
    free(tok);
}

/* The shape: the pattern with host lower-cased and parameter names erased
 * ("{id:[0-9]+}" -> "{:[0-9]+}"). Two routes have the same shape iff their
 * shapes are equal strings. */
static char *make_shape(const char *pattern, size_t len, size_t hostlen)
{
    char *shape = xmalloc(len + 1);
    size_t k = 0;

    for (size_t i = 0; i < len; i++) {
        char c = pattern[i];
        if (c == '{') {
            size_t end = close_brace(pattern, len, i), colon = i;
            while (colon < end && pattern[colon] != ':')
                colon++;
            shape[k++] = '{';
            memcpy(shape + k, pattern + colon, end - colon);
            k += end - colon;
            shape[k++] = '}';
            i = end;
            continue;
        }
        shape[k++] = i < hostlen ? lower(c) : c;
    }
    shape[k] = '\0';
    return shape;
}

static void route_set_methods(struct ref_route *r, const char *const *methods, size_t n)
{
    r->nmethods = 0;
    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        assert(strlen(methods[i]) < REF_METHOD_LEN);
        for (size_t j = 0; j < r->nmethods; j++)
            dup |= strcmp(r->methods[j], methods[i]) == 0;
        if (dup)
            continue;
        assert(r->nmethods < REF_MAX_METHODS);
        strcpy(r->methods[r->nmethods++], methods[i]);
    }
}

static void route_build(struct ref_route *r, const char *const *methods, size_t n,
                        const char *pattern, intptr_t id)
{
    const char *slash = strchr(pattern, '/');
    size_t hostlen;

    assert(slash != NULL);
    memset(r, 0, sizeof(*r));
    hostlen = (size_t)(slash - pattern);
    r->pattern = xstrndup(pattern, strlen(pattern));
    r->id = id;
    r->has_host = hostlen > 0;
    r->shape = make_shape(pattern, strlen(pattern), hostlen);
    r->htok = tokenize(pattern, hostlen, 1, &r->nhtok);
    r->ptok = tokenize(slash, strlen(slash), 0, &r->nptok);
    /* each regexp's slot: the shape of the pattern up to and including it */
    for (size_t i = 0, off = 0; i < r->nptok; i++) {
        const char *rest = slash + off;
        if (r->ptok[i].kind == TOK_STATIC) {
            off += r->ptok[i].len;
            continue;
        }
        off += close_brace(rest, strlen(rest), rest[0] == '*' ? 1 : 0) + 1;
        if (r->ptok[i].kind == TOK_REGEXP)
            r->ptok[i].slot = make_shape(pattern, hostlen + off, hostlen);
    }
    route_set_methods(r, methods, n);
}

static void route_free(struct ref_route *r)
{
    free(r->pattern);
    free(r->shape);
    toks_free(r->htok, r->nhtok);
    toks_free(r->ptok, r->nptok);
}

static int names_method(const struct ref_route *r, const char *m, size_t mlen)
{
    for (size_t i = 0; i < r->nmethods; i++)
        if (strlen(r->methods[i]) == mlen && memcmp(r->methods[i], m, mlen) == 0)
            return 1;
    return 0;
}

/* Method sets intersect, or both take any method. */
static int methods_clash(const struct ref_route *a, const struct ref_route *b)
{
    if (a->nmethods == 0 || b->nmethods == 0)
        return a->nmethods == 0 && b->nmethods == 0;
    for (size_t i = 0; i < a->nmethods; i++)
        if (names_method(b, a->methods[i], strlen(a->methods[i])))
            return 1;
    return 0;
}

static int methods_equal(const struct ref_route *a, const struct ref_route *b)
{
    if (a->nmethods != b->nmethods)
        return 0;
    for (size_t i = 0; i < a->nmethods; i++)
        if (!names_method(b, a->methods[i], strlen(a->methods[i])))
            return 0;
    return 1;
}

void ref_init(struct ref_table *t)
{
    memset(t, 0, sizeof(*t));
}

void ref_clear(struct ref_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        route_free(&t->routes[i]);
    free(t->routes);
    for (size_t i = 0; i < t->nslots; i++)
        free(t->slots[i].prefix);
    free(t->slots);
    ref_init(t);
}

static const struct ref_slot *slot_find(const struct ref_table *t, const char *prefix)
{
    for (size_t i = 0; i < t->nslots; i++)
        if (strcmp(t->slots[i].prefix, prefix) == 0)
            return &t->slots[i];
    return NULL;
}

static void slot_add(struct ref_table *t, const char *prefix, unsigned long seq)
{
    if (slot_find(t, prefix))
        return;
    if (t->nslots == t->slotcap) {
        size_t cap = t->slotcap ? t->slotcap * 2 : 8;
        struct ref_slot *ns = realloc(t->slots, cap * sizeof(*ns));
        if (!ns)
            abort();
        t->slots = ns;
        t->slotcap = cap;
    }
    t->slots[t->nslots].prefix = xstrndup(prefix, strlen(prefix));
    t->slots[t->nslots].seq = seq;
    t->nslots++;
}

/* Drops the slots no live route's shape starts with. */
static void slots_prune(struct ref_table *t)
{
    size_t k = 0;

    for (size_t i = 0; i < t->nslots; i++) {
        int live = 0;
        for (size_t j = 0; j < t->n && !live; j++)
            live = strncmp(t->routes[j].shape, t->slots[i].prefix, strlen(t->slots[i].prefix)) == 0;
        if (live)
            t->slots[k++] = t->slots[i];
        else
            free(t->slots[i].prefix);
    }
    t->nslots = k;
}

static struct ref_route *append(struct ref_table *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct ref_route *nr = realloc(t->routes, cap * sizeof(*nr));
        if (!nr)
            abort();
        t->routes = nr;
        t->cap = cap;
    }
    return &t->routes[t->n++];
}

void ref_copy(struct ref_table *dst, const struct ref_table *src)
{
    for (size_t i = 0; i < src->n; i++) {
        const struct ref_route *s = &src->routes[i];
        const char *ms[REF_MAX_METHODS];
        for (size_t j = 0; j < s->nmethods; j++)
            ms[j] = s->methods[j];
        route_build(append(dst), ms, s->nmethods, s->pattern, s->id);
    }
    for (size_t i = 0; i < src->nslots; i++)
        slot_add(dst, src->slots[i].prefix, src->slots[i].seq);
    dst->seq = src->seq;
}

int ref_insert(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t id, intptr_t *other, size_t cap, size_t *nother)
{
    struct ref_route nr;
    size_t nc = 0;

    route_build(&nr, methods, nmethods, pattern, id);
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->routes[i].shape, nr.shape) == 0 && methods_clash(&t->routes[i], &nr)) {
            if (nc < cap)
                other[nc] = t->routes[i].id;
            nc++;
        }
    }
    if (nother)
        *nother = nc;
    if (nc > 0) {
        route_free(&nr);
        return REF_ECONFLICT;
    }
    *append(t) = nr;
    for (size_t i = 0; i < nr.nptok; i++)
        if (nr.ptok[i].kind == TOK_REGEXP && !slot_find(t, nr.ptok[i].slot))
            slot_add(t, nr.ptok[i].slot, ++t->seq);
    return REF_OK;
}

/* The index of the route with <pattern>'s shape and exactly <methods>. */
static size_t find_exact(const struct ref_table *t, const char *const *methods, size_t nmethods,
                         const char *pattern)
{
    struct ref_route probe;
    size_t found = t->n;

    route_build(&probe, methods, nmethods, pattern, 0);
    for (size_t i = 0; i < t->n && found == t->n; i++)
        if (strcmp(t->routes[i].shape, probe.shape) == 0 && methods_equal(&t->routes[i], &probe))
            found = i;
    route_free(&probe);
    return found;
}

int ref_update(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t id, intptr_t *old_id)
{
    size_t i = find_exact(t, methods, nmethods, pattern);

    if (i == t->n)
        return REF_ENOENT;
    if (old_id)
        *old_id = t->routes[i].id;
    route_free(&t->routes[i]);
    route_build(&t->routes[i], methods, nmethods, pattern, id);
    return REF_OK;
}

int ref_delete(struct ref_table *t, const char *const *methods, size_t nmethods,
               const char *pattern, intptr_t *old_id)
{
    size_t i = find_exact(t, methods, nmethods, pattern);

    if (i == t->n)
        return REF_ENOENT;
    if (old_id)
        *old_id = t->routes[i].id;
    route_free(&t->routes[i]);
    memmove(&t->routes[i], &t->routes[i + 1], (t->n - i - 1) * sizeof(t->routes[0]));
    t->n--;
    slots_prune(t);
    return REF_OK;
}

size_t ref_max_params(const struct ref_table *t)
{
    size_t max = 0;

    for (size_t i = 0; i < t->n; i++) {
        const struct ref_route *r = &t->routes[i];
        size_t n = 0;
        for (size_t j = 0; j < r->nhtok; j++)
            n += r->htok[j].kind != TOK_STATIC;
        for (size_t j = 0; j < r->nptok; j++)
            n += r->ptok[j].kind != TOK_STATIC;
        if (n > max)
            max = n;
    }
    return max;
}

/* ---- matching ---- */

/* One route matched against the request: its rank keys and parameters. */
struct ref_cand {
    const struct ref_route *route;
    int pref; /* among same-shape candidates: 0 names M, 1 GET for HEAD, 2 any */
    uint32_t *hkey, *pkey;
    size_t hkeylen, pkeylen;
    size_t nparams;
    struct ref_param params[REF_MAX_PARAMS];
};

/* One part (host or path) being matched. */
struct ref_part {
    const struct ref_table *t;
    const struct ref_tok *tok;
    size_t ntok;
    const char *s;
    size_t len;
    char sep; /* ends a parameter: '.' or '/' */
    int ci;   /* static text compares case-insensitively (hosts) */
    uint32_t *key;
    size_t *keylen;
    struct ref_cand *c;
};

/* Whether v[0..len) is one or more non-empty labels. */
static int labels(const char *v, size_t len)
{
    if (len == 0 || v[0] == '.' || v[len - 1] == '.')
        return 0;
    for (size_t i = 1; i < len; i++)
        if (v[i] == '.' && v[i - 1] == '.')
            return 0;
    return 1;
}

/* The whole of v[0..len) matches <re>; a match that takes more than 100000
 * steps does not (SEMANTICS.md). */
static int whole_match(pcre2_code *re, const char *v, size_t len)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    int rc;

    if (!md || !mc)
        abort();
    pcre2_set_match_limit(mc, 100000);
    rc = pcre2_match(re, (PCRE2_SPTR)v, len, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, mc);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return rc >= 0;
}

static void add_param(struct ref_cand *c, const char *name, const char *v, size_t len)
{
    assert(c->nparams < REF_MAX_PARAMS);
    c->params[c->nparams++] = (struct ref_param){name, v, len};
}

/* Matches tokens i.. against s[pos..] with <k> rank keys and <np> params
 * so far, trying the alternatives of every token in rank order, so the
 * first match found is the route's most specific one. Returns 1 then, with
 * the keys and params filled. */
static int match_from(struct ref_part *m, size_t i, size_t pos, size_t k, size_t np)
{
    const struct ref_tok *t = &m->tok[i];
    const char *s = m->s;
    size_t len = m->len, end;

    m->c->nparams = np;
    if (i == m->ntok) {
        if (pos != len)
            return 0;
        m->key[k++] = KEY_END;
        *m->keylen = k;
        return 1;
    }
    switch (t->kind) {
    case TOK_STATIC:
        if (len - pos < t->len)
            return 0;
        for (size_t j = 0; j < t->len; j++) {
            char a = m->ci ? lower(s[pos + j]) : s[pos + j];
            if (a != t->s[j])
                return 0;
            m->key[k++] = KEY_STATIC;
        }
        return match_from(m, i + 1, pos + t->len, k, np);
    case TOK_PARAM:
    case TOK_REGEXP:
        /* a parameter runs to the next separator and is not empty */
        for (end = pos; end < len && s[end] != m->sep; end++)
            ;
        if (end == pos)
            return 0;
        if (t->kind == TOK_REGEXP) {
            const struct ref_slot *sl = slot_find(m->t, t->slot);
            assert(sl != NULL);
            if (!whole_match(t->re, s + pos, end - pos))
                return 0;
            m->key[k++] = KEY_REGEXP;
            m->key[k++] = (uint32_t)sl->seq;
        } else {
            m->key[k++] = KEY_PARAM;
        }
        add_param(m->c, t->s, s + pos, end - pos);
        return match_from(m, i + 1, end, k, np + 1);
    case TOK_INFIX:
    case TOK_HCATCH:
        /* at least one byte (host: one or more labels), shortest first */
        for (end = pos + 1; end < len; end++) {
            if (t->kind == TOK_HCATCH && !labels(s + pos, end - pos))
                continue;
            m->key[k] = KEY_INFIX;
            m->key[k + 1] = (uint32_t)(end - pos);
            m->c->nparams = np;
            add_param(m->c, t->s, s + pos, end - pos);
            if (match_from(m, i + 1, end, k + 2, np + 1))
                return 1;
        }
        return 0;
    case TOK_CATCHALL:
        /* the rest of the path, maybe empty; nothing follows */
        add_param(m->c, t->s, s + pos, len - pos);
        m->key[k++] = KEY_CATCHALL;
        *m->keylen = k;
        return 1;
    }
    return 0;
}

static int match_part(const struct ref_table *t, const struct ref_tok *tok, size_t ntok,
                      const char *s, size_t len, char sep, int ci, uint32_t *key, size_t *keylen,
                      struct ref_cand *c)
{
    struct ref_part m = {t, tok, ntok, s, len, sep, ci, key, keylen, c};

    return match_from(&m, 0, 0, 0, c->nparams);
}

static int key_cmp(const uint32_t *a, size_t alen, const uint32_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;

    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return alen < blen ? -1 : alen > blen;
}

/* <0 when <a> is more specific than <b>. Host routes whose host matches rank
 * above every host-less route; between two host routes the host is compared
 * first, then the path. */
static int cand_cmp(const struct ref_cand *a, const struct ref_cand *b)
{
    int c;

    if (a->route->has_host != b->route->has_host)
        return a->route->has_host ? -1 : 1;
    if (a->route->has_host) {
        c = key_cmp(a->hkey, a->hkeylen, b->hkey, b->hkeylen);
        if (c != 0)
            return c;
    }
    c = key_cmp(a->pkey, a->pkeylen, b->pkey, b->pkeylen);
    if (c != 0)
        return c;
    return a->pref - b->pref;
}

/* H: port removed (host:port, [v6]:port), one final '.' removed. Returns the
 * length left; 0 means no host. */
static size_t host_normalize(const char *h, size_t hlen)
{
    size_t n = hlen;

    if (!h || hlen == 0)
        return 0;
    if (h[0] == '[') {
        const char *end = memchr(h, ']', hlen);
        if (end)
            n = (size_t)(end - h) + 1;
    } else {
        const char *colon = memchr(h, ':', hlen);
        if (colon)
            n = (size_t)(colon - h);
    }
    if (n > 0 && h[n - 1] == '.')
        n--;
    return n;
}

static void allow_add(struct ref_result *r, const char *m)
{
    for (size_t i = 0; i < r->nallow; i++)
        if (strcmp(r->allow[i], m) == 0)
            return;
    assert(r->nallow < REF_MAX_ALLOW);
    strcpy(r->allow[r->nallow++], m);
}

/* One lookup without the trailing-slash twin. */
static void lookup_core(const struct ref_table *t, const char *m, size_t mlen, const char *h,
                        size_t hlen, const char *p, size_t plen, struct ref_result *r)
{
    struct ref_cand *best = xmalloc(sizeof(*best)), *cur = xmalloc(sizeof(*cur));
    size_t keycap = 2 * (hlen > plen ? hlen : plen) + 4;
    int have_best = 0, matched = 0;

    best->hkey = xmalloc(keycap * sizeof(uint32_t));
    best->pkey = xmalloc(keycap * sizeof(uint32_t));
    cur->hkey = xmalloc(keycap * sizeof(uint32_t));
    cur->pkey = xmalloc(keycap * sizeof(uint32_t));
    r->nallow = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct ref_route *rt = &t->routes[i];
        cur->route = rt;
        cur->nparams = 0;
        cur->hkeylen = 0;
        if (rt->has_host) {
            if (hlen == 0 ||
                !match_part(t, rt->htok, rt->nhtok, h, hlen, '.', 1, cur->hkey, &cur->hkeylen, cur))
                continue;
        }
        if (!match_part(t, rt->ptok, rt->nptok, p, plen, '/', 0, cur->pkey, &cur->pkeylen, cur))
            continue;
        matched = 1;
        for (size_t j = 0; j < rt->nmethods; j++)
            allow_add(r, rt->methods[j]);

        /* A route takes M when its set contains M or it takes any method;
         * a GET route also takes HEAD. */
        if (names_method(rt, m, mlen))
            cur->pref = 0;
        else if (mlen == 4 && memcmp(m, "HEAD", 4) == 0 && names_method(rt, "GET", 3))
            cur->pref = 1;
        else if (rt->nmethods == 0)
            cur->pref = 2;
        else
            continue;
        if (!have_best || cand_cmp(cur, best) < 0) {
            struct ref_cand *tmp = best;
            best = cur;
            cur = tmp;
            have_best = 1;
        }
    }

    r->route = NULL;
    r->id = 0;
    r->nparams = 0;
    r->slash = 0;
    r->allow_any = 0;
    if (have_best) {
        r->status = 200;
        r->route = best->route;
        r->id = best->route->id;
        r->nparams = best->nparams;
        memcpy(r->params, best->params, best->nparams * sizeof(best->params[0]));
    } else if (matched) {
        r->status = 405; /* or 204: decided by the caller (auto_options, twin) */
    } else {
        r->status = 404;
    }
    free(best->hkey);
    free(best->pkey);
    free(cur->hkey);
    free(cur->pkey);
    free(best);
    free(cur);
}

/* No route took the method: 405 (or the automatic OPTIONS answer) with the
 * methods of the matching routes, plus OPTIONS when automatic OPTIONS is on;
 * 404 when no route matched. */
static void not_taken(struct ref_result *r, int matched, int auto_options, const char *m,
                      size_t mlen)
{
    if (!matched) {
        r->status = 404;
        r->nallow = 0;
        return;
    }
    r->status = 405;
    if (auto_options) {
        allow_add(r, "OPTIONS");
        if (mlen == 7 && memcmp(m, "OPTIONS", 7) == 0)
            r->status = 204;
    }
}

void ref_lookup(const struct ref_table *t, int trailing_slash, int auto_options, const char *method,
                size_t mlen, const char *host, size_t hlen, const char *path, size_t plen,
                struct ref_result *r)
{
    size_t hn = host_normalize(host, hlen);
    int matched;

    if (plen == 1 && path[0] == '*') {
        /* "OPTIONS *" with automatic OPTIONS: every method of every route */
        r->route = NULL;
        r->id = 0;
        r->slash = 0;
        r->nparams = 0;
        r->nallow = 0;
        r->allow_any = 0;
        r->status = 404;
        if (auto_options && t->n && mlen == 7 && memcmp(method, "OPTIONS", 7) == 0) {
            for (size_t i = 0; i < t->n; i++) {
                r->allow_any |= t->routes[i].nmethods == 0;
                for (size_t j = 0; j < t->routes[i].nmethods; j++)
                    allow_add(r, t->routes[i].methods[j]);
            }
            allow_add(r, "OPTIONS");
            r->status = 204;
        }
        return;
    }
    lookup_core(t, method, mlen, host, hn, path, plen, r);
    if (r->status == 200)
        return;
    matched = r->status != 404;
    /* strict, "/" and the empty path have no twin; redirect only redirects a
     * path that matches nothing */
    if (trailing_slash == REF_TS_STRICT || plen == 0 || (plen == 1 && path[0] == '/') ||
        (trailing_slash == REF_TS_REDIRECT && matched)) {
        not_taken(r, matched, auto_options, method, mlen);
        return;
    }

    /* The twin: P without its final '/', or P + '/'. */
    struct ref_result *sub = xmalloc(sizeof(*sub));
    size_t tlen;
    int slash;
    assert(plen <= REF_MAX_PATH);
    if (path[plen - 1] == '/') {
        tlen = plen - 1;
        slash = -1;
    } else {
        tlen = plen + 1;
        slash = +1;
    }
    memcpy(r->twin, path, plen < tlen ? plen : tlen);
    if (slash > 0)
        r->twin[plen] = '/';
    r->twin[tlen] = '\0';
    lookup_core(t, method, mlen, host, hn, r->twin, tlen, sub);
    if (sub->status == 200) {
        r->route = sub->route;
        r->id = sub->id;
        r->slash = slash;
        if (trailing_slash == REF_TS_REDIRECT) {
            int safe = (mlen == 3 && memcmp(method, "GET", 3) == 0) ||
                       (mlen == 4 && memcmp(method, "HEAD", 4) == 0);
            r->status = safe ? 301 : 308;
        } else {
            r->status = 200;
            r->nparams = sub->nparams;
            memcpy(r->params, sub->params, sub->nparams * sizeof(sub->params[0]));
        }
    } else if (trailing_slash == REF_TS_RELAXED) {
        /* relaxed: the twin counts for the 405 too */
        for (size_t i = 0; i < sub->nallow; i++)
            allow_add(r, sub->allow[i]);
        not_taken(r, matched || sub->status != 404, auto_options, method, mlen);
    } else {
        not_taken(r, 0, auto_options, method, mlen);
    }
    free(sub);
}
