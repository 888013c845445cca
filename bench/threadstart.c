/* threadstart.c -- threads started one after another in a process with
 * many mappings, each making one allocation: what a new thread's first
 * capture costs (its stack bounds are looked up once per thread). By hand:
 * docs/BENCHMARKS.md, "New threads in a process with many mappings".
 *
 *   build/bench/threadstart M T   M more mappings (below the threads'
 *                                 reused stack), then T threads started
 *                                 and joined; prints us per thread */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static void *run(void *arg)
{
    void *p = malloc(32);
    *(volatile char *)p = 1;
    free(p);
    return arg;
}

static void one_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) == 0)
        pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: threadstart MAPPINGS THREADS\n");
        return 2;
    }
    long m = strtol(argv[1], NULL, 10), n = strtol(argv[2], NULL, 10);
    if (m < 0 || n <= 0)
        return 2;
    /* glibc reuses a joined thread's stack: start one first, so the
     * mappings made next lie below it, as a long-running program's do */
    one_thread();
    if (m) {
        char *b = mmap(NULL, (size_t)m * 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED)
            return 1;
        for (long i = 0; i < m; i += 2)     /* alternate: no merging */
            mprotect(b + i * 4096, 4096, PROT_READ);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        one_thread();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
    printf("%ld mappings, %ld threads: %.1f us a thread\n", m, n, us / (double)n);
    return 0;
}
