/* nocfi.c -- stacks through module code no FDE covers.
 *
 * nocfi_call (nocfi.S) keeps a frame pointer and has no CFI, like V8's
 * builtins inside node's executable or hand-written assembly. The walk
 * leaves such a frame by the frame pointer, and records the step in the
 * thread's trail so later captures replay through it. Three paths reach a
 * capture below nocfi_call -- two without frame pointers, one with them
 * whose alloca changes the frames' places -- taken in runs and
 * interleaved, so captures walk, join and replay trails through the frame;
 * every capture must equal libunwind's (which also falls back to the frame
 * pointer there) and hold the return address inside nocfi_call. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <string.h>
#include "heaptrail.h"
#include "check.h"

void nocfi_call(void (*fn)(long), long arg);

#define MAXF 64
static volatile long sink;
static int mismatches, missing, captures;

static int ra_in_nocfi(void *const *f, int n)
{
    for (int i = 0; i < n; i++)
        if ((char *)f[i] > (char *)nocfi_call && (char *)f[i] < (char *)nocfi_call + 32)
            return 1;
    return 0;
}

__attribute__((noinline)) static void leaf(long k)
{
    void *a[MAXF], *b[MAXF];
    uint64_t h;
    int n = ht_capture(0, MAXF, a, &h);
    int m = unw_backtrace(b, MAXF);
    captures++;
    /* frame 0 of each is its own call site in leaf: compare from 1 */
    if (n != m || n < 2 || memcmp(a + 1, b + 1, (size_t)(n - 1) * sizeof *a) != 0 || h != ht_stack_hash(a, n)) {
        if (mismatches++ < 3) {
            fprintf(stderr, "capture %d (path %ld): ht %d frames, libunwind %d\n", captures, k % 3, n, m);
            for (int i = 0; i < n || i < m; i++)
                fprintf(stderr, "  %2d %p %p\n", i, i < n ? a[i] : NULL, i < m ? b[i] : NULL);
        }
    }
    if (!ra_in_nocfi(a, n))
        missing++;
    sink += n;
}

__attribute__((noinline)) static void path_a(long k)
{
    nocfi_call(leaf, k);
    sink++;
}

__attribute__((noinline)) static void path_b(long k)
{
    long x = sink, y = sink * 3;
    nocfi_call(leaf, k);
    sink += x + y;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void path_c(long k)
{
    volatile char *p = __builtin_alloca(16 + 16 * (k & 7));
    p[0] = 1;
    nocfi_call(leaf, k);
    sink += p[0];
}

int main(void)
{
    void (*const path[3])(long) = { path_a, path_b, path_c };
    /* runs of one path (replays), then paths in turn (joins) */
    for (long k = 0; k < 3000; k++) {
        long which = k < 1500 ? (k / 100) % 3 : k % 3;
        path[which](k * 3 + which);
    }
    CHECK_EQ(captures, 3000);
    CHECK_EQ(mismatches, 0);
    CHECK_EQ(missing, 0);
    return check_done();
}
