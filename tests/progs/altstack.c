/* altstack.c -- blocks held only as alternate signal stacks (the kernel
 * keeps a thread's sigaltstack base; the program keeps no pointer):
 * main's (held), a thread's that has exited (lost: the thread no longer
 * holds it), and, after a fork, main's again in the child, which keeps
 * the forking thread's alternate stack. The child runs ht_leak_check()
 * and prints "CHILD N", the unreachable blocks it found (the thread's
 * inherited loss: 1). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "heaptrail.h"

#define ALT_BYTES (64 << 10)

__attribute__((noinline)) static void set_altstack(void)
{
    stack_t ss = { .ss_size = ALT_BYTES };
    ss.ss_sp = malloc(ss.ss_size);
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
        abort();
    *(void *volatile *)&ss.ss_sp = NULL;
}

static void *thread_main(void *arg)
{
    (void)arg;
    set_altstack();
    return NULL;
}

int main(void)
{
    set_altstack();
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0)
        abort();
    pid_t p = fork();
    if (p < 0)
        abort();
    if (p == 0) {
        free(malloc(16));
        printf("CHILD %ld\n", ht_leak_check());
        fflush(stdout);
        _exit(0);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        abort();
    return 0;
}
