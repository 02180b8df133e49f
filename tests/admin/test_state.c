/*
 * test_state.c - the state directory (admin/state.c) when its I/O fails:
 * a journal whose torn tail cannot be dropped, a journal that cannot be
 * read, an append that fails half-way, a config.json.prev that cannot be
 * kept, a journal that cannot be emptied after a save. Every failure is
 * real: a memfd sealed against shrinking stands in for the journal file
 * (the state opens it through a symlink to /proc/self/fd/N), and resource
 * limits (RLIMIT_FSIZE, RLIMIT_NOFILE) make the kernel refuse the call.
 * Out of memory goes through jansson's own allocator hook. Also the
 * directory's lock (one process a directory) and a reload's replace of
 * the persisted state, carried out or called off.
 */
#define _GNU_SOURCE

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin/state.h"

/* A fresh state directory; its path in <dir> (cap bytes). */
static void make_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/sy_test_state.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* The journal's head line for a config.json holding <doc>. */
static void head_line(const char *doc, char *buf, size_t cap)
{
    struct adm_state st = {.journal_fd = -1};
    json_t *j = json_loads(doc, 0, NULL);

    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(adm_state_set_doc(&st, j), 0);
    snprintf(buf, cap, "{\"hash\":\"%016llx\",\"op\":\"base\"}\n",
             (unsigned long long)adm_state_hash(&st));
    json_decref(j);
    adm_state_free(&st);
}

/* Makes <dir>/journal a name of a memfd holding <text> that cannot shrink.
 * Returns the memfd. */
static int sealed_journal(const char *dir, const char *text)
{
    char path[512], target[64];
    int fd = memfd_create("journal", MFD_ALLOW_SEALING);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    snprintf(path, sizeof(path), "%s/journal", dir);
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    unlink(path);
    ck_assert_int_eq(symlink(target, path), 0);
    return fd;
}

static int has_route(const json_t *doc, const char *id)
{
    size_t i;
    json_t *r;

    json_array_foreach(json_object_get(doc, "routes"), i, r)
    {
        if (strcmp(json_string_value(json_object_get(r, "id")), id) == 0)
            return 1;
    }
    return 0;
}

static json_t *put_route(const char *id)
{
    return json_pack("{s:s,s:{s:s,s:s}}", "op", "put_route", "route", "id", id, "path", "/x");
}

/* Makes {"routes":[],"v":<v>} the live document of <st>. */
static void set_version(struct adm_state *st, int v)
{
    json_t *doc = json_pack("{s:[],s:i}", "routes", "v", v);

    ck_assert_int_eq(adm_state_set_doc(st, doc), 0);
    json_decref(doc);
}

#define DOC "{\"routes\":[]}"

/* A replay ends at a torn line; if the journal cannot be cut there, the
 * next append would follow the torn bytes on the same line and the replay
 * after it would end before that acknowledged change. The cut is the
 * start's first write (adm_state_begin), after every check passed. */
START_TEST(replay_cut_failure_is_an_error)
{
    char dir[64], head[96], text[512], msg[512];
    struct adm_state st = {.journal_fd = -1};
    json_t *doc;
    int err;

    make_dir(dir, sizeof(dir));
    write_file(dir, "config.json", DOC);
    head_line(DOC, head, sizeof(head));
    snprintf(text, sizeof(text),
             "%s{\"op\":\"put_route\",\"route\":{\"id\":\"a\",\"path\":\"/a\"}}\n{\"op\":\"put_ro",
             head);
    sealed_journal(dir, text);
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(has_route(doc, "a"), 1);
    json_decref(doc);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), -1);
    ck_assert_ptr_nonnull(strstr(msg, "journal"));
    adm_state_free(&st);
}
END_TEST

/* A journal that exists but cannot be read is not a journal without
 * changes: starting without them and then saving would lose them. */
