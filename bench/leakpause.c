/* leakpause.c -- `make bench-agent`: how long a leak check made while the
 * program runs stops it. N live blocks (a linked list: all reachable),
 * one thread that spins reading the clock and keeps the longest gap it
 * sees (the pause: it is parked while the threads are stopped), and main
 * calling ht_leak_check() K times, 100 ms apart. Prints, per check, what
 * the call took (main waits for the whole scan) and the spinner's longest
 * gap during it, then the medians.
 *   heaptrail run -- build/bench/leakpause N K */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "heaptrail.h"

static volatile int stop;
static volatile uint64_t max_gap;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *spinner(void *arg)
{
    (void)arg;
    uint64_t last = now_ns();
    while (!stop) {
        uint64_t t = now_ns();
        if (t - last > max_gap)
            max_gap = t - last;
        last = t;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int k = argc > 2 ? atoi(argv[2]) : 5;
    if (k < 1 || k > 100)
        k = 5;
    void **head = NULL;
    for (long i = 0; i < n; i++) {
        void **b = malloc(32);
        if (!b)
            return 1;
        *b = head;
        head = b;
    }
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    double took[100], gap[100];
    struct timespec pause = { 0, 100 * 1000000 };
    for (int i = 0; i < k; i++) {
        nanosleep(&pause, NULL);
        max_gap = 0;
        uint64_t t0 = now_ns();
        long lost = ht_leak_check();
        uint64_t t1 = now_ns();
        nanosleep(&pause, NULL);            /* the spinner sees the end of it */
        took[i] = (double)(t1 - t0) / 1e6;
        gap[i] = (double)max_gap / 1e6;
        printf("check %d: lost %ld, took %.1f ms, longest stop of the other thread %.2f ms\n", i, lost,
               took[i], gap[i]);
    }
    stop = 1;
    pthread_join(t, NULL);
    qsort(took, (size_t)k, sizeof *took, cmp);
    qsort(gap, (size_t)k, sizeof *gap, cmp);
    printf("%ld blocks: check %.1f ms, pause %.2f ms (medians of %d)\n", n, took[k / 2], gap[k / 2], k);
    return head == NULL && n > 0;
}
