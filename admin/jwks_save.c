/*
 * jwks_save.c - a jwks_url's last good document in the state directory
 * (jwks_save.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/jwks_save.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h> /* AT_FDCWD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "admin/file_replace.h"
#include "admin/jwt.h"

/* <dir>/jwks-<hash of fetch_key>.json (with <suffix>) into <out>. */
static int file_name(const char *dir, const char *fetch_key, const char *suffix, char *out,
                     size_t cap)
{
    unsigned char md[32];
    char hex[17];

    if (!EVP_Digest(fetch_key, strlen(fetch_key), md, NULL, EVP_sha256(), NULL))
        return -1;
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return snprintf(out, cap, "%s/jwks-%s.json%s", dir, hex, suffix) < (int)cap ? 0 : -1;
}

char *adm_jwks_saved(const char *dir, const char *fetch_key, size_t *len, double *age_s, char *why,
                     size_t cap)
{
    char path[4096];
    json_error_t e;
    struct stat sb;
    json_t *j, *doc;
    char *out = NULL;

    why[0] = '\0';
    if (!dir || file_name(dir, fetch_key, "", path, sizeof(path)) < 0)
        return NULL;
    if (stat(path, &sb) < 0) {
        if (errno != ENOENT)
            snprintf(why, cap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (sb.st_size > 4 * ADM_JWKS_MAX_BYTES) { /* the JSON string of a 1 MiB document */
        snprintf(why, cap, "%s: too large", path);
        return NULL;
    }
    if (!(j = json_load_file(path, JSON_REJECT_DUPLICATES, &e))) {
        snprintf(why, cap, "%s: %s", path, e.text);
        return NULL;
    }
    doc = json_object_get(j, "doc");
    if (!json_is_string(json_object_get(j, "fetch_key")) ||
        strcmp(json_string_value(json_object_get(j, "fetch_key")), fetch_key) != 0 ||
        !json_is_string(doc)) {
        snprintf(why, cap, "%s: not this URL's", path);
    } else if ((out = malloc(json_string_length(doc) + 1))) {
        *len = json_string_length(doc);
        memcpy(out, json_string_value(doc), *len + 1);
        *age_s = difftime(time(NULL), sb.st_mtime);
        if (*age_s < 0)
            *age_s = 0;
    }
    json_decref(j);
    return out;
}

int adm_jwks_save(const char *dir, const char *fetch_key, const char *url, const char *doc,
                  size_t len, double age_s, char *why, size_t cap)
{
    char path[4096];
    json_t *j = NULL, *d;
    char *js = NULL;
    int ok = 0;

    if (!dir)
        return 0;
    if (file_name(dir, fetch_key, "", path, sizeof(path)) < 0) {
        snprintf(why, cap, "the state directory's name is too long");
        return -1;
    }
    errno = ENOMEM;
    if (!(d = json_stringn(doc, len)))
        errno = EINVAL; /* not UTF-8: the next start fetches */
    else if ((j = json_pack("{s:s,s:s,s:o}", "fetch_key", fetch_key, "url", url, "doc", d)) &&
             (js = json_dumps(j, JSON_COMPACT)))
        ok = adm_file_replace(path, js, strlen(js)) == 0;
    if (ok && age_s >= 1) {
        struct timespec t[2] = {{time(NULL) - (time_t)age_s, 0}, {time(NULL) - (time_t)age_s, 0}};
        utimensat(AT_FDCWD, path, t, 0);
    }
    if (!ok)
        snprintf(why, cap, "cannot write %s: %s", path, strerror(errno));
    free(js);
    json_decref(j);
    return ok ? 0 : -1;
}

int adm_jwks_save_touch(const char *dir, const char *fetch_key)
{
    char path[4096];

    if (!dir || file_name(dir, fetch_key, "", path, sizeof(path)) < 0)
        return 0;
    return utimensat(AT_FDCWD, path, NULL, 0) < 0 ? -1 : 0; /* gone, or not ours: rewrite */
}

void adm_jwks_save_forget(const char *dir, const char *fetch_key)
{
    char path[4096];

    if (dir && file_name(dir, fetch_key, "", path, sizeof(path)) == 0)
        unlink(path);
}

void adm_jwks_save_prune(const char *dir, const char *const *keys, size_t n)
{
    char(*keep)[32] = n ? calloc(n, sizeof(*keep)) : NULL, path[4096];
    struct dirent *e;
    struct stat sb;
    DIR *d;

    if (!dir || (n && !keep) || !(d = opendir(dir))) {
        free(keep);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *slash;
        if (file_name("", keys[i], "", path, sizeof(path)) == 0 && (slash = strrchr(path, '/')))
            snprintf(keep[i], sizeof(keep[i]), "%s", slash + 1);
    }
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        int kept = 0;
        if (strncmp(e->d_name, "jwks-", 5) != 0 || len != 5 + 16 + 5 ||
            strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        for (size_t i = 0; i < n && !kept; i++)
            kept = strcmp(e->d_name, keep[i]) == 0;
        /* only once too old to use: a start without some of its policies
         * (a fleet node before etcd answers) may get them back */
        if (!kept && snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path) &&
            stat(path, &sb) == 0 && difftime(time(NULL), sb.st_mtime) > ADM_JWKS_SAVED_MAX_AGE_S)
            unlink(path);
    }
    closedir(d);
    free(keep);
}
