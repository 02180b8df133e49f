/*
 * main.c - switchyard: start-up, the admin thread's loop (signals, reloads,
 * snapshot reclamation), and the drain on SIGTERM/SIGINT.
 *
 *   switchyard [-c FILE]      run (without -c: the embedded default config)
 *   switchyard --check FILE   validate FILE like nginx -t, print every error
 *
 * The main thread becomes the admin thread once the workers run: it owns the
 * admin event_base, builds every new snapshot, publishes it and frees old
 * ones after their grace period.
 */
#define _GNU_SOURCE
#include "gateway/gateway.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/thread.h>

#define SY_VERSION "0.1.0"

static struct gw_process proc;
static struct adm_state state = {.journal_fd = -1};
static struct adm_api *api;
static struct event *reclaim_ev, *drain_ev, *drain_check_ev;

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard [-c FILE]        run (default: the embedded config)\n"
               "       switchyard --check FILE     validate a config and exit\n"
               "       switchyard --print-default  print the embedded default config\n"
               "       switchyard --version\n");
}

static void print_errors(const char *what, struct adm_errors *errs)
{
    char *s = adm_errors_format(errs);

    gw_log(GW_LOG_ERROR, "%s:", what);
    if (s) {
        char *line = s, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            gw_log(GW_LOG_ERROR, "  %s", line);
            line = nl + 1;
        }
        free(s);
    }
}

static struct adm_config *load_config(const char *path, struct adm_errors *errs)
{
    return path ? adm_config_load_file(path, errs) : adm_config_default();
}

/* SIGHUP: read the file again and swap it in through the admin API's path
 * (validate, build, persist, publish); a bad file changes nothing. */
static void reload(void)
{
    struct adm_errors errs;
    json_error_t je;
    json_t *doc;
    char msg[512];
    int rc;

    if (!proc.config_path) {
        gw_log(GW_LOG_WARN, "SIGHUP: running on the embedded default config, nothing to reload");
        return;
    }
    doc = json_load_file(proc.config_path, JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving:");
        gw_log(GW_LOG_ERROR, "  %s: line %d, column %d: %s", proc.config_path, je.line, je.column,
               je.text);
        return;
    }
    adm_errors_init(&errs);
    rc = adm_api_apply(api, doc, &errs, msg, sizeof(msg));
    json_decref(doc);
    if (rc == -1) {
        print_errors("reload refused, the running config keeps serving", &errs);
    } else if (rc == -2) {
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving: %s", msg);
    } else if (rc == 1) {
        gw_log(GW_LOG_INFO, "config reloaded: unchanged, generation %llu stays",
               (unsigned long long)atomic_load(&proc.swap.current)->gen);
    } else {
        struct adm_snapshot *s = atomic_load(&proc.swap.current);
        gw_log(GW_LOG_INFO, "config reloaded: generation %llu, %zu routes, built in %.2f ms",
               (unsigned long long)s->gen, rt_table_count(s->rt), s->build_ms);
        if (s->cfg->nlisteners != proc.workers[0].nlisteners)
            gw_log(GW_LOG_WARN, "reload: listener changes take effect at the next restart");
    }
    adm_errors_clear(&errs);
}

/* The bearer token: admin.token_file, else SWITCHYARD_ADMIN_TOKEN. */
static char *read_token(const struct adm_config *cfg)
{
    const char *env = getenv("SWITCHYARD_ADMIN_TOKEN");
    char buf[1024];
    FILE *f;
    size_t n;

    if (cfg->admin.token_file) {
        if (!(f = fopen(cfg->admin.token_file, "r"))) {
            gw_log(GW_LOG_ERROR, "admin.token_file %s: %s", cfg->admin.token_file, strerror(errno));
            return NULL;
        }
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
            buf[--n] = '\0';
        if (!n) {
            gw_log(GW_LOG_ERROR, "admin.token_file %s is empty", cfg->admin.token_file);
            return NULL;
        }
        return strdup(buf);
    }
    return env && *env ? strdup(env) : NULL;
}

/* The persisted config wins over -c: the operator's API changes survive a
 * restart. Returns the config to run, taking <cfg>. */
