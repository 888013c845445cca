/* memcost.c -- the agent's memory cost, for bench/agent.sh:
 *   memcost live N     keeps N blocks of 16 bytes from one call site
 *   memcost stacks K   keeps one 16-byte block from each of K = 2^k
 *                      distinct stacks (a binary recursion through two
 *                      functions, k levels deep)
 * and prints its resident set in KiB at the end. Run with and without the
 * agent; the difference divided by N (or K) is the cost per live block
 * (per stack). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void **keep;
static size_t nkeep;

static void rec_a(int depth, unsigned bits);
static void rec_b(int depth, unsigned bits);

__attribute__((noinline)) static void rec(int depth, unsigned bits)
{
    if (depth == 0) {
        keep[nkeep++] = malloc(16);
        return;
    }
    if (bits & 1)
        rec_a(depth - 1, bits >> 1);
    else
        rec_b(depth - 1, bits >> 1);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void rec_a(int depth, unsigned bits) { rec(depth, bits); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void rec_b(int depth, unsigned bits) { rec(depth, bits); __asm__ volatile("" ::: "memory"); }

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * 4;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    size_t n = strtoul(argv[2], NULL, 10);
    keep = calloc(n, sizeof *keep);
    if (!strcmp(argv[1], "live")) {
        for (size_t i = 0; i < n; i++)
            keep[nkeep++] = malloc(16);
    } else {
        int k = 0;
        while ((1ul << k) < n)
            k++;
        for (unsigned b = 0; b < (1u << k); b++)
            rec(k, b);
    }
    printf("%ld\n", rss_kib());
    return 0;
}
