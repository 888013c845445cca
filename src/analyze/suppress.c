/* suppress.c -- leak suppressions (suppress.h): the two file formats'
 * reader, and the matching, memoized per stack-database node (leak:
 * lines) and per innermost node (Valgrind blocks). */
#include "suppress.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "sym.h"
#include "util.h"

static void vindex_free(struct vindex_s *x);
static void own_free(struct ownmemo_s *o);
static void own_forget_bits(struct ownmemo_s *o);
static uint64_t node_bits(const struct vindex_s *x, ht_session_t *ses, const ht_input_t *in, uint32_t node);

void ht__supp_free(ht_supp_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->pat[i]);
        free(s->glob[i]);
        if (s->vg[i])
            for (uint32_t k = 0; k < s->vg[i]->n; k++)
                free(s->vg[i]->f[k].pat);
        free(s->vg[i]);
    }
    free(s->pat);
    free(s->glob);
    free(s->vg);
    free(s->leak_ix);
    free(s->vg_ix);
    free(s->sites);
    free(s->blocks);
    free(s->bytes);
    free(s->custom_sites);
    free(s->custom_blocks);
    free(s->custom_bytes);
    for (int i = 0; i < 2; i++) {
        free(s->memo[i]);
        free(s->vmemo[i][0]);
        free(s->vmemo[i][1]);
        free(s->vbits[i]);
    }
    free(s->frames);
    vindex_free(s->vindex);
    own_free(s->own);
    memset(s, 0, sizeof *s);
}

void ht__supp_put_name(FILE *f, const ht_supp_t *s, size_t i)
{
    fputs(s->vg[i] ? "{" : "leak:", f);
    ht__put_clean(f, s->pat[i]);
    if (s->vg[i])
        fputc('}', f);
}

void ht__supp_count(ht_supp_t *s, int p, int custom, uint64_t blocks, uint64_t bytes)
{
    (custom ? s->custom_sites : s->sites)[p]++;
    (custom ? s->custom_blocks : s->blocks)[p] += blocks;
    (custom ? s->custom_bytes : s->bytes)[p] += bytes;
}

/* A new entry at the end, its counts 0: a leak: line (glob) or a block
 * (vg); takes both. */
static void entry_add(ht_supp_t *s, char *pat, char *glob, ht_vgblock_t *vg)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->pat = ht__xrealloc(s->pat, s->cap * sizeof *s->pat);
        s->glob = ht__xrealloc(s->glob, s->cap * sizeof *s->glob);
        s->vg = ht__xrealloc(s->vg, s->cap * sizeof *s->vg);
        s->leak_ix = ht__xrealloc(s->leak_ix, s->cap * sizeof *s->leak_ix);
        s->vg_ix = ht__xrealloc(s->vg_ix, s->cap * sizeof *s->vg_ix);
        s->sites = ht__xrealloc(s->sites, s->cap * sizeof *s->sites);
        s->blocks = ht__xrealloc(s->blocks, s->cap * sizeof *s->blocks);
        s->bytes = ht__xrealloc(s->bytes, s->cap * sizeof *s->bytes);
        s->custom_sites = ht__xrealloc(s->custom_sites, s->cap * sizeof *s->custom_sites);
        s->custom_blocks = ht__xrealloc(s->custom_blocks, s->cap * sizeof *s->custom_blocks);
        s->custom_bytes = ht__xrealloc(s->custom_bytes, s->cap * sizeof *s->custom_bytes);
    }
    s->pat[s->n] = pat;
    s->glob[s->n] = glob;
    s->vg[s->n] = vg;
    if (vg)
        s->vg_ix[s->nvg++] = (uint32_t)s->n;
    else
        s->leak_ix[s->nleak++] = (uint32_t)s->n;
    s->sites[s->n] = s->blocks[s->n] = s->bytes[s->n] = 0;
    s->custom_sites[s->n] = s->custom_blocks[s->n] = s->custom_bytes[s->n] = 0;
    s->n++;
}

static void leak_add(ht_supp_t *s, const char *p, size_t len)
{
    char *c = ht__xmalloc(len + 1), *g = ht__xmalloc(len + 3);
    memcpy(c, p, len);
    c[len] = 0;
    int start = p[0] == '^', end = len > (size_t)start && p[len - 1] == '$';
    size_t gn = 0, cn = len - (size_t)start - (size_t)end;
    if (!start)
        g[gn++] = '*';
    memcpy(g + gn, p + start, cn);
    gn += cn;
    if (!end)
        g[gn++] = '*';
    g[gn] = 0;
    entry_add(s, c, g, NULL);
}

