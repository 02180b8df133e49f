/*
 * fleet.c - the fleet's objects at one etcd revision and the config
 * document they make with a node's own file (admin/fleet.h).
 *
 * The objects are one array of entries sorted by key (etcd's byte order),
 * so that routes and certificates come out in key order and a lookup is a
 * binary search. Each entry is placed when it is stored: its key tells
 * what it is, its value is parsed once into the JSON the composed document
 * takes (a route with its "id", an upstream without its "name"), or into
 * the reason it cannot be placed. A compose is then an assembly of shared
 * references, so a revision that changes one route of 10,000 parses one
 * route, and a re-read after a compaction parses only the values that
 * changed.
 *
 * Stored JSON values are shared by every document composed from them and
 * by adm_fleet_dup()'s copies; nobody changes them in place. Everything
 * here belongs to one thread (the admin thread): the references are not
 * counted atomically.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/fleet.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "admin/config_int.h"

#define TICKET_MIN 32 /* bytes of a ticket secret, at least */

enum kind { K_BAD = 0, K_UPSTREAM, K_ROUTE, K_CERT, K_TICKET, K_POLICY };

/* One key. <key> and <val> live in the same allocation, each followed by
 * a NUL (a value may hold NULs of its own: <vallen> counts). */
struct ent {
    char *key, *val;
    size_t keylen, vallen;
    int64_t mod;
    enum kind kind;
    json_t *obj; /* what the composed document gets; NULL with <err> */
    char *err;   /* why the object cannot be placed */
};

struct adm_fleet {
    char *prefix;
    size_t plen;
    int64_t rev;
    struct ent **v; /* sorted by key */
    size_t n;
};

/* ---- placing one object ---- */

static const char not_fleet[] = "not a fleet object: expected upstreams/NAME, routes/ID, "
                                "policies/NAME, certificates/NAME or tls/ticket_secret";

/* Sets <e>'s reason. -1 out of memory. */
ADM_PRINTF(2, 3) static int set_err(struct ent *e, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !(e->err = malloc((size_t)n + 1)))
        return -1;
    va_start(ap, fmt);
    vsnprintf(e->err, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return 0;
}

/* Whether the <n> bytes at <s> are UTF-8 as JSON strings take it (no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
static int utf8_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        unsigned c = p[i], len, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, cp = c & 0x07;
        else
            return 0;
        if (n - i < len)
            return 0;
        for (unsigned k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += len;
    }
    return 1;
}

/* <e>'s value as a JSON object into *<out>: 0, 1 when it is not one (the
 * reason set), -1 out of memory. */
static int value_object(struct ent *e, json_t **out)
{
    json_error_t je;
    json_t *v;

    *out = NULL;
    if (adm_json_blank(e->val, e->vallen) == e->vallen)
        return set_err(e, "the value is %s: expected a JSON object",
                       e->vallen ? "white space" : "empty") < 0
                   ? -1
                   : 1;
    if (!(v = json_loadb(e->val, e->vallen, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je))) {
        if (json_error_code(&je) == json_error_out_of_memory)
            return -1;
        return set_err(e, "not JSON: line %d, column %d: %s", je.line, je.column, je.text) < 0 ? -1
                                                                                               : 1;
    }
    if (!json_is_object(v)) {
        int rc = set_err(e, "expected a JSON object, got %s", adm_cf_type_name(v));
        json_decref(v);
        return rc < 0 ? -1 : 1;
    }
    *out = v;
    return 0;
}

/* Each fix below checks the parsed object <v> of the key named <name> and
 * takes it into <e> (or sets the reason and frees it). -1 out of memory. */

/* upstreams/<name>: the body of PUT /upstreams/{name}, whose "name", when
 * given, must be the key's and is not part of the definition. */
static int fix_upstream(struct ent *e, json_t *v, const char *name)
{
    const json_t *n = json_object_get(v, "name");
    struct adm_cf_qbuf q;
    int rc = 0;

    if (n && (!json_is_string(n) || strcmp(json_string_value(n), name) != 0))
        rc = set_err(e, "the \"name\" in the value differs from the key's name %s",
                     adm_cf_quote(&q, name));
    else if (n && json_object_del(v, "name") < 0)
        rc = -1;
    else
        e->obj = json_incref(v);
    json_decref(v);
    return rc;
}

