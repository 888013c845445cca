/* sites.c -- per-allocation-site statistics: for every (stack id, kind)
 * the live blocks and bytes, the total allocations and bytes since the
 * start, the highest live bytes, and the live bytes at the process's
 * peak; and the process-wide high-water marks.
 *
 * A site is found from its stack id through a two-level direct index
 * (1M pointers to blocks of 4096 record numbers), so lookups are two
 * dependent loads and take no lock; a missing block or record is installed
 * with one compare-and-swap. Records are 64-byte lines bumped out of one
 * reserved arena, so a snapshot walks them in creation order: O(sites).
 * Each record has its own spin lock, held for a handful of stores; the
 * agent's re-entry guard means a thread never waits for a lock it holds.
 *
 * Memory: 64 bytes per site (and 8 for its blocks at the peak, 16 for its
 * temporary blocks and bytes, 4 for its position in the trace), plus 4
 * bytes of index per stack-database node
 * id below the highest id seen (a 16 KiB block per 4096 ids touched).
 * Async-signal-safe, allocation-free. */
#include "agent.h"
#include "../format/trace.h"
#include "../platform/linux-x86_64/unwind.h"
#include <pthread.h>

/* a cheap clock that only has to be monotonic and steady: the time-stamp
 * counter (a few ns; clock_gettime is a system call here) */
static HT_ALWAYS_INLINE uint64_t ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return ht__mono_ns();
#endif
}

#define L2_BITS   12
#define L2_SIZE   (1u << L2_BITS)
#define L1_SIZE   (1u << (32 - L2_BITS))
#define MAX_SITES (1u << 24)

typedef struct { uint32_t *l1[L1_SIZE]; } site_index_t;

static site_index_t *g_index[3];    /* per kind */
static uint64_t g_l1_end[3];        /* per kind: past the last level-1 slot
                                       filled (what a release reads) */
ht_site_t *ht__sites;                /* reserved g_max_sites records */
static uint64_t *g_peak_blocks;     /* per record: live blocks at the peak's
                                       epoch (no room in the record's line;
                                       written only at an epoch's first touch) */
static uint64_t (*g_temp)[2];       /* per record: temporary blocks and bytes
                                       (ht__site_free's; written only then) */
static uint32_t *g_wpos;            /* per record: its position in the trace + 1 */
static uint32_t g_max_sites;        /* MAX_SITES, fewer under an address-space limit */
static uint32_t g_nsites;           /* records handed out */
static int g_init_state;            /* 0 no, 1 ready, -1 failed */
static ht_spinlock_t g_init_lock;

/* process-wide live counters and high-water marks; the peak's epoch
 * (below) shares the line the high-water marks are read from */
static struct {
    uint64_t live_bytes __attribute__((aligned(64)));
    uint64_t live_blocks;
    uint64_t peak_bytes __attribute__((aligned(64)));
    uint64_t peak_blocks;
    uint64_t epoch_peak;        /* peak_bytes when the epoch began */
    uint64_t epoch_tsc;         /* and the time-stamp counter then */
    uint32_t epoch;
} g_proc;

/* A (time-stamp counter, CLOCK_MONOTONIC) pair from the first epoch, to
 * turn epoch_tsc into a time when a snapshot asks (a clock_gettime at
 * every epoch would cost a system call each) */
static struct {
    int state;                  /* 0 unset, 1 being set, 2 set */
    uint64_t tsc, mono;
} g_clock0;

