/* jit.c -- ht_capture through JIT code: functions emitted into
 * VirtualAlloc'd executable memory with hand-written UNWIND_INFO,
 * registered with RtlAddFunctionTable, RtlAddGrowableFunctionTable or
 * RtlInstallFunctionTableCallback, calling back into C, which captures.
 *
 * Every JIT function is called from the same call site in call_jit(), so
 * the frames outside the JIT code are the same in every case: the
 * "baseline" case (J1) fixes them, and every other case must give exactly
 * its JIT return addresses followed by the baseline's outer frames, which
 * run through call_jit() and into main() (main's own return address may
 * differ: the compiler can duplicate a call site). Where Wine's RtlVirtualUnwind
 * understands the unwind data, the stack must also equal its reference
 * walk frame for frame. Cases:
 *   J1  push rbx; sub rsp       (RtlAddFunctionTable)
 *   J4  rbx as frame register, calling J5, which saves and clobbers rbx:
 *       unwinding J4 needs the rbx J5 saved (the walk's full mode)
 *   J6  chained unwind info: the body's entry chains to the prolog's
 *   J9  a thunk with no function entry (a leaf to the unwinder) calling J9b
 *   J8  version 2 unwind info with UWOP_EPILOG codes
 *   J7  UWOP_PUSH_MACHFRAME: a fake interrupt frame; the caller's pc is
 *       then an interrupted instruction
 *   JG  pushes and clobbers rbp  (RtlAddGrowableFunctionTable, grown to 1)
 *   JC  saves rbp with a mov     (RtlInstallFunctionTableCallback)
 *   J1 again after its table was deleted and its code rewritten in place
 *       with a different frame size: a JIT reusing memory, which a cached
 *       rule would get wrong;
 *   J1 registered with ht_register_code: its frame carries the serial in
 *       bits 48..62, a new serial after re-registration, none after
 *       ht_unregister_code;
 *   JU  unregistered code with no unwind data whose return address is not
 *       at rsp, and rbp cleared: the walk ends with HT_FRAME_UNWIND_STOPPED
 *       right after its frame.
 * call_jit() uses alloca, so its frame is rbp-based: a wrong rbp after
 * the JIT frames derails the walk. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "check.h"
#include "windows/refwalk.h"

#define MAXF 128

enum { UWOP_PUSH_NONVOL = 0, UWOP_ALLOC_LARGE = 1, UWOP_ALLOC_SMALL = 2, UWOP_SET_FPREG = 3,
       UWOP_SAVE_NONVOL = 4, UWOP_EPILOG = 6, UWOP_PUSH_MACHFRAME = 10 };
enum { RBX = 3, RBP = 5, RSI = 6 };
#define SLOT(off, op, info) ((uint16_t)((off) | (((op) | ((info) << 4)) << 8)))

typedef struct jcase_s {
    const char *name;
    void *entry;                /* what call_jit calls */
    uintptr_t ra[3];            /* the JIT return addresses, innermost first */
    int nra;
    int wine_ref;               /* Wine's RtlVirtualUnwind handles it */
    int rtl_bt, rtl_n;          /* also run RtlCaptureStackBackTrace */
    int no_ref;                 /* garbage ahead: no reference walk */
    void *rtl[MAXF];
    void *ours[MAXF], *ref[MAXF + 2];
    int n, m;
} jcase_t;

/* ---- the code buffer ---------------------------------------------------- */

typedef struct region_s {
    uint8_t *base;
    size_t code, info;          /* next free offsets */
} region_t;

static void region_init(region_t *r)
{
    r->base = VirtualAlloc(NULL, 0x10000, MEM_RESERVE | MEM_COMMIT, PAGE_EXECUTE_READWRITE);
    r->code = 0x100;
    r->info = 0x8000;
}

static uint8_t *code_at(region_t *r, size_t align)
{
    r->code = (r->code + align - 1) & ~(align - 1);
    return r->base + r->code;
}

static void put(region_t *r, const void *bytes, size_t n)
{
    memcpy(r->base + r->code, bytes, n);
    r->code += n;
}

static void put_imm32(region_t *r, uint32_t v) { put(r, &v, 4); }
static void put_imm64(region_t *r, uint64_t v) { put(r, &v, 8); }

