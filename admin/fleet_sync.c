/*
 * fleet_sync.c - a fleet node's etcd source (admin/fleet_sync.h): the etcd
 * client's revisions composed with the node's document and handed to the
 * admin thread's apply pipeline (admin/pipeline.c), one snapshot swap per
 * revision; the last good fleet persisted beside the state; and the API's
 * route and upstream writes turned into etcd transactions, answered once
 * applied here.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/fleet_sync.h"
#include "admin/file_replace.h"
#include "admin/api_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/buffer.h>

#define FLEET_FILE "fleet.json"

/* An API write on its way: the etcd transaction, then this node's apply
 * of the revision it made. */
struct fwrite {
    struct adm_fleet_sync *fs;
    struct adm_req *req;
    uint64_t handle; /* the transaction in flight; 0: answered */
    int64_t rev;     /* the revision it made; 0: not yet */
    int64_t if_rev;
    int create, del;
    char what[16];
    char *name, *key;
    int code;
    struct adm_changes ch;
    uint64_t before;     /* the generation it replaces, for the audit line */
    struct event *timer; /* write_wait_ms for the apply */
    TAILQ_ENTRY(fwrite) link;
};

struct adm_fleet_sync {
    struct adm_api *api;       /* whose route and upstream writes it answers */
    struct adm_pipeline *pipe; /* what each revision is applied through */
    struct adm_etcd *etcd;
    struct adm_fleet *seen; /* etcd's objects, as last delivered */
    struct adm_fleet *good; /* those of the live config */
    json_t *node;           /* the node's document (owned) */
    char *prefix;
    char *path; /* <state_dir>/fleet.json; NULL: not persisted */
    unsigned write_wait_ms;
    int64_t seen_rev, applied_rev, etcd_rev;
    struct adm_errors errors; /* the fleet's, each path an etcd key */
    time_t last_change;       /* wall-clock time of the last revision applied */
    double apply_ms;          /* how long it took */
    double lag_since;         /* adm_now_ms() of the first revision seen and not applied; 0: none */
    int up;
    struct adm_fleet_sync_hooks hooks;
    TAILQ_HEAD(, fwrite) writes;
};

static void say(struct adm_fleet_sync *fs, int level, const char *fmt, ...) ADM_PRINTF(3, 4);

static void say(struct adm_fleet_sync *fs, int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (!fs->hooks.log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fs->hooks.log(fs->hooks.arg, level, line);
}

/* The first errors of <e>, "key: message; ..." into <buf>. */
static const char *errors_line(const struct adm_errors *e, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < e->n && i < 3 && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s%s%s", i ? "; " : "", e->v[i].path,
                              e->v[i].path[0] ? ": " : "", e->v[i].msg);
    if (e->n > 3 && o < cap)
        snprintf(buf + o, cap - o, "; and %zu more", e->n - 3);
    return buf;
}

/* ---- persistence ---- */

/* fleet.json: the good fleet and the node document, written whole and
 * renamed into place. */
static void persist(struct adm_fleet_sync *fs)
{
    json_t *j;
    char *js = NULL;
    int ok = 0;

    if (!fs->path)
        return;
    errno = ENOMEM;
    j = json_pack("{s:s,s:o,s:O}", "prefix", fs->prefix, "fleet", adm_fleet_save(fs->good), "node",
                  fs->node);
    if (j && (js = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS))) {
        size_t n = strlen(js);
        js[n] = '\n'; /* over the NUL: the file ends with a newline */
        ok = adm_file_replace(fs->path, js, n + 1) == 0;
        js[n] = '\0';
    }
    if (!ok)
        say(fs, 2, "fleet: cannot write %s: %s; a restart with etcd down serves an older config",
            fs->path, strerror(errno));
    free(js);
    json_decref(j);
}

int adm_fleet_sync_load(const char *state_dir, const struct adm_fleet_cfg *fc,
                        struct adm_fleet **fleet, json_t **node, struct adm_errors *errs)
{
    char path[4096];
    json_error_t je;
    json_t *j, *n;
    const char *p;

