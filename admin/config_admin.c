/*
 * config_admin.c - the "admin" section: the admin API's numeric address,
 * its token file, the state directory, the warm heap's size and the
 * origins the API is also reached by; and the top-level "user" and "group"
 * the process drops to after binding.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ORIGINS 64

static void admin_address(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_admin *a = target;
    const char *s = adm_cf_str(x, v, 1);
    char why[128];
    struct adm_cf_qbuf q;

    if (!s)
        return;
    adm_addr_free(&a->addr);
    if (adm_addr_parse(&a->addr, s, 0, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            adm_cf_err(x, "invalid address %s: %s", adm_cf_quote(&q, s), why);
    }
}

/* The port after a host: 1..65535, digits only. 0, or -1 with <why>. */
static int origin_port(const char *p, unsigned *port, char *why, size_t cap)
{
    unsigned long v = 0;
    size_t n = strspn(p, "0123456789");

    if (n == 0 || n > 5 || p[n] != '\0' || p[0] == '0') {
        snprintf(why, cap, "%s",
                 strchr(p, '/') ? "a path is not allowed (write scheme://host:port)"
                                : "the port must be 1..65535");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned long)(p[i] - '0');
    if (v > 65535) {
        snprintf(why, cap, "the port must be 1..65535");
        return -1;
    }
    *port = (unsigned)v;
    return 0;
}

int adm_origin_parse(struct adm_origin *o, const char *s, char *why, size_t cap)
{
    const char *sep = strstr(s, "://"), *h = sep ? sep + 3 : s, *end;
    size_t n;

    memset(o, 0, sizeof(*o));
    if (sep) {
        n = (size_t)(sep - s);
        if (!((n == 4 && !strncasecmp(s, "http", 4)) || (n == 5 && !strncasecmp(s, "https", 5)))) {
            snprintf(why, cap, "the scheme must be http or https");
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            o->scheme[i] = to_lower(s[i]);
    }
    if (*h == '[') { /* an IPv6 literal */
        unsigned char a[16];
        char lit[INET6_ADDRSTRLEN];

        end = strchr(h, ']');
        n = end ? (size_t)(end - h - 1) : 0;
        if (!end || n == 0 || n >= sizeof(lit)) {
            snprintf(why, cap, "an IPv6 address goes in brackets: [::1]");
            return -1;
        }
        memcpy(lit, h + 1, n);
        lit[n] = '\0';
        if (inet_pton(AF_INET6, lit, a) != 1) {
            snprintf(why, cap, "[%s] is not an IPv6 address", lit);
            return -1;
        }
        end++;
    } else {
        end = h + strcspn(h, ":/");
        n = (size_t)(end - h);
        if (strchr(h, '*')) {
            snprintf(why, cap, "wildcards are not supported: list each name");
            return -1;
        }
        if (*end == ':' && strchr(end + 1, ':')) {
            snprintf(why, cap, "an IPv6 address goes in brackets: [::1]");
            return -1;
        }
        if (strchr(h, '@')) {
            snprintf(why, cap, "userinfo (user@) is not allowed");
            return -1;
        }
        if (n == 0 || n > 253) {
            snprintf(why, cap, "the host must be 1..253 bytes");
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (!is_alnum((unsigned char)h[i]) && !strchr("-._", h[i])) {
                snprintf(why, cap, "the host must be a DNS name or an IP address");
                return -1;
            }
    }
    n = (size_t)(end - h);
    for (size_t i = 0; i < n; i++)
        o->host[i] = to_lower(h[i]);
    if (*end == '\0')
        return 0;
    if (*end != ':') {
        snprintf(why, cap, "a path is not allowed (write scheme://host:port)");
        return -1;
    }
    return origin_port(end + 1, &o->port, why, cap);
}

/* admin.origins: a list of [scheme://]host[:port], each checked. */
static void admin_origins(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_admin *a = target;
    size_t len;

    if (!adm_cf_want_array(x, v))
        return;
    len = json_array_size(v);
    if (len > MAX_ORIGINS) {
        adm_cf_err(x, "at most %d origins", MAX_ORIGINS);
        return;
    }
    free(a->origins);
    a->norigins = 0;
    if (!(a->origins = adm_cf_calloc(x, len, sizeof(*a->origins))))
        return;
    for (size_t i = 0; i < len; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        char why[128];
        struct adm_cf_qbuf q;

        if (s && adm_origin_parse(&a->origins[a->norigins], s, why, sizeof(why)) < 0)
            adm_cf_err(x, "invalid origin %s: %s", adm_cf_quote(&q, s), why);
        else if (s)
            a->norigins++;
        adm_cf_pop(x, mark);
    }
}

static const struct adm_cf_field admin_fields[] = {
    {.key = "origins", .kind = FK_FN, .fn = admin_origins},
    {.key = "address", .kind = FK_FN, .fn = admin_address},
    {.key = "token_file", .kind = FK_PATH, .off = offsetof(struct adm_admin, token_file)},
    {.key = "state_dir", .kind = FK_PATH, .off = offsetof(struct adm_admin, state_dir)},
    {.key = "heap_reserve_mb",
     .kind = FK_UINT,
     .off = offsetof(struct adm_admin, heap_reserve_mb),
     .min = 0,
     .max = 1024},
};

/* "user" or "group" into <slot>: an account name (whether it exists is
 * checked by adm_config_check_env, on the host that runs it). */
static void account(struct adm_cf *x, const json_t *v, char **slot)
{
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (!adm_cf_is_name(s, "_.-", 64)) {
        adm_cf_err(x, "invalid account name %s", adm_cf_quote(&q, s));
        return;
    }
    free(*slot);
    *slot = adm_cf_strdup(x, s);
}

void adm_cf_user(struct adm_cf *x, const json_t *v, void *target)
{
    account(x, v, &((struct adm_config *)target)->user);
}

void adm_cf_group(struct adm_cf *x, const json_t *v, void *target)
{
    account(x, v, &((struct adm_config *)target)->group);
}

void adm_cf_admin(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (adm_cf_want_object(x, v))
        adm_cf_fields(x, v, admin_fields, NFIELDS(admin_fields), &c->admin);
}

void adm_cf_admin_free(struct adm_config *c)
{
    adm_addr_free(&c->admin.addr);
    free(c->admin.token_file);
    free(c->admin.state_dir);
    free(c->admin.origins);
    free(c->user);
    free(c->group);
}
