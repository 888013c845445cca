/* newstacks.c -- allocates from a new call stack nearly every time, for
 * SECONDS seconds (argument, default 1): paths of 22 calls through two
 * functions, picked by the bits of a counter, its highest bit outermost
 * (so consecutive stacks share their outer frames: a new stack adds a
 * node or two), 4 million distinct stacks.
 * With --interval snapshots written meanwhile, a snapshot's sites may
 * name stacks made after its nodes were written (tests/agent/lifecycle.sh
 * checks that the trace still reads whole). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *volatile sink;

__attribute__((noinline)) static void path_a(unsigned bits, int depth);
__attribute__((noinline)) static void path_b(unsigned bits, int depth);

static void step(unsigned bits, int depth)
{
    if (depth == 0) {
        void *p = malloc(32);
        sink = p;
        free(p);
        return;
    }
    if (bits >> (depth - 1) & 1)
        path_a(bits, depth - 1);
    else
        path_b(bits, depth - 1);
}

__attribute__((noinline)) static void path_a(unsigned bits, int depth)
{
    step(bits, depth);
    __asm__ volatile("" ::: "memory");   /* not a tail call */
}

__attribute__((noinline)) static void path_b(unsigned bits, int depth)
{
    step(bits, depth);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long n = 0;
    do {
        for (int k = 0; k < 64; k++, n++)
            step((unsigned)n & 0x3fffff, 22);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    printf("CALLS %lu\n", n);
    return 0;
}
