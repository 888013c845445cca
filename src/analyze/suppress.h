/* suppress.h -- leak suppressions, in either of two file formats (one file
 * may mix them):
 *
 * LeakSanitizer's: one `leak:PATTERN` a line, `#` comments and blank
 * lines ignored. A stack is suppressed when one of its frames matches a
 * pattern: its function (demangled, inlined functions included), its
 * source file, or its module's path or file name; JIT frames by the name
 * their runtime gave the code. Patterns match anywhere in the string (a
 * substring) unless anchored: `^` at the start, `$` at the end; `*`
 * matches any run of characters (LeakSanitizer's rules).
 *
 * Valgrind memcheck's: blocks between a `{` line and a `}` line: a name,
 * a kind line `TOOL[,TOOL...]:KIND`, for `Memcheck:Leak` an optional
 * `match-leak-kinds:` line (read, checked, not used: a site is suppressed
 * as a whole), then frame lines `fun:GLOB`, `obj:GLOB`, `src:FILE[:LINE]`
 * and `...`. Blocks of other tools and other kinds are read and counted
 * (vg_ignored), never matched. A block matches a prefix of the stack, as
 * Valgrind shows it: from its innermost source-level frame (inlined calls
 * first), the i-th frame line the i-th frame, `...` any number of frames;
 * the frames left over once every line is used do not matter. A heap
 * stack begins, for Valgrind, in the allocator (malloc, operator new, ...
 * in vgpreload_memcheck), heaptrail's at the allocator's caller: a heap
 * site's stack gets that frame in front. `fun:` globs match a function's
 * mangled name, its demangled one, the other symbol names at its address
 * (glibc's strdup is __strdup) and an inlined function's plain name (what
 * Valgrind shows for it), `obj:` its module's path, `src:` its file's
 * name (or path) and line; `*` and `?` are wildcards over the whole
 * name, a `\` takes the next character as it is. Custom allocator sites get no allocator frame (Valgrind's
 * mempool stacks begin at the pool's code); mappings are never matched
 * by a block (Valgrind does not report them). */
#ifndef HT_ANALYZE_SUPPRESS_H
#define HT_ANALYZE_SUPPRESS_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"

enum { HT_VG_FUN = 0, HT_VG_OBJ, HT_VG_SRC, HT_VG_ANY };

/* One frame line of a Valgrind block. */
typedef struct ht_vgframe_s {
    uint8_t type;               /* HT_VG_* (ANY: `...`) */
    uint8_t literal;            /* pat has no wildcard or escape: compared whole */
    uint8_t alloc;              /* it matches the allocator frame of a heap stack */
    uint32_t line;              /* src: the line number, 0 any */
    uint64_t bit;               /* its prefilter bit (suppress.c), 0 none */
    char *pat;                  /* the glob (src: without its line) */
} ht_vgframe_t;

typedef struct ht_vgblock_s {
    uint32_t n;                 /* frame lines */
    uint64_t need;              /* the bits of its lines a stack must have
                                   (suppress.c: the prefilter) */
    ht_vgframe_t f[];
} ht_vgblock_t;

typedef struct ht_supp_s {
    /* the entries in file order: `leak:` lines and Valgrind Memcheck:Leak
     * blocks */
    char **pat;                 /* a pattern as written after "leak:"; a block's name */
    char **glob;                /* each pattern as a whole-string glob: unanchored
                                   ends become '*' ("c$" is "*c"); NULL: a block */
    ht_vgblock_t **vg;          /* a block's frame lines; NULL: a leak: line */
    size_t n, cap;
    uint32_t *leak_ix, *vg_ix;  /* the entries of each format, in file order */
    size_t nleak, nvg;
    size_t vg_ignored;          /* Valgrind blocks for other tools or kinds */
    /* what each entry suppressed: the first pattern that matches the
     * innermost matching frame gets the stack; else the first block that
     * matches it */
    uint64_t *sites, *blocks, *bytes;
    /* and of custom allocator blocks, kept apart (they lie inside heap
     * blocks or mappings: counted with them, they would count twice) */
    uint64_t *custom_sites, *custom_blocks, *custom_bytes;
    /* per input (a diff has two): per node, the pattern matching it or a
     * frame further out, -1 none, -2 not known yet */
    int32_t *memo[2];
    /* per input, for stacks of heap sites [0] and custom sites [1]: per
     * innermost node, the block matching the stack, -1 none, -2 not known
     * yet (a prefix match: nothing a node's callers could reuse) */
    int32_t *vmemo[2][2];
    /* per input: per node, the prefilter's bits of its frames and those
     * further out, bit 63: known */
    uint64_t *vbits[2];
    size_t nmemo[2];
    const void *memo_for[2];    /* the trace each is for */
    /* private (suppress.c) */
    void *frames;               /* a stack's frames as blocks see them */
    size_t frames_cap;
    struct vindex_s *vindex;    /* the prefilter's index of the frame lines */
    struct ownmemo_s *own;      /* per code address: what its own frames match */
} ht_supp_t;

/* Adds the suppressions of file `path`. Returns 0, or -1 with a message
 * naming the file and line in err. */
HT_INTERNAL int ht__supp_load(ht_supp_t *s, const char *path, char *err, size_t errlen);
HT_INTERNAL void ht__supp_free(ht_supp_t *s);

/* The entry suppressing the stack whose innermost node is `node` in
 * input `input` of session ses, for a site of kind `kind` (HT_KIND_*),
 * or -1. Each node is matched against the leak: lines once, and each
 * stack of each kind against the blocks once. */
HT_INTERNAL int ht__supp_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node, int kind);

/* Writes entry i as reports name it: `leak:PATTERN`, a Valgrind block
 * `{NAME}` (control characters as '?'). */
HT_INTERNAL void ht__supp_put_name(FILE *f, const ht_supp_t *s, size_t i);

/* Counts a site entry p left out, with its blocks and bytes, in p's
 * figures: a custom allocator site's (`custom`) apart. */
HT_INTERNAL void ht__supp_count(ht_supp_t *s, int p, int custom, uint64_t blocks, uint64_t bytes);

#endif
