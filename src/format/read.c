/* read.c -- ht_trace_read(): a trace file (docs/format.md) into the model
 * of trace.h.
 *
 * Hostile input is the normal case here: every length is checked against
 * what remains before it is used, every count against the bytes that would
 * have to hold it, every id against what was read before it; a block must
 * pass its header and payload checksums before it is decoded, and decoded
 * sizes are capped (HT_BLOCK_MAX_RAW, HT_BLOCK_MAX_RATIO), so memory stays
 * proportional to the file and the work to its size. The first damaged or
 * incomplete block ends the read: everything before it is kept, and the
 * trace is marked truncated at that block's offset. A snapshot is kept
 * only once its end record has been read.
 *
 * CLI side only: uses malloc and stdio, never runs inside a traced process. */
#include "trace.h"
#include "wire.h"
#include "heaptrail.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define MAX_FILE_BYTES (1ull << 36)     /* 64 GiB: larger files are refused */
#define MAX_MODULE_ID  65536u

/* A fuzzing build skips the checksums so mutations reach the decoders
 * (the libFuzzer convention's macro). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CHECKSUMS 0
#else
#define CHECKSUMS 1
#endif

typedef struct {
    ht_trace_t *t;
    const char *name;
    char *err;
    size_t errlen;
    uint64_t block_off;         /* file offset of the block being decoded */
    /* growable arrays' capacities */
    size_t cap_modules, cap_nodes, cap_snaps, cap_jit;
    int32_t *mod_index;         /* file module id -> index in t->modules, -1 */
    size_t cap_mod_index;
    uint32_t *loaded;           /* indices of loaded modules sorted by start */
    size_t nloaded;
    int loaded_dirty;
    int have_process;
    /* the snapshot being assembled; its sites are cur[0, snap.nsites):
     * the list the last snapshot left (version 2 snapshots list changes
     * to it), changed by this one's records */
    int pending;
    ht_tsnapshot_t snap;
    uint64_t snap_seq;
    ht_tsite_t *cur;
    size_t cap_cur;
    int list;                   /* how the pending snapshot lists its sites:
                                   0 not yet, 1 SITES (whole), 2 SITE_DELTA */
    uint64_t base;              /* its SITE_DELTA records' base */
    int last_ok;                /* cur[0, nlast) holds the last snapshot's sites */
    size_t nlast;
    int peak_rel;               /* its PEAK_DELTA records' mode (-1: none yet) */
    uint32_t *peak_mark;        /* per position: peak_gen if named by one */
    size_t cap_mark;
    uint32_t peak_gen;
    size_t cap_seen;            /* t->node_seen_ns's capacity */
    ht_tchange_t *prev;         /* with opts->changes: the last snapshot's */
    size_t nprev, cap_prev;     /* sites' live figures, by position */
    const ht_read_opts_t *opts; /* which snapshots keep their sites; NULL: all */
} rd_t;

