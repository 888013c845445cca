/* unwind.c -- ht_capture(), ht_CaptureStackBackTrace() and
 * ht_capture_context() for windows-x86_64.
 *
 * The same design as the Linux backend, on Windows' unwind tables. The
 * walk exploits the call-site property: every frame but an interrupted
 * one is stopped at a call, so the rule it needs is the one in force at a
 * return address -- a finite set that can be cached exactly. A rule says
 * where the return address is (rsp + k or rbp + k) and where rbp was saved
 * (xdata.c builds it from the function's UNWIND_INFO). Rules are kept in a
 * per-thread cache keyed by return address, so a repeated capture costs a
 * probe and two loads per frame and never calls into ntdll.
 *
 * A miss asks ntdll: RtlLookupFunctionEntry (with an unwind-history table,
 * which speeds repeated lookups on Windows) finds the function entry in an
 * image's .pdata or in the tables JIT compilers registered with
 * RtlAddFunctionTable, RtlAddGrowableFunctionTable or
 * RtlInstallFunctionTableCallback. Only rules of code inside a loaded image
 * are cached: JIT code can be freed and reused without telling anyone, so
 * its frames are looked up every time. A DLL unload (LdrRegisterDllNotification,
 * lifecycle.c) empties every thread's cache.
 *
 * The fast walk tracks rsp, rbp and the pc. A frame its compact rule cannot
 * express (a machine frame of the exception dispatcher, say) is stepped by
 * xdata.c's checked interpreter; a frame that needs a register other than
 * rbp (a frame register like rbx, whose value an inner frame saved) makes
 * the walk start over tracking every callee-saved register. An interrupted
 * instruction (the first frame of ht_capture_context, the frame below a
 * machine frame) may sit in a prolog or an epilog, which xdata.c also
 * handles, reads checked (RtlVirtualUnwind's reads could not be).
 * A frame outside any image without a function entry takes Windows' leaf
 * step only if it leads into code, else a checked frame-pointer step, else
 * the walk ends (with HT_FRAME_UNWIND_STOPPED for unregistered code). A
 * frame in code registered with ht_register_code carries its serial.
 *
 * Never allocates from the heap (the cache is VirtualAlloc'd once per
 * thread), takes no lock of ours, preserves GetLastError(), and reads the
 * stack only inside [sp, the thread's StackBase). A miss calls ntdll's
 * lookups, which may take the loader's lock for a moment (Wine's
 * RtlPcToFileHeader and RtlLookupFunctionEntry do; Windows reads its
 * inverted function table under a shared lock): the cache makes misses
 * rare after a thread's first captures, but a capture must not run while
 * its thread holds a lock the loader may be waiting for. */
#include "heaptrail.h"
#include "../../core/hash.h"
#include "unwind.h"
#include <emmintrin.h>

#define MAX_STEPS 4096

typedef struct walk_s {
    ht_bounds_t b;
    ht_tcache_t *tc;            /* this thread's cache, or NULL */
    uint32_t jit_serial;        /* of the last miss with HT_RF_JIT */
    int hist_ready;
    UNWIND_HISTORY_TABLE hist;  /* for RtlLookupFunctionEntry, one per walk */
} walk_t;

/* The stack holding `sp`: the thread's (TEB StackLimit..StackBase), else
 * the committed region VirtualQuery finds (a stack the TEB does not
 * describe: a coroutine library's). */
static int stack_bounds(uintptr_t sp, ht_bounds_t *b)
{
    uintptr_t lo = ht__teb_word(HT_TEB_STACK_LIMIT), hi = ht__teb_word(HT_TEB_STACK_BASE);
    if (ht_likely(sp >= lo && sp < hi)) {
        b->lo = sp;
        b->hi = hi;
        return 1;
    }
    MEMORY_BASIC_INFORMATION mbi;
    if (!VirtualQuery((void *)sp, &mbi, sizeof mbi) || mbi.State != MEM_COMMIT ||
        (mbi.Protect & (PAGE_GUARD | PAGE_NOACCESS)) ||
        !(mbi.Protect & (PAGE_READWRITE | PAGE_READONLY | PAGE_WRITECOPY | PAGE_EXECUTE_READ |
                         PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY)))
        return 0;
    b->lo = sp;
    b->hi = (uintptr_t)mbi.BaseAddress + mbi.RegionSize;
    return 1;
}

