/*
 * router_bench.c - micro-benchmarks of the routing tree (router/router.h).
 *
 * Usage: router_bench [-q] [ROUTES_DIR]
 *   ROUTES_DIR  holds github.txt, github-requests.txt and static.txt
 *               (default: SY_ROUTES_DIR, set by CMake to tests/data/routes)
 *   -q          quick: 3 runs of ~10 ms each, for checking the harness only
 *
 * Prints one Markdown report on stdout: a table with one row per scenario and
 * the derived ratios checked against the router's targets. Errors go to
 * stderr and end the program with status 1.
 *
 * Method. Every scenario is a function that performs <iters> operations and
 * returns the nanoseconds (CLOCK_MONOTONIC) its timed region took. Each one is
 * first calibrated so that one run lasts about 75 ms, then all scenarios are
 * run round-robin ten times, so that slow drift of the machine spreads over
 * every row instead of landing on one. A row reports the median ns/op of the
 * ten runs and the min and max relative to that median. Heap allocations are
 * counted by the malloc-family wrappers of alloc_count.c, switched on around
 * the timed regions only. Two rows exist to read the others by:
 *   - "static (control)": the static hit again, on a second table built from
 *     the same routes. Its true difference from "static hit" is zero; what it
 *     shows is this run's noise.
 *   - "ruler": one jansson json_dumps() of a five-field object (and its free),
 *     the cheapest useful thing a handler does after routing.
 * Every lookup scenario is checked once (status, route, params) before it is
 * timed; a wrong answer is flagged in the row's note.
 */
#define _POSIX_C_SOURCE 200809L

#include "loadtest/router_bench/alloc_count.h"
#include "router/router.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SY_ROUTES_DIR
#define SY_ROUTES_DIR "tests/data/routes"
#endif
#ifndef RB_BUILD_TYPE
#define RB_BUILD_TYPE "unknown"
#endif

#define RB_MAX_RUNS 10
#define RB_MAX_SCN 64
#define RB_MAX_PARAMS 64 /* params array given to every lookup */
#define RB_NOTE 384

/* Keeps the compiler from dropping or merging lookups whose results look
 * unused: the object escapes into an opaque asm statement. */
#define RB_ESCAPE(p) __asm__ volatile("" : : "g"(p) : "memory")

static volatile uint64_t rb_sink;

/* Run shape, changed by -q. */
static int rb_runs = RB_MAX_RUNS;
static double rb_target_ns = 75e6; /* one timed run */
static double rb_calib_ns = 10e6;  /* calibrate until a trial run lasts this long */

/* ------------------------------------------------------------------------ */
/* helpers */

__attribute__((format(printf, 1, 2), noreturn)) static void rb_die(const char *fmt, ...)
{
    va_list ap;

    fputs("router_bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *rb_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL)
        rb_die("out of memory (%zu bytes)", n);
    return p;
}

static void *rb_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL)
        rb_die("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

static char *rb_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = rb_xmalloc(n);

    memcpy(p, s, n);
    return p;
}

static uint64_t rb_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* route and request lists: "METHOD TEXT" lines */

struct rb_line {
    char *method;
    char *text; /* a pattern or a request path */
};

struct rb_list {
    struct rb_line *v;
    size_t n, cap;
};

/* Appends copies of <method> and <text>. */
static void rb_list_push(struct rb_list *l, const char *method, const char *text)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct rb_line *v = realloc(l->v, cap * sizeof(*v));

        if (v == NULL)
            rb_die("out of memory growing a route list");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].method = rb_xstrdup(method);
    l->v[l->n].text = rb_xstrdup(text);
    l->n++;
}

static void rb_list_free(struct rb_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].method);
        free(l->v[i].text);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* Reads <dir>/<file>: one "METHOD TEXT" per line, '#' lines and blank lines
 * skipped. */
static void rb_list_load(struct rb_list *l, const char *dir, const char *file)
{
    char path[4096], line[8192];
    FILE *f;
    unsigned lineno = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    f = fopen(path, "r");
    if (f == NULL)
        rb_die("cannot open %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        char *sp, *end;

        lineno++;
        end = line + strcspn(line, "\r\n");
        *end = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        sp = strchr(line, ' ');
        if (sp == NULL || sp[1] == '\0')
            rb_die("%s:%u: expected \"METHOD TEXT\"", path, lineno);
        *sp = '\0';
        rb_list_push(l, line, sp + 1);
    }
    fclose(f);
}

/* Every line of <src>, its text prefixed with <prefix>, appended to <dst>. */
static void rb_list_push_prefixed(struct rb_list *dst, const struct rb_list *src,
                                  const char *prefix)
{
    char buf[8192];

    for (size_t i = 0; i < src->n; i++) {
        snprintf(buf, sizeof(buf), "%s%s", prefix, src->v[i].text);
        rb_list_push(dst, src->v[i].method, buf);
    }
}

/* ------------------------------------------------------------------------ */
/* tables */

/* Inserts <l>'s routes into <tx>, one method each; any error is fatal. */
static void rb_insert_all(rt_txn *tx, const struct rb_list *l)
{
    struct rt_error err;

    for (size_t i = 0; i < l->n; i++) {
        const char *methods[1] = {l->v[i].method};

        if (rt_txn_insert(tx, methods, 1, l->v[i].text, NULL, NULL, &err) != 0)
            rb_die("insert %s %s: %s", l->v[i].method, l->v[i].text, err.msg);
    }
}

/* A table holding <l>'s routes, with <opts> (NULL: defaults). */
static rt_table *rb_build(const struct rt_options *opts, const struct rb_list *l)
{
    rt_table *empty, *t;
    rt_txn *tx;

    empty = rt_table_new(opts, NULL);
    if (empty == NULL)
        rb_die("rt_table_new failed");
    tx = rt_txn_begin(empty);
    if (tx == NULL)
        rb_die("rt_txn_begin failed");
    rb_insert_all(tx, l);
    t = rt_txn_commit(tx);
    if (t == NULL)
        rb_die("rt_txn_commit failed");
    rt_table_free(empty);
    if (rt_table_count(t) != l->n)
        rb_die("table holds %zu routes after inserting %zu", rt_table_count(t), l->n);
    if (rt_table_max_params(t) > RB_MAX_PARAMS)
        rb_die("table needs %zu params, the benchmark gives %d", rt_table_max_params(t),
               RB_MAX_PARAMS);
    return t;
}

/* ------------------------------------------------------------------------ */
/* scenarios */

typedef uint64_t (*rb_run_fn)(void *ctx, uint64_t iters);

