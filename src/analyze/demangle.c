/* demangle.c -- C++ name demangling through libstdc++'s __cxa_demangle.
 *
 * Why libstdc++ and not libiberty's cplus_demangle: libiberty is not a
 * shared library on Debian (only a static archive in binutils-dev), while
 * libstdc++ is on every machine that runs C++ programs, and its
 * __cxa_demangle has C linkage (the Itanium C++ ABI defines it), so this C
 * file calls it directly and the CLI links -lstdc++; no C++ shim needed. */
#include <stdlib.h>
#include <string.h>
#include "sym.h"

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *ht__demangle(const char *name)
{
    if (!name || name[0] != '_' || name[1] != 'Z')
        return NULL;
    int status = 0;
    char *d = __cxa_demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}
