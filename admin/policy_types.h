/*
 * policy_types.h - each policy type's compiled definition and pure logic,
 * one file each: policy_rate_limit.c (GCRA and its shared table),
 * policy_cors.c (origins, pre-encoded fields), policy_api_key.c (hashed
 * keys), policy_basic.c (htpasswd users), policy_jwt.c (a JWT policy's keys
 * and checks), policy_compress.c (codings, types, levels),
 * policy_forward_auth.c (the pool, path and fields of an auth
 * subrequest). The kinds table (config_policies.c) holds their configure
 * and free; the worker side is gateway/policy_<type>.c.
 */
#ifndef SY_ADMIN_POLICY_TYPES_H
#define SY_ADMIN_POLICY_TYPES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/types.h>

#include "admin/jwt.h"
#include "admin/http1/coding.h"
#include "admin/policy.h"

/* ---- SHA-256 on a worker ---- */

/* One digest context per worker, made on the admin thread with the
 * algorithm fetched once: a digest on a worker neither fetches nor
 * allocates (OpenSSL's one-shot SHA256() does both). */
struct adm_sha {
    unsigned n;
    EVP_MD *md;
    EVP_MD_CTX **ctx; /* n, each used by its worker only */
};

struct adm_sha *adm_sha_new(unsigned nworkers);
void adm_sha_free(struct adm_sha *s);
/* SHA-256 of <n> bytes at <p> into <out> with worker <w>'s context (<s>
 * NULL: the one-shot function, for tests). 0, or -1. */
int adm_sha256(const struct adm_sha *s, unsigned w, const void *p, size_t n, unsigned char out[32]);

/* Reads header name <v> (a token, not a hop-by-hop, framing or Proxy-*
 * field: refused at x's path) into *<out> in lower case, and its length
 * into *<len>; a name already there is freed. */
void adm_pol_header_name(struct adm_cf *x, const json_t *v, char **out, size_t *len);

/* Whether header <name> is one the gateway writes itself (X-Forwarded-*,
 * X-Real-IP, X-Request-Id, Forwarded, Via, Host) or names credentials
 * (Authorization, Proxy-*), or is hop-by-hop: a policy that sets fields
 * from what it verified (jwt's claims, forward_auth's answer) may write
 * none of them. */
int adm_pol_header_owned(const char *name);

/* ---- rate_limit ---- */

/* What a part of the key is made of ("key"). */
enum adm_rl_part_kind {
    ADM_RLK_CLIENT_IP, /* "client_ip": the derived client address */
    ADM_RLK_HEADER,    /* "header:NAME": the first such field's value ("" without one) */
    ADM_RLK_PARAM,     /* "param:NAME": the route's parameter ("" without one) */
    ADM_RLK_ROUTE,     /* "route": the route's id */
};

struct adm_rl_part {
    enum adm_rl_part_kind kind;
    char *name; /* HEADER: lower case; PARAM: as the pattern writes it; else NULL */
    size_t len;
};

#define ADM_RL_MAX_PARTS 4

struct adm_rl_conf {
    unsigned rate, per_ms, burst, max_keys;
    uint64_t t_ns;     /* the emission interval: per_ms / rate */
    uint64_t limit_ns; /* (burst + 1) * t_ns: how far past now the TAT may run */
    struct adm_rl_part key[ADM_RL_MAX_PARTS];
    size_t nkey;
    char *name;   /* the policy's, quoted in the fields */
    char *policy; /* "RateLimit-Policy: \"NAME\";q=Q;w=W\r\n" */
    size_t policy_len;
};

/* One key's theoretical arrival time (GCRA), 0: free. <key> is the key's
 * 64-bit hash (never 0). */
struct adm_rl_slot {
    _Atomic uint64_t key;
    _Atomic uint64_t tat; /* ns on CLOCK_MONOTONIC */
};

/* Counters of one worker (a single writer each). */
struct adm_rl_wctr {
    _Atomic uint64_t allowed, limited, evictions;
    char pad[64 - 3 * sizeof(uint64_t)];
};

