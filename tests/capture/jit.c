/* jit.c -- a mini JIT: stacks through emitted x86-64 code.
 *
 * Emits functions of two shapes (tests/jitcode.h) into mmap'd executable
 * memory, each `void f(void (*next)(void *), void *arg)` calling next(arg):
 * FP (frame pointer, no CFI) and CFI (no frame pointer: only its CFI can
 * unwind it; a frame-pointer step would fail),
 * registered in every way the unwinder learns of JIT code: ht_register_code
 * (FP), nothing at all (FP in anonymous executable memory, like V8),
 * libgcc's __register_frame (CFI), ht_register_code + ht_register_unwind
 * (CFI). A chain C -> JIT -> C -> JIT ... ends in a capture, which must be
 * exactly: JIT frames at their call's return address, tagged with their
 * registration's serial (0 when unregistered); C frames inside the right
 * function, each right after a call; then main's frames as a plain capture
 * sees them. Then:
 *  - unregistered CFI code cannot be unwound: the capture must end there
 *    with HT_FRAME_UNWIND_STOPPED, nothing after it;
 *  - code freed and re-emitted at the same address under another name gets
 *    another serial, so the same call path gets another stack id;
 *  - after __deregister_frame the CFI code is unknown again. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "heaptrail.h"
#include "check.h"
#include "jitcode.h"

void __register_frame(void *begin);
void __deregister_frame(void *begin);

#define MAXF 64

typedef void (*jit_fn)(void (*)(void *), void *);

static uint8_t *code_area;              /* 16 slots of 64 bytes, RX */

static jit_fn emit(int slot, int shape)
{
    uint8_t *p = code_area + 64 * slot;
    CHECK(mprotect(code_area, 4096, PROT_READ | PROT_WRITE) == 0);
    memset(p, 0xcc, 64);
    memcpy(p, shape == JIT_SHAPE_FP ? jit_code_fp : jit_code_cfi, jit_code_size[shape]);
    CHECK(mprotect(code_area, 4096, PROT_READ | PROT_EXEC) == 0);
    __builtin___clear_cache((char *)p, (char *)p + 64);
    return (jit_fn)(void *)p;
}

/* .eh_frame for one CFI-shaped function at `code` (jitcode.h). */
static size_t make_eh_frame(uint8_t *out, uintptr_t code)
{
    return jit_eh_frame(out, (uintptr_t)out, &code, 1, 0);
}

/* ---- the chain -------------------------------------------------------- */

typedef struct chain_s {
    int next, count;
    jit_fn fn[8];
    void *frames[MAXF];
    int n;
} chain_t;

__attribute__((noinline)) static void capture_leaf(chain_t *c)
{
    c->n = ht_capture(1, MAXF, c->frames, NULL);
}

__attribute__((noinline)) void c_step(void *arg)
{
    chain_t *c = arg;
    if (c->next < c->count)
        c->fn[c->next++](c_step, c);
    else
        capture_leaf(c);
    __asm__ volatile("" ::: "memory");     /* keep c_step's frame */
}

static void *outer[MAXF];
static int outer_n;

__attribute__((noinline)) void c_start(chain_t *c)
{
    outer_n = ht_capture(0, MAXF, outer, NULL);   /* c_start's callers */
    c_step(c);
    __asm__ volatile("" ::: "memory");
}

/* Whether pc is just after a call instruction in function fn. */
static int ra_in(const void *pc, void *fn)
{
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((const char *)pc - 1, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym)
        return 0;
    if (di.dli_saddr != fn)
        return 0;
    /* call rel32 (e8), or call r/m64 (ff /2) of 2 to 7 bytes */
    const uint8_t *b = pc;
    if (b[-5] == 0xe8)
        return 1;
    for (int k = 2; k <= 7; k++)
        if (b[-k] == 0xff && ((b[-k + 1] >> 3) & 7) == 2)
            return 1;
    return 0;
}

/* Checks c->frames against the chain, innermost first: c_step (which
 * called capture_leaf), then for each JIT function from the last called:
 * its frame, then the c_step that called it; then c_start, then `outer`
 * from its second frame on (c_start's callers). */
