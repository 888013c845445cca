/* model.c -- the trace -> report layer (see model.h): normalizes stacks,
 * aggregates sites into rows (by stack, function or module), and builds
 * the leak/in-use report, snapshot diffs and growth rankings. Pure: reads
 * only the ht_trace_t values it is given, prints nothing but progress. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model.h"

const char *const ht__default_well_tested[] = {
    "libc.so*", "libc-*.so", "libm.so*", "libstdc++.so*", "libgcc_s.so*",
    "ld-linux*.so*", "ld-*.so*", "libpthread.so*", "libdl.so*",
    "libheaptrail*.so*", NULL
};

/*---------------------------------------------------------------- progress */

typedef struct progress_s {
    const char *what;
    double last;
    int shown, on;
} progress_t;

static void progress_init(progress_t *p, const ht_session_t *s, const char *what)
{
    p->what = what;
    p->last = ht__now();
    p->shown = 0;
    p->on = s->opts && s->opts->progress;
}

static void progress_step(progress_t *p, size_t done, size_t total)
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

static void progress_end(progress_t *p)
{
    if (p->shown)
        fprintf(stderr, "\r%*s\r", 60, "");
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
        free(s->in[i].node_mod);
        free(s->in[i].node_rel);
        free(s->in[i].node_hash);
        free(s->in[i].node_depth);
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
    uint32_t handle;
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

int ht__session_add(ht_session_t *s, const char *name, const ht_trace_t *t)
{
    int idx = s->nin++;
    ht_input_t *in = &s->in[idx];
    memset(in, 0, sizeof *in);
    in->name = name;
    in->t = t;
    size_t nn = t->nnodes ? t->nnodes : 1;
    in->node_mod = ht__xmalloc(nn * sizeof *in->node_mod);
    in->node_rel = ht__xmalloc(nn * sizeof *in->node_rel);
    in->node_hash = ht__xmalloc(nn * sizeof *in->node_hash);
    in->node_depth = ht__xmalloc(nn * sizeof *in->node_depth);

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
        sp[nsp++] = (modspan_t){ m->start, m->end, 0, m->bias, m->load_ns, h };
        tm[i] = sp[nsp - 1];
    }
    qsort(sp, nsp, sizeof *sp, cmp_span);
    for (size_t i = 0; i < nsp; i++)
        sp[i].max_end = i && sp[i - 1].max_end > sp[i].end ? sp[i - 1].max_end : sp[i].end;

    /* first time each node was seen: parents of a site's stack were
     * captured no later than the site */
    uint64_t *seen = ht__xmalloc(nn * sizeof *seen);
    for (size_t i = 0; i < nn; i++)
        seen[i] = UINT64_MAX;
    for (size_t k = 0; k < t->nsnaps; k++) {
        const ht_tsnapshot_t *sn = &t->snaps[k];
        for (size_t j = 0; j < sn->nsites; j++) {
            uint32_t n = sn->sites[j].stack;
            while (n != 0 && n < t->nnodes && seen[n] == UINT64_MAX) {
                seen[n] = sn->time_ns;
                uint32_t p = t->nodes[n].parent;
                n = p < n ? p : 0;
            }
        }
    }
    in->node_mod[0] = HT_NOMOD;
    in->node_rel[0] = 0;
    in->node_hash[0] = 0x6a09e667f3bcc908ull;
    in->node_depth[0] = 0;
    for (size_t i = 1; i < t->nnodes; i++) {
        uint64_t a = t->nodes[i].addr;
        uint32_t p = t->nodes[i].parent < i ? t->nodes[i].parent : 0;
        /* the module the tracker saw at capture time, when it says; else
         * the address ranges (and load times) decide */
        uint32_t mi = t->nodes[i].module;
        const modspan_t *m = mi < t->nmodules && tm[mi].end > a && tm[mi].start <= a
                             ? &tm[mi] : find_span(sp, nsp, a, seen[i]);
        uint64_t fh;
        if (m) {
            in->node_mod[i] = m->handle;
            in->node_rel[i] = a - m->bias;
            fh = ht__mix64((uint64_t)m->handle * 0x9e3779b97f4a7c15ull + (a - m->bias));
        } else {
            in->node_mod[i] = HT_NOMOD;
            in->node_rel[i] = a;
            fh = ht__mix64(a ^ 0x5bd1e995ull);
        }
        in->node_hash[i] = ht__mix64(in->node_hash[p] * 31 + fh);
        in->node_depth[i] = in->node_depth[p] + 1;
    }
    free(seen);
    free(sp);
    free(tm);
    return idx;
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

const char *ht__snap_reason(int reason)
{
    switch (reason) {
    case HT_SNAP_EXIT: return "exit";
    case HT_SNAP_REQUEST: return "request";
    case HT_SNAP_INTERVAL: return "interval";
    case HT_SNAP_API: return "api";
    case HT_SNAP_CRASH: return "crash";
    }
    return "unknown";
}

/*--------------------------------------------------------------- rows */

static uint32_t site_node(const ht_trace_t *t, uint32_t stack)
{
    return stack < t->nnodes ? stack : 0;   /* HT_STACK_ID_OVERFLOW: no stack */
}

static int stacks_equal(const ht_session_t *s, uint32_t ia, uint32_t a, uint32_t ib, uint32_t b)
{
    const ht_input_t *x = &s->in[ia], *y = &s->in[ib];
    if (x->node_depth[a] != y->node_depth[b])
        return 0;
    while (a && b) {
        if (ia == ib && a == b)
            return 1;
        if (x->node_mod[a] != y->node_mod[b] || x->node_rel[a] != y->node_rel[b])
            return 0;
        uint32_t pa = x->t->nodes[a].parent, pb = y->t->nodes[b].parent;
        a = pa < a ? pa : 0;
        b = pb < b ? pb : 0;
    }
    return a == b;
}

/* The origin of a stack: its innermost frame outside the well-tested
 * modules (or its innermost frame when all are well-tested). */
static uint32_t origin_node(const ht_session_t *s, uint32_t input, uint32_t node)
{
    const ht_input_t *in = &s->in[input];
    for (uint32_t n = node; n;) {
        uint32_t m = in->node_mod[n];
        if (m == HT_NOMOD || !ht__sym_mod(s->sym, m)->well_tested)
            return n;
        uint32_t p = in->t->nodes[n].parent;
        n = p < n ? p : 0;
    }
    return node;
}

const char *ht__frame_fallback(const ht_report_t *r, const ht_rframe_t *f)
{
    char buf[600];
    if (f->mod == HT_NOMOD)
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)f->addr);
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
    uint32_t m = in->node_mod[node];
    if (by == HT_BY_MODULE) {
        if (m == HT_NOMOD)
            return ht__pool_intern(pool, "[unknown]", 9, NULL);
        return ht__sym_mod(s->sym, m)->path;
    }
    if (m != HT_NOMOD) {
        const ht_sloc_t *l = ht__sym_lookup(s->sym, m, in->node_rel[node], 0);
        if (l->n && l->f[0].function)
            return l->f[0].function;
    }
    ht_report_t fake = { .ses = s };
    ht_rframe_t f = { in->t->nodes[node].addr, m, in->node_rel[node], NULL };
    return ht__frame_fallback(&fake, &f);
}

