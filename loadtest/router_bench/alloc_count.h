/*
 * alloc_count.h - counts heap allocations made by the benchmark process.
 *
 * alloc_count.c replaces malloc, calloc, realloc, free, posix_memalign and
 * aligned_alloc with thin wrappers around glibc's own allocator, so the
 * router, jansson and libc itself all pass through them. A call is counted
 * only while counting is on, which the benchmark turns on around its timed
 * regions and nowhere else. Single-threaded use only.
 */
#ifndef RB_ALLOC_COUNT_H
#define RB_ALLOC_COUNT_H

#include <stdint.h>

/* Starts and stops counting. Not nested: a stop ends any start. */
void ac_start(void);
void ac_stop(void);

/* Allocating calls (malloc, calloc, realloc, posix_memalign, aligned_alloc)
 * and free calls of non-NULL pointers counted so far, over the whole run. */
uint64_t ac_allocs(void);
uint64_t ac_frees(void);

/* 1 when the wrappers are compiled in, 0 in sanitizer builds (where the
 * sanitizer owns malloc and nothing is counted). */
int ac_enabled(void);

#endif
