/*
 * jwks_save.h - a jwks_url's last good document kept in the state
 * directory (jwks_save.c), so a restart while the JWKS server is away
 * verifies tokens with the keys it had, as an upgrade does with the ones
 * it carries (jwks_remote.h), instead of answering 503 until a fetch.
 *
 * One file per fetcher, <dir>/jwks-<16 hex digits of SHA-256(fetch
 * key)>.json: {"fetch_key", "url", "doc"}, written whole, 0600, renamed
 * into place, its mtime the last good fetch (a confirmation touches it).
 * Written only while the process serves (jwks_remote.h), never by a
 * start that may yet fail.
 * Admin thread only; blocking file I/O of at most a JWKS's 1 MiB, once a
 * set changes (jwks_refresh_s at most).
 */
#ifndef SY_ADMIN_JWKS_SAVE_H
#define SY_ADMIN_JWKS_SAVE_H

#include <stddef.h>

/* The saved document of <fetch_key> in <dir>: malloc'd, <*len> bytes, the
 * seconds since its last good fetch in <*age_s>; NULL when there is none
 * (or it is another key's, or unreadable: <why> says so, "" when simply
 * absent). */
char *adm_jwks_saved(const char *dir, const char *fetch_key, size_t *len, double *age_s, char *why,
                     size_t cap);
/* Saves <doc> for <fetch_key> and <url>, fetched <age_s> seconds ago (the
 * file's mtime: a set an upgrade carried keeps its age): 0, or -1 with
 * <why>. */
int adm_jwks_save(const char *dir, const char *fetch_key, const char *url, const char *doc,
                  size_t len, double age_s, char *why, size_t cap);
/* The saved document was confirmed by a fetch just now: 0; -1 when there
 * is no file to touch (removed by hand, or never written: save it). */
int adm_jwks_save_touch(const char *dir, const char *fetch_key);
/* No policy names <fetch_key> any more. */
void adm_jwks_save_forget(const char *dir, const char *fetch_key);
/* Removes the saved sets of <dir> that are not those of <keys>[0..n) and
 * are too old to use: what an earlier run saved for URLs this one does
 * not name. */
void adm_jwks_save_prune(const char *dir, const char *const *keys, size_t n);

/* A saved set older than this is not used (a set that old, while its
 * server never answered since, may hold keys the issuer revoked); a
 * running process's own set is kept whatever its age, as in memory. */
#define ADM_JWKS_SAVED_MAX_AGE_S (7 * 86400)

#endif /* SY_ADMIN_JWKS_SAVE_H */
