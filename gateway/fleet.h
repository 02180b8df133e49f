/*
 * fleet.h - a fleet node's start and stop (fleet.c): what it serves before
 * etcd answers, and the etcd sync on the admin thread. On the main (admin)
 * thread only.
 */
#ifndef SY_GATEWAY_FLEET_H
#define SY_GATEWAY_FLEET_H

#include "gateway/gateway.h"

/* What --check adds for a fleet node's file <cfg>: its document joined with
 * no fleet objects must be valid (no routes or upstreams of its own). The
 * number of errors appended to <errs>. */
size_t gw_fleet_check(const struct adm_config *cfg, struct adm_errors *errs);
/* The config a fleet node (<cfg>->fleet set) starts with: the node's
 * document (<file_doc>, the file's; with <from_state> the one persisted
 * beside the fleet, which has the API's changes of node keys) joined with
 * the fleet persisted in <state_dir> (NULL: none), or without it when it
 * does not fit. Takes <cfg>; NULL after logging why (the node's own
 * document is invalid). */
struct adm_config *gw_fleet_load(struct adm_config *cfg, int from_state, const char *state_dir,
                                 const json_t *file_doc);
/* The etcd sync of <cfg> (the live config) for <api>, applying through
 * <pipe>; nothing without a fleet. -1 after logging why. */
int gw_fleet_start(struct adm_api *api, struct adm_pipeline *pipe, const struct adm_config *cfg,
                   const char *state_dir);
void gw_fleet_stop(void);

#endif