    *fleet = NULL;
    *node = NULL;
    if (!state_dir)
        return 0;
    snprintf(path, sizeof(path), "%s/%s", state_dir, FLEET_FILE);
    if (access(path, F_OK) != 0)
        return 0;
    if (!(j = json_load_file(path, JSON_REJECT_DUPLICATES, &je))) {
        adm_errors_add(errs, "", "%s: line %d: %s", path, je.line, je.text);
        return -1;
    }
    p = json_string_value(json_object_get(j, "prefix"));
    if (!p || strcmp(p, fc->prefix) != 0) { /* another fleet's: etcd tells ours */
        json_decref(j);
        return 0;
    }
    if (!(*fleet = adm_fleet_new(fc->prefix)) ||
        adm_fleet_load(*fleet, json_object_get(j, "fleet"), errs) < 0) {
        adm_fleet_free(*fleet);
        *fleet = NULL;
        json_decref(j);
        return -1;
    }
    if (json_is_object(n = json_object_get(j, "node")))
        *node = json_incref(n);
    json_decref(j);
    return 0;
}

/* ---- API writes waiting for their revision ---- */

static void fwrite_free(struct fwrite *w)
{
    struct adm_fleet_sync *fs = w->fs;

    TAILQ_REMOVE(&fs->writes, w, link);
    if (w->handle)
        adm_etcd_cancel(fs->etcd, w->handle);
    if (w->timer)
        event_free(w->timer);
    json_decref(w->ch.settings);
    free(w->name);
    free(w->key);
    free(w);
}

/* The client went away: nothing to answer. */
static void fwrite_gone(void *arg)
{
    fwrite_free(arg);
}

/* Answers <w> from what this node made of its revision, and frees it. */
static void fwrite_settle(struct fwrite *w)
{
    struct adm_fleet_sync *fs = w->fs;
    struct adm_api *api = fs->api;
    char m[512];

    if (fs->applied_rev >= w->rev) {
        adm_api_audit(api, w->req, w->before, strcmp(w->what, "route") == 0 ? w->name : NULL);
        adm_api_reply_written(api, w->req, w->code, 1, w->what, w->name, &w->ch);
    } else {
        snprintf(m, sizeof(m),
                 "written to etcd at revision %lld, but the fleet's config at that revision is "
                 "not valid on this node: it keeps serving revision %lld",
                 (long long)w->rev, (long long)fs->applied_rev);
        adm_api_reply_errs(api, w->req, 409, m, &fs->errors);
    }
    fwrite_free(w);
}

static void fwrite_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct fwrite *w = arg;
    char m[256];

    (void)fd;
    (void)what;
    snprintf(m, sizeof(m),
             "written to etcd at revision %lld; this node has not applied it within %u ms "
             "(GET /status shows the fleet's state)",
             (long long)w->rev, w->fs->write_wait_ms);
    adm_api_reply_error(w->fs->api, w->req, 504, m, NULL);
    fwrite_free(w);
}

/* Every write whose revision this node has now seen is answered. */
static void settle_writes(struct adm_fleet_sync *fs)
{
    struct fwrite *w, *next;

    for (w = TAILQ_FIRST(&fs->writes); w; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->rev && w->rev <= fs->seen_rev)
            fwrite_settle(w);
    }
}

