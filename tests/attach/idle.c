/* idle.c -- a program that reads standard input to its end, for the
 * injector's refusals (tests/attach/inject.sh): built -static (no dlopen
 * to call) and with -DFAKE_GO (the section by which the injector knows a
 * Go program). Says "ready pid=P tid=P" first. */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifdef FAKE_GO
__attribute__((section(".go.buildinfo"), used)) static const char buildinfo[32] = "\xff Go buildinf:";
#endif

int main(void)
{
    char c;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    printf("ready pid=%d tid=%d\n", getpid(), getpid());
    fflush(stdout);
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}
