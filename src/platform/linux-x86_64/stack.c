/* stack.c -- where the stack a walk reads ends.
 *
 * Every load the unwinder makes from a stack is checked against
 * [sp, end of the mapping that holds sp), so a corrupt frame chain ends the
 * trace instead of faulting. The mapping is found once per thread, with
 * raw system calls (no malloc, no stdio: this runs inside malloc hooks and
 * signal handlers), and kept in initial-exec TLS. Since Linux 6.11 one
 * PROCMAP_QUERY ioctl on /proc/self/maps asks the kernel for the mapping
 * that holds an address; before that the text is read line by line up to
 * it, a line per mapping below the stack: in a program with 10,000
 * mappings that made every new thread cost ~2.8 ms (docs/BENCHMARKS.md).
 * A thread can run on more than one stack (sigaltstack, coroutines), so a
 * few ranges are kept. The thread's own stack (the mapping that holds
 * its TCB, or __libc_stack_end for the main thread) cannot go away while the
 * thread runs and is trusted for good. Any other range may have been
 * unmapped since it was cached (a finished coroutine's stack), so each use
 * re-checks with mincore() that the pages from sp upward are still mapped,
 * and bounds the walk to at most 1 MiB above sp there. */
#include "unwind.h"
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>

#define NRANGES 4

/* t_ranges[0] is the thread's own stack (unwind.h reads it inline); the
 * others are re-checked */
HT_TLS ht_stack_range_t t_ranges[NRANGES];
typedef ht_stack_range_t range_t;
static HT_TLS unsigned t_next;
extern void *__libc_stack_end;

#define CHECK_SPAN ((uintptr_t)1 << 20)

/* The end of what is still mapped of [lo, hi), at most CHECK_SPAN above
 * lo, or 0 if any of those pages is gone. */
