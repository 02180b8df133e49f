/*
 * fuzz_config.c - libFuzzer target: arbitrary bytes into adm_config_parse().
 *
 * Beyond "no crash, no leak, no undefined behaviour" it checks what the parser
 * promises:
 *   - a rejected document comes with at least one error (or nomem);
 *   - every error path is a JSON pointer whose parent exists in the document
 *     (when jansson can parse the document at all, duplicate keys allowed);
 *   - an accepted config's canonical JSON parses again to the same canonical
 *     JSON, and its routes build into a router table.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/config.h"
#include "router/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Resolves the RFC 6901 pointer <p>[0..len) in <doc>; NULL if absent. */
static json_t *resolve(json_t *doc, const char *p, size_t len)
{
    char key[4096];
    size_t i = 0;

    while (i < len && doc) {
        if (p[i] != '/')
            abort(); /* a non-empty pointer starts every segment with '/' */
        i++;
        size_t k = 0;
        while (i < len && p[i] != '/') {
            char ch = p[i++];
            if (ch == '~') {
                if (i >= len || (p[i] != '0' && p[i] != '1'))
                    abort(); /* '~' is always escaped */
                ch = p[i++] == '0' ? '~' : '/';
            }
            if (k + 1 >= sizeof(key))
                return NULL;
            key[k++] = ch;
        }
        key[k] = '\0';
        if (json_is_object(doc)) {
            doc = json_object_getn(doc, key, k);
        } else if (json_is_array(doc)) {
            char *end;
            unsigned long idx = strtoul(key, &end, 10);
            doc = (*end || !k) ? NULL : json_array_get(doc, idx);
        } else {
            doc = NULL;
        }
    }
    return doc;
}

static void check_error_paths(const uint8_t *data, size_t size, const struct adm_errors *e)
{
    /* without JSON_REJECT_DUPLICATES, so that a duplicate key's path (which
     * names the duplicate) is checked too */
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    if (!doc)
        return;
    for (size_t i = 0; i < e->n; i++) {
        const char *p = e->v[i].path;
        const char *slash = strrchr(p, '/');
        if (!slash)
            continue; /* "": the document */
        /* A duplicate key is reported where it first repeats; a later
         * duplicate of a key above it may have replaced that container in
         * this last-wins parse, so its path is not resolved here. */
        if (strncmp(e->v[i].msg, "duplicate key", 13) == 0)
            continue;
        if (!resolve(doc, p, (size_t)(slash - p))) {
            fprintf(stderr, "error path without a parent: %s: %s\n", p, e->v[i].msg);
            abort();
        }
    }
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct adm_errors e;
    adm_errors_init(&e);
    struct adm_config *c = adm_config_parse((const char *)data, size, &e);

    if (!c) {
        if (e.n == 0 && !e.nomem)
            abort();
        check_error_paths(data, size, &e);
        char *s = adm_errors_format(&e);
        free(s);
        adm_errors_clear(&e);
        return 0;
    }
    if (e.n)
        abort();

    char *canon = adm_config_canonical(c);
    if (canon) {
        struct adm_config *c2 = adm_config_parse(canon, strlen(canon), &e);
        if (!c2 && !e.nomem) {
            char *s = adm_errors_format(&e);
            fprintf(stderr, "canonical form rejected:\n%s\n%s", canon, s);
            abort();
        }
        if (c2) {
            char *canon2 = adm_config_canonical(c2);
            if (canon2 && strcmp(canon, canon2))
                abort();
            free(canon2);
        }
        adm_config_free(c2);
        free(canon);
    }

    rt_table *t = adm_config_build_routes(c, NULL, NULL, NULL, &e);
    if (!t && !e.nomem) {
        char *s = adm_errors_format(&e);
        fprintf(stderr, "a valid config's routes do not build:\n%s", s);
        abort();
    }
    rt_table_free(t);
    adm_errors_clear(&e);
    adm_config_free(c);
    return 0;
}
