/*
 * test_etcd.c - the etcd client (admin/etcd.c, etcd_http.c) against a real
 * etcd started here on free 127.0.0.1 ports in a temporary directory, and
 * changed with etcdctl: the first snapshot, events grouped per revision,
 * keys outside the prefix, progress notifications, the writes and their
 * compares, a resumed watch, a compaction while the client was cut off,
 * etcd killed and restarted, a write while etcd is down, the watchdog on
 * a silent watch, auth with a password, and TLS with client certificates.
 *
 * Cutting the client off and silencing its watch take a TCP proxy of the
 * test's own, on the same event base: PASS forwards, FREEZE stops
 * forwarding on the connections it has (new ones pass), DOWN closes them
 * all and every new one at once.
 *
 * etcd missing is a failure, not a skip: CI installs etcd-server and
 * etcd-client (.ci/setup).
 */
#define _GNU_SOURCE

#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admin/etcd.h"

/* ---- etcd ---- */

struct etcd {
    char dir[64];
    char url[64];
    unsigned cport, pport;
    pid_t pid;
    int tls;
    const char *extra;
};

static char certdir[64];

static unsigned free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* etcdctl's flags for <s>. */
static const char *ctl_flags(const struct etcd *s)
{
    static char buf[512];

    snprintf(buf, sizeof(buf), "ETCDCTL_API=3 etcdctl --dial-timeout=2s --endpoints=%s", s->url);
    if (s->tls)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
                 " --cacert=%s/ca.pem --cert=%s/client.pem --key=%s/client.key", certdir, certdir,
                 certdir);
    return buf;
}

/* Runs "etcdctl <fmt...>" against <s>; its exit status. */
static int ctl(const struct etcd *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ctl(const struct etcd *s, const char *fmt, ...)
{
    char cmd[2048], args[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "%s %s >>%s/ctl.log 2>&1", ctl_flags(s), args, s->dir);
    return system(cmd);
}

/* The current revision of <s>. */
static long long ctl_rev(const struct etcd *s)
{
    char cmd[1024], out[4096] = "";
    const char *p;
    FILE *f;

    snprintf(cmd, sizeof(cmd), "%s get / -w json 2>/dev/null", ctl_flags(s));
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    pclose(f);
    ck_assert_ptr_nonnull(p = strstr(out, "\"revision\":"));
    return atoll(p + 11);
}

/* A file of <s>'s directory holding <text> (etcdctl txn's input). */
static const char *txn_file(const struct etcd *s, const char *text)
{
    static char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/txn", s->dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
    return path;
}

static void etcd_spawn(struct etcd *s)
{
    char cmd[2048];

    snprintf(cmd, sizeof(cmd),
             "exec etcd --name t --data-dir %s/data --listen-client-urls %s "
             "--advertise-client-urls %s --listen-peer-urls http://127.0.0.1:%u "
             "--initial-advertise-peer-urls http://127.0.0.1:%u "
             "--initial-cluster t=http://127.0.0.1:%u "
             "--experimental-watch-progress-notify-interval=500ms %s%s%s%s%s%s%s %s "
             ">>%s/etcd.log 2>&1",
             s->dir, s->url, s->url, s->pport, s->pport, s->pport,
             s->tls ? "--client-cert-auth --trusted-ca-file=" : "", s->tls ? certdir : "",
             s->tls ? "/ca.pem --cert-file=" : "", s->tls ? certdir : "",
             s->tls ? "/server.pem --key-file=" : "", s->tls ? certdir : "",
             s->tls ? "/server.key" : "", s->extra ? s->extra : "", s->dir);
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) { /* 10 s at most */
        if (ctl(s, "endpoint health") == 0)
            return;
        ck_assert_msg(waitpid(s->pid, NULL, WNOHANG) == 0, "etcd exited: see %s/etcd.log", s->dir);
        usleep(100 * 1000);
    }
    ck_abort_msg("etcd did not become healthy: see %s/etcd.log", s->dir);
}