static void set_err(rd_t *r, uint64_t off, const char *fmt, ...)
{
    if (!r->err || !r->errlen)
        return;
    int n = snprintf(r->err, r->errlen, "%s: offset %llu: ", r->name, (unsigned long long)off);
    if (n < 0 || (size_t)n >= r->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Grows *arr to hold at least `need` elements of `size` bytes. */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / size)
            return -1;
        c *= 2;
    }
    void *p = realloc(*arr, c * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

/* ---- record body cursor ---------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
    int bad;
} cur_t;

static uint64_t get(cur_t *c)
{
    uint64_t v = 0;
    if (c->bad || ht_get_varint(&c->p, c->end, &v) != 0) {
        c->bad = 1;
        return 0;
    }
    return v;
}

/* A length-prefixed string, copied and NUL-terminated (embedded NULs are
 * kept as bytes but end the C string early). */
static char *get_str(cur_t *c, size_t max, size_t *len_out)
{
    uint64_t n = get(c);
    if (c->bad || n > max || n > (uint64_t)(c->end - c->p)) {
        c->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        c->bad = 1;
        return NULL;
    }
    memcpy(s, c->p, (size_t)n);
    s[n] = 0;
    c->p += n;
    if (len_out)
        *len_out = (size_t)n;
    return s;
}

/* ---- records ----------------------------------------------------------- */

static int rec_process(rd_t *r, cur_t *c)
{
    uint64_t pid = get(c);
    (void)get(c);               /* ppid */
    uint64_t rt = get(c);
    size_t clen = 0;
    char *exe = get_str(c, 1u << 16, NULL);
    char *cmd = get_str(c, 1u << 20, &clen);
    /* appended later: allocator functions the agent did not intercept */
    uint64_t foreign = 0, attached = 0, sample = 0;
    char *fmod = NULL;
    if (!c->bad && c->p < c->end) {
        foreign = get(c);
        fmod = get_str(c, 1u << 16, NULL);
    }
    if (!c->bad && c->p < c->end)   /* appended later: heaptrail attach */
        attached = get(c);
    if (!c->bad && c->p < c->end)   /* appended later: sampling mode */
        sample = get(c);
    if (c->bad) {
        free(exe);
        free(cmd);
        free(fmod);
        return -1;
    }
    if (r->have_process) {      /* only the first one counts */
        free(exe);
        free(cmd);
        free(fmod);
        return 0;
    }
    r->t->foreign = (uint32_t)(foreign & ((1ull << HT_FOREIGN_COUNT) - 1));
    r->t->attached = attached != 0;
    r->t->sample = sample;
    if (r->t->foreign)
        r->t->foreign_module = fmod;
    else
        free(fmod);
    for (size_t i = 0; i < clen; i++)
        if (cmd[i] == 0)
            cmd[i] = ' ';
    while (clen > 0 && cmd[clen - 1] == ' ')
        cmd[--clen] = 0;
    r->t->pid = (int64_t)pid;
    r->t->start_realtime_ns = rt;
    r->t->exe = exe;
    r->t->cmdline = cmd;
    r->have_process = 1;
    return 0;
}

static int rec_module(rd_t *r, cur_t *c)
{
    ht_tmodule_t m;
    memset(&m, 0, sizeof m);
    uint64_t id = get(c);
    m.load_ns = get(c);
    m.start = get(c);
    m.end = get(c);
    m.bias = get(c);
    size_t bl = 0;
    m.path = get_str(c, 1u << 16, NULL);
    char *bid = get_str(c, 64, &bl);
    if (c->bad || id >= MAX_MODULE_ID || m.end < m.start) {
        free(m.path);
        free(bid);
        return -1;
    }
    memcpy(m.build_id, bid, bl);
    m.build_id_len = (uint32_t)bl;
    free(bid);
    ht_trace_t *t = r->t;
    size_t old_cap = r->cap_mod_index;
    if (grow((void **)&r->mod_index, &r->cap_mod_index, (size_t)id + 1, sizeof(int32_t)) != 0 ||
        grow((void **)&t->modules, &r->cap_modules, t->nmodules + 1, sizeof m) != 0) {
        free(m.path);
        return -1;
    }
    memset(r->mod_index + old_cap, 0xff, (r->cap_mod_index - old_cap) * sizeof(int32_t));
    r->mod_index[id] = (int32_t)t->nmodules;
    t->modules[t->nmodules++] = m;
    r->loaded_dirty = 1;
    return 0;
}

static int rec_unload(rd_t *r, cur_t *c)
{
    uint64_t id = get(c), ns = get(c);
    if (c->bad || id >= r->cap_mod_index || r->mod_index[id] < 0)
        return -1;
    ht_tmodule_t *m = &r->t->modules[r->mod_index[id]];
    m->unload_ns = ns ? ns : 1;
    r->loaded_dirty = 1;
    return 0;
}

static const ht_tmodule_t *g_sort_mods;
static int by_start(const void *a, const void *b)
{
    uint64_t x = g_sort_mods[*(const uint32_t *)a].start, y = g_sort_mods[*(const uint32_t *)b].start;
    return x < y ? -1 : x > y;
}

/* The module a node's address belongs to: a loaded one covering it (the
 * latest loaded if several claim it), else the latest unloaded one. */
static uint32_t module_of(rd_t *r, uint64_t addr)
{
    ht_trace_t *t = r->t;
    if (r->loaded_dirty) {
        uint32_t *l = realloc(r->loaded, (t->nmodules + 1) * sizeof *l);
        if (!l)
            return UINT32_MAX;
        r->loaded = l;
        r->nloaded = 0;
        for (size_t i = 0; i < t->nmodules; i++)
            if (!t->modules[i].unload_ns)
                l[r->nloaded++] = (uint32_t)i;
        g_sort_mods = t->modules;
        qsort(l, r->nloaded, sizeof *l, by_start);
        r->loaded_dirty = 0;
    }
    uint64_t a = addr ? addr - 1 : 0;
    /* last loaded module with start <= a */
    size_t lo = 0, hi = r->nloaded;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->modules[r->loaded[mid]].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t best = UINT32_MAX;
    for (size_t k = lo; k-- > 0;) {
        const ht_tmodule_t *m = &t->modules[r->loaded[k]];
        if (a >= m->start && a < m->end && (best == UINT32_MAX || r->loaded[k] > best))
            best = r->loaded[k];
        if (k + 8 < lo)         /* overlapping spans are rare and near */
            break;
    }
    if (best != UINT32_MAX)
        return best;
    for (size_t i = t->nmodules; i-- > 0;) {
        const ht_tmodule_t *m = &t->modules[i];
        if (m->unload_ns && a >= m->start && a < m->end)
            return (uint32_t)i;
    }
    return UINT32_MAX;
}

static int rec_nodes(rd_t *r, cur_t *c)
{
    ht_trace_t *t = r->t;
    uint64_t first = get(c), n = get(c);
    if (c->bad || first > t->nnodes || n > (uint64_t)(c->end - c->p) / 2 ||
        first + n > (uint64_t)UINT32_MAX)
        return -1;
    if (grow((void **)&t->nodes, &r->cap_nodes, (size_t)(first + n), sizeof(ht_tnode_t)) != 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = first + i, delta = get(c), addr = get(c);
        if (c->bad || delta == 0 || delta > id)
            return -1;
        if (id < t->nnodes)
            continue;           /* sent before: the first copy stands */
        ht_tnode_t *nd = &t->nodes[id];
        nd->parent = (uint32_t)(id - delta);
        nd->addr = addr;
        nd->module = module_of(r, addr);
        t->nnodes = (size_t)id + 1;
    }
    return 0;
}

static void drop_pending(rd_t *r)
{
    if (r->pending && r->list)
        r->last_ok = 0;         /* cur is half changed */
    memset(&r->snap, 0, sizeof r->snap);
    r->pending = 0;
}

static int rec_snap_begin(rd_t *r, cur_t *c)
{
    drop_pending(r);
    ht_tsnapshot_t *s = &r->snap;
    r->snap_seq = get(c);
    uint64_t reason = get(c);
    s->time_ns = get(c);
    s->live_blocks = get(c);
    s->live_bytes = get(c);
    s->total_blocks = get(c);
    s->total_bytes = get(c);
    s->total_frees = get(c);
    s->peak_bytes = get(c);
    s->peak_blocks = get(c);
    s->peak_ns = !c->bad && c->p < c->end ? get(c) : 0;
    if (c->bad || reason > 255)
        return -1;
    s->reason = (uint8_t)reason;
    r->pending = 1;
    r->list = 0;
    r->peak_rel = -1;
    r->peak_gen++;
    return 0;
}

/* Room for n sites in cur (and their peak marks). */
static int grow_cur(rd_t *r, size_t n)
{
    if (grow((void **)&r->cur, &r->cap_cur, n, sizeof(ht_tsite_t)) != 0 ||
        grow((void **)&r->peak_mark, &r->cap_mark, n, sizeof(uint32_t)) != 0)
        return -1;
    r->snap.sites = r->cur;
    return 0;
}

/* A site appended to the pending snapshot's list, zeroed. A kind this
 * reader does not know, or custom (2) before version 3, is damage: a new
 * kind comes with a new version (docs/format.md, Compatibility). */
static ht_tsite_t *append_site(rd_t *r, uint64_t stack, uint64_t kind)
{
    if (kind > HT_KIND_CUSTOM || (kind == HT_KIND_CUSTOM && r->t->version < 3) ||
        (stack >= r->t->nnodes && stack != 0xffffffffu))
        return NULL;
    ht_tsite_t *x = &r->cur[r->snap.nsites];
    memset(x, 0, sizeof *x);
    r->peak_mark[r->snap.nsites++] = 0;
    x->stack = (uint32_t)stack;
    x->kind = (uint8_t)kind;
    return x;
}

/* A site's figures as SITES and SITE_DELTA give them: live blocks and
 * bytes, total blocks and bytes, peak bytes. */
static void get_figures(cur_t *c, ht_tsite_t *x)
{
    x->live_blocks = get(c);
    x->live_bytes = get(c);
    x->total_blocks = get(c);
    x->total_bytes = get(c);
    x->peak_bytes = get(c);
}

/* SITES (version 1): seq, count, then count sites (stack, kind, live
 * blocks and bytes, total blocks and bytes, peak bytes): the snapshot's
 * whole list, over its SITES records. */
static int rec_sites(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || r->list == 2 || n > (uint64_t)(c->end - c->p) / 7)
        return -1;
    r->list = 1;
    if (grow_cur(r, s->nsites + (size_t)n) != 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t stack = get(c), kind = get(c);
        ht_tsite_t *x = c->bad ? NULL : append_site(r, stack, kind);
        if (!x)
            return -1;
        get_figures(c, x);
    }
    return c->bad ? -1 : 0;
}

