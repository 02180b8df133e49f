/*
 * config_upstreams.c - the "upstreams" section: an object of named pools,
 * each with its servers (address, weight), balancer and idle-connection
 * keys. A pool key is a row in upstream_fields, a server key a row in
 * server_fields; the HTTP/2 and gRPC keys' functions are
 * config_upstream_h2.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/tls.h"
#include "upstream/upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void server_address(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_server *s = target;
    const char *str = adm_cf_str(x, v, 1);
    char why[128];
    struct adm_cf_qbuf q;

    if (!str)
        return;
    if (strstr(str, "://")) {
        /* a URL, as nginx's proxy_pass takes: the parser would call it a bad IPv6 address */
        adm_cf_err(x,
                   "invalid address %s: a server is HOST:PORT, without a scheme (TLS to the "
                   "servers is the pool's \"tls\")",
                   adm_cf_quote(&q, str));
        return;
    }
    if (adm_addr_parse(&s->addr, str, 1, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            adm_cf_err(x, "invalid address %s: %s", adm_cf_quote(&q, str), why);
    }
}

static const struct adm_cf_field server_fields[] = {
    {.key = "address", .kind = FK_FN, .flags = F_REQUIRED, .fn = server_address},
    {.key = "weight",
     .kind = FK_UINT,
     .off = offsetof(struct adm_server, weight),
     .min = 1,
     .max = 1000},
};

static void upstream_servers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_upstream *u = target;
    if (!adm_cf_want_array(x, v))
        return;
    size_t n = json_array_size(v);
    if (n == 0) {
        adm_cf_err(x, "needs at least one server");
        return;
    }
    u->servers = adm_cf_calloc(x, n, sizeof(*u->servers));
    json_t *seen = json_object();
    if (!u->servers || !seen) {
        x->nomem = 1;
        json_decref(seen);
        return;
    }
    u->nservers = n;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const json_t *sv = json_array_get(v, i);
        struct adm_server *s = &u->servers[i];
        s->weight = 1;
        if (adm_cf_want_object(x, sv))
            adm_cf_fields(x, sv, server_fields, NFIELDS(server_fields), s);
        if (s->addr.text) {
            char key[300];
            adm_addr_key(&s->addr, key, sizeof(key));
            json_t *other = json_object_get(seen, key);
            if (other)
                adm_cf_err_key(x, "address", "duplicate server (also %.*s/%lld/address)", (int)mark,
                               x->path, (long long)json_integer_value(other));
            else if (json_object_set_new(seen, key, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        adm_cf_pop(x, mark);
    }
    json_decref(seen);
}

/* What the balancers (<balance> 1) and hash keys (0) of nginx, HAProxy and
 * Envoy are called here, for the error a user who knows them gets. */
static const struct {
    int balance;
    const char *theirs, *ours;
} known_as[] = {
    {1, "roundrobin", "\"round_robin\""},
    {1, "leastconn", "\"least_conn\""},
    {1, "least_request", "\"random_two\" (or \"least_conn\")"},
    {1, "random", "\"random_two\""},
    {1, "ip_hash", "\"hash\" (its hash_key is client_ip by default)"},
    {1, "source", "\"hash\" (its hash_key is client_ip by default)"},
    {1, "uri", "\"hash\" with \"hash_key\": \"path\""},
    {1, "consistent_hash", "\"hash\" (a Maglev table)"},
    {1, "maglev", "\"hash\" (a Maglev table)"},
    {1, "ring_hash", "\"hash\" (a Maglev table)"},
    {0, "ip", "\"client_ip\""},
    {0, "source", "\"client_ip\""},
    {0, "remote_addr", "\"client_ip\""},
    {0, "uri", "\"path\""},
    {0, "url", "\"path\""},
    {0, "header", "\"header:NAME\", e.g. \"header:X-User\""},
    {0, "cookie", "\"cookie:NAME\", e.g. \"cookie:session\""},
};

/* The value to write here for <s>, another proxy's name for a balancer
 * (<balance> 1) or a hash key (0); NULL when it is none of known_as. */
static const char *ours_for(const char *s, int balance)
{
    for (size_t i = 0; i < NFIELDS(known_as); i++)
        if (known_as[i].balance == balance && !strcmp(s, known_as[i].theirs))
            return known_as[i].ours;
    return NULL;
}

static void upstream_balance(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"round_robin", "least_conn", "random_two", "hash"};
    struct adm_upstream *u = target;
    const char *ours = json_is_string(v) ? ours_for(json_string_value(v), 1) : NULL;
    struct adm_cf_qbuf q;

    if (ours) {
        adm_cf_err(x,
                   "invalid value %s (expected one of \"round_robin\", \"least_conn\", "
                   "\"random_two\", \"hash\"): write %s",
                   adm_cf_quote(&q, json_string_value(v)), ours);
        return;
    }
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        u->balance = (enum adm_balance)i;
}

