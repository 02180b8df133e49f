/*
 * test_state.c - upstream/state.c: a changed pool takes over, by socket
 * address, the health, counters and idle connections of the servers the
 * old pool had; shared state is seen through both pools and outlives the
 * old one; without sharing, health and counters are copied; in-flight
 * counts stay with their pool.
 */
#include "upstream/up_int.h"
#include "utest.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

static int conns[4]; /* opaque pointers to park */

/* A pool of <n> servers on 127.0.0.1:<ports>, for <nworkers> workers. */
static up_pool *pool_on(const unsigned *ports, size_t n, unsigned nworkers, unsigned keepalive)
{
    struct up_server_def defs[8];
    struct sockaddr_in sin[8];
    char names[8][32];
    up_pool *p;

    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        sin[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)ports[i])};
        sin[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(names[i], sizeof(names[i]), "127.0.0.1:%u", ports[i]);
        defs[i] =
            (struct up_server_def){names[i], (const struct sockaddr *)&sin[i], sizeof(sin[i]), 1};
    }
    p = up_pool_new("t", "key", defs, n, nworkers, keepalive);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(shares_by_address)
{
    static const unsigned a_ports[] = {9001, 9002, 9003}, b_ports[] = {9003, 9004, 9002};
    up_pool *a = pool_on(a_ports, 3, 2, 4), *b;

    up_health_set(a, 1, UP_H_EJECTED, 1, 1234);
    up_count_request(a, 1, 1);
    up_count_connect(a, 0, 2);
    ck_assert_int_eq(up_idle_put(a, 1, 1, &conns[0]), 0);
    ck_assert_int_eq(up_idle_put(a, 1, 2, &conns[1]), 0);

    b = pool_on(b_ports, 3, 2, 4);
    ck_assert_uint_eq(up_pool_carry(b, a, 1), 2);
    /* 9002 is b's server 2, 9003 its server 0, 9004 is new */
    ck_assert_uint_eq(up_health_flags(b, 2), UP_H_EJECTED);
    ck_assert_uint_eq(up_health_since(b, 2), 1234);
    ck_assert_uint_eq(up_health_flags(b, 1), 0);
    ck_assert_uint_eq(up_requests(b, 2), 1);
    ck_assert_uint_eq(up_connects(b, 0), 1);
    ck_assert_uint_eq(up_pool_same_server(b, a, 1), 2);
    ck_assert_uint_eq(up_pool_same_server(b, a, 2), 0);
    ck_assert_uint_eq(up_pool_same_server(b, a, 0), UP_NONE);
    ck_assert_uint_eq(up_pool_same_server(a, a, 0), 0);

    /* one state: what either pool does, both see */
    up_health_set(b, 2, UP_H_EJECTED, 0, 2000);
    ck_assert_uint_eq(up_health_flags(a, 1), 0);
    up_count_request(b, 0, 0);
    ck_assert_uint_eq(up_requests(a, 2), 1);
    ck_assert_uint_eq(up_idle_count(b, 1, 2), 1);
    ck_assert_uint_eq(up_idle_count(b, 0, 2), 0); /* still apart by worker */

    /* the old pool goes; its servers' states stay with the new one */
    up_pool_release(a);
    ck_assert_ptr_eq(up_idle_get(b, 1, 2), &conns[0]);
    ck_assert_ptr_eq(up_idle_get(b, 1, 0), &conns[1]);
    ck_assert_ptr_null(up_idle_get(b, 1, 1));
    ck_assert_uint_eq(up_requests(b, 0), 1);
    up_pool_release(b); /* ASan builds catch a leak or a double free */
}
END_TEST

START_TEST(copies_without_sharing)
{
    static const unsigned ports[] = {9001, 9002};
    up_pool *a = pool_on(ports, 2, 1, 4), *b = pool_on(ports, 2, 1, 4),
            *c = pool_on(ports, 2, 1, 8);

    up_health_set(a, 0, UP_H_CHECK, 1, 77);
    up_count_request(a, 0, 0);
    up_count_request(a, 0, 0);
    up_idle_put(a, 0, 0, &conns[0]);

    /* another transport: health and counts copied, the connection not */
    ck_assert_uint_eq(up_pool_carry(b, a, 0), 2);
    ck_assert_uint_eq(up_health_flags(b, 0), UP_H_CHECK);
    ck_assert_uint_eq(up_health_since(b, 0), 77);
    ck_assert_uint_eq(up_requests(b, 0), 2);
    ck_assert_uint_eq(up_idle_count(b, 0, 0), 0);
    ck_assert_uint_eq(up_pool_same_server(b, a, 0), UP_NONE);
    up_health_set(b, 0, UP_H_CHECK, 0, 88); /* b's own word now */
    ck_assert_uint_eq(up_health_flags(a, 0), UP_H_CHECK);

    /* another keepalive: the stacks would not fit, so a copy too */
    ck_assert_uint_eq(up_pool_carry(c, a, 1), 2);
    ck_assert_uint_eq(up_health_flags(c, 0), UP_H_CHECK);
    ck_assert_uint_eq(up_idle_count(c, 0, 0), 0);
    ck_assert_uint_eq(up_pool_carry(c, NULL, 1), 0);
    up_pool_release(a);
    up_pool_release(b);
    up_pool_release(c);
}
END_TEST

