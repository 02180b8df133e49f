/*
 * upstream.h - upstream pools: servers, balancing and per-worker state.
 *
 * A pool is one upstream definition (servers, weights, balance). It is
 * created by the admin thread when a snapshot is built and shared by every
 * later snapshot whose definition of it is unchanged, so its balancer state,
 * counters and idle connections survive route-only changes. A changed pool
 * is a new one that takes over, with up_pool_carry(), the state of every
 * server the old one had at the same address: health, counters and idle
 * connections (one state object per server, shared by both pools). Each
 * worker owns one slot of per-worker state inside the pool and inside each
 * server's state (balancer position, in-flight counts, idle connections,
 * counters) and touches no other: no locks on the request path.
 *
 * Pools are reference counted atomically: snapshots retain them on the admin
 * thread, and every upstream connection, idle or busy, holds a reference on
 * its worker, so a pool outlives its connections. The idle connections of a
 * pool that no snapshot uses any more are closed by their worker's idle
 * timeout. The pool stores idle connections as opaque pointers.
 *
 * Files: pool.c (life and reference count), servers.c (the server list),
 * state.c (per-server state and its carry-over), slab.c (per-worker blocks on their own cache
 * lines), balance.c (the balancer interface and what every balancer shares: the tried set, health,
 * slow start, in-flight counts), one file per balancer (rr.c, least_conn.c,
 * random_two.c, maglev.c), health.c (the health words), outlier.c (passive
 * ejection), budget.c (retry budgets), queue.c (pending requests), hash.c
 * (key hashing), idle.c (idle connection stacks), counters.c (per-worker
 * counters). Private structures are in up_int.h.
 *
 * Threads. "Worker <w>" functions are called by worker w only. Health words
 * are written by their owner (the checker or the ejection logic) and read by
 * every worker with relaxed loads. up_outlier, up_budget and up_queue
 * objects are single-threaded values: their owner alone calls them. Time is
 * always passed in (milliseconds on one monotonic clock): nothing here reads
 * a clock.
 */
#ifndef SY_UPSTREAM_H
#define SY_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct up_pool up_pool;

struct up_server_def {
    const char *address; /* as written, for logs */
    const struct sockaddr *sa;
    socklen_t salen;
    unsigned weight; /* >= 1 */
};

/* How a pool balances (upstreams.NAME.balance). */
enum up_balance {
    UP_ROUND_ROBIN, /* smooth weighted round robin, the default */
    UP_LEAST_CONN,  /* fewest requests in flight (this worker's), weighted */
    UP_RANDOM_TWO,  /* two weighted random candidates, the less loaded one */
    UP_HASH,        /* Maglev table on a key hash (struct up_pick.hash) */
};

#define UP_MAGLEV_SIZE 65537 /* the default table size, a prime */

/* 1 when <m> can be the Maglev table size of a pool of <n> servers: a
 * prime above <n> that fits 32 bits. */
int up_maglev_size_ok(size_t m, size_t n);

struct up_pool_opts {
    enum up_balance balance;
    size_t table_size;      /* UP_HASH: a prime > nservers; 0 means UP_MAGLEV_SIZE */
    int fallback;           /* UP_HASH: an unusable server's keys go to the next one */
    int panic;              /* every server down: spread over all of them anyway */
    uint64_t slow_start_ms; /* a server back up ramps its weight over this; 0: off */
    uint64_t seed;          /* random_two's and slow start's generators */
};

/* Creates a pool named <name> (copied) with <n> servers (copied) for
 * <nworkers> workers, keeping up to <keepalive> idle connections per worker
 * and server. <key> (copied) identifies the definition: snapshots reuse a
 * pool whose key is unchanged. <opts> (copied; NULL: round robin, nothing
 * else) chooses the balancer. One reference. NULL on out of memory or
 * invalid options (a table size that is not a prime above n). */
up_pool *up_pool_new_opts(const char *name, const char *key, const struct up_server_def *servers,
                          size_t n, unsigned nworkers, unsigned keepalive,
                          const struct up_pool_opts *opts);
