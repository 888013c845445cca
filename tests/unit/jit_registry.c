/* jit_registry.c -- the JIT registry's batch interface (jit.c), as the
 * agent's perf-map, jitdump and GDB JIT readers use it.
 *
 * 1-3. Code without a frame pointer whose CFI came from libgcc's
 *   __register_frame, then named by a batch registration: the name must
 *   keep the CFI (a capture through it reaches its caller), for the whole
 *   FDE range and a part of it; a name over code registered with
 *   ht_register_unwind keeps its CFI only if it starts where that
 *   registration does.
 * 4. Serials of a batch, per entry, 0 for one a later entry overlaps.
 * 5. Removal by (start, serial): a registration replaced since is left.
 * 6. A copy of a pc-relative .eh_frame registered with its bias unwinds
 *   like the original; with no bias it covers nothing. */
#include <string.h>
#include <sys/mman.h>
#include "heaptrail.h"
#include "check.h"
#include "platform/linux-x86_64/jit.h"
#include "../jitcode.h"

void __register_frame(void *begin);
void __deregister_frame(void *begin);

#define MAXF 64

#define RA_OFF 23                /* jit_ra_off[JIT_SHAPE_CFI] */

typedef void (*jit_fn)(void (*)(void *), void *);

/* A zero-terminated .eh_frame (tests/jitcode.h) for one CFI-shaped
 * function at `code`, with absolute pointers, or pc-relative ones as if
 * the section were at `at`. Returns its size. */
static size_t make_eh_frame_at(uint8_t *out, uintptr_t code, int pcrel, uintptr_t at)
{
    return jit_eh_frame(out, at, &code, 1, pcrel);
}

static size_t make_eh_frame(uint8_t *out, uintptr_t code)
{
    return make_eh_frame_at(out, code, 0, 0);
}

static void *frames[MAXF];
static int nframes;

__attribute__((noinline)) static void leaf(void *arg)
{
    (void)arg;
    nframes = ht_capture(0, MAXF, frames, NULL);
    __asm__ volatile("" ::: "memory");
}

/* Calls f(leaf) and says whether the capture went through f's frame
 * (tagged with `serial`) and on: after it, this function's frame and then
 * exactly what a capture made here sees above it. */
__attribute__((noinline)) static int walks_through(jit_fn f, uint32_t serial)
{
    void *outer[MAXF];
    int nouter = ht_capture(0, MAXF, outer, NULL);
    nframes = 0;
    f(leaf, NULL);
    __asm__ volatile("" ::: "memory");
    return nouter > 1 && nframes == nouter + 2 &&
           HT_FRAME_ADDRESS(frames[1]) == (uintptr_t)(void *)f + RA_OFF &&
           HT_FRAME_JIT_SERIAL(frames[1]) == serial &&
           memcmp(frames + 3, outer + 1, (size_t)(nouter - 1) * sizeof(void *)) == 0;
}

static uint32_t add_one(void *start, size_t size, const char *name)
{
    ht_jit_add_t a = { .start = (uintptr_t)start, .size = size, .name = name };
    CHECK_EQ(ht__jit_add_many(&a, 1, NULL), 1);
    ht_jit_range_t r;
    return ht__jit_find((uintptr_t)start, &r) ? r.serial : 0;
}