/* "client_ip", "path", "header:NAME" or "cookie:NAME" (NAME a token). */
static void upstream_hash_key(struct adm_cf *x, const json_t *v, void *target)
{
    static const struct {
        const char *prefix;
        enum adm_hash_on on;
        int named;
    } keys[] = {{"client_ip", ADM_HASH_CLIENT_IP, 0},
                {"path", ADM_HASH_PATH, 0},
                {"header:", ADM_HASH_HEADER, 1},
                {"cookie:", ADM_HASH_COOKIE, 1}};
    struct adm_upstream *u = target;
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;

    if (!s)
        return;
    for (size_t i = 0; i < NFIELDS(keys); i++) {
        size_t n = strlen(keys[i].prefix);
        if (keys[i].named ? strncmp(s, keys[i].prefix, n) != 0 : strcmp(s, keys[i].prefix) != 0)
            continue;
        u->hash_on = keys[i].on;
        if (!keys[i].named)
            return;
        if (!h1_is_token(s + n, strlen(s + n)) || strlen(s + n) > 256)
            adm_cf_err(x, "invalid %s name %s (1..256 token characters)",
                       keys[i].on == ADM_HASH_HEADER ? "header" : "cookie",
                       adm_cf_quote(&q, s + n));
        else
            u->hash_name = adm_cf_strdup(x, s + n);
        return;
    }
    const char *ours = ours_for(s, 0);
    adm_cf_err(x,
               "invalid value %s (expected \"client_ip\", \"path\", \"header:NAME\" or "
               "\"cookie:NAME\")%s%s",
               adm_cf_quote(&q, s), ours ? ": write " : "", ours ? ours : "");
}

/* Adds the codes <lo>..<hi> to <set>. */
static void statuses_range(struct adm_statuses *set, long long lo, long long hi)
{
    for (long long c = lo; c <= hi; c++)
        set->bits[c / 64] |= UINT64_C(1) << (c % 64);
}

/* Why string <s> is no "LO-HI" range, for the two forms users write
 * instead: a code in quotes ("503") and a class ("5xx"). */
static void statuses_bad_range(struct adm_cf *x, const char *s)
{
    struct adm_cf_qbuf q;
    size_t n = strspn(s, "0123456789");

    if (n == 3 && !s[n])
        adm_cf_err(x, "invalid status range %s (a single code is a number: %s, without quotes)",
                   adm_cf_quote(&q, s), s);
    else if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' && (s[1] | 0x20) == 'x' &&
             (s[2] | 0x20) == 'x')
        adm_cf_err(x, "invalid status range %s (expected \"LO-HI\": \"%c00-%c99\")",
                   adm_cf_quote(&q, s), s[0], s[0]);
    else
        adm_cf_err(x, "invalid status range %s (expected \"LO-HI\", e.g. \"200-399\")",
                   adm_cf_quote(&q, s));
}

/* One element of a status set: a code, or a range "LO-HI", none of it
 * below <min>. */
static void statuses_add(struct adm_cf *x, const json_t *v, struct adm_statuses *set, long long min)
{
    long long lo, hi;
    struct adm_cf_qbuf q;

    if (json_is_integer(v)) {
        if (adm_cf_int(x, v, 100, 599, &lo) < 0)
            return;
        hi = lo;
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        lo = strtoll(s, &end, 10);
        if (end == s || *end != '-' || !is_digit((unsigned char)end[1]) ||
            (hi = strtoll(end + 1, &end, 10), *end) || errno || !is_digit((unsigned char)*s)) {
            statuses_bad_range(x, s);
            return;
        }
        if (lo < 100 || hi > 599 || lo > hi) {
            adm_cf_err(x, "invalid status range %s (100 <= LO <= HI <= 599)", adm_cf_quote(&q, s));
            return;
        }
    } else {
        adm_cf_err(x, "expected a status code or a range string, got %s", adm_cf_type_name(v));
        return;
    }
    if (lo < min) {
        adm_cf_err(x, "%lld is %s, not a failure: only %lld-599 can be retried", lo,
                   lo < 200 ? "interim (the answer follows it)" : "an answer", min);
        return;
    }
    statuses_range(set, lo, hi);
}

