/*
 * io.h - the transport seam: every byte a client or upstream connection
 * reads or writes goes through its struct gw_io, and every system call on
 * the socket through the connection's transport operations (struct
 * gw_io_ops), the way HAProxy's xprt_ops sit under raw_sock.c and
 * ssl_sock.c. HTTP code sees two evbuffers and three callbacks; it never
 * knows whether the bytes are encrypted.
 *
 * The core (io.c) owns the buffers, the two events and the connection's
 * phases (connecting, handshake, open); a transport owns only what is
 * below the bytes: gw_io_plain (read(2) and send(2) on the socket) here, a
 * TLS transport (SSL_read/SSL_write on the same non-blocking socket)
 * beside it.
 *
 * The contract between the core and a transport:
 *
 * - The fd. It is non-blocking. The core owns it from gw_io_init() on and
 *   polls it; a transport reads and writes it but never polls, blocks on,
 *   or closes it except in its close operation, which the core calls
 *   exactly once, from gw_io_close(), and which must close the fd.
 *   <io->xprt> is the transport's own state (the SSL *), NULL for plain;
 *   the transport's close frees it.
 *
 * - read(io, buf, len) reads at most <len> bytes into <buf> and returns how
 *   many (> 0); 0 when the peer ended the stream in order (TCP FIN, or a
 *   TLS close_notify: whether a FIN without close_notify is an EOF or an
 *   error is the TLS transport's call); GW_IO_AGAIN when nothing can be
 *   read now; GW_IO_ERROR on an error, with errno set (a TLS transport sets
 *   EPROTO or EIO when there is no system error). The core calls read only
 *   in the open phase, and may call it without the fd being readable: when
 *   pending(io) says bytes wait inside the transport, the core reads again
 *   before it polls.
 *
 * - writev(io, iov, n) writes from the front of iov[0..n) and returns the
 *   number of bytes it took (> 0, possibly fewer than offered: the rest
 *   stays queued); GW_IO_AGAIN when it took nothing; GW_IO_ERROR with
 *   errno. After GW_IO_AGAIN the core offers the same bytes again first,
 *   from the same evbuffer, possibly at another address and with more
 *   bytes after them (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER and
 *   SSL_MODE_ENABLE_PARTIAL_WRITE fit this).
 *
 * - "Again" always comes with what the transport waits for: before it
 *   returns GW_IO_AGAIN, read, writev and handshake set <io->wants> to
 *   GW_IO_WANT_READ or GW_IO_WANT_WRITE (SSL_ERROR_WANT_READ/WANT_WRITE).
 *   The core then polls the fd for that, whichever operation asked: a read
 *   that wants the fd writable is retried when it is, before any write; a
 *   write that wants it readable is retried when it is readable, before
 *   any read. The plain transport only ever wants what it was doing.
 *
 * - handshake(io) (NULL: none) moves the transport's handshake on: 0 when
 *   it is complete, GW_IO_AGAIN (with <io->wants>), GW_IO_ERROR. The core
 *   drives it: for an accepted connection from gw_io_init() on, for an
 *   upstream one once its connect completed. Until it returns 0 the core
 *   neither reads nor writes application bytes (output queued meanwhile
 *   waits), and it calls handshake again each time the fd is ready as
 *   <io->wants> said. A failed handshake is reported to the event callback
 *   as GW_IO_ERROR; a completed one, on an upstream connection, as
 *   GW_IO_CONNECTED (an accepted connection simply starts reading).
 *
 * - shutdown(io) ends the write side in order (shutdown(SHUT_WR); for TLS
 *   a close_notify first): 0, or GW_IO_ERROR. Nothing is written after it;
 *   reading goes on (a lingering close reads until the peer's EOF).
 *
 * - close(io) releases <io->xprt> and closes <io->fd>; it never fails and
 *   is never called twice.
 *
 * What the connection above sees:
 * - on_read(io, arg): bytes were appended to gw_io_in(io) (also after a
 *   gw_io_kick_read(), with what is already buffered).
 * - on_write(io, arg): the output fell to the low watermark or below after
 *   a write (or gw_io_kick_write()).
 * - on_event(io, what, arg): GW_IO_EOF or GW_IO_ERROR (with GW_IO_READING
 *   or GW_IO_WRITING: which side saw it; errno is set for an error), or
 *   GW_IO_CONNECTED. After an EOF or error on the read side the core never
 *   reads again. Timeouts are not the core's: the connection keeps its own.
 * Each callback may free the connection, and with it <io> (gw_io_close()):
 * the core touches nothing of <io> after it ran one.
 */
#ifndef SY_GATEWAY_IO_H
#define SY_GATEWAY_IO_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/event.h>

enum { GW_IO_ERROR = -1, GW_IO_AGAIN = -2 };

/* <io->wants> */
enum { GW_IO_WANT_READ = 1, GW_IO_WANT_WRITE = 2 };

