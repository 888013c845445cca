/* stackrec.c -- a bench tool, not part of heaptrail: an LD_PRELOAD library
 * that records the call stack of every malloc/calloc/realloc of a program
 * (with ht_capture, as the tracker will) into binary files, so the stack
 * database can be measured on the stacks real programs make.
 *
 *   HT_STACKREC_OUT=prefix  LD_PRELOAD=build/bench/stackrec.so  program ...
 *
 * writes, per process:
 *   prefix.PID.stream  the stacks of the first HT_STACKREC_MAX allocations
 *                      (default 200000), in order, duplicates included
 *   prefix.PID.unique  the first occurrence of every distinct stack over the
 *                      whole run (at most HT_STACKREC_MAX of them), found
 *                      with a 64-bit-hash set (a collision would merge two
 *                      stacks here; at 64 bits over ~10^5 stacks it has
 *                      odds of ~10^-10)
 * Record: uint32 n, uint32 0, then n uint64 return addresses, innermost
 * first. One write(2) per record, O_APPEND: records from threads never
 * interleave.
 *
 *   HT_STACKREC_ADDRS=path  LD_PRELOAD=build/bench/stackrec.so  program ...
 *
 * (with or without HT_STACKREC_OUT) writes at exit, for bench/livesim.c,
 * every heap call's address as one uint64: the address << 1 | 1 for an
 * allocation (malloc, calloc, realloc's result), << 1 for a release (free,
 * realloc's old block). In call order for one thread; threads' calls are
 * logged as they claim slots, so use it on single-threaded programs.
 *
 * The hooks run inside the program's malloc: a thread-local guard stops
 * recursion, dlsym's own calloc is answered from a static buffer, and
 * nothing here allocates. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "heaptrail.h"

#define MAXF 256
#define SEEN_BITS 22   /* 4M slots, 32 MiB of address space, touched as used */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

static __thread int t_busy __attribute__((tls_model("initial-exec")));
static char boot[1 << 16] __attribute__((aligned(16)));
static size_t boot_used;
static int resolving;

static int fd_stream = -1, fd_unique = -1, opened;
static long limit = 200000, n_stream, n_unique;
static uint64_t *seen;

#define ADDRS_MAX (256ul << 20)    /* calls logged at most (2 GiB reserved) */
static uint64_t *addrs;
static size_t n_addrs;

static void resolve(void)
{
    resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    resolving = 0;
}

static int in_boot(void *p)
{
    return (char *)p >= boot && (char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    size_t off = (boot_used + 15) & ~(size_t)15;
    if (off + n > sizeof boot)
        return NULL;
    boot_used = off + n;
    return boot + off;     /* static storage: already zero */
}

static void put_num(char *buf, long v)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *buf++ = tmp[--k];
    *buf = 0;
}

static int open_out(const char *prefix, const char *suffix)
{
    char path[4096];
    size_t l = strlen(prefix);
    if (l > 4000)
        return -1;
    memcpy(path, prefix, l);
    path[l++] = '.';
    put_num(path + l, (long)getpid());
    strcat(path, suffix);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
}

