/*
 * config.h - Switchyard's config model and its strict JSON parser/validator.
 *
 * A config is one JSON document (see docs/reference/config.md). adm_config_parse()
 * turns it into a struct adm_config with typed fields, or collects every
 * problem it finds into a struct adm_errors: each error names the JSON pointer
 * (RFC 6901) of the value it is about, e.g.
 *     /routes/3/upstream: unknown upstream "users"
 * Unknown keys, wrong types, out-of-range values, bad addresses, invalid or
 * conflicting route patterns, duplicate keys and ids are all errors; parsing
 * never stops at the first one.
 *
 * The validator inserts every route into a router table in one transaction to
 * find conflicts. adm_config_from_json_bound() keeps that table in
 * cfg->table, each route carrying the caller's data, so that the snapshot
 * takes it over instead of building it twice (the admin API's pushes); every
 * other parser frees it, and adm_config_build_routes() builds one from a
 * parsed config (start-up, SIGHUP).
 *
 * The parser's files: config.c (the root keys, checks across sections,
 * entry points), config_parse.c (the parse context and key tables that every
 * section uses, admin/config_int.h), and one file per section:
 * config_listeners.c, config_upstreams.c, config_routes.c, config_admin.c,
 * config_settings.c (router, trusted proxies, limits, timeouts, http2,
 * access log), config_fleet.c (how a fleet node reaches etcd),
 * and tls_config.c for the "tls" objects of listeners and upstreams
 * (admin/tls.h). Error lists are admin/errors.h, addresses and CIDRs
 * admin/addr.h.
 *
 * Nothing here prints, exits, or keeps global state. A parsed config is
 * immutable; it may be read from any thread.
 */
#ifndef SY_ADMIN_CONFIG_H
#define SY_ADMIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <jansson.h>

#include "admin/addr.h"
#include "admin/errors.h"
#include "admin/http1/path.h"
#include "router/router.h"

/* ---- the config ---- */

struct adm_tls_listener; /* admin/tls.h */
struct adm_fleet_cfg;    /* admin/fleet.h */
struct adm_tls_upstream;
struct adm_policy; /* admin/policy.h */

/* Where a request's client address comes from (client_ip.source). */
enum adm_cip_source {
    ADM_CIP_PEER = 0,  /* "peer": the connection's address */
    ADM_CIP_XFF,       /* "x_forwarded_for": its rightmost untrusted address */
    ADM_CIP_FORWARDED, /* "forwarded": RFC 7239 "for", rightmost untrusted */
    ADM_CIP_HEADER,    /* "header:NAME": one address, believed from a trusted peer */
};

/* client_ip, at the top level or on a listener. */
struct adm_client_ip {
    enum adm_cip_source source;
    char *header; /* ADM_CIP_HEADER: the field name */
    size_t header_len;
    struct adm_cidr *trusted; /* the proxies skipped from the right */
    size_t ntrusted;
    int has_trusted; /* "trusted" given; otherwise trusted_proxies */
};

/* listeners[].protocols: what a listener speaks, a set of these bits
 * (Caddy's names). Never 0 in a parsed config: a TLS listener defaults to
 * H1 | H2 (ALPN picks, h2 preferred), a plain one to H1. H2 is on TLS
 * listeners only, H2C on plain ones only. */
#define ADM_PROTO_H1 1u  /* "h1": HTTP/1.x */
#define ADM_PROTO_H2 2u  /* "h2": HTTP/2 over TLS, selected by ALPN */
#define ADM_PROTO_H2C 4u /* "h2c": HTTP/2 without TLS, by prior knowledge (the preface) */

struct adm_listener {
    struct adm_addr addr;            /* always numeric */
    struct adm_client_ip *client_ip; /* NULL: the top-level client_ip */
    struct adm_tls_listener *tls;    /* NULL: plain HTTP */
    unsigned redirect_https;         /* plain only: 308 to https on this port; 0: off */
    unsigned protocols;              /* ADM_PROTO_* bits; live (new connections) */
};

