/*
 * balance.c - choosing a server: smooth weighted round robin (nginx's),
 * run by each worker on its own current weights.
 */
#include "upstream/up_int.h"

size_t up_pick(up_pool *p, unsigned w)
{
    long long *cw = p->ws[w].cw;
    size_t best = 0;

    if (p->n == 1)
        return 0;
    for (size_t i = 0; i < p->n; i++) {
        cw[i] += p->servers[i].weight;
        if (cw[i] > cw[best])
            best = i;
    }
    cw[best] -= p->total_weight;
    return best;
}
