/* tracer.c -- tracer PID: holds process PID's main thread under
 * PTRACE_SEIZE (running: a seize does not stop it) until killed, as a
 * debugger would; says "traced" (tests/attach/inject.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    if (ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) < 0) {
        perror("PTRACE_SEIZE");
        return 1;
    }
    printf("traced\n");
    fflush(stdout);
    for (;;)
        pause();
}
