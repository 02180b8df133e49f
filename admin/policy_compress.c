/*
 * policy_compress.c - the "compress" policy type: which codings a route's
 * answers may get, the server's preference first ("encodings"), the media
 * types worth compressing ("types": "type/subtype" or "type/ *", no space), the
 * smallest known length worth it ("min_length") and a level per coding
 * ("levels"), checked against admin/http1/coding.h, the table the
 * encoders (gateway/encoding.c) use. The worker side is
 * gateway/policy_compress.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stdlib.h>
#include <string.h>

/* "type/subtype" or "type/ *" without the space (tokens; no parameters). */
static int type_ok(const char *s)
{
    const char *slash = strchr(s, '/');

    if (!slash || slash == s || !slash[1])
        return 0;
    if (!h1_is_token(s, (size_t)(slash - s)) || memchr(s, '*', (size_t)(slash - s)))
        return 0; /* a wildcard type would take images and archives too */
    return !strcmp(slash + 1, "*") || h1_is_token(slash + 1, strlen(slash + 1));
}

static void cz_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

/* A coding's name: its index, or -1 after reporting it. */
static int coding_of(struct adm_cf *x, const char *s)
{
    int c = h1_coding_from_name(s, strlen(s));
    struct adm_cf_qbuf q;

    if (c > H1_CODING_IDENTITY && !strcmp(s, h1_codings[c].name))
        return c;
    adm_cf_err(x, "unknown coding %s (one of \"zstd\", \"br\", \"gzip\")", adm_cf_quote(&q, s));
    return -1;
}

static void cz_encodings(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_cz_conf *c = target;
    size_t n;

    if (!adm_cf_want_array(x, v))
        return;
    if ((n = json_array_size(v)) == 0 || n > H1_CODING_COUNT - 1) {
        adm_cf_err(x, "a list of 1..%d codings", H1_CODING_COUNT - 1);
        return;
    }
    c->ncodings = 0;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        int k = s ? coding_of(x, s) : -1;
        for (size_t j = 0; k > 0 && j < c->ncodings; j++)
            if (c->order[j] == k) {
                adm_cf_err(x, "\"%s\" named twice", h1_codings[k].name);
                k = -1;
            }
        if (k > 0)
            c->order[c->ncodings++] = k;
        adm_cf_pop(x, mark);
    }
}

static void cz_types(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_cz_conf *c = target;
    size_t n;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if ((n = json_array_size(v)) == 0 || n > ADM_CZ_MAX_TYPES) {
        adm_cf_err(x, "a list of 1..%d media types", ADM_CZ_MAX_TYPES);
        return;
    }
    for (size_t i = 0; i < c->ntypes; i++) /* the defaults go */
        free(c->types[i]);
    free(c->types);
    c->ntypes = 0;
    if (!(c->types = adm_cf_calloc(x, n, sizeof(*c->types))))
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        if (s && !type_ok(s))
            adm_cf_err(x, "invalid media type %s (write type/subtype or type/*, no parameters)",
                       adm_cf_quote(&q, s));
        else if (s && (c->types[c->ntypes] = adm_cf_strdup(x, s))) {
            for (char *d = c->types[c->ntypes]; *d; d++)
                *d = to_lower(*d);
            c->ntypes++;
        }
        adm_cf_pop(x, mark);
    }
}

static void cz_levels(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_cz_conf *c = target;
    const char *key;
    json_t *lv;

    if (!adm_cf_want_object(x, v))
        return;
    json_object_foreach((json_t *)v, key, lv)
    {
        size_t mark = adm_cf_push_key(x, key);
        int k = coding_of(x, key);
        long long n;
        if (k > 0 && adm_cf_int(x, lv, h1_codings[k].level_min, h1_codings[k].level_max, &n) == 0)
            c->level[k] = (int)n;
        adm_cf_pop(x, mark);
    }
}

static const struct adm_cf_field cz_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = cz_type},
    {.key = "encodings", .kind = FK_FN, .fn = cz_encodings},
    {.key = "types", .kind = FK_FN, .fn = cz_types},
    {.key = "min_length",
     .kind = FK_U64,
     .off = offsetof(struct adm_cz_conf, min_length),
     .min = 0,
     .max = 1LL << 40},
    {.key = "levels", .kind = FK_FN, .fn = cz_levels},
};

/* Without "types": text and the structured formats that are text. */
static const char *const default_types[] = {
    "text/*", "application/json", "application/javascript", "application/xml", "image/svg+xml",
};

static int set_defaults(struct adm_cz_conf *c)
{
    static const int order[] = {H1_CODING_ZSTD, H1_CODING_BR, H1_CODING_GZIP};
    size_t n = sizeof(default_types) / sizeof(default_types[0]);

    memcpy(c->order, order, sizeof(order));
    c->ncodings = 3;
    for (int k = 0; k < H1_CODING_COUNT; k++)
        c->level[k] = h1_codings[k].level_def;
    c->min_length = 1024;
    if (!(c->types = calloc(n, sizeof(*c->types))))
        return -1;
    for (; c->ntypes < n; c->ntypes++)
        if (!(c->types[c->ntypes] = strdup(default_types[c->ntypes])))
            return -1;
    return 0;
}

void *adm_cz_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct adm_cz_conf *c = adm_cf_calloc(x, 1, sizeof(*c));
    size_t nerr = x->nerr;

    (void)p;
    if (!c)
        return NULL;
    if (set_defaults(c) < 0) {
        x->nomem = 1;
        goto fail;
    }
    adm_cf_fields(x, v, cz_fields, NFIELDS(cz_fields), c);
    if (x->nerr != nerr || x->nomem)
        goto fail;
    return c;
fail:
    adm_cz_conf_free(c);
    return NULL;
}

void adm_cz_conf_free(void *conf)
{
    struct adm_cz_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < c->ntypes; i++)
        free(c->types[i]);
    free(c->types);
    free(c);
}
