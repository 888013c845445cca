/* stackdb.c -- the process-wide stack trace database: every distinct stack
 * is interned once and gets a small dense id.
 *
 * Storage is a prefix tree rooted at the outermost frame: node id =
 * (parent id, return address), kept in two parallel arrays (12 bytes a
 * node) that are reserved once for the whole budget and touched as they
 * fill. A stack's id is its innermost node. Two hash tables index it:
 *
 *  - the stack table maps the caller's 64-bit stack hash (ht_capture's)
 *    to the innermost node of every interned stack: one probe, then the
 *    frames are compared in full against the node's parent chain. This is
 *    the lock-free fast path for known stacks. A new stack's nodes get
 *    consecutive ids (outermost first), so most parent chains are runs
 *    id, id-1, id-2, ... that the compare walks without a dependent load.
 *  - the node table maps (parent, address) to a node. Only inserts use it,
 *    under the insert lock, to find how much of a new stack already exists.
 *    It is the source of truth: the stack table is an index over it, so a
 *    lookup that misses in the stack table (a table being rebuilt, a wrong
 *    hash, a full table) still finds the same node under the lock.
 *
 * Exactness: the hash only chooses candidates; a stack matches only if
 * every frame and the depth are equal, so two different stacks never share
 * an id, and a node exists at most once for a (parent, address) pair, so
 * the same stack always gets the same id.
 *
 * Concurrency: inserts take one spin lock; lookups of known stacks take
 * none. The stack table grows by being rebuilt into a second region and
 * published with one release store; the region it leaves becomes the next
 * growth's target, so a lookup still reading it may see anything -- a
 * missed entry sends it to the locked path, and a candidate is trusted only
 * after the full compare against nodes below the published node count, so
 * it can never return a wrong id or read outside the reservation.
 *
 * Budget: HEAPTRAIL_STACKDB_MAX bytes (default 256 MiB) of touched memory.
 * An intern that needs more returns HT_STACK_ID_OVERFLOW and counts a drop.
 *
 * Async-signal-safe and allocation-free: memory comes from ht__reserve;
 * a signal handler that interrupts an insert on the same thread (a
 * thread-local flag says so) does the lock-free lookup only, and on a miss
 * returns HT_STACK_ID_OVERFLOW and counts the drop instead of deadlocking.
 * Platform-free: only src/core/util.h primitives. */
#include "heaptrail.h"
#include "stackdb.h"
#include "hash.h"

#define PAGE          4096u
#define DEFAULT_MAX   (256ull << 20)
#define MAX_BUDGET    (64ull << 30)         /* caps the address space reserved */
#define NODE_BYTES    12u                   /* u32 parent + u64 address */
#define LEAF_MIN_BITS 10                    /* first stack table: 1024 slots, 8 KiB */
#define NODE_MIN_BITS 11                    /* first node table: 2048 slots, 8 KiB */
/* Tables grow past 7/10 full; when the budget forbids growing they may
 * fill to 9/10 (longer probes, still exact) before inserts are refused. */
#define GROW_NUM 7
#define FULL_NUM 9
#define LOAD_DEN 10

static struct {
    /* ---- read by lock-free lookups ---- */
    uint64_t leaf_ref;        /* stack table: base address | log2(slots); 0 = none */
    uint32_t node_count;      /* nodes [0, node_count) are complete (release) */
    uint32_t *parent;         /* parent[id], reserved for max_nodes */
    uint64_t *addr;           /* addr[id]; node 0 is the root: (0, 0) */
    uint64_t hash_mask;       /* ~0; tests weaken it to force collisions */
    uint64_t drops;           /* interns answered with HT_STACK_ID_OVERFLOW */
    uint64_t drops_reentrant; /* ... of which by a handler inside an insert */
    char pad_[64];
    /* ---- written under `lock` ---- */
    ht_spinlock_t lock;
    int state;                /* 0 = not yet set up, 1 = ready, 2 = setup failed */
    uint32_t max_nodes;
    uint32_t id_bits;         /* node table entry = tag << id_bits | id */
    uint32_t *node_tab;       /* reserved for node_tab_max_bits */
    uint32_t node_tab_bits, node_tab_max_bits;
    uint64_t *leaf_region[2]; /* the stack table lives in one, grows into the other */
    uint32_t leaf_cur, leaf_max_bits;
    uint64_t leaf_touched[2]; /* high-water bytes used in each region */
    uint64_t leaf_entries;    /* entries in the current stack table */
    uint64_t stacks;          /* distinct stacks interned */
    uint64_t budget;
    uint64_t used;            /* bytes touched, all structures (page-rounded) */
    uint64_t reserved;        /* address space reserved */
    uint64_t node_tab_bytes;
    uint64_t leaf_rebuilds, node_rebuilds;
    int fork_locked;
} db = { .hash_mask = ~0ull };

