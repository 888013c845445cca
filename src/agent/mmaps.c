/* mmaps.c -- anonymous mappings the program made itself (mmap, munmap,
 * mremap through the PLT; glibc's own mappings for malloc, stacks and
 * dlopen never pass here). A region reserved and never released is a
 * leak of address space, reported like a heap leak with kind "mmap".
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

typedef struct {
    uint64_t start, end;
    uint32_t stack;
    uint32_t origin;            /* the mmap call this piece comes from */
    uint32_t split;             /* other pieces of this origin may exist */
    uint32_t pad;
} region_t;

static ht_spinlock_t g_lock;
static region_t *g_reg;
static size_t g_n, g_cap;
static uint32_t g_next_origin = 1;

void ht__mmap_lock(void) { ht__spin_lock(&g_lock); }
void ht__mmap_unlock(void) { ht__spin_unlock(&g_lock); }

static int reserve_one(void)
{
    if (g_n < g_cap)
        return 0;
    size_t cap = g_cap ? g_cap * 2 : 256;
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
        found = 1;
        if (lo == r->start && hi == r->end) {
            uint64_t blocks = (r->split && has_other_piece(i, r->origin)) ? 0 : 1;
            release(r->stack, blocks, hi - lo);
            __builtin_memmove(r, r + 1, (g_n - i - 1) * sizeof(region_t));
            g_n--;
            continue;
        }
        release(r->stack, 0, hi - lo);
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

void ht__mmap_record(uintptr_t addr, uint64_t len, uint32_t stack)
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
                           .origin = g_next_origin++ };
    g_n++;
    ht__site_alloc(s, len);
}

void ht__mmaps_fork_prepare(void) { ht__spin_lock(&g_lock); }
void ht__mmaps_fork_parent(void) { ht__spin_unlock(&g_lock); }
void ht__mmaps_fork_child(void) { ht__spin_unlock(&g_lock); }
