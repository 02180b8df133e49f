/*
 * forward.c - where a request goes (gw_forward_decide: routed through the
 * pinned snapshot, and the checks before a byte goes upstream) and the
 * request head it goes upstream with (gw_forward_head): the target as
 * received (or normalized, by router.forward_path; decoded, when
 * router.escaped_slashes decoded it), or the route's strip_prefix or
 * rewrite of the normalized path; no hop-by-hop
 * field; X-Forwarded-For/-Proto/-Host as trusted_proxies allow;
 * X-Real-IP with the client_ip address (when client_ip is set); one
 * X-Request-Id; Via; the route's request_headers (set, add, remove); Max-Forwards one less; the
 * body re-framed. Pure: both are functions of their arguments, writing only into the caller's
 * buffer.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/forward.h"
#include "gateway/policy.h"

#include <string.h>
#include <strings.h>

/* A field named by a Connection token; framing fields are never dropped
 * that way (a "Connection: content-length" must not change the framing). */
int gw_forward_named_in(const struct h1_slice *n, const struct h1_slice *tok, size_t ntok)
{
    if (!ntok) /* the common case: no Connection tokens, nothing named */
        return 0;
    if (h1_is_framing_field(n) || h1_name_is(n, "host"))
        return 0;
    for (size_t i = 0; i < ntok; i++)
        if (tok[i].len == n->len && strncasecmp(tok[i].ptr, n->ptr, n->len) == 0)
            return 1;
    return 0;
}

int gw_hdrs_drops(const struct adm_shdrs *h, const struct h1_slice *name)
{
    for (size_t i = 0; i < h->ndrop; i++)
        if (h1_names_eq(&h->drop[i], name))
            return 1;
    return 0;
}

void gw_hdrs_emit(struct gw_obuf *o, const struct adm_shdrs *h, const struct gw_hdr_vals *v)
{
    for (size_t i = 0; i < h->nparts; i++) {
        const struct adm_hpart *p = &h->parts[i];
        switch (p->slot) {
        case ADM_HS_BYTES:
            gw_ob_add(o, p->s, p->len);
            break;
        case ADM_HS_CLIENT_IP:
            gw_ob_add(o, v->client_ip, v->client_ip_len);
            break;
        case ADM_HS_REQUEST_ID:
            gw_ob_add(o, v->reqid, v->reqid_len);
            break;
        case ADM_HS_HOST:
            gw_ob_add(o, v->host, v->host_len);
            break;
        default:
            if ((size_t)p->slot < v->nparams)
                gw_ob_add(o, v->params[p->slot].value, v->params[p->slot].len);
            break;
        }
    }
}

/* Whether route <sr> tunnels protocol <p> (its name, without "/version"). */
static int upgrade_allowed(const struct adm_sroute *sr, const struct h1_slice *p)
{
    if (h1_ci_eq(p->ptr, p->len, "h2c"))
        return 0;
    if (!sr->upgrades)
        return h1_ci_eq(p->ptr, p->len, "websocket");
    for (size_t i = 0; i < sr->nupgrades; i++)
        if (strlen(sr->upgrades[i]) == p->len && !strncasecmp(p->ptr, sr->upgrades[i], p->len))
            return 1;
    return 0;
}

int gw_forward_upgrade(const struct h1_request *rq, const struct adm_sroute *sr)
{
    int any = 0;

    if (!rq->upgrade)
        return 0;
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        struct h1_slice e;
        size_t pos = 0;
        if (!h1_name_is(&h->name, "upgrade"))
            continue;
        while (h1_list_next(h->value, &pos, &e)) {
            /* protocol = protocol-name ["/" protocol-version] (RFC 9110
             * 7.8); an element of another shape ("websocket/13 x") makes
             * the list malformed, and a malformed Upgrade tunnels nothing */
            const char *slash = memchr(e.ptr, '/', e.len);
            size_t nlen = slash ? (size_t)(slash - e.ptr) : e.len;
            if (e.len == 0)
                continue;
            if (!h1_is_token(e.ptr, nlen) || (slash && !h1_is_token(slash + 1, e.len - nlen - 1)))
                return 0;
            e.len = nlen;
            if (!upgrade_allowed(sr, &e))
                return 0;
            any = 1;
        }
    }
    return any;
}