/*------------------------------------------------ Valgrind's globs */

/* Valgrind's wildcards over all of str: '*' any run, '?' any one
 * character, '\' takes the next character as it is. Backtracks to the
 * last star only: linear in practice. */
static int vg_glob(const char *p, const char *str)
{
    const char *star = NULL, *mark = NULL;
    for (;;) {
        if (*p == '*') {
            star = ++p;
            mark = str;
            continue;
        }
        if (!*str)
            break;
        const char *next = p + 1;
        char c = *p;
        if (c == '\\' && p[1]) {
            c = p[1];
            next = p + 2;
        }
        if (c && (*p == '?' || c == *str)) {
            p = next;
            str++;
            continue;
        }
        if (!star)
            return 0;
        p = star;
        str = ++mark;
    }
    while (*p == '*')
        p++;
    return !*p;
}

static int line_glob(const ht_vgframe_t *l, const char *str)
{
    return l->literal ? !strcmp(l->pat, str) : vg_glob(l->pat, str);
}

/* Valgrind's frame 0 of a heap block's stack: the allocator function its
 * preloaded library replaces (the C++ operators by their mangled and
 * demangled names, size_t being unsigned long), where heaptrail's stack
 * begins at the caller. Which one a site's blocks came from the trace
 * does not say: a line meets the frame if it matches any. */
static const char *const alloc_funs[] = {
    "malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
    "reallocarray",
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "operator new(unsigned long)", "operator new[](unsigned long)",
    "operator new(unsigned long, std::nothrow_t const&)", "operator new[](unsigned long, std::nothrow_t const&)",
    "operator new(unsigned long, std::align_val_t)", "operator new[](unsigned long, std::align_val_t)",
    "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)",
    "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)",
};
#define ALLOC_OBJ "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so"
#define ALLOC_SRC "vg_replace_malloc.c"     /* its line: any */

static int matches_alloc(const ht_vgframe_t *l)
{
    switch (l->type) {
    case HT_VG_FUN:
        for (size_t i = 0; i < sizeof alloc_funs / sizeof *alloc_funs; i++)
            if (line_glob(l, alloc_funs[i]))
                return 1;
        return 0;
    case HT_VG_OBJ: return line_glob(l, ALLOC_OBJ);
    case HT_VG_SRC: return line_glob(l, ALLOC_SRC);
    }
    return 0;
}

/*------------------------------------------------ reading a file */

/* The Valgrind block being read. */
enum { VR_NONE = 0, VR_NAME, VR_KIND, VR_FRAMES, VR_SKIP };
typedef struct vgread_s {
    int state;                  /* VR_* */
    unsigned open;              /* the line of its `{` */
    char *name;
    int kinds_next;             /* a match-leak-kinds: line may come next */
    ht_vgframe_t *f;
    size_t n, cap;
} vgread_t;

static void vgread_clear(vgread_t *b)
{
    free(b->name);
    for (size_t i = 0; i < b->n; i++)
        free(b->f[i].pat);
    free(b->f);
    memset(b, 0, sizeof *b);
}

static int starts(const char *a, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(a, prefix, n);
}

/* match-leak-kinds: a comma-separated set of definite, indirect,
 * possible, reachable, or all, or none: 0 if it is one */
static int check_kinds(const char *a, const char *e, const char **bad, size_t *badlen)
{
    static const char *const kinds[] = { "definite", "indirect", "possible", "reachable", "all", "none" };
    for (;;) {
        while (a < e && isspace((unsigned char)*a))
            a++;
        const char *c = a;
        while (c < e && *c != ',')
            c++;
        const char *t = c;
        while (t > a && isspace((unsigned char)t[-1]))
            t--;
        size_t k = 0, n = sizeof kinds / sizeof *kinds;
        while (k < n && !((size_t)(t - a) == strlen(kinds[k]) && !memcmp(a, kinds[k], (size_t)(t - a))))
            k++;
        if (k == n) {
            *bad = a;
            *badlen = (size_t)(t - a);
            return -1;
        }
        if (c == e)
            return 0;
        a = c + 1;
    }
}

/* One line (a..e, trimmed, not blank, not a comment) of the block b:
 * 0, or -1 with a message in err. */
