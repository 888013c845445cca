/* sys.c -- the raw system-call layer for linux-x86_64 (see src/core/util.h).
 * Nothing here touches errno or calls into libc, so it is safe inside
 * malloc hooks and signal handlers. */
#include "../../core/util.h"
#include "unwind.h"
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

long ht__syscall6(long n, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* Every mapping heaptrail makes is noted here, so the reachability scan at
 * exit (src/agent/reach.c) can tell the agent's memory (the live table
 * holds every block's address) from the program's. Slots are claimed with
 * a compare-and-swap and released with a store: no lock, so mapping from
 * a signal handler is fine. Mappings are always released whole. */
#define OWN_SLOTS 4096
static struct { uintptr_t start, len; } g_own[OWN_SLOTS];
static unsigned g_own_hint;
static unsigned g_own_top;      /* slots at and above it were never used */
static int g_own_lost;          /* a mapping found no slot */

static void own_add(uintptr_t p, size_t len)
{
    unsigned h = ht_load_relaxed(&g_own_hint);
    for (unsigned k = 0; k < OWN_SLOTS; k++) {
        unsigned i = (h + k) % OWN_SLOTS;
        uintptr_t expect = 0;
        if (ht_load_relaxed(&g_own[i].start) == 0 &&
            __atomic_compare_exchange_n(&g_own[i].start, &expect, p, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            ht_store_release(&g_own[i].len, len);
            ht_store_relaxed(&g_own_hint, i + 1);
            /* a reader of the table touches only the slots in use, not
             * every page of it (16 page faults at each exit's scan) */
            unsigned top = ht_load_relaxed(&g_own_top);
            while (top <= i && !__atomic_compare_exchange_n(&g_own_top, &top, i + 1, 1,
                                                             __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                ;
            return;
        }
    }
    ht_store_relaxed(&g_own_lost, 1);
}

static void own_remove(uintptr_t p)
{
    unsigned top = ht_load_acquire(&g_own_top);
    for (unsigned i = 0; i < top; i++)
        if (ht_load_relaxed(&g_own[i].start) == p) {
            ht_store_relaxed(&g_own[i].len, 0);
            ht_store_release(&g_own[i].start, 0);
            ht_store_relaxed(&g_own_hint, i);
            return;
        }
}

int ht__own_mappings(uintptr_t (*out)[2], int max)
{
    int n = 0;
    unsigned top = ht_load_acquire(&g_own_top);
    for (unsigned i = 0; i < top; i++) {
        uintptr_t s = ht_load_acquire(&g_own[i].start), l = ht_load_acquire(&g_own[i].len);
        if (!s || !l)
            continue;
        if (n == max)
            return -1;
        out[n][0] = s;
        out[n][1] = s + l;
        n++;
    }
    return ht_load_relaxed(&g_own_lost) ? -1 : n;
}

static void *map_flags(size_t size, int flags)
{
    long r = ht__syscall6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (r < 0 && r > -4096)
        return NULL;
    own_add((uintptr_t)r, size);
    return (void *)r;
}

void *ht__map(size_t size) { return map_flags(size, 0); }
void *ht__map_populated(size_t size) { return map_flags(size, MAP_POPULATE); }
void *ht__reserve(size_t size) { return map_flags(size, MAP_NORESERVE); }

/* Read once (the agent asks at start-up): a later look could come after
 * the program sandboxed itself, and a seccomp filter may refuse it. */
uint64_t ht__reserve_allowance(void)
{
    static uint64_t allowance;  /* 0: not read yet */
    uint64_t a = ht_load_relaxed(&allowance);
    if (a)
        return a;
    struct { uint64_t cur, max; } lim;
    if (ht__sys4(SYS_prlimit64, 0, RLIMIT_AS, 0, &lim) != 0 || lim.cur == ~0ull)
        a = UINT64_MAX;
    else
        a = lim.cur / 8 ? lim.cur / 8 : 1;
    ht_store_relaxed(&allowance, a);
    return a;
}

#define HUGE_PAGE (2ul << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14; EINVAL before, and then pages fault as used */
#endif

int ht__sandboxed;

void *ht__map_table(size_t size)
{
    if (size < HUGE_PAGE || ht_load_relaxed(&ht__sandboxed))
        return ht__map_populated(size);
    /* map a huge page more, keep the aligned part: transparent huge pages
     * need 2 MiB-aligned ranges */
    long r = ht__syscall6(SYS_mmap, 0, (long)(size + HUGE_PAGE), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r < 0 && r > -4096)
        return NULL;
    uintptr_t p = (uintptr_t)r, a = (p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (a > p)
        ht__sys2(SYS_munmap, p, a - p);
    if (a + size < p + size + HUGE_PAGE)
        ht__sys2(SYS_munmap, a + size, p + size + HUGE_PAGE - (a + size));
    own_add(a, size);
    ht__sys3(SYS_madvise, a, size, MADV_HUGEPAGE);
    ht__populate((void *)a, size);
    return (void *)a;
}
/* A page fault costs ~14 us on this project's benchmark machine (a
 * virtual machine: each one exits to the hypervisor), a page populated by
 * one madvise ~1.4 us (docs/BENCHMARKS.md, "Page faults"). */
void ht__populate(void *p, size_t size)
{
    if (!size || ht_load_relaxed(&ht__sandboxed))
        return;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = ((uintptr_t)p + size + 4095) & ~(uintptr_t)4095;
    ht__sys3(SYS_madvise, a, e - a, MADV_POPULATE_WRITE);
}

void ht__unmap(void *p, size_t size)
{
    own_remove((uintptr_t)p);
    ht__sys2(SYS_munmap, p, size);
}

/* MAP_NORESERVE memory is usable as soon as it is mapped */
int ht__commit(void *p, size_t size)
{
    (void)p;
    (void)size;
    return 0;
}

int ht__gettid(void) { return (int)ht__sys0(SYS_gettid); }

static HT_TLS uintptr_t t_words[HT_THREAD_WORDS];

uintptr_t *ht__thread_word(unsigned i) { return &t_words[i]; }

int ht__spin_trylock(ht_spinlock_t *l)
{
    return ht_load_relaxed(&l->v) == 0 &&
           __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}

void ht__backoff(unsigned round)
{
    if (round < 64)
        __builtin_ia32_pause();
    else
        ht__sys0(SYS_sched_yield);
}

void ht__spin_lock(ht_spinlock_t *l)
{
    for (unsigned i = 0; !ht__spin_trylock(l); i++)
        ht__backoff(i);
}

void ht__spin_unlock(ht_spinlock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

uint64_t ht__mono_ns(void)
{
    struct timespec ts;
    if (ht__sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
