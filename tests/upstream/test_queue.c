/*
 * test_queue.c - upstream/queue.c: first in first out, bounded (a full
 * queue refuses at once), timeouts taken from the head, removal from the
 * middle, across the ring's wrap; a request queued again behind others
 * keeps its first, earlier deadline and times out by it.
 */
#include "utest.h"

#include <check.h>
#include <stdlib.h>

static int reqs[16];

START_TEST(fifo_and_bounded)
{
    up_queue *q = up_queue_new(3);

    ck_assert_ptr_null(up_queue_pop(q));
    ck_assert_uint_eq(up_queue_next_deadline(q), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(up_queue_push(q, &reqs[i], 100 + (uint64_t)i), 0);
    ck_assert_int_eq(up_queue_push(q, &reqs[3], 200), -1); /* overflow: 503 */
    ck_assert_uint_eq(up_queue_len(q), 3);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[0]);
    ck_assert_int_eq(up_queue_push(q, &reqs[3], 200), 0); /* wraps */
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[1]);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[2]);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[3]);
    ck_assert_ptr_null(up_queue_pop(q));
    up_queue_free(q);
}
END_TEST

START_TEST(timeouts)
{
    up_queue *q = up_queue_new(8);

    up_queue_push(q, &reqs[0], 100);
    up_queue_push(q, &reqs[1], 100);
    up_queue_push(q, &reqs[2], 150);
    ck_assert_uint_eq(up_queue_next_deadline(q), 100);
    ck_assert_ptr_null(up_queue_expired(q, 99));
    ck_assert_ptr_eq(up_queue_expired(q, 120), &reqs[0]);
    ck_assert_ptr_eq(up_queue_expired(q, 120), &reqs[1]);
    ck_assert_ptr_null(up_queue_expired(q, 120));
    ck_assert_uint_eq(up_queue_next_deadline(q), 150);
    ck_assert_ptr_eq(up_queue_expired(q, 150), &reqs[2]);
    ck_assert_uint_eq(up_queue_len(q), 0);
    up_queue_free(q);
}
END_TEST

START_TEST(requeued_keeps_its_first_deadline)
{
    up_queue *q = up_queue_new(4);

    up_queue_push(q, &reqs[0], 100); /* first queued at 0, timeout 100 */
    up_queue_push(q, &reqs[1], 150);
    /* reqs[0] woke at 60, found no slot: back behind reqs[1], same deadline */
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[0]);
    up_queue_push(q, &reqs[0], 100);
    up_queue_push(q, &reqs[2], 170);
    ck_assert_uint_eq(up_queue_next_deadline(q), 100);
    ck_assert_ptr_null(up_queue_expired(q, 99));
    ck_assert_ptr_eq(up_queue_expired(q, 120), &reqs[0]); /* not 60 + 100 */
    ck_assert_ptr_null(up_queue_expired(q, 120));
    ck_assert_uint_eq(up_queue_len(q), 2);
    ck_assert_uint_eq(up_queue_next_deadline(q), 150);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[1]); /* the order is still first in, first out */
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[2]);
    up_queue_free(q);
}
END_TEST

START_TEST(remove_across_wrap)
{
    up_queue *q = up_queue_new(4);

    for (int i = 0; i < 3; i++)
        up_queue_push(q, &reqs[i], 1);
    up_queue_pop(q);
    up_queue_pop(q);
    for (int i = 3; i < 6; i++)
        up_queue_push(q, &reqs[i], 2); /* ring holds 2,3,4,5 wrapped */
    ck_assert_int_eq(up_queue_remove(q, &reqs[4]), 0);
    ck_assert_int_eq(up_queue_remove(q, &reqs[4]), -1);
    ck_assert_int_eq(up_queue_remove(q, &reqs[0]), -1);
    ck_assert_uint_eq(up_queue_len(q), 3);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[2]);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[3]);
    ck_assert_ptr_eq(up_queue_pop(q), &reqs[5]);
    ck_assert_ptr_null(up_queue_new(0));
    up_queue_free(q);
    up_queue_free(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream_queue");
    TCase *tc = tcase_create("queue");

    tcase_add_test(tc, fifo_and_bounded);
    tcase_add_test(tc, timeouts);
    tcase_add_test(tc, requeued_keeps_its_first_deadline);
    tcase_add_test(tc, remove_across_wrap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ut_run(suite());
}
