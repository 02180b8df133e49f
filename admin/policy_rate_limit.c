/*
 * policy_rate_limit.c - the "rate_limit" policy type: its definition
 * (rate, per_ms, burst, key, max_keys), and its table, shared by every
 * worker: the generic cell rate algorithm (GCRA, as nginx's limit_req: one
 * theoretical arrival time per key) updated with a compare-and-swap, no
 * lock, no allocation, memory fixed at max_keys slots.
 *
 * A request of key k at time now passes when its arrival pushed k's TAT
 * no further than limit = (burst + 1) * T past now, T = per_ms / rate:
 * burst + 1 requests at once, then one every T. A key is stored as its
 * 64-bit hash; a slot is found within PROBE slots of the hash's place,
 * and a new key takes an empty slot there, or one whose TAT has passed
 * (it remembers nothing), or else evicts the one whose TAT is oldest.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE 8
#define MAX_KEYS 10000000

static void rl_type(struct adm_cf *x, const json_t *v, void *target)
{
    (void)x, (void)v, (void)target; /* read by config_policies.c */
}

/* One "key" part into c->key[c->nkey]. */
static void key_part(struct adm_cf *x, const json_t *v, struct adm_rl_conf *c)
{
    const char *s = adm_cf_str(x, v, 1);
    struct adm_rl_part *p = &c->key[c->nkey];
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (!strcmp(s, "client_ip")) {
        p->kind = ADM_RLK_CLIENT_IP;
    } else if (!strcmp(s, "route")) {
        p->kind = ADM_RLK_ROUTE;
    } else if (!strncmp(s, "header:", 7) && h1_is_token(s + 7, strlen(s + 7)) &&
               strlen(s + 7) <= 128) {
        p->kind = ADM_RLK_HEADER;
        if (!(p->name = adm_cf_strdup(x, s + 7)))
            return;
        for (char *d = p->name; *d; d++)
            *d = to_lower(*d);
    } else if (!strncmp(s, "param:", 6) && adm_cf_is_name(s + 6, "_", 128)) {
        p->kind = ADM_RLK_PARAM;
        if (!(p->name = adm_cf_strdup(x, s + 6)))
            return;
    } else {
        adm_cf_err(x,
                   "invalid key %s (expected \"client_ip\", \"route\", \"header:NAME\" or "
                   "\"param:NAME\")",
                   adm_cf_quote(&q, s));
        return;
    }
    p->len = p->name ? strlen(p->name) : 0;
    c->nkey++;
}

static void rl_key(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_rl_conf *c = target;

    if (json_is_string(v)) {
        key_part(x, v, c);
        return;
    }
    if (!json_is_array(v)) {
        adm_cf_err(x, "expected a string or an array of strings, got %s", adm_cf_type_name(v));
        return;
    }
    if (json_array_size(v) == 0 || json_array_size(v) > ADM_RL_MAX_PARTS) {
        adm_cf_err(x, "a list of 1..%d parts", ADM_RL_MAX_PARTS);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = adm_cf_push_index(x, i);
        key_part(x, json_array_get(v, i), c);
        adm_cf_pop(x, mark);
    }
}

static const struct adm_cf_field rl_fields[] = {
    {.key = "type", .kind = FK_FN, .fn = rl_type},
    {.key = "rate",
     .kind = FK_UINT,
     .flags = F_REQUIRED,
     .off = offsetof(struct adm_rl_conf, rate),
     .min = 1,
     .max = 1000000000},
    {.key = "per_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rl_conf, per_ms),
     .min = 1,
     .max = ADM_CF_MAX_MS},
    {.key = "burst",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rl_conf, burst),
     .min = 0,
     .max = 1000000000},
    {.key = "key", .kind = FK_FN, .fn = rl_key},
    {.key = "max_keys",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rl_conf, max_keys),
     .min = 1,
     .max = MAX_KEYS},
};