static void etcd_start(struct etcd *s, int tls, const char *extra)
{
    memset(s, 0, sizeof(*s));
    ck_assert_msg(system("command -v etcd >/dev/null && command -v etcdctl >/dev/null") == 0,
                  "etcd is not installed: install etcd-server and etcd-client (.ci/setup)");
    snprintf(s->dir, sizeof(s->dir), "/tmp/sy-etcd-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    s->cport = free_port();
    s->pport = free_port();
    s->tls = tls;
    s->extra = extra;
    snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%u", tls ? "https" : "http", s->cport);
    etcd_spawn(s);
}

static void etcd_kill(struct etcd *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

static void etcd_stop(struct etcd *s)
{
    char cmd[128];

    etcd_kill(s);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- the client under test, and what its hooks saw ---- */

#define MAXKEYS 64

struct seen {
    char keys[MAXKEYS][64], vals[MAXKEYS][64];
    int nkeys;
    int snapshots, last_compacted, event_calls, ups, downs, up;
    size_t last_n; /* events in the last events call */
    long long rev; /* of the last snapshot or events */
    long long progress;
    char why[512];
    char down_why[512]; /* of the last down */
};

static struct event_base *base;
static struct event *ticker;
static struct seen seen;

static int find(const char *k, size_t n)
{
    for (int i = 0; i < seen.nkeys; i++)
        if (strlen(seen.keys[i]) == n && !memcmp(seen.keys[i], k, n))
            return i;
    return -1;
}

static void set_kv(const struct adm_etcd_kv *kv)
{
    int i = find(kv->key, kv->keylen);

    if (!kv->value) {
        if (i >= 0) {
            seen.nkeys--;
            memcpy(seen.keys[i], seen.keys[seen.nkeys], 64);
            memcpy(seen.vals[i], seen.vals[seen.nkeys], 64);
        }
        return;
    }
    if (i < 0) {
        ck_assert_int_lt(seen.nkeys, MAXKEYS);
        i = seen.nkeys++;
        snprintf(seen.keys[i], 64, "%.*s", (int)kv->keylen, kv->key);
    }
    snprintf(seen.vals[i], 64, "%.*s", (int)kv->vallen, kv->value);
}

/* The value the client's view holds for <k>, or NULL. */
static const char *val(const char *k)
{
    int i = find(k, strlen(k));
    return i < 0 ? NULL : seen.vals[i];
}

static void on_snapshot(void *arg, int64_t rev, const struct adm_etcd_kv *kvs, size_t n,
                        int compacted)
{
    (void)arg;
    seen.nkeys = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) /* in key order */
            ck_assert_int_lt(strcmp(kvs[i - 1].key, kvs[i].key), 0);
        set_kv(&kvs[i]);
    }
    seen.snapshots++;
    seen.last_compacted = compacted;
    seen.rev = rev;
}

static void on_events(void *arg, int64_t rev, const struct adm_etcd_kv *evs, size_t n)
{
    (void)arg;
    ck_assert_int_gt(rev, seen.rev); /* in order, never twice */
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(evs[i].mod_revision, rev);
        ck_assert_msg(evs[i].keylen >= 3 && !memcmp(evs[i].key, "/p/", 3), "%.*s outside",
                      (int)evs[i].keylen, evs[i].key);
        set_kv(&evs[i]);
    }
    seen.event_calls++;
    seen.last_n = n;
    seen.rev = rev;
}

static void on_progress(void *arg, int64_t rev)
{
    (void)arg;
    seen.progress = rev;
}

static void on_state(void *arg, int up, const char *why)
{
    (void)arg;
    ck_assert_int_ne(up, seen.up); /* each change once */
    seen.up = up;
    if (up)
        seen.ups++;
    else
        seen.downs++;
    snprintf(seen.why, sizeof(seen.why), "%s", why);
    if (!up)
        snprintf(seen.down_why, sizeof(seen.down_why), "%s", why);
}

static const struct adm_etcd_hooks hooks = {on_snapshot, on_events, on_progress, on_state, NULL};

static struct adm_etcd *client(const char *url, const struct adm_etcd_opts *extra)
{
    struct adm_etcd_opts o = {0};
    const char *eps[1] = {url};
    char why[256] = "";
    struct adm_etcd *e;

