/*
 * upgrade.h - replacing the running binary without refusing a connection
 * (upgrade.c): the hand-over conversation over <state_dir>/upgrade.sock,
 * both its sides, and sd_notify.
 *
 * The running (old) process listens on the socket. A process started with
 * --upgrade (the new one) connects and says hello; the old one answers
 * with its generation, its listeners' addresses and the state directory's
 * lock. The new one builds everything but its listening sockets, then says
 * READY. Only then does the old one stop accepting, and sends its state
 * (JSON) and every listening socket (SCM_RIGHTS, with a header each). The
 * new one adopts them and says ADOPTED; the old one drains and exits.
 * Anything else (a FAIL, a close, a timeout) before ADOPTED leaves the old
 * one serving, accepting again.
 *
 * Frames on the stream socket: a 4-byte big-endian length, then that many
 * bytes of JSON; descriptors ride on the frame's first bytes. Blocking
 * I/O with timeouts: the old process's admin thread holds the
 * conversation for the milliseconds of the hand-over itself.
 */
#ifndef SY_GATEWAY_UPGRADE_H
#define SY_GATEWAY_UPGRADE_H

#include <jansson.h>
#include <stddef.h>

#include <event2/event.h>

/* The hand-over protocol's version: a new process that speaks another
 * one is refused before anything changes. */
#define GW_UPGRADE_VERSION 1

/* One descriptor handed over, and what it is. */
enum gw_handed_kind { GW_HANDED_LISTENER, GW_HANDED_ADMIN };
struct gw_handed {
    int fd;
    enum gw_handed_kind kind;
    unsigned worker; /* the old worker that accepted on it */
    char addr[64];   /* the listener's address as configured */
};

/* ---- the old side, on the admin thread ---- */
struct gw_upgrade_hooks {
    /* the hello's facts: generation, etag, listeners (a new reference) */
    json_t *(*hello)(void *arg);
    /* stops accepting and fills <*fds> (malloc'd, <*n>) with duplicates
     * of every listening socket; -1 after logging why */
    int (*pause)(void *arg, struct gw_handed **fds, size_t *n);
    /* the state to carry (a new reference) */
    json_t *(*state)(void *arg);
    void (*resume)(void *arg);  /* the hand-over failed: accept again */
    void (*adopted)(void *arg); /* the new process took over: drain */
    void (*log)(void *arg, int warn, const char *line);
    void *arg;
};

/* Listens on <dir>/upgrade.sock (mode 0600) on <base>; <lock_fd>, the
 * state directory's flock, goes to a new process with the hello (-1:
 * none). 0, or -1 with <why>. */
int gw_upgrade_serve(struct event_base *base, const char *dir, int lock_fd,
                     const struct gw_upgrade_hooks *hooks, char *why, size_t cap);
/* Stops listening; with <remove>, the socket's file goes too (an exit; not
 * after a hand-over: the new process's socket has the name by then, or
 * is about to). */
void gw_upgrade_serve_stop(int remove);

/* ---- the new side, at its start ---- */
/* Connects to the process on <dir> and says hello: its answer into
 * <*hello> (a new reference), the lock's descriptor into <*lock_fd> (-1:
 * none). 0, or -1 with <why>. */
int gw_upgrade_connect(const char *dir, json_t **hello, int *lock_fd, char *why, size_t cap);
/* READY: the old process's state into <*state> and its descriptors into
 * <*fds> (<*n>, malloc'd). 0, or -1 with <why>. */
int gw_upgrade_ready(json_t **state, struct gw_handed **fds, size_t *n, char *why, size_t cap);
/* The last word: ADOPTED (<fail> NULL) or FAIL with its reason; the
 * connection is closed. 0, or -1 when it could not be sent. */
int gw_upgrade_finish(const char *fail);

/* sd_notify(3) without libsystemd: <msg> as one datagram to
 * $NOTIFY_SOCKET (a path, or abstract with '@'); nothing without it. */
void gw_sd_notify(const char *msg);

#endif
