/*
 * etcd.h - an etcd v3 client over etcd's JSON gateway (grpc-gateway):
 * HTTP/1.1, plain or TLS, on one libevent base (the admin thread's).
 *
 * It keeps one view of the keys under a prefix: one range read of the
 * prefix at revision R, then ONE watch from R+1 (never one per worker or
 * per kind of object). Each revision's events reach the caller together,
 * once, in revision order. When the watch is compacted away (etcd answers
 * "canceled" with "compact_revision"), the client reads the prefix again
 * and hands the caller the whole new view: it never jumps ahead over
 * events. After a lost connection it resumes the watch from the last
 * revision it delivered + 1 (again a fresh read when that was compacted),
 * with capped, jittered backoff across the endpoints.
 *
 * A watchdog notices a dead watch: the watch asks for progress
 * notifications, and a watch that hears nothing (no event, no progress)
 * for watch_idle_ms is probed with a range of the prefix for keys
 * modified after the last delivered revision; keys there that the
 * watch did not deliver within another watch_idle_ms, or a probe that
 * fails, restart the connection. The probe asks for the prefix's one key
 * modified last (limit 1, sorted by mod_revision, keys only), not for a
 * count: etcd 3.4 counts a count_only range before min_mod_revision
 * filters it, so that count is the whole prefix's. A deleted key is not
 * seen by the probe. progress_request is not used as a
 * delivery barrier (etcd 3.4.23 lacks etcd#15237).
 *
 * Writes are single-key transactions with an optional compare.
 *
 * Facts of the 3.4 JSON gateway it relies on: keys and values are base64,
 * every int64 is a JSON string, a watch is POST /v3/watch with one
 * {"create_request": ...} body answered by a stream of {"result": ...}
 * JSON objects, one per line; a DELETE event has "type": "DELETE"; a range
 * is POST /v3/kv/range, a write POST /v3/kv/txn; with auth, POST
 * /v3/auth/authenticate gives a token sent as the Authorization header
 * (taken again when etcd says it is invalid or expired).
 *
 * Host names of endpoints resolve with evdns on the loop (resolv.conf's
 * servers, /etc/hosts), under the dial timeout: never a blocking lookup.
 *
 * Nothing here logs: what happens reaches the caller through the hooks.
 * The hooks and the done callbacks run from the loop; they may call
 * adm_etcd_write(), adm_etcd_cancel() and adm_etcd_stats(), but never
 * adm_etcd_free().
 *
 * Every request has a connection of its own ("Connection: close"), with
 * a dial timer and a request timer; an answer or a watch line is bounded
 * by ETCD_BODY_MAX (64 MiB, etcd_int.h).
 */
#ifndef SY_ADMIN_ETCD_H
#define SY_ADMIN_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

struct adm_etcd;

/* How to reach etcd. Strings are copied by adm_etcd_new(). */
struct adm_etcd_opts {
    const char *const *endpoints; /* "http://host:port" or "https://host:port" */
    size_t nendpoints;            /* >= 1 */
    const char *prefix;           /* the keys watched: every key starting with it */
    /* TLS (https endpoints): the CA that signs etcd's certificate (NULL:
     * the system store), and a client certificate and key (NULL: none). */
    const char *ca_file, *cert_file, *key_file;
    /* etcd auth: NULL username for none. */
    const char *username, *password;
    unsigned dial_timeout_ms;    /* connect (and TLS handshake); 0: 2000 */
    unsigned request_timeout_ms; /* a range, txn or auth request; 0: 5000 */
    unsigned watch_idle_ms;      /* the watchdog's period; 0: 10000 */
    unsigned backoff_min_ms;     /* the first retry's delay; 0: 100 */
    unsigned backoff_max_ms;     /* the cap; 0: 5000 */
};

/* One key as the client hands it over. Pointers live until the hook
 * returns. <value> is NULL for a deleted key (an event's DELETE). */
struct adm_etcd_kv {
    const char *key;
    size_t keylen;
    const char *value;
    size_t vallen;
    int64_t mod_revision; /* a delete's: the revision of the delete */
    int64_t create_revision;
};

