/* mmaps.c -- anonymous mappings the program made itself (mmap, munmap,
 * mremap through the PLT; glibc's own mappings for malloc, stacks and
 * dlopen never pass here). A region reserved and never released is a
 * leak of address space, reported like a heap leak with kind "mmap".
 *
 * A region's bytes are its accessible pages: the parts mapped or
 * mprotect'ed PROT_NONE are address space reserved, not memory (a JVM
 * reserves its heap's maximum, V8 and wasmtime gigabytes of cages and
 * guard regions, chromium 55 GB, and use a fraction of it; as Windows
 * tells MEM_RESERVE from MEM_COMMIT). Such a region still counts as a
 * block, of 0 bytes while nothing in it is accessible; mprotect over a
 * tracked range makes its pages count (grow) or stop counting (release).
 *
 * Regions are kept in one sorted array under a spin lock: mmap is a system
 * call already, so the lock costs nothing that matters, and the hooks hold
 * it across munmap/mremap so no other thread can map and record a range
 * between the kernel releasing it and us forgetting it. A region punched
 * in the middle becomes two pieces of one block: the block's count drops
 * when its last piece goes.
 * Async-signal-safe (with the agent's re-entry guard), allocation-free. */
#include "agent.h"
#include "../format/trace.h"
#include <sys/mman.h>

typedef struct {
    uint64_t start, end;
    uint32_t stack;
    uint32_t origin;            /* the mmap call this piece comes from */
    uint32_t split;             /* other pieces of this origin may exist */
    uint32_t none;              /* PROT_NONE: reserved, its bytes not counted */
} region_t;

static ht_spinlock_t g_lock;
static region_t *g_reg;
static size_t g_n, g_cap;
static uint32_t g_next_origin = 1;

void ht__mmap_lock(void) { ht__spin_lock(&g_lock); }
void ht__mmap_unlock(void) { ht__spin_unlock(&g_lock); }

/* room for k more pieces */
static int reserve(size_t k)
{
    if (g_n + k <= g_cap)
        return 0;
    size_t cap = g_cap ? g_cap * 2 : 256;
    while (cap < g_n + k)
        cap *= 2;
    region_t *r = ht__map(cap * sizeof(region_t));
    if (!r)
        return -1;
    if (g_reg) {
        __builtin_memcpy(r, g_reg, g_n * sizeof(region_t));
        ht__unmap(g_reg, g_cap * sizeof(region_t));
    }
    g_reg = r;
    g_cap = cap;
    return 0;
}

static int reserve_one(void) { return reserve(1); }