START_TEST(inflight_stays_with_its_pool)
{
    static const unsigned ports[] = {9001, 9002};
    up_pool *a = pool_on(ports, 2, 1, 1), *b = pool_on(ports, 2, 1, 1);

    up_pool_carry(b, a, 1);
    up_request_start(a, 0, 1);
    ck_assert_uint_eq(up_inflight(a, 1), 1);
    ck_assert_uint_eq(up_inflight(b, 1), 0);
    up_request_end(a, 0, 1);
    ck_assert_uint_eq(up_inflight(a, 1), 0);
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

START_TEST(all_down_through_either_pool)
{
    static const unsigned a_ports[] = {9001, 9002}, b_ports[] = {9001, 9002, 9003};
    up_pool *a = pool_on(a_ports, 2, 1, 1), *b = pool_on(a_ports, 2, 1, 1);
    up_pool *c = pool_on(b_ports, 3, 1, 1);

    up_pool_carry(b, a, 1);
    up_pool_carry(c, a, 1);
    ck_assert_int_eq(up_health_set(a, 0, UP_H_CHECK, 1, 1), 0);
    ck_assert_int_eq(up_health_set(a, 1, UP_H_CHECK, 1, 2), 1);
    /* written through a: b, which shares both servers, is all down too,
     * and c, which has one more, is not */
    ck_assert(up_pool_all_down(b));
    ck_assert_uint_eq(up_pick(b, 0), UP_NONE);
    ck_assert(!up_pool_all_down(c));
    ck_assert_uint_eq(up_pick(c, 0), 2);
    ck_assert_int_eq(up_health_set(b, 1, UP_H_CHECK, 0, 3), 1); /* back: once */
    ck_assert(!up_pool_all_down(a));
    ck_assert_uint_eq(up_pick(a, 0), 1);
    up_pool_release(a);
    up_pool_release(b);
    up_pool_release(c);
}
END_TEST

START_TEST(a_server_listed_twice)
{
    static const unsigned a_ports[] = {9001, 9001}, b_ports[] = {9001, 9001, 9001};
    up_pool *a = pool_on(a_ports, 2, 1, 2), *b = pool_on(b_ports, 3, 1, 2);

    ck_assert_uint_eq(up_pool_carry(b, a, 1), 2); /* each old one to one new one */
    ck_assert_uint_eq(up_pool_same_server(b, a, 0), 0);
    ck_assert_uint_eq(up_pool_same_server(b, a, 1), 1);
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

/* up_pool_match_new: the match into a map of its own, with its count. */
START_TEST(a_match_of_its_own)
{
    static const unsigned a_ports[] = {9001, 9002}, b_ports[] = {9003, 9002, 9001};
    up_pool *a = pool_on(a_ports, 2, 1, 2), *b = pool_on(b_ports, 3, 1, 2);
    size_t kept = 0, *map = up_pool_match_new(b, a, &kept);

    ck_assert_ptr_nonnull(map);
    ck_assert_uint_eq(kept, 2);
    ck_assert_uint_eq(map[0], UP_NONE);
    ck_assert_uint_eq(map[1], 1);
    ck_assert_uint_eq(map[2], 0);
    free(map);
    up_pool_release(a);
    up_pool_release(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_state");
    TCase *tc = tcase_create("state");

    tcase_add_test(tc, shares_by_address);
    tcase_add_test(tc, copies_without_sharing);
    tcase_add_test(tc, inflight_stays_with_its_pool);
    tcase_add_test(tc, all_down_through_either_pool);
    tcase_add_test(tc, a_server_listed_twice);
    tcase_add_test(tc, a_match_of_its_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