/* Whether route <sr>'s strip_prefix takes the start of the normalized path
 * <p>[0..<n>): then *rest and *rn are what is left of it. */
static int strip_rest(const struct adm_sroute *sr, const char *p, size_t n, const char **rest,
                      size_t *rn)
{
    if (!(sr->strip_len && n >= sr->strip_len && memcmp(p, sr->strip_prefix, sr->strip_len) == 0 &&
          (n == sr->strip_len || p[sr->strip_len] == '/' ||
           sr->strip_prefix[sr->strip_len - 1] == '/')))
        return 0;
    *rest = p + sr->strip_len;
    *rn = n - sr->strip_len;
    return 1;
}

/* Whether the path route <sr>'s rewrite makes of <params> (<np>) may be
 * read by a backend as another place than the rewrite names: a parameter
 * that climbs on its own ("..%2Fx", "..;", "a%2F..%2F.."), which would
 * leave the place the rewrite puts it at, or a result that climbs above
 * its root (h1_path_climbs()). */
static int rewrite_climbs(const struct adm_sroute *sr, const struct rt_param *params, size_t np)
{
    struct h1_climb c;

    h1_climb_init(&c);
    for (size_t i = 0; i < sr->nrewrite; i++) {
        const struct adm_rw_part *part = &sr->rewrite[i];
        if (part->param < 0) {
            h1_climb_feed(&c, part->s, part->len);
        } else if ((size_t)part->param < np) {
            const struct rt_param *v = &params[part->param];
            if (h1_path_climbs(v->value, v->len))
                return 1;
            h1_climb_feed(&c, v->value, v->len);
        }
    }
    return h1_climb_end(&c);
}

/* Appends the route's rewrite or strip_prefix of the normalized path to <o>;
 * returns 0, writing nothing, when the route changes no path. */
static int add_rewritten_path(const struct gw_forward *f, struct gw_obuf *o)
{
    const struct h1_request *rq = f->rq;
    const struct adm_sroute *sr = f->sr;
    const char *p;
    size_t n;

    if (sr->rewrite) {
        for (size_t i = 0; i < sr->nrewrite; i++) {
            const struct adm_rw_part *part = &sr->rewrite[i];
            if (part->param < 0)
                gw_ob_add(o, part->s, part->len);
            else if ((size_t)part->param < f->nparams)
                gw_ob_add(o, f->params[part->param].value, f->params[part->param].len);
        }
        return 1;
    }
    if (strip_rest(sr, rq->path, rq->path_len, &p, &n)) {
        if (n == 0 || p[0] != '/') {
            gw_ob_add(o, "/", 1);
        }
        gw_ob_add(o, p, n);
        return 1;
    }
    return 0;
}

/* Whether the path of <rq> went up as received would be read otherwise than
 * it was routed: router.escaped_slashes decoded it. */
static int path_decoded(const struct h1_request *rq, const struct adm_config *cfg)
{
    return (rq->path_found & H1_PATH_SLASH_ESCAPE) &&
           cfg->router.escaped_slashes == H1_SLASHES_DECODE;
}

/* Appends the target as the client sent it, in origin-form: an
 * absolute-form target loses its scheme and authority (RFC 9112 3.2.1),
 * and an empty path becomes "/" (RFC 9112 3.2.2). <no_query>: up to its
 * '?' only. */
static void add_raw_target(const struct h1_request *rq, int no_query, struct gw_obuf *o)
{
    const char *t = rq->target.ptr, *q;
    size_t n = rq->target.len;

    if (rq->form == H1_TARGET_ABSOLUTE) { /* the path starts where the authority ends */
        const char *e = t + n, *a = rq->host.ptr + rq->host.len;
        if (a == e || *a == '?')
            gw_ob_add(o, "/", 1);
        n = (size_t)(e - a);
        t = a;
    }
    if (no_query && (q = memchr(t, '?', n)))
        n = (size_t)(q - t);
    gw_ob_add(o, t, n);
}

