/*
 * tests/gateway/test_forward.c - unit tests of gateway/forward.c, called
 * directly: where a request goes (gw_forward_decide) and the exact head it
 * goes upstream with (gw_forward_head) for a strip_prefix route, a rewrite,
 * the target as received or normalized (router.forward_path), what
 * router.escaped_slashes makes of an escaped slash, which
 * Upgrade protocols go up (a route's upgrades, never h2c),
 * hop-by-hop and Connection-named fields, the client's X-Request-Id, a
 * trusted proxy's X-Forwarded-For, Max-Forwards and bodies (streamed, or
 * buffered whole: then with a Content-Length), and what a
 * request over TLS adds (X-Forwarded-Proto, the client certificate fields).
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/forward.h"

#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char config[] =
    "{\"workers\": 1, \"listeners\": [{\"address\": \"127.0.0.1:1\"}],"
    " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:1\"}]}},"
    " \"routes\": ["
    "  {\"id\": \"strip\", \"path\": \"/api/*{rest}\", \"strip_prefix\": \"/api\","
    "   \"upstream\": \"u\"},"
    "  {\"id\": \"rw\", \"path\": \"/users/{id}/posts/{post}\","
    "   \"rewrite\": \"/v2/{post}/by/{id}\", \"upstream\": \"u\"},"
    "  {\"id\": \"plain\", \"path\": \"/p\", \"upstream\": \"u\"},"
    "  {\"id\": \"raw\", \"path\": \"/raw/*{rest}\", \"upstream\": \"u\"},"
    "  {\"id\": \"ups\", \"path\": \"/ups\", \"upgrades\": [\"FOO\", \"websocket\"],"
    "   \"upstream\": \"u\"},"
    "  {\"id\": \"none\", \"path\": \"/none\", \"upgrades\": [], \"upstream\": \"u\"},"
    "  {\"id\": \"local\", \"path\": \"/local\", \"response\": {\"body\": \"x\"}},"
    "  {\"id\": \"hdrs\", \"path\": \"/h/{id}\", \"upstream\": \"u\", \"request_headers\": {"
    "   \"set\": {\"X-Id\": \"id={id}\", \"Host\": \"backend.internal\", \"User-Agent\": \"sy "
    "{{x}\"},"
    "   \"add\": {\"X-Where\": \"{host}|{client_ip}|{request_id}\"},"
    "   \"remove\": [\"cookie\"]}}],"
    " \"trusted_proxies\": [\"10.0.0.0/8\"], \"access_log\": \"off\"}";

/* the same routes with router.forward_path "normalized" */
static const char config_normalized[] =
    "{\"workers\": 1, \"listeners\": [{\"address\": \"127.0.0.1:1\"}],"
    " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:1\"}]}},"
    " \"routes\": ["
    "  {\"id\": \"strip\", \"path\": \"/api/*{rest}\", \"strip_prefix\": \"/api\","
    "   \"upstream\": \"u\"},"
    "  {\"id\": \"raw\", \"path\": \"/raw/*{rest}\", \"upstream\": \"u\"}],"
    " \"router\": {\"forward_path\": \"normalized\"}, \"access_log\": \"off\"}";

static struct adm_snapshot *snap, *snap_as_received, *snap_normalized, *snap_decode, *snap_keep;
static rt_ctx *ctx;

static struct adm_snapshot *build(const char *json, size_t len)
{
    struct adm_errors errs;
    struct adm_config *cfg;
    struct adm_snapshot *s;

    adm_errors_init(&errs);
    cfg = adm_config_parse(json, len, &errs);
    ck_assert_ptr_nonnull(cfg);
    s = adm_snapshot_build(cfg, NULL, 1, &errs);
    ck_assert_ptr_nonnull(s);
    adm_errors_clear(&errs);
    return s;
}

/* <config> with the "router" object <router> */
static struct adm_snapshot *build_router(const char *router)
{
    char json[sizeof(config) + 128];
    int n = snprintf(json, sizeof(json), "{\"router\": %s, %s", router, config + 1);

    ck_assert(n > 0 && (size_t)n < sizeof(json));
    return build(json, (size_t)n);
}

static void setup(void)
{
    snap = snap_as_received = build(config, sizeof(config) - 1);
    snap_normalized = build(config_normalized, sizeof(config_normalized) - 1);
    snap_decode = build_router("{\"escaped_slashes\": \"decode\"}");
    snap_keep = build_router("{\"escaped_slashes\": \"keep\"}");
    ctx = rt_ctx_new();
    ck_assert_ptr_nonnull(ctx);
}

