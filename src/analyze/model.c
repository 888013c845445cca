/* model.c -- the trace -> report layer (see model.h): normalizes stacks,
 * aggregates sites into rows (by stack, function or module), and builds
 * the leak/in-use report, snapshot diffs and growth rankings. Pure: reads
 * only the ht_trace_t values it is given, prints nothing but progress. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "heaptrail.h"
#include "model.h"
#include "suppress.h"

const char *const ht__default_well_tested[] = {
    "libc.so*", "libc-*.so", "libm.so*", "libstdc++.so*", "libgcc_s.so*",
    "ld-linux*.so*", "ld-*.so*", "libpthread.so*", "libdl.so*",
    "libheaptrail*.so*", NULL
};

/*---------------------------------------------------------------- progress */

void ht__progress_init(ht_progress_t *p, const ht_session_t *s, const char *what)
{
    p->what = what;
    p->last = ht__now();
    p->shown = 0;
    p->on = s->opts && s->opts->progress;
}

void ht__progress_step(ht_progress_t *p, size_t done, size_t total)
{
    if (!p->on || (done & 4095))
        return;
    double now = ht__now();
    if (now - p->last < 0.25)
        return;
    p->last = now;
    p->shown = 1;
    fprintf(stderr, "\r%s: %zu/%zu (%d%%)  ", p->what, done, total,
            total ? (int)(100.0 * (double)done / (double)total) : 100);
}

void ht__progress_end(ht_progress_t *p)
{
    if (p->shown)
        fprintf(stderr, "\r%*s\r", 60, "");
    p->shown = 0;
}

/*----------------------------------------------------------------- session */

void ht__session_init(ht_session_t *s, const ht_opts_t *o, const char *debug_dirs, FILE *warn)
{
    memset(s, 0, sizeof *s);
    s->opts = o;
    s->sym = ht__sym_new(debug_dirs, warn);
}

void ht__session_free(ht_session_t *s)
{
    for (int i = 0; i < s->nin; i++) {
        free(s->in[i].node_tmod);
        free(s->in[i].tm_handle);
        free(s->in[i].tm_bias);
        free(s->in[i].node_hash);
        free(s->in[i].node_jit);
    }
    ht__sym_free(s->sym);
    memset(s, 0, sizeof *s);
}

static int well_tested(const ht_opts_t *o, const char *name)
{
    if (!o || !o->well_tested) {
        for (int i = 0; ht__default_well_tested[i]; i++)
            if (fnmatch(ht__default_well_tested[i], name, 0) == 0)
                return 1;
        return 0;
    }
    for (size_t i = 0; i < o->nwell_tested; i++)
        if (fnmatch(o->well_tested[i], name, 0) == 0)
            return 1;
    return 0;
}

typedef struct modspan_s {
    uint64_t start, end, max_end;   /* max_end: max of end over [0..i] */
    uint64_t bias, load_ns;
    uint32_t handle, tidx;      /* symbolizer module, index in t->modules */
} modspan_t;

static int cmp_span(const void *a, const void *b)
{
    const modspan_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->load_ns < y->load_ns ? -1 : x->load_ns > y->load_ns;
}

/* The module holding `addr`. When several recorded modules covered it at
 * different times (a library dlclose'd and another loaded in its place),
 * the one loaded most recently before the stack was first seen wins: the
 * code that made the call must have been loaded when the stack was
 * captured, which was before the first snapshot that holds it. */
