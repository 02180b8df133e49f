/*
 * api_guard.c - what a request's head must pass before a byte of its body
 * is read (admin/http.c runs adm_api_guard() once the head is whole). In
 * this order, each refusal answered here; the HTTP layer then closes the
 * connection without reading the body:
 *
 *   Host          the address the client reached (the admin address, or
 *                 the interface of a wildcard one), localhost, 127.0.0.1
 *                 or [::1], without a port or with the admin port; or a
 *                 name of admin.origins. Else 403: a DNS-rebinding page
 *                 names its own host.
 *   Origin        absent (curl, scripts), or one of the same names with the
 *                 admin port, or an admin.origins entry (its scheme and
 *                 port, when it gives them). Else 403: a page of another
 *                 site, which the browser lets send simple requests.
 *   token         the bearer token, but for the open endpoints (/healthz).
 *                 Else 401.
 *   Content-Type  a POST, PUT, PATCH or DELETE with a body says
 *                 application/json. Else 415: the only types a page may
 *                 send cross-site without asking first are form and text
 *                 types. A DELETE without a body (what the API takes) has
 *                 no type to check, and a browser never sends a DELETE
 *                 cross-site without a preflight the API does not answer.
 *
 * Caddy's admin endpoint is the model (its origins and enforce_origin);
 * unlike Caddy's, admin.origins adds to the built-in names instead of
 * replacing them, and Origin is always enforced when present.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/* Compares two strings in time independent of where they differ. */
static int token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);

    /* walk the expected token's length whatever the input */
    for (size_t i = 0; i < lb; i++)
        d |= (unsigned char)(b[i] ^ (i < la ? a[i] : 0));
    return d == 0;
}

static int authorized(struct adm_api *api, struct adm_req *req)
{
    const char *h;

    if (!api->token)
        return 1;
    h = evhttp_find_header(adm_req_in(req), "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && token_equal(h + 7, api->token))
        return 1;
    evhttp_add_header(adm_req_out(req), "WWW-Authenticate", "Bearer realm=\"switchyard\"");
    adm_api_reply_error(api, req, 401, "a valid bearer token is required", NULL);
    return 0;
}

/* Whether <host> (lower case) with <port> (0: none given) names this API
 * itself: the address the client reached (<local>, <lport>), localhost or
 * a loopback address, with no port (unless <need_port>) or <lport>. */
static int builtin_name(const char *host, unsigned port, const char *local, unsigned lport,
                        int need_port)
{
    static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};

    if (!(port == lport || (port == 0 && !need_port)))
        return 0;
    if (strcmp(host, local) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(host, names[i]) == 0)
            return 1;
    return 0;
}

/* Whether <port> is the default one of <scheme> (80 for http, 443 for
 * https; either, for "": an entry without a scheme). */
static int default_port(const char *scheme, unsigned port)
{
    if (!*scheme)
        return port == 80 || port == 443;
    return port == (strcmp(scheme, "https") == 0 ? 443u : 80u);
}

/* Whether an admin.origins entry of <cfg> allows <host> and <port> (0:
 * none given) over <scheme> ("": a Host field, any scheme). An entry
 * without a port allows any; one with a port, that port, or no port when
 * it is its scheme's default: behind a TLS-terminating proxy the Host of
 * https://adm.example.com:443 is adm.example.com. */
static int listed(const struct adm_config *cfg, const char *scheme, const char *host, unsigned port)
{
    for (size_t i = 0; i < cfg->admin.norigins; i++) {
        const struct adm_origin *o = &cfg->admin.origins[i];
        if (strcmp(o->host, host) != 0)
            continue;
        if (o->port && o->port != port && !(port == 0 && default_port(o->scheme, o->port)))
            continue;
        if (!*scheme || !*o->scheme || strcmp(o->scheme, scheme) == 0)
            return 1;
    }
    return 0;
}

static void forbid(struct adm_api *api, struct adm_req *req, const char *msg, const char *what,
                   const char *value)
{
    char m[400];

    snprintf(m, sizeof(m),
             "%s %.200s is not the admin address, localhost or a name of admin.origins", what,
             value);
    adm_api_reply_error(api, req, 403, msg, json_pack("[{s:s,s:s}]", "path", "", "message", m));
}

/* The Host check: 1, or 0 with the 403 sent. */
static int host_ok(struct adm_api *api, struct adm_req *req, const char *local, unsigned lport)
{
    unsigned port;
    const char *host = adm_req_host(req, &port);
    char shown[300];

    /* no Host at all is HTTP/1.0: never a browser's, nothing to rebind */
    if (!host || builtin_name(host, port, local, lport, 0) ||
        listed(current(api)->cfg, "", host, port))
        return 1;
    if (port)
        snprintf(shown, sizeof(shown), "%.256s:%u", host, port);
    else
        snprintf(shown, sizeof(shown), "%.256s", host);
    forbid(api, req, "host not allowed", "Host", shown);
    return 0;
}

/* The Origin check, of every Origin field: 1, or 0 with the 403 sent. */
static int origin_ok(struct adm_api *api, struct adm_req *req, const char *local, unsigned lport)
{
    struct evkeyval *kv;

    TAILQ_FOREACH(kv, adm_req_in(req), next)
    {
        struct adm_origin o;
        unsigned port;
        char why[128];

        if (strcasecmp(kv->key, "Origin") != 0)
            continue;
        /* "null" (a sandboxed or file: page) and anything else unparsable fail here */
        if (adm_origin_parse(&o, kv->value, why, sizeof(why)) == 0 && *o.scheme) {
            port = o.port ? o.port : strcmp(o.scheme, "https") == 0 ? 443 : 80;
            if (builtin_name(o.host, port, local, lport, 1) ||
                listed(current(api)->cfg, o.scheme, o.host, port))
                continue;
        }
        forbid(api, req, "origin not allowed", "Origin", kv->value);
        return 0;
    }
    return 1;
}

/* The Content-Type check of a write with a body: 1, or 0 with the 415 sent. */
static int type_ok(struct adm_api *api, struct adm_req *req)
{
    enum adm_method m = adm_req_method(req);
    struct evkeyval *kv;
    int seen = 0;

    if (!adm_req_has_body(req) ||
        !(m == ADM_M_POST || m == ADM_M_PUT || m == ADM_M_PATCH || m == ADM_M_DELETE))
        return 1;
    TAILQ_FOREACH(kv, adm_req_in(req), next)
    {
        const char *v = kv->value;
        size_t n;

        if (strcasecmp(kv->key, "Content-Type") != 0)
            continue;
        /* application/json, parameters (charset) allowed, in every such field */
        n = strcspn(v, "; \t");
        if (n != 16 || strncasecmp(v, "application/json", 16) != 0 ||
            (v[n] && v[n + strspn(v + n, " \t")] != ';'))
            goto refuse;
        seen = 1;
    }
    if (seen)
        return 1;
refuse:
    adm_api_reply_error(api, req, 415, "a body must be JSON",
                        json_pack("[{s:s,s:s}]", "path", "", "message",
                                  "send it with Content-Type: application/json"));
    return 0;
}

void adm_api_guard(struct adm_req *req, void *arg)
{
    struct adm_api *api = arg;
    unsigned lport;
    const char *local = adm_req_local(req, &lport);

    if (!host_ok(api, req, local, lport) || !origin_ok(api, req, local, lport))
        return;
    if (!adm_api_endpoint_open(api, req) && !authorized(api, req))
        return;
    type_ok(api, req);
}
