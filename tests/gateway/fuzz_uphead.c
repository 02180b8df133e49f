/*
 * tests/gateway/fuzz_uphead.c - fuzz target of the request path up to the
 * upstream: a client's request head is parsed and normalized
 * (admin/http1/request.c), routed (router/) and, when a proxy route takes it,
 * rebuilt as the head Switchyard sends upstream (gateway/forward.c:
 * gw_forward_decide() and gw_forward_head(), called directly). That head must be one our own strict
 * parser accepts whole, and must say what the client's said: the same method, body framing and
 * query; the target as received (so the same normalized path), or the route's strip_prefix or
 * rewrite of it; at most one Upgrade, never h2c; the client's Host; no
 * hop-by-hop field; one X-Forwarded-For, ending with the client's address (only it, for an
 * untrusted client); one X-Request-Id; our Via last; Max-Forwards one less.
 *
 * Input: byte 0 picks the client (bit 0: inside trusted_proxies, bit 1:
 * IPv6) and router.escaped_slashes (bits 2-3: reject, decode, keep,
 * reject); the rest is what the client sends. Under decode the path that
 * goes up is the decoded one the router saw; a strip_prefix result never
 * climbs above its root.
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * fuzz_replay.c as a plain program that replays uphead_corpus/ plus
 * mutations of it (run by ctest).
 */
#define _POSIX_C_SOURCE 200809L

#include "gateway/forward.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* byte 0 is the client, not request bytes */
const size_t fuzz_prefix = 1;

static const char config[] =
    "{\"workers\": 1, \"listeners\": [{\"address\": \"127.0.0.1:1\"}],"
    " \"upstreams\": {\"u\": {\"servers\": [{\"address\": \"127.0.0.1:1\"}]}},"
    " \"routes\": ["
    "  {\"id\": \"all\", \"path\": \"/*{rest}\", \"upstream\": \"u\"},"
    "  {\"id\": \"strip\", \"path\": \"/api/*{rest}\", \"strip_prefix\": \"/api\","
    "   \"upstream\": \"u\"},"
    "  {\"id\": \"rw\", \"path\": \"/users/{id}/posts/{post}\","
    "   \"rewrite\": \"/v2/{post}/by/{id}\", \"upstream\": \"u\"},"
    "  {\"id\": \"host\", \"host\": \"{sub}.example.com\", \"path\": \"/h/{x}\", \"upstream\": "
    "\"u\"},"
    "  {\"id\": \"get\", \"methods\": [\"GET\"], \"path\": \"/only-get\", \"upstream\": \"u\"},"
    "  {\"id\": \"local\", \"path\": \"/local\", \"response\": {\"body\": \"x\"}},"
    "  {\"id\": \"old\", \"path\": \"/old\", \"redirect\": {\"location\": \"/new\"}}],"
    " \"router\": {\"auto_options\": true, \"escaped_slashes\": \"%s\"},"
    " \"trusted_proxies\": [\"10.0.0.0/8\", \"fd00::/8\"], \"access_log\": \"off\"}";

/* The snapshot of <config> under router.escaped_slashes <mode>. */
static struct adm_snapshot *snapshot(enum h1_escaped_slashes mode)
{
    static const char *const names[] = {"reject", "decode", "keep"};
    static struct adm_snapshot *s[3];

    if (!s[mode]) {
        struct adm_errors errs;
        struct adm_config *cfg;
        char json[sizeof(config) + 8];
        int n = snprintf(json, sizeof(json), config, names[mode]);

        CHECK(n > 0 && (size_t)n < sizeof(json));
        adm_errors_init(&errs);
        cfg = adm_config_parse(json, (size_t)n, &errs);
        CHECK(cfg != NULL);
        CHECK(cfg->router.escaped_slashes == mode);
        s[mode] = adm_snapshot_build(cfg, NULL, 1, &errs);
        CHECK(s[mode] != NULL);
        adm_errors_clear(&errs);
    }
    return s[mode];
}

