/*
 * jwt.c - adm_jwt_verify: a compact JWS (RFC 7515) checked against a key set
 * (jwk.c) and its claims (RFC 7519) against a policy's options.
 *
 * The order is fixed so that no claim is believed before the signature:
 * size, shape and base64url; the header (alg refused early: "none", not
 * ours, not the policy's); the claims' JSON; the signature, against the
 * keys that fit; then exp, nbf, iss, aud. Everything decodes into the
 * caller's adm_jwt_claims or the stack; only OpenSSL allocates.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "admin/jwt.h"
#include "admin/jwt_int.h"

/* The decoded header's bound: alg, kid, typ and a few more fit easily; a
 * header carrying certificates (x5c) does not, and is never needed. */
#define JWT_HEADER_MAX 2048
#define JWT_HEADER_MEMBERS 16
/* The longest signature: RSA of 8192 bits. */
#define JWT_SIG_MAX 1024
/* A day of leeway is already far too much; more is taken as a day. */
#define JWT_LEEWAY_MAX 86400

/* How each algorithm is checked. */
struct jwt_alg {
    unsigned bit;
    int md;  /* JWT_SHA*, or -1 (Ed25519 hashes itself) */
    int pss; /* RSASSA-PSS rather than PKCS #1 v1.5 */
    int ec;  /* the JOSE r||s of this many bytes each, to DER */
};

static const struct jwt_alg jwt_alg_table[] = {
    {ADM_JWT_RS256, JWT_SHA256, 0, 0},  {ADM_JWT_RS384, JWT_SHA384, 0, 0},
    {ADM_JWT_RS512, JWT_SHA512, 0, 0},  {ADM_JWT_PS256, JWT_SHA256, 1, 0},
    {ADM_JWT_PS384, JWT_SHA384, 1, 0},  {ADM_JWT_PS512, JWT_SHA512, 1, 0},
    {ADM_JWT_ES256, JWT_SHA256, 0, 32}, {ADM_JWT_ES384, JWT_SHA384, 0, 48},
    {ADM_JWT_EDDSA, -1, 0, 0},          {ADM_JWT_HS256, JWT_SHA256, 0, 0},
};

static const struct jwt_alg *alg_find(unsigned bit)
{
    for (size_t i = 0; i < sizeof(jwt_alg_table) / sizeof(jwt_alg_table[0]); i++)
        if (jwt_alg_table[i].bit == bit)
            return &jwt_alg_table[i];
    return NULL;
}

static const char *const result_names[] = {
    [ADM_JWT_OK] = "ok",
    [ADM_JWT_MALFORMED] = "malformed",
    [ADM_JWT_ALG_REFUSED] = "alg_refused",
    [ADM_JWT_NO_KEY] = "no_key",
    [ADM_JWT_BAD_SIGNATURE] = "bad_signature",
    [ADM_JWT_EXPIRED] = "expired",
    [ADM_JWT_NOT_YET_VALID] = "not_yet_valid",
    [ADM_JWT_BAD_ISSUER] = "bad_issuer",
    [ADM_JWT_BAD_AUDIENCE] = "bad_audience",
    [ADM_JWT_NO_EXP] = "no_exp",
    [ADM_JWT_NOMEM] = "nomem",
};

const char *adm_jwt_result_name(enum adm_jwt_result r)
{
    if ((size_t)r < sizeof(result_names) / sizeof(result_names[0]) && result_names[r])
        return result_names[r];
    return "unknown";
}

/* ---- signatures ---- */

/* Writes one DER INTEGER of the unsigned big-endian <v>[0..n) at <out>. */
static size_t der_uint(unsigned char *out, const unsigned char *v, size_t n)
{
    size_t i = 0, len;

    while (i + 1 < n && v[i] == 0)
        i++;
    len = n - i + (v[i] >= 0x80);
    out[0] = 0x02;
    out[1] = (unsigned char)len;
    out[2] = 0;
    memcpy(out + 2 + (v[i] >= 0x80), v + i, n - i);
    return 2 + len;
}

/* JOSE's r||s (RFC 7518 3.4) as the DER ECDSA-Sig-Value EVP verifies; both
 * halves under 128 bytes, so every length fits one byte. */
static size_t ecdsa_der(unsigned char *out, const unsigned char *sig, size_t half)
{
    size_t n = 2;

    n += der_uint(out + n, sig, half);
    n += der_uint(out + n, sig + half, half);
    out[0] = 0x30;
    out[1] = (unsigned char)(n - 2);
    return n;
}

/* 1 when <sig> is <key>'s signature of <tbs> under <a>, 0 when not, -1 when
 * out of memory. */