    if (extra)
        o = *extra;
    o.endpoints = eps;
    o.nendpoints = 1;
    o.prefix = "/p/";
    o.dial_timeout_ms = 1000;
    if (!o.request_timeout_ms)
        o.request_timeout_ms = 2000;
    o.backoff_min_ms = 50;
    o.backoff_max_ms = 200;
    e = adm_etcd_new(base, &o, &hooks, why, sizeof(why));
    ck_assert_msg(e != NULL, "adm_etcd_new: %s", why);
    adm_etcd_start(e);
    return e;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Runs the loop until <cond> holds, failing after <ms>. */
#define WAIT_OK(cond, ms)                                                                          \
    do {                                                                                           \
        long long end_ = now_ms() + (ms);                                                          \
        while (!(cond) && now_ms() < end_)                                                         \
            event_base_loop(base, EVLOOP_ONCE);                                                    \
        ck_assert_msg((cond), "line %d: timed out waiting for %s", __LINE__, #cond);               \
    } while (0)

/* Runs the loop for <ms>. */
static void run_for(long long ms)
{
    long long end = now_ms() + ms;

    while (now_ms() < end)
        event_base_loop(base, EVLOOP_ONCE);
}

static void setup(void)
{
    struct timeval tv = {0, 20000};

    memset(&seen, 0, sizeof(seen));
    seen.up = -1;
    base = event_base_new();
    ticker = event_new(base, -1, EV_PERSIST, tick, NULL); /* EVLOOP_ONCE returns often */
    event_add(ticker, &tv);
}

static void teardown(void)
{
    event_free(ticker);
    event_base_free(base);
}

/* ---- the proxy ---- */

enum pmode { PASS, FREEZE, DOWN };

struct pipe2 {
    struct bufferevent *a, *b;
    struct pipe2 *next;
};

static struct {
    struct evconnlistener *l;
    struct pipe2 *pipes;
    enum pmode mode;
    unsigned port, target;
    char url[64];
} px;

static void pipe_close(struct pipe2 *p)
{
    if (p->a)
        bufferevent_free(p->a);
    if (p->b)
        bufferevent_free(p->b);
    p->a = p->b = NULL;
}

static void px_read(struct bufferevent *bev, void *arg)
{
    struct pipe2 *p = arg;
    struct bufferevent *to = bev == p->a ? p->b : p->a;

    if (to)
        bufferevent_write_buffer(to, bufferevent_get_input(bev));
}

/* The other side's output is flushed: close it too. */
static void px_drained(struct bufferevent *bev, void *arg)
{
    struct pipe2 *p = arg;

    (void)bev;
    pipe_close(p);
}

/* One side closed: the other gets what is still buffered, then closes. */
static void px_event(struct bufferevent *bev, short what, void *arg)
{
    struct pipe2 *p = arg;
    struct bufferevent *other = bev == p->a ? p->b : p->a;

    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    bufferevent_free(bev);
    if (bev == p->a)
        p->a = NULL;
    else
        p->b = NULL;
    if (!other || evbuffer_get_length(bufferevent_get_output(other)) == 0)
        pipe_close(p);
    else
        bufferevent_setcb(other, NULL, px_drained, NULL, p);
}

static void px_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    struct pipe2 *p = calloc(1, sizeof(*p));
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    (void)l;
    (void)sa;
    (void)len;
    (void)arg;
    if (px.mode == DOWN) {
        evutil_closesocket(fd);
        free(p);
        return;
    }
    p->a = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    p->b = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    to.sin_port = htons((unsigned short)px.target);
    bufferevent_setcb(p->a, px_read, NULL, px_event, p);
    bufferevent_setcb(p->b, px_read, NULL, px_event, p);
    bufferevent_enable(p->a, EV_READ | EV_WRITE);
    bufferevent_enable(p->b, EV_READ | EV_WRITE);
    bufferevent_socket_connect(p->b, (struct sockaddr *)&to, sizeof(to));
    p->next = px.pipes;
    px.pipes = p;
}

static void px_start(unsigned target)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in got;
    socklen_t len = sizeof(got);

    memset(&px, 0, sizeof(px));
    px.target = target;
    px.l = evconnlistener_new_bind(base, px_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                   16, (struct sockaddr *)&a, sizeof(a));
    ck_assert_ptr_nonnull(px.l);
    getsockname(evconnlistener_get_fd(px.l), (struct sockaddr *)&got, &len);
    px.port = ntohs(got.sin_port);
    snprintf(px.url, sizeof(px.url), "http://127.0.0.1:%u", px.port);
}

