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

int gw_listen_lock(char *why, size_t cap)
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

void gw_listen_unlock(void)
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

int gw_listen_bind(const struct adm_addr *a, unsigned n, evutil_socket_t *fds, int probe)
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

void gw_listen_why(const struct adm_addr *a, int e, char *why, size_t cap)
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
