/*
 * test_jwt.c - JWT verification (admin/jwt.c, jwk.c, jwt_json.c) with keys
 * and signatures made by the openssl CLI (jwt_keys.h): every algorithm
 * verifies; forged, expired, not-yet-valid, wrong-issuer and wrong-audience
 * tokens are refused; so are alg "none", algorithm confusion (HS256 keyed
 * with the RSA public key's PEM, DER or modulus), kid mismatches, bad
 * base64url, oversized tokens and odd JSON; JWKS documents import, skip
 * what they cannot use and name what is malformed; claims come back fit for
 * a header; ECDSA halves of every shape convert; the cache skips only the
 * signature; Bearer values parse strictly; many threads verify against one
 * set at once.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/jwt.h"
#include "jwt_keys.h"

#define NOW 1800000000L
#define ISS "https://id.example"
/* 32 bytes, as hex for the openssl CLI */
#define SECRET "0123456789abcdef0123456789abcdef"
#define SECRET_HEX "3031323334353637383961626364656630313233343536373839616263646566"

static const char *const auds[] = {"api"};
static const struct adm_jwt_opts opts = {
    .issuer = ISS, .audiences = auds, .naud = 1, .algs = ADM_JWT_ALGS_ALL, .leeway_s = 30};

static const char good_claims[] = "{\"iss\": \"" ISS "\", \"aud\": \"api\", \"sub\": \"alice\", "
                                  "\"exp\": 1800000100, \"nbf\": 1799999900}";

static struct adm_jwt_claims claims;

/* The key set of the tests: each key with its own kid, and the secret. */
static struct adm_jwks *full_set(void)
{
    char err[256], doc[16384];
    char *rsa = jk_jwk("rsa", ", \"kid\": \"rsa\""),
         *ec256 = jk_jwk("ec256", ", \"kid\": \"ec256\"");
    char *ec384 = jk_jwk("ec384", ", \"kid\": \"ec384\", \"use\": \"sig\"");
    char *ed = jk_jwk("ed", ", \"kid\": \"ed\", \"alg\": \"EdDSA\"");
    struct adm_jwks *set;

    snprintf(doc, sizeof(doc), "{\"keys\": [%s, %s, %s, %s]}", rsa, ec256, ec384, ed);
    set = adm_jwks_parse(doc, strlen(doc), err, sizeof(err));
    ck_assert_msg(set, "%s", err);
    ck_assert_int_eq(adm_jwks_add_hs256(set, (const unsigned char *)SECRET, 32), 0);
    ck_assert_uint_eq(adm_jwks_count(set), 5);
    free(rsa);
    free(ec256);
    free(ec384);
    free(ed);
    return set;
}

static struct adm_jwks *parse_ok(const char *doc)
{
    char err[256];
    struct adm_jwks *set = adm_jwks_parse(doc, strlen(doc), err, sizeof(err));

    ck_assert_msg(set, "%s", err);
    return set;
}

static enum adm_jwt_result verify(const struct adm_jwks *set, const char *tok)
{
    const char *why = NULL;
    enum adm_jwt_result r = adm_jwt_verify(set, &opts, tok, strlen(tok), NOW, &claims, &why);

    ck_assert_ptr_nonnull(why);
    return r;
}

/* A token of <alg> with header {"alg": alg<hdr_extra>} and <claims>. */
static char *token(const char *alg, const char *key, const char *hdr_extra, const char *cl)
{
    char hdr[512];

    snprintf(hdr, sizeof(hdr), "{\"alg\": \"%s\", \"typ\": \"JWT\"%s}", alg, hdr_extra);
    return jk_token(alg, key, hdr, cl);
}

/* Signs <cl> for <alg> with <key> (header extra <hdr_extra>) and checks that
 * verifying it against <set> under the tests' options comes to <want>. */
static void expect(const struct adm_jwks *set, const char *alg, const char *key,
                   const char *hdr_extra, const char *cl, enum adm_jwt_result want)
{
    char *tok = token(alg, key, hdr_extra, cl);
    enum adm_jwt_result r = verify(set, tok);

    ck_assert_msg(r == want, "%s %s%s: %s", alg, key, hdr_extra, adm_jwt_result_name(r));
    free(tok);
}

/* "<b64 of hdr>.<b64 of claims>.<sig>": a token that fails before its
 * signature matters. */
static char *unsigned_token(const char *hdr, const char *cl, const char *sig)
{
    char *h = jk_b64url_str(hdr), *p = jk_b64url_str(cl);
    char *t = malloc(strlen(h) + strlen(p) + strlen(sig) + 3);

    sprintf(t, "%s.%s.%s", h, p, sig);
    free(h);
    free(p);
    return t;
}

static const struct {
    const char *alg, *key, *kid;
    unsigned bit;
} every[] = {
    {"RS256", "rsa", "rsa", ADM_JWT_RS256},     {"RS384", "rsa", "rsa", ADM_JWT_RS384},
    {"RS512", "rsa", "rsa", ADM_JWT_RS512},     {"PS256", "rsa", "rsa", ADM_JWT_PS256},
    {"PS384", "rsa", "rsa", ADM_JWT_PS384},     {"PS512", "rsa", "rsa", ADM_JWT_PS512},
    {"ES256", "ec256", "ec256", ADM_JWT_ES256}, {"ES384", "ec384", "ec384", ADM_JWT_ES384},
    {"EdDSA", "ed", "ed", ADM_JWT_EDDSA},       {"HS256", SECRET_HEX, NULL, ADM_JWT_HS256},
};

