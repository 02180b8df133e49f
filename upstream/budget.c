/*
 * budget.c - the retry budget (Envoy's retry_budget): retries in flight may
 * be at most <percent> of all requests in flight, or <floor> when that is
 * more, so that retries cannot multiply an outage's load. Counts attempts:
 * a first attempt starts with up_budget_start, a retry with a successful
 * up_budget_retry, and each ends with up_budget_end.
 *
 * The budget bounds load a retry adds: a request a server already had sent
 * again. A try whose connect failed sent nothing anywhere, so its retry is
 * admitted outside the budget and counts as the first attempt it still is.
 * Otherwise the burst of refused connects when a server dies (every request
 * that picked it in the same instant) would exhaust the floor at once, and
 * those requests fail although no server ever saw them: Envoy counts such
 * retries too, nginx and HAProxy (no budget) pass every one on.
 */
#include "upstream/upstream.h"

void up_budget_set(struct up_budget *b, unsigned percent, unsigned floor)
{
    b->percent = percent ? percent : 20;
    b->floor = floor ? floor : 3;
}

void up_budget_init(struct up_budget *b, unsigned percent, unsigned floor)
{
    up_budget_set(b, percent, floor);
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

int up_budget_retry(struct up_budget *b, int reached)
{
    uint64_t limit;

    if (!reached)
        return 1;
    /* counted with the retry it would start */
    limit = ((uint64_t)b->active + 1) * b->percent / 100;
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
