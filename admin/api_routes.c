/*
 * api_routes.c - the route endpoints of the admin API: list and read
 * routes, add (POST), replace (PUT) and delete one through the router's
 * copy-on-write transactions, so that a change costs the same however large
 * the table, and GET /routes/match, which route a request would hit.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"
#include "admin/fleet_sync.h"
#include "admin/http1/path.h"
#include "admin/impact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "host + path" of a route object, into <buf>. */
static const char *route_pattern(const json_t *r, char *buf, size_t cap)
{
    const char *h = json_string_value(json_object_get(r, "host"));
    const char *p = json_string_value(json_object_get(r, "path"));

    snprintf(buf, cap, "%s%s", h ? h : "", p ? p : "");
    return buf;
}

static size_t route_methods(const json_t *r, const char **out, size_t cap)
{
    json_t *m = json_object_get(r, "methods"), *v;
    size_t i, n = 0;

    json_array_foreach(m, i, v) if (n < cap && json_is_string(v)) out[n++] = json_string_value(v);
    return n;
}

/* Validates one route object against the live config's upstreams and
 * settings; NULL with the answer sent. Error paths are relative to the
 * route object. */
static struct adm_config *validate_route(struct adm_api *api, struct adm_req *req, json_t *route)
{
    json_t *tmp = json_copy(api->st->doc), *arr = json_array();
    struct adm_errors errs;
    struct adm_config *cfg;

    adm_errors_init(&errs);
    json_array_append(arr, route);
    json_object_set_new(tmp, "routes", arr);
    cfg = adm_config_from_json(tmp, &errs);
    json_decref(tmp);
    if (!cfg) {
        for (size_t i = 0; i < errs.n; i++) {
            char *p = errs.v[i].path;
            if (strncmp(p, "/routes/0", 9) == 0)
                memmove(p, p + 9, strlen(p + 9) + 1);
        }
        adm_api_reply_errs(api, req, 400, "invalid route", &errs);
        adm_errors_clear(&errs);
    }
    return cfg;
}

static json_t *conflict_json(const struct rt_error *e)
{
    const rt_route *o = e->other;
    return json_pack("[{s:s,s:s,s:s?,s:s}]", "path", "/path", "message", e->msg, "route",
                     o ? rt_route_name(o) : NULL, "pattern", o ? rt_route_pattern(o) : "");
}

/* Finds <r> in the doc's routes array. */
static size_t doc_index(json_t *routes, const json_t *r)
{
    size_t i;
    json_t *v;

    json_array_foreach(routes, i, v) if (v == r) return i;
    return (size_t)-1;
}

/* Records a route change in the document, persists it, publishes <s>.
 * <newr> NULL deletes <old>. Answers the request. */
static void commit_route(struct adm_api *api, struct adm_req *req, struct adm_snapshot *s,
                         json_t *old, json_t *newr, const char *id, int code)
{
    struct adm_state *st = api->st;
    json_t *routes = json_object_get(st->doc, "routes");
    json_t *op;
    struct adm_changes ch;
    size_t at = old ? doc_index(routes, old) : (size_t)-1;
    uint64_t before;
    char msg[512];

    if (api->pipe->fleet) { /* validated and built here; the change itself goes to etcd */
        memset(&ch, 0, sizeof(ch));
        ch.routes[!newr ? ADM_REMOVED : old ? ADM_REPLACED : ADM_ADDED] = 1;
        adm_snapshot_free(s);
        adm_fleet_sync_write(api->pipe->fleet, req, "route", id, newr, code == 201, api->if_rev,
                             code, &ch);
        return;
    }
    json_incref(old); /* keep it for the undo below */
    if (old)
        st->hash_routes ^= adm_json_hash(old);
    if (newr) {
        st->hash_routes ^= adm_json_hash(newr);
        if (old)
            json_array_set(routes, at, newr);
        else
            json_array_append(routes, newr);
        json_object_set(st->ids, id, newr);
        op = json_pack("{s:s,s:O}", "op", "put_route", "route", newr);
    } else {
        json_array_remove(routes, at);
        json_object_del(st->ids, id);
        op = json_pack("{s:s,s:s}", "op", "delete_route", "id", id);
    }
    if (!op || adm_state_journal(st, op, msg, sizeof(msg)) < 0) {
        /* undo: the live config, the document and the files stay as they were */
        if (newr) {
            st->hash_routes ^= adm_json_hash(newr);
            if (old)
                json_array_set(routes, at, old);
            else
                json_array_remove(routes, json_array_size(routes) - 1);
        } else {
            json_array_insert(routes, at, old);
        }
        if (old) {
            st->hash_routes ^= adm_json_hash(old);
            json_object_set(st->ids, id, old);
        } else {
            json_object_del(st->ids, id);
        }
        json_decref(op);
        json_decref(old);
        adm_snapshot_free(s);
        adm_api_reply_error(
            api, req, 500, "cannot persist the change; nothing changed",
            json_pack("[{s:s,s:s}]", "path", "", "message", op ? msg : "out of memory"));
        return;
    }
    json_decref(op);
    json_decref(old);
    before = current(api)->gen;
    adm_swap_publish(api->sw, s);
    adm_api_audit(api, req, before, id);
    memset(&ch, 0, sizeof(ch));
    ch.routes[!newr ? ADM_REMOVED : old ? ADM_REPLACED : ADM_ADDED] = 1;
    adm_api_reply_written(api, req, code, 1, "route", id, &ch);
}

