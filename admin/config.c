/*
 * config.c - the config model: strict JSON parsing and validation.
 *
 * One pass over the document fills a struct adm_config through per-object key
 * tables (struct field): a key missing from its table is an error, so is a
 * value of the wrong type or out of range. A second pass checks what spans
 * objects: route -> upstream references, the admin address against the
 * listeners, and route conflicts (every route inserted into one router
 * transaction). Errors go to a struct adm_errors, each with the JSON pointer
 * of the value it is about; parsing goes on after an error so that one run
 * reports everything. The result is returned only when there was no error.
 *
 * Ownership: the config owns every string and array in it, and one reference
 * to the JSON document. adm_config_free() releases all of it, including a
 * half-built config, so every parse step may simply stop on failure.
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/config.h"
#include "admin/http1/token.h"
#include "admin/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_NAME 128         /* route ids, upstream names */
#define MAX_PATHNAME 4096    /* token_file, state_dir, access_log */
#define MAX_MS 86400000LL    /* one day */
#define MAX_FILE (64u << 20) /* adm_config_load_file */

/* ------------------------------------------------------------------------ */
/* error lists                                                              */

void adm_errors_init(struct adm_errors *e)
{
    memset(e, 0, sizeof(*e));
}

void adm_errors_clear(struct adm_errors *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i].path);
        free(e->v[i].msg);
    }
    free(e->v);
    memset(e, 0, sizeof(*e));
}

/* A malloc'd vsnprintf. */
ADM_PRINTF(1, 0) static char *vstrfmt(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

ADM_PRINTF(3, 0)
static int errors_vadd(struct adm_errors *e, const char *path, const char *fmt, va_list ap)
{
    if (e->n >= ADM_ERRORS_MAX) {
        e->dropped++;
        return 0;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        struct adm_error *v = realloc(e->v, cap * sizeof(*v));
        if (!v)
            goto fail;
        e->v = v;
        e->cap = cap;
    }
    char *p = strdup(path);
    char *m = vstrfmt(fmt, ap);
    if (!p || !m) {
        free(p);
        free(m);
        goto fail;
    }
    e->v[e->n].path = p;
    e->v[e->n].msg = m;
    e->n++;
    return 0;
fail:
    e->nomem = 1;
    return -1;
}

int adm_errors_add(struct adm_errors *e, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = errors_vadd(e, path, fmt, ap);
    va_end(ap);
    return rc;
}

size_t adm_error_format(const struct adm_error *e, char *buf, size_t cap)
{
    int n;
    if (e->path[0])
        n = snprintf(buf, cap, "%s: %s", e->path, e->msg);
    else
        n = snprintf(buf, cap, "%s", e->msg);
    return n < 0 ? 0 : (size_t)n;
}

char *adm_errors_format(const struct adm_errors *e)
{
    size_t total = 1;
    for (size_t i = 0; i < e->n; i++)
        total += adm_error_format(&e->v[i], NULL, 0) + 1;
    char more[64] = "";
    if (e->dropped)
        snprintf(more, sizeof(more), "... and %zu more errors\n", e->dropped);
    total += strlen(more);

    char *s = malloc(total);
    if (!s)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < e->n; i++) {
        off += adm_error_format(&e->v[i], s + off, total - off);
        s[off++] = '\n';
    }
    memcpy(s + off, more, strlen(more) + 1);
    return s;
}

