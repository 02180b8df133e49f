/*
 * policy_cors.c - the "cors" policy type: which origins may read a
 * route's answers (exact, "*", or a "*." label after the scheme that
 * stands for any subdomains), and the fields of a preflight's answer and of
 * other answers, encoded once here so that a worker only adds the
 * origin. credentials with the "*" origin is refused (the Fetch standard
 * forbids it: a browser would reject every answer).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_LIST 64

struct cors_parse {
    struct adm_cors_conf *c;
    char methods[1024], headers[2048], expose[2048];
    unsigned max_age_s;
    int has_max_age;
};

static void cors_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

static int origin_ok_text(const char *s)
{
    const char *host = strstr(s, "://");
    const char *star = strchr(s, '*');

    if (!host || (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)))
        return 0;
    host += 3;
    if (!*host || strchr(host, '/') || strchr(host, '?') || strchr(host, '#'))
        return 0;
    if (star && (star != host || host[1] != '.' || strchr(star + 1, '*')))
        return 0;
    return 1;
}

static void cors_origins(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;
    struct adm_cors_conf *c = cp->c;
    size_t n;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if ((n = json_array_size(v)) == 0 || n > 1000) {
        adm_cf_err(x, "a list of 1..1000 origins");
        return;
    }
    if (!(c->origins = adm_cf_calloc(x, n, sizeof(*c->origins))))
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        if (s && !strcmp(s, "*"))
            c->any = 1;
        else if (s && !origin_ok_text(s))
            adm_cf_err(x,
                       "invalid origin %s (write \"*\", scheme://host[:port], or "
                       "scheme://*.domain[:port])",
                       adm_cf_quote(&q, s));
        else if (s && (c->origins[c->norigins] = adm_cf_strdup(x, s))) {
            for (char *d = c->origins[c->norigins]; *d; d++)
                *d = to_lower(*d);
            c->norigins++;
        }
        adm_cf_pop(x, mark);
    }
}

/* A list of tokens into "A, B" at <out>. */
static void token_list(struct adm_cf *x, const json_t *v, char *out, size_t cap)
{
    size_t o = 0;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    if (json_array_size(v) > MAX_LIST) {
        adm_cf_err(x, "at most %d names", MAX_LIST);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        size_t len = s ? strlen(s) : 0;
        if (s && (!h1_is_token(s, len) || len > 64))
            adm_cf_err(x, "invalid name %s (an HTTP token of at most 64 characters)",
                       adm_cf_quote(&q, s));
        else if (s && o + len + 3 < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", s);
        else if (s) /* never a name left out silently */
            adm_cf_err(x, "the list is longer than %zu bytes", cap - 3);
        adm_cf_pop(x, mark);
    }
}

static void cors_methods(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;
    token_list(x, v, cp->methods, sizeof(cp->methods));
}

static void cors_headers(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;
    token_list(x, v, cp->headers, sizeof(cp->headers));
}

static void cors_expose(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;
    token_list(x, v, cp->expose, sizeof(cp->expose));
}

static void cors_credentials(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;

    if (!json_is_boolean(v))
        adm_cf_err(x, "expected true or false, got %s", adm_cf_type_name(v));
    else
        cp->c->credentials = json_is_true(v);
}

static void cors_max_age(struct adm_cf *x, const json_t *v, void *target)
{
    struct cors_parse *cp = target;
    long long n;

    if (adm_cf_int(x, v, 0, 86400, &n) == 0) {
        cp->max_age_s = (unsigned)n;
        cp->has_max_age = 1;
    }
}

static const struct adm_cf_field cors_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = cors_type},
    {.key = "origins", .kind = FK_FN, .flags = F_REQUIRED, .fn = cors_origins},
    {.key = "methods", .kind = FK_FN, .fn = cors_methods},
    {.key = "headers", .kind = FK_FN, .fn = cors_headers},
    {.key = "expose_headers", .kind = FK_FN, .fn = cors_expose},
    {.key = "credentials", .kind = FK_FN, .fn = cors_credentials},
    {.key = "max_age_s", .kind = FK_FN, .fn = cors_max_age},
};

