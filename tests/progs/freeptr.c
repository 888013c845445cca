/* freeptr: a program that passes free around as a function pointer, with
 * libc's allocator. Built without PIE (build/tests/progs/freeptr_nopie),
 * taking free's address gives it a canonical PLT entry: an undefined
 * symbol whose value is its PLT stub, which the loader hands out as free's
 * address. That is not an allocator of its own (calls through the stub
 * reach heaptrail's free), and heaptrail must not say it is. Leaks 2
 * blocks of 64 bytes, frees 3. */
#include <stdio.h>
#include <stdlib.h>

static void (*volatile release)(void *);
void *volatile keep[2];

int main(void)
{
    release = free;     /* in code: an absolute address, so a PLT stub */
    for (int i = 0; i < 5; i++) {
        void *p = malloc(64);
        if (i < 2)
            keep[i] = p;
        else
            release(p);
    }
    puts("freeptr: 2 blocks of 64 bytes kept");
    return 0;
}
