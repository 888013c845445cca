/* capture_bench.c -- stack capture cost, side by side in one run.
 *
 * Builds a call chain of a given depth and, at its leaf, times one capture
 * method many times: ht_capture, a bare frame-pointer walk (the floor; it
 * stops early in code without frame pointers), libunwind's unw_backtrace,
 * glibc's backtrace() and libgcc's _Unwind_Backtrace. Two stack shapes:
 *   repeated: the same call path every capture;
 *   varied:   a different call path every capture (each level picks one of
 *             four functions with different frame layouts from the bits of a
 *             counter), so caches keyed by the previous stack cannot help.
 * Compiled twice by `make bench` (with and without frame pointers). Prints
 * one line per (method, shape, depth): median ns per call and per frame
 * over several rounds, and the frame count each method reached. The varied
 * shape's ns are the run's time less the same run without captures (its
 * random calls mispredict, and vary); its ticks column times each capture
 * alone, in TSC ticks around the call (median of the rounds' means). The
 * last two columns are ratios taken within each round (median over the
 * rounds): ns per frame against the frame-pointer walk's (where that walk
 * reaches the frames), and libunwind's ns per frame against this
 * method's (how many times faster than unw_backtrace).
 *
 * Then the floor of any table-driven walk (bench_floor), and the hash: ns
 * per frame for ht_stack_hash, a sum of addresses, a bytewise crc32 and
 * the SSE4.2 crc32c instruction over 100-frame stacks, and how many of
 * 40,320 permutations of one 8-frame stack each hash merges (a merge = two
 * different stacks with the same hash).
 *
 * Usage: capture_bench [rounds]   (at most MAX_ROUNDS; results go to
 * stdout as a table) */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unwind.h>
#include <nmmintrin.h>
#include <x86intrin.h>
#include "heaptrail.h"

#define MAXF 256
enum { M_HT, M_FP, M_LIBUNWIND, M_BACKTRACE, M_UNWIND, M_COUNT };
static const char *method_name[M_COUNT] = { "ht_capture", "frame-pointer walk", "libunwind unw_backtrace",
                                            "glibc backtrace()", "libgcc _Unwind_Backtrace" };

static int g_method, g_iters, g_frames;
static double g_ns, g_ticks;
static unsigned long long g_tsum;   /* TSC ticks inside the varied shape's captures */
static volatile long sink;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The floor: follow rbp with only the checks that keep it from faulting
 * on this benchmark's own stack (monotonic, aligned, below main's frame). */
static char *g_stack_top;
__attribute__((noinline)) static int fp_walk(void **f, int max)
{
    void **bp = __builtin_frame_address(0);
    int n = 0;
    while (n < max && bp) {
        void **next = (void **)bp[0];
        void *ra = bp[1];
        if (!ra)
            break;
        f[n++] = ra;
        if (next <= bp || ((uintptr_t)next & 7) || (char *)next >= g_stack_top)
            break;
        bp = next;
    }
    return n;
}

/* libgcc's unwinder, looked up in libgcc_s itself: linking libunwind puts
 * its own (much slower) _Unwind_Backtrace first in the global scope. */
static _Unwind_Reason_Code (*gcc_backtrace)(_Unwind_Trace_Fn, void *);
static _Unwind_Ptr (*gcc_getip)(struct _Unwind_Context *);
/* glibc's backtrace(), likewise: libunwind exports a `backtrace` too */
static int (*glibc_backtrace)(void **, int);

struct uw_state { void **f; int n, max; };
static _Unwind_Reason_Code uw_cb(struct _Unwind_Context *ctx, void *arg)
{
    struct uw_state *s = arg;
    if (s->n >= s->max)
        return _URC_END_OF_STACK;
    s->f[s->n++] = (void *)gcc_getip(ctx);
    return _URC_NO_REASON;
}

static int capture(void **f)
{
    switch (g_method) {
    case -1: return 0;   /* baseline: the chain without a capture */
    case M_HT: return ht_capture(0, MAXF, f, NULL);
    case M_FP: return fp_walk(f, MAXF);
    case M_LIBUNWIND: return unw_backtrace(f, MAXF);
    case M_BACKTRACE: return glibc_backtrace(f, MAXF);
    default: {
        struct uw_state s = { f, 0, MAXF };
        gcc_backtrace(uw_cb, &s);
        return s.n;
    }
    }
}

/* ---- repeated shape: one path ---------------------------------------- */

__attribute__((noinline)) static void leaf_repeated(void)
{
    void *f[MAXF];
    int n = 0;
    double t0 = now_ns();
    for (int i = 0; i < g_iters; i++) {
        n = capture(f);
        __asm__ volatile("" ::"r"(f) : "memory");
    }
    g_ns = (now_ns() - t0) / g_iters;
    g_frames = n;
}

__attribute__((noinline)) static void chain(int d)
{
    if (d <= 0) {
        leaf_repeated();
        return;
    }
    volatile char pad[24];
    pad[0] = (char)d;
    chain(d - 1);
    sink += pad[0];
}

/* ---- varied shape: four frame layouts per level ---------------------- */

