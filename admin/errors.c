/*
 * errors.c - error lists (admin/errors.h): appending with a JSON pointer,
 * the cap of ADM_ERRORS_MAX, formatting one a line and as JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void adm_errors_init(struct adm_errors *e)
{
    memset(e, 0, sizeof(*e));
}

void adm_errors_clear(struct adm_errors *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i].path);
        free(e->v[i].msg);
    }
    free(e->v);
    memset(e, 0, sizeof(*e));
}

/* A malloc'd vsnprintf. */
ADM_PRINTF(1, 0) static char *vstrfmt(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

int adm_errors_vadd(struct adm_errors *e, const char *path, const char *fmt, va_list ap)
{
    if (e->n >= ADM_ERRORS_MAX) {
        e->dropped++;
        return 0;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        struct adm_error *v = realloc(e->v, cap * sizeof(*v));
        if (!v)
            goto fail;
        e->v = v;
        e->cap = cap;
    }
    char *p = strdup(path);
    char *m = vstrfmt(fmt, ap);
    if (!p || !m) {
        free(p);
        free(m);
        goto fail;
    }
    e->v[e->n].path = p;
    e->v[e->n].msg = m;
    e->n++;
    return 0;
fail:
    e->nomem = 1;
    return -1;
}

int adm_errors_add(struct adm_errors *e, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = adm_errors_vadd(e, path, fmt, ap);
    va_end(ap);
    return rc;
}

size_t adm_error_format(const struct adm_error *e, char *buf, size_t cap)
{
    int n;
    if (e->path[0])
        n = snprintf(buf, cap, "%s: %s", e->path, e->msg);
    else
        n = snprintf(buf, cap, "%s", e->msg);
    return n < 0 ? 0 : (size_t)n;
}

char *adm_errors_format(const struct adm_errors *e)
{
    size_t total = 1;
    for (size_t i = 0; i < e->n; i++)
        total += adm_error_format(&e->v[i], NULL, 0) + 1;
    char more[64] = "";
    if (e->dropped)
        snprintf(more, sizeof(more), "... and %zu more errors\n", e->dropped);
    total += strlen(more);

    char *s = malloc(total);
    if (!s)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < e->n; i++) {
        off += adm_error_format(&e->v[i], s + off, total - off);
        s[off++] = '\n';
    }
    memcpy(s + off, more, strlen(more) + 1);
    return s;
}

json_t *adm_errors_json(const struct adm_errors *e)
{
    json_t *a = json_array();
    if (!a)
        return NULL;
    for (size_t i = 0; i < e->n; i++) {
        json_t *o = json_pack("{s:s, s:s}", "path", e->v[i].path, "message", e->v[i].msg);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
