/* hooks.c -- the interposed allocator family: malloc, calloc, realloc,
 * reallocarray, free, free_sized and free_aligned_sized (C23), memalign,
 * posix_memalign, aligned_alloc, valloc, pvalloc, malloc_usable_size; C++ operator new/delete in every variant;
 * anonymous mmap/munmap/mremap and mprotect over them; exec, _exit, _Exit and quick_exit (for the final
 * snapshot); the set-id calls, chroot, unshare and setns (the trace file
 * is opened first, the control thread kept out of the way), stat calls
 * on /proc/self/task and streams of /proc/self/stat and status, fopen to
 * fclose (a thread count: the control thread kept out); sigaction
 * (queries do not see the agent's crash handler); raise and kill (one
 * that ends the process writes the last snapshot); prctl and syscall, for a seccomp
 * filter about to go on (the end).
 *
 * Each hook calls the next definition (dlsym(RTLD_NEXT), so a malloc
 * replacement loaded after us keeps working) and then records: capture
 * the stack into an on-stack array, intern it, account it to its site,
 * store the block in the live table. Frees are recorded before the real
 * free, so the address cannot be handed out again before we forget it.
 * The per-thread guard (initial-exec TLS) is checked before anything
 * else: a hook entered while this thread already runs agent code (a signal
 * handler that allocates, our own calls into libc) passes straight
 * through. dlsym's own allocations before the real functions are known
 * come from a static bootstrap arena and are never passed to libc.
 *
 * Never allocates, never takes a lock across a call into libc, never
 * changes errno or the result the program sees. */
#include "agent.h"
#include "../format/trace.h"
#include "../platform/linux-x86_64/unwind.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

HT_TLS int ht__guard;           /* 1: agent code running; 2: agent's own libc calls */
static HT_TLS int t_resolving;

/* ---- the real functions ------------------------------------------------ */

static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    int (*mprotect)(void *, size_t, int);
    int (*pkey_mprotect)(void *, size_t, int, int);
    void (*quick_exit)(int);
    void (*exit_)(int);
    void (*Exit_)(int);
    void (*exit)(int);
    int (*prctl)(int, ...);
    int (*epoll_create)(int);
    int (*epoll_create1)(int);
    int (*sigaltstack)(const stack_t *, stack_t *);
    long (*syscall)(long, ...);
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    int (*raise)(int);
    int (*kill)(pid_t, int);
} real;

static ht_spinlock_t g_resolve_lock;

static HT_NOINLINE void resolve(void)
{
    if (t_resolving)
        return;
    ht__spin_lock(&g_resolve_lock);
    /* Every name looked up here exists in every libc the agent supports:
     * a dlsym that fails allocates its error record, and a program that
     * brings its own allocator gets that call, perhaps while it holds its
     * allocator's lock. chromium's PartitionAlloc, setting itself up under
     * a spinlock, makes a syscall() (the first hook it meets), and the
     * lookup of glibc 2.43's free_sized here left it spinning for good.
     * Names libc may lack are looked up at their hooks' first call
     * (optional_next). dlsym's own blocks otherwise (the first hook call
     * may come from another preloaded library's constructor, before the
     * agent's has raised the guard) are the agent's. */
    int g = ht__guard;
    ht__guard = 2;
    if (!real.free) {
        t_resolving = 1;
#define R(f, name) real.f = (__typeof__(real.f))ht__next_def(name)
        R(calloc, "calloc");
        R(malloc, "malloc");
        R(realloc, "realloc");
        R(memalign, "memalign");
        R(posix_memalign, "posix_memalign");
        R(aligned_alloc, "aligned_alloc");
        R(valloc, "valloc");
        R(pvalloc, "pvalloc");
        R(malloc_usable_size, "malloc_usable_size");
        R(mmap, "mmap");
        R(munmap, "munmap");
        R(mremap, "mremap");
        R(mprotect, "mprotect");
        R(pkey_mprotect, "pkey_mprotect");
        R(exit_, "_exit");
        R(Exit_, "_Exit");
        R(quick_exit, "quick_exit");
        R(exit, "exit");
        R(prctl, "prctl");
        R(epoll_create, "epoll_create");
        R(epoll_create1, "epoll_create1");
        R(sigaltstack, "sigaltstack");
        R(syscall, "syscall");
        R(sigaction, "sigaction");
        R(raise, "raise");
        R(kill, "kill");
#undef R
        void (*f)(void *) = (void (*)(void *))ht__next_def("free");
        ht_store_release(&real.free, f);
        t_resolving = 0;
    }
    ht__guard = g;
    ht__spin_unlock(&g_resolve_lock);
}

#define NEED(f) \
    do { \
        if (ht_unlikely(!real.f)) \
            resolve(); \
    } while (0)

/* ---- allocators that are not ours --------------------------------------- */

/* A program can bring its own allocator: chromium exports PartitionAlloc's
 * malloc and free from its executable, and a statically linked tcmalloc or
 * jemalloc does the same. The executable comes before any preloaded
 * library in the lookup order, so its calls (and libc's) bind to its own
 * functions and never reach these hooks: heaptrail would report a heap
 * without a block. Asks the loader what each intercepted name binds to
 * and reports the names defined elsewhere than in this library.
 *
 * Not a definition: a non-PIE program that takes a function's address
 * (cc1plus passes `free` around) gets a canonical PLT entry, an undefined
 * symbol whose value is its PLT stub, and the loader hands out the stub
 * as the function's address; calls through it still reach the hook.
 * dladdr1() names that symbol too: a definition is a symbol it finds
 * exactly at the address that is not undefined. */
static int from_std_library(const char *path)
{
    const char *base = ht__path_base(path);
    return !strncmp(base, "libc.so", 7) || !strncmp(base, "libstdc++.so", 12);
}

uint32_t ht__foreign_allocator(const char **module)
{
    struct dl_find_object me, fo;
    uint32_t bits = 0;
    *module = NULL;
    if (_dl_find_object((void *)resolve, &me) != 0)
        return 0;
    for (unsigned i = 0; i < HT_FOREIGN_COUNT; i++) {
        void *f = dlsym(RTLD_DEFAULT, HT_FOREIGN[i].symbol);
        if (!f)
            continue;
        int found = _dl_find_object(f, &fo) == 0;
        Dl_info di;
        const ElfW(Sym) *sym = NULL;
        /* attached, the names bind to the C or C++ library (the hooks take
         * their slots, attach.c): only another definition is foreign */
        if (ht__attached && found && fo.dlfo_link_map && from_std_library(fo.dlfo_link_map->l_name))
            continue;
        if ((found && fo.dlfo_link_map == me.dlfo_link_map) ||
            !dladdr1(f, &di, (void **)&sym, RTLD_DL_SYMENT) || di.dli_saddr != f || !sym ||
            sym->st_shndx == SHN_UNDEF)
            continue;
        bits |= 1u << i;
        if (!*module && found && fo.dlfo_link_map)
            *module = fo.dlfo_link_map->l_name;
    }
    return bits;
}

/* ---- bootstrap arena --------------------------------------------------- */

static char g_boot[256 << 10] __attribute__((aligned(64)));
static size_t g_boot_used;

static HT_ALWAYS_INLINE int is_boot(const void *p)
{
    return (const char *)p >= g_boot && (const char *)p < g_boot + sizeof g_boot;
}

