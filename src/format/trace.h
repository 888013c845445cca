/* trace.h -- what a heaptrail trace file holds, as the reader returns it:
 * the contract between src/format (which writes and reads files) and
 * src/analyze (which turns traces into reports).
 *
 * Stacks: node i = (parent, addr); a stack id is a node id; its frames,
 * innermost first, are addr(i), addr(parent(i)), ... up to the root
 * (node 0, no frame). HT_STACK_ID_OVERFLOW marks allocations that found the
 * stack database full. Addresses are runtime addresses of the traced
 * process; modules say how to map them back to files. */
#ifndef HT_FORMAT_TRACE_H
#define HT_FORMAT_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ht_tmodule_s {
    char *path;                 /* as the loader saw it */
    uint8_t build_id[64];
    uint32_t build_id_len;      /* 0: none recorded */
    uint64_t bias;              /* runtime address = link-time address + bias */
    uint64_t start, end;        /* mapped span [start, end) */
    uint64_t load_ns, unload_ns;/* trace-relative; unload_ns 0: loaded at the end */
} ht_tmodule_t;

typedef struct ht_tnode_s {
    uint32_t parent;
    uint32_t module;            /* index into modules of the module holding
                                   addr when the node was recorded;
                                   UINT32_MAX: none known (JIT, vdso gaps) */
    uint64_t addr;              /* a return address; in registered JIT code
                                   it carries the registration's serial in
                                   bits 48..62 (see jit[].serial;
                                   HT_FRAME_ADDRESS strips it); exactly 1
                                   (HT_FRAME_UNWIND_STOPPED): the walk met
                                   code it could not unwind */
} ht_tnode_t;

/* kinds of site: heap blocks; anonymous mappings; blocks of the program's
 * own allocator (ht_custom_alloc: they lie inside heap blocks or mappings
 * already counted, so they are kept apart from both, and from the totals) */
enum { HT_KIND_HEAP = 0, HT_KIND_MMAP = 1, HT_KIND_CUSTOM = 2 };

/* One allocation site (stack and kind) in one snapshot. */
typedef struct ht_tsite_s {
    uint32_t stack;
    uint8_t kind;               /* HT_KIND_* */
    uint64_t live_blocks, live_bytes;   /* at the snapshot */
    uint64_t total_blocks, total_bytes; /* allocated from here since the start */
    uint64_t peak_bytes;        /* highest live_bytes this site reached */
    uint64_t at_peak_bytes;     /* its live bytes and blocks at the process's */
    uint64_t at_peak_blocks;    /* peak (PEAK records; has_peak in the snapshot) */
    uint64_t temp_blocks;       /* of total_blocks, those freed by their thread */
    uint64_t temp_bytes;        /* before it allocated or freed anything else,
                                   and their bytes (TEMP records; has_temp) */
    /* Reachability (snapshots whose reach is HT_REACH_DONE; else 0):
     * live blocks no pointer in the program's memory leads to. Directly
     * lost blocks head a lost structure (nothing points to them but, for a
     * cycle, its own members); indirectly lost ones are pointed to only
     * from lost blocks. Possibly lost ones are reached only through a
     * chain with a pointer into the middle of a block (POSSIBLE records;
     * has_possible). Live minus the three is still reachable. */
    uint64_t lost_blocks, lost_bytes;
    uint64_t ilost_blocks, ilost_bytes;
    uint64_t plost_blocks, plost_bytes;
} ht_tsite_t;

/* Whether a snapshot carries reachability (REACH records: exit snapshots,
 * and leak checks asked for while the program runs, `heaptrail snapshot
 * --leaks`), and if not computed, why. */
enum {
    HT_REACH_NONE = 0,          /* not recorded: another kind of snapshot, or an older agent */
    HT_REACH_DONE,              /* computed: the sites' lost_* are valid */
    HT_REACH_THREADS,           /* other threads were running and could not be paused */
    HT_REACH_UNREADABLE,        /* the process could not read its own memory */
    HT_REACH_NOMEM,             /* no memory for the scan */
    HT_REACH_INCOMPLETE,        /* the agent lost track of blocks or of its own mappings */
    HT_REACH_INSIDE,            /* exit came from inside an allocator call (a signal handler) */
    HT_REACH_WOKE,              /* threads asleep in a system call woke during every try */
    HT_REACH_YOUNG_CHILD        /* a fork child that ended within a second of its fork: not checked */
};

enum {
    HT_SNAP_EXIT = 0,           /* the program ended normally */
    HT_SNAP_REQUEST,            /* heaptrail snapshot PID */
    HT_SNAP_INTERVAL,           /* --interval */
    HT_SNAP_API,                /* ht_snapshot() */
    HT_SNAP_CRASH,              /* fatal signal, written by the crash handler */
    HT_SNAP_EXEC,               /* the process is replacing itself (execve) */
    HT_SNAP_SANDBOX,            /* the process is about to install a seccomp filter:
                                   the agent writes nothing after this one */
    HT_SNAP_SIGNAL,             /* ended by a signal left at its default (SIGTERM, SIGINT,
                                   SIGHUP, SIGQUIT, SIGPIPE), written by the handler */
    HT_SNAP_DETACH,             /* heaptrail detach: the agent left the running program,
                                   which it no longer tracks; an END follows */
};

