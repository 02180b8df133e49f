/*
 * balancer_bench.c - micro-benchmark of upstream/'s balancers.
 *
 * Usage: balancer_bench [-q]
 *        balancer_bench -m
 *        balancer_bench -c BALANCER N [equal]
 *   -q  quick: 3 runs of ~5 ms each, for checking the harness only
 *   -m  the hash table's keys moved and balance only (below): no timing,
 *       so it can run on a busy machine
 *   -c  for callgrind: BB_CG_PICKS picks of one scenario (N servers of
 *       weights 1..4, or all 1 with "equal"), no calibration and no report;
 *       bb_run is the function to count, e.g.
 *         valgrind --tool=callgrind --toggle-collect=bb_run \
 *             balancer_bench -c least_conn 100
 *       and its instructions over BB_CG_PICKS are one pick's, with its
 *       request's start and the oldest's end for least_conn and random_two.
 *       Prints one line: the picks and whether they allocated.
 *
 * Prints one Markdown report on stdout:
 *   - ns per pick (up_select on one worker) for round_robin, least_conn,
 *     random_two and hash at 3, 100 and 1,000 servers of weights 1..4, and
 *     least_conn again with equal weights (the common pool: keys are counts).
 *     least_conn and random_two pick against a standing load (every server
 *     holds 0..3 requests in flight, and each pick's request starts and the
 *     oldest ends, outside the timed region's per-pick cost: see below); the
 *     hash cycles through 4,096 precomputed key hashes. Each scenario is
 *     calibrated to ~50 ms a run, then all are run round-robin <runs> times;
 *     a row shows the median and the min and max relative to it. The
 *     "control" row is round_robin at 100 servers again, on a second pool:
 *     its true difference from that row is zero, so its gap is the run's
 *     noise.
 *   - heap allocations per pick, counted by alloc_count.c's malloc
 *     interposition around the timed regions (must be 0);
 *   - the Maglev table build (up_pool_new_opts with UP_HASH, 65,537 slots)
 *     at 1,000 servers: median of 9 builds (target <= 5 ms);
 *   - keys moved when one server of N is removed (100,000 keys; target
 *     <= 1.2 / N at equal weights, 1.2 times the removed server's share
 *     with weights 1..4), with equal weights and with weights 1..4;
 *   - the hash table's balance: each server's slots over its weight's
 *     share, min, max and rms, at 3, 100 and 1,000 servers.
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall
 * time: on a shared machine a descheduled thread would otherwise count the
 * other processes' time as its own.
 * The timed loop of least_conn and random_two also starts each picked
 * request and ends the oldest (up_request_start/end), since a pick without
 * them would leave the load unchanged; those two calls are two stores.
 * Targets: <= 30 ns a pick.
 */
#define _POSIX_C_SOURCE 200809L

#include "loadtest/router_bench/alloc_count.h"
#include "upstream/upstream.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BB_MAX_RUNS 9
#define BB_KEYS 4096
#define BB_WINDOW 256
#define BB_CG_PICKS 200000

#define BB_ESCAPE(p) __asm__ volatile("" : : "g"(p) : "memory")

static int bb_runs = BB_MAX_RUNS;
static double bb_target_ns = 50e6;

static uint64_t bb_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static void *bb_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (!p) {
        fprintf(stderr, "balancer_bench: out of memory\n");
        exit(1);
    }
    return p;
}

/* Server <i>'s weight in bb_pool_w's pools. */
static unsigned bb_weight(size_t i, int equal)
{
    return equal ? 1 : 1 + (unsigned)(i % 4);
}

/* A pool of <n> servers 10.0.x.y:80 with weights 1..4 (all 1 when
 * <equal>), skipping server <skip> (SIZE_MAX: none) so that the rest keep
 * their addresses. */
