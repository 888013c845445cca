/* ownmalloc: a program that brings its own malloc, free, calloc and
 * realloc (a bump allocator over a static arena), as chromium does with
 * PartitionAlloc or a program linked statically with tcmalloc: the
 * executable comes first in the lookup order, so its calls and libc's
 * bind to these and never reach heaptrail's hooks. It leaks 10 blocks of
 * 100 bytes through them; heaptrail cannot count them and must say why.
 * With an argument it also maps (and leaks) one anonymous page through
 * mmap, which heaptrail does see.
 *
 * Its first malloc sets the allocator up under a lock and makes a
 * syscall() there, as PartitionAlloc does: a hook that allocates then (the
 * agent's first lookups did, through a dlsym that failed) re-enters it.
 * PartitionAlloc spins on its lock for good; this one says so and exits
 * with 99. Built as ownmalloc_early it is linked with libearlyinit.so,
 * whose constructor (run before the agent's) makes that first malloc,
 * so the syscall() is the first call to reach any hook. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static char arena[1 << 20] __attribute__((aligned(16)));
static size_t used;
static volatile int ready, setting_up;   /* (the compiler may not see a syscall() come back) */

static void set_up(void)
{
    if (setting_up) {
        static const char msg[] = "ownmalloc: malloc re-entered while it set itself up\n";
        if (write(2, msg, sizeof msg - 1) < 0)
            _exit(98);
        _exit(99);
    }
    setting_up = 1;
    uint64_t seed;
    syscall(SYS_getrandom, &seed, sizeof seed, 0);
    ready = 1;
    setting_up = 0;
}

void *malloc(size_t n)
{
    if (!ready)
        set_up();
    n = (n + 15) & ~(size_t)15;
    if (n > sizeof arena - used)
        return NULL;
    void *p = arena + used;
    used += n;
    return p;
}

void free(void *p) { (void)p; }

void *calloc(size_t k, size_t n)
{
    if (n && k > SIZE_MAX / n)
        return NULL;
    void *p = malloc(k * n);
    if (p)
        memset(p, 0, k * n);
    return p;
}

void *realloc(void *old, size_t n)
{
    void *p = malloc(n);
    if (p && old)
        memcpy(p, old, n);  /* bump allocation: old blocks lie below, so
                               reading n bytes from old stays inside the arena */
    return p;
}

void *volatile keep[10];

int main(int argc, char **argv)
{
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    if (argc > 1 && mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
        return 1;
    puts("ownmalloc: 10 blocks of 100 bytes from its own malloc");
    return 0;
}
