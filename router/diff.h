/*
 * diff.h - what a change of routing table does to a sample of requests:
 * each request is looked up in the old table and in the new one, and the
 * requests that end elsewhere are grouped by where they went from and to
 * (a route id, or the router's own answer: "404", "405", "301", "308",
 * "options"), largest group first. The admin API's dry runs and
 * switchyard-route --diff share it.
 *
 * Pure: it reads the two tables (never changes them) and the caller's
 * requests; it allocates its groups and nothing else that outlives a call.
 */
#ifndef SY_ROUTER_DIFF_H
#define SY_ROUTER_DIFF_H

#include "router/router.h"

/* One request to replay: its method, host (len 0: none) and normalized
 * path; borrowed for the length of one call of the iterator. */
struct rt_diff_req {
    const char *method, *host, *path;
    size_t mlen, hlen, plen;
};

/* The sample: fills <q> with the next request and returns 1, or returns 0
 * at the end. */
typedef int (*rt_diff_next_fn)(void *arg, struct rt_diff_req *q);

/* For a request that hits a route of the same id <id> in both tables: what
 * changed in that route beyond its pattern, as the caller's bits (0:
 * nothing). NULL: never asked. */
typedef unsigned (*rt_diff_same_fn)(void *arg, const char *id);

/* A group of requests: all went from <from> to <to> (or, for same-route
 * groups, stay on route <from> = <to>, whose <changes> the caller named). */
struct rt_diff_group {
    const char *from, *to; /* borrowed from the tables, or static */
    unsigned changes;
    size_t count;
    char *example; /* "METHOD PATH" of the first one (owned) */
};

struct rt_diff {
    size_t sampled;   /* requests replayed */
    size_t unchanged; /* those ending where they did (same-route ones too) */
    struct rt_diff_group *changed, *same;
    size_t nchanged, nsame; /* each sorted by count, largest first */
};

/* Replays every request of <next>(<arg>) against <old> and <new> into
 * <d> (the group labels borrow from the tables: they stay valid while
 * both live). <same>(<sarg>) is asked about the requests that keep their
 * route id. 0, or -1 on out of memory (<d> is then empty). */
int rt_diff_run(const rt_table *old, const rt_table *new_, rt_diff_next_fn next, void *arg,
                rt_diff_same_fn same, void *sarg, struct rt_diff *d);

/* Frees what rt_diff_run() put in <d>. */
void rt_diff_clear(struct rt_diff *d);

/* The label of a lookup's outcome: the route's id (its pattern when it
 * has none) or the router's own answer ("404", "405", "301", "308",
 * "options"). */
const char *rt_diff_label(const struct rt_match *m);

#endif
