/* maps.c -- finding the mapping that holds an address (stack.c), the
 * lookup behind every thread's stack bounds.
 *
 * The kernel's answer (PROCMAP_QUERY, one ioctl) and the text read line by
 * line (the fallback before Linux 6.11) must agree exactly, mapping by
 * mapping, on: the thread's own stack, another thread's stack, a region
 * cut into many mappings by alternating protections (readable ones found
 * with their exact bounds, PROT_NONE ones not found), an unmapped hole,
 * code, and the top and bottom bytes of a mapping. The last check starts a
 * thread in a process with 4,000 more mappings, whose stack is found with
 * bounds that hold its sp. */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "platform/linux-x86_64/unwind.h"
#include "check.h"

#define PAGE 4096
#define NPAGES 4000

static int g_query_works;

/* Both lookups of addr; checks they agree. Returns 1 if found. */
static int lookup(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t slo = 0, shi = 0, qlo = 0, qhi = 0;
    int s = ht__maps_stream(addr, &slo, &shi);
    int q = ht__maps_query(addr, &qlo, &qhi);
    if (g_query_works) {
        CHECK_EQ(q, s);
        if (q == 0 && s == 0) {
            CHECK_EQ(qlo, slo);
            CHECK_EQ(qhi, shi);
        }
    }
    if (s == 0) {
        CHECK(addr >= slo && addr < shi);
        *lo = slo;
        *hi = shi;
    }
    return s == 0;
}

static void *thread_main(void *arg)
{
    char here;
    uintptr_t sp = (uintptr_t)&here, lo, hi;
    CHECK(lookup(sp, &lo, &hi));
    /* the thread's TCB sits in its stack mapping */
    CHECK((uintptr_t)pthread_self() >= lo && (uintptr_t)pthread_self() < hi);
    CHECK_EQ(ht__stack_range(sp, &lo, &hi), 0);
    CHECK(sp >= lo && sp < hi);
    return arg;
}

int main(void)
{
    uintptr_t lo, hi, qlo, qhi;
    char here;
    int q = ht__maps_query((uintptr_t)&here, &qlo, &qhi);
    g_query_works = q != -2;
    if (!g_query_works)
        fprintf(stderr, "maps: this kernel has no PROCMAP_QUERY: the text alone is checked\n");
    else
        CHECK_EQ(q, 0);

    CHECK(lookup((uintptr_t)&here, &lo, &hi));          /* own stack */
    CHECK(lookup((uintptr_t)&main, &lo, &hi));          /* code */
    CHECK(lookup((uintptr_t)&printf, &lo, &hi));        /* libc's code */

    /* a region cut into NPAGES mappings: even pages readable, odd ones not */
    char *r = mmap(NULL, (size_t)(NPAGES + 2) * PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(r != MAP_FAILED);
    munmap(r + (size_t)(NPAGES + 1) * PAGE, PAGE);      /* a hole above it */
    munmap(r, PAGE);                                     /* and below it */
    char *b = r + PAGE;
    for (int i = 1; i < NPAGES; i += 2)
        mprotect(b + (size_t)i * PAGE, PAGE, PROT_NONE);
    int found = 0;
    for (int i = 0; i < NPAGES; i += 37) {
        uintptr_t a = (uintptr_t)b + (uintptr_t)i * PAGE + (uintptr_t)(i * 131) % PAGE;
        int f = lookup(a, &lo, &hi);
        CHECK_EQ(f, i % 2 == 0);
        if (f) {
            CHECK_EQ(lo, (uintptr_t)b + (uintptr_t)i * PAGE);
            CHECK_EQ(hi, lo + PAGE);
            found++;
        }
    }
    CHECK(found > 40);
    CHECK(lookup((uintptr_t)b, &lo, &hi));                       /* first byte */
    CHECK(lookup((uintptr_t)b + PAGE - 1, &lo, &hi));            /* last byte */
    CHECK(!lookup((uintptr_t)b - 1, &lo, &hi));                  /* the hole below */
    CHECK(!lookup((uintptr_t)b + (size_t)NPAGES * PAGE, &lo, &hi)); /* above */
    CHECK(!lookup(0x1000, &lo, &hi));
    CHECK(!lookup((uintptr_t)1 << 46, &lo, &hi));

    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_main, NULL), 0);
    pthread_join(t, NULL);
    munmap(b, (size_t)NPAGES * PAGE);
    return check_done();
}