START_TEST(every_algorithm_verifies)
{
    struct adm_jwks *set = full_set();
    char kid[64];

    for (size_t i = 0; i < sizeof(every) / sizeof(every[0]); i++) {
        size_t len = 0;
        const char *sub;
        char *tok;

        /* with the key's kid, then without any */
        for (int with_kid = every[i].kid ? 1 : 0; with_kid >= 0; with_kid--) {
            snprintf(kid, sizeof(kid), ", \"kid\": \"%s\"", with_kid ? every[i].kid : "");
            tok = token(every[i].alg, every[i].key, with_kid ? kid : "", good_claims);
            ck_assert_msg(verify(set, tok) == ADM_JWT_OK, "%s kid %d", every[i].alg, with_kid);
            ck_assert_uint_eq(claims.alg, every[i].bit);
            sub = adm_jwt_claim_str(&claims, "sub", &len);
            ck_assert_ptr_nonnull(sub);
            ck_assert_int_eq((int)len, 5);
            ck_assert(memcmp(sub, "alice", 5) == 0);
            ck_assert_str_eq(adm_jwt_alg_name(every[i].bit), every[i].alg);
            ck_assert_uint_eq(adm_jwt_alg_parse(every[i].alg), every[i].bit);
            free(tok);
        }
    }
    adm_jwks_free(set);
}
END_TEST

/* Replaces part <n> (0, 1, 2) of <tok> with <part>. */
static char *splice(const char *tok, int n, const char *part)
{
    const char *d1 = strchr(tok, '.'), *d2 = strchr(d1 + 1, '.');
    char *out = malloc(strlen(tok) + strlen(part) + 4);

    if (n == 0)
        sprintf(out, "%s%s", part, d1);
    else if (n == 1)
        sprintf(out, "%.*s.%s%s", (int)(d1 - tok), tok, part, d2);
    else
        sprintf(out, "%.*s.%s", (int)(d2 - tok), tok, part);
    return out;
}

START_TEST(forged_tokens_are_refused)
{
    struct adm_jwks *set = full_set();
    char *other = jk_b64url_str("{\"iss\": \"" ISS "\", \"aud\": \"api\", \"sub\": \"admin\", "
                                "\"exp\": 1800000100}");

    for (size_t i = 0; i < sizeof(every) / sizeof(every[0]); i++) {
        char *tok = token(every[i].alg, every[i].key, "", good_claims), *forged;
        char *sig = strrchr(tok, '.') + 1;
        size_t mid = strlen(sig) / 2;
        char was = sig[mid];

        /* a few bits of the signature */
        sig[mid] = was == 'A' ? 'B' : 'A';
        ck_assert_msg(verify(set, tok) == ADM_JWT_BAD_SIGNATURE, "%s", every[i].alg);
        sig[mid] = was;
        ck_assert_int_eq(verify(set, tok), ADM_JWT_OK);
        /* other claims under the same signature */
        forged = splice(tok, 1, other);
        ck_assert_msg(verify(set, forged) == ADM_JWT_BAD_SIGNATURE, "%s", every[i].alg);
        ck_assert_uint_eq(claims.n, 0); /* nothing to read from a refused token */
        free(forged);
        /* no signature at all */
        forged = splice(tok, 2, "");
        ck_assert_int_eq(verify(set, forged), ADM_JWT_BAD_SIGNATURE);
        free(forged);
        free(tok);
    }
    free(other);
    adm_jwks_free(set);
}
END_TEST

/* Claims signed with HS256, and what verifying them under <o> comes to. */
struct claims_case {
    const char *claims;
    enum adm_jwt_result want;
};

static void run_cases(const struct adm_jwks *set, const struct adm_jwt_opts *o,
                      const struct claims_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *tok = token("HS256", SECRET_HEX, "", cases[i].claims);
        enum adm_jwt_result r = adm_jwt_verify(set, o, tok, strlen(tok), NOW, &claims, NULL);

        ck_assert_msg(r == cases[i].want, "%s: %s", cases[i].claims, adm_jwt_result_name(r));
        free(tok);
    }
}

START_TEST(times_with_leeway)
{
    struct adm_jwks *set = full_set();
    static const struct claims_case cases[] = {
        {"{\"exp\": 1799999971}", ADM_JWT_OK},        /* 29 s past, within 30 s */
        {"{\"exp\": 1799999970}", ADM_JWT_EXPIRED},   /* exactly 30 s past */
        {"{\"exp\": 1799999969.5}", ADM_JWT_EXPIRED}, /* rounds up to ...70 */
        {"{\"exp\": 1700000000}", ADM_JWT_EXPIRED},
        {"{\"exp\": -1}", ADM_JWT_EXPIRED},
        {"{\"nbf\": 1800000030}", ADM_JWT_OK},
        {"{\"nbf\": 1800000031}", ADM_JWT_NOT_YET_VALID},
        {"{\"nbf\": 1900000000, \"exp\": 1900000001}", ADM_JWT_NOT_YET_VALID},
        {"{\"exp\": 99999999999999999999999}", ADM_JWT_OK},
        {"{\"exp\": \"1800000100\"}", ADM_JWT_MALFORMED},
        {"{\"exp\": 1.8e9}", ADM_JWT_MALFORMED},
        {"{\"nbf\": null}", ADM_JWT_MALFORMED},
        {"{}", ADM_JWT_OK},
    };
    struct adm_jwt_opts o = {.algs = ADM_JWT_HS256, .leeway_s = 30};

    run_cases(set, &o, cases, sizeof(cases) / sizeof(cases[0]));
    /* a leeway past any sense is taken as a day, and overflows nothing */
    o.leeway_s = LONG_MAX;
    run_cases(set, &o,
              (const struct claims_case[]){{"{\"exp\": 1799913601}", ADM_JWT_OK},
                                           {"{\"exp\": 1799913600}", ADM_JWT_EXPIRED},
                                           {"{\"nbf\": 1800086400}", ADM_JWT_OK},
                                           {"{\"nbf\": 1800086401}", ADM_JWT_NOT_YET_VALID}},
              4);
    o.leeway_s = -5;
    run_cases(set, &o, (const struct claims_case[]){{"{\"exp\": 1800000000}", ADM_JWT_EXPIRED}}, 1);
    /* require_exp */
    o.require_exp = 1;
    char *tok = token("HS256", SECRET_HEX, "", "{}");
    ck_assert_int_eq(adm_jwt_verify(set, &o, tok, strlen(tok), NOW, &claims, NULL), ADM_JWT_NO_EXP);
    free(tok);
    adm_jwks_free(set);
}
END_TEST

