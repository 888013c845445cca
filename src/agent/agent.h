/* agent.h -- internals shared by the files of the in-process agent
 * (libheaptrail-preload.so): hooks.c (the interposed allocator family),
 * sites.c (per-stack statistics), live.c (the live-allocation table),
 * mmaps.c (anonymous mappings), writer.c (the trace file), agent.c
 * (start-up, options, fork, crash, the control thread, ht_snapshot).
 *
 * Everything declared here may run inside a malloc hook or a signal handler
 * unless its comment says otherwise: no malloc, no stdio, no locks that can
 * block forever, raw system calls only. */
#ifndef HT_AGENT_H
#define HT_AGENT_H

#include "../core/util.h"
#include "../core/stackdb.h"
#include "heaptrail.h"

#define HT_MAX_FRAMES 128

/* The per-thread re-entry guard: set while this thread runs agent code.
 * A hook that finds it set passes straight through to libc (counted). */
HT_INTERNAL extern HT_TLS int ht__guard;
HT_INTERNAL extern HT_TLS int ht__own_files;   /* the control thread, in a descriptor table of its own */
/* Set by a leak check's stop signal that found this thread inside the
 * agent (reach.c): the hook parks the thread as it leaves. */
HT_INTERNAL extern HT_TLS int ht__park_pending;
HT_INTERNAL void ht__reach_park(void);
/* A hook leaving agent code: drops the guard, then parks if a leak check
 * asked meanwhile (a thread that spends most of its time in the allocator
 * would otherwise seldom be caught outside the guard). */
static inline __attribute__((always_inline)) void ht__guard_leave(void)
{
    ht__guard = 0;
    if (__builtin_expect(ht__park_pending, 0))
        ht__reach_park();
}

/* heaptrail attach (attach.c): set once the agent was loaded into a
 * running process; hooks then find the real functions with RTLD_DEFAULT. */
HT_INTERNAL extern int ht__attached;
HT_INTERNAL int ht__attach_patch(void);
HT_INTERNAL void *ht__attach_real(const char *name);
HT_INTERNAL void ht__attach_poll(void);
HT_INTERNAL void ht__attach_unpatch(void);
/* heaptrail attach after a detach: a fresh copy of the agent (attach.c) */
HT_INTERNAL int ht__attach_again(const char *opts);
/* The agent's memory, for the leak check to leave out: this instance's
 * module and mappings, then those of its earlier instances (after a
 * detach). Returns the count, -1 if they do not fit in max (attach.c). */
HT_INTERNAL int ht__agent_memory(uintptr_t (*out)[2], int max);

/* Process-wide state read on every hook. */
enum {
    HT_ON_OFF = 0,              /* hooks pass through */
    HT_ON_FULL = 1,             /* the normal mode */
    HT_ON_CAPTURE_ONLY = 2,     /* benchmarks: capture, record nothing */
    HT_ON_NO_CAPTURE = 3,       /* benchmarks: record with an empty stack */
    HT_ON_INTERN_ONLY = 4       /* benchmarks: capture, intern, find the site; record nothing */
};
typedef struct ht_agent_s {
    int on;                     /* HT_ON_* */
    int acted;                  /* allocated or released since start-up or the
                                   fork (on's line: read by every hook) */
    int max_frames;
    uint64_t sample;            /* sampling mode's mean bytes between samples
                                   (sample.c); 0: every allocation */
    uint64_t t0_ns;             /* CLOCK_MONOTONIC at start-up */
    uint64_t start_realtime_ns;
    uint64_t start_coarse_ns;   /* CLOCK_REALTIME_COARSE, the clock of file times */
    uint32_t foreign;           /* HT_FOREIGN bits (trace.h), from ht__foreign_allocator */
    const char *foreign_module; /* its module's path ("": the program) */
} ht_agent_t;
HT_INTERNAL extern ht_agent_t ht__agent;
/* Notes that the process allocated or released something (a store only
 * the first time: the line stays shared) */