enum adm_balance {
    ADM_BALANCE_ROUND_ROBIN = 0, /* smooth weighted round robin, the default */
    ADM_BALANCE_LEAST_CONN,      /* fewest requests in flight, weighted */
    ADM_BALANCE_RANDOM_TWO,      /* the less loaded of two weighted random picks */
    ADM_BALANCE_HASH,            /* Maglev on the request's hash_key */
};

/* What the hash balancer hashes (upstreams.NAME.hash_key). */
enum adm_hash_on {
    ADM_HASH_CLIENT_IP = 0, /* "client_ip", the default */
    ADM_HASH_HEADER,        /* "header:NAME" */
    ADM_HASH_COOKIE,        /* "cookie:NAME" */
    ADM_HASH_PATH,          /* "path" */
};

/* A set of HTTP status codes 100..599: bit <code> of the words. */
struct adm_statuses {
    uint64_t bits[10];
};

static inline int adm_statuses_has(const struct adm_statuses *s, unsigned code)
{
    return code < 640 && (s->bits[code / 64] >> (code % 64) & 1) != 0;
}

/* gRPC's name of status <code> as the config writes it, lower case with
 * '_' ("unavailable" for 14, "ok" for 0); NULL above 16
 * (config_upstream_h2.c). */
const char *adm_grpc_code_name(unsigned code);

/* upstreams.NAME.health_check: active checks of every server. */
/* upstreams.NAME.health_check.type */
enum adm_hc_type {
    ADM_HC_HTTP = 0, /* "http": a GET of path, its status in expect_status */
    ADM_HC_GRPC,     /* "grpc": grpc.health.v1.Health/Check of service; SERVING passes
                      * (needs the pool's protocol h2c or h2) */
};

struct adm_health_check {
    enum adm_hc_type type;        /* "http" */
    char *service;                /* "grpc": the service asked about; NULL: "" (the server) */
    char *path;                   /* the request target, "/" */
    char *host;                   /* the Host header; NULL: the server's address */
    unsigned interval_ms;         /* 5000 */
    unsigned timeout_ms;          /* 2000, at most interval_ms */
    struct adm_statuses expect;   /* expect_status, 200-399 */
    unsigned healthy_threshold;   /* passes in a row to come up, 2 */
    unsigned unhealthy_threshold; /* failures in a row to go down, 3 */
};

/* upstreams.NAME.outlier: passive ejection, on by default with nginx's
 * thresholds (max_fails=1 fail_timeout=10s) and Envoy's cap on how much of
 * a pool is out; a pool of one server is never ejected (upstream/outlier.c),
 * so a lone dead server's 502 does not turn into a 503. */
struct adm_outlier {
    int on;                        /* consecutive_failures > 0 */
    unsigned consecutive_failures; /* 1; 0 turns ejection off */
    struct adm_statuses statuses;  /* responses that count as failures (none) */
    unsigned base_ejection_ms;     /* 10000 */
    unsigned max_ejection_ms;      /* 300000, at least base_ejection_ms */
    unsigned max_ejection_percent; /* 10 */
};

struct adm_server {
    struct adm_addr addr; /* numeric, or a host name to resolve */
    unsigned weight;      /* 1..1000, default 1 */
};

/* upstreams.NAME.protocol: what the pool's servers speak. */
enum adm_up_protocol {
    ADM_UP_H1 = 0, /* "h1": HTTP/1.1, a request per connection at a time (the default) */
    ADM_UP_H2C,    /* "h2c": HTTP/2 with prior knowledge, streams multiplexed */
    ADM_UP_H2,     /* "h2": HTTP/2 over TLS chosen by ALPN (needs "tls") */
};