int main(void)
{
    /* code in the first page, data near it (pc-relative .eh_frame) in the second */
    uint8_t *area = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    for (int slot = 0; slot < 6; slot++)
        memcpy(area + 64 * slot, jit_code_cfi, sizeof jit_code_cfi);
    CHECK(mprotect(area, 4096, PROT_READ | PROT_EXEC) == 0);
    jit_fn f0 = (jit_fn)(void *)area, f1 = (jit_fn)(void *)(area + 64);
    jit_fn f2 = (jit_fn)(void *)(area + 128), f3 = (jit_fn)(void *)(area + 192);
    static uint8_t eh0[256], eh1[256], eh2[256], eh3[256];
    ht_jit_range_t r;

    /* 1. __register_frame, then a name for the whole FDE range */
    make_eh_frame(eh0, (uintptr_t)area);
    __register_frame(eh0);
    CHECK(ht__jit_find((uintptr_t)area, &r) && r.eh == eh0);
    uint32_t s0 = add_one(area, sizeof jit_code_cfi, "named_whole");
    CHECK(ht__jit_find((uintptr_t)area + 3, &r) && r.serial == s0 && r.eh == eh0 &&
          r.name && strcmp(r.name, "named_whole") == 0);
    CHECK(walks_through(f0, s0));
    /* __deregister_frame takes the named range with it: its CFI is gone */
    __deregister_frame(eh0);
    CHECK(!ht__jit_find((uintptr_t)area + 3, &r));

    /* 2. a name for part of the FDE range (the call is inside it) */
    make_eh_frame(eh1, (uintptr_t)f1);
    __register_frame(eh1);
    uint32_t s1 = add_one((void *)f1, RA_OFF + 2, "named_part");
    CHECK(ht__jit_find((uintptr_t)f1, &r) && r.serial == s1 && r.eh == eh1 && r.end == (uintptr_t)f1 + RA_OFF + 2);
    CHECK(walks_through(f1, s1));
    /* a name reaching past the registration's end keeps nothing */
    uint32_t s1b = add_one((void *)f1, 40, "named_past");
    CHECK(ht__jit_find((uintptr_t)f1, &r) && r.serial == s1b && r.eh == NULL);
    __deregister_frame(eh1);

    /* 3. ht_register_unwind: kept from the same start only */
    size_t n2 = make_eh_frame(eh2, (uintptr_t)f2);
    uint32_t a2 = ht_register_unwind((void *)f2, sizeof jit_code_cfi, eh2, n2 - 4);
    CHECK(a2 != 0);
    uint32_t s2 = add_one((void *)f2, sizeof jit_code_cfi, "named_api");
    CHECK(s2 != a2 && ht__jit_find((uintptr_t)f2, &r) && r.eh == eh2);
    CHECK(walks_through(f2, s2));
    CHECK_EQ(ht_unregister_code((void *)f2), 0);
    CHECK(!ht__jit_find((uintptr_t)f2, &r));
    size_t n3 = make_eh_frame(eh3, (uintptr_t)f3);
    CHECK(ht_register_unwind((void *)f3, sizeof jit_code_cfi, eh3, n3 - 4) != 0);
    add_one((char *)(void *)f3 + 1, 20, "named_inside");
    CHECK(ht__jit_find((uintptr_t)f3 + 1, &r) && r.eh == NULL);

    /* 4. serials per entry; the later of two overlapping entries wins */
    uintptr_t b = (uintptr_t)area + 2048;
    ht_jit_add_t adds[4] = {
        { .start = b + 100, .size = 50, .name = "late" },
        { .start = b, .size = 40, .name = "first" },
        { .start = b + 20, .size = 40, .name = "over_first" },   /* beats "first" */
        { .start = b + 200, .size = 0, .name = "empty" },        /* not registered */
    };
    uint32_t ser[4] = { 9, 9, 9, 9 };
    CHECK_EQ(ht__jit_add_many(adds, 4, ser), 2);
    CHECK(ser[0] != 0 && ser[1] == 0 && ser[2] != 0 && ser[3] == 0 && ser[0] != ser[2]);
    CHECK(ht__jit_find(b + 100, &r) && r.serial == ser[0] && strcmp(r.name, "late") == 0);
    CHECK(ht__jit_find(b + 20, &r) && r.serial == ser[2] && strcmp(r.name, "over_first") == 0);
    CHECK(!ht__jit_find(b, &r));

    /* 5. removal by serial: a replaced registration is not the one to go */
    uint32_t old = ser[0], fresh;
    ht_jit_add_t again = { .start = b + 100, .size = 50, .name = "late_again" };
    CHECK_EQ(ht__jit_add_many(&again, 1, &fresh), 1);
    ht_jit_reg_t gone[2] = { { b + 100, old }, { b + 30, ser[2] } };  /* wrong serial; wrong start */
    CHECK_EQ(ht__jit_remove_many(gone, 2), 0);
    CHECK(ht__jit_find(b + 100, &r) && r.serial == fresh && ht__jit_find(b + 20, &r));
    ht_jit_reg_t both[2] = { { b + 100, fresh }, { b + 20, ser[2] } };
    CHECK_EQ(ht__jit_remove_many(both, 2), 2);
    CHECK(!ht__jit_find(b + 100, &r) && !ht__jit_find(b + 20, &r));
    CHECK(ht__jit_find((uintptr_t)f3 + 1, &r));          /* the rest stays */

    /* 6. a copy of a pc-relative .eh_frame, registered with its bias */
    static uint8_t copy[256];
    uint8_t *loaded = area + 4096;
    jit_fn f4 = (jit_fn)(void *)(area + 256), f5 = (jit_fn)(void *)(area + 320);
    size_t n4 = make_eh_frame_at(loaded, (uintptr_t)f4, 1, (uintptr_t)loaded);
    memcpy(copy, loaded, n4);
    memset(loaded, 0xff, n4);                           /* the copy is all there is */
    uint32_t s4;
    ht_jit_add_t moved = { .start = (uintptr_t)f4, .size = sizeof jit_code_cfi, .name = "moved",
                           .eh = copy, .eh_size = n4, .eh_bias = (intptr_t)((uintptr_t)loaded - (uintptr_t)copy) };
    CHECK_EQ(ht__jit_add_many(&moved, 1, &s4), 1);
    CHECK(walks_through(f4, s4));
    static uint8_t copy5[256];
    size_t n5 = make_eh_frame_at(copy5, (uintptr_t)f5, 1, (uintptr_t)loaded);
    uint32_t s5;
    ht_jit_add_t unmoved = { .start = (uintptr_t)f5, .size = sizeof jit_code_cfi, .name = "unmoved",
                             .eh = copy5, .eh_size = n5 };
    CHECK_EQ(ht__jit_add_many(&unmoved, 1, &s5), 1);
    CHECK(!walks_through(f5, s5));
    return check_done();
}
