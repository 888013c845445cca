/* dlopen_leak.c LIB -- leaks 5 blocks of 77 bytes from a library it then
 * dlcloses, then opens and closes it 50 more times. The leak must still be
 * attributed to dl_leak_site (symbolized through the unloaded module). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void *(*leak)(size_t) = (void *(*)(size_t))dlsym(h, "dl_leak_site");
    for (int i = 0; i < 5; i++)
        if (!leak(77))
            return 1;
    dlclose(h);
    for (int i = 0; i < 50; i++) {
        h = dlopen(argv[1], RTLD_NOW);
        if (!h)
            return 1;
        ((void (*)(void))dlsym(h, "dl_churn_site"))();
        dlclose(h);
    }
    return 0;
}
