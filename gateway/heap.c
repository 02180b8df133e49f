/*
 * heap.c - the admin thread's heap: the reserve touched at start
 * (admin.heap_reserve_mb), and giving back what a large config left once
 * it is freed (malloc_trim). glibc-specific, as the reserve always was.
 */
#define _GNU_SOURCE
#include "gateway/heap.h"
#include "gateway/gateway.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Pages the admin thread touches for the first time cost a fault each, and
 * on a VM a fault costs microseconds: a first push of 10k routes (some
 * 20 MB of parse tree, config and tables) spent more time faulting than
 * working. admin.heap_reserve_mb of heap is touched once at start and kept:
 * freed memory stays in the heap (up to gw_heap_give_back()'s slack) and
 * large blocks come from it too (no mmap of their own). The admin thread
 * touches it itself, before its API opens: pages first touched by another
 * thread measured 30-40 % slower for it to use later on this host
 * (presumably the host places memory near the CPU that first touches it). */
#define HEAP_BLOCK_MB 8
static void heap_reserve(unsigned mb)
{
    size_t n = (mb + HEAP_BLOCK_MB - 1) / HEAP_BLOCK_MB, got = 0;
    char **blocks;

    if (!n || !(blocks = calloc(n, sizeof(*blocks))))
        return;
    /* blocks well below M_MMAP_THRESHOLD come from the main thread's heap,
     * which is the admin thread's; mb is at most 1024 (the config's bound) */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, (int)(mb + 64) << 20);
    for (; got < n; got++) {
        if (!(blocks[got] = malloc((size_t)HEAP_BLOCK_MB << 20)))
            break;
        /* one write per page is all a fault needs */
        for (size_t off = 0; off < (size_t)HEAP_BLOCK_MB << 20; off += 4096)
            ((volatile char *)blocks[got])[off] = 0;
    }
    while (got)
        free(blocks[--got]);
    free(blocks);
}

/* The process's resident bytes (/proc/self/statm), 0 when unknown. Read
 * without allocating. */
static size_t resident_bytes(void)
{
    char buf[128];
    long pages = 0;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "%*s %ld", &pages) != 1 || pages < 0)
        return 0;
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Resident memory beyond what malloc has in use and the heap reserve that
 * the process keeps before it gives the rest back. */
#define HEAP_SLACK ((size_t)64 << 20)

static size_t heap_keep;      /* admin.heap_reserve_mb, in bytes, read at start */
static size_t heap_seen;      /* the resident size at the last look */
static size_t heap_unmovable; /* resident beyond malloc's use that the last trim left */

/* glibc keeps the heap a large config leaves when it is freed: its trim
 * threshold gives back only the top of the heap, and the freed chunks lie
 * below ones still in use (a 1,000,000-route push peaked at 2.4 GB, and
 * 2.2 GB stayed after going back to one route; of a 200,000-route one, 478
 * of 530 MB stayed). When the process holds more than the reserve +
 * HEAP_SLACK resident beyond what malloc has in use, malloc_trim() gives
 * the free pages back and the reserve is touched again. What a trim could
 * not give back (memory malloc does not account for: a sanitizer's
 * allocator, say) raises the bar for the next one, so that none is
 * repeated in vain. Looked at on the admin thread after a snapshot is
 * freed (<freed>), and otherwise when the resident size grew by the slack
 * since the last look (a refused push frees its parse without any
 * snapshot). A look is a read of /proc/self/statm, plus mallinfo2() when it
 * goes on: tens of microseconds. A trim costs 15-35 ms per 100 MB it gives
 * back, and 60-110 ms after a small push (measured: it gives back the
 * reserve, which is then touched again), so only large frees pay it; it
 * locks each malloc arena in turn, the workers' too, and theirs hold
 * little. */
void gw_heap_give_back(int freed)
{
    size_t rss = resident_bytes(), used, extra;
    struct mallinfo2 mi;
    double t0;

    if (!rss || (!freed && rss < heap_seen + HEAP_SLACK)) {
        if (rss && rss < heap_seen)
            heap_seen = rss;
        return;
    }
    heap_seen = rss;
    mi = mallinfo2();
    used = mi.uordblks + mi.hblkhd;
    extra = rss > used ? rss - used : 0;
    if (extra < heap_unmovable)
        heap_unmovable = extra;
    if (extra <= heap_keep + HEAP_SLACK + heap_unmovable)
        return;
    t0 = adm_now_ms();
    malloc_trim(0);
    heap_reserve(heap_keep >> 20);
    heap_seen = resident_bytes();
    heap_unmovable = heap_seen > used + heap_keep ? heap_seen - used - heap_keep : 0;
    gw_log(GW_LOG_INFO, "admin heap: %zu MB given back to the system (%zu MB resident), %.1f ms",
           (rss > heap_seen ? rss - heap_seen : 0) >> 20, heap_seen >> 20, adm_now_ms() - t0);
}

void gw_heap_start(unsigned reserve_mb)
{
    heap_keep = (size_t)reserve_mb << 20;
    heap_reserve(reserve_mb);
    heap_seen = resident_bytes();
}
