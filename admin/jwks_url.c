/*
 * jwks_url.c - the form of a jwt policy's "jwks_url" (jwks_fetch.h): the
 * config parser's check, and the split the fetcher dials by. Pure string
 * work: the config parser links it without the admin loop (the config
 * fuzzer does).
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */

#include "admin/jwks_fetch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admin/etcd_int.h"

int adm_jwks_url_split(const char *url, struct etcd_ep *ep, char **path, char *err, size_t cap)
{
    const char *p, *hs, *he, *after, *pe;
    unsigned long port = 443;

    if (strncasecmp(url, "https://", 8) != 0) {
        snprintf(err, cap, "\"%s\": not an https:// URL", url);
        return -1;
    }
    p = url + 8;
    if (*p == '[') { /* an IPv6 literal */
        hs = p + 1;
        he = strchr(hs, ']');
        after = he ? he + 1 : NULL;
    } else {
        hs = p;
        he = after = p + strcspn(p, ":/?#");
    }
    if (!he || he == hs || memchr(hs, '@', (size_t)(he - hs))) {
        snprintf(err, cap, "\"%s\": expected https://host[:port]/path", url);
        return -1;
    }
    /* the host goes into the Host field and the TLS name as it is */
    for (pe = hs; pe < he; pe++) {
        unsigned char c = (unsigned char)*pe;
        if (!(isalnum(c) || c == '-' || c == '.' || c == '_' || (*p == '[' && c == ':'))) {
            snprintf(err, cap, "\"%s\": a host name may hold letters, digits, '-', '.' and '_'",
                     url);
            return -1;
        }
    }
    if (*after == ':') {
        char *end;
        port = strtoul(after + 1, &end, 10);
        if (end == after + 1 || port == 0 || port > 65535 || (*end && *end != '/' && *end != '?')) {
            snprintf(err, cap, "\"%s\": a bad port", url);
            return -1;
        }
        after = end;
    }
    if (*after && *after != '/' && *after != '?') {
        snprintf(err, cap, "\"%s\": expected https://host[:port]/path", url);
        return -1;
    }
    /* the path goes into the request line as it is */
    for (pe = after; *pe; pe++) {
        if ((unsigned char)*pe <= 0x20 || *pe == 0x7f || *pe == '#') {
            snprintf(err, cap, "\"%s\": a space, control character or fragment in the path", url);
            return -1;
        }
    }
    if (!ep)
        return 0;
    memset(ep, 0, sizeof(*ep));
    ep->url = strdup(url);
    ep->host = strndup(hs, (size_t)(he - hs));
    ep->port = (unsigned)port;
    ep->tls = 1;
    if (*after == '?') {
        *path = malloc(strlen(after) + 2);
        if (*path)
            sprintf(*path, "/%s", after);
    } else {
        *path = strdup(*after ? after : "/");
    }
    if (!ep->url || !ep->host || !*path) {
        free(ep->url);
        free(ep->host);
        free(*path);
        *path = NULL;
        snprintf(err, cap, "out of memory");
        return -1;
    }
    return 0;
}

int adm_jwks_url_check(const char *url, char *err, size_t cap)
{
    return adm_jwks_url_split(url, NULL, NULL, err, cap);
}