static HT_NOINLINE int sites_init(void)
{
    ht__spin_lock(&g_init_lock);
    if (g_init_state == 0) {
        site_index_t *a = ht__reserve(sizeof(site_index_t));
        site_index_t *b = ht__reserve(sizeof(site_index_t));
        site_index_t *c = ht__reserve(sizeof(site_index_t));
        /* a quarter of heaptrail's address-space allowance at most */
        uint64_t fit = ht__reserve_share(4, (uint64_t)MAX_SITES * sizeof(ht_site_t)) / sizeof(ht_site_t);
        g_max_sites = fit < 4096 ? 4096 : (uint32_t)fit;
        ht_site_t *s = ht__reserve((size_t)g_max_sites * sizeof(ht_site_t));
        uint64_t *pk = ht__reserve((size_t)g_max_sites * sizeof(uint64_t));
        uint64_t(*tp)[2] = ht__reserve((size_t)g_max_sites * sizeof *g_temp);
        uint32_t *wp = ht__reserve((size_t)g_max_sites * sizeof(uint32_t));
        if (a && b && c && s && pk && tp && wp) {
            g_index[0] = a;
            g_index[1] = b;
            g_index[2] = c;
            ht__sites = s;
            g_peak_blocks = pk;
            g_temp = tp;
            g_wpos = wp;
            ht_store_release(&g_init_state, 1);
        } else {
            ht_store_release(&g_init_state, -1);
        }
    }
    ht__spin_unlock(&g_init_lock);
    return ht_load_acquire(&g_init_state);
}

/* *at = max(*at, v), atomically: the process's peaks, g_l1_end */
static HT_ALWAYS_INLINE void raise_max(uint64_t *at, uint64_t v)
{
    uint64_t p = ht_load_relaxed(at);
    while (v > p && !__atomic_compare_exchange_n(at, &p, v, 1, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED))
        ;
}

