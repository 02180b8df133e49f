/*
 * health.c - the health thread (health.h says who owns what): its own
 * event_base running every pool's active checks (a plain or TLS HTTP/1.1
 * GET with Connection: close through the transport seam, io.h, or a gRPC
 * health call over HTTP/2 on the same seam: health_grpc.h), the
 * owner of every pool's up_outlier object fed by the workers' rings, and
 * the one writer of the UP_H_CHECK and UP_H_EJECTED flags.
 *
 * The admin thread hands each new snapshot over as a plan (gw_health_update:
 * the pools retained, their check and ejection settings copied) under a
 * mutex, and wakes the thread through a pipe; the workers' rings wake it
 * through the same pipe. The thread merges a plan into its state by pool
 * name and server socket address (up_pool_match, the match the snapshot
 * build carried the health words by), so nothing is reset by an unrelated
 * push, nor by one that writes an address another way. The
 * mutex also guards the state against the admin API's reads
 * (gw_health_info); the thread holds it only while it runs a callback,
 * which never waits for I/O.
 */
#define _GNU_SOURCE
#include "gateway/health.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "admin/clock.h"
#include "gateway/gateway.h"
#include "gateway/health_grpc.h"
#include "gateway/io.h"
#include "gateway/io_tls.h"

/* What a pool's checks and ejection are, copied out of its config. */
struct hdef {
    int check; /* health_check present */
    char *path, *host;
    char *service; /* type "grpc": the service asked about ("": the server); NULL: "http" */
    unsigned interval_ms, timeout_ms, healthy, unhealthy;
    struct adm_statuses expect;
    int initially_unhealthy;
    int outlier; /* outlier.on and consecutive_failures > 0 */
    struct up_outlier_cfg ocfg;
    int panic;    /* every server down: the pool spreads over them all */
    SSL_CTX *tls; /* a reference, NULL: plain */
    int h2;       /* the pool speaks HTTP/2 (h2c, h2): an "http" check is an HTTP/2 GET */
};

struct probe;

/* One server of a pool, as the checker knows it. */
struct hsrv {
    struct hpool *hp;
    char *address;
    size_t idx; /* in hp->pool */
    struct sockaddr_storage ss;
    socklen_t salen;
    char *sni, *vhost; /* TLS: the SNI sent and the name verified (NULL: none) */
    char *host;        /* the Host sent without health_check.host: the address as
                        * configured (a resolved one's pool address adds its IP) */
    struct event *timer;
    uint64_t next_ms; /* when the timer fires */
    struct probe *probe;
    unsigned passes, fails; /* checks in a row */
    int check_down, ejected;
    uint64_t eject_until;
    int last_status; /* -1: none yet */
    double last_ms;
    uint64_t checks, check_failures, ejections;
};

struct hpool {
    char *name;
    up_pool *pool; /* a reference */
    struct hdef def;
    struct hsrv *srv;
    size_t n;
    up_outlier *o;
    struct event *expire; /* the next ejection's end */
    uint64_t all_down;
    /* srv_index's last match: a pool that is not this one (a reference,
     * NULL: none) and, for each of its servers, the index here or UP_NONE.
     * Kept while a push's pool waits for its merge (the admin API reads it
     * per server), which ends this record; one a worker's report asked
     * for (a pool a push replaced) is forgotten once the reports are
     * drained (forget_others), so that the cache never keeps a replaced
     * pool alive. */
    up_pool *other;
    size_t *other_idx;
};

/* A check in flight; it outlives its server when a push removes it. */
struct probe {
    LIST_ENTRY(probe) link; /* every probe, for the stop */
    struct hsrv *srv;       /* NULL: its server is gone, the answer is dropped */
    struct gw_io io;
    struct gw_hgrpc *grpc; /* a gRPC check's call, or an HTTP/2 GET's; NULL: HTTP/1.1 */
    int h2get;             /* <grpc> is an "http" check's GET over HTTP/2 */
    struct event *tmo;
    struct timespec t0;
};

/* A worker's ring to the health thread: single producer, single consumer,
 * head and tail on lines of their own. */
#define RING 256
struct ring {
    _Alignas(64) _Atomic unsigned head; /* the worker's */
    _Alignas(64) _Atomic unsigned tail; /* the health thread's */
    struct {
        up_pool *pool; /* a reference, dropped by the health thread */
        size_t server;
    } slot[RING];
};

struct plan {
    struct hpool *pools;
    size_t n;
};

static struct {
    pthread_t thread;
    int running;
    struct event_base *base;
    int wake[2];
    struct event *wake_ev;
    pthread_mutex_t mu;
    struct plan *pending; /* the admin thread's latest, not taken yet */
    struct plan cur;      /* the thread's */
    unsigned nworkers;
    /* set once the thread runs: workers start before it, and report
     * nothing until then */
    _Atomic(struct ring *) ring0;
    struct ring *rings;
    LIST_HEAD(, probe) probes;
    _Atomic uint64_t dropped; /* reports lost to a full ring */
    /* an upgrade: the old process's state, applied at the next wake-up
     * after the first plan's merge; <seeded> once it was */
    json_t *seed;
    _Atomic int seeded;
} H = {.wake = {-1, -1}, .mu = PTHREAD_MUTEX_INITIALIZER};

