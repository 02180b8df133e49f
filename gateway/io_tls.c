/*
 * io_tls.c - the TLS transport (io_tls.h): SSL_read_ex/SSL_write_ex on the
 * connection's own non-blocking socket, as HAProxy's ssl_sock.c sits beside
 * raw_sock.c. No BIO pair, no bufferevent_openssl: OpenSSL reads and writes
 * the fd (SSL_set_fd), and its WANT_READ/WANT_WRITE become the seam's
 * <io->wants>, so the core polls for whatever the TLS state machine waits
 * for, in the handshake and after it.
 *
 * - A FIN without close_notify is an EOF (SSL_OP_IGNORE_UNEXPECTED_EOF, set
 *   on every context): HTTP framing, not TLS, decides whether a message was
 *   cut short.
 * - Writes gather small iovecs into one record (a response head and a short
 *   body are one record, not two); the core's retry contract (the same bytes
 *   first, perhaps more after them, perhaps elsewhere) is what
 *   SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER and SSL_MODE_ENABLE_PARTIAL_WRITE
 *   need.
 * - A connection is freed with its shutdown flags set, so that OpenSSL does
 *   not treat its session as bad: that would take the SSL_CTX's lock, which
 *   every worker shares, on every closed connection.
 * - Handshakes are counted per worker: by version and resumption, failures
 *   by reason (admin/tls_report.c names them).
 */
#define _POSIX_C_SOURCE 200809L

#include "gateway/io_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#define TLS_GATHER 16384 /* one full record */

struct gw_tls {
    SSL *ssl;
    struct gw_tls_counters *ctr; /* server side only */
    int failed;                  /* the handshake failed */
    unsigned long err;           /* OpenSSL's error then */
    long verify;                 /* SSL_get_verify_result() then */
    char *subject;               /* the verified client certificate, NULL: none */
    char sha256[65];
    /* for the access log, set when a client's handshake completes: the
     * version's name (static) and the SNI (OpenSSL's, lives with <ssl>:
     * no renegotiation replaces it), NULL: none */
    const char *version_name, *sni;
    size_t sni_len;
    int peeked; /* server side: its first byte was looked at */
};

static void count(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Maps a failed SSL_* call to the seam's answer. */
static ssize_t tls_fail(struct gw_io *io, struct gw_tls *t, int rc, int reading)
{
    int e = SSL_get_error(t->ssl, rc);

    switch (e) {
    case SSL_ERROR_WANT_READ:
        io->wants = GW_IO_WANT_READ;
        return GW_IO_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        io->wants = GW_IO_WANT_WRITE;
        return GW_IO_AGAIN;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or a bare FIN (IGNORE_UNEXPECTED_EOF) */
        if (reading)
            return 0;
        errno = EPIPE;
        return GW_IO_ERROR;
    case SSL_ERROR_SYSCALL:
        if (!errno)
            errno = EIO;
        break;
    default:
        errno = EPROTO;
        break;
    }
    t->err = ERR_peek_error();
    ERR_clear_error();
    return GW_IO_ERROR;
}

static ssize_t tls_read(struct gw_io *io, void *buf, size_t len)
{
    struct gw_tls *t = io->xprt;
    size_t n = 0;

    if (SSL_read_ex(t->ssl, buf, len, &n))
        return (ssize_t)n;
    return tls_fail(io, t, 0, 1);
}

static ssize_t tls_writev(struct gw_io *io, const struct iovec *iov, int iovcnt)
{
    struct gw_tls *t = io->xprt;
    unsigned char gather[TLS_GATHER];
    const void *p = iov[0].iov_base;
    size_t len = iov[0].iov_len, n = 0;

    if (iovcnt > 1 && len < sizeof(gather)) {
        len = 0;
        for (int i = 0; i < iovcnt && len < sizeof(gather); i++) {
            size_t k =
                iov[i].iov_len < sizeof(gather) - len ? iov[i].iov_len : sizeof(gather) - len;
            memcpy(gather + len, iov[i].iov_base, k);
            len += k;
        }
        p = gather;
    }
    if (SSL_write_ex(t->ssl, p, len, &n))
        return (ssize_t)n;
    return tls_fail(io, t, 0, 0);
}

/* The verified client certificate, kept for the request headers. */
static void keep_client_cert(struct gw_tls *t)
{
    X509 *x = SSL_get0_peer_certificate(t->ssl);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    BIO *b;

    if (!x || SSL_get_verify_result(t->ssl) != X509_V_OK || !X509_digest(x, EVP_sha256(), md, &n))
        return;
    for (unsigned i = 0; i < n && i < 32; i++)
        snprintf(t->sha256 + 2 * i, 3, "%02x", md[i]);
    if ((b = BIO_new(BIO_s_mem()))) {
        char *data;
        long len;
        X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253);
        len = BIO_get_mem_data(b, &data);
        if ((t->subject = malloc((size_t)len + 1))) {
            memcpy(t->subject, data, (size_t)len);
            t->subject[len] = '\0';
        }
        BIO_free(b);
    }
    ERR_clear_error();
}

