/* trace_dump.c -- test helper: reads a trace with ht_trace_read() and
 * prints it in lines that shell tests can check with awk, frames
 * symbolized with libdw (function names, else module+offset).
 *
 *   trace_dump FILE             header, drops, modules, every snapshot,
 *                               the last snapshot's sites
 *   trace_dump FILE --match S [--snapshot N] [--kind K]
 *                               one line: live/total sums over the last
 *                               (or Nth) snapshot's sites whose innermost
 *                               frame (the allocation's caller) contains S
 *                               (S "f;g": the innermost f, the next g), of
 *                               kind K (heap, mmap, custom; default any)
 *   trace_dump FILE --kept      reads FILE again keeping the sites of
 *                               snapshots 1 and -2 only, with changes (as
 *                               growth does), and checks that read against
 *                               the full one: kept sites equal, the others
 *                               dropped, every snapshot's live figures
 *                               rebuilt from the changes equal, nodes'
 *                               first snapshots equal; one line "kept ..."
 * Exit status 1 if the reader fails or (--kept) a check does. */
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/trace.h"

static const char *kind_name(int kind)
{
    return kind == HT_KIND_MMAP ? "mmap" : kind == HT_KIND_CUSTOM ? "custom" : "heap";
}

static Dwfl **g_dwfl;
static Dwfl_Module **g_mod;

static const char *sym(const ht_trace_t *t, uint32_t node, char *buf, size_t cap)
{
    const ht_tnode_t *nd = &t->nodes[node];
    unsigned serial = (unsigned)((nd->addr >> 48) & 0x7fff);
    if (serial) {
        for (size_t i = t->njit; i-- > 0;)
            if (t->jit[i].serial == serial) {
                snprintf(buf, cap, "jit:%s", t->jit[i].name);
                return buf;
            }
    }
    if (nd->module >= t->nmodules) {
        snprintf(buf, cap, "0x%llx", (unsigned long long)nd->addr);
        return buf;
    }
    const ht_tmodule_t *m = &t->modules[nd->module];
    if (!g_dwfl[nd->module]) {
        static char *dip;
        static const Dwfl_Callbacks cb = {
            .find_elf = dwfl_build_id_find_elf,
            .find_debuginfo = dwfl_standard_find_debuginfo,
            .section_address = dwfl_offline_section_address,
            .debuginfo_path = &dip,
        };
        g_dwfl[nd->module] = dwfl_begin(&cb);
        g_mod[nd->module] = dwfl_report_elf(g_dwfl[nd->module], m->path, m->path, -1, m->bias, false);
        dwfl_report_end(g_dwfl[nd->module], NULL, NULL);
    }
    const char *name = g_mod[nd->module] ? dwfl_module_addrname(g_mod[nd->module], nd->addr - 1) : NULL;
    const char *b = strrchr(m->path, '/');
    if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%s+0x%llx", b ? b + 1 : m->path, (unsigned long long)(nd->addr - m->bias));
    return buf;
}

static void frames(const ht_trace_t *t, uint32_t id, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    if (id == 0xffffffffu) {
        snprintf(out, cap, "<overflow>");
        return;
    }
    for (int k = 0; id != 0 && id < t->nnodes && k < 200; k++) {
        char b[512];
        int w = snprintf(out + n, cap - n, "%s%s", n ? ";" : "", sym(t, id, b, sizeof b));
        if (w < 0 || (size_t)w >= cap - n)
            break;
        n += (size_t)w;
        id = t->nodes[id].parent;
    }
}

/* the sites' live bytes at the process's peak, summed (the heap's and
 * the mappings': custom blocks lie inside them) */
static unsigned long long at_peak_sum(const ht_tsnapshot_t *s)
{
    unsigned long long n = 0;
    for (size_t i = 0; i < s->nsites; i++)
        if (s->sites[i].kind != HT_KIND_CUSTOM)
            n += s->sites[i].at_peak_bytes;
    return n;
}

static int same_site(const ht_tsite_t *a, const ht_tsite_t *b)
{
    return a->stack == b->stack && a->kind == b->kind && a->live_blocks == b->live_blocks &&
           a->live_bytes == b->live_bytes && a->total_blocks == b->total_blocks &&
           a->total_bytes == b->total_bytes && a->peak_bytes == b->peak_bytes &&
           a->at_peak_bytes == b->at_peak_bytes && a->at_peak_blocks == b->at_peak_blocks &&
           a->temp_blocks == b->temp_blocks && a->temp_bytes == b->temp_bytes &&
           a->lost_blocks == b->lost_blocks && a->lost_bytes == b->lost_bytes &&
           a->ilost_blocks == b->ilost_blocks && a->ilost_bytes == b->ilost_bytes &&
           a->plost_blocks == b->plost_blocks && a->plost_bytes == b->plost_bytes;
}