struct adm_upstream {
    char *name;                    /* [A-Za-z0-9_.-]+ */
    enum adm_up_protocol protocol; /* "h1" */
    struct adm_server *servers;
    size_t nservers; /* >= 1 */
    enum adm_balance balance;
    enum adm_hash_on hash_on;    /* ADM_BALANCE_HASH only */
    char *hash_name;             /* the header or cookie name of hash_key, else NULL */
    int fallback;                /* ADM_BALANCE_HASH: a down server's keys go to the next one */
    unsigned table_size;         /* ADM_BALANCE_HASH: the Maglev table, a prime > nservers
                                    (0: 65537) */
    unsigned keepalive;          /* idle connections per worker per server, 0..100000, default 32 */
    unsigned idle_timeout_ms;    /* default: timeouts.upstream_idle_ms (resolved) */
    unsigned connect_timeout_ms; /* default: timeouts.upstream_connect_ms (resolved) */
    unsigned response_timeout_ms; /* default: timeouts.upstream_response_ms (resolved);
                                     the default of its routes' timeout_ms */
    struct adm_tls_upstream *tls; /* NULL: plain HTTP */

    struct adm_health_check *health_check; /* NULL: no active checks */
    int initially_unhealthy;               /* a new server starts down until checked (0) */
    struct adm_outlier outlier;
    int panic;              /* every server down: spread over all of them (0: answer 503) */
    unsigned slow_start_ms; /* a server back up ramps its weight over this (0: off) */

    unsigned retries;                    /* extra tries of a failed request (2) */
    struct adm_statuses retry_on_status; /* responses that are retried (none) */
    /* gRPC calls whose answer is trailers-only with one of these grpc-status
     * codes (bit = code, 1..16) are retried like retry_on_status
     * (["unavailable"]) */
    struct adm_statuses retry_on_grpc_status;
    unsigned retry_budget_percent;    /* of the requests in flight that may be retries (20) */
    int request_buffering;            /* read a body whole before the upstream request (0) */
    uint64_t max_buffered_body_bytes; /* the largest body buffered so (8 MiB) */

    unsigned max_connections;     /* open at once to one server (0: no limit) */
    unsigned max_pending;         /* requests a worker queues at max_connections (1024) */
    unsigned queue_timeout_ms;    /* the longest a request waits there (5000) */
    unsigned resolve_interval_ms; /* host names are re-resolved this often (30000) */
};

enum adm_action {
    ADM_ACTION_UPSTREAM = 1,
    ADM_ACTION_RESPONSE,
    ADM_ACTION_REDIRECT,
};

struct adm_header {
    char *name;
    char *value;
};

/* A route's request_headers or response_headers: fields set (every copy
 * replaced), added, and removed (every copy). Values are templates with
 * {param}, {client_ip}, {request_id}, {host}; "{{" is a literal "{". */
struct adm_hdr_actions {
    struct adm_header *set, *add;
    size_t nset, nadd;
    char **remove;
    size_t nremove;
};

/* A piece of a header template: literal text, or a placeholder's name. */
enum { ADM_HDR_LITERAL, ADM_HDR_NAME };
struct adm_hdr_part {
    int slot; /* ADM_HDR_LITERAL or ADM_HDR_NAME */
    const char *s;
    size_t len;
};
/* The next piece of template <v> from *<pos> (start at 0): 1, 0 at the
 * end, -1 for an unterminated or empty placeholder (the validator refuses
 * those). config_headers.c. */
int adm_hdr_part_next(const char *v, size_t *pos, struct adm_hdr_part *part);
/* 0 {client_ip}, 1 {request_id}, 2 {host}; -1 for another name. */
int adm_hdr_builtin(const char *s, size_t n);
/* The index of parameter <name> among <pattern>'s parameters (host first,
 * then path, as the router fills them; a regexp's or a catch-all's name
 * too); -1 when it has none such. config_routes.c. */
int adm_pattern_param_index(const char *pattern, const char *name, size_t nlen);

struct adm_route {
    char *id;      /* unique, [A-Za-z0-9_.:-]+ */
    char *host;    /* host pattern, NULL for every host */
    char *path;    /* path pattern, starts with '/' */
    char *pattern; /* host + path: the router pattern */
    char **methods;
    size_t nmethods; /* 0: every method */
    enum adm_action action;

