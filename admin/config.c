/*
 * config.c - the config model: strict JSON parsing and validation, the root.
 *
 * One pass over the document fills a struct adm_config through per-object key
 * tables (admin/config_int.h): the root table here hands each top-level key to
 * its section's file (config_listeners.c, config_upstreams.c, config_routes.c,
 * config_admin.c, config_settings.c, config_fleet.c). A key missing from its
 * table is an error, so is a value of the wrong type or out of range. A second pass here
 * checks what spans sections: route -> upstream references, the admin address
 * against the listeners, and route conflicts (every route inserted into one
 * router transaction). Errors go to a struct adm_errors, each with the JSON
 * pointer of the value it is about; parsing goes on after an error so that
 * one run reports everything. The result is returned only when there was no
 * error. Also here: syntax errors (with the JSON pointer of a duplicate key),
 * reading a file, and the built-in default config.
 *
 * Ownership: the config owns every string and array in it, and one reference
 * to the JSON document. adm_config_free() releases all of it, including a
 * half-built config, so every parse step may simply stop on failure.
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/config_int.h"
#include "admin/fleet.h"
#include "admin/sample.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILE (64u << 20) /* adm_config_load_file */

/* ---- the root ---- */

static const struct adm_cf_field root_fields[] = {
    {.key = "workers",
     .kind = FK_UINT,
     .off = offsetof(struct adm_config, workers),
     .min = 1,
     .max = 256},
    {.key = "listeners", .kind = FK_FN, .flags = F_REQUIRED, .fn = adm_cf_listeners},
    {.key = "upstreams", .kind = FK_FN, .fn = adm_cf_upstreams},
    {.key = "routes", .kind = FK_FN, .fn = adm_cf_routes},
    {.key = "router", .kind = FK_FN, .fn = adm_cf_router},
    {.key = "trusted_proxies", .kind = FK_FN, .fn = adm_cf_trusted_proxies},
    {.key = "client_ip", .kind = FK_FN, .fn = adm_cf_client_ip},
    {.key = "limits", .kind = FK_FN, .fn = adm_cf_limits},
    {.key = "timeouts", .kind = FK_FN, .fn = adm_cf_timeouts},
    {.key = "http2", .kind = FK_FN, .fn = adm_cf_http2},
    {.key = "access_log", .kind = FK_FN, .fn = adm_cf_access_log},
    {.key = "access_log_format", .kind = FK_FN, .fn = adm_cf_access_log_format},
    {.key = "log_level", .kind = FK_FN, .fn = adm_cf_log_level},
    {.key = "resolver", .kind = FK_FN, .fn = adm_cf_resolver},
    {.key = "admin", .kind = FK_FN, .fn = adm_cf_admin},
    {.key = "user", .kind = FK_FN, .fn = adm_cf_user},
    {.key = "group", .kind = FK_FN, .fn = adm_cf_group},
    {.key = "fleet", .kind = FK_FN, .fn = adm_cf_fleet},
    {.key = "sampling",
     .kind = FK_UINT,
     .off = offsetof(struct adm_config, sampling),
     .min = 0,
     .max = 65536}, /* ADM_SAMPLE_MAX */
    {.key = "rollout", .kind = FK_FN, .fn = adm_cf_rollout},
    {.key = "policies", .kind = FK_FN, .fn = adm_cf_policies},
};

/* ---- checks across the sections ---- */

const char *adm_cf_nearest_upstream(const struct adm_config *c, const char *name)
{
    const char *best = NULL;
    size_t bestd = 3;

    for (size_t k = 0; name && k < c->nupstreams; k++) {
        size_t d;
        if (!c->upstreams[k].name) /* one refused for its name: no suggestion */
            continue;
        d = adm_cf_edit_distance(name, c->upstreams[k].name);
        if (d < bestd) {
            bestd = d;
            best = c->upstreams[k].name;
        }
    }
    return best;
}

