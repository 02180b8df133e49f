/*
 * policy_basic.c - the "basic" policy type (HTTP Basic, RFC 7617): an
 * htpasswd file of bcrypt ($2y$, $2b$) or yescrypt ($y$) hashes, read at
 * parse time, the realm, and how long a worker trusts an Authorization
 * value it verified (cache_ttl_s). The verification itself (crypt_r) is
 * the worker's: gateway/policy_basic.c.
 *
 * The file's bytes are part of the policy's identity, so a changed file
 * pushed again is a new policy, whose caches start empty.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/policy_types.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE (16u << 20)
#define MAX_USERS 100000

static void basic_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

struct basic_parse {
    struct adm_basic_conf *c;
    struct adm_policy *p;
    char *realm;
    int has_file;
};

static int is_bcrypt(const char *h, size_t n)
{
    return n >= 4 && (!strncmp(h, "$2y$", 4) || !strncmp(h, "$2b$", 4));
}

static int hash_ok(const char *h, size_t n)
{
    if (is_bcrypt(h, n))
        return n == 60;
    return n > 4 && !strncmp(h, "$y$", 3);
}

static int b64_index(char ch)
{
    static const char a64[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const char *p = ch ? strchr(a64, ch) : NULL;
    return p ? (int)(p - a64) : -1;
}

/* Whether hash <h> (hash_ok) costs at most what one guess may cost a
 * worker: bcrypt 2^14 rounds ($2y$14$, about a second), yescrypt 64 MiB
 * (N * r * 128 bytes: mkpasswd's -R 7 at the default r = 32). Beyond,
 * one guess would stall a worker for seconds or hours ($2y$31$). */
static int cost_ok(const char *h)
{
    int nlog, r;

    if (h[1] == '2')
        return h[4] >= '0' && h[4] <= '9' && h[5] >= '0' && h[5] <= '9' && h[6] == '$' &&
               (h[4] - '0') * 10 + (h[5] - '0') <= 14;
    /* "$y$j" N_log2 r "$": one character each, less one */
    if (h[3] != 'j' || (nlog = b64_index(h[4]) + 1) < 1 || (r = b64_index(h[5]) + 1) < 1 ||
        h[6] != '$')
        return 0;
    return nlog <= 19 && ((uint64_t)r << nlog) <= (1u << 19);
}

int adm_basic_parse_file(struct adm_basic_conf *c, const char *text, size_t len, char *why,
                         size_t cap)
{
    const char *p = text, *end = text + len;
    unsigned line = 0;

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon;
        size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p);
        line++;
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n && p[0] != '#') {
            colon = memchr(p, ':', n);
            if (!colon || colon == p) {
                snprintf(why, cap, "line %u: expected user:hash", line);
                return -1;
            }
            for (const char *u = p; u < colon; u++)
                if ((unsigned char)*u < ' ' || *u == 127) { /* it goes upstream in a field */
                    snprintf(why, cap, "line %u: a control character in the user name", line);
                    return -1;
                }
            size_t hn = n - (size_t)(colon + 1 - p);
            if (is_bcrypt(colon + 1, hn) && hn != 60) { /* cut short, or pasted with a space */
                snprintf(why, cap,
                         "line %u: a bcrypt hash has 60 characters, this one has %zu (cut "
                         "short, or more after it)",
                         line, hn);
                return -1;
            }
            if (!hash_ok(colon + 1, hn)) {
                snprintf(why, cap,
                         "line %u: only bcrypt ($2y$, $2b$) and yescrypt ($y$) hashes are "
                         "taken (htpasswd -B, mkpasswd -m yescrypt)",
                         line);
                return -1;
            }
            if (!cost_ok(colon + 1)) {
                snprintf(why, cap,
                         "line %u: a hash too costly for one guess (at most bcrypt's $2y$14$, "
                         "yescrypt's 64 MiB: mkpasswd -m yescrypt -R 7)",
                         line);
                return -1;
            }
            if (c->nusers >= MAX_USERS) {
                snprintf(why, cap, "line %u: more than %d users", line, MAX_USERS);
                return -1;
            }
            if (c->nusers % 64 == 0) {
                struct adm_basic_user *u = realloc(c->users, (c->nusers + 64) * sizeof(*u));
                if (!u)
                    goto nomem;
                c->users = u;
            }
            struct adm_basic_user *u = &c->users[c->nusers];
            u->name = strndup(p, (size_t)(colon - p));
            u->hash = strndup(colon + 1, hn);
            c->nusers++;
            if (!u->name || !u->hash)
                goto nomem;
        }
        p += n;
        while (p < end && *p != '\n')
            p++;
        p++;
    }
    return 0;
nomem:
    snprintf(why, cap, "out of memory");
    return -1;
}

static void basic_htpasswd(struct adm_cf *x, const json_t *v, void *target)
{
    struct basic_parse *bp = target;
    const char *path = adm_cf_str(x, v, 1);
    char why[512], where[4200];
    size_t len;
    char *text;

    bp->has_file = 1;
    if (!path)
        return;
    if (!(text = adm_read_small_file(path, MAX_FILE, &len, why, sizeof(why)))) {
        adm_cf_err(x, "%s", why);
        return;
    }
    if (adm_basic_parse_file(bp->c, text, len, why, sizeof(why)) < 0)
        adm_cf_err(x, "%s%s: %s", path, adm_path_where(path, where, sizeof(where)), why);
    else if (!bp->c->nusers)
        adm_cf_err(x, "%s%s: has no user", path, adm_path_where(path, where, sizeof(where)));
    adm_pol_hash_add(bp->p, text, len);
    free(text);
}