/* Writes an UNWIND_INFO (codes[] in stored order) and returns its RVA. */
static DWORD put_info(region_t *r, unsigned version, unsigned flags, unsigned prolog, unsigned freg,
                      unsigned foff, const uint16_t *codes, unsigned n, const RUNTIME_FUNCTION *chain)
{
    r->info = (r->info + 3) & ~(size_t)3;
    uint8_t *p = r->base + r->info;
    p[0] = (uint8_t)(version | flags << 3);
    p[1] = (uint8_t)prolog;
    p[2] = (uint8_t)n;
    p[3] = (uint8_t)(freg | foff << 4);
    memcpy(p + 4, codes, n * 2u);
    size_t len = 4 + 2 * ((n + 1u) & ~1u);
    if (chain) {
        memcpy(p + len, chain, sizeof *chain);
        len += sizeof *chain;
    }
    DWORD rva = (DWORD)r->info;
    r->info += len;
    return rva;
}

static RUNTIME_FUNCTION rf(region_t *r, const uint8_t *begin, const uint8_t *end, DWORD info)
{
    RUNTIME_FUNCTION f;
    f.BeginAddress = (DWORD)(begin - r->base);
    f.EndAddress = (DWORD)(end - r->base);
    f.UnwindData = info;
    return f;
}

/* ---- the emitted functions ----------------------------------------------
 * Each is called as fn(cb, arg) (rcx, rdx) and calls cb(arg). */

static const uint8_t CALL_CB[] = { 0x48, 0x89, 0xc8, 0x48, 0x89, 0xd1, 0xff, 0xd0 };
/* mov rax, rcx; mov rcx, rdx; call rax */

