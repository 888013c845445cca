/* obstackstale.c -- an obstack's chunk that malloc took back from its
 * tcache with another block's pointers still in it, past the obstack's
 * next_free (tests/agent/reach.sh, src/agent/reach.c obstack_chunk).
 *
 * gdb 13 does this: a std::vector<char *> of 32 strings grows, its
 * 256-byte buffer is freed, and _obstack_begin(&ob, 256) on a static
 * obstack gets the same chunk back; the obstack writes its 16-byte
 * header and nothing more, and 30 stale pointers to strings lost at exit
 * keep them "reachable" (memcheck, whose malloc never hands back freed
 * memory and whose scan skips undefined words, calls all 32 lost).
 *
 * Here: an array of 32 pointers to blocks of site_lost is freed into its
 * tcache bin; obstack_begin with 256-byte chunks takes it back (printed:
 * "REUSED yes", or "REUSED no" when malloc chose another chunk, and then
 * the test proves nothing), writes its header over words 0 and 1, and
 * obstack_ptr_grow puts four blocks of site_held in words 2 to 5 (four:
 * obstack_finish rounds next_free up to 16 bytes, and an odd count would
 * leave a stale word in the padding, below next_free). Words 6 to 31
 * still point at site_lost's blocks, past next_free.
 *
 * The truth: site_lost's 32 blocks definitely lost, site_held's 4
 * reachable (the obstack is a global, its chunk holds them below
 * next_free). */
#include <obstack.h>
#include <stdio.h>
#include <stdlib.h>

#define obstack_chunk_alloc malloc
#define obstack_chunk_free free
#define NPTR 32

static struct obstack ob;

__attribute__((noinline)) static void *site_lost(void) { return malloc(16); }
__attribute__((noinline)) static void *site_held(void) { return malloc(24); }
__attribute__((noinline)) static void **site_array(void) { return malloc(NPTR * sizeof(void *)); }

int main(void)
{
    void **a = site_array();
    if (!a)
        return 1;
    for (int i = 0; i < NPTR; i++)
        a[i] = site_lost();
    free(a);
    obstack_begin(&ob, NPTR * sizeof(void *));
    int reused = (void *)ob.chunk == (void *)a;
    for (int i = 0; i < 4; i++)
        obstack_ptr_grow(&ob, site_held());
    (void)obstack_finish(&ob);
    printf("REUSED %s\n", reused ? "yes" : "no");
    printf("TRUTH site=site_lost live=%d lost=%d ilost=0 plost=0\n", NPTR, NPTR);
    printf("TRUTH site=site_held live=4 lost=0 ilost=0 plost=0\n");
    return 0;
}
