/* render_text.c -- the terminal format: a header, the totals line, then
 * each row with its frames in aligned columns (function, file:line, module).
 * Exact integers, so scripts and tests can read it too. */
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "suppress.h"

static const char *basename_of(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p;
}

/* Prints the frames of a row, columns aligned within the row. */
static void print_frames(const ht_report_t *r, const ht_row_t *row, FILE *f, ht_rframe_t **buf,
                         size_t *cap)
{
    size_t n = ht__row_frames(r, row, buf, cap);
    if (!n && row->node == 0 && row->max_nodes != 0) {
        fputs("    [no stack recorded]\n", f);
        return;
    }
    int wf = 0, wl = 0;
    char loc[64];
    for (size_t i = 0; i < n; i++) {
        const ht_rframe_t *fr = &(*buf)[i];
        const char *name = fr->sf && fr->sf->function ? fr->sf->function : ht__frame_fallback(r, fr);
        int w = (int)strlen(name) + (fr->sf && fr->sf->inlined ? 10 : 0);
        if (w > wf)
            wf = w;
        if (fr->sf && fr->sf->file) {
            int l = snprintf(loc, sizeof loc, "%.40s:%u", basename_of(fr->sf->file), fr->sf->line);
            if (l > wl)
                wl = l;
        }
    }
    if (wf > 60)
        wf = 60;
    for (size_t i = 0; i < n; i++) {
        const ht_rframe_t *fr = &(*buf)[i];
        const char *name = fr->sf && fr->sf->function ? fr->sf->function : ht__frame_fallback(r, fr);
        int inl = fr->sf && fr->sf->inlined;
        const char *mod = fr->mod != HT_NOMOD ? ht__sym_mod(r->ses->sym, fr->mod)->name : "";
        loc[0] = 0;
        if (fr->sf && fr->sf->file)
            snprintf(loc, sizeof loc, "%.40s:%u", basename_of(fr->sf->file), fr->sf->line);
        int pad = wf - (int)strlen(name) - (inl ? 10 : 0);
        ht_buf_t line = { 0 };
        ht__buf_printf(&line, "    %s%s%*s  ", name, inl ? " [inlined]" : "", pad > 0 ? pad : 0, "");
        if (wl)
            ht__buf_printf(&line, "%-*s  ", wl, loc);
        ht__buf_puts(&line, mod);
        while (line.len && line.p[line.len - 1] == ' ')   /* no trailing blanks */
            line.len--;
        fwrite(line.p, 1, line.len, f);
        fputc('\n', f);
        ht__buf_free(&line);
    }
}

/* One group's part of a diff's reachability line, at buf + n (its length
 * so far; returns the new one): the change in unreachable memory
 * (definitely + indirectly lost), each snapshot's figure, and the change
 * split: "unreachable: +700 bytes, +1 block: 3900 bytes in 6 blocks
 * before, 4600 bytes in 7 blocks after (definitely lost: +800 bytes, +2
 * blocks; indirectly lost: -100 bytes, -1 block)", `what` before
 * "unreachable". A part of the split that did not change is left out.
 * When both snapshots counted possibly lost blocks and either had some,
 * the same for them after it: "; possibly lost: +64 bytes, +2 blocks: 0
 * bytes in 0 blocks before, 64 bytes in 2 blocks after". */