static int slice_is(struct h1_slice s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static int same_slice(struct h1_slice a, struct h1_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static int name_is(const struct h1_header *h, const char *lit)
{
    return h->name.len == strlen(lit) && strncasecmp(h->name.ptr, lit, h->name.len) == 0;
}

/* Whether the client's Connection field names <name>. */
static int in_connection(const struct h1_request *rq, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < rq->nconnection; i++)
        if (rq->connection[i].len == n && strncasecmp(rq->connection[i].ptr, name, n) == 0)
            return 1;
    return 0;
}

static size_t count(const struct h1_request *rq, const char *name)
{
    size_t k = 0;

    for (size_t i = 0; i < rq->nheaders; i++)
        k += (size_t)name_is(&rq->headers[i], name);
    return k;
}

/* The one field named <name> of <rq> (NULL when none); more than one fails. */
static const struct h1_header *only(const struct h1_request *rq, const char *name)
{
    const struct h1_header *found = NULL;

    for (size_t i = 0; i < rq->nheaders; i++) {
        if (name_is(&rq->headers[i], name)) {
            CHECK(found == NULL);
            found = &rq->headers[i];
        }
    }
    return found;
}

static void client(uint8_t b, struct sockaddr_storage *ss, char *ip, size_t cap)
{
    memset(ss, 0, sizeof(*ss));
    if (b & 2) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, (b & 1) ? "fd00::7" : "2001:db8::1", &a->sin6_addr);
        inet_ntop(AF_INET6, &a->sin6_addr, ip, (socklen_t)cap);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, (b & 1) ? "10.1.2.3" : "192.0.2.9", &a->sin_addr);
        inet_ntop(AF_INET, &a->sin_addr, ip, (socklen_t)cap);
    }
}

/* The route a request of <rq> hits (the probe said it goes upstream). */
static const struct adm_sroute *route_of(const struct adm_snapshot *s, const struct h1_request *rq,
                                         struct rt_param *params, size_t cap)
{
    struct rt_match m;

    rt_lookup(s->rt, rq->method.ptr, rq->method.len, rq->host_name.ptr, rq->host_name.len, rq->path,
              rq->path_len, params, cap, &m);
    CHECK(m.status == RT_HIT);
    return rt_route_udata(m.route);
}

static void check_path(const struct adm_snapshot *s, const struct h1_request *in,
                       const struct h1_request *up)
{
    struct rt_param params[8];
    const struct adm_sroute *sr = route_of(s, in, params, 8);
    const char *p = in->path;
    size_t n = in->path_len;

    if (strcmp(sr->id, "rw") == 0) {
        /* /users/{id}/posts/{post} -> /v2/{post}/by/{id} */
        const struct rt_param *id = &params[0], *post = &params[1];
        CHECK(up->path_len == 4 + post->len + 4 + id->len);
        CHECK(memcmp(up->path, "/v2/", 4) == 0);
        CHECK(memcmp(up->path + 4, post->value, post->len) == 0);
        CHECK(memcmp(up->path + 4 + post->len, "/by/", 4) == 0);
        CHECK(memcmp(up->path + 8 + post->len, id->value, id->len) == 0);
        return;
    }
    if (strcmp(sr->id, "strip") == 0) {
        CHECK(!h1_path_climbs(up->path, up->path_len));
        CHECK(n >= 4 && memcmp(p, "/api", 4) == 0);
        p += 4;
        n -= 4;
        if (n == 0) {
            CHECK(up->path_len == 1 && up->path[0] == '/');
            return;
        }
    }
    /* normalizing is idempotent: the path arrives as it was routed */
    CHECK(up->path_len == n && memcmp(up->path, p, n) == 0);
}

/* What the request path does with the complete request head data[0..n)
 * from a client at <peer> (its address as text <ip>), up to the upstream
 * head: 0 with that head in <out> when the request goes upstream, else the
 * status Switchyard answers with itself (the router's for 404, 405,
 * redirects and automatic OPTIONS), or -1 for an incomplete head. */