static void tls_free(struct gw_tls *t);

/* A client of a TLS listener speaks TLS when its first byte starts a
 * record (0x16) or an SSLv2 hello (0x80 set); a letter starts an HTTP
 * method: plain HTTP, as nginx's ngx_http_ssl_handshake() tells them
 * apart. One MSG_PEEK at the connection's first readable moment, then
 * never again. 1 plain HTTP, 0 let the handshake tell, GW_IO_AGAIN. */
static int plain_http(struct gw_io *io, struct gw_tls *t)
{
    unsigned char b;
    ssize_t n;

    if (t->peeked || !t->ctr)
        return 0;
    n = recv(io->fd, &b, 1, MSG_PEEK);
    if (n < 0 && errno == EAGAIN) {
        io->wants = GW_IO_WANT_READ; /* the core's header timeout bounds the wait */
        return GW_IO_AGAIN;
    }
    t->peeked = 1;
    return n == 1 && (b | 0x20) >= 'a' && (b | 0x20) <= 'z';
}

static int tls_handshake(struct gw_io *io)
{
    struct gw_tls *t = io->xprt;
    int rc = plain_http(io, t);
    ssize_t r;

    if (rc == GW_IO_AGAIN)
        return GW_IO_AGAIN;
    if (rc == 1) { /* read and answered as HTTP from now on: a 400 saying why */
        count(&t->ctr->fail[ADM_TLS_FAIL_NOT_TLS]);
        tls_free(t);
        io->xprt = NULL;
        io->ops = &gw_io_plain_on_tls;
        return 0;
    }
    rc = SSL_do_handshake(t->ssl);

    if (rc == 1) {
        if (t->ctr) {
            enum adm_tls_version v = adm_tls_version_of(SSL_version(t->ssl));
            count(&t->ctr->hs[v][SSL_session_reused(t->ssl) ? 1 : 0]);
            t->version_name = adm_tls_version_name(v);
            if ((t->sni = SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name)))
                t->sni_len = strlen(t->sni);
            if (SSL_get0_peer_certificate(t->ssl))
                keep_client_cert(t);
        }
        return 0;
    }
    r = tls_fail(io, t, rc, 0);
    if (r == GW_IO_AGAIN)
        return GW_IO_AGAIN;
    t->verify = SSL_get_verify_result(t->ssl);
    t->failed = 1;
    if (t->ctr)
        count(&t->ctr->fail[adm_tls_fail_of(t->err, SSL_get_error(t->ssl, rc))]);
    return GW_IO_ERROR;
}

static size_t tls_pending(struct gw_io *io)
{
    struct gw_tls *t = io->xprt;
    return (size_t)SSL_pending(t->ssl);
}

static int tls_shutdown(struct gw_io *io)
{
    struct gw_tls *t = io->xprt;

    /* one close_notify, best effort: a full socket buffer loses it, and
     * the peer then sees a FIN, which it must accept as we do; then the FIN
     * (nginx's lingering close sends both), for a peer that waits for the
     * TCP stream's end. Reading goes on through SSL_read. */
    if (SSL_shutdown(t->ssl) < 0)
        ERR_clear_error();
    return shutdown(io->fd, SHUT_WR) == 0 ? 0 : GW_IO_ERROR;
}

static void tls_free(struct gw_tls *t)
{
    if (!t)
        return;
    /* not a bad session: OpenSSL would take the shared SSL_CTX lock */
    SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(t->ssl);
    free(t->subject);
    free(t);
}

static void tls_close(struct gw_io *io)
{
    tls_free(io->xprt);
    io->xprt = NULL;
    if (io->fd >= 0)
        close(io->fd);
    io->fd = -1;
}