HT_INTERNAL void ht__agent_acted(void);
static inline void ht__note_acted(void)
{
    if (ht_unlikely(!ht_load_relaxed(&ht__agent.acted)))
        ht__agent_acted();
}
/* Start-up (not async-signal-safe): which allocator functions the program
 * binds to someone else's definition (HT_FOREIGN bits), and in *module the
 * first such definer's path ("": the program; NULL: unknown). */
HT_INTERNAL uint32_t ht__foreign_allocator(const char **module);

/* Sampling mode (sample.c). */
#define HT_SAMPLE_FILTER_BITS 16
HT_INTERNAL extern HT_TLS int64_t ht__t_sample_left;
HT_INTERNAL extern uint8_t ht__sample_filter[1u << HT_SAMPLE_FILTER_BITS];
HT_INTERNAL int ht__sample_slow(size_t n);
HT_INTERNAL void ht__sample_weight(uintptr_t p, uint64_t n, uint64_t *blocks, uint64_t *bytes);
HT_INTERNAL void ht__sample_filter_add(uintptr_t p);
HT_INTERNAL void ht__sample_filter_drop(uintptr_t p);
static HT_ALWAYS_INLINE uint32_t ht__sample_slot(uintptr_t p)
{
    return (uint32_t)((p >> 4) * 0x9e3779b97f4a7c15ull >> (64 - HT_SAMPLE_FILTER_BITS));
}
/* Whether an allocation of n bytes is sampled: a subtraction, unless a
 * sample point falls inside it (or the thread has not drawn one yet). */
static HT_ALWAYS_INLINE int ht__sampled(size_t n)
{
    int64_t left = ht__t_sample_left - (int64_t)n;
    if (ht_likely(n < (1ull << 62) && left > 0)) {
        ht__t_sample_left = left;
        return 0;
    }
    return ht__sample_slow(n);
}
/* Whether the block at p may have been sampled (else its free is not
 * looked up) */
static HT_ALWAYS_INLINE int ht__sample_maybe(const void *p)
{
    return ht_load_relaxed(&ht__sample_filter[ht__sample_slot((uintptr_t)p)]) != 0;
}

/* Counters of what the agent could not record (see ht_tdrops_t). */
typedef struct ht_agent_drops_s {
    uint64_t overflow_allocs;   /* allocations whose stack found the database full */
    uint64_t unknown_frees;     /* frees/reallocs of pointers the table never saw */
    uint64_t write_errors;      /* trace bytes lost to failing writes */
    uint64_t reentrant;         /* allocator calls made while the agent ran (untracked) */
    uint64_t table_full;        /* live-table or site-table memory exhausted */
} ht_agent_drops_t;
HT_INTERNAL extern ht_agent_drops_t ht__drops;

HT_INTERNAL uint64_t ht__now_ns(void);          /* monotonic ns since start-up */

/* jitmaps.c: registers JIT code announced in /tmp/perf-PID.map and
 * jit-PID.dump files since the last call; `force`: look for a jitdump
 * file now (otherwise every 25th call). Returns whether anything new was
 * registered. Control thread, and the exiting thread once. */
HT_INTERNAL int ht__jitmaps_poll(int force);
/* gdbjit.c: whether this thread runs under a seccomp filter (which may
 * kill the process for a system call it does not expect): then memory is
 * read by write()ing it into a pipe. Reads /proc. */
HT_INTERNAL int ht__seccomp_filtered(void);
/* Copies n bytes of this process's memory at src into dst through the
 * pipe (rd, wr), empty on entry: a bad address fails the write (EFAULT)
 * instead of faulting. Returns 1 if all of it was copied (gdbjit.c). */
HT_INTERNAL int ht__pipe_copy(int rd, int wr, void *dst, uintptr_t src, size_t n);
/* Copies n bytes of this process's memory at src into dst through a
 * pipe of its own, never faulting (a bad address is EFAULT), and without
 * process_vm_readv, which a seccomp filter may punish. Returns 1 if all
 * of it was copied (agent.c). */
HT_INTERNAL int ht__copy_in(void *dst, const void *src, size_t n);
/* A forked child forgets its parent's files. */
HT_INTERNAL void ht__jitmaps_forget(void);
/* gdbjit.c: registers JIT code announced through the GDB JIT interface
 * (__jit_debug_descriptor) since the last call and removes what left its
 * list; a walk waits 50x the CPU time the last one took, unless `force`.
 * Control thread (and the exiting thread) only. */
