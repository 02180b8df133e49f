/*
 * test_sample.c - the live sample's rings (admin/sample.c, sample.h): an
 * entry copied back byte for byte at every string length, the ring
 * wrapping around, entries too long for a slot marked truncated, sets
 * shared while their size stays; and, under TSan as the "concurrency"
 * label runs it, two writer threads filling their rings while a reader
 * copies them: every entry copied is whole (its strings agree with its
 * number), never a mix of two writes.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin/sample.h"

static void put(struct adm_sample_ring *r, const char *m, const char *h, const char *p,
                const char *route, unsigned status)
{
    adm_sample_put(r, m, strlen(m), h, strlen(h), p, strlen(p), route, route ? strlen(route) : 0,
                   status);
}

static struct adm_sample *copy_all(struct adm_sample_ring *r, size_t *n)
{
    struct adm_sample *v = calloc(r->size, sizeof(*v));

    ck_assert_ptr_nonnull(v);
    *n = adm_sample_copy(r, 0, r->size, v);
    return v;
}

START_TEST(every_length)
{
    struct adm_sample_set *set = adm_sample_set_new(1, 64);
    struct adm_sample_ring *r;
    char host[40], path[80];
    struct adm_sample *v;
    size_t n;

    ck_assert_ptr_nonnull(set);
    r = set->rings[0];
    for (size_t len = 0; len < 20; len++) {
        memset(host, 'a' + (int)len, len);
        host[len] = '\0';
        path[0] = '/';
        for (size_t i = 1; i < 2 * len + 1; i++)
            path[i] = (char)('0' + i % 10);
        path[2 * len + 1] = '\0';
        put(r, len % 2 ? "GET" : "DELETE", host, path, len % 3 ? "users" : NULL,
            len % 3 ? 200 : 404);
    }
    v = copy_all(r, &n);
    ck_assert_uint_eq(n, 20);
    for (size_t i = 0; i < n; i++) {
        size_t len = v[i].n;
        ck_assert_uint_eq(v[i].n, i);
        ck_assert(!v[i].truncated);
        ck_assert_uint_eq(v[i].hlen, len);
        ck_assert_uint_eq(v[i].plen, 2 * len + 1);
        ck_assert_mem_eq(v[i].method, len % 2 ? "GET" : "DELETE", v[i].mlen);
        for (size_t k = 0; k < len; k++)
            ck_assert_int_eq(v[i].host[k], 'a' + (int)len);
        ck_assert_int_eq(v[i].path[0], '/');
        for (size_t k = 1; k < v[i].plen; k++)
            ck_assert_int_eq(v[i].path[k], '0' + (int)(k % 10));
        if (len % 3) {
            ck_assert_uint_eq(v[i].status, 200);
            ck_assert_uint_eq(v[i].rlen, 5);
            ck_assert_mem_eq(v[i].route, "users", 5);
        } else {
            ck_assert_uint_eq(v[i].status, 404);
            ck_assert_ptr_null(v[i].route);
        }
    }
    free(v);
    adm_sample_set_release(set);
}
END_TEST

START_TEST(wraparound)
{
    struct adm_sample_set *set = adm_sample_set_new(2, 5);
    struct adm_sample *v;
    char path[32];
    size_t n;

    ck_assert_ptr_nonnull(set);
    for (int i = 0; i < 12; i++) {
        snprintf(path, sizeof(path), "/p/%d", i);
        put(set->rings[1], "GET", "h", path, NULL, 404);
    }
    v = copy_all(set->rings[1], &n);
    ck_assert_uint_eq(n, 5); /* the last five, 7..11, in slot order */
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "/p/%d", (int)v[i].n);
        ck_assert_uint_ge(v[i].n, 7);
        ck_assert_uint_eq(v[i].plen, strlen(path));
        ck_assert_mem_eq(v[i].path, path, v[i].plen);
        ck_assert_uint_eq(v[i].n % 5, i);
    }
    free(v);
    v = copy_all(set->rings[0], &n); /* another worker's ring: nothing yet */
    ck_assert_uint_eq(n, 0);
    free(v);
    /* a part of the ring */
    v = calloc(5, sizeof(*v));
    ck_assert_uint_eq(adm_sample_copy(set->rings[1], 3, 10, v), 2);
    free(v);
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
    v = copy_all(set->rings[0], &n);
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
    ck_assert_uint_eq((uintptr_t)&a->rings[0]->slots[0] % 64, 0);
    adm_sample_set_release(b);
    adm_sample_set_release(a);
    adm_sample_set_release(c);
    adm_sample_set_release(NULL);
}
END_TEST

/* ---- writers and a reader at once ---- */

#define WRITES 200000 /* per writer, at most */

struct writer {
    struct adm_sample_ring *r;
    int id;
    _Atomic int *stop;
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

static void *write_loop(void *arg)
{
    struct writer *w = arg;
    char host[16], path[96], route[8];

    for (unsigned long n = 0; n < WRITES && !atomic_load(w->stop); n++) {
        entry_strings(w->id, n, host, path, route);
        put(w->r, "GET", host, path, route, 200);
    }
    return NULL;
}

START_TEST(writers_and_reader)
{
    struct adm_sample_set *set = adm_sample_set_new(2, 256);
    struct adm_sample *v = calloc(256, sizeof(*v));
    _Atomic int stop = 0;
    struct writer w[2] = {{set->rings[0], 0, &stop}, {set->rings[1], 1, &stop}};
    pthread_t t[2];
    char host[16], path[96], route[8];
    size_t copies = 0, entries = 0;
    time_t t0 = time(NULL);

    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, write_loop, &w[i]), 0);
    /* the writers under way (a loaded machine starts threads late), then
     * the copies while they write; bounded in count and in time */
    while ((atomic_load(&set->rings[0]->head) < 256 || atomic_load(&set->rings[1]->head) < 256) &&
           time(NULL) - t0 < 10)
        sched_yield();
    for (int round = 0; round < 400 && time(NULL) - t0 < 5; round++) {
        for (int k = 0; k < 2; k++) {
            size_t n = adm_sample_copy(set->rings[k], 0, 256, v);
            copies++;
            for (size_t i = 0; i < n; i++) {
                entry_strings(k, (unsigned long)v[i].n, host, path, route);
                ck_assert_uint_eq(v[i].hlen, strlen(host));
                ck_assert_mem_eq(v[i].host, host, v[i].hlen);
                ck_assert_uint_eq(v[i].plen, strlen(path));
                ck_assert_mem_eq(v[i].path, path, v[i].plen);
                ck_assert_uint_eq(v[i].rlen, strlen(route));
                ck_assert_mem_eq(v[i].route, route, v[i].rlen);
            }
            entries += n;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_gt(copies, 0);
    ck_assert_uint_gt(entries, 0);
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
