/*
 * jwt_bench.c - the cost of one JWT verification (admin/jwt.h) per
 * algorithm, and of what a cache of verified tokens would cost on a hit.
 *
 * Usage: jwt_bench [-r RUNS] [-a ALG -n N]
 *   (no -a)  every algorithm: each run verifies the same token for ~50 ms;
 *            prints ns per verification, the median of RUNS runs (default 7)
 *            with min and max, as Markdown rows
 *   -a ALG   verifies ALG's token N times between callgrind's collection
 *            toggles, after one warm-up verification; run it under
 *            valgrind --tool=callgrind --collect-atstart=no and divide the
 *            instructions by N (run.sh does)
 *
 * Keys and tokens are made by the openssl CLI (tests/admin/jwt_keys.h), the
 * claims a typical access token's. "cache hit" is adm_jwt_verify_cached
 * finding the token (everything but the signature still checked); "no
 * claims back" is the same asked as the jwt policy asks it (no claims
 * wanted: a token remembered under the same options is checked against
 * the clock only); "claims
 * only" is the verification without the signature (against an empty set:
 * it stops at "no key"), the part a cache cannot save.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include "admin/jwt.h"
#include "admin/jwt_int.h"
#include "tests/admin/jwt_keys.h"

#define NOW 1800000000L
#define SECRET "0123456789abcdef0123456789abcdef"
#define SECRET_HEX "3031323334353637383961626364656630313233343536373839616263646566"
#define CLAIMS                                                                                     \
    "{\"iss\": \"https://id.example\", \"aud\": \"api\", \"sub\": \"user-1234567\", "              \
    "\"exp\": 1800003600, \"nbf\": 1799996400, \"iat\": 1799996400, \"scope\": \"read write\", "   \
    "\"jti\": \"7d1f0e2a-3b4c-4d5e-8f90-a1b2c3d4e5f6\"}"

static const char *const auds[] = {"api"};
static const struct adm_jwt_opts opts = {.issuer = "https://id.example",
                                         .audiences = auds,
                                         .naud = 1,
                                         .algs = ADM_JWT_ALGS_ALL,
                                         .leeway_s = 30};

static const struct {
    const char *alg, *key, *kid;
} algs[] = {
    {"RS256", "rsa", "rsa"}, {"RS384", "rsa", "rsa"},     {"RS512", "rsa", "rsa"},
    {"PS256", "rsa", "rsa"}, {"ES256", "ec256", "ec256"}, {"ES384", "ec384", "ec384"},
    {"EdDSA", "ed", "ed"},   {"HS256", SECRET_HEX, NULL},
};
#define NALGS (sizeof(algs) / sizeof(algs[0]))

static struct adm_jwt_claims claims;
static volatile unsigned long sink;

static struct adm_jwks *key_set(void)
{
    char err[256], doc[16384];
    char *rsa = jk_jwk("rsa", ", \"kid\": \"rsa\""), *e2 = jk_jwk("ec256", ", \"kid\": \"ec256\"");
    char *e3 = jk_jwk("ec384", ", \"kid\": \"ec384\""), *ed = jk_jwk("ed", ", \"kid\": \"ed\"");
    struct adm_jwks *set;

    snprintf(doc, sizeof(doc), "{\"keys\": [%s, %s, %s, %s]}", rsa, e2, e3, ed);
    set = adm_jwks_parse(doc, strlen(doc), err, sizeof(err));
    if (!set || adm_jwks_add_hs256(set, (const unsigned char *)SECRET, 32) < 0) {
        fprintf(stderr, "jwt_bench: key set: %s\n", err);
        exit(1);
    }
    free(rsa);
    free(e2);
    free(e3);
    free(ed);
    return set;
}

static char *make_token(size_t i)
{
    char hdr[128];

    snprintf(hdr, sizeof(hdr), "{\"alg\": \"%s\", \"typ\": \"JWT\"%s%s%s}", algs[i].alg,
             algs[i].kid ? ", \"kid\": \"" : "", algs[i].kid ? algs[i].kid : "",
             algs[i].kid ? "\"" : "");
    return jk_token(algs[i].alg, algs[i].key, hdr, CLAIMS);
}

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* the workers' cache of verified signatures */
static struct adm_jwt_cache *cache;

/* ---- runs ---- */

enum what { VERIFY, CACHE_HIT, CACHE_CLOCK, CLAIMS_ONLY };

