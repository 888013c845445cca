/* grower.c -- allocation patterns over time for `heaptrail growth` and
 * `diff`, with a snapshot (ht_snapshot) after each of 6 rounds: a steady
 * leak (1000 bytes a round), a cache filled in the first two rounds
 * (4096 each) and then left alone, churn (a 500-byte block allocated one
 * round, freed the next) and a scratch buffer freed within the round.
 * No stdio, so libc leaves nothing of its own live. */
#include <stdlib.h>
#include "heaptrail.h"

static void *volatile sink;
static void *volatile cache[2];
static void *volatile churned;

__attribute__((noinline)) static void steady_leak(void) { sink = malloc(1000); }
__attribute__((noinline)) static void fill_cache(int round) { if (round < 2) cache[round] = malloc(4096); }
__attribute__((noinline)) static void churn(void)
{
    if (churned) {
        free(churned);
        churned = NULL;
    } else {
        churned = malloc(500);
    }
}
__attribute__((noinline)) static void scratch(void)
{
    sink = malloc(8192);
    free(sink);
}

int main(void)
{
    for (int round = 0; round < 6; round++) {
        steady_leak();
        fill_cache(round);
        churn();
        scratch();
        ht_snapshot();
    }
    return 0;
}
