/*
 * policy_jwt.c - the "jwt" policy type: where its keys come from (a JWKS
 * in jwks_file, an HS256 secret in hs256_secret_file, both read when the
 * config is parsed, so a changed file is a changed policy), what a token
 * must say (issuer, audiences, algorithms, leeway_s, require_exp), the
 * claims copied to upstream headers (claims_to_headers) and the realm of
 * its 401s. The verification itself is admin/jwt.h; the worker side is
 * gateway/policy_jwt.c.
 *
 * "algorithms" defaults to every asymmetric algorithm (RS*, PS*, ES256,
 * ES384, EdDSA), plus HS256 only when hs256_secret_file is given: a key
 * only ever verifies the algorithms of its own type (jwt.h), so the
 * default accepts exactly what the configured keys can verify, and never
 * "none", which no list can name.
 *
 * "jwks_url" is only checked here (its form, jwks_ca_file's certificates
 * read; never fetched: a push, --check and a dry run never wait on the
 * network). The admin thread fetches it at run time (admin/jwks_remote.h),
 * from the moment a snapshot first holds the policy (adm_jwtp_state_new,
 * through the seam adm_jwtp_set_remote);
 * until the first good fetch the policy verifies with its other keys only,
 * and the worker answers 503 where the URL's keys might have verified
 * (gateway/policy_jwt.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "admin/jwks_fetch.h"

#define MAX_AUDIENCES 16
#define MAX_SECRET 4096
#define MAX_CA_FILE (1u << 20)
/* Envoy's remote_jwks defaults: a cache_duration of 5 minutes; our fetch
 * timeout is jwks_fetch.c's */
#define DEFAULT_REFRESH_S 300
#define DEFAULT_TIMEOUT_MS 5000

/* What the keys read so far; combined into the definition's set at the
 * end. */
struct jwt_parse {
    struct adm_jwt_conf *c;
    struct adm_policy *p;
    struct adm_jwks *file_set;
    int have_secret, have_algs;
    unsigned leeway_s;
    int require_exp;
    int forward_token;
    unsigned refresh_s, timeout_ms;
    char ca_digest[65]; /* jwks_ca_file's SHA-256 in hex; "" : none */
};

static void jw_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

/* The bytes of the file named by string <v>, with the file's bytes mixed
 * into the policy's identity; NULL after reporting. */
static char *read_keys_file(struct adm_cf *x, const json_t *v, struct jwt_parse *jp, size_t cap,
                            size_t *len, const char **path)
{
    char why[512];
    char *text;

    if (!(*path = adm_cf_str(x, v, 1)))
        return NULL;
    if (!(text = adm_read_small_file(*path, cap, len, why, sizeof(why)))) {
        adm_cf_err(x, "%s", why);
        return NULL;
    }
    adm_pol_hash_add(jp->p, text, *len);
    return text;
}

static void jw_jwks_file(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    char why[512], where[4200];
    const char *path;
    size_t len;
    char *text = read_keys_file(x, v, jp, ADM_JWKS_MAX_BYTES, &len, &path);

    if (!text)
        return;
    if (!(jp->file_set = adm_jwks_parse(text, len, why, sizeof(why))))
        adm_cf_err(x, "%s%s: %s", path, adm_path_where(path, where, sizeof(where)), why);
    free(text);
}

static void jw_secret_file(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    char where[4200];
    const char *path;
    size_t len;
    char *text = read_keys_file(x, v, jp, MAX_SECRET, &len, &path);

    if (!text)
        return;
    /* a file written by echo or an editor ends with a newline that is not
     * part of the secret */
    if (len && text[len - 1] == '\n')
        len--;
    if (len && text[len - 1] == '\r')
        len--;
    if (len < ADM_JWT_HS256_MIN)
        adm_cf_err(x, "%s%s: the secret has %zu bytes; HS256 needs at least %d (RFC 7518 3.2)",
                   path, adm_path_where(path, where, sizeof(where)), len, ADM_JWT_HS256_MIN);
    else if (!jp->c->set && !(jp->c->set = adm_jwks_new()))
        x->nomem = 1;
    else if (adm_jwks_add_hs256(jp->c->set, (const unsigned char *)text, len) < 0)
        x->nomem = 1;
    else
        jp->have_secret = 1;
    OPENSSL_cleanse(text, len);
    free(text);
}

