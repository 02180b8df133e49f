/*
 * idle.c - per-worker stacks of idle keep-alive connections, one per
 * server, <keepalive> slots deep, in the server's state (state.c), so the
 * pools sharing that state share them. The pool stores the connections as
 * opaque pointers and never looks inside them; last parked, first reused.
 */
#include "upstream/up_int.h"

#include <string.h>

int up_idle_put(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_sworker *sw = p->ws[w].sw[s];

    if (sw->nidle >= p->keepalive)
        return -1;
    sw->idle[sw->nidle++] = conn;
    return 0;
}

void *up_idle_get(up_pool *p, unsigned w, size_t s)
{
    struct up_sworker *sw = p->ws[w].sw[s];

    if (!sw->nidle)
        return NULL;
    return sw->idle[--sw->nidle];
}

int up_idle_remove(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_sworker *sw = p->ws[w].sw[s];

    for (unsigned i = 0; i < sw->nidle; i++) {
        if (sw->idle[i] == conn) {
            memmove(sw->idle + i, sw->idle + i + 1, (sw->nidle - i - 1) * sizeof(*sw->idle));
            sw->nidle--;
            return 0;
        }
    }
    return -1;
}

size_t up_idle_count(const up_pool *p, unsigned w, size_t s)
{
    return p->ws[w].sw[s]->nidle;
}