HT_INTERNAL void ht__gdbjit_poll(int force);
/* A forked child: its own pid (and a fresh state if the fork caught a
 * poll halfway: a fork from inside our own code, which does not wait). */
HT_INTERNAL void ht__gdbjit_forget(void);
/* fork waits for a poll to end (it holds the loader's locks at times):
 * prepare takes the poll lock (first of all: a poll takes the JIT
 * registry's lock and the writer's), parent (and child, before forget)
 * drop it. */
HT_INTERNAL void ht__gdbjit_fork_prepare(void);
HT_INTERNAL void ht__gdbjit_fork_release(void);

/* ---- solo.c: the single-thread fast path ------------------------------- */
enum { HT_MODE_SOLO = 0, HT_MODE_SWITCHING = 1, HT_MODE_MULTI = 2 };
HT_INTERNAL extern uint32_t ht__solo_tid;   /* the thread that may skip locks, 0: none */
HT_INTERNAL extern uint32_t ht__solo_busy;  /* it is inside an unlocked section */
HT_INTERNAL extern int ht__mode;            /* HT_MODE_* */
HT_INTERNAL extern HT_TLS uint32_t ht__my_tid;
HT_INTERNAL extern HT_TLS int ht__t_solo;   /* this thread is in an unlocked section */
/* Start-up and fork child: make the calling thread solo if it is alone
 * and not under a seccomp filter (`filtered`: ht__seccomp_filtered()). */
HT_INTERNAL void ht__solo_start(int filtered);
HT_INTERNAL int ht__solo_slow(void);
/* Solo mode off for good, from any thread (before a seccomp filter). */
HT_INTERNAL void ht__solo_stop(void);

/* Brackets bookkeeping: returns 1 if this thread may skip the site and
 * live-table locks until ht__solo_exit. */
static HT_ALWAYS_INLINE int ht__solo_enter(void)
{
    uint32_t me = ht__my_tid;
    if (ht_likely(me != 0 && me == ht_load_relaxed(&ht__solo_tid))) {
        ht_store_relaxed(&ht__solo_busy, 1);
        ht_compiler_barrier();  /* the CPU fence is the newcomer's membarrier */
        if (ht_likely(ht_load_relaxed(&ht__solo_tid) == me))
            return ht__t_solo = 1;
        ht_store_relaxed(&ht__solo_busy, 0);
    }
    if (ht_likely(ht_load_acquire(&ht__mode) == HT_MODE_MULTI))
        return ht__t_solo = 0;
    return ht__solo_slow();
}

static HT_ALWAYS_INLINE void ht__solo_exit(int solo)
{
    if (solo) {
        ht__t_solo = 0;
        ht_compiler_barrier();
        ht_store_release(&ht__solo_busy, 0);
    }
}

/* The site and live-table locks: nothing in a solo section, else the spin
 * lock's fast path inlined (the slow path spins, then yields). */
static HT_ALWAYS_INLINE void ht__lock(ht_spinlock_t *l)
{
    if (ht__t_solo)
        return;
    if (ht_unlikely(__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) != 0))
        ht__spin_lock(l);
}
static HT_ALWAYS_INLINE void ht__unlock(ht_spinlock_t *l)
{
    if (!ht__t_solo)
        __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}

/* ---- sites.c: per-(stack, kind) statistics ----------------------------- */
typedef struct ht_site_s {
    uint32_t stack;
    uint8_t kind;               /* HT_KIND_* (trace.h) */
    uint8_t used;
    uint8_t dirty;              /* changed since the writer last read it
                                   (set after each update, cleared by the
                                   snapshot that writes the site) */
    uint8_t pad;
    ht_spinlock_t lock;         /* guards the counters below */
    uint32_t epoch;             /* the process peak's epoch at_peak belongs to */
    uint64_t live_blocks, live_bytes;
    uint64_t total_blocks, total_bytes;
    uint64_t peak_bytes;        /* this site's own highest live bytes */
    uint64_t at_peak;           /* live bytes when epoch began (ht__site_at_peak) */
} ht_site_t;                    /* one cache line */

