/*
 * config_settings.c - the smaller top-level keys: "router" (trailing slash,
 * automatic OPTIONS, merged slashes, the path forwarded), "trusted_proxies"
 * (CIDRs), "limits", "timeouts", "access_log", "access_log_format" and
 * "log_level". Each object's keys are a table.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <stdlib.h>
#include <string.h>

void adm_cf_trusted_proxies(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!adm_cf_want_array(x, v))
        return;
    size_t n = json_array_size(v);
    c->trusted_proxies = adm_cf_calloc(x, n, sizeof(*c->trusted_proxies));
    if (!c->trusted_proxies)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        char why[128];
        struct adm_cf_qbuf q;
        if (s) {
            if (adm_cidr_parse(&c->trusted_proxies[c->ntrusted_proxies], s, why, sizeof(why)) < 0)
                adm_cf_err(x, "invalid CIDR %s: %s", adm_cf_quote(&q, s), why);
            else
                c->ntrusted_proxies++;
        }
        adm_cf_pop(x, mark);
    }
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

static const struct adm_cf_field router_fields[] = {
    {.key = "trailing_slash", .kind = FK_FN, .fn = router_trailing_slash},
    {.key = "forward_path", .kind = FK_FN, .fn = router_forward_path},
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

void adm_cf_settings_free(struct adm_config *c)
{
    free(c->trusted_proxies);
    free(c->access_log.path);
}