static HT_NOINLINE ht_site_t *site_create(uint32_t **slot_l2p, uint32_t stack, int kind)
{
    uint32_t *l2 = ht_load_acquire(slot_l2p);
    if (!l2) {
        uint32_t *fresh = ht__map(L2_SIZE * sizeof(uint32_t));
        if (!fresh) {
            ht_fetch_add(&ht__drops.table_full, 1);
            return NULL;
        }
        uint32_t *expect = NULL;
        if (__atomic_compare_exchange_n(slot_l2p, &expect, fresh, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            l2 = fresh;
            raise_max(&g_l1_end[kind], (stack >> L2_BITS) + 1);
        } else {
            ht__unmap(fresh, L2_SIZE * sizeof(uint32_t));
            l2 = expect;
        }
    }
    uint32_t *cell = &l2[stack & (L2_SIZE - 1)];
    uint32_t v = ht_load_acquire(cell);
    if (v)
        return ht__site_by_index(v - 1);
    /* claim a record; initialise it before publishing its number */
    uint32_t i = ht_fetch_add(&g_nsites, 1);
    if (i >= g_max_sites) {
        ht_fetch_add(&ht__drops.table_full, 1);
        return NULL;
    }
    ht_site_t *s = ht__site_by_index(i);
    s->stack = stack;
    s->kind = (uint8_t)kind;
    s->epoch = ht_load_relaxed(&g_proc.epoch);     /* nothing here at the peak */
    uint32_t expect = 0;
    if (__atomic_compare_exchange_n(cell, &expect, i + 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        ht_store_release(&s->used, 1);
    } else {
        s = ht__site_by_index(expect - 1);   /* another thread won; record i stays unused */
    }
    return s;
}

ht_site_t *ht__site_get(uint32_t stack, int kind)
{
    if (ht_unlikely(ht_load_acquire(&g_init_state) != 1) && sites_init() != 1) {
        ht_fetch_add(&ht__drops.table_full, 1);     /* no records: counted, not lost silently */
        return NULL;
    }
    site_index_t *ix = g_index[kind];
    uint32_t **slot = &ix->l1[stack >> L2_BITS];
    uint32_t *l2 = ht_load_acquire(slot);
    if (ht_likely(l2 != NULL)) {
        uint32_t v = ht_load_acquire(&l2[stack & (L2_SIZE - 1)]);
        if (ht_likely(v != 0))
            return ht__site_by_index(v - 1);
    }
    return site_create(slot, stack, kind);
}

/* What was live at the peak, per site (bytes in the record, blocks in
 * g_peak_blocks), for O(1) an update: every time
 * the process's live bytes rise past the peak (by more than a millionth
 * of it; every byte below 1 MiB) a new epoch begins. A site keeps its
 * live bytes as they were when the current epoch began: the first update
 * in an epoch saves them before changing them (the lazy copy of a
 * snapshot), and a site untouched since still holds them. So a snapshot
 * reads every site's bytes at the last epoch's start, the peak to within
 * a millionth, at no cost but one compare an update. Exact in a
 * single-threaded program; with several threads the moment is blurred by
 * the updates in flight and the peak by their unflushed deltas. Epochs
 * are counted in 32 bits: at most 2^20 below 1 MiB, then each one a
 * millionth more than the last, ~2 x 10^7 up to 256 TiB; 2^32 are never
 * reached. */
static HT_ALWAYS_INLINE void epoch_touch(ht_site_t *s)
{
    uint32_t e = ht_load_relaxed(&g_proc.epoch);
    if (ht_unlikely(s->epoch != e)) {
        s->epoch = e;
        s->at_peak = s->live_bytes;
        g_peak_blocks[ht__site_index(s)] = s->live_blocks;
    }
}

static HT_NOINLINE void epoch_begin(uint64_t pb)
{
    uint64_t ep = ht_load_relaxed(&g_proc.epoch_peak);
    if (pb > ep + (ep >> 20)) {
        uint64_t tsc = ticks();
        int unset = 0;
        if (ht_unlikely(ht_load_acquire(&g_clock0.state) == 0) &&
            __atomic_compare_exchange_n(&g_clock0.state, &unset, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            g_clock0.tsc = tsc;
            g_clock0.mono = ht__mono_ns();
            ht_store_release(&g_clock0.state, 2);
        }
        ht_store_relaxed(&g_proc.epoch_peak, pb);
        ht_store_relaxed(&g_proc.epoch_tsc, tsc);
        ht_fetch_add(&g_proc.epoch, 1);
    }
}

uint64_t ht__peak_ns(void)
{
    if (ht_load_acquire(&g_clock0.state) != 2)
        return 0;
    uint64_t tsc = ht_load_relaxed(&g_proc.epoch_tsc), now_tsc = ticks();
    uint64_t now = ht__mono_ns();
    if (now_tsc <= g_clock0.tsc || now <= g_clock0.mono || tsc < g_clock0.tsc)
        return 0;
    /* the counter's rate over the run so far, from the pair to now */
    double at = (double)g_clock0.mono + (double)(tsc - g_clock0.tsc) * (double)(now - g_clock0.mono) /
                                            (double)(now_tsc - g_clock0.tsc);
    /* before this process's start (a fork child's peak in its parent): 0 */
    return at > (double)ht__agent.t0_ns ? (uint64_t)(at - (double)ht__agent.t0_ns) : 0;
}

uint32_t ht__peak_epoch(void) { return ht_load_relaxed(&g_proc.epoch); }

uint64_t ht__site_at_peak(const ht_site_t *s, uint32_t epoch, uint64_t *blocks)
{
    if (ht_load_relaxed(&s->epoch) == epoch) {
        *blocks = ht_load_relaxed(&g_peak_blocks[ht__site_index(s)]);
        return ht_load_relaxed(&s->at_peak);
    }
    *blocks = ht_load_relaxed(&s->live_blocks);
    return ht_load_relaxed(&s->live_bytes);
}

/* Process-wide live counters, for the high-water marks: each thread keeps
 * a delta and folds it into the shared counters (one atomic add each) only
 * once it exceeds FLUSH_BYTES or FLUSH_BLOCKS, so the hot path has no
 * shared atomic. The peak is checked against shared + own delta at every
 * allocation: exact for a single-threaded program, and in general short
 * by at most the other threads' unflushed deltas (< 64 KiB / 256 blocks
 * each). Live and total figures themselves come from the sites, exact. */
#define FLUSH_BYTES  (64 << 10)
#define FLUSH_BLOCKS 256
static HT_TLS int64_t t_dbytes, t_dblocks;

static HT_TLS int t_registered;     /* this thread's exit flushes its delta */
static pthread_key_t g_exit_key;
static int g_exit_key_ok;

static void flush_delta(void)
{
    ht_fetch_add(&g_proc.live_bytes, (uint64_t)t_dbytes);
    ht_fetch_add(&g_proc.live_blocks, (uint64_t)t_dblocks);
    t_dbytes = t_dblocks = 0;
}

/* A thread's unflushed delta must not die with it (the shared counters
 * would drift with thread churn): a thread-specific key's destructor
 * flushes it. Keys below PTHREAD_KEY_2NDLEVEL_SIZE make
 * pthread_setspecific allocation-free; ours is created at start-up. */
static void on_thread_exit(void *v)
{
    (void)v;
    flush_delta();
}

/* heaptrail detach, once no thread can be inside the agent (agent.c):
 * the records and their indexes go back. Nothing reads them afterwards.
 * Only the level-1 slots up to the last one filled are read: the rest of
 * each 8 MiB index was never touched (reading it whole faulted in ~4,000
 * zero pages). */
void ht__sites_release(void)
{
    if (ht_load_acquire(&g_init_state) != 1)
        return;
    for (int k = 0; k < 3; k++) {
        uint64_t end = ht_load_acquire(&g_l1_end[k]);
        for (uint32_t i = 0; i < end && i < L1_SIZE; i++)
            if (g_index[k]->l1[i])
                ht__unmap(g_index[k]->l1[i], L2_SIZE * sizeof(uint32_t));
        ht__unmap(g_index[k], sizeof(site_index_t));
        g_index[k] = NULL;
    }
    ht__unmap(ht__sites, (size_t)g_max_sites * sizeof(ht_site_t));
    ht__unmap(g_peak_blocks, (size_t)g_max_sites * sizeof(uint64_t));
    ht__unmap(g_temp, (size_t)g_max_sites * sizeof *g_temp);
    ht__unmap(g_wpos, (size_t)g_max_sites * sizeof(uint32_t));
    ht__sites = NULL;
    g_wpos = NULL;
    g_peak_blocks = NULL;
    g_temp = NULL;
    g_nsites = 0;
    ht_store_release(&g_init_state, -1);
}

void ht__sites_start(void)
{
    g_exit_key_ok = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
}

static HT_NOINLINE void flush_or_register(void)
{
    if (!t_registered) {
        t_registered = 1;
        if (g_exit_key_ok)
            pthread_setspecific(g_exit_key, (void *)1);
    }
    if (t_dbytes > FLUSH_BYTES || t_dbytes < -FLUSH_BYTES || t_dblocks > FLUSH_BLOCKS ||
        t_dblocks < -FLUSH_BLOCKS)
        flush_delta();
}

static HT_ALWAYS_INLINE void proc_add(int64_t bytes, int64_t blocks)
{
    t_dbytes += bytes;
    t_dblocks += blocks;
    if (bytes > 0) {
        /* signed: another thread's unflushed frees can make it dip below 0 */
        int64_t sb = (int64_t)(ht_load_relaxed(&g_proc.live_bytes) + (uint64_t)t_dbytes);
        int64_t sk = (int64_t)(ht_load_relaxed(&g_proc.live_blocks) + (uint64_t)t_dblocks);
        uint64_t pb = sb > 0 ? (uint64_t)sb : 0, pk = sk > 0 ? (uint64_t)sk : 0;
        if (ht_unlikely(pb > ht_load_relaxed(&g_proc.peak_bytes))) {
            raise_max(&g_proc.peak_bytes, pb);
            epoch_begin(pb);
        }
        if (ht_unlikely(pk > ht_load_relaxed(&g_proc.peak_blocks)))
            raise_max(&g_proc.peak_blocks, pk);
    }
    /* |d| > F as one unsigned compare: d + F outside [0, 2F] */
    if (ht_unlikely(!t_registered || (uint64_t)t_dbytes + FLUSH_BYTES > 2 * FLUSH_BYTES ||
                    (uint64_t)t_dblocks + FLUSH_BLOCKS > 2 * FLUSH_BLOCKS))
        flush_or_register();
}

/* `blocks` new blocks (1, or 0 when a live one grows) of `bytes` at s;
 * `proc`: in the process's live counters too (all but custom sites) */
static HT_ALWAYS_INLINE void add(ht_site_t *s, uint64_t blocks, uint64_t bytes, int proc)
{
    ht__lock(&s->lock);
    epoch_touch(s);
    uint64_t lb = s->live_bytes + bytes;
    s->live_blocks += blocks;
    s->live_bytes = lb;
    s->total_blocks += blocks;
    s->total_bytes += bytes;
    if (lb > s->peak_bytes)
        s->peak_bytes = lb;
    ht_store_release(&s->dirty, 1);     /* after the figures: see stage_snapshot */
    ht__unlock(&s->lock);
    if (proc)
        proc_add((int64_t)bytes, (int64_t)blocks);
}

void ht__site_alloc(ht_site_t *s, uint64_t blocks, uint64_t bytes) { add(s, blocks, bytes, 1); }

/* `temp`: a temporary block (heaptrack's "temporary allocation": freed by
 * the thread that made it before that thread allocated or freed anything
 * else), counted beside the record, whose line is full, under its lock. */
static HT_ALWAYS_INLINE void release(ht_site_t *s, uint64_t blocks, uint64_t bytes, int temp,
                                     int proc)
{
    ht__lock(&s->lock);
    epoch_touch(s);
    s->live_blocks -= blocks;
    s->live_bytes -= bytes;
    if (temp) {
        uint64_t *t = g_temp[ht__site_index(s)];
        t[0] += blocks;
        t[1] += bytes;
    }
    ht_store_release(&s->dirty, 1);
    ht__unlock(&s->lock);
    if (proc)
        proc_add(-(int64_t)bytes, -(int64_t)blocks);
}

void ht__site_free(ht_site_t *s, uint64_t blocks, uint64_t bytes, int temp)
{
    release(s, blocks, bytes, temp, 1);
}

void ht__site_custom_alloc(ht_site_t *s, uint64_t size) { add(s, 1, size, 0); }

void ht__site_custom_free(ht_site_t *s, uint64_t size) { release(s, 1, size, 0, 0); }

uint64_t ht__site_temp(const ht_site_t *s, uint64_t *bytes)
{
    const uint64_t *t = g_temp[ht__site_index(s)];
    *bytes = ht_load_relaxed(&t[1]);
    return ht_load_relaxed(&t[0]);
}

void ht__site_release(ht_site_t *s, uint64_t blocks, uint64_t bytes) { release(s, blocks, bytes, 0, 1); }

void ht__site_grow(ht_site_t *s, uint64_t bytes) { add(s, 0, bytes, 1); }

uint32_t ht__site_count(void)
{
    if (ht_load_acquire(&g_init_state) != 1)
        return 0;
    uint32_t n = ht_load_acquire(&g_nsites);
    return n > g_max_sites ? g_max_sites : n;
}

uint32_t *ht__site_wpos(void) { return g_wpos; }

ht_site_t *ht__site_at(uint32_t i)
{
    ht_site_t *s = ht__site_by_index(i);
    return ht_load_acquire(&s->used) ? s : NULL;
}

void ht__totals(ht_totals_t *t)
{
    __builtin_memset(t, 0, sizeof *t);
    uint32_t n = ht__site_count();
    for (uint32_t i = 0; i < n; i++) {
        ht_site_t *s = ht__site_at(i);
        if (!s || s->kind == HT_KIND_CUSTOM)
            continue;           /* inside blocks counted already */
        uint64_t lk = ht_load_relaxed(&s->live_blocks), tk = ht_load_relaxed(&s->total_blocks);
        t->live_blocks += lk;
        t->live_bytes += ht_load_relaxed(&s->live_bytes);
        t->total_blocks += tk;
        t->total_bytes += ht_load_relaxed(&s->total_bytes);
        t->total_frees += tk - lk;
    }
    t->peak_bytes = ht_load_relaxed(&g_proc.peak_bytes);
    t->peak_blocks = ht_load_relaxed(&g_proc.peak_blocks);
    if (t->peak_bytes < t->live_bytes)
        t->peak_bytes = t->live_bytes;
    if (t->peak_blocks < t->live_blocks)
        t->peak_blocks = t->live_blocks;
}

void ht__sites_fork_child(void)
{
    /* only the locks held: a store to every site copied every page of the
     * site records (64 bytes a site) into each child */
    uint32_t n = ht__site_count();
    for (uint32_t i = 0; i < n; i++)
        if (ht__sites[i].lock.v)
            ht__sites[i].lock.v = 0;
}