START_TEST(unreadable_journal_is_an_error)
{
    char dir[64], head[96], text[512], msg[512];
    struct adm_state st = {.journal_fd = -1};
    struct rlimit rl;
    json_t *doc;
    int err, low;

    make_dir(dir, sizeof(dir));
    write_file(dir, "config.json", DOC);
    head_line(DOC, head, sizeof(head));
    snprintf(text, sizeof(text),
             "%s{\"op\":\"put_route\",\"route\":{\"id\":\"a\",\"path\":\"/a\"}}\n", head);
    write_file(dir, "journal", text);
    /* room for two descriptors: the directory's lock and the journal's
     * own; reading it needs another */
    low = dup(0);
    ck_assert_int_ge(low, 0);
    close(low);
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = (rlim_t)low + 2;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_msg(err == -1 || (doc && has_route(doc, "a")),
                  "the journal's change was neither replayed nor reported");
    json_decref(doc);
    adm_state_free(&st);
}
END_TEST

/* An append that fails half-way must not leave its bytes in front of the
 * next append, which is acknowledged. */
START_TEST(failed_append_leaves_no_torn_line)
{
    char dir[64], msg[512];
    struct adm_state st = {.journal_fd = -1};
    struct rlimit rl, keep;
    struct stat sb;
    json_t *doc, *op;
    int err;

    make_dir(dir, sizeof(dir));
    ck_assert_ptr_null(adm_state_open(&st, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    doc = json_loads(DOC, 0, NULL);
    ck_assert_int_eq(adm_state_set_doc(&st, doc), 0);
    json_decref(doc);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);

    /* the file may grow by 10 bytes: the first write is cut short */
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(fstat(st.journal_fd, &sb), 0);
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &keep), 0);
    rl = keep;
    rl.rlim_cur = (rlim_t)sb.st_size + 10;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    op = put_route("lost");
    ck_assert_int_eq(adm_state_journal(&st, op, msg, sizeof(msg)), -1);
    json_decref(op);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &keep), 0);

    op = put_route("kept");
    ck_assert_int_eq(adm_state_journal(&st, op, msg, sizeof(msg)), 0);
    json_decref(op);
    adm_state_free(&st);

    st.journal_fd = -1;
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_nonnull(doc);
    ck_assert_msg(has_route(doc, "kept"), "an acknowledged change was lost on replay");
    ck_assert_int_eq(has_route(doc, "lost"), 0);
    json_decref(doc);
    adm_state_free(&st);
}
END_TEST

/* Each save keeps the config.json it replaces as config.json.prev, or says
 * it could not. */
START_TEST(save_keeps_prev_or_fails)
{
    char dir[64], msg[512], path[512];
    struct adm_state st = {.journal_fd = -1};
    json_t *prev;
    int err;

    make_dir(dir, sizeof(dir));
    ck_assert_ptr_null(adm_state_open(&st, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    set_version(&st, 1);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    set_version(&st, 2);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    snprintf(path, sizeof(path), "%s/config.json.prev", dir);
    ck_assert_ptr_nonnull(prev = json_load_file(path, 0, NULL));
    ck_assert_int_eq(json_integer_value(json_object_get(prev, "v")), 1);
    json_decref(prev);

    /* a config.json.prev that cannot be replaced */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    write_file(path, "keep", "x");
    set_version(&st, 3);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), -1);
    ck_assert_ptr_nonnull(strstr(msg, "config.json.prev"));
    adm_state_free(&st);
}
END_TEST

/* A save that renamed config.json into place but could not empty the
 * journal leaves a journal headed by the old config's hash: an append after
 * it would be dropped by the next replay as stale. */
START_TEST(unreset_journal_takes_no_appends)
{
    char dir[64], head[96], msg[512];
    struct adm_state st = {.journal_fd = -1};
    json_t *doc, *op;
    int err, rc;

    make_dir(dir, sizeof(dir));
    write_file(dir, "config.json", DOC);
    head_line(DOC, head, sizeof(head));
    sealed_journal(dir, head);
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(adm_state_set_doc(&st, doc), 0);
    json_decref(doc);
    op = put_route("a");
    ck_assert_int_eq(adm_state_apply(st.doc, op), 0);
    json_decref(op);
    ck_assert_int_eq(adm_state_set_doc(&st, st.doc), 0);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), -1); /* cannot shrink the journal */

    op = put_route("b");
    ck_assert_int_eq(adm_state_apply(st.doc, op), 0);
    rc = adm_state_journal(&st, op, msg, sizeof(msg));
    json_decref(op);
    adm_state_free(&st); /* its lock too: the next start reads what it left */
    if (rc == 0) {
        struct adm_state again = {.journal_fd = -1};
        doc = adm_state_open(&again, dir, msg, sizeof(msg), &err);
        ck_assert_msg(!err && doc && has_route(doc, "b"),
                      "an acknowledged change was lost on replay");
        json_decref(doc);
        adm_state_free(&again);
    }
}
END_TEST

