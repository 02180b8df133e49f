/*
 * limits.h - a worker's limits on one upstream pool (limits.c): this
 * worker's share of upstreams.NAME.max_connections per server, the bounded
 * queue of requests waiting for a slot (max_pending, queue_timeout_ms), and
 * the retry budget (retry_budget_percent); and the picks that heed them
 * (a server with a slot free, a retry the budget admits). Bookkeeping
 * otherwise: proxy.c takes and gives back the slots, queues and dispatches
 * the requests.
 *
 * max_connections is divided over the workers (each gets its share, the
 * remainder going to the first ones, at least 1), not kept in one atomic
 * per server: the request path writes no shared cache line, and a slot that
 * frees wakes a request queued on the same worker, with no cross-thread
 * wake-up. The cost: a worker at its share queues while another worker may
 * have slots free (SO_REUSEPORT spreads the clients, so the shares fill
 * evenly under load), and with fewer max_connections than workers the
 * limit is one per worker.
 *
 * A push that changes a pool makes a new pool, and its first request here
 * new limits; the requests still running on the old pool hold slots in
 * the old ones. So that a server gets no more than its share from this
 * worker meanwhile, each server's count of slots taken (struct gw_pslot)
 * is shared by the limits of every version of the pool (same name) that
 * has the server at the same address: the new limits start with the old
 * requests' slots taken, and those give them back to both. The retry
 * budget is shared the same way, by every version of the pool (struct
 * gw_pname): the old version's tries and retries still in flight count
 * against the new one's, so that a storm of pushes during an outage does
 * not grant the budget's floor afresh at each push.
 */
#ifndef SY_GATEWAY_LIMITS_H
#define SY_GATEWAY_LIMITS_H

#include "gateway/gateway.h"
#include "upstream/upstream.h"

/* One server's slots taken on one worker, shared by the limits of the
 * versions of its pool that have the server (matched by address). */
struct gw_pslot {
    unsigned refs; /* the limits pointing at it */
    unsigned busy; /* slots taken (requests holding a connection) */
};

/* What the limits of a pool's versions on one worker share by the pool's
 * name: the retry budget, whose percent is the newest definition's. */
struct gw_pname {
    unsigned refs; /* the limits pointing at it */
    struct up_budget budget;
};

/* One worker's limits on one pool; its worker alone touches it. */
struct gw_plim {
    struct gw_plim *next; /* the worker's list */
    up_pool *pool;        /* retained; its slot of this worker points here */
    unsigned w;           /* the worker */
    unsigned nreqs;       /* requests pointing at it (c->req.plim): gw_plim_get .. gw_plim_put */
    size_t nservers;
    unsigned share;         /* slots per server on this worker; 0: no limit */
    struct gw_pslot **slot; /* per server, NULL without max_connections */
    unsigned nbusy;         /* the slots its own requests hold */
    up_queue *queue;        /* requests waiting for a slot; NULL: none may wait */
    unsigned queue_timeout_ms;
    int budget_on;         /* the pool retries: its requests count in the budget */
    struct gw_pname *name; /* shared with the pool's other versions on the worker */
};

/* gw_plim_pick(), gw_plim_retry(): every usable server is at its
 * max_connections on this worker (the request waits). */
#define GW_PICK_FULL ((size_t)-2)
/* gw_plim_retry(): the retry budget refused the retry (counted in it). */
#define GW_PICK_REFUSED ((size_t)-3)

/* Worker <w>'s limits on <pool> (defined by <def>), made at the first call
 * (sharing the slot counts of the servers that older versions of the pool
 * on <w> have, and their retry budget); NULL when out of memory. The first
 * one made also makes the worker's wake event, which runs <wake> (proxy.c
 * dispatches queued requests there). The caller's request holds them
 * (they are not pruned) until gw_plim_put(). */
struct gw_plim *gw_plim_get(struct gw_worker *w, up_pool *pool, const struct adm_upstream *def,
                            event_callback_fn wake);
/* The request that got <l> from gw_plim_get() is over. */
void gw_plim_put(struct gw_plim *l);
/* Takes a slot on server <s> (the caller checked there is one). */
void gw_plim_take(struct gw_plim *l, size_t s);
/* Gives back the slot on server <s>; wakes the worker when requests wait
 * (here, or in the limits of another version of the pool that share the
 * slot). */
void gw_plim_release(struct gw_worker *w, struct gw_plim *l, size_t s);
/* Whether server <s> has a slot free on this worker. */
int gw_plim_free(const struct gw_plim *l, size_t s);
/* A server other than <s> with a slot free, up (or the pool all down and
 * panicking: the balancer picked <s> anyway) and not in <tried>; UP_NONE
 * when there is none: the request waits. */
size_t gw_plim_other(const struct gw_plim *l, size_t s, const struct up_tried *tried);
/* Worker <w>'s server for a try of a request on <pool> (<pk>: what the
 * pick depends on, its tried set included): the balancer's pick, or when
 * that one has no slot free in <l>, the balancer's pick again with the
 * full ones left out as if tried (HAProxy's balancers skip full servers),
 * so that their requests spread as the balancer spreads (by weight, load
 * or key) rather than all onto the next server. The re-asks stop when
 * the tried set would forget a server; then gw_plim_other() decides.
 * UP_NONE when no server is usable, GW_PICK_FULL when every usable one is
 * full. <l> NULL (no limits): the balancer's pick. */
size_t gw_plim_pick(const struct gw_plim *l, up_pool *pool, unsigned w, const struct up_pick *pk);
/* The server for the retry of a try that failed (<reached>: it reached its
 * server, gw_try_reached()), <pk->tried> holding the servers tried. The
 * budget is asked first: a retry it refuses returns GW_PICK_REFUSED and
 * never moves the balancer. Then gw_plim_pick(); when it finds no server
 * (UP_NONE), the budget is given back what it admitted. *<counted>: 1 when
 * the retry was admitted as a retry (the try started for it ends with
 * up_budget_end(.., 1)), 0 otherwise. <l> NULL or not retrying: no budget. */
size_t gw_plim_retry(struct gw_plim *l, up_pool *pool, unsigned w, const struct up_pick *pk,
                     int reached, int *counted);
/* Whether some server (up, or the pool all down) has a slot free: a queued
 * request can go on. */
int gw_plim_any(const struct gw_plim *l);
/* Frees the limits of pools no longer in the current snapshot that nothing
 * holds (no request points at them: none buffers its body for them, takes
 * a slot, waits in the queue or counts in the budget; those that count in
 * the budget hold the limits, as the budget is shared with the pool's
 * other versions). */
void gw_plim_prune(struct gw_worker *w);
/* Frees every limit of <w> (the worker is done; its connections are gone). */
void gw_plim_free_all(struct gw_worker *w);

#endif
