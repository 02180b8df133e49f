/*
 * policy_forward_auth.c - the "forward_auth" type on a worker (nginx's
 * auth_request, Traefik's ForwardAuth): the request waits while a
 * subrequest (subreq.c) asks the policy's pool, with the request's method,
 * at the policy's path, without a body, carrying the client's fields named
 * in request_headers (without that key, all but its connection's own and
 * framing fields: asked), X-Forwarded-Method, -Uri, -Host, -Proto and
 * -For, and the request's X-Request-Id.
 * Its answer decides:
 * - 2xx: the request goes on; the answer's fields named in
 *   response_headers go upstream with it (kept in r->pol_fields, which the
 *   policy's word points at), and the client's own copies of those names,
 *   in any spelling, never do;
 * - 401 and 403: the client gets that status and body (at most
 *   BODY_MAX; more is a 500), with the answer's WWW-Authenticate (401),
 *   Content-Type and Set-Cookie fields, and nothing else of it;
 * - any other status, no server up or free, a connect or a connection
 *   that failed, and timeout_ms over the whole of it: 503;
 * - an answer that is no valid HTTP/1.1 one: 500.
 * The answer's fields and body are never logged; the access log has the
 * client's status.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/policy_types.h"
#include "gateway/clientip.h"
#include "gateway/forward.h"
#include "gateway/hashkey.h"
#include "gateway/local.h"
#include "gateway/policy.h"
#include "gateway/subreq.h"

#include <stdlib.h>
#include <string.h>

#define BODY_MAX (64 * 1024) /* of a 401's or 403's body, passed to the client */

/* Whether <rq>'s method expects content, so that the subrequest says it
 * has none (Content-Length: 0; RFC 9110 8.6: not for the others). */
static int expects_content(const struct h1_request *rq)
{
    switch (rq->method_id) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_DELETE:
    case HTTP_OPTIONS:
    case HTTP_TRACE:
        return 0;
    default:
        return 1;
    }
}

/* Whether field <n> is one of the <k> names at <names>. */
static int named(const struct h1_slice *n, const struct adm_fa_name *names, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (n->len == names[i].len && h1_name_is(n, names[i].name))
            return 1;
    return 0;
}

/* Whether the client's field <n> goes to the service of <c>: one named
 * in request_headers; without that list, any but the connection's own and
 * framing fields (no body goes), Host and Expect (the subrequest's own),
 * and the X-Forwarded-* fields it sets itself, in any spelling. */
static int asked(const struct adm_fa_conf *c, const struct h1_request *rq, const struct h1_slice *n)
{
    static const char *const own[] = {"host",
                                      "expect",
                                      "x-forwarded-method",
                                      "x-forwarded-uri",
                                      "x-forwarded-host",
                                      "x-forwarded-proto",
                                      "x-forwarded-for"};

    if (!c->all_req)
        return named(n, c->req, c->nreq);
    if (h1_conn_field(n) >= 0 || gw_forward_named_in(n, rq->connection, rq->nconnection))
        return 0;
    for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
        if (gw_policy_field_is(n, own[i], strlen(own[i]))) /* X_Forwarded_For too */
            return 0;
    return 1;
}

/* The subrequest's head for request <arg> into <o>, but for Host and the
 * blank line (subreq.h): written straight into the connection's output,
 * and again for a retry, never kept. */
