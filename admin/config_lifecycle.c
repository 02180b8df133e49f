/*
 * config_lifecycle.c - what a config needs beyond its schema before it may
 * be started or swapped in: the files and directories it names usable by
 * this process and the non-loopback admin rule (adm_config_check_env), and which keys only a
 * restart applies (adm_config_restart_diff); and the one reading of a token file
 * (adm_token_file_read), shared by those checks and a start. The same
 * checks serve a start, --check, a push and a SIGHUP, so that an accepted
 * config is one the next start accepts too.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config.h"
#include "admin/fleet.h"
#include "admin/tls.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of <path> into <buf> ("." when it has none). */
static void dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');

    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

/* A file this process can create or append to at <path>: it exists and is
 * writable, or its directory exists and is writable. Nothing is created.
 * 0, or -1 with <why>. */
static int writable_file(const char *path, char *why, size_t cap)
{
    struct stat st;
    char dir[4096], where[4200];

    adm_path_where(path, where, sizeof(where));
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(why, cap, "%s%s is a directory", path, where);
            return -1;
        }
        if (access(path, W_OK) < 0) {
            snprintf(why, cap, "cannot open %s%s for writing: %s", path, where, strerror(errno));
            return -1;
        }
        return 0;
    }
    dir_of(path, dir, sizeof(dir));
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) < 0) {
        snprintf(why, cap, "cannot create %s%s: %s: %s", path, where, dir,
                 stat(dir, &st) < 0     ? strerror(errno)
                 : !S_ISDIR(st.st_mode) ? "not a directory"
                                        : strerror(EACCES));
        return -1;
    }
    return 0;
}

/* A state directory: an existing writable directory, or one that can be
 * made (its parent is writable). 0, or -1 with <why>. */
static int usable_dir(const char *path, char *why, size_t cap)
{
    struct stat st;
    char where[4200];

    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode) || access(path, W_OK | X_OK) < 0) {
            snprintf(why, cap, "%s%s: %s", path, adm_path_where(path, where, sizeof(where)),
                     !S_ISDIR(st.st_mode) ? "not a directory" : "not writable");
            return -1;
        }
        return 0;
    }
    return writable_file(path, why, cap);
}

int adm_token_file_read(const char *path, char *buf, size_t cap, char *why, size_t why_cap)
{
    size_t n;
    FILE *f = fopen(path, "r");

    if (!f) {
        char where[4200];
        snprintf(why, why_cap, "cannot read %s%s: %s", path,
                 adm_path_where(path, where, sizeof(where)), strerror(errno));
        return -1;
    }
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    if (!n) {
        snprintf(why, why_cap, "%s is empty", path);
        return -1;
    }
    return 0;
}

size_t adm_config_check_env(const struct adm_config *c, struct adm_errors *errs)
{
    const char *env = getenv("SWITCHYARD_ADMIN_TOKEN");
    size_t n0 = errs->n;
    char why[8800], token[1024], where[4200];

    if (c->admin.token_file &&
        adm_token_file_read(c->admin.token_file, token, sizeof(token), why, sizeof(why)) < 0)
        adm_errors_add(errs, "/admin/token_file", "%s", why);
    if (!c->admin.token_file && !(env && *env) && !adm_addr_is_loopback(&c->admin.addr))
        adm_errors_add(errs, "/admin/address",
                       "%s is not loopback and no token is configured (admin.token_file or "
                       "SWITCHYARD_ADMIN_TOKEN): an open admin API off loopback is refused",
                       c->admin.addr.text);
    if (c->admin.state_dir && usable_dir(c->admin.state_dir, why, sizeof(why)) < 0)
        adm_errors_add(errs, "/admin/state_dir", "%s", why);
    if (c->access_log.target == ADM_LOG_FILE &&
        writable_file(c->access_log.path, why, sizeof(why)) < 0)
        adm_errors_add(errs, "/access_log", "%s", why);
    if (c->user) {
        struct passwd *pw = getpwnam(c->user);
        if (!pw)
            adm_errors_add(errs, "/user", "no user %s on this host", c->user);
        else if (geteuid() != 0 && pw->pw_uid != geteuid())
            adm_errors_add(errs, "/user", "switching to user %s needs a start as root", c->user);
    }
    if (c->resolver.hosts_file && access(c->resolver.hosts_file, R_OK) < 0)
        adm_errors_add(errs, "/resolver/hosts_file", "cannot read %s%s: %s", c->resolver.hosts_file,
                       adm_path_where(c->resolver.hosts_file, where, sizeof(where)),
                       strerror(errno));
    if (c->group && !getgrnam(c->group))
        adm_errors_add(errs, "/group", "no group %s on this host", c->group);
    return errs->n - n0;
}

