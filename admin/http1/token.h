/*
 * admin/http1/token.h - the character classes of HTTP/1.1 (RFC 9110 5.6.2,
 * RFC 3986 2) and the small helpers every reader of field names and field
 * values needs: case-insensitive comparison, list elements, OWS trimming and
 * the names of the hop-by-hop and framing fields.
 *
 * The classes are asked once per byte by the request and response parsers,
 * so they are static inline over tables that token.c defines once. Nothing
 * here allocates, logs or keeps state.
 */
#ifndef SY_ADMIN_HTTP1_TOKEN_H
#define SY_ADMIN_HTTP1_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A borrowed run of bytes, not NUL-terminated. ptr is NULL when absent. */
struct h1_slice {
    const char *ptr;
    size_t len;
};

/* A field line: its name as sent (case kept) and its value. The request
 * parser trims values of leading and trailing SP/HTAB; the response parser
 * leaves them as llhttp gives them (leading OWS dropped). */
struct h1_header {
    struct h1_slice name;
    struct h1_slice value;
};

/*
 * ASCII class bitmaps, as nginx keeps them: bit (c & 31) of word (c >> 5) is
 * set when byte c (< 0x80) belongs to the class. Bytes >= 0x80 belong to none.
 */
extern const uint32_t h1_tchar_map[4];      /* ALPHA DIGIT ! # $ % & ' * + - . ^ _ ` | ~ */
extern const uint32_t h1_unreserved_map[4]; /* ALPHA DIGIT - . _ ~ */
extern const uint32_t h1_regname_map[4];    /* unreserved and sub-delims ! $ & ' ( ) * + , ; = */
/* field-content bytes: VCHAR, obs-text, SP, HTAB (no other CTL, no DEL) */
extern const unsigned char h1_field_byte_map[256];

static inline bool h1_in_map(const uint32_t *map, unsigned char c)
{
    return c < 0x80 && (map[c >> 5] >> (c & 31) & 1) != 0;
}

/* RFC 9110 tchar: the bytes of a token (methods, field names, codings). */
static inline bool h1_is_tchar(unsigned char c)
{
    return h1_in_map(h1_tchar_map, c);
}

/* RFC 3986 unreserved: the bytes a path may carry percent-encoded or not. */
static inline bool h1_is_unreserved(unsigned char c)
{
    return h1_in_map(h1_unreserved_map, c);
}

/* RFC 3986 reg-name bytes, '%' excepted (escapes are checked apart). */
static inline bool h1_is_regname_char(unsigned char c)
{
    return h1_in_map(h1_regname_map, c);
}

/* A byte a field value may hold (RFC 9110 5.5 field-content, plus SP/HTAB). */
static inline bool h1_is_field_byte(unsigned char c)
{
    return h1_field_byte_map[c] != 0;
}

static inline bool h1_is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool h1_is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* The value of hex digit <c>, or -1. */
static inline int h1_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* ASCII lower case, whatever the locale says. */
static inline unsigned char h1_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

/* <src>[0..<n>) into <dst> with A-Z in lower case (h1_lower each byte),
 * eight bytes a step: a byte's top bit in <up> is set when it is ASCII,
 * at least 'A' (adding 0x80 - 'A' carries into bit 7) and not past 'Z'
 * (adding 0x7f - 'Z' does not); shifted down two bits it is the 0x20 to
 * add. No carry crosses a byte: the low seven bits plus either constant
 * stay under 0x100. */
static inline void h1_lower_copy(char *dst, const char *src, size_t n)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    size_t i = 0;

    for (; n - i >= 8; i += 8) {
        uint64_t x, low, up;
        memcpy(&x, src + i, 8);
        low = x & ~high;
        up = ~x & (low + ones * (0x80 - 'A')) & ~(low + ones * (0x7f - 'Z')) & high;
        x |= up >> 2;
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++)
        dst[i] = (char)h1_lower((unsigned char)src[i]);
}

/* Is <s>[0..<n>) 1*tchar? */
static inline bool h1_is_token(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (!h1_is_tchar((unsigned char)s[i]))
            return false;
    return n > 0;
}

/* Does <s>[0..<n>) equal the lower-case literal <lit>, ignoring case? */
static inline bool h1_ci_eq(const char *s, size_t n, const char *lit)
{
    size_t i;

    if (n != strlen(lit))
        return false;
    for (i = 0; i < n; i++)
        if (h1_lower((unsigned char)s[i]) != (unsigned char)lit[i])
            return false;
    return true;
}

/* Is the field name <name> the lower-case literal <lit>, ignoring case? */
static inline bool h1_name_is(const struct h1_slice *name, const char *lit)
{
    return h1_ci_eq(name->ptr, name->len, lit);
}

/* Are <a> and <b> the same name, ignoring case? */
static inline bool h1_names_eq(const struct h1_slice *a, const struct h1_slice *b)
{
    size_t i;

    if (a->len != b->len)
        return false;
    for (i = 0; i < a->len; i++)
        if (h1_lower((unsigned char)a->ptr[i]) != h1_lower((unsigned char)b->ptr[i]))
            return false;
    return true;
}

