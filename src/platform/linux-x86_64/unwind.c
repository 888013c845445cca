/* unwind.c -- ht_capture() and ht_capture_context() for linux-x86_64.
 *
 * The walk exploits the call-site property: every frame but the innermost
 * is stopped at a call, so the only unwind rules it needs are those in
 * force at return addresses -- a finite set that can be cached exactly.
 * Each return address maps to a compact rule (CFA = rsp or rbp + offset,
 * where rbp was saved), like the Linux kernel's ORC entries, built on a
 * miss from the module's .eh_frame. Misses are cached too. Frames the
 * compact form cannot express (signal frames, CFA expressions other than
 * the realigned-stack one, interrupted instructions) take the full DWARF
 * interpreter in cfi.c. Frame pointers are used only where no CFI exists.
 *
 * Async-signal-safe, never allocates (the rule cache is mapped once), and
 * never faults: every stack load is checked against the mapping that holds
 * the stack, and every code or table read against the module's segments. */
#include "heaptrail.h"
#include "../../core/hash.h"
#include "cfi.h"
#include "unwind.h"
#include <cpuid.h>
#include <emmintrin.h>
#include <stddef.h>
#include <sys/ucontext.h>

/* ---- compact rules ---------------------------------------------------- */

enum {
    K_EMPTY = 0,      /* nothing cached */
    K_NORMAL,         /* the compact rule applies */
    K_SIGNAL,         /* a sigreturn trampoline: registers are in a ucontext */
    K_OUTERMOST,      /* the return address is undefined: end of the stack */
    K_NOCFI,          /* in a module without an FDE here: frame pointers */
    K_COMPLEX,        /* needs the full interpreter */
    K_BAD,            /* malformed CFI: stop */
    K_NOMODULE        /* in no loaded module (JIT code or garbage): never cached */
};
enum { CFA_RSP = 0, CFA_RBP = 1, CFA_DEREF_RBP = 2 };    /* how & 3 */
enum { BP_SAME = 0, BP_AT_CFA = 1, BP_AT_RBP = 2 };      /* (how >> 2) & 3 */

typedef union {
    struct {
        int32_t cfa_off;      /* CFA = base + cfa_off (or *(rbp + cfa_off)) */
        int16_t bp_off;       /* saved rbp at CFA + bp_off or rbp + bp_off */
        uint8_t kind;
        uint8_t how;
    } s;
    uint64_t u;
} rule_t;

/* Reduces a DWARF row at a call site to a compact rule. */
static rule_t compact(const ht_cfi_row_t *row)
{
    rule_t r = { .u = 0 };
    r.s.kind = K_COMPLEX;
    const ht_cfi_rule_t *ra = &row->reg[HT_DW_RA], *bp = &row->reg[HT_DW_RBP];
    if (ra->how == HT_RULE_UNDEFINED || ra->how == HT_RULE_SAME) {
        r.s.kind = K_OUTERMOST;
        return r;
    }
    if (ra->how != HT_RULE_OFFSET || ra->off != -8 || row->reg[HT_DW_RSP].how != HT_RULE_SAME)
        return r;
    unsigned how;
    if (row->cfa.how == HT_RULE_CFA_REG && row->cfa.reg == HT_DW_RSP) {
        how = CFA_RSP;
        r.s.cfa_off = row->cfa.off;
    } else if (row->cfa.how == HT_RULE_CFA_REG && row->cfa.reg == HT_DW_RBP) {
        how = CFA_RBP;
        r.s.cfa_off = row->cfa.off;
    } else if (row->cfa.how == HT_RULE_VAL_EXPR && row->cfa.exprlen >= 3 &&
               row->cfa.expr[0] == 0x76 /* DW_OP_breg6 */ &&
               row->cfa.expr[row->cfa.exprlen - 1] == 0x06 /* DW_OP_deref */) {
        /* realigned stack (gcc's DRAP): CFA = *(rbp + k) */
        int64_t k = 0;
        unsigned shift = 0, i = 1;
        uint8_t b;
        do {
            b = row->cfa.expr[i++];
            k |= (int64_t)(b & 0x7f) << shift;
            shift += 7;
        } while ((b & 0x80) && i < row->cfa.exprlen - 1u && shift < 28);
        if ((b & 0x80) || i != row->cfa.exprlen - 1u)
            return r;
        if (b & 0x40)
            k |= -((int64_t)1 << shift);
        how = CFA_DEREF_RBP;
        r.s.cfa_off = (int32_t)k;
    } else {
        return r;
    }
    if (bp->how == HT_RULE_SAME) {
        how |= BP_SAME << 2;
    } else if (bp->how == HT_RULE_OFFSET && bp->off == (int16_t)bp->off) {
        how |= BP_AT_CFA << 2;
        r.s.bp_off = (int16_t)bp->off;
    } else if (bp->how == HT_RULE_EXPR && bp->exprlen == 2 && bp->expr[0] == 0x76 &&
               !(bp->expr[1] & 0x80)) {
        /* DW_CFA_expression rbp: DW_OP_breg6 k (gcc's DRAP frames) */
        int8_t k = (int8_t)(bp->expr[1] & 0x7f);
        if (k & 0x40)
            k = (int8_t)(k | 0x80);
        how |= BP_AT_RBP << 2;
        r.s.bp_off = k;
    } else {
        return r;
    }
    r.s.how = (uint8_t)how;
    r.s.kind = K_NORMAL;
    return r;
}

