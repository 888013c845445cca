/* addrlog.c -- an LD_PRELOAD recorder of a program's heap calls, for
 * bench/livesim.c: every malloc, calloc and realloc result and every free
 * as one 64-bit word (address << 1 | 1 for an allocation, address << 1 for
 * a release), written to $ADDRLOG_OUT when the program exits.
 *
 *   cc -O2 -shared -fPIC bench/addrlog.c -o /tmp/addrlog.so -ldl
 *   ADDRLOG_OUT=/tmp/py.log PYTHONMALLOC=malloc LD_PRELOAD=/tmp/addrlog.so \
 *       /usr/bin/python3 ../shared/workloads/python-workload.py
 *
 * Single-threaded programs only (the log is not locked). dlsym's own
 * allocations before the real functions are known come from a static
 * arena and are not logged. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOG_MAX (256u << 20)    /* words reserved (2 GiB of address space) */

static uint64_t *g_log;
static size_t g_n;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int g_resolving;
static char g_boot[64 << 10] __attribute__((aligned(16)));
static size_t g_boot_used;

static int is_boot(const void *p)
{
    return (const char *)p >= g_boot && (const char *)p < g_boot + sizeof g_boot;
}

static void *boot_alloc(size_t n)
{
    void *p = g_boot + g_boot_used;
    g_boot_used += (n + 15) & ~(size_t)15;
    return g_boot_used <= sizeof g_boot ? p : NULL;     /* zeroed: static */
}

static void resolve(void)
{
    g_resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    g_log = mmap(NULL, LOG_MAX * sizeof *g_log, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_log == MAP_FAILED)
        g_log = NULL;
    g_resolving = 0;
}

static void note(const void *p, int alloc)
{
    if (g_log && g_n < LOG_MAX)
        g_log[g_n++] = (uint64_t)(uintptr_t)p << 1 | (uint64_t)alloc;
}

void *malloc(size_t n)
{
    if (!real_malloc) {
        if (g_resolving)
            return boot_alloc(n);
        resolve();
    }
    void *p = real_malloc(n);
    if (p)
        note(p, 1);
    return p;
}

void *calloc(size_t k, size_t n)
{
    if (!real_calloc) {
        if (g_resolving)
            return boot_alloc(k * n);
        resolve();
    }
    void *p = real_calloc(k, n);
    if (p)
        note(p, 1);
    return p;
}

void *realloc(void *old, size_t n)
{
    if (!real_realloc)
        resolve();
    if (is_boot(old)) {
        void *p = malloc(n);
        size_t room = (size_t)(g_boot + sizeof g_boot - (char *)old);
        if (p)
            memcpy(p, old, n < room ? n : room);
        return p;
    }
    if (old)
        note(old, 0);
    void *p = real_realloc(old, n);
    if (p)
        note(p, 1);
    return p;
}

void free(void *p)
{
    if (!p || is_boot(p))
        return;
    if (!real_free)
        resolve();
    note(p, 0);
    real_free(p);
}

__attribute__((destructor)) static void write_log(void)
{
    const char *path = getenv("ADDRLOG_OUT");
    if (!path || !g_log)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    const char *b = (const char *)g_log;
    size_t left = g_n * sizeof *g_log;
    while (left) {
        ssize_t k = write(fd, b, left);
        if (k <= 0)
            break;
        b += k;
        left -= (size_t)k;
    }
    close(fd);
}