static up_pool *bb_pool_w(size_t n, size_t skip, const struct up_pool_opts *o, int equal)
{
    struct up_server_def *defs = bb_xcalloc(n, sizeof(*defs));
    struct sockaddr_in *sin = bb_xcalloc(n, sizeof(*sin));
    char(*names)[32] = bb_xcalloc(n, sizeof(*names));
    size_t k = 0;
    up_pool *p;

    for (size_t i = 0; i < n; i++) {
        if (i == skip)
            continue;
        sin[k].sin_family = AF_INET;
        sin[k].sin_port = htons(80);
        sin[k].sin_addr.s_addr = htonl((uint32_t)(0x0a000000u + i));
        snprintf(names[k], sizeof(names[k]), "10.0.%zu.%zu:80", i / 256, i % 256);
        defs[k] = (struct up_server_def){names[k], (const struct sockaddr *)&sin[k], sizeof(sin[k]),
                                         bb_weight(i, equal)};
        k++;
    }
    p = up_pool_new_opts("bench", "", defs, k, 1, 1, o);
    free(defs);
    free(sin);
    free(names);
    if (!p) {
        fprintf(stderr, "balancer_bench: pool of %zu servers failed\n", n);
        exit(1);
    }
    return p;
}

static up_pool *bb_pool(size_t n, size_t skip, const struct up_pool_opts *o)
{
    return bb_pool_w(n, skip, o, 0);
}

struct bb_scn {
    const char *name;
    size_t n;
    up_pool *p;
    int loaded; /* least_conn, random_two: start and end requests */
    uint64_t *keys;
    size_t ring[BB_WINDOW];
    unsigned head;
    uint64_t iters;
    double ns[BB_MAX_RUNS];
    uint64_t allocs, picks;
};

/* <iters> picks; returns the nanoseconds they took. Never inlined: -c
 * mode's callgrind counts it by name. */
__attribute__((noinline)) static uint64_t bb_run(struct bb_scn *s, uint64_t iters)
{
    struct up_pick rq = {0};
    uint64_t t0, t1, sink = 0;

    ac_start();
    t0 = bb_now();
    for (uint64_t i = 0; i < iters; i++) {
        rq.hash = s->keys[i % BB_KEYS];
        size_t srv = up_select(s->p, 0, &rq);
        sink += srv;
        if (s->loaded) {
            up_request_end(s->p, 0, s->ring[s->head]);
            up_request_start(s->p, 0, srv);
            s->ring[s->head] = srv;
            s->head = (s->head + 1) % BB_WINDOW;
        }
    }
    t1 = bb_now();
    ac_stop();
    BB_ESCAPE(&sink);
    return t1 - t0;
}

/* Scenario <s>: <n> servers of weights 1..4 (all 1 when <equal>), under
 * its standing load; calibrated unless <calibrate> is 0. */
static void bb_setup_c(struct bb_scn *s, const char *name, enum up_balance b, size_t n,
                       uint64_t *keys, int equal, int calibrate)
{
    struct up_pool_opts o = {.balance = b, .seed = 1, .fallback = 1};

    memset(s, 0, sizeof(*s));
    s->name = name;
    s->n = n;
    s->keys = keys;
    s->p = bb_pool_w(n, SIZE_MAX, &o, equal);
    s->loaded = b == UP_LEAST_CONN || b == UP_RANDOM_TWO;
    /* a standing load: the window's requests spread at random */
    for (unsigned i = 0; s->loaded && i < BB_WINDOW; i++) {
        s->ring[i] = (size_t)(keys[i] % n);
        up_request_start(s->p, 0, s->ring[i]);
    }
    /* calibrate: double until one run lasts a tenth of the target */
    uint64_t it = 1000;
    while (calibrate && (double)bb_run(s, it) < bb_target_ns / 10)
        it *= 2;
    s->iters = it * 10;
}

