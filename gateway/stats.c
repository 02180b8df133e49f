/*
 * stats.c - sums the workers' single-writer counters for the admin API.
 */
#include "gateway/gateway.h"

#include <string.h>

#include "gateway/grpc.h"

_Static_assert(ADM_GRPC_NCODES == GW_GRPC_NCODES, "gRPC's codes counted as many as known");

static uint64_t ld(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

void gw_stats(void *arg, struct adm_gw_stats *st)
{
    struct gw_process *p = arg;

    memset(st, 0, sizeof(*st));
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
