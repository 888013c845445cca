/* custombench.c -- what an announced block costs: 2 million
 * ht_custom_alloc/ht_custom_free pairs 17 calls deep ("custom"), or as
 * many malloc/free pairs of 64 bytes from the same depth (no argument);
 * prints ns a pair. docs/BENCHMARKS.md, "Custom allocators". */
#include "heaptrail.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static char pool[1024 * 64];
static void *volatile sink;
__attribute__((noinline)) static void leaf(int mode, unsigned i)
{
    if (mode) { char *o = pool + (i & 1023) * 64; ht_custom_alloc(o, 64); ht_custom_free(o); sink = o; }
    else { void *p = malloc(64); sink = p; free(p); }
}
__attribute__((noinline)) static void descend(int d, int mode, unsigned i) { if (!d) { leaf(mode, i); return; } descend(d - 1, mode, i); __asm__ volatile("" ::: "memory"); }
int main(int argc, char **argv)
{
    int mode = argc > 1 && !strcmp(argv[1], "custom");
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned i = 0; i < 2000000; i++) descend(15, mode, i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "%s: %.1f ns a pair\n", mode ? "custom" : "malloc", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2e6);
    return 0;
}