/* --kept: the read that keeps two snapshots' sites and lists changes,
 * checked against the full read t */
static int check_kept(const char *path, const ht_trace_t *t)
{
    ht_read_opts_t o = { .nkeep = 2, .keep = { 1, -2 }, .changes = 1 };
    ht_trace_t k;
    char err[512];
    if (ht_trace_read_opts(path, &o, &k, err, sizeof err) != 0) {
        fprintf(stderr, "trace_dump: %s\n", err);
        return 1;
    }
    int bad = 0;
    size_t kept = 0, dropped = 0, changes = 0, rebuilt = 0, seen = 0;
    if (k.nsnaps != t->nsnaps || k.nnodes != t->nnodes) {
        printf("kept: %zu snapshots, %zu nodes; full read: %zu, %zu\n", k.nsnaps, k.nnodes, t->nsnaps, t->nnodes);
        return 1;
    }
    ht_tchange_t *cur = calloc(1, sizeof *cur);
    size_t cap = 0;
    uint64_t *first = malloc((t->nnodes + 1) * sizeof *first);
    for (size_t i = 0; i < t->nnodes; i++)
        first[i] = UINT64_MAX;
    for (size_t n = 0; n < t->nsnaps; n++) {
        const ht_tsnapshot_t *a = &t->snaps[n], *b = &k.snaps[n];
        if (a->nsites != b->nsites || a->live_bytes != b->live_bytes || a->time_ns != b->time_ns) {
            printf("kept: snapshot %zu differs in its figures\n", n);
            bad = 1;
            break;
        }
        int want = n == 1 || n + 2 == t->nsnaps;
        if (want ? b->nsites && !b->sites : b->sites != NULL) {
            printf("kept: snapshot %zu's sites %s\n", n, want ? "dropped" : "kept");
            bad = 1;
        }
        for (size_t i = 0; b->sites && i < a->nsites; i++)
            if (!same_site(&a->sites[i], &b->sites[i])) {
                printf("kept: snapshot %zu site %zu differs\n", n, i);
                bad = 1;
            }
        kept += want;
        dropped += !want;
        if (cap < a->nsites) {
            cur = realloc(cur, a->nsites * sizeof *cur);
            cap = a->nsites;
        }
        for (size_t c = 0; c < b->nchanges; c++)
            if (b->changes[c].pos < a->nsites)
                cur[b->changes[c].pos] = b->changes[c];
        changes += b->nchanges;
        for (size_t i = 0; i < a->nsites; i++) {
            const ht_tsite_t *x = &a->sites[i];
            if (cur[i].pos != i || cur[i].stack != x->stack || cur[i].kind != x->kind ||
                cur[i].live_blocks != x->live_blocks || cur[i].live_bytes != x->live_bytes) {
                printf("kept: snapshot %zu site %zu not rebuilt from the changes\n", n, i);
                bad = 1;
                break;
            }
            rebuilt++;
            for (uint32_t nd = x->stack; nd != 0 && nd < t->nnodes && first[nd] == UINT64_MAX;) {
                first[nd] = a->time_ns;
                uint32_t p = t->nodes[nd].parent;
                nd = p < nd ? p : 0;
            }
        }
        if (bad)
            break;
    }
    for (size_t i = 0; !bad && i < t->nnodes; i++) {
        if (!k.node_seen_ns || k.node_seen_ns[i] != first[i]) {
            printf("kept: node %zu's first snapshot differs\n", i);
            bad = 1;
        }
        seen += first[i] != UINT64_MAX;
    }
    if (!bad)
        printf("kept snapshots=%zu kept=%zu dropped=%zu changes=%zu rebuilt=%zu seen_nodes=%zu ok\n", k.nsnaps, kept,
               dropped, changes, rebuilt, seen);
    free(cur);
    free(first);
    ht_trace_free(&k);
    return bad;
}

