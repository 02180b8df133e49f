/*
 * alloc_count.c - malloc-family interposition for router_bench.
 *
 * Defining malloc and friends in the executable makes the dynamic linker bind
 * every caller in the process to these definitions (glibc supports replacing
 * its allocator this way). Each wrapper bumps a counter when counting is on
 * and hands the call to glibc's real allocator through its __libc_* entry
 * points, so memory from either side can be freed by the other. Sanitizer
 * builds define RB_NO_ALLOC_HOOKS and keep the sanitizer's allocator.
 */
#define _POSIX_C_SOURCE 200809L

#include "loadtest/router_bench/alloc_count.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

static int ac_on;
static uint64_t ac_nalloc;
static uint64_t ac_nfree;

void ac_start(void)
{
    ac_on = 1;
}

void ac_stop(void)
{
    ac_on = 0;
}

uint64_t ac_allocs(void)
{
    return ac_nalloc;
}

uint64_t ac_frees(void)
{
    return ac_nfree;
}

#ifdef RB_NO_ALLOC_HOOKS

int ac_enabled(void)
{
    return 0;
}

#else

int ac_enabled(void)
{
    return 1;
}

/* glibc's allocator under its internal names (exported by libc.so.6). */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_memalign(size_t alignment, size_t size);

void *malloc(size_t size)
{
    if (ac_on)
        ac_nalloc++;
    return __libc_malloc(size);
}

void *calloc(size_t nmemb, size_t size)
{
    if (ac_on)
        ac_nalloc++;
    return __libc_calloc(nmemb, size);
}

/* A realloc is counted as one allocating call whatever it does: it is a trip
 * into the allocator either way. realloc(p, 0) still counts. */
void *realloc(void *ptr, size_t size)
{
    if (ac_on)
        ac_nalloc++;
    return __libc_realloc(ptr, size);
}

void free(void *ptr)
{
    if (ac_on && ptr != NULL)
        ac_nfree++;
    __libc_free(ptr);
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    void *p;

    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    if (ac_on)
        ac_nalloc++;
    p = __libc_memalign(alignment, size);
    if (p == NULL)
        return ENOMEM;
    *memptr = p;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size)
{
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    if (ac_on)
        ac_nalloc++;
    return __libc_memalign(alignment, size);
}

#endif