static void build_head(void *arg, struct gw_obuf *o)
{
    struct gw_req *r = arg; /* its policy is the one running, or waiting (policy.c) */
    const struct adm_fa_conf *c = r->snap->policies[r->sr->pol[r->pol_wait]]->conf;
    const struct h1_request *rq = &r->rp->req;
    size_t iplen;
    const char *ip = gw_client_ip_text(r, &iplen);
    const struct h1_header *cid;

    gw_ob_slice(o, &rq->method);
    gw_ob_lit(o, " ");
    gw_ob_add(o, c->path, c->path_len);
    gw_ob_lit(o, " HTTP/1.1\r\n");
    for (size_t i = 0; i < rq->nheaders; i++) /* every copy, in order; one id, below */
        if (asked(c, rq, &rq->headers[i].name) &&
            !(rq->headers[i].name.len == 12 && h1_name_is(&rq->headers[i].name, "x-request-id")))
            gw_ob_field(o, rq->headers[i].name.ptr, rq->headers[i].name.len,
                        rq->headers[i].value.ptr, rq->headers[i].value.len);
    gw_ob_field(o, "X-Forwarded-Method", 18, rq->method.ptr, rq->method.len);
    gw_ob_lit(o, "X-Forwarded-Uri: ");
    gw_forward_target(rq, o);
    gw_ob_lit(o, "\r\n");
    if (rq->host.ptr)
        gw_ob_field(o, "X-Forwarded-Host", 16, rq->host.ptr, rq->host.len);
    if (gw_io_is_tls(&r->c->io))
        gw_ob_lit(o, "X-Forwarded-Proto: https\r\n");
    else
        gw_ob_lit(o, "X-Forwarded-Proto: http\r\n");
    gw_ob_field(o, "X-Forwarded-For", 15, ip, iplen);
    /* the id the upstream request and the access log will carry (as
     * Envoy's ext_authz does), so the service's log lines join them: the
     * client's (forward.c's choice), else the one made for it now */
    if ((cid = gw_forward_client_id(rq, sizeof(r->reqid)))) { /* as proxy.c takes it */
        r->reqid_len = cid->value.len;
        memcpy(r->reqid, cid->value.ptr, r->reqid_len);
    } else if (!r->reqid_len) {
        gw_req_make_reqid(r);
    }
    gw_ob_field(o, "X-Request-Id", 12, r->reqid, r->reqid_len);
    if (expects_content(rq))
        gw_ob_lit(o, "Content-Length: 0\r\n");
}

static void sub_done(void *arg, const struct gw_sub_answer *a)
{
    struct gw_req *r = arg;

    r->sub = NULL; /* it frees itself */
    gw_policy_resume(r, a);
}

static int fa_request(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val)
{
    const struct adm_fa_conf *c = p->conf;
    const struct adm_upstream *def = &r->snap->cfg->upstreams[c->up];
    struct adm_fa_wctr *k = &((struct adm_fa_state *)p->state)->ctr[r->c->w->id];
    struct gw_sub_spec spec = {.head = build_head,
                               .no_body = r->is_head,
                               .hash = def->balance == ADM_BALANCE_HASH ? gw_hashkey(r, def) : 0,
                               .timeout_ms = c->timeout_ms,
                               .body_max = BODY_MAX};

    (void)val;
    if ((r->sub = gw_subreq_start(r->c->w, r->snap, c->up, &spec, sub_done, r)))
        return GW_POL_PENDING;
    /* no server up or free, no connection, or out of memory */
    gw_count(&k->errors, 1);
    gw_log(GW_LOG_WARN, "forward_auth %s route %s: no server of upstream %s to ask", p->name,
           r->sr->id, c->upstream);
    gw_local_simple(r, 503, NULL, 0);
    gw_local_finish(r);
    return GW_POL_ANSWERED;
}

/* Writes field <h> as "Name: value\r\n" at <d>, its value without the
 * whitespace around it: the bytes written, at most its name's and
 * value's lengths and 4. */
static size_t put_field(char *d, const struct h1_header *h)
{
    struct h1_slice v = h->value;
    size_t n = h->name.len;

    h1_trim_ows(&v);
    memcpy(d, h->name.ptr, n);
    memcpy(d + n, ": ", 2);
    memcpy(d + n + 2, v.ptr, v.len);
    memcpy(d + n + 2 + v.len, "\r\n", 2);
    return n + v.len + 4;
}

/* Keeps the fields of 2xx answer <a> that response_headers names, as
 * lines in r->pol_fields, and points *<val> at them (0: none). -1 when
 * out of memory. */
static int keep_fields(const struct adm_fa_conf *c, struct gw_req *r, const struct gw_sub_answer *a,
                       uint64_t *val)
{
    size_t need = 1, n = 0;

    for (size_t i = 0; i < a->nhdr; i++)
        if (named(&a->hdr[i].name, c->resp, c->nresp))
            need += a->hdr[i].name.len + a->hdr[i].value.len + 4;
    if (need == 1)
        return 0;
    if (need > r->pol_fields_cap) {
        char *f = realloc(r->pol_fields, need);
        if (!f)
            return -1;
        r->pol_fields = f;
        r->pol_fields_cap = need;
    }
    for (size_t i = 0; i < a->nhdr; i++)
        if (named(&a->hdr[i].name, c->resp, c->nresp))
            n += put_field(r->pol_fields + n, &a->hdr[i]);
    r->pol_fields[n] = '\0';
    *val = (uint64_t)(uintptr_t)r->pol_fields;
    return 0;
}

