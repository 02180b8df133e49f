/*
 * config_routes.c - the "routes" section: each route's id, host, methods,
 * path and one action (upstream with strip_prefix or rewrite and the
 * Upgrade protocols it tunnels, a direct
 * response, a redirect), checked against each other; and the router table
 * built from the routes, whose conflicts are reported with both routes.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void route_id(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;
    if (!s)
        return;
    if (!adm_cf_is_name(s, "_.:-", ADM_CF_MAX_NAME)) {
        adm_cf_err(x, "invalid route id %s (use 1..%d letters, digits, '_', '.', ':', '-')",
                   adm_cf_quote(&q, s), ADM_CF_MAX_NAME);
        return;
    }
    r->id = adm_cf_strdup(x, s);
}

static void route_host(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    if (strchr(s, '/')) {
        adm_cf_err(x, "a host pattern must not contain '/'");
        return;
    }
    r->host = adm_cf_strdup(x, s);
}

static void route_path(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        adm_cf_err(x, "must start with '/' (put a host in \"host\")");
        return;
    }
    r->path = adm_cf_strdup(x, s);
}

static const char *const known_methods[] = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                            "CONNECT", "OPTIONS", "TRACE", "PATCH"};

/* Checks string <s>, element <i> of a list whose path is x->path up to
 * <mark>, and stores it (or not) in <m>[i]; returns 0 when it is invalid. */
typedef int (*route_list_elem)(struct adm_cf *x, const char *s, char **m, size_t i, size_t mark);

/* Reads the array of strings <v> through <elem> into *<out> and *<n>, or
 * nothing when an element is invalid (after reporting it). */
static void route_list(struct adm_cf *x, const json_t *v, route_list_elem elem, char ***out,
                       size_t *nout)
{
    size_t n = json_array_size(v);
    char **m = adm_cf_calloc(x, n, sizeof(*m));
    if (!m)
        return;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        if (!s || !elem(x, s, m, i, mark))
            ok = 0;
        adm_cf_pop(x, mark);
    }
    if (!ok || x->nomem) {
        for (size_t i = 0; i < n; i++)
            free(m[i]);
        free(m);
        return;
    }
    *out = m;
    *nout = n;
}

static int method_elem(struct adm_cf *x, const char *s, char **m, size_t i, size_t mark)
{
    struct adm_cf_qbuf q;
    int ok = 1;

    if (!strcmp(s, "*")) {
        adm_cf_err(x, "\"*\" is not a method (leave \"methods\" out for every method)");
        return 0;
    }
    if (!h1_is_token(s, strlen(s)) || strlen(s) > 32) {
        adm_cf_err(x, "invalid method %s (an HTTP token of at most 32 characters)",
                   adm_cf_quote(&q, s));
        return 0;
    }
    for (size_t k = 0; k < NFIELDS(known_methods); k++) {
        if (strcmp(s, known_methods[k]) && !strcasecmp(s, known_methods[k])) {
            adm_cf_err(x, "methods are case-sensitive: did you mean \"%s\"?", known_methods[k]);
            ok = 0;
        }
    }
    for (size_t k = 0; k < i; k++) {
        if (m[k] && !strcmp(m[k], s)) {
            adm_cf_err(x, "duplicate method %s (also %.*s/%zu)", adm_cf_quote(&q, s), (int)mark,
                       x->path, k);
            ok = 0;
        }
    }
    m[i] = adm_cf_strdup(x, s);
    return ok;
}

static void route_methods(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (!adm_cf_want_array(x, v))
        return;
    if (json_array_size(v) == 0) {
        adm_cf_err(x, "must not be empty (leave \"methods\" out for every method)");
        return;
    }
    route_list(x, v, method_elem, &r->methods, &r->nmethods);
}

static void route_upstream(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (s)
        r->upstream = adm_cf_strdup(x, s);
}

/* A direct response may not set the framing the gateway computes nor the
 * fields of the connection it manages (h1_conn_fields). */
