/*
 * route_config.h - switchyard-route's reader of a Switchyard config's routes
 * (--config FILE.json) and its --diff of two of them; a part of the tool,
 * not of the router library.
 */
#ifndef SY_ROUTER_ROUTE_CONFIG_H
#define SY_ROUTER_ROUTE_CONFIG_H

#include "router/router.h"

#include <stdio.h>

/* Makes a route's udata for the route id <name>, and stores in *<stored> a
 * copy of the name that lives as long as the udata. NULL: out of memory. */
typedef void *(*route_config_make_fn)(const char *name, const char **stored);

/* The table of the routes of the config file <path>, with its router
 * options; each route's udata made by <make>, freed by <udata_free>. NULL
 * with the reason (the file, the JSON path) on stderr. */
rt_table *route_config_load(const char *path, route_config_make_fn make,
                            void (*udata_free)(void *udata));

/* --diff (route_diff.c): replays the request lines of <in> ("METHOD HOST
 * PATH" or JSON access-log lines) against the routes of the configs
 * <old_path> and <new_path> and prints the groups (router/diff.h) as JSON
 * on stdout. Returns the exit status: 0, or 1 when a config cannot be
 * read or a line is neither form (counted as "skipped"). */
int route_diff_main(const char *old_path, const char *new_path, FILE *in, route_config_make_fn make,
                    void (*udata_free)(void *udata));

#endif
