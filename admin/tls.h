/*
 * tls.h - TLS in the config and in the snapshot.
 *
 * tls_config.c parses and validates the "tls" objects of listeners and
 * upstreams: it reads every certificate, key and CA file, parses them with
 * OpenSSL, and refuses what would fail at handshake time (a key that does not
 * match its certificate, an expired certificate, names that do not cover the
 * hosts it is for, two defaults, TLS below 1.2, a short ticket_secret),
 * each error at its JSON pointer. The result is plain data plus the parsed
 * OpenSSL objects, and an identity: the SHA-256 of every setting and of the
 * bytes of every certificate, key and CA, so that two definitions that would
 * build the same context compare equal whatever their file names.
 *
 * tls_ctx.c builds the OpenSSL contexts from it on the admin thread when a
 * snapshot is built: one SSL_CTX per listener that every worker shares, with
 * SNI, ALPN (from the listener's protocols), ticket keys (random, or
 * derived from the listener's ticket_secret so that a fleet's nodes share
 * them) and client verification; and a client SSL_CTX per TLS upstream.
 *
 * Nothing here prints, exits, or keeps global state other than the OpenSSL
 * algorithms fetched once (adm_tls_init()).
 */
#ifndef SY_ADMIN_TLS_H
#define SY_ADMIN_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "admin/config.h"

#define ADM_TLS_ID_LEN 32 /* SHA-256 */

enum adm_tls_key {
    ADM_TLS_KEY_RSA = 0,
    ADM_TLS_KEY_ECDSA,
};

enum adm_tls_client_mode {
    ADM_TLS_CLIENT_OFF = 0,
    ADM_TLS_CLIENT_REQUIRE,
    ADM_TLS_CLIENT_OPTIONAL,
};

/* One certificate of a listener, with its key and chain. */
struct adm_tls_cert {
    char *cert_file, *key_file; /* as written; NULL when given inline */
    char **hosts;               /* lower case, "*.example.com" for a wildcard */
    size_t nhosts;              /* 0: a default certificate */
    X509 *x509;                 /* the leaf (owned) */
    STACK_OF(X509) * chain;     /* the certificates after it in the PEM (owned) */
    EVP_PKEY *pkey;             /* owned */
    enum adm_tls_key key_type;
    unsigned key_bits;
    unsigned char sha256[32]; /* of the DER leaf certificate */
    int64_t not_after;        /* Unix time */
    char *subject, *issuer;   /* RFC 2253 one-liners */
    char **names;             /* the DNS names it covers: subjectAltName, else the CN */
    size_t nnames;
};

/* listeners[].tls */
struct adm_tls_listener {
    struct adm_tls_cert *certs;
    size_t ncerts;              /* >= 1; 0 only on a fleet node (ADM_TLS_FLEET_NODE) */
    int min_version;            /* TLS1_2_VERSION (default) or TLS1_3_VERSION */
    int session_tickets;        /* 1 by default */
    unsigned ticket_rotation_s; /* 43200 by default */
    enum adm_tls_client_mode client_mode;
    char *client_ca_file;        /* NULL without client_auth */
    STACK_OF(X509) * client_cas; /* owned; NULL without client_auth */
    char *ticket_secret;         /* what ticket keys derive from (>= 32 bytes); NULL: random */
    unsigned char id[ADM_TLS_ID_LEN];
};

/* upstreams.NAME.tls */
struct adm_tls_upstream {
    int verify;           /* 1 by default */
    char *ca_file;        /* NULL: the system store */
    STACK_OF(X509) * cas; /* owned, from ca_file; NULL without one */
    char *server_name;    /* NULL: each server's host */
    unsigned char id[ADM_TLS_ID_LEN];
};

/* adm_tls_listener_parse()'s <flags>: the listener is on a fleet node (the
 * document has a top-level "fleet"), where "certificates" may be empty: the
 * fleet has none yet, and the listener refuses every handshake until it
 * has. */
#define ADM_TLS_FLEET_NODE 1u
/* The shortest ticket_secret: 256 bits, if every byte were random. */
#define ADM_TLS_TICKET_SECRET_MIN 32