static int block_line(ht_supp_t *s, vgread_t *b, const char *a, const char *e, const char *path,
                      unsigned no, char *err, size_t errlen)
{
    size_t len = (size_t)(e - a);
    int len_i = len > 200 ? 200 : (int)len;
    if (len == 1 && *a == '{') {
        snprintf(err, errlen, "%s:%u: `{` inside the Valgrind suppression opened at line %u (a `}` missing?)",
                 path, no, b->open);
        return -1;
    }
    int close = len == 1 && *a == '}';
    switch (b->state) {
    case VR_NAME:
        if (close) {
            snprintf(err, errlen, "%s:%u: a Valgrind suppression without a name, kind and frames", path, no);
            return -1;
        }
        b->name = ht__xstrndup(a, len);
        b->state = VR_KIND;
        return 0;
    case VR_KIND: {
        const char *colon = memchr(a, ':', len);
        /* a frame line where the kind belongs (no tool is called fun) */
        if (starts(a, len, "fun:") || starts(a, len, "obj:") || starts(a, len, "src:") ||
            starts(a, len, "match-leak-kinds:") || (len == 3 && !memcmp(a, "...", 3))) {
            snprintf(err, errlen, "%s:%u: Valgrind suppression `%s` has no kind line (TOOL:KIND, as "
                     "Memcheck:Leak) before `%.*s`", path, no, b->name, len_i, a);
            return -1;
        }
        if (close || !colon) {
            snprintf(err, errlen, "%s:%u: `%.*s`: not the kind line of Valgrind suppression `%s` "
                     "(TOOL:KIND, as Memcheck:Leak)", path, no, len_i, a, b->name);
            return -1;
        }
        /* Memcheck among the tools, and the kind Leak */
        int memcheck = 0;
        for (const char *t = a; t < colon;) {
            const char *c = memchr(t, ',', (size_t)(colon - t));
            if (!c)
                c = colon;
            memcheck |= c - t == 8 && !memcmp(t, "Memcheck", 8);
            t = c + 1;
        }
        int leak = e - colon - 1 == 4 && !memcmp(colon + 1, "Leak", 4);
        b->state = memcheck && leak ? VR_FRAMES : VR_SKIP;
        b->kinds_next = 1;
        return 0;
    }
    case VR_SKIP:
        if (close) {
            s->vg_ignored++;
            vgread_clear(b);
        }
        return 0;
    }
    /* VR_FRAMES */
    if (close) {
        size_t k = 0;
        while (k < b->n && b->f[k].type == HT_VG_ANY)
            k++;
        if (k == b->n) {
            snprintf(err, errlen, "%s:%u: Valgrind suppression `%s` has no frame line but `...` "
                     "(fun:, obj: or src:)", path, no, b->name);
            return -1;
        }
        ht_vgblock_t *vg = ht__xmalloc(sizeof *vg + b->n * sizeof *vg->f);
        vg->n = (uint32_t)b->n;
        memcpy(vg->f, b->f, b->n * sizeof *vg->f);
        free(b->f);
        b->f = NULL;
        b->n = 0;
        entry_add(s, b->name, NULL, vg);
        b->name = NULL;
        vgread_clear(b);
        return 0;
    }
    if (b->kinds_next && starts(a, len, "match-leak-kinds:")) {
        const char *bad;
        size_t badlen;
        b->kinds_next = 0;
        if (check_kinds(a + 17, e, &bad, &badlen) != 0) {
            snprintf(err, errlen, "%s:%u: match-leak-kinds: `%.*s` is not a leak kind (definite, "
                     "indirect, possible, reachable, all, none)", path, no, badlen > 200 ? 200 : (int)badlen, bad);
            return -1;
        }
        return 0;
    }
    b->kinds_next = 0;
    ht_vgframe_t f = { 0 };
    if (len == 3 && !memcmp(a, "...", 3)) {
        f.type = HT_VG_ANY;
    } else if (starts(a, len, "fun:") || starts(a, len, "obj:") || starts(a, len, "src:")) {
        f.type = *a == 'f' ? HT_VG_FUN : *a == 'o' ? HT_VG_OBJ : HT_VG_SRC;
        const char *p = a + 4, *pe = e;
        if (f.type == HT_VG_SRC) {      /* FILE:LINE */
            const char *c = pe;
            while (c > p && isdigit((unsigned char)c[-1]))
                c--;
            if (c < pe && c > p + 1 && c[-1] == ':') {
                f.line = (uint32_t)strtoul(c, NULL, 10);
                pe = c - 1;
            }
        }
        f.pat = ht__xstrndup(p, (size_t)(pe - p));
        f.literal = !strpbrk(f.pat, "*?\\");
        f.alloc = matches_alloc(&f);
    } else {
        snprintf(err, errlen, "%s:%u: `%.*s`: not a frame line of Valgrind suppression `%s` "
                 "(fun:GLOB, obj:GLOB, src:FILE[:LINE] or ...)", path, no, len_i, a, b->name);
        return -1;
    }
    HT_GROW(b->f, b->cap, b->n + 1);
    b->f[b->n++] = f;
    return 0;
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
    unsigned no;
    vgread_t b = { 0 };
    for (no = 1; (len = getline(&line, &cap, f)) >= 0; no++) {
        char *a = line, *e = line + len;
        while (a < e && isspace((unsigned char)*a))
            a++;
        while (e > a && isspace((unsigned char)e[-1]))
            e--;
        if (a == e || *a == '#')
            continue;
        /* a Valgrind block: from a `{` line to a `}` line (comments and
         * blank lines inside are skipped, as Valgrind skips them) */
        if (b.state) {
            if ((rc = block_line(s, &b, a, e, path, no, err, errlen)) != 0)
                break;
            continue;
        }
        if (e - a == 1 && (*a == '{' || *a == '}')) {
            if (*a == '}') {
                snprintf(err, errlen, "%s:%u: `}` without a `{` before it", path, no);
                rc = -1;
                break;
            }
            b.state = VR_NAME;
            b.open = no;
            continue;
        }
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
                     "as LeakSanitizer's, or Valgrind's blocks from `{` to `}`; `#` begins a comment)",
                     path, no);
            rc = -1;
            break;
        }
        a += 5;
        if (a == e) {
            snprintf(err, errlen, "%s:%u: `leak:` without a pattern", path, no);
            rc = -1;
            break;
        }
        leak_add(s, a, (size_t)(e - a));
    }
    if (!rc && b.state) {
        snprintf(err, errlen, "%s:%u: the Valgrind suppression opened here has no `}` (the file ends "
                 "at line %u)", path, b.open, no - 1);
        rc = -1;
    }
    vgread_clear(&b);
    free(line);
    if (!rc && ferror(f)) {
        snprintf(err, errlen, "cannot read suppressions %s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    return rc;
}

/*------------------------------------------------ leak: lines */

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
    for (size_t x = 0; x < s->nleak; x++) {
        uint32_t i = s->leak_ix[x];
        for (int k = 0; k < n; k++)
            if (str[k] && glob(s->glob[i], str[k]))
                return (int)i;
    }
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

/* What a node's own frames match -- the leak: line (match_node) and the
 * Valgrind prefilter's bits (node_bits) -- depends only on its code
 * address (symbolizer module and link-time address), which many nodes
 * share: every call path through a function has nodes of its own. So
 * both are worked out once per address, here, not once per node (200
 * leak: lines on the 100,000 stacks of tests/progs/manysites: 1.34 ->
 * 0.27 s, docs/BENCHMARKS.md). JIT code and code outside any module are
 * matched each time (their names come from the input). The addresses are
 * the session's symbolizer's: the memo starts over for another.
 * Open addressing, doubled at half full. */
#define BITS_KNOWN (1ull << 63)

typedef struct {
    uint64_t rel;
    uint64_t bits;              /* node_bits | BITS_KNOWN; 0: not known yet */
    uint32_t mod;               /* HT_NOMOD: empty */
    int32_t match;              /* match_node; -2: not known yet */
} ownslot_t;
struct ownmemo_s {
    const void *sym;            /* the symbolizer the addresses are of */
    ownslot_t *slot;
    size_t mask, used;
};

static size_t own_home(uint32_t mod, uint64_t rel, size_t mask)
{
    uint64_t h = (rel ^ (uint64_t)mod << 48) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ h >> 29) & mask;
}

