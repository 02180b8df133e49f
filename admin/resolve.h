/*
 * resolve.h - server host names, resolved asynchronously on the admin
 * thread (libevent's evdns), as nginx's "resolver" does.
 *
 * The resolver keeps one entry per host name that the live config uses:
 * its last good addresses, whether its last resolution failed, and a timer
 * that resolves it again every resolve_interval_ms. A snapshot build asks
 * for a name's addresses and never waits: a name seen for the first time is
 * answered at once from the hosts file when it is there, else it is
 * "resolving" until the answer comes. A failed resolution keeps the last
 * good addresses. Whenever an answer changes what a name resolves to, the
 * owner's changed() hook runs (from the event loop, never inside a lookup),
 * and the owner re-derives the live snapshot with the new servers.
 *
 * Admin thread only: every function and hook runs on the event base the
 * resolver was made with.
 */
#ifndef SY_ADMIN_RESOLVE_H
#define SY_ADMIN_RESOLVE_H

#include <stddef.h>
#include <sys/socket.h>

#include "admin/config.h"
#include "admin/errors.h"

struct event_base;
struct adm_resolver;

struct adm_resolver_hooks {
    /* some name's addresses changed (or became known): re-derive */
    void (*changed)(void *arg);
    /* one line for the error log (<warn>: a warning, else information) */
    void (*log)(void *arg, int warn, const char *line);
    void *arg;
};

/* A resolver on <base> with the default settings (resolv.conf, /etc/hosts)
 * until adm_resolver_configure(). NULL on out of memory. */
struct adm_resolver *adm_resolver_new(struct event_base *base,
                                      const struct adm_resolver_hooks *hooks);
/* Cancels what is in flight and frees everything. NULL is a no-op. */
void adm_resolver_free(struct adm_resolver *r);

/* Applies <c>'s "resolver" section when it differs from the one running:
 * new nameservers, hosts file and timeouts, and every known name resolved
 * again with them (their last addresses stay until then). -1 with an error
 * at /resolver/... appended to <errs> when the settings cannot be applied
 * (the hosts file cannot be read); the running settings then stay. */
int adm_resolver_configure(struct adm_resolver *r, const struct adm_config *c,
                           struct adm_errors *errs);

/* The addresses <host> resolves to now (port 0; borrowed until the next
 * lookup or event), re-resolved every <interval_ms> (the shortest interval
 * asked for since the last adm_resolver_sweep()). Returns how many, or -1
 * when none is known yet (a resolution runs; the first lookup of a name
 * starts it). */
int adm_resolver_lookup(struct adm_resolver *r, const char *host, unsigned interval_ms,
                        const struct sockaddr_storage **addrs);
/* Forgets the names not looked up since the previous sweep: call it after
 * a snapshot that looked up every name it uses is published. */
void adm_resolver_sweep(struct adm_resolver *r);

/* For /upstreams/{name}/health: 1 when the last resolution of <host>
 * failed (its last good addresses are served), else 0. */
int adm_resolver_failing(const struct adm_resolver *r, const char *host);

#endif
