/* unwind.h -- internals of the linux-x86_64 unwinder shared between its
 * files: the code generation, stack ranges and the compact rule cache. */
#ifndef HT_LINUX_X86_64_UNWIND_H
#define HT_LINUX_X86_64_UNWIND_H

#include "../../core/util.h"

/* Bumped around every dlclose (and by code registration): cached rules of
 * an older generation are ignored. */
HT_INTERNAL extern uint32_t ht__code_gen;
HT_INTERNAL void ht__code_changed(void);

/* CLOCK_MONOTONIC in ns, by a raw system call (0 if it fails). sys.c. */
HT_INTERNAL uint64_t ht__mono_ns(void);

/* The mappings heaptrail made (ht__map, ht__reserve) and has not released:
 * up to `max` [start, end) pairs into out; returns their number, or -1 if
 * there are more or one was not noted (sys.c). */
HT_INTERNAL int ht__own_mappings(uintptr_t (*out)[2], int max);
/* ht__map with every page faulted in at once (sys.c): for large buffers
 * about to be filled, where page-by-page faults cost more than the work. */
HT_INTERNAL void *ht__map_populated(size_t size);

typedef struct { uintptr_t lo, hi; } ht_stack_range_t;
HT_INTERNAL extern __thread ht_stack_range_t t_ranges[] __attribute__((tls_model("initial-exec")));
HT_INTERNAL int ht__stack_range_slow(uintptr_t sp, uintptr_t *lo, uintptr_t *hi);

/* Finds the readable stack mapping that contains `sp` and stores its
 * bounds in *lo and *hi. Uses a small per-thread cache, else reads /proc/self/maps with
 * raw system calls. Returns 0, or -1 if sp lies in no known mapping.
 * Async-signal-safe. */
static inline int ht__stack_range(uintptr_t sp, uintptr_t *lo, uintptr_t *hi)
{
    if (ht_likely(sp >= t_ranges[0].lo && sp < t_ranges[0].hi)) {
        *lo = t_ranges[0].lo;
        *hi = t_ranges[0].hi;
        return 0;
    }
    return ht__stack_range_slow(sp, lo, hi);
}

#endif