/* What the hook heard: failures, and recoveries (a NULL failure). */
struct heard {
    int failures, recoveries;
    char last[512];
};

static void hook(void *arg, const char *failure)
{
    struct heard *h = arg;

    if (failure) {
        h->failures++;
        snprintf(h->last, sizeof(h->last), "%s", failure);
    } else {
        h->recoveries++;
    }
}

static int exists(const char *dir, const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Reading the state writes nothing: a start may still fail after it. A
 * missing directory is not made, a torn journal line is not cut, a
 * corrupt config.json is not moved, leftover temporary files stay; all of
 * it is adm_state_begin()'s, which a start reaches only once every check
 * passed. */
START_TEST(open_writes_nothing)
{
    char dir[64], sub[96], head[96], text[512], msg[512], path[512];
    struct adm_state st = {.journal_fd = -1};
    struct stat sb;
    json_t *doc;
    int err;

    make_dir(dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/missing", dir);
    ck_assert_ptr_null(adm_state_open(&st, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(access(sub, F_OK), -1);
    adm_state_free(&st);

    write_file(dir, "config.json", DOC);
    write_file(dir, "config.json.tmp", "{\"half\":");
    head_line(DOC, head, sizeof(head));
    snprintf(text, sizeof(text),
             "%s{\"op\":\"put_route\",\"route\":{\"id\":\"a\",\"path\":\"/a\"}}\n{\"op\":\"put_ro",
             head);
    write_file(dir, "journal", text);
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(has_route(doc, "a"), 1);
    json_decref(doc);
    snprintf(path, sizeof(path), "%s/journal", dir);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_size, (off_t)strlen(text));
    ck_assert_int_eq(exists(dir, "config.json.tmp"), 1);
    /* the start's first write: the torn line cut, the temporary file gone */
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_lt(sb.st_size, (off_t)strlen(text));
    ck_assert_int_eq(exists(dir, "config.json.tmp"), 0);
    adm_state_free(&st);

    write_file(dir, "config.json", "}{");
    st.journal_fd = -1;
    ck_assert_ptr_null(adm_state_open(&st, dir, msg, sizeof(msg), &err));
    ck_assert_ptr_nonnull(strstr(msg, "corrupt"));
    ck_assert_int_eq(exists(dir, "config.json"), 1);
    ck_assert_int_eq(exists(dir, "config.json.corrupt"), 0);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(exists(dir, "config.json"), 0);
    ck_assert_int_eq(exists(dir, "config.json.corrupt"), 1);
    adm_state_free(&st);
}
END_TEST

/* A corrupt config.json with config.json.prev standing in for it: when
 * the link that puts config.json.prev in its place fails (here the file
 * went between the read and the start's first write), begin fails and
 * leaves config.json and its journal as they were; nothing is removed
 * before the link is there. Once it can be made, the corrupt file is kept
 * aside and config.json.prev's config is config.json. */
START_TEST(prev_link_failure_removes_nothing)
{
    char dir[64], msg[512], from[512], to[512], head[96], text[256];
    struct adm_state st = {.journal_fd = -1};
    json_t *doc;
    int err;

    make_dir(dir, sizeof(dir));
    write_file(dir, "config.json", "}{");
    write_file(dir, "config.json.prev", DOC);
    head_line(DOC, head, sizeof(head));
    snprintf(text, sizeof(text), "%s{\"op\":\"delete_route\",\"id\":\"r\"}\n", head);
    write_file(dir, "journal", text);
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_ptr_nonnull(doc);
    json_decref(doc);
    snprintf(from, sizeof(from), "%s/config.json.prev", dir);
    snprintf(to, sizeof(to), "%s/elsewhere", dir);
    ck_assert_int_eq(rename(from, to), 0);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), -1);
    ck_assert_ptr_nonnull(strstr(msg, "config.json.prev"));
    ck_assert_int_eq(exists(dir, "config.json"), 1);
    ck_assert_int_eq(exists(dir, "journal"), 1);

    ck_assert_int_eq(rename(to, from), 0);
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(exists(dir, "config.json.corrupt"), 1);
    ck_assert_int_eq(exists(dir, "config.json.prev.tmp"), 0);
    adm_state_free(&st);
    st.journal_fd = -1;
    doc = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(st.corrupt, 0);
    json_decref(doc);
    adm_state_free(&st);
}
END_TEST

/* A save that fails (the file may not grow: a full disk as far as the
 * write is concerned) leaves no temporary file behind to keep the space,
 * is counted and told to the hook; the next save that works is told too. */
START_TEST(failed_save_leaves_no_temporary_file)
{
    char dir[64], msg[512];
    struct adm_state st = {.journal_fd = -1};
    struct heard h = {0};
    struct rlimit rl, keep;
    int err;

    make_dir(dir, sizeof(dir));
    ck_assert_ptr_null(adm_state_open(&st, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    st.persist_hook = hook;
    st.persist_arg = &h;
    set_version(&st, 1);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(h.failures + h.recoveries, 0);

    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &keep), 0);
    rl = keep;
    rl.rlim_cur = 4;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    set_version(&st, 2);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), -1);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &keep), 0);
    ck_assert_ptr_nonnull(strstr(msg, "config.json.tmp"));
    ck_assert_int_eq(exists(dir, "config.json.tmp"), 0);
    ck_assert_int_eq(h.failures, 1);
    ck_assert_ptr_nonnull(strstr(h.last, "config.json.tmp"));
    ck_assert_int_eq(st.persist_failing, 1);
    ck_assert_int_eq((int)st.persist_failures, 1);

    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(h.recoveries, 1);
    ck_assert_int_eq(st.persist_failing, 0);
    ck_assert_int_eq((int)st.persist_failures, 1);
    adm_state_free(&st);
}
END_TEST