/* One request through gw_forward_decide(), and through gw_forward_head()
 * when it goes upstream: <head> gets the upstream head (NUL-terminated). */
struct fwd {
    struct h1_req_parser rp;
    struct rt_param params[8];
    struct rt_match m;
    const struct adm_sroute *sr;
    enum gw_verdict v;
    int upgrade; /* gw_forward_upgrade() */
    char head[4096];
};

/* What the connection adds for a request over TLS (forward()'s gw_forward). */
static int fwd_tls;
static const char *fwd_cip; /* client_ip's address, NULL: none configured */
static const char *fwd_subject, *fwd_sha256;
/* A body the connection read whole (request_buffering), and its length. */
static int fwd_buffered;
static uint64_t fwd_buffered_len;

static void forward(struct fwd *t, const char *req, const char *ip)
{
    struct sockaddr_in peer;
    size_t used = 0;
    int rc;

    memset(&peer, 0, sizeof(peer));
    peer.sin_family = AF_INET;
    ck_assert_int_eq(inet_pton(AF_INET, ip, &peer.sin_addr), 1);
    ck_assert_int_eq(h1_req_parser_init(&t->rp, NULL), 0);
    rc = h1_req_feed_head(&t->rp, req, strlen(req), &used);
    ck_assert(rc == H1_REQ_HEAD || rc == H1_REQ_DONE);
    t->head[0] = 0;
    t->upgrade = -1;
    t->v = gw_forward_decide(&t->rp, snap, ctx, t->params, 8, &t->m, &t->sr);
    if (t->v == GW_V_UPSTREAM) {
        struct evbuffer *out = evbuffer_new();
        struct gw_forward f = {
            .rq = &t->rp.req,
            .snap = snap,
            .sr = t->sr,
            .params = t->params,
            .nparams = t->m.nparams,
            .peer = (const struct sockaddr *)&peer,
            .peer_ip = ip,
            .upstream_addr = "127.0.0.1:1",
            .client_id = gw_forward_client_id(&t->rp.req, 64),
            .reqid = "ours",
            .reqid_len = 4,
            .tls = fwd_tls,
            .client_ip = fwd_cip,
            .client_ip_len = fwd_cip ? strlen(fwd_cip) : 0,
            .client_subject = fwd_subject,
            .client_sha256 = fwd_sha256,
            .buffered = fwd_buffered,
            .buffered_len = fwd_buffered_len,
        };
        struct gw_obuf ob;
        size_t n;

        ck_assert_ptr_nonnull(out);
        t->upgrade = gw_forward_upgrade(&t->rp.req, t->sr);
        gw_ob_init(&ob, out);
        gw_forward_head(&f, &ob);
        gw_ob_flush(&ob);
        n = evbuffer_get_length(out);
        ck_assert_uint_lt(n, sizeof(t->head));
        evbuffer_remove(out, t->head, n);
        t->head[n] = 0;
        evbuffer_free(out);
    }
    h1_req_parser_free(&t->rp);
}

/* Over TLS: X-Forwarded-Proto https, and the client certificate fields
 * only from the verified certificate; the client's own ones never pass. */
START_TEST(tls_fields)
{
    struct fwd t;
    const char *req =
        "GET /api/x HTTP/1.1\r\nHost: a.example\r\nX-Client-Cert-Subject: CN=forged\r\n"
        "x-client-cert-sha256: 00\r\n\r\n";

    fwd_tls = 1;
    fwd_subject = "CN=client";
    fwd_sha256 = "ab12";
    forward(&t, req, "192.0.2.9");
    fwd_tls = 0;
    fwd_subject = fwd_sha256 = NULL;
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Forwarded-Proto: https\r\n"));
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Client-Cert-Subject: CN=client\r\n"));
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Client-Cert-Sha256: ab12\r\n"));
    ck_assert_ptr_null(strstr(t.head, "forged"));
    ck_assert_ptr_null(strstr(t.head, ": 00\r\n"));

    forward(&t, req, "192.0.2.9"); /* plain, no certificate: stripped all the same */
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Forwarded-Proto: http\r\n"));
    ck_assert_ptr_null(strstr(t.head, "Client-Cert"));
    ck_assert_ptr_null(strstr(t.head, "client-cert"));
}
END_TEST

