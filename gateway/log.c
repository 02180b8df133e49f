/*
 * log.c - the error log (stderr, one line each with time and level, below
 * log_level's threshold: an atomic, so a push changes it at once) and the
 * whole access log: one JSON record per request, formatted into the
 * per-worker buffer, flushed with one write(2) when it fills or once a
 * second.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/log.h"
#include "gateway/clientip.h"
#include "gateway/conn.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The most verbose level written: log_level's threshold, stored by the
 * admin thread as each snapshot is published and read by every thread. */
static _Atomic int log_max = GW_LOG_NOTICE;

void gw_log_set_level(enum adm_log_level l)
{
    static const int max[] = {
        [ADM_LEVEL_ERROR] = GW_LOG_ERROR,
        [ADM_LEVEL_WARN] = GW_LOG_NOTICE,
        [ADM_LEVEL_INFO] = GW_LOG_INFO,
        [ADM_LEVEL_DEBUG] = GW_LOG_DEBUG,
    };
    atomic_store_explicit(&log_max, max[l <= ADM_LEVEL_DEBUG ? l : ADM_LEVEL_WARN],
                          memory_order_relaxed);
}

int gw_log_enabled(int level)
{
    return level <= atomic_load_explicit(&log_max, memory_order_relaxed);
}

void gw_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "notice", "info", "debug"};
    char line[2048];
    struct timespec ts;
    struct tm tm;
    size_t n;
    va_list ap;

    if (!gw_log_enabled(level))
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ [%s] ", ts.tv_nsec / 1000000,
                          names[level < 0 || level > GW_LOG_DEBUG ? 0 : level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    n = strlen(line);
    if (n + 1 < sizeof(line)) {
        line[n++] = '\n';
    } else {
        line[sizeof(line) - 2] = '\n';
        n = sizeof(line) - 1;
    }
    /* one write per line so lines from several threads never interleave */
    if (write(STDERR_FILENO, line, n) < 0)
        (void)errno;
}

void gw_access_flush(struct gw_worker *w)
{
    size_t off = 0;

    while (off < w->log_len) {
        ssize_t k = write(w->proc->access_fd, w->log + off, w->log_len - off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break; /* the log is best effort; never block the worker on it */
        }
        off += (size_t)k;
    }
    w->log_len = 0;
}

void gw_date_update(struct gw_worker *w)
{
    time_t now = time(NULL);
    struct tm tm;

    gmtime_r(&now, &tm);
    w->date_len = strftime(w->date, sizeof(w->date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
}

/* The JSON escape of each byte: 0 copies it, 1 is a backslash before it,
 * 2 is \u00XX. Runs of bytes that copy go out with one memcpy. */
static const unsigned char json_class[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};
static const char hex_lower[] = "0123456789abcdef";

/* The end of the run of bytes from <i> that both escapes copy as they are
 * (json_class 0): four bytes a step while all four copy, then one at a time. */
static size_t plain_run(const unsigned char *u, size_t i, size_t n)
{
    while (i + 4 <= n &&
           !(json_class[u[i]] | json_class[u[i + 1]] | json_class[u[i + 2]] | json_class[u[i + 3]]))
        i += 4;
    while (i < n && !json_class[u[i]])
        i++;
    return i;
}

static char *put_esc(char *p, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t run = plain_run(u, i, n);
        memcpy(p, s + i, run - i);
        p += run - i;
        if (run == n)
            break;
        if (json_class[u[run]] == 1) {
            *p++ = '\\';
            *p++ = (char)u[run];
        } else {
            memcpy(p, "\\u00", 4);
            p[4] = hex_lower[u[run] >> 4];
            p[5] = hex_lower[u[run] & 15];
            p += 6;
        }
        i = run + 1;
    }
    return p;
}

#define PUT_LIT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static const char digits2[] = "00010203040506070809101112131415161718192021222324"
                              "25262728293031323334353637383940414243444546474849"
                              "50515253545556575859606162636465666768697071727374"
                              "75767778798081828384858687888990919293949596979899";

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = sizeof(tmp);

    /* two digits a division, from the right */
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100);
        v /= 100;
        n -= 2;
        memcpy(tmp + n, digits2 + 2 * d, 2);
    }
    if (v >= 10) {
        n -= 2;
        memcpy(tmp + n, digits2 + 2 * v, 2);
    } else {
        tmp[--n] = (char)('0' + v);
    }
    memcpy(p, tmp + n, sizeof(tmp) - n);
    return p + sizeof(tmp) - n;
}

static char *put_int(char *p, int v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)(int64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* printf's "%.3f" of <x>: by integers when the rounding is sure (x * 1000
 * is then within 1e-7 of the exact value, far from a tie), else printf. */
