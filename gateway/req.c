/*
 * req.c - a request's own bookkeeping, whichever codec carries it: its
 * start, its config, its id, and its end (the access log, the counters,
 * the snapshot released, then the codec goes on).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/conn.h"
#include "gateway/policy.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void gw_req_init(struct gw_req *r, struct gw_conn *c, const struct gw_codec *codec, void *stream,
                 struct h1_req_parser *rp)
{
    r->c = c;
    r->codec = codec;
    r->stream = stream;
    r->rp = rp;
}

const struct adm_config *gw_req_cfg(const struct gw_req *r)
{
    return r->snap ? r->snap->cfg
                   : atomic_load_explicit(&r->c->w->proc->swap.current, memory_order_acquire)->cfg;
}

/* The request's counters: the worker's and its route's. */
static void count_status(struct gw_req *r, double ms)
{
    struct gw_counters *k = &r->c->w->ctr;
    int cls = r->status / 100;
    double secs = ms / 1e3;

    gw_count(&k->requests, 1);
    gw_count(&k->requests_proto[r->codec->http1 ? 0 : gw_io_is_tls(&r->c->io) ? 1 : 2], 1);
    if (cls >= 1 && cls <= 5) {
        gw_count(&k->status[cls], 1);
        if (r->sr)
            gw_count(&r->sr->ctr[r->c->w->id].status[cls], 1);
    }
    if (r->grpc_status) /* a gRPC request whose status is known: one compare for the others */
        gw_count(&k->grpc[r->grpc_status - 1], 1);
    gw_count(&k->dur[gw_hist_bucket(secs)], 1);
    gw_count(&k->dur_sum_us, (uint64_t)(secs * 1e6));
    gw_count(&k->bytes_in, r->bytes_in);
    gw_count(&k->bytes_out, r->bytes_out);
    if (r->arm) { /* pinned during a rollout: counted if it still runs */
        struct adm_swap *sw = &r->c->w->proc->swap;
        if (r->ro == atomic_load_explicit(&sw->rollout, memory_order_relaxed))
            adm_ro_count(&sw->roctr[r->c->w->id], r->arm - 1u, r->status, ms);
        r->arm = 0;
    }
}

void gw_req_unpin(struct gw_req *r)
{
    if (r->snap) {
        adm_swap_unpin(r->snap, r->c->w->id);
        r->snap = NULL;
    }
    r->pol_n = 0; /* its policies were the snapshot's: an answer given before the
                   * next request starts (a bad head) has none */
    r->pol_ctr = NULL;
}

void gw_req_make_reqid(struct gw_req *r)
{
    static const char hex[] = "0123456789abcdef";
    struct gw_worker *w = r->c->w;
    char *d = w->reqid_last;

    if (!w->reqid_ready) {
        /* once per worker: process prefix and worker, then sequence 0 */
        uint64_t hi = ((uint64_t)w->reqid_prefix << 8) | (w->id & 0xff);
        for (int i = 9; i >= 0; i--, hi >>= 4)
            d[i] = hex[hi & 15];
        memset(d + 10, '0', 14);
        w->reqid_ready = 1;
    }
    /* The sequence's 14 hex digits count up in place: formatting all 24
     * digits anew cost about 170 instructions a request, this about 10 (a
     * carry past the last digit comes once in 16 ids). */
    for (int i = 23; i >= 10; i--) {
        if (d[i] == '9') {
            d[i] = 'a';
            break;
        }
        if (d[i] != 'f') {
            d[i]++;
            break;
        }
        d[i] = '0';
    }
    memcpy(r->reqid, d, 24);
    r->reqid_len = 24;
}

void gw_req_account(struct gw_req *r)
{
    /* one clock read for the access log and the histogram alike */
    double ms = gw_elapsed_ms(&r->t0);

    gw_log_access(r, ms);
    count_status(r, ms);
    r->grpc_status = 0; /* an HTTP/1 connection's next request starts without */
}

void gw_req_account_tunnel(struct gw_req *r)
{
    double ms = gw_elapsed_ms(&r->t0);

    if (gw_log_access_later(r) < 0)
        gw_log_access(r, ms); /* out of memory: its line now, as far as it got */
    count_status(r, ms);
}

void gw_req_done(struct gw_req *r)
{
    /* a request whose policy waits is not read (no client timeout ends
     * it) and ends only through its answer, a cancel or its connection's
     * close: a route without policies pays nothing here */
    assert(!r->sub);
    gw_req_account(r);
    gw_req_unpin(r);
    r->sr = NULL;
    r->upstream_addr = NULL;
    r->codec->done(r);
}

void gw_req_release(struct gw_req *r)
{
    if (r->log_later) /* a tunnel's line: its fields, its io and its clock still here */
        gw_log_access_kept(r, gw_elapsed_ms(&r->t0));
    gw_policy_abandon(r); /* a subrequest reads the snapshot: before the unpin */
    gw_req_unpin(r);
    if (r->body) { /* a buffered body at shutdown; try.c frees it otherwise */
        evbuffer_free(r->body);
        r->body = NULL;
    }
    if (r->replay) { /* the same for an HTTP/2 pool's replay copy */
        evbuffer_free(r->replay);
        r->replay = NULL;
    }
    gw_policy_body_free(r);
    free(r->pol_fields);
    r->pol_fields = NULL;
    r->pol_fields_cap = 0;
    free(r->params);
    r->params = NULL;
    r->params_cap = 0;
}
