/*
 * log.c - the error log (stderr, one line each with time and level, below
 * log_level's threshold: an atomic, so a push changes it at once) and the
 * whole access log: one JSON record per request (a tunnel's at its close),
 * formatted into the per-worker buffer, flushed with one write(2) when it
 * is half full or by the worker's sweep (every GW_SWEEP_MS, 100 ms: the
 * most a line waits); what a failed write loses is counted and said,
 * never retried.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/log.h"
#include "gateway/clientip.h"
#include "gateway/conn.h"
#include "gateway/policy.h"
#include "admin/http1/token.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* The last error line this thread wrote, without its time and level: a
 * failed upgrade tells the running process why (main.c). */
static _Thread_local char last_error[512];

const char *gw_log_last_error(void)
{
    return last_error;
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
    if (level == GW_LOG_ERROR)
        snprintf(last_error, sizeof(last_error), "%s", line + n + strspn(line + n, " "));
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

/* Logs <errs> under a "<what>:" line, one error a line; an error about
 * the whole document that already names <what> (the file that cannot be
 * read) is logged alone, so the path is not said twice. */
void gw_log_errors(const char *what, struct adm_errors *errs)
{
    size_t wlen = strlen(what);
    char *s;

    if (errs->n == 1 && !errs->v[0].path[0] && strncmp(errs->v[0].msg, what, wlen) == 0 &&
        errs->v[0].msg[wlen] == ':') {
        gw_log(GW_LOG_ERROR, "%s", errs->v[0].msg);
        return;
    }
    s = adm_errors_format(errs);
    gw_log(GW_LOG_ERROR, "%s:", what);
    if (s) {
        char *line = s, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            gw_log(GW_LOG_ERROR, "  %s", line);
            line = nl + 1;
        }
        free(s);
    }
}

/* Lines the access log loses (a failed write: a full disk, an I/O error,
 * a pipe that takes nothing now; or a line longer than the whole buffer)
 * are counted per worker (/metrics: switchyard_access_log_dropped_lines_total)
 * and said in the error log: at the first loss, then at most once every
 * ACCESS_WARN_MS for the whole process, with the lines lost since the
 * last time it was said. */
#define ACCESS_WARN_MS 10000
static _Atomic long long access_warned; /* gw_now_ms() when last said; 0: never */
static _Atomic uint64_t access_unsaid;  /* lines lost since */

/* <lines> lost by worker <w>: by a write that failed with <err>, or (0)
 * a line too long for the buffer. */
static void access_dropped(struct gw_worker *w, uint64_t lines, int err)
{
    long long now = gw_now_ms();
    long long last = atomic_load_explicit(&access_warned, memory_order_relaxed);
    unsigned long long n;

    gw_count(&w->ctr.access_dropped, lines);
    atomic_fetch_add_explicit(&access_unsaid, lines, memory_order_relaxed);
    if ((last && now - last < ACCESS_WARN_MS) ||
        !atomic_compare_exchange_strong(&access_warned, &last, now ? now : 1))
        return;
    n = atomic_exchange(&access_unsaid, 0);
    gw_log(GW_LOG_ERROR,
           "access log: %llu line%s dropped: %s%s (said at most every %d s; "
           "switchyard_access_log_dropped_lines_total counts them all)",
           n, n == 1 ? "" : "s", err ? "write failed: " : "a line longer than the buffer",
           err ? strerror(err) : "", ACCESS_WARN_MS / 1000);
}

/* The lines in <p>[0..n): those a failed write leaves unwritten, a line cut
 * short included. */
static uint64_t count_lines(const char *p, size_t n)
{
    const char *end = p + n;
    uint64_t lines = 0;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) {
        lines++;
        p++;
    }
    return lines;
}

