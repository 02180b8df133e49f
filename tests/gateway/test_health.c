/*
 * test_health.c - gateway/health.c's pool records on a running health
 * thread, fed snapshots made here: what each plan and report holds of the
 * pools it names. A pool that a push replaced, and that a worker's report
 * named after the merge (its failure is matched to the new pool's server
 * by address and ejects it), is let go once the reports are drained: the
 * thread's match cache does not keep it alive until the next push.
 */
#include "gateway/health.h"

#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

/* One pool "u" of snapshot <s>, over three ports of 127.0.0.1, ejecting
 * a server at its first row of failures (three, so that two may be
 * ejected: the last server up never is). */
struct fake {
    struct sockaddr_in sa[3];
    struct adm_server srv[1];
    struct adm_upstream up;
    struct adm_config cfg;
    SSL_CTX *uptls[1];
    up_pool *pools[1];
    struct adm_snapshot s;
};

static void fake_init(struct fake *f, const char *key, unsigned p0, unsigned p1, unsigned p2)
{
    struct up_server_def defs[3];
    unsigned ports[3] = {p0, p1, p2};

    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < 3; i++) {
        f->sa[i].sin_family = AF_INET;
        f->sa[i].sin_port = htons((uint16_t)ports[i]);
        f->sa[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        defs[i] = (struct up_server_def){"127.0.0.1:x", (const struct sockaddr *)&f->sa[i],
                                         sizeof(f->sa[i]), 1};
    }
    f->srv[0].addr = (struct adm_addr){.text = "127.0.0.1:x", .host = "127.0.0.1", .numeric = 1};
    f->up = (struct adm_upstream){
        .name = "u",
        .servers = f->srv,
        .nservers = 1,
        .outlier = {.on = 1,
                    .consecutive_failures = 1,
                    .base_ejection_ms = 60000,
                    .max_ejection_ms = 60000,
                    .max_ejection_percent = 100},
    };
    f->cfg.upstreams = &f->up;
    f->cfg.nupstreams = 1;
    f->pools[0] = up_pool_new("u", key, defs, 3, 1, 4);
    ck_assert_ptr_nonnull(f->pools[0]);
    f->s.cfg = &f->cfg;
    f->s.pools = f->pools;
    f->s.npools = 1;
    f->s.uptls = f->uptls;
}

static void nap(void)
{
    struct timespec t = {0, 2 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* Waits (bounded) until <pool> has <refs> references. */
static int wait_refs(const up_pool *pool, unsigned refs)
{
    for (int i = 0; i < 5000 && up_pool_refs(pool) != refs; i++)
        nap();
    return up_pool_refs(pool) == refs;
}

/* What the thread knows of server <s> of <pool>; last_status 42: nothing. */
static struct adm_srv_health info(const up_pool *pool, size_t s)
{
    struct adm_srv_health h;

    memset(&h, 0, sizeof(h));
    h.last_status = 42;
    gw_health_info(NULL, pool, s, &h);
    return h;
}

START_TEST(replaced_pool_let_go_after_a_report)
{
    static struct fake a, b;
    int i;

    ck_assert_int_eq(gw_health_start(1), 0);
    fake_init(&a, "k1", 9001, 9002, 9004);
    gw_health_update(&a.s);
    for (i = 0; i < 5000 && info(a.pools[0], 0).last_status == 42; i++)
        nap();
    ck_assert_int_eq(info(a.pools[0], 0).last_status, -1); /* merged: no check yet */
    ck_assert_uint_eq(up_pool_refs(a.pools[0]), 2);        /* ours and the thread's */

    /* a push replaces the pool: 9001 stays, 9002 and 9004 go, 9003 and 9005 come */
    fake_init(&b, "k2", 9003, 9001, 9005);
    gw_health_update(&b.s);
    ck_assert(wait_refs(a.pools[0], 1)); /* merged: the old record let it go */
    ck_assert_uint_eq(up_pool_refs(b.pools[0]), 2);

    /* a request that started on the old pool fails on 9001: its report
     * ejects 9001 in the new pool, then nothing keeps the old one */
    gw_health_report(0, a.pools[0], 0);
    for (i = 0; i < 5000 && info(b.pools[0], 1).ejections == 0; i++)
        nap();
    ck_assert_uint_eq(info(b.pools[0], 1).ejections, 1);
    ck_assert_uint_eq(info(b.pools[0], 0).ejections, 0);
    ck_assert_uint_eq(up_pool_refs(a.pools[0]), 1); /* before: 2, until the next push */
    ck_assert_uint_eq(up_pool_refs(b.pools[0]), 2);

    /* a second report of it is matched again, and let go again */
    gw_health_report(0, a.pools[0], 1); /* 9002: not in the new pool */
    gw_health_report(0, b.pools[0], 0); /* a report of the new pool after it */
    for (i = 0; i < 5000 && info(b.pools[0], 0).ejections == 0; i++)
        nap();
    ck_assert_uint_eq(info(b.pools[0], 0).ejections, 1);
    ck_assert_uint_eq(up_pool_refs(a.pools[0]), 1);

    gw_health_stop();
    ck_assert_uint_eq(up_pool_refs(b.pools[0]), 1);
    up_pool_release(a.pools[0]);
    up_pool_release(b.pools[0]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_health");
    TCase *tc = tcase_create("pools");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, replaced_pool_let_go_after_a_report);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
