/*
 * conn.c - one client connection of the test backend: parsing requests with
 * llhttp, choosing the answer from the query string, and writing it with
 * backpressure.
 *
 * States (one enum, changed only through set_state()):
 *   READING    parsing; the parser pauses at the end of each request
 *   DELAY      request complete, waiting delay_ms before the answer
 *   SENDING    a generated body is being queued as the output drains
 *   CHUNK_WAIT waiting chunk_delay_ms before the next chunk
 *   SILENT     mode=never (or raw&hold=1): reading and discarding, no answer
 *   WS         after 101: WebSocket echo (ws.c)
 *   CLOSING    last byte queued: flush, then shut down our side
 *   LINGER     our side shut: drain the peer until EOF or TB_LINGER_MS, so
 *              that unread input does not turn our FIN into an RST
 *   DEAD       to be freed by the callback that is running
 * Only the top-level libevent callbacks free a connection (settle()), so
 * nothing below them ever touches freed memory.
 */
#include "backend_int.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum tb_state {
    TB_S_READING = 0,
    TB_S_DELAY,
    TB_S_SENDING,
    TB_S_CHUNK_WAIT,
    TB_S_SILENT,
    TB_S_WS,
    TB_S_CLOSING,
    TB_S_LINGER,
    TB_S_DEAD,
};

/* A header or trailer field: offsets into conn->buf. */
struct tb_field {
    uint32_t name_off, name_len, val_off, val_len;
};

/* Body generator of mode=fixed/chunked/close/cutoff. */
struct tb_gen {
    uint64_t left;       /* body bytes still to queue */
    uint64_t pos;        /* offset in the pattern of the next byte */
    uint64_t chunk;      /* chunk size; 0 when not chunked */
    uint64_t chunk_left; /* bytes of the current chunk still to queue */
    uint64_t nchunks;    /* chunks started (the 0-size last chunk included) */
    bool waited;         /* chunk_delay_ms already spent before the next chunk */
    bool finished;       /* last byte (or the 0-size chunk) queued */
};

struct tb_conn {
    struct tb_conn *prev, *next; /* worker's list */
    struct tb_worker *w;
    struct tb_server *srv;
    struct bufferevent *bev;
    struct event *timer;
    struct evbuffer *body; /* scratch: a response body being built */
    EVP_MD_CTX *sha;
    llhttp_t parser;
    enum tb_state state;
    uint64_t id;
    uint64_t epoch;     /* srv->epoch when accepted */
    uint64_t nreq;      /* requests started on this connection */
    uint64_t consumed;  /* input bytes fed to the parser */
    uint64_t msg_start; /* value of <consumed> when the current request began */
    bool uncounted;     /* first request was /__stats or /__reset: not in the counters */
    bool peer_eof;
    bool in_process; /* re-entrance guard of process() */

    /* The request being parsed: target and fields in <buf>. */
    char *buf;
    size_t buf_len, buf_cap;
    size_t url_len; /* the target is buf[0, url_len) */
    struct tb_field *fields;
    size_t nfields, fields_cap;
    size_t ntrailer_start; /* fields from here on are trailers */
    size_t name_off, val_off;
    bool name_open;
    bool headers_done;
    bool req_done;
    char other_method[32]; /* a method token llhttp does not know, or "" */
    uint64_t body_bytes;
    int parse_status; /* HTTP status for a limit exceeded in a callback */

    /* What was asked, decided at the end of the headers. */
    struct tb_plan plan;
    char plan_err[160]; /* non-empty: the query was invalid */
    bool control_stats, control_reset;
    bool keep_alive, head, http10, is_connect, websocket;
    size_t ws_key_field; /* index in fields of Sec-WebSocket-Key */
    bool close_after;    /* the response in progress ends the connection */
    bool rst_after;      /* CLOSING ends with an RST instead of a FIN */

    struct tb_gen gen;
    struct tb_ws ws;
};

static void set_state(struct tb_conn *c, enum tb_state s)
{
    c->state = s;
}

/* ---------------------------------------------------------------------- */
/* Request capture: llhttp callbacks                                       */

