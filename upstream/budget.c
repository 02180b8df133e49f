/*
 * budget.c - the retry budget (Envoy's retry_budget): retries in flight may
 * be at most <percent> of all requests in flight, or <floor> when that is
 * more, so that retries cannot multiply an outage's load. Counts attempts:
 * a first attempt starts with up_budget_start, a retry with a successful
 * up_budget_retry, and each ends with up_budget_end.
 */
#include "upstream/upstream.h"

void up_budget_init(struct up_budget *b, unsigned percent, unsigned floor)
{
    b->percent = percent ? percent : 20;
    b->floor = floor ? floor : 3;
    b->active = b->retries = 0;
    b->exhausted = 0;
}

void up_budget_start(struct up_budget *b)
{
    b->active++;
}

void up_budget_end(struct up_budget *b, int retry)
{
    b->active--;
    if (retry)
        b->retries--;
}

int up_budget_retry(struct up_budget *b)
{
    /* counted with the retry it would start */
    uint64_t limit = ((uint64_t)b->active + 1) * b->percent / 100;

    if (limit < b->floor)
        limit = b->floor;
    if ((uint64_t)b->retries + 1 > limit) {
        b->exhausted++;
        return -1;
    }
    b->retries++;
    b->active++;
    return 0;
}