/* A policy's table, shared by every worker: max_keys slots, no lock. */
struct adm_rl_table {
    size_t cap; /* = max_keys */
    unsigned nworkers;
    struct adm_rl_wctr *ctr; /* nworkers */
    struct adm_rl_slot *slots;
};

/* What one request got. */
struct adm_rl_verdict {
    int allowed;
    uint64_t remaining; /* requests that would pass now after this one */
    uint64_t reset_s;   /* seconds until the key is back to its full burst */
    uint64_t retry_s;   /* refused: seconds until one would pass (at least 1) */
};

void *adm_rl_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_rl_conf_free(void *conf);
void *adm_rl_table_new(const void *conf, unsigned nworkers);
void adm_rl_table_free(void *state);
/* GCRA on one TAT at time <now> (ns): one compare-and-swap loop. */
void adm_rl_gcra(_Atomic uint64_t *tat, const struct adm_rl_conf *c, uint64_t now,
                 struct adm_rl_verdict *v);
/* One request of key hash <key> (0 is taken as 1) at <now> by worker <w>:
 * the key's slot found or claimed within a bounded probe (an empty or
 * expired slot, else the one whose TAT is oldest, evicting it), then
 * adm_rl_gcra. Never allocates. */
void adm_rl_take(struct adm_rl_table *t, const struct adm_rl_conf *c, uint64_t key, uint64_t now,
                 unsigned w, struct adm_rl_verdict *v);
/* Keys whose TAT is still ahead of <now>: the ones the table remembers. */
size_t adm_rl_keys(const struct adm_rl_table *t, uint64_t now);
/* Sums of the workers' counters. */
void adm_rl_counts(const struct adm_rl_table *t, uint64_t *allowed, uint64_t *limited,
                   uint64_t *evictions);

/* ---- cors ---- */

struct adm_cors_conf {
    char **origins; /* exact, or with one leading wildcard label */
    size_t norigins;
    int any;         /* "*" among them: every origin */
    int credentials; /* Access-Control-Allow-Credentials: true */
    char *pre;       /* a preflight's fields after Access-Control-Allow-Origin */
    size_t pre_len;
    char *act; /* an answer's fields after Access-Control-Allow-Origin */
    size_t act_len;
};

void *adm_cors_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_cors_conf_free(void *conf);
/* Whether Origin value <o> (<n> bytes) is allowed. */
int adm_cors_origin_ok(const struct adm_cors_conf *c, const char *o, size_t n);

/* ---- api_key ---- */

struct adm_ak_key {
    char *name;
    unsigned char sha256[32];
};

struct adm_ak_conf {
    struct adm_ak_key *keys;
    size_t nkeys;
    uint32_t *tab;  /* open addressing over the digests' first 8 bytes: index + 1, 0 free */
    size_t tab_cap; /* a power of two, at least twice nkeys */
    char *header;   /* lower case; NULL: none */
    size_t header_len;
    char *query; /* the query parameter's name; NULL: none */
    size_t query_len;
    char *consumer; /* consumer_header; NULL: none */
    size_t consumer_len;
    char *challenge; /* "WWW-Authenticate: ApiKey realm=\"NAME\"\r\n" */
    size_t challenge_len;
};

void *adm_ak_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_ak_conf_free(void *conf);
/* Its state: an adm_sha. */
void *adm_ak_state_new(const void *conf, unsigned nworkers);
void adm_ak_state_free(void *state);
/* The key whose SHA-256 is that of <key> (<n> bytes), hashed with worker
 * <w>'s context of <sha> (may be NULL): its index (the first given of
 * equal ones), or -1. Found through the table (the digest comes from the
 * client's bytes, so where it lands says nothing of the stored keys),
 * the candidate confirmed in constant time. */
int adm_ak_find(const struct adm_ak_conf *c, const struct adm_sha *sha, unsigned w, const char *key,
                size_t n);
/* Parses a keys_file's text (lines "name:sha256hex", '#' comments and
 * blank lines skipped) into <c>; 0, or -1 with the line number in <why>. */
int adm_ak_parse_file(struct adm_ak_conf *c, const char *text, size_t len, char *why, size_t cap);

