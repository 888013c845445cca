/* forkexit.c N [MODE] -- the cost of short-lived fork children under the
 * agent: N times, fork a child and wait for it; the child exits at once
 * (MODE "idle", the default: a daemon()'s middle child, a helper that
 * _exits), or allocates and frees one block first ("alloc": a shell's
 * subshell), or leaks one ("leak"), or executes /bin/true ("exec": a
 * shell running a command, make's recipes, a server's helpers). Prints
 * the wall time per child in microseconds. Results: docs/BENCHMARKS.md,
 * "Processes that fork". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    const char *mode = argc > 2 ? argv[2] : "idle";
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c < 0)
            return 1;
        if (c == 0) {
            if (!strcmp(mode, "exec")) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            }
            if (!strcmp(mode, "alloc") || !strcmp(mode, "leak"))
                sink = malloc(100);
            if (!strcmp(mode, "alloc"))
                free(sink);
            exit(0);
        }
        int st;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / n;
    printf("%.0f us a child (%s)\n", us, mode);
    return 0;
}