static void write_done(void *arg, int ok, int64_t rev, const char *why)
{
    struct fwrite *w = arg;
    struct adm_fleet_sync *fs = w->fs;
    struct timeval tv = {fs->write_wait_ms / 1000, (fs->write_wait_ms % 1000) * 1000};

    w->handle = 0;
    if (ok == 0) {
        if (w->create)
            adm_api_reply_error(
                fs->api, w->req, 409,
                strcmp(w->what, "route") == 0 ? "a route with this id exists"
                                              : "an upstream with this name exists",
                adm_api_one_error("", "another node created %s \"%s\" first", w->what, w->name));
        else if (w->if_rev > 1)
            adm_api_reply_error(fs->api, w->req, 412,
                                "If-Match: the object changed in etcd since that revision",
                                adm_api_one_error("",
                                                  "%s \"%s\" was modified or deleted after "
                                                  "revision %lld",
                                                  w->what, w->name, (long long)w->if_rev - 1));
        else
            adm_api_reply_error(fs->api, w->req, 404,
                                strcmp(w->what, "route") == 0 ? "no such route"
                                                              : "no such upstream",
                                adm_api_one_error("", "another node deleted %s \"%s\" meanwhile",
                                                  w->what, w->name));
        fwrite_free(w);
        return;
    }
    if (ok < 0) {
        adm_api_reply_error(fs->api, w->req, 503, "etcd did not take the write",
                            adm_api_one_error("", "%s", why ? why : "etcd unreachable"));
        fwrite_free(w);
        return;
    }
    w->rev = rev;
    /* a delete of what etcd no longer had changed nothing: no event will
     * bring its revision (etcd's current one), and there is nothing more
     * to apply than what this node has seen */
    if (w->del && !adm_fleet_get(fs->seen, w->key, NULL, NULL))
        w->rev = rev = fs->seen_rev;
    if (rev <= fs->seen_rev) {
        fwrite_settle(w);
        return;
    }
    if (!(w->timer = evtimer_new(fs->api->base, fwrite_timeout, w)) ||
        evtimer_add(w->timer, &tv) < 0) {
        adm_api_reply_error(fs->api, w->req, 500, "out of memory", NULL);
        fwrite_free(w);
    }
}

void adm_fleet_sync_write(struct adm_fleet_sync *fs, struct adm_req *req, const char *what,
                          const char *name, const json_t *value, int create, int64_t if_rev,
                          int code, const struct adm_changes *ch)
{
    struct fwrite *w = calloc(1, sizeof(*w));
    char key[1024];
    char *js = NULL;
    /* a replace or a delete of what another node deleted meanwhile is a
     * 404 there, as on a standalone node; If-Match adds the revision */
    enum adm_etcd_cmp cmp = create   ? ADM_ETCD_ABSENT
                            : if_rev ? ADM_ETCD_EXISTS_MOD_BELOW
                                     : ADM_ETCD_EXISTS;

    snprintf(key, sizeof(key), "%s%ss/%s", fs->prefix, what, name);
    if (!w || !(w->name = strdup(name)) || !(w->key = strdup(key)) ||
        (value && !(js = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS)))) {
        if (w) {
            free(w->name);
            free(w->key);
        }
        free(w);
        adm_api_send_oom(req);
        return;
    }
    w->fs = fs;
    w->req = req;
    w->create = create;
    w->del = !value;
    w->if_rev = if_rev + 1; /* unchanged since <if_rev>: modified before if_rev + 1 */
    snprintf(w->what, sizeof(w->what), "%s", what);
    w->code = code;
    w->ch = *ch;
    w->ch.settings = NULL;
    w->before = current(fs->api)->gen;
    TAILQ_INSERT_TAIL(&fs->writes, w, link);
    w->handle =
        adm_etcd_write(fs->etcd, key, js, js ? strlen(js) : 0, cmp, w->if_rev, write_done, w);
    free(js);
    if (!w->handle) {
        fwrite_free(w);
        adm_api_send_oom(req);
        return;
    }
    adm_req_defer(req, fwrite_gone, w);
}

/* ---- revisions ---- */

/* Replaces the fleet's errors with <e> (emptied). */
static void set_errors(struct adm_fleet_sync *fs, struct adm_errors *e)
{
    adm_errors_clear(&fs->errors);
    fs->errors = *e;
    adm_errors_init(e);
}

/* etcd's objects at <rev> as the live config, if they make a valid one
 * with the node's document; else the errors of the keys at fault, and the
 * last good config keeps serving. */