START_TEST(issuer_and_audience)
{
    struct adm_jwks *set = full_set();
    static const struct claims_case cases[] = {
        {"{\"iss\": \"" ISS "\", \"aud\": \"api\"}", ADM_JWT_OK},
        {"{\"iss\": \"" ISS "\", \"aud\": [\"web\", \"api\"]}", ADM_JWT_OK},
        {"{\"iss\": \"" ISS "\", \"aud\": [\"web\", \"a\\u0070i\"]}", ADM_JWT_OK},
        {"{\"iss\": \"" ISS "\", \"aud\": [\"web\"]}", ADM_JWT_BAD_AUDIENCE},
        {"{\"iss\": \"" ISS "\", \"aud\": []}", ADM_JWT_BAD_AUDIENCE},
        {"{\"iss\": \"" ISS "\", \"aud\": \"apis\"}", ADM_JWT_BAD_AUDIENCE},
        {"{\"iss\": \"" ISS "\"}", ADM_JWT_BAD_AUDIENCE},
        {"{\"iss\": \"" ISS "\", \"aud\": 1}", ADM_JWT_MALFORMED},
        {"{\"iss\": \"" ISS "\", \"aud\": [\"web\", 1]}", ADM_JWT_MALFORMED},
        {"{\"iss\": \"" ISS "/\", \"aud\": \"api\"}", ADM_JWT_BAD_ISSUER},
        {"{\"iss\": \"https://ID.example\", \"aud\": \"api\"}", ADM_JWT_BAD_ISSUER},
        {"{\"iss\": [\"" ISS "\"], \"aud\": \"api\"}", ADM_JWT_BAD_ISSUER},
        {"{\"aud\": \"api\"}", ADM_JWT_BAD_ISSUER},
    };

    run_cases(set, &opts, cases, sizeof(cases) / sizeof(cases[0]));
    adm_jwks_free(set);
}
END_TEST

START_TEST(alg_none_and_unknown_are_refused)
{
    struct adm_jwks *set = full_set();
    static const char *const algs[] = {"none",  "None",  "NONE", "nOnE",
                                       "HS512", "ES512", "",     "RS256 "};
    struct adm_jwt_opts only_es = opts;
    char hdr[128], *tok;

    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        snprintf(hdr, sizeof(hdr), "{\"alg\": \"%s\", \"typ\": \"JWT\"}", algs[i]);
        tok = unsigned_token(hdr, good_claims, "");
        ck_assert_msg(verify(set, tok) == ADM_JWT_ALG_REFUSED, "%s", algs[i]);
        free(tok);
        tok = unsigned_token(hdr, good_claims, "AAAA");
        ck_assert_msg(verify(set, tok) == ADM_JWT_ALG_REFUSED, "%s", algs[i]);
        free(tok);
    }
    /* a NUL inside is not the name before it */
    tok = unsigned_token("{\"alg\": \"HS256\\u0000x\"}", good_claims, "AAAA");
    ck_assert_int_eq(verify(set, tok), ADM_JWT_ALG_REFUSED);
    free(tok);
    /* no alg, or not a string */
    tok = unsigned_token("{\"typ\": \"JWT\"}", good_claims, "");
    ck_assert_int_eq(verify(set, tok), ADM_JWT_MALFORMED);
    free(tok);
    tok = unsigned_token("{\"alg\": null}", good_claims, "");
    ck_assert_int_eq(verify(set, tok), ADM_JWT_MALFORMED);
    free(tok);
    /* a good RS256 token, but the policy takes ES256 only */
    only_es.algs = ADM_JWT_ES256;
    tok = token("RS256", "rsa", "", good_claims);
    ck_assert_int_eq(adm_jwt_verify(set, &only_es, tok, strlen(tok), NOW, &claims, NULL),
                     ADM_JWT_ALG_REFUSED);
    free(tok);
    adm_jwks_free(set);
}
END_TEST

static char *hex(const unsigned char *b, size_t n)
{
    char *h = malloc(2 * n + 1);

    for (size_t i = 0; i < n; i++)
        sprintf(h + 2 * i, "%02x", b[i]);
    return h;
}

/* The classic confusion: an HS256 token whose HMAC key is the RSA public key
 * (as PEM, as DER, as the modulus' bytes), against a set holding that RSA
 * key. The RSA key has no HS256 bit: no key fits. */
START_TEST(algorithm_confusion_is_refused)
{
    char *rsa = jk_jwk("rsa", ", \"kid\": \"rsa\""), doc[8192];
    struct adm_jwks *set;
    unsigned char *pem, *der, nbuf[512];
    size_t pem_len, der_len;
    EVP_PKEY *pk = jk_pub("rsa");
    BIGNUM *n = NULL;
    char *secrets[3];

    snprintf(doc, sizeof(doc), "{\"keys\": [%s]}", rsa);
    set = parse_ok(doc);
    pem = jk_read("rsa.pub.pem", &pem_len);
    der = jk_read("rsa.pub.der", &der_len);
    ck_assert(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_N, &n));
    secrets[0] = hex(pem, pem_len);
    secrets[1] = hex(der, der_len);
    secrets[2] = hex(nbuf, (size_t)BN_bn2bin(n, nbuf));
    for (int i = 0; i < 3; i++) {
        expect(set, "HS256", secrets[i], "", good_claims, ADM_JWT_NO_KEY);
        expect(set, "HS256", secrets[i], ", \"kid\": \"rsa\"", good_claims, ADM_JWT_NO_KEY);
        free(secrets[i]);
    }
    adm_jwks_free(set);
    /* a key whose JWK says RS256 takes no PS256 token, though the key could */
    snprintf(doc, sizeof(doc), "{\"keys\": [%s]}", rsa);
    strcpy(strrchr(doc, '}') - 2, ", \"alg\": \"RS256\"}]}");
    set = parse_ok(doc);
    expect(set, "PS256", "rsa", "", good_claims, ADM_JWT_NO_KEY);
    expect(set, "RS256", "rsa", "", good_claims, ADM_JWT_OK);
    /* an RSA key takes no EC token */
    expect(set, "ES384", "ec384", "", good_claims, ADM_JWT_NO_KEY);
    adm_jwks_free(set);
    BN_free(n);
    EVP_PKEY_free(pk);
    free(pem);
    free(der);
    free(rsa);
}
END_TEST

