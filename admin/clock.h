/*
 * clock.h - the one clock of the health words, the workers' timeouts and
 * slow start: CLOCK_MONOTONIC_COARSE in milliseconds. Inline, because the
 * workers read it on the request path (gateway/conn.h's gw_now_ms is this
 * clock as the signed milliseconds their timeouts count in). A file that
 * includes it asks for POSIX.1b first (_POSIX_C_SOURCE 199309L or later,
 * or _GNU_SOURCE), as it would for clock_gettime itself.
 */
#ifndef SY_ADMIN_CLOCK_H
#define SY_ADMIN_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifndef CLOCK_MONOTONIC_COARSE
#error "admin/clock.h: define _POSIX_C_SOURCE (199309L or later) before any include"
#endif

/* Now, in milliseconds. A health word's since (its server went down or
 * came back) is stamped with it, by the health thread and by the snapshot
 * build, and the workers ramp slow start and count timeouts with it: one
 * clock, so that a server just back up is never seen up since a moment
 * still to come. */
static inline uint64_t adm_clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
