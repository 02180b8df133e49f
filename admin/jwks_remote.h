/*
 * jwks_remote.h - the key sets of the jwt policies' "jwks_url" (Envoy's
 * remote_jwks), kept fresh by the admin thread: one fetcher (jwks_fetch.h)
 * per distinct URL and CA that a policy of some snapshot names, and each
 * new set handed to the workers of those policies.
 *
 * A policy's state (struct adm_jwt_state, policy_types.h) attaches when a
 * snapshot first holds the policy and detaches when the last snapshot
 * holding it is freed. So a fetcher starts with the first config that
 * names its URL, and stops once no snapshot a worker can reach names it;
 * a push that keeps the URL, even one that changes the policy (a new
 * state), finds the fetcher running with its last good set: no new fetch,
 * no window without keys.
 *
 * How a new set reaches the workers: stored into each attached state's
 * <keys> pointer, the replaced set freed after a grace period of the
 * snapshots' swap (adm_swap_fence). Not by a snapshot rebuild: a rebuild
 * would parse the live document again (and read its files again: a
 * certificate or jwks_file changed on disk would go live without being
 * pushed), and every refresh would cost a whole snapshot. The pointer is
 * the policy's own, reached only through a snapshot a worker pinned, read
 * once per verification.
 *
 * Admin thread only. Process-wide, like the swap: snapshots make policy
 * states through the policy kinds table, which carries no context. Until
 * adm_rjwks_start (--check, unit tests) nothing is fetched: a policy keeps
 * the keys of its files only.
 */
#ifndef SY_ADMIN_JWKS_REMOTE_H
#define SY_ADMIN_JWKS_REMOTE_H

#include <jansson.h>

struct event_base;
struct evbuffer;
struct adm_swap;

/* A token whose kid the set lacks makes its URL fetched again at once, at
 * most once in this many seconds (a rotation published between two
 * refreshes; and no more than that, whatever kids clients make up). */
#define ADM_RJWKS_EARLY_S 30

struct adm_rjwks_hooks {
    /* one line for the error log (<warn>: a warning, else information) */
    void (*log)(void *arg, int warn, const char *line);
    void *arg;
    /* the state directory, where each URL's last good set is saved
     * (jwks_save.h) and taken by the next start; NULL hook or answer:
     * none */
    const char *(*state_dir)(void *arg);
};

/* Starts keeping remote key sets on <base>, replaced sets freed after the
 * grace periods of <sw> (both borrowed: they outlive adm_rjwks_stop):
 * from now on a jwt policy state with a jwks_url attaches to the fetcher
 * of its URL and CA (adm_jwtp_set_remote), started then if none runs, and
 * gets its last good set at once; it detaches when freed, and the fetcher
 * stops with its last state. 0, or -1 when out of memory. */
int adm_rjwks_start(struct event_base *base, struct adm_swap *sw,
                    const struct adm_rjwks_hooks *hooks);
/* Stops every fetcher and frees the replaced sets: only once no worker
 * runs. Policy states still attached are let go (their sets stay theirs). */
void adm_rjwks_stop(void);

/* Whether the process serves (between its start and its exit): only then
 * is the state directory written (a set saved, or a URL no policy names
 * any more losing its saved set); a start that fails writes nothing, and
 * the exit's freeing of every snapshot keeps them. Serving begins by
 * writing the sets owed (an upgrade's carried ones) and removing those an
 * earlier run saved for URLs no live policy names. */
void adm_rjwks_serving(int on);

/* An upgrade (gateway/upgrade.h) carries each fetcher's last good set,
 * so the new process verifies from its first request, whether or not the
 * JWKS server answers it then: the old process exports {fetch key:
 * {"doc", "age_s"}} (a new reference); the new one, once its first
 * snapshot made its fetchers, imports those its fetchers have no set for
 * yet and publishes them. Fetching goes on as ever. */
json_t *adm_rjwks_export(void);
/* The most bytes of documents an upgrade carries (the frame's bound is
 * 64 MiB): those past it are left to the new process. */
#define ADM_RJWKS_CARRY_MAX (16 << 20)
void adm_rjwks_import(const json_t *carried);

/* The /metrics lines: per fetcher, fetches by result, keys, the age of
 * the set in use and the early fetches. */
void adm_rjwks_metrics(struct evbuffer *b);

#endif /* SY_ADMIN_JWKS_REMOTE_H */