static int verify_pkey(const struct adm_jwks *set, const struct jwt_key *key,
                       const struct jwt_alg *a, const char *tbs, size_t tbslen,
                       const unsigned char *sig, size_t siglen)
{
    unsigned char der[2 * (2 + 1 + 48) + 2];
    EVP_MD_CTX *mctx;
    EVP_PKEY_CTX *pctx = NULL;
    int ok = 0;

    if (a->ec) {
        if (siglen != 2 * (size_t)a->ec)
            return 0;
        siglen = ecdsa_der(der, sig, (size_t)a->ec);
        sig = der;
    }
    mctx = EVP_MD_CTX_new();
    if (!mctx)
        return -1;
    if (EVP_DigestVerifyInit(mctx, &pctx, a->md >= 0 ? set->md[a->md] : NULL, NULL, key->pkey) != 1)
        goto out;
    /* RFC 7518 3.5: MGF1 with the same hash, a salt as long as the hash */
    if (a->pss && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
                   EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) <= 0))
        goto out;
    ok = EVP_DigestVerify(mctx, sig, siglen, (const unsigned char *)tbs, tbslen) == 1;
out:
    EVP_MD_CTX_free(mctx);
    return ok;
}

static int verify_hmac(const struct jwt_key *key, const char *tbs, size_t tbslen,
                       const unsigned char *sig, size_t siglen)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t maclen = 0;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(key->hmac);
    int ok;

    if (!ctx)
        return -1;
    ok = EVP_MAC_update(ctx, (const unsigned char *)tbs, tbslen) &&
         EVP_MAC_final(ctx, mac, &maclen, sizeof(mac));
    EVP_MAC_CTX_free(ctx);
    if (!ok)
        return -1;
    return maclen == siglen && CRYPTO_memcmp(mac, sig, maclen) == 0;
}

/* Whether <key> may be tried for a token of algorithm <alg> and kid <kid>
 * (NULL: none): in the first pass keys carrying that kid, in the second
 * (<kidless>) keys carrying none. */
static int key_fits(const struct jwt_key *key, unsigned alg, const char *kid, size_t kidlen,
                    int kidless)
{
    if (!(key->algs & alg))
        return 0;
    if (kidless)
        return !key->kid;
    return !kid || (key->kid && key->kid_len == kidlen && memcmp(key->kid, kid, kidlen) == 0);
}

/* Tries the keys of <set> that fit; ADM_JWT_OK, NO_KEY, BAD_SIGNATURE or
 * NOMEM. */
static enum adm_jwt_result verify_sig(const struct adm_jwks *set, const struct jwt_alg *a,
                                      const char *kid, size_t kidlen, const char *tbs,
                                      size_t tbslen, const unsigned char *sig, size_t siglen)
{
    unsigned tried = 0;

    for (int kidless = 0; kidless < 2 && !tried; kidless++) {
        if (kidless && !kid)
            break;
        for (size_t i = 0; set && i < set->n && tried < ADM_JWT_TRY_MAX; i++) {
            const struct jwt_key *key = &set->keys[i];
            int ok;

            if (!key_fits(key, a->bit, kid, kidlen, kidless))
                continue;
            tried++;
            if (key->hmac)
                ok = verify_hmac(key, tbs, tbslen, sig, siglen);
            else
                ok = verify_pkey(set, key, a, tbs, tbslen, sig, siglen);
            if (ok < 0)
                return ADM_JWT_NOMEM;
            if (ok)
                return ADM_JWT_OK;
        }
    }
    return tried ? ADM_JWT_BAD_SIGNATURE : ADM_JWT_NO_KEY;
}

/* ---- claims ---- */

/* The NumericDate <m> (a JSON number) rounded up to whole seconds: a moment
 * within second t is past once t + 1 is reached. Clamped to +-2^53; -1 for a
 * number with an exponent, which no issuer writes. */
static int numeric_date(const char *buf, const struct adm_jwt_member *m, long long *out)
{
    const char *p = buf + m->val, *end = p + m->val_len;
    int neg = 0, frac = 0;
    long long v = 0;

    if (*p == '-')
        neg = 1, p++;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        if (v < (1LL << 53))
            v = v * 10 + (*p - '0');
    if (p < end && *p == '.')
        for (p++; p < end && *p >= '0' && *p <= '9'; p++)
            frac |= *p != '0';
    if (p != end)
        return -1;
    *out = neg ? -v : v + frac;
    return 0;
}

/* Whether the string <s>[0..len) equals <want>. */
static int str_is(const char *s, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(s, want, len) == 0;
}

