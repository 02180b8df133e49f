/*
 * test_limits.c - gateway/limits.c, called directly on workers of a fake
 * process: how max_connections divides over the workers, one limit per
 * worker and pool, slots taken and given back, the server a full one
 * passes a try to (free, up, not tried), the wake-up when a slot frees while
 * requests wait, the budget's settings, pruning once a pool has left
 * the current snapshot and nothing holds its limits, the slots that
 * a changed pool's limits share with the old one's for the servers kept
 * (and the wake-up when one frees for a request of another version that
 * waits for it), the retry budget its versions share, the balancer
 * asked again without the full servers (gw_plim_pick), and the budget
 * asked before the balancer for a retry (gw_plim_retry).
 */
#include "gateway/limits.h"

#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define NW 3

static struct gw_process proc;
static struct gw_worker w[NW];
static struct adm_snapshot snap;
static up_pool *pool, *pools[1];
static int wakes;

static void wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ck_assert_ptr_eq(arg, &w[0]);
    wakes++;
}

static void setup(void)
{
    static struct sockaddr_in sa[3];
    struct up_server_def defs[3];

    memset(&proc, 0, sizeof(proc));
    memset(w, 0, sizeof(w));
    proc.nworkers = NW;
    for (size_t i = 0; i < 3; i++) {
        sa[i].sin_family = AF_INET;
        sa[i].sin_port = htons((uint16_t)(9001 + i));
        sa[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        defs[i] = (struct up_server_def){"127.0.0.1:900x", (const struct sockaddr *)&sa[i],
                                         sizeof(sa[i]), 1};
    }
    pool = up_pool_new("u", "k", defs, 3, NW, 4);
    ck_assert_ptr_nonnull(pool);
    pools[0] = pool;
    snap = (struct adm_snapshot){.pools = pools, .npools = 1};
    atomic_store(&proc.swap.current, &snap);
    for (unsigned i = 0; i < NW; i++) {
        w[i].id = i;
        w[i].proc = &proc;
        w[i].base = event_base_new();
        ck_assert_ptr_nonnull(w[i].base);
    }
    wakes = 0;
}

static void teardown(void)
{
    for (unsigned i = 0; i < NW; i++) {
        gw_plim_free_all(&w[i]);
        event_base_free(w[i].base);
    }
    up_pool_release(pool); /* the last reference: the limits gave theirs back */
}

START_TEST(shares)
{
    struct adm_upstream def = {.max_connections = 7, .max_pending = 2, .queue_timeout_ms = 50};
    struct gw_plim *l[NW];
    unsigned sum = 0;

    for (unsigned i = 0; i < NW; i++) {
        l[i] = gw_plim_get(&w[i], pool, &def, wake);
        ck_assert_ptr_nonnull(l[i]);
        ck_assert_ptr_eq(gw_plim_get(&w[i], pool, &def, wake), l[i]); /* one per pool */
        sum += l[i]->share;
    }
    /* 7 over 3 workers: 3, 2, 2 */
    ck_assert_uint_eq(l[0]->share, 3);
    ck_assert_uint_eq(l[1]->share, 2);
    ck_assert_uint_eq(l[2]->share, 2);
    ck_assert_uint_eq(sum, 7);
    ck_assert_ptr_nonnull(l[0]->queue);
    ck_assert_uint_eq(l[0]->queue_timeout_ms, 50);
    ck_assert_int_eq(l[0]->budget_on, 0);
    for (unsigned i = 0; i < NW; i++)
        gw_plim_free_all(&w[i]);

    /* fewer slots than workers: one each, never none */
    def.max_connections = 2;
    for (unsigned i = 0; i < NW; i++)
        ck_assert_uint_eq(gw_plim_get(&w[i], pool, &def, wake)->share, 1);
}
END_TEST

START_TEST(retries_only)
{
    struct adm_upstream def = {.retries = 2, .retry_budget_percent = 30};
    struct gw_plim *l = gw_plim_get(&w[0], pool, &def, wake);

    ck_assert_ptr_nonnull(l);
    ck_assert_uint_eq(l->share, 0); /* no slots, no queue */
    ck_assert_ptr_null(l->queue);
    ck_assert_int_eq(l->budget_on, 1);
    ck_assert_uint_eq(l->name->budget.percent, 30);
    ck_assert_uint_eq(l->name->budget.floor, 3);
}
END_TEST

START_TEST(slots_and_the_next_server)
{
    struct adm_upstream def = {.max_connections = 3, .max_pending = 4, .queue_timeout_ms = 10};
    struct gw_plim *l = gw_plim_get(&w[0], pool, &def, wake); /* share 1 */
    struct up_tried tried = {0};
    int req;

    ck_assert_uint_eq(l->share, 1);
    ck_assert_int_eq(gw_plim_free(l, 0), 1);
    gw_plim_take(l, 0);
    ck_assert_int_eq(gw_plim_free(l, 0), 0);
    ck_assert_uint_eq(gw_plim_other(l, 0, NULL), 1);
    /* a server that is down or was tried is passed over */
    up_health_set(pool, 1, UP_H_CHECK, 1, 0);
    ck_assert_uint_eq(gw_plim_other(l, 0, NULL), 2);
    up_tried_add(&tried, 2);
    ck_assert_uint_eq(gw_plim_other(l, 0, &tried), UP_NONE);
    gw_plim_take(l, 2);
    ck_assert_uint_eq(gw_plim_other(l, 0, NULL), UP_NONE);
    ck_assert_int_eq(gw_plim_any(l), 0); /* only the down one has a slot */
    ck_assert_uint_eq(l->nbusy, 2);

    /* a slot frees with nobody waiting: no wake-up */
    gw_plim_release(&w[0], l, 2);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 0);
    ck_assert_int_eq(gw_plim_any(l), 1);
    /* with one waiting: the wake event runs (once, on the next loop) */
    ck_assert_int_eq(up_queue_push(l->queue, &req, 10), 0);
    gw_plim_release(&w[0], l, 0);
    ck_assert_int_eq(wakes, 0);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 1);
    ck_assert_uint_eq(l->nbusy, 0);
    /* every server down: the pool panics or picks nothing, so down ones count */
    up_health_set(pool, 0, UP_H_CHECK, 1, 0);
    up_health_set(pool, 2, UP_H_CHECK, 1, 0);
    ck_assert_uint_eq(gw_plim_other(l, 0, NULL), 1);
    ck_assert_ptr_eq(up_queue_pop(l->queue), &req);
}
END_TEST