static int diff_reach_group(const ht_report_t *r, const char *what, const ht_rowlost_t *a,
                            const ht_rowlost_t *b, char *buf, size_t len, int n)
{
    int64_t ua = a->lost_bytes + a->ilost_bytes, un = a->lost_blocks + a->ilost_blocks;
    int64_t ub = b->lost_bytes + b->ilost_bytes, um = b->lost_blocks + b->ilost_blocks;
    int64_t dl = b->lost_bytes - a->lost_bytes, dln = b->lost_blocks - a->lost_blocks;
    int64_t di = b->ilost_bytes - a->ilost_bytes, din = b->ilost_blocks - a->ilost_blocks;
    if (n < 0 || (size_t)n >= len)
        return n;
    n += snprintf(buf + n, len - (size_t)n, "%sunreachable: %+lld bytes, %+lld %s: %lld bytes in %lld %s before, "
                                            "%lld bytes in %lld %s after",
                  what, (long long)(ub - ua), (long long)(um - un), ht__plural(um - un, "block", "blocks"),
                  (long long)ua, (long long)un, ht__plural(un, "block", "blocks"), (long long)ub,
                  (long long)um, ht__plural(um, "block", "blocks"));
    const char *sep = " (";
    if ((dl || dln) && n > 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, "%sdefinitely lost: %+lld bytes, %+lld %s", sep,
                      (long long)dl, (long long)dln, ht__plural(dln, "block", "blocks"));
        sep = "; ";
    }
    if ((di || din) && n > 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, "%sindirectly lost: %+lld bytes, %+lld %s", sep,
                      (long long)di, (long long)din, ht__plural(din, "block", "blocks"));
        sep = "; ";
    }
    if (sep[0] == ';' && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ")");
    if (r->possible && (a->plost_blocks || a->plost_bytes || b->plost_blocks || b->plost_bytes) && n > 0 &&
        (size_t)n < len) {
        int64_t dp = b->plost_bytes - a->plost_bytes, dpn = b->plost_blocks - a->plost_blocks;
        n += snprintf(buf + n, len - (size_t)n, "; possibly lost: %+lld bytes, %+lld %s: %lld bytes in %lld %s "
                                                "before, %lld bytes in %lld %s after",
                      (long long)dp, (long long)dpn, ht__plural(dpn, "block", "blocks"), (long long)a->plost_bytes,
                      (long long)a->plost_blocks, ht__plural(a->plost_blocks, "block", "blocks"),
                      (long long)b->plost_bytes, (long long)b->plost_blocks,
                      ht__plural(b->plost_blocks, "block", "blocks"));
    }
    return n;
}

/* A diff's reachability line: the heap's group (diff_reach_group), then,
 * when the checks judged custom allocator blocks, theirs in the same
 * words: "; custom allocator blocks unreachable: +400 bytes, ...". */
static const char *diff_reach_summary(const ht_report_t *r, char *buf, size_t len)
{
    int n = diff_reach_group(r, "", &r->total_lost_a, &r->total_lost, buf, len, 0);
    if (ht__custom_verdicts(r))
        diff_reach_group(r, "; custom allocator blocks ", &r->custom_lost_a, &r->custom_lost, buf, len, n);
    return buf;
}

/* One group's part of a report's reachability line, at buf + n (its
 * length so far; returns the new one): "unreachable: 3200 bytes in 7
 * blocks (definitely lost), 2064 bytes in 4 blocks indirectly; possibly
 * lost: ...; still reachable: ...", `what` before "unreachable"; the
 * group's live bytes and blocks less all of l is still reachable (l's
 * plost_* are 0 unless the report's `possible`). */
static int reach_group(const char *what, const ht_rowlost_t *l, int64_t live_bytes, int64_t live_blocks,
                       char *buf, size_t len, int n)
{
    int64_t rb = live_bytes - l->lost_bytes - l->ilost_bytes - l->plost_bytes;
    int64_t rn = live_blocks - l->lost_blocks - l->ilost_blocks - l->plost_blocks;
    if (n < 0 || (size_t)n >= len)
        return n;
    n += snprintf(buf + n, len - (size_t)n, "%sunreachable: %lld bytes in %lld %s (definitely lost)", what,
                  (long long)l->lost_bytes, (long long)l->lost_blocks,
                  ht__plural(l->lost_blocks, "block", "blocks"));
    if ((l->ilost_blocks || l->ilost_bytes) && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", %lld bytes in %lld %s indirectly",
                      (long long)l->ilost_bytes, (long long)l->ilost_blocks,
                      ht__plural(l->ilost_blocks, "block", "blocks"));
    if ((l->plost_blocks || l->plost_bytes) && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "; possibly lost: %lld bytes in %lld %s",
                      (long long)l->plost_bytes, (long long)l->plost_blocks,
                      ht__plural(l->plost_blocks, "block", "blocks"));
    if (n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "; still reachable: %lld bytes in %lld %s",
                      (long long)rb, (long long)rn, ht__plural(rn, "block", "blocks"));
    return n;
}

