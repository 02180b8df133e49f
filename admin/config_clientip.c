/*
 * config_clientip.c - the "client_ip" object, at the top level and on a
 * listener: where a request's client address comes from ("source": the
 * peer, X-Forwarded-For, Forwarded, or one header) and which proxies are
 * skipped on the way ("trusted" CIDRs, by default trusted_proxies). The
 * gateway derives the address (gateway/clientip.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parses the array of CIDR strings <v> into *<out>, *<n>; each invalid one
 * is an error at its index. */
void adm_cf_cidrs(struct adm_cf *x, const json_t *v, struct adm_cidr **out, size_t *n)
{
    if (!adm_cf_want_array(x, v))
        return;
    size_t len = json_array_size(v);
    *out = adm_cf_calloc(x, len, sizeof(**out));
    if (!*out)
        return;
    for (size_t i = 0; i < len; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        char why[128];
        struct adm_cf_qbuf q;
        if (s) {
            if (adm_cidr_parse(&(*out)[*n], s, why, sizeof(why)) < 0)
                adm_cf_err(x, "invalid CIDR %s: %s", adm_cf_quote(&q, s), why);
            else
                (*n)++;
        }
        adm_cf_pop(x, mark);
    }
}

static void cip_source(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"peer", "x_forwarded_for", "forwarded"};
    struct adm_client_ip *ci = target;
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (!strncmp(s, "header:", 7)) {
        const char *name = s + 7;
        if (!h1_is_token(name, strlen(name))) {
            adm_cf_err(x, "invalid header name %s after \"header:\" (an HTTP token)",
                       adm_cf_quote(&q, name));
            return;
        }
        if (!strcasecmp(name, "x-forwarded-for") || !strcasecmp(name, "forwarded")) {
            adm_cf_err(x, "%s is a list: use \"source\": \"%s\"", name,
                       !strcasecmp(name, "forwarded") ? "forwarded" : "x_forwarded_for");
            return;
        }
        ci->source = ADM_CIP_HEADER;
        ci->header = adm_cf_strdup(x, name);
        ci->header_len = strlen(name);
        return;
    }
    for (size_t i = 0; i < NFIELDS(names); i++) {
        if (!strcmp(s, names[i])) {
            ci->source = (enum adm_cip_source)i; /* same order as the enum */
            return;
        }
    }
    adm_cf_err(x,
               "unknown source %s (one of \"peer\", \"x_forwarded_for\", \"forwarded\", "
               "\"header:NAME\")",
               adm_cf_quote(&q, s));
}

static void cip_trusted(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_client_ip *ci = target;
    ci->has_trusted = 1;
    adm_cf_cidrs(x, v, &ci->trusted, &ci->ntrusted);
}

static const struct adm_cf_field cip_fields[] = {
    {.key = "source", .kind = FK_FN, .flags = F_REQUIRED, .fn = cip_source},
    {.key = "trusted", .kind = FK_FN, .fn = cip_trusted},
};

struct adm_client_ip *adm_cf_client_ip_parse(struct adm_cf *x, const json_t *v)
{
    struct adm_client_ip *ci;

    if (!adm_cf_want_object(x, v) || !(ci = adm_cf_calloc(x, 1, sizeof(*ci))))
        return NULL;
    adm_cf_fields(x, v, cip_fields, NFIELDS(cip_fields), ci);
    return ci;
}

void adm_cf_client_ip(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    c->client_ip = adm_cf_client_ip_parse(x, v);
}

void adm_client_ip_free(struct adm_client_ip *ci)
{
    if (!ci)
        return;
    free(ci->header);
    free(ci->trusted);
    free(ci);
}