/* SITE_DELTA (version 2): seq, base, count, then count entries: pos,
 * (stack, kind when pos is the list's length: a site appended), live
 * blocks and bytes, total blocks and bytes, peak bytes. The snapshot's
 * list starts as the last snapshot's (base: its length) or empty (base
 * 0); sites not named keep their figures, at-peak and temporary counts. */
static int rec_site_delta(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), base = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || r->list == 1 || n > (uint64_t)(c->end - c->p) / 6)
        return -1;
    if (r->list == 0) {
        if (base && (!r->last_ok || base != r->nlast))
            return -1;          /* the list it changes was not read */
        r->list = 2;
        r->base = base;
        if (grow_cur(r, (size_t)base) != 0)
            return -1;
        s->nsites = (size_t)base;
        /* what a snapshot's check found is its own */
        for (size_t i = 0; i < s->nsites; i++) {
            ht_tsite_t *x = &r->cur[i];
            x->lost_blocks = x->lost_bytes = x->ilost_blocks = x->ilost_bytes = 0;
            x->plost_blocks = x->plost_bytes = 0;
        }
    } else if (base != r->base) {
        return -1;
    }
    if (grow_cur(r, s->nsites + (size_t)n) != 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pos = get(c);
        ht_tsite_t *x = NULL;
        if (!c->bad && pos < s->nsites) {
            x = &r->cur[pos];
        } else if (!c->bad && pos == s->nsites) {
            uint64_t stack = get(c), kind = get(c);
            x = c->bad ? NULL : append_site(r, stack, kind);
        }
        if (!x)
            return -1;
        get_figures(c, x);
    }
    return c->bad ? -1 : 0;
}

