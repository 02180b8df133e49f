/*
 * config_headers.c - a route's "request_headers" and "response_headers":
 * {"set": {NAME: VALUE}, "add": {NAME: VALUE}, "remove": [NAME]}, each
 * name a token the gateway lets a route touch and each value a template
 * whose {placeholders} are the route's parameters or {client_ip},
 * {request_id}, {host}. The snapshot encodes them once (route_headers.c).
 * Also the one reader of an object of header fields, which a direct
 * response's "headers" goes through too (config_routes.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Fields the gateway writes into every upstream request itself. */
static const char *const request_owned[] = {
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "x-request-id",
    "via",
    "max-forwards",
    "expect",
    "forwarded",
    "x-client-cert-subject",
    "x-client-cert-sha256",
};
/* Fields the gateway writes into every proxied response itself. */
static const char *const response_owned[] = {"host", "date", "x-request-id"};

static const char *const builtins[] = {"client_ip", "request_id", "host"};

int adm_hdr_part_next(const char *v, size_t *pos, struct adm_hdr_part *part)
{
    size_t i = *pos;

    if (!v[i])
        return 0;
    if (v[i] == '{' && v[i + 1] == '{') {
        part->slot = ADM_HDR_LITERAL;
        part->s = v + i;
        part->len = 1;
        *pos = i + 2;
        return 1;
    }
    if (v[i] == '{') {
        const char *e = strchr(v + i + 1, '}');
        const char *o = strchr(v + i + 1, '{');
        if (!e || (o && o < e) || e == v + i + 1)
            return -1;
        part->slot = ADM_HDR_NAME;
        part->s = v + i + 1;
        part->len = (size_t)(e - (v + i + 1));
        *pos = (size_t)(e + 1 - v);
        return 1;
    }
    part->slot = ADM_HDR_LITERAL;
    part->s = v + i;
    part->len = strcspn(v + i, "{");
    *pos = i + part->len;
    return 1;
}

int adm_hdr_builtin(const char *s, size_t n)
{
    for (size_t i = 0; i < NFIELDS(builtins); i++)
        if (strlen(builtins[i]) == n && !memcmp(builtins[i], s, n))
            return (int)i;
    return -1;
}

/* A value without control characters or outer whitespace (else reported). */
static int value_ok(struct adm_cf *x, const char *val)
{
    size_t n = strlen(val);

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)val[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            adm_cf_err(x, "control character 0x%02x at offset %zu of the value", ch, i);
            return 0;
        }
    }
    if (n && (val[0] == ' ' || val[0] == '\t' || val[n - 1] == ' ' || val[n - 1] == '\t')) {
        adm_cf_err(x, "the value must not start or end with whitespace");
        return 0;
    }
    return 1;
}

static int in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(name, list[i]))
            return 1;
    return 0;
}

/* Which rule list a name is checked for: the action, and the side. */
struct rule {
    const char *op; /* "set", "add", "remove" */
    int response;
};

/* Whether <name> is an HTTP token, after reporting why not. */
static int token_ok(struct adm_cf *x, const char *name, size_t nlen)
{
    struct adm_cf_qbuf q;

    if (strlen(name) == nlen && h1_is_token(name, nlen))
        return 1;
    adm_cf_err(x, "invalid header name %s (an HTTP token)", adm_cf_quote(&q, name));
    return 0;
}

/* Whether the token <name> may be touched by rule <arg> (a struct rule),
 * after reporting why not. */
static int name_ok(struct adm_cf *x, const char *name, const void *arg)
{
    const struct rule *r = arg;
    const struct h1_slice n = {name, strlen(name)};
    int response = r->response;

    /* no route touches what the connection owns (h1_conn_fields), nor
     * any other proxy-* field */
    if (h1_conn_field(&n) >= 0 || !strncasecmp(name, "proxy-", 6)) {
        adm_cf_err(x, "%s is a hop-by-hop or framing field: the gateway manages it", name);
        return 0;
    }
    if (response ? in_list(name, response_owned, NFIELDS(response_owned))
                 : in_list(name, request_owned, NFIELDS(request_owned))) {
        adm_cf_err(x, "%s is written by the gateway itself%s", name,
                   response ? "" : " (see client_ip and trusted_proxies)");
        return 0;
    }
    if (!response && !strcasecmp(name, "host") && strcmp(r->op, "set")) {
        adm_cf_err(x, "Host can only be set (a request has exactly one)");
        return 0;
    }
    return 1;
}

/* The syntax of template <val>: every '{' opens a placeholder closed by
 * '}' ("{{" is a literal '{'). Names are checked against the route later. */
static int template_ok(struct adm_cf *x, const char *val)
{
    struct adm_hdr_part part;
    size_t pos = 0;
    int rc;

    while ((rc = adm_hdr_part_next(val, &pos, &part)) > 0)
        ;
    if (rc < 0) {
        adm_cf_err(x, "unterminated or empty placeholder at offset %zu (\"{{\" is a literal \"{\")",
                   pos);
        return 0;
    }
    return 1;
}

void adm_cf_header_fields(struct adm_cf *x, const json_t *v, adm_cf_name_rule rule, const void *arg,
                          int templates, struct adm_header **out, size_t *nout)
{
    const char *name;
    size_t nlen;
    json_t *hv;

    if (!adm_cf_want_object(x, v))
        return;
    if (!(*out = adm_cf_calloc(x, json_object_size(v), sizeof(**out))))
        return;
    json_object_keylen_foreach((json_t *)v, name, nlen, hv)
    {
        size_t mark = adm_cf_push_key(x, name);
        const char *val = adm_cf_str(x, hv, 0);
        int ok = token_ok(x, name, nlen) && rule(x, name, arg);
        if (val && (!value_ok(x, val) || (templates && !template_ok(x, val))))
            ok = 0;
        if (val && ok) {
            struct adm_header *h = &(*out)[(*nout)++];
            h->name = adm_cf_strdup(x, name);
            h->value = adm_cf_strdup(x, val);
        }
        adm_cf_pop(x, mark);
    }
}

