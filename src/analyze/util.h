/* util.h -- small helpers for the CLI (src/analyze): allocation that ends
 * the process with a clear message instead of returning NULL, a string
 * pool, a growable byte buffer, and number formatting.
 *
 * The CLI is an ordinary program: unlike src/core it may allocate and use
 * stdio freely. */
#ifndef HT_ANALYZE_UTIL_H
#define HT_ANALYZE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HT_INTERNAL __attribute__((visibility("hidden")))
#define HT_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* malloc/calloc/realloc/strdup that print "heaptrail: out of memory" and
 * exit(1) on failure: the CLI has no useful partial answer without memory. */
HT_INTERNAL void *ht__xmalloc(size_t n);
HT_INTERNAL void *ht__xcalloc(size_t n, size_t size);
HT_INTERNAL void *ht__xrealloc(void *p, size_t n);
HT_INTERNAL char *ht__xstrdup(const char *s);
HT_INTERNAL char *ht__xstrndup(const char *s, size_t n);
HT_INTERNAL char *ht__xasprintf(const char *fmt, ...) HT_PRINTF(1, 2);

/* Grows *arr (element size esz, capacity *cap) to hold at least `need`. */
HT_INTERNAL void ht__grow(void **arr, size_t *cap, size_t need, size_t esz);
#define HT_GROW(arr, cap, need) ht__grow((void **)&(arr), &(cap), (need), sizeof *(arr))

/* A string pool: ht__pool_intern returns one stable copy per distinct
 * string (so pointers can be compared for equality) and a dense index in
 * interning order. Strings live until ht__pool_free. */
typedef struct ht_pool_s {
    char **strs;            /* index -> string */
    uint32_t *slots;        /* open addressing: index + 1, 0 = empty */
    size_t n, cap, nslots;
    char *chunk; size_t chunk_left;   /* bump allocator for the bytes */
    char **chunks; size_t nchunks, chunks_cap;
} ht_pool_t;
HT_INTERNAL const char *ht__pool_intern(ht_pool_t *p, const char *s, size_t len,
                                        uint32_t *index);
HT_INTERNAL void ht__pool_free(ht_pool_t *p);

/* A growable byte buffer. */
typedef struct ht_buf_s { char *p; size_t len, cap; } ht_buf_t;
HT_INTERNAL void ht__buf_add(ht_buf_t *b, const void *data, size_t n);
HT_INTERNAL void ht__buf_puts(ht_buf_t *b, const char *s);
HT_INTERNAL void ht__buf_putc(ht_buf_t *b, char c);
HT_INTERNAL void ht__buf_printf(ht_buf_t *b, const char *fmt, ...) HT_PRINTF(2, 3);
HT_INTERNAL void ht__buf_free(ht_buf_t *b);

/* 64-bit hashing for the CLI's tables. */
static inline uint64_t ht__mix64(uint64_t h)
{
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}
HT_INTERNAL uint64_t ht__hash_bytes(const void *p, size_t n);

/* "1.5 KiB"-style size for human text (exact numbers go elsewhere). */
HT_INTERNAL const char *ht__human_bytes(uint64_t v, char buf[32]);

/* `one` for a count of 1 (or -1, a change), else `many`: "1 block", "2 blocks". */
static inline const char *ht__plural(int64_t n, const char *one, const char *many)
{
    return n == 1 || n == -1 ? one : many;
}

/* Seconds from a monotonic clock (for progress and benchmarks). */
HT_INTERNAL double ht__now(void);

#endif
