/* hash.h -- the stack hash shared by every unwinder backend and the stack
 * database. Async-signal-safe, allocation-free.
 *
 * The hash of frames f[0..n) is  fmix64(n * K3 + sum_i mix(f[i]) * R^i)
 * (arithmetic mod 2^64), mix(f) the folded 128-bit product of (f + K1) and
 * K2, R odd. The terms are independent of each other, so the CPU computes
 * them in parallel with the unwinder's dependent loads (a chained mix
 * would add its latency to every frame), and the power of R makes the hash
 * order-dependent: a permutation of the same addresses, or another set
 * with the same address sum, hashes differently (a sum of addresses, what
 * RtlCaptureStackBackTrace returns, does not). The position enters as a
 * factor so that a run of frames known in advance can be summed once and
 * moved to any position with one multiplication: the unwinder keeps, for
 * frames it expects to meet again, prefix sums of mix(f) * R^-x, and adds
 * a verified run as R^e * (difference of two prefix sums). */
#ifndef HT_CORE_HASH_H
#define HT_CORE_HASH_H

#include <stdint.h>

#define HT_HASH_K1 0x9e3779b97f4a7c15ull
#define HT_HASH_K2 0xd6e8feb86659fd93ull
#define HT_HASH_K3 0xc2b2ae3d27d4eb4full
#define HT_HASH_R    0x9fb21c651e98df25ull   /* odd: invertible mod 2^64 */
#define HT_HASH_RINV 0x02ab9c720d1024adull   /* R * RINV == 1 mod 2^64 */

static inline uint64_t ht_hash_mix(uint64_t f)
{
    __uint128_t m = (__uint128_t)(f + HT_HASH_K1) * HT_HASH_K2;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* b^e mod 2^64 */
static inline uint64_t ht_hash_powof(uint64_t b, uint64_t e)
{
    uint64_t r = 1;
    for (; e; e >>= 1, b *= b)
        if (e & 1)
            r *= b;
    return r;
}

/* The term of frame f at position i. Walks keep R^i as a running product
 * instead of calling this for every frame. */
static inline uint64_t ht_hash_term(uint64_t f, uint64_t i)
{
    return ht_hash_mix(f) * ht_hash_powof(HT_HASH_R, i);
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
