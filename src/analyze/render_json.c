/* render_json.c -- the JSON format, documented in docs/json.md. The same
 * site keys in every command; addresses are hex strings (JSON numbers lose
 * precision above 2^53). Strings from the trace are escaped, including
 * control characters and invalid UTF-8 (replaced by U+FFFD), so the output
 * is always valid JSON. */
#include <stdlib.h>
#include <string.h>
#include "heaptrail.h"
#include "model.h"
#include "suppress.h"

void ht__json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    putc('"', f);
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc((int)c, f);
            p++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            putc((int)c, f);
            p++;
        } else {
            /* validate one UTF-8 sequence */
            int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            int ok = len > 0;
            for (int i = 1; ok && i < len; i++)
                ok = (p[i] & 0xc0) == 0x80;
            if (ok && len == 3 && c == 0xe0 && p[1] < 0xa0)
                ok = 0;
            if (ok && len == 3 && c == 0xed && p[1] >= 0xa0)
                ok = 0;   /* surrogates */
            if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
                ok = 0;
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    putc('"', f);
}

static void json_hex(FILE *f, uint64_t v)
{
    fprintf(f, "\"0x%llx\"", (unsigned long long)v);
}

static void json_snap(FILE *f, const char *trace, const ht_tsnapshot_t *s)
{
    fputs("{\"trace\":", f);
    ht__json_string(f, trace);
    fprintf(f, ",\"seq\":%u,\"reason\":\"%s\",\"time_ns\":%llu,\"live_bytes\":%llu,"
               "\"live_blocks\":%llu,\"total_bytes\":%llu,\"total_blocks\":%llu,"
               "\"peak_bytes\":%llu",
            s->seq, ht__snap_reason(s->reason), (unsigned long long)s->time_ns,
            (unsigned long long)s->live_bytes, (unsigned long long)s->live_blocks,
            (unsigned long long)s->total_bytes, (unsigned long long)s->total_blocks,
            (unsigned long long)s->peak_bytes);
    if (s->has_peak && s->peak_ns)
        fprintf(f, ",\"peak_ns\":%llu", (unsigned long long)s->peak_ns);
    fputc('}', f);
}

void ht__json_frames(const ht_report_t *r, const ht_row_t *row, FILE *f, ht_rframe_t **buf,
                     size_t *cap)
{
    size_t n = ht__row_frames(r, row, buf, cap);
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        const ht_rframe_t *fr = &(*buf)[i];
        const ht_sframe_t *sf = fr->sf;
        fputs(i ? ",{\"address\":" : "{\"address\":", f);
        json_hex(f, HT_FRAME_ADDRESS(fr->addr));
        fputs(",\"module\":", f);
        if (fr->mod == HT_NOMOD) {
            fputs("null,\"offset\":null", f);
        } else {
            ht__json_string(f, ht__sym_mod(r->ses->sym, fr->mod)->path);
            fputs(",\"offset\":", f);
            json_hex(f, fr->rel);
        }
        fputs(",\"function\":", f);
        ht__json_string(f, sf ? sf->function : fr->jit ? fr->jit->name : NULL);
        fputs(",\"file\":", f);
        ht__json_string(f, sf ? sf->file : NULL);
        if (sf && sf->line)
            fprintf(f, ",\"line\":%u", sf->line);
        else
            fputs(",\"line\":null", f);
        fprintf(f, ",\"inline\":%s", sf && sf->inlined ? "true" : "false");
        if (fr->jit)
            fprintf(f, ",\"jit\":true,\"jit_serial\":%u", (unsigned)fr->jit->serial);
        fputc('}', f);
    }
    fputc(']', f);
}

/* One group's verdicts in a snapshot, as keys named `pre` + the key
 * (no braces, no comma around): lost (l), sites with lost blocks,
 * possibly lost (only when `possible`: the check counted them), the
 * group's live bytes and blocks less all of them (l's plost_* are 0 when
 * not `possible`). The heap's keys have no prefix, custom allocator
 * blocks' "custom_". */
