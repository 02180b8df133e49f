/*
 * clock.h - the one clock of the health words, the workers' timeouts and
 * slow start: CLOCK_MONOTONIC_COARSE in milliseconds. Inline, because the
 * workers read it on the request path (gateway/conn.h's gw_now_ms is this
 * clock as the signed milliseconds their timeouts count in). A file that
 * includes it asks for POSIX.1b first (_POSIX_C_SOURCE 199309L or later,
 * or _GNU_SOURCE), as it would for clock_gettime itself. clock.c shows
 * its stamps as wall-clock times (the admin API's health "since").
 */
#ifndef SY_ADMIN_CLOCK_H
#define SY_ADMIN_CLOCK_H

#include <stddef.h>
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

/* The wall clock less adm_clock_ms's clock, in ms: a stamp plus the offset
 * is the wall-clock time it was taken at (to a tick of the coarse clock,
 * which its stamps are at most behind). Measured once and then kept, so
 * that one stamp shows one time however often it is shown: measured again
 * for each showing, against the coarse clock, it moved by up to a tick
 * (4 ms at HZ=250). Kept by its one reader (the admin API). */
struct adm_clock_wall {
    int64_t offset_ms;
    int known; /* offset_ms measured */
};

/* Measures the offset into <*offset_ms>. -1 when it cannot be trusted: the
 * thread was held up for a millisecond or more between the reads. */
int adm_clock_wall_measure(int64_t *offset_ms);

/* Measures <w>'s offset when it is not known yet, and again when the wall
 * clock was set (a step: settimeofday, NTP at boot, a resume) by more than
 * ADM_CLOCK_STEP_MS since: then every stamp shows where the wall clock now
 * says it was. A smaller step is not followed, so that no measurement's
 * error moves a time shown. */
#define ADM_CLOCK_STEP_MS 100
void adm_clock_wall_follow(struct adm_clock_wall *w);

/* Writes stamp <stamp_ms> as the wall-clock time it was taken at under
 * <offset_ms>, RFC 3339 UTC to the millisecond ("2026-12-02T06:45:22.123Z"),
 * into <buf> of <cap> bytes (ADM_CLOCK_TEXT_CAP is enough). The same
 * arguments write the same text. */
#define ADM_CLOCK_TEXT_CAP 40
void adm_clock_wall_text(uint64_t stamp_ms, int64_t offset_ms, char *buf, size_t cap);

#endif
