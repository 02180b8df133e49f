/*
 * gateway.h - the gateway's process and its workers, their counters, and
 * what the data plane offers the worker (accept, sweeps, prune, drain).
 * The connections themselves are conn.h's and upconn.h's.
 *
 * Each worker thread owns an event_base (EVENT_BASE_FLAG_NOLOCK), its own
 * SO_REUSEPORT listening sockets, its client and upstream connections, its
 * access-log buffer and counters. Other threads reach a worker only through
 * its notify pipe (memcached's pattern). Everything a request reads from
 * configuration comes from the snapshot it pinned when its head arrived.
 */
#ifndef SY_GATEWAY_H
#define SY_GATEWAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <llhttp.h>

#include "admin/api.h"
#include "admin/pipeline.h"
#include "admin/snapshot.h"
#include "admin/http1/request.h"
#include "gateway/io_tls.h"
#include "gateway/log.h"
#include "gateway/upgrade.h"
#include "router/router.h"

struct gw_worker;
struct gw_conn;
struct gw_codec;
struct gw_plim;

/* Per-worker counters: written by their worker only (relaxed single-writer
 * stores), summed by readers. */
struct gw_counters {
    _Atomic uint64_t requests;
    _Atomic uint64_t requests_proto[ADM_NPROTOS]; /* by protocol (admin/api.h) */
    _Atomic uint64_t status[6];                   /* by class: [1] 1xx ... [5] 5xx, [0] unused */
    _Atomic uint64_t grpc[ADM_GRPC_NCODES];       /* gRPC answers by grpc-status (req.c) */
    _Atomic uint64_t conns_open;
    _Atomic uint64_t conns_total;
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic uint64_t upstream_errors;
    _Atomic uint64_t conns_dropped;             /* out of memory or over the limit */
    _Atomic uint64_t access_dropped;            /* access-log lines lost (log.c) */
    _Atomic uint64_t dur[ADM_HIST_BUCKETS + 1]; /* request duration histogram */
    _Atomic uint64_t dur_sum_us;
    _Atomic uint64_t up[ADM_HIST_BUCKETS + 1]; /* upstream time to response head */
    _Atomic uint64_t up_sum_us;
    /* closed to admit a new connection (worker.c): [0] idle keep-alive ones
     * at limits.max_connections, [1] ones without a whole first request
     * head at limits.max_pending_connections */
    _Atomic uint64_t conns_reclaimed[2];
    /* a pool's retries and queue are counted per pool, in the pool's own
     * per-worker block that outlives a changed definition: up_pool_count */
};

/* The bucket of <seconds> in adm_hist_bounds. */
static inline int gw_hist_bucket(double seconds)
{
    int i = 0;
    while (i < ADM_HIST_BUCKETS && seconds > adm_hist_bounds[i])
        i++;
    return i;
}

static inline void gw_count(_Atomic uint64_t *c, uint64_t d)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

struct gw_process {
    struct adm_swap swap;
    unsigned nworkers;
    struct gw_worker *workers;
    const char *config_path; /* NULL: embedded default */
    int access_fd;           /* the access log; its target is replaced with dup2() */
    _Atomic int access_on;   /* 0: access_log off, lines are not even formatted */
    _Atomic int draining;
    _Atomic unsigned running; /* workers still running */
    _Atomic unsigned conns;   /* open client connections, all workers */
    _Atomic unsigned parked;  /* of which accepted over the limit, waiting */
    /* accept failures (EMFILE...) since the last line that logged them, and
     * when (gw_now_ms) the next such line may come: one for all workers */
    _Atomic unsigned accept_failures;
    _Atomic long long accept_log_next;
    struct event_base *admin_base;
    /* An upgrade's hand-over (main.c): the workers stop accepting and put
     * duplicates of their listening sockets here, under hand_mu, each
     * counting itself in <handed_workers> once done. */
    pthread_mutex_t hand_mu;
    struct gw_handed *handed;
    size_t nhanded;
    int hand_failed; /* a duplicate could not be made */
    _Atomic unsigned handed_workers;
};

/* Admission's queues of a worker's client connections (gw_worker.cq): a
 * connection is in one at most, oldest first. conn.c moves connections
 * between them as their state changes, worker.c closes their oldest to
 * make room for new ones. */