static const modspan_t *find_span(const modspan_t *sp, size_t n, uint64_t addr, uint64_t seen)
{
    size_t lo = 0, hi = n;          /* first span with start > addr */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sp[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const modspan_t *best = NULL, *any = NULL;
    for (size_t i = lo; i-- > 0 && sp[i].max_end > addr;) {
        if (addr >= sp[i].end)
            continue;
        if (!any)
            any = &sp[i];
        if (sp[i].load_ns <= seen && (!best || sp[i].load_ns > best->load_ns))
            best = &sp[i];
    }
    return best ? best : any;
}

/* For each node outside every module, the JIT record that names it. A
 * frame tagged with a registration serial (HT_FRAME_JIT_SERIAL, or given
 * one by a JIT_NODE record) is in the latest record with that serial that
 * covers it; an untagged one (traces of earlier versions) in the record
 * covering its address that began last before the node was first seen. */
static void name_jit_nodes(ht_input_t *in, const uint64_t *seen)
{
    const ht_trace_t *t = in->t;
    uint32_t *by_serial = ht__xmalloc(32768 * sizeof *by_serial);
    for (size_t i = 0; i < 32768; i++)
        by_serial[i] = UINT32_MAX;
    for (size_t j = 0; j < t->njit; j++)
        by_serial[t->jit[j].serial & 0x7fff] = (uint32_t)j;
    in->node_jit = ht__xmalloc((t->nnodes ? t->nnodes : 1) * sizeof *in->node_jit);
    for (size_t i = 0; i < t->nnodes; i++) {
        in->node_jit[i] = UINT32_MAX;
        if (i == 0 || in->node_tmod[i] != UINT32_MAX)
            continue;
        uint64_t a = t->nodes[i].addr, at = HT_FRAME_ADDRESS(a) - 1;
        uint32_t serial = HT_FRAME_JIT_SERIAL(a);
        if (serial) {
            /* the latest record with the serial; serials wrap, so if that
             * one is elsewhere, the latest with the serial that covers the
             * address */
            uint32_t j = by_serial[serial];
            if (j != UINT32_MAX && (at < t->jit[j].start || at - t->jit[j].start >= t->jit[j].size))
                for (size_t k = j; k-- > 0;)
                    if (t->jit[k].serial == serial && at >= t->jit[k].start && at - t->jit[k].start < t->jit[k].size) {
                        j = (uint32_t)k;
                        break;
                    }
            in->node_jit[i] = j;
            continue;
        }
        if (a <= 1)
            continue;
        uint64_t when = seen ? seen[i] : UINT64_MAX, best_t = 0;
        for (size_t j = 0; j < t->njit; j++) {
            const ht_tjit_t *r = &t->jit[j];
            if (at < r->start || at - r->start >= r->size)
                continue;
            int better = in->node_jit[i] == UINT32_MAX ||
                         (r->begin_ns <= when && (r->begin_ns >= best_t || t->jit[in->node_jit[i]].begin_ns > when));
            if (better) {
                in->node_jit[i] = (uint32_t)j;
                best_t = r->begin_ns;
            }
        }
    }
    free(by_serial);
}

int ht__session_add(ht_session_t *s, const char *name, const ht_trace_t *t)
{
    int idx = s->nin++;
    ht_input_t *in = &s->in[idx];
    memset(in, 0, sizeof *in);
    in->name = name;
    in->t = t;
    size_t nn = t->nnodes ? t->nnodes : 1;
    in->node_tmod = ht__xmalloc(nn * sizeof *in->node_tmod);
    in->tm_handle = ht__xcalloc(t->nmodules + 1, sizeof *in->tm_handle);
    in->tm_bias = ht__xcalloc(t->nmodules + 1, sizeof *in->tm_bias);
    in->node_hash = NULL;

    modspan_t *sp = ht__xcalloc(t->nmodules + 1, sizeof *sp);
    modspan_t *tm = ht__xcalloc(t->nmodules + 1, sizeof *tm);  /* by trace index */
    size_t nsp = 0;
    for (size_t i = 0; i < t->nmodules; i++) {
        const ht_tmodule_t *m = &t->modules[i];
        if (m->end <= m->start)
            continue;
        uint32_t h = ht__sym_module(s->sym, m->path ? m->path : "", m->build_id, m->build_id_len);
        ht_smod_t *sm = ht__sym_mod(s->sym, h);
        if (!sm->end) {
            sm->start = m->start;
            sm->end = m->end;
            sm->bias = m->bias;
            sm->well_tested = well_tested(s->opts, sm->name);
        }
        sp[nsp++] = (modspan_t){ m->start, m->end, 0, m->bias, m->load_ns, h, (uint32_t)i };
        tm[i] = sp[nsp - 1];
        in->tm_handle[i] = h;
        in->tm_bias[i] = m->bias;
    }
    qsort(sp, nsp, sizeof *sp, cmp_span);
    for (size_t i = 0; i < nsp; i++)
        sp[i].max_end = i && sp[i - 1].max_end > sp[i].end ? sp[i - 1].max_end : sp[i].end;

    /* first time each node was seen: parents of a site's stack were
     * captured no later than the site. Only needed to choose between
     * modules that shared addresses over time, and only for nodes whose
     * module the trace does not name. */
    int overlap = t->njit > 0;  /* JIT records are chosen by time too */
    for (size_t i = 1; i < nsp; i++)
        overlap |= sp[i].start < sp[i - 1].max_end;
    /* the reader notes them (it may not keep every snapshot's sites);
     * a trace built in memory has them computed here */
    const uint64_t *seen = overlap ? t->node_seen_ns : NULL;
    uint64_t *own = overlap && !seen ? ht__xmalloc(nn * sizeof *own) : NULL;
    for (size_t i = 0; own && i < nn; i++)
        own[i] = UINT64_MAX;
    for (size_t k = 0; own && k < t->nsnaps; k++)
        ht_trace_note_seen(t, &t->snaps[k], own);
    if (own)
        seen = own;
    in->node_tmod[0] = UINT32_MAX;
    for (size_t i = 1; i < t->nnodes; i++) {
        uint64_t a = t->nodes[i].addr;
        /* the module the tracker saw at capture time, when it says; else
         * the address ranges (and load times) decide */
        uint32_t mi = t->nodes[i].module;
        if (mi < t->nmodules && tm[mi].end > a && tm[mi].start <= a) {
            in->node_tmod[i] = mi;
            continue;
        }
        const modspan_t *m = find_span(sp, nsp, a, seen ? seen[i] : UINT64_MAX);
        in->node_tmod[i] = m ? m->tidx : UINT32_MAX;
    }
    if (t->njit)
        name_jit_nodes(in, seen);
    free(own);
    free(sp);
    free(tm);
    return idx;
}

/* The per-node hashes of normalized stacks (computed once, on demand:
 * only merging rows needs them). */
static const uint64_t *node_hashes(ht_input_t *in)
{
    if (in->node_hash)
        return in->node_hash;
    const ht_trace_t *t = in->t;
    uint64_t *h = ht__xmalloc((t->nnodes ? t->nnodes : 1) * sizeof *h);
    h[0] = 0x6a09e667f3bcc908ull;
    for (size_t i = 1; i < t->nnodes; i++) {
        uint32_t p = t->nodes[i].parent < i ? t->nodes[i].parent : 0;
        uint32_t m = ht__node_mod(in, (uint32_t)i);
        uint64_t rel = ht__node_rel(in, (uint32_t)i);
        uint64_t fh = m == HT_NOMOD ? ht__mix64(rel ^ 0x5bd1e995ull)
                                    : ht__mix64((uint64_t)m * 0x9e3779b97f4a7c15ull + rel);
        h[i] = ht__mix64(h[p] * 31 + fh);
    }
    in->node_hash = h;
    return h;
}

/*--------------------------------------------------------------- snapshots */

const ht_tsnapshot_t *ht__snapshot_pick(const ht_trace_t *t, int64_t n)
{
    if (n < 0)
        n += (int64_t)t->nsnaps;
    if (n < 0 || (uint64_t)n >= t->nsnaps)
        return NULL;
    return &t->snaps[n];
}

/* Whether a snapshot was taken as the program ended (its last: what is
 * live there leaked), not while it ran. */
static int snap_at_end(const ht_tsnapshot_t *s)
{
    return s->reason == HT_SNAP_EXIT || s->reason == HT_SNAP_CRASH || s->reason == HT_SNAP_SIGNAL;
}

const char *ht__snap_reason(int reason)
{
    switch (reason) {
    case HT_SNAP_EXIT: return "exit";
    case HT_SNAP_REQUEST: return "request";
    case HT_SNAP_INTERVAL: return "interval";
    case HT_SNAP_API: return "api";
    case HT_SNAP_CRASH: return "crash";
    case HT_SNAP_EXEC: return "exec";
    case HT_SNAP_SANDBOX: return "sandbox";
    case HT_SNAP_SIGNAL: return "signal";
    case HT_SNAP_DETACH: return "detach";
    }
    return "unknown";
}

const char *ht__reach_why(const ht_tsnapshot_t *s, char *buf, size_t len)
{
    switch (s->reach) {
    case HT_REACH_NONE:
    case HT_REACH_DONE:
        return NULL;
    case HT_REACH_THREADS: {
        const char *when = snap_at_end(s) ? " at exit" : "";
        if (s->reach_threads == 1)
            snprintf(buf, len, "1 other thread was running%s and could not be paused", when);
        else if (s->reach_threads)
            snprintf(buf, len, "%u other threads were running%s and could not be paused",
                     s->reach_threads, when);
        else
            snprintf(buf, len, "other threads were running%s and could not be paused", when);
        return buf;
    }
    case HT_REACH_WOKE: {
        const char *when = snap_at_end(s) ? " at exit" : "";
        if (s->reach_threads == 1)
            snprintf(buf, len, "1 other thread, asleep in a system call%s, woke during every try of the scan",
                     when);
        else
            snprintf(buf, len, "%u other threads, asleep in system calls%s, woke during every try of the scan",
                     s->reach_threads, when);
        return buf;
    }
    case HT_REACH_UNREADABLE:
        snprintf(buf, len, "the process could not read its own memory");
        return buf;
    case HT_REACH_NOMEM:
        snprintf(buf, len, "there was not enough memory for the scan");
        return buf;
    case HT_REACH_INCOMPLETE:
        snprintf(buf, len, "the tracker had lost track of some blocks or of its own mappings");
        return buf;
    case HT_REACH_INSIDE:
        snprintf(buf, len, snap_at_end(s) ? "the program exited from inside an allocator call (a signal handler)"
                                          : "the snapshot was asked for from inside an allocator call (a signal handler)");
        return buf;
    case HT_REACH_YOUNG_CHILD:
        snprintf(buf, len, "a forked child that ended within a second of its fork is not checked (the check "
                           "would read its whole copy of the parent's heap)");
        return buf;
    }
    snprintf(buf, len, "unknown reason %u", (unsigned)s->reach);
    return buf;
}

const char *ht__reach_unseen(const ht_tsnapshot_t *s, char *buf, size_t len)
{
    if (s->reach != HT_REACH_DONE || !s->reach_threads)
        return NULL;
    int one = s->reach_threads == 1;
    snprintf(buf, len, "%u %s in a system call: %s scanned, %s registers not (a pointer held only "
                       "there would not count)",
             s->reach_threads, one ? "other thread slept" : "other threads slept",
             one ? "its stack was" : "their stacks were", one ? "its" : "their");
    return buf;
}

const char *ht__sample_text(const ht_trace_t *t, char *buf, size_t len)
{
    if (!t->sample)
        return NULL;
    snprintf(buf, len, "sampled trace (heaptrail run --sample %llu): heap figures are estimates from "
                       "about one allocation in every %llu bytes allocated; stacks that allocated much "
                       "less may be missing; no leak check",
             (unsigned long long)t->sample, (unsigned long long)t->sample);
    return buf;
}

const char *ht__foreign_text(const ht_trace_t *t, int *warn, char *buf, size_t len)
{
    size_t n = 0;
    int k = 0;
    if (!len || !t->foreign)
        return NULL;
    /* one of the C functions is the program's own: the operators' blocks
     * come from it too, or from elsewhere unseen */
    *warn = (t->foreign & ((1u << HT_FOREIGN_CXX) - 1)) != 0;
    buf[0] = 0;
    for (unsigned i = 0; i < HT_FOREIGN_COUNT; i++) {
        if (!(t->foreign >> i & 1))
            continue;
        int w = snprintf(buf + n, len - n, "%s%s", k++ ? ", " : "the program brings its own ",
                         HT_FOREIGN[i].name);
        if (w < 0 || (size_t)w >= len - n)
            return buf;
        n += (size_t)w;
    }
    if (t->foreign_module && t->foreign_module[0]) {
        int w = snprintf(buf + n, len - n, " (from ");
        if (w < 0 || (size_t)w >= len - n)
            return buf;
        n += (size_t)w;
        /* a path from the trace: control characters neutralised */
        for (const char *p = t->foreign_module; *p && n + 2 < len; p++)
            buf[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
        if (n + 1 < len)
            buf[n++] = ')';
        buf[n] = 0;
    }
    snprintf(buf + n, len - n, "%s",
             *warn ? ": their calls never reach heaptrail, so nothing they allocate is counted here"
                   : ": what they allocate is counted only where they take it from malloc");
    return buf;
}

const char *ht__reach_name(int reach)
{
    switch (reach) {
    case HT_REACH_NONE: return "not_recorded";
    case HT_REACH_DONE: return "computed";
    case HT_REACH_THREADS: return "threads";
    case HT_REACH_UNREADABLE: return "unreadable";
    case HT_REACH_NOMEM: return "no_memory";
    case HT_REACH_INCOMPLETE: return "incomplete";
    case HT_REACH_INSIDE: return "inside_allocator";
    case HT_REACH_WOKE: return "sleepers_woke";
    case HT_REACH_YOUNG_CHILD: return "young_fork_child";
    }
    return "unknown";
}

/*--------------------------------------------------------------- rows */

static uint32_t site_node(const ht_trace_t *t, uint32_t stack)
{
    return stack < t->nnodes ? stack : 0;   /* HT_STACK_ID_OVERFLOW: no stack */
}

/* Whether --suppressions leaves the site (stack, kind) out. `count`: it
 * is in the report's own snapshot, with this value: counted in r's supp_*
 * and the pattern's (a custom site's in supp_custom_* and the pattern's
 * custom_*). */
static int suppressed(ht_session_t *s, ht_report_t *r, uint32_t input, uint32_t stack, int kind, int count,
                      int64_t bytes, int64_t blocks)
{
    ht_supp_t *sp = s->opts ? s->opts->supp : NULL;
    if (!sp || !sp->n)
        return 0;
    int p = ht__supp_match(sp, s, input, site_node(s->in[input].t, stack), kind);
    if (p < 0)
        return 0;
    if (count && kind == HT_KIND_CUSTOM) {     /* inside blocks counted already: apart */
        r->supp_custom_bytes += bytes;
        r->supp_custom_blocks += blocks;
        r->supp_custom_sites++;
    } else if (count) {
        r->supp_bytes += bytes;
        r->supp_blocks += blocks;
        r->supp_sites++;
    }
    if (count)
        ht__supp_count(sp, p, kind == HT_KIND_CUSTOM, (uint64_t)blocks, (uint64_t)bytes);
    return 1;
}

static int stacks_equal(const ht_session_t *s, uint32_t ia, uint32_t a, uint32_t ib, uint32_t b)
{
    const ht_input_t *x = &s->in[ia], *y = &s->in[ib];
    while (a && b) {
        if (ia == ib && a == b)
            return 1;
        if (ht__node_mod(x, a) != ht__node_mod(y, b) || ht__node_rel(x, a) != ht__node_rel(y, b))
            return 0;
        uint32_t pa = x->t->nodes[a].parent, pb = y->t->nodes[b].parent;
        a = pa < a ? pa : 0;
        b = pb < b ? pb : 0;
    }
    return a == b;
}

uint32_t ht__origin_node(const ht_session_t *s, uint32_t input, uint32_t node)
{
    const ht_input_t *in = &s->in[input];
    for (uint32_t n = node; n;) {
        uint32_t m = ht__node_mod(in, n);
        if (m == HT_NOMOD || !ht__sym_mod(s->sym, m)->well_tested)
            return n;
        uint32_t p = in->t->nodes[n].parent;
        n = p < n ? p : 0;
    }
    return node;
}


const char *ht__frame_fallback(const ht_report_t *r, const ht_rframe_t *f)
{
    char buf[1100];
    if (f->jit)
        snprintf(buf, sizeof buf, "%.1024s (jit)", f->jit->name && f->jit->name[0] ? f->jit->name : "?");
    else if (f->mod == HT_NOMOD && f->addr == (uintptr_t)HT_FRAME_UNWIND_STOPPED)
        snprintf(buf, sizeof buf, "[unwinding stopped: code without unwind information, or a dlclose under way]");
    else if (f->mod == HT_NOMOD)
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)HT_FRAME_ADDRESS(f->addr));
    else
        snprintf(buf, sizeof buf, "%.500s+0x%llx", ht__sym_mod(r->ses->sym, f->mod)->name,
                 (unsigned long long)f->rel);
    return ht__pool_intern(ht__sym_pool(r->ses->sym), buf, strlen(buf), NULL);
}