/* The whole config that replacing <old> with <newr> makes (<old> NULL:
 * added; <newr> NULL: <old> deleted); NULL on out of memory. */
static json_t *doc_with_route(struct adm_api *api, json_t *old, json_t *newr)
{
    json_t *live = json_object_get(api->st->doc, "routes");
    json_t *doc = json_copy(api->st->doc), *routes = live ? json_copy(live) : json_array();

    if (!doc || !routes) {
        json_decref(doc);
        json_decref(routes);
        return NULL;
    }
    if (newr && old)
        json_array_set(routes, doc_index(live, old), newr);
    else if (newr)
        json_array_append(routes, newr);
    else
        json_array_remove(routes, doc_index(live, old));
    json_object_set_new(doc, "routes", routes);
    return doc;
}

/* The answer of a route write's dry run: what it would change, and its
 * impact on the live sample against <rt>, the table it would make (freed
 * here). <newr> replaces <old> (NULL: added); <newr> NULL deletes <old>. */
static void dry_route(struct adm_api *api, struct adm_req *req, rt_table *rt, json_t *old,
                      json_t *newr)
{
    json_t *doc = doc_with_route(api, old, newr), *o;
    struct adm_changes ch;

    if (!doc) {
        rt_table_free(rt);
        adm_api_send_oom(req);
        return;
    }
    memset(&ch, 0, sizeof(ch));
    ch.routes[!newr ? ADM_REMOVED : old ? ADM_REPLACED : ADM_ADDED] = 1;
    o = json_pack("{s:b,s:I}", "valid", 1, "routes",
                  (json_int_t)json_array_size(json_object_get(doc, "routes")));
    adm_api_written_changes(o, &ch);
    json_object_set_new(o, "impact", adm_impact_json(api->sw, api->st->doc, rt, doc));
    rt_table_free(rt);
    json_decref(doc);
    adm_api_reply(api, req, 200, o);
}

/* A route write under ?canary=P: the whole config it makes, rolled out
 * (api_rollout.c) rather than swapped in. <newr> NULL deletes <old>. */
static void canary_route(struct adm_api *api, struct adm_req *req, json_t *old, json_t *newr,
                         const char *id, int code)
{
    json_t *doc = doc_with_route(api, old, newr);

    if (!doc) {
        adm_api_reply_error(api, req, 500, "out of memory", NULL);
        return;
    }
    adm_api_apply_full(api, req, doc, 0, "route", id, code, NULL, 0);
    json_decref(doc);
}

