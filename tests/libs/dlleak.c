/* dlleak.c -- a library that tests/progs/dlopen_leak.c loads, leaks from
 * and closes before exit. */
#include <stdlib.h>

__attribute__((noinline)) void *dl_leak_site(size_t n) { return malloc(n); }
void *volatile dl_sink;
__attribute__((noinline)) void dl_churn_site(void) { dl_sink = malloc(10); free(dl_sink); }
