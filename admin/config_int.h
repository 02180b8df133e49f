/*
 * config_int.h - what the config parser's files share (admin/config*.c):
 * the parse context with its JSON pointer and error list, typed getters that
 * report their own errors, per-object key tables, and each section's entry
 * point into the root key table (config.c).
 *
 * A section adds a key by adding a row to its table (struct adm_cf_field):
 * a plain number, flag or path goes straight into the struct through an
 * offset, anything else through a function of its own; a key people put in
 * the wrong object is a row whose .misplaced says where it belongs. A new
 * section is a file with a table and an adm_cf_<section>() entry point, a
 * row in the root table, and its part of adm_config_free()
 * (adm_cf_<section>_free()).
 */
#ifndef SY_ADMIN_CONFIG_INT_H
#define SY_ADMIN_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "admin/config.h"

#define ADM_CF_MAX_NAME 128        /* route ids, upstream names */
#define ADM_CF_MAX_PATHNAME 4096   /* token_file, state_dir, access_log */
#define ADM_CF_MAX_MS 86400000LL   /* one day */
#define ADM_CF_MAX_TABLE (1 << 22) /* upstreams.NAME.table_size: 16 MiB of Maglev table */
#define ADM_CF_MAX_ROUTES 10000000 /* limits.max_routes */

