/*
 * config_upstream_h2.c - a pool's HTTP/2 and gRPC keys, rows of
 * config_upstreams.c's tables: what its servers speak (protocol), the gRPC
 * statuses it retries (retry_on_grpc_status, with gRPC's table of status
 * names), and what a gRPC health check asks (health_check.type and
 * .service); then the rules across keys, checked once a pool or its check
 * is read whole.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <stdlib.h>
#include <string.h>

/* <s> in lower case at <low> (<cap> bytes), with '_' for '-' when <dash>:
 * a name as the tables below spell it. -1 when it does not fit. */
static int fold(char *low, size_t cap, const char *s, int dash)
{
    size_t n = strlen(s);

    if (n >= cap)
        return -1;
    for (size_t i = 0; i <= n; i++)
        low[i] = dash && s[i] == '-' ? '_' : to_lower(s[i]);
    return 0;
}

/* ---- protocol ---- */

/* upstreams.NAME.protocol's values, at their enum adm_up_protocol index. */
static const char *const protocol_names[] = {"h1", "h2c", "h2"};

/* Other names for a pool's protocol (compared without case): the ALPN ids,
 * other proxies' spellings, ours in capitals. <h2> 1: some HTTP/2, which of
 * the two the pool's "tls" decides (protocol_hint). */
static const struct {
    const char *theirs;
    int h2;
    const char *instead; /* with <h2> 0 */
} protocol_known_as[] = {
    {"h1", 0, "write \"h1\" (lower case)"},
    {"h2", 0, "write \"h2\" (lower case)"},
    {"h2c", 0, "write \"h2c\" (lower case)"},
    {"http/1.1", 0, "write \"h1\" (HTTP/1.1)"},
    {"http/1.0", 0, "write \"h1\" (HTTP/1.1)"},
    {"http/1", 0, "write \"h1\""},
    {"http1", 0, "write \"h1\""},
    {"http1.1", 0, "write \"h1\""},
    {"http", 0, "write \"h1\""},
    {"https", 0, "TLS to the servers is the pool's \"tls\": write \"h1\" or \"h2\" with it"},
    {"http/2", 1, NULL},
    {"http/2.0", 1, NULL},
    {"http2", 1, NULL},
    {"grpc", 1, NULL},
    {"h2-prior-knowledge", 1, NULL},
    {"h3", 0, "HTTP/3 to upstreams is not supported"},
    {"http/3", 0, "HTTP/3 to upstreams is not supported"},
    {"quic", 0, "HTTP/3 to upstreams is not supported"},
};

/* The row of protocol_known_as for <s>, or -1. */
static int protocol_other(const char *s)
{
    char low[24];

    if (fold(low, sizeof(low), s, 0) < 0)
        return -1;
    for (size_t i = 0; i < NFIELDS(protocol_known_as); i++)
        if (!strcmp(low, protocol_known_as[i].theirs))
            return (int)i;
    return -1;
}

/* upstreams.NAME.protocol. Another name for a protocol is reported by
 * adm_cf_up_check, which knows whether the pool has "tls" and so which
 * HTTP/2 to name. */
void adm_cf_up_protocol(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_upstream *u = target;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;

    for (size_t i = 0; s && i < NFIELDS(protocol_names); i++)
        if (!strcmp(s, protocol_names[i])) {
            u->protocol = (enum adm_up_protocol)i;
            return;
        }
    if (!s || protocol_other(s) < 0)
        adm_cf_enum(x, v, protocol_names, NFIELDS(protocol_names));
}

/* The error for <s>, another name for a protocol, in a pool with (<tls> 1)
 * or without "tls". */
static void protocol_hint(struct adm_cf *x, const char *s, int tls)
{
    int k = protocol_other(s);
    const char *grpc =
        !strcmp(protocol_known_as[k].theirs, "grpc") ? "gRPC runs over HTTP/2: " : "";
    struct adm_cf_qbuf q;

    if (!protocol_known_as[k].h2)
        adm_cf_err_key(x, "protocol",
                       "invalid value %s (expected one of \"h1\", \"h2c\", \"h2\"): %s",
                       adm_cf_quote(&q, s), protocol_known_as[k].instead);
    else if (tls)
        adm_cf_err_key(x, "protocol",
                       "invalid value %s (expected one of \"h1\", \"h2c\", \"h2\"): %swrite "
                       "\"h2\" (HTTP/2 over the pool's \"tls\", chosen by ALPN)",
                       adm_cf_quote(&q, s), grpc);
    else
        adm_cf_err_key(x, "protocol",
                       "invalid value %s (expected one of \"h1\", \"h2c\", \"h2\"): %swrite "
                       "\"h2c\" (HTTP/2 without TLS; \"h2\" is over TLS and needs \"tls\")",
                       adm_cf_quote(&q, s), grpc);
}