/* A set of statuses: a code, a range "LO-HI", or an array of those (an
 * empty array is the empty set), none below <min>. Replaces the default. */
static void statuses(struct adm_cf *x, const json_t *v, struct adm_statuses *set, long long min)
{
    *set = (struct adm_statuses){{0}};
    if (!json_is_array(v)) {
        statuses_add(x, v, set, min);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        statuses_add(x, json_array_get(v, i), set, min);
        adm_cf_pop(x, mark);
    }
}

static void check_expect(struct adm_cf *x, const json_t *v, void *target)
{
    statuses(x, v, &((struct adm_health_check *)target)->expect, 100);
}

static void check_path(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_health_check *h = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
            adm_cf_err(x, "invalid character at offset %zu (percent-encode it)", (size_t)(p - s));
            return;
        }
    if (*s != '/' || strlen(s) > 2048) {
        adm_cf_err(x, "must start with '/' (at most 2048 bytes)");
        return;
    }
    free(h->path);
    h->path = adm_cf_strdup(x, s);
}

static void check_host(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_health_check *h = target;
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;
    if (!s)
        return;
    if (strlen(s) > 255 || !adm_cf_is_name(s, "-._:[]", 255)) {
        adm_cf_err(x, "invalid host %s (a host name or address, with an optional :port)",
                   adm_cf_quote(&q, s));
        return;
    }
    h->host = adm_cf_strdup(x, s);
}