static const char *node_label(ht_session_t *s, int by, uint32_t input, uint32_t node)
{
    ht_pool_t *pool = ht__sym_pool(s->sym);
    const ht_input_t *in = &s->in[input];
    if (node == 0)
        return ht__pool_intern(pool, "[no stack]", 10, NULL);
    uint32_t m = ht__node_mod(in, node);
    if (by == HT_BY_MODULE) {
        if (m == HT_NOMOD)
            return ht__pool_intern(pool, "[unknown]", 9, NULL);
        return ht__sym_mod(s->sym, m)->path;
    }
    if (m != HT_NOMOD) {
        const ht_sloc_t *l = ht__sym_lookup(s->sym, m, ht__node_rel(in, node), 0);
        if (l->n && l->f[0].function)
            return l->f[0].function;
    }
    ht_report_t fake = { .ses = s };
    ht_rframe_t f = { in->t->nodes[node].addr, m, ht__node_rel(in, node), NULL, ht__node_jit(in, node) };
    return ht__frame_fallback(&fake, &f);
}

typedef struct agg_s {
    ht_session_t *s;
    int by;
    ht_row_t *rows;         /* sized once for the most rows possible */
    ht_rowx_t *xs;          /* parallel extensions (diff, growth), or NULL */
    ht_rowlost_t *ls;       /* parallel reachability (reach computed), or NULL */
    size_t nrows, cap;
    uint32_t *slots;        /* row index + 1 */
    size_t nslots;
} agg_t;

/* Sizes an aggregation for at most `max` rows: no reallocation later (rows
 * are big and many; growing by copying cost more than the work). */
static void agg_init(agg_t *a, ht_session_t *s, int by, size_t max, int ext, int lost)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    a->by = by;
    a->cap = max ? max : 1;
    a->rows = ht__xmalloc(a->cap * sizeof *a->rows);
    a->xs = ext ? ht__xcalloc(a->cap, sizeof *a->xs) : NULL;
    a->ls = lost ? ht__xcalloc(a->cap, sizeof *a->ls) : NULL;
    size_t ns = 1024;
    while (ns < a->cap * 2)
        ns *= 2;
    a->nslots = ns;
    a->slots = ht__xcalloc(ns, sizeof *a->slots);
}

typedef struct probe_s {
    uint32_t input, node;   /* node: the stack, or the origin for groups */
    uint8_t kind;
    const char *label;
    uint64_t key;
} probe_t;

static void probe_make(agg_t *a, probe_t *p, uint32_t input, uint32_t stack, uint8_t kind)
{
    ht_input_t *in = &a->s->in[input];
    p->input = input;
    p->kind = kind;
    p->node = site_node(in->t, stack);
    p->label = NULL;
    if (a->by == HT_BY_STACK) {
        p->key = ht__mix64(node_hashes(in)[p->node] + kind);
        return;
    }
    p->node = ht__origin_node(a->s, input, p->node);
    p->label = node_label(a->s, a->by, input, p->node);
    p->key = ht__mix64((uint64_t)(uintptr_t)p->label * 2 + kind);
}

static int probe_eq(agg_t *a, const probe_t *p, const ht_row_t *r)
{
    if (r->key != p->key || r->kind != p->kind)
        return 0;
    if (a->by != HT_BY_STACK)
        return r->label == p->label;
    return stacks_equal(a->s, p->input, p->node, r->input, r->node);
}

static void agg_rehash(agg_t *a, size_t nslots)
{
    free(a->slots);
    a->slots = ht__xcalloc(nslots, sizeof *a->slots);
    a->nslots = nslots;
    for (size_t i = 0; i < a->nrows; i++) {
        size_t j = a->rows[i].key & (nslots - 1);
        while (a->slots[j])
            j = (j + 1) & (nslots - 1);
        a->slots[j] = (uint32_t)i + 1;
    }
}

/* The row for a probe; created (zeroed) when `create`, else NULL if none.
 * At most a->cap rows are ever created (agg_init). */
static ht_row_t *agg_row(agg_t *a, const probe_t *p, int create)
{
    size_t j = p->key & (a->nslots - 1);
    while (a->slots[j]) {
        ht_row_t *r = &a->rows[a->slots[j] - 1];
        if (probe_eq(a, p, r))
            return r;
        j = (j + 1) & (a->nslots - 1);
    }
    if (!create || a->nrows == a->cap)
        return NULL;
    ht_row_t *r = &a->rows[a->nrows];
    memset(r, 0, sizeof *r);
    if (a->xs) {
        r->x = &a->xs[a->nrows];
        r->x->g_first = -1;
    }
    if (a->ls)
        r->lost = &a->ls[a->nrows];
    r->input = p->input;
    r->node = p->node;
    r->kind = p->kind;
    r->label = p->label;
    r->key = p->key;
    r->max_nodes = a->by == HT_BY_STACK ? -1 : a->by == HT_BY_FUNCTION ? 1 : 0;
    r->best_bytes = INT64_MIN;
    a->slots[j] = (uint32_t)++a->nrows;
    return r;
}