typedef struct ht_totals_s {
    uint64_t live_blocks, live_bytes, total_blocks, total_bytes, total_frees;
    uint64_t peak_bytes, peak_blocks;
} ht_totals_t;

/* The site of (stack, kind), created on first use; NULL if out of memory. */
HT_INTERNAL ht_site_t *ht__site_get(uint32_t stack, int kind);
/* Account an allocation / a release at `s`: one block of its size, or in
 * sampling mode the blocks and bytes a sampled block stands for. */
HT_INTERNAL void ht__site_alloc(ht_site_t *s, uint64_t blocks, uint64_t bytes);
/* The same for a custom site (HT_KIND_CUSTOM): its figures only, never
 * the process's live counters, peak or totals (its bytes lie inside heap
 * blocks or mappings counted already). */
HT_INTERNAL void ht__site_custom_alloc(ht_site_t *s, uint64_t size);
HT_INTERNAL void ht__site_custom_free(ht_site_t *s, uint64_t size);
/* `temp`: the block was temporary (freed by the thread that made it, with
 * no allocation or free of that thread in between), counted as such. */
HT_INTERNAL void ht__site_free(ht_site_t *s, uint64_t blocks, uint64_t bytes, int temp);
/* A site's temporary blocks (returned) and their bytes (*bytes). */
HT_INTERNAL uint64_t ht__site_temp(const ht_site_t *s, uint64_t *bytes);
/* Releases `bytes` and `blocks` (0 for a partial munmap) at `s`. */
HT_INTERNAL void ht__site_release(ht_site_t *s, uint64_t blocks, uint64_t bytes);
/* A live block at `s` grows by `bytes` (reserved pages made accessible). */
HT_INTERNAL void ht__site_grow(ht_site_t *s, uint64_t bytes);
/* A site's record number, and back (the live table stores the number, so
 * a free finds its site with one load). */
HT_INTERNAL extern ht_site_t *ht__sites;     /* the records (sites.c) */
static HT_ALWAYS_INLINE uint32_t ht__site_index(const ht_site_t *s) { return (uint32_t)(s - ht__sites); }
static HT_ALWAYS_INLINE ht_site_t *ht__site_by_index(uint32_t i) { return &ht__sites[i]; }
/* Per record: the site's position in the trace file's list plus 1 (0:
 * not listed yet); writer.c's, kept beside the records. */
HT_INTERNAL uint32_t *ht__site_wpos(void);
/* Number of sites ever created and the i-th one (i < count), for snapshots. */
HT_INTERNAL uint32_t ht__site_count(void);
HT_INTERNAL ht_site_t *ht__site_at(uint32_t i);
/* The site's live bytes (returned) and blocks (*blocks) at the process's
 * peak (see sites.c), given the epoch read once for the whole snapshot
 * with ht__peak_epoch(). */
HT_INTERNAL uint32_t ht__peak_epoch(void);
/* When the current peak epoch began, in ns since start-up (ht__now_ns's
 * clock); 0 before the first allocation or if earlier than start-up. */
HT_INTERNAL uint64_t ht__peak_ns(void);
HT_INTERNAL uint64_t ht__site_at_peak(const ht_site_t *s, uint32_t epoch, uint64_t *blocks);
/* Process totals (sums of the heap and mmap sites plus the process-wide
 * high-water marks). */
HT_INTERNAL void ht__totals(ht_totals_t *t);
/* Start-up (not async-signal-safe): the thread-exit hook. */
HT_INTERNAL void ht__sites_start(void);
/* heaptrail detach, once ht__reach_quiesce has shown no thread inside the
 * agent: the tables' memory goes back (nothing reads them afterwards) */
HT_INTERNAL void ht__sites_release(void);
HT_INTERNAL void ht__live_release(void);
HT_INTERNAL void ht__mmaps_release(void);
HT_INTERNAL void ht__writer_release(void);    /* after ht__trace_finish */
HT_INTERNAL int ht__reach_quiesce(uintptr_t lo, uintptr_t hi);
/* Fork child: resets site locks another thread may have held. */
HT_INTERNAL void ht__sites_fork_child(void);