/* REACH: seq, status, threads, scanned_bytes, time_ns, count, then count
 * entries (position in this snapshot's site list, lost_blocks, lost_bytes,
 * ilost_blocks, ilost_bytes), then (newer agents) flags. Between the
 * snapshot's SITES and SNAP_END. */
static int rec_reach(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), status = get(c), threads = get(c), scanned = get(c), ns = get(c);
    uint64_t n = get(c);
    /* after a POSSIBLE record the check's counts are final: a REACH
     * there could raise a site's lost blocks past what its possibly lost
     * ones leave (the writer puts every REACH first) */
    if (c->bad || !r->pending || seq != r->snap_seq || status == HT_REACH_NONE ||
        status > HT_REACH_YOUNG_CHILD || s->has_possible || n > (uint64_t)(c->end - c->p) / 5)
        return -1;
    s->reach = (uint8_t)status;
    s->reach_threads = threads > UINT32_MAX ? UINT32_MAX : (uint32_t)threads;
    s->reach_roots_bytes = scanned;
    s->reach_ns = ns;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pos = get(c);
        if (c->bad || pos >= s->nsites || status != HT_REACH_DONE)
            return -1;
        ht_tsite_t *x = &s->sites[pos];
        x->lost_blocks = get(c);
        x->lost_bytes = get(c);
        x->ilost_blocks = get(c);
        x->ilost_bytes = get(c);
        /* each alone too: a sum can wrap */
        if (c->bad || x->lost_blocks + x->ilost_blocks > x->live_blocks ||
            x->lost_blocks > x->live_blocks || x->ilost_blocks > x->live_blocks ||
            x->lost_bytes + x->ilost_bytes > x->live_bytes || x->lost_bytes > x->live_bytes ||
            x->ilost_bytes > x->live_bytes)
            return -1;
    }
    /* the flags, appended in the fifty-second session (absent before) */
    if (c->p < c->end) {
        uint64_t flags = get(c);
        if (c->bad)
            return -1;
        if (flags & HT_REACH_F_CUSTOM)
            s->reach_custom = 1;
    }
    return 0;
}

/* PEAK: seq, first, count, then count pairs: the live bytes and blocks at
 * the process's peak of the snapshot's sites [first, first + count), in
 * order. Follows the SITES record that listed them. */
static int rec_peak(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), first = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || first > s->nsites || n > s->nsites - first ||
        n > (uint64_t)(c->end - c->p) / 2)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        s->sites[first + i].at_peak_bytes = get(c);
        s->sites[first + i].at_peak_blocks = get(c);
    }
    if (c->bad)
        return -1;
    s->has_peak = 1;
    return 0;
}

/* PEAK_DELTA (version 2): seq, relative, count, then count triples: a
 * site's position, its live bytes and blocks at the process's peak. With
 * relative 0 the sites no record of the snapshot names had as much live
 * then as now (applied at its end); with 1 they keep the last snapshot's
 * figures. */
