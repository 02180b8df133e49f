/*
 * rtest.c - helpers shared by the router's unit tests (see rtest.h).
 */
#include "rtest.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SY_ROUTES_DIR
#error "SY_ROUTES_DIR must name tests/data/routes (set by tests/router/CMakeLists.txt)"
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

void rtest_methods_parse(struct rtest_methods *ms, const char *spec)
{
    const char *p = spec;

    ms->n = 0;
    if (strcmp(spec, "*") == 0)
        return;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        RTEST_REQUIRE(ms->n < RTEST_MAX_METHODS && len < sizeof(ms->buf[0]), "bad spec %s", spec);
        memcpy(ms->buf[ms->n], p, len);
        ms->buf[ms->n][len] = '\0';
        ms->ptr[ms->n] = ms->buf[ms->n];
        ms->n++;
        p += len + (end ? 1 : 0);
    }
}

const char *rtest_nz(const char *s)
{
    return s ? s : "(no host)";
}

int rtest_insert(rt_txn *tx, const char *spec, const char *pattern, intptr_t id,
                 struct rt_error *err)
{
    struct rtest_methods ms;

    rtest_methods_parse(&ms, spec);
    return rt_txn_insert(tx, ms.ptr, ms.n, pattern, NULL, (void *)id, err);
}

int rtest_update(rt_txn *tx, const char *spec, const char *pattern, intptr_t id,
                 struct rt_error *err)
{
    struct rtest_methods ms;

    rtest_methods_parse(&ms, spec);
    return rt_txn_update(tx, ms.ptr, ms.n, pattern, NULL, (void *)id, err);
}

int rtest_delete(rt_txn *tx, const char *spec, const char *pattern, struct rt_error *err)
{
    struct rtest_methods ms;

    rtest_methods_parse(&ms, spec);
    return rt_txn_delete(tx, ms.ptr, ms.n, pattern, err);
}

rt_table *rtest_build(const struct rt_options *o, const char *const *lines, size_t n)
{
    rt_table *empty = rt_table_new(o, NULL), *t;
    rt_txn *tx;

    RTEST_REQUIRE(empty != NULL, "rt_table_new failed");
    tx = rt_txn_begin(empty);
    RTEST_REQUIRE(tx != NULL, "rt_txn_begin failed");
    for (size_t i = 0; i < n; i++) {
        char spec[64];
        const char *sp = strchr(lines[i], ' ');
        struct rt_error err;
        RTEST_REQUIRE(sp && (size_t)(sp - lines[i]) < sizeof(spec), "bad line %s", lines[i]);
        memcpy(spec, lines[i], (size_t)(sp - lines[i]));
        spec[sp - lines[i]] = '\0';
        memset(&err, 0, sizeof(err));
        int rc = rtest_insert(tx, spec, sp + 1, (intptr_t)(i + 1), &err);
        RTEST_REQUIRE(rc == 0, "insert '%s' failed: code %d: %s", lines[i], (int)err.code, err.msg);
    }
    t = rt_txn_commit(tx);
    RTEST_REQUIRE(t != NULL, "rt_txn_commit failed");
    rt_table_free(empty);
    return t;
}

enum rt_status rtest_lookup(const rt_table *t, const char *method, const char *host,
                            const char *path, struct rtest_res *r)
{
    size_t cap = rt_table_max_params(t);
    enum rt_status st;

    RTEST_REQUIRE(cap <= RTEST_MAX_PARAMS, "rt_table_max_params %zu > %d", cap, RTEST_MAX_PARAMS);
    memset(r, 0, sizeof(*r));
    st = rt_lookup(t, method, strlen(method), host, host ? strlen(host) : 0, path, strlen(path),
                   r->params, cap, &r->m);
    RTEST_REQUIRE(st == r->m.status, "rt_lookup returned %d, m->status %d", (int)st,
                  (int)r->m.status);
    return st;
}

intptr_t rtest_id(const struct rtest_res *r)
{
    return r->m.route ? (intptr_t)rt_route_udata(r->m.route) : 0;
}

