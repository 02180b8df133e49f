/*
 * policy_basic.c - the "basic" type on a worker: the Authorization
 * field's Basic credentials checked with libcrypt's crypt_r against the
 * htpasswd hash (admin/policy_basic.c); 401 with WWW-Authenticate: Basic
 * realm="...", charset="UTF-8" otherwise.
 *
 * Time says nothing about who exists: an unknown user's password is
 * checked against a real hash of the file (of its users' most common
 * algorithm and cost) and then refused, so it costs what a wrong password
 * costs, and hashes are compared in constant time. A bcrypt check at cost 10 takes tens of
 * milliseconds, during which this worker's loop serves nothing else: so
 * each worker remembers the last ADM_BASIC_CACHE Authorization values it
 * verified (their SHA-256, never the password) for cache_ttl_s. Failures
 * are never remembered: put a rate_limit before a basic policy on a route
 * that guessing could reach.
 *
 * The credentials stay here (nginx's auth_basic with proxy_set_header
 * Authorization ""): the upstream gets the user's name in user_header,
 * and a client's own copies of that field are dropped.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "gateway/local.h"
#include "gateway/policy.h"

#include <crypt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define MAX_B64 1368 /* 1 KiB of user:password */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The base64 of "Basic <b64>" in <v>, or NULL. */
static const char *basic_token(const struct h1_slice *v, size_t *n)
{
    const char *s = v->ptr, *e = v->ptr + v->len;

    if (v->len < 6 || !h1_ci_eq(s, 5, "basic") || (s[5] != ' ' && s[5] != '\t'))
        return NULL;
    for (s += 6; s < e && (*s == ' ' || *s == '\t'); s++)
        ;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *n = (size_t)(e - s);
    return *n && *n <= MAX_B64 && *n % 4 == 0 ? s : NULL;
}

/* The user whose hash <pass> matches, or -1: every name compared, and one
 * crypt_r whatever the name. */
static int verify(const struct adm_basic_conf *c, struct crypt_data *cd, const char *user,
                  size_t ulen, const char *pass)
{
    int idx = -1, ok;
    const char *hash, *out;

    for (size_t i = 0; i < c->nusers; i++) {
        int eq = strlen(c->users[i].name) == ulen && !memcmp(c->users[i].name, user, ulen);
        idx = eq && idx < 0 ? (int)i : idx;
    }
    hash = idx >= 0 ? c->users[idx].hash : c->dummy;
    memset(cd, 0, sizeof(cd->initialized));
    out = crypt_r(pass, hash, cd);
    ok = out && out[0] != '*' && strlen(out) == strlen(hash) &&
         CRYPTO_memcmp(out, hash, strlen(hash)) == 0;
    return ok ? idx : -1;
}

/* The user of the Basic credentials <v> (the Authorization value), or -1. */
static int check(const struct adm_basic_conf *c, struct adm_basic_cache *k, unsigned w,
                 const struct h1_slice *v)
{
    struct adm_basic_entry *e = &k->e[(size_t)w * ADM_BASIC_CACHE];
    unsigned char sha[32], dec[MAX_B64];
    uint64_t now = now_ns();
    const char *b64, *colon;
    size_t n, dlen;
    int user, d;

    if (!(b64 = basic_token(v, &n)))
        return -1;
    if (adm_sha256(k->sha, w, v->ptr, v->len, sha) < 0)
        return -1;
    /* a digest's first 8 bytes pick the candidate (they say nothing an
     * attacker could steer), the whole digest confirms it */
    for (size_t i = 0; i < ADM_BASIC_CACHE; i++)
        if (!memcmp(e[i].sha256, sha, 8) && e[i].until > now &&
            CRYPTO_memcmp(e[i].sha256, sha, 32) == 0)
            return (int)e[i].user;
    if (!k->scratch[w] && !(k->scratch[w] = calloc(1, sizeof(struct crypt_data))))
        return -1;
    if ((d = EVP_DecodeBlock(dec, (const unsigned char *)b64, (int)n)) < 0)
        return -1;
    dlen = (size_t)d - (b64[n - 1] == '=') - (b64[n - 2] == '=');
    dec[dlen] = '\0';
    colon = memchr(dec, ':', dlen);
    if (!colon || memchr(dec, '\0', dlen)) { /* a NUL would cut the password */
        OPENSSL_cleanse(dec, dlen);
        return -1;
    }
    user = verify(c, k->scratch[w], (const char *)dec, (size_t)(colon - (char *)dec), colon + 1);
    OPENSSL_cleanse(dec, dlen);
    OPENSSL_cleanse(k->scratch[w], sizeof(struct crypt_data));
    if (user >= 0 && c->cache_ttl_s) { /* the oldest entry makes room */
        size_t old = 0;
        for (size_t i = 1; i < ADM_BASIC_CACHE; i++)
            if (e[i].until < e[old].until)
                old = i;
        memcpy(e[old].sha256, sha, 32);
        e[old].user = (size_t)user;
        e[old].until = now + (uint64_t)c->cache_ttl_s * 1000000000u;
    }
    return user;
}

static int basic_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    const struct adm_basic_conf *c = p->conf;
    const struct h1_request *rq = &r->rp->req;
    unsigned w = r->c->w->id;
    int user = -1;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_slice *n = &rq->headers[i].name;
        if (n->len == 13 && h1_name_is(n, "authorization")) {
            user = check(c, p->state, w, &rq->headers[i].value);
            break;
        }
    }
    if (user < 0) {
        gw_local_simple(r, 401, c->challenge, c->challenge_len);
        gw_local_finish(r);
        return GW_POL_ANSWERED;
    }
    *val = (uint64_t)user;
    return GW_POL_NEXT;
}

static void basic_upstream(const struct adm_spolicy *p, const struct h1_request *rq, uint64_t val,
                           struct gw_obuf *o)
{
    (void)rq;
    const struct adm_basic_conf *c = p->conf;
    const char *name = c->users[val].name;

    gw_ob_field(o, c->user_header, c->user_header_len, name, strlen(name));
}

static int basic_drops(const struct adm_spolicy *p, const struct h1_slice *name)
{
    const struct adm_basic_conf *c = p->conf;

    return gw_policy_field_is(name, "authorization", 13) ||
           gw_policy_field_is(name, c->user_header, c->user_header_len);
}

const struct gw_policy_ops gw_policy_basic = {
    .request = basic_request,
    .upstream = basic_upstream,
    .drops = basic_drops,
};