static void json_verdicts(FILE *f, const char *pre, const ht_rowlost_t *l, size_t lost_sites, int64_t live_bytes,
                          int64_t live_blocks, int possible)
{
    fprintf(f, "\"%slost_bytes\":%lld,\"%slost_blocks\":%lld,\"%slost_sites\":%zu,"
               "\"%sindirectly_lost_bytes\":%lld,\"%sindirectly_lost_blocks\":%lld",
            pre, (long long)l->lost_bytes, pre, (long long)l->lost_blocks, pre, lost_sites, pre,
            (long long)l->ilost_bytes, pre, (long long)l->ilost_blocks);
    if (possible)
        fprintf(f, ",\"%spossibly_lost_bytes\":%lld,\"%spossibly_lost_blocks\":%lld", pre,
                (long long)l->plost_bytes, pre, (long long)l->plost_blocks);
    fprintf(f, ",\"%sreachable_bytes\":%lld,\"%sreachable_blocks\":%lld", pre,
            (long long)(live_bytes - l->lost_bytes - l->ilost_bytes - l->plost_bytes), pre,
            (long long)(live_blocks - l->lost_blocks - l->ilost_blocks - l->plost_blocks));
}

/* One snapshot's computed reachability totals, as keys (no braces): the
 * heap's verdicts over the live heap (heap_bytes, heap_blocks), then what
 * the scan read and took. */
static void json_reach_totals(FILE *f, const ht_tsnapshot_t *s, const ht_rowlost_t *l, size_t lost_sites,
                              int64_t heap_bytes, int64_t heap_blocks, int possible)
{
    json_verdicts(f, "", l, lost_sites, heap_bytes, heap_blocks, possible);
    fprintf(f, ",\"scanned_bytes\":%llu,\"time_ns\":%llu,\"threads_without_registers\":%u",
            (unsigned long long)s->reach_roots_bytes, (unsigned long long)s->reach_ns, s->reach_threads);
}

/* One group's changes from a to b, as keys named `pre` + the key, each
 * followed by a comma: unreachable (definitely + indirectly lost), lost,
 * indirectly lost, and possibly lost when `possible`. */
static void json_verdict_changes(FILE *f, const char *pre, const ht_rowlost_t *a, const ht_rowlost_t *b,
                                 int possible)
{
    fprintf(f, "\"%sunreachable_bytes\":%lld,\"%sunreachable_blocks\":%lld,"
               "\"%slost_bytes\":%lld,\"%slost_blocks\":%lld,"
               "\"%sindirectly_lost_bytes\":%lld,\"%sindirectly_lost_blocks\":%lld,",
            pre, (long long)(b->lost_bytes + b->ilost_bytes - a->lost_bytes - a->ilost_bytes), pre,
            (long long)(b->lost_blocks + b->ilost_blocks - a->lost_blocks - a->ilost_blocks), pre,
            (long long)(b->lost_bytes - a->lost_bytes), pre, (long long)(b->lost_blocks - a->lost_blocks), pre,
            (long long)(b->ilost_bytes - a->ilost_bytes), pre, (long long)(b->ilost_blocks - a->ilost_blocks));
    if (possible)
        fprintf(f, "\"%spossibly_lost_bytes\":%lld,\"%spossibly_lost_blocks\":%lld,", pre,
                (long long)(b->plost_bytes - a->plost_bytes), pre, (long long)(b->plost_blocks - a->plost_blocks));
}

/* A diff's "reach" (both snapshots computed it): the change in lost,
 * indirectly lost and unreachable (both) memory, after minus before (and
 * in possibly lost memory when both counted it), the same for custom
 * allocator blocks prefixed "custom_" when both checks judged them and
 * the diff has some, then each snapshot's totals as a report's "reach"
 * holds them. */