/* POST /routes (path_id NULL) and PUT /routes/{id}. */
void adm_api_route_put(struct adm_api *api, struct adm_req *req, const char *path_id)
{
    struct adm_state *st = api->st;
    struct adm_snapshot *cur = current(api), *s;
    json_t *body, *old, *idv;
    struct adm_config *cfg = NULL;
    struct adm_sroute *sr = NULL;
    const struct adm_sroute *prev_sr = NULL;
    struct rt_error err;
    rt_txn *tx = NULL;
    rt_table *rt;
    const char *id, *ms[64];
    char pat[8192];
    size_t nm, nroutes;
    int dry = adm_api_query_flag(adm_req_query(req), "dry_run");

    if (dry < 0) {
        adm_api_send_oom(req); /* never a dry run applied for want of memory */
        return;
    }
    if (!adm_api_if_match_ok(api, req) || !(body = adm_api_read_body(api, req)))
        return;
    if (!json_is_object(body)) {
        adm_api_reply_error(
            api, req, 400, "invalid route",
            json_pack("[{s:s,s:s}]", "path", "", "message", "a route must be an object"));
        goto out;
    }
    idv = json_object_get(body, "id");
    if (path_id) {
        if (!idv)
            json_object_set_new(body, "id", json_string(path_id));
        else if (!json_is_string(idv) || strcmp(json_string_value(idv), path_id) != 0) {
            adm_api_reply_error(api, req, 400, "invalid route",
                                json_pack("[{s:s,s:s}]", "path", "/id", "message",
                                          "the id in the body differs from the id in the URL"));
            goto out;
        }
    }
    if (!(cfg = validate_route(api, req, body)))
        goto out;
    id = cfg->routes[0].id;
    old = json_object_get(st->ids, id);
    if (!path_id && old) { /* as POST /upstreams answers a name that exists */
        adm_api_reply_error(
            api, req, 409, "a route with this id exists",
            adm_api_one_error("/id", "route \"%s\" exists: PUT /routes/%s replaces it", id, id));
        goto out;
    }
    if (path_id && !old) {
        adm_api_reply_error(api, req, 404, "no such route",
                            adm_api_one_error("",
                                              "route \"%s\" does not exist: POST /routes creates "
                                              "it, with {\"id\": \"%s\", ...}",
                                              id, id));
        goto out;
    }
    nroutes = json_array_size(json_object_get(st->doc, "routes"));
    if (!old && nroutes >= cur->cfg->limits.max_routes) {
        char m[128];
        snprintf(m, sizeof(m), ADM_MAX_ROUTES_ERR, nroutes + 1, cur->cfg->limits.max_routes);
        adm_api_reply_error(api, req, 409, "the config has limits.max_routes routes",
                            json_pack("[{s:s,s:s}]", "path", "/routes", "message", m));
        goto out;
    }
    if (!(tx = rt_txn_begin(cur->rt)))
        goto oom;
    if (old) {
        nm = route_methods(old, ms, 64);
        /* the replacement keeps the route's counters */
        prev_sr = rt_txn_find(tx, ms, nm, route_pattern(old, pat, sizeof(pat)));
        if (rt_txn_delete(tx, ms, nm, pat, &err) < 0) {
            adm_api_reply_error(api, req, 500, err.msg, NULL);
            goto out;
        }
    }
    if (!(sr = adm_sroute_new(&cfg->routes[0], cur, prev_sr)))
        goto oom;
    if (rt_txn_insert(tx, (const char *const *)cfg->routes[0].methods, cfg->routes[0].nmethods,
                      cfg->routes[0].pattern, id, sr, &err) < 0) {
        adm_sroute_free(sr);
        if (err.code == RT_ECONFLICT)
            adm_api_reply_error(api, req, 409, "the route conflicts with another route",
                                conflict_json(&err));
        else
            adm_api_reply_error(api, req, 400, err.msg, NULL);
        goto out;
    }
    rt = rt_txn_commit(tx);
    tx = NULL;
    if (rt && api->canary.pct &&
        !dry) { /* found no conflict; a dry run with ?canary is a dry run */
        rt_table_free(rt);
        canary_route(api, req, old, body, id, path_id ? 200 : 201);
        goto out;
    }
    if (rt && dry) {
        dry_route(api, req, rt, old, body);
        goto out;
    }
    if (!rt || !(s = adm_snapshot_derive(cur, rt)))
        goto oom;
    commit_route(api, req, s, old, body, id, path_id ? 200 : 201);
    goto out;
oom:
    adm_api_reply_error(api, req, 500, "out of memory", NULL);
out:
    rt_txn_abort(tx);
    adm_config_free(cfg);
    json_decref(body);
}

void adm_api_route_delete(struct adm_api *api, struct adm_req *req, const char *id)
{
    struct adm_snapshot *cur = current(api), *s;
    json_t *old = json_object_get(api->st->ids, id);
    const char *ms[64];
    char pat[8192];
    struct rt_error err;
    rt_txn *tx;
    rt_table *rt;
    int dry = adm_api_query_flag(adm_req_query(req), "dry_run");

    if (dry < 0) {
        adm_api_send_oom(req);
        return;
    }
    if (!old) {
        adm_api_reply_error(api, req, 404, "no such route", NULL);
        return;
    }
    if (!adm_api_if_match_ok(api, req))
        return;
    if (api->canary.pct && !dry) { /* a dry run with ?canary is a dry run */
        canary_route(api, req, old, NULL, id, 200);
        return;
    }
    if (!(tx = rt_txn_begin(cur->rt)))
        goto oom;
    if (rt_txn_delete(tx, ms, route_methods(old, ms, 64), route_pattern(old, pat, sizeof(pat)),
                      &err) < 0) {
        rt_txn_abort(tx);
        adm_api_reply_error(api, req, 500, err.msg, NULL);
        return;
    }
    if ((rt = rt_txn_commit(tx)) && dry) {
        dry_route(api, req, rt, old, NULL);
        return;
    }
    if (!rt || !(s = adm_snapshot_derive(cur, rt)))
        goto oom;
    commit_route(api, req, s, old, NULL, id, 200);
    return;
oom:
    adm_api_reply_error(api, req, 500, "out of memory", NULL);
}

/* The three parameters of /routes/match, decoded (owned). */
struct match_query {
    char *method, *host, *path;
};

