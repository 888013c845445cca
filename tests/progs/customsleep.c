/* customsleep: a custom block lost in a pool's superblock, holding the
 * only pointer to a heap block, while another thread sleeps in a system
 * call at exit -- the leak check then reads blocks through its reader
 * (not in place), superblocks less their custom blocks piece by piece.
 * For tests/agent/custom.sh. Truth at exit:
 *   pool (custom, 2 sites): the kept object (g_keep) still reachable, the
 *        other definitely lost;
 *   payload (heap, 300 bytes): indirectly lost (only the lost object
 *        points to it; the superblock around it, reachable, is read
 *        without it);
 *   the superblock (heap, 4096 bytes): still reachable (g_super). */
#include "heaptrail.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile g_super, *volatile g_keep;

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        sleep(100);
    return NULL;
}

static __attribute__((noinline)) void *payload(void) { return malloc(300); }

static __attribute__((noinline)) void pool(void)
{
    char *s = malloc(4096);
    memset(s, 0, 4096);
    g_super = s;
    ht_custom_alloc(s + 64, 64);
    g_keep = s + 64;
    void **lost = (void **)(s + 256);
    ht_custom_alloc(lost, 64);
    lost[2] = payload();
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 1;
    usleep(20000);
    pool();
    exit(0);
}