/* Zeroed memory from the static arena, 16-byte header holding the size. */
static void *boot_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    size_t off = ht_load_relaxed(&g_boot_used), start, end;
    do {
        start = (off + 16 + align - 1) & ~(align - 1);
        end = start + n;
        if (end > sizeof g_boot || end < start)
            return NULL;
    } while (!__atomic_compare_exchange_n(&g_boot_used, &off, end, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    *(size_t *)(g_boot + start - 8) = n;
    return g_boot + start;
}

static size_t boot_size(const void *p) { return *(const size_t *)((const char *)p - 8); }

void ht__boot_range(uintptr_t *lo, uintptr_t *hi)
{
    *lo = (uintptr_t)g_boot;
    *hi = (uintptr_t)g_boot + ht_load_relaxed(&g_boot_used);
}

/* ---- recording --------------------------------------------------------- */

/* The site of frames[0..nf) for an allocation of `kind`, NULL if out of
 * memory. memo (ht__capture_memo), when the stack was replayed whole from
 * a trail, keeps that site's record number + 1 for the trail's next
 * replay, which then needs neither the stack database nor the site index
 * (sqlite3: 654,000 of 655,000 allocations). The word belongs to the
 * trail, not to a hook, so the site's kind is checked: every caller
 * records heap blocks today, and a caller recording mappings must not
 * take a heap site (or the other way round) for the same stack. */
static HT_ALWAYS_INLINE ht_site_t *site_of(void **frames, int nf, uint64_t hash, uint32_t *memo, int kind)
{
    ht_site_t *s;
    if (memo && *memo && (s = ht__site_by_index(*memo - 1))->kind == kind) {
        ht__capture_release();
        return s;
    }
    uint32_t id = ht__stackdb_intern(frames, nf, hash);
    if (ht_unlikely(id == HT_STACK_ID_OVERFLOW))
        ht_fetch_add(&ht__drops.overflow_allocs, 1);
    s = ht__site_get(id, kind);
    if (memo) {
        if (s && id != HT_STACK_ID_OVERFLOW)
            *memo = ht__site_index(s) + 1;
        ht__capture_release();
    }
    return s;
}

/* Zeroes the scratch registers before a record returns to the program:
 * the live table's probes leave other blocks' addresses there, and a
 * program's variadic call (printf, syscall) stores all six argument
 * registers in its frame, where a stale address can outlive the call in
 * a slot no later frame writes -- and make a lost block look reachable
 * to the leak check (see syscall() below). No cost measured. */
#if defined(__x86_64__)
#define SCRUB_REGS() \
    __asm__ volatile("xor %%eax, %%eax\n\txor %%ecx, %%ecx\n\txor %%edx, %%edx\n\txor %%esi, %%esi\n\t" \
                     "xor %%edi, %%edi\n\txor %%r8d, %%r8d\n\txor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\t" \
                     "xor %%r11d, %%r11d" ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")
#else
#define SCRUB_REGS() ((void)0)
#endif

/* The block this thread allocated last, until the thread's next free:
 * a free of that very block is a temporary allocation (heaptrack's
 * definition). One TLS store an allocation, a load and a compare a free.
 * Kept complemented: the thread's TLS is a root of the leak check, and
 * the address as it is kept the thread's last block reachable (a lost
 * one read as held in tests/agent/reach.sh). */
static HT_TLS uintptr_t t_last;     /* ~address; 0: none */

/* A free (or realloc) of p: was p this thread's last allocation? Forgets
 * it either way. */
static HT_ALWAYS_INLINE int freed_last(const void *p)
{
    int temp = ~(uintptr_t)p == t_last;
    t_last = 0;
    return temp;
}

/* The figures a heap block at p of n bytes stands for: itself, or in
 * sampling mode what its sample estimates (sample.c). An allocation and
 * its free compute the same. */
static HT_ALWAYS_INLINE uint64_t block_weight(const void *p, uint64_t n, uint64_t *bytes)
{
    if (ht_likely(!ht__agent.sample)) {
        *bytes = n;
        return 1;
    }
    uint64_t blocks;
    ht__sample_weight((uintptr_t)p, n, &blocks, bytes);
    return blocks;
}

/* Takes a block that left the live table off its site's figures. */
static HT_ALWAYS_INLINE void site_free_block(uint32_t site, const void *p, uint64_t n, int temp)
{
    uint64_t bytes, blocks = block_weight(p, n, &bytes);
    if (ht_unlikely(ht__agent.sample))
        ht__sample_filter_drop((uintptr_t)p);
    ht__site_free(ht__site_by_index(site), blocks, bytes, temp);
}

static HT_NOINLINE void record_alloc(void *p, size_t n, int kind, void **frames, int nf,
                                     uint64_t hash, uint32_t *memo)
{
    t_last = ~(uintptr_t)p;
    ht__note_acted();
    ht_site_t *s = site_of(frames, nf, hash, memo, kind);
    if (ht_unlikely(!s))
        return;
    int solo = ht__solo_enter();
    /* count first: a free on another thread can only find the block once
     * it is in the live table, so counts never go below zero */
    uint64_t bytes, blocks = block_weight(p, n, &bytes);
    ht__site_alloc(s, blocks, bytes);
    if (ht_unlikely(ht__agent.sample))
        ht__sample_filter_add((uintptr_t)p);
    uint32_t osite;
    uint64_t osize;
    int rc = ht__live_insert((uintptr_t)p, n, ht__site_index(s), &osite, &osize);
    if (ht_unlikely(rc != 0)) {
        if (rc < 0) {
            if (ht_unlikely(ht__agent.sample))
                ht__sample_filter_drop((uintptr_t)p);
            ht__site_release(s, blocks, bytes);
        } else {
            /* the address was released without our knowing (a free made
             * while this thread's guard was up): retire the stale entry */
            site_free_block(osite, p, osize, 0);
            ht_fetch_add(&ht__drops.reentrant, 1);
        }
    }
    ht__solo_exit(solo);
    SCRUB_REGS();
}

static HT_NOINLINE void record_free(void *p)
{
    uint64_t size;
    uint32_t site;
    ht__note_acted();
    int solo = ht__solo_enter();
    int temp = freed_last(p);
    if (ht__live_remove((uintptr_t)p, &size, &site))
        site_free_block(site, p, size, temp);
    else if (ht_likely(!ht__agent.sample))     /* sampling: an unsampled block sharing a filter slot */
        ht_fetch_add(&ht__drops.unknown_frees, 1);
    ht__solo_exit(solo);
    SCRUB_REGS();
}

static HT_NOINLINE void note_reentry(void)
{
    if (ht__guard == 1)
        ht_fetch_add(&ht__drops.reentrant, 1);
}

/* Cost-split modes for the benchmarks only (HEAPTRAIL_BENCH_MODE, see
 * agent.c): hooks only, capture only, capture with interning and finding
 * the site, bookkeeping without capture. The stacks are the full agent's
 * (skip 2: this function's frame and the hook's): with the hook's frame
 * on top, their innermost states differed from the full agent's, and
 * replays that failed there succeeded here, which hid what the full
 * agent paid. */
static HT_NOINLINE void bench_track(void *p, size_t n, int kind)
{
    void *frames[HT_MAX_FRAMES];
    uint64_t hash;
    ht__guard = 1;
    if (ht__agent.on == HT_ON_CAPTURE_ONLY) {
        ht_capture(2, ht__agent.max_frames, frames, &hash);
    } else if (ht__agent.on == HT_ON_INTERN_ONLY) {
        uint32_t *memo;
        int nf = ht__capture_memo(2, ht__agent.max_frames, frames, &hash, &memo);
        site_of(frames, nf, hash, memo, kind);
    } else if (ht__agent.on == HT_ON_NO_CAPTURE)
        record_alloc(p, n, kind, NULL, 0, ht_stack_hash(NULL, 0), NULL);
    ht__guard_leave();
}

/* Records the block `p` of `n` bytes returned by the hook this expands in,
 * the guard already up: frames[0] would be the return address into the
 * hook, so skip 1. */
#define RECORD(p, n, kind) \
    do { \
        void *frames_[HT_MAX_FRAMES]; \
        uint64_t hash_; \
        uint32_t *memo_; \
        int nf_ = ht__capture_memo(1, ht__agent.max_frames, frames_, &hash_, &memo_); \
        record_alloc((p), (n), (kind), frames_, nf_, hash_, memo_); \
    } while (0)

/* The same for a hook whose guard is down: raises it around the record. */
#define TRACK(p, n, kind) \
    do { \
        if (ht_likely((p) != NULL)) { \
            if (ht_likely(!ht__guard)) { \
                if (ht_likely(ht__agent.on == HT_ON_FULL)) { \
                    if (ht_unlikely(ht__agent.sample) && !ht__sampled(n)) { \
                        t_last = 0; \
                    } else { \
                        ht__guard = 1; \
                        ht__live_prefetch((uintptr_t)(p)); \
                        RECORD((p), (n), (kind)); \
                        ht__guard_leave(); \
                    } \
                } else if (ht__agent.on) { \
                    bench_track((p), (n), (kind)); \
                } \
            } else { \
                note_reentry(); \
            } \
        } \
    } while (0)

#define UNTRACK(p) \
    do { \
        if (ht_likely(!ht__guard)) { \
            if (ht_likely(ht__agent.on == HT_ON_FULL || ht__agent.on == HT_ON_NO_CAPTURE)) { \
                if (ht_unlikely(ht__agent.sample) && !ht__sample_maybe(p)) { \
                    t_last = 0; \
                } else { \
                    ht__guard = 1; \
                    record_free(p); \
                    ht__guard_leave(); \
                } \
            } \
        } else { \
            note_reentry(); \
        } \
    } while (0)

/* ---- the C allocator --------------------------------------------------- */

HT_API void *malloc(size_t n)
{
    NEED(malloc);
    if (ht_unlikely(!real.malloc))
        return boot_alloc(n, 16);
    void *p = real.malloc(n);
    TRACK(p, n, HT_KIND_HEAP);
    return p;
}

/* free's part before libc's: 0 if there is nothing to pass on (NULL, or
 * a bootstrap block, never libc's); else the block has left the live
 * table, and the real functions are known */
static HT_ALWAYS_INLINE int untrack_free(void *p)
{
    if (ht_unlikely(p == NULL || is_boot(p)))
        return 0;
    UNTRACK(p);
    NEED(free);
    return 1;
}

HT_API void free(void *p)
{
    if (untrack_free(p) && ht_likely(real.free != NULL))
        real.free(p);
}

/* ---- the program's own allocators (include/heaptrail.h) ---------------- */

/* Blocks a pool or arena hands out, announced by the program: their own
 * sites (kind custom) and table (custom.c), never the heap's figures or
 * the process's totals, since the pool's memory is counted already. The
 * stack is the announcing call's, as a malloc hook's is malloc's caller's. */
static HT_NOINLINE void record_custom(const void *p, size_t n, void **frames, int nf, uint64_t hash,
                                      uint32_t *memo)
{
    ht__note_acted();
    t_last = 0;     /* an allocation in between: the heap block before is not temporary */
    ht_site_t *s = site_of(frames, nf, hash, memo, HT_KIND_CUSTOM);
    if (ht_unlikely(!s))
        return;
    int solo = ht__solo_enter();
    ht__site_custom_alloc(s, n);
    uint32_t osite;
    uint64_t osize;
    int rc = ht__custom_insert((uintptr_t)p, n, ht__site_index(s), &osite, &osize);
    if (ht_unlikely(rc < 0))
        ht__site_custom_free(s, n);
    else if (rc > 0)
        ht__site_custom_free(ht__site_by_index(osite), osize);
    ht__solo_exit(solo);
    SCRUB_REGS();
}

/* Whether an announcement of p is recorded: raises the guard if so (a
 * call made while the agent runs on this thread is dropped, counted) */
static HT_ALWAYS_INLINE int custom_enter(const void *p)
{
    if (ht_unlikely(p == NULL))
        return 0;
    if (ht_unlikely(ht__guard)) {
        note_reentry();
        return 0;
    }
    if (ht__agent.on != HT_ON_FULL)
        return 0;
    ht__guard = 1;
    return 1;
}

HT_API void ht_custom_alloc(const void *p, size_t size)
{
    if (!custom_enter(p))
        return;
    void *frames[HT_MAX_FRAMES];
    uint64_t hash;
    uint32_t *memo;
    /* skip 1: frames[0] would be the return address into this function */
    int nf = ht__capture_memo(1, ht__agent.max_frames, frames, &hash, &memo);
    record_custom(p, size, frames, nf, hash, memo);
    ht__guard_leave();
}

HT_API void ht_custom_free(const void *p)
{
    if (!custom_enter(p))
        return;
    ht__note_acted();
    t_last = 0;
    uint64_t size;
    uint32_t site;
    int solo = ht__solo_enter();
    if (ht__custom_remove((uintptr_t)p, &size, &site))
        ht__site_custom_free(ht__site_by_index(site), size);
    else
        ht_fetch_add(&ht__drops.unknown_frees, 1);
    ht__solo_exit(solo);
    SCRUB_REGS();
    ht__guard_leave();
}

static void custom_ended(uint32_t site, uint64_t size)
{
    ht__site_custom_free(ht__site_by_index(site), size);
}

HT_API void ht_custom_free_range(const void *start, size_t len)
{
    if (!len || !custom_enter(start))
        return;
    ht__note_acted();
    t_last = 0;
    uintptr_t lo = (uintptr_t)start, hi = lo + len < lo ? UINTPTR_MAX : lo + len;
    int solo = ht__solo_enter();
    ht__custom_remove_range(lo, hi, custom_ended);
    ht__solo_exit(solo);
    SCRUB_REGS();
    ht__guard_leave();
}

/* The next definition of a name libc may lack, looked up at the first
 * call of its hook (not in resolve(), above), once: a program that calls
 * the hook with no definition after it (a weak reference binds to ours)
 * pays one failing dlsym, outside any allocator's lock, guard raised. */
static void *optional_next(void **cache, int *done, const char *name)
{
    if (ht_likely(ht_load_acquire(done)))
        return ht_load_relaxed(cache);
    int g = ht__guard;
    ht__guard = 2;
    void *f = ht__next_def(name);
    ht__guard = g;
    ht_store_release(cache, f);
    ht_store_release(done, 1);
    return f;
}

/* C23's sized frees (glibc 2.43 and later): free with a promise about
 * the block. A block freed this way leaves the live table like any
 * other; without these hooks a program built against a newer glibc
 * would free behind the agent's back and its blocks would read as
 * leaks. Passed on unchanged to the libc's own (which may check the
 * promise); before glibc 2.43 nothing can call them but a program that
 * declares them itself, and they are free. */
HT_API void free_sized(void *p, size_t n)
{
    static void *next;                          /* NULL before glibc 2.43 */
    static int done;
    void (*f)(void *, size_t) = (void (*)(void *, size_t))optional_next(&next, &done, "free_sized");
    if (!untrack_free(p))
        return;
    if (f != NULL)
        f(p, n);
    else if (real.free != NULL)
        real.free(p);
}

HT_API void free_aligned_sized(void *p, size_t align, size_t n)
{
    static void *next;
    static int done;
    void (*f)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))optional_next(&next, &done, "free_aligned_sized");
    if (!untrack_free(p))
        return;
    if (f != NULL)
        f(p, align, n);
    else if (real.free != NULL)
        real.free(p);
}