static void print_sites(const ht_trace_t *t, const ht_tsnapshot_t *s)
{
    static char buf[1 << 16];
    for (size_t i = 0; i < s->nsites; i++) {
        const ht_tsite_t *x = &s->sites[i];
        frames(t, x->stack, buf, sizeof buf);
        printf("site kind=%s live_blocks=%llu live_bytes=%llu total_blocks=%llu total_bytes=%llu "
               "peak_bytes=%llu lost_blocks=%llu lost_bytes=%llu ilost_blocks=%llu ilost_bytes=%llu "
               "at_peak=%llu at_peak_blocks=%llu temp_blocks=%llu temp_bytes=%llu frames=%s "
               "plost_blocks=%llu plost_bytes=%llu\n",
               kind_name(x->kind), (unsigned long long)x->live_blocks,
               (unsigned long long)x->live_bytes, (unsigned long long)x->total_blocks,
               (unsigned long long)x->total_bytes, (unsigned long long)x->peak_bytes,
               (unsigned long long)x->lost_blocks, (unsigned long long)x->lost_bytes,
               (unsigned long long)x->ilost_blocks, (unsigned long long)x->ilost_bytes,
               (unsigned long long)x->at_peak_bytes, (unsigned long long)x->at_peak_blocks,
               (unsigned long long)x->temp_blocks, (unsigned long long)x->temp_bytes, buf,
               (unsigned long long)x->plost_blocks, (unsigned long long)x->plost_bytes);
    }
}

/* --all: every snapshot and all its sites, without times (which differ
 * between two runs of one program): two traces of a deterministic program
 * run without address randomization compare equal line for line. */
