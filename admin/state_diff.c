/*
 * state_diff.c - what differs between two config documents, counted
 * without keeping either: a document's signature (state.h) is one item per
 * route (by id), per upstream (by name) and per other top-level key, each
 * with the hash of its value. A SIGHUP counts by it the changes made
 * through the API since the running config was derived from the file, and
 * keeps only the file's signature meanwhile (16 bytes a route), not a copy
 * of its document.
 */
#include "admin/state.h"

#include <stdlib.h>
#include <string.h>

enum { SIG_KEY, SIG_UPSTREAM, SIG_ROUTE };

struct adm_sig_item {
    int kind; /* SIG_* */
    uint64_t key, hash;
};

static int item_cmp(const void *a, const void *b)
{
    const struct adm_sig_item *x = a, *y = b;

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

static struct adm_sig_item item(int kind, const char *name, const json_t *v)
{
    return (struct adm_sig_item){kind, adm_hash(name, strlen(name)), adm_json_hash(v)};
}

int adm_state_sig_make(struct adm_state_sig *sig, const json_t *doc)
{
    const json_t *routes = json_object_get(doc, "routes"), *ups = json_object_get(doc, "upstreams");
    size_t n = json_object_size(doc) + json_array_size(routes) + json_object_size(ups), i = 0, k;
    struct adm_sig_item *v = malloc((n ? n : 1) * sizeof(*v));
    const char *key;
    json_t *x;

    if (!v)
        return -1;
    json_object_foreach((json_t *)doc, key, x)
    {
        if (strcmp(key, "routes") != 0 && strcmp(key, "upstreams") != 0)
            v[i++] = item(SIG_KEY, key, x);
    }
    json_object_foreach((json_t *)ups, key, x) v[i++] = item(SIG_UPSTREAM, key, x);
    json_array_foreach(routes, k, x)
    {
        const char *id = json_string_value(json_object_get(x, "id"));
        v[i++] = item(SIG_ROUTE, id ? id : "", x);
    }
    qsort(v, i, sizeof(*v), item_cmp);
    adm_state_sig_free(sig);
    sig->v = v;
    sig->n = i;
    return 0;
}

size_t adm_state_sig_diff(const struct adm_state_sig *a, const struct adm_state_sig *b)
{
    size_t i = 0, j = 0, n = 0;

    while (i < a->n || j < b->n) {
        int c = i == a->n ? 1 : j == b->n ? -1 : item_cmp(&a->v[i], &b->v[j]);
        if (c < 0) {
            i++;
            n++;
        } else if (c > 0) {
            j++;
            n++;
        } else {
            n += a->v[i++].hash != b->v[j++].hash;
        }
    }
    return n;
}

void adm_state_sig_free(struct adm_state_sig *sig)
{
    free(sig->v);
    sig->v = NULL;
    sig->n = 0;
}
