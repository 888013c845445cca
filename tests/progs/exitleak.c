/* exitleak.c -- loses blocks from two call sites, then exits with the
 * status given as its argument (default 0): for `heaptrail run
 * --suppressions` and `--error-exitcode` (tests/agent/suppress.sh).
 * lose_list() loses the head of a three-node list (one block definitely
 * lost, two indirectly); lose_one() loses one 100-byte block. No stdio:
 * libc leaves nothing live. */
#include <stdlib.h>

struct node { struct node *next; char pad[40]; };
static void *volatile sink;
static volatile int three = 3;  /* one call site for the loop */

/* zeroes dead stack below main's frame: a stale copy of a lost pointer
 * there would make a conservative scan call its block reachable */
__attribute__((noinline)) static void scrub_stack(void)
{
    volatile char pad[16384];
    for (unsigned i = 0; i < sizeof pad; i++)
        pad[i] = 0;
}

__attribute__((noinline)) static void lose_list(void)
{
    struct node *head = NULL;
    for (int i = 0; i < three; i++) {
        struct node *n = malloc(sizeof *n);
        n->next = head;
        head = n;
    }
    sink = head;
    sink = NULL;
}

__attribute__((noinline)) static void lose_one(void)
{
    sink = malloc(100);
    sink = NULL;
}

int main(int argc, char **argv)
{
    lose_list();
    lose_one();
    scrub_stack();
    return argc > 1 ? atoi(argv[1]) : 0;
}
