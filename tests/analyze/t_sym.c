/* t_sym.c -- symbolization against known truths: the fixture programs
 * (tests/progs/symfix.c, tests/analyze/cxxfix.cc) record real stacks and,
 * for each, the function and source line that allocated. Checks function
 * names, files, lines, inline frames, C++ demangling, separate debug info
 * found by build-id for a stripped binary, a dlclose'd library whose
 * address range was reused, and that a build-id mismatch gives a warning
 * and module+offset, never a wrong name. */
#include <stdlib.h>
#include <string.h>
#include "analyze/model.h"
#include "analyze/fixture.h"
#include "check.h"

#define ADIR "build/tests/analyze"
#define SYMFIX ADIR "/symfix.fix"

static const char *base(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p;
}

static int streq(const char *a, const char *b)
{
    if (!a || !b || strcmp(a, b)) {
        fprintf(stderr, "    got '%s', want '%s'\n", a ? a : "(null)", b ? b : "(null)");
        return 0;
    }
    return 1;
}

/* The frames of fixture stack `id` (its node in the loaded trace is found
 * by the site's stack in the last snapshot that holds it). */
static uint32_t node_of(const ht_trace_t *t, const char *fix, unsigned id)
{
    /* stacks are interned in file order; find the site order instead:
     * fixture ids are assigned in the order stacks appear, and the loader
     * maps them to nodes; recover through the truth-less route of
     * re-reading the stack line */
    FILE *f = fopen(fix, "r");
    char line[8192];
    uint32_t node = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned sid;
        int n, off;
        if (sscanf(line, "stack %u %d%n", &sid, &n, &off) != 2 || sid != id)
            continue;
        uint64_t fr[64];
        char *p = line + off;
        for (int i = 0; i < n && i < 64; i++)
            fr[i] = strtoull(p, &p, 0);
        node = 0;
        for (int i = n; i-- > 0;) {
            uint32_t found = 0;
            for (size_t k = 1; k < t->nnodes; k++)
                if (t->nodes[k].parent == node && t->nodes[k].addr == fr[i])
                    found = (uint32_t)k;
            node = found;
        }
    }
    if (f)
        fclose(f);
    return node;
}

static size_t frames(ht_session_t *s, const ht_report_t *r, uint32_t node, ht_rframe_t **buf, size_t *cap)
{
    ht_row_t row = { .input = 0, .node = node, .max_nodes = -1 };
    (void)s;
    return ht__row_frames(r, &row, buf, cap);
}