struct adm_etcd_hooks {
    /* The whole prefix at revision <rev> (keys in key order): after the
     * first read, and after every re-read (compaction, a watch that could
     * not resume). <compacted>: the re-read followed a compaction. */
    void (*snapshot)(void *arg, int64_t rev, const struct adm_etcd_kv *kvs, size_t n,
                     int compacted);
    /* The events of one revision <rev>, in their order. */
    void (*events)(void *arg, int64_t rev, const struct adm_etcd_kv *evs, size_t n);
    /* etcd's revision is <rev> and every event of the prefix up to it has
     * been delivered (a progress notification or an empty watch answer). */
    void (*progress)(void *arg, int64_t rev);
    /* The watch runs (<up> 1) or stopped (<up> 0, <why> says why: the
     * endpoint and the error), each change once. */
    void (*state)(void *arg, int up, const char *why);
    void *arg;
};

/* A new client on <base>; it does nothing until adm_etcd_start(). NULL
 * with the reason in <why> (a bad endpoint URL, a CA or client
 * certificate file that cannot be read, out of memory). */
struct adm_etcd *adm_etcd_new(struct event_base *base, const struct adm_etcd_opts *o,
                              const struct adm_etcd_hooks *h, char *why, size_t cap);
/* Reads the prefix, then watches it; retries forever in the background
 * while etcd is unreachable. */
void adm_etcd_start(struct adm_etcd *e);
/* Stops everything, cancels every pending write (its done callback is not
 * called) and frees <e>. NULL is a no-op. Called outside the loop (a
 * stop): with an endpoint named by host name it runs the loop briefly, so
 * that the lookups it cancels end before their evdns base goes. */
void adm_etcd_free(struct adm_etcd *e);

/* A write's condition. */
enum adm_etcd_cmp {
    ADM_ETCD_ALWAYS = 0,
    ADM_ETCD_ABSENT,           /* the key does not exist (version == 0) */
    ADM_ETCD_MOD_BELOW,        /* the key's mod_revision < <rev> (an absent key's is 0) */
    ADM_ETCD_EXISTS,           /* the key exists (version > 0) */
    ADM_ETCD_EXISTS_MOD_BELOW, /* both */
};

/* The outcome of a write: <ok> 1 done (at revision <rev>), 0 the compare
 * failed (<rev>: etcd's revision then), -1 not done (<why>: etcd
 * unreachable, timed out, refused). */
typedef void (*adm_etcd_done_fn)(void *arg, int ok, int64_t rev, const char *why);

/* Puts <value> (<vallen> bytes) at <key> (a full key, the prefix
 * included), or deletes <key> when <value> is NULL, if <cmp> holds
 * (<rev> for ADM_ETCD_MOD_BELOW). <done> is called once, later, from the
 * loop. Returns a handle for adm_etcd_cancel(), or 0 when the write could
 * not even be queued (out of memory: <done> is not called).
 * A write goes out only while the watch runs (at most 8 at once, each on
 * its own connection); until then it waits. request_timeout_ms after the
 * call it fails (-1) wherever it is. A write whose connection breaks
 * fails (-1) and is not retried: it may or may not have happened. An
 * invalid or expired token is taken again and the write retried once. */
uint64_t adm_etcd_write(struct adm_etcd *e, const char *key, const char *value, size_t vallen,
                        enum adm_etcd_cmp cmp, int64_t rev, adm_etcd_done_fn done, void *arg);
/* <done> of write <handle> will not be called (the write may still
 * happen). An unknown or finished handle is a no-op. */
void adm_etcd_cancel(struct adm_etcd *e, uint64_t handle);

/* What GET /status and /metrics show. */
struct adm_etcd_stats {
    int up;                  /* the watch runs */
    const char *endpoint;    /* the one in use or last tried (owned by <e>) */
    int64_t revision;        /* the last revision delivered (or progressed) */
    uint64_t reconnects;     /* connections lost or refused after the first */
    uint64_t rereads;        /* full reads of the prefix after the first */
    uint64_t compactions;    /* watches canceled for compaction */
    uint64_t watchdog_trips; /* watches restarted by the watchdog */
    uint64_t events;         /* events delivered */
};
void adm_etcd_stats(const struct adm_etcd *e, struct adm_etcd_stats *st);

#endif