/* A signal handler that interrupts this thread's insert must not wait for
 * the lock its own thread holds. */
static HT_TLS int t_in_insert;

static uint64_t page_round(uint64_t b) { return (b + PAGE - 1) & ~(uint64_t)(PAGE - 1); }

static uint64_t node_array_bytes(uint64_t nodes)
{
    return page_round(nodes * 4) + page_round(nodes * 8);
}

/* ---- stack table (lock-free reads) ------------------------------------ */

/* Entries are (high 32 bits of the stack hash) << 32 | node id; 0 = empty
 * (node 0, the empty stack, is never entered). The slot is chosen by the
 * top bits of that high word, so a rebuild needs nothing but the entries. */
static HT_ALWAYS_INLINE uint64_t *leaf_base(uint64_t ref)
{
    return (uint64_t *)(uintptr_t)(ref & ~(uint64_t)63);
}

/* Full compare of frames[0..n) against the parent chain of `id`, which
 * must be below a node count read with acquire. The common chain is a run
 * id, id-1, ... (one stack's new nodes are allocated together), so the
 * inner loop indexes by the run position and only checks that the parent
 * is the next id: a predicted branch instead of a dependent load. */
static HT_ALWAYS_INLINE int chain_equals(uint32_t id, void *const *frames, int n)
{
    const uint32_t *parent = db.parent;
    const uint64_t *addr = db.addr;
    int i = 0;
    for (;;) {
        /* a run starting at node `id`, frame i */
        uint32_t k = 0;
        for (;;) {
            uint32_t x = id - k;
            if (ht_unlikely(x == 0))
                return 0;                      /* chain shorter than the stack */
            if (addr[x] != (uint64_t)(uintptr_t)frames[i + (int)k])
                return 0;
            uint32_t p = parent[x];
            k++;
            if (i + (int)k == n)
                return p == 0;                 /* same depth: must end at the root */
            if (ht_unlikely(p != x - 1)) {
                id = p;
                i += (int)k;
                break;
            }
        }
    }
}

/* Looks `frames` up in the stack table `ref`. Lock-free; returns the node
 * id or 0 (not found, or the table was being rebuilt). */
static HT_ALWAYS_INLINE uint32_t leaf_find(uint64_t ref, void *const *frames, int n, uint64_t h)
{
    uint64_t *tab = leaf_base(ref);
    unsigned bits = (unsigned)(ref & 63);
    uint32_t hi = (uint32_t)(h >> 32);
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t i = (uint32_t)(hi >> (32 - bits));
    for (uint64_t probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
        uint64_t e = ht_load_acquire(&tab[i]);
        if (e == 0)
            return 0;
        if ((uint32_t)(e >> 32) != hi)
            continue;
        uint32_t id = (uint32_t)e;
        if (id < ht_load_acquire(&db.node_count) && chain_equals(id, frames, n))
            return id;
    }
    return 0;
}

/* Inserts an entry into the table at `tab` of 2^bits slots (under the
 * lock; the caller ensured there is room). */
static void leaf_put(uint64_t *tab, unsigned bits, uint64_t e)
{
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t i = (uint32_t)(e >> 32) >> (32 - bits);
    while (ht_load_relaxed(&tab[i]) != 0)
        i = (i + 1) & mask;
    ht_store_release(&tab[i], e);
}