/* routes/<id>: a route whose "id" is the key's (added when absent). */
static int fix_route(struct ent *e, json_t *v, const char *id)
{
    const json_t *i = json_object_get(v, "id");
    struct adm_cf_qbuf q, q2;
    int rc = 0;

    if (json_is_string(i) && strcmp(json_string_value(i), id) != 0)
        rc = set_err(e, "the route's \"id\" %s differs from the key's id %s",
                     adm_cf_quote(&q2, json_string_value(i)), adm_cf_quote(&q, id));
    else if (i && !json_is_string(i))
        rc = set_err(e, "the route's \"id\" must be the key's id %s", adm_cf_quote(&q, id));
    else if (!i && json_object_set_new(v, "id", json_string(id)) < 0)
        rc = -1;
    else
        e->obj = json_incref(v);
    json_decref(v);
    return rc;
}

/* certificates/<name>: an inline certificate as a listener takes it. */
static int fix_cert(struct ent *e, json_t *v, const char *name)
{
    int rc = 0;

    (void)name;
    if (json_object_get(v, "cert") || json_object_get(v, "key"))
        rc = set_err(e, "a fleet certificate is inline: \"cert_pem\" and \"key_pem\" (a "
                        "\"cert\" or \"key\" file would be each node's own)");
    else
        e->obj = json_incref(v);
    json_decref(v);
    return rc;
}

/* policies/<name>: a policy as "policies" takes it (its type and keys
 * are checked with the whole document). */
static int fix_policy(struct ent *e, json_t *v, const char *name)
{
    (void)name;
    e->obj = v;
    return 0;
}

/* The keys that hold a JSON object, by their folder under the prefix. */
static const struct {
    const char *dir;
    enum kind kind;
    const char *name;  /* what the rest of the key is, for its error */
    const char *extra; /* the bytes a name takes besides letters and digits */
    const char *said;  /* the same, for the error */
    int (*fix)(struct ent *e, json_t *v, const char *name);
} folders[] = {
    {"upstreams/", K_UPSTREAM, "upstream name", "_.-", "'_', '.', '-'", fix_upstream},
    {"routes/", K_ROUTE, "route id", "_.:-", "'_', '.', ':', '-'", fix_route},
    {"certificates/", K_CERT, "certificate name", "_.-", "'_', '.', '-'", fix_cert},
    {"policies/", K_POLICY, "policy name", "_.-", "'_', '.', '-'", fix_policy},
};

/* tls/ticket_secret: the raw secret, a JSON string in every TLS listener
 * that has none of its own. */
static int place_ticket(struct ent *e)
{
    if (e->vallen < TICKET_MIN)
        return set_err(e, "a ticket secret needs at least %d bytes (got %zu)", TICKET_MIN,
                       e->vallen);
    if (memchr(e->val, '\0', e->vallen) || !utf8_ok(e->val, e->vallen))
        return set_err(e, "the ticket secret must be UTF-8 text without NUL bytes "
                          "(e.g. openssl rand -base64 48)");
    return (e->obj = json_stringn(e->val, e->vallen)) ? 0 : -1;
}

static int starts(const char *s, size_t n, const char *with)
{
    size_t w = strlen(with);
    return n >= w && !memcmp(s, with, w);
}

/* Sets <e>'s kind and its object or reason from its key under <f>'s
 * prefix. -1 out of memory. */
static int place(const struct adm_fleet *f, struct ent *e)
{
    const char *rest;
    size_t rlen;

    if (e->keylen < f->plen || memcmp(e->key, f->prefix, f->plen) != 0)
        return set_err(e, "not under the fleet's prefix \"%s\"", f->prefix);
    rest = e->key + f->plen;
    rlen = e->keylen - f->plen;
    if (memchr(e->key, '\0', e->keylen))
        return set_err(e, "%s", not_fleet);
    for (size_t i = 0; i < sizeof(folders) / sizeof(folders[0]); i++) {
        size_t dl = strlen(folders[i].dir);
        const char *name = rest + dl;
        struct adm_cf_qbuf q;
        json_t *v;
        int rc;

        if (!starts(rest, rlen, folders[i].dir))
            continue;
        e->kind = folders[i].kind;
        if (!adm_cf_is_name(name, folders[i].extra, ADM_CF_MAX_NAME))
            return set_err(e, "invalid %s %s (use 1..%d letters, digits, %s)", folders[i].name,
                           adm_cf_quote(&q, name), ADM_CF_MAX_NAME, folders[i].said);
        if ((rc = value_object(e, &v)) != 0)
            return rc < 0 ? -1 : 0;
        return folders[i].fix(e, v, name);
    }
    if (rlen == 17 && starts(rest, rlen, "tls/ticket_secret")) {
        e->kind = K_TICKET;
        return place_ticket(e);
    }
    return set_err(e, "%s", not_fleet);
}

