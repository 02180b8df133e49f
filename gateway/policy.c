/*
 * policy.c - the chain of a route's policies: the request phase in the
 * route's order, stopping at the first that answers, and suspended while
 * one waits on a subrequest, resumed by its answer; the upstream and
 * response phases for those that let the request through. Each type's
 * ops are gateway/policy_<type>.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/policy.h"
#include "admin/http1/token.h"
#include "admin/policy_types.h"
#include "admin/snapshot.h"
#include "gateway/encoding.h"
#include "gateway/subreq.h"

#include <event2/buffer.h>

#include <string.h>

static const struct gw_policy_ops *const ops[ADM_POL_NTYPES] = {
    [ADM_POL_RATE_LIMIT] = &gw_policy_rate_limit,
    [ADM_POL_CORS] = &gw_policy_cors,
    [ADM_POL_API_KEY] = &gw_policy_api_key,
    [ADM_POL_BASIC] = &gw_policy_basic,
    [ADM_POL_JWT] = &gw_policy_jwt,
    [ADM_POL_COMPRESS] = &gw_policy_compress,
    [ADM_POL_FORWARD_AUTH] = &gw_policy_forward_auth,
};

/* Policy <p> is about to decide on <r>: an answer it gives is counted as
 * it finishes (gw_policy_count_answer), a pass by passed(). */
static void deciding(const struct adm_spolicy *p, struct gw_req *r)
{
    r->pol_ctr = p->ctr ? &p->ctr[r->c->w->id] : NULL;
}

static void passed(struct gw_req *r)
{
    if (r->pol_ctr)
        gw_count(&r->pol_ctr->n[ADM_POLR_PASSED], 1);
    r->pol_ctr = NULL;
}

void gw_policy_count_answer(struct gw_req *r, int status)
{
    if (r->pol_ctr)
        gw_count(&r->pol_ctr->n[adm_pol_result_of(status)], 1);
    r->pol_ctr = NULL;
}

/* The query parameter r's route keeps from the upstream (an api_key's
 * "query"; the access log leaves out every such name, serve.c). */
static void strip_decide(struct gw_req *r)
{
    const struct adm_sroute *sr = r->sr;

    for (unsigned i = 0; i < sr->npol; i++) {
        const struct adm_spolicy *p = r->snap->policies[sr->pol[i]];
        const struct adm_ak_conf *c = p->conf;
        if (p->type != ADM_POL_API_KEY || !c->query)
            continue;
        r->up_q = c->query;
        r->up_qlen = (unsigned char)c->query_len; /* at most 128: policy_api_key.c */
        return;
    }
}

/* A preflight carries no credentials (browsers never send them on one):
 * before the authentication policy at <i>, a cors policy listed after it
 * answers an OPTIONS that is one. 1 when it did. */
static int preflight_first(struct gw_req *r, unsigned i)
{
    const struct adm_sroute *sr = r->sr;

    for (unsigned j = i + 1; j < sr->npol; j++) {
        const struct adm_spolicy *p = r->snap->policies[sr->pol[j]];
        if (p->type == ADM_POL_CORS) {
            int rc;
            deciding(p, r);
            rc = ops[p->type]->request(p, r, &r->pol_val[j]);
            if (rc != GW_POL_ANSWERED) /* not a preflight: its turn comes */
                r->pol_ctr = NULL;
            return rc == GW_POL_ANSWERED;
        }
    }
    return 0;
}

/* Runs r's policies from the one at <i> on: GW_POL_NEXT when each let it
 * through, GW_POL_ANSWERED when one answered it, GW_POL_PENDING when one
 * waits (its body is not read meanwhile). */
static int run_from(struct gw_req *r, unsigned i)
{
    const struct adm_sroute *sr = r->sr;

    for (; i < sr->npol; i++) {
        const struct adm_spolicy *p = r->snap->policies[sr->pol[i]];
        int rc;
        if (adm_pol_kinds[p->type].auth && r->rp->req.method_id == HTTP_OPTIONS &&
            preflight_first(r, i))
            return GW_POL_ANSWERED;
        r->pol_val[i] = 0;
        r->pol_wait = (unsigned char)i; /* the policy running: one that waits is there */
        deciding(p, r);
        if ((rc = ops[p->type]->request(p, r, &r->pol_val[i])) == GW_POL_PENDING) {
            r->codec->body_read(r, 0);
            gw_req_phase(r, GW_REQ_WAIT);
            return rc; /* counted when it resumes */
        }
        if (rc == GW_POL_ANSWERED)
            return rc; /* counted, and maybe gone */
        passed(r);
        r->pol_n = (unsigned char)(i + 1);
    }
    return GW_POL_NEXT;
}

int gw_policy_request(struct gw_req *r, void (*go)(struct gw_req *r))
{
    strip_decide(r);
    r->pol_go = go;
    return run_from(r, 0) != GW_POL_NEXT;
}

void gw_policy_resume(struct gw_req *r, const void *answer)
{
    unsigned i = r->pol_wait;
    const struct adm_spolicy *p = r->snap->policies[r->sr->pol[i]];

    /* read again before any answer: a local one reads the body away */
    r->codec->body_read(r, 1);
    if (ops[p->type]->resume(p, r, &r->pol_val[i], answer) != GW_POL_NEXT)
        return; /* counted, and maybe gone */
    passed(r);
    r->pol_n = (unsigned char)(i + 1);
    if (run_from(r, i + 1) == GW_POL_NEXT)
        r->pol_go(r);
}

void gw_policy_cancel(struct gw_req *r)
{
    gw_subreq_cancel(r->sub);
    r->sub = NULL;
}