static struct timeval tv_ms(uint64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Drops hp's other pool and its match (match_other). */
static void forget_other(struct hpool *hp)
{
    free(hp->other_idx);
    hp->other_idx = NULL;
    up_pool_release(hp->other);
    hp->other = NULL;
}

/* Makes <pool> hp's other pool: up_pool_match's map of hp's pool against
 * it (servers at the same socket address however it is written, the n-th
 * of an address listed twice to the n-th: what the snapshot build carried
 * over by), turned round to index hp's servers by <pool>'s. The reference
 * taken keeps the pointer from naming another pool later. -1 on out of
 * memory, the previous match kept. */
static int match_other(struct hpool *hp, const up_pool *pool)
{
    size_t n = up_pool_nservers(pool);
    size_t *map = up_pool_match_new(hp->pool, pool, NULL);
    size_t *idx = map ? malloc((n ? n : 1) * sizeof(*idx)) : NULL;

    if (!idx) {
        free(map);
        return -1;
    }
    for (size_t o = 0; o < n; o++)
        idx[o] = UP_NONE;
    for (size_t k = 0; k < hp->n; k++)
        if (map[k] != UP_NONE)
            idx[map[k]] = k;
    free(map);
    forget_other(hp);
    hp->other = (up_pool *)pool; /* a reference changes no pool */
    up_pool_retain(hp->other);
    hp->other_idx = idx;
    return 0;
}

/* The index in <hp> of server <s> of <pool>: the same when <pool> is hp's,
 * else the one at the same socket address (a report from a pool a push
 * replaced since, or the admin's pool before its merge), matched once per
 * other pool (match_other). UP_NONE when <hp> does not have it, or out of
 * memory. */
static size_t srv_index(struct hpool *hp, const up_pool *pool, size_t s)
{
    if (pool == hp->pool)
        return s < hp->n ? s : UP_NONE;
    if (pool != hp->other && match_other(hp, pool) < 0)
        return UP_NONE;
    return s < up_pool_nservers(pool) ? hp->other_idx[s] : UP_NONE;
}

/* After the merge and the reports of one wake-up: no pool but a record's
 * own is asked about until the next push (the admin API reads the current
 * snapshot's, which is merged first), so every other pool is let go: a
 * replaced one that the reports named is freed with its last user, not
 * kept until the next push. */
static void forget_others(void)
{
    for (size_t i = 0; i < H.cur.n; i++)
        forget_other(&H.cur.pools[i]);
}

/* ---- plans (built on the admin thread, freed on either) ---- */

static void hpool_clear(struct hpool *hp)
{
    for (size_t i = 0; hp->srv && i < hp->n; i++) {
        struct hsrv *s = &hp->srv[i];
        if (s->probe)
            s->probe->srv = NULL;
        if (s->timer)
            event_free(s->timer);
        free(s->address);
        free(s->sni);
        free(s->vhost);
        free(s->host);
    }
    if (hp->expire)
        event_free(hp->expire);
    up_outlier_free(hp->o);
    free(hp->srv);
    free(hp->name);
    free(hp->def.path);
    free(hp->def.host);
    free(hp->def.service);
    SSL_CTX_free(hp->def.tls);
    forget_other(hp);
    up_pool_release(hp->pool);
}

static void plan_clear(struct plan *pl)
{
    for (size_t i = 0; pl->pools && i < pl->n; i++)
        hpool_clear(&pl->pools[i]);
    free(pl->pools);
    pl->pools = NULL;
    pl->n = 0;
}

static void plan_free(struct plan *pl)
{
    if (pl)
        plan_clear(pl);
    free(pl);
}

/* Copies what the checker needs of upstream <i> of <s> into <hp>. */
static int hpool_init(struct hpool *hp, const struct adm_snapshot *s, size_t i)
{
    const struct adm_upstream *u = &s->cfg->upstreams[i];
    const struct adm_health_check *hc = u->health_check;
    up_pool *p = s->pools[i];

    hp->pool = p;
    up_pool_retain(p);
    if (!(hp->name = strdup(u->name)))
        return -1;
    hp->def.panic = u->panic;
    hp->def.h2 = u->protocol != ADM_UP_H1;
    if (hc) {
        hp->def.check = 1;
        hp->def.interval_ms = hc->interval_ms;
        hp->def.timeout_ms = hc->timeout_ms;
        hp->def.healthy = hc->healthy_threshold;
        hp->def.unhealthy = hc->unhealthy_threshold;
        hp->def.expect = hc->expect;
        if (!(hp->def.path = strdup(hc->path)) || (hc->host && !(hp->def.host = strdup(hc->host))))
            return -1;
        if (hc->type == ADM_HC_GRPC && !(hp->def.service = strdup(hc->service ? hc->service : "")))
            return -1;
        hp->def.initially_unhealthy = u->initially_unhealthy;
    }
    if (u->outlier.on && u->outlier.consecutive_failures) {
        hp->def.outlier = 1;
        /* the workers count the row: one report is one row of failures */
        hp->def.ocfg =
            (struct up_outlier_cfg){1, u->outlier.base_ejection_ms, u->outlier.max_ejection_ms,
                                    u->outlier.max_ejection_percent};
    }
    if (s->uptls[i] && SSL_CTX_up_ref(s->uptls[i]))
        hp->def.tls = s->uptls[i];
    hp->n = up_pool_nservers(p);
    if (!(hp->srv = calloc(hp->n, sizeof(*hp->srv))))
        return -1;
    for (size_t k = 0; k < hp->n; k++) {
        struct hsrv *v = &hp->srv[k];
        /* the config server it came from (a host name gives several) */
        size_t tag = up_server_tag(p, k);
        const struct adm_addr *a = tag < u->nservers ? &u->servers[tag].addr : NULL;
        const char *name = u->tls ? u->tls->server_name : NULL;
        const struct sockaddr *sa = up_server_sockaddr(p, k, &v->salen);
        v->hp = hp;
        v->idx = k;
        v->last_status = -1;
        memcpy(&v->ss, sa, v->salen);
        if (!(v->address = strdup(up_server_address(p, k))))
            return -1;
        /* as upconn.c: SNI server_name, else the host name (never an IP) */
        v->sni = dup_or_null(name ? name : !a || a->numeric ? NULL : a->host);
        v->vhost = dup_or_null(name ? name : a ? a->host : NULL);
        if (!(v->host = strdup(a ? a->text : v->address)))
            return -1;
    }
    return 0;
}

void gw_health_update(const struct adm_snapshot *s)
{
    struct plan *pl = calloc(1, sizeof(*pl)), *old;

    if (!H.running || !pl)
        goto fail;
    if (s->npools && !(pl->pools = calloc(s->npools, sizeof(*pl->pools))))
        goto fail;
    for (size_t i = 0; i < s->npools; i++) {
        pl->n = i + 1;
        if (hpool_init(&pl->pools[i], s, i) < 0)
            goto fail;
    }
    pthread_mutex_lock(&H.mu);
    old = H.pending;
    H.pending = pl;
    pthread_mutex_unlock(&H.mu);
    plan_free(old);
    if (write(H.wake[1], "p", 1) < 0 && errno != EAGAIN)
        gw_log(GW_LOG_ERROR, "health: wake: %s", strerror(errno));
    return;
fail:
    if (H.running)
        gw_log(GW_LOG_ERROR, "health: out of memory: checks keep the previous config");
    plan_free(pl);
}

/* ---- publishing to the health words ---- */

/* Logs how <hp>, every server of it down, answers now: spread over them
 * all (panic) or 503. */
static void log_all_down(const struct hpool *hp)
{
    if (hp->def.panic)
        gw_log(GW_LOG_WARN,
               "upstream %s: every server is down: panic: requests go to all of them "
               "until one comes back",
               hp->name);
    else
        gw_log(GW_LOG_WARN,
               "upstream %s: every server is down: requests get 503 until one comes back",
               hp->name);
}

/* Logs and counts a transition of <hp> (every server down, or one back:
 * <v>). A panicking pool counts it alike: it is as much an outage, only
 * answered otherwise. <panic>: the pool spread over every server while
 * they were all down (its definition before the transition), so a server
 * back ends the panic rather than an outage: the pool never stopped
 * serving. */
static void pool_transition(struct hpool *hp, const struct hsrv *v, int panic)
{
    const char *who = v ? v->address : "(after a push)";

    if (up_pool_all_down(hp->pool)) {
        hp->all_down++;
        log_all_down(hp);
    } else if (panic) {
        gw_log(GW_LOG_NOTICE,
               "upstream %s: server %s is up: panic over: requests go to the servers that are up",
               hp->name, who);
    } else {
        gw_log(GW_LOG_NOTICE, "upstream %s: server %s is up: the pool serves again", hp->name, who);
    }
}

/* Sets or clears <flag> of <v> on its pool's word; 1 when that made the
 * pool go all down or come back. Writes nothing when the word already
 * says so (workers read that line on every pick). */
static int set_flag(struct hsrv *v, unsigned flag, int on, uint64_t now)
{
    if (!(up_health_flags(v->hp->pool, v->idx) & flag) == !on)
        return 0;
    return up_health_set(v->hp->pool, v->idx, flag, on, now);
}

/* set_flag, logging the pool's transitions once each. */
static void publish(struct hsrv *v, unsigned flag, int on, uint64_t now)
{
    if (set_flag(v, flag, on, now))
        pool_transition(v->hp, v, v->hp->def.panic);
}

static void arm_expire(struct hpool *hp, uint64_t now)
{
    uint64_t next = 0;

    for (size_t i = 0; i < hp->n; i++)
        if (hp->srv[i].ejected && (!next || hp->srv[i].eject_until < next))
            next = hp->srv[i].eject_until;
    if (next && hp->expire) {
        struct timeval tv = tv_ms(next > now ? next - now : 0);
        event_add(hp->expire, &tv);
    }
}

static void unejected(struct hsrv *v, uint64_t now)
{
    v->ejected = 0;
    v->eject_until = 0;
    publish(v, UP_H_EJECTED, 0, now);
    gw_log(GW_LOG_NOTICE, "upstream %s server %s: ejection over", v->hp->name, v->address);
}

static void expire_cb(evutil_socket_t fd, short what, void *arg)
{
    struct hpool *hp = arg;
    uint64_t now = adm_clock_ms();
    size_t s;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&H.mu);
    while (hp->o && (s = up_outlier_expire(hp->o, now, NULL)) != UP_NONE)
        unejected(&hp->srv[s], now);
    /* ejections that no up_outlier object knows (out of memory when it was
     * made) end by their time */
    for (size_t i = 0; i < hp->n; i++)
        if (hp->srv[i].ejected && hp->srv[i].eject_until <= now &&
            !(hp->o && up_outlier_ejected(hp->o, i)))
            unejected(&hp->srv[i], now);
    arm_expire(hp, now);
    pthread_mutex_unlock(&H.mu);
}