/* up_pool_new_opts with round robin and no options. */
up_pool *up_pool_new(const char *name, const char *key, const struct up_server_def *servers,
                     size_t n, unsigned nworkers, unsigned keepalive);
void up_pool_retain(up_pool *p);
/* Drops a reference; frees the pool at zero. NULL is a no-op. */
void up_pool_release(up_pool *p);
/* The references held on <p> now: a count other threads may change at any
 * moment, for tests and assertions (who still keeps a pool alive). */
unsigned up_pool_refs(const up_pool *p);

/* Carries over to <p> the pool's counters of <from> (the two then share
 * them: up_pool_count) and the state of each server of <from> that <p> has at
 * the same socket address (each old server to one new one at most): its
 * health word (flags and since), its counters and, when <share_idle> and
 * both pools keep as many idle connections per worker, its idle
 * connections: then both pools share one state object, so a health change
 * or a count through either is seen by both, and an idle connection parked
 * through <from> is taken through <p> (its holder switches its pool
 * reference: up_pool_same_server). Without <share_idle> (the connections
 * would not fit <p>, e.g. another TLS setup) health and counters are
 * copied. In-flight counts stay with each pool. Admin thread, before <p>
 * is published; <from> (borrowed, NULL: nothing) stays valid. Returns how
 * many servers were carried over. */
size_t up_pool_carry(up_pool *p, const up_pool *from, int share_idle);
/* Fills <map> (<p>'s number of servers) with, for each server of <p>, the
 * server of <from> at the same socket address, or UP_NONE: the match
 * up_pool_carry() makes (each server of <from> matched once at most, in
 * order). Returns how many matched, UP_NONE on out of memory. Any thread;
 * both pools borrowed. */
size_t up_pool_match(const up_pool *p, const up_pool *from, size_t *map);
/* up_pool_match() into a new map (to free; <p>'s number of servers, at
 * least one), and in <kept> (NULL: not wanted) how many matched; NULL on
 * out of memory. The one way the admin and health threads match. */
size_t *up_pool_match_new(const up_pool *p, const up_pool *from, size_t *kept);
/* up_pool_carry() along <map>, up_pool_match()'s map of <p> against <from>
 * (borrowed): for a caller that matches once and uses the match for more
 * than the carry-over (admin/snapshot.c: the health flags too). */
void up_pool_carry_map(up_pool *p, const up_pool *from, const size_t *map, int share_idle);
/* The server of <p> that shares its state with server <s> of <other>, or
 * UP_NONE: where an idle connection of <other>'s server <s> now belongs. */
size_t up_pool_same_server(const up_pool *p, const up_pool *other, size_t s);

const char *up_pool_name(const up_pool *p);
const char *up_pool_key(const up_pool *p);
/* Worker <w>'s own slot in <p>, in its block of the pool: a pointer it
 * keeps there (the gateway: its limits on the pool, found so without a
 * search per request). NULL until the worker sets it; nobody but worker
 * <w> reads or writes it. */
void **up_pool_worker_slot(up_pool *p, unsigned w);
size_t up_pool_nservers(const up_pool *p);
const char *up_server_address(const up_pool *p, size_t i);
const struct sockaddr *up_server_sockaddr(const up_pool *p, size_t i, socklen_t *len);
/* Tags: the caller's own index for each server (its config entry; several
 * servers may share one: a host name with several addresses). 0 unless set.
 * up_pool_set_tags copies <n> of them and may be called only before the
 * pool is shared with another thread; -1 on out of memory. */
int up_pool_set_tags(up_pool *p, const size_t *tags);
size_t up_server_tag(const up_pool *p, size_t i);

/* The servers a request already tried (a retry goes elsewhere when it can).
 * A value the caller keeps with the request; zero-initialize it. */
#define UP_TRIED_MAX 8
struct up_tried {
    unsigned n;
    uint32_t s[UP_TRIED_MAX];
};
/* Adds <s>; past UP_TRIED_MAX the oldest entry is forgotten. */
void up_tried_add(struct up_tried *t, size_t s);
int up_tried_has(const struct up_tried *t, size_t s);