static int uphead(const char *data, size_t n, struct adm_snapshot *s, const struct sockaddr *peer,
                  const char *ip, struct evbuffer *out)
{
    static rt_ctx *ctx;
    struct h1_req_parser rp;
    struct h1_req_limits lim;
    struct rt_param params[16];
    const struct adm_sroute *sr;
    struct rt_match m;
    size_t used = 0;
    int rc, ret = -1;

    if (!ctx)
        CHECK((ctx = rt_ctx_new()) != NULL);
    CHECK(rt_table_max_params(s->rt) <= 16);
    gw_conn_limits(s->cfg, &lim);
    CHECK(h1_req_parser_init(&rp, &lim) == 0);
    rc = h1_req_feed_head(&rp, data, n, &used);
    if (rc == H1_REQ_ERROR) {
        ret = rp.status;
    } else if (rc != H1_REQ_AGAIN) {
        switch (gw_forward_decide(&rp, s, ctx, params, 16, &m, &sr)) {
        case GW_V_CONNECT:
            ret = 501;
            break;
        case GW_V_ASTERISK:
        case GW_V_MF0:
            ret = 200;
            break;
        case GW_V_NOMEM:
            ret = 503;
            break;
        case GW_V_ROUTER:
            ret = (int)m.status;
            break;
        case GW_V_LOCAL:
            ret = (int)sr->status;
            break;
        case GW_V_INVALID:
            ret = rp.status;
            break;
        case GW_V_BAD_PATH:
            ret = 400;
            break;
        case GW_V_HTTPS: /* decided by the connection: never here */
        case GW_V_MISDIRECTED:
        case GW_V_PLAIN_ON_TLS:
            abort();
        case GW_V_UPSTREAM: {
            struct gw_forward f = {
                .rq = &rp.req,
                .snap = s,
                .sr = sr,
                .params = params,
                .nparams = m.nparams < 16 ? m.nparams : 16,
                .peer = peer,
                .peer_ip = ip,
                .upstream_addr = "127.0.0.1:1",
                .client_id = gw_forward_client_id(&rp.req, 64),
                .reqid = "000000000000000000000001",
                .reqid_len = 24,
            };
            struct gw_obuf ob;
            gw_ob_init(&ob, out);
            gw_forward_head(&f, &ob);
            gw_ob_flush(&ob);
            ret = 0;
            break;
        }
        }
    }
    h1_req_parser_free(&rp);
    return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const hop[] = {"keep-alive", "proxy-connection", "te", "trailer"};
    enum h1_escaped_slashes mode;
    struct sockaddr_storage peer;
    char ip[INET6_ADDRSTRLEN];
    struct h1_req_parser in, up;
    struct h1_req_limits lim;
    struct evbuffer *out;
    const struct h1_request *rq, *urq;
    const struct h1_header *h;
    const char *head;
    size_t len, used = 0;
    int rc;

    if (size < 1)
        return 0;
    client(data[0], &peer, ip, sizeof(ip));
    mode =
        (data[0] >> 2 & 3) == 3 ? H1_SLASHES_REJECT : (enum h1_escaped_slashes)(data[0] >> 2 & 3);
    out = evbuffer_new();
    CHECK(out != NULL);
    rc = uphead((const char *)data + 1, size - 1, snapshot(mode), (const struct sockaddr *)&peer,
                ip, out);
    if (rc != 0) {
        CHECK(rc == -1 || (rc >= 200 && rc <= 599));
        CHECK(evbuffer_get_length(out) == 0);
        evbuffer_free(out);
        return 0;
    }

    /* the client's request, as the gateway read it */
    CHECK(h1_req_parser_init(&in, NULL) == 0);
    rc = h1_req_feed_head(&in, (const char *)data + 1, size - 1, &used);
    CHECK(rc == H1_REQ_HEAD || rc == H1_REQ_DONE);
    CHECK(h1_req_route_path(&in, mode) == 0); /* the path the router saw */
    rq = &in.req;

    /* the upstream's: one whole head our parser takes, nothing after it */
    len = evbuffer_get_length(out);
    head = (const char *)evbuffer_pullup(out, (ev_ssize_t)len);
    h1_req_limits_default(&lim);
    lim.max_request_line = 1 << 20;
    lim.max_header_bytes = 1 << 20;
    lim.max_headers = 1000;
    CHECK(h1_req_parser_init(&up, &lim) == 0);
    used = 0;
    rc = h1_req_feed_head(&up, head, len, &used);
    CHECK(rc == H1_REQ_HEAD || rc == H1_REQ_DONE);
    CHECK(used == len);
    CHECK(h1_req_confirm(&up) == 0);
    urq = &up.req;

    CHECK(same_slice(urq->method, rq->method));
    CHECK(urq->version_minor == 1);
    CHECK(urq->form == H1_TARGET_ORIGIN);
    CHECK(urq->body_kind == rq->body_kind);
    CHECK(rq->body_kind != H1_BODY_LENGTH || urq->content_length == rq->content_length);
    CHECK((urq->query.ptr != NULL) == (rq->query.ptr != NULL));
    CHECK(same_slice(urq->query, rq->query));
    check_path(snapshot(mode), rq, urq);

    h = only(urq, "host");
    CHECK(h != NULL);
    CHECK(rq->host.ptr ? same_slice(h->value, rq->host) : slice_is(h->value, "127.0.0.1:1"));

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        CHECK(only(urq, hop[i]) == NULL);
    h = only(urq, "connection");
    CHECK(h == NULL || (rq->upgrade && slice_is(h->value, "upgrade")));
    CHECK(only(urq, "upgrade") == NULL || rq->upgrade);
    /* never h2c, whatever the client's Upgrade list looks like, and
     * only well-formed protocols: each element a token ["/" token] */
    h = only(urq, "upgrade");
    if (h) {
        struct h1_slice e;
        size_t pos = 0;
        while (h1_list_next(h->value, &pos, &e)) {
            const char *slash = memchr(e.ptr, '/', e.len);
            size_t nlen = slash ? (size_t)(slash - e.ptr) : e.len;
            if (e.len == 0)
                continue;
            CHECK(h1_is_token(e.ptr, nlen));
            CHECK(!slash || h1_is_token(slash + 1, e.len - nlen - 1));
            CHECK(!h1_ci_eq(e.ptr, nlen, "h2c"));
        }
    }
    /* what the client's Connection names is gone, but for what the
     * gateway writes itself */
    for (size_t i = 0; i < rq->nconnection; i++) {
        static const char *const ours[] = {"upgrade",
                                           "host",
                                           "content-length",
                                           "transfer-encoding",
                                           "x-forwarded-for",
                                           "x-forwarded-proto",
                                           "x-forwarded-host",
                                           "x-request-id",
                                           "via"};
        const struct h1_slice *t = &rq->connection[i];
        int own = 0;

        for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++)
            own |= t->len == strlen(ours[k]) && strncasecmp(t->ptr, ours[k], t->len) == 0;
        for (size_t k = 0; !own && k < urq->nheaders; k++)
            CHECK(!(urq->headers[k].name.len == t->len &&
                    strncasecmp(urq->headers[k].name.ptr, t->ptr, t->len) == 0));
    }

    h = only(urq, "x-forwarded-for");
    CHECK(h != NULL);
    {
        size_t il = strlen(ip);
        CHECK(h->value.len >= il && memcmp(h->value.ptr + h->value.len - il, ip, il) == 0);
        if (!(data[0] & 1)) /* untrusted: what the client claimed is gone */
            CHECK(h->value.len == il);
    }
    if (!(data[0] & 1))
        CHECK(only(urq, "forwarded") == NULL);
    h = only(urq, "x-request-id");
    CHECK(h != NULL && h->value.len > 0);
    h = NULL;
    for (size_t i = 0; i < urq->nheaders; i++)
        if (name_is(&urq->headers[i], "via"))
            h = &urq->headers[i];
    CHECK(h != NULL);
    CHECK(slice_is(h->value, rq->version_minor ? "1.1 switchyard" : "1.0 switchyard"));

    if ((rq->method_id == HTTP_OPTIONS || rq->method_id == HTTP_TRACE) &&
        !in_connection(rq, "max-forwards") && count(rq, "max-forwards") == 1) {
        const struct h1_header *a = only(rq, "max-forwards");
        const struct h1_header *b = only(urq, "max-forwards");
        long v = 0;
        size_t k;

        for (k = 0; k < a->value.len && k < 9 && a->value.ptr[k] >= '0' && a->value.ptr[k] <= '9';
             k++)
            v = v * 10 + (a->value.ptr[k] - '0');
        CHECK(b != NULL);
        if (k == a->value.len && k > 0 && k < 9) { /* a number we can check exactly */
            char buf[24];
            CHECK(v > 0); /* 0 is answered by the gateway */
            snprintf(buf, sizeof(buf), "%ld", v - 1);
            CHECK(slice_is(b->value, buf));
        }
    }

    h1_req_parser_free(&up);
    h1_req_parser_free(&in);
    evbuffer_free(out);
    return 0;
}
