/*
 * jwk.c - key sets for admin/jwt.h: JSON Web Keys (RFC 7517, 7518 section 6,
 * RFC 8037 for Ed25519) imported into OpenSSL EVP_PKEYs through
 * EVP_PKEY_fromdata, HS256 secrets held as keyed HMAC contexts, and the
 * strict base64url decoder the tokens use too.
 *
 * A key is kept only for the algorithms its type verifies, cut down to its
 * own "alg" when it names one: that is what makes algorithm confusion
 * impossible later (an RSA key simply has no HS256 bit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "admin/jwt.h"
#include "admin/jwt_int.h"

/* A bound on the document and on its keys, so that a hostile JWKS URL cannot
 * make the admin thread import without end. */
#define JWKS_KEYS_MAX 256
/* RFC 7518 3.3: RSA keys of 2048 bits or more. */
#define JWK_RSA_MIN_BITS 2048

#define JWT_RSA_ALGS                                                                               \
    (ADM_JWT_RS256 | ADM_JWT_RS384 | ADM_JWT_RS512 | ADM_JWT_PS256 | ADM_JWT_PS384 | ADM_JWT_PS512)

static const struct {
    const char *name;
    unsigned bit;
} jwt_algs[] = {
    {"RS256", ADM_JWT_RS256}, {"RS384", ADM_JWT_RS384}, {"RS512", ADM_JWT_RS512},
    {"PS256", ADM_JWT_PS256}, {"PS384", ADM_JWT_PS384}, {"PS512", ADM_JWT_PS512},
    {"ES256", ADM_JWT_ES256}, {"ES384", ADM_JWT_ES384}, {"EdDSA", ADM_JWT_EDDSA},
    {"HS256", ADM_JWT_HS256},
};

unsigned adm_jwt_alg_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(jwt_algs) / sizeof(jwt_algs[0]); i++)
        if (strcmp(jwt_algs[i].name, name) == 0)
            return jwt_algs[i].bit;
    return 0;
}

const char *adm_jwt_alg_name(unsigned alg)
{
    for (size_t i = 0; i < sizeof(jwt_algs) / sizeof(jwt_algs[0]); i++)
        if (jwt_algs[i].bit == alg)
            return jwt_algs[i].name;
    return NULL;
}

/* ---- base64url ---- */

/* clang-format off */
/* The value of each byte in the URL-safe alphabet (RFC 4648 5), or -1. */
static const signed char b64url_values[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, 63,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};
/* clang-format on */

long jwt_b64url_decode(const char *in, size_t len, unsigned char *out)
{
    const unsigned char *u = (const unsigned char *)in;
    size_t full = len / 4 * 4, rest = len - full;
    long n = 0;
    int a, b, c, d;
    unsigned long v;

    if (rest == 1)
        return -1;
    /* four characters make three bytes */
    for (size_t i = 0; i < full; i += 4) {
        a = b64url_values[u[i]], b = b64url_values[u[i + 1]];
        c = b64url_values[u[i + 2]], d = b64url_values[u[i + 3]];
        if ((a | b | c | d) < 0)
            return -1;
        v = (unsigned long)a << 18 | (unsigned long)b << 12 | (unsigned long)c << 6 | (unsigned)d;
        out[n++] = (unsigned char)(v >> 16);
        out[n++] = (unsigned char)(v >> 8);
        out[n++] = (unsigned char)v;
    }
    if (rest == 0)
        return n;
    /* two characters make one byte, three make two; the bits left over must
     * be zero, or two texts would decode alike */
    a = b64url_values[u[full]], b = b64url_values[u[full + 1]];
    c = rest == 3 ? b64url_values[u[full + 2]] : 0;
    if ((a | b | c) < 0)
        return -1;
    v = (unsigned long)a << 12 | (unsigned long)b << 6 | (unsigned)c;
    if (rest == 2) {
        if (v & 0xfu << 6)
            return -1;
        out[n++] = (unsigned char)(v >> 10);
    } else {
        if (v & 0x3)
            return -1;
        out[n++] = (unsigned char)(v >> 10);
        out[n++] = (unsigned char)(v >> 2);
    }
    return n;
}

/* ---- sets ---- */

