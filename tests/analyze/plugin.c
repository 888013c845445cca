/* plugin.c -- a shared library for analyzer tests, built twice
 * (libplugin_a.so with PLUGIN_FN=plugin_a_alloc, libplugin_b.so with
 * plugin_b_alloc): symfix dlopens one, allocates through it, dlcloses it,
 * then loads the other, usually at the same address. The analyzer must
 * still name each one's frames correctly. */
#include <stdint.h>

typedef int (*plugin_cb)(uint64_t size, const char *fn, int line);
static volatile int sink;

__attribute__((noinline)) int PLUGIN_FN(plugin_cb cb, uint64_t size)
{
    int id = cb(size, __func__, __LINE__);
    sink++;
    return id;
}