START_TEST(prune)
{
    struct adm_upstream def = {.max_connections = 3, .max_pending = 4, .retries = 1};
    struct adm_snapshot empty = {.pools = NULL, .npools = 0};
    struct gw_plim *l = gw_plim_get(&w[0], pool, &def, wake);

    gw_plim_prune(&w[0]); /* its pool is in use */
    ck_assert_ptr_eq(w[0].plims, l);
    atomic_store(&proc.swap.current, &empty);
    gw_plim_take(l, 1);
    gw_plim_prune(&w[0]); /* a slot is taken */
    ck_assert_ptr_eq(w[0].plims, l);
    gw_plim_release(&w[0], l, 1);
    gw_plim_prune(&w[0]); /* the request still holds it (it buffers its body) */
    ck_assert_ptr_eq(w[0].plims, l);
    gw_plim_put(l);
    gw_plim_prune(&w[0]);
    ck_assert_ptr_null(w[0].plims);
    atomic_store(&proc.swap.current, &snap);
}
END_TEST

/* A pool <name> of 127.0.0.1 ports <ports> (<n> of them) weighing
 * <weights> (NULL: 1 each), balanced as <opts> says (NULL: round robin). */
static up_pool *pool_with(const char *name, const uint16_t *ports, const unsigned *weights,
                          size_t n, const struct up_pool_opts *opts)
{
    static struct sockaddr_in sa[4];
    static char addr[4][24]; /* the hash's table is made of them */
    struct up_server_def defs[4];

    for (size_t i = 0; i < n; i++) {
        sa[i].sin_family = AF_INET;
        sa[i].sin_port = htons(ports[i]);
        sa[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%u", (unsigned)ports[i]);
        defs[i] = (struct up_server_def){addr[i], (const struct sockaddr *)&sa[i], sizeof(sa[i]),
                                         weights ? weights[i] : 1};
    }
    return up_pool_new_opts(name, "k2", defs, n, NW, 4, opts);
}

/* A pool <name> of 127.0.0.1 ports <ports> (<n> of them), round robin. */
static up_pool *pool_of(const char *name, const uint16_t *ports, size_t n)
{
    return pool_with(name, ports, NULL, n, NULL);
}

START_TEST(a_changed_pool_keeps_the_slots_taken)
{
    /* "u" loses 9003 and gains 9004, in front; "v" is another pool */
    up_pool *p2 = pool_of("u", (const uint16_t[]){9004, 9001, 9002}, 3);
    up_pool *v = pool_of("v", (const uint16_t[]){9001}, 1);
    struct adm_upstream def = {.max_connections = 3, .max_pending = 4, .queue_timeout_ms = 10};
    struct gw_plim *l1 = gw_plim_get(&w[0], pool, &def, wake), *l2, *lv;
    int req;

    gw_plim_take(l1, 0); /* 9001, by a request of the old pool */
    gw_plim_take(l1, 2); /* 9003 */
    l2 = gw_plim_get(&w[0], p2, &def, wake);
    lv = gw_plim_get(&w[0], v, &def, wake);
    ck_assert_ptr_ne(l1, l2);
    ck_assert_int_eq(gw_plim_free(l2, 1), 0); /* 9001: the old request's slot */
    ck_assert_int_eq(gw_plim_free(l2, 0), 1);
    ck_assert_int_eq(gw_plim_free(l2, 2), 1);
    ck_assert_int_eq(gw_plim_free(lv, 0), 1); /* another pool's 9001 */
    ck_assert_uint_eq(l2->nbusy, 0);
    /* a request of the new pool waits; the old request's end wakes it */
    ck_assert_int_eq(up_queue_push(l2->queue, &req, 10), 0);
    gw_plim_release(&w[0], l1, 0);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 1);
    ck_assert_int_eq(gw_plim_free(l2, 1), 1);
    gw_plim_take(l2, 1); /* and the old pool's requests see the new ones' */
    ck_assert_int_eq(gw_plim_free(l1, 0), 0);
    ck_assert_ptr_eq(up_queue_pop(l2->queue), &req);
    /* the old limits pruned: the new ones keep the shared count */
    gw_plim_release(&w[0], l1, 2);
    gw_plim_put(l1);
    pools[0] = p2;
    gw_plim_prune(&w[0]);
    for (struct gw_plim *l = w[0].plims; l; l = l->next)
        ck_assert_ptr_ne(l, l1);
    ck_assert_int_eq(gw_plim_free(l2, 1), 0);
    gw_plim_release(&w[0], l2, 1);
    ck_assert_int_eq(gw_plim_free(l2, 1), 1);
    pools[0] = pool;
    gw_plim_free_all(&w[0]);
    up_pool_release(p2);
    up_pool_release(v);
}
END_TEST