    /* ADM_ACTION_UPSTREAM */
    char *upstream;                   /* its name */
    size_t upstream_index;            /* into adm_config.upstreams */
    char *strip_prefix;               /* NULL if none */
    char *rewrite;                    /* path template with {param}s, NULL if none */
    char **upgrades;                  /* Upgrade protocols tunnelled (never h2c), NULL: websocket */
    size_t nupgrades;                 /* (an empty list tunnels nothing) */
    unsigned timeout_ms;              /* default: the upstream's response_timeout_ms (resolved) */
    int request_buffering;            /* default: the upstream's (resolved) */
    uint64_t max_buffered_body_bytes; /* default: the upstream's (resolved) */
    struct adm_hdr_actions *request_headers;  /* NULL: none */
    struct adm_hdr_actions *response_headers; /* NULL: none; proxied responses only */

    /* ADM_ACTION_RESPONSE: headers in document order, never Content-Length,
     * Transfer-Encoding or hop-by-hop fields. */
    struct {
        unsigned status; /* 200..599, default 200 */
        struct adm_header *headers;
        size_t nheaders;
        char *body; /* never NULL, "" by default */
        size_t body_len;
    } response;

    /* ADM_ACTION_REDIRECT */
    struct {
        unsigned status; /* 301, 302, 303, 307 or 308, default 302 */
        char *location;
    } redirect;

    /* "policies": names of top-level policies (admin/policy.h), applied in
     * this order to whatever the route does; policy_idx: their indexes
     * into adm_config.policies (resolved with the references) */
    char **policies;
    size_t npolicies; /* at most ADM_POL_MAX */
    unsigned char policy_idx[8];
};

/* What request target goes upstream for a route that does not rewrite it. */
enum adm_forward_path {
    ADM_FWD_AS_RECEIVED, /* byte for byte as the client sent it (RFC 9110 7.7) */
    ADM_FWD_NORMALIZED,  /* the normalized path the router saw, then the query */
};

struct adm_router {
    enum rt_trailing_slash trailing_slash;   /* default RT_TS_STRICT */
    int auto_options;                        /* default 0 */
    int merge_slashes;                       /* default 1 */
    enum adm_forward_path forward_path;      /* default ADM_FWD_AS_RECEIVED */
    enum h1_escaped_slashes escaped_slashes; /* default H1_SLASHES_REJECT */
};

struct adm_limits {
    unsigned max_request_line; /* 8192 */
    unsigned max_header_bytes; /* 32768 */
    unsigned max_headers;      /* 100 */
    uint64_t max_body_bytes;   /* 0 = unlimited (the default) */
    unsigned max_connections;  /* 10000 */
    /* of which without a whole first request head yet (0 in a document that
     * leaves it out: check_cross() makes it a quarter of max_connections) */
    unsigned max_pending_connections;
    unsigned max_routes; /* 100000: a config with more is refused */
};

/* The error of a config with more routes (<n>, a size_t) than
 * limits.max_routes (<max>, unsigned), at /routes: the parser's, and
 * POST /routes' for the route one over. */
#define ADM_MAX_ROUTES_ERR "%zu routes, more than limits.max_routes (%u)"

struct adm_timeouts {              /* all milliseconds, 1..86400000 */
    unsigned client_header_ms;     /* 10000 */
    unsigned client_idle_ms;       /* 60000 */
    unsigned client_body_ms;       /* 30000 */
    unsigned upstream_connect_ms;  /* 5000 */
    unsigned upstream_response_ms; /* 60000 */
    unsigned upstream_idle_ms;     /* 60000 */
    unsigned drain_ms;             /* 10000 */
    unsigned lingering_ms;         /* 30000: a body read away, a lingering close, in all */
    unsigned tunnel_idle_ms;       /* 3600000: an upgraded tunnel with no byte either way */
};

/* "http2": the SETTINGS an HTTP/2 connection advertises; live, for the
 * connections opened after a push (an open one keeps the SETTINGS it began
 * with). Header sizes come from limits, as for HTTP/1.1. */