static void ent_free(struct ent *e)
{
    if (!e)
        return;
    json_decref(e->obj);
    free(e->err);
    free(e);
}

/* A new entry of <key> with <val>, placed (NULL out of memory). */
static struct ent *ent_new(const struct adm_fleet *f, const char *key, size_t keylen,
                           const char *val, size_t vallen, int64_t mod)
{
    struct ent *e;

    if (keylen > SIZE_MAX / 2 - sizeof(*e) || vallen > SIZE_MAX / 2)
        return NULL;
    if (!(e = calloc(1, sizeof(*e) + keylen + vallen + 2)))
        return NULL;
    e->key = (char *)(e + 1);
    e->val = e->key + keylen + 1;
    memcpy(e->key, key, keylen);
    if (vallen)
        memcpy(e->val, val, vallen);
    e->keylen = keylen;
    e->vallen = vallen;
    e->mod = mod;
    if (place(f, e) < 0) {
        ent_free(e);
        return NULL;
    }
    return e;
}

/* A copy of <e> sharing its JSON (NULL out of memory). */
static struct ent *ent_clone(const struct ent *e)
{
    struct ent *c = malloc(sizeof(*c) + e->keylen + e->vallen + 2);

    if (!c)
        return NULL;
    memcpy(c, e, sizeof(*c) + e->keylen + e->vallen + 2);
    c->key = (char *)(c + 1);
    c->val = c->key + c->keylen + 1;
    if (e->err && !(c->err = strdup(e->err))) {
        free(c);
        return NULL;
    }
    c->obj = json_incref(e->obj);
    return c;
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static int same_value(const struct ent *e, const char *val, size_t vallen)
{
    return e->vallen == vallen && (!vallen || !memcmp(e->val, val, vallen));
}

/* The index of <key> in the <n> entries of <v>, or where it would go
 * (*<found> says which). */
static size_t find(struct ent *const *v, size_t n, const char *key, size_t keylen, int *found)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(v[mid]->key, v[mid]->keylen, key, keylen);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

/* ---- the model ---- */

struct adm_fleet *adm_fleet_new(const char *prefix)
{
    struct adm_fleet *f = calloc(1, sizeof(*f));

    if (!f || !(f->prefix = strdup(prefix))) {
        free(f);
        return NULL;
    }
    f->plen = strlen(prefix);
    return f;
}

static void free_ents(struct ent **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ent_free(v[i]);
    free(v);
}

void adm_fleet_free(struct adm_fleet *f)
{
    if (!f)
        return;
    free_ents(f->v, f->n);
    free(f->prefix);
    free(f);
}

int64_t adm_fleet_revision(const struct adm_fleet *f)
{
    return f->rev;
}

size_t adm_fleet_count(const struct adm_fleet *f)
{
    return f->n;
}

const char *adm_fleet_get(const struct adm_fleet *f, const char *key, size_t *len, int64_t *mod)
{
    int found;
    size_t i = find(f->v, f->n, key, strlen(key), &found);

    if (len)
        *len = found ? f->v[i]->vallen : 0;
    if (mod)
        *mod = found ? f->v[i]->mod : 0;
    return found ? f->v[i]->val : NULL;
}

struct adm_fleet *adm_fleet_dup(const struct adm_fleet *f)
{
    struct adm_fleet *d = adm_fleet_new(f->prefix);

