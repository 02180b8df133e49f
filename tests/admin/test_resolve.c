/*
 * test_resolve.c - server host names (admin/resolve.c and the host-name
 * part of admin/snapshot.c): a name's addresses become one server each,
 * tagged with their config server; a name without addresses is one server
 * down as "resolving"; a changed hosts file re-derives the pools with the
 * kept addresses' health, under the same generation and with a grace
 * period of its own; a hosts file that cannot be read is an error at its
 * JSON path; a resolution that hangs is cancelled cleanly. The hosts file
 * answers without a nameserver (the one configured, 127.0.0.1:9, is never
 * needed) and the hanging one is a socket of the test's: nothing leaves
 * the host.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "admin/resolve.h"
#include "admin/snapshot.h"

static char hosts[64];
static int changed;

static void on_changed(void *arg)
{
    (void)arg;
    changed++;
}

/* Writes the hosts file anew, its mtime a second apart from the last. */
static void write_hosts(const char *text)
{
    static time_t t = 1000000;
    struct timespec ts[2];
    FILE *f = fopen(hosts, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    t += 2;
    ts[0] = ts[1] = (struct timespec){t, 0};
    ck_assert_int_eq(utimensat(AT_FDCWD, hosts, ts, 0), 0);
}

static struct adm_config *config(const char *extra_server)
{
    static char buf[2048];
    struct adm_errors e;
    struct adm_config *c;

    snprintf(buf, sizeof(buf),
             "{\"listeners\": [{\"address\": \"127.0.0.1:8080\"}],"
             " \"resolver\": {\"nameservers\": [\"127.0.0.1:9\"], \"hosts_file\": \"%s\"},"
             " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"multi.test:8080\"}%s],"
             "                       \"resolve_interval_ms\": 1000}},"
             " \"routes\": [{\"id\": \"r\", \"path\": \"/\", \"upstream\": \"u\"}]}",
             hosts, extra_server);
    adm_errors_init(&e);
    c = adm_config_parse(buf, strlen(buf), &e);
    ck_assert_msg(c != NULL, "config refused");
    adm_errors_clear(&e);
    return c;
}

static unsigned port_of(const up_pool *p, size_t i)
{
    socklen_t len;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)up_server_sockaddr(p, i, &len);

    ck_assert_int_eq(sin->sin_family, AF_INET);
    return ntohs(sin->sin_port);
}

/* Runs <base> until the resolver's changed hook ran (at most 10 s). */
static void wait_changed(struct event_base *base)
{
    struct timeval tick = {0, 50 * 1000};

    for (int i = 0; i < 200 && !changed; i++) {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    }
    ck_assert_int_gt(changed, 0);
}

START_TEST(names_become_servers_and_follow_the_hosts_file)
{
    struct event_base *base = event_base_new();
    struct adm_resolver_hooks hooks = {on_changed, NULL, NULL};
    struct adm_resolver *res = adm_resolver_new(base, &hooks);
    struct adm_errors e;
    struct adm_swap sw;
    struct adm_snapshot *s, *n, *again;
    up_pool *p;

    ck_assert_ptr_nonnull(res);
    write_hosts("127.0.0.2 multi.test\n127.0.0.3 multi.test\n");
    adm_errors_init(&e);
    s = adm_snapshot_build_res(config(", {\"address\": \"127.0.0.1:9001\"}"), NULL, 2, res, &e);
    ck_assert_ptr_nonnull(s);
    p = s->pools[0];
    /* the hosts file answered during the build: nothing waits */
    ck_assert_uint_eq(up_pool_nservers(p), 3);
    ck_assert_str_eq(up_server_address(p, 0), "multi.test:8080 (127.0.0.2)");
    ck_assert_str_eq(up_server_address(p, 1), "multi.test:8080 (127.0.0.3)");
    ck_assert_str_eq(up_server_address(p, 2), "127.0.0.1:9001");
    ck_assert_uint_eq(up_server_tag(p, 0), 0);
    ck_assert_uint_eq(up_server_tag(p, 1), 0);
    ck_assert_uint_eq(up_server_tag(p, 2), 1);
    ck_assert_uint_eq(port_of(p, 0), 8080);
    ck_assert_uint_eq(up_health_flags(p, 0), 0);
    ck_assert_int_eq(adm_swap_init(&sw, 1, NULL, NULL), 0);
    adm_swap_publish(&sw, s);
    adm_resolver_sweep(res);
    ck_assert_uint_eq(s->gen, 1);

    /* the build's first answers ran the hook too; the same answer changes
     * nothing */
    wait_changed(base);
    ck_assert_int_eq(adm_snapshot_reresolve(s, res, &n), 0);
    ck_assert_ptr_null(n);

    /* a new answer: .3 stays (with its health), .2 goes, .4 comes */
    up_health_set(p, 1, UP_H_CHECK, 1, 1);
    changed = 0;
    write_hosts("127.0.0.4 multi.test\n127.0.0.3 multi.test\n");
    wait_changed(base);
    ck_assert_int_eq(adm_snapshot_reresolve(s, res, &n), 0);
    ck_assert_ptr_nonnull(n);
    ck_assert_ptr_eq(n->cfg, s->cfg);
    ck_assert_uint_eq(rt_table_count(n->rt), 1);
    p = n->pools[0];
    ck_assert_ptr_ne(p, s->pools[0]);
    ck_assert_uint_eq(up_pool_nservers(p), 3);
    ck_assert_str_eq(up_server_address(p, 0), "multi.test:8080 (127.0.0.3)");
    ck_assert_str_eq(up_server_address(p, 1), "multi.test:8080 (127.0.0.4)");
    ck_assert_uint_eq(up_health_flags(p, 0), UP_H_CHECK);
    ck_assert_uint_eq(up_health_flags(p, 1), 0);
    ck_assert_uint_eq(up_health_flags(p, 2), 0);

    /* published under the same generation, freed only after the grace */
    adm_swap_republish(&sw, n);
    ck_assert_uint_eq(n->gen, 1);
    ck_assert_uint_gt(n->seq, s->seq);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 1);
    adm_swap_ack(&sw, 0);
    ck_assert_uint_eq(adm_swap_reclaim(&sw), 0);
    ck_assert_int_eq(adm_snapshot_reresolve(n, res, &again), 0);
    ck_assert_ptr_null(again);

    adm_swap_destroy(&sw);
    adm_errors_clear(&e);
    adm_resolver_free(res);
    event_base_free(base);
}
END_TEST