static int check_chain(const chain_t *c, const uint32_t *serial, const char *what)
{
    int i = 0, ok = 1;
    /* innermost: capture_leaf's return into c_step (the last step) */
    ok &= c->n > 0 && ra_in(c->frames[i++], (void *)c_step);
    for (int k = c->count - 1; ok && k >= 0; k--) {
        uintptr_t f = (uintptr_t)c->frames[i++];
        uintptr_t want = (uintptr_t)(void *)c->fn[k] + (uintptr_t)jit_ra_off[((uintptr_t)(void *)c->fn[k] - (uintptr_t)code_area) / 64 % 2 ? JIT_SHAPE_CFI : JIT_SHAPE_FP];
        ok &= HT_FRAME_ADDRESS(f) == want && HT_FRAME_JIT_SERIAL(f) == serial[k];
        ok &= i < c->n && ra_in(c->frames[i++], (void *)c_step);
    }
    ok &= i < c->n && ra_in(c->frames[i++], (void *)c_start);
    /* then everything above c_start, as a capture from c_start saw it */
    ok &= c->n - i == outer_n - 1 && memcmp(c->frames + i, outer + 1, (size_t)(outer_n - 1) * sizeof(void *)) == 0;
    if (!ok) {
        fprintf(stderr, "%s: wrong stack (%d frames):\n", what, c->n);
        for (int j = 0; j < c->n; j++) {
            Dl_info di;
            fprintf(stderr, "  #%d %p serial %u %s\n", j, c->frames[j], HT_FRAME_JIT_SERIAL(c->frames[j]),
                    dladdr((char *)HT_FRAME_ADDRESS(c->frames[j]) - 1, &di) && di.dli_sname ? di.dli_sname : "");
        }
    }
    return ok;
}

int main(void)
{
    code_area = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(code_area != MAP_FAILED);
    /* slot parity gives the shape: even slots FP, odd slots CFI */
    jit_fn fp_named = emit(0, JIT_SHAPE_FP);
    jit_fn cfi_libgcc = emit(1, JIT_SHAPE_CFI);
    jit_fn fp_anon = emit(2, JIT_SHAPE_FP);
    jit_fn cfi_api = emit(3, JIT_SHAPE_CFI);
    jit_fn cfi_none = emit(5, JIT_SHAPE_CFI);

    uint32_t s_fp = ht_register_code((void *)fp_named, sizeof jit_code_fp, "jit:fp_named");
    CHECK(s_fp != 0);
    static uint8_t eh1[256], eh3[256];
    make_eh_frame(eh1, (uintptr_t)(void *)cfi_libgcc);
    __register_frame(eh1);
    size_t eh3_size = make_eh_frame(eh3, (uintptr_t)(void *)cfi_api);
    uint32_t s_api = ht_register_code((void *)cfi_api, sizeof jit_code_cfi, "jit:cfi_api");
    CHECK(ht_register_unwind((void *)cfi_api, sizeof jit_code_cfi, eh3, eh3_size - 4) == s_api);

    /* 1. every registration kind in one chain, twice (cold, then cached) */
    for (int round = 0; round < 2; round++) {
        chain_t c = { 0, 4, { fp_named, cfi_libgcc, fp_anon, cfi_api }, { 0 }, 0 };
        c_start(&c);
        /* the libgcc-registered range has a serial we never saw: learn it */
        uint32_t s_lib = HT_FRAME_JIT_SERIAL(c.frames[5]);   /* fn[1]: 1 + 2 * (4 - 1 - 1) */
        uint32_t serial[4] = { s_fp, s_lib, 0, s_api };
        CHECK(s_lib != 0 && s_lib != s_fp && s_lib != s_api);
        CHECK(check_chain(&c, serial, "all kinds"));
    }

    /* 2. unregistered code without frame pointers: the end, marked */
    {
        chain_t c = { 0, 2, { fp_named, cfi_none }, { 0 }, 0 };
        c_start(&c);
        CHECK_EQ(c.n, 3);
        CHECK(c.n == 3 && ra_in(c.frames[0], (void *)c_step));
        CHECK(c.n == 3 && HT_FRAME_ADDRESS(c.frames[1]) == (uintptr_t)(void *)cfi_none + 23);
        CHECK(c.n == 3 && c.frames[2] == HT_FRAME_UNWIND_STOPPED);
    }

    /* 3. re-emitted at the same address under another name: new serial,
     *    new stack id for the same call path */
    uint32_t ids[2], serials[2];
    for (int v = 0; v < 2; v++) {
        CHECK(ht_unregister_code((void *)fp_named) == 0);
        jit_fn f = emit(0, JIT_SHAPE_FP);
        serials[v] = ht_register_code((void *)f, sizeof jit_code_fp, v ? "jit:beta" : "jit:alpha");
        chain_t c = { 0, 1, { f }, { 0 }, 0 };
        c_start(&c);
        uint32_t serial[1] = { serials[v] };
        CHECK(check_chain(&c, serial, "re-emitted"));
        ids[v] = ht_stack_id(c.frames, c.n);
    }
    CHECK(serials[0] != serials[1]);
    CHECK(ids[0] != ids[1] && ids[0] != HT_STACK_ID_OVERFLOW && ids[1] != HT_STACK_ID_OVERFLOW);
    CHECK_EQ(ht_unregister_code((void *)code_area + 64 * 9), -1);

    /* 4. after __deregister_frame, the libgcc-registered code is unknown */
    __deregister_frame(eh1);
    {
        chain_t c = { 0, 1, { cfi_libgcc }, { 0 }, 0 };
        c_start(&c);
        CHECK_EQ(c.n, 3);
        CHECK(c.n == 3 && HT_FRAME_JIT_SERIAL(c.frames[1]) == 0 && c.frames[2] == HT_FRAME_UNWIND_STOPPED);
    }
    return check_done();
}
