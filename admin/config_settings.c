/*
 * config_settings.c - the smaller top-level keys: "router" (trailing slash,
 * automatic OPTIONS, merged slashes, the path forwarded, escaped slashes),
 * "trusted_proxies" (CIDRs), "limits", "timeouts", "http2", "access_log",
 * "access_log_format", "log_level" and "resolver". Each object's keys are a table.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <stdlib.h>
#include <string.h>

void adm_cf_trusted_proxies(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    adm_cf_cidrs(x, v, &c->trusted_proxies, &c->ntrusted_proxies);
}

static void router_trailing_slash(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"strict", "redirect", "relaxed"};
    struct adm_router *r = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        r->trailing_slash = (enum rt_trailing_slash)i; /* same order as the enum */
}

static void router_forward_path(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"as_received", "normalized"};
    struct adm_router *r = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        r->forward_path = (enum adm_forward_path)i; /* same order as the enum */
}

/* What becomes of an escaped slash or backslash, or "..;", in a path. */
static void router_escaped_slashes(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"reject", "decode", "keep"};
    struct adm_router *r = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        r->escaped_slashes = (enum h1_escaped_slashes)i; /* same order as the enum */
}

static const struct adm_cf_field router_fields[] = {
    {.key = "trailing_slash", .kind = FK_FN, .fn = router_trailing_slash},
    {.key = "forward_path", .kind = FK_FN, .fn = router_forward_path},
    {.key = "escaped_slashes", .kind = FK_FN, .fn = router_escaped_slashes},
    {.key = "auto_options", .kind = FK_BOOL, .off = offsetof(struct adm_router, auto_options)},
    {.key = "merge_slashes", .kind = FK_BOOL, .off = offsetof(struct adm_router, merge_slashes)},
};

#define LIMIT(k, lo, hi)                                                                           \
    {                                                                                              \
        .key = #k, .kind = FK_UINT, .off = offsetof(struct adm_limits, k), .min = lo, .max = hi    \
    }
static const struct adm_cf_field limits_fields[] = {
    LIMIT(max_request_line, 1, 1 << 20),
    LIMIT(max_header_bytes, 1, 16 << 20),
    LIMIT(max_headers, 1, 10000),
    {.key = "max_body_bytes",
     .kind = FK_U64,
     .off = offsetof(struct adm_limits, max_body_bytes),
     .min = 0,
     .max = 1LL << 50},
    LIMIT(max_connections, 1, 10000000),
    LIMIT(max_pending_connections, 1, 10000000),
    LIMIT(max_routes, 1, ADM_CF_MAX_ROUTES),
};

#define TIMEOUT(k)                                                                                 \
    {                                                                                              \
        .key = #k, .kind = FK_UINT, .off = offsetof(struct adm_timeouts, k), .min = 1,             \
        .max = ADM_CF_MAX_MS                                                                       \
    }
static const struct adm_cf_field timeouts_fields[] = {
    TIMEOUT(client_header_ms),
    TIMEOUT(client_idle_ms),
    TIMEOUT(client_body_ms),
    TIMEOUT(upstream_connect_ms),
    TIMEOUT(upstream_response_ms),
    TIMEOUT(upstream_idle_ms),
    TIMEOUT(drain_ms),
    TIMEOUT(lingering_ms),
    TIMEOUT(tunnel_idle_ms),
};

/* The SETTINGS of an HTTP/2 connection. A window below the RFC's initial
 * 65535 would only slow uploads; 2^31-1 is the protocol's largest. */
static const struct adm_cf_field http2_fields[] = {
    {.key = "max_concurrent_streams",
     .kind = FK_UINT,
     .off = offsetof(struct adm_http2, max_concurrent_streams),
     .min = 1,
     .max = 10000},
    {.key = "initial_window_bytes",
     .kind = FK_UINT,
     .off = offsetof(struct adm_http2, initial_window_bytes),
     .min = 65535,
     .max = 2147483647},
};

