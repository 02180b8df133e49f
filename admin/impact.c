/*
 * impact.c - a dry run's blast radius as JSON (admin/impact.h): the routes
 * and upstreams a proposed document adds, removes and changes (with the
 * route keys and the servers that change), and the replay of the live
 * sample against the live router and the proposed one, grouped by where
 * requests went from and to (router/diff.c), plus the requests that keep
 * their route while its upstream, rewrite or action changes.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/impact.h"
#include "router/diff_json.h"

#include <stdlib.h>
#include <string.h>

/* What changed in a route that keeps its id, beyond its pattern: the bits
 * rt_diff_same_fn answers, and their names in "same_route". */
enum {
    CH_UPSTREAM = 1, /* another upstream */
    CH_POOL = 2,     /* the same upstream, defined otherwise */
    CH_REWRITE = 4,
    CH_STRIP = 8,
    CH_ACTION = 16, /* upstream, response or redirect */
};
static const char *const ch_names[] = {"upstream", "pool", "rewrite", "strip_prefix", "action"};

#define CHUNK 4096 /* kept entries copied at a time */

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The array of strings <a> (taken) sorted, as a new array; <a> itself on out of memory. */
static json_t *sorted(json_t *a)
{
    size_t n = json_array_size(a), i;
    const char **v = malloc((n ? n : 1) * sizeof(*v));
    json_t *s, *out;

    if (!v)
        return a;
    json_array_foreach(a, i, s)
    {
        v[i] = json_string_value(s);
    }
    qsort(v, n, sizeof(*v), by_str);
    out = json_array();
    for (i = 0; i < n; i++)
        json_array_append_new(out, json_string(v[i]));
    free(v);
    json_decref(a);
    return out;
}

/* Routes array -> object by id (new references). */
static json_t *by_id(const json_t *routes)
{
    json_t *o = json_object(), *r;
    size_t i;

    json_array_foreach(routes, i, r)
    {
        const char *id = json_string_value(json_object_get(r, "id"));
        if (id)
            json_object_set(o, id, r);
    }
    return o;
}

/* The names of <a> (an object) that <b> lacks, into the array <out>. */
static void only_in(const json_t *a, const json_t *b, json_t *out)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)a, k, v)
    {
        if (!json_object_get(b, k))
            json_array_append_new(out, json_string(k));
    }
}

/* The keys whose values differ between the objects <a> and <b> (a key of
 * one only counts), sorted. */
static json_t *keys_changed(const json_t *a, const json_t *b)
{
    json_t *out = json_array(), *v;
    const char *k;

    json_object_foreach((json_t *)a, k, v)
    {
        if (!json_equal(v, json_object_get(b, k)))
            json_array_append_new(out, json_string(k));
    }
    only_in(b, a, out);
    return sorted(out);
}

/* "upstream", "response" or "redirect": what a route object does. */
static const char *action_of(const json_t *r)
{
    return json_object_get(r, "response")   ? "response"
           : json_object_get(r, "redirect") ? "redirect"
                                            : "upstream";
}

static int differs(const json_t *a, const json_t *b, const char *key)
{
    json_t *x = json_object_get(a, key), *y = json_object_get(b, key);

    return (x || y) && !(x && y && json_equal(x, y));
}

/* The CH_ bits of route <a> becoming <b>; <ups_changed>: the upstreams
 * whose definition changed, by name. */
static unsigned route_bits(const json_t *a, const json_t *b, const json_t *ups_changed)
{
    unsigned bits = 0;
    const char *u = json_string_value(json_object_get(b, "upstream"));

    if (differs(a, b, "upstream"))
        bits |= CH_UPSTREAM;
    else if (u && json_object_get(ups_changed, u))
        bits |= CH_POOL;
    if (differs(a, b, "rewrite"))
        bits |= CH_REWRITE;
    if (differs(a, b, "strip_prefix"))
        bits |= CH_STRIP;
    if (strcmp(action_of(a), action_of(b)) != 0)
        bits |= CH_ACTION;
    return bits;
}

