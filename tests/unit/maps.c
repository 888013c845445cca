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
 * bounds that hold its sp.
 *
 * Also the parser of maps text read whole (ht__maps_next, the leak
 * check's): fields, flags and paths of crafted lines, lines that are not a
 * mapping's, a last line without a newline; and line for line the same
 * mappings as ht__maps_each over this process's own maps. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
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

static int path_is(const ht_maps_line_t *l, const char *want)
{
    return want ? l->path && l->path_len == strlen(want) && !memcmp(l->path, want, l->path_len) : !l->path;
}

static void crafted_text(void)
{
    static const char text[] =
        "00400000-00452000 r-xp 00001000 08:02 173521      /usr/bin/prog\n"
        "00651000-00652000 rw-s 00051000 08:02 42     /dev/zero (deleted)\n"
        "not a mapping\n"
        "\n"
        "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
        "7f0000021000-7f0000021000 rw-p 00000000 00:00 0\n"           /* empty: not a mapping */
        "55aa00000000-55aa00021000 rw-p 00000000 00:00 0                          [heap]";
    const char *p = text, *end = text + sizeof text - 1;
    ht_maps_line_t l;
    CHECK_EQ(ht__maps_next(&p, end, &l), 1);
    CHECK(l.lo == 0x400000 && l.hi == 0x452000 && l.off == 0x1000 && l.inode == 173521);
    CHECK(l.read && !l.write && l.exec && !l.shared);
    CHECK(path_is(&l, "/usr/bin/prog"));
    CHECK_EQ(ht__maps_next(&p, end, &l), 1);
    CHECK(l.lo == 0x651000 && l.hi == 0x652000 && l.off == 0x51000 && l.inode == 42);
    CHECK(l.read && l.write && !l.exec && l.shared);
    CHECK(path_is(&l, "/dev/zero (deleted)"));
    /* the two lines that are not a mapping's: skipped */
    CHECK_EQ(ht__maps_next(&p, end, &l), 1);
    CHECK(l.lo == 0x7f0000000000 && l.hi == 0x7f0000021000 && l.inode == 0 && path_is(&l, NULL));
    /* the empty mapping: skipped; the last line has no newline */
    CHECK_EQ(ht__maps_next(&p, end, &l), 1);
    CHECK(l.lo == 0x55aa00000000 && l.hi == 0x55aa00021000 && path_is(&l, "[heap]"));
    CHECK(p == end);
    CHECK_EQ(ht__maps_next(&p, end, &l), 0);
    CHECK(p == end);
    p = text + sizeof text - 1 - 6;     /* "[heap]" alone: no mapping */
    CHECK_EQ(ht__maps_next(&p, end, &l), 0);
    CHECK(p == end);
}

/* this process's maps, read whole, against ht__maps_each line by line */
static char g_text[1 << 20];
static ht_maps_line_t g_lines[4096];
static int g_nlines, g_seen, g_same;

static int against_text(const ht_maps_line_t *l, void *ctx)
{
    (void)ctx;
    if (g_seen < g_nlines) {
        const ht_maps_line_t *t = &g_lines[g_seen];
        size_t n = t->path_len < l->path_len ? t->path_len : l->path_len;
        g_same += t->lo == l->lo && t->hi == l->hi && t->off == l->off && t->inode == l->inode &&
                  t->read == l->read && t->write == l->write && t->exec == l->exec &&
                  t->shared == l->shared && !t->path == !l->path && (!n || !memcmp(t->path, l->path, n));
    }
    g_seen++;
    return 0;
}

static void own_text(void)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    CHECK(fd >= 0);
    size_t len = 0;
    ssize_t got;
    while ((got = read(fd, g_text + len, sizeof g_text - len)) > 0)
        len += (size_t)got;
    close(fd);
    CHECK(len > 0 && len < sizeof g_text);
    const char *p = g_text;
    int named = 0;
    while (g_nlines < 4096 && ht__maps_next(&p, g_text + len, &g_lines[g_nlines]))
        named += g_lines[g_nlines++].path != NULL;
    CHECK(g_nlines > 10 && named > 5);
    CHECK_EQ(ht__maps_each(against_text, NULL), 0);
    CHECK_EQ(g_seen, g_nlines);
    CHECK_EQ(g_same, g_nlines);
}

int main(void)
{
    crafted_text();
    own_text();
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
