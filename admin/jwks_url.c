/*
 * jwks_url.c - the form of a jwt policy's "jwks_url" (jwks_fetch.h): the
 * config parser's check, and the split the fetcher dials by. Pure string
 * work: the config parser links it without the admin loop (the config
 * fuzzer does).
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */

#include "admin/jwks_fetch.h"

#include <arpa/inet.h>
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
    /* the host goes into the Host field and the TLS name as it is: ASCII
     * letters, digits, '-', '.', '_', no final dot (RFC 6066 3); between
     * brackets, an IPv6 address */
    if (*p == '[') {
        char lit[INET6_ADDRSTRLEN];
        unsigned char a[16];
        size_t n = (size_t)(he - hs);
        if (n >= sizeof(lit) ||
            (memcpy(lit, hs, n), lit[n] = '\0', inet_pton(AF_INET6, lit, a)) != 1) {
            snprintf(err, cap, "\"%s\": between brackets, an IPv6 address", url);
            return -1;
        }
    } else {
        for (pe = hs; pe < he; pe++) {
            char c = *pe;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_')) {
                snprintf(err, cap, "\"%s\": a host name may hold letters, digits, '-', '.' and '_'",
                         url);
                return -1;
            }
        }
        if (he[-1] == '.') {
            snprintf(err, cap, "\"%s\": a host name without its final dot", url);
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
