/*
 * main.c - switchyard: start-up, the admin thread's loop (signals, reloads,
 * snapshot reclamation), the drain on SIGTERM/SIGINT, and both sides of an
 * upgrade (--upgrade, SIGUSR2): what is paused, carried and adopted; the
 * conversation itself is upgrade.c's. Which config a
 * start runs and what a reload does with the state are persist.c's.
 *
 *   switchyard [-c FILE]      run (without -c: the embedded default config)
 *   switchyard -c FILE --upgrade
 *                             take over from the instance running on the same
 *                             state directory (upgrade.h), without refusing a
 *                             connection
 *   switchyard --check FILE   validate FILE like nginx -t, print every error
 *
 * The main thread becomes the admin thread once the workers run: it owns the
 * admin event_base, builds every new snapshot, publishes it and frees old
 * ones after their grace period. Every whole config reaches the workers
 * through its one apply pipeline (admin/pipeline.h), made here and handed
 * to the admin API, the reload (persist.c) and a fleet node's etcd sync.
 */
#define _GNU_SOURCE
#include "admin/jwks_remote.h"
#include "gateway/gateway.h"
#include "gateway/health.h"
#include "gateway/heap.h"
#include "gateway/fleet.h"
#include "gateway/persist.h"
#include "gateway/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/thread.h>

#define SY_VERSION "0.1.0"

static struct gw_process proc;
static struct adm_api *api;
static struct adm_resolver *resolver;
static struct adm_pipeline pipeline; /* every whole config's way in */
static struct event *reclaim_ev, *drain_ev, *drain_check_ev;
/* An upgrade: the running process's hello (NULL: a plain start), the
 * admin socket it handed over (-1: none), and in the old process, whether
 * it handed over (it drains; nothing more is its to persist). */
static json_t *up_hello;
static int admin_inherit_fd = -1;
static int handed_over;
static struct event *deadline_ev;
/* SIGUSR2 (nginx's binary upgrade): the binary's path as it was at start
 * (a package upgrade puts the new one there) and the command line, which
 * a child runs again with --upgrade. */
static char self_exe[4096];
static char **self_argv;
static pid_t upgrade_child;

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard [-c FILE] [--reset-state]\n"
               "                                   run (default: the embedded config);\n"
               "                                   --reset-state moves the persisted state\n"
               "                                   aside and starts from FILE\n"
               "       switchyard [-c FILE] --upgrade\n"
               "                                   take over from the instance running on\n"
               "                                   the same state directory, which drains\n"
               "       switchyard --check FILE     validate a config as a start would, and exit\n"
               "       switchyard --print-default  print the embedded default config\n"
               "       switchyard --version\n"
               "       switchyard --help\n");
}

/* libevent's own messages (evdns's "Nameserver ... has failed", a
 * backend's warnings) in the error log's format instead of its raw
 * "[msg] ..." lines on stderr: its errors as errors, its warnings as
 * warnings, its informational and debug messages as debug. Called on any thread; gw_log()
 * calls nothing in libevent, as such a callback must not. */
static void libevent_log(int severity, const char *msg)
{
    gw_log(severity >= EVENT_LOG_ERR    ? GW_LOG_ERROR
           : severity >= EVENT_LOG_WARN ? GW_LOG_WARN
                                        : GW_LOG_DEBUG,
           "libevent: %s", msg);
}

/* A command-line mistake: "<what> <arg>", then the usage, on stderr; the
 * exit status (2). */
static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "switchyard: %s %s\n", what, arg);
    usage(stderr);
    return 2;
}

/* The bearer token: admin.token_file, else SWITCHYARD_ADMIN_TOKEN. */
static char *read_token(const struct adm_config *cfg)
{
    const char *env = getenv("SWITCHYARD_ADMIN_TOKEN");
    char buf[1024], why[4200];

    if (cfg->admin.token_file) {
        if (adm_token_file_read(cfg->admin.token_file, buf, sizeof(buf), why, sizeof(why)) < 0) {
            gw_log(GW_LOG_ERROR, "admin.token_file: %s", why);
            return NULL;
        }
        return strdup(buf);
    }
    return env && *env ? strdup(env) : NULL;
}

/* The access log's target as it is open now: each publish compares the
 * new snapshot's with it. */
static struct adm_access_log access_now;

/* A new descriptor for the target of <a>: the file opened for appending, a
 * copy of stdout or stderr, or /dev/null when off. -1 with errno. */
static int access_open(const struct adm_access_log *a)
{
    switch (a->target) {
    case ADM_LOG_STDOUT:
        return fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    case ADM_LOG_STDERR:
        return fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    case ADM_LOG_FILE:
        return open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    default:
        return open("/dev/null", O_WRONLY | O_CLOEXEC);
    }
}

static const char *access_name(const struct adm_access_log *a)
{
    return a->target == ADM_LOG_FILE     ? a->path
           : a->target == ADM_LOG_STDOUT ? "stdout"
           : a->target == ADM_LOG_STDERR ? "stderr"
                                         : "off";
}

/* Points the access log at <a>'s target (again: SIGUSR1 after a rotation).
 * The workers write to proc.access_fd, which stays the same number: the
 * new file is dup2()ed onto it, atomically, so no worker takes a lock or
 * ever writes to a closed descriptor (a flush in progress lands in the old
 * file or the new one). 0, or -1 after logging why (the old target kept). */
static int access_reopen(const struct adm_access_log *a)
{
    int fd = access_open(a);
    char *path = a->path ? strdup(a->path) : NULL;

    if (fd < 0 || (a->path && !path) || dup2(fd, proc.access_fd) < 0) {
        gw_log(GW_LOG_ERROR, "access log %s: %s; it stays %s", access_name(a),
               fd < 0 || path || !a->path ? strerror(errno) : "out of memory",
               access_name(&access_now));
        if (fd >= 0)
            close(fd);
        free(path);
        return -1;
    }
    close(fd);
    free(access_now.path);
    access_now.target = a->target;
    access_now.path = path;
    atomic_store_explicit(&proc.access_on, a->target != ADM_LOG_OFF, memory_order_relaxed);
    return 0;
}

