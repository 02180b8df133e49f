/*
 * backend.c - main() of sy_test_backend: command line, the loopback
 * listening sockets, worker threads and clean shutdown on SIGTERM/SIGINT.
 *
 *   sy_test_backend --listen 127.X.Y.Z:PORT [--name NAME] [--port-file FILE]
 *                   [--threads N]
 *
 * PORT 0 picks a free port. Once every socket listens, the port is written to
 * FILE (through a temporary file and rename(), so a reader never sees a
 * partial file) and "listening ADDRESS:<port>" is printed on stdout.
 * With N > 1 threads, each has its own SO_REUSEPORT socket on that port.
 */
#include "backend_int.h"

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TB_MAX_THREADS 64

struct tb_opts {
    const char *listen;
    const char *name;
    const char *port_file;
    int threads;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sy_test_backend --listen 127.X.Y.Z:PORT [--name NAME] "
               "[--port-file FILE] [--threads N]\n");
}

static int parse_args(int argc, char **argv, struct tb_opts *o)
{
    o->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sy_test_backend: %s: missing value\n", a);
            return -1;
        }
        if (strcmp(a, "--listen") == 0) {
            o->listen = argv[++i];
        } else if (strcmp(a, "--name") == 0) {
            o->name = argv[++i];
        } else if (strcmp(a, "--port-file") == 0) {
            o->port_file = argv[++i];
        } else if (strcmp(a, "--threads") == 0) {
            char *end;
            long n = strtol(argv[++i], &end, 10);

            if (*end || n < 1 || n > TB_MAX_THREADS) {
                fprintf(stderr, "sy_test_backend: --threads wants 1..%d\n", TB_MAX_THREADS);
                return -1;
            }
            o->threads = (int)n;
        } else {
            fprintf(stderr, "sy_test_backend: unknown option %s\n", a);
            return -1;
        }
    }
    if (!o->listen) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* "127.X.Y.Z:PORT" -> address and port. Any address outside 127.0.0.0/8 is
 * refused: tests must never expose a listener beyond loopback (several
 * loopback addresses let a test put backends behind one host name). */
static int parse_listen(const char *s, struct in_addr *addr, unsigned *port)
{
    const char *colon = strrchr(s, ':');
    char host[16];
    char *end;
    unsigned long p;

    if (!colon || colon - s >= (long)sizeof(host))
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    if (inet_pton(AF_INET, host, addr) != 1 || (ntohl(addr->s_addr) >> 24) != 127)
        return -1;
    s = colon + 1;
    if (*s < '0' || *s > '9')
        return -1;
    p = strtoul(s, &end, 10);
    if (*end || p > 65535)
        return -1;
    *port = (unsigned)p;
    return 0;
}

/* A non-blocking socket listening on <addr>:<port>, or -1 (errno set). */
static int listen_on(struct in_addr addr, unsigned port, bool reuseport)
{
    struct sockaddr_in sa;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr = addr;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0) {
        int e = errno;

        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static unsigned bound_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);

    if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return 0;
    return ntohs(sa.sin_port);
}

static int write_port_file(const char *path, unsigned port)
{
    char tmp[4096];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return -1;
    f = fopen(tmp, "w");
    if (!f)
        return -1;
    if (fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lev;
    (void)sa;
    (void)salen;
    tb_conn_accept(arg, fd);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tb_worker *w = arg;

    (void)fd;
    (void)what;
    evconnlistener_enable(w->lev);
}

/* Out of descriptors: pause accepting for 100 ms rather than spin. */
static void accept_error_cb(struct evconnlistener *lev, void *arg)
{
    struct tb_worker *w = arg;
    struct timeval tv = {0, 100000};
    int e = EVUTIL_SOCKET_ERROR();

    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        evconnlistener_disable(lev);
        evtimer_add(w->accept_retry, &tv);
    }
}

static int worker_init(struct tb_worker *w, struct tb_server *srv, int fd)
{
    w->srv = srv;
    w->fd = fd;
    w->base = event_base_new();
    if (!w->base)
        goto fail_base;
    w->accept_retry = evtimer_new(w->base, accept_retry_cb, w);
    if (!w->accept_retry)
        goto fail_retry;
    w->lev = evconnlistener_new(w->base, accept_cb, w, LEV_OPT_CLOSE_ON_FREE, -1, fd);
    if (!w->lev)
        goto fail_lev;
    evconnlistener_set_error_cb(w->lev, accept_error_cb);
    return 0;

fail_lev:
    event_free(w->accept_retry);
fail_retry:
    event_base_free(w->base);
    w->base = NULL;
fail_base:
    return -1;
}

