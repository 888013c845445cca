/* fdfull.c -- a program that leaks one block, then opens descriptors
 * until none is left (EMFILE, under a soft limit of 64) and exits with
 * them all open, as a program leaking descriptors ends. Prints how many
 * it opened. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

void *volatile sink;

__attribute__((noinline)) static void fdfull_leak(void) { sink = malloc(100); }

int main(void)
{
    fdfull_leak();
    sink = NULL;                /* lost */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1;
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1;
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0)
        n++;
    printf("OPENED %d\n", n);
    return 0;
}