/* The rt_sigreturn trampoline: mov $15, %rax; syscall. */
static int is_sigreturn(const ht_module_t *m, uintptr_t pc)
{
    static const uint8_t code[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
    for (int i = 0; i < m->ntext; i++)
        if (pc >= m->text_lo[i] && pc + sizeof code <= m->text_hi[i])
            return __builtin_memcmp((const void *)pc, code, sizeof code) == 0;
    return 0;
}

/* The rule for stepping out of a frame whose pc is the return address
 * `ra` (looked up at ra - 1, inside the call instruction). */
static rule_t compute_rule(uintptr_t ra)
{
    rule_t r = { .u = 0 };
    ht_module_t m;
    if (ht__module_find(ra - 1, &m) != 0) {
        r.s.kind = K_NOMODULE;
        return r;
    }
    ht_cfi_row_t row;
    int rc = ht__cfi_row(&m, ra - 1, &row);
    if (rc == HT_CFI_BAD)
        r.s.kind = K_BAD;
    else if (rc == HT_CFI_NONE)
        r.s.kind = is_sigreturn(&m, ra) ? K_SIGNAL : K_NOCFI;
    else if (row.signal_frame)
        r.s.kind = K_SIGNAL;
    else
        r = compact(&row);
    return r;
}

/* ---- the rule cache ----------------------------------------------------
 * One process-wide 2-way set-associative table of 16-byte entries
 * {key, rule}, key = return address | code generation << 48. Entries are
 * read and written with single 16-byte SSE moves, which processors that
 * support AVX guarantee to be atomic (Intel SDM vol. 3A 9.1.1; AMD APM
 * vol. 2 7.3.2), so a reader never sees a key with another key's rule and
 * the table needs no lock: readers and writers race benignly, a lost write
 * is a later miss. Without AVX the cache is off and every step parses the
 * CFI (correct, slower). Addresses above 2^47 are never cached. */

#define CACHE_SET_BITS 15
#define CACHE_ENTRIES  (2u << CACHE_SET_BITS)

typedef struct { uint64_t key, rule; } __attribute__((aligned(16))) centry_t;

static centry_t *g_cache;
static int g_cache_state;       /* 0 unknown, 1 usable, -1 off */

static HT_NOINLINE centry_t *cache_init(void)
{
    unsigned a, b, c, d;
    int avx = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_AVX);
    if (!avx || ht__env("HEAPTRAIL_NO_RULE_CACHE")) {
        ht_store_relaxed(&g_cache_state, -1);
        return NULL;
    }
    centry_t *t = ht__map(CACHE_ENTRIES * sizeof(centry_t));
    if (!t) {
        ht_store_relaxed(&g_cache_state, -1);
        return NULL;
    }
    centry_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&g_cache, &expect, t, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        ht__unmap(t, CACHE_ENTRIES * sizeof(centry_t));
        t = expect;
    }
    ht_store_release(&g_cache_state, 1);
    return t;
}

