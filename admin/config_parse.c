/*
 * config_parse.c - the machinery every config section parses with
 * (admin/config_int.h): the parse context and its JSON pointer, errors
 * reported at that pointer, typed getters, and key tables that fill a
 * struct through offsets or functions and name unknown keys with a "did you
 * mean".
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- small string helpers ---- */

/* Every byte of <s> is alphanumeric or in <extra>; <s> is 1..max bytes. */
int adm_cf_is_name(const char *s, const char *extra, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (; *s; s++)
        if (!is_alnum((unsigned char)*s) && !strchr(extra, *s))
            return 0;
    return 1;
}

const char *adm_cf_quote(struct adm_cf_qbuf *q, const char *s)
{
    size_t o = 0, i = 0;
    q->s[o++] = '"';
    for (; s[i] && i < 60; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            q->s[o++] = '\\';
            q->s[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(q->s + o, 5, "\\x%02x", c);
        } else {
            q->s[o++] = (char)c;
        }
    }
    if (s[i]) {
        /* do not cut a UTF-8 sequence */
        while (o > 1 && ((unsigned char)q->s[o - 1] & 0xc0) == 0x80)
            o--;
        if (o > 1 && ((unsigned char)q->s[o - 1] & 0xc0) == 0xc0)
            o--;
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o++] = '"';
    q->s[o] = '\0';
    return q->s;
}

