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
 * A low heap is also where plain numbers look like pointers: libc's
 * cache-size tunables (0xfd0e42 here), the auxiliary vector's AT_HWCAP
 * (0x178bfbff) on the stack. One that lands in the middle of L1 or L2
 * makes it possibly lost, as a conservative scan must (memcheck's too):
 * in about 1 run in 70 of this program, before the forty-eighth session.
 * So a layout is kept only where no word of the roots the exit's check
 * reads -- the writable mappings outside the heap up to 1 MiB (libraries'
 * data; not heaptrail's), the stack above __libc_stack_end -- points into
 * their middle (no_other_words).
 *
 * Then a third block is lost with copies of its address in a frame gone
 * before main returns: the exit's leak check reads the stack from
 * __libc_stack_end once main has returned, not from where it runs.
 *
 * The truth: the three lost blocks definitely lost, 1,048,676 bytes in 3
 * blocks from 3 sites; b and the blocks of failed tries reachable. It names
 * __libc_stack_end, as the Boehm collector does: built without PIE, it
 * holds the variable itself (a copy relocation; see reach.c's
 * loader_object). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* it reads what malloc left in a block, on purpose */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuse-after-free"

#define BIG (512 << 10)
#define SMALL 344

static void *volatile held;

__attribute__((noinline)) static void *site_l1(void) { return malloc(BIG); }
__attribute__((noinline)) static void *site_l2(void) { return malloc(BIG); }

extern void *__libc_stack_end;
static char maps[1 << 16];
static uint64_t copy[1 << 13];

/* Whether word v points into the middle of L1 or L2 */
static int into(uintptr_t v, uintptr_t l1, uintptr_t l2)
{
    return (v - l1 - 1 < BIG - 1) || (v - l2 - 1 < BIG - 1);
}

/* 1 if no word in the writable mappings other than the heap, nor on the
 * stack above __libc_stack_end, points into the middle of L1 or L2.
 * Raw reads of /proc/self/maps: no allocation disturbs the heap. */
__attribute__((noinline)) static int no_other_words(uintptr_t l1, uintptr_t l2)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    ssize_t n;
    if (fd < 0)
        return 0;
    while (len < sizeof maps - 1 && (n = read(fd, maps + len, sizeof maps - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    maps[len] = 0;
    unsigned long agent_end = 0;        /* where heaptrail's data mapping ends */
    for (char *line = maps; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = 0;
        unsigned long lo, hi;
        char perms[5];
        /* heaptrail's data and the bss after it: its tables hold heap
         * addresses (the break's) and no check reads them */
        int agent = strstr(line, "libheaptrail") != NULL;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (agent || (agent_end && lo == agent_end))) {
            agent_end = hi;
            goto next;
        }
        agent_end = 0;
        /* (a mapping over 1 MiB is heaptrail's: its tables, reserved
         * large and read by no check; reading them took 16 s) */
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' &&
            !strstr(line, "[heap]") && (hi - lo <= (1ul << 20) || strstr(line, "[stack]"))) {
            if (strstr(line, "[stack]"))
                lo = (uintptr_t)__libc_stack_end & ~(uintptr_t)7;
            /* copied, not read in place: heaptrail's threads may unmap
             * a mapping of theirs meanwhile (a read there crashed) */
            for (uintptr_t a = lo; a < hi; a += sizeof copy) {
                size_t want = hi - a < sizeof copy ? hi - a : sizeof copy;
                struct iovec to = { copy, want }, from = { (void *)a, want };
                ssize_t got = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
                for (ssize_t k = 0; k + 8 <= got; k += 8) {
                    uintptr_t at = a + (uintptr_t)k;    /* not the copies themselves */
                    if (at - (uintptr_t)copy >= sizeof copy && at - (uintptr_t)maps >= sizeof maps &&
                        into(*(const uintptr_t *)((const char *)copy + k), l1, l2))
                        return 0;
                }
            }
        }
    next:
        if (!end)
            break;
        line = end + 1;
    }
    return 1;
}

/* A try that failed: its blocks are kept, held, so the next try's lie
 * past them, on new memory, in the same order. (Freed, the next try's
 * small chunks came from the hole they left, and its r from the tcache
 * bin, the old r, which stays there: no later try could hit.) */
static void *volatile spent[4 * 64];
static int nspent;

static int give_up(void *again, void *l1, void *l2)
{
    spent[nspent++] = again;
    spent[nspent++] = malloc(SMALL);    /* r, out of the bin */
    spent[nspent++] = l1;
    spent[nspent++] = l2;
    return 0;
}

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
    if ((uintptr_t)again != ba)
        return give_up(again, l1, l2);
    uintptr_t w;
    memcpy(&w, again, sizeof w);
    uintptr_t in1 = w - (uintptr_t)l1, in2 = w - (uintptr_t)l2;
    if (((in1 > 0 && in1 < BIG) || (in2 > 0 && in2 < BIG)) && no_other_words((uintptr_t)l1, (uintptr_t)l2)) {
        printf("STALE %s\n", in1 > 0 && in1 < BIG ? "L1" : "L2");
        printf("LINK %s\n", (w ^ (ba >> 12)) == ra ? "ok" : "other");
        held = again;
        return 1;
    }
    return give_up(again, l1, l2);
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
    for (int i = 0; i < 64 && !hit; i++)
        hit = try_once();
    if (!hit)
        printf("NOHIT\n");
    bury(site_l3());
    return 0;            /* not exit(): main's frames are gone */
}