static int buf_append(struct tb_conn *c, const char *at, size_t n)
{
    if (c->buf_len + n > TB_HDR_BYTES_MAX) {
        c->parse_status = 431;
        llhttp_set_error_reason(&c->parser, "request head too large");
        return HPE_USER;
    }
    if (c->buf_len + n > c->buf_cap) {
        size_t cap = c->buf_cap ? c->buf_cap : 4096;
        char *nb;

        while (cap < c->buf_len + n)
            cap *= 2;
        nb = realloc(c->buf, cap);
        if (!nb) {
            c->parse_status = 500;
            llhttp_set_error_reason(&c->parser, "out of memory");
            return HPE_USER;
        }
        c->buf = nb;
        c->buf_cap = cap;
    }
    memcpy(c->buf + c->buf_len, at, n);
    c->buf_len += n;
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    struct tb_conn *c = p->data;

    c->buf_len = 0;
    c->url_len = 0;
    c->nfields = 0;
    c->ntrailer_start = 0;
    c->name_open = false;
    c->headers_done = false;
    c->req_done = false;
    c->body_bytes = 0;
    c->parse_status = 0;
    c->plan_err[0] = '\0';
    if (EVP_DigestInit_ex(c->sha, c->srv->sha256, NULL) != 1) {
        c->parse_status = 500;
        llhttp_set_error_reason(p, "sha256 init failed");
        return HPE_USER;
    }
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct tb_conn *c = p->data;
    int rc = buf_append(c, at, n);

    c->url_len = c->buf_len;
    return rc;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct tb_conn *c = p->data;

    if (!c->name_open) {
        c->name_open = true;
        c->name_off = c->buf_len;
    }
    return buf_append(c, at, n);
}

static int on_header_field_complete(llhttp_t *p)
{
    struct tb_conn *c = p->data;

    c->name_open = false;
    c->val_off = c->buf_len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    return buf_append(p->data, at, n);
}

static int on_header_value_complete(llhttp_t *p)
{
    struct tb_conn *c = p->data;
    struct tb_field *f;

    if (c->nfields == TB_HDRS_MAX) {
        c->parse_status = 431;
        llhttp_set_error_reason(p, "too many header fields");
        return HPE_USER;
    }
    if (c->nfields == c->fields_cap) {
        size_t cap = c->fields_cap ? c->fields_cap * 2 : 32;
        struct tb_field *nf = realloc(c->fields, cap * sizeof(*nf));

        if (!nf) {
            c->parse_status = 500;
            llhttp_set_error_reason(p, "out of memory");
            return HPE_USER;
        }
        c->fields = nf;
        c->fields_cap = cap;
    }
    f = &c->fields[c->nfields++];
    f->name_off = (uint32_t)c->name_off;
    f->name_len = (uint32_t)(c->val_off - c->name_off);
    f->val_off = (uint32_t)c->val_off;
    f->val_len = (uint32_t)(c->buf_len - c->val_off);
    return 0;
}

static bool field_is(const struct tb_conn *c, const struct tb_field *f, const char *name)
{
    return f->name_len == strlen(name) && strncasecmp(c->buf + f->name_off, name, f->name_len) == 0;
}

/* Whether the comma-separated value of <f> holds <token> (case-insensitive). */
static bool field_has_token(const struct tb_conn *c, const struct tb_field *f, const char *token)
{
    const char *v = c->buf + f->val_off, *end = v + f->val_len;
    size_t tl = strlen(token);

    while (v < end) {
        const char *e = memchr(v, ',', (size_t)(end - v));

        if (!e)
            e = end;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        size_t n = (size_t)(e - v);
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == tl && strncasecmp(v, token, tl) == 0)
            return true;
        v = e + 1;
    }
    return false;
}

/* Split the target into path and query (query without '?', may be empty). */
static void split_target(const struct tb_conn *c, size_t *path_len, const char **q, size_t *qlen)
{
    const char *qm = memchr(c->buf, '?', c->url_len);

    *path_len = qm ? (size_t)(qm - c->buf) : c->url_len;
    *q = qm ? qm + 1 : c->buf + c->url_len;
    *qlen = qm ? c->url_len - *path_len - 1 : 0;
}