/* ASCII classes, whatever the process locale says. */
static inline int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline int is_alnum(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline char to_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* ---- the parse context: error list, current JSON pointer ---- */

struct adm_cf {
    struct adm_errors *errs;
    struct adm_config *c;
    char *path; /* the JSON pointer of the value being parsed */
    size_t plen, pcap;
    size_t nerr; /* errors reported by this parse */
    int nomem;
    json_t *upstream_index;       /* name -> index into c->upstreams */
    unsigned char *route_ok;      /* per route: id, pattern and methods usable by the router */
    unsigned char *route_timeout; /* per route: timeout_ms given */
    const struct adm_route_binder *bind; /* keep the routes' table, with this udata */
};

/* Appends "/<key>" (escaped per RFC 6901) or "/<i>" to the current path and
 * returns the previous length for adm_cf_pop(). */
size_t adm_cf_push_key(struct adm_cf *x, const char *key);
size_t adm_cf_push_index(struct adm_cf *x, size_t i);
void adm_cf_pop(struct adm_cf *x, size_t mark);

/* Reports an error about the value at the current path, about its member
 * <key>, or at the absolute <path>. */
void adm_cf_err(struct adm_cf *x, const char *fmt, ...) ADM_PRINTF(2, 3);
void adm_cf_err_key(struct adm_cf *x, const char *key, const char *fmt, ...) ADM_PRINTF(3, 4);
void adm_cf_err_at(struct adm_cf *x, const char *path, const char *fmt, ...) ADM_PRINTF(3, 4);

/* Folds the result of a parser that reports at a path of its own
 * (tls_config.c) into <x>: <rc> errors reported, or -1 out of memory. */
void adm_cf_count(struct adm_cf *x, int rc);

/* strdup and calloc (n 0 allowed) that set x->nomem when they fail. */
char *adm_cf_strdup(struct adm_cf *x, const char *s);
void *adm_cf_calloc(struct adm_cf *x, size_t n, size_t size);

/* Every byte of <s> is alphanumeric or in <extra>; <s> is 1..max bytes. */
int adm_cf_is_name(const char *s, const char *extra, size_t max);

/* Quotes <s> for a message: "..." with escapes, cut after about 60 bytes. */
struct adm_cf_qbuf {
    char s[280];
};
const char *adm_cf_quote(struct adm_cf_qbuf *q, const char *s);
/* The edits (case aside) between <a> and <b>, each at most 32 bytes (99 for
 * a longer one): how near a misspelt name is to a real one. */
size_t adm_cf_edit_distance(const char *a, const char *b);
/* The upstream of <c> nearest to the unknown name <name> (at most two edits
 * away), or NULL: what a route or a policy that names <name> probably
 * meant (config.c). */
const char *adm_cf_nearest_upstream(const struct adm_config *c, const char *name);

/* ---- typed getters: each reports its own error and returns failure ---- */

const char *adm_cf_type_name(const json_t *v); /* "an object", "a string", ... */
int adm_cf_want_object(struct adm_cf *x, const json_t *v);
int adm_cf_want_array(struct adm_cf *x, const json_t *v);
/* The string value of <v>, or NULL after reporting why not. */
const char *adm_cf_str(struct adm_cf *x, const json_t *v, int nonempty);
int adm_cf_int(struct adm_cf *x, const json_t *v, long long min, long long max, long long *out);
/* A string naming a file or directory (copied). */
char *adm_cf_pathname(struct adm_cf *x, const json_t *v);
/* Picks one of <names> for a string value; -1 after reporting. */
int adm_cf_enum(struct adm_cf *x, const json_t *v, const char *const *names, size_t n);

/* ---- key tables ---- */

enum fkind {
    FK_UINT, /* unsigned at <off>, <min>..<max> */
    FK_U64,  /* uint64_t at <off>, <min>..<max> */
    FK_BOOL, /* int at <off> */
    FK_PATH, /* char * at <off>: a path name */
    FK_FN,   /* <fn> does it */
};

#define F_REQUIRED 1u

typedef void (*adm_cf_field_fn)(struct adm_cf *x, const json_t *v, void *target);

struct adm_cf_field {
    const char *key;
    enum fkind kind;
    unsigned flags;
    size_t off;
    long long min, max;
    adm_cf_field_fn fn;
    /* Not a key of this object but one users put here: where it belongs
     * ("a route key; ..."), the error for it. Such a row is never offered
     * as a choice; a typo nearest to it is told this instead. */
    const char *misplaced;
};

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* Parses the members of object <obj> (already checked to be one) into
 * <target> through the table <f>; reports unknown and missing keys. Returns
 * the set of keys present, bit i for f[i]. */
uint32_t adm_cf_fields(struct adm_cf *x, const json_t *obj, const struct adm_cf_field *f, size_t nf,
                       void *target);

/* ---- the sections: the root table's functions, <target> the config ---- */

void adm_cf_listeners(struct adm_cf *x, const json_t *v, void *target); /* config_listeners.c */
void adm_cf_upstreams(struct adm_cf *x, const json_t *v, void *target); /* config_upstreams.c */
void adm_cf_routes(struct adm_cf *x, const json_t *v, void *target);    /* config_routes.c */
void adm_cf_admin(struct adm_cf *x, const json_t *v, void *target);     /* config_admin.c */
void adm_cf_user(struct adm_cf *x, const json_t *v, void *target);      /* config_admin.c */
void adm_cf_group(struct adm_cf *x, const json_t *v, void *target);     /* config_admin.c */
void adm_cf_fleet(struct adm_cf *x, const json_t *v, void *target);     /* config_fleet.c */
void adm_cf_rollout(struct adm_cf *x, const json_t *v, void *target);   /* config_rollout.c */
/* config_policies.c: the top-level "policies", a route's "policies"
 * (<target> the route), the routes' references resolved (check_cross),
 * and freeing */
void adm_cf_policies(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_route_policies(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_policies_check(struct adm_cf *x);
void adm_cf_policies_free(struct adm_config *c);
/* config_settings.c */
void adm_cf_router(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_trusted_proxies(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_limits(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_timeouts(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_http2(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_access_log(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_access_log_format(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_log_level(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_resolver(struct adm_cf *x, const json_t *v, void *target);
/* config_clientip.c: the top-level "client_ip"; one such object (a
 * listener's too), NULL after reporting; a list of CIDRs into *out, *n */
void adm_cf_client_ip(struct adm_cf *x, const json_t *v, void *target);
struct adm_client_ip *adm_cf_client_ip_parse(struct adm_cf *x, const json_t *v);
void adm_cf_cidrs(struct adm_cf *x, const json_t *v, struct adm_cidr **out, size_t *n);
void adm_client_ip_free(struct adm_client_ip *ci);

/* config_headers.c: a route's request_headers (<response> 0) or
 * response_headers into *out; their placeholders checked against
 * <pattern> once it is valid (under the member <key> of the route at
 * x->path); freeing. */
void adm_cf_hdr_actions(struct adm_cf *x, const json_t *v, struct adm_hdr_actions **out,
                        int response);
void adm_cf_hdr_actions_check(struct adm_cf *x, const char *key, const struct adm_hdr_actions *a,
                              const char *pattern);
void adm_hdr_actions_free(struct adm_hdr_actions *a);

/* Whether header name <name> (a token) is allowed where <arg> says, after
 * reporting why not. */
typedef int (*adm_cf_name_rule)(struct adm_cf *x, const char *name, const void *arg);

/* Reads the object <v> of "Name": "value" strings (a direct response's
 * headers, a rule's set or add) into a new array *<out> of *<nout>
 * fields: each name an HTTP token that <rule>(x, name, <arg>) allows,
 * each value without control characters or outer whitespace and, with
 * <templates>, a template whose placeholders are well formed. A field in
 * error is reported at its path and left out (config_headers.c). */
void adm_cf_header_fields(struct adm_cf *x, const json_t *v, adm_cf_name_rule rule, const void *arg,
                          int templates, struct adm_header **out, size_t *nout);
/* Frees the <n> fields of <h> and the array. */
void adm_cf_header_fields_free(struct adm_header *h, size_t n);

/* config_upstream_h2.c: a pool's HTTP/2 and gRPC keys, functions of
 * config_upstreams.c's rows: upstreams.NAME.protocol and
 * retry_on_grpc_status (<target> the pool), health_check.type and
 * .service (<target> the check). Then the rules across keys, once the
 * object is read whole: a check's (adm_cf_check_rules, <hv> its document,
 * at its path) and a pool's (adm_cf_up_check, <uv> its document, at its
 * path): protocol against "tls", a gRPC check against protocol. */
void adm_cf_up_protocol(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_up_retry_on_grpc(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_check_type(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_check_service(struct adm_cf *x, const json_t *v, void *target);
void adm_cf_check_rules(struct adm_cf *x, const json_t *hv, const struct adm_health_check *h);
void adm_cf_up_check(struct adm_cf *x, const json_t *uv, const struct adm_upstream *u);

/* Each section frees what it parsed into <c> (half-built configs too). */
void adm_cf_listeners_free(struct adm_config *c);
void adm_cf_upstreams_free(struct adm_config *c);
void adm_cf_routes_free(struct adm_config *c);
void adm_cf_admin_free(struct adm_config *c);
void adm_cf_settings_free(struct adm_config *c);

/* Inserts the routes of <c> (only those with ok[i], when <ok> is given) into
 * a new table (config_routes.c). Errors go to <errs>, counted in *nerr; out
 * of memory sets *nomem. Returns the table, or NULL when anything failed. */
rt_table *adm_cf_build_routes(const struct adm_config *c, const unsigned char *ok,
                              void *(*make_udata)(const struct adm_route *r, void *arg),
                              void (*udata_free)(void *udata), void *arg, struct adm_errors *errs,
                              size_t *nerr, int *nomem);

#endif