static void px_stop(void)
{
    while (px.pipes) {
        struct pipe2 *p = px.pipes;
        px.pipes = p->next;
        pipe_close(p);
        free(p);
    }
    evconnlistener_free(px.l);
}

static void px_mode(enum pmode m)
{
    px.mode = m;
    for (struct pipe2 *p = px.pipes; p; p = p->next) {
        if (m == DOWN) {
            pipe_close(p);
        } else if (m == FREEZE && p->a && p->b) {
            bufferevent_disable(p->a, EV_READ);
            bufferevent_disable(p->b, EV_READ);
        }
    }
}

/* ---- writes ---- */

struct wres {
    int calls, ok;
    long long rev;
    char why[256];
};

static void on_done(void *arg, int ok, int64_t rev, const char *why)
{
    struct wres *w = arg;

    w->calls++;
    w->ok = ok;
    w->rev = rev;
    snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
}

static struct wres wr;

/* Writes and waits for the answer; its ok. */
static int write_wait(struct adm_etcd *e, const char *k, const char *v, enum adm_etcd_cmp cmp,
                      int64_t rev)
{
    memset(&wr, 0, sizeof(wr));
    ck_assert_uint_ne(adm_etcd_write(e, k, v, v ? strlen(v) : 0, cmp, rev, on_done, &wr), 0);
    WAIT_OK(wr.calls > 0, 10000);
    ck_assert_int_eq(wr.calls, 1);
    return wr.ok;
}

/* ---- the tests ---- */

START_TEST(snapshot_events_writes)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_stats st;
    long long r;

    etcd_start(&s, 0, NULL);
    ck_assert_int_eq(ctl(&s, "put /p/a 1"), 0);
    ck_assert_int_eq(ctl(&s, "put /p/b 2"), 0);
    ck_assert_int_eq(ctl(&s, "put /q/x out"), 0);
    ck_assert_int_eq(ctl(&s, "put /p 'not under /p/'"), 0);
    e = client(s.url, NULL);
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_int_eq(seen.snapshots, 1);
    ck_assert_int_eq(seen.last_compacted, 0);
    ck_assert_int_eq(seen.nkeys, 2);
    ck_assert_str_eq(val("/p/a"), "1");
    ck_assert_str_eq(val("/p/b"), "2");

    /* two keys in one revision: one events call */
    ck_assert_int_eq(ctl(&s, "txn < %s", txn_file(&s, "\nput /p/c 3\nput /p/d 4\n\n\n")), 0);
    WAIT_OK(val("/p/d") != NULL, 5000);
    ck_assert_int_eq(seen.event_calls, 1);
    ck_assert_uint_eq(seen.last_n, 2);
    ck_assert_str_eq(val("/p/c"), "3");
    /* outside the prefix: nothing; a delete: the key goes */
    ck_assert_int_eq(ctl(&s, "put /q/y out"), 0);
    ck_assert_int_eq(ctl(&s, "del /p/a"), 0);
    WAIT_OK(val("/p/a") == NULL, 5000);
    ck_assert_int_eq(seen.event_calls, 2);
    ck_assert_int_eq(seen.nkeys, 3);
    /* progress notifications (every 500 ms) */
    WAIT_OK(seen.progress >= ctl_rev(&s), 5000);

    /* writes: ALWAYS, ABSENT, MOD_BELOW, delete; then the watch brings them */
    ck_assert_int_eq(write_wait(e, "/p/w", "v1", ADM_ETCD_ALWAYS, 0), 1);
    r = wr.rev;
    WAIT_OK(seen.rev == r, 5000);
    ck_assert_str_eq(val("/p/w"), "v1");
    ck_assert_int_eq(write_wait(e, "/p/w", "v2", ADM_ETCD_ABSENT, 0), 0);
    ck_assert_int_eq(wr.rev, r); /* etcd's revision then */
    ck_assert_int_eq(write_wait(e, "/p/new", "n", ADM_ETCD_ABSENT, 0), 1);
    ck_assert_int_eq(write_wait(e, "/p/w", "v3", ADM_ETCD_MOD_BELOW, r), 0);
    ck_assert_int_eq(write_wait(e, "/p/w", "v3", ADM_ETCD_MOD_BELOW, r + 1), 1);
    WAIT_OK(seen.rev == wr.rev, 5000);
    ck_assert_str_eq(val("/p/w"), "v3");
    ck_assert_int_eq(write_wait(e, "/p/w", NULL, ADM_ETCD_ALWAYS, 0), 1);
    WAIT_OK(val("/p/w") == NULL, 5000);
    ck_assert_str_eq(val("/p/new"), "n");
    /* binary values survive base64 */
    memset(&wr, 0, sizeof(wr));
    adm_etcd_write(e, "/p/bin", "a\0b", 3, ADM_ETCD_ALWAYS, 0, on_done, &wr);
    WAIT_OK(wr.calls == 1 && seen.rev == wr.rev, 5000);
    /* a canceled write's done is never called */
    struct wres c = {0};
    adm_etcd_cancel(e, adm_etcd_write(e, "/p/x", "x", 1, ADM_ETCD_ALWAYS, 0, on_done, &c));
    write_wait(e, "/p/y", "y", ADM_ETCD_ALWAYS, 0);
    ck_assert_int_eq(c.calls, 0);

    adm_etcd_stats(e, &st);
    ck_assert_int_eq(st.up, 1);
    ck_assert_str_eq(st.endpoint, s.url);
    ck_assert_uint_eq(st.reconnects, 0);
    ck_assert_uint_eq(st.rereads, 0);
    adm_etcd_free(e);
    etcd_stop(&s);
}
END_TEST