static HT_ALWAYS_INLINE centry_t *cache_set(centry_t *t, uintptr_t pc)
{
    uint64_t h = pc ^ (pc >> CACHE_SET_BITS) ^ (pc >> 29);
    return &t[(h & ((1u << CACHE_SET_BITS) - 1)) * 2];
}

static HT_ALWAYS_INLINE __m128i load16(const centry_t *e)
{
    __m128i v;
    __asm__ volatile("movdqa %1, %0" : "=x"(v) : "m"(*e));
    return v;
}

static HT_ALWAYS_INLINE void store16(centry_t *e, uint64_t key, uint64_t rule)
{
    __m128i v = _mm_set_epi64x((long long)rule, (long long)key);
    __asm__ volatile("movdqa %1, %0" : "=m"(*e) : "x"(v));
}

static HT_NOINLINE rule_t rule_miss(centry_t *set, uint64_t key, uintptr_t ra)
{
    rule_t r = compute_rule(ra);
    if (set && r.s.kind != K_NOMODULE) {
        /* insert at way 0, moving its entry to way 1 (LRU-like) */
        __m128i w0 = load16(&set[0]);
        uint64_t k0 = (uint64_t)_mm_cvtsi128_si64(w0);
        if (k0 != 0 && k0 != key) {
            uint64_t r0 = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w0, w0));
            store16(&set[1], k0, r0);
        }
        store16(&set[0], key, r.u);
    }
    return r;
}

/* The rule at return address `ra`; `gen` = code generation << 48. */
static HT_ALWAYS_INLINE rule_t rule_at(centry_t *t, uintptr_t ra, uint64_t gen)
{
    rule_t r;
    if (ht_unlikely(!t || (ra >> 47) != 0))
        return rule_miss(NULL, 0, ra);
    uint64_t key = ra | gen;
    centry_t *set = cache_set(t, ra);
    __m128i w = load16(&set[0]);
    if (ht_likely((uint64_t)_mm_cvtsi128_si64(w) == key)) {
        r.u = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w, w));
        return r;
    }
    w = load16(&set[1]);
    if ((uint64_t)_mm_cvtsi128_si64(w) == key) {
        r.u = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w, w));
        return r;
    }
    return rule_miss(set, key, ra);
}

/* ---- checked reads ---------------------------------------------------- */

typedef struct walk_s {
    uintptr_t lo, hi;           /* readable stack: [lo, hi) */
} walk_t;

static int rd_stack(void *ctx, uintptr_t addr, uintptr_t *out)
{
    const walk_t *w = ctx;
    if (addr < w->lo || addr > w->hi - sizeof(uintptr_t))
        return 0;
    *out = *(const uintptr_t *)addr;
    return 1;
}

/* Points the walk at the stack holding `sp` (a new stack after a signal
 * frame: the handler may run on a sigaltstack). Allows reads down to the
 * red zone below sp, where a leaf function may have saved registers. */
static int set_stack(walk_t *w, uintptr_t sp)
{
    uintptr_t lo, hi;
    if (ht__stack_range(sp, &lo, &hi) != 0)
        return 0;
    w->lo = sp - 128 > lo && sp >= 128 ? sp - 128 : lo;
    w->hi = hi;
    return 1;
}

/* Whether `pc` is a plausible return address: inside an executable
 * segment of a loaded module. */
static int is_code(uintptr_t pc)
{
    ht_module_t m;
    return pc > 0 && ht__module_find(pc - 1, &m) == 0 && ht__module_is_text(&m, pc - 1);
}

/* ---- slow steps ------------------------------------------------------- */

static const int greg_of_dw[HT_DW_NREGS] = {
    REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
    REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP
};

