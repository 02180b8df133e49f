/*
 * switchyard_route.c - the router on the command line.
 *
 *   switchyard-route [--trailing-slash strict|redirect|relaxed] [--auto-options]
 *                    [--summary] ROUTES_FILE
 *   switchyard-route [--summary] --config FILE.json
 *   switchyard-route --diff OLD.json NEW.json
 *
 * ROUTES_FILE holds "METHOD PATTERN" lines ('#' starts a comment); with
 * --config the routes (hosts, methods) and router options come from a
 * Switchyard config instead, the file that is pushed (route_config.c).
 * Requests "METHOD HOST PATH[?QUERY]" (HOST '-' for none) are read from
 * stdin; each gets one JSON line, a bad one {"error": ...} (and the exit
 * status is 1 at the end), or with --summary the counts per status and per
 * route are printed at the end, so a day of request lines can be replayed
 * against a new route file before it is pushed. Paths are matched as given: feed
 * them normalized, as the gateway would route them; "OPTIONS - *" asks for
 * every method (with --auto-options).
 *
 * --diff replays the requests against the routes of two configs and
 * prints where they go elsewhere, grouped by from and to (route_diff.c);
 * it reads Switchyard's JSON access-log lines as well as request lines.
 */
#define _POSIX_C_SOURCE 200809L
#include "router/route_config.h"
#include "router/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *name; /* "METHOD PATTERN" */
    unsigned long hits;
};

/* The table's udata_free: an entry and its name. */
static void entry_free(void *udata)
{
    struct entry *e = udata;

    free(e->name);
    free(e);
}

/* --config's udata: an entry named by the route id. */
static void *entry_make(const char *name, const char **stored)
{
    struct entry *e = calloc(1, sizeof(*e));

    if (!e || !(e->name = strdup(name))) {
        free(e);
        return NULL;
    }
    *stored = e->name;
    return e;
}

static void usage_to(FILE *f)
{
    fprintf(f, "usage: switchyard-route [--trailing-slash strict|redirect|relaxed] "
               "[--auto-options] [--summary] ROUTES_FILE < requests\n"
               "       switchyard-route [--summary] --config FILE.json < requests\n"
               "       switchyard-route --diff OLD.json NEW.json < requests-or-access-log\n"
               "requests: one \"METHOD HOST PATH\" a line (HOST - for none); answers: one JSON\n"
               "line each, {\"error\": ...} for a bad one (exit status 1 at the end)\n");
}

/* A command-line mistake: "<what> <arg>", the usage, exit 2. */
static void usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "switchyard-route: %s %s\n", what, arg);
    usage_to(stderr);
    exit(2);
}

static void usage(void)
{
    usage_to(stderr);
    exit(2);
}

static void json_str(const char *s, size_t len)
{
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return s;
}