/* A site's live figures at a snapshot, as growth follows them over many
 * (ht_read_opts_t's changes). */
typedef struct ht_tchange_s {
    uint32_t pos;               /* position in the snapshot's site list */
    uint32_t stack;
    uint64_t live_blocks, live_bytes;
    uint8_t kind;
} ht_tchange_t;

typedef struct ht_tsnapshot_s {
    uint32_t seq;               /* 0, 1, 2, ... in file order */
    uint32_t file_seq;          /* the writer's number (SNAP_BEGIN's seq; what
                                   `heaptrail snapshot`'s reply names): seq,
                                   unless earlier snapshots were lost to
                                   write errors */
    uint8_t reason;             /* HT_SNAP_* */
    uint64_t time_ns;           /* since the trace started */
    uint64_t live_blocks, live_bytes;
    uint64_t total_blocks, total_bytes, total_frees;
    uint64_t peak_bytes, peak_blocks;   /* process-wide high-water marks */
    ht_tsite_t *sites;          /* every site with any allocation so far;
                                   NULL when the read did not keep them
                                   (ht_read_opts_t), nsites still their count */
    size_t nsites;
    /* With ht_read_opts_t's changes: the sites whose stack, kind or live
     * figures differ from the previous snapshot's at the same position
     * (every site of the first), by position: applied to the previous
     * snapshot's list cut to nsites, they give this one's. Else NULL. */
    ht_tchange_t *changes;
    size_t nchanges;
    uint8_t reach;              /* HT_REACH_* */
    uint32_t reach_threads;     /* HT_REACH_THREADS: how many others ran */
    uint64_t reach_roots_bytes; /* memory scanned for pointers (roots, then blocks) */
    uint64_t reach_ns;          /* the scan's duration */
    uint64_t peak_ns;           /* when what at_peak_bytes holds was live
                                   (with has_peak; 0: unknown) */
    uint8_t has_peak;           /* the sites' at_peak_bytes are recorded
                                   (agents from the sixteenth session on) */
    uint8_t has_temp;           /* the sites' temp_* are recorded (agents
                                   from the eighteenth session on) */
    uint8_t has_possible;       /* the sites' plost_* are recorded (reach
                                   HT_REACH_DONE, agents from the nineteenth
                                   session on; before, such blocks counted
                                   as still reachable) */
    uint8_t reach_custom;       /* the check judged custom allocator blocks
                                   too: their sites' lost_* and plost_* are
                                   valid (REACH's flags, agents from the
                                   fifty-second session on; before, custom
                                   blocks were not checked) */
} ht_tsnapshot_t;

/* JIT code as the traced process saw it (perf maps, registration API). */
typedef struct ht_tjit_s {
    uint64_t start, size;
    char *name;
    uint64_t begin_ns, end_ns;  /* when it was live; end_ns 0: to the end */
    uint32_t serial;            /* registration serial: frames in this code
                                   carry it in bits 48..62 (heaptrail.h's
                                   HT_FRAME_JIT_SERIAL) */
} ht_tjit_t;

/* What the tracker could not record. */
typedef struct ht_tdrops_s {
    uint64_t overflow_allocs;   /* allocations that got HT_STACK_ID_OVERFLOW */
    uint64_t unknown_frees;     /* frees/reallocs of pointers never seen */
    uint64_t write_errors;      /* trace bytes lost to a failing write */
    uint64_t other;             /* anything else dropped, see docs/format.md */
    /* part of `other` (0 from a writer that did not say): */
    uint64_t reentrant;         /* allocations made while the thread was inside heaptrail */
    uint64_t table_full;        /* allocations the tracker had no room for (its tables
                                   could not grow: memory or address space) */
} ht_tdrops_t;

/* The allocator functions the agent intercepts, in the order of the
 * PROCESS record's `foreign` bits: bit i set means the program binds
 * HT_FOREIGN[i].symbol to a definition other than the agent's (it brings
 * its own allocator: chromium's PartitionAlloc shim, a statically linked
 * tcmalloc or jemalloc, a library preloaded before the agent), so its
 * calls never reach heaptrail and what they allocate is not counted. */
