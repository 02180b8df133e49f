/*
 * fleet.h - a fleet node's config: the node's own file (listeners, admin,
 * workers, user, state_dir and the other settings) joined with the
 * fleet-wide objects kept in etcd under one prefix:
 *
 *   <prefix>upstreams/<name>        the body of PUT /upstreams/{name}
 *   <prefix>routes/<id>             a route as in the config; the key names its id
 *   <prefix>certificates/<name>     {"cert_pem", "key_pem", "hosts"}: served by
 *                                   every TLS listener whose certificates is "fleet"
 *   <prefix>tls/ticket_secret       the secret session-ticket keys derive from
 *
 * struct adm_fleet is the fleet's objects at one etcd revision, as etcd
 * handed them over (the values' bytes, each key's mod_revision). It is
 * pure data: no I/O, no logging; the admin thread owns it (admin/etcd.h
 * feeds it, admin/fleet_sync.c applies it).
 *
 * adm_fleet_compose() makes the one config document the apply pipeline
 * validates: the node's document with "upstreams" and "routes" from the
 * fleet and each "certificates": "fleet" replaced by the fleet's
 * certificates. An object that cannot even be placed (not JSON, a key
 * outside the layout, a route whose "id" is not its key's) is an error of
 * its key; adm_fleet_blame() turns the validator's errors on the composed
 * document (JSON pointers) into errors of the keys they came from. Either
 * way the caller keeps its last good config: a node never serves a
 * mixture of two revisions.
 */
#ifndef SY_ADMIN_FLEET_H
#define SY_ADMIN_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "admin/errors.h"
#include "admin/etcd.h"

/* The node file's "fleet" (parsed by config_fleet.c into cfg->fleet). */
struct adm_fleet_cfg {
    char **endpoints; /* "http://127.0.0.1:2379", ... */
    size_t nendpoints;
    char *prefix;                         /* ends in '/'; "/switchyard/" by default */
    char *ca_file, *cert_file, *key_file; /* etcd's TLS; NULL: none */
    char *username;                       /* NULL: no auth */
    char *password_file;                  /* the password's file, as written */
    char *password;                       /* read from it at parse time (never shown) */
    unsigned dial_timeout_ms, request_timeout_ms, watch_idle_ms;
    unsigned write_wait_ms; /* how long an API write waits to see its revision applied */
};
void adm_fleet_cfg_free(struct adm_fleet_cfg *c);

/* ---- the fleet's objects ---- */

struct adm_fleet;

struct adm_fleet *adm_fleet_new(const char *prefix);
void adm_fleet_free(struct adm_fleet *f);
/* Replaces every object with the <n> keys of <kvs> at revision <rev> (in
 * any order; of a key given twice the later wins; a NULL value is
 * skipped). Returns how many keys it added, changed or removed (the
 * difference), -1 out of memory (<f> unchanged). A key whose value is the
 * same bytes is not counted (its mod_revision is still taken) and is not
 * parsed again. */
long adm_fleet_reset(struct adm_fleet *f, int64_t rev, const struct adm_etcd_kv *kvs, size_t n);
/* Applies one revision's events (a NULL value deletes). Returns how many
 * keys changed (counted as adm_fleet_reset() does: deleting an absent key
 * or putting the same value again is 0), -1 out of memory (<f>
 * unchanged). The revision becomes <rev> even when nothing changed. */
long adm_fleet_apply(struct adm_fleet *f, int64_t rev, const struct adm_etcd_kv *evs, size_t n);
/* The revision <f> is at (0: never read). */
int64_t adm_fleet_revision(const struct adm_fleet *f);
/* A deep copy of <f> (NULL out of memory): the last good fleet, kept beside
 * the one being tried. */
struct adm_fleet *adm_fleet_dup(const struct adm_fleet *f);
/* The value of <key> (a full key) and its mod_revision, or NULL (and 0).
 * The value is NUL-terminated after its <len> bytes; it lives until the
 * key changes. <len> and <mod> may be NULL. */
const char *adm_fleet_get(const struct adm_fleet *f, const char *key, size_t *len, int64_t *mod);
/* How many keys <f> holds. */
size_t adm_fleet_count(const struct adm_fleet *f);

/* {"revision": "<rev>", "kvs": {"<key>": {"value": "<text>", "mod": "<rev>"}, ...}}
 * for the state directory (new reference; NULL out of memory), and back
 * into an empty <f> (-1 with an error in <errs> when <saved> is not such a
 * document). A key or value that a JSON string cannot hold as it is (not
 * UTF-8, or a NUL byte) goes into "kvs_base64": [{"key": B64, "value":
 * B64, "mod": "<rev>"}, ...] instead, a member present only then. */
json_t *adm_fleet_save(const struct adm_fleet *f);
int adm_fleet_load(struct adm_fleet *f, const json_t *saved, struct adm_errors *errs);

/* ---- composing the config ---- */

/* The config document of node document <node> (borrowed: the node file's,
 * which must not have "routes" or "upstreams": an error at "/routes" or
 * "/upstreams" then) joined with <f>'s objects: "upstreams" an object of
 * each upstreams/NAME (a "name" member, which must be NAME, dropped),
 * "routes" the routes in key order (each with "id" set from its key; an
 * "id" that differs is an error), each listener's "certificates": "fleet"
 * the array of certificates/NAME in key order (maybe empty; a "cert" or
 * "key" file member is an error: a fleet's certificates are inline), and
 * "ticket_secret" in every listener "tls" that has none when
 * tls/ticket_secret exists (at least 32 bytes of UTF-8 without NUL), and
 * "policies" an object of each policies/NAME (the node's file must not
 * have "policies" either).
 * Values are parsed when stored, not here; the routes, upstreams and
 * certificates of the composed document are shared with <f>: never change
 * them in place. Returns a new reference,
 * or NULL with every key's error in <errs>: each error's path is the etcd
 * key (or the node file's JSON pointer for a node file problem), its
 * message the reason. */
json_t *adm_fleet_compose(const struct adm_fleet *f, const json_t *node, struct adm_errors *errs);
/* Appends to <out> each error of <in> (the validator's, on the document
 * adm_fleet_compose() made of <f> and <node>) with its path turned into the
 * key of the object it is about, the rest of the pointer starting the
 * message: "/routes/3/upstream: unknown upstream \"x\"" becomes, at the key
 * of the fourth route in key order, "/upstream: unknown upstream \"x\"".
 * So do /upstreams/NAME/... and /policies/NAME/... (NAME unescaped per
 * RFC 6901), a listener's
 * /tls/certificates/K/... when the node's file says "fleet" there (the
 * Kth certificate in key order) and its /tls/ticket_secret when the
 * fleet's secret was put there. An error about the node's own keys keeps
 * its JSON pointer. */
void adm_fleet_blame(const struct adm_fleet *f, const json_t *node, const struct adm_errors *in,
                     struct adm_errors *out);

#endif