/* The access log's descriptor into proc.access_fd: always a descriptor of
 * its own (never 1 or 2 themselves), so that a later target can replace it.
 * -1 after logging why. */
static int open_access_log(const struct adm_config *cfg)
{
    proc.access_fd = access_open(&cfg->access_log);
    if (proc.access_fd < 0) {
        gw_log(GW_LOG_ERROR, "access log %s: %s", access_name(&cfg->access_log), strerror(errno));
        return -1;
    }
    access_now.target = cfg->access_log.target;
    access_now.path = cfg->access_log.path ? strdup(cfg->access_log.path) : NULL;
    atomic_store_explicit(&proc.access_on, cfg->access_log.target != ADM_LOG_OFF,
                          memory_order_relaxed);
    return 0;
}

static void close_access_log(void)
{
    if (proc.access_fd >= 0)
        close(proc.access_fd);
    proc.access_fd = -1;
    free(access_now.path);
    access_now.path = NULL;
}

/* Every publish (on the admin thread): log_level and the access log follow
 * the config (the push was checked for a target that opens), the health
 * checker gets the new pools, then worker <w> hears of the swap. A
 * publication that brings no new snapshot (a canary's going, a jwt
 * policy's new key set: adm_swap_fence) sends the checker nothing. */
static void publish_notify(void *arg, unsigned w)
{
    static uint64_t planned; /* the seq of the snapshot the checker last got */
    const struct adm_snapshot *cur = atomic_load(&proc.swap.current);
    const struct adm_config *cfg = cur->cfg;
    const struct adm_access_log *a = &cfg->access_log;

    if (w == 0)
        gw_log_set_level(cfg->log_level);
    if (w == 0 && proc.access_fd >= 0 &&
        (a->target != access_now.target ||
         (a->target == ADM_LOG_FILE && strcmp(a->path, access_now.path) != 0)) &&
        access_reopen(a) == 0)
        gw_log(GW_LOG_NOTICE, "access log: %s", access_name(a));
    if (w == 0) {
        if (cur->seq != planned)
            gw_health_update(cur);
        planned = cur->seq;
        gw_worker_fd_limit(cfg, 0);
    }
    gw_worker_notify(arg, w);
}

/* SIGUSR2: this process's binary path (as at start, which now holds the
 * new binary) started again with the same arguments and --upgrade; the
 * child takes over as `switchyard --upgrade` would. */
static void upgrade_spawn(void)
{
    extern char **environ;
    posix_spawnattr_t at;
    sigset_t none;
    pid_t pid;
    int e;

    if (!self_exe[0] || !self_argv) {
        gw_log(GW_LOG_ERROR, "SIGUSR2: this process's binary path is not known");
        return;
    }
    if (upgrade_child > 0) {
        gw_log(GW_LOG_WARN, "SIGUSR2: pid %d is already taking over", (int)upgrade_child);
        return;
    }
    sigemptyset(&none);
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    e = posix_spawn(&pid, self_exe, NULL, &at, self_argv, environ);
    posix_spawnattr_destroy(&at);
    if (e) {
        gw_log(GW_LOG_ERROR, "SIGUSR2: cannot start %s: %s", self_exe, strerror(e));
        return;
    }
    upgrade_child = pid;
    gw_log(GW_LOG_NOTICE, "SIGUSR2: started %s --upgrade as pid %d", self_exe, (int)pid);
}

/* The SIGUSR2 child ended: a failed take-over says so (a successful one
 * runs on, and this process exits first). */
static void upgrade_reap(void)
{
    int st;

    if (upgrade_child <= 0 || waitpid(upgrade_child, &st, WNOHANG) != upgrade_child)
        return;
    if (WIFEXITED(st))
        gw_log(GW_LOG_ERROR, "SIGUSR2: pid %d exited with status %d; this process keeps serving",
               (int)upgrade_child, WEXITSTATUS(st));
    else
        gw_log(GW_LOG_ERROR, "SIGUSR2: pid %d died of signal %d; this process keeps serving",
               (int)upgrade_child, WTERMSIG(st));
    upgrade_child = 0;
}

/* Remembers the binary path and the command line for SIGUSR2, with
 * --upgrade added. */
static void remember_self(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    int up = 0;

    self_exe[n > 0 ? n : 0] = '\0';
    if (!(self_argv = calloc((size_t)argc + 2, sizeof(*self_argv))))
        return;
    for (int i = 0; i < argc; i++) {
        self_argv[i] = argv[i];
        up |= strcmp(argv[i], "--upgrade") == 0;
    }
    if (!up)
        self_argv[argc] = "--upgrade";
}

/* Every 50 ms: frees the snapshots past their grace period; gives memory
 * back after large frees (looking once a second unless one was freed). */
static void reclaim_cb(evutil_socket_t fd, short what, void *arg)
{
    static unsigned ticks;
    size_t before = proc.swap.nretired;
    int freed = adm_swap_reclaim(&proc.swap) < before;

    (void)fd;
    (void)what;
    (void)arg;
    if (freed || ++ticks % 20 == 0)
        gw_heap_give_back(freed);
    upgrade_reap();
}

static void notify_all(char b)
{
    for (unsigned i = 0; i < proc.nworkers; i++)
        if (write(proc.workers[i].notify_fd[1], &b, 1) < 0 && errno != EAGAIN)
            gw_log(GW_LOG_ERROR, "notify worker %u: %s", i, strerror(errno));
}

static void drain_check_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (atomic_load(&proc.running) == 0)
        event_base_loopexit(proc.admin_base, NULL);
}

static void drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    gw_log(GW_LOG_WARN, "drain timeout: closing the connections still open");
    notify_all('X');
}

/* A drain's timers: every worker stopped ends the loop; <ms> from now
 * what is still open is closed. */
static void drain_timers(unsigned ms)
{
    struct timeval t = {ms / 1000, (ms % 1000) * 1000};
    struct timeval p = {0, 20 * 1000};

    drain_ev = evtimer_new(proc.admin_base, drain_timeout_cb, NULL);
    drain_check_ev = event_new(proc.admin_base, -1, EV_PERSIST, drain_check_cb, NULL);
    if (drain_ev)
        evtimer_add(drain_ev, &t);
    if (drain_check_ev)
        event_add(drain_check_ev, &p);
}

