/* util.c -- environment scan and size parsing that are safe before libc is
 * initialised and inside malloc hooks (no getenv, no allocation). */
#include "util.h"

#if defined(_WIN32)
#include <stdlib.h>             /* _environ: the C runtime's narrow copy */
#define HT_ENVIRON _environ
#else
extern char **environ;
#define HT_ENVIRON environ
#endif

const char *const *ht__env_extra;

/* NAME's value in a NULL-ended list of NAME=value strings, or NULL. */
static const char *env_find(const char *const *list, const char *name)
{
    for (; list && *list; list++) {
        const char *s = *list, *n = name;
        while (*n && *s == *n)
            s++, n++;
        if (*n == 0 && *s == '=')
            return s + 1;
    }
    return NULL;
}

const char *ht__env(const char *name)
{
    const char *v = env_find(ht__env_extra, name);
    return v ? v : env_find((const char *const *)HT_ENVIRON, name);
}

uint64_t ht__parse_size(const char *s, uint64_t dflt)
{
    if (!s || *s < '0' || *s > '9')
        return dflt;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return dflt;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    unsigned shift = 0;
    switch (*s) {
    case 0: break;
    case 'k': case 'K': shift = 10; s++; break;
    case 'm': case 'M': shift = 20; s++; break;
    case 'g': case 'G': shift = 30; s++; break;
    default: return dflt;
    }
    if (*s == 'i' || *s == 'I')   /* accept "MiB" style too */
        s++;
    if (*s == 'b' || *s == 'B')
        s++;
    if (*s != 0 || (shift && v > (UINT64_MAX >> shift)))
        return dflt;
    return v << shift;
}
