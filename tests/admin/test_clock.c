/*
 * test_clock.c - adm_clock_ms's stamps as wall-clock times (admin/clock.c):
 * the text of a stamp under an offset, to the millisecond, before the epoch
 * too; one offset kept across showings, so that a stamp shows the same
 * text over many coarse-clock ticks; a step of the wall clock followed, a
 * measurement's error not; the time shown for now is the wall clock's.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "admin/clock.h"

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(text)
{
    char buf[ADM_CLOCK_TEXT_CAP];

    adm_clock_wall_text(1000, 1764657922123 - 1000, buf, sizeof(buf));
    ck_assert_str_eq(buf, "2025-12-02T06:45:22.123Z");
    adm_clock_wall_text(5, 1764657922000 - 5, buf, sizeof(buf));
    ck_assert_str_eq(buf, "2025-12-02T06:45:22.000Z");
    adm_clock_wall_text(0, -1, buf, sizeof(buf));
    ck_assert_str_eq(buf, "1969-12-31T23:59:59.999Z");
    /* too small a buffer: empty, never cut short */
    adm_clock_wall_text(0, 0, buf, 10);
    ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(one_stamp_one_text)
{
    struct adm_clock_wall w = {0};
    uint64_t stamp = adm_clock_ms(), start = stamp;
    char first[ADM_CLOCK_TEXT_CAP], again[ADM_CLOCK_TEXT_CAP];
    int64_t offset;
    int shown = 0;

    adm_clock_wall_follow(&w);
    ck_assert(w.known);
    offset = w.offset_ms;
    adm_clock_wall_text(stamp, w.offset_ms, first, sizeof(first));
    /* shown again and again over ten ticks of the coarse clock (4 ms at
     * HZ=250), across which an offset measured at each showing against it
     * moved: the same text every time */
    while (adm_clock_ms() - start < 40) {
        struct timespec ms = {0, 100000};

        adm_clock_wall_follow(&w);
        adm_clock_wall_text(stamp, w.offset_ms, again, sizeof(again));
        ck_assert_str_eq(again, first);
        shown++;
        nanosleep(&ms, NULL);
    }
    ck_assert_int_eq(w.offset_ms, offset);
    ck_assert_int_gt(shown, 10);
}
END_TEST

START_TEST(steps)
{
    struct adm_clock_wall w = {0};
    int64_t now = 0;

    for (int i = 0; i < 100 && adm_clock_wall_measure(&now) < 0; i++) /* held up: again */
        ;
    /* the wall clock set 5 s back since the offset was measured: followed
     * (at the first showing whose measurement was not held up) */
    w = (struct adm_clock_wall){.offset_ms = now + 5000, .known = 1};
    for (int i = 0; i < 100 && w.offset_ms == now + 5000; i++)
        adm_clock_wall_follow(&w);
    ck_assert_int_le(llabs(w.offset_ms - now), 5);
    /* and forward */
    w = (struct adm_clock_wall){.offset_ms = now - 5000, .known = 1};
    for (int i = 0; i < 100 && w.offset_ms == now - 5000; i++)
        adm_clock_wall_follow(&w);
    ck_assert_int_le(llabs(w.offset_ms - now), 5);
    /* within ADM_CLOCK_STEP_MS: kept as it is */
    w = (struct adm_clock_wall){.offset_ms = now + ADM_CLOCK_STEP_MS / 2, .known = 1};
    adm_clock_wall_follow(&w);
    ck_assert_int_eq(w.offset_ms, now + ADM_CLOCK_STEP_MS / 2);
}
END_TEST

START_TEST(now_is_the_wall_clock)
{
    struct adm_clock_wall w = {0};
    char shown[ADM_CLOCK_TEXT_CAP], before[ADM_CLOCK_TEXT_CAP], after[ADM_CLOCK_TEXT_CAP];
    int64_t t0, t1;

    adm_clock_wall_follow(&w);
    /* a stamp of now shows between the wall clock a tick before and after
     * (a coarse stamp is at most a tick behind; 10 ms covers HZ=100) */
    t0 = wall_ms() - 10;
    adm_clock_wall_text(adm_clock_ms(), w.offset_ms, shown, sizeof(shown));
    t1 = wall_ms() + 10;
    adm_clock_wall_text(0, t0, before, sizeof(before));
    adm_clock_wall_text(0, t1, after, sizeof(after));
    ck_assert_msg(strcmp(before, shown) <= 0 && strcmp(shown, after) <= 0, "%s not in [%s, %s]",
                  shown, before, after);
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("admin_clock");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, text);
    tcase_add_test(tc, one_stamp_one_text);
    tcase_add_test(tc, steps);
    tcase_add_test(tc, now_is_the_wall_clock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(clock_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
