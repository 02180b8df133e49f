/*
 * config_listeners.c - the "listeners" section: an array of objects, each
 * with a numeric "address" that no other listener repeats. A listener key
 * is a row in listener_fields; what spans two keys (tls with
 * redirect_https, tls with protocols) is checked once all are read.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* "certificates": "fleet" stands for the fleet's certificates, which
 * adm_fleet_compose() (admin/fleet.h) puts in its place once etcd (or the
 * fleet persisted in the state directory) has delivered them. In a fleet
 * node's own file it parses as no certificate yet: the listener refuses
 * handshakes until the fleet's arrive. Without a top-level "fleet" it is an
 * error. */
static void listener_tls(struct adm_cf *x, const json_t *v, void *target)
{
    const json_t *c = json_object_get(v, "certificates");
    int fleet = json_object_get(x->c->json, "fleet") != NULL;
    unsigned flags = fleet ? ADM_TLS_FLEET_NODE : 0;
    json_t *copy = NULL;

    if (json_is_string(c) && strcmp(json_string_value(c), "fleet") == 0) {
        if (!fleet) {
            size_t mark = adm_cf_push_key(x, "certificates");
            adm_cf_err(x, "\"fleet\" serves the fleet's certificates: it needs the top-level "
                          "fleet key");
            adm_cf_pop(x, mark);
            return;
        }
        if (!(copy = json_copy((json_t *)v)) ||
            json_object_set_new(copy, "certificates", json_array()) < 0) {
            json_decref(copy);
            adm_cf_count(x, -1);
            return;
        }
        v = copy;
    }
    adm_cf_count(x, adm_tls_listener_parse(v, x->path, flags, x->errs,
                                           &((struct adm_listener *)target)->tls));
    json_decref(copy);
}

static void listener_client_ip(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_listener *l = target;
    l->client_ip = adm_cf_client_ip_parse(x, v);
}

/* Other names for the protocols, the ALPN ids and other proxies'
 * spellings, compared without case, for the error a user who knows them
 * gets: what to write instead. Our own names are here too, for "H2". */
static const struct {
    const char *theirs, *instead;
} protocol_known_as[] = {
    {"h1", "write \"h1\" (lower case)"},
    {"h2", "write \"h2\" (lower case)"},
    {"h2c", "write \"h2c\" (lower case)"},
    {"http/1.1", "write \"h1\" (HTTP/1.0 and 1.1)"},
    {"http/1.0", "write \"h1\" (HTTP/1.0 and 1.1)"},
    {"http/1", "write \"h1\""},
    {"http1", "write \"h1\""},
    {"http1.1", "write \"h1\""},
    {"http", "write \"h1\""},
    {"http/2", "write \"h2\" (over TLS) or \"h2c\" (without)"},
    {"http/2.0", "write \"h2\" (over TLS) or \"h2c\" (without)"},
    {"http2", "write \"h2\" (over TLS) or \"h2c\" (without)"},
    {"h2-prior-knowledge", "write \"h2c\""},
    {"h3", "HTTP/3 is not supported"},
    {"http/3", "HTTP/3 is not supported"},
    {"quic", "HTTP/3 is not supported"},
};

/* What to write instead of <s>, another name for a protocol; NULL when it
 * is none of protocol_known_as. */
static const char *protocol_instead(const char *s)
{
    char low[24];
    size_t n = strlen(s);

    if (n >= sizeof(low))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        low[i] = to_lower(s[i]);
    for (size_t i = 0; i < NFIELDS(protocol_known_as); i++)
        if (!strcmp(low, protocol_known_as[i].theirs))
            return protocol_known_as[i].instead;
    return NULL;
}

/* listeners[].protocols: a list of distinct "h1", "h2" and "h2c", bit i of
 * l->protocols for names[i] (ADM_PROTO_*). Whether each suits the
 * listener is checked once its "tls" is known (listener_protocols_check). */
static void listener_protocols(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"h1", "h2", "h2c"};
    struct adm_listener *l = target;
    size_t first[NFIELDS(names)];
    unsigned set = 0;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if (!json_array_size(v)) {
        adm_cf_err(x, "must list at least one protocol: \"h1\", \"h2\" (with tls) or \"h2c\" "
                      "(without); leave it out for the default");
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        const json_t *e = json_array_get(v, i);
        const char *s = json_is_string(e) ? json_string_value(e) : NULL;
        const char *instead = NULL;
        int k = -1;

        for (size_t n = 0; s && n < NFIELDS(names) && k < 0; n++)
            if (!strcmp(s, names[n]))
                k = (int)n;
        if (k < 0 && s && (instead = protocol_instead(s)))
            adm_cf_err(x, "invalid value %s (expected one of \"h1\", \"h2\", \"h2c\"): %s",
                       adm_cf_quote(&q, s), instead);
        else if (k < 0)
            k = adm_cf_enum(x, e, names, NFIELDS(names));
        if (k >= 0 && (set & 1u << k)) {
            adm_cf_err(x, "\"%s\" is listed twice (also at index %zu)", names[k], first[k]);
        } else if (k >= 0) {
            set |= 1u << k;
            first[k] = i;
        }
        adm_cf_pop(x, mark);
    }
    l->protocols = set;
}

/* <l>'s protocols against its "tls", both read from <lv>: "h2" needs TLS
 * (ALPN selects it), "h2c" is HTTP/2 without it. A listener that does not
 * say gets its default: h1 and h2 with tls, h1 without. The document says
 * whether the listener has tls, so that a "tls" in error does not turn
 * into errors here too. */
static void listener_protocols_check(struct adm_cf *x, const json_t *lv, struct adm_listener *l)
{
    int tls = json_object_get(lv, "tls") != NULL;
    const json_t *list = json_object_get(lv, "protocols");
    size_t mark, i;
    const json_t *e;

    if (!list) {
        l->protocols = tls ? ADM_PROTO_H1 | ADM_PROTO_H2 : ADM_PROTO_H1;
        return;
    }
    mark = adm_cf_push_key(x, "protocols");
    json_array_foreach(list, i, e)
    {
        const char *s = json_is_string(e) ? json_string_value(e) : "";
        size_t at = adm_cf_push_index(x, i);
        if (!tls && !strcmp(s, "h2"))
            adm_cf_err(x, "\"h2\" needs tls (HTTP/2 over TLS, selected by ALPN): add \"tls\", "
                          "or use \"h2c\" for HTTP/2 by prior knowledge on a plain listener");
        else if (tls && !strcmp(s, "h2c"))
            adm_cf_err(x, "\"h2c\" is HTTP/2 without TLS: on a tls listener write \"h2\" "
                          "(selected by ALPN)");
        adm_cf_pop(x, at);
    }
    adm_cf_pop(x, mark);
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
    {.key = "protocols", .kind = FK_FN, .fn = listener_protocols},
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
        if (adm_cf_want_object(x, lv)) {
            adm_cf_fields(x, lv, listener_fields, NFIELDS(listener_fields), l);
            listener_protocols_check(x, lv, l);
        }
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
