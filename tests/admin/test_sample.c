/*
 * test_sample.c - the live sample's rings (admin/sample.c, sample.h): an
 * entry copied back byte for byte at every string length, the halves and
 * the kept copy wrapping around, a worker that answers a flip late,
 * entries too long for a slot marked truncated, sets shared while their
 * size stays; and, under TSan as the "concurrency" label runs it, two
 * writer threads filling their rings (and serving flips when woken) while
 * a reader collects and reads them many times: every entry read is whole
 * (its strings agree with the number its path carries) and in order.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llhttp.h>

#include "admin/sample.h"

/* Records an entry as gateway/serve.c does: a method llhttp knows by its
 * id, the route id in a buffer of ADM_SAMPLE_ROUTE_PAD bytes at least. */
static void put(struct adm_sample_ring *r, const char *m, const char *h, const char *p,
                const char *route, unsigned status)
{
    char rbuf[300] = {0};
    size_t rl = route ? strlen(route) : 0;
    unsigned mid = strcmp(m, "GET") == 0      ? HTTP_GET
                   : strcmp(m, "DELETE") == 0 ? HTTP_DELETE
                                              : ADM_SAMPLE_METHOD_OTHER;

    memcpy(rbuf, route ? route : "", rl);
    adm_sample_put(r, mid, m, strlen(m), h, strlen(h), p, strlen(p),
                   route ? rbuf : adm_sample_noroute, rl, status);
}

/* Serves flip requests the way a worker's notify event does: the tests'
 * notify hook, called on the reader's thread while no writer runs. */
static void serve_now(void *arg, unsigned w)
{
    struct adm_sample_set *set = arg;

    adm_sample_serve(set->rings[w]);
}

/* Collects ring <w> of <set> (no writer running) and copies its kept
 * entries. */
static struct adm_sample *copy_all(struct adm_sample_set *set, unsigned w, size_t *n)
{
    struct adm_sample *v = calloc(set->size, sizeof(*v));

    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(adm_sample_collect(set, serve_now, set), 0);
    *n = adm_sample_copy(set, w, 0, set->size, v);
    return v;
}

/* GET and DELETE go by id, an unknown method as its token. */
static const char *method_of(size_t i)
{
    return i % 5 == 0 ? "PURGEALL" : i % 2 ? "GET" : "DELETE";
}

/* Route ids of 5 and of 40 bytes (past ADM_SAMPLE_ROUTE_PAD); none for
 * every third entry. */
static const char *route_of(size_t i)
{
    return i % 3 == 0 ? NULL : i % 4 == 1 ? "a-route-id-longer-than-thirty-two-bytes!" : "users";
}

START_TEST(every_length)
{
    struct adm_sample_set *set = adm_sample_set_new(1, 128);
    char host[80], path[160];
    struct adm_sample *v;
    size_t n;

    ck_assert_ptr_nonnull(set);
    for (size_t len = 0; len < 70; len++) { /* past every case of adm_sample_cpy */
        memset(host, 'a' + (int)(len % 26), len);
        host[len] = '\0';
        path[0] = '/';
        for (size_t i = 1; i < len + 1; i++)
            path[i] = (char)('0' + i % 10);
        path[len + 1] = '\0';
        put(set->rings[0], method_of(len), host, path, route_of(len), len % 3 ? 200 : 404);
    }
    v = copy_all(set, 0, &n);
    ck_assert_uint_eq(n, 70);
    for (size_t len = 0; len < n; len++) {
        const struct adm_sample *e = &v[len];
        ck_assert(!e->truncated);
        ck_assert_uint_eq(e->hlen, len);
        ck_assert_uint_eq(e->plen, len + 1);
        ck_assert_uint_eq(e->mlen, strlen(method_of(len)));
        ck_assert_mem_eq(e->method, method_of(len), e->mlen);
        for (size_t k = 0; k < len; k++)
            ck_assert_int_eq(e->host[k], 'a' + (int)(len % 26));
        ck_assert_int_eq(e->path[0], '/');
        for (size_t k = 1; k < e->plen; k++)
            ck_assert_int_eq(e->path[k], '0' + (int)(k % 10));
        if (len % 3) {
            ck_assert_uint_eq(e->status, 200);
            ck_assert_uint_eq(e->rlen, strlen(route_of(len)));
            ck_assert_mem_eq(e->route, route_of(len), e->rlen);
        } else {
            ck_assert_uint_eq(e->status, 404);
            ck_assert_ptr_null(e->route);
        }
    }
    free(v);
    adm_sample_set_release(set);
}
END_TEST

/* Puts entries <from>..<to> - 1 ("/p/<i>") into ring <w>. */
static void put_range(struct adm_sample_set *set, unsigned w, int from, int to)
{
    char path[32];

    for (int i = from; i < to; i++) {
        snprintf(path, sizeof(path), "/p/%d", i);
        put(set->rings[w], "GET", "h", path, NULL, 404);
    }
}