static int one(const struct adm_jwks *set, const char *tok, size_t len, enum what w)
{
    if (w == CACHE_HIT)
        return adm_jwt_verify_cached(cache, set, &opts, tok, len, NOW, &claims, NULL) == ADM_JWT_OK
                   ? 0
                   : -1;
    if (w == CACHE_CLOCK) /* what the jwt policy asks: no claims back */
        return adm_jwt_verify_cached(cache, set, &opts, tok, len, NOW, NULL, NULL) == ADM_JWT_OK
                   ? 0
                   : -1;
    if (w == CLAIMS_ONLY) {
        /* the set without the key: NO_KEY once header and claims are parsed */
        struct adm_jwt_opts o = opts;
        return adm_jwt_verify(set, &o, tok, len, NOW, &claims, NULL) == ADM_JWT_NO_KEY ? 0 : -1;
    }
    return adm_jwt_verify(set, &opts, tok, len, NOW, &claims, NULL) == ADM_JWT_OK ? 0 : -1;
}

/* ns per operation over <iters> operations. */
static double run(const struct adm_jwks *set, const char *tok, enum what w, long iters)
{
    size_t len = strlen(tok);
    double t0 = now_ns();

    for (long i = 0; i < iters; i++)
        if (one(set, tok, len, w) < 0) {
            fprintf(stderr, "jwt_bench: a verification failed\n");
            exit(1);
        }
    sink += claims.n;
    return (now_ns() - t0) / (double)iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void row(const char *name, const struct adm_jwks *set, const char *tok, enum what w,
                int runs)
{
    double ns[32];
    long iters = 1;

    /* calibrate to ~50 ms a run */
    while (run(set, tok, w, iters) * (double)iters < 5e6)
        iters *= 2;
    iters *= 10;
    for (int r = 0; r < runs; r++)
        ns[r] = run(set, tok, w, iters);
    qsort(ns, (size_t)runs, sizeof(ns[0]), cmp_double);
    printf("| %s | %.0f | %.0f / %.0f | %.0f | %zu |\n", name, ns[runs / 2], ns[0], ns[runs - 1],
           1e9 / ns[runs / 2], strlen(tok));
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    long n = 1000;
    int runs = 7, opt;
    struct adm_jwks *set, *empty;
    char *toks[NALGS];

    while ((opt = getopt(argc, argv, "r:a:n:")) != -1) {
        if (opt == 'r')
            runs = atoi(optarg);
        else if (opt == 'a')
            only = optarg;
        else if (opt == 'n')
            n = atol(optarg);
        else
            return 2;
    }
    if (runs < 1 || runs > 32 || n < 1)
        return 2;
    jk_keys();
    set = key_set();
    empty = adm_jwks_new();
    cache = adm_jwt_cache_new(64);
    for (size_t i = 0; i < NALGS; i++)
        toks[i] = make_token(i);
    if (only) {
        for (size_t i = 0; i < NALGS; i++) {
            size_t len = strlen(toks[i]);
            const char *what = strchr(only, ':');
            enum what w = !what                               ? VERIFY
                          : strcmp(what, ":cache") == 0       ? CACHE_HIT
                          : strcmp(what, ":cache-clock") == 0 ? CACHE_CLOCK
                                                              : CLAIMS_ONLY;

            if (strncmp(only, algs[i].alg, what ? (size_t)(what - only) : strlen(only)) != 0)
                continue;
            if (one(w == CLAIMS_ONLY ? empty : set, toks[i], len, w) < 0)
                return 1;
            CALLGRIND_TOGGLE_COLLECT;
            for (long k = 0; k < n; k++)
                one(w == CLAIMS_ONLY ? empty : set, toks[i], len, w);
            CALLGRIND_TOGGLE_COLLECT;
            printf("%s %ld\n", only, n);
            break;
        }
    } else {
        printf("| algorithm | ns/verify (median) | min / max | verifies/s (1 core) | token bytes "
               "|\n|---|---:|---|---:|---:|\n");
        for (size_t i = 0; i < NALGS; i++)
            row(algs[i].alg, set, toks[i], VERIFY, runs);
        row("cache hit (RS256 token)", set, toks[0], CACHE_HIT, runs);
        row("cache hit, no claims back (RS256 token)", set, toks[0], CACHE_CLOCK, runs);
        row("claims only (no signature)", empty, toks[0], CLAIMS_ONLY, runs);
    }
    for (size_t i = 0; i < NALGS; i++)
        free(toks[i]);
    adm_jwks_free(set);
    adm_jwks_free(empty);
    adm_jwt_cache_free(cache);
    {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", jk_dir);
        return system(cmd) == 0 ? 0 : 1;
    }
}