/* ---- function entries --------------------------------------------------- */

/* Finds the unwind data for code address `at`. Returns 1 when `at` lies in
 * a loaded image (and so the answer may be cached), 0 otherwise (JIT code,
 * or no code at all). */
static int lookup(walk_t *w, uintptr_t at, ht_fnent_t *e)
{
    void *ib = NULL;
    int image = 0;
    uint64_t granule = (at >> 16) + 1;
    uint64_t *noimage = w->tc ? &w->tc->noimage[granule % HT_NOIMAGE_SLOTS] : NULL;
    if (!noimage || *noimage != granule) {
        image = RtlPcToFileHeader((void *)at, &ib) != NULL && ib;
        if (!image && noimage)
            *noimage = granule;
    }
    if (!w->hist_ready) {
        __builtin_memset(&w->hist, 0, sizeof w->hist);
        w->hist_ready = 1;
    }
    DWORD64 base = 0;
    e->fn = RtlLookupFunctionEntry(at, &base, &w->hist);
    e->base = (uintptr_t)base;
    e->image_end = 0;
    if (image) {
        if (e->fn && e->base != (uintptr_t)ib)
            return 0;           /* a dynamic table covering image memory */
        const IMAGE_DOS_HEADER *dos = ib;
        const IMAGE_NT_HEADERS64 *nt = (const IMAGE_NT_HEADERS64 *)((const char *)ib + dos->e_lfanew);
        e->base = (uintptr_t)ib;
        e->image_end = (uintptr_t)ib + nt->OptionalHeader.SizeOfImage;
    }
    return image;
}

/* ---- the rule cache ----------------------------------------------------- */

static HT_ALWAYS_INLINE ht_centry_t *cache_set(ht_centry_t *t, uintptr_t pc)
{
    uint64_t h = pc ^ (pc >> HT_CACHE_SET_BITS) ^ (pc >> 29);
    return &t[(h & ((1u << HT_CACHE_SET_BITS) - 1)) * 2];
}

/* 16-byte entries are read and written with single SSE moves: the cache
 * is per thread, and one instruction cannot be torn by anything that runs
 * on the same thread (an APC, a vectored handler). */
static HT_ALWAYS_INLINE __m128i load16(const ht_centry_t *e)
{
    __m128i v;
    __asm__ volatile("movdqa %1, %0" : "=x"(v) : "m"(*e));
    return v;
}

static HT_ALWAYS_INLINE void store16(ht_centry_t *e, uint64_t key, uint64_t rule)
{
    __m128i v = _mm_set_epi64x((long long)rule, (long long)key);
    __asm__ volatile("movdqa %1, %0" : "=m"(*e) : "x"(v));
}

static HT_NOINLINE ht_rule_t rule_miss(walk_t *w, ht_centry_t *set, uintptr_t ra)
{
    ht_fnent_t e;
    int image = lookup(w, ra - 1, &e);      /* ra - 1: inside the call */
    ht_rule_t r = ht__xdata_rule(&e, ra);
    if (!image) {
        /* JIT code (or none): never cached, maybe registered */
        if (!e.fn)
            r.s.kind = HT_K_NOENTRY;
        w->jit_serial = ht__jit_serial(ra - 1);
        if (w->jit_serial)
            r.s.flags |= HT_RF_JIT;
        return r;
    }
    if (set) {
        /* insert at way 0, moving its entry to way 1 */
        __m128i w0 = load16(&set[0]);
        uint64_t k0 = (uint64_t)_mm_cvtsi128_si64(w0);
        if (k0 != 0 && k0 != ra)
            store16(&set[1], k0, (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w0, w0)));
        store16(&set[0], ra, r.u);
    }
    return r;
}

static HT_ALWAYS_INLINE ht_rule_t rule_at(walk_t *w, ht_centry_t *t, uintptr_t ra)
{
    ht_rule_t r;
    if (ht_unlikely(!t))
        return rule_miss(w, NULL, ra);
    ht_centry_t *set = cache_set(t, ra);
    __m128i v = load16(&set[0]);
    if (ht_likely((uint64_t)_mm_cvtsi128_si64(v) == ra)) {
        r.u = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v));
        return r;
    }
    v = load16(&set[1]);
    if ((uint64_t)_mm_cvtsi128_si64(v) == ra) {
        r.u = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v));
        return r;
    }
    return rule_miss(w, set, ra);
}

