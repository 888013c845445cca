/* render_supp.c -- a report's leaks as a suppressions file (`report -f
 * suppressions`): the `leak:PATTERN` lines that leave them out of the
 * next run's figures and its --error-exitcode, so a test suite with known
 * leaks can gate on new ones (memcheck's --gen-suppressions; LeakSanitizer
 * has none).
 *
 * Which rows: when the report's leak check judged a row's blocks, the
 * rows with unreachable blocks (definitely or indirectly lost: what
 * --error-exitcode counts); still reachable, possibly lost, and anything
 * the check did not judge (mappings) get no line. Without a check (a
 * crash, threads that could not be paused, an in-use report), every row.
 *
 * The pattern of a row is where its leak comes from: the function of its
 * origin (its innermost frame outside the well-tested modules, inlined
 * functions counted; --by module: the origin's module), anchored at both
 * ends so it is that name and no other. Rows with one pattern share its
 * line. A frame without a function name gives its module's file name
 * (every leak through that module), a JIT frame its code's name; rows
 * with neither get a comment saying they cannot be suppressed. Each line
 * follows a comment with what it covers, so a reviewer can read the file. */
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "heaptrail.h"
#include "model.h"

typedef struct pat_s {
    char *pat;              /* NULL: this row cannot be suppressed */
    const char *what;       /* the comment's "at ..." part (pooled or pat) */
    int64_t bytes, blocks;
    uint32_t sites;
    size_t first;           /* the first row with it: the output's order */
    uint8_t heap, custom;   /* it covers heap (or mapping) rows, custom rows */
} pat_t;

static int by_pattern(const void *a, const void *b)
{
    const pat_t *x = a, *y = b;
    if (!x->pat || !y->pat)
        return x->pat ? -1 : y->pat ? 1 : (x->first > y->first) - (x->first < y->first);
    int c = strcmp(x->pat, y->pat);
    return c ? c : (x->first > y->first) - (x->first < y->first);
}