static void basic_realm(struct adm_cf *x, const json_t *v, void *target)
{
    struct basic_parse *bp = target;
    const char *s = adm_cf_str(x, v, 1);

    if (!s)
        return;
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q < ' ' || *q == 127 || *q == '"' || *q == '\\') {
            adm_cf_err(x, "must not contain '\"', '\\' or control characters");
            return;
        }
    if (strlen(s) > 128)
        adm_cf_err(x, "at most 128 characters");
    else
        bp->realm = adm_cf_strdup(x, s);
}

static void basic_ttl(struct adm_cf *x, const json_t *v, void *target)
{
    struct basic_parse *bp = target;
    long long n;

    if (adm_cf_int(x, v, 0, 86400, &n) == 0)
        bp->c->cache_ttl_s = (unsigned)n;
}

static void basic_user_header(struct adm_cf *x, const json_t *v, void *target)
{
    struct basic_parse *bp = target;
    adm_pol_header_name(x, v, &bp->c->user_header, &bp->c->user_header_len);
}

static const struct adm_cf_field basic_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = basic_type},
    {.key = "htpasswd", .kind = FK_FN, .flags = F_REQUIRED, .fn = basic_htpasswd},
    {.key = "realm", .kind = FK_FN, .fn = basic_realm},
    {.key = "cache_ttl_s", .kind = FK_FN, .fn = basic_ttl},
    {.key = "user_header", .kind = FK_FN, .fn = basic_user_header},
};

/* The length of <h>'s algorithm and cost: "$2y$10$", "$y$j9T$". */
static size_t setting_len(const char *h)
{
    const char *d = strchr(h + (h[1] == '2' ? 4 : 3), '$');
    return d ? (size_t)(d - h) + 1 : strlen(h);
}

/* The hash an unknown user is checked against: one of the most common
 * algorithm and cost among the users (a majority vote, O(n)), so that an
 * unknown name takes the time most real ones take. */
static const char *typical_hash(const struct adm_basic_conf *c)
{
    const char *best = c->users[0].hash;
    size_t votes = 0;

    for (size_t i = 0; i < c->nusers; i++) {
        const char *h = c->users[i].hash;
        size_t n = setting_len(h);
        if (!votes) {
            best = h;
            votes = 1;
        } else if (n == setting_len(best) && !memcmp(h, best, n)) {
            votes++;
        } else {
            votes--;
        }
    }
    return best;
}

void *adm_basic_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct basic_parse bp = {.p = p};
    size_t nerr = x->nerr;
    char buf[256];
    int n;

    if (!(bp.c = adm_cf_calloc(x, 1, sizeof(*bp.c))))
        return NULL;
    bp.c->cache_ttl_s = 60;
    adm_cf_fields(x, v, basic_fields, NFIELDS(basic_fields), &bp);
    if (!bp.c->user_header && (bp.c->user_header = adm_cf_strdup(x, "x-user")))
        bp.c->user_header_len = 6;
    if (x->nerr != nerr || x->nomem || !p->name)
        goto fail;
    bp.c->dummy = typical_hash(bp.c);
    n = snprintf(buf, sizeof(buf), "WWW-Authenticate: Basic realm=\"%s\", charset=\"UTF-8\"\r\n",
                 bp.realm ? bp.realm : p->name);
    if (n < 0 || (size_t)n >= sizeof(buf) || !(bp.c->challenge = strdup(buf))) {
        x->nomem = 1;
        goto fail;
    }
    bp.c->challenge_len = (size_t)n;
    free(bp.realm);
    return bp.c;
fail:
    free(bp.realm);
    adm_basic_conf_free(bp.c);
    return NULL;
}

void adm_basic_conf_free(void *conf)
{
    struct adm_basic_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < c->nusers; i++) {
        free(c->users[i].name);
        free(c->users[i].hash);
    }
    free(c->users);
    free(c->user_header);
    free(c->challenge);
    free(c);
}

void *adm_basic_cache_new(const void *conf, unsigned nworkers)
{
    struct adm_basic_cache *k = calloc(1, sizeof(*k));
    unsigned n = nworkers ? nworkers : 1;

    (void)conf;
    if (!k)
        return NULL;
    k->nworkers = n;
    k->e = calloc((size_t)n * ADM_BASIC_CACHE, sizeof(*k->e));
    k->scratch = calloc(n, sizeof(*k->scratch));
    k->sha = adm_sha_new(n);
    if (!k->e || !k->scratch || !k->sha) {
        adm_basic_cache_free(k);
        return NULL;
    }
    return k;
}

void adm_basic_cache_free(void *state)
{
    struct adm_basic_cache *k = state;

    if (!k)
        return;
    for (unsigned w = 0; k->scratch && w < k->nworkers; w++)
        free(k->scratch[w]);
    free(k->scratch);
    free(k->e);
    adm_sha_free(k->sha);
    free(k);
}