    if (!d || !(d->v = calloc(f->n ? f->n : 1, sizeof(*d->v))))
        goto fail;
    for (; d->n < f->n; d->n++)
        if (!(d->v[d->n] = ent_clone(f->v[d->n])))
            goto fail;
    d->rev = f->rev;
    return d;
fail:
    adm_fleet_free(d);
    return NULL;
}

/* kvs sorted by key, the later of two alike first (so the last one wins
 * once duplicates are skipped) */
static int kv_order(const void *a, const void *b)
{
    const struct adm_etcd_kv *x = *(const struct adm_etcd_kv *const *)a;
    const struct adm_etcd_kv *y = *(const struct adm_etcd_kv *const *)b;
    int c = key_cmp(x->key, x->keylen, y->key, y->keylen);

    return c ? c : (x < y) - (x > y);
}

long adm_fleet_reset(struct adm_fleet *f, int64_t rev, const struct adm_etcd_kv *kvs, size_t n)
{
    const struct adm_etcd_kv **s = malloc((n ? n : 1) * sizeof(*s));
    struct ent **nv = calloc(n ? n : 1, sizeof(*nv));
    unsigned char *fresh = calloc(n ? n : 1, 1), *kept = calloc(f->n ? f->n : 1, 1);
    size_t m = 0, o = 0;
    long diff = 0;

    if (!s || !nv || !fresh || !kept)
        goto fail;
    for (size_t i = 0; i < n; i++)
        s[i] = &kvs[i];
    qsort(s, n, sizeof(*s), kv_order);
    /* a merge with the entries now: a value that did not change keeps its
     * entry, and is not parsed again */
    for (size_t i = 0; i < n; i++) {
        const struct adm_etcd_kv *kv = s[i];
        int c = 1;
        if (!kv->value || (m && !key_cmp(nv[m - 1]->key, nv[m - 1]->keylen, kv->key, kv->keylen)))
            continue; /* a deletion has no place in a read; a duplicate key */
        while (o < f->n && (c = key_cmp(f->v[o]->key, f->v[o]->keylen, kv->key, kv->keylen)) < 0)
            diff++, o++; /* removed */
        if (o < f->n && c == 0 && same_value(f->v[o], kv->value, kv->vallen)) {
            kept[o] = 1;
            nv[m++] = f->v[o++];
            continue;
        }
        if (o < f->n && c == 0)
            o++; /* changed */
        diff++;
        if (!(nv[m] = ent_new(f, kv->key, kv->keylen, kv->value, kv->vallen, kv->mod_revision)))
            goto fail;
        fresh[m++] = 1;
    }
    diff += (long)(f->n - o);

    /* commit: nothing fails from here */
    for (size_t i = 0, k = 0; i < n && k < m; i++)
        if (s[i]->value && nv[k]->keylen == s[i]->keylen &&
            !memcmp(nv[k]->key, s[i]->key, s[i]->keylen))
            nv[k++]->mod = s[i]->mod_revision;
    for (size_t i = 0; i < f->n; i++)
        if (!kept[i])
            ent_free(f->v[i]);
    free(f->v);
    f->v = nv;
    f->n = m;
    f->rev = rev;
    free(s);
    free(fresh);
    free(kept);
    return diff;

fail:
    for (size_t i = 0; nv && fresh && i < m; i++)
        if (fresh[i])
            ent_free(nv[i]);
    free(nv);
    free(s);
    free(fresh);
    free(kept);
    return -1;
}

/* What adm_fleet_apply() undoes or finishes: the entries it made, the ones
 * it took out, and the mod_revisions it will set. */
struct undo {
    struct ent **made, **gone;
    size_t nmade, ngone;
    struct {
        struct ent *e;
        int64_t mod;
    } * mods;
    size_t nmods;
};

long adm_fleet_apply(struct adm_fleet *f, int64_t rev, const struct adm_etcd_kv *evs, size_t n)
{
    size_t cap = f->n + n, m = f->n;
    struct ent **nv = malloc((cap ? cap : 1) * sizeof(*nv));
    struct undo u = {.made = malloc((n ? n : 1) * sizeof(*u.made)),
                     .gone = malloc((n ? n : 1) * sizeof(*u.gone)),
                     .mods = malloc((n ? n : 1) * sizeof(*u.mods))};
    long diff = 0;

    if (!nv || !u.made || !u.gone || !u.mods)
        goto fail;
    if (f->n)
        memcpy(nv, f->v, f->n * sizeof(*nv));
    /* on a copy of the array, so that running out of memory halfway
     * leaves <f> as it was */
    for (size_t i = 0; i < n; i++) {
        const struct adm_etcd_kv *ev = &evs[i];
        int found;
        size_t at = find(nv, m, ev->key, ev->keylen, &found);
        struct ent *e;

        if (!ev->value) {
            if (!found)
                continue;
            u.gone[u.ngone++] = nv[at];
            memmove(nv + at, nv + at + 1, (m - at - 1) * sizeof(*nv));
            m--;
            diff++;
            continue;
        }
        if (found && same_value(nv[at], ev->value, ev->vallen)) {
            u.mods[u.nmods].e = nv[at];
            u.mods[u.nmods++].mod = ev->mod_revision;
            continue;
        }
        if (!(e = ent_new(f, ev->key, ev->keylen, ev->value, ev->vallen, ev->mod_revision)))
            goto fail;
        u.made[u.nmade++] = e;
        diff++;
        if (found) {
            u.gone[u.ngone++] = nv[at];
            nv[at] = e;
        } else {
            memmove(nv + at + 1, nv + at, (m - at) * sizeof(*nv));
            nv[at] = e;
            m++;
        }
    }
    for (size_t i = 0; i < u.nmods; i++)
        u.mods[i].e->mod = u.mods[i].mod;
    for (size_t i = 0; i < u.ngone; i++)
        ent_free(u.gone[i]);
    free(f->v);
    f->v = nv;
    f->n = m;
    f->rev = rev;
    free(u.made);
    free(u.gone);
    free(u.mods);
    return diff;

fail:
    for (size_t i = 0; u.made && i < u.nmade; i++)
        ent_free(u.made[i]);
    free(nv);
    free(u.made);
    free(u.gone);
    free(u.mods);
    return -1;
}

/* ---- the state directory's copy ---- */

/* <n> bytes as base64 (NULL out of memory): a key or value that a JSON
 * string cannot hold as it is. */
static json_t *b64(const char *s, size_t n)
{
    char *out = malloc(4 * (n / 3 + 1) + 1);
    json_t *j;

    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    j = json_string(out);
    free(out);
    return j;
}

/* The bytes of base64 string <j> into *<out> (malloc'd, NUL-terminated)
 * and *<n>; -1 when <j> is not such a string (or out of memory). */
static int unb64(const json_t *j, char **out, size_t *n)
{
    const char *s = json_string_value(j);
    size_t len = s ? strlen(s) : 0, pad = 0;
    int got;

    *out = NULL;
    if (!s || len % 4 || len > (size_t)INT32_MAX)
        return -1;
    if (!(*out = malloc(len / 4 * 3 + 1)))
        return -1;
    pad = len && s[len - 1] == '=' ? (len > 1 && s[len - 2] == '=' ? 2 : 1) : 0;
    got = EVP_DecodeBlock((unsigned char *)*out, (const unsigned char *)s, (int)len);
    if (got < 0 || (size_t)got < pad) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *n = (size_t)got - pad;
    (*out)[*n] = '\0';
    return 0;
}

static json_t *rev_json(int64_t rev)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%lld", (long long)rev);
    return json_string(buf);
}

