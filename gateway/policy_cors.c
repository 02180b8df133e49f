/*
 * policy_cors.c - the "cors" type on a worker: a preflight (OPTIONS with
 * Origin and Access-Control-Request-Method) is answered here with 204 and
 * the fields encoded at configure time, never reaching the upstream;
 * another request goes on, and its answer gets Access-Control-Allow-Origin
 * for an allowed origin, and Vary: Origin always. A disallowed origin
 * gets no CORS field at all.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "gateway/local.h"
#include "gateway/policy.h"

#include <string.h>

#define MAX_ORIGIN 1024 /* longer Origin values are not allowed ones */

/* Its word: 1 + the index of the allowed Origin field, 0 for none. */
static int cors_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    const struct adm_cors_conf *c = p->conf;
    const struct h1_request *rq = &r->rp->req;
    const struct h1_header *origin = NULL;
    int preflight = 0, ok;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_slice *n = &rq->headers[i].name;
        if (n->len == 6 && !origin && h1_name_is(n, "origin"))
            origin = &rq->headers[i];
        else if (n->len == 29 && h1_name_is(n, "access-control-request-method"))
            preflight = 1;
    }
    ok = origin && origin->value.len <= MAX_ORIGIN &&
         adm_cors_origin_ok(c, origin->value.ptr, origin->value.len);
    if (ok)
        *val = (uint64_t)(origin - rq->headers) + 1;
    if (!(preflight && origin && rq->method_id == HTTP_OPTIONS))
        return GW_POL_NEXT;
    /* answered here: the fields of the policies before it, then ours */
    char extra[8192];
    size_t n = 0;
    if (ok) {
        const char *v = c->any && !c->credentials ? "*" : origin->value.ptr;
        size_t vl = c->any && !c->credentials ? 1 : origin->value.len;
        memcpy(extra, "Access-Control-Allow-Origin: ", 29);
        memcpy(extra + 29, v, vl);
        memcpy(extra + 29 + vl, "\r\n", 2);
        n = 31 + vl;
        if (n + c->pre_len <= sizeof(extra)) {
            memcpy(extra + n, c->pre, c->pre_len);
            n += c->pre_len;
        }
    } else {
        memcpy(extra, "Vary: Origin\r\n", 14);
        n = 14;
    }
    gw_local_simple(r, 204, extra, n);
    gw_local_finish(r);
    return GW_POL_ANSWERED;
}

static void cors_response(const struct adm_spolicy *p, struct gw_req *r, uint64_t val,
                          struct gw_obuf *o)
{
    const struct adm_cors_conf *c = p->conf;
    const struct h1_header *origin;

    if (!val) {
        gw_ob_lit(o, "Vary: Origin\r\n");
        return;
    }
    origin = &r->rp->req.headers[val - 1];
    gw_ob_lit(o, "Access-Control-Allow-Origin: ");
    if (c->any && !c->credentials)
        gw_ob_lit(o, "*");
    else
        gw_ob_add(o, origin->value.ptr, origin->value.len);
    gw_ob_lit(o, "\r\n");
    gw_ob_add(o, c->act, c->act_len);
}

const struct gw_policy_ops gw_policy_cors = {
    .request = cors_request,
    .response = cors_response,
};