START_TEST(strip_prefix_head)
{
    struct fwd t;

    forward(&t, "GET /api/x/y?q=1 HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.sr->id, "strip");
    ck_assert_str_eq(t.head, "GET /x/y?q=1 HTTP/1.1\r\n"
                             "Host: a.example\r\n"
                             "Accept: */*\r\n"
                             "X-Forwarded-For: 192.0.2.9\r\n"
                             "X-Forwarded-Proto: http\r\n"
                             "X-Forwarded-Host: a.example\r\n"
                             "X-Request-Id: ours\r\n"
                             "Via: 1.1 switchyard\r\n"
                             "\r\n");
}
END_TEST

/* RFC 9110 7.7: the target goes up byte for byte as received (routed on
 * its normalized path); absolute-form loses only its scheme and authority. */
START_TEST(target_as_received)
{
    static const char *const targets[] = {
        "/raw/a?q=%7E&x=%2F", "/raw/%7Euser",    "/raw//a///b",  "/raw/a;v=1/b;p",
        "/raw/a/./b/../c",    "/raw/x/%2e%2e/y", "/x/../raw/z?",
    };
    struct fwd t;
    char req[256], want[256];

    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", targets[i]);
        forward(&t, req, "192.0.2.9");
        ck_assert_int_eq(t.v, GW_V_UPSTREAM);
        ck_assert_str_eq(t.sr->id, "raw");
        snprintf(want, sizeof(want), "GET %s HTTP/1.1\r\n", targets[i]);
        ck_assert_msg(strncmp(t.head, want, strlen(want)) == 0, "%s: %s", targets[i], t.head);
    }
    forward(&t, "GET http://h:80/raw//%7e?a=b HTTP/1.1\r\nHost: x\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_ptr_nonnull(strstr(t.head, "GET /raw//%7e?a=b HTTP/1.1\r\nHost: h:80\r\n"));
    /* strip_prefix works on the normalized path, and that goes up */
    forward(&t, "GET /api//x/./y%7E?q=%2F HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.9");
    ck_assert_str_eq(t.sr->id, "strip");
    ck_assert_ptr_nonnull(strstr(t.head, "GET /x/y~?q=%2F HTTP/1.1\r\n"));
}
END_TEST

/* router.forward_path "normalized": what the router saw, then the query. */
START_TEST(target_normalized)
{
    struct fwd t;

    snap = snap_normalized;
    forward(&t, "GET /raw//a/./b/../%7Ec;p?q=%7E HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.9");
    snap = snap_as_received;
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_ptr_nonnull(strstr(t.head, "GET /raw/a/~c;p?q=%7E HTTP/1.1\r\n"));
}
END_TEST

/* The request line <t> sent upstream for the request "GET <target>" under
 * snapshot <s>, or its verdict if it is not sent: <t->v>. */
static void forward_under(struct fwd *t, struct adm_snapshot *s, const char *target)
{
    char req[256];

    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
    snap = s;
    forward(t, req, "192.0.2.9");
    snap = snap_as_received;
    if (t->v == GW_V_UPSTREAM)
        *strstr(t->head, "\r\n") = '\0';
}

/* router.escaped_slashes: an escaped slash or backslash, or "..;", is 400
 * (the default), decoded (routed and sent up decoded) or kept (routed and
 * sent up as received); a strip_prefix result that climbs above its root
 * is 400 under every mode. */
START_TEST(escaped_slashes)
{
    static const char *const refused[] = {
        "/raw/a%2Fb",     "/raw/..%2fapi/x", "/raw/..%5Capi/x",      "/raw/..\\api/x",
        "/raw/..;/api/x", "/raw/.;x/y",      "/api/..%2f..%2fsecret"};
    struct fwd t;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        forward_under(&t, snap_as_received, refused[i]);
        ck_assert_msg(t.v == GW_V_BAD_PATH, "%s: %d", refused[i], (int)t.v);
    }

    /* decode: routed on the decoded path, which is what goes up */
    forward_under(&t, snap_decode, "/raw/a%2Fb?q=%2F");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.head, "GET /raw/a/b?q=%2F HTTP/1.1");
    forward_under(&t, snap_decode, "/raw/..%2fapi/x");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.sr->id, "strip");
    ck_assert_str_eq(t.head, "GET /x HTTP/1.1");
    forward_under(&t, snap_decode, "/raw/..%5capi/y/..\\x");
    ck_assert_str_eq(t.head, "GET /x HTTP/1.1");
    forward_under(&t, snap_decode, "/api/..%2f..%2fsecret");
    ck_assert_int_eq(t.v, GW_V_ROUTER); /* /secret: no route */
    forward_under(&t, snap_decode, "/raw/..;/api/x");
    ck_assert_int_eq(t.v, GW_V_BAD_PATH);
    forward_under(&t, snap_decode, "/raw/a%2F..;x/b");
    ck_assert_int_eq(t.v, GW_V_BAD_PATH);
    forward_under(&t, snap_decode, "/raw//a/%7E"); /* nothing decoded: as received */
    ck_assert_str_eq(t.head, "GET /raw//a/%7E HTTP/1.1");

    /* keep: as today, but for a strip_prefix result that climbs */
    forward_under(&t, snap_keep, "/raw/a%2Fb?q=%7E");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.head, "GET /raw/a%2Fb?q=%7E HTTP/1.1");
    forward_under(&t, snap_keep, "/raw/..;/api/x");
    ck_assert_str_eq(t.head, "GET /raw/..;/api/x HTTP/1.1");
    forward_under(&t, snap_keep, "/api/a%2F..%2Fb");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.head, "GET /a%2F..%2Fb HTTP/1.1");
    forward_under(&t, snap_keep, "/api//..foo");
    ck_assert_str_eq(t.head, "GET /..foo HTTP/1.1");
    {
        static const char *const climbs[] = {
            "/api/..%2f..%2fsecret", "/api/..%2Fx",     "/api/..%5cx",         "/api/..\\x",
            "/api/..;x/y",           "/api/.%2F..%2Fx", "/api/a%2F..%2F..%2Fx"};
        for (size_t i = 0; i < sizeof(climbs) / sizeof(climbs[0]); i++) {
            forward_under(&t, snap_keep, climbs[i]);
            ck_assert_msg(t.v == GW_V_BAD_PATH, "%s: %d", climbs[i], (int)t.v);
        }
    }
    /* a rewrite's parameter that climbs on its own, under every mode: it
     * would take the backend out of where the rewrite puts it */
    {
        static const char *const climbs[] = {
            "/users/..%2F..%2F..%2Fadmin/posts/9", "/users/7/posts/..%5Cx", "/users/..;x/posts/9",
            "/users/a%2F..%2F..%2Fx/posts/9",      "/users/..\\x/posts/9",
        };
        for (size_t i = 0; i < sizeof(climbs) / sizeof(climbs[0]); i++) {
            forward_under(&t, snap_keep, climbs[i]);
            ck_assert_msg(t.v == GW_V_BAD_PATH, "%s: %d", climbs[i], (int)t.v);
        }
        forward_under(&t, snap_keep, "/users/a%2F..%2Fb;v=1/posts/9");
        ck_assert_int_eq(t.v, GW_V_UPSTREAM);
        ck_assert_str_eq(t.head, "GET /v2/9/by/a%2F..%2Fb;v=1 HTTP/1.1");
        forward_under(&t, snap_as_received, "/users/a;x/posts/9");
        ck_assert_str_eq(t.head, "GET /v2/9/by/a;x HTTP/1.1");
    }
}
END_TEST