static uintptr_t still_mapped(uintptr_t lo, uintptr_t hi)
{
    uintptr_t page = lo & ~(uintptr_t)4095;
    uintptr_t end = hi - page > CHECK_SPAN ? page + CHECK_SPAN : hi;
    unsigned char vec[CHECK_SPAN / 4096];
    if (ht__sys3(SYS_mincore, page, end - page, vec) != 0)
        return 0;
    return end;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* struct procmap_query of <linux/fs.h> (Linux 6.11), which older headers
 * lack. */
struct ht_procmap_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define HT_PROCMAP_QUERY 0xc0686611u /* _IOWR('f', 17, struct procmap_query) */
#define HT_PROCMAP_VMA_READABLE 1u
#define HT_ENOENT 2

/* Set when the kernel refuses the query (before 6.11: ENOTTY; a seccomp
 * filter: EPERM or ENOSYS), or by ht__maps_no_query: the text is read
 * from then on. */
static int g_no_query;

void ht__maps_no_query(void) { ht_store_relaxed(&g_no_query, 1); }

int ht__maps_query(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    if (ht_load_relaxed(&g_no_query))
        return -2;
    int fd = (int)ht__sys3(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -2;
    struct ht_procmap_query q = { .size = sizeof q, .query_addr = addr };
    long r = ht__sys3(SYS_ioctl, fd, HT_PROCMAP_QUERY, &q);
    ht__sys1(SYS_close, fd);
    if (r == -HT_ENOENT)
        return -1;
    if (r != 0) {
        ht_store_relaxed(&g_no_query, 1);
        return -2;
    }
    if (!(q.vma_flags & HT_PROCMAP_VMA_READABLE))
        return -1;
    *lo = (uintptr_t)q.vma_start;
    *hi = (uintptr_t)q.vma_end;
    return 0;
}

static const char *hexfield(const char *p, const char *e, uint64_t *v)
{
    *v = 0;
    while (p < e && hexval(*p) >= 0)
        *v = *v * 16 + (uint64_t)hexval(*p++);
    return p;
}

/* One line [p, e) into *l; 0 if it is not a mapping's line. A line longer
 * than ht__maps_each's buffer comes cut, and so does its path. */
static int parse_line(const char *p, const char *e, ht_maps_line_t *l)
{
    uint64_t v;
    p = hexfield(p, e, &v);
    l->lo = (uintptr_t)v;
    if (p == e || *p++ != '-')
        return 0;
    p = hexfield(p, e, &v);
    l->hi = (uintptr_t)v;
    if (e - p < 6 || *p++ != ' ')
        return 0;
    l->read = p[0] == 'r';
    l->write = p[1] == 'w';
    l->exec = p[2] == 'x';
    l->shared = p[3] == 's';
    p += 5;
    while (p < e && *p == ' ') p++;
    p = hexfield(p, e, &l->off);
    while (p < e && *p == ' ') p++;
    while (p < e && *p != ' ') p++;             /* dev */
    while (p < e && *p == ' ') p++;
    l->inode = 0;
    while (p < e && *p >= '0' && *p <= '9')
        l->inode = l->inode * 10 + (uint64_t)(*p++ - '0');
    while (p < e && *p == ' ') p++;
    l->path = p < e ? p : NULL;
    l->path_len = (size_t)(e - p);
    return l->hi > l->lo;
}

int ht__maps_next(const char **p, const char *end, ht_maps_line_t *l)
{
    while (*p < end) {
        const char *b = *p, *nl = b;
        while (nl < end && *nl != '\n')
            nl++;
        *p = nl < end ? nl + 1 : end;
        if (parse_line(b, nl, l))
            return 1;
    }
    return 0;
}

int ht__maps_each(int (*fn)(const ht_maps_line_t *, void *), void *ctx)
{
    int fd = (int)ht__sys3(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    char buf[512], line[160];
    size_t len = 0;
    int r = 0;
    while (!r) {
        long got = ht__sys3(SYS_read, fd, buf, sizeof buf);
        if (got <= 0)
            break;
        for (long i = 0; i < got && !r; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line)
                    line[len++] = buf[i];
                continue;
            }
            ht_maps_line_t l;
            if (parse_line(line, line + len, &l))
                r = fn(&l, ctx);
            len = 0;
        }
    }
    ht__sys1(SYS_close, fd);
    return r;
}

struct find { uintptr_t addr, lo, hi; };

/* Mappings do not overlap: the line that holds addr ends the read. */
static int find_line(const ht_maps_line_t *l, void *ctx)
{
    struct find *f = ctx;
    if (f->addr < l->lo || f->addr >= l->hi)
        return 0;
    f->lo = l->lo;
    f->hi = l->hi;
    return l->read ? 1 : 2;
}

int ht__maps_stream(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    struct find f = { addr, 0, 0 };
    if (ht__maps_each(find_line, &f) != 1)
        return -1;
    *lo = f.lo;
    *hi = f.hi;
    return 0;
}

int ht__stack_range_slow(uintptr_t sp, uintptr_t *lo_out, uintptr_t *hi)
{
    range_t *mine = &t_ranges[0];
    if (ht_likely(sp >= mine->lo && sp < mine->hi)) {
        *lo_out = mine->lo;
        *hi = mine->hi;
        return 0;
    }
    /* under a seccomp filter that could refuse the agent's system calls
     * (ht__sandboxed), none: only the main thread's stack is still known */
    int quiet = ht_load_relaxed(&ht__sandboxed);
    for (int i = 1; i < NRANGES && !quiet; i++) {
        range_t *r = &t_ranges[i];
        if (sp >= r->lo && sp < r->hi) {
            /* from the red zone below sp, which the walk may read */
            uintptr_t from = sp - r->lo >= 128 ? sp - 128 : r->lo;
            uintptr_t end = still_mapped(from, r->hi);
            if (!end)
                break;
            *lo_out = from;
            *hi = end;
            return 0;
        }
    }
    uintptr_t lo, h;
    int r = quiet ? -1 : ht__maps_query(sp, &lo, &h);
    if (r == -2)
        r = ht__maps_stream(sp, &lo, &h);
    if (r != 0) {
        /* no /proc, or no system calls: the main thread's stack is still known */
        uintptr_t top = (uintptr_t)__libc_stack_end;
        if (!top || sp >= top || top - sp > ((uintptr_t)1 << 30))
            return -1;
        lo = sp;
        h = top + 8;
    }
    uintptr_t tp = (uintptr_t)pthread_self(), top = (uintptr_t)__libc_stack_end;
    int own = (tp >= lo && tp < h) || (top >= lo && top < h);
    unsigned slot = own ? 0 : 1 + (t_next++ % (NRANGES - 1));
    t_ranges[slot].hi = 0;              /* never half-valid for a nested reader */
    ht_compiler_barrier();
    t_ranges[slot].lo = lo;
    ht_compiler_barrier();
    t_ranges[slot].hi = h;
    *lo_out = lo;
    *hi = own || h - sp <= CHECK_SPAN ? h : sp + CHECK_SPAN;
    return 0;
}
