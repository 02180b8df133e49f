/*
 * persist.c - the state directory seen from the process: which config a
 * start runs (the -c file, or the persisted config when the file did not
 * change since it was derived from it), where the embedded default keeps
 * its state, what a start writes once it succeeded, and SIGHUP's rule,
 * the same as a start's: a file unchanged since leaves the API's changes
 * standing, a changed one wins over them and they are set aside.
 */
#define _GNU_SOURCE
#include "gateway/persist.h"
#include "admin/fleet_sync.h"
#include "gateway/fleet.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct adm_state state = {.journal_fd = -1};
static struct gw_process *proc;       /* the process's -c path and swap */
static struct adm_pipeline *pipeline; /* the reload's path in */
/* The embedded default's state directory (default_state_dir), NULL with
 * -c or when none can be named. */
static char *default_dir;
/* What the running config was last derived from: the hash of the -c file
 * (or the embedded default) as the state's source record keeps it, and the
 * signature of its document, by which a SIGHUP counts the changes made
 * through the API since. */
static uint64_t derived_hash;
static struct adm_state_sig derived_sig;
/* A SIGHUP is applying the file: it says itself where a replaced state
 * went (persist_report does not). */
static int reloading;

#define SOURCE_BLOCK 65536

/* A file's hash as the state's source record keeps it: FNV-1a of each
 * SOURCE_BLOCK bytes, chained; <acc> is the hash of the blocks before
 * <block> (<n> bytes). */
static uint64_t source_step(uint64_t acc, const char *block, size_t n)
{
    return adm_hash(block, n) ^ (acc * 1099511628211ull);
}

/* The hash of the <len> bytes at <s>. */
static uint64_t bytes_hash(const char *s, size_t len)
{
    uint64_t acc = 0;

    for (size_t off = 0; off < len; off += SOURCE_BLOCK)
        acc = source_step(acc, s + off, len - off < SOURCE_BLOCK ? len - off : SOURCE_BLOCK);
    return acc;
}

/* The source hash of the embedded default. */
static uint64_t default_hash(void)
{
    return adm_hash(adm_config_default_json(), strlen(adm_config_default_json()));
}

/* After a reload the persisted config is derived from the file as it was
 * read (its bytes hash to <h>): a restart must not take its later API
 * changes for stale. */
static void record_source(uint64_t h)
{
    char msg[512];

    /* a write that fails: the state's hook logs it, and the next save retries it */
    if (state.dir)
        adm_state_set_source(&state, h, proc->config_path, msg, sizeof(msg));
}

/* "no API change", "1 API change", "3 API changes" into <buf>; <n>
 * SIZE_MAX: not counted (out of memory). */
static const char *changes_text(size_t n, char *buf, size_t cap)
{
    if (n == SIZE_MAX)
        snprintf(buf, cap, "its API changes (not counted: out of memory)");
    else if (n == 0)
        snprintf(buf, cap, "no API change");
    else
        snprintf(buf, cap, "%zu API change%s", n, n == 1 ? "" : "s");
    return buf;
}

/* The changes made through the API since the running config was derived
 * from the file: the routes, upstreams and other keys that differ from
 * the file's. SIZE_MAX when they cannot be counted (out of memory): then
 * they are taken to be there. */
static size_t api_changes(void)
{
    struct adm_state_sig now = {0};
    struct adm_fleet_sync *fs = pipeline ? pipeline->fleet : NULL;
    size_t n;

    /* a fleet node's file holds its node's keys only: the fleet's objects
     * are no API change */
    if (adm_state_sig_make(&now, fs ? adm_fleet_sync_node(fs) : state.doc) < 0)
        return SIZE_MAX;
    n = adm_state_sig_diff(&derived_sig, &now);
    adm_state_sig_free(&now);
    return n;
}

/* A reload that adm_pipeline_apply_node() refused with <rc>: logged, nothing changed. */
static void reload_refused(int rc, struct adm_errors *errs, const char *msg)
{
    if (rc == -3)
        gw_log_errors("reload refused (409: needs a restart), the running config keeps serving",
                      errs);
    else if (rc == -2)
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving: %s", msg);
    else
        gw_log_errors("reload refused, the running config keeps serving", errs);
}