static int rec_peak_delta(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), rel = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || r->list != 2 || rel > 1 ||
        (r->peak_rel >= 0 && rel != (uint64_t)r->peak_rel) || n > (uint64_t)(c->end - c->p) / 3)
        return -1;
    r->peak_rel = (int)rel;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pos = get(c), b = get(c), k = get(c);
        if (c->bad || pos >= s->nsites)
            return -1;
        r->cur[pos].at_peak_bytes = b;
        r->cur[pos].at_peak_blocks = k;
        r->peak_mark[pos] = r->peak_gen;
    }
    s->has_peak = 1;
    return 0;
}

/* TEMP: seq, n, then n triples: the position of a site among those the
 * snapshot's records listed so far, its temporary blocks and their bytes.
 * One follows each SITES or SITE_DELTA record; sites it does not name
 * keep what the list started from (none, in a fresh list). */
static int rec_temp(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || n > s->nsites || n > (uint64_t)(c->end - c->p) / 3)
        return -1;
    uint64_t next = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pos = get(c), k = get(c), b = get(c);
        /* increasing in version 1's whole lists */
        if (c->bad || pos >= s->nsites || (r->list == 1 && pos < next) ||
            k > s->sites[pos].total_blocks || b > s->sites[pos].total_bytes)
            return -1;
        s->sites[pos].temp_blocks = k;
        s->sites[pos].temp_bytes = b;
        next = pos + 1;
    }
    s->has_temp = 1;
    return 0;
}

/* POSSIBLE: seq, n, then n triples: a site's position (increasing within
 * the record), its possibly lost blocks and bytes. Only after the REACH
 * records of a computed check of the same snapshot; never more than the
 * site's live blocks and bytes less its lost and indirectly lost ones
 * (rec_reach keeps that difference from wrapping). Its presence says the
 * check counted them (has_possible; an older agent's check left them
 * among the still reachable). */
static int rec_possible(rd_t *r, cur_t *c)
{
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || s->reach != HT_REACH_DONE || n > s->nsites ||
        n > (uint64_t)(c->end - c->p) / 3)
        return -1;
    uint64_t next = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pos = get(c), k = get(c), b = get(c);
        if (c->bad || pos < next || pos >= s->nsites)
            return -1;
        ht_tsite_t *x = &s->sites[pos];
        if (k > x->live_blocks - x->lost_blocks - x->ilost_blocks ||
            b > x->live_bytes - x->lost_bytes - x->ilost_bytes)
            return -1;
        x->plost_blocks = k;
        x->plost_bytes = b;
        next = pos + 1;
    }
    s->has_possible = 1;
    return 0;
}

/* The first snapshot naming each node: the analyzer tells modules that
 * shared addresses over time apart by it. Noted as snapshots arrive, since
 * a read may not keep their sites; node_seen_ns grows with the nodes. */
static int grow_seen(rd_t *r)
{
    ht_trace_t *t = r->t;
    size_t had = r->cap_seen;
    if (grow((void **)&t->node_seen_ns, &r->cap_seen, t->nnodes ? t->nnodes : 1, sizeof(uint64_t)) != 0)
        return -1;
    for (size_t i = had; i < r->cap_seen; i++)
        t->node_seen_ns[i] = UINT64_MAX;
    return 0;
}

/* whether site i differs from the previous snapshot's at its position */
static int changed(const rd_t *r, const ht_tsite_t *x, size_t i)
{
    const ht_tchange_t *p = i < r->nprev ? &r->prev[i] : NULL;
    return !p || p->stack != x->stack || p->kind != x->kind || p->live_blocks != x->live_blocks ||
           p->live_bytes != x->live_bytes;
}

/* With opts->changes: what differs from the previous snapshot. */
static int note_changes(rd_t *r, ht_tsnapshot_t *sn)
{
    if (!r->opts || !r->opts->changes)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < sn->nsites; i++)
        n += changed(r, &sn->sites[i], i);
    if (grow((void **)&r->prev, &r->cap_prev, sn->nsites, sizeof(ht_tchange_t)) != 0)
        return -1;
    sn->changes = malloc((n ? n : 1) * sizeof(ht_tchange_t));
    if (!sn->changes)
        return -1;
    for (size_t i = 0; i < sn->nsites; i++) {
        ht_tchange_t now = ht_tsite_change(&sn->sites[i], i);
        if (changed(r, &sn->sites[i], i))
            sn->changes[sn->nchanges++] = now;
        r->prev[i] = now;
    }
    r->nprev = sn->nsites;
    return 0;
}

