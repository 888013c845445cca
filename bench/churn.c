/* churn.c -- a large live set freed and refilled at random: the live
 * table's worst case (every free and malloc lands on a line no recent
 * call touched). By hand: docs/BENCHMARKS.md, "What `heaptrail run` adds
 * over the bare agent, and a fuller narrow table".
 *
 *   build/bench/churn N M    N blocks of 16-128 bytes, then M random
 *                            free + malloc pairs; prints one pointer */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: churn N M\n");
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10), m = strtoul(argv[2], NULL, 10);
    void **p = n ? malloc(n * sizeof *p) : NULL;
    if (!p)
        return 1;
    for (size_t i = 0; i < n; i++)
        p[i] = malloc(16 + (i % 8) * 16);
    uint64_t x = 88172645463325252ull;      /* xorshift64 */
    for (size_t k = 0; k < m; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t i = x % n;
        free(p[i]);
        p[i] = malloc(16 + (k % 8) * 16);
    }
    printf("%p\n", p[x % n]);
    return 0;
}
