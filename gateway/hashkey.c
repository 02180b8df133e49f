/*
 * hashkey.c - the key a hash-balanced pool (upstreams.NAME.balance "hash")
 * hashes for a request: the client's address (derived by client_ip when
 * that is configured, else the peer's), a header's value, a
 * cookie's value or the normalized path (upstreams.NAME.hash_key). A pure
 * function of the request and its connection; a missing header or cookie
 * hashes as the empty key, so such requests all go to one server.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/hashkey.h"

#include "gateway/clientip.h"

#include <string.h>

/* The value of cookie <name> in the Cookie fields (RFC 6265 5.4:
 * "a=1; b=2"), or NULL. Names compare exactly. */
static const char *cookie(const struct h1_request *rq, const char *name, size_t *len)
{
    size_t nlen = strlen(name);

    for (size_t i = 0; i < rq->nheaders; i++) {
        const char *s, *e;
        if (!h1_name_is(&rq->headers[i].name, "cookie"))
            continue;
        s = rq->headers[i].value.ptr;
        e = s + rq->headers[i].value.len;
        while (s < e) {
            const char *end = memchr(s, ';', (size_t)(e - s)), *eq;
            if (!end)
                end = e;
            while (s < end && (*s == ' ' || *s == '\t'))
                s++;
            eq = memchr(s, '=', (size_t)(end - s));
            if (eq && (size_t)(eq - s) == nlen && memcmp(s, name, nlen) == 0) {
                *len = (size_t)(end - eq - 1);
                return eq + 1;
            }
            s = end + 1;
        }
    }
    return NULL;
}

uint64_t gw_hashkey(struct gw_req *r, const struct adm_upstream *u)
{
    const struct h1_request *rq = &r->rp->req;
    const struct h1_header *h;
    const void *key = "";
    size_t len = 0;

    switch (u->hash_on) {
    case ADM_HASH_CLIENT_IP:
        key = gw_client_ip(r, &len); /* under client_ip, the derived address */
        break;
    case ADM_HASH_HEADER:
        if ((h = h1_request_header(rq, u->hash_name)) && h->value.ptr) {
            key = h->value.ptr;
            len = h->value.len;
        }
        break;
    case ADM_HASH_COOKIE: {
        const char *s = cookie(rq, u->hash_name, &len);
        if (s)
            key = s;
        else
            len = 0;
        break;
    }
    case ADM_HASH_PATH:
        key = rq->path;
        len = rq->path_len;
        break;
    }
    return up_hash(key, len);
}