/* Loads every register from the ucontext at `uc` through `rd`. */
static int regs_from_ucontext(uintptr_t uc, ht_regs_t *r, ht_read_fn rd, void *ctx)
{
    uintptr_t gregs = uc + offsetof(ucontext_t, uc_mcontext.gregs);
    r->valid = 0;
    for (int i = 0; i < HT_DW_NREGS; i++) {
        if (!rd(ctx, gregs + (uintptr_t)greg_of_dw[i] * 8, &r->r[i]))
            return 0;
        r->valid |= 1u << i;
    }
    return 1;
}

/* A frame-pointer step, validated: the saved rbp lies in the stack above
 * the frame, aligned, and the return address it yields is in code. */
static int step_fp(walk_t *w, ht_regs_t *r)
{
    if (!(r->valid & (1u << HT_DW_RBP)))
        return 0;
    uintptr_t bp = r->r[HT_DW_RBP], ra, nbp;
    if ((bp & 7) || bp < r->r[HT_DW_RSP] || !rd_stack(w, bp + 8, &ra) || !rd_stack(w, bp, &nbp))
        return 0;
    if (!is_code(ra))
        return 0;
    r->r[HT_DW_RA] = ra;
    r->r[HT_DW_RSP] = bp + 16;
    r->r[HT_DW_RBP] = nbp;
    r->valid = (1u << HT_DW_RA) | (1u << HT_DW_RSP) | (1u << HT_DW_RBP);
    return 1;
}

enum { STEP_STOP = 0, STEP_OK = 1, STEP_END = 2 };

/* Steps out of the frame at r->r[RA] with the full interpreter. `exact`
 * says pc is an interrupted instruction rather than a return address. */
static int step_full(walk_t *w, ht_regs_t *r, int exact)
{
    uintptr_t pc = r->r[HT_DW_RA], at = exact ? pc : pc - 1;
    ht_module_t m;
    if (ht__module_find(at, &m) != 0)
        return step_fp(w, r) ? STEP_OK : STEP_STOP;
    ht_cfi_row_t row;
    int rc = ht__cfi_row(&m, at, &row);
    if (rc == HT_CFI_NONE)
        return step_fp(w, r) ? STEP_OK : STEP_STOP;
    if (rc != HT_CFI_OK)
        return STEP_STOP;
    ht_regs_t out;
    int outermost;
    if (!ht__cfi_apply(&row, r, &out, rd_stack, w, &outermost))
        return STEP_STOP;
    if (outermost)
        return STEP_END;
    if (out.r[HT_DW_RSP] <= r->r[HT_DW_RSP] || out.r[HT_DW_RSP] > w->hi)
        return STEP_STOP;
    *r = out;
    return STEP_OK;
}

/* ---- the walk ---------------------------------------------------------- */

#define MAX_STEPS 4096