void gw_policy_upstream(const struct adm_snapshot *snap, const struct adm_sroute *sr,
                        const struct h1_request *rq, const uint64_t *val, unsigned n,
                        struct gw_obuf *o)
{
    for (unsigned i = 0; i < n; i++) {
        const struct adm_spolicy *p = snap->policies[sr->pol[i]];
        if (ops[p->type]->upstream)
            ops[p->type]->upstream(p, rq, val[i], o);
    }
}

int gw_policy_drops(const struct adm_snapshot *snap, const struct adm_sroute *sr, unsigned n,
                    const struct h1_slice *name)
{
    for (unsigned i = 0; i < n; i++) {
        const struct adm_spolicy *p = snap->policies[sr->pol[i]];
        if (ops[p->type]->drops && ops[p->type]->drops(p, name))
            return 1;
    }
    return 0;
}

int gw_policy_resp_drops(const struct gw_req *r, const struct h1_slice *name)
{
    int type;

    if (name->len >= 15 && h1_ci_eq(name->ptr, 15, "access-control-"))
        type = ADM_POL_CORS;
    else if (name->len >= 9 && h1_ci_eq(name->ptr, 9, "ratelimit"))
        type = ADM_POL_RATE_LIMIT;
    else
        return 0;
    for (unsigned i = 0; i < r->pol_n; i++)
        if (r->snap->policies[r->sr->pol[i]]->type == type)
            return 1;
    return 0;
}

size_t gw_policy_drop_lines(const struct gw_req *r, char *lines, size_t n)
{
    char *p = lines, *end = lines + n, *d = lines;

    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p)), *colon;
        size_t len = eol ? (size_t)(eol + 1 - p) : (size_t)(end - p);
        struct h1_slice name = {p, 0};
        if ((colon = memchr(p, ':', len)))
            name.len = (size_t)(colon - p);
        if (!colon || !gw_policy_drops(r->snap, r->sr, r->pol_n, &name)) {
            memmove(d, p, len);
            d += len;
        }
        p += len;
    }
    return (size_t)(d - lines);
}

void gw_policy_response(struct gw_req *r, struct gw_obuf *o)
{
    for (unsigned i = 0; i < r->pol_n; i++) {
        const struct adm_spolicy *p = r->snap->policies[r->sr->pol[i]];
        if (ops[p->type]->response)
            ops[p->type]->response(p, r, r->pol_val[i], o);
    }
}

int gw_policy_field_is(const struct h1_slice *name, const char *lc, size_t n)
{
    if (name->len != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = h1_lower((unsigned char)name->ptr[i]), want = (unsigned char)lc[i];
        if (ch != want && !((ch == '_' || ch == '-') && (want == '_' || want == '-')))
            return 0;
    }
    return 1;
}

/* Whether query parameter <p> (<n> bytes, "name" or "name=value") is
 * <name>: its name percent-decoded ('+' a space) and compared without
 * case, so that no spelling of it gets past. */
static int param_is(const char *p, size_t n, const char *name, size_t nlen)
{
    size_t i = 0, k = 0;

    while (i < n && p[i] != '=') {
        unsigned char ch = (unsigned char)p[i++];
        if (ch == '%' && i + 1 < n && h1_hex_value((unsigned char)p[i]) >= 0 &&
            h1_hex_value((unsigned char)p[i + 1]) >= 0) {
            ch = (unsigned char)(h1_hex_value((unsigned char)p[i]) * 16 +
                                 h1_hex_value((unsigned char)p[i + 1]));
            i += 2;
        } else if (ch == '+') {
            ch = ' ';
        }
        if (k >= nlen || h1_lower(ch) != h1_lower((unsigned char)name[k]))
            return 0;
        k++;
    }
    return k == nlen;
}

/* Whether <p> is one of the '&'-separated names at <names>. */
static int param_named(const char *p, size_t n, const char *names, size_t nlen)
{
    const char *end = names + nlen;

    for (;;) {
        const char *amp = memchr(names, '&', (size_t)(end - names)), *e = amp ? amp : end;
        if (param_is(p, n, names, (size_t)(e - names)))
            return 1;
        if (!amp)
            return 0;
        names = amp + 1;
    }
}

size_t gw_policy_strip_query(const char *q, size_t n, const char *name, size_t nlen,
                             void (*add)(void *ctx, const char *p, size_t n), void *ctx)
{
    const char *p = q, *end = q + n;
    size_t kept = 0;
    int first = 1;

    for (;;) {
        const char *amp = memchr(p, '&', (size_t)(end - p)), *e = amp ? amp : end;
        if (!param_named(p, (size_t)(e - p), name, nlen)) {
            if (!first) {
                add(ctx, "&", 1);
                kept++;
            }
            add(ctx, p, (size_t)(e - p));
            kept += (size_t)(e - p);
            first = 0;
        }
        if (!amp)
            return kept;
        p = amp + 1;
    }
}

int gw_policy_body(struct gw_req *r, const char *in, size_t n, int last)
{
    const struct adm_spolicy *p = r->snap->policies[r->sr->pol[r->pol_body]];
    size_t len;

    if (r->body_failed ||
        ops[p->type]->body(p, r, &r->pol_val[r->pol_body], in, n, last, r->enc_out) < 0) {
        r->body_failed = 1;
        return -1;
    }
    if ((len = evbuffer_get_length(r->enc_out))) {
        r->codec->data_move(r, r->enc_out, len, NULL);
        r->bytes_out += len;
    }
    if (p->ctr) {
        struct adm_pol_wctr *k = &p->ctr[r->c->w->id];
        gw_count(&k->bytes_in, n);
        gw_count(&k->bytes_out, len);
    }
    return 0;
}

void gw_policy_body_free(struct gw_req *r)
{
    gw_encoder_free(r->enc);
    r->enc = NULL;
    if (r->enc_out) {
        evbuffer_free(r->enc_out);
        r->enc_out = NULL;
    }
}
