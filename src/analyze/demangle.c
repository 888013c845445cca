/* demangle.c -- C++ name demangling through libstdc++'s __cxa_demangle.
 *
 * Why libstdc++ and not libiberty's cplus_demangle: libiberty is not a
 * shared library on Debian (only a static archive in binutils-dev), while
 * libstdc++ is on every machine that runs C++ programs, and its
 * __cxa_demangle has C linkage (the Itanium C++ ABI defines it).
 *
 * Loaded on the first mangled name, not linked: libstdc++'s relocations
 * cost every start of the CLI ~1.2 ms (a C program starts in ~1.0 ms
 * here, with libdw, libelf and libzstd in ~2.0, with libstdc++ as well in
 * ~3.2), and most summaries of C programs never see a mangled name.
 * Without libstdc++ names stay mangled. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "sym.h"

typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn *cxa_demangle;
static pthread_once_t cxa_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (h)
        cxa_demangle = (demangle_fn *)dlsym(h, "__cxa_demangle");
}

char *ht__demangle(const char *name)
{
    if (!name || name[0] != '_' || name[1] != 'Z')
        return NULL;
    pthread_once(&cxa_once, load);
    if (!cxa_demangle)
        return NULL;
    int status = 0;
    char *d = cxa_demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}
