/* hash.c -- the stack hash on Windows. Stacks that hold the same return
 * addresses in another order, or other addresses with the same sum, are
 * different stacks and must hash differently; a sum of addresses -- what
 * RtlCaptureStackBackTrace's BackTraceHash is -- merges them all.
 *   - all 720 orders of 6 frames of a real captured stack: 720 distinct
 *     64-bit hashes, and 720 distinct 32-bit ones from
 *     ht_CaptureStackBackTrace's fold, while their sums are all equal;
 *   - 20000 pairs of stacks with equal sums: every pair hashes apart;
 *   - ht_capture's and ht_CaptureStackBackTrace's hashes are
 *     ht_stack_hash() of the frames they return, and equal stacks from
 *     different threads hash equally. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "check.h"

static uint32_t fold(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

static int cmp64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void *frames[64];
static int nframes;
static uint64_t capture_hash;
static unsigned long bt_hash;
static void *bt[64];
static int nbt;

__attribute__((noinline)) static void leaf(void)
{
    nframes = ht_capture(0, 64, frames, &capture_hash);
    nbt = ht_CaptureStackBackTrace(0, 64, bt, &bt_hash);
}

__attribute__((noinline)) static void l2(void) { leaf(); __asm__ volatile(""); }
__attribute__((noinline)) static void l3(void) { l2(); __asm__ volatile(""); }
__attribute__((noinline)) static void l4(void) { l3(); __asm__ volatile(""); }
__attribute__((noinline)) static void l5(void) { l4(); __asm__ volatile(""); }

/* Same stack, same hash, from another thread: only the frames from
 * l5 inwards are the same, so compare the hash of those. */
static uint64_t inner_hash;
static DWORD WINAPI thread_main(void *arg)
{
    l5();
    inner_hash = ht_stack_hash(frames, 5);
    return 0;
}

int main(void)
{
    l5();
    CHECK(nframes >= 6);
    CHECK(capture_hash == ht_stack_hash(frames, nframes));
    CHECK(nbt >= 6 && bt_hash == fold(ht_stack_hash(bt, nbt)));
    uint64_t main_inner = ht_stack_hash(frames, 5);
    HANDLE t = CreateThread(NULL, 0, thread_main, NULL, 0, NULL);
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
    CHECK(inner_hash == main_inner);

    /* every order of 6 real frames (Heap's algorithm) */
    static uint64_t h64[720];
    static uint32_t h32[720];
    void *p[6];
    memcpy(p, frames, sizeof p);
    int c[6] = { 0 }, k = 0, i = 0;
    uint64_t sum0 = 0, sums_equal = 1;
    for (int j = 0; j < 6; j++)
        sum0 += (uintptr_t)p[j];
    h64[k] = ht_stack_hash(p, 6);
    h32[k++] = fold(h64[0]);
    while (i < 6) {
        if (c[i] < i) {
            int j = (i & 1) ? c[i] : 0;
            void *tmp = p[j];
            p[j] = p[i];
            p[i] = tmp;
            uint64_t s = 0;
            for (int m = 0; m < 6; m++)
                s += (uintptr_t)p[m];
            sums_equal &= s == sum0;
            h64[k] = ht_stack_hash(p, 6);
            h32[k] = fold(h64[k]);
            k++;
            c[i]++;
            i = 0;
        } else {
            c[i++] = 0;
        }
    }
    CHECK_EQ(k, 720);
    CHECK(sums_equal);
    qsort(h64, 720, sizeof h64[0], cmp64);
    qsort(h32, 720, sizeof h32[0], cmp32);
    int dup64 = 0, dup32 = 0;
    for (int j = 1; j < 720; j++) {
        dup64 += h64[j] == h64[j - 1];
        dup32 += h32[j] == h32[j - 1];
    }
    CHECK_EQ(dup64, 0);
    CHECK_EQ(dup32, 0);
    fprintf(stderr, "720 orders of 6 frames: one address sum, %d distinct 64-bit and %d distinct "
            "32-bit hashes\n", 720 - dup64, 720 - dup32);

    /* pairs with the same sum: move d from one frame to another */
    uint32_t x = 12345;
    int same = 0;
    for (int n = 0; n < 20000; n++) {
        void *a[8], *b[8];
        int len = 2 + n % 7;
        for (int j = 0; j < len; j++) {
            x = x * 1664525u + 1013904223u;
            a[j] = b[j] = (char *)frames[j % nframes] + (x >> 20);
        }
        int u = (int)(x % (uint32_t)len), v = (u + 1 + (int)((x >> 8) % (uint32_t)(len - 1))) % len;
        uintptr_t d = 1 + (x >> 24);
        b[u] = (char *)b[u] + d;
        b[v] = (char *)b[v] - d;
        same += ht_stack_hash(a, len) == ht_stack_hash(b, len);
    }
    CHECK_EQ(same, 0);

    /* informational: what Windows' own hash is here */
    void *w[64];
    ULONG wh = 0;
    USHORT wn = RtlCaptureStackBackTrace(0, 64, w, &wh);
    uint32_t wsum = 0;
    for (int j = 0; j < wn; j++)
        wsum += (uint32_t)(uintptr_t)w[j];
    fprintf(stderr, "RtlCaptureStackBackTrace here: %u frames, BackTraceHash %08lx, their sum %08x\n",
            wn, (unsigned long)wh, wsum);
    return check_done();
}
