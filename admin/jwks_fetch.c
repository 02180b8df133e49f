/*
 * jwks_fetch.c - a JWKS fetched from an https URL and refreshed on a timer
 * (jwks_fetch.h), with the admin's HTTP/1.1 client (etcd_http.c): one GET
 * on a connection of its own per fetch, the body bounded, the whole under
 * the timeout. A document is parsed only when its SHA-256 differs from the
 * last good one's, so an unchanged JWKS costs a request and a hash, and
 * the owner swaps nothing.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */

#include "admin/jwks_fetch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <openssl/evp.h>

#include "admin/etcd_int.h"
#include "admin/snapshot.h" /* adm_now_ms */

#define DEFAULT_REFRESH_MS 300000u
#define DEFAULT_RETRY_MS 5000u
#define DEFAULT_TIMEOUT_MS 5000u

struct adm_jwks_fetch {
    struct adm_jwks_fetch_conf conf;
    struct etcd_ep ep; /* host and port; ep.url is the URL as given */
    char *path;
    struct event *timer;
    struct etcd_http *req; /* the fetch under way, or NULL */
    struct adm_jwks *set;  /* the last good set, or NULL */
    char *doc;             /* its document (NULL: none, or out of memory) */
    size_t doc_len;
    unsigned char digest[32];
    int have_digest;
    unsigned wait_ms; /* the next wait after a failure */
    double due_at_ms; /* when the timer fires (monotonic), while pending */
    int failing;      /* the last fetch failed */
};

static void schedule(struct adm_jwks_fetch *f, unsigned ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    f->due_at_ms = adm_now_ms() + ms;
    event_add(f->timer, &tv);
}

/* A failed fetch: the set stays, the next try comes sooner. The callback is
 * the last thing done (it may free <f>). */
static void fetch_failed(struct adm_jwks_fetch *f, const char *why)
{
    f->failing = 1;
    schedule(f, f->wait_ms);
    f->wait_ms = f->wait_ms * 2 < f->conf.refresh_ms ? f->wait_ms * 2 : f->conf.refresh_ms;
    f->conf.cb(f->conf.arg, NULL, why);
}

/* <set>, parsed from <doc> of SHA-256 <digest>, as the last good set. */
static void keep(struct adm_jwks_fetch *f, struct adm_jwks *set, const unsigned char digest[32],
                 const char *doc, size_t len)
{
    adm_jwks_free(f->set);
    f->set = set;
    memcpy(f->digest, digest, 32);
    f->have_digest = 1;
    free(f->doc); /* kept for an upgrade to carry; without it, the new process fetches */
    if ((f->doc = malloc(len ? len : 1)))
        memcpy(f->doc, doc, len);
    f->doc_len = len;
}

static void on_done(void *arg, int status, const char *body, size_t len, const char *err)
{
    struct adm_jwks_fetch *f = arg;
    unsigned char digest[32];
    char why[512], perr[256];
    struct adm_jwks *set;

    f->req = NULL; /* etcd_http frees it after this returns */
    if (err) {
        fetch_failed(f, err);
        return;
    }
    if (status != 200) {
        snprintf(why, sizeof(why), "%s: HTTP status %d", f->ep.url, status);
        fetch_failed(f, why);
        return;
    }
    if (!EVP_Digest(body, len, digest, NULL, EVP_sha256(), NULL)) {
        fetch_failed(f, "out of memory");
        return;
    }
    if (f->have_digest && memcmp(digest, f->digest, sizeof(digest)) == 0) {
        /* the same document: the set in use is confirmed, nothing to publish */
        f->wait_ms = f->conf.retry_ms;
        f->failing = 0;
        schedule(f, f->conf.refresh_ms);
        f->conf.cb(f->conf.arg, NULL, NULL);
        return;
    }
    if (!(set = adm_jwks_parse(body, len, perr, sizeof(perr)))) {
        snprintf(why, sizeof(why), "%s: %s", f->ep.url, perr);
        fetch_failed(f, why);
        return;
    }
    keep(f, set, digest, body, len);
    f->wait_ms = f->conf.retry_ms;
    f->failing = 0;
    schedule(f, f->conf.refresh_ms);
    f->conf.cb(f->conf.arg, set, NULL);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct adm_jwks_fetch *f = arg;
    struct etcd_http_req r = {
        .base = f->conf.base,
        .ssl_ctx = f->conf.ssl_ctx,
        .dns = f->conf.dns,
        .ep = &f->ep,
        .path = f->path,
        .body_max = f->conf.max_bytes,
        .dial_ms = f->conf.timeout_ms,
        .request_ms = f->conf.timeout_ms,
        .done = on_done,
        .arg = f,
    };
    char why[512];

    (void)fd;
    (void)what;
    if (f->req)
        return; /* cannot happen: the timer is armed only once a fetch ended */
    f->req = etcd_http_start(&r, why, sizeof(why));
    if (!f->req)
        fetch_failed(f, why);
}

