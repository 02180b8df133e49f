/*
 * fuzz_router.c - libFuzzer target over pattern parsing and lookup, checked
 * against the brute-force reference (reference.c).
 *
 * Input: a first byte of options (trailing-slash mode, auto OPTIONS), then
 * lines. "R METHODS PATTERN" adds a route ("*" or "GET,POST"), "D METHODS
 * PATTERN" deletes one, "Q METHOD HOST PATH" looks a request up ("-" for no
 * host), anything else is ignored. Invariants, any failure aborts:
 *   - rt_pattern_check and rt_txn_insert agree on whether a pattern is valid;
 *   - the tree and the reference agree on every insert's conflict and every
 *     delete's outcome;
 *   - every lookup, in the committed table, agrees with the reference on
 *     status, route, parameters, slash and allow set (rtest_agree).
 */
#include "router/router.h"
#include "tests/router/reference.h"
#include "tests/router/rtest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 64

/* The method spec must fit rtest_methods: at most RTEST_MAX_METHODS tokens of
 * fewer than 32 bytes (rtest_methods_parse asserts that). */
static int spec_fits(const char *spec)
{
    size_t n = 1, len = 0;

    for (const char *p = spec; *p; p++) {
        if (*p == ',') {
            n++;
            len = 0;
        } else if (++len >= 32) {
            return 0;
        }
    }
    return n <= RTEST_MAX_METHODS;
}

static char *next_field(char **s)
{
    char *f = *s, *e;

    while (*f == ' ')
        f++;
    if (!*f)
        return NULL;
    e = strchr(f, ' ');
    if (e) {
        *e = '\0';
        *s = e + 1;
    } else {
        *s = f + strlen(f);
    }
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rt_options opts = {RT_TS_STRICT, 0};
    struct ref_table ref;
    rt_table *empty, *t;
    rt_txn *tx;
    char *buf, *line, *save = NULL;
    intptr_t id = 0;
    int nlines = 0;

    if (size < 1 || size > 4096)
        return 0;
    opts.trailing_slash = (enum rt_trailing_slash)(data[0] % 3);
    opts.auto_options = (data[0] >> 2) & 1;
    buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    empty = rt_table_new(&opts, NULL);
    tx = rt_txn_begin(empty);
    ref_init(&ref);
    t = NULL;

    for (line = strtok_r(buf, "\n", &save); line && nlines < MAX_LINES;
         line = strtok_r(NULL, "\n", &save), nlines++) {
        char kind = line[0], *rest = line + 1, *ms, *pat;
        struct rt_error err;
        struct rtest_methods m;

        if (kind != 'R' && kind != 'D' && kind != 'Q')
            continue;
        if (kind == 'Q') {
            char *method = next_field(&rest), *host = next_field(&rest), *path = next_field(&rest);
            char why[512];
            if (!method || !host || !path || path[0] != '/')
                continue;
            if (strcmp(host, "-") == 0)
                host = NULL;
            if (!t) {
                t = rt_txn_commit(tx);
                tx = NULL;
            }
            if (!rtest_agree(t, &ref, NULL, method, host, host ? strlen(host) : 0, path,
                             strlen(path), why, sizeof(why))) {
                fprintf(stderr, "tree and reference disagree: %s\n", why);
                abort();
            }
            continue;
        }
        if (t) /* writes after the first lookup start a new transaction */
            continue;
        ms = next_field(&rest);
        pat = next_field(&rest);
        if (!ms || !pat || !spec_fits(ms))
            continue;
        rtest_methods_parse(&m, ms);
        if (kind == 'R') {
            int check = rt_pattern_check(pat, NULL);
            int rc = rt_txn_insert(tx, m.ptr, m.n, pat, NULL, (void *)(id + 1), &err);
            if (check < 0 && (rc == 0 || (err.code != RT_EINVAL && err.code != RT_ELIMIT))) {
                fprintf(stderr, "rt_pattern_check refused %s, insert did not\n", pat);
                abort();
            }
            if (rc < 0 && err.code == RT_ELIMIT)
                continue;
            if (check == 0 && rc < 0 && err.code == RT_EINVAL &&
                strncmp(err.msg, "invalid method", 14) != 0) {
                fprintf(stderr, "insert refused %s that rt_pattern_check took\n", pat);
                abort();
            }
            if (rc < 0 && err.code != RT_ECONFLICT)
                continue; /* invalid pattern or method: nothing to compare */
            {
                int rrc = ref_insert(&ref, m.ptr, m.n, pat, id + 1, NULL, 0, NULL);
                if ((rc == 0) != (rrc == REF_OK)) {
                    fprintf(stderr, "insert of %s %s: tree %d, reference %d\n", ms, pat, rc, rrc);
                    abort();
                }
            }
            id++;
        } else {
            int rc = rt_txn_delete(tx, m.ptr, m.n, pat, &err);
            int rrc;
            if (rc < 0 && err.code == RT_EINVAL)
                continue;
            rrc = ref_delete(&ref, m.ptr, m.n, pat, NULL);
            if ((rc == 0) != (rrc == REF_OK)) {
                fprintf(stderr, "delete of %s %s: tree %d, reference %d\n", ms, pat, rc, rrc);
                abort();
            }
        }
    }
    if (!t)
        t = rt_txn_commit(tx);
    rt_table_free(t);
    rt_table_free(empty);
    ref_clear(&ref);
    free(buf);
    return 0;
}