static int response_name_ok(struct adm_cf *x, const char *name, const void *arg)
{
    const struct h1_slice n = {name, strlen(name)};
    int f = h1_conn_field(&n);

    (void)arg;
    if (f < 0)
        return 1;
    adm_cf_err(x, "%s is set by the gateway and cannot be configured", h1_conn_fields[f].name);
    return 0;
}

static void response_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    adm_cf_header_fields(x, v, response_name_ok, NULL, 0, &r->response.headers,
                         &r->response.nheaders);
}

static void response_body(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 0);
    if (!s)
        return;
    free(r->response.body);
    r->response.body = adm_cf_strdup(x, s);
    r->response.body_len = strlen(s);
}

static const struct adm_cf_field response_fields[] = {
    {.key = "status",
     .kind = FK_UINT,
     .off = offsetof(struct adm_route, response.status),
     .min = 200,
     .max = 599},
    {.key = "headers", .kind = FK_FN, .fn = response_headers},
    {.key = "body", .kind = FK_FN, .fn = response_body},
};

static void route_response(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (!adm_cf_want_object(x, v))
        return;
    adm_cf_fields(x, v, response_fields, NFIELDS(response_fields), r);
    if ((r->response.status == 204 || r->response.status == 304) && r->response.body_len)
        adm_cf_err_key(x, "body", "a %u response has no body", r->response.status);
}

static void redirect_status(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    long long s;
    if (adm_cf_int(x, v, 300, 399, &s) < 0)
        return;
    if (s != 301 && s != 302 && s != 303 && s != 307 && s != 308) {
        adm_cf_err(x, "must be one of 301, 302, 303, 307, 308 (got %lld)", s);
        return;
    }
    r->redirect.status = (unsigned)s;
}

static void redirect_location(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    for (size_t i = 0; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f) {
            adm_cf_err(x, "%s at offset %zu (a URI has no spaces or control characters)",
                       ch == ' ' ? "space" : "control character", i);
            return;
        }
    }
    r->redirect.location = adm_cf_strdup(x, s);
}

static const struct adm_cf_field redirect_fields[] = {
    {.key = "status", .kind = FK_FN, .fn = redirect_status},
    {.key = "location", .kind = FK_FN, .flags = F_REQUIRED, .fn = redirect_location},
};

static void route_redirect(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (adm_cf_want_object(x, v))
        adm_cf_fields(x, v, redirect_fields, NFIELDS(redirect_fields), r);
}

static void route_strip_prefix(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        adm_cf_err(x, "must start with '/'");
        return;
    }
    r->strip_prefix = adm_cf_strdup(x, s);
}

/* Checks the syntax of a rewrite template: '/' first, visible ASCII except
 * '#', {name} references. Parameter names are checked against the pattern
 * later (route_check_rewrite). */
static void route_rewrite(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        adm_cf_err(x, "must start with '/'");
        return;
    }
    for (size_t i = 0; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '{') {
            size_t j = i + 1;
            /* the router's rule: a name is anything but { } / * : */
            while (s[j] > 0x20 && s[j] < 0x7f && !strchr("{}/*:#", s[j]))
                j++;
            if (s[j] != '}') {
                adm_cf_err(x,
                           s[j] ? "invalid parameter name at offset %zu"
                                : "unterminated '{' at offset %zu",
                           s[j] ? j : i);
                return;
            }
            if (j == i + 1) {
                adm_cf_err(x, "empty parameter name at offset %zu", i);
                return;
            }
            i = j;
        } else if (ch == '}') {
            adm_cf_err(x, "stray '}' at offset %zu", i);
            return;
        } else if (ch <= 0x20 || ch >= 0x7f || ch == '#') {
            adm_cf_err(x, "invalid character at offset %zu (percent-encode it)", i);
            return;
        }
    }
    r->rewrite = adm_cf_strdup(x, s);
}

/* The Upgrade protocols a route tunnels: tokens, never "h2c" (a raw HTTP/2
 * channel to the backend past every route: h2c smuggling). */