struct rb_scn {
    char name[64];
    rb_run_fn run;
    void *ctx;
    void (*ctx_free)(void *ctx);
    size_t per_op; /* lookups per op; 0 when the op is not lookups */
    int is_lookup; /* counts for the "0 allocs per lookup" target */
    int wrong;     /* its check failed */
    char note[RB_NOTE];
    uint64_t iters; /* per run, from calibration */
    double ns[RB_MAX_RUNS];
    uint64_t allocs, ops;
    double med, lo_pct, hi_pct;
};

static struct rb_scn rb_scns[RB_MAX_SCN];
static size_t rb_nscn;

static struct rb_scn *rb_scn_add(const char *name, rb_run_fn run, void *ctx,
                                 void (*ctx_free)(void *))
{
    struct rb_scn *s;

    if (rb_nscn == RB_MAX_SCN)
        rb_die("too many scenarios");
    s = &rb_scns[rb_nscn++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->run = run;
    s->ctx = ctx;
    s->ctx_free = ctx_free;
    return s;
}

/* Appends "; <text>" (or <text> first) to a scenario's note. */
__attribute__((format(printf, 2, 3))) static void rb_note(struct rb_scn *s, const char *fmt, ...)
{
    size_t len = strlen(s->note);
    va_list ap;

    if (len > 0 && len + 2 < sizeof(s->note)) {
        memcpy(s->note + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(s->note + len, sizeof(s->note) - len, fmt, ap);
    va_end(ap);
}

/* ---- lookups ---- */

struct rb_req {
    const char *method;
    size_t mlen;
    const char *path;
    size_t plen;
};

/* A lookup scenario: <batch> lookups per op, taken in order from <req>
 * (<nreq> entries, a multiple of <batch>), wrapping around. */
struct rb_lk {
    const rt_table *t;
    rt_ctx *ctx; /* as a gateway worker holds one: regexps match without allocating */
    struct rb_req *req;
    char *arena; /* request paths owned by the scenario, or NULL */
    size_t nreq, batch, pos;
    struct rt_param params[RB_MAX_PARAMS];
};

static struct rb_lk *rb_lk_new(const rt_table *t, size_t nreq, size_t batch)
{
    struct rb_lk *lk = rb_xcalloc(1, sizeof(*lk));

    lk->t = t;
    if (!(lk->ctx = rt_ctx_new()))
        rb_die("out of memory making a lookup context");
    lk->req = rb_xcalloc(nreq, sizeof(*lk->req));
    lk->nreq = nreq;
    lk->batch = batch;
    return lk;
}

static void rb_lk_free(void *ctx)
{
    struct rb_lk *lk = ctx;

    free(lk->arena);
    free(lk->req);
    rt_ctx_free(lk->ctx);
    free(lk);
}

static void rb_lk_set(struct rb_lk *lk, size_t i, const char *method, const char *path)
{
    lk->req[i].method = method;
    lk->req[i].mlen = strlen(method);
    lk->req[i].path = path;
    lk->req[i].plen = strlen(path);
}

static uint64_t rb_lk_run(void *ctx, uint64_t iters)
{
    struct rb_lk *lk = ctx;
    struct rt_match m;
    size_t pos = lk->pos;
    uint64_t acc = 0, t0, t1;

    ac_start();
    t0 = rb_now();
    for (uint64_t i = 0; i < iters; i++) {
        const struct rb_req *r = lk->req + pos;

        for (size_t j = 0; j < lk->batch; j++) {
            acc += (uint64_t)rt_lookup_ctx(lk->t, lk->ctx, r[j].method, r[j].mlen, NULL, 0,
                                           r[j].path, r[j].plen, lk->params, RB_MAX_PARAMS, &m);
            RB_ESCAPE(&m);
        }
        pos += lk->batch;
        if (pos >= lk->nreq)
            pos = 0;
    }
    t1 = rb_now();
    ac_stop();
    lk->pos = pos;
    rb_sink += acc;
    return t1 - t0;
}

/* What a lookup must answer. NULL/negative fields are not checked. */
struct rb_want {
    enum rt_status status;
    const char *const *patterns; /* per request: the matched route's pattern */
    int nparams;                 /* -1: any */
    int slash;
    uint64_t allow;            /* bits that must be in m.allow */
    const char *const *values; /* single-request rows: the param values */
};

/* Runs every request of <lk> once and compares with <w>; marks <s> wrong and
 * notes the first mismatch. Returns the number of mismatches. */
static size_t rb_lk_check(struct rb_scn *s, struct rb_lk *lk, const struct rb_want *w)
{
    size_t bad = 0;
    char first[200] = "";

    for (size_t i = 0; i < lk->nreq; i++) {
        const struct rb_req *r = &lk->req[i];
        struct rt_match m;
        const char *got;
        int ok;

        memset(&m, 0, sizeof(m));
        rt_lookup_ctx(lk->t, lk->ctx, r->method, r->mlen, NULL, 0, r->path, r->plen, lk->params,
                      RB_MAX_PARAMS, &m);
        got = (m.route != NULL) ? rt_route_pattern(m.route) : "-";
        ok = m.status == w->status;
        if (ok && w->patterns != NULL)
            ok = m.route != NULL && strcmp(got, w->patterns[i]) == 0;
        if (ok && w->nparams >= 0)
            ok = m.nparams == (size_t)w->nparams;
        if (ok && (w->status == RT_REDIRECT_301 || w->status == RT_REDIRECT_308))
            ok = m.slash == w->slash;
        if (ok && w->allow != 0)
            ok = (m.allow & w->allow) == w->allow;
        for (size_t k = 0; ok && w->values != NULL && k < m.nparams; k++)
            ok = lk->params[k].len == strlen(w->values[k]) &&
                 memcmp(lk->params[k].value, w->values[k], lk->params[k].len) == 0;
        if (!ok) {
            if (bad == 0)
                snprintf(first, sizeof(first), "%s %s -> %d %s (nparams %zu, slash %d)", r->method,
                         r->path, (int)m.status, got, m.nparams, m.slash);
            bad++;
        }
    }
    if (bad > 0) {
        s->wrong = 1;
        rb_note(s, "**WRONG** %zu of %zu lookups, first: %s", bad, lk->nreq, first);
    }
    return bad;
}

/* A one-request lookup scenario on <t>, checked against <w>. */
static struct rb_scn *rb_add_one(const char *name, const rt_table *t, const char *method,
                                 const char *path, const struct rb_want *w)
{
    struct rb_lk *lk = rb_lk_new(t, 1, 1);
    struct rb_scn *s;

    rb_lk_set(lk, 0, method, path);
    s = rb_scn_add(name, rb_lk_run, lk, rb_lk_free);
    s->per_op = 1;
    s->is_lookup = 1;
    rb_note(s, "`%s %s`", method, path);
    rb_lk_check(s, lk, w);
    return s;
}

/* ---- building 100k routes ---- */

struct rb_buildctx {
    rt_table *empty;
    const struct rb_list *routes;
};

static void rb_buildctx_free(void *ctx)
{
    struct rb_buildctx *b = ctx;

    rt_table_free(b->empty);
    free(b);
}

static uint64_t rb_build_run(void *ctx, uint64_t iters)
{
    struct rb_buildctx *b = ctx;
    uint64_t total = 0;

    for (uint64_t i = 0; i < iters; i++) {
        uint64_t t0, t1;
        rt_table *t;
        rt_txn *tx;

        ac_start();
        t0 = rb_now();
        tx = rt_txn_begin(b->empty);
        if (tx == NULL)
            rb_die("rt_txn_begin failed");
        rb_insert_all(tx, b->routes);
        t = rt_txn_commit(tx);
        t1 = rb_now();
        ac_stop();
        if (t == NULL)
            rb_die("rt_txn_commit failed");
        if (rt_table_count(t) != b->routes->n)
            rb_die("built %zu routes of %zu", rt_table_count(t), b->routes->n);
        rt_table_free(t);
        total += t1 - t0;
    }
    return total;
}

/* ---- one insert / one delete on a 100k table ---- */

/* The live version <cur> and one route that the insert and delete scenarios
 * take out and put back; <present> says which state <cur> is in. */
struct rb_edit {
    rt_table *cur;
    const char *method;
    const char *pattern;
    int present;
};

static void rb_edit_free(void *ctx)
{
    struct rb_edit *e = ctx;

    rt_table_free(e->cur);
    free(e);
}

/* The operation being measured: begin, one insert or delete, commit, and
 * retiring the old version. */
static void rb_edit_apply(struct rb_edit *e, int insert)
{
    const char *methods[1] = {e->method};
    struct rt_error err;
    rt_table *next;
    rt_txn *tx;
    int rc;

    tx = rt_txn_begin(e->cur);
    if (tx == NULL)
        rb_die("rt_txn_begin failed");
    if (insert)
        rc = rt_txn_insert(tx, methods, 1, e->pattern, NULL, NULL, &err);
    else
        rc = rt_txn_delete(tx, methods, 1, e->pattern, &err);
    if (rc != 0)
        rb_die("%s %s %s: %s", insert ? "insert" : "delete", e->method, e->pattern, err.msg);
    next = rt_txn_commit(tx);
    if (next == NULL)
        rb_die("rt_txn_commit failed");
    rt_table_free(e->cur);
    e->cur = next;
    e->present = insert;
}

/* Times <iters> operations of one kind; the opposite operation that resets
 * the state in between runs untimed and uncounted. */
static uint64_t rb_edit_run(struct rb_edit *e, uint64_t iters, int insert)
{
    uint64_t total = 0;

    for (uint64_t i = 0; i < iters; i++) {
        uint64_t t0, t1;

        if (e->present == insert)
            rb_edit_apply(e, !insert);
        ac_start();
        t0 = rb_now();
        rb_edit_apply(e, insert);
        t1 = rb_now();
        ac_stop();
        total += t1 - t0;
    }
    return total;
}

static uint64_t rb_insert_run(void *ctx, uint64_t iters)
{
    return rb_edit_run(ctx, iters, 1);
}

static uint64_t rb_delete_run(void *ctx, uint64_t iters)
{
    return rb_edit_run(ctx, iters, 0);
}

/* ---- the ruler: json_dumps of a five-field object ---- */

static uint64_t rb_ruler_run(void *ctx, uint64_t iters)
{
    const json_t *obj = ctx;
    uint64_t acc = 0, t0, t1;

    ac_start();
    t0 = rb_now();
    for (uint64_t i = 0; i < iters; i++) {
        char *s = json_dumps(obj, JSON_COMPACT);

        if (s == NULL)
            rb_die("json_dumps failed");
        acc += (unsigned char)s[1];
        free(s);
    }
    t1 = rb_now();
    ac_stop();
    rb_sink += acc;
    return t1 - t0;
}

static void rb_json_free(void *ctx)
{
    json_decref(ctx);
}

/* ------------------------------------------------------------------------ */
/* measuring */

/* Finds how many operations make one run last rb_target_ns. */
static void rb_calibrate(struct rb_scn *s)
{
    uint64_t iters = 1, ns;

    for (;;) {
        double f;

        ns = s->run(s->ctx, iters);
        if ((double)ns >= rb_calib_ns || iters >= (UINT64_C(1) << 40))
            break;
        f = ns > 0 ? rb_calib_ns * 1.2 / (double)ns : 100.0;
        if (f > 100.0)
            f = 100.0;
        if (f < 2.0)
            f = 2.0;
        iters = (uint64_t)((double)iters * f);
    }
    s->iters = (uint64_t)(rb_target_ns / ((double)ns / (double)iters) + 0.5);
    if (s->iters == 0)
        s->iters = 1;
}

static int rb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void rb_summarize(struct rb_scn *s)
{
    double v[RB_MAX_RUNS];
    int n = rb_runs;

    memcpy(v, s->ns, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof(double), rb_cmp_double);
    s->med = (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    s->lo_pct = s->med > 0 ? (v[0] - s->med) / s->med * 100.0 : 0.0;
    s->hi_pct = s->med > 0 ? (v[n - 1] - s->med) / s->med * 100.0 : 0.0;
}

/* Calibrates every scenario, then runs all of them round-robin. */
static void rb_measure(void)
{
    FILE *tty = isatty(STDERR_FILENO) ? stderr : NULL;

    for (size_t i = 0; i < rb_nscn; i++) {
        if (tty)
            fprintf(tty, "router_bench: calibrating %-30s\r", rb_scns[i].name);
        rb_calibrate(&rb_scns[i]);
    }
    for (int r = 0; r < rb_runs; r++) {
        if (tty)
            fprintf(tty, "router_bench: run %d/%d%30s\r", r + 1, rb_runs, "");
        for (size_t i = 0; i < rb_nscn; i++) {
            struct rb_scn *s = &rb_scns[i];
            uint64_t a0 = ac_allocs();
            uint64_t ns = s->run(s->ctx, s->iters);

            s->allocs += ac_allocs() - a0;
            s->ops += s->iters;
            s->ns[r] = (double)ns / (double)s->iters;
        }
    }
    if (tty)
        fprintf(tty, "%60s\r", "");
    for (size_t i = 0; i < rb_nscn; i++)
        rb_summarize(&rb_scns[i]);
}

/* ------------------------------------------------------------------------ */
/* report */

static double rb_allocs_per_op(const struct rb_scn *s)
{
    return s->ops ? (double)s->allocs / (double)s->ops : 0.0;
}

static double rb_ns_per_lookup(const struct rb_scn *s)
{
    return s->per_op ? s->med / (double)s->per_op : s->med;
}

static const char *rb_fmt_ns(double ns, char *buf, size_t cap)
{
    if (ns < 100.0)
        snprintf(buf, cap, "%.2f", ns);
    else if (ns < 10000.0)
        snprintf(buf, cap, "%.1f", ns);
    else
        snprintf(buf, cap, "%.0f", ns);
    return buf;
}

static const char *rb_fmt_allocs(const struct rb_scn *s, char *buf, size_t cap)
{
    double a = rb_allocs_per_op(s);

    if (!ac_enabled())
        snprintf(buf, cap, "n/a");
    else if (s->allocs == 0)
        snprintf(buf, cap, "0");
    else if (a >= 100.0)
        snprintf(buf, cap, "%.0f", a);
    else
        snprintf(buf, cap, "%.2f", a);
    return buf;
}

static void rb_print_table(const struct rb_scn *ref)
{
    printf("| scenario | ns/op | ± | allocs/op | ratio vs static hit | note |\n");
    printf("|---|---:|---|---:|---:|---|\n");
    for (size_t i = 0; i < rb_nscn; i++) {
        const struct rb_scn *s = &rb_scns[i];
        char ns[32], al[32], ratio[32];

        if (s->per_op > 0 && ref->med > 0)
            snprintf(ratio, sizeof(ratio), "%.2fx%s", rb_ns_per_lookup(s) / ref->med,
                     s->per_op > 1 ? " /lookup" : "");
        else
            snprintf(ratio, sizeof(ratio), "—");
        printf("| %s | %s | %+.1f%% / %+.1f%% | %s | %s | %s |\n", s->name,
               rb_fmt_ns(s->med, ns, sizeof(ns)), s->lo_pct, s->hi_pct,
               rb_fmt_allocs(s, al, sizeof(al)), ratio, s->note);
    }
}

/* "PASS", "MISS", or with "(within noise)" when <value> is closer to <limit>
 * than the control row's gap. */
static const char *rb_verdict(double value, double limit, double noise, char *buf, size_t cap)
{
    int pass = value <= limit;
    double margin = limit > 0 ? (value - limit) / limit : 0.0;

    if (margin < 0)
        margin = -margin;
    snprintf(buf, cap, "%s%s", pass ? "PASS" : "**MISS**",
             margin <= noise ? " (within the noise)" : "");
    return buf;
}

static void rb_cpu_model(char *buf, size_t cap)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");

    snprintf(buf, cap, "unknown");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');

            if (c != NULL) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, cap, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

/* ------------------------------------------------------------------------ */
/* the benchmark's inputs, tables and named rows */

#define RB_NSWEEP 4

/* One size of the route-count sweep: <copies> copies of the GitHub table,
 * copy c under the prefix "/c<c>", with the matching requests. */
struct rb_sweep {
    size_t copies;
    struct rb_list routes;   /* copies x 203 patterns */
    struct rb_list requests; /* copies x 203 requests, same order */
    rt_table *t;
};

struct rb {
    const char *dir;
    struct rb_list gh, ghreq, stat; /* github.txt, github-requests.txt, static.txt */
    struct rb_list extra;           /* patterns and paths made up here */
    struct rb_list paths;           /* distinct GitHub paths */
    struct rb_list mroutes[4];      /* method sweep routes */
    struct rb_sweep sweep[RB_NSWEEP];
    rt_table *gh_t, *gh_ctl, *gh_redir, *stat_t, *meth_t[4];
    rt_table *par_t[3];
    rt_table *rx_t, *infix_t, *ghrx_t; /* issue 14's patterns */
    struct rb_list ghrx;               /* github.txt, every {param} a {param:[^/]+} */
    struct rt_stats st100k;
    double load[2]; /* load average before and after measuring */
    /* rows the report reads */
    struct rb_scn *s_static, *s_ctl, *s_3p, *s_miss, *s_missdeep, *s_405, *s_405deep;
    struct rb_scn *s_ghall, *s_build, *s_ins, *s_del, *s_ruler;
    struct rb_scn *s_hot[RB_NSWEEP], *s_spread[RB_NSWEEP];
};

static const char *const rb_meth4[4] = {"GET", "POST", "PUT", "DELETE"};
static const size_t rb_sweep_copies[RB_NSWEEP] = {1, 10, 99, 493};
static const char *const rb_sweep_label[RB_NSWEEP] = {"200", "2k", "20k", "100k"};

/* A string that lives as long as <b>: made-up patterns and request paths. */
static const char *rb_keep(struct rb *b, const char *text)
{
    rb_list_push(&b->extra, "-", text);
    return b->extra.v[b->extra.n - 1].text;
}

static void rb_sweep_init(struct rb_sweep *w, size_t copies, const struct rb_list *gh,
                          const struct rb_list *ghreq)
{
    char prefix[32];

    memset(w, 0, sizeof(*w));
    w->copies = copies;
    for (size_t c = 0; c < copies; c++) {
        snprintf(prefix, sizeof(prefix), "/c%zu", c);
        rb_list_push_prefixed(&w->routes, gh, prefix);
        rb_list_push_prefixed(&w->requests, ghreq, prefix);
    }
    w->t = rb_build(NULL, &w->routes);
}

static void rb_load(struct rb *b)
{
    rb_list_load(&b->gh, b->dir, "github.txt");
    rb_list_load(&b->ghreq, b->dir, "github-requests.txt");
    rb_list_load(&b->stat, b->dir, "static.txt");
    if (b->gh.n != b->ghreq.n)
        rb_die("github.txt has %zu routes but github-requests.txt %zu requests", b->gh.n,
               b->ghreq.n);
    for (size_t i = 0; i < b->gh.n; i++)
        if (strcmp(b->gh.v[i].method, b->ghreq.v[i].method) != 0)
            rb_die("github-requests.txt request %zu is %s, its route %s", i + 1,
                   b->ghreq.v[i].method, b->gh.v[i].method);

    b->gh_t = rb_build(NULL, &b->gh);
    b->gh_ctl = rb_build(NULL, &b->gh);
    {
        struct rt_options redir = {RT_TS_REDIRECT, 0};

        b->gh_redir = rb_build(&redir, &b->gh);
    }
    b->stat_t = rb_build(NULL, &b->stat);

    /* Method sweep: every distinct GitHub path under the first m+1 methods. */
    for (size_t i = 0; i < b->gh.n; i++) {
        size_t k;

        for (k = 0; k < b->paths.n; k++)
            if (strcmp(b->paths.v[k].text, b->gh.v[i].text) == 0)
                break;
        if (k == b->paths.n)
            rb_list_push(&b->paths, "GET", b->gh.v[i].text);
    }
    for (int m = 0; m < 4; m++) {
        for (size_t k = 0; k < b->paths.n; k++)
            for (int j = 0; j <= m; j++)
                rb_list_push(&b->mroutes[m], rb_meth4[j], b->paths.v[k].text);
        b->meth_t[m] = rb_build(NULL, &b->mroutes[m]);
    }

    for (int i = 0; i < RB_NSWEEP; i++)
        rb_sweep_init(&b->sweep[i], rb_sweep_copies[i], &b->gh, &b->ghreq);
    rt_table_stats(b->sweep[RB_NSWEEP - 1].t, &b->st100k);
}

/* ---- rows ---- */

static void rb_add_github_rows(struct rb *b)
{
    static const char *const w_static[1] = {"/user/repos"};
    static const char *const w_3p[1] = {"/repos/{owner}/{repo}/issues/{number}/comments"};
    const struct rb_want hit = {.status = RT_HIT, .patterns = w_static, .nparams = 0};
    static const char *const v_3p[3] = {"julienschmidt", "httprouter", "1347"};
    const struct rb_want hit3 = {.status = RT_HIT, .patterns = w_3p, .nparams = 3, .values = v_3p};
    const struct rb_want nf = {.status = RT_NOT_FOUND, .nparams = -1};
    const struct rb_want na = {
        .status = RT_NOT_ALLOWED, .nparams = -1, .allow = RT_M_GET | RT_M_POST};
    const struct rb_want redir = {
        .status = RT_REDIRECT_301, .patterns = w_static, .nparams = -1, .slash = -1};
    const char *deep = "/repos/julienschmidt/httprouter/issues/1347/comments";
    const char *deepmiss = "/repos/julienschmidt/httprouter/issues/1347/nothing";
    struct rb_scn *s;

    b->s_static = rb_add_one("static hit", b->gh_t, "GET", "/user/repos", &hit);
    b->s_ctl = rb_add_one("static (control)", b->gh_ctl, "GET", "/user/repos", &hit);
    rb_note(b->s_ctl, "same routes, a second table");
    b->s_3p = rb_add_one("3-param hit", b->gh_t, "GET", deep, &hit3);
    b->s_miss = rb_add_one("miss (404)", b->gh_t, "GET", "/user/nothing", &nf);
    b->s_missdeep = rb_add_one("miss (404), deep", b->gh_t, "GET", deepmiss, &nf);
    b->s_405 = rb_add_one("405", b->gh_t, "PUT", "/user/repos", &na);
    rb_note(b->s_405, "Allow: GET, POST");
    b->s_405deep = rb_add_one("405, deep", b->gh_t, "PUT", deep, &na);
    rb_note(b->s_405deep, "Allow: GET, POST");
    s = rb_add_one("redirect (301)", b->gh_redir, "GET", "/user/repos/", &redir);
    rb_note(s, "RT_TS_REDIRECT table, twin `/user/repos`");
    s = rb_add_one("miss (404), redirect table", b->gh_redir, "GET", "/user/nothing", &nf);
    rb_note(s, "RT_TS_REDIRECT: the twin `/user/nothing/` is looked up too");
}

/* param1, param5, param20: one route each, as in go-http-routing-benchmark
 * (`/user/{name}`; `/{a}/.../{e}` with "test" segments; 20 one-letter ones). */
static void rb_add_param_rows(struct rb *b)
{
    static const int np[3] = {1, 5, 20};

    for (int i = 0; i < 3; i++) {
        struct rb_list one = {0};
        const char *want[1];
        struct rb_want w = {.status = RT_HIT, .patterns = want, .nparams = np[i]};
        char pat[256] = "/user/{name}", req[256] = "/user/gordon", name[32];
        struct rb_scn *s;
        size_t pl = 0, rl = 0;

        for (int k = 0; np[i] > 1 && k < np[i]; k++) {
            char seg = (char)('a' + k);

            pl += (size_t)snprintf(pat + pl, sizeof(pat) - pl, "/{%c}", seg);
            if (np[i] == 5)
                rl += (size_t)snprintf(req + rl, sizeof(req) - rl, "/test");
            else
                rl += (size_t)snprintf(req + rl, sizeof(req) - rl, "/%c", seg);
        }
        rb_list_push(&one, "GET", pat);
        b->par_t[i] = rb_build(NULL, &one);
        rb_list_free(&one);
        want[0] = rb_keep(b, pat);
        snprintf(name, sizeof(name), "param%d", np[i]);
        s = rb_add_one(name, b->par_t[i], "GET", rb_keep(b, req), &w);
        rb_note(s, "one route `%s`", np[i] == 20 ? "/{a}/{b}/.../{t}" : pat);
    }
}

/* Issue 14's patterns: regexp parameters and infix catch-alls, in small
 * tables of their own, and GitHub-all with a regexp for every parameter. */
static struct rb_scn *rb_add_set(const char *name, const rt_table *t, const struct rb_list *reqs,
                                 const struct rb_list *routes);

static void rb_add_pattern_rows(struct rb *b)
{
    static const char *const rx_routes[] = {"/users/{id:[0-9]+}", "/users/{name}",
                                            "/users/{id:[0-9]+}/posts/{slug:[a-z0-9-]+}",
                                            "/users/{name}/posts/{post}"};
    static const char *const in_routes[] = {"/assets/*{path}/thumbnail", "/foo/{ps}/bar",
                                            "/foo/*{args}/bar", "/foo/*{args}"};
    static const char *const w_rx[1] = {"/users/{id:[0-9]+}"};
    static const char *const w_rxfall[1] = {"/users/{name}"};
    static const char *const w_rx2[1] = {"/users/{id:[0-9]+}/posts/{slug:[a-z0-9-]+}"};
    static const char *const w_in[1] = {"/assets/*{path}/thumbnail"};
    static const char *const w_in2[1] = {"/foo/*{args}/bar"};
    static const char *const w_in3[1] = {"/foo/*{args}"};
    const struct rb_want rx = {.status = RT_HIT, .patterns = w_rx, .nparams = 1};
    const struct rb_want rxfall = {.status = RT_HIT, .patterns = w_rxfall, .nparams = 1};
    const struct rb_want rx2 = {.status = RT_HIT, .patterns = w_rx2, .nparams = 2};
    const struct rb_want in = {.status = RT_HIT, .patterns = w_in, .nparams = 1};
    const struct rb_want in2 = {.status = RT_HIT, .patterns = w_in2, .nparams = 1};
    const struct rb_want in3 = {.status = RT_HIT, .patterns = w_in3, .nparams = 1};
    struct rb_list l = {0};
    struct rb_scn *s;

    for (size_t i = 0; i < sizeof(rx_routes) / sizeof(rx_routes[0]); i++)
        rb_list_push(&l, "GET", rx_routes[i]);
    b->rx_t = rb_build(NULL, &l);
    rb_list_free(&l);
    for (size_t i = 0; i < sizeof(in_routes) / sizeof(in_routes[0]); i++)
        rb_list_push(&l, "GET", in_routes[i]);
    b->infix_t = rb_build(NULL, &l);
    rb_list_free(&l);

    s = rb_add_one("regexp hit", b->rx_t, "GET", "/users/1347", &rx);
    rb_note(s, "`/users/{id:[0-9]+}` before `/users/{name}`");
    s = rb_add_one("regexp, falls to {param}", b->rx_t, "GET", "/users/gordon", &rxfall);
    rb_note(s, "the regexp is tried and fails first");
    s = rb_add_one("2 regexps hit", b->rx_t, "GET", "/users/1347/posts/hello-world", &rx2);
    s = rb_add_one("infix hit", b->infix_t, "GET", "/assets/photos/2021/thumbnail", &in);
    rb_note(s, "`/assets/*{path}/thumbnail`");
    s = rb_add_one("infix, after {param} fails", b->infix_t, "GET", "/foo/a/b/c/bar", &in2);
    rb_note(s, "`/foo/{ps}/bar`, then `/foo/*{args}/bar`");
    s = rb_add_one("infix fails, suffix", b->infix_t, "GET", "/foo/a/b/c/baz", &in3);
    rb_note(s, "every infix length tried, then `/foo/*{args}`");

    /* GitHub-all, each {name} replaced by {name:[^/]+}: same answers */
    for (size_t i = 0; i < b->gh.n; i++) {
        const char *p = b->gh.v[i].text;
        char pat[512];
        size_t k = 0;
        int plain = 0; /* inside a {param} (not a *{catchall}) */

        for (; *p && k + 8 < sizeof(pat); p++) {
            if (*p == '{')
                plain = p == b->gh.v[i].text || p[-1] != '*';
            if (*p == '}' && plain) {
                memcpy(pat + k, ":[^/]+", 6);
                k += 6;
                plain = 0;
            }
            pat[k++] = *p;
        }
        pat[k] = '\0';
        rb_list_push(&b->ghrx, b->gh.v[i].method, pat);
    }
    b->ghrx_t = rb_build(NULL, &b->ghrx);
    s = rb_add_set("GitHub-all, regexps", b->ghrx_t, &b->ghreq, &b->ghrx);
    rb_note(s, "every {param} of the 203 routes a {param:[^/]+}");
}

/* A lookup row over every request of <reqs>, expecting <routes>' patterns. */
static struct rb_scn *rb_add_set(const char *name, const rt_table *t, const struct rb_list *reqs,
                                 const struct rb_list *routes)
{
    struct rb_lk *lk = rb_lk_new(t, reqs->n, reqs->n);
    const char **want = rb_xcalloc(reqs->n, sizeof(*want));
    struct rb_want w = {.status = RT_HIT, .patterns = want, .nparams = -1};
    struct rb_scn *s;

    for (size_t i = 0; i < reqs->n; i++) {
        rb_lk_set(lk, i, reqs->v[i].method, reqs->v[i].text);
        want[i] = routes->v[i].text;
    }
    s = rb_scn_add(name, rb_lk_run, lk, rb_lk_free);
    s->per_op = reqs->n;
    s->is_lookup = 1;
    rb_lk_check(s, lk, &w);
    free(want);
    return s;
}

/* A sweep row: each op is one pass over the 203 request shapes. <spread> 0:
 * all in the middle copy; 1: request j of pass p goes to copy (p + j) mod
 * copies, so that successive ops walk the whole table. */
static struct rb_scn *rb_add_sweep_row(int i, struct rb_sweep *w, size_t per_copy, int spread)
{
    size_t np = spread ? w->copies : 1;
    struct rb_lk *lk = rb_lk_new(w->t, np * per_copy, per_copy);
    const char **want = rb_xcalloc(np * per_copy, sizeof(*want));
    struct rb_want wt = {.status = RT_HIT, .patterns = want, .nparams = -1};
    struct rt_stats st;
    struct rb_scn *s;
    char name[64], *arena = NULL;
    size_t total = 0, off = 0;

    /* The request paths are copied into one block in the order they are
     * looked up, so that reading them streams through memory: the cache
     * misses left are the table's, as with a request just read off a socket. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t p = 0; p < np; p++) {
            for (size_t j = 0; j < per_copy; j++) {
                size_t c = spread ? (p + j) % w->copies : w->copies / 2;
                const struct rb_line *rq = &w->requests.v[c * per_copy + j];
                size_t n = strlen(rq->text) + 1;

                if (pass == 0) {
                    total += n;
                    continue;
                }
                memcpy(arena + off, rq->text, n);
                rb_lk_set(lk, p * per_copy + j, rq->method, arena + off);
                want[p * per_copy + j] = w->routes.v[c * per_copy + j].text;
                off += n;
            }
        }
        if (pass == 0)
            arena = lk->arena = rb_xmalloc(total);
    }
    snprintf(name, sizeof(name), "sweep %s, %s", rb_sweep_label[i], spread ? "spread" : "hot");
    s = rb_scn_add(name, rb_lk_run, lk, rb_lk_free);
    s->per_op = per_copy;
    s->is_lookup = 1;
    rt_table_stats(w->t, &st);
    rb_note(s, "%zu routes (%zu cop%s), %zu nodes, %.0f B/route", st.routes, w->copies,
            w->copies == 1 ? "y" : "ies", st.nodes,
            st.routes ? (double)st.bytes / (double)st.routes : 0.0);
    if (spread)
        rb_note(s, "each op: the shapes, each in another copy, rotating");
    else
        rb_note(s, "each op: the shapes in copy %zu", w->copies / 2);
    rb_lk_check(s, lk, &wt);
    free(want);
    return s;
}

static void rb_add_sweep_rows(struct rb *b)
{
    for (int i = 0; i < RB_NSWEEP; i++) {
        b->s_hot[i] = rb_add_sweep_row(i, &b->sweep[i], b->gh.n, 0);
        b->s_spread[i] = rb_add_sweep_row(i, &b->sweep[i], b->gh.n, 1);
    }
    for (int m = 0; m < 4; m++) {
        const struct rb_want nf = {.status = RT_NOT_FOUND, .nparams = -1};
        char name[64];
        struct rb_scn *s;

        snprintf(name, sizeof(name), "miss (404), %d method%s", m + 1, m ? "s" : "");
        s = rb_add_one(name, b->meth_t[m], "GET",
                       "/repos/julienschmidt/httprouter/issues/1347/nothing", &nf);
        rb_note(s, "%zu paths x {GET%s%s%s} = %zu routes", b->paths.n, m >= 1 ? ",POST" : "",
                m >= 2 ? ",PUT" : "", m >= 3 ? ",DELETE" : "", b->mroutes[m].n);
    }
}

static void rb_add_write_rows(struct rb *b)
{
    struct rb_sweep *big = &b->sweep[RB_NSWEEP - 1];
    struct rb_buildctx *bc = rb_xcalloc(1, sizeof(*bc));
    struct rb_edit *e = rb_xcalloc(1, sizeof(*e));
    char pat[256];

    bc->empty = rt_table_new(NULL, NULL);
    if (bc->empty == NULL)
        rb_die("rt_table_new failed");
    bc->routes = &big->routes;
    b->s_build = rb_scn_add("build 100k, one txn", rb_build_run, bc, rb_buildctx_free);
    rb_note(b->s_build, "begin + %zu inserts + commit, from an empty table", big->routes.n);

    /* The edits take one existing route out of a table of their own (same
     * routes as the sweep's 100k) and put it back. */
    snprintf(pat, sizeof(pat), "/c%zu/repos/{owner}/{repo}/issues/{number}/comments",
             big->copies / 2);
    e->cur = rb_build(NULL, &big->routes);
    e->method = "GET";
    e->pattern = rb_keep(b, pat);
    e->present = 1;
    b->s_ins = rb_scn_add("insert 1 on 100k", rb_insert_run, e, NULL);
    b->s_del = rb_scn_add("delete 1 on 100k", rb_delete_run, e, rb_edit_free);
    rb_note(b->s_ins, "begin + insert + commit + free old; `GET %s`", e->pattern);
    rb_note(b->s_del, "begin + delete + commit + free old; same route");
}

static void rb_add_ruler(struct rb *b)
{
    json_t *obj = json_pack("{s:i, s:s, s:s, s:s, s:b}", "id", 42, "name", "Ada Lovelace", "email",
                            "ada@example.com", "created_at", "2026-09-27T12:34:56Z", "active", 1);

    if (obj == NULL)
        rb_die("json_pack failed");
    b->s_ruler = rb_scn_add("ruler: json_dumps", rb_ruler_run, obj, rb_json_free);
    rb_note(b->s_ruler, "5-field object (int, 2 strings, timestamp, bool), compact, + free");
}

/* ---- report ---- */

/* Notes that need the medians. */
static void rb_finish_notes(struct rb *b)
{
    for (size_t i = 0; i < rb_nscn; i++) {
        struct rb_scn *s = &rb_scns[i];
        char tmp[RB_NOTE];

        if (s->per_op > 1) {
            snprintf(tmp, sizeof(tmp), "%s", s->note);
            snprintf(s->note, sizeof(s->note), "%zu lookups/op = %.1f ns/lookup", s->per_op,
                     rb_ns_per_lookup(s));
            if (tmp[0] != '\0')
                rb_note(s, "%s", tmp);
        }
    }
    rb_note(b->s_ghall, "= %.2f µs/batch", b->s_ghall->med / 1e3);
    rb_note(b->s_build, "= %.1f ms; %.2f allocs/route", b->s_build->med / 1e6,
            rb_allocs_per_op(b->s_build) / (double)b->sweep[RB_NSWEEP - 1].routes.n);
    rb_note(b->s_ins, "= %.2f µs", b->s_ins->med / 1e3);
    rb_note(b->s_del, "= %.2f µs", b->s_del->med / 1e3);
    for (int i = 0; i < RB_NSWEEP; i++) {
        rb_note(b->s_hot[i], "%.2fx the 200 case",
                rb_ns_per_lookup(b->s_hot[i]) / rb_ns_per_lookup(b->s_hot[0]));
        rb_note(b->s_spread[i], "%.2fx the 200 case",
                rb_ns_per_lookup(b->s_spread[i]) / rb_ns_per_lookup(b->s_spread[0]));
    }
    rb_note(b->s_missdeep, "%.2fx the 3-param hit", b->s_missdeep->med / b->s_3p->med);
    rb_note(b->s_405deep, "%.2fx the 3-param hit", b->s_405deep->med / b->s_3p->med);
}

/* The 1-minute load average, or -1 where /proc/loadavg is missing. */
static double rb_loadavg(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1.0;

    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1.0;
        fclose(f);
    }
    return l;
}

static void rb_print_header(const struct rb *b)
{
    char cpu[256];

    rb_cpu_model(cpu, sizeof(cpu));
    printf("## Router micro-benchmarks\n\n");
    printf("- CPU: %s; %ld CPUs online; nothing pinned; 1-min load average %.2f before, "
           "%.2f after the runs (other work on the machine shows here and in the control "
           "row)\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), b->load[0], b->load[1]);
    printf("- build: %s, %s %s; routes from `%s`\n", RB_BUILD_TYPE,
#ifdef __clang__
           "clang",
#else
           "gcc",
#endif
           __VERSION__, b->dir);
    printf("- method: %d runs per scenario, interleaved round-robin, each calibrated to "
           "~%.0f ms; ns/op = median, ± = min and max against the median; allocs/op = "
           "malloc/calloc/realloc/posix_memalign/aligned_alloc calls inside the timed "
           "regions, counted by interposition%s\n\n",
           rb_runs, rb_target_ns / 1e6, ac_enabled() ? "" : " (off in this build: n/a)");
    if (strcmp(RB_BUILD_TYPE, "Release") != 0 || !ac_enabled())
        printf("> **Not a Release measurement** (build type %s%s): compare nothing here with "
               "the targets.\n\n",
               RB_BUILD_TYPE, ac_enabled() ? "" : ", sanitizer");
}

static void rb_print_derived(const struct rb *b)
{
    const struct rb_scn *st = b->s_static;
    double noise = (b->s_ctl->med - st->med) / st->med;
    double gap = noise < 0 ? -noise : noise;
    double miss = b->s_miss->med / st->med, m405 = b->s_405->med / st->med;
    double hot = rb_ns_per_lookup(b->s_hot[RB_NSWEEP - 1]) / rb_ns_per_lookup(b->s_hot[0]);
    double spr = rb_ns_per_lookup(b->s_spread[RB_NSWEEP - 1]) / rb_ns_per_lookup(b->s_spread[0]);
    double edit = b->s_ins->med > b->s_del->med ? b->s_ins->med : b->s_del->med;
    double bpr = b->st100k.routes ? (double)b->st100k.bytes / (double)b->st100k.routes : 0.0;
    char al[1024] = "", v1[64], v2[64];
    size_t nwrong = 0, nalloc = 0;

    for (size_t i = 0; i < rb_nscn; i++) {
        nwrong += rb_scns[i].wrong ? 1 : 0;
        if (rb_scns[i].is_lookup && rb_scns[i].allocs > 0) {
            size_t len = strlen(al);

            snprintf(al + len, sizeof(al) - len, "%s%.63s %.31s", nalloc ? ", " : "",
                     rb_scns[i].name, rb_fmt_allocs(&rb_scns[i], v1, sizeof(v1)));
            nalloc++;
        }
    }
    printf("\n### Derived\n\n");
    printf("- noise: control vs static hit %+.1f%%; a difference smaller than that is not a "
           "result\n",
           noise * 100.0);
    printf("- ruler: a static hit costs %.3f of one json_dumps (%.0f ns); GitHub-all (203 "
           "lookups) costs %.2f of them\n",
           st->med / b->s_ruler->med, b->s_ruler->med, b->s_ghall->med / b->s_ruler->med);
    printf("- miss/hit: %.2fx; deep miss / 3-param hit: %.2fx\n", miss,
           b->s_missdeep->med / b->s_3p->med);
    printf("- 405/hit: %.2fx; deep 405 / 3-param hit: %.2fx\n", m405,
           b->s_405deep->med / b->s_3p->med);
    printf("- 100k/200 lookup: %.2fx hot, %.2fx spread over the table\n", hot, spr);
    printf("- bytes per route at 100k: %.1f (%zu bytes, %zu nodes, %zu routes)\n", bpr,
           b->st100k.bytes, b->st100k.nodes, b->st100k.routes);
    printf("- checks: %s\n", nwrong ? "**some lookups answered wrongly, see the notes**"
                                    : "every lookup row answered as expected before timing");

    printf("\n### Targets\n\n| target | measured | verdict |\n|---|---|---|\n");
    if (ac_enabled())
        printf("| 0 allocs per lookup, incl. redirect | %s | %s |\n",
               nalloc ? al : "0 in every lookup row", nalloc ? "**MISS**" : "PASS");
    else
        printf("| 0 allocs per lookup | not counted (sanitizer build) | n/a |\n");
    printf("| GitHub-all ≤ 8 µs | %.2f µs | %s |\n", b->s_ghall->med / 1e3,
           rb_verdict(b->s_ghall->med / 1e3, 8.0, gap, v1, sizeof(v1)));
    printf("| miss ≤ 1.5x static hit | %.2fx | %s |\n", miss,
           rb_verdict(miss, 1.5, gap, v1, sizeof(v1)));
    printf("| 405 ≤ 2x static hit | %.2fx | %s |\n", m405,
           rb_verdict(m405, 2.0, gap, v1, sizeof(v1)));
    printf("| 100k lookup ≤ 1.5x the 200 case | %.2fx hot, %.2fx spread | %s hot, %s spread |\n",
           hot, spr, rb_verdict(hot, 1.5, gap, v1, sizeof(v1)),
           rb_verdict(spr, 1.5, gap, v2, sizeof(v2)));
    printf("| build 100k < 100 ms | %.1f ms | %s |\n", b->s_build->med / 1e6,
           rb_verdict(b->s_build->med / 1e6, 100.0, gap, v1, sizeof(v1)));
    printf("| insert/delete on 100k < 20 µs | %.2f / %.2f µs | %s |\n", b->s_ins->med / 1e3,
           b->s_del->med / 1e3, rb_verdict(edit / 1e3, 20.0, gap, v1, sizeof(v1)));
    printf("| ≤ 200 bytes/route at 100k | %.1f | %s |\n", bpr, bpr <= 200.0 ? "PASS" : "**MISS**");
}

static void rb_free_all(struct rb *b)
{
    for (size_t i = 0; i < rb_nscn; i++)
        if (rb_scns[i].ctx_free != NULL)
            rb_scns[i].ctx_free(rb_scns[i].ctx);
    rt_table_free(b->gh_t);
    rt_table_free(b->gh_ctl);
    rt_table_free(b->gh_redir);
    rt_table_free(b->stat_t);
    for (int i = 0; i < 3; i++)
        rt_table_free(b->par_t[i]);
    rt_table_free(b->rx_t);
    rt_table_free(b->infix_t);
    rt_table_free(b->ghrx_t);
    rb_list_free(&b->ghrx);
    for (int m = 0; m < 4; m++) {
        rt_table_free(b->meth_t[m]);
        rb_list_free(&b->mroutes[m]);
    }
    for (int i = 0; i < RB_NSWEEP; i++) {
        rt_table_free(b->sweep[i].t);
        rb_list_free(&b->sweep[i].routes);
        rb_list_free(&b->sweep[i].requests);
    }
    rb_list_free(&b->gh);
    rb_list_free(&b->ghreq);
    rb_list_free(&b->stat);
    rb_list_free(&b->paths);
    rb_list_free(&b->extra);
}

int main(int argc, char **argv)
{
    static struct rb b;
    int argi = 1;

    b.dir = SY_ROUTES_DIR;
    if (argi < argc && strcmp(argv[argi], "-q") == 0) {
        rb_runs = 3;
        rb_target_ns = 10e6;
        rb_calib_ns = 2e6;
        argi++;
    }
    if (argi < argc && argv[argi][0] == '-') {
        fprintf(stderr, "usage: %s [-q] [ROUTES_DIR]\n", argv[0]);
        return 2;
    }
    if (argi < argc)
        b.dir = argv[argi++];

    rb_load(&b);
    rb_add_github_rows(&b);
    rb_add_param_rows(&b);
    rb_add_pattern_rows(&b);
    b.s_ghall = rb_add_set("GitHub-all", b.gh_t, &b.ghreq, &b.gh);
    rb_add_set("static-all", b.stat_t, &b.stat, &b.stat);
    rb_add_sweep_rows(&b);
    rb_add_write_rows(&b);
    rb_add_ruler(&b);

    b.load[0] = rb_loadavg();
    rb_measure();
    b.load[1] = rb_loadavg();
    rb_finish_notes(&b);

    rb_print_header(&b);
    rb_print_table(b.s_static);
    rb_print_derived(&b);
    rb_free_all(&b);
    return 0;
}