/* Whether snapshot d of the n read so far keeps its sites (opts): named
 * by a non-negative index, or, once the read ends (final), by a negative
 * one. */
static int kept(const ht_read_opts_t *o, size_t d, size_t n, int final)
{
    for (size_t i = 0; i < o->nkeep && i < 2; i++)
        if (o->keep[i] >= 0 ? (uint64_t)o->keep[i] == d : final && (uint64_t)-o->keep[i] == n - d)
            return 1;
    return 0;
}

/* Frees the sites of snapshots not kept: as each snapshot arrives, the one
 * that has just left the window of the newest, which a negative index may
 * still name; at the end (final), those of the window. */
static void drop_unkept(rd_t *r, int final)
{
    const ht_read_opts_t *o = r->opts;
    if (!o || !o->nkeep)
        return;
    uint64_t window = 0;
    for (size_t i = 0; i < o->nkeep && i < 2; i++)
        if (o->keep[i] < 0 && (uint64_t)-o->keep[i] > window)
            window = (uint64_t)-o->keep[i];
    ht_trace_t *t = r->t;
    size_t from = t->nsnaps > window ? t->nsnaps - window : 0;
    size_t d = from, to = t->nsnaps;    /* final: the window */
    if (!final) {
        if (!from)
            return;
        d = from - 1;                   /* the one that has just left it */
        to = from;
    }
    for (; d < to; d++)
        if (!kept(o, d, t->nsnaps, final)) {
            free(t->snaps[d].sites);
            t->snaps[d].sites = NULL;
        }
}

static int rec_snap_end(rd_t *r, cur_t *c)
{
    ht_trace_t *t = r->t;
    ht_tsnapshot_t *s = &r->snap;
    uint64_t seq = get(c), n = get(c);
    if (c->bad || !r->pending || seq != r->snap_seq || n != s->nsites)
        return -1;
    if (grow((void **)&t->snaps, &r->cap_snaps, t->nsnaps + 1, sizeof(ht_tsnapshot_t)) != 0)
        return -1;
    if (r->peak_rel == 0)
        for (size_t i = 0; i < s->nsites; i++)
            if (r->peak_mark[i] != r->peak_gen) {
                r->cur[i].at_peak_bytes = r->cur[i].live_bytes;
                r->cur[i].at_peak_blocks = r->cur[i].live_blocks;
            }
    /* the snapshot's own copy of the list (drop_unkept frees those a
     * read does not keep) */
    s->sites = malloc((s->nsites ? s->nsites : 1) * sizeof(ht_tsite_t));
    if (!s->sites)
        return -1;
    if (s->nsites)
        memcpy(s->sites, r->cur, s->nsites * sizeof(ht_tsite_t));
    r->nlast = s->nsites;
    r->last_ok = 1;
    if (grow_seen(r) != 0 || note_changes(r, s) != 0) {
        free(s->sites);
        s->sites = NULL;
        return -1;
    }
    ht_trace_note_seen(t, s, t->node_seen_ns);
    s->seq = (uint32_t)t->nsnaps;
    s->file_seq = seq > UINT32_MAX ? UINT32_MAX : (uint32_t)seq;
    t->snaps[t->nsnaps++] = *s;
    memset(s, 0, sizeof *s);
    r->pending = 0;
    drop_unkept(r, 0);
    return 0;
}

static int rec_drops(rd_t *r, cur_t *c)
{
    ht_tdrops_t d;
    d.overflow_allocs = get(c);
    d.unknown_frees = get(c);
    d.write_errors = get(c);
    d.other = get(c);
    d.reentrant = d.table_full = 0;
    if (!c->bad && c->p < c->end) {
        d.reentrant = get(c);
        d.table_full = get(c);
    }
    if (c->bad)
        return -1;
    r->t->drops = d;            /* cumulative: the last one holds */
    return 0;
}

static int rec_jit(rd_t *r, cur_t *c)
{
    ht_tjit_t j;
    memset(&j, 0, sizeof j);
    uint64_t serial = get(c);
    j.start = get(c);
    j.size = get(c);
    j.begin_ns = get(c);
    j.name = get_str(c, 1u << 16, NULL);
    if (c->bad || serial == 0 || serial > 0x7fff) {
        free(j.name);
        return -1;
    }
    j.serial = (uint32_t)serial;
    ht_trace_t *t = r->t;
    if (grow((void **)&t->jit, &r->cap_jit, t->njit + 1, sizeof j) != 0) {
        free(j.name);
        return -1;
    }
    t->jit[t->njit++] = j;
    return 0;
}

