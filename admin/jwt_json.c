/*
 * jwt_json.c - the JSON of a token's header and claims, parsed in place and
 * without allocating (for adm_jwt_verify, on the workers' request path).
 *
 * Only the top level is located member by member, which is all a JWT check
 * reads; nested values are validated and skipped. Strings are unescaped
 * into the bytes they were written in (an escape is never shorter than what
 * it stands for), so the caller's one buffer holds everything. Strictness is
 * the point: a token two parsers would read differently (duplicate names,
 * invalid UTF-8, lone surrogates, trailing bytes) is refused.
 */
#include <string.h>

#include "admin/jwt_int.h"

struct jscan {
    char *buf;
    size_t p, end; /* read position, end of the text */
    const char **why;
};

static int fail(struct jscan *s, const char *why)
{
    *s->why = why;
    return -1;
}

static void skip_ws(struct jscan *s)
{
    while (s->p < s->end && (s->buf[s->p] == ' ' || s->buf[s->p] == '\t' || s->buf[s->p] == '\n' ||
                             s->buf[s->p] == '\r'))
        s->p++;
}

/* The length of the valid UTF-8 sequence at <u> (<avail> bytes there), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t utf8_seq(const unsigned char *u, size_t avail)
{
    unsigned cp, min;
    size_t n;

    if (u[0] < 0x80)
        return 1;
    if (u[0] >= 0xc2 && u[0] <= 0xdf) {
        n = 2, cp = u[0] & 0x1fu, min = 0x80;
    } else if ((u[0] & 0xf0) == 0xe0) {
        n = 3, cp = u[0] & 0x0fu, min = 0x800;
    } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
        n = 4, cp = u[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (u[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static size_t utf8_put(char *w, unsigned cp)
{
    if (cp < 0x80) {
        w[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        w[0] = (char)(0xc0 | cp >> 6);
        w[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        w[0] = (char)(0xe0 | cp >> 12);
        w[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        w[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    w[0] = (char)(0xf0 | cp >> 18);
    w[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    w[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    w[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Reads "XXXX" (four hex digits) at s->p into <*cp>. */
static int hex4(struct jscan *s, unsigned *cp)
{
    *cp = 0;
    if (s->end - s->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = s->buf[s->p++];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (unsigned)((c | 0x20) - 'a' + 10);
        else
            return -1;
        *cp = *cp << 4 | d;
    }
    return 0;
}

/* The code point of the \u escape whose 'u' was just read, a surrogate pair
 * joined; -1 when it is not one. */