START_TEST(resume_and_compaction)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_stats st;

    etcd_start(&s, 0, NULL);
    ck_assert_int_eq(ctl(&s, "put /p/a 1"), 0);
    px_start(s.cport);
    e = client(px.url, NULL);
    WAIT_OK(seen.up == 1, 5000);

    /* cut off: a put meanwhile arrives as an event once back, no re-read */
    px_mode(DOWN);
    WAIT_OK(seen.up == 0, 5000);
    ck_assert_ptr_nonnull(strstr(seen.why, px.url));
    ck_assert_int_eq(ctl(&s, "put /p/b 2"), 0);
    px_mode(PASS);
    WAIT_OK(val("/p/b") != NULL, 5000);
    ck_assert_int_eq(seen.up, 1);
    ck_assert_int_eq(seen.snapshots, 1);

    /* cut off across a compaction: a new snapshot, compacted, right state */
    px_mode(DOWN);
    WAIT_OK(seen.up == 0, 5000);
    ck_assert_int_eq(ctl(&s, "put /p/c 3"), 0);
    ck_assert_int_eq(ctl(&s, "del /p/a"), 0);
    ck_assert_int_eq(ctl(&s, "put /p/b 22"), 0);
    ck_assert_int_eq(ctl(&s, "compact %lld", ctl_rev(&s)), 0);
    px_mode(PASS);
    WAIT_OK(seen.snapshots == 2, 5000);
    ck_assert_int_eq(seen.last_compacted, 1);
    ck_assert_int_eq(seen.nkeys, 2);
    ck_assert_ptr_null(val("/p/a"));
    ck_assert_str_eq(val("/p/b"), "22");
    ck_assert_str_eq(val("/p/c"), "3");
    ck_assert_int_eq(seen.rev, ctl_rev(&s));
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_int_eq(ctl(&s, "put /p/d 4"), 0);
    WAIT_OK(val("/p/d") != NULL, 5000);

    adm_etcd_stats(e, &st);
    ck_assert_uint_eq(st.compactions, 1);
    ck_assert_uint_eq(st.rereads, 1);
    ck_assert_uint_ge(st.reconnects, 2);
    adm_etcd_free(e);
    px_stop();
    etcd_stop(&s);
}
END_TEST

