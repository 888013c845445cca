/* hash.c -- ht_stack_hash(), the public face of hash.h. */
#include "heaptrail.h"
#include "hash.h"

uint64_t ht_stack_hash(void *const *frames, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += ht_hash_term((uint64_t)(uintptr_t)frames[i], (uint64_t)i);
    return ht_hash_finish(sum, n < 0 ? 0 : (uint64_t)n);
}