json_t *adm_errors_json(const struct adm_errors *e)
{
    json_t *a = json_array();
    if (!a)
        return NULL;
    for (size_t i = 0; i < e->n; i++) {
        json_t *o = json_pack("{s:s, s:s}", "path", e->v[i].path, "message", e->v[i].msg);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* ------------------------------------------------------------------------ */
/* small string helpers                                                     */

/* ASCII classes, whatever the process locale says. */
static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char to_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Every byte of <s> is alphanumeric or in <extra>; <s> is 1..max bytes. */
static int is_name(const char *s, const char *extra, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (; *s; s++)
        if (!is_alnum((unsigned char)*s) && !strchr(extra, *s))
            return 0;
    return 1;
}

/* Quotes <s> for a message: "..." with escapes, cut after about 60 bytes. */
struct qbuf {
    char s[280];
};

static const char *quote(struct qbuf *q, const char *s)
{
    size_t o = 0, i = 0;
    q->s[o++] = '"';
    for (; s[i] && i < 60; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            q->s[o++] = '\\';
            q->s[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(q->s + o, 5, "\\x%02x", c);
        } else {
            q->s[o++] = (char)c;
        }
    }
    if (s[i]) {
        /* do not cut a UTF-8 sequence */
        while (o > 1 && ((unsigned char)q->s[o - 1] & 0xc0) == 0x80)
            o--;
        if (o > 1 && ((unsigned char)q->s[o - 1] & 0xc0) == 0xc0)
            o--;
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o++] = '"';
    q->s[o] = '\0';
    return q->s;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 99;
    size_t row[33];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (to_lower(a[i - 1]) != to_lower(b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* ------------------------------------------------------------------------ */
/* addresses                                                                */

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
static void addr_key(const struct adm_addr *a, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (a->numeric && a->ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, ip, sizeof(ip));
        snprintf(buf, cap, "[%s]:%u", ip, a->port);
    } else if (a->numeric) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, ip, sizeof(ip));
        snprintf(buf, cap, "%s:%u", ip, a->port);
    } else {
        snprintf(buf, cap, "%s:%u", a->host, a->port);
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
static int addr_overlaps(const struct adm_addr *a, const struct adm_addr *b)
{
    if (a->port != b->port)
        return 0;
    if (addr_is_wildcard(a) || addr_is_wildcard(b))
        return 1;
    char ka[80], kb[80];
    addr_key(a, ka, sizeof(ka));
    addr_key(b, kb, sizeof(kb));
    return !strcmp(ka, kb);
}

/* ------------------------------------------------------------------------ */
/* CIDRs                                                                    */

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

/* ------------------------------------------------------------------------ */
/* the parse context: error list, current JSON pointer                      */

struct ctx {
    struct adm_errors *errs;
    struct adm_config *c;
    char *path; /* the JSON pointer of the value being parsed */
    size_t plen, pcap;
    size_t nerr; /* errors reported by this parse */
    int nomem;
    json_t *upstream_index;       /* name -> index into c->upstreams */
    unsigned char *route_ok;      /* per route: id, pattern and methods usable by the router */
    unsigned char *route_timeout; /* per route: timeout_ms given */
    const struct adm_route_binder *bind; /* keep the routes' table, with this udata */
};

static int path_reserve(struct ctx *x, size_t add)
{
    if (x->plen + add + 1 <= x->pcap)
        return 0;
    size_t cap = x->pcap * 2;
    while (cap < x->plen + add + 1)
        cap *= 2;
    char *p = realloc(x->path, cap);
    if (!p) {
        x->nomem = 1;
        return -1;
    }
    x->path = p;
    x->pcap = cap;
    return 0;
}

/* Appends "/<key>" (escaped per RFC 6901) and returns the previous length
 * for path_pop(). */
static size_t path_push_key(struct ctx *x, const char *key)
{
    size_t mark = x->plen;
    size_t n = strlen(key);
    if (path_reserve(x, 1 + 2 * n) < 0)
        return mark;
    x->path[x->plen++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (key[i] == '~' || key[i] == '/') {
            x->path[x->plen++] = '~';
            x->path[x->plen++] = key[i] == '~' ? '0' : '1';
        } else {
            x->path[x->plen++] = key[i];
        }
    }
    x->path[x->plen] = '\0';
    return mark;
}

static size_t path_push_index(struct ctx *x, size_t i)
{
    char buf[32];
    size_t mark = x->plen;
    int n = snprintf(buf, sizeof(buf), "/%zu", i);
    if (path_reserve(x, (size_t)n) < 0)
        return mark;
    memcpy(x->path + x->plen, buf, (size_t)n + 1);
    x->plen += (size_t)n;
    return mark;
}

static void path_pop(struct ctx *x, size_t mark)
{
    x->plen = mark;
    x->path[mark] = '\0';
}

ADM_PRINTF(2, 0) static void verr(struct ctx *x, const char *fmt, va_list ap)
{
    x->nerr++;
    if (errors_vadd(x->errs, x->path, fmt, ap) < 0)
        x->nomem = 1;
}

/* Reports an error about the value at the current path. */
ADM_PRINTF(2, 3) static void err(struct ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(x, fmt, ap);
    va_end(ap);
}

/* Reports an error about member <key> of the value at the current path. */
ADM_PRINTF(3, 4) static void err_key(struct ctx *x, const char *key, const char *fmt, ...)
{
    size_t mark = path_push_key(x, key);
    va_list ap;
    va_start(ap, fmt);
    verr(x, fmt, ap);
    va_end(ap);
    path_pop(x, mark);
}

/* Reports an error at an absolute path built from a format. */
ADM_PRINTF(3, 4) static void err_at(struct ctx *x, const char *path, const char *fmt, ...)
{
    x->nerr++;
    va_list ap;
    va_start(ap, fmt);
    if (errors_vadd(x->errs, path, fmt, ap) < 0)
        x->nomem = 1;
    va_end(ap);
}

static char *xstrdup(struct ctx *x, const char *s)
{
    char *d = strdup(s);
    if (!d)
        x->nomem = 1;
    return d;
}

static void *xcalloc(struct ctx *x, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        x->nomem = 1;
    return p;
}

/* ------------------------------------------------------------------------ */
/* typed getters: each reports its own error and returns failure            */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

static int want_object(struct ctx *x, const json_t *v)
{
    if (json_is_object(v))
        return 1;
    err(x, "expected an object, got %s", type_name(v));
    return 0;
}

static int want_array(struct ctx *x, const json_t *v)
{
    if (json_is_array(v))
        return 1;
    err(x, "expected an array, got %s", type_name(v));
    return 0;
}

/* The string value of <v>, or NULL after reporting why not. */
static const char *get_str(struct ctx *x, const json_t *v, int nonempty)
{
    if (!json_is_string(v)) {
        err(x, "expected a string, got %s", type_name(v));
        return NULL;
    }
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) {
        err(x, "must not contain NUL characters");
        return NULL;
    }
    if (nonempty && !*s) {
        err(x, "must not be empty");
        return NULL;
    }
    return s;
}

static int get_int(struct ctx *x, const json_t *v, long long min, long long max, long long *out)
{
    if (!json_is_integer(v)) {
        err(x, "expected an integer, got %s", type_name(v));
        return -1;
    }
    long long i = json_integer_value(v);
    if (i < min || i > max) {
        err(x, "must be between %lld and %lld (got %lld)", min, max, i);
        return -1;
    }
    *out = i;
    return 0;
}

/* A string naming a file or directory. */
static char *get_pathname(struct ctx *x, const json_t *v)
{
    const char *s = get_str(x, v, 1);
    if (!s)
        return NULL;
    if (strlen(s) > MAX_PATHNAME) {
        err(x, "path too long (at most %d bytes)", MAX_PATHNAME);
        return NULL;
    }
    return xstrdup(x, s);
}

/* ------------------------------------------------------------------------ */
/* key tables                                                               */

enum fkind {
    FK_UINT, /* unsigned at <off>, <min>..<max> */
    FK_U64,  /* uint64_t at <off>, <min>..<max> */
    FK_BOOL, /* int at <off> */
    FK_PATH, /* char * at <off>: a path name */
    FK_FN,   /* <fn> does it */
};

#define F_REQUIRED 1u

typedef void (*field_fn)(struct ctx *x, const json_t *v, void *target);

struct field {
    const char *key;
    enum fkind kind;
    unsigned flags;
    size_t off;
    long long min, max;
    field_fn fn;
};

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

static void unknown_key(struct ctx *x, const char *key, const struct field *f, size_t nf)
{
    const char *best = NULL;
    size_t bestd = 3;
    size_t klen = strlen(key);
    for (size_t i = 0; i < nf; i++) {
        size_t d = edit_distance(key, f[i].key);
        /* "drain" for "drain_ms", "max_body" for "max_body_bytes" */
        if (klen >= 4 && !strncmp(key, f[i].key, klen))
            d = 1;
        if (d < bestd) {
            bestd = d;
            best = f[i].key;
        }
    }
    if (best)
        err(x, "unknown key (did you mean \"%s\"?)", best);
    else
        err(x, "unknown key");
}

static void apply_field(struct ctx *x, const struct field *f, const json_t *v, void *target)
{
    char *base = target;
    long long i;

    switch (f->kind) {
    case FK_UINT:
        if (get_int(x, v, f->min, f->max, &i) == 0)
            *(unsigned *)(base + f->off) = (unsigned)i;
        break;
    case FK_U64:
        if (get_int(x, v, f->min, f->max, &i) == 0)
            *(uint64_t *)(base + f->off) = (uint64_t)i;
        break;
    case FK_BOOL:
        if (json_is_boolean(v))
            *(int *)(base + f->off) = json_is_true(v);
        else
            err(x, "expected a boolean, got %s", type_name(v));
        break;
    case FK_PATH: {
        char **slot = (char **)(base + f->off);
        free(*slot);
        *slot = get_pathname(x, v);
        break;
    }
    case FK_FN:
        f->fn(x, v, target);
        break;
    }
}

/* Parses the members of object <obj> (already checked to be one) into
 * <target> through the table <f>; reports unknown and missing keys. Returns
 * the set of keys present, bit i for f[i]. */
static uint32_t parse_fields(struct ctx *x, const json_t *obj, const struct field *f, size_t nf,
                             void *target)
{
    uint32_t seen = 0;
    const char *key;
    size_t klen;
    json_t *v;

    json_object_keylen_foreach((json_t *)obj, key, klen, v)
    {
        size_t mark = path_push_key(x, key);
        size_t i = 0;
        while (i < nf && !(strlen(f[i].key) == klen && !memcmp(f[i].key, key, klen)))
            i++;
        if (i == nf) {
            unknown_key(x, key, f, nf);
        } else {
            seen |= UINT32_C(1) << i;
            apply_field(x, &f[i], v, target);
        }
        path_pop(x, mark);
    }
    for (size_t i = 0; i < nf; i++)
        if ((f[i].flags & F_REQUIRED) && !(seen & (UINT32_C(1) << i)))
            err_key(x, f[i].key, "missing (required)");
    return seen;
}

/* Picks one of <names> for a string value; -1 after reporting. */
static int get_enum(struct ctx *x, const json_t *v, const char *const *names, size_t n)
{
    const char *s = get_str(x, v, 0);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return (int)i;
    char list[200] = "";
    for (size_t i = 0; i < n; i++) {
        size_t o = strlen(list);
        snprintf(list + o, sizeof(list) - o, "%s\"%s\"", i ? ", " : "", names[i]);
    }
    struct qbuf q;
    err(x, "invalid value %s (expected one of %s)", quote(&q, s), list);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* listeners                                                                */

static void listener_address(struct ctx *x, const json_t *v, void *target)
{
    struct adm_listener *l = target;
    const char *s = get_str(x, v, 1);
    char why[128];
    struct qbuf q;

    if (!s)
        return;
    if (adm_addr_parse(&l->addr, s, 0, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            err(x, "invalid address %s: %s", quote(&q, s), why);
    }
}

/* tls_config.c parses "tls" objects and reports at their path */
static void tls_parsed(struct ctx *x, int rc)
{
    if (rc < 0)
        x->nomem = 1;
    else
        x->nerr += (size_t)rc;
}

static void listener_tls(struct ctx *x, const json_t *v, void *target)
{
    tls_parsed(x,
               adm_tls_listener_parse(v, x->path, x->errs, &((struct adm_listener *)target)->tls));
}

static const struct field listener_fields[] = {
    {.key = "address", .kind = FK_FN, .flags = F_REQUIRED, .fn = listener_address},
    {.key = "tls", .kind = FK_FN, .fn = listener_tls},
    {.key = "redirect_https",
     .kind = FK_UINT,
     .off = offsetof(struct adm_listener, redirect_https),
     .min = 1,
     .max = 65535},
};

static void parse_listeners(struct ctx *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!want_array(x, v))
        return;
    size_t n = json_array_size(v);
    if (n == 0) {
        err(x, "needs at least one listener");
        return;
    }
    c->listeners = xcalloc(x, n, sizeof(*c->listeners));
    json_t *seen = json_object();
    if (!c->listeners || !seen) {
        x->nomem = 1;
        json_decref(seen);
        return;
    }
    c->nlisteners = n;
    for (size_t i = 0; i < n; i++) {
        size_t mark = path_push_index(x, i);
        const json_t *lv = json_array_get(v, i);
        struct adm_listener *l = &c->listeners[i];
        if (want_object(x, lv))
            parse_fields(x, lv, listener_fields, NFIELDS(listener_fields), l);
        if (l->tls && l->redirect_https)
            err_key(x, "redirect_https", "only a plain listener redirects to HTTPS");
        if (l->addr.text) {
            char key[80];
            addr_key(&l->addr, key, sizeof(key));
            json_t *other = json_object_get(seen, key);
            if (other)
                err_key(x, "address", "duplicate listener address (also /listeners/%lld)",
                        (long long)json_integer_value(other));
            else if (json_object_set_new(seen, key, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        path_pop(x, mark);
    }
    json_decref(seen);
}

/* ------------------------------------------------------------------------ */
/* upstreams                                                                */

static void server_address(struct ctx *x, const json_t *v, void *target)
{
    struct adm_server *s = target;
    const char *str = get_str(x, v, 1);
    char why[128];
    struct qbuf q;

    if (!str)
        return;
    if (adm_addr_parse(&s->addr, str, 1, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            err(x, "invalid address %s: %s", quote(&q, str), why);
    }
}

static const struct field server_fields[] = {
    {.key = "address", .kind = FK_FN, .flags = F_REQUIRED, .fn = server_address},
    {.key = "weight",
     .kind = FK_UINT,
     .off = offsetof(struct adm_server, weight),
     .min = 1,
     .max = 1000},
};

static void upstream_servers(struct ctx *x, const json_t *v, void *target)
{
    struct adm_upstream *u = target;
    if (!want_array(x, v))
        return;
    size_t n = json_array_size(v);
    if (n == 0) {
        err(x, "needs at least one server");
        return;
    }
    u->servers = xcalloc(x, n, sizeof(*u->servers));
    json_t *seen = json_object();
    if (!u->servers || !seen) {
        x->nomem = 1;
        json_decref(seen);
        return;
    }
    u->nservers = n;
    for (size_t i = 0; i < n; i++) {
        size_t mark = path_push_index(x, i);
        const json_t *sv = json_array_get(v, i);
        struct adm_server *s = &u->servers[i];
        s->weight = 1;
        if (want_object(x, sv))
            parse_fields(x, sv, server_fields, NFIELDS(server_fields), s);
        if (s->addr.text) {
            char key[300];
            addr_key(&s->addr, key, sizeof(key));
            json_t *other = json_object_get(seen, key);
            if (other)
                err_key(x, "address", "duplicate server (also %.*s/%lld/address)", (int)mark,
                        x->path, (long long)json_integer_value(other));
            else if (json_object_set_new(seen, key, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        path_pop(x, mark);
    }
    json_decref(seen);
}

static void upstream_balance(struct ctx *x, const json_t *v, void *target)
{
    static const char *const names[] = {"round_robin"};
    struct adm_upstream *u = target;
    int i = get_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        u->balance = (enum adm_balance)i;
}

static void upstream_tls(struct ctx *x, const json_t *v, void *target)
{
    tls_parsed(x,
               adm_tls_upstream_parse(v, x->path, x->errs, &((struct adm_upstream *)target)->tls));
}

static const struct field upstream_fields[] = {
    {.key = "servers", .kind = FK_FN, .flags = F_REQUIRED, .fn = upstream_servers},
    {.key = "tls", .kind = FK_FN, .fn = upstream_tls},
    {.key = "balance", .kind = FK_FN, .fn = upstream_balance},
    {.key = "keepalive",
     .kind = FK_UINT,
     .off = offsetof(struct adm_upstream, keepalive),
     .min = 0,
     .max = 100000},
    {.key = "idle_timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_upstream, idle_timeout_ms),
     .min = 1,
     .max = MAX_MS},
};

static void parse_upstreams(struct ctx *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    const char *name;
    size_t nlen;
    json_t *uv;
    struct qbuf q;

    if (!want_object(x, v))
        return;
    c->upstreams = xcalloc(x, json_object_size(v), sizeof(*c->upstreams));
    if (!c->upstreams)
        return;
    json_object_keylen_foreach((json_t *)v, name, nlen, uv)
    {
        size_t mark = path_push_key(x, name);
        struct adm_upstream *u = &c->upstreams[c->nupstreams++];
        u->keepalive = 32;
        u->balance = ADM_BALANCE_ROUND_ROBIN;
        if (strlen(name) != nlen || !is_name(name, "_.-", MAX_NAME))
            err(x, "invalid upstream name %s (use 1..%d letters, digits, '_', '.', '-')",
                quote(&q, name), MAX_NAME);
        else if ((u->name = xstrdup(x, name)) &&
                 json_object_set_new(x->upstream_index, name,
                                     json_integer((json_int_t)(c->nupstreams - 1))) < 0)
            x->nomem = 1;
        if (want_object(x, uv))
            parse_fields(x, uv, upstream_fields, NFIELDS(upstream_fields), u);
        path_pop(x, mark);
    }
}

/* ------------------------------------------------------------------------ */
/* routes                                                                   */

static void route_id(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    struct qbuf q;
    if (!s)
        return;
    if (!is_name(s, "_.:-", MAX_NAME)) {
        err(x, "invalid route id %s (use 1..%d letters, digits, '_', '.', ':', '-')", quote(&q, s),
            MAX_NAME);
        return;
    }
    r->id = xstrdup(x, s);
}

static void route_host(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    if (strchr(s, '/')) {
        err(x, "a host pattern must not contain '/'");
        return;
    }
    r->host = xstrdup(x, s);
}

static void route_path(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        err(x, "must start with '/' (put a host in \"host\")");
        return;
    }
    r->path = xstrdup(x, s);
}

static const char *const known_methods[] = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                            "CONNECT", "OPTIONS", "TRACE", "PATCH"};

static void route_methods(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (!want_array(x, v))
        return;
    size_t n = json_array_size(v);
    if (n == 0) {
        err(x, "must not be empty (leave \"methods\" out for every method)");
        return;
    }
    char **m = xcalloc(x, n, sizeof(*m));
    if (!m)
        return;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        size_t mark = path_push_index(x, i);
        const char *s = get_str(x, json_array_get(v, i), 1);
        struct qbuf q;
        if (!s) {
            ok = 0;
        } else if (!strcmp(s, "*")) {
            err(x, "\"*\" is not a method (leave \"methods\" out for every method)");
            ok = 0;
        } else if (!h1_is_token(s, strlen(s)) || strlen(s) > 32) {
            err(x, "invalid method %s (an HTTP token of at most 32 characters)", quote(&q, s));
            ok = 0;
        } else {
            for (size_t k = 0; k < NFIELDS(known_methods); k++) {
                if (strcmp(s, known_methods[k]) && !strcasecmp(s, known_methods[k])) {
                    err(x, "methods are case-sensitive: did you mean \"%s\"?", known_methods[k]);
                    ok = 0;
                }
            }
            for (size_t k = 0; k < i; k++) {
                if (m[k] && !strcmp(m[k], s)) {
                    err(x, "duplicate method %s (also %.*s/%zu)", quote(&q, s), (int)mark, x->path,
                        k);
                    ok = 0;
                }
            }
            m[i] = xstrdup(x, s);
        }
        path_pop(x, mark);
    }
    if (!ok || x->nomem) {
        for (size_t i = 0; i < n; i++)
            free(m[i]);
        free(m);
        return;
    }
    r->methods = m;
    r->nmethods = n;
}

static void route_upstream(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (s)
        r->upstream = xstrdup(x, s);
}

/* The header fields a direct response may not set: computed by the gateway,
 * or hop-by-hop fields of the connection it manages. */
static const char *const reserved_headers[] = {
    "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
    "Trailer",        "Proxy-Connection",
};

static void response_headers(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *name;
    size_t nlen;
    json_t *hv;
    struct qbuf q;

    if (!want_object(x, v))
        return;
    r->response.headers = xcalloc(x, json_object_size(v), sizeof(*r->response.headers));
    if (!r->response.headers)
        return;
    json_object_keylen_foreach((json_t *)v, name, nlen, hv)
    {
        size_t mark = path_push_key(x, name);
        const char *val = get_str(x, hv, 0);
        int ok = 1;
        if (strlen(name) != nlen || !h1_is_token(name, nlen)) {
            err(x, "invalid header name %s (an HTTP token)", quote(&q, name));
            ok = 0;
        } else {
            for (size_t i = 0; i < NFIELDS(reserved_headers); i++) {
                if (!strcasecmp(name, reserved_headers[i])) {
                    err(x, "%s is set by the gateway and cannot be configured",
                        reserved_headers[i]);
                    ok = 0;
                }
            }
        }
        if (val) {
            size_t n = strlen(val);
            for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)val[i];
                if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                    err(x, "control character 0x%02x at offset %zu of the value", ch, i);
                    ok = 0;
                    break;
                }
            }
            if (ok && n &&
                (val[0] == ' ' || val[0] == '\t' || val[n - 1] == ' ' || val[n - 1] == '\t')) {
                err(x, "the value must not start or end with whitespace");
                ok = 0;
            }
        }
        if (ok && val) {
            struct adm_header *h = &r->response.headers[r->response.nheaders++];
            h->name = xstrdup(x, name);
            h->value = xstrdup(x, val);
        }
        path_pop(x, mark);
    }
}

static void response_body(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 0);
    if (!s)
        return;
    free(r->response.body);
    r->response.body = xstrdup(x, s);
    r->response.body_len = strlen(s);
}

static const struct field response_fields[] = {
    {.key = "status",
     .kind = FK_UINT,
     .off = offsetof(struct adm_route, response.status),
     .min = 200,
     .max = 599},
    {.key = "headers", .kind = FK_FN, .fn = response_headers},
    {.key = "body", .kind = FK_FN, .fn = response_body},
};

static void route_response(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (!want_object(x, v))
        return;
    parse_fields(x, v, response_fields, NFIELDS(response_fields), r);
    if ((r->response.status == 204 || r->response.status == 304) && r->response.body_len)
        err_key(x, "body", "a %u response has no body", r->response.status);
}

static void redirect_status(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    long long s;
    if (get_int(x, v, 300, 399, &s) < 0)
        return;
    if (s != 301 && s != 302 && s != 303 && s != 307 && s != 308) {
        err(x, "must be one of 301, 302, 303, 307, 308 (got %lld)", s);
        return;
    }
    r->redirect.status = (unsigned)s;
}

static void redirect_location(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    for (size_t i = 0; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f) {
            err(x, "%s at offset %zu (a URI has no spaces or control characters)",
                ch == ' ' ? "space" : "control character", i);
            return;
        }
    }
    r->redirect.location = xstrdup(x, s);
}

static const struct field redirect_fields[] = {
    {.key = "status", .kind = FK_FN, .fn = redirect_status},
    {.key = "location", .kind = FK_FN, .flags = F_REQUIRED, .fn = redirect_location},
};

static void route_redirect(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    if (want_object(x, v))
        parse_fields(x, v, redirect_fields, NFIELDS(redirect_fields), r);
}

static void route_strip_prefix(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        err(x, "must start with '/'");
        return;
    }
    r->strip_prefix = xstrdup(x, s);
}

/* Checks the syntax of a rewrite template: '/' first, visible ASCII except
 * '#', {name} references. Parameter names are checked against the pattern
 * later (route_check_rewrite). */
static void route_rewrite(struct ctx *x, const json_t *v, void *target)
{
    struct adm_route *r = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    if (s[0] != '/') {
        err(x, "must start with '/'");
        return;
    }
    for (size_t i = 0; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '{') {
            size_t j = i + 1;
            while (s[j] && (is_alnum((unsigned char)s[j]) || s[j] == '_'))
                j++;
            if (s[j] != '}') {
                err(x,
                    s[j] ? "invalid parameter name at offset %zu"
                         : "unterminated '{' at offset %zu",
                    s[j] ? j : i);
                return;
            }
            if (j == i + 1) {
                err(x, "empty parameter name at offset %zu", i);
                return;
            }
            i = j;
        } else if (ch == '}') {
            err(x, "stray '}' at offset %zu", i);
            return;
        } else if (ch <= 0x20 || ch >= 0x7f || ch == '#') {
            err(x, "invalid character at offset %zu (percent-encode it)", i);
            return;
        }
    }
    r->rewrite = xstrdup(x, s);
}

static const struct field route_fields[] = {
    {.key = "id", .kind = FK_FN, .flags = F_REQUIRED, .fn = route_id},
    {.key = "host", .kind = FK_FN, .fn = route_host},
    {.key = "methods", .kind = FK_FN, .fn = route_methods},
    {.key = "path", .kind = FK_FN, .flags = F_REQUIRED, .fn = route_path},
    {.key = "upstream", .kind = FK_FN, .fn = route_upstream},
    {.key = "response", .kind = FK_FN, .fn = route_response},
    {.key = "redirect", .kind = FK_FN, .fn = route_redirect},
    {.key = "strip_prefix", .kind = FK_FN, .fn = route_strip_prefix},
    {.key = "rewrite", .kind = FK_FN, .fn = route_rewrite},
    {.key = "timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_route, timeout_ms),
     .min = 1,
     .max = MAX_MS},
};

enum {
    RF_ID,
    RF_HOST,
    RF_METHODS,
    RF_PATH,
    RF_UPSTREAM,
    RF_RESPONSE,
    RF_REDIRECT,
    RF_STRIP,
    RF_REWRITE,
    RF_TIMEOUT,
};
#define RBIT(f) (UINT32_C(1) << (f))

/* Whether pattern <p> has a parameter (or catch-all) called <name>/<len>. */
static int pattern_has_param(const char *p, const char *name, size_t len)
{
    for (const char *o = strchr(p, '{'); o; o = strchr(o + 1, '{')) {
        const char *e = strchr(o, '}');
        if (!e)
            return 0;
        if ((size_t)(e - o - 1) == len && !memcmp(o + 1, name, len))
            return 1;
    }
    return 0;
}

static void pattern_param_list(const char *p, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (const char *b = strchr(p, '{'); b && o < cap; b = strchr(b + 1, '{')) {
        const char *e = strchr(b, '}');
        if (!e)
            break;
        int n = snprintf(buf + o, cap - o, "%s%.*s", o ? ", " : "", (int)(e - b - 1), b + 1);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* Every {name} of the rewrite template names a parameter of the pattern. */
static void route_check_rewrite(struct ctx *x, const struct adm_route *r)
{
    const char *s = r->rewrite;
    for (const char *o = strchr(s, '{'); o; o = strchr(o + 1, '{')) {
        const char *e = strchr(o, '}');
        size_t len = (size_t)(e - o - 1);
        if (pattern_has_param(r->pattern, o + 1, len))
            continue;
        char have[200];
        pattern_param_list(r->pattern, have, sizeof(have));
        if (have[0])
            err_key(x, "rewrite", "unknown parameter \"%.*s\" at offset %zu (the pattern has: %s)",
                    (int)len, o + 1, (size_t)(o - s), have);
        else
            err_key(x, "rewrite",
                    "unknown parameter \"%.*s\" at offset %zu (the pattern has no parameters)",
                    (int)len, o + 1, (size_t)(o - s));
    }
}

/* Builds r->pattern and checks it with the router; maps the router's offset
 * back to "host" or "path". Returns 0 when the pattern is valid. */
static int route_check_pattern(struct ctx *x, struct adm_route *r)
{
    size_t hl = r->host ? strlen(r->host) : 0, pl = strlen(r->path);
    r->pattern = xcalloc(x, hl + pl + 1, 1);
    if (!r->pattern)
        return -1;
    if (hl)
        memcpy(r->pattern, r->host, hl);
    memcpy(r->pattern + hl, r->path, pl + 1);

    struct rt_error e;
    memset(&e, 0, sizeof(e));
    if (rt_pattern_check(r->pattern, &e) == 0)
        return 0;
    if (e.code == RT_ENOMEM) {
        x->nomem = 1;
    } else if (hl && e.offset < hl) {
        err_key(x, "host", "invalid host pattern at offset %zu: %s", e.offset, e.msg);
    } else {
        err_key(x, "path", "invalid pattern at offset %zu: %s", e.offset - hl, e.msg);
    }
    return -1;
}

/* The static text every path the pattern matches starts with. */
static size_t static_prefix_len(const char *path)
{
    size_t n = strcspn(path, "{");
    if (path[n] == '{' && n > 0 && path[n - 1] == '*')
        n--;
    return n;
}

/* Checks across a route's keys once they are all parsed. */
static void route_check(struct ctx *x, struct adm_route *r, uint32_t seen, size_t idx)
{
    static const int actions[] = {RF_UPSTREAM, RF_RESPONSE, RF_REDIRECT};
    const char *first = NULL;

    for (size_t i = 0; i < NFIELDS(actions); i++) {
        if (!(seen & RBIT(actions[i])))
            continue;
        if (first)
            err_key(x, route_fields[actions[i]].key,
                    "a route has exactly one action, and this one already has \"%s\"", first);
        else {
            first = route_fields[actions[i]].key;
            r->action = (enum adm_action)(ADM_ACTION_UPSTREAM + i);
        }
    }
    if (!first)
        err(x, "needs an action: one of \"upstream\", \"response\", \"redirect\"");
    if (first && r->action != ADM_ACTION_UPSTREAM) {
        static const int upstream_only[] = {RF_STRIP, RF_REWRITE, RF_TIMEOUT};
        for (size_t i = 0; i < NFIELDS(upstream_only); i++)
            if (seen & RBIT(upstream_only[i]))
                err_key(x, route_fields[upstream_only[i]].key,
                        "only allowed with \"upstream\" (this route has \"%s\")", first);
    }
    if ((seen & RBIT(RF_STRIP)) && (seen & RBIT(RF_REWRITE)))
        err_key(x, "rewrite", "not allowed together with \"strip_prefix\"");
    x->route_timeout[idx] = (seen & RBIT(RF_TIMEOUT)) != 0;

    /* Without a valid path, host and methods there is nothing to check
     * against the router. */
    if (!r->path || ((seen & RBIT(RF_HOST)) && !r->host) ||
        ((seen & RBIT(RF_METHODS)) && !r->methods))
        return;
    if (route_check_pattern(x, r) < 0)
        return;
    x->route_ok[idx] = 1;
    if (r->rewrite)
        route_check_rewrite(x, r);
    if (r->strip_prefix) {
        size_t sp = strlen(r->strip_prefix);
        if (sp > static_prefix_len(r->path) || memcmp(r->strip_prefix, r->path, sp))
            err_key(x, "strip_prefix",
                    "is not a prefix of every path the route matches (the path pattern starts "
                    "with \"%.*s\")",
                    (int)static_prefix_len(r->path), r->path);
    }
}

static void parse_routes(struct ctx *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!want_array(x, v))
        return;
    size_t n = json_array_size(v);
    c->routes = xcalloc(x, n, sizeof(*c->routes));
    x->route_ok = xcalloc(x, n, 1);
    x->route_timeout = xcalloc(x, n, 1);
    json_t *ids = json_object();
    if (!c->routes || !x->route_ok || !x->route_timeout || !ids) {
        x->nomem = 1;
        json_decref(ids);
        return;
    }
    c->nroutes = n;
    for (size_t i = 0; i < n && !x->nomem; i++) {
        size_t mark = path_push_index(x, i);
        const json_t *rv = json_array_get(v, i);
        struct adm_route *r = &c->routes[i];
        r->response.status = 200;
        r->redirect.status = 302;
        if (want_object(x, rv)) {
            uint32_t seen = parse_fields(x, rv, route_fields, NFIELDS(route_fields), r);
            route_check(x, r, seen, i);
        }
        if (!r->response.body)
            r->response.body = xstrdup(x, "");
        if (r->id) {
            json_t *other = json_object_get(ids, r->id);
            struct qbuf q;
            if (other)
                err_key(x, "id", "duplicate route id %s (also /routes/%lld)", quote(&q, r->id),
                        (long long)json_integer_value(other));
            else if (json_object_set_new(ids, r->id, json_integer((json_int_t)i)) < 0)
                x->nomem = 1;
        }
        path_pop(x, mark);
    }
    json_decref(ids);
}

/* ------------------------------------------------------------------------ */
/* the other top-level keys                                                 */

static void parse_trusted_proxies(struct ctx *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    if (!want_array(x, v))
        return;
    size_t n = json_array_size(v);
    c->trusted_proxies = xcalloc(x, n, sizeof(*c->trusted_proxies));
    if (!c->trusted_proxies)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t mark = path_push_index(x, i);
        const char *s = get_str(x, json_array_get(v, i), 1);
        char why[128];
        struct qbuf q;
        if (s) {
            if (adm_cidr_parse(&c->trusted_proxies[c->ntrusted_proxies], s, why, sizeof(why)) < 0)
                err(x, "invalid CIDR %s: %s", quote(&q, s), why);
            else
                c->ntrusted_proxies++;
        }
        path_pop(x, mark);
    }
}

static void router_trailing_slash(struct ctx *x, const json_t *v, void *target)
{
    static const char *const names[] = {"strict", "redirect", "relaxed"};
    struct adm_router *r = target;
    int i = get_enum(x, v, names, NFIELDS(names));
    if (i >= 0)
        r->trailing_slash = (enum rt_trailing_slash)i; /* same order as the enum */
}

static const struct field router_fields[] = {
    {.key = "trailing_slash", .kind = FK_FN, .fn = router_trailing_slash},
    {.key = "auto_options", .kind = FK_BOOL, .off = offsetof(struct adm_router, auto_options)},
    {.key = "merge_slashes", .kind = FK_BOOL, .off = offsetof(struct adm_router, merge_slashes)},
};

#define LIMIT(k, lo, hi)                                                                           \
    {                                                                                              \
        .key = #k, .kind = FK_UINT, .off = offsetof(struct adm_limits, k), .min = lo, .max = hi    \
    }
static const struct field limits_fields[] = {
    LIMIT(max_request_line, 1, 1 << 20),
    LIMIT(max_header_bytes, 1, 16 << 20),
    LIMIT(max_headers, 1, 10000),
    {.key = "max_body_bytes",
     .kind = FK_U64,
     .off = offsetof(struct adm_limits, max_body_bytes),
     .min = 0,
     .max = 1LL << 50},
    LIMIT(max_connections, 1, 10000000),
};

#define TIMEOUT(k)                                                                                 \
    {                                                                                              \
        .key = #k, .kind = FK_UINT, .off = offsetof(struct adm_timeouts, k), .min = 1,             \
        .max = MAX_MS                                                                              \
    }
static const struct field timeouts_fields[] = {
    TIMEOUT(client_header_ms),
    TIMEOUT(client_idle_ms),
    TIMEOUT(client_body_ms),
    TIMEOUT(upstream_connect_ms),
    TIMEOUT(upstream_response_ms),
    TIMEOUT(upstream_idle_ms),
    TIMEOUT(drain_ms),
};

static void admin_address(struct ctx *x, const json_t *v, void *target)
{
    struct adm_admin *a = target;
    const char *s = get_str(x, v, 1);
    char why[128];
    struct qbuf q;

    if (!s)
        return;
    adm_addr_free(&a->addr);
    if (adm_addr_parse(&a->addr, s, 0, why, sizeof(why)) < 0) {
        if (errno == ENOMEM)
            x->nomem = 1;
        else
            err(x, "invalid address %s: %s", quote(&q, s), why);
    }
}

static const struct field admin_fields[] = {
    {.key = "address", .kind = FK_FN, .fn = admin_address},
    {.key = "token_file", .kind = FK_PATH, .off = offsetof(struct adm_admin, token_file)},
    {.key = "state_dir", .kind = FK_PATH, .off = offsetof(struct adm_admin, state_dir)},
    {.key = "heap_reserve_mb",
     .kind = FK_UINT,
     .off = offsetof(struct adm_admin, heap_reserve_mb),
     .min = 0,
     .max = 1024},
};

/* parse_<name>(): the nested object c-><name> through its key table. */
#define SECTION(name, table)                                                                       \
    static void parse_##name(struct ctx *x, const json_t *v, void *target)                         \
    {                                                                                              \
        struct adm_config *c = target;                                                             \
        if (want_object(x, v))                                                                     \
            parse_fields(x, v, table, NFIELDS(table), &c->name);                                   \
    }
SECTION(router, router_fields)
SECTION(limits, limits_fields)
SECTION(timeouts, timeouts_fields)
SECTION(admin, admin_fields)

static void parse_access_log(struct ctx *x, const json_t *v, void *target)
{
    struct adm_config *c = target;
    const char *s = get_str(x, v, 1);
    if (!s)
        return;
    free(c->access_log.path);
    c->access_log.path = NULL;
    if (!strcmp(s, "stdout"))
        c->access_log.target = ADM_LOG_STDOUT;
    else if (!strcmp(s, "stderr"))
        c->access_log.target = ADM_LOG_STDERR;
    else if (!strcmp(s, "off"))
        c->access_log.target = ADM_LOG_OFF;
    else if ((c->access_log.path = get_pathname(x, v)))
        c->access_log.target = ADM_LOG_FILE;
}

static const struct field root_fields[] = {
    {.key = "workers",
     .kind = FK_UINT,
     .off = offsetof(struct adm_config, workers),
     .min = 1,
     .max = 256},
    {.key = "listeners", .kind = FK_FN, .flags = F_REQUIRED, .fn = parse_listeners},
    {.key = "upstreams", .kind = FK_FN, .fn = parse_upstreams},
    {.key = "routes", .kind = FK_FN, .fn = parse_routes},
    {.key = "router", .kind = FK_FN, .fn = parse_router},
    {.key = "trusted_proxies", .kind = FK_FN, .fn = parse_trusted_proxies},
    {.key = "limits", .kind = FK_FN, .fn = parse_limits},
    {.key = "timeouts", .kind = FK_FN, .fn = parse_timeouts},
    {.key = "access_log", .kind = FK_FN, .fn = parse_access_log},
    {.key = "admin", .kind = FK_FN, .fn = parse_admin},
};

/* ------------------------------------------------------------------------ */
/* building the router table                                                */

/* "GET,POST" or "any method" for <r>. */
static void route_methods_text(const struct adm_route *r, char *buf, size_t cap)
{
    size_t o = 0;
    if (!r || !r->nmethods) {
        snprintf(buf, cap, "any method");
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < r->nmethods && o < cap; i++) {
        int n = snprintf(buf + o, cap - o, "%s%s", i ? "," : "", r->methods[i]);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* Inserts the routes of <c> (only those with ok[i], when <ok> is given) into
 * a new table. Errors go to <errs>, counted in *nerr; out of memory sets
 * *nomem. Returns the table, or NULL when anything failed. */
static rt_table *build_routes(const struct adm_config *c, const unsigned char *ok,
                              void *(*make_udata)(const struct adm_route *r, void *arg),
                              void (*udata_free)(void *udata), void *arg, struct adm_errors *errs,
                              size_t *nerr, int *nomem)
{
    struct rt_options o = {.trailing_slash = c->router.trailing_slash,
                           .auto_options = c->router.auto_options};
    rt_table *t = rt_table_new(&o, udata_free);
    rt_txn *tx = t ? rt_txn_begin(t) : NULL;
    size_t failed = 0;

    if (!tx) {
        *nomem = 1;
        goto fail_txn;
    }
    for (size_t i = 0; i < c->nroutes && !*nomem; i++) {
        const struct adm_route *r = &c->routes[i];
        if (ok ? !ok[i] : !r->pattern)
            continue;
        void *udata = make_udata ? make_udata(r, arg) : (void *)r;
        if (!udata) {
            *nomem = 1;
            break;
        }
        struct rt_error e;
        memset(&e, 0, sizeof(e));
        if (rt_txn_insert(tx, (const char *const *)r->methods, r->nmethods, r->pattern, r->id,
                          udata, &e) == 0)
            continue;
        if (make_udata && udata_free)
            udata_free(udata);
        failed++;
        char path[64];
        snprintf(path, sizeof(path), "/routes/%zu/%s", i,
                 e.code == RT_ELIMIT && r->nmethods ? "methods" : "path");
        int rc;
        if (e.code == RT_ENOMEM) {
            *nomem = 1;
            rc = 0;
        } else if (e.code == RT_ECONFLICT && e.other) {
            /* our own udata is the route; otherwise find it by its id */
            const char *oname = rt_route_name(e.other);
            const struct adm_route *other = !make_udata ? rt_route_udata(e.other)
                                            : oname     ? adm_config_route(c, oname)
                                                        : NULL;
            char mtext[160];
            route_methods_text(other, mtext, sizeof(mtext));
            if (oname)
                rc = adm_errors_add(errs, path, "conflicts with route \"%s\" (%s %s)", oname, mtext,
                                    rt_route_pattern(e.other));
            else if (other)
                rc = adm_errors_add(errs, path, "conflicts with /routes/%zu (%s %s)",
                                    (size_t)(other - c->routes), mtext, rt_route_pattern(e.other));
            else
                rc = adm_errors_add(errs, path, "conflicts with another route (%s)",
                                    rt_route_pattern(e.other));
        } else {
            rc = adm_errors_add(errs, path, "%s", e.msg);
        }
        (*nerr)++;
        if (rc < 0)
            *nomem = 1;
    }
    if (failed || *nomem)
        goto fail_insert;
    rt_table *next = rt_txn_commit(tx);
    rt_table_free(t);
    if (!next)
        *nomem = 1;
    return next;

fail_insert:
    rt_txn_abort(tx);
fail_txn:
    rt_table_free(t);
    return NULL;
}

rt_table *adm_config_build_routes(const struct adm_config *c,
                                  void *(*make_udata)(const struct adm_route *r, void *arg),
                                  void (*udata_free)(void *udata), void *arg,
                                  struct adm_errors *errs)
{
    struct adm_errors local;
    size_t nerr = 0;
    int nomem = 0;

    adm_errors_init(&local);
    rt_table *t =
        build_routes(c, NULL, make_udata, udata_free, arg, errs ? errs : &local, &nerr, &nomem);
    if (nomem && errs)
        errs->nomem = 1;
    adm_errors_clear(&local);
    return t;
}

/* ------------------------------------------------------------------------ */
/* checks across the document                                               */

static void check_cross(struct ctx *x)
{
    struct adm_config *c = x->c;
    char path[64];
    struct qbuf q;

    for (size_t i = 0; i < c->nupstreams; i++)
        if (!c->upstreams[i].idle_timeout_ms)
            c->upstreams[i].idle_timeout_ms = c->timeouts.upstream_idle_ms;

    for (size_t i = 0; i < c->nroutes; i++) {
        struct adm_route *r = &c->routes[i];
        if (r->action == ADM_ACTION_UPSTREAM && !x->route_timeout[i])
            r->timeout_ms = c->timeouts.upstream_response_ms;
        if (!r->upstream)
            continue;
        json_t *u = json_object_get(x->upstream_index, r->upstream);
        if (u) {
            r->upstream_index = (size_t)json_integer_value(u);
        } else {
            snprintf(path, sizeof(path), "/routes/%zu/upstream", i);
            err_at(x, path, "unknown upstream %s", quote(&q, r->upstream));
        }
    }

    if (c->admin.addr.text) {
        /* blame the admin address if the document sets it, else the listener */
        int explicit = json_object_get(json_object_get(c->json, "admin"), "address") != NULL;
        for (size_t i = 0; i < c->nlisteners; i++) {
            if (!c->listeners[i].addr.text || !addr_overlaps(&c->admin.addr, &c->listeners[i].addr))
                continue;
            if (explicit) {
                err_at(x, "/admin/address", "overlaps /listeners/%zu/address (%s)", i,
                       c->listeners[i].addr.text);
                break;
            }
            snprintf(path, sizeof(path), "/listeners/%zu/address", i);
            err_at(x, path, "overlaps the admin API's default address %s (set admin.address)",
                   c->admin.addr.text);
        }
    }

    if (c->nroutes && !x->nomem) {
        const struct adm_route_binder *b = x->bind;
        rt_table *t = build_routes(c, x->route_ok, b ? b->make : NULL, b ? b->free : NULL,
                                   b ? b->arg : NULL, x->errs, &x->nerr, &x->nomem);
        if (b && t)
            c->table = t; /* freed with the config if anything failed */
        else
            rt_table_free(t);
    }
}

/* ------------------------------------------------------------------------ */
/* entry points                                                             */

static void config_defaults(struct adm_config *c)
{
    c->router.trailing_slash = RT_TS_STRICT;
    c->router.merge_slashes = 1;
    c->limits = (struct adm_limits){.max_request_line = 8192,
                                    .max_header_bytes = 32768,
                                    .max_headers = 100,
                                    .max_body_bytes = 0,
                                    .max_connections = 10000};
    c->timeouts = (struct adm_timeouts){.client_header_ms = 10000,
                                        .client_idle_ms = 60000,
                                        .client_body_ms = 30000,
                                        .upstream_connect_ms = 5000,
                                        .upstream_response_ms = 60000,
                                        .upstream_idle_ms = 60000,
                                        .drain_ms = 10000};
    c->access_log.target = ADM_LOG_STDOUT;
    c->admin.heap_reserve_mb = 48;
}

/* Validates <root>, whose reference it takes over. */
static struct adm_config *config_build(json_t *root, const struct adm_route_binder *bind,
                                       struct adm_errors *errs)
{
    struct ctx x;
    char why[128];

    memset(&x, 0, sizeof(x));
    x.errs = errs;
    x.bind = bind;
    x.c = calloc(1, sizeof(*x.c));
    x.pcap = 256;
    x.path = malloc(x.pcap);
    x.upstream_index = json_object();
    if (!x.c || !x.path || !x.upstream_index) {
        json_decref(root);
        goto fail;
    }
    x.path[0] = '\0';
    x.c->json = root;
    config_defaults(x.c);
    if (adm_addr_parse(&x.c->admin.addr, "127.0.0.1:9901", 0, why, sizeof(why)) < 0) {
        x.nomem = 1;
        goto fail;
    }

    if (!json_is_object(root))
        err(&x, "the config must be a JSON object, got %s", type_name(root));
    else
        parse_fields(&x, root, root_fields, NFIELDS(root_fields), x.c);
    if (!x.nomem)
        check_cross(&x);
    if (x.nomem || x.nerr)
        goto fail;

    free(x.path);
    free(x.route_ok);
    free(x.route_timeout);
    json_decref(x.upstream_index);
    return x.c;

fail:
    if (x.nomem || !x.c || !x.path || !x.upstream_index) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while validating the config");
    }
    adm_config_free(x.c);
    free(x.path);
    free(x.route_ok);
    free(x.route_timeout);
    json_decref(x.upstream_index);
    return NULL;
}

/* The JSON pointer of the duplicate key jansson stopped at: <pos> is just
 * past the key's closing quote, and everything before it is valid JSON, so a
 * light scan that tracks containers, keys and indexes rebuilds the path.
 * Returns a malloc'd pointer, or NULL (use "" then). */
static char *dup_key_path(const char *s, size_t len, size_t pos)
{
    struct frame {
        int is_obj;
        size_t index;
        size_t kstart, klen;
    } *fr = NULL;
    size_t nfr = 0, cap = 0, i = 0;
    int expect_key = 0;
    char *out = NULL;

    if (pos > len)
        pos = len;
    while (i < pos) {
        char ch = s[i];
        if (ch == '{' || ch == '[') {
            if (nfr == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                struct frame *n = realloc(fr, ncap * sizeof(*n));
                if (!n)
                    goto out;
                fr = n;
                cap = ncap;
            }
            fr[nfr++] = (struct frame){.is_obj = ch == '{'};
            expect_key = ch == '{';
            i++;
        } else if (ch == '}' || ch == ']') {
            if (nfr)
                nfr--;
            i++;
        } else if (ch == ',') {
            if (nfr && fr[nfr - 1].is_obj)
                expect_key = 1;
            else if (nfr)
                fr[nfr - 1].index++;
            i++;
        } else if (ch == ':') {
            expect_key = 0;
            i++;
        } else if (ch == '"') {
            size_t st = i++;
            while (i < len && s[i] != '"')
                i += s[i] == '\\' ? 2 : 1;
            i++;
            if (nfr && fr[nfr - 1].is_obj && expect_key) {
                fr[nfr - 1].kstart = st;
                fr[nfr - 1].klen = (i <= len ? i : len) - st;
            }
        } else {
            i++;
        }
    }

    struct ctx x;
    memset(&x, 0, sizeof(x));
    x.pcap = 64;
    x.path = malloc(x.pcap);
    if (!x.path)
        goto out;
    x.path[0] = '\0';
    for (size_t f = 0; f < nfr; f++) {
        if (!fr[f].is_obj) {
            path_push_index(&x, fr[f].index);
            continue;
        }
        json_t *k = json_loadb(s + fr[f].kstart, fr[f].klen, JSON_DECODE_ANY, NULL);
        if (!json_is_string(k)) {
            json_decref(k);
            x.nomem = 1;
            break;
        }
        path_push_key(&x, json_string_value(k));
        json_decref(k);
    }
    if (x.nomem)
        free(x.path);
    else
        out = x.path;
out:
    free(fr);
    return out;
}

static void report_syntax(struct adm_errors *errs, const char *json, size_t len,
                          const json_error_t *je)
{
    enum json_error_code code = json_error_code(je);
    if (code == json_error_out_of_memory) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while parsing the config");
    } else if (code == json_error_duplicate_key && je->position > 0) {
        char *path = dup_key_path(json, len, (size_t)je->position);
        adm_errors_add(errs, path ? path : "", "duplicate key (line %d, column %d)", je->line,
                       je->column);
        free(path);
    } else if (je->line > 0) {
        adm_errors_add(errs, "", "line %d, column %d: %s", je->line, je->column, je->text);
    } else {
        adm_errors_add(errs, "", "invalid JSON: %s", je->text);
    }
}

struct adm_config *adm_config_parse(const char *json, size_t len, struct adm_errors *errs)
{
    struct adm_errors local;
    json_error_t je;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    if (!json) {
        json = "";
        len = 0;
    }
    struct adm_config *c = NULL;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        report_syntax(errs, json, len, &je);
    else
        c = config_build(root, NULL, errs);
    adm_errors_clear(&local);
    return c;
}

/* A copy of <root> that shares every value below the top level except the
 * routes array, which is copied too: the admin API replaces those two
 * containers' members but never changes a value in place. Sharing instead of
 * a deep copy keeps a 10k-route push from allocating the document twice. */
static json_t *structural_copy(const json_t *root)
{
    json_t *copy, *routes;

    if (!json_is_object(root))
        return json_deep_copy(root);
    if (!(copy = json_copy((json_t *)root)))
        return NULL;
    routes = json_object_get(copy, "routes");
    if (json_is_array(routes) && json_object_set_new(copy, "routes", json_copy(routes)) < 0) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

struct adm_config *adm_config_from_json_bound(const json_t *root,
                                              const struct adm_route_binder *bind,
                                              struct adm_errors *errs)
{
    struct adm_errors local;
    struct adm_config *c = NULL;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    json_t *copy = root ? structural_copy(root) : json_null();
    if (!copy) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while copying the config");
    } else {
        c = config_build(copy, bind, errs);
    }
    adm_errors_clear(&local);
    return c;
}

struct adm_config *adm_config_from_json(const json_t *root, struct adm_errors *errs)
{
    return adm_config_from_json_bound(root, NULL, errs);
}

struct adm_config *adm_config_load_file(const char *path, struct adm_errors *errs)
{
    struct adm_errors local;
    struct adm_config *c = NULL;
    char ebuf[128];
    char *buf = NULL;
    size_t len = 0, cap = 0;

    adm_errors_init(&local);
    if (!errs)
        errs = &local;
    FILE *f = fopen(path, "rb");
    if (!f)
        goto fail_io;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16384;
            if (ncap > MAX_FILE + 1)
                ncap = MAX_FILE + 1;
            if (len == ncap) {
                adm_errors_add(errs, "", "%s: larger than %u bytes", path, MAX_FILE);
                goto fail_read;
            }
            char *nb = realloc(buf, ncap);
            if (!nb) {
                errno = ENOMEM;
                goto fail_io_read;
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                goto fail_io_read;
            break;
        }
    }
    if (len > MAX_FILE) {
        adm_errors_add(errs, "", "%s: larger than %u bytes", path, MAX_FILE);
        goto fail_read;
    }
    fclose(f);
    c = adm_config_parse(buf, len, errs);
    free(buf);
    adm_errors_clear(&local);
    return c;

fail_io_read:
    if (errno == ENOMEM)
        errs->nomem = 1;
    if (strerror_r(errno, ebuf, sizeof(ebuf)) != 0)
        snprintf(ebuf, sizeof(ebuf), "error %d", errno);
    adm_errors_add(errs, "", "%s: %s", path, ebuf);
fail_read:
    fclose(f);
    free(buf);
    adm_errors_clear(&local);
    return NULL;
fail_io:
    if (strerror_r(errno, ebuf, sizeof(ebuf)) != 0)
        snprintf(ebuf, sizeof(ebuf), "error %d", errno);
    adm_errors_add(errs, "", "%s: %s", path, ebuf);
    adm_errors_clear(&local);
    return NULL;
}

