/*
 * diff_json.c - a replay's groups as JSON (router/diff_json.h).
 */
#include "router/diff_json.h"

json_t *rt_diff_groups_json(const struct rt_diff_group *g, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:s}", "from", g[i].from, "to",
                                               g[i].to, "count", (json_int_t)g[i].count, "example",
                                               g[i].example)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}