static ownslot_t *own_slot(struct ownmemo_s *o, uint32_t mod, uint64_t rel)
{
    size_t i = own_home(mod, rel, o->mask);
    while (o->slot[i].mod != HT_NOMOD && (o->slot[i].mod != mod || o->slot[i].rel != rel))
        i = (i + 1) & o->mask;
    return &o->slot[i];
}

static void own_free(struct ownmemo_s *o)
{
    if (o)
        free(o->slot);
    free(o);
}

/* After the prefilter's index is rebuilt: its bits are other bits. */
static void own_forget_bits(struct ownmemo_s *o)
{
    for (size_t i = 0; o && o->slot && i <= o->mask; i++)
        o->slot[i].bits = 0;
}

static void own_grow(struct ownmemo_s *o)
{
    struct ownmemo_s n = { .sym = o->sym, .mask = o->slot ? 2 * o->mask + 1 : 1023, .used = o->used };
    n.slot = ht__xmalloc((n.mask + 1) * sizeof *n.slot);
    for (size_t i = 0; i <= n.mask; i++)
        n.slot[i].mod = HT_NOMOD;
    for (size_t i = 0; o->slot && i <= o->mask; i++)
        if (o->slot[i].mod != HT_NOMOD)
            *own_slot(&n, o->slot[i].mod, o->slot[i].rel) = o->slot[i];
    free(o->slot);
    *o = n;
}

