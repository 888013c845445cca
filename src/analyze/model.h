/* model.h -- the pure "trace -> report" layer of the analyzer.
 *
 * A session holds one or two traces (diff compares two runs) and one
 * symbolizer. Every stack node of every trace is normalized once to
 * (module, link-time address), so stacks compare equal across runs of the
 * same program whatever ASLR did, and a stack's identity is a rolling hash
 * over its normalized frames checked by a full comparison.
 *
 * ht__report_build / ht__diff_build / ht__growth_build turn a session into
 * an ht_report_t: rows (sites, or groups of sites by function or module),
 * sorted and filtered. Renderers (render_*.c) print a report in one format.
 * Nothing here reads files or parses the command line, so tests drive it
 * with traces they construct. */
#ifndef HT_ANALYZE_MODEL_H
#define HT_ANALYZE_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include "../format/trace.h"
#include "sym.h"
#include "util.h"

#define HT_NOMOD UINT32_MAX     /* a frame in no recorded module */

typedef struct ht_input_s {
    const char *name;           /* the trace's path as given */
    const ht_trace_t *t;
    uint32_t *node_tmod;        /* per node: index of its module in t->modules,
                                   or UINT32_MAX (none): 4 bytes a node */
    uint32_t *tm_handle;        /* per trace module: symbolizer module */
    uint64_t *tm_bias;          /* per trace module: its bias */
    uint64_t *node_hash;        /* per node: hash of the normalized stack,
                                   computed when first needed (ht__node_hashes) */
    uint32_t *node_jit;         /* per node outside any module: the JIT record
                                   (index in t->jit) naming it, or UINT32_MAX;
                                   NULL when the trace has no JIT records */
} ht_input_t;

/* A node's symbolizer module (HT_NOMOD: none) and link-time address
 * (the raw address when HT_NOMOD). */
static inline uint32_t ht__node_mod(const ht_input_t *in, uint32_t n)
{
    uint32_t m = in->node_tmod[n];
    return m == UINT32_MAX ? HT_NOMOD : in->tm_handle[m];
}
static inline uint64_t ht__node_rel(const ht_input_t *in, uint32_t n)
{
    uint32_t m = in->node_tmod[n];
    return m == UINT32_MAX ? in->t->nodes[n].addr : in->t->nodes[n].addr - in->tm_bias[m];
}

/* The JIT code record naming a node outside any module, or NULL. */
static inline const ht_tjit_t *ht__node_jit(const ht_input_t *in, uint32_t n)
{
    if (!in->node_jit || in->node_jit[n] == UINT32_MAX)
        return NULL;
    return &in->t->jit[in->node_jit[n]];
}

/* The HTML flame graph draws this many of the biggest rows (the rest are
 * summed into one box), so reports hold at least this many rows for it. */
#define HT_HTML_FLAME_ROWS 20000

enum { HT_BY_STACK = 0, HT_BY_FUNCTION, HT_BY_MODULE };
enum { HT_FMT_TEXT = 0, HT_FMT_JSON, HT_FMT_FOLDED, HT_FMT_PPROF, HT_FMT_HTML, HT_FMT_SUPP };
enum { HT_REPORT_LEAKS = 0, HT_REPORT_INUSE, HT_REPORT_DIFF, HT_REPORT_GROWTH, HT_REPORT_ALLOCATED,
       HT_REPORT_PEAK, HT_REPORT_TEMPORARY };

typedef struct ht_opts_s {
    int format;                 /* HT_FMT_* */
    int by;                     /* HT_BY_* */
    int64_t top;                /* rows shown; 0: all; -1: the format's default */
    uint64_t min_bytes;         /* rows below this (|bytes|) are not shown */
    char **well_tested;         /* fnmatch patterns on module basenames */
    size_t nwell_tested;
    int progress;               /* progress lines on stderr */
    struct ht_supp_s *supp;     /* --suppressions: sites left out, or NULL */
    int debuginfod;             /* HT_DEBUGINFOD_* (sym.h) */
} ht_opts_t;

typedef struct ht_session_s {
    ht_sym_t *sym;
    ht_input_t in[2];
    int nin;
    const ht_opts_t *opts;
} ht_session_t;

/* What only diff and growth rows carry (kept apart: a report of a million
 * stacks needs none of it). */