START_TEST(killed_and_restarted)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_opts o = {.request_timeout_ms = 1000};
    long long t0;

    etcd_start(&s, 0, NULL);
    ck_assert_int_eq(ctl(&s, "put /p/a 1"), 0);
    e = client(s.url, &o);
    WAIT_OK(seen.up == 1, 5000);
    etcd_kill(&s);
    WAIT_OK(seen.up == 0, 5000);
    ck_assert_ptr_nonnull(strstr(seen.why, s.url));

    /* a write while etcd is down fails after request_timeout_ms */
    memset(&wr, 0, sizeof(wr));
    t0 = now_ms();
    adm_etcd_write(e, "/p/w", "w", 1, ADM_ETCD_ALWAYS, 0, on_done, &wr);
    WAIT_OK(wr.calls == 1, 5000);
    ck_assert_int_eq(wr.ok, -1);
    ck_assert_int_ge(now_ms() - t0, 900);
    ck_assert_ptr_nonnull(strstr(wr.why, "unreachable"));

    /* a write queued while down goes through once etcd is back */
    struct wres q = {0};
    etcd_spawn(&s);
    adm_etcd_write(e, "/p/q", "q", 1, ADM_ETCD_ALWAYS, 0, on_done, &q);
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_int_eq(seen.ups, 2);
    ck_assert_int_eq(seen.downs, 1);
    WAIT_OK(q.calls == 1, 5000);
    ck_assert_int_eq(q.ok, 1);
    ck_assert_int_eq(ctl(&s, "put /p/b 2"), 0);
    WAIT_OK(val("/p/b") != NULL && val("/p/q") != NULL, 5000);
    ck_assert_str_eq(val("/p/a"), "1");
    ck_assert_int_eq(seen.snapshots, 1);
    adm_etcd_free(e);
    etcd_stop(&s);
}
END_TEST

START_TEST(watchdog)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_opts o = {.watch_idle_ms = 300};
    struct adm_etcd_stats st;

    /* progress notifications only every 10 minutes: the watch is silent */
    etcd_start(&s, 0, "--experimental-watch-progress-notify-interval=10m");
    px_start(s.cport);
    e = client(px.url, &o);
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_int_eq(ctl(&s, "put /p/a 1"), 0);
    WAIT_OK(val("/p/a") != NULL, 5000);
    /* idle, the probes find nothing to restart for */
    run_for(1000);
    adm_etcd_stats(e, &st);
    ck_assert_msg(st.watchdog_trips == 0, "%s", seen.why);
    /* a silenced watch: the probe sees /p/b, the watchdog restarts */
    px_mode(FREEZE);
    ck_assert_int_eq(ctl(&s, "put /p/b 2"), 0);
    WAIT_OK(val("/p/b") != NULL, 5000);
    adm_etcd_stats(e, &st);
    ck_assert_uint_eq(st.watchdog_trips, 1);
    ck_assert_ptr_nonnull(strstr(seen.down_why, "watchdog"));
    ck_assert_int_eq(seen.snapshots, 1);
    adm_etcd_free(e);
    px_stop();
    etcd_stop(&s);
}
END_TEST

START_TEST(auth)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_opts o = {.username = "root", .password = "secret"};

    /* tokens expire after 1 s: a write after 2 s takes a new one */
    etcd_start(&s, 0, "--auth-token-ttl=1");
    ck_assert_int_eq(ctl(&s, "user add root:secret --interactive=false"), 0);
    ck_assert_int_eq(ctl(&s, "auth enable"), 0);
    ck_assert_int_eq(ctl(&s, "--user root:secret put /p/a 1"), 0);
    e = client(s.url, &o);
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_str_eq(val("/p/a"), "1");
    ck_assert_int_eq(write_wait(e, "/p/b", "2", ADM_ETCD_ALWAYS, 0), 1);
    WAIT_OK(val("/p/b") != NULL, 5000);
    run_for(2000);
    ck_assert_int_eq(write_wait(e, "/p/c", "3", ADM_ETCD_ALWAYS, 0), 1);
    WAIT_OK(val("/p/c") != NULL, 5000);
    adm_etcd_free(e);

    /* a wrong password: down, and why says so */
    memset(&seen, 0, sizeof(seen));
    seen.up = -1;
    o.password = "wrong";
    e = client(s.url, &o);
    WAIT_OK(seen.downs == 1, 5000);
    ck_assert_msg(strstr(seen.why, "authentication failed") != NULL, "%s", seen.why);
    ck_assert_int_eq(seen.snapshots, 0);
    adm_etcd_free(e);
    etcd_stop(&s);
}
END_TEST