static void remove_of(struct adm_cf *x, const json_t *v, int response, struct adm_hdr_actions *a)
{
    size_t n;

    if (!adm_cf_want_array(x, v))
        return;
    n = json_array_size(v);
    if (!(a->remove = adm_cf_calloc(x, n, sizeof(*a->remove))))
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        if (s && token_ok(x, s, strlen(s)) && name_ok(x, s, &(struct rule){"remove", response}))
            a->remove[a->nremove++] = adm_cf_strdup(x, s);
        adm_cf_pop(x, mark);
    }
}

/* What the keys of one request_headers or response_headers object fill
 * in (the <target> of hdr_fields' functions). */
struct hdr_target {
    struct adm_hdr_actions *a;
    int response;
};

static void hdr_set(struct adm_cf *x, const json_t *v, void *target)
{
    struct hdr_target *t = target;
    adm_cf_header_fields(x, v, name_ok, &(struct rule){"set", t->response}, 1, &t->a->set,
                         &t->a->nset);
}

static void hdr_add(struct adm_cf *x, const json_t *v, void *target)
{
    struct hdr_target *t = target;
    adm_cf_header_fields(x, v, name_ok, &(struct rule){"add", t->response}, 1, &t->a->add,
                         &t->a->nadd);
}

static void hdr_remove(struct adm_cf *x, const json_t *v, void *target)
{
    struct hdr_target *t = target;
    remove_of(x, v, t->response, t->a);
}

/* In the order check_once meets them. */
static const struct adm_cf_field hdr_fields[] = {
    {.key = "set", .kind = FK_FN, .fn = hdr_set},
    {.key = "add", .kind = FK_FN, .fn = hdr_add},
    {.key = "remove", .kind = FK_FN, .fn = hdr_remove},
};

/* Each name appears once across set, add and remove: <seen> maps every
 * name met so far, in lower case, to the action it was first met in. */
static void check_once(struct adm_cf *x, const struct adm_hdr_actions *a)
{
    json_t *seen = json_object();

    if (!seen) {
        x->nomem = 1;
        return;
    }
    for (int pass = 0; pass < 3 && !x->nomem; pass++) {
        size_t cnt = pass == 0 ? a->nset : pass == 1 ? a->nadd : a->nremove;
        for (size_t i = 0; i < cnt && !x->nomem; i++) {
            const char *name = pass == 0   ? a->set[i].name
                               : pass == 1 ? a->add[i].name
                                           : a->remove[i];
            char *key = name ? adm_cf_strdup(x, name) : NULL;
            const json_t *first;
            if (!key)
                continue;
            for (char *p = key; *p; p++)
                *p = to_lower(*p);
            if ((first = json_object_get(seen, key)))
                adm_cf_err_key(x, hdr_fields[pass].key,
                               "%s is also in \"%s\": one action per field", name,
                               hdr_fields[json_integer_value(first)].key);
            else if (json_object_set_new(seen, key, json_integer(pass)) < 0)
                x->nomem = 1;
            free(key);
        }
    }
    json_decref(seen);
}

void adm_cf_hdr_actions(struct adm_cf *x, const json_t *v, struct adm_hdr_actions **out,
                        int response)
{
    struct hdr_target t = {NULL, response};

    if (!adm_cf_want_object(x, v) || !(t.a = adm_cf_calloc(x, 1, sizeof(*t.a))))
        return;
    *out = t.a;
    adm_cf_fields(x, v, hdr_fields, NFIELDS(hdr_fields), &t);
    check_once(x, t.a);
}

/* Every placeholder of <h>[0..<n>) (under x->path + "/<op>") names a
 * built-in or a parameter of <pattern>. */
static void check_names(struct adm_cf *x, const char *op, const struct adm_header *h, size_t n,
                        const char *pattern)
{
    size_t mark = adm_cf_push_key(x, op);

    for (size_t i = 0; i < n; i++) {
        struct adm_hdr_part part;
        size_t pos = 0, hm = adm_cf_push_key(x, h[i].name);
        while (adm_hdr_part_next(h[i].value, &pos, &part) > 0) {
            if (part.slot != ADM_HDR_NAME ||
                adm_pattern_param_index(pattern, part.s, part.len) >= 0 ||
                adm_hdr_builtin(part.s, part.len) >= 0)
                continue;
            adm_cf_err(x,
                       "unknown placeholder {%.*s} at offset %zu (the route's parameters, "
                       "{client_ip}, {request_id} or {host})",
                       (int)part.len, part.s, (size_t)(part.s - 1 - h[i].value));
        }
        adm_cf_pop(x, hm);
    }
    adm_cf_pop(x, mark);
}

void adm_cf_hdr_actions_check(struct adm_cf *x, const char *key, const struct adm_hdr_actions *a,
                              const char *pattern)
{
    size_t mark;

    if (!a)
        return;
    mark = adm_cf_push_key(x, key);
    check_names(x, "set", a->set, a->nset, pattern);
    check_names(x, "add", a->add, a->nadd, pattern);
    adm_cf_pop(x, mark);
}

void adm_cf_header_fields_free(struct adm_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

void adm_hdr_actions_free(struct adm_hdr_actions *a)
{
    if (!a)
        return;
    adm_cf_header_fields_free(a->set, a->nset);
    adm_cf_header_fields_free(a->add, a->nadd);
    for (size_t i = 0; i < a->nremove; i++)
        free(a->remove[i]);
    free(a->remove);
    free(a);
}