enum gw_conn_q {
    GW_CONN_Q_NONE,    /* busy with a request, or closing after one */
    GW_CONN_Q_PARKED,  /* accepted over limits.max_connections: waits unread */
    GW_CONN_Q_PENDING, /* admitted, without a whole request head: its first not
                        * whole yet (a TLS handshake, no byte, part of a head, or
                        * the close after a bad one), or part of a later head with
                        * nothing of its responses left to send */
    GW_CONN_Q_IDLE,    /* keep-alive between requests, nothing buffered either way */
    GW_CONN_NQ,
};

/* A worker's listening socket, made by the admin thread (listen.c) and its
 * worker's from the moment it is handed over. It lives as long as the
 * config has its address, and after that until its last connection closed:
 * connections point at it. Whether it speaks TLS, and with which
 * certificates, comes from the snapshot, per connection. */
struct gw_listener {
    struct evconnlistener *lev;
    struct gw_worker *w;
    evutil_socket_t fd; /* until the worker wraps it */
    size_t index;       /* in the config that added it: where to look first */
    unsigned nconns;    /* its client connections still open */
    int closed;         /* gone from the config: its connections close after their request */
    char addr[64];      /* its address as configured */
};

/* A change to a worker's listeners, queued by the admin thread (listen.c)
 * and applied by the worker on its next notify. */
struct gw_lchange {
    struct gw_lchange *next;
    struct gw_listener *add; /* a listener to open (the worker's from now on), or */
    char remove[64];         /* the address of one to close */
    _Atomic unsigned *left;  /* with <remove>: counted down once it is closed */
};

/* The sessions of a worker's TLS upstream connections, for resuming the
 * next connection to the same server: a small direct-mapped table keyed by
 * (client context, pool, server), written and read by its worker only. */
#define GW_UP_SESSIONS 64
struct gw_up_session {
    const void *ctx, *pool;
    size_t server;
    SSL_SESSION *s;
};

/* The stream limit a server's SETTINGS last said, for the next connection
 * to it before its own SETTINGS come (h2up.c). */
struct gw_h2up_seen {
    const void *pool;
    size_t server;
    uint32_t max;
};
#define GW_H2UP_SEEN 16

struct gw_worker {
    unsigned id;
    struct gw_process *proc;
    pthread_t thread;
    struct event_base *base;
    struct gw_listener **listeners; /* open ones: the config's addresses */
    size_t nlisteners;
    int listening; /* listeners enabled */
    /* listener changes from the admin thread, oldest first, under lq_mu */
    pthread_mutex_t lq_mu;
    int lq_ready; /* lq_mu initialized */
    struct gw_lchange *lq;
    int notify_fd[2];
    struct event *notify_ev;
    struct event *tick_ev;  /* once a second: idle upstream connections */
    struct event *sweep_ev; /* every GW_SWEEP_MS: connection timeouts, access-log flush */
    char date[48];          /* "Date: ...\r\n" */
    size_t date_len;
    time_t date_s; /* the second <date> shows */
    char *log;     /* access-log buffer */
    size_t log_len, log_cap;
    struct gw_log_clock log_clock;       /* the access log's current second, UTC */
    struct gw_log_clock log_clock_local; /* and local, for the combined format */
    unsigned nconns;                     /* open client connections of this worker */
    /* admission's queues ([0] unused), their lengths, and the idle one's
     * length again, for the other workers to read */
    TAILQ_HEAD(gw_conn_tq, gw_conn) cq[GW_CONN_NQ];
    unsigned ncq[GW_CONN_NQ];
    _Atomic unsigned nidle;
    int admitting;           /* worker.c is closing connections to make room */
    long long accept_resume; /* accept failed (EMFILE...): paused until then (gw_now_ms) */
    int draining;
    /* an upgrade hands the listeners over: not accepting meanwhile ('U',
     * 'u' to accept again); the drain that follows keeps idle keep-alive
     * connections until its deadline ('G', then 'W': worker.c) */
    int handing;
    uint32_t reqid_prefix; /* set before the worker starts */
    /* The last request id handed out, as its 24 hex digits: the prefix and
     * worker (10), then a sequence (14) incremented in place (conn.c). */
    char reqid_last[24];
    int reqid_ready;
    LIST_HEAD(gw_conn_list, gw_conn) conns;       /* every client connection */
    LIST_HEAD(gw_upconn_list, gw_upconn) upconns; /* every upstream connection */
    LIST_HEAD(gw_h2up_list, gw_h2up) h2ups;       /* every HTTP/2 upstream connection */
    struct evbuffer *h2up_head; /* proxy_h2.c's scratch: an upstream head read back */
    struct gw_h2up_seen h2up_seen[GW_H2UP_SEEN];
    char h2up_timeout[16]; /* proxy_h2.c: the grpc-timeout a try sends up, while it is built */
    /* Registered by worker.c: runs after a client connection accepted on
     * <l> was freed (conn.c counts it; admission is the worker's, and a
     * closed listener is freed with its last connection). */
    void (*conn_freed)(struct gw_worker *w, struct gw_listener *l);
    /* Registered by worker.c: runs when a connection joined the idle queue
     * while the listeners pause (at the cap, it can make room now). It
     * must not free a connection: it runs inside one's callback. */
    void (*conn_idle)(struct gw_worker *w);
    rt_ctx *rtctx; /* the router's scratch for regexp routes */
    /* Request-parser blocks given back by connections between requests
     * (conn.c), newest first, linked through their first word. */
    void *pmem;
    size_t pmem_size;
    unsigned pmem_n;
    /* HTTP/2's spare memory (h2.c): stream objects and nghttp2's small
     * blocks, NULL until the first HTTP/2 connection */
    struct gw_h2_cache *h2cache;
    struct gw_up_session up_sessions[GW_UP_SESSIONS];
    /* limits on upstream pools (limits.c), oldest first: the wake event
     * (proxy.c) serves the queues of a pool's older versions, whose
     * requests waited longer, before those of the pool a push made */
    struct gw_plim *plims;
    struct event *plim_ev; /* a slot freed while requests wait (proxy.c dispatches) */
    struct gw_counters ctr __attribute__((aligned(64)));
    struct gw_tls_counters tls_ctr;
    uint64_t ro_rand; /* a rollout's canary_key "request": this worker's generator (serve.c) */
};