/* "routes" and "route_keys" of <o>, and into <bits> (id -> integer) the
 * CH_ bits of every route that keeps its id. */
static void routes_part(json_t *o, const json_t *old_doc, const json_t *new_doc,
                        const json_t *ups_changed, json_t *bits)
{
    json_t *a = by_id(json_object_get(old_doc, "routes"));
    json_t *b = by_id(json_object_get(new_doc, "routes"));
    json_t *added = json_array(), *removed = json_array(), *changed = json_array();
    json_t *keys = json_object(), *v;
    const char *id;

    only_in(b, a, added);
    only_in(a, b, removed);
    json_object_foreach(a, id, v)
    {
        json_t *w = json_object_get(b, id);
        unsigned n;
        if (!w)
            continue;
        if (!json_equal(v, w)) {
            json_array_append_new(changed, json_string(id));
            json_object_set_new(keys, id, keys_changed(v, w));
        }
        if ((n = route_bits(v, w, ups_changed)) != 0)
            json_object_set_new(bits, id, json_integer(n));
    }
    json_object_set_new(o, "routes",
                        json_pack("{s:o,s:o,s:o}", "added", sorted(added), "removed",
                                  sorted(removed), "changed", sorted(changed)));
    json_object_set_new(o, "route_keys", keys);
    json_decref(a);
    json_decref(b);
}

/* The addresses of an upstream object's servers, as an object. */
static json_t *addresses(const json_t *u)
{
    json_t *o = json_object(), *s;
    size_t i;

    json_array_foreach(json_object_get(u, "servers"), i, s)
    {
        const char *a = json_string_value(json_object_get(s, "address"));
        if (a)
            json_object_set_new(o, a, json_true());
    }
    return o;
}

/* "upstreams" and "servers" of <o>; the changed upstreams by name into
 * <ups_changed>. */
static void upstreams_part(json_t *o, const json_t *old_doc, const json_t *new_doc,
                           json_t *ups_changed)
{
    json_t *a = json_object_get(old_doc, "upstreams"), *b = json_object_get(new_doc, "upstreams");
    json_t *added = json_array(), *removed = json_array(), *changed = json_array();
    json_t *servers = json_object(), *v;
    const char *name;

    only_in(b, a, added);
    only_in(a, b, removed);
    json_object_foreach(a, name, v)
    {
        json_t *w = json_object_get(b, name), *in, *out, *sa, *sb;
        if (!w || json_equal(v, w))
            continue;
        json_array_append_new(changed, json_string(name));
        json_object_set_new(ups_changed, name, json_true());
        sa = addresses(v);
        sb = addresses(w);
        in = json_array();
        out = json_array();
        only_in(sb, sa, in);
        only_in(sa, sb, out);
        json_object_set_new(servers, name,
                            json_pack("{s:o,s:o}", "in", sorted(in), "out", sorted(out)));
        json_decref(sa);
        json_decref(sb);
    }
    json_object_set_new(o, "upstreams",
                        json_pack("{s:o,s:o,s:o}", "added", sorted(added), "removed",
                                  sorted(removed), "changed", sorted(changed)));
    json_object_set_new(o, "servers", servers);
}

/* The live sample, ring after ring, a chunk of slots at a time. */
struct sample_iter {
    const struct adm_sample_set *set;
    unsigned w;
    size_t from; /* the next chunk of ring w */
    struct adm_sample *buf;
    size_t n, i;
    size_t truncated;
};

static int next_sample(void *arg, struct rt_diff_req *q)
{
    struct sample_iter *it = arg;

    for (;;) {
        while (it->i < it->n) {
            const struct adm_sample *e = &it->buf[it->i++];
            if (e->truncated) {
                it->truncated++;
                continue;
            }
            *q = (struct rt_diff_req){e->method, e->host, e->path, e->mlen, e->hlen, e->plen};
            return 1;
        }
        if (!it->set || it->w >= it->set->nworkers)
            return 0;
        it->n = adm_sample_copy(it->set, it->w, it->from, CHUNK, it->buf);
        it->i = 0;
        it->from += CHUNK;
        if (it->from >= it->set->size) {
            it->w++;
            it->from = 0;
        }
    }
}