void gw_forward_target(const struct h1_request *rq, struct gw_obuf *o)
{
    add_raw_target(rq, 0, o);
}

static void ob_sink(void *ctx, const char *p, size_t n)
{
    gw_ob_add(ctx, p, n);
}

static void count_sink(void *ctx, const char *p, size_t n)
{
    (void)ctx, (void)p, (void)n;
}

/* Appends the query of <f>'s request without the parameter its policies
 * keep (f->pol_q), with its '?' when anything is left. */
static void add_stripped_query(const struct gw_forward *f, struct gw_obuf *o)
{
    const struct h1_slice *q = &f->rq->query;

    size_t kept = gw_policy_strip_query(q->ptr, q->len, f->pol_q, f->pol_qlen, count_sink, NULL);

    if (!kept && q->len) /* only the parameter: no '?' either */
        return;
    gw_ob_add(o, "?", 1);
    gw_policy_strip_query(q->ptr, q->len, f->pol_q, f->pol_qlen, ob_sink, o);
}

/* Whether the client's field <n> stays here: the route's request_headers
 * <rh> remove or set it, or one of the request's policies keeps it. */
static int dropped(const struct gw_forward *f, const struct adm_shdrs *rh, const struct h1_slice *n)
{
    return (rh && gw_hdrs_drops(rh, n)) ||
           (f->pol_n && gw_policy_drops(f->snap, f->sr, f->pol_n, n));
}