HT_API void *calloc(size_t k, size_t n)
{
    NEED(calloc);
    if (ht_unlikely(!real.calloc)) {
        size_t t;
        if (__builtin_mul_overflow(k, n, &t))
            return NULL;
        return boot_alloc(t, 16);
    }
    void *p = real.calloc(k, n);
    TRACK(p, k * n, HT_KIND_HEAP);
    return p;
}

/* realloc's body, inlined into realloc and reallocarray so the capture's
 * skip count stays 1. */
static HT_ALWAYS_INLINE void *do_realloc(void *old, size_t n)
{
    NEED(realloc);
    if (ht_unlikely(is_boot(old) || !real.realloc)) {
        void *p = real.malloc ? real.malloc(n) : boot_alloc(n, 16);
        if (p && old) {
            size_t m = boot_size(old);
            __builtin_memcpy(p, old, m < n ? m : n);
        }
        TRACK(p, n, HT_KIND_HEAP);
        return p;
    }
    if (old == NULL) {
        void *p = real.realloc(NULL, n);
        TRACK(p, n, HT_KIND_HEAP);
        return p;
    }
    if (ht_unlikely(ht__guard)) {
        note_reentry();
        return real.realloc(old, n);
    }
    if (ht_unlikely(!ht__agent.on))
        return real.realloc(old, n);    /* not started, or detached: its tables may be gone */
    /* forget the old block first: once realloc returns, its address may be
     * handed to another thread. The guard stays up until the new block is
     * in the table: meanwhile the contents are in neither entry, and a
     * leak check that paused this thread here (reach.c parks a thread
     * only outside the guard) would not scan them: everything reachable
     * only through a growing array would read as lost. */
    uint64_t osize = 0;
    uint32_t osite = 0;
    ht__guard = 1;
    int solo = ht__solo_enter();
    int had = (!ht__agent.sample || ht__sample_maybe(old)) && ht__live_remove((uintptr_t)old, &osize, &osite);
    ht__solo_exit(solo);
    void *p = real.realloc(old, n);
    if (p == NULL && n != 0) {
        /* failed: the old block is still there */
        if (had) {
            uint32_t s2;
            uint64_t z2;
            solo = ht__solo_enter();
            ht__live_insert((uintptr_t)old, osize, osite, &s2, &z2);
            ht__solo_exit(solo);
        }
        ht__guard_leave();
        return NULL;
    }
    /* a block reallocated right after its allocation was temporary, as
     * heaptrack counts it (realloc frees it and makes another) */
    int temp = freed_last(old);
    if (had) {
        solo = ht__solo_enter();
        site_free_block(osite, old, osize, temp);
        ht__solo_exit(solo);
    } else if (!ht__agent.sample) {
        ht_fetch_add(&ht__drops.unknown_frees, 1);
    }
    if (p != NULL) {
        if (ht_likely(ht__agent.on == HT_ON_FULL)) {
            if (!ht__agent.sample || ht__sampled(n))
                RECORD(p, n, HT_KIND_HEAP);
        } else if (ht__agent.on) {
            ht__guard_leave();
            bench_track(p, n, HT_KIND_HEAP);
        }
    }
    ht__guard_leave();
    return p;
}

