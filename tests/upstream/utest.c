/*
 * utest.c - helpers shared by the upstream/ unit tests (see utest.h).
 */
#include "utest.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

up_pool *ut_pool(const unsigned *weights, size_t n, unsigned nworkers, unsigned keepalive)
{
    struct up_server_def *defs = calloc(n, sizeof(*defs));
    struct sockaddr_in *sin = calloc(n, sizeof(*sin));
    char(*names)[32] = calloc(n, sizeof(*names));
    up_pool *p;

    ck_assert(defs && sin && names);
    for (size_t i = 0; i < n; i++) {
        sin[i].sin_family = AF_INET;
        sin[i].sin_port = htons((uint16_t)(9001 + i));
        sin[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(names[i], sizeof(names[i]), "127.0.0.1:%zu", 9001 + i);
        defs[i].address = names[i];
        defs[i].sa = (const struct sockaddr *)&sin[i];
        defs[i].salen = sizeof(sin[i]);
        defs[i].weight = weights ? weights[i] : 1;
    }
    p = up_pool_new("t", "key", defs, n, nworkers, keepalive);
    free(defs);
    free(sin);
    free(names);
    ck_assert_ptr_nonnull(p);
    return p;
}

int ut_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
