/*
 * limits.c - a worker's limits on its upstream pools (limits.h): made on
 * a pool's first request that needs them, kept on the worker's list while
 * the pool is in use, pruned after it left the config and nothing holds
 * them. Each limit holds a reference on its pool, so a pool's address never
 * names another pool's limits. The per-server slot counts are reference
 * counted: the limits of a pool's versions share those of the servers they
 * have in common (limits.h), and so is the block they share by the pool's
 * name (its retry budget).
 */
#include "gateway/limits.h"

#include <stdlib.h>
#include <string.h>

static void plim_free(struct gw_plim *l)
{
    void **mine = up_pool_worker_slot(l->pool, l->w);

    if (*mine == l)
        *mine = NULL;
    for (size_t k = 0; l->slot && k < l->nservers; k++)
        if (l->slot[k] && !--l->slot[k]->refs)
            free(l->slot[k]);
    free(l->slot);
    if (l->name && !--l->name->refs)
        free(l->name);
    up_queue_free(l->queue);
    up_pool_release(l->pool);
    free(l);
}

/* <l> (new, not on the list yet) shares the slot counts of its servers
 * with the limits on <w> of older versions of its pool: what their
 * requests hold counts against <l>'s share too. Any order would do: each
 * version took, when it was made, the counts of every older one still
 * listed, so those that have a server share one count for it. */
static int inherit_slots(struct gw_worker *w, struct gw_plim *l)
{
    size_t *map = malloc(l->nservers * sizeof(*map));

    if (!map)
        return -1;
    for (struct gw_plim *o = w->plims; o; o = o->next) {
        if (!o->slot || strcmp(up_pool_name(o->pool), up_pool_name(l->pool)) != 0)
            continue;
        if (up_pool_match(l->pool, o->pool, map) == UP_NONE) {
            free(map);
            return -1;
        }
        for (size_t k = 0; k < l->nservers; k++) {
            if (map[k] == UP_NONE || l->slot[k])
                continue;
            l->slot[k] = o->slot[map[k]];
            l->slot[k]->refs++;
        }
    }
    free(map);
    return 0;
}

/* <l>'s slot counts: shared with older versions, or new ones. */
static int slots_new(struct gw_worker *w, struct gw_plim *l)
{
    if (!(l->slot = calloc(l->nservers, sizeof(*l->slot))) || inherit_slots(w, l) < 0)
        return -1;
    for (size_t k = 0; k < l->nservers; k++) {
        if (l->slot[k])
            continue;
        if (!(l->slot[k] = calloc(1, sizeof(*l->slot[k]))))
            return -1;
        l->slot[k]->refs = 1;
    }
    return 0;
}

/* Whether snapshot <s> still uses <pool>. */
static int in_use(const struct adm_snapshot *s, const up_pool *pool)
{
    for (size_t i = 0; i < s->npools; i++)
        if (s->pools[i] == pool)
            return 1;
    return 0;
}

/* <l> (new, not on the list yet, defined by <def>) shares the block of
 * its pool's name with the limits on <w> of the pool's older versions, or
 * gets a new one. The budget's percent becomes <def>'s unless <l>'s pool
 * already left the current snapshot (a request that started before a push
 * made it late): the newest definition's applies. */
static int name_new(struct gw_worker *w, struct gw_plim *l, const struct adm_upstream *def)
{
    const struct adm_snapshot *cur =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);

    for (struct gw_plim *o = w->plims; o; o = o->next) {
        if (strcmp(up_pool_name(o->pool), up_pool_name(l->pool)) != 0)
            continue;
        l->name = o->name;
        l->name->refs++;
        if (in_use(cur, l->pool))
            up_budget_set(&l->name->budget, def->retry_budget_percent, 3);
        return 0;
    }
    if (!(l->name = calloc(1, sizeof(*l->name))))
        return -1;
    l->name->refs = 1;
    up_budget_init(&l->name->budget, def->retry_budget_percent, 3);
    return 0;
}

static struct gw_plim *plim_new(struct gw_worker *w, up_pool *pool, const struct adm_upstream *def)
{
    struct gw_plim *l = calloc(1, sizeof(*l));

    if (!l)
        return NULL;
    l->pool = pool;
    l->w = w->id;
    up_pool_retain(pool);
    l->nservers = up_pool_nservers(pool);
    if (name_new(w, l, def) < 0)
        goto fail;
    if (def->max_connections) {
        l->share = gw_worker_share(w, def->max_connections);
        l->queue_timeout_ms = def->queue_timeout_ms;
        if (slots_new(w, l) < 0)
            goto fail;
        if (def->max_pending && !(l->queue = up_queue_new(def->max_pending)))
            goto fail;
    }
    l->budget_on = def->retries > 0;
    return l;
fail:
    plim_free(l);
    return NULL;
}

struct gw_plim *gw_plim_get(struct gw_worker *w, up_pool *pool, const struct adm_upstream *def,
                            event_callback_fn wake)
{
    /* found in the pool's slot of this worker: no search per request,
     * however many pools the worker serves */
    void **mine = up_pool_worker_slot(pool, w->id);
    struct gw_plim **pp, *l = *mine;

    if (!l) {
        if (!w->plim_ev && !(w->plim_ev = event_new(w->base, -1, 0, wake, w)))
            return NULL;
        if (!(l = plim_new(w, pool, def)))
            return NULL;
        for (pp = &w->plims; *pp; pp = &(*pp)->next)
            ;
        *pp = l; /* at the tail: the list is oldest first (gateway.h) */
        *mine = l;
    }
    l->nreqs++;
    return l;
}

