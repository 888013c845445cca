/* hash.h -- the stack hash shared by every unwinder backend and the stack
 * database. Async-signal-safe, allocation-free.
 *
 * The hash of frames f[0..n) is  fmix64(n * K3 + sum_i term(f[i], i))  with
 * term(f, i) the folded 128-bit product of (f + (i+1)*K1) and K2. The terms
 * are independent of each other, so the CPU computes them in parallel with
 * the unwinder's dependent loads (a chained mix would add its latency to
 * every frame), and the position in each term makes the hash
 * order-dependent: a permutation of the same addresses, or another set with
 * the same address sum, hashes differently (a sum of addresses, what
 * RtlCaptureStackBackTrace returns, does not). */
#ifndef HT_CORE_HASH_H
#define HT_CORE_HASH_H

#include <stdint.h>

#define HT_HASH_K1 0x9e3779b97f4a7c15ull
#define HT_HASH_K2 0xd6e8feb86659fd93ull
#define HT_HASH_K3 0xc2b2ae3d27d4eb4full

static inline uint64_t ht_hash_term(uint64_t f, uint64_t i)
{
    __uint128_t m = (__uint128_t)(f + (i + 1) * HT_HASH_K1) * HT_HASH_K2;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static inline uint64_t ht_hash_finish(uint64_t sum, uint64_t n)
{
    uint64_t h = sum + n * HT_HASH_K3;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

#endif
