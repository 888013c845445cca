/* forker.c -- forks a child every few milliseconds while leak checks
 * come in: each child allocates, then exits normally (its own agent
 * writes its own trace and computes reachability at its exit). A child
 * forked while the parent's control thread held the scan lock must not
 * inherit it. Prints READY, forks until a line arrives on standard input,
 * then prints the number of children and the longest a child took from
 * fork to being reaped, in ms. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void *volatile sink;

int main(void)
{
    printf("READY\n");
    fflush(stdout);
    int n = 0;
    double worst = 0;
    for (;;) {
        struct pollfd p = { .fd = 0, .events = POLLIN };
        if (poll(&p, 1, 10) == 1)
            break;
        double t0 = now_ms();
        pid_t c = fork();
        if (c < 0)
            abort();
        if (c == 0) {
            sink = malloc(100);
            exit(0);
        }
        int st;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            abort();
        double d = now_ms() - t0;
        if (d > worst)
            worst = d;
        n++;
    }
    printf("CHILDREN %d WORST %.0f\n", n, worst);
    return 0;
}
