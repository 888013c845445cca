/* sym.c -- the symbolizer (see sym.h): one libdwfl session per module,
 * each module placed at address 0 so that dwfl addresses are the
 * link-time addresses the model hands us (runtime address - bias).
 *
 * Inline frames come from a per-CU index of function scopes (cu_index):
 * the scopes enclosing the pc, innermost first. The innermost function's
 * line is the line table's; each
 * inlined subroutine's DW_AT_call_file/DW_AT_call_line give the line in the
 * function it was inlined into, which is the next frame out. */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sym.h"

typedef struct cache_slot_s {
    uint64_t rel;
    uint32_t mod;           /* handle + 1; 0 = empty */
    uint32_t exact;
    const ht_sloc_t *loc;
} cache_slot_t;

struct ht_sym_s {
    ht_pool_t pool;
    ht_smod_t *mods;
    size_t nmods, mods_cap;
    cache_slot_t *cache;    /* open addressing, at most half full */
    size_t cache_n, cache_cap;
    char *debuginfo_path;   /* for Dwfl_Callbacks */
    char **debug_dirs;      /* absolute dirs searched by build-id */
    size_t ndebug_dirs;
    Dwfl_Callbacks cb;
    FILE *warn;
    int dfod_mode;          /* HT_DEBUGINFOD_* */
    int dfod_hinted;        /* the HINT note was written */
    struct dfod_s *dfod;    /* ASK: libdebuginfod, loaded */
    uint64_t hits, misses;
    ht_sloc_t empty;        /* n = 0 */
};

static void cu_index_free(ht_smod_t *m);
static int try_open(ht_sym_t *s, ht_smod_t *m, const char *file, const char **why);

ht_sym_t *ht__sym_new(const char *debug_dirs, FILE *warn)
{
    ht_sym_t *s = ht__xcalloc(1, sizeof *s);
    s->warn = warn;
    /* libdwfl searches by build-id only in absolute directories */
    ht_buf_t dirs = { 0 };
    ht__buf_puts(&dirs, ":.debug");
    char *copy0 = ht__xstrdup(debug_dirs ? debug_dirs : ""), *save0 = NULL;
    for (char *d = strtok_r(copy0, ":", &save0); d; d = strtok_r(NULL, ":", &save0)) {
        char *abs = realpath(d, NULL);
        ht__buf_putc(&dirs, ':');
        ht__buf_puts(&dirs, abs ? abs : d);
        free(abs);
    }
    free(copy0);
    ht__buf_puts(&dirs, ":/usr/lib/debug");
    s->debuginfo_path = dirs.p;
    /* the absolute directories, for our own by-build-id fallback */
    char *copy = ht__xstrdup(s->debuginfo_path), *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue;
        s->debug_dirs = ht__xrealloc(s->debug_dirs, (s->ndebug_dirs + 1) * sizeof(char *));
        s->debug_dirs[s->ndebug_dirs++] = ht__xstrdup(d);
    }
    free(copy);
    s->cb.find_elf = dwfl_build_id_find_elf;
    s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    s->cb.section_address = dwfl_offline_section_address;
    s->cb.debuginfo_path = &s->debuginfo_path;
    return s;
}

/* libdebuginfod, loaded on demand as libdw loads it (no link dependency;
 * the prototypes are debuginfod.h's). The client finds a file by build-id
 * in its cache (~/.cache/debuginfod_client) or downloads it, and returns
 * an open descriptor and the cached file's path. */
typedef struct debuginfod_client debuginfod_client;
typedef int (*dfod_find_fn)(debuginfod_client *, const unsigned char *, int, char **);
struct dfod_s {
    void *lib;
    debuginfod_client *client;
    dfod_find_fn find_debuginfo, find_executable;
    void (*end)(debuginfod_client *);
};

