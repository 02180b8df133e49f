/*
 * etcd.c - the etcd v3 client of etcd.h: the session (auth, the range
 * read, the one watch, the watchdog, the backoff) and the writes. The
 * HTTP requests themselves are etcd_http.c's.
 *
 * The session is one explicit state: S_IDLE before adm_etcd_start(),
 * S_WAIT during a backoff, then S_AUTH (with a username), S_RANGE (when
 * no view is held, or after a compaction), S_WATCH (the watch is asked
 * for) and S_UP (etcd said "created"). Any failure goes through
 * sess_fail(): everything of the session is dropped, the next endpoint
 * is tried after a jittered delay. What has been delivered stays: the
 * next watch starts at the last delivered revision + 1.
 *
 * Writes run on connections of their own, at most WRITES_INFLIGHT at a
 * time, and only while the session is up (so that a write's answer and
 * its event come from a reachable etcd); until then they wait, each
 * under its own deadline.
 */
#include "admin/etcd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/dns.h>
#include <event2/util.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "admin/etcd_int.h"

#define WRITES_INFLIGHT 8 /* writes on the wire at once */
#define WRITES_MAX 4096   /* writes held at once (more fail at once) */
#define ERR_LEN 512

enum sess { S_IDLE, S_WAIT, S_AUTH, S_RANGE, S_WATCH, S_UP };

struct wop {
    TAILQ_ENTRY(wop) link;
    struct adm_etcd *e;
    uint64_t handle;
    char *body; /* the txn's JSON */
    adm_etcd_done_fn done;
    void *arg;
    struct event *deadline;
    struct etcd_http *req; /* on the wire */
    int auth_retried;
    const char *fail; /* set: fail with this when the deadline (now 0) fires */
};
TAILQ_HEAD(wop_list, wop);

struct adm_etcd {
    struct event_base *base;
    struct etcd_ep *eps;
    size_t neps, ep; /* the endpoint in use */
    SSL_CTX *ssl_ctx;
    struct evdns_base *dns; /* for endpoints named by host name; NULL: all are addresses */
    char *key64, *end64;    /* the prefix's range, base64 */
    char *username, *password, *token;
    unsigned dial_ms, request_ms, idle_ms, backoff_min, backoff_max;
    struct adm_etcd_hooks h;

    enum sess sess;
    struct etcd_http *sreq;  /* the session's auth, range or probe */
    struct etcd_http *watch; /* the watch stream */
    struct event *backoff_t, *dog_t;
    unsigned attempt; /* failures since the last watch created */
    int up;           /* -1 not yet known, 0, 1 */
    int have_view;    /* a snapshot was delivered */
    int compacted;    /* the next read follows a compaction */
    int64_t last;     /* the last revision delivered */
    int reauth;       /* S_AUTH while the watch runs: a write's token expired */
    uint64_t reads;   /* full reads of the prefix */
    int suspect;      /* the probe found keys past suspect_base */
    int64_t suspect_base;

    struct wop_list queued, inflight;
    size_t nwrites, ninflight;
    uint64_t next_handle;
    struct adm_etcd_stats st;
};

static void sess_fail(struct adm_etcd *e, const char *why);
static void sess_next(struct adm_etcd *e);
static void writes_pump(struct adm_etcd *e);

/* ---- JSON and base64 ---- */

static char *b64_encode(const char *s, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);

    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

/* Decodes <s> (NULL: empty) into a new NUL-terminated buffer. */
static char *b64_decode(const char *s, size_t *outlen)
{
    size_t n = s ? strlen(s) : 0, len;
    char *out;
    int r;

    if (n % 4 || n > (size_t)ETCD_BODY_MAX || !(out = malloc(n / 4 * 3 + 1)))
        return NULL;
    r = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)(s ? s : ""), (int)n);
    if (r < 0) {
        free(out);
        return NULL;
    }
    len = (size_t)r;
    if (n >= 1 && s[n - 1] == '=')
        len--;
    if (n >= 2 && s[n - 2] == '=')
        len--;
    out[len] = '\0';
    *outlen = len;
    return out;
}

