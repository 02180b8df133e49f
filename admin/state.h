/*
 * state.h - the admin thread's view of the live config document, and its
 * persistence in the state directory.
 *
 * The document (JSON) is what GET /config shows and what is persisted. In
 * the state directory:
 *   config.json       the last full config, written atomically (temp file,
 *                     fsync, rename, fsync of the directory); the one before
 *                     it is kept as config.json.prev
 *   journal           route and upstream changes since config.json, one JSON
 *                     line each, appended and fsynced before a change is
 *                     acknowledged; replayed on start. A torn last line (a
 *                     crash mid-append) was never acknowledged and is dropped.
 *   source            the hash of the config file (-c) the persisted config
 *                     was last derived from: at start the file wins when it
 *                     no longer has that hash (it was edited since)
 *   replaced-<time>/  a persisted config set aside when the file won (at a
 *                     start, or a SIGHUP that replaced API changes), or by
 *                     --reset-state (config.json, its .prev, the journal)
 * The directory itself is locked (flock) from the first read to the exit,
 * so that a second process on it fails before it writes anything.
 * The journal is folded into config.json every ADM_JOURNAL_MAX entries, so a
 * route change costs one small append, not a rewrite of every route.
 *
 * A start reads the directory first and writes it only once every other
 * start step succeeded (adm_state_open, then adm_state_begin): a failed
 * start leaves it as it was. A persisted config that is replaced is set
 * aside before anything else is written; while that fails (a full disk)
 * nothing at all is written, so it is never written over. A write that fails (a full disk) refuses
 * its change and leaves no temporary file; the state counts it and tells its hook, so that the
 * gateway can say loudly that persistence is failing.
 *
 * The ETag is "<generation>-<hash>": the hash combines the document without
 * its routes and an XOR of each route's hash, so it is kept up to date per
 * change without encoding the whole document.
 */
#ifndef SY_ADMIN_STATE_H
#define SY_ADMIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define ADM_JOURNAL_MAX 1000

struct adm_state {
    json_t *doc;          /* the live document (owned) */
    json_t *ids;          /* route id -> route object (borrowed from doc) */
    uint64_t hash_base;   /* hash of doc without "routes" */
    uint64_t hash_routes; /* XOR of route hashes */
    char *dir;            /* state directory, NULL: no persistence */
    int lock_fd;          /* the directory, flocked (only when <locked>) */
    int locked;
    int journal_fd;
    size_t journal_n;
    char *canon; /* GET /config bytes, encoded once per generation */
    size_t canon_len;
    uint64_t canon_gen;
    /* what adm_state_open() found for adm_state_begin() to do */
    long journal_keep; /* the journal's bytes to keep (its torn tail cut); -1: not read */
    int corrupt;       /* config.json is corrupt: move it aside */
    int prev_used;     /* ... and config.json.prev stands in for it */
    /* the source record a failed adm_state_set_source() still owes: it
     * is written after the next save that works */
    int source_pending;
    uint64_t source_hash;
    char *source_path;
    /* the source record owed before adm_state_replace(), for
     * adm_state_replace_cancel() to owe again */
    int was_pending;
    uint64_t was_hash;
    char *was_path;
    /* the persisted config is replaced (adm_state_replace) and not yet set
     * aside: no write may happen before it is */
    int aside_owed;
    char *set_aside_to; /* where it went (owned, until whoever tells it frees it) */
    /* persistence's health: writes that failed, and whether the last one did */
    uint64_t persist_failures;
    int persist_failing;
    /* told of every failed write (<failure>: why) and of the first one
     * that works after failures (<failure> NULL); NULL: nobody is told */
    void (*persist_hook)(void *arg, const char *failure);
    void *persist_arg;
};

/* 64-bit FNV-1a of <len> bytes. */
uint64_t adm_hash(const char *s, size_t len);
/* The hash of one JSON value in canonical form (sorted keys, compact). */
uint64_t adm_json_hash(const json_t *v);

/* Sets <doc> (a new reference is taken) as the live document and
 * recomputes the hashes and the id index. 0 or -1 (out of memory). */
int adm_state_set_doc(struct adm_state *st, json_t *doc);
/* The same with the hashes already known (base, routes) when <known>. */
int adm_state_set_doc_hashed(struct adm_state *st, json_t *doc, int known, uint64_t hb,
                             uint64_t hr);
uint64_t adm_state_hash(const struct adm_state *st);

