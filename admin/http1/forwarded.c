/*
 * forwarded.c - RFC 7239 Forwarded elements and node names, the syntax
 * half of client-address derivation (forwarded.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/http1/forwarded.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static size_t skip_ows(struct h1_slice v, size_t i)
{
    while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
        i++;
    return i;
}

/* A quoted-string at v.ptr[*i] == '"' unescaped into <buf>; -1 when it
 * does not end or does not fit. */
static int quoted(struct h1_slice v, size_t *i, char *buf, size_t *len)
{
    size_t j = *i + 1, n = 0;

    while (j < v.len && v.ptr[j] != '"') {
        unsigned char ch = (unsigned char)v.ptr[j];
        if (ch == '\\') { /* quoted-pair */
            if (++j == v.len)
                return -1;
            ch = (unsigned char)v.ptr[j];
        }
        if (!h1_is_field_byte(ch) || n == H1_FWD_VALUE_MAX)
            return -1;
        buf[n++] = (char)ch;
        j++;
    }
    if (j == v.len)
        return -1;
    *i = j + 1;
    *len = n;
    return 0;
}

bool h1_forwarded_next(struct h1_slice v, size_t *pos, enum h1_fwd_elem *kind,
                       struct h1_slice *for_value, char *buf)
{
    size_t i = skip_ows(v, *pos);

    while (i < v.len && v.ptr[i] == ',') /* empty elements */
        i = skip_ows(v, i + 1);
    if (i >= v.len) {
        *pos = v.len + 1;
        return false;
    }
    *kind = H1_FWD_NO_FOR;
    for (;;) {
        size_t name, name_len;
        struct h1_slice val;
        i = skip_ows(v, i);
        if (i < v.len && v.ptr[i] == ';') { /* an empty pair */
            i++;
            continue;
        }
        name = i;
        while (i < v.len && h1_is_tchar((unsigned char)v.ptr[i]))
            i++;
        name_len = i - name;
        if (!name_len || i == v.len || v.ptr[i] != '=')
            goto invalid;
        i++;
        if (i < v.len && v.ptr[i] == '"') {
            size_t n;
            if (quoted(v, &i, buf, &n) < 0)
                goto invalid;
            val.ptr = buf;
            val.len = n;
        } else {
            val.ptr = v.ptr + i;
            while (i < v.len && h1_is_tchar((unsigned char)v.ptr[i]))
                i++;
            val.len = (size_t)(v.ptr + i - val.ptr);
            if (!val.len)
                goto invalid;
        }
        if (h1_ci_eq(v.ptr + name, name_len, "for")) {
            if (*kind == H1_FWD_FOR)
                goto invalid;
            *kind = H1_FWD_FOR;
            *for_value = val;
        }
        i = skip_ows(v, i);
        if (i == v.len || v.ptr[i] == ',') {
            *pos = i + 1;
            return true;
        }
        if (v.ptr[i] != ';')
            goto invalid;
        i++;
    }
invalid:
    *kind = H1_FWD_INVALID;
    *pos = v.len + 1;
    return true;
}

/* A port: digits (at most 65535), or an obfuscated one, "_" then
 * ALPHA / DIGIT / "." / "_" / "-" (RFC 7239 6.3). */
static int node_port(const char *s, size_t n)
{
    unsigned long p = 0;

    if (!n)
        return -1;
    if (s[0] == '_') {
        for (size_t i = 1; i < n; i++)
            if (!h1_is_alpha((unsigned char)s[i]) && !h1_is_digit((unsigned char)s[i]) &&
                s[i] != '.' && s[i] != '_' && s[i] != '-')
                return -1;
        return n > 1 ? 0 : -1;
    }
    if (n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!h1_is_digit((unsigned char)s[i]))
            return -1;
        p = p * 10 + (unsigned long)(s[i] - '0');
    }
    return p <= 65535 ? 0 : -1;
}

/* <s>[0..<n>) as an address of <family> into <out>. */
static int parse_ip(int family, const char *s, size_t n, struct sockaddr_storage *out)
{
    char text[INET6_ADDRSTRLEN];

    if (n == 0 || n >= sizeof(text))
        return -1;
    memcpy(text, s, n);
    text[n] = '\0';
    memset(out, 0, sizeof(*out));
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)out;
        in->sin_family = AF_INET;
        return inet_pton(AF_INET, text, &in->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    in6->sin6_family = AF_INET6;
    return inet_pton(AF_INET6, text, &in6->sin6_addr) == 1 ? 0 : -1;
}

int h1_node_addr(const char *s, size_t n, struct sockaddr_storage *out)
{
    const char *colon;

    if (!n)
        return -1;
    if (s[0] == '[') {
        const char *end = memchr(s, ']', n);
        if (!end)
            return -1;
        size_t rest = n - (size_t)(end + 1 - s);
        if (rest && (end[1] != ':' || node_port(end + 2, rest - 1) < 0))
            return -1;
        return parse_ip(AF_INET6, s + 1, (size_t)(end - s - 1), out);
    }
    colon = memchr(s, ':', n);
    if (!colon)
        return parse_ip(AF_INET, s, n, out);
    if (memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
        return parse_ip(AF_INET6, s, n, out); /* bare IPv6, no port */
    if (node_port(colon + 1, n - (size_t)(colon + 1 - s)) < 0)
        return -1;
    return parse_ip(AF_INET, s, (size_t)(colon - s), out);
}