static int str_differs(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* One restart-only key that differs: its path, and what runs now. */
static void needs_restart(struct adm_errors *errs, const char *path, const char *now)
{
    adm_errors_add(errs, path, "needs a restart to change (the running value is %s)", now);
}

static int endpoints_differ(const struct adm_fleet_cfg *a, const struct adm_fleet_cfg *b)
{
    if (a->nendpoints != b->nendpoints)
        return 1;
    for (size_t i = 0; i < a->nendpoints; i++)
        if (str_differs(a->endpoints[i], b->endpoints[i]))
            return 1;
    return 0;
}

static const char *or_none(const char *s)
{
    return s ? s : "none";
}

/* <v> as text in <buf>. */
static const char *num(char *buf, size_t cap, unsigned v)
{
    snprintf(buf, cap, "%u", v);
    return buf;
}

/* "fleet": the etcd client is made once, at start, from it. Compared as
 * parsed, so that writing a default out is no change. */
static void fleet_restart_diff(const struct adm_fleet_cfg *a, const struct adm_fleet_cfg *b,
                               struct adm_errors *errs)
{
    char now[32];

    if (!a != !b) {
        needs_restart(errs, "/fleet", a ? "a fleet node" : "a standalone node (no fleet)");
        return;
    }
    if (!a)
        return;
    if (endpoints_differ(a, b))
        needs_restart(errs, "/fleet/etcd/endpoints", a->endpoints[0]);
    if (str_differs(a->prefix, b->prefix))
        needs_restart(errs, "/fleet/etcd/prefix", a->prefix);
    if (str_differs(a->ca_file, b->ca_file))
        needs_restart(errs, "/fleet/etcd/tls/ca_file", or_none(a->ca_file));
    if (str_differs(a->cert_file, b->cert_file))
        needs_restart(errs, "/fleet/etcd/tls/cert_file", or_none(a->cert_file));
    if (str_differs(a->key_file, b->key_file))
        needs_restart(errs, "/fleet/etcd/tls/key_file", or_none(a->key_file));
    if (str_differs(a->username, b->username))
        needs_restart(errs, "/fleet/etcd/username", or_none(a->username));
    if (str_differs(a->password_file, b->password_file))
        needs_restart(errs, "/fleet/etcd/password_file", or_none(a->password_file));
    else if (str_differs(a->password, b->password)) /* the client keeps the one read at start */
        adm_errors_add(errs, "/fleet/etcd/password_file",
                       "needs a restart to change (the password in it changed since the start)");
    if (a->dial_timeout_ms != b->dial_timeout_ms)
        needs_restart(errs, "/fleet/etcd/dial_timeout_ms",
                      num(now, sizeof(now), a->dial_timeout_ms));
    if (a->request_timeout_ms != b->request_timeout_ms)
        needs_restart(errs, "/fleet/etcd/request_timeout_ms",
                      num(now, sizeof(now), a->request_timeout_ms));
    if (a->watch_idle_ms != b->watch_idle_ms)
        needs_restart(errs, "/fleet/etcd/watch_idle_ms", num(now, sizeof(now), a->watch_idle_ms));
    if (a->write_wait_ms != b->write_wait_ms)
        needs_restart(errs, "/fleet/write_wait_ms", num(now, sizeof(now), a->write_wait_ms));
}

size_t adm_config_restart_diff(const struct adm_config *old, const struct adm_config *c,
                               struct adm_errors *errs)
{
    size_t n0 = errs->n;
    char now[64];

    if (adm_config_workers(old) != adm_config_workers(c)) {
        snprintf(now, sizeof(now), "%u", adm_config_workers(old));
        needs_restart(errs, "/workers", now);
    }
    if (strcmp(old->admin.addr.text, c->admin.addr.text) != 0)
        needs_restart(errs, "/admin/address", old->admin.addr.text);
    if (str_differs(old->admin.token_file, c->admin.token_file))
        needs_restart(errs, "/admin/token_file",
                      old->admin.token_file ? old->admin.token_file : "none");
    if (str_differs(old->admin.state_dir, c->admin.state_dir))
        needs_restart(errs, "/admin/state_dir",
                      old->admin.state_dir ? old->admin.state_dir : "none");
    if (str_differs(old->user, c->user))
        needs_restart(errs, "/user", old->user ? old->user : "none");
    if (str_differs(old->group, c->group))
        needs_restart(errs, "/group", old->group ? old->group : "none");
    if (old->admin.heap_reserve_mb != c->admin.heap_reserve_mb) {
        snprintf(now, sizeof(now), "%u", old->admin.heap_reserve_mb);
        needs_restart(errs, "/admin/heap_reserve_mb", now);
    }
    fleet_restart_diff(old->fleet, c->fleet, errs);
    /* listeners are live: the gateway binds the ones a config adds before
     * it is accepted, and closes the ones it removes; whether a listener
     * speaks TLS, its certificates and redirect_https are read per
     * connection and per request from the snapshot */
    return errs->n - n0;
}