/* A worker's report: server <s> of <pool> failed a row of requests. */
static void report(up_pool *pool, size_t s, uint64_t now)
{
    const char *name = up_pool_name(pool);

    for (size_t i = 0; i < H.cur.n; i++) {
        struct hpool *hp = &H.cur.pools[i];
        size_t k;
        struct hsrv *v;
        if (!hp->o || strcmp(hp->name, name) != 0)
            continue;
        if ((k = srv_index(hp, pool, s)) == UP_NONE || (v = &hp->srv[k])->ejected)
            return;
        if (!up_outlier_report(hp->o, hp->pool, k, 1, now))
            return; /* max_ejection_percent reached, or the last server up */
        v->ejected = 1;
        v->ejections++;
        v->eject_until = now + up_outlier_ejection_ms(hp->o, k);
        publish(v, UP_H_EJECTED, 1, now);
        gw_log(GW_LOG_WARN, "upstream %s server %s: ejected for %llu ms (failures in a row)",
               hp->name, v->address, (unsigned long long)up_outlier_ejection_ms(hp->o, k));
        arm_expire(hp, now);
        return;
    }
}

void gw_health_report(unsigned w, up_pool *pool, size_t s)
{
    struct ring *rings = atomic_load_explicit(&H.ring0, memory_order_acquire), *r;
    unsigned h;

    if (!rings)
        return;
    r = &rings[w];
    h = atomic_load_explicit(&r->head, memory_order_relaxed);

    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING) {
        atomic_fetch_add_explicit(&H.dropped, 1, memory_order_relaxed);
        return;
    }
    up_pool_retain(pool);
    r->slot[h % RING].pool = pool;
    r->slot[h % RING].server = s;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    if (write(H.wake[1], "r", 1) < 0 && errno != EAGAIN)
        gw_log(GW_LOG_ERROR, "health: wake: %s", strerror(errno));
}