/* node's entry in the memo, made if new; NULL for a node in no module */
static ownslot_t *own_of(ht_supp_t *s, ht_session_t *ses, const ht_input_t *in, uint32_t node)
{
    uint32_t m = ht__node_mod(in, node);
    if (m == HT_NOMOD)
        return NULL;
    if (s->own && s->own->sym != ses->sym) {
        own_free(s->own);
        s->own = NULL;
    }
    if (!s->own) {
        s->own = ht__xcalloc(1, sizeof *s->own);
        s->own->sym = ses->sym;
    }
    struct ownmemo_s *o = s->own;
    if (!o->slot || (o->used + 1) * 2 > o->mask + 1)
        own_grow(o);
    uint64_t rel = ht__node_rel(in, node);
    ownslot_t *e = own_slot(o, m, rel);
    if (e->mod == HT_NOMOD) {
        *e = (ownslot_t){ rel, 0, m, -2 };
        o->used++;
    }
    return e;
}

/* match_node, through the memo */
static int own_match(ht_supp_t *s, ht_session_t *ses, const ht_input_t *in, uint32_t node)
{
    ownslot_t *e = own_of(s, ses, in, node);
    if (!e)
        return match_node(s, ses, in, node);
    if (e->match == -2)
        e->match = match_node(s, ses, in, node);
    return e->match;
}

/* node_bits, through the memo */
static uint64_t own_bits(ht_supp_t *s, ht_session_t *ses, const ht_input_t *in, uint32_t node)
{
    ownslot_t *e = own_of(s, ses, in, node);
    if (!e)
        return node_bits(s->vindex, ses, in, node);
    if (!e->bits)
        e->bits = node_bits(s->vindex, ses, in, node) | BITS_KNOWN;
    return e->bits & ~BITS_KNOWN;
}

/* A per-node memo of the input's trace, every entry -2 (not known yet). */
static int32_t *new_memo(const ht_input_t *in)
{
    int32_t *m = ht__xmalloc((in->t->nnodes ? in->t->nnodes : 1) * sizeof *m);
    for (size_t i = 0; i < in->t->nnodes; i++)
        m[i] = -2;
    return m;
}

/* The memos "of this node and the ones further out" (the leak: lines'
 * pattern, the blocks' prefilter bits) are filled out to the first node
 * known, then back in: no recursion, whatever the depth. The nodes from
 * `node` out to that one (not included), innermost first, in a new
 * array; *len their number; *top the known node, 0 when the walk reached
 * the root. known(memo, n): whether n's entry is filled. */
static uint32_t *path_out(const ht_input_t *in, uint32_t node, int (*known)(const void *, uint32_t),
                          const void *memo, uint32_t *len, uint32_t *top)
{
    uint32_t t = node, n = 0;
    while (t != 0 && t < in->t->nnodes && !known(memo, t)) {
        t = in->t->nodes[t].parent;
        n++;
    }
    uint32_t *path = ht__xmalloc((n ? n : 1) * sizeof *path);
    uint32_t k = 0;
    for (uint32_t x = node; k < n; x = in->t->nodes[x].parent)
        path[k++] = x;
    *len = n;
    *top = t < in->t->nnodes ? t : 0;
    return path;
}

static int pattern_known(const void *memo, uint32_t n) { return ((const int32_t *)memo)[n] != -2; }

/* The pattern matching a frame of the stack (memo[input]: see ht_supp_t) */
static int leak_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node)
{
    const ht_input_t *in = &ses->in[input];
    if (!s->memo[input])
        s->memo[input] = new_memo(in);
    int32_t *memo = s->memo[input];
    uint32_t k, top;
    uint32_t *path = path_out(in, node, pattern_known, memo, &k, &top);
    int outer = top ? memo[top] : -1;
    while (k-- > 0) {
        int own = own_match(s, ses, in, path[k]);
        outer = own >= 0 ? own : outer;
        memo[path[k]] = outer;
    }
    free(path);
    return memo[node];
}

/*------------------------------------------------ Valgrind blocks */

