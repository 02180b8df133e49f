/*
 * jwt_keys.h - keys and tokens for test_jwt.c, made at test time: the keys
 * and every signature by the openssl command-line tool (so that what signs
 * is not the code under test), in a fresh temporary directory:
 *   rsa.pem       RSA 2048          rsa1024.pem  RSA 1024 (too small)
 *   rsa2.pem      another RSA 2048
 *   ec256.pem     EC P-256          ec384.pem    EC P-384
 *   ed.pem        Ed25519
 *   <k>.pub.pem   each one's public key; rsa.pub.der the RSA one in DER
 * The JWKs are written from the public keys through OpenSSL's parameter
 * getters; ECDSA signatures come out of the CLI in DER and are turned into
 * JOSE's r||s here.
 */
#ifndef SY_TESTS_JWT_KEYS_H
#define SY_TESTS_JWT_KEYS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

static char jk_dir[256];

static const char jk_script[] =
    "set -e; cd \"$1\"; O=openssl\n"
    "$O genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa.pem\n"
    "$O genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa2.pem\n"
    "$O genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out rsa1024.pem\n"
    "$O genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ec256.pem\n"
    "$O genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out ec384.pem\n"
    "$O genpkey -algorithm ed25519 -out ed.pem\n"
    "for k in rsa rsa2 rsa1024 ec256 ec384 ed; do $O pkey -in $k.pem -pubout -out $k.pub.pem; "
    "done\n"
    "$O pkey -in rsa.pem -pubout -outform DER -out rsa.pub.der\n";

/* Makes the keys once per process (from main(), before the tests fork). */
static const char *jk_keys(void)
{
    char cmd[1024];
    FILE *f = NULL;

    if (jk_dir[0])
        return jk_dir;
    snprintf(jk_dir, sizeof(jk_dir), "/tmp/sy-jwt-test-XXXXXX");
    if (mkdtemp(jk_dir)) {
        snprintf(cmd, sizeof(cmd), "%s/gen.sh", jk_dir);
        f = fopen(cmd, "w");
    }
    if (!f) {
        perror("jk_keys");
        exit(EXIT_FAILURE);
    }
    fputs(jk_script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "sh %s/gen.sh %s >%s/gen.log 2>&1", jk_dir, jk_dir, jk_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "openssl failed: see %s/gen.log\n", jk_dir);
        exit(EXIT_FAILURE);
    }
    return jk_dir;
}

static void jk_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", jk_keys(), name);
}

/* The whole file <name> of the key directory (malloc'd), its length in <*len>. */
static unsigned char *jk_read(const char *name, size_t *len)
{
    char path[512];
    unsigned char *buf = malloc(1 << 16);
    FILE *f;

    jk_path(path, sizeof(path), name);
    f = fopen(path, "rb");
    if (!f || !buf)
        abort();
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static void jk_write(const char *name, const void *data, size_t len)
{
    char path[512];
    FILE *f;

    jk_path(path, sizeof(path), name);
    f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len)
        abort();
    fclose(f);
}

/* Unpadded base64url of <in>[0..len), malloc'd. */
static char *jk_b64url(const unsigned char *in, size_t len)
{
    char *out = malloc(len * 4 / 3 + 8);
    int n = EVP_EncodeBlock((unsigned char *)out, in, (int)len);

    while (n > 0 && out[n - 1] == '=')
        n--;
    out[n] = '\0';
    for (int i = 0; i < n; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return out;
}

static char *jk_b64url_str(const char *s)
{
    return jk_b64url((const unsigned char *)s, strlen(s));
}

static EVP_PKEY *jk_pub(const char *key)
{
    char path[512], name[64];
    FILE *f;
    EVP_PKEY *pk;

    snprintf(name, sizeof(name), "%s.pub.pem", key);
    jk_path(path, sizeof(path), name);
    f = fopen(path, "r");
    if (!f)
        abort();
    pk = PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!pk)
        abort();
    return pk;
}

static char *jk_bn_b64(EVP_PKEY *pk, const char *param)
{
    BIGNUM *bn = NULL;
    unsigned char buf[1024];
    int n;

    if (!EVP_PKEY_get_bn_param(pk, param, &bn))
        abort();
    n = BN_bn2bin(bn, buf);
    BN_free(bn);
    return jk_b64url(buf, (size_t)n);
}

/* The JWK of key <key>'s public half, with <extra> (", \"kid\": \"a\"", or "")
 * inside the object. malloc'd. */