static const struct adm_cf_field check_fields[] = {
    {.key = "path", .kind = FK_FN, .fn = check_path},
    {.key = "host", .kind = FK_FN, .fn = check_host},
    {.key = "interval_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_health_check, interval_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_health_check, timeout_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "expect_status", .kind = FK_FN, .fn = check_expect},
    {.key = "healthy_threshold",
     .kind = FK_UINT,
     .off = offsetof(struct adm_health_check, healthy_threshold),
     .min = 1,
     .max = 1000},
    {.key = "unhealthy_threshold",
     .kind = FK_UINT,
     .off = offsetof(struct adm_health_check, unhealthy_threshold),
     .min = 1,
     .max = 1000},
    {.key = "type", .kind = FK_FN, .fn = adm_cf_check_type},
    {.key = "service", .kind = FK_FN, .fn = adm_cf_check_service},
    /* a setting of the checks, so written here: "unknown key" would not say where it goes */
    {.key = "initially_unhealthy",
     .misplaced = "a key of the pool, not of its health_check: put it next to \"health_check\""},
};

static void upstream_health_check(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_upstream *u = target;
    struct adm_health_check *h;

    if (!adm_cf_want_object(x, v) || !(h = adm_cf_calloc(x, 1, sizeof(*h))))
        return;
    u->health_check = h;
    h->interval_ms = 5000;
    h->timeout_ms = 2000;
    h->healthy_threshold = 2;
    h->unhealthy_threshold = 3;
    statuses_range(&h->expect, 200, 399);
    uint32_t seen = adm_cf_fields(x, v, check_fields, NFIELDS(check_fields), h);
    adm_cf_check_rules(x, v, h);
    if (!h->path && !(h->path = adm_cf_strdup(x, "/")))
        return;
    if (h->timeout_ms > h->interval_ms)
        adm_cf_err_key(x, (seen & (1u << 3)) ? "timeout_ms" : "interval_ms",
                       "timeout_ms (%u) must not exceed interval_ms (%u)", h->timeout_ms,
                       h->interval_ms);
}

static void outlier_statuses(struct adm_cf *x, const json_t *v, void *target)
{
    statuses(x, v, &((struct adm_outlier *)target)->statuses, 100);
}

static const struct adm_cf_field outlier_fields[] = {
    {.key = "consecutive_failures",
     .kind = FK_UINT,
     .off = offsetof(struct adm_outlier, consecutive_failures),
     .min = 0,
     .max = 1000},
    {.key = "statuses", .kind = FK_FN, .fn = outlier_statuses},
    {.key = "base_ejection_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_outlier, base_ejection_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "max_ejection_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_outlier, max_ejection_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "max_ejection_percent",
     .kind = FK_UINT,
     .off = offsetof(struct adm_outlier, max_ejection_percent),
     .min = 1,
     .max = 100},
};

static void upstream_outlier(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_outlier *o = &((struct adm_upstream *)target)->outlier;

    if (!adm_cf_want_object(x, v))
        return;
    uint32_t seen = adm_cf_fields(x, v, outlier_fields, NFIELDS(outlier_fields), o);
    if (o->max_ejection_ms < o->base_ejection_ms)
        adm_cf_err_key(x, (seen & (1u << 3)) ? "max_ejection_ms" : "base_ejection_ms",
                       "max_ejection_ms (%u) must be at least base_ejection_ms (%u)",
                       o->max_ejection_ms, o->base_ejection_ms);
}

/* Only failures are retried: a 1xx is interim, a 2xx or 3xx the answer
 * (retrying it would send every request twice), as nginx's
 * proxy_next_upstream and HAProxy's retry-on take 4xx and 5xx alone. */
static void upstream_retry_on(struct adm_cf *x, const json_t *v, void *target)
{
    statuses(x, v, &((struct adm_upstream *)target)->retry_on_status, 400);
}

static void upstream_tls(struct adm_cf *x, const json_t *v, void *target)
{
    adm_cf_count(
        x, adm_tls_upstream_parse(v, x->path, x->errs, &((struct adm_upstream *)target)->tls));
}

#define UINT_KEY(k, lo, hi)                                                                        \
    {                                                                                              \
        .key = #k, .kind = FK_UINT, .off = offsetof(struct adm_upstream, k), .min = (lo),          \
        .max = (hi)                                                                                \
    }
#define BOOL_KEY(k)                                                                                \
    {                                                                                              \
        .key = #k, .kind = FK_BOOL, .off = offsetof(struct adm_upstream, k)                        \
    }

/* The pool keys; the UF_ enum below names the ones checked after parsing. */
static const struct adm_cf_field upstream_fields[] = {
    {.key = "servers", .kind = FK_FN, .flags = F_REQUIRED, .fn = upstream_servers},
    {.key = "tls", .kind = FK_FN, .fn = upstream_tls},
    {.key = "protocol", .kind = FK_FN, .fn = adm_cf_up_protocol},
    {.key = "balance", .kind = FK_FN, .fn = upstream_balance},
    {.key = "hash_key", .kind = FK_FN, .fn = upstream_hash_key},
    BOOL_KEY(fallback),
    UINT_KEY(table_size, 3, ADM_CF_MAX_TABLE),
    UINT_KEY(keepalive, 0, 100000),
    UINT_KEY(idle_timeout_ms, 1, ADM_CF_MAX_MS),
    UINT_KEY(connect_timeout_ms, 1, ADM_CF_MAX_MS),
    UINT_KEY(response_timeout_ms, 1, ADM_CF_MAX_MS),
    {.key = "health_check", .kind = FK_FN, .fn = upstream_health_check},
    BOOL_KEY(initially_unhealthy),
    {.key = "outlier", .kind = FK_FN, .fn = upstream_outlier},
    BOOL_KEY(panic),
    UINT_KEY(slow_start_ms, 0, ADM_CF_MAX_MS),
    UINT_KEY(retries, 0, 10),
    {.key = "retry_on_status", .kind = FK_FN, .fn = upstream_retry_on},
    {.key = "retry_on_grpc_status", .kind = FK_FN, .fn = adm_cf_up_retry_on_grpc},
    UINT_KEY(retry_budget_percent, 0, 100),
    BOOL_KEY(request_buffering),
    {.key = "max_buffered_body_bytes",
     .kind = FK_U64,
     .off = offsetof(struct adm_upstream, max_buffered_body_bytes),
     .min = 1,
     .max = 1LL << 30},
    UINT_KEY(max_connections, 0, 1000000),
    UINT_KEY(max_pending, 0, 1000000),
    UINT_KEY(queue_timeout_ms, 1, ADM_CF_MAX_MS),
    UINT_KEY(resolve_interval_ms, 1000, ADM_CF_MAX_MS),
    /* a route's key, and the pool's two are named apart */
    {.key = "timeout_ms",
     .misplaced = "a route key; a pool has \"connect_timeout_ms\" and \"response_timeout_ms\" "
                  "(its routes' default timeout_ms)"},
};

enum {
    UF_BALANCE = 3,
    UF_HASH_KEY = 4,
    UF_FALLBACK = 5,
    UF_TABLE_SIZE = 6,
    UF_HEALTH_CHECK = 11,
    UF_INITIALLY_UNHEALTHY = 12
};

/* A pool's defaults, before its keys are read. */
static void upstream_defaults(struct adm_upstream *u)
{
    u->keepalive = 32;
    u->balance = ADM_BALANCE_ROUND_ROBIN;
    u->hash_on = ADM_HASH_CLIENT_IP;
    /* nginx's max_fails=1 fail_timeout=10s: on without the key, counting
     * failures without a response only (a 500 is an answer) */
    u->outlier = (struct adm_outlier){.consecutive_failures = 1,
                                      .base_ejection_ms = 10000,
                                      .max_ejection_ms = 300000,
                                      .max_ejection_percent = 10};
    /* nginx's proxy_next_upstream error timeout: a request no server
     * answered goes to another one */
    u->retries = 2;
    /* what gRPC's own retry policies are written with first: a server
     * that could not take the call (a trailers-only UNAVAILABLE) */
    u->retry_on_grpc_status.bits[0] = UINT64_C(1) << 14;
    u->retry_budget_percent = 20;
    u->max_buffered_body_bytes = 8u << 20;
    u->max_pending = 1024;
    u->queue_timeout_ms = 5000;
    u->resolve_interval_ms = 30000;
}

void adm_cf_upstreams(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    const char *name;
    size_t nlen;
    json_t *uv;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_object(x, v))
        return;
    c->upstreams = adm_cf_calloc(x, json_object_size(v), sizeof(*c->upstreams));
    if (!c->upstreams)
        return;
    json_object_keylen_foreach((json_t *)v, name, nlen, uv)
    {
        size_t mark = adm_cf_push_key(x, name);
        struct adm_upstream *u = &c->upstreams[c->nupstreams++];
        upstream_defaults(u);
        if (strlen(name) != nlen || !adm_cf_is_name(name, "_.-", ADM_CF_MAX_NAME))
            adm_cf_err(x, "invalid upstream name %s (use 1..%d letters, digits, '_', '.', '-')",
                       adm_cf_quote(&q, name), ADM_CF_MAX_NAME);
        else if ((u->name = adm_cf_strdup(x, name)) &&
                 json_object_set_new(x->upstream_index, name,
                                     json_integer((json_int_t)(c->nupstreams - 1))) < 0)
            x->nomem = 1;
        if (adm_cf_want_object(x, uv)) {
            uint32_t seen = adm_cf_fields(x, uv, upstream_fields, NFIELDS(upstream_fields), u);
            u->outlier.on = u->outlier.consecutive_failures > 0;
            if (u->balance != ADM_BALANCE_HASH)
                for (unsigned k = UF_HASH_KEY; k <= UF_TABLE_SIZE; k++)
                    if (seen & (UINT32_C(1) << k))
                        adm_cf_err_key(x, upstream_fields[k].key,
                                       "only allowed with \"balance\": \"hash\"");
            /* a table_size of 0 was refused as a value already */
            if ((seen & (UINT32_C(1) << UF_TABLE_SIZE)) && u->table_size &&
                !up_maglev_size_ok(u->table_size, u->nservers))
                adm_cf_err_key(x, "table_size", "%u is not a prime above the %zu servers",
                               u->table_size, u->nservers);
            /* accepted, it would be ignored: nothing but a check brings a server up */
            if (u->initially_unhealthy && !u->health_check &&
                !(seen & (UINT32_C(1) << UF_HEALTH_CHECK)))
                adm_cf_err_key(x, upstream_fields[UF_INITIALLY_UNHEALTHY].key,
                               "only allowed with \"health_check\" (a server held down is let up "
                               "by a passing check)");
            adm_cf_up_check(x, uv, u); /* protocol, tls and a gRPC check */
        }
        adm_cf_pop(x, mark);
    }
}

/* What one pool's keys made (each key's parse function may leave a
 * half-built value). */
static void upstream_free(struct adm_upstream *u)
{
    for (size_t k = 0; k < u->nservers; k++)
        adm_addr_free(&u->servers[k].addr);
    free(u->servers);
    free(u->name);
    free(u->hash_name);
    if (u->health_check) {
        free(u->health_check->path);
        free(u->health_check->host);
        free(u->health_check->service);
        free(u->health_check);
    }
    adm_tls_upstream_free(u->tls);
}

void adm_cf_upstreams_free(struct adm_config *c)
{
    for (size_t i = 0; i < c->nupstreams; i++)
        upstream_free(&c->upstreams[i]);
    free(c->upstreams);
}
