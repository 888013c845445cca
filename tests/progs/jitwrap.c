/* jitwrap.c -- two live JIT ranges with the same registration serial
 * (tests/jit/jitwrap.sh). Serials are 15 bits and wrap after 32767
 * registrations, which a JIT writing a perf map reaches in minutes.
 *
 * Announces, in /tmp/perf-PID.map, wrap_first (slot 0 of a code page),
 * then -- once the agent has registered it -- 32766 dummy ranges below the
 * code page and wrap_second (slot 1) last, so wrap_second gets
 * wrap_first's serial again while both stay registered. Then allocates
 * through wrap_first 3 times (24 bytes) and wrap_second 5 times (40): each
 * must be named after its own code. Exits 4 if the serials did not
 * collide (the test would prove nothing). Removes its perf map. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "jitcode.h"
#include "jitrun.h"

#define DUMMIES 32766
#define DUMMY_SIZE 16

int main(void)
{
    /* dummies in the lower part of one reservation, the code page on top */
    size_t low = ((size_t)DUMMIES * DUMMY_SIZE + 4095) & ~(size_t)4095;
    uint8_t *base = mmap(NULL, low + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return 2;
    uint8_t *code = base + low;
    if (mprotect(code, 4096, PROT_READ | PROT_WRITE) != 0)
        return 2;
    memcpy(code, jit_code_fp, sizeof jit_code_fp);
    memcpy(code + 64, jit_code_fp, sizeof jit_code_fp);
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
        return 2;
    jit_fn first = (jit_fn)(void *)code, second = (jit_fn)(void *)(code + 64);

    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    unlink(path);           /* stale: left by an earlier process with our pid */
    FILE *map = fopen(path, "wx");
    if (!map)
        return 2;
    fprintf(map, "%lx %zx wrap_first\n", (unsigned long)(uintptr_t)code, sizeof jit_code_fp);
    fflush(map);
    unsigned s1 = wait_serial(first, 0);
    for (int i = 0; i < DUMMIES; i++)
        fprintf(map, "%lx %x dummy_%d\n", (unsigned long)(uintptr_t)(base + (size_t)i * DUMMY_SIZE), DUMMY_SIZE, i);
    fprintf(map, "%lx %zx wrap_second\n", (unsigned long)(uintptr_t)(code + 64), sizeof jit_code_fp);
    fflush(map);
    unsigned s2 = wait_serial(second, 0);
    fclose(map);
    unlink(path);
    if (!s1 || s1 != s2) {
        printf("jitwrap: serials %u and %u: no collision\n", s1, s2);
        return 4;
    }
    if (serial_in(first) != s1) {
        printf("jitwrap: wrap_first lost its registration\n");
        return 4;
    }
    run(first, 24, 3);
    run(second, 40, 5);
    printf("jitwrap: ok\n");
    return 0;
}
