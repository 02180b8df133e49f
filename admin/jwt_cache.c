/*
 * jwt_cache.c - a worker's memory of the tokens whose signature it verified
 * (adm_jwt_verify_cached, jwt.h): a direct-mapped table keyed by the whole
 * token and the key set's id. A slot holds the token itself, so a lookup
 * is a hash, a length and a memcmp: two tokens never share an entry, and a
 * colliding one merely replaces it. The hash is seeded per cache, so that
 * nobody outside can aim tokens at one slot (and only tokens that verified
 * are ever stored).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "admin/jwt.h"
#include "admin/jwt_int.h"

#define CACHE_SLOTS_MAX 65536u

struct cache_slot {
    uint64_t hash;
    uint64_t set_id; /* 0: empty (set ids start at 1) */
    size_t len;
    /* the options it verified under, and what its claims' times said */
    struct adm_jwt_opts opts;
    struct jwt_cached_times times;
    char token[ADM_JWT_CACHE_TOKEN_MAX];
};

struct adm_jwt_cache {
    uint64_t seed;
    unsigned mask;
    unsigned long long hits, misses;
    struct cache_slot slots[];
};

struct adm_jwt_cache *adm_jwt_cache_new(unsigned slots)
{
    unsigned n = 1;
    struct adm_jwt_cache *c;

    while (n < slots && n < CACHE_SLOTS_MAX)
        n *= 2;
    c = calloc(1, sizeof(*c) + n * sizeof(c->slots[0]));
    if (!c)
        return NULL;
    c->mask = n - 1;
    if (RAND_bytes((unsigned char *)&c->seed, sizeof(c->seed)) != 1)
        c->seed =
            (uint64_t)(uintptr_t)c * 0x9e3779b97f4a7c15ull; /* still not guessable from outside */
    return c;
}

void adm_jwt_cache_free(struct adm_jwt_cache *c)
{
    free(c);
}

void adm_jwt_cache_stats(const struct adm_jwt_cache *c, unsigned long long *hits,
                         unsigned long long *misses)
{
    *hits = c->hits;
    *misses = c->misses;
}

/* FNV-1a from the cache's seed over the length and the last 32 bytes, which
 * are the signature's: what tells tokens apart. Hashing all of a token cost
 * a microsecond (FNV's multiplications wait on each other); memcmp settles
 * the rest. */
static uint64_t token_hash(const struct adm_jwt_cache *c, const char *token, size_t len)
{
    uint64_t h = (14695981039346656037ull ^ c->seed ^ len) * 1099511628211ull;

    for (size_t i = len > 32 ? len - 32 : 0; i < len; i++)
        h = (h ^ (unsigned char)token[i]) * 1099511628211ull;
    return h ^ h >> 29;
}

/* The slot holding <token> verified under <set>, or NULL. */
static const struct cache_slot *lookup(const struct adm_jwt_cache *c, const struct adm_jwks *set,
                                       const char *token, size_t len)
{
    uint64_t h;
    const struct cache_slot *s;

    if (len > ADM_JWT_CACHE_TOKEN_MAX)
        return NULL;
    h = token_hash(c, token, len);
    s = &c->slots[h & c->mask];
    return s->hash == h && s->set_id == set->id && s->len == len &&
                   memcmp(s->token, token, len) == 0
               ? s
               : NULL;
}

int jwt_cache_find(struct adm_jwt_cache *c, const struct adm_jwks *set, const char *token,
                   size_t len)
{
    if (lookup(c, set, token, len)) {
        c->hits++;
        return 1;
    }
    c->misses++;
    return 0;
}

void jwt_cache_put(struct adm_jwt_cache *c, const struct adm_jwks *set,
                   const struct adm_jwt_opts *opts, const char *token, size_t len,
                   const struct jwt_cached_times *t)
{
    uint64_t h;
    struct cache_slot *s;

    if (len > ADM_JWT_CACHE_TOKEN_MAX)
        return;
    h = token_hash(c, token, len);
    s = &c->slots[h & c->mask];
    s->hash = h;
    s->set_id = set->id;
    s->len = len;
    s->opts = *opts;
    s->times = *t;
    memcpy(s->token, token, len);
}

/* Whether options <a> and <b> are the same: the strings by address (a
 * policy's own, which live as long as its caches). */
static int same_opts(const struct adm_jwt_opts *a, const struct adm_jwt_opts *b)
{
    return a->issuer == b->issuer && a->audiences == b->audiences && a->naud == b->naud &&
           a->algs == b->algs && a->leeway_s == b->leeway_s && a->require_exp == b->require_exp;
}

const struct jwt_cached_times *jwt_cache_times(struct adm_jwt_cache *c, const struct adm_jwks *set,
                                               const struct adm_jwt_opts *opts, const char *token,
                                               size_t len)
{
    const struct cache_slot *s = lookup(c, set, token, len);

    if (!s || !same_opts(&s->opts, opts))
        return NULL; /* the full path looks it up again, and counts the miss */
    c->hits++;
    return &s->times;
}
