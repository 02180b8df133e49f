/*
 * jwks_remote.c - the jwt policies' remote key sets (jwks_remote.h): the
 * fetchers by URL and CA, the policy states each one serves, the sets
 * they replaced waiting for their grace period, and a tick that frees
 * those and answers the workers' requests for an early fetch.
 *
 * Why publishing is safe. The admin thread is the only writer of a
 * state's <keys>: it stores the new set (release), then adm_swap_fence
 * publishes a new epoch and wakes every worker. A worker acknowledges an
 * epoch only between request steps (adm_swap_ack), and reads <keys> only
 * inside one (the jwt policy's request phase), with an acquire load. Once
 * every worker has acknowledged the fence's epoch, none is still using
 * the set it loaded before, and none can load it again (its acquire of
 * the epoch orders its later loads after the store): the old set is
 * freed then, on this thread. Sets hold their keys by reference, so a
 * merge copies no key material.
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/jwks_remote.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "admin/errors.h"
#include "admin/etcd_int.h"
#include "admin/jwks_fetch.h"
#include "admin/jwks_save.h"
#include "admin/policy_types.h"
#include "admin/snapshot.h"

#define TICK_MS 100

struct adm_rjwks_sub {
    struct adm_jwt_state *s;
    const struct adm_jwt_conf *c;
    struct fetcher *fe;
    struct adm_rjwks_sub *next;
};

/* One URL under one CA, and the policy states it serves. */
struct fetcher {
    char *key; /* adm_jwt_conf.fetch_key */
    char *url;
    SSL_CTX *ctx;
    struct adm_jwks_fetch *f;
    struct adm_rjwks_sub *subs;
    unsigned long long ok, failed, early;
    double last_ok_ms; /* adm_now_ms() of the last good fetch */
    double early_ms;   /* of the last early fetch; 0: none */
    int failing;       /* in a streak of failures: logged at its start */
    int save_owed;     /* a set to save once the process serves */
    int save_failing;  /* saves failing: logged at the streak's start */
    struct fetcher *next;
};

/* A replaced set, freed once every worker acknowledged epoch <seq>. */
struct retired {
    struct adm_jwks *set;
    uint64_t seq;
    struct retired *next;
};

static struct {
    int on;
    struct event_base *base;
    struct adm_swap *sw;
    struct adm_rjwks_hooks hooks;
    struct evdns_base *dns; /* made with the first fetcher of a host name */
    struct event *tick;
    struct fetcher *fetchers;
    struct retired *retired;
    int serving; /* adm_rjwks_serving */
} R;