static struct adm_config *persisted(struct adm_config *cfg, const char *from)
{
    char msg[1024];
    int err;
    json_t *doc;
    struct adm_config *p;
    struct adm_errors errs;

    if (!cfg->admin.state_dir)
        return cfg;
    doc = adm_state_open(&state, cfg->admin.state_dir, msg, sizeof(msg), &err);
    if (err) {
        gw_log(GW_LOG_ERROR, "state: %s", msg);
        adm_config_free(cfg);
        return NULL;
    }
    if (msg[0])
        gw_log(GW_LOG_ERROR, "state: %s", msg);
    if (!doc)
        return cfg;
    adm_errors_init(&errs);
    p = adm_config_from_json(doc, &errs);
    json_decref(doc);
    if (!p) {
        print_errors("state: the persisted config is invalid; refusing it and starting from -c",
                     &errs);
        adm_errors_clear(&errs);
        return cfg;
    }
    gw_log(GW_LOG_INFO, "state: the persisted config in %s wins over %s", cfg->admin.state_dir,
           from);
    adm_config_free(cfg);
    return p;
}

static void reclaim_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    adm_swap_reclaim(&proc.swap);
}

/* Pages the admin thread touches for the first time cost a fault each, and
 * on a VM a fault costs microseconds: a first push of 10k routes (some
 * 20 MB of parse tree, config and tables) spent more time faulting than
 * working. admin.heap_reserve_mb of heap is touched once at start and kept:
 * freed memory stays in the heap (no trim) and large blocks come from it
 * too (no mmap of their own). The admin thread touches it itself, before
 * its API opens: pages first touched by another thread measured 30-40 %
 * slower for it to use later on this host (presumably the host places
 * memory near the CPU that first touches it). */
#define HEAP_BLOCK_MB 8
static void heap_reserve(unsigned mb)
{
    size_t n = (mb + HEAP_BLOCK_MB - 1) / HEAP_BLOCK_MB, got = 0;
    char **blocks;

    if (!n || !(blocks = calloc(n, sizeof(*blocks))))
        return;
    /* blocks well below M_MMAP_THRESHOLD come from the main thread's heap,
     * which is the admin thread's; mb is at most 1024 (the config's bound) */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, (int)(mb + 64) << 20);
    for (; got < n; got++) {
        if (!(blocks[got] = malloc((size_t)HEAP_BLOCK_MB << 20)))
            break;
        /* one write per page is all a fault needs */
        for (size_t off = 0; off < (size_t)HEAP_BLOCK_MB << 20; off += 4096)
            ((volatile char *)blocks[got])[off] = 0;
    }
    while (got)
        free(blocks[--got]);
    free(blocks);
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

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    const struct adm_config *cfg;

    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        reload();
        return;
    }
    if (atomic_exchange(&proc.draining, 1)) {
        gw_log(GW_LOG_WARN, "second signal: stopping now");
        notify_all('X');
        return;
    }
    cfg = atomic_load(&proc.swap.current)->cfg;
    gw_log(GW_LOG_INFO, "draining: no new connections, in-flight requests get %u ms",
           cfg->timeouts.drain_ms);
    notify_all('D');
    {
        struct timeval t = {cfg->timeouts.drain_ms / 1000, (cfg->timeouts.drain_ms % 1000) * 1000};
        struct timeval p = {0, 20 * 1000};
        drain_ev = evtimer_new(proc.admin_base, drain_timeout_cb, NULL);
        drain_check_ev = event_new(proc.admin_base, -1, EV_PERSIST, drain_check_cb, NULL);
        if (drain_ev)
            evtimer_add(drain_ev, &t);
        if (drain_check_ev)
            event_add(drain_check_ev, &p);
    }
}