int ht__sym_debuginfod(ht_sym_t *s, int mode)
{
    s->dfod_mode = mode;
    if (mode != HT_DEBUGINFOD_ASK)
        return 0;
    struct dfod_s *d = ht__xcalloc(1, sizeof *d);
    debuginfod_client *(*begin)(void) = NULL;
    d->lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d->lib) {
        begin = (debuginfod_client * (*)(void)) dlsym(d->lib, "debuginfod_begin");
        d->find_debuginfo = (dfod_find_fn)dlsym(d->lib, "debuginfod_find_debuginfo");
        d->find_executable = (dfod_find_fn)dlsym(d->lib, "debuginfod_find_executable");
        d->end = (void (*)(debuginfod_client *))dlsym(d->lib, "debuginfod_end");
    }
    if (!begin || !d->find_debuginfo || !d->find_executable || !d->end || !(d->client = begin())) {
        if (d->lib)
            dlclose(d->lib);
        free(d);
        return -1;
    }
    s->dfod = d;
    return 0;
}

/* ASK: the module's file by build-id from debuginfod (what = 0: its debug
 * file, 1: the executable), opened; 1 usable, else not (why says). */
static int dfod_open(ht_sym_t *s, ht_smod_t *m, int what, const char **why)
{
    char *path = NULL;
    dfod_find_fn find = what ? s->dfod->find_executable : s->dfod->find_debuginfo;
    int fd = find(s->dfod->client, m->build_id, (int)m->build_id_len, &path);
    if (fd < 0) {
        *why = "debuginfod has no file for its build-id";
        free(path);
        return -1;
    }
    close(fd);
    int r = try_open(s, m, path, why);
    free(path);
    return r;
}

void ht__sym_free(ht_sym_t *s)
{
    if (!s)
        return;
    if (s->dfod) {
        s->dfod->end(s->dfod->client);
        dlclose(s->dfod->lib);
        free(s->dfod);
    }
    for (size_t i = 0; i < s->nmods; i++) {
        cu_index_free(&s->mods[i]);
        free(s->mods[i].syms);
        if (s->mods[i].dwfl)
            dwfl_end(s->mods[i].dwfl);
    }
    for (size_t i = 0; i < s->cache_cap; i++)
        if (s->cache[i].mod && s->cache[i].loc != &s->empty) {
            free(s->cache[i].loc->aliases);
            free((void *)s->cache[i].loc);
        }
    for (size_t i = 0; i < s->ndebug_dirs; i++)
        free(s->debug_dirs[i]);
    free(s->debug_dirs);
    free(s->cache);
    free(s->mods);
    free(s->debuginfo_path);
    ht__pool_free(&s->pool);
    free(s);
}

ht_pool_t *ht__sym_pool(ht_sym_t *s) { return &s->pool; }
uint32_t ht__sym_nmods(const ht_sym_t *s) { return (uint32_t)s->nmods; }
ht_smod_t *ht__sym_mod(ht_sym_t *s, uint32_t h) { return &s->mods[h]; }

void ht__sym_stats(const ht_sym_t *s, uint64_t *hits, uint64_t *misses)
{
    *hits = s->hits;
    *misses = s->misses;
}

uint32_t ht__sym_module(ht_sym_t *s, const char *path, const uint8_t *bid, uint32_t bidlen)
{
    if (bidlen > 64)
        bidlen = 64;
    for (size_t i = 0; i < s->nmods; i++) {
        ht_smod_t *m = &s->mods[i];
        if (bidlen ? (m->build_id_len == bidlen && !memcmp(m->build_id, bid, bidlen))
                   : (m->build_id_len == 0 && !strcmp(m->path, path)))
            return (uint32_t)i;
    }
    HT_GROW(s->mods, s->mods_cap, s->nmods + 1);
    ht_smod_t *m = &s->mods[s->nmods];
    memset(m, 0, sizeof *m);
    m->path = ht__pool_intern(&s->pool, path, strlen(path), NULL);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    m->name = ht__pool_intern(&s->pool, base, strlen(base), NULL);
    memcpy(m->build_id, bid, bidlen);
    m->build_id_len = bidlen;
    return (uint32_t)s->nmods++;
}

static void hex(char *out, const uint8_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = 0;
}

