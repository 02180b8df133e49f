/*
 * clientip.c - the client's address by the config's client_ip (clientip.h):
 * fox's strategies. X-Forwarded-For and Forwarded are walked from the
 * right, past the proxies the operator trusts, to the first hop that is
 * not one: whatever is left of it may have been written by the client.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/clientip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "admin/http1/forwarded.h"
#include "gateway/conn.h"

/* The walk from the right, fed from the left: the answer for the hops seen
 * so far if they were the whole list, in O(1) state. Whatever led to it
 * (only trusted hops, an untrusted one, a trusted one right of a
 * non-address), the answer is an address or none, and the next hop
 * changes it the same way: so two states. */
enum walk_state {
    W_NONE, /* no hop yet, or a non-address with no hop right of it yet */
    W_ADDR, /* <addr>: the rightmost untrusted hop; without one, the leftmost
             * trusted hop right of the rightmost non-address (or of all) */
};

struct walk {
    enum walk_state st;
    struct sockaddr_storage addr;
    const struct adm_cidr *trusted;
    size_t ntrusted;
};

/* Adds the hop <s>[0..<n>) on the right of the list. */
static void walk_hop(struct walk *w, const char *s, size_t n)
{
    struct sockaddr_storage a;

    if (h1_node_addr(s, n, &a) < 0) {
        w->st = W_NONE;
        return;
    }
    /* an untrusted hop is the answer; a trusted one only when there is none */
    if (w->st == W_NONE || !adm_cidr_match(w->trusted, w->ntrusted, (const struct sockaddr *)&a)) {
        w->st = W_ADDR;
        w->addr = a;
    }
}

static void walk_xff(struct walk *w, const struct h1_header *h)
{
    struct h1_slice e;
    size_t pos = 0;

    while (h1_list_next(h->value, &pos, &e))
        if (e.len) /* "a,,b": an empty element is no hop */
            walk_hop(w, e.ptr, e.len);
}

static void walk_forwarded(struct walk *w, const struct h1_header *h)
{
    char buf[H1_FWD_VALUE_MAX];
    enum h1_fwd_elem kind;
    struct h1_slice v;
    size_t pos = 0;

    while (h1_forwarded_next(h->value, &pos, &kind, &v, buf)) {
        if (kind == H1_FWD_FOR)
            walk_hop(w, v.ptr, v.len);
        else
            w->st = W_NONE; /* an element without "for" names no hop */
    }
}

int gw_cip_derive(const struct adm_client_ip *ci, const struct adm_cidr *trusted, size_t ntrusted,
                  const struct h1_request *rq, const struct sockaddr *peer,
                  struct sockaddr_storage *out)
{
    const struct h1_header *one = NULL;
    struct walk w = {.st = W_NONE, .trusted = trusted, .ntrusted = ntrusted};

    if (ci->source == ADM_CIP_PEER || !adm_cidr_match(trusted, ntrusted, peer))
        return 0; /* what an untrusted peer says of others is not believed */
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct h1_header *h = &rq->headers[i];
        switch (ci->source) {
        case ADM_CIP_XFF:
            if (h1_name_is(&h->name, "x-forwarded-for"))
                walk_xff(&w, h);
            break;
        case ADM_CIP_FORWARDED:
            if (h1_name_is(&h->name, "forwarded"))
                walk_forwarded(&w, h);
            break;
        default:
            if (h->name.len == ci->header_len &&
                !strncasecmp(h->name.ptr, ci->header, ci->header_len)) {
                if (one)
                    return 0; /* two copies: which one? neither */
                one = h;
            }
            break;
        }
    }
    if (ci->source == ADM_CIP_HEADER)
        return one && h1_node_addr(one->value.ptr, one->value.len, out) == 0;
    /* the peer, trusted, is the rightmost hop: a list ending in a
     * non-address falls back to it */
    if (w.st == W_NONE)
        return 0;
    *out = w.addr;
    return 1;
}

const struct adm_client_ip *gw_client_ip_config(struct gw_req *r)
{
    const struct adm_listener *al;

    if (!r->snap)
        return NULL;
    al = gw_conn_listener(r->c, r->snap);
    if (al && al->client_ip)
        return al->client_ip;
    return r->snap->cfg->client_ip;
}

/* Derives <c>'s address once per request (r->cip_state). */
static void derive(struct gw_req *r)
{
    const struct adm_client_ip *ci;
    const struct adm_config *cfg;

    if (!r->snap) /* no complete head yet (a 400): nothing to derive from */
        return;
    r->cip_state = GW_CIP_PEER;
    if (!(ci = gw_client_ip_config(r)))
        return;
    cfg = r->snap->cfg;
    if (!gw_cip_derive(ci, ci->has_trusted ? ci->trusted : cfg->trusted_proxies,
                       ci->has_trusted ? ci->ntrusted : cfg->ntrusted_proxies, &r->rp->req,
                       (const struct sockaddr *)&r->c->peer, &r->cip_addr))
        return;
    if (r->cip_addr.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&r->cip_addr)->sin_addr, r->cip, sizeof(r->cip));
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&r->cip_addr)->sin6_addr, r->cip,
                  sizeof(r->cip));
    r->cip_len = strlen(r->cip);
    r->cip_state = GW_CIP_DERIVED;
}

const char *gw_client_ip_text(struct gw_req *r, size_t *len)
{
    if (r->cip_state == GW_CIP_UNKNOWN)
        derive(r);
    if (r->cip_state == GW_CIP_DERIVED) {
        *len = r->cip_len;
        return r->cip;
    }
    *len = strlen(r->c->peer_ip);
    return r->c->peer_ip;
}

const unsigned char *gw_client_ip(struct gw_req *r, size_t *len)
{
    const struct sockaddr_storage *a;

    if (r->cip_state == GW_CIP_UNKNOWN)
        derive(r);
    a = r->cip_state == GW_CIP_DERIVED ? &r->cip_addr : &r->c->peer;
    if (a->ss_family == AF_INET) {
        *len = 4;
        return (const unsigned char *)&((const struct sockaddr_in *)a)->sin_addr;
    }
    *len = 16;
    return (const unsigned char *)&((const struct sockaddr_in6 *)a)->sin6_addr;
}