static int upgrade_elem(struct adm_cf *x, const char *s, char **m, size_t i, size_t mark)
{
    struct adm_cf_qbuf q;

    (void)mark;
    if (!h1_is_token(s, strlen(s))) {
        adm_cf_err(x, "invalid protocol %s (an HTTP token, without a version)",
                   adm_cf_quote(&q, s));
        return 0;
    }
    if (!strcasecmp(s, "h2c")) {
        adm_cf_err(x, "\"h2c\" is never tunnelled (it would give clients a raw HTTP/2 channel "
                      "to the backend past every route)");
        return 0;
    }
    m[i] = adm_cf_strdup(x, s);
    return 1;
}

static void route_upgrades(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (adm_cf_want_array(x, v))
        route_list(x, v, upgrade_elem, &r->upgrades, &r->nupgrades);
}

static void route_request_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    adm_cf_hdr_actions(x, v, &r->request_headers, 0);
}

static void route_response_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    adm_cf_hdr_actions(x, v, &r->response_headers, 1);
}

static const struct adm_cf_field route_fields[] = {
    {.key = "id", .kind = FK_FN, .flags = F_REQUIRED, .fn = route_id},
    {.key = "host", .kind = FK_FN, .fn = route_host},
    {.key = "methods", .kind = FK_FN, .fn = route_methods},
    {.key = "path", .kind = FK_FN, .flags = F_REQUIRED, .fn = route_path},
    {.key = "upstream", .kind = FK_FN, .fn = route_upstream},
    {.key = "response", .kind = FK_FN, .fn = route_response},
    {.key = "redirect", .kind = FK_FN, .fn = route_redirect},
    {.key = "strip_prefix", .kind = FK_FN, .fn = route_strip_prefix},
    {.key = "rewrite", .kind = FK_FN, .fn = route_rewrite},
    {.key = "timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_route, timeout_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "request_buffering",
     .kind = FK_BOOL,
     .off = offsetof(struct adm_route, request_buffering)},
    {.key = "max_buffered_body_bytes",
     .kind = FK_U64,
     .off = offsetof(struct adm_route, max_buffered_body_bytes),
     .min = 1,
     .max = 1LL << 30},
    {.key = "upgrades", .kind = FK_FN, .fn = route_upgrades},
    {.key = "request_headers", .kind = FK_FN, .fn = route_request_headers},
    {.key = "response_headers", .kind = FK_FN, .fn = route_response_headers},
    {.key = "policies", .kind = FK_FN, .fn = adm_cf_route_policies},
};

enum {
    RF_ID,
    RF_HOST,
    RF_METHODS,
    RF_PATH,
    RF_UPSTREAM,
    RF_RESPONSE,
    RF_REDIRECT,
    RF_STRIP,
    RF_REWRITE,
    RF_TIMEOUT,
    RF_BUFFERING,
    RF_MAXBUF,
    RF_UPGRADES,
    RF_REQH,
    RF_RESPH,
};
#define RBIT(f) (UINT32_C(1) << (f))

/* The pattern's parameter names come from the router, which knows regexps
 * ("{id:[0-9]{3}}" names "id") and catch-alls. */
int adm_pattern_param_index(const char *p, const char *name, size_t len)
{
    size_t off, n;

    for (size_t i = 0; rt_pattern_param(p, i, &off, &n) == 0; i++)
        if (n == len && !memcmp(p + off, name, len))
            return (int)i;
    return -1;
}

