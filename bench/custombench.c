/* custombench.c -- what custom allocator blocks cost (docs/BENCHMARKS.md,
 * "Custom allocators", "Custom blocks in the leak check"):
 *   custombench [custom]      2 million ht_custom_alloc/ht_custom_free
 *                             pairs 17 calls deep ("custom"), or as many
 *                             malloc/free pairs of 64 bytes from the same
 *                             depth; prints ns a pair
 *   custombench scan N [quiet]  N blocks of 32 bytes announced in 16 KiB
 *                             superblocks, every other one pointed to,
 *                             the rest dropped: the exit check's work
 *                             (REACH time_ns); "quiet" announces nothing
 *   custombench range N       N blocks announced, then 100 calls of
 *                             ht_custom_free_range over memory holding
 *                             none, then one over all N; prints ms */
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
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (double)t.tv_sec + t.tv_nsec / 1e9; }

static void **g_keep, **g_supers;
static int scan(long n, int quiet)
{
    g_keep = calloc((size_t)n, sizeof *g_keep);
    g_supers = calloc((size_t)(n / 512 + 1), sizeof *g_supers);
    char *super = NULL;
    size_t used = 16384, ns = 0;
    for (long i = 0; i < n; i++) {
        if (used + 32 > 16384) {
            g_supers[ns++] = super = malloc(16384);
            used = 0;
        }
        char *o = super + used;
        used += 32;
        if (!quiet)
            ht_custom_alloc(o, 32);
        if (i & 1)
            g_keep[i] = o;
    }
    printf("%ld blocks in %zu superblocks\n", n, ns);
    return 0;
}

static int range(long n)
{
    char *mem = malloc((size_t)n * 16 + 16);
    for (long i = 0; i < n; i++)
        ht_custom_alloc(mem + i * 16, 16);
    static char other[64];
    double t0 = now();
    for (int k = 0; k < 100; k++)
        ht_custom_free_range(other, sizeof other);     /* holds none: the walk alone */
    double t1 = now();
    ht_custom_free_range(mem, (size_t)n * 16);         /* all of them */
    double t2 = now();
    printf("%ld announced: empty range %.3f ms a call; all %ld blocks %.3f ms\n", n, (t1 - t0) / 100 * 1e3, n,
           (t2 - t1) * 1e3);
    free(mem);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "scan"))
        return scan(atol(argv[2]), argc > 3);
    if (argc > 2 && !strcmp(argv[1], "range"))
        return range(atol(argv[2]));
    int mode = argc > 1 && !strcmp(argv[1], "custom");
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned i = 0; i < 2000000; i++) descend(15, mode, i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "%s: %.1f ns a pair\n", mode ? "custom" : "malloc", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2e6);
    return 0;
}
