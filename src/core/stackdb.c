/* stackdb.c -- the process-wide stack trace database: every distinct stack
 * is interned once and gets a small dense id.
 *
 * The stacks form a prefix tree rooted at the outermost frame; a stack's
 * id is the id of its innermost node. The tree is stored in segments: when
 * a new stack is interned, the frames below the deepest node that already
 * exists become one segment of consecutive node ids, outermost first, so
 * inside a segment the parent of node x is x - 1 and only a segment's
 * first node needs its parent stored. Per node that leaves the address,
 * kept as its low 32 bits plus one byte: the index of its high 32 bits in a
 * table of the (few: two in a typical process) high halves seen, and a
 * segment-start flag. An address whose high half does not fit the table
 * is kept whole in a side array. About 5 bytes a node instead of 12, and
 * 4 more a segment.
 *
 *   lo[x]          low 32 bits of node x's address (or an index into wide[]);
 *                  for a segment's first node, the segment's number k
 *   hi[x]          START | index into hi_tab[] (HI_WIDE: the address is in
 *                  wide[], at the index lo[x] or seg_lo[k] would hold)
 *   seg_lo[k]      segment k's first address, as lo[x] would hold it
 *   seg_parent[k]  the parent of segment k's first node
 *
 * So the parent of any node is one load away: x - 1 inside a segment,
 * seg_parent[lo[x]] at its start. (Numbering segments by a bitmap of
 * starts and its rank directory took 1.5 bits a node instead of seg_lo's
 * 4 bytes a segment, but a popcount and two more dependent loads at every
 * segment a lookup crosses: 50 vs 41 ns for a known 10-frame stack.)
 *
 * Two hash tables index the tree:
 *  - the stack table maps the caller's 64-bit stack hash (ht_capture's) to
 *    the innermost node of every interned stack. Lookups take no lock: one
 *    probe, then the frames are compared in full against the node's chain
 *    (sequential reads inside a segment, one parent load per segment
 *    crossed). Entries are 4 bytes: the id and, in the bits the budget
 *    leaves unused above it, a tag from the hash. Rebuilt at twice the
 *    size into a second region by rehashing each stack from the tree, then
 *    published with one release store.
 *  - the segment table maps (parent, first address) to a segment's first
 *    node: with the x + 1 continuation it answers "which child of p has
 *    address a", which only inserts ask, under the insert lock. It and the
 *    tree are the source of truth: a lookup that misses in the stack table
 *    (a table being rebuilt, a wrong hash, a full table) still finds the
 *    same node under the lock.
 *
 * Exactness: the hash only chooses candidates; a stack matches only if
 * every frame and the depth are equal, so two different stacks never share
 * an id; a (parent, address) child is created only after both ways of
 * finding it failed under the lock, so the same stack always gets the same
 * id.
 *
 * Concurrency: inserts take one spin lock; lookups of known stacks take
 * none. Everything a lookup reads is either immutable once published
 * (nodes below node_count, written before the count's release store) or a
 * table that may be stale or half rebuilt (the stack table region left by
 * a growth is the next growth's target): a missed entry sends the lookup to
 * the locked path, and a candidate is trusted only after the full compare
 * against published nodes, so a lookup never returns a wrong id and never
 * reads outside the reservation.
 *
 * Budget: HEAPTRAIL_STACKDB_MAX bytes (default 256 MiB) of touched memory.
 * An intern that needs more returns HT_STACK_ID_OVERFLOW and counts a drop.
 *
 * Async-signal-safe and allocation-free: memory comes from ht__reserve,
 * committed (ht__commit) as the budget accounting grows;
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
#define MIN_NODE_BYTES 5u                   /* lo + hi: the budget's node limit */
#define LEAF_MIN_BITS 6                     /* first tables: 64 slots, 256 bytes */
#define SEG_MIN_BITS  6
#define START         0x80u                 /* hi[x]: x starts a segment */
#define HI_WIDE       0x7fu                 /* hi[x] & 0x7f: address in wide[] */
#define NPARTS        9                     /* arrays: see parts() */
/* The hot-stack cache: direct-mapped slots of one stack each (up to
 * HOT_FRAMES frames), at most HOT_MAX_SLOTS, grown with the database so it
 * stays under a quarter of the bytes the rest uses. */
#define HOT_FRAMES    61
#define HOT_MAX_SLOTS 2048u
#define HOT_MIN_SLOTS 8u
/* A thread refills a slot on every HOT_REFILL-th miss only: filling takes a
 * locked compare-and-swap and a copy (4 of the 41 ns a known 10-frame
 * stack cost when every miss refilled), and it writes a line other threads
 * read: with two threads interning the same 1024 stacks, 1 in 4 cost 87
 * ns a known 10-frame stack, 1 in 16 58 (one thread: 40 and 38); a stack
 * that repeats still takes its slot after a few dozen lookups. */