/* A JSON string of the <n> bytes at <s> when one holds them as they are. */
static int plain(const char *s, size_t n)
{
    return !memchr(s, '\0', n) && utf8_ok(s, n);
}

json_t *adm_fleet_save(const struct adm_fleet *f)
{
    json_t *kvs = json_object(), *odd = json_array();
    json_t *out =
        json_pack("{s:o,s:o,s:o}", "revision", rev_json(f->rev), "kvs", kvs, "kvs_base64", odd);

    if (!out)
        return NULL;
    for (size_t i = 0; i < f->n; i++) {
        const struct ent *e = f->v[i];
        json_t *o;
        if (plain(e->key, e->keylen) && plain(e->val, e->vallen)) {
            o = json_pack("{s:s%,s:o}", "value", e->val, e->vallen, "mod", rev_json(e->mod));
            if (!o || json_object_setn_new(kvs, e->key, e->keylen, o) < 0)
                goto fail;
        } else { /* bytes a JSON text cannot hold: a ticket secret, a stray key */
            o = json_pack("{s:o,s:o,s:o}", "key", b64(e->key, e->keylen), "value",
                          b64(e->val, e->vallen), "mod", rev_json(e->mod));
            if (!o || json_array_append_new(odd, o) < 0)
                goto fail;
        }
    }
    if (!json_array_size(odd))
        json_object_del(out, "kvs_base64");
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* A revision as saved: a string of digits (or, leniently, an integer). */
static int rev_of(const json_t *j, int64_t *rev)
{
    const char *s = json_string_value(j);
    char *end;
    long long v;

    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *rev = json_integer_value(j);
        return 0;
    }
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    v = strtoll(s, &end, 10);
    if (*end || v < 0)
        return -1;
    *rev = v;
    return 0;
}

