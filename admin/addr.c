/*
 * addr.c - socket addresses ("IP:PORT", "[v6]:PORT", "name:PORT") and CIDR
 * prefixes as a config writes them (admin/addr.h): parsing with a reason
 * for every refusal, loopback and overlap tests, prefix matching.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/addr.h"
#include "admin/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_why(char *why, size_t cap, const char *msg)
{
    if (cap)
        snprintf(why, cap, "%s", msg);
    errno = EINVAL;
    return -1;
}

/* A DNS name: labels of [A-Za-z0-9_-], 1..63 bytes, not starting or ending
 * with '-'; at most 253 bytes; the last label is not all digits (that would
 * be a malformed IPv4 address). */
static int valid_hostname(const char *h, size_t n)
{
    if (n == 0 || n > 253)
        return 0;
    size_t start = 0;
    int all_digits = 1;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || h[i] == '.') {
            size_t len = i - start;
            if (len == 0 || len > 63 || h[start] == '-' || h[i - 1] == '-')
                return 0;
            if (i == n && all_digits)
                return 0;
            start = i + 1;
            all_digits = 1;
            continue;
        }
        unsigned char c = (unsigned char)h[i];
        if (!is_alnum(c) && c != '-' && c != '_')
            return 0;
        if (!is_digit(c))
            all_digits = 0;
    }
    return 1;
}

static int parse_port(const char *p, uint16_t *out)
{
    size_t n = strlen(p);
    if (n == 0 || n > 5 || p[0] == '0')
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)p[i]))
            return -1;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