void gw_access_flush(struct gw_worker *w)
{
    size_t off = 0;

    while (off < w->log_len) {
        ssize_t k = write(w->proc->access_fd, w->log + off, w->log_len - off);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        /* The log is best effort: what is left is dropped, never retried,
         * so the worker neither blocks nor spins on a disk that is full
         * (a write that took nothing counts as failed too). */
        access_dropped(w, count_lines(w->log + off, w->log_len - off), k < 0 ? errno : EIO);
        break;
    }
    w->log_len = 0;
}

void gw_date_update(struct gw_worker *w)
{
    time_t now = time(NULL);
    struct tm tm;

    if (now == w->date_s && w->date_len)
        return;
    w->date_s = now;
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

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether any of the 8 bytes in <x> is 0 (exact as a yes or no). */
static inline uint64_t has_zero(uint64_t x)
{
    return (x - ONES) & ~x & HIGHS;
}

/* Whether any of the 8 bytes in <x> needs an escape in either format
 * (json_class not 0): below 0x20, '"', '\\', 0x7f and up. SWAR: a dozen
 * instructions for 8 bytes, against a table look-up a byte. */
static inline uint64_t any_escape8(uint64_t x)
{
    return (x & HIGHS) | ((x - ONES * 0x20) & ~x & HIGHS) | has_zero(x ^ (ONES * 0x22)) |
           has_zero(x ^ (ONES * 0x5c)) | has_zero(x ^ (ONES * 0x7f));
}

/* <n> bytes of <s> escaped at <p>, JSON's way (\\ before '"' and '\\',
 * \\u00xx for the other json_class bytes) or, for <combined>, nginx's
 * (ngx_http_log_escape: \\xXX for all of them). Eight plain bytes go out
 * with one 8-byte store; only a block with a byte to escape, and the tail,
 * go byte by byte. Nothing is written beyond the escaped bytes. */
static inline __attribute__((always_inline)) char *put_esc_as(char *p, const char *s, size_t n,
                                                              int combined)
{
    static const char hex_upper[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    int run = 0; /* the 8 bytes before <i> went out as they are */

    while (i < n) {
        size_t end;
        uint64_t x;
        while (i + 8 <= n && (memcpy(&x, u + i, 8), !any_escape8(x))) {
            memcpy(p, &x, 8);
            p += 8;
            i += 8;
            run = 1;
        }
        if (i == n)
            break;
        /* a tail after plain bytes: its last 8 bytes, if plain, go out with
         * one store over the copies of the bytes before it */
        if (run && i + 8 > n && (memcpy(&x, u + n - 8, 8), !any_escape8(x))) {
            memcpy(p - (8 - (n - i)), &x, 8);
            p += n - i;
            break;
        }
        run = 0;
        for (end = i + 8 < n ? i + 8 : n; i < end; i++) {
            unsigned char ch = u[i];
            if (!json_class[ch]) {
                *p++ = (char)ch;
            } else if (combined) {
                p[0] = '\\';
                p[1] = 'x';
                p[2] = hex_upper[ch >> 4];
                p[3] = hex_upper[ch & 15];
                p += 4;
            } else if (json_class[ch] == 1) {
                p[0] = '\\';
                p[1] = (char)ch;
                p += 2;
            } else {
                memcpy(p, "\\u00", 4);
                p[4] = hex_lower[ch >> 4];
                p[5] = hex_lower[ch & 15];
                p += 6;
            }
        }
    }
    return p;
}

static char *put_esc(char *p, const char *s, size_t n)
{
    return put_esc_as(p, s, n, 0);
}

#define PUT_LIT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static const char digits2[] = "00010203040506070809101112131415161718192021222324"
                              "25262728293031323334353637383940414243444546474849"
                              "50515253545556575859606162636465666768697071727374"
                              "75767778798081828384858687888990919293949596979899";

static char *put_u64(char *p, uint64_t v)
{
    static const uint64_t pow10[] = {1ull,
                                     10ull,
                                     100ull,
                                     1000ull,
                                     10000ull,
                                     100000ull,
                                     1000000ull,
                                     10000000ull,
                                     100000000ull,
                                     1000000000ull,
                                     10000000000ull,
                                     100000000000ull,
                                     1000000000000ull,
                                     10000000000000ull,
                                     100000000000000ull,
                                     1000000000000000ull,
                                     10000000000000000ull,
                                     100000000000000000ull,
                                     1000000000000000000ull,
                                     10000000000000000000ull};
    size_t n;
    char *end;

    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    /* the number of digits: log10 from the bit length (1233 / 4096 is
     * just above log10(2)), one less below that power of ten */
    n = (size_t)((64 - __builtin_clzll(v)) * 1233) >> 12;
    n += v >= pow10[n];
    /* the digits in place, two a division, from the right */
    end = p + n;
    p = end;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, digits2 + 2 * d, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digits2 + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return end;
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
    /* a Basic user name is at most 3/4 of its Authorization value */
    size_t var = r->method_len + r->host_len + r->target_len + r->path_len + r->ua_len +
                 r->referer_len + r->auth_len + r->sni_len;

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
    if (clk->len == 19) /* years 1000-9999: a copy of known size, no call */
        memcpy(p, clk->text, 19);
    else
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
    if (r->target && r->path && r->path_len <= r->target_len &&
        memcmp(r->target, r->path, r->path_len) == 0) {
        /* the path is where the target starts (no query, nothing that
         * normalizing changed: the usual case): escaped once, copied */
        char *t = p;
        size_t tn;
        p = put_esc(p, r->target, r->path_len);
        tn = (size_t)(p - t);
        p = put_esc(p, r->target + r->path_len, r->target_len - r->path_len);
        p = PUT_LIT(p, "\",\"path\":\"");
        memcpy(p, t, tn);
        p += tn;
    } else {
        p = put_esc(p, r->target, r->target ? r->target_len : 0);
        p = PUT_LIT(p, "\",\"path\":\"");
        p = put_esc(p, r->path, r->path ? r->path_len : 0);
    }
    p = PUT_LIT(p, "\",\"status\":");
    p = put_int(p, r->status);
    if (r->grpc_status < 0) {
        p = PUT_LIT(p, ",\"grpc_status\":null,\"bytes_in\":");
    } else {
        p = PUT_LIT(p, ",\"grpc_status\":");
        p = put_int(p, r->grpc_status);
        p = PUT_LIT(p, ",\"bytes_in\":");
    }
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
    if (r->reqid_len == 24) /* the gateway's: a copy of known size, no call */
        memcpy(p, r->reqid, 24);
    else
        memcpy(p, r->reqid, r->reqid_len);
    p += r->reqid_len;
    p = PUT_LIT(p, "\",\"user_agent\":");
    if (r->ua) {
        *p++ = '"';
        p = put_esc(p, r->ua, r->ua_len);
        *p++ = '"';
    } else {
        p = PUT_LIT(p, "null");
    }
    /* the TLS fields, null on a plain connection (one copy); the SNI is
     * the client's bytes (OpenSSL refuses only a NUL in it): escaped */
    if (!r->tls_version && !r->sni) {
        p = PUT_LIT(p, ",\"tls_version\":null,\"sni\":null}\n");
        return (size_t)(p - out);
    }
    p = PUT_LIT(p, ",\"tls_version\":");
    p = put_str_or_null(p, r->tls_version, r->tls_version ? strlen(r->tls_version) : 0);
    p = PUT_LIT(p, ",\"sni\":");
    if (r->sni) {
        *p++ = '"';
        p = put_esc(p, r->sni, r->sni_len);
        *p++ = '"';
    } else {
        p = PUT_LIT(p, "null");
    }
    p = PUT_LIT(p, "}\n");
    return (size_t)(p - out);
}

/* nginx's log escape (ngx_http_log_escape): '"', '\\', controls and bytes
 * from 0x7f up as \\xHH. */
static char *put_esc_combined(char *p, const char *s, size_t n)
{
    return put_esc_as(p, s, n, 1);
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

/* base64's value of each byte (the standard alphabet), 64: not in it. */
static const unsigned char b64_value[256] = {
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 62, 64, 64, 64, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 64, 64, 64, 64, 64, 64, 64, 0,  1,  2,  3,  4,  5,  6,
    7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 64, 64, 64, 64, 64,
    64, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
    49, 50, 51, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
};

/* $remote_user as nginx finds it (ngx_http_auth_basic_user): <s> (<n>
 * bytes, an Authorization value) is "Basic " in any case, spaces, then
 * base64 up to its first '=' (every byte before it in the alphabet, not 1
 * past a multiple of 4); the user is what it decodes to before the first
 * ':', escaped. "-" for anything else, an empty user included. */
static char *put_basic_user(char *p, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    char chunk[192];
    size_t len = 0, i, k, user = 0;
    unsigned acc, bits;

    if (!s || n < 6 || strncasecmp(s, "Basic ", 6) != 0)
        return PUT_LIT(p, "-");
    for (i = 6; i < n && u[i] == ' '; i++)
        ;
    u += i;
    n -= i;
    while (len < n && u[len] != '=') {
        if (b64_value[u[len]] == 64)
            return PUT_LIT(p, "-");
        len++;
    }
    if (len % 4 == 1)
        return PUT_LIT(p, "-");
    /* twice through the base64: the user's length (the bytes before the
     * first ':'), then its bytes, a chunk at a time, escaped */
    for (int pass = 0; pass < 2; pass++) {
        acc = bits = 0;
        k = 0;
        for (i = 0; i < len; i++) {
            acc = (acc << 6 | b64_value[u[i]]) & 0xffffff;
            bits += 6;
            if (bits < 8)
                continue;
            bits -= 8;
            chunk[k] = (char)(acc >> bits);
            if (pass == 0 ? chunk[k] == ':' : k == user)
                break;
            if (++k == sizeof(chunk)) {
                if (pass == 0) {
                    user += k;
                } else {
                    p = put_esc_combined(p, chunk, k);
                    user -= k;
                }
                k = 0;
            }
        }
        if (pass == 0) {
            if (i == len || user + k == 0)
                return PUT_LIT(p, "-"); /* no ':', or an empty user: no user */
            user += k;
        }
    }
    return put_esc_combined(p, chunk, k);
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
    p = PUT_LIT(p, " - ");
    p = put_basic_user(p, r->auth, r->auth_len);
    p = PUT_LIT(p, " [");
    memcpy(p, clk->text, clk->len);
    p += clk->len;
    p = PUT_LIT(p, "] \"");
    p = put_esc_combined(p, r->method, r->method ? r->method_len : 0);
    *p++ = ' ';
    p = put_esc_combined(p, r->target, r->target ? r->target_len : 0);
    *p++ = ' ';
    memcpy(p, r->proto ? r->proto : "HTTP/1.1", 8);
    p += 8;
    p = PUT_LIT(p, "\" ");
    p = put_int(p, r->status);
    *p++ = ' ';
    p = put_u64(p, r->body_bytes);
    *p++ = ' ';
    p = put_header_combined(p, r->referer, r->referer_len);
    *p++ = ' ';
    p = put_header_combined(p, r->ua, r->ua_len);
    *p++ = '\n';
    return (size_t)(p - out);
}

/* The first User-Agent of <rq> into <ua>, and for <combined> the first
 * Referer and Authorization: one walk, names compared only when their
 * length fits. */
static void log_headers(const struct h1_request *rq, int combined, const struct h1_header **ua,
                        const struct h1_header **ref, const struct h1_header **auth)
{
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        switch (h->name.len) {
        case 10:
            if (!*ua && h1_name_is(&h->name, "user-agent"))
                *ua = h;
            break;
        case 7:
            if (combined && !*ref && h1_name_is(&h->name, "referer"))
                *ref = h;
            break;
        case 13:
            if (combined && !*auth && h1_name_is(&h->name, "authorization"))
                *auth = h;
            break;
        default:
            break;
        }
    }
}

/* What a line takes from its request's snapshot: the format, the route's
 * id and the server's address (NULL: none). A tunnel's line keeps copies
 * of them (struct gw_log_later), as its snapshot is released at the 101. */
struct log_src {
    int combined;
    const char *route, *upstream;
    size_t route_len, upstream_len;
};

struct gw_log_later {
    struct log_src src;
    char text[]; /* the route's id and the server's address, NUL-terminated */
};

struct tgt_buf {
    char *b;
    size_t n, cap;
};

/* Bytes past the buffer are left out: what is cut is never the stripped
 * parameter, which the sink never sees. */
static void tgt_sink(void *ctx, const char *p, size_t n)
{
    struct tgt_buf *t = ctx;

    if (n > t->cap - t->n)
        n = t->cap - t->n;
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

/* The target of <rec> without every query parameter named <name> (an
 * api_key's, kept from the upstream), copied to <buf> (<cap> bytes) when
 * one was there; cut at <cap> bytes. */
/* The length of target <t> (<n> bytes) before its query. */
static size_t target_head(const char *t, size_t n)
{
    const char *q = memchr(t, '?', n);
    return q ? (size_t)(q - t) : n;
}

static void strip_target(struct gw_log_rec *rec, const char *name, size_t nlen, char *buf,
                         size_t cap)
{
    const char *t = rec->target, *q = t ? memchr(t, '?', rec->target_len) : NULL;
    struct tgt_buf tb = {buf, 0, cap};
    size_t head, qn;

    if (!q)
        return;
    head = (size_t)(q - t);
    qn = rec->target_len - head - 1;
    tgt_sink(&tb, t, head);
    tgt_sink(&tb, "?", 1);
    if (gw_policy_strip_query(q + 1, qn, name, nlen, tgt_sink, &tb) == qn)
        return;                          /* nothing stripped: the target as it is */
    if (tb.n == head + 1 && tb.n <= cap) /* nothing left but the '?' */
        tb.n--;
    rec->target = buf;
    rec->target_len = tb.n;
}

/* <c>'s line, in the format <src> names, into the worker's buffer. */
static void log_line(struct gw_req *r, double duration_ms, const struct log_src *src)
{
    struct gw_worker *w = r->c->w;
    const struct h1_request *rq = &r->rp->req;
    int combined = src->combined;
    const struct h1_header *ua = NULL, *ref = NULL, *auth = NULL;
    size_t cip_len;
    const char *cip = gw_client_ip_text(r, &cip_len);
    const char *tls_version = NULL, *sni = NULL;
    size_t sni_len = 0;
    struct gw_log_rec rec;

    log_headers(rq, combined, &ua, &ref, &auth);
    if (gw_io_is_tls(&r->c->io)) /* a plain connection pays this compare only */
        gw_tls_log_fields(&r->c->io, &tls_version, &sni, &sni_len);
    rec = (struct gw_log_rec){
        .client_ip = cip, /* client_ip's address; its port only when it is the peer */
        .client_ip_len = cip_len,
        .client_port = r->c->peer_port,
        .client_derived = cip != r->c->peer_ip,
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
        .status = r->status,
        .grpc_status = (int)r->grpc_status - 1,
        .bytes_in = r->bytes_in,
        .bytes_out = r->bytes_out,
        .duration_ms = duration_ms,
        .upstream_ms = r->up_ms,
        .route = src->route,
        .route_len = src->route_len,
        .upstream = src->upstream,
        .upstream_len = src->upstream_len,
        .reqid = r->reqid,
        .reqid_len = r->reqid_len,
        .proto = r->codec->http1 && !rq->version_minor ? "HTTP/1.0" : r->codec->proto,
        .referer = ref ? ref->value.ptr : NULL,
        .referer_len = ref ? ref->value.len : 0,
        .body_bytes = r->bytes_out > r->head_out ? r->bytes_out - r->head_out : 0,
        .auth = auth ? auth->value.ptr : NULL,
        .auth_len = auth ? auth->value.len : 0,
        .tls_version = tls_version,
        .sni = sni,
        .sni_len = sni_len,
    };
    size_t need;
    char tgt[4096];

    if (r->pol_qlen) /* a policy's credential stays out of the log, whatever happened */
        strip_target(&rec, r->pol_q, r->pol_qlen, tgt, sizeof(tgt));
    else if (r->pol_q_whole && rec.target) /* too many names to list: no query at all */
        rec.target_len = target_head(rec.target, rec.target_len);
    need = gw_log_json_max(&rec);
    if (w->log_cap - w->log_len < need)
        gw_access_flush(w);
    if (w->log_cap - w->log_len < need) { /* longer than the whole buffer */
        access_dropped(w, 1, 0);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &rec.now);
    if (combined)
        w->log_len += gw_log_combined(&w->log_clock_local, w->log + w->log_len, &rec);
    else
        w->log_len += gw_log_json(&w->log_clock, w->log + w->log_len, &rec);
    if (w->log_len > w->log_cap / 2)
        gw_access_flush(w);
}

/* Whether the snapshot <c>'s request started under had the access log off.
 * The process-wide switch follows a push only after the snapshot is out, so
 * a request of the old config can end after it flipped: the line goes by
 * the config the request ran under, as every other setting does. */
static int off_for(const struct gw_req *r)
{
    return r->snap && r->snap->cfg->access_log.target == ADM_LOG_OFF;
}

/* What <c>'s line takes from its snapshot, borrowed from it. */
static void src_of(const struct gw_req *r, struct log_src *s)
{
    s->combined = r->snap && r->snap->cfg->access_log_format == ADM_LOG_COMBINED;
    s->route = r->sr ? r->sr->id : NULL;
    s->route_len = r->sr ? strlen(r->sr->id) : 0;
    s->upstream = r->upstream_addr;
    s->upstream_len = r->upstream_addr ? strlen(r->upstream_addr) : 0;
}

void gw_log_access(struct gw_req *r, double duration_ms)
{
    struct log_src src;

    if (!atomic_load_explicit(&r->c->w->proc->access_on, memory_order_relaxed))
        return; /* before any field is gathered: a log that is off costs nothing */
    if (off_for(r))
        return;
    src_of(r, &src);
    log_line(r, duration_ms, &src);
}

int gw_log_access_later(struct gw_req *r)
{
    struct gw_log_later *k;
    struct log_src src;
    size_t cip_len;

    if (!atomic_load_explicit(&r->c->w->proc->access_on, memory_order_relaxed) || off_for(r))
        return 0;
    src_of(r, &src);
    /* one allocation a tunnel: the two strings the snapshot owns */
    if (!(k = malloc(sizeof(*k) + src.route_len + src.upstream_len + 2)))
        return -1;
    k->src = src;
    if (src.route)
        k->src.route = memcpy(k->text, src.route, src.route_len + 1);
    if (src.upstream)
        k->src.upstream = memcpy(k->text + src.route_len + 1, src.upstream, src.upstream_len + 1);
    /* the client address is derived under the snapshot's client_ip, now */
    (void)gw_client_ip_text(r, &cip_len);
    r->log_later = k;
    return 0;
}

void gw_log_access_kept(struct gw_req *r, double duration_ms)
{
    struct gw_log_later *k = r->log_later;

    if (!k)
        return;
    r->log_later = NULL;
    if (atomic_load_explicit(&r->c->w->proc->access_on, memory_order_relaxed))
        log_line(r, duration_ms, &k->src);
    free(k);
}
