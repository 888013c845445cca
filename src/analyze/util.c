/* util.c -- allocation, string pool, byte buffer and formatting helpers
 * of the CLI. Nothing here runs inside a traced process. */
#include "util.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void oom(void)
{
    fputs("heaptrail: out of memory\n", stderr);
    exit(1);
}

void *ht__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *ht__xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *ht__xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

char *ht__xstrdup(const char *s)
{
    return ht__xstrndup(s, strlen(s));
}

char *ht__xstrndup(const char *s, size_t n)
{
    char *d = ht__xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *ht__xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    va_end(ap);
    return s;
}

void ht__grow(void **arr, size_t *cap, size_t need, size_t esz)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 8;
    while (c < need) {
        if (c > SIZE_MAX / 2 / esz)
            oom();
        c *= 2;
    }
    *arr = ht__xrealloc(*arr, c * esz);
    *cap = c;
}

uint64_t ht__hash_bytes(const void *p, size_t n)
{
    /* FNV-1a folded through a finalizer: strings here are short names. */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return ht__mix64(h ^ n);
}

static char *pool_bytes(ht_pool_t *p, size_t n)
{
    if (n > p->chunk_left) {
        size_t sz = n > 65536 ? n : 65536;
        HT_GROW(p->chunks, p->chunks_cap, p->nchunks + 1);
        p->chunk = p->chunks[p->nchunks++] = ht__xmalloc(sz);
        p->chunk_left = sz;
    }
    char *r = p->chunk;
    p->chunk += n;
    p->chunk_left -= n;
    return r;
}

const char *ht__pool_intern(ht_pool_t *p, const char *s, size_t len, uint32_t *index)
{
    if (p->n * 2 >= p->nslots) {            /* at most half full */
        size_t ns = p->nslots ? p->nslots * 2 : 1024;
        uint32_t *slots = ht__xcalloc(ns, sizeof *slots);
        for (size_t i = 0; i < p->n; i++) {
            size_t j = ht__hash_bytes(p->strs[i], strlen(p->strs[i])) & (ns - 1);
            while (slots[j])
                j = (j + 1) & (ns - 1);
            slots[j] = (uint32_t)i + 1;
        }
        free(p->slots);
        p->slots = slots;
        p->nslots = ns;
    }
    size_t j = ht__hash_bytes(s, len) & (p->nslots - 1);
    while (p->slots[j]) {
        const char *t = p->strs[p->slots[j] - 1];
        if (strncmp(t, s, len) == 0 && t[len] == 0) {
            if (index)
                *index = p->slots[j] - 1;
            return t;
        }
        j = (j + 1) & (p->nslots - 1);
    }
    char *d = pool_bytes(p, len + 1);
    memcpy(d, s, len);
    d[len] = 0;
    HT_GROW(p->strs, p->cap, p->n + 1);
    p->strs[p->n] = d;
    p->slots[j] = (uint32_t)++p->n;
    if (index)
        *index = (uint32_t)p->n - 1;
    return d;
}

void ht__pool_free(ht_pool_t *p)
{
    for (size_t i = 0; i < p->nchunks; i++)
        free(p->chunks[i]);
    free(p->chunks);
    free(p->strs);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

void ht__buf_add(ht_buf_t *b, const void *data, size_t n)
{
    HT_GROW(b->p, b->cap, b->len + n + 1);
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ht__buf_puts(ht_buf_t *b, const char *s)
{
    ht__buf_add(b, s, strlen(s));
}

void ht__buf_putc(ht_buf_t *b, char c)
{
    ht__buf_add(b, &c, 1);
}

void ht__buf_printf(ht_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        ht__buf_add(b, tmp, (size_t)n);
        return;
    }
    HT_GROW(b->p, b->cap, b->len + (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ht__buf_free(ht_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *ht__human_bytes(uint64_t v, char buf[32])
{
    static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    if (v < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)v);
        return buf;
    }
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4)
        d /= 1024, u++;
    snprintf(buf, 32, "%.1f %s", d, unit[u]);
    return buf;
}

double ht__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
