/* render_folded.c -- collapsed stacks for flamegraph.pl, speedscope and
 * inferno: one line per row, "outermost;...;innermost VALUE", value in
 * bytes, or for --temporary in allocations (rows whose value is not
 * positive are left out: a flame graph cannot draw them). Inline frames are frames of their own. ';' and line
 * breaks in names would break the format and become ':' and ' '. */
#include <stdlib.h>
#include <string.h>
#include "model.h"

static void put_name(FILE *f, const char *s)
{
    for (; *s; s++)
        putc(*s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s, f);
}

int ht__render_folded(const ht_report_t *r, FILE *f)
{
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    ht_progress_t pr;
    ht__progress_init(&pr, r->ses, "writing stacks");
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        ht__progress_step(&pr, i, r->nshown);
        int64_t w = ht__row_weight(r, row);
        if (w <= 0)
            continue;
        size_t n = ht__row_frames(r, row, &buf, &cap);
        if (r->by == HT_BY_MODULE) {
            const char *s = strrchr(row->label, '/');
            put_name(f, s ? s + 1 : row->label);
        } else if (!n) {
            put_name(f, "[no stack]");
        }
        for (size_t k = n; k-- > 0;) {
            const ht_rframe_t *fr = &buf[k];
            put_name(f, fr->sf && fr->sf->function ? fr->sf->function : ht__frame_fallback(r, fr));
            if (k)
                putc(';', f);
        }
        fprintf(f, " %lld\n", (long long)w);
    }
    ht__progress_end(&pr);
    free(buf);
    return ferror(f) ? -1 : 0;
}