/* A running rollout ends with the process (a drain, a hand-over): its
 * canary is dropped and nothing of it is persisted after this point, so
 * neither the next start nor the new binary comes back on it. */
static void rollout_end(const char *why)
{
    if (pipeline.rollout_abort)
        pipeline.rollout_abort(pipeline.rollout_arg, why);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    const struct adm_config *cfg;

    (void)what;
    (void)arg;
    if (handed_over && (sig == SIGHUP || sig == SIGUSR1 || sig == SIGUSR2)) {
        gw_log(GW_LOG_WARN, "signal %d ignored: this process handed over and drains", (int)sig);
        return;
    }
    if (sig == SIGHUP) {
        gw_persist_reload(&pipeline);
        return;
    }
    if (sig == SIGUSR2) {
        if (!gw_persist_state()->dir)
            gw_log(GW_LOG_ERROR, "SIGUSR2: an upgrade needs a state directory (admin.state_dir)");
        else
            upgrade_spawn();
        return;
    }
    if (sig == SIGUSR1) {
        /* logrotate's postrotate: the same file name, a new file */
        if (access_reopen(&atomic_load(&proc.swap.current)->cfg->access_log) == 0)
            gw_log(GW_LOG_NOTICE, "SIGUSR1: access log %s reopened", access_name(&access_now));
        return;
    }
    if (atomic_exchange(&proc.draining, 1)) {
        gw_log(GW_LOG_WARN, "second signal: stopping now");
        notify_all('X');
        return;
    }
    rollout_end("the process is stopping");
    cfg = atomic_load(&proc.swap.current)->cfg;
    gw_log(GW_LOG_NOTICE, "draining: no new connections, in-flight requests get %u ms",
           cfg->timeouts.drain_ms);
    notify_all('D');
    drain_timers(cfg->timeouts.drain_ms);
}

/* ---- start-up steps: each logs why it failed and undoes its own part ---- */

/* The command line into <cfg_path>, <check_path> and <reset>. -1 to go on,
 * else the exit status (--help, --version, --print-default, a usage error). */
static int parse_cmdline(int argc, char **argv, const char **cfg_path, const char **check_path,
                         int *reset, int *upgrade)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--check") == 0) {
            const char **slot = argv[i][1] == 'c' ? cfg_path : check_path;
            if (i + 1 >= argc)
                return usage_error("a FILE must follow", argv[i]);
            if (*slot) { /* not the last one silently: which one was meant? */
                fprintf(stderr, "switchyard: %s given twice (%s, then %s): give one FILE\n",
                        argv[i], *slot, argv[i + 1]);
                usage(stderr);
                return 2;
            }
            *slot = argv[i + 1];
            i++;
        } else if (strcmp(argv[i], "--reset-state") == 0) {
            *reset = 1;
        } else if (strcmp(argv[i], "--upgrade") == 0) {
            *upgrade = 1;
        } else if (strcmp(argv[i], "--print-default") == 0) {
            fputs(adm_config_default_json(), stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("switchyard %s\n", SY_VERSION);
            return 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            return usage_error("unknown option", argv[i]);
        } else {
            return usage_error("unexpected argument", argv[i]);
        }
    }
    return -1;
}

/* --check FILE: "ok" on stdout, or every error on stderr. The exit status. */
static int check_config(const char *path)
{
    struct adm_errors errs;
    struct adm_config *cfg;
    char *s;

    adm_errors_init(&errs);
    if ((cfg = adm_config_load_file(path, &errs))) {
        /* what a start checks beyond the schema, binding aside */
        size_t n = adm_config_check_env(cfg, &errs) + gw_fleet_check(cfg, &errs);
        adm_config_free(cfg);
        if (!n) {
            puts("ok");
            return 0;
        }
    }
    s = adm_errors_format(&errs);
    fputs(s ? s : "out of memory\n", stderr);
    free(s);
    adm_errors_clear(&errs);
    return 1;
}

/* What the admin API needs before it opens: a token when its address is not
 * loopback (into <token>, NULL for none) and its address (into <addr>).
 * -1 after logging why, with nothing left to free. */
static int admin_prepare(const struct adm_config *cfg, char **token, struct adm_addr *addr)
{
    const char *env = getenv("SWITCHYARD_ADMIN_TOKEN");
    char why[128];

    if (!adm_addr_is_loopback(&cfg->admin.addr) && !cfg->admin.token_file && !(env && *env)) {
        gw_log(GW_LOG_ERROR,
               "admin address %s is not loopback and no token is configured "
               "(admin.token_file or SWITCHYARD_ADMIN_TOKEN): refusing to start",
               cfg->admin.addr.text);
        return -1;
    }
    *token = read_token(cfg);
    if (cfg->admin.token_file && !*token)
        return -1; /* read_token said why */
    memset(addr, 0, sizeof(*addr));
    if (adm_addr_parse(addr, cfg->admin.addr.text, 0, why, sizeof(why)) < 0) {
        gw_log(GW_LOG_ERROR, "admin address %s: %s", cfg->admin.addr.text,
               errno == ENOMEM ? "out of memory" : why);
        free(*token);
        *token = NULL;
        return -1;
    }
    return 0;
}

/* Frees the worker slots: their sockets, and what a started worker made
 * (after its thread was joined). */
static void close_listeners(void)
{
    for (unsigned i = 0; proc.workers && i < proc.nworkers; i++)
        gw_worker_destroy(&proc.workers[i]);
    free(proc.workers);
    proc.workers = NULL;
    gw_listen_free();
}

/* The worker slots, each given its own listening socket per listener
 * (listen.c binds them so that nobody else listens there, a Switchyard
 * starting at the same instant included). On failure everything made here
 * is freed again, after logging why. */