static void check_cross(struct adm_cf *x)
{
    struct adm_config *c = x->c;
    char path[64];
    struct adm_cf_qbuf q;

    for (size_t i = 0; i < c->nupstreams; i++) {
        struct adm_upstream *u = &c->upstreams[i];
        if (!u->idle_timeout_ms)
            u->idle_timeout_ms = c->timeouts.upstream_idle_ms;
        if (!u->connect_timeout_ms)
            u->connect_timeout_ms = c->timeouts.upstream_connect_ms;
        if (!u->response_timeout_ms)
            u->response_timeout_ms = c->timeouts.upstream_response_ms;
    }

    /* a client sends its first request head within a round trip or two, so
     * few of the connections open at once are waiting for one: by default
     * connections that send nothing hold at most a quarter of the cap */
    if (!c->limits.max_pending_connections)
        c->limits.max_pending_connections =
            c->limits.max_connections >= 4 ? c->limits.max_connections / 4 : 1;
    else if (c->limits.max_pending_connections > c->limits.max_connections)
        adm_cf_err_at(x, "/limits/max_pending_connections", "must be at most max_connections (%u)",
                      c->limits.max_connections);

    for (size_t i = 0; i < c->nroutes; i++) {
        struct adm_route *r = &c->routes[i];
        if (r->action == ADM_ACTION_UPSTREAM && !x->route_timeout[i])
            r->timeout_ms = c->timeouts.upstream_response_ms;
        if (!r->upstream)
            continue;
        json_t *u = json_object_get(x->upstream_index, r->upstream);
        if (u) {
            const struct adm_upstream *pool;
            r->upstream_index = (size_t)json_integer_value(u);
            /* what the route does not say, its upstream does */
            pool = &c->upstreams[r->upstream_index];
            if (!x->route_timeout[i])
                r->timeout_ms = pool->response_timeout_ms;
            if (r->request_buffering < 0)
                r->request_buffering = pool->request_buffering;
            if (!r->max_buffered_body_bytes)
                r->max_buffered_body_bytes = pool->max_buffered_body_bytes;
        } else {
            const char *near = adm_cf_nearest_upstream(c, r->upstream);
            struct adm_cf_qbuf qn;
            snprintf(path, sizeof(path), "/routes/%zu/upstream", i);
            if (near)
                adm_cf_err_at(x, path, "unknown upstream %s (did you mean %s?)",
                              adm_cf_quote(&q, r->upstream), adm_cf_quote(&qn, near));
            else
                adm_cf_err_at(x, path, "unknown upstream %s", adm_cf_quote(&q, r->upstream));
        }
    }

    if (c->admin.addr.text) {
        /* blame the admin address if the document sets it, else the listener */
        int explicit = json_object_get(json_object_get(c->json, "admin"), "address") != NULL;
        for (size_t i = 0; i < c->nlisteners; i++) {
            if (!c->listeners[i].addr.text ||
                !adm_addr_overlaps(&c->admin.addr, &c->listeners[i].addr))
                continue;
            if (explicit) {
                adm_cf_err_at(x, "/admin/address", "overlaps /listeners/%zu/address (%s)", i,
                              c->listeners[i].addr.text);
                break;
            }
            snprintf(path, sizeof(path), "/listeners/%zu/address", i);
            adm_cf_err_at(x, path,
                          "overlaps the admin API's default address %s (set admin.address)",
                          c->admin.addr.text);
        }
    }

    adm_cf_policies_check(x);
    if (c->nroutes && !x->nomem) {
        const struct adm_route_binder *b = x->bind;
        rt_table *t = adm_cf_build_routes(c, x->route_ok, b ? b->make : NULL, b ? b->free : NULL,
                                          b ? b->arg : NULL, x->errs, &x->nerr, &x->nomem);
        if (b && t)
            c->table = t; /* freed with the config if anything failed */
        else
            rt_table_free(t);
    }
}

/* ---- entry points ---- */

static void config_defaults(struct adm_config *c)
{
    c->router.trailing_slash = RT_TS_STRICT;
    c->router.merge_slashes = 1;
    c->router.forward_path = ADM_FWD_AS_RECEIVED;
    c->router.escaped_slashes = H1_SLASHES_REJECT;
    c->limits = (struct adm_limits){.max_request_line = 8192,
                                    .max_header_bytes = 32768,
                                    .max_headers = 100,
                                    .max_body_bytes = 0,
                                    .max_connections = 10000,
                                    .max_routes = 100000};
    c->timeouts = (struct adm_timeouts){.client_header_ms = 10000,
                                        .client_idle_ms = 60000,
                                        .client_body_ms = 30000,
                                        .upstream_connect_ms = 5000,
                                        .upstream_response_ms = 60000,
                                        .upstream_idle_ms = 60000,
                                        .drain_ms = 10000,
                                        .lingering_ms = 30000,
                                        .tunnel_idle_ms = 3600000};
    c->http2 = (struct adm_http2){.max_concurrent_streams = 100, .initial_window_bytes = 65535};
    c->access_log.target = ADM_LOG_STDOUT;
    c->log_level = ADM_LEVEL_WARN;
    c->resolver.timeout_ms = 5000;
    c->resolver.attempts = 2;
    c->rollout = (struct adm_rollout_cfg){
        .canary_s = 60, .threshold_pct = 1, .min_requests = 20, .latency_pct = 25};
    c->admin.heap_reserve_mb = 48;
    c->sampling = ADM_SAMPLE_DEFAULT;
}