START_TEST(a_shared_slot_wakes_only_those_waiting_for_it)
{
    /* three versions of "u": 9001-9003, then 9004, 9001, 9002, then 9003 */
    up_pool *p2 = pool_of("u", (const uint16_t[]){9004, 9001, 9002}, 3);
    up_pool *p3 = pool_of("u", (const uint16_t[]){9003}, 1);
    struct adm_upstream def = {.max_connections = 3, .max_pending = 4, .queue_timeout_ms = 10};
    struct gw_plim *l1 = gw_plim_get(&w[0], pool, &def, wake), *l3;
    int req;

    gw_plim_take(l1, 0); /* 9001 */
    gw_plim_get(&w[0], p2, &def, wake);
    ck_assert_uint_eq(l1->slot[0]->refs, 2);
    /* the shared slot frees and nobody waits: no wake-up */
    gw_plim_release(&w[0], l1, 0);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 0);
    /* a request waits in a version that does not have 9001: still none */
    l3 = gw_plim_get(&w[0], p3, &def, wake);
    ck_assert_int_eq(up_queue_push(l3->queue, &req, 10), 0);
    gw_plim_take(l1, 0);
    gw_plim_release(&w[0], l1, 0);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 0);
    /* 9003, which it shares, frees: it is woken */
    gw_plim_take(l1, 2);
    gw_plim_release(&w[0], l1, 2);
    event_base_loop(w[0].base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(wakes, 1);
    ck_assert_ptr_eq(up_queue_pop(l3->queue), &req);
    gw_plim_free_all(&w[0]);
    up_pool_release(p2);
    up_pool_release(p3);
}
END_TEST

