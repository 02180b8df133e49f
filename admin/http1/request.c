/*
 * admin/http1/request.c - the client-side HTTP/1.1 request parser (see request.h).
 *
 * Every byte goes through two parsers. Ours comes first and is strict: it
 * scans the head line by line as bytes arrive (so limits and garbage are
 * caught early), checks the request line, the field lines and the framing
 * fields, and for chunked bodies walks the chunk framing. Only what it accepts
 * is handed to llhttp, which then parses the same bytes and decodes the body;
 * its view of method, version, body length and message end must match ours.
 *
 * Memory: one allocation at init holds the head buffer (canonical head, CRLF
 * line ends), the normalized-path buffer, the header array and the Connection
 * token array. Nothing is allocated per request.
 */
#define _POSIX_C_SOURCE 200809L /* inet_pton */

#include "admin/http1/request.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_REQUEST_LINE 8192
#define DEFAULT_MAX_HEADER_BYTES 32768
#define DEFAULT_MAX_HEADERS 100

#define LIMIT_MAX_REQUEST_LINE ((size_t)1 << 20)
#define LIMIT_MAX_HEADER_BYTES ((size_t)1 << 24)
#define LIMIT_MAX_HEADERS ((size_t)1 << 16)

/* A chunk-size line (size plus extensions) longer than this is refused: the
 * extensions are discarded, so there is no reason to read megabytes of them. */
#define CHUNK_LINE_MAX 4096

/* Largest Content-Length or chunk size we take: 2^63 - 1. */
#define BODY_SIZE_MAX ((uint64_t)INT64_MAX)

enum phase { PH_HEAD, PH_BODY, PH_DONE, PH_ERROR };

/* Head scanner states. */
enum head_state {
    HS_START,    /* skipping empty lines before the request line */
    HS_START_CR, /* skipping: CR seen, LF expected */
    HS_RL,       /* in the request line */
    HS_RL_CR,    /* request line: CR seen */
    HS_LINE,     /* at the start of a field line or the final empty line */
    HS_FIELD,    /* in a field line */
    HS_FIELD_CR, /* field line: CR seen */
    HS_END_CR,   /* final empty line: CR seen */
};

/* Chunked-framing scanner states. */
enum chunk_state {
    CS_SIZE0,      /* first hex digit of a chunk size */
    CS_SIZE,       /* more hex digits, ';' or CR */
    CS_EXT_NAME0,  /* after ';': first char of an extension name */
    CS_EXT_NAME,   /* in a name: tchar, '=', ';' or CR */
    CS_EXT_VAL0,   /* after '=': token or quoted-string */
    CS_EXT_TOKEN,  /* in a token value */
    CS_EXT_QUOTED, /* in a quoted-string value */
    CS_EXT_QEND,   /* after the closing quote: ';' or CR */
    CS_SIZE_LF,    /* size line: CR seen */
    CS_DATA,       /* chunk data, p->body_left bytes to go */
    CS_DATA_CR,    /* CR after chunk data */
    CS_DATA_LF,    /* LF after chunk data */
    CS_TR_START,   /* start of a trailer line or the final CRLF */
    CS_TR_NAME,    /* in a trailer field name */
    CS_TR_VALUE,   /* in a trailer field value */
    CS_TR_LF,      /* trailer line: CR seen */
    CS_END_LF,     /* final empty line: CR seen */
};

/* ---- scanning ---- */

/* The index of the first byte of d[i..stop) outside 0x20-0x7E, or stop.
 * Eight bytes a step: a byte b is outside when b - 0x20 borrows (b < 0x20)
 * or b + 1 carries into bit 7 (b >= 0x7F); either sets that byte's top bit
 * in the mask, and the exact byte is then found one at a time. */
static size_t scan_printable(const unsigned char *d, size_t i, size_t stop)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;

    while (stop - i >= 8) {
        uint64_t x;
        memcpy(&x, d + i, 8);
        if (((x - ones * 0x20) | (x + ones) | x) & high)
            break;
        i += 8;
    }
    while (i < stop && d[i] - 0x20u <= 0x7eu - 0x20u)
        i++;
    return i;
}

/* ---- errors ---- */

static int fail(struct h1_req_parser *p, int status, const char *reason)
{
    p->phase = PH_ERROR;
    p->status = status;
    p->reason = reason;
    return -1;
}

/* ---- llhttp callbacks ---- */