char *ht__build_id_path(const char *dir, const uint8_t *build_id, uint32_t n)
{
    char h[129];
    hex(h, build_id, n > 64 ? 64 : n);
    return ht__xasprintf("%s/.build-id/%.2s/%s.debug", dir, h, h + 2);
}

/* Reports `file` at address 0 in a new dwfl session; returns its build-id
 * match: 1 equal (or nothing to compare), 0 different, -1 not usable. */
static int try_open(ht_sym_t *s, ht_smod_t *m, const char *file, const char **why)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why = "cannot open the file";
        return -1;
    }
    Dwfl *dwfl = dwfl_begin(&s->cb);
    if (!dwfl) {
        close(fd);
        *why = "libdwfl failed";
        return -1;
    }
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_elf(dwfl, m->name, file, fd, 0, false);
    dwfl_report_end(dwfl, NULL, NULL);
    if (!mod) {     /* libdwfl closes fd on failure too */
        dwfl_end(dwfl);
        *why = "not an ELF file libdwfl can read";
        return -1;
    }
    GElf_Addr bias;
    dwfl_module_getelf(mod, &bias);
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (m->build_id_len && (n != (int)m->build_id_len || memcmp(bits, m->build_id, (size_t)n))) {
        dwfl_end(dwfl);
        *why = n > 0 ? "build-id mismatch" : "the file has no build-id";
        return 0;
    }
    m->dwfl = dwfl;
    m->dwmod = mod;
    Dwarf_Addr dbias;
    m->has_dwarf = dwfl_module_getdwarf(mod, &dbias) != NULL;
    return 1;
}

/* HINT: once, where a module has no debug info here */
static void dfod_hint(ht_sym_t *s, ht_smod_t *m)
{
    if (s->dfod_mode != HT_DEBUGINFOD_HINT || s->dfod_hinted || m->has_dwarf || !m->build_id_len || !s->warn)
        return;
    s->dfod_hinted = 1;
    fprintf(s->warn, "heaptrail: note: %s has no debug info here; DEBUGINFOD_URLS is set: "
                     "--debuginfod would ask its servers\n", m->path);
}

static void open_module(ht_sym_t *s, ht_smod_t *m)
{
    m->state = 2;
    /* pseudo-modules: nothing to open, nothing to warn about */
    if (m->path[0] == '[' || !strncmp(m->name, "linux-vdso", 10) || !m->path[0])
        return;
    const char *why = NULL;
    if (try_open(s, m, m->path, &why) == 1) {
        m->state = 1;
        dfod_hint(s, m);
        return;
    }
    /* The file is gone or was rebuilt: the debug file with the trace's
     * build-id still has the right symbols. */
    if (m->build_id_len > 1) {
        char h[129];
        hex(h, m->build_id, m->build_id_len);
        for (size_t i = 0; i < s->ndebug_dirs; i++) {
            char *p = ht__build_id_path(s->debug_dirs[i], m->build_id, m->build_id_len);
            const char *why2;
            int ok = try_open(s, m, p, &why2) == 1;
            free(p);
            if (ok) {
                m->state = 1;
                if (s->warn)
                    fprintf(s->warn, "heaptrail: warning: %s: %s; using the debug file with build-id %s\n",
                            m->path, why, h);
                return;
            }
        }
        /* then debuginfod, if asked: the debug file has the symbols too,
         * the executable at least its own */
        for (int what = 0; s->dfod && what < 2; what++) {
            const char *why2;
            if (dfod_open(s, m, what, &why2) == 1) {
                m->state = 1;
                if (s->warn)
                    fprintf(s->warn, "heaptrail: warning: %s: %s; using the %s with build-id %s from debuginfod\n",
                            m->path, why, what ? "executable" : "debug file", h);
                return;
            }
        }
    }
    dfod_hint(s, m);
    if (s->warn) {
        char h[129] = "none";
        if (m->build_id_len)
            hex(h, m->build_id, m->build_id_len);
        fprintf(s->warn, "heaptrail: warning: %s (build-id %s): %s; its frames are shown as module+offset\n",
                m->path, h, why);
    }
}

