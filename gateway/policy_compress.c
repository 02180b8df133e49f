/*
 * policy_compress.c - the "compress" policy on a worker: whether an
 * answer is compressed, and in which coding (gateway/encoding.h decides,
 * from the request's Accept-Encoding and the answer's head), the head's
 * fields as they then go out, and the body through the encoder (the
 * body op). Never for gRPC. The config side is admin/policy_compress.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/policy.h"
#include "admin/policy_types.h"
#include "admin/snapshot.h"
#include "gateway/encoding.h"

#include <event2/buffer.h>
#include <string.h>
#include <strings.h>

static int cz_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    (void)p, (void)r, (void)val;
    return GW_POL_NEXT; /* it acts on the answer only */
}

/* The word of a compressing answer: bytes went into the encoder since
 * its last flush (a flush of nothing would still cost a few bytes). */
#define CZ_UNFLUSHED 2u

/* <n> bytes at <in> through r->enc into <out>; none and not <last>: a
 * flush (the upstream has nothing more for now). */
static int cz_body(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val, const char *in,
                   size_t n, int last, struct evbuffer *out)
{
    (void)p;
    if (n) {
        *val |= CZ_UNFLUSHED;
        if (gw_encoder_write(r->enc, in, n, out) < 0)
            return -1;
    }
    if (last)
        return gw_encoder_finish(r->enc, out);
    if (n || !(*val & CZ_UNFLUSHED))
        return 0;
    *val &= ~(uint64_t)CZ_UNFLUSHED;
    return gw_encoder_flush(r->enc, out);
}

/* An answer that could have been compressed but goes as it is (the
 * client takes none of the codings) still varies by Accept-Encoding: a
 * cache must not give it to a client that takes one (word 1, set by
 * gw_policy_body_begin). */
static void cz_response(const struct adm_spolicy *p, struct gw_req *r, uint64_t val,
                        struct gw_obuf *o)
{
    (void)p, (void)r;
    if (val == 1)
        gw_ob_lit(o, "Vary: Accept-Encoding\r\n");
}

const struct gw_policy_ops gw_policy_compress = {
    .request = cz_request, .response = cz_response, .body = cz_body};

/* Whether a Vary field of <hdr>[0..<n>) names Accept-Encoding or "*". */
static int varies(const struct h1_header *hdr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = hdr[i].value.ptr;
        size_t len = hdr[i].value.len;
        if (!h1_name_is(&hdr[i].name, "vary") || !v)
            continue;
        if (memchr(v, '*', len))
            return 1;
        for (size_t k = 0; k + 15 <= len; k++)
            if (!strncasecmp(v + k, "accept-encoding", 15))
                return 1;
    }
    return 0;
}

/* gRPC's own framing compresses (grpc-encoding): application/grpc and
 * application/grpc+proto and the like are never touched. */
static int is_grpc(const struct gw_req *r, const struct h1_header *hdr, size_t n)
{
    if (r->rp->req.grpc)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (h1_name_is(&hdr[i].name, "content-type"))
            return hdr[i].value.len >= 16 && !strncasecmp(hdr[i].value.ptr, "application/grpc", 16);
    return 0;
}

static uint64_t content_length(const struct h1_header *hdr, size_t n)
{
    uint64_t v = 0;

    for (size_t i = 0; i < n; i++)
        if (h1_name_is(&hdr[i].name, "content-length")) {
            for (size_t k = 0; k < hdr[i].value.len && v < (1ull << 50); k++)
                if (hdr[i].value.ptr[k] >= '0' && hdr[i].value.ptr[k] <= '9')
                    v = v * 10 + (uint64_t)(hdr[i].value.ptr[k] - '0');
            return v;
        }
    return 0;
}

int gw_policy_body_begin(struct gw_req *r, int status, const struct h1_header *hdr, size_t n,
                         struct gw_pol_head *bh)
{
    const struct adm_spolicy *p = NULL;
    const struct adm_cz_conf *c;
    struct gw_enc_rules rules;
    enum gw_coding coding;
    unsigned i;

    for (i = 0; i < r->pol_n && !p; i++) {
        const struct adm_spolicy *q = r->snap->policies[r->sr->pol[i]];
        if (q->type == ADM_POL_COMPRESS)
            p = q;
    }
    if (!p || is_grpc(r, hdr, n))
        return 0;
    c = p->conf;
    memset(&rules, 0, sizeof(rules));
    for (size_t k = 0; k < c->ncodings; k++)
        rules.order[k] = (enum gw_coding)c->order[k];
    rules.ncodings = c->ncodings;
    for (int k = 0; k < GW_ENC_COUNT; k++)
        rules.level[k] = c->level[k];
    rules.types = (const char *const *)c->types;
    rules.ntypes = c->ntypes;
    rules.min_length = c->min_length;
    coding =
        gw_enc_choose_fields(r->rp->req.headers, r->rp->req.nheaders, rules.order, rules.ncodings);
    if (gw_enc_eligible(&rules, r->is_head, status, hdr, n) != GW_ENC_OK)
        return 0;
    if (coding == GW_ENC_IDENTITY) {
        r->pol_val[i - 1] = !varies(hdr, n); /* cz_response adds the Vary */
        return 0;
    }
    if (gw_enc_edit_head(hdr, n, coding, bh->hdr, GW_POL_HEAD_MAX, bh->scratch, sizeof(bh->scratch),
                         &bh->nhdr) < 0)
        return 0; /* no room for the edits: as it is */
    r->enc = gw_encoder_new(coding, rules.level[coding], content_length(hdr, n));
    r->enc_out = r->enc ? evbuffer_new() : NULL;
    if (!r->enc_out) { /* out of memory: the answer goes as it is */
        gw_policy_body_free(r);
        return 0;
    }
    r->pol_body = (unsigned char)(i - 1);
    r->pol_val[i - 1] = 0; /* nothing in the encoder yet */
    if (p->ctr)
        gw_count(&p->ctr[r->c->w->id].coded[coding], 1);
    r->body_failed = 0;
    return 1;
}
