/*
 * servers.c - a pool's server list: addresses copied out of the
 * caller's definitions, and the read-only accessors the gateway uses.
 */
#include "upstream/up_int.h"

#include <stdlib.h>
#include <string.h>

char *up_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d)
        memcpy(d, s, n);
    return d;
}

struct up_server *up_servers_new(const struct up_server_def *defs, size_t n)
{
    struct up_server *servers = calloc(n, sizeof(*servers));

    if (!servers)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        struct up_server *s = &servers[i];
        if (defs[i].salen > sizeof(s->ss) || !(s->address = up_strdup(defs[i].address)))
            goto fail;
        memcpy(&s->ss, defs[i].sa, defs[i].salen);
        s->salen = defs[i].salen;
    }
    return servers;
fail:
    up_servers_free(servers, n);
    return NULL;
}

void up_servers_free(struct up_server *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i].address);
    free(s);
}

size_t up_pool_nservers(const up_pool *p)
{
    return p->n;
}

const char *up_server_address(const up_pool *p, size_t i)
{
    return p->servers[i].address;
}

const struct sockaddr *up_server_sockaddr(const up_pool *p, size_t i, socklen_t *len)
{
    *len = p->servers[i].salen;
    return (const struct sockaddr *)&p->servers[i].ss;
}

int up_pool_set_tags(up_pool *p, const size_t *tags)
{
    if (!p->tags && !(p->tags = calloc(p->n, sizeof(*p->tags))))
        return -1;
    memcpy(p->tags, tags, p->n * sizeof(*p->tags));
    return 0;
}

size_t up_server_tag(const up_pool *p, size_t i)
{
    return p->tags ? p->tags[i] : 0;
}
