/*
 * upgrade.c - the hand-over conversation of upgrade.h, both sides, and
 * sd_notify. It moves frames and descriptors and checks who is on the
 * other end; what is paused, carried or adopted is main.c's (the hooks).
 */
#define _GNU_SOURCE
#include "gateway/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>

/* Descriptors per frame, below the kernel's SCM_MAX_FD (253). */
#define FDS_PER_FRAME 200
/* The largest frame taken: the state of thousands of pools fits. */
#define FRAME_MAX (64u << 20)
/* How long one side waits for a frame of the other inside a step. */
#define STEP_TIMEOUT_S 10
/* How long the old side waits for READY: the new process builds its
 * snapshot (TLS, every route) meanwhile. */
#define BUILD_TIMEOUT_S 120

/* ---- frames ---- */

static int sock_path(const char *dir, struct sockaddr_un *sun, char *why, size_t cap)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    if ((size_t)snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/upgrade.sock", dir) >=
        sizeof(sun->sun_path)) {
        snprintf(why, cap, "%s/upgrade.sock: the path is too long for a unix socket", dir);
        return -1;
    }
    return 0;
}

static void set_timeout(int fd, int seconds)
{
    struct timeval tv = {seconds, 0};

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n)
{
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0)
            errno = ECONNRESET;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Sends <msg> (borrowed) with <nfds> descriptors of <fds> on its first
 * bytes. 0, or -1 with errno. */