static void key_clear(struct jwt_key *k)
{
    free(k->kid);
    EVP_PKEY_free(k->pkey);
    EVP_MAC_CTX_free(k->hmac);
}

struct adm_jwks *adm_jwks_new(void)
{
    static const char *const names[JWT_NMD] = {"SHA256", "SHA384", "SHA512"};
    struct adm_jwks *set = calloc(1, sizeof(*set));

    if (!set)
        return NULL;
    static atomic_ullong next_id = 1;

    atomic_init(&set->refs, 1);
    set->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    for (int i = 0; i < JWT_NMD; i++) {
        set->md[i] = EVP_MD_fetch(NULL, names[i], NULL);
        if (!set->md[i]) {
            adm_jwks_free(set);
            return NULL;
        }
    }
    return set;
}

struct adm_jwks *adm_jwks_hold(struct adm_jwks *set)
{
    atomic_fetch_add_explicit(&set->refs, 1, memory_order_relaxed);
    return set;
}

void adm_jwks_free(struct adm_jwks *set)
{
    if (!set || atomic_fetch_sub_explicit(&set->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < set->n; i++)
        key_clear(&set->keys[i]);
    free(set->keys);
    for (int i = 0; i < JWT_NMD; i++)
        EVP_MD_free(set->md[i]);
    free(set);
}

size_t adm_jwks_count(const struct adm_jwks *set)
{
    return set ? set->n : 0;
}

/* Appends <k> to <set>, which takes what it owns; on failure <k> is cleared. */
static int set_push(struct adm_jwks *set, struct jwt_key *k)
{
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 4;
        struct jwt_key *keys = realloc(set->keys, cap * sizeof(*keys));
        if (!keys) {
            key_clear(k);
            return -1;
        }
        set->keys = keys;
        set->cap = cap;
    }
    set->keys[set->n++] = *k;
    return 0;
}

/* An HMAC-SHA256 context keyed with <secret>, or NULL. */
static EVP_MAC_CTX *hmac_new(const unsigned char *secret, size_t len)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };

    EVP_MAC_free(mac); /* the context holds its own reference */
    if (ctx && !EVP_MAC_init(ctx, secret, len, params)) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

int adm_jwks_add_hs256(struct adm_jwks *set, const unsigned char *secret, size_t len)
{
    struct jwt_key k = {.algs = ADM_JWT_HS256};

    if (len < ADM_JWT_HS256_MIN)
        return -1;
    k.hmac = hmac_new(secret, len);
    if (!k.hmac)
        return -1;
    return set_push(set, &k);
}

int adm_jwks_merge(struct adm_jwks *into, const struct adm_jwks *from)
{
    for (size_t i = 0; i < from->n; i++) {
        const struct jwt_key *f = &from->keys[i];
        struct jwt_key k = {.algs = f->algs, .kid_len = f->kid_len};

        if (f->kid && !(k.kid = malloc(f->kid_len + 1)))
            return -1;
        if (f->kid)
            memcpy(k.kid, f->kid, f->kid_len + 1);
        if (f->pkey && EVP_PKEY_up_ref(f->pkey))
            k.pkey = f->pkey;
        if (f->hmac)
            k.hmac = EVP_MAC_CTX_dup(f->hmac);
        if ((f->pkey && !k.pkey) || (f->hmac && !k.hmac)) {
            key_clear(&k);
            return -1;
        }
        if (set_push(into, &k) < 0)
            return -1;
    }
    return 0;
}

/* ---- JWK import ---- */

/* What importing one JWK came to. */
enum jwk_verdict { JWK_KEPT, JWK_SKIPPED, JWK_BAD, JWK_NOMEM };

/* The import of one key: where it is in the document, and the reason when
 * it is bad. */
struct jwk_ctx {
    const char *path; /* "/keys/3" or "" */
    char *err;
    size_t cap;
};

static enum jwk_verdict jwk_bad(struct jwk_ctx *c, const char *member, const char *why)
{
    snprintf(c->err, c->cap, "%s%s%s: %s", c->path[0] || member ? c->path : "the JWK",
             member ? "/" : "", member ? member : "", why);
    return JWK_BAD;
}

/* Decodes the base64url member <name> of <jwk> into a new buffer (*out,
 * *len; the caller frees it). A missing member is bad. */