static int by_first(const void *a, const void *b)
{
    const pat_t *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* "^NAME$", or NULL when NAME would not read back as itself: the loader
 * trims white space at the ends and takes " #" as a comment's start; a
 * leading '^' or trailing '$' of a name would read as an anchor; a control
 * character (a line break in a crafted binary's symbol) could start a
 * line of its own. */
static char *anchored(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (!n || strchr(" \t^", name[0]) || strchr(" \t$", name[n - 1]) || strstr(name, " #") ||
        strstr(name, "\t#"))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return NULL;
    char *p = ht__xmalloc(n + 3);
    p[0] = '^';
    memcpy(p + 1, name, n);
    p[n + 1] = '$';
    p[n + 2] = 0;
    return p;
}

/* The pattern and description of a row's origin. */
static void row_pattern(const ht_report_t *r, const ht_row_t *row, pat_t *p)
{
    ht_session_t *s = (ht_session_t *)r->ses;
    const ht_input_t *in = &s->in[row->input];
    p->pat = NULL;
    p->what = "no stack";
    if (!row->node)
        return;
    uint32_t node = ht__origin_node(s, row->input, row->node);
    uint32_t m = ht__node_mod(in, node);
    char buf[1400];
    if (m == HT_NOMOD) {
        const ht_tjit_t *j = ht__node_jit(in, node);
        p->pat = j ? anchored(j->name) : NULL;
        if (p->pat)
            snprintf(buf, sizeof buf, "JIT code %.1024s", j->name);
        else
            snprintf(buf, sizeof buf, "0x%llx, in no module",
                     (unsigned long long)HT_FRAME_ADDRESS(in->t->nodes[node].addr));
        p->what = ht__pool_intern(ht__sym_pool(s->sym), buf, strlen(buf), NULL);
        return;
    }
    const ht_smod_t *sm = ht__sym_mod(s->sym, m);
    const ht_sloc_t *l = ht__sym_lookup(s->sym, m, ht__node_rel(in, node), 0);
    const ht_sframe_t *f = l->n ? &l->f[0] : NULL;
    if (r->by != HT_BY_MODULE && f && f->function && (p->pat = anchored(f->function))) {
        if (f->file && f->line)
            snprintf(buf, sizeof buf, "%.500s at %.500s:%u (%.300s)", f->function, f->file, f->line, sm->name);
        else
            snprintf(buf, sizeof buf, "%.500s (%.300s+0x%llx)", f->function, sm->name,
                     (unsigned long long)ht__node_rel(in, node));
    } else {
        p->pat = anchored(sm->name);
        if (r->by == HT_BY_MODULE)
            snprintf(buf, sizeof buf, "module %.500s", sm->path);
        else
            snprintf(buf, sizeof buf, "%.500s+0x%llx (no function name: the line covers every leak through "
                     "this module)", sm->name, (unsigned long long)ht__node_rel(in, node));
    }
    p->what = ht__pool_intern(ht__sym_pool(s->sym), buf, strlen(buf), NULL);
}

int ht__render_supp(const ht_report_t *r, FILE *f)
{
    const ht_tsnapshot_t *sn = r->snap_b;
    int checked = r->reach == HT_REACH_DONE;
    char why[512];
    const char *unit = r->by == HT_BY_MODULE ? "module" : "function";
    fputs("# heaptrail suppressions (LeakSanitizer's format) for ", f);
    ht__put_clean(f, r->ses->in[r->input_b].name);     /* a line break would end the comment */
    fprintf(f, ", snapshot %u (%s):\n", sn->seq, ht__snap_reason(sn->reason));
    if (checked)
        fprintf(f, "# the stacks with unreachable blocks (definitely or indirectly lost: what\n"
                   "# --error-exitcode counts; not still reachable or possibly lost ones),\n");
    else if (r->type == HT_REPORT_LEAKS && r->ses->in[r->input_b].t->sample)
        fprintf(f, "# every sampled stack with blocks never freed (there was no leak check: the\n"
                   "# trace is sampled, and stacks that allocated little may be missing),\n");
    else if (r->type == HT_REPORT_LEAKS)
        fprintf(f, "# every stack with blocks never freed (there was no leak check: %s),\n",
                ht__reach_why(sn, why, sizeof why) ? why : "none was made");
    else
        fprintf(f, "# every stack with blocks in use then,\n");
    fprintf(f, "# a line for each %s they come from (the innermost frame outside the\n"
               "# well-tested modules). A pattern matches any frame of a stack: a line also\n"
               "# leaves out new leaks whose stacks pass through its %s.\n"
               "# Use: heaptrail run --suppressions FILE --error-exitcode N -- PROG ...\n",
            unit, unit);

    pat_t *ps = ht__xmalloc((r->nshown ? r->nshown : 1) * sizeof *ps);
    size_t n = 0;
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        int64_t bytes = row->bytes, blocks = row->blocks, stacks = row->nstacks;
        if (checked) {
            if (!ht__row_judged(r, row))
                continue;
            bytes = row->lost->lost_bytes + row->lost->ilost_bytes;
            blocks = row->lost->lost_blocks + row->lost->ilost_blocks;
            stacks = row->lost->unreach_stacks;
        }
        if (blocks <= 0)
            continue;
        pat_t *p = &ps[n++];
        row_pattern(r, row, p);
        p->bytes = bytes;
        p->blocks = blocks;
        p->sites = (uint32_t)stacks;
        p->first = i;
        p->custom = row->kind == HT_KIND_CUSTOM;
        p->heap = !p->custom;
    }
    /* one line a pattern: merge equal ones, then back to the report's order */
    qsort(ps, n, sizeof *ps, by_pattern);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && ps[i].pat && ps[m - 1].pat && !strcmp(ps[i].pat, ps[m - 1].pat)) {
            ps[m - 1].bytes += ps[i].bytes;
            ps[m - 1].blocks += ps[i].blocks;
            ps[m - 1].sites += ps[i].sites;
            ps[m - 1].heap |= ps[i].heap;
            ps[m - 1].custom |= ps[i].custom;
            free(ps[i].pat);
            continue;
        }
        ps[m++] = ps[i];
    }
    qsort(ps, m, sizeof *ps, by_first);
    const char *what = checked ? " unreachable" : "";
    if (!m)
        fprintf(f, "\n# nothing to suppress: no stack has%s blocks\n", what);
    for (size_t i = 0; i < m; i++) {
        const pat_t *p = &ps[i];
        fprintf(f, "\n# %lld %s in %lld %s%s%s from %u %s: ", (long long)p->bytes,
                ht__plural(p->bytes, "byte", "bytes"), (long long)p->blocks,
                !p->custom ? "" : p->heap ? "heap and custom allocator " : "custom allocator ",
                ht__plural(p->blocks, "block", "blocks"), what, p->sites, ht__plural(p->sites, "stack", "stacks"));
        ht__put_clean(f, p->what);
        putc('\n', f);
        if (p->pat)
            fprintf(f, "leak:%s\n", p->pat);
        else
            fprintf(f, "# cannot be suppressed: no function, module or JIT code name to match\n");
        free(p->pat);
    }
    free(ps);
    return ferror(f) ? -1 : 0;
}