static bool path_is(const struct tb_conn *c, size_t path_len, const char *lit)
{
    return path_len == strlen(lit) && memcmp(c->buf, lit, path_len) == 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct tb_conn *c = p->data;
    struct tb_server *srv = c->srv;
    const char *q;
    size_t path_len, qlen;
    bool expect = false, ws_upgrade = false, ws_key = false;

    c->headers_done = true;
    c->ntrailer_start = c->nfields;
    c->nreq++;
    c->keep_alive = llhttp_should_keep_alive(p);
    c->http10 = p->http_major == 1 && p->http_minor == 0;
    c->head = p->method == HTTP_HEAD;
    c->is_connect = p->method == HTTP_CONNECT;
    c->plan_err[0] = '\0';
    split_target(c, &path_len, &q, &qlen);
    c->control_stats = path_is(c, path_len, "/__stats");
    c->control_reset = path_is(c, path_len, "/__reset");
    if (c->control_stats || c->control_reset) {
        memset(&c->plan, 0, sizeof(c->plan));
        c->plan.status = 200;
        if (c->nreq == 1) {
            /* A connection opened for the counters stays out of them. */
            c->uncounted = true;
            if (atomic_load(&srv->epoch) == c->epoch) /* else a reset dropped it */
                atomic_fetch_sub(&srv->connections, 1);
            atomic_fetch_sub(&srv->open, 1);
        }
        return 0;
    }
    atomic_fetch_add(&srv->requests, 1);
    if (tb_plan_parse(&c->plan, q, qlen, c->plan_err, sizeof(c->plan_err)) < 0) {
        memset(&c->plan, 0, sizeof(c->plan));
        c->plan.status = 200;
        if (!c->plan_err[0])
            snprintf(c->plan_err, sizeof(c->plan_err), "bad query");
    }
    for (size_t i = 0; i < c->nfields; i++) {
        const struct tb_field *f = &c->fields[i];

        if (field_is(c, f, "Expect") && f->val_len == 12 &&
            strncasecmp(c->buf + f->val_off, "100-continue", 12) == 0)
            expect = true;
        else if (field_is(c, f, "Upgrade") && field_has_token(c, f, "websocket"))
            ws_upgrade = true;
        else if (field_is(c, f, "Sec-WebSocket-Key")) {
            ws_key = true;
            c->ws_key_field = i;
        }
    }
    c->websocket = p->upgrade && ws_upgrade && ws_key && p->method == HTTP_GET && !c->http10 &&
                   !c->plan_err[0] && c->plan.mode == TB_M_ECHO;
    /* 100 Continue only where a body is coming and never to HTTP/1.0. */
    if (expect && !c->http10 && !c->plan.no_continue &&
        ((p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0))) {
        if (evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n") <
            0) {
            c->parse_status = 500;
            llhttp_set_error_reason(p, "out of memory");
            return HPE_USER;
        }
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct tb_conn *c = p->data;

    c->body_bytes += n;
    if (EVP_DigestUpdate(c->sha, at, n) != 1) {
        c->parse_status = 500;
        llhttp_set_error_reason(p, "sha256 update failed");
        return HPE_USER;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct tb_conn *c = p->data;

    c->req_done = true;
    return HPE_PAUSED; /* one request at a time: answers stay in order */
}

static const llhttp_settings_t tb_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value_complete = on_header_value_complete,
};

/* ---------------------------------------------------------------------- */
/* Writing answers                                                          */

static const char *reason(int status)
{
    static const struct {
        int status;
        const char *text;
    } tb_reasons[] = {
        {100, "Continue"},
        {102, "Processing"},
        {103, "Early Hints"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {203, "Non-Authoritative Information"},
        {204, "No Content"},
        {205, "Reset Content"},
        {206, "Partial Content"},
        {300, "Multiple Choices"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {410, "Gone"},
        {411, "Length Required"},
        {413, "Content Too Large"},
        {414, "URI Too Long"},
        {415, "Unsupported Media Type"},
        {417, "Expectation Failed"},
        {421, "Misdirected Request"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"},
    };

    for (size_t i = 0; i < sizeof(tb_reasons) / sizeof(tb_reasons[0]); i++)
        if (tb_reasons[i].status == status)
            return tb_reasons[i].text;
    return "Status";
}

/* Framing of a response head. */
enum tb_framing { TB_F_NONE, TB_F_LENGTH, TB_F_CHUNKED, TB_F_EOF };

/* Queue the response head: status line, Content-Type, framing, Connection,
 * the X-Backend/X-Conn-* identification and, when <scripted>, the h= headers
 * of the query. */
static int put_head(struct tb_conn *c, int status, const char *ctype, enum tb_framing framing,
                    uint64_t length, bool scripted)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    const char *q, *k, *v;
    size_t path_len, qlen, klen, vlen, pos = 0;

    if (evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, reason(status)) < 0)
        return -1;
    if (ctype && evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype) < 0)
        return -1;
    if (framing == TB_F_LENGTH &&
        evbuffer_add_printf(out, "Content-Length: %" PRIu64 "\r\n", length) < 0)
        return -1;
    if (framing == TB_F_CHUNKED && evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n") < 0)
        return -1;
    if (c->close_after && evbuffer_add_printf(out, "Connection: close\r\n") < 0)
        return -1;
    if (!c->close_after && c->http10 && evbuffer_add_printf(out, "Connection: keep-alive\r\n") < 0)
        return -1;
    if (evbuffer_add_printf(
            out, "X-Backend: %s\r\nX-Conn-Id: %" PRIu64 "\r\nX-Conn-Requests: %" PRIu64 "\r\n",
            c->srv->name, c->id, c->nreq) < 0)
        return -1;
    if (c->plan_err[0] && evbuffer_add_printf(out, "X-Backend-Error: bad query parameter\r\n") < 0)
        return -1;
    if (scripted) {
        split_target(c, &path_len, &q, &qlen);
        while (tb_query_next(q, qlen, &pos, &k, &klen, &v, &vlen)) {
            size_t enc;
            long colon;

            if (klen != 1 || k[0] != 'h')
                continue;
            colon = tb_pct_find_colon(v, vlen, &enc);
            if (tb_pct_decode_add(out, v, (size_t)colon) < 0 || evbuffer_add(out, ": ", 2) < 0 ||
                tb_pct_decode_add(out, v + colon + enc, vlen - (size_t)colon - enc) < 0 ||
                evbuffer_add(out, "\r\n", 2) < 0)
                return -1;
        }
    }
    return evbuffer_add(out, "\r\n", 2);
}

/* Queue a head and the body built in c->body (dropped for HEAD, 204, 304). */
static int put_built(struct tb_conn *c, int status, const char *ctype, bool scripted)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    bool bodiless = status == 204 || status == 304;
    size_t len = evbuffer_get_length(c->body);

    if (put_head(c, status, bodiless ? NULL : ctype, bodiless ? TB_F_NONE : TB_F_LENGTH, len,
                 scripted) < 0)
        return -1;
    if (c->head || bodiless)
        return evbuffer_drain(c->body, len);
    return evbuffer_add_buffer(out, c->body);
}

static int build_echo(struct tb_conn *c)
{
    struct evbuffer *b = c->body;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    const char *q;
    size_t path_len, qlen;
    const char *method = c->other_method[0] ? c->other_method
                                            : llhttp_method_name((llhttp_method_t)c->parser.method);
    const char *framing = (c->parser.flags & F_CHUNKED)          ? "chunked"
                          : (c->parser.flags & F_CONTENT_LENGTH) ? "length"
                                                                 : "none";

    if (EVP_DigestFinal_ex(c->sha, md, &mdlen) != 1)
        return -1;
    for (unsigned int i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[2 * mdlen] = '\0';
    split_target(c, &path_len, &q, &qlen);
    if (evbuffer_add_printf(b, "{\"backend\": ") < 0 ||
        tb_json_str(b, c->srv->name, strlen(c->srv->name)) < 0 ||
        evbuffer_add_printf(b, ", \"method\": \"%s\", \"target\": ", method) < 0 ||
        tb_json_str(b, c->buf, c->url_len) < 0 || evbuffer_add_printf(b, ", \"path\": ") < 0 ||
        tb_json_str(b, c->buf, path_len) < 0 || evbuffer_add_printf(b, ", \"query\": ") < 0 ||
        tb_json_str(b, q, qlen) < 0 ||
        evbuffer_add_printf(b, ", \"version\": \"%d.%d\", \"headers\": [", c->parser.http_major,
                            c->parser.http_minor) < 0)
        return -1;
    for (size_t i = 0; i < c->nfields; i++) {
        const struct tb_field *f = &c->fields[i];

        if (i == c->ntrailer_start && evbuffer_add_printf(b, "], \"trailers\": [") < 0)
            return -1;
        if (evbuffer_add_printf(b, "%s[", i == 0 || i == c->ntrailer_start ? "" : ", ") < 0 ||
            tb_json_str(b, c->buf + f->name_off, f->name_len) < 0 || evbuffer_add(b, ", ", 2) < 0 ||
            tb_json_str(b, c->buf + f->val_off, f->val_len) < 0 || evbuffer_add(b, "]", 1) < 0)
            return -1;
    }
    if (c->ntrailer_start == c->nfields && evbuffer_add_printf(b, "], \"trailers\": [") < 0)
        return -1;
    return evbuffer_add_printf(b,
                               "], \"body_bytes\": %" PRIu64 ", \"body_sha256\": \"%s\", "
                               "\"body_framing\": \"%s\", \"conn_id\": %" PRIu64
                               ", \"conn_requests\": %" PRIu64 "}\n",
                               c->body_bytes, hex, framing, c->id, c->nreq) < 0
               ? -1
               : 0;
}

static int64_t load_nonneg(atomic_int_fast64_t *v)
{
    int64_t x = atomic_load(v);

    return x < 0 ? 0 : x;
}

static int build_stats(struct tb_conn *c)
{
    struct tb_server *srv = c->srv;

    if (evbuffer_add_printf(c->body, "{\"backend\": ") < 0 ||
        tb_json_str(c->body, srv->name, strlen(srv->name)) < 0)
        return -1;
    return evbuffer_add_printf(c->body,
                               ", \"connections\": %" PRId64 ", \"requests\": %" PRId64
                               ", \"bytes_in\": %" PRId64 ", \"open\": %" PRId64 "}\n",
                               load_nonneg(&srv->connections), load_nonneg(&srv->requests),
                               load_nonneg(&srv->bytes_in), load_nonneg(&srv->open)) < 0
               ? -1
               : 0;
}

static void enter_closing(struct tb_conn *c);
static void process(struct tb_conn *c);
static void gen_fill(struct tb_conn *c);

/* The response is queued whole: go on with the next request or close. */
static void response_done(struct tb_conn *c)
{
    if (c->close_after) {
        enter_closing(c);
        return;
    }
    set_state(c, TB_S_READING);
    process(c);
}

/* Close with an RST: SO_LINGER 0 makes close() abort the connection. */
static void reset_now(struct tb_conn *c)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    setsockopt(bufferevent_getfd(c->bev), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    set_state(c, TB_S_DEAD);
}

/* A fixed-size answer of our own (400, 431, 500) that ends the connection. */
static void fail_request(struct tb_conn *c, int status, const char *what)
{
    c->close_after = true;
    evbuffer_drain(c->body, evbuffer_get_length(c->body));
    if (evbuffer_add_printf(c->body, "%d %s: %s\n", status, reason(status), what) < 0 ||
        put_built(c, status, "text/plain", false) < 0) {
        set_state(c, TB_S_DEAD);
        return;
    }
    enter_closing(c);
}

static void start_websocket(struct tb_conn *c)
{
    const struct tb_field *f = &c->fields[c->ws_key_field];
    const char *key = c->buf + f->val_off;
    size_t klen = f->val_len;
    char acc[29];

    while (klen > 0 && (key[klen - 1] == ' ' || key[klen - 1] == '\t'))
        klen--;
    if (tb_ws_accept_key(key, klen, acc) < 0 ||
        evbuffer_add_printf(bufferevent_get_output(c->bev),
                            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                            "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
                            "X-Backend: %s\r\nX-Conn-Id: %" PRIu64 "\r\n\r\n",
                            acc, c->srv->name, c->id) < 0) {
        set_state(c, TB_S_DEAD);
        return;
    }
    tb_ws_init(&c->ws);
    set_state(c, TB_S_WS);
    /* Frames that came with the request are already in the input. */
    switch (tb_ws_process(&c->ws, bufferevent_get_input(c->bev), bufferevent_get_output(c->bev))) {
    case TB_WS_MORE:
        break;
    case TB_WS_CLOSE:
        c->close_after = true;
        enter_closing(c);
        break;
    case TB_WS_ERROR:
        set_state(c, TB_S_DEAD);
        break;
    }
}

/* Queue the answer chosen by the plan (after delay_ms, if any). */
static void respond(struct tb_conn *c)
{
    const struct tb_plan *pl = &c->plan;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    bool bodiless = pl->status == 204 || pl->status == 304;
    bool eof_framed = pl->mode == TB_M_CLOSE || (pl->mode == TB_M_CHUNKED && c->http10);
    int rc = 0;

    c->close_after =
        !c->keep_alive || pl->close || c->is_connect || eof_framed || pl->mode == TB_M_CUTOFF;
    switch (pl->mode) {
    case TB_M_RESET:
        /* After the answers to earlier pipelined requests have left. */
        c->close_after = true;
        c->rst_after = true;
        enter_closing(c);
        return;
    case TB_M_GARBAGE:
        c->close_after = true;
        if (evbuffer_add_printf(out, "THIS IS NOT HTTP\r\n\r\n") < 0)
            set_state(c, TB_S_DEAD);
        else
            enter_closing(c);
        return;
    case TB_M_RAW: {
        const char *q, *k, *v;
        size_t path_len, qlen, klen, vlen, pos = 0;

        split_target(c, &path_len, &q, &qlen);
        while (tb_query_next(q, qlen, &pos, &k, &klen, &v, &vlen))
            if (klen == 4 && memcmp(k, "data", 4) == 0 && tb_pct_decode_add(out, v, vlen) < 0)
                rc = -1;
        if (rc < 0) {
            set_state(c, TB_S_DEAD);
        } else if (pl->hold) {
            set_state(c, TB_S_SILENT);
        } else {
            c->close_after = true;
            enter_closing(c);
        }
        return;
    }
    case TB_M_NEVER:
        set_state(c, TB_S_SILENT);
        return;
    case TB_M_ECHO:
    case TB_M_HEADERS:
    case TB_M_1XX:
        if (c->websocket) {
            start_websocket(c);
            return;
        }
        rc = build_echo(c);
        if (rc == 0)
            rc = put_built(c, pl->status, "application/json", true);
        break;
    case TB_M_STATUS:
        rc = evbuffer_add_printf(c->body, "%d %s\n", pl->status, reason(pl->status)) < 0 ? -1 : 0;
        if (rc == 0)
            rc = put_built(c, pl->status, "text/plain", true);
        break;
    case TB_M_FIXED:
    case TB_M_CHUNKED:
    case TB_M_CLOSE:
    case TB_M_CUTOFF: {
        enum tb_framing fr = eof_framed                 ? TB_F_EOF
                             : pl->mode == TB_M_CHUNKED ? TB_F_CHUNKED
                                                        : TB_F_LENGTH;

        rc = put_head(c, pl->status, bodiless ? NULL : "application/octet-stream",
                      bodiless ? TB_F_NONE : fr, pl->size, true);
        memset(&c->gen, 0, sizeof(c->gen));
        if (!c->head && !bodiless) {
            c->gen.left = pl->mode == TB_M_CUTOFF ? pl->after : pl->size;
            c->gen.chunk = fr == TB_F_CHUNKED ? pl->chunk : 0;
            if (rc == 0) {
                set_state(c, TB_S_SENDING);
                gen_fill(c);
                return;
            }
        }
        break;
    }
    }
    if (rc < 0) {
        set_state(c, TB_S_DEAD);
        return;
    }
    response_done(c);
}

static struct timeval ms_to_tv(uint64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000 * 1000)};

    return tv;
}