/* "RateLimit-Policy: "NAME";q=Q;w=W" (draft-ietf-httpapi-ratelimit-headers):
 * the quota per whole window of seconds. */
static int encode_policy(struct adm_rl_conf *c)
{
    unsigned long long q = c->rate, w = c->per_ms / 1000;
    char buf[256];
    int n;

    if (c->per_ms % 1000 || !w) { /* scaled to one second */
        q = ((unsigned long long)c->rate * 1000 + c->per_ms / 2) / c->per_ms;
        w = 1;
    }
    n = snprintf(buf, sizeof(buf), "RateLimit-Policy: \"%s\";q=%llu;w=%llu\r\n", c->name, q ? q : 1,
                 w);
    if (n < 0 || (size_t)n >= sizeof(buf) || !(c->policy = strdup(buf)))
        return -1;
    c->policy_len = (size_t)n;
    return 0;
}

void *adm_rl_configure(struct adm_cf *x, const json_t *v, struct adm_policy *p)
{
    struct adm_rl_conf *c = adm_cf_calloc(x, 1, sizeof(*c));
    size_t nerr = x->nerr;

    if (!c)
        return NULL;
    c->per_ms = 1000;
    c->max_keys = 100000;
    adm_cf_fields(x, v, rl_fields, NFIELDS(rl_fields), c);
    if (!c->nkey && !json_object_get(v, "key"))
        c->key[c->nkey++].kind = ADM_RLK_CLIENT_IP;
    if (x->nerr != nerr || x->nomem || !p->name)
        goto fail;
    c->t_ns = (uint64_t)c->per_ms * 1000000u / c->rate;
    if (!c->t_ns)
        c->t_ns = 1;
    /* a day's interval times a billion of burst would not fit: such a
     * limit is a quarter of uint64's range, centuries either way */
    if ((uint64_t)c->burst + 1 > (UINT64_MAX / 4) / c->t_ns)
        c->limit_ns = UINT64_MAX / 4;
    else
        c->limit_ns = ((uint64_t)c->burst + 1) * c->t_ns;
    if (!(c->name = strdup(p->name)) || encode_policy(c) < 0) {
        x->nomem = 1;
        goto fail;
    }
    return c;
fail:
    adm_rl_conf_free(c);
    return NULL;
}

void adm_rl_conf_free(void *conf)
{
    struct adm_rl_conf *c = conf;

    if (!c)
        return;
    for (size_t i = 0; i < ADM_RL_MAX_PARTS; i++)
        free(c->key[i].name);
    free(c->name);
    free(c->policy);
    free(c);
}

void *adm_rl_table_new(const void *conf, unsigned nworkers)
{
    const struct adm_rl_conf *c = conf;
    struct adm_rl_table *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->cap = c->max_keys;
    t->nworkers = nworkers;
    t->slots = calloc(t->cap, sizeof(*t->slots));
    t->ctr = aligned_alloc(64, sizeof(*t->ctr) * (nworkers ? nworkers : 1));
    if (!t->slots || !t->ctr) {
        adm_rl_table_free(t);
        return NULL;
    }
    memset(t->ctr, 0, sizeof(*t->ctr) * (nworkers ? nworkers : 1));
    return t;
}

void adm_rl_table_free(void *state)
{
    struct adm_rl_table *t = state;

    if (!t)
        return;
    free(t->slots);
    free(t->ctr);
    free(t);
}

