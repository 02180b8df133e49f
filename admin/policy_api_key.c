/*
 * policy_api_key.c - the "api_key" policy type: keys stored as SHA-256
 * hashes (in the config, "keys": [{"name", "sha256"}], and/or in a
 * keys_file of "name:sha256hex" lines, read at parse time), where a
 * request's key comes from (a header, X-API-Key by default, and/or a query
 * parameter), the header that takes the consumer's name upstream, and the
 * realm of the 401's WWW-Authenticate.
 *
 * A presented key is hashed and looked up in a table of the stored
 * hashes (O(1), so a flood of bad keys costs one digest each), the one
 * candidate compared in constant time.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#define MAX_KEYS 100000
#define MAX_FILE (16u << 20)

struct ak_parse {
    struct adm_ak_conf *c;
    struct adm_policy *p;
    char *realm;
};

static void ak_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

static int unhex(const char *s, size_t n, unsigned char out[32])
{
    if (n != 64)
        return -1;
    for (size_t i = 0; i < 32; i++) {
        int hi = s[2 * i], lo = s[2 * i + 1], v = 0;
        for (int k = 0; k < 2; k++) {
            int ch = k ? lo : hi, d;
            if (ch >= '0' && ch <= '9')
                d = ch - '0';
            else if (ch >= 'a' && ch <= 'f')
                d = ch - 'a' + 10;
            else if (ch >= 'A' && ch <= 'F')
                d = ch - 'A' + 10;
            else
                return -1;
            v = v * 16 + d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

static int name_ok(const char *s, size_t n)
{
    if (!n || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum((unsigned char)s[i]) && !strchr("_.@-", s[i]))
            return 0;
    return 1;
}

static size_t tab_slot(const unsigned char *sha, size_t cap)
{
    uint64_t h;

    memcpy(&h, sha, sizeof(h));
    return (size_t)h & (cap - 1);
}

static void tab_put(struct adm_ak_conf *c, size_t k)
{
    size_t i = tab_slot(c->keys[k].sha256, c->tab_cap);

    while (c->tab[i])
        i = (i + 1) & (c->tab_cap - 1);
    c->tab[i] = (uint32_t)k + 1;
}

/* Enters key <k> (the last added) in the table, grown to keep it at
 * most half full; -1 on out of memory. */
static int tab_add(struct adm_ak_conf *c, size_t k)
{
    if ((k + 1) * 2 > c->tab_cap) {
        size_t cap = c->tab_cap ? c->tab_cap * 2 : 128;
        uint32_t *t = calloc(cap, sizeof(*t));
        if (!t)
            return -1;
        free(c->tab);
        c->tab = t;
        c->tab_cap = cap;
        for (size_t i = 0; i < k; i++) /* in order: equal digests keep theirs */
            tab_put(c, i);
    }
    tab_put(c, k);
    return 0;
}

/* Adds a key; -1 on out of memory. */
static int add_key(struct adm_ak_conf *c, const char *name, size_t nlen, const unsigned char *sha)
{
    if (c->nkeys % 64 == 0) {
        struct adm_ak_key *k = realloc(c->keys, (c->nkeys + 64) * sizeof(*k));
        if (!k)
            return -1;
        c->keys = k;
    }
    if (!(c->keys[c->nkeys].name = strndup(name, nlen)))
        return -1;
    memcpy(c->keys[c->nkeys++].sha256, sha, 32);
    return tab_add(c, c->nkeys - 1);
}

int adm_ak_parse_file(struct adm_ak_conf *c, const char *text, size_t len, char *why, size_t cap)
{
    const char *p = text, *end = text + len;
    unsigned line = 0;

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon;
        size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p);
        unsigned char sha[32];
        line++;
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n && p[0] != '#') {
            colon = memchr(p, ':', n);
            if (!colon || !name_ok(p, (size_t)(colon - p)) ||
                unhex(colon + 1, n - (size_t)(colon + 1 - p), sha) < 0) {
                snprintf(why, cap, "line %u: expected name:sha256hex (64 hex digits)", line);
                return -1;
            }
            if (c->nkeys >= MAX_KEYS) {
                snprintf(why, cap, "line %u: more than %d keys", line, MAX_KEYS);
                return -1;
            }
            if (add_key(c, p, (size_t)(colon - p), sha) < 0) {
                snprintf(why, cap, "out of memory");
                return -1;
            }
        }
        p += n;
        while (p < end && *p != '\n')
            p++;
        p++;
    }
    return 0;
}