/* Only the protocols a route tunnels keep their Upgrade (by default
 * websocket alone; h2c never): the others go up as plain requests. */
START_TEST(upgrades)
{
    static const struct {
        const char *target, *upgrade;
        int forwarded;
    } cases[] = {
        {"/p", "websocket", 1},        {"/p", "WebSocket", 1}, {"/p", "h2c", 0},
        {"/p", "h2c, websocket", 0},   {"/p", "foo", 0},       {"/ups", "foo/2", 1},
        {"/ups", "websocket, foo", 1}, {"/ups", "h2c", 0},     {"/none", "websocket", 0},
    };
    struct fwd t;
    char req[256], want[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                 "Upgrade: %s\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
                 cases[i].target, cases[i].upgrade);
        forward(&t, req, "192.0.2.9");
        ck_assert_int_eq(t.v, GW_V_UPSTREAM);
        snprintf(want, sizeof(want), "\r\nUpgrade: %s\r\n", cases[i].upgrade);
        ck_assert_msg(!strstr(t.head, want) == !cases[i].forwarded, "%zu: %s", i, t.head);
        ck_assert_msg(!strstr(t.head, "\r\nConnection: upgrade\r\n") == !cases[i].forwarded,
                      "%zu: %s", i, t.head);
        ck_assert_ptr_null(strstr(t.head, "HTTP2-Settings"));
        ck_assert_int_eq(t.upgrade, cases[i].forwarded);
    }
    /* two Upgrade fields: both must be allowed, and both go up as one list */
    forward(&t,
            "GET /ups HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: foo\r\n"
            "Upgrade: websocket\r\n\r\n",
            "192.0.2.9");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nUpgrade: foo, websocket\r\n"));
    forward(&t,
            "GET /ups HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: foo\r\n"
            "Upgrade: h2c\r\n\r\n",
            "192.0.2.9");
    ck_assert_ptr_null(strstr(t.head, "pgrade"));
}
END_TEST

