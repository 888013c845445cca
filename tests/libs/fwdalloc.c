/* fwdalloc: a malloc replacement in a shared library, as jemalloc or
 * tcmalloc ship (here it forwards to glibc's __libc_* entry points and
 * counts its calls). Preloaded after heaptrail's agent (`LD_PRELOAD=
 * libfwdalloc.so heaptrail run -- prog`), it is what the agent's hooks
 * call next: every block is seen, and no warning about an allocator of
 * the program's own is due. At exit it prints how many calls it served
 * and in which program, so the test knows they went through it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);

static unsigned long served;

void *malloc(size_t n) { served++; return __libc_malloc(n); }
void free(void *p) { served++; __libc_free(p); }
void *calloc(size_t k, size_t n) { served++; return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { served++; return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { served++; return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { served++; return __libc_memalign(a, n); }
void *valloc(size_t n) { served++; return __libc_valloc(n); }

int posix_memalign(void **out, size_t a, size_t n)
{
    served++;
    if (a < sizeof(void *) || (a & (a - 1)))
        return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void report(void)
{
    char buf[128];
    int k = snprintf(buf, sizeof buf, "fwdalloc: %lu calls in %s\n", served, program_invocation_short_name);
    if (k > 0 && write(2, buf, (size_t)k) < 0)
        served = 0;
}