static const char *pooled(ht_sym_t *s, const char *str)
{
    return str ? ht__pool_intern(&s->pool, str, strlen(str), NULL) : NULL;
}

/* name demangled, pooled; *linkage: name itself, pooled, when it was
 * demangled (Valgrind's suppressions match mangled names), else NULL */
static const char *pooled_name(ht_sym_t *s, const char *name, const char **linkage)
{
    *linkage = NULL;
    if (!name)
        return NULL;
    char *d = ht__demangle(name);
    if (!d)
        return pooled(s, name);
    const char *r = pooled(s, d);
    if (strcmp(d, name) != 0)
        *linkage = pooled(s, name);
    free(d);
    return r;
}

/* The best name of a subprogram or inlined subroutine DIE: the demangled
 * linkage name (qualified, with parameter types) or the plain name;
 * *linkage as pooled_name's. */
static const char *die_name(ht_sym_t *s, Dwarf_Die *die, const char **linkage)
{
    Dwarf_Attribute a;
    const char *ln = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
        ln = dwarf_formstring(&a);
    if (ln)
        return pooled_name(s, ln, linkage);
    *linkage = NULL;
    return pooled(s, dwarf_diename(die));
}

#define MAX_INLINE 64

static ht_sloc_t *new_loc(uint32_t n)
{
    ht_sloc_t *l = ht__xcalloc(1, sizeof *l + n * sizeof(ht_sframe_t));
    l->n = n;
    return l;
}

/* The module's function symbols sorted by address, built on first use:
 * dwfl_module_addrinfo scans the whole symbol table on every call, which
 * dominated symbolizing code that has no DWARF subprogram (assembly). */
typedef struct fsym_s {
    uint64_t addr, size;
    const char *name;       /* in the ELF string table (lives with the dwfl) */
    int bind;               /* GELF_ST_BIND */
} fsym_t;

int ht__sym_tie(int bind_a, uint64_t size_a, int bind_b, uint64_t size_b)
{
    int ga = bind_a == STB_GLOBAL || bind_a == STB_WEAK;
    int gb = bind_b == STB_GLOBAL || bind_b == STB_WEAK;
    if (ga != gb)
        return ga ? -1 : 1;
    return size_a > size_b ? -1 : size_a < size_b;
}

int ht__sym_is_function(const GElf_Sym *sym)
{
    int type = GELF_ST_TYPE(sym->st_info);
    return sym->st_shndx != SHN_UNDEF && (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE);
}

static int cmp_fsym(const void *a, const void *b)
{
    const fsym_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return ht__sym_tie(x->bind, x->size, y->bind, y->size);
}

static void symtab_build(ht_smod_t *m)
{
    Dwfl_Module *mod = m->dwmod;
    int n = dwfl_module_getsymtab(mod);
    fsym_t *v = ht__xmalloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    size_t k = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
        if (!name || !*name || !ht__sym_is_function(&sym))
            continue;
        v[k++] = (fsym_t){ addr, sym.st_size, name, GELF_ST_BIND(sym.st_info) };
    }
    qsort(v, k, sizeof *v, cmp_fsym);
    m->syms = v;
    m->nsyms = k;
    m->syms_built = 1;
}

/* The index of the symbol naming pc: among the symbols at the start
 * address the first (global) one, unless a sized symbol ends before pc;
 * or -1. */
static ptrdiff_t symtab_find(ht_smod_t *m, uint64_t pc)
{
    if (!m->syms_built)
        symtab_build(m);
    const fsym_t *v = m->syms;
    size_t lo = 0, hi = m->nsyms;       /* first symbol above pc */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return -1;
    size_t i = lo - 1;
    while (i > 0 && v[i - 1].addr == v[i].addr)
        i--;
    if (v[i].size && pc >= v[i].addr + v[i].size)
        return -1;
    return (ptrdiff_t)i;
}

