/*
 * config_upstreams.c - the "upstreams" section: an object of named pools,
 * each with its servers (address, weight), balancer and idle-connection
 * keys. A pool key is a row in upstream_fields, a server key a row in
 * server_fields.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/tls.h"

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

static void upstream_balance(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"round_robin"};
    struct adm_upstream *u = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        u->balance = (enum adm_balance)i;
}

static void upstream_tls(struct adm_cf *x, const json_t *v, void *target)
{
    adm_cf_count(
        x, adm_tls_upstream_parse(v, x->path, x->errs, &((struct adm_upstream *)target)->tls));
}

static const struct adm_cf_field upstream_fields[] = {
    {.key = "servers", .kind = FK_FN, .flags = F_REQUIRED, .fn = upstream_servers},
    {.key = "tls", .kind = FK_FN, .fn = upstream_tls},
    {.key = "balance", .kind = FK_FN, .fn = upstream_balance},
    {.key = "keepalive",
     .kind = FK_UINT,
     .off = offsetof(struct adm_upstream, keepalive),
     .min = 0,
     .max = 100000},
    {.key = "idle_timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_upstream, idle_timeout_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
};

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
        u->keepalive = 32;
        u->balance = ADM_BALANCE_ROUND_ROBIN;
        if (strlen(name) != nlen || !adm_cf_is_name(name, "_.-", ADM_CF_MAX_NAME))
            adm_cf_err(x, "invalid upstream name %s (use 1..%d letters, digits, '_', '.', '-')",
                       adm_cf_quote(&q, name), ADM_CF_MAX_NAME);
        else if ((u->name = adm_cf_strdup(x, name)) &&
                 json_object_set_new(x->upstream_index, name,
                                     json_integer((json_int_t)(c->nupstreams - 1))) < 0)
            x->nomem = 1;
        if (adm_cf_want_object(x, uv))
            adm_cf_fields(x, uv, upstream_fields, NFIELDS(upstream_fields), u);
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
    adm_tls_upstream_free(u->tls);
}

void adm_cf_upstreams_free(struct adm_config *c)
{
    for (size_t i = 0; i < c->nupstreams; i++)
        upstream_free(&c->upstreams[i]);
    free(c->upstreams);
}
