/* chainlib.c -- the shared-library half of the capture test chains. */
#include "chain.h"

static volatile int sink;

__attribute__((noinline)) int chainlib_call(chain_fn fn, int depth, int arg)
{
    volatile char pad[40];
    pad[0] = (char)arg;
    int r = fn(depth, arg + pad[0]);
    sink += r;
    return r + 1;
}

__attribute__((noinline)) int chainlib_recurse(chain_fn fn, int depth, int arg)
{
    if (depth <= 0)
        return fn(0, arg) + 1;
    int r = chainlib_recurse(fn, depth - 1, arg * 3 + 1);
    sink += r;
    return r + 1;
}