typedef struct ht_rowx_s {
    int64_t a_bytes, a_blocks;  /* diff: before; growth: at the first snapshot */
    int64_t b_bytes, b_blocks;  /* diff: after; growth: at the last snapshot */
    uint32_t ups, downs;        /* growth: snapshot-to-snapshot moves up and down */
    uint32_t intervals;         /* growth: snapshots - 1 */
    int32_t g_first;            /* growth: first snapshot with live bytes (private) */
    double steadiness;          /* growth: (ups - downs) / intervals */
    int64_t *series;            /* growth: live bytes per snapshot (shown rows) */
    int64_t g_prev, g_cur;      /* growth: private */
} ht_rowx_t;

/* What rows of a report carry when the snapshot's reachability was
 * computed (REACH: leaks reports of exit snapshots, in-use reports of leak
 * checks made while the program ran): sums over the row's sites, like
 * bytes and blocks. Kept apart like ht_rowx_t: reports without it pay 8 bytes a
 * row, not 48. */
typedef struct ht_rowlost_s {
    /* diff: each is after minus before (the change) */
    int64_t lost_bytes, lost_blocks;    /* directly ("definitely") lost */
    int64_t ilost_bytes, ilost_blocks;  /* indirectly lost: reachable only through lost blocks */
    int64_t plost_bytes, plost_blocks;  /* possibly lost: reached only through a pointer
                                           into the middle of a block; 0 unless the
                                           report's `possible` */
    int64_t unreach_stacks;             /* merged stacks with lost or indirectly lost
                                           blocks (a row's nstacks counts all) */
} ht_rowlost_t;

typedef struct ht_row_s {
    uint32_t input, node;       /* the (representative) stack: trace, innermost node */
    uint8_t kind;               /* HT_KIND_* */
    int8_t max_nodes;           /* nodes of the stack to show: -1 all, 1, 0 */
    uint32_t nstacks;           /* stacks merged into this row */
    const char *label;          /* by function/module: the group's name */
    int64_t bytes, blocks;      /* the value: live, or change (diff, growth) */
    int64_t alloc_bytes, alloc_blocks;  /* allocated since the start (or its change) */
    int64_t peak_bytes;
    int64_t best_bytes;         /* the largest merged stack's bytes (picks node) */
    uint64_t key;               /* private: the row's hash */
    ht_rowx_t *x;               /* diff and growth only, else NULL */
    ht_rowlost_t *lost;         /* report or diff with reach HT_REACH_DONE only, else NULL */
} ht_row_t;