/* A source-level frame as a block sees it. */
typedef struct vframe_s {
    const char *fun, *linkage;  /* fun NULL: unknown (Valgrind's "???") */
    const char *file;           /* NULL: unknown */
    const char *obj;            /* the module's path; NULL: none ("???") */
    const char *plain;          /* an inlined function's plain name */
    uint32_t line;
    uint32_t naliases;          /* the function's other symbol names (not */
    const char *const *aliases; /* inlined ones'): Valgrind may show one */
    uint64_t bits;              /* its node's own prefilter bits */
} vframe_t;

/* A stack's frames, expanded node by node as a match asks for them. */
typedef struct vstack_s {
    ht_supp_t *s;
    ht_session_t *ses;
    const ht_input_t *in;
    vframe_t *f;
    size_t n, *cap;
    uint32_t next;              /* the next node to expand; 0: none left */
    size_t alloc;               /* 1: frame 0 is the allocator (a heap site) */
} vstack_t;

static void vstack_push(vstack_t *st, vframe_t f)
{
    if (st->n == *st->cap) {
        *st->cap = *st->cap ? 2 * *st->cap : 64;
        st->f = ht__xrealloc(st->f, *st->cap * sizeof *st->f);
    }
    st->f[st->n++] = f;
}

/* Whether the stack has a frame i, expanding nodes up to it. */
static int vstack_expand(vstack_t *st, size_t i)
{
    i -= st->alloc;
    const ht_input_t *in = st->in;
    while (st->n <= i && st->next != 0 && st->next < in->t->nnodes) {
        uint32_t x = st->next, m = ht__node_mod(in, x);
        uint64_t bits = own_bits(st->s, st->ses, in, x);
        st->next = in->t->nodes[x].parent;
        if (m == HT_NOMOD) {
            const ht_tjit_t *j = ht__node_jit(in, x);
            vstack_push(st, (vframe_t){ j ? j->name : NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, bits });
            continue;
        }
        uint64_t rel = ht__node_rel(in, x);
        const ht_sloc_t *l = ht__sym_lookup(st->ses->sym, m, rel, 0);
        const char *obj = ht__sym_mod(st->ses->sym, m)->path;
        if (!l->n)
            vstack_push(st, (vframe_t){ NULL, NULL, NULL, obj, NULL, 0, 0, NULL, bits });
        for (uint32_t k = 0; k < l->n; k++)
            vstack_push(st, (vframe_t){ l->f[k].function, l->f[k].linkage, l->f[k].file, obj, l->f[k].plain,
                                        l->f[k].line, 0, NULL, bits });
        /* the real function's aliases (glibc's strdup is __strdup here) */
        if (l->n)
            st->f[st->n - 1].aliases = ht__sym_aliases(st->ses->sym, m, rel, 0, &st->f[st->n - 1].naliases);
    }
    return i < st->n;
}

/* Whether the stack has a frame i (its frames so far, else more). */
static inline int vstack_have(vstack_t *st, size_t i)
{
    return i < st->alloc + st->n || vstack_expand(st, i);
}

/* Whether frame line l matches frame i (which the stack has). */
static int line_matches(const ht_vgframe_t *l, const vstack_t *st, size_t i)
{
    if (i < st->alloc)
        return l->alloc;
    const vframe_t *f = &st->f[i - st->alloc];
    if (l->bit & ~f->bits)      /* the prefilter: it cannot */
        return 0;
    switch (l->type) {
    case HT_VG_FUN:
        if ((f->linkage && line_glob(l, f->linkage)) || line_glob(l, f->fun ? f->fun : "???") ||
            (f->plain && line_glob(l, f->plain)))
            return 1;
        for (uint32_t k = 0; k < f->naliases; k++)
            if (line_glob(l, f->aliases[k]))
                return 1;
        return 0;
    case HT_VG_OBJ:
        return line_glob(l, f->obj ? f->obj : "???");
    case HT_VG_SRC: {
        if (!f->file || (l->line && l->line != f->line))
            return 0;
        const char *base = strrchr(f->file, '/');
        return line_glob(l, base ? base + 1 : f->file) || (base && line_glob(l, f->file));
    }
    }
    return 0;
}

/* Whether block b matches a prefix of the stack: `...` lines are stars
 * over frames; on a mismatch the last star takes one frame more (the
 * glob algorithm, a frame for a character). */