/* the capture at the innermost level, timed alone too (g_tsum) */
#define VARIED_LEAF()                                                                \
    do {                                                                             \
        void *f[MAXF];                                                               \
        unsigned long long t0 = __rdtsc();                                           \
        g_frames = capture(f);                                                       \
        g_tsum += __rdtsc() - t0;                                                    \
        __asm__ volatile("" ::"r"(f) : "memory");                                    \
    } while (0)
#include "../tests/capture/varied.inc"

#define MAX_ROUNDS 16

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts t[0..n) and returns its median */
static double median_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return t[n / 2];
}

static void run_varied(int depth)
{
    uint64_t x = 88172645463325252ul;
    g_tsum = 0;
    double t0 = now_ns();
    for (int i = 0; i < g_iters; i++) {
        varied(xorshift(&x), depth);
    }
    /* subtract the cost of the calls themselves */
    g_ns = (now_ns() - t0) / g_iters;
    g_ticks = (double)g_tsum / g_iters;
}

/* ---- hashes ------------------------------------------------------------ */

static uint64_t ht_stack_hash_u64(void *const *f, int n)
{
    return ht_stack_hash(f, n);
}

static uint64_t hash_sum(void *const *f, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += (uint64_t)(uintptr_t)f[i];
    return s;
}