void adm_rl_gcra(_Atomic uint64_t *tat, const struct adm_rl_conf *c, uint64_t now,
                 struct adm_rl_verdict *v)
{
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed), next;

    do {
        next = (old > now ? old : now) + c->t_ns;
        if (next - now > c->limit_ns) { /* too early: nothing changes */
            uint64_t wait = next - now - c->limit_ns;
            v->allowed = 0;
            v->remaining = 0;
            v->retry_s = (wait + 999999999u) / 1000000000u;
            v->retry_s = v->retry_s ? v->retry_s : 1;
            v->reset_s = (old - now + 999999999u) / 1000000000u;
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(tat, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    v->allowed = 1;
    v->remaining = (c->limit_ns - (next - now)) / c->t_ns;
    v->reset_s = (next - now + 999999999u) / 1000000000u;
    v->retry_s = 0;
}

static void count(_Atomic uint64_t *n)
{
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* The slot of <key>: found among the PROBE from its place, or claimed
 * there. NULL only when other threads kept taking the slots picked. */
static struct adm_rl_slot *slot_of(struct adm_rl_table *t, uint64_t key, uint64_t now,
                                   struct adm_rl_wctr *ctr)
{
    size_t home = (size_t)(((key >> 32) * (uint64_t)t->cap) >> 32);

    for (int attempt = 0; attempt < 4; attempt++) {
        struct adm_rl_slot *pick = NULL;
        uint64_t pick_key = 0, pick_tat = UINT64_MAX, pick_raw = 0;
        for (size_t i = 0, k = home; i < PROBE && i < t->cap;
             i++, k = k + 1 == t->cap ? 0 : k + 1) {
            struct adm_rl_slot *s = &t->slots[k];
            uint64_t sk = atomic_load_explicit(&s->key, memory_order_acquire);
            uint64_t raw, st;
            if (sk == key)
                return s;
            raw = sk ? atomic_load_explicit(&s->tat, memory_order_relaxed) : 0;
            st = raw > now ? raw : 0; /* empty, or nothing left to remember */
            if (st < pick_tat) {
                pick = s;
                pick_key = sk;
                pick_tat = st;
                pick_raw = raw;
            }
        }
        if (atomic_compare_exchange_strong_explicit(&pick->key, &pick_key, key,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            /* A new key starts with no history. A TAT already past is
             * none (GCRA starts from max(TAT, now)), so only a live key's is
             * forgotten, and only if it is still the one seen: a take of the
             * new key another worker made since is never wiped (an update
             * of the evicted key that lands first is kept: the new key then
             * starts with its history, only while a live key is evicted). */
            if (pick_tat) {
                atomic_compare_exchange_strong_explicit(&pick->tat, &pick_raw, 0,
                                                        memory_order_relaxed, memory_order_relaxed);
                count(&ctr->evictions);
            }
            return pick;
        }
    }
    return NULL;
}

void adm_rl_take(struct adm_rl_table *t, const struct adm_rl_conf *c, uint64_t key, uint64_t now,
                 unsigned w, struct adm_rl_verdict *v)
{
    struct adm_rl_wctr *ctr = &t->ctr[w < t->nworkers ? w : 0];
    struct adm_rl_slot *s = slot_of(t, key ? key : 1, now, ctr);

    if (!s) { /* the slots kept moving under us: let it through */
        *v = (struct adm_rl_verdict){.allowed = 1, .remaining = 0, .reset_s = 1};
        count(&ctr->allowed);
        return;
    }
    adm_rl_gcra(&s->tat, c, now, v);
    count(v->allowed ? &ctr->allowed : &ctr->limited);
}

size_t adm_rl_keys(const struct adm_rl_table *t, uint64_t now)
{
    size_t n = 0;

    for (size_t i = 0; i < t->cap; i++)
        n += atomic_load_explicit(&t->slots[i].key, memory_order_relaxed) &&
             atomic_load_explicit(&t->slots[i].tat, memory_order_relaxed) > now;
    return n;
}

void adm_rl_counts(const struct adm_rl_table *t, uint64_t *allowed, uint64_t *limited,
                   uint64_t *evictions)
{
    *allowed = *limited = *evictions = 0;
    for (unsigned w = 0; w < (t->nworkers ? t->nworkers : 1); w++) {
        *allowed += atomic_load_explicit(&t->ctr[w].allowed, memory_order_relaxed);
        *limited += atomic_load_explicit(&t->ctr[w].limited, memory_order_relaxed);
        *evictions += atomic_load_explicit(&t->ctr[w].evictions, memory_order_relaxed);
    }
}