/* <what> of the event callback */
enum {
    GW_IO_READING = 0x01,
    GW_IO_WRITING = 0x02,
    GW_IO_EOF = 0x10,
    GW_IO_ERR = 0x20,
    GW_IO_TIMEOUT = 0x40, /* not the core's: connections use it for their own timeouts */
    GW_IO_CONNECTED = 0x80,
};

struct gw_io;

struct gw_io_ops {
    const char *name;
    ssize_t (*read)(struct gw_io *io, void *buf, size_t len);
    ssize_t (*writev)(struct gw_io *io, const struct iovec *iov, int iovcnt);
    int (*handshake)(struct gw_io *io);  /* NULL: none */
    size_t (*pending)(struct gw_io *io); /* NULL: never any */
    int (*shutdown)(struct gw_io *io);
    void (*close)(struct gw_io *io);
};

/* The plain socket. */
extern const struct gw_io_ops gw_io_plain;
/* The same, for a client of a TLS listener whose first byte was no TLS
 * record but a letter (plain HTTP): the TLS transport hands it over so that
 * its request is read and answered 400 (nginx's "plain HTTP request was
 * sent to HTTPS port"), then closed, instead of a silent close. */
extern const struct gw_io_ops gw_io_plain_on_tls;

typedef void (*gw_io_cb)(struct gw_io *io, void *arg);
typedef void (*gw_io_event_cb)(struct gw_io *io, short what, void *arg);

enum gw_io_phase {
    GW_IO_CONNECTING, /* gw_io_connect() started; nothing read or written */
    GW_IO_HANDSHAKE,  /* the transport's handshake runs */
    GW_IO_OPEN,       /* application bytes flow (until an EOF or an error) */
};

/* Embedded in its connection; every field is the core's but <xprt> and
 * <wants>, which are the transport's. */
struct gw_io {
    const struct gw_io_ops *ops;
    void *xprt;
    evutil_socket_t fd;
    unsigned char wants;
    unsigned char phase;       /* enum gw_io_phase */
    unsigned char rd_on;       /* the connection wants to read */
    unsigned char rd_armed;    /* rd_ev is added */
    unsigned char wr_on;       /* the connection lets output be written */
    unsigned char wr_armed;    /* wr_ev is added */
    unsigned char rd_eof;      /* reading ended (EOF or error): never again */
    unsigned char rd_needs_wr; /* a read returned AGAIN wanting writable */
    unsigned char wr_needs_rd; /* a write returned AGAIN wanting readable */
    unsigned char outbound;    /* connected by gw_io_connect(): reports GW_IO_CONNECTED */
    unsigned char established; /* outbound: the TCP connect completed (before any handshake) */
    int conn_err;              /* a connect refused at once, reported from the loop */
    size_t lowat;              /* on_write when the output is at most this */
    size_t hiwat;              /* reading stops with this much input buffered */
    struct evbuffer *in, *out;
    struct event *rd_ev, *wr_ev;
    gw_io_cb on_read, on_write;
    gw_io_event_cb on_event;
    void *arg;
};

/* Sets <io> up on the connected or unconnected socket <fd> (owned from now
 * on, also when this fails: gw_io_close() closes it) with <ops> and its
 * state <xprt>. A connected socket is open at once, or in its handshake
 * when <ops> has one; gw_io_connect() connects one that is not. Reading
 * and writing start off and on respectively. 0 or -1 (out of memory); on
 * -1 the caller still calls gw_io_close(). */
int gw_io_init(struct gw_io *io, struct event_base *base, evutil_socket_t fd, int connected,
               const struct gw_io_ops *ops, void *xprt);
/* Frees the buffers and events and closes the transport (and so the fd).
 * A no-op on an <io> that was zeroed and never initialised. */
void gw_io_close(struct gw_io *io);

void gw_io_setcb(struct gw_io *io, gw_io_cb on_read, gw_io_cb on_write, gw_io_event_cb on_event,
                 void *arg);

/* Starts a non-blocking connect of <io>'s socket to <sa>; GW_IO_CONNECTED
 * (or an error) comes to the event callback. 0, or -1 with errno. */
int gw_io_connect(struct gw_io *io, const struct sockaddr *sa, socklen_t salen);

/* Reading on or off; reading happens only in the open phase, and never
 * after an EOF or error. */
void gw_io_read(struct gw_io *io, int on);
/* Whether reading is on and may still happen. */
static inline int gw_io_reading(const struct gw_io *io)
{
    return io->rd_on && !io->rd_eof;
}
/* Runs the read callback on what is already buffered, from the loop (also
 * after the peer's EOF). */
void gw_io_kick_read(struct gw_io *io);

/* Writing of queued output on or off (on after gw_io_init). */
void gw_io_write(struct gw_io *io, int on);
/* Runs the write callback from the loop, whatever is queued. */
void gw_io_kick_write(struct gw_io *io);

/* Writes <p>[0..n) now when nothing is queued before it and the
 * connection is open, and queues what the transport did not take: a
 * response that fits costs no write event at all (as nginx writes). */
void gw_io_send(struct gw_io *io, const void *p, size_t n);

static inline int gw_io_open(const struct gw_io *io)
{
    return io->phase == GW_IO_OPEN;
}

#endif