struct adm_http2 {
    unsigned max_concurrent_streams; /* 100, 1..10000: SETTINGS_MAX_CONCURRENT_STREAMS */
    unsigned initial_window_bytes;   /* 65535, 65535..2^31-1: SETTINGS_INITIAL_WINDOW_SIZE */
};

enum adm_log_target {
    ADM_LOG_STDOUT = 0, /* "stdout", the default */
    ADM_LOG_STDERR,     /* "stderr" */
    ADM_LOG_OFF,        /* "off" */
    ADM_LOG_FILE,       /* any other string: a file path */
};

enum adm_log_format {
    ADM_LOG_JSON = 0, /* "json", the default: one JSON record a line */
    ADM_LOG_COMBINED, /* "combined": nginx's combined format */
};

/* "log_level": the error log's threshold; live (the gateway keeps it in an
 * atomic that every thread's gw_log reads). Same order as the names. */
enum adm_log_level {
    ADM_LEVEL_ERROR = 0, /* "error" */
    ADM_LEVEL_WARN,      /* "warn", the default */
    ADM_LEVEL_INFO,      /* "info" */
    ADM_LEVEL_DEBUG,     /* "debug" */
};

struct adm_access_log {
    enum adm_log_target target;
    char *path; /* ADM_LOG_FILE only */
};

/* "resolver": how server host names are resolved (nginx's resolver). */
struct adm_resolver_cfg {
    char **nameservers; /* "IP:PORT" each (":53" added when absent); none: resolv.conf's */
    size_t nnameservers;
    char *hosts_file;    /* NULL: /etc/hosts */
    unsigned timeout_ms; /* one attempt at one nameserver (5000) */
    unsigned attempts;   /* tries of a query before it fails (2) */
};

/* "rollout": the defaults of a staged rollout (?canary=P on a write: the
 * admin API's api_rollout.c); a write's query overrides each. Live. */
enum adm_canary_key { ADM_CANARY_CLIENT_IP = 0, ADM_CANARY_REQUEST };
struct adm_rollout_cfg {
    unsigned canary_s;       /* the observation window (60) */
    enum adm_canary_key key; /* how requests are split (client_ip) */
    unsigned threshold_pct;  /* allowed increase of the failure rate, points (1) */
    unsigned min_requests;   /* canary requests needed to promote (20) */
    unsigned latency_pct;    /* allowed increase of the median latency, % (25) */
};

/* One admin.origins entry, or an Origin field's value: [scheme://]host[:port]. */
struct adm_origin {
    char scheme[8]; /* "http" or "https"; "" when not given (an entry: either) */
    char host[256]; /* lower case; an IPv6 literal in brackets */
    unsigned port;  /* 0 when not given (an entry: any) */
};

/* Parses <s> into <o>: an optional scheme (http or https) and "://", a host
 * (a DNS name, an IPv4 address or a bracketed IPv6 one) and an optional
 * port 1..65535, nothing else (no path, no userinfo, no wildcard). 0, or
 * -1 with a reason fragment in <why>. */
int adm_origin_parse(struct adm_origin *o, const char *s, char *why, size_t cap);

struct adm_admin {
    struct adm_addr addr;     /* numeric; default 127.0.0.1:9901 */
    char *token_file;         /* NULL if none (the gateway decides whether one is needed) */
    char *state_dir;          /* NULL if none */
    unsigned heap_reserve_mb; /* heap kept warm for the admin thread (48; 0: none); read at start */
    /* names the API is also reached by, beyond its own address and
     * localhost (Host and Origin checks, admin/api_guard.c); live */
    struct adm_origin *origins;
    size_t norigins;
};