#define HOT_REFILL    16u
/* A cache that seldom hits costs more than it saves: a miss reads a slot
 * line for nothing (4 ns of a 40 ns known 10-frame stack), and with two
 * threads each one's refills invalidate lines the other reads (60 ns
 * against 37 without the cache, 1024 stacks cycled at random). So each
 * thread counts its hits over windows of HOT_WINDOW lookups, and after a
 * window with fewer than one hit in HOT_PAYS it neither reads nor fills
 * the cache for HOT_REST interns, then tries another window. A hit saves
 * the tree walk (25-30 ns at depth 10), a miss costs a line: below 1 in 8
 * the cache does not pay. */
#define HOT_WINDOW    256u
#define HOT_PAYS      8u
#define HOT_REST      4096u
/* Tables grow past 7/10 full; when the budget forbids growing they may
 * fill to 9/10 (longer probes, still exact) before they refuse entries. */
#define GROW_NUM 7
#define FULL_NUM 9
#define LOAD_DEN 10

/* One hot-stack cache slot, guarded by a sequence count: odd while a
 * writer fills it. A reader compares the hash, depth and every frame, then
 * re-reads the count: equal and even means it compared one consistent
 * (frames, id) pair, and every pair written was verified against the tree
 * first, so a hit is exact. A deeper stack keeps its innermost HOT_FRAMES
 * frames and the node of the rest (`rest`), whose chain the reader
 * compares the remaining frames with: half the tree walk at depth 100. */
typedef struct hot_s {
    uint32_t seq;
    uint32_t id;
    uint32_t n;
    uint32_t rest;
    uint64_t hash;
    uint64_t f[HOT_FRAMES];
} hot_t;

static struct {
    /* ---- read by lock-free lookups ---- */
    uint64_t leaf_ref;        /* stack table: base address | log2(slots); 0 = none */
    uint32_t node_count;      /* nodes [0, node_count) are complete (release) */
    uint32_t id_bits;         /* table entry = tag << id_bits | id */
    uint32_t *lo;
    uint8_t *hi;
    uint32_t *seg_lo;
    uint32_t *seg_parent;
    uint64_t *wide;
    uint64_t hash_mask;       /* ~0; tests weaken it to force collisions */
    struct hot_s *hot;        /* hot-stack cache, reserved for HOT_MAX_SLOTS */
    uint32_t hot_mask;        /* active slots - 1; 0 with hot_slots == 0: off */
    uint32_t hot_slots;
    uint64_t hi_tab[HI_WIDE]; /* high halves, already shifted left by 32 */
    uint64_t drops;           /* interns answered with HT_STACK_ID_OVERFLOW */
    uint64_t drops_reentrant; /* ... of which by a handler inside an insert */
    char pad_[64];
    /* ---- written under `lock` ---- */
    ht_spinlock_t lock;
    int state;                /* 0 = not yet set up, 1 = ready, 2 = unusable */
    uint32_t max_nodes, nseg, nwide, nhi, max_wide;
    uint32_t *seg_tab;        /* segment table, rebuilt in place */
    uint32_t seg_tab_bits, seg_tab_max_bits;
    uint32_t *leaf_region[2]; /* the stack table lives in one, grows into the other */
    uint32_t leaf_cur, leaf_max_bits;
    uint64_t leaf_touched[2]; /* high-water bytes used in each region */
    uint64_t leaf_entries;    /* entries in the current stack table = stacks */
    uint64_t budget;
    uint64_t used;            /* bytes touched, all structures, page-rounded */
    uint64_t used_exact;      /* the same without page rounding */
    uint64_t reserved;        /* address space reserved */
    uint64_t committed[NPARTS];   /* bytes of each reservation ht__commit'ed, in
                                 parts() order */
    uint64_t leaf_rebuilds, seg_rebuilds;
    int fork_locked;
    /* reservation sizes, for teardown */
    size_t sz_lo, sz_hi, sz_seglo, sz_segp, sz_wide, sz_segtab, sz_leaf, sz_hot;
} db = { .hash_mask = ~0ull };

/* A signal handler that interrupts this thread's insert must not wait for
 * the lock its own thread holds. */
#define t_in_insert (*ht__thread_word(HT_TW_STACKDB_INSERT))

static uint64_t page_round(uint64_t b) { return (b + PAGE - 1) & ~(uint64_t)(PAGE - 1); }

/* ---- reading the tree (lock-free for nodes below a published count) --- */