static int block_matches(const ht_vgblock_t *b, vstack_t *st)
{
    uint32_t i = 0, star = UINT32_MAX;
    size_t j = 0, mark = 0;
    while (i < b->n) {
        const ht_vgframe_t *l = &b->f[i];
        if (l->type == HT_VG_ANY) {
            star = i++;
            mark = j;
            continue;
        }
        if (vstack_have(st, j) && line_matches(l, st, j)) {
            i++;
            j++;
            continue;
        }
        if (star == UINT32_MAX || !vstack_have(st, mark))
            return 0;
        i = star + 1;
        j = ++mark;
    }
    return 1;
}

/* The prefilter. Matching every block against every frame of every
 * stack is slow (200 blocks with `...` lines on 100,000 stacks: 8 s), and
 * most blocks name functions a given stack never calls. A frame line
 * that is not `...` and that the allocator frame does not meet must match
 * some frame of a stack the block matches. Each such line whose glob
 * starts with a plain character gets a bit (its pattern's hash mod 63);
 * every node, once, the bits of the lines its frames' names and module
 * match, found through an index (literal patterns in a hash table, globs
 * by their first character), ORed with its callers' (memoized per node,
 * as leak: lines are); a block is matched against a stack only when the
 * stack has all its bits. A bit shared by two lines only lets a block
 * through that then fails: the answer never changes. */
typedef struct vlit_s {
    const char *str;            /* a literal pattern; NULL: empty slot */
    uint64_t bits;              /* of the lines with it */
} vlit_t;

typedef struct vglob_s {
    const char *pat;
    uint64_t bit;
} vglob_t;

struct vindex_s {
    size_t nvg;                 /* the blocks it indexes (the first nvg) */
    vlit_t *lit;                /* open addressing, at most half full */
    size_t lit_cap;
    vglob_t *glob;              /* by first character: */
    size_t first[257];          /* globs [first[c], first[c + 1]) */
};

static void vindex_free(struct vindex_s *x)
{
    if (!x)
        return;
    free(x->lit);
    free(x->glob);
    free(x);
}

static int cmp_vglob(const void *a, const void *b)
{
    return (int)(unsigned char)((const vglob_t *)a)->pat[0] - (int)(unsigned char)((const vglob_t *)b)->pat[0];
}

static void vindex_build(ht_supp_t *s)
{
    vindex_free(s->vindex);
    struct vindex_s *x = ht__xcalloc(1, sizeof *x);
    x->nvg = s->nvg;
    size_t nlines = 0, nglob = 0;
    for (size_t i = 0; i < s->nvg; i++)
        nlines += s->vg[s->vg_ix[i]]->n;
    x->lit_cap = 16;
    while (x->lit_cap < 2 * nlines)
        x->lit_cap *= 2;
    x->lit = ht__xcalloc(x->lit_cap, sizeof *x->lit);
    x->glob = ht__xmalloc((nlines ? nlines : 1) * sizeof *x->glob);
    for (size_t i = 0; i < s->nvg; i++) {
        ht_vgblock_t *b = s->vg[s->vg_ix[i]];
        b->need = 0;
        for (uint32_t k = 0; k < b->n; k++) {
            const ht_vgframe_t *l = &b->f[k];
            b->f[k].bit = 0;
            if (l->type == HT_VG_ANY || l->type == HT_VG_SRC || l->alloc || !l->pat[0] ||
                (!l->literal && strchr("*?\\", l->pat[0])))
                continue;
            size_t len = strlen(l->pat);
            uint64_t h = ht__hash_bytes(l->pat, len), bit = 1ull << (h % 63);
            b->need |= bit;
            b->f[k].bit = bit;
            if (!l->literal) {
                x->glob[nglob++] = (vglob_t){ l->pat, bit };
                continue;
            }
            size_t j = h & (x->lit_cap - 1);
            while (x->lit[j].str && strcmp(x->lit[j].str, l->pat))
                j = (j + 1) & (x->lit_cap - 1);
            x->lit[j].str = l->pat;
            x->lit[j].bits |= bit;
        }
    }
    qsort(x->glob, nglob, sizeof *x->glob, cmp_vglob);
    for (size_t c = 0, g = 0; c <= 256; c++) {
        while (g < nglob && (unsigned char)x->glob[g].pat[0] < c)
            g++;
        x->first[c] = g;
    }
    s->vindex = x;
    own_forget_bits(s->own);
}

