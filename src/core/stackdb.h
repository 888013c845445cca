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
HT_INTERNAL int ht__stackdb_node(uint32_t id, ht_stacknode_t *out);

/* fork: call prepare before fork(), parent/child after (the agent's
 * pthread_atfork handlers do), so the child inherits a consistent database
 * even if another thread was inserting. */
HT_INTERNAL void ht__stackdb_fork_prepare(void);
HT_INTERNAL void ht__stackdb_fork_parent(void);
HT_INTERNAL void ht__stackdb_fork_child(void);

#endif
