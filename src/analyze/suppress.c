/* suppress.c -- leak suppressions (suppress.h). */
#include "suppress.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sym.h"
#include "util.h"

void ht__supp_free(ht_supp_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->pat[i]);
        free(s->glob[i]);
    }
    free(s->pat);
    free(s->glob);
    free(s->sites);
    free(s->blocks);
    free(s->bytes);
    free(s->custom_sites);
    free(s->custom_blocks);
    free(s->custom_bytes);
    free(s->memo[0]);
    free(s->memo[1]);
    memset(s, 0, sizeof *s);
}

void ht__supp_count(ht_supp_t *s, int p, int custom, uint64_t blocks, uint64_t bytes)
{
    (custom ? s->custom_sites : s->sites)[p]++;
    (custom ? s->custom_blocks : s->blocks)[p] += blocks;
    (custom ? s->custom_bytes : s->bytes)[p] += bytes;
}

static void supp_add(ht_supp_t *s, const char *p, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->pat = ht__xrealloc(s->pat, s->cap * sizeof *s->pat);
        s->glob = ht__xrealloc(s->glob, s->cap * sizeof *s->glob);
        s->sites = ht__xrealloc(s->sites, s->cap * sizeof *s->sites);
        s->blocks = ht__xrealloc(s->blocks, s->cap * sizeof *s->blocks);
        s->bytes = ht__xrealloc(s->bytes, s->cap * sizeof *s->bytes);
        s->custom_sites = ht__xrealloc(s->custom_sites, s->cap * sizeof *s->custom_sites);
        s->custom_blocks = ht__xrealloc(s->custom_blocks, s->cap * sizeof *s->custom_blocks);
        s->custom_bytes = ht__xrealloc(s->custom_bytes, s->cap * sizeof *s->custom_bytes);
    }
    char *c = ht__xmalloc(len + 1), *g = ht__xmalloc(len + 3);
    memcpy(c, p, len);
    c[len] = 0;
    s->pat[s->n] = c;
    int start = p[0] == '^', end = len > (size_t)start && p[len - 1] == '$';
    size_t gn = 0, cn = len - (size_t)start - (size_t)end;
    if (!start)
        g[gn++] = '*';
    memcpy(g + gn, p + start, cn);
    gn += cn;
    if (!end)
        g[gn++] = '*';
    g[gn] = 0;
    s->glob[s->n] = g;
    s->sites[s->n] = s->blocks[s->n] = s->bytes[s->n] = 0;
    s->custom_sites[s->n] = s->custom_blocks[s->n] = s->custom_bytes[s->n] = 0;
    s->n++;
}

int ht__supp_load(ht_supp_t *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "cannot read suppressions %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    for (unsigned no = 1; (len = getline(&line, &cap, f)) >= 0; no++) {
        char *a = line, *e = line + len;
        while (a < e && isspace((unsigned char)*a))
            a++;
        while (e > a && isspace((unsigned char)e[-1]))
            e--;
        if (a == e || *a == '#')
            continue;
        /* a comment after the pattern: white space, then '#' (names have
         * no "#" after a blank; LeakSanitizer would take it as part of the
         * pattern, which then matches nothing) */
        for (char *c = a; c < e; c++)
            if (*c == '#' && c > a && (c[-1] == ' ' || c[-1] == '\t')) {
                e = c;
                while (e > a && isspace((unsigned char)e[-1]))
                    e--;
                break;
            }
        if ((size_t)(e - a) < 5 || memcmp(a, "leak:", 5) != 0) {
            snprintf(err, errlen, "%s:%u: not a leak suppression (lines are `leak:PATTERN`, "
                     "as LeakSanitizer's; `#` begins a comment)", path, no);
            rc = -1;
            break;
        }
        a += 5;
        if (a == e) {
            snprintf(err, errlen, "%s:%u: `leak:` without a pattern", path, no);
            rc = -1;
            break;
        }
        supp_add(s, a, (size_t)(e - a));
    }
    free(line);
    if (!rc && ferror(f)) {
        snprintf(err, errlen, "cannot read suppressions %s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    return rc;
}

/* Glob p against all of str, '*' matching any run: the usual
 * backtracking to the last star, linear in practice. */
static int glob(const char *p, const char *str)
{
    size_t pn = strlen(p), sn = strlen(str);
    size_t i = 0, j = 0, star = (size_t)-1, mark = 0;
    while (j < sn) {
        if (i < pn && p[i] == '*') {
            star = i++;
            mark = j;
        } else if (i < pn && p[i] == str[j]) {
            i++;
            j++;
        } else if (star != (size_t)-1) {
            i = star + 1;
            j = ++mark;
        } else {
            return 0;
        }
    }
    while (i < pn && p[i] == '*')
        i++;
    return i == pn;
}

/* The first pattern matching one of the strings, or -1. */
static int match_any(const ht_supp_t *s, const char *const *str, int n)
{
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < n; k++)
            if (str[k] && glob(s->glob[i], str[k]))
                return (int)i;
    return -1;
}

/* The pattern matching node's own frames (its function, inlined ones,
 * their files, its module), or -1. */
static int match_node(const ht_supp_t *s, ht_session_t *ses, const ht_input_t *in, uint32_t node)
{
    uint32_t m = ht__node_mod(in, node);
    if (m == HT_NOMOD) {
        const ht_tjit_t *j = ht__node_jit(in, node);
        const char *str[1] = { j ? j->name : NULL };
        return match_any(s, str, 1);
    }
    const ht_sloc_t *l = ht__sym_lookup(ses->sym, m, ht__node_rel(in, node), 0);
    for (uint32_t k = 0; k < l->n; k++) {
        const char *str[2] = { l->f[k].function, l->f[k].file };
        int r = match_any(s, str, 2);
        if (r >= 0)
            return r;
    }
    const ht_smod_t *sm = ht__sym_mod(ses->sym, m);
    const char *str[2] = { sm->path, sm->name };
    return match_any(s, str, 2);
}

int ht__supp_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node)
{
    const ht_input_t *in = &ses->in[input];
    if (!s->n || input > 1 || node == 0 || node >= in->t->nnodes)
        return -1;
    if (s->memo_for[input] != in->t || s->nmemo[input] != in->t->nnodes) {
        free(s->memo[input]);
        s->memo_for[input] = in->t;
        s->nmemo[input] = in->t->nnodes;
        s->memo[input] = ht__xmalloc(in->t->nnodes * sizeof *s->memo[input]);
        for (size_t i = 0; i < in->t->nnodes; i++)
            s->memo[input][i] = -2;
    }
    int32_t *memo = s->memo[input];
    /* out to the first node known (or the root), then back in: no
     * recursion, whatever the depth */
    uint32_t top = node, len = 0;
    while (top != 0 && top < in->t->nnodes && memo[top] == -2) {
        top = in->t->nodes[top].parent;
        len++;
    }
    int outer = top != 0 && top < in->t->nnodes ? memo[top] : -1;
    uint32_t *path = ht__xmalloc((len ? len : 1) * sizeof *path);
    uint32_t k = 0;
    for (uint32_t x = node; k < len; x = in->t->nodes[x].parent)
        path[k++] = x;
    while (k-- > 0) {
        int own = match_node(s, ses, in, path[k]);
        outer = own >= 0 ? own : outer;
        memo[path[k]] = outer;
    }
    free(path);
    return memo[node];
}