/* ---- gRPC status codes ---- */

/* gRPC's status codes by number (grpc/doc/statuscodes.md), as the config
 * writes them: lower case, '_' between words. */
static const char *const grpc_codes[] = {
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
};

#define GRPC_MAX_CODE ((long long)NFIELDS(grpc_codes) - 1)

const char *adm_grpc_code_name(unsigned code)
{
    return code < NFIELDS(grpc_codes) ? grpc_codes[code] : NULL;
}

/* The code of name <s> (any case, '-' for '_'), or -1. */
static int grpc_code_of(const char *s)
{
    char low[32];

    if (fold(low, sizeof(low), s, 1) < 0)
        return -1;
    for (size_t i = 0; i < NFIELDS(grpc_codes); i++)
        if (!strcmp(low, grpc_codes[i]))
            return (int)i;
    return -1;
}

/* Why string <s> names no gRPC status: a number in quotes, a library's
 * constant ("StatusCode.UNAVAILABLE", "codes.Unavailable"), a misspelt
 * name, or none of them. */
static void grpc_bad_name(struct adm_cf *x, const char *s)
{
    struct adm_cf_qbuf q;
    size_t digits = strspn(s, "0123456789");
    const char *dot = strrchr(s, '.');
    int k;

    if (digits && !s[digits] && digits <= 2 && (k = atoi(s)) >= 1 && k <= GRPC_MAX_CODE) {
        adm_cf_err(x,
                   "invalid gRPC status %s (a code is a number: %d, without quotes, or its name "
                   "\"%s\")",
                   adm_cf_quote(&q, s), k, grpc_codes[k]);
        return;
    }
    if (dot && (k = grpc_code_of(dot + 1)) > 0) {
        adm_cf_err(x, "invalid gRPC status %s: write \"%s\"", adm_cf_quote(&q, s), grpc_codes[k]);
        return;
    }
    size_t best = 3;
    k = -1;
    for (size_t i = 1; i < NFIELDS(grpc_codes); i++) {
        size_t d = adm_cf_edit_distance(s, grpc_codes[i]);
        if (d < best) {
            best = d;
            k = (int)i;
        }
    }
    if (k > 0)
        adm_cf_err(x, "invalid gRPC status %s (did you mean \"%s\"?)", adm_cf_quote(&q, s),
                   grpc_codes[k]);
    else
        adm_cf_err(x,
                   "invalid gRPC status %s (expected a code 1..16 or its name, e.g. "
                   "\"unavailable\", \"resource_exhausted\")",
                   adm_cf_quote(&q, s));
}

/* One element of retry_on_grpc_status into <set>: a code 1..16 or its name.
 * OK is refused, and an HTTP status named for what it is. */
static void grpc_code_add(struct adm_cf *x, const json_t *v, struct adm_statuses *set)
{
    long long code;

    if (json_is_integer(v)) {
        code = json_integer_value(v);
        if (code >= 100 && code <= 599) {
            adm_cf_err(x,
                       "%lld is an HTTP status (retry_on_status takes those): a gRPC status is "
                       "1..16, e.g. 14 (unavailable)",
                       code);
            return;
        }
        if (code != 0 && adm_cf_int(x, v, 1, GRPC_MAX_CODE, &code) < 0)
            return;
    } else if (json_is_string(v)) {
        if ((code = grpc_code_of(json_string_value(v))) < 0) {
            grpc_bad_name(x, json_string_value(v));
            return;
        }
    } else {
        adm_cf_err(x, "expected a gRPC status code (1..16) or its name, got %s",
                   adm_cf_type_name(v));
        return;
    }
    if (code == 0) {
        adm_cf_err(x, "0 (ok) is a success, not a failure: only 1..16 can be retried");
        return;
    }
    set->bits[0] |= UINT64_C(1) << code;
}