/* SIGHUP on a file unchanged since the running config was derived from
 * it: the running config stands with its API changes, as it would at a
 * restart. It goes through the apply pipeline again all the same, so that
 * the files it names are read again (a certificate rewritten in place). */
static void reload_unchanged(void)
{
    struct adm_errors errs;
    char msg[512], what[96];
    struct adm_fleet_sync *fs = pipeline->fleet;
    /* a fleet node's: its node document, composed again with the fleet */
    json_t *doc = json_deep_copy(fs ? adm_fleet_sync_node(fs) : state.doc);
    size_t n = api_changes();
    struct adm_snapshot *s;
    int rc;

    if (!doc) {
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving: out of memory");
        return;
    }
    adm_errors_init(&errs);
    rc = adm_pipeline_apply_node(pipeline, doc, &errs, msg, sizeof(msg));
    json_decref(doc);
    changes_text(n, what, sizeof(what));
    s = atomic_load(&proc->swap.current);
    if (rc < 0)
        reload_refused(rc, &errs, msg);
    else if (rc == 1)
        gw_log(GW_LOG_NOTICE,
               "config reloaded: %s is unchanged since the running config was derived from it: "
               "the running config stands, with %s; generation %llu stays",
               proc->config_path, what, (unsigned long long)s->gen);
    else
        gw_log(GW_LOG_NOTICE,
               "config reloaded: %s is unchanged since the running config was derived from it: "
               "the running config stands, with %s, and the files it names changed: generation "
               "%llu, %zu routes, built in %.2f ms",
               proc->config_path, what, (unsigned long long)s->gen, rt_table_count(s->rt),
               s->build_ms);
    adm_errors_clear(&errs);
}

/* SIGHUP on a file that changed since (its bytes hash to <h>): the file
 * wins, as at a start. The API changes it replaces are counted, and with
 * a state directory set aside first (replaced-<time>/, as a start does);
 * one warning says how many and where they went. A file whose config is
 * the running one changes nothing but the source record. */
static void reload_file(json_t *doc, uint64_t h)
{
    struct adm_errors errs;
    char msg[512], what[96];
    size_t n = api_changes();
    int replacing = state.dir && n > 0, rc;
    struct adm_snapshot *s;

    if (replacing && adm_state_replace(&state, h, proc->config_path) < 0) {
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving: out of memory");
        return;
    }
    adm_errors_init(&errs);
    reloading = 1;
    rc = adm_pipeline_apply_node(pipeline, doc, &errs, msg, sizeof(msg));
    reloading = 0;
    changes_text(n, what, sizeof(what));
    if (replacing && rc != 0) {
        adm_state_replace_cancel(&state);
        if (state.set_aside_to) {
            /* set aside, then the save failed: the running config, which
             * stays, is written back (a write that fails says so) */
            char why[512];
            gw_log(GW_LOG_WARN,
                   "state: the persisted config went to %s before the reload failed; "
                   "writing the running config back",
                   state.set_aside_to);
            free(state.set_aside_to);
            state.set_aside_to = NULL;
            adm_state_save(&state, why, sizeof(why));
        }
    }
    if (rc < 0) {
        reload_refused(rc, &errs, msg);
        adm_errors_clear(&errs);
        return;
    }
    adm_errors_clear(&errs);
    derived_hash = h;
    if (adm_state_sig_make(&derived_sig, doc) < 0)
        gw_log(GW_LOG_ERROR, "reload: out of memory: the next SIGHUP cannot count API changes");
    s = atomic_load(&proc->swap.current);
    if (rc == 1) {
        record_source(h);
        gw_log(GW_LOG_NOTICE, "config reloaded: unchanged, generation %llu stays",
               (unsigned long long)s->gen);
        return;
    }
    if (replacing) {
        gw_log(GW_LOG_WARN,
               "SIGHUP: %s changed since the running config was derived from it: it replaces "
               "%s, kept in %s",
               proc->config_path, what, state.set_aside_to ? state.set_aside_to : "(nothing)");
        free(state.set_aside_to);
        state.set_aside_to = NULL;
    } else {
        if (n)
            gw_log(GW_LOG_WARN,
                   "SIGHUP: %s changed since the running config was derived from it: it "
                   "replaces %s, lost (no admin.state_dir keeps them)",
                   proc->config_path, what);
        record_source(h);
    }
    gw_log(GW_LOG_NOTICE, "config reloaded: generation %llu, %zu routes, built in %.2f ms",
           (unsigned long long)s->gen, rt_table_count(s->rt), s->build_ms);
}