START_TEST(kid_selects_the_key)
{
    char *a = jk_jwk("rsa", ", \"kid\": \"a\""), *b = jk_jwk("rsa2", ", \"kid\": \"b\"");
    char *bare = jk_jwk("rsa2", ""), doc[16384];
    struct adm_jwks *set;

    snprintf(doc, sizeof(doc), "{\"keys\": [%s, %s]}", a, b);
    set = parse_ok(doc);
    expect(set, "RS256", "rsa2", ", \"kid\": \"b\"", good_claims, ADM_JWT_OK);
    /* signed by b's key, kid says a: only a is tried */
    expect(set, "RS256", "rsa2", ", \"kid\": \"a\"", good_claims, ADM_JWT_BAD_SIGNATURE);
    expect(set, "RS256", "rsa2", ", \"kid\": \"c\"", good_claims, ADM_JWT_NO_KEY);
    expect(set, "RS256", "rsa2", ", \"kid\": 1", good_claims, ADM_JWT_MALFORMED);
    /* no kid: every RSA key is tried */
    expect(set, "RS256", "rsa2", "", good_claims, ADM_JWT_OK);
    adm_jwks_free(set);
    /* a kid no key has falls back to the keys without a kid */
    snprintf(doc, sizeof(doc), "{\"keys\": [%s, %s]}", a, bare);
    set = parse_ok(doc);
    expect(set, "RS256", "rsa2", ", \"kid\": \"c\"", good_claims, ADM_JWT_OK);
    adm_jwks_free(set);
    free(a);
    free(b);
    free(bare);
}
END_TEST

START_TEST(bad_base64url_and_shapes)
{
    struct adm_jwks *set = full_set();
    char *good = token("HS256", SECRET_HEX, "", good_claims), *bad;
    const char *sig = strrchr(good, '.') + 1;
    size_t siglen = strlen(sig);
    char buf[256];
    static const char *const shapes[] = {"", ".", "..", "a.b", "a.b.c.d", "...."};

    ck_assert_int_eq(verify(set, good), ADM_JWT_OK);
    /* padding, the standard alphabet, a space, a length of 1 mod 4 */
    snprintf(buf, sizeof(buf), "%s=", sig);
    bad = splice(good, 2, buf);
    ck_assert_int_eq(verify(set, bad), ADM_JWT_MALFORMED);
    free(bad);
    for (const char *c = "+/ =*"; *c; c++) {
        snprintf(buf, sizeof(buf), "%.*s%c%s", (int)(siglen / 2), sig, *c, sig + siglen / 2 + 1);
        bad = splice(good, 2, buf);
        ck_assert_msg(verify(set, bad) == ADM_JWT_MALFORMED, "%c", *c);
        free(bad);
    }
    snprintf(buf, sizeof(buf), "%sA", sig); /* 43 + 1 = 44 chars: decodes, too long a MAC */
    bad = splice(good, 2, buf);
    ck_assert_int_eq(verify(set, bad), ADM_JWT_BAD_SIGNATURE);
    free(bad);
    snprintf(buf, sizeof(buf), "%sAA", sig); /* 45 chars: 1 mod 4 */
    bad = splice(good, 2, buf);
    ck_assert_int_eq(verify(set, bad), ADM_JWT_MALFORMED);
    free(bad);
    /* a 32-byte MAC is 43 characters, whose last carries 2 unused bits: set them */
    ck_assert_uint_eq(siglen, 43);
    snprintf(buf, sizeof(buf), "%.*s%c", 42, sig, sig[42] ^ 1);
    bad = splice(good, 2, buf);
    ck_assert_int_eq(verify(set, bad), ADM_JWT_MALFORMED);
    free(bad);
    bad = splice(good, 0, "eyJhbGciOiJIUzI1NiJ9="); /* {"alg":"HS256"} padded */
    ck_assert_int_eq(verify(set, bad), ADM_JWT_MALFORMED);
    free(bad);
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        ck_assert_msg(verify(set, shapes[i]) == ADM_JWT_MALFORMED, "%s", shapes[i]);
    free(good);
    adm_jwks_free(set);
}
END_TEST

