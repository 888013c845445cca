/* leaks.c -- scripted leaks with a known truth, single-threaded and
 * without stdio (so libc itself leaves nothing live at exit): distinct
 * call sites, sizes and counts, calloc, a realloc chain, the aligned
 * family, strdup, reallocarray, anonymous mmap regions (one released, one with a hole;
 * `reserve`: PROT_NONE reservations; `sized`: C23's sized frees, exit 4 if none). Prints "TRUTH bytes=B blocks=K sites=S" (heap
 * blocks) and "TRUTH_MAP bytes=B regions=R sites=S" (mappings) for the
 * test to compare with `heaptrail run`'s summary line. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t bytes, blocks, sites;            /* heap blocks */
static uint64_t map_bytes, map_regions, map_sites;  /* anonymous mappings */
static int64_t cur, peak;          /* the program's own running live bytes */
static void live(int64_t d) { cur += d; if (cur > peak) peak = cur; }
static void *volatile sink;
static volatile int two = 2;    /* a loop the compiler cannot unroll into two call sites */

#define NOINLINE __attribute__((noinline))

NOINLINE static void leak_small(void) { for (int i = 0; i < 10; i++) { sink = malloc(24); live(24); } bytes += 240; blocks += 10; sites++; }
NOINLINE static void leak_mid(void) { for (int i = 0; i < 5; i++) { sink = malloc(1000); live(1000); } bytes += 5000; blocks += 5; sites++; }
NOINLINE static void leak_big(void) { for (int i = 0; i < two; i++) { sink = malloc(200000); live(200000); } bytes += 400000; blocks += 2; sites++; }
/* through a volatile pointer: gcc removes a plain free(malloc(n)) */
NOINLINE static void no_leak(void) { for (int i = 0; i < 100; i++) { sink = malloc(100 + i); live(100 + i); free(sink); live(-(100 + i)); } }
NOINLINE static void leak_calloc(void) { for (int i = 0; i < 3; i++) { sink = calloc(7, 9); live(63); } bytes += 189; blocks += 3; sites++; }

NOINLINE static void leak_realloc_chain(void)
{
    char *p = malloc(10);
    live(10);
    p = realloc(p, 100);
    live(90);
    p = realloc(p, 1000);
    live(900);
    p = realloc(p, 999);        /* the leak's stack is this last call */
    live(-1);
    sink = p;
    bytes += 999; blocks += 1; sites++;
}

NOINLINE static void leak_aligned(void)
{
    void *p;
    if (posix_memalign(&p, 64, 100) == 0) sink = p;
    sink = aligned_alloc(256, 512);
    sink = memalign(128, 50);
    sink = valloc(300);
    live(100 + 512 + 50 + 300);
    bytes += 100 + 512 + 50 + 300; blocks += 4; sites += 4;
}

NOINLINE static void leak_strdup(void) { sink = strdup("hello world"); live(12); bytes += 12; blocks++; sites++; }
NOINLINE static void leak_reallocarray(void) { sink = reallocarray(NULL, 10, 30); live(300); bytes += 300; blocks++; sites++; }

NOINLINE static void leak_mmap(void)
{
    char *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    live(3 * 65536);
    munmap(r[0], 65536);                /* released */
    munmap(r[1] + 16384, 4096);         /* a hole: two pieces, one block */
    live(-65536 - 4096);
    map_bytes += 65536 + 61440; map_regions += 2; map_sites++;
    /* a file mapping and an anonymous one released at once: not leaks */
    void *f = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    live(4096);
    munmap(f, 4096);
    live(-4096);
}

/* Reserved address space is not memory: a region counts the pages that
 * are accessible, a reservation with none is a region of 0 bytes. Left
 * at exit: 96 KiB in 1 region here, 0 bytes in 1 from a second site.
 * Only with the argument `reserve` (tests/agent/failure.sh runs the
 * program under an address-space limit the agent leaves little of). */
#define KIB 1024
NOINLINE static void leak_reserve(void)
{
    size_t big = 256 * KIB;
    char *r = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return;
    if (mprotect(r + 64 * KIB, 128 * KIB, PROT_READ | PROT_WRITE) != 0)    /* [64K, 192K) */
        _exit(3);
    live(128 * KIB);
    r[64 * KIB] = 1;
    mprotect(r + 96 * KIB, 32 * KIB, PROT_NONE);        /* a hole: [64K, 96K) and [128K, 192K) */
    live(-32 * KIB);
    mprotect(r + 96 * KIB, 32 * KIB, PROT_READ);         /* whole again */
    live(32 * KIB);
    mprotect(r + 64 * KIB, 16 * KIB, PROT_READ | PROT_EXEC);   /* accessible either way: no change */
    mprotect(r, 4 * KIB, PROT_NONE);                     /* reserved either way: no change */
    munmap(r + 160 * KIB, big - 160 * KIB);              /* the tail, 32 KiB of it accessible */
    live(-32 * KIB);
    map_bytes += 96 * KIB; map_regions++; map_sites++;
    /* a reservation nothing was made accessible in */
    if (mmap(NULL, 64 * KIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) != MAP_FAILED) {
        map_regions++;
        map_sites++;
    }
    /* one made accessible through another call's mapping over it, then
     * released whole */
    char *q = mmap(NULL, 128 * KIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return;
    if (mmap(q, 64 * KIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != q)
        _exit(3);
    live(64 * KIB);
    munmap(q, 128 * KIB);
    live(-64 * KIB);
}

/* Declared here: glibc's headers have them from 2.43 on, and a program
 * linked against an older one finds them only in a preloaded library. */
extern void free_sized(void *, size_t) __attribute__((weak));
extern void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));

NOINLINE static void no_leak_sized(void)
{
    if (!free_sized || !free_aligned_sized)
        _exit(4);
    for (int i = 0; i < 6; i++) {
        sink = malloc(40 + i);
        live(40 + i);
        free_sized(sink, 40 + i);
        live(-(40 + i));
        sink = aligned_alloc(64, 128);
        live(128);
        free_aligned_sized(sink, 64, 128);
        live(-128);
    }
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
}

int main(int argc, char **argv)
{
    leak_small();
    leak_mid();
    leak_big();
    no_leak();
    leak_calloc();
    leak_realloc_chain();
    leak_aligned();
    leak_strdup();
    leak_reallocarray();
    leak_mmap();
    if (argc > 1 && !strcmp(argv[1], "reserve"))
        leak_reserve();
    if (argc > 1 && !strcmp(argv[1], "sized"))
        no_leak_sized();
    char buf[256];
    int n = snprintf(buf, sizeof buf,
                     "TRUTH bytes=%llu blocks=%llu sites=%llu\nTRUTH_MAP bytes=%llu regions=%llu sites=%llu\n"
                     "PEAK bytes=%lld\n",
                     (unsigned long long)bytes, (unsigned long long)blocks, (unsigned long long)sites,
                     (unsigned long long)map_bytes, (unsigned long long)map_regions,
                     (unsigned long long)map_sites, (long long)peak);
    return write(1, buf, (size_t)n) == n ? 0 : 1;
}
