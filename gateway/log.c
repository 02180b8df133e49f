/*
 * log.c - the error log (stderr, one line each with time and level) and the
 * whole access log: one JSON record per request, formatted into the
 * per-worker buffer, flushed with one write(2) when it fills or once a
 * second.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void gw_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info"};
    char line[2048];
    struct timespec ts;
    struct tm tm;
    size_t n;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ [%s] ", ts.tv_nsec / 1000000,
                          names[level < 0 || level > 2 ? 0 : level]);
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

static void json_esc(struct gw_worker *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n && w->log_len + 8 < w->log_cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            w->log[w->log_len++] = '\\';
            w->log[w->log_len++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            w->log_len += (size_t)snprintf(w->log + w->log_len, 7, "\\u%04x", ch);
        } else {
            w->log[w->log_len++] = (char)ch;
        }
    }
}

void gw_log_access(struct gw_conn *c)
{
    struct gw_worker *w = c->w;
    const struct h1_request *rq = &c->rp.req;
    const struct h1_header *ua = h1_request_header(rq, "user-agent");
    size_t var = rq->path_len + rq->target.len + rq->host.len + (ua ? ua->value.len : 0);
    struct timespec ts;
    struct tm tm;
    char tbuf[32], up[32];

    if (!atomic_load_explicit(&w->proc->access_on, memory_order_relaxed))
        return;
    /* room for the fixed part and every variable field escaped (6 bytes each at most) */
    if (w->log_cap - w->log_len < 8192 + var * 6)
        gw_access_flush(w);
    if (w->log_cap - w->log_len < 8192 + var * 6)
        return;
    if (c->up_ms >= 0)
        snprintf(up, sizeof(up), "%.3f", c->up_ms);
    else
        snprintf(up, sizeof(up), "null");
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len,
                                   "{\"time\":\"%s.%03ldZ\",\"client\":\"%s:%u\",\"method\":\"",
                                   tbuf, ts.tv_nsec / 1000000, c->peer_ip, c->peer_port);
    json_esc(w, rq->method.ptr ? rq->method.ptr : "", rq->method.ptr ? rq->method.len : 0);
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len, "\",\"host\":\"");
    json_esc(w, rq->host.ptr ? rq->host.ptr : "", rq->host.ptr ? rq->host.len : 0);
    w->log_len +=
        (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len, "\",\"target\":\"");
    json_esc(w, rq->target.ptr ? rq->target.ptr : "", rq->target.ptr ? rq->target.len : 0);
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len, "\",\"path\":\"");
    json_esc(w, rq->path ? rq->path : "", rq->path ? rq->path_len : 0);
    w->log_len += (size_t)snprintf(
        w->log + w->log_len, w->log_cap - w->log_len,
        "\",\"status\":%d,\"bytes_in\":%llu,\"bytes_out\":%llu,\"duration_ms\":%.3f,"
        "\"upstream_ms\":%s,\"route\":%s%s%s,\"upstream\":%s%s%s,\"request_id\":\"%.*s\","
        "\"user_agent\":%s",
        c->status, (unsigned long long)c->bytes_in, (unsigned long long)c->bytes_out,
        gw_elapsed_ms(&c->t0), up, c->sr ? "\"" : "", c->sr ? c->sr->id : "null", c->sr ? "\"" : "",
        c->upstream_addr ? "\"" : "", c->upstream_addr ? c->upstream_addr : "null",
        c->upstream_addr ? "\"" : "", (int)c->reqid_len, c->reqid, ua ? "\"" : "null");
    if (ua) {
        json_esc(w, ua->value.ptr, ua->value.len);
        w->log[w->log_len++] = '"';
    }
    /* the TLS fields, null until the listener is a TLS one */
    w->log_len += (size_t)snprintf(w->log + w->log_len, w->log_cap - w->log_len,
                                   ",\"tls_version\":null,\"sni\":null}\n");
    if (w->log_len > w->log_cap / 2)
        gw_access_flush(w);
}
