/*
 * test_rollout.c - the decision of a staged rollout (admin/rollout.c): the
 * latency buckets, the Agresti-Caffo bound against values worked by hand,
 * the Mann-Whitney z with ties, quantiles from a histogram, and the
 * verdicts: a dead canary rolled back at a look after its second
 * request, a good one never at a look and promoted at the end, one a
 * little worse within the threshold promoted, one clearly worse rolled
 * back at the end, too few requests rolled back, a slower one rolled back
 * only when its median is also far enough above; the workers' counters
 * summed and subtracted.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "admin/rollout.h"

START_TEST(buckets)
{
    ck_assert_uint_eq(adm_ro_bucket(0), 0);
    ck_assert_uint_eq(adm_ro_bucket(-1), 0);
    ck_assert_uint_eq(adm_ro_bucket(0.1), 0);
    ck_assert_uint_eq(adm_ro_bucket(0.14), 0);
    ck_assert_uint_eq(adm_ro_bucket(0.15), 1);
    ck_assert_uint_eq(adm_ro_bucket(0.2), 2);
    ck_assert_uint_eq(adm_ro_bucket(1.0), 6); /* 0.1 * 2^(6/2) = 0.8 .. 1.13 */
    ck_assert_uint_eq(adm_ro_bucket(1e9), ADM_RO_BUCKETS - 1);
    /* every bucket's lower edge falls in it, and just below it in the one before */
    for (unsigned i = 1; i < ADM_RO_BUCKETS; i++) {
        double lo = adm_ro_bucket_low(i);
        ck_assert_uint_eq(adm_ro_bucket(lo * 1.0001), i);
        ck_assert_uint_eq(adm_ro_bucket(lo * 0.9999), i - 1);
    }
    ck_assert(adm_ro_bucket_low(0) == 0);
}
END_TEST

START_TEST(agresti_caffo)
{
    /* 10 of 100 against 2 of 100: p~ 11/102 and 3/102,
     * se = sqrt(p1 q1 / 102 + p2 q2 / 102) */
    double p1 = 11.0 / 102, p2 = 3.0 / 102;
    double se = sqrt(p1 * (1 - p1) / 102 + p2 * (1 - p2) / 102);

    ck_assert_double_eq_tol(adm_ro_ac_lower(10, 100, 2, 100, 1.645), 100 * (p1 - p2 - 1.645 * se),
                            1e-9);
    /* nothing seen: the adjusted rates are equal, the bound is below 0 */
    ck_assert(adm_ro_ac_lower(0, 0, 0, 0, 3.09) < 0);
    /* three of three failed against none of 300: far above a point */
    ck_assert(adm_ro_ac_lower(3, 3, 0, 300, 3.09) > 1);
    /* one of one: not yet */
    ck_assert(adm_ro_ac_lower(1, 1, 0, 300, 3.09) < 1);
}
END_TEST

static void fill(struct adm_ro_arm *a, uint64_t n, uint64_t failed, double ms, double spread,
                 unsigned seed)
{
    memset(a, 0, sizeof(*a));
    srand(seed);
    for (uint64_t i = 0; i < n; i++)
        a->hist[adm_ro_bucket(ms * (1 + spread * ((double)rand() / RAND_MAX - 0.5)))]++;
    a->requests = n;
    a->failed = failed;
}

START_TEST(mann_whitney)
{
    struct adm_ro_arm b, c;

    /* the same distribution: z near 0 */
    fill(&b, 5000, 0, 10, 1.0, 1);
    fill(&c, 500, 0, 10, 1.0, 2);
    ck_assert(fabs(adm_ro_mw_z(&b, &c)) < 3);
    /* the canary twice as slow: large positive z; faster: negative */
    fill(&c, 500, 0, 20, 1.0, 3);
    ck_assert(adm_ro_mw_z(&b, &c) > 10);
    ck_assert(adm_ro_mw_z(&c, &b) < -10);
    /* every value in one bucket: all ties, no evidence */
    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    b.hist[5] = 100;
    c.hist[5] = 10;
    ck_assert(adm_ro_mw_z(&b, &c) == 0);
    /* an empty arm */
    c.hist[5] = 0;
    ck_assert(adm_ro_mw_z(&b, &c) == 0);
}
END_TEST

START_TEST(quantiles)
{
    struct adm_ro_arm a;

    memset(&a, 0, sizeof(a));
    ck_assert(adm_ro_quantile_ms(&a, 0.5) == 0);
    a.hist[6] = 100; /* 0.8 .. 1.13 ms */
    ck_assert_double_eq_tol(adm_ro_quantile_ms(&a, 0.5),
                            (adm_ro_bucket_low(6) + adm_ro_bucket_low(7)) / 2, 1e-9);
    a.hist[20] = 1;
    ck_assert(adm_ro_quantile_ms(&a, 0.999) >= adm_ro_bucket_low(20));
}
END_TEST

static const struct adm_ro_params P = {.threshold_pct = 1, .min_requests = 20, .latency_pct = 25};

/* A baseline of <nb> requests (<fb> failed) around <msb> ms and a canary
 * of <nc> (<fc>) around <msc>: the verdict at a look must be <look>, at
 * the end <end>, whose reason goes to <why> (600 bytes). */
static void expect(uint64_t nb, uint64_t fb, double msb, uint64_t nc, uint64_t fc, double msc,
                   enum adm_ro_verdict look, enum adm_ro_verdict end, char *why)
{
    struct adm_ro_arm b, c;

    fill(&b, nb, fb, msb, 0.5, 4);
    fill(&c, nc, fc, msc, 0.5, 5);
    ck_assert_int_eq(adm_ro_decide(&P, &b, &c, 0, why, 600), look);
    ck_assert_int_eq(adm_ro_decide(&P, &b, &c, 1, why, 600), end);
}