/* Adds the saved "kvs" entries of <saved> to <kv> (of room enough);
 * the number added, or -1 with the error in <errs>. */
static long load_plain(const json_t *kvs, struct adm_etcd_kv *kv, struct adm_errors *errs)
{
    const char *key;
    size_t klen;
    json_t *o;
    long n = 0;

    json_object_keylen_foreach((json_t *)kvs, key, klen, o)
    {
        const json_t *v = json_object_get(o, "value");
        if (!json_is_string(v) || rev_of(json_object_get(o, "mod"), &kv[n].mod_revision) < 0) {
            adm_errors_add(errs, "/kvs", "%s: expected {\"value\": \"...\", \"mod\": \"REV\"}",
                           key);
            return -1;
        }
        kv[n].key = key;
        kv[n].keylen = klen;
        kv[n].value = json_string_value(v);
        kv[n++].vallen = json_string_length(v);
    }
    return n;
}

int adm_fleet_load(struct adm_fleet *f, const json_t *saved, struct adm_errors *errs)
{
    const json_t *kvs = json_object_get(saved, "kvs"), *odd = json_object_get(saved, "kvs_base64");
    size_t nodd = json_array_size(odd), total = json_object_size(kvs) + nodd, i;
    struct adm_etcd_kv *kv = calloc(total ? total : 1, sizeof(*kv));
    char **bytes = calloc(2 * nodd + 1, sizeof(*bytes));
    int64_t rev;
    long n = 0;
    int rc = -1;

    if (!kv || !bytes) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while loading the fleet's state");
        goto out;
    }
    if (!json_is_object(saved) || !json_is_object(kvs) || (odd && !json_is_array(odd)) ||
        rev_of(json_object_get(saved, "revision"), &rev) < 0) {
        adm_errors_add(errs, "",
                       "not a saved fleet: expected {\"revision\": \"REV\", \"kvs\": "
                       "{KEY: {\"value\": ..., \"mod\": ...}}}");
        goto out;
    }
    if ((n = load_plain(kvs, kv, errs)) < 0)
        goto out;
    for (i = 0; i < nodd; i++) {
        const json_t *o = json_array_get(odd, i);
        struct adm_etcd_kv *k = &kv[n];
        if (unb64(json_object_get(o, "key"), &bytes[2 * i], &k->keylen) < 0 ||
            unb64(json_object_get(o, "value"), &bytes[2 * i + 1], &k->vallen) < 0 ||
            rev_of(json_object_get(o, "mod"), &k->mod_revision) < 0) {
            adm_errors_add(errs, "/kvs_base64",
                           "entry %zu: expected base64 \"key\" and "
                           "\"value\", and \"mod\": \"REV\"",
                           i);
            goto out;
        }
        k->key = bytes[2 * i];
        k->value = bytes[2 * i + 1];
        n++;
    }
    if (adm_fleet_reset(f, rev, kv, (size_t)n) < 0) {
        errs->nomem = 1;
        adm_errors_add(errs, "", "out of memory while loading the fleet's state");
        goto out;
    }
    rc = 0;
out:
    for (i = 0; bytes && i < 2 * nodd; i++)
        free(bytes[i]);
    free(bytes);
    free(kv);
    return rc;
}

/* ---- composing the config ---- */

/* Whether the node's <key> holds anything: an empty "routes": [] or
 * "upstreams": {} (a template's) is no conflict with the fleet's. */
static int node_has(const json_t *node, const char *key)
{
    const json_t *v = json_object_get(node, key);

    return v && !(json_is_array(v) && json_array_size(v) == 0) &&
           !(json_is_object(v) && json_object_size(v) == 0);
}

/* The node file's "routes", "upstreams" or "policies", refused: on a
 * fleet node they come from etcd. */
static void node_owned(const struct adm_fleet *f, const json_t *node, struct adm_errors *errs)
{
    static const struct {
        const char *key, *path, *name, *value;
    } owned[] = {
        {"routes", "/routes", "ID", "{\"path\": ...}"},
        {"upstreams", "/upstreams", "NAME", "{\"servers\": ...}"},
        {"policies", "/policies", "NAME", "{\"type\": ...}"},
    };

    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        if (node_has(node, owned[i].key))
            adm_errors_add(errs, owned[i].path,
                           "on a fleet node the %s live in etcd, one key each: %s%s/%s "
                           "(etcdctl put %s%s/%s '%s'); remove \"%s\" from the node's file",
                           owned[i].key, f->prefix, owned[i].key, owned[i].name, f->prefix,
                           owned[i].key, owned[i].name, owned[i].value, owned[i].key);
}

