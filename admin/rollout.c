/*
 * rollout.c - the statistics of a staged rollout (admin/rollout.h): the
 * arms' counts summed, the Agresti-Caffo bound on the difference of their
 * failure rates, the Mann-Whitney test on their latency histograms, the
 * quantiles shown in /status, and the verdict with its reason.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/rollout.h"

#include <stdio.h>
#include <string.h>

double adm_ro_bucket_low(unsigned i)
{
    return i ? ADM_RO_BUCKET0_MS * pow(2.0, (double)i / 2) : 0;
}

void adm_ro_sum(const struct adm_ro_wctr *w, size_t n, struct adm_ro_arm out[2])
{
    memset(out, 0, 2 * sizeof(*out));
    for (size_t k = 0; k < n; k++)
        for (unsigned a = 0; a < 2; a++) {
            const struct adm_ro_ctr *c = &w[k].arm[a];
            out[a].requests += atomic_load_explicit(&c->requests, memory_order_relaxed);
            out[a].failed += atomic_load_explicit(&c->failed, memory_order_relaxed);
            for (unsigned i = 0; i < ADM_RO_BUCKETS; i++)
                out[a].hist[i] += atomic_load_explicit(&c->hist[i], memory_order_relaxed);
        }
}

void adm_ro_sub(struct adm_ro_arm *a, const struct adm_ro_arm *b)
{
    a->requests -= b->requests;
    a->failed -= b->failed;
    for (unsigned i = 0; i < ADM_RO_BUCKETS; i++)
        a->hist[i] -= b->hist[i];
}

double adm_ro_ac_lower(uint64_t fc, uint64_t nc, uint64_t fb, uint64_t nb, double z)
{
    double pc = ((double)fc + 1) / ((double)nc + 2), pb = ((double)fb + 1) / ((double)nb + 2);
    double se = sqrt(pc * (1 - pc) / ((double)nc + 2) + pb * (1 - pb) / ((double)nb + 2));

    return 100 * (pc - pb - z * se);
}

double adm_ro_mw_z(const struct adm_ro_arm *base, const struct adm_ro_arm *canary)
{
    double n1 = 0, n2 = 0, below = 0, u = 0, ties = 0, n, var;

    for (unsigned i = 0; i < ADM_RO_BUCKETS; i++) {
        n1 += (double)canary->hist[i];
        n2 += (double)base->hist[i];
    }
    if (n1 == 0 || n2 == 0)
        return 0;
    /* U of the canary: per pair, 1 when the canary's is slower, 1/2 a tie */
    for (unsigned i = 0; i < ADM_RO_BUCKETS; i++) {
        double c = (double)canary->hist[i], b = (double)base->hist[i], t = c + b;
        u += c * (below + b / 2);
        below += b;
        ties += t * t * t - t;
    }
    n = n1 + n2;
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
    if (!(var > 0))
        return 0;
    return (u - n1 * n2 / 2) / sqrt(var);
}

double adm_ro_quantile_ms(const struct adm_ro_arm *a, double q)
{
    uint64_t total = 0;
    double want, seen = 0;

    for (unsigned i = 0; i < ADM_RO_BUCKETS; i++)
        total += a->hist[i];
    if (!total)
        return 0;
    want = q * (double)total;
    for (unsigned i = 0; i < ADM_RO_BUCKETS; i++) {
        double h = (double)a->hist[i];
        if (h > 0 && seen + h >= want) {
            double lo = adm_ro_bucket_low(i), hi = adm_ro_bucket_low(i + 1);
            return lo + (hi - lo) * ((want - seen) / h);
        }
        seen += h;
    }
    return adm_ro_bucket_low(ADM_RO_BUCKETS);
}

double adm_ro_ac_lower_abs(uint64_t fc, uint64_t nc, double z)
{
    double pc = ((double)fc + 1) / ((double)nc + 2);

    return 100 * (pc - z * sqrt(pc * (1 - pc) / ((double)nc + 2)));
}

/* A failure rate in percent, 0 for no requests. */
static double rate_pct(const struct adm_ro_arm *a)
{
    return a->requests ? 100.0 * (double)a->failed / (double)a->requests : 0;
}

