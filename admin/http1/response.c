/*
 * admin/http1/response.c - the upstream response parser (see response.h):
 * llhttp's callbacks collect the head into the caller's array, and checks
 * of our own refuse what llhttp is lenient about.
 */
#include "admin/http1/response.h"

#include <string.h>

static int on_status(llhttp_t *hp, const char *at, size_t len)
{
    struct h1_resp *r = hp->data;

    if (!r->status_text.ptr)
        r->status_text.ptr = at;
    r->status_text.len += len;
    return 0;
}

/* Appends <len> bytes at <at> to the trailer field being read, or drops
 * the field when the buffer cannot take it. */
static void tr_add(struct h1_resp *r, const char *at, size_t len)
{
    if (r->tr_over)
        return;
    if (len > sizeof(r->tr) - r->tr_len) {
        r->tr_over = true;
        r->trailers_dropped = true;
        r->tr_len = r->tr_mark;
        return;
    }
    memcpy(r->tr + r->tr_len, at, len);
    r->tr_len += len;
}

/* The trailer field being read, if any, is whole: its line ends. */
static void tr_close(struct h1_resp *r)
{
    if (r->tr_open && !r->tr_over && !r->in_value)
        tr_add(r, ": ", 2); /* a field without a value */
    if (r->tr_open)
        tr_add(r, "\r\n", 2);
    r->tr_open = false;
}

/* A trailer's name: checked as the head's, kept in tr. */
static int on_trailer_field(struct h1_resp *r, const char *at, size_t len)
{
    if (r->in_value || !r->tr_open) {
        tr_close(r);
        r->tr_open = true;
        r->tr_over = false;
        r->tr_mark = r->tr_len;
        r->in_value = false;
    }
    for (size_t i = 0; i < len; i++)
        if (!h1_is_tchar((unsigned char)at[i]))
            return -1;
    tr_add(r, at, len);
    return 0;
}

static int on_field(llhttp_t *hp, const char *at, size_t len)
{
    struct h1_resp *r = hp->data;

    if (r->in_body)
        return on_trailer_field(r, at, len);
    if (r->in_value || r->nhdr == 0) {
        if (r->nhdr == H1_RESP_MAX_HEADERS) {
            r->too_many = true;
            return -1;
        }
        r->hdr[r->nhdr].name.ptr = at;
        r->hdr[r->nhdr].name.len = 0;
        r->hdr[r->nhdr].value.ptr = NULL;
        r->hdr[r->nhdr].value.len = 0;
        r->nhdr++;
        r->in_value = false;
    }
    for (size_t i = 0; i < len; i++) {
        /* a name is a token: llhttp (not strict) lets "Name :" through,
         * which must never reach the client (RFC 9112 5.1) */
        if (!h1_is_tchar((unsigned char)at[i]))
            return -1;
    }
    r->hdr[r->nhdr - 1].name.len += len;
    return 0;
}

static int on_value(llhttp_t *hp, const char *at, size_t len)
{
    struct h1_resp *r = hp->data;
    struct h1_header *h;

    if (r->in_body) {
        if (!r->tr_open)
            return -1;
        if (!r->in_value)
            tr_add(r, ": ", 2);
        tr_add(r, at, len);
        r->in_value = true;
        return 0;
    }
    if (!r->nhdr)
        return -1;
    h = &r->hdr[r->nhdr - 1];
    if (!h->value.ptr)
        h->value.ptr = at;
    else if (at != h->value.ptr + h->value.len)
        return -1; /* obs-fold: the value is not one run of bytes (RFC 9112 5.2: 502) */
    h->value.len += len;
    r->in_value = true;
    return 0;
}

static int on_headers_complete(llhttp_t *hp)
{
    const struct h1_resp *r = hp->data;

    /* llhttp (not strict) takes ": v" as a field with an empty name */
    for (size_t i = 0; i < r->nhdr; i++)
        if (r->hdr[i].name.len == 0)
            return -1;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *hp, const char *at, size_t len)
{
    struct h1_resp *r = hp->data;

    if (r->cb)
        r->cb(r->cb_ctx, at, len);
    return 0;
}

