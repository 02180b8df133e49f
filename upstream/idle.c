/*
 * idle.c - per-worker stacks of idle keep-alive connections, one per
 * server, <keepalive> slots deep. The pool stores the connections as opaque
 * pointers and never looks inside them; last parked, first reused.
 */
#include "upstream/up_int.h"

#include <string.h>

int up_idle_put(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_worker *st = &p->ws[w];

    if (st->nidle[s] >= p->keepalive)
        return -1;
    st->idle[s * p->keepalive + st->nidle[s]++] = conn;
    return 0;
}

void *up_idle_get(up_pool *p, unsigned w, size_t s)
{
    struct up_worker *st = &p->ws[w];

    if (!st->nidle[s])
        return NULL;
    return st->idle[s * p->keepalive + --st->nidle[s]];
}

int up_idle_remove(up_pool *p, unsigned w, size_t s, void *conn)
{
    struct up_worker *st = &p->ws[w];
    void **stack = st->idle + s * p->keepalive;

    for (unsigned i = 0; i < st->nidle[s]; i++) {
        if (stack[i] == conn) {
            memmove(stack + i, stack + i + 1, (st->nidle[s] - i - 1) * sizeof(*stack));
            st->nidle[s]--;
            return 0;
        }
    }
    return -1;
}

size_t up_idle_count(const up_pool *p, unsigned w, size_t s)
{
    return p->ws[w].nidle[s];
}