/* ---- node table (under the lock only) --------------------------------- */

static HT_ALWAYS_INLINE uint64_t node_hash(uint32_t parent, uint64_t addr)
{
    return ht_hash_term(addr, parent) & db.hash_mask;
}

/* Finds node (parent, addr); returns its id or 0. */
static uint32_t node_find(uint32_t parent, uint64_t addr)
{
    uint64_t h = node_hash(parent, addr);
    unsigned bits = db.node_tab_bits;
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t idmask = (uint32_t)((1ull << db.id_bits) - 1);
    uint32_t tag = (uint32_t)(h << db.id_bits);   /* low bits of h above the id */
    uint32_t i = (uint32_t)(h >> (64 - bits));
    for (;;) {
        uint32_t e = db.node_tab[i];
        if (e == 0)
            return 0;
        if ((e & ~idmask) == tag) {
            uint32_t id = e & idmask;
            if (db.parent[id] == parent && db.addr[id] == addr)
                return id;
        }
        i = (i + 1) & mask;
    }
}

static void node_put(uint32_t id)
{
    uint64_t h = node_hash(db.parent[id], db.addr[id]);
    unsigned bits = db.node_tab_bits;
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t i = (uint32_t)(h >> (64 - bits));
    while (db.node_tab[i] != 0)
        i = (i + 1) & mask;
    db.node_tab[i] = (uint32_t)(h << db.id_bits) | id;
}

/* ---- budget ----------------------------------------------------------- */

static uint64_t used_now(void)
{
    return node_array_bytes(db.node_count) + db.node_tab_bytes + db.leaf_touched[0] +
           db.leaf_touched[1];
}

/* Makes room in the node table for `want` nodes in all: doubles it (rebuilt
 * in place from the node arrays: only the lock holder reads it) while the
 * budget allows, else accepts up to 9/10 load. Returns 1 if there is room. */
static int node_tab_room(uint64_t want)
{
    while (want * LOAD_DEN > ((uint64_t)GROW_NUM << db.node_tab_bits)) {
        unsigned nb = db.node_tab_bits + 1;
        uint64_t nbytes = 4ull << nb;
        if (nb > db.node_tab_max_bits ||
            used_now() - db.node_tab_bytes + nbytes > db.budget)
            return want * LOAD_DEN <= ((uint64_t)FULL_NUM << db.node_tab_bits);
        for (uint64_t i = 0; i < (1ull << nb); i++)
            db.node_tab[i] = 0;
        db.node_tab_bits = nb;
        db.node_tab_bytes = nbytes;
        uint32_t count = db.node_count;
        for (uint32_t id = 1; id < count; id++)
            node_put(id);
        db.node_rebuilds++;
    }
    return 1;
}

/* Makes room for one more stack table entry: rebuilds the table at twice
 * the size into the other region and publishes it, while the budget
 * allows. Returns 1 if there is room (a full table just stops indexing new
 * stacks: they are still found, under the lock, through the node table). */
static int leaf_room(void)
{
    uint64_t ref = db.leaf_ref;
    unsigned bits = (unsigned)(ref & 63);
    uint64_t want = db.leaf_entries + 1;
    if (want * LOAD_DEN <= ((uint64_t)GROW_NUM << bits))
        return 1;
    unsigned nb = bits + 1;
    uint32_t other = db.leaf_cur ^ 1;
    uint64_t nbytes = 8ull << nb;
    uint64_t extra = nbytes > db.leaf_touched[other] ? nbytes - db.leaf_touched[other] : 0;
    if (nb > db.leaf_max_bits || used_now() + extra > db.budget)
        return want * LOAD_DEN <= ((uint64_t)FULL_NUM << bits);
    uint64_t *dst = db.leaf_region[other], *src = leaf_base(ref);
    /* lookups that still read `dst` (from two growths ago) see zeros or
     * entries of the new table: both are safe for them */
    for (uint64_t i = 0; i < (1ull << nb); i++)
        ht_store_relaxed(&dst[i], 0);
    for (uint64_t i = 0; i < (1ull << bits); i++) {
        uint64_t e = src[i];
        if (e)
            leaf_put(dst, nb, e);
    }
    if (nbytes > db.leaf_touched[other])
        db.leaf_touched[other] = nbytes;
    db.leaf_cur = other;
    ht_store_release(&db.leaf_ref, (uint64_t)(uintptr_t)dst | nb);
    db.leaf_rebuilds++;
    return 1;
}