static const char *symtab_name(ht_sym_t *s, ht_smod_t *m, uint64_t pc, const char **linkage)
{
    *linkage = NULL;
    ptrdiff_t i = symtab_find(m, pc);
    return i < 0 ? NULL : pooled_name(s, ((const fsym_t *)m->syms)[i].name, linkage);
}

const char *const *ht__sym_aliases(ht_sym_t *s, uint32_t h, uint64_t rel, int exact, uint32_t *n)
{
    ht_sloc_t *l = (ht_sloc_t *)ht__sym_lookup(s, h, rel, exact);
    *n = 0;
    if (l == &s->empty)
        return NULL;
    if (!l->aliases_known) {
        l->aliases_known = 1;
        ht_smod_t *m = &s->mods[h];
        ptrdiff_t i = m->state == 1 ? symtab_find(m, exact ? rel : rel - 1) : -1;
        const fsym_t *v = m->syms;
        size_t k = 0, cap = 0;
        for (size_t j = (size_t)i; i >= 0 && j < m->nsyms && v[j].addr == v[i].addr; j++) {
            HT_GROW(l->aliases, cap, k + 1);
            l->aliases[k++] = pooled(s, v[j].name);
        }
        l->naliases = (uint32_t)k;
    }
    *n = l->naliases;
    return l->aliases;
}

/* A per-CU index of function scopes, built once per CU on its first
 * lookup: every subprogram and inlined-subroutine DIE with code, its
 * parent scope, and its address ranges sorted by start. dwarf_getscopes
 * walks the CU's DIE tree on every call, which made symbolizing libc's
 * code cost ~170 us an address; with the index a lookup is a binary
 * search and a walk up the parents. Ranges of DWARF scopes nest (a
 * scope's code lies inside its parent's), so the innermost scope holding
 * pc is the last range starting at or before pc, or one of its parents. */
typedef struct scope_s {
    Dwarf_Die die;
    int32_t parent;         /* enclosing scope (index), -1: none */
    uint32_t rfirst, rn;    /* its ranges: cu_index.ranges[rfirst..+rn) */
} scope_t;

typedef struct srange_s {
    uint64_t lo, hi;
    uint32_t scope;
} srange_t;

typedef struct cu_index_s {
    uint64_t key;           /* CU DIE offset + 1 */
    scope_t *scopes;
    size_t nscopes, scap;
    srange_t *ranges;       /* in scope order, then sorted copy below */
    size_t nranges, rcap;
    uint32_t *sorted;       /* range indexes sorted by (lo, -hi) */
} cu_index_t;

static void index_walk(cu_index_t *x, Dwarf_Die *parent_die, int32_t parent, int depth)
{
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent_die, &child) != 0)
        return;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
            tag == DW_TAG_entry_point) {
            uint32_t first = (uint32_t)x->nranges;
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (hi <= lo)
                    continue;
                HT_GROW(x->ranges, x->rcap, x->nranges + 1);
                x->ranges[x->nranges++] = (srange_t){ lo, hi, (uint32_t)x->nscopes };
            }
            if (x->nranges == first)
                continue;       /* a declaration or an abstract instance: no code */
            HT_GROW(x->scopes, x->scap, x->nscopes + 1);
            int32_t me = (int32_t)x->nscopes++;
            x->scopes[me] = (scope_t){ child, parent, first, (uint32_t)x->nranges - first };
            index_walk(x, &child, me, depth + 1);
        } else if (tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
                   tag == DW_TAG_module) {
            index_walk(x, &child, parent, depth + 1);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

static const srange_t *sort_base;
static int cmp_range(const void *a, const void *b)
{
    const srange_t *x = &sort_base[*(const uint32_t *)a], *y = &sort_base[*(const uint32_t *)b];
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi)
        return x->hi > y->hi ? -1 : 1;  /* the outer scope first */
    return x->scope < y->scope ? -1 : x->scope > y->scope;
}