/* Node x's address; its parent in *parent. */
static HT_ALWAYS_INLINE uint64_t node_read(uint32_t x, uint32_t *parent)
{
    uint32_t h = db.hi[x], v = db.lo[x];
    *parent = x - 1;
    if (h & START) {
        *parent = db.seg_parent[v];
        v = db.seg_lo[v];
    }
    return (h & HI_WIDE) == HI_WIDE ? db.wide[v] : (db.hi_tab[h & HI_WIDE] | v);
}

static HT_ALWAYS_INLINE uint64_t node_addr(uint32_t x)
{
    uint32_t p;
    return node_read(x, &p);
}

/* The parent of segment-start node x. */
static HT_ALWAYS_INLINE uint32_t start_parent(uint32_t x)
{
    return db.seg_parent[db.lo[x]];
}

static HT_ALWAYS_INLINE uint32_t node_parent(uint32_t x)
{
    return (db.hi[x] & START) ? start_parent(x) : x - 1;
}

/* Full compare of frames[0..n) against the chain of node `id` (below a
 * node count read with acquire): same frames, same depth. */
static HT_ALWAYS_INLINE int chain_equals(uint32_t x, void *const *frames, int n)
{
    int i = 0;
    for (;;) {
        if (ht_unlikely(x == 0))
            return 0;                         /* chain shorter than the stack */
        uint32_t p;
        if (node_read(x, &p) != (uint64_t)(uintptr_t)frames[i])
            return 0;
        if (++i == n)
            return p == 0;                    /* same depth: must end at the root */
        x = p;
    }
}

/* ---- the hot-stack cache ---------------------------------------------- */

static HT_ALWAYS_INLINE hot_t *hot_slot(uint64_t h)
{
    /* not the bits that choose the stack table slot */
    return &db.hot[(uint32_t)(h >> 17) & ht_load_relaxed(&db.hot_mask)];
}

/* The outer frames of a deep stack against its cached node's chain; out
 * of line, so the lookup's own chain compare keeps its code. */
static HT_NOINLINE int hot_rest_equals(uint32_t rest, void *const *frames, int n)
{
    return rest < ht_load_acquire(&db.node_count) && chain_equals(rest, frames, n);
}

/* Returns the id cached for frames[0..n) with hash h in slot s, or 0.
 * Lock-free. */
static HT_ALWAYS_INLINE uint32_t hot_find(hot_t *s, void *const *frames, int n, uint64_t h)
{
    uint32_t seq = ht_load_acquire(&s->seq);
    if ((seq & 1) || s->hash != h || s->n != (uint32_t)n)
        return 0;
    uint32_t id = s->id, rest = s->rest;
    int m = n <= HOT_FRAMES ? n : HOT_FRAMES;
    int eq = __builtin_memcmp(s->f, frames, (size_t)m * sizeof(void *)) == 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (!eq || ht_load_relaxed(&s->seq) != seq)
        return 0;
    if (n > HOT_FRAMES && !hot_rest_equals(rest, frames + HOT_FRAMES, n - HOT_FRAMES))
        return 0;
    return id;
}

/* Caches (frames, id), an id just verified against the tree, in slot s.
 * Skips a slot another writer (or this thread, interrupted) is filling. */
static HT_NOINLINE void hot_fill(hot_t *s, void *const *frames, int n, uint64_t h, uint32_t id)
{
    uint32_t seq = ht_load_relaxed(&s->seq);
    if ((seq & 1) || !__atomic_compare_exchange_n(&s->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
                                                  __ATOMIC_RELAXED))
        return;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint32_t rest = 0;
    if (n > HOT_FRAMES) {
        rest = id;
        for (int i = 0; i < HOT_FRAMES; i++)
            rest = node_parent(rest);
    }
    s->id = id;
    s->n = (uint32_t)n;
    s->rest = rest;
    s->hash = h;
    __builtin_memcpy(s->f, frames, (size_t)(n <= HOT_FRAMES ? n : HOT_FRAMES) * sizeof(void *));
    ht_store_release(&s->seq, seq + 2);
}

/* ---- the stack table -------------------------------------------------- */

static HT_ALWAYS_INLINE uint32_t *leaf_base(uint64_t ref)
{
    return (uint32_t *)(uintptr_t)(ref & ~(uint64_t)63);
}

static HT_ALWAYS_INLINE uint32_t id_mask(void)
{
    return (uint32_t)((1ull << db.id_bits) - 1);
}

/* Looks `frames` up in the stack table `ref`. Lock-free; returns the node
 * id or 0 (not found, or the table was being rebuilt). The slot is chosen
 * by the top bits of h, the tag is its low bits. */