/* ---- slow steps ---------------------------------------------------------- */

/* Steps a frame whose rule is not compact, at call site r->pc. */
static HT_NOINLINE int step_call_site(walk_t *w, ht_wregs_t *r, int *exact_next)
{
    ht_fnent_t e;
    lookup(w, r->pc - 1, &e);
    return ht__xdata_step(&e, r, &w->b, exact_next);
}

/* Whether a return address `ra` leads into code: an image, a function
 * entry (JIT tables), registered JIT code, or executable memory. */
static HT_NOINLINE int is_code(walk_t *w, uintptr_t ra)
{
    if (!ra)
        return 0;
    uintptr_t at = ra - 1;
    void *ib;
    if (RtlPcToFileHeader((void *)at, &ib) || ht__jit_serial(at))
        return 1;
    ht_fnent_t e;
    if (lookup(w, at, &e), e.fn)
        return 1;
    MEMORY_BASIC_INFORMATION m;
    return VirtualQuery((void *)at, &m, sizeof m) && m.State == MEM_COMMIT &&
           (m.Protect & (PAGE_EXECUTE | PAGE_EXECUTE_READ | PAGE_EXECUTE_READWRITE |
                         PAGE_EXECUTE_WRITECOPY)) &&
           !(m.Protect & PAGE_GUARD);
}

/* Steps a frame outside any image that has no function entry. Windows
 * treats such a frame as a leaf (the return address at rsp), which holds
 * for a thunk that calls without touching rsp but not for JIT code nobody
 * described: the leaf step is taken only if it leads into code, else a
 * frame-pointer step that does, else the walk ends here. */
static HT_NOINLINE int step_noentry(walk_t *w, ht_wregs_t *r)
{
    uintptr_t sp = r->r[HT_RSP], v, bp, nbp;
    if (ht__rd(&w->b, sp, &v) && is_code(w, v)) {
        r->pc = v;
        r->r[HT_RSP] = sp + 8;
        return HT_STEP_OK;
    }
    if (!(r->valid & (1u << HT_RBP)))
        return HT_STEP_STOP_NOENTRY;
    bp = r->r[HT_RBP];
    if (bp < sp || !ht__rd(&w->b, bp + 8, &v) || !ht__rd(&w->b, bp, &nbp) || !is_code(w, v))
        return HT_STEP_STOP_NOENTRY;
    r->pc = v;
    r->r[HT_RSP] = bp + 16;
    r->r[HT_RBP] = nbp;
    return HT_STEP_OK;
}

/* Steps a frame whose pc is an interrupted instruction: looked up at pc
 * itself, and it may lie in a prolog or an epilog (xdata.c handles both,
 * every read checked). Interrupted code without a function entry is a
 * true leaf only if it left rsp alone, which assembly like libgcc's
 * ___chkstk_ms (pushes, no unwind data) does not: its leaf step is
 * checked like one outside an image, but ends without the marker. */
static HT_NOINLINE int step_exact(walk_t *w, ht_wregs_t *r, int *exact_next)
{
    ht_fnent_t e;
    int image = lookup(w, r->pc, &e);
    *exact_next = 0;
    if (r->r[HT_RSP] < w->b.lo || r->r[HT_RSP] > w->b.hi - 8)
        return HT_STEP_STOP;
    if (!e.fn) {
        int st = step_noentry(w, r);
        return st == HT_STEP_STOP_NOENTRY && image ? HT_STEP_STOP : st;
    }
    return ht__xdata_step_exact(&e, r, &w->b, exact_next);
}

/* ---- the walks ----------------------------------------------------------- */

typedef struct out_s {
    void **frames;
    int skip, max, n;
    uint64_t sum;
    uint64_t rp;                /* R^n (hash.h) */
} out_t;

/* Records pc (with a JIT serial in bits 48..62); returns 0 when the output
 * is full. */
static HT_ALWAYS_INLINE int emit(out_t *o, uintptr_t pc, int *skip)
{
    if (*skip > 0) {
        (*skip)--;
        return 1;
    }
    o->frames[o->n] = (void *)pc;
    o->sum += ht_hash_mix(pc) * o->rp;
    o->rp *= HT_HASH_R;
    return ++o->n < o->max;
}