static long unicode_escape(struct jscan *s)
{
    unsigned hi, lo;

    if (hex4(s, &hi) < 0 || (hi >= 0xdc00 && hi <= 0xdfff))
        return -1;
    if (hi < 0xd800 || hi > 0xdbff)
        return hi;
    if (s->end - s->p < 2 || s->buf[s->p] != '\\' || s->buf[s->p + 1] != 'u')
        return -1;
    s->p += 2;
    if (hex4(s, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
        return -1;
    return 0x10000 + ((long)(hi - 0xd800) << 10) + (lo - 0xdc00);
}

/* The byte a one-character escape stands for, or -1. */
static int simple_escape(char e)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *at = e ? strchr(from, e) : NULL;

    return at ? to[at - from] : -1;
}

/* Scans the string whose opening quote is at s->p. With <unescape>, writes
 * it unescaped from the quote's place on, and gives where and how long. */
static int scan_string(struct jscan *s, int unescape, uint16_t *off, uint16_t *len)
{
    size_t start = s->p, w = s->p;

    s->p++;
    for (;;) {
        unsigned char c;

        if (s->p >= s->end)
            return fail(s, "a string is not closed");
        c = (unsigned char)s->buf[s->p];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(s, "a control character in a string");
        if (c == '\\') {
            long cp;
            if (s->end - s->p < 2)
                return fail(s, "a string is not closed");
            s->p += 2;
            if (s->buf[s->p - 1] == 'u') {
                if ((cp = unicode_escape(s)) < 0)
                    return fail(s, "a bad \\u escape (or a lone surrogate)");
                if (unescape)
                    w += utf8_put(s->buf + w, (unsigned)cp);
            } else {
                if ((cp = simple_escape(s->buf[s->p - 1])) < 0)
                    return fail(s, "a bad escape in a string");
                if (unescape)
                    s->buf[w++] = (char)cp;
            }
            continue;
        }
        if (c < 0x80) { /* ASCII, most of a token: moved only once an escape shrank the text */
            if (unescape && w != s->p)
                s->buf[w] = (char)c;
            w++;
            s->p++;
            continue;
        }
        size_t n = utf8_seq((const unsigned char *)s->buf + s->p, s->end - s->p);
        if (!n)
            return fail(s, "a string that is not UTF-8");
        if (unescape)
            memmove(s->buf + w, s->buf + s->p, n);
        w += n;
        s->p += n;
    }
    s->p++;
    if (unescape) {
        *off = (uint16_t)start;
        *len = (uint16_t)(w - start);
    }
    return 0;
}

static int is_digit(const struct jscan *s)
{
    return s->p < s->end && s->buf[s->p] >= '0' && s->buf[s->p] <= '9';
}

static int scan_digits(struct jscan *s)
{
    if (!is_digit(s))
        return fail(s, "a bad number");
    while (is_digit(s))
        s->p++;
    return 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(struct jscan *s)
{
    if (s->buf[s->p] == '-')
        s->p++;
    if (s->p < s->end && s->buf[s->p] == '0')
        s->p++;
    else if (scan_digits(s) < 0)
        return -1;
    if (s->p < s->end && s->buf[s->p] == '.') {
        s->p++;
        if (scan_digits(s) < 0)
            return -1;
    }
    if (s->p < s->end && (s->buf[s->p] | 0x20) == 'e') {
        s->p++;
        if (s->p < s->end && (s->buf[s->p] == '+' || s->buf[s->p] == '-'))
            s->p++;
        if (scan_digits(s) < 0)
            return -1;
    }
    return 0;
}

static int scan_literal(struct jscan *s, const char *lit)
{
    size_t n = strlen(lit);

    if (s->end - s->p < n || memcmp(s->buf + s->p, lit, n) != 0)
        return fail(s, "not JSON");
    s->p += n;
    return 0;
}

static int scan_value(struct jscan *s, int depth);

/* Scans an object or an array (at its opening bracket) nested at <depth>. */
static int scan_nested(struct jscan *s, int depth)
{
    char close = s->buf[s->p] == '{' ? '}' : ']';

    if (depth > JWT_JSON_DEPTH)
        return fail(s, "nested too deep");
    s->p++;
    skip_ws(s);
    if (s->p < s->end && s->buf[s->p] == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (s->p >= s->end || s->buf[s->p] != '"' || scan_string(s, 0, NULL, NULL) < 0)
                return fail(s, "an object member without a string name");
            skip_ws(s);
            if (s->p >= s->end || s->buf[s->p++] != ':')
                return fail(s, "a member name without ':'");
            skip_ws(s);
        }
        if (scan_value(s, depth + 1) < 0)
            return -1;
        skip_ws(s);
        if (s->p < s->end && s->buf[s->p] == close) {
            s->p++;
            return 0;
        }
        if (s->p >= s->end || s->buf[s->p++] != ',')
            return fail(s, "a missing ',' or closing bracket");
        skip_ws(s);
    }
}

/* Scans the value at s->p (not white space); its kind, or -1. */
static int scan_value(struct jscan *s, int depth)
{
    if (s->p >= s->end)
        return fail(s, "a value is missing");
    switch (s->buf[s->p]) {
    case '"':
        return scan_string(s, 0, NULL, NULL) < 0 ? -1 : JWT_STR;
    case '{':
        return scan_nested(s, depth) < 0 ? -1 : JWT_OBJ;
    case '[':
        return scan_nested(s, depth) < 0 ? -1 : JWT_ARR;
    case 't':
        return scan_literal(s, "true") < 0 ? -1 : JWT_BOOL;
    case 'f':
        return scan_literal(s, "false") < 0 ? -1 : JWT_BOOL;
    case 'n':
        return scan_literal(s, "null") < 0 ? -1 : JWT_NULL;
    default:
        if (s->buf[s->p] == '-' || (s->buf[s->p] >= '0' && s->buf[s->p] <= '9'))
            return scan_number(s) < 0 ? -1 : JWT_NUM;
        return fail(s, "not JSON");
    }
}

const struct adm_jwt_member *jwt_json_find(const char *buf, const struct adm_jwt_member *m,
                                           unsigned n, const char *name)
{
    size_t len = strlen(name);

    for (unsigned i = 0; i < n; i++)
        if (m[i].name_len == len && memcmp(buf + m[i].name, name, len) == 0)
            return &m[i];
    return NULL;
}

/* Scans one top-level member (at its name's quote) into <m>. */
static int scan_member(struct jscan *s, struct adm_jwt_member *m)
{
    size_t start;
    int kind;

    if (s->p >= s->end || s->buf[s->p] != '"')
        return fail(s, "an object member without a string name");
    if (scan_string(s, 1, &m->name, &m->name_len) < 0)
        return -1;
    skip_ws(s);
    if (s->p >= s->end || s->buf[s->p++] != ':')
        return fail(s, "a member name without ':'");
    skip_ws(s);
    start = s->p;
    if (s->p < s->end && s->buf[s->p] == '"') {
        kind = JWT_STR;
        if (scan_string(s, 1, &m->val, &m->val_len) < 0)
            return -1;
    } else {
        if ((kind = scan_value(s, 1)) < 0)
            return -1;
        m->val = (uint16_t)start;
        m->val_len = (uint16_t)(s->p - start);
    }
    m->kind = (uint8_t)kind;
    return 0;
}

int jwt_json_object(char *buf, size_t len, struct adm_jwt_member *m, unsigned max, unsigned *n,
                    const char **why)
{
    struct jscan s = {.buf = buf, .p = 0, .end = len, .why = why};

    *n = 0;
    if (len > UINT16_MAX)
        return fail(&s, "too large");
    skip_ws(&s);
    if (s.p >= s.end || buf[s.p++] != '{')
        return fail(&s, "not a JSON object");
    skip_ws(&s);
    if (s.p < s.end && buf[s.p] == '}') {
        s.p++;
    } else {
        for (;;) {
            if (*n == max)
                return fail(&s, "too many members");
            if (scan_member(&s, &m[*n]) < 0)
                return -1;
            for (unsigned i = 0; i < *n; i++)
                if (m[i].name_len == m[*n].name_len &&
                    memcmp(buf + m[i].name, buf + m[*n].name, m[i].name_len) == 0)
                    return fail(&s, "a member appears twice");
            ++*n;
            skip_ws(&s);
            if (s.p < s.end && buf[s.p] == '}') {
                s.p++;
                break;
            }
            if (s.p >= s.end || buf[s.p++] != ',')
                return fail(&s, "a missing ',' or '}'");
            skip_ws(&s);
        }
    }
    skip_ws(&s);
    if (s.p != s.end)
        return fail(&s, "bytes after the JSON object");
    return 0;
}

int jwt_json_array_next(char *buf, const struct adm_jwt_member *a, size_t *pos, uint16_t *off,
                        uint16_t *len)
{
    const char *why;
    struct jscan s = {
        .buf = buf, .p = *pos ? *pos : a->val + 1u, .end = a->val + a->val_len, .why = &why};

    skip_ws(&s);
    if (s.p >= s.end || buf[s.p] == ']') {
        *pos = s.p;
        return 0;
    }
    if (buf[s.p] != '"' || scan_string(&s, 1, off, len) < 0)
        return -1;
    skip_ws(&s);
    if (s.p < s.end && buf[s.p] == ',')
        s.p++;
    *pos = s.p;
    return 1;
}