static HT_ALWAYS_INLINE uint32_t leaf_find(uint64_t ref, void *const *frames, int n, uint64_t h)
{
    uint32_t *tab = leaf_base(ref);
    unsigned bits = (unsigned)(ref & 63);
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t idm = id_mask();
    uint32_t tag = (uint32_t)(h << db.id_bits);
    uint32_t i = (uint32_t)(h >> (64 - bits));
    for (uint64_t probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
        uint32_t e = ht_load_acquire(&tab[i]);
        if (e == 0)
            return 0;
        if ((e & ~idm) != tag)
            continue;
        uint32_t id = e & idm;
        if (id < ht_load_acquire(&db.node_count) && chain_equals(id, frames, n))
            return id;
    }
    return 0;
}

/* Puts the entry for node `id` with stack hash h into a table of 2^bits
 * slots (under the lock; there is room). */
static void leaf_put(uint32_t *tab, unsigned bits, uint64_t h, uint32_t id)
{
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t i = (uint32_t)(h >> (64 - bits));
    while (ht_load_relaxed(&tab[i]) != 0)
        i = (i + 1) & mask;
    ht_store_release(&tab[i], (uint32_t)(h << db.id_bits) | id);
}

/* ht_stack_hash of the stack ending at node x, from the tree. */
static uint64_t stack_hash_of(uint32_t x)
{
    uint64_t sum = 0, i = 0, rp = 1;
    for (; x != 0; x = node_parent(x), i++, rp *= HT_HASH_R)
        sum += ht_hash_mix(node_addr(x)) * rp;
    return ht_hash_finish(sum, i) & db.hash_mask;
}

/* ---- the segment table (under the lock only) -------------------------- */

static HT_ALWAYS_INLINE uint64_t seg_hash(uint32_t parent, uint64_t addr)
{
    return ht_hash_mix(addr + parent * HT_HASH_K3) & db.hash_mask;
}

/* The child of `parent` with address `addr`, or 0. */
static uint32_t child_find(uint32_t parent, uint64_t addr)
{
    uint32_t c = parent + 1;
    if (parent != 0 && c < db.node_count && !(db.hi[c] & START) && node_addr(c) == addr)
        return c;        /* the continuation of parent's segment */
    uint64_t h = seg_hash(parent, addr);
    unsigned bits = db.seg_tab_bits;
    uint32_t mask = (uint32_t)((1ull << bits) - 1), idm = id_mask();
    uint32_t tag = (uint32_t)(h << db.id_bits);
    for (uint32_t i = (uint32_t)(h >> (64 - bits));; i = (i + 1) & mask) {
        uint32_t e = db.seg_tab[i];
        if (e == 0)
            return 0;
        if ((e & ~idm) == tag) {
            uint32_t s = e & idm;
            if (node_addr(s) == addr && start_parent(s) == parent)
                return s;
        }
    }
}

static void seg_put(uint32_t s)
{
    uint64_t h = seg_hash(start_parent(s), node_addr(s));
    unsigned bits = db.seg_tab_bits;
    uint32_t mask = (uint32_t)((1ull << bits) - 1);
    uint32_t i = (uint32_t)(h >> (64 - bits));
    while (db.seg_tab[i] != 0)
        i = (i + 1) & mask;
    db.seg_tab[i] = (uint32_t)(h << db.id_bits) | s;
}

/* ---- budget ----------------------------------------------------------- */

typedef struct {
    uint64_t nodes, segs, wide, seg_slots, leaf0, leaf1, hot_slots;
} sizes_t;

static sizes_t sizes_now(void)
{
    sizes_t z = { db.node_count, db.nseg, db.nwide, 1ull << db.seg_tab_bits,
                  db.leaf_touched[0], db.leaf_touched[1], db.hot_slots };
    return z;
}

/* Bytes each array uses for these sizes: lo, hi, seg_lo, seg_parent,
 * wide, seg_tab, the two stack table regions, hot. */
static void parts(sizes_t z, uint64_t part[NPARTS])
{
    part[0] = z.nodes * 4;
    part[1] = z.nodes;
    part[2] = z.segs * 4;
    part[3] = z.segs * 4;
    part[4] = z.wide * 8;
    part[5] = z.seg_slots * 4;
    part[6] = z.leaf0;
    part[7] = z.leaf1;
    part[8] = z.hot_slots * sizeof(hot_t);
}

/* Bytes touched for these sizes; `round`: page-rounded per array. */
static uint64_t bytes_for(sizes_t z, int round)
{
    uint64_t part[NPARTS], sum = 0;
    parts(z, part);
    for (unsigned i = 0; i < HT_ARRAY_SIZE(part); i++)
        sum += round ? page_round(part[i]) : part[i];
    return sum;
}

