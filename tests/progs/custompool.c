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
 *                7 each kept though their pools are abandoned (a pool
 *                that forgets its blocks without giving them back leaves
 *                them announced: what the program said; its superblock
 *                stays allocated, noted in a global)
 *   many_live    5,000 objects of 16 bytes live at once, given back in a
 *                scattered order but for 10
 *   lost_list    4 objects of 48 bytes: one kept in a global, and a list
 *                of three whose head pointer is dropped; the last node
 *                holds the only pointer to a heap block (list_payload,
 *                500 bytes)
 *   mid_only     1 object of 48 bytes, a global points 16 bytes into it
 *   range_freed  31 objects of 24 bytes from two pools: one kept in a
 *                global; the other pool's 30 given back at once with
 *                ht_custom_free_range over its superblocks, then freed
 *                (and one more range over memory holding no block)
 *   static_arena 2 objects of 64 bytes from an arena in static memory
 *                (arena_get): one kept in a global, the other not, and
 *                holding the only pointer to a heap block
 *                (static_payload, 300 bytes)
 * plus one give-back of an address never announced (an unknown free),
 * and on the heap: leak_heap's 1,000-byte block, never freed; the
 * superblocks of the pools not destroyed stay reachable from globals.
 * Objects are handed out zeroed (what they hold is the program's).
 *
 * The leak check at exit, custom blocks (with announcements):
 *   keep_some 3 still reachable (g_keep); worker_keep 1 still reachable
 *   (the pool's pointer to its superblock is one to its first object)
 *   and 4 definitely lost; stress_worker 4 still reachable (the same: the
 *   superblocks in g_abandoned) and 24 definitely lost; many_live 10
 *   still reachable; lost_list 1 still reachable, 1 definitely lost (the
 *   head), 2 indirectly lost; mid_only 1 possibly lost; range_freed 1
 *   still reachable; static_arena 1 still reachable, 1 definitely lost.
 * The heap: leak_heap's block definitely lost; list_payload and
 * static_payload indirectly lost (only a lost custom block points to
 * each: the superblock or static data around that block is read without
 * it). With an argument "quiet" the pools announce nothing: the heap's
 * figures must be the same as with the announcements, and its verdict
 * too but for list_payload and static_payload, then still reachable
 * (the superblock, reachable, and the static arena hold the pointers).
 *
 * Before the truths, main asks for a leak check (ht_leak_check) and
 * prints what it returned: "CHECK n", the unreachable blocks, heap and
 * custom: 3 + 32 announced, 1 quiet. */
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
    memset(o, 0, p->size);
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

/* forgets the pool's blocks, keeping its memory (noted in g_abandoned) */
static void *volatile g_abandoned[64];
static int g_nabandoned;
static pthread_mutex_t g_abandon_lock = PTHREAD_MUTEX_INITIALIZER;

static void pool_abandon(pool_t *p)
{
    pthread_mutex_lock(&g_abandon_lock);
    for (int i = 0; i < p->nsupers; i++)
        g_abandoned[g_nabandoned++] = p->supers[i];
    pthread_mutex_unlock(&g_abandon_lock);
    memset(p, 0, sizeof *p);
}

static pool_t g_small = { .size = 48 }, g_thread = { .size = 64 }, g_churn = { .size = 200 };
static pool_t g_list = { .size = 48 };
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
    pool_abandon(p);
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

static __attribute__((noinline)) void *list_payload(void) { return malloc(500); }

static void *volatile g_sentinel, *volatile g_head, *volatile g_mid;

static __attribute__((noinline)) void lost_list(void)
{
    g_sentinel = pool_get(&g_list);     /* (the superblock's first object) */
    void **n2 = pool_get(&g_list), **n1 = pool_get(&g_list), **head = pool_get(&g_list);
    head[0] = n1;
    n1[0] = n2;
    n2[0] = list_payload();
    g_head = head;
    g_head = NULL;              /* the list is lost */
}

static __attribute__((noinline)) void mid_only(void)
{
    g_mid = (char *)pool_get(&g_list) + 16;
}

static _Alignas(16) char g_arena[1024];
static size_t g_arena_used;
static void *volatile g_arena_keep;

static __attribute__((noinline)) void *arena_get(size_t size)
{
    void *o = g_arena + g_arena_used;
    g_arena_used += size;
    memset(o, 0, size);
    if (!g_quiet)
        ht_custom_alloc(o, size);
    return o;
}

static void *volatile g_range_keep;

static __attribute__((noinline)) void range_freed(void)
{
    static pool_t kept = { .size = 24 }, gone = { .size = 24 };
    g_range_keep = pool_get(&kept);
    for (int i = 0; i < 30; i++)
        (void)pool_get(&gone);
    for (int i = 0; i < gone.nsupers; i++)
        if (!g_quiet)
            ht_custom_free_range(gone.supers[i], SUPER);
    pool_destroy(&gone);
    if (!g_quiet)
        ht_custom_free_range(&gone, sizeof gone);  /* holds no block: changes nothing */
}

static __attribute__((noinline)) void *static_payload(void) { return malloc(300); }

static __attribute__((noinline)) void static_arena(void)
{
    g_arena_keep = arena_get(64);
    void **lost = arena_get(64);
    lost[1] = static_payload();
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
    lost_list();
    mid_only();
    range_freed();
    static_arena();
    reannounce();
    leak_heap();
    char out[1024];
    int n = snprintf(out, sizeof out, "CHECK %ld\n", ht_leak_check());
    n += snprintf(out + n, sizeof out - (size_t)n,
                     "TRUTH site=keep_some live=3 bytes=144 total=100\n"
                     "TRUTH site=worker_keep live=5 bytes=320 total=5\n"
                     "TRUTH site=churn live=0 bytes=0 total=1000\n"
                     "TRUTH site=reannounce live=0 bytes=0 total=2\n"
                     "TRUTH site=stress_worker live=28 bytes=896 total=80028\n"
                     "TRUTH site=many_live live=10 bytes=160 total=5000\n"
                     "TRUTH site=lost_list live=4 bytes=192 total=4\n"
                     "TRUTH site=mid_only live=1 bytes=48 total=1\n"
                     "TRUTH site=range_freed live=1 bytes=24 total=31\n"
                     "TRUTH site=static_arena live=2 bytes=128 total=2\n");
    fwrite(out, 1, (size_t)n, stdout);      /* (stdout's buffer: one more heap block) */
    return 0;
}
