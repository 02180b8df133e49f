/*
 * jwt_int.h - the private half of admin/jwt.h: a key set's layout, shared by
 * jwk.c (which builds sets from JWKS documents and secrets) and jwt.c (which
 * verifies tokens against them), and their strict base64url decoder.
 */
#ifndef SY_ADMIN_JWT_INT_H
#define SY_ADMIN_JWT_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "admin/jwt.h"

/* One usable key. Immutable once its set is published. */
struct jwt_key {
    unsigned algs; /* the ADM_JWT_* bits it may verify: its type's, cut to its "alg" */
    char *kid;     /* NULL: none */
    size_t kid_len;
    EVP_PKEY *pkey;    /* RSA, EC or Ed25519; NULL for a secret */
    EVP_MAC_CTX *hmac; /* a secret: HMAC-SHA256 keyed with it, duplicated per use */
};

/* The digests, fetched once per set so that no verification looks one up
 * by name. */
enum { JWT_SHA256, JWT_SHA384, JWT_SHA512, JWT_NMD };

struct adm_jwks {
    atomic_uint refs;
    uint64_t id; /* unique in the process: what the token caches key on */
    struct jwt_key *keys;
    size_t n, cap;
    EVP_MD *md[JWT_NMD];
};

/* Decodes the unpadded base64url text <in>[0..len) into <out>, which has room
 * for (len * 3) / 4 bytes. Strict: only the 64 characters of the URL-safe
 * alphabet, no '=', no length of 1 mod 4, and unused trailing bits zero (one
 * text per byte string). The decoded length, or -1. */
long jwt_b64url_decode(const char *in, size_t len, unsigned char *out);

/* ---- jwt_json.c: the header and the claims, parsed in place ---- */

/* The kinds of a member's value. */
enum jwt_kind { JWT_STR = 1, JWT_NUM, JWT_BOOL, JWT_NULL, JWT_ARR, JWT_OBJ };

/* Nesting deeper than this inside a member's value is refused. */
#define JWT_JSON_DEPTH 16

/* Parses the JSON object <buf>[0..len) (len < 65536) in place, allocating
 * nothing: each top-level member goes into <m> (room for <max>; the count
 * in <*n>) with its name and, for a string, its value unescaped where they
 * were written; any other value is located as its JSON text. Strict (RFC
 * 8259): valid UTF-8, no duplicate names, no trailing bytes but white space.
 * 0, or -1 with a static reason in <*why>. */
int jwt_json_object(char *buf, size_t len, struct adm_jwt_member *m, unsigned max, unsigned *n,
                    const char **why);

/* The member called <name> among <m>[0..n), or NULL. */
const struct adm_jwt_member *jwt_json_find(const char *buf, const struct adm_jwt_member *m,
                                           unsigned n, const char *name);

/* Walks the array value <a> (a JWT_ARR member of <buf>), one string element
 * a call, unescaping it in place (so it walks once): <*pos> starts at 0.
 * 1 with the element's offset and length, 0 at the end, -1 when an element
 * is not a string. */
int jwt_json_array_next(char *buf, const struct adm_jwt_member *a, size_t *pos, uint16_t *off,
                        uint16_t *len);

/* ---- jwt_cache.c ---- */

/* Whether <token>[0..len) verified under <set> before (and counts it). */
int jwt_cache_find(struct adm_jwt_cache *c, const struct adm_jwks *set, const char *token,
                   size_t len);
/* What a token's claims said when it verified, for a later hit under the
 * same options: its times, the only claims whose verdict can change. */
struct jwt_cached_times {
    long long exp, nbf;
    int has_nbf;
};
/* Records that <token> verified under <set> and <opts> with times <t>
 * (nothing when it is too long). */
void jwt_cache_put(struct adm_jwt_cache *c, const struct adm_jwks *set,
                   const struct adm_jwt_opts *opts, const char *token, size_t len,
                   const struct jwt_cached_times *t);
/* The times of <token> when it verified under <set> and under options
 * equal to <opts> (the same issuer, audiences and options), NULL when it
 * did not (and counts it). */
const struct jwt_cached_times *jwt_cache_times(struct adm_jwt_cache *c, const struct adm_jwks *set,
                                               const struct adm_jwt_opts *opts, const char *token,
                                               size_t len);

#endif /* SY_ADMIN_JWT_INT_H */