static void try_apply(struct adm_fleet_sync *fs, int64_t rev)
{
    struct adm_errors cerrs, verrs;
    char msg[512], line[1024];
    double t0 = adm_now_ms();
    json_t *doc;
    int rc;

    adm_errors_init(&cerrs);
    adm_errors_init(&verrs);
    fs->seen_rev = rev;
    if (rev > fs->etcd_rev)
        fs->etcd_rev = rev;
    if (!(doc = adm_fleet_compose(fs->seen, fs->node, &cerrs))) {
        if (!cerrs.n)
            adm_errors_add(&cerrs, "", "out of memory");
        rc = -1;
    } else {
        rc = adm_pipeline_apply(fs->pipe, doc, NULL, 0, &verrs, msg, sizeof(msg));
        if (rc == -2)
            adm_errors_add(&cerrs, "", "cannot persist: %s", msg);
        else if (rc < 0)
            adm_fleet_blame(fs->seen, fs->node, &verrs, &cerrs);
        json_decref(doc);
    }
    if (rc < 0) {
        if (!fs->lag_since)
            fs->lag_since = t0;
        if (fs->errors.n != cerrs.n || !fs->errors.n ||
            strcmp(fs->errors.v[0].path, cerrs.v[0].path) != 0 ||
            strcmp(fs->errors.v[0].msg, cerrs.v[0].msg) != 0)
            say(fs, 2, "fleet: revision %lld is not applied, revision %lld keeps serving: %s",
                (long long)rev, (long long)fs->applied_rev,
                errors_line(&cerrs, line, sizeof(line)));
        set_errors(fs, &cerrs);
    } else {
        struct adm_fleet *g = adm_fleet_dup(fs->seen);
        if (g) {
            adm_fleet_free(fs->good);
            fs->good = g;
        }
        if (fs->errors.n)
            say(fs, 0, "fleet: revision %lld applied: the fleet's config is valid again",
                (long long)rev);
        adm_errors_clear(&fs->errors);
        fs->applied_rev = rev;
        fs->lag_since = 0;
        fs->apply_ms = adm_now_ms() - t0;
        if (rc == 0)
            fs->last_change = time(NULL);
        persist(fs);
    }
    adm_errors_clear(&cerrs);
    adm_errors_clear(&verrs);
    settle_writes(fs);
}

static void on_snapshot(void *arg, int64_t rev, const struct adm_etcd_kv *kvs, size_t n,
                        int compacted)
{
    struct adm_fleet_sync *fs = arg;
    long d = adm_fleet_reset(fs->seen, rev, kvs, n);

    if (d < 0) {
        say(fs, 2, "fleet: out of memory reading revision %lld", (long long)rev);
        return;
    }
    if (compacted)
        say(fs, 1,
            "fleet: the watch was compacted away: read again at revision %lld, %ld keys "
            "differ",
            (long long)rev, d);
    try_apply(fs, rev);
}

static void on_events(void *arg, int64_t rev, const struct adm_etcd_kv *evs, size_t n)
{
    struct adm_fleet_sync *fs = arg;

    if (adm_fleet_apply(fs->seen, rev, evs, n) < 0) {
        say(fs, 2, "fleet: out of memory applying revision %lld", (long long)rev);
        return;
    }
    try_apply(fs, rev);
}

static void on_progress(void *arg, int64_t rev)
{
    struct adm_fleet_sync *fs = arg;

    if (rev > fs->etcd_rev)
        fs->etcd_rev = rev;
    if (rev > fs->seen_rev) {
        fs->seen_rev = rev; /* nothing of ours changed up to it */
        if (!fs->errors.n)
            fs->applied_rev = rev;
        settle_writes(fs);
    }
}

static void on_state(void *arg, int up, const char *why)
{
    struct adm_fleet_sync *fs = arg;

    fs->up = up;
    if (up)
        say(fs, 0, "fleet: watching etcd%s%s", why ? ": " : "", why ? why : "");
    else
        say(fs, 1, "fleet: etcd unreachable, serving revision %lld: %s", (long long)fs->applied_rev,
            why ? why : "");
}

/* ---- the node's own document ---- */

/* Whether <node>'s <key> is there and differs from the live config's. */
static int differs(struct adm_fleet_sync *fs, const json_t *node, const char *key)
{
    const json_t *v = json_object_get(node, key);

    return v && !json_equal((json_t *)v, json_object_get(fs->api->st->doc, key));
}

json_t *adm_fleet_sync_compose_node(struct adm_fleet_sync *fs, const json_t *node, int *dropped,
                                    struct adm_errors *errs)
{
    json_t *n, *doc;

    if (!dropped) /* a file's (SIGHUP): its routes and upstreams are refused */
        return adm_fleet_compose(fs->good, node, errs);
    if (!(n = json_copy((json_t *)node))) {
        adm_errors_add(errs, "", "out of memory");
        return NULL;
    }
    *dropped = differs(fs, n, "routes") || differs(fs, n, "upstreams");
    json_object_del(n, "routes");
    json_object_del(n, "upstreams");
    doc = adm_fleet_compose(fs->good, n, errs);
    json_decref(n);
    return doc;
}

