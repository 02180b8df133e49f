/*
 * upstream.h - upstream pools: servers, balancing and per-worker state.
 *
 * A pool is one upstream definition (servers, weights, balance). It is
 * created by the admin thread when a snapshot is built and shared by every
 * later snapshot whose definition of it is unchanged, so its balancer state,
 * counters and idle connections survive route-only changes. Each worker owns
 * one slot of per-worker state inside the pool (balancer position, idle
 * connections) and touches no other: no locks on the request path.
 *
 * Pools are reference counted atomically: snapshots retain them on the admin
 * thread, and every upstream connection, idle or busy, holds a reference on
 * its worker, so a pool outlives its connections. The idle connections of a
 * pool that no snapshot uses any more are closed by their worker's idle
 * timeout. The pool stores idle connections as opaque pointers.
 *
 * Files: pool.c (life and reference count), servers.c (the server list),
 * slab.c (per-worker blocks on their own cache lines), balance.c (picking a
 * server), idle.c (idle connection stacks), counters.c (per-worker counters).
 * Private structures are in up_int.h.
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

/* Creates a pool named <name> (copied) with <n> servers (copied) for
 * <nworkers> workers, keeping up to <keepalive> idle connections per worker
 * and server. <key> (copied) identifies the definition: snapshots reuse a
 * pool whose key is unchanged. One reference. NULL on out of memory. */
up_pool *up_pool_new(const char *name, const char *key, const struct up_server_def *servers,
                     size_t n, unsigned nworkers, unsigned keepalive);
void up_pool_retain(up_pool *p);
/* Drops a reference; frees the pool at zero. NULL is a no-op. */
void up_pool_release(up_pool *p);

const char *up_pool_name(const up_pool *p);
const char *up_pool_key(const up_pool *p);
size_t up_pool_nservers(const up_pool *p);
const char *up_server_address(const up_pool *p, size_t i);
const struct sockaddr *up_server_sockaddr(const up_pool *p, size_t i, socklen_t *len);

/* Smooth weighted round robin (nginx's): picks a server index for worker
 * <w>; every worker interleaves its own picks in weight proportion. */
size_t up_pick(up_pool *p, unsigned w);

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

#endif