static void ak_keys(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    static const char *const member[] = {"name", "sha256"};

    if (!adm_cf_want_array(x, v))
        return;
    if (json_array_size(v) > MAX_KEYS) { /* never keys ignored silently */
        adm_cf_err(x, "at most %d keys (this list has %zu)", MAX_KEYS, json_array_size(v));
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        const json_t *kv = json_array_get(v, i);
        const char *s[2] = {NULL, NULL};
        unsigned char sha[32];
        if (adm_cf_want_object(x, kv)) {
            const char *k;
            json_t *mv;
            json_object_foreach((json_t *)kv, k, mv)
            {
                size_t m2 = adm_cf_push_key(x, k);
                if (strcmp(k, member[0]) && strcmp(k, member[1]))
                    adm_cf_err(x, "unknown key (a key has \"name\" and \"sha256\")");
                else
                    s[strcmp(k, member[0]) != 0] = adm_cf_str(x, mv, 1);
                adm_cf_pop(x, m2);
            }
            if (!s[0] || !name_ok(s[0], strlen(s[0])))
                adm_cf_err_key(x, "name", "needed: 1..128 letters, digits, '_', '.', '@', '-'");
            else if (!s[1] || unhex(s[1], strlen(s[1]), sha) < 0)
                adm_cf_err_key(x, "sha256", "needed: the key's SHA-256 in 64 hex digits");
            else if (add_key(ap->c, s[0], strlen(s[0]), sha) < 0)
                x->nomem = 1;
        }
        adm_cf_pop(x, mark);
    }
}

static void ak_keys_file(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    const char *path = adm_cf_str(x, v, 1);
    char why[512], where[4200];
    size_t len;
    char *text;

    if (!path)
        return;
    if (!(text = adm_read_small_file(path, MAX_FILE, &len, why, sizeof(why)))) {
        adm_cf_err(x, "%s", why);
        return;
    }
    if (adm_ak_parse_file(ap->c, text, len, why, sizeof(why)) < 0)
        adm_cf_err(x, "%s%s: %s", path, adm_path_where(path, where, sizeof(where)), why);
    adm_pol_hash_add(ap->p, text, len); /* a changed file is a changed policy */
    free(text);
}

/* Names a policy never sets nor takes a credential from: hop-by-hop and
 * framing fields, whose copy after ours would desync the upstream. */
static const char *const reserved[] = {
    "transfer-encoding", "content-length", "host",    "connection", "te",
    "upgrade",           "keep-alive",     "trailer", "expect"};

void adm_pol_header_name(struct adm_cf *x, const json_t *v, char **out, size_t *len)
{
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;
    size_t n;

    if (!s)
        return;
    n = strlen(s);
    if (!h1_is_token(s, n) || n > 128) {
        adm_cf_err(x, "invalid header name %s", adm_cf_quote(&q, s));
        return;
    }
    if (n >= 6 && h1_ci_eq(s, 6, "proxy-")) {
        adm_cf_err(x, "%s is a Proxy-* field, a client's word to a proxy: not for a policy",
                   adm_cf_quote(&q, s));
        return;
    }
    if (h1_ci_eq(s, n, "host")) {
        adm_cf_err(x,
                   "%s is the gateway's to set (X-Forwarded-Host carries the client's): not for "
                   "a policy",
                   adm_cf_quote(&q, s));
        return;
    }
    for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
        if (h1_ci_eq(s, n, reserved[i])) {
            adm_cf_err(x, "%s is a hop-by-hop or framing field: not for a policy",
                       adm_cf_quote(&q, s));
            return;
        }
    free(*out);
    if ((*out = adm_cf_strdup(x, s))) {
        *len = n;
        for (char *d = *out; *d; d++)
            *d = to_lower(*d);
    }
}

int adm_pol_header_owned(const char *name)
{
    static const char *const owned[] = {"host",
                                        "authorization",
                                        "x-forwarded-for",
                                        "x-forwarded-proto",
                                        "x-forwarded-host",
                                        "x-real-ip",
                                        "x-request-id",
                                        "forwarded",
                                        "via"};
    const struct h1_slice n = {name, strlen(name)};

    if (h1_conn_field(&n) >= 0 || !strncasecmp(name, "proxy-", 6))
        return 1;
    for (size_t i = 0; i < NFIELDS(owned); i++)
        if (!strcasecmp(name, owned[i]))
            return 1;
    return 0;
}

static void ak_header(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    adm_pol_header_name(x, v, &ap->c->header, &ap->c->header_len);
}

static void ak_consumer(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    adm_pol_header_name(x, v, &ap->c->consumer, &ap->c->consumer_len);
}

static void ak_query(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    const char *s = adm_cf_str(x, v, 1);

    if (s && !adm_cf_is_name(s, "_.-", 128))
        adm_cf_err(x, "invalid parameter name (1..128 letters, digits, '_', '.', '-')");
    else if (s && (ap->c->query = adm_cf_strdup(x, s)))
        ap->c->query_len = strlen(s);
}

static void ak_realm(struct adm_cf *x, const json_t *v, void *target)
{
    struct ak_parse *ap = target;
    const char *s = adm_cf_str(x, v, 1);

    if (s && (strchr(s, '"') || strchr(s, '\\') || strlen(s) > 128))
        adm_cf_err(x, "a realm of at most 128 characters, without '\"' or '\\'");
    else if (s)
        ap->realm = adm_cf_strdup(x, s);
    for (const char *p = s; p && *p; p++)
        if ((unsigned char)*p < ' ' || *p == 127) {
            adm_cf_err(x, "must not contain control characters");
            break;
        }
}