/* JIT_NODE: a node whose frame was captured before its JIT code was
 * registered (no serial in its address) and that the agent named later by
 * the registration `serial`: the node gets the serial, as if tagged. */
static int rec_jit_node(rd_t *r, cur_t *c)
{
    uint64_t id = get(c), serial = get(c);
    ht_trace_t *t = r->t;
    if (c->bad || serial == 0 || serial > 0x7fff || id == 0 || id >= t->nnodes)
        return -1;
    uint64_t *a = &t->nodes[id].addr;
    if (t->nodes[id].module == UINT32_MAX && HT_FRAME_JIT_SERIAL(*a) == 0 && *a > 1)
        *a |= serial << 48;
    return 0;
}

/* Decodes one block's records. Returns 0, or -1 at the first bad one. */
static int parse_payload(rd_t *r, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    while (p < end) {
        uint8_t type = *p++;
        uint64_t blen;
        if (ht_get_varint(&p, end, &blen) != 0 || blen > (uint64_t)(end - p)) {
            set_err(r, r->block_off, "record extends past its block");
            return -1;
        }
        cur_t c = { p, p + blen, 0 };
        int rc = 0;
        switch (type) {
        case HT_REC_PROCESS: rc = rec_process(r, &c); break;
        case HT_REC_MODULE: rc = rec_module(r, &c); break;
        case HT_REC_MODULE_UNLOAD: rc = rec_unload(r, &c); break;
        case HT_REC_NODES: rc = rec_nodes(r, &c); break;
        case HT_REC_SNAP_BEGIN: rc = rec_snap_begin(r, &c); break;
        case HT_REC_SITES: rc = rec_sites(r, &c); break;
        case HT_REC_SITE_DELTA: rc = rec_site_delta(r, &c); break;
        case HT_REC_PEAK_DELTA: rc = rec_peak_delta(r, &c); break;
        case HT_REC_PEAK: rc = rec_peak(r, &c); break;
        case HT_REC_TEMP: rc = rec_temp(r, &c); break;
        case HT_REC_POSSIBLE: rc = rec_possible(r, &c); break;
        case HT_REC_SNAP_END: rc = rec_snap_end(r, &c); break;
        case HT_REC_DROPS: rc = rec_drops(r, &c); break;
        case HT_REC_JIT: rc = rec_jit(r, &c); break;
        case HT_REC_JIT_NODE: rc = rec_jit_node(r, &c); break;
        case HT_REC_REACH: rc = rec_reach(r, &c); break;
        case HT_REC_END: {
            (void)get(&c);
            uint64_t lost = get(&c);
            if (!c.bad && lost > r->t->drops.write_errors)
                r->t->drops.write_errors = lost;
            r->t->complete = 1;
            break;
        }
        default: break;         /* unknown: skipped (newer writer) */
        }
        if (rc != 0) {
            set_err(r, r->block_off, "malformed record of type %u", type);
            return -1;
        }
        p += blen;
    }
    return 0;
}

int ht_trace_read_mem(const void *buf, size_t len, const char *name, ht_trace_t *t, char *err,
                      size_t errlen)
{
    return ht_trace_read_mem_opts(buf, len, name, NULL, t, err, errlen);
}