/* Parses <v>, the value at JSON pointer <path>, into a new *<out>. Returns
 * the number of errors appended to <errs> (0: *out is set, and the caller
 * frees it), or -1 on out of memory. Files are read here (blocking: admin
 * thread or start-up only). <flags>: ADM_TLS_FLEET_NODE or 0. */
int adm_tls_listener_parse(const json_t *v, const char *path, unsigned flags,
                           struct adm_errors *errs, struct adm_tls_listener **out);
void adm_tls_listener_free(struct adm_tls_listener *t);
int adm_tls_upstream_parse(const json_t *v, const char *path, struct adm_errors *errs,
                           struct adm_tls_upstream **out);
void adm_tls_upstream_free(struct adm_tls_upstream *t);

/* 1 when the document <doc> (not validated) has a listener or upstream
 * "tls" that names a certificate, key or CA file: then an identical document
 * may still be a change, since files are compared by content. */
int adm_tls_doc_reads_files(const json_t *doc);
/* 1 when every listener and upstream of <a> and <b> has the same TLS
 * identity (or none in both). */
int adm_tls_same(const struct adm_config *a, const struct adm_config *b);

/* "RSA" or "ECDSA". */
const char *adm_tls_key_name(enum adm_tls_key k);

/* ---- private keys through the admin API (tls_redact.c) ---- */

/* What GET /config writes in place of an inline key_pem or a
 * ticket_secret (Envoy's config_dump marker). */
#define ADM_TLS_REDACTED "[redacted]"
/* A deep copy of <doc> (borrowed) with every listener certificate's inline
 * key_pem and every listener's ticket_secret replaced by ADM_TLS_REDACTED:
 * the caller owns it. NULL on out of memory. */
json_t *adm_tls_redact(const json_t *doc);
/* In the pushed document <doc> (changed in place), every listener
 * certificate whose key_pem is ADM_TLS_REDACTED takes the key_pem of the
 * certificate with the same cert_pem in the live document <live> (borrowed;
 * NULL: none), and every listener whose ticket_secret is ADM_TLS_REDACTED
 * takes the ticket_secret of the live listener with the same address.
 * Returns how many it restored, or -1 with one error per marker that has
 * nothing live to take (its JSON path) in <errs>, or on out of memory: then
 * <doc> may be restored in part, and is for throwing away. */
int adm_tls_unredact(json_t *doc, const json_t *live, struct adm_errors *errs);

/* ---- handshake outcomes, counted by the gateway, reported by the admin
 * API (tls_report.c) ---- */

enum adm_tls_version {
    ADM_TLS_V12 = 0,
    ADM_TLS_V13,
    ADM_TLS_NVERSIONS,
};

enum adm_tls_fail {
    ADM_TLS_FAIL_PROTOCOL = 0,   /* a version below the listener's minimum */
    ADM_TLS_FAIL_CIPHER,         /* no cipher, group or signature algorithm in common */
    ADM_TLS_FAIL_NO_CLIENT_CERT, /* client_auth require, and none was sent */
    ADM_TLS_FAIL_CLIENT_CERT,    /* a client certificate that does not verify */
    ADM_TLS_FAIL_ALPN,           /* no application protocol in common */
    ADM_TLS_FAIL_NOT_TLS,        /* plain HTTP or other bytes on a TLS port */
    ADM_TLS_FAIL_CLOSED,         /* the peer went away during the handshake */
    ADM_TLS_FAIL_TIMEOUT,        /* the handshake outlived timeouts.client_header_ms */
    ADM_TLS_FAIL_OTHER,
    ADM_TLS_NFAIL,
};

/* The version index of an SSL's negotiated version (TLS1_3_VERSION, ...). */
enum adm_tls_version adm_tls_version_of(int version);
/* What a failed handshake failed of: OpenSSL's first queued error <err>
 * (0: none) and SSL_get_error()'s <ssl_error>. */
enum adm_tls_fail adm_tls_fail_of(unsigned long err, int ssl_error);
/* "protocol_version", ... (the metrics' reason label). */
const char *adm_tls_fail_name(enum adm_tls_fail f);
/* "TLSv1.2", "TLSv1.3". */
const char *adm_tls_version_name(enum adm_tls_version v);

/* GET /certificates: every listener certificate of <cfg> with its
 * listener, hosts, names, subject, issuer, not_after, key type and SHA-256
 * fingerprint. New reference, NULL on out of memory. */