typedef struct ht_report_s {
    int type;                   /* HT_REPORT_* */
    int by;
    const ht_session_t *ses;
    const ht_tsnapshot_t *snap_a, *snap_b;  /* report: b; diff: a -> b */
    uint32_t input_a, input_b;
    const ht_trace_t *timeline; /* the snapshots drawn over time (html) */
    ht_row_t *rows;             /* sorted; the first nshown are shown */
    ht_rowx_t *xs;              /* the rows' extensions (diff, growth) */
    ht_rowlost_t *losts;        /* the rows' reachability (reach HT_REACH_DONE), or NULL */
    size_t nrows, nshown;       /* rows held (the biggest), rows shown */
    size_t row_count;           /* rows in the report (held or not) */
    size_t stack_count;         /* stacks in them */
    int64_t rest_bytes;         /* positive bytes of the rows not held */
    int64_t rest_blocks;        /* and their blocks */
    int64_t all_blocks;         /* --temporary: every heap allocation of the
                                   snapshot's sites, temporary or not */
    int64_t total_bytes, total_blocks;      /* over every row */
    /* leaks, in-use and allocated reports: the part of the totals in
     * anonymous mappings (kind mmap), and their sites: the totals line
     * keeps them apart from heap blocks (a JVM's or V8's reserved
     * gigabytes would otherwise drown the heap), and a row's share is of
     * its own kind's total */
    int64_t map_bytes, map_blocks;
    size_t map_sites;
    /* Blocks of the program's own allocator (kind custom, ht_custom_alloc),
     * and their sites (diff: stacks that changed; growth: that grew):
     * their bytes lie inside heap blocks or mappings counted already, so
     * they are never part of the total_* figures (which stay the heap's
     * and the mappings', the process's), of the shares, of the heap's
     * reachability (their own is custom_lost, below) or of the temporary
     * report; the headline gives them a clause of their own, and a
     * custom row's share is of custom_bytes. In a diff
     * custom_* are after minus before, custom_a_* and custom_b_* each
     * snapshot's; in growth, what the custom rows grew by. */
    int64_t custom_bytes, custom_blocks;
    size_t custom_sites;
    int64_t custom_a_bytes, custom_a_blocks, custom_b_bytes, custom_b_blocks;
    int64_t total_a_bytes, total_a_blocks;  /* diff: before */
    int64_t total_b_bytes, total_b_blocks;  /* diff: after */
    uint32_t nsnaps;            /* growth: snapshots compared */
    int peak;                   /* diff --peak: what was live at each
                                   snapshot's peak */
    /* Reachability: the snapshot's reach (HT_REACH_*) for a leaks report,
     * and for an in-use report of a snapshot taken while the program ran
     * (a leak check, `heaptrail snapshot --leaks`); else HT_REACH_NONE (an
     * exit snapshot read --in-use too). When HT_REACH_DONE, rows carry `lost`,
     * and these hold sums over every row (shown or not); heap_* is the
     * live heap (mmap regions are never checked), so still reachable is
     * heap - lost - ilost - plost. */
    int reach;
    /* With reach HT_REACH_DONE: the check counted possibly lost blocks
     * (the snapshot's has_possible; a diff's: both snapshots'). Else the
     * plost_* figures are 0 and such blocks count as still reachable. */
    int possible;
    ht_rowlost_t total_lost;
    int64_t heap_bytes, heap_blocks;
    size_t lost_sites;          /* sites with directly lost blocks */
    /* With reach HT_REACH_DONE: the check judged custom allocator blocks
     * too, as blocks of their own (the snapshot's reach_custom; a diff's:
     * both snapshots'). Custom rows' `lost` then hold their verdicts, and
     * these the custom group's sums, apart from the heap's as every custom
     * figure is: still reachable is custom_bytes (a diff's after:
     * custom_b_bytes; before: custom_a_bytes) - lost - ilost - plost.
     * Else custom blocks were not checked: their rows' `lost` stay 0 and
     * no output gives them a verdict (the HTML cell: "not checked"). */
    int custom_reach;
    ht_rowlost_t custom_lost;
    size_t custom_lost_sites;   /* custom sites with directly lost blocks */
    /* A diff has reach HT_REACH_DONE when both of its snapshots do (two
     * leak checks, or an exit snapshot and a check), else HT_REACH_NONE
     * (the diff of old). Then the totals above are the after snapshot's
     * (b), these the before snapshot's (a), and each row's `lost` holds
     * after minus before, summed over its sites like bytes and blocks. */
    ht_rowlost_t total_lost_a;
    int64_t heap_a_bytes, heap_a_blocks;
    size_t lost_sites_a;
    ht_rowlost_t custom_lost_a; /* with custom_reach */
    size_t custom_lost_sites_a;
    /* --suppressions: what the sites left out had, in the report's own
     * snapshot (a diff's after, growth's last), by the report's measure
     * (per pattern in opts->supp) */
    int64_t supp_bytes, supp_blocks;
    size_t supp_sites;
    int64_t supp_custom_bytes, supp_custom_blocks;  /* custom sites left out, */
    size_t supp_custom_sites;                       /* kept apart as above */
} ht_report_t;

/* A frame as renderers see it: one per source-level frame (an address with
 * inlined calls gives several, sharing addr). */
typedef struct ht_rframe_s {
    uint64_t addr;              /* runtime address in its trace */
    uint32_t mod;               /* symbolizer module or HT_NOMOD */
    uint64_t rel;               /* link-time address in mod */
    const ht_sframe_t *sf;      /* NULL when nothing is known */
    const ht_tjit_t *jit;       /* JIT code it was in, or NULL */
} ht_rframe_t;

/* Adds a trace to the session (at most 2) and normalizes its nodes.
 * Returns the input index. */
HT_INTERNAL int ht__session_add(ht_session_t *s, const char *name, const ht_trace_t *t);
HT_INTERNAL void ht__session_init(ht_session_t *s, const ht_opts_t *o, const char *debug_dirs,
                                  FILE *warn);
HT_INTERNAL void ht__session_free(ht_session_t *s);

/* The default list of well-tested modules (fnmatch patterns). */
extern const char *const ht__default_well_tested[];

/* Reports. Each returns 0, or -1 with a message in err. ht__report_build's
 * `mode`: HT_RMODE_AUTO (leaks at an exit or crash snapshot, in use at any
 * other), HT_RMODE_IN_USE, HT_RMODE_ALLOCATED (every site ranked by what
 * it allocated since the start, freed or not), HT_RMODE_PEAK (every site
 * by what it held at the process's peak so far), or HT_RMODE_TEMPORARY
 * (every site by its temporary allocations: rows' blocks and bytes are
 * those; ranked by blocks). */
