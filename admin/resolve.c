/*
 * resolve.c - server host names resolved with evdns on the admin thread
 * (see resolve.h): one entry per name with its last good addresses and a
 * re-resolution timer, the "resolver" settings applied to a fresh
 * evdns_base, and the hosts file read again whenever it changes.
 *
 * Cancelling an evdns_getaddrinfo request calls its callback later, from
 * the event loop, so a request's callback argument is a small query object
 * that outlives its entry: a cancelled query has no entry and only frees
 * itself. An evdns_base that a new configuration replaced is kept until
 * its cancelled queries have called back (they still use it).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/resolve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#define DEFAULT_HOSTS "/etc/hosts"
#define RESOLV_CONF "/etc/resolv.conf"
#define RETRY_MS 5000 /* a failed resolution is tried again this soon at the latest */

struct dns {
    struct evdns_base *base;
    unsigned pending; /* queries not yet called back */
    struct dns *next; /* retired ones */
};

struct entry;

struct query {
    struct entry *e; /* NULL once cancelled */
    struct dns *dns;
    struct evdns_getaddrinfo_request *req; /* NULL while evdns_getaddrinfo runs */
    int starting, done;                    /* answered before evdns_getaddrinfo returned */
};

struct entry {
    struct adm_resolver *r;
    char *host;
    struct sockaddr_storage *addrs;
    size_t naddrs;
    int known;   /* resolved at least once */
    int failing; /* the last resolution failed */
    unsigned interval_ms;
    unsigned mark; /* the sweep round it was last looked up in */
    struct query *q;
    struct event *timer;
    struct entry *next;
};

struct adm_resolver {
    struct event_base *base;
    struct adm_resolver_hooks hooks;
    struct dns *dns;     /* the live one */
    struct dns *retired; /* replaced, with queries still to call back */
    char *settings;      /* the "resolver" section applied, as JSON; NULL: defaults */
    char *hosts_file;
    struct timespec hosts_mtime;
    struct entry *entries;
    unsigned mark;
    struct event *notify; /* runs hooks.changed from the loop */
};

static void say(struct adm_resolver *r, int warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct adm_resolver *r, int warn, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (!r->hooks.log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    r->hooks.log(r->hooks.arg, warn, line);
}

/* "127.0.0.1, ::1" into <buf>. */
static const char *addrs_text(const struct sockaddr_storage *a, size_t n, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && len + INET6_ADDRSTRLEN + 3 < cap; i++) {
        const void *in = a[i].ss_family == AF_INET6
                             ? (const void *)&((const struct sockaddr_in6 *)&a[i])->sin6_addr
                             : (const void *)&((const struct sockaddr_in *)&a[i])->sin_addr;
        if (i)
            len += (size_t)snprintf(buf + len, cap - len, ", ");
        if (inet_ntop(a[i].ss_family, in, buf + len, (socklen_t)(cap - len)))
            len += strlen(buf + len);
    }
    return buf;
}

/* Address order: IPv4 before IPv6, then by bytes, so that two answers
 * compare equal whatever order the nameserver sent them in. */
static int addr_cmp(const void *pa, const void *pb)
{
    const struct sockaddr_storage *a = pa, *b = pb;

    if (a->ss_family != b->ss_family)
        return a->ss_family == AF_INET ? -1 : 1;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
}

