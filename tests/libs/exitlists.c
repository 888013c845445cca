/* exitlists.c -- a library whose constructor registers 100 exit handlers
 * with its own handle, as a C++ library's static objects register their
 * destructors (LLVM's: 3,100 of them): glibc keeps the first 32 in its
 * static block and allocates the rest in blocks of 32 (1,040 bytes), 3
 * blocks here. Those handlers run when _dl_fini finalizes the library,
 * and glibc frees their blocks afterwards, as its exit runs past them.
 * Preloaded beside the agent (tests/agent/leaks.sh): the exit snapshot
 * must see those blocks freed, as memcheck does (it counted them still
 * reachable: 3,120 bytes in 3 blocks). */
extern void *__dso_handle;
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void nothing(void *arg)
{
    (void)arg;
}

__attribute__((constructor)) static void exitlists_init(void)
{
    for (int i = 0; i < 100; i++)
        __cxa_atexit(nothing, 0, &__dso_handle);
}