enum { HT_RMODE_AUTO = 0, HT_RMODE_IN_USE, HT_RMODE_ALLOCATED, HT_RMODE_PEAK, HT_RMODE_TEMPORARY };
HT_INTERNAL int ht__report_build(ht_session_t *s, int64_t snapshot, int mode,
                                 ht_report_t *r, char *err, size_t errlen);
/* peak: compare what was live at each snapshot's peak instead of at the
 * snapshot (both must record it). */
HT_INTERNAL int ht__diff_build(ht_session_t *s, int64_t snap_a, int64_t snap_b, int peak,
                               ht_report_t *r, char *err, size_t errlen);
HT_INTERNAL int ht__growth_build(ht_session_t *s, ht_report_t *r, char *err, size_t errlen);
HT_INTERNAL void ht__report_free(ht_report_t *r);

/* The frames of a row, innermost first, into *buf (grown as needed).
 * Returns their number. */
HT_INTERNAL size_t ht__row_frames(const ht_report_t *r, const ht_row_t *row,
                                  ht_rframe_t **buf, size_t *cap);

/* The origin of a stack (node, in input): its innermost frame outside the
 * well-tested modules, or its innermost frame when all are well-tested.
 * What --by function and --by module group by, and what a generated
 * suppression names. */
HT_INTERNAL uint32_t ht__origin_node(const ht_session_t *s, uint32_t input, uint32_t node);

/* "name+0x1f" for a frame nothing is known about (pooled string). */
HT_INTERNAL const char *ht__frame_fallback(const ht_report_t *r, const ht_rframe_t *f);

/* The snapshot an index selects: >= 0 by seq, < 0 from the end (-1 last). */
HT_INTERNAL const ht_tsnapshot_t *ht__snapshot_pick(const ht_trace_t *t, int64_t n);
HT_INTERNAL const char *ht__snap_reason(int reason);

/* Why a snapshot's reachability was not computed, as a clause ("3 other
 * threads were running at exit and could not be paused"; without "at
 * exit" for a snapshot taken while the program ran), written into buf;
 * NULL when its reach is HT_REACH_NONE or HT_REACH_DONE. Shared by the
 * reports and the summaries of `heaptrail run` and `heaptrail snapshot
 * --leaks`. */
HT_INTERNAL const char *ht__reach_why(const ht_tsnapshot_t *s, char *buf, size_t len);
/* What a computed scan could not see ("2 other threads slept in a system
 * call: their stacks were scanned, their registers not (...)"), written
 * into buf; NULL when every thread's registers were read. Shared by the
 * reports and the summaries. */
HT_INTERNAL const char *ht__reach_unseen(const ht_tsnapshot_t *s, char *buf, size_t len);
/* The words about allocator functions the program binds to its own
 * definitions (t->foreign), a sentence without a leading capital or final
 * stop, or NULL if there are none. *warn: 1 if one of them is a C
 * function (nothing it allocates is seen), 0 if only C++ operators are
 * (their blocks are seen where they come from malloc). */
HT_INTERNAL const char *ht__foreign_text(const ht_trace_t *t, int *warn, char *buf, size_t len);
/* A sampled trace's note (heaptrail run --sample): what its figures are,
 * in buf; NULL for an exact trace. */
HT_INTERNAL const char *ht__sample_text(const ht_trace_t *t, char *buf, size_t len);
/* A leaks, in-use, allocated or peak report's totals line: heap blocks,
 * then anonymous mappings apart ("...; anonymous mappings never unmapped:
 * M bytes in R regions from K sites"), then custom allocator blocks apart
 * ("; custom allocator blocks never freed: C bytes in B blocks from K
 * sites"). */
HT_INTERNAL const char *ht__totals_line(const ht_report_t *r, char *buf, size_t len);
/* A diff's or growth's clause on custom allocator blocks ("; custom
 * allocator blocks: +400 bytes, +1 block from 1 stack (800 bytes in 2
 * blocks before, 1200 bytes in 3 blocks after)"; growth's "; custom
 * allocator blocks: 1 stack grew, by 1200 bytes in 3 blocks"), or "" when
 * the report has none. */
HT_INTERNAL const char *ht__custom_change(const ht_report_t *r, char *buf, size_t len);
/* The name of a site kind: "heap", "mmap", "custom" (JSON's "kind",
 * pprof's label, the run summary's stacks). */