START_TEST(unresolved_name_is_one_server_down)
{
    struct adm_errors e;
    struct adm_snapshot *s;
    const up_pool *p;
    socklen_t len;

    adm_errors_init(&e);
    s = adm_snapshot_build_res(config(""), NULL, 1, NULL, &e);
    ck_assert_ptr_nonnull(s);
    p = s->pools[0];
    ck_assert_uint_eq(up_pool_nservers(p), 1);
    ck_assert_str_eq(up_server_address(p, 0), "multi.test:8080");
    ck_assert_uint_eq(up_health_flags(p, 0), UP_H_RESOLVING);
    ck_assert_int_eq(up_pool_all_down(p), 1);
    /* a connect to it fails at once, should a panicking pool try */
    ck_assert_int_eq(up_server_sockaddr(p, 0, &len)->sa_family, AF_UNSPEC);
    adm_snapshot_free(s);
    adm_errors_clear(&e);
}
END_TEST

START_TEST(unreadable_hosts_file_refused)
{
    struct event_base *base = event_base_new();
    struct adm_resolver *res = adm_resolver_new(base, NULL);
    struct adm_errors e;
    struct adm_config *c;

    write_hosts("127.0.0.2 multi.test\n");
    c = config("");
    unlink(hosts);
    adm_errors_init(&e);
    ck_assert_ptr_null(adm_snapshot_build_res(c, NULL, 1, res, &e));
    ck_assert_uint_eq(e.n, 1);
    ck_assert_str_eq(e.v[0].path, "/resolver/hosts_file");
    adm_errors_clear(&e);
    adm_resolver_free(res);
    event_base_free(base);
}
END_TEST

/* A nameserver that never answers: a UDP socket nobody reads. */
static int silent_nameserver(char *addr, size_t cap)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(sin.sin_port));
    return fd;
}

/* A resolution that hangs: the build does not wait (one server down as
 * "resolving"), and a new configuration or the resolver's end cancels
 * what is in flight without leaking or touching freed memory (the ASan
 * build runs this too). */
START_TEST(hanging_resolution_cancelled)
{
    struct event_base *base = event_base_new();
    struct adm_resolver *res = adm_resolver_new(base, NULL);
    const struct sockaddr_storage *addrs;
    struct adm_errors e;
    struct adm_snapshot *s;
    struct adm_config *c;
    char ns[64], buf[1024];
    int fd = silent_nameserver(ns, sizeof(ns));

    snprintf(buf, sizeof(buf),
             "{\"listeners\": [{\"address\": \"127.0.0.1:8080\"}],"
             " \"resolver\": {\"nameservers\": [\"%s\"], \"timeout_ms\": 60000},"
             " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"hangs.test:80\"}]}}}",
             ns);
    adm_errors_init(&e);
    c = adm_config_parse(buf, strlen(buf), &e);
    ck_assert_ptr_nonnull(c);
    s = adm_snapshot_build_res(c, NULL, 1, res, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(up_health_flags(s->pools[0], 0), UP_H_RESOLVING);
    ck_assert_int_eq(adm_resolver_lookup(res, "hangs.test", 1000, &addrs), -1);
    /* other settings: the query in flight is cancelled, a new one starts */
    write_hosts("127.0.0.2 other.test\n");
    adm_snapshot_free(s);
    s = adm_snapshot_build_res(config(""), NULL, 1, res, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(adm_resolver_lookup(res, "hangs.test", 1000, &addrs), -1);
    adm_snapshot_free(s);
    adm_errors_clear(&e);
    adm_resolver_free(res);
    event_base_free(base);
    close(fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resolve");
    TCase *tc = tcase_create("resolve");
    SRunner *sr;
    int failed;

    snprintf(hosts, sizeof(hosts), "/tmp/sy-test-hosts-%ld", (long)getpid());
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, names_become_servers_and_follow_the_hosts_file);
    tcase_add_test(tc, unresolved_name_is_one_server_down);
    tcase_add_test(tc, unreadable_hosts_file_refused);
    tcase_add_test(tc, hanging_resolution_cancelled);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    unlink(hosts);
    return failed ? 1 : 0;
}
