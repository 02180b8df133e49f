/*
 * fuzz_jwt.c - fuzz target of JWT verification (admin/jwt.c, jwk.c,
 * jwt_json.c). Byte 0 picks what the rest is:
 *   0  a token, verified as it is against a fixed key set (an HS256 secret,
 *      an EC P-256 key with kid "ec"); and as an Authorization value
 *   1  "header.payload" (base64url), signed here with the HS256 secret
 *      before it is verified: the signature always holds, so the claim
 *      checks (exp, nbf, iss, aud) and the claims read back are reached
 *   2  a JSON text for the in-place parser, held to jansson's reading
 *   3  a JWKS document for adm_jwks_parse
 *
 * Checked beyond "no crash, no leak, no undefined behaviour": a result is
 * one of the enum's, with a reason; a verified token's claims lie inside
 * its buffer and adm_jwt_claim_str never hands out a control character;
 * its iss is the issuer and one aud an accepted audience; the cached
 * verification answers as the plain one, twice over; the parser and
 * jansson agree on what is JSON (where jansson's number range and our
 * bounds allow) and on every top-level string; a refused JWKS says why.
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * tests/gateway/fuzz_replay.c as a plain program that replays
 * fuzz_jwt_corpus/ plus mutations of it with a fixed seed (ctest).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "admin/jwt.h"
#include "admin/jwt_int.h"
#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const size_t fuzz_prefix = 1;

#define SECRET "0123456789abcdef0123456789abcdef"
#define NOW 1800000000L
#define JWKS                                                                                       \
    "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"kid\": \"ec\", "                          \
    "\"x\": \"P7TzZcmp32t5_nSSIxt-GPRl_tAuFoeQITEEfzMRWBg\", "                                     \
    "\"y\": \"xa8rtWb9WG1lN3NuC3w6qJ5GdXsANP3ODLMwwlfeuig\"}]}"

static const char *const auds[] = {"api", "web"};
static const struct adm_jwt_opts opts = {.issuer = "https://id.example",
                                         .audiences = auds,
                                         .naud = 2,
                                         .algs = ADM_JWT_ALGS_ALL,
                                         .leeway_s = 30};

static struct adm_jwks *key_set(void)
{
    static struct adm_jwks *set;
    char err[256];

    if (!set) {
        set = adm_jwks_parse(JWKS, strlen(JWKS), err, sizeof(err));
        CHECK(set != NULL);
        CHECK(adm_jwks_add_hs256(set, (const unsigned char *)SECRET, 32) == 0);
    }
    return set;
}

static int str_eq(const char *s, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(s, want, len) == 0;
}

static void check_claims(const struct adm_jwt_claims *c)
{
    size_t len;
    const char *v;
    int aud_ok = 0;

    CHECK(c->n <= ADM_JWT_CLAIMS_MAX);
    for (unsigned i = 0; i < c->n; i++) {
        char name[ADM_JWT_TOKEN_MAX];
        const struct adm_jwt_member *m = &c->m[i];

        CHECK((size_t)m->name + m->name_len <= sizeof(c->buf));
        CHECK((size_t)m->val + m->val_len <= sizeof(c->buf));
        memcpy(name, c->buf + m->name, m->name_len);
        name[m->name_len] = '\0';
        if (strlen(name) != m->name_len)
            continue; /* a name with a NUL cannot be asked for */
        v = adm_jwt_claim_str(c, name, &len);
        for (size_t k = 0; v && k < len; k++)
            CHECK((unsigned char)v[k] >= 0x20 && v[k] != 0x7f);
        if (strcmp(name, "aud") == 0 && v)
            aud_ok = str_eq(v, len, "api") || str_eq(v, len, "web");
        if (strcmp(name, "aud") == 0 && !v)
            aud_ok = 1; /* an array: checked by the verifier only */
    }
    v = adm_jwt_claim_str(c, "iss", &len);
    CHECK(v && str_eq(v, len, opts.issuer));
    CHECK(aud_ok);
}

static void verify(const char *tok, size_t len)
{
    static struct adm_jwt_claims claims;
    const char *why = NULL;
    enum adm_jwt_result r = adm_jwt_verify(key_set(), &opts, tok, len, NOW, &claims, &why);

    CHECK(why != NULL);
    CHECK(r >= ADM_JWT_OK && r <= ADM_JWT_NOMEM);
    CHECK(strcmp(adm_jwt_result_name(r), "unknown") != 0);
    if (r == ADM_JWT_OK)
        check_claims(&claims);
    /* remembered signatures change no answer, the first time or the second */
    static struct adm_jwt_cache *cache;
    if (!cache)
        CHECK((cache = adm_jwt_cache_new(64)) != NULL);
    for (int i = 0; i < 2; i++)
        CHECK(adm_jwt_verify_cached(cache, key_set(), &opts, tok, len, NOW, &claims, &why) == r);
    /* nor does the clock-only check of a remembered token, nor a later
     * clock: the plain verification is the oracle */
    for (int i = 0; i < 2; i++)
        CHECK(adm_jwt_verify_cached(cache, key_set(), &opts, tok, len, NOW, NULL, &why) == r);
    for (long d = -400; d <= 400; d += 100)
        CHECK(adm_jwt_verify_cached(cache, key_set(), &opts, tok, len, NOW + d, NULL, &why) ==
              adm_jwt_verify(key_set(), &opts, tok, len, NOW + d, &claims, &why));
}

