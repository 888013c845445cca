/* suppress.h -- leak suppressions, in LeakSanitizer's file format: one
 * `leak:PATTERN` a line, `#` comments and blank lines ignored. A stack is
 * suppressed when one of its frames matches a pattern: its function
 * (demangled, inlined functions included), its source file, or its
 * module's path or file name; JIT frames by the name their runtime gave
 * the code. Patterns match anywhere in the string (a substring) unless
 * anchored: `^` at the start, `$` at the end; `*` matches any run of
 * characters (LeakSanitizer's rules). */
#ifndef HT_ANALYZE_SUPPRESS_H
#define HT_ANALYZE_SUPPRESS_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"

typedef struct ht_supp_s {
    char **pat;                 /* the patterns, as written after "leak:" */
    char **glob;                /* each as a whole-string glob: unanchored
                                   ends become '*' ("c$" is "*c") */
    size_t n, cap;
    /* what each pattern suppressed: the first pattern that matches the
     * innermost matching frame gets the stack */
    uint64_t *sites, *blocks, *bytes;
    /* and of custom allocator blocks, kept apart (they lie inside heap
     * blocks or mappings: counted with them, they would count twice) */
    uint64_t *custom_sites, *custom_blocks, *custom_bytes;
    /* per input (a diff has two): per node, the pattern matching it or a
     * frame further out, -1 none, -2 not known yet */
    int32_t *memo[2];
    size_t nmemo[2];
    const void *memo_for[2];    /* the trace each is for */
} ht_supp_t;

/* Adds the patterns of file `path`. Returns 0, or -1 with a message
 * naming the file and line in err. */
HT_INTERNAL int ht__supp_load(ht_supp_t *s, const char *path, char *err, size_t errlen);
HT_INTERNAL void ht__supp_free(ht_supp_t *s);

/* The pattern suppressing the stack whose innermost node is `node` in
 * input `input` of session ses, or -1. Each node is looked at once. */
HT_INTERNAL int ht__supp_match(ht_supp_t *s, ht_session_t *ses, uint32_t input, uint32_t node);

/* Counts a site pattern p left out, with its blocks and bytes, in p's
 * figures: a custom allocator site's (`custom`) apart. */
HT_INTERNAL void ht__supp_count(ht_supp_t *s, int p, int custom, uint64_t blocks, uint64_t bytes);

#endif