void adm_fleet_sync_node_applied(struct adm_fleet_sync *fs, const json_t *node)
{
    json_t *n = json_deep_copy(node);

    if (!n)
        return;
    json_object_del(n, "routes");
    json_object_del(n, "upstreams");
    json_decref(fs->node);
    fs->node = n;
    persist(fs);
    /* a revision refused for the node's own keys may be valid with these */
    if (fs->errors.n && fs->seen_rev > fs->applied_rev)
        try_apply(fs, fs->seen_rev);
}

json_t *adm_fleet_sync_config(struct adm_fleet_sync *fs)
{
    json_t *doc = json_copy(fs->node), *live = fs->api->st->doc;

    if (doc && (json_object_set(doc, "upstreams", json_object_get(live, "upstreams")) < 0 ||
                json_object_set(doc, "routes", json_object_get(live, "routes")) < 0)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

const json_t *adm_fleet_sync_node(const struct adm_fleet_sync *fs)
{
    return fs->node;
}

/* ---- what it shows ---- */

int64_t adm_fleet_sync_revision(const struct adm_fleet_sync *fs)
{
    return fs->applied_rev;
}

json_t *adm_fleet_sync_status(const struct adm_fleet_sync *fs)
{
    struct adm_etcd_stats st;
    json_t *errs = json_array();
    char when[32] = "";
    struct tm tm;

    adm_etcd_stats(fs->etcd, &st);
    for (size_t i = 0; errs && i < fs->errors.n; i++)
        json_array_append_new(errs, json_pack("{s:s,s:s}", "key", fs->errors.v[i].path, "message",
                                              fs->errors.v[i].msg));
    if (fs->last_change && gmtime_r(&fs->last_change, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:b,s:s?,s:s,s:I,s:I,s:o,s:s?,s:I,s:I}", "connected", fs->up, "endpoint",
                     st.endpoint, "prefix", fs->prefix, "revision", (json_int_t)fs->applied_rev,
                     "etcd_revision", (json_int_t)fs->etcd_rev, "errors",
                     errs ? errs : json_array(), "last_change", when[0] ? when : NULL, "reconnects",
                     (json_int_t)st.reconnects, "rereads", (json_int_t)st.rereads);
}

void adm_fleet_sync_metrics(const struct adm_fleet_sync *fs, struct evbuffer *b)
{
    struct adm_etcd_stats st;
    double lag = fs->lag_since ? (adm_now_ms() - fs->lag_since) / 1000.0 : 0;

    adm_etcd_stats(fs->etcd, &st);
    evbuffer_add_printf(
        b,
        "# HELP switchyard_fleet_connected 1 while the etcd watch runs\n"
        "# TYPE switchyard_fleet_connected gauge\nswitchyard_fleet_connected %d\n"
        "# HELP switchyard_fleet_revision The etcd revision the live config was composed at\n"
        "# TYPE switchyard_fleet_revision gauge\nswitchyard_fleet_revision %lld\n"
        "# HELP switchyard_fleet_lag_revisions etcd's revision (as last heard) minus the one "
        "applied\n"
        "# TYPE switchyard_fleet_lag_revisions gauge\nswitchyard_fleet_lag_revisions %lld\n"
        "# HELP switchyard_fleet_sync_lag_seconds How long etcd's objects have differed from the "
        "live config (0: in sync)\n"
        "# TYPE switchyard_fleet_sync_lag_seconds gauge\nswitchyard_fleet_sync_lag_seconds %.3f\n"
        "# HELP switchyard_fleet_apply_seconds How long the last revision took to apply\n"
        "# TYPE switchyard_fleet_apply_seconds gauge\nswitchyard_fleet_apply_seconds %.6f\n"
        "# HELP switchyard_fleet_errors Fleet keys whose objects are refused\n"
        "# TYPE switchyard_fleet_errors gauge\nswitchyard_fleet_errors %zu\n"
        "# HELP switchyard_fleet_reconnects_total etcd connections lost or refused\n"
        "# TYPE switchyard_fleet_reconnects_total counter\nswitchyard_fleet_reconnects_total %llu\n"
        "# HELP switchyard_fleet_rereads_total Full reads of the prefix after the first\n"
        "# TYPE switchyard_fleet_rereads_total counter\nswitchyard_fleet_rereads_total %llu\n"
        "# HELP switchyard_fleet_events_total etcd events received\n"
        "# TYPE switchyard_fleet_events_total counter\nswitchyard_fleet_events_total %llu\n",
        fs->up, (long long)fs->applied_rev,
        (long long)(fs->etcd_rev > fs->applied_rev ? fs->etcd_rev - fs->applied_rev : 0), lag,
        fs->apply_ms / 1000.0, fs->errors.n, (unsigned long long)st.reconnects,
        (unsigned long long)st.rereads, (unsigned long long)st.events);
}

/* ---- life ---- */

struct adm_fleet_sync *adm_fleet_sync_new(struct adm_api *api, struct adm_pipeline *pipe,
                                          const struct adm_fleet_cfg *fc, const json_t *node,
                                          struct adm_fleet *good, const char *state_dir,
                                          const struct adm_fleet_sync_hooks *hooks, char *why,
                                          size_t cap)
{
    struct adm_fleet_sync *fs = calloc(1, sizeof(*fs));
    struct adm_etcd_opts o = {0};
    struct adm_etcd_hooks eh = {on_snapshot, on_events, on_progress, on_state, fs};
    char path[4096];

    if (!fs || !(fs->prefix = strdup(fc->prefix)) || !(fs->node = json_deep_copy(node)) ||
        !(fs->seen = adm_fleet_new(fc->prefix)) || (!good && !(good = adm_fleet_new(fc->prefix)))) {
        snprintf(why, cap, "fleet: out of memory");
        goto fail;
    }
    fs->good = good;
    good = NULL;
    json_object_del(fs->node, "routes");
    json_object_del(fs->node, "upstreams");
    fs->api = api;
    fs->pipe = pipe;
    fs->hooks = *hooks;
    fs->write_wait_ms = fc->write_wait_ms ? fc->write_wait_ms : 5000;
    fs->applied_rev = fs->seen_rev = fs->etcd_rev = adm_fleet_revision(fs->good);
    adm_errors_init(&fs->errors);
    TAILQ_INIT(&fs->writes);
    if (state_dir) {
        snprintf(path, sizeof(path), "%s/%s", state_dir, FLEET_FILE);
        if (!(fs->path = strdup(path))) {
            snprintf(why, cap, "fleet: out of memory");
            goto fail;
        }
    }
    o.endpoints = (const char *const *)fc->endpoints;
    o.nendpoints = fc->nendpoints;
    o.prefix = fc->prefix;
    o.ca_file = fc->ca_file;
    o.cert_file = fc->cert_file;
    o.key_file = fc->key_file;
    o.username = fc->username;
    o.password = fc->password;
    o.dial_timeout_ms = fc->dial_timeout_ms;
    o.request_timeout_ms = fc->request_timeout_ms;
    o.watch_idle_ms = fc->watch_idle_ms;
    if (!(fs->etcd = adm_etcd_new(api->base, &o, &eh, why, cap)))
        goto fail;
    pipe->fleet = fs;
    return fs;
fail:
    adm_fleet_free(good);
    adm_fleet_sync_free(fs);
    return NULL;
}

void adm_fleet_sync_start(struct adm_fleet_sync *fs)
{
    adm_etcd_start(fs->etcd);
}

void adm_fleet_sync_free(struct adm_fleet_sync *fs)
{
    if (!fs)
        return;
    while (!TAILQ_EMPTY(&fs->writes)) {
        struct fwrite *w = TAILQ_FIRST(&fs->writes);
        adm_api_reply_error(fs->api, w->req, 503, "the gateway is stopping", NULL);
        fwrite_free(w);
    }
    if (fs->pipe)
        fs->pipe->fleet = NULL;
    adm_etcd_free(fs->etcd);
    adm_fleet_free(fs->seen);
    adm_fleet_free(fs->good);
    adm_errors_clear(&fs->errors);
    json_decref(fs->node);
    free(fs->prefix);
    free(fs->path);
    free(fs);
}