/* <w>'s share of <max>, a limit for all workers together: max / workers,
 * the remainder going to the first workers, never 0. */
static inline unsigned gw_worker_share(const struct gw_worker *w, unsigned max)
{
    unsigned n = w->proc->nworkers ? w->proc->nworkers : 1;
    unsigned s = max / n + (w->id < max % n);

    return s ? s : 1;
}

/* worker.c */
/* A worker slot of <proc>, numbered <id>, ready for listener changes. -1
 * when out of resources. */
int gw_worker_init(struct gw_worker *w, struct gw_process *proc, unsigned id);
int gw_worker_start(struct gw_worker *w);
void gw_worker_destroy(struct gw_worker *w);
void gw_worker_notify(void *proc, unsigned id); /* adm_swap notify hook */
void gw_worker_listen_update(struct gw_worker *w);
/* On the admin thread, at the start (<start>: before the listeners open)
 * and at every publish: at the start the descriptor limit's soft value is
 * raised to the hard one; a limit below what limits.max_connections of
 * <cfg> needs is logged as a warning, once per such value. */
void gw_worker_fd_limit(const struct adm_config *cfg, int start);
/* Queues <ch> (taken) for worker <w> and wakes it when it runs. */
void gw_worker_lchange(struct gw_worker *w, struct gw_lchange *ch);

/* listen.c, on the admin thread: binding listeners, which are live. A
 * config that adds some gets them bound first, a socket per worker, before
 * it is persisted or published:
 * gw_listen_prepare() binds what <cfg> has and <live> (NULL at start) does
 * not, and says why at each path it cannot (in <errs>; the number of
 * errors); what it bound waits for gw_listen_commit() once <cfg> is
 * published, or gw_listen_abort(). The commit hands each worker its
 * sockets and tells it to close the listeners <live> had and <cfg> lacks;
 * a worker applies that on its notify. */
size_t gw_listen_prepare(struct gw_process *p, const struct adm_config *live,
                         const struct adm_config *cfg, struct adm_errors *errs);
void gw_listen_commit(struct gw_process *p, const struct adm_config *live,
                      const struct adm_config *cfg);
void gw_listen_abort(void);
/* An upgrade's start: the running process listens on <addrs> (copied) and
 * hands their sockets over, so gw_listen_prepare() binds only the others;
 * -1 out of memory. Then gw_listen_adopt() hands each worker its share of
 * <fds> (taken: each one used or closed is set to -1), checked by their
 * bound address against <cfg>: one to one, several to a worker when there
 * are more than workers, the missing ones opened beside them; a socket of
 * a listener <cfg> lacks is closed. The sockets adopted, or 0 with <errs>. */
