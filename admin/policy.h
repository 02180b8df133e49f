/*
 * policy.h - route policies, the config side: named policies at the top
 * level ("policies": {"NAME": {"type": ..., ...}}), referenced in order
 * from routes ("policies": ["NAME", ...]).
 *
 * A policy type is a row of the kinds table (config_policies.c) with its
 * ops: configure (admin thread: the JSON object into the type's compiled
 * definition, errors at their JSON paths), free, and optionally a runtime
 * state shared by every worker (a rate limit's table) that a later
 * snapshot takes over while the policy's definition stays the same. The
 * worker side of each type (what it does to a request and its answer) is
 * gateway/policy.h. Each type's definition is its own file:
 * policy_rate_limit.c, policy_cors.c, policy_api_key.c, policy_basic.c, policy_jwt.c,
 * policy_compress.c, policy_forward_auth.c.
 *
 * Nothing here does I/O but reading the files a policy names at parse
 * time (as every config key that names a file does).
 */
#ifndef SY_ADMIN_POLICY_H
#define SY_ADMIN_POLICY_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>

#include "admin/http1/coding.h"

#define ADM_POL_MAX 8       /* policies one route names */
#define ADM_POL_MAX_ALL 255 /* policies in a config: a route's indexes are bytes */
#define ADM_POL_MAX_NAME 64 /* a policy's name: [A-Za-z0-9_.-]+ */

/* The types, in the order of the kinds table. */
enum adm_pol_type {
    ADM_POL_RATE_LIMIT = 0, /* "rate_limit": policy_rate_limit.c */
    ADM_POL_CORS,           /* "cors": policy_cors.c */
    ADM_POL_API_KEY,        /* "api_key": policy_api_key.c */
    ADM_POL_BASIC,          /* "basic": policy_basic.c */
    ADM_POL_JWT,            /* "jwt": policy_jwt.c */
    ADM_POL_COMPRESS,       /* "compress": policy_compress.c */
    ADM_POL_FORWARD_AUTH,   /* "forward_auth": policy_forward_auth.c */
    ADM_POL_NTYPES,
};

/* One entry of the top-level "policies" object, as parsed. */
struct adm_policy {
    char *name;
    int type;      /* enum adm_pol_type; -1 when its type was refused */
    void *conf;    /* the type's compiled definition (NULL after an error); a
                    * snapshot takes it over (adm_spolicy) */
    uint64_t hash; /* its definition's identity: the JSON and any file it read */
};

struct adm_cf;
struct adm_config;

/* A policy type's config ops. */
struct adm_pol_kind {
    const char *name; /* the "type" value */
    int auth;         /* an authentication kind: at most one on a route */
    int body;         /* it transforms the response body: at most one on a route */
    /* Reads the policy object <v> (at x->path; its "type" is already read)
     * of policy <p> into a new definition; NULL after reporting every
     * problem at its path. May add the bytes of a file it read to
     * p->hash (adm_pol_hash_add) so that a changed file is a changed
     * policy. */
    void *(*configure)(struct adm_cf *x, const json_t *v, struct adm_policy *p);
    void (*free)(void *conf);
    /* The state its workers share, made when a snapshot first holds the
     * policy (NULL: out of memory); NULL op: none. <nworkers> counters. */
    void *(*state_new)(const void *conf, unsigned nworkers);
    void (*state_free)(void *state);
    /* Checks what <p> names in other sections once every section is read
     * (at the path of <p>); NULL op: it names none. */
    void (*check)(struct adm_cf *x, struct adm_policy *p);
};

/* The kinds table, indexed by enum adm_pol_type. */
extern const struct adm_pol_kind adm_pol_kinds[ADM_POL_NTYPES];

/* Mixes <n> bytes at <s> into the identity of <p>. */
void adm_pol_hash_add(struct adm_policy *p, const void *s, size_t n);

/* What became of a request a policy's request phase saw: let through, or
 * answered with one of these statuses (a rate limit's 429, an
 * authentication's 401 or 403, a preflight's 204, a forward_auth's 500 or
 * 503), or another. */
enum adm_pol_result {
    ADM_POLR_PASSED,
    ADM_POLR_200,
    ADM_POLR_204,
    ADM_POLR_401,
    ADM_POLR_403,
    ADM_POLR_429,
    ADM_POLR_500,
    ADM_POLR_503,
    ADM_POLR_OTHER,
    ADM_POLR_N
};
/* The label of each result in /metrics ("passed", "401", ...). */
extern const char *const adm_pol_result_names[ADM_POLR_N];
/* The result of an answer of <status>. */
enum adm_pol_result adm_pol_result_of(int status);

/* One worker's counts of one policy's results (a single writer each, on a
 * cache line of its own). */
struct adm_pol_wctr {
    _Alignas(64) _Atomic uint64_t n[ADM_POLR_N];
    /* a compress policy's: responses it encoded, by enum h1_coding
     * (admin/http1/coding.h; [0] unused), and the body bytes it took in
     * and gave out */
    _Atomic uint64_t coded[H1_CODING_COUNT], bytes_in, bytes_out;
};

/* A policy as a snapshot holds it: shared by the snapshots whose policy
 * of that name has the same identity, so that its state (a rate limit's
 * table, its counters) survives a push (refs: admin thread only). */
struct adm_spolicy {
    unsigned refs;
    int type;
    char *name;
    uint64_t hash;
    void *conf;  /* owned: adm_pol_kinds[type].free */
    void *state; /* owned: adm_pol_kinds[type].state_free; NULL: none */
    /* each worker's counts of the results (/metrics
     * switchyard_policy_requests_total), kept with the state */
    struct adm_pol_wctr *ctr;
    unsigned nworkers;
};

/* The sums over the workers of <sp>'s counts, into v[ADM_POLR_N]. */
void adm_spolicy_counts(const struct adm_spolicy *sp, uint64_t *v);
/* The same of a compress policy's: coded[H1_CODING_COUNT], bytes in and
 * out. */
void adm_spolicy_coded(const struct adm_spolicy *sp, uint64_t coded[H1_CODING_COUNT], uint64_t *in,
                       uint64_t *out);

/* Whether configs <a> and <b> define the same policies (names, types and
 * identities, files included): an identical document pushed again is a
 * change when a file one of its policies reads has changed. */
int adm_policies_same(const struct adm_config *a, const struct adm_config *b);

/* A snapshot's policy for <p>: <prev>'s (retained) when it has the same
 * name and identity, else a new one that takes p->conf over (p->conf is
 * NULL after). NULL on out of memory. */
struct adm_spolicy *adm_spolicy_for(struct adm_policy *p, struct adm_spolicy *const *prev,
                                    size_t nprev, unsigned nworkers);
void adm_spolicy_release(struct adm_spolicy *sp);

/* The query parameters that never reach the access log, whatever route a
 * request takes (none, or one without the policy): the names of the
 * api_key policies' "query" among <p>[0..<n>), distinct, joined by '&'
 * (which no name holds) into <out> (<cap> bytes). Returns their length;
 * when they do not fit, *<whole> is set and the log leaves out every
 * query (a credential is never logged for want of room). */
size_t adm_policies_log_query(struct adm_spolicy *const *p, size_t n, char *out, size_t cap,
                              int *whole);

#endif
