/* snapshot_stub.c -- ht_snapshot(), ht_leak_check(), ht_custom_alloc(),
 * ht_custom_free() and ht_custom_free_range() for a program that is not
 * traced: the
 * agent (libheaptrail-preload.so) defines the real one, which wins both
 * when the agent is linked (this one is weak) and when it is preloaded.
 * Windows has no agent yet, and PE cannot export a weak symbol: there the
 * stub is a plain definition. */
#include "heaptrail.h"

#if defined(_WIN32)
int ht_snapshot(void) { return -1; }
long ht_leak_check(void) { return -1; }
void ht_custom_alloc(const void *p, size_t size) { (void)p, (void)size; }
void ht_custom_free(const void *p) { (void)p; }
void ht_custom_free_range(const void *start, size_t len) { (void)start, (void)len; }
#else
__attribute__((weak)) int ht_snapshot(void) { return -1; }
__attribute__((weak)) long ht_leak_check(void) { return -1; }
__attribute__((weak)) void ht_custom_alloc(const void *p, size_t size) { (void)p, (void)size; }
__attribute__((weak)) void ht_custom_free(const void *p) { (void)p; }
__attribute__((weak)) void ht_custom_free_range(const void *start, size_t len) { (void)start, (void)len; }
#endif