const struct gw_io_ops gw_io_tls = {
    .name = "tls",
    .read = tls_read,
    .writev = tls_writev,
    .handshake = tls_handshake,
    .pending = tls_pending,
    .shutdown = tls_shutdown,
    .close = tls_close,
};

static struct gw_tls *tls_new(SSL_CTX *ctx, int fd)
{
    struct gw_tls *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    if (!(t->ssl = SSL_new(ctx)) || SSL_set_fd(t->ssl, fd) != 1) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    return t;
}

void *gw_tls_server_new(SSL_CTX *ctx, int fd, struct gw_tls_counters *ctr)
{
    struct gw_tls *t = tls_new(ctx, fd);

    if (!t)
        return NULL;
    t->ctr = ctr;
    SSL_set_accept_state(t->ssl);
    return t;
}

/* The peer certificate must be for <host>: a DNS name, or an IP literal
 * (then an IP subjectAltName). */
static int verify_name(SSL *ssl, const char *host)
{
    unsigned char ip[16];

    if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1)
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
    return SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}

void *gw_tls_client_new(SSL_CTX *ctx, int fd, const char *sni, const char *host,
                        SSL_SESSION *session)
{
    struct gw_tls *t = tls_new(ctx, fd);

    if (!t)
        return NULL;
    SSL_set_connect_state(t->ssl);
    if ((sni && SSL_set_tlsext_host_name(t->ssl, sni) != 1) ||
        (host && SSL_get_verify_mode(t->ssl) != SSL_VERIFY_NONE && verify_name(t->ssl, host) < 0) ||
        (session && SSL_set_session(t->ssl, session) != 1)) {
        tls_free(t);
        ERR_clear_error();
        return NULL;
    }
    return t;
}

static struct gw_tls *tls_of(const struct gw_io *io)
{
    return gw_io_is_tls(io) ? io->xprt : NULL;
}

const struct adm_tls_ctx *gw_tls_ctx(const struct gw_io *io)
{
    const struct gw_tls *t = tls_of(io);
    return t && t->ctr ? adm_tls_ssl_ctx(t->ssl) : NULL;
}

int gw_tls_h2(const struct gw_io *io)
{
    const struct gw_tls *t = tls_of(io);
    return t ? adm_tls_alpn_is_h2(t->ssl) : 0;
}

int gw_tls_group(const struct gw_io *io)
{
    const struct gw_tls *t = tls_of(io);
    return t ? adm_tls_ssl_group(t->ssl) : -1;
}

int gw_tls_client_cert(const struct gw_io *io, char *subject, size_t cap, char sha256[65])
{
    const struct gw_tls *t = tls_of(io);

    if (!t || !t->subject)
        return 0;
    snprintf(subject, cap, "%s", t->subject);
    memcpy(sha256, t->sha256, 65);
    return 1;
}

const char *gw_tls_error(const struct gw_io *io, char *buf, size_t cap)
{
    const struct gw_tls *t = tls_of(io);
    const char *r;

    if (!t || !t->failed)
        return NULL;
    if (t->verify != X509_V_OK) {
        snprintf(buf, cap, "certificate verify failed: %s",
                 X509_verify_cert_error_string(t->verify));
    } else if (t->err && (r = ERR_reason_error_string(t->err))) {
        snprintf(buf, cap, "%s", r);
    } else {
        snprintf(buf, cap, "the peer closed the connection during the handshake");
    }
    return buf;
}

int gw_tls_log_fields(const struct gw_io *io, const char **version, const char **sni,
                      size_t *sni_len)
{
    const struct gw_tls *t = tls_of(io);

    if (!t || !t->version_name)
        return 0;
    *version = t->version_name;
    *sni = t->sni;
    *sni_len = t->sni_len;
    return 1;
}

void gw_tls_count_timeout(const struct gw_io *io)
{
    const struct gw_tls *t = tls_of(io);
    if (t && t->ctr)
        count(&t->ctr->fail[ADM_TLS_FAIL_TIMEOUT]);
}

SSL_SESSION *gw_tls_session(const struct gw_io *io)
{
    const struct gw_tls *t = tls_of(io);
    SSL_SESSION *s = t ? SSL_get1_session(t->ssl) : NULL;

    if (s && !SSL_SESSION_is_resumable(s)) {
        SSL_SESSION_free(s);
        return NULL;
    }
    return s;
}