typedef struct { const char *symbol, *name; } ht_foreign_fn_t;
static const ht_foreign_fn_t HT_FOREIGN[] = {
    { "malloc", "malloc" },
    { "free", "free" },
    { "calloc", "calloc" },
    { "realloc", "realloc" },
    { "reallocarray", "reallocarray" },
    { "posix_memalign", "posix_memalign" },
    { "aligned_alloc", "aligned_alloc" },
    { "memalign", "memalign" },
    { "valloc", "valloc" },
    { "pvalloc", "pvalloc" },
    { "malloc_usable_size", "malloc_usable_size" },
    { "mmap", "mmap" },
    { "munmap", "munmap" },
    { "mremap", "mremap" },
    { "_Znwm", "operator new" },
    { "_Znam", "operator new[]" },
    { "_ZdlPv", "operator delete" },
    { "_ZdaPv", "operator delete[]" },
};
enum {
    HT_FOREIGN_COUNT = sizeof HT_FOREIGN / sizeof HT_FOREIGN[0],
    HT_FOREIGN_CXX = 14         /* from here on: C++ operators, which usually
                                   call malloc (so their blocks are seen) */
};

typedef struct ht_trace_s {
    uint32_t version;
    int64_t pid;
    char *exe;                  /* path of the traced program */
    char *cmdline;              /* its arguments, NUL-separated -> space-joined */
    uint32_t foreign;           /* HT_FOREIGN bits: allocator functions not intercepted */
    char *foreign_module;       /* the first of them's module ("" unknown; NULL none) */
    int attached;               /* heaptrail attach: the agent came in while the
                                   process ran; times and counts start then */
    uint64_t sample;            /* sampling mode: mean bytes between samples, and
                                   every heap figure an estimate; 0: exact */
    uint64_t start_realtime_ns; /* wall clock at the start */
    ht_tmodule_t *modules;  size_t nmodules;
    ht_tnode_t *nodes;      size_t nnodes;    /* nodes[0] is the root */
    ht_tsnapshot_t *snaps;  size_t nsnaps;
    uint64_t *node_seen_ns;     /* per node: time_ns of the first snapshot whose
                                   sites' stacks hold it (UINT64_MAX: none), or
                                   NULL (a trace not read from a file) */
    ht_tjit_t *jit;         size_t njit;
    ht_tdrops_t drops;
    int complete;               /* an end record was read */
    int truncated;              /* the file stops mid-record or mid-block */
    uint64_t truncated_at;      /* byte offset of the damage */
} ht_trace_t;

/* A site's live figures at position pos (growth's view of a snapshot). */
static inline ht_tchange_t ht_tsite_change(const ht_tsite_t *x, size_t pos)
{
    return (ht_tchange_t){ .pos = (uint32_t)pos, .stack = x->stack, .live_blocks = x->live_blocks,
                           .live_bytes = x->live_bytes, .kind = x->kind };
}

/* Notes in seen[] (per node; UINT64_MAX: not yet) sn's time for every node
 * of its sites' stacks not seen before: applied to the snapshots in order,
 * each node's first snapshot (the reader's node_seen_ns). */
static inline void ht_trace_note_seen(const ht_trace_t *t, const ht_tsnapshot_t *sn, uint64_t *seen)
{
    for (size_t j = 0; j < sn->nsites; j++) {
        uint32_t n = sn->sites[j].stack;
        while (n != 0 && n < t->nnodes && seen[n] == UINT64_MAX) {
            seen[n] = sn->time_ns;
            uint32_t p = t->nodes[n].parent;
            n = p < n ? p : 0;
        }
    }
}

/* Reads a trace. On a truncated or damaged file it keeps everything before
 * the damage, sets truncated/truncated_at and still returns 0; it returns
 * -1 only when nothing usable was read, with a message naming the file and
 * offset in err. Never crashes, hangs or allocates without bound on hostile
 * input. */
int ht_trace_read(const char *path, ht_trace_t *t, char *err, size_t errlen);

/* Which snapshots keep their sites: all (nkeep 0), or those whose indices
 * are listed (negative: from the end, -1 the last). The others keep their
 * figures with sites NULL: a report of one snapshot of a trace written
 * with --interval for hours needs the memory of one snapshot, not of all
 * (950 snapshots of 20,000 sites took 2.4 GB). With changes, each
 * snapshot also lists what changed since the one before (growth follows
 * the live figures of every snapshot through them). */
typedef struct ht_read_opts_s {
    size_t nkeep;
    int64_t keep[2];
    int changes;                /* give every snapshot its changes (growth) */
} ht_read_opts_t;
int ht_trace_read_opts(const char *path, const ht_read_opts_t *o, ht_trace_t *t, char *err, size_t errlen);
/* The same from memory (the fuzz target uses it); `name` names the input
 * in messages. */
int ht_trace_read_mem(const void *buf, size_t len, const char *name, ht_trace_t *t,
                      char *err, size_t errlen);
int ht_trace_read_mem_opts(const void *buf, size_t len, const char *name, const ht_read_opts_t *o,
                           ht_trace_t *t, char *err, size_t errlen);
void ht_trace_free(ht_trace_t *t);

#endif