void gw_forward_head(const struct gw_forward *f, struct gw_obuf *o)
{
    const struct h1_request *rq = f->rq;
    const struct adm_config *cfg = f->snap->cfg;
    const struct adm_shdrs *rh = f->sr->reqh;
    int trusted = cfg->ntrusted_proxies &&
                  adm_cidr_match(cfg->trusted_proxies, cfg->ntrusted_proxies, f->peer);
    int have_xff = 0, have_proto = 0, have_xfh = 0, query = 0;
    int64_t mf = h1_max_forwards(rq);
    int drops = rh || f->pol_n; /* one test a field when neither drops any */

    gw_ob_add(o, rq->method.ptr, rq->method.len);
    gw_ob_add(o, " ", 1);
    if (rq->form == H1_TARGET_ASTERISK) {
        gw_ob_add(o, "*", 1);
    } else if (add_rewritten_path(f, o)) {
        query = 1;
    } else if (cfg->router.forward_path == ADM_FWD_AS_RECEIVED && !path_decoded(rq, cfg)) {
        /* RFC 9110 7.7: the query with it, but a parameter a policy keeps */
        query = f->pol_qlen && rq->query.ptr;
        add_raw_target(rq, query, o);
    } else {
        gw_ob_add(o, rq->path, rq->path_len);
        query = 1;
    }
    if (query && rq->query.ptr && f->pol_qlen) {
        add_stripped_query(f, o); /* a policy keeps a parameter */
    } else if (query && rq->query.ptr) {
        gw_ob_add(o, "?", 1);
        gw_ob_add(o, rq->query.ptr, rq->query.len);
    }
    gw_ob_add(o, " HTTP/1.1\r\n", 11);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        const struct h1_slice *n = &h->name;
        if (h1_is_hop_field(n) || gw_forward_named_in(n, rq->connection, rq->nconnection))
            continue;
        if (drops && dropped(f, rh, n)) /* the route's or a policy's */
            continue;
        switch (n->len) {
        case 4:
            if (h1_name_is(n, "host") && rq->form == H1_TARGET_ABSOLUTE)
                continue;
            break;
        case 6:
            if (h1_name_is(n, "expect"))
                continue;
            break;
        case 9:
            if (h1_name_is(n, "forwarded") && !trusted)
                continue;
            if (f->client_ip && h1_name_is(n, "x-real-ip"))
                continue; /* ours: the derived address */
            break;
        case 20: /* ours alone to send: from the verified certificate */
            if (h1_name_is(n, "x-client-cert-sha256"))
                continue;
            break;
        case 21:
            if (h1_name_is(n, "x-client-cert-subject"))
                continue;
            break;
        case 12:
            if (h1_name_is(n, "x-request-id")) {
                if (h != f->client_id) /* the one the client and the upstream see */
                    continue;
            } else if (mf > 0 && h1_name_is(n, "max-forwards")) {
                /* one hop less (RFC 9110 7.6.2) */
                gw_ob_lit(o, "Max-Forwards: ");
                gw_ob_u64(o, (uint64_t)mf - 1);
                gw_ob_lit(o, "\r\n");
                continue;
            }
            break;
        case 14:
            if (h1_name_is(n, "content-length"))
                continue;
            break;
        case 15:
            if (h1_name_is(n, "x-forwarded-for")) {
                have_xff |= trusted;
                continue;
            }
            break;
        case 16:
            if (h1_name_is(n, "x-forwarded-host")) {
                if (!trusted)
                    continue;
                have_xfh = 1;
            }
            break;
        case 17:
            if (h1_name_is(n, "transfer-encoding"))
                continue;
            if (h1_name_is(n, "x-forwarded-proto")) {
                if (!trusted)
                    continue;
                have_proto = 1;
            }
            break;
        default:
            break;
        }
        gw_ob_add(o, n->ptr, n->len);
        gw_ob_add(o, ": ", 2);
        gw_ob_add(o, h->value.ptr, h->value.len);
        gw_ob_add(o, "\r\n", 2);
    }
    if (rh) {
        struct gw_hdr_vals v = {
            .params = f->params,
            .nparams = f->nparams,
            .client_ip = f->client_ip ? f->client_ip : f->peer_ip,
            .client_ip_len = f->client_ip ? f->client_ip_len : strlen(f->peer_ip),
            .reqid = f->client_id ? f->client_id->value.ptr : f->reqid,
            .reqid_len = f->client_id ? f->client_id->value.len : f->reqid_len,
            .host = rq->host_name.ptr,
            .host_len = rq->host_name.len,
        };
        gw_hdrs_emit(o, rh, &v);
    }
    if (f->pol_n)
        gw_policy_upstream(f->snap, f->sr, rq, f->pol_val, f->pol_n, o);
    if (rh && rh->sets_host) {
        /* the route's Host went up with its fields */
    } else if (rq->form == H1_TARGET_ABSOLUTE && rq->host.ptr)
        gw_ob_field(o, "Host", 4, rq->host.ptr, rq->host.len);
    else if (!rq->host.ptr) /* HTTP/1.0 without Host: HTTP/1.1 needs one (as nginx) */
        gw_ob_field(o, "Host", 4, f->upstream_addr, strlen(f->upstream_addr));
    /* a trusted proxy's list, every field of it in order (one list, RFC 9110
     * 5.3), then the peer */
    gw_ob_add(o, "X-Forwarded-For: ", 17);
    for (size_t i = 0; have_xff && i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (h->value.len && h1_name_is(&h->name, "x-forwarded-for")) {
            gw_ob_add(o, h->value.ptr, h->value.len);
            gw_ob_add(o, ", ", 2);
        }
    }
    gw_ob_str(o, f->peer_ip);
    gw_ob_lit(o, "\r\n");
    if (f->client_ip)
        gw_ob_field(o, "X-Real-IP", 9, f->client_ip, f->client_ip_len);
    if (!have_proto && f->tls)
        gw_ob_lit(o, "X-Forwarded-Proto: https\r\n");
    else if (!have_proto)
        gw_ob_lit(o, "X-Forwarded-Proto: http\r\n");
    if (f->client_subject) {
        gw_ob_field(o, "X-Client-Cert-Subject", 21, f->client_subject, strlen(f->client_subject));
        gw_ob_field(o, "X-Client-Cert-Sha256", 20, f->client_sha256, strlen(f->client_sha256));
    }
    if (!have_xfh && rq->host.ptr)
        gw_ob_field(o, "X-Forwarded-Host", 16, rq->host.ptr, rq->host.len);
    if (!f->client_id)
        gw_ob_field(o, "X-Request-Id", 12, f->reqid, f->reqid_len);
    /* RFC 9110 7.6.3: a gateway MUST send Via in each request it forwards,
     * after those of earlier hops, with the protocol it received */
    gw_ob_add(o, rq->version_minor ? "Via: 1.1 switchyard\r\n" : "Via: 1.0 switchyard\r\n", 21);
    if (rq->body_kind == H1_BODY_NONE) {
        /* no framing field */
    } else if (f->buffered || rq->body_kind == H1_BODY_LENGTH) {
        gw_ob_lit(o, "Content-Length: ");
        gw_ob_u64(o, f->buffered ? f->buffered_len : rq->content_length);
        gw_ob_lit(o, "\r\n");
    } else if (rq->body_kind == H1_BODY_CHUNKED) {
        gw_ob_lit(o, "Transfer-Encoding: chunked\r\n");
    }
    if (gw_forward_upgrade(rq, f->sr)) {
        const char *sep = "Connection: upgrade\r\nUpgrade: ";
        /* every Upgrade field, as one list (RFC 9110 5.3) */
        for (size_t i = 0; i < rq->nheaders; i++) {
            const struct h1_header *h = &rq->headers[i];
            if (h1_name_is(&h->name, "upgrade") && h->value.len) {
                gw_ob_str(o, sep);
                gw_ob_add(o, h->value.ptr, h->value.len);
                sep = ", ";
            }
        }
        gw_ob_lit(o, "\r\n");
    }
    gw_ob_lit(o, "\r\n");
}