/* Checks that <v> holds entries <from>..<from> + <n> - 1, in order. */
static void check_range(const struct adm_sample *v, size_t n, int from)
{
    char path[32];

    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "/p/%d", from + (int)i);
        ck_assert_uint_eq(v[i].plen, strlen(path));
        ck_assert_mem_eq(v[i].path, path, v[i].plen);
    }
}

START_TEST(wraparound)
{
    struct adm_sample_set *set = adm_sample_set_new(2, 5);
    struct adm_sample *v;
    size_t n;

    ck_assert_ptr_nonnull(set);
    put_range(set, 1, 0, 12);
    v = copy_all(set, 1, &n);
    ck_assert_uint_eq(n, 5); /* the last five, 7..11, oldest first */
    check_range(v, n, 7);
    free(v);
    v = copy_all(set, 0, &n); /* another worker's ring: nothing yet */
    ck_assert_uint_eq(n, 0);
    free(v);
    /* a collection right after: the same sample (the kept copy) */
    v = copy_all(set, 1, &n);
    ck_assert_uint_eq(n, 5);
    check_range(v, n, 7);
    free(v);
    /* two new entries (into the other half) push out the two oldest */
    put_range(set, 1, 12, 14);
    v = copy_all(set, 1, &n);
    ck_assert_uint_eq(n, 5);
    check_range(v, n, 9);
    free(v);
    /* three more, into the first half again: it starts empty */
    put_range(set, 1, 14, 17);
    v = copy_all(set, 1, &n);
    ck_assert_uint_eq(n, 5);
    check_range(v, n, 12);
    free(v);
    /* a part of what is kept */
    v = calloc(5, sizeof(*v));
    ck_assert_uint_eq(adm_sample_copy(set, 1, 3, 10, v), 2);
    check_range(v, 2, 15);
    free(v);
    adm_sample_set_release(set);
}
END_TEST

/* The tests' notify hook for a worker that never answers. */
static void deaf(void *arg, unsigned w)
{
    (void)arg;
    (void)w;
}

START_TEST(worker_skipped)
{
    struct adm_sample_set *set = adm_sample_set_new(2, 8);
    struct adm_sample v[8];

    put_range(set, 0, 0, 3);
    ck_assert_uint_eq(adm_sample_collect(set, deaf, NULL), 2); /* after the wait */
    ck_assert_uint_eq(adm_sample_copy(set, 0, 0, 8, v), 0);
    /* the worker wakes later and serves the request it missed; it writes
     * on into the other half */
    adm_sample_serve(set->rings[0]);
    put_range(set, 0, 3, 4);
    /* the next collection reads that half before it asks for another flip */
    ck_assert_uint_eq(adm_sample_collect(set, deaf, NULL), 2);
    ck_assert_uint_eq(adm_sample_copy(set, 0, 0, 8, v), 3);
    check_range(v, 3, 0);
    ck_assert_uint_eq(adm_sample_collect(set, serve_now, set), 0);
    ck_assert_uint_eq(adm_sample_copy(set, 0, 0, 8, v), 4);
    check_range(v, 4, 0);
    adm_sample_set_release(set);
}
END_TEST