/* The reachability line of a report with reachability: what was
 * unreachable at the snapshot (exit, or a leak check while the program
 * ran), or why that was not computed; for a diff whose two snapshots
 * have it, how that changed. NULL when it has none. */
const char *ht__reach_summary(const ht_report_t *r, char *buf, size_t len)
{
    if (r->reach == HT_REACH_NONE)
        return NULL;
    if (r->type == HT_REPORT_DIFF)
        return r->reach == HT_REACH_DONE ? diff_reach_summary(r, buf, len) : NULL;
    if (r->reach != HT_REACH_DONE) {
        char why[160];
        snprintf(buf, len, "reachability not computed: %s", ht__reach_why(r->snap_b, why, sizeof why));
        return buf;
    }
    int n = reach_group("", &r->total_lost, r->heap_bytes, r->heap_blocks, buf, len, 0);
    if (ht__custom_verdicts(r))
        reach_group("; custom allocator blocks ", &r->custom_lost, r->custom_bytes, r->custom_blocks, buf, len,
                    n);
    return buf;
}

/* ", definitely lost: ..., indirectly lost: ..., possibly lost: ..."
 * (the parts that are not 0; possibly lost only when the check counted
 * them) or ", still reachable" after a row's bytes in a report with
 * reachability; nothing for mmap rows (never checked), nor for custom
 * rows unless the check judged custom blocks (ht__row_judged). */
static void print_row_lost(const ht_report_t *r, const ht_row_t *row, FILE *f)
{
    const ht_rowlost_t *l = row->lost;
    if (!ht__row_judged(r, row))
        return;
    if (l->lost_blocks || l->lost_bytes)
        fprintf(f, ", definitely lost: %lld bytes in %lld %s", (long long)l->lost_bytes,
                (long long)l->lost_blocks, ht__plural(l->lost_blocks, "block", "blocks"));
    if (l->ilost_blocks || l->ilost_bytes)
        fprintf(f, ", indirectly lost: %lld bytes in %lld %s", (long long)l->ilost_bytes,
                (long long)l->ilost_blocks, ht__plural(l->ilost_blocks, "block", "blocks"));
    if (l->plost_blocks || l->plost_bytes)
        fprintf(f, ", possibly lost: %lld bytes in %lld %s", (long long)l->plost_bytes,
                (long long)l->plost_blocks, ht__plural(l->plost_blocks, "block", "blocks"));
    if (!l->lost_blocks && !l->lost_bytes && !l->ilost_blocks && !l->ilost_bytes && !l->plost_blocks &&
        !l->plost_bytes)
        fputs(", still reachable", f);
}

/* ", unreachable: +200 bytes, +2 blocks" after a diff row's growth, when
 * both snapshots have reachability and the row's unreachable memory
 * (definitely + indirectly lost) changed; then ", possibly lost: -64
 * bytes, -1 block" when both counted those and the row's changed;
 * nothing for mmap rows, nor for custom rows unless both checks judged
 * custom blocks. */
static void print_row_lost_change(const ht_report_t *r, const ht_row_t *row, FILE *f)
{
    const ht_rowlost_t *l = row->lost;
    if (!ht__row_judged(r, row))
        return;
    int64_t b = l->lost_bytes + l->ilost_bytes, n = l->lost_blocks + l->ilost_blocks;
    if (b || n)
        fprintf(f, ", unreachable: %+lld bytes, %+lld %s", (long long)b, (long long)n,
                ht__plural(n, "block", "blocks"));
    if (l->plost_bytes || l->plost_blocks)
        fprintf(f, ", possibly lost: %+lld bytes, %+lld %s", (long long)l->plost_bytes,
                (long long)l->plost_blocks, ht__plural(l->plost_blocks, "block", "blocks"));
}