/* ---- live.c: address -> (size, site record number) for heap blocks ----- */
/* Records a live block of site number `site`. Returns 0, or -1 if it could
 * not be stored (counted). If the address was already present (a block
 * freed behind the agent's back), *old_site and *old_size receive the
 * stale entry and 1 is returned. */
HT_INTERNAL int ht__live_insert(uintptr_t addr, uint64_t size, uint32_t site,
                                uint32_t *old_site, uint64_t *old_size);
/* Removes `addr`; returns 1 and its size and site number if it was present. */
HT_INTERNAL int ht__live_remove(uintptr_t addr, uint64_t *size, uint32_t *site);
/* custom.c: the same for blocks of the program's own allocators
 * (ht_custom_alloc), in a table of their own; inside a solo section.
 * insert: 0, -1 not stored (counted), 1 the address was announced
 * already (*old_site, *old_size: that block, which ends here). */
HT_INTERNAL int ht__custom_insert(uintptr_t addr, uint64_t size, uint32_t site,
                                  uint32_t *old_site, uint64_t *old_size);
HT_INTERNAL int ht__custom_remove(uintptr_t addr, uint64_t *size, uint32_t *site);
/* Removes every block starting in [lo, hi), calling `ended` for each
 * under the table's lock (a walk of the whole table). */
HT_INTERNAL void ht__custom_remove_range(uintptr_t lo, uintptr_t hi,
                                         void (*ended)(uint32_t site, uint64_t size));
HT_INTERNAL void ht__custom_release(void);
HT_INTERNAL void ht__custom_fork_prepare(void);
HT_INTERNAL void ht__custom_fork_parent(void);
HT_INTERNAL void ht__custom_fork_child(void);
/* Prefetches the slot an insertion of `addr` will probe first, if its
 * shard's table is large (a malloc calls it before capturing the stack,
 * so the cache miss overlaps the capture). */
HT_INTERNAL void ht__live_prefetch(uintptr_t addr);
HT_INTERNAL void ht__live_fork_prepare(void);
HT_INTERNAL void ht__live_fork_parent(void);
HT_INTERNAL void ht__live_fork_child(void);
HT_INTERNAL uint64_t ht__live_bytes_mapped(void);
/* The reachability scan's view of the table: blocks in table order. */
typedef struct ht_live_block_s {
    uint64_t addr, size;
    uint32_t site;              /* site record number */
    uint32_t mark;              /* reach.c's */
} ht_live_block_t;
HT_INTERNAL uint64_t ht__live_count(void);
/* Copies up to `max` blocks (each shard under its lock); returns how many. */
HT_INTERNAL size_t ht__live_copy(ht_live_block_t *out, size_t max);
/* The same for custom blocks (custom.c): how many, and a copy of up to
 * `max` of them, marks 0. */
HT_INTERNAL uint64_t ht__custom_count(void);
HT_INTERNAL size_t ht__custom_copy(ht_live_block_t *out, size_t max);

/* ---- reach.c: reachability at exit and on demand ------------------------- */
/* Computes which live heap blocks no pointer in the program's memory leads
 * to, for the snapshot the caller writes next (ht__reach_result). How:
 * HT_SCAN_EXIT from the exiting thread; HT_SCAN_EXIT_INSIDE when the exit
 * interrupted agent code on this thread (nothing is computed);
 * HT_SCAN_EXIT_YOUNG_CHILD at the exit of a fork child within a second of
 * its fork (nothing is computed); HT_SCAN_NOW from the control thread, the
 * program running on. The caller holds the
 * scan lock from before the computation until the snapshot is written.
 * Not async-signal-safe in general (reads /proc). */