/* Reads the state directory <dir> without writing anything (a missing
 * directory holds no config), and locks it. If it holds a config, returns
 * it (new reference) with the journal replayed; NULL if it holds none. A
 * corrupt config.json is refused and config.json.prev used; <msg> (cap
 * bytes) then says so. -1 in *err on I/O errors, among them a journal that
 * cannot be read; -2 when another process holds the directory. Nothing can
 * be persisted before adm_state_begin(). */
json_t *adm_state_open(struct adm_state *st, const char *dir, char *msg, size_t cap, int *err);
/* The persisted config adm_state_open() found is replaced by one derived
 * from the file <path> (NULL: the embedded default) whose bytes hash to
 * <hash>: adm_state_begin() first moves it (config.json, config.json.prev,
 * journal) into a new directory replaced-<UTC time>, named then in
 * st->set_aside_to, and the source record is written after the first save
 * that works. Nothing is written here. 0, or -1 (out of memory). */
int adm_state_replace(struct adm_state *st, uint64_t hash, const char *path);
/* The replace adm_state_replace() asked for did not happen (the config
 * that would have replaced it was refused, or changed nothing): nothing is
 * set aside, and the source record owed before is owed again. One whose
 * set-aside was done already (the save after it failed) stays done, and
 * st->set_aside_to says where; the source is then still the old one, so
 * that a restart lets the file win again. */
void adm_state_replace_cancel(struct adm_state *st);
/* Makes the directory read by adm_state_open() ready for writes, once a
 * start has passed every check: creates it if missing (and locks it), sets a replaced
 * persisted config aside (adm_state_replace), moves a corrupt config.json
 * aside (config.json.prev takes its place; its journal is dropped),
 * removes the temporary files a failed write or a crash left, opens the
 * journal and cuts it after its last good line. 0; 1 when the set-aside
 * failed (<msg>, told to the hook): nothing was written, st->aside_owed
 * stays and every write tries the set-aside again first, refused while it
 * fails; or -1 with <msg>: among them a journal that cannot be cut, whose
 * tail the next append would continue, and a corrupt config.json that
 * config.json.prev cannot replace; or -2 with <msg> when another process
 * holds the directory (two started together on one not made yet). */
int adm_state_begin(struct adm_state *st, char *msg, size_t cap);

/* Persists the whole document atomically and empties the journal. */
int adm_state_save(struct adm_state *st, char *msg, size_t cap);
/* The same with the document's text given (<len> bytes of valid JSON equal
 * to st->doc, e.g. the body a client pushed): nothing is encoded again. */
int adm_state_save_bytes(struct adm_state *st, const char *js, size_t len, char *msg, size_t cap);
/* Appends one change (a JSON object, borrowed) to the journal and fsyncs;
 * folds the journal into config.json when it is long, or when a failed
 * save or append left it unfit for appends. -1 with <msg>: none of the
 * change's bytes stay in the journal. */
int adm_state_journal(struct adm_state *st, json_t *op, char *msg, size_t cap);
/* Applies a journal op to <doc> (used on replay and by the API). 0 or -1. */
int adm_state_apply(json_t *doc, const json_t *op);

/* The hash recorded in the state directory's source file: 1 with it in
 * <hash>, 0 when none is recorded (a state older than the record). */
int adm_state_source(const struct adm_state *st, uint64_t *hash);
/* Records <hash> (of the file <path>) as the source of the persisted
 * config, atomically. 0, or -1 with <msg>: the record is then written
 * after the next save that works. */
int adm_state_set_source(struct adm_state *st, uint64_t hash, const char *path, char *msg,
                         size_t cap);
/* Stops persisting: the document stays, the directory is let go (its
 * lock too) and nothing is written there any more. */
void adm_state_detach(struct adm_state *st);
void adm_state_free(struct adm_state *st);

/* A config document's signature: one (kind, key, hash) item per route (by
 * id), per upstream (by name) and per other top-level key, sorted, so that
 * what differs from it can be counted later without keeping the document
 * (state_diff.c). A reload counts so the changes made through the API since
 * the running config was derived from the file. */
struct adm_state_sig {
    size_t n;
    struct adm_sig_item *v;
};
/* <sig> (its old items freed) becomes <doc>'s. 0, or -1 (out of memory:
 * <sig> unchanged). */
int adm_state_sig_make(struct adm_state_sig *sig, const json_t *doc);
/* The routes, upstreams and other top-level keys that one of <a>, <b> has
 * and the other has not, or has with another value. */
size_t adm_state_sig_diff(const struct adm_state_sig *a, const struct adm_state_sig *b);
void adm_state_sig_free(struct adm_state_sig *sig);

#endif
