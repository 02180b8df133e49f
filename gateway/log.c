/*
 * log.c - the error log (stderr, one line each with time and level) and the
 * per-worker access-log buffer, flushed with one write(2) when it fills or
 * once a second.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/gateway.h"

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