static char *jk_jwk(const char *key, const char *extra)
{
    EVP_PKEY *pk = jk_pub(key);
    char *out = malloc(4096), *a, *b;
    unsigned char pub[200];
    size_t len = sizeof(pub);

    if (EVP_PKEY_is_a(pk, "RSA")) {
        a = jk_bn_b64(pk, OSSL_PKEY_PARAM_RSA_N);
        b = jk_bn_b64(pk, OSSL_PKEY_PARAM_RSA_E);
        snprintf(out, 4096, "{\"kty\": \"RSA\", \"n\": \"%s\", \"e\": \"%s\"%s}", a, b, extra);
    } else if (EVP_PKEY_is_a(pk, "EC")) {
        size_t half;
        if (!EVP_PKEY_get_octet_string_param(pk, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, pub,
                                             sizeof(pub), &len))
            abort();
        half = (len - 1) / 2;
        a = jk_b64url(pub + 1, half);
        b = jk_b64url(pub + 1 + half, half);
        snprintf(out, 4096, "{\"kty\": \"EC\", \"crv\": \"%s\", \"x\": \"%s\", \"y\": \"%s\"%s}",
                 half == 32 ? "P-256" : "P-384", a, b, extra);
    } else {
        if (!EVP_PKEY_get_raw_public_key(pk, pub, &len))
            abort();
        a = jk_b64url(pub, len);
        b = NULL;
        snprintf(out, 4096, "{\"kty\": \"OKP\", \"crv\": \"Ed25519\", \"x\": \"%s\"%s}", a, extra);
    }
    free(a);
    free(b);
    EVP_PKEY_free(pk);
    return out;
}

/* JOSE r||s (each <half> bytes) from the DER ECDSA signature <der>. */
static size_t jk_ecdsa_raw(const unsigned char *der, size_t len, unsigned char *out, size_t half)
{
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &der, (long)len);
    const BIGNUM *r, *s;

    if (!sig)
        abort();
    ECDSA_SIG_get0(sig, &r, &s);
    if (BN_bn2binpad(r, out, (int)half) < 0 || BN_bn2binpad(s, out + half, (int)half) < 0)
        abort();
    ECDSA_SIG_free(sig);
    return 2 * half;
}

/* The signature of <input>, written to in.txt, by the openssl command
 * <how>, which writes it to sig.bin. */
static unsigned char *jk_sign_cli(const char *input, const char *how, size_t *len)
{
    char cmd[2048];

    jk_write("in.txt", input, strlen(input));
    snprintf(cmd, sizeof(cmd), "cd %s && openssl %s 2>>sign.log", jk_keys(), how);
    if (system(cmd) != 0)
        abort();
    return jk_read("sig.bin", len);
}

/* A compact JWS of the header <hdr> and claims <claims> (JSON texts, encoded
 * as they are) signed for <alg> with key <key> ("rsa", "ec256", ...; for
 * HS256 the hex of the secret). malloc'd. */
static char *jk_token(const char *alg, const char *key, const char *hdr, const char *claims)
{
    char *h = jk_b64url_str(hdr), *p = jk_b64url_str(claims), *input, *sig64, *tok, how[1024];
    unsigned char *sig, raw[128];
    size_t slen;
    const char *md = strstr(alg, "384") ? "sha384" : strstr(alg, "512") ? "sha512" : "sha256";

    input = malloc(strlen(h) + strlen(p) + 2);
    sprintf(input, "%s.%s", h, p);
    if (alg[0] == 'R' || (alg[0] == 'E' && alg[1] == 'S'))
        snprintf(how, sizeof(how), "dgst -%s -sign %s.pem -out sig.bin in.txt", md, key);
    else if (alg[0] == 'P')
        snprintf(how, sizeof(how),
                 "dgst -%s -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest "
                 "-sign %s.pem -out sig.bin in.txt",
                 md, key);
    else if (alg[0] == 'E')
        snprintf(how, sizeof(how), "pkeyutl -sign -rawin -inkey %s.pem -in in.txt -out sig.bin",
                 key);
    else
        snprintf(how, sizeof(how),
                 "dgst -sha256 -mac HMAC -macopt hexkey:%s -binary -out sig.bin in.txt", key);
    sig = jk_sign_cli(input, how, &slen);
    if (alg[0] == 'E' && alg[1] == 'S') {
        slen = jk_ecdsa_raw(sig, slen, raw, strstr(alg, "384") ? 48 : 32);
        memcpy(sig, raw, slen);
    }
    sig64 = jk_b64url(sig, slen);
    tok = malloc(strlen(input) + strlen(sig64) + 2);
    sprintf(tok, "%s.%s", input, sig64);
    free(h);
    free(p);
    free(input);
    free(sig);
    free(sig64);
    return tok;
}

#endif /* SY_TESTS_JWT_KEYS_H */
