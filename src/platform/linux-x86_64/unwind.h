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
/* Faults in the pages of [p, p + size) with one madvise (sys.c): memory
 * of ours about to be written, where a fault a page would cost ~10x as
 * much. Nothing under a seccomp filter or on kernels before 5.14. */
HT_INTERNAL void ht__populate(void *p, size_t size);
/* A hash table's memory (sys.c): faulted in at once, and from 2 MiB on
 * aligned to and advised for transparent huge pages, so random probes of
 * a large table do not each miss the TLB. Released with ht__unmap. */
HT_INTERNAL void *ht__map_table(size_t size);
/* Set once the program is about to run under a seccomp filter (the agent's
 * prctl/syscall hooks): memory comes from plain mmap then, without the
 * madvise calls a filter may refuse (chromium's allows only some advice). */
HT_INTERNAL extern int ht__sandboxed;

/* ht_capture for the agent, with a memo (capture.S). When the stack was
 * replayed whole from one of the thread's trails (unwind.c, replay()),
 * *memo points at that trail's memo word: 0, or what the caller stored
 * there after an earlier replay of the same trail, which cleared it if it
 * has changed since. The caller stores what it derived from the stack
 * there (the agent: its site record), so the next replay of that trail
 * needs no stack-database lookup; it must then call
 * ht__capture_release(), since until then the trail stays held (a walk
 * nested in a signal handler goes without it). Otherwise *memo is NULL.
 * `skip` counts from the caller of ht__capture_memo, as for ht_capture. */
HT_INTERNAL int ht__capture_memo(int skip, int max, void **frames, uint64_t *hash, uint32_t **memo);
HT_INTERNAL void ht__capture_release(void);

typedef struct { uintptr_t lo, hi; } ht_stack_range_t;
HT_INTERNAL extern __thread ht_stack_range_t t_ranges[] __attribute__((tls_model("initial-exec")));
HT_INTERNAL int ht__stack_range_slow(uintptr_t sp, uintptr_t *lo, uintptr_t *hi);

/* The readable mapping that holds addr, [*lo, *hi) (stack.c). _query asks
 * the kernel (PROCMAP_QUERY, Linux 6.11): 0, -1 if there is none, -2 if the
 * kernel cannot answer. _stream reads /proc/self/maps up to it: 0, or -1
 * if there is none or no /proc. Async-signal-safe. */
HT_INTERNAL int ht__maps_query(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);
HT_INTERNAL int ht__maps_stream(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);
/* The definition a wrapper of ours (the agent's hooks, dlclose,
 * __register_frame) passes its call on to (modules.c). */
HT_INTERNAL void *ht__next_def(const char *name);
/* One line of /proc/self/maps: "lo-hi perms offset dev inode   path". */
typedef struct ht_maps_line_s {
    uintptr_t lo, hi;
    uint64_t off, inode;
    uint8_t read, write, exec, shared;  /* perms r, w, x and s */
    const char *path;           /* NULL, or the path: path_len bytes of the line,
                                 * valid while the line is (not 0-terminated) */
    size_t path_len;
} ht_maps_line_t;
/* The next mapping's line of maps text at *p (lines end at a newline or
 * at end; lines that are not a mapping's are skipped) into *l, and *p past
 * it. Returns 1, or 0 at the end. For text read whole (the leak check's,
 * and its comparison of the maps before and after its fork). */
HT_INTERNAL int ht__maps_next(const char **p, const char *end, ht_maps_line_t *l);
/* Calls fn for each line of /proc/self/maps, in address order, until it
 * returns nonzero. Returns that value, 0 at the end of the file, or -1 if
 * the file cannot be opened. Raw system calls, ~0.7 KiB of stack:
 * async-signal-safe (stack.c). */
HT_INTERNAL int ht__maps_each(int (*fn)(const ht_maps_line_t *, void *), void *ctx);
/* From now on the text only (the agent, under an inherited seccomp
 * filter: it may kill on a call the process never made before). */
HT_INTERNAL void ht__maps_no_query(void);
/* heaptrail detach, once no thread can be inside the agent: the threads'
 * trails give their pages back (unwind.c) */
HT_INTERNAL void ht__trails_release(void);

/* Finds the readable stack mapping that contains `sp` and stores its
 * bounds in *lo and *hi. Uses a small per-thread cache, else
 * ht__maps_query or, failing that, ht__maps_stream (neither under
 * ht__sandboxed: then only the main thread's stack is known). Returns 0,
 * or -1 if sp lies in no known mapping. Async-signal-safe. */
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