/* adm_cf_<name>(): the nested object c-><name> through its key table. */
#define SECTION(name, table)                                                                       \
    void adm_cf_##name(struct adm_cf *x, const json_t *v, void *target)                            \
    {                                                                                              \
        struct adm_config *c = target;                                                             \
        if (adm_cf_want_object(x, v))                                                              \
            adm_cf_fields(x, v, table, NFIELDS(table), &c->name);                                  \
    }
SECTION(router, router_fields)
SECTION(limits, limits_fields)
SECTION(timeouts, timeouts_fields)
SECTION(http2, http2_fields)

void adm_cf_access_log(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return;
    free(c->access_log.path);
    c->access_log.path = NULL;
    if (!strcmp(s, "stdout"))
        c->access_log.target = ADM_LOG_STDOUT;
    else if (!strcmp(s, "stderr"))
        c->access_log.target = ADM_LOG_STDERR;
    else if (!strcmp(s, "off"))
        c->access_log.target = ADM_LOG_OFF;
    else if ((c->access_log.path = adm_cf_pathname(x, v)))
        c->access_log.target = ADM_LOG_FILE;
}

/* "json" or "combined"; live, like access_log: each line reads it from its
 * request's snapshot. */
void adm_cf_access_log_format(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"json", "combined"};
    struct adm_config *c = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        c->access_log_format = (enum adm_log_format)i;
}

/* "error", "warn", "info" or "debug"; live: the gateway applies it as the
 * snapshot is published. */
void adm_cf_log_level(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    struct adm_config *c = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        c->log_level = (enum adm_log_level)i; /* same order as the enum */
}

/* resolver.nameservers: numeric addresses, the port 53 unless given. */
static void resolver_nameservers(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_resolver_cfg *r = target;
    size_t n;

    if (!adm_cf_want_array(x, v))
        return;
    n = json_array_size(v);
    if (!n || !(r->nameservers = adm_cf_calloc(x, n, sizeof(*r->nameservers)))) {
        if (!n)
            adm_cf_err(x, "must list at least one nameserver (leave it out for resolv.conf's)");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        struct adm_addr a = {0};
        char why[128], with_port[80];
        struct adm_cf_qbuf q;
        if (s) {
            size_t len = strlen(s);
            /* no port: "10.0.0.2" or "[::1]" */
            int bare = len < 64 && (!strchr(s, ':') || (s[0] == '[' && s[len - 1] == ']'));
            snprintf(with_port, sizeof(with_port), "%s:53", s);
            if (adm_addr_parse(&a, bare ? with_port : s, 0, why, sizeof(why)) < 0)
                adm_cf_err(x, "invalid nameserver %s: %s", adm_cf_quote(&q, s), why);
            else if ((r->nameservers[r->nnameservers] = adm_cf_strdup(x, a.text)))
                r->nnameservers++;
            adm_addr_free(&a);
        }
        adm_cf_pop(x, mark);
    }
}

static const struct adm_cf_field resolver_fields[] = {
    {.key = "nameservers", .kind = FK_FN, .fn = resolver_nameservers},
    {.key = "hosts_file", .kind = FK_PATH, .off = offsetof(struct adm_resolver_cfg, hosts_file)},
    {.key = "timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_resolver_cfg, timeout_ms),
     .min = 1,
     .max = 60000},
    {.key = "attempts",
     .kind = FK_UINT,
     .off = offsetof(struct adm_resolver_cfg, attempts),
     .min = 1,
     .max = 10},
};
SECTION(resolver, resolver_fields)

void adm_cf_settings_free(struct adm_config *c)
{
    free(c->trusted_proxies);
    adm_client_ip_free(c->client_ip);
    free(c->access_log.path);
    for (size_t i = 0; i < c->resolver.nnameservers; i++)
        free(c->resolver.nameservers[i]);
    free(c->resolver.nameservers);
    free(c->resolver.hosts_file);
}
