/*
 * test_reqid.c - gateway/conn.c's request ids: the in-place counter gives
 * exactly the ids that formatting prefix, worker and sequence anew gives
 * (the plain version, kept here as the oracle), across every carry.
 */
#include "gateway/conn.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The plain formatter: 10 hex digits of prefix and worker, 14 of sequence. */
static void oracle(uint32_t prefix, unsigned id, uint64_t seq, char out[25])
{
    snprintf(out, 25, "%010llx%014llx",
             (unsigned long long)((((uint64_t)prefix << 8) | (id & 0xff)) & 0xffffffffffULL),
             (unsigned long long)(seq & 0xffffffffffffffULL));
}

static void run(uint32_t prefix, unsigned id, uint64_t start, unsigned n)
{
    static struct gw_worker w;
    static struct gw_conn c;
    char want[25];

    memset(&w, 0, sizeof(w));
    memset(&c, 0, sizeof(c));
    w.id = id;
    w.reqid_prefix = prefix;
    c.w = &w;
    c.req.c = &c;
    if (start > 0) {
        /* the first id builds the worker's template; then jump to <start> */
        gw_req_make_reqid(&c.req);
        oracle(prefix, id, start, want);
        memcpy(w.reqid_last, want, 24);
    }
    for (uint64_t seq = start + 1; seq <= start + n; seq++) {
        gw_req_make_reqid(&c.req);
        oracle(prefix, id, seq, want);
        ck_assert_uint_eq(c.req.reqid_len, 24);
        ck_assert_msg(memcmp(c.req.reqid, want, 24) == 0, "seq %llu: %.24s, want %s",
                      (unsigned long long)seq, c.req.reqid, want);
    }
}

START_TEST(first_ids)
{
    run(0xdeadbeef, 3, 0, 70000); /* every carry up to the fifth digit */
    run(0, 0, 0, 300);
    run(0xffffffff, 255, 0, 300);
}
END_TEST

START_TEST(carries_far_up)
{
    /* just below carries through many digits */
    run(0x12345678, 1, 0xfffffULL - 5, 20);
    run(0x12345678, 1, 0xffffffffffULL - 5, 20);
    run(0x9abcdef0, 7, 0x9fffffffffffULL - 3, 10);
    run(0x9abcdef0, 7, 0x0fffffffffffffULL - 3, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_reqid");
    TCase *tc = tcase_create("reqid");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, first_ids);
    tcase_add_test(tc, carries_far_up);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