/* ---- one process a directory; a reload's replace ---- */

/* A second process on a directory another one holds is refused before it
 * reads or writes anything there; a directory made by the first start is
 * held from then on; letting go (adm_state_free, an exit) frees it. Two
 * states in one process stand for the two processes: flock holds per open
 * file description. */
START_TEST(second_process_is_refused)
{
    char dir[64], sub[96], msg[512];
    struct adm_state a = {.journal_fd = -1}, b = {.journal_fd = -1};
    int err;

    make_dir(dir, sizeof(dir));
    write_file(dir, "config.json", DOC);
    json_decref(adm_state_open(&a, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_null(adm_state_open(&b, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, -2);
    ck_assert_ptr_nonnull(strstr(msg, "in use by another switchyard process"));
    adm_state_free(&b);
    adm_state_free(&a);
    b.journal_fd = -1;
    json_decref(adm_state_open(&b, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    adm_state_free(&b);

    /* missing at the first read: locked once made */
    snprintf(sub, sizeof(sub), "%s/new", dir);
    a.journal_fd = b.journal_fd = -1;
    ck_assert_ptr_null(adm_state_open(&a, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(adm_state_begin(&a, msg, sizeof(msg)), 0);
    ck_assert_ptr_null(adm_state_open(&b, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, -2);
    adm_state_free(&b);
    /* detached: nothing written any more, and the directory let go */
    adm_state_detach(&a);
    ck_assert_ptr_null(a.dir);
    set_version(&a, 1);
    ck_assert_int_eq(adm_state_save(&a, msg, sizeof(msg)), 0);
    ck_assert_int_eq(exists(sub, "config.json"), 0);
    b.journal_fd = -1;
    ck_assert_ptr_null(adm_state_open(&b, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    adm_state_free(&b);
    adm_state_free(&a);
}
END_TEST

/* Two starting together on a directory not made yet (the embedded
 * default's first run): both read nothing, unlocked; the second to make
 * it ready finds it held, and says so (-2) rather than as a directory that
 * cannot be used (-1), so that the start exits instead of serving
 * unpersisted. */
START_TEST(second_start_on_a_new_directory)
{
    char dir[64], sub[96], msg[512];
    struct adm_state a = {.journal_fd = -1}, b = {.journal_fd = -1};
    int err;

    make_dir(dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/new", dir);
    ck_assert_ptr_null(adm_state_open(&a, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_ptr_null(adm_state_open(&b, sub, msg, sizeof(msg), &err));
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(adm_state_begin(&a, msg, sizeof(msg)), 0);
    ck_assert_int_eq(adm_state_begin(&b, msg, sizeof(msg)), -2);
    ck_assert_ptr_nonnull(strstr(msg, "in use by another switchyard process"));
    adm_state_free(&b);
    adm_state_free(&a);
}
END_TEST

static int open_fds(void)
{
    int n = 0;

    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

/* The replaced-* directory that <dir> holds (none: 0, else 1 with its
 * name in <name>), or -1 when it holds several. */
static int replaced_dir(const char *dir, char *name, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "replaced-", 9) == 0 && n++ == 0)
            snprintf(name, cap, "%s", e->d_name);
    closedir(d);
    return n > 1 ? -1 : n;
}

/* A reload whose file replaces the running state's API changes: the state
 * is set aside at the first write (the running journal's descriptor
 * follows a fresh journal; none is left open twice), and the new source
 * recorded after the save. A replace that is called off sets nothing
 * aside and owes the old source again. */
START_TEST(reload_replace_and_cancel)
{
    char dir[64], msg[512], name[256], path[400];
    struct adm_state st = {.journal_fd = -1};
    uint64_t h = 0;
    json_t *op;
    int err, fds;

    make_dir(dir, sizeof(dir));
    ck_assert_ptr_null(adm_state_open(&st, dir, msg, sizeof(msg), &err));
    ck_assert_int_eq(adm_state_begin(&st, msg, sizeof(msg)), 0);
    set_version(&st, 1);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(adm_state_set_source(&st, 41, "f", msg, sizeof(msg)), 0);
    op = put_route("api");
    ck_assert_int_eq(adm_state_apply(st.doc, op), 0);
    ck_assert_int_eq(adm_state_journal(&st, op, msg, sizeof(msg)), 0);
    json_decref(op);

    /* called off: nothing moves, the source stays 41 */
    ck_assert_int_eq(adm_state_replace(&st, 43, "f"), 0);
    adm_state_replace_cancel(&st);
    ck_assert_int_eq(st.aside_owed, 0);
    ck_assert_int_eq(st.source_pending, 0);
    set_version(&st, 2);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(replaced_dir(dir, name, sizeof(name)), 0);
    ck_assert_int_eq(adm_state_source(&st, &h), 1);
    ck_assert_uint_eq(h, 41);

    /* carried out by the next save */
    fds = open_fds();
    ck_assert_int_eq(adm_state_replace(&st, 42, "f"), 0);
    set_version(&st, 3);
    ck_assert_int_eq(adm_state_save(&st, msg, sizeof(msg)), 0);
    ck_assert_int_eq(open_fds(), fds);
    ck_assert_int_eq(replaced_dir(dir, name, sizeof(name)), 1);
    ck_assert_ptr_nonnull(st.set_aside_to);
    ck_assert_ptr_nonnull(strstr(st.set_aside_to, name));
    ck_assert_int_lt(snprintf(path, sizeof(path), "%.63s/%.255s", dir, name), (int)sizeof(path));
    ck_assert_int_eq(exists(path, "config.json"), 1);
    ck_assert_int_eq(exists(path, "journal"), 1);
    ck_assert_int_eq(adm_state_source(&st, &h), 1);
    ck_assert_uint_eq(h, 42);
    /* the fresh journal takes appends again */
    op = put_route("after");
    ck_assert_int_eq(adm_state_apply(st.doc, op), 0);
    ck_assert_int_eq(adm_state_journal(&st, op, msg, sizeof(msg)), 0);
    json_decref(op);
    adm_state_free(&st);
    st.journal_fd = -1;
    op = adm_state_open(&st, dir, msg, sizeof(msg), &err);
    ck_assert_ptr_nonnull(op);
    ck_assert_int_eq(json_integer_value(json_object_get(op, "v")), 3);
    ck_assert_int_eq(has_route(op, "after"), 1);
    json_decref(op);
    adm_state_free(&st);
}
END_TEST

/* ---- out of memory ---- */

static int fail_after = -1; /* allocations left before they fail; -1: never */

static void *failing_malloc(size_t n)
{
    if (fail_after == 0)
        return NULL;
    if (fail_after > 0)
        fail_after--;
    return malloc(n);
}

/* The document as it was before, and its hash as without the failure:
 * out of memory may fail adm_state_set_doc, never change the document or
 * give a hash that another document could have. */
START_TEST(set_doc_out_of_memory)
{
    json_t *doc = json_object(), *routes = json_array();
    struct adm_state st = {.journal_fd = -1};
    uint64_t want;
    char key[16];

    for (int i = 0; i < 20; i++) { /* more keys than hash_walk sorts on the stack */
        snprintf(key, sizeof(key), "k%02d", i);
        json_object_set_new(doc, key, json_integer(i));
    }
    json_array_append_new(routes, json_pack("{s:s,s:s}", "id", "a", "path", "/a"));
    json_object_set_new(doc, "routes", routes);
    ck_assert_int_eq(adm_state_set_doc(&st, doc), 0);
    want = adm_state_hash(&st);
    adm_state_free(&st);

    for (int n = 0; n < 64; n++) {
        int rc;
        st.journal_fd = -1;
        fail_after = n;
        json_set_alloc_funcs(failing_malloc, free);
        rc = adm_state_set_doc(&st, doc);
        json_set_alloc_funcs(malloc, free);
        fail_after = -1;
        ck_assert_msg(json_object_get(doc, "routes") == routes && json_array_size(routes) == 1,
                      "the routes left the document (allocation %d failed)", n);
        if (rc == 0)
            ck_assert_msg(adm_state_hash(&st) == want, "another hash (allocation %d failed)", n);
        adm_state_free(&st);
    }
    json_decref(doc);
}
END_TEST

/* The hash of an object too large to sort on the stack when its key array
 * cannot be had (the address space is limited to what is in use): the same
 * hash as with memory. Not under ASan, which maps its shadow up front. */
START_TEST(hash_without_memory_for_the_sort)
{
#if defined(__SANITIZE_ADDRESS__)
    return;
#else
    json_t *doc = json_object();
    struct rlimit rl, keep;
    unsigned long pages = 0;
    uint64_t want, got;
    char key[16];
    FILE *f;

    /* blocks of 64 kB and more are mapped and unmapped, and the heap keeps
     * no slack: the key array (80 kB) needs new address space */
    ck_assert_int_eq(mallopt(M_MMAP_THRESHOLD, 64 * 1024), 1);
    ck_assert_int_eq(mallopt(M_TOP_PAD, 0), 1);
    ck_assert_int_eq(mallopt(M_TRIM_THRESHOLD, 0), 1);
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "k%05d", (i * 7919) % 10000);
        json_object_set_new(doc, key, json_integer(i));
    }
    want = adm_json_hash(doc);
    malloc_trim(0);
    ck_assert_ptr_nonnull(f = fopen("/proc/self/statm", "r"));
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &keep), 0);
    rl = keep;
    rl.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + 64 * 1024;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
    got = adm_json_hash(doc);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &keep), 0);
    ck_assert_msg(got == want, "another hash without memory");
    json_decref(doc);
#endif
}
END_TEST

static Suite *state_suite(void)
{
    Suite *s = suite_create("admin_state");
    TCase *tc = tcase_create("io_failures");

    tcase_add_test(tc, replay_cut_failure_is_an_error);
    tcase_add_test(tc, unreadable_journal_is_an_error);
    tcase_add_test(tc, failed_append_leaves_no_torn_line);
    tcase_add_test(tc, save_keeps_prev_or_fails);
    tcase_add_test(tc, unreset_journal_takes_no_appends);
    tcase_add_test(tc, open_writes_nothing);
    tcase_add_test(tc, prev_link_failure_removes_nothing);
    tcase_add_test(tc, failed_save_leaves_no_temporary_file);
    suite_add_tcase(s, tc);
    tc = tcase_create("lifecycle");
    tcase_add_test(tc, second_process_is_refused);
    tcase_add_test(tc, second_start_on_a_new_directory);
    tcase_add_test(tc, reload_replace_and_cancel);
    suite_add_tcase(s, tc);
    tc = tcase_create("out_of_memory");
    tcase_set_timeout(tc, 120); /* the sort without memory is quadratic: 10^8 steps */
    tcase_add_test(tc, set_doc_out_of_memory);
    tcase_add_test(tc, hash_without_memory_for_the_sort);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(state_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
