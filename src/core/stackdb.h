/* stackdb.h -- the stack trace database's internal API (the public face is
 * ht_stack_id/ht_stack_frames/ht_stackdb_stats in heaptrail.h).
 *
 * Stacks are interned in a prefix tree rooted at the outermost frame:
 * node = (parent node, return address); the id of a stack is the id of its
 * innermost node. Node 0 is the root (the empty stack, HT_STACK_ID_EMPTY);
 * ids are dense and never reused. Exact: the hash only speeds the search,
 * frames are compared in full. Lookups of known stacks take no lock.
 *
 * Async-signal-safe, allocation-free (memory comes from ht__reserve /
 * ht__map arenas), fork-safe. Never calls anything platform-specific
 * except through src/core/util.h. */
#ifndef HT_CORE_STACKDB_H
#define HT_CORE_STACKDB_H

#include "util.h"

/* Interns frames[0..n) (innermost first). `hash` must be
 * ht_stack_hash(frames, n) (ht_capture returns it). Returns the id, or
 * HT_STACK_ID_OVERFLOW when the memory budget is exhausted (counted). */
HT_INTERNAL uint32_t ht__stackdb_intern(void *const *frames, int n, uint64_t hash);

/* Frames of `id`, innermost first; returns the depth (at most `max`
 * stored), 0 for the empty stack, -1 for an unknown id. */
HT_INTERNAL int ht__stackdb_frames(uint32_t id, void **frames, int max);

/* For the trace writer: every node with id < ht__stackdb_node_count() is
 * complete and readable with ht__stackdb_node(). A writer keeps a
 * watermark and writes nodes [watermark, count) once each. */
typedef struct ht_stacknode_s {
    uint32_t parent;    /* parent node id (0 = the root) */
    uint64_t addr;      /* return address of this frame */
} ht_stacknode_t;
HT_INTERNAL uint32_t ht__stackdb_node_count(void);
/* Node `id` (0 is the root: parent 0, addr 0). Returns 0, or -1 for an id
 * not below ht__stackdb_node_count(). Lock-free, async-signal-safe. */
HT_INTERNAL int ht__stackdb_node(uint32_t id, ht_stacknode_t *out);

/* Every counter the database keeps (ht_stackdb_stats() is a subset).
 * Reads without the lock: counters may be a moment apart. */
typedef struct ht_stackdb_info_s {
    uint64_t stacks;          /* distinct stacks interned */
    uint64_t nodes;           /* prefix-tree nodes, the root included */
    uint64_t segments;        /* runs of consecutive node ids (one per insert) */
    uint64_t bytes_mapped;    /* memory touched (page-rounded), what the budget limits */
    uint64_t bytes_used;      /* the same without page rounding */
    uint64_t bytes_reserved;  /* address space reserved (not committed) */
    uint64_t budget;          /* HEAPTRAIL_STACKDB_MAX */
    uint64_t drops;           /* interns answered with HT_STACK_ID_OVERFLOW */
    uint64_t drops_reentrant; /* ... of them by a signal handler that interrupted
                                 an insert on its own thread and missed */
    uint64_t stack_table_slots, segment_table_slots;
    uint64_t stack_table_rebuilds, segment_table_rebuilds;
    uint64_t wide_addresses;  /* addresses kept whole (their high half did not
                                 fit the table of high halves) */
    uint64_t hot_slots;       /* slots in the hot-stack cache */
} ht_stackdb_info_t;
HT_INTERNAL void ht__stackdb_info(ht_stackdb_info_t *out);

/* fork: call prepare before fork(), parent/child after (the agent's
 * pthread_atfork handlers do), so the child inherits a consistent database
 * even if another thread was inserting. */
HT_INTERNAL void ht__stackdb_fork_prepare(void);
HT_INTERNAL void ht__stackdb_fork_parent(void);
HT_INTERNAL void ht__stackdb_fork_child(void);

/* heaptrail detach (the agent leaving a process), once no thread can be
 * inside the agent: gives the database's memory back. Nothing may use the
 * database afterwards. */
HT_INTERNAL void ht__stackdb_release(void);

/* Tests and benchmarks only: discards the database and sets up a new one
 * with `budget` bytes (0: set up lazily from HEAPTRAIL_STACKDB_MAX) and
 * the internal hash ANDed with `hash_mask` (~0 in normal use; a mask of a
 * few bits forces collisions in both tables, ids must stay exact). No
 * other thread may use the database meanwhile. */
HT_INTERNAL void ht__stackdb_reset_for_test(uint64_t budget, uint64_t hash_mask);

#endif