static void print_snap(FILE *f, const ht_tsnapshot_t *s)
{
    fprintf(f, "snapshot %u (%s) at %.3f s", s->seq, ht__snap_reason(s->reason),
            (double)s->time_ns / 1e9);
}

static void print_trace_notes(const ht_report_t *r, FILE *f)
{
    for (int i = 0; i < r->ses->nin; i++) {
        const ht_input_t *in = &r->ses->in[i];
        const ht_tdrops_t *d = &in->t->drops;
        char fw[640];
        int warn;
        if (ht__foreign_text(in->t, &warn, fw, sizeof fw))
            fprintf(f, "%s: %s\n", warn ? "warning" : "note", fw);
        if (ht__sample_text(in->t, fw, sizeof fw))
            fprintf(f, "note: %s\n", fw);
        if (in->t->truncated)
            fprintf(f, "note: %s is truncated at byte %llu; this is what was read before it\n",
                    in->name, (unsigned long long)in->t->truncated_at);
        else if (!in->t->complete)
            /* no END record: SIGKILL (the OOM killer), a raw exit_group
             * (Go), or a process still running; said, not guessed */
            fprintf(f, "note: %s was cut short: it has no end record (the program was killed, ended "
                       "without exit(), or is still running)\n",
                    in->name);
        if (d->overflow_allocs)
            fprintf(f, "note: %llu allocations found the stack database full and have no stack\n",
                    (unsigned long long)d->overflow_allocs);
        if (in->t->attached && in->t->sample)    /* sampling mode counts no unknown frees */
            fprintf(f, "note: heaptrail attached to this process while it ran: what it allocated before "
                       "is not counted\n");
        else if (in->t->attached)
            fprintf(f, "note: heaptrail attached to this process while it ran: what it allocated before "
                       "is not counted (%llu frees of such blocks were passed through)\n",
                    (unsigned long long)d->unknown_frees);
        if (in->t->attached && (d->write_errors || d->other))
            fprintf(f, "note: the tracker dropped %llu trace bytes to write errors, %llu other events\n",
                    (unsigned long long)d->write_errors, (unsigned long long)d->other);
        else if (!in->t->attached && (d->unknown_frees || d->write_errors || d->other))
            fprintf(f, "note: the tracker dropped %llu unknown frees, %llu trace bytes to write errors, %llu other events\n",
                    (unsigned long long)d->unknown_frees, (unsigned long long)d->write_errors,
                    (unsigned long long)d->other);
        if (d->table_full)
            fprintf(f, "note: %llu allocations were not recorded at all: the tracker could not grow its tables "
                       "(out of memory, or of address space under `ulimit -v`)\n",
                    (unsigned long long)d->table_full);
    }
}

static const char *row_unit(int by)
{
    return by == HT_BY_FUNCTION ? "functions" : by == HT_BY_MODULE ? "modules" : "sites";
}

static void row_group(const ht_report_t *r, const ht_row_t *row, FILE *f)
{
    if (r->by == HT_BY_MODULE)
        fprintf(f, "  %s", basename_of(row->label));
    if (r->by != HT_BY_STACK)
        fprintf(f, "  (%u %s)", row->nstacks, ht__plural(row->nstacks, "stack", "stacks"));
    if (row->kind == HT_KIND_MMAP) {
        /* a mapping left PROT_NONE is address space, not memory: its
         * 0 bytes would otherwise read as a row with nothing in it (in a
         * diff or growth report the bytes are a change, not an amount) */
        int reserved = row->bytes == 0 && row->blocks > 0 && r->type != HT_REPORT_DIFF &&
                       r->type != HT_REPORT_GROWTH;
        fputs(reserved ? "  [mmap, reserved: no accessible pages]" : "  [mmap]", f);
    } else if (row->kind == HT_KIND_CUSTOM) {
        fputs("  [custom]", f);
    }
    fputc('\n', f);
}