/* ---- basic ---- */

struct adm_basic_user {
    char *name;
    char *hash; /* "$2y$..." / "$2b$..." (bcrypt) or "$y$..." (yescrypt) */
};

#define ADM_BASIC_CACHE 64 /* verified credentials a worker remembers */

struct adm_basic_conf {
    struct adm_basic_user *users;
    size_t nusers;
    const char *dummy; /* a user's hash: what an unknown user is checked against */
    char *user_header; /* the user's name upstream (lower case; default x-user) */
    size_t user_header_len;
    unsigned cache_ttl_s; /* how long a verified Authorization value is trusted (0: never) */
    char *challenge;      /* "WWW-Authenticate: Basic realm=\"...\", charset=\"UTF-8\"\r\n" */
    size_t challenge_len;
};

/* One worker's remembered credentials: SHA-256 of the Authorization
 * value, the user, until when (ns, CLOCK_MONOTONIC). */
struct adm_basic_entry {
    unsigned char sha256[32];
    size_t user;
    uint64_t until;
};

/* A policy's caches, one per worker (each touched by its worker only),
 * and each worker's crypt_r scratch (struct crypt_data, 32 KiB). */
struct adm_basic_cache {
    unsigned nworkers;
    struct adm_sha *sha;
    struct adm_basic_entry *e; /* nworkers * ADM_BASIC_CACHE */
    void **scratch;            /* nworkers, allocated by their worker when first needed */
};

void *adm_basic_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_basic_conf_free(void *conf);
void *adm_basic_cache_new(const void *conf, unsigned nworkers);
void adm_basic_cache_free(void *state);
/* Parses an htpasswd text ("user:hash" lines, '#' comments) into <c>;
 * 0, or -1 with the line and why in <why>. Only bcrypt and yescrypt
 * hashes are taken. */
int adm_basic_parse_file(struct adm_basic_conf *c, const char *text, size_t len, char *why,
                         size_t cap);

/* ---- jwt ---- */

/* One claims_to_headers entry: the claim's value goes up in the header. */
struct adm_jwt_hdr {
    char *claim;
    char *header; /* as written */
    size_t header_len;
};

#define ADM_JWT_MAX_HEADERS 16
#define ADM_JWT_LEEWAY_MAX 600
#define ADM_JWT_CACHE_SLOTS 256 /* a worker's verified tokens, each policy */

struct adm_jwt_conf {
    struct adm_jwks *set; /* one reference: jwks_file's keys and the secret; NULL: none */
    /* jwks_url (NULL: none), fetched by the admin thread (jwks_remote.h);
     * fetch_key names its fetcher: the URL and jwks_ca_file's digest */
    char *url, *fetch_key;
    struct stack_st_X509 *cas; /* jwks_ca_file's certificates; NULL: the system's store */
    unsigned refresh_s;        /* jwks_refresh_s */
    unsigned timeout_ms;       /* jwks_timeout_ms */
    char *issuer;
    char **audiences;
    size_t naud;
    struct adm_jwt_opts opts; /* points into issuer and audiences */
    struct adm_jwt_hdr *hdrs;
    size_t nhdrs;
    char *realm;    /* for WWW-Authenticate: realm="..." */
    int drop_token; /* forward_token false: Authorization stays here */
};

struct adm_rjwks_sub;

/* Its state: one verified-token cache a worker, each made by its worker
 * the first time it needs it (adm_jwt_cache_new) and freed with the
 * state, on the admin thread, once no snapshot holds the policy.
 *
 * <keys> is the set its workers verify against (one reference): conf->set
 * as long as the policy has no jwks_url, or until the URL's first good
 * set; from then on a new set, conf->set's keys and the URL's together,
 * each time the URL brings other keys, stored by the admin thread
 * (jwks_remote.c) with a release store and read by a worker with one
 * acquire load per verification. A replaced set is freed only once every
 * worker has acknowledged a publication made after the store (the
 * snapshots' grace period, adm_swap_fence), so a worker that loaded it
 * has finished with it. Each set has its own id, which the token caches
 * key on: a token remembered under the old set is verified again under
 * the new one, and refused when its key is gone. */
