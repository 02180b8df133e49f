/*
 * config_listeners.c - the "listeners" section: an array of objects, each
 * with a numeric "address" that no other listener repeats. A listener key
 * is a row in listener_fields.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/tls.h"

#include <errno.h>
#include <stdlib.h>

static void listener_address(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_listener *l = target;
    const char *s = adm_cf_str(x, v, 1);
    char why[128];
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (adm_addr_parse(&l->addr, s, 0, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            adm_cf_err(x, "invalid address %s: %s", adm_cf_quote(&q, s), why);
    }
}

/* tls_config.c parses "tls" objects and reports at their path */
static void listener_tls(struct adm_cf *x, const json_t *v, void *target)
{
    adm_cf_count(
        x, adm_tls_listener_parse(v, x->path, x->errs, &((struct adm_listener *)target)->tls));
}

static void listener_client_ip(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_listener *l = target;
    l->client_ip = adm_cf_client_ip_parse(x, v);
}

static const struct adm_cf_field listener_fields[] = {
    {.key = "address", .kind = FK_FN, .flags = F_REQUIRED, .fn = listener_address},
    {.key = "tls", .kind = FK_FN, .fn = listener_tls},
    {.key = "redirect_https",
     .kind = FK_UINT,
     .off = offsetof(struct adm_listener, redirect_https),
     .min = 1,
     .max = 65535},
    {.key = "client_ip", .kind = FK_FN, .fn = listener_client_ip},
};

void adm_cf_listeners(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!adm_cf_want_array(x, v))
        return;
    size_t n = json_array_size(v);
    if (n == 0) {
        adm_cf_err(x, "needs at least one listener");
        return;
    }
    c->listeners = adm_cf_calloc(x, n, sizeof(*c->listeners));
    json_t *seen = json_object();
    if (!c->listeners || !seen) {
        x->nomem = 1;
        json_decref(seen);
        return;
    }
    c->nlisteners = n;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const json_t *lv = json_array_get(v, i);
        struct adm_listener *l = &c->listeners[i];
        if (adm_cf_want_object(x, lv))
            adm_cf_fields(x, lv, listener_fields, NFIELDS(listener_fields), l);
        if (l->tls && l->redirect_https)
            adm_cf_err_key(x, "redirect_https", "only a plain listener redirects to HTTPS");
        if (l->addr.text) {
            char key[80];
            adm_addr_key(&l->addr, key, sizeof(key));
            json_t *other = json_object_get(seen, key);
            if (other)
                adm_cf_err_key(x, "address", "duplicate listener address (also /listeners/%lld)",
                               (long long)json_integer_value(other));
            else if (json_object_set_new(seen, key, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        adm_cf_pop(x, mark);
    }
    json_decref(seen);
}

/* What one listener's keys made (each key's parse function may leave a
 * half-built value). */
static void listener_free(struct adm_listener *l)
{
    adm_addr_free(&l->addr);
    adm_tls_listener_free(l->tls);
    adm_client_ip_free(l->client_ip);
}

void adm_cf_listeners_free(struct adm_config *c)
{
    for (size_t i = 0; i < c->nlisteners; i++)
        listener_free(&c->listeners[i]);
    free(c->listeners);
}