static int on_message_complete(llhttp_t *hp)
{
    struct h1_resp *r = hp->data;

    tr_close(r);
    r->msg_done = true;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_status = on_status,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* At most one Transfer-Encoding, and only "chunked" (see response.h). */
static bool framing_ok(const struct h1_resp *r)
{
    int nte = 0;

    for (size_t i = 0; i < r->nhdr; i++) {
        const struct h1_header *h = &r->hdr[i];
        struct h1_slice v = h->value;

        if (!h1_name_is(&h->name, "transfer-encoding"))
            continue;
        h1_trim_ows(&v);
        if (++nte > 1 || !h1_ci_eq(v.ptr, v.len, "chunked"))
            return false;
    }
    /* and llhttp must have read it so: it takes "chunked\t" for a coding
     * of its own and then reads the body up to the close, where the client
     * would decode chunks */
    return nte == 0 || (r->hp.flags & F_CHUNKED) != 0;
}

/* RFC 9112 4: "HTTP/1.x" SP 3DIGIT SP (or the line end). */
static bool status_line_ok(const char *p, size_t n)
{
    return n >= 13 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1') && p[8] == ' ' &&
           p[9] >= '1' && p[9] <= '9' && p[10] >= '0' && p[10] <= '9' && p[11] >= '0' &&
           p[11] <= '9' && (p[12] == ' ' || p[12] == '\r');
}

/* <r> ready for a new head: every field but the two arrays, which are
 * used only up to nhdr and tr_len. */
static void start(struct h1_resp *r)
{
    llhttp_init(&r->hp, HTTP_RESPONSE, &settings);
    r->hp.data = r;
    r->nhdr = 0;
    r->in_value = false;
    r->too_many = false;
    r->msg_done = false;
    r->trailers_dropped = false;
    r->in_body = false;
    r->tr_len = 0;
    r->tr_mark = 0;
    r->tr_open = false;
    r->tr_over = false;
    r->status = 0;
    r->status_text.ptr = NULL;
    r->status_text.len = 0;
    r->cb = NULL;
    r->cb_ctx = NULL;
}

void h1_resp_init(struct h1_resp *r)
{
    start(r);
}

int h1_resp_parse_head(struct h1_resp *r, const char *data, size_t len, size_t max,
                       size_t *head_len)
{
    llhttp_errno_t err;

    if (len > max)
        len = max;
    start(r);
    err = llhttp_execute(&r->hp, data, len);
    if (err == HPE_PAUSED) {
        *head_len = (size_t)(llhttp_get_error_pos(&r->hp) - data);
        if (!status_line_ok(data, *head_len) || !framing_ok(r))
            return -1;
        r->status = llhttp_get_status_code(&r->hp);
        return 1;
    }
    if (err == HPE_OK)
        return len == max ? -1 : 0;
    return -1;
}

bool h1_resp_keep_alive(const struct h1_resp *r)
{
    if (r->hp.flags & F_CONNECTION_CLOSE)
        return false;
    if (r->hp.http_major == 1 && r->hp.http_minor == 0)
        return (r->hp.flags & F_CONNECTION_KEEP_ALIVE) != 0;
    return true;
}

bool h1_resp_chunked(const struct h1_resp *r)
{
    return (r->hp.flags & F_CHUNKED) != 0;
}

bool h1_resp_needs_eof(const struct h1_resp *r)
{
    return llhttp_message_needs_eof(&r->hp) != 0;
}

void h1_resp_begin_body(struct h1_resp *r)
{
    r->in_body = true;
    r->in_value = false;
    llhttp_resume(&r->hp);
    /* llhttp ends an empty body (Content-Length: 0) only when it next runs,
     * and the next bytes may never come: run it on no input */
    if ((r->hp.flags & F_CONTENT_LENGTH) && r->hp.content_length == 0)
        llhttp_execute(&r->hp, "", 0);
}

int h1_resp_feed_body(struct h1_resp *r, const char *data, size_t len, size_t *used,
                      h1_resp_body_cb cb, void *ctx)
{
    llhttp_errno_t err;

    *used = 0;
    if (r->msg_done)
        return 0;
    r->cb = cb;
    r->cb_ctx = ctx;
    err = llhttp_execute(&r->hp, data, len);
    r->cb = NULL;
    r->cb_ctx = NULL;
    if (err == HPE_OK) {
        *used = len;
        return 0;
    }
    if (err == HPE_PAUSED && r->msg_done) {
        *used = (size_t)(llhttp_get_error_pos(&r->hp) - data);
        return 0;
    }
    return -1;
}

struct h1_slice h1_resp_trailers(const struct h1_resp *r)
{
    return (struct h1_slice){r->tr, r->tr_len};
}

const char *h1_resp_error(const struct h1_resp *r)
{
    return llhttp_errno_name(llhttp_get_errno(&r->hp));
}