static enum jwk_verdict jwk_bytes(struct jwk_ctx *c, json_t *jwk, const char *name,
                                  unsigned char **out, size_t *len)
{
    json_t *v = json_object_get(jwk, name);
    const char *s;
    size_t slen;
    long n;

    if (!json_is_string(v))
        return jwk_bad(c, name, v ? "not a string" : "missing");
    s = json_string_value(v);
    slen = json_string_length(v);
    *out = malloc(slen * 3 / 4 + 1);
    if (!*out)
        return JWK_NOMEM;
    n = jwt_b64url_decode(s, slen, *out);
    if (n <= 0) {
        free(*out);
        *out = NULL;
        return jwk_bad(c, name, n < 0 ? "not unpadded base64url" : "empty");
    }
    *len = (size_t)n;
    return JWK_KEPT;
}

/* Builds a public key of type <type> from <params>; then checks it (a point
 * on its curve, a sane modulus). */
static enum jwk_verdict pkey_fromdata(struct jwk_ctx *c, const char *type, OSSL_PARAM_BLD *bld,
                                      EVP_PKEY **out)
{
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY_CTX *check = NULL;
    enum jwk_verdict v = JWK_NOMEM;

    *out = NULL;
    if (!params || !ctx)
        goto out;
    if (EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        v = jwk_bad(c, NULL, "not a valid public key");
        goto out;
    }
    check = EVP_PKEY_CTX_new_from_pkey(NULL, *out, NULL);
    if (!check)
        goto out;
    if (EVP_PKEY_public_check(check) <= 0) {
        v = jwk_bad(c, NULL, "not a valid public key");
        goto out;
    }
    v = JWK_KEPT;
out:
    if (v != JWK_KEPT) {
        EVP_PKEY_free(*out);
        *out = NULL;
    }
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return v;
}

/* Two base64url members of a key (n and e, x and y), decoded. */
struct jwk_pair {
    unsigned char *v[2];
    size_t len[2];
};

static enum jwk_verdict jwk_pair_read(struct jwk_ctx *c, json_t *jwk, const char *a, const char *b,
                                      struct jwk_pair *p)
{
    enum jwk_verdict v = jwk_bytes(c, jwk, a, &p->v[0], &p->len[0]);

    return v == JWK_KEPT ? jwk_bytes(c, jwk, b, &p->v[1], &p->len[1]) : v;
}

static void jwk_pair_free(struct jwk_pair *p, OSSL_PARAM_BLD *bld)
{
    OSSL_PARAM_BLD_free(bld);
    free(p->v[0]);
    free(p->v[1]);
}

static enum jwk_verdict jwk_rsa(struct jwk_ctx *c, json_t *jwk, struct jwt_key *k)
{
    struct jwk_pair ne = {{NULL, NULL}, {0, 0}};
    BIGNUM *bn = NULL, *be = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    enum jwk_verdict v;

    if (!(k->algs &= JWT_RSA_ALGS))
        return JWK_SKIPPED;
    if ((v = jwk_pair_read(c, jwk, "n", "e", &ne)) != JWK_KEPT)
        goto out;
    v = JWK_NOMEM;
    bn = BN_bin2bn(ne.v[0], (int)ne.len[0], NULL);
    be = BN_bin2bn(ne.v[1], (int)ne.len[1], NULL);
    bld = OSSL_PARAM_BLD_new();
    if (!bn || !be || !bld || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) ||
        !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        goto out;
    v = pkey_fromdata(c, "RSA", bld, &k->pkey);
    if (v == JWK_KEPT && EVP_PKEY_get_bits(k->pkey) < JWK_RSA_MIN_BITS)
        v = JWK_SKIPPED;
out:
    BN_free(bn);
    BN_free(be);
    jwk_pair_free(&ne, bld);
    return v;
}

static enum jwk_verdict jwk_ec(struct jwk_ctx *c, json_t *jwk, struct jwt_key *k)
{
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    struct jwk_pair xy = {{NULL, NULL}, {0, 0}};
    unsigned char pub[1 + 2 * 48];
    size_t flen;
    OSSL_PARAM_BLD *bld = NULL;
    enum jwk_verdict v;

