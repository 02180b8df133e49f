/*
 * api_upstreams.c - the upstream endpoints of the admin API: list, read,
 * create (POST), replace (PUT) and delete upstream pools, each write a
 * whole-config apply, and GET /upstreams/{name}/health, the pool's servers
 * as the balancer and the health checker see them.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"

#include <stdio.h>
#include <string.h>

void adm_api_upstreams_list(struct adm_api *api, struct adm_req *req, const char *unused)
{
    (void)unused;
    adm_api_reply(api, req, 200,
                  json_pack("{s:O?}", "upstreams", json_object_get(api->st->doc, "upstreams")));
}

void adm_api_upstream_get(struct adm_api *api, struct adm_req *req, const char *name)
{
    json_t *u = json_object_get(json_object_get(api->st->doc, "upstreams"), name);

    if (u)
        adm_api_reply(api, req, 200, json_incref(u));
    else
        adm_api_reply_error(api, req, 404, "no such upstream", NULL);
}

/* POST /upstreams (<name> NULL: it comes in the body) creates, 409 when the
 * name exists; PUT /upstreams/{name} replaces, 404 when it does not. */
void adm_api_upstream_put(struct adm_api *api, struct adm_req *req, const char *name)
{
    json_t *body, *doc, *ups, *n;
    int create = !name, dry = adm_api_query_flag(adm_req_query(req), "dry_run");

    if (dry < 0) {
        adm_api_send_oom(req); /* never a dry run applied for want of memory */
        return;
    }
    if (!adm_api_if_match_ok(api, req) || !(body = adm_api_read_body(api, req)))
        return;
    if (!json_is_object(body)) {
        adm_api_reply_error(api, req, 400, "an upstream must be an object",
                            adm_api_one_error("", "an upstream must be an object"));
        json_decref(body);
        return;
    }
    if (create) { /* POST /upstreams: {"name": ..., ...} */
        n = json_object_get(body, "name");
        if (!json_is_string(n)) {
            adm_api_reply_error(api, req, 400, "invalid upstream",
                                n ? adm_api_one_error("/name", "must be a string")
                                  : adm_api_one_error("/name",
                                                      "a name is required (POST /upstreams "
                                                      "takes {\"name\": ..., \"servers\": ...})"));
            json_decref(body);
            return;
        }
        name = json_string_value(n);
        if (json_object_get(json_object_get(api->st->doc, "upstreams"), name)) {
            adm_api_reply_error(
                api, req, 409, "an upstream with this name exists",
                adm_api_one_error("/name", "upstream \"%s\" exists: PUT /upstreams/%s replaces it",
                                  name, name));
            json_decref(body);
            return;
        }
    } else if (!json_object_get(json_object_get(api->st->doc, "upstreams"), name)) {
        /* PUT replaces, like PUT /routes/{id}: POST /upstreams creates */
        adm_api_reply_error(
            api, req, 404, "no such upstream",
            adm_api_one_error("",
                              "upstream \"%s\" does not exist: POST /upstreams creates it, "
                              "with {\"name\": \"%s\", \"servers\": ...}",
                              name, name));
        json_decref(body);
        return;
    } else if ((n = json_object_get(body, "name")) &&
               (!json_is_string(n) || strcmp(json_string_value(n), name) != 0)) {
        /* PUT /upstreams/{name}: a name in the body must be the URL's */
        adm_api_reply_error(api, req, 400, "invalid upstream",
                            json_pack("[{s:s,s:s}]", "path", "/name", "message",
                                      "the name in the body differs from the name in the URL"));
        json_decref(body);
        return;
    }
    doc = json_copy(api->st->doc);
    ups = json_deep_copy(json_object_get(doc, "upstreams"));
    if (!ups)
        ups = json_object();
    {
        json_t *def = json_copy(body);
        json_object_del(def, "name");
        json_object_set_new(ups, name, def);
    }
    json_object_set_new(doc, "upstreams", ups);
    adm_api_apply_full(api, req, doc, dry, "upstream", name, create ? 201 : 200, NULL, 0);
    json_decref(doc);
    json_decref(body);
}