static int dump_all(const ht_trace_t *t)
{
    printf("trace complete=%d truncated=%d snaps=%zu nodes=%zu\n", t->complete, t->truncated, t->nsnaps,
           t->nnodes);
    for (size_t k = 0; k < t->nsnaps; k++) {
        const ht_tsnapshot_t *s = &t->snaps[k];
        printf("snap %u reason=%u live_blocks=%llu live_bytes=%llu total_blocks=%llu total_bytes=%llu "
               "total_frees=%llu sites=%zu reach=%u has_peak=%u has_temp=%u has_possible=%u\n",
               s->seq, s->reason, (unsigned long long)s->live_blocks, (unsigned long long)s->live_bytes,
               (unsigned long long)s->total_blocks, (unsigned long long)s->total_bytes,
               (unsigned long long)s->total_frees, s->nsites, s->reach, s->has_peak, s->has_temp,
               s->has_possible);
        print_sites(t, s);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: trace_dump FILE [--match S [--snapshot N] [--kind K] | --kept | --all]\n");
        return 2;
    }
    ht_trace_t t;
    char err[512];
    if (ht_trace_read(argv[1], &t, err, sizeof err) != 0) {
        fprintf(stderr, "trace_dump: %s\n", err);
        return 1;
    }
    if (argc >= 3 && !strcmp(argv[2], "--kept"))
        return check_kept(argv[1], &t);
    g_dwfl = calloc(t.nmodules + 1, sizeof *g_dwfl);
    g_mod = calloc(t.nmodules + 1, sizeof *g_mod);
    if (argc >= 3 && !strcmp(argv[2], "--all"))
        return dump_all(&t);
    const char *match = argc >= 4 && !strcmp(argv[2], "--match") ? argv[3] : NULL;
    static char buf[1 << 16];
    if (match) {
        unsigned long long lb = 0, lk = 0, tb = 0, tk = 0, sites = 0, all = 0, pk = 0, pn = 0;
        unsigned long long xb = 0, xk = 0, ib = 0, ik = 0, mb = 0, mk = 0, qb = 0, qk = 0;
        size_t at = t.nsnaps - 1;
        const char *kind = NULL;
        for (int a = 4; a + 1 < argc; a += 2) {
            if (!strcmp(argv[a], "--snapshot"))
                at = (size_t)atol(argv[a + 1]);
            else if (!strcmp(argv[a], "--kind"))
                kind = argv[a + 1];
        }
        int depth = 1;          /* frames compared: one more per ';' in S */
        for (const char *c = match; *c; c++)
            depth += *c == ';';
        if (at < t.nsnaps) {
            const ht_tsnapshot_t *s = &t.snaps[at];
            for (size_t i = 0; i < s->nsites; i++) {
                if (kind && strcmp(kind, kind_name(s->sites[i].kind)))
                    continue;
                frames(&t, s->sites[i].stack, buf, sizeof buf);
                char *semi = buf;
                for (int k = 0; k < depth && semi; k++)
                    semi = strchr(semi + (k > 0), ';');
                if (semi)
                    *semi = 0;
                if (!strstr(buf, match))
                    continue;
                lb += s->sites[i].live_bytes;
                lk += s->sites[i].live_blocks;
                tb += s->sites[i].total_bytes;
                tk += s->sites[i].total_blocks;
                sites += s->sites[i].live_blocks > 0;
                xb += s->sites[i].lost_bytes;
                xk += s->sites[i].lost_blocks;
                ib += s->sites[i].ilost_bytes;
                ik += s->sites[i].ilost_blocks;
                pk += s->sites[i].at_peak_bytes;
                pn += s->sites[i].at_peak_blocks;
                mb += s->sites[i].temp_bytes;
                mk += s->sites[i].temp_blocks;
                qk += s->sites[i].plost_blocks;
                qb += s->sites[i].plost_bytes;
                all++;
            }
        }
        printf("match live_bytes=%llu live_blocks=%llu sites=%llu total_bytes=%llu total_blocks=%llu allsites=%llu "
               "lost_bytes=%llu lost_blocks=%llu ilost_bytes=%llu ilost_blocks=%llu at_peak=%llu "
               "at_peak_blocks=%llu temp_blocks=%llu temp_bytes=%llu plost_blocks=%llu plost_bytes=%llu\n",
               lb, lk, sites, tb, tk, all, xb, xk, ib, ik, pk, pn, mk, mb, qk, qb);
        return 0;
    }
    printf("trace pid=%lld complete=%d truncated=%d truncated_at=%llu snaps=%zu nodes=%zu modules=%zu\n",
           (long long)t.pid, t.complete, t.truncated, (unsigned long long)t.truncated_at, t.nsnaps,
           t.nnodes, t.nmodules);
    if (argc >= 3 && !strcmp(argv[2], "--header"))
        return 0;
    if (t.truncated)
        printf("damage %s\n", err);
    printf("drops overflow=%llu unknown_frees=%llu write_errors=%llu other=%llu\n",
           (unsigned long long)t.drops.overflow_allocs, (unsigned long long)t.drops.unknown_frees,
           (unsigned long long)t.drops.write_errors, (unsigned long long)t.drops.other);
    for (size_t i = 0; i < t.nmodules; i++)
        printf("module %zu path=%s start=0x%llx end=0x%llx bias=0x%llx buildid_len=%u unloaded=%d\n", i,
               t.modules[i].path, (unsigned long long)t.modules[i].start,
               (unsigned long long)t.modules[i].end, (unsigned long long)t.modules[i].bias,
               t.modules[i].build_id_len, t.modules[i].unload_ns != 0);
    for (size_t i = 0; i < t.njit; i++)
        printf("jit %zu serial=%u name=%s start=0x%llx size=%llu\n", i, t.jit[i].serial, t.jit[i].name,
               (unsigned long long)t.jit[i].start, (unsigned long long)t.jit[i].size);
    for (size_t k = 0; k < t.nsnaps; k++) {
        const ht_tsnapshot_t *s = &t.snaps[k];
        printf("snap %u reason=%u live_blocks=%llu live_bytes=%llu total_blocks=%llu total_bytes=%llu "
               "total_frees=%llu peak_bytes=%llu peak_blocks=%llu sites=%zu reach=%u reach_threads=%u "
               "reach_scanned=%llu reach_ns=%llu has_peak=%u at_peak=%llu peak_ns=%llu time_ns=%llu has_temp=%u "
               "has_possible=%u reach_custom=%u\n",
               s->seq, s->reason, (unsigned long long)s->live_blocks, (unsigned long long)s->live_bytes,
               (unsigned long long)s->total_blocks, (unsigned long long)s->total_bytes,
               (unsigned long long)s->total_frees, (unsigned long long)s->peak_bytes,
               (unsigned long long)s->peak_blocks, s->nsites, s->reach, s->reach_threads,
               (unsigned long long)s->reach_roots_bytes, (unsigned long long)s->reach_ns, s->has_peak,
               at_peak_sum(s), (unsigned long long)s->peak_ns, (unsigned long long)s->time_ns, s->has_temp,
               s->has_possible, s->reach_custom);
    }
    if (t.nsnaps)
        print_sites(&t, &t.snaps[t.nsnaps - 1]);
    ht_trace_free(&t);
    return 0;
}