HT_INTERNAL const char *ht__kind_name(int kind);
/* With --suppressions, what they left out ("suppressed: N bytes in B
 * blocks from S sites"), else NULL. */
HT_INTERNAL const char *ht__supp_line(const ht_report_t *r, char *buf, size_t len);
/* A row's share, in percent, of its kind's total (heap, mappings or
 * custom allocator blocks). */
HT_INTERNAL double ht__row_share(const ht_report_t *r, const ht_row_t *row);
/* What a row weighs in a flame graph or folded stacks: its bytes; in a
 * --temporary report its blocks (a temporary allocation costs its calls,
 * whatever its size). */
static inline int64_t ht__row_weight(const ht_report_t *r, const ht_row_t *row)
{
    return r->type == HT_REPORT_TEMPORARY ? row->blocks : row->bytes;
}
/* Whether the leak check of snapshot s judged the blocks of a site of
 * this kind, so that its lost_*, ilost_* and plost_* are verdicts: heap
 * blocks always, custom allocator blocks when the check judged them too
 * (REACH's flags: reach_custom), anonymous mappings never. 0 when s has
 * no computed reachability. */
static inline int ht__site_judged(const ht_tsnapshot_t *s, int kind)
{
    return s->reach == HT_REACH_DONE && (kind == HT_KIND_HEAP || (kind == HT_KIND_CUSTOM && s->reach_custom));
}
/* Whether the report's check judged blocks of this kind: heap blocks,
 * and custom allocator blocks when it judged those too (r->custom_reach;
 * ht__site_judged for one snapshot). Mappings are never checked. */
static inline int ht__kind_judged(const ht_report_t *r, int kind)
{
    return kind == HT_KIND_HEAP || (kind == HT_KIND_CUSTOM && r->custom_reach);
}
/* Whether a row of a report with reachability carries verdicts (its
 * `lost`): a row of a kind the check judged (ht__kind_judged); NULL
 * `lost`: no. */
static inline int ht__row_judged(const ht_report_t *r, const ht_row_t *row)
{
    return row->lost && ht__kind_judged(r, row->kind);
}
/* Does the report show custom allocator blocks' verdicts? When its check
 * judged them (r->custom_reach) and it has custom figures: a report's
 * custom sites, a diff's custom blocks in either snapshot (where the
 * headline has its custom clause). */
HT_INTERNAL int ht__custom_verdicts(const ht_report_t *r);
/* The JSON name of a reach status: "computed", "threads", ... */
HT_INTERNAL const char *ht__reach_name(int reach);

/* Progress on stderr for long loops, when opts->progress (the CLI sets it
 * when stderr is a terminal): at most 4 lines a second, erased at the end. */
typedef struct ht_progress_s {
    const char *what;
    double last;
    int shown, on;
} ht_progress_t;
HT_INTERNAL void ht__progress_init(ht_progress_t *p, const ht_session_t *s, const char *what);
HT_INTERNAL void ht__progress_step(ht_progress_t *p, size_t done, size_t total);
HT_INTERNAL void ht__progress_end(ht_progress_t *p);

/* JSON helpers shared by the JSON and HTML renderers: a string literal
 * (also escaping <, > and & so it can sit inside an HTML <script>), and a
 * row's "frames" array. */
HT_INTERNAL void ht__json_string(FILE *f, const char *s);
HT_INTERNAL void ht__json_frames(const ht_report_t *r, const ht_row_t *row, FILE *f,
                                 ht_rframe_t **buf, size_t *cap);

/* The reachability line of a report with reachability ("unreachable:
 * ...", or "reachability not computed: WHY") into buf; NULL when r->reach
 * is HT_REACH_NONE (render_text.c; the HTML summary shows it too). When
 * the check judged custom allocator blocks (r->custom_reach) and the
 * report has some, their clause follows the heap's in the same words
 * ("; custom allocator blocks unreachable: ..."). 1024 bytes hold it. */
HT_INTERNAL const char *ht__reach_summary(const ht_report_t *r, char *buf, size_t len);

/* Renderers: each writes the whole report to f; returns 0 or -1 (errno). */
HT_INTERNAL int ht__render_text(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render_json(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render_folded(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render_pprof(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render_html(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render_supp(const ht_report_t *r, FILE *f);
HT_INTERNAL int ht__render(const ht_report_t *r, int format, FILE *f);

#endif