/* A listening socket of its own for one worker (SO_REUSEPORT). */
static evutil_socket_t listen_socket(const struct adm_addr *a)
{
    int one = 1;
    evutil_socket_t fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->sslen) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int open_access_log(const struct adm_config *cfg)
{
    switch (cfg->access_log.target) {
    case ADM_LOG_STDOUT:
        return STDOUT_FILENO;
    case ADM_LOG_STDERR:
        return STDERR_FILENO;
    case ADM_LOG_FILE:
        return open(cfg->access_log.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    default:
        return -1;
    }
}

int main(int argc, char **argv)
{
    const char *cfg_path = NULL, *check_path = NULL;
    struct adm_errors errs;
    struct adm_config *cfg;
    struct adm_snapshot *snap;
    struct event *sig_hup, *sig_term, *sig_int;
    sigset_t block, old;
    struct timeval rt = {0, 50 * 1000};
    unsigned reserve_mb = 0;
    int rc = 1;
    char *token = NULL, why[128];
    struct adm_addr admin_addr;
    struct adm_api_hooks hooks;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            cfg_path = argv[++i];
        } else if (strcmp(argv[i], "--check") == 0 && i + 1 < argc) {
            check_path = argv[++i];
        } else if (strcmp(argv[i], "--print-default") == 0) {
            fputs(adm_config_default_json(), stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("switchyard %s\n", SY_VERSION);
            return 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    adm_errors_init(&errs);
    if (check_path) {
        cfg = adm_config_load_file(check_path, &errs);
        if (!cfg) {
            char *s = adm_errors_format(&errs);
            fputs(s ? s : "out of memory\n", stderr);
            free(s);
            adm_errors_clear(&errs);
            return 1;
        }
        adm_config_free(cfg);
        puts("ok");
        return 0;
    }

    signal(SIGPIPE, SIG_IGN);
    cfg = load_config(cfg_path, &errs);
    if (!cfg) {
        print_errors(cfg_path ? cfg_path : "embedded config", &errs);
        adm_errors_clear(&errs);
        return 1;
    }
    cfg = persisted(cfg, cfg_path ? cfg_path : "the embedded default");
    if (!cfg)
        return 1;
    {
        json_t *doc = json_deep_copy(cfg->json);
        char msg[512];
        if (!doc || adm_state_set_doc(&state, doc) < 0) {
            gw_log(GW_LOG_ERROR, "out of memory");
            return 1;
        }
        json_decref(doc);
        if (state.dir && adm_state_save(&state, msg, sizeof(msg)) < 0) {
            gw_log(GW_LOG_ERROR, "state: %s", msg);
            return 1;
        }
    }
    if (!adm_addr_is_loopback(&cfg->admin.addr) && !cfg->admin.token_file &&
        !(getenv("SWITCHYARD_ADMIN_TOKEN") && *getenv("SWITCHYARD_ADMIN_TOKEN"))) {
        gw_log(GW_LOG_ERROR,
               "admin address %s is not loopback and no token is configured "
               "(admin.token_file or SWITCHYARD_ADMIN_TOKEN): refusing to start",
               cfg->admin.addr.text);
        adm_config_free(cfg);
        return 1;
    }
    token = read_token(cfg);
    if (cfg->admin.token_file && !token)
        return 1;
    memset(&admin_addr, 0, sizeof(admin_addr));
    if (adm_addr_parse(&admin_addr, cfg->admin.addr.text, 0, why, sizeof(why)) < 0)
        return 1;
    proc.config_path = cfg_path;
    proc.nworkers = adm_config_workers(cfg);
    reserve_mb = cfg->admin.heap_reserve_mb;
    proc.access_fd = open_access_log(cfg);
    if (cfg->access_log.target == ADM_LOG_FILE && proc.access_fd < 0) {
        gw_log(GW_LOG_ERROR, "access log %s: %s", cfg->access_log.path, strerror(errno));
        adm_config_free(cfg);
        return 1;
    }
    proc.workers = calloc(proc.nworkers, sizeof(*proc.workers));
    if (!proc.workers || adm_swap_init(&proc.swap, proc.nworkers, gw_worker_notify, &proc) < 0) {
        gw_log(GW_LOG_ERROR, "out of memory");
        return 1;
    }
    for (unsigned i = 0; i < proc.nworkers; i++) {
        struct gw_worker *w = &proc.workers[i];
        w->id = i;
        w->proc = &proc;
        w->reqid_prefix = (uint32_t)(getpid() * 2654435761u) ^ (uint32_t)time(NULL);
        w->nlisteners = cfg->nlisteners;
        w->listeners = calloc(cfg->nlisteners, sizeof(*w->listeners));
        if (!w->listeners)
            return 1;
        for (size_t l = 0; l < cfg->nlisteners; l++) {
            w->listeners[l].fd = listen_socket(&cfg->listeners[l].addr);
            if (w->listeners[l].fd < 0) {
                gw_log(GW_LOG_ERROR, "listen on %s: %s", cfg->listeners[l].addr.text,
                       strerror(errno));
                return 1;
            }
        }
    }
    snap = adm_snapshot_build(cfg, NULL, proc.nworkers, &errs);
    if (!snap) {
        print_errors("config", &errs);
        adm_errors_clear(&errs);
        return 1;
    }
    adm_swap_publish(&proc.swap, snap);

    proc.admin_base = event_base_new();
    if (!proc.admin_base)
        return 1;
    /* workers inherit a mask without the signals: only this thread takes them */
    sigemptyset(&block);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (unsigned i = 0; i < proc.nworkers; i++) {
        if (gw_worker_start(&proc.workers[i]) < 0) {
            gw_log(GW_LOG_ERROR, "cannot start worker %u", i);
            return 1;
        }
    }
    sig_hup = evsignal_new(proc.admin_base, SIGHUP, signal_cb, NULL);
    sig_term = evsignal_new(proc.admin_base, SIGTERM, signal_cb, NULL);
    sig_int = evsignal_new(proc.admin_base, SIGINT, signal_cb, NULL);
    evsignal_add(sig_hup, NULL);
    evsignal_add(sig_term, NULL);
    evsignal_add(sig_int, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    reclaim_ev = event_new(proc.admin_base, -1, EV_PERSIST, reclaim_cb, NULL);
    event_add(reclaim_ev, &rt);
    hooks.normalize = gw_path_normalize;
    hooks.stats = gw_stats;
    hooks.arg = &proc;
    heap_reserve(reserve_mb);
    {
        char msg[256];
        api = adm_api_new(proc.admin_base, &admin_addr, &proc.swap, &state, &hooks, token, msg,
                          sizeof(msg));
        if (!api) {
            gw_log(GW_LOG_ERROR, "%s", msg);
            notify_all('X');
            for (unsigned i = 0; i < proc.nworkers; i++)
                pthread_join(proc.workers[i].thread, NULL);
            return 1;
        }
    }
    gw_log(GW_LOG_INFO, "admin API on http://%s%s%s", admin_addr.text,
           token ? " (bearer token)" : "", state.dir ? ", state persisted" : "");

    gw_log(GW_LOG_INFO, "switchyard %s: %u workers, %zu listeners (%s%s), %zu routes, config %s",
           SY_VERSION, proc.nworkers, snap->cfg->nlisteners, snap->cfg->listeners[0].addr.text,
           snap->cfg->nlisteners > 1 ? ", ..." : "", rt_table_count(snap->rt),
           cfg_path ? cfg_path : "(embedded default)");
    event_base_dispatch(proc.admin_base);

    for (unsigned i = 0; i < proc.nworkers; i++) {
        pthread_join(proc.workers[i].thread, NULL);
        gw_worker_destroy(&proc.workers[i]);
    }
    gw_log(GW_LOG_INFO, "drained, exiting");
    event_free(sig_hup);
    event_free(sig_term);
    event_free(sig_int);
    event_free(reclaim_ev);
    if (drain_ev)
        event_free(drain_ev);
    if (drain_check_ev)
        event_free(drain_check_ev);
    adm_api_free(api);
    event_base_free(proc.admin_base);
    adm_swap_destroy(&proc.swap);
    adm_state_free(&state);
    adm_addr_free(&admin_addr);
    free(token);
    free(proc.workers);
    if (proc.access_fd > STDERR_FILENO)
        close(proc.access_fd);
    libevent_global_shutdown();
    rc = 0;
    return rc;
}