/* <n> picks through <l> on worker 0 (hash keys 0 .. n-1 hashed), counted
 * per server in <count> (3), GW_PICK_FULL ones in count[3]. */
static void picks(struct gw_plim *l, up_pool *p, int n, unsigned *count)
{
    memset(count, 0, 4 * sizeof(*count));
    for (int i = 0; i < n; i++) {
        struct up_pick pk = {.hash = up_hash(&i, sizeof(i))};
        size_t s = gw_plim_pick(l, p, 0, &pk);

        ck_assert(s < 3 || s == GW_PICK_FULL);
        count[s < 3 ? s : 3]++;
    }
}

/* New limits on <p> (one slot a server on worker 0) with server 0 full,
 * and <n> picks through them counted as picks() does. */
static struct gw_plim *picks_0_full(up_pool *p, int n, unsigned *count)
{
    struct adm_upstream def = {.max_connections = 3, .max_pending = 4};
    struct gw_plim *l = gw_plim_get(&w[0], p, &def, wake);

    ck_assert_uint_eq(l->share, 1);
    gw_plim_take(l, 0);
    picks(l, p, n, count);
    ck_assert_uint_eq(count[0], 0);
    return l;
}

START_TEST(a_full_server_leaves_its_requests_to_the_balancer)
{
    static const uint16_t ports[] = {9001, 9002, 9003};
    struct up_pool_opts hash = {.balance = UP_HASH, .fallback = 1};
    up_pool *rr = pool_with("w", ports, (const unsigned[]){3, 1, 2}, 3, NULL);
    up_pool *mg = pool_with("h", ports, NULL, 3, &hash), *mg_strict;
    unsigned count[4];
    /* round robin 3:1:2 with 0 full: 1:2, as their weights (the next
     * server by index took 0's share: 4:2) */
    struct gw_plim *l = picks_0_full(rr, 600, count);

    ck_assert_uint_eq(count[3], 0);
    ck_assert_uint_ge(count[1], 194);
    ck_assert_uint_le(count[1], 206);
    ck_assert_uint_eq(count[1] + count[2], 600);
    /* every usable one full: the request waits */
    gw_plim_take(l, 1);
    gw_plim_take(l, 2);
    picks(l, rr, 10, count);
    ck_assert_uint_eq(count[3], 10);

    /* the hash with fallback: 0's keys go to their next candidates, over
     * the others as their table slots are (the next by index took all) */
    picks_0_full(mg, 3000, count);
    ck_assert_uint_ge(count[1], 1350);
    ck_assert_uint_ge(count[2], 1350);
    /* without fallback a key keeps its server: its requests wait for it */
    hash.fallback = 0;
    mg_strict = pool_with("s", ports, NULL, 3, &hash);
    picks_0_full(mg_strict, 3000, count);
    ck_assert_uint_ge(count[3], 900);
    ck_assert_uint_ge(count[1], 900);
    ck_assert_uint_ge(count[2], 900);
    gw_plim_free_all(&w[0]);
    up_pool_release(rr);
    up_pool_release(mg);
    up_pool_release(mg_strict);
}
END_TEST

START_TEST(a_retry_asks_the_budget_before_the_balancer)
{
    up_pool *twin = pool_of("t", (const uint16_t[]){9001, 9002, 9003}, 3);
    struct adm_upstream def = {.retries = 2, .max_connections = 3, .max_pending = 4};
    struct gw_plim *l = gw_plim_get(&w[0], pool, &def, wake);
    struct up_budget *b = &l->name->budget;
    struct up_tried tried = {0};
    struct up_pick pk = {.tried = &tried};
    int counted;

    /* the floor is spent: a retry of a try that reached its server is
     * refused, and the round robin of the pool does not move for it */
    up_budget_start(b);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_budget_retry(b, 1), 0);
    up_tried_add(&tried, 0);
    ck_assert_uint_eq(gw_plim_retry(l, pool, 0, &pk, 1, &counted), GW_PICK_REFUSED);
    ck_assert_int_eq(counted, 0);
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(up_pick(pool, 0), up_pick(twin, 0));
    /* one whose connect failed goes, outside the budget */
    ck_assert_uint_eq(gw_plim_retry(l, pool, 0, &pk, 0, &counted), 1);
    ck_assert_int_eq(counted, 0);
    ck_assert_uint_eq(b->retries, 3);
    /* with room: admitted and counted as a retry, also when it must wait */
    for (int i = 0; i < 3; i++)
        up_budget_end(b, 1);
    gw_plim_take(l, 1);
    gw_plim_take(l, 2);
    ck_assert_uint_eq(gw_plim_retry(l, pool, 0, &pk, 1, &counted), GW_PICK_FULL);
    ck_assert_int_eq(counted, 1);
    ck_assert_uint_eq(b->retries, 1);
    up_budget_end(b, 1);
    /* admitted, but every server was tried: the budget is given back */
    up_tried_add(&tried, 1);
    up_tried_add(&tried, 2);
    ck_assert_uint_eq(gw_plim_retry(l, pool, 0, &pk, 1, &counted), UP_NONE);
    ck_assert_int_eq(counted, 0);
    ck_assert_uint_eq(b->retries, 0);
    ck_assert_uint_eq(b->active, 1);
    ck_assert_uint_eq(b->exhausted, 1);
    gw_plim_free_all(&w[0]);
    up_pool_release(twin);
}
END_TEST