/* Validates <root>, whose reference it takes over. */
static struct adm_config *config_build(json_t *root, const struct adm_route_binder *bind,
                                       struct adm_errors *errs)
{
    struct adm_cf x;
    char why[128];

    memset(&x, 0, sizeof(x));
    x.errs = errs;
    x.bind = bind;
    x.c = calloc(1, sizeof(*x.c));
    x.pcap = 256;
    x.path = malloc(x.pcap);
    x.upstream_index = json_object();
    if (!x.c || !x.path || !x.upstream_index) {
        json_decref(root);
        goto fail;
    }
    x.path[0] = '\0';
    x.c->json = root;
    config_defaults(x.c);
    if (adm_addr_parse(&x.c->admin.addr, "127.0.0.1:9901", 0, why, sizeof(why)) < 0) {
        x.nomem = 1;
        goto fail;
    }

    if (!json_is_object(root))
        adm_cf_err(&x, "the config must be a JSON object, got %s", adm_cf_type_name(root));
    else
        adm_cf_fields(&x, root, root_fields, NFIELDS(root_fields), x.c);
    if (!x.nomem)
        check_cross(&x);
    if (x.nomem || x.nerr)
        goto fail;

    free(x.path);
    free(x.route_ok);
    free(x.route_timeout);
    json_decref(x.upstream_index);
    return x.c;

fail:
    if (x.nomem || !x.c || !x.path || !x.upstream_index) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while validating the config");
    }
    adm_config_free(x.c);
    free(x.path);
    free(x.route_ok);
    free(x.route_timeout);
    json_decref(x.upstream_index);
    return NULL;
}

/* The JSON pointer of the duplicate key jansson stopped at: <pos> is just
 * past the key's closing adm_cf_quote, and everything before it is valid JSON, so a
 * light scan that tracks containers, keys and indexes rebuilds the path.
 * Returns a malloc'd pointer, or NULL (use "" then). */
static char *dup_key_path(const char *s, size_t len, size_t pos)
{
    struct frame {
        int is_obj;
        size_t index;
        size_t kstart, klen;
    } *fr = NULL;
    size_t nfr = 0, cap = 0, i = 0;
    int expect_key = 0;
    char *out = NULL;

    if (pos > len)
        pos = len;
    while (i < pos) {
        char ch = s[i];
        if (ch == '{' || ch == '[') {
            if (nfr == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                struct frame *n = realloc(fr, ncap * sizeof(*n));
                if (!n)
                    goto out;
                fr = n;
                cap = ncap;
            }
            fr[nfr++] = (struct frame){.is_obj = ch == '{'};
            expect_key = ch == '{';
            i++;
        } else if (ch == '}' || ch == ']') {
            if (nfr)
                nfr--;
            i++;
        } else if (ch == ',') {
            if (nfr && fr[nfr - 1].is_obj)
                expect_key = 1;
            else if (nfr)
                fr[nfr - 1].index++;
            i++;
        } else if (ch == ':') {
            expect_key = 0;
            i++;
        } else if (ch == '"') {
            size_t st = i++;
            while (i < len && s[i] != '"')
                i += s[i] == '\\' ? 2 : 1;
            i++;
            if (nfr && fr[nfr - 1].is_obj && expect_key) {
                fr[nfr - 1].kstart = st;
                fr[nfr - 1].klen = (i <= len ? i : len) - st;
            }
        } else {
            i++;
        }
    }

    struct adm_cf x;
    memset(&x, 0, sizeof(x));
    x.pcap = 64;
    x.path = malloc(x.pcap);
    if (!x.path)
        goto out;
    x.path[0] = '\0';
    for (size_t f = 0; f < nfr; f++) {
        if (!fr[f].is_obj) {
            adm_cf_push_index(&x, fr[f].index);
            continue;
        }
        json_t *k = json_loadb(s + fr[f].kstart, fr[f].klen, JSON_DECODE_ANY, NULL);
        if (!json_is_string(k)) {
            json_decref(k);
            x.nomem = 1;
            break;
        }
        adm_cf_push_key(&x, json_string_value(k));
        json_decref(k);
    }
    if (x.nomem)
        free(x.path);
    else
        out = x.path;
out:
    free(fr);
    return out;
}