START_TEST(dead_canary_rolled_back_at_a_look)
{
    char why[600];

    /* its first failure is no evidence yet (the end: too few requests) */
    expect(300, 0, 1, 1, 1, 1, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    expect(300, 0, 1, 2, 2, 1, ADM_RO_ROLLBACK, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "canary failed 2 of 2 requests (100.00%)"));
    ck_assert_ptr_nonnull(strstr(why, "Agresti-Caffo"));
}
END_TEST

START_TEST(good_canary_promoted)
{
    char why[600];

    expect(9000, 9, 1, 1000, 1, 1, ADM_RO_WAIT, ADM_RO_PROMOTE, why);
    ck_assert_ptr_nonnull(strstr(why, "within the threshold"));
    /* a little worse (1.5 % against 1 %), within a point: promoted */
    expect(9000, 90, 1, 1000, 15, 1, ADM_RO_WAIT, ADM_RO_PROMOTE, why);
}
END_TEST

START_TEST(worse_canary_rolled_back_at_the_end)
{
    char why[600];

    /* 5 % against 1 %: not certain enough for a look, enough at the end */
    expect(9000, 90, 1, 400, 20, 1, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "z 1.645)"));
}
END_TEST

START_TEST(empty_baseline_is_no_excuse)
{
    char why[600];

    /* every request on the canary (one client address): its own failures decide */
    expect(0, 0, 1, 1000, 1000, 1, ADM_RO_ROLLBACK, ADM_RO_ROLLBACK, why);
    expect(5, 0, 1, 1000, 1000, 1, ADM_RO_ROLLBACK, ADM_RO_ROLLBACK, why);
    expect(0, 0, 1, 1000, 0, 1, ADM_RO_WAIT, ADM_RO_PROMOTE, why);
    /* 1 failure in 20 with nothing to compare: seen 5 points worse */
    expect(0, 0, 1, 20, 1, 1, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "held to no failures"));
}
END_TEST

START_TEST(seen_worse_is_rolled_back_at_the_end)
{
    char why[600];

    /* 1 of 20 against 0 of 180: not shown worse (the bound is below the
     * threshold), but seen 5 points worse: rolled back */
    ck_assert(adm_ro_ac_lower(1, 20, 0, 180, ADM_RO_Z_FINAL) < 1);
    expect(180, 0, 1, 20, 1, 1, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "points more"));
}
END_TEST

START_TEST(too_few_requests_rolled_back)
{
    char why[600];

    expect(900, 0, 1, 19, 0, 1, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "not enough evidence"));
    ck_assert_ptr_nonnull(strstr(why, "19 requests"));
}
END_TEST

START_TEST(slower_canary)
{
    struct adm_ro_arm b, c;
    char why[600];

    /* twice as slow: rolled back at the end */
    expect(9000, 0, 10, 1000, 0, 20, ADM_RO_WAIT, ADM_RO_ROLLBACK, why);
    ck_assert_ptr_nonnull(strstr(why, "canary is slower"));
    /* 10 % slower: significant with these counts, but within latency_pct */
    expect(9000, 0, 10, 1000, 0, 11, ADM_RO_WAIT, ADM_RO_PROMOTE, why);
    fill(&b, 9000, 0, 10, 0.5, 4);
    fill(&c, 1000, 0, 11, 0.5, 5);
    ck_assert(adm_ro_mw_z(&b, &c) > ADM_RO_Z_FINAL);
}
END_TEST

START_TEST(counters)
{
    struct adm_ro_wctr *w = aligned_alloc(64, 3 * sizeof(*w));
    struct adm_ro_arm sum[2], start[2];

    ck_assert_uint_eq(sizeof(*w) % 64, 0);
    memset(w, 0, 3 * sizeof(*w));
    adm_ro_count(&w[0], 0, 200, 1);
    adm_ro_sum(w, 3, start);
    adm_ro_count(&w[0], 1, 502, 1);
    adm_ro_count(&w[1], 1, 504, 5000);
    adm_ro_count(&w[2], 0, 404, 0.05);
    adm_ro_count(&w[2], 1, 200, 1);
    adm_ro_sum(w, 3, sum);
    adm_ro_sub(&sum[0], &start[0]);
    adm_ro_sub(&sum[1], &start[1]);
    ck_assert_uint_eq(sum[0].requests, 1);
    ck_assert_uint_eq(sum[0].failed, 0);
    ck_assert_uint_eq(sum[0].hist[0], 1);
    ck_assert_uint_eq(sum[1].requests, 3);
    ck_assert_uint_eq(sum[1].failed, 2);
    ck_assert_uint_eq(sum[1].hist[adm_ro_bucket(1)], 2);
    ck_assert_uint_eq(sum[1].hist[adm_ro_bucket(5000)], 1);
    free(w);
}
END_TEST

static Suite *rollout_suite(void)
{
    Suite *s = suite_create("admin_rollout");
    TCase *tc = tcase_create("rollout");
    tcase_add_test(tc, buckets);
    tcase_add_test(tc, agresti_caffo);
    tcase_add_test(tc, mann_whitney);
    tcase_add_test(tc, quantiles);
    tcase_add_test(tc, dead_canary_rolled_back_at_a_look);
    tcase_add_test(tc, good_canary_promoted);
    tcase_add_test(tc, worse_canary_rolled_back_at_the_end);
    tcase_add_test(tc, empty_baseline_is_no_excuse);
    tcase_add_test(tc, seen_worse_is_rolled_back_at_the_end);
    tcase_add_test(tc, too_few_requests_rolled_back);
    tcase_add_test(tc, slower_canary);
    tcase_add_test(tc, counters);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rollout_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