static int aud_wanted(const struct adm_jwt_opts *o, const char *s, size_t len)
{
    for (size_t i = 0; i < o->naud; i++)
        if (str_is(s, len, o->audiences[i]))
            return 1;
    return 0;
}

/* Checks "aud" (a string or an array of strings) against the audiences. */
static enum adm_jwt_result check_aud(const struct adm_jwt_opts *o, struct adm_jwt_claims *c,
                                     const char **why)
{
    const struct adm_jwt_member *aud = jwt_json_find(c->buf, c->m, c->n, "aud");
    size_t pos = 0;
    uint16_t off, len;
    int r;

    if (!aud) {
        *why = "the token has no aud";
        return ADM_JWT_BAD_AUDIENCE;
    }
    if (aud->kind == JWT_STR && aud_wanted(o, c->buf + aud->val, aud->val_len))
        return ADM_JWT_OK;
    if (aud->kind != JWT_STR && aud->kind != JWT_ARR) {
        *why = "aud is neither a string nor an array";
        return ADM_JWT_MALFORMED;
    }
    while (aud->kind == JWT_ARR && (r = jwt_json_array_next(c->buf, aud, &pos, &off, &len)) > 0)
        if (aud_wanted(o, c->buf + off, len))
            return ADM_JWT_OK;
    if (aud->kind == JWT_ARR && r < 0) {
        *why = "aud holds something other than strings";
        return ADM_JWT_MALFORMED;
    }
    *why = "no audience of the token is accepted";
    return ADM_JWT_BAD_AUDIENCE;
}

/* Reads the NumericDate claim <name> into <*t>: 1 when present, 0 when
 * absent, -1 when not a plain number. */
static int date_claim(const struct adm_jwt_claims *c, const char *name, long long *t)
{
    const struct adm_jwt_member *m = jwt_json_find(c->buf, c->m, c->n, name);

    if (!m)
        return 0;
    return m->kind == JWT_NUM && numeric_date(c->buf, m, t) == 0 ? 1 : -1;
}

/* The leeway of <o>, bounded so that exp + leeway cannot overflow. */
static long long leeway_of(const struct adm_jwt_opts *o)
{
    return o->leeway_s < 0 ? 0 : o->leeway_s > JWT_LEEWAY_MAX ? JWT_LEEWAY_MAX : o->leeway_s;
}

/* Whether exp and nbf (each when present) allow <now> under <o>. */
static int times_ok(const struct adm_jwt_opts *o, long long exp, int has_exp, long long nbf,
                    int has_nbf, time_t now)
{
    long long leeway = leeway_of(o);

    return !(has_exp && (long long)now >= exp + leeway) &&
           !(has_nbf && (long long)now < nbf - leeway);
}

/* exp and nbf, with leeway. */
static enum adm_jwt_result check_times(const struct adm_jwt_opts *o, const struct adm_jwt_claims *c,
                                       time_t now, const char **why)
{
    long long leeway = leeway_of(o);
    long long exp, nbf;
    int has_exp = date_claim(c, "exp", &exp), has_nbf = date_claim(c, "nbf", &nbf);

    if (has_exp < 0 || has_nbf < 0) {
        *why = "exp or nbf is not a plain number";
        return ADM_JWT_MALFORMED;
    }
    if (!has_exp && o->require_exp) {
        *why = "the token has no exp";
        return ADM_JWT_NO_EXP;
    }
    if (has_exp && (long long)now >= exp + leeway) {
        *why = "the token has expired";
        return ADM_JWT_EXPIRED;
    }
    if (has_nbf && (long long)now < nbf - leeway) {
        *why = "the token is not valid yet (nbf)";
        return ADM_JWT_NOT_YET_VALID;
    }
    return ADM_JWT_OK;
}

static enum adm_jwt_result check_claims(const struct adm_jwt_opts *o, struct adm_jwt_claims *c,
                                        time_t now, const char **why)
{
    enum adm_jwt_result r = check_times(o, c, now, why);
    const struct adm_jwt_member *iss;

    if (r != ADM_JWT_OK)
        return r;
    if (o->issuer) {
        iss = jwt_json_find(c->buf, c->m, c->n, "iss");
        if (!iss || iss->kind != JWT_STR || !str_is(c->buf + iss->val, iss->val_len, o->issuer)) {
            *why = iss ? "iss is not the issuer accepted" : "the token has no iss";
            return ADM_JWT_BAD_ISSUER;
        }
    }
    return o->naud ? check_aud(o, c, why) : ADM_JWT_OK;
}

/* ---- the token ---- */

