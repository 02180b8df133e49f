/*
 * listen.c - binding the listening sockets: one SO_REUSEPORT socket per
 * worker and listener (the kernel spreads connections over the workers),
 * and only where nobody else listens, another Switchyard included.
 *
 * A second Switchyard binding with SO_REUSEPORT too would join our
 * listeners, and the kernel would spread connections over both processes.
 * A probe socket without SO_REUSEPORT cannot bind where anyone listens, so
 * one is bound before the workers' sockets. Alone it leaves a race: two
 * instances started together can both probe before either listens. So the
 * probe and the binds that follow it run under a lock that every Switchyard
 * in the network namespace takes: an abstract unix socket, which the kernel
 * releases when its holder exits or dies, and which nothing on disk can
 * leave stale. (Keeping the probe bound instead does not work: two bound,
 * not listening SO_REUSEADDR sockets coexist, and one without SO_REUSEADDR
 * keeps our own workers' sockets out as well.)
 *
 * Everything here runs on the main (admin) thread; no worker waits on it.
 */
#define _GNU_SOURCE
#include "gateway/gateway.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The lock's name, in the abstract namespace (the leading NUL). */
static const char lock_name[] = "\0switchyard/bind-lock";
/* How long to wait for another instance's binds: they take microseconds,
 * so a lock held this long belongs to a process that is stopped or stuck. */
#define LOCK_WAIT_MS 3000

static int lock_fd = -1;

/* Takes the lock, waiting for another instance's binds. 0, or -1 with
 * <why>. */
static int listen_lock(char *why, size_t cap)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(lock_name) - 1);
    struct timespec nap = {0, 1000 * 1000};
    int fd;

    memcpy(sun.sun_path, lock_name, sizeof(lock_name) - 1);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(why, cap, "the bind lock: %s", strerror(errno));
        return -1;
    }
    for (int waited = 0; bind(fd, (struct sockaddr *)&sun, len) < 0; waited++) {
        if (errno != EADDRINUSE || waited >= LOCK_WAIT_MS) {
            snprintf(why, cap, "the bind lock: %s",
                     errno == EADDRINUSE
                         ? "another Switchyard has held it for 3 s (stopped or stuck?)"
                         : strerror(errno));
            close(fd);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    lock_fd = fd;
    return 0;
}

static void listen_unlock(void)
{
    if (lock_fd >= 0)
        close(lock_fd);
    lock_fd = -1;
}

/* A listening socket of its own for one worker (SO_REUSEPORT). */
static evutil_socket_t listen_socket(const struct adm_addr *a)
{
    int one = 1;
    evutil_socket_t fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->sslen) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* 0 when nobody listens on <a>, else -1 with errno: a socket without
 * SO_REUSEPORT (SO_REUSEADDR only, and never listening, so that it does not
 * block our own binds) cannot bind where anyone listens. */
static int probe_bind(const struct adm_addr *a)
{
    int one = 1, rc, e;
    evutil_socket_t fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    rc = bind(fd, (const struct sockaddr *)&a->ss, a->sslen);
    e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* <n> listening sockets on <a> into <fds>, after a probe (when <probe>)
 * that nobody listens there; under the lock. 0, or -1 with errno and
 * nothing left open. */
static int listen_bind(const struct adm_addr *a, unsigned n, evutil_socket_t *fds, int probe)
{
    unsigned i;
    int e;

    if (probe && probe_bind(a) < 0)
        return -1;
    for (i = 0; i < n; i++)
        if ((fds[i] = listen_socket(a)) < 0)
            goto fail_bound;
    return 0;
fail_bound:
    e = errno;
    while (i)
        close(fds[--i]);
    errno = e;
    return -1;
}

/* Why binding <a> failed with errno <e>, into <why>. */
static void listen_why(const struct adm_addr *a, int e, char *why, size_t cap)
{
    if (e == EADDRINUSE)
        snprintf(why, cap,
                 "%s: address in use (another process, or another Switchyard, "
                 "listens on it)",
                 a->text);
    else if (e == EACCES && a->port < 1024 && geteuid() != 0)
        snprintf(why, cap,
                 "%s: permission denied: a port below 1024 needs root, and this "
                 "process runs as uid %u (it dropped its privileges: user)",
                 a->text, (unsigned)geteuid());
    else
        snprintf(why, cap, "%s: %s", a->text, strerror(e));
}

/* What gw_listen_prepare() bound, until the commit or the abort: for the
 * listener at <index> of the config prepared, a socket per worker. */
struct pending {
    size_t index;
    evutil_socket_t *fds;
};

static struct pending *pend;
static size_t npend;

/* Listeners being closed by the workers: until each worker closed its
 * socket, their address stays ours, so a config that adds it back binds
 * without the probe (which our own sockets would fail). <left> is counted
 * down by the workers; the entry is freed here once it reached 0. */
struct closing {
    char addr[64];
    _Atomic unsigned left;
};

static struct closing **closing;
static size_t nclosing;

/* Whether <addr> is a listener our workers are still closing; forgets the
 * ones they closed. */
static int still_ours(const char *addr)
{
    int ours = 0;
    size_t i = 0;

    while (i < nclosing) {
        if (atomic_load(&closing[i]->left) == 0) {
            free(closing[i]);
            closing[i] = closing[--nclosing];
            continue;
        }
        ours |= strcmp(closing[i]->addr, addr) == 0;
        i++;
    }
    return ours;
}

/* An upgrade: the addresses the running process listens on, whose
 * sockets it hands over (gw_listen_adopt), so that a start binds only the
 * others. */
static char **inherited;
static size_t ninherited;

/* Whether <cfg> has a listener on <addr>. */
static int has_listener(const struct adm_config *cfg, const char *addr)
{
    for (size_t i = 0; cfg && i < cfg->nlisteners; i++)
        if (strcmp(cfg->listeners[i].addr.text, addr) == 0)
            return 1;
    return 0;
}

/* At an upgrade's start: whether the running process hands over a
 * listener on the socket address of <a>, however either config writes it
 * (adm_addr_key). */
static int inherited_has(const struct adm_addr *a)
{
    char key[128];

    adm_addr_key(a, key, sizeof(key));
    for (size_t i = 0; i < ninherited; i++)
        if (strcmp(inherited[i], key) == 0)
            return 1;
    return 0;
}

int gw_listen_inherit(const char *const *addrs, size_t n)
{
    if (!(inherited = calloc(n ? n : 1, sizeof(*inherited))))
        return -1;
    for (ninherited = 0; ninherited < n; ninherited++) {
        struct adm_addr a;
        char key[128], why[128];

        memset(&a, 0, sizeof(a));
        if (adm_addr_parse(&a, addrs[ninherited], 0, why, sizeof(why)) < 0)
            snprintf(key, sizeof(key), "%s", addrs[ninherited]);
        else
            adm_addr_key(&a, key, sizeof(key));
        adm_addr_free(&a);
        if (!(inherited[ninherited] = strdup(key)))
            return -1;
    }
    return 0;
}

int gw_listen_bound_to(evutil_socket_t fd, const struct adm_addr *a)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 || ss.ss_family != a->ss.ss_family)
        return 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)&ss, *y = (const void *)&a->ss;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)&ss, *y = (const void *)&a->ss;
        return x->sin6_port == y->sin6_port &&
               !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
    }
    return 0;
}