/* The error of a text jansson refused, in <errs>; "<file>: " first when
 * <file> is not NULL, so that an error read from a file names it. */
static void report_syntax(struct adm_errors *errs, const char *json, size_t len,
                          const json_error_t *je, const char *file)
{
    enum json_error_code code = json_error_code(je);
    const char *sep = file ? ": " : "";

    if (!file)
        file = "";
    if (code == json_error_out_of_memory) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while parsing the config");
    } else if (adm_json_blank(json, len) ==
               len) { /* jansson: "'[' or '{' expected near end of file" */
        adm_errors_add(errs, "", "%s%sthe %s %s: a config is a JSON object ({...})", file, sep,
                       *sep ? "file" : "document",
                       len ? "holds nothing but white space" : "is empty");
    } else if (code == json_error_duplicate_key && je->position > 0) {
        char *path = dup_key_path(json, len, (size_t)je->position);
        adm_errors_add(errs, path ? path : "", "duplicate key (%s%sline %d, column %d)", file,
                       *sep ? " " : "", je->line, je->column);
        free(path);
    } else if (je->line > 0) {
        adm_errors_add(errs, "", "%s%sline %d, column %d: %s", file, sep, je->line, je->column,
                       je->text);
    } else {
        adm_errors_add(errs, "", "%s%sinvalid JSON: %s", file, sep, je->text);
    }
}

size_t adm_json_blank(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

json_t *adm_config_doc(const char *text, size_t len, const char *file, struct adm_errors *errs)
{
    json_error_t je;
    json_t *root;

    if (!text) {
        text = "";
        len = 0;
    }
    if (!(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)))
        report_syntax(errs, text, len, &je, file);
    return root;
}

/* adm_config_parse(), the errors of a text read from <file> (NULL: none)
 * naming it. */
static struct adm_config *parse_named(const char *json, size_t len, const char *file,
                                      struct adm_errors *errs)
{
    struct adm_errors local;
    struct adm_config *c = NULL;
    json_t *root;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    if ((root = adm_config_doc(json, len, file, errs)))
        c = config_build(root, NULL, errs);
    adm_errors_clear(&local);
    return c;
}

struct adm_config *adm_config_parse(const char *json, size_t len, struct adm_errors *errs)
{
    return parse_named(json, len, NULL, errs);
}

/* A copy of <root> that shares every value below the top level except the
 * routes array, which is copied too: the admin API replaces those two
 * containers' members but never changes a value in place. Sharing instead of
 * a deep copy keeps a 10k-route push from allocating the document twice. */
static json_t *structural_copy(const json_t *root)
{
    json_t *copy, *routes;

    if (!json_is_object(root))
        return json_deep_copy(root);
    if (!(copy = json_copy((json_t *)root)))
        return NULL;
    routes = json_object_get(copy, "routes");
    if (json_is_array(routes) && json_object_set_new(copy, "routes", json_copy(routes)) < 0) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

struct adm_config *adm_config_from_json_bound(const json_t *root,
                                              const struct adm_route_binder *bind,
                                              struct adm_errors *errs)
{
    struct adm_errors local;
    struct adm_config *c = NULL;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    json_t *copy = root ? structural_copy(root) : json_null();
    if (!copy) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while copying the config");
    } else {
        c = config_build(copy, bind, errs);
    }
    adm_errors_clear(&local);
    return c;
}

struct adm_config *adm_config_from_json(const json_t *root, struct adm_errors *errs)
{
    return adm_config_from_json_bound(root, NULL, errs);
}

/* Adds "<path>: <why errno <err> says>" to <errs>, about the whole document. */
static void file_error(struct adm_errors *errs, const char *path, int err)
{
    char ebuf[128];

    if (strerror_r(err, ebuf, sizeof(ebuf)) != 0)
        snprintf(ebuf, sizeof(ebuf), "error %d", err);
    adm_errors_add(errs, "", "%s: %s", path, ebuf);
}

char *adm_config_read_file(FILE *f, const char *path, size_t *len, struct adm_errors *errs)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;

    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16384;
            if (ncap > MAX_FILE + 1)
                ncap = MAX_FILE + 1;
            if (n == ncap)
                goto fail_large;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                errno = ENOMEM;
                goto fail_read;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                goto fail_read;
            break;
        }
    }
    if (n > MAX_FILE)
        goto fail_large;
    *len = n;
    return buf;