/* Builds the table from <path>; exits 1 on the first bad line. */
static rt_table *load_routes(const char *path, const struct rt_options *opts)
{
    FILE *f = fopen(path, "r");
    rt_table *empty = rt_table_new(opts, entry_free);
    rt_txn *tx;
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    rt_table *t;

    if (!f) {
        perror(path);
        exit(1);
    }
    if (!empty || !(tx = rt_txn_begin(empty))) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    while (getline(&line, &cap, f) != -1) {
        char *s = trim(line), *sp, *method, *pattern;
        struct rt_error err;
        struct entry *e;
        const char *ms[1];

        lineno++;
        if (*s == '\0' || *s == '#')
            continue;
        sp = strpbrk(s, " \t");
        if (!sp) {
            fprintf(stderr, "%s:%u: expected \"METHOD PATTERN\"\n", path, lineno);
            exit(1);
        }
        *sp = '\0';
        method = s;
        pattern = trim(sp + 1);
        e = calloc(1, sizeof(*e));
        if (!e || !(e->name = malloc(strlen(method) + strlen(pattern) + 2))) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        sprintf(e->name, "%s %s", method, pattern);
        ms[0] = method;
        if (rt_txn_insert(tx, ms, 1, pattern, e->name, e, &err) < 0) {
            fprintf(stderr, "%s:%u: route \"%s %s\": %s\n", path, lineno, method, pattern, err.msg);
            exit(1);
        }
    }
    free(line);
    fclose(f);
    t = rt_txn_commit(tx);
    rt_table_free(empty);
    if (!t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return t;
}

struct sum {
    unsigned long status[600];
    struct entry **all;
    size_t n;
};

static void collect(const rt_route *r, void *arg)
{
    struct sum *s = arg;
    s->all[s->n++] = rt_route_udata(r);
}

static int by_hits(const void *a, const void *b)
{
    const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
    if (x->hits != y->hits)
        return x->hits < y->hits ? 1 : -1;
    return strcmp(x->name, y->name);
}

static void print_summary(const rt_table *t, struct sum *s, unsigned long total)
{
    s->all = calloc(rt_table_count(t) + 1, sizeof(*s->all));
    if (!s->all)
        exit(1);
    rt_table_foreach(t, collect, s);
    qsort(s->all, s->n, sizeof(*s->all), by_hits);
    printf("{\"requests\":%lu}\n", total);
    for (int st = 0; st < 600; st++)
        if (s->status[st])
            printf("{\"status\":%d,\"count\":%lu}\n", st, s->status[st]);
    for (size_t i = 0; i < s->n; i++) {
        printf("{\"route\":");
        json_str(s->all[i]->name, strlen(s->all[i]->name));
        printf(",\"count\":%lu}\n", s->all[i]->hits);
    }
    free(s->all);
}

int main(int argc, char **argv)
{
    struct rt_options opts = {RT_TS_STRICT, 0};
    const char *file = NULL, *config = NULL;
    int summary = 0, bad = 0;
    rt_table *t;
    struct rt_param *params;
    rt_ctx *ctx;
    size_t cap;
    char *line = NULL, allow[512];
    size_t lcap = 0;
    unsigned long total = 0;
    static struct sum sum;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trailing-slash") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "strict") == 0)
                opts.trailing_slash = RT_TS_STRICT;
            else if (strcmp(v, "redirect") == 0)
                opts.trailing_slash = RT_TS_REDIRECT;
            else if (strcmp(v, "relaxed") == 0)
                opts.trailing_slash = RT_TS_RELAXED;
            else
                usage_error("--trailing-slash takes strict, redirect or relaxed, not", v);
        } else if (strcmp(argv[i], "--diff") == 0 && i + 2 < argc && argc == 4) {
            return route_diff_main(argv[i + 1], argv[i + 2], stdin, entry_make, entry_free);
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_to(stdout);
            return 0;
        } else if (strcmp(argv[i], "--auto-options") == 0) {
            opts.auto_options = 1;
        } else if (strcmp(argv[i], "--summary") == 0) {
            summary = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            usage_error(strcmp(argv[i], "--diff") == 0 ? "takes OLD.json NEW.json and nothing else:"
                        : strcmp(argv[i], "--trailing-slash") && strcmp(argv[i], "--config")
                            ? "unknown option"
                            : "a value must follow",
                        argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error("unexpected argument", argv[i]);
        }
    }
    if (!file == !config)
        usage();
    if (config && !(t = route_config_load(config, entry_make, entry_free)))
        return 1;
    if (!config)
        t = load_routes(file, &opts);
    cap = rt_table_max_params(t) + 1;
    params = calloc(cap, sizeof(*params));
    ctx = rt_ctx_new(); /* made once: regexp routes then match without allocating */
    if (!params || !ctx)
        return 1;

    while (getline(&line, &lcap, stdin) != -1) {
        char *s = trim(line), *method, *host, *target, *q;
        size_t plen;
        struct rt_match m;
        int status;

        if (*s == '\0' || *s == '#')
            continue;
        method = strtok(s, " \t");
        host = strtok(NULL, " \t");
        target = strtok(NULL, " \t");
        if (!method || !host || !target || strtok(NULL, " \t")) {
            /* an answer line of its own: one output line per request line */
            bad = 1;
            if (!summary)
                printf("{\"error\":\"bad request line: want METHOD HOST PATH\"}\n");
            continue;
        }
        if (strcmp(host, "-") == 0)
            host = "";
        q = strchr(target, '?');
        plen = q ? (size_t)(q - target) : strlen(target);
        rt_lookup_ctx(t, ctx, method, strlen(method), host, strlen(host), target, plen, params, cap,
                      &m);
        total++;
        /* the automatic OPTIONS answer is a 200 (fox) */
        status = m.status == RT_OPTIONS_AUTO ? 200 : (int)m.status;
        if (summary) {
            sum.status[status]++;
            if (m.route && (m.status == RT_HIT))
                ((struct entry *)rt_route_udata(m.route))->hits++;
            continue;
        }
        printf("{\"status\":%d", status);
        if (m.status == RT_OPTIONS_AUTO)
            printf(",\"auto_options\":true");
        if (m.route) {
            const struct entry *e = rt_route_udata(m.route);
            printf(",\"route\":");
            json_str(e->name, strlen(e->name));
        }
        if (m.status == RT_HIT) {
            printf(",\"params\":{");
            for (size_t i = 0; i < m.nparams; i++) {
                if (i)
                    putchar(',');
                json_str(params[i].name, strlen(params[i].name));
                putchar(':');
                json_str(params[i].value, params[i].len);
            }
            putchar('}');
        }
        if (m.status == RT_NOT_ALLOWED || m.status == RT_OPTIONS_AUTO) {
            rt_methods_format(t, m.allow, allow, sizeof(allow));
            printf(",\"allow\":");
            json_str(allow, strlen(allow));
        }
        if (m.status == RT_REDIRECT_301 || m.status == RT_REDIRECT_308) {
            /* the twin path, then the query as it came */
            size_t tl = m.slash > 0 ? plen : plen - 1, ql = q ? strlen(q) : 0;
            char *loc = malloc(tl + ql + 2);
            if (!loc)
                return 1;
            memcpy(loc, target, tl);
            if (m.slash > 0)
                loc[tl++] = '/';
            memcpy(loc + tl, q ? q : "", ql);
            printf(",\"location\":");
            json_str(loc, tl + ql);
            free(loc);
        }
        printf("}\n");
    }
    if (summary)
        print_summary(t, &sum, total);
    free(line);
    free(params);
    rt_ctx_free(ctx);
    rt_table_free(t);
    return bad;
}
