/*
 * grpc.c - gRPC's statuses for the gateway's own answers, grpc-message's
 * encoding, and the grpc-status of an upstream's response (grpc.h).
 */
#include "gateway/grpc.h"

#include <string.h>

int gw_grpc_code(int status)
{
    switch (status) {
    case 404:
    case 405:
    case 501:
        return GW_GRPC_UNIMPLEMENTED;
    case 421:
    case 502:
    case 503:
        return GW_GRPC_UNAVAILABLE;
    case 408:
    case 504:
        return GW_GRPC_DEADLINE_EXCEEDED;
    case 413:
    case 429:
    case 431:
        return GW_GRPC_RESOURCE_EXHAUSTED;
    case 400:
    case 500:
        return GW_GRPC_INTERNAL;
    case 401:
        return GW_GRPC_UNAUTHENTICATED;
    case 403:
        return GW_GRPC_PERMISSION_DENIED;
    default:
        return GW_GRPC_UNKNOWN;
    }
}

const char *gw_grpc_message(int status)
{
    switch (status) {
    case 400:
        return "bad request";
    case 404:
        return "no route for this path";
    case 405:
        return "method not allowed on this path";
    case 408:
        return "request timeout: the client sent no request bytes for too long";
    case 413:
        return "request too large";
    case 421:
        return "misdirected request: not served on this connection";
    case 431:
        return "request header fields too large";
    case 500:
        return "internal error";
    case 501:
        return "not implemented";
    case 502:
        return "upstream connect error or disconnect before a response";
    case 503:
        return "no healthy upstream";
    case 504:
        return "upstream request timeout";
    default:
        return "the gateway could not serve this request";
    }
}

size_t gw_grpc_pct_encode(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch <= 0x7e && ch != '%') {
            if (o + 1 > cap)
                break;
            out[o++] = (char)ch;
            continue;
        }
        if (o + 3 > cap)
            break;
        out[o] = '%';
        out[o + 1] = hex[ch >> 4];
        out[o + 2] = hex[ch & 15];
        o += 3;
    }
    return o;
}

int gw_grpc_status_value(const char *v, size_t n)
{
    unsigned code = 0;

    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    if (!n || n > 2)
        return GW_GRPC_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return GW_GRPC_UNKNOWN;
        code = code * 10 + (unsigned)(v[i] - '0');
    }
    return code < GW_GRPC_NCODES ? (int)code : GW_GRPC_UNKNOWN;
}

int gw_grpc_status_in(const struct h1_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (h1_name_is(&h[i].name, "grpc-status"))
            return gw_grpc_status_value(h[i].value.ptr, h[i].value.len);
    return -1;
}

int gw_grpc_status_in_lines(const char *lines, size_t len)
{
    static const char name[] = "grpc-status:";
    const size_t nl = sizeof(name) - 1;
    const char *p = lines, *end = lines + len;

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        size_t ll = (size_t)(le - p);

        if (ll && p[ll - 1] == '\r')
            ll--;
        if (ll >= nl && h1_ci_eq(p, nl, name))
            return gw_grpc_status_value(p + nl, ll - nl);
        p = eol ? eol + 1 : end;
    }
    return -1;
}
