/* stalelink.c -- a reachable block whose first word is glibc's stale
 * free-list link, pointing into the middle of a lost block
 * (tests/agent/reach.sh, src/agent/reach.c stale_link).
 *
 * Built without PIE, so the heap lies low (after the bss) and a
 * safe-linked word, next ^ (its address >> 12), differs from `next` in
 * its low bits only. Two chunks of one size, r then b, are freed into
 * their tcache bin (b's first word becomes r's link) and b is taken back
 * by malloc, which leaves that word; b is held by a global. Two lost
 * blocks of 512 KiB lie around them: the word lands inside one of them,
 * as the heap starts within 1 GiB of the bss (the kernel's brk
 * randomization), so address >> 12 is below 2^19 and the word lies within
 * 512 KiB of r (the program checks, and builds again elsewhere when it
 * does not).
 * Prints "STALE L1" or "STALE L2" (which lost block the word points
 * into) and "LINK ok" (the word decodes to r), or "NOHIT".
 *
 * Then a third block is lost with copies of its address in a frame gone
 * before main returns: the exit's leak check reads the stack from
 * __libc_stack_end once main has returned, not from where it runs.
 *
 * The truth: the three lost blocks definitely lost, 1,048,676 bytes in 3
 * blocks from 3 sites; b and the pads reachable. */
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* it reads what malloc left in a block, on purpose */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuse-after-free"

#define BIG (512 << 10)
#define SMALL 344

static void *volatile held;
static void *volatile pads[16];

__attribute__((noinline)) static void *site_l1(void) { return malloc(BIG); }
__attribute__((noinline)) static void *site_l2(void) { return malloc(BIG); }

/* One try: 1 (and prints) if b's stale word points into the middle of
 * L1 or L2, which are then dropped; else everything freed again. */
__attribute__((noinline)) static int try_once(void)
{
    char *l1 = site_l1();
    char *r = malloc(SMALL);
    char *b = malloc(SMALL);
    char *l2 = site_l2();
    if (!l1 || !r || !b || !l2)
        return 0;
    memset(l1, 0, BIG);
    memset(l2, 0, BIG);
    uintptr_t ra = (uintptr_t)r, ba = (uintptr_t)b;
    free(r);
    free(b);                    /* b's first word: r, safe-linked */
    void *again = malloc(SMALL);
    if ((uintptr_t)again != ba) {
        free(again);
        free(l1);
        free(l2);
        return 0;
    }
    uintptr_t w;
    memcpy(&w, again, sizeof w);
    uintptr_t in1 = w - (uintptr_t)l1, in2 = w - (uintptr_t)l2;
    if ((in1 > 0 && in1 < BIG) || (in2 > 0 && in2 < BIG)) {
        printf("STALE %s\n", in1 > 0 && in1 < BIG ? "L1" : "L2");
        printf("LINK %s\n", (w ^ (ba >> 12)) == ra ? "ok" : "other");
        held = again;
        return 1;
    }
    free(again);
    free(l1);
    free(l2);
    return 0;
}

__attribute__((noinline)) static void *site_l3(void) { return malloc(100); }

/* Leaves copies of p in a frame that is gone once it returns (below
 * main's, where the exit's own frames come later) */
__attribute__((noinline)) static void bury(void *p)
{
    void *volatile slots[96];
    for (int i = 0; i < 96; i++)
        slots[i] = p;
    __asm__ volatile("" : : "r"(slots) : "memory");
}

int main(void)
{
    int hit = 0;
    mallopt(M_MMAP_THRESHOLD, 4 << 20);   /* BIG from the heap */
    for (int i = 0; i < 16 && !hit; i++) {
        hit = try_once();
        if (!hit)
            pads[i] = malloc(4096 + 16 * (size_t)i);  /* another layout */
    }
    if (!hit)
        printf("NOHIT\n");
    bury(site_l3());
    return 0;            /* not exit(): main's frames are gone */
}