/* What a pick may depend on. Zero-initialize what you do not use. */
struct up_pick {
    const struct up_tried *tried; /* NULL: nothing tried yet */
    uint64_t hash;                /* UP_HASH: up_hash() of the request's key */
    uint64_t now_ms;              /* for slow start; 0: no ramp */
};

#define UP_NONE ((size_t)-1)

/* Worker <w> picks a server for a request through the pool's balancer:
 * never one in <rq->tried> nor one that is down, unless every server is down
 * and the pool panics (then health is ignored). UP_NONE when nothing is
 * usable: up_pool_all_down() tells a 503 from "every server was tried". No
 * lock, no allocation; the only memory written is worker <w>'s own (its
 * cache-line-separated blocks). */
size_t up_select(up_pool *p, unsigned w, const struct up_pick *rq);
/* up_select with nothing tried: today's call. With round robin it is nginx's
 * smooth weighted round robin, each worker interleaving its own picks in
 * weight proportion. The hash balancer gets key hash 0. Returns UP_NONE
 * only when every server is down and the pool does not panic. */
size_t up_pick(up_pool *p, unsigned w);
/* Worker <w> starts and ends a request on server <s>: the in-flight counts
 * least_conn and random_two balance on, and the balancer's hooks. Every
 * start has one end. */
void up_request_start(up_pool *p, unsigned w, size_t s);
void up_request_end(up_pool *p, unsigned w, size_t s);
/* Requests in flight on server <s>, summed over the workers (metrics). */
uint64_t up_inflight(const up_pool *p, size_t s);

/* Hashes a key (client address, header value, cookie, path) for UP_HASH. */
uint64_t up_hash(const void *key, size_t len);

/* Health: one word per server. The flags say why a server is down; none
 * set means up. <since_ms> is when the word last changed between up and down
 * (slow start ramps from it). */
enum {
    UP_H_CHECK = 1,     /* failed its active health check */
    UP_H_EJECTED = 2,   /* ejected by outlier detection */
    UP_H_RESOLVING = 4, /* address not known yet */
};
/* The owner sets (<on>) or clears <flag> of server <s> at <now_ms>. Returns
 * 1 when this made the whole pool go down or come back (every server down,
 * or the first one up again: log it once, count it), else 0. Safe against
 * a second owner writing another flag at the same time. */
int up_health_set(up_pool *p, size_t s, unsigned flag, int on, uint64_t now_ms);
/* Server <s>, up and new to its pool (added by a push or a DNS answer to a
 * pool that was there before), counts as up since <now_ms>, so that slow
 * start ramps it as one that came back (Envoy ramps new hosts too). The
 * admin thread, before <p> is published. A no-op while it is down. */
void up_health_added(up_pool *p, size_t s, uint64_t now_ms);
/* The flags of server <s> (0: up) and when they last changed up/down. */
unsigned up_health_flags(const up_pool *p, size_t s);
uint64_t up_health_since(const up_pool *p, size_t s);
/* 1 when every server is down: answer 503 at once, or panic. */
int up_pool_all_down(const up_pool *p);
/* 1 when every server of <p> but <s> is down (whatever <s> is). */
int up_pool_others_down(const up_pool *p, size_t s);
/* 1 when <p> is in panic now: every server down, and the pool has panic
 * on, so it spreads over them all instead of answering 503. */
int up_pool_panicking(const up_pool *p);
/* Slow start: the share, in thousandths, of its weight that a server up
 * since <since_ms> gets at <now_ms> with a ramp of <ramp_ms>: from 100
 * (10 %, Envoy's min_weight_percent) up to 1000 once the ramp is over. */
unsigned up_slow_start_permille(uint64_t since_ms, uint64_t now_ms, uint64_t ramp_ms);

/* Idle keep-alive connections of worker <w> to server <s>. put returns -1
 * when the worker already keeps <keepalive> of them (the caller closes the
 * connection). get returns the most recently parked one, or NULL. remove
 * takes out a given connection (it died while idle); -1 if it is not there. */