static int match_query_one(void *arg, const char *key, const char *val)
{
    struct match_query *mq = arg;
    char **slot = strcmp(key, "method") == 0 ? &mq->method
                  : strcmp(key, "host") == 0 ? &mq->host
                  : strcmp(key, "path") == 0 ? &mq->path
                                             : NULL;

    if (slot && val && !*slot && !(*slot = strdup(val)))
        return -1;
    return 0;
}

static void match_query_clear(struct match_query *mq)
{
    free(mq->method);
    free(mq->host);
    free(mq->path);
}

void adm_api_route_match(struct adm_api *api, struct adm_req *req, const char *unused)
{
    struct adm_snapshot *s = current(api);
    struct match_query q = {NULL, NULL, NULL};
    const char *method, *host, *path;
    char norm[8192], allow[512];
    size_t nlen, cap = rt_table_max_params(s->rt) + 1;
    unsigned found;
    int rc = -1;
    struct rt_param *params = calloc(cap, sizeof(*params));
    struct rt_match m;
    json_t *o;

    (void)unused;
    if (!params || adm_api_query_each(adm_req_query(req), match_query_one, &q) < 0) {
        match_query_clear(&q);
        free(params);
        adm_api_send_oom(req);
        return;
    }
    method = q.method ? q.method : "GET";
    host = q.host ? q.host : "";
    path = q.path;
    if (path && path[0] == '/' && strlen(path) < sizeof(norm))
        rc = h1_path_route(path, strlen(path), norm, sizeof(norm),
                           s->cfg->router.merge_slashes ? H1_PATH_MERGE_SLASHES : 0,
                           s->cfg->router.escaped_slashes, &found, &nlen);
    if (rc < 0) {
        match_query_clear(&q);
        free(params);
        adm_api_reply_error(api, req, 400,
                            rc == -2 ? "router.escaped_slashes refuses an escaped slash or "
                                       "backslash, a \"..;\" segment, or a \"..\" after a "
                                       "segment with no name, in this path (400 for a client)"
                                     : "path must start with '/' and be a valid path (400 for a "
                                       "client)",
                            NULL);
        return;
    }
    rt_lookup(s->rt, method, strlen(method), host, strlen(host), norm, nlen, params, cap, &m);
    o = json_pack("{s:i,s:s,s:s,s:s}", "status", m.status == RT_OPTIONS_AUTO ? 200 : (int)m.status,
                  "method", method, "host", host, "path", norm);
    if (m.route) {
        char mb[256];
        rt_route_methods_format(s->rt, m.route, mb, sizeof(mb));
        json_object_set_new(o, "route",
                            json_pack("{s:s,s:s,s:s}", "id", rt_route_name(m.route), "pattern",
                                      rt_route_pattern(m.route), "methods", mb));
    }
    if (m.status == RT_HIT) {
        json_t *p = json_object();
        for (size_t i = 0; i < m.nparams && i < cap; i++)
            json_object_set_new(p, params[i].name, json_stringn(params[i].value, params[i].len));
        json_object_set_new(o, "params", p);
    }
    if (m.status == RT_NOT_ALLOWED || m.status == RT_OPTIONS_AUTO) {
        rt_methods_format(s->rt, m.allow, allow, sizeof(allow));
        json_object_set_new(o, "allow", json_string(allow));
        json_object_set_new(o, "why",
                            json_string(m.status == RT_NOT_ALLOWED
                                            ? "the path matches routes of other methods"
                                            : "automatic OPTIONS answer"));
    }
    if (m.status == RT_REDIRECT_301 || m.status == RT_REDIRECT_308) {
        char loc[8200];
        snprintf(loc, sizeof(loc), "%.*s%s", (int)(m.slash > 0 ? nlen : nlen - 1), norm,
                 m.slash > 0 ? "/" : "");
        json_object_set_new(o, "location", json_string(loc));
        json_object_set_new(o, "why", json_string("trailing-slash redirect to the route's path"));
    }
    if (m.status == RT_NOT_FOUND)
        json_object_set_new(o, "why", json_string("no route matches this host and path"));
    match_query_clear(&q);
    free(params);
    adm_api_reply(api, req, 200, o);
}

void adm_api_routes_list(struct adm_api *api, struct adm_req *req, const char *unused)
{
    (void)unused;
    adm_api_reply(api, req, 200,
                  json_pack("{s:O}", "routes", json_object_get(api->st->doc, "routes")));
}

void adm_api_route_get(struct adm_api *api, struct adm_req *req, const char *id)
{
    json_t *r = json_object_get(api->st->ids, id);

    if (r)
        adm_api_reply(api, req, 200, json_incref(r));
    else
        adm_api_reply_error(api, req, 404, "no such route", NULL);
}