/* ---- set-up ----------------------------------------------------------- */

static unsigned log2_ceil(uint64_t v)
{
    unsigned b = 0;
    while ((1ull << b) < v)
        b++;
    return b;
}

/* Reserves the address space the budget can ever need and maps the first
 * tables. Under the lock. Returns the new state: 1 ready, 2 unusable (no
 * address space, or a budget too small for the first tables). */
static int setup(uint64_t budget)
{
    if (budget > MAX_BUDGET)
        budget = MAX_BUDGET;
    db.budget = budget;
    uint64_t maxn = budget / NODE_BYTES + 1;
    if (maxn > 0xfffffffeull)
        maxn = 0xfffffffeull;
    if (maxn < 2)
        maxn = 2;
    db.max_nodes = (uint32_t)maxn;
    db.id_bits = log2_ceil(maxn);
    if (db.id_bits > 30)
        db.id_bits = 32;
    /* tables never need more than max_nodes entries at 7/10 load */
    unsigned tbits = log2_ceil(maxn * LOAD_DEN / GROW_NUM + 1);
    if (tbits < NODE_MIN_BITS)
        tbits = NODE_MIN_BITS;
    if (tbits > 32)
        tbits = 32;
    db.node_tab_max_bits = tbits;
    db.leaf_max_bits = tbits;

    size_t psz = page_round(maxn * 4), asz = page_round(maxn * 8);
    size_t nsz = (size_t)4 << tbits, lsz = (size_t)8 << tbits;
    db.parent = ht__reserve(psz);
    db.addr = ht__reserve(asz);
    db.node_tab = ht__reserve(nsz);
    db.leaf_region[0] = ht__reserve(lsz);
    db.leaf_region[1] = ht__reserve(lsz);
    db.reserved = psz + asz + nsz + 2 * lsz;
    if (!db.parent || !db.addr || !db.node_tab || !db.leaf_region[0] || !db.leaf_region[1])
        return 2;   /* no address space: every new stack overflows */
    db.parent[0] = 0;
    db.addr[0] = 0;
    db.node_tab_bits = NODE_MIN_BITS;
    db.node_tab_bytes = 4ull << NODE_MIN_BITS;
    db.leaf_cur = 0;
    db.leaf_touched[0] = 8ull << LEAF_MIN_BITS;
    db.leaf_touched[1] = 0;
    if (node_array_bytes(2) + db.node_tab_bytes + db.leaf_touched[0] > budget) {
        /* too small even for the first tables: every new stack overflows */
        db.node_tab_bytes = 0;
        db.leaf_touched[0] = 0;
        ht_store_release(&db.node_count, 1u);
        db.used = 0;
        return 2;
    }
    ht_store_release(&db.node_count, 1u);
    ht_store_release(&db.leaf_ref, (uint64_t)(uintptr_t)db.leaf_region[0] | LEAF_MIN_BITS);
    db.used = used_now();
    return 1;
}

static void teardown(void)
{
    ht_store_release(&db.leaf_ref, 0);
    size_t psz = page_round((uint64_t)db.max_nodes * 4), asz = page_round((uint64_t)db.max_nodes * 8);
    size_t nsz = (size_t)4 << db.node_tab_max_bits, lsz = (size_t)8 << db.leaf_max_bits;
    if (db.parent) ht__unmap(db.parent, psz);
    if (db.addr) ht__unmap(db.addr, asz);
    if (db.node_tab) ht__unmap(db.node_tab, nsz);
    if (db.leaf_region[0]) ht__unmap(db.leaf_region[0], lsz);
    if (db.leaf_region[1]) ht__unmap(db.leaf_region[1], lsz);
    db.parent = NULL;
    db.addr = NULL;
    db.node_tab = NULL;
    db.leaf_region[0] = db.leaf_region[1] = NULL;
}