static int scope_holds(const cu_index_t *x, int32_t sc, uint64_t pc)
{
    const scope_t *s = &x->scopes[sc];
    for (uint32_t i = 0; i < s->rn; i++) {
        const srange_t *r = &x->ranges[s->rfirst + i];
        if (r->lo <= pc && pc < r->hi)
            return 1;
    }
    return 0;
}

/* The innermost scope holding pc, or -1. */
static int32_t index_find(const cu_index_t *x, uint64_t pc)
{
    size_t lo = 0, hi = x->nranges;     /* first sorted range with lo > pc */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->ranges[x->sorted[mid]].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    for (int32_t sc = (int32_t)x->ranges[x->sorted[lo - 1]].scope; sc >= 0; sc = x->scopes[sc].parent)
        if (scope_holds(x, sc, pc))
            return sc;
    return -1;
}

static cu_index_t *cu_index(ht_smod_t *m, Dwarf_Die *cu)
{
    cu_index_t **tab = (cu_index_t **)m->cu_tab;
    uint64_t key = dwarf_dieoffset(cu) + 1;
    if (m->cu_n * 2 >= m->cu_cap) {
        size_t nc = m->cu_cap ? m->cu_cap * 2 : 64;
        cu_index_t **t = ht__xcalloc(nc, sizeof *t);
        for (size_t i = 0; i < m->cu_cap; i++) {
            if (!tab[i])
                continue;
            size_t j = ht__mix64(tab[i]->key) & (nc - 1);
            while (t[j])
                j = (j + 1) & (nc - 1);
            t[j] = tab[i];
        }
        free(tab);
        m->cu_tab = (void **)(tab = t);
        m->cu_cap = nc;
    }
    size_t j = ht__mix64(key) & (m->cu_cap - 1);
    while (tab[j]) {
        if (tab[j]->key == key)
            return tab[j];
        j = (j + 1) & (m->cu_cap - 1);
    }
    cu_index_t *x = ht__xcalloc(1, sizeof *x);
    x->key = key;
    index_walk(x, cu, -1, 0);
    x->sorted = ht__xmalloc((x->nranges + 1) * sizeof *x->sorted);
    for (size_t i = 0; i < x->nranges; i++)
        x->sorted[i] = (uint32_t)i;
    sort_base = x->ranges;
    qsort(x->sorted, x->nranges, sizeof *x->sorted, cmp_range);
    tab[j] = x;
    m->cu_n++;
    return x;
}

static void cu_index_free(ht_smod_t *m)
{
    cu_index_t **tab = (cu_index_t **)m->cu_tab;
    for (size_t i = 0; i < m->cu_cap; i++)
        if (tab[i]) {
            free(tab[i]->scopes);
            free(tab[i]->ranges);
            free(tab[i]->sorted);
            free(tab[i]);
        }
    free(tab);
    m->cu_tab = NULL;
    m->cu_cap = m->cu_n = 0;
}

