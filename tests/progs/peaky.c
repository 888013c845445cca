/* peaky: a scripted peak, for `heaptrail report --peak`.
 *
 *   peaky early   phase one holds 10 MiB (40 x 256 KiB, from phase_one),
 *                 40 KiB (40 x 1 KiB, from small_helper) and a 1 MiB
 *                 anonymous mapping (from map_region); it frees the big
 *                 blocks and the mapping; phase two then keeps 6 MiB
 *                 (24 x 256 KiB, from phase_two). The peak is phase one's.
 *   peaky late    the same, but phase two keeps 12 MiB: the peak is at
 *                 its end, where phase_one holds nothing.
 *   peaky threads four threads, each phase one and two (early) at once.
 *
 * Between the phases it asks for a snapshot (ht_snapshot), whose peak so
 * far is phase one's in both modes. Prints its truth after the work:
 *   TRUTH one=N small=N map=N two=N   (bytes each site held at the peak)
 *   TRUTH_BLOCKS one=K small=K map=K two=K   (and blocks)
 * (in late mode the stdout buffer printf takes for it is the peak's last
 * block). Nothing else allocates in between, so in one thread the sites'
 * bytes at the peak add up to the process's peak (the agent's epochs are
 * a millionth of the peak apart: exact at these sizes). */
#include <heaptrail.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BIG (256u << 10)
#define SMALL 1024u
#define MAP (1u << 20)

static void *big[48], *small[40];

__attribute__((noinline)) static void *phase_one(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *small_helper(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *phase_two(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *map_region(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* phase one, then its big blocks and mapping go; returns the blocks kept */
static void run(void **bigs, void **smalls, int nsecond, int snap)
{
    for (int i = 0; i < 40; i++) {
        bigs[i] = phase_one(BIG);
        memset(bigs[i], 1, 64);
        smalls[i] = small_helper(SMALL);
    }
    void *m = map_region(MAP);
    memset(m, 1, 64);
    for (int i = 0; i < 40; i++)
        free(bigs[i]);
    munmap(m, MAP);
    if (snap)
        ht_snapshot();
    for (int i = 0; i < nsecond; i++) {
        bigs[i] = phase_two(BIG);
        memset(bigs[i], 2, 64);
    }
}

static void *worker(void *arg)
{
    void **mine = malloc(88 * sizeof(void *));
    run(mine, mine + 48, 24, 0);
    return mine;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "early";
    if (!strcmp(mode, "threads")) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        printf("TRUTH threads=4\n");
        return 0;
    }
    int late = !strcmp(mode, "late");
    int nsecond = late ? 48 : 24;
    run(big, small, nsecond, 1);
    if (late)
        printf("TRUTH one=0 small=%u map=0 two=%u\nTRUTH_BLOCKS one=0 small=40 map=0 two=%d\n", 40 * SMALL,
               nsecond * BIG, nsecond);
    else
        printf("TRUTH one=%u small=%u map=%u two=0\nTRUTH_BLOCKS one=40 small=40 map=1 two=0\n", 40 * BIG,
               40 * SMALL, MAP);
    return 0;
}