/* ---- intern ----------------------------------------------------------- */

static uint32_t drop(void)
{
    ht_fetch_add(&db.drops, 1);
    return HT_STACK_ID_OVERFLOW;
}

/* The insert path, under the lock. */
static uint32_t intern_locked(void *const *frames, int n, uint64_t h)
{
    if (ht_unlikely(db.state != 1)) {
        if (db.state == 0)
            db.state = setup(ht__parse_size(ht__env("HEAPTRAIL_STACKDB_MAX"), DEFAULT_MAX));
        if (db.state != 1)
            return HT_STACK_ID_OVERFLOW;
    }
    uint64_t ref = db.leaf_ref;
    uint32_t id = leaf_find(ref, frames, n, h);
    if (id)
        return id;

    /* how much of the stack exists: walk from the outermost frame */
    uint32_t cur = 0;
    int j = n;
    while (j > 0) {
        uint32_t c = node_find(cur, (uint64_t)(uintptr_t)frames[j - 1]);
        if (!c)
            break;
        cur = c;
        j--;
    }
    if (j > 0) {
        uint64_t count = db.node_count, want = count + (uint64_t)j;
        if (want > db.max_nodes || !node_tab_room(want))
            return HT_STACK_ID_OVERFLOW;
        if (used_now() - node_array_bytes(count) + node_array_bytes(want) > db.budget)
            return HT_STACK_ID_OVERFLOW;
        uint32_t nid = (uint32_t)count;
        for (int k = j - 1; k >= 0; k--, nid++) {
            db.parent[nid] = cur;
            db.addr[nid] = (uint64_t)(uintptr_t)frames[k];
            node_put(nid);
            cur = nid;
        }
        ht_store_release(&db.node_count, nid);
    }
    if (leaf_room()) {
        leaf_put(leaf_base(db.leaf_ref), (unsigned)(db.leaf_ref & 63),
                 (uint64_t)(uint32_t)(h >> 32) << 32 | cur);
        db.leaf_entries++;
        db.stacks++;
    }
    return cur;
}

/* A miss in the stack table: take the insert lock (or, inside a handler
 * that interrupted this thread's own insert, give up). */
static HT_NOINLINE uint32_t intern_slow(void *const *frames, int n, uint64_t h)
{
    if (t_in_insert) {
        ht_fetch_add(&db.drops_reentrant, 1);
        return drop();
    }
    t_in_insert = 1;
    ht_compiler_barrier();
    ht__spin_lock(&db.lock);
    uint32_t id = intern_locked(frames, n, h);
    if (db.state == 1)
        ht_store_relaxed(&db.used, used_now());
    ht__spin_unlock(&db.lock);
    ht_compiler_barrier();
    t_in_insert = 0;
    return id == HT_STACK_ID_OVERFLOW ? drop() : id;
}

uint32_t ht__stackdb_intern(void *const *frames, int n, uint64_t hash)
{
    if (ht_unlikely(n <= 0))
        return HT_STACK_ID_EMPTY;
    uint64_t h = hash & ht_load_relaxed(&db.hash_mask);
    uint64_t ref = ht_load_acquire(&db.leaf_ref);
    if (ht_likely(ref != 0)) {
        uint32_t id = leaf_find(ref, frames, n, h);
        if (ht_likely(id != 0))
            return id;
    }
    return intern_slow(frames, n, h);
}

/* ---- reading ---------------------------------------------------------- */

int ht__stackdb_frames(uint32_t id, void **frames, int max)
{
    if (id == HT_STACK_ID_EMPTY)
        return 0;
    if (id >= ht_load_acquire(&db.node_count))
        return -1;
    int k = 0;
    while (id != 0) {
        if (k < max)
            frames[k] = (void *)(uintptr_t)db.addr[id];
        k++;
        id = db.parent[id];
    }
    return k;
}