typedef struct agg_s {
    ht_session_t *s;
    int by;
    ht_row_t *rows;
    size_t nrows, cap;
    uint32_t *slots;        /* row index + 1 */
    size_t nslots;
} agg_t;

typedef struct probe_s {
    uint32_t input, node;   /* node: the stack, or the origin for groups */
    uint8_t kind;
    const char *label;
    uint64_t key;
} probe_t;

static void probe_make(agg_t *a, probe_t *p, uint32_t input, uint32_t stack, uint8_t kind)
{
    const ht_input_t *in = &a->s->in[input];
    p->input = input;
    p->kind = kind;
    p->node = site_node(in->t, stack);
    p->label = NULL;
    if (a->by == HT_BY_STACK) {
        p->key = ht__mix64(in->node_hash[p->node] + kind);
        return;
    }
    p->node = origin_node(a->s, input, p->node);
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

/* The row for a probe; created (zeroed) when `create`, else NULL if none. */
static ht_row_t *agg_row(agg_t *a, const probe_t *p, int create)
{
    if (!a->nslots || (create && a->nrows * 2 >= a->nslots))
        agg_rehash(a, a->nslots ? a->nslots * 2 : 1024);
    size_t j = p->key & (a->nslots - 1);
    while (a->slots[j]) {
        ht_row_t *r = &a->rows[a->slots[j] - 1];
        if (probe_eq(a, p, r))
            return r;
        j = (j + 1) & (a->nslots - 1);
    }
    if (!create)
        return NULL;
    HT_GROW(a->rows, a->cap, a->nrows + 1);
    ht_row_t *r = &a->rows[a->nrows];
    memset(r, 0, sizeof *r);
    r->input = p->input;
    r->node = p->node;
    r->kind = p->kind;
    r->label = p->label;
    r->key = p->key;
    r->max_nodes = a->by == HT_BY_STACK ? -1 : a->by == HT_BY_FUNCTION ? 1 : 0;
    r->best_bytes = INT64_MIN;
    r->g_first = -1;
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
    r->nrows = a->nrows;
    r->nshown = n;
    free(a->slots);
    a->slots = NULL;
    a->nslots = 0;
}

static int cmp_bytes_desc(const void *x, const void *y)
{
    const ht_row_t *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->blocks != b->blocks)
        return a->blocks > b->blocks ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}