/* Queue generated body bytes until the output holds TB_OUT_HIGH or the body
 * ends; the write callback calls again as the output drains. */
static void gen_fill(struct tb_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    struct tb_gen *g = &c->gen;
    const char *pattern = c->srv->pattern;

    while (!g->finished && evbuffer_get_length(out) < TB_OUT_HIGH) {
        uint64_t take;

        if (g->chunk && g->chunk_left == 0) {
            if (g->nchunks > 0 && c->plan.chunk_delay_ms && !g->waited) {
                struct timeval tv = ms_to_tv(c->plan.chunk_delay_ms);

                set_state(c, TB_S_CHUNK_WAIT);
                evtimer_add(c->timer, &tv);
                return;
            }
            g->waited = false;
            g->nchunks++;
            if (g->left == 0) {
                if (evbuffer_add(out, "0\r\n\r\n", 5) < 0)
                    goto fail;
                g->finished = true;
                break;
            }
            g->chunk_left = g->left < g->chunk ? g->left : g->chunk;
            if (evbuffer_add_printf(out, "%" PRIx64 "\r\n", g->chunk_left) < 0)
                goto fail;
        }
        if (g->left == 0) {
            g->finished = true; /* not chunked */
            break;
        }
        take = g->chunk ? g->chunk_left : g->left;
        if (take > TB_BLOCK)
            take = TB_BLOCK;
        /* The pattern lives as long as the process: reference, no copy. */
        if (evbuffer_add_reference(out, pattern + g->pos % TB_PATTERN_LEN, (size_t)take, NULL,
                                   NULL) < 0)
            goto fail;
        g->pos += take;
        g->left -= take;
        if (g->chunk) {
            g->chunk_left -= take;
            if (g->chunk_left == 0 && evbuffer_add(out, "\r\n", 2) < 0)
                goto fail;
        }
    }
    if (g->finished)
        response_done(c);
    return;
fail:
    set_state(c, TB_S_DEAD);
}

