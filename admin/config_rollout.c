/*
 * config_rollout.c - the "rollout" object: the defaults of a staged
 * rollout (a write with ?canary=P), each of which the write's query may
 * override. Live: a rollout reads them when it starts.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

static void rollout_canary_key(struct adm_cf *x, const json_t *v, void *target)
{
    static const char *const names[] = {"client_ip", "request"};
    struct adm_rollout_cfg *r = target;
    int i = adm_cf_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        r->key = (enum adm_canary_key)i; /* same order as the enum */
}

static const struct adm_cf_field rollout_fields[] = {
    {.key = "canary_s",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rollout_cfg, canary_s),
     .min = 1,
     .max = 86400},
    {.key = "canary_key", .kind = FK_FN, .fn = rollout_canary_key},
    {.key = "threshold_pct",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rollout_cfg, threshold_pct),
     .min = 0,
     .max = 100},
    {.key = "min_requests",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rollout_cfg, min_requests),
     .min = 1,
     .max = 1000000000},
    {.key = "latency_pct",
     .kind = FK_UINT,
     .off = offsetof(struct adm_rollout_cfg, latency_pct),
     .min = 0,
     .max = 10000},
};

void adm_cf_rollout(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;

    if (adm_cf_want_object(x, v))
        adm_cf_fields(x, v, rollout_fields, NFIELDS(rollout_fields), &c->rollout);
}