static void open_files(void)
{
    static int lock;
    if (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        return;    /* another thread is opening: skip this record */
    const char *prefix = getenv("HT_STACKREC_OUT");
    const char *max = getenv("HT_STACKREC_MAX");
    if (max)
        limit = strtol(max, NULL, 10);
    if (getenv("HT_STACKREC_ADDRS")) {
        void *m = mmap(NULL, ADDRS_MAX * sizeof *addrs, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        addrs = m == MAP_FAILED ? NULL : m;
    }
    if (prefix) {
        fd_stream = open_out(prefix, ".stream");
        fd_unique = open_out(prefix, ".unique");
        void *m = mmap(NULL, sizeof(uint64_t) << SEEN_BITS, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        seen = m == MAP_FAILED ? NULL : m;
    }
    __atomic_store_n(&opened, 1, __ATOMIC_RELEASE);
}

/* Returns 1 the first time `h` is seen (a lock-free insert-only set). */
static int first_time(uint64_t h)
{
    if (!seen)
        return 0;
    if (h == 0)
        h = 1;
    uint64_t mask = (1ull << SEEN_BITS) - 1, i = (h >> 20) & mask;
    for (uint64_t probes = 0; probes < 4096; probes++, i = (i + 1) & mask) {
        uint64_t cur = __atomic_load_n(&seen[i], __ATOMIC_ACQUIRE);
        if (cur == h)
            return 0;
        if (cur == 0) {
            if (__atomic_compare_exchange_n(&seen[i], &cur, h, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return 1;
            if (cur == h)
                return 0;
        }
    }
    return 0;
}

static __attribute__((always_inline)) inline void record(void)
{
    if (!__atomic_load_n(&opened, __ATOMIC_ACQUIRE))
        open_files();
    if (fd_stream < 0)
        return;
    struct {
        uint32_t n, pad;
        uint64_t f[MAXF];
    } r;
    uint64_t h;
    /* skip 1: frames[0] is the return address into malloc's caller */
    int n = ht_capture(1, MAXF, (void **)r.f, &h);
    r.n = (uint32_t)n;
    r.pad = 0;
    size_t len = 8 + (size_t)n * 8;
    if (__atomic_fetch_add(&n_stream, 1, __ATOMIC_RELAXED) < limit)
        (void)!write(fd_stream, &r, len);
    if (first_time(h) && __atomic_fetch_add(&n_unique, 1, __ATOMIC_RELAXED) < limit)
        (void)!write(fd_unique, &r, len);
}

static void note(const void *p, int alloc)
{
    if (!addrs || !p)
        return;
    size_t i = __atomic_fetch_add(&n_addrs, 1, __ATOMIC_RELAXED);
    if (i < ADDRS_MAX)
        addrs[i] = (uint64_t)(uintptr_t)p << 1 | (uint64_t)alloc;
}

__attribute__((destructor)) static void write_addrs(void)
{
    const char *path = getenv("HT_STACKREC_ADDRS");
    if (!addrs || !path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t n = n_addrs < ADDRS_MAX ? n_addrs : ADDRS_MAX, left = n * sizeof *addrs;
    const char *b = (const char *)addrs;
    while (left) {
        ssize_t k = write(fd, b, left);
        if (k <= 0)
            break;
        b += k;
        left -= (size_t)k;
    }
    close(fd);
}

void *malloc(size_t size)
{
    if (!real_malloc) {
        if (resolving)
            return boot_alloc(size);
        resolve();
    }
    if (t_busy)
        return real_malloc(size);
    t_busy = 1;
    record();
    void *p = real_malloc(size);
    note(p, 1);
    t_busy = 0;
    return p;
}

void *calloc(size_t n, size_t size)
{
    if (!real_calloc) {
        if (resolving)
            return boot_alloc(n * size);
        resolve();
    }
    if (t_busy)
        return real_calloc(n, size);
    t_busy = 1;
    record();
    void *p = real_calloc(n, size);
    note(p, 1);
    t_busy = 0;
    return p;
}

void *realloc(void *old, size_t size)
{
    if (!real_realloc)
        resolve();
    if (in_boot(old)) {
        void *p = malloc(size);
        size_t room = (size_t)(boot + sizeof boot - (char *)old);
        if (p)
            memcpy(p, old, size < room ? size : room);
        return p;
    }
    if (t_busy)
        return real_realloc(old, size);
    t_busy = 1;
    record();
    void *p = real_realloc(old, size);
    if (p || !size)
        note(old, 0);   /* a failed realloc keeps the old block */
    note(p, 1);
    t_busy = 0;
    return p;
}

void free(void *p)
{
    if (!p || in_boot(p))
        return;
    if (!real_free)
        resolve();
    if (!t_busy)
        note(p, 0);
    real_free(p);
}