static uint32_t crc_table[256];
static uint64_t hash_crc32_bytewise(void *const *f, int n)
{
    uint32_t c = 0xffffffffu;
    const uint8_t *p = (const uint8_t *)f;
    for (size_t i = 0; i < (size_t)n * sizeof(void *); i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

__attribute__((target("sse4.2"))) static uint64_t hash_crc32c_hw(void *const *f, int n)
{
    uint64_t c = ~0ull;
    for (int i = 0; i < n; i++)
        c = _mm_crc32_u64(c, (uint64_t)(uintptr_t)f[i]);
    return c;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- the floor of any table-driven walk --------------------------------
 * Without frame pointers each step must load the return address (at the
 * CFA) before it can look up the rule that gives the next CFA: two
 * dependent loads a frame at the least. This walks synthetic stacks (in
 * L1, four frame sizes at random, a perfect rule table indexed by the
 * return address) doing only that: no bounds, no hash, no rbp rules, no
 * validation. Each walk starts only when the previous one ended, as one
 * capture does. A checked, hashing unwinder cannot step faster. */
#define FLOOR_PATHS 8
static uint64_t floor_stack[FLOOR_PATHS][100 * 48];
static uint64_t floor_rule[1024];

static double floor_walk(int depth)
{
    static const uint64_t code[4] = { 0x401234, 0x402238, 0x40333c, 0x404440 };
    static const uint64_t size[4] = { 32, 320, 48, 64 };   /* the varied shape's frame sizes, about */
    for (int i = 0; i < 4; i++)
        floor_rule[code[i] & 1023] = size[i];
    uint64_t x = 88172645463325252ul;
    for (int p = 0; p < FLOOR_PATHS; p++) {
        uint64_t cfa = 16;
        for (int d = 0; d <= depth; d++) {
            xorshift(&x);
            floor_stack[p][cfa / 8 - 1] = code[x & 3];
            cfa += size[x & 3];
        }
    }
    void *out[128];
    uint64_t cfa = 16;
    const int iters = 200000;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        /* cfa & 1 is 0: it makes this walk wait for the last one */
        const char *s = (const char *)floor_stack[(i + (int)(cfa & 1)) % FLOOR_PATHS];
        cfa = 16;
        for (int d = 0; d < depth; d++) {
            uint64_t ra = *(const uint64_t *)(s + cfa - 8);
            out[d] = (void *)ra;
            cfa += floor_rule[ra & 1023];
        }
        __asm__ volatile("" ::"r"(out) : "memory");
    }
    return (now_ns() - t0) / iters / depth;
}

static void bench_floor(int rounds)
{
    printf("\ntable-walk floor (two dependent loads a frame, nothing else), ns per frame:");
    const int depths[] = { 10, 30, 100 };
    for (int di = 0; di < 3; di++) {
        double t[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            t[r] = floor_walk(depths[di]);
        printf(" depth %d %.2f", depths[di], median_of(t, rounds));
    }
    printf("\n");
}

static void bench_hashes(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    struct { const char *name; uint64_t (*fn)(void *const *, int); } h[] = {
        { "ht_stack_hash", ht_stack_hash_u64 }, { "sum of addresses", hash_sum },
        { "crc32 (bytewise)", hash_crc32_bytewise }, { "crc32c (SSE4.2)", hash_crc32c_hw },
    };
    void *f[100];
    for (int i = 0; i < 100; i++)
        f[i] = (void *)(uintptr_t)(0x555555554000ull + 0x1000 * (unsigned)i + 37 * (unsigned)i);
    /* all permutations of 8 frames */
    enum { N = 8, PERMS = 40320 };
    static uint64_t hv[PERMS];
    printf("\n%-20s %12s %22s\n", "hash", "ns/frame", "merged permutations");
    for (size_t k = 0; k < sizeof h / sizeof h[0]; k++) {
        double t0 = now_ns();
        uint64_t acc = 0;
        for (int it = 0; it < 200000; it++) {
            f[it & 63] = (void *)((uintptr_t)f[it & 63] ^ 16);
            acc += h[k].fn(f, 100);
        }
        double ns = (now_ns() - t0) / 200000 / 100;
        sink += (long)acc;
        int idx[N], count = 0;
        for (int i = 0; i < N; i++)
            idx[i] = i;
        for (;;) {
            void *p[N];
            for (int i = 0; i < N; i++)
                p[i] = f[idx[i]];
            hv[count++] = h[k].fn(p, N);
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
        qsort(hv, PERMS, sizeof hv[0], cmp_u64);
        int merged = 0;
        for (int i = 1; i < PERMS; i++)
            merged += hv[i] == hv[i - 1];
        printf("%-20s %12.3f %15d of %d\n", h[k].name, ns, merged, PERMS);
    }
}

static uint64_t ht_stack_hash_u64(void *const *f, int n);

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    g_stack_top = (char *)__builtin_frame_address(0) + 4096;
    void *gcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    gcc_backtrace = gcc ? (_Unwind_Reason_Code(*)(_Unwind_Trace_Fn, void *))dlsym(gcc, "_Unwind_Backtrace") : NULL;
    gcc_getip = gcc ? (_Unwind_Ptr(*)(struct _Unwind_Context *))dlsym(gcc, "_Unwind_GetIP") : NULL;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    glibc_backtrace = libc ? (int (*)(void **, int))dlsym(libc, "backtrace") : NULL;
    if (!gcc_backtrace || !gcc_getip || !glibc_backtrace) {
        fprintf(stderr, "capture_bench: libgcc_s.so.1 not found\n");
        return 1;
    }
    const int depths[] = { 10, 30, 100 };
    printf("%-26s %-9s %6s %7s %10s %9s %9s %9s %9s %9s\n", "method", "shape", "depth", "frames", "ns/call", "ns/frame",
           "min/frame", "ticks", "/fp walk", "unw / it");
    for (int shape = 0; shape < 2; shape++) {
        for (int di = 0; di < 3; di++) {
            /* The rounds go round-robin over the methods (and, for the
             * varied shape, the chain without a capture), starting one
             * method later each round: this machine changes speed within
             * a run, and all rounds of one method in a row put a change
             * between the rows compared (ht_capture's varied row at
             * depth 10 read 72 ticks in one run and 133 in the next, the
             * frame-pointer walk 41-42 in both). The ratio columns are
             * the median of each round's ratio, taken within the round. */
            double t[M_COUNT][MAX_ROUNDS], tk[M_COUNT][MAX_ROUNDS], base[MAX_ROUNDS];
            int frames[M_COUNT] = { 0 };
            int nm = M_COUNT + shape;   /* the varied shape's baseline is method M_COUNT */
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < nm; k++) {
                    int m = (r + k) % nm;
                    g_method = m == M_COUNT ? -1 : m;
                    int slow = m == M_BACKTRACE || m == M_UNWIND;
                    g_iters = slow ? 2000 : 50000;
                    if (shape == 0)
                        chain(depths[di]);
                    else
                        run_varied(depths[di]);
                    if (m == M_COUNT) {
                        base[r] = g_ns;
                        continue;
                    }
                    t[m][r] = g_ns;
                    tk[m][r] = g_ticks;
                    frames[m] = g_frames;
                }
                if (shape == 1)
                    for (int m = 0; m < M_COUNT; m++)
                        t[m][r] -= base[r];     /* the chain's own cost, this round's */
            }
            for (int m = 0; m < M_COUNT; m++) {
                double vs_fp[MAX_ROUNDS], unw_by[MAX_ROUNDS];
                for (int r = 0; r < rounds; r++) {
                    double per = t[m][r] / frames[m];
                    vs_fp[r] = per / (t[M_FP][r] / frames[M_FP]);
                    unw_by[r] = (t[M_LIBUNWIND][r] / frames[M_LIBUNWIND]) / per;
                }
                /* a sorted copy: the rows after this one pair its rounds */
                double c[MAX_ROUNDS];
                memcpy(c, t[m], sizeof c);
                double med = median_of(c, rounds), lo = c[0];
                printf("%-26s %-9s %6d %7d %10.1f %9.2f %9.2f", method_name[m], shape ? "varied" : "repeated",
                       depths[di], frames[m], med, med / frames[m], lo / frames[m]);
                if (shape == 1)
                    printf(" %9.1f", median_of(tk[m], rounds));
                else
                    printf(" %9s", "-");
                /* against the frame-pointer walk only where it walks
                 * the stack (without frame pointers it stops in a frame
                 * or two) */
                if (frames[M_FP] * 2 >= frames[m])
                    printf(" %8.2fx", median_of(vs_fp, rounds));
                else
                    printf(" %9s", "-");
                printf(" %8.2fx\n", median_of(unw_by, rounds));
                fflush(stdout);
            }
        }
    }
    bench_floor(rounds);
    bench_hashes();
    return 0;
}