size_t adm_cf_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 99;
    size_t row[33];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (to_lower(a[i - 1]) != to_lower(b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* ---- the parse context: error list, current JSON pointer ---- */

static int path_reserve(struct adm_cf *x, size_t add)
{
    if (x->plen + add + 1 <= x->pcap)
        return 0;
    size_t cap = x->pcap * 2;
    while (cap < x->plen + add + 1)
        cap *= 2;
    char *p = realloc(x->path, cap);
    if (!p) {
        x->nomem = 1;
        return -1;
    }
    x->path = p;
    x->pcap = cap;
    return 0;
}

/* Appends "/<key>" (escaped per RFC 6901) and returns the previous length
 * for adm_cf_pop(). */
size_t adm_cf_push_key(struct adm_cf *x, const char *key)
{
    size_t mark = x->plen;
    size_t n = strlen(key);
    if (path_reserve(x, 1 + 2 * n) < 0)
        return mark;
    x->path[x->plen++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (key[i] == '~' || key[i] == '/') {
            x->path[x->plen++] = '~';
            x->path[x->plen++] = key[i] == '~' ? '0' : '1';
        } else {
            x->path[x->plen++] = key[i];
        }
    }
    x->path[x->plen] = '\0';
    return mark;
}

size_t adm_cf_push_index(struct adm_cf *x, size_t i)
{
    char buf[32];
    size_t mark = x->plen;
    int n = snprintf(buf, sizeof(buf), "/%zu", i);
    if (path_reserve(x, (size_t)n) < 0)
        return mark;
    memcpy(x->path + x->plen, buf, (size_t)n + 1);
    x->plen += (size_t)n;
    return mark;
}

void adm_cf_pop(struct adm_cf *x, size_t mark)
{
    x->plen = mark;
    x->path[mark] = '\0';
}

ADM_PRINTF(2, 0) static void verr(struct adm_cf *x, const char *fmt, va_list ap)
{
    x->nerr++;
    if (adm_errors_vadd(x->errs, x->path, fmt, ap) < 0)
        x->nomem = 1;
}

/* Reports an error about the value at the current path. */
void adm_cf_err(struct adm_cf *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(x, fmt, ap);
    va_end(ap);
}

/* Reports an error about member <key> of the value at the current path. */
void adm_cf_err_key(struct adm_cf *x, const char *key, const char *fmt, ...)
{
    size_t mark = adm_cf_push_key(x, key);
    va_list ap;
    va_start(ap, fmt);
    verr(x, fmt, ap);
    va_end(ap);
    adm_cf_pop(x, mark);
}

/* Reports an error at an absolute path built from a format. */
void adm_cf_err_at(struct adm_cf *x, const char *path, const char *fmt, ...)
{
    x->nerr++;
    va_list ap;
    va_start(ap, fmt);
    if (adm_errors_vadd(x->errs, path, fmt, ap) < 0)
        x->nomem = 1;
    va_end(ap);
}

void adm_cf_count(struct adm_cf *x, int rc)
{
    if (rc < 0)
        x->nomem = 1;
    else
        x->nerr += (size_t)rc;
}

char *adm_cf_strdup(struct adm_cf *x, const char *s)
{
    char *d = strdup(s);
    if (!d)
        x->nomem = 1;
    return d;
}

void *adm_cf_calloc(struct adm_cf *x, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        x->nomem = 1;
    return p;
}

/* ---- typed getters: each reports its own error and returns failure ---- */

const char *adm_cf_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

int adm_cf_want_object(struct adm_cf *x, const json_t *v)
{
    if (json_is_object(v))
        return 1;
    adm_cf_err(x, "expected an object, got %s", adm_cf_type_name(v));
    return 0;
}

int adm_cf_want_array(struct adm_cf *x, const json_t *v)
{
    if (json_is_array(v))
        return 1;
    adm_cf_err(x, "expected an array, got %s", adm_cf_type_name(v));
    return 0;
}

/* The string value of <v>, or NULL after reporting why not. */
const char *adm_cf_str(struct adm_cf *x, const json_t *v, int nonempty)
{
    if (!json_is_string(v)) {
        adm_cf_err(x, "expected a string, got %s", adm_cf_type_name(v));
        return NULL;
    }
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) {
        adm_cf_err(x, "must not contain NUL characters");
        return NULL;
    }
    if (nonempty && !*s) {
        adm_cf_err(x, "must not be empty");
        return NULL;
    }
    return s;
}

int adm_cf_int(struct adm_cf *x, const json_t *v, long long min, long long max, long long *out)
{
    if (!json_is_integer(v)) {
        adm_cf_err(x, "expected an integer, got %s", adm_cf_type_name(v));
        return -1;
    }
    long long i = json_integer_value(v);
    if (i < min || i > max) {
        adm_cf_err(x, "must be between %lld and %lld (got %lld)", min, max, i);
        return -1;
    }
    *out = i;
    return 0;
}

/* A string naming a file or directory. */
char *adm_cf_pathname(struct adm_cf *x, const json_t *v)
{
    const char *s = adm_cf_str(x, v, 1);
    if (!s)
        return NULL;
    if (strlen(s) > ADM_CF_MAX_PATHNAME) {
        adm_cf_err(x, "path too long (at most %d bytes)", ADM_CF_MAX_PATHNAME);
        return NULL;
    }
    return adm_cf_strdup(x, s);
}

/* ---- key tables ---- */

/* Appends "<name>" to the list of <n> names so far in <list> (of <cap>
 * bytes), after a ", " unless it is the first. */
static void list_add(char *list, size_t cap, size_t n, const char *name)
{
    size_t o = strlen(list);

    snprintf(list + o, cap - o, "%s\"%s\"", n ? ", " : "", name);
}

/* A table of at most this many keys is named whole when an unknown key is
 * close to none of them: the reader sees every choice (a health_check's
 * nine among them). */
#define KEYS_LISTED 10

/* Reports the unknown key <key>: the nearest key of <f> as "did you mean"
 * (a real key winning a tie), or where it belongs when the nearest is a
 * misplaced row, or the whole list when short. Misplaced rows are never
 * offered: writing one is refused. */
static void unknown_key(struct adm_cf *x, const char *key, const struct adm_cf_field *f, size_t nf)
{
    const struct adm_cf_field *best = NULL;
    size_t bestd = 3;
    size_t klen = strlen(key);
    size_t nkeys = 0;
    for (size_t i = 0; i < nf; i++) {
        size_t d = adm_cf_edit_distance(key, f[i].key);
        /* "drain" for "drain_ms", "max_body" for "max_body_bytes" */
        if (klen >= 4 && !strncmp(key, f[i].key, klen))
            d = 1;
        /* "policy" for "policies": the singular, three edits away */
        if (klen >= 4 && key[klen - 1] == 'y' && !strncmp(key, f[i].key, klen - 1) &&
            !strcmp(f[i].key + klen - 1, "ies"))
            d = 1;
        if (d < bestd || (d == bestd && best && best->misplaced && !f[i].misplaced)) {
            bestd = d;
            best = &f[i];
        }
        nkeys += !f[i].misplaced;
    }
    if (best && best->misplaced) {
        adm_cf_err(x, "unknown key (\"%s\" is %s)", best->key, best->misplaced);
    } else if (best) {
        adm_cf_err(x, "unknown key (did you mean \"%s\"?)", best->key);
    } else if (nkeys <= KEYS_LISTED) {
        char list[256] = "";
        size_t n = 0;
        for (size_t i = 0; i < nf; i++)
            if (!f[i].misplaced)
                list_add(list, sizeof(list), n++, f[i].key);
        adm_cf_err(x, "unknown key (one of %s)", list);
    } else {
        adm_cf_err(x, "unknown key");
    }
}

static void apply_field(struct adm_cf *x, const struct adm_cf_field *f, const json_t *v,
                        void *target)
{
    char *base = target;
    long long i;

    if (f->misplaced) {
        adm_cf_err(x, "%s", f->misplaced);
        return;
    }
    switch (f->kind) {
    case FK_UINT:
        if (adm_cf_int(x, v, f->min, f->max, &i) == 0)
            *(unsigned *)(base + f->off) = (unsigned)i;
        break;
    case FK_U64:
        if (adm_cf_int(x, v, f->min, f->max, &i) == 0)
            *(uint64_t *)(base + f->off) = (uint64_t)i;
        break;
    case FK_BOOL:
        if (json_is_boolean(v))
            *(int *)(base + f->off) = json_is_true(v);
        else
            adm_cf_err(x, "expected a boolean, got %s", adm_cf_type_name(v));
        break;
    case FK_PATH: {
        char **slot = (char **)(base + f->off);
        free(*slot);
        *slot = adm_cf_pathname(x, v);
        break;
    }
    case FK_FN:
        f->fn(x, v, target);
        break;
    }
}

/* Parses the members of object <obj> (already checked to be one) into
 * <target> through the table <f>; reports unknown and missing keys. Returns
 * the set of keys present, bit i for f[i]. */
uint32_t adm_cf_fields(struct adm_cf *x, const json_t *obj, const struct adm_cf_field *f, size_t nf,
                       void *target)
{
    uint32_t seen = 0;
    const char *key;
    size_t klen;
    json_t *v;

    json_object_keylen_foreach((json_t *)obj, key, klen, v)
    {
        size_t mark = adm_cf_push_key(x, key);
        size_t i = 0;
        while (i < nf && !(strlen(f[i].key) == klen && !memcmp(f[i].key, key, klen)))
            i++;
        if (i == nf) {
            unknown_key(x, key, f, nf);
        } else {
            seen |= UINT32_C(1) << i;
            apply_field(x, &f[i], v, target);
        }
        adm_cf_pop(x, mark);
    }
    for (size_t i = 0; i < nf; i++)
        if ((f[i].flags & F_REQUIRED) && !(seen & (UINT32_C(1) << i)))
            adm_cf_err_key(x, f[i].key, "missing (required)");
    return seen;
}

/* Picks one of <names> for a string value; -1 after reporting. */
int adm_cf_enum(struct adm_cf *x, const json_t *v, const char *const *names, size_t n)
{
    const char *s = adm_cf_str(x, v, 0);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return (int)i;
    char list[200] = "";
    for (size_t i = 0; i < n; i++)
        list_add(list, sizeof(list), i, names[i]);
    struct adm_cf_qbuf q;
    adm_cf_err(x, "invalid value %s (expected one of %s)", adm_cf_quote(&q, s), list);
    return -1;
}

/* Here, with the parser, rather than in config_lifecycle.c: tls_config.c's
 * file errors name the directory too, and the config fuzzer links the
 * parser's files alone. */
const char *adm_path_where(const char *path, char *buf, size_t cap)
{
    char cwd[4096];
    int saved = errno;

    if (path[0] == '/')
        snprintf(buf, cap, "%s", "");
    else if (getcwd(cwd, sizeof(cwd)))
        snprintf(buf, cap, " (relative to %s, the directory switchyard started in)", cwd);
    else
        snprintf(buf, cap, " (relative to the directory switchyard started in, which is gone)");
    errno = saved;
    return buf;
}

char *adm_read_small_file(const char *path, size_t cap, size_t *len, char *why, size_t why_cap)
{
    FILE *f = fopen(path, "rb");
    char where[4200], *buf;
    size_t n;

    if (!f) {
        snprintf(why, why_cap, "cannot read \"%s\"%s: %s", path,
                 adm_path_where(path, where, sizeof(where)), strerror(errno));
        return NULL;
    }
    if (!(buf = malloc(cap + 1))) {
        snprintf(why, why_cap, "out of memory");
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, cap + 1, f);
    if (ferror(f) || n > cap) {
        if (ferror(f))
            snprintf(why, why_cap, "cannot read \"%s\": %s", path, strerror(errno));
        else if (cap % (1u << 20) == 0)
            snprintf(why, why_cap, "cannot read \"%s\": larger than %zu MiB", path, cap >> 20);
        else
            snprintf(why, why_cap, "cannot read \"%s\": larger than %zu bytes", path, cap);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}