static void drain_rings(uint64_t now)
{
    for (unsigned w = 0; w < H.nworkers; w++) {
        struct ring *r = &H.rings[w];
        unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        unsigned h = atomic_load_explicit(&r->head, memory_order_acquire);
        for (; t != h; t++) {
            report(r->slot[t % RING].pool, r->slot[t % RING].server, now);
            up_pool_release(r->slot[t % RING].pool);
        }
        atomic_store_explicit(&r->tail, t, memory_order_release);
    }
}

/* ---- active checks ---- */

static void probe_free(struct probe *pr)
{
    LIST_REMOVE(pr, link);
    if (pr->srv)
        pr->srv->probe = NULL;
    gw_io_close(&pr->io);
    gw_hgrpc_free(pr->grpc);
    if (pr->tmo)
        event_free(pr->tmo);
    free(pr);
}

/* The check of <pr> ended with the HTTP <status> (0: no answer); a gRPC
 * check's call has the verdict. */
static void probe_done(struct probe *pr, int status)
{
    struct hsrv *v = pr->srv;
    uint64_t now = adm_clock_ms();

    if (v) {
        struct hpool *hp = v->hp;
        const char *why = pr->grpc ? gw_hgrpc_why(pr->grpc) : NULL;
        int ok = pr->grpc && !pr->h2get
                     ? status > 0 && !why
                     : status > 0 && !why && adm_statuses_has(&hp->def.expect, (unsigned)status);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        v->last_status = status;
        v->last_ms =
            (double)(t.tv_sec - pr->t0.tv_sec) * 1e3 + (double)(t.tv_nsec - pr->t0.tv_nsec) / 1e6;
        v->checks++;
        if (ok) {
            v->fails = 0;
            if (++v->passes >= hp->def.healthy && v->check_down) {
                v->check_down = 0;
                gw_log(GW_LOG_NOTICE, "upstream %s server %s: passed %u checks: up", hp->name,
                       v->address, v->passes);
                publish(v, UP_H_CHECK, 0, now);
            }
        } else {
            v->check_failures++;
            v->passes = 0;
            if (++v->fails >= hp->def.unhealthy && !v->check_down) {
                v->check_down = 1;
                if (why)
                    gw_log(GW_LOG_WARN, "upstream %s server %s: failed %u checks (%s): down",
                           hp->name, v->address, v->fails, why);
                else if (status)
                    gw_log(GW_LOG_WARN, "upstream %s server %s: failed %u checks (status %d): down",
                           hp->name, v->address, v->fails, status);
                else
                    gw_log(GW_LOG_WARN, "upstream %s server %s: failed %u checks (no answer): down",
                           hp->name, v->address, v->fails);
                publish(v, UP_H_CHECK, 1, now);
            }
        }
    }
    probe_free(pr);
}