static void check_truths(void)
{
    ht_trace_t t;
    char err[256];
    CHECK(fixture_load(SYMFIX, &t, err, sizeof err) == 0);
    ht_opts_t o = { .top = 0 };
    ht_session_t s;
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, SYMFIX, &t);
    ht_report_t r = { .ses = &s };
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    int checked = 0;
    for (unsigned id = 1; id < 64; id++) {
        char fn[256];
        int line;
        if (fixture_truth(SYMFIX, id, fn, sizeof fn, &line))
            continue;
        uint32_t node = node_of(&t, SYMFIX, id);
        CHECK(node != 0);
        size_t n = frames(&s, &r, node, &buf, &cap);
        CHECK(n >= 2);
        if (n < 2)
            continue;
        fprintf(stderr, "stack %u: %s line %d\n", id, fn, line);
        CHECK(streq(buf[0].sf ? buf[0].sf->function : NULL, fn));
        CHECK_EQ(buf[0].sf ? buf[0].sf->line : 0, line);
        const char *file = !strncmp(fn, "plugin_", 7) ? "plugin.c" : "symfix.c";
        CHECK(streq(base(buf[0].sf ? buf[0].sf->file : NULL), file));
        CHECK(streq(buf[n - 1].sf ? buf[n - 1].sf->function : NULL, "main"));
        CHECK(streq(base(ht__sym_mod(s.sym, buf[0].mod)->path),
                    !strncmp(fn, "plugin_a", 8) ? "libplugin_a.so"
                    : !strncmp(fn, "plugin_b", 8) ? "libplugin_b.so" : "symfix"));
        if (!strcmp(fn, "inlined_helper")) {
            /* one address, two frames: the inlined call, then its caller
             * at the line of the call (symfix.c: calls_inline) */
            CHECK_EQ(n, 3);
            CHECK_EQ(buf[0].sf->inlined, 1);
            CHECK(buf[0].sf->plain == NULL);    /* a C name: the plain one */
            CHECK_EQ(buf[1].addr, buf[0].addr);
            CHECK(streq(buf[1].sf ? buf[1].sf->function : NULL, "calls_inline"));
            CHECK_EQ(buf[1].sf ? buf[1].sf->inlined : 1, 0);
            CHECK_EQ(buf[1].sf ? buf[1].sf->line : 0, 34);  /* "inlined_helper();" */
        } else {
            CHECK_EQ(buf[0].sf->inlined, 0);
        }
        checked++;
    }
    CHECK_EQ(checked, 9);   /* every allocation site symfix has */
    /* the plugins were loaded at the same address one after the other */
    int pa = -1, pb = -1;
    for (size_t i = 0; i < t.nmodules; i++) {
        if (strstr(t.modules[i].path, "libplugin_a.so")) pa = (int)i;
        if (strstr(t.modules[i].path, "libplugin_b.so")) pb = (int)i;
    }
    CHECK(pa >= 0 && pb >= 0);
    if (pa >= 0 && pb >= 0 && t.modules[pa].start != t.modules[pb].start)
        fprintf(stderr, "note: the plugins did not reuse one address range this time\n");
    free(buf);
    ht__session_free(&s);
    fixture_free(&t);
}

/* Symbolizes `mod` of the symfix fixture as if it were at `path` with
 * build-id `bid` (NULL: the real one) and returns the innermost function
 * of the leak_big stack or NULL; `warn` receives the warnings. */
static const char *leak_big_as(const char *path, const uint8_t *bid, const char *debug_dir, FILE *warn,
                               ht_sym_t **keep)
{
    ht_trace_t t;
    char err[256];
    if (fixture_load(SYMFIX, &t, err, sizeof err))
        return NULL;
    unsigned id = 1;
    char fn[256];
    int line;
    while (id < 64 && (fixture_truth(SYMFIX, id, fn, sizeof fn, &line) || strcmp(fn, "leak_big")))
        id++;
    uint32_t node = node_of(&t, SYMFIX, id);
    uint64_t addr = t.nodes[node].addr;
    const ht_tmodule_t *m = NULL;
    for (size_t i = 0; i < t.nmodules; i++)
        if (strstr(t.modules[i].path, "/symfix"))
            m = &t.modules[i];
    ht_sym_t *s = ht__sym_new(debug_dir, warn);
    uint32_t h = ht__sym_module(s, path, bid ? bid : m->build_id, m->build_id_len);
    const ht_sloc_t *l = ht__sym_lookup(s, h, addr - m->bias, 0);
    const char *r = l->n ? l->f[0].function : NULL;
    fixture_free(&t);
    *keep = s;
    return r;
}