void gw_plim_put(struct gw_plim *l)
{
    l->nreqs--;
}

void gw_plim_take(struct gw_plim *l, size_t s)
{
    l->slot[s]->busy++;
    l->nbusy++;
}

/* Whether a request waits in <l>'s queue. */
static int waiting(const struct gw_plim *l)
{
    return l->queue && up_queue_len(l->queue);
}

/* Whether a request waits in the limits on <w> of another version of
 * <l>'s pool that share <slot> with <l> (a push changed the pool while
 * <l>'s request held it). */
static int waiting_on(const struct gw_worker *w, const struct gw_plim *l,
                      const struct gw_pslot *slot)
{
    for (const struct gw_plim *o = w->plims; o; o = o->next) {
        if (o == l || o->name != l->name || !o->slot || !waiting(o))
            continue;
        for (size_t k = 0; k < o->nservers; k++)
            if (o->slot[k] == slot)
                return 1;
    }
    return 0;
}

void gw_plim_release(struct gw_worker *w, struct gw_plim *l, size_t s)
{
    struct gw_pslot *slot = l->slot[s];

    slot->busy--;
    l->nbusy--;
    if (waiting(l) || (slot->refs > 1 && waiting_on(w, l, slot)))
        event_active(w->plim_ev, EV_TIMEOUT, 0);
}

int gw_plim_free(const struct gw_plim *l, size_t s)
{
    return l->slot[s]->busy < l->share;
}

/* Whether server <k> can take a try now: a slot free, up (or <all_down>,
 * the pool's every server down: it panics, or nothing is picked anyway),
 * not tried. The callers look at the whole pool once for <all_down>, not
 * once a server. */
static int usable(const struct gw_plim *l, size_t k, const struct up_tried *tried, int all_down)
{
    return gw_plim_free(l, k) && (all_down || !up_health_flags(l->pool, k)) &&
           !(tried && up_tried_has(tried, k));
}

size_t gw_plim_other(const struct gw_plim *l, size_t s, const struct up_tried *tried)
{
    int all_down = up_pool_all_down(l->pool);

    for (size_t i = 1; i < l->nservers; i++)
        if (usable(l, (s + i) % l->nservers, tried, all_down))
            return (s + i) % l->nservers;
    return UP_NONE;
}

size_t gw_plim_pick(const struct gw_plim *l, up_pool *pool, unsigned w, const struct up_pick *pk)
{
    size_t s = up_select(pool, w, pk);
    struct up_tried skip;
    struct up_pick again;

    if (s == UP_NONE || !l || !l->share || gw_plim_free(l, s))
        return s;
    skip = pk->tried ? *pk->tried : (struct up_tried){0};
    again = *pk;
    again.tried = &skip;
    /* each re-ask leaves out one more full server: at most the pool's
     * size, and the tried set's room */
    while (skip.n < UP_TRIED_MAX) {
        up_tried_add(&skip, s);
        if ((s = up_select(pool, w, &again)) == UP_NONE)
            return GW_PICK_FULL;
        if (gw_plim_free(l, s))
            return s;
    }
    s = gw_plim_other(l, s, pk->tried);
    return s == UP_NONE ? GW_PICK_FULL : s;
}

size_t gw_plim_retry(struct gw_plim *l, up_pool *pool, unsigned w, const struct up_pick *pk,
                     int reached, int *counted)
{
    int r = 1; /* outside the budget */
    size_t s;

    if (l && l->budget_on && (r = up_budget_retry(&l->name->budget, reached)) < 0) {
        *counted = 0;
        return GW_PICK_REFUSED;
    }
    s = gw_plim_pick(l, pool, w, pk);
    if (s == UP_NONE && r == 0) { /* admitted, but there is nowhere to send it */
        up_budget_end(&l->name->budget, 1);
        r = 1;
    }
    *counted = r == 0;
    return s;
}

int gw_plim_any(const struct gw_plim *l)
{
    int all_down = up_pool_all_down(l->pool);

    for (size_t k = 0; k < l->nservers; k++)
        if (usable(l, k, NULL, all_down))
            return 1;
    return 0;
}

void gw_plim_prune(struct gw_worker *w)
{
    const struct adm_snapshot *s =
        atomic_load_explicit(&w->proc->swap.current, memory_order_acquire);
    struct gw_plim **pp = &w->plims, *l;

    while ((l = *pp)) {
        if (!l->nreqs && !l->nbusy && !waiting(l) && !in_use(s, l->pool)) {
            *pp = l->next;
            plim_free(l);
        } else {
            pp = &l->next;
        }
    }
}

void gw_plim_free_all(struct gw_worker *w)
{
    while (w->plims) {
        struct gw_plim *l = w->plims;
        w->plims = l->next;
        plim_free(l);
    }
    if (w->plim_ev)
        event_free(w->plim_ev);
    w->plim_ev = NULL;
}