struct adm_config {
    unsigned workers; /* 1..256, or 0 = not set: see adm_config_workers() */
    struct adm_listener *listeners;
    size_t nlisteners; /* >= 1 */
    struct adm_upstream *upstreams;
    size_t nupstreams;
    struct adm_route *routes;
    size_t nroutes;
    struct adm_policy *policies; /* "policies" (admin/policy.h), in document order */
    size_t npolicies;
    struct adm_router router;
    struct adm_cidr *trusted_proxies;
    size_t ntrusted_proxies;
    struct adm_client_ip *client_ip; /* NULL: not configured (the peer, no X-Real-IP) */
    struct adm_limits limits;
    struct adm_timeouts timeouts;
    struct adm_http2 http2;
    struct adm_access_log access_log;
    enum adm_log_format access_log_format;
    enum adm_log_level log_level;
    struct adm_resolver_cfg resolver;
    struct adm_rollout_cfg rollout;
    struct adm_admin admin;
    char *user, *group; /* drop to them after binding (NULL: stay as started) */
    /* "fleet": this node takes its routes, upstreams, certificates and
     * ticket secret from etcd (admin/fleet.h); NULL: a standalone node.
     * Restart-only. */
    struct adm_fleet_cfg *fleet;
    /* "sampling": requests each worker keeps in its ring of the live
     * sample (admin/sample.h), 0..65536, 4096; 0: none. Live. */
    unsigned sampling;
    json_t *json; /* the document as given (one owned reference); do not modify */
    /* From adm_config_from_json_bound(): the routes' table with the binder's
     * udata. A user takes it by setting this to NULL; otherwise it is freed
     * with the config. NULL from every other parser. */
    rt_table *table;
};

/* What adm_config_from_json_bound() attaches to each route of the table it
 * keeps: make(route, arg) returns the udata (NULL = out of memory), free
 * releases it. make runs after every other check, so route fields such as
 * upstream_index and timeout_ms are final. */
struct adm_route_binder {
    void *(*make)(const struct adm_route *r, void *arg);
    void (*free)(void *udata);
    void *arg;
};

/* Parses and validates <len> bytes of JSON. Returns the config, or NULL with
 * every error appended to <errs> (which may be NULL; it is not cleared
 * first). On out of memory returns NULL with errs->nomem set. */
struct adm_config *adm_config_parse(const char *json, size_t len, struct adm_errors *errs);
/* The JSON document of <len> bytes of <text> (NULL: none), owned by the
 * caller; NULL with its one error in <errs>: a syntax error with its line and
 * column, a duplicate key at its path, an empty text named as such. Each
 * message starts with "<file>: " when <file> is not NULL (a text read from
 * that file). */
json_t *adm_config_doc(const char *text, size_t len, const char *file, struct adm_errors *errs);
/* How many of the <n> bytes at <s> are JSON white space before anything else:
 * <n> for a text that holds no value at all. */
size_t adm_json_blank(const char *s, size_t n);
/* Same for an already parsed document. <root> is borrowed: its top-level
 * object and its routes array are copied, so the caller may add, replace or
 * remove their members afterwards; the values below them are shared and must
 * not be changed in place (replace them instead). */
struct adm_config *adm_config_from_json(const json_t *root, struct adm_errors *errs);
/* adm_config_from_json(), keeping the table the validator built to find
 * conflicts in cfg->table, its routes bound by <bind> (NULL: not kept). */
struct adm_config *adm_config_from_json_bound(const json_t *root,
                                              const struct adm_route_binder *bind,
                                              struct adm_errors *errs);
/* Reads and parses the file <path> (at most 64 MiB). I/O and syntax errors
 * are reported with path "" and the file name first in the message. */
struct adm_config *adm_config_load_file(const char *path, struct adm_errors *errs);
/* The same, also handing over the bytes it parsed when it returns a config
 * (<text> may be NULL): *<text> of *<len> bytes, freed by the caller. What
 * is hashed as the file's source is then what was parsed, not a second
 * read that a rename in between would make another file's. */
struct adm_config *adm_config_load_file_text(const char *path, char **text, size_t *len,
                                             struct adm_errors *errs);
/* Reads the rest of the open file <f>, named <path> in messages, under the
 * same 64 MiB cap: a buffer of *<len> bytes that the caller frees. NULL
 * after adding why (too large, a read error) to <errs> as
 * adm_config_load_file() does; <f> stays open either way. For a reader that
 * needs the JSON itself (a SIGHUP reload). */