int gw_listen_inherit(const char *const *addrs, size_t n);
/* Whether the socket <fd> is bound to <a> (getsockname). */
int gw_listen_bound_to(evutil_socket_t fd, const struct adm_addr *a);
size_t gw_listen_adopt(struct gw_process *p, const struct adm_config *cfg, struct gw_handed *fds,
                       size_t n, struct adm_errors *errs);
/* Closes what the process still holds (after the workers stopped). */
void gw_listen_free(void);

/* http1.c: a client connection on the accepted socket <fd> (owned from
 * now on) of listener <l>, through transport <ops> (gateway/io.h) with its
 * state <xprt>, waiting unread for admission when <parked>; with <h2>, its
 * first read decides whether it is HTTP/2's (gateway/h2.h). NULL when out
 * of memory (the socket is closed, the drop counted). */
struct gw_io_ops;
/* http1.c: the HTTP/1.1 codec (req.h) */
extern const struct gw_codec gw_http1_codec;
struct gw_conn *gw_http1_accept(struct gw_worker *w, struct gw_listener *l, evutil_socket_t fd,
                                const struct sockaddr *sa, int salen, int parked,
                                const struct gw_io_ops *ops, void *xprt, int h2);
/* h2.c: frees <w>'s HTTP/2 spare memory (after its connections). */
void gw_h2_cache_free(struct gw_worker *w);
/* local.c: encodes the local answers once; every worker calls it before serving. */
void gw_local_init(void);

/* conn.c */
/* A drain (<l> NULL), or listener <l> closing: closes the connections
 * between requests (of <l>), the parked ones (never read: admitting them
 * would only serve a last request), and the lingering ones (they do not
 * wait) */
void gw_conn_close_idle(struct gw_worker *w, const struct gw_listener *l);
void gw_conn_free_all(struct gw_worker *w); /* after gw_upconn_free_all() */
/* Every GW_SWEEP_MS: fires the client connections' timeouts (ours, not libevent's). */
#define GW_SWEEP_MS 100
void gw_conn_sweep(struct gw_worker *w);

/* upconn.c */
/* After a swap: closes idle upstream connections of pools no longer in use. */
void gw_upconn_prune(struct gw_worker *w);
/* Every GW_SWEEP_MS: fires the upstream connections' timeouts. */
void gw_upconn_sweep(struct gw_worker *w);
/* Once a second: closes parked upstream connections past their idle timeout. */
void gw_upconn_sweep_idle(struct gw_worker *w);
void gw_upconn_free_all(struct gw_worker *w);

/* proxy.c */
/* Every GW_SWEEP_MS: answers requests past their queue timeout, wakes the
 * queues a server back up can serve, prunes the limits of pools that left
 * the config. */
void gw_proxy_sweep(struct gw_worker *w);

/* log.c */
/* The error log's levels, most severe first. log_level "warn" (the default)
 * writes error, warn and notice lines: a notice is what an operator wants
 * to see without asking (the start, a reload, a drain, an audit line of an
 * accepted change) but is no warning, as nginx logs reloads at notice;
 * "error" writes only errors, "info" adds info and "debug" everything. */
enum { GW_LOG_ERROR = 0, GW_LOG_WARN, GW_LOG_NOTICE, GW_LOG_INFO, GW_LOG_DEBUG };
/* One line on stderr, "TIME [LEVEL] text", when <level> passes log_level;
 * any thread. */
void gw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs <errs> (a config's errors) under a "<what>:" line, one error a
 * line, at error. */
void gw_log_errors(const char *what, struct adm_errors *errs);
/* The last error line the calling thread logged ("" for none), without
 * its time and level. */
const char *gw_log_last_error(void);
/* Whether gw_log(<level>, ...) writes now: one relaxed atomic load. */
int gw_log_enabled(int level);
/* log_level <l> from now on, for every thread at once (lock-free). */
void gw_log_set_level(enum adm_log_level l);
void gw_access_flush(struct gw_worker *w);
/* The Date field of answers made here, kept to the second (called every
 * GW_SWEEP_MS; formats only when the second changed). */
void gw_date_update(struct gw_worker *w);

/* stats.c: the admin API's view of the workers' counters */
void gw_stats(void *proc, struct adm_gw_stats *st);
/* An upgrade: the counters of <p> as JSON (a new reference, NULL: out of
 * memory); and in the new process, before its workers serve, another's
 * taken as the base its own add to (-1: not this build's layout, ignored). */
json_t *gw_stats_export(struct gw_process *p);
int gw_stats_import(const json_t *o);

#endif