START_TEST(truncated)
{
    struct adm_sample_set *set = adm_sample_set_new(1, 4);
    char path[300];
    struct adm_sample *v;
    size_t n;

    memset(path, 'x', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    put(set->rings[0], "GET", "example.com", path, "r", 200); /* 299 bytes of path */
    path[230] = '\0';
    put(set->rings[0], "GET", "example.com", path, "r", 200); /* 231 + host > 240 */
    path[200] = '\0';
    put(set->rings[0], "GET", "example.com", path, "r", 200); /* fits */
    v = copy_all(set, 0, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert(v[0].truncated && v[1].truncated && !v[2].truncated);
    ck_assert_uint_eq(v[0].status, 200);
    ck_assert_uint_eq(v[0].plen + v[0].hlen + v[0].mlen, 0);
    ck_assert_uint_eq(v[2].plen, 200);
    ck_assert_mem_eq(v[2].path, path, 200);
    free(v);
    adm_sample_set_release(set);
}
END_TEST

START_TEST(sets_shared_by_size)
{
    struct adm_sample_set *a = adm_sample_set_for(NULL, 2, 16), *b, *c;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(b = adm_sample_set_for(a, 2, 16), a); /* the samples survive */
    ck_assert_uint_eq(a->refs, 2);
    c = adm_sample_set_for(a, 2, 32);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_ne(c, a);
    ck_assert_ptr_null(adm_sample_set_for(a, 2, 0)); /* sampling off */
    ck_assert_uint_eq((uintptr_t)a->rings[0] % 64, 0);
    ck_assert_uint_eq((uintptr_t)&a->rings[0]->req % 64, 0);
    ck_assert_uint_eq((uintptr_t)&a->rings[0]->ack % 64, 0);
    ck_assert_uint_eq((uintptr_t)&a->rings[0]->slots[0] % 64, 0);
    adm_sample_set_release(b);
    adm_sample_set_release(a);
    adm_sample_set_release(c);
    adm_sample_set_release(NULL);
}
END_TEST

/* ---- writers and a reader at once ---- */

#define WRITES 20000000 /* per writer, at most */
#define RING 64         /* entries per worker: small, so that halves wrap */

struct writer {
    struct adm_sample_ring *r;
    int id;
    _Atomic int wake; /* the notify: set by the reader, taken by the writer */
    _Atomic int *stop;
    _Atomic int *finished; /* writers done */
};

/* Entry n of writer <id>: host "w<id>", path "/<n>/" and n % 50 '+'
 * (so lengths vary), route "r<n % 7>". */
static void entry_strings(int id, unsigned long n, char *host, char *path, char *route)
{
    int k;

    snprintf(host, 16, "w%d", id);
    k = snprintf(path, 96, "/%lu/", n);
    memset(path + k, '+', n % 50);
    path[k + n % 50] = '\0';
    snprintf(route, 8, "r%lu", n % 7);
}

/* A worker: writes entries, and serves flips when woken (as its notify
 * event would, between requests). */
static void *write_loop(void *arg)
{
    struct writer *w = arg;
    char host[16], path[96], route[8];

    for (unsigned long n = 0; n < WRITES && !atomic_load(w->stop); n++) {
        entry_strings(w->id, n, host, path, route);
        put(w->r, "GET", host, path, route, 200);
        if (atomic_exchange_explicit(&w->wake, 0, memory_order_relaxed))
            adm_sample_serve(w->r);
    }
    atomic_fetch_add(w->finished, 1);
    return NULL;
}

/* The reader's notify hook. Relaxed: the flip's own release/acquire
 * pairs are what TSan checks here (a worker's pipe adds an edge of its
 * own). */
static void wake(void *arg, unsigned w)
{
    struct writer *ws = arg;

    atomic_store_explicit(&ws[w].wake, 1, memory_order_relaxed);
}

/* Parses entry <e>'s number from its path and checks every string
 * against it; returns the number. */
static unsigned long check_entry(int id, const struct adm_sample *e)
{
    char host[16], path[96], route[8];
    unsigned long n;

    ck_assert_uint_ge(e->plen, 3);
    ck_assert_int_eq(sscanf(e->path, "/%lu/", &n), 1);
    entry_strings(id, n, host, path, route);
    ck_assert_uint_eq(e->mlen, 3);
    ck_assert_mem_eq(e->method, "GET", 3);
    ck_assert_uint_eq(e->hlen, strlen(host));
    ck_assert_mem_eq(e->host, host, e->hlen);
    ck_assert_uint_eq(e->plen, strlen(path));
    ck_assert_mem_eq(e->path, path, e->plen);
    ck_assert_uint_eq(e->rlen, strlen(route));
    ck_assert_mem_eq(e->route, route, e->rlen);
    ck_assert_uint_eq(e->status, 200);
    return n;
}

START_TEST(writers_and_reader)
{
    struct adm_sample_set *set = adm_sample_set_new(2, RING);
    struct adm_sample *v = calloc(RING, sizeof(*v));
    _Atomic int stop = 0, finished = 0;
    struct writer w[2] = {{set->rings[0], 0, 0, &stop, &finished},
                          {set->rings[1], 1, 0, &stop, &finished}};
    pthread_t t[2];
    size_t rounds = 0, entries = 0, skipped = 0;
    unsigned long newest[2] = {0, 0};
    time_t t0 = time(NULL);

    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, write_loop, &w[i]), 0);
    /* collections while they write: each a flip per ring, then a read of
     * the halves left; bounded in count and in time */
    for (int round = 0; round < 300 && time(NULL) - t0 < 10 && !atomic_load(&finished); round++) {
        skipped += adm_sample_collect(set, wake, w);
        rounds++;
        for (unsigned k = 0; k < 2; k++) {
            size_t n = adm_sample_copy(set, k, 0, RING, v);
            ck_assert_uint_le(n, RING);
            unsigned long prev = 0;
            for (size_t i = 0; i < n; i++) {
                unsigned long num = check_entry((int)k, &v[i]);
                if (i > 0) /* kept oldest first */
                    ck_assert_uint_gt(num, prev);
                prev = num;
            }
            if (n) { /* the newest entry never goes back */
                ck_assert_uint_ge(prev, newest[k]);
                newest[k] = prev;
            }
            entries += n;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_gt(rounds, 0);
    ck_assert_uint_gt(entries, 0);
    ck_assert_uint_lt(skipped, 2 * rounds); /* the writers served some flips */
    free(v);
    adm_sample_set_release(set);
}
END_TEST

static Suite *sample_suite(void)
{
    Suite *s = suite_create("admin_sample");
    TCase *tc = tcase_create("ring");
    TCase *tcc = tcase_create("concurrency");

    tcase_add_test(tc, every_length);
    tcase_add_test(tc, wraparound);
    tcase_add_test(tc, worker_skipped);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, sets_shared_by_size);
    tcase_add_test(tcc, writers_and_reader);
    tcase_set_timeout(tcc, 120);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, tcc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sample_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