struct adm_jwt_state {
    unsigned nworkers;
    struct adm_jwt_cache **cache;
    _Atomic(struct adm_jwks *) keys;
    /* set by a worker when a token named a kid that <keys> lacks: the
     * admin thread then fetches the URL early (at most once in
     * ADM_RJWKS_EARLY_S) and clears it */
    atomic_int want_fetch;
    struct adm_rjwks_sub *sub; /* admin thread: its jwks_url's fetcher; NULL: none */
};

/* What keeps the sets of the jwks_url of the jwt policies: the admin
 * thread's jwks_remote.c registers it when it starts. A state with a
 * jwks_url attaches (before any worker sees it; <keys> may be replaced
 * then, or -1 when out of memory) and detaches when it is freed. Through
 * this seam the config parser links without the admin loop (the config
 * fuzzer); NULL (--check, unit tests): nothing is fetched. */
struct adm_jwtp_remote {
    int (*attach)(struct adm_jwt_state *s, const struct adm_jwt_conf *c);
    void (*detach)(struct adm_jwt_state *s);
};
void adm_jwtp_set_remote(const struct adm_jwtp_remote *r);

void *adm_jwtp_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_jwtp_conf_free(void *conf);
void *adm_jwtp_state_new(const void *conf, unsigned nworkers);
void adm_jwtp_state_free(void *state);

/* ---- compress ---- */

#define ADM_CZ_MAX_TYPES 64

/* What gateway/encoding.h's struct gw_enc_rules is built from (the
 * codings are enum h1_coding, which enum gw_coding mirrors). */
struct adm_cz_conf {
    int order[H1_CODING_COUNT]; /* the server's preference, "encodings" */
    size_t ncodings;
    int level[H1_CODING_COUNT]; /* by coding */
    char **types;               /* lower case: "type/subtype" or "type/ *" (no space) */
    size_t ntypes;
    uint64_t min_length;
};

void *adm_cz_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_cz_conf_free(void *conf);

/* ---- forward_auth ---- */

#define ADM_FA_MAX_FIELDS 32     /* names in request_headers, and in response_headers */
#define ADM_FA_TIMEOUT_MS 1000   /* timeout_ms's default */
#define ADM_FA_TIMEOUT_MAX 60000 /* and its largest */
#define ADM_FA_PATH_MAX 1024

/* A field name, lower case. */
struct adm_fa_name {
    char *name;
    size_t len;
};

struct adm_fa_conf {
    char *upstream; /* the pool's name */
    size_t up;      /* its index in the config's upstreams (adm_fa_check) */
    char *path;     /* origin-form: '/', then visible ASCII but '#' */
    size_t path_len;
    struct adm_fa_name req[ADM_FA_MAX_FIELDS]; /* copied from the client's request */
    size_t nreq;
    int all_req; /* no request_headers: every end-to-end field of the client's */
    struct adm_fa_name resp[ADM_FA_MAX_FIELDS]; /* copied from a 2xx answer upstream */
    size_t nresp;
    unsigned timeout_ms; /* the whole subrequest: connect, send, answer */
};

/* Counters of one worker (a single writer each). */
struct adm_fa_wctr {
    _Atomic uint64_t allowed, denied, errors, timeouts;
    char pad[64 - 4 * sizeof(uint64_t)];
};

/* Its state: the workers' counters. */
struct adm_fa_state {
    unsigned nworkers;
    struct adm_fa_wctr *ctr;
};

void *adm_fa_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p);
void adm_fa_conf_free(void *conf);
/* Resolves "upstream" against the config's pools (an HTTP/1.1 one),
 * once every section is read; the pool's index joins the identity, since
 * the conf keeps it. */
void adm_fa_check(struct adm_cf *x, struct adm_policy *p);
void *adm_fa_state_new(const void *conf, unsigned nworkers);
void adm_fa_state_free(void *state);
/* Sums of the workers' counters into v[0..4): allowed, denied, errors,
 * timeouts. */
void adm_fa_counts(const struct adm_fa_state *s, uint64_t v[4]);

#endif