HT_API void *realloc(void *old, size_t n) { return do_realloc(old, n); }

HT_API void *reallocarray(void *old, size_t k, size_t n)
{
    size_t t;
    if (__builtin_mul_overflow(k, n, &t)) {
        errno = ENOMEM;
        return NULL;
    }
    return do_realloc(old, t);
}

HT_API void *memalign(size_t align, size_t n)
{
    NEED(memalign);
    if (ht_unlikely(!real.memalign))
        return boot_alloc(n, align);
    void *p = real.memalign(align, n);
    TRACK(p, n, HT_KIND_HEAP);
    return p;
}

HT_API int posix_memalign(void **out, size_t align, size_t n)
{
    NEED(posix_memalign);
    if (ht_unlikely(!real.posix_memalign)) {
        void *p = boot_alloc(n, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int rc = real.posix_memalign(out, align, n);
    if (rc == 0)
        TRACK(*out, n, HT_KIND_HEAP);
    return rc;
}

HT_API void *aligned_alloc(size_t align, size_t n)
{
    NEED(aligned_alloc);
    if (ht_unlikely(!real.aligned_alloc))
        return boot_alloc(n, align);
    void *p = real.aligned_alloc(align, n);
    TRACK(p, n, HT_KIND_HEAP);
    return p;
}

HT_API void *valloc(size_t n)
{
    NEED(valloc);
    if (ht_unlikely(!real.valloc))
        return boot_alloc(n, 4096);
    void *p = real.valloc(n);
    TRACK(p, n, HT_KIND_HEAP);
    return p;
}

HT_API void *pvalloc(size_t n)
{
    NEED(pvalloc);
    size_t r = n ? (n + 4095) & ~(size_t)4095 : 4096;
    if (ht_unlikely(!real.pvalloc))
        return boot_alloc(r, 4096);
    void *p = real.pvalloc(n);
    TRACK(p, r, HT_KIND_HEAP);
    return p;
}

HT_API size_t malloc_usable_size(void *p)
{
    if (p && is_boot(p))
        return boot_size(p);
    NEED(malloc_usable_size);
    return real.malloc_usable_size ? real.malloc_usable_size(p) : 0;
}

/* ---- C++ operator new / delete ------------------------------------------
 * The common case allocates through the real malloc/memalign and records
 * the caller's stack. When that fails, the real operator new takes over
 * (new_handler loop, std::bad_alloc) -- its own malloc calls are recorded by
 * the malloc hook -- so the language semantics are libstdc++'s own. */

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);

/* The next definition of `name` after ours (RTLD_NEXT), looked up once
 * into *cache: operator new's fallbacks and the exec family. */
static void *next_sym(void **cache, const char *name)
{
    void *f = ht_load_acquire(cache);
    if (!f) {
        f = ht__next_def(name);
        ht_store_release(cache, f);
    }
    return f;
}

#define NEW_PLAIN(sym) \
    HT_API void *sym(size_t n) \
    { \
        NEED(malloc); \
        void *p = real.malloc ? real.malloc(n) : NULL; \
        if (ht_likely(p != NULL)) { \
            TRACK(p, n, HT_KIND_HEAP); \
            return p; \
        } \
        static void *next; \
        new_fn f = (new_fn)next_sym(&next, #sym); \
        if (!f) \
            __builtin_trap(); \
        return f(n); \
    }

#define NEW_NOTHROW(sym) \
    HT_API void *sym(size_t n, const void *nt) \
    { \
        NEED(malloc); \
        void *p = real.malloc ? real.malloc(n) : NULL; \
        if (ht_likely(p != NULL)) { \
            TRACK(p, n, HT_KIND_HEAP); \
            return p; \
        } \
        static void *next; \
        new_nt_fn f = (new_nt_fn)next_sym(&next, #sym); \
        return f ? f(n, nt) : NULL; \
    }

#define NEW_ALIGNED(sym) \
    HT_API void *sym(size_t n, size_t al) \
    { \
        NEED(memalign); \
        void *p = real.memalign ? real.memalign(al, n) : NULL; \
        if (ht_likely(p != NULL)) { \
            TRACK(p, n, HT_KIND_HEAP); \
            return p; \
        } \
        static void *next; \
        new_al_fn f = (new_al_fn)next_sym(&next, #sym); \
        if (!f) \
            __builtin_trap(); \
        return f(n, al); \
    }

#define NEW_ALIGNED_NOTHROW(sym) \
    HT_API void *sym(size_t n, size_t al, const void *nt) \
    { \
        NEED(memalign); \
        void *p = real.memalign ? real.memalign(al, n) : NULL; \
        if (ht_likely(p != NULL)) { \
            TRACK(p, n, HT_KIND_HEAP); \
            return p; \
        } \
        static void *next; \
        new_al_nt_fn f = (new_al_nt_fn)next_sym(&next, #sym); \
        return f ? f(n, al, nt) : NULL; \
    }

NEW_PLAIN(_Znwm)
NEW_PLAIN(_Znam)
NEW_NOTHROW(_ZnwmRKSt9nothrow_t)
NEW_NOTHROW(_ZnamRKSt9nothrow_t)
NEW_ALIGNED(_ZnwmSt11align_val_t)
NEW_ALIGNED(_ZnamSt11align_val_t)
NEW_ALIGNED_NOTHROW(_ZnwmSt11align_val_tRKSt9nothrow_t)
NEW_ALIGNED_NOTHROW(_ZnamSt11align_val_tRKSt9nothrow_t)

#define DELETE1(sym) HT_API void sym(void *p) { free(p); }
#define DELETE2(sym, T) HT_API void sym(void *p, T x) { (void)x; free(p); }
#define DELETE3(sym, T, U) HT_API void sym(void *p, T x, U y) { (void)x; (void)y; free(p); }
DELETE1(_ZdlPv)
DELETE1(_ZdaPv)
DELETE2(_ZdlPvm, size_t)
DELETE2(_ZdaPvm, size_t)
DELETE2(_ZdlPvRKSt9nothrow_t, const void *)
DELETE2(_ZdaPvRKSt9nothrow_t, const void *)
DELETE2(_ZdlPvSt11align_val_t, size_t)
DELETE2(_ZdaPvSt11align_val_t, size_t)
DELETE3(_ZdlPvmSt11align_val_t, size_t, size_t)
DELETE3(_ZdaPvmSt11align_val_t, size_t, size_t)
DELETE3(_ZdlPvSt11align_val_tRKSt9nothrow_t, size_t, const void *)
DELETE3(_ZdaPvSt11align_val_tRKSt9nothrow_t, size_t, const void *)

/* ---- anonymous mappings ------------------------------------------------ */

static HT_ALWAYS_INLINE uint64_t page_round(size_t n) { return ((uint64_t)n + 4095) & ~4095ull; }

static void *raw_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    long r = ht__syscall6(SYS_mmap, (long)a, (long)n, prot, flags, fd, (long)off);
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return MAP_FAILED;
    }
    return (void *)r;
}

static HT_ALWAYS_INLINE void *mmap_body(void *a, size_t n, int prot, int flags, int fd, off_t off,
                                        uint32_t stack)
{
    ht__mmap_lock();
    void *p = real.mmap ? real.mmap(a, n, prot, flags, fd, off) : raw_mmap(a, n, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        int e = errno;
        if (flags & MAP_ANONYMOUS)
            ht__mmap_record((uintptr_t)p, page_round(n), stack, prot);
        else
            ht__mmap_forget((uintptr_t)p, page_round(n));
        errno = e;
    }
    ht__mmap_unlock();
    return p;
}

#define MMAP_HOOK(sym) \
    HT_API void *sym(void *a, size_t n, int prot, int flags, int fd, off_t off) \
    { \
        NEED(mmap); \
        if (ht_unlikely(ht__guard) || !ht__agent.on || \
            !(flags & (MAP_ANONYMOUS | MAP_FIXED))) { \
            if (ht__guard && (flags & MAP_ANONYMOUS)) \
                note_reentry(); \
            return real.mmap ? real.mmap(a, n, prot, flags, fd, off) \
                             : raw_mmap(a, n, prot, flags, fd, off); \
        } \
        void *frames[HT_MAX_FRAMES]; \
        uint64_t hash; \
        uint32_t id = 0; \
        ht__guard = 1; \
        if (flags & MAP_ANONYMOUS) { \
            int nf = ht_capture(1, ht__agent.max_frames, frames, &hash); \
            id = ht__stackdb_intern(frames, nf, hash); \
            if (id == HT_STACK_ID_OVERFLOW) \
                ht_fetch_add(&ht__drops.overflow_allocs, 1); \
        } \
        void *p = mmap_body(a, n, prot, flags, fd, off, id); \
        ht__guard_leave(); \
        return p; \
    }

MMAP_HOOK(mmap)
MMAP_HOOK(mmap64)

HT_API int munmap(void *a, size_t n)
{
    NEED(munmap);
    if (ht_unlikely(ht__guard) || !ht__agent.on || !real.munmap) {
        if (real.munmap)
            return real.munmap(a, n);
        long r = ht__sys2(SYS_munmap, a, n);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        return 0;
    }
    ht__guard = 1;
    ht__note_acted();
    ht__mmap_lock();
    int r = real.munmap(a, n);
    if (r == 0) {
        int e = errno;
        ht__mmap_forget((uintptr_t)a, page_round(n));
        errno = e;
    }
    ht__mmap_unlock();
    ht__guard_leave();
    return r;
}

static long raw_result(long r);

/* mprotect and pkey_mprotect over a tracked region: pages made
 * accessible count from then on, pages made PROT_NONE stop counting
 * (mmaps.c). Under the mmap lock, as munmap: no other thread maps and
 * records the range between the kernel's change and ours. JITs flip code
 * between writable and executable all the time: that changes nothing
 * here and costs a lookup. */
static HT_NOINLINE int protect_body(void *a, size_t n, int prot, int pkey, int with_key)
{
    ht__guard = 1;
    ht__mmap_lock();
    int r = with_key ? real.pkey_mprotect(a, n, prot, pkey) : real.mprotect(a, n, prot);
    if (r == 0) {
        int e = errno;
        ht__mmap_protect((uintptr_t)a, page_round(n), prot);
        errno = e;
    }
    ht__mmap_unlock();
    ht__guard_leave();
    return r;
}

HT_API int mprotect(void *a, size_t n, int prot)
{
    NEED(mprotect);
    if (ht_unlikely(ht__guard) || !ht__agent.on || !real.mprotect)
        return real.mprotect ? real.mprotect(a, n, prot)
                             : (int)raw_result(ht__syscall6(SYS_mprotect, (long)a, (long)n, prot, 0, 0, 0));
    return protect_body(a, n, prot, 0, 0);
}

HT_API int pkey_mprotect(void *a, size_t n, int prot, int pkey)
{
    NEED(pkey_mprotect);
    if (ht_unlikely(ht__guard) || !ht__agent.on || !real.pkey_mprotect)
        return real.pkey_mprotect ? real.pkey_mprotect(a, n, prot, pkey)
                                  : (int)raw_result(ht__syscall6(SYS_pkey_mprotect, (long)a, (long)n, prot,
                                                                 pkey, 0, 0));
    return protect_body(a, n, prot, pkey, 1);
}

/* not variadic (see syscall()): the new address is read only when the
 * flags say it was passed */
HT_API void *ht__mremap_hook(void *old, size_t olen, size_t nlen, int flags, void *new_address)
    __asm__("mremap");
HT_API void *ht__mremap_hook(void *old, size_t olen, size_t nlen, int flags, void *new_address)
{
    void *want = (flags & MREMAP_FIXED) ? new_address : NULL;
    __asm__("" : "+r"(want));   /* chosen now: r8's stale value is kept nowhere */
    NEED(mremap);
    if (ht_unlikely(!real.mremap)) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    if (ht_unlikely(ht__guard) || !ht__agent.on)
        return real.mremap(old, olen, nlen, flags, want);
    void *frames[HT_MAX_FRAMES];
    uint64_t hash;
    ht__guard = 1;
    ht__note_acted();
    int nf = ht_capture(1, ht__agent.max_frames, frames, &hash);
    uint32_t id = ht__stackdb_intern(frames, nf, hash);
    ht__mmap_lock();
    void *p = real.mremap(old, olen, nlen, flags, want);
    if (p != MAP_FAILED) {
        int e = errno;
        /* a tracked region moves or resizes: released at the old place,
         * allocated anew (by this call) at the new one, with the old
         * protection (mremap takes one mapping of one protection) */
        int had = (flags & MREMAP_DONTUNMAP) ? 0 : ht__mmap_forget((uintptr_t)old, page_round(olen));
        if (had)
            ht__mmap_record((uintptr_t)p, page_round(nlen), id, (had & 2) ? PROT_READ : PROT_NONE);
        else
            ht__mmap_forget((uintptr_t)p, page_round(nlen));
        errno = e;
    }
    ht__mmap_unlock();
    ht__guard_leave();
    return p;
}

/* ---- exec: the image is replaced ------------------------------------------
 * The trace of the image that calls exec gets a final snapshot and its END
 * first (nothing else would ever write them); if exec fails, the agent
 * carries on and ht__agent_exec_failed() re-opens tracing into a new file.
 * glibc's execvp/execl* reach execve internally, so each family member is
 * interposed. The variadic ones collect their arguments on the stack. */

HT_INTERNAL void ht__agent_before_exec(void);
HT_INTERNAL void ht__agent_exec_failed(void);

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);

#define EXEC_CALL(ret, call) \
    do { \
        ht__agent_before_exec(); \
        ret = call; \
        int e_ = errno; \
        ht__agent_exec_failed(); \
        errno = e_; \
    } while (0)

/* Runs stmt with ENV naming the environment the new program gets: env0,
 * or under --follow-exec a copy on this stack that loads the agent again
 * (ht__exec_env_need). An environment too large for the stack (over
 * 16,384 variables or a 64 KiB LD_PRELOAD) is passed as it is. */
#define EXEC_ENV_MAX     16384
#define EXEC_PRELOAD_MAX 65536
#define WITH_EXEC_ENV(env0, ENV, stmt) \
    do { \
        size_t pre_; \
        size_t need_ = ht__exec_env_need(env0, &pre_); \
        if (need_ && need_ <= EXEC_ENV_MAX && pre_ <= EXEC_PRELOAD_MAX) { \
            char *fixed_[need_]; \
            char preload_[pre_ + 1]; \
            char *const *ENV = ht__exec_env_fill(env0, fixed_, preload_); \
            stmt; \
        } else { \
            char *const *ENV = env0; \
            stmt; \
        } \
    } while (0)

#define EXECVE_LIKE(sym) \
    HT_API int sym(const char *path, char *const argv[], char *const envp[]) \
    { \
        static void *next; \
        execve_fn f = (execve_fn)next_sym(&next, #sym); \
        if (!f) { \
            errno = ENOSYS; \
            return -1; \
        } \
        int r; \
        WITH_EXEC_ENV(envp, env, EXEC_CALL(r, f(path, argv, env))); \
        return r; \
    }
EXECVE_LIKE(execve)
EXECVE_LIKE(execvpe)

/* execv and execvp pass environ: where it must change, the same call
 * with an environment (execve, execvpe) takes the copy */
#define EXECV_LIKE(sym, esym) \
    HT_API int sym(const char *path, char *const argv[]) \
    { \
        extern char **environ; \
        static void *next, *enext; \
        execv_fn f = (execv_fn)next_sym(&next, #sym); \
        execve_fn fe = (execve_fn)next_sym(&enext, #esym); \
        if (!f || !fe) { \
            errno = ENOSYS; \
            return -1; \
        } \
        int r; \
        char *const *env0 = environ; \
        WITH_EXEC_ENV(env0, env, EXEC_CALL(r, env == env0 ? f(path, argv) : fe(path, argv, env))); \
        return r; \
    }
EXECV_LIKE(execv, execve)
EXECV_LIKE(execvp, execvpe)

HT_API int fexecve(int fd, char *const argv[], char *const envp[])
{
    static void *next;
    fexecve_fn f = (fexecve_fn)next_sym(&next, "fexecve");
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    int r;
    WITH_EXEC_ENV(envp, env, EXEC_CALL(r, f(fd, argv, env)));
    return r;
}

HT_API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    static void *next;
    execveat_fn f = (execveat_fn)next_sym(&next, "execveat");
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    int r;
    WITH_EXEC_ENV(envp, env, EXEC_CALL(r, f(dirfd, path, argv, env, flags)));
    return r;
}

/* posix_spawn: the caller goes on, so nothing is written; only the
 * environment of the program it starts may need the agent back (glibc's
 * system() and popen() spawn with environ, which the start-up kept). */
#define SPAWN_LIKE(sym) \
    HT_API int sym(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, \
                   const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) \
    { \
        static void *next; \
        spawn_fn f = (spawn_fn)next_sym(&next, #sym); \
        if (!f) \
            return ENOSYS; \
        int r; \
        WITH_EXEC_ENV(envp, env, r = f(pid, path, fa, attr, argv, env)); \
        return r; \
    }
SPAWN_LIKE(posix_spawn)
SPAWN_LIKE(posix_spawnp)

#define EXEC_MAX_ARGS 4096
/* execl, execlp, execle: arguments into an array on the stack, then the
 * array form (execle passes its environment after the NULL). */
#define EXECL_LIKE(sym, vsym, with_env) \
    HT_API int sym(const char *path, const char *arg, ...) \
    { \
        const char *args[EXEC_MAX_ARGS + 1]; \
        char *const *envp = NULL; \
        int n = 0; \
        va_list ap; \
        va_start(ap, arg); \
        args[n++] = arg; \
        while (args[n - 1] != NULL && n < EXEC_MAX_ARGS) \
            args[n++] = va_arg(ap, const char *); \
        if (with_env && args[n - 1] == NULL) \
            envp = va_arg(ap, char *const *); \
        va_end(ap); \
        if (args[n - 1] != NULL) { \
            errno = E2BIG; \
            return -1; \
        } \
        if (with_env) \
            return execve(path, (char *const *)args, envp); \
        return vsym(path, (char *const *)args); \
    }
EXECL_LIKE(execl, execv, 0)
EXECL_LIKE(execlp, execvp, 0)
EXECL_LIKE(execle, execv, 1)

/* ---- the program gives up rights or changes namespaces --------------------
 * A set-id call or chroot may leave the process unable to create a file
 * in the trace's directory: a daemon started as root forks workers that
 * drop to an unprivileged user or chroot. A forked child creates its
 * trace at its first snapshot, so it creates it first, and writes through
 * the open file later; and the agent's control thread must not make such
 * a call fail, or abort the program (ht__agent_before_confine). Each call
 * through libc is seen, and the same calls through syscall(). */

/* ht__agent_before_confine and _after_confine, errno kept for the program;
 * returns 1 if a pause was counted (before only) */
static int around_confine(int after, int kind)
{
    if (ht__guard || kind < 0)
        return 0;
    int e = errno, counted = 0;
    if (after)
        ht__agent_after_confine(kind);
    else
        counted = ht__agent_before_confine(kind);
    errno = e;
    return counted;
}

/* unshare: what the kernel refuses in a process with other threads (a new
 * user namespace; CLONE_NEWUSER implies CLONE_THREAD); -1: none of it */
static HT_ALWAYS_INLINE int unshare_kind(long flags)
{
    return flags & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM) ? HT_CONFINE_ALONE : -1;
}

#define CONFINE(sym, kind, params, args) \
    HT_API int sym params \
    { \
        static void *next; \
        int k_ = (kind); \
        around_confine(0, k_); \
        int (*f) params = (int (*) params)next_sym(&next, #sym); \
        int rc_ = -1; \
        if (f) \
            rc_ = f args; \
        else \
            errno = ENOSYS; \
        around_confine(1, k_); \
        return rc_; \
    }
CONFINE(setuid, HT_CONFINE_SETID, (uid_t u), (u))
CONFINE(seteuid, HT_CONFINE_SETID, (uid_t u), (u))
CONFINE(setreuid, HT_CONFINE_SETID, (uid_t r, uid_t e), (r, e))
CONFINE(setresuid, HT_CONFINE_SETID, (uid_t r, uid_t e, uid_t s), (r, e, s))
CONFINE(setgid, HT_CONFINE_SETID, (gid_t g), (g))
CONFINE(setegid, HT_CONFINE_SETID, (gid_t g), (g))
CONFINE(setregid, HT_CONFINE_SETID, (gid_t r, gid_t e), (r, e))
CONFINE(setresgid, HT_CONFINE_SETID, (gid_t r, gid_t e, gid_t s), (r, e, s))
CONFINE(setgroups, HT_CONFINE_SETID, (size_t n, const gid_t *list), (n, list))
CONFINE(initgroups, HT_CONFINE_SETID, (const char *user, gid_t g), (user, g))
CONFINE(chroot, HT_CONFINE_ROOT, (const char *path), (path))
CONFINE(unshare, unshare_kind(flags), (int flags), (flags))
CONFINE(setns, HT_CONFINE_ALONE, (int fd, int nstype), (fd, nstype))

/* ---- thread counts -----------------------------------------------------------
 * A program that must be alone before it forks or sandboxes itself counts
 * its threads by the link count of /proc/self/task (2 + threads): Chromium's
 * zygote, fstatat(proc, "self/task/"), and a crash (SIGTRAP) when it is not
 * 3. The control thread is ours, not the program's: it ends for the call
 * and comes back after, as for unshare (HT_CONFINE_COUNT: without opening
 * the trace ahead, since no rights change). A path names the task list when its
 * last component is "task" and the one before is "self" or this process's
 * id, or it is "task" alone, relative to a descriptor of /proc/PID (a
 * path elsewhere that ends so only pays a needless pause).
 *
 * Python 3.12 and later read the count at every os.fork (field 20 of
 * /proc/self/stat: fopen, fread, fclose) and warn "This process is
 * multi-threaded, use of fork() may lead to deadlocks in the child" when
 * it is above 1: under heaptrail every fork of a single-threaded Python
 * program warned. The kernel writes the file's text at the first read,
 * which a stream makes inside stdio (or through its descriptor, as
 * libstdc++'s ifstream does), out of sight: so a stream of this process's
 * stat or status keeps the control thread away from its fopen to its
 * fclose (a stream never closed keeps it away for good: no snapshot on
 * demand or by interval until then). Reading the task directory, and
 * open() and read() of these files, still see it. */
static int is_own_id(const char *s, size_t len)
{
    char id[24];
    size_t k = ht__fmt_u64(id, (uint64_t)ht__sys0(SYS_getpid));
    return k == len && !memcmp(s, id, k);
}

/* Whether path (relative to dirfd) is leaf (len bytes) in this process's
 * /proc directory: /proc/self/LEAF, /proc/thread-self/LEAF, /proc/PID/LEAF,
 * or LEAF alone in a descriptor of /proc/PID. 0 where no pause could
 * follow (agent code, a filter that may kill on the agent's calls),
 * without a system call. */
static int names_own(int dirfd, const char *path, const char *leaf, size_t len)
{
    if (!path)
        return 0;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n < len || memcmp(path + n - len, leaf, len) != 0)
        return 0;                               /* nearly every path ends here */
    if (ht__guard || ht_load_relaxed(&ht__sandboxed))
        return 0;                               /* no pause then: no system call either */
    if (n == len) {                             /* LEAF in the directory dirfd */
        if (dirfd < 0)
            return 0;
        char fd[48] = "/proc/self/fd/", dir[32];
        fd[14 + ht__fmt_u64(fd + 14, (uint64_t)dirfd)] = 0;
        long got = ht__sys3(SYS_readlink, fd, dir, sizeof dir);
        return got > 6 && got < (long)sizeof dir && !memcmp(dir, "/proc/", 6) &&
               is_own_id(dir + 6, (size_t)got - 6);
    }
    if (path[n - len - 1] != '/')
        return 0;
    size_t end = n - len - 1, start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    if ((end - start == 4 && !memcmp(path + start, "self", 4)) ||
        (end - start == 11 && !memcmp(path + start, "thread-self", 11)))
        return 1;
    return is_own_id(path + start, end - start);
}

#define TASKS_KIND(dirfd, path) (names_own(dirfd, path, "task", 4) ? HT_CONFINE_COUNT : -1)
struct stat;
struct stat64;
struct statx;
CONFINE(stat, TASKS_KIND(AT_FDCWD, p), (const char *p, struct stat *b), (p, b))
CONFINE(stat64, TASKS_KIND(AT_FDCWD, p), (const char *p, struct stat64 *b), (p, b))
CONFINE(lstat, TASKS_KIND(AT_FDCWD, p), (const char *p, struct stat *b), (p, b))
CONFINE(lstat64, TASKS_KIND(AT_FDCWD, p), (const char *p, struct stat64 *b), (p, b))
CONFINE(fstatat, TASKS_KIND(d, p), (int d, const char *p, struct stat *b, int fl), (d, p, b, fl))
CONFINE(fstatat64, TASKS_KIND(d, p), (int d, const char *p, struct stat64 *b, int fl), (d, p, b, fl))
CONFINE(statx, TASKS_KIND(d, p), (int d, const char *p, int fl, unsigned m, struct statx *b), (d, p, fl, m, b))
/* programs built against glibc before 2.33 call these */
CONFINE(__xstat, TASKS_KIND(AT_FDCWD, p), (int v, const char *p, struct stat *b), (v, p, b))
CONFINE(__xstat64, TASKS_KIND(AT_FDCWD, p), (int v, const char *p, struct stat64 *b), (v, p, b))
CONFINE(__lxstat, TASKS_KIND(AT_FDCWD, p), (int v, const char *p, struct stat *b), (v, p, b))
CONFINE(__lxstat64, TASKS_KIND(AT_FDCWD, p), (int v, const char *p, struct stat64 *b), (v, p, b))
CONFINE(__fxstatat, TASKS_KIND(d, p), (int v, int d, const char *p, struct stat *b, int fl), (v, d, p, b, fl))
CONFINE(__fxstatat64, TASKS_KIND(d, p), (int v, int d, const char *p, struct stat64 *b, int fl), (v, d, p, b, fl))

/* streams of /proc/self/stat or status that hold a pause until fclose */
typedef struct _IO_FILE FILE;
static FILE *held_streams[8];
static int held_count;

static HT_ALWAYS_INLINE int names_own_stat(const char *path)
{
    return names_own(AT_FDCWD, path, "stat", 4) || names_own(AT_FDCWD, path, "status", 6);
}

static int hold_stream(FILE *s)
{
    for (size_t i = 0; i < HT_ARRAY_SIZE(held_streams); i++) {
        FILE *none = NULL;
        if (__atomic_compare_exchange_n(&held_streams[i], &none, s, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_add_fetch(&held_count, 1, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

/* 1 if s held a pause (its slot is free again) */
static int release_stream(FILE *s)
{
    if (ht_load_acquire(&held_count) == 0 || !s)
        return 0;                               /* every fclose but these */
    for (size_t i = 0; i < HT_ARRAY_SIZE(held_streams); i++) {
        FILE *mine = s;
        if (ht_load_relaxed(&held_streams[i]) == s &&
            __atomic_compare_exchange_n(&held_streams[i], &mine, NULL, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_sub_fetch(&held_count, 1, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

void ht__hooks_fork_child(void)
{
    for (size_t i = 0; i < HT_ARRAY_SIZE(held_streams); i++)
        HT_RESET(held_streams[i], NULL);
    HT_RESET(held_count, 0);
}

#define FOPEN_LIKE(sym) \
    HT_API FILE *sym(const char *path, const char *mode) \
    { \
        static void *next; \
        int paused = names_own_stat(path) && around_confine(0, HT_CONFINE_COUNT); \
        FILE *(*f)(const char *, const char *) = \
            (FILE * (*)(const char *, const char *))next_sym(&next, #sym); \
        FILE *s = NULL; \
        if (f) \
            s = f(path, mode); \
        else \
            errno = ENOSYS; \
        if (paused && !(s && hold_stream(s))) \
            around_confine(1, HT_CONFINE_COUNT); \
        return s; \
    }
FOPEN_LIKE(fopen)
FOPEN_LIKE(fopen64)

HT_API int fclose(FILE *s)
{
    static void *next;
    int held = release_stream(s);
    int (*f)(FILE *) = (int (*)(FILE *))next_sym(&next, "fclose");
    int rc = -1;                                /* EOF */
    if (f)
        rc = f(s);
    else
        errno = ENOSYS;
    if (held)
        around_confine(1, HT_CONFINE_COUNT);
    return rc;
}

/* the kind of a system call made through syscall(), or -1 */
static HT_ALWAYS_INLINE int confines(long n, long a)
{
    if (n == SYS_setuid || n == SYS_setreuid || n == SYS_setresuid || n == SYS_setgid ||
        n == SYS_setregid || n == SYS_setresgid || n == SYS_setgroups)
        return HT_CONFINE_SETID_THREAD;
    if (n == SYS_chroot)
        return HT_CONFINE_ROOT;
    if (n == SYS_unshare)
        return unshare_kind(a);
    return n == SYS_setns ? HT_CONFINE_ALONE : -1;
}

/* ---- signal dispositions ----------------------------------------------------
 * A query of a signal's disposition (no new action) does not show the
 * agent's handler for crashes and ending signals:
 * ht__agent_sigaction_query. Async-signal-safe
 * (the next definition is found with the others, before main). */

HT_API int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    NEED(sigaction);
    if (ht_unlikely(!real.sigaction)) {
        errno = ENOSYS;
        return -1;
    }
    int r = real.sigaction(sig, act, old);
    if (r == 0 && !act && old && !ht__guard)
        ht__agent_sigaction_query(sig, old);
    return r;
}

/* ---- process exit -------------------------------------------------------- */

HT_INTERNAL void ht__agent_exit_now(void);

/* Notes where the program called exit from (its stack above that point
 * and the callee-saved registers are what is still live of it, for
 * reach.c); returning from main calls exit inside libc, not here. The
 * stack from this hook's own stack pointer: its prologue may have saved
 * a caller's register there and reused it before the registers are read
 * (gcc put exit's status in rbx first). */
#define NOTE_EXIT() \
    do { \
        uintptr_t regs_[6]; \
        uintptr_t sp_ = ht__callee_saved(regs_); \
        ht__reach_note_exit(sp_, regs_); \
    } while (0)

HT_API __attribute__((noreturn)) void exit(int status)
{
    NOTE_EXIT();
    NEED(exit);
    if (real.exit)
        real.exit(status);
    for (;;)
        ht__sys1(SYS_exit_group, status);
}

/* An ending without exit's handlers: the last snapshot now, then the
 * next definition (or the system call, should there be none) */
#define END_NOW_HOOK(field) \
    { \
        NOTE_EXIT(); \
        ht__agent_exit_now(); \
        NEED(field); \
        if (real.field) \
            real.field(status); \
        for (;;) \
            ht__sys1(SYS_exit_group, status); \
    }

HT_API __attribute__((noreturn)) void _exit(int status)
END_NOW_HOOK(exit_)

/* quick_exit (C11, std::quick_exit: a C++ server skipping its
 * destructors at shutdown) runs the at_quick_exit handlers and ends with
 * libc's own _exit, which no hook sees: the trace held no snapshot. The
 * last snapshot is written first, as for _exit (the handlers' work is not
 * in it). */
HT_API __attribute__((noreturn)) void quick_exit(int status)
END_NOW_HOOK(quick_exit)

HT_API __attribute__((noreturn)) void _Exit(int status)
END_NOW_HOOK(Exit_)

/* raise() and kill() of this process: where that ends it, the last
 * snapshot is written first (ht__agent_raise says when). A program whose
 * handler replaced the agent's, and ends as the signal would have ended
 * it by raising it again (node on SIGTERM and SIGINT), or that puts the
 * default back and kills itself (Python after an uncaught Ctrl-C, bash
 * after a signal it handled), otherwise left a trace with no snapshot. */
HT_INTERNAL void ht__agent_raise(int sig, int kill_pid, uintptr_t lo, const uintptr_t *regs);

HT_API int raise(int sig)
{
    if (!ht__guard) {
        uintptr_t regs_[6];
        uintptr_t sp_ = ht__callee_saved(regs_);
        ht__agent_raise(sig, -1, sp_, regs_);
    }
    NEED(raise);
    if (ht_likely(real.raise != NULL))
        return real.raise(sig);
    return (int)raw_result(ht__sys3(SYS_tgkill, ht__sys0(SYS_getpid), ht__sys0(SYS_gettid), sig));
}

HT_API int kill(pid_t pid, int sig)
{
    if (!ht__guard && pid >= 0) {
        uintptr_t regs_[6];
        uintptr_t sp_ = ht__callee_saved(regs_);
        ht__agent_raise(sig, pid, sp_, regs_);
    }
    NEED(kill);
    if (ht_likely(real.kill != NULL))
        return real.kill(pid, sig);
    return (int)raw_result(ht__sys2(SYS_kill, pid, sig));
}

/* ---- seccomp: the program sandboxes itself ----------------------------------
 * Once a seccomp filter is on, a system call the filter does not allow
 * kills the process (SIGSYS) or fails: the agent's exit snapshot (open,
 * pwrite), the control thread's poll, a membarrier would kill a sandboxed
 * program that runs fine alone. So the ways libc offers to install one
 * (prctl(PR_SET_SECCOMP) and syscall(SYS_seccomp), which libseccomp uses)
 * first hand the filter to ht__agent_sandbox, which runs it on the calls
 * the agent may make later and, if it could refuse them, writes the last
 * snapshot and goes quiet. A filter installed with a raw system call
 * instruction (chromium's sandbox) is not seen. */

HT_INTERNAL void ht__agent_sandbox(int strict, const void *prog);

/* ht__agent_sandbox for the program's call, which sees errno unchanged */
static HT_NOINLINE void before_filter(int strict, const void *prog)
{
    int e = errno;
    ht__agent_sandbox(strict, prog);
    errno = e;
}

#ifndef SECCOMP_SET_MODE_STRICT
#define SECCOMP_SET_MODE_STRICT 0
#define SECCOMP_SET_MODE_FILTER 1
#endif
#ifndef SECCOMP_MODE_STRICT
#define SECCOMP_MODE_STRICT 1
#endif
#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP 22
#endif

static long raw_result(long r)
{
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* prctl(), not variadic either (see syscall() below): a call with fewer
 * arguments (prctl(PR_SET_NAME, name)) must not have the agent store the
 * other registers' stale contents in its frame */
static HT_NOINLINE int prctl_seccomp(int option, unsigned long a, unsigned long b, unsigned long c,
                                     unsigned long d)
{
    if (!ht__guard)
        before_filter(a == SECCOMP_MODE_STRICT, (const void *)b);
    NEED(prctl);
    if (ht_unlikely(!real.prctl))
        return (int)raw_result(ht__syscall6(SYS_prctl, option, (long)a, (long)b, (long)c, (long)d, 0));
    return real.prctl(option, a, b, c, d);
}

HT_API int ht__prctl_hook(int option, unsigned long a, unsigned long b, unsigned long c, unsigned long d)
    __asm__("prctl");
HT_API int ht__prctl_hook(int option, unsigned long a, unsigned long b, unsigned long c, unsigned long d)
{
    if (ht_likely(real.prctl != NULL) && option != PR_SET_SECCOMP)
        return real.prctl(option, a, b, c, d);
    return prctl_seccomp(option, a, b, c, d);
}

/* epoll descriptors, noted for the leak check: the kernel keeps each
 * registration's data word, which may be the only pointer to a block
 * (reach.c, scan_epoll_roots) */
static int noted_epoll(int fd)
{
    if (fd >= 0)
        ht__reach_note_epoll(fd);
    return fd;
}

HT_API int epoll_create1(int flags)
{
    NEED(epoll_create1);
    return noted_epoll(real.epoll_create1 ? real.epoll_create1(flags)
                                          : (int)raw_result(ht__syscall6(SYS_epoll_create1, flags, 0, 0, 0, 0, 0)));
}

HT_API int epoll_create(int size)
{
    NEED(epoll_create);
    return noted_epoll(real.epoll_create ? real.epoll_create(size)
                                         : (int)raw_result(ht__syscall6(SYS_epoll_create, size, 0, 0, 0, 0, 0)));
}

/* alternate signal stacks, noted for the leak check: the kernel keeps
 * the stack's base, which may be the only pointer to a block */
HT_API int sigaltstack(const stack_t *ss, stack_t *old)
{
    NEED(sigaltstack);
    int r = real.sigaltstack ? real.sigaltstack(ss, old)
                             : (int)raw_result(ht__syscall6(SYS_sigaltstack, (long)ss, (long)old, 0, 0, 0, 0));
    if (r == 0 && ss)
        ht__reach_note_altstack(ht__gettid(), (ss->ss_flags & SS_DISABLE) ? 0 : (uintptr_t)ss->ss_sp);
    return r;
}

/* syscall(): the body of the calls it watches (seccomp filters, identity
 * and namespace changes, epoll instances) */
static HT_NOINLINE long syscall_watched(long n, long a, long b, long c, long d, long e, long f)
{
    if (n == SYS_seccomp && (a == SECCOMP_SET_MODE_FILTER || a == SECCOMP_SET_MODE_STRICT) && !ht__guard)
        before_filter(a == SECCOMP_SET_MODE_STRICT, (const void *)c);
    else if (n == SYS_prctl && a == PR_SET_SECCOMP && !ht__guard)
        before_filter(b == SECCOMP_MODE_STRICT, (const void *)c);
    int conf = confines(n, a);
    around_confine(0, conf);
    NEED(syscall);
    long r;
    if (ht_unlikely(!real.syscall))
        r = raw_result(ht__syscall6(n, a, b, c, d, e, f));
    else
        r = real.syscall(n, a, b, c, d, e, f);
    around_confine(1, conf);
    if ((n == SYS_epoll_create1 || n == SYS_epoll_create) && r >= 0)
        ht__reach_note_epoll((int)r);
    return r;
}

/* syscall() itself, not variadic: a variadic body stores all six argument
 * registers in its frame (va_start's save area), and a caller passing
 * fewer (syscall(SYS_gettid)) leaves there whatever the registers held --
 * a heap address the agent's own code last had in rcx or r8 -- where a
 * thread's later frames may keep it unwritten, so that a leak check
 * finds it in live stack and calls a lost block reachable (1 run in 100
 * of tests/agent/leakcheck.sh). On x86-64 a variadic call's integer
 * arguments are where these parameters are read; the calls it does not
 * watch go on to libc's syscall as a sibling call, their registers and
 * their seventh word untouched (writing that word back where it lies). */
HT_API long ht__syscall_hook(long n, long a, long b, long c, long d, long e, long f) __asm__("syscall");
HT_API long ht__syscall_hook(long n, long a, long b, long c, long d, long e, long f)
{
    /* (confines is inlined: a call would store a and c across it) */
    if (ht_likely(real.syscall != NULL) && n != SYS_seccomp && n != SYS_prctl && n != SYS_epoll_create1 &&
        n != SYS_epoll_create && confines(n, a) < 0)
        return real.syscall(n, a, b, c, d, e, f);
    return syscall_watched(n, a, b, c, d, e, f);
}