int ht_trace_read_mem_opts(const void *buf, size_t len, const char *name, const ht_read_opts_t *o,
                           ht_trace_t *t, char *err, size_t errlen)
{
    const uint8_t *b = buf;
    rd_t r;
    memset(&r, 0, sizeof r);
    memset(t, 0, sizeof *t);
    r.t = t;
    r.opts = o;
    r.name = name ? name : "trace";
    r.err = err;
    r.errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    if (len < HT_FILE_HEADER_LEN || memcmp(b, HT_FILE_MAGIC, 8) != 0) {
        set_err(&r, 0, "not a heaptrail trace (bad magic)");
        return -1;
    }
    t->version = ht_rd_u32(b + 8);
    if (t->version < 1 || t->version > HT_FORMAT_VERSION) {
        set_err(&r, 8, "unsupported trace version %u (this reader knows 1 to %u)", t->version,
                HT_FORMAT_VERSION);
        return -1;
    }
    t->nodes = malloc(16 * sizeof(ht_tnode_t));
    if (!t->nodes) {
        set_err(&r, 0, "out of memory");
        return -1;
    }
    r.cap_nodes = 16;
    t->nodes[0] = (ht_tnode_t){ .parent = 0, .addr = 0, .module = UINT32_MAX };
    t->nnodes = 1;
    t->pid = -1;

    ZSTD_DCtx *dz = ZSTD_createDCtx();
    if (dz)
        ZSTD_DCtx_setParameter(dz, ZSTD_d_windowLogMax, 25);
    uint8_t *raw = NULL;
    size_t off = HT_FILE_HEADER_LEN;
    while (off < len) {
        r.block_off = off;
        const uint8_t *h = b + off;
        if (len - off < HT_BLOCK_HEADER_LEN) {
            set_err(&r, off, "file ends inside a block header");
            goto cut;
        }
        uint32_t codec = ht_rd_u32(h + 4), stored = ht_rd_u32(h + 8), rawlen = ht_rd_u32(h + 12);
        if (ht_rd_u32(h) != HT_BLOCK_MAGIC || (CHECKSUMS && ht_rd_u32(h + 20) != ht_checksum(h, 20))) {
            set_err(&r, off, "damaged block header");
            goto cut;
        }
        if (stored > len - off - HT_BLOCK_HEADER_LEN) {
            set_err(&r, off, "file ends inside a block (%u of %u bytes present)",
                    (unsigned)(len - off - HT_BLOCK_HEADER_LEN), stored);
            goto cut;
        }
        const uint8_t *payload = h + HT_BLOCK_HEADER_LEN;
        if (CHECKSUMS && ht_rd_u32(h + 16) != ht_checksum(payload, stored)) {
            set_err(&r, off, "block checksum mismatch");
            goto cut;
        }
        if (rawlen > HT_BLOCK_MAX_RAW || (uint64_t)rawlen > (uint64_t)HT_BLOCK_MAX_RATIO * stored + 4096 ||
            codec > HT_CODEC_ZSTD || (codec == HT_CODEC_STORED && stored != rawlen)) {
            set_err(&r, off, "block sizes out of range (codec %u, %u -> %u bytes)", codec, stored,
                    rawlen);
            goto cut;
        }
        const uint8_t *data = payload;
        if (codec == HT_CODEC_ZSTD) {
            free(raw);
            raw = malloc(rawlen ? rawlen : 1);
            if (!raw || !dz) {
                set_err(&r, off, "out of memory");
                goto cut;
            }
            size_t got = ZSTD_decompressDCtx(dz, raw, rawlen, payload, stored);
            if (ZSTD_isError(got) || got != rawlen) {
                set_err(&r, off, "block does not decompress");
                goto cut;
            }
            data = raw;
        }
        if (parse_payload(&r, data, rawlen) != 0)
            goto cut;
        off += HT_BLOCK_HEADER_LEN + stored;
    }
    goto done;
cut:
    t->truncated = 1;
    t->truncated_at = off;
done:
    drop_pending(&r);
    drop_unkept(&r, 1);
    /* node_seen_ns covers every node (those after the last snapshot: none) */
    if (grow_seen(&r) != 0) {
        free(t->node_seen_ns);
        t->node_seen_ns = NULL;
    }
    free(raw);
    ZSTD_freeDCtx(dz);
    free(r.mod_index);
    free(r.loaded);
    free(r.prev);
    free(r.cur);
    free(r.peak_mark);
    return 0;
}

int ht_trace_read(const char *path, ht_trace_t *t, char *err, size_t errlen)
{
    return ht_trace_read_opts(path, NULL, t, err, errlen);
}

int ht_trace_read_opts(const char *path, const ht_read_opts_t *o, ht_trace_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    /* O_NONBLOCK: a FIFO under that name must not hang the open (regular
     * files ignore it); it is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        if (err && errlen)
            snprintf(err, errlen, "%s: too large (%llu bytes)", path, (unsigned long long)st.st_size);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        if (err && errlen)
            snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    while (got < size) {
        ssize_t k = read(fd, buf + got, size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;              /* shrank while we read: take what is there */
        got += (size_t)k;
    }
    close(fd);
    int rc = ht_trace_read_mem_opts(buf, got, path, o, t, err, errlen);
    free(buf);
    return rc;
}

void ht_trace_free(ht_trace_t *t)
{
    for (size_t i = 0; i < t->nmodules; i++)
        free(t->modules[i].path);
    free(t->modules);
    free(t->nodes);
    for (size_t i = 0; i < t->nsnaps; i++) {
        free(t->snaps[i].sites);
        free(t->snaps[i].changes);
    }
    free(t->snaps);
    free(t->node_seen_ns);
    for (size_t i = 0; i < t->njit; i++)
        free(t->jit[i].name);
    free(t->jit);
    free(t->exe);
    free(t->cmdline);
    free(t->foreign_module);
    memset(t, 0, sizeof *t);
}