/* What the header says. */
struct jwt_head {
    const struct jwt_alg *alg;
    const char *kid; /* NULL: none */
    size_t kid_len;
};

static enum adm_jwt_result parse_header(const struct adm_jwt_opts *o, char *buf, size_t len,
                                        struct jwt_head *h, const char **why)
{
    struct adm_jwt_member m[JWT_HEADER_MEMBERS];
    const struct adm_jwt_member *alg, *kid, *crit;
    char name[8];
    unsigned n, bit;
    size_t pos = 0;
    uint16_t off, olen;

    if (jwt_json_object(buf, len, m, JWT_HEADER_MEMBERS, &n, why) < 0)
        return ADM_JWT_MALFORMED;
    alg = jwt_json_find(buf, m, n, "alg");
    kid = jwt_json_find(buf, m, n, "kid");
    crit = jwt_json_find(buf, m, n, "crit");
    if (!alg || alg->kind != JWT_STR) {
        *why = "the header has no alg string";
        return ADM_JWT_MALFORMED;
    }
    /* "none", and any extension we do not implement, make the token unusable */
    if (crit && (crit->kind != JWT_ARR || jwt_json_array_next(buf, crit, &pos, &off, &olen))) {
        *why = "the header has a crit extension";
        return ADM_JWT_MALFORMED;
    }
    if (kid && kid->kind != JWT_STR) {
        *why = "kid is not a string";
        return ADM_JWT_MALFORMED;
    }
    bit = 0;
    if (alg->val_len < sizeof(name)) {
        memcpy(name, buf + alg->val, alg->val_len);
        name[alg->val_len] = '\0';
        /* "HS256\u0000..." is not HS256 */
        bit = strlen(name) == alg->val_len ? adm_jwt_alg_parse(name) : 0;
    }
    if (!bit || !(bit & o->algs)) {
        *why = bit ? "the token's alg is not among the policy's algorithms"
                   : "the token's alg is none or unknown";
        return ADM_JWT_ALG_REFUSED;
    }
    h->alg = alg_find(bit);
    h->kid = kid ? buf + kid->val : NULL;
    h->kid_len = kid ? kid->val_len : 0;
    return ADM_JWT_OK;
}

/* adm_jwt_verify, with the signature looked up in <cache> (NULL: none)
 * first and a fully verified token with an exp stored there after. */
static enum adm_jwt_result verify(struct adm_jwt_cache *cache, const struct adm_jwks *set,
                                  const struct adm_jwt_opts *opts, const char *token, size_t len,
                                  time_t now, struct adm_jwt_claims *out, const char **why)
{
    char hbuf[JWT_HEADER_MAX];
    unsigned char sig[JWT_SIG_MAX];
    const char *dot1, *dot2, *ignored;
    struct jwt_head h;
    enum adm_jwt_result r = ADM_JWT_OK;
    long hlen, plen, slen;
    int hit;
    struct adm_jwt_claims local;
    struct jwt_cached_times t;

    if (!why)
        why = &ignored;
    if (!out && cache && set) {
        /* nobody reads the claims: a token that verified under these very
         * options is checked only against the clock */
        const struct jwt_cached_times *ct = jwt_cache_times(cache, set, opts, token, len);
        if (ct && times_ok(opts, ct->exp, 1, ct->nbf, ct->has_nbf, now)) {
            *why = "verified";
            return ADM_JWT_OK;
        }
    }
    if (!out)
        out = &local;
    out->n = 0;
    out->alg = 0;
    if (len > ADM_JWT_TOKEN_MAX) {
        *why = "the token is too long";
        return ADM_JWT_MALFORMED;
    }
    dot1 = memchr(token, '.', len);
    dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2) {
        *why = "not three dot-separated parts";
        return ADM_JWT_MALFORMED;
    }
    if ((size_t)(dot1 - token) * 3 / 4 > JWT_HEADER_MAX ||
        (size_t)(token + len - dot2 - 1) * 3 / 4 > JWT_SIG_MAX) {
        *why = "the header or the signature is too long";
        return ADM_JWT_MALFORMED;
    }
    hlen = jwt_b64url_decode(token, (size_t)(dot1 - token), (unsigned char *)hbuf);
    plen = jwt_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), (unsigned char *)out->buf);
    slen = jwt_b64url_decode(dot2 + 1, (size_t)(token + len - dot2 - 1), sig);
    if (hlen < 0 || plen < 0 || slen < 0) {
        *why = "a part is not unpadded base64url";
        return ADM_JWT_MALFORMED;
    }
    if ((r = parse_header(opts, hbuf, (size_t)hlen, &h, why)) != ADM_JWT_OK)
        return r;
    if (jwt_json_object(out->buf, (size_t)plen, out->m, ADM_JWT_CLAIMS_MAX, &out->n, why) < 0) {
        out->n = 0;
        return ADM_JWT_MALFORMED;
    }
    hit = cache && set && jwt_cache_find(cache, set, token, len);
    if (!hit)
        r = verify_sig(set, h.alg, h.kid, h.kid_len, token, (size_t)(dot2 - token), sig,
                       (size_t)slen);
    if (r != ADM_JWT_OK) {
        *why = r == ADM_JWT_NO_KEY  ? "no key fits the token's alg and kid"
               : r == ADM_JWT_NOMEM ? "out of memory"
                                    : "the signature does not verify";
        out->n = 0;
        return r;
    }
    if ((r = check_claims(opts, out, now, why)) != ADM_JWT_OK) {
        out->n = 0;
        return r;
    }
    out->alg = h.alg->bit;
    *why = "verified";
    /* verified: remembered (again, for a hit made under other options)
     * when it has an exp; a key of <set> (not NULL, then) signed it */
    if (cache && date_claim(out, "exp", &t.exp) == 1 &&
        (t.has_nbf = date_claim(out, "nbf", &t.nbf)) >= 0)
        jwt_cache_put(cache, set, opts, token, len, &t);
    return ADM_JWT_OK;
}