char *adm_config_read_file(FILE *f, const char *path, size_t *len, struct adm_errors *errs);
/* The built-in default config (one listener on 0.0.0.0:8080, a GET / page,
 * admin on 127.0.0.1:9901). NULL only on out of memory. */
struct adm_config *adm_config_default(void);
/* Its JSON text (static storage). */
const char *adm_config_default_json(void);
/* Frees <c> and everything it owns; NULL is a no-op. */
void adm_config_free(struct adm_config *c);

/* The document as compact JSON with sorted keys (what GET /config serves).
 * The caller frees it with free(). NULL on out of memory. */
char *adm_config_canonical(const struct adm_config *c);
/* c->workers, or the number of online CPUs (clamped to 1..256) when unset. */
unsigned adm_config_workers(const struct adm_config *c);

/* The bearer token in the file <path> into <buf> (<cap> bytes, NUL-
 * terminated): its first cap - 1 bytes without the trailing newlines, CRs
 * and spaces. The one reading of a token file, for a start and for the
 * checks below alike. 0, or -1 with <why> (unreadable, or empty). */
int adm_token_file_read(const char *path, char *buf, size_t cap, char *why, size_t why_cap);

/* Where a relative <path> of a config is looked for, for an error about it:
 * " (relative to DIR, the directory switchyard started in)" into <buf>,
 * or "" for an absolute path. Every path a config names (a certificate, a
 * key, the token file, the state directory, the access log, the hosts
 * file) is opened as the process finds it, so a relative one is resolved
 * against the working directory of the start, whoever pushed the config
 * from wherever. Keeps errno. Returns <buf>. */
const char *adm_path_where(const char *path, char *buf, size_t cap);
/* The bytes of the file <path>, at most <cap> of them, NUL-terminated after
 * *<len> (the caller frees them); NULL with <why>: "cannot read ..." naming
 * the file (and where a relative one was looked for), or that it is too
 * large. For the files a config names that are read when it is parsed
 * (certificates, keys, CAs, a password). config_parse.c. */
char *adm_read_small_file(const char *path, size_t cap, size_t *len, char *why, size_t why_cap);
/* What a start checks beyond the schema, so that a config accepted by a
 * push, a SIGHUP or --check also starts (config_lifecycle.c): the token
 * file readable and not empty, no open admin API off loopback, the state
 * directory and the access-log file usable. Binding is not tried. Appends
 * one error per problem to <errs>; returns how many. Nothing is created. */
size_t adm_config_check_env(const struct adm_config *c, struct adm_errors *errs);
/* The restart-only keys that differ between the running <old> and <c>:
 * workers, admin.* but admin.origins, user, group, fleet (listeners are
 * live: the gateway binds them). Appends one error per key ("needs a restart") to <errs>; returns
 * how many. */
size_t adm_config_restart_diff(const struct adm_config *old, const struct adm_config *c,
                               struct adm_errors *errs);
/* Lookups by name / id; NULL when absent. Linear. */
const struct adm_upstream *adm_config_upstream(const struct adm_config *c, const char *name);
const struct adm_route *adm_config_route(const struct adm_config *c, const char *id);

/* Builds a router table from <c>'s routes (options from c->router) in one
 * transaction. Each route's udata is make_udata(route, arg), or the route
 * itself (borrowed: the table must not outlive <c>) when make_udata is NULL;
 * make_udata returning NULL means out of memory. <udata_free> is handed to
 * rt_table_new(). Route names are the route ids. Returns the table, or NULL
 * with errors appended to <errs> (may be NULL). Errors name the route's path:
 *     /routes/5/path: conflicts with route "get-user" (GET /users/{id})
 * On failure every udata already made is released through <udata_free>. */
rt_table *adm_config_build_routes(const struct adm_config *c,
                                  void *(*make_udata)(const struct adm_route *r, void *arg),
                                  void (*udata_free)(void *udata), void *arg,
                                  struct adm_errors *errs);

#endif