static void bb_setup(struct bb_scn *s, const char *name, enum up_balance b, size_t n,
                     uint64_t *keys, int equal)
{
    bb_setup_c(s, name, b, n, keys, equal, 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    double t[BB_MAX_RUNS];

    memcpy(t, v, (size_t)n * sizeof(*t));
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double bb_min(const double *v, int n)
{
    double m = v[0];

    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double bb_max(const double *v, int n)
{
    double m = v[0];

    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static void bb_maglev_build(void)
{
    struct up_pool_opts o = {.balance = UP_HASH};
    double ms[BB_MAX_RUNS];

    for (int r = 0; r < bb_runs; r++) {
        uint64_t t0 = bb_now();
        up_pool *p = bb_pool(1000, SIZE_MAX, &o);
        ms[r] = (double)(bb_now() - t0) / 1e6;
        up_pool_release(p);
    }
    printf("\nMaglev table build, 1,000 servers, 65,537 slots (whole up_pool_new_opts): "
           "median %.2f ms, min %.2f, max %.2f (target <= 5 ms: %s)\n",
           median(ms, bb_runs), bb_min(ms, bb_runs), bb_max(ms, bb_runs),
           median(ms, bb_runs) <= 5 ? "met" : "MISSED");
}

static void bb_keys_moved(void)
{
    static const size_t ns[] = {3, 10, 100, 1000};
    struct up_pool_opts o = {.balance = UP_HASH};
    const unsigned nkeys = 100000;

    printf("\nKeys moved when one server of N (the middle one) is removed, %u keys, "
           "65,537 slots. The fewest that can move are the removed server's own: its share "
           "(its weight over the total, 1/N at equal weights), so the target, 1.2/N at equal "
           "weights, is 1.2 x its share:\n\n",
           nkeys);
    printf("| weights | N | moved | fraction | x N | / its share | target <= 1.2 x its share |\n"
           "|---|---:|---:|---:|---:|---:|---|\n");
    for (int equal = 1; equal >= 0; equal--) {
        for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
            size_t n = ns[a], gone = n / 2;
            up_pool *all = bb_pool_w(n, SIZE_MAX, &o, equal), *less = bb_pool_w(n, gone, &o, equal);
            unsigned moved = 0, total = 0;
            for (size_t i = 0; i < n; i++)
                total += bb_weight(i, equal);
            for (unsigned k = 0; k < nkeys; k++) {
                struct up_pick rq = {.hash = up_hash(&k, sizeof(k))};
                size_t before = up_select(all, 0, &rq), after = up_select(less, 0, &rq);
                /* servers after the removed one shift down by one index */
                moved += before != (after >= gone ? after + 1 : after);
            }
            double f = (double)moved / nkeys, share = (double)bb_weight(gone, equal) / total;
            printf("| %s | %zu | %u | %.4f | %.2f | %.2f | %s |\n", equal ? "equal" : "1..4", n,
                   moved, f, f * (double)n, f / share, f <= 1.2 * share ? "met" : "MISSED");
            up_pool_release(all);
            up_pool_release(less);
        }
    }
}

/* How evenly the table shares its slots: every slot's owner (key hash =
 * slot number), each server's count over its weight's share. */
static void bb_table_balance(void)
{
    static const size_t ns[] = {3, 100, 1000};
    struct up_pool_opts o = {.balance = UP_HASH};
    const unsigned m = UP_MAGLEV_SIZE;

    printf("\nSlots per server against its weight's share (1.00: exact), 65,537 slots:\n\n"
           "| weights | N | min | max | rms deviation |\n|---|---:|---:|---:|---:|\n");
    for (int equal = 1; equal >= 0; equal--) {
        for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
            size_t n = ns[a];
            up_pool *p = bb_pool_w(n, SIZE_MAX, &o, equal);
            unsigned *count = bb_xcalloc(n, sizeof(*count)), total = 0;
            double lo = 1e9, hi = 0, sq = 0;
            for (size_t i = 0; i < n; i++)
                total += bb_weight(i, equal);
            for (unsigned x = 0; x < m; x++) {
                struct up_pick rq = {.hash = x};
                count[up_select(p, 0, &rq)]++;
            }
            for (size_t i = 0; i < n; i++) {
                double r = count[i] / ((double)m * bb_weight(i, equal) / total);
                lo = r < lo ? r : lo;
                hi = r > hi ? r : hi;
                sq += (r - 1) * (r - 1);
            }
            printf("| %s | %zu | %.2f | %.2f | %.1f%% |\n", equal ? "equal" : "1..4", n, lo, hi,
                   100 * sqrt(sq / (double)n));
            free(count);
            up_pool_release(p);
        }
    }
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        enum up_balance b;
    } algs[] = {{"round_robin", UP_ROUND_ROBIN},
                {"least_conn", UP_LEAST_CONN},
                {"random_two", UP_RANDOM_TWO},
                {"hash", UP_HASH}};
    static const size_t ns[] = {3, 100, 1000};
    struct bb_scn *scn = bb_xcalloc(16, sizeof(*scn));
    uint64_t *keys = bb_xcalloc(BB_KEYS, sizeof(*keys));
    size_t nscn = 0;

    if (argc > 1 && strcmp(argv[1], "-q") == 0) {
        bb_runs = 3;
        bb_target_ns = 5e6;
    }
    for (unsigned k = 0; k < BB_KEYS; k++)
        keys[k] = up_hash(&k, sizeof(k));
    if (argc > 1 && strcmp(argv[1], "-m") == 0) {
        bb_keys_moved();
        bb_table_balance();
        free(scn);
        free(keys);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "-c") == 0) {
        size_t a = 0, n = strtoul(argv[3], NULL, 10);
        while (a < 4 && strcmp(algs[a].name, argv[2]) != 0)
            a++;
        if (a == 4 || n == 0) {
            fprintf(stderr, "balancer_bench: -c BALANCER N [equal]\n");
            return 2;
        }
        bb_setup_c(&scn[0], algs[a].name, algs[a].b, n, keys, argc > 4, 0);
        uint64_t a0 = ac_allocs();
        bb_run(&scn[0], BB_CG_PICKS);
        printf("%s, %zu servers%s: %d picks, %s allocations\n", algs[a].name, n,
               argc > 4 ? " (equal weights)" : "", BB_CG_PICKS,
               ac_enabled() ? (ac_allocs() == a0 ? "0" : "NOT 0") : "uncounted");
        up_pool_release(scn[0].p);
        free(scn);
        free(keys);
        return 0;
    }
    for (size_t a = 0; a < 4; a++)
        for (size_t i = 0; i < 3; i++)
            bb_setup(&scn[nscn++], algs[a].name, algs[a].b, ns[i], keys, 0);
    /* least_conn with equal weights, the common pool: its keys are the counts */
    for (size_t i = 0; i < 3; i++)
        bb_setup(&scn[nscn++], "least_conn (equal weights)", UP_LEAST_CONN, ns[i], keys, 1);
    bb_setup(&scn[nscn++], "round_robin (control)", UP_ROUND_ROBIN, 100, keys, 0);

    for (int r = 0; r < bb_runs; r++) {
        for (size_t i = 0; i < nscn; i++) {
            uint64_t a0 = ac_allocs();
            scn[i].ns[r] = (double)bb_run(&scn[i], scn[i].iters) / (double)scn[i].iters;
            scn[i].allocs += ac_allocs() - a0;
            scn[i].picks += scn[i].iters;
        }
    }

    printf("# balancer_bench\n\nOne worker, %d interleaved runs per row (median; min and max "
           "relative to it). The machine is shared: read the control row's gap as the noise.\n\n",
           bb_runs);
    printf("| balancer | servers | ns/pick | min | max | allocs/pick | target <= 30 ns |\n");
    printf("|---|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < nscn; i++) {
        double m = median(scn[i].ns, bb_runs);
        printf("| %s | %zu | %.1f | %+.0f%% | %+.0f%% | %s | %s |\n", scn[i].name, scn[i].n, m,
               (bb_min(scn[i].ns, bb_runs) / m - 1) * 100,
               (bb_max(scn[i].ns, bb_runs) / m - 1) * 100,
               ac_enabled() ? (scn[i].allocs ? "NOT 0" : "0") : "n/a", m <= 30 ? "met" : "MISSED");
    }
    bb_maglev_build();
    bb_keys_moved();
    bb_table_balance();
    for (size_t i = 0; i < nscn; i++)
        up_pool_release(scn[i].p);
    free(scn);
    free(keys);
    return 0;
}