/* The distinct addresses of <ai>, port 0, sorted; how many (-1: no memory). */
static int collect(const struct evutil_addrinfo *ai, struct sockaddr_storage **out)
{
    size_t n = 0, k = 0;
    struct sockaddr_storage *a;

    for (const struct evutil_addrinfo *p = ai; p; p = p->ai_next)
        n++;
    if (!(a = calloc(n ? n : 1, sizeof(*a))))
        return -1;
    for (const struct evutil_addrinfo *p = ai; p; p = p->ai_next) {
        struct sockaddr_storage s = {0};
        if (p->ai_family == AF_INET && p->ai_addrlen >= sizeof(struct sockaddr_in)) {
            ((struct sockaddr_in *)&s)->sin_family = AF_INET;
            ((struct sockaddr_in *)&s)->sin_addr = ((struct sockaddr_in *)p->ai_addr)->sin_addr;
        } else if (p->ai_family == AF_INET6 && p->ai_addrlen >= sizeof(struct sockaddr_in6)) {
            ((struct sockaddr_in6 *)&s)->sin6_family = AF_INET6;
            ((struct sockaddr_in6 *)&s)->sin6_addr = ((struct sockaddr_in6 *)p->ai_addr)->sin6_addr;
        } else {
            continue;
        }
        a[k++] = s;
    }
    qsort(a, k, sizeof(*a), addr_cmp);
    n = 0;
    for (size_t i = 0; i < k; i++)
        if (!n || addr_cmp(&a[n - 1], &a[i]) != 0)
            a[n++] = a[i];
    *out = a;
    return (int)n;
}