/*----------------------------------------------------------------- report */

int ht__report_build(ht_session_t *s, int64_t snapshot, int in_use, ht_report_t *r,
                     char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const ht_trace_t *t = s->in[0].t;
    const ht_tsnapshot_t *sn = ht__snapshot_pick(t, snapshot);
    if (!sn) {
        if (!t->nsnaps)
            snprintf(err, errlen, "%s: the trace holds no snapshot", s->in[0].name);
        else
            snprintf(err, errlen, "%s: no snapshot %lld (it has %zu: 0..%zu)", s->in[0].name,
                     (long long)snapshot, t->nsnaps, t->nsnaps - 1);
        return -1;
    }
    r->ses = s;
    r->by = s->opts ? s->opts->by : HT_BY_STACK;
    r->type = !in_use && (sn->reason == HT_SNAP_EXIT || sn->reason == HT_SNAP_CRASH)
                  ? HT_REPORT_LEAKS : HT_REPORT_INUSE;
    r->snap_b = sn;
    r->timeline = t;
    agg_t a = { .s = s, .by = r->by };
    progress_t pr;
    progress_init(&pr, s, "grouping sites");
    for (size_t i = 0; i < sn->nsites; i++) {
        const ht_tsite_t *site = &sn->sites[i];
        progress_step(&pr, i, sn->nsites);
        if (!site->live_bytes && !site->live_blocks)
            continue;
        probe_t p;
        probe_make(&a, &p, 0, site->stack, site->kind);
        ht_row_t *row = agg_row(&a, &p, 1);
        row_note(row, &p, (int64_t)site->live_bytes);
        row->bytes += (int64_t)site->live_bytes;
        row->blocks += (int64_t)site->live_blocks;
        row->alloc_bytes += (int64_t)site->total_bytes;
        row->alloc_blocks += (int64_t)site->total_blocks;
        row->peak_bytes += (int64_t)site->peak_bytes;
        r->total_bytes += (int64_t)site->live_bytes;
        r->total_blocks += (int64_t)site->live_blocks;
    }
    progress_end(&pr);
    qsort(a.rows, a.nrows, sizeof *a.rows, cmp_bytes_desc);
    finish_rows(r, &a);
    return 0;
}