enum adm_ro_verdict adm_ro_decide(const struct adm_ro_params *p, const struct adm_ro_arm *base,
                                  const struct adm_ro_arm *canary, int final, char *why, size_t cap)
{
    double z = final ? ADM_RO_Z_FINAL : ADM_RO_Z_LOOK;
    /* a baseline with too few requests of its own (all clients behind one
     * address on the canary, or canary=99 at low traffic) is no yardstick:
     * the canary is then held to a baseline that never fails */
    int no_base = base->requests < p->min_requests;
    double lower = no_base ? adm_ro_ac_lower_abs(canary->failed, canary->requests, z)
                           : adm_ro_ac_lower(canary->failed, canary->requests, base->failed,
                                             base->requests, z);
    double mz, mc, mb, seen = rate_pct(canary) - (no_base ? 0 : rate_pct(base));

    if (lower > p->threshold_pct) {
        snprintf(why, cap,
                 "canary failed %llu of %llu requests (%.2f%%), baseline %llu of %llu (%.2f%%): "
                 "the failure rate is at least %.2f points higher (Agresti-Caffo, z %.4g), over "
                 "the threshold of %.2f",
                 (unsigned long long)canary->failed, (unsigned long long)canary->requests,
                 rate_pct(canary), (unsigned long long)base->failed,
                 (unsigned long long)base->requests, rate_pct(base), lower, z, p->threshold_pct);
        return ADM_RO_ROLLBACK;
    }
    if (!final) {
        snprintf(why, cap,
                 "observing: canary %llu requests, %llu failed; baseline %llu, %llu failed",
                 (unsigned long long)canary->requests, (unsigned long long)canary->failed,
                 (unsigned long long)base->requests, (unsigned long long)base->failed);
        return ADM_RO_WAIT;
    }
    if (canary->requests < p->min_requests) {
        snprintf(why, cap,
                 "not enough evidence: the canary served %llu requests in the window, fewer than "
                 "the %llu needed",
                 (unsigned long long)canary->requests, (unsigned long long)p->min_requests);
        return ADM_RO_ROLLBACK;
    }
    if (seen > p->threshold_pct) { /* not shown worse, but seen worse: the safe side */
        snprintf(why, cap,
                 "canary failed %llu of %llu requests (%.2f%%), baseline %llu of %llu (%.2f%%)%s: "
                 "%.2f points more, over the threshold of %.2f",
                 (unsigned long long)canary->failed, (unsigned long long)canary->requests,
                 rate_pct(canary), (unsigned long long)base->failed,
                 (unsigned long long)base->requests, rate_pct(base),
                 no_base ? " (too few to compare with: held to no failures)" : "", seen,
                 p->threshold_pct);
        return ADM_RO_ROLLBACK;
    }
    mz = adm_ro_mw_z(base, canary);
    mc = adm_ro_quantile_ms(canary, 0.5);
    mb = adm_ro_quantile_ms(base, 0.5);
    if (mz > ADM_RO_Z_FINAL && mc > mb * (1 + p->latency_pct / 100)) {
        snprintf(why, cap,
                 "canary is slower: median %.3g ms against the baseline's %.3g ms (more than "
                 "%.0f%% above), Mann-Whitney z %.2f > %.3g",
                 mc, mb, p->latency_pct, mz, ADM_RO_Z_FINAL);
        return ADM_RO_ROLLBACK;
    }
    snprintf(why, cap,
             "canary failed %llu of %llu requests (%.2f%%), baseline %llu of %llu (%.2f%%): the "
             "increase's lower bound, %.2f points, is within the threshold of %.2f; median %.3g "
             "ms against %.3g ms (Mann-Whitney z %.2f)",
             (unsigned long long)canary->failed, (unsigned long long)canary->requests,
             rate_pct(canary), (unsigned long long)base->failed, (unsigned long long)base->requests,
             rate_pct(base), lower, p->threshold_pct, mc, mb, mz);
    return ADM_RO_PROMOTE;
}
