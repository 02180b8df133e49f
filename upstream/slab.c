/*
 * slab.c - per-worker blocks that never share a cache line: one aligned
 * allocation cut into equal blocks, each a whole number of lines.
 */
#include "upstream/up_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *up_slab_new(unsigned nworkers, size_t bytes, size_t *stride)
{
    size_t line = UP_CACHE_LINE, s;
    void *slab;

    if (nworkers == 0 || bytes > SIZE_MAX - line)
        return NULL;
    s = (bytes + line - 1) / line * line;
    if (s == 0)
        s = line;
    if (s > SIZE_MAX / nworkers)
        return NULL;
    /* aligned_alloc wants a size that is a multiple of the alignment: it is. */
    if (!(slab = aligned_alloc(line, s * nworkers)))
        return NULL;
    memset(slab, 0, s * nworkers);
    *stride = s;
    return slab;
}