/* An int64 member (etcd sends them as strings); 0 when absent. */
static int64_t jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);

    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static int64_t header_rev(const json_t *o)
{
    return jint(json_object_get(o, "header"), "revision");
}

/* The text of etcd's error answer <o> ({"error", "message", "code"}, or
 * a stream's {"error": {...}}). */
static const char *jerror(const json_t *o)
{
    const json_t *err = json_object_get(o, "error");
    const char *m = json_string_value(json_object_get(o, "message"));

    if (json_is_object(err)) {
        m = json_string_value(json_object_get(err, "message"));
        err = NULL;
    }
    if (!m)
        m = json_string_value(err);
    return m ? m : "unknown error";
}

/* Is <o> etcd's answer to an invalid or expired token? */
static int bad_token(int status, const json_t *o)
{
    const char *m = jerror(o);

    return status == 401 || strstr(m, "invalid auth token") || strstr(m, "auth token is expired");
}

/* Serializes <o> (taking it) into a new string. */
static char *jdump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    return s;
}

/* ---- keys as the hooks get them ---- */

struct kvs {
    struct adm_etcd_kv *v;
    size_t n;
};

static void kvs_clear(struct kvs *k)
{
    for (size_t i = 0; i < k->n; i++) {
        free((char *)k->v[i].key);
        free((char *)k->v[i].value);
    }
    free(k->v);
    k->v = NULL;
    k->n = 0;
}

/* Appends the etcd KeyValue <kv>; <deleted>: an event's DELETE. */
static int kvs_add(struct kvs *k, const json_t *kv, int deleted)
{
    struct adm_etcd_kv *x = &k->v[k->n];

    memset(x, 0, sizeof(*x));
    if (!json_is_object(kv) ||
        !(x->key = b64_decode(json_string_value(json_object_get(kv, "key")), &x->keylen)))
        return -1;
    x->mod_revision = jint(kv, "mod_revision");
    x->create_revision = jint(kv, "create_revision");
    k->n++;
    if (deleted)
        return 0;
    x->value = b64_decode(json_string_value(json_object_get(kv, "value")), &x->vallen);
    return x->value ? 0 : -1;
}

/* The keys of a range answer's "kvs", or of a watch answer's "events". */
static int kvs_from(struct kvs *k, const json_t *arr, int events)
{
    size_t i, n = json_array_size(arr);
    const json_t *it;

    k->n = 0;
    if (!(k->v = calloc(n ? n : 1, sizeof(*k->v))))
        return -1;
    json_array_foreach(arr, i, it)
    {
        const char *type = json_string_value(json_object_get(it, "type"));
        int del = events && type && !strcmp(type, "DELETE");
        if (kvs_add(k, events ? json_object_get(it, "kv") : it, del) < 0) {
            kvs_clear(k);
            return -1;
        }
    }
    return 0;
}

/* ---- requests ---- */

static struct etcd_http *request(struct adm_etcd *e, const char *path, const char *body,
                                 etcd_http_line line, etcd_http_done done, void *arg, char *why,
                                 size_t cap)
{
    struct etcd_http_req r = {
        .base = e->base,
        .ssl_ctx = e->ssl_ctx,
        .dns = e->dns,
        .ep = &e->eps[e->ep],
        .path = path,
        .body = body,
        .token = e->token,
        .dial_ms = e->dial_ms,
        .request_ms = e->request_ms,
        .line = line,
        .done = done,
        .arg = arg,
    };

    if (!body) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    return etcd_http_start(&r, why, cap);
}

