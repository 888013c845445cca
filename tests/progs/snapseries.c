/* snapseries.c [SITES [ROUNDS [TRACE]]] -- a trace of many snapshots (ht_snapshot
 * after each round), as `heaptrail run --interval` writes over hours: SITES
 * distinct stacks (default 4000) each keep a 32-byte block live; then each
 * of ROUNDS rounds (default 300) frees and reallocates a block at one of
 * the first 50 sites (live unchanged), leaks 100 bytes from one of 7 sites
 * (round % 7: steady growth), and every 20th round adds a new site (a
 * 48-byte block kept live). No stdio, so libc leaves nothing of its own.
 * Truth for growth over the snapshots: the 7 sites grew by
 * 100 x (ROUNDS - 1) bytes in ROUNDS - 1 blocks in all.
 * With TRACE (the trace's path), round 2's snapshot fails: the file is
 * renamed away while it is written, and back after; the snapshots after
 * it must read as those of a run without the gap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "heaptrail.h"

static void *volatile sink;
static void *blocks[1 << 15];

/* a distinct call path for each value of bits below 1 << depth */
__attribute__((noinline)) static void path(unsigned bits, int depth, size_t size, void **slot)
{
    if (depth == 0) {
        *slot = malloc(size);
        return;
    }
    if (bits & 1)
        path(bits >> 1, depth - 1, size, slot);
    else
        path(bits >> 1, depth - 1, size, slot);
    __asm__ volatile("" ::: "memory");  /* keep the calls out of tail position */
}

__attribute__((noinline)) static void steady(unsigned which)
{
    void *p;
    path(which, 3, 100, &p);
    sink = p;
}

int main(int argc, char **argv)
{
    unsigned sites = argc > 1 ? (unsigned)atoi(argv[1]) : 4000;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 300;
    const char *trace = argc > 3 ? argv[3] : NULL;
    static char away[4096];
    if (sites < 50 || sites > (1u << 14) || (trace && strlen(trace) + 6 > sizeof away))
        return 2;
    if (trace) {
        memcpy(away, trace, strlen(trace));
        memcpy(away + strlen(trace), ".away", 6);
    }
    for (unsigned i = 0; i < sites; i++)
        path(i, 14, 32, &blocks[i]);
    for (unsigned r = 0; r < rounds; r++) {
        unsigned k = r % 50;
        free(blocks[k]);
        path(k, 14, 32, &blocks[k]);
        steady(r % 7);
        if (r % 20 == 19)
            path(sites + r, 15, 48, &blocks[sites + r]);
        int gap = trace && r == 2;
        if (gap && rename(trace, away) != 0)
            return 3;
        if (ht_snapshot() >= 0 && gap)
            return 4;           /* written where no file was */
        if (gap && rename(away, trace) != 0)
            return 3;
    }
    return 0;
}