enum { HT_SCAN_EXIT, HT_SCAN_EXIT_INSIDE, HT_SCAN_NOW, HT_SCAN_EXIT_YOUNG_CHILD };
HT_INTERNAL void ht__reach_compute(int how);
HT_INTERNAL long ht__reach_compute_call(uintptr_t lo, const uintptr_t *regs);
HT_INTERNAL void ht__reach_learn_heap(void);  /* attached, once */
HT_INTERNAL int ht__reach_trylock(void);    /* 0, or -1: a scan is under way */
HT_INTERNAL int ht__reach_lock(void);       /* waits (bounded); 0 or -1 */
HT_INTERNAL void ht__reach_unlock(void);
HT_INTERNAL void ht__reach_fork_prepare(void);
HT_INTERNAL void ht__reach_fork_child(void);
/* The callee-saved registers (rbx, rbp, r12-r15) into regs[6], as they
 * are where this is inlined, and the stack pointer there: a pointer the
 * caller keeps only in a register, or that this function's prologue
 * saved on the stack, is then in memory the scan reads. */
static HT_ALWAYS_INLINE uintptr_t ht__callee_saved(uintptr_t *regs)
{
    uintptr_t sp;
    __asm__ volatile("mov %%rbx, 0(%1)\n\tmov %%rbp, 8(%1)\n\tmov %%r12, 16(%1)\n\t"
                     "mov %%r13, 24(%1)\n\tmov %%r14, 32(%1)\n\tmov %%r15, 40(%1)\n\t"
                     "mov %%rsp, %0"
                     : "=r"(sp)
                     : "r"(regs)
                     : "memory");
    return sp;
}
/* exit, _exit, _Exit: the hook's stack pointer and the callee-saved
 * registers (ht__callee_saved). */
HT_INTERNAL void ht__reach_note_exit(uintptr_t lo, const uintptr_t *regs);
/* The C library's object (agent.c): 0, or -1 if not found. */
struct dl_find_object;
HT_INTERNAL int ht__libc_object(struct dl_find_object *fo);
/* An ending signal's handler, before the last leak check: the thread as
 * the signal interrupted it (its ucontext_t) is the scanning thread's. */
HT_INTERNAL void ht__reach_note_signal(const void *uc);
/* An epoll descriptor the program made (its registrations are roots). */
HT_INTERNAL void ht__reach_note_epoll(int fd);
/* Thread tid's alternate signal stack is now at sp (0: none). */
HT_INTERNAL void ht__reach_note_altstack(int tid, uintptr_t sp);
/* For the writer: the status (HT_REACH_*, 0 when none was computed) and
 * header; per site record number, the lost counts (0: none). pos: the
 * writer notes each site's position in the snapshot's list. */
typedef struct ht_reach_site_s {
    uint64_t lost_blocks, lost_bytes, ilost_blocks, ilost_bytes;
    uint64_t plost_blocks, plost_bytes;     /* possibly lost */
    uint32_t pos;
    uint32_t pad;
} ht_reach_site_t;
typedef struct ht_reach_s {
    int status;
    uint32_t threads;
    uint64_t scanned_bytes, time_ns;
    ht_reach_site_t *sites;     /* per site record number, nsites of them */
    uint32_t nsites;
} ht_reach_t;
HT_INTERNAL ht_reach_t *ht__reach_result(void);
/* The part of hooks.c's static bootstrap arena handed out (blocks of the
 * program's made before the real allocator was found). */
HT_INTERNAL void ht__boot_range(uintptr_t *lo, uintptr_t *hi);
/* The control thread's id (agent.c), so the scan does not count it. */
HT_INTERNAL int ht__control_tid(void);

/* ---- mmaps.c: anonymous mappings --------------------------------------- */
HT_INTERNAL void ht__mmap_lock(void);
HT_INTERNAL void ht__mmap_unlock(void);
/* With the mmap lock held: forget [addr, addr+len) (munmap, MAP_FIXED
 * over a tracked range; returns 1 if it held tracked pages, 2 if some of
 * them were accessible), record a new anonymous region mapped with
 * `prot`, and follow mprotect over tracked ranges. */
HT_INTERNAL int ht__mmap_forget(uintptr_t addr, uint64_t len);
HT_INTERNAL void ht__mmap_record(uintptr_t addr, uint64_t len, uint32_t stack, int prot);
HT_INTERNAL void ht__mmap_protect(uintptr_t addr, uint64_t len, int prot);
HT_INTERNAL void ht__mmaps_fork_prepare(void);
HT_INTERNAL void ht__mmaps_fork_parent(void);
HT_INTERNAL void ht__mmaps_fork_child(void);

