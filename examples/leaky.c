/* leaky.c -- the program `make demo` runs under `heaptrail run`: a toy
 * "server" with three classic leaks, each from its own call site:
 *   - load_names() strdup's 100 names and frees only 90: 10 leaked strings
 *     of 8 bytes ("name-NN\0") = 80 bytes in 10 blocks;
 *   - cache_put() keeps 5 entries of 256 bytes that nobody frees
 *     = 1,280 bytes in 5 blocks;
 *   - read_request() grows a buffer with realloc up to 4,096 bytes and
 *     forgets it = 4,096 bytes in 1 block (reported at the last realloc).
 * Total: 5,456 bytes in 16 blocks from 3 allocation sites. Of these only
 * the cache entries are unreachable at exit (1,280 bytes in 5 blocks: the
 * one pointer to them, `keep`, was overwritten); the names stay in
 * `names[]` and the buffer in `keep`: still reachable. The program writes
 * nothing with stdio, so libc itself leaves nothing behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *names[100];
static void *volatile keep;
static volatile int entries = 5;    /* keeps the loop below one call site */

__attribute__((noinline)) static void load_names(void)
{
    char buf[16];
    for (int i = 0; i < 100; i++) {
        snprintf(buf, sizeof buf, "name-%02d", i);
        names[i] = strdup(buf);
    }
    for (int i = 0; i < 90; i++)    /* bug: the last 10 are never freed */
        free(names[i]);
}

__attribute__((noinline)) static void cache_put(int key)
{
    char *e = malloc(256);
    memset(e, key, 256);
    keep = e;                       /* bug: the cache forgets its entries */
}

__attribute__((noinline)) static void read_request(void)
{
    char *buf = NULL;
    for (size_t n = 512; n <= 4096; n *= 2) {
        char *nb = realloc(buf, n);
        if (!nb)
            break;
        buf = nb;
        memset(buf, 'x', n);
    }
    keep = buf;                     /* bug: never freed */
}

int main(void)
{
    load_names();
    for (int k = 0; k < entries; k++)
        cache_put(k);
    read_request();
    return 0;
}