void gw_persist_reload(struct adm_pipeline *p)
{
    struct adm_errors errs;
    json_t *doc;
    char *buf;
    size_t len;
    uint64_t h;
    FILE *f;

    pipeline = p;
    if (!proc->config_path) {
        gw_log(GW_LOG_WARN, "SIGHUP: running on the embedded default config, nothing to reload");
        return;
    }
    /* opened here, not by jansson, whose error for a missing file is
     * "line -1, column -1: unable to open ..." */
    if (!(f = fopen(proc->config_path, "rb"))) {
        gw_log(GW_LOG_ERROR, "reload refused, the running config keeps serving: cannot open %s: %s",
               proc->config_path, strerror(errno));
        return;
    }
    /* read under the cap a start applies (adm_config_load_file), with its
     * message */
    adm_errors_init(&errs);
    buf = adm_config_read_file(f, proc->config_path, &len, &errs);
    fclose(f);
    if (!buf) {
        gw_log_errors("reload refused, the running config keeps serving", &errs);
        adm_errors_clear(&errs);
        return;
    }
    adm_errors_clear(&errs);
    h = bytes_hash(buf, len);
    if (h == derived_hash) {
        free(buf);
        reload_unchanged();
        return;
    }
    doc = adm_config_doc(buf, len, proc->config_path, &errs); /* its errors name the file */
    free(buf);
    if (!doc) {
        gw_log_errors("reload refused, the running config keeps serving", &errs);
        adm_errors_clear(&errs);
        return;
    }
    reload_file(doc, h);
    json_decref(doc);
}

/* The state's hook (adm_state): every write that fails refuses its change
 * (500 to the API, a refused reload), and is logged as an error; so is the
 * first one that works again, as a notice. */
static void persist_report(void *arg, const char *failure)
{
    (void)arg;
    if (failure)
        gw_log(GW_LOG_ERROR,
               "state: persistence is failing: %s; changes that cannot be written are refused "
               "until %s takes writes again",
               failure, state.dir);
    else
        gw_log(GW_LOG_NOTICE, "state: persistence works again: %s takes writes", state.dir);
    if (!failure && state.set_aside_to && !reloading) {
        /* a set-aside the start could not do was done by this write */
        gw_log(GW_LOG_WARN, "state: the persisted config replaced at start is kept in %s",
               state.set_aside_to);
        free(state.set_aside_to);
        state.set_aside_to = NULL;
    }
}

/* The embedded default's state directory: $XDG_STATE_HOME/switchyard, or
 * ~/.local/state/switchyard (the XDG base directory spec; Caddy autosaves
 * its config to its data directory so). NULL with <why> when neither
 * variable names an absolute directory (the spec ignores a relative one),
 * or out of memory. */
static char *default_state_dir(char *why, size_t cap)
{
    const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char *d = NULL;

    if (x && x[0] == '/') {
        if (asprintf(&d, "%s/switchyard", x) < 0)
            d = NULL;
    } else if (home && home[0] == '/') {
        if (asprintf(&d, "%s/.local/state/switchyard", home) < 0)
            d = NULL;
    } else {
        snprintf(why, cap, "neither XDG_STATE_HOME nor HOME names an absolute directory");
        return NULL;
    }
    if (!d)
        snprintf(why, cap, "out of memory");
    return d;
}

/* Makes the missing directories above <dir>, mode 0700 as the XDG spec
 * asks of the directories it names (~/.local/state, say). 0, or -1 with
 * errno; <dir> itself is adm_state_begin()'s to make. */
static int make_parents(const char *dir)
{
    char *p = strdup(dir), *sl;
    int e = 0;

    if (!p)
        return -1;
    for (sl = strchr(p + 1, '/'); sl && !e; sl = strchr(sl + 1, '/')) {
        *sl = '\0';
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
            e = errno;
        *sl = '/';
    }
    free(p);
    errno = e;
    return e ? -1 : 0;
}

/* The embedded default's state directory cannot be used (<why>): the
 * start goes on without persistence, saying so, rather than refusing to
 * serve a default config. */
