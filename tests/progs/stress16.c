/* stress16.c -- 16 threads allocate from stress_alloc and hand every block
 * to the next thread, which frees it (cross-thread frees); each thread also
 * leaks 10 blocks of 40 bytes from stress_leak. Prints the truth. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 16
#define PER_THREAD 10000
#define QCAP 256

typedef struct {
    pthread_mutex_t m;
    void *q[QCAP];
    unsigned head, tail;
} queue_t;

static queue_t queues[THREADS];
static void *volatile sink;
static unsigned finished;

__attribute__((noinline)) static void *stress_alloc(size_t n) { return malloc(n); }
__attribute__((noinline)) static void stress_leak(void) { sink = malloc(40); }

static size_t size_of(unsigned t, unsigned j) { return 1 + (t * 131 + j * 7) % 700; }

static void drain(queue_t *q, int all)
{
    pthread_mutex_lock(&q->m);
    while (q->head != q->tail && (all || q->tail - q->head > QCAP / 2))
        free(q->q[q->head++ % QCAP]);
    pthread_mutex_unlock(&q->m);
}

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    queue_t *next = &queues[(t + 1) % THREADS], *mine = &queues[t];
    for (unsigned j = 0; j < PER_THREAD; j++) {
        void *p = stress_alloc(size_of(t, j));
        for (;;) {
            pthread_mutex_lock(&next->m);
            int ok = next->tail - next->head < QCAP;
            if (ok)
                next->q[next->tail++ % QCAP] = p;
            pthread_mutex_unlock(&next->m);
            if (ok)
                break;
            drain(mine, 1);
            sched_yield();
        }
        drain(mine, 0);
    }
    for (int k = 0; k < 10; k++)
        stress_leak();
    /* keep draining until every producer is done, or a neighbour waiting
     * on a full queue would wait forever */
    __atomic_fetch_add(&finished, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&finished, __ATOMIC_SEQ_CST) < THREADS) {
        drain(mine, 1);
        sched_yield();
    }
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    unsigned long long total = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        pthread_mutex_init(&queues[t].m, NULL);
        for (unsigned j = 0; j < PER_THREAD; j++)
            total += size_of(t, j);
    }
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (unsigned t = 0; t < THREADS; t++)
        drain(&queues[t], 1);
    printf("TRUTH alloc_blocks=%u alloc_bytes=%llu leak_blocks=%u leak_bytes=%u\n",
           THREADS * PER_THREAD, total, THREADS * 10, THREADS * 10 * 40);
    return 0;
}
