/* entry.c -- the library tests/attach/inject.sh makes running targets load
 * (build/tests/attach/libentry.so).
 *
 * ht_test_entry(ARG), ARG "OUT[ sleep=MS][ anything]": sleeps MS (the test
 * sends signals meanwhile, once OUT.started exists), writes "arg=ARG tid=TID" to the file OUT (by a
 * rename: whoever sees OUT sees all of it), returns 42. On the way out it
 * clears the vector registers and resets MXCSR and the x87 control word,
 * as a function may (the ABI lets it clobber the first; a careless one
 * changes the others): the injector must put the thread's own back.
 *
 * Built with -DUNRESOLVED it also calls a function no library defines, so
 * that dlopen(RTLD_NOW) fails (libunresolved.so); with -DNEEDS_GONE one of
 * a library deleted after the link (libneedsgone.so). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int ht_test_entry(const char *arg)
{
    char *copy = strdup(arg); /* the loader and malloc, from the thread taken */
    if (!copy)
        return -1;
    char *sp = strstr(copy, " sleep=");
    copy[strcspn(copy, " ")] = 0;
    char tmp[4200];
    if (sp) {
        long ms = atol(sp + 7);
        snprintf(tmp, sizeof tmp, "%s.started", copy);
        close(open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", copy);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -2;
    fprintf(f, "arg=%s tid=%ld\n", arg, (long)syscall(SYS_gettid));
    fclose(f);
    rename(tmp, copy);
    free(copy);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx"))
        asm volatile("vzeroall" ::: "memory");
    else
        asm volatile("pxor %%xmm0, %%xmm0\n\t pxor %%xmm1, %%xmm1\n\t pxor %%xmm8, %%xmm8\n\t pxor %%xmm15, %%xmm15"
                     ::: "xmm0", "xmm1", "xmm8", "xmm15");
    asm volatile("ldmxcsr %0\n\t fldcw %1" : : "m"((unsigned){ 0x1f80 }), "m"((unsigned short){ 0x037f }));
    return 42;
}

#ifdef NEEDS_GONE
extern int ht_test_gone(void);
int ht_test_uses_gone(void)
{
    return ht_test_gone();
}
#endif

#ifdef UNRESOLVED
extern int ht_test_missing_symbol(void);
int ht_test_uses_missing(void)
{
    return ht_test_missing_symbol();
}
#endif
