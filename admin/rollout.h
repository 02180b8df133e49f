/*
 * rollout.h - the decision of a staged rollout (rollout.c): a canary
 * snapshot serves a share of new requests beside the current one, the
 * workers count each arm's requests, failures and latencies, and this
 * compares the two arms. Pure: no I/O, no logging, no clock; the admin
 * API's driver (api_rollout.c) sums the workers' counters, calls
 * adm_ro_decide() every look and acts on its verdict.
 *
 * Failure rates are compared with the Agresti-Caffo adjusted difference
 * (one success and one failure added to each arm), whose normal interval
 * holds its coverage at small counts where the plain Wald one does not: the
 * canary is rolled back when the lower bound of p~canary - p~baseline passes
 * the threshold, with z = 3.09 at every look during the window (so that
 * looking often does not make a false alarm likely) and z = 1.645 at its
 * end. Latency is compared at the end only, by a Mann-Whitney U test on the
 * two arms' histograms (a bucket is a group of ties).
 */
#ifndef SY_ADMIN_ROLLOUT_H
#define SY_ADMIN_ROLLOUT_H

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Latency buckets: bucket i >= 1 holds [0.1 * 2^(i/2), 0.1 * 2^((i+1)/2))
 * ms, bucket 0 everything below 0.1414 ms, the last everything above
 * about 74 s: half-octave steps, so a median is known within 41 % before
 * interpolation. */
#define ADM_RO_BUCKETS 40
#define ADM_RO_BUCKET0_MS 0.1

/* The bucket of a duration of <ms> milliseconds: two float operations and
 * a frexp, no loop (it runs on every request of a rollout). */
static inline unsigned adm_ro_bucket(double ms)
{
    int e;
    double m;
    int i;

    if (!(ms > ADM_RO_BUCKET0_MS))
        return 0;
    m = frexp(ms / ADM_RO_BUCKET0_MS, &e); /* x = m * 2^e, m in [0.5, 1) */
    i = 2 * e - 2 + (m >= 0.70710678118654752);
    return i >= ADM_RO_BUCKETS ? ADM_RO_BUCKETS - 1 : (unsigned)i;
}

/* The lower edge of bucket <i> in ms (0 for bucket 0). */
double adm_ro_bucket_low(unsigned i);

/* One arm's counts, summed over the workers since the rollout began. */
struct adm_ro_arm {
    uint64_t requests;
    uint64_t failed; /* final status >= 500: ours, the upstream's, 502 connect, 504 timeout */
    uint64_t hist[ADM_RO_BUCKETS];
};

/* One worker's counts of both arms ([0] the baseline, [1] the canary):
 * written by that worker only (relaxed single-writer stores), cumulative
 * over every rollout; the admin thread subtracts what they were when the
 * rollout began. Cache-line aligned, so no two workers share a line. */
struct adm_ro_ctr {
    _Atomic uint64_t requests, failed;
    _Atomic uint64_t hist[ADM_RO_BUCKETS];
};
struct adm_ro_wctr {
    _Alignas(64) struct adm_ro_ctr arm[2];
};

/* Counts one request of <arm> (0 baseline, 1 canary) in <c>: its final
 * <status> and duration <ms>. Worker side: relaxed loads and stores. */
static inline void adm_ro_count(struct adm_ro_wctr *c, unsigned arm, int status, double ms)
{
    struct adm_ro_ctr *a = &c->arm[arm];
    _Atomic uint64_t *h = &a->hist[adm_ro_bucket(ms)];

    atomic_store_explicit(&a->requests,
                          atomic_load_explicit(&a->requests, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (status >= 500)
        atomic_store_explicit(&a->failed,
                              atomic_load_explicit(&a->failed, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    atomic_store_explicit(h, atomic_load_explicit(h, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Sums <n> workers' counters <w> into <out> (both arms). */
void adm_ro_sum(const struct adm_ro_wctr *w, size_t n, struct adm_ro_arm out[2]);
/* <a> -= <b>, field by field (what accrued since <b> was summed). */
void adm_ro_sub(struct adm_ro_arm *a, const struct adm_ro_arm *b);

/* What a rollout is judged by. */
struct adm_ro_params {
    double threshold_pct;  /* allowed increase of the failure rate, percentage points */
    uint64_t min_requests; /* canary requests needed at the window's end */
    double latency_pct;    /* allowed increase of the median latency, % */
};

enum adm_ro_verdict { ADM_RO_WAIT, ADM_RO_PROMOTE, ADM_RO_ROLLBACK };

#define ADM_RO_Z_LOOK 3.09   /* one-sided 0.001: every look during the window */
#define ADM_RO_Z_FINAL 1.645 /* one-sided 0.05: at the window's end */

/* The lower bound, in percentage points, of the Agresti-Caffo interval of
 * the difference of failure rates canary - baseline at <z>: <fc> failed of
 * <nc> canary requests, <fb> of <nb> baseline ones. */
double adm_ro_ac_lower(uint64_t fc, uint64_t nc, uint64_t fb, uint64_t nb, double z);
/* The same bound against a baseline that never fails (no variance): for a
 * baseline arm with fewer than min_requests requests. */
double adm_ro_ac_lower_abs(uint64_t fc, uint64_t nc, double z);
/* The Mann-Whitney z of "the canary is slower" from the two histograms
 * (normal approximation with the tie correction; buckets are ties); 0 when
 * either arm is empty or every value ties. */
double adm_ro_mw_z(const struct adm_ro_arm *base, const struct adm_ro_arm *canary);
/* The <q> quantile (0..1) of <a>'s latency in ms, interpolated linearly in
 * its bucket; 0 when it has no requests. */
double adm_ro_quantile_ms(const struct adm_ro_arm *a, double q);

/* The verdict on <base> and <canary> (counts since the rollout began) under
 * <p>: at a look during the window (<final> 0) ROLLBACK or WAIT, at its end
 * (<final> 1) ROLLBACK or PROMOTE. <why> gets a sentence with the numbers
 * (always, WAIT too). */
enum adm_ro_verdict adm_ro_decide(const struct adm_ro_params *p, const struct adm_ro_arm *base,
                                  const struct adm_ro_arm *canary, int final, char *why,
                                  size_t cap);

#endif
