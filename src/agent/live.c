/* live.c -- the live-allocation table: heap block address -> (requested
 * size, site record number; the site holds the stack id).
 *
 * 64 shards chosen by the hash of the block's 256-byte region, each an
 * open-addressing table with linear probing and backward-shift deletion
 * (no tombstones, so a miss ends at the first empty slot and never needs
 * a rehash to stay short), grown by doubling: at 1/2 load while small, at
 * 5/8 once large, when it also groups a region's blocks in one run of
 * slots (see home()). A shard's spin lock is held only for the
 * probe and store -- never across a call into libc -- so with the agent's
 * per-thread re-entry guard a thread never waits for itself, and threads
 * touching different shards never meet. fork() takes every shard lock
 * first, so the child inherits consistent tables.
 *
 * Entries are 16 bytes: {address | site[31:16] << 48, size | site[15:0]
 * << 48}. Memory per live block: 16 bytes / load, i.e. 26-43 bytes in a
 * large table.
 * Async-signal-safe, allocation-free (tables are mmap'd). */
#include "agent.h"
#include "../platform/linux-x86_64/unwind.h"

#define SHARD_BITS 6
#define NSHARDS    (1u << SHARD_BITS)
#define INIT_CAP   16u         /* 256 bytes: small live sets stay cache-resident */
#define LOW48      ((1ull << 48) - 1)

typedef struct { uint64_t key, val; } entry_t;

typedef struct {
    ht_spinlock_t lock;
    uint32_t pad;
    entry_t *tab;
    uint64_t mask;              /* capacity - 1 */
    uint64_t used;
    char pad2[32];
} __attribute__((aligned(64))) shard_t;

static shard_t g_shards[NSHARDS];
static uint64_t g_mapped;       /* bytes of tables mapped */

/* Small tables (< 64 KiB) are carved from one reserved arena instead of a
 * mapping each: 64 page-aligned tables would all fall in the same cache
 * sets. A small table outgrown is not reused (geometric growth bounds the
 * waste by the live size); large ones are mapped and unmapped. */
#define SMALL_MAX  (64u << 10)
#define ARENA_SIZE (256ull << 20)
static ht_spinlock_t g_arena_lock;
static char *g_arena;
static size_t g_arena_size;     /* ARENA_SIZE, less under an address-space limit */
static size_t g_arena_used;

static void *table_alloc(size_t bytes)
{
    if (bytes >= SMALL_MAX)
        return ht__map_table(bytes);
    void *p = NULL;
    ht__spin_lock(&g_arena_lock);
    if (!g_arena) {
        /* an eighth of heaptrail's address-space allowance at most */
        g_arena_size = (size_t)ht__reserve_share(8, ARENA_SIZE) & ~(size_t)4095;
        g_arena = g_arena_size ? ht__reserve(g_arena_size) : NULL;
    }
    if (g_arena && g_arena_used + bytes <= g_arena_size) {
        p = g_arena + g_arena_used;
        g_arena_used += bytes;
    }
    ht__spin_unlock(&g_arena_lock);
    return p ? p : ht__map(bytes);
}

static void table_free(void *p, size_t bytes)
{
    if (g_arena && (char *)p >= g_arena && (char *)p < g_arena + g_arena_size)
        return;
    ht__unmap(p, bytes);
}

