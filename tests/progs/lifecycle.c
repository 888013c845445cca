/* lifecycle.c MODE -- how a traced process ends or multiplies. Each mode
 * first leaks 3 blocks of 50 bytes from leak_before_end.
 *   exit | _exit | segv | abort | kill   end that way ("kill": ht_snapshot(),
 *                                        one more leak, then SIGKILL)
 *   fork      leak_parent 1x111; a child leaks leak_child 2x222 and exits
 *   forkstorm a thread allocates without pause while main forks 20 children
 *             that allocate and _exit: no deadlock
 *   exec      leak_parent 1x333, then fork+exec itself as "execchild"
 *   execchild leak_child 1x444 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "heaptrail.h"

static void *volatile sink;
__attribute__((noinline)) static void leak_before_end(void) { for (int i = 0; i < 3; i++) sink = malloc(50); }
__attribute__((noinline)) static void leak_parent(size_t n) { sink = malloc(n); }
__attribute__((noinline)) static void leak_child(size_t n) { sink = malloc(n); }
__attribute__((noinline)) static void leak_late(void) { sink = malloc(1000); }

static volatile int stop;
static void *churn(void *arg)
{
    (void)arg;
    while (!stop)
        { sink = malloc(64); free(sink); }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (!strcmp(mode, "execchild")) {
        leak_child(444);
        return 0;
    }
    leak_before_end();
    if (!strcmp(mode, "exit"))
        exit(5);
    if (!strcmp(mode, "_exit"))
        _exit(7);
    if (!strcmp(mode, "segv"))
        *(volatile int *)(uintptr_t)8 = 1;
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "kill")) {
        if (ht_snapshot() < 0)
            return 3;
        leak_late();
        kill(getpid(), SIGKILL);
    }
    if (!strcmp(mode, "fork")) {
        leak_parent(111);
        pid_t c = fork();
        if (c == 0) {
            leak_child(222);
            leak_child(222);
            exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        printf("CHILD %d\n", (int)c);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (!strcmp(mode, "forkstorm")) {
        pthread_t t;
        pthread_create(&t, NULL, churn, NULL);
        for (int i = 0; i < 20; i++) {
            pid_t c = fork();
            if (c == 0) {
                sink = malloc(10); free(sink);
                sink = malloc(20);
                _exit(0);
            }
            int st;
            if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        stop = 1;
        pthread_join(t, NULL);
        return 0;
    }
    if (!strcmp(mode, "exec")) {
        leak_parent(333);
        pid_t c = fork();
        if (c == 0) {
            execl("/proc/self/exe", argv[0], "execchild", (char *)NULL);
            _exit(127);
        }
        int st;
        waitpid(c, &st, 0);
        printf("CHILD %d\n", (int)c);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    return 0;
}
