/*
 * diff_json.h - the groups of a replay (router/diff.h) as JSON, for the two
 * that answer them: the admin API's dry runs and switchyard-route --diff.
 * Not a part of the pure router library: it needs jansson.
 */
#ifndef SY_ROUTER_DIFF_JSON_H
#define SY_ROUTER_DIFF_JSON_H

#include <jansson.h>

#include "router/diff.h"

/* [{"from", "to", "count", "example"}, ...] of the <n> groups <g>, in
 * their order. NULL on out of memory. */
json_t *rt_diff_groups_json(const struct rt_diff_group *g, size_t n);

#endif