/* Trims SP/HTAB (OWS) from both ends of <*s>. */
static inline void h1_trim_ows(struct h1_slice *s)
{
    while (s->len > 0 && (s->ptr[0] == ' ' || s->ptr[0] == '\t')) {
        s->ptr++;
        s->len--;
    }
    while (s->len > 0 && (s->ptr[s->len - 1] == ' ' || s->ptr[s->len - 1] == '\t'))
        s->len--;
}

/*
 * Splits the list <v> at its next ',' (RFC 9110 5.6.1): stores the element,
 * trimmed of OWS (possibly empty), in <*elem> and advances <*pos> (start at
 * 0). Returns false when the list is done. "a,,b" gives "a", "", "b".
 */
static inline bool h1_list_next(struct h1_slice v, size_t *pos, struct h1_slice *elem)
{
    const char *comma;
    size_t start = *pos;

    if (start > v.len)
        return false;
    comma = memchr(v.ptr + start, ',', v.len - start);
    elem->ptr = v.ptr + start;
    elem->len = comma ? (size_t)(comma - elem->ptr) : v.len - start;
    *pos = start + elem->len + 1;
    h1_trim_ows(elem);
    return true;
}

/*
 * The fields that belong to one connection, not to the message: the
 * hop-by-hop fields (RFC 9110 7.6.1), which a proxy never forwards, then
 * the framing fields (RFC 9112 6), which it writes anew for each hop. The
 * one list of them: the gateway drops and re-frames by it, and the config
 * refuses a route that would set one.
 */
enum h1_conn_field {
    H1_CF_CONNECTION,
    H1_CF_KEEP_ALIVE,
    H1_CF_PROXY_CONNECTION,
    H1_CF_TE,
    H1_CF_TRAILER,
    H1_CF_UPGRADE,
    H1_CF_CONTENT_LENGTH, /* the first framing field */
    H1_CF_TRANSFER_ENCODING,
    H1_CF_COUNT
};

/* Each with its name in lower case and its length, which the lookup
 * compares, and as messages spell it. A static table, so that the lookup
 * below knows every length and byte at compile time
 * (tests/admin/http1/test_token.c checks the lengths). */
struct h1_conn_field_name {
    const char *lc;
    size_t len;
    const char *name;
};
static const struct h1_conn_field_name h1_conn_fields[H1_CF_COUNT] = {
    {"connection", 10, "Connection"},
    {"keep-alive", 10, "Keep-Alive"},
    {"proxy-connection", 16, "Proxy-Connection"},
    {"te", 2, "TE"},
    {"trailer", 7, "Trailer"},
    {"upgrade", 7, "Upgrade"},
    {"content-length", 14, "Content-Length"},
    {"transfer-encoding", 17, "Transfer-Encoding"},
};

/* Which of h1_conn_fields <name> is, ignoring case, or -1. Unrolled, the
 * loop is a compare per distinct length for a name not in the list (most
 * names, on every request), as a switch on the length would be. */
static inline int h1_conn_field(const struct h1_slice *name)
{
#pragma GCC unroll 8
    for (int i = 0; i < H1_CF_COUNT; i++)
        if (name->len == h1_conn_fields[i].len &&
            h1_ci_eq(name->ptr, name->len, h1_conn_fields[i].lc))
            return i;
    return -1;
}

/* Is <name> a hop-by-hop field (Connection, Keep-Alive, Proxy-Connection,
 * TE, Trailer, Upgrade), which a proxy never forwards? */
static inline bool h1_is_hop_field(const struct h1_slice *name)
{
    int f = h1_conn_field(name);

    return f >= 0 && f < H1_CF_CONTENT_LENGTH;
}

/* Whether <name> may not be a trailer field, which a proxy therefore
 * drops from the trailers it passes on (RFC 9110 6.5.1: fields for
 * framing, routing, request modifiers, authentication, response control
 * and how to process the content), besides the connection's own fields
 * (h1_conn_field). A backend or a client that merged such a trailer into
 * the head would take it for one sent in the head. */
static inline bool h1_trailer_forbidden(const struct h1_slice *name)
{
    static const char *const names[] = {
        "host",
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "content-type",
        "content-encoding",
        "content-range",
        "content-location",
        "cache-control",
        "expect",
        "max-forwards",
        "pragma",
        "range",
        "if-match",
        "if-none-match",
        "if-modified-since",
        "if-unmodified-since",
        "if-range",
        "age",
        "expires",
        "date",
        "location",
        "retry-after",
        "vary",
        "warning",
        "www-authenticate",
        "proxy-authenticate",
    };

    if (!name->len || name->ptr[0] == ':' || h1_conn_field(name) >= 0)
        return true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (h1_name_is(name, names[i]))
            return true;
    return false;
}

/* Is <name> a framing field (Content-Length, Transfer-Encoding)? */
static inline bool h1_is_framing_field(const struct h1_slice *name)
{
    return h1_conn_field(name) >= H1_CF_CONTENT_LENGTH;
}

#endif /* SY_ADMIN_HTTP1_TOKEN_H */