/* ---------------------------------------------------------------------- */
/* The request loop                                                         */

/* Everything queued: flush, then shut our side down and drain the peer. */
static void check_flushed(struct tb_conn *c)
{
    struct timeval tv = ms_to_tv(TB_LINGER_MS);

    if (c->state != TB_S_CLOSING || evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
        return;
    if (c->rst_after) {
        reset_now(c);
        return;
    }
    if (c->peer_eof) {
        set_state(c, TB_S_DEAD);
        return;
    }
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    set_state(c, TB_S_LINGER);
    evtimer_add(c->timer, &tv);
}

static void enter_closing(struct tb_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    set_state(c, TB_S_CLOSING);
    evbuffer_drain(in, evbuffer_get_length(in)); /* keeps reading unblocked */
    check_flushed(c);
}

static void send_interim(struct tb_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    int s = c->plan.interim;

    if (evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n%s\r\n", s, reason(s),
                            s == 103 ? "Link: </early-hint.css>; rel=preload; as=style\r\n" : "") <
        0)
        set_state(c, TB_S_DEAD);
}

/* A request is complete (<req_len> bytes on the wire): answer it. */
static void dispatch(struct tb_conn *c, uint64_t req_len)
{
    struct tb_server *srv = c->srv;

    llhttp_resume(&c->parser);
    c->close_after = !c->keep_alive;
    evbuffer_drain(c->body, evbuffer_get_length(c->body));
    if (c->control_stats || c->control_reset) {
        if (c->control_reset) {
            atomic_fetch_add(&srv->epoch, 1);
            atomic_store(&srv->connections, 0);
            atomic_store(&srv->requests, 0);
            atomic_store(&srv->bytes_in, 0);
        } else {
            atomic_fetch_sub(&srv->bytes_in, (int64_t)req_len);
        }
        if (build_stats(c) < 0 || put_built(c, 200, "application/json", false) < 0)
            set_state(c, TB_S_DEAD);
        else
            response_done(c);
        return;
    }
    if (c->plan_err[0]) {
        if (evbuffer_add_printf(c->body, "400 bad query parameter: %s\n", c->plan_err) < 0 ||
            put_built(c, 400, "text/plain", false) < 0)
            set_state(c, TB_S_DEAD);
        else
            response_done(c);
        return;
    }
    if (c->plan.mode == TB_M_1XX && !c->http10) {
        send_interim(c);
        if (c->state == TB_S_DEAD)
            return;
    }
    if (c->plan.delay_ms && c->plan.mode != TB_M_NEVER) {
        struct timeval tv = ms_to_tv(c->plan.delay_ms);

        set_state(c, TB_S_DELAY);
        evtimer_add(c->timer, &tv);
        return;
    }
    respond(c);
}