static void json_diff_reach(const ht_report_t *r, FILE *f)
{
    const ht_rowlost_t *a = &r->total_lost_a, *b = &r->total_lost;
    fprintf(f, ",\"reach\":{\"status\":\"%s\",", ht__reach_name(r->reach));
    json_verdict_changes(f, "", a, b, r->possible);
    /* custom allocator blocks' changes, when both checks judged them */
    int custom = ht__custom_verdicts(r);
    const ht_rowlost_t *ca = &r->custom_lost_a, *cb = &r->custom_lost;
    if (custom)
        json_verdict_changes(f, "custom_", ca, cb, r->possible);
    fputs("\"before\":{", f);
    json_reach_totals(f, r->snap_a, a, r->lost_sites_a, r->heap_a_bytes, r->heap_a_blocks, r->possible);
    if (custom) {
        fputc(',', f);
        json_verdicts(f, "custom_", ca, r->custom_lost_sites_a, r->custom_a_bytes, r->custom_a_blocks, r->possible);
    }
    fputs("},\"after\":{", f);
    json_reach_totals(f, r->snap_b, b, r->lost_sites, r->heap_bytes, r->heap_blocks, r->possible);
    if (custom) {
        fputc(',', f);
        json_verdicts(f, "custom_", cb, r->custom_lost_sites, r->custom_b_bytes, r->custom_b_blocks, r->possible);
    }
    fputs("}}", f);
}

/* "reach": the snapshot's reachability (reports with r->reach: leaks
 * reports, and in-use reports of leak checks made while the program ran):
 * totals when computed (the custom allocator blocks' after the heap's,
 * when the check judged them and the report has some), else why not; a
 * diff's when both its snapshots computed it. */
static void json_reach(const ht_report_t *r, FILE *f)
{
    const ht_tsnapshot_t *s = r->snap_b;
    if (r->type == HT_REPORT_DIFF) {
        json_diff_reach(r, f);
        return;
    }
    fprintf(f, ",\"reach\":{\"status\":\"%s\"", ht__reach_name(r->reach));
    if (r->reach == HT_REACH_DONE) {
        fputc(',', f);
        json_reach_totals(f, s, &r->total_lost, r->lost_sites, r->heap_bytes, r->heap_blocks, r->possible);
        if (ht__custom_verdicts(r)) {
            fputc(',', f);
            json_verdicts(f, "custom_", &r->custom_lost, r->custom_lost_sites, r->custom_bytes, r->custom_blocks,
                          r->possible);
        }
        fputc('}', f);
        return;
    }
    char why[160];
    if (r->reach == HT_REACH_THREADS || r->reach == HT_REACH_WOKE)
        fprintf(f, ",\"threads\":%u", s->reach_threads);
    fputs(",\"reason\":", f);
    ht__json_string(f, ht__reach_why(s, why, sizeof why));
    fputc('}', f);
}

static const char *mode_name(int type)
{
    static const char *n[] = { "leaks", "in_use", "diff", "growth", "allocated", "peak", "temporary" };
    return n[type];
}