static void worker_fini(struct tb_worker *w)
{
    if (!w->base) {
        if (w->fd >= 0)
            close(w->fd);
        return;
    }
    tb_conn_free_all(w);
    evconnlistener_free(w->lev);
    event_free(w->accept_retry);
    event_base_free(w->base);
}

static void *worker_main(void *arg)
{
    struct tb_worker *w = arg;

    event_base_dispatch(w->base);
    return NULL;
}

/* SIGTERM/SIGINT: stop every loop; main() then frees everything. loopexit,
 * not loopbreak: it is an event, so a loop that has not started yet still
 * sees it. */
struct tb_stop {
    struct tb_worker *workers;
    int n;
};

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    const struct tb_stop *st = arg;

    (void)sig;
    (void)what;
    for (int i = 0; i < st->n; i++)
        event_base_loopexit(st->workers[i].base, NULL);
}

/* Fill <p> with TB_BLOCK + TB_PATTERN_LEN bytes of the repeating pattern, so
 * that a TB_BLOCK-long slice can start at any phase. */
static void fill_pattern(char *p)
{
    for (size_t i = 0; i < TB_BLOCK + TB_PATTERN_LEN; i++)
        p[i] = TB_PATTERN[i % TB_PATTERN_LEN];
}

int main(int argc, char **argv)
{
    static struct tb_server srv;
    static char pattern[TB_BLOCK + TB_PATTERN_LEN];
    static struct tb_worker workers[TB_MAX_THREADS];
    pthread_t threads[TB_MAX_THREADS];
    struct tb_opts o = {0};
    struct tb_stop stop;
    struct event *sigterm = NULL, *sigint = NULL;
    struct rlimit rl;
    unsigned port;
    struct in_addr addr;
    int nthreads = 0, rc = 1;

    if (parse_args(argc, argv, &o) < 0)
        return 2;
    if (parse_listen(o.listen, &addr, &port) < 0) {
        fprintf(stderr, "sy_test_backend: --listen wants 127.X.Y.Z:PORT, got %s\n", o.listen);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (o.threads > 1 && evthread_use_pthreads() < 0) {
        fprintf(stderr, "sy_test_backend: evthread_use_pthreads failed\n");
        return 1;
    }
    fill_pattern(pattern);
    srv.pattern = pattern;
    srv.sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!srv.sha256) {
        fprintf(stderr, "sy_test_backend: no SHA-256 in libcrypto\n");
        return 1;
    }

    for (int i = 0; i < o.threads; i++)
        workers[i].fd = -1;
    for (int i = 0; i < o.threads; i++) {
        int fd = listen_on(addr, port, o.threads > 1);

        if (fd < 0) {
            fprintf(stderr, "sy_test_backend: listen %s: %s\n", o.listen, strerror(errno));
            goto out;
        }
        workers[i].fd = fd;
        if (port == 0)
            port = bound_port(fd); /* the other threads join this port */
        if (worker_init(&workers[i], &srv, fd) < 0) {
            fprintf(stderr, "sy_test_backend: libevent setup failed\n");
            goto out;
        }
    }
    if (o.name)
        snprintf(srv.name, sizeof(srv.name), "%s", o.name);
    else
        snprintf(srv.name, sizeof(srv.name), "%s:%u", inet_ntoa(addr), port);

    stop.workers = workers;
    stop.n = o.threads;
    sigterm = evsignal_new(workers[0].base, SIGTERM, signal_cb, &stop);
    sigint = evsignal_new(workers[0].base, SIGINT, signal_cb, &stop);
    if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 || evsignal_add(sigint, NULL) < 0) {
        fprintf(stderr, "sy_test_backend: signal setup failed\n");
        goto out;
    }
    if (o.port_file && write_port_file(o.port_file, port) < 0) {
        fprintf(stderr, "sy_test_backend: cannot write %s: %s\n", o.port_file, strerror(errno));
        goto out;
    }
    printf("listening %s:%u\n", inet_ntoa(addr), port);
    fflush(stdout);

    for (nthreads = 1; nthreads < o.threads; nthreads++) {
        if (pthread_create(&threads[nthreads], NULL, worker_main, &workers[nthreads]) != 0) {
            fprintf(stderr, "sy_test_backend: pthread_create failed\n");
            signal_cb(0, 0, &stop);
            break;
        }
    }
    if (nthreads == o.threads)
        event_base_dispatch(workers[0].base);
    for (int i = 1; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    rc = nthreads == o.threads ? 0 : 1;

out:
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    for (int i = 0; i < o.threads; i++)
        worker_fini(&workers[i]);
    EVP_MD_free(srv.sha256);
    return rc;
}
