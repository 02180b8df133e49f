/*
 * health.c - one health word per server: (since_ms << 8) | flags, flags
 * saying why it is down (none: up). The owner (checker, ejection logic)
 * writes it with a compare-and-swap, workers read it with relaxed loads, so
 * an ejection is seen by every worker at once. The word lives in the
 * server's state (state.c), which every pool with the server's address may
 * share: so "every server down" is found by looking at the words (it stops
 * at the first server up), not kept as a count that a write through another
 * pool would leave behind.
 */
#include "upstream/up_int.h"

int up_pool_others_down(const up_pool *p, size_t s)
{
    for (size_t i = 0; i < p->n; i++)
        if (i != s && up_hflags(p, i) == 0)
            return 0;
    return 1;
}

int up_health_set(up_pool *p, size_t s, unsigned flag, int on, uint64_t now_ms)
{
    _Atomic uint64_t *h = &p->st[s]->health;
    uint64_t old = atomic_load_explicit(h, memory_order_relaxed), next;
    unsigned was, now;

    do {
        was = (unsigned)(old & UP_FLAG_MASK);
        now = on ? (was | flag) : (was & ~flag);
        /* since_ms moves only when the server goes down or comes back */
        next =
            (!was != !now) ? (now_ms << UP_FLAG_BITS) | now : (old & ~(uint64_t)UP_FLAG_MASK) | now;
    } while (!atomic_compare_exchange_weak_explicit(h, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    if (!was == !now)
        return 0;
    if (now) {
        if (p->lb_ops->server_down)
            p->lb_ops->server_down(p, s);
        return up_pool_all_down(p);
    }
    if (p->lb_ops->server_up)
        p->lb_ops->server_up(p, s);
    return up_pool_others_down(p, s);
}

void up_health_added(up_pool *p, size_t s, uint64_t now_ms)
{
    _Atomic uint64_t *h = &p->st[s]->health;
    uint64_t old = atomic_load_explicit(h, memory_order_relaxed);

    while (!(old & UP_FLAG_MASK) &&
           !atomic_compare_exchange_weak_explicit(h, &old, now_ms << UP_FLAG_BITS,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

unsigned up_health_flags(const up_pool *p, size_t s)
{
    return up_hflags(p, s);
}

uint64_t up_health_since(const up_pool *p, size_t s)
{
    return atomic_load_explicit(&p->st[s]->health, memory_order_relaxed) >> UP_FLAG_BITS;
}

int up_pool_all_down(const up_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (up_hflags(p, i) == 0)
            return 0;
    return 1;
}

int up_pool_panicking(const up_pool *p)
{
    return p->opts.panic && up_pool_all_down(p);
}

unsigned up_slow_start_permille(uint64_t since_ms, uint64_t now_ms, uint64_t ramp_ms)
{
    uint64_t share;

    if (!ramp_ms || now_ms < since_ms || now_ms - since_ms >= ramp_ms)
        return 1000;
    share = (now_ms - since_ms) * 1000 / ramp_ms;
    return share < 100 ? 100 : (unsigned)share;
}
