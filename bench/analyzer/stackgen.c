/* stackgen.c -- a program with 2^BITS distinct allocation stacks (default
 * BITS = 20: 1,048,576 stacks, ~25 frames deep), each leaking one block:
 * rec() calls itself from one of two call sites chosen by a bit of the
 * path, so every path is a different chain of return addresses. Traced
 * by heaptrail and by heaptrack for the analyzer benchmark. */
#include <stdlib.h>

static void *volatile sink;
static volatile int sinkv;
static unsigned count;

__attribute__((noinline)) static void leaf(void)
{
    sink = malloc(16 + (count++ & 63));     /* 16..79 bytes */
    sinkv++;
}

__attribute__((noinline)) static void rec(unsigned path, int depth)
{
    if (depth == 0) {
        leaf();
        sinkv++;
        return;
    }
    if (path & 1) {
        rec(path >> 1, depth - 1);
        sinkv += 1;
    } else {
        rec(path >> 1, depth - 1);
        sinkv += 2;
    }
}

int main(int argc, char **argv)
{
    int bits = argc > 1 ? atoi(argv[1]) : 20;
    if (bits < 1 || bits > 24)
        return 2;
    for (unsigned p = 0; p < (1u << bits); p++)
        rec(p, bits);
    return 0;
}
