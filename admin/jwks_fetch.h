/*
 * jwks_fetch.h - a JWKS kept fresh from an https URL (the jwt policy's
 * "jwks_url"), on the admin thread's libevent loop. Never logs: each
 * fetch's outcome goes to the owner's callback.
 *
 * It GETs the URL (the project's HTTP/1.1 client, etcd_http.c, over TLS
 * with the server's certificate and name checked), bounded in size and
 * time, parses the body with adm_jwks_parse, and keeps the last good set:
 * a failed fetch (unreachable, a timeout, not 200, too large, a document
 * that does not parse) changes nothing and is retried sooner, the wait
 * doubling from retry_ms up to refresh_ms. The owner publishes a new set to
 * the workers (jwks_remote.h: key sets never change under them).
 */
#ifndef SY_ADMIN_JWKS_FETCH_H
#define SY_ADMIN_JWKS_FETCH_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "admin/jwt.h"

struct event_base;
struct evdns_base;
struct adm_jwks_fetch;

/* A fetch's outcome, after every fetch. <set> is the new key set (borrowed:
 * adm_jwks_hold it to keep it past the call) when a fetch brought a
 * document different from the last good one; NULL with <err> saying why
 * ("https://...: timed out waiting for the answer") when it failed; both
 * NULL when it brought the same bytes again (the set in use is confirmed:
 * nothing to publish). */
typedef void (*adm_jwks_fetch_cb)(void *arg, struct adm_jwks *set, const char *err);

struct adm_jwks_fetch_conf {
    struct event_base *base;
    SSL_CTX *ssl_ctx;       /* a client context that verifies the server */
    struct evdns_base *dns; /* resolves the host without blocking; NULL: an address */
    const char *url;        /* https://host[:port]/path (copied) */
    unsigned refresh_ms;    /* between good fetches (e.g. 300000) */
    unsigned retry_ms;      /* the first wait after a failed one (e.g. 5000) */
    unsigned timeout_ms;    /* to connect, then again for the whole answer */
    size_t max_bytes;       /* the most bytes of a document; 0: ADM_JWKS_MAX_BYTES */
    adm_jwks_fetch_cb cb;
    void *arg;
};

/* Checks <url> (https, a host, an optional port, a path): 0, or -1 with the
 * reason in <err>. For the config parser (jwks_url.c). */
int adm_jwks_url_check(const char *url, char *err, size_t cap);
/* adm_jwks_url_check, splitting <url> into <ep> and <*path> (both owned by
 * the caller: etcd_ep_clear, free) for the fetcher. */
struct etcd_ep;
int adm_jwks_url_split(const char *url, struct etcd_ep *ep, char **path, char *err, size_t cap);

/* Starts fetching (the first fetch at once, its callback from the loop,
 * never from inside this call). NULL with the reason in <err> when the URL
 * is not one or out of memory. */
struct adm_jwks_fetch *adm_jwks_fetch_new(const struct adm_jwks_fetch_conf *conf, char *err,
                                          size_t cap);

/* The last good key set (borrowed), or NULL before the first good fetch. */
struct adm_jwks *adm_jwks_fetch_current(const struct adm_jwks_fetch *f);

/* The document of the last good set (borrowed, <*len> bytes), or NULL:
 * what an upgrade carries to the new process. */
const char *adm_jwks_fetch_doc(const struct adm_jwks_fetch *f, size_t *len);
/* Takes <doc> (a JWKS saved, or fetched from the same URL by another
 * process) as the last good set when there is none yet, or with <replace>
 * when it is another document: 1; 0 when nothing changed; -1 with the
 * reason in <err> when it does not parse. Fetching goes on as before: a
 * fetch that brings the same bytes publishes nothing. */
int adm_jwks_fetch_seed(struct adm_jwks_fetch *f, const char *doc, size_t len, int replace,
                        char *err, size_t cap);

/* New <refresh_ms> and <timeout_ms> (0: the defaults) for the fetches to
 * come. A shorter refresh takes effect at once when the last fetch was
 * good (the wait under way is cut short); a longer one from the next
 * fetch. */
void adm_jwks_fetch_tune(struct adm_jwks_fetch *f, unsigned refresh_ms, unsigned timeout_ms);

/* Fetches again now unless a fetch is under way (a token named a kid
 * that the set lacks: the owner rate-limits these). */
void adm_jwks_fetch_now(struct adm_jwks_fetch *f);

/* Stops fetching and drops the fetcher's reference to its set. NULL is a
 * no-op. */
void adm_jwks_fetch_free(struct adm_jwks_fetch *f);

#endif /* SY_ADMIN_JWKS_FETCH_H */