int up_idle_put(up_pool *p, unsigned w, size_t s, void *conn);
void *up_idle_get(up_pool *p, unsigned w, size_t s);
int up_idle_remove(up_pool *p, unsigned w, size_t s, void *conn);
size_t up_idle_count(const up_pool *p, unsigned w, size_t s);

/* Per-worker counters, summed by readers on other threads with relaxed
 * loads (metrics only). */
void up_count_request(up_pool *p, unsigned w, size_t s);
void up_count_connect(up_pool *p, unsigned w, size_t s);
uint64_t up_requests(const up_pool *p, size_t s);
uint64_t up_connects(const up_pool *p, size_t s);
/* Why a try on a server failed, counted per server: its TCP connect failed
 * or timed out; its TLS handshake failed; no response (or the rest of one)
 * within the timeout; the connection closed or reset before the response
 * ended; it answered a 5xx status. */
enum up_failure { UP_F_CONNECT, UP_F_TLS, UP_F_TIMEOUT, UP_F_RESET, UP_F_5XX, UP_NFAILURES };
void up_count_failure(up_pool *p, unsigned w, size_t s, enum up_failure kind);
uint64_t up_failures(const up_pool *p, size_t s, enum up_failure kind);
/* "connect", "tls", "timeout", "reset", "5xx": the metrics' kind label. */
const char *up_failure_name(enum up_failure kind);
/* Per-worker counts of a pool as a whole (its requests, not one server's):
 * what /metrics shows per pool. They live in one block per pool name, not
 * in the pool: up_pool_carry() hands the block of the pool it carries from
 * to the new one, so a push that changes a pool's definition (the same
 * name) never sets its counters back. UP_PC_QUEUED is a gauge: its worker
 * adds 1 and later takes 1 off (d = -1). */
enum up_pool_counter {
    UP_PC_RETRIES,          /* tries sent again to another server */
    UP_PC_BUDGET_EXHAUSTED, /* retries the retry budget refused */
    UP_PC_QUEUED,           /* requests waiting for a connection slot now */
    UP_PC_QUEUE_OVERFLOWS,  /* answered 503: the queue was full, or none */
    UP_PC_QUEUE_TIMEOUTS,   /* answered 503: queue_timeout_ms passed */
    UP_NPOOL_COUNTERS
};
/* Worker <w> adds <d> to counter <k> of <p>: a relaxed load and store on
 * lines only worker <w> writes. */
void up_pool_count(up_pool *p, unsigned w, enum up_pool_counter k, int64_t d);
/* Counter <k> of <p> summed over the workers (relaxed loads, any thread). */
uint64_t up_pool_counted(const up_pool *p, enum up_pool_counter k);

/* Worker <w> records one outcome on server <s> for outlier detection
 * (<failed>: a connect failure, a reset, a status that counts) and gets
 * its failures in a row on <s>, as this worker saw them: 0 after a
 * success. A success writes nothing when the row is already 0, so the
 * request path stays free of stores. up_failure_row_reset() starts the
 * row again (after the worker reported it to the ejection's owner). */
unsigned up_failure_row(up_pool *p, unsigned w, size_t s, int failed);
void up_failure_row_reset(up_pool *p, unsigned w, size_t s);

/* Passive outlier detection (Envoy's): <consecutive_failures> failures in a
 * row eject a server for <base_ejection_ms> times the number of its
 * ejections in a row, capped at <max_ejection_ms>; at most
 * <max_ejection_percent> of the pool (but always at least one server) is
 * ejected at a time, a pool of one server never is, and neither is the
 * last server of a pool that is up (nginx). Zeros in the config mean Envoy's
 * defaults: 5, 30 s, 300 s, 10 %. A returned server that goes <base_ejection_ms> without a new
 * ejection takes one off its row count. The object only decides; its owner
 * applies the decisions with up_health_set(..., UP_H_EJECTED, ...). */