fail_large:
    adm_errors_add(errs, "", "%s: larger than %u bytes", path, MAX_FILE);
    free(buf);
    return NULL;
fail_read:
    if (errno == ENOMEM)
        errs->nomem = 1;
    file_error(errs, path, errno);
    free(buf);
    return NULL;
}

struct adm_config *adm_config_load_file_text(const char *path, char **text, size_t *len,
                                             struct adm_errors *errs)
{
    struct adm_errors local;
    struct adm_config *c = NULL;
    char *buf;
    size_t n;
    FILE *f;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    if (!(f = fopen(path, "rb"))) {
        file_error(errs, path, errno);
    } else {
        buf = adm_config_read_file(f, path, &n, errs);
        fclose(f);
        if (buf && (c = parse_named(buf, n, path, errs)) && text) {
            *text = buf;
            *len = n;
            buf = NULL;
        }
        free(buf);
    }
    adm_errors_clear(&local);
    return c;
}

struct adm_config *adm_config_load_file(const char *path, struct adm_errors *errs)
{
    return adm_config_load_file_text(path, NULL, NULL, errs);
}

void adm_config_free(struct adm_config *c)
{
    if (!c)
        return;
    adm_cf_listeners_free(c);
    adm_cf_upstreams_free(c);
    adm_cf_routes_free(c);
    adm_cf_policies_free(c);
    adm_cf_settings_free(c);
    adm_cf_admin_free(c);
    adm_fleet_cfg_free(c->fleet);
    rt_table_free(c->table);
    json_decref(c->json);
    free(c);
}

char *adm_config_canonical(const struct adm_config *c)
{
    return json_dumps(c->json, JSON_SORT_KEYS | JSON_COMPACT);
}

unsigned adm_config_workers(const struct adm_config *c)
{
    if (c->workers)
        return c->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > 256 ? 256 : (unsigned)n;
}

const struct adm_upstream *adm_config_upstream(const struct adm_config *c, const char *name)
{
    for (size_t i = 0; i < c->nupstreams; i++)
        if (c->upstreams[i].name && !strcmp(c->upstreams[i].name, name))
            return &c->upstreams[i];
    return NULL;
}

const struct adm_route *adm_config_route(const struct adm_config *c, const char *id)
{
    for (size_t i = 0; i < c->nroutes; i++)
        if (c->routes[i].id && !strcmp(c->routes[i].id, id))
            return &c->routes[i];
    return NULL;
}

/* ---- the built-in default config ---- */

static const char default_json[] =
    "{\n"
    "  \"listeners\": [{\"address\": \"0.0.0.0:8080\"}],\n"
    "  \"upstreams\": {},\n"
    "  \"routes\": [\n"
    "    {\"id\": \"welcome\", \"methods\": [\"GET\"], \"path\": \"/\",\n"
    "     \"response\": {\"status\": 200,\n"
    "                  \"headers\": {\"Content-Type\": \"text/plain; charset=utf-8\"},\n"
    "                  \"body\": \"Switchyard is running.\\n\\n"
    "This is the built-in default config: this page on GET /, no upstreams yet.\\n"
    "Push your own config to the admin API (loopback only by default), starting\\n"
    "from this one:\\n\\n"
    "  switchyard --print-default > switchyard.json    # then edit it\\n"
    "  curl -X PUT http://127.0.0.1:9901/config -H 'Content-Type: application/json' \\\\\\n"
    "       --data-binary @switchyard.json\\n\\n"
    "or add an upstream and a route to the running config:\\n\\n"
    "  curl -X POST http://127.0.0.1:9901/upstreams -H 'Content-Type: application/json' \\\\\\n"
    "       -d '{\\\"name\\\": \\\"app\\\", "
    "\\\"servers\\\": [{\\\"address\\\": \\\"127.0.0.1:3000\\\"}]}'\\n"
    "  curl -X POST http://127.0.0.1:9901/routes -H 'Content-Type: application/json' \\\\\\n"
    "       -d '{\\\"id\\\": \\\"app\\\", \\\"path\\\": \\\"/*{rest}\\\", "
    "\\\"upstream\\\": \\\"app\\\"}'\\n\\n"
    "GET http://127.0.0.1:9901/config shows the live config.\\n\"}}\n"
    "  ],\n"
    "  \"admin\": {\"address\": \"127.0.0.1:9901\"}\n"
    "}\n";

const char *adm_config_default_json(void)
{
    return default_json;
}

struct adm_config *adm_config_default(void)
{
    return adm_config_parse(default_json, sizeof(default_json) - 1, NULL);
}
