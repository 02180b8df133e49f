/*
 * up_int.h - private structures of upstream/: the pool, its servers and the
 * per-worker block. Only the sources of upstream/ and its tests include this.
 *
 * Memory layout. Everything a worker writes (balancer position, idle stacks,
 * counters) lives in that worker's block of one slab: the slab starts on a
 * cache line and every block is a whole number of lines long, so no two
 * workers ever write the same line (tests/upstream/test_pool.c checks it by
 * address arithmetic). What the workers only read (servers, weights, the
 * per-worker pointer table) is written once by up_pool_new() and never
 * again, so it can share lines freely.
 */
#ifndef SY_UPSTREAM_INT_H
#define SY_UPSTREAM_INT_H

#include "upstream/upstream.h"

#include <stdatomic.h>
#include <sys/socket.h>

/* The line size assumed for separation. 64 bytes on x86-64 and most arm64. */
#define UP_CACHE_LINE 64

/* The per-worker, per-server counters (counters.c). */
enum up_counter { UP_C_REQUESTS, UP_C_CONNECTS, UP_NCOUNTERS };

struct up_server {
    char *address;
    struct sockaddr_storage ss;
    socklen_t salen;
    int weight; /* >= 1 */
};

/* One worker's view of one pool: pointers into that worker's block of the
 * slab. The pointers themselves are read-only after up_pool_new(). */
struct up_worker {
    long long *cw;            /* smooth WRR current weights, per server */
    _Atomic uint64_t *counts; /* [server * UP_NCOUNTERS + counter], this worker's */
    unsigned *nidle;          /* idle connections parked, per server */
    void **idle;              /* nservers stacks of <keepalive> slots */
};

struct up_pool {
    _Atomic unsigned refs;
    char *name, *key;
    size_t n;
    unsigned nworkers, keepalive;
    long long total_weight;
    struct up_server *servers; /* n of them */
    struct up_worker *ws;      /* nworkers of them */
    void *slab;                /* the per-worker blocks, ws[w] points into them */
    size_t stride;             /* bytes per block, a multiple of UP_CACHE_LINE */
};

/* servers.c: copies <n> definitions into a new array (NULL on out of memory
 * or an address too long for sockaddr_storage); frees one such array. */
struct up_server *up_servers_new(const struct up_server_def *defs, size_t n);
void up_servers_free(struct up_server *s, size_t n);
/* servers.c: a malloc'd copy of <s>, NULL on out of memory. */
char *up_strdup(const char *s);

/* slab.c: nworkers blocks of at least <bytes> each, zeroed, the first on a
 * cache line and each a whole number of lines; the block size is stored in
 * <*stride>. Freed with free(). NULL on out of memory or overflow. */
void *up_slab_new(unsigned nworkers, size_t bytes, size_t *stride);

#endif