/* The fields both kinds of answer carry, then each one's own. */
static int encode(struct cors_parse *cp)
{
    struct adm_cors_conf *c = cp->c;
    char pre[6000], act[3000];
    int n, k;

    n = snprintf(act, sizeof(act), "Vary: Origin\r\n%s",
                 c->credentials ? "Access-Control-Allow-Credentials: true\r\n" : "");
    if (cp->expose[0])
        n += snprintf(act + n, sizeof(act) - (size_t)n, "Access-Control-Expose-Headers: %s\r\n",
                      cp->expose);
    k = snprintf(pre, sizeof(pre), "Vary: Origin\r\n%sAccess-Control-Allow-Methods: %s\r\n",
                 c->credentials ? "Access-Control-Allow-Credentials: true\r\n" : "",
                 cp->methods[0] ? cp->methods : "GET, HEAD, POST");
    if (cp->headers[0])
        k += snprintf(pre + k, sizeof(pre) - (size_t)k, "Access-Control-Allow-Headers: %s\r\n",
                      cp->headers);
    if (cp->has_max_age)
        k += snprintf(pre + k, sizeof(pre) - (size_t)k, "Access-Control-Max-Age: %u\r\n",
                      cp->max_age_s);
    if (!(c->pre = strdup(pre)) || !(c->act = strdup(act)))
        return -1;
    c->pre_len = (size_t)k;
    c->act_len = (size_t)n;
    return 0;
}

void *adm_cors_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct cors_parse cp;
    size_t nerr = x->nerr;

    (void)p;
    memset(&cp, 0, sizeof(cp));
    if (!(cp.c = adm_cf_calloc(x, 1, sizeof(*cp.c))))
        return NULL;
    adm_cf_fields(x, v, cors_fields, NFIELDS(cors_fields), &cp);
    if (cp.c->credentials && cp.c->any)
        adm_cf_err_key(x, "credentials",
                       "not allowed with the origin \"*\" (browsers refuse credentials for any "
                       "origin: list the origins)");
    if (x->nerr != nerr || x->nomem)
        goto fail;
    if (encode(&cp) < 0) {
        x->nomem = 1;
        goto fail;
    }
    return cp.c;
fail:
    adm_cors_conf_free(cp.c);
    return NULL;
}

void adm_cors_conf_free(void *conf)
{
    struct adm_cors_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < c->norigins; i++)
        free(c->origins[i]);
    free(c->origins);
    free(c->pre);
    free(c->act);
    free(c);
}

/* Whether <o> (<n> bytes) matches pattern <p>: equal, or with "*." in
 * <p> standing for one or more labels (with "*.a.com" after the scheme,
 * x.a.com and x.y.a.com match, a.com does not). */
static int origin_match(const char *p, const char *o, size_t n)
{
    const char *star = strchr(p, '*');
    size_t pre, post;

    if (!star)
        return strlen(p) == n && !strncasecmp(p, o, n);
    pre = (size_t)(star - p);
    post = strlen(star + 1); /* ".a.com[:port]" */
    if (n < pre + 1 + post || strncasecmp(p, o, pre) || strncasecmp(star + 1, o + n - post, post))
        return 0;
    for (size_t i = pre; i < n - post; i++) /* the labels: no '/', ':', '@' */
        if (o[i] == '/' || o[i] == ':' || o[i] == '@' || (unsigned char)o[i] <= ' ')
            return 0;
    return 1;
}

int adm_cors_origin_ok(const struct adm_cors_conf *c, const char *o, size_t n)
{
    if (c->any)
        return 1;
    for (size_t i = 0; i < c->norigins; i++)
        if (origin_match(c->origins[i], o, n))
            return 1;
    return 0;
}