enum adm_jwt_result adm_jwt_verify(const struct adm_jwks *set, const struct adm_jwt_opts *opts,
                                   const char *token, size_t len, time_t now,
                                   struct adm_jwt_claims *out, const char **why)
{
    return verify(NULL, set, opts, token, len, now, out, why);
}

enum adm_jwt_result adm_jwt_verify_cached(struct adm_jwt_cache *cache, const struct adm_jwks *set,
                                          const struct adm_jwt_opts *opts, const char *token,
                                          size_t len, time_t now, struct adm_jwt_claims *out,
                                          const char **why)
{
    return verify(cache, set, opts, token, len, now, out, why);
}

int adm_jwt_claims_read(const char *token, size_t len, struct adm_jwt_claims *out)
{
    const char *dot1, *dot2, *why;
    long plen;

    out->n = 0;
    out->alg = 0;
    if (len > ADM_JWT_TOKEN_MAX || !(dot1 = memchr(token, '.', len)) ||
        !(dot2 = memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token))))
        return -1;
    plen = jwt_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), (unsigned char *)out->buf);
    if (plen < 0 ||
        jwt_json_object(out->buf, (size_t)plen, out->m, ADM_JWT_CLAIMS_MAX, &out->n, &why) < 0) {
        out->n = 0;
        return -1;
    }
    return 0;
}

/* RFC 6750's b64token characters, but '=' (which only ends one), by ASCII
 * code: a table, since every request of a jwt route scans a token of
 * hundreds of them. */
static const unsigned char b64token[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00: none */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10: none */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, /* 0x20: +-./ */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0x30: 0123456789 */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40: ABCDEFGHIJKLMNO */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, /* 0x50: PQRSTUVWXYZ_ */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60: abcdefghijklmno */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, /* 0x70: pqrstuvwxyz~ */
};

static int b64token_char(char c)
{
    unsigned u = (unsigned char)c;

    return u < 128 && b64token[u];
}

const char *adm_jwt_bearer(const char *v, size_t len, size_t *tok_len)
{
    static const char scheme[] = "bearer";
    size_t i, start, end;

    if (len < 8 || v[6] != ' ')
        return NULL;
    for (i = 0; i < 6; i++)
        if ((v[i] | 0x20) != scheme[i])
            return NULL;
    while (i < len && v[i] == ' ')
        i++;
    start = i;
    while (i < len && b64token_char(v[i]))
        i++;
    end = i;
    while (i < len && v[i] == '=')
        i++;
    if (end == start || i != len)
        return NULL;
    *tok_len = len - start;
    return v + start;
}

const char *adm_jwt_claim_str(const struct adm_jwt_claims *c, const char *name, size_t *len)
{
    const struct adm_jwt_member *m = jwt_json_find(c->buf, c->m, c->n, name);

    if (!m || (m->kind != JWT_STR && m->kind != JWT_NUM && m->kind != JWT_BOOL))
        return NULL;
    for (size_t i = 0; i < m->val_len; i++) {
        unsigned char ch = (unsigned char)c->buf[m->val + i];
        if (ch < 0x20 || ch == 0x7f)
            return NULL;
    }
    *len = m->val_len;
    return c->buf + m->val;
}
