/*
 * state.c - the live config document, its hash, and its persistence
 * (atomic full writes plus an fsynced journal of changes).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FNV_OFFSET 1469598103934665603ULL /* FNV-1a, 64 bits */

uint64_t adm_hash(const char *s, size_t len)
{
    uint64_t h = FNV_OFFSET;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint64_t hash_walk(uint64_t h, const json_t *v);

/* The members of object <v> but <skip> (NULL: none), by key order. Without
 * memory for the sort the keys are taken smallest first, each in a scan:
 * quadratic, but the same hash (one that depended on memory could be
 * another document's, and would make a journal's base look stale). */
static uint64_t hash_members(uint64_t h, const json_t *v, const char *skip)
{
    size_t n = json_object_size(v), i = 0;
    const char *small[16], **keys = n <= 16 ? small : malloc(n * sizeof(*keys));
    const char *k, *prev = NULL;
    json_t *x;

    if (keys) {
        json_object_foreach((json_t *)v, k, x) if (!skip || strcmp(k, skip)) keys[i++] = k;
        qsort(keys, i, sizeof(*keys), key_cmp);
        for (size_t j = 0; j < i; j++) {
            h = mix(h, keys[j], strlen(keys[j]) + 1);
            h = hash_walk(h, json_object_get(v, keys[j]));
        }
        if (keys != small)
            free(keys);
        return mix(h, "}", 1);
    }
    for (;;) {
        const char *next = NULL;
        json_object_foreach((json_t *)v, k, x)
        {
            if ((!skip || strcmp(k, skip)) && (!prev || strcmp(k, prev) > 0) &&
                (!next || strcmp(k, next) < 0))
                next = k;
        }
        if (!next)
            return mix(h, "}", 1);
        h = mix(h, next, strlen(next) + 1);
        h = hash_walk(h, json_object_get(v, next));
        prev = next;
    }
}

/* Walks the value in canonical order (object keys sorted) without building
 * its text: the same hash for the same JSON however it was written. */
static uint64_t hash_walk(uint64_t h, const json_t *v)
{
    char tag = (char)json_typeof(v);

    h = mix(h, &tag, 1);
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return hash_members(h, v, NULL);
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) h = hash_walk(h, x);
        return mix(h, "]", 1);
    }
    case JSON_STRING:
        return mix(h, json_string_value(v), json_string_length(v) + 1);
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        return mix(h, &i, sizeof(i));
    }
    case JSON_REAL: {
        double d = json_real_value(v);
        return mix(h, &d, sizeof(d));
    }
    default:
        return h;
    }
}

uint64_t adm_json_hash(const json_t *v)
{
    return hash_walk(FNV_OFFSET, v);
}

/* The hash of <doc> without its routes, as adm_json_hash() of a copy
 * without them would be; <doc> is not touched (taking the routes out and
 * back could lose them for want of memory). */
static uint64_t base_hash(const json_t *doc)
{
    char tag = (char)JSON_OBJECT;

    return hash_members(mix(FNV_OFFSET, &tag, 1), doc, "routes");
}

int adm_state_set_doc(struct adm_state *st, json_t *doc)
{
    return adm_state_set_doc_hashed(st, doc, 0, 0, 0);
}

int adm_state_set_doc_hashed(struct adm_state *st, json_t *doc, int known, uint64_t hb, uint64_t hr)
{
    json_t *routes = json_object_get(doc, "routes"), *r, *ids = json_object();
    size_t i;

    if (!ids)
        return -1;
    json_incref(doc);
    json_decref(st->doc);
    json_decref(st->ids);
    st->doc = doc;
    st->ids = ids;
    if (!routes) {
        routes = json_array();
        json_object_set_new(doc, "routes", routes);
    }
    st->hash_routes = hr;
    json_array_foreach(routes, i, r)
    {
        const char *id = json_string_value(json_object_get(r, "id"));
        if (id)
            json_object_set(ids, id, r);
        if (!known)
            st->hash_routes ^= adm_json_hash(r);
    }
    st->hash_base = known ? hb : base_hash(doc);
    free(st->canon);
    st->canon = NULL;
    return 0;
}