static void run_unpersisted(const char *why)
{
    gw_log(GW_LOG_ERROR,
           "state: %s: running without a state directory, so changes made through the admin API "
           "will not survive a restart (set XDG_STATE_HOME or HOME, or run with -c FILE and "
           "admin.state_dir)",
           why);
    adm_state_detach(&state);
}

/* Which config a start runs: the file's (<cfg>) or the persisted one. The
 * persisted config wins, so that the operator's API changes survive a
 * restart, unless the file changed since the persisted config was last
 * derived from it (the state's source record), or <reset>: then the file
 * wins and the persisted config is kept aside. Nothing is written here:
 * gw_persist_start() does that once the start succeeded. Returns the
 * config to run, taking <cfg>. */
static struct adm_config *choose_config(struct adm_config *cfg, int reset,
                                        struct gw_start_plan *plan)
{
    char msg[1024];
    int err;
    uint64_t recorded;
    json_t *doc;
    struct adm_config *p;
    struct adm_errors errs;
    const char *dir = cfg->admin.state_dir ? cfg->admin.state_dir : default_dir;

    if (!dir)
        return cfg;
    state.persist_hook = persist_report;
    doc = adm_state_open(&state, dir, msg, sizeof(msg), &err);
    if (err == -1 && !cfg->admin.state_dir) {
        run_unpersisted(msg); /* the embedded default's: nothing of it was read */
        return cfg;
    }
    if (err) {
        gw_log(GW_LOG_ERROR, "state: %s", msg);
        adm_config_free(cfg);
        return NULL;
    }
    if (msg[0])
        gw_log(GW_LOG_ERROR, "state: %s", msg);
    if (!doc)
        return cfg;
    plan->set_aside = 1;
    if (reset) {
        plan->why = "--reset-state";
        json_decref(doc);
        return cfg;
    }
    if (adm_state_source(&state, &recorded) && recorded != plan->file_hash) {
        plan->why = "the file changed since the persisted config was derived from it";
        json_decref(doc);
        return cfg;
    }
    adm_errors_init(&errs);
    p = adm_config_from_json(doc, &errs);
    json_decref(doc);
    if (!p) {
        gw_log_errors("state: the persisted config is invalid; refusing it and starting from -c",
                      &errs);
        adm_errors_clear(&errs);
        plan->why = "the persisted config is invalid";
        return cfg;
    }
    gw_log(GW_LOG_NOTICE, "state: the persisted config in %s wins over %s", dir, plan->from);
    plan->set_aside = 0;
    plan->from_state = 1;
    adm_config_free(cfg);
    return p;
}

int gw_persist_begin(const struct gw_start_plan *plan)
{
    char msg[1024];
    int rc;

    if (!state.dir)
        return 0;
    if (default_dir && make_parents(state.dir) < 0) {
        snprintf(msg, sizeof(msg), "cannot make the directories above %s: %s", state.dir,
                 strerror(errno));
        run_unpersisted(msg);
        return 0;
    }
    if (plan->set_aside && adm_state_replace(&state, plan->file_hash, proc->config_path) < 0) {
        gw_log(GW_LOG_ERROR, "state: out of memory");
        return -1;
    }
    rc = adm_state_begin(&state, msg, sizeof(msg));
    /* a directory in use by another instance is no unusable default: the
     * start exits, as when adm_state_open found it held */
    if (rc == -1 && default_dir) {
        run_unpersisted(msg);
        return 0;
    }
    if (rc < 0) {
        gw_log(GW_LOG_ERROR, "state: %s", msg);
        return -1;
    }
    if (rc > 0) /* the state's hook logged why */
        gw_log(GW_LOG_ERROR,
               "state: %s wins over the persisted config in %s (%s), which cannot be set "
               "aside: it is kept as it was and nothing is written over it; serving %s "
               "unpersisted, and refusing every change until it can be set aside",
               plan->from, state.dir, plan->why, plan->from);
    return 0;
}

/* Logs where a replaced persisted config went, once it was set aside. */
static void log_set_aside(const struct gw_start_plan *plan)
{
    gw_log(GW_LOG_WARN,
           "state: %s wins over the persisted config in %s (%s); that one is kept in %s",
           plan->from, state.dir, plan->why,
           state.set_aside_to ? state.set_aside_to : "(nothing to keep)");
    free(state.set_aside_to); /* told: the hook need not tell it again */
    state.set_aside_to = NULL;
}

