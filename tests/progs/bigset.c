/* bigset.c -- a large live set across threads: 8 threads each allocate
 * 150,000 blocks from bigset_alloc, so 1.2 million are live at once and
 * the agent's live table takes its large layout (blocks grouped by
 * region, 8-byte entries naming one of 100 (site, size) pairs); then each frees the odd
 * blocks of the next thread's (cross-thread frees, in address order) and
 * its own even ones but every 1000th, which stay as leaks. Prints the
 * truth. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define PER_THREAD 150000

static void **blocks[THREADS];
static pthread_barrier_t barrier;

static size_t size_of(unsigned t, unsigned i) { return 16 + (i * 7 + t) % 100; }

/* the call keeps bigset_alloc in the stack (a tail call would not) */
__attribute__((noinline)) static void *bigset_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

static void *run(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg, next = (t + 1) % THREADS;
    for (unsigned i = 0; i < PER_THREAD; i++)
        blocks[t][i] = bigset_alloc(size_of(t, i));
    pthread_barrier_wait(&barrier);
    for (unsigned i = 1; i < PER_THREAD; i += 2)
        free(blocks[next][i]);
    pthread_barrier_wait(&barrier);
    for (unsigned i = 0; i < PER_THREAD; i += 2)
        if (i % 1000)
            free(blocks[t][i]);
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    unsigned long long alloc_bytes = 0, leak_bytes = 0;
    unsigned leak_blocks = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        blocks[t] = calloc(PER_THREAD, sizeof *blocks[t]);
        if (!blocks[t])
            return 1;
        for (unsigned i = 0; i < PER_THREAD; i++) {
            alloc_bytes += size_of(t, i);
            if (i % 1000 == 0) {
                leak_blocks++;
                leak_bytes += size_of(t, i);
            }
        }
    }
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, run, (void *)(uintptr_t)t) != 0)
            return 1;
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    printf("TRUTH alloc_blocks=%u alloc_bytes=%llu leak_blocks=%u leak_bytes=%llu\n",
           THREADS * PER_THREAD, alloc_bytes, leak_blocks, leak_bytes);
    return 0;
}
