/* hash.c -- ht_stack_hash: order- and count-sensitive, equal for equal
 * frames, and equal to what ht_capture reports. Sum-of-addresses (what
 * RtlCaptureStackBackTrace returns) is computed alongside to show the
 * stacks it would merge. */
#include <stdlib.h>
#include "heaptrail.h"
#include "check.h"

static uint64_t sum_hash(void *const *f, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += (uint64_t)(uintptr_t)f[i];
    return s;
}

int main(void)
{
    void *a[4] = { (void *)0x401000, (void *)0x402000, (void *)0x403000, (void *)0x404000 };
    void *b[4] = { (void *)0x404000, (void *)0x403000, (void *)0x402000, (void *)0x401000 };
    /* same sum, different addresses */
    void *c[4] = { (void *)0x401800, (void *)0x401800, (void *)0x403000, (void *)0x404000 };

    CHECK(ht_stack_hash(a, 4) == ht_stack_hash(a, 4));
    CHECK(ht_stack_hash(a, 4) != ht_stack_hash(b, 4));
    CHECK(sum_hash(a, 4) == sum_hash(b, 4));        /* the sum merges them */
    CHECK(ht_stack_hash(a, 4) != ht_stack_hash(c, 4));
    CHECK(sum_hash(a, 4) == sum_hash(c, 4));
    CHECK(ht_stack_hash(a, 3) != ht_stack_hash(a, 4));
    CHECK(ht_stack_hash(a, 0) == ht_stack_hash(b, 0));

    /* every permutation of 6 distinct frames gets its own hash */
    enum { N = 6, PERMS = 720 };
    void *base[N];
    for (int i = 0; i < N; i++)
        base[i] = (void *)(uintptr_t)(0x7f0000001000ull + 0x40 * (unsigned)i);
    static uint64_t seen[PERMS];
    int idx[N] = { 0, 1, 2, 3, 4, 5 }, count = 0;
    for (;;) {
        void *f[N];
        for (int i = 0; i < N; i++)
            f[i] = base[idx[i]];
        seen[count++] = ht_stack_hash(f, N);
        /* next permutation (lexicographic) */
        int i = N - 2;
        while (i >= 0 && idx[i] > idx[i + 1])
            i--;
        if (i < 0)
            break;
        int j = N - 1;
        while (idx[j] < idx[i])
            j--;
        int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
        for (int l = i + 1, r = N - 1; l < r; l++, r--) {
            t = idx[l]; idx[l] = idx[r]; idx[r] = t;
        }
    }
    CHECK_EQ(count, PERMS);
    int dups = 0;
    for (int x = 0; x < PERMS; x++)
        for (int y = x + 1; y < PERMS; y++)
            dups += seen[x] == seen[y];
    CHECK_EQ(dups, 0);

    /* ht_capture's hash is ht_stack_hash of exactly the stored frames */
    void *f[64];
    uint64_t h;
    int n = ht_capture(0, 64, f, &h);
    CHECK(n > 2);
    CHECK(h == ht_stack_hash(f, n));
    n = ht_capture(1, 2, f, &h);
    CHECK_EQ(n, 2);
    CHECK(h == ht_stack_hash(f, 2));
    return check_done();
}