/* <refresh_ms>, <retry_ms> and <timeout_ms> into <c>, 0 taking the
 * defaults; the first wait after a failure never exceeds the refresh. */
static void set_times(struct adm_jwks_fetch_conf *c, unsigned refresh_ms, unsigned retry_ms,
                      unsigned timeout_ms)
{
    c->refresh_ms = refresh_ms ? refresh_ms : DEFAULT_REFRESH_MS;
    c->retry_ms = retry_ms ? retry_ms : DEFAULT_RETRY_MS;
    if (c->retry_ms > c->refresh_ms)
        c->retry_ms = c->refresh_ms;
    c->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

struct adm_jwks_fetch *adm_jwks_fetch_new(const struct adm_jwks_fetch_conf *conf, char *err,
                                          size_t cap)
{
    struct adm_jwks_fetch *f = calloc(1, sizeof(*f));

    if (!f) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    f->conf = *conf;
    f->conf.url = NULL; /* f->ep.url is the copy */
    set_times(&f->conf, conf->refresh_ms, conf->retry_ms, conf->timeout_ms);
    if (!f->conf.max_bytes || f->conf.max_bytes > ADM_JWKS_MAX_BYTES)
        f->conf.max_bytes = ADM_JWKS_MAX_BYTES;
    f->wait_ms = f->conf.retry_ms;
    if (adm_jwks_url_split(conf->url, &f->ep, &f->path, err, cap) < 0) {
        free(f);
        return NULL;
    }
    f->timer = evtimer_new(conf->base, on_timer, f);
    if (!f->timer) {
        snprintf(err, cap, "out of memory");
        adm_jwks_fetch_free(f);
        return NULL;
    }
    schedule(f, 0);
    return f;
}

struct adm_jwks *adm_jwks_fetch_current(const struct adm_jwks_fetch *f)
{
    return f->set;
}

const char *adm_jwks_fetch_doc(const struct adm_jwks_fetch *f, size_t *len)
{
    *len = f->doc_len;
    return f->set ? f->doc : NULL;
}

int adm_jwks_fetch_seed(struct adm_jwks_fetch *f, const char *doc, size_t len, int replace,
                        char *err, size_t cap)
{
    unsigned char digest[32];
    struct adm_jwks *set;

    if (f->set && !replace)
        return 0;
    if (len > f->conf.max_bytes) {
        snprintf(err, cap, "a document of %zu bytes, over the bound", len);
        return -1;
    }
    if (!EVP_Digest(doc, len, digest, NULL, EVP_sha256(), NULL)) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    if (f->set && f->have_digest && memcmp(digest, f->digest, sizeof(digest)) == 0)
        return 0; /* the same document */
    if (!(set = adm_jwks_parse(doc, len, err, cap)))
        return -1;
    keep(f, set, digest, doc, len);
    return 1;
}

/* Milliseconds until the pending fetch (UINT_MAX: none is). */
static unsigned due_ms(const struct adm_jwks_fetch *f)
{
    double ms;

    if (!event_pending(f->timer, EV_TIMEOUT, NULL))
        return UINT_MAX;
    ms = f->due_at_ms - adm_now_ms(); /* schedule()'s own note: no wall clock */
    return ms <= 0 ? 0 : ms >= UINT_MAX ? UINT_MAX : (unsigned)ms;
}

void adm_jwks_fetch_tune(struct adm_jwks_fetch *f, unsigned refresh_ms, unsigned timeout_ms)
{
    unsigned was = f->conf.refresh_ms;

    set_times(&f->conf, refresh_ms, 0, timeout_ms);
    if (f->wait_ms > f->conf.retry_ms)
        f->wait_ms = f->conf.retry_ms;
    /* re-arming a pending timer replaces its deadline: only ever a sooner
     * one (not the first fetch, due at once, put off by a refresh) */
    if (f->conf.refresh_ms < was && !f->req && !f->failing && f->conf.refresh_ms < due_ms(f))
        schedule(f, f->conf.refresh_ms);
}

void adm_jwks_fetch_now(struct adm_jwks_fetch *f)
{
    if (!f->req)
        schedule(f, 0);
}

void adm_jwks_fetch_free(struct adm_jwks_fetch *f)
{
    if (!f)
        return;
    etcd_http_cancel(f->req);
    if (f->timer)
        event_free(f->timer);
    adm_jwks_free(f->set);
    free(f->doc);
    etcd_ep_clear(&f->ep);
    free(f->path);
    free(f);
}
