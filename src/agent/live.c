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
 * Two entry forms. Wide, 16 bytes: {address | site[31:16] << 48, size |
 * site[15:0] << 48}, in small tables and wherever the narrow form cannot
 * hold a block. Narrow, 8 bytes, in large tables: {address >> 3 | pair
 * << 44}, where the pair number names a (site, size) combination in a
 * process-wide table of pairs (programs make millions of blocks from a
 * few thousand of them: python3 under PYTHONMALLOC=malloc, 2.7 million
 * live blocks from 7,200 pairs). A block the narrow form cannot hold
 * (address not 8-aligned or above 2^47, or the pair table full) turns
 * its shard back to wide entries for good. Memory per live block in a
 * large table: 8 bytes / load, 13-26 bytes (wide: 26-51).
 * Async-signal-safe, allocation-free (tables are mmap'd). */
#include "agent.h"
#include "../platform/linux-x86_64/unwind.h"

#define SHARD_BITS 6
#define NSHARDS    (1u << SHARD_BITS)
#define INIT_CAP   16u         /* 256 bytes: small live sets stay cache-resident */
#define LOW48      ((1ull << 48) - 1)
#define KEY_BITS   44          /* a narrow entry's address >> 3 */
#define KEY_MASK   ((1ull << KEY_BITS) - 1)

typedef struct { uint64_t key, val; } entry_t;     /* wide */

typedef struct {
    ht_spinlock_t lock;
    uint8_t narrow;             /* tab holds narrow entries */
    uint8_t wide_only;          /* met a block the narrow form cannot hold */
    uint16_t pad;
    void *tab;
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
    if (!p)
        return ht__map_populated(bytes);
    /* a table is written all over as it fills: its pages at once (sqlite3's
     * growing tables took 113 page faults one at a time) */
    ht__populate(p, bytes);
    return p;
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

/* ---- pairs: (site, size) -> a number from 1 to g_pairs_cap ----------- */
/* Numbers are handed out in order and never taken back, so a pair's
 * record never moves or changes: a free decodes its block's pair with one
 * load. Finding a pair's number reads an index (open addressing, 4-byte
 * numbers) without a lock; only a new pair takes g_pair_lock, which is
 * always taken last (inside a shard lock). An outgrown index is kept
 * mapped: a reader may still be probing it, and misses there only send
 * it to the lock. Bounded: at most 2^20 - 1 pairs (16 MiB reserved,
 * committed as used); then new pairs are refused and blocks go wide. */
#define PAIR_BITS  20
#define PAIR_MAX   ((1u << PAIR_BITS) - 1)
#define PAIR_STEP  4096u        /* pairs committed at a time (64 KiB) */

typedef struct { uint64_t size; uint32_t site, pad; } pair_t;
typedef struct { uint64_t mask; uint32_t slot[]; } pair_index_t;

static ht_spinlock_t g_pair_lock;
static pair_t *g_pairs;         /* [1 .. g_pairs_cap], reserved */
static uint32_t g_pairs_cap;    /* 0: not reserved yet */
static uint32_t g_npairs, g_pairs_committed;
static int g_pairs_full;        /* refused one: no table turns narrow now (read unlocked) */
static pair_index_t *g_pair_index;
static size_t g_pairs_bytes;    /* reserved for g_pairs */
/* outgrown indexes, kept mapped (see above) until a detach gives them back */
static pair_index_t *g_pair_old[PAIR_BITS + 2];
static unsigned g_npair_old;

static HT_ALWAYS_INLINE uint64_t pair_hash(uint32_t site, uint64_t size)
{
    return mix(size ^ (uint64_t)site << 32);
}

static HT_ALWAYS_INLINE uint32_t pair_find(const pair_index_t *x, uint32_t site, uint64_t size,
                                           uint64_t h)
{
    for (uint64_t i = h & x->mask;; i = (i + 1) & x->mask) {
        uint32_t id = ht_load_acquire(&x->slot[i]);
        if (!id || (g_pairs[id].size == size && g_pairs[id].site == site))
            return id;
    }
}

static pair_index_t *pair_index_new(uint64_t slots)
{
    pair_index_t *x = ht__map(sizeof *x + slots * sizeof x->slot[0]);
    if (x) {
        x->mask = slots - 1;
        ht_fetch_add(&g_mapped, sizeof *x + slots * sizeof x->slot[0]);
    }
    return x;
}

/* Puts pair `id` (hash h) in the first free slot of its probe run; the
 * release store makes the record written before it visible to readers. */
static void pair_index_put(pair_index_t *x, uint64_t h, uint32_t id)
{
    uint64_t i = h & x->mask;
    while (x->slot[i])
        i = (i + 1) & x->mask;
    ht_store_release(&x->slot[i], id);
}

/* A new pair's number, or 0 (full, or out of memory). */
static HT_NOINLINE uint32_t pair_add(uint32_t site, uint64_t size, uint64_t h)
{
    uint32_t id = 0;
    ht__lock(&g_pair_lock);
    if (!g_pairs_cap && !g_pairs_full) {
        size_t bytes = (size_t)ht__reserve_share(16, (PAIR_MAX + 1ull) * sizeof(pair_t));
        bytes &= ~(size_t)(PAIR_STEP * sizeof(pair_t) - 1);     /* whole steps */
        g_pairs = bytes >= 2 * PAIR_STEP * sizeof(pair_t) ? ht__reserve(bytes) : NULL;
        g_pairs_bytes = bytes;
        g_pair_index = g_pairs ? pair_index_new(2 * PAIR_STEP) : NULL;
        if (g_pairs && g_pair_index)
            g_pairs_cap = (uint32_t)(bytes / sizeof(pair_t)) - 1;
        else
            ht_store_relaxed(&g_pairs_full, 1);
    }
    pair_index_t *x = g_pair_index;
    if (x && (id = pair_find(x, site, size, h)) != 0)
        goto out;
    if (g_npairs >= g_pairs_cap)
        goto refuse;
    if (g_npairs + 1 >= g_pairs_committed) {
        /* the record after the last stays inside the reservation: +1 */
        if (ht__commit(g_pairs + g_pairs_committed, PAIR_STEP * sizeof(pair_t)) != 0)
            goto refuse;
        g_pairs_committed += PAIR_STEP;
        ht_fetch_add(&g_mapped, PAIR_STEP * sizeof(pair_t));
    }
    if ((g_npairs + 1ull) * 2 > x->mask + 1) {
        pair_index_t *y = pair_index_new((x->mask + 1) * 2);
        if (!y)
            goto refuse;
        for (uint32_t k = 1; k <= g_npairs; k++)
            pair_index_put(y, pair_hash(g_pairs[k].site, g_pairs[k].size), k);
        ht_store_release(&g_pair_index, y);
        if (g_npair_old < HT_ARRAY_SIZE(g_pair_old))
            g_pair_old[g_npair_old++] = x;
        x = y;
    }
    id = ++g_npairs;
    g_pairs[id].size = size;
    g_pairs[id].site = site;
    pair_index_put(x, h, id);
    goto out;
refuse:
    ht_store_relaxed(&g_pairs_full, 1);
out:
    ht__unlock(&g_pair_lock);
    return id;
}

/* (site, size)'s pair number, or 0 when the pair table cannot take it */
static HT_ALWAYS_INLINE uint32_t pair_id(uint32_t site, uint64_t size)
{
    uint64_t h = pair_hash(site, size);
    const pair_index_t *x = ht_load_acquire(&g_pair_index);
    uint32_t id = x ? pair_find(x, site, size, h) : 0;
    return ht_likely(id) ? id : pair_add(site, size, h);
}

/* ---- slots of either form ----------------------------------------------- */
static HT_ALWAYS_INLINE int narrow_fits(uintptr_t addr) { return (addr & 7) == 0 && addr >> 47 == 0; }

static HT_ALWAYS_INLINE uint64_t narrow_entry(uintptr_t addr, uint32_t id)
{
    return addr >> 3 | (uint64_t)id << KEY_BITS;
}

/* the block address in slot i, 0 if empty */
static HT_ALWAYS_INLINE uintptr_t slot_addr(const void *t, uint64_t i, int narrow)
{
    if (narrow)
        return (uintptr_t)(((const uint64_t *)t)[i] & KEY_MASK) << 3;
    return ((const entry_t *)t)[i].key & LOW48;
}

static HT_ALWAYS_INLINE void slot_read(const void *t, uint64_t i, int narrow, uint64_t *size,
                                       uint32_t *site)
{
    if (narrow) {
        const pair_t *p = &g_pairs[((const uint64_t *)t)[i] >> KEY_BITS];
        *size = p->size;
        *site = p->site;
    } else {
        const entry_t *e = &((const entry_t *)t)[i];
        *size = e->val & LOW48;
        *site = (uint32_t)(e->key >> 48) << 16 | (uint32_t)(e->val >> 48);
    }
}

static HT_ALWAYS_INLINE void slot_write_wide(void *t, uint64_t i, uintptr_t addr, uint64_t size,
                                             uint32_t site)
{
    entry_t *e = &((entry_t *)t)[i];
    e->key = addr | (uint64_t)(site >> 16) << 48;
    e->val = size | (uint64_t)(site & 0xffff) << 48;
}

static HT_ALWAYS_INLINE void slot_move(void *t, uint64_t to, uint64_t from, int narrow)
{
    if (narrow)
        ((uint64_t *)t)[to] = ((uint64_t *)t)[from];
    else
        ((entry_t *)t)[to] = ((entry_t *)t)[from];
}

static HT_ALWAYS_INLINE void slot_clear(void *t, uint64_t i, int narrow)
{
    if (narrow)
        ((uint64_t *)t)[i] = 0;
    else
        ((entry_t *)t)[i] = (entry_t){0, 0};
}

static HT_ALWAYS_INLINE size_t slot_bytes(int narrow) { return narrow ? 8 : sizeof(entry_t); }

/* Rebuilds a shard's table with `cap` slots of the given form. Returns 0,
 * -1 out of memory, -2 a block the narrow form cannot hold (the shard's
 * table is then unchanged). */
static int rebuild(shard_t *s, uint64_t cap, int narrow)
{
    void *t = table_alloc(cap * slot_bytes(narrow));
    if (!t)
        return -1;
    void *o = s->tab;
    int was = s->narrow;
    for (uint64_t i = 0; o && i <= s->mask; i++) {
        uintptr_t a = slot_addr(o, i, was);
        if (!a)
            continue;
        uint64_t j = home(a, cap - 1);
        while (slot_addr(t, j, narrow))
            j = (j + 1) & (cap - 1);
        if (narrow && was) {
            ((uint64_t *)t)[j] = ((uint64_t *)o)[i];
            continue;
        }
        uint64_t size;
        uint32_t site;
        slot_read(o, i, was, &size, &site);
        if (!narrow) {
            slot_write_wide(t, j, a, size, site);
            continue;
        }
        uint32_t id = narrow_fits(a) ? pair_id(site, size) : 0;
        if (!id) {
            table_free(t, cap * slot_bytes(narrow));
            return -2;
        }
        ((uint64_t *)t)[j] = narrow_entry(a, id);
    }
    ht_fetch_add(&g_mapped, cap * slot_bytes(narrow));
    if (o) {
        table_free(o, (s->mask + 1) * slot_bytes(was));
        __atomic_fetch_sub(&g_mapped, (s->mask + 1) * slot_bytes(was), __ATOMIC_RELAXED);
    }
    /* (ht__live_prefetch reads these without the lock) */
    ht_store_relaxed(&s->tab, t);
    ht_store_relaxed(&s->mask, cap - 1);
    ht_store_relaxed(&s->narrow, (uint8_t)narrow);
    return 0;
}

/* Turns a shard's table to wide entries for good, keeping its slot
 * count. Returns 0 or -1. */
static HT_NOINLINE int widen(shard_t *s)
{
    s->wide_only = 1;
    return rebuild(s, s->mask + 1, 0);
}

/* Doubles (or creates) a shard's table, narrow once large unless the
 * shard said no; a wide table turns narrow only while the pair table
 * takes new pairs (a narrow one keeps its numbers). Returns 0 or -1. */
static HT_NOINLINE int grow(shard_t *s)
{
    uint64_t cap = s->tab ? (s->mask + 1) * 2 : INIT_CAP;
    if (is_large(cap - 1) && !s->wide_only && (s->narrow || !ht_load_relaxed(&g_pairs_full))) {
        int rc = rebuild(s, cap, 1);
        if (rc != -2)
            return rc;
        s->wide_only = 1;
    }
    return rebuild(s, cap, 0);
}

int ht__live_insert(uintptr_t addr, uint64_t size, uint32_t site, uint32_t *old_site,
                    uint64_t *old_size)
{
    if (ht_unlikely((addr >> 48) != 0 || (size >> 48) != 0 || addr < 16)) {
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    shard_t *s = shard_of(addr);
    int rc = 0;
    ht__lock(&s->lock);
    if (ht_unlikely(!s->tab || is_full(s)) && grow(s) != 0)
        goto drop;
    uint64_t m = s->mask, i = home(addr, m);
    if (s->narrow) {
        uint32_t id = narrow_fits(addr) ? pair_id(site, size) : 0;
        if (ht_likely(id)) {
            uint64_t *t = s->tab, key = addr >> 3;
            for (;; i = (i + 1) & m) {
                uint64_t e = t[i];
                if (!e) {
                    s->used++;
                    break;
                }
                if ((e & KEY_MASK) == key) {
                    /* present already: the block was released behind our back */
                    slot_read(t, i, 1, old_size, old_site);
                    rc = 1;
                    break;
                }
            }
            t[i] = narrow_entry(addr, id);
            ht__unlock(&s->lock);
            return rc;
        }
        if (widen(s) != 0)
            goto drop;      /* (same slot count: m and i still hold) */
    }
    entry_t *t = s->tab;
    for (;; i = (i + 1) & m) {
        uint64_t k = t[i].key;
        if (!k) {
            s->used++;
            break;
        }
        if ((k & LOW48) == addr) {
            slot_read(t, i, 0, old_size, old_site);
            rc = 1;
            break;
        }
    }
    slot_write_wide(t, i, addr, size, site);
    ht__unlock(&s->lock);
    return rc;
drop:
    ht__unlock(&s->lock);
    ht_fetch_add(&ht__drops.table_full, 1);
    return -1;
}

/* Finds addr in a table of the given form and removes it, backward shift. */
static HT_ALWAYS_INLINE int remove_in(shard_t *s, uintptr_t addr, int narrow, uint64_t *size,
                                      uint32_t *site)
{
    void *t = s->tab;
    uint64_t m = s->mask, i = home(addr, m);
    for (;; i = (i + 1) & m) {
        uintptr_t a = slot_addr(t, i, narrow);
        if (!a)
            return 0;
        if (a == addr)
            break;
    }
    slot_read(t, i, narrow, size, site);
    /* backward-shift deletion: pull later members of the run into the hole */
    uint64_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & m;
        uintptr_t a = slot_addr(t, j, narrow);
        if (!a)
            break;
        uint64_t h = home(a, m);
        /* move slot j into the hole unless its home lies in (hole, j] */
        int stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!stays) {
            slot_move(t, hole, j, narrow);
            hole = j;
        }
    }
    slot_clear(t, hole, narrow);
    s->used--;
    return 1;
}

int ht__live_remove(uintptr_t addr, uint64_t *size, uint32_t *site)
{
    shard_t *s = shard_of(addr);
    int rc = 0;
    ht__lock(&s->lock);
    if (ht_likely(s->tab)) {
        if (!s->narrow)
            rc = remove_in(s, addr, 0, size, site);
        else if (narrow_fits(addr))
            rc = remove_in(s, addr, 1, size, site);
    }
    ht__unlock(&s->lock);
    return rc;
}

static void pair_index_free(pair_index_t *x)
{
    ht__unmap(x, sizeof *x + (x->mask + 1) * sizeof x->slot[0]);
}

/* heaptrail detach, once no thread can be inside the agent (agent.c):
 * every table goes back. Nothing reads them afterwards. */
void ht__live_release(void)
{
    for (unsigned i = 0; i < NSHARDS; i++) {
        shard_t *s = &g_shards[i];
        if (s->tab)
            table_free(s->tab, (s->mask + 1) * slot_bytes(s->narrow));
        s->tab = NULL;
        s->mask = s->used = 0;
    }
    if (g_arena)
        ht__unmap(g_arena, g_arena_size);
    g_arena = NULL;
    g_arena_used = 0;
    if (g_pairs)
        ht__unmap(g_pairs, g_pairs_bytes);
    g_pairs = NULL;
    if (g_pair_index)
        pair_index_free(g_pair_index);
    g_pair_index = NULL;
    for (unsigned i = 0; i < g_npair_old; i++)
        pair_index_free(g_pair_old[i]);
    g_npair_old = 0;
    g_pairs_cap = g_npairs = g_pairs_committed = 0;
    ht_store_relaxed(&g_pairs_full, 1);
    g_mapped = 0;
}

/* The pair lock is taken last, as inside a shard lock. */
void ht__live_fork_prepare(void)
{
    for (unsigned i = 0; i < NSHARDS; i++)
        ht__spin_lock(&g_shards[i].lock);
    ht__spin_lock(&g_pair_lock);
}

void ht__live_fork_parent(void)
{
    ht__spin_unlock(&g_pair_lock);
    for (unsigned i = 0; i < NSHARDS; i++)
        ht__spin_unlock(&g_shards[i].lock);
}

void ht__live_fork_child(void)
{
    ht__spin_unlock(&g_pair_lock);
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
            uintptr_t a = slot_addr(s->tab, i, s->narrow);
            if (!a)
                continue;
            out[n].addr = a;
            slot_read(s->tab, i, s->narrow, &out[n].size, &out[n].site);
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
    char *t = ht_load_relaxed(&s->tab);
    size_t w = ht_load_relaxed(&s->narrow) ? 8 : sizeof(entry_t);
    if (is_large(m) && t)
        __builtin_prefetch(t + home_large(r, addr, m) * w, 1);
}
