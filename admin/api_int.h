/*
 * api_int.h - what the admin API's files share: the API's state, the
 * live snapshot, and the helpers more than one endpoint file needs
 * (api.c: endpoints and dispatch; api_metrics.c: /metrics).
 */
#ifndef SY_ADMIN_API_INT_H
#define SY_ADMIN_API_INT_H

#include "admin/api.h"
#include "admin/http.h"

#include <stdatomic.h>
#include <time.h>

struct adm_api {
    struct event_base *base;
    struct adm_http *http;
    struct adm_swap *sw;
    struct adm_state *st;
    struct adm_api_hooks hooks;
    rt_table *endpoints; /* the dispatch table, routed */
    char *token;
    time_t started;
};

static inline struct adm_snapshot *current(struct adm_api *api)
{
    return atomic_load_explicit(&api->sw->current, memory_order_acquire);
}

/* 500 when an answer cannot even be built. */
void adm_api_send_oom(struct adm_req *req);
/* The checker's view of server <address> of <pool> (NULL: the pool's). */
void adm_api_srv_health(const struct adm_api *api, const char *pool, const char *address,
                        struct adm_srv_health *h);
/* GET /metrics (api_metrics.c). */
void adm_api_metrics(struct adm_api *api, struct adm_req *req, const char *unused);

#endif
