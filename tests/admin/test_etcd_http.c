/*
 * test_etcd_http.c - the dial of admin/etcd_http.c (the etcd client's and
 * the JWKS fetch's HTTP/1.1 client): every address of a host name is tried
 * in turn until one connects. A plain HTTP server of the test's own loop
 * listens on 127.0.0.1 only; names in an /etc/hosts-format file of the
 * test's (given to evdns) also have addresses where nothing listens
 * (127.0.0.2 and ::1, both loopback), listed before and after it. Also: a
 * name with no listening address fails with the first address's error,
 * and a request ended before or while its lookup is under way is freed at
 * once (ASan checks the late answer).
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admin/etcd_int.h"

struct result {
    struct event_base *base;
    int ended, status;
    char body[64], err[512];
};

/* The server: answers any request with 200 "ok" and closes. */
static void srv_read(struct bufferevent *bev, void *arg)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);

    (void)arg;
    if (end.pos < 0)
        return;
    evbuffer_drain(in, evbuffer_get_length(in));
    evbuffer_add_printf(bufferevent_get_output(bev),
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
}

static void srv_event(struct bufferevent *bev, short what, void *arg)
{
    (void)what;
    (void)arg;
    bufferevent_free(bev);
}

static void srv_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                       void *arg)
{
    struct bufferevent *bev =
        bufferevent_socket_new(evconnlistener_get_base(l), fd, BEV_OPT_CLOSE_ON_FREE);

    (void)sa;
    (void)len;
    (void)arg;
    bufferevent_setcb(bev, srv_read, NULL, srv_event, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void done(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct result *r = arg;

    r->ended++;
    r->status = status;
    snprintf(r->body, sizeof(r->body), "%.*s", (int)len, body ? body : "");
    snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
    event_base_loopbreak(r->base);
}

static struct event_base *base;
static struct evdns_base *dns;
static struct evconnlistener *lis;
static unsigned port;
static char hosts[64];

static void setup(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sin);
    FILE *f;
    int fd;

    base = event_base_new();
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lis = evconnlistener_new_bind(base, srv_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                  16, (struct sockaddr *)&sin, sizeof(sin));
    ck_assert_ptr_nonnull(lis);
    getsockname(evconnlistener_get_fd(lis), (struct sockaddr *)&sin, &sl);
    port = ntohs(sin.sin_port);
    snprintf(hosts, sizeof(hosts), "/tmp/sy-etcd-http-hosts-XXXXXX");
    fd = mkstemp(hosts);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs("127.0.0.2 dead-first.sy-test\n"
          "127.0.0.1 dead-first.sy-test\n"
          "127.0.0.1 dead-last.sy-test\n"
          "127.0.0.2 dead-last.sy-test\n"
          "::1 six-first.sy-test\n"
          "127.0.0.1 six-first.sy-test\n"
          "192.0.2.77 blackhole-first.sy-test\n"
          "127.0.0.1 blackhole-first.sy-test\n"
          "127.0.0.2 nobody.sy-test\n"
          "::1 nobody.sy-test\n",
          f);
    fclose(f);
    /* no nameserver: the names come from the file, an unknown one fails */
    dns = evdns_base_new(base, 0);
    ck_assert_ptr_nonnull(dns);
    ck_assert_int_eq(evdns_base_load_hosts(dns, hosts), 0);
}

static void teardown(void)
{
    evconnlistener_free(lis);
    evdns_base_free(dns, 1);
    event_base_free(base);
    unlink(hosts);
}

/* A GET of http://<host>:<port>/ through dns, run to its end. */
static void get(const char *host, unsigned p, struct result *r)
{
    struct etcd_ep ep;
    char url[128], why[256];
    struct etcd_http_req req = {.base = base,
                                .dns = dns,
                                .ep = &ep,
                                .path = "/",
                                .dial_ms = 3000,
                                .request_ms = 5000,
                                .done = done,
                                .arg = r};
    struct timeval tv = {10, 0};
    struct etcd_http *h;

    memset(r, 0, sizeof(*r));
    r->base = base;
    snprintf(url, sizeof(url), "http://%s:%u", host, p);
    ck_assert_msg(etcd_ep_parse(&ep, url, why, sizeof(why)) == 0, "%s", why);
    h = etcd_http_start(&req, why, sizeof(why));
    ck_assert_msg(h, "%s", why);
    ck_assert_int_eq(r->ended, 0); /* never inside the call */
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
    ck_assert_int_eq(r->ended, 1);
    etcd_ep_clear(&ep);
}

START_TEST(every_address_in_turn)
{
    /* blackhole-first: an address that may drop the SYN (TEST-NET-1; where
     * no route leads there it fails at once) gets only its share of the
     * dial timeout */
    static const char *const names[] = {"dead-first.sy-test", "dead-last.sy-test",
                                        "six-first.sy-test", "blackhole-first.sy-test",
                                        "127.0.0.1"};
    struct result r;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        get(names[i], port, &r);
        ck_assert_msg(r.status == 200 && !strcmp(r.body, "ok"), "%s: %d %s", names[i], r.status,
                      r.err);
    }
    get("nobody.sy-test", port, &r);
    ck_assert_int_eq(r.status, 0);
    /* the first address named, with its reason, and how many more failed */
    ck_assert_msg(strstr(r.err, ": 127.0.0.2:") && strstr(r.err, "Connection refused") &&
                      strstr(r.err, "(and 1 more address)"),
                  "%s", r.err);
}
END_TEST

START_TEST(ended_during_the_lookup)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sin);
    struct etcd_ep ep;
    char why[256], ns[64];
    struct result r = {.base = base};
    struct etcd_http_req req = {.base = base,
                                .dns = dns,
                                .ep = &ep,
                                .path = "/",
                                .dial_ms = 5000,
                                .request_ms = 5000,
                                .done = done,
                                .arg = &r};
    struct timeval tv = {0, 200000};
    struct etcd_http *h;
    int udp = socket(AF_INET, SOCK_DGRAM, 0);

    /* a nameserver that never answers: the lookup stays under way */
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(udp, (struct sockaddr *)&sin, sizeof(sin)), 0);
    getsockname(udp, (struct sockaddr *)&sin, &sl);
    snprintf(ns, sizeof(ns), "127.0.0.1:%u", ntohs(sin.sin_port));
    ck_assert_int_eq(evdns_base_nameserver_ip_add(dns, ns), 0);
    ck_assert_int_eq(etcd_ep_parse(&ep, "http://hangs.sy-test:1", why, sizeof(why)), 0);
    for (int round = 0; round < 2; round++) {
        h = etcd_http_start(&req, why, sizeof(why));
        ck_assert_ptr_nonnull(h);
        if (round == 1) { /* the lookup asked, then the request ended */
            event_base_loopexit(base, &tv);
            event_base_dispatch(base);
        }
        etcd_http_cancel(h);
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
        ck_assert_int_eq(r.ended, 0);
    }
    etcd_ep_clear(&ep);
    close(udp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("etcd_http");
    TCase *tc = tcase_create("dial");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_address_in_turn);
    tcase_add_test(tc, ended_during_the_lookup);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
