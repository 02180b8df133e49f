/*
 * config_admin.c - the "admin" section: the admin API's numeric address,
 * its token file, the state directory and the warm heap's size; and the
 * top-level "user" and "group" the process drops to after binding.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <errno.h>
#include <stdlib.h>

static void admin_address(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_admin *a = target;
    const char *s = adm_cf_str(x, v, 1);
    char why[128];
    struct adm_cf_qbuf q;

    if (!s)
        return;
    adm_addr_free(&a->addr);
    if (adm_addr_parse(&a->addr, s, 0, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            adm_cf_err(x, "invalid address %s: %s", adm_cf_quote(&q, s), why);
    }
}

static const struct adm_cf_field admin_fields[] = {
    {.key = "address", .kind = FK_FN, .fn = admin_address},
    {.key = "token_file", .kind = FK_PATH, .off = offsetof(struct adm_admin, token_file)},
    {.key = "state_dir", .kind = FK_PATH, .off = offsetof(struct adm_admin, state_dir)},
    {.key = "heap_reserve_mb",
     .kind = FK_UINT,
     .off = offsetof(struct adm_admin, heap_reserve_mb),
     .min = 0,
     .max = 1024},
};

/* "user" or "group" into <slot>: an account name (whether it exists is
 * checked by adm_config_check_env, on the host that runs it). */
static void account(struct adm_cf *x, const json_t *v, char **slot)
{
    const char *s = adm_cf_str(x, v, 1);
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (!adm_cf_is_name(s, "_.-", 64)) {
        adm_cf_err(x, "invalid account name %s", adm_cf_quote(&q, s));
        return;
    }
    free(*slot);
    *slot = adm_cf_strdup(x, s);
}

void adm_cf_user(struct adm_cf *x, const json_t *v, void *target)
{
    account(x, v, &((struct adm_config *)target)->user);
}

void adm_cf_group(struct adm_cf *x, const json_t *v, void *target)
{
    account(x, v, &((struct adm_config *)target)->group);
}

void adm_cf_admin(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (adm_cf_want_object(x, v))
        adm_cf_fields(x, v, admin_fields, NFIELDS(admin_fields), &c->admin);
}

void adm_cf_admin_free(struct adm_config *c)
{
    adm_addr_free(&c->admin.addr);
    free(c->admin.token_file);
    free(c->admin.state_dir);
    free(c->user);
    free(c->group);
}