/* Hands worker <w> the socket <fd> (taken) of listener <index> of <cfg>. */
static void give(struct gw_process *p, unsigned w, evutil_socket_t fd, const struct adm_config *cfg,
                 size_t index)
{
    struct gw_lchange *ch = calloc(1, sizeof(*ch));
    struct gw_listener *l = calloc(1, sizeof(*l));

    if (!ch || !l) {
        gw_log(GW_LOG_ERROR, "worker %u: listener %s: out of memory", w,
               cfg->listeners[index].addr.text);
        close(fd);
        free(ch);
        free(l);
        return;
    }
    l->fd = fd;
    l->index = index;
    snprintf(l->addr, sizeof(l->addr), "%s", cfg->listeners[index].addr.text);
    ch->add = l;
    gw_worker_lchange(&p->workers[w], ch);
}

size_t gw_listen_adopt(struct gw_process *p, const struct adm_config *cfg, struct gw_handed *fds,
                       size_t n, struct adm_errors *errs)
{
    size_t adopted = 0, n0 = errs->n;

    for (size_t i = 0; i < cfg->nlisteners; i++) {
        const struct adm_addr *a = &cfg->listeners[i].addr;
        unsigned k = 0;

        if (!inherited_has(a))
            continue; /* bound at the start, beside the running process */
        /* one to one; more than this process has workers: some accept on
         * several, for a socket closed would reset what is queued on it */
        for (size_t j = 0; j < n; j++) {
            if (fds[j].fd < 0 || fds[j].kind != GW_HANDED_LISTENER ||
                !gw_listen_bound_to(fds[j].fd, a))
                continue;
            give(p, k % p->nworkers, fds[j].fd, cfg, i);
            fds[j].fd = -1;
            k++;
            adopted++;
        }
        /* fewer: the others are opened beside them (SO_REUSEPORT) */
        for (; k < p->nworkers; k++) {
            evutil_socket_t fd = listen_socket(a);
            char path[64], why[512];
            if (fd < 0) {
                listen_why(a, errno, why, sizeof(why));
                snprintf(path, sizeof(path), "/listeners/%zu/address", i);
                adm_errors_add(errs, path, "%s", why);
                break;
            }
            give(p, k, fd, cfg, i);
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (fds[j].fd < 0 || fds[j].kind != GW_HANDED_LISTENER)
            continue;
        /* the running process had it, this config has not: closed, as a
         * reload that removes a listener closes it */
        gw_log(GW_LOG_NOTICE, "upgrade: listener %s is not in this config: closing it",
               fds[j].addr);
        close(fds[j].fd);
        fds[j].fd = -1;
    }
    return errs->n == n0 ? adopted : 0;
}

void gw_listen_abort(void)
{
    for (size_t i = 0; i < npend; i++) {
        for (unsigned w = 0; pend[i].fds && pend[i].fds[w] >= 0; w++)
            close(pend[i].fds[w]);
        free(pend[i].fds);
    }
    free(pend);
    pend = NULL;
    npend = 0;
}

size_t gw_listen_prepare(struct gw_process *p, const struct adm_config *live,
                         const struct adm_config *cfg, struct adm_errors *errs)
{
    size_t n0 = errs->n;
    char why[512];
    int locked = 0;

    gw_listen_abort(); /* nothing is pending between two pushes */
    if (!(pend = calloc(cfg->nlisteners, sizeof(*pend)))) {
        adm_errors_add(errs, "/listeners", "out of memory");
        return errs->n - n0;
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        const struct adm_addr *a = &cfg->listeners[i].addr;
        struct pending *pd = &pend[npend];
        char path[64];

        if (has_listener(live, a->text) || (!live && inherited_has(a)))
            continue;
        snprintf(path, sizeof(path), "/listeners/%zu/address", i);
        if (!locked && listen_lock(why, sizeof(why)) < 0) {
            adm_errors_add(errs, path, "%s: %s", a->text, why);
            break;
        }
        locked = 1;
        /* the last entry ends the worker list (-1) */
        if (!(pd->fds = malloc((p->nworkers + 1) * sizeof(*pd->fds)))) {
            adm_errors_add(errs, path, "out of memory");
            break;
        }
        pd->index = i;
        pd->fds[p->nworkers] = -1;
        npend++;
        if (listen_bind(a, p->nworkers, pd->fds, !still_ours(a->text)) < 0) {
            listen_why(a, errno, why, sizeof(why));
            adm_errors_add(errs, path, "%s", why);
            pd->fds[0] = -1;
        }
    }
    if (locked)
        listen_unlock();
    if (errs->n != n0)
        gw_listen_abort();
    return errs->n - n0;
}

void gw_listen_commit(struct gw_process *p, const struct adm_config *live,
                      const struct adm_config *cfg)
{
    struct closing *cl;

    for (size_t i = 0; i < npend; i++) {
        const struct adm_listener *al = &cfg->listeners[pend[i].index];
        for (unsigned w = 0; w < p->nworkers; w++) {
            struct gw_lchange *ch = calloc(1, sizeof(*ch));
            struct gw_listener *l = calloc(1, sizeof(*l));
            if (!ch || !l) {
                gw_log(GW_LOG_ERROR, "worker %u: listener %s: out of memory", w, al->addr.text);
                close(pend[i].fds[w]);
                free(ch);
                free(l);
                continue;
            }
            l->fd = pend[i].fds[w];
            l->index = pend[i].index;
            snprintf(l->addr, sizeof(l->addr), "%s", al->addr.text);
            ch->add = l;
            gw_worker_lchange(&p->workers[w], ch);
        }
        free(pend[i].fds);
        if (live)
            gw_log(GW_LOG_INFO, "listener %s: accepting", al->addr.text);
    }
    free(pend);
    pend = NULL;
    npend = 0;
    for (size_t i = 0; live && i < live->nlisteners; i++) {
        const char *addr = live->listeners[i].addr.text;
        struct closing **more;

        if (has_listener(cfg, addr))
            continue;
        gw_log(GW_LOG_INFO, "listener %s: closing; its connections close after their request",
               addr);
        more = realloc(closing, (nclosing + 1) * sizeof(*closing));
        cl = calloc(1, sizeof(*cl));
        if (more)
            closing = more;
        if (!more || !cl) {
            free(cl);
            cl = NULL; /* the address may then look taken for a moment */
        } else {
            snprintf(cl->addr, sizeof(cl->addr), "%s", addr);
            atomic_store(&cl->left, p->nworkers);
            closing[nclosing++] = cl;
        }
        for (unsigned w = 0; w < p->nworkers; w++) {
            struct gw_lchange *ch = calloc(1, sizeof(*ch));
            if (!ch) {
                gw_log(GW_LOG_ERROR, "worker %u: listener %s: out of memory, it stays open", w,
                       addr);
                if (cl)
                    atomic_fetch_sub(&cl->left, 1);
                continue;
            }
            snprintf(ch->remove, sizeof(ch->remove), "%s", addr);
            ch->left = cl ? &cl->left : NULL;
            gw_worker_lchange(&p->workers[w], ch);
        }
    }
}

void gw_listen_free(void)
{
    gw_listen_abort();
    while (ninherited)
        free(inherited[--ninherited]);
    free(inherited);
    inherited = NULL;
    while (nclosing)
        free(closing[--nclosing]);
    free(closing);
    closing = NULL;
}