/* J1: push rbx; sub rsp, L (imm32 form, so any L gives the same layout) */
static void emit_j1(region_t *r, uint8_t *at, uint32_t L, RUNTIME_FUNCTION *out, jcase_t *c)
{
    size_t save = r->code;
    r->code = (size_t)(at - r->base);
    put(r, "\x53\x48\x81\xec", 4);
    put_imm32(r, L);
    put(r, CALL_CB, sizeof CALL_CB);
    c->ra[0] = (uintptr_t)(r->base + r->code);
    put(r, "\x48\x81\xc4", 3);
    put_imm32(r, L);
    put(r, "\x5b\xc3", 2);
    uint16_t small[2] = { SLOT(8, UWOP_ALLOC_SMALL, L / 8 - 1), SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    uint16_t large[3] = { SLOT(8, UWOP_ALLOC_LARGE, 0), (uint16_t)(L / 8),
                          SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    DWORD info = L <= 128 ? put_info(r, 1, 0, 8, 0, 0, small, 2, NULL)
                          : put_info(r, 1, 0, 8, 0, 0, large, 3, NULL);
    *out = rf(r, at, r->base + r->code, info);
    c->entry = at;
    c->nra = 1;
    if (r->code < save)
        r->code = save;
}

/* ---- C side -------------------------------------------------------------- */

static jcase_t *g_case;

__attribute__((noinline)) static void capture_pair(jcase_t *c)
{
    c->n = ht_capture(1, MAXF, c->ours, NULL);
    c->m = c->no_ref ? 0 : ref_walk(c->ref, MAXF + 2);
    if (c->rtl_bt)
        c->rtl_n = RtlCaptureStackBackTrace(1, MAXF, c->rtl, NULL);
}

__attribute__((noinline)) static int jit_cb(void *arg)
{
    capture_pair(arg);
    return 7;
}

/* The one call site into JIT code; alloca makes its frame rbp-based. */
__attribute__((noinline)) static int call_jit(void *fn, jcase_t *c)
{
    volatile char *pad = __builtin_alloca(16 + ((uintptr_t)c & 16));
    pad[0] = 1;
    int r = ((int (*)(int (*)(void *), void *))fn)(jit_cb, c);
    return r + pad[0];
}

__attribute__((noinline)) static int run_case(jcase_t *c)
{
    g_case = c;
    int r = call_jit(c->entry, c);
    return r + 1;
}

/* Runs the cases from one call site, so that all share the frames from
 * run_case() outwards. */
__attribute__((noinline)) static void run_all(jcase_t **cases)
{
    for (; *cases; cases++)
        run_case(*cases);
}

static int fn_range(void *pc, uintptr_t *lo, uintptr_t *hi)
{
    DWORD64 base;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry((DWORD64)pc, &base, NULL);
    if (!f)
        return 0;
    *lo = base + f->BeginAddress;
    *hi = base + f->EndAddress;
    return 1;
}

int main(void);

static int in_fn(void *addr, void *fn)
{
    uintptr_t lo, hi, a = (uintptr_t)addr - 1;
    return fn_range(fn, &lo, &hi) && a >= lo && a < hi;
}

static void dump(const char *label, void **f, int n)
{
    fprintf(stderr, "  %s (%d):", label, n);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %p", f[i]);
    fprintf(stderr, "\n");
}

/* The checks every case gets, against the baseline's outer frames. */
static void check_case(jcase_t *c, const jcase_t *base)
{
    int ok = c->n == base->n - base->nra + c->nra && c->ours[0] == base->ours[0];
    for (int i = 0; ok && i < c->nra; i++)
        ok = c->ours[1 + i] == (void *)c->ra[i];
    for (int i = 1 + c->nra, j = 1 + base->nra; ok && i < c->n; i++, j++)
        ok = c->ours[i] == base->ours[j] ||
             /* the compiler may have made more than one call site in main */
             (in_fn(c->ours[i], (void *)main) && in_fn(base->ours[j], (void *)main));
    if (!ok) {
        fprintf(stderr, "%s: not the JIT frames followed by the baseline's\n", c->name);
        dump("ours", c->ours, c->n);
        dump("baseline", (void **)base->ours, base->n);
    }
    CHECK(ok);
    int refok = c->n == c->m - 1;
    for (int i = 0; refok && i < c->n; i++)
        refok = HT_FRAME_ADDRESS(c->ours[i]) == (uintptr_t)c->ref[1 + i];
    if (c->wine_ref) {
        if (!refok) {
            fprintf(stderr, "%s: differs from RtlVirtualUnwind\n", c->name);
            dump("ours", c->ours, c->n);
            dump("reference", c->ref + 1, c->m - 1);
        }
        CHECK(refok);
    } else {
        fprintf(stderr, "%s: Wine's RtlVirtualUnwind %s\n", c->name,
                refok ? "agrees" : "does not handle this unwind data (not compared)");
    }
    fprintf(stderr, "%-44s %2d frames, %s\n", c->name, c->n, ok ? "ok" : "WRONG");
}

static volatile LONG callback_lookups;
static RUNTIME_FUNCTION g_cb_fn;
static uintptr_t g_cb_lo, g_cb_hi;

static PRUNTIME_FUNCTION CALLBACK table_callback(DWORD64 pc, PVOID ctx)
{
    InterlockedIncrement(&callback_lookups);
    return pc >= g_cb_lo && pc < g_cb_hi ? &g_cb_fn : NULL;
}

int main(void)
{
    static jcase_t j1 = { .name = "J1 RtlAddFunctionTable", .wine_ref = 1 };
    static jcase_t j4 = { .name = "J4 rbx frame register (+ J5 clobbering rbx)", .wine_ref = 1 };
    static jcase_t j6 = { .name = "J6 chained unwind info", .wine_ref = 1 };
    static jcase_t j9 = { .name = "J9 thunk without function entry", .wine_ref = 1 };
    static jcase_t j8 = { .name = "J8 unwind info version 2", .wine_ref = 1 };
    static jcase_t j7 = { .name = "J7 UWOP_PUSH_MACHFRAME", .wine_ref = 1 };
    static jcase_t jg = { .name = "JG RtlAddGrowableFunctionTable", .wine_ref = 1 };
    static jcase_t jc = { .name = "JC RtlInstallFunctionTableCallback", .wine_ref = 1 };
    static jcase_t j1b = { .name = "J1 deleted, rewritten, registered again", .wine_ref = 1 };
    static jcase_t j1t = { .name = "J1 after ht_register_code", .wine_ref = 1 };
    static jcase_t j1t2 = { .name = "J1 after ht_register_code again", .wine_ref = 1 };
    static jcase_t j1u = { .name = "J1 after ht_unregister_code", .wine_ref = 1 };
    static jcase_t ju = { .name = "JU unknown code", .no_ref = 1 };

    /* ---- region A: RtlAddFunctionTable -------------------------------- */
    region_t a;
    region_init(&a);
    CHECK(a.base != NULL);
    RUNTIME_FUNCTION fa[16];
    int nfa = 0;

    uint8_t *p1 = code_at(&a, 16);
    emit_j1(&a, p1, 0x30, &fa[nfa++], &j1);

    /* J5: push rbx; sub rsp, 0x20; mov rbx, 0xdeadbeef; call cb */
    uint8_t *p5 = code_at(&a, 16);
    put(&a, "\x53\x48\x83\xec\x20\x48\xc7\xc3\xef\xbe\xad\xde", 12);
    put(&a, CALL_CB, sizeof CALL_CB);
    uintptr_t ra5 = (uintptr_t)(a.base + a.code);
    put(&a, "\x48\x83\xc4\x20\x5b\xc3", 6);
    uint16_t c5[] = { SLOT(5, UWOP_ALLOC_SMALL, 3), SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    fa[nfa++] = rf(&a, p5, a.base + a.code, put_info(&a, 1, 0, 5, 0, 0, c5, 2, NULL));

    /* J4: push rbx; sub rsp, 0x40; lea rbx, [rsp+0x20]; call J5;
     *     lea rsp, [rbx+0x20]; pop rbx; ret */
    uint8_t *p4 = code_at(&a, 16);
    put(&a, "\x53\x48\x83\xec\x40\x48\x8d\x5c\x24\x20\x48\xb8", 12);
    put_imm64(&a, (uint64_t)(uintptr_t)p5);
    put(&a, "\xff\xd0", 2);
    j4.ra[0] = ra5;
    j4.ra[1] = (uintptr_t)(a.base + a.code);
    j4.nra = 2;
    j4.entry = p4;
    put(&a, "\x48\x8d\x63\x20\x5b\xc3", 6);
    uint16_t c4[] = { SLOT(10, UWOP_SET_FPREG, 0), SLOT(5, UWOP_ALLOC_SMALL, 7),
                      SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    fa[nfa++] = rf(&a, p4, a.base + a.code, put_info(&a, 1, 0, 10, RBX, 2, c4, 3, NULL));

    /* J6: prolog fragment (push rbx; sub rsp, 0x30; jmp body), body with
     * chained unwind info */
    uint8_t *p6 = code_at(&a, 16);
    put(&a, "\x53\x48\x83\xec\x30\xe9", 6);
    uint8_t *body6 = p6 + 0x40;
    put_imm32(&a, (uint32_t)(body6 - (p6 + 10)));
    uint16_t c6[] = { SLOT(5, UWOP_ALLOC_SMALL, 5), SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    RUNTIME_FUNCTION parent6 = rf(&a, p6, p6 + 10, put_info(&a, 1, 0, 5, 0, 0, c6, 2, NULL));
    fa[nfa++] = parent6;
    a.code = (size_t)(body6 - a.base);
    put(&a, CALL_CB, sizeof CALL_CB);
    j6.ra[0] = (uintptr_t)(a.base + a.code);
    j6.nra = 1;
    j6.entry = p6;
    put(&a, "\x48\x83\xc4\x30\x5b\xc3", 6);
    fa[nfa++] = rf(&a, body6, a.base + a.code, put_info(&a, 1, UNW_FLAG_CHAININFO, 0, 0, 0, NULL, 0, &parent6));

    /* J9b: push rbx; sub rsp, 0x28 (entered with rsp 16-aligned) */
    uint8_t *p9b = code_at(&a, 16);
    put(&a, "\x53\x48\x83\xec\x28", 5);
    put(&a, CALL_CB, sizeof CALL_CB);
    uintptr_t ra9b = (uintptr_t)(a.base + a.code);
    put(&a, "\x48\x83\xc4\x28\x5b\xc3", 6);
    uint16_t c9[] = { SLOT(5, UWOP_ALLOC_SMALL, 4), SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    fa[nfa++] = rf(&a, p9b, a.base + a.code, put_info(&a, 1, 0, 5, 0, 0, c9, 2, NULL));
    /* J9: mov rax, J9b; call rax; ret -- no function entry, between two
     * registered ones */
    uint8_t *p9 = code_at(&a, 16);
    put(&a, "\x48\xb8", 2);
    put_imm64(&a, (uint64_t)(uintptr_t)p9b);
    put(&a, "\xff\xd0", 2);
    j9.ra[0] = ra9b;
    j9.ra[1] = (uintptr_t)(a.base + a.code);
    j9.nra = 2;
    j9.entry = p9;
    put(&a, "\xc3", 1);

    /* J8: J1's code with version 2 unwind info (two UWOP_EPILOG codes
     * first, as MSVC emits them) */
    uint8_t *p8 = code_at(&a, 16);
    put(&a, "\x53\x48\x81\xec\x30\x00\x00\x00", 8);
    put(&a, CALL_CB, sizeof CALL_CB);
    j8.ra[0] = (uintptr_t)(a.base + a.code);
    j8.nra = 1;
    j8.entry = p8;
    put(&a, "\x48\x81\xc4\x30\x00\x00\x00\x5b\xc3", 9);
    uint16_t c8[] = { SLOT(9, UWOP_EPILOG, 1), SLOT(0, UWOP_EPILOG, 0),
                      SLOT(8, UWOP_ALLOC_SMALL, 5), SLOT(1, UWOP_PUSH_NONVOL, RBX) };
    fa[nfa++] = rf(&a, p8, a.base + a.code, put_info(&a, 2, 0, 8, 0, 0, c8, 4, NULL));

    /* J7: lea rax, [rsp+8]; push 0; push rax; push 0; push 0;
     *     push [rsp+0x20] (the return address as rip); sub rsp, 0x20 */
    uint8_t *p7 = code_at(&a, 16);
    put(&a, "\x48\x8d\x44\x24\x08\x6a\x00\x50\x6a\x00\x6a\x00\xff\x74\x24\x20\x48\x83\xec\x20", 20);
    put(&a, CALL_CB, sizeof CALL_CB);
    j7.ra[0] = (uintptr_t)(a.base + a.code);
    j7.nra = 1;
    j7.entry = p7;
    put(&a, "\x48\x83\xc4\x48\xc3", 5);
    uint16_t c7[] = { SLOT(0x14, UWOP_ALLOC_SMALL, 3), SLOT(0x10, UWOP_PUSH_MACHFRAME, 0) };
    fa[nfa++] = rf(&a, p7, a.base + a.code, put_info(&a, 1, 0, 0x14, 0, 0, c7, 2, NULL));

    /* sorted by address, as the binary search needs */
    for (int i = 1; i < nfa; i++)
        for (int k = i; k > 0 && fa[k].BeginAddress < fa[k - 1].BeginAddress; k--) {
            RUNTIME_FUNCTION t = fa[k];
            fa[k] = fa[k - 1];
            fa[k - 1] = t;
        }
    RUNTIME_FUNCTION *ta = (RUNTIME_FUNCTION *)(a.base + 0xc000);
    memcpy(ta, fa, (size_t)nfa * sizeof *fa);
    FlushInstructionCache(GetCurrentProcess(), a.base, 0x10000);
    CHECK(RtlAddFunctionTable(ta, (DWORD)nfa, (DWORD64)a.base));

    /* ---- region B: RtlAddGrowableFunctionTable ------------------------ */
    region_t b;
    region_init(&b);
    CHECK(b.base != NULL);
    /* JG: push rbp; push rsi; sub rsp, 0x28; mov rbp, 0x11111111 */
    uint8_t *pg = code_at(&b, 16);
    put(&b, "\x55\x56\x48\x83\xec\x28\x48\xc7\xc5\x11\x11\x11\x11", 13);
    put(&b, CALL_CB, sizeof CALL_CB);
    jg.ra[0] = (uintptr_t)(b.base + b.code);
    jg.nra = 1;
    jg.entry = pg;
    put(&b, "\x48\x83\xc4\x28\x5e\x5d\xc3", 7);
    uint16_t cg[] = { SLOT(6, UWOP_ALLOC_SMALL, 4), SLOT(2, UWOP_PUSH_NONVOL, RSI),
                      SLOT(1, UWOP_PUSH_NONVOL, RBP) };
    RUNTIME_FUNCTION *tb = (RUNTIME_FUNCTION *)(b.base + 0xc000);
    PVOID growable = NULL;
    CHECK(RtlAddGrowableFunctionTable(&growable, tb, 0, 4, (ULONG_PTR)b.base,
                                      (ULONG_PTR)b.base + 0x8000) == 0);
    tb[0] = rf(&b, pg, b.base + b.code, put_info(&b, 1, 0, 6, 0, 0, cg, 3, NULL));
    RtlGrowFunctionTable(growable, 1);
    FlushInstructionCache(GetCurrentProcess(), b.base, 0x10000);

    /* ---- region C: RtlInstallFunctionTableCallback -------------------- */
    region_t c;
    region_init(&c);
    CHECK(c.base != NULL);
    /* JC: sub rsp, 0x38; mov [rsp+0x30], rbp; mov rbp, 0x22222222 */
    uint8_t *pc = code_at(&c, 16);
    put(&c, "\x48\x83\xec\x38\x48\x89\x6c\x24\x30\x48\xc7\xc5\x22\x22\x22\x22", 16);
    put(&c, CALL_CB, sizeof CALL_CB);
    jc.ra[0] = (uintptr_t)(c.base + c.code);
    jc.nra = 1;
    jc.entry = pc;
    put(&c, "\x48\x8b\x6c\x24\x30\x48\x83\xc4\x38\xc3", 10);
    uint16_t cc[] = { SLOT(9, UWOP_SAVE_NONVOL, RBP), 6, SLOT(4, UWOP_ALLOC_SMALL, 6) };
    g_cb_fn = rf(&c, pc, c.base + c.code, put_info(&c, 1, 0, 9, 0, 0, cc, 3, NULL));
    g_cb_lo = (uintptr_t)pc;
    g_cb_hi = (uintptr_t)(c.base + c.code);
    FlushInstructionCache(GetCurrentProcess(), c.base, 0x10000);
    CHECK(RtlInstallFunctionTableCallback((DWORD64)c.base | 3, (DWORD64)c.base, 0x8000,
                                          table_callback, NULL, NULL));

    /* ---- region D: nothing registered ----------------------------------
     * JU: push rbp; push rbx; sub rsp, 0x28; xor ebp, ebp;
     *     mov qword [rsp], 0x1234; call cb; ... */
    region_t d;
    region_init(&d);
    CHECK(d.base != NULL);
    uint8_t *pu = code_at(&d, 16);
    put(&d, "\x55\x53\x48\x83\xec\x28\x31\xed\x48\xc7\x04\x24\x34\x12\x00\x00", 16);
    put(&d, CALL_CB, sizeof CALL_CB);
    ju.ra[0] = (uintptr_t)(d.base + d.code);
    ju.nra = 1;
    ju.entry = pu;
    put(&d, "\x48\x83\xc4\x28\x5b\x5d\xc3", 7);
    FlushInstructionCache(GetCurrentProcess(), d.base, 0x10000);

    /* ---- the checks ------------------------------------------------------
     * Phase 0 and 1 run every case (1 from the caches); phase 2 runs J1
     * after its code was rewritten in place with a 0x130-byte frame (same
     * instruction lengths, same return address) and registered again: the
     * walk must follow the new unwind data. */
    jcase_t *all[] = { &j1, &j4, &j6, &j9, &j8, &j7, &jg, &jc, NULL };
    jcase_t *again[] = { &j1b, NULL }, *tagged[] = { &j1t, NULL }, *tagged2[] = { &j1t2, NULL };
    jcase_t *untagged[] = { &j1u, NULL }, *unknown[] = { &ju, NULL };
    jcase_t **phases[] = { all, all, again, tagged, tagged2, untagged, unknown };
    uint32_t serial1 = 0, serial2 = 0;
    LONG lookups[2];
    for (int phase = 0; phase < 7; phase++) {
        if (phase == 3) {
            CHECK_EQ(ht_register_unwind(p1, 0x19, (void *)p1, 16), 0);   /* DWARF: not on Windows */
            serial1 = ht_register_code(p1, 0x19, "j1");
            CHECK(serial1 != 0);
            j1t = j1b;
            j1t.name = "J1 after ht_register_code";
            j1t.ra[0] |= (uintptr_t)serial1 << 48;
        }
        if (phase == 4) {
            serial2 = ht_register_code(p1, 0x19, "j1, again");
            CHECK(serial2 != 0 && serial2 != serial1);
            j1t2 = j1b;
            j1t2.name = "J1 after ht_register_code again";
            j1t2.ra[0] |= (uintptr_t)serial2 << 48;
        }
        if (phase == 5) {
            CHECK_EQ(ht_unregister_code(p1), 0);
            CHECK_EQ(ht_unregister_code(p1), -1);
            j1u = j1b;
            j1u.name = "J1 after ht_unregister_code";
        }
        if (phase == 2) {
            CHECK(RtlDeleteFunctionTable(ta));
            RUNTIME_FUNCTION nf;
            a.info = 0xa000;
            emit_j1(&a, p1, 0x130, &nf, &j1b);
            CHECK(j1b.ra[0] == j1.ra[0]);
            for (int i = 0; i < nfa; i++)
                if (ta[i].BeginAddress == nf.BeginAddress)
                    ta[i] = nf;
            FlushInstructionCache(GetCurrentProcess(), a.base, 0x10000);
            CHECK(RtlAddFunctionTable(ta, (DWORD)nfa, (DWORD64)a.base));
        }
        LONG before = callback_lookups;
        run_all(phases[phase]);
        if (phase < 2)
            lookups[phase] = callback_lookups - before;
        if (phase == 0) {
            int refok = j1.n == j1.m - 1 &&
                        memcmp(j1.ours, j1.ref + 1, (size_t)j1.n * sizeof(void *)) == 0;
            if (!refok) {
                dump("ours", j1.ours, j1.n);
                dump("reference", j1.ref + 1, j1.m - 1);
            }
            CHECK(refok);
            CHECK(j1.n >= 4 && j1.ours[1] == (void *)j1.ra[0]);
            CHECK(j1.n >= 4 && in_fn(j1.ours[0], (void *)jit_cb));
            CHECK(j1.n >= 4 && in_fn(j1.ours[2], (void *)call_jit));
            CHECK(j1.n >= 4 && in_fn(j1.ours[3], (void *)run_case));
            int through_main = 0;
            for (int i = 4; i < j1.n; i++)
                through_main |= in_fn(j1.ours[i], (void *)main);
            CHECK(through_main);
            fprintf(stderr, "%-44s %2d frames, through the JIT frame into main: %s\n", j1.name,
                    j1.n, through_main ? "yes" : "NO");
        }
        if (phase == 6) {
            /* the JIT frame, then the marker, then nothing */
            int ok = ju.n == 3 && ju.ours[0] == j1.ours[0] && ju.ours[1] == (void *)ju.ra[0] &&
                     ju.ours[2] == HT_FRAME_UNWIND_STOPPED;
            if (!ok)
                dump("ours", ju.ours, ju.n);
            CHECK(ok);
            fprintf(stderr, "%-44s %2d frames, %s\n", ju.name, ju.n,
                    ok ? "ends with HT_FRAME_UNWIND_STOPPED" : "WRONG");
            continue;
        }
        for (jcase_t **c = phase == 0 ? all + 1 : phases[phase]; *c; c++)
            check_case(*c, &j1);
    }
    /* tagged frames make different stacks: the innermost four frames
     * (callback, J1, call_jit, run_case) hash and intern apart */
    CHECK(ht_stack_hash(j1t.ours, 4) != ht_stack_hash(j1b.ours, 4));
    CHECK(ht_stack_hash(j1t2.ours, 4) != ht_stack_hash(j1t.ours, 4));
    CHECK(ht_stack_hash(j1u.ours, 4) == ht_stack_hash(j1b.ours, 4));
    CHECK(ht_stack_id(j1t.ours, 4) != ht_stack_id(j1b.ours, 4));
    CHECK(ht_stack_id(j1t.ours, 4) != ht_stack_id(j1t2.ours, 4));
    CHECK(ht_stack_id(j1u.ours, 4) == ht_stack_id(j1b.ours, 4));
    CHECK(HT_FRAME_JIT_SERIAL(j1t.ours[1]) == serial1 && HT_FRAME_JIT_SERIAL(j1b.ours[1]) == 0);
    /* JIT rules are not cached: every capture asks the callback again */
    CHECK(lookups[0] > 0 && lookups[1] == lookups[0]);

    /* What the system's own capture does with the JIT frame (informational:
     * on Windows it stops there) */
    j1.rtl_bt = 1;
    run_case(&j1);
    int rtl_through = 0;
    for (int i = 0; i < j1.rtl_n; i++)
        rtl_through |= in_fn(j1.rtl[i], (void *)main);
    fprintf(stderr, "RtlCaptureStackBackTrace here: %d frames, %s\n", j1.rtl_n,
            rtl_through ? "through the JIT frame into main" : "stops before main");

    CHECK(RtlDeleteFunctionTable(ta));
    RtlDeleteGrowableFunctionTable(growable);
    CHECK(RtlDeleteFunctionTable((PRUNTIME_FUNCTION)((DWORD64)c.base | 3)));
    return check_done();
}