START_TEST(size_bounds)
{
    struct adm_jwks *set = full_set();
    char *big = malloc(8000), *tok;
    const char *why;

    /* claims of 5,500 bytes: a token of about 7.4 KiB verifies */
    snprintf(big, 8000, "{\"aud\": \"api\", \"iss\": \"" ISS "\", \"pad\": \"%5500d\"}", 1);
    tok = token("HS256", SECRET_HEX, "", big);
    ck_assert_uint_le(strlen(tok), ADM_JWT_TOKEN_MAX);
    ck_assert_int_eq(verify(set, tok), ADM_JWT_OK);
    free(tok);
    /* over 8 KiB: refused before anything is decoded */
    snprintf(big, 8000, "{\"aud\": \"api\", \"iss\": \"" ISS "\", \"pad\": \"%6200d\"}", 1);
    tok = token("HS256", SECRET_HEX, "", big);
    ck_assert_uint_gt(strlen(tok), ADM_JWT_TOKEN_MAX);
    ck_assert_int_eq(adm_jwt_verify(set, &opts, tok, strlen(tok), NOW, &claims, &why),
                     ADM_JWT_MALFORMED);
    ck_assert_str_eq(why, "the token is too long");
    free(tok);
    /* a header over 2 KiB (certificates in x5c, say) */
    snprintf(big, 8000, "{\"alg\": \"HS256\", \"x5c\": [\"%2100d\"]}", 1);
    tok = unsigned_token(big, good_claims, "AAAA");
    ck_assert_int_eq(verify(set, tok), ADM_JWT_MALFORMED);
    free(tok);
    /* 65 claims */
    strcpy(big, "{");
    for (int i = 0; i < 65; i++)
        sprintf(big + strlen(big), "%s\"c%d\": %d", i ? ", " : "", i, i);
    strcat(big, "}");
    tok = unsigned_token("{\"alg\": \"HS256\"}", big, "AAAA");
    ck_assert_int_eq(verify(set, tok), ADM_JWT_MALFORMED);
    free(tok);
    free(big);
    adm_jwks_free(set);
}
END_TEST

/* JSON the parser must refuse, in the header or in the claims (all of them
 * before the signature is looked at). */
START_TEST(odd_json_is_refused)
{
    struct adm_jwks *set = full_set();
    static const char *const headers[] = {
        "{\"alg\": \"HS256\", \"alg\": \"HS256\"}",
        "{\"alg\": \"HS256\", \"a\\u006cg\": \"none\"}", /* the same name, escaped */
        "{\"alg\": \"HS256\", \"crit\": [\"b64\"]}",
        "{\"alg\": \"HS256\", \"crit\": \"b64\"}",
        "[\"HS256\"]",
        "\"HS256\"",
        "{\"alg\": \"HS256\"} x",
        "{\"alg\": \"HS256\",}",
        "{\"alg\" \"HS256\"}",
        "{'alg': 'HS256'}",
        "{\"alg\": \"HS256\"",
        "",
    };
    static const char *const bodies[] = {
        "{\"exp\": 1, \"exp\": 1900000000}",
        "{\"sub\": \"a\\ud800\"}",        /* a lone surrogate */
        "{\"sub\": \"a\\udc00\\ud800\"}", /* the wrong way round */
        "{\"sub\": \"\xff\"}",            /* not UTF-8 */
        "{\"sub\": \"\xc0\xaf\"}",        /* overlong */
        "{\"sub\": \"\xed\xa0\x80\"}",    /* an encoded surrogate */
        "{\"sub\": \"a\tb\"}",            /* a raw control character */
        "{\"sub\": \"\\x41\"}",
        "{\"n\": 01}",
        "{\"n\": 1.}",
        "{\"n\": -}",
        "{\"n\": +1}",
        "{\"b\": tru}",
        "{\"o\": {\"a\": [1, 2,]}}",
        "{\"o\": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}", /* deeper than 16 */
        "{} {}",
        "[]",
        "{\"a\": 1",
    };
    char *tok;

    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        tok = unsigned_token(headers[i], good_claims, "AAAA");
        ck_assert_msg(verify(set, tok) == ADM_JWT_MALFORMED, "%s", headers[i]);
        free(tok);
    }
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        tok = unsigned_token("{\"alg\": \"HS256\"}", bodies[i], "AAAA");
        ck_assert_msg(verify(set, tok) == ADM_JWT_MALFORMED, "%s", bodies[i]);
        free(tok);
    }
    /* what is fine: an empty crit, nesting within the bound, white space */
    expect(set, "HS256", SECRET_HEX, ", \"crit\": []",
           " {\"iss\" : \"" ISS "\" ,\n\"aud\":\"api\",\"o\":{\"a\":[[[1]]],\"b\":{}}}\t",
           ADM_JWT_OK);
    adm_jwks_free(set);
}
END_TEST

START_TEST(claims_for_headers)
{
    struct adm_jwks *set = full_set();
    char *tok = token("ES256", "ec256", "",
                      "{\"iss\": \"" ISS "\", \"aud\": \"api\", \"sub\": \"al\\u00e9 \\\"x\\\" \\/"
                      "\\ud83d\\ude00\", \"n\": 42, \"f\": -1.5e3, \"b\": true, \"o\": {}, "
                      "\"a\": [1], \"z\": null, \"crlf\": \"a\\r\\nb\", \"del\": \"\\u007f\", "
                      "\"nul\": \"\\u0000\", \"empty\": \"\"}");
    static const struct {
        const char *name, *want;
    } cases[] = {
        {"sub", "al\xc3\xa9 \"x\" /\xf0\x9f\x98\x80"},
        {"n", "42"},
        {"f", "-1.5e3"},
        {"b", "true"},
        {"empty", ""},
        {"o", NULL},
        {"a", NULL},
        {"z", NULL},
        {"crlf", NULL},
        {"del", NULL},
        {"nul", NULL},
        {"missing", NULL},
        {"SUB", NULL},
    };

    ck_assert_int_eq(verify(set, tok), ADM_JWT_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = 99;
        const char *v = adm_jwt_claim_str(&claims, cases[i].name, &len);

        if (!cases[i].want) {
            ck_assert_msg(!v, "%s", cases[i].name);
            continue;
        }
        ck_assert_msg(v, "%s", cases[i].name);
        ck_assert_uint_eq(len, strlen(cases[i].want));
        ck_assert(memcmp(v, cases[i].want, len) == 0);
    }
    free(tok);
    adm_jwks_free(set);
}
END_TEST

static void parse_fails(const char *doc, const char *want)
{
    char err[256] = "";
    struct adm_jwks *set = adm_jwks_parse(doc, strlen(doc), err, sizeof(err));

    ck_assert_msg(!set, "%s", doc);
    ck_assert_msg(strstr(err, want), "%s: got \"%s\", want \"%s\"", doc, err, want);
}

