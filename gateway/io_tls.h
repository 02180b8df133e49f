/*
 * io_tls.h - the TLS transport: OpenSSL driving the connection's
 * non-blocking socket directly (SSL_set_fd, SSL_read_ex/SSL_write_ex,
 * SSL_ERROR_WANT_READ/WANT_WRITE), behind the transport seam (io.h). It
 * serves client connections on TLS listeners and upstream connections to
 * TLS upstreams. A handshake never blocks a worker: it is one more phase of
 * the connection, driven by the core whenever the socket is ready.
 *
 * HTTP code never calls SSL_*: what it may know of a TLS connection (that it
 * is one, the certificate group SNI picked, the client certificate, why an
 * upstream handshake failed) it asks here.
 */
#ifndef SY_GATEWAY_IO_TLS_H
#define SY_GATEWAY_IO_TLS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "admin/tls.h"
#include "gateway/io.h"

extern const struct gw_io_ops gw_io_tls;

/* A worker's handshake counters (single writer: relaxed stores). */
struct gw_tls_counters {
    _Atomic uint64_t hs[ADM_TLS_NVERSIONS][2]; /* [version][resumed] */
    _Atomic uint64_t fail[ADM_TLS_NFAIL];
};

/* The transport state of an accepted connection on <fd> from the listener
 * context <ctx>, counting its handshake into <ctr> (borrowed, outlives the
 * connection). Pass it to gw_io_init() with gw_io_tls. NULL on out of
 * memory. */
void *gw_tls_server_new(SSL_CTX *ctx, int fd, struct gw_tls_counters *ctr);

/* The transport state of an upstream connection on <fd> from the client
 * context <ctx>: SNI <sni> (NULL: none), the peer certificate verified for
 * <host> when the context verifies, resuming <session> (NULL: none;
 * borrowed). NULL on out of memory. */
void *gw_tls_client_new(SSL_CTX *ctx, int fd, const char *sni, const char *host,
                        SSL_SESSION *session);

/* 1 when <io> runs over TLS. */
static inline int gw_io_is_tls(const struct gw_io *io)
{
    return io->ops == &gw_io_tls;
}

/* The listener context of a TLS client connection, NULL otherwise. */
const struct adm_tls_ctx *gw_tls_ctx(const struct gw_io *io);
/* 1 when the handshake of the TLS client connection <io> selected h2 by
 * ALPN: it speaks HTTP/2 from its first byte (admin/tls.h). */
int gw_tls_h2(const struct gw_io *io);
/* The certificate group the handshake picked (admin/tls.h), -1 when none
 * or not TLS. */
int gw_tls_group(const struct gw_io *io);
/* The verified client certificate: its subject (RFC 2253) into <subject>
 * and its SHA-256 in hex into <sha256> (65 bytes). 1 when there is one,
 * 0 when not (or not TLS). */
int gw_tls_client_cert(const struct gw_io *io, char *subject, size_t cap, char sha256[65]);
/* Why the handshake of <io> failed, in OpenSSL's words (the verification
 * error for a certificate that did not verify), into <buf>; NULL when it did
 * not fail (or <io> is not TLS). */
const char *gw_tls_error(const struct gw_io *io, char *buf, size_t cap);
/* What the access log says of a client connection whose handshake
 * completed: its version's name ("TLSv1.3") into *<version>, and the SNI
 * the client sent (NULL: none) into *<sni>, *<sni_len>; borrowed for the
 * connection's life, set once at the handshake, so reading them costs
 * nothing. 0 (nothing set) when <io> is not such a connection. */
int gw_tls_log_fields(const struct gw_io *io, const char **version, const char **sni,
                      size_t *sni_len);
/* Counts a handshake that ran out of time (the connection's own timer). */
void gw_tls_count_timeout(const struct gw_io *io);
/* The session of an upstream connection whose handshake completed, for
 * resuming the next one (a new reference; NULL when none is resumable). */
SSL_SESSION *gw_tls_session(const struct gw_io *io);

#endif
