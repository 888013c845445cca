/* detachrate.c -- malloc/free pairs, from 11 frames deep, in rounds of
 * 0.5 s: prints "ROUND NS" (ns a pair) after each, until killed. A second
 * thread sleeps, so that heaptrail attach has a thread to borrow. Driven
 * by bench/detach-rate.sh: before an attach, attached, after a detach. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *win[1024];

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        sleep(1);
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void *alloc_at(int depth, size_t n)
{
    if (depth == 0)
        return malloc(n);
    void *p = alloc_at(depth - 1, n);
    __asm__ volatile("" ::: "memory"); /* keep the call out of tail position */
    return p;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 1;
    unsigned i = 0;
    for (int round = 0;; round++) {
        double t0 = now();
        unsigned n = 0;
        while (now() - t0 < 0.5) {
            for (int k = 0; k < 1000; k++, i++, n++) {
                void *p = alloc_at(10, 16 + (i * 7919u) % 1024);
                free(win[i & 1023]);
                win[i & 1023] = p;
            }
        }
        printf("%d %.1f\n", round, (now() - t0) * 1e9 / n);
        fflush(stdout);
    }
}
