/* takenaddr.c -- a program built without PIE whose code takes the address
 * of close and of __libc_start_main: each gets a canonical PLT entry in
 * the program, and every reference to either, heaptrail's too, resolves
 * to that entry. heaptrail used close's address to find libc and decide
 * whether it was preloaded; it found the program, and the program ran
 * untraced (tests/agent/leaks.sh). Leaks 77 bytes once from lose_one and
 * 33 bytes twice from lose_two, called from two places: 143 bytes in 3
 * blocks from 3 sites (unique stacks), all lost; stdout's buffer (4,096
 * bytes, a fourth site) stays reachable. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern int __libc_start_main(void);
void *volatile taken[2];
void *volatile lost;

__attribute__((noinline)) static void lose_one(void) { lost = malloc(77); }
__attribute__((noinline)) static void lose_two(void) { lost = malloc(33); }

int main(void)
{
    taken[0] = (void *)close;           /* mov $close: in code, not data */
    taken[1] = (void *)__libc_start_main;
    lose_one();
    lose_two();
    lose_two();
    lost = NULL;
    printf("TAKEN %d\n", taken[0] != NULL && taken[1] != NULL);
    return 0;
}
