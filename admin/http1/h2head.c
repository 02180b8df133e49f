/*
 * admin/http1/h2head.c - an HTTP/2 request's header list as an HTTP/1.1
 * head, fed to the request parser field by field (h2head.h says why and
 * what is refused).
 */
#include "admin/http1/h2head.h"

#include <string.h>

#include "admin/http1/token.h"

/* The pseudo-header fields a request may carry: the first three are kept
 * (their index in h->off), :scheme is only checked. */
enum { PS_METHOD, PS_PATH, PS_AUTHORITY, PS_SCHEME, PS_COUNT };

static const struct {
    const char *name;
    size_t len;
} pseudo[PS_COUNT] = {
    {":method", 7},
    {":path", 5},
    {":authority", 10},
    {":scheme", 7},
};

static int fail(struct h2h *h, int rc, int status, const char *reason)
{
    h->rc = rc;
    h->status = status;
    h->reason = reason;
    return rc;
}

static int malformed(struct h2h *h, const char *reason)
{
    return fail(h, H2H_MALFORMED, 400, reason);
}

/* Puts the line of pieces <v>[0..<n>) into <p>'s head. */
static int feedv(struct h2h *h, struct h1_req_parser *p, const struct h1_slice *v, size_t n)
{
    if ((h->checked ? h1_req_put_checked_line(p, v, n) : h1_req_put_line(p, v, n)) == H1_REQ_ERROR)
        return fail(h, H2H_ERROR, p->status, p->reason);
    return H2H_OK;
}

/* Whether <v> holds a byte no HTTP/2 field value may (RFC 9113 8.2.1):
 * NUL, CR, LF; or starts or ends with SP or HTAB. */
