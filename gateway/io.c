/*
 * io.c - the transport seam's core (io.h has the contract): a connection's
 * two buffers and two events, its connect and handshake phases, and the
 * plain-socket transport.
 *
 * It replaces libevent's bufferevent, which reads and writes the socket
 * itself (so a TLS layer would have to sit in a second bufferevent) and
 * asks the kernel for FIONREAD before every readv. Here a read is one
 * transport read straight into the input buffer, and output that fits is
 * written at once (gw_io_send): a proxied request costs two reads and two
 * sends, and no epoll_ctl.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define IO_RD_MAX 16384 /* bytes per read, as a bufferevent reads */
#define IO_WR_IOV 8     /* evbuffer chains per write */

/* ---- the plain socket ---- */

static ssize_t plain_read(struct gw_io *io, void *buf, size_t len)
{
    ssize_t n = read(io->fd, buf, len);

    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EINTR) { /* EWOULDBLOCK is EAGAIN */
        io->wants = GW_IO_WANT_READ;
        return GW_IO_AGAIN;
    }
    return GW_IO_ERROR;
}

static ssize_t plain_writev(struct gw_io *io, const struct iovec *iov, int iovcnt)
{
    ssize_t n;

    if (iovcnt == 1) {
        n = send(io->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
        struct msghdr m;
        memset(&m, 0, sizeof(m));
        m.msg_iov = (struct iovec *)iov;
        m.msg_iovlen = (size_t)iovcnt;
        n = sendmsg(io->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n > 0)
        return n;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        io->wants = GW_IO_WANT_WRITE;
        return GW_IO_AGAIN;
    }
    if (n == 0) { /* nothing offered was taken: try again when writable */
        io->wants = GW_IO_WANT_WRITE;
        return GW_IO_AGAIN;
    }
    return GW_IO_ERROR;
}

static int plain_shutdown(struct gw_io *io)
{
    return shutdown(io->fd, SHUT_WR) == 0 ? 0 : GW_IO_ERROR;
}

static void plain_close(struct gw_io *io)
{
    if (io->fd >= 0)
        evutil_closesocket(io->fd);
    io->fd = -1;
}

const struct gw_io_ops gw_io_plain = {
    .name = "plain",
    .read = plain_read,
    .writev = plain_writev,
    .handshake = NULL,
    .pending = NULL,
    .shutdown = plain_shutdown,
    .close = plain_close,
};

const struct gw_io_ops gw_io_plain_on_tls = {
    .name = "plain on a TLS listener",
    .read = plain_read,
    .writev = plain_writev,
    .handshake = NULL,
    .pending = NULL,
    .shutdown = plain_shutdown,
    .close = plain_close,
};

/* ---- the core ---- */

/* Adds or removes the read event as the phase and the flags say. */
static void rd_arm(struct gw_io *io)
{
    unsigned char a;

    if (io->phase == GW_IO_OPEN)
        a = (io->rd_on && !io->rd_eof) || io->wr_needs_rd;
    else if (io->phase == GW_IO_HANDSHAKE)
        a = io->wants == GW_IO_WANT_READ;
    else
        a = 0;
    if (a == io->rd_armed)
        return;
    if (a)
        event_add(io->rd_ev, NULL);
    else
        event_del(io->rd_ev);
    io->rd_armed = a;
}

static void wr_arm(struct gw_io *io)
{
    unsigned char a;

    if (io->phase == GW_IO_OPEN)
        a = (io->wr_on && !io->wr_needs_rd && evbuffer_get_length(io->out) > 0) || io->rd_needs_wr;
    else if (io->phase == GW_IO_HANDSHAKE)
        a = io->wants == GW_IO_WANT_WRITE;
    else
        a = 1; /* connecting: writable means connected (or failed) */
    if (a == io->wr_armed)
        return;
    if (a)
        event_add(io->wr_ev, NULL);
    else
        event_del(io->wr_ev);
    io->wr_armed = a;
}

/* The output grew or shrank: poll for writing while there is some. */
static void out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct gw_io *io = arg;

    (void)buf;
    if (info->n_added && !io->wr_armed)
        wr_arm(io);
}

/* Ends the side that failed (both for a connect or a handshake) and tells
 * the connection. */
static void fail(struct gw_io *io, short what)
{
    int e = errno;

    if (!(what & GW_IO_WRITING))
        io->rd_eof = 1;
    if (!(what & GW_IO_READING))
        io->wr_on = 0;
    rd_arm(io);
    wr_arm(io);
    errno = e;
    io->on_event(io, what, io->arg);
}