static void check_debuginfo(void)
{
    ht_sym_t *s;
    char *msg = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&msg, &len);
    /* stripped binary: nothing without the debug directory... */
    CHECK(leak_big_as(ADIR "/stripped/symfix", NULL, NULL, w, &s) == NULL);
    ht__sym_free(s);
    /* ...and the right names with it (found by build-id) */
    CHECK(streq(leak_big_as(ADIR "/stripped/symfix", NULL, ADIR "/debug", w, &s), "leak_big"));
    ht__sym_free(s);
    /* a file that is gone: the debug file with the trace's build-id */
    CHECK(streq(leak_big_as(ADIR "/no-such-file", NULL, ADIR "/debug", w, &s), "leak_big"));
    ht__sym_free(s);
    fflush(w);
    CHECK(strstr(msg, "no-such-file") && strstr(msg, "using the debug file"));
    /* a build-id mismatch: module+offset and a warning naming the file */
    uint8_t wrong[20];
    memset(wrong, 0xab, sizeof wrong);
    fseek(w, 0, SEEK_SET);
    CHECK(leak_big_as("build/tests/progs/symfix", wrong, ADIR "/debug", w, &s) == NULL);
    ht__sym_free(s);
    fputc(0, w);
    fflush(w);
    CHECK(strstr(msg, "build/tests/progs/symfix (build-id abababab") != NULL);
    CHECK(strstr(msg, "build-id mismatch; its frames are shown as module+offset") != NULL);
    fprintf(stderr, "warnings:\n%s", msg);
    fclose(w);
    free(msg);
}

static void check_cxx(void)
{
    ht_trace_t t;
    char err[256];
    CHECK(fixture_load(ADIR "/cxxfix.fix", &t, err, sizeof err) == 0);
    ht_opts_t o = { .top = 0 };
    ht_session_t s;
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, "cxx", &t);
    ht_report_t r;
    CHECK(ht__report_build(&s, -1, 0, &r, err, sizeof err) == 0);
    CHECK_EQ(r.nrows, 4);
    CHECK_EQ(r.total_bytes, 48 + 10 * sizeof(int) + 24 + 16);
    const char *want[] = { "Widget::Widget()", "ns::Pool<int>::grow(unsigned long)",
                           "Widget::operator+=(int)", "Widget::operator&=(int)" };
    /* and the linkage names they were demangled from (Valgrind's
     * suppressions match those); main's is its name: none */
    const char *want_linkage[] = { "_ZN6WidgetC2Ev", "_ZN2ns4PoolIiE4growEm", "_ZN6WidgetpLEi",
                                   "_ZN6WidgetaNEi" };
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < r.nrows && i < 4; i++) {
        size_t n = ht__row_frames(&r, &r.rows[i], &buf, &cap);
        CHECK(n == 2 && buf[0].sf && streq(buf[0].sf->function, want[i]));
        CHECK(n == 2 && buf[0].sf && streq(buf[0].sf->linkage, want_linkage[i]));
        CHECK(n == 2 && buf[1].sf && streq(buf[1].sf->function, "main"));
        CHECK(n == 2 && buf[1].sf && buf[1].sf->linkage == NULL);
    }
    /* the constructor's symbols: C1 and C2 at one address (Valgrind
     * shows either); a member function's: its own alone */
    for (size_t i = 0; i < r.nrows && i < 4; i++) {
        size_t n = ht__row_frames(&r, &r.rows[i], &buf, &cap);
        uint32_t na = 0;
        const char *const *a = n ? ht__sym_aliases(s.sym, buf[0].mod, buf[0].rel, 0, &na) : NULL;
        if (i == 0) {   /* in either order (equal symbols tie) */
            CHECK_EQ(na, 2);
            CHECK(na == 2 && ((!strcmp(a[0], "_ZN6WidgetC1Ev") && !strcmp(a[1], "_ZN6WidgetC2Ev")) ||
                              (!strcmp(a[1], "_ZN6WidgetC1Ev") && !strcmp(a[0], "_ZN6WidgetC2Ev"))));
        } else {
            CHECK_EQ(na, 1);
            CHECK(na == 1 && streq(a[0], want_linkage[i]));
        }
    }
    free(buf);
    ht__report_free(&r);
    ht__session_free(&s);
    fixture_free(&t);
    char *d = ht__demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
    CHECK(d && streq(d, "std::vector<int, std::allocator<int> >::push_back(int const&)"));
    free(d);
    CHECK(ht__demangle("main") == NULL);
    CHECK(ht__demangle("_Zbogus") == NULL);
}

int main(void)
{
    check_truths();
    check_debuginfo();
    check_cxx();
    return check_done();
}