uint64_t adm_state_hash(const struct adm_state *st)
{
    return st->hash_base ^ st->hash_routes;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = write(fd, s, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Every write the state is asked for ends here: a failure is counted and
 * told to the hook, and so is the first write that works after failures.
 * Returns <rc>. */
static int noted(struct adm_state *st, int rc, const char *msg)
{
    if (rc < 0) {
        st->persist_failures++;
        st->persist_failing = 1;
    } else if (st->persist_failing) {
        st->persist_failing = 0;
    } else {
        return rc;
    }
    if (st->persist_hook)
        st->persist_hook(st->persist_arg, rc < 0 ? msg : NULL);
    return rc;
}

/* The journal's first line: {"op":"base","hash":"<hash of config.json>"}.
 * A crash after a new config.json is renamed into place but before the
 * journal is emptied leaves a journal whose changes config.json already
 * holds (or a whole new config replaced): its base no longer matches, and
 * it is not replayed on top. */
/* The document's hash as the state keeps it (adm_state_hash): the
 * document without routes, XOR every route's hash. */
static uint64_t doc_hash(json_t *doc)
{
    json_t *r;
    size_t i;
    uint64_t h = base_hash(doc);

    json_array_foreach(json_object_get(doc, "routes"), i, r) h ^= adm_json_hash(r);
    return h;
}

static void journal_base(uint64_t hash, char *buf, size_t cap)
{
    snprintf(buf, cap, "%016llx", (unsigned long long)hash);
}

static int journal_head(int fd, uint64_t hash)
{
    char h[32], line[96];

    journal_base(hash, h, sizeof(h));
    snprintf(line, sizeof(line), "{\"hash\":\"%s\",\"op\":\"base\"}\n", h);
    return write_all(fd, line, strlen(line));
}

static int save_bytes(struct adm_state *st, const char *js, size_t len, char *msg, size_t cap);
static int ready(struct adm_state *st, char *msg, size_t cap);

/* adm_state_save() without telling the hook or writing an owed source. */
static int save_doc(struct adm_state *st, char *msg, size_t cap)
{
    char *js = json_dumps(st->doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    int rc;

    if (!js) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    rc = save_bytes(st, js, strlen(js), msg, cap);
    free(js);
    return rc;
}

/* A save that worked also writes the source record a failed
 * adm_state_set_source() owes; if that fails again, it stays owed (the
 * hook hears of it), and the save still counts as done. */
static int saved(struct adm_state *st, int rc, const char *msg)
{
    char why[512];

    noted(st, rc, msg);
    if (rc == 0 && st->source_pending)
        adm_state_set_source(st, st->source_hash, st->source_path, why, sizeof(why));
    return rc;
}

int adm_state_save(struct adm_state *st, char *msg, size_t cap)
{
    if (!st->dir)
        return 0;
    return saved(st, ready(st, msg, cap) < 0 ? -1 : save_doc(st, msg, cap), msg);
}

int adm_state_save_bytes(struct adm_state *st, const char *js, size_t len, char *msg, size_t cap)
{
    if (!st->dir)
        return 0;
    return saved(st, ready(st, msg, cap) < 0 ? -1 : save_bytes(st, js, len, msg, cap), msg);
}

/* Keeps the previous good file: <dst> (config.json) becomes <prev> too,
 * through a temporary link in <dir> renamed over <prev>, so that <prev> is
 * never missing or older than the file being replaced. No <dst> yet:
 * nothing to keep. 0, or -1 with <msg>. */
static int keep_prev(const char *dir, const char *dst, const char *prev, char *msg, size_t cap)
{
    char *tmp = path_join(dir, "config.json.prev.tmp");
    int rc = -1;

    if (!tmp) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    if (unlink(tmp) < 0 && errno != ENOENT) {
        snprintf(msg, cap, "keep config.json.prev: unlink %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (link(dst, tmp) < 0) {
        if (errno == ENOENT)
            rc = 0;
        else
            snprintf(msg, cap, "keep config.json.prev: link %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, prev) < 0) {
        snprintf(msg, cap, "keep config.json.prev: rename %s: %s", prev, strerror(errno));
        unlink(tmp);
        goto out;
    }
    /* a rename between two links of one file (config.json.prev standing
     * in for a corrupt config.json: adm_state_begin) leaves both */
    unlink(tmp);
    rc = 0;
out:
    free(tmp);
    return rc;
}

/* Writes <js> (<len> bytes) as config.json: the temporary file, fsynced,
 * renamed into place, the directory fsynced, then the journal emptied. A
 * failure before the rename removes the temporary file: a full disk must
 * not keep the space a refused write took. */
static int save_bytes(struct adm_state *st, const char *js, size_t len, char *msg, size_t cap)
{
    char *tmp = NULL, *dst = NULL, *prev = NULL;
    int fd = -1, rc = -1, made = 0;

    tmp = path_join(st->dir, "config.json.tmp");
    dst = path_join(st->dir, "config.json");
    prev = path_join(st->dir, "config.json.prev");
    if (!tmp || !dst || !prev) {
        snprintf(msg, cap, "out of memory");
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    made = fd >= 0;
    if (fd < 0 || write_all(fd, js, len) < 0 || write_all(fd, "\n", 1) < 0 || fsync(fd) < 0) {
        snprintf(msg, cap, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (keep_prev(st->dir, dst, prev, msg, cap) < 0)
        goto out;
    if (rename(tmp, dst) < 0) {
        snprintf(msg, cap, "rename %s: %s", dst, strerror(errno));
        goto out;
    }
    made = 0;
    /* From here config.json may hold the new document while the journal
     * is still headed by the old one's hash: an append there would be
     * dropped as stale by the next replay. Until a save empties the
     * journal, every change is a full save (adm_state_journal). */
    st->journal_n = ADM_JOURNAL_MAX;
    if (fsync_dir(st->dir) < 0) {
        snprintf(msg, cap, "fsync %s: %s", st->dir, strerror(errno));
        goto out;
    }
    /* the journal's changes are in config.json now; the emptied journal
     * starts with the hash of the config.json it belongs to */
    if (st->journal_fd >= 0 &&
        (ftruncate(st->journal_fd, 0) < 0 || journal_head(st->journal_fd, adm_state_hash(st)) < 0 ||
         fsync(st->journal_fd) < 0)) {
        snprintf(msg, cap, "truncate journal: %s", strerror(errno));
        goto out;
    }
    st->journal_n = 0;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (made)
        unlink(tmp);
    free(tmp);
    free(dst);
    free(prev);
    return rc;
}

static json_t *route_index(json_t *routes, const char *id, size_t *at)
{
    size_t i;
    json_t *r;

    json_array_foreach(routes, i, r)
    {
        const char *rid = json_string_value(json_object_get(r, "id"));
        if (rid && strcmp(rid, id) == 0) {
            *at = i;
            return r;
        }
    }
    return NULL;
}

int adm_state_apply(json_t *doc, const json_t *op)
{
    const char *kind = json_string_value(json_object_get(op, "op"));
    json_t *routes = json_object_get(doc, "routes");
    size_t at;

    if (!kind)
        return -1;
    if (!routes) {
        routes = json_array();
        json_object_set_new(doc, "routes", routes);
    }
    if (strcmp(kind, "put_route") == 0) {
        json_t *r = json_object_get(op, "route");
        const char *id = json_string_value(json_object_get(r, "id"));
        if (!id)
            return -1;
        if (route_index(routes, id, &at))
            return json_array_set(routes, at, r);
        return json_array_append(routes, r);
    }
    if (strcmp(kind, "delete_route") == 0) {
        const char *id = json_string_value(json_object_get(op, "id"));
        if (!id || !route_index(routes, id, &at))
            return -1;
        return json_array_remove(routes, at);
    }
    if (strcmp(kind, "put_upstream") == 0 || strcmp(kind, "delete_upstream") == 0) {
        const char *name = json_string_value(json_object_get(op, "name"));
        json_t *ups = json_object_get(doc, "upstreams");
        if (!name)
            return -1;
        if (!ups) {
            ups = json_object();
            json_object_set_new(doc, "upstreams", ups);
        }
        if (kind[0] == 'p')
            return json_object_set(ups, name, json_object_get(op, "upstream"));
        return json_object_del(ups, name);
    }
    return -1;
}

int adm_state_journal(struct adm_state *st, json_t *op, char *msg, size_t cap)
{
    struct stat sb;
    char *line;
    int rc = 0;

    if (!st->dir)
        return 0;
    if (ready(st, msg, cap) < 0)
        return noted(st, -1, msg);
    if (st->journal_n + 1 >= ADM_JOURNAL_MAX || st->journal_fd < 0)
        return saved(st, save_doc(st, msg, cap), msg); /* the doc already has the change */
    if (fstat(st->journal_fd, &sb) < 0) {
        snprintf(msg, cap, "journal: %s", strerror(errno));
        return noted(st, -1, msg);
    }
    line = json_dumps(op, JSON_COMPACT | JSON_SORT_KEYS);
    if (!line) {
        snprintf(msg, cap, "out of memory");
        return noted(st, -1, msg);
    }
    if (write_all(st->journal_fd, line, strlen(line)) < 0 ||
        write_all(st->journal_fd, "\n", 1) < 0 || fdatasync(st->journal_fd) < 0) {
        snprintf(msg, cap, "journal: %s", strerror(errno));
        rc = -1;
        /* The change is refused: none of its bytes may stay, or the next
         * append would share a line with a torn one (dropped on replay
         * with everything after it) or replay a refused change. If the
         * journal cannot be cut back, the next change is a full save,
         * which empties it. */
        if (ftruncate(st->journal_fd, sb.st_size) < 0)
            st->journal_n = ADM_JOURNAL_MAX;
    } else {
        st->journal_n++;
    }
    free(line);
    return noted(st, rc, msg);
}

static json_t *load_json(const char *path, char *msg, size_t cap, int *missing)
{
    json_error_t je;
    json_t *j;

    *missing = 0;
    if (access(path, F_OK) < 0) {
        *missing = 1;
        return NULL;
    }
    j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        snprintf(msg, cap, "%s is corrupt (line %d: %s)", path, je.line,
                 j ? "not an object" : je.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* Replays the journal <jpath> onto <doc>, the config.json it follows, up
 * to its last usable line: a torn line (a crash mid-append, never
 * acknowledged), a line that does not apply, or all of it when its base is
 * not <doc>'s hash (config.json already holds its changes). What follows
 * is cut by adm_state_begin() (st->journal_keep): a tail left in place
 * would be continued by the next append, whose line the next replay would
 * drop. No journal is an empty one. 0, or -1 with <msg> when it cannot be
 * read to its end: starting without its changes and then saving would
 * lose them. */
static int replay(struct adm_state *st, json_t *doc, const char *jpath, char *msg, size_t cap)
{
    char *line = NULL, base[32];
    size_t lcap = 0, good = 0;
    ssize_t n;
    long off = 0;
    int rerr = 0;
    FILE *jf = fopen(jpath, "r");

    if (!jf && errno == ENOENT) {
        st->journal_keep = 0;
        st->journal_n = 0;
        return 0;
    }
    if (!jf) {
        snprintf(msg, cap, "%s: %s", jpath, strerror(errno));
        return -1;
    }
    journal_base(doc_hash(doc), base, sizeof(base));
    while ((n = getline(&line, &lcap, jf)) > 0) {
        json_t *op;
        const char *kind, *h;
        if (line[n - 1] != '\n')
            break; /* torn: never acknowledged */
        op = json_loads(line, 0, NULL);
        kind = json_string_value(json_object_get(op, "op"));
        if (off == 0 && kind && strcmp(kind, "base") == 0) {
            int stale;
            h = json_string_value(json_object_get(op, "hash"));
            stale = !h || strcmp(h, base) != 0;
            json_decref(op);
            if (stale)
                break; /* config.json already holds these changes */
            off += n;
            continue;
        }
        if (!op || adm_state_apply(doc, op) < 0) {
            json_decref(op);
            break;
        }
        json_decref(op);
        good++;
        off += n;
    }
    if (n < 0 && !feof(jf))
        rerr = errno;
    free(line);
    fclose(jf);
    if (rerr) {
        snprintf(msg, cap, "%s: %s", jpath, strerror(rerr));
        return -1;
    }
    st->journal_keep = off;
    st->journal_n = good;
    return 0;
}

/* Locks st->dir for this process, so that a second one on it (started
 * on the same directory, or the same embedded default) fails before it
 * writes anything. A directory not made yet is locked once made
 * (adm_state_begin). A file system without flock (some NFS) runs unlocked,
 * as before. 0, or with <msg> -1 (it cannot be opened) or -2 (another
 * process holds it). */
static int lock_dir(struct adm_state *st, char *msg, size_t cap)
{
    int fd;

    if (st->locked)
        return 0;
    fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(msg, cap, "state_dir %s: %s", st->dir, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK)
            return 0;
        snprintf(msg, cap,
                 "state_dir %s is in use by another switchyard process (each running instance "
                 "needs a state directory of its own)",
                 st->dir);
        return -2;
    }
    st->lock_fd = fd;
    st->locked = 1;
    return 0;
}

json_t *adm_state_open(struct adm_state *st, const char *dir, char *msg, size_t cap, int *err)
{
    char *cfg = NULL, *prev = NULL, *jpath = NULL;
    json_t *doc = NULL;
    int missing;

    *err = 0;
    msg[0] = '\0';
    st->journal_fd = -1;
    st->journal_keep = -1;
    if (!(st->dir = strdup(dir)))
        goto fail;
    if ((*err = lock_dir(st, msg, cap)) < 0)
        goto fail_locked;
    cfg = path_join(dir, "config.json");
    prev = path_join(dir, "config.json.prev");
    jpath = path_join(dir, "journal");
    if (!cfg || !prev || !jpath)
        goto fail;
    doc = load_json(cfg, msg, cap, &missing);
    if (!doc && !missing) {
        /* refuse the corrupt file, use the last good one; adm_state_begin()
         * keeps the corrupt one for inspection */
        size_t n = strlen(msg);
        st->corrupt = 1;
        doc = load_json(prev, msg + n, cap - n, &missing);
        snprintf(msg + strlen(msg), cap - strlen(msg), "; %s; the corrupt file goes to %s.corrupt",
                 doc ? "using config.json.prev (the previous good config)"
                     : "no previous good config",
                 cfg);
        /* the journal belongs to the corrupt file: it cannot be replayed */
        st->prev_used = doc != NULL;
        free(cfg);
        free(prev);
        free(jpath);
        return doc;
    }
    if (doc && replay(st, doc, jpath, msg, cap) < 0)
        goto fail;
    free(cfg);
    free(prev);
    free(jpath);
    return doc;
fail:
    *err = -1;
fail_locked:
    if (!msg[0])
        snprintf(msg, cap, "out of memory");
    free(cfg);
    free(prev);
    free(jpath);
    json_decref(doc);
    return NULL;
}

/* The temporary files a failed write or a crash may leave: never part of
 * the persisted config. */
static const char *const temp_names[] = {"config.json.tmp", "config.json.prev.tmp", "source.tmp"};

static int set_aside(struct adm_state *st, char *msg, size_t cap);

/* A corrupt config.json moved aside to config.json.corrupt. With
 * config.json.prev in use (st->prev_used) it stands in for config.json
 * (a link: no space taken) and the corrupt file's journal is dropped, in
 * that order: a step that fails leaves config.json and the journal as
 * they were, so that the next start finds them again. 0, or -1 with <msg>. */
static int move_corrupt(struct adm_state *st, const char *cfg, const char *jpath, char *msg,
                        size_t cap)
{
    char *aside = path_join(st->dir, "config.json.corrupt");
    char *prev = path_join(st->dir, "config.json.prev");
    char *tmp = path_join(st->dir, "config.json.prev.tmp");
    int rc = -1;

    if (!aside || !prev || !tmp) {
        snprintf(msg, cap, "out of memory");
        goto out;
    }
    if (!st->prev_used) {
        if (rename(cfg, aside) < 0 && errno != ENOENT) {
            snprintf(msg, cap, "move %s aside: %s", cfg, strerror(errno));
            goto out;
        }
        rc = 0;
        goto out;
    }
    /* keep the corrupt file, then put config.json.prev in its place at once */
    if ((unlink(aside) < 0 && errno != ENOENT) || link(cfg, aside) < 0) {
        snprintf(msg, cap, "move %s aside: %s", cfg, strerror(errno));
        goto out;
    }
    if ((unlink(tmp) < 0 && errno != ENOENT) || link(prev, tmp) < 0) {
        snprintf(msg, cap, "link %s to %s: %s", prev, tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, cfg) < 0) {
        snprintf(msg, cap, "rename %s: %s", cfg, strerror(errno));
        unlink(tmp);
        goto out;
    }
    /* config.json now has no journal of its own; one left would be stale
     * (its base is the corrupt file's hash) and is not replayed */
    if (unlink(jpath) < 0 && errno != ENOENT) {
        snprintf(msg, cap, "%s: %s", jpath, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(aside);
    free(prev);
    free(tmp);
    return rc;
}

/* adm_state_begin() without telling the hook: 1 when the persisted config
 * owed a set-aside that failed (nothing written, st->aside_owed stays). */
static int begin(struct adm_state *st, char *msg, size_t cap)
{
    char *cfg = NULL, *jpath = NULL;
    struct stat sb;
    int rc = -1, locked;

    if (mkdir(st->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(msg, cap, "state_dir %s: %s", st->dir, strerror(errno));
        return -1;
    }
    if ((locked = lock_dir(st, msg, cap)) < 0)
        return locked; /* -2: another process made it first and holds it */
    if (st->aside_owed) {
        /* first, before any write: the files below are the old config's */
        if (set_aside(st, msg, cap) < 0)
            return 1;
        st->aside_owed = 0;
        st->corrupt = st->prev_used = 0; /* both moved with the rest */
        st->journal_keep = -1;
    }
    cfg = path_join(st->dir, "config.json");
    jpath = path_join(st->dir, "journal");
    if (!cfg || !jpath) {
        snprintf(msg, cap, "out of memory");
        goto out;
    }
    if (st->corrupt && move_corrupt(st, cfg, jpath, msg, cap) < 0)
        goto out;
    st->corrupt = 0;
    for (size_t i = 0; i < sizeof(temp_names) / sizeof(temp_names[0]); i++) {
        char *t = path_join(st->dir, temp_names[i]);
        int e = !t ? ENOMEM : unlink(t) == 0 ? 0 : errno;
        free(t);
        if (e && e != ENOENT) {
            snprintf(msg, cap, "remove %s/%s: %s", st->dir, temp_names[i], strerror(e));
            goto out;
        }
    }
    if (st->journal_fd >= 0) {
        /* open already (a reload's set-aside, above, made it a fresh one) */
        rc = 0;
        goto out;
    }
    st->journal_fd = open(jpath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (st->journal_fd < 0 || fstat(st->journal_fd, &sb) < 0) {
        snprintf(msg, cap, "%s: %s", jpath, strerror(errno));
        goto out;
    }
    if (st->journal_keep < 0) {
        /* no replayed config.json under it: the next change is a full save */
        st->journal_n = ADM_JOURNAL_MAX;
    } else if (sb.st_size > st->journal_keep && ftruncate(st->journal_fd, st->journal_keep) < 0) {
        snprintf(msg, cap, "%s: cannot drop what follows byte %ld: %s", jpath, st->journal_keep,
                 strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(cfg);
    free(jpath);
    return rc;
}

int adm_state_begin(struct adm_state *st, char *msg, size_t cap)
{
    int rc;

    if (!st->dir)
        return 0;
    rc = begin(st, msg, cap);
    if (rc > 0)
        noted(st, -1, msg);
    return rc;
}

/* Every write first: a persisted config still owed its set-aside is set
 * aside now, and the start's other writes done (begin); until that works
 * no write may happen, as it would go over the old config. 0, or -1 with
 * <msg> (the caller tells the hook). */
static int ready(struct adm_state *st, char *msg, size_t cap)
{
    return !st->aside_owed || begin(st, msg, cap) == 0 ? 0 : -1;
}

int adm_state_replace(struct adm_state *st, uint64_t hash, const char *path)
{
    char *p = path ? strdup(path) : NULL;

    if (path && !p)
        return -1;
    st->aside_owed = 1;
    free(st->was_path);
    st->was_pending = st->source_pending;
    st->was_hash = st->source_hash;
    st->was_path = st->source_path;
    st->source_path = p;
    st->source_hash = hash;
    st->source_pending = 1;
    return 0;
}

void adm_state_replace_cancel(struct adm_state *st)
{
    st->aside_owed = 0;
    free(st->source_path);
    st->source_pending = st->was_pending;
    st->source_hash = st->was_hash;
    st->source_path = st->was_path;
    st->was_pending = 0;
    st->was_path = NULL;
}

int adm_state_source(const struct adm_state *st, uint64_t *hash)
{
    char *path = st->dir ? path_join(st->dir, "source") : NULL;
    json_t *j = path ? json_load_file(path, 0, NULL) : NULL;
    const char *h = json_string_value(json_object_get(j, "hash"));
    int found = h && strlen(h) == 16 && strspn(h, "0123456789abcdef") == 16;

    if (found)
        *hash = strtoull(h, NULL, 16);
    json_decref(j);
    free(path);
    return found;
}

int adm_state_set_source(struct adm_state *st, uint64_t hash, const char *path, char *msg,
                         size_t cap)
{
    char *tmp = path_join(st->dir, "source.tmp"), *dst = path_join(st->dir, "source"), h[32];
    char *keep = NULL;
    json_t *j;
    char *js = NULL;
    int fd = -1, rc = -1;

    journal_base(hash, h, sizeof(h));
    j = json_pack("{s:s,s:s}", "hash", h, "file", path ? path : "(embedded default)");
    if (!tmp || !dst || !j || !(js = json_dumps(j, JSON_SORT_KEYS))) {
        snprintf(msg, cap, "out of memory");
        goto out;
    }
    if (ready(st, msg, cap) < 0)
        goto out;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, js, strlen(js)) < 0 || write_all(fd, "\n", 1) < 0 ||
        fsync(fd) < 0 || rename(tmp, dst) < 0 || fsync_dir(st->dir) < 0) {
        snprintf(msg, cap, "%s: %s", dst, strerror(errno));
        if (fd >= 0)
            unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    /* owed until a later save writes it (<path> may be the owed one) */
    if (rc == 0 || path != st->source_path) {
        keep = st->source_path;
        st->source_path = rc < 0 && path ? strdup(path) : NULL;
    }
    free(keep);
    st->source_pending = rc < 0;
    st->source_hash = hash;
    json_decref(j);
    free(js);
    free(tmp);
    free(dst);
    return noted(st, rc, msg);
}

/* Moves the persisted config (config.json, config.json.prev, journal)
 * into a new directory replaced-<UTC time>, kept in st->set_aside_to
 * (NULL: there was nothing to move). The journal descriptor, if open,
 * follows a fresh empty journal with no config.json under it until the
 * next save. A move that fails puts back what it moved: the persisted
 * config stays where it was. 0, or -1 with <msg>. */
static int set_aside(struct adm_state *st, char *msg, size_t cap)
{
    static const char *const names[] = {"config.json", "config.json.prev", "journal"};
    char stamp[32], sub[64], *dir = NULL;
    time_t now = time(NULL);
    struct tm tm;
    int moved = 0, rc = -1, e = 0;
    size_t done = 0;

    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
    /* a second reset within the same second gets a suffix */
    for (int k = 0; k < 100; k++) {
        free(dir);
        snprintf(sub, sizeof(sub), k ? "replaced-%s-%d" : "replaced-%s", stamp, k);
        if (!(dir = path_join(st->dir, sub))) {
            snprintf(msg, cap, "out of memory");
            return -1;
        }
        e = mkdir(dir, 0700) == 0 ? 0 : errno;
        if (e != EEXIST)
            break;
    }
    if (e) {
        snprintf(msg, cap, "%s: %s", dir, strerror(e));
        free(dir);
        return -1;
    }
    for (; done < sizeof(names) / sizeof(names[0]); done++) {
        char *from = path_join(st->dir, names[done]), *to = path_join(dir, names[done]);
        e = !from || !to ? ENOMEM : rename(from, to) == 0 ? 0 : errno;
        free(from);
        free(to);
        if (e && e != ENOENT) {
            snprintf(msg, cap, "move %s into %s: %s", names[done], dir, strerror(e));
            goto fail_moved;
        }
        moved += !e;
    }
    /* the journal descriptor followed the file: a fresh, empty one, with
     * no config.json under it until the next save */
    if (st->journal_fd >= 0) {
        char *j = path_join(st->dir, "journal");
        close(st->journal_fd);
        st->journal_fd = j ? open(j, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
        free(j);
        st->journal_n = ADM_JOURNAL_MAX;
        if (st->journal_fd < 0) {
            snprintf(msg, cap, "journal: %s", strerror(errno));
            goto out;
        }
    }
    if (fsync_dir(st->dir) < 0) {
        snprintf(msg, cap, "fsync %s: %s", st->dir, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (moved) {
        free(st->set_aside_to);
        st->set_aside_to = dir;
    } else {
        rmdir(dir);
        free(dir);
    }
    return rc;
fail_moved:
    /* put back what moved: those names were just freed in st->dir */
    while (done-- > 0) {
        char *from = path_join(st->dir, names[done]), *to = path_join(dir, names[done]);
        if (from && to)
            rename(to, from);
        free(from);
        free(to);
    }
    rmdir(dir);
    free(dir);
    return -1;
}

void adm_state_detach(struct adm_state *st)
{
    if (st->journal_fd >= 0)
        close(st->journal_fd);
    st->journal_fd = -1;
    if (st->locked)
        close(st->lock_fd);
    st->locked = 0;
    free(st->dir);
    st->dir = NULL;
    st->aside_owed = st->source_pending = st->was_pending = 0;
}

void adm_state_free(struct adm_state *st)
{
    adm_state_detach(st);
    json_decref(st->doc);
    json_decref(st->ids);
    free(st->canon);
    free(st->source_path);
    free(st->was_path);
    free(st->set_aside_to);
    memset(st, 0, sizeof(*st));
    st->journal_fd = -1;
}