/* Commits what these sizes touch (page-rounded, as the budget counts it)
 * before it is written: on Windows reserved memory is unusable until
 * committed, and committing only what is used keeps the commit charge at
 * bytes_mapped. Under the lock. Returns 0, or -1 if the system refused,
 * which the callers treat like an exhausted budget. */
static int commit_sizes(sizes_t z)
{
    uint64_t part[NPARTS];
    void *base[NPARTS] = { db.lo, db.hi, db.seg_lo, db.seg_parent, db.wide, db.seg_tab,
                           db.leaf_region[0], db.leaf_region[1], db.hot };
    parts(z, part);
    for (unsigned i = 0; i < HT_ARRAY_SIZE(part); i++) {
        uint64_t b = page_round(part[i]);
        if (b <= db.committed[i])
            continue;
        if (!base[i] || ht__commit(base[i], (size_t)b) != 0)
            return -1;
        db.committed[i] = b;
    }
    return 0;
}

static void account(void)
{
    ht_store_relaxed(&db.used, bytes_for(sizes_now(), 1));
    ht_store_relaxed(&db.used_exact, bytes_for(sizes_now(), 0));
}

/* Grows the hot-stack cache while it stays under a quarter of the other
 * bytes and within the budget. Lookups with the old mask look at slots
 * that still exist; entries check themselves, so a changed mask only
 * costs misses. */
static void hot_grow(void)
{
    for (;;) {
        uint32_t want = db.hot_slots ? db.hot_slots * 2 : HOT_MIN_SLOTS;
        if (want > HOT_MAX_SLOTS || !db.hot)
            return;
        sizes_t z = sizes_now();
        z.hot_slots = 0;
        uint64_t rest = bytes_for(z, 0);
        z.hot_slots = want;
        if ((uint64_t)want * sizeof(hot_t) * 4 > rest || bytes_for(z, 1) > db.budget ||
            commit_sizes(z) != 0)
            return;
        db.hot_slots = want;
        ht_store_release(&db.hot_mask, want - 1);
    }
}

/* Makes room in the segment table for one more segment: doubles it and
 * rebuilds it in place from the start flags (only the lock holder reads
 * it) while the budget allows, else accepts up to 9/10 load. */
static int seg_room(void)
{
    uint64_t want = (uint64_t)db.nseg + 1;
    if (want * LOAD_DEN <= ((uint64_t)GROW_NUM << db.seg_tab_bits))
        return 1;
    unsigned nb = db.seg_tab_bits + 1;
    sizes_t z = sizes_now();
    z.seg_slots = 1ull << nb;
    if (nb > db.seg_tab_max_bits || bytes_for(z, 1) > db.budget || commit_sizes(z) != 0)
        return want * LOAD_DEN <= ((uint64_t)FULL_NUM << db.seg_tab_bits);
    for (uint64_t i = 0; i < (1ull << nb); i++)
        db.seg_tab[i] = 0;
    db.seg_tab_bits = nb;
    for (uint32_t x = 1; x < db.node_count; x++)
        if (db.hi[x] & START)
            seg_put(x);
    db.seg_rebuilds++;
    return 1;
}

/* Makes room for one more stack table entry: rebuilds the table at twice
 * the size into the other region (rehashing every stack from the tree) and
 * publishes it, while the budget allows. Returns 1 if there is room (a
 * full table stops indexing new stacks: they are still found, under the
 * lock, through the tree). */