START_TEST(a_changed_pool_keeps_the_retry_budget)
{
    /* "u" changed (a server swapped, another percent); "v" is another pool */
    up_pool *p2 = pool_of("u", (const uint16_t[]){9004, 9001, 9002}, 3);
    up_pool *v = pool_of("v", (const uint16_t[]){9001}, 1);
    struct adm_upstream def = {.retries = 2, .retry_budget_percent = 20};
    struct adm_upstream def2 = {.retries = 2, .retry_budget_percent = 50};
    struct gw_plim *l1 = gw_plim_get(&w[0], pool, &def, wake), *l2, *lv;
    struct up_budget *b;

    /* an outage: the old version's one request in flight took the floor's 3 retries */
    up_budget_start(&l1->name->budget);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_budget_retry(&l1->name->budget, 1), 0);
    /* the push: the new version's request finds the budget spent, not a fresh floor */
    pools[0] = p2;
    l2 = gw_plim_get(&w[0], p2, &def2, wake);
    lv = gw_plim_get(&w[0], v, &def, wake);
    b = &l2->name->budget;
    ck_assert_uint_eq(b->percent, 50); /* the newest definition's */
    up_budget_start(b);
    ck_assert_uint_eq(b->active, 5);
    ck_assert_int_eq(up_budget_retry(b, 1), -1);   /* 4 retries of 6 > max(3, 50 %) */
    ck_assert_uint_eq(lv->name->budget.active, 0); /* another pool's is its own */
    ck_assert_int_eq(up_budget_retry(&lv->name->budget, 1), 0);
    /* a late request of the old version (it started before the push) has
     * made its limits on another worker: the percent stays the newest's */
    ck_assert_uint_eq(gw_plim_get(&w[1], p2, &def2, wake)->name->budget.percent, 50);
    ck_assert_uint_eq(gw_plim_get(&w[1], pool, &def, wake)->name->budget.percent, 50);
    /* the old version's requests end, its limits are pruned: the count goes on */
    for (int i = 0; i < 3; i++)
        up_budget_end(&l1->name->budget, 1);
    up_budget_end(&l1->name->budget, 0);
    gw_plim_put(l1);
    gw_plim_prune(&w[0]);
    for (struct gw_plim *l = w[0].plims; l; l = l->next)
        ck_assert_ptr_ne(l, l1);
    ck_assert_uint_eq(b->active, 1);
    ck_assert_int_eq(up_budget_retry(b, 1), 0);
    pools[0] = pool;
    for (unsigned i = 0; i < 2; i++)
        gw_plim_free_all(&w[i]);
    up_pool_release(p2);
    up_pool_release(v);
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("gateway_limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, shares);
    tcase_add_test(tc, retries_only);
    tcase_add_test(tc, slots_and_the_next_server);
    tcase_add_test(tc, prune);
    tcase_add_test(tc, a_changed_pool_keeps_the_slots_taken);
    tcase_add_test(tc, a_shared_slot_wakes_only_those_waiting_for_it);
    tcase_add_test(tc, a_changed_pool_keeps_the_retry_budget);
    tcase_add_test(tc, a_full_server_leaves_its_requests_to_the_balancer);
    tcase_add_test(tc, a_retry_asks_the_budget_before_the_balancer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(limits_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