    if (!crv)
        return jwk_bad(c, "crv", "missing, or not a string");
    if (strcmp(crv, "P-256") == 0) {
        k->algs &= ADM_JWT_ES256;
        flen = 32;
    } else if (strcmp(crv, "P-384") == 0) {
        k->algs &= ADM_JWT_ES384;
        flen = 48;
    } else {
        return JWK_SKIPPED; /* P-521, secp256k1: not ours */
    }
    if (!k->algs)
        return JWK_SKIPPED;
    if ((v = jwk_pair_read(c, jwk, "x", "y", &xy)) != JWK_KEPT)
        goto out;
    /* RFC 7518 6.2.1.2: the full length of a field element, no less */
    if (xy.len[0] != flen || xy.len[1] != flen) {
        v = jwk_bad(c, xy.len[0] != flen ? "x" : "y", "not the curve's coordinate length");
        goto out;
    }
    pub[0] = 0x04; /* an uncompressed point */
    memcpy(pub + 1, xy.v[0], flen);
    memcpy(pub + 1 + flen, xy.v[1], flen);
    v = JWK_NOMEM;
    bld = OSSL_PARAM_BLD_new();
    if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, crv, 0) ||
        !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, 1 + 2 * flen))
        goto out;
    v = pkey_fromdata(c, "EC", bld, &k->pkey);
out:
    jwk_pair_free(&xy, bld);
    return v;
}

static enum jwk_verdict jwk_okp(struct jwk_ctx *c, json_t *jwk, struct jwt_key *k)
{
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    unsigned char *x = NULL;
    size_t xlen;
    enum jwk_verdict v;

    if (!crv)
        return jwk_bad(c, "crv", "missing, or not a string");
    if (strcmp(crv, "Ed25519") != 0)
        return JWK_SKIPPED; /* Ed448, X25519 */
    if (!(k->algs &= ADM_JWT_EDDSA))
        return JWK_SKIPPED;
    if ((v = jwk_bytes(c, jwk, "x", &x, &xlen)) != JWK_KEPT)
        return v;
    if (xlen != 32) {
        free(x);
        return jwk_bad(c, "x", "not 32 bytes");
    }
    k->pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, xlen);
    free(x);
    return k->pkey ? JWK_KEPT : JWK_NOMEM;
}

static enum jwk_verdict jwk_oct(struct jwk_ctx *c, json_t *jwk, struct jwt_key *k)
{
    unsigned char *s = NULL;
    size_t len;
    enum jwk_verdict v;

    if (!(k->algs &= ADM_JWT_HS256))
        return JWK_SKIPPED;
    if ((v = jwk_bytes(c, jwk, "k", &s, &len)) != JWK_KEPT)
        return v;
    if (len >= ADM_JWT_HS256_MIN) {
        k->hmac = hmac_new(s, len);
        v = k->hmac ? JWK_KEPT : JWK_NOMEM;
    } else {
        v = JWK_SKIPPED; /* too short for HS256 */
    }
    OPENSSL_cleanse(s, len);
    free(s);
    return v;
}

/* Whether <jwk>'s "use" and "key_ops" allow verifying: absent, "sig", or a
 * list holding "verify". */
static enum jwk_verdict jwk_usable(struct jwk_ctx *c, json_t *jwk)
{
    json_t *use = json_object_get(jwk, "use"), *ops = json_object_get(jwk, "key_ops"), *op;
    size_t i;

    if (use && !json_is_string(use))
        return jwk_bad(c, "use", "not a string");
    if (use && strcmp(json_string_value(use), "sig") != 0)
        return JWK_SKIPPED;
    if (!ops)
        return JWK_KEPT;
    if (!json_is_array(ops))
        return jwk_bad(c, "key_ops", "not an array");
    json_array_foreach(ops, i, op) if (json_is_string(op) && strcmp(json_string_value(op),
                                                                    "verify") == 0) return JWK_KEPT;
    return JWK_SKIPPED;
}

static const struct {
    const char *kty;
    enum jwk_verdict (*import)(struct jwk_ctx *c, json_t *jwk, struct jwt_key *k);
} jwk_types[] = {
    {"RSA", jwk_rsa},
    {"EC", jwk_ec},
    {"OKP", jwk_okp},
    {"oct", jwk_oct},
};