json_t *adm_tls_certificates_json(const struct adm_config *cfg);

/* ---- contexts (tls_ctx.c) ---- */

/* Fetches the algorithms the handshake callbacks use, once per process.
 * 0, or -1 when OpenSSL lacks one of them. Thread-safe. */
int adm_tls_init(void);

/* A listener's server context: one SSL_CTX shared by every worker. Its
 * certificate groups (one per name: an RSA and an ECDSA certificate for one
 * name are one group) are picked by SNI in the client-hello callback: exact
 * name, then a one-label wildcard, then the default. It lives as long as its
 * SSL_CTX: the references below count on the SSL_CTX, so a connection that
 * outlives every snapshot holding the context keeps it alive. */
struct adm_tls_ctx;

/* Builds the context of <t> (borrowed; the context keeps its own references
 * to the certificates) for a listener whose listeners[].protocols are
 * <protocols> (ADM_PROTO_* bits): what its ALPN selects. NULL with a reason
 * in <why> on failure. */
struct adm_tls_ctx *adm_tls_ctx_new(const struct adm_tls_listener *t, unsigned protocols, char *why,
                                    size_t cap);
/* Another reference to <c>, returned. */
struct adm_tls_ctx *adm_tls_ctx_ref(struct adm_tls_ctx *c);
/* Drops one reference; NULL is a no-op. */
void adm_tls_ctx_unref(struct adm_tls_ctx *c);
/* The SSL_CTX to create connections from (borrowed). */
SSL_CTX *adm_tls_ctx_ssl(const struct adm_tls_ctx *c);
/* The identity of the definition it was built from. */
const unsigned char *adm_tls_ctx_id(const struct adm_tls_ctx *c);
/* The group that <host> (<len> bytes, any case, no port) selects: what SNI
 * would pick. -1 when there is no default and nothing matches. */
int adm_tls_ctx_group(const struct adm_tls_ctx *c, const char *host, size_t len);
/* The group the handshake of <ssl> picked, or -1 before it was picked. */
int adm_tls_ssl_group(const SSL *ssl);
/* The context <ssl> was created from, or NULL. */
const struct adm_tls_ctx *adm_tls_ssl_ctx(const SSL *ssl);
/* Whether the listener verifies client certificates. */
int adm_tls_ctx_client_auth(const struct adm_tls_ctx *c);
/* The ADM_PROTO_* bits it was built for. */
unsigned adm_tls_ctx_protocols(const struct adm_tls_ctx *c);
/* Gives the new, unpublished <c> the ticket keys of <from>, a context of
 * the same TLS definition: tickets <from> issued resume on <c> (a push that
 * changed only the listener's protocols). */
void adm_tls_ctx_share_tickets(struct adm_tls_ctx *c, const struct adm_tls_ctx *from);
/* The master secret its ticket keys derive from, into <out>; and, for an
 * upgrade, <c>'s set to another process's <in> before <c> served any
 * connection: tickets that process issued resume here. */
void adm_tls_ctx_ticket_master(const struct adm_tls_ctx *c, unsigned char out[32]);
void adm_tls_ctx_set_ticket_master(struct adm_tls_ctx *c, const unsigned char in[32]);

/* Whether the handshake of <ssl> (a connection from a listener's context)
 * selected h2 by ALPN: the connection speaks HTTP/2 from its first byte.
 * 0 for http/1.1, http/1.0 or no ALPN. */
int adm_tls_alpn_is_h2(const SSL *ssl);
/* Whether ALPN passed over h2, which the client offered and the listener
 * allows, because the TLS 1.2 cipher negotiated is on RFC 9113 9.2.2's
 * block list (not an ephemeral AEAD suite): for a debug-level line. Never
 * with the built-in cipher lists, which hold ephemeral AEAD suites only. */
int adm_tls_h2_refused_by_cipher(const SSL *ssl);

/* A client context for a TLS upstream: verification against ca_file or the
 * system store, sessions kept by the caller for resumption, ALPN offering
 * "h2" alone with <h2> (a pool of protocol "h2"), else "http/1.1". NULL
 * with a reason in <why>. Free with SSL_CTX_free(). */
SSL_CTX *adm_tls_client_ctx_new(const struct adm_tls_upstream *t, int h2, char *why, size_t cap);

#endif
