/* custompool: a pool allocator that announces its blocks to heaptrail
 * (ht_custom_alloc / ht_custom_free), for tests/agent/custom.sh.
 *
 * Pools of fixed-size objects carved from 16 KiB superblocks got from
 * malloc, with a free list; a pool's first object has the address of its
 * superblock (the heap block and the custom block share an address).
 * Scripted, with the truth printed as "TRUTH site=FUNC live=K bytes=B
 * total=N" lines (the site whose innermost frame is FUNC):
 *   keep_some    100 objects of 48 bytes, 97 given back: 3 live
 *   worker_keep  (another thread) 5 objects of 64 bytes, never given back
 *   churn        1,000 objects of 200 bytes, 10 at a time, all given back;
 *                its pool is destroyed (its superblock freed)
 *   reannounce   one address announced twice without a free between
 *                (the first block ends there), then given back
 *   stress_worker  4 threads at once, 20,007 objects of 32 bytes each,
 *                7 each kept though their pools are destroyed (a pool
 *                that releases its memory without giving its blocks back
 *                leaves them announced: what the program said)
 *   many_live    5,000 objects of 16 bytes live at once, given back in a
 *                scattered order but for 10
 * plus one give-back of an address never announced (an unknown free),
 * and on the heap: leak_heap's 1,000-byte block, never freed; the two
 * superblocks of the pools not destroyed stay reachable from globals.
 * With an argument "quiet" the pools announce nothing: the heap's
 * figures must be the same as with the announcements. */
#include "heaptrail.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUPER 16384

typedef struct pool {
    size_t size;                /* object size */
    char *super;                /* the current superblock */
    size_t used;                /* bytes of it handed out */
    void *free_list;
    void *supers[64];
    int nsupers;
} pool_t;

static int g_quiet;

static __attribute__((noinline)) void *pool_get(pool_t *p)
{
    void *o;
    if (p->free_list) {
        o = p->free_list;
        p->free_list = *(void **)o;
    } else {
        if (!p->super || p->used + p->size > SUPER) {
            p->super = malloc(SUPER);
            if (!p->super)
                abort();
            p->supers[p->nsupers++] = p->super;
            p->used = 0;
        }
        o = p->super + p->used;
        p->used += p->size;
    }
    if (!g_quiet)
        ht_custom_alloc(o, p->size);
    return o;
}

static __attribute__((noinline)) void pool_put(pool_t *p, void *o)
{
    if (!g_quiet)
        ht_custom_free(o);
    *(void **)o = p->free_list;
    p->free_list = o;
}

static void pool_destroy(pool_t *p)
{
    for (int i = 0; i < p->nsupers; i++)
        free(p->supers[i]);
    memset(p, 0, sizeof *p);
}

static pool_t g_small = { .size = 48 }, g_thread = { .size = 64 }, g_churn = { .size = 200 };
static void *volatile g_keep[128];
static void *volatile g_heap_leak;

static __attribute__((noinline)) void keep_some(void)
{
    for (int i = 0; i < 100; i++)
        g_keep[i] = pool_get(&g_small);
    for (int i = 3; i < 100; i++)
        pool_put(&g_small, g_keep[i]);
}

static volatile int g_five = 5;    /* (a constant count: gcc unrolls the loop into 5 call sites) */

static __attribute__((noinline)) void *worker_keep(void *arg)
{
    (void)arg;
    for (int i = 0; i < g_five; i++)
        pool_get(&g_thread);    /* dropped on the floor: never given back */
    return NULL;
}

/* 4 threads at once, each with a pool of its own: 20,000 blocks made
 * and given back two at a time, 7 kept */
static __attribute__((noinline)) void *stress_worker(void *arg)
{
    pool_t *p = arg;
    void *keep[7];
    for (int i = 0; i < 10000; i++) {
        void *a = pool_get(p), *b = pool_get(p);
        if (i < 7) {
            keep[i] = a;
            a = NULL;
        }
        if (a)
            pool_put(p, a);
        pool_put(p, b);
    }
    for (int i = 0; i < 7; i++)
        pool_put(p, keep[i]);
    for (int i = 0; i < 7; i++)
        (void)pool_get(p);      /* the same 7 blocks again, kept: a free list reuses addresses */
    pool_destroy(p);
    return NULL;
}

static __attribute__((noinline)) void churn(void)
{
    void *batch[10];
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 10; i++)
            batch[i] = pool_get(&g_churn);
        for (int i = 0; i < 10; i++)
            pool_put(&g_churn, batch[i]);
    }
}

/* 5,000 live at once (the agent's table grows past its first size),
 * given back in a scattered order, 10 kept */
static __attribute__((noinline)) void many_live(void)
{
    static pool_t p = { .size = 16 };
    static void *o[5000];
    for (int i = 0; i < 5000; i++)
        o[i] = pool_get(&p);
    for (int i = 0; i < 5000; i++) {
        int k = (int)((i * 2971u) % 5000u);    /* 2971 is prime to 5000: each k once */
        if (k >= 10)
            pool_put(&p, o[k]);
    }
}

static __attribute__((noinline)) void reannounce(void)
{
    static char region[64];
    if (g_quiet)
        return;
    ht_custom_alloc(region, 32);
    ht_custom_alloc(region, 40);    /* the 32-byte block ends here */
    ht_custom_free(region);
    ht_custom_free(region + 8);     /* never announced: an unknown free */
}

static __attribute__((noinline)) void leak_heap(void)
{
    g_heap_leak = malloc(1000);
    g_heap_leak = NULL;
}

int main(int argc, char **argv)
{
    g_quiet = argc > 1 && strcmp(argv[1], "quiet") == 0;
    keep_some();
    pthread_t t;
    if (pthread_create(&t, NULL, worker_keep, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    static pool_t own[4];
    pthread_t st[4];
    for (int i = 0; i < 4; i++) {
        own[i].size = 32;
        if (pthread_create(&st[i], NULL, stress_worker, &own[i]) != 0)
            return 1;
    }
    for (int i = 0; i < 4; i++)
        pthread_join(st[i], NULL);
    churn();
    pool_destroy(&g_churn);
    many_live();
    reannounce();
    leak_heap();
    char out[1024];
    int n = snprintf(out, sizeof out,
                     "TRUTH site=keep_some live=3 bytes=144 total=100\n"
                     "TRUTH site=worker_keep live=5 bytes=320 total=5\n"
                     "TRUTH site=churn live=0 bytes=0 total=1000\n"
                     "TRUTH site=reannounce live=0 bytes=0 total=2\n"
                     "TRUTH site=stress_worker live=28 bytes=896 total=80028\n"
                     "TRUTH site=many_live live=10 bytes=160 total=5000\n");
    fwrite(out, 1, (size_t)n, stdout);      /* (stdout's buffer: one more heap block) */
    return 0;
}