static void pattern_param_list(const char *p, char *buf, size_t cap)
{
    size_t o = 0, off, len;
    buf[0] = '\0';
    for (size_t i = 0; o < cap && rt_pattern_param(p, i, &off, &len) == 0; i++) {
        int n = snprintf(buf + o, cap - o, "%s%.*s", o ? ", " : "", (int)len, p + off);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* Every {name} of the rewrite template names a parameter of the pattern. */
static void route_check_rewrite(struct adm_cf *x, const struct adm_route *r)
{
    const char *s = r->rewrite;
    for (const char *o = strchr(s, '{'); o; o = strchr(o + 1, '{')) {
        const char *e = strchr(o, '}');
        size_t len = (size_t)(e - o - 1);
        if (adm_pattern_param_index(r->pattern, o + 1, len) >= 0)
            continue;
        char have[200];
        pattern_param_list(r->pattern, have, sizeof(have));
        if (have[0])
            adm_cf_err_key(x, "rewrite",
                           "unknown parameter \"%.*s\" at offset %zu (the pattern has: %s)",
                           (int)len, o + 1, (size_t)(o - s), have);
        else
            adm_cf_err_key(
                x, "rewrite",
                "unknown parameter \"%.*s\" at offset %zu (the pattern has no parameters)",
                (int)len, o + 1, (size_t)(o - s));
    }
}

/* Builds r->pattern and checks it with the router; maps the router's offset
 * back to "host" or "path". Returns 0 when the pattern is valid. */
static int route_check_pattern(struct adm_cf *x, struct adm_route *r)
{
    size_t hl = r->host ? strlen(r->host) : 0, pl = strlen(r->path);
    r->pattern = adm_cf_calloc(x, hl + pl + 1, 1);
    if (!r->pattern)
        return -1;
    if (hl)
        memcpy(r->pattern, r->host, hl);
    memcpy(r->pattern + hl, r->path, pl + 1);

    struct rt_error e;
    memset(&e, 0, sizeof(e));
    if (rt_pattern_check(r->pattern, &e) == 0)
        return 0;
    /* the router's message starts with its own offset, in host + path:
     * the one said here is relative to the field */
    const char *why = e.msg, *colon = strstr(e.msg, ": ");
    if (strncmp(why, "offset ", 7) == 0 && colon)
        why = colon + 2;
    if (e.code == RT_ENOMEM) {
        x->nomem = 1;
    } else if (hl && e.offset < hl) {
        adm_cf_err_key(x, "host", "invalid host pattern at offset %zu: %s", e.offset, why);
    } else {
        adm_cf_err_key(x, "path", "invalid pattern at offset %zu: %s", e.offset - hl, why);
    }
    return -1;
}

/* The static text every path the pattern matches starts with. */
static size_t static_prefix_len(const char *path)
{
    size_t n = strcspn(path, "{");
    if (path[n] == '{' && n > 0 && path[n - 1] == '*')
        n--;
    return n;
}

/* Checks across a route's keys once they are all parsed. */
static void route_check(struct adm_cf *x, struct adm_route *r, uint32_t seen, size_t idx)
{
    static const int actions[] = {RF_UPSTREAM, RF_RESPONSE, RF_REDIRECT};
    const char *first = NULL;

    for (size_t i = 0; i < NFIELDS(actions); i++) {
        if (!(seen & RBIT(actions[i])))
            continue;
        if (first)
            adm_cf_err_key(x, route_fields[actions[i]].key,
                           "a route has exactly one action, and this one already has \"%s\"",
                           first);
        else {
            first = route_fields[actions[i]].key;
            r->action = (enum adm_action)(ADM_ACTION_UPSTREAM + i);
        }
    }
    if (!first)
        adm_cf_err(x, "needs an action: one of \"upstream\", \"response\", \"redirect\"");
    if (first && r->action != ADM_ACTION_UPSTREAM) {
        static const int upstream_only[] = {RF_STRIP,  RF_REWRITE,  RF_TIMEOUT, RF_BUFFERING,
                                            RF_MAXBUF, RF_UPGRADES, RF_REQH,    RF_RESPH};
        for (size_t i = 0; i < NFIELDS(upstream_only); i++)
            if (seen & RBIT(upstream_only[i]))
                adm_cf_err_key(x, route_fields[upstream_only[i]].key,
                               "only allowed with \"upstream\" (this route has \"%s\")", first);
    }
    if ((seen & RBIT(RF_STRIP)) && (seen & RBIT(RF_REWRITE)))
        adm_cf_err_key(x, "rewrite", "not allowed together with \"strip_prefix\"");
    x->route_timeout[idx] = (seen & RBIT(RF_TIMEOUT)) != 0;
    if (!(seen & RBIT(RF_BUFFERING)))
        r->request_buffering = -1; /* the upstream's, resolved with the references */

    /* Without a valid path, host and methods there is nothing to check
     * against the router. */
    if (!r->path || ((seen & RBIT(RF_HOST)) && !r->host) ||
        ((seen & RBIT(RF_METHODS)) && !r->methods))
        return;
    if (route_check_pattern(x, r) < 0)
        return;
    x->route_ok[idx] = 1;
    if (r->rewrite)
        route_check_rewrite(x, r);
    adm_cf_hdr_actions_check(x, "request_headers", r->request_headers, r->pattern);
    adm_cf_hdr_actions_check(x, "response_headers", r->response_headers, r->pattern);
    if (r->strip_prefix) {
        size_t sp = strlen(r->strip_prefix);
        if (sp > static_prefix_len(r->path) || memcmp(r->strip_prefix, r->path, sp))
            adm_cf_err_key(
                x, "strip_prefix",
                "is not a prefix of every path the route matches (the path pattern starts "
                "with \"%.*s\")",
                (int)static_prefix_len(r->path), r->path);
    }
}

/* limits.max_routes as the document sets it, wherever "limits" comes in
 * it; the default when it does not set it, or sets it wrong (the limits
 * parser reports that). */
static unsigned max_routes(const struct adm_cf *x)
{
    const json_t *m = json_object_get(json_object_get(x->c->json, "limits"), "max_routes");
    json_int_t v = json_integer_value(m);

    return json_is_integer(m) && v >= 1 && v <= ADM_CF_MAX_ROUTES ? (unsigned)v
                                                                  : x->c->limits.max_routes;
}

void adm_cf_routes(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!adm_cf_want_array(x, v))
        return;
    size_t n = json_array_size(v);
    unsigned max = max_routes(x);
    if (n > max) {
        /* refused before a route is parsed: the cap bounds what a config costs */
        adm_cf_err(x, ADM_MAX_ROUTES_ERR, n, max);
        return;
    }
    c->routes = adm_cf_calloc(x, n, sizeof(*c->routes));
    x->route_ok = adm_cf_calloc(x, n, 1);
    x->route_timeout = adm_cf_calloc(x, n, 1);
    json_t *ids = json_object();
    if (!c->routes || !x->route_ok || !x->route_timeout || !ids) {
        x->nomem = 1;
        json_decref(ids);
        return;
    }
    c->nroutes = n;
    for (size_t i = 0; i < n && !x->nomem; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const json_t *rv = json_array_get(v, i);
        struct adm_route *r = &c->routes[i];
        r->response.status = 200;
        r->redirect.status = 302;
        if (adm_cf_want_object(x, rv)) {
            uint32_t seen = adm_cf_fields(x, rv, route_fields, NFIELDS(route_fields), r);
            route_check(x, r, seen, i);
        }
        if (!r->response.body)
            r->response.body = adm_cf_strdup(x, "");
        if (r->id) {
            json_t *other = json_object_get(ids, r->id);
            struct adm_cf_qbuf q;
            if (other)
                adm_cf_err_key(x, "id", "duplicate route id %s (also /routes/%lld)",
                               adm_cf_quote(&q, r->id), (long long)json_integer_value(other));
            else if (json_object_set_new(ids, r->id, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        adm_cf_pop(x, mark);
    }
    json_decref(ids);
}

static void route_free(struct adm_route *r)
{
    free(r->id);
    free(r->host);
    free(r->path);
    free(r->pattern);
    for (size_t i = 0; i < r->nmethods; i++)
        free(r->methods[i]);
    free(r->methods);
    free(r->upstream);
    free(r->strip_prefix);
    free(r->rewrite);
    for (size_t i = 0; i < r->nupgrades; i++)
        free(r->upgrades[i]);
    free(r->upgrades);
    adm_hdr_actions_free(r->request_headers);
    adm_hdr_actions_free(r->response_headers);
    adm_cf_header_fields_free(r->response.headers, r->response.nheaders);
    free(r->response.body);
    free(r->redirect.location);
    for (size_t i = 0; i < r->npolicies; i++)
        free(r->policies[i]);
    free(r->policies);
}

void adm_cf_routes_free(struct adm_config *c)
{
    for (size_t i = 0; i < c->nroutes; i++)
        route_free(&c->routes[i]);
    free(c->routes);
}

/* ---- building the router table ---- */

/* "GET,POST" or "any method" for <r>. */
static void route_methods_text(const struct adm_route *r, char *buf, size_t cap)
{
    size_t o = 0;
    if (!r || !r->nmethods) {
        snprintf(buf, cap, "any method");
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < r->nmethods && o < cap; i++) {
        int n = snprintf(buf + o, cap - o, "%s%s", i ? "," : "", r->methods[i]);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* Inserts the routes of <c> (only those with ok[i], when <ok> is given) into
 * a new table. Errors go to <errs>, counted in *nerr; out of memory sets
 * *nomem. Returns the table, or NULL when anything failed. */
rt_table *adm_cf_build_routes(const struct adm_config *c, const unsigned char *ok,
                              void *(*make_udata)(const struct adm_route *r, void *arg),
                              void (*udata_free)(void *udata), void *arg, struct adm_errors *errs,
                              size_t *nerr, int *nomem)
{
    struct rt_options o = {.trailing_slash = c->router.trailing_slash,
                           .auto_options = c->router.auto_options};
    rt_table *t = rt_table_new(&o, udata_free);
    rt_txn *tx = t ? rt_txn_begin(t) : NULL;
    size_t failed = 0;

    if (!tx) {
        *nomem = 1;
        goto fail_txn;
    }
    for (size_t i = 0; i < c->nroutes && !*nomem; i++) {
        const struct adm_route *r = &c->routes[i];
        if (ok ? !ok[i] : !r->pattern)
            continue;
        void *udata = make_udata ? make_udata(r, arg) : (void *)r;
        if (!udata) {
            *nomem = 1;
            break;
        }
        struct rt_error e;
        memset(&e, 0, sizeof(e));
        if (rt_txn_insert(tx, (const char *const *)r->methods, r->nmethods, r->pattern, r->id,
                          udata, &e) == 0)
            continue;
        if (make_udata && udata_free)
            udata_free(udata);
        failed++;
        char path[64];
        snprintf(path, sizeof(path), "/routes/%zu/%s", i,
                 e.code == RT_ELIMIT && r->nmethods ? "methods" : "path");
        int rc;
        if (e.code == RT_ENOMEM) {
            *nomem = 1;
            rc = 0;
        } else if (e.code == RT_ECONFLICT && e.other) {
            /* our own udata is the route; otherwise find it by its id */
            const char *oname = rt_route_name(e.other);
            const struct adm_route *other = !make_udata ? rt_route_udata(e.other)
                                            : oname     ? adm_config_route(c, oname)
                                                        : NULL;
            char mtext[160];
            route_methods_text(other, mtext, sizeof(mtext));
            if (oname)
                rc = adm_errors_add(errs, path, "conflicts with route \"%s\" (%s %s)", oname, mtext,
                                    rt_route_pattern(e.other));
            else if (other)
                rc = adm_errors_add(errs, path, "conflicts with /routes/%zu (%s %s)",
                                    (size_t)(other - c->routes), mtext, rt_route_pattern(e.other));
            else
                rc = adm_errors_add(errs, path, "conflicts with another route (%s)",
                                    rt_route_pattern(e.other));
        } else {
            rc = adm_errors_add(errs, path, "%s", e.msg);
        }
        (*nerr)++;
        if (rc < 0)
            *nomem = 1;
    }
    if (failed || *nomem)
        goto fail_insert;
    rt_table *next = rt_txn_commit(tx);
    rt_table_free(t);
    if (!next)
        *nomem = 1;
    return next;

fail_insert:
    rt_txn_abort(tx);
fail_txn:
    rt_table_free(t);
    return NULL;
}

rt_table *adm_config_build_routes(const struct adm_config *c,
                                  void *(*make_udata)(const struct adm_route *r, void *arg),
                                  void (*udata_free)(void *udata), void *arg,
                                  struct adm_errors *errs)
{
    struct adm_errors local;
    size_t nerr = 0;
    int nomem = 0;

    adm_errors_init(&local);
    rt_table *t = adm_cf_build_routes(c, NULL, make_udata, udata_free, arg, errs ? errs : &local,
                                      &nerr, &nomem);
    if (nomem && errs)
        errs->nomem = 1;
    adm_errors_clear(&local);
    return t;
}
