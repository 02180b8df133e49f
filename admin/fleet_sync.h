/*
 * fleet_sync.h - a fleet node's etcd source: the etcd client (admin/etcd.h)
 * feeding the fleet's objects (admin/fleet.h) into the admin thread's one
 * apply pipeline (admin/pipeline.h).
 *
 * Each etcd revision becomes one composed document, validated and swapped
 * in as one snapshot; one that does not validate is not applied: the node
 * keeps its last good config, and the keys at fault are its errors until a
 * later revision fixes or deletes them. The last good fleet is kept in the
 * state directory (fleet.json) with the node's own document, so that a node
 * started while etcd is down serves it.
 *
 * The admin API's writes of routes and upstreams on a fleet node go to
 * etcd instead (adm_fleet_sync_write): validated first, written in a
 * transaction (If-Match a compare on the key's mod_revision), answered once
 * this node has applied that revision.
 */
#ifndef SY_ADMIN_FLEET_SYNC_H
#define SY_ADMIN_FLEET_SYNC_H

#include <jansson.h>

#include "admin/api.h"
#include "admin/errors.h"
#include "admin/fleet.h"
#include "admin/pipeline.h"

struct adm_fleet_sync;
struct adm_req;
struct adm_changes;

/* What the sync reports: <level> 0 notice, 1 warning, 2 error. */
struct adm_fleet_sync_hooks {
    void (*log)(void *arg, int level, const char *line);
    void *arg;
};

/* The sync of the fleet <fc> (copied) for <api>, which it answers the
 * writes of, and <pipe>, which it applies each revision through (both
 * borrowed, outliving it); the live config was composed from the node
 * document <node> (borrowed) and the fleet <good> (taken; NULL: empty),
 * last persisted in <state_dir> (NULL: not persisted). It registers itself
 * with <pipe> (its fleet). NULL with <why>. */
struct adm_fleet_sync *adm_fleet_sync_new(struct adm_api *api, struct adm_pipeline *pipe,
                                          const struct adm_fleet_cfg *fc, const json_t *node,
                                          struct adm_fleet *good, const char *state_dir,
                                          const struct adm_fleet_sync_hooks *hooks, char *why,
                                          size_t cap);
/* Connects to etcd and keeps the node in sync from then on. */
void adm_fleet_sync_start(struct adm_fleet_sync *fs);
void adm_fleet_sync_free(struct adm_fleet_sync *fs);

/* ---- start-up ---- */

/* The fleet and node document persisted in <state_dir> for <fc> (NULL,
 * NULL when none, or when it was kept for another prefix). A file that
 * cannot be read is an error in <errs> and a start without it. */
int adm_fleet_sync_load(const char *state_dir, const struct adm_fleet_cfg *fc,
                        struct adm_fleet **fleet, json_t **node, struct adm_errors *errs);

/* ---- what the pipeline and the admin API ask of it (pipeline.c,
 * api_apply.c, api_routes.c) ---- */

/* The document to validate for a push of node document <node>: the node's
 * keys from it, the fleet's objects from the last good fleet. With
 * <dropped> (PUT /config) its "routes" and "upstreams" are dropped (and
 * *dropped says whether they differed from the live ones); without (a
 * file's, SIGHUP) they are an error, as at a start. NULL with errors in
 * <errs>. */
json_t *adm_fleet_sync_compose_node(struct adm_fleet_sync *fs, const json_t *node, int *dropped,
                                    struct adm_errors *errs);
/* <node> (borrowed) is the node's document now: it was applied. */
void adm_fleet_sync_node_applied(struct adm_fleet_sync *fs, const json_t *node);
/* The node's document (borrowed): what a SIGHUP of an unchanged file
 * applies again. */
const json_t *adm_fleet_sync_node(const struct adm_fleet_sync *fs);
/* Writes the route <id> or the upstream <name> (<what> "route" or
 * "upstream") to etcd: <value> its new object (borrowed), NULL to delete
 * it; <create>: only if it does not exist. If-Match's revision (0: none)
 * becomes a compare on the key's mod_revision. Answers <req> later, with
 * <code> and the write answer once this node applied the revision. */
void adm_fleet_sync_write(struct adm_fleet_sync *fs, struct adm_req *req, const char *what,
                          const char *name, const json_t *value, int create, int64_t if_rev,
                          int code, const struct adm_changes *ch);
/* GET /config on a fleet node (a new reference): the node's document as
 * it is ("certificates": "fleet" kept, no injected ticket secret), with
 * the live routes and upstreams, which come from etcd. */
json_t *adm_fleet_sync_config(struct adm_fleet_sync *fs);
/* The etcd revision the live config was composed at. */
int64_t adm_fleet_sync_revision(const struct adm_fleet_sync *fs);
/* GET /status's "fleet" object (new reference). */
json_t *adm_fleet_sync_status(const struct adm_fleet_sync *fs);
/* /metrics' fleet lines, appended to <out>. */
void adm_fleet_sync_metrics(const struct adm_fleet_sync *fs, struct evbuffer *out);

#endif