static HT_ALWAYS_INLINE uint64_t mix(uint64_t x)
{
    uint64_t h = x * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

/* Blocks in one 256-byte region share a shard, and in a large table a run
 * of slots: programs free and allocate near what they last allocated or
 * freed (python3: 90% of calls within 256 bytes of one of the last eight),
 * so a large table's probes keep landing on lines already in the cache
 * instead of a random line each (a trace of python3's 13.8 million calls
 * replayed against a simulated cache: misses of an 8 MiB cache 0.42 ->
 * 0.20 a call, TLB misses 0.51 -> 0.13). Small tables hash block by
 * block: they stay in the cache anyway, and grouping lengthens probe runs
 * (sqlite3's trace: 3.8 -> 7.9 slots read a call; bench/livesim.c). */
#define REGION_BITS 8
#define REGION_POS  3           /* a large table's slots per region: one per 32 bytes */
#define LOCAL_MIN   (1u << 14)  /* slots (256 KiB): from here a table groups by region */

/* whether a table of mask + 1 slots is large (grouped by region) */
static HT_ALWAYS_INLINE int is_large(uint64_t mask) { return mask >= LOCAL_MIN - 1; }

static HT_ALWAYS_INLINE shard_t *shard_at(uint64_t region_hash)
{
    return &g_shards[(region_hash * 0xd6e8feb86659fd93ull) >> (64 - SHARD_BITS)];
}

static HT_ALWAYS_INLINE shard_t *shard_of(uintptr_t addr) { return shard_at(mix(addr >> REGION_BITS)); }

static HT_ALWAYS_INLINE uint64_t home_large(uint64_t region_hash, uintptr_t addr, uint64_t mask)
{
    return (region_hash << REGION_POS | ((addr >> 5) & ((1u << REGION_POS) - 1))) & mask;
}

/* the slot where addr's probe starts in a table of mask + 1 slots */
static HT_ALWAYS_INLINE uint64_t home(uintptr_t addr, uint64_t mask)
{
    if (!is_large(mask))
        return mix(addr >> 4) & mask;
    return home_large(mix(addr >> REGION_BITS), addr, mask);
}

/* A table grows at 5/8 full, a small one at 1/2: a region's blocks all go
 * to one shard, so allocations crowd into the shards of the regions in
 * use, and at 5/8 their probes doubled (sqlite3: 1.5 -> 2.9 slots an
 * insertion; at 1/2, 1.6). */
static HT_ALWAYS_INLINE int is_full(const shard_t *s)
{
    return (s->used + 1) * 8 > (s->mask + 1) * (is_large(s->mask) ? 5 : 4);
}

/* Doubles (or creates) a shard's table. Returns 0 or -1. */
static HT_NOINLINE int grow(shard_t *s)
{
    uint64_t cap = s->tab ? (s->mask + 1) * 2 : INIT_CAP;
    entry_t *t = table_alloc(cap * sizeof(entry_t));
    if (!t)
        return -1;
    ht_fetch_add(&g_mapped, cap * sizeof(entry_t));
    if (s->tab) {
        for (uint64_t i = 0; i <= s->mask; i++) {
            entry_t e = s->tab[i];
            if (!e.key)
                continue;
            uint64_t j = home(e.key & LOW48, cap - 1);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = e;
        }
        table_free(s->tab, (s->mask + 1) * sizeof(entry_t));
        __atomic_fetch_sub(&g_mapped, (s->mask + 1) * sizeof(entry_t), __ATOMIC_RELAXED);
    }
    /* (ht__live_prefetch reads both without the lock) */
    ht_store_relaxed(&s->tab, t);
    ht_store_relaxed(&s->mask, cap - 1);
    return 0;
}

int ht__live_insert(uintptr_t addr, uint64_t size, uint32_t site, uint32_t *old_site,
                    uint64_t *old_size)
{
    if (ht_unlikely((addr >> 48) != 0 || (size >> 48) != 0 || addr < 16)) {
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    shard_t *s = shard_of(addr);
    uint64_t key = addr | (uint64_t)(site >> 16) << 48;
    uint64_t val = size | (uint64_t)(site & 0xffff) << 48;
    int rc = 0;
    ht__lock(&s->lock);
    if (ht_unlikely(!s->tab || is_full(s)) && grow(s) != 0) {
        ht__unlock(&s->lock);
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    entry_t *t = s->tab;
    uint64_t m = s->mask, i = home(addr, m);
    for (;; i = (i + 1) & m) {
        uint64_t k = t[i].key;
        if (!k) {
            s->used++;
            break;
        }
        if ((k & LOW48) == addr) {
            /* present already: the block was released behind our back */
            *old_site = (uint32_t)(k >> 48) << 16 | (uint32_t)(t[i].val >> 48);
            *old_size = t[i].val & LOW48;
            rc = 1;
            break;
        }
    }
    t[i].key = key;
    t[i].val = val;
    ht__unlock(&s->lock);
    return rc;
}

int ht__live_remove(uintptr_t addr, uint64_t *size, uint32_t *site)
{
    shard_t *s = shard_of(addr);
    ht__lock(&s->lock);
    entry_t *t = s->tab;
    if (ht_unlikely(!t)) {
        ht__unlock(&s->lock);
        return 0;
    }
    uint64_t m = s->mask, i = home(addr, m);
    for (;; i = (i + 1) & m) {
        uint64_t k = t[i].key;
        if (!k) {
            ht__unlock(&s->lock);
            return 0;
        }
        if ((k & LOW48) == addr)
            break;
    }
    *site = (uint32_t)(t[i].key >> 48) << 16 | (uint32_t)(t[i].val >> 48);
    *size = t[i].val & LOW48;
    /* backward-shift deletion: pull later members of the run into the hole */
    uint64_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & m;
        uint64_t k = t[j].key;
        if (!k)
            break;
        uint64_t h = home(k & LOW48, m);
        /* move t[j] into the hole unless its home lies in (hole, j] */
        int stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!stays) {
            t[hole] = t[j];
            hole = j;
        }
    }
    t[hole].key = 0;
    t[hole].val = 0;
    s->used--;
    ht__unlock(&s->lock);
    return 1;
}

void ht__live_fork_prepare(void)
{
    for (unsigned i = 0; i < NSHARDS; i++)
        ht__spin_lock(&g_shards[i].lock);
}

void ht__live_fork_parent(void)
{
    for (unsigned i = 0; i < NSHARDS; i++)
        ht__spin_unlock(&g_shards[i].lock);
}

void ht__live_fork_child(void)
{
    for (unsigned i = 0; i < NSHARDS; i++)
        ht__spin_unlock(&g_shards[i].lock);
}

uint64_t ht__live_bytes_mapped(void) { return ht_load_relaxed(&g_mapped); }

uint64_t ht__live_count(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < NSHARDS; i++)
        n += ht_load_relaxed(&g_shards[i].used);
    return n;
}

size_t ht__live_copy(ht_live_block_t *out, size_t max)
{
    size_t n = 0;
    for (unsigned k = 0; k < NSHARDS; k++) {
        shard_t *s = &g_shards[k];
        ht__spin_lock(&s->lock);
        for (uint64_t i = 0; s->tab && i <= s->mask && n < max; i++) {
            entry_t e = s->tab[i];
            if (!e.key)
                continue;
            out[n].addr = e.key & LOW48;
            out[n].size = e.val & LOW48;
            out[n].site = (uint32_t)(e.key >> 48) << 16 | (uint32_t)(e.val >> 48);
            out[n].mark = 0;
            n++;
        }
        ht__spin_unlock(&s->lock);
    }
    return n;
}

/* Read without the shard's lock: a table being replaced meanwhile only
 * makes the prefetch useless (a prefetch never faults). */
void ht__live_prefetch(uintptr_t addr)
{
    uint64_t r = mix(addr >> REGION_BITS);
    shard_t *s = shard_at(r);
    uint64_t m = ht_load_relaxed(&s->mask);
    entry_t *t = ht_load_relaxed(&s->tab);
    if (is_large(m) && t)
        __builtin_prefetch(&t[home_large(r, addr, m)], 1);
}