void gw_persist_start(const struct gw_start_plan *plan)
{
    char msg[1024];
    uint64_t h;

    if (!state.dir && proc->config_path)
        gw_log(GW_LOG_NOTICE, "admin.state_dir is not set: changes made through the admin API "
                              "will not survive a restart");
    if (!state.dir || state.aside_owed)
        return;
    if (plan->set_aside)
        log_set_aside(plan);
    /* the file's config is what gets persisted from now on; a record that
     * fails is written after the next save that works (adm_state); a
     * replaced config owes it already (adm_state_replace) */
    if (!plan->set_aside && (!plan->from_state || !adm_state_source(&state, &h)))
        adm_state_set_source(&state, plan->file_hash, proc->config_path, msg, sizeof(msg));
    if (adm_state_save(&state, msg, sizeof(msg)) < 0) /* the hook logged why */
        gw_log(GW_LOG_ERROR, "state: persistence is failing at start: serving %s anyway, %s",
               plan->from_state ? "the persisted config" : plan->from,
               plan->from_state ? "whose config.json and journal stay as they were"
                                : "unpersisted until a change can be written");
}

struct adm_config *gw_persist_load(struct gw_process *p, const char *path, int reset,
                                   struct gw_start_plan *plan)
{
    struct adm_errors errs;
    struct adm_config *cfg;
    json_t *doc, *file_doc;
    char why[128], *text = NULL;
    size_t len = 0;

    proc = p;
    plan->from = path ? path : "the embedded default";
    adm_errors_init(&errs);
    cfg = path ? adm_config_load_file_text(path, &text, &len, &errs) : adm_config_default();
    if (!cfg) {
        gw_log_errors(path ? path : "embedded config", &errs);
        adm_errors_clear(&errs);
        return NULL;
    }
    /* the bytes that were parsed: a second read could be another file's */
    plan->file_hash = path ? bytes_hash(text, len) : default_hash();
    free(text);
    /* what a SIGHUP compares the file and the running config with */
    derived_hash = plan->file_hash;
    if (adm_state_sig_make(&derived_sig, cfg->json) < 0) {
        gw_log(GW_LOG_ERROR, "config: out of memory");
        adm_config_free(cfg);
        return NULL;
    }
    if (!path && !cfg->admin.state_dir && !(default_dir = default_state_dir(why, sizeof(why))))
        run_unpersisted(why);
    /* a fleet node's own document, should the persisted config win */
    file_doc = cfg->fleet ? json_incref(cfg->json) : NULL;
    if (!(cfg = choose_config(cfg, reset, plan))) {
        json_decref(file_doc);
        return NULL;
    }
    if (cfg->fleet) {
        cfg = gw_fleet_load(cfg, plan->from_state, state.dir, file_doc);
        if (!cfg) {
            json_decref(file_doc);
            return NULL;
        }
    }
    json_decref(file_doc);
    if (!(doc = json_deep_copy(cfg->json)) || adm_state_set_doc(&state, doc) < 0) {
        gw_log(GW_LOG_ERROR, "config: out of memory");
        json_decref(doc);
        adm_config_free(cfg);
        return NULL;
    }
    json_decref(doc);
    return cfg;
}

char *gw_persist_dir_for(const char *path, char *why, size_t cap)
{
    json_error_t je;
    json_t *doc;
    const char *d;
    char *dir = NULL;

    if (!path)
        return default_state_dir(why, cap);
    /* the directory alone, not the whole config: a config with errors
     * still finds the running process, which then hears why it failed */
    if (!(doc = json_load_file(path, 0, &je))) {
        snprintf(why, cap, "%s: line %d, column %d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    d = json_string_value(json_object_get(json_object_get(doc, "admin"), "state_dir"));
    if (!d)
        snprintf(why, cap,
                 "%s has no admin.state_dir: an upgrade finds the running process through "
                 "its state directory",
                 path);
    else if (!(dir = strdup(d)))
        snprintf(why, cap, "out of memory");
    json_decref(doc);
    return dir;
}

void gw_persist_adopt_lock(int fd)
{
    state.lock_fd = fd;
    state.locked = 1;
}

struct adm_state *gw_persist_state(void)
{
    return &state;
}

void gw_persist_free(void)
{
    adm_state_free(&state);
    adm_state_sig_free(&derived_sig);
    free(default_dir);
    default_dir = NULL;
}