static unsigned same_bits(void *arg, const char *id)
{
    return (unsigned)json_integer_value(json_object_get(arg, id));
}

static json_t *same_json(const struct rt_diff_group *g, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++) {
        json_t *ch = json_array();
        for (size_t b = 0; b < sizeof(ch_names) / sizeof(ch_names[0]); b++)
            if (g[i].changes & 1u << b)
                json_array_append_new(ch, json_string(ch_names[b]));
        json_array_append_new(a, json_pack("{s:s,s:I,s:o,s:s}", "route", g[i].from, "count",
                                           (json_int_t)g[i].count, "changes", ch, "example",
                                           g[i].example));
    }
    return a;
}

/* The replay's part of <o>: sampled, unchanged, truncated, changed,
 * same_route, workers_skipped, replay_ms; the workers' new entries are
 * collected first (through <sw>'s notify). <new_rt> NULL: no routes. -1
 * on out of memory. */
static int replay_part(json_t *o, struct adm_swap *sw, const struct adm_snapshot *live,
                       const rt_table *new_rt, json_t *bits)
{
    struct sample_iter it = {.set = live->samples};
    /* the workers' new entries first: not part of replay_ms */
    unsigned skipped = it.set ? adm_sample_collect(live->samples, sw->notify, sw->notify_arg) : 0;
    struct rt_diff d;
    double t0 = adm_now_ms();
    rt_table *none = new_rt ? NULL : rt_table_new(NULL, NULL); /* a config without routes */
    int rc;

    if ((!new_rt && !none) || (it.set && !(it.buf = malloc(CHUNK * sizeof(*it.buf))))) {
        rt_table_free(none);
        return -1;
    }
    rc = rt_diff_run(live->rt, new_rt ? new_rt : none, next_sample, &it, same_bits, bits, &d);
    free(it.buf);
    rt_table_free(none);
    if (rc < 0)
        return -1;
    json_object_set_new(o, "sampled", json_integer((json_int_t)d.sampled));
    json_object_set_new(o, "unchanged", json_integer((json_int_t)d.unchanged));
    json_object_set_new(o, "truncated", json_integer((json_int_t)it.truncated));
    json_object_set_new(o, "workers_skipped", json_integer((json_int_t)skipped));
    json_object_set_new(o, "changed", rt_diff_groups_json(d.changed, d.nchanged));
    json_object_set_new(o, "same_route", same_json(d.same, d.nsame));
    rt_diff_clear(&d);
    json_object_set_new(o, "replay_ms", json_real((double)(long)((adm_now_ms() - t0) * 1e3) / 1e3));
    return 0;
}

json_t *adm_impact_json(struct adm_swap *sw, const json_t *live_doc, const rt_table *new_rt,
                        const json_t *new_doc)
{
    const struct adm_snapshot *live = atomic_load_explicit(&sw->current, memory_order_acquire);
    json_t *o = json_object(), *ups_changed = json_object(), *bits = json_object();

    if (!o || !ups_changed || !bits)
        goto fail;
    upstreams_part(o, live_doc, new_doc, ups_changed);
    routes_part(o, live_doc, new_doc, ups_changed, bits);
    if (replay_part(o, sw, live, new_rt, bits) < 0)
        goto fail;
    json_decref(ups_changed);
    json_decref(bits);
    return o;
fail:
    json_decref(o);
    json_decref(ups_changed);
    json_decref(bits);
    return NULL;
}

static void *bind_route(const struct adm_route *r, void *arg)
{
    (void)arg;
    return (void *)r;
}

static void bind_free(void *udata)
{
    (void)udata;
}

struct adm_route_binder adm_impact_binder(void)
{
    return (struct adm_route_binder){.make = bind_route, .free = bind_free, .arg = NULL};
}