static int open_listeners(const struct adm_config *cfg)
{
    struct adm_errors errs;

    proc.nworkers = adm_config_workers(cfg);
    if (!(proc.workers = calloc(proc.nworkers, sizeof(*proc.workers)))) {
        gw_log(GW_LOG_ERROR, "workers: out of memory");
        return -1;
    }
    for (unsigned i = 0; i < proc.nworkers; i++) {
        if (gw_worker_init(&proc.workers[i], &proc, i) < 0) {
            gw_log(GW_LOG_ERROR, "workers: out of memory");
            goto fail_workers;
        }
    }
    adm_errors_init(&errs);
    if (gw_listen_prepare(&proc, NULL, cfg, &errs)) {
        gw_log_errors("listeners", &errs);
        adm_errors_clear(&errs);
        goto fail_workers;
    }
    gw_listen_commit(&proc, NULL, cfg);
    return 0;
fail_workers:
    close_listeners();
    return -1;
}

/* The apply pipeline's hooks for a config that changes the listeners:
 * bound before it is persisted, handed to the workers once it is
 * published. */
static size_t listeners_prepare(void *arg, const struct adm_config *live,
                                const struct adm_config *cfg, struct adm_errors *errs)
{
    return gw_listen_prepare(arg, live, cfg, errs);
}

static void listeners_done(void *arg, const struct adm_config *live, const struct adm_config *cfg,
                           int published)
{
    if (published)
        gw_listen_commit(arg, live, cfg);
    else
        gw_listen_abort();
}

/* ---- an upgrade: the old process's side ---- */

/* The state's hash as the ETag writes it. */
static void state_hash(char *buf, size_t cap)
{
    snprintf(buf, cap, "%016llx", (unsigned long long)adm_state_hash(gw_persist_state()));
}

/* The generation, the state's hash and the listeners' addresses: what a
 * new process needs before it builds. */
static json_t *up_facts(void *arg)
{
    const struct adm_snapshot *s = atomic_load(&proc.swap.current);
    json_t *ls = json_array();
    char h[24];

    (void)arg;
    state_hash(h, sizeof(h));
    for (size_t i = 0; ls && i < s->cfg->nlisteners; i++)
        json_array_append_new(ls, json_string(s->cfg->listeners[i].addr.text));
    return json_pack("{s:I,s:s,s:o*}", "gen", (json_int_t)s->gen, "hash", h, "listeners", ls);
}

/* Each TLS listener's ticket master, by address (hex). */
static json_t *tickets_export(void)
{
    const struct adm_snapshot *s = atomic_load(&proc.swap.current);
    json_t *o = json_object();

    for (size_t i = 0; o && i < s->cfg->nlisteners; i++) {
        unsigned char m[32];
        char hex[65];
        if (!s->tls[i])
            continue;
        adm_tls_ctx_ticket_master(s->tls[i], m);
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", m[k]);
        json_object_set_new(o, s->cfg->listeners[i].addr.text, json_string(hex));
    }
    return o;
}

static json_t *up_state(void *arg)
{
    const struct adm_snapshot *s = atomic_load(&proc.swap.current);
    char h[24];

    (void)arg;
    state_hash(h, sizeof(h));
    return json_pack("{s:I,s:s,s:I,s:o*,s:o*,s:o*,s:o*}", "gen", (json_int_t)s->gen, "hash", h,
                     "swaps", (json_int_t)proc.swap.swaps, "counters", gw_stats_export(&proc),
                     "tickets", tickets_export(), "health", gw_health_export(), "jwks",
                     adm_rjwks_export());
}

/* The workers' duplicates taken out of <proc>, or all closed. */
static void handed_take(struct gw_handed **fds, size_t *n)
{
    pthread_mutex_lock(&proc.hand_mu);
    *fds = proc.handed;
    *n = proc.nhanded;
    proc.handed = NULL;
    proc.nhanded = 0;
    pthread_mutex_unlock(&proc.hand_mu);
}

static void handed_close(struct gw_handed *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i].fd);
    free(fds);
}

/* Every worker stops accepting and gives a duplicate of each listening
 * socket; the admin API's goes along. */
static int up_pause(void *arg, struct gw_handed **fds, size_t *n)
{
    struct timespec nap = {0, 1000 * 1000};
    struct gw_handed *more;
    const struct adm_config *cfg = atomic_load(&proc.swap.current)->cfg;
    int afd;

    (void)arg;
    handed_take(fds, n); /* a late worker's of an attempt that gave up */
    handed_close(*fds, *n);
    proc.hand_failed = 0;
    atomic_store(&proc.handed_workers, 0);
    notify_all('U');
    /* a worker answers between two callbacks: milliseconds */
    for (int i = 0; atomic_load(&proc.handed_workers) < proc.nworkers; i++) {
        if (i >= 3000) {
            gw_log(GW_LOG_ERROR, "upgrade: a worker did not hand its sockets over within 3 s");
            handed_take(fds, n);
            handed_close(*fds, *n);
            goto fail;
        }
        nanosleep(&nap, NULL);
    }
    handed_take(fds, n);
    if (proc.hand_failed || !api || (afd = fcntl(adm_api_listen_fd(api), F_DUPFD_CLOEXEC, 3)) < 0 ||
        !(more = realloc(*fds, (*n + 1) * sizeof(**fds)))) {
        gw_log(GW_LOG_ERROR, "upgrade: duplicating the listening sockets: %s", strerror(errno));
        handed_close(*fds, *n);
        goto fail;
    }
    *fds = more;
    more[*n] = (struct gw_handed){.fd = afd, .kind = GW_HANDED_ADMIN};
    snprintf(more[*n].addr, sizeof(more->addr), "%s", cfg->admin.addr.text);
    (*n)++;
    adm_api_accepting(api, 0);
    return 0;
fail:
    notify_all('u');
    return -1;
}

static void up_resume(void *arg)
{
    (void)arg;
    notify_all('u');
    if (api)
        adm_api_accepting(api, 1);
}

/* The upgrade drain's deadline: idle connections close, tunnels hear
 * 1001; what is still open 2 s later is closed. */
static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    gw_log(GW_LOG_NOTICE, "upgrade drain: deadline: closing idle connections and tunnels");
    notify_all('W');
}

/* The new process took over: the admin API goes (its socket is the new
 * one's), the workers drain without closing idle keep-alive connections
 * before timeouts.drain_ms, then the process exits 0. */