/* Answers <r> with refusal <a> (401 or 403): its status and body, with
 * the fields of it a client acts on. */
static void refuse(struct gw_req *r, const struct gw_sub_answer *a)
{
    /* each line is at most its field's in the head ("Name:value\r\n"), and
     * one byte more: the head's limit and one byte a field bound them */
    char extra[GW_SUB_HEAD_MAX + H1_RESP_MAX_HEADERS];
    size_t n = 0;

    for (size_t i = 0; i < a->nhdr; i++) {
        const struct h1_slice *name = &a->hdr[i].name;
        if ((a->status == 401 && h1_name_is(name, "www-authenticate")) ||
            h1_name_is(name, "content-type") || h1_name_is(name, "set-cookie"))
            n += put_field(extra + n, &a->hdr[i]);
    }
    gw_local_body(r, a->status, extra, n, a->body, a->body_len);
}

static int fa_resume(const struct adm_spolicy *p, struct gw_req *r, uint64_t *val,
                     const void *answer)
{
    const struct gw_sub_answer *a = answer;
    const struct adm_fa_conf *c = p->conf;
    struct adm_fa_wctr *k = &((struct adm_fa_state *)p->state)->ctr[r->c->w->id];
    int status = 503;

    switch (a->outcome) {
    case GW_SUB_TIMEOUT:
        gw_count(&k->timeouts, 1);
        gw_log(GW_LOG_WARN,
               "forward_auth %s route %s: upstream %s server %s gave no answer within %u ms",
               p->name, r->sr->id, c->upstream, a->server, c->timeout_ms);
        break;
    case GW_SUB_FAILED:
        gw_count(&k->errors, 1);
        gw_log(GW_LOG_WARN, "forward_auth %s route %s: upstream %s server %s: %s", p->name,
               r->sr->id, c->upstream, a->server, a->why ? a->why : "failed before answering");
        break;
    case GW_SUB_MALFORMED:
        gw_count(&k->errors, 1);
        gw_log(GW_LOG_WARN,
               "forward_auth %s route %s: upstream %s server %s gave a malformed answer", p->name,
               r->sr->id, c->upstream, a->server);
        status = 500;
        break;
    case GW_SUB_ANSWERED:
    case GW_SUB_BIG:
        if (a->status >= 200 && a->status < 300) {
            if (keep_fields(c, r, a, val) == 0) {
                gw_count(&k->allowed, 1);
                return GW_POL_NEXT;
            }
            gw_count(&k->errors, 1); /* out of memory */
            break;
        }
        if ((a->status == 401 || a->status == 403) && a->outcome == GW_SUB_ANSWERED) {
            gw_count(&k->denied, 1);
            refuse(r, a);
            gw_local_finish(r);
            return GW_POL_ANSWERED;
        }
        gw_count(&k->errors, 1);
        gw_log(GW_LOG_WARN, "forward_auth %s route %s: upstream %s server %s answered %d%s",
               p->name, r->sr->id, c->upstream, a->server, a->status,
               a->outcome == GW_SUB_BIG ? " with a body over 64 KiB" : "");
        if (a->outcome == GW_SUB_BIG && (a->status == 401 || a->status == 403))
            status = 500;
        break;
    }
    gw_local_simple(r, status, NULL, 0);
    gw_local_finish(r);
    return GW_POL_ANSWERED;
}

static void fa_upstream(const struct adm_spolicy *p, const struct h1_request *rq, uint64_t val,
                        struct gw_obuf *o)
{
    (void)p, (void)rq;
    if (val)
        gw_ob_str(o, (const char *)(uintptr_t)val);
}

static int fa_drops(const struct adm_spolicy *p, const struct h1_slice *name)
{
    const struct adm_fa_conf *c = p->conf;

    for (size_t i = 0; i < c->nresp; i++)
        if (gw_policy_field_is(name, c->resp[i].name, c->resp[i].len))
            return 1;
    return 0;
}

const struct gw_policy_ops gw_policy_forward_auth = {
    .request = fa_request,
    .resume = fa_resume,
    .upstream = fa_upstream,
    .drops = fa_drops,
};