/* index of the first region with end > a */
static size_t first_after(uint64_t a)
{
    size_t lo = 0, hi = g_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_reg[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void release(uint32_t stack, uint64_t blocks, uint64_t bytes)
{
    ht_site_t *s = ht__site_get(stack, HT_KIND_MMAP);
    if (s)
        ht__site_release(s, blocks, bytes);
}

static int has_other_piece(size_t skip, uint32_t origin)
{
    for (size_t i = 0; i < g_n; i++)
        if (i != skip && g_reg[i].origin == origin)
            return 1;
    return 0;
}

static HT_ALWAYS_INLINE uint64_t counted(const region_t *r, uint64_t bytes) { return r->none ? 0 : bytes; }

int ht__mmap_forget(uintptr_t addr, uint64_t len)
{
    uint64_t a = addr, b = addr + len;
    int found = 0;
    if (len == 0 || b < a)
        return 0;
    size_t i = first_after(a);
    while (i < g_n && g_reg[i].start < b) {
        region_t *r = &g_reg[i];
        uint64_t lo = r->start > a ? r->start : a, hi = r->end < b ? r->end : b;
        found |= r->none ? 1 : 2;
        if (lo == r->start && hi == r->end) {
            uint64_t blocks = (r->split && has_other_piece(i, r->origin)) ? 0 : 1;
            release(r->stack, blocks, counted(r, hi - lo));
            __builtin_memmove(r, r + 1, (g_n - i - 1) * sizeof(region_t));
            g_n--;
            continue;
        }
        release(r->stack, 0, counted(r, hi - lo));
        if (lo == r->start) {
            r->start = hi;
        } else if (hi == r->end) {
            r->end = lo;
        } else {
            /* a hole in the middle: two pieces of one block */
            if (reserve_one() != 0) {
                /* cannot split: keep the whole region and count the loss */
                ht_fetch_add(&ht__drops.table_full, 1);
                r->end = lo;
                return found;
            }
            r = &g_reg[i];
            __builtin_memmove(r + 2, r + 1, (g_n - i - 1) * sizeof(region_t));
            g_n++;
            r[1] = r[0];
            r[1].start = hi;
            r[0].end = lo;
            r[0].split = r[1].split = 1;
            i++;
        }
        i++;
    }
    return found;
}

static HT_ALWAYS_INLINE uint32_t is_none(int prot) { return !(prot & (PROT_READ | PROT_WRITE | PROT_EXEC)); }

void ht__mmap_record(uintptr_t addr, uint64_t len, uint32_t stack, int prot)
{
    ht_site_t *s = ht__site_get(stack, HT_KIND_MMAP);
    if (!s || len == 0)
        return;
    ht__mmap_forget(addr, len);     /* stale entries the kernel already reused */
    if (reserve_one() != 0) {
        ht_fetch_add(&ht__drops.table_full, 1);
        return;
    }
    size_t i = first_after(addr);
    __builtin_memmove(&g_reg[i + 1], &g_reg[i], (g_n - i) * sizeof(region_t));
    g_reg[i] = (region_t){ .start = addr, .end = addr + len, .stack = stack,
                           .origin = g_next_origin++, .none = is_none(prot) };
    g_n++;
    ht__site_alloc(s, 1, counted(&g_reg[i], len));
}

/* Piece i becomes [start, at) and [at, end) (start < at < end; a slot is
 * reserved). */
static void split_at(size_t i, uint64_t at)
{
    region_t *r = &g_reg[i];
    __builtin_memmove(r + 2, r + 1, (g_n - i - 1) * sizeof(region_t));
    g_n++;
    r[1] = r[0];
    r[1].start = at;
    r[0].end = at;
    r[0].split = r[1].split = 1;
}

/* Pieces from..to (indices, to included) joined with their right
 * neighbour where they are one origin's, adjacent and alike: a program
 * that flips pages back and forth does not grow the array. */
static void join_pieces(size_t from, size_t to)
{
    for (size_t j = from; j <= to && j + 1 < g_n;) {
        region_t *p = &g_reg[j], *q = p + 1;
        if (p->end == q->start && p->origin == q->origin && p->none == q->none) {
            p->end = q->end;
            __builtin_memmove(q, q + 1, (g_n - j - 2) * sizeof(region_t));
            g_n--;
            if (to > j)
                to--;
            continue;
        }
        j++;
    }
}

void ht__mmap_protect(uintptr_t addr, uint64_t len, int prot)
{
    uint64_t a = addr, b = addr + len;
    uint32_t none = is_none(prot);
    if (len == 0 || b < a)
        return;
    size_t i = first_after(a), first = i, last = i;
    int changed = 0;
    while (i < g_n && g_reg[i].start < b) {
        region_t *r = &g_reg[i];
        if (r->none == none) {
            i++;
            continue;
        }
        uint64_t lo = r->start > a ? r->start : a, hi = r->end < b ? r->end : b;
        if (reserve((lo > r->start) + (hi < r->end)) != 0) {
            /* cannot split: the piece keeps its old state, counted lost */
            ht_fetch_add(&ht__drops.table_full, 1);
            i++;
            continue;
        }
        if (lo > g_reg[i].start)
            split_at(i++, lo);
        if (hi < g_reg[i].end)
            split_at(i, hi);
        r = &g_reg[i];
        ht_site_t *s = ht__site_get(r->stack, HT_KIND_MMAP);
        if (s) {
            if (none)
                ht__site_release(s, 0, hi - lo);
            else
                ht__site_grow(s, hi - lo);
        }
        r->none = none;
        changed = 1;
        last = i++;
    }
    if (changed)
        join_pieces(first ? first - 1 : 0, last);
}

/* heaptrail detach, once no thread can be inside the agent (agent.c) */
void ht__mmaps_release(void)
{
    if (g_reg)
        ht__unmap(g_reg, g_cap * sizeof(region_t));
    g_reg = NULL;
    g_n = g_cap = 0;
}

void ht__mmaps_fork_prepare(void) { ht__spin_lock(&g_lock); }
void ht__mmaps_fork_parent(void) { ht__spin_unlock(&g_lock); }
void ht__mmaps_fork_child(void) { ht__spin_unlock(&g_lock); }