static void up_adopted(void *arg)
{
    const struct adm_config *cfg = atomic_load(&proc.swap.current)->cfg;
    unsigned ms = cfg->timeouts.drain_ms;
    struct timeval d = {ms / 1000, (ms % 1000) * 1000};

    (void)arg;
    rollout_end("the process handed over to a new binary");
    handed_over = 1;
    gw_upgrade_serve_stop(0);
    gw_fleet_stop();
    adm_api_free(api);
    api = NULL;
    atomic_store(&proc.draining, 1);
    gw_log(GW_LOG_NOTICE, "upgrade: handed over; draining, idle connections close in %u ms", ms);
    notify_all('G');
    deadline_ev = evtimer_new(proc.admin_base, deadline_cb, NULL);
    if (deadline_ev)
        evtimer_add(deadline_ev, &d);
    drain_timers(ms + 2000);
}

static void up_log(void *arg, int warn, const char *line)
{
    (void)arg;
    gw_log(warn ? GW_LOG_WARN : GW_LOG_NOTICE, "%s", line);
}

/* Serves upgrades on the state directory, when there is one. */
static void upgrade_serve(void)
{
    struct gw_upgrade_hooks h = {up_facts, up_pause, up_state, up_resume, up_adopted, up_log, NULL};
    struct adm_state *st = gw_persist_state();
    char why[512];

    if (st->dir && gw_upgrade_serve(proc.admin_base, st->dir, st->locked ? st->lock_fd : -1, &h,
                                    why, sizeof(why)) < 0)
        gw_log(GW_LOG_WARN, "upgrade: cannot serve upgrades: %s", why);
}

/* ---- an upgrade: the new process's side ---- */

/* Says hello to the process running on the state directory of <path>:
 * its lock and listeners are this start's. -1 after logging why. */
static int upgrade_hello(const char *path)
{
    char why[1024];
    char *dir = gw_persist_dir_for(path, why, sizeof(why));
    const json_t *ls;
    const char **addrs;
    int lock_fd = -1, rc = -1;

    if (!dir || gw_upgrade_connect(dir, &up_hello, &lock_fd, why, sizeof(why)) < 0) {
        gw_log(GW_LOG_ERROR, "upgrade: %s", why);
        free(dir);
        return -1;
    }
    if (lock_fd >= 0)
        gw_persist_adopt_lock(lock_fd);
    ls = json_object_get(json_object_get(up_hello, "facts"), "listeners");
    if ((addrs = calloc(json_array_size(ls) + 1, sizeof(*addrs)))) {
        for (size_t i = 0; i < json_array_size(ls); i++)
            addrs[i] = json_is_string(json_array_get(ls, i))
                           ? json_string_value(json_array_get(ls, i))
                           : "";
        rc = gw_listen_inherit(addrs, json_array_size(ls));
    }
    free(addrs);
    if (rc < 0)
        gw_log(GW_LOG_ERROR, "upgrade: out of memory");
    else
        gw_log(GW_LOG_NOTICE, "upgrade: taking over from pid %lld on %s",
               (long long)json_integer_value(json_object_get(up_hello, "pid")), dir);
    free(dir);
    return rc;
}

/* The generation before the first one: the running one's when the config
 * is the same (its ETag holds), the next one when it is not. */
static uint64_t upgrade_gen(void)
{
    const json_t *f = json_object_get(up_hello, "facts");
    uint64_t gen = (uint64_t)json_integer_value(json_object_get(f, "gen"));
    const char *theirs = json_string_value(json_object_get(f, "hash"));
    char ours[24];

    state_hash(ours, sizeof(ours));
    return theirs && strcmp(theirs, ours) == 0 && gen ? gen - 1 : gen;
}

/* Each TLS listener's ticket master as the running process had it. */
static void tickets_import(const json_t *t)
{
    const struct adm_snapshot *s = atomic_load(&proc.swap.current);

    for (size_t i = 0; i < s->cfg->nlisteners; i++) {
        const char *hex = json_string_value(json_object_get(t, s->cfg->listeners[i].addr.text));
        unsigned char m[32];
        unsigned v;
        int k;

        if (!s->tls[i] || !hex || strlen(hex) != 64)
            continue;
        for (k = 0; k < 32 && sscanf(hex + 2 * k, "%2x", &v) == 1; k++)
            m[k] = (unsigned char)v;
        if (k == 32)
            adm_tls_ctx_set_ticket_master(s->tls[i], m);
    }
}

/* The admin API's socket among <fds>, when it is bound to <addr>: into
 * admin_inherit_fd; others are closed. */
static void adopt_admin(struct gw_handed *fds, size_t n, const struct adm_addr *addr)
{
    for (size_t i = 0; i < n; i++) {
        if (fds[i].fd < 0 || fds[i].kind != GW_HANDED_ADMIN)
            continue;
        if (admin_inherit_fd < 0 && gw_listen_bound_to(fds[i].fd, addr))
            admin_inherit_fd = fds[i].fd;
        else
            close(fds[i].fd);
        fds[i].fd = -1;
    }
}

/* READY, then the running process's state and sockets adopted. -1 after
 * logging why (FAIL told). */
