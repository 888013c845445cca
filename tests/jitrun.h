/* jitrun.h -- the C side of the agent-level JIT test programs
 * (tests/progs/jitdump.c, jitwrap.c): code emitted from tests/jitcode.h is
 * called as fn(leaf, size) from run(); leaf allocates `size` bytes, or
 * with size 0 captures its stack, so a program can see whether the agent
 * has registered its code yet. One translation unit per program. */
#ifndef HT_TEST_JITRUN_H
#define HT_TEST_JITRUN_H
#include <stdlib.h>
#include <time.h>
#include "heaptrail.h"

typedef void (*jit_fn)(void (*)(void *), void *);

static void *volatile jr_sink;
static void *jr_frames[64];
static int jr_nframes;

__attribute__((noinline)) void leaf(void *arg)
{
    size_t n = (size_t)arg;
    if (n)
        jr_sink = malloc(n);
    else
        jr_nframes = ht_capture(0, 64, jr_frames, NULL);
    __asm__ volatile("" ::: "memory");  /* no tail call: keep leaf's frame */
}

__attribute__((noinline)) void run(jit_fn fn, size_t size, int times)
{
    for (int i = 0; i < times; i++)
        fn(leaf, (void *)size);
    __asm__ volatile("" ::: "memory");
}

/* The registration serial of the frame in fn (0: not registered yet). */
static unsigned serial_in(jit_fn fn)
{
    run(fn, 0, 1);
    for (int k = 0; k < jr_nframes; k++) {
        uintptr_t a = HT_FRAME_ADDRESS(jr_frames[k]);
        if (a > (uintptr_t)(void *)fn && a <= (uintptr_t)(void *)fn + 64)
            return HT_FRAME_JIT_SERIAL(jr_frames[k]);
    }
    return 0;
}

/* Waits until a capture through fn carries a serial other than 0 and
 * `old` (the agent has read the announcement), at most 10 s. Returns it,
 * or 0. */
static unsigned wait_serial(jit_fn fn, unsigned old)
{
    for (int ms = 0; ms < 10000; ms += 10) {
        unsigned s = serial_in(fn);
        if (s && s != old)
            return s;
        struct timespec ts = { 0, 10000000L };
        nanosleep(&ts, NULL);
    }
    return 0;
}
#endif