static void jw_jwks_url(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    char why[600];
    const char *s = adm_cf_str(x, v, 1);

    if (!s)
        return;
    if (adm_jwks_url_check(s, why, sizeof(why)) < 0)
        adm_cf_err(x, "%s", why);
    else
        jp->c->url = adm_cf_strdup(x, s);
}

/* The certificates of PEM text <pem>[0..len), at least one; NULL when
 * none parses. */
static STACK_OF(X509) * read_certs(const char *pem, size_t len)
{
    STACK_OF(X509) *sk = sk_X509_new_null();
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *cert;

    while (sk && b && (cert = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        if (!sk_X509_push(sk, cert)) {
            X509_free(cert);
            break;
        }
    BIO_free(b);
    if (sk && !sk_X509_num(sk)) {
        sk_X509_free(sk);
        sk = NULL;
    }
    return sk;
}

/* jwks_ca_file: read now, like every file a config names, so that a bad
 * one is refused at its path and a changed one is a changed policy. */
static void jw_ca_file(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    unsigned char md[32];
    const char *path;
    size_t len;
    char *text = read_keys_file(x, v, jp, MAX_CA_FILE, &len, &path);

    if (!text)
        return;
    if (!(jp->c->cas = read_certs(text, len)))
        adm_cf_err(x, "%s holds no PEM certificate", path);
    else if (EVP_Digest(text, len, md, NULL, EVP_sha256(), NULL) != 1)
        x->nomem = 1;
    else
        for (int i = 0; i < 32; i++)
            snprintf(jp->ca_digest + 2 * i, 3, "%02x", md[i]);
    free(text);
}

static void jw_issuer(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    const char *s = adm_cf_str(x, v, 1);

    if (s)
        jp->c->issuer = adm_cf_strdup(x, s);
}

static void jw_audiences(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    size_t n;

    if (!adm_cf_want_array(x, v))
        return;
    if (!(n = json_array_size(v)) || n > MAX_AUDIENCES) {
        adm_cf_err(x, "1 to %d audiences (or leave the key out: aud is not checked)",
                   MAX_AUDIENCES);
        return;
    }
    if (!(jp->c->audiences = adm_cf_calloc(x, n, sizeof(char *))))
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        if (s && (jp->c->audiences[jp->c->naud] = adm_cf_strdup(x, s)))
            jp->c->naud++;
        adm_cf_pop(x, mark);
    }
}

static void jw_algorithms(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    struct adm_cf_qbuf q;

    if (!adm_cf_want_array(x, v))
        return;
    jp->have_algs = 1;
    if (!json_array_size(v))
        adm_cf_err(x, "empty: name at least one algorithm, or leave the key out for the default");
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        const char *s = adm_cf_str(x, json_array_get(v, i), 1);
        unsigned bit = s ? adm_jwt_alg_parse(s) : 0;
        if (s && !bit)
            adm_cf_err(x,
                       "%s is not an algorithm we verify (RS256, RS384, RS512, PS256, PS384, "
                       "PS512, ES256, ES384, EdDSA, HS256; never \"none\")",
                       adm_cf_quote(&q, s));
        jp->c->opts.algs |= bit;
        adm_cf_pop(x, mark);
    }
}

static void jw_claims(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    struct adm_jwt_conf *c = jp->c;
    struct adm_cf_qbuf q;
    const char *claim;
    json_t *hv;

    if (!adm_cf_want_object(x, v))
        return;
    if (json_object_size(v) > ADM_JWT_MAX_HEADERS) {
        adm_cf_err(x, "at most %d claims", ADM_JWT_MAX_HEADERS);
        return;
    }
    if (!(c->hdrs = adm_cf_calloc(x, json_object_size(v) + 1, sizeof(*c->hdrs))))
        return;
    json_object_foreach((json_t *)v, claim, hv)
    {
        size_t mark = adm_cf_push_key(x, claim);
        const char *h = adm_cf_str(x, hv, 1);
        int dup = 0;
        for (size_t k = 0; h && k < c->nhdrs; k++)
            dup |= !strcasecmp(c->hdrs[k].header, h);
        if (!*claim || strlen(claim) > 128)
            adm_cf_err(x, "a claim name of 1 to 128 bytes");
        else if (h && (!h1_is_token(h, strlen(h)) || strlen(h) > 128))
            adm_cf_err(x, "invalid header name %s (an HTTP token)", adm_cf_quote(&q, h));
        else if (h && adm_pol_header_owned(h))
            adm_cf_err(x,
                       "%s is a hop-by-hop field, Host, Authorization or written by the "
                       "gateway itself: no claim may set it",
                       adm_cf_quote(&q, h));
        else if (h && dup)
            adm_cf_err(x, "header %s already takes another claim", adm_cf_quote(&q, h));
        else if (h && (c->hdrs[c->nhdrs].claim = adm_cf_strdup(x, claim)) &&
                 (c->hdrs[c->nhdrs].header = adm_cf_strdup(x, h)))
            c->hdrs[c->nhdrs++].header_len = strlen(h);
        adm_cf_pop(x, mark);
    }
}