static char *put_ms(char *p, double x)
{
    if (x >= 0 && x < 1e6 && !signbit(x)) {
        double v = x * 1000.0;
        uint64_t r = (uint64_t)v;
        double f = v - (double)r;
        if (f < 0.499999 || f > 0.500001) {
            r += f > 0.5;
            p = put_u64(p, r / 1000);
            *p++ = '.';
            *p++ = (char)('0' + r / 100 % 10);
            *p++ = (char)('0' + r / 10 % 10);
            *p++ = (char)('0' + r % 10);
            return p;
        }
    }
    return p + sprintf(p, "%.3f", x);
}

/* A quoted string, or null for NULL. */
static char *put_str_or_null(char *p, const char *s, size_t n)
{
    if (!s)
        return PUT_LIT(p, "null");
    *p++ = '"';
    memcpy(p, s, n);
    p += n;
    *p++ = '"';
    return p;
}

size_t gw_log_json_max(const struct gw_log_rec *r)
{
    size_t var =
        r->method_len + r->host_len + r->target_len + r->path_len + r->ua_len + r->referer_len;

    /* the fixed part, two doubles as long as printf makes them, and the
     * escaped fields at 6 bytes a byte at most */
    return 1024 + var * 6 + r->client_ip_len + r->route_len + r->upstream_len + r->reqid_len;
}

size_t gw_log_json(struct gw_log_clock *clk, char *out, const struct gw_log_rec *r)
{
    char *p = out;
    long ms = r->now.tv_nsec / 1000000;

    if (!clk->valid || clk->sec != r->now.tv_sec) {
        struct tm tm;
        gmtime_r(&r->now.tv_sec, &tm);
        clk->len = strftime(clk->text, sizeof(clk->text), "%Y-%m-%dT%H:%M:%S", &tm);
        clk->sec = r->now.tv_sec;
        clk->valid = 1;
    }
    p = PUT_LIT(p, "{\"time\":\"");
    memcpy(p, clk->text, clk->len);
    p += clk->len;
    *p++ = '.';
    *p++ = (char)('0' + ms / 100);
    *p++ = (char)('0' + ms / 10 % 10);
    *p++ = (char)('0' + ms % 10);
    p = PUT_LIT(p, "Z\",\"client\":\"");
    memcpy(p, r->client_ip, r->client_ip_len);
    p += r->client_ip_len;
    if (!r->client_derived) {
        *p++ = ':';
        p = put_u64(p, r->client_port);
    }
    p = PUT_LIT(p, "\",\"method\":\"");
    p = put_esc(p, r->method, r->method ? r->method_len : 0);
    p = PUT_LIT(p, "\",\"host\":\"");
    p = put_esc(p, r->host, r->host ? r->host_len : 0);
    p = PUT_LIT(p, "\",\"target\":\"");
    p = put_esc(p, r->target, r->target ? r->target_len : 0);
    p = PUT_LIT(p, "\",\"path\":\"");
    p = put_esc(p, r->path, r->path ? r->path_len : 0);
    p = PUT_LIT(p, "\",\"status\":");
    p = put_int(p, r->status);
    p = PUT_LIT(p, ",\"bytes_in\":");
    p = put_u64(p, r->bytes_in);
    p = PUT_LIT(p, ",\"bytes_out\":");
    p = put_u64(p, r->bytes_out);
    p = PUT_LIT(p, ",\"duration_ms\":");
    p = put_ms(p, r->duration_ms);
    p = PUT_LIT(p, ",\"upstream_ms\":");
    if (r->upstream_ms >= 0)
        p = put_ms(p, r->upstream_ms);
    else
        p = PUT_LIT(p, "null");
    p = PUT_LIT(p, ",\"route\":");
    p = put_str_or_null(p, r->route, r->route_len);
    p = PUT_LIT(p, ",\"upstream\":");
    p = put_str_or_null(p, r->upstream, r->upstream_len);
    p = PUT_LIT(p, ",\"request_id\":\"");
    memcpy(p, r->reqid, r->reqid_len);
    p += strnlen(p, r->reqid_len); /* as "%.*s" did: up to a NUL */
    p = PUT_LIT(p, "\",\"user_agent\":");
    if (r->ua) {
        *p++ = '"';
        p = put_esc(p, r->ua, r->ua_len);
        *p++ = '"';
    } else {
        p = PUT_LIT(p, "null");
    }
    /* the TLS fields, null until the listener is a TLS one */
    p = PUT_LIT(p, ",\"tls_version\":null,\"sni\":null}\n");
    return (size_t)(p - out);
}

/* nginx's log escape (ngx_http_log_escape): '"', '\\', controls and bytes
 * from 0x7f up as \xHH; runs of the other bytes go out with one memcpy. */
