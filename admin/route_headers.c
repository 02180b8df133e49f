/*
 * route_headers.c - a route's request_headers and response_headers encoded
 * once per snapshot (admin/snapshot.h, struct adm_shdrs): every field to
 * append as "Name: " and the value's literal bytes, with a slot wherever
 * a request fills in a parameter, {client_ip}, {request_id} or {host}; and
 * the lower-case names of the fields dropped. The gateway walks the parts
 * (gateway/forward.c) and parses nothing per request.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/snapshot.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The encoder's cursor: bytes and parts are sized before, filled here. */
struct enc {
    struct adm_shdrs *h;
    char *b;
};

static void add_bytes(struct enc *e, const char *s, size_t n)
{
    struct adm_hpart *last = e->h->nparts ? &e->h->parts[e->h->nparts - 1] : NULL;

    if (!n)
        return;
    memcpy(e->b, s, n);
    if (last && last->slot == ADM_HS_BYTES && last->s + last->len == e->b) {
        last->len += n; /* adjacent literals are one part */
    } else {
        e->h->parts[e->h->nparts++] = (struct adm_hpart){ADM_HS_BYTES, e->b, n};
    }
    e->b += n;
}

/* A route parameter wins over a built-in of the same name. */
static int slot_of(const struct adm_hdr_part *p, const char *pattern)
{
    static const int builtin_slot[] = {ADM_HS_CLIENT_IP, ADM_HS_REQUEST_ID, ADM_HS_HOST};
    int i = adm_pattern_param_index(pattern, p->s, p->len);

    if (i >= 0)
        return i;
    i = adm_hdr_builtin(p->s, p->len);
    return i < 0 ? ADM_HS_BYTES : builtin_slot[i];
}

static int add_field(struct enc *e, const struct adm_header *f, const char *pattern)
{
    struct adm_hdr_part p;
    size_t pos = 0;
    int rc;

    add_bytes(e, f->name, strlen(f->name));
    add_bytes(e, ": ", 2);
    while ((rc = adm_hdr_part_next(f->value, &pos, &p)) > 0) {
        int slot = p.slot == ADM_HDR_LITERAL ? ADM_HS_BYTES : slot_of(&p, pattern);
        if (p.slot == ADM_HDR_NAME && slot == ADM_HS_BYTES)
            return -1; /* the validator refuses unknown names */
        if (slot == ADM_HS_BYTES)
            add_bytes(e, p.s, p.len);
        else
            e->h->parts[e->h->nparts++] = (struct adm_hpart){slot, NULL, 0};
    }
    add_bytes(e, "\r\n", 2);
    return rc;
}

static void add_drop(struct enc *e, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < n; i++)
        e->b[i] = (char)h1_lower((unsigned char)name[i]);
    e->h->drop[e->h->ndrop++] = (struct h1_slice){e->b, n};
    e->b += n;
}

struct adm_shdrs *adm_shdrs_new(const struct adm_hdr_actions *a, const char *pattern)
{
    struct adm_shdrs *h = calloc(1, sizeof(*h));
    size_t bytes = 0, parts = 0;
    struct enc e = {h, NULL};

    if (!h)
        return NULL;
    for (int add = 0; add < 2; add++) {
        const struct adm_header *f = add ? a->add : a->set;
        for (size_t i = 0, n = add ? a->nadd : a->nset; i < n; i++) {
            size_t v = strlen(f[i].value);
            bytes += 2 * strlen(f[i].name) + v + 4; /* a set's name is dropped too */
            parts += v + 2;                         /* at most one part a byte, and the ends */
        }
    }
    for (size_t i = 0; i < a->nremove; i++)
        bytes += strlen(a->remove[i]);
    if (!(h->bytes = malloc(bytes + 1)) || !(h->parts = calloc(parts + 1, sizeof(*h->parts))) ||
        !(h->drop = calloc(a->nset + a->nremove + 1, sizeof(*h->drop))))
        goto fail;
    e.b = h->bytes;
    for (size_t i = 0; i < a->nset; i++) {
        if (add_field(&e, &a->set[i], pattern) < 0)
            goto fail;
        add_drop(&e, a->set[i].name); /* between two fields: they never merge */
        h->sets_host |= !strcasecmp(a->set[i].name, "host");
    }
    for (size_t i = 0; i < a->nadd; i++)
        if (add_field(&e, &a->add[i], pattern) < 0)
            goto fail;
    for (size_t i = 0; i < a->nremove; i++)
        add_drop(&e, a->remove[i]);
    return h;
fail:
    adm_shdrs_free(h);
    return NULL;
}

void adm_shdrs_free(struct adm_shdrs *h)
{
    if (!h)
        return;
    free(h->bytes);
    free(h->parts);
    free(h->drop);
    free(h);
}