static void jw_realm(struct adm_cf *x, const json_t *v, void *target)
{
    struct jwt_parse *jp = target;
    const char *s = adm_cf_str(x, v, 1);

    if (!s)
        return;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 127 || *p == '"' || *p == '\\') {
            adm_cf_err(x, "a realm without '\"', '\\' or control characters");
            return;
        }
    if (strlen(s) > 128)
        adm_cf_err(x, "a realm of at most 128 characters");
    else
        jp->c->realm = adm_cf_strdup(x, s);
}

static const struct adm_cf_field jw_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = jw_type},
    {.key = "jwks_file", .kind = FK_FN, .fn = jw_jwks_file},
    {.key = "jwks_url", .kind = FK_FN, .fn = jw_jwks_url},
    {.key = "jwks_refresh_s",
     .kind = FK_UINT,
     .off = offsetof(struct jwt_parse, refresh_s),
     .min = 1,
     .max = 86400},
    {.key = "jwks_timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct jwt_parse, timeout_ms),
     .min = 100,
     .max = 60000},
    {.key = "jwks_ca_file", .kind = FK_FN, .fn = jw_ca_file},
    {.key = "hs256_secret_file", .kind = FK_FN, .fn = jw_secret_file},
    {.key = "issuer", .kind = FK_FN, .fn = jw_issuer},
    {.key = "audiences", .kind = FK_FN, .fn = jw_audiences},
    {.key = "algorithms", .kind = FK_FN, .fn = jw_algorithms},
    {.key = "leeway_s",
     .kind = FK_UINT,
     .off = offsetof(struct jwt_parse, leeway_s),
     .min = 0,
     .max = ADM_JWT_LEEWAY_MAX},
    {.key = "require_exp", .kind = FK_BOOL, .off = offsetof(struct jwt_parse, require_exp)},
    {.key = "forward_token", .kind = FK_BOOL, .off = offsetof(struct jwt_parse, forward_token)},
    {.key = "claims_to_headers", .kind = FK_FN, .fn = jw_claims},
    {.key = "realm", .kind = FK_FN, .fn = jw_realm},
};

/* The key set of the definition: the file's keys and the secret in one. */
static int merge_keys(struct jwt_parse *jp)
{
    struct adm_jwt_conf *c = jp->c;

    if (!jp->file_set)
        return 0;
    if (!c->set) {
        c->set = jp->file_set;
        jp->file_set = NULL;
        return 0;
    }
    return adm_jwks_merge(c->set, jp->file_set);
}

/* The keys that only mean something with jwks_url, refused without one;
 * with one, what a fetcher is told and known by: one fetcher serves every
 * policy naming the same URL under the same CA (jwks_remote.c). */
static void url_settings(struct adm_cf *x, const json_t *v, struct jwt_parse *jp)
{
    static const char *const only[] = {"jwks_refresh_s", "jwks_timeout_ms", "jwks_ca_file"};
    struct adm_jwt_conf *c = jp->c;
    size_t n;

    if (!json_object_get(v, "jwks_url")) {
        for (size_t i = 0; i < NFIELDS(only); i++)
            if (json_object_get(v, only[i]))
                adm_cf_err_key(x, only[i], "only with \"jwks_url\"");
        return;
    }
    if (!c->url)
        return;
    c->refresh_s = jp->refresh_s;
    c->timeout_ms = jp->timeout_ms;
    n = strlen(c->url) + sizeof(jp->ca_digest) + 2;
    if ((c->fetch_key = adm_cf_calloc(x, 1, n)))
        snprintf(c->fetch_key, n, "%s %s", c->url, jp->ca_digest[0] ? jp->ca_digest : "system");
}

