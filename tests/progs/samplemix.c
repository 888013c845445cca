/* samplemix.c -- allocations of known sizes and counts from six sites, for
 * sampling mode's estimates (tests/agent/sample.sh). Prints one line per
 * site: TRUTH site=NAME total_blocks= total_bytes= live_blocks= live_bytes=
 * (the figures at exit; every site's innermost frame is its own function). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;
static void **kept;
static size_t nkept;

static void truth(const char *site, unsigned long tb, unsigned long long tbytes, unsigned long lb,
                  unsigned long long lbytes)
{
    printf("TRUTH site=%s total_blocks=%lu total_bytes=%llu live_blocks=%lu live_bytes=%llu\n", site, tb,
           tbytes, lb, lbytes);
}

/* 400,000 blocks of 48 bytes, each freed at once */
static NOINLINE void *site_small(void) { return malloc(48); }
/* 40,000 blocks of 1,000 bytes, all kept */
static NOINLINE void *site_kept(void) { return malloc(1000); }
/* 32 blocks of 1 MiB, kept: sampled every time */
static NOINLINE void *site_big(void) { return calloc(1, 1 << 20); }
/* 400 blocks of 100,000 bytes, every other one freed */
static NOINLINE void *site_mid(void) { return malloc(100000); }
/* 20,000 chains grown by realloc to 512 bytes in 8 steps, kept */
static NOINLINE void *site_realloc(void *p, size_t n) { return realloc(p, n); }
/* two threads, 50,000 blocks of 200 bytes each, kept */
static NOINLINE void *site_thread(void) { return malloc(200); }

static void *thread_main(void *arg)
{
    void **v = arg;
    for (int i = 0; i < 50000; i++)
        v[i] = site_thread();
    return NULL;
}

int main(void)
{
    kept = malloc(sizeof(void *) * 200000);     /* not a site of its own: one block */
    for (int i = 0; i < 400000; i++) {
        void *p = site_small();
        memset(p, 1, 8);
        sink = p;
        free(p);
    }
    truth("site_small", 400000, 400000ull * 48, 0, 0);
    for (int i = 0; i < 40000; i++)
        kept[nkept++] = site_kept();
    truth("site_kept", 40000, 40000ull * 1000, 40000, 40000ull * 1000);
    for (int i = 0; i < 32; i++)
        kept[nkept++] = site_big();
    truth("site_big", 32, 32ull << 20, 32, 32ull << 20);
    for (int i = 0; i < 400; i++) {
        void *p = site_mid();
        if (i & 1)
            free(p);
        else
            kept[nkept++] = p;
    }
    truth("site_mid", 400, 400ull * 100000, 200, 200ull * 100000);
    for (int i = 0; i < 20000; i++) {
        void *p = NULL;
        for (size_t k = 1; k <= 8; k++)
            p = site_realloc(p, 64 * k);
        kept[nkept++] = p;
    }
    /* each realloc ends the block before it and makes a new one */
    truth("site_realloc", 160000, 20000ull * 64 * 36, 20000, 20000ull * 512);
    static void *tv[2][50000];
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, thread_main, tv[t]);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    truth("site_thread", 100000, 100000ull * 200, 100000, 100000ull * 200);
    return 0;
}