int adm_addr_parse(struct adm_addr *a, const char *s, int allow_name, char *why, size_t cap)
{
    const char *host, *port;
    size_t hlen;
    int bracketed = 0;

    memset(a, 0, sizeof(*a));
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close)
            return set_why(why, cap, "missing ']' after the IPv6 address");
        if (close[1] != ':')
            return set_why(why, cap, "expected ':PORT' after ']'");
        host = s + 1;
        hlen = (size_t)(close - host);
        port = close + 2;
        bracketed = 1;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return set_why(why, cap, "expected HOST:PORT");
        host = s;
        hlen = (size_t)(colon - s);
        port = colon + 1;
        if (memchr(host, ':', hlen))
            return set_why(why, cap, "an IPv6 address needs brackets, as in [::1]:8080");
    }
    if (hlen == 0)
        return set_why(why, cap, "missing host (use 0.0.0.0 or [::] for every address)");
    if (parse_port(port, &a->port) < 0)
        return set_why(why, cap, "port must be a number 1..65535 without leading zeros");
    if (hlen > 253)
        return set_why(why, cap, "host too long");

    char hbuf[256];
    memcpy(hbuf, host, hlen);
    hbuf[hlen] = '\0';
    struct sockaddr_in *sin = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&a->ss;
    if (bracketed) {
        if (inet_pton(AF_INET6, hbuf, &sin6->sin6_addr) != 1)
            return set_why(why, cap, "invalid IPv6 address");
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(a->port);
        a->sslen = sizeof(*sin6);
        a->numeric = 1;
    } else if (inet_pton(AF_INET, hbuf, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(a->port);
        a->sslen = sizeof(*sin);
        a->numeric = 1;
    } else if (strspn(hbuf, "0123456789.") == hlen) {
        return set_why(why, cap, "invalid IPv4 address");
    } else if (!allow_name) {
        return set_why(why, cap, "must be a numeric IP address (IPv4, or IPv6 in brackets)");
    } else if (!valid_hostname(hbuf, hlen)) {
        return set_why(why, cap, "invalid host name");
    } else {
        for (size_t i = 0; i < hlen; i++)
            hbuf[i] = to_lower(hbuf[i]);
    }

    a->text = strdup(s);
    a->host = strdup(hbuf);
    if (!a->text || !a->host) {
        adm_addr_free(a);
        if (cap)
            snprintf(why, cap, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void adm_addr_free(struct adm_addr *a)
{
    if (!a)
        return;
    free(a->text);
    free(a->host);
    a->text = a->host = NULL;
}

static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int adm_addr_is_loopback(const struct adm_addr *a)
{
    if (!a->numeric)
        return 0;
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&a->ss;
        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    const unsigned char *b = ((const struct sockaddr_in6 *)&a->ss)->sin6_addr.s6_addr;
    static const unsigned char one[16] = {[15] = 1};
    return !memcmp(b, one, 16) || (!memcmp(b, v4mapped, 12) && b[12] == 127);
}

/* A key that is equal for two addresses exactly when they name the same
 * socket address: "1.2.3.4:80", "[::1]:80" or "name:80". */
void adm_addr_key(const struct adm_addr *a, char *buf, size_t cap)
{
    if (a->numeric)
        adm_sockaddr_text((const struct sockaddr *)&a->ss, buf, cap);
    else
        snprintf(buf, cap, "%s:%u", a->host, a->port);
}

void adm_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        snprintf(buf, cap, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else {
        snprintf(buf, cap, "?:0");
    }
}

static int addr_is_wildcard(const struct adm_addr *a)
{
    static const unsigned char zero[16];
    if (a->ss.ss_family == AF_INET)
        return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return !memcmp(((const struct sockaddr_in6 *)&a->ss)->sin6_addr.s6_addr, zero, 16);
}

/* Whether binding both numeric addresses would collide: same port, and the
 * same address or a wildcard on either side. */
int adm_addr_overlaps(const struct adm_addr *a, const struct adm_addr *b)
{
    if (a->port != b->port)
        return 0;
    if (addr_is_wildcard(a) || addr_is_wildcard(b))
        return 1;
    char ka[80], kb[80];
    adm_addr_key(a, ka, sizeof(ka));
    adm_addr_key(b, kb, sizeof(kb));
    return !strcmp(ka, kb);
}

/* ---- CIDRs ---- */

int adm_cidr_parse(struct adm_cidr *out, const char *s, char *why, size_t cap)
{
    char buf[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);

    memset(out, 0, sizeof(*out));
    if (alen == 0 || alen >= INET6_ADDRSTRLEN)
        return set_why(why, cap, "expected ADDRESS/PREFIX, as in 10.0.0.0/8 or fd00::/8");
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    unsigned max;
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        return set_why(why, cap, "invalid IP address");
    }

    out->prefix = max;
    if (slash) {
        const char *p = slash + 1;
        size_t n = strlen(p);
        unsigned v = 0;
        if (n == 0 || n > 3 || (p[0] == '0' && n > 1) || strspn(p, "0123456789") != n)
            return set_why(why, cap, "prefix length must be a decimal number");
        for (size_t i = 0; i < n; i++)
            v = v * 10 + (unsigned)(p[i] - '0');
        if (v > max)
            return set_why(why, cap,
                           max == 32 ? "prefix length must be 0..32"
                                     : "prefix length must be 0..128");
        out->prefix = v;
    }

    /* no bits set beyond the prefix */
    for (unsigned bit = out->prefix; bit < max; bit++) {
        if (out->addr[bit / 8] & (0x80u >> (bit % 8))) {
            struct adm_cidr net = *out;
            for (unsigned b = out->prefix; b < max; b++)
                net.addr[b / 8] &= (unsigned char)~(0x80u >> (b % 8));
            char ip[INET6_ADDRSTRLEN];
            inet_ntop(out->family, net.addr, ip, sizeof(ip));
            if (cap)
                snprintf(why, cap, "host bits are set beyond the prefix (did you mean %s/%u?)", ip,
                         out->prefix);
            errno = EINVAL;
            return -1;
        }
    }
    return 0;
}

static int prefix_eq(const unsigned char *a, const unsigned char *net, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;
    if (memcmp(a, net, full))
        return 0;
    if (rest) {
        unsigned char mask = (unsigned char)(0xffu << (8 - rest));
        if ((a[full] & mask) != (net[full] & mask))
            return 0;
    }
    return 1;
}

int adm_cidr_match(const struct adm_cidr *list, size_t n, const struct sockaddr *sa)
{
    unsigned char v6[16], v4[4];
    int has4 = 0, has6 = 0;

    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET) {
        memcpy(v4, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        memcpy(v6, v4mapped, 12);
        memcpy(v6 + 12, v4, 4);
        has4 = has6 = 1;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(v6, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        has6 = 1;
        if (!memcmp(v6, v4mapped, 12)) {
            memcpy(v4, v6 + 12, 4);
            has4 = 1;
        }
    } else {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (list[i].family == AF_INET && has4 && prefix_eq(v4, list[i].addr, list[i].prefix))
            return 1;
        if (list[i].family == AF_INET6 && has6 && prefix_eq(v6, list[i].addr, list[i].prefix))
            return 1;
    }
    return 0;
}