void *adm_jwtp_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct jwt_parse jp = {.p = p,
                           .leeway_s = 30,
                           .require_exp = 1,
                           .forward_token = 1,
                           .refresh_s = DEFAULT_REFRESH_S,
                           .timeout_ms = DEFAULT_TIMEOUT_MS};
    size_t nerr = x->nerr;
    struct adm_jwt_conf *c;

    if (!(c = jp.c = adm_cf_calloc(x, 1, sizeof(*c))))
        return NULL;
    adm_cf_fields(x, v, jw_fields, NFIELDS(jw_fields), &jp);
    url_settings(x, v, &jp);
    if (x->nerr == nerr && !json_object_get(v, "jwks_file") &&
        !json_object_get(v, "hs256_secret_file") && !json_object_get(v, "jwks_url"))
        adm_cf_err(x, "has no key: give \"jwks_file\", \"jwks_url\" and/or "
                      "\"hs256_secret_file\"");
    if (x->nerr != nerr || x->nomem || !p->name)
        goto fail;
    if (merge_keys(&jp) < 0) {
        x->nomem = 1;
        goto fail;
    }
    if (!jp.have_algs)
        c->opts.algs = (ADM_JWT_ALGS_ALL & ~ADM_JWT_HS256) | (jp.have_secret ? ADM_JWT_HS256 : 0);
    c->opts.issuer = c->issuer;
    c->opts.audiences = (const char *const *)c->audiences;
    c->opts.naud = c->naud;
    c->opts.leeway_s = (long)jp.leeway_s;
    c->opts.require_exp = jp.require_exp;
    c->drop_token = !jp.forward_token;
    if (!c->realm && !(c->realm = adm_cf_strdup(x, p->name)))
        goto fail;
    adm_jwks_free(jp.file_set);
    return c;
fail:
    adm_jwks_free(jp.file_set);
    adm_jwtp_conf_free(c);
    return NULL;
}

void adm_jwtp_conf_free(void *conf)
{
    struct adm_jwt_conf *c = conf;

    if (!c)
        return;
    adm_jwks_free(c->set);
    free(c->url);
    free(c->fetch_key);
    sk_X509_pop_free(c->cas, X509_free);
    free(c->issuer);
    for (size_t i = 0; i < c->naud; i++)
        free(c->audiences[i]);
    free(c->audiences);
    for (size_t i = 0; i < c->nhdrs; i++) {
        free(c->hdrs[i].claim);
        free(c->hdrs[i].header);
    }
    free(c->hdrs);
    free(c->realm);
    free(c);
}

/* Admin thread only, set while jwks_remote.c runs. */
static const struct adm_jwtp_remote *remote;

void adm_jwtp_set_remote(const struct adm_jwtp_remote *r)
{
    remote = r;
}

void *adm_jwtp_state_new(const void *conf, unsigned nworkers)
{
    const struct adm_jwt_conf *c = conf;
    struct adm_jwt_state *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->nworkers = nworkers ? nworkers : 1;
    if (!(s->cache = calloc(s->nworkers, sizeof(*s->cache)))) {
        free(s);
        return NULL;
    }
    atomic_init(&s->keys, c->set ? adm_jwks_hold(c->set) : NULL);
    atomic_init(&s->want_fetch, 0);
    /* before any worker can see the policy: the URL's last good set, when
     * a fetcher for it runs already, is in s->keys from the start */
    if (c->url && remote && remote->attach(s, c) < 0) {
        adm_jwtp_state_free(s);
        return NULL;
    }
    return s;
}

void adm_jwtp_state_free(void *state)
{
    struct adm_jwt_state *s = state;

    if (!s)
        return;
    if (s->sub && remote)
        remote->detach(s);
    adm_jwks_free(atomic_load_explicit(&s->keys, memory_order_relaxed));
    for (unsigned w = 0; w < s->nworkers; w++)
        adm_jwt_cache_free(s->cache[w]);
    free(s->cache);
    free(s);
}