/* Moves the handshake on; runs at most one callback. */
static void handshake(struct gw_io *io)
{
    int rc = io->ops->handshake(io);

    if (rc == GW_IO_AGAIN) {
        rd_arm(io);
        wr_arm(io);
        return;
    }
    if (rc < 0) {
        io->phase = GW_IO_OPEN; /* so that fail() disarms both */
        fail(io, GW_IO_ERR);
        return;
    }
    io->phase = GW_IO_OPEN;
    rd_arm(io);
    wr_arm(io);
    if (io->outbound) {
        io->on_event(io, GW_IO_CONNECTED, io->arg);
        return;
    }
    /* the client's first bytes may have come with its last handshake record */
    if (io->rd_on)
        event_active(io->rd_ev, EV_READ, 1);
}

/* The connect completed, or failed. */
static void connected(struct gw_io *io)
{
    int err = io->conn_err;
    socklen_t len = sizeof(err);

    if (!err && getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        io->phase = GW_IO_OPEN;
        errno = err;
        fail(io, GW_IO_ERR);
        return;
    }
    io->established = 1;
    if (io->ops->handshake) {
        io->phase = GW_IO_HANDSHAKE;
        io->wants = GW_IO_WANT_WRITE;
        handshake(io);
        return;
    }
    io->phase = GW_IO_OPEN;
    rd_arm(io);
    wr_arm(io);
    io->on_event(io, GW_IO_CONNECTED, io->arg);
}

/* One transport read into the input buffer (at most up to <hiwat>
 * buffered), then the read callback; EOF or an error go to the event
 * callback. */
static void rd_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_io *io = arg;
    struct evbuffer_iovec v;
    size_t have, room;
    ssize_t n;

    (void)fd;
    if (!(what & EV_READ)) { /* gw_io_kick_read */
        if (evbuffer_get_length(io->in))
            io->on_read(io, io->arg);
        return;
    }
    if (io->phase == GW_IO_HANDSHAKE) {
        handshake(io);
        return;
    }
    if (io->phase != GW_IO_OPEN)
        return;
    if (io->wr_needs_rd) { /* a write waited for this: it goes on from the loop */
        io->wr_needs_rd = 0;
        event_active(io->wr_ev, EV_WRITE, 1);
    }
    if (!gw_io_reading(io)) {
        rd_arm(io);
        return;
    }
    have = evbuffer_get_length(io->in);
    if (have >= io->hiwat) { /* the consumer is behind: it re-enables */
        event_del(io->rd_ev);
        io->rd_armed = 0;
        return;
    }
    room = io->hiwat - have < IO_RD_MAX ? io->hiwat - have : IO_RD_MAX;
    if (evbuffer_reserve_space(io->in, (ev_ssize_t)room, &v, 1) < 1) {
        errno = ENOMEM;
        n = GW_IO_ERROR;
    } else {
        n = io->ops->read(io, v.iov_base, v.iov_len < room ? v.iov_len : room);
        if (n > 0) {
            v.iov_len = (size_t)n;
            evbuffer_commit_space(io->in, &v, 1);
        }
    }
    if (n == GW_IO_AGAIN) {
        if (io->wants == GW_IO_WANT_WRITE) {
            io->rd_needs_wr = 1;
            wr_arm(io);
        }
        return;
    }
    if (n <= 0) {
        fail(io, GW_IO_READING | (n == 0 ? GW_IO_EOF : GW_IO_ERR));
        return;
    }
    if (io->ops->pending && io->ops->pending(io))
        event_active(io->rd_ev, EV_READ, 1); /* bytes wait in the transport */
    io->on_read(io, io->arg);
}

/* Writes what the output holds, as far as the transport takes it, then the
 * write callback when the output is at most <lowat>. */