static const char cert_script[] =
    "set -e; cd \"$1\"; Q='-nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256'\n"
    "openssl req -x509 $Q -keyout ca.key -out ca.pem -subj /CN=etcd-test-ca -days 2 "
    "  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign\n"
    "leaf() { openssl req -new $Q -keyout $1.key -out $1.csr -subj /CN=$1\n"
    "  printf '%s\\nextendedKeyUsage=%s\\n' \"$2\" \"$3\" > $1.ext\n"
    "  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
    "    -extfile $1.ext -out $1.pem; }\n"
    "leaf server subjectAltName=IP:127.0.0.1 serverAuth,clientAuth\n"
    "leaf client subjectAltName=DNS:client clientAuth\n"
    "leaf wrong subjectAltName=DNS:etcd.example.com serverAuth\n"
    "openssl req -x509 $Q -keyout other.key -out other.pem -subj /CN=other-ca -days 2\n";

static void make_certs(void)
{
    char cmd[sizeof(cert_script) + 256];
    FILE *f;

    snprintf(certdir, sizeof(certdir), "/tmp/sy-etcd-certs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(certdir));
    snprintf(cmd, sizeof(cmd), "%s/gen.sh", certdir);
    ck_assert_ptr_nonnull(f = fopen(cmd, "w"));
    fputs(cert_script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "sh %s/gen.sh %s >%s/gen.log 2>&1", certdir, certdir, certdir);
    ck_assert_msg(system(cmd) == 0, "openssl failed: see %s/gen.log", certdir);
}

static char *cfile(const char *name)
{
    static char buf[4][128];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", certdir, name);
    return b;
}

START_TEST(tls)
{
    struct etcd s;
    struct adm_etcd *e;
    struct adm_etcd_opts o = {0};
    char cmd[128], why[256];
    const char *bad[1] = {"ftp://x:1"};

    make_certs();
    etcd_start(&s, 1, NULL);
    ck_assert_int_eq(ctl(&s, "put /p/a 1"), 0);
    o.ca_file = cfile("ca.pem");
    o.cert_file = cfile("client.pem");
    o.key_file = cfile("client.key");
    e = client(s.url, &o);
    WAIT_OK(seen.up == 1, 5000);
    ck_assert_str_eq(val("/p/a"), "1");
    ck_assert_int_eq(write_wait(e, "/p/b", "2", ADM_ETCD_ABSENT, 0), 1);
    WAIT_OK(val("/p/b") != NULL, 5000);
    adm_etcd_free(e);

    /* an unknown CA: the certificate is refused, and why says so */
    memset(&seen, 0, sizeof(seen));
    seen.up = -1;
    o.ca_file = cfile("other.pem");
    e = client(s.url, &o);
    WAIT_OK(seen.downs == 1, 5000);
    ck_assert_msg(strstr(seen.why, "verify failed") != NULL, "%s", seen.why);
    adm_etcd_free(e);
    /* no client certificate: etcd refuses */
    memset(&seen, 0, sizeof(seen));
    seen.up = -1;
    o.ca_file = cfile("ca.pem");
    o.cert_file = o.key_file = NULL;
    e = client(s.url, &o);
    WAIT_OK(seen.downs == 1, 5000);
    ck_assert_int_eq(seen.snapshots, 0);
    adm_etcd_free(e);

    /* bad options fail adm_etcd_new with a reason */
    o.ca_file = cfile("missing.pem");
    struct adm_etcd_opts b = o;
    const char *eps[1] = {s.url};
    b.endpoints = eps;
    b.nendpoints = 1;
    b.prefix = "/p/";
    ck_assert_ptr_null(adm_etcd_new(base, &b, &hooks, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "ca_file"));
    b.endpoints = bad;
    ck_assert_ptr_null(adm_etcd_new(base, &b, &hooks, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "ftp://x:1"));

    etcd_stop(&s);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certdir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("etcd");
    TCase *tc = tcase_create("etcd");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, snapshot_events_writes);
    tcase_add_test(tc, resume_and_compaction);
    tcase_add_test(tc, killed_and_restarted);
    tcase_add_test(tc, watchdog);
    tcase_add_test(tc, auth);
    tcase_add_test(tc, tls);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
