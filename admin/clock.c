/*
 * clock.c - adm_clock_ms's stamps (admin/clock.h) shown as wall-clock
 * times: one offset between the two clocks, measured once and kept until
 * the wall clock is set, so that a health word's since shows the same time
 * on every read, across config swaps (which carry the word as it is).
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include "admin/clock.h"

#include <stdio.h>

static int64_t ns_of(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* <a> / <b> rounded down (b > 0), for times before the epoch too. */
static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}

int adm_clock_wall_measure(int64_t *offset_ms)
{
    struct timespec r1, m, r2;
    int64_t a, b;

    /* the monotonic read between two wall-clock reads: a thread held up
     * between them shows as a gap, instead of as an offset off by as much */
    clock_gettime(CLOCK_REALTIME, &r1);
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r2);
    a = ns_of(&r1);
    b = ns_of(&r2);
    *offset_ms = floor_div(a + (b - a) / 2 - ns_of(&m), 1000000);
    return b < a || b - a >= 1000000 ? -1 : 0;
}

void adm_clock_wall_follow(struct adm_clock_wall *w)
{
    int64_t now;
    int tries = 0;

    /* a measurement held up is tried again, a few times; with none to
     * trust the offset known stays, and a first one is kept as it is (one
     * off by a moment beats none: a good one later corrects a large miss) */
    while (adm_clock_wall_measure(&now) < 0 && ++tries < 3)
        ;
    if (tries == 3 && w->known)
        return;
    if (!w->known || now - w->offset_ms > ADM_CLOCK_STEP_MS ||
        w->offset_ms - now > ADM_CLOCK_STEP_MS) {
        w->offset_ms = now;
        w->known = 1;
    }
}

void adm_clock_wall_text(uint64_t stamp_ms, int64_t offset_ms, char *buf, size_t cap)
{
    int64_t ms = (int64_t)stamp_ms + offset_ms;
    time_t t = (time_t)floor_div(ms, 1000);
    struct tm tm;
    size_t n;

    n = gmtime_r(&t, &tm) ? strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm) : 0;
    if (!n) {
        if (cap)
            buf[0] = '\0';
        return;
    }
    snprintf(buf + n, cap - n, ".%03dZ", (int)(ms - floor_div(ms, 1000) * 1000));
}