static void sparkline(FILE *f, const int64_t *v, uint32_t n)
{
    static const char *bars[] = { "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586",
                                  "\u2587", "\u2588" };
    int64_t max = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i] > max)
            max = v[i];
    /* at most 40 columns: each shows the last snapshot of its bucket */
    uint32_t cols = n < 40 ? n : 40;
    for (uint32_t c = 0; c < cols; c++) {
        uint32_t i = (uint32_t)(((uint64_t)(c + 1) * n) / cols) - 1;
        int b = max > 0 ? (int)((v[i] * 7 + max / 2) / max) : 0;
        fputs(bars[b < 0 ? 0 : b > 7 ? 7 : b], f);
    }
}

int ht__render_text(const ht_report_t *r, FILE *f)
{
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    const char *by = r->by == HT_BY_FUNCTION ? ", by function" : r->by == HT_BY_MODULE ? ", by module" : "";
    size_t nst = r->stack_count;
    const char *name = r->ses->in[r->input_b].name;
    switch (r->type) {
    case HT_REPORT_LEAKS:
    case HT_REPORT_INUSE:
    case HT_REPORT_ALLOCATED:
    case HT_REPORT_PEAK:
    case HT_REPORT_TEMPORARY:
        fprintf(f, "heaptrail report: %s, ", name);
        print_snap(f, r->snap_b);
        fprintf(f, "%s\n", by);
        {
            char line[512];
            fprintf(f, "%s\n", ht__totals_line(r, line, sizeof line));
        }
        {
            char line[1024];
            if (ht__reach_summary(r, line, sizeof line))
                fprintf(f, "%s\n", line);
            /* as the run's summary says it: what the scan could not see */
            if (r->reach == HT_REACH_DONE && r->snap_b && ht__reach_unseen(r->snap_b, line, sizeof line))
                fprintf(f, "%s\n", line);
        }
        break;
    case HT_REPORT_DIFF:
        fprintf(f, "heaptrail diff: %s ", r->ses->in[0].name);
        print_snap(f, r->snap_a);
        fprintf(f, " -> %s ", name);
        print_snap(f, r->snap_b);
        fprintf(f, "%s%s\n", by, r->peak ? ", at each one's peak" : "");
        fprintf(f, "%+lld bytes, %+lld %s%s: %lld bytes in %lld blocks before, %lld bytes in %lld blocks after",
                (long long)r->total_bytes, (long long)r->total_blocks,
                ht__plural(r->total_blocks, "block", "blocks"), r->peak ? " at the peak" : "",
                (long long)r->total_a_bytes, (long long)r->total_a_blocks, (long long)r->total_b_bytes,
                (long long)r->total_b_blocks);
        if (r->peak)
            fprintf(f, " (the peaks: %llu and %llu bytes)", (unsigned long long)r->snap_a->peak_bytes,
                    (unsigned long long)r->snap_b->peak_bytes);
        {
            char cl[256];
            size_t ns = nst - r->custom_sites;  /* custom stacks are counted in their clause */
            fprintf(f, "; %zu %s changed%s\n", ns, ht__plural((int64_t)ns, "stack", "stacks"),
                    ht__custom_change(r, cl, sizeof cl));
        }
        {
            char line[1024];
            if (ht__reach_summary(r, line, sizeof line))
                fprintf(f, "%s\n", line);
        }
        break;
    case HT_REPORT_GROWTH:
        fprintf(f, "heaptrail growth: %s, %u snapshots over %.3f s%s\n", name, r->nsnaps,
                (double)(r->snap_b->time_ns - r->snap_a->time_ns) / 1e9, by);
        {
            char cl[256];
            size_t ns = nst - r->custom_sites;
            fprintf(f, "%zu %s grew, by %lld bytes in %lld %s together%s\n", ns,
                    ht__plural((int64_t)ns, "stack", "stacks"), (long long)r->total_bytes,
                    (long long)r->total_blocks, ht__plural(r->total_blocks, "block", "blocks"),
                    ht__custom_change(r, cl, sizeof cl));
        }
        break;
    }
    print_trace_notes(r, f);
    char sl[256];
    if (ht__supp_line(r, sl, sizeof sl)) {
        const ht_supp_t *sp = r->ses->opts->supp;
        fprintf(f, "%s%s\n", sl, r->supp_sites || r->supp_custom_sites ? ", by" : "");
        for (size_t i = 0; i < sp->n; i++) {
            if (!sp->sites[i] && !sp->custom_sites[i])
                continue;
            fputs("  ", f);
            ht__supp_put_name(f, sp, i);
            fprintf(f, "  %llu %s, %llu bytes in %llu %s",
                    (unsigned long long)sp->sites[i], sp->sites[i] == 1 ? "site" : "sites",
                    (unsigned long long)sp->bytes[i], (unsigned long long)sp->blocks[i],
                    sp->blocks[i] == 1 ? "block" : "blocks");
            if (sp->custom_sites[i])
                fprintf(f, "; custom allocator blocks: %llu %s, %llu bytes in %llu %s",
                        (unsigned long long)sp->custom_sites[i], sp->custom_sites[i] == 1 ? "site" : "sites",
                        (unsigned long long)sp->custom_bytes[i], (unsigned long long)sp->custom_blocks[i],
                        sp->custom_blocks[i] == 1 ? "block" : "blocks");
            fputc('\n', f);
        }
    }
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        fputc('\n', f);
        switch (r->type) {
        case HT_REPORT_LEAKS:
        case HT_REPORT_INUSE:
        case HT_REPORT_ALLOCATED:
            fprintf(f, "#%zu  %lld bytes in %lld %s (%.1f%%)", i + 1, (long long)row->bytes,
                    (long long)row->blocks, ht__plural(row->blocks, "block", "blocks"),
                    ht__row_share(r, row));
            print_row_lost(r, row, f);
            break;
        case HT_REPORT_TEMPORARY:
            fprintf(f, "#%zu  %lld temporary %s (%.1f%%) of %lld from here, %lld bytes", i + 1,
                    (long long)row->blocks, ht__plural(row->blocks, "allocation", "allocations"),
                    ht__row_share(r, row), (long long)row->alloc_blocks, (long long)row->bytes);
            break;
        case HT_REPORT_PEAK:
            fprintf(f, "#%zu  %lld bytes in %lld %s at the peak (%.1f%%)", i + 1, (long long)row->bytes,
                    (long long)row->blocks, ht__plural(row->blocks, "block", "blocks"), ht__row_share(r, row));
            break;
        case HT_REPORT_DIFF:
            fprintf(f, "#%zu  %+lld bytes (%lld - %lld), %+lld %s (%lld - %lld)%s", i + 1,
                    (long long)row->bytes, (long long)row->x->b_bytes, (long long)row->x->a_bytes,
                    (long long)row->blocks, ht__plural(row->blocks, "block", "blocks"),
                    (long long)row->x->b_blocks, (long long)row->x->a_blocks, r->peak ? " at the peak" : "");
            print_row_lost_change(r, row, f);  /* (none with --peak: no reach) */
            break;
        case HT_REPORT_GROWTH:
            fprintf(f, "#%zu  %+lld bytes, %+lld %s, steadiness %d%% (%u up, %u down in %u intervals)  ",
                    i + 1, (long long)row->bytes, (long long)row->blocks,
                    ht__plural(row->blocks, "block", "blocks"), (int)(row->x->steadiness * 100 + 0.5),
                    row->x->ups, row->x->downs, row->x->intervals);
            if (row->x->series)
                sparkline(f, row->x->series, r->nsnaps);
            break;
        }
        row_group(r, row, f);
        print_frames(r, row, f, &buf, &cap);
    }
    if (r->nshown < r->row_count)
        fprintf(f, "\nshown: %zu of %zu %s (--top, --min-bytes)\n", r->nshown, r->row_count,
                row_unit(r->by));
    free(buf);
    return ferror(f) ? -1 : 0;
}
