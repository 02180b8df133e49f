/*
 * log.h - the access log's line formatter, apart from the connection so that
 * the tests can feed it any field values: one record in, one JSON line out.
 */
#ifndef SY_GW_LOG_H
#define SY_GW_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* A worker's cache of the current second, formatted: the time prefix is
 * built once a second, and each line appends its milliseconds. */
struct gw_log_clock {
    int valid;
    time_t sec;
    char text[40]; /* "YYYY-MM-DDTHH:MM:SS", or combined's "01/Dec/2026:10:17:36 +0000" */
    size_t len;
};

/* One access-log record. Strings are borrowed; a NULL string with length 0
 * is logged as empty, and a NULL <route>, <upstream> or <ua> as null.
 * <client_ip>, <route> and <upstream> are also NUL-terminated. */
struct gw_log_rec {
    struct timespec now; /* CLOCK_REALTIME */
    const char *client_ip;
    size_t client_ip_len;
    unsigned client_port;
    int client_derived; /* client_ip is client_ip's address from a header: no port shown */
    const char *method, *host, *target, *path, *ua;
    size_t method_len, host_len, target_len, path_len, ua_len;
    int status;
    int grpc_status; /* the gRPC status beside it, < 0: null (not gRPC, or none known) */
    uint64_t bytes_in, bytes_out;
    double duration_ms, upstream_ms; /* upstream_ms < 0: null */
    const char *route, *upstream;
    size_t route_len, upstream_len;
    const char *reqid; /* no NUL in it (the gateway's are 24 hex digits) */
    size_t reqid_len;
    const char *proto;   /* "HTTP/1.1", "HTTP/1.0", "HTTP/2.0": combined's request line (8 bytes);
                            NULL: HTTP/1.1 */
    const char *referer; /* NULL: no Referer */
    size_t referer_len;
    uint64_t body_bytes; /* of bytes_out, the body's: combined's $body_bytes_sent */
    const char *auth;    /* the Authorization value (NULL: none): combined's $remote_user */
    size_t auth_len;
    const char *tls_version; /* "TLSv1.3", NULL: a plain connection (null) */
    const char *sni;         /* the name the client's TLS handshake sent, NULL: none (null) */
    size_t sni_len;
};

/* The most bytes gw_log_json() writes for <r>. */
size_t gw_log_json_max(const struct gw_log_rec *r);

/* Writes <r> as one JSON line ending in '\n' at <out>, which has room for
 * gw_log_json_max(r) bytes, and returns its length. <clk> is the caller's
 * cache of the formatted second. */
size_t gw_log_json(struct gw_log_clock *clk, char *out, const struct gw_log_rec *r);

/* The same record as nginx's combined format writes it, byte for byte:
 * $remote_addr - $remote_user [$time_local] "$request" $status
 * $body_bytes_sent "$http_referer" "$http_user_agent", unsafe bytes as \xHH,
 * an absent header as "-". $remote_user is, as nginx decodes it, the user
 * name of an "Authorization: Basic" value, else "-"; $body_bytes_sent is
 * <body_bytes>. <clk> caches the local time's second, and is not the one
 * gw_log_json() takes. Room: gw_log_json_max(r). */
size_t gw_log_combined(struct gw_log_clock *clk, char *out, const struct gw_log_rec *r);

#endif