/* Parses a unary answer into *<out>; NULL, or the error in <why>. */
static json_t *answer(struct adm_etcd *e, int status, const char *body, size_t len, const char *err,
                      char *why, size_t cap)
{
    json_t *o;

    if (err) {
        snprintf(why, cap, "%s", err);
        return NULL;
    }
    if (!(o = json_loadb(body, len, 0, NULL)) || !json_is_object(o)) {
        snprintf(why, cap, "%s: HTTP %d: not a JSON object", e->eps[e->ep].url, status);
        json_decref(o);
        return NULL;
    }
    if (status != 200) {
        snprintf(why, cap, "%s: HTTP %d: %s", e->eps[e->ep].url, status, jerror(o));
        if (!bad_token(status, o)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* ---- the session ---- */

static void set_up(struct adm_etcd *e, int up, const char *why)
{
    if (e->up == up)
        return;
    e->up = up;
    e->st.up = up;
    if (e->h.state)
        e->h.state(e->h.arg, up, why);
}

static void dog_arm(struct adm_etcd *e)
{
    struct timeval tv = {e->idle_ms / 1000, (e->idle_ms % 1000) * 1000};

    event_add(e->dog_t, &tv);
}

/* Drops whatever the session has on the wire. */
static void sess_drop(struct adm_etcd *e)
{
    etcd_http_cancel(e->sreq);
    etcd_http_cancel(e->watch);
    e->sreq = e->watch = NULL;
    if (e->dog_t)
        event_del(e->dog_t);
    e->suspect = 0;
}

static void sess_fail(struct adm_etcd *e, const char *why)
{
    unsigned delay = e->backoff_min, r = 0;

    sess_drop(e);
    e->reauth = 0;
    free(e->token); /* a restarted etcd forgets its tokens: take a new one */
    e->token = NULL;
    e->st.reconnects++;
    set_up(e, 0, why);
    for (unsigned i = 0; i < e->attempt && delay < e->backoff_max; i++)
        delay *= 2;
    if (delay > e->backoff_max)
        delay = e->backoff_max;
    if (e->attempt < 32)
        e->attempt++;
    evutil_secure_rng_get_bytes(&r, sizeof(r));
    delay = delay / 2 + r % (delay / 2 + 1); /* jitter: between half and all of it */
    e->ep = (e->ep + 1) % e->neps;
    e->st.endpoint = e->eps[e->ep].url;
    e->sess = S_WAIT;
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    event_add(e->backoff_t, &tv);
}

static void on_backoff(evutil_socket_t fd, short what, void *arg)
{
    struct adm_etcd *e = arg;

    (void)fd;
    (void)what;
    e->sess = S_AUTH;
    sess_next(e);
}

/* Hands over the events of <k> one revision at a time. */
static void deliver(struct adm_etcd *e, const struct kvs *k)
{
    size_t i = 0;

    while (i < k->n) {
        size_t j = i;
        int64_t rev = k->v[i].mod_revision;
        while (j < k->n && k->v[j].mod_revision == rev)
            j++;
        if (rev > e->last) { /* never twice */
            e->last = rev;
            e->st.revision = rev;
            e->st.events += j - i;
            if (e->h.events)
                e->h.events(e->h.arg, rev, k->v + i, j - i);
        }
        i = j;
    }
}

/* A compaction: read the prefix again, the watch is gone. */
static void compacted(struct adm_etcd *e)
{
    e->st.compactions++;
    e->compacted = 1;
    e->have_view = 0;
    event_del(e->dog_t);
    /* a probe or a re-login in flight is the old watch's: dropped, and a
     * token a write found expired is taken first */
    etcd_http_cancel(e->sreq);
    e->sreq = NULL;
    e->reauth = 0;
    e->suspect = 0;
    e->sess = S_AUTH;
    sess_next(e);
}

/* One {"result": ...} of the watch; -1 when the watch must end (the
 * session has moved on). */
static int watch_result(struct adm_etcd *e, const json_t *res)
{
    const json_t *evs = json_object_get(res, "events");
    struct kvs k;

    if (json_is_true(json_object_get(res, "canceled"))) {
        char why[ERR_LEN];
        e->watch = NULL;
        if (jint(res, "compact_revision") > 0) {
            compacted(e);
            return -1;
        }
        snprintf(why, sizeof(why), "%s: watch canceled: %s", e->eps[e->ep].url,
                 json_string_value(json_object_get(res, "cancel_reason"))
                     ? json_string_value(json_object_get(res, "cancel_reason"))
                     : "no reason given");
        sess_fail(e, why);
        return -1;
    }
    if (json_is_true(json_object_get(res, "created"))) {
        e->sess = S_UP;
        e->attempt = 0;
        set_up(e, 1, e->eps[e->ep].url);
        writes_pump(e);
    } else if (json_array_size(evs) > 0) {
        if (kvs_from(&k, evs, 1) < 0) {
            e->watch = NULL;
            sess_fail(e, "watch: an event that cannot be decoded (or out of memory)");
            return -1;
        }
        deliver(e, &k);
        kvs_clear(&k);
    } else if (header_rev(res) >= e->last) {
        e->last = e->st.revision = header_rev(res);
        if (e->h.progress)
            e->h.progress(e->h.arg, e->last);
    }
    if (e->suspect && e->last > e->suspect_base)
        e->suspect = 0;
    return 0;
}

static int on_watch_line(void *arg, const char *line, size_t len)
{
    struct adm_etcd *e = arg;
    json_t *o = json_loadb(line, len, 0, NULL);
    const json_t *res = json_object_get(o, "result");
    char why[ERR_LEN];
    int rc;

    if (len == 0) {
        json_decref(o);
        return 0;
    }
    if (!json_is_object(res)) {
        snprintf(why, sizeof(why), "%s: watch: %s", e->eps[e->ep].url,
                 o ? jerror(o) : "an answer that is not JSON");
        json_decref(o);
        e->watch = NULL;
        sess_fail(e, why);
        return -1;
    }
    rc = watch_result(e, res);
    json_decref(o);
    if (rc == 0 && e->sess == S_UP)
        dog_arm(e);
    return rc;
}

static void on_watch_done(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct adm_etcd *e = arg;
    char why[ERR_LEN];
    json_t *o;

    e->watch = NULL;
    if ((o = answer(e, status, body, len, err, why, sizeof(why))) != NULL) {
        snprintf(why, sizeof(why), "%s: watch: HTTP %d", e->eps[e->ep].url, status);
        json_decref(o);
    }
    sess_fail(e, why);
}

static void watch_start(struct adm_etcd *e)
{
    char why[ERR_LEN], rev[32];
    char *body;

    snprintf(rev, sizeof(rev), "%" PRId64, e->last + 1);
    body = jdump(json_pack("{s:{s:s,s:s,s:s,s:b}}", "create_request", "key", e->key64, "range_end",
                           e->end64, "start_revision", rev, "progress_notify", 1));
    e->sess = S_WATCH;
    e->watch = request(e, "/v3/watch", body, on_watch_line, on_watch_done, e, why, sizeof(why));
    free(body);
    if (!e->watch)
        sess_fail(e, why);
}

static void on_range(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct adm_etcd *e = arg;
    char why[ERR_LEN];
    json_t *o;
    struct kvs k;
    int64_t rev;

    e->sreq = NULL;
    if (!(o = answer(e, status, body, len, err, why, sizeof(why))) || status != 200) {
        json_decref(o);
        sess_fail(e, why);
        return;
    }
    if (kvs_from(&k, json_object_get(o, "kvs"), 0) < 0) {
        json_decref(o);
        sess_fail(e, "range: a key that cannot be decoded (or out of memory)");
        return;
    }
    rev = header_rev(o);
    json_decref(o);
    if (e->reads++)
        e->st.rereads++;
    e->last = e->st.revision = rev;
    e->have_view = 1;
    if (e->h.snapshot)
        e->h.snapshot(e->h.arg, rev, k.v, k.n, e->compacted);
    e->compacted = 0;
    kvs_clear(&k);
    watch_start(e);
}

static void on_auth(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct adm_etcd *e = arg;
    char why[ERR_LEN];
    json_t *o;
    const char *tok;

    e->sreq = NULL;
    if (!(o = answer(e, status, body, len, err, why, sizeof(why))) || status != 200) {
        json_decref(o);
        sess_fail(e, why);
        return;
    }
    if (!(tok = json_string_value(json_object_get(o, "token"))) || !(e->token = strdup(tok))) {
        snprintf(why, sizeof(why), "%s: auth: no token in the answer", e->eps[e->ep].url);
        json_decref(o);
        sess_fail(e, why);
        return;
    }
    json_decref(o);
    if (e->reauth) { /* the watch still runs */
        e->reauth = 0;
        e->sess = S_UP;
        dog_arm(e);
        writes_pump(e);
        return;
    }
    e->sess = S_RANGE;
    sess_next(e);
}

/* The session's next step from S_AUTH or S_RANGE. */
static void sess_next(struct adm_etcd *e)
{
    char why[ERR_LEN];
    char *body;

    etcd_http_cancel(e->sreq); /* one session request at a time: never an orphan */
    e->sreq = NULL;
    if (e->sess == S_AUTH && e->username && !e->token) {
        body = jdump(json_pack("{s:s,s:s}", "name", e->username, "password", e->password));
        e->sreq = request(e, "/v3/auth/authenticate", body, NULL, on_auth, e, why, sizeof(why));
    } else if (!e->have_view) {
        e->sess = S_RANGE;
        body = jdump(json_pack("{s:s,s:s}", "key", e->key64, "range_end", e->end64));
        e->sreq = request(e, "/v3/kv/range", body, NULL, on_range, e, why, sizeof(why));
    } else {
        watch_start(e);
        return;
    }
    free(body);
    if (!e->sreq)
        sess_fail(e, why);
}

/* ---- the watchdog ---- */

static void on_probe(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct adm_etcd *e = arg;
    char why[ERR_LEN], msg[ERR_LEN + 32];
    json_t *o;

    e->sreq = NULL;
    if (!(o = answer(e, status, body, len, err, why, sizeof(why))) || status != 200) {
        json_decref(o);
        e->st.watchdog_trips++;
        snprintf(msg, sizeof(msg), "watchdog: the probe failed: %s", why);
        sess_fail(e, msg);
        return;
    }
    /* the prefix's most recently modified key */
    if (jint(json_array_get(json_object_get(o, "kvs"), 0), "mod_revision") > e->last) {
        e->suspect = 1;
        e->suspect_base = e->last;
    }
    json_decref(o);
    dog_arm(e);
}

/*
 * The watch heard nothing for watch_idle_ms. etcd 3.4 counts a count_only
 * range before min_mod_revision filters it (the count is the whole
 * prefix's), so the probe asks instead for the one key of the prefix
 * modified last (limit 1, sorted by mod_revision, keys only): a
 * mod_revision past the last delivered one is a change the watch owes.
 */
static void on_dog(evutil_socket_t fd, short what, void *arg)
{
    struct adm_etcd *e = arg;
    char why[ERR_LEN];
    char *body;

    (void)fd;
    (void)what;
    if (e->sess != S_UP)
        return;
    if (e->suspect) {
        e->st.watchdog_trips++;
        snprintf(why, sizeof(why),
                 "%s: watchdog: the watch did not deliver changes after revision %" PRId64,
                 e->eps[e->ep].url, e->suspect_base);
        sess_fail(e, why);
        return;
    }
    if (e->sreq) {
        dog_arm(e);
        return;
    }
    body = jdump(json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "key", e->key64, "range_end", e->end64,
                           "limit", "1", "sort_order", "DESCEND", "sort_target", "MOD", "keys_only",
                           1));
    e->sreq = request(e, "/v3/kv/range", body, NULL, on_probe, e, why, sizeof(why));
    free(body);
    if (!e->sreq) {
        e->st.watchdog_trips++;
        sess_fail(e, why);
    }
}

/* ---- writes ---- */

static void wop_free(struct wop *w)
{
    etcd_http_cancel(w->req);
    event_free(w->deadline);
    free(w->body);
    free(w);
}

/* Takes <w> off its list and frees it. */
static void wop_remove(struct adm_etcd *e, struct wop *w)
{
    if (w->req) {
        TAILQ_REMOVE(&e->inflight, w, link);
        e->ninflight--;
    } else {
        TAILQ_REMOVE(&e->queued, w, link);
    }
    e->nwrites--;
    wop_free(w);
}

static void wop_finish(struct adm_etcd *e, struct wop *w, int ok, int64_t rev, const char *why)
{
    adm_etcd_done_fn done = w->done;
    void *arg = w->arg;

    wop_remove(e, w);
    done(arg, ok, rev, why);
    writes_pump(e);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct wop *w = arg;
    char why[ERR_LEN];

    (void)fd;
    (void)what;
    snprintf(why, sizeof(why), "%s", w->fail ? w->fail : "etcd did not answer in time");
    if (!w->fail && w->e->up != 1)
        snprintf(why, sizeof(why), "etcd is unreachable (%s)", w->e->eps[w->e->ep].url);
    wop_finish(w->e, w, -1, 0, why);
}

static void on_write(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct wop *w = arg;
    struct adm_etcd *e = w->e;
    char why[ERR_LEN];
    json_t *o;
    int64_t rev;
    int ok;

    w->req = NULL; /* freed after this returns */
    TAILQ_REMOVE(&e->inflight, w, link);
    e->ninflight--;
    TAILQ_INSERT_HEAD(&e->queued, w, link);
    if (!(o = answer(e, status, body, len, err, why, sizeof(why)))) {
        wop_finish(e, w, -1, 0, why);
        return;
    }
    if (status != 200) { /* an invalid token: take a new one, try again once */
        json_decref(o);
        if (w->auth_retried || !e->username) {
            wop_finish(e, w, -1, 0, why);
            return;
        }
        w->auth_retried = 1;
        free(e->token);
        e->token = NULL;
        if (e->sess == S_UP) {
            /* a watchdog probe in flight gives way (the next period
             * probes again): the writes need the token now */
            e->sess = S_AUTH; /* the watch keeps running meanwhile */
            e->reauth = 1;
            event_del(e->dog_t);
            sess_next(e);
        }
        return;
    }
    ok = json_is_true(json_object_get(o, "succeeded")) ? 1 : 0; /* absent: false */
    rev = header_rev(o);
    json_decref(o);
    wop_finish(e, w, ok, rev, NULL);
}

static void writes_pump(struct adm_etcd *e)
{
    struct wop *w;
    char why[ERR_LEN];

    while (e->sess == S_UP && (!e->username || e->token) && e->ninflight < WRITES_INFLIGHT &&
           (w = TAILQ_FIRST(&e->queued)) != NULL && !w->fail) {
        w->req = request(e, "/v3/kv/txn", w->body, NULL, on_write, w, why, sizeof(why));
        TAILQ_REMOVE(&e->queued, w, link);
        if (!w->req) {
            /* fails from the loop, never inside the caller's call */
            struct timeval now = {0, 0};
            w->fail = "cannot start the request";
            TAILQ_INSERT_TAIL(&e->queued, w, link);
            event_add(w->deadline, &now);
            continue;
        }
        TAILQ_INSERT_TAIL(&e->inflight, w, link);
        e->ninflight++;
    }
}

static char *txn_body(const struct adm_etcd *e, const char *key64, const char *val64,
                      enum adm_etcd_cmp cmp, int64_t rev)
{
    json_t *t = json_object(), *cmps = json_array(), *op;
    char revs[32];

    (void)e;
    snprintf(revs, sizeof(revs), "%" PRId64, rev);
    if (cmp == ADM_ETCD_ABSENT)
        json_array_append_new(cmps, json_pack("{s:s,s:s,s:s,s:s}", "key", key64, "target",
                                              "VERSION", "result", "EQUAL", "version", "0"));
    if (cmp == ADM_ETCD_EXISTS || cmp == ADM_ETCD_EXISTS_MOD_BELOW)
        json_array_append_new(cmps, json_pack("{s:s,s:s,s:s,s:s}", "key", key64, "target",
                                              "VERSION", "result", "GREATER", "version", "0"));
    if (cmp == ADM_ETCD_MOD_BELOW || cmp == ADM_ETCD_EXISTS_MOD_BELOW)
        json_array_append_new(cmps, json_pack("{s:s,s:s,s:s,s:s}", "key", key64, "target", "MOD",
                                              "result", "LESS", "mod_revision", revs));
    if (val64)
        op = json_pack("{s:{s:s,s:s}}", "request_put", "key", key64, "value", val64);
    else
        op = json_pack("{s:{s:s}}", "request_delete_range", "key", key64);
    if (!t || !cmps || !op || json_object_set_new(t, "compare", cmps) < 0 ||
        json_object_set_new(t, "success", json_pack("[o]", op)) < 0) {
        json_decref(t);
        return NULL;
    }
    return jdump(t);
}

uint64_t adm_etcd_write(struct adm_etcd *e, const char *key, const char *value, size_t vallen,
                        enum adm_etcd_cmp cmp, int64_t rev, adm_etcd_done_fn done, void *arg)
{
    struct wop *w = calloc(1, sizeof(*w));
    char *key64 = b64_encode(key, strlen(key));
    char *val64 = value ? b64_encode(value, vallen) : NULL;
    struct timeval tv = {e->request_ms / 1000, (e->request_ms % 1000) * 1000};

    if (!w || !key64 || (value && !val64) || !(w->body = txn_body(e, key64, val64, cmp, rev)) ||
        !(w->deadline = evtimer_new(e->base, on_deadline, w)))
        goto fail;
    free(key64);
    free(val64);
    w->e = e;
    w->handle = ++e->next_handle;
    w->done = done;
    w->arg = arg;
    if (e->nwrites >= WRITES_MAX) {
        w->fail = "too many writes pending";
        tv.tv_sec = tv.tv_usec = 0;
    }
    TAILQ_INSERT_TAIL(&e->queued, w, link);
    e->nwrites++;
    event_add(w->deadline, &tv);
    writes_pump(e);
    return w->handle;
fail:
    free(key64);
    free(val64);
    if (w)
        wop_free(w);
    return 0;
}

void adm_etcd_cancel(struct adm_etcd *e, uint64_t handle)
{
    struct wop *w;

    TAILQ_FOREACH(w, &e->queued, link)
    if (w->handle == handle) {
        wop_remove(e, w);
        return;
    }
    TAILQ_FOREACH(w, &e->inflight, link)
    if (w->handle == handle) {
        wop_remove(e, w);
        writes_pump(e);
        return;
    }
}

/* ---- life ---- */

/* The key after every key that starts with <p>: its last byte that is not
 * 0xff, plus one ("\0" when none: to the end of the key space). */
static int prefix_range(struct adm_etcd *e, const char *p)
{
    size_t n = strlen(p);
    char *end = malloc(n + 1);

    if (!end)
        return -1;
    memcpy(end, p, n + 1);
    while (n > 0 && (unsigned char)end[n - 1] == 0xff)
        n--;
    if (n > 0)
        end[n - 1]++;
    e->key64 = b64_encode(*p ? p : "", *p ? strlen(p) : 1); /* "" is the key "\0" */
    e->end64 = b64_encode(n ? end : "", n ? n : 1);
    free(end);
    return e->key64 && e->end64 ? 0 : -1;
}

static SSL_CTX *tls_ctx_new(const struct adm_etcd_opts *o, char *why, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    const char *what = "cannot create an SSL_CTX";

    if (!ctx)
        goto fail;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    what = o->ca_file ? "cannot read ca_file" : "cannot load the system CA store";
    if ((o->ca_file ? SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL)
                    : SSL_CTX_set_default_verify_paths(ctx)) != 1)
        goto fail;
    what = "cannot read cert_file";
    if (o->cert_file && SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1)
        goto fail;
    what = "cannot read key_file, or it does not match cert_file";
    if (o->key_file && (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
                        SSL_CTX_check_private_key(ctx) != 1))
        goto fail;
    return ctx;
fail:
    snprintf(why, cap, "etcd TLS: %s", what);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return NULL;
}

static int opts_copy(struct adm_etcd *e, const struct adm_etcd_opts *o, char *why, size_t cap)
{
    int tls = 0;

    if (!o->nendpoints || !o->prefix) {
        snprintf(why, cap, "etcd: no endpoints or no prefix");
        return -1;
    }
    if (!(e->eps = calloc(o->nendpoints, sizeof(*e->eps))))
        goto oom;
    for (; e->neps < o->nendpoints; e->neps++) {
        if (etcd_ep_parse(&e->eps[e->neps], o->endpoints[e->neps], why, cap) < 0)
            return -1;
        tls |= e->eps[e->neps].tls;
    }
    if (tls && !(e->ssl_ctx = tls_ctx_new(o, why, cap)))
        return -1;
    if (prefix_range(e, o->prefix) < 0)
        goto oom;
    if (o->username && (!(e->username = strdup(o->username)) ||
                        !(e->password = strdup(o->password ? o->password : ""))))
        goto oom;
    e->dial_ms = o->dial_timeout_ms ? o->dial_timeout_ms : 2000;
    e->request_ms = o->request_timeout_ms ? o->request_timeout_ms : 5000;
    e->idle_ms = o->watch_idle_ms ? o->watch_idle_ms : 10000;
    e->backoff_min = o->backoff_min_ms ? o->backoff_min_ms : 100;
    e->backoff_max = o->backoff_max_ms ? o->backoff_max_ms : 5000;
    if (e->backoff_max < e->backoff_min)
        e->backoff_max = e->backoff_min;
    return 0;
oom:
    snprintf(why, cap, "out of memory");
    return -1;
}

/* An endpoint named by a host name is looked up with evdns on the loop
 * (etcd_http_dns_new); addresses need none. */
static int dns_new(struct adm_etcd *e, char *why, size_t cap)
{
    unsigned char a[16];
    size_t i;

    for (i = 0; i < e->neps; i++)
        if (evutil_inet_pton(AF_INET, e->eps[i].host, a) != 1 &&
            evutil_inet_pton(AF_INET6, e->eps[i].host, a) != 1)
            break;
    if (i == e->neps)
        return 0; /* addresses only */
    if (!(e->dns = etcd_http_dns_new(e->base))) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    return 0;
}

struct adm_etcd *adm_etcd_new(struct event_base *base, const struct adm_etcd_opts *o,
                              const struct adm_etcd_hooks *h, char *why, size_t cap)
{
    struct adm_etcd *e = calloc(1, sizeof(*e));

    if (!e) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    e->base = base;
    e->h = *h;
    e->up = -1;
    TAILQ_INIT(&e->queued);
    TAILQ_INIT(&e->inflight);
    if (opts_copy(e, o, why, cap) < 0)
        goto fail;
    if (!(e->backoff_t = evtimer_new(base, on_backoff, e)) ||
        !(e->dog_t = evtimer_new(base, on_dog, e))) {
        snprintf(why, cap, "out of memory");
        goto fail;
    }
    e->st.endpoint = e->eps[0].url;
    if (dns_new(e, why, cap) < 0)
        goto fail;
    return e;
fail:
    adm_etcd_free(e);
    return NULL;
}

void adm_etcd_start(struct adm_etcd *e)
{
    if (e->sess != S_IDLE)
        return;
    e->sess = S_AUTH;
    sess_next(e);
}

void adm_etcd_free(struct adm_etcd *e)
{
    struct wop *w;

    if (!e)
        return;
    sess_drop(e);
    while ((w = TAILQ_FIRST(&e->queued)) != NULL)
        wop_remove(e, w);
    while ((w = TAILQ_FIRST(&e->inflight)) != NULL)
        wop_remove(e, w);
    if (e->backoff_t)
        event_free(e->backoff_t);
    if (e->dog_t)
        event_free(e->dog_t);
    for (size_t i = 0; i < e->neps; i++)
        etcd_ep_clear(&e->eps[i]);
    free(e->eps);
    if (e->dns)
        etcd_http_dns_free(e->base, e->dns);
    SSL_CTX_free(e->ssl_ctx);
    free(e->key64);
    free(e->end64);
    free(e->username);
    if (e->password)
        OPENSSL_cleanse(e->password, strlen(e->password));
    free(e->password);
    free(e->token);
    free(e);
}

void adm_etcd_stats(const struct adm_etcd *e, struct adm_etcd_stats *st)
{
    *st = e->st;
    st->up = e->up == 1;
}
