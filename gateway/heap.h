/*
 * heap.h - the admin thread's heap (heap.c): a reserve touched at start so
 * that the first big pushes do not fault in every page they use, and
 * giving back to the system what a large config leaves behind once it is
 * freed. Both run on the admin thread only, never on a worker's path.
 */
#ifndef SY_GATEWAY_HEAP_H
#define SY_GATEWAY_HEAP_H

/* Touches <reserve_mb> (admin.heap_reserve_mb) of heap and keeps it: at
 * start, on the admin thread, before its API opens. */
void gw_heap_start(unsigned reserve_mb);
/* Gives freed heap back to the system when the process holds much more
 * than malloc has in use; <freed>: a snapshot was just freed. Cheap when
 * there is nothing to give back: call it after each reclamation that freed
 * a snapshot, and about once a second otherwise. */
void gw_heap_give_back(int freed);

#endif
