/* sample.c -- sampling mode (HEAPTRAIL_SAMPLE=BYTES, `heaptrail run
 * --sample BYTES`): a stack for about one allocation in every BYTES
 * allocated, instead of for every one, as tcmalloc's and jemalloc's heap
 * profilers do; cheap enough to leave on.
 *
 * Sample points fall on the stream of bytes each thread allocates as a
 * Poisson process of mean spacing R = BYTES: the distance to the next one
 * is drawn from the exponential distribution, and an allocation of n
 * bytes is sampled when a point falls inside it, with probability
 * p(n) = 1 - exp(-n/R). Such an allocation stands for 1/p(n) allocations
 * of n/p(n) bytes in all (the Horvitz-Thompson estimate: unbiased for
 * every site's figures, whatever its sizes). The site records those
 * estimates, rounded to whole blocks and bytes by a dither taken from the
 * block's address (floor(x + u), u uniform in [0, 1)): unbiased too, and
 * a free, which knows only the address and the size the live table kept,
 * computes the very same figures to take off.
 *
 * Unsampled allocations cost a subtraction from a thread-local counter;
 * unsampled frees one load from a counting filter of the sampled blocks'
 * addresses (64 Ki one-byte counters by address hash: a count of 0 says
 * the block was not sampled; a free that finds one probes the live table,
 * which holds only sampled blocks). A counter that reaches 255 stays
 * there (its frees all probe).
 *
 * Not in sampling mode: the leak check (reachability needs every block),
 * unknown or double frees (a free the table does not know is an unsampled
 * block), 0-byte allocations (no byte for a point to fall on). Mappings
 * (mmap) and the program's own announced blocks (ht_custom_alloc) are
 * still counted one by one. No libm: the logarithm and exponential below
 * are series accurate to ~1e-7, far inside the sampling's own spread. */
#include "agent.h"
#include "../core/hash.h"

HT_TLS int64_t ht__t_sample_left;   /* bytes to this thread's next sample point */
static HT_TLS uint64_t t_rng;       /* xorshift state; 0: not seeded */
uint8_t ht__sample_filter[1u << HT_SAMPLE_FILTER_BITS];
static uint64_t g_seed_serial;

#define LN2 0.69314718055994530942

/* ln(x) for x in (0, 1]: x = m 2^e with m in [1, 2), ln m by the series
 * of atanh((m - 1) / (m + 1)) (t <= 1/3: seven terms leave ~1e-8) */
static double ln_unit(double x)
{
    uint64_t b;
    __builtin_memcpy(&b, &x, 8);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    b = (b & ((1ull << 52) - 1)) | (1023ull << 52);
    double m;
    __builtin_memcpy(&m, &b, 8);
    double t = (m - 1) / (m + 1), t2 = t * t;
    double s = t * (1 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 + t2 * (1.0 / 9 + t2 * (1.0 / 11 + t2 * (1.0 / 13)))))));
    return 2 * s + e * LN2;
}

/* 1 - exp(-x) for x >= 0, without cancellation for small x */
static double one_minus_exp_neg(double x)
{
    if (x < 0.5) {
        /* x - x^2/2! + x^3/3! - ...: eight terms leave < 1e-9 */
        double term = x, s = 0;
        for (int k = 1; k <= 8; k++) {
            s += term;
            term *= -x / (k + 1);
        }
        return s;
    }
    if (x > 40)
        return 1;
    /* exp(-x) = 2^-k exp(-r), r = x - k ln2 in [0, ln2) */
    int k = (int)(x / LN2);
    double r = x - k * LN2, term = 1, e = 0;
    for (int i = 1; i <= 14; i++) {
        e += term;
        term *= -r / i;
    }
    uint64_t b = (uint64_t)(1023 - k) << 52;   /* 2^-k, k <= 57 */
    double pk;
    __builtin_memcpy(&pk, &b, 8);
    return 1 - e * pk;
}

static uint64_t next_rng(void)
{
    uint64_t x = t_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t_rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* bytes to the next sample point: 1 + floor(-R ln u), u in (0, 1] */
static int64_t draw(void)
{
    double u = (double)((next_rng() >> 11) + 1) * (1.0 / 9007199254740992.0);
    double d = -ln_unit(u) * (double)ht__agent.sample;
    return d < 4e18 ? (int64_t)d + 1 : (int64_t)4e18;
}

int ht__sample_slow(size_t n)
{
    if (ht_unlikely(!t_rng)) {
        /* a thread's first allocation: seed, draw, and ask again */
        uint64_t s = ht_hash_mix(__builtin_ia32_rdtsc() ^ (uintptr_t)&t_rng ^
                                 ht_fetch_add(&g_seed_serial, 1) << 32);
        t_rng = s ? s : 1;
        ht__t_sample_left = draw();
        if (n < (size_t)ht__t_sample_left) {
            ht__t_sample_left -= (int64_t)n;
            return 0;
        }
    }
    ht__t_sample_left = draw();     /* memoryless: from the block's end */
    return 1;
}

void ht__sample_weight(uintptr_t p, uint64_t n, uint64_t *blocks, uint64_t *bytes)
{
    double inv = 1 / one_minus_exp_neg((double)n / (double)ht__agent.sample);
    uint64_t h = ht_hash_mix(p);
    double u1 = (double)(h >> 40) * (1.0 / 16777216.0);             /* 24 bits */
    double u2 = (double)(h & 0xffffffu) * (1.0 / 16777216.0);
    *blocks = (uint64_t)(inv + u1);
    *bytes = (uint64_t)((double)n * inv + u2);
}

/* p's filter counter one up or down; one at 255 stays (so does 0, down) */
static void filter_move(uintptr_t p, int up)
{
    uint8_t *c = &ht__sample_filter[ht__sample_slot(p)];
    uint8_t v = ht_load_relaxed(c);
    while (v != 255 && (up || v != 0) &&
           !__atomic_compare_exchange_n(c, &v, (uint8_t)(up ? v + 1 : v - 1), 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

void ht__sample_filter_add(uintptr_t p) { filter_move(p, 1); }

void ht__sample_filter_drop(uintptr_t p) { filter_move(p, 0); }