static int same_addrs(const struct entry *e, const struct sockaddr_storage *a, size_t n)
{
    if (e->naddrs != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (addr_cmp(&e->addrs[i], &a[i]) != 0)
            return 0;
    return 1;
}

static void schedule(struct entry *e, unsigned ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evtimer_add(e->timer, &tv);
}

/* The answer for <e>: new addresses, or a failure that keeps the old. */
static void answered(struct entry *e, int result, struct evutil_addrinfo *ai)
{
    struct adm_resolver *r = e->r;
    struct sockaddr_storage *a = NULL;
    char now[512], was[512];
    int n = result == 0 ? collect(ai, &a) : -1;

    if (n <= 0) {
        free(a);
        if (!e->failing)
            say(r, 1, "resolver: %s: %s; %s", e->host,
                result ? evutil_gai_strerror(result) : "no usable address",
                e->known ? "its last addresses stay in use" : "its servers stay down");
        e->failing = 1;
        schedule(e, e->interval_ms < RETRY_MS ? e->interval_ms : RETRY_MS);
        return;
    }
    if (e->failing && e->known)
        say(r, 0, "resolver: %s resolves again", e->host);
    e->failing = 0;
    schedule(e, e->interval_ms);
    if (e->known && same_addrs(e, a, (size_t)n)) {
        free(a);
        return;
    }
    if (e->known)
        say(r, 0, "resolver: %s: %s (was %s)", e->host, addrs_text(a, (size_t)n, now, sizeof(now)),
            addrs_text(e->addrs, e->naddrs, was, sizeof(was)));
    else
        say(r, 0, "resolver: %s: %s", e->host, addrs_text(a, (size_t)n, now, sizeof(now)));
    free(e->addrs);
    e->addrs = a;
    e->naddrs = (size_t)n;
    e->known = 1;
    event_active(r->notify, 0, 0);
}

static void dns_free(struct dns *d)
{
    if (d) {
        evdns_base_free(d->base, 0);
        free(d);
    }
}

/* Frees the retired bases whose queries have all called back. */
static void reap_retired(struct adm_resolver *r)
{
    struct dns **pp = &r->retired;

    while (*pp) {
        struct dns *d = *pp;
        if (d->pending) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        dns_free(d);
    }
}

static void query_cb(int result, struct evutil_addrinfo *ai, void *arg)
{
    struct query *q = arg;
    struct entry *e = q->e;

    q->dns->pending--;
    if (q->starting)
        q->done = 1; /* start() frees it */
    else
        free(q);
    if (e) {
        e->q = NULL;
        if (result != EVUTIL_EAI_CANCEL)
            answered(e, result, ai);
    }
    if (ai)
        evutil_freeaddrinfo(ai);
}

/* Reads the hosts file again when it changed since it was loaded. */
static void hosts_refresh(struct adm_resolver *r)
{
    const char *path = r->hosts_file ? r->hosts_file : DEFAULT_HOSTS;
    struct stat st;

    if (stat(path, &st) < 0 || (st.st_mtim.tv_sec == r->hosts_mtime.tv_sec &&
                                st.st_mtim.tv_nsec == r->hosts_mtime.tv_nsec))
        return;
    r->hosts_mtime = st.st_mtim;
    evdns_base_clear_host_addresses(r->dns->base);
    if (evdns_base_load_hosts(r->dns->base, path) < 0)
        evdns_base_load_hosts(r->dns->base, NULL); /* localhost, at least */
}

/* Starts a resolution of <e> (nothing when one runs). The hosts file may
 * answer it before this returns. */
static void start(struct entry *e)
{
    struct adm_resolver *r = e->r;
    struct evutil_addrinfo hints = {0};
    struct query *q;

    if (e->q)
        return;
    if (!(q = calloc(1, sizeof(*q)))) {
        schedule(e, RETRY_MS);
        return;
    }
    hosts_refresh(r);
    q->e = e;
    q->dns = r->dns;
    q->dns->pending++;
    e->q = q;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    q->starting = 1;
    q->req = evdns_getaddrinfo(r->dns->base, e->host, NULL, &hints, query_cb, q);
    q->starting = 0;
    if (q->done)
        free(q);
}

/* Cancels the query of <e>: its callback comes later and frees it. */
static void cancel(struct entry *e)
{
    struct query *q = e->q;

    if (q) {
        q->e = NULL;
        e->q = NULL;
        evdns_getaddrinfo_cancel(q->req);
    }
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    start(arg);
}

static void notify_cb(evutil_socket_t fd, short what, void *arg)
{
    struct adm_resolver *r = arg;

    (void)fd;
    (void)what;
    if (r->hooks.changed)
        r->hooks.changed(r->hooks.arg);
}

/* A base with <rc>'s settings (NULL: the defaults); NULL with an error in
 * <errs> when they cannot be applied. */
static struct dns *dns_new(struct adm_resolver *r, const struct adm_resolver_cfg *rc,
                           struct adm_errors *errs)
{
    struct dns *d = calloc(1, sizeof(*d));
    char val[32], path[64];

    if (!d || !(d->base = evdns_base_new(r->base, 0))) {
        free(d);
        adm_errors_add(errs, "/resolver", "out of memory");
        return NULL;
    }
    /* search domains and options always; nameservers when none are given */
    evdns_base_resolv_conf_parse(d->base,
                                 DNS_OPTION_SEARCH | DNS_OPTION_MISC |
                                     (rc && rc->nnameservers ? 0 : DNS_OPTION_NAMESERVERS),
                                 RESOLV_CONF);
    for (size_t i = 0; rc && i < rc->nnameservers; i++)
        if (evdns_base_nameserver_ip_add(d->base, rc->nameservers[i]) != 0) {
            snprintf(path, sizeof(path), "/resolver/nameservers/%zu", i);
            adm_errors_add(errs, path, "cannot use nameserver %s", rc->nameservers[i]);
            goto fail;
        }
    if (rc) {
        snprintf(val, sizeof(val), "%u.%03u", rc->timeout_ms / 1000, rc->timeout_ms % 1000);
        evdns_base_set_option(d->base, "timeout", val);
        snprintf(val, sizeof(val), "%u", rc->attempts);
        evdns_base_set_option(d->base, "attempts", val);
    }
    if (rc && rc->hosts_file && evdns_base_load_hosts(d->base, rc->hosts_file) < 0) {
        adm_errors_add(errs, "/resolver/hosts_file", "cannot read %s", rc->hosts_file);
        goto fail;
    }
    return d;
fail:
    dns_free(d);
    return NULL;
}

struct adm_resolver *adm_resolver_new(struct event_base *base,
                                      const struct adm_resolver_hooks *hooks)
{
    struct adm_resolver *r = calloc(1, sizeof(*r));
    struct adm_errors errs;

    if (!r)
        return NULL;
    r->base = base;
    if (hooks)
        r->hooks = *hooks;
    adm_errors_init(&errs);
    if (!(r->notify = event_new(base, -1, 0, notify_cb, r)) || !(r->dns = dns_new(r, NULL, &errs)))
        goto fail;
    adm_errors_clear(&errs);
    return r;
fail:
    adm_errors_clear(&errs);
    if (r->notify)
        event_free(r->notify);
    free(r);
    return NULL;
}

static void entry_free(struct entry *e)
{
    cancel(e);
    event_free(e->timer);
    free(e->addrs);
    free(e->host);
    free(e);
}

void adm_resolver_free(struct adm_resolver *r)
{
    struct entry *e, *next;

    if (!r)
        return;
    event_del(r->notify); /* no changed() from the loop below */
    for (e = r->entries; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    /* cancelled queries call back from the loop: let them, then free */
    if (r->dns->pending) {
        r->dns->next = r->retired;
        r->retired = r->dns;
        r->dns = NULL;
    }
    for (int i = 0; i < 100 && r->retired; i++) {
        event_base_loop(r->base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
        reap_retired(r);
    }
    dns_free(r->dns);
    event_free(r->notify);
    free(r->settings);
    free(r->hosts_file);
    free(r);
}

int adm_resolver_configure(struct adm_resolver *r, const struct adm_config *c,
                           struct adm_errors *errs)
{
    const json_t *sec = json_object_get(c->json, "resolver");
    char *settings = sec ? json_dumps(sec, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    char *hosts = c->resolver.hosts_file ? strdup(c->resolver.hosts_file) : NULL;
    struct dns *d;
    struct stat st;

    if ((sec && !settings) || (c->resolver.hosts_file && !hosts)) {
        adm_errors_add(errs, "/resolver", "out of memory");
        goto fail;
    }
    if ((!settings && !r->settings) || (settings && r->settings && !strcmp(settings, r->settings)))
        goto same;
    if (!(d = dns_new(r, sec ? &c->resolver : NULL, errs)))
        goto fail;
    reap_retired(r);
    for (struct entry *e = r->entries; e; e = e->next)
        cancel(e);
    if (r->dns->pending) {
        r->dns->next = r->retired;
        r->retired = r->dns;
    } else {
        dns_free(r->dns);
    }
    r->dns = d;
    free(r->settings);
    r->settings = settings;
    free(r->hosts_file);
    r->hosts_file = hosts;
    /* the file was just loaded (or the defaults are loaded next) */
    r->hosts_mtime = (struct timespec){0};
    if (hosts && stat(hosts, &st) == 0)
        r->hosts_mtime = st.st_mtim;
    say(r, 0, "resolver: %s", settings ? settings : "resolv.conf and " DEFAULT_HOSTS);
    for (struct entry *e = r->entries; e; e = e->next)
        start(e);
    return 0;
same:
    free(settings);
    free(hosts);
    return 0;
fail:
    free(settings);
    free(hosts);
    return -1;
}

static struct entry *find(const struct adm_resolver *r, const char *host)
{
    for (struct entry *e = r->entries; e; e = e->next)
        if (!strcmp(e->host, host))
            return e;
    return NULL;
}

int adm_resolver_lookup(struct adm_resolver *r, const char *host, unsigned interval_ms,
                        const struct sockaddr_storage **addrs)
{
    struct entry *e = find(r, host);

    if (!e) {
        if (!(e = calloc(1, sizeof(*e))) || !(e->host = strdup(host)) ||
            !(e->timer = evtimer_new(r->base, timer_cb, e))) {
            if (e)
                free(e->host);
            free(e);
            return -1;
        }
        e->r = r;
        e->interval_ms = interval_ms;
        e->mark = r->mark;
        e->next = r->entries;
        r->entries = e;
        start(e);
    }
    if (e->mark != r->mark || interval_ms < e->interval_ms)
        e->interval_ms = interval_ms;
    e->mark = r->mark;
    if (!e->known)
        return -1;
    *addrs = e->addrs;
    return (int)e->naddrs;
}

void adm_resolver_sweep(struct adm_resolver *r)
{
    struct entry **pp = &r->entries;

    while (*pp) {
        struct entry *e = *pp;
        if (e->mark == r->mark) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        entry_free(e);
    }
    r->mark++;
    reap_retired(r);
}

int adm_resolver_failing(const struct adm_resolver *r, const char *host)
{
    const struct entry *e = find(r, host);

    return e && e->failing;
}
