/*
 * jwt.h - JSON Web Token verification (RFC 7515/7519) against a JSON Web Key
 * Set (RFC 7517), for the `jwt` route policy of issue 27. Pure: no I/O, no
 * logging, no global state but the counter that numbers key sets. A JWKS
 * from an https URL is jwks_fetch.h's business (the admin loop's I/O).
 *
 * A key set is built on the admin thread (adm_jwks_parse from a JWKS
 * document, adm_jwks_add_hs256 for a shared secret), then never changes:
 * any number of workers verify against it at once without a lock. It is
 * reference counted so that consecutive snapshots can share one set; the
 * count is touched only when snapshots are built and freed, never per
 * request.
 *
 * adm_jwt_verify allocates nothing itself: the token is decoded into the
 * caller's struct adm_jwt_claims (on the worker's stack or in its
 * connection), which then answers adm_jwt_claim_str for claims_to_headers.
 * (OpenSSL's EVP calls inside may allocate.) adm_jwt_verify_cached lets a
 * worker skip the signature of a token it verified before.
 *
 * What is refused, always: alg "none"; an algorithm not in the policy's
 * set; algorithm confusion (a key is used only for the algorithms of its
 * type, and only for its own "alg" when it names one: an HS256 token is never
 * checked against an RSA or EC key's material); a "crit" header that is not
 * empty; base64url with padding or stray characters; duplicate members in
 * the header or the claims; tokens over ADM_JWT_TOKEN_MAX bytes.
 *
 * Wiring the jwt policy (issue 27's keys), as meant:
 *   - configure (admin thread): jwks_file's bytes into adm_jwks_parse (its
 *     error after the key's path); hs256_secret_file's bytes, without a
 *     final newline, into adm_jwks_add_hs256 on adm_jwks_new() or the file's
 *     set (adm_jwks_merge to combine); jwks_url checked by
 *     adm_jwks_url_check, fetched by jwks_fetch.h at run time (never at
 *     parse time), each new set merged with the policy's own keys into a
 *     new set that jwks_remote.h publishes through the policy state's
 *     pointer (a set never changes under a worker: a new one replaces it,
 *     the old one freed after a grace period); "algorithms" through
 *     adm_jwt_alg_parse into opts.algs.
 *   - per request (worker): adm_jwt_bearer on the Authorization value, then
 *     adm_jwt_verify_cached with the worker's own adm_jwt_cache against the
 *     state's current set (one acquire load); on OK,
 *     claims_to_headers from adm_jwt_claim_str (after removing the client's
 *     own copies of those headers). No token: 401 with WWW-Authenticate:
 *     Bearer realm=...; a refused one: 401 with error="invalid_token" (RFC
 *     6750 3.1), whose <why> goes to the log, not to the client; NOMEM: 503;
 *     no key fitting before a jwks_url's first set: 503 with Retry-After.
 */
#ifndef SY_ADMIN_JWT_H
#define SY_ADMIN_JWT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The algorithms, as bits of adm_jwt_opts.algs. */
enum {
    ADM_JWT_RS256 = 1u << 0,
    ADM_JWT_RS384 = 1u << 1,
    ADM_JWT_RS512 = 1u << 2,
    ADM_JWT_PS256 = 1u << 3,
    ADM_JWT_PS384 = 1u << 4,
    ADM_JWT_PS512 = 1u << 5,
    ADM_JWT_ES256 = 1u << 6,
    ADM_JWT_ES384 = 1u << 7,
    ADM_JWT_EDDSA = 1u << 8, /* Ed25519 only */
    ADM_JWT_HS256 = 1u << 9,
};
#define ADM_JWT_ALGS_ALL 0x3ffu

/* The bit of the JOSE name <name> ("RS256", "EdDSA"), or 0 when it is not one
 * of ours ("none" is never one). For the config parser's "algorithms". */
unsigned adm_jwt_alg_parse(const char *name);
/* The JOSE name of the single bit <alg>, or NULL. */
const char *adm_jwt_alg_name(unsigned alg);

/* ---- key sets ---- */

struct adm_jwks;

/* An empty key set (to which adm_jwks_add_hs256 adds a secret), or NULL when
 * out of memory. */
struct adm_jwks *adm_jwks_new(void);