struct up_outlier_cfg {
    unsigned consecutive_failures;
    uint64_t base_ejection_ms, max_ejection_ms;
    unsigned max_ejection_percent;
};
typedef struct up_outlier up_outlier;
up_outlier *up_outlier_new(const struct up_outlier_cfg *cfg, size_t nservers);
void up_outlier_free(up_outlier *o);
/* One outcome of server <s> at <now_ms> (<failed>: a connect failure, a
 * reset or a 5xx the config counts). Returns 1 when it ejects <s> now.
 * <p> (may be NULL) is the pool <s> is in: an ejection that would leave it
 * no server up (the others down by their check, ejected, or unresolved) is
 * refused, as nginx tries its servers anyway when all are down. */
int up_outlier_report(up_outlier *o, const up_pool *p, size_t s, int failed, uint64_t now_ms);
/* Returns, one per call, a server whose ejection is over at <now_ms>, or
 * UP_NONE; then <*next_ms> (if not NULL) is the next ejection's end, or 0. */
size_t up_outlier_expire(up_outlier *o, uint64_t now_ms, uint64_t *next_ms);
int up_outlier_ejected(const up_outlier *o, size_t s);
/* How long server <s>'s current (or last) ejection lasts, and its row. */
uint64_t up_outlier_ejection_ms(const up_outlier *o, size_t s);
unsigned up_outlier_ejections(const up_outlier *o, size_t s);
/* Server <s> of <o> takes over what server <from_s> of <from> has: its
 * failures and ejections in a row, and its ejection if it is ejected (it
 * ends when it would have, and counts in <o>'s max_ejection_percent) while
 * <o> has room for it under that cap, else it is back at once (a pool
 * shrunk to one server): a changed server list keeps the history of the
 * servers it keeps. */
void up_outlier_carry(up_outlier *o, size_t s, const up_outlier *from, size_t from_s);

/* Retry budget (Envoy's): at most <percent> of the requests in flight may
 * be retries, with a floor of <floor> retries. A value kept per worker and
 * pool (by name: its versions share one); zeros mean 20 % and 3. */
struct up_budget {
    unsigned percent, floor;
    uint32_t active, retries;
    uint64_t exhausted; /* retries refused so far */
};
void up_budget_init(struct up_budget *b, unsigned percent, unsigned floor);
/* Changes the settings of <b> (zeros as in up_budget_init), keeping what
 * it counts: a pool's changed definition goes on with the same budget. */
void up_budget_set(struct up_budget *b, unsigned percent, unsigned floor);
/* A request starts and ends (<retry>: it was admitted by up_budget_retry). */
void up_budget_start(struct up_budget *b);
void up_budget_end(struct up_budget *b, int retry);
/* Asks to turn a request in flight into a retry: 0 and counted when the
 * budget allows it, -1 (and counted as exhausted) when not. A retry so
 * admitted is a request of its own: up_budget_end(b, 1) ends it. When the
 * failed try <reached> no server (its connect failed: no byte of the
 * request left), the retry is no extra load on any server, only the
 * request's first: 1, admitted whatever the budget, and it counts as a
 * first attempt (up_budget_start .. up_budget_end(b, 0)). */
int up_budget_retry(struct up_budget *b, int reached);

/* A bounded FIFO of pending requests (opaque pointers) with deadlines, for
 * one worker and pool. push fails when full (answer 503). A request queued
 * again (it woke and found no slot) goes to the back with the deadline of
 * its first push, so deadlines need not follow the order of the queue. */
typedef struct up_queue up_queue;
up_queue *up_queue_new(unsigned capacity);
void up_queue_free(up_queue *q);
int up_queue_push(up_queue *q, void *req, uint64_t deadline_ms);
/* The oldest request, or NULL. */
void *up_queue_pop(up_queue *q);
/* The first queued request whose deadline is <= <now_ms> (taken out), or
 * NULL. */
void *up_queue_expired(up_queue *q, uint64_t now_ms);
/* Takes <req> out (its client left); -1 when it is not queued. */
int up_queue_remove(up_queue *q, void *req);
unsigned up_queue_len(const up_queue *q);
/* The earliest deadline, or 0 when empty (to arm a timer). */
uint64_t up_queue_next_deadline(const up_queue *q);

#endif