static void say(int warn, const char *fmt, ...) ADM_PRINTF(2, 3);
static void say(int warn, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (!R.hooks.log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    R.hooks.log(R.hooks.arg, warn, line);
}

/* The set a policy with static keys <own> (may be NULL) verifies against
 * once its URL brought <url>: a new set holding both (a new id, so the
 * workers' token caches start afresh), or <url> itself when there are no
 * others. NULL when out of memory. */
static struct adm_jwks *combine(struct adm_jwks *own, struct adm_jwks *url)
{
    struct adm_jwks *set;

    if (!own)
        return adm_jwks_hold(url);
    if (!(set = adm_jwks_new()))
        return NULL;
    if (adm_jwks_merge(set, own) < 0 || adm_jwks_merge(set, url) < 0) {
        adm_jwks_free(set);
        return NULL;
    }
    return set;
}

/* Frees the retired sets whose grace period is over. */
static void reclaim(void)
{
    struct retired **pp = &R.retired;

    while (*pp) {
        struct retired *r = *pp;
        if (adm_swap_fenced(R.sw, r->seq)) {
            *pp = r->next;
            adm_jwks_free(r->set);
            free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* The new URL set <set> into every state <fe> serves. The replaced sets
 * are retired behind one fence. */
static void publish(struct fetcher *fe, struct adm_jwks *set)
{
    struct retired *batch = NULL, *r;
    uint64_t seq;

    for (struct adm_rjwks_sub *sub = fe->subs; sub; sub = sub->next) {
        struct adm_jwks *next = combine(sub->c->set, set), *old;
        if (!next || !(r = calloc(1, sizeof(*r)))) {
            adm_jwks_free(next);
            say(1, "jwks_url %s: out of memory: a policy keeps its previous keys", fe->url);
            continue;
        }
        old = atomic_load_explicit(&sub->s->keys, memory_order_relaxed);
        atomic_store_explicit(&sub->s->keys, next, memory_order_release);
        r->set = old; /* NULL (none yet) is freed as a no-op */
        r->next = batch;
        batch = r;
    }
    if (!batch)
        return;
    seq = adm_swap_fence(R.sw);
    while ((r = batch)) {
        batch = r->next;
        r->seq = seq;
        r->next = R.retired;
        R.retired = r;
    }
}

static const char *state_dir(void)
{
    return R.hooks.state_dir ? R.hooks.state_dir(R.hooks.arg) : NULL;
}

/* <fe>'s new set into the state directory, for the next start: now if the
 * process serves, else once it does (adm_rjwks_serving). */
static void save(struct fetcher *fe)
{
    char why[512];
    size_t len;
    const char *doc = adm_jwks_fetch_doc(fe->f, &len);

    fe->save_owed = !R.serving;
    if (!doc || fe->save_owed)
        return;
    if (adm_jwks_save(state_dir(), fe->key, fe->url, doc, len,
                      (adm_now_ms() - fe->last_ok_ms) / 1000.0, why, sizeof(why)) == 0) {
        fe->save_failing = 0;
        return;
    }
    if (!fe->save_failing) /* once a streak */
        say(1, "jwks_url %s: %s; a restart while it does not answer has no keys from it", fe->url,
            why);
    fe->save_failing = 1;
}

static void on_fetch(void *arg, struct adm_jwks *set, const char *err)
{
    struct fetcher *fe = arg;

    if (err) {
        size_t n = strlen(fe->url);
        fe->failed++;
        if (!strncmp(err, fe->url, n) && !strncmp(err + n, ": ", 2))
            err += n + 2; /* the line names the URL once */
        if (!fe->failing) /* once a streak: a retry every few seconds is no news */
            say(1, "jwks_url %s: %s; %s", fe->url, err,
                adm_jwks_fetch_current(fe->f)
                    ? "the last good key set stays in use"
                    : "no key set from it yet: tokens it would verify get 503");
        fe->failing = 1;
        return;
    }
    fe->ok++;
    fe->last_ok_ms = adm_now_ms();
    if (fe->failing)
        say(0, "jwks_url %s: fetched again", fe->url);
    fe->failing = 0;
    if (set) {
        say(0, "jwks_url %s: a new key set of %zu key%s", fe->url, adm_jwks_count(set),
            adm_jwks_count(set) == 1 ? "" : "s");
        publish(fe, set);
        save(fe);
    } else if (R.serving && adm_jwks_save_touch(state_dir(), fe->key) < 0) {
        save(fe);
    }
}

/* A client context verifying the JWKS server against <cas> (NULL: the
 * system's store); NULL with the reason in <why>. */
static SSL_CTX *client_ctx(const struct stack_st_X509 *cas, char *why, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    X509_STORE *store;
    int ok = ctx != NULL;

    if (ok) {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        store = SSL_CTX_get_cert_store(ctx);
        if (!cas)
            ok = SSL_CTX_set_default_verify_paths(ctx) == 1;
        for (int i = 0; ok && cas && i < sk_X509_num(cas); i++)
            ok = X509_STORE_add_cert(store, sk_X509_value(cas, i)) == 1;
    }
    if (!ok) {
        snprintf(why, cap, "cannot set up TLS for the fetch");
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    return ctx;
}

static void fetcher_free(struct fetcher *fe)
{
    adm_jwks_fetch_free(fe->f);
    SSL_CTX_free(fe->ctx);
    free(fe->key);
    free(fe->url);
    free(fe);
}

/* Whether <url> names its host rather than an address: then it is looked
 * up with evdns, not a getaddrinfo() that would hold the admin thread. */
static int names_host(const char *url)
{
    struct etcd_ep ep;
    unsigned char a[16];
    char *path = NULL, why[8];
    int named = 1;

    if (adm_jwks_url_split(url, &ep, &path, why, sizeof(why)) == 0) {
        named = evutil_inet_pton(AF_INET, ep.host, a) != 1 &&
                evutil_inet_pton(AF_INET6, ep.host, a) != 1;
        etcd_ep_clear(&ep);
        free(path);
    }
    return named;
}

/* The set the state directory kept for <fe>'s URL, if any, until a fetch
 * (a start while the JWKS server does not answer still verifies). */
static void take_saved(struct fetcher *fe)
{
    char why[512];
    double age_s = 0;
    size_t len = 0;
    char *doc = adm_jwks_saved(state_dir(), fe->key, &len, &age_s, why, sizeof(why));

    if (doc && age_s > ADM_JWKS_SAVED_MAX_AGE_S) {
        say(1,
            "jwks_url %s: the key set saved %.0f days ago is too old to use: tokens it would "
            "verify get 503 until a fetch",
            fe->url, age_s / 86400);
    } else if (doc && adm_jwks_fetch_seed(fe->f, doc, len, 0, why, sizeof(why)) > 0) {
        size_t n = adm_jwks_count(adm_jwks_fetch_current(fe->f));
        fe->last_ok_ms = adm_now_ms() - 1000.0 * age_s;
        say(0, "jwks_url %s: the key set saved %.0f s ago, of %zu key%s, until a fetch", fe->url,
            age_s, n, n == 1 ? "" : "s");
    } else if (why[0]) {
        say(1, "jwks_url %s: the saved key set is not used: %s", fe->url, why);
    }
    free(doc);
}

/* A fetcher for policy <c>, started (its first fetch from the loop). */
static struct fetcher *fetcher_new(const struct adm_jwt_conf *c)
{
    struct fetcher *fe = calloc(1, sizeof(*fe));
    char why[512];
    struct adm_jwks_fetch_conf fc = {
        .base = R.base,
        .url = c->url,
        .refresh_ms = c->refresh_s * 1000u,
        .timeout_ms = c->timeout_ms,
        .cb = on_fetch,
    };

    if (!fe || !(fe->key = strdup(c->fetch_key)) || !(fe->url = strdup(c->url)))
        goto fail;
    if (!R.dns && names_host(c->url) && !(R.dns = etcd_http_dns_new(R.base)))
        goto fail;
    if (!(fe->ctx = client_ctx(c->cas, why, sizeof(why))))
        goto fail_why;
    fc.ssl_ctx = fe->ctx;
    fc.dns = R.dns;
    fc.arg = fe;
    if (!(fe->f = adm_jwks_fetch_new(&fc, why, sizeof(why))))
        goto fail_why;
    say(0, "jwks_url %s: fetching every %u s", c->url, c->refresh_s);
    take_saved(fe);
    return fe;
fail:
    snprintf(why, sizeof(why), "out of memory");
fail_why:
    say(1, "jwks_url %s: %s", c->url, why);
    if (fe)
        fetcher_free(fe);
    return NULL;
}

/* <fe>'s refresh is the shortest its policies ask for, its timeout the
 * longest. */
static void retune(struct fetcher *fe)
{
    unsigned refresh_s = 0, timeout_ms = 0;

    for (const struct adm_rjwks_sub *sub = fe->subs; sub; sub = sub->next) {
        if (!refresh_s || sub->c->refresh_s < refresh_s)
            refresh_s = sub->c->refresh_s;
        if (sub->c->timeout_ms > timeout_ms)
            timeout_ms = sub->c->timeout_ms;
    }
    adm_jwks_fetch_tune(fe->f, refresh_s * 1000u, timeout_ms);
}

/* Worker requests for an early fetch, at most one per ADM_RJWKS_EARLY_S
 * a fetcher; a request within that time is dropped. */
static void early_fetches(double now)
{
    for (struct fetcher *fe = R.fetchers; fe; fe = fe->next) {
        int want = 0;
        for (struct adm_rjwks_sub *sub = fe->subs; sub; sub = sub->next)
            if (atomic_load_explicit(&sub->s->want_fetch, memory_order_relaxed)) {
                atomic_store_explicit(&sub->s->want_fetch, 0, memory_order_relaxed);
                want = 1;
            }
        if (want && (!fe->early_ms || now - fe->early_ms >= ADM_RJWKS_EARLY_S * 1000.0)) {
            fe->early_ms = now;
            fe->early++;
            adm_jwks_fetch_now(fe->f);
        }
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    reclaim();
    early_fetches(adm_now_ms());
}

static int attach(struct adm_jwt_state *s, const struct adm_jwt_conf *c);
static void detach(struct adm_jwt_state *s);
static const struct adm_jwtp_remote ops = {attach, detach};

int adm_rjwks_start(struct event_base *base, struct adm_swap *sw,
                    const struct adm_rjwks_hooks *hooks)
{
    struct timeval tv = {0, TICK_MS * 1000};

    memset(&R, 0, sizeof(R));
    R.base = base;
    R.sw = sw;
    R.hooks = *hooks;
    if (!(R.tick = event_new(base, -1, EV_PERSIST, on_tick, NULL)) || event_add(R.tick, &tv) < 0) {
        if (R.tick)
            event_free(R.tick);
        R.tick = NULL;
        return -1;
    }
    R.on = 1;
    adm_jwtp_set_remote(&ops);
    return 0;
}

void adm_rjwks_stop(void)
{
    struct retired *r;
    struct fetcher *fe;

    if (!R.on)
        return;
    adm_jwtp_set_remote(NULL);
    while ((fe = R.fetchers)) {
        R.fetchers = fe->next;
        for (struct adm_rjwks_sub *sub; (sub = fe->subs);) {
            fe->subs = sub->next;
            sub->s->sub = NULL;
            free(sub);
        }
        fetcher_free(fe);
    }
    while ((r = R.retired)) {
        R.retired = r->next;
        adm_jwks_free(r->set);
        free(r);
    }
    event_free(R.tick);
    if (R.dns)
        etcd_http_dns_free(R.base, R.dns);
    memset(&R, 0, sizeof(R));
}

static int attach(struct adm_jwt_state *s, const struct adm_jwt_conf *c)
{
    struct adm_rjwks_sub *sub;
    struct adm_jwks *have, *set;
    struct fetcher *fe;

    for (fe = R.fetchers; fe && strcmp(fe->key, c->fetch_key); fe = fe->next)
        ;
    if (!(sub = calloc(1, sizeof(*sub))))
        return -1;
    if (!fe) {
        if (!(fe = fetcher_new(c))) {
            free(sub);
            return -1;
        }
        fe->next = R.fetchers;
        R.fetchers = fe;
    }
    *sub = (struct adm_rjwks_sub){.s = s, .c = c, .fe = fe, .next = fe->subs};
    fe->subs = sub;
    s->sub = sub;
    retune(fe);
    if (!(have = adm_jwks_fetch_current(fe->f)))
        return 0;
    /* no worker sees <s> yet: its set is replaced and freed at once */
    if (!(set = combine(c->set, have)))
        return -1; /* the caller frees <s>, detaching it */
    adm_jwks_free(atomic_load_explicit(&s->keys, memory_order_relaxed));
    atomic_store_explicit(&s->keys, set, memory_order_relaxed);
    return 0;
}

static void detach(struct adm_jwt_state *s)
{
    struct adm_rjwks_sub *sub = s->sub, **pp;
    struct fetcher *fe, **fp;

    if (!sub)
        return;
    fe = sub->fe;
    for (pp = &fe->subs; *pp != sub; pp = &(*pp)->next)
        ;
    *pp = sub->next;
    s->sub = NULL;
    free(sub);
    if (fe->subs) {
        retune(fe);
        return;
    }
    for (fp = &R.fetchers; *fp != fe; fp = &(*fp)->next)
        ;
    *fp = fe->next;
    say(0, "jwks_url %s: no policy names it any more: fetching stops", fe->url);
    if (R.serving)
        adm_jwks_save_forget(state_dir(), fe->key);
    fetcher_free(fe);
}

void adm_rjwks_serving(int on)
{
    const char **keys;
    size_t n = 0;

    R.serving = on;
    if (!on)
        return;
    for (struct fetcher *fe = R.fetchers; fe; fe = fe->next, n++)
        if (fe->save_owed)
            save(fe);
    /* what an earlier run saved for URLs this config does not name */
    if ((keys = malloc((n ? n : 1) * sizeof(*keys)))) {
        n = 0;
        for (struct fetcher *fe = R.fetchers; fe; fe = fe->next)
            keys[n++] = fe->key;
        adm_jwks_save_prune(state_dir(), keys, n);
        free(keys);
    }
}

json_t *adm_rjwks_export(void)
{
    json_t *o = json_object();
    const char *doc;
    size_t len, total = 0;

    for (const struct fetcher *fe = R.fetchers; o && fe; fe = fe->next) {
        json_t *d;
        if (!(doc = adm_jwks_fetch_doc(fe->f, &len)))
            continue;                               /* none yet */
        if ((total += len) > ADM_RJWKS_CARRY_MAX) { /* the hand-over's frame has a bound */
            say(1,
                "jwks_url %s: not carried by the upgrade (over %d MiB of key sets): the new "
                "process takes its saved set or fetches it",
                fe->url, ADM_RJWKS_CARRY_MAX >> 20);
            continue;
        }
        if (!(d = json_stringn(doc, len)))
            continue; /* not UTF-8: the new process fetches it */
        json_object_set_new(
            o, fe->key,
            json_pack("{s:o,s:f}", "doc", d, "age_s", (adm_now_ms() - fe->last_ok_ms) / 1000.0));
    }
    return o;
}

void adm_rjwks_import(const json_t *carried)
{
    char why[256];

    for (struct fetcher *fe = R.fetchers; fe; fe = fe->next) {
        const json_t *e = json_object_get(carried, fe->key);
        const json_t *doc = json_object_get(e, "doc");
        int r;

        if (!json_is_string(doc))
            continue;
        /* the running process's set in use: newer than any it saved, or
         * the same (a save that failed leaves an older file) */
        r = adm_jwks_fetch_seed(fe->f, json_string_value(doc), json_string_length(doc), 1, why,
                                sizeof(why));
        if (r < 0) {
            say(1, "jwks_url %s: the running process's key set was not taken: %s", fe->url, why);
            continue;
        }
        if (r == 0)
            continue;
        fe->last_ok_ms = adm_now_ms() - 1000.0 * json_number_value(json_object_get(e, "age_s"));
        say(0, "jwks_url %s: the running process's key set of %zu key%s, until a fetch", fe->url,
            adm_jwks_count(adm_jwks_fetch_current(fe->f)),
            adm_jwks_count(adm_jwks_fetch_current(fe->f)) == 1 ? "" : "s");
        publish(fe, adm_jwks_fetch_current(fe->f));
        save(fe); /* owed: written once this process serves */
    }
}

/* <s> as a Prometheus label value: '"' and '\' escaped (a URL has no
 * newline). */
static void label(struct evbuffer *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            evbuffer_add(b, "\\", 1);
        evbuffer_add(b, s, 1);
    }
}

/* One line of metric <name> for <fe>, value <v>. */
static void line(struct evbuffer *b, const char *name, const struct fetcher *fe, const char *extra,
                 const char *v)
{
    const char *ca = strrchr(fe->key, ' ');

    evbuffer_add_printf(b, "%s{url=\"", name);
    label(b, fe->url);
    evbuffer_add_printf(b, "\",ca=\"%.12s\"%s} %s\n", ca ? ca + 1 : "", extra, v);
}

void adm_rjwks_metrics(struct evbuffer *b)
{
    static const char *const help[][3] = {
        {"switchyard_jwks_fetches_total", "counter",
         "Fetches of a jwt policy's jwks_url, by result (ok: a set, new or the same)."},
        {"switchyard_jwks_keys", "gauge", "Keys in the last good set of a jwks_url (0: none yet)."},
        {"switchyard_jwks_age_seconds", "gauge",
         "Seconds since the last good fetch of a jwks_url (-1: none yet)."},
        {"switchyard_jwks_early_fetches_total", "counter",
         "Fetches made early because a token named a kid the set lacks."},
    };
    double now = adm_now_ms();
    char v[64];

    for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++) {
        evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", help[i][0], help[i][2], help[i][0],
                            help[i][1]);
        for (const struct fetcher *fe = R.fetchers; fe; fe = fe->next) {
            const struct adm_jwks *set = adm_jwks_fetch_current(fe->f);
            switch (i) {
            case 0:
                snprintf(v, sizeof(v), "%llu", fe->ok);
                line(b, help[i][0], fe, ",result=\"ok\"", v);
                snprintf(v, sizeof(v), "%llu", fe->failed);
                line(b, help[i][0], fe, ",result=\"failed\"", v);
                break;
            case 1:
                snprintf(v, sizeof(v), "%zu", adm_jwks_count(set));
                line(b, help[i][0], fe, "", v);
                break;
            case 2:
                snprintf(v, sizeof(v), "%.3f", set ? (now - fe->last_ok_ms) / 1000.0 : -1.0);
                line(b, help[i][0], fe, "", v);
                break;
            default:
                snprintf(v, sizeof(v), "%llu", fe->early);
                line(b, help[i][0], fe, "", v);
            }
        }
    }
}
