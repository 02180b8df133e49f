/*
 * backend_int.h - private structures of sy_test_backend, the scriptable HTTP/1.1
 * origin server that the end-to-end tests put behind Switchyard.
 *
 * One process, one or more worker threads; each worker owns an event_base and
 * a listening socket bound with SO_REUSEPORT to the same 127.0.0.1 port, and
 * touches only its own connections. The only shared mutable state is the
 * counters of struct tb_server, which are atomics.
 *
 * A connection answers one request at a time: the parser pauses at the end of
 * every request and resumes only when the response has been queued whole, so
 * pipelined answers come out in order and at most one response is in flight.
 * Request bodies are hashed as they are parsed and never kept.
 *
 * README.md in this folder is the reference for the query-parameter protocol.
 */
#ifndef SY_TB_BACKEND_INT_H
#define SY_TB_BACKEND_INT_H

#include <llhttp.h>
#include <openssl/evp.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event;
struct event_base;
struct evbuffer;
struct bufferevent;
struct evconnlistener;

/* Output is refilled when it drains to TB_OUT_LOW and filled up to TB_OUT_HIGH;
 * the socket stops being read while the input holds TB_IN_HIGH bytes. */
#define TB_OUT_LOW (64 * 1024)
#define TB_OUT_HIGH (256 * 1024)
#define TB_IN_HIGH (256 * 1024)
/* Request target plus header and trailer bytes, and how many fields. */
#define TB_HDR_BYTES_MAX (1024 * 1024)
#define TB_HDRS_MAX 10000
/* After our last byte: how long to keep draining the peer before closing. */
#define TB_LINGER_MS 2000
/* Generated bodies repeat a TB_PATTERN_LEN-byte pattern; TB_BLOCK is how much
 * of it one evbuffer reference covers. */
#define TB_PATTERN "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/"
#define TB_PATTERN_LEN 64
#define TB_BLOCK (64 * 1024)

/* Process-wide configuration and counters, shared by all workers. */
struct tb_server {
    char name[256];
    EVP_MD *sha256;      /* fetched once: per-request init then skips the lookup */
    const char *pattern; /* TB_BLOCK + TB_PATTERN_LEN bytes of TB_PATTERN */
    atomic_uint_fast64_t next_conn_id;
    /* /__stats; signed so that a request racing /__reset cannot wrap them */
    atomic_int_fast64_t connections;
    atomic_int_fast64_t requests;
    atomic_int_fast64_t bytes_in;
    atomic_int_fast64_t open;
    atomic_uint_fast64_t epoch; /* bumped by /__reset */
};

struct tb_conn;

/* One thread's event loop and listener. */
struct tb_worker {
    struct tb_server *srv;
    struct event_base *base;
    struct evconnlistener *lev;
    struct event *accept_retry; /* re-enables accepting after EMFILE */
    struct tb_conn *conns;      /* every open connection, to free them at exit */
    int fd;                     /* the listening socket (owned by lev once made) */
};

enum tb_mode {
    TB_M_ECHO = 0,
    TB_M_HEADERS,
    TB_M_FIXED,
    TB_M_CHUNKED,
    TB_M_CLOSE,
    TB_M_1XX,
    TB_M_STATUS,
    TB_M_CUTOFF,
    TB_M_GARBAGE,
    TB_M_NEVER,
    TB_M_RESET,
    TB_M_RAW,
};

/* What the query string of one request asks for (README.md). */
struct tb_plan {
    enum tb_mode mode;
    int status;  /* final status */
    int interim; /* mode=1xx: the interim status */
    uint64_t size;
    uint64_t chunk;
    uint64_t after;
    uint64_t delay_ms;
    uint64_t chunk_delay_ms;
    bool close;       /* close=1: Connection: close on any mode */
    bool no_continue; /* continue=0: ignore Expect: 100-continue */
    bool hold;        /* mode=raw&hold=1: keep the connection open afterwards */
};

/* query.c */

/* Fill <plan> from the raw query <q>/<len> (no leading '?'). Returns 0, or -1
 * with a one-line reason in <err> (<errlen> bytes). */
int tb_plan_parse(struct tb_plan *plan, const char *q, size_t len, char *err, size_t errlen);

/* Walk "k=v&k=v": on each call sets <key>/<klen> and <val>/<vlen> (raw,
 * undecoded) and returns 1, or returns 0 at the end. <pos> starts at 0. */
int tb_query_next(const char *q, size_t len, size_t *pos, const char **key, size_t *klen,
                  const char **val, size_t *vlen);

/* Append the percent-decoding of <src>/<n> to <out> ('+' stays '+'; a '%' not
 * followed by two hex digits is literal). Returns 0 or -1 (out of memory). */
int tb_pct_decode_add(struct evbuffer *out, const char *src, size_t n);

/* Offset in <src>/<n> of the first byte that decodes to ':' (raw ':' or %3A),
 * and in <enc_len> the length of its encoding; -1 if there is none. */
long tb_pct_find_colon(const char *src, size_t n, size_t *enc_len);

/* Append <s>/<n> to <out> as a JSON string literal: valid UTF-8 is kept, any
 * byte that is not part of valid UTF-8 is written as \u00XX (Latin-1). */
int tb_json_str(struct evbuffer *out, const char *s, size_t n);

/* conn.c */

/* Take ownership of the accepted socket <fd> and serve it on <w>. */
void tb_conn_accept(struct tb_worker *w, int fd);

/* Free every connection of <w> (shutdown). */
void tb_conn_free_all(struct tb_worker *w);

/* ws.c: WebSocket echo after a 101. */

struct tb_ws {
    uint64_t left; /* payload bytes of the current frame still to read */
    uint32_t mpos; /* position in the mask */
    uint8_t mask[4];
    uint8_t opcode;
    bool fin;
    bool in_header;  /* waiting for a frame header */
    bool fragmented; /* a data message is open (last data frame had no FIN) */
    uint8_t ctl_len;
    uint8_t ctl[125]; /* payload of the current control frame */
};

enum tb_ws_result { TB_WS_MORE = 0, TB_WS_CLOSE, TB_WS_ERROR };

/* Reset <ws> for a fresh connection. */
void tb_ws_init(struct tb_ws *ws);

/* Consume frames from <in>, queueing echoes on <out> until <out> holds
 * TB_OUT_HIGH bytes or <in> runs dry. Returns TB_WS_CLOSE once a close frame
 * has been answered or a protocol error reported with a close frame (the
 * caller then flushes and closes), TB_WS_ERROR when out of memory. */
enum tb_ws_result tb_ws_process(struct tb_ws *ws, struct evbuffer *in, struct evbuffer *out);

/* Write the Sec-WebSocket-Accept value for <key>/<klen> into <acc> (29 bytes
 * with the NUL). Returns 0 or -1. */
int tb_ws_accept_key(const char *key, size_t klen, char acc[29]);

#endif