static void route_free(struct adm_route *r)
{
    free(r->id);
    free(r->host);
    free(r->path);
    free(r->pattern);
    for (size_t i = 0; i < r->nmethods; i++)
        free(r->methods[i]);
    free(r->methods);
    free(r->upstream);
    free(r->strip_prefix);
    free(r->rewrite);
    for (size_t i = 0; i < r->response.nheaders; i++) {
        free(r->response.headers[i].name);
        free(r->response.headers[i].value);
    }
    free(r->response.headers);
    free(r->response.body);
    free(r->redirect.location);
}

void adm_config_free(struct adm_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nlisteners; i++) {
        adm_addr_free(&c->listeners[i].addr);
        adm_tls_listener_free(c->listeners[i].tls);
    }
    free(c->listeners);
    for (size_t i = 0; i < c->nupstreams; i++) {
        struct adm_upstream *u = &c->upstreams[i];
        for (size_t k = 0; k < u->nservers; k++)
            adm_addr_free(&u->servers[k].addr);
        free(u->servers);
        free(u->name);
        adm_tls_upstream_free(u->tls);
    }
    free(c->upstreams);
    for (size_t i = 0; i < c->nroutes; i++)
        route_free(&c->routes[i]);
    free(c->routes);
    free(c->trusted_proxies);
    free(c->access_log.path);
    adm_addr_free(&c->admin.addr);
    free(c->admin.token_file);
    free(c->admin.state_dir);
    rt_table_free(c->table);
    json_decref(c->json);
    free(c);
}

