/* regrow.c -- a leak check while the program reallocates: the only
 * pointers to 1000 small blocks (regrow_child) sit in a 1-2 MB array in
 * the heap that the main thread keeps growing with realloc, beside a
 * second array it grows in turn, so that every growth finds the other
 * array after it and moves, copying a megabyte: most of the program's
 * time is spent inside realloc. A leak check that paused it there without
 * seeing the array would call all 1000 lost (the heap itself is no root).
 * With the argument `mmap` the arrays are chunks glibc maps apart (its
 * mmap threshold lowered to 64 KiB), and the main thread moves the first
 * itself (a new chunk, a copy, a free: mremap mostly grows a mapping in
 * place), so the old range is unmapped at once. A check scanning a copy
 * of the process made before that (a forked scan) must still see the
 * array there.
 * Prints READY, loops until a line arrives on standard input, then prints
 * how many reallocations moved the array and exits normally. */
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHILDREN 1000
#define BASE     (1u << 20)

void **arr, **other;        /* roots, external so the stores stay */

__attribute__((noinline)) static void *regrow_child(void) { return malloc(24); }
__attribute__((noinline)) static void **regrow_array(size_t n) { return malloc(n); }

int main(int argc, char **argv)
{
    int mapped = argc > 1 && !strcmp(argv[1], "mmap");
    if (mapped)
        mallopt(M_MMAP_THRESHOLD, 64 << 10);    /* each array mapped apart */
    else
        mallopt(M_MMAP_THRESHOLD, 8 << 20);     /* in the heap, not mmap'd */
    arr = regrow_array(BASE);
    other = regrow_array(BASE);
    for (int i = 0; i < CHILDREN; i++)
        arr[i] = regrow_child();
    printf("READY\n");
    fflush(stdout);
    size_t sa = BASE, so = BASE;
    unsigned long moves = 0;
    for (unsigned k = 1;; k++) {
        if (sa > 2 * BASE)
            sa = so = BASE;
        if ((k & 1) && mapped) {
            void **a = regrow_array(sa += 64);
            if (!a)
                abort();
            memcpy(a, arr, sa - 64);
            free(arr);
            moves++;
            arr = a;
        } else if (k & 1) {
            void **a = realloc(arr, sa += 64);
            if (!a)
                abort();
            moves += a != arr;
            arr = a;
        } else {
            void **o = realloc(other, so += 64);
            if (!o)
                abort();
            other = o;
        }
        if (!(k & 63)) {
            struct pollfd p = { .fd = 0, .events = POLLIN };
            if (poll(&p, 1, 0) == 1)
                break;
        }
    }
    printf("MOVES %lu\n", moves);
    return 0;
}