/* At the start of a request: a method token llhttp does not know (any token
 * is a method, RFC 9110 9.1) is kept in c->other_method and shown to llhttp
 * as GET. Returns -1 while the method is still incomplete. */
static int other_method(struct tb_conn *c, struct evbuffer *in)
{
    size_t avail = evbuffer_get_length(in), look = avail < 40 ? avail : 40, i;
    const char *b = (const char *)evbuffer_pullup(in, (ev_ssize_t)look);
    const char *sp = memchr(b, ' ', look);
    size_t mlen = sp ? (size_t)(sp - b) : 0;

    c->other_method[0] = '\0';
    if (!sp)
        return look < 40 && look > 0 && b[0] != '\r' && b[0] != '\n' ? -1 : 0;
    if (mlen == 0 || mlen >= sizeof(c->other_method))
        return 0;
    for (i = 0; i < mlen; i++)
        if (b[i] <= ' ' || b[i] >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", b[i]))
            return 0;
#define TB_KNOWN(num, name, string)                                                                \
    if (mlen == sizeof(#string) - 1 && memcmp(b, #string, mlen) == 0)                              \
        return 0;
    HTTP_METHOD_MAP(TB_KNOWN)
#undef TB_KNOWN
    memcpy(c->other_method, b, mlen);
    c->other_method[mlen] = '\0';
    llhttp_execute(&c->parser, "GET", 3);
    evbuffer_drain(in, mlen);
    c->consumed += mlen;
    return 0;
}

/* Feed the input to the parser until a request completes, the input runs
 * dry or the request is malformed. */
static void parse(struct tb_conn *c, struct evbuffer *in)
{
    struct evbuffer_iovec v[16];
    int n;
    size_t used = 0;

    if (c->consumed == c->msg_start && other_method(c, in) < 0)
        return;
    n = evbuffer_peek(in, -1, NULL, v, 16);

    for (int i = 0; i < n && i < 16 && !c->req_done; i++) {
        const char *base = v[i].iov_base;
        size_t len = v[i].iov_len, off = 0;

        while (off < len) {
            llhttp_errno_t e = llhttp_execute(&c->parser, base + off, len - off);
            const char *stop;

            if (e == HPE_OK) {
                off = len;
                break;
            }
            stop = llhttp_get_error_pos(&c->parser);
            off = stop ? (size_t)(stop - base) : len;
            if (e == HPE_PAUSED)
                break; /* on_message_complete: c->req_done */
            if (e == HPE_PAUSED_UPGRADE) {
                /* An Upgrade we answered as plain HTTP: keep parsing HTTP. */
                llhttp_resume_after_upgrade(&c->parser);
                continue;
            }
            evbuffer_drain(in, used + off);
            c->consumed += used + off;
            if (e == HPE_USER && c->parse_status)
                fail_request(c, c->parse_status, llhttp_get_error_reason(&c->parser));
            else
                fail_request(c, 400, llhttp_get_error_reason(&c->parser));
            return;
        }
        used += off;
    }
    evbuffer_drain(in, used);
    c->consumed += used;
}

/* Parse and answer requests while the connection is READING and the output
 * has room. Never re-entered: a response finished from inside returns here. */
static void process(struct tb_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    struct evbuffer *out = bufferevent_get_output(c->bev);

    if (c->in_process)
        return;
    c->in_process = true;
    while (c->state == TB_S_READING && evbuffer_get_length(out) < TB_OUT_HIGH) {
        if (evbuffer_get_length(in) == 0) {
            if (c->peer_eof) {
                c->close_after = true;
                enter_closing(c);
            }
            break;
        }
        parse(c, in);
        if (c->state == TB_S_READING && c->req_done) {
            uint64_t req_len = c->consumed - c->msg_start;

            c->req_done = false;
            c->msg_start = c->consumed;
            dispatch(c, req_len);
        }
    }
    c->in_process = false;
}

static void ws_step(struct tb_conn *c)
{
    switch (tb_ws_process(&c->ws, bufferevent_get_input(c->bev), bufferevent_get_output(c->bev))) {
    case TB_WS_MORE:
        break;
    case TB_WS_CLOSE:
        c->close_after = true;
        enter_closing(c);
        break;
    case TB_WS_ERROR:
        set_state(c, TB_S_DEAD);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* libevent callbacks and life cycle                                        */

static void conn_free(struct tb_conn *c)
{
    struct tb_worker *w = c->w;

    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (!c->uncounted)
        atomic_fetch_sub(&c->srv->open, 1);
    bufferevent_free(c->bev);
    event_free(c->timer);
    evbuffer_free(c->body);
    EVP_MD_CTX_free(c->sha);
    free(c->buf);
    free(c->fields);
    free(c);
}

/* End of every top-level callback: free the connection if it died. */
static void settle(struct tb_conn *c)
{
    if (c->state == TB_S_DEAD)
        conn_free(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    struct tb_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    switch (c->state) {
    case TB_S_READING:
        process(c);
        break;
    case TB_S_WS:
        ws_step(c);
        break;
    case TB_S_SILENT:
    case TB_S_CLOSING:
    case TB_S_LINGER:
        evbuffer_drain(in, evbuffer_get_length(in));
        break;
    case TB_S_DELAY:
    case TB_S_SENDING:
    case TB_S_CHUNK_WAIT:
    case TB_S_DEAD:
        break; /* the next request waits in the input */
    }
    settle(c);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
    struct tb_conn *c = arg;

    (void)bev;
    switch (c->state) {
    case TB_S_SENDING:
        gen_fill(c);
        break;
    case TB_S_READING:
        process(c);
        break;
    case TB_S_WS:
        ws_step(c);
        break;
    case TB_S_CLOSING:
        check_flushed(c);
        break;
    default:
        break;
    }
    settle(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct tb_conn *c = arg;

    (void)bev;
    if (what & BEV_EVENT_ERROR) {
        set_state(c, TB_S_DEAD);
    } else if (what & BEV_EVENT_EOF) {
        c->peer_eof = true;
        switch (c->state) {
        case TB_S_READING:
            process(c);
            break;
        case TB_S_SILENT:
        case TB_S_LINGER:
        case TB_S_WS:
            set_state(c, TB_S_DEAD);
            break;
        default:
            break; /* finish the answer in progress; process() then closes */
        }
    }
    settle(c);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tb_conn *c = arg;

    (void)fd;
    (void)what;
    switch (c->state) {
    case TB_S_DELAY:
        respond(c);
        break;
    case TB_S_CHUNK_WAIT:
        set_state(c, TB_S_SENDING);
        c->gen.waited = true;
        gen_fill(c);
        break;
    case TB_S_LINGER:
        set_state(c, TB_S_DEAD);
        break;
    default:
        break;
    }
    settle(c);
}

/* Counts every byte read from the socket into /__stats bytes_in. */
static void in_count_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
    struct tb_conn *c = arg;

    (void)b;
    if (info->n_added)
        atomic_fetch_add(&c->srv->bytes_in, (int64_t)info->n_added);
}

void tb_conn_accept(struct tb_worker *w, int fd)
{
    struct tb_conn *c = calloc(1, sizeof(*c));
    int one = 1;

    if (!c)
        goto fail_alloc;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev)
        goto fail_bev;
    c->timer = evtimer_new(w->base, timer_cb, c);
    if (!c->timer)
        goto fail_timer;
    c->body = evbuffer_new();
    if (!c->body)
        goto fail_body;
    c->sha = EVP_MD_CTX_new();
    if (!c->sha)
        goto fail_sha;
    if (!evbuffer_add_cb(bufferevent_get_input(c->bev), in_count_cb, c))
        goto fail_cb;
    c->w = w;
    c->srv = w->srv;
    llhttp_init(&c->parser, HTTP_REQUEST, &tb_settings);
    c->parser.data = c;
    c->id = atomic_fetch_add(&w->srv->next_conn_id, 1) + 1;
    c->epoch = atomic_load(&w->srv->epoch);
    atomic_fetch_add(&w->srv->connections, 1);
    atomic_fetch_add(&w->srv->open, 1);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    bufferevent_setwatermark(c->bev, EV_READ, 0, TB_IN_HIGH);
    bufferevent_setwatermark(c->bev, EV_WRITE, TB_OUT_LOW, 0);
    bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    return;

fail_cb:
    EVP_MD_CTX_free(c->sha);
fail_sha:
    evbuffer_free(c->body);
fail_body:
    event_free(c->timer);
fail_timer:
    bufferevent_free(c->bev); /* closes fd */
    free(c);
    return;
fail_bev:
    free(c);
fail_alloc:
    evutil_closesocket(fd);
}

void tb_conn_free_all(struct tb_worker *w)
{
    while (w->conns)
        conn_free(w->conns);
}