int ht__render_json(const ht_report_t *r, FILE *f)
{
    ht_rframe_t *buf = NULL;
    size_t cap = 0, nst = r->stack_count;
    const char *by = r->by == HT_BY_FUNCTION ? "function" : r->by == HT_BY_MODULE ? "module" : "stack";
    fprintf(f, "{\"heaptrail_json\":1,\"command\":\"%s\",\"mode\":\"%s\",\"by\":\"%s\",\"trace\":",
            r->type == HT_REPORT_DIFF ? "diff" : r->type == HT_REPORT_GROWTH ? "growth" : "report",
            mode_name(r->type), by);
    ht__json_string(f, r->ses->in[r->input_b].name);
    if (r->type == HT_REPORT_DIFF || r->type == HT_REPORT_GROWTH) {
        fputs(",\"before\":", f);
        json_snap(f, r->ses->in[r->input_a].name, r->snap_a);
        fputs(",\"after\":", f);
        json_snap(f, r->ses->in[r->input_b].name, r->snap_b);
    } else {
        fputs(",\"snapshot\":", f);
        json_snap(f, r->ses->in[r->input_b].name, r->snap_b);
    }
    if (r->type == HT_REPORT_GROWTH)
        fprintf(f, ",\"snapshots\":%u", r->nsnaps);
    fprintf(f, ",\"leaked_bytes\":%lld,\"leaked_blocks\":%lld", (long long)r->total_bytes,
            (long long)r->total_blocks);
    if (r->type != HT_REPORT_DIFF && r->type != HT_REPORT_GROWTH)
        fprintf(f, ",\"mmap_bytes\":%lld,\"mmap_blocks\":%lld,\"mmap_sites\":%zu", (long long)r->map_bytes,
                (long long)r->map_blocks, r->map_sites);
    /* custom allocator blocks, apart from every figure above (they lie
     * inside them): only when the report has some, as the text's clause */
    char cl[256];
    int diff = r->type == HT_REPORT_DIFF, custom = diff || r->type == HT_REPORT_GROWTH
                                                       ? ht__custom_change(r, cl, sizeof cl)[0] != 0
                                                       : r->custom_sites != 0;
    if (custom)
        fprintf(f, ",\"custom_bytes\":%lld,\"custom_blocks\":%lld,\"custom_sites\":%zu", (long long)r->custom_bytes,
                (long long)r->custom_blocks, r->custom_sites);
    if (diff && custom)
        fprintf(f, ",\"custom_bytes_before\":%lld,\"custom_blocks_before\":%lld,\"custom_bytes_after\":%lld,"
                   "\"custom_blocks_after\":%lld",
                (long long)r->custom_a_bytes, (long long)r->custom_a_blocks, (long long)r->custom_b_bytes,
                (long long)r->custom_b_blocks);
    if (r->type == HT_REPORT_DIFF && r->peak)
        fputs(",\"at_peak\":true", f);
    if (r->type == HT_REPORT_TEMPORARY)
        fprintf(f, ",\"all_allocations\":%lld", (long long)r->all_blocks);
    if (r->type == HT_REPORT_DIFF)
        fprintf(f, ",\"bytes_before\":%lld,\"blocks_before\":%lld,\"bytes_after\":%lld,\"blocks_after\":%lld",
                (long long)r->total_a_bytes, (long long)r->total_a_blocks,
                (long long)r->total_b_bytes, (long long)r->total_b_blocks);
    fprintf(f, ",\"site_count\":%zu,\"row_count\":%zu,\"shown\":%zu", nst, r->row_count, r->nshown);
    const ht_trace_t *t = r->ses->in[r->input_b].t;
    fprintf(f, ",\"truncated\":%s,\"drops\":{\"overflow_allocs\":%llu,\"unknown_frees\":%llu,"
               "\"write_errors\":%llu,\"other\":%llu,\"table_full\":%llu}",
            t->truncated ? "true" : "false", (unsigned long long)t->drops.overflow_allocs,
            (unsigned long long)t->drops.unknown_frees, (unsigned long long)t->drops.write_errors,
            (unsigned long long)t->drops.other, (unsigned long long)t->drops.table_full);
    char fw[640];
    int warn;
    if (t->attached)
        fputs(",\"attached\":true", f);
    if (!t->truncated && !t->complete)      /* no END record: killed, or still running */
        fputs(",\"cut_short\":true", f);
    if (t->sample)
        fprintf(f, ",\"sample_interval\":%llu", (unsigned long long)t->sample);
    if (ht__foreign_text(t, &warn, fw, sizeof fw)) {
        fputs(",\"foreign_allocator\":{\"functions\":[", f);
        for (unsigned i = 0, k = 0; i < HT_FOREIGN_COUNT; i++)
            if (t->foreign >> i & 1) {
                if (k++)
                    fputc(',', f);
                ht__json_string(f, HT_FOREIGN[i].name);
            }
        fputs("],\"module\":", f);
        ht__json_string(f, t->foreign_module ? t->foreign_module : "");
        fprintf(f, ",\"heap_unseen\":%s,\"text\":", warn ? "true" : "false");
        ht__json_string(f, fw);
        fputc('}', f);
    }
    if (r->reach != HT_REACH_NONE)
        json_reach(r, f);
    const ht_supp_t *sp = r->ses->opts ? r->ses->opts->supp : NULL;
    if (sp) {
        fprintf(f, ",\"suppressed\":{\"bytes\":%lld,\"blocks\":%lld,\"sites\":%zu",
                (long long)r->supp_bytes, (long long)r->supp_blocks, r->supp_sites);
        if (r->supp_custom_sites)
            fprintf(f, ",\"custom_bytes\":%lld,\"custom_blocks\":%lld,\"custom_sites\":%zu",
                    (long long)r->supp_custom_bytes, (long long)r->supp_custom_blocks, r->supp_custom_sites);
        if (sp->vg_ignored)
            fprintf(f, ",\"valgrind_ignored\":%zu", sp->vg_ignored);
        fputs(",\"patterns\":[", f);
        for (size_t i = 0; i < sp->n; i++) {
            fputs(i ? "," : "", f);
            fputs(sp->vg[i] ? "{\"valgrind\":" : "{\"pattern\":", f);     /* a block: its name */
            ht__json_string(f, sp->pat[i]);
            fprintf(f, ",\"sites\":%llu,\"bytes\":%llu,\"blocks\":%llu", (unsigned long long)sp->sites[i],
                    (unsigned long long)sp->bytes[i], (unsigned long long)sp->blocks[i]);
            if (sp->custom_sites[i])
                fprintf(f, ",\"custom_sites\":%llu,\"custom_bytes\":%llu,\"custom_blocks\":%llu",
                        (unsigned long long)sp->custom_sites[i], (unsigned long long)sp->custom_bytes[i],
                        (unsigned long long)sp->custom_blocks[i]);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputs(",\"sites\":[", f);
    ht_progress_t pr;
    ht__progress_init(&pr, r->ses, "writing JSON");
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        ht__progress_step(&pr, i, r->nshown);
        fprintf(f, "%s\n{\"bytes\":%lld,\"blocks\":%lld,\"kind\":\"%s\",\"stacks\":%u", i ? "," : "",
                (long long)row->bytes, (long long)row->blocks,
                ht__kind_name(row->kind), row->nstacks);
        if (r->by == HT_BY_FUNCTION) {
            fputs(",\"function\":", f);
            ht__json_string(f, row->label);
        } else if (r->by == HT_BY_MODULE) {
            fputs(",\"module\":", f);
            ht__json_string(f, row->label);
        }
        fprintf(f, ",\"alloc_bytes\":%lld,\"alloc_blocks\":%lld,\"peak_bytes\":%lld",
                (long long)row->alloc_bytes, (long long)row->alloc_blocks,
                (long long)row->peak_bytes);
        if (row->lost)
            fprintf(f, ",\"lost_bytes\":%lld,\"lost_blocks\":%lld,\"indirectly_lost_bytes\":%lld,"
                       "\"indirectly_lost_blocks\":%lld",
                    (long long)row->lost->lost_bytes, (long long)row->lost->lost_blocks,
                    (long long)row->lost->ilost_bytes, (long long)row->lost->ilost_blocks);
        if (row->lost && r->possible)
            fprintf(f, ",\"possibly_lost_bytes\":%lld,\"possibly_lost_blocks\":%lld",
                    (long long)row->lost->plost_bytes, (long long)row->lost->plost_blocks);
        if (r->type == HT_REPORT_DIFF || r->type == HT_REPORT_GROWTH)
            fprintf(f, ",\"bytes_before\":%lld,\"blocks_before\":%lld,\"bytes_after\":%lld,\"blocks_after\":%lld",
                    (long long)row->x->a_bytes, (long long)row->x->a_blocks, (long long)row->x->b_bytes,
                    (long long)row->x->b_blocks);
        if (r->type == HT_REPORT_GROWTH) {
            fprintf(f, ",\"steadiness\":%.4f,\"ups\":%u,\"downs\":%u,\"intervals\":%u,\"series\":[",
                    row->x->steadiness, row->x->ups, row->x->downs, row->x->intervals);
            for (uint32_t k = 0; row->x->series && k < r->nsnaps; k++)
                fprintf(f, "%s%lld", k ? "," : "", (long long)row->x->series[k]);
            fputc(']', f);
        }
        fputs(",\"frames\":", f);
        ht__json_frames(r, row, f, &buf, &cap);
        fputc('}', f);
    }
    ht__progress_end(&pr);
    fputs("\n]}\n", f);
    free(buf);
    return ferror(f) ? -1 : 0;
}