/* "HTTP/1.x NNN" at the start of a line in the input: the status, 0 when
 * it is not that, -1 while the line is incomplete. */
static int status_of(struct evbuffer *in)
{
    struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_CRLF);
    char line[16];
    size_t n;

    if (eol.pos < 0)
        return evbuffer_get_length(in) > 8192 ? 0 : -1;
    n = evbuffer_copyout(in, line, sizeof(line) - 1) < 0 ? 0 : (size_t)eol.pos;
    if (n < 12 || memcmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ')
        return 0;
    for (int i = 9; i < 12; i++)
        if (line[i] < '0' || line[i] > '9')
            return 0;
    if (n > 12 && line[12] != ' ')
        return 0;
    return (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
}

static void probe_read(struct gw_io *io, void *arg)
{
    struct probe *pr = arg;
    int st = !pr->grpc                     ? status_of(io->in)
             : gw_hgrpc_read(pr->grpc) < 0 ? -1
                                           : gw_hgrpc_http_status(pr->grpc);

    if (st >= 0) {
        pthread_mutex_lock(&H.mu);
        probe_done(arg, st);
        pthread_mutex_unlock(&H.mu);
    }
}

static void probe_write(struct gw_io *io, void *arg)
{
    (void)io;
    (void)arg;
}

static void probe_event(struct gw_io *io, short what, void *arg)
{
    struct probe *pr = arg;

    if (what & GW_IO_CONNECTED) {
        if (!pr->grpc) {
            gw_io_read(io, 1);
            return;
        }
        if (gw_hgrpc_start(pr->grpc) == 0)
            return;
    }
    pthread_mutex_lock(&H.mu);
    probe_done(arg, 0);
    pthread_mutex_unlock(&H.mu);
}

static void probe_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pthread_mutex_lock(&H.mu);
    probe_done(arg, 0);
    pthread_mutex_unlock(&H.mu);
}