static char *put_esc_combined(char *p, const char *s, size_t n)
{
    static const char hex_upper[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t run = plain_run(u, i, n);
        memcpy(p, s + i, run - i);
        p += run - i;
        if (run == n)
            break;
        p[0] = '\\';
        p[1] = 'x';
        p[2] = hex_upper[u[run] >> 4];
        p[3] = hex_upper[u[run] & 15];
        p += 4;
        i = run + 1;
    }
    return p;
}

/* A header's value in quotes, escaped, or "-" when it is absent. */
static char *put_header_combined(char *p, const char *s, size_t n)
{
    *p++ = '"';
    if (s)
        p = put_esc_combined(p, s, n);
    else
        *p++ = '-';
    *p++ = '"';
    return p;
}

size_t gw_log_combined(struct gw_log_clock *clk, char *out, const struct gw_log_rec *r)
{
    char *p = out;

    if (!clk->valid || clk->sec != r->now.tv_sec) {
        struct tm tm;
        localtime_r(&r->now.tv_sec, &tm);
        clk->len = strftime(clk->text, sizeof(clk->text), "%d/%b/%Y:%H:%M:%S %z", &tm);
        clk->sec = r->now.tv_sec;
        clk->valid = 1;
    }
    memcpy(p, r->client_ip, r->client_ip_len);
    p += r->client_ip_len;
    p = PUT_LIT(p, " - - [");
    memcpy(p, clk->text, clk->len);
    p += clk->len;
    p = PUT_LIT(p, "] \"");
    p = put_esc_combined(p, r->method, r->method ? r->method_len : 0);
    *p++ = ' ';
    p = put_esc_combined(p, r->target, r->target ? r->target_len : 0);
    p = PUT_LIT(p, " HTTP/1.");
    p = put_u64(p, r->version_minor);
    p = PUT_LIT(p, "\" ");
    p = put_int(p, r->status);
    *p++ = ' ';
    p = put_u64(p, r->bytes_out);
    *p++ = ' ';
    p = put_header_combined(p, r->referer, r->referer_len);
    *p++ = ' ';
    p = put_header_combined(p, r->ua, r->ua_len);
    *p++ = '\n';
    return (size_t)(p - out);
}

/* <c>'s line, in the format its snapshot names, into the worker's buffer. */
static void log_line(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    const struct h1_request *rq = &c->rp.req;
    const struct h1_header *ua = h1_request_header(rq, "user-agent");
    int combined = c->snap && c->snap->cfg->access_log_format == ADM_LOG_COMBINED;
    const struct h1_header *ref = combined ? h1_request_header(rq, "referer") : NULL;
    size_t cip_len;
    const char *cip = gw_client_ip_text(c, &cip_len);
    struct gw_log_rec r = {
        .client_ip = cip, /* client_ip's address; its port only when it is the peer */
        .client_ip_len = cip_len,
        .client_port = c->peer_port,
        .client_derived = cip != c->peer_ip,
        .method = rq->method.ptr,
        .method_len = rq->method.len,
        .host = rq->host.ptr,
        .host_len = rq->host.len,
        .target = rq->target.ptr,
        .target_len = rq->target.len,
        .path = rq->path,
        .path_len = rq->path_len,
        .ua = ua ? ua->value.ptr : NULL,
        .ua_len = ua ? ua->value.len : 0,
        .status = c->status,
        .bytes_in = c->bytes_in,
        .bytes_out = c->bytes_out,
        .duration_ms = gw_elapsed_ms(&c->t0),
        .upstream_ms = c->up_ms,
        .route = c->sr ? c->sr->id : NULL,
        .route_len = c->sr ? strlen(c->sr->id) : 0,
        .upstream = c->upstream_addr,
        .upstream_len = c->upstream_addr ? strlen(c->upstream_addr) : 0,
        .reqid = c->reqid,
        .reqid_len = c->reqid_len,
        .version_minor = rq->version_minor,
        .referer = ref ? ref->value.ptr : NULL,
        .referer_len = ref ? ref->value.len : 0,
    };
    size_t need;

    need = gw_log_json_max(&r);
    if (w->log_cap - w->log_len < need)
        gw_access_flush(w);
    if (w->log_cap - w->log_len < need)
        return;
    clock_gettime(CLOCK_REALTIME, &r.now);
    if (combined)
        w->log_len += gw_log_combined(&w->log_clock_local, w->log + w->log_len, &r);
    else
        w->log_len += gw_log_json(&w->log_clock, w->log + w->log_len, &r);
    if (w->log_len > w->log_cap / 2)
        gw_access_flush(w);
}

void gw_log_access(struct gw_conn *c)
{
    if (!atomic_load_explicit(&c->w->proc->access_on, memory_order_relaxed))
        return; /* before any field is gathered: a log that is off costs nothing */
    log_line(c);
}