static const ht_sloc_t *resolve(ht_sym_t *s, ht_smod_t *m, uint64_t pc)
{
    Dwfl_Module *mod = m->dwmod;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = m->has_dwarf ? dwfl_module_addrdie(mod, pc, &bias) : NULL;
    if (!cu) {
        const char *linkage;
        const char *name = symtab_name(s, m, pc, &linkage);
        if (!name)
            return &s->empty;
        ht_sloc_t *l = new_loc(1);
        l->f[0].function = name;
        l->f[0].linkage = linkage;
        return l;
    }
    /* the scopes holding pc, innermost first: inlined calls, then the
     * function they were inlined into (physical nesting, not the abstract
     * definitions dwarf_getscopes would follow) */
    cu_index_t *x = cu_index(m, cu);
    Dwarf_Die *fn[MAX_INLINE];
    int nfn = 0;
    for (int32_t sc = index_find(x, pc - bias); sc >= 0 && nfn < MAX_INLINE; sc = x->scopes[sc].parent)
        fn[nfn++] = &x->scopes[sc].die;
    /* the innermost line from the line table */
    const char *file = NULL;
    int line = 0;
    Dwarf_Line *dl = dwarf_getsrc_die(cu, pc - bias);
    if (dl) {
        file = dwarf_linesrc(dl, NULL, NULL);
        dwarf_lineno(dl, &line);
    }
    ht_sloc_t *l = new_loc(nfn ? (uint32_t)nfn : 1);
    if (!nfn) {     /* code the DWARF has no subprogram for (assembly, say) */
        l->f[0].function = symtab_name(s, m, pc, &l->f[0].linkage);
        l->f[0].file = pooled(s, file);
        l->f[0].line = line > 0 ? (uint32_t)line : 0;
        if (!l->f[0].function && !l->f[0].file) {
            free(l);
            return &s->empty;
        }
        return l;
    }
    uint32_t used = 0;
    for (int i = 0; i < nfn; i++) {
        l->f[i].function = die_name(s, fn[i], &l->f[i].linkage);
        l->f[i].file = pooled(s, file);
        l->f[i].line = line > 0 ? (uint32_t)line : 0;
        used = (uint32_t)i + 1;
        if (dwarf_tag(fn[i]) != DW_TAG_inlined_subroutine)
            break;
        /* fn[i] was inlined: its call site is the next frame's location */
        l->f[i].inlined = 1;
        const char *plain = dwarf_diename(fn[i]);
        if (plain && l->f[i].function && strcmp(plain, l->f[i].function))
            l->f[i].plain = pooled(s, plain);
        file = NULL;
        line = 0;
        Dwarf_Attribute a;
        Dwarf_Word w;
        if (dwarf_attr(fn[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0) {
            Dwarf_Die cudie;
            Dwarf_Files *files;
            size_t nfiles;
            if (dwarf_diecu(fn[i], &cudie, NULL, NULL) &&
                dwarf_getsrcfiles(&cudie, &files, &nfiles) == 0 && w < nfiles)
                file = dwarf_filesrc(files, w, NULL, NULL);
        }
        if (dwarf_attr(fn[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
            line = (int)w;
    }
    /* the outermost scope's name must be a real function; fill gaps from
     * the symbol table (a subprogram without a name, say) */
    l->n = used;
    for (uint32_t i = 0; i < used; i++)
        if (!l->f[i].function && !l->f[i].inlined)
            l->f[i].function = symtab_name(s, m, pc, &l->f[i].linkage);
    return l;
}

const ht_sloc_t *ht__sym_lookup(ht_sym_t *s, uint32_t h, uint64_t rel, int exact)
{
    if (s->cache_n * 2 >= s->cache_cap) {
        size_t nc = s->cache_cap ? s->cache_cap * 2 : 4096;
        cache_slot_t *c = ht__xcalloc(nc, sizeof *c);
        for (size_t i = 0; i < s->cache_cap; i++) {
            cache_slot_t *o = &s->cache[i];
            if (!o->mod)
                continue;
            size_t j = ht__mix64(o->rel * 31 + o->mod * 2 + o->exact) & (nc - 1);
            while (c[j].mod)
                j = (j + 1) & (nc - 1);
            c[j] = *o;
        }
        free(s->cache);
        s->cache = c;
        s->cache_cap = nc;
    }
    uint32_t key = h + 1, ex = exact ? 1 : 0;
    size_t j = ht__mix64(rel * 31 + key * 2 + ex) & (s->cache_cap - 1);
    while (s->cache[j].mod) {
        cache_slot_t *c = &s->cache[j];
        if (c->mod == key && c->rel == rel && c->exact == ex) {
            s->hits++;
            return c->loc;
        }
        j = (j + 1) & (s->cache_cap - 1);
    }
    s->misses++;
    ht_smod_t *m = &s->mods[h];
    if (m->state == 0)
        open_module(s, m);
    const ht_sloc_t *loc = &s->empty;
    if (m->state == 1 && (exact || rel > 0))
        loc = resolve(s, m, exact ? rel : rel - 1);
    s->cache[j] = (cache_slot_t){ rel, key, ex, loc };
    s->cache_n++;
    return loc;
}