static bool bad_value(const char *v, size_t n)
{
    if (n && (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        return true;
    return memchr(v, '\0', n) || memchr(v, '\r', n) || memchr(v, '\n', n);
}

/* A field name as HTTP/2 has it: 1*tchar, no upper case. */
static bool good_name(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!h1_is_tchar((unsigned char)s[i]) || (s[i] >= 'A' && s[i] <= 'Z'))
            return false;
    return n > 0;
}

static struct h1_slice side_slice(const struct h2h *h, int ps)
{
    return (struct h1_slice){h->side + h->off[ps], h->vlen[ps]};
}

void h2h_begin(struct h2h *h, struct h1_req_parser *p, char *side, size_t cap)
{
    h1_req_made_head(p);
    memset(h, 0, sizeof(*h));
    h->side = side;
    h->cap = cap;
    h->reason = "";
}

void h2h_checked(struct h2h *h)
{
    h->checked = true;
}

static int take_pseudo(struct h2h *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
    int ps;

    if (h->line)
        return malformed(h, "a pseudo-header field after a regular one");
    for (ps = 0; ps < PS_COUNT; ps++)
        if (nlen == pseudo[ps].len && memcmp(name, pseudo[ps].name, nlen) == 0)
            break;
    if (ps == PS_COUNT)
        return malformed(h, "an unknown pseudo-header field");
    if (h->seen & (1u << ps))
        return malformed(h, "a repeated pseudo-header field");
    h->seen |= 1u << ps;
    switch (ps) {
    case PS_METHOD:
        if (!h->checked && !h1_is_token(value, vlen))
            return malformed(h, "a :method that is not a token");
        if (vlen == 7 && memcmp(value, "CONNECT", 7) == 0)
            return malformed(h, "CONNECT");
        break;
    case PS_PATH:
        for (size_t i = 0; i < vlen; i++)
            if ((unsigned char)value[i] <= 0x20 || value[i] == 0x7f)
                return malformed(h, "a :path with a space or a control byte");
        break;
    case PS_SCHEME:
        if (!(vlen == 4 && memcmp(value, "http", 4) == 0) &&
            !(vlen == 5 && memcmp(value, "https", 5) == 0))
            return malformed(h, "a :scheme other than http and https");
        return H2H_OK;
    default:
        break;
    }
    if (vlen > h->cap - h->len)
        return ps == PS_AUTHORITY ? fail(h, H2H_ERROR, 431, "header section too large")
                                  : fail(h, H2H_ERROR, 414, "request line too long");
    memcpy(h->side + h->len, value, vlen);
    h->off[ps] = h->len;
    h->vlen[ps] = vlen;
    h->len += vlen;
    return H2H_OK;
}

/* The request line and Host, once the pseudo-header fields are all in;
 * <side> keeps :authority only, at its start, for a Host field to be
 * compared with, and the cookie crumbs after it. */
static int write_line(struct h2h *h, struct h1_req_parser *p)
{
    struct h1_slice m = side_slice(h, PS_METHOD), path = side_slice(h, PS_PATH);
    struct h1_slice a = side_slice(h, PS_AUTHORITY);
    unsigned need = 1u << PS_METHOD | 1u << PS_PATH | 1u << PS_SCHEME;
    int rc;

    h->line = true;
    if ((h->seen & need) != need)
        return malformed(h, "a missing :method, :path or :scheme");
    if (!path.len || (path.ptr[0] != '/' && !(path.len == 1 && path.ptr[0] == '*' && m.len == 7 &&
                                              !memcmp(m.ptr, "OPTIONS", 7))))
        return malformed(h, "a :path neither origin-form nor * for OPTIONS");
    {
        const struct h1_slice v[] = {m, {" ", 1}, path, {" HTTP/1.1", 9}};
        if ((rc = feedv(h, p, v, 4)) != H2H_OK)
            return rc;
    }
    if (h->seen & (1u << PS_AUTHORITY)) {
        const struct h1_slice v[] = {{"Host: ", 6}, a};
        if ((rc = feedv(h, p, v, 2)) != H2H_OK)
            return rc;
        memmove(h->side, a.ptr, a.len);
        h->off[PS_AUTHORITY] = 0;
    }
    h->len = h->vlen[PS_AUTHORITY];
    return H2H_OK;
}

/* Adds a cookie crumb to the ones kept, "; " between two. */
static int take_crumb(struct h2h *h, const char *value, size_t vlen)
{
    size_t sep = h->crumbs ? 2 : 0;

    if (!vlen)
        return H2H_OK;
    if (sep + vlen > h->cap - h->len)
        return fail(h, H2H_ERROR, 431, "header section too large");
    memcpy(h->side + h->len, "; ", sep);
    memcpy(h->side + h->len + sep, value, vlen);
    h->len += sep + vlen;
    h->crumbs++;
    return H2H_OK;
}

int h2h_field(struct h2h *h, struct h1_req_parser *p, const char *name, size_t nlen,
              const char *value, size_t vlen)
{
    struct h1_slice n = {name, nlen};
    int rc;

    if (h->rc)
        return h->rc;
    if (!h->checked && bad_value(value, vlen))
        return malformed(h, "a field value with NUL, CR, LF or surrounding whitespace");
    if (nlen && name[0] == ':')
        return take_pseudo(h, name, nlen, value, vlen);
    if (!h->line && (rc = write_line(h, p)) != H2H_OK)
        return rc;
    if (!h->checked && !good_name(name, nlen))
        return malformed(h, "a field name that is not a lower-case token");
    switch (h1_conn_field(&n)) {
    case H1_CF_CONNECTION:
    case H1_CF_KEEP_ALIVE:
    case H1_CF_PROXY_CONNECTION:
    case H1_CF_UPGRADE:
    case H1_CF_TRANSFER_ENCODING:
        return malformed(h, "a connection-specific field");
    case H1_CF_TE:
        if (!h1_ci_eq(value, vlen, "trailers"))
            return malformed(h, "TE other than trailers");
        break;
    case H1_CF_CONTENT_LENGTH:
        h->cl = true;
        break;
    default:
        if (nlen == 6 && memcmp(name, "cookie", 6) == 0)
            return take_crumb(h, value, vlen);
        if (nlen == 4 && memcmp(name, "host", 4) == 0 && (h->seen & (1u << PS_AUTHORITY))) {
            /* the same entity twice is one Host; another one is not (8.3.1) */
            if (vlen != h->vlen[PS_AUTHORITY] || memcmp(value, h->side, vlen))
                return malformed(h, "a Host that differs from :authority");
            return H2H_OK;
        }
        break;
    }
    {
        const struct h1_slice v[] = {n, {": ", 2}, {value, vlen}};
        return feedv(h, p, v, 3);
    }
}

int h2h_end(struct h2h *h, struct h1_req_parser *p, bool body)
{
    int rc;

    if (h->rc)
        return h->rc;
    if (!h->line && (rc = write_line(h, p)) != H2H_OK)
        return rc;
    if (h->crumbs) {
        size_t a = h->vlen[PS_AUTHORITY];
        const struct h1_slice v[] = {{"Cookie: ", 8}, {h->side + a, h->len - a}};
        if ((rc = feedv(h, p, v, 2)) != H2H_OK)
            return rc;
    }
    if (body && !h->cl) {
        const struct h1_slice v[] = {{"Transfer-Encoding: chunked", 26}};
        if ((rc = feedv(h, p, v, 1)) != H2H_OK)
            return rc;
    }
    rc = h1_req_put_end(p);
    if (rc == H1_REQ_ERROR)
        return fail(h, H2H_ERROR, p->status, p->reason);
    if (rc != H1_REQ_HEAD) /* cannot happen: the request line is in */
        return fail(h, H2H_ERROR, 400, "the head did not end");
    return H2H_OK;
}

size_t h2h_fields(char *lines, size_t len, struct h1_header *out, size_t cap)
{
    char *p = lines, *end = lines + len;
    size_t n = 0;

    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p)), *next = eol ? eol + 1 : end;
        char *colon = memchr(p, ':', (size_t)((eol ? eol : end) - p));
        struct h1_slice name, value;
        int cf;

        if (eol && eol > p && eol[-1] == '\r')
            eol--;
        if (!colon || colon == p) {
            p = next;
            continue;
        }
        for (char *q = p; q < colon; q++)
            *q = (char)h1_lower((unsigned char)*q);
        name = (struct h1_slice){p, (size_t)(colon - p)};
        value = (struct h1_slice){colon + 1, (size_t)((eol ? eol : end) - colon - 1)};
        h1_trim_ows(&value);
        p = next;
        cf = h1_conn_field(&name);
        if (cf == H1_CF_CONNECTION || cf == H1_CF_KEEP_ALIVE || cf == H1_CF_PROXY_CONNECTION ||
            cf == H1_CF_UPGRADE || cf == H1_CF_TRANSFER_ENCODING ||
            memchr(value.ptr, '\r', value.len) || memchr(value.ptr, '\0', value.len))
            continue;
        if (n < cap)
            out[n] = (struct h1_header){name, value};
        n++;
    }
    return n;
}