/* The end of a walk in code nobody vouches for (no image, no function
 * entry, no registration, no step into code): the marker frame says the
 * stack goes on, unknown. */
static void emit_stopped(out_t *o, int *skip)
{
    if (o->n < o->max)
        emit(o, (uintptr_t)HT_FRAME_UNWIND_STOPPED, skip);
}

/* The fast walk: pc, rsp and rbp in registers, compact rules from the
 * cache. Returns 0 when done, 1 when it must start over as a full walk.
 * A frame's rule is looked up before the frame is recorded, because JIT
 * frames are recorded with their registration's serial. */
static int walk_fast(walk_t *w, const ht_wregs_t *init, int exact, out_t *o)
{
    ht_centry_t *cache = w->tc ? w->tc->e : NULL;
    uintptr_t pc = init->pc, sp = init->r[HT_RSP], bp = init->r[HT_RBP];
    const uintptr_t hi8 = w->b.hi - 8;
    int skip = o->skip;
    for (int steps = 0; steps < MAX_STEPS; steps++) {
        ht_rule_t ru;
        uintptr_t tag = 0;
        if (ht_likely(!exact)) {
            ru = rule_at(w, cache, pc);
            if (ht_unlikely(ru.s.flags & HT_RF_JIT))
                tag = (uintptr_t)w->jit_serial << 48;
        } else {
            ru.u = 0;
            tag = (uintptr_t)ht__jit_serial(pc) << 48;
        }
        if (!emit(o, pc | tag, &skip))
            return 0;
        if (ht_likely(ru.s.kind == HT_K_NORMAL)) {
            uintptr_t slot = ((ru.s.flags & HT_RF_BASE_RBP) ? bp : sp) + (uintptr_t)(intptr_t)ru.s.ra_off;
            if (ht_unlikely(slot < sp || slot > hi8 || (slot & 7)))
                return 0;
            uintptr_t ra = *(const uintptr_t *)slot;
            if ((ru.s.flags & HT_RF_RBP_SAVED) &&
                !ht__rd(&w->b, slot + (uintptr_t)(intptr_t)ru.s.rbp_off, &bp))
                return 0;
            sp = slot + 8;
            pc = ra;
            if (ht_unlikely(!pc))
                return 0;
            continue;
        }
        if (!exact && ru.s.kind != HT_K_COMPLEX && ru.s.kind != HT_K_NOENTRY)
            return 0;
        /* a slow step with what the fast walk knows: everything for the
         * first frame, rsp and rbp after that */
        ht_wregs_t r;
        if (steps == 0) {
            r = *init;
        } else {
            r.valid = (1u << HT_RSP) | (1u << HT_RBP);
            r.r[HT_RSP] = sp;
            r.r[HT_RBP] = bp;
            r.pc = pc;
        }
        int ex = 0, st = exact                         ? step_exact(w, &r, &ex)
                         : ru.s.kind == HT_K_NOENTRY ? step_noentry(w, &r)
                                                     : step_call_site(w, &r, &ex);
        if (st == HT_STEP_NEED_FULL)
            return 1;
        if (st != HT_STEP_OK || !r.pc) {
            if (st == HT_STEP_STOP_NOENTRY && !tag)
                emit_stopped(o, &skip);
            return 0;
        }
        exact = ex;
        pc = r.pc;
        sp = r.r[HT_RSP];
        bp = (r.valid & (1u << HT_RBP)) ? r.r[HT_RBP] : 0;
    }
    return 0;
}

/* The full walk: every register the unwind data restores is tracked, every
 * frame is looked up and interpreted. For stacks with frame registers
 * other than rbp. */
static void walk_full(walk_t *w, const ht_wregs_t *init, int exact, out_t *o)
{
    ht_wregs_t r = *init;
    int skip = o->skip;
    for (int steps = 0; steps < MAX_STEPS; steps++) {
        int ex = 0, st;
        uintptr_t tag = 0;
        if (exact) {
            tag = (uintptr_t)ht__jit_serial(r.pc) << 48;
            if (!emit(o, r.pc | tag, &skip))
                return;
            st = step_exact(w, &r, &ex);
        } else {
            ht_fnent_t e;
            int image = lookup(w, r.pc - 1, &e);
            if (!image)
                tag = (uintptr_t)ht__jit_serial(r.pc - 1) << 48;
            if (!emit(o, r.pc | tag, &skip))
                return;
            st = !image && !e.fn ? step_noentry(w, &r) : ht__xdata_step(&e, &r, &w->b, &ex);
        }
        if (st != HT_STEP_OK || !r.pc) {
            if (st == HT_STEP_STOP_NOENTRY && !tag)
                emit_stopped(o, &skip);
            return;
        }
        exact = ex;
    }
}