static int frame_send(int fd, const json_t *msg, const int *fds, size_t nfds)
{
    char *js = json_dumps(msg, JSON_COMPACT);
    size_t len = js ? strlen(js) : 0;
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDS_PER_FRAME)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    int rc = -1;

    if (!js) {
        errno = ENOMEM;
        return -1;
    }
    if (nfds) {
        struct cmsghdr *cm;
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    while ((rc = (int)sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (rc == (int)sizeof(hdr))
        rc = write_all(fd, js, len);
    else if (rc >= 0) /* a 4-byte send is never split on a unix socket */
        rc = write_all(fd, (const char *)hdr + rc, sizeof(hdr) - (size_t)rc) ||
             write_all(fd, js, len);
    free(js);
    return rc < 0 ? -1 : 0;
}

/* Receives a frame: its JSON into <*msg> (new reference), the descriptors
 * on it appended to <*fds> (<*nfds>, realloc'd; NULL: closed at once).
 * 0, or -1 with <why>. */
static int frame_recv(int fd, json_t **msg, int **fds, size_t *nfds, char *why, size_t cap)
{
    unsigned char hdr[4];
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDS_PER_FRAME)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    json_error_t je;
    ssize_t k;
    size_t len;
    char *js;

    *msg = NULL;
    while ((k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    for (struct cmsghdr *cm = k > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm)) {
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *got = (int *)CMSG_DATA(cm), *more;
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        more = fds ? realloc(*fds, (*nfds + n) * sizeof(int)) : NULL;
        for (size_t i = 0; i < n; i++) {
            int d;
            memcpy(&d, (char *)got + i * sizeof(int), sizeof(int));
            if (more)
                more[(*nfds)++] = d;
            else
                close(d);
        }
        if (more)
            *fds = more;
    }
    if (k <= 0 ||
        (k < (ssize_t)sizeof(hdr) && read_all(fd, (char *)hdr + k, sizeof(hdr) - (size_t)k) < 0)) {
        snprintf(why, cap, "%s",
                 k == 0            ? "the other process closed the connection"
                 : errno == EAGAIN ? "timed out"
                                   : strerror(errno ? errno : EIO));
        return -1;
    }
    len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (len > FRAME_MAX || !(js = malloc(len + 1))) {
        snprintf(why, cap, "a frame of %zu bytes: too large", len);
        return -1;
    }
    if (read_all(fd, js, len) < 0) {
        snprintf(why, cap, "reading a frame: %s", errno == EAGAIN ? "timed out" : strerror(errno));
        free(js);
        return -1;
    }
    *msg = json_loadb(js, len, 0, &je);
    free(js);
    if (!json_is_object(*msg)) {
        snprintf(why, cap, "a frame that is no JSON object: %s", je.text);
        json_decref(*msg);
        *msg = NULL;
        return -1;
    }
    return 0;
}

/* ---- the old side ---- */

static struct {
    struct event_base *base;
    struct event *lev; /* the listening socket's */
    struct event *cev; /* the conversation's, waiting for READY */
    int lfd, cfd, lock_fd;
    struct gw_upgrade_hooks h;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    ino_t ino; /* of the socket file we made: never remove another's */
} S = {.lfd = -1, .cfd = -1, .lock_fd = -1};

static void say(int warn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int warn, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (S.h.log)
        S.h.log(S.h.arg, warn, line);
}

static void conv_end(void)
{
    if (S.cev)
        event_free(S.cev);
    S.cev = NULL;
    if (S.cfd >= 0)
        close(S.cfd);
    S.cfd = -1;
}

/* A refusal the new process reads and exits with. */
static void refuse(int fd, const char *why)
{
    json_t *m = json_pack("{s:s}", "error", why);

    if (m)
        frame_send(fd, m, NULL, 0);
    json_decref(m);
}

/* Sends <fds> in frames of FDS_PER_FRAME, each with its headers. */
static int send_fds(int fd, const struct gw_handed *fds, size_t n)
{
    for (size_t off = 0; off < n; off += FDS_PER_FRAME) {
        size_t k = n - off < FDS_PER_FRAME ? n - off : FDS_PER_FRAME;
        int raw[FDS_PER_FRAME];
        json_t *arr = json_array(), *m;
        int rc;

        for (size_t i = 0; i < k; i++) {
            const struct gw_handed *d = &fds[off + i];
            raw[i] = d->fd;
            json_array_append_new(arr, json_pack("{s:s,s:s,s:i}", "kind",
                                                 d->kind == GW_HANDED_ADMIN ? "admin" : "listener",
                                                 "addr", d->addr, "worker", (int)d->worker));
        }
        m = json_pack("{s:o}", "fds", arr);
        rc = m ? frame_send(fd, m, raw, k) : -1;
        json_decref(m);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* READY came: pause, send the state and the sockets, wait for the
 * verdict. The old process keeps serving unless it is ADOPTED. */
static void hand_over(void)
{
    struct gw_handed *fds = NULL;
    size_t n = 0;
    json_t *st = NULL, *m = NULL, *end = NULL;
    char why[256];
    int ok = 0;

    if (S.h.pause(S.h.arg, &fds, &n) < 0) {
        refuse(S.cfd, "the running process could not pause its listeners");
        conv_end();
        return;
    }
    st = S.h.state(S.h.arg);
    m = st ? json_pack("{s:O}", "state", st) : NULL;
    end = json_pack("{s:i}", "end", (int)n);
    set_timeout(S.cfd, STEP_TIMEOUT_S);
    if (!m || !end || frame_send(S.cfd, m, NULL, 0) < 0 || send_fds(S.cfd, fds, n) < 0 ||
        frame_send(S.cfd, end, NULL, 0) < 0) {
        snprintf(why, sizeof(why), "sending the state and sockets: %s", strerror(errno));
    } else {
        json_t *v = NULL;
        if (frame_recv(S.cfd, &v, NULL, NULL, why, sizeof(why)) == 0) {
            const char *fail = json_string_value(json_object_get(v, "fail"));
            ok = json_is_true(json_object_get(v, "adopted"));
            if (!ok)
                snprintf(why, sizeof(why), "the new process failed: %s",
                         fail ? fail : "(no reason given)");
        }
        json_decref(v);
    }
    for (size_t i = 0; i < n; i++)
        close(fds[i].fd); /* the duplicates: the workers keep their own */
    free(fds);
    json_decref(st);
    json_decref(m);
    json_decref(end);
    conv_end();
    if (!ok) {
        say(1, "upgrade: hand-over failed, this process keeps serving: %s", why);
        S.h.resume(S.h.arg);
        return;
    }
    say(0, "upgrade: the new process adopted %zu listening socket%s; draining", n,
        n == 1 ? "" : "s");
    S.h.adopted(S.h.arg);
}

static void ready_cb(evutil_socket_t fd, short what, void *arg)
{
    json_t *m = NULL;
    char why[256];

    (void)fd;
    (void)arg;
    if (what & EV_TIMEOUT) {
        say(1,
            "upgrade: the new process did not say READY within %d s; this process keeps "
            "serving",
            BUILD_TIMEOUT_S);
        conv_end();
        return;
    }
    set_timeout(S.cfd, STEP_TIMEOUT_S);
    if (frame_recv(S.cfd, &m, NULL, NULL, why, sizeof(why)) < 0 ||
        !json_is_true(json_object_get(m, "ready"))) {
        const char *fail = m ? json_string_value(json_object_get(m, "fail")) : NULL;
        say(1,
            "upgrade: the new process gave up before the hand-over (%s); this process keeps "
            "serving",
            fail ? fail
            : m  ? "an unexpected frame"
                 : why);
        json_decref(m);
        conv_end();
        return;
    }
    json_decref(m);
    event_free(S.cev);
    S.cev = NULL;
    hand_over();
}

/* Whether the peer on <fd> runs as our user, or as root. */
static int peer_allowed(int fd, pid_t *pid, char *why, size_t cap)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
        snprintf(why, cap, "SO_PEERCRED: %s", strerror(errno));
        return 0;
    }
    *pid = cr.pid;
    if (cr.uid == 0 || cr.uid == geteuid())
        return 1;
    snprintf(why, cap, "pid %d runs as uid %u, not ours (%u) nor root", (int)cr.pid,
             (unsigned)cr.uid, (unsigned)geteuid());
    return 0;
}

/* The hello: the version checked, the facts and the lock sent back. */
static int greet(int fd, pid_t pid)
{
    json_t *m = NULL, *facts = NULL, *ans = NULL;
    char why[256];
    int v, rc = -1;

    set_timeout(fd, STEP_TIMEOUT_S);
    if (frame_recv(fd, &m, NULL, NULL, why, sizeof(why)) < 0) {
        say(1, "upgrade: pid %d: no hello: %s", (int)pid, why);
        return -1;
    }
    v = (int)json_integer_value(json_object_get(m, "version"));
    json_decref(m);
    if (v != GW_UPGRADE_VERSION) {
        snprintf(why, sizeof(why),
                 "hand-over protocol version %d, and the running process speaks %d", v,
                 GW_UPGRADE_VERSION);
        say(1, "upgrade: pid %d refused: %s", (int)pid, why);
        refuse(fd, why);
        return -1;
    }
    facts = S.h.hello(S.h.arg);
    ans = facts ? json_pack("{s:i,s:i,s:O}", "version", GW_UPGRADE_VERSION, "pid", (int)getpid(),
                            "facts", facts)
                : NULL;
    if (ans && frame_send(fd, ans, &S.lock_fd, S.lock_fd >= 0 ? 1 : 0) == 0)
        rc = 0;
    else
        say(1, "upgrade: pid %d: answering the hello: %s", (int)pid, strerror(errno));
    json_decref(facts);
    json_decref(ans);
    return rc;
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
    struct timeval build = {BUILD_TIMEOUT_S, 0};
    char why[256];
    pid_t pid = 0;
    int fd;

    (void)what;
    (void)arg;
    if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
        return;
    if (!peer_allowed(fd, &pid, why, sizeof(why))) {
        say(1, "upgrade: refused: %s", why);
        close(fd);
        return;
    }
    if (S.cfd >= 0) {
        say(1, "upgrade: pid %d refused: another upgrade is under way", (int)pid);
        refuse(fd, "another upgrade is under way");
        close(fd);
        return;
    }
    say(0, "upgrade: pid %d connected", (int)pid);
    if (greet(fd, pid) < 0) {
        close(fd);
        return;
    }
    S.cfd = fd;
    if (!(S.cev = event_new(S.base, fd, EV_READ, ready_cb, NULL)) || event_add(S.cev, &build) < 0) {
        say(1, "upgrade: out of memory");
        conv_end();
    }
}

int gw_upgrade_serve(struct event_base *base, const char *dir, int lock_fd,
                     const struct gw_upgrade_hooks *hooks, char *why, size_t cap)
{
    struct sockaddr_un sun;
    struct stat sb;
    mode_t um;
    int fd, rc;

    if (sock_path(dir, &sun, why, cap) < 0)
        return -1;
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(why, cap, "%s: %s", sun.sun_path, strerror(errno));
        return -1;
    }
    /* the directory is ours (its flock says so): a file left there is a
     * dead process's */
    unlink(sun.sun_path);
    um = umask(0177);
    rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    umask(um);
    if (rc < 0 || listen(fd, 4) < 0 || stat(sun.sun_path, &sb) < 0) {
        snprintf(why, cap, "%s: %s", sun.sun_path, strerror(errno));
        close(fd);
        return -1;
    }
    S.base = base;
    S.h = *hooks;
    S.lfd = fd;
    S.lock_fd = lock_fd;
    S.ino = sb.st_ino;
    snprintf(S.path, sizeof(S.path), "%s", sun.sun_path);
    if (!(S.lev = event_new(base, fd, EV_READ | EV_PERSIST, accept_cb, NULL)) ||
        event_add(S.lev, NULL) < 0) {
        snprintf(why, cap, "out of memory");
        gw_upgrade_serve_stop(1);
        return -1;
    }
    return 0;
}

void gw_upgrade_serve_stop(int remove)
{
    struct stat sb;

    conv_end();
    if (S.lev)
        event_free(S.lev);
    S.lev = NULL;
    if (S.lfd >= 0) {
        /* never another's: a process that took over later made its own */
        if (remove && stat(S.path, &sb) == 0 && sb.st_ino == S.ino)
            unlink(S.path);
        close(S.lfd);
    }
    S.lfd = -1;
}

/* ---- the new side ---- */

static int client_fd = -1;

int gw_upgrade_connect(const char *dir, json_t **hello, int *lock_fd, char *why, size_t cap)
{
    struct sockaddr_un sun;
    json_t *req = json_pack("{s:i,s:i}", "version", GW_UPGRADE_VERSION, "pid", (int)getpid());
    json_t *ans = NULL;
    int *fds = NULL;
    size_t nfds = 0;
    const char *err;
    char r[256];

    *hello = NULL;
    *lock_fd = -1;
    if (sock_path(dir, &sun, why, cap) < 0 || !req)
        goto fail;
    if ((client_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(client_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        snprintf(why, cap, "cannot reach the running process at %s: %s", sun.sun_path,
                 strerror(errno));
        goto fail;
    }
    set_timeout(client_fd, STEP_TIMEOUT_S);
    if (frame_send(client_fd, req, NULL, 0) < 0) {
        snprintf(why, cap, "sending the hello: %s", strerror(errno));
        goto fail;
    }
    if (frame_recv(client_fd, &ans, &fds, &nfds, r, sizeof(r)) < 0) {
        snprintf(why, cap, "the running process did not answer the hello: %s", r);
        goto fail;
    }
    if ((err = json_string_value(json_object_get(ans, "error")))) {
        snprintf(why, cap, "the running process refused: %s", err);
        goto fail;
    }
    if (json_integer_value(json_object_get(ans, "version")) != GW_UPGRADE_VERSION ||
        !json_is_object(json_object_get(ans, "facts"))) {
        snprintf(why, cap, "the running process speaks hand-over version %lld, this one %d",
                 (long long)json_integer_value(json_object_get(ans, "version")),
                 GW_UPGRADE_VERSION);
        goto fail;
    }
    *lock_fd = nfds ? fds[0] : -1;
    for (size_t i = 1; i < nfds; i++)
        close(fds[i]);
    free(fds);
    *hello = ans;
    json_decref(req);
    return 0;
fail:
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    free(fds);
    json_decref(ans);
    json_decref(req);
    if (client_fd >= 0)
        close(client_fd);
    client_fd = -1;
    return -1;
}

/* The descriptors of an "fds" frame <m> with their headers, appended to
 * <*out> (<*n>). -1 when they do not match. */
static int take_fds(const json_t *m, int *fds, size_t nfds, struct gw_handed **out, size_t *n)
{
    const json_t *arr = json_object_get(m, "fds");
    struct gw_handed *more;

    if (json_array_size(arr) != nfds || !(more = realloc(*out, (*n + nfds) * sizeof(**out))))
        return -1;
    *out = more;
    for (size_t i = 0; i < nfds; i++) {
        const json_t *h = json_array_get(arr, i);
        struct gw_handed *d = &more[(*n)++];
        const char *a = json_string_value(json_object_get(h, "addr"));

        d->fd = fds[i];
        fds[i] = -1;
        const char *kind = json_string_value(json_object_get(h, "kind"));

        d->kind = kind && !strcmp(kind, "admin") ? GW_HANDED_ADMIN : GW_HANDED_LISTENER;
        d->worker = (unsigned)json_integer_value(json_object_get(h, "worker"));
        snprintf(d->addr, sizeof(d->addr), "%s", a ? a : "");
    }
    return 0;
}

int gw_upgrade_ready(json_t **state, struct gw_handed **out, size_t *n, char *why, size_t cap)
{
    json_t *ready = json_pack("{s:b}", "ready", 1), *m = NULL;
    int rc = -1;

    *state = NULL;
    *out = NULL;
    *n = 0;
    if (!ready || frame_send(client_fd, ready, NULL, 0) < 0) {
        snprintf(why, cap, "sending READY: %s", strerror(errno));
        goto done;
    }
    for (;;) {
        int *fds = NULL;
        size_t nfds = 0;
        const char *err;

        if (frame_recv(client_fd, &m, &fds, &nfds, why, cap) < 0)
            goto done;
        if ((err = json_string_value(json_object_get(m, "error")))) {
            snprintf(why, cap, "the running process refused: %s", err);
        } else if (json_object_get(m, "state")) {
            *state = json_incref(json_object_get(m, "state"));
            rc = nfds ? -2 : 0;
        } else if (json_object_get(m, "fds")) {
            rc = take_fds(m, fds, nfds, out, n);
        } else if (json_object_get(m, "end")) {
            rc = (size_t)json_integer_value(json_object_get(m, "end")) == *n && *state ? 1 : -2;
        } else {
            rc = -2;
        }
        for (size_t i = 0; i < nfds; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(fds);
        json_decref(m);
        m = NULL;
        if (rc == 1) {
            rc = 0;
            break;
        }
        if (rc < 0) {
            if (rc == -2)
                snprintf(why, cap, "the running process sent frames out of order");
            rc = -1;
            goto done;
        }
    }
done:
    json_decref(ready);
    if (rc < 0) {
        for (size_t i = 0; i < *n; i++)
            close((*out)[i].fd);
        free(*out);
        *out = NULL;
        *n = 0;
        json_decref(*state);
        *state = NULL;
    }
    return rc;
}

int gw_upgrade_finish(const char *fail)
{
    json_t *m = fail ? json_pack("{s:s}", "fail", fail) : json_pack("{s:b}", "adopted", 1);
    int rc = m && client_fd >= 0 ? frame_send(client_fd, m, NULL, 0) : -1;

    json_decref(m);
    if (client_fd >= 0)
        close(client_fd);
    client_fd = -1;
    return rc;
}

/* ---- sd_notify ---- */

void gw_sd_notify(const char *msg)
{
    const char *e = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n;
    int fd;

    if (!e || (e[0] != '/' && e[0] != '@') || (n = strlen(e)) >= sizeof(sun.sun_path))
        return;
    memcpy(sun.sun_path, e, n);
    if (e[0] == '@')
        sun.sun_path[0] = '\0'; /* abstract */
    if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        return;
    sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sun,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
    close(fd);
}
