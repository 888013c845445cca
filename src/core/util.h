/* util.h -- small pieces every in-process file shares: branch hints,
 * visibility, atomics shorthands, and a raw-syscall layer.
 *
 * Everything here is async-signal-safe and never allocates. Code that runs
 * inside a malloc hook must not call into libc functions that may be
 * interposed or may allocate (printf, getenv, fopen, ...); it uses these
 * instead, like mimalloc's prim layer. */
#ifndef HT_CORE_UTIL_H
#define HT_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define ht_likely(x)   __builtin_expect(!!(x), 1)
#define ht_unlikely(x) __builtin_expect(!!(x), 0)
#define HT_NOINLINE    __attribute__((noinline))
#define HT_ALWAYS_INLINE inline __attribute__((always_inline))
#if defined(_WIN32)
/* PE: a symbol is exported only if marked dllexport (HT_API), so internal
 * ones need no attribute. No HT_TLS: mingw-w64's __thread is emulated TLS,
 * which calls malloc on a thread's first touch; the Windows backend keeps
 * its per-thread state in a TlsAlloc slot read from the TEB instead. */
#  define HT_INTERNAL
#else
#  define HT_INTERNAL  __attribute__((visibility("hidden")))
#  define HT_TLS       __thread __attribute__((tls_model("initial-exec")))
#endif
#define HT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* Stores v unless x holds it already. A fork child's resets read before
 * they write: a page the parent left as the child needs it is not copied
 * (a copy-on-write fault, ~20 us on this project's virtual machines). */
#define HT_RESET(x, v) do { if ((x) != (v)) (x) = (v); } while (0)

#define ht_load_relaxed(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define ht_load_acquire(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ht_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ht_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ht_fetch_add(p, v)     __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define ht_compiler_barrier()  __atomic_signal_fence(__ATOMIC_SEQ_CST)

/* Raw system calls (Linux only): no errno, no cancellation points, no
 * interposition. Return values follow the kernel: negative errno on failure. */
HT_INTERNAL long ht__syscall6(long n, long a, long b, long c, long d, long e,
                              long f);
#define ht__sys0(n)             ht__syscall6((n), 0, 0, 0, 0, 0, 0)
#define ht__sys1(n, a)          ht__syscall6((n), (long)(a), 0, 0, 0, 0, 0)
#define ht__sys2(n, a, b)       ht__syscall6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define ht__sys3(n, a, b, c)    ht__syscall6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define ht__sys4(n, a, b, c, d) ht__syscall6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

/* Anonymous private mapping of `size` bytes, or NULL. */
HT_INTERNAL void *ht__map(size_t size);
/* Reserve address space without committing memory. Before any part of it
 * is touched, ht__commit() it: on Linux (MAP_NORESERVE) that costs nothing,
 * on Windows reserved pages fault until committed, and committed memory
 * counts against the system's commit limit, so a large reservation is
 * committed only as it is used. */
HT_INTERNAL void *ht__reserve(size_t size);
/* The address space heaptrail's reservations may take in all, in bytes:
 * unbounded (UINT64_MAX) unless the process runs under an address-space
 * limit (Linux RLIMIT_AS, `ulimit -v`), then an eighth of it. Every byte
 * reserved counts against the program's own limit, and the reservations
 * sized for the default budgets (3 GB) left a limited program none: under
 * `ulimit -v 2000000` sqlite3 ran with its tracker recording nothing. */
HT_INTERNAL uint64_t ht__reserve_allowance(void);
/* A table's share of it: the allowance divided by `parts`, at most `most`
 * bytes (what the table reserves without a limit). */
static inline uint64_t ht__reserve_share(unsigned parts, uint64_t most)
{
    uint64_t a = ht__reserve_allowance() / parts;
    return a < most ? a : most;
}
/* Makes [p, p + size) of a ht__reserve'd range readable and writable
 * (zero-filled when first committed). Returns 0, or -1 when the system
 * refuses (Windows: commit limit reached). */
HT_INTERNAL int ht__commit(void *p, size_t size);
/* Returns [p, p + size) to the system. On Windows only a whole mapping is
 * released (p its start, size its size); a part is decommitted. */
HT_INTERNAL void ht__unmap(void *p, size_t size);

/* Value of environment variable `name` from the process environment (an
 * `environ` scan, no getenv: safe before libc is ready and in hooks). */
HT_INTERNAL const char *ht__env(const char *name);
/* The file name in a path: what follows its last '/'. */
static inline const char *ht__path_base(const char *path)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/')
            base = p + 1;
    return base;
}
/* The length of a path's directory part, its last '/' included (0: none). */
static inline size_t ht__path_dir_len(const char *path)
{
    return (size_t)(ht__path_base(path) - path);
}
/* NAME=value strings ht__env looks at before the environment (NULL-ended;
 * heaptrail attach's options: the environment is the program's) */
HT_INTERNAL extern const char *const *ht__env_extra;
/* Parses "123", "64K", "256M", "1G" into bytes; returns `dflt` when `s` is
 * NULL or malformed. */
HT_INTERNAL uint64_t ht__parse_size(const char *s, uint64_t dflt);

/* A test-and-set spin lock for rare paths. ht__spin_trylock() returns 1 on
 * success. ht__spin_lock() spins, then yields (sched_yield, SwitchToThread). */
typedef struct { int v; } ht_spinlock_t;
HT_INTERNAL int ht__spin_trylock(ht_spinlock_t *l);
/* One round of a wait loop: a pause for the first 64 rounds, then a yield
 * of the CPU. `round` counts from 0. */
HT_INTERNAL void ht__backoff(unsigned round);
HT_INTERNAL void ht__spin_lock(ht_spinlock_t *l);
HT_INTERNAL void ht__spin_unlock(ht_spinlock_t *l);

/* Thread id from the kernel (cheap enough for rare paths). */
HT_INTERNAL int ht__gettid(void);

/* Per-thread words for code shared by every platform, which cannot use
 * HT_TLS (on Windows, mingw-w64's __thread is emulated TLS and calls malloc
 * on a thread's first touch). ht__thread_word(i) points at the calling
 * thread's word i (i < HT_THREAD_WORDS), 0 when the thread starts; the
 * pointer stays valid for the thread's life. Never allocates;
 * async-signal-safe. Each word has one owner: */
enum {
    HT_TW_STACKDB_INSERT = 0,   /* stackdb.c: this thread is inside an insert */
    HT_TW_STACKDB_HOT = 1,      /* stackdb.c: this thread's hot-cache window */
    HT_THREAD_WORDS = 4
};
HT_INTERNAL uintptr_t *ht__thread_word(unsigned i);

#endif