uint32_t ht__stackdb_node_count(void)
{
    uint32_t c = ht_load_acquire(&db.node_count);
    return c ? c : 1;      /* the root exists before set-up */
}

int ht__stackdb_node(uint32_t id, ht_stacknode_t *out)
{
    if (id == 0) {
        out->parent = 0;
        out->addr = 0;
        return 0;
    }
    if (id >= ht_load_acquire(&db.node_count))
        return -1;
    out->parent = db.parent[id];
    out->addr = db.addr[id];
    return 0;
}

void ht__stackdb_info(ht_stackdb_info_t *out)
{
    out->stacks = ht_load_relaxed(&db.stacks);
    uint32_t c = ht_load_acquire(&db.node_count);
    out->nodes = c ? c : 1;
    out->bytes_mapped = ht_load_relaxed(&db.used);
    out->bytes_reserved = ht_load_relaxed(&db.reserved);
    out->budget = db.state ? db.budget
                           : ht__parse_size(ht__env("HEAPTRAIL_STACKDB_MAX"), DEFAULT_MAX);
    out->drops = ht_load_relaxed(&db.drops);
    out->drops_reentrant = ht_load_relaxed(&db.drops_reentrant);
    uint64_t ref = ht_load_relaxed(&db.leaf_ref);
    out->stack_table_slots = ref ? 1ull << (ref & 63) : 0;
    out->node_table_slots = db.state == 1 ? 1ull << db.node_tab_bits : 0;
    out->stack_table_rebuilds = db.leaf_rebuilds;
    out->node_table_rebuilds = db.node_rebuilds;
}

/* ---- fork ------------------------------------------------------------- */

void ht__stackdb_fork_prepare(void)
{
    /* fork() from a handler that interrupted our own insert: the child
     * resumes that insert itself, so there is nothing to wait for */
    if (t_in_insert)
        return;
    t_in_insert = 1;
    ht_compiler_barrier();
    ht__spin_lock(&db.lock);
    db.fork_locked = 1;
}

void ht__stackdb_fork_parent(void)
{
    if (!db.fork_locked)
        return;
    db.fork_locked = 0;
    ht__spin_unlock(&db.lock);
    ht_compiler_barrier();
    t_in_insert = 0;
}

void ht__stackdb_fork_child(void)
{
    /* the child has one thread, this one: the lock it inherited is ours */
    ht__stackdb_fork_parent();
}

/* ---- tests ------------------------------------------------------------ */

void ht__stackdb_reset_for_test(uint64_t budget, uint64_t hash_mask)
{
    ht__spin_lock(&db.lock);
    if (db.state != 0)
        teardown();
    ht_store_release(&db.node_count, 0u);
    db.state = 0;
    db.leaf_entries = db.stacks = 0;
    db.leaf_rebuilds = db.node_rebuilds = 0;
    db.used = db.reserved = 0;
    ht_store_relaxed(&db.drops, 0);
    ht_store_relaxed(&db.drops_reentrant, 0);
    ht_store_relaxed(&db.hash_mask, hash_mask);
    if (budget)
        db.state = setup(budget);
    ht__spin_unlock(&db.lock);
}

/* ---- public API ------------------------------------------------------- */

uint32_t ht_stack_id(void *const *frames, int n)
{
    if (n <= 0)
        return HT_STACK_ID_EMPTY;
    return ht__stackdb_intern(frames, n, ht_stack_hash(frames, n));
}

int ht_stack_frames(uint32_t id, void **frames, int max)
{
    return ht__stackdb_frames(id, frames, max);
}

void ht_stackdb_stats(ht_stackdb_stats_t *out)
{
    ht_stackdb_info_t i;
    ht__stackdb_info(&i);
    out->stacks = i.stacks;
    out->nodes = i.nodes;
    out->bytes_mapped = i.bytes_mapped;
    out->budget = i.budget;
    out->drops = i.drops;
}