/* Whether listener <l> of the node document serves the fleet's
 * certificates ("certificates": "fleet"). */
static int serves_fleet(const json_t *l)
{
    const json_t *c = json_object_get(json_object_get(l, "tls"), "certificates");
    return json_is_string(c) && !strcmp(json_string_value(c), "fleet");
}

/* Whether the fleet's ticket secret goes into listener <l>'s "tls". */
static int takes_ticket(const json_t *l)
{
    const json_t *t = json_object_get(l, "tls");
    return json_is_object(t) && !json_object_get(t, "ticket_secret");
}

/* Puts the fleet's certificates and ticket secret into the listeners of
 * <doc> (a deep copy of the node's). -1 out of memory. */
static int fill_listeners(json_t *doc, json_t *certs, json_t *ticket)
{
    size_t i;
    json_t *l;

    json_array_foreach(json_object_get(doc, "listeners"), i, l)
    {
        json_t *t = json_object_get(l, "tls");
        if (serves_fleet(l) && json_object_set(t, "certificates", certs) < 0)
            return -1;
        if (ticket && takes_ticket(l) && json_object_set(t, "ticket_secret", ticket) < 0)
            return -1;
    }
    return 0;
}

json_t *adm_fleet_compose(const struct adm_fleet *f, const json_t *node, struct adm_errors *errs)
{
    size_t n0 = errs->n, dropped0 = errs->dropped;
    json_t *doc = NULL, *ups, *routes, *certs, *pols, *ticket = NULL;

    if (!json_is_object(node)) {
        adm_errors_add(errs, "", "the node's config must be a JSON object, got %s",
                       adm_cf_type_name(node));
        return NULL;
    }
    node_owned(f, node, errs);
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i]->err)
            adm_errors_add(errs, f->v[i]->key, "%s", f->v[i]->err);
    if (errs->n != n0 || errs->dropped != dropped0)
        return NULL;

    ups = json_object();
    routes = json_array();
    certs = json_array();
    pols = json_object();
    if (!ups || !routes || !certs || !pols)
        goto fail;
    for (size_t i = 0; i < f->n; i++) {
        const struct ent *e = f->v[i];
        int rc = 0;
        if (e->kind == K_UPSTREAM)
            rc = json_object_set(ups, e->key + f->plen + 10, e->obj);
        else if (e->kind == K_ROUTE)
            rc = json_array_append(routes, e->obj);
        else if (e->kind == K_CERT)
            rc = json_array_append(certs, e->obj);
        else if (e->kind == K_TICKET)
            ticket = e->obj;
        else if (e->kind == K_POLICY)
            rc = json_object_set(pols, e->key + f->plen + 9, e->obj);
        if (rc < 0)
            goto fail;
    }
    if (!(doc = json_deep_copy(node)) || fill_listeners(doc, certs, ticket) < 0 ||
        json_object_set(doc, "upstreams", ups) < 0 || json_object_set(doc, "routes", routes) < 0 ||
        (json_object_size(pols) && json_object_set(doc, "policies", pols) < 0))
        goto fail;
    json_decref(ups);
    json_decref(routes);
    json_decref(certs);
    json_decref(pols);
    return doc;

fail:
    json_decref(doc);
    json_decref(ups);
    json_decref(routes);
    json_decref(certs);
    json_decref(pols);
    errs->nomem = 1;
    adm_errors_add(errs, "", "out of memory while composing the fleet's config");
    return NULL;
}

/* ---- blaming the keys ---- */

/* The decimal index at the start of <p> (up to '/' or the end) into *<i>,
 * and where it ends; NULL when there is none. */
static const char *index_at(const char *p, size_t *i)
{
    size_t v = 0;
    const char *s = p;

    if (!*p || *p == '/' || (*p == '0' && p[1] && p[1] != '/'))
        return NULL;
    for (; *p && *p != '/'; p++) {
        if (!is_digit((unsigned char)*p) || v > SIZE_MAX / 10 - 10)
            return NULL;
        v = v * 10 + (size_t)(*p - '0');
    }
    *i = v;
    return p > s ? p : NULL;
}

