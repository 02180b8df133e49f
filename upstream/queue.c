/*
 * queue.c - a bounded FIFO of pending requests, each with a deadline: the
 * requests a worker holds while a pool is at max_connections. A ring of
 * <capacity> slots allocated once; nothing is allocated per request. A
 * request queued again keeps the deadline of its first push, which may be
 * earlier than those in front of it, so expiry scans the whole queue (at
 * most <capacity> slots, on the sweep, not per request).
 */
#include "upstream/upstream.h"

#include <stdlib.h>

struct up_queue_slot {
    void *req;
    uint64_t deadline_ms;
};

struct up_queue {
    unsigned cap, head, len;
    struct up_queue_slot *slot;
};

up_queue *up_queue_new(unsigned capacity)
{
    up_queue *q = calloc(1, sizeof(*q));

    if (!q || capacity == 0 || !(q->slot = calloc(capacity, sizeof(*q->slot)))) {
        free(q);
        return NULL;
    }
    q->cap = capacity;
    return q;
}

void up_queue_free(up_queue *q)
{
    if (q)
        free(q->slot);
    free(q);
}

static struct up_queue_slot *at(const up_queue *q, unsigned i)
{
    return &q->slot[(q->head + i) % q->cap];
}

int up_queue_push(up_queue *q, void *req, uint64_t deadline_ms)
{
    struct up_queue_slot *s;

    if (q->len == q->cap)
        return -1;
    s = at(q, q->len++);
    s->req = req;
    s->deadline_ms = deadline_ms;
    return 0;
}

void *up_queue_pop(up_queue *q)
{
    void *req;

    if (!q->len)
        return NULL;
    req = at(q, 0)->req;
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return req;
}

/* Takes out the request at position <i>, closing the gap. */
static void *take(up_queue *q, unsigned i)
{
    void *req = at(q, i)->req;

    for (unsigned j = i + 1; j < q->len; j++)
        *at(q, j - 1) = *at(q, j);
    q->len--;
    return req;
}

void *up_queue_expired(up_queue *q, uint64_t now_ms)
{
    for (unsigned i = 0; i < q->len; i++)
        if (at(q, i)->deadline_ms <= now_ms)
            return i ? take(q, i) : up_queue_pop(q);
    return NULL;
}

int up_queue_remove(up_queue *q, void *req)
{
    for (unsigned i = 0; i < q->len; i++) {
        if (at(q, i)->req == req) {
            take(q, i);
            return 0;
        }
    }
    return -1;
}

unsigned up_queue_len(const up_queue *q)
{
    return q->len;
}

uint64_t up_queue_next_deadline(const up_queue *q)
{
    uint64_t next = 0;

    for (unsigned i = 0; i < q->len; i++)
        if (!next || at(q, i)->deadline_ms < next)
            next = at(q, i)->deadline_ms;
    return next;
}