int rtest_param_is(const struct rtest_res *r, size_t i, const char *name, const char *value)
{
    if (i >= r->m.nparams || !r->params[i].name || strcmp(r->params[i].name, name) != 0)
        return 0;
    return r->params[i].len == strlen(value) &&
           (r->params[i].len == 0 || memcmp(r->params[i].value, value, r->params[i].len) == 0);
}

/* ---- route files ---- */

size_t rtest_load(const char *file, struct rtest_line **out)
{
    char path[1024], buf[4096];
    size_t n = 0, cap = 0;
    struct rtest_line *lines = NULL;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", SY_ROUTES_DIR, file);
    f = fopen(path, "r");
    RTEST_REQUIRE(f != NULL, "cannot open %s", path);
    while (fgets(buf, sizeof(buf), f)) {
        size_t len = strcspn(buf, "\r\n");
        char *sp;
        buf[len] = '\0';
        if (len == 0 || buf[0] == '#')
            continue;
        sp = strchr(buf, ' ');
        RTEST_REQUIRE(sp && (size_t)(sp - buf) < sizeof(lines[0].method), "bad line: %s", buf);
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            lines = realloc(lines, cap * sizeof(*lines));
            RTEST_REQUIRE(lines != NULL, "out of memory");
        }
        memcpy(lines[n].method, buf, (size_t)(sp - buf));
        lines[n].method[sp - buf] = '\0';
        lines[n].path = malloc(strlen(sp + 1) + 1);
        RTEST_REQUIRE(lines[n].path != NULL, "out of memory");
        strcpy(lines[n].path, sp + 1);
        n++;
    }
    fclose(f);
    *out = lines;
    return n;
}

void rtest_lines_free(struct rtest_line *lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i].path);
    free(lines);
}

/* ---- PRNG ---- */