/* Starts a check of <v>; a failure to start counts as a failed check. */
static void probe_start(struct hsrv *v)
{
    struct hpool *hp = v->hp;
    struct probe *pr = calloc(1, sizeof(*pr));
    const struct gw_io_ops *ops = &gw_io_plain;
    void *xprt = NULL;
    struct timeval tv = tv_ms(hp->def.timeout_ms);
    int fd = -1, one = 1;

    if (!pr)
        return;
    pr->srv = v;
    v->probe = pr;
    LIST_INSERT_HEAD(&H.probes, pr, link);
    clock_gettime(CLOCK_MONOTONIC, &pr->t0);
    if (!(pr->tmo = evtimer_new(H.base, probe_timeout, pr)) || evtimer_add(pr->tmo, &tv) < 0)
        goto fail;
    fd = socket(v->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (hp->def.tls) {
        if (!(xprt = gw_tls_client_new(hp->def.tls, fd, v->sni, v->vhost, NULL))) {
            close(fd);
            goto fail;
        }
        ops = &gw_io_tls;
    }
    if (gw_io_init(&pr->io, H.base, fd, 0, ops, xprt) < 0)
        goto fail;
    gw_io_setcb(&pr->io, probe_read, probe_write, probe_event, pr);
    if (hp->def.service) {
        if (!(pr->grpc = gw_hgrpc_new(&pr->io, hp->def.host ? hp->def.host : v->host,
                                      hp->def.service, hp->def.tls != NULL, hp->def.timeout_ms)))
            goto fail;
    } else if (hp->def.h2) { /* the pool's servers speak HTTP/2 only */
        if (!(pr->grpc = gw_hgrpc_new_get(&pr->io, hp->def.host ? hp->def.host : v->host,
                                          hp->def.path, hp->def.tls != NULL)))
            goto fail;
        pr->h2get = 1;
    } else {
        evbuffer_add_printf(pr->io.out,
                            "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: switchyard-health-check\r\n"
                            "Connection: close\r\n\r\n",
                            hp->def.path, hp->def.host ? hp->def.host : v->host);
    }
    if (gw_io_connect(&pr->io, (const struct sockaddr *)&v->ss, v->salen) < 0)
        goto fail;
    return;
fail:
    if (!pr->tmo) {
        probe_done(pr, 0);
        return;
    }
    /* reported from the loop, as any other failed check */
    event_active(pr->tmo, EV_TIMEOUT, 1);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct hsrv *v = arg;
    struct timeval tv = tv_ms(v->hp->def.interval_ms);

    (void)fd;
    (void)what;
    pthread_mutex_lock(&H.mu);
    v->next_ms = adm_clock_ms() + v->hp->def.interval_ms;
    evtimer_add(v->timer, &tv);
    /* a check slower than the interval is not doubled; a host name not
     * resolved yet has no address to check */
    if (!v->probe && v->ss.ss_family != AF_UNSPEC)
        probe_start(v);
    pthread_mutex_unlock(&H.mu);
}

/* ---- merging a plan ---- */

static int same_servers(const struct hpool *a, const struct hpool *b, const size_t *map)
{
    if (!map || a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (map[i] != i)
            return 0;
    return 1;
}

/* Makes <hp>'s events and carries over what <old> (may be NULL) knew of
 * the same pool: per server at the same socket address (up_pool_match, as the
 * snapshot build carried its health word), its check counts, state,
 * ejection (with its row of ejections: up_outlier_carry), timer phase and
 * check in flight; the up_outlier object itself when the server list and
 * its settings are the same. Then the pool's health words are made to say
 * what the checker knows. */
static void hpool_adopt(struct hpool *hp, struct hpool *old, uint64_t now)
{
    int was_down = old && up_pool_all_down(old->pool);
    size_t *map = old ? up_pool_match_new(hp->pool, old->pool, NULL) : NULL;

    if (old && !map)
        gw_log(GW_LOG_ERROR, "health: out of memory: the checks of %s start over", hp->name);
    if (!(hp->expire = evtimer_new(H.base, expire_cb, hp)))
        gw_log(GW_LOG_ERROR, "health: out of memory: ejections of %s never end", hp->name);
    if (hp->def.outlier) {
        if (old && old->o && same_servers(hp, old, map) &&
            !memcmp(&hp->def.ocfg, &old->def.ocfg, sizeof(hp->def.ocfg))) {
            hp->o = old->o;
            old->o = NULL;
        } else {
            hp->o = up_outlier_new(&hp->def.ocfg, hp->n);
        }
    }
    for (size_t k = 0; k < hp->n; k++) {
        struct hsrv *v = &hp->srv[k];
        struct hsrv *ov = map && map[k] != UP_NONE ? &old->srv[map[k]] : NULL;
        uint64_t first = 0;
        if (ov) {
            v->passes = ov->passes;
            v->fails = ov->fails;
            v->check_down = ov->check_down && hp->def.check;
            v->ejected = ov->ejected && hp->def.outlier;
            v->eject_until = v->ejected ? ov->eject_until : 0;
            v->last_status = ov->last_status;
            v->last_ms = ov->last_ms;
            v->checks = ov->checks;
            v->check_failures = ov->check_failures;
            v->ejections = ov->ejections;
            if (hp->o && old->o) { /* within the new pool's max_ejected */
                up_outlier_carry(hp->o, k, old->o, map[k]);
                v->ejected = up_outlier_ejected(hp->o, k);
            }
            if (hp->n == 1) /* a lone server is never ejected */
                v->ejected = 0;
            if (!v->ejected)
                v->eject_until = 0;
            if ((v->probe = ov->probe)) {
                v->probe->srv = v;
                ov->probe = NULL;
            }
            if (hp->def.check && old->def.check && old->def.interval_ms == hp->def.interval_ms)
                first = ov->next_ms > now ? ov->next_ms - now : 0;
        } else {
            v->check_down = hp->def.check && hp->def.initially_unhealthy;
        }
        if (hp->def.check) { /* a new server is checked at once */
            struct timeval tv;
            v->next_ms = now + first;
            tv = tv_ms(first);
            if (!(v->timer = evtimer_new(H.base, timer_cb, v)) || evtimer_add(v->timer, &tv) < 0)
                gw_log(GW_LOG_ERROR, "health: out of memory: %s of %s is not checked", v->address,
                       hp->name);
        }
        set_flag(v, UP_H_CHECK, v->check_down, now);
        set_flag(v, UP_H_EJECTED, v->ejected, now);
    }
    /* the pool as a whole, old object or new, against what it said before;
     * a push that turns panic on or off while every server stays down
     * changes how the pool answers (not the outage, which is not counted
     * again): said once too */
    if (old)
        hp->all_down = old->all_down;
    if (!up_pool_all_down(hp->pool) != !was_down)
        pool_transition(hp, NULL, old && old->def.panic);
    else if (was_down && !old->def.panic != !hp->def.panic)
        log_all_down(hp);
    arm_expire(hp, now);
    free(map);
}

static void merge(struct plan *pl)
{
    uint64_t now = adm_clock_ms();

    for (size_t i = 0; i < pl->n; i++) {
        struct hpool *old = NULL;
        for (size_t j = 0; j < H.cur.n && !old; j++)
            if (!strcmp(H.cur.pools[j].name, pl->pools[i].name))
                old = &H.cur.pools[j];
        hpool_adopt(&pl->pools[i], old, now);
    }
    plan_clear(&H.cur);
    H.cur = *pl;
    free(pl);
}

/* ---- an upgrade: the state carried across ---- */

/* One server's state as an upgrade carries it. */
static json_t *srv_export(const struct hsrv *v, uint64_t now)
{
    return json_pack("{s:b,s:b,s:I,s:i,s:i,s:i,s:f,s:I,s:I,s:I}", "check_down", v->check_down,
                     "ejected", v->ejected, "eject_left_ms",
                     (json_int_t)(v->eject_until > now ? v->eject_until - now : 0), "passes",
                     (int)v->passes, "fails", (int)v->fails, "last_status", v->last_status,
                     "last_ms", v->last_ms, "checks", (json_int_t)v->checks, "check_failures",
                     (json_int_t)v->check_failures, "ejections", (json_int_t)v->ejections);
}

json_t *gw_health_export(void)
{
    json_t *pools = json_object();
    uint64_t now = adm_clock_ms();

    pthread_mutex_lock(&H.mu);
    for (size_t i = 0; pools && i < H.cur.n; i++) {
        const struct hpool *hp = &H.cur.pools[i];
        json_t *srv = json_object();
        for (size_t k = 0; srv && k < hp->n; k++)
            json_object_set_new(srv, hp->srv[k].address, srv_export(&hp->srv[k], now));
        json_object_set_new(
            pools, hp->name,
            json_pack("{s:I,s:o*}", "all_down", (json_int_t)hp->all_down, "servers", srv));
    }
    pthread_mutex_unlock(&H.mu);
    return pools;
}

/* <v> takes what the old process knew of it (<js>). */
static void srv_import(struct hsrv *v, const json_t *js, uint64_t now)
{
    const struct hpool *hp = v->hp;
    json_int_t left = json_integer_value(json_object_get(js, "eject_left_ms"));

    v->check_down = json_is_true(json_object_get(js, "check_down")) && hp->def.check;
    v->ejected = json_is_true(json_object_get(js, "ejected")) && hp->def.outlier && hp->n > 1;
    v->eject_until = v->ejected ? now + (uint64_t)(left > 0 ? left : 0) : 0;
    v->passes = (unsigned)json_integer_value(json_object_get(js, "passes"));
    v->fails = (unsigned)json_integer_value(json_object_get(js, "fails"));
    v->last_status = (int)json_integer_value(json_object_get(js, "last_status"));
    v->last_ms = json_real_value(json_object_get(js, "last_ms"));
    v->checks = (uint64_t)json_integer_value(json_object_get(js, "checks"));
    v->check_failures = (uint64_t)json_integer_value(json_object_get(js, "check_failures"));
    v->ejections = (uint64_t)json_integer_value(json_object_get(js, "ejections"));
    publish(v, UP_H_CHECK, v->check_down, now);
    publish(v, UP_H_EJECTED, v->ejected, now);
}

/* The seed applied to every pool and server known by name and address
 * (an ejection ends by its time: no up_outlier object knows it). Under
 * H.mu, on the health thread. */
static void seed_apply(void)
{
    uint64_t now = adm_clock_ms();

    for (size_t i = 0; i < H.cur.n; i++) {
        struct hpool *hp = &H.cur.pools[i];
        const json_t *jp = json_object_get(H.seed, hp->name);
        const json_t *srv = json_object_get(jp, "servers");
        if (!jp)
            continue;
        hp->all_down = (uint64_t)json_integer_value(json_object_get(jp, "all_down"));
        for (size_t k = 0; k < hp->n; k++) {
            const json_t *js = json_object_get(srv, hp->srv[k].address);
            if (js)
                srv_import(&hp->srv[k], js, now);
        }
        arm_expire(hp, now);
    }
    json_decref(H.seed);
    H.seed = NULL;
    atomic_store(&H.seeded, 1);
}

int gw_health_import(const json_t *pools)
{
    struct timespec nap = {0, 1000 * 1000};

    if (!H.running || !json_is_object(pools))
        return -1;
    pthread_mutex_lock(&H.mu);
    json_decref(H.seed);
    H.seed = json_incref((json_t *)pools);
    atomic_store(&H.seeded, 0);
    pthread_mutex_unlock(&H.mu);
    if (write(H.wake[1], "p", 1) < 0 && errno != EAGAIN)
        return -1;
    /* before the sockets are adopted: a server down stays out from the
     * first request on */
    for (int i = 0; i < 2000 && !atomic_load(&H.seeded); i++)
        nanosleep(&nap, NULL);
    return atomic_load(&H.seeded) ? 0 : -1;
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    char buf[256];
    ssize_t n;
    int stop = 0;
    struct plan *pl;

    (void)what;
    (void)arg;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        stop |= memchr(buf, 'X', (size_t)n) != NULL;
    pthread_mutex_lock(&H.mu);
    pl = H.pending;
    H.pending = NULL;
    if (pl)
        merge(pl);
    if (H.seed && !H.pending)
        seed_apply();
    drain_rings(adm_clock_ms());
    forget_others();
    pthread_mutex_unlock(&H.mu);
    if (stop)
        event_base_loopbreak(H.base);
}

static void *health_main(void *arg)
{
    (void)arg;
    event_base_dispatch(H.base);
    return NULL;
}

int gw_health_start(unsigned nworkers)
{
    struct event_config *ec = event_config_new();

    H.nworkers = nworkers;
    H.rings = aligned_alloc(64, sizeof(*H.rings) * nworkers);
    if (!ec || !H.rings)
        goto fail;
    for (unsigned w = 0; w < nworkers; w++) {
        atomic_init(&H.rings[w].head, 0);
        atomic_init(&H.rings[w].tail, 0);
    }
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    if (!(H.base = event_base_new_with_config(ec)))
        goto fail;
    if (pipe2(H.wake, O_NONBLOCK | O_CLOEXEC) < 0)
        goto fail;
    if (!(H.wake_ev = event_new(H.base, H.wake[0], EV_READ | EV_PERSIST, wake_cb, NULL)) ||
        event_add(H.wake_ev, NULL) < 0)
        goto fail;
    if (pthread_create(&H.thread, NULL, health_main, NULL) != 0)
        goto fail;
    event_config_free(ec);
    H.running = 1;
    atomic_store_explicit(&H.ring0, H.rings, memory_order_release);
    return 0;
fail:
    gw_log(GW_LOG_ERROR, "health thread: cannot start: %s", strerror(errno));
    if (ec)
        event_config_free(ec);
    gw_health_stop();
    return -1;
}

void gw_health_stop(void)
{
    if (H.running) {
        if (write(H.wake[1], "X", 1) < 0)
            gw_log(GW_LOG_ERROR, "health: stop: %s", strerror(errno));
        pthread_join(H.thread, NULL);
        H.running = 0;
    }
    json_decref(H.seed);
    H.seed = NULL;
    plan_free(H.pending);
    H.pending = NULL;
    while (!LIST_EMPTY(&H.probes))
        probe_free(LIST_FIRST(&H.probes));
    plan_clear(&H.cur);
    /* reports still in the rings hold pool references */
    for (unsigned w = 0; H.rings && w < H.nworkers; w++) {
        struct ring *r = &H.rings[w];
        for (unsigned t = r->tail; t != r->head; t++)
            up_pool_release(r->slot[t % RING].pool);
    }
    if (H.wake_ev)
        event_free(H.wake_ev);
    H.wake_ev = NULL;
    if (H.base)
        event_base_free(H.base);
    H.base = NULL;
    for (int i = 0; i < 2; i++)
        if (H.wake[i] >= 0)
            close(H.wake[i]);
    H.wake[0] = H.wake[1] = -1;
    atomic_store(&H.ring0, NULL);
    free(H.rings);
    H.rings = NULL;
}

void gw_health_info(void *arg, const up_pool *pool, size_t server, struct adm_srv_health *out)
{
    (void)arg;
    pthread_mutex_lock(&H.mu);
    for (size_t i = 0; i < H.cur.n; i++) {
        struct hpool *hp = &H.cur.pools[i];
        const struct hsrv *v;
        size_t k;
        if (strcmp(hp->name, up_pool_name(pool)) != 0)
            continue;
        if (server == UP_NONE) {
            out->all_down = hp->all_down;
        } else if ((k = srv_index(hp, pool, server)) != UP_NONE) {
            v = &hp->srv[k];
            out->last_status = v->last_status;
            out->last_ms = v->last_ms;
            out->checks = v->checks;
            out->check_failures = v->check_failures;
            out->ejections = v->ejections;
        }
        break;
    }
    pthread_mutex_unlock(&H.mu);
}
