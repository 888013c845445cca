/* live.c -- the live-allocation table: heap block address -> (requested
 * size, stack id).
 *
 * 64 shards chosen by address hash, each an open-addressing table with
 * linear probing and backward-shift deletion (no tombstones, so a miss
 * ends at the first empty slot and never needs a rehash to stay short),
 * grown by doubling at 5/8 load. A shard's spin lock is held only for the
 * probe and store -- never across a call into libc -- so with the agent's
 * per-thread re-entry guard a thread never waits for itself, and threads
 * touching different shards never meet. fork() takes every shard lock
 * first, so the child inherits consistent tables.
 *
 * Entries are 16 bytes: {address | stack[31:16] << 48, size | stack[15:0]
 * << 48}. Memory per live block: 16 bytes / load, i.e. 26-51 bytes.
 * Async-signal-safe, allocation-free (tables are mmap'd). */
#include "agent.h"

#define SHARD_BITS 6
#define NSHARDS    (1u << SHARD_BITS)
#define INIT_CAP   512u
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

static HT_ALWAYS_INLINE uint64_t mix(uintptr_t addr)
{
    uint64_t h = (uint64_t)(addr >> 4) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

static HT_ALWAYS_INLINE shard_t *shard_of(uint64_t h)
{
    return &g_shards[(h * 0xd6e8feb86659fd93ull) >> (64 - SHARD_BITS)];
}

/* Doubles (or creates) a shard's table. Returns 0 or -1. */
static HT_NOINLINE int grow(shard_t *s)
{
    uint64_t cap = s->tab ? (s->mask + 1) * 2 : INIT_CAP;
    entry_t *t = ht__map(cap * sizeof(entry_t));
    if (!t)
        return -1;
    ht_fetch_add(&g_mapped, cap * sizeof(entry_t));
    if (s->tab) {
        for (uint64_t i = 0; i <= s->mask; i++) {
            entry_t e = s->tab[i];
            if (!e.key)
                continue;
            uint64_t j = mix(e.key & LOW48) & (cap - 1);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = e;
        }
        ht__unmap(s->tab, (s->mask + 1) * sizeof(entry_t));
        __atomic_fetch_sub(&g_mapped, (s->mask + 1) * sizeof(entry_t), __ATOMIC_RELAXED);
    }
    s->tab = t;
    s->mask = cap - 1;
    return 0;
}

int ht__live_insert(uintptr_t addr, uint64_t size, uint32_t stack, uint32_t *old_stack,
                    uint64_t *old_size)
{
    if (ht_unlikely((addr >> 48) != 0 || (size >> 48) != 0 || addr < 16)) {
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    uint64_t h = mix(addr);
    shard_t *s = shard_of(h);
    uint64_t key = addr | (uint64_t)(stack >> 16) << 48;
    uint64_t val = size | (uint64_t)(stack & 0xffff) << 48;
    int rc = 0;
    ht__lock(&s->lock);
    if (ht_unlikely(!s->tab || (s->used + 1) * 8 > (s->mask + 1) * 5) && grow(s) != 0) {
        ht__unlock(&s->lock);
        ht_fetch_add(&ht__drops.table_full, 1);
        return -1;
    }
    entry_t *t = s->tab;
    uint64_t m = s->mask, i = h & m;
    for (;; i = (i + 1) & m) {
        uint64_t k = t[i].key;
        if (!k) {
            s->used++;
            break;
        }
        if ((k & LOW48) == addr) {
            /* present already: the block was released behind our back */
            *old_stack = (uint32_t)(k >> 48) << 16 | (uint32_t)(t[i].val >> 48);
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

int ht__live_remove(uintptr_t addr, uint64_t *size, uint32_t *stack)
{
    uint64_t h = mix(addr);
    shard_t *s = shard_of(h);
    ht__lock(&s->lock);
    entry_t *t = s->tab;
    if (ht_unlikely(!t)) {
        ht__unlock(&s->lock);
        return 0;
    }
    uint64_t m = s->mask, i = h & m;
    for (;; i = (i + 1) & m) {
        uint64_t k = t[i].key;
        if (!k) {
            ht__unlock(&s->lock);
            return 0;
        }
        if ((k & LOW48) == addr)
            break;
    }
    *stack = (uint32_t)(t[i].key >> 48) << 16 | (uint32_t)(t[i].val >> 48);
    *size = t[i].val & LOW48;
    /* backward-shift deletion: pull later members of the run into the hole */
    uint64_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & m;
        uint64_t k = t[j].key;
        if (!k)
            break;
        uint64_t home = mix(k & LOW48) & m;
        /* move t[j] into the hole unless its home lies in (hole, j] */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
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
