/*
 * route_config.c - switchyard-route's --config: the routes of a Switchyard
 * config file (the JSON that is pushed), read with jansson. Only what
 * routing needs is taken: routes[].id, host, methods and path, and
 * router.trailing_slash and router.auto_options; the router itself checks
 * every pattern and conflict as the gateway's config build does (host and
 * path joined into one pattern, no methods meaning every method). The rest
 * of the file is `switchyard --check`'s business.
 */
#define _POSIX_C_SOURCE 200809L
#include "router/route_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* router.* of <doc> into <opts>; 0, or -1 with the reason on stderr. */
static int router_options(const char *path, json_t *doc, struct rt_options *opts)
{
    json_t *r = json_object_get(doc, "router"), *ts = json_object_get(r, "trailing_slash");
    json_t *ao = json_object_get(r, "auto_options");
    const char *v = json_string_value(ts);

    if (ts) {
        if (v && strcmp(v, "strict") == 0)
            opts->trailing_slash = RT_TS_STRICT;
        else if (v && strcmp(v, "redirect") == 0)
            opts->trailing_slash = RT_TS_REDIRECT;
        else if (v && strcmp(v, "relaxed") == 0)
            opts->trailing_slash = RT_TS_RELAXED;
        else {
            fprintf(stderr, "%s: /router/trailing_slash: want strict, redirect or relaxed\n", path);
            return -1;
        }
    }
    if (ao) {
        if (!json_is_boolean(ao)) {
            fprintf(stderr, "%s: /router/auto_options: want true or false\n", path);
            return -1;
        }
        opts->auto_options = json_is_true(ao);
    }
    return 0;
}

/* Inserts routes[<i>] (<r>) into <tx>, named by its id (<make> builds the
 * udata and its stored copy of the name). 0, or -1 with the reason on
 * stderr. */
static int insert_route(rt_txn *tx, const char *path, size_t i, json_t *r,
                        route_config_make_fn make)
{
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *host = json_string_value(json_object_get(r, "host"));
    const char *p = json_string_value(json_object_get(r, "path"));
    json_t *ms = json_object_get(r, "methods"), *m;
    const char *methods[64];
    size_t nm = 0, k;
    char *pattern;
    const char *name;
    struct rt_error err;
    void *udata;

    if (!id || !p) {
        fprintf(stderr, "%s: /routes/%zu: a route needs a string id and path\n", path, i);
        return -1;
    }
    json_array_foreach(ms, k, m)
    {
        if (!json_is_string(m) || nm == 64) {
            fprintf(stderr, "%s: /routes/%zu/methods/%zu: want a method name\n", path, i, k);
            return -1;
        }
        methods[nm++] = json_string_value(m);
    }
    pattern = malloc(strlen(host ? host : "") + strlen(p) + 1);
    if (!pattern || !(udata = make(id, &name))) {
        free(pattern);
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    sprintf(pattern, "%s%s", host ? host : "", p);
    if (rt_txn_insert(tx, methods, nm, pattern, name, udata, &err) < 0) {
        fprintf(stderr, "%s: /routes/%zu (%s): %s\n", path, i, id, err.msg);
        free(pattern);
        return -1;
    }
    free(pattern);
    return 0;
}

rt_table *route_config_load(const char *path, route_config_make_fn make,
                            void (*udata_free)(void *udata))
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *r;
    struct rt_options opts = {RT_TS_STRICT, 0};
    rt_table *empty = NULL, *t = NULL;
    rt_txn *tx = NULL;
    size_t i;

    if (!doc) {
        fprintf(stderr, "%s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return NULL;
    }
    if (router_options(path, doc, &opts) < 0)
        goto out;
    if (!(empty = rt_table_new(&opts, udata_free)) || !(tx = rt_txn_begin(empty))) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    json_array_foreach(json_object_get(doc, "routes"), i,
                       r) if (insert_route(tx, path, i, r, make) < 0) goto out;
    t = rt_txn_commit(tx);
    tx = NULL;
    if (!t)
        fprintf(stderr, "out of memory\n");
out:
    rt_txn_abort(tx);
    rt_table_free(empty);
    json_decref(doc);
    return t;
}