static int capture(const ht_wregs_t *init, int exact, int skip, int max, void **frames,
                   uint64_t *hash)
{
    /* ntdll calls on a miss may set the last error: the caller's survives */
    uint32_t last_error = ht__teb_dword(HT_TEB_LAST_ERROR);
    out_t o = { frames, skip < 0 ? 0 : skip, max, 0, 0, 1 };
    if (max > 0 && init->pc) {
        walk_t w;
        w.hist_ready = 0;
        w.tc = ht__thread_cache();
        if (!stack_bounds(init->r[HT_RSP], &w.b)) {
            /* an unknown stack: only the first frame is certain */
            int sk = o.skip;
            emit(&o, init->pc, &sk);
        } else if (walk_fast(&w, init, exact, &o)) {
            o.n = 0;
            o.sum = 0;
            o.rp = 1;
            walk_full(&w, init, exact, &o);
        }
    }
    if (hash)
        *hash = ht_hash_finish(o.sum, (uint64_t)o.n);
    if (ht_unlikely(ht__teb_dword(HT_TEB_LAST_ERROR) != last_error))
        SetLastError(last_error);
    return o.n;
}

/* ---- entry points -------------------------------------------------------- */

/* regs as capture.S records them: pc, sp after the return, then rbx, rbp,
 * rsi, rdi, r12..r15 (the callee-saved registers, unchanged since the
 * caller's call). */
static void regs_from_entry(const uintptr_t *e, ht_wregs_t *r)
{
    static const uint8_t order[8] = { HT_RBX, HT_RBP, HT_RSI, HT_RDI, HT_R12, HT_R13, HT_R14, HT_R15 };
    /* the volatile registers stay unset: `valid` says they are unknown */
    r->pc = e[0];
    r->r[HT_RSP] = e[1];
    for (int i = 0; i < 8; i++)
        r->r[order[i]] = e[2 + i];
    r->valid = HT_NONVOL_MASK | (1u << HT_RSP);
}

/* Called by capture.S's ht_capture. */
HT_INTERNAL int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash,
                                 const uintptr_t *regs);

int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash, const uintptr_t *regs)
{
    ht_wregs_t r;
    regs_from_entry(regs, &r);
    return capture(&r, 0, skip, max, frames, hash);
}

/* Called by capture.S's ht_CaptureStackBackTrace: Windows' signature and
 * limits (at most 65535 frames, a USHORT count), a 32-bit hash folded from
 * ht_stack_hash() of the frames returned. */
HT_INTERNAL unsigned short ht__capture_bt(unsigned long skip, unsigned long count, void **frames,
                                          unsigned long *hash32, const uintptr_t *regs);

unsigned short ht__capture_bt(unsigned long skip, unsigned long count, void **frames,
                              unsigned long *hash32, const uintptr_t *regs)
{
    ht_wregs_t r;
    regs_from_entry(regs, &r);
    uint64_t h;
    int n = capture(&r, 0, skip > 0x7fffffffUL ? 0x7fffffff : (int)skip,
                    count > 0xffffUL ? 0xffff : (int)count, frames, &h);
    if (hash32)
        *hash32 = (unsigned long)(uint32_t)(h ^ (h >> 32));
    return (unsigned short)n;
}

int ht_capture_context(const void *context, int max, void **frames, uint64_t *hash)
{
    ht_wregs_t r;
    const CONTEXT *c = context;
    if (!c) {
        if (hash)
            *hash = ht_hash_finish(0, 0);
        return 0;
    }
    const DWORD64 *gpr = &c->Rax;
    for (int i = 0; i < HT_NGPR; i++)
        r.r[i] = gpr[i];
    r.pc = c->Rip;
    r.valid = 0xffff;
    return capture(&r, 1, 0, max, frames, hash);
}
