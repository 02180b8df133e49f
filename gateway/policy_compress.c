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

/* <n> bytes at <in> through r->enc into <out>; none and not <last>: a
 * flush (the upstream has nothing more for now). */
static int cz_body(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val, const char *in,
                   size_t n, int last, struct evbuffer *out)
{
    (void)p, (void)val;
    if (n && gw_encoder_write(r->enc, in, n, out) < 0)
        return -1;
    if (last)
        return gw_encoder_finish(r->enc, out);
    return n ? 0 : gw_encoder_flush(r->enc, out);
}

const struct gw_policy_ops gw_policy_compress = {.request = cz_request, .body = cz_body};

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
    if (coding == GW_ENC_IDENTITY ||
        gw_enc_eligible(&rules, r->is_head, status, hdr, n) != GW_ENC_OK)
        return 0;
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
    r->body_failed = 0;
    return 1;
}
