/* sparse: a 256 MiB block the program touches on two of its pages, one
 * of which holds the only pointer to a small block (still reachable);
 * another small block's only pointer is overwritten (definitely lost).
 * The exit leak check must get both right without reading the untouched
 * pages: read, they would fault in 256 MiB that the program never used
 * (the test compares the run's peak RSS). Prints TRUTH lines for
 * tests/agent/common.inc's check_truths. */
#include <stdio.h>
#include <stdlib.h>

#define BIG (256u << 20)
#define PAGE 4096u

static char *volatile big;
static void *volatile lost;

__attribute__((noinline)) static char *alloc_big(void) { return malloc(BIG); }
__attribute__((noinline)) static void *alloc_kept(void) { return malloc(40); }
__attribute__((noinline)) static void *alloc_lost(void) { return malloc(50); }

int main(void)
{
    big = alloc_big();
    if (!big)
        return 1;
    /* the pointer sits deep inside, on a page of its own */
    *(void **)(big + 1000 * PAGE + 8) = alloc_kept();
    lost = alloc_lost();
    lost = NULL;
    printf("TRUTH site=alloc_big live=1 lost=0 ilost=0\n"
           "TRUTH site=alloc_kept live=1 lost=0 ilost=0\n"
           "TRUTH site=alloc_lost live=1 lost=1 ilost=0\n");
    return 0;
}
