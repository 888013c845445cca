/* sym.h -- offline symbolization with elfutils' libdwfl: module-relative
 * addresses to function names (C++ demangled), inline frames and
 * file:line.
 *
 * Every module is opened from the path and build-id the trace recorded,
 * never from /proc of a live process. The file's build-id is checked
 * against the trace's; on a mismatch or a missing file the debug
 * directories are searched by build-id (/usr/lib/debug/.build-id/xx/rest.debug)
 * and, failing that, a warning is printed once and the module's frames
 * stay module+offset: a wrong name is never shown. Separate debug info
 * (.gnu_debuglink or .build-id) is found by libdwfl's standard callbacks.
 *
 * Results are cached per (module, address); each module is opened once,
 * on its first lookup. */
#ifndef HT_ANALYZE_SYM_H
#define HT_ANALYZE_SYM_H

#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include "util.h"

/* One source-level frame. An address expands to one or more: the
 * functions inlined at it, innermost first, then the real function. */
typedef struct ht_sframe_s {
    const char *function;   /* demangled; NULL when unknown */
    const char *linkage;    /* the linkage (mangled) name function was
                               demangled from; NULL when there is none or it
                               is function itself (C) */
    const char *plain;      /* an inlined frame's plain name (DW_AT_name:
                               "insert" for ns::Store::insert(int), as
                               Valgrind names inlined calls) when it is not
                               function; else NULL */
    const char *file;       /* full path as in the debug info; NULL when unknown */
    uint32_t line;          /* 0 when unknown */
    uint8_t inlined;        /* this function's code was inlined into the next frame's */
} ht_sframe_t;

typedef struct ht_sloc_s {
    uint32_t n;             /* 0: nothing is known beyond module+offset */
    /* private: ht__sym_aliases' answer, once asked */
    uint32_t naliases;
    int aliases_known;
    const char **aliases;
    ht_sframe_t f[];        /* innermost first */
} ht_sloc_t;

/* A module as the symbolizer knows it: one per distinct (build-id, path). */
typedef struct ht_smod_s {
    const char *path;       /* pooled */
    const char *name;       /* basename of path, pooled */
    uint8_t build_id[64];
    uint32_t build_id_len;
    int well_tested;        /* set by the caller (see --well-tested) */
    uint64_t start, end, bias;  /* its first mapping seen (for pprof mappings) */
    /* private */
    int state;              /* 0 not opened yet, 1 usable, 2 unusable */
    void *dwfl, *dwmod;
    int has_dwarf;
    void **cu_tab;          /* CU offset -> scope index (sym.c) */
    size_t cu_n, cu_cap;
    void *syms;             /* sorted function symbols (sym.c) */
    size_t nsyms;
    int syms_built;
} ht_smod_t;

typedef struct ht_sym_s ht_sym_t;

/* A new symbolizer. `debug_dirs`: extra directories (colon-separated) to
 * search for separate debug info before /usr/lib/debug; may be NULL.
 * Warnings go to `warn` (stderr in the CLI; NULL: silent). */
HT_INTERNAL ht_sym_t *ht__sym_new(const char *debug_dirs, FILE *warn);
HT_INTERNAL void ht__sym_free(ht_sym_t *s);

/* debuginfod (`--debuginfod`): OFF, DEBUGINFOD_URLS not set; HINT, set but
 * not to be asked (cmd.c unset it; a module without debug info gets one
 * note saying --debuginfod would ask); ASK, libdwfl's standard callbacks
 * fetch separate debug info from its servers, and a module whose file is
 * gone or rebuilt is fetched by build-id (its debug file, else the
 * executable). ASK loads libdebuginfod.so.1; returns -1 if it cannot. */
enum { HT_DEBUGINFOD_OFF = 0, HT_DEBUGINFOD_HINT, HT_DEBUGINFOD_ASK };
HT_INTERNAL int ht__sym_debuginfod(ht_sym_t *s, int mode);

/* The module handle for (path, build-id); equal build-ids (or, without a
 * build-id, equal paths) give the same handle. */
HT_INTERNAL uint32_t ht__sym_module(ht_sym_t *s, const char *path,
                                    const uint8_t *build_id, uint32_t build_id_len);
HT_INTERNAL ht_smod_t *ht__sym_mod(ht_sym_t *s, uint32_t handle);
HT_INTERNAL uint32_t ht__sym_nmods(const ht_sym_t *s);

/* Symbolizes the link-time address `rel` of module `handle`. `exact` = 0
 * for return addresses (the call instruction before rel is looked up),
 * 1 for the address of the instruction itself. The result is cached and
 * lives as long as the symbolizer. Never NULL. */
HT_INTERNAL const ht_sloc_t *ht__sym_lookup(ht_sym_t *s, uint32_t handle, uint64_t rel,
                                            int exact);

/* The names of the function symbols at the start of the symbol whose
 * code holds the address (as ht__sym_lookup's arguments), as the symbol
 * table spells them: aliases, such as glibc's strdup beside __strdup, or a
 * constructor's C1 and C2 names, where a frame shows one name (Valgrind
 * may show another). *n = 0 when the symbol table has none. Cached with
 * the address's lookup; the array lives as long as the symbolizer. */
HT_INTERNAL const char *const *ht__sym_aliases(ht_sym_t *s, uint32_t handle, uint64_t rel, int exact,
                                               uint32_t *n);

/* The symbolizer's string pool (names and files are interned there). */
HT_INTERNAL ht_pool_t *ht__sym_pool(ht_sym_t *s);

/* Counters for benchmarks: lookups answered from the cache, and misses. */
HT_INTERNAL void ht__sym_stats(const ht_sym_t *s, uint64_t *hits, uint64_t *misses);

/* The separate debug file for a build-id under `dir`:
 * DIR/.build-id/xx/rest.debug, malloc'd (n >= 2). */
HT_INTERNAL char *ht__build_id_path(const char *dir, const uint8_t *build_id, uint32_t n);

/* Which of two function symbols at one address names it: < 0 the first
 * (a global or weak one first, then the larger), > 0 the second, 0 either.
 * `bind`: GELF_ST_BIND of st_info. Shared by the analyzer's symbol-table
 * names and `heaptrail run`'s summary, so both choose alike. */
HT_INTERNAL int ht__sym_tie(int bind_a, uint64_t size_a, int bind_b, uint64_t size_b);
/* Whether a symbol-table entry can name code: defined, and a function, an
 * ifunc or untyped (hand-written assembly). */
HT_INTERNAL int ht__sym_is_function(const GElf_Sym *sym);

/* Demangles a C++ (Itanium ABI) name; returns a malloc'd string or NULL
 * when `name` is not a mangled name. */
HT_INTERNAL char *ht__demangle(const char *name);

#endif