void adm_api_upstream_delete(struct adm_api *api, struct adm_req *req, const char *name)
{
    json_t *doc, *ups, *users, *pusers, *r;
    const char *pname;
    struct adm_errors errs;
    size_t i;
    int dry = adm_api_query_flag(adm_req_query(req), "dry_run");

    if (dry < 0) {
        adm_api_send_oom(req);
        return;
    }
    if (!json_object_get(json_object_get(api->st->doc, "upstreams"), name)) {
        adm_api_reply_error(api, req, 404, "no such upstream", NULL);
        return;
    }
    if (!adm_api_if_match_ok(api, req))
        return;
    users = json_array();
    pusers = json_array();
    adm_errors_init(&errs);
    json_array_foreach(json_object_get(api->st->doc, "routes"), i, r)
    {
        const char *u = json_string_value(json_object_get(r, "upstream"));
        char path[64];
        if (u && strcmp(u, name) == 0) {
            json_array_append(users, json_object_get(r, "id"));
            snprintf(path, sizeof(path), "/routes/%zu/upstream", i);
            adm_errors_add(&errs, path, "route \"%s\" uses it",
                           json_string_value(json_object_get(r, "id")));
        }
    }
    /* a forward_auth policy asks the pool's servers: without it, the push
     * would fail as "unknown upstream", which reads as a typo */
    json_object_foreach(json_object_get(api->st->doc, "policies"), pname, r)
    {
        const char *u = json_string_value(json_object_get(r, "upstream"));
        const char *type = json_string_value(json_object_get(r, "type"));
        char path[128];
        if (u && type && strcmp(type, "forward_auth") == 0 && strcmp(u, name) == 0) {
            json_array_append_new(pusers, json_string(pname));
            snprintf(path, sizeof(path), "/policies/%s/upstream", pname);
            adm_errors_add(&errs, path, "forward_auth policy \"%s\" asks it", pname);
        }
    }
    if (json_array_size(users) || json_array_size(pusers)) {
        json_t *o = json_pack("{s:s,s:o,s:o}", "error",
                              !json_array_size(pusers)  ? "routes still use this upstream"
                              : !json_array_size(users) ? "policies still use this upstream"
                                                        : "routes and policies still use this "
                                                          "upstream",
                              "routes", users, "errors", adm_errors_json(&errs));
        if (json_array_size(pusers))
            json_object_set(o, "policies", pusers);
        json_decref(pusers);
        adm_errors_clear(&errs);
        adm_api_reply(api, req, 409, o);
        return;
    }
    json_decref(users);
    json_decref(pusers);
    doc = json_copy(api->st->doc);
    ups = json_deep_copy(json_object_get(doc, "upstreams"));
    json_object_del(ups, name);
    json_object_set_new(doc, "upstreams", ups);
    adm_api_apply_full(api, req, doc, dry, "upstream", name, 200, NULL, 0);
    json_decref(doc);
}

/* Why a server is down (null: it is not). */
static json_t *health_reason(unsigned flags)
{
    if (flags & UP_H_RESOLVING)
        return json_string("resolving");
    if (flags & UP_H_EJECTED)
        return json_string("ejected");
    if (flags & UP_H_CHECK)
        return json_string("active_check");
    return json_null();
}

void adm_api_srv_health(const struct adm_api *api, const up_pool *pool, size_t server,
                        struct adm_srv_health *h)
{
    memset(h, 0, sizeof(*h));
    h->last_status = -1;
    if (api->hooks.health)
        api->hooks.health(api->hooks.arg, pool, server, h);
}

/* When server <s> of <p> last went down or came back, as wall-clock time
 * under <wall> (admin/clock.h: the health word keeps adm_clock_ms's
 * stamp), or null when it never changed since its pool was built. */
static json_t *health_since(const struct adm_clock_wall *wall, const up_pool *p, size_t s)
{
    uint64_t since = up_health_since(p, s);
    char buf[ADM_CLOCK_TEXT_CAP];

    if (!since)
        return json_null();
    adm_clock_wall_text(since, wall->offset_ms, buf, sizeof(buf));
    return json_string(buf);
}

/* Server <k> of <p>, whose upstream has active checks when <checked>: the
 * definition the API serves decides whether last_check is shown, not the
 * health thread, which may not have taken the push that changed it yet. */
static json_t *server_health_json(const struct adm_api *api, up_pool *p, size_t k, int checked)
{
    struct adm_srv_health h;
    json_t *check = json_null();

    adm_api_srv_health(api, p, k, &h);
    if (checked)
        check = json_pack("{s:o,s:o,s:I,s:I}", "status",
                          h.last_status < 0 ? json_null() : json_integer(h.last_status),
                          "latency_ms", h.last_status < 0 ? json_null() : adm_api_ms(h.last_ms),
                          "checks", (json_int_t)h.checks, "failures", (json_int_t)h.check_failures);
    return json_pack("{s:s,s:b,s:o,s:o,s:I,s:I,s:I,s:I,s:o}", "address", up_server_address(p, k),
                     "healthy", up_health_flags(p, k) == 0, "reason",
                     health_reason(up_health_flags(p, k)), "since", health_since(&api->wall, p, k),
                     "in_flight", (json_int_t)up_inflight(p, k), "requests",
                     (json_int_t)up_requests(p, k), "connects", (json_int_t)up_connects(p, k),
                     "ejections", (json_int_t)h.ejections, "last_check", check);
}

void adm_api_upstream_health(struct adm_api *api, struct adm_req *req, const char *name)
{
    struct adm_snapshot *s = current(api);
    json_t *servers;

    for (size_t i = 0; i < s->npools; i++) {
        up_pool *p = s->pools[i];
        if (strcmp(up_pool_name(p), name) != 0)
            continue;
        servers = json_array();
        adm_clock_wall_follow(&api->wall);
        for (size_t k = 0; k < up_pool_nservers(p); k++)
            json_array_append_new(
                servers, server_health_json(api, p, k, s->cfg->upstreams[i].health_check != NULL));
        adm_api_reply(api, req, 200,
                      json_pack("{s:s,s:b,s:b,s:o}", "upstream", name, "all_down",
                                up_pool_all_down(p), "panic", up_pool_panicking(p), "servers",
                                servers));
        return;
    }
    adm_api_reply_error(api, req, 404, "no such upstream", NULL);
}