static int upgrade_take_over(const struct adm_config *cfg, const struct adm_addr *admin_addr)
{
    const json_t *f = json_object_get(up_hello, "facts");
    struct gw_handed *fds = NULL;
    struct adm_errors errs;
    json_t *st = NULL;
    size_t n = 0, got;
    char why[512];

    if (gw_upgrade_ready(&st, &fds, &n, why, sizeof(why)) < 0) {
        gw_log(GW_LOG_ERROR, "upgrade: %s", why);
        return -1;
    }
    if (!json_equal(json_object_get(st, "gen"), json_object_get(f, "gen")) ||
        !json_equal(json_object_get(st, "hash"), json_object_get(f, "hash"))) {
        snprintf(why, sizeof(why),
                 "the running config changed during the upgrade (generation %lld, now %lld): "
                 "run the upgrade again",
                 (long long)json_integer_value(json_object_get(f, "gen")),
                 (long long)json_integer_value(json_object_get(st, "gen")));
        goto fail;
    }
    if (gw_stats_import(json_object_get(st, "counters")) < 0)
        gw_log(GW_LOG_WARN, "upgrade: the counters are not this build's: /metrics starts at 0");
    tickets_import(json_object_get(st, "tickets"));
    proc.swap.swaps += (uint64_t)json_integer_value(json_object_get(st, "swaps"));
    if (gw_health_import(json_object_get(st, "health")) < 0)
        gw_log(GW_LOG_WARN, "upgrade: the health state was not carried: servers start as a "
                            "start would");
    adm_rjwks_import(json_object_get(st, "jwks")); /* before the first request it verifies */
    adopt_admin(fds, n, admin_addr);
    adm_errors_init(&errs);
    got = gw_listen_adopt(&proc, cfg, fds, n, &errs);
    if (errs.n) {
        gw_log_errors("upgrade: listeners", &errs);
        adm_errors_clear(&errs);
        snprintf(why, sizeof(why), "the new process could not open its listeners");
        goto fail;
    }
    gw_log(GW_LOG_NOTICE, "upgrade: adopted %zu listening socket%s%s", got, got == 1 ? "" : "s",
           admin_inherit_fd >= 0 ? " and the admin API's" : "");
    free(fds);
    json_decref(st);
    return 0;
fail:
    for (size_t i = 0; i < n; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    free(fds);
    json_decref(st);
    gw_log(GW_LOG_ERROR, "upgrade: %s", why);
    gw_upgrade_finish(why);
    return -1;
}

/* The swap and the apply pipeline into it, then the first snapshot, built
 * from <cfg> (taken, freed on failure too) and published: the swap holds
 * it from now on. -1 after logging why. */
static int publish_first(struct adm_config *cfg)
{
    struct adm_pipeline_hooks hooks = {listeners_prepare, listeners_done, &proc};
    struct adm_errors errs;

    if (adm_swap_init(&proc.swap, proc.nworkers, publish_notify, &proc) < 0) {
        gw_log(GW_LOG_ERROR, "snapshot swap: out of memory");
        adm_config_free(cfg);
        return -1;
    }
    adm_pipeline_init(&pipeline, &proc.swap, gw_persist_state(), &hooks, resolver);
    if (up_hello)
        proc.swap.gen = upgrade_gen();
    adm_errors_init(&errs);
    if (adm_pipeline_publish_first(&pipeline, cfg, &errs) < 0) {
        gw_log_errors("config", &errs);
        adm_errors_clear(&errs);
        adm_swap_destroy(&proc.swap);
        return -1;
    }
    return 0;
}

/* A host name resolves to other addresses: the live snapshot again with
 * its pools' servers following, under the same generation (the config did
 * not change; nothing is persisted). */
static void resolved_cb(void *arg)
{
    struct adm_snapshot *cur = atomic_load(&proc.swap.current), *s;

    (void)arg;
    if (!cur)
        return;
    if (adm_snapshot_reresolve(cur, resolver, &s) < 0) {
        gw_log(GW_LOG_ERROR, "resolver: out of memory: the servers stay as they were");
        return;
    }
    if (s) {
        /* the live one's: s has none until published, and republishing
         * keeps it */
        unsigned long long gen = cur->gen;

        adm_swap_republish(&proc.swap, s);
        gw_log(GW_LOG_NOTICE, "upstream servers follow their host names (generation %llu stays)",
               gen);
    }
    adm_resolver_sweep(resolver);
}

static void resolver_log(void *arg, int warn, const char *line)
{
    (void)arg;
    gw_log(warn ? GW_LOG_WARN : GW_LOG_NOTICE, "%s", line);
}

/* Where the jwt policies' remote key sets are saved: the state directory
 * (read as the first snapshot is built; written only from the loop, once
 * the start made it ready), or nowhere. */
static const char *jwks_state_dir(void *arg)
{
    (void)arg;
    return gw_persist_state()->dir;
}

/* The admin event_base, the resolver on it and the keeper of the jwt
 * policies' remote key sets: the first snapshot looks its host names up
 * there, and starts fetching the jwks_url it names. -1 after logging why. */
static int start_resolver(void)
{
    struct adm_resolver_hooks hooks = {resolved_cb, resolver_log, &proc};
    struct adm_rjwks_hooks jhooks = {resolver_log, &proc, jwks_state_dir};

    if (!(proc.admin_base = event_base_new()) ||
        !(resolver = adm_resolver_new(proc.admin_base, &hooks)) ||
        adm_rjwks_start(proc.admin_base, &proc.swap, &jhooks) < 0) {
        gw_log(GW_LOG_ERROR, "admin event base: out of memory");
        adm_resolver_free(resolver);
        resolver = NULL;
        if (proc.admin_base)
            event_base_free(proc.admin_base);
        proc.admin_base = NULL;
        return -1;
    }
    return 0;
}

/* After the swap is destroyed: the snapshots' policies have let their
 * remote key sets go. */
static void stop_resolver(void)
{
    adm_rjwks_stop();
    adm_resolver_free(resolver);
    resolver = NULL;
    if (proc.admin_base)
        event_base_free(proc.admin_base);
    proc.admin_base = NULL;
}

/* Stops the first <n> workers (<how>: 'X' now, 0 when they ended on their
 * own after a drain) and joins their threads. */
static void stop_workers(unsigned n, char how)
{
    for (unsigned i = 0; i < n; i++)
        if (how && write(proc.workers[i].notify_fd[1], &how, 1) < 0 && errno != EAGAIN)
            gw_log(GW_LOG_ERROR, "notify worker %u: %s", i, strerror(errno));
    for (unsigned i = 0; i < n; i++)
        pthread_join(proc.workers[i].thread, NULL);
}

/* Every worker thread. The workers inherit the start-up mask, which
 * blocks the signals (see main()): only the admin thread takes them. On
 * failure the workers already started are stopped again, after logging
 * why. */
static int start_workers(void)
{
    unsigned i;

    for (i = 0; i < proc.nworkers; i++) {
        if (gw_worker_start(&proc.workers[i]) < 0) {
            gw_log(GW_LOG_ERROR, "cannot start worker %u: no memory, descriptor or thread for it",
                   i);
            goto fail_started;
        }
    }
    return 0;
fail_started:
    /* a worker that failed never started its thread */
    stop_workers(i, 'X');
    return -1;
}

static struct event *sig_hup, *sig_term, *sig_int, *sig_usr1, *sig_usr2;

static void stop_admin(void)
{
    gw_upgrade_serve_stop(!handed_over);
    if (deadline_ev)
        event_free(deadline_ev);
    deadline_ev = NULL;
    gw_fleet_stop(); /* its writes in flight are answered first */
    adm_api_free(api);
    api = NULL;
    if (drain_check_ev)
        event_free(drain_check_ev);
    if (drain_ev)
        event_free(drain_ev);
    if (reclaim_ev)
        event_free(reclaim_ev);
    if (sig_int)
        event_free(sig_int);
    if (sig_term)
        event_free(sig_term);
    if (sig_hup)
        event_free(sig_hup);
    if (sig_usr1)
        event_free(sig_usr1);
    if (sig_usr2)
        event_free(sig_usr2);
    drain_check_ev = drain_ev = reclaim_ev = sig_int = sig_term = sig_hup = sig_usr1 = sig_usr2 =
        NULL;
}

/* The admin API's audit lines: one per accepted change, in the error log,
 * as notices: written at the default log_level. */
static void audit_log(void *arg, const char *line)
{
    (void)arg;
    gw_log(GW_LOG_NOTICE, "%s", line);
}

/* The admin thread's events (signals, snapshot reclamation), the warm heap,
 * then the admin API on <addr> with <token>. On failure what was made here
 * is freed again, after logging why. */
static int start_admin(const struct adm_addr *addr, const char *token, unsigned reserve_mb)
{
    struct timeval rt = {0, 50 * 1000};
    struct adm_api_hooks hooks = {0};
    char msg[256];

    sig_hup = evsignal_new(proc.admin_base, SIGHUP, signal_cb, NULL);
    sig_term = evsignal_new(proc.admin_base, SIGTERM, signal_cb, NULL);
    sig_int = evsignal_new(proc.admin_base, SIGINT, signal_cb, NULL);
    sig_usr1 = evsignal_new(proc.admin_base, SIGUSR1, signal_cb, NULL);
    sig_usr2 = evsignal_new(proc.admin_base, SIGUSR2, signal_cb, NULL);
    reclaim_ev = event_new(proc.admin_base, -1, EV_PERSIST, reclaim_cb, NULL);
    if (!sig_hup || !sig_term || !sig_int || !sig_usr1 || !sig_usr2 || !reclaim_ev ||
        evsignal_add(sig_hup, NULL) < 0 || evsignal_add(sig_term, NULL) < 0 ||
        evsignal_add(sig_int, NULL) < 0 || evsignal_add(sig_usr1, NULL) < 0 ||
        evsignal_add(sig_usr2, NULL) < 0 || event_add(reclaim_ev, &rt) < 0) {
        gw_log(GW_LOG_ERROR, "admin events: out of memory");
        goto fail_events;
    }
    hooks.stats = gw_stats;
    hooks.health = gw_health_info;
    hooks.audit = audit_log;
    hooks.arg = &proc;
    gw_heap_start(reserve_mb);
    if (!(api = adm_api_new_on(proc.admin_base, addr, admin_inherit_fd, &pipeline, &hooks, token,
                               msg, sizeof(msg)))) {
        admin_inherit_fd = -1; /* taken */
        gw_log(GW_LOG_ERROR, "%s", msg);
        goto fail_events;
    }
    admin_inherit_fd = -1; /* the API's now */
    gw_log(GW_LOG_INFO, "admin API on http://%s%s%s", addr->text, token ? " (bearer token)" : "",
           gw_persist_state()->dir ? ", state persisted" : "");
    if (gw_fleet_start(api, &pipeline, atomic_load(&proc.swap.current)->cfg,
                       gw_persist_state()->dir) < 0)
        goto fail_events;
    return 0;
fail_events:
    stop_admin();
    return -1;
}

static uid_t drop_uid;
static gid_t drop_gid;

static int chown_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    if (lchown(path, drop_uid, drop_gid) < 0)
        gw_log(GW_LOG_WARN, "user: chown %s: %s", path, strerror(errno));
    return 0;
}