char *adm_config_canonical(const struct adm_config *c)
{
    return json_dumps(c->json, JSON_SORT_KEYS | JSON_COMPACT);
}

unsigned adm_config_workers(const struct adm_config *c)
{
    if (c->workers)
        return c->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > 256 ? 256 : (unsigned)n;
}

const struct adm_upstream *adm_config_upstream(const struct adm_config *c, const char *name)
{
    for (size_t i = 0; i < c->nupstreams; i++)
        if (c->upstreams[i].name && !strcmp(c->upstreams[i].name, name))
            return &c->upstreams[i];
    return NULL;
}

const struct adm_route *adm_config_route(const struct adm_config *c, const char *id)
{
    for (size_t i = 0; i < c->nroutes; i++)
        if (c->routes[i].id && !strcmp(c->routes[i].id, id))
            return &c->routes[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* the built-in default config                                              */

static const char default_json[] =
    "{\n"
    "  \"listeners\": [{\"address\": \"0.0.0.0:8080\"}],\n"
    "  \"upstreams\": {},\n"
    "  \"routes\": [\n"
    "    {\"id\": \"welcome\", \"methods\": [\"GET\"], \"path\": \"/\",\n"
    "     \"response\": {\"status\": 200,\n"
    "                  \"headers\": {\"Content-Type\": \"text/plain; charset=utf-8\"},\n"
    "                  \"body\": \"Switchyard is running.\\n\\n"
    "This is the built-in default config: this page on GET /, no upstreams yet.\\n"
    "Push your own config to the admin API (loopback only by default):\\n\\n"
    "  curl -X PUT --data-binary @switchyard.json http://127.0.0.1:9901/config\\n\\n"
    "or add an upstream and a route to the running config:\\n\\n"
    "  curl -X PUT http://127.0.0.1:9901/upstreams/app \\\\\\n"
    "       -d '{\\\"servers\\\": [{\\\"address\\\": \\\"127.0.0.1:3000\\\"}]}'\\n"
    "  curl -X POST http://127.0.0.1:9901/routes \\\\\\n"
    "       -d '{\\\"id\\\": \\\"app\\\", \\\"path\\\": \\\"/*{rest}\\\", "
    "\\\"upstream\\\": \\\"app\\\"}'\\n\\n"
    "GET http://127.0.0.1:9901/config shows the live config.\\n\"}}\n"
    "  ],\n"
    "  \"admin\": {\"address\": \"127.0.0.1:9901\"}\n"
    "}\n";

const char *adm_config_default_json(void)
{
    return default_json;
}

struct adm_config *adm_config_default(void)
{
    return adm_config_parse(default_json, sizeof(default_json) - 1, NULL);
}