uint64_t rtest_rand(struct rtest_rng *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

size_t rtest_below(struct rtest_rng *r, size_t n)
{
    return n ? (size_t)(rtest_rand(r) % n) : 0;
}

uint64_t rtest_seed(uint64_t dflt)
{
    const char *s = getenv("SY_SEED");
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

size_t rtest_iters(size_t dflt)
{
    const char *s = getenv("SY_ITERS_PCT");
    size_t n;

    if (!s || !*s)
        return dflt;
    n = dflt * (size_t)strtoul(s, NULL, 10) / 100;
    return n ? n : 1;
}

/* ---- random routes and requests ---- */

static const char *const gen_static[] = {"a", "b", "ab", "abc", "users", "u", "v1", "x.txt", "f=a"};
static const char *const gen_param_pre[] = {"", "", "", "a", "ab", "u:", "x."};
static const char *const gen_catch_pre[] = {"", "", "a", "f=", "ab"};
static const char *const gen_hosts[] = {
    "example.com",
    "api.example.com",
    "{h}.example.com",
    "api-{h}.example.com",
    "www.example.com",
    "other.org",
    "{t}.org",
    "{$t}.example.com",
    "*{any}.example.com",
    "*{h}.org",
    "*{w}.api.example.com",
};
static const char *const gen_pnames[] = {"p", "q", "id", "$", "a-b."};
static const char *const gen_regexps[] = {"[0-9]+",     "a.*",     "[a-z]+", "ab|abc",
                                          "[0-9]{1,2}", "x\\.txt", "(?i)AB"};

struct gen_mspec {
    const char *spec;
    unsigned weight;
};
static const struct gen_mspec gen_methods[] = {
    {"GET", 30}, {"POST", 14},   {"*", 10},    {"GET,POST", 8},  {"PUT", 7},        {"DELETE", 7},
    {"HEAD", 6}, {"OPTIONS", 5}, {"PURGE", 5}, {"PUT,PATCH", 4}, {"POST,PURGE", 2}, {"GET,HEAD", 2},
};

static const char *pick(struct rtest_rng *rng, const char *const *v, size_t n)
{
    return v[rtest_below(rng, n)];
}

static void cat(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(dst);
    RTEST_REQUIRE(len + strlen(src) < cap, "generator buffer overflow");
    memcpy(dst + len, src, strlen(src) + 1);
}

void rtest_gen_route(struct rtest_rng *rng, int hostpct, struct rtest_groute *out)
{
    unsigned total = 0, w;
    size_t nseg;

    for (size_t i = 0; i < NELEM(gen_methods); i++)
        total += gen_methods[i].weight;
    w = (unsigned)rtest_below(rng, total);
    for (size_t i = 0; i < NELEM(gen_methods); i++) {
        if (w < gen_methods[i].weight) {
            snprintf(out->methods, sizeof(out->methods), "%s", gen_methods[i].spec);
            break;
        }
        w -= gen_methods[i].weight;
    }

    out->pattern[0] = '\0';
    if ((int)rtest_below(rng, 100) < hostpct)
        cat(out->pattern, sizeof(out->pattern), pick(rng, gen_hosts, NELEM(gen_hosts)));
    if (rtest_below(rng, 100) < 5) {
        cat(out->pattern, sizeof(out->pattern), "/");
        return;
    }
    nseg = 1 + rtest_below(rng, 4);
    for (size_t i = 0, catch_before = 0; i < nseg; i++) {
        int last = i + 1 == nseg;
        size_t r = rtest_below(rng, 100);
        char seg[64];
        const char *name = pick(rng, gen_pnames, NELEM(gen_pnames));
        if (r < 18 && (last || r < 8)) { /* a suffix catch-all, or an infix one */
            const char *pre = pick(rng, gen_catch_pre, NELEM(gen_catch_pre));
            if (catch_before && !*pre) /* fox refuses two catch-alls in a row */
                pre = "a";
            snprintf(seg, sizeof(seg), "/%s*{%s%zu}", pre, name, i);
        } else if (r < 55)
            snprintf(seg, sizeof(seg), "/%s", pick(rng, gen_static, NELEM(gen_static)));
        else if (r < 67)
            snprintf(seg, sizeof(seg), "/%s{%s%zu:%s}",
                     pick(rng, gen_param_pre, NELEM(gen_param_pre)), name, i,
                     pick(rng, gen_regexps, NELEM(gen_regexps)));
        else
            snprintf(seg, sizeof(seg), "/%s{%s%zu}", pick(rng, gen_param_pre, NELEM(gen_param_pre)),
                     name, i);
        cat(out->pattern, sizeof(out->pattern), seg);
        catch_before = strchr(seg, '*') != NULL;
        if (last && !strchr(seg, '*') && rtest_below(rng, 100) < 15)
            cat(out->pattern, sizeof(out->pattern), "/");
    }
}

/* The '}' closing the '{' at p[0]: a regexp's braces nest, '\\' escapes. */
static const char *close_brace(const char *p)
{
    size_t depth = 0;

    for (p++; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '{')
            depth++;
        else if (*p == '}' && depth-- == 0)
            break;
    }
    return p;
}

void rtest_rename_params(struct rtest_rng *rng, const char *pattern, char *out, size_t cap)
{
    static const char *const names[] = {"r", "s", "n", "x"};
    size_t k = 0, occ = 0;

    for (const char *p = pattern; *p; p++) {
        RTEST_REQUIRE(k + 16 < cap, "generator buffer overflow");
        out[k++] = *p;
        if (*p == '{') {
            const char *end = close_brace(p), *colon = p;
            k += (size_t)snprintf(out + k, cap - k, "%s%zu", pick(rng, names, NELEM(names)), occ++);
            while (colon < end && *colon != ':')
                colon++;
            /* the regexp, if any, is part of the shape: it stays */
            RTEST_REQUIRE(k + (size_t)(end - colon) + 2 < cap, "generator buffer overflow");
            memcpy(out + k, colon, (size_t)(end - colon));
            k += (size_t)(end - colon);
            out[k++] = '}';
            p = end;
        }
    }
    out[k] = '\0';
}

static const char *const gen_req_methods[] = {
    "GET",     "GET",     "GET",   "HEAD",  "HEAD",  "POST",  "POST", "PUT", "DELETE",
    "OPTIONS", "OPTIONS", "PATCH", "PURGE", "PURGE", "TRACE", "FOO",  "get",
};
static const char *const gen_req_hosts[] = {
    "example.com",
    "api.example.com",
    "a.b.api.example.com",
    "a..example.com",
    "x.org",
    "API.Example.Com",
    "www.example.com",
    "foo.example.com",
    "api-eu.example.com",
    "API-EU.example.com",
    "api-.example.com",
    "x.y.example.com",
    "other.org",
    "foo.org",
    "example.com.",
    "api.example.com:8080",
    "api-eu.example.com.:443",
    "[::1]:8080",
    "unknown.net",
    "Other.ORG",
    "org",
    "example.com..",
    ".",
    ":80",
    "EXAMPLE.COM:8080",
};
static const char *const gen_param_vals[] = {
    "a",   "b",   "ab",       "1", "users", "x.txt", "u:1", "zz", "abc", "v1", "f=a",
    "a.b", "%2F", "\xc3\xa9", "~", "*",     "{x}",   "a b", "12", "123", "AB", "ab1",
};
static const char *const gen_catch_vals[] = {"",      "",  "a",      "a/b",  "b/",
                                             "x.txt", "/", "ab/u:1", "a//b", "users/1"};
static const char *const gen_host_vals[] = {"api", "eu", "foo", "x", "www", "other", "Api"};
static const char *const gen_label_vals[] = {"a", "a.b", "X.y.z", "api", "a..b", "api.eu"};
static const char *const gen_req_segs[] = {"a",   "b",  "ab",  "abc", "users", "u",   "v1", "x.txt",
                                           "u:1", "f=", "f=a", "ax",  "",      "abx", "a.b"};

static void render_host(struct rtest_rng *rng, const char *h, size_t len, char *out, size_t cap)
{
    size_t k = 0;

    for (size_t i = 0; i < len; i++) {
        if (h[i] == '*' || h[i] == '{') {
            const char *v = h[i] == '*' ? pick(rng, gen_label_vals, NELEM(gen_label_vals))
                                        : pick(rng, gen_host_vals, NELEM(gen_host_vals));
            while (i < len && h[i] != '}')
                i++;
            RTEST_REQUIRE(k + strlen(v) < cap, "generator buffer overflow");
            memcpy(out + k, v, strlen(v));
            k += strlen(v);
        } else {
            char c = h[i];
            if (c >= 'a' && c <= 'z' && rtest_below(rng, 5) == 0)
                c = (char)(c - 'a' + 'A');
            RTEST_REQUIRE(k + 1 < cap, "generator buffer overflow");
            out[k++] = c;
        }
    }
    out[k] = '\0';
    switch (rtest_below(rng, 8)) {
    case 0:
        cat(out, cap, ":8080");
        break;
    case 1:
        cat(out, cap, ".");
        break;
    default:
        break;
    }
}

static void render_path(struct rtest_rng *rng, const char *p, char *out, size_t cap)
{
    out[0] = '\0';
    for (; *p; p++) {
        char one[2] = {*p, '\0'};
        if (*p == '*' && p[1] == '{') {
            cat(out, cap, pick(rng, gen_catch_vals, NELEM(gen_catch_vals)));
            while (*p && *p != '}')
                p++;
        } else if (*p == '{') {
            cat(out, cap, pick(rng, gen_param_vals, NELEM(gen_param_vals)));
            p = close_brace(p);
        } else {
            cat(out, cap, one);
        }
    }
}

static void mutate_path(struct rtest_rng *rng, char *path, size_t cap)
{
    size_t len = strlen(path);

    if (rtest_below(rng, 100) < 8 && len > 1) { /* truncate */
        len = 1 + rtest_below(rng, len - 1);
        path[len] = '\0';
    }
    if (rtest_below(rng, 100) < 5) { /* drop the last segment */
        char *s = strrchr(path, '/');
        if (s && s != path)
            *s = '\0';
    }
    if (rtest_below(rng, 100) < 5) { /* append a segment */
        cat(path, cap, "/");
        cat(path, cap, pick(rng, gen_req_segs, NELEM(gen_req_segs)));
    }
    if (rtest_below(rng, 100) < 5) { /* double a slash */
        size_t n = 0, want;
        len = strlen(path);
        for (size_t i = 0; i < len; i++)
            n += path[i] == '/';
        want = rtest_below(rng, n);
        for (size_t i = 0; i < len; i++) {
            if (path[i] == '/' && want-- == 0 && len + 1 < cap) {
                memmove(path + i + 1, path + i, len - i + 1);
                break;
            }
        }
    }
    if (rtest_below(rng, 100) < 3) { /* change a byte */
        static const char repl[] = "ab/1.:";
        len = strlen(path);
        if (len > 1)
            path[1 + rtest_below(rng, len - 1)] = repl[rtest_below(rng, sizeof(repl) - 1)];
    }
    if (rtest_below(rng, 100) < 15) { /* toggle the trailing slash */
        len = strlen(path);
        if (len > 1 && path[len - 1] == '/')
            path[len - 1] = '\0';
        else
            cat(path, cap, "/");
    }
}

void rtest_gen_request(struct rtest_rng *rng, const struct rtest_groute *routes, size_t n,
                       struct rtest_greq *out)
{
    size_t r = rtest_below(rng, 100);

    out->method = pick(rng, gen_req_methods, NELEM(gen_req_methods));
    out->has_host = 0;
    out->host[0] = '\0';
    if (r >= 35) {
        out->has_host = 1;
        if (r >= 40)
            snprintf(out->host, sizeof(out->host), "%s",
                     pick(rng, gen_req_hosts, NELEM(gen_req_hosts)));
    }

    if (n > 0 && rtest_below(rng, 100) < 75) {
        const struct rtest_groute *g = &routes[rtest_below(rng, n)];
        const char *slash = strchr(g->pattern, '/');
        if (slash != g->pattern && rtest_below(rng, 100) < 70) {
            out->has_host = 1;
            render_host(rng, g->pattern, (size_t)(slash - g->pattern), out->host,
                        sizeof(out->host));
        }
        render_path(rng, slash, out->path, sizeof(out->path));
    } else {
        size_t k = rtest_below(rng, 5);
        out->path[0] = '\0';
        for (size_t i = 0; i < k; i++) {
            cat(out->path, sizeof(out->path), "/");
            cat(out->path, sizeof(out->path), pick(rng, gen_req_segs, NELEM(gen_req_segs)));
        }
        if (k == 0 || rtest_below(rng, 10) == 0)
            cat(out->path, sizeof(out->path), "/");
    }
    mutate_path(rng, out->path, sizeof(out->path));
    if (out->path[0] != '/') {
        memmove(out->path + 1, out->path, strlen(out->path) + 1);
        out->path[0] = '/';
    }
}

/* ---- tree versus reference ---- */

uint64_t rtest_norm_mask(const rt_table *t, uint64_t mask)
{
    (void)t;
    if (mask & RT_M_GET)
        mask |= RT_M_HEAD;
    return mask;
}

static const char *status_name(int st)
{
    switch (st) {
    case RT_HIT:
        return "200 HIT";
    case RT_OPTIONS_AUTO:
        return "204 OPTIONS_AUTO";
    case RT_REDIRECT_301:
        return "301 REDIRECT";
    case RT_REDIRECT_308:
        return "308 REDIRECT";
    case RT_NOT_FOUND:
        return "404 NOT_FOUND";
    case RT_NOT_ALLOWED:
        return "405 NOT_ALLOWED";
    default:
        return "?";
    }
}

static void describe(char *why, size_t cap, const rt_table *t, const char *what,
                     const struct rtest_res *tr, const struct ref_result *rr)
{
    char tallow[256] = "", rallow[256] = "";
    char tparams[512] = "", rparams[512] = "";
    size_t k;

    rt_methods_format(t, tr->m.allow, tallow, sizeof(tallow));
    for (size_t i = 0; i < rr->nallow; i++) {
        k = strlen(rallow);
        snprintf(rallow + k, sizeof(rallow) - k, "%s%s", i ? " " : "", rr->allow[i]);
    }
    for (size_t i = 0; i < tr->m.nparams && i < RTEST_MAX_PARAMS; i++) {
        k = strlen(tparams);
        snprintf(tparams + k, sizeof(tparams) - k, " %s=\"%.*s\"",
                 tr->params[i].name ? tr->params[i].name : "(null)", (int)tr->params[i].len,
                 tr->params[i].value ? tr->params[i].value : "");
    }
    for (size_t i = 0; i < rr->nparams; i++) {
        k = strlen(rparams);
        snprintf(rparams + k, sizeof(rparams) - k, " %s=\"%.*s\"", rr->params[i].name,
                 (int)rr->params[i].len, rr->params[i].value);
    }
    snprintf(why, cap,
             "%s\n  expected (reference): %s route=%s slash=%d params:%s allow=[%s]\n"
             "  got (tree):           %s route=%s slash=%d params:%s allow=[%s]",
             what, status_name(rr->status), rr->route ? rr->route->pattern : "-", rr->slash,
             rparams, rallow, status_name((int)tr->m.status),
             tr->m.route ? rt_route_pattern(tr->m.route) : "-", tr->m.slash, tparams, tallow);
}

int rtest_agree(const rt_table *t, const struct ref_table *ref, rtest_idfn idfn, const char *method,
                const char *host, size_t hlen, const char *path, size_t plen, char *why, size_t cap)
{
    const struct rt_options *o = rt_table_options(t);
    struct rtest_res tr;
    struct ref_result *rr = malloc(sizeof(*rr));
    size_t pcap = rt_table_max_params(t);
    const char *what = NULL;
    enum rt_status st;
    intptr_t tid;

    RTEST_REQUIRE(rr != NULL, "out of memory");
    RTEST_REQUIRE(pcap <= RTEST_MAX_PARAMS, "rt_table_max_params %zu > %d", pcap, RTEST_MAX_PARAMS);
    memset(&tr, 0, sizeof(tr));
    st = rt_lookup(t, method, strlen(method), host, hlen, path, plen, tr.params, pcap, &tr.m);
    ref_lookup(ref, (int)o->trailing_slash, o->auto_options, method, strlen(method), host, hlen,
               path, plen, rr);
    tid = tr.m.route
              ? (idfn ? idfn(rt_route_udata(tr.m.route)) : (intptr_t)rt_route_udata(tr.m.route))
              : 0;

    if (st != tr.m.status)
        what = "return value differs from m->status";
    else if ((int)st != rr->status)
        what = "status differs";
    else if (st == RT_HIT || st == RT_REDIRECT_301 || st == RT_REDIRECT_308) {
        if (!tr.m.route || tid != rr->id)
            what = "route differs";
        else if (tr.m.slash != rr->slash)
            what = "slash differs";
    }
    if (!what && st == RT_HIT) {
        if (tr.m.nparams != rr->nparams)
            what = "nparams differs";
        for (size_t i = 0; !what && i < rr->nparams; i++) {
            const struct rt_param *p = &tr.params[i];
            const struct ref_param *q = &rr->params[i];
            if (!p->name || strcmp(p->name, q->name) != 0)
                what = "param name differs";
            else if (p->len != q->len || (p->len && memcmp(p->value, q->value, p->len) != 0))
                what = "param value differs";
            else if (tr.m.slash == 0 && p->len > 0) {
                /* values are slices of H or P */
                int in_path = p->value >= path && p->value + p->len <= path + plen;
                int in_host = host && p->value >= host && p->value + p->len <= host + hlen;
                if (!in_path && !in_host)
                    what = "param value is not a slice of the host or path";
            }
        }
    }
    if (!what && (st == RT_NOT_ALLOWED || st == RT_OPTIONS_AUTO)) {
        uint64_t want = 0;
        for (size_t i = 0; i < rr->nallow; i++) {
            uint64_t bit = rt_method_bit(t, rr->allow[i], strlen(rr->allow[i]));
            if (bit == 0)
                what = "rt_method_bit is 0 for a method a route names";
            want |= bit;
        }
        if (rr->allow_any)
            want = RT_ANY_METHOD;
        if (!what && rtest_norm_mask(t, want) != rtest_norm_mask(t, tr.m.allow))
            what = "allow differs";
    }
    if (what) {
        char head[1024];
        snprintf(head, sizeof(head),
                 "%s for %s host=%s%.*s%s path=\"%.*s\" (slash mode %d, auto_options %d)", what,
                 method, host ? "\"" : "", host ? (int)hlen : 4, host ? host : "NULL",
                 host ? "\"" : "", (int)plen, path, (int)o->trailing_slash, o->auto_options);
        describe(why, cap, t, head, &tr, rr);
    }
    free(rr);
    return what == NULL;
}
