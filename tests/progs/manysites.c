/* manysites.c [N] -- N distinct stacks (default 100,000) each allocate a
 * 32-byte block kept live, then one ht_snapshot(): a snapshot of several
 * blocks of the trace (a block holds 512 KiB of records), for writes
 * that fail part-way (tests/agent/fsize.sh). */
#include <stdlib.h>
#include "heaptrail.h"
static void *volatile sink;
__attribute__((noinline)) static void rec(unsigned bits, int d) {
    if (d == 0) { sink = malloc(32); return; }
    if (bits & 1) rec(bits >> 1, d - 1); else { rec(bits >> 1, d - 1); __asm__ volatile(""); }
    __asm__ volatile("" ::: "memory");
}
int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100000;
    for (unsigned i = 0; i < n; i++) rec(i, 17);
    return ht_snapshot() < 0;
}