START_TEST(rewrite_head)
{
    struct fwd t;

    forward(&t, "GET /users/7/posts/9 HTTP/1.0\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    /* HTTP/1.0 without Host: the server's address, and Via says 1.0 */
    ck_assert_str_eq(t.head, "GET /v2/9/by/7 HTTP/1.1\r\n"
                             "Host: 127.0.0.1:1\r\n"
                             "X-Forwarded-For: 192.0.2.9\r\n"
                             "X-Forwarded-Proto: http\r\n"
                             "X-Request-Id: ours\r\n"
                             "Via: 1.0 switchyard\r\n"
                             "\r\n");
}
END_TEST

/* A route's request_headers: set replaces every copy (Host too), add
 * appends, remove drops every copy; placeholders filled per request. */
START_TEST(request_header_actions)
{
    struct fwd t;

    forward(&t,
            "GET /h/42 HTTP/1.1\r\nHost: h:8080\r\nUser-Agent: a\r\nCookie: c=1\r\n"
            "X-Keep: 1\r\nuser-agent: b\r\nCOOKIE: d=2\r\nX-Id: forged\r\n\r\n",
            "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.head, "GET /h/42 HTTP/1.1\r\n"
                             "X-Keep: 1\r\n"
                             "X-Id: id=42\r\n"
                             "Host: backend.internal\r\n"
                             "User-Agent: sy {x}\r\n"
                             "X-Where: h|192.0.2.9|ours\r\n"
                             "X-Forwarded-For: 192.0.2.9\r\n"
                             "X-Forwarded-Proto: http\r\n"
                             "X-Forwarded-Host: h:8080\r\n"
                             "X-Request-Id: ours\r\n"
                             "Via: 1.1 switchyard\r\n"
                             "\r\n");
    /* the client's id and client_ip's address fill the placeholders; a
     * client's X-Real-IP is replaced by ours */
    fwd_cip = "203.0.113.7";
    forward(&t, "GET /h/1 HTTP/1.1\r\nHost: h\r\nX-Request-Id: rq-1\r\nX-Real-IP: 6.6.6.6\r\n\r\n",
            "10.1.2.3");
    fwd_cip = NULL;
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Where: h|203.0.113.7|rq-1\r\n"));
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nX-Real-IP: 203.0.113.7\r\n"));
    ck_assert_ptr_null(strstr(t.head, "6.6.6.6"));
    /* an absolute-form target's authority is not sent as Host either */
    forward(&t, "GET http://a.example/h/2 HTTP/1.1\r\nHost: a.example\r\n\r\n", "192.0.2.9");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nHost: backend.internal\r\n"));
    ck_assert_ptr_null(strstr(t.head, "\r\nHost: a.example"));
}
END_TEST

START_TEST(hop_fields_and_client_id)
{
    struct fwd t;

    forward(&t,
            "POST /p HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, x-secret\r\n"
            "Keep-Alive: 5\r\nTE: trailers\r\nX-Secret: s\r\nX-Request-Id: abc\r\n"
            "X-Request-Id: def\r\nX-Forwarded-For: 1.2.3.4\r\nForwarded: for=1.2.3.4\r\n"
            "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    /* an untrusted client: its forwarding fields are dropped */
    ck_assert_str_eq(t.head, "POST /p HTTP/1.1\r\n"
                             "Host: h\r\n"
                             "X-Request-Id: abc\r\n"
                             "X-Forwarded-For: 192.0.2.9\r\n"
                             "X-Forwarded-Proto: http\r\n"
                             "X-Forwarded-Host: h\r\n"
                             "Via: 1.1 switchyard\r\n"
                             "Content-Length: 3\r\n"
                             "\r\n");
}
END_TEST

START_TEST(trusted_proxy)
{
    struct fwd t;

    forward(&t,
            "GET /p HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\n"
            "X-Forwarded-Proto: https\r\nTransfer-Encoding: chunked\r\n\r\n",
            "10.1.2.3");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_str_eq(t.head, "GET /p HTTP/1.1\r\n"
                             "Host: h\r\n"
                             "X-Forwarded-Proto: https\r\n"
                             "X-Forwarded-For: 1.2.3.4, 10.1.2.3\r\n"
                             "X-Forwarded-Host: h\r\n"
                             "X-Request-Id: ours\r\n"
                             "Via: 1.1 switchyard\r\n"
                             "Transfer-Encoding: chunked\r\n"
                             "\r\n");
}
END_TEST

START_TEST(max_forwards)
{
    struct fwd t;

    forward(&t, "OPTIONS /p HTTP/1.1\r\nHost: h\r\nMax-Forwards: 3\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_UPSTREAM);
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nMax-Forwards: 2\r\n"));
    forward(&t, "OPTIONS /p HTTP/1.1\r\nHost: h\r\nMax-Forwards: 0\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_MF0);
}
END_TEST

/* A buffered body goes up with the Content-Length of what was read, never
 * chunked; a streamed one keeps its framing. */
START_TEST(buffered_body)
{
    struct fwd t;
    static const char chunked_req[] = "POST /p HTTP/1.1\r\nHost: h\r\n"
                                      "Transfer-Encoding: chunked\r\n\r\n";

    forward(&t, chunked_req, "192.0.2.1");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nTransfer-Encoding: chunked\r\n"));
    ck_assert_ptr_null(strstr(t.head, "Content-Length"));
    fwd_buffered = 1;
    fwd_buffered_len = 3145728;
    forward(&t, chunked_req, "192.0.2.1");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nContent-Length: 3145728\r\n"));
    ck_assert_ptr_null(strstr(t.head, "Transfer-Encoding"));
    ck_assert_ptr_null(strstr(t.head, "chunked"));
    fwd_buffered_len = 0; /* an empty chunked body */
    forward(&t, chunked_req, "192.0.2.1");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nContent-Length: 0\r\n"));
    fwd_buffered_len = 5;
    forward(&t, "PUT /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", "192.0.2.1");
    ck_assert_ptr_nonnull(strstr(t.head, "\r\nContent-Length: 5\r\n"));
    ck_assert_ptr_null(
        strstr(t.head + (strstr(t.head, "Content-Length") - t.head) + 1, "Content-Length"));
    fwd_buffered = 0;
    fwd_buffered_len = 0;
    forward(&t, "GET /p HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.1");
    ck_assert_ptr_null(strstr(t.head, "Content-Length"));
    ck_assert_ptr_null(strstr(t.head, "Transfer-Encoding"));
}
END_TEST

START_TEST(verdicts)
{
    struct fwd t;

    forward(&t, "GET /nothing HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_ROUTER);
    ck_assert_int_eq(t.m.status, RT_NOT_FOUND);
    forward(&t, "GET /local HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_LOCAL);
    ck_assert_str_eq(t.sr->id, "local");
    forward(&t, "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_CONNECT);
    forward(&t, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "192.0.2.9");
    ck_assert_int_eq(t.v, GW_V_ASTERISK);
}
END_TEST

START_TEST(no_room_for_params)
{
    struct h1_req_parser rp;
    struct rt_param p[1];
    struct rt_match m;
    const struct adm_sroute *sr;
    const char *req = "GET /users/7/posts/9 HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t used = 0;

    ck_assert_int_eq(h1_req_parser_init(&rp, NULL), 0);
    h1_req_feed_head(&rp, req, strlen(req), &used);
    ck_assert_int_eq(gw_forward_decide(&rp, snap, ctx, p, 1, &m, &sr), GW_V_NOMEM);
    h1_req_parser_free(&rp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_forward");
    TCase *tc = tcase_create("forward");
    SRunner *sr;
    int failed;

    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_add_test(tc, strip_prefix_head);
    tcase_add_test(tc, tls_fields);
    tcase_add_test(tc, rewrite_head);
    tcase_add_test(tc, target_as_received);
    tcase_add_test(tc, target_normalized);
    tcase_add_test(tc, escaped_slashes);
    tcase_add_test(tc, upgrades);
    tcase_add_test(tc, hop_fields_and_client_id);
    tcase_add_test(tc, trusted_proxy);
    tcase_add_test(tc, max_forwards);
    tcase_add_test(tc, buffered_body);
    tcase_add_test(tc, request_header_actions);
    tcase_add_test(tc, verdicts);
    tcase_add_test(tc, no_room_for_params);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