START_TEST(jwks_documents)
{
    char *rsa = jk_jwk("rsa", ""), *small = jk_jwk("rsa1024", ""), *ec = jk_jwk("ec256", "");
    char *ed = jk_jwk("ed", ""), doc[16384], *p, was;
    struct adm_jwks *set;

    /* unknown types, curves, uses and algs are skipped */
    snprintf(doc, sizeof(doc),
             "{\"keys\": [{\"kty\": \"foo\"}, {\"kty\": \"EC\", \"crv\": \"P-521\", \"x\": 1}, "
             "{\"kty\": \"OKP\", \"crv\": \"X25519\", \"x\": \"AAAA\"}, %s, %s, "
             "{\"kty\": \"oct\", \"k\": \"c2hvcnQ\"}, "
             "{\"kty\": \"oct\", \"k\": \"c2hvcnQ\", \"alg\": \"HS512\"}, "
             "{\"kty\": \"RSA\", \"alg\": \"RSA-OAEP\", \"n\": \"AQAB\", \"e\": \"AQAB\"}, %s]}",
             small, rsa, ec);
    set = parse_ok(doc);
    ck_assert_uint_eq(adm_jwks_count(set), 2); /* rsa, ec */
    adm_jwks_free(set);
    snprintf(doc, sizeof(doc), "{\"keys\": [%s]}", rsa);
    strcpy(strrchr(doc, '}') - 2, ", \"use\": \"enc\"}]}");
    parse_fails(doc, "/keys: no key we can verify with");
    strcpy(strstr(doc, "\"enc\""), "\"sig\", \"key_ops\": [\"encrypt\"]}]}");
    parse_fails(doc, "/keys: no key we can verify with");
    strcpy(strstr(doc, "\"encrypt\""), "\"sign\", \"verify\"]}]}");
    set = parse_ok(doc);
    adm_jwks_free(set);
    snprintf(doc, sizeof(doc), "{\"keys\": [%s]}", small);
    parse_fails(doc, "no key we can verify with");
    /* a bare JWK */
    set = parse_ok(ed);
    ck_assert_uint_eq(adm_jwks_count(set), 1);
    adm_jwks_free(set);
    /* malformed keys are named */
    snprintf(doc, sizeof(doc), "{\"keys\": [%s, %s]}", rsa, ec);
    p = strstr(doc, "\"n\": \"") + 6;
    was = *p;
    *p = '+';
    parse_fails(doc, "/keys/0/n: not unpadded base64url");
    *p = was;
    /* a point off the curve */
    p = strstr(doc, "\"y\": \"") + 6;
    was = p[3];
    p[3] = was == 'A' ? 'B' : 'A';
    parse_fails(doc, "/keys/1: not a valid public key");
    p[3] = was;
    set = parse_ok(doc);
    adm_jwks_free(set);
    /* a coordinate one byte short */
    snprintf(doc, sizeof(doc),
             "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"x\": \"%s\", \"y\": \"AAAA\"}]}",
             "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    parse_fails(doc, "/keys/0/x: not the curve's coordinate length");
    parse_fails("{\"keys\": [{\"kty\": \"RSA\", \"e\": \"AQAB\"}]}", "/keys/0/n: missing");
    parse_fails("{\"keys\": [{\"kty\": \"RSA\", \"n\": 1, \"e\": \"AQAB\"}]}",
                "/keys/0/n: not a string");
    parse_fails("{\"keys\": [{\"kty\": 1}]}", "/keys/0/kty: not a string");
    parse_fails("{\"keys\": [{\"kty\": \"oct\", \"kid\": 7, \"k\": \"AAAA\"}]}",
                "/keys/0/kid: not a string");
    parse_fails("{\"keys\": [1]}", "/keys/0: not an object");
    parse_fails("{\"keys\": {}}", "/keys: not an array");
    parse_fails("{\"keys\": []}", "no key we can verify with");
    parse_fails("{\"keys\": [], \"keys\": []}", "duplicate");
    parse_fails("[]", "not a JSON object");
    parse_fails("{\"keys\": [", "line 1");
    parse_fails("", "line");
    /* an oct key of 32 bytes is an HS256 key */
    char *k = jk_b64url((const unsigned char *)SECRET, 32);
    snprintf(doc, sizeof(doc), "{\"keys\": [{\"kty\": \"oct\", \"k\": \"%s\", \"kid\": \"s\"}]}",
             k);
    set = parse_ok(doc);
    expect(set, "HS256", SECRET_HEX, ", \"kid\": \"s\"", good_claims, ADM_JWT_OK);
    adm_jwks_free(set);
    free(k);
    free(rsa);
    free(small);
    free(ec);
    free(ed);
}
END_TEST

START_TEST(sets_compose)
{
    char *ec = jk_jwk("ec256", ""), doc[4096];
    struct adm_jwks *file, *all = adm_jwks_new();

    ck_assert_ptr_nonnull(all);
    ck_assert_int_eq(adm_jwks_add_hs256(all, (const unsigned char *)SECRET, 31), -1);
    ck_assert_int_eq(adm_jwks_add_hs256(all, (const unsigned char *)SECRET, 32), 0);
    snprintf(doc, sizeof(doc), "{\"keys\": [%s]}", ec);
    file = parse_ok(doc);
    ck_assert_int_eq(adm_jwks_merge(all, file), 0);
    adm_jwks_free(file); /* the merged keys hold their own references */
    ck_assert_uint_eq(adm_jwks_count(all), 2);
    ck_assert_ptr_eq(adm_jwks_hold(all), all);
    adm_jwks_free(all);
    expect(all, "ES256", "ec256", "", good_claims, ADM_JWT_OK);
    expect(all, "HS256", SECRET_HEX, "", good_claims, ADM_JWT_OK);
    /* no set yet, or an empty one: nothing verifies */
    ck_assert_uint_eq(adm_jwks_count(NULL), 0);
    expect(NULL, "HS256", SECRET_HEX, "", good_claims, ADM_JWT_NO_KEY);
    file = adm_jwks_new();
    expect(file, "HS256", SECRET_HEX, "", good_claims, ADM_JWT_NO_KEY);
    adm_jwks_free(file);
    adm_jwks_free(all);
    adm_jwks_free(NULL);
    ck_assert_str_eq(adm_jwt_result_name(ADM_JWT_EXPIRED), "expired");
    ck_assert_uint_eq(adm_jwt_alg_parse("none"), 0);
    free(ec);
}
END_TEST

/* The cache skips only the signature: claims are checked on every hit. */
START_TEST(cache_remembers_signatures)
{
    struct adm_jwks *set = full_set(), *other = full_set();
    struct adm_jwt_cache *c = adm_jwt_cache_new(16);
    char *tok = token("ES256", "ec256", "", good_claims);
    char *noexp = token("ES256", "ec256", "", "{\"iss\": \"" ISS "\", \"aud\": \"api\"}");
    char *forged = strdup(tok);
    struct adm_jwt_opts strict = opts;
    unsigned long long hits, misses;
    size_t len = strlen(tok);

    ck_assert_ptr_nonnull(c);
#define CACHED(set_, opts_, tok_, now_)                                                            \
    adm_jwt_verify_cached(c, set_, opts_, tok_, strlen(tok_), now_, &claims, NULL)
    ck_assert_int_eq(CACHED(set, &opts, tok, NOW), ADM_JWT_OK);
    ck_assert_int_eq(CACHED(set, &opts, tok, NOW), ADM_JWT_OK);
    adm_jwt_cache_stats(c, &hits, &misses);
    ck_assert_uint_eq(hits, 1);
    ck_assert_uint_eq(misses, 1);
    ck_assert_uint_eq(claims.alg, ADM_JWT_ES256);
    ck_assert_ptr_nonnull(adm_jwt_claim_str(&claims, "sub", &len));
    /* a hit still expires, and still answers to the policy's issuer and algorithms */
    ck_assert_int_eq(CACHED(set, &opts, tok, NOW + 131), ADM_JWT_EXPIRED);
    strict.issuer = "https://other.example";
    ck_assert_int_eq(CACHED(set, &strict, tok, NOW), ADM_JWT_BAD_ISSUER);
    strict = opts;
    strict.algs = ADM_JWT_RS256;
    ck_assert_int_eq(CACHED(set, &strict, tok, NOW), ADM_JWT_ALG_REFUSED);
    /* a token differing by one byte of its signature is no hit */
    forged[strlen(forged) - 10] = forged[strlen(forged) - 10] == 'A' ? 'B' : 'A';
    ck_assert_int_eq(CACHED(set, &opts, forged, NOW), ADM_JWT_BAD_SIGNATURE);
    /* another set, however equal, starts afresh */
    adm_jwt_cache_stats(c, &hits, &misses);
    ck_assert_int_eq(CACHED(other, &opts, tok, NOW), ADM_JWT_OK);
    ck_assert_int_eq(CACHED(other, &opts, tok, NOW), ADM_JWT_OK);
    {
        unsigned long long h2, m2;
        adm_jwt_cache_stats(c, &h2, &m2);
        ck_assert_uint_eq(h2 - hits, 1);
        ck_assert_uint_eq(m2 - misses, 1);
        hits = h2, misses = m2;
    }
    /* no exp: never remembered */
    ck_assert_int_eq(CACHED(set, &opts, noexp, NOW), ADM_JWT_OK);
    ck_assert_int_eq(CACHED(set, &opts, noexp, NOW), ADM_JWT_OK);
    {
        unsigned long long h2, m2;
        adm_jwt_cache_stats(c, &h2, &m2);
        ck_assert_uint_eq(h2, hits);
        ck_assert_uint_eq(m2 - misses, 2);
    }
    /* without claims wanted: a token remembered under these very options
     * is checked against the clock only, and answers as the full path */
#define FAST(set_, opts_, tok_, now_)                                                              \
    adm_jwt_verify_cached(c, set_, opts_, tok_, strlen(tok_), now_, NULL, NULL)
    ck_assert_int_eq(FAST(set, &opts, tok, NOW), ADM_JWT_OK);
    adm_jwt_cache_stats(c, &hits, &misses);
    ck_assert_int_eq(FAST(set, &opts, tok, NOW), ADM_JWT_OK);
    {
        unsigned long long h2, m2;
        adm_jwt_cache_stats(c, &h2, &m2);
        ck_assert_uint_eq(h2 - hits, 1); /* one lookup: the clock-only one */
        ck_assert_uint_eq(m2, misses);
    }
    ck_assert_int_eq(FAST(set, &opts, tok, NOW + 131), ADM_JWT_EXPIRED);
    ck_assert_int_eq(FAST(set, &opts, tok, NOW), ADM_JWT_OK);
    strict = opts;
    strict.issuer = "https://other.example";
    ck_assert_int_eq(FAST(set, &strict, tok, NOW), ADM_JWT_BAD_ISSUER);
    strict = opts;
    strict.algs = ADM_JWT_RS256;
    ck_assert_int_eq(FAST(set, &strict, tok, NOW), ADM_JWT_ALG_REFUSED);
    strict = opts;
    strict.naud = 0;
    ck_assert_int_eq(FAST(set, &strict, tok, NOW), ADM_JWT_OK); /* remembered anew */
    ck_assert_int_eq(FAST(set, &opts, tok, NOW), ADM_JWT_OK);
    ck_assert_int_eq(FAST(set, &opts, forged, NOW), ADM_JWT_BAD_SIGNATURE);
    ck_assert_int_eq(FAST(other, &opts, tok, NOW), ADM_JWT_OK);
    ck_assert_int_eq(FAST(set, &opts, noexp, NOW), ADM_JWT_OK);
    ck_assert_int_eq(FAST(set, &opts, noexp, NOW), ADM_JWT_OK);
#undef FAST
#undef CACHED
    free(tok);
    free(noexp);
    free(forged);
    adm_jwt_cache_free(c);
    adm_jwt_cache_free(NULL);
    adm_jwks_free(set);
    adm_jwks_free(other);
}
END_TEST

START_TEST(bearer_credentials)
{
    static const struct {
        const char *v, *tok;
    } cases[] = {
        {"Bearer abc.def.ghi", "abc.def.ghi"},
        {"bearer   abc.d-f_~+/.g==", "abc.d-f_~+/.g=="},
        {"BEARER x", "x"},
        {"Bearer", NULL},
        {"Bearer ", NULL},
        {"Bearer  ", NULL},
        {"Bearerabc", NULL},
        {"Basic YWxhZGRpbjpvcGVu", NULL},
        {"Bearer a b", NULL},
        {"Bearer a=b", NULL},
        {"Bearer =", NULL},
        {"Bearer a\tb", NULL},
        {"Bearer\tabc", NULL},
        {"Bearer a,b", NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = 0;
        const char *t = adm_jwt_bearer(cases[i].v, strlen(cases[i].v), &len);

        if (!cases[i].tok) {
            ck_assert_msg(!t, "%s", cases[i].v);
            continue;
        }
        ck_assert_msg(t && len == strlen(cases[i].tok) && !memcmp(t, cases[i].tok, len), "%s",
                      cases[i].v);
    }
    /* a NUL is no token character */
    ck_assert_ptr_null(adm_jwt_bearer("Bearer a\0b", 10, &(size_t){0}));
}
END_TEST

/* JOSE's r||s to DER: halves with leading zero bytes (each 1 in 256
 * signatures) and with the high bit set (a 0x00 pad in DER) all verify.
 * Signed here through EVP, until both kinds of leading zero were seen. */
START_TEST(ecdsa_halves_of_every_shape)
{
    struct adm_jwks *set = full_set();
    char path[512], *input, *h = jk_b64url_str("{\"alg\": \"ES256\"}");
    char *p = jk_b64url_str(good_claims);
    EVP_PKEY *key;
    FILE *f;
    int zero_r = 0, zero_s = 0, high = 0, n;

    jk_path(path, sizeof(path), "ec256.pem");
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    ck_assert_ptr_nonnull(key = PEM_read_PrivateKey(f, NULL, NULL, NULL));
    fclose(f);
    input = malloc(strlen(h) + strlen(p) + 2);
    sprintf(input, "%s.%s", h, p);
    for (n = 0; n < 20000 && !(zero_r && zero_s && high); n++) {
        unsigned char der[80], raw[64];
        size_t dlen = sizeof(der);
        EVP_MD_CTX *m = EVP_MD_CTX_new();
        char *sig64, *tok;

        ck_assert(EVP_DigestSignInit(m, NULL, EVP_sha256(), NULL, key) == 1);
        ck_assert(EVP_DigestSign(m, der, &dlen, (const unsigned char *)input, strlen(input)) == 1);
        EVP_MD_CTX_free(m);
        jk_ecdsa_raw(der, dlen, raw, 32);
        zero_r |= raw[0] == 0;
        zero_s |= raw[32] == 0;
        high |= raw[0] >= 0x80 && raw[32] >= 0x80;
        sig64 = jk_b64url(raw, 64);
        tok = malloc(strlen(input) + strlen(sig64) + 2);
        sprintf(tok, "%s.%s", input, sig64);
        ck_assert_msg(verify(set, tok) == ADM_JWT_OK, "r[0] %02x s[0] %02x", raw[0], raw[32]);
        free(sig64);
        free(tok);
    }
    ck_assert(zero_r && zero_s && high);
    EVP_PKEY_free(key);
    free(input);
    free(h);
    free(p);
    adm_jwks_free(set);
}
END_TEST

/* Many threads verify against one set at once (run under TSan too). */
struct worker {
    const struct adm_jwks *set;
    char *toks[3];
    int failures;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct adm_jwt_claims *c = malloc(sizeof(*c));

    for (int i = 0; i < 150; i++) {
        const char *t = w->toks[i % 3];
        if (adm_jwt_verify(w->set, &opts, t, strlen(t), NOW, c, NULL) != ADM_JWT_OK)
            w->failures++;
    }
    free(c);
    return NULL;
}

START_TEST(threads_share_a_set)
{
    struct adm_jwks *set = full_set();
    struct worker w[4];
    pthread_t th[4];
    char *toks[3] = {token("RS256", "rsa", "", good_claims),
                     token("ES256", "ec256", "", good_claims),
                     token("HS256", SECRET_HEX, "", good_claims)};

    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.set = set, .toks = {toks[0], toks[1], toks[2]}};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    for (int i = 0; i < 3; i++)
        free(toks[i]);
    adm_jwks_free(set);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jwt");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    jk_keys();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_algorithm_verifies);
    tcase_add_test(tc, forged_tokens_are_refused);
    tcase_add_test(tc, times_with_leeway);
    tcase_add_test(tc, issuer_and_audience);
    tcase_add_test(tc, alg_none_and_unknown_are_refused);
    tcase_add_test(tc, algorithm_confusion_is_refused);
    tcase_add_test(tc, kid_selects_the_key);
    tcase_add_test(tc, bad_base64url_and_shapes);
    tcase_add_test(tc, size_bounds);
    tcase_add_test(tc, odd_json_is_refused);
    tcase_add_test(tc, claims_for_headers);
    tcase_add_test(tc, jwks_documents);
    tcase_add_test(tc, sets_compose);
    tcase_add_test(tc, cache_remembers_signatures);
    tcase_add_test(tc, bearer_credentials);
    tcase_add_test(tc, ecdsa_halves_of_every_shape);
    tcase_add_test(tc, threads_share_a_set);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", jk_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", jk_dir);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