/* A merged stack's contribution: the row shows the biggest one's frames. */
static void row_note(ht_row_t *r, const probe_t *p, int64_t bytes)
{
    r->nstacks++;
    if (bytes > r->best_bytes) {
        r->best_bytes = bytes;
        r->input = p->input;
        r->node = p->node;
    }
}

static size_t default_top(const ht_session_t *s)
{
    const ht_opts_t *o = s->opts;
    if (!o || o->top < 0)
        return o && (o->format == HT_FMT_TEXT || o->format == HT_FMT_HTML) ? 20 : 0;
    return (size_t)o->top;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Sort keys: the row's order is (k1, k2, k3) descending, then its hash
 * ascending (so equal rows keep one deterministic order). Sorting these
 * 40-byte keys and then permuting the rows in place needs far less memory
 * and moves far less than sorting the rows themselves. */
typedef struct sortkey_s {
    int64_t k1, k2, k3;
    uint64_t key;
    uint32_t idx;
} sortkey_t;

static int cmp_sortkey(const void *x, const void *y)
{
    const sortkey_t *a = x, *b = y;
    if (a->k1 != b->k1)
        return a->k1 > b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 > b->k2 ? -1 : 1;
    if (a->k3 != b->k3)
        return a->k3 > b->k3 ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* How sort_rows ranks: by bytes, then blocks (then, for a diff's rows with
 * reachability, by the change in their unreachable bytes: among rows that
 * grew alike, the one that lost more first); by unreachable bytes (lost +
 * indirectly lost), then possibly lost bytes, then bytes (a report's rows
 * with reachability); by ups -
 * downs first (growth); by blocks, then bytes (temporary allocations). */
enum { RANK_BYTES = 0, RANK_LOST, RANK_STEADY, RANK_BLOCKS };

/* Sorts a->rows (rank: RANK_*). */
static void sort_rows(agg_t *a, int rank)
{
    size_t n = a->nrows;
    sortkey_t *k = ht__xmalloc((n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        const ht_row_t *r = &a->rows[i];
        if (rank == RANK_STEADY)
            k[i] = (sortkey_t){ (int64_t)r->x->ups - (int64_t)r->x->downs, r->bytes, r->blocks,
                                r->key, (uint32_t)i };
        else if (rank == RANK_BLOCKS)
            k[i] = (sortkey_t){ r->blocks, r->bytes, 0, r->key, (uint32_t)i };
        else if (rank == RANK_LOST && r->lost)
            k[i] = (sortkey_t){ r->lost->lost_bytes + r->lost->ilost_bytes, r->lost->plost_bytes, r->bytes,
                                r->key, (uint32_t)i };
        else
            k[i] = (sortkey_t){ r->bytes, r->blocks,
                                r->lost ? r->lost->lost_bytes + r->lost->ilost_bytes : 0, r->key,
                                (uint32_t)i };
    }
    qsort(k, n, sizeof *k, cmp_sortkey);
    /* position i takes row k[i].idx: follow each cycle once */
    uint32_t *src = ht__xmalloc((n ? n : 1) * sizeof *src);
    for (size_t i = 0; i < n; i++)
        src[i] = k[i].idx;
    free(k);
    for (size_t i = 0; i < n; i++) {
        if (src[i] == i || src[i] == UINT32_MAX)
            continue;
        ht_row_t tmp = a->rows[i];
        size_t j = i;
        while (src[j] != i) {
            a->rows[j] = a->rows[src[j]];
            size_t next = src[j];
            src[j] = UINT32_MAX;
            j = next;
        }
        a->rows[j] = tmp;
        src[j] = UINT32_MAX;
    }
    free(src);
}

/* Keeps the first `top` rows (0: all) with |bytes| >= min_bytes. */
static void finish_rows(ht_report_t *r, agg_t *a)
{
    const ht_opts_t *o = a->s->opts;
    uint64_t min = o ? o->min_bytes : 0;
    size_t top = default_top(a->s), n = 0;
    for (size_t i = 0; i < a->nrows && (!top || n < top); i++) {
        if ((uint64_t)abs64(a->rows[i].bytes) < min)
            continue;
        if (n != i) {   /* move shown rows to the front, keep the rest */
            ht_row_t t = a->rows[n];
            a->rows[n] = a->rows[i];
            a->rows[i] = t;
        }
        n++;
    }
    r->rows = a->rows;
    r->xs = a->xs;
    r->losts = a->ls;
    r->nrows = a->nrows;
    r->nshown = n;
    r->row_count = a->nrows;
    r->stack_count = 0;
    for (size_t i = 0; i < a->nrows; i++)
        r->stack_count += a->rows[i].nstacks;
    free(a->slots);
    a->slots = NULL;
    a->nslots = 0;
}

/*----------------------------------------------------------------- report */

/* Keeps the `k` best keys (by cmp_sortkey) of a stream in a heap whose
 * root is the worst kept. */
static void heap_offer(sortkey_t *h, size_t *n, size_t k, const sortkey_t *v)
{
    if (*n < k) {
        size_t i = (*n)++;
        h[i] = *v;
        while (i > 0 && cmp_sortkey(&h[(i - 1) / 2], &h[i]) < 0) {   /* parent better: up */
            sortkey_t t = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return;
    }
    if (cmp_sortkey(v, &h[0]) >= 0)
        return;         /* not better than the worst kept */
    h[0] = *v;
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < *n && cmp_sortkey(&h[l], &h[w]) > 0)
            w = l;
        if (r < *n && cmp_sortkey(&h[r], &h[w]) > 0)
            w = r;
        if (w == i)
            break;
        sortkey_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Can rows be the sites themselves? Yes when each module of the trace is a
 * different file: then distinct stacks normalize to distinct frame lists
 * and nothing merges, so the report needs no hash table, and only the
 * rows shown are ever built. */
static int sites_are_rows(const ht_session_t *s)
{
    const ht_trace_t *t = s->in[0].t;
    if (s->nin != 1 || (s->opts && s->opts->by != HT_BY_STACK))
        return 0;
    uint32_t n = ht__sym_nmods(s->sym);
    uint8_t *used = ht__xcalloc(n + 1, 1);
    int ok = 1;
    for (size_t i = 0; i < t->nmodules && ok; i++) {
        const ht_tmodule_t *m = &t->modules[i];
        if (m->end <= m->start)
            continue;
        uint32_t h = ht__sym_module(s->sym, m->path ? m->path : "", m->build_id, m->build_id_len);
        ok = !used[h];
        used[h] = 1;
    }
    free(used);
    return ok;
}

/* What a report counts of a site: live memory, (--allocated) all it
 * allocated since the start, (--peak) what it held at the process's
 * peak, or (--temporary) its temporary allocations. A custom site counts
 * nothing in a --temporary report: it ranks the calls a program could
 * save to its allocator, and a custom block's calls are the program's
 * own allocator's, whose heap blocks (or mappings) are counted already. */
static int64_t site_bytes(const ht_report_t *r, const ht_tsite_t *site)
{
    if (r->type == HT_REPORT_TEMPORARY && site->kind == HT_KIND_CUSTOM)
        return 0;
    return (int64_t)(r->type == HT_REPORT_ALLOCATED   ? site->total_bytes
                     : r->type == HT_REPORT_PEAK      ? site->at_peak_bytes
                     : r->type == HT_REPORT_TEMPORARY ? site->temp_bytes
                                                      : site->live_bytes);
}
static int64_t site_blocks(const ht_report_t *r, const ht_tsite_t *site)
{
    if (r->type == HT_REPORT_TEMPORARY && site->kind == HT_KIND_CUSTOM)
        return 0;
    return (int64_t)(r->type == HT_REPORT_ALLOCATED   ? site->total_blocks
                     : r->type == HT_REPORT_PEAK      ? site->at_peak_blocks
                     : r->type == HT_REPORT_TEMPORARY ? site->temp_blocks
                                                      : site->live_blocks);
}

/* A site's lost, indirectly lost and (when the report counts them,
 * r->possible) possibly lost blocks added to l, times sign (a diff
 * subtracts its older snapshot's). Only the blocks the check judged
 * count (ht__kind_judged): a mapping's site has none (REACH never names one),
 * nor a custom site's of a check that did not judge them. */
static void add_lost_signed(const ht_report_t *r, ht_rowlost_t *l, const ht_tsite_t *site, int64_t sign)
{
    if (!ht__kind_judged(r, site->kind))
        return;
    l->lost_bytes += sign * (int64_t)site->lost_bytes;
    l->lost_blocks += sign * (int64_t)site->lost_blocks;
    l->ilost_bytes += sign * (int64_t)site->ilost_bytes;
    l->ilost_blocks += sign * (int64_t)site->ilost_blocks;
    l->unreach_stacks += sign * (site->lost_blocks + site->ilost_blocks > 0);
    if (r->possible) {
        l->plost_bytes += sign * (int64_t)site->plost_bytes;
        l->plost_blocks += sign * (int64_t)site->plost_blocks;
    }
}

static void add_lost(const ht_report_t *r, ht_rowlost_t *l, const ht_tsite_t *site)
{
    add_lost_signed(r, l, site, 1);
}

/* A site with reachability (its live `bytes` and `blocks`) added to one
 * snapshot's totals (a diff's before snapshot's when `before`): a heap
 * site to the heap's lost, sites with lost blocks and live heap; a custom
 * site, when the check judged custom blocks, to the custom group's lost
 * and sites with lost blocks (its live figures are custom_* already).
 * Mappings are never checked, nor custom blocks otherwise. */
static void add_reach_to(ht_report_t *r, int before, const ht_tsite_t *site, int64_t bytes, int64_t blocks)
{
    if (site->kind == HT_KIND_CUSTOM && r->custom_reach) {
        add_lost(r, before ? &r->custom_lost_a : &r->custom_lost, site);
        *(before ? &r->custom_lost_sites_a : &r->custom_lost_sites) += site->lost_blocks > 0;
        return;
    }
    if (site->kind != HT_KIND_HEAP)
        return;
    add_lost(r, before ? &r->total_lost_a : &r->total_lost, site);
    *(before ? &r->lost_sites_a : &r->lost_sites) += site->lost_blocks > 0;
    *(before ? &r->heap_a_bytes : &r->heap_bytes) += bytes;
    *(before ? &r->heap_a_blocks : &r->heap_blocks) += blocks;
}

/* A counted site (its live `bytes` and `blocks`) added to the report's
 * reachability totals, when it has them (reach HT_REACH_DONE). */
static void add_reach_total(ht_report_t *r, const ht_tsite_t *site, int64_t bytes, int64_t blocks)
{
    if (r->reach == HT_REACH_DONE)
        add_reach_to(r, 0, site, bytes, blocks);
}

/* The custom clause of a report's totals line, appended at buf + n
 * (its length so far): "; custom allocator blocks never freed: C bytes in
 * B blocks from K sites", worded like the mappings' clause; nothing when
 * no custom site is counted. Returns the new length. */
static int custom_clause(const ht_report_t *r, char *buf, size_t len, int n)
{
    if (!r->custom_sites || n < 0 || (size_t)n >= len)
        return n;
    const char *what = r->type == HT_REPORT_LEAKS ? "never freed" : r->type == HT_REPORT_ALLOCATED ? "made"
                       : r->type == HT_REPORT_PEAK ? "live at the peak" : "live";
    return n + snprintf(buf + n, len - (size_t)n, "; custom allocator blocks %s: %lld bytes in %lld %s from %zu %s",
                        what, (long long)r->custom_bytes, (long long)r->custom_blocks,
                        r->custom_blocks == 1 ? "block" : "blocks", r->custom_sites,
                        r->custom_sites == 1 ? "site" : "sites");
}

const char *ht__totals_line(const ht_report_t *r, char *buf, size_t len)
{
    /* total_* hold the heap and the mappings (custom blocks never), the
     * stack count every kind's sites */
    int64_t hb = r->total_bytes - r->map_bytes, hn = r->total_blocks - r->map_blocks;
    size_t hs = r->stack_count - r->map_sites - r->custom_sites;
    if (r->type == HT_REPORT_TEMPORARY) {
        snprintf(buf, len, "%lld temporary %s of %lld (%.1f%%), %lld bytes, from %zu allocation %s",
                 (long long)hn, hn == 1 ? "allocation" : "allocations", (long long)r->all_blocks,
                 r->all_blocks ? 100.0 * (double)hn / (double)r->all_blocks : 0.0, (long long)hb, hs,
                 hs == 1 ? "site" : "sites");
        return buf;
    }
    if (r->type == HT_REPORT_PEAK) {
        const ht_tsnapshot_t *sn = r->snap_b;
        int n = snprintf(buf, len, "%lld bytes in %lld %s in use at the peak, from %zu allocation %s (the process's peak, heap and mappings: %llu bytes",
                         (long long)hb, (long long)hn, hn == 1 ? "block" : "blocks", hs, hs == 1 ? "site" : "sites",
                         (unsigned long long)(sn ? sn->peak_bytes : 0));
        if (sn && sn->peak_ns && n > 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, ", at %.3f s", (double)sn->peak_ns / 1e9);
        if (n > 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, ")");
        if (r->map_sites && n > 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, "; anonymous mappings live at the peak: %lld bytes in %lld %s from %zu %s",
                          (long long)r->map_bytes, (long long)r->map_blocks, r->map_blocks == 1 ? "region" : "regions",
                          r->map_sites, r->map_sites == 1 ? "site" : "sites");
        custom_clause(r, buf, len, n);
        return buf;
    }
    int n = snprintf(buf, len, "%lld bytes %s in %lld %s from %zu allocation %s", (long long)hb,
                     r->type == HT_REPORT_LEAKS ? "leaked" : r->type == HT_REPORT_ALLOCATED ? "allocated" : "in use",
                     (long long)hn, hn == 1 ? "block" : "blocks", hs, hs == 1 ? "site" : "sites");
    if (r->map_sites && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "; anonymous mappings %s: %lld bytes in %lld %s from %zu %s",
                      r->type == HT_REPORT_LEAKS ? "never unmapped" : r->type == HT_REPORT_ALLOCATED ? "made" : "live",
                      (long long)r->map_bytes, (long long)r->map_blocks, r->map_blocks == 1 ? "region" : "regions",
                      r->map_sites, r->map_sites == 1 ? "site" : "sites");
    custom_clause(r, buf, len, n);
    return buf;
}

const char *ht__custom_change(const ht_report_t *r, char *buf, size_t len)
{
    buf[0] = 0;
    if (r->type == HT_REPORT_GROWTH && r->custom_sites)
        snprintf(buf, len, "; custom allocator blocks: %zu %s grew, by %lld bytes in %lld %s", r->custom_sites,
                 r->custom_sites == 1 ? "stack" : "stacks", (long long)r->custom_bytes, (long long)r->custom_blocks,
                 ht__plural(r->custom_blocks, "block", "blocks"));
    else if (r->type == HT_REPORT_DIFF && (r->custom_sites || r->custom_a_blocks || r->custom_b_blocks ||
                                           r->custom_a_bytes || r->custom_b_bytes))
        snprintf(buf, len, "; custom allocator blocks: %+lld bytes, %+lld %s from %zu %s (%lld bytes in %lld %s "
                           "before, %lld bytes in %lld %s after)",
                 (long long)r->custom_bytes, (long long)r->custom_blocks,
                 ht__plural(r->custom_blocks, "block", "blocks"), r->custom_sites,
                 r->custom_sites == 1 ? "stack" : "stacks", (long long)r->custom_a_bytes,
                 (long long)r->custom_a_blocks, ht__plural(r->custom_a_blocks, "block", "blocks"),
                 (long long)r->custom_b_bytes, (long long)r->custom_b_blocks,
                 ht__plural(r->custom_b_blocks, "block", "blocks"));
    return buf;
}

int ht__custom_verdicts(const ht_report_t *r)
{
    if (!r->custom_reach)
        return 0;
    if (r->type == HT_REPORT_DIFF)
        return r->custom_sites || r->custom_a_blocks || r->custom_b_blocks || r->custom_a_bytes ||
               r->custom_b_bytes;
    return r->custom_sites != 0;
}

const char *ht__kind_name(int kind)
{
    return kind == HT_KIND_MMAP ? "mmap" : kind == HT_KIND_CUSTOM ? "custom" : "heap";
}

const char *ht__supp_line(const ht_report_t *r, char *buf, size_t len)
{
    const ht_supp_t *sp = r->ses->opts ? r->ses->opts->supp : NULL;
    if (!sp)
        return NULL;
    int n;
    if (!r->supp_sites && !r->supp_custom_sites)
        n = snprintf(buf, len, "suppressed: nothing (no stack matched the %zu %s)", sp->n,
                     sp->nvg || sp->vg_ignored ? ht__plural((int64_t)sp->n, "suppression", "suppressions")
                                               : ht__plural((int64_t)sp->n, "pattern", "patterns"));
    else
        n = snprintf(buf, len, "suppressed: %lld bytes in %lld %s from %zu %s", (long long)r->supp_bytes,
                     (long long)r->supp_blocks, r->supp_blocks == 1 ? "block" : "blocks", r->supp_sites,
                     r->supp_sites == 1 ? "site" : "sites");
    if (r->supp_custom_sites && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "; custom allocator blocks: %lld bytes in %lld %s from %zu %s",
                 (long long)r->supp_custom_bytes, (long long)r->supp_custom_blocks,
                 r->supp_custom_blocks == 1 ? "block" : "blocks", r->supp_custom_sites,
                 r->supp_custom_sites == 1 ? "site" : "sites");
    return buf;
}

double ht__row_share(const ht_report_t *r, const ht_row_t *row)
{
    if (r->type == HT_REPORT_TEMPORARY)
        return r->total_blocks ? 100.0 * (double)row->blocks / (double)r->total_blocks : 0.0;
    int64_t of = row->kind == HT_KIND_MMAP     ? r->map_bytes
                 : row->kind == HT_KIND_CUSTOM ? r->custom_bytes
                                               : r->total_bytes - r->map_bytes;
    return of ? 100.0 * (double)row->bytes / (double)of : 0.0;
}

/* A counted site added to the report's totals: a custom one to custom_*
 * alone (its bytes lie inside heap blocks or mappings counted already),
 * any other to total_*, and a mapping's also to map_*. */
static void add_kind_total(ht_report_t *r, const ht_tsite_t *site, int64_t bytes, int64_t blocks)
{
    if (site->kind == HT_KIND_CUSTOM) {
        r->custom_bytes += bytes;
        r->custom_blocks += blocks;
        r->custom_sites++;
        return;
    }
    r->total_bytes += bytes;
    r->total_blocks += blocks;
    if (site->kind == HT_KIND_MMAP) {
        r->map_bytes += bytes;
        r->map_blocks += blocks;
        r->map_sites++;
    }
}

/* Do the report's rows carry reachability (and rank by it)? When it was
 * computed, except for the folded and pprof exports, which have no place
 * for it and keep the order and selection of live bytes. */
static int rows_lost(const ht_session_t *s, const ht_report_t *r)
{
    const ht_opts_t *o = s->opts;
    return r->reach == HT_REACH_DONE && !(o && (o->format == HT_FMT_FOLDED || o->format == HT_FMT_PPROF));
}

/* The report straight from the sites (see sites_are_rows): the biggest
 * `hold` sites (0: all) become rows, in order. */
static void report_from_sites(ht_session_t *s, const ht_tsnapshot_t *sn, ht_report_t *r)
{
    const ht_opts_t *o = s->opts;
    size_t top = default_top(s);
    size_t hold = top;
    if (hold && o && o->format == HT_FMT_HTML && hold < HT_HTML_FLAME_ROWS)
        hold = HT_HTML_FLAME_ROWS;
    size_t cap = hold ? hold : sn->nsites;
    sortkey_t *k = ht__xmalloc((cap ? cap : 1) * sizeof *k);
    size_t n = 0, count = 0;
    const ht_input_t *in = &s->in[0];
    int lost = rows_lost(s, r);
    ht_progress_t pr;
    ht__progress_init(&pr, s, "ranking sites");
    for (size_t i = 0; i < sn->nsites; i++) {
        const ht_tsite_t *site = &sn->sites[i];
        ht__progress_step(&pr, i, sn->nsites);
        int64_t bytes = site_bytes(r, site), blocks = site_blocks(r, site);
        if (!bytes && !blocks)
            continue;
        if (suppressed(s, r, 0, site->stack, site->kind, 1, bytes, blocks))
            continue;
        count++;
        add_kind_total(r, site, bytes, blocks);
        add_reach_total(r, site, bytes, blocks);
        uint32_t node = site_node(in->t, site->stack);
        uint64_t key = ht__mix64(((uint64_t)node << 8) + site->kind);
        sortkey_t v = { bytes, blocks, 0, key, (uint32_t)i };
        if (r->type == HT_REPORT_TEMPORARY)
            v = (sortkey_t){ blocks, bytes, 0, key, (uint32_t)i };
        if (lost && ht__kind_judged(r, site->kind))
            v = (sortkey_t){ (int64_t)(site->lost_bytes + site->ilost_bytes), (int64_t)site->plost_bytes,
                             bytes, key, (uint32_t)i };
        else if (lost)  /* not checked: ranked as a still reachable site */
            v = (sortkey_t){ 0, 0, bytes, key, (uint32_t)i };
        if (hold)
            heap_offer(k, &n, hold, &v);
        else
            k[n++] = v;
    }
    ht__progress_end(&pr);
    qsort(k, n, sizeof *k, cmp_sortkey);
    r->rows = ht__xmalloc((n ? n : 1) * sizeof *r->rows);
    if (lost)
        r->losts = ht__xcalloc(n ? n : 1, sizeof *r->losts);
    int64_t held = 0, held_blocks = 0;
    uint64_t min = o ? o->min_bytes : 0;
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const ht_tsite_t *site = &sn->sites[k[i].idx];
        ht_row_t *row = &r->rows[i];
        memset(row, 0, sizeof *row);
        row->input = 0;
        row->node = site_node(in->t, site->stack);
        row->kind = site->kind;
        row->max_nodes = -1;
        row->nstacks = 1;
        row->bytes = site_bytes(r, site);
        row->blocks = site_blocks(r, site);
        row->alloc_bytes = (int64_t)site->total_bytes;
        row->alloc_blocks = (int64_t)site->total_blocks;
        row->peak_bytes = (int64_t)site->peak_bytes;
        row->best_bytes = row->bytes;
        row->key = k[i].key;
        if (r->losts) {
            row->lost = &r->losts[i];
            add_lost(r, row->lost, site);
        }
        held += row->bytes;
        held_blocks += row->blocks;
        if ((uint64_t)row->bytes >= min && (!top || shown < top)) {
            if (shown != i) {   /* shown rows first, as finish_rows does */
                ht_row_t t = r->rows[shown];
                r->rows[shown] = *row;
                *row = t;
            }
            shown++;
        }
    }
    free(k);
    r->nrows = n;
    r->nshown = shown;
    r->row_count = count;
    r->stack_count = count;
    /* the rows held include custom ones */
    r->rest_bytes = r->total_bytes + r->custom_bytes - held;
    r->rest_blocks = r->total_blocks + r->custom_blocks - held_blocks;
}

/* --peak on a snapshot without PEAK records: an error, never zeros. */
static int no_peak(char *err, size_t errlen, const char *name, const ht_tsnapshot_t *sn)
{
    snprintf(err, errlen, "%s: snapshot %u does not say what was live at the peak "
             "(an agent older than this heaptrail wrote it)", name, sn->seq);
    return -1;
}

int ht__report_build(ht_session_t *s, int64_t snapshot, int mode, ht_report_t *r,
                     char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const ht_trace_t *t = s->in[0].t;
    const ht_tsnapshot_t *sn = ht__snapshot_pick(t, snapshot);
    if (!sn) {
        if (!t->nsnaps)
            snprintf(err, errlen, "%s: the trace holds no snapshot%s", s->in[0].name,
                     t->truncated ? " (damaged)" : t->complete ? "" : " (cut short: the program was killed "
                     "before its first, or is still running; `heaptrail run --interval S` writes one every S seconds)");
        else
            snprintf(err, errlen, "%s: no snapshot %lld (it has %zu: 0..%zu)", s->in[0].name,
                     (long long)snapshot, t->nsnaps, t->nsnaps - 1);
        return -1;
    }
    r->ses = s;
    r->by = s->opts ? s->opts->by : HT_BY_STACK;
    if (mode == HT_RMODE_PEAK && !sn->has_peak)
        return no_peak(err, errlen, s->in[0].name, sn);
    if (mode == HT_RMODE_TEMPORARY && !sn->has_temp) {
        snprintf(err, errlen, "%s: snapshot %u does not count temporary allocations "
                 "(an agent older than this heaptrail wrote it)", s->in[0].name, sn->seq);
        return -1;
    }
    r->type = mode == HT_RMODE_ALLOCATED ? HT_REPORT_ALLOCATED
              : mode == HT_RMODE_PEAK ? HT_REPORT_PEAK
              : mode == HT_RMODE_TEMPORARY ? HT_REPORT_TEMPORARY
              : mode == HT_RMODE_AUTO && snap_at_end(sn) ? HT_REPORT_LEAKS : HT_REPORT_INUSE;
    r->snap_b = sn;
    r->timeline = t;
    /* reachability: a leaks report's, and an in-use report's of a leak
     * check made while the program ran (`heaptrail snapshot --leaks`: a
     * mid-run snapshot with REACH). An exit snapshot read --in-use stays
     * the plain in-use report. */
    r->reach = r->type == HT_REPORT_LEAKS || (r->type == HT_REPORT_INUSE && !snap_at_end(sn))
                   ? sn->reach : HT_REACH_NONE;
    r->possible = r->reach == HT_REACH_DONE && sn->has_possible;
    r->custom_reach = r->reach == HT_REACH_DONE && sn->reach_custom;
    if (r->type == HT_REPORT_TEMPORARY)
        for (size_t i = 0; i < sn->nsites; i++)
            if (sn->sites[i].kind == HT_KIND_HEAP && !suppressed(s, r, 0, sn->sites[i].stack, HT_KIND_HEAP, 0, 0, 0))
                r->all_blocks += (int64_t)sn->sites[i].total_blocks;
    if (sites_are_rows(s)) {
        report_from_sites(s, sn, r);
        return 0;
    }
    agg_t a;
    agg_init(&a, s, r->by, sn->nsites, 0, rows_lost(s, r));
    ht_progress_t pr;
    ht__progress_init(&pr, s, "grouping sites");
    for (size_t i = 0; i < sn->nsites; i++) {
        const ht_tsite_t *site = &sn->sites[i];
        ht__progress_step(&pr, i, sn->nsites);
        int64_t bytes = site_bytes(r, site), blocks = site_blocks(r, site);
        if (!bytes && !blocks)
            continue;
        if (suppressed(s, r, 0, site->stack, site->kind, 1, bytes, blocks))
            continue;
        probe_t p;
        probe_make(&a, &p, 0, site->stack, site->kind);
        ht_row_t *row = agg_row(&a, &p, 1);
        row_note(row, &p, bytes);
        row->bytes += bytes;
        row->blocks += blocks;
        row->alloc_bytes += (int64_t)site->total_bytes;
        row->alloc_blocks += (int64_t)site->total_blocks;
        row->peak_bytes += (int64_t)site->peak_bytes;
        if (row->lost)
            add_lost(r, row->lost, site);
        add_reach_total(r, site, bytes, blocks);
        add_kind_total(r, site, bytes, blocks);
    }
    ht__progress_end(&pr);
    free(a.slots);
    a.slots = NULL;
    sort_rows(&a, r->type == HT_REPORT_TEMPORARY ? RANK_BLOCKS : RANK_LOST);
    finish_rows(r, &a);
    return 0;
}

/*------------------------------------------------------------------- diff */

/* Did a diff row's unreachable memory (definitely + indirectly lost), or
 * its possibly lost memory, change? (Blocks moving from definitely to
 * indirectly lost alone do not count.) */
static int reach_changed(const ht_rowlost_t *l)
{
    return l->lost_bytes + l->ilost_bytes || l->lost_blocks + l->ilost_blocks || l->plost_bytes ||
           l->plost_blocks;
}

/* A diff compares two snapshots UMDH style: rows are stacks (or groups)
 * with their live bytes in each, ranked by growth. When both snapshots
 * carry reachability (reach HT_REACH_DONE: leak checks made while the
 * program ran, or an exit snapshot), the diff has it too: the totals of
 * each snapshot, and per row the change in lost and indirectly lost
 * blocks (and possibly lost ones, when both snapshots counted them); a
 * row whose live memory did not change but whose unreachable (or
 * possibly lost) memory did (a block allocated before the first snapshot
 * and lost since) is kept. The ranking stays by growth; rows that grew alike are
 * ranked by the change in their unreachable bytes (--by function's row
 * keys are not stable from run to run, so ties must not decide). */
int ht__diff_build(ht_session_t *s, int64_t na, int64_t nb, int peak, ht_report_t *r, char *err,
                   size_t errlen)
{
    memset(r, 0, sizeof *r);
    uint32_t ib = s->nin > 1 ? 1 : 0;
    const ht_tsnapshot_t *sa = ht__snapshot_pick(s->in[0].t, na);
    const ht_tsnapshot_t *sb = ht__snapshot_pick(s->in[ib].t, nb);
    if (!sa || !sb) {
        const ht_input_t *in = !sa ? &s->in[0] : &s->in[ib];
        snprintf(err, errlen, "%s: no snapshot %lld (it has %zu)", in->name,
                 (long long)(!sa ? na : nb), in->t->nsnaps);
        return -1;
    }
    if (peak && !sa->has_peak)
        return no_peak(err, errlen, s->in[0].name, sa);
    if (peak && !sb->has_peak)
        return no_peak(err, errlen, s->in[ib].name, sb);
    r->ses = s;
    r->type = HT_REPORT_DIFF;
    r->peak = peak;
    r->by = s->opts ? s->opts->by : HT_BY_STACK;
    r->snap_a = sa;
    r->snap_b = sb;
    r->input_a = 0;
    r->input_b = ib;
    r->timeline = s->in[ib].t;
    r->reach = !peak && sa->reach == HT_REACH_DONE && sb->reach == HT_REACH_DONE ? HT_REACH_DONE
                                                                                 : HT_REACH_NONE;
    /* possibly lost only when both counted them: else one side's would
     * be compared with the other's still reachable */
    r->possible = r->reach == HT_REACH_DONE && sa->has_possible && sb->has_possible;
    /* custom blocks' verdicts likewise: a check that did not judge them
     * has none to compare */
    r->custom_reach = r->reach == HT_REACH_DONE && sa->reach_custom && sb->reach_custom;
    agg_t a;
    agg_init(&a, s, r->by, sa->nsites + sb->nsites, 1, rows_lost(s, r));
    /* B first, so rows show the newer stack (both are equal anyway) */
    for (int pass = 0; pass < 2; pass++) {
        const ht_tsnapshot_t *sn = pass ? sa : sb;
        uint32_t in = pass ? 0 : ib;
        for (size_t i = 0; i < sn->nsites; i++) {
            const ht_tsite_t *site = &sn->sites[i];
            if (!site->live_bytes && !site->live_blocks && !site->total_blocks)
                continue;
            /* --peak: what the site held at the peak */
            int64_t bytes = (int64_t)(peak ? site->at_peak_bytes : site->live_bytes);
            int64_t blocks = (int64_t)(peak ? site->at_peak_blocks : site->live_blocks);
            if (suppressed(s, r, in, site->stack, site->kind, !pass, bytes, blocks))
                continue;
            probe_t p;
            probe_make(&a, &p, in, site->stack, site->kind);
            ht_row_t *row = agg_row(&a, &p, 1);
            int64_t sign = pass ? -1 : 1;
            if (pass) {
                row->x->a_bytes += bytes;
                row->x->a_blocks += blocks;
            } else {
                row_note(row, &p, bytes);
                row->x->b_bytes += bytes;
                row->x->b_blocks += blocks;
                row->peak_bytes += (int64_t)site->peak_bytes;
            }
            row->alloc_bytes += sign * (int64_t)site->total_bytes;
            row->alloc_blocks += sign * (int64_t)site->total_blocks;
            if (row->lost)
                add_lost_signed(r, row->lost, site, sign);
            if (r->reach == HT_REACH_DONE)
                add_reach_to(r, pass, site, (int64_t)site->live_bytes, (int64_t)site->live_blocks);
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < a.nrows; i++) {
        ht_row_t *row = &a.rows[i];
        row->bytes = row->x->b_bytes - row->x->a_bytes;
        row->blocks = row->x->b_blocks - row->x->a_blocks;
        int custom = row->kind == HT_KIND_CUSTOM;   /* kept apart from the totals */
        *(custom ? &r->custom_a_bytes : &r->total_a_bytes) += row->x->a_bytes;
        *(custom ? &r->custom_a_blocks : &r->total_a_blocks) += row->x->a_blocks;
        *(custom ? &r->custom_b_bytes : &r->total_b_bytes) += row->x->b_bytes;
        *(custom ? &r->custom_b_blocks : &r->total_b_blocks) += row->x->b_blocks;
        if (!row->bytes && !row->blocks && !(row->lost && reach_changed(row->lost)))
            continue;
        if (!row->nstacks)
            row->nstacks = 1;
        if (custom)
            r->custom_sites += row->nstacks;
        a.rows[k++] = *row;
    }
    a.nrows = k;
    r->total_bytes = r->total_b_bytes - r->total_a_bytes;
    r->total_blocks = r->total_b_blocks - r->total_a_blocks;
    r->custom_bytes = r->custom_b_bytes - r->custom_a_bytes;
    r->custom_blocks = r->custom_b_blocks - r->custom_a_blocks;
    free(a.slots);
    a.slots = NULL;
    sort_rows(&a, RANK_BYTES);
    finish_rows(r, &a);
    return 0;
}

/*----------------------------------------------------------------- growth */

/* Growth follows every snapshot's live figures through a view of the
 * current one: from its changes when the reader gave them (it keeps only
 * the last snapshot's sites then), else from its sites. Returns the
 * snapshot's site count; cur holds at least that many. */
typedef struct {
    ht_tchange_t *cur;
    size_t cap;
} view_t;

static size_t view_step(view_t *v, const ht_tsnapshot_t *sn)
{
    if (v->cap < sn->nsites) {
        v->cur = ht__xrealloc(v->cur, sn->nsites * sizeof *v->cur);
        v->cap = sn->nsites;
    }
    if (sn->changes) {
        for (size_t i = 0; i < sn->nchanges; i++)
            if (sn->changes[i].pos < sn->nsites)
                v->cur[sn->changes[i].pos] = sn->changes[i];
    } else {
        for (size_t i = 0; i < sn->nsites; i++)
            v->cur[i] = ht_tsite_change(&sn->sites[i], i);
    }
    return sn->nsites;
}

int ht__growth_build(ht_session_t *s, ht_report_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const ht_trace_t *t = s->in[0].t;
    if (t->nsnaps < 2) {
        snprintf(err, errlen, "%s: growth needs at least 2 snapshots, the trace has %zu "
                 "(record with heaptrail run --interval)", s->in[0].name, t->nsnaps);
        return -1;
    }
    r->ses = s;
    r->type = HT_REPORT_GROWTH;
    r->by = s->opts ? s->opts->by : HT_BY_STACK;
    r->snap_a = &t->snaps[0];
    r->snap_b = &t->snaps[t->nsnaps - 1];
    r->timeline = t;
    r->nsnaps = (uint32_t)t->nsnaps;
    size_t maxrows = 0;
    for (size_t k = 0; k < t->nsnaps; k++)
        maxrows = t->snaps[k].nsites > maxrows ? t->snaps[k].nsites : maxrows;
    /* sites stay listed once seen, so the last snapshots hold them all;
     * rows beyond that would come from sites that vanished (not expected) */
    agg_t a;
    agg_init(&a, s, r->by, maxrows * 2, 1, 0);
    ht_progress_t pr;
    ht__progress_init(&pr, s, "following snapshots");
    view_t v = { 0 };
    for (size_t k = 0; k < t->nsnaps; k++) {
        const ht_tsnapshot_t *sn = &t->snaps[k];
        ht__progress_step(&pr, k * 4096, t->nsnaps * 4096);
        size_t nsites = view_step(&v, sn);
        for (size_t i = 0; i < nsites; i++) {
            const ht_tchange_t *site = &v.cur[i];
            if (!site->live_bytes && !site->live_blocks)
                continue;
            if (suppressed(s, r, 0, site->stack, site->kind, k == t->nsnaps - 1, (int64_t)site->live_bytes,
                           (int64_t)site->live_blocks))
                continue;
            probe_t p;
            probe_make(&a, &p, 0, site->stack, site->kind);
            ht_row_t *row = agg_row(&a, &p, 1);
            if (!row)
                continue;   /* more rows than agg_init allowed for: not expected */
            ht_rowx_t *x = row->x;
            if (k == t->nsnaps - 1)
                row_note(row, &p, (int64_t)site->live_bytes);
            if (x->g_first < 0)
                x->g_first = (int32_t)k;
            x->g_cur += (int64_t)site->live_bytes;
            if (k == 0) {
                x->a_bytes += (int64_t)site->live_bytes;
                x->a_blocks += (int64_t)site->live_blocks;
            }
            if (k == t->nsnaps - 1) {   /* the last snapshot's sites are kept */
                x->b_bytes += (int64_t)site->live_bytes;
                x->b_blocks += (int64_t)site->live_blocks;
                row->alloc_bytes += (int64_t)sn->sites[i].total_bytes;
                row->alloc_blocks += (int64_t)sn->sites[i].total_blocks;
                row->peak_bytes += (int64_t)sn->sites[i].peak_bytes;
            }
        }
        /* every row moves from its previous value to g_cur (0 if absent) */
        for (size_t i = 0; i < a.nrows; i++) {
            ht_rowx_t *x = &a.xs[i];
            if (x->g_first < 0)
                continue;
            if (k > 0) {    /* a stack's appearance counts as a step up */
                if (x->g_cur > x->g_prev)
                    x->ups++;
                else if (x->g_cur < x->g_prev)
                    x->downs++;
            }
            x->g_prev = x->g_cur;
            x->g_cur = 0;
        }
    }
    ht__progress_end(&pr);
    size_t kept = 0;
    for (size_t i = 0; i < a.nrows; i++) {
        ht_row_t *row = &a.rows[i];
        ht_rowx_t *x = row->x;
        row->bytes = x->b_bytes - x->a_bytes;
        row->blocks = x->b_blocks - x->a_blocks;
        /* steady growth: up in at least 2 intervals (1 with 2 snapshots),
         * more ups than downs, and a net gain */
        x->intervals = (uint32_t)t->nsnaps - 1;
        uint32_t need = x->intervals < 2 ? x->intervals : 2;
        if (row->bytes <= 0 || x->ups < need || x->ups <= x->downs)
            continue;
        x->steadiness = (double)((int64_t)x->ups - (int64_t)x->downs) / x->intervals;
        if (row->kind == HT_KIND_CUSTOM) {     /* kept apart from the totals */
            r->custom_bytes += row->bytes;
            r->custom_blocks += row->blocks;
            r->custom_sites += row->nstacks;
        } else {
            r->total_bytes += row->bytes;
            r->total_blocks += row->blocks;
        }
        a.rows[kept++] = *row;
    }
    a.nrows = kept;
    free(a.slots);
    a.slots = NULL;
    sort_rows(&a, RANK_STEADY);
    finish_rows(r, &a);
    /* the series of the rows shown, from a second pass over the snapshots */
    agg_t b = { .s = s, .by = r->by, .rows = r->rows, .nrows = r->nshown, .cap = r->nshown };
    size_t ns = 1024;
    while (ns < r->nshown * 2 + 2)
        ns *= 2;
    agg_rehash(&b, ns);
    for (size_t i = 0; i < r->nshown; i++)
        r->rows[i].x->series = ht__xcalloc(t->nsnaps, sizeof(int64_t));
    for (size_t k = 0; k < t->nsnaps; k++) {
        size_t nsites = view_step(&v, &t->snaps[k]);
        for (size_t i = 0; i < nsites; i++) {
            const ht_tchange_t *site = &v.cur[i];
            if (!site->live_bytes || suppressed(s, r, 0, site->stack, site->kind, 0, 0, 0))
                continue;
            probe_t p;
            probe_make(&b, &p, 0, site->stack, site->kind);
            ht_row_t *row = agg_row(&b, &p, 0);
            if (row)
                row->x->series[k] += (int64_t)site->live_bytes;
        }
    }
    free(v.cur);
    free(b.slots);
    return 0;
}

void ht__report_free(ht_report_t *r)
{
    for (size_t i = 0; i < r->nrows; i++)
        if (r->rows[i].x)
            free(r->rows[i].x->series);
    free(r->rows);
    free(r->xs);
    free(r->losts);
    memset(r, 0, sizeof *r);
}

/*----------------------------------------------------------------- frames */


size_t ht__row_frames(const ht_report_t *r, const ht_row_t *row, ht_rframe_t **buf, size_t *cap)
{
    const ht_session_t *s = r->ses;
    const ht_input_t *in = &s->in[row->input];
    size_t n = 0;
    int32_t left = row->max_nodes;
    for (uint32_t node = row->node; node && left != 0; left--) {
        uint32_t m = ht__node_mod(in, node);
        uint64_t rel = ht__node_rel(in, node), addr = in->t->nodes[node].addr;
        const ht_sloc_t *l = m != HT_NOMOD ? ht__sym_lookup(s->sym, m, rel, 0) : NULL;
        uint32_t k = l && l->n ? l->n : 1;
        HT_GROW(*buf, *cap, n + k);
        for (uint32_t i = 0; i < k; i++)
            (*buf)[n++] = (ht_rframe_t){ addr, m, rel, l && l->n ? &l->f[i] : NULL,
                                         m == HT_NOMOD ? ht__node_jit(in, node) : NULL };
        uint32_t p = in->t->nodes[node].parent;
        node = p < node ? p : 0;
    }
    return n;
}

int ht__render(const ht_report_t *r, int format, FILE *f)
{
    switch (format) {
    case HT_FMT_JSON: return ht__render_json(r, f);
    case HT_FMT_FOLDED: return ht__render_folded(r, f);
    case HT_FMT_PPROF: return ht__render_pprof(r, f);
    case HT_FMT_HTML: return ht__render_html(r, f);
    case HT_FMT_SUPP: return ht__render_supp(r, f);
    default: return ht__render_text(r, f);
    }
}