/* Parses the JWKS document <json>[0..len) ({"keys": [...]}; a single JWK
 * object is accepted too). Keys: RSA (n, e), EC P-256 and P-384 (crv, x, y),
 * OKP Ed25519 (x), oct (k, for HS256). A key's "kid" and "alg" are kept;
 * a key whose "use" is not "sig" is skipped, so is a key of a type, curve or
 * alg we do not verify: skipped, not fatal. A malformed key (bad base64url,
 * a point off its curve) fails the whole document. NULL on failure, with
 * the reason (naming the key: "/keys/2/n: ...") in <err> of <cap> bytes;
 * a document with no usable key at all is a failure too, and so is one
 * over ADM_JWKS_MAX_BYTES or with more than 256 keys. */
#define ADM_JWKS_MAX_BYTES (1 << 20)
struct adm_jwks *adm_jwks_parse(const char *json, size_t len, char *err, size_t cap);

/* Adds the HS256 secret <secret>[0..len) (copied) to <set>, which must not be
 * published yet. It has no kid (see adm_jwt_verify). 0, or -1 when out of
 * memory or the secret is shorter than ADM_JWT_HS256_MIN bytes (RFC 7518
 * 3.2: a key at least as long as the hash). */
#define ADM_JWT_HS256_MIN 32
int adm_jwks_add_hs256(struct adm_jwks *set, const unsigned char *secret, size_t len);

/* Merges the keys of <from> into <into> (not published yet); <from> is
 * left as it was. 0, or -1 when out of memory. (A file set plus a URL set
 * plus a secret in one policy.) */
int adm_jwks_merge(struct adm_jwks *into, const struct adm_jwks *from);

/* The number of usable keys in <set> (0 for NULL). */
size_t adm_jwks_count(const struct adm_jwks *set);

/* Takes one more reference to <set> and returns it. */
struct adm_jwks *adm_jwks_hold(struct adm_jwks *set);
/* Drops a reference; the last one frees the set. NULL is a no-op. */
void adm_jwks_free(struct adm_jwks *set);

/* ---- verification ---- */

/* A token longer than this is refused before anything is decoded. */
#define ADM_JWT_TOKEN_MAX 8192
/* The most members of the claims object that adm_jwt_claim_str can find. */
#define ADM_JWT_CLAIMS_MAX 64

/* What a policy asks of a token. All strings are borrowed for the call. */
struct adm_jwt_opts {
    const char *issuer;           /* "iss" must equal it; NULL: not checked */
    const char *const *audiences; /* "aud" (string or array) must hold one */
    size_t naud;                  /* 0: "aud" not checked */
    unsigned algs;                /* bits of the algorithms accepted */
    long leeway_s;                /* slack on exp and nbf, in seconds */
    int require_exp;              /* a token without "exp" is refused */
};

/* The claims of a verified token: its payload decoded into <buf>, with each
 * top-level member's name and value located in it. Caller-provided (about
 * 9 KiB), filled by adm_jwt_verify, read with adm_jwt_claim_str; nothing to
 * free. Private fields: do not touch. */
struct adm_jwt_member {
    uint16_t name, name_len, val, val_len; /* offsets and lengths in buf */
    uint8_t kind;
};
struct adm_jwt_claims {
    char buf[ADM_JWT_TOKEN_MAX];
    struct adm_jwt_member m[ADM_JWT_CLAIMS_MAX];
    unsigned n;
    unsigned alg; /* the bit of the algorithm the token was verified with */
};

/* The results of adm_jwt_verify. */
enum adm_jwt_result {
    ADM_JWT_OK = 0,
    ADM_JWT_MALFORMED,     /* not three base64url parts of JSON objects, duplicate
                              members, a bad type, "crit", too large */
    ADM_JWT_ALG_REFUSED,   /* "none", unknown, or not in opts.algs */
    ADM_JWT_NO_KEY,        /* no key of the set fits (kid, type, alg) */
    ADM_JWT_BAD_SIGNATURE, /* no fitting key verifies it */
    ADM_JWT_EXPIRED,       /* exp + leeway <= now */
    ADM_JWT_NOT_YET_VALID, /* nbf - leeway > now */
    ADM_JWT_BAD_ISSUER,
    ADM_JWT_BAD_AUDIENCE,
    ADM_JWT_NO_EXP, /* opts.require_exp and no "exp" */
    ADM_JWT_NOMEM,  /* OpenSSL could not allocate: not the client's fault */
};

