/*
 * outlier.c - passive outlier detection as a pure state machine (Envoy's
 * consecutive_5xx with its defaults). Per server: failures in a row, and
 * whether and until when it is ejected, and how many ejections in a row it
 * has had. Time is passed in; the owner applies the decisions to the health
 * words (up_health_set with UP_H_EJECTED).
 *
 *   up --(consecutive_failures failures in a row, and the pool under
 *         max_ejection_percent ejected, and not of one server, and not
 *         the last server of the pool that is up)--> ejected for
 *         min(base_ejection_ms * row, max_ejection_ms)
 *   ejected --(up_outlier_expire at or after the end)--> up
 *
 * The row grows by one with each ejection and shrinks by one for every
 * base_ejection_ms the server stays up in between. Outcomes reported while
 * a server is ejected (requests that were in flight) change nothing. A new
 * object for a changed server list takes each kept server's row and
 * ejection over from the old one (up_outlier_carry), the ejection only
 * within the new object's max_ejected.
 */
#include "upstream/up_int.h"

#include <stdlib.h>

struct up_outlier_server {
    unsigned fails, row;
    int ejected;
    uint64_t until_ms, back_ms, dur_ms;
};

struct up_outlier {
    struct up_outlier_cfg cfg;
    size_t n, nejected, max_ejected;
    struct up_outlier_server *sv;
};

up_outlier *up_outlier_new(const struct up_outlier_cfg *cfg, size_t nservers)
{
    up_outlier *o = calloc(1, sizeof(*o));

    if (!o || nservers == 0 || !(o->sv = calloc(nservers, sizeof(*o->sv)))) {
        free(o);
        return NULL;
    }
    if (cfg)
        o->cfg = *cfg;
    if (!o->cfg.consecutive_failures)
        o->cfg.consecutive_failures = 5;
    if (!o->cfg.base_ejection_ms)
        o->cfg.base_ejection_ms = 30000;
    if (!o->cfg.max_ejection_ms)
        o->cfg.max_ejection_ms = 300000;
    if (!o->cfg.max_ejection_percent)
        o->cfg.max_ejection_percent = 10;
    o->n = nservers;
    o->max_ejected = nservers * o->cfg.max_ejection_percent / 100;
    if (o->max_ejected == 0)
        o->max_ejected = 1; /* Envoy: at least one host, whatever the percent */
    /* nginx: a lone server is never taken out; ejected, its 502s would
     * become 503s, and go on after it is back until the ejection ends */
    if (nservers == 1)
        o->max_ejected = 0;
    return o;
}

void up_outlier_free(up_outlier *o)
{
    if (o)
        free(o->sv);
    free(o);
}

int up_outlier_report(up_outlier *o, const up_pool *p, size_t s, int failed, uint64_t now_ms)
{
    struct up_outlier_server *v = &o->sv[s];
    uint64_t base = o->cfg.base_ejection_ms, quiet;

    if (v->ejected)
        return 0;
    if (!failed) {
        v->fails = 0;
        return 0;
    }
    if (++v->fails < o->cfg.consecutive_failures)
        return 0;
    v->fails = 0;
    if (o->nejected >= o->max_ejected || (p && up_pool_others_down(p, s)))
        return 0;
    if (v->row) {
        quiet = (now_ms - v->back_ms) / base;
        v->row = quiet >= v->row ? 0 : v->row - (unsigned)quiet;
    }
    v->row++;
    v->dur_ms = base * v->row;
    if (v->dur_ms > o->cfg.max_ejection_ms || v->dur_ms / v->row != base)
        v->dur_ms = o->cfg.max_ejection_ms;
    v->until_ms = now_ms + v->dur_ms;
    v->ejected = 1;
    o->nejected++;
    return 1;
}

size_t up_outlier_expire(up_outlier *o, uint64_t now_ms, uint64_t *next_ms)
{
    uint64_t next = 0;

    for (size_t s = 0; s < o->n; s++) {
        struct up_outlier_server *v = &o->sv[s];
        if (!v->ejected)
            continue;
        if (v->until_ms <= now_ms) {
            v->ejected = 0;
            v->back_ms = now_ms;
            o->nejected--;
            return s;
        }
        if (!next || v->until_ms < next)
            next = v->until_ms;
    }
    if (next_ms)
        *next_ms = next;
    return UP_NONE;
}

int up_outlier_ejected(const up_outlier *o, size_t s)
{
    return o->sv[s].ejected;
}

uint64_t up_outlier_ejection_ms(const up_outlier *o, size_t s)
{
    return o->sv[s].dur_ms;
}

unsigned up_outlier_ejections(const up_outlier *o, size_t s)
{
    return o->sv[s].row;
}

void up_outlier_carry(up_outlier *o, size_t s, const up_outlier *from, size_t from_s)
{
    struct up_outlier_server *v = &o->sv[s];

    if (v->ejected)
        o->nejected--;
    *v = from->sv[from_s];
    if (v->ejected && o->nejected >= o->max_ejected) {
        /* over the new list's cap (a pool shrunk to one server): back now,
         * its row decaying from when the ejection began */
        v->ejected = 0;
        v->back_ms = v->until_ms - v->dur_ms;
        v->until_ms = 0;
    }
    if (v->ejected)
        o->nejected++;
}
