/*
 * stats.c - sums the workers' single-writer counters for the admin API,
 * and carries them across an upgrade: the old process's totals become the
 * new one's base, so that /metrics does not reset (Envoy's hot restart).
 */
#include "gateway/gateway.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/grpc.h"

_Static_assert(ADM_GRPC_NCODES == GW_GRPC_NCODES, "gRPC's codes counted as many as known");

static uint64_t ld(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* What an upgrade carried over (set before the workers serve, read only
 * after): the counters' part of an adm_gw_stats, with no gauge in it. */
static struct adm_gw_stats base;

/* The counters of an adm_gw_stats as one array of uint64_t, in a fixed
 * order (the two sums apart): what crosses an upgrade. Gauges
 * (conns_open, workers) stay out. */
#define FIELD(f)                                                                                   \
    {                                                                                              \
        offsetof(struct adm_gw_stats, f), sizeof(((struct adm_gw_stats *)0)->f) / 8                \
    }
static const struct {
    size_t off, n;
} carried[] = {
    FIELD(conns_total),
    FIELD(conns_dropped),
    FIELD(conns_reclaimed),
    FIELD(requests),
    FIELD(status),
    FIELD(requests_proto),
    FIELD(grpc),
    FIELD(bytes_in),
    FIELD(bytes_out),
    FIELD(upstream_errors),
    FIELD(access_log_dropped),
    FIELD(dur),
    FIELD(up),
    FIELD(tls_handshakes),
    FIELD(tls_failures),
};
#undef FIELD

static void add_base(struct adm_gw_stats *st)
{
    for (size_t i = 0; i < sizeof(carried) / sizeof(carried[0]); i++) {
        uint64_t *to = (uint64_t *)((char *)st + carried[i].off);
        const uint64_t *from = (const uint64_t *)((const char *)&base + carried[i].off);
        for (size_t k = 0; k < carried[i].n; k++)
            to[k] += from[k];
    }
    st->dur_sum += base.dur_sum;
    st->up_sum += base.up_sum;
}

json_t *gw_stats_export(struct gw_process *p)
{
    struct adm_gw_stats st;
    json_t *v = json_array(), *o;

    gw_stats(p, &st);
    for (size_t i = 0; v && i < sizeof(carried) / sizeof(carried[0]); i++) {
        const uint64_t *from = (const uint64_t *)((const char *)&st + carried[i].off);
        for (size_t k = 0; k < carried[i].n; k++)
            json_array_append_new(v, json_integer((json_int_t)from[k]));
    }
    o = json_pack("{s:o*,s:f,s:f}", "counters", v, "dur_sum", st.dur_sum, "up_sum", st.up_sum);
    return o;
}

int gw_stats_import(const json_t *o)
{
    const json_t *v = json_object_get(o, "counters");
    size_t j = 0, total = 0;

    for (size_t i = 0; i < sizeof(carried) / sizeof(carried[0]); i++)
        total += carried[i].n;
    if (json_array_size(v) != total) /* another build's layout: start from 0 */
        return -1;
    for (size_t i = 0; i < sizeof(carried) / sizeof(carried[0]); i++) {
        uint64_t *to = (uint64_t *)((char *)&base + carried[i].off);
        for (size_t k = 0; k < carried[i].n; k++)
            to[k] = (uint64_t)json_integer_value(json_array_get(v, j++));
    }
    base.dur_sum = json_real_value(json_object_get(o, "dur_sum"));
    base.up_sum = json_real_value(json_object_get(o, "up_sum"));
    return 0;
}

void gw_stats(void *arg, struct adm_gw_stats *st)
{
    struct gw_process *p = arg;

    memset(st, 0, sizeof(*st));
    add_base(st);
    st->workers = p->nworkers;
    for (unsigned i = 0; i < p->nworkers; i++) {
        struct gw_counters *k = &p->workers[i].ctr;
        st->conns_open += ld(&k->conns_open);
        st->conns_total += ld(&k->conns_total);
        st->conns_dropped += ld(&k->conns_dropped);
        st->conns_reclaimed[0] += ld(&k->conns_reclaimed[0]);
        st->conns_reclaimed[1] += ld(&k->conns_reclaimed[1]);
        st->requests += ld(&k->requests);
        for (int n = 0; n < ADM_NPROTOS; n++)
            st->requests_proto[n] += ld(&k->requests_proto[n]);
        for (int c = 0; c < 6; c++)
            st->status[c] += ld(&k->status[c]);
        for (int c = 0; c < ADM_GRPC_NCODES; c++)
            st->grpc[c] += ld(&k->grpc[c]);
        st->bytes_in += ld(&k->bytes_in);
        st->bytes_out += ld(&k->bytes_out);
        st->upstream_errors += ld(&k->upstream_errors);
        st->access_log_dropped += ld(&k->access_dropped);
        for (int b = 0; b <= ADM_HIST_BUCKETS; b++) {
            st->dur[b] += ld(&k->dur[b]);
            st->up[b] += ld(&k->up[b]);
        }
        st->dur_sum += (double)ld(&k->dur_sum_us) / 1e6;
        st->up_sum += (double)ld(&k->up_sum_us) / 1e6;
        struct gw_tls_counters *t = &p->workers[i].tls_ctr;
        for (int v = 0; v < ADM_TLS_NVERSIONS; v++)
            for (int r = 0; r < 2; r++)
                st->tls_handshakes[v][r] += ld(&t->hs[v][r]);
        for (int f = 0; f < ADM_TLS_NFAIL; f++)
            st->tls_failures[f] += ld(&t->fail[f]);
    }
}
