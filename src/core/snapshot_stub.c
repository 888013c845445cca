/* snapshot_stub.c -- ht_snapshot() for a program that is not traced: the
 * agent (libheaptrail-preload.so) defines the real one, which wins both
 * when the agent is linked (this one is weak) and when it is preloaded. */
#include "heaptrail.h"

__attribute__((weak)) int ht_snapshot(void) { return -1; }
