/* custom.c -- blocks of the program's own allocators, as it announces them
 * (ht_custom_alloc, ht_custom_free): block address -> (size, site record
 * number), apart from the live table of heap blocks.
 *
 * Apart because such a block lies inside memory the agent counts already
 * (a pool's superblock from malloc, an arena's mapping): its address is
 * often that very heap block's (a pool's first object), and one table
 * keyed by address would take the one for the other. The leak check
 * judges them as blocks of their own (reach.c: ht__custom_copy).
 *
 * One open-addressing table with linear probing and backward-shift
 * deletion (as live.c's small tables), under one spin lock (the site and
 * live-table locks' solo rule applies: callers bracket it with
 * ht__solo_enter); grown by doubling at 1/2 load. A program announces
 * blocks it already pays a stack capture for, so one lock is not where
 * its time goes. Async-signal-safe (with the agent's re-entry guard),
 * allocation-free (tables are mapped). */
#include "agent.h"

typedef struct {
    uint64_t addr;              /* 0: empty */
    uint64_t size;
    uint32_t site, pad;
} cblock_t;

#define INIT_CAP 256u

static ht_spinlock_t g_lock;
static cblock_t *g_tab;
static uint64_t g_mask, g_used;     /* capacity - 1; blocks held */

static HT_ALWAYS_INLINE uint64_t home(uint64_t addr)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ull;
    return (h ^ (h >> 31)) & g_mask;
}

/* doubles the table (or makes the first); 0, or -1 out of memory */
static HT_NOINLINE int grow(void)
{
    uint64_t cap = g_tab ? (g_mask + 1) * 2 : INIT_CAP;
    cblock_t *t = ht__map(cap * sizeof *t);
    if (!t)
        return -1;
    cblock_t *old = g_tab;
    uint64_t old_cap = old ? g_mask + 1 : 0;
    g_tab = t;
    g_mask = cap - 1;
    for (uint64_t i = 0; i < old_cap; i++) {
        if (!old[i].addr)
            continue;
        uint64_t j = home(old[i].addr);
        while (t[j].addr)
            j = (j + 1) & g_mask;
        t[j] = old[i];
    }
    if (old)
        ht__unmap(old, old_cap * sizeof *old);
    return 0;
}

int ht__custom_insert(uintptr_t addr, uint64_t size, uint32_t site, uint32_t *old_site,
                      uint64_t *old_size)
{
    int rc = 0;
    ht__lock(&g_lock);
    if (ht_unlikely(!g_tab || (g_used + 1) * 2 > g_mask + 1) && grow() != 0) {
        ht__unlock(&g_lock);
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    uint64_t i = home(addr);
    for (;; i = (i + 1) & g_mask) {
        if (!g_tab[i].addr) {
            g_used++;
            break;
        }
        if (g_tab[i].addr == addr) {
            /* announced again without a free: the earlier block ends here */
            *old_site = g_tab[i].site;
            *old_size = g_tab[i].size;
            rc = 1;
            break;
        }
    }
    g_tab[i] = (cblock_t){ addr, size, site, 0 };
    ht__unlock(&g_lock);
    return rc;
}

/* Empties slot i: backward shift, pulling later members of the run into
 * the hole unless their home lies in (hole, j]. */
static void delete_at(uint64_t i)
{
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & g_mask; g_tab[j].addr; j = (j + 1) & g_mask) {
        uint64_t h = home(g_tab[j].addr);
        int stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!stays) {
            g_tab[hole] = g_tab[j];
            hole = j;
        }
    }
    g_tab[hole] = (cblock_t){ 0, 0, 0, 0 };
    g_used--;
}

int ht__custom_remove(uintptr_t addr, uint64_t *size, uint32_t *site)
{
    int rc = 0;
    ht__lock(&g_lock);
    if (!g_tab)
        goto out;
    uint64_t i = home(addr);
    for (;; i = (i + 1) & g_mask) {
        if (!g_tab[i].addr)
            goto out;
        if (g_tab[i].addr == addr)
            break;
    }
    *size = g_tab[i].size;
    *site = g_tab[i].site;
    rc = 1;
    delete_at(i);
out:
    ht__unlock(&g_lock);
    return rc;
}

void ht__custom_remove_range(uintptr_t lo, uintptr_t hi, void (*ended)(uint32_t site, uint64_t size))
{
    ht__lock(&g_lock);
    /* a deletion pulls members of slot i's run into slots i and after,
     * never before: slot i is looked at again, the later ones in turn */
    for (uint64_t i = 0; g_used && i <= g_mask; i++) {
        while (g_tab[i].addr - lo < hi - lo) {
            ended(g_tab[i].site, g_tab[i].size);
            delete_at(i);
        }
    }
    ht__unlock(&g_lock);
}

uint64_t ht__custom_count(void) { return ht_load_relaxed(&g_used); }

/* Under the plain spin lock, as ht__live_copy takes the shards' (the leak
 * check's caller has stopped the program's other threads, or is a scan
 * child alone in its copy of the process). */
size_t ht__custom_copy(ht_live_block_t *out, size_t max)
{
    size_t n = 0;
    ht__spin_lock(&g_lock);
    for (uint64_t i = 0; g_tab && i <= g_mask && n < max; i++) {
        if (!g_tab[i].addr)
            continue;
        out[n] = (ht_live_block_t){ g_tab[i].addr, g_tab[i].size, g_tab[i].site, 0 };
        n++;
    }
    ht__spin_unlock(&g_lock);
    return n;
}

void ht__custom_release(void)
{
    if (g_tab)
        ht__unmap(g_tab, (g_mask + 1) * sizeof *g_tab);
    g_tab = NULL;
    g_mask = g_used = 0;
}

void ht__custom_fork_prepare(void) { ht__spin_lock(&g_lock); }
void ht__custom_fork_parent(void) { ht__spin_unlock(&g_lock); }
void ht__custom_fork_child(void) { ht__spin_unlock(&g_lock); }