/* Verifies the compact JWS <token>[0..len) (without "Bearer ") against
 * <set> under <opts> at time <now> (seconds since the epoch). A NULL <set>
 * (a jwks_url not fetched yet) has no key: ADM_JWT_NO_KEY, once the token
 * is well-formed. The signature
 * is checked before any claim is trusted. The keys tried are those fitting
 * the algorithm (type, and the key's own "alg" if any): when the header has
 * a "kid", those with that kid, or if none has it, those with no kid at all;
 * without a "kid", all of them. At most ADM_JWT_TRY_MAX are tried. On ADM_JWT_OK <out> holds the
 * claims; on anything else <out> is unspecified and <*why> (when <why> is not NULL) is a static
 * sentence saying why, fit for a log line but not for the client. Thread-safe: <set> and <opts> are
 * only read. */
#define ADM_JWT_TRY_MAX 8
enum adm_jwt_result adm_jwt_verify(const struct adm_jwks *set, const struct adm_jwt_opts *opts,
                                   const char *token, size_t len, time_t now,
                                   struct adm_jwt_claims *out, const char **why);

/* ---- verified tokens, remembered ---- */

/* Verifying a signature costs 13 to 300 times what the rest of a token's
 * checks cost (loadtest/results/jwt-*.md), and clients send the same token
 * again and again until it expires: a worker remembers the tokens whose
 * signature it verified. One cache per worker, never shared (it is written
 * on every miss); direct-mapped, so its memory is fixed: <slots> entries of
 * ADM_JWT_CACHE_TOKEN_MAX bytes and a few more each. */
#define ADM_JWT_CACHE_TOKEN_MAX 2048
struct adm_jwt_cache;

/* A cache of <slots> entries (rounded up to a power of two, 1 to 65536), or
 * NULL when out of memory. */
struct adm_jwt_cache *adm_jwt_cache_new(unsigned slots);
/* NULL is a no-op. */
void adm_jwt_cache_free(struct adm_jwt_cache *c);
/* Lookups that found the token, and that did not, since the cache was made. */
void adm_jwt_cache_stats(const struct adm_jwt_cache *c, unsigned long long *hits,
                         unsigned long long *misses);

/* adm_jwt_verify, but the signature of a token that verified before under
 * the same key set (the same set object, not an equal one: a replaced set
 * starts afresh) is not checked again. Everything else is, every time:
 * size, shape, header (alg against <opts>), claims (exp, nbf, iss, aud), so
 * a remembered token still expires at its exp. With <out> NULL (the
 * claims are not wanted) a token that verified under the same key set and
 * the same options (<opts>' strings by address: a policy's own) is
 * checked against the clock alone, its exp and nbf as they were read then:
 * the rest of its verdict cannot have changed. Only fully verified tokens
 * with an exp, and at most ADM_JWT_CACHE_TOKEN_MAX bytes long, are
 * remembered. */
enum adm_jwt_result adm_jwt_verify_cached(struct adm_jwt_cache *cache, const struct adm_jwks *set,
                                          const struct adm_jwt_opts *opts, const char *token,
                                          size_t len, time_t now, struct adm_jwt_claims *out,
                                          const char **why);

/* The token of the Authorization field value <v>[0..len) when it is
 * "Bearer <token>" (RFC 6750 2.1: the scheme in any case, one or more
 * spaces, a b64token), with its length in <*tok_len>; NULL when it is
 * another scheme or not one token. */
const char *adm_jwt_bearer(const char *v, size_t len, size_t *tok_len);

/* Decodes the claims of <token>[0..len) into <out> for adm_jwt_claim_str
 * without checking anything: only for a token that adm_jwt_verify accepted
 * before (the jwt policy reads its claims again when it writes the upstream
 * head, from the same request head). 0, or -1 when it is not a JWS whose
 * payload is a JSON object. */
int adm_jwt_claims_read(const char *token, size_t len, struct adm_jwt_claims *out);

/* A static name for <r> ("expired"), for metrics and logs. */
const char *adm_jwt_result_name(enum adm_jwt_result r);

/* The value of claim <name> in <c> (filled by a successful adm_jwt_verify):
 * a string claim's text (unescaped, not NUL-terminated) or a number's or a
 * boolean's JSON text, with its length in <*len>. NULL when the claim is
 * absent, an object, an array or null, or a string holding a control
 * character or DEL (which no header value may carry), so that what it
 * returns can go into a request header as is. */
const char *adm_jwt_claim_str(const struct adm_jwt_claims *c, const char *name, size_t *len);

#endif /* SY_ADMIN_JWT_H */