static int on_headers_complete(llhttp_t *h)
{
    struct h1_req_parser *p = h->data;

    /* Stop here: the body is fed, and checked, by h1_req_feed_body(). */
    p->head_paused = true;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *h, const char *at, size_t len)
{
    struct h1_req_parser *p = h->data;

    p->cb_bytes += len;
    if (p->cb != NULL && p->cb(p->cb_ctx, at, len) != 0) {
        p->cb_failed = true;
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *h)
{
    struct h1_req_parser *p = h->data;

    /* Stop at the message end, whatever follows belongs to the next one. */
    p->msg_complete = true;
    return HPE_PAUSED;
}

static const llhttp_settings_t http_settings = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* llhttp's reason for its last error, for p->reason. */
static const char *http_reason(const struct h1_req_parser *p, const char *fallback)
{
    const char *r = llhttp_get_error_reason(&p->http);

    return (r != NULL && r[0] != '\0') ? r : fallback;
}

/* ---- life cycle ---- */

void h1_req_limits_default(struct h1_req_limits *lim)
{
    lim->max_request_line = DEFAULT_MAX_REQUEST_LINE;
    lim->max_header_bytes = DEFAULT_MAX_HEADER_BYTES;
    lim->max_headers = DEFAULT_MAX_HEADERS;
    lim->max_body_bytes = 0;
    lim->merge_slashes = true;
}

int h1_req_parser_setup(struct h1_req_parser *p, const struct h1_req_limits *lim)
{
    size_t hdrs_size, conn_size;

    memset(p, 0, sizeof(*p));
    h1_req_limits_default(&p->lim);
    if (lim != NULL) {
        if (lim->max_request_line != 0)
            p->lim.max_request_line = lim->max_request_line;
        if (lim->max_header_bytes != 0)
            p->lim.max_header_bytes = lim->max_header_bytes;
        if (lim->max_headers != 0)
            p->lim.max_headers = lim->max_headers;
        p->lim.max_body_bytes = lim->max_body_bytes;
        p->lim.merge_slashes = lim->merge_slashes;
    }
    /* Until it has its block, every feed fails instead of touching NULL buffers. */
    p->phase = PH_ERROR;
    p->status = 500;
    p->reason = "parser not initialized";
    if (p->lim.max_request_line > LIMIT_MAX_REQUEST_LINE ||
        p->lim.max_header_bytes > LIMIT_MAX_HEADER_BYTES || p->lim.max_headers > LIMIT_MAX_HEADERS)
        return -1;

    /* Request line + its CRLF + header section: the head never outgrows it,
     * because every append is checked against the two limits first. */
    p->head_cap = p->lim.max_request_line + 2 + p->lim.max_header_bytes;
    /* The normalized path is never longer than the target (nor than "/"). */
    p->path_cap = p->lim.max_request_line + 2;
    hdrs_size = p->lim.max_headers * sizeof(struct h1_header);
    conn_size = H1_REQ_MAX_CONN_TOKENS * sizeof(struct h1_slice);
    p->mem_size = hdrs_size + conn_size + p->head_cap + p->path_cap;
    return 0;
}

int h1_req_parser_init(struct h1_req_parser *p, const struct h1_req_limits *lim)
{
    char *mem;

    if (h1_req_parser_setup(p, lim) < 0)
        return -1;
    mem = malloc(p->mem_size);
    if (mem == NULL)
        return -1;
    h1_req_give_mem(p, mem);
    h1_req_reset(p);
    return 0;
}

void *h1_req_take_mem(struct h1_req_parser *p)
{
    void *mem = p->mem;

    p->mem = NULL;
    p->hdrs = NULL;
    p->conn = NULL;
    p->head = NULL;
    p->path = NULL;
    p->req.headers = NULL;
    p->req.connection = NULL;
    return mem;
}

void h1_req_give_mem(struct h1_req_parser *p, void *mem)
{
    char *m = mem;
    size_t hdrs_size = p->lim.max_headers * sizeof(struct h1_header);
    size_t conn_size = H1_REQ_MAX_CONN_TOKENS * sizeof(struct h1_slice);

    p->mem = m;
    p->hdrs = (struct h1_header *)(void *)m;
    p->conn = (struct h1_slice *)(void *)(m + hdrs_size);
    p->head = m + hdrs_size + conn_size;
    p->path = p->head + p->head_cap;
    p->req.headers = p->hdrs;
    p->req.connection = p->conn;
}

void h1_req_reset(struct h1_req_parser *p)
{
    /* llhttp_init rather than llhttp_reset: an errored llhttp stays errored
     * until it is initialized again. */
    llhttp_init(&p->http, HTTP_REQUEST, &http_settings);
    p->http.data = p;

    memset(&p->req, 0, sizeof(p->req));
    p->req.headers = p->hdrs;
    p->req.connection = p->conn;
    p->req.path = "";
    p->status = 0;
    p->reason = NULL;

    p->phase = PH_HEAD;
    p->hs = HS_START;
    p->cs = CS_SIZE0;
    p->head_len = 0;
    p->line_off = 0;
    p->rl_len = 0;
    p->hdr_bytes = 0;
    p->in_method = true;
    p->confirm_pending = false;
    p->made = false;
    p->body_left = 0;
    p->body_total = 0;
    p->chunk_size = 0;
    p->cline = 0;
    p->tr_bytes = 0;
    p->tr_count = 0;
    p->cb = NULL;
    p->cb_ctx = NULL;
    p->cb_bytes = 0;
    p->cb_failed = false;
    p->msg_complete = false;
    p->head_paused = false;
}

void h1_req_parser_free(struct h1_req_parser *p)
{
    if (p == NULL)
        return;
    free(p->mem);
    p->mem = NULL;
    p->hdrs = NULL;
    p->conn = NULL;
    p->head = NULL;
    p->path = NULL;
    p->head_cap = 0;
    p->path_cap = 0;
    p->phase = PH_ERROR;
    p->status = 500;
    p->reason = "parser freed";
}

/* ---- request line ---- */

static const struct {
    const char *name;
    size_t len;
    llhttp_method_t id;
} methods[] = {
#define H1_METHOD(num, name, string) {#string, sizeof(#string) - 1, (llhttp_method_t)(num)},
    HTTP_METHOD_MAP(H1_METHOD)
#undef H1_METHOD
};

static int method_lookup(const char *s, size_t n, llhttp_method_t *id)
{
    size_t k;

    for (k = 0; k < sizeof(methods) / sizeof(methods[0]); k++) {
        if (methods[k].len == n && memcmp(methods[k].name, s, n) == 0) {
            *id = methods[k].id;
            return 0;
        }
    }
    return -1;
}

/*
 * Checks the authority <s>[0..<n>) = host [ ":" port ], host being reg-name,
 * IPv4 (a reg-name as far as syntax goes) or "[" IPv6 "]". Fills <name> (host
 * without port) and <port> (0 if none). Returns 0 or -1.
 */
static int parse_authority(const char *s, size_t n, bool need_port, struct h1_slice *name,
                           unsigned *port)
{
    size_t i = 0, digits;
    unsigned v = 0;

    if (n == 0)
        return -1;
    if (s[0] == '[') {
        char addr[INET6_ADDRSTRLEN];
        unsigned char bin[16];
        const char *end = memchr(s, ']', n);
        size_t alen;

        if (end == NULL)
            return -1;
        alen = (size_t)(end - s) - 1;
        if (alen == 0 || alen >= sizeof(addr))
            return -1;
        for (i = 1; i <= alen; i++) {
            unsigned char c = (unsigned char)s[i];

            if (h1_hex_value(c) < 0 && c != ':' && c != '.')
                return -1; /* no zone id, no IPvFuture */
        }
        memcpy(addr, s + 1, alen);
        addr[alen] = '\0';
        if (inet_pton(AF_INET6, addr, bin) != 1)
            return -1;
        i = alen + 2;
    } else {
        for (; i < n; i++) {
            unsigned char c = (unsigned char)s[i];

            if (h1_is_regname_char(c)) {
                /* as nginx: ".." has no business in a host name */
                if (c == '.' && i > 0 && s[i - 1] == '.')
                    return -1;
                continue;
            }
            if (c == ':')
                break;
            if (c != '%' || n - i < 3 || h1_hex_value((unsigned char)s[i + 1]) < 0 ||
                h1_hex_value((unsigned char)s[i + 2]) < 0)
                return -1;
            i += 2;
        }
        if (i == 0)
            return -1;
    }
    name->ptr = s;
    name->len = i;
    *port = 0;
    if (i == n)
        return need_port ? -1 : 0;
    if (s[i] != ':')
        return -1;
    i++;
    digits = n - i;
    if (digits == 0 || digits > 5)
        return -1;
    for (; i < n; i++) {
        if (!h1_is_digit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* h1_path_normalize()'s options under <p>'s limits. */
static unsigned path_opts(const struct h1_req_parser *p)
{
    return p->lim.merge_slashes ? H1_PATH_MERGE_SLASHES : 0;
}

/* Classifies the request-target <t>[0..<n>) and fills form, path, query and,
 * for absolute- and authority-form, host. */
static int parse_target(struct h1_req_parser *p, const char *t, size_t n)
{
    struct h1_request *r = &p->req;
    const char *q, *path;
    size_t plen, s;

    if (r->method_id == HTTP_CONNECT) {
        if (parse_authority(t, n, true, &r->host_name, &r->port) < 0)
            return fail(p, 400, "CONNECT needs an authority-form target");
        r->form = H1_TARGET_AUTHORITY;
        r->host.ptr = t;
        r->host.len = n;
        p->path[0] = '\0';
        r->path = p->path;
        r->path_len = 0;
        return 0;
    }
    if (n == 1 && t[0] == '*') {
        if (r->method_id != HTTP_OPTIONS)
            return fail(p, 400, "asterisk-form target is for OPTIONS only");
        r->form = H1_TARGET_ASTERISK;
        p->path[0] = '*';
        p->path[1] = '\0';
        r->path = p->path;
        r->path_len = 1;
        return 0;
    }

    q = memchr(t, '?', n);
    if (t[0] == '/') {
        r->form = H1_TARGET_ORIGIN;
        path = t;
    } else {
        const char *a;
        size_t alen = 0;

        /* absolute-form: scheme "://" authority path-abempty [ "?" query ] */
        s = 0;
        if (h1_is_alpha((unsigned char)t[0])) {
            s = 1;
            while (s < n && (h1_is_alpha((unsigned char)t[s]) || h1_is_digit((unsigned char)t[s]) ||
                             t[s] == '+' || t[s] == '-' || t[s] == '.'))
                s++;
        }
        if (s == 0 || n - s < 3 || memcmp(t + s, "://", 3) != 0)
            return fail(p, 400, "invalid request target");
        if (!h1_ci_eq(t, s, "http") && !h1_ci_eq(t, s, "https"))
            return fail(p, 400, "unsupported scheme in request target");
        a = t + s + 3;
        while (a + alen < t + n && a[alen] != '/' && a[alen] != '?')
            alen++;
        if (parse_authority(a, alen, false, &r->host_name, &r->port) < 0)
            return fail(p, 400, "invalid authority in request target");
        r->form = H1_TARGET_ABSOLUTE;
        r->host.ptr = a;
        r->host.len = alen;
        path = a + alen;
    }
    plen = (size_t)((q != NULL ? q : t + n) - path);
    if (q != NULL) {
        r->query.ptr = q + 1;
        r->query.len = (size_t)(t + n - q - 1);
    }
    if (h1_path_normalize(path, plen, p->path, p->path_cap, path_opts(p), &r->path_found,
                          &r->path_len) < 0)
        return fail(p, 400, "invalid percent-encoding or control character in path");
    r->path = p->path;
    p->raw_path.ptr = path;
    p->raw_path.len = plen;
    return 0;
}

int h1_req_route_path(struct h1_req_parser *p, enum h1_escaped_slashes mode)
{
    struct h1_request *r = &p->req;

    if (r->path_found == 0 || mode == H1_SLASHES_KEEP)
        return 0;
    /* the same bytes normalized once already: only <mode> can refuse them */
    return h1_path_route(p->raw_path.ptr, p->raw_path.len, p->path, p->path_cap, path_opts(p), mode,
                         &r->path_found, &r->path_len) < 0
               ? -1
               : 0;
}

/* The request line is head[0..rl_len): method SP request-target SP version. */
static int parse_request_line(struct h1_req_parser *p)
{
    struct h1_request *r = &p->req;
    const char *l = p->head, *sp1, *sp2, *t, *v;
    size_t n = p->rl_len, tlen, vlen;

    sp1 = memchr(l, ' ', n);
    if (sp1 == NULL)
        return fail(p, 400, "malformed request line");
    if (sp1 == l)
        return fail(p, 400, "invalid method");
    t = sp1 + 1;
    sp2 = memchr(t, ' ', n - (size_t)(t - l));
    if (sp2 == NULL)
        return fail(p, 400, "missing HTTP version");
    if (sp2 == t)
        return fail(p, 400, "empty request target");
    tlen = (size_t)(sp2 - t);
    v = sp2 + 1;
    vlen = n - (size_t)(v - l);

    /* Bytes are 0x20-0x7E already; in the target, no '#' (a fragment is never
     * sent) and no SP (it would have split the line differently). */
    if (memchr(t, '#', tlen) != NULL)
        return fail(p, 400, "fragment in request target");
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || !h1_is_digit((unsigned char)v[5]) ||
        v[6] != '.' || !h1_is_digit((unsigned char)v[7]))
        return fail(p, 400, "malformed HTTP version");
    if (v[5] != '1' || v[7] > '1')
        return fail(p, 505, "unsupported HTTP version");

    r->method.ptr = l;
    r->method.len = (size_t)(sp1 - l);
    /* any token is a method (RFC 9110 9.1); one llhttp does not know is
     * forwarded like any other, and shown to llhttp as GET (the method plays
     * no part in a request's framing) */
    if (method_lookup(l, r->method.len, &r->method_id) < 0) {
        if (!h1_is_token(l, r->method.len))
            return fail(p, 400, "invalid method");
        r->method_id = H1_METHOD_OTHER;
    }
    r->version_major = 1;
    r->version_minor = (unsigned)(v[7] - '0');
    r->target.ptr = t;
    r->target.len = tlen;
    return parse_target(p, t, tlen);
}

/* ---- header section ---- */

/* The field line head[line_off..head_len) is complete (CRLF not yet added). */
static int end_field_line(struct h1_req_parser *p)
{
    const char *line = p->head + p->line_off;
    size_t n = p->head_len - p->line_off, k = 0;
    struct h1_header *h;

    if (p->lim.max_header_bytes - p->hdr_bytes < 2)
        return fail(p, 431, "header section too large");
    p->head[p->head_len++] = '\r';
    p->head[p->head_len++] = '\n';
    p->hdr_bytes += 2;

    while (k < n && h1_is_tchar((unsigned char)line[k]))
        k++;
    if (k == n)
        return fail(p, 400, "header field without colon");
    if (line[k] != ':') {
        if (line[k] == ' ' || line[k] == '\t')
            return fail(p, 400, "whitespace before colon in header field");
        return fail(p, 400, "invalid character in header field name");
    }
    if (k == 0)
        return fail(p, 400, "empty header field name");
    if (p->req.nheaders == p->lim.max_headers)
        return fail(p, 431, "too many header fields");

    h = &p->hdrs[p->req.nheaders++];
    h->name.ptr = line;
    h->name.len = k;
    h->value.ptr = line + k + 1;
    h->value.len = n - k - 1;
    h1_trim_ows(&h->value);
    p->hs = HS_LINE;
    return 0;
}

static int parse_content_length(struct h1_slice v, uint64_t *out)
{
    uint64_t n = 0;
    size_t i;

    if (v.len == 0)
        return -1;
    for (i = 0; i < v.len; i++) {
        unsigned d;

        if (!h1_is_digit((unsigned char)v.ptr[i]))
            return -1;
        d = (unsigned)(v.ptr[i] - '0');
        if (n > (BODY_SIZE_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    *out = n;
    return 0;
}

bool h1_content_type_is_grpc(const char *v, size_t n)
{
    static const char base[] = "application/grpc";
    size_t bl = sizeof(base) - 1;

    if (n < bl || !h1_ci_eq(v, bl, base))
        return false;
    return n == bl || v[bl] == '+' || v[bl] == ';';
}

/* Reads the Connection list <v> into req.connection and the flags. */
static int scan_connection(struct h1_req_parser *p, struct h1_slice v, bool *close, bool *ka,
                           bool *upgrade)
{
    struct h1_slice e;
    size_t pos = 0;

    while (h1_list_next(v, &pos, &e)) {
        if (e.len == 0)
            continue;
        if (!h1_is_token(e.ptr, e.len))
            return fail(p, 400, "invalid Connection header");
        if (p->req.nconnection == H1_REQ_MAX_CONN_TOKENS)
            return fail(p, 400, "too many Connection options");
        p->conn[p->req.nconnection++] = e;
        if (h1_ci_eq(e.ptr, e.len, "close"))
            *close = true;
        else if (h1_ci_eq(e.ptr, e.len, "keep-alive"))
            *ka = true;
        else if (h1_ci_eq(e.ptr, e.len, "upgrade"))
            *upgrade = true;
    }
    return 0;
}

/* What the header fields say about framing and the connection. */
struct head_facts {
    const struct h1_header *host;
    int nhost, ncl, nte, nchunked;
    bool cl_bad, te_bad, te_other, te_last_chunked;
    uint64_t cl;
    bool conn_close, conn_ka, conn_upgrade, has_upgrade;
    bool expect_continue, expect_bad;
    bool grpc;
};

static int collect_facts(struct h1_req_parser *p, struct head_facts *f)
{
    size_t k;

    memset(f, 0, sizeof(*f));
    for (k = 0; k < p->req.nheaders; k++) {
        const struct h1_header *h = &p->hdrs[k];
        const char *nm = h->name.ptr;
        size_t nl = h->name.len;

        if (h1_ci_eq(nm, nl, "host")) {
            f->nhost++;
            f->host = h;
        } else if (h1_ci_eq(nm, nl, "content-length")) {
            f->ncl++;
            if (parse_content_length(h->value, &f->cl) < 0)
                f->cl_bad = true;
        } else if (h1_ci_eq(nm, nl, "transfer-encoding")) {
            struct h1_slice e;
            size_t pos = 0;

            f->nte++;
            while (h1_list_next(h->value, &pos, &e)) {
                if (!h1_is_token(e.ptr, e.len)) {
                    f->te_bad = true; /* empty element, parameters, junk */
                } else if (h1_ci_eq(e.ptr, e.len, "chunked")) {
                    f->nchunked++;
                    f->te_last_chunked = true;
                } else {
                    f->te_other = true;
                    f->te_last_chunked = false;
                }
            }
        } else if (h1_ci_eq(nm, nl, "connection")) {
            if (scan_connection(p, h->value, &f->conn_close, &f->conn_ka, &f->conn_upgrade) < 0)
                return -1;
        } else if (h1_ci_eq(nm, nl, "expect")) {
            if (h1_ci_eq(h->value.ptr, h->value.len, "100-continue"))
                f->expect_continue = true;
            else
                f->expect_bad = true;
        } else if (h1_ci_eq(nm, nl, "upgrade")) {
            if (h->value.len > 0)
                f->has_upgrade = true;
        } else if (h1_ci_eq(nm, nl, "content-type")) {
            f->grpc = h1_content_type_is_grpc(h->value.ptr, h->value.len);
        }
    }
    return 0;
}

/* Cross-checks llhttp's reading of the head with ours. */
static int check_llhttp_head(struct h1_req_parser *p)
{
    struct h1_request *r = &p->req;
    llhttp_errno_t err;
    uint16_t flags;

    p->head_paused = false;
    if (r->method_id == H1_METHOD_OTHER) {
        err = llhttp_execute(&p->http, "GET", 3);
        if (err == HPE_OK)
            err = llhttp_execute(&p->http, p->head + r->method.len, p->head_len - r->method.len);
    } else {
        err = llhttp_execute(&p->http, p->head, p->head_len);
    }
    if (err != HPE_PAUSED || !p->head_paused)
        return fail(p, 400, http_reason(p, "head rejected by llhttp"));
    if (llhttp_get_error_pos(&p->http) != p->head + p->head_len)
        return fail(p, 400, "head length disagreement");
    llhttp_resume(&p->http);

    flags = p->http.flags;
    if (p->http.method != (uint8_t)(r->method_id == H1_METHOD_OTHER ? HTTP_GET : r->method_id) ||
        p->http.http_major != r->version_major || p->http.http_minor != r->version_minor)
        return fail(p, 400, "request line disagreement");
    switch (r->body_kind) {
    case H1_BODY_NONE:
        if (flags & (F_CHUNKED | F_CONTENT_LENGTH))
            return fail(p, 400, "body framing disagreement");
        break;
    case H1_BODY_LENGTH:
        if (!(flags & F_CONTENT_LENGTH) || (flags & F_CHUNKED) ||
            p->http.content_length != r->content_length)
            return fail(p, 400, "body framing disagreement");
        break;
    case H1_BODY_CHUNKED:
        if (!(flags & F_CHUNKED) || (flags & F_CONTENT_LENGTH))
            return fail(p, 400, "body framing disagreement");
        break;
    }
    return 0;
}

void h1_req_made_head(struct h1_req_parser *p)
{
    p->made = true;
}

int h1_req_confirm(struct h1_req_parser *p)
{
    if (p->phase == PH_ERROR)
        return H1_REQ_ERROR;
    if (!p->confirm_pending)
        return 0;
    p->confirm_pending = false;
    if (check_llhttp_head(p) < 0)
        return H1_REQ_ERROR;
    return 0;
}

/* The final empty line arrived: check the head as a whole, then llhttp. */
static int end_head(struct h1_req_parser *p)
{
    struct h1_request *r = &p->req;
    struct head_facts f;
    struct h1_slice hname;
    unsigned hport;

    if (p->lim.max_header_bytes - p->hdr_bytes < 2)
        return fail(p, 431, "header section too large");
    p->head[p->head_len++] = '\r';
    p->head[p->head_len++] = '\n';
    p->hdr_bytes += 2;
    r->head.ptr = p->head;
    r->head.len = p->head_len;

    if (collect_facts(p, &f) < 0)
        return -1;
    r->grpc = f.grpc; /* before the checks: a refused gRPC request is answered as gRPC */

    /* 400s first: the message is malformed. */
    if (f.nhost > 1)
        return fail(p, 400, "more than one Host header");
    if (f.host != NULL &&
        parse_authority(f.host->value.ptr, f.host->value.len, false, &hname, &hport) < 0)
        return fail(p, 400, "invalid Host header");
    if (f.host == NULL && r->version_minor == 1)
        return fail(p, 400, "missing Host header");
    if (f.ncl > 1)
        return fail(p, 400, "repeated Content-Length");
    if (f.cl_bad)
        return fail(p, 400, "invalid Content-Length");
    if (f.nte > 0 && f.ncl > 0)
        return fail(p, 400, "Content-Length with Transfer-Encoding");
    if (f.nte > 0 && r->version_minor == 0)
        return fail(p, 400, "Transfer-Encoding in an HTTP/1.0 request");
    if (f.nte > 0 && (f.te_bad || f.nchunked != 1 || !f.te_last_chunked))
        return fail(p, 400, "invalid Transfer-Encoding");
    if (r->method_id == HTTP_CONNECT && (f.nte > 0 || f.ncl > 0))
        return fail(p, 400, "CONNECT request with a body");
    /* Then what is well-formed but refused. */
    if (f.nte > 0 && f.te_other)
        return fail(p, 501, "unsupported transfer coding");
    if (f.ncl > 0 && p->lim.max_body_bytes != 0 && f.cl > p->lim.max_body_bytes)
        return fail(p, 413, "request body too large");
    if (f.expect_bad)
        return fail(p, 417, "unsupported expectation");

    if (r->form == H1_TARGET_ORIGIN || r->form == H1_TARGET_ASTERISK) {
        if (f.host != NULL) {
            r->host = f.host->value;
            r->host_name = hname;
            r->port = hport;
        }
    }
    if (r->version_minor == 1)
        r->keep_alive = !f.conn_close;
    else
        r->keep_alive = f.conn_ka && !f.conn_close;
    if (r->method_id == HTTP_CONNECT)
        r->keep_alive = false;
    r->upgrade = r->version_minor == 1 && f.conn_upgrade && f.has_upgrade;
    r->expect_continue = r->version_minor == 1 && f.expect_continue;
    if (f.nte > 0) {
        r->body_kind = H1_BODY_CHUNKED;
    } else if (f.ncl > 0) {
        r->body_kind = H1_BODY_LENGTH;
        r->content_length = f.cl;
    } else {
        r->body_kind = H1_BODY_NONE;
    }

    /* a head with body bytes is checked now: llhttp decodes the body; one
     * without (no body, or Content-Length: 0) waits for h1_req_confirm(),
     * before it goes upstream */
    p->confirm_pending = !p->made && (r->body_kind == H1_BODY_NONE ||
                                      (r->body_kind == H1_BODY_LENGTH && r->content_length == 0));
    if (!p->confirm_pending && !p->made && check_llhttp_head(p) < 0)
        return -1;

    p->body_left = r->content_length;
    p->phase = p->confirm_pending ? PH_DONE : PH_BODY;
    return 0;
}

/* The request line ended (its terminator consumed). */
static int end_request_line(struct h1_req_parser *p)
{
    p->head[p->head_len++] = '\r';
    p->head[p->head_len++] = '\n';
    p->hs = HS_LINE;
    return parse_request_line(p);
}

/* Where the first byte of <v>[0..<n>) that a line may not hold is (or
 * the total length), for the request line (within <stop> bytes, then
 * *method tells whether the method is still being read) or a field line;
 * *why names that byte. */
static size_t first_bad(const struct h1_slice *v, size_t n, bool rl, bool *method, size_t stop,
                        const char **why)
{
    size_t seen = 0;

    for (size_t k = 0; k < n && seen < stop; k++) {
        const unsigned char *d = (const unsigned char *)v[k].ptr;
        size_t i = 0, end = stop - seen < v[k].len ? stop - seen : v[k].len;

        if (rl) {
            for (; *method && i < end; i++) {
                if (d[i] == ' ')
                    *method = false;
                else if (!h1_is_tchar(d[i]))
                    break;
            }
            if (!*method)
                i = scan_printable(d, i, end);
            if (i < end) {
                *why = d[i] < 0x20 || d[i] > 0x7e ? "invalid character in request line"
                                                  : "invalid method";
                return seen + i;
            }
        } else {
            i = scan_printable(d, 0, end);
            while (i < end && h1_is_field_byte(d[i]))
                i = scan_printable(d, i + 1, end);
            if (i < end) {
                *why = "invalid character in header field";
                return seen + i;
            }
        }
        seen += end;
    }
    return seen;
}

/* The pieces <v>[0..<n>) of one line holding no CR or LF, taken as
 * h1_req_feed_head() takes them followed by CRLF (the same head, limits,
 * errors and reasons; test_request.c holds the two to each other): the
 * request line first, then field lines. */
/* h1_req_put_line(); <checked>: a field line whose every byte is one it
 * may hold (h1_req_put_checked_line()), so only its length is measured. */
static int put_line(struct h1_req_parser *p, const struct h1_slice *v, size_t n, bool checked)
{
    size_t total = 0, room, bad;
    bool rl = p->hs == HS_START, method = p->in_method;
    const char *why = NULL;

    if (p->phase != PH_HEAD || (!rl && p->hs != HS_LINE)) {
        if (p->phase != PH_ERROR)
            fail(p, 500, "head fed outside the head phase");
        return H1_REQ_ERROR;
    }
    for (size_t k = 0; k < n; k++)
        total += v[k].len;
    if (!total) /* an empty line: skipped before the request line, else the end */
        return rl ? H1_REQ_AGAIN : h1_req_put_end(p);
    if (rl) {
        /* the byte past the room decides too: a bad one is a 400, else a 414 */
        room = p->lim.max_request_line - p->rl_len;
        bad = first_bad(v, n, true, &method, room < total ? room + 1 : total, &why);
        if (why)
            return fail(p, 400, why);
        if (total > room)
            return fail(p, 414, "request line too long");
    } else {
        size_t k = 0;

        while (!v[k].len) /* total > 0: a piece has a byte */
            k++;
        if (v[k].ptr[0] == ' ' || v[k].ptr[0] == '\t')
            return fail(p, 400, "obsolete line folding");
        /* the run of field bytes is measured whole, then its first bad byte */
        room = p->lim.max_header_bytes - p->hdr_bytes;
        bad = checked ? total : first_bad(v, n, false, &method, total, &why);
        if (bad > room)
            return fail(p, 431, "header section too large");
        if (why)
            return fail(p, 400, why);
        p->line_off = p->head_len;
    }
    for (size_t k = 0; k < n; k++) {
        memcpy(p->head + p->head_len, v[k].ptr, v[k].len);
        p->head_len += v[k].len;
    }
    if (rl) {
        p->in_method = method;
        p->rl_len += total;
        return end_request_line(p) < 0 ? H1_REQ_ERROR : H1_REQ_AGAIN;
    }
    p->hdr_bytes += total;
    return end_field_line(p) < 0 ? H1_REQ_ERROR : H1_REQ_AGAIN;
}

int h1_req_put_line(struct h1_req_parser *p, const struct h1_slice *v, size_t n)
{
    return put_line(p, v, n, false);
}

int h1_req_put_checked_line(struct h1_req_parser *p, const struct h1_slice *v, size_t n)
{
    return put_line(p, v, n, true);
}

int h1_req_put_end(struct h1_req_parser *p)
{
    if (p->phase != PH_HEAD) {
        if (p->phase != PH_ERROR)
            fail(p, 500, "head fed outside the head phase");
        return H1_REQ_ERROR;
    }
    if (p->hs != HS_LINE)
        return H1_REQ_AGAIN; /* no request line yet: an empty line before one */
    return end_head(p) < 0 ? H1_REQ_ERROR : H1_REQ_HEAD;
}

int h1_req_feed_head(struct h1_req_parser *p, const char *data, size_t len, size_t *consumed)
{
    const unsigned char *d = (const unsigned char *)data;
    size_t i = 0;

    *consumed = 0;
    if (p->phase != PH_HEAD) {
        if (p->phase != PH_ERROR)
            fail(p, 500, "head fed outside the head phase");
        return H1_REQ_ERROR;
    }

    while (i < len) {
        unsigned char c = d[i];

        switch (p->hs) {
        case HS_START:
            if (c == '\r') {
                p->hs = HS_START_CR;
            } else if (c != '\n') {
                p->hs = HS_RL;
                continue; /* c is the request line's first byte */
            }
            i++;
            break;

        case HS_START_CR:
            if (c != '\n') {
                fail(p, 400, "CR without LF");
                goto out_fail;
            }
            p->hs = HS_START;
            i++;
            break;

        case HS_RL: {
            /* Scan a run of request-line bytes (0x20-0x7E, method bytes
             * tchar), at most up to the limit, then copy it in one go. The
             * first offending byte decides, wherever the input was cut. */
            size_t start = i, room = p->lim.max_request_line - p->rl_len;
            size_t stop = len - i > room ? i + room : len;
            bool in_method = p->in_method;

            for (; in_method && i < stop; i++) {
                c = d[i];
                if (c == ' ')
                    in_method = false;
                else if (!h1_is_tchar(c))
                    break;
            }
            if (!in_method)
                i = scan_printable(d, i, stop);
            p->in_method = in_method;
            memcpy(p->head + p->head_len, d + start, i - start);
            p->head_len += i - start;
            p->rl_len += i - start;
            if (i == len)
                break;
            c = d[i];
            if (c == '\r' || c == '\n') {
                i++;
                if (c == '\r') {
                    p->hs = HS_RL_CR;
                    break;
                }
                if (end_request_line(p) < 0)
                    goto out_fail;
                break;
            }
            if (c < 0x20 || c > 0x7e)
                fail(p, 400, "invalid character in request line");
            else if (in_method && c != ' ' && !h1_is_tchar(c))
                fail(p, 400, "invalid method");
            else
                fail(p, 414, "request line too long");
            goto out_fail;
        }

        case HS_RL_CR:
            if (c != '\n') {
                fail(p, 400, "CR without LF");
                goto out_fail;
            }
            i++;
            if (end_request_line(p) < 0)
                goto out_fail;
            break;

        case HS_LINE:
            if (c == '\r') {
                p->hs = HS_END_CR;
                i++;
                break;
            }
            if (c == '\n') {
                i++;
                goto out_head;
            }
            if (c == ' ' || c == '\t') {
                fail(p, 400, "obsolete line folding");
                goto out_fail;
            }
            p->line_off = p->head_len;
            p->hs = HS_FIELD;
            break;

        case HS_FIELD: {
            size_t start = i, n;

            while (i < len && h1_is_field_byte(d[i])) /* stops at CR and LF too */
                i++;
            n = i - start;
            if (n > p->lim.max_header_bytes - p->hdr_bytes) {
                i = start + (p->lim.max_header_bytes - p->hdr_bytes); /* the first byte over */
                fail(p, 431, "header section too large");
                goto out_fail;
            }
            memcpy(p->head + p->head_len, d + start, n);
            p->head_len += n;
            p->hdr_bytes += n;
            if (i == len)
                break;
            c = d[i];
            if (c == '\r') {
                p->hs = HS_FIELD_CR;
                i++;
            } else if (c == '\n') {
                i++;
                if (end_field_line(p) < 0)
                    goto out_fail;
            } else {
                fail(p, 400, "invalid character in header field");
                goto out_fail;
            }
            break;
        }

        case HS_FIELD_CR:
            if (c != '\n') {
                fail(p, 400, "CR without LF");
                goto out_fail;
            }
            i++;
            if (end_field_line(p) < 0)
                goto out_fail;
            break;

        case HS_END_CR:
            if (c != '\n') {
                fail(p, 400, "CR without LF");
                goto out_fail;
            }
            i++;
            goto out_head;
        }
    }
    *consumed = len;
    return H1_REQ_AGAIN;

out_head:
    *consumed = i;
    if (end_head(p) < 0)
        return H1_REQ_ERROR;
    return H1_REQ_HEAD;

out_fail:
    *consumed = i;
    return H1_REQ_ERROR;
}

/* ---- body ---- */

/* A chunk size is complete: count it against max_body_bytes. */
static int chunk_size_done(struct h1_req_parser *p)
{
    if (p->chunk_size > UINT64_MAX - p->body_total)
        return fail(p, 413, "request body too large");
    p->body_total += p->chunk_size;
    if (p->lim.max_body_bytes != 0 && p->body_total > p->lim.max_body_bytes)
        return fail(p, 413, "request body too large");
    return 0;
}

/*
 * Walks the chunked framing in <d>[0..<len>). Stops at the end of the data or
 * of the message; *take gets the bytes walked, *data_bytes how many of them
 * were chunk data, *done whether the message ended, and *to_http how many of
 * the first bytes llhttp should see: all but the trailer section, which only
 * we check (llhttp would treat trailer fields named Content-Length,
 * Connection, ... like header fields). Returns 0 or -1 (failed).
 */
static int scan_chunked(struct h1_req_parser *p, const unsigned char *d, size_t len, size_t *take,
                        uint64_t *data_bytes, bool *done, size_t *to_http)
{
    size_t i = 0;

    *data_bytes = 0;
    *done = false;
    *to_http = p->cs >= CS_TR_START ? 0 : len;
    while (i < len) {
        unsigned char c = d[i];

        if (p->cs <= CS_SIZE_LF && ++p->cline > CHUNK_LINE_MAX) {
            fail(p, 400, "chunk size line too long");
            goto out_fail;
        }
        if (p->cs >= CS_TR_START && ++p->tr_bytes > p->lim.max_header_bytes) {
            fail(p, 431, "trailer section too large");
            goto out_fail;
        }

        switch (p->cs) {
        case CS_SIZE0:
            if (h1_hex_value(c) < 0) {
                fail(p, 400, "invalid chunk size");
                goto out_fail;
            }
            p->chunk_size = (uint64_t)h1_hex_value(c);
            p->cs = CS_SIZE;
            break;

        case CS_SIZE:
            if (h1_hex_value(c) >= 0) {
                if (p->chunk_size > (BODY_SIZE_MAX >> 4)) {
                    fail(p, 400, "chunk size overflow");
                    goto out_fail;
                }
                p->chunk_size = p->chunk_size << 4 | (uint64_t)h1_hex_value(c);
                break;
            }
            if (c != ';' && c != '\r') {
                fail(p, 400, "invalid chunk size");
                goto out_fail;
            }
            if (chunk_size_done(p) < 0)
                goto out_fail;
            p->cs = c == ';' ? CS_EXT_NAME0 : CS_SIZE_LF;
            break;

        case CS_EXT_NAME0:
            if (!h1_is_tchar(c)) {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            p->cs = CS_EXT_NAME;
            break;

        case CS_EXT_NAME:
            if (h1_is_tchar(c))
                break;
            if (c == '=') {
                p->cs = CS_EXT_VAL0;
            } else if (c == ';') {
                p->cs = CS_EXT_NAME0;
            } else if (c == '\r') {
                p->cs = CS_SIZE_LF;
            } else {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            break;

        case CS_EXT_TOKEN:
            /* No ';' after a token value: llhttp 8.1 consumes that ';' twice
             * and fails on the next extension, so the two would disagree. */
            if (h1_is_tchar(c))
                break;
            if (c == '\r') {
                p->cs = CS_SIZE_LF;
            } else {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            break;

        case CS_EXT_VAL0:
            if (h1_is_tchar(c)) {
                p->cs = CS_EXT_TOKEN;
            } else if (c == '"') {
                p->cs = CS_EXT_QUOTED;
            } else {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            break;

        case CS_EXT_QUOTED:
            /* qdtext; llhttp has no quoted-pair, so neither do we */
            if (c == '"')
                p->cs = CS_EXT_QEND;
            else if (c == '\\' || !h1_is_field_byte(c)) {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            break;

        case CS_EXT_QEND:
            if (c == ';') {
                p->cs = CS_EXT_NAME0;
            } else if (c == '\r') {
                p->cs = CS_SIZE_LF;
            } else {
                fail(p, 400, "invalid chunk extension");
                goto out_fail;
            }
            break;

        case CS_SIZE_LF:
            if (c != '\n') {
                fail(p, 400, "chunk size line without CRLF");
                goto out_fail;
            }
            p->cline = 0;
            if (p->chunk_size == 0) {
                p->cs = CS_TR_START;
                *to_http = i + 1; /* llhttp stops after the last-chunk line */
            } else {
                p->body_left = p->chunk_size;
                p->cs = CS_DATA;
            }
            break;

        case CS_DATA: {
            size_t n = len - i;

            if (n > p->body_left)
                n = (size_t)p->body_left;
            p->body_left -= n;
            *data_bytes += n;
            i += n;
            if (p->body_left == 0)
                p->cs = CS_DATA_CR;
            continue;
        }

        case CS_DATA_CR:
            if (c != '\r') {
                fail(p, 400, "chunk data without CRLF");
                goto out_fail;
            }
            p->cs = CS_DATA_LF;
            break;

        case CS_DATA_LF:
            if (c != '\n') {
                fail(p, 400, "chunk data without CRLF");
                goto out_fail;
            }
            p->cs = CS_SIZE0;
            break;

        case CS_TR_START:
            if (c == '\r') {
                p->cs = CS_END_LF;
            } else if (h1_is_tchar(c)) {
                if (++p->tr_count > p->lim.max_headers) {
                    fail(p, 431, "too many trailer fields");
                    goto out_fail;
                }
                p->cs = CS_TR_NAME;
            } else {
                fail(p, 400, "invalid trailer field");
                goto out_fail;
            }
            break;

        case CS_TR_NAME:
            if (c == ':') {
                p->cs = CS_TR_VALUE;
            } else if (!h1_is_tchar(c)) {
                fail(p, 400, "invalid trailer field name");
                goto out_fail;
            }
            break;

        case CS_TR_VALUE:
            if (c == '\r') {
                p->cs = CS_TR_LF;
            } else if (!h1_is_field_byte(c)) {
                fail(p, 400, "invalid character in trailer field");
                goto out_fail;
            }
            break;

        case CS_TR_LF:
            if (c != '\n') {
                fail(p, 400, "trailer field without CRLF");
                goto out_fail;
            }
            p->cs = CS_TR_START;
            break;

        case CS_END_LF:
            if (c != '\n') {
                fail(p, 400, "chunked body without final CRLF");
                goto out_fail;
            }
            *take = i + 1;
            *done = true;
            return 0;
        }
        i++;
    }
    *take = len;
    return 0;

out_fail:
    *take = i;
    return -1;
}

/* Feeds <data>[0..<len>) to llhttp and checks that it agrees: with <last>
 * the message must end exactly at the last byte, else it must not end.
 * Returns 0 or -1 (failed). */
static int feed_http(struct h1_req_parser *p, const char *data, size_t len, bool last)
{
    llhttp_errno_t err;
    bool agrees;

    p->msg_complete = false;
    err = llhttp_execute(&p->http, data, len);
    if (p->cb_failed)
        return fail(p, 500, "body consumer failed");
    if (last)
        agrees =
            err == HPE_PAUSED && p->msg_complete && llhttp_get_error_pos(&p->http) == data + len;
    else
        agrees = err == HPE_OK && !p->msg_complete;
    if (!agrees)
        return fail(p, 400,
                    err != HPE_OK && err != HPE_PAUSED ? http_reason(p, "body rejected by llhttp")
                                                       : "body framing disagreement");
    return 0;
}

int h1_req_feed_body(struct h1_req_parser *p, const char *data, size_t len, size_t *consumed,
                     h1_req_body_cb cb, void *ctx)
{
    static const char crlf[] = "\r\n";
    size_t take, to_http;
    uint64_t data_bytes;
    bool done;
    int rc = 0;

    *consumed = 0;
    switch (p->phase) {
    case PH_BODY:
        break;
    case PH_DONE:
        return H1_REQ_DONE;
    case PH_ERROR:
        return H1_REQ_ERROR;
    default:
        fail(p, 500, "body fed before the head");
        return H1_REQ_ERROR;
    }

    if (p->req.body_kind == H1_BODY_LENGTH) {
        take = len < p->body_left ? len : (size_t)p->body_left;
        p->body_left -= take;
        data_bytes = take;
        done = p->body_left == 0;
        to_http = take;
    } else if (scan_chunked(p, (const unsigned char *)data, len, &take, &data_bytes, &done,
                            &to_http) < 0) {
        *consumed = take;
        return H1_REQ_ERROR;
    }
    *consumed = take;

    /* What we accepted goes to llhttp, which decodes it; it must see the
     * same data bytes and the same message end as we did. */
    p->cb = cb;
    p->cb_ctx = ctx;
    p->cb_bytes = 0;
    if (to_http > 0)
        rc = feed_http(p, data, to_http, done && p->req.body_kind == H1_BODY_LENGTH);
    /* The trailer section and the final CRLF were ours alone (to_http stops
     * after the last-chunk line): llhttp gets a bare final CRLF instead. */
    if (rc == 0 && done && p->req.body_kind == H1_BODY_CHUNKED)
        rc = feed_http(p, crlf, 2, true);
    p->cb = NULL;
    p->cb_ctx = NULL;
    if (rc == 0 && p->cb_bytes != data_bytes)
        rc = fail(p, 400, "body length disagreement");
    if (rc < 0)
        return H1_REQ_ERROR;
    if (done) {
        p->phase = PH_DONE;
        return H1_REQ_DONE;
    }
    return H1_REQ_AGAIN;
}

const struct h1_header *h1_request_header(const struct h1_request *req, const char *name)
{
    size_t k, n = strlen(name);

    for (k = 0; k < req->nheaders; k++) {
        const struct h1_header *h = &req->headers[k];
        size_t i;

        if (h->name.len != n)
            continue;
        for (i = 0; i < n; i++)
            if (h1_lower((unsigned char)h->name.ptr[i]) != h1_lower((unsigned char)name[i]))
                break;
        if (i == n)
            return h;
    }
    return NULL;
}

int64_t h1_max_forwards(const struct h1_request *req)
{
    int64_t v = -1;

    if (req->method_id != HTTP_OPTIONS && req->method_id != HTTP_TRACE)
        return -1;
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct h1_slice *val = &req->headers[i].value;
        int64_t x = 0;

        if (!h1_name_is(&req->headers[i].name, "max-forwards"))
            continue;
        if (v >= 0 || val->len == 0)
            return -1;
        for (size_t k = 0; k < val->len; k++) {
            if (val->ptr[k] < '0' || val->ptr[k] > '9')
                return -1;
            if (x < 1000000000) /* the digits past 10^9 change nothing */
                x = x * 10 + (val->ptr[k] - '0');
        }
        v = x;
    }
    return v;
}