/*------------------------------------------------------------------- diff */

int ht__diff_build(ht_session_t *s, int64_t na, int64_t nb, ht_report_t *r, char *err,
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
    r->ses = s;
    r->type = HT_REPORT_DIFF;
    r->by = s->opts ? s->opts->by : HT_BY_STACK;
    r->snap_a = sa;
    r->snap_b = sb;
    r->input_a = 0;
    r->input_b = ib;
    r->timeline = s->in[ib].t;
    agg_t a = { .s = s, .by = r->by };
    /* B first, so rows show the newer stack (both are equal anyway) */
    for (int pass = 0; pass < 2; pass++) {
        const ht_tsnapshot_t *sn = pass ? sa : sb;
        uint32_t in = pass ? 0 : ib;
        for (size_t i = 0; i < sn->nsites; i++) {
            const ht_tsite_t *site = &sn->sites[i];
            if (!site->live_bytes && !site->live_blocks && !site->total_blocks)
                continue;
            probe_t p;
            probe_make(&a, &p, in, site->stack, site->kind);
            ht_row_t *row = agg_row(&a, &p, 1);
            int64_t sign = pass ? -1 : 1;
            if (pass) {
                row->a_bytes += (int64_t)site->live_bytes;
                row->a_blocks += (int64_t)site->live_blocks;
            } else {
                row_note(row, &p, (int64_t)site->live_bytes);
                row->b_bytes += (int64_t)site->live_bytes;
                row->b_blocks += (int64_t)site->live_blocks;
                row->peak_bytes += (int64_t)site->peak_bytes;
            }
            row->alloc_bytes += sign * (int64_t)site->total_bytes;
            row->alloc_blocks += sign * (int64_t)site->total_blocks;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < a.nrows; i++) {
        ht_row_t *row = &a.rows[i];
        row->bytes = row->b_bytes - row->a_bytes;
        row->blocks = row->b_blocks - row->a_blocks;
        r->total_a_bytes += row->a_bytes;
        r->total_a_blocks += row->a_blocks;
        r->total_b_bytes += row->b_bytes;
        r->total_b_blocks += row->b_blocks;
        if (!row->bytes && !row->blocks)
            continue;
        if (!row->nstacks)
            row->nstacks = 1;
        a.rows[k++] = *row;
    }
    a.nrows = k;
    r->total_bytes = r->total_b_bytes - r->total_a_bytes;
    r->total_blocks = r->total_b_blocks - r->total_a_blocks;
    qsort(a.rows, a.nrows, sizeof *a.rows, cmp_bytes_desc);
    finish_rows(r, &a);
    return 0;
}

/*----------------------------------------------------------------- growth */

static int cmp_growth(const void *x, const void *y)
{
    const ht_row_t *a = x, *b = y;
    if (a->steadiness != b->steadiness)
        return a->steadiness > b->steadiness ? -1 : 1;
    return cmp_bytes_desc(x, y);
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
    agg_t a = { .s = s, .by = r->by };
    progress_t pr;
    progress_init(&pr, s, "following snapshots");
    for (size_t k = 0; k < t->nsnaps; k++) {
        const ht_tsnapshot_t *sn = &t->snaps[k];
        progress_step(&pr, k * 4096, t->nsnaps * 4096);
        for (size_t i = 0; i < sn->nsites; i++) {
            const ht_tsite_t *site = &sn->sites[i];
            if (!site->live_bytes && !site->live_blocks)
                continue;
            probe_t p;
            probe_make(&a, &p, 0, site->stack, site->kind);
            ht_row_t *row = agg_row(&a, &p, 1);
            if (k == t->nsnaps - 1)
                row_note(row, &p, (int64_t)site->live_bytes);
            if (row->g_first < 0)
                row->g_first = (int32_t)k;
            row->g_cur += (int64_t)site->live_bytes;
            if (k == 0) {
                row->a_bytes += (int64_t)site->live_bytes;
                row->a_blocks += (int64_t)site->live_blocks;
            }
            if (k == t->nsnaps - 1) {
                row->b_bytes += (int64_t)site->live_bytes;
                row->b_blocks += (int64_t)site->live_blocks;
                row->alloc_bytes += (int64_t)site->total_bytes;
                row->alloc_blocks += (int64_t)site->total_blocks;
                row->peak_bytes += (int64_t)site->peak_bytes;
            }
        }
        /* every row moves from its previous value to g_cur (0 if absent) */
        for (size_t i = 0; i < a.nrows; i++) {
            ht_row_t *row = &a.rows[i];
            if (row->g_first < 0)
                continue;
            if (k > 0) {    /* a stack's appearance counts as a step up */
                if (row->g_cur > row->g_prev)
                    row->ups++;
                else if (row->g_cur < row->g_prev)
                    row->downs++;
            }
            row->g_prev = row->g_cur;
            row->g_cur = 0;
        }
    }
    progress_end(&pr);
    size_t kept = 0;
    for (size_t i = 0; i < a.nrows; i++) {
        ht_row_t *row = &a.rows[i];
        row->bytes = row->b_bytes - row->a_bytes;
        row->blocks = row->b_blocks - row->a_blocks;
        /* steady growth: up in at least 2 intervals (1 with 2 snapshots),
         * more ups than downs, and a net gain */
        row->intervals = (uint32_t)t->nsnaps - 1;
        uint32_t need = row->intervals < 2 ? row->intervals : 2;
        if (row->bytes <= 0 || row->ups < need || row->ups <= row->downs)
            continue;
        row->steadiness = (double)((int64_t)row->ups - (int64_t)row->downs) / row->intervals;
        r->total_bytes += row->bytes;
        r->total_blocks += row->blocks;
        a.rows[kept++] = *row;
    }
    a.nrows = kept;
    qsort(a.rows, a.nrows, sizeof *a.rows, cmp_growth);
    finish_rows(r, &a);
    /* the series of the rows shown, from a second pass over the snapshots */
    agg_t b = { .s = s, .by = r->by, .rows = r->rows, .nrows = r->nshown };
    size_t ns = 1024;
    while (ns < r->nshown * 2 + 2)
        ns *= 2;
    agg_rehash(&b, ns);
    for (size_t i = 0; i < r->nshown; i++)
        r->rows[i].series = ht__xcalloc(t->nsnaps, sizeof(int64_t));
    for (size_t k = 0; k < t->nsnaps; k++) {
        const ht_tsnapshot_t *sn = &t->snaps[k];
        for (size_t i = 0; i < sn->nsites; i++) {
            const ht_tsite_t *site = &sn->sites[i];
            if (!site->live_bytes)
                continue;
            probe_t p;
            probe_make(&b, &p, 0, site->stack, site->kind);
            ht_row_t *row = agg_row(&b, &p, 0);
            if (row)
                row->series[k] += (int64_t)site->live_bytes;
        }
    }
    free(b.slots);
    return 0;
}

void ht__report_free(ht_report_t *r)
{
    for (size_t i = 0; i < r->nrows; i++)
        free(r->rows[i].series);
    free(r->rows);
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
        uint32_t m = in->node_mod[node];
        uint64_t rel = in->node_rel[node], addr = in->t->nodes[node].addr;
        const ht_sloc_t *l = m != HT_NOMOD ? ht__sym_lookup(s->sym, m, rel, 0) : NULL;
        uint32_t k = l && l->n ? l->n : 1;
        HT_GROW(*buf, *cap, n + k);
        for (uint32_t i = 0; i < k; i++)
            (*buf)[n++] = (ht_rframe_t){ addr, m, rel, l && l->n ? &l->f[i] : NULL };
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
    default: return ht__render_text(r, f);
    }
}