/* ---- writer.c: the trace file ------------------------------------------ */
enum { HT_WCTX_NORMAL = 0, HT_WCTX_CRASH = 1 };
/* Opens (creates) the trace file if needed and writes a snapshot with every
 * stack node, module and site the file does not yet hold, then flushes.
 * `reason` is HT_SNAP_*; `reach`, if not NULL, a reachability result
 * (ht__reach_result) written with it. Returns the snapshot's sequence
 * number or -1.
 * Not for malloc hooks (it may call dl_iterate_phdr); safe in the crash
 * handler with ctx = HT_WCTX_CRASH (no loader lock, bounded waits). */
HT_INTERNAL int ht__snapshot_write(int reason, int ctx, ht_reach_t *reach);
/* Writes the END record after the final snapshot; later snapshots are
 * skipped. */
HT_INTERNAL void ht__trace_finish(void);
/* Start-up: decide the file name and create the file (header, process
 * record, modules). Not async-signal-safe (called from the constructor). */
HT_INTERNAL void ht__writer_init(void);
HT_INTERNAL const char *ht__writer_path(void);
/* After a failed exec: later snapshots go to a new file. */
HT_INTERNAL void ht__writer_reopen(void);
/* heaptrail attach: creates the file now; 0 or -1. */
HT_INTERNAL int ht__writer_start_file(void);
/* Creates the trace file now if it is not there yet. */
HT_INTERNAL void ht__writer_create(void);
HT_INTERNAL int ht__writer_held_fd(void);
HT_INTERNAL int ht__writer_is_ours(int fd);
/* Module scan hooks used around dlclose. */
HT_INTERNAL void ht__modules_rescan(void);
HT_INTERNAL void ht__writer_fork_prepare(void);
HT_INTERNAL void ht__writer_fork_parent(void);
HT_INTERNAL void ht__writer_fork_child(void);

/* ---- calls that change the process's rights or namespaces -------------
 * (hooks.c calls ht__agent_before_confine and _after_confine around them,
 * agent.c) */
enum {
    HT_CONFINE_ROOT = 0,        /* chroot */
    HT_CONFINE_SETID,           /* a set-id call through glibc: every thread */
    HT_CONFINE_SETID_THREAD,    /* the same through syscall(): the caller only */
    HT_CONFINE_ALONE,           /* needs a single-threaded process: unshare
                                   (CLONE_NEWUSER...), setns */
    HT_CONFINE_COUNT,           /* reads its thread count (hooks.c): the
                                   thread steps aside, the trace is left as
                                   it is (no rights change) */
};
/* returns 1 if it counted a pause, which one _after_confine ends */
HT_INTERNAL int ht__agent_before_confine(int kind);
HT_INTERNAL void ht__agent_after_confine(int kind);

/* In a forked child: the parent's streams of its thread count hold no
 * pause here (hooks.c). */
HT_INTERNAL void ht__hooks_fork_child(void);

/* hooks.c's sigaction, after the program queried a disposition (agent.c) */
struct sigaction;
HT_INTERNAL void ht__agent_sigaction_query(int sig, struct sigaction *old);

/* --follow-exec (agent.c): the number of pointers, NULL included, of the
 * environment an exec'd program must get instead of env (0: env will do:
 * it loads the agent with this process's HEAPTRAIL_* settings, or exec is
 * not followed), and in *preload_bytes the size of its new LD_PRELOAD
 * entry (0: none); fill writes that copy into out and preload. */
HT_INTERNAL size_t ht__exec_env_need(char *const env[], size_t *preload_bytes);
HT_INTERNAL char *const *ht__exec_env_fill(char *const env[], char **out, char *preload);

/* ---- small helpers (agent.c) ------------------------------------------- */
HT_INTERNAL size_t ht__strlen(const char *s);
HT_INTERNAL size_t ht__fmt_u64(char *buf, uint64_t v);   /* decimal, no NUL */

#endif