/* user and group (<cfg>): after binding, as nginx's user does. The state
 * directory (with what it holds) and the access-log file are given to them
 * first, so that they stay writable; descriptors already open stay usable.
 * The error log is stderr, inherited. -1 after logging why. */
static int drop_privileges(const struct adm_config *cfg)
{
    struct passwd *pw = NULL;
    struct group *gr = NULL;

    if (!cfg->user && !cfg->group)
        return 0;
    if ((cfg->user && !(pw = getpwnam(cfg->user))) ||
        (cfg->group && !(gr = getgrnam(cfg->group)))) {
        gw_log(GW_LOG_ERROR, "%s %s: no such account", pw || !cfg->user ? "group" : "user",
               pw || !cfg->user ? cfg->group : cfg->user);
        return -1;
    }
    drop_uid = pw ? pw->pw_uid : geteuid();
    drop_gid = gr ? gr->gr_gid : pw ? pw->pw_gid : getegid();
    if (geteuid() != 0) {
        if (drop_uid == geteuid() && drop_gid == getegid())
            return 0;
        gw_log(GW_LOG_ERROR, "user %s, group %s: dropping to them needs a start as root",
               cfg->user ? cfg->user : "-", cfg->group ? cfg->group : "-");
        return -1;
    }
    if (gw_persist_state()->dir)
        nftw(gw_persist_state()->dir, chown_one, 16, FTW_PHYS);
    if (cfg->access_log.target == ADM_LOG_FILE &&
        chown(cfg->access_log.path, drop_uid, drop_gid) < 0)
        gw_log(GW_LOG_WARN, "user: chown %s: %s", cfg->access_log.path, strerror(errno));
    if ((pw ? initgroups(pw->pw_name, drop_gid) : setgroups(1, &drop_gid)) < 0 ||
        setgid(drop_gid) < 0 || setuid(drop_uid) < 0) {
        gw_log(GW_LOG_ERROR, "cannot drop to user %s, group %s: %s", cfg->user ? cfg->user : "-",
               cfg->group ? cfg->group : "-", strerror(errno));
        return -1;
    }
    if (drop_uid != 0 && setuid(0) == 0) {
        gw_log(GW_LOG_ERROR, "dropped privileges came back: refusing to run");
        return -1;
    }
    gw_log(GW_LOG_INFO, "running as uid %u, gid %u", (unsigned)drop_uid, (unsigned)drop_gid);
    return 0;
}

