/* hash.c -- ht_stack_hash(), the public face of hash.h. */
#include "heaptrail.h"
#include "hash.h"

uint64_t ht_stack_hash(void *const *frames, int n)
{
    uint64_t sum = 0, rp = 1;
    for (int i = 0; i < n; i++, rp *= HT_HASH_R)
        sum += ht_hash_mix((uint64_t)(uintptr_t)frames[i]) * rp;
    return ht_hash_finish(sum, n < 0 ? 0 : (uint64_t)n);
}