/* "header.payload" signed with the secret, then verified. */
static void verify_signed(const char *hp, size_t len)
{
    static char tok[ADM_JWT_TOKEN_MAX + 64];
    unsigned char mac[32];
    unsigned maclen = 0;
    char *b64 = tok + len + 1;
    int n;

    if (len > ADM_JWT_TOKEN_MAX)
        return;
    memcpy(tok, hp, len);
    tok[len] = '.';
    CHECK(HMAC(EVP_sha256(), SECRET, 32, (const unsigned char *)hp, len, mac, &maclen));
    n = EVP_EncodeBlock((unsigned char *)b64, mac, (int)maclen);
    while (n > 0 && b64[n - 1] == '=')
        n--;
    for (int i = 0; i < n; i++)
        b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
    verify(tok, len + 1 + (size_t)n);
}

/* The nesting depth of <v>, itself counted. */
static int depth(json_t *v)
{
    int d = 0;
    size_t i;
    const char *k;
    json_t *x;

    if (json_is_object(v)) {
        json_object_foreach(v, k, x) if (depth(x) > d) d = depth(x);
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) if (depth(x) > d) d = depth(x);
    } else {
        return 0;
    }
    return d + 1;
}

/* Whether jansson refused for one of its own limits, not for the JSON: a
 * number out of its range, a NUL in an object's name. */
static int jansson_limit(const json_error_t *e)
{
    return strstr(e->text, "too big") || strstr(e->text, "overflow") ||
           strstr(e->text, "NUL byte in object key");
}

/* The in-place parser against jansson. */
static void json_diff(const char *text, size_t len)
{
    static char buf[1 << 16];
    struct adm_jwt_member m[ADM_JWT_CLAIMS_MAX];
    unsigned n = 0;
    const char *why = NULL;
    json_error_t e;
    json_t *loose, *strict;
    int ours;

    if (len >= sizeof(buf))
        return;
    memcpy(buf, text, len);
    ours = jwt_json_object(buf, len, m, ADM_JWT_CLAIMS_MAX, &n, &why);
    loose = json_loadb(text, len, JSON_ALLOW_NUL, &e);
    if (ours == 0) {
        CHECK(loose || jansson_limit(&e));
        if (loose) {
            CHECK(json_is_object(loose) && json_object_size(loose) == n);
            for (unsigned i = 0; i < n; i++) {
                json_t *v = json_object_getn(loose, buf + m[i].name, m[i].name_len);
                CHECK(v != NULL);
                if (m[i].kind == JWT_STR)
                    CHECK(json_is_string(v) && json_string_length(v) == m[i].val_len &&
                          memcmp(json_string_value(v), buf + m[i].val, m[i].val_len) == 0);
                else
                    CHECK(!json_is_string(v));
            }
        }
    } else {
        CHECK(why != NULL);
        strict = json_loadb(text, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e);
        /* what jansson takes and our bounds allow, we take (but jansson's
         * reader skips a NUL byte outside strings, which is no JSON) */
        CHECK(!strict || memchr(text, '\0', len) || !json_is_object(strict) ||
              json_object_size(strict) > ADM_JWT_CLAIMS_MAX || depth(strict) > JWT_JSON_DEPTH + 1);
        json_decref(strict);
    }
    json_decref(loose);
}

static void jwks(const char *doc, size_t len)
{
    char err[256] = "";
    struct adm_jwks *set = adm_jwks_parse(doc, len, err, sizeof(err));

    if (!set) {
        CHECK(err[0] != '\0');
        return;
    }
    CHECK(adm_jwks_count(set) > 0);
    adm_jwks_free(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data + 1;

    if (size < 1)
        return 0;
    switch (data[0] & 3) {
    case 0: {
        size_t tl = 0;
        const char *t = adm_jwt_bearer(text, size - 1, &tl);

        CHECK(!t || (t > text && t + tl == text + size - 1 && tl > 0));
        verify(text, size - 1);
        break;
    }
    case 1:
        verify_signed(text, size - 1);
        break;
    case 2:
        json_diff(text, size - 1);
        break;
    default:
        jwks(text, size - 1);
        break;
    }
    return 0;
}