static int leaf_room(void)
{
    uint64_t ref = db.leaf_ref;
    unsigned bits = (unsigned)(ref & 63);
    uint64_t want = db.leaf_entries + 1;
    if (want * LOAD_DEN <= ((uint64_t)GROW_NUM << bits))
        return 1;
    unsigned nb = bits + 1;
    uint32_t other = db.leaf_cur ^ 1;
    uint64_t nbytes = 4ull << nb;
    sizes_t z = sizes_now();
    if (other) z.leaf1 = nbytes > z.leaf1 ? nbytes : z.leaf1;
    else       z.leaf0 = nbytes > z.leaf0 ? nbytes : z.leaf0;
    if (nb > db.leaf_max_bits || bytes_for(z, 1) > db.budget || commit_sizes(z) != 0)
        return want * LOAD_DEN <= ((uint64_t)FULL_NUM << bits);
    uint32_t *dst = db.leaf_region[other], *src = leaf_base(ref);
    /* lookups that still read `dst` (from two growths ago) see zeros or
     * entries of the new table: both are safe for them */
    for (uint64_t i = 0; i < (1ull << nb); i++)
        ht_store_relaxed(&dst[i], 0);
    uint32_t idm = id_mask();
    for (uint64_t i = 0; i < (1ull << bits); i++) {
        uint32_t e = src[i];
        if (e)
            leaf_put(dst, nb, stack_hash_of(e & idm), e & idm);
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

static void teardown(void)
{
    ht_store_release(&db.leaf_ref, 0);
    ht_store_release(&db.hot_mask, 0);
    void *p[] = { db.lo, db.hi, db.seg_lo, db.seg_parent, db.wide, db.seg_tab,
                  db.leaf_region[0], db.leaf_region[1], db.hot };
    size_t sz[] = { db.sz_lo, db.sz_hi, db.sz_seglo, db.sz_segp, db.sz_wide,
                    db.sz_segtab, db.sz_leaf, db.sz_leaf, db.sz_hot };
    for (unsigned i = 0; i < HT_ARRAY_SIZE(p); i++)
        if (p[i])
            ht__unmap(p[i], sz[i]);
    db.lo = NULL;
    db.hi = NULL;
    db.seg_lo = NULL;
    db.seg_parent = NULL;
    db.wide = NULL;
    db.seg_tab = NULL;
    db.leaf_region[0] = db.leaf_region[1] = NULL;
    db.hot = NULL;
    db.hot_slots = 0;
    __builtin_memset(db.committed, 0, sizeof db.committed);
}

/* The budget when HEAPTRAIL_STACKDB_MAX does not say: DEFAULT_MAX, or
 * under an address-space limit an eighth of heaptrail's allowance (the
 * reservations come to about 3.7 times the budget: half the allowance). */
static uint64_t default_budget(void) { return ht__reserve_share(8, DEFAULT_MAX); }

/* Reserves the address space the budget can ever need and sets up the
 * first tables. Under the lock. Returns the new state: 1 ready, 2 unusable
 * (no address space, or a budget too small for the first tables). */
static int setup(uint64_t budget)
{
    if (budget > MAX_BUDGET)
        budget = MAX_BUDGET;
    db.budget = budget;
    uint64_t maxn = budget / MIN_NODE_BYTES + 2;
    if (maxn > 0xfffffffeull)
        maxn = 0xfffffffeull;
    db.max_nodes = (uint32_t)maxn;
    db.id_bits = log2_ceil(maxn);
    if (db.id_bits > 28)
        db.id_bits = 32;          /* too few bits left for a useful tag */
    /* no table can outgrow the budget */
    unsigned tbits = log2_ceil(maxn * LOAD_DEN / GROW_NUM + 1);
    while (tbits > SEG_MIN_BITS && (4ull << tbits) > budget)
        tbits--;
    if (tbits < SEG_MIN_BITS)
        tbits = SEG_MIN_BITS;
    db.seg_tab_max_bits = db.leaf_max_bits = tbits;
    uint64_t wide = budget / 8 + 1;
    db.max_wide = wide > maxn ? (uint32_t)maxn : (uint32_t)wide;

    db.sz_lo = page_round(maxn * 4);
    db.sz_hi = page_round(maxn);
    db.sz_seglo = page_round(maxn * 4);
    db.sz_segp = page_round(maxn * 4);
    db.sz_wide = page_round((uint64_t)db.max_wide * 8);
    db.sz_segtab = (size_t)4 << tbits;
    db.sz_leaf = (size_t)4 << tbits;
    db.lo = ht__reserve(db.sz_lo);
    db.hi = ht__reserve(db.sz_hi);
    db.seg_lo = ht__reserve(db.sz_seglo);
    db.seg_parent = ht__reserve(db.sz_segp);
    db.wide = ht__reserve(db.sz_wide);
    db.seg_tab = ht__reserve(db.sz_segtab);
    db.leaf_region[0] = ht__reserve(db.sz_leaf);
    db.leaf_region[1] = ht__reserve(db.sz_leaf);
    db.sz_hot = page_round((uint64_t)HOT_MAX_SLOTS * sizeof(hot_t));
    db.hot = ht__reserve(db.sz_hot);
    db.hot_slots = 0;
    db.reserved = db.sz_lo + db.sz_hi + db.sz_seglo + db.sz_segp + db.sz_wide +
                  db.sz_segtab + 2 * db.sz_leaf + (db.hot ? db.sz_hot : 0);
    if (!db.lo || !db.hi || !db.seg_lo || !db.seg_parent || !db.wide ||
        !db.seg_tab || !db.leaf_region[0] || !db.leaf_region[1])
        return 2;
    /* node 0, the root: lo 0, hi 0, not a start; reads as address 0 but is
     * never compared (walks stop at it) */
    db.seg_tab_bits = SEG_MIN_BITS;
    db.leaf_cur = 0;
    db.leaf_touched[0] = 4ull << LEAF_MIN_BITS;
    db.leaf_touched[1] = 0;
    ht_store_release(&db.node_count, 1u);
    sizes_t z = sizes_now();
    z.nodes = 2;
    z.segs = 1;
    if (bytes_for(z, 1) > budget) {
        /* too small even for the first node: every new stack overflows */
        db.leaf_touched[0] = 0;
        db.seg_tab_bits = 0;
        ht_store_relaxed(&db.used, 0);
        return 2;
    }
    if (commit_sizes(sizes_now()) != 0)
        return 2;
    ht_store_release(&db.leaf_ref, (uint64_t)(uintptr_t)db.leaf_region[0] | LEAF_MIN_BITS);
    account();
    return 1;
}

/* ---- intern ----------------------------------------------------------- */

static uint32_t drop(void)
{
    ht_fetch_add(&db.drops, 1);
    return HT_STACK_ID_OVERFLOW;
}

/* Writes node x = (parent, addr); x == count (the lock holder appends). */
static void node_write(uint32_t x, uint32_t parent, uint64_t addr, int start)
{
    uint32_t hi_half = (uint32_t)(addr >> 32), k;
    for (k = 0; k < db.nhi && db.hi_tab[k] != (uint64_t)hi_half << 32; k++)
        ;
    if (k == db.nhi && db.nhi < HI_WIDE)
        db.hi_tab[db.nhi++] = (uint64_t)hi_half << 32;
    uint32_t v;
    if (k < db.nhi) {
        v = (uint32_t)addr;
    } else {
        k = HI_WIDE;
        db.wide[db.nwide] = addr;
        v = db.nwide++;
    }
    if (start) {
        db.seg_lo[db.nseg] = v;
        db.seg_parent[db.nseg] = parent;
        v = db.nseg++;
    }
    db.lo[x] = v;
    db.hi[x] = (uint8_t)(k | (start ? START : 0));
}

/* How many of frames[0..j) would need a wide[] slot. */
static uint32_t wide_needed(void *const *frames, int j)
{
    uint32_t w = 0, nhi = db.nhi;
    uint64_t extra[HI_WIDE];
    for (int k = 0; k < j; k++) {
        uint64_t hh = (uint64_t)(uintptr_t)frames[k] >> 32 << 32;
        uint32_t i;
        for (i = 0; i < db.nhi && db.hi_tab[i] != hh; i++)
            ;
        if (i < db.nhi)
            continue;
        for (i = db.nhi; i < nhi && extra[i] != hh; i++)
            ;
        if (i < nhi)
            continue;
        if (nhi < HI_WIDE)
            extra[nhi++] = hh;
        else
            w++;
    }
    return w;
}

/* The insert path, under the lock. */
static uint32_t intern_locked(void *const *frames, int n, uint64_t h)
{
    if (ht_unlikely(db.state != 1)) {
        if (db.state == 0)
            db.state = setup(ht__parse_size(ht__env("HEAPTRAIL_STACKDB_MAX"), default_budget()));
        if (db.state != 1)
            return HT_STACK_ID_OVERFLOW;
    }
    uint32_t id = leaf_find(db.leaf_ref, frames, n, h);
    if (id)
        return id;

    /* how much of the stack exists: walk from the outermost frame */
    uint32_t cur = 0;
    int j = n;
    while (j > 0) {
        uint32_t c = child_find(cur, (uint64_t)(uintptr_t)frames[j - 1]);
        if (!c)
            break;
        cur = c;
        j--;
    }
    if (j > 0) {
        /* frames[0..j) become one new segment below `cur` */
        uint32_t wneed = wide_needed(frames, j);
        sizes_t z = sizes_now();
        z.nodes += (uint64_t)j;
        z.segs += 1;
        z.wide += wneed;
        if (z.nodes > db.max_nodes || z.wide > db.max_wide || !seg_room())
            return HT_STACK_ID_OVERFLOW;
        z.seg_slots = 1ull << db.seg_tab_bits;
        if (bytes_for(z, 1) > db.budget || commit_sizes(z) != 0)
            return HT_STACK_ID_OVERFLOW;
        uint32_t x = db.node_count, s = x;
        for (int k = j - 1; k >= 0; k--, x++)
            node_write(x, x == s ? cur : x - 1, (uint64_t)(uintptr_t)frames[k], x == s);
        ht_store_release(&db.node_count, x);
        seg_put(s);
        cur = x - 1;
    }
    if (leaf_room()) {
        leaf_put(leaf_base(db.leaf_ref), (unsigned)(db.leaf_ref & 63), h, cur);
        db.leaf_entries++;
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
    if (db.state == 1) {
        hot_grow();
        account();
    }
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
    hot_t *hs = NULL;
    if (ht_load_acquire(&db.hot_mask) != 0) {
        /* the thread's window (HOT_WINDOW above): lookups in its low 16
         * bits, hits in the next 16, interns left to rest above; a count
         * of its own, since a count in the slot was a write to a shared
         * line on every miss (88.8 ns a known stack with two threads
         * against 40.9 with one) */
        uintptr_t *tw = ht__thread_word(HT_TW_STACKDB_HOT), w = *tw;
        if (w >> 32) {
            *tw = w - ((uintptr_t)1 << 32);
        } else {
            hs = hot_slot(h);
            uint32_t id = hot_find(hs, frames, n, h);
            uint32_t looks = (uint32_t)(w & 0xffff) + 1, hits = (uint32_t)(w >> 16) + (id != 0);
            if (looks == HOT_WINDOW)
                *tw = hits * HOT_PAYS < looks ? (uintptr_t)HOT_REST << 32 : 0;
            else
                *tw = (uintptr_t)hits << 16 | looks;
            if (ht_likely(id != 0))
                return id;
            if ((looks - hits) % HOT_REFILL != 0)
                hs = NULL;              /* not this miss's turn to refill */
        }
    }
    uint64_t ref = ht_load_acquire(&db.leaf_ref);
    if (ht_likely(ref != 0)) {
        uint32_t id = leaf_find(ref, frames, n, h);
        if (ht_likely(id != 0)) {
            if (hs)
                hot_fill(hs, frames, n, h, id);
            return id;
        }
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
    for (; id != 0; id = node_parent(id), k++)
        if (k < max)
            frames[k] = (void *)(uintptr_t)node_addr(id);
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
    out->parent = node_parent(id);
    out->addr = node_addr(id);
    return 0;
}

void ht__stackdb_info(ht_stackdb_info_t *out)
{
    out->stacks = ht_load_relaxed(&db.leaf_entries);
    uint32_t c = ht_load_acquire(&db.node_count);
    out->nodes = c ? c : 1;
    out->segments = ht_load_relaxed(&db.nseg);
    out->bytes_mapped = ht_load_relaxed(&db.used);
    out->bytes_used = ht_load_relaxed(&db.used_exact);
    out->bytes_reserved = ht_load_relaxed(&db.reserved);
    out->budget = db.state ? db.budget
                           : ht__parse_size(ht__env("HEAPTRAIL_STACKDB_MAX"), default_budget());
    out->drops = ht_load_relaxed(&db.drops);
    out->drops_reentrant = ht_load_relaxed(&db.drops_reentrant);
    uint64_t ref = ht_load_relaxed(&db.leaf_ref);
    out->stack_table_slots = ref ? 1ull << (ref & 63) : 0;
    out->segment_table_slots = db.state == 1 ? 1ull << db.seg_tab_bits : 0;
    out->stack_table_rebuilds = db.leaf_rebuilds;
    out->segment_table_rebuilds = db.seg_rebuilds;
    out->wide_addresses = db.nwide;
    out->hot_slots = ht_load_relaxed(&db.hot_slots);
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
    /* a hot slot another thread was filling stays odd forever: empty it
     * (the child has one thread, this one) */
    for (uint32_t i = 0; db.hot && i < db.hot_slots; i++)
        if (db.hot[i].seq & 1) {
            db.hot[i].n = 0xffffffffu;
            ht_store_release(&db.hot[i].seq, db.hot[i].seq + 1);
        }
    /* the lock it inherited is ours */
    ht__stackdb_fork_parent();
}

/* heaptrail detach, once no thread can be inside the agent: the memory
 * goes back; the database reads as unusable (state 2) from then on. */
void ht__stackdb_release(void)
{
    if (db.state != 0)
        teardown();
    db.state = 2;
    ht_store_release(&db.node_count, 0u);
}

/* ---- tests ------------------------------------------------------------ */

void ht__stackdb_reset_for_test(uint64_t budget, uint64_t hash_mask)
{
    ht__spin_lock(&db.lock);
    if (db.state != 0)
        teardown();
    ht_store_release(&db.node_count, 0u);
    db.state = 0;
    db.nseg = db.nwide = db.nhi = 0;
    db.leaf_entries = 0;
    db.leaf_rebuilds = db.seg_rebuilds = 0;
    db.leaf_touched[0] = db.leaf_touched[1] = 0;
    db.used = db.used_exact = db.reserved = 0;
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