static const struct adm_cf_field ak_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = ak_type},
    {.key = "keys", .kind = FK_FN, .fn = ak_keys},
    {.key = "keys_file", .kind = FK_FN, .fn = ak_keys_file},
    {.key = "header", .kind = FK_FN, .fn = ak_header},
    {.key = "query", .kind = FK_FN, .fn = ak_query},
    {.key = "consumer_header", .kind = FK_FN, .fn = ak_consumer},
    {.key = "realm", .kind = FK_FN, .fn = ak_realm},
};

void *adm_ak_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct ak_parse ap = {.p = p};
    size_t nerr = x->nerr;
    char buf[256];
    int n;

    if (!(ap.c = adm_cf_calloc(x, 1, sizeof(*ap.c))))
        return NULL;
    adm_cf_fields(x, v, ak_fields, NFIELDS(ak_fields), &ap);
    if (!json_object_get(v, "header") && !json_object_get(v, "query")) {
        if ((ap.c->header = adm_cf_strdup(x, "x-api-key")))
            ap.c->header_len = 9;
    }
    if (x->nerr == nerr && !ap.c->nkeys)
        adm_cf_err(x, "has no key: give \"keys\" or a \"keys_file\" with at least one");
    if (x->nerr != nerr || x->nomem || !p->name)
        goto fail;
    for (size_t i = 0; i < ap.c->nkeys; i++) { /* and so is a key given to someone else */
        adm_pol_hash_add(p, ap.c->keys[i].name, strlen(ap.c->keys[i].name) + 1);
        adm_pol_hash_add(p, ap.c->keys[i].sha256, 32);
    }
    n = snprintf(buf, sizeof(buf), "WWW-Authenticate: ApiKey realm=\"%s\"\r\n",
                 ap.realm ? ap.realm : p->name);
    if (n < 0 || (size_t)n >= sizeof(buf) || !(ap.c->challenge = strdup(buf))) {
        x->nomem = 1;
        goto fail;
    }
    ap.c->challenge_len = (size_t)n;
    free(ap.realm);
    return ap.c;
fail:
    free(ap.realm);
    adm_ak_conf_free(ap.c);
    return NULL;
}

void *adm_ak_state_new(const void *conf, unsigned nworkers)
{
    (void)conf;
    return adm_sha_new(nworkers);
}

void adm_ak_state_free(void *state)
{
    adm_sha_free(state);
}

struct adm_sha *adm_sha_new(unsigned nworkers)
{
    struct adm_sha *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->n = nworkers ? nworkers : 1;
    if (!(s->md = EVP_MD_fetch(NULL, "SHA256", NULL)) || !(s->ctx = calloc(s->n, sizeof(*s->ctx))))
        goto fail;
    for (unsigned w = 0; w < s->n; w++)
        if (!(s->ctx[w] = EVP_MD_CTX_new()) || !EVP_DigestInit_ex2(s->ctx[w], s->md, NULL))
            goto fail;
    return s;
fail:
    adm_sha_free(s);
    return NULL;
}

void adm_sha_free(struct adm_sha *s)
{
    if (!s)
        return;
    for (unsigned w = 0; s->ctx && w < s->n; w++)
        EVP_MD_CTX_free(s->ctx[w]);
    free(s->ctx);
    EVP_MD_free(s->md);
    free(s);
}

int adm_sha256(const struct adm_sha *s, unsigned w, const void *p, size_t n, unsigned char out[32])
{
    EVP_MD_CTX *c;

    if (!s)
        return SHA256(p, n, out) ? 0 : -1;
    c = s->ctx[w < s->n ? w : 0];
    return EVP_DigestInit_ex2(c, NULL, NULL) && EVP_DigestUpdate(c, p, n) &&
                   EVP_DigestFinal_ex(c, out, NULL)
               ? 0
               : -1;
}

void adm_ak_conf_free(void *conf)
{
    struct adm_ak_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < c->nkeys; i++)
        free(c->keys[i].name);
    free(c->keys);
    free(c->tab);
    free(c->header);
    free(c->query);
    free(c->consumer);
    free(c->challenge);
    free(c);
}

int adm_ak_find(const struct adm_ak_conf *c, const struct adm_sha *s, unsigned w, const char *key,
                size_t n)
{
    unsigned char sha[32];

    if (!c->tab_cap || adm_sha256(s, w, key, n, sha) < 0)
        return -1;
    for (size_t i = tab_slot(sha, c->tab_cap); c->tab[i]; i = (i + 1) & (c->tab_cap - 1)) {
        const struct adm_ak_key *k = &c->keys[c->tab[i] - 1];
        if (!memcmp(k->sha256, sha, 8) && CRYPTO_memcmp(k->sha256, sha, 32) == 0)
            return (int)(c->tab[i] - 1);
    }
    return -1;
}
