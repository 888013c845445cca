/* exitgroup.c [MS] -- leaks one block of 4321 bytes from leak_exit_group,
 * sleeps MS milliseconds (default 0), then ends the process with a raw
 * exit_group system call, status 0, as Go's runtime does: no exit() or
 * _exit(), so no atexit handler, destructor or agent hook runs
 * (tests/agent/lifecycle.sh). */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void leak_exit_group(void)
{
    sink = malloc(4321);
}

int main(int argc, char **argv)
{
    leak_exit_group();
    long ms = argc > 1 ? atol(argv[1]) : 0;
    struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
    while (ms > 0 && nanosleep(&ts, &ts) != 0)
        ;
    syscall(SYS_exit_group, 0);
    return 1;                   /* not reached */
}