/* The <n>th of the <nof> entries <of>, or NULL. */
static const struct ent *nth(const struct ent *const *of, size_t nof, size_t n)
{
    return n < nof ? of[n] : NULL;
}

/* The entry of kind <kind> in folder <dir> that the pointer segment at
 * <p> (up to '/') names, unescaped (~1 '/', ~0 '~'), or NULL; *<rest> the
 * remainder. */
static const struct ent *named_at(const struct adm_fleet *f, const char *dir, enum kind kind,
                                  const char *p, const char **rest)
{
    size_t seg = strcspn(p, "/"), n = 0, dl = strlen(dir);
    char *name = malloc(f->plen + dl + seg + 1);
    const struct ent *e = NULL;
    int found;
    size_t i;

    if (!name)
        return NULL;
    memcpy(name, f->prefix, f->plen);
    memcpy(name + f->plen, dir, dl);
    n = f->plen + dl;
    for (i = 0; i < seg; i++) {
        if (p[i] == '~' && i + 1 < seg && (p[i + 1] == '0' || p[i + 1] == '1'))
            name[n++] = p[++i] == '0' ? '~' : '/';
        else
            name[n++] = p[i];
    }
    i = find(f->v, f->n, name, n, &found);
    if (found && f->v[i]->kind == kind)
        e = f->v[i];
    free(name);
    *rest = p + seg;
    return e;
}

/* The entry a listener's pointer (after "/listeners/") came from, or
 * NULL; *<rest> the remainder of the pointer below the object. */
static const struct ent *listener_blame(const struct adm_fleet *f, const json_t *node,
                                        const char *p, const struct ent *const *certs,
                                        size_t ncerts, const char **rest)
{
    const struct ent *ticket = NULL;
    const json_t *l;
    size_t li, k;

    if (!(p = index_at(p, &li)) || !(l = json_array_get(json_object_get(node, "listeners"), li)))
        return NULL;
    if (serves_fleet(l) && !strncmp(p, "/tls/certificates/", 18) && (*rest = index_at(p + 18, &k)))
        return nth(certs, ncerts, k);
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i]->kind == K_TICKET)
            ticket = f->v[i];
    if (ticket && takes_ticket(l) && !strncmp(p, "/tls/ticket_secret", 18) &&
        (p[18] == '\0' || p[18] == '/')) {
        *rest = p + 18;
        return ticket;
    }
    return NULL;
}

void adm_fleet_blame(const struct adm_fleet *f, const json_t *node, const struct adm_errors *in,
                     struct adm_errors *out)
{
    const struct ent **routes = malloc((f->n ? f->n : 1) * sizeof(*routes));
    const struct ent **certs = malloc((f->n ? f->n : 1) * sizeof(*certs));
    size_t nroutes = 0, ncerts = 0;

    if (!routes || !certs) {
        out->nomem = 1;
        goto out;
    }
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i]->kind == K_ROUTE)
            routes[nroutes++] = f->v[i];
        else if (f->v[i]->kind == K_CERT)
            certs[ncerts++] = f->v[i];
    }
    for (size_t i = 0; i < in->n; i++) {
        const struct adm_error *e = &in->v[i];
        const struct ent *from = NULL;
        const char *rest = "";
        size_t k;

        if (!strncmp(e->path, "/routes/", 8) && (rest = index_at(e->path + 8, &k)))
            from = nth(routes, nroutes, k);
        else if (!strncmp(e->path, "/upstreams/", 11))
            from = named_at(f, "upstreams/", K_UPSTREAM, e->path + 11, &rest);
        else if (!strncmp(e->path, "/policies/", 10))
            from = named_at(f, "policies/", K_POLICY, e->path + 10, &rest);
        else if (!strncmp(e->path, "/listeners/", 11))
            from = listener_blame(f, node, e->path + 11, certs, ncerts, &rest);
        if (!from)
            adm_errors_add(out, e->path, "%s", e->msg);
        else if (rest && *rest)
            adm_errors_add(out, from->key, "%s: %s", rest, e->msg);
        else
            adm_errors_add(out, from->key, "%s", e->msg);
    }
    out->dropped += in->dropped;
    if (in->nomem)
        out->nomem = 1;
out:
    free(routes);
    free(certs);
}