/* Imports the JWK <jwk> into <set>, or skips it. */
static enum jwk_verdict jwk_import(struct jwk_ctx *c, json_t *jwk, struct adm_jwks *set)
{
    json_t *kty, *alg, *kid;
    struct jwt_key k = {.algs = ADM_JWT_ALGS_ALL};
    enum jwk_verdict v;

    if (!json_is_object(jwk))
        return jwk_bad(c, NULL, "not an object");
    kty = json_object_get(jwk, "kty");
    alg = json_object_get(jwk, "alg");
    kid = json_object_get(jwk, "kid");
    if (!json_is_string(kty))
        return jwk_bad(c, "kty", kty ? "not a string" : "missing");
    if ((alg && !json_is_string(alg)) || (kid && !json_is_string(kid)))
        return jwk_bad(c, json_is_string(kid) || !kid ? "alg" : "kid", "not a string");
    if ((v = jwk_usable(c, jwk)) != JWK_KEPT)
        return v;
    /* an alg we do not verify (RSA-OAEP, HS512) makes the key useless: skipped
     * before its material is even read */
    if (alg && !(k.algs = adm_jwt_alg_parse(json_string_value(alg))))
        return JWK_SKIPPED;
    for (size_t i = 0; i < sizeof(jwk_types) / sizeof(jwk_types[0]); i++) {
        if (strcmp(json_string_value(kty), jwk_types[i].kty) != 0)
            continue;
        v = jwk_types[i].import(c, jwk, &k);
        if (v == JWK_KEPT && kid) {
            k.kid_len = json_string_length(kid);
            k.kid = malloc(k.kid_len + 1);
            if (k.kid)
                memcpy(k.kid, json_string_value(kid), k.kid_len + 1);
            else
                v = JWK_NOMEM;
        }
        if (v != JWK_KEPT)
            key_clear(&k);
        else if (set_push(set, &k) < 0)
            v = JWK_NOMEM;
        return v;
    }
    return JWK_SKIPPED; /* an unknown kty */
}

struct adm_jwks *adm_jwks_parse(const char *json, size_t len, char *err, size_t cap)
{
    struct adm_jwks *set = NULL;
    json_error_t jerr;
    json_t *doc, *keys, *jwk;
    char path[32] = "";
    struct jwk_ctx c = {.path = path, .err = err, .cap = cap};
    enum jwk_verdict v = JWK_KEPT;
    size_t i;

    if (len > ADM_JWKS_MAX_BYTES) {
        snprintf(err, cap, "larger than %d bytes", ADM_JWKS_MAX_BYTES);
        return NULL;
    }
    doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        snprintf(err, cap, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(doc)) {
        snprintf(err, cap, "not a JSON object");
        goto fail;
    }
    set = adm_jwks_new();
    if (!set)
        goto fail_nomem;
    keys = json_object_get(doc, "keys");
    if (!keys) {
        v = jwk_import(&c, doc, set); /* a bare JWK */
    } else if (!json_is_array(keys)) {
        snprintf(err, cap, "/keys: not an array");
        goto fail;
    } else if (json_array_size(keys) > JWKS_KEYS_MAX) {
        snprintf(err, cap, "/keys: more than %d keys", JWKS_KEYS_MAX);
        goto fail;
    }
    json_array_foreach(keys, i, jwk)
    {
        snprintf(path, sizeof(path), "/keys/%zu", i);
        v = jwk_import(&c, jwk, set);
        if (v == JWK_BAD || v == JWK_NOMEM)
            break;
    }
    if (v == JWK_BAD)
        goto fail;
    if (v == JWK_NOMEM)
        goto fail_nomem;
    if (set->n == 0) {
        snprintf(err, cap,
                 "%s: no key we can verify with (RSA of 2048 bits or more, EC P-256 "
                 "or P-384, Ed25519, oct of 32 bytes or more, for signing)",
                 keys ? "/keys" : "the JWK");
        goto fail;
    }
    json_decref(doc);
    return set;
fail_nomem:
    snprintf(err, cap, "out of memory");
fail:
    adm_jwks_free(set);
    json_decref(doc);
    return NULL;
}
