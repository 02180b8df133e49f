/*
 * persist.h - the state directory seen from the process (persist.c): which
 * config a start runs, the -c file or the persisted one; where the
 * embedded default keeps its state ($XDG_STATE_HOME/switchyard, else
 * ~/.local/state/switchyard); what a start writes once every step
 * succeeded; and SIGHUP, which follows a start's rule against the running
 * config. All of it on the main (admin) thread.
 */
#ifndef SY_GATEWAY_PERSIST_H
#define SY_GATEWAY_PERSIST_H

#include "gateway/gateway.h"

/* How a start came to its config, for gw_persist_start() once it
 * succeeded. */
struct gw_start_plan {
    const char *from;   /* the -c file, or "the embedded default" */
    uint64_t file_hash; /* of its bytes */
    int from_state;     /* the persisted config won */
    int set_aside;      /* a persisted config is replaced: keep it as a backup */
    const char *why;    /* why it is replaced (for the log line) */
};

/* The config to run: <path> (NULL: the embedded default), or the persisted
 * one that wins over it (the file unchanged since the state was derived
 * from it), read from admin.state_dir or the embedded default's directory
 * (one that cannot be named or read runs unpersisted, said at error);
 * recorded in the state's document, not yet saved. <proc> gives the -c
 * path and the swap from then on. NULL after logging why (a state
 * directory another process holds among them). */
struct adm_config *gw_persist_load(struct gw_process *proc, const char *path, int reset,
                                   struct gw_start_plan *plan);
/* The state directory made ready for writes (adm_state_begin), once every
 * other start step succeeded: a start that failed before it persists
 * nothing, not even an empty journal or the directory. A persisted config
 * that <plan> replaces is set aside first; when that fails (a full disk)
 * the start goes on and nothing at all is written: the old config stays
 * as it was, the new one is served unpersisted, and every change is
 * refused until a later write manages the set-aside. The embedded
 * default's directory that cannot be made runs unpersisted, said at error.
 * Before dropping privileges, which hands the directory to the user. -1
 * after logging why. */
int gw_persist_begin(const struct gw_start_plan *plan);
/* Writes what a successful start decided: the file it came from recorded,
 * the config run saved. A save that fails (a full disk) does not stop the
 * start: the config runs unsaved, said loudly, and what is on disk stays
 * consistent. Without a state directory, a -c start says once that API
 * changes will not survive a restart. */
void gw_persist_start(const struct gw_start_plan *plan);
/* SIGHUP: the -c file read again. Unchanged since the running config was
 * derived from it, the running config stands with its API changes (the
 * files it names are read again); changed, it is swapped in through
 * <pipe>, the admin thread's apply pipeline (validate, build, persist,
 * publish), over the API's changes, which are counted and, with a state
 * directory, set aside in replaced-<time>/ first, one warning saying how
 * many and where. A bad file changes nothing. */
void gw_persist_reload(struct adm_pipeline *pipe);
/* --upgrade: the state directory a start with <path> (NULL: the embedded
 * default) would use, malloc'd; NULL with <why> when it has none. */
char *gw_persist_dir_for(const char *path, char *why, size_t cap);
/* --upgrade: <fd> (taken) is the state directory's flock, which the
 * running process handed over: the start reads the directory under it
 * instead of finding it held. */
void gw_persist_adopt_lock(int fd);
/* The live config document and its persistence (st->dir NULL: none). */
struct adm_state *gw_persist_state(void);
void gw_persist_free(void);

#endif