/* Walks from the frame described by *r (pc in r->r[RA]); see ht_capture. */
static int walk(ht_regs_t *r, int exact, int skip, int max, void **frames, uint64_t *hash)
{
    int n = 0;
    uint64_t sum = 0;
    walk_t w;
    if (max <= 0 || !r->r[HT_DW_RA])
        goto out;
    if (!set_stack(&w, r->r[HT_DW_RSP])) {
        /* unknown stack: only the first frame is certain */
        if (skip == 0) {
            frames[n] = (void *)r->r[HT_DW_RA];
            sum += ht_hash_term(r->r[HT_DW_RA], 0);
            n++;
        }
        goto out;
    }
    centry_t *cache = ht_load_acquire(&g_cache);
    if (ht_unlikely(!cache) && ht_load_relaxed(&g_cache_state) == 0)
        cache = cache_init();
    uint64_t gen = (uint64_t)(ht_load_acquire(&ht__code_gen) & 0xffff) << 48;

    uintptr_t pc = r->r[HT_DW_RA], sp = r->r[HT_DW_RSP], bp = r->r[HT_DW_RBP];
    for (int steps = 0; steps < MAX_STEPS; steps++) {
        if (skip > 0) {
            skip--;
        } else {
            frames[n] = (void *)pc;
            sum += ht_hash_term(pc, (uint64_t)n);
            if (++n >= max)
                break;
        }
        if (!exact) {
            rule_t ru = rule_at(cache, pc, gen);
            if (ht_likely(ru.s.kind == K_NORMAL)) {
                uintptr_t cfa, base = (ru.s.how & 3) == CFA_RSP ? sp : bp;
                if ((ru.s.how & 3) == CFA_DEREF_RBP) {
                    if (!rd_stack(&w, bp + (uintptr_t)(intptr_t)ru.s.cfa_off, &cfa))
                        break;
                } else {
                    cfa = base + (uintptr_t)(intptr_t)ru.s.cfa_off;
                }
                if (ht_unlikely(cfa < sp + 8 || cfa > w.hi))
                    break;
                uintptr_t ra = *(const uintptr_t *)(cfa - 8);
                unsigned bh = ru.s.how >> 2;
                if (bh) {
                    uintptr_t slot = (bh == BP_AT_CFA ? cfa : bp) + (uintptr_t)(intptr_t)ru.s.bp_off;
                    if (!rd_stack(&w, slot, &bp))
                        break;
                }
                sp = cfa;
                pc = ra;
                if (ht_unlikely(pc == 0))
                    break;
                continue;
            }
            if (ru.s.kind == K_OUTERMOST || ru.s.kind == K_BAD)
                break;
            if (ru.s.kind == K_SIGNAL) {
                /* the handler's CFA is the ucontext the kernel pushed */
                if (!regs_from_ucontext(sp, r, rd_stack, &w) || !set_stack(&w, r->r[HT_DW_RSP]))
                    break;
                pc = r->r[HT_DW_RA];
                sp = r->r[HT_DW_RSP];
                bp = r->r[HT_DW_RBP];
                exact = 1;
                if (!pc)
                    break;
                continue;
            }
            /* K_COMPLEX, K_NOCFI, K_NOMODULE: only rsp, rbp, pc are known */
            r->valid = (1u << HT_DW_RA) | (1u << HT_DW_RSP) | (1u << HT_DW_RBP);
        }
        r->r[HT_DW_RA] = pc;
        r->r[HT_DW_RSP] = sp;
        r->r[HT_DW_RBP] = bp;
        int st = step_full(&w, r, exact);
        if (st != STEP_OK)
            break;
        pc = r->r[HT_DW_RA];
        sp = r->r[HT_DW_RSP];
        bp = (r->valid & (1u << HT_DW_RBP)) ? r->r[HT_DW_RBP] : 0;
        exact = 0;
        if (!pc)
            break;
    }
out:
    if (hash)
        *hash = ht_hash_finish(sum, (uint64_t)n);
    return n;
}

/* Called by capture.S with the caller's pc, sp and rbp. */
HT_INTERNAL int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash,
                                 const uintptr_t *regs3);

int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash, const uintptr_t *regs3)
{
    ht_regs_t r;
    r.r[HT_DW_RA] = regs3[0];
    r.r[HT_DW_RSP] = regs3[1];
    r.r[HT_DW_RBP] = regs3[2];
    r.valid = (1u << HT_DW_RA) | (1u << HT_DW_RSP) | (1u << HT_DW_RBP);
    return walk(&r, 0, skip < 0 ? 0 : skip, max, frames, hash);
}

static int rd_any(void *ctx, uintptr_t addr, uintptr_t *out)
{
    (void)ctx;
    *out = *(const uintptr_t *)addr;
    return 1;
}

int ht_capture_context(const void *ucontext, int max, void **frames, uint64_t *hash)
{
    ht_regs_t r;
    if (!ucontext || !regs_from_ucontext((uintptr_t)ucontext, &r, rd_any, NULL)) {
        if (hash)
            *hash = ht_hash_finish(0, 0);
        return 0;
    }
    return walk(&r, 1, 0, max, frames, hash);
}