void adm_cf_up_retry_on_grpc(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_statuses *set = &((struct adm_upstream *)target)->retry_on_grpc_status;
    struct adm_cf_qbuf q;

    *set = (struct adm_statuses){{0}};
    /* one status alone, as retry_on_status takes it: the list to write */
    if (json_is_string(v) && grpc_code_of(json_string_value(v)) > 0) {
        adm_cf_err(x, "expected a list: [%s]", adm_cf_quote(&q, json_string_value(v)));
        return;
    }
    if (json_is_integer(v) && json_integer_value(v) >= 1 &&
        json_integer_value(v) <= GRPC_MAX_CODE) {
        adm_cf_err(x, "expected a list: [%lld]", (long long)json_integer_value(v));
        return;
    }
    if (!adm_cf_want_array(x, v))
        return;
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        grpc_code_add(x, json_array_get(v, i), set);
        adm_cf_pop(x, mark);
    }
}

/* ---- the health check's type and service ---- */

void adm_cf_check_type(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"http", "grpc"};
    int i = adm_cf_enum(x, v, names, NFIELDS(names));

    if (i >= 0)
        ((struct adm_health_check *)target)->type = (enum adm_hc_type)i;
}

/* health_check.service: any name the servers' health service knows,
 * "" (the default) for the server as a whole. */
void adm_cf_check_service(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_health_check *h = target;
    const char *s = adm_cf_str(x, v, 0);

    if (!s)
        return;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            adm_cf_err(x, "invalid character at offset %zu (a control character)", (size_t)(p - s));
            return;
        }
    if (strlen(s) > 256) {
        adm_cf_err(x, "too long (at most 256 bytes)");
        return;
    }
    free(h->service);
    h->service = *s ? adm_cf_strdup(x, s) : NULL;
}

/* Whether the member <key> of <obj> is absent or a string of <names>: not
 * in error, so that a rule across keys adds no second error to it. */
static int absent_or_one_of(const json_t *obj, const char *key, const char *const *names, size_t n)
{
    const json_t *v = json_object_get(obj, key);

    if (!v)
        return 1;
    for (size_t i = 0; json_is_string(v) && i < n; i++)
        if (!strcmp(json_string_value(v), names[i]))
            return 1;
    return 0;
}

void adm_cf_check_rules(struct adm_cf *x, const json_t *hv, const struct adm_health_check *h)
{
    static const char *const http[] = {"http"};

    if (h->type == ADM_HC_GRPC) {
        if (json_object_get(hv, "path"))
            adm_cf_err_key(x, "path",
                           "not used by a gRPC check, which calls "
                           "/grpc.health.v1.Health/Check: name what it asks about in \"service\"");
        if (json_object_get(hv, "expect_status"))
            adm_cf_err_key(x, "expect_status",
                           "not used by a gRPC check: SERVING passes, any other answer fails");
    } else if (json_object_get(hv, "service") && absent_or_one_of(hv, "type", http, 1)) {
        adm_cf_err_key(x, "service",
                       "only allowed with \"type\": \"grpc\" (an HTTP check asks for \"path\")");
    }
}

/* ---- across a pool's keys ---- */

void adm_cf_up_check(struct adm_cf *x, const json_t *uv, const struct adm_upstream *u)
{
    const json_t *pv = json_object_get(uv, "protocol");
    int tls = json_object_get(uv, "tls") != NULL;
    int protocol_ok = absent_or_one_of(uv, "protocol", protocol_names, NFIELDS(protocol_names));

    if (json_is_string(pv) && !protocol_ok && protocol_other(json_string_value(pv)) >= 0)
        protocol_hint(x, json_string_value(pv), tls);
    if (u->protocol == ADM_UP_H2 && !tls)
        adm_cf_err_key(x, "protocol",
                       "\"h2\" is HTTP/2 over TLS (chosen by ALPN): it needs \"tls\", or use "
                       "\"h2c\" for HTTP/2 without TLS");
    else if (u->protocol == ADM_UP_H2C && tls)
        adm_cf_err_key(x, "protocol",
                       "\"h2c\" is HTTP/2 without TLS: with \"tls\" write \"h2\" (HTTP/2 over "
                       "TLS, chosen by ALPN)");
    if (u->health_check && u->health_check->type == ADM_HC_GRPC && u->protocol == ADM_UP_H1 &&
        protocol_ok) {
        size_t mark = adm_cf_push_key(x, "health_check");
        adm_cf_err_key(x, "type",
                       "a gRPC check needs the pool's \"protocol\": \"h2c\" or \"h2\" (gRPC runs "
                       "over HTTP/2; the pool speaks \"h1\")");
        adm_cf_pop(x, mark);
    }
}