static void wr_cb(evutil_socket_t fd, short what, void *arg)
{
    struct gw_io *io = arg;
    struct evbuffer_iovec v[IO_WR_IOV];
    struct iovec iov[IO_WR_IOV];
    int nv;
    ssize_t n;

    (void)fd;
    if (!(what & EV_WRITE)) { /* gw_io_kick_write */
        io->on_write(io, io->arg);
        return;
    }
    if (io->phase == GW_IO_CONNECTING) {
        connected(io);
        return;
    }
    if (io->phase == GW_IO_HANDSHAKE) {
        handshake(io);
        return;
    }
    if (io->rd_needs_wr) { /* a read waited for this: it goes on from the loop */
        io->rd_needs_wr = 0;
        event_active(io->rd_ev, EV_READ, 1);
    }
    nv = evbuffer_peek(io->out, -1, NULL, v, IO_WR_IOV);
    if (nv > IO_WR_IOV)
        nv = IO_WR_IOV;
    if (!io->wr_on || io->wr_needs_rd || nv <= 0 || evbuffer_get_length(io->out) == 0) {
        wr_arm(io);
        return;
    }
    for (int i = 0; i < nv; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    n = io->ops->writev(io, iov, nv);
    if (n == GW_IO_AGAIN) {
        if (io->wants == GW_IO_WANT_READ) {
            io->wr_needs_rd = 1;
            wr_arm(io);
            rd_arm(io);
        }
        return;
    }
    if (n < 0) {
        fail(io, GW_IO_WRITING | GW_IO_ERR);
        return;
    }
    evbuffer_drain(io->out, (size_t)n);
    wr_arm(io);
    if (evbuffer_get_length(io->out) <= io->lowat)
        io->on_write(io, io->arg);
}

int gw_io_init(struct gw_io *io, struct event_base *base, evutil_socket_t fd, int connected_,
               const struct gw_io_ops *ops, void *xprt)
{
    memset(io, 0, sizeof(*io));
    io->ops = ops;
    io->xprt = xprt;
    io->fd = fd;
    io->wr_on = 1;
    io->hiwat = (size_t)-1;
    io->phase = !connected_ ? GW_IO_CONNECTING : ops->handshake ? GW_IO_HANDSHAKE : GW_IO_OPEN;
    io->wants = GW_IO_WANT_READ; /* an accepted handshake starts with the ClientHello */
    io->in = evbuffer_new();
    io->out = evbuffer_new();
    io->rd_ev = event_new(base, fd, EV_READ | EV_PERSIST, rd_cb, io);
    io->wr_ev = event_new(base, fd, EV_WRITE | EV_PERSIST, wr_cb, io);
    if (!io->in || !io->out || !io->rd_ev || !io->wr_ev || !evbuffer_add_cb(io->out, out_cb, io))
        return -1;
    if (io->phase == GW_IO_HANDSHAKE)
        rd_arm(io);
    return 0;
}

void gw_io_close(struct gw_io *io)
{
    if (!io->ops)
        return;
    if (io->rd_ev)
        event_free(io->rd_ev);
    if (io->wr_ev)
        event_free(io->wr_ev);
    if (io->in)
        evbuffer_free(io->in);
    if (io->out)
        evbuffer_free(io->out);
    io->ops->close(io);
    io->ops = NULL;
}

void gw_io_setcb(struct gw_io *io, gw_io_cb on_read, gw_io_cb on_write, gw_io_event_cb on_event,
                 void *arg)
{
    io->on_read = on_read;
    io->on_write = on_write;
    io->on_event = on_event;
    io->arg = arg;
}

int gw_io_connect(struct gw_io *io, const struct sockaddr *sa, socklen_t salen)
{
    io->outbound = 1;
    io->phase = GW_IO_CONNECTING;
    if (connect(io->fd, sa, salen) < 0 && errno != EINPROGRESS) {
        if (errno != ECONNREFUSED)
            return -1;
        /* refused at once (loopback): reported from the loop, as a late
         * refusal is */
        io->conn_err = ECONNREFUSED;
        event_active(io->wr_ev, EV_WRITE, 1);
        return 0;
    }
    wr_arm(io);
    return 0;
}

void gw_io_read(struct gw_io *io, int on)
{
    io->rd_on = (unsigned char)(on != 0);
    rd_arm(io);
}

void gw_io_kick_read(struct gw_io *io)
{
    event_active(io->rd_ev, EV_TIMEOUT, 1);
}

void gw_io_write(struct gw_io *io, int on)
{
    io->wr_on = (unsigned char)(on != 0);
    wr_arm(io);
}

void gw_io_kick_write(struct gw_io *io)
{
    event_active(io->wr_ev, EV_TIMEOUT, 1);
}

void gw_io_send(struct gw_io *io, const void *p, size_t n)
{
    size_t off = 0;

    if (!n)
        return;
    if (io->phase == GW_IO_OPEN && io->wr_on && !io->wr_needs_rd &&
        evbuffer_get_length(io->out) == 0) {
        struct iovec v = {(void *)p, n};
        ssize_t k = io->ops->writev(io, &v, 1);
        if (k > 0) {
            off = (size_t)k;
        } else if (k == GW_IO_AGAIN && io->wants == GW_IO_WANT_READ) {
            io->wr_needs_rd = 1;
            rd_arm(io);
        }
        /* errors: queue it all; the write event reports them */
    }
    if (off < n)
        evbuffer_add(io->out, (const char *)p + off, n - off);
}