/* The listeners of <c> for the start line: every address, or the first
 * four and how many more ("a, b, c, d and 3 more"), a TLS one marked. */
static void listener_list(const struct adm_config *c, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < c->nlisteners && i < 4 && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s%s", i ? ", " : "", c->listeners[i].addr.text,
                              c->listeners[i].tls ? " tls" : "");
    if (c->nlisteners > 4 && o < cap)
        snprintf(buf + o, cap - o, " and %zu more", c->nlisteners - 4);
}

/* Serves until a drain ends (every worker stopped) or a second signal. */
static void run(const char *cfg_path)
{
    struct adm_snapshot *snap = atomic_load(&proc.swap.current);
    size_t nl = snap->cfg->nlisteners, nr = rt_table_count(snap->rt);
    char lst[512];

    /* where it serves, all of it: the listeners and the admin API */
    listener_list(snap->cfg, lst, sizeof(lst));
    gw_log(GW_LOG_NOTICE,
           "switchyard %s: %u worker%s, %zu listener%s (%s), admin API %s, %zu route%s, config %s, "
           "state %s",
           SY_VERSION, proc.nworkers, proc.nworkers == 1 ? "" : "s", nl, nl == 1 ? "" : "s", lst,
           snap->cfg->admin.addr.text, nr, nr == 1 ? "" : "s",
           cfg_path ? cfg_path : "(embedded default)",
           gw_persist_state()->dir ? gw_persist_state()->dir : "not persisted");
    event_base_dispatch(proc.admin_base);
}

int main(int argc, char **argv)
{
    const char *cfg_path = NULL, *check_path = NULL;
    struct adm_config *cfg;
    struct adm_addr admin_addr;
    char *token = NULL;
    unsigned reserve_mb;
    int rc, reset = 0, upgrade = 0;
    struct gw_start_plan plan = {0};
    sigset_t sigs, old_mask;

    if ((rc = parse_cmdline(argc, argv, &cfg_path, &check_path, &reset, &upgrade)) >= 0)
        return rc;
    if (check_path)
        return check_config(check_path);
    rc = 1;
    remember_self(argc, argv);
    event_set_log_callback(libevent_log);
    signal(SIGPIPE, SIG_IGN);
    /* Blocked from here until the admin thread's handlers are in place: the
     * listeners accept (and a supervisor may signal) before that, and a
     * SIGHUP or SIGUSR1 then would kill the process with its default action.
     * A signal sent meanwhile stays pending and is taken once unblocked. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGUSR2);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, &old_mask);
    proc.config_path = cfg_path;
    pthread_mutex_init(&proc.hand_mu, NULL);
    if (upgrade && upgrade_hello(cfg_path) < 0)
        goto out_fail_state;
    if (!(cfg = gw_persist_load(&proc, cfg_path, reset, &plan)))
        goto out_fail_state;
    gw_log_set_level(cfg->log_level);
    if (admin_prepare(cfg, &token, &admin_addr) < 0)
        goto out_fail_cfg;
    if (open_access_log(cfg) < 0)
        goto out_fail_admin_addr;
    gw_worker_fd_limit(cfg, 1);
    if (open_listeners(cfg) < 0)
        goto out_fail_access_log;
    reserve_mb = cfg->admin.heap_reserve_mb;
    if (start_resolver() < 0)
        goto out_fail_listeners;
    if (publish_first(cfg) < 0) {
        cfg = NULL; /* freed by publish_first */
        goto out_fail_resolver;
    }
    cfg = NULL; /* the first snapshot owns it */
    if (start_workers() < 0)
        goto out_fail_swap;
    if (gw_health_start(proc.nworkers) < 0)
        goto out_fail_workers;
    gw_health_update(atomic_load(&proc.swap.current));
    if (up_hello && upgrade_take_over(atomic_load(&proc.swap.current)->cfg, &admin_addr) < 0)
        goto out_fail_workers;
    if (start_admin(&admin_addr, token, reserve_mb) < 0)
        goto out_fail_workers;
    if (up_hello && gw_upgrade_finish(NULL) < 0)
        gw_log(GW_LOG_WARN, "upgrade: the running process did not hear ADOPTED: both serve "
                            "until it ends");
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (gw_persist_begin(&plan) < 0 || drop_privileges(atomic_load(&proc.swap.current)->cfg) < 0)
        goto out_fail_admin;
    gw_persist_start(&plan);
    upgrade_serve();
    if (up_hello) {
        char msg[64];
        snprintf(msg, sizeof(msg), "MAINPID=%d\nREADY=1", (int)getpid());
        gw_sd_notify(msg);
    } else {
        gw_sd_notify("READY=1");
    }

    adm_rjwks_serving(1);
    run(cfg_path);
    adm_rjwks_serving(0);
    rc = 0;

out_fail_admin:
    stop_admin();
out_fail_workers:
    /* after a drain the workers have stopped on their own */
    stop_workers(proc.nworkers, rc ? 'X' : 0);
    gw_health_stop(); /* after the workers: they report to it */
    if (rc == 0)
        gw_log(GW_LOG_NOTICE, "drained, exiting");
out_fail_swap:
    adm_swap_destroy(&proc.swap);
out_fail_resolver:
    stop_resolver();
out_fail_listeners:
    close_listeners();
out_fail_access_log:
    close_access_log();
out_fail_admin_addr:
    adm_addr_free(&admin_addr);
    free(token);
out_fail_cfg:
    adm_config_free(cfg);
out_fail_state:
    if (up_hello && rc)
        gw_upgrade_finish(gw_log_last_error()[0] ? gw_log_last_error()
                                                 : "the new process failed to start");
    json_decref(up_hello);
    if (admin_inherit_fd >= 0)
        close(admin_inherit_fd);
    gw_persist_free();
    libevent_global_shutdown();
    free(self_argv);
    return rc;
}