/* The bits of the lines name matches. */
static uint64_t name_bits(const struct vindex_s *x, const char *name)
{
    size_t len = strlen(name);
    uint64_t bits = 0;
    size_t j = ht__hash_bytes(name, len) & (x->lit_cap - 1);
    for (; x->lit[j].str; j = (j + 1) & (x->lit_cap - 1))
        if (!strcmp(x->lit[j].str, name)) {
            bits = x->lit[j].bits;
            break;
        }
    unsigned char c = (unsigned char)name[0];
    for (size_t g = x->first[c]; g < x->first[c + 1]; g++)
        if (!(bits & x->glob[g].bit) && vg_glob(x->glob[g].pat, name))
            bits |= x->glob[g].bit;
    return bits;
}

/* The bits of node's own frames: their functions' names (mangled,
 * demangled, aliases), their module's path; "???" for what is unknown. */
static uint64_t node_bits(const struct vindex_s *x, ht_session_t *ses, const ht_input_t *in, uint32_t node)
{
    uint32_t m = ht__node_mod(in, node);
    if (m == HT_NOMOD) {
        const ht_tjit_t *j = ht__node_jit(in, node);
        return name_bits(x, "???") | (j && j->name ? name_bits(x, j->name) : 0);
    }
    uint64_t rel = ht__node_rel(in, node);
    const ht_sloc_t *l = ht__sym_lookup(ses->sym, m, rel, 0);
    uint64_t bits = name_bits(x, ht__sym_mod(ses->sym, m)->path);
    if (!l->n)
        return bits | name_bits(x, "???");
    for (uint32_t k = 0; k < l->n; k++) {
        bits |= name_bits(x, l->f[k].function ? l->f[k].function : "???");
        if (l->f[k].linkage)
            bits |= name_bits(x, l->f[k].linkage);
        if (l->f[k].plain)
            bits |= name_bits(x, l->f[k].plain);
    }
    uint32_t na;
    const char *const *a = ht__sym_aliases(ses->sym, m, rel, 0, &na);
    for (uint32_t k = 0; k < na; k++)
        bits |= name_bits(x, a[k]);
    return bits;
}

static int bits_known(const void *memo, uint32_t n) { return (((const uint64_t *)memo)[n] & BITS_KNOWN) != 0; }

/* The bits of the stack whose innermost node is `node` (vbits[input]). */
static uint64_t stack_bits(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node)
{
    const ht_input_t *in = &ses->in[input];
    if (!s->vbits[input])
        s->vbits[input] = ht__xcalloc(in->t->nnodes, sizeof *s->vbits[input]);
    uint64_t *memo = s->vbits[input];
    uint32_t k, top;
    uint32_t *path = path_out(in, node, bits_known, memo, &k, &top);
    uint64_t outer = top ? memo[top] : BITS_KNOWN;
    while (k-- > 0) {
        outer |= own_bits(s, ses, in, path[k]);
        memo[path[k]] = outer;
    }
    free(path);
    return memo[node];
}

/* The first block matching the stack (vmemo: see ht_supp_t), or -1. */
static int vg_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node, int custom)
{
    const ht_input_t *in = &ses->in[input];
    int32_t **memo = &s->vmemo[input][custom];
    if (!*memo)
        *memo = new_memo(in);
    if ((*memo)[node] != -2)
        return (*memo)[node];
    if (!s->vindex || s->vindex->nvg != s->nvg)
        vindex_build(s);
    uint64_t bits = stack_bits(s, ses, input, node);
    vstack_t st = { s, ses, in, s->frames, 0, &s->frames_cap, node, custom ? 0 : 1 };
    int r = -1;
    for (size_t x = 0; x < s->nvg && r < 0; x++) {
        const ht_vgblock_t *b = s->vg[s->vg_ix[x]];
        if (!(b->need & ~bits) && block_matches(b, &st))
            r = (int)s->vg_ix[x];
    }
    s->frames = st.f;
    (*memo)[node] = r;
    return r;
}

int ht__supp_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node, int kind)
{
    const ht_input_t *in = &ses->in[input];
    if (!s->n || input > 1 || node == 0 || node >= in->t->nnodes)
        return -1;
    if (s->memo_for[input] != in->t || s->nmemo[input] != in->t->nnodes) {
        free(s->memo[input]);
        free(s->vmemo[input][0]);
        free(s->vmemo[input][1]);
        free(s->vbits[input]);
        s->memo[input] = s->vmemo[input][0] = s->vmemo[input][1] = NULL;
        s->vbits[input] = NULL;
        s->memo_for[input] = in->t;
        s->nmemo[input] = in->t->nnodes;
    }
    int r = s->nleak ? leak_match(s, ses, input, node) : -1;
    if (r >= 0 || !s->nvg || kind == HT_KIND_MMAP)
        return r;
    return vg_match(s, ses, input, node, kind == HT_KIND_CUSTOM);
}
