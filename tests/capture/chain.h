/* chain.h -- the call-chain programs of the differential capture tests.
 * libchain (chainlib.c) is a separate shared library so that chains cross
 * module boundaries through the PLT in both directions. */
#ifndef HT_TEST_CHAIN_H
#define HT_TEST_CHAIN_H
typedef int (*chain_fn)(int depth, int arg);
/* Calls fn(depth, arg) from inside libchain, through a frame that keeps a
 * few callee-saved registers busy. */
int chainlib_call(chain_fn fn, int depth, int arg);
/* Recurses `depth` times inside libchain, then calls fn(0, arg). */
int chainlib_recurse(chain_fn fn, int depth, int arg);
#endif