/* The head is complete: route it and act. */
/* What becomes of the request in c->rp under snapshot c->req.snap: routed
 * (c->req.sr, c->req.params), and the checks that decide whether it goes upstream.
 * request_start() acts on the verdict; the upstream-head fuzz probe too. */
const struct h1_header *gw_forward_client_id(const struct h1_request *rq, size_t max)
{
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        if (h->name.len == 12 && h1_name_is(&h->name, "x-request-id") && h->value.len &&
            h->value.len < max && !h1_is_hop_field(&h->name) &&
            !gw_forward_named_in(&h->name, rq->connection, rq->nconnection))
            return h;
    }
    return NULL;
}

enum gw_verdict gw_forward_decide(struct h1_req_parser *rp, const struct adm_snapshot *s,
                                  rt_ctx *ctx, struct rt_param *params, size_t cap,
                                  struct rt_match *m, const struct adm_sroute **sr)
{
    const struct h1_request *rq = &rp->req;

    *sr = NULL;
    if (rq->method_id == HTTP_CONNECT)
        return GW_V_CONNECT;
    if (rq->form == H1_TARGET_ASTERISK)
        return GW_V_ASTERISK;
    if (rt_table_max_params(s->rt) > cap)
        return GW_V_NOMEM;
    if (rq->path_found && h1_req_route_path(rp, s->cfg->router.escaped_slashes) < 0)
        return GW_V_BAD_PATH;
    rt_lookup_ctx(s->rt, ctx, rq->method.ptr, rq->method.len, rq->host_name.ptr, rq->host_name.len,
                  rq->path, rq->path_len, params, cap, m);
    if (m->status != RT_HIT)
        return GW_V_ROUTER;
    *sr = rt_route_udata(m->route);
    if ((*sr)->action != ADM_ACTION_UPSTREAM)
        return GW_V_LOCAL;
    if ((*sr)->rewrite) { /* parameters may carry "..%2F", "..;" or make a ".." */
        if (rewrite_climbs(*sr, params, m->nparams < cap ? m->nparams : cap))
            return GW_V_BAD_PATH;
    } else if (rq->path_found) { /* only such a path can hide a ".." from the router */
        const char *rest;
        size_t rn;
        if (strip_rest(*sr, rq->path, rq->path_len, &rest, &rn) && h1_path_climbs(rest, rn))
            return GW_V_BAD_PATH;
    }
    if (h1_max_forwards(rq) == 0)
        return GW_V_MF0;
    /* the second parser agrees before a byte goes upstream */
    return h1_req_confirm(rp) < 0 ? GW_V_INVALID : GW_V_UPSTREAM;
}
