/* temps: scripted temporary allocations (blocks freed by the thread that
 * made them before it allocated or freed anything else: heaptrack's
 * definition), for `heaptrail report --temporary`. Each site has its own
 * function; nothing else allocates in the loops.
 *
 *   one_shot      1000 x malloc(32), freed at once: 1000 temporary, 32000 bytes
 *   zeroed        10 x calloc(4, 8), freed at once: 10 temporary, 320 bytes
 *   grown_first   100 x malloc(8), reallocated at once (realloc frees it):
 *                 100 temporary, 800 bytes
 *   regrown       those 100 x realloc(.., 64), freed at once: 100, 6400 bytes
 *   pair_a/pair_b 500 x (a = malloc(16), b = malloc(16), free(a), free(b)):
 *                 neither temporary (b's allocation came between a's
 *                 allocation and its free; a's free between b's)
 *   handed_over   50 x malloc(24) on a second thread, freed at once by
 *                 main: not temporary (another thread freed it)
 *   kept          20 x malloc(40), never freed
 * Prints its truth: TRUTH one_shot=1000/32000 ... (blocks/bytes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void *one_shot(size_t n) { return malloc(n); }
NOINLINE static void *zeroed(size_t k, size_t n) { return calloc(k, n); }
NOINLINE static void *grown_first(size_t n) { return malloc(n); }
NOINLINE static void *regrown(void *p, size_t n) { return realloc(p, n); }
NOINLINE static void *pair_a(size_t n) { return malloc(n); }
NOINLINE static void *pair_b(size_t n) { return malloc(n); }
NOINLINE static void *handed_over(size_t n) { return malloc(n); }
NOINLINE static void *kept(size_t n) { return malloc(n); }

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static void *slot;
static int done;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        void *p = handed_over(24);
        pthread_mutex_lock(&m);
        while (slot)
            pthread_cond_wait(&c, &m);
        slot = p;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 1000; i++) {
        void *p = one_shot(32);
        sink = p;
        free(p);
    }
    for (int i = 0; i < 10; i++) {
        void *p = zeroed(4, 8);
        sink = p;
        free(p);
    }
    for (int i = 0; i < 100; i++) {
        void *p = grown_first(8);
        p = regrown(p, 64);
        sink = p;
        free(p);
    }
    for (int i = 0; i < 500; i++) {
        void *a = pair_a(16), *b = pair_b(16);
        sink = a;
        sink = b;
        free(a);
        free(b);
    }
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    for (int got = 0; got < 50; got++) {
        pthread_mutex_lock(&m);
        while (!slot)
            pthread_cond_wait(&c, &m);
        void *p = slot;
        slot = NULL;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
        free(p);
    }
    pthread_join(t, NULL);
    done = 1;
    static void *keep[20];
    for (int i = 0; i < 20; i++)
        keep[i] = kept(40);
    sink = keep;
    printf("TRUTH one_shot=1000/32000 zeroed=10/320 grown_first=100/800 regrown=100/6400 "
           "pair_a=0/0 pair_b=0/0 handed_over=0/0 kept=0/0\n");
    return 0;
}
