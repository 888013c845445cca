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
#include "jit.h"
#include "unwind.h"
#include <cpuid.h>
#include <emmintrin.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
#define HOW_JIT 0x80    /* the pc is in registered JIT code: tag its frame */
#define HOW_REFUSED 0x40 /* K_NOMODULE because a dlclose was under way: not known */

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
 * `ra` (looked up at ra - 1, inside the call instruction). Inside a module
 * read section. */
static rule_t compute_rule_in(uintptr_t ra)
{
    rule_t r = { .u = 0 };
    ht_module_t m;
    ht_cfi_row_t row;
    int rc;
    if (ht__module_find(ra - 1, &m) != 0) {
        ht_jit_range_t j;
        if (!ht__jit_find(ra - 1, &j)) {
            r.s.kind = K_NOMODULE;
            return r;
        }
        /* registered JIT code: its own CFI, or frame pointers */
        rc = j.eh ? ht__cfi_row_eh(j.eh, j.eh_size, j.eh_bias, ra - 1, &row) : HT_CFI_NONE;
        if (rc == HT_CFI_OK && !row.signal_frame)
            r = compact(&row);
        else
            r.s.kind = rc == HT_CFI_BAD ? K_BAD : K_NOCFI;
        r.s.how |= HOW_JIT;
        return r;
    }
    rc = ht__cfi_row(&m, ra - 1, &row);
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

/* compute_rule_in in a module read section; refused (a dlclose is under
 * way), the address is unknown code (HOW_REFUSED), a kind that is never
 * cached. */
static rule_t compute_rule(uintptr_t ra)
{
    rule_t r = { .u = 0 };
    int tok = ht__module_enter();
    if (!tok) {
        r.s.kind = K_NOMODULE;
        r.s.how = HOW_REFUSED;
        return r;
    }
    r = compute_rule_in(ra);
    ht__module_leave(tok);
    return r;
}

/* ---- the rule table ----------------------------------------------------
 * Every rule ever computed: one process-wide 2-way set-associative table of
 * 16-byte entries {key, rule}, key = return address | code generation
 * << 48. Entries are read and written with single 16-byte SSE moves, which
 * processors that support AVX guarantee to be atomic (Intel SDM vol. 3A
 * 9.1.1; AMD APM vol. 2 7.3.2), so a reader never sees a key with another
 * key's rule and no lock is needed: readers and writers race benignly, a
 * lost write is a later miss. Without AVX this table is off and misses of
 * the fast table below recompute the rule (correct, slower). Addresses
 * above 2^47 are never cached. */

#define RULE_SET_BITS 15
#define RULE_ENTRIES  (2u << RULE_SET_BITS)

typedef struct { uint64_t key, rule; } __attribute__((aligned(16))) rentry_t;

/* Its 1 MiB is faulted in 16 KiB at a time, before a chunk's first entry
 * is written: one madvise instead of 4 page faults, each ~10x the cost of
 * a populated page here (sqlite3 took 136 faults in this table; a program
 * that exits after a few captures populates a few chunks). A chunk whose
 * bit is clear holds no entry, so a lookup there misses without reading
 * it (a read would fault in the zero page). */
#define RULE_CHUNK_BITS 14
#define RULE_CHUNK  ((size_t)1 << RULE_CHUNK_BITS)
#define RULE_CHUNKS (RULE_ENTRIES * sizeof(rentry_t) / RULE_CHUNK)
static uint64_t g_rule_chunks;  /* bit c: chunk c populated */
_Static_assert(RULE_CHUNKS <= 64, "a chunk a bit");

/* ---- the fast table -----------------------------------------------------
 * What the walk's inner loop reads: 2^FAST_BITS direct-mapped 8-byte
 * words indexed by the low FAST_BITS bits of a return address, each
 * holding the compact rule in the form the loop uses and a tag that, with
 * the index, names the address and code generation exactly:
 *   bits 63..20  tag = (ra >> FAST_BITS) | (generation's low FAST_GENBITS
 *                bits) << FAST_GENSHIFT; a user-space ra has 47 bits
 *   bits 19..16  s: rbp is reloaded from CFA - 8 - 8*s (s = 0 reads the
 *                return-address slot and keeps rbp)
 *   bits 15..3   CFA offset / 8            (the offset is entry & 0xfff8)
 *   bit 2        rbp is saved: take the reloaded value
 *   bit 1        the CFA is rbp + offset (else rsp + offset)
 *   bit 0        1: a fast rule; 0: this address needs the slow path,
 *                except FAST_END: the return address is undefined here
 *                (_start, clone): the stack ends
 * x86-64 loads and stores of aligned 8-byte words are atomic, so this
 * table needs no lock either. A conflict miss falls back to the rule table,
 * not to the CFI. */

/* 13 bits, 64 KiB: inside real programs, whose own data evicts ours
 * between allocations, a capture cost 6-10% less than with 16 bits (512
 * KiB; docs/ARCHITECTURE.md). The tag's 44 bits hold the 47 - FAST_BITS
 * address bits above the index and FAST_GENBITS of the generation. */
#define FAST_BITS    13
#define FAST_TAGSHIFT 20
#define FAST_GENSHIFT (47 - FAST_BITS)
#define FAST_GENBITS (64 - FAST_TAGSHIFT - FAST_GENSHIFT)
#define FAST_GENMASK ((1u << FAST_GENBITS) - 1)

/* The generation's part of a fast-table tag (before the FAST_TAGSHIFT). */
static HT_ALWAYS_INLINE uint64_t fast_gentag(uint32_t gen)
{
    return (uint64_t)(gen & FAST_GENMASK) << FAST_GENSHIFT;
}
#define FAST_FPSTD   (16u | 7u | (1u << 16))    /* CFA = rbp + 16, rbp at CFA - 16 */
#define FAST_END     8u

static uint64_t *g_fast;
static rentry_t *g_rules;
static int g_tables_state;      /* 0 not yet, 1 ready, -1 failed */

/* Powers of the hash's R (hash.h): R^i for frame positions, R^-x for
 * trail indexes. Filled by tables_init, before any walk records. */
#define POW_N 1024
static uint64_t g_pow[POW_N];
static uint64_t g_rinv[256];

static HT_ALWAYS_INLINE uint64_t pow_at(uint64_t i)
{
    return ht_likely(i < POW_N) ? g_pow[i] : ht_hash_powof(HT_HASH_R, i);
}

uint32_t ht__code_gen = 1;

static HT_NOINLINE int tables_init(void)
{
    uint64_t p = 1, q = 1;
    for (unsigned i = 0; i < POW_N; i++, p *= HT_HASH_R)
        ht_store_relaxed(&g_pow[i], p);
    for (unsigned i = 0; i < HT_ARRAY_SIZE(g_rinv); i++, q *= HT_HASH_RINV)
        ht_store_relaxed(&g_rinv[i], q);
    /* 16 pages, most of them written by any program's first captures */
    uint64_t *f = ht__map_populated(sizeof(uint64_t) << FAST_BITS);
    if (!f) {
        ht_store_release(&g_tables_state, -1);    /* after the powers, too */
        return -1;
    }
    uint64_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&g_fast, &expect, f, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ht__unmap(f, sizeof(uint64_t) << FAST_BITS);
    unsigned a, b, c, d;
    int avx = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_AVX);
    if (avx) {
        rentry_t *t = ht__map(RULE_ENTRIES * sizeof(rentry_t)), *te = NULL;
        if (t && !__atomic_compare_exchange_n(&g_rules, &te, t, 0, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE))
            ht__unmap(t, RULE_ENTRIES * sizeof(rentry_t));
    }
    ht_store_release(&g_tables_state, 1);
    return 0;
}

void ht__code_changed(void)
{
    uint32_t gen = __atomic_add_fetch(&ht__code_gen, 1, __ATOMIC_SEQ_CST);
    /* the tables keep only the low bits of the generation: when they wrap,
     * forget everything so an old entry can never look current */
    uint64_t *f = ht_load_acquire(&g_fast);
    if (f && (gen & FAST_GENMASK) == 0)
        for (size_t i = 0; i < ((size_t)1 << FAST_BITS); i++)
            ht_store_relaxed(&f[i], 0);
    rentry_t *t = ht_load_acquire(&g_rules);
    if (t && (gen & 0xffff) == 0)
        for (size_t i = 0; i < RULE_ENTRIES; i++)
            ht_store_relaxed(&t[i].key, 0);
}

static HT_ALWAYS_INLINE __m128i load16(const rentry_t *e)
{
    __m128i v;
    __asm__ volatile("movdqa %1, %0" : "=x"(v) : "m"(*e));
    return v;
}

static HT_ALWAYS_INLINE void store16(rentry_t *e, uint64_t key, uint64_t rule)
{
    __m128i v = _mm_set_epi64x((long long)rule, (long long)key);
    __asm__ volatile("movdqa %1, %0" : "=m"(*e) : "x"(v));
}

static inline rentry_t *rule_set(rentry_t *t, uintptr_t pc)
{
    uint64_t h = pc ^ (pc >> RULE_SET_BITS) ^ (pc >> 29);
    return &t[(h & ((1u << RULE_SET_BITS) - 1)) * 2];
}

/* The fast form of a K_NORMAL rule, JIT or not, or 0. */
static uint64_t fast_form(rule_t r)
{
    unsigned base = r.s.how & 3, bph = (r.s.how >> 2) & 3;
    int32_t off = r.s.cfa_off;
    if ((base != CFA_RSP && base != CFA_RBP) || off < 8 || off > 0xfff8 || (off & 7))
        return 0;
    uint64_t e = (uint64_t)off | 1u | (base == CFA_RBP ? 2u : 0u);
    if (bph == BP_AT_CFA) {
        int k = -r.s.bp_off - 8;           /* CFA - 8 - 8*s */
        if (k < 8 || k > 120 || (k & 7))
            return 0;
        e |= 4u | (uint64_t)(k / 8) << 16;
    } else if (bph != BP_SAME) {
        return 0;
    }
    return e;
}

/* The low 20 bits of a fast-table entry for rule r, or 0 if r has no fast
 * form (then the entry says "slow path"). */
static uint64_t fast_bits(rule_t r)
{
    if (r.s.kind == K_OUTERMOST)
        return FAST_END;
    if (r.s.kind != K_NORMAL || (r.s.how & HOW_JIT))
        return 0;               /* the slow path tags JIT frames */
    return fast_form(r);
}

/* The rule for return address `ra` from the rule table, computing (and
 * caching) it on a miss; also refreshes the fast-table entry. */
static HT_NOINLINE rule_t rule_lookup(uintptr_t ra, uint32_t gen)
{
    rule_t r;
    rentry_t *t = ht_load_acquire(&g_rules), *set = NULL;
    uint64_t key = ra | (uint64_t)(gen & 0xffff) << 48;
    int cacheable = (ra >> 47) == 0;
    if (t && cacheable) {
        set = rule_set(t, ra);
        size_t off = (size_t)((char *)set - (char *)t);
        uint64_t bit = 1ull << (off >> RULE_CHUNK_BITS);
        if (!(ht_load_acquire(&g_rule_chunks) & bit)) {
            ht__populate((char *)t + (off & ~(RULE_CHUNK - 1)), RULE_CHUNK);
            __atomic_fetch_or(&g_rule_chunks, bit, __ATOMIC_RELEASE);
            goto miss;
        }
        for (int way = 0; way < 2; way++) {
            __m128i w = load16(&set[way]);
            if ((uint64_t)_mm_cvtsi128_si64(w) == key) {
                r.u = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w, w));
                goto fast;
            }
        }
    }
miss:
    r = compute_rule(ra);
    if (r.s.kind == K_NOMODULE)   /* JIT code or garbage: may change without dlclose */
        return r;
    if (set) {
        /* insert at way 0, moving its entry to way 1 (LRU-like) */
        __m128i w0 = load16(&set[0]);
        uint64_t k0 = (uint64_t)_mm_cvtsi128_si64(w0);
        if (k0 != 0 && k0 != key)
            store16(&set[1], k0, (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(w0, w0)));
        store16(&set[0], key, r.u);
    }
fast:
    if (cacheable) {
        uint64_t *f = ht_load_relaxed(&g_fast);
        uint64_t tag = (ra >> FAST_BITS) | fast_gentag(gen);
        if (f)
            ht_store_relaxed(&f[ra & ((1u << FAST_BITS) - 1)], tag << FAST_TAGSHIFT | fast_bits(r));
    }
    return r;
}

/* ---- checked reads ---------------------------------------------------- */

/* A thread's recent registry lookups (in its trail): JIT code is looked
 * up at every frame in it, and the registry's lookup pays two locked
 * instructions on a shared counter; a copy stays true while the registry
 * version it was made under is current (ht__jit_version). */
#define JC_BITS 6
typedef struct jcache_s {
    uint64_t version;           /* 0: empty */
    uintptr_t pc;
    int found;
    ht_jit_range_t r;
} jcache_t;

/* A thread's recent "this is module code" answers (in its trail): a
 * frame-pointer step validates every return address it reads, and asking
 * the loader costs a _dl_find_object, the program headers and a module
 * read section (two locked instructions). An executable segment found
 * stays code until a dlclose bumps the code generation (dlopen only adds
 * modules). */
#define TC_N 4
typedef struct textc_s {
    uintptr_t lo, hi;           /* an executable segment */
    uint32_t gen;               /* 0: empty */
} textc_t;

typedef struct walk_s {
    uintptr_t lo, hi;           /* readable stack: [lo, hi) */
    jcache_t *jc;               /* the thread's lookup cache, or NULL */
    textc_t *tc;                /* the thread's TC_N text segments, or NULL */
    uint32_t gen;               /* the code generation the walk started in */
} walk_t;

/* ht__jit_find through the walk's cache. */
static int jit_find_w(const walk_t *w, uintptr_t pc, ht_jit_range_t *out)
{
    if (!w->jc)
        return ht__jit_find(pc, out);
    uint64_t v = ht__jit_version();     /* before the lookup it labels */
    jcache_t *e = &w->jc[(pc * 0x9e3779b97f4a7c15u) >> (64 - JC_BITS)];
    if (e->version == v && e->pc == pc) {
        if (e->found)
            *out = e->r;
        return e->found;
    }
    int found = ht__jit_find(pc, out);
    e->version = v;
    e->pc = pc;
    e->found = found;
    if (found)
        e->r = *out;
    return found;
}

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
 * red zone below sp, where a leaf function may have saved registers.
 * Returns 2 when all of the red zone is readable (the fast steps rely on
 * it), 1 when only part is, 0 when the stack is unknown. */
static HT_ALWAYS_INLINE int set_stack(walk_t *w, uintptr_t sp)
{
    uintptr_t lo, hi;
    if (ht__stack_range(sp, &lo, &hi) != 0)
        return 0;
    w->hi = hi;
    if (sp >= 128 && sp - 128 >= lo) {
        w->lo = sp - 128;
        return 2;
    }
    w->lo = lo;
    return 1;
}

/* Whether `pc` is a plausible return address: inside an executable
 * segment of a loaded module, registered JIT code or an executable mapping
 * the loader does not know. With the walk's registry cache the registry
 * goes first (a hit costs less than the loader); without, last. */
static int is_code(const walk_t *w, uintptr_t pc)
{
    ht_module_t m;
    ht_jit_range_t j;
    if (pc <= 1)
        return 0;
    if (w->tc)
        for (int i = 0; i < TC_N; i++)
            if (w->tc[i].gen == w->gen && pc - 1 >= w->tc[i].lo && pc - 1 < w->tc[i].hi)
                return 1;
    if (w->jc && jit_find_w(w, pc - 1, &j))  /* cached: cheaper than the loader */
        return 1;
    int tok = ht__module_enter(), found = tok && ht__module_find(pc - 1, &m) == 0;
    ht__module_leave(tok);
    if (!tok)
        return 0;               /* a dlclose is under way: unknown */
    if (found) {
        int i = ht__module_text_seg(&m, pc - 1);
        if (i >= 0 && w->tc) {
            /* most recent first; the oldest falls out */
            for (int k = TC_N - 1; k > 0; k--)
                w->tc[k] = w->tc[k - 1];
            w->tc[0] = (textc_t){ m.text_lo[i], m.text_hi[i], w->gen };
        }
        return i >= 0;
    }
    return (!w->jc && jit_find_w(w, pc - 1, &j)) || ht__jit_in_exec(pc - 1);
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
    if (!is_code(w, ra))
        return 0;
    r->r[HT_DW_RA] = ra;
    r->r[HT_DW_RSP] = bp + 16;
    r->r[HT_DW_RBP] = nbp;
    r->valid = (1u << HT_DW_RA) | (1u << HT_DW_RSP) | (1u << HT_DW_RBP);
    return 1;
}

/* Steps out of the frame at r->r[RA] with the full interpreter. `exact`
 * says pc is an interrupted instruction rather than a return address.
 * Returns 1, or 0 at the end of the stack or on anything unverifiable. */
static int step_full(walk_t *w, ht_regs_t *r, int exact)
{
    uintptr_t pc = r->r[HT_DW_RA], at = exact ? pc : pc - 1;
    ht_module_t m;
    ht_cfi_row_t row;
    ht_regs_t out;
    int rc, ok = 0, outermost = 0;
    /* the row's expressions point into the module's .eh_frame: the
     * section stays open until they are evaluated */
    int tok = ht__module_enter();
    if (!tok)
        return 0;               /* a dlclose is under way: unknown code */
    int found = ht__module_find(at, &m) == 0;
    if (found) {
        rc = ht__cfi_row(&m, at, &row);
        if (rc == HT_CFI_OK)
            ok = ht__cfi_apply(&row, r, &out, rd_stack, w, &outermost);
    }
    ht__module_leave(tok);
    if (!found) {
        ht_jit_range_t j;
        if (!jit_find_w(w, at, &j))
            return !ht__jit_unloaded_elf(at) && step_fp(w, r);
        if (!j.eh)
            return step_fp(w, r);
        rc = ht__cfi_row_eh(j.eh, j.eh_size, j.eh_bias, at, &row);
        if (rc == HT_CFI_OK)
            ok = ht__cfi_apply(&row, r, &out, rd_stack, w, &outermost);
    }
    if (rc == HT_CFI_NONE)
        return step_fp(w, r);
    if (rc != HT_CFI_OK || !ok || outermost)
        return 0;
    if (out.r[HT_DW_RSP] <= r->r[HT_DW_RSP] || out.r[HT_DW_RSP] > w->hi)
        return 0;
    *r = out;
    return 1;
}

/* A step with a compact rule from the rule table (not in fast form: the
 * realigned-stack CFA, big frames, unusual rbp slots). */
static int step_compact(walk_t *w, rule_t ru, uintptr_t *pc, uintptr_t *sp, uintptr_t *bp)
{
    uintptr_t cfa, ra, nbp = *bp;
    switch (ru.s.how & 3) {
    case CFA_RSP: cfa = *sp + (uintptr_t)(intptr_t)ru.s.cfa_off; break;
    case CFA_RBP: cfa = *bp + (uintptr_t)(intptr_t)ru.s.cfa_off; break;
    default:
        if (!rd_stack(w, *bp + (uintptr_t)(intptr_t)ru.s.cfa_off, &cfa))
            return 0;
    }
    if (cfa < *sp + 8 || cfa > w->hi || !rd_stack(w, cfa - 8, &ra))
        return 0;
    switch ((ru.s.how >> 2) & 3) {
    case BP_AT_CFA:
        if (!rd_stack(w, cfa + (uintptr_t)(intptr_t)ru.s.bp_off, &nbp))
            return 0;
        break;
    case BP_AT_RBP:
        if (!rd_stack(w, *bp + (uintptr_t)(intptr_t)ru.s.bp_off, &nbp))
            return 0;
        break;
    }
    *pc = ra;
    *sp = cfa;
    *bp = nbp;
    return 1;
}

/* ---- the trail ----------------------------------------------------------
 * Successive captures on one thread share most of their stack. Each thread
 * keeps the states (pc, sp, rbp) its previous walk passed through, with
 * the two words each fast step read: the return-address slot (CFA - 8) and
 * the rbp slot. When a walk reaches a state present in the trail, the rest
 * of the previous walk is re-checked with loads whose addresses are all
 * known in advance -- independent loads instead of a dependent rule chain.
 * A step depends only on its state, the rule at its pc (fixed within a
 * code generation) and the two words it reads, so equal words mean an
 * equal walk: the result is exact, and a mismatch resumes the table walk
 * at that frame. Return addresses are never patched (bytehound's
 * trampolines break on exceptions, longjmp and CET shadow stacks).
 *
 * rbp must match only where it matters: in code without frame pointers
 * rbp is an ordinary register whose value changes from call to call. Each
 * state records whether some later step reads rbp before a step reloads it
 * (TF_NEEDS_BP); a join ignores rbp where it does not.
 *
 * A trail is a run of consecutive fast steps (and slow steps with a fast
 * form: JIT frames, recorded with their tagged frame, and frames whose
 * fast-table entry another address held; see slow_step's step_e), stored
 * outermost first in a
 * buffer at [base, base + len). Its outermost state may be terminal: the
 * walk left the fast path there (outermost frame, signal frame, a rule
 * without fast form), so a join that verifies up to it continues with the
 * same slow step. A thread keeps TRAILS trails, because programs cycle
 * through a few call paths (allocbench's seven depths; an interpreter's
 * dozen allocation sites: python3's captures replayed whole 4.7 million
 * times in 6.9 million with eight trails, 6.87 million with sixteen, and
 * took half the time), and the previous walk alone often shares only the
 * outermost frames with this one. A walk records its own fast
 * steps into a spare buffer from the top down, which is trail order, so a
 * walk that joins nothing costs no copy: its record becomes a trail and the
 * least recently used trail's buffer the next spare. A walk that joins
 * after at most TRAIL_INPLACE new frames writes them into place above the
 * join (a small variation of the same path); one that joins further out
 * becomes a new trail, its record on top of a copy of the joined trail's
 * outer states, and so does one walk in TRAIL_ADOPT_EVERY that could have
 * written in place (trail_update). Join candidates, in any trail, are
 * found through one small table indexed by sp.
 *
 * Recording and joining cost a few stores and loads a frame, and on stacks
 * that never repeat (each capture down another path) they buy nothing: a
 * recorded walk whose joins verified fewer frames than it recorded (or
 * fewer than two) is useless, and after TRAIL_USELESS useless walks in a
 * row the thread records and joins only every TRAIL_REST + 1 walks, then
 * every 32nd, 64th, ... 256th while they stay useless, until one pays
 * again or a capture replays a trail (trail_paid). (A recorded walk costs
 * several resting ones: on varied stacks the 1 in 16 had cost a capture
 * as much as its resting walk's frames at depth 10. Counting only "fewer
 * than two" and joining on every walk cost varied stacks 16-18 ns a frame
 * against 5-7 without trails: the harness's outer frames always verified,
 * and every frame probed the join table.)
 *
 * Per state: sp, pc, rbp, the word read from the rbp slot by the step from
 * it, and in fl: TF_* bits and the slot's distance below the next CFA,
 * (fl >> 4) words below CFA - 8. */

#define TRAIL_CAP 256
_Static_assert(HT_ARRAY_SIZE(g_rinv) >= TRAIL_CAP, "R^-x for every trail index");
#define TRAILS 16               /* trails kept per thread */
#define TRAIL_INPLACE 6
#define TRAIL_ADOPT_EVERY 16    /* tested on the trail clock's low bits */
_Static_assert((TRAIL_ADOPT_EVERY & (TRAIL_ADOPT_EVERY - 1)) == 0, "a power of two");
#define TRAIL_USELESS 4
#define TRAIL_REST 15
#define TRAIL_REST_MAX 255      /* 15, 31, ... while recorded walks stay useless */
#define JOIN_BITS 9
#define TOP_HINT_BITS 5

/* TF_END: a terminal state whose step found no caller (FS_STOP): the
 * stack ended there. Terminal states have no rbp slot, so it shares the
 * bits of the slot distance. */
enum { TF_USES_BP = 1, TF_RELOADS_BP = 2, TF_NEEDS_BP = 4, TF_TERMINAL = 8, TF_END = 16 };

typedef struct tbuf_s {
    uintptr_t sp[TRAIL_CAP], pc[TRAIL_CAP], bp[TRAIL_CAP];
    uintptr_t sval[TRAIL_CAP];  /* the word the step from here read at its rbp slot */
    /* hash prefix sums over the trail [base, base + len): dsum[a] is the
     * sum of mix(pc[x]) * R^-x for x in [base, a) (hash.h), so a verified
     * run of states costs the hash one multiplication */
    uint64_t dsum[TRAIL_CAP + 1];
    uint8_t fl[TRAIL_CAP];      /* TF_* | slot distance << 4 */
    /* derived from fl when a state is marked, so the verification loop
     * does not decode it: the rbp slot's distance below the next CFA in
     * bytes, and prefix counts of TF_RELOADS_BP (rcnt[a]: states in
     * [base, a) with it; mod 256, and a run holds under 256 states) */
    uint8_t soff[TRAIL_CAP];
    uint8_t rcnt[TRAIL_CAP + 1];
} tbuf_t;

/* A buffer's header, kept with the others in the trail_t (340 bytes for
 * all), not at the end of its 11 KiB of states: every join test and every
 * choice of a buffer to recycle reads it. */
typedef struct thead_s {
    int base, len;              /* its trail is [base, base + len); len 0: none */
    uint32_t gen;               /* code generation it was recorded in */
    uint32_t used;              /* when a walk last joined or made it */
    uint32_t memo;              /* ht__capture_memo's word; 0 whenever the trail changes */
} thead_t;

typedef struct trail_s {
    struct trail_s *next_free;
    struct trail_s *all_next;   /* every trail mapped (g_trail_all) */
    int spare;                  /* the buffer walks record into (never a trail) */
    uint32_t clock;
    int useless;                /* useless recorded walks in a row (see above) */
    int rest;                   /* walks left that do not record */
    int rest_len;               /* the next rest's length (see above) */
    int mixed;                  /* resting walks: rest_steps_mixed (plain_walk) */
    /* b[x]'s trail's innermost state, for the look for a trail to
     * replay that begins every recording walk: sp 0 if none, or not
     * replayable. Two arrays of their own (five lines), not in the
     * headers (eleven). */
    uintptr_t top_sp[TRAILS + 1], top_pc[TRAILS + 1];
    /* the buffer whose top last replayed, by a hash of that top's sp and
     * pc: where the scan of top_sp and top_pc starts. Only an order: a
     * stale hint's buffer fails the scan's test like any other */
    uint8_t top_hint[1 << TOP_HINT_BITS];
    thead_t h[TRAILS + 1];      /* b[x]'s header is h[x] */
    uint16_t join[1 << JOIN_BITS]; /* (sp >> 3) & mask -> buffer << 8 | position */
    jcache_t jc[1 << JC_BITS];  /* registry lookups (walk_t.jc) */
    textc_t tc[TC_N];           /* module text segments (walk_t.tc) */
    tbuf_t b[TRAILS + 1];
} trail_t;

#define JOIN_SLOT(sp) (((sp) >> 3) & ((1u << JOIN_BITS) - 1))

static HT_TLS trail_t *t_trail;
static HT_TLS int t_trail_busy;     /* a walk on this thread uses t_trail */
static HT_TLS int t_trail_off;      /* the thread is exiting: no new trail */
static trail_t *g_trail_free;
static trail_t *g_trail_all;    /* every trail mapped, never unmapped */
static ht_spinlock_t g_trail_lock;
static pthread_key_t g_trail_key;
static int g_trail_key_ok;

/* A listed trail no thread holds any more: its pages go back, its mapping
 * stays on g_trail_all (never unmapped: the detach walks the list). */
static void trail_pages_back(trail_t *tr)
{
    ht__sys3(SYS_madvise, tr, sizeof *tr, MADV_DONTNEED);
}

static void trail_thread_exit(void *p)
{
    trail_t *tr = p;
    t_trail_off = 1;
    t_trail = NULL;
    /* held only for two stores, except in a fork child that inherited it
     * from a thread it does not have: then give the memory back instead of
     * waiting forever */
    for (unsigned i = 0; i < 1000; i++) {
        if (ht__spin_trylock(&g_trail_lock)) {
            tr->next_free = g_trail_free;
            g_trail_free = tr;
            ht__spin_unlock(&g_trail_lock);
            return;
        }
        ht__backoff(i);
    }
    trail_pages_back(tr);
}

/* heaptrail detach, once no thread can be inside the agent: every
 * trail's pages go back (190 KiB a thread that allocated). The mappings
 * stay: a thread's t_trail still points at one and its exit gives it to
 * the free list; read again, a trail is all zeros, which is empty. */
void ht__trails_release(void)
{
    for (trail_t *tr = ht_load_acquire(&g_trail_all); tr; tr = tr->all_next)
        trail_pages_back(tr);
}

__attribute__((constructor)) static void trail_init(void)
{
    if (!ht__env("HEAPTRAIL_NO_TRAIL"))
        g_trail_key_ok = pthread_key_create(&g_trail_key, trail_thread_exit) == 0;
}

/* Empties a buffer's header: no trail, so no top to replay and no memo. */
static HT_ALWAYS_INLINE void head_clear(trail_t *tr, int bi)
{
    tr->h[bi].len = 0;
    tr->h[bi].memo = 0;
    tr->top_sp[bi] = 0;
}

/* A trail for this thread: recycled from an exited thread, else mapped. */
static HT_NOINLINE trail_t *trail_new(void)
{
    trail_t *tr = NULL;
    if (!g_trail_key_ok || t_trail_off)
        return NULL;
    if (ht__spin_trylock(&g_trail_lock)) {
        tr = g_trail_free;
        if (tr)
            g_trail_free = tr->next_free;
        ht__spin_unlock(&g_trail_lock);
    }
    /* populated: its headers and the buffers walks record into are all
     * written soon, and a fault a page costs ~10x as much (sys.c) */
    int fresh = !tr;
    if (!tr && !(tr = ht__map_populated(sizeof(trail_t))))
        return NULL;
    for (int b = 0; b <= TRAILS; b++)
        head_clear(tr, b);
    tr->spare = TRAILS;
    tr->useless = 0;
    tr->rest = 0;
    tr->rest_len = TRAIL_REST;
    tr->mixed = 0;
    if (pthread_setspecific(g_trail_key, tr) != 0) {
        /* (a key past glibc's first 32 may need memory) */
        if (fresh)
            ht__unmap(tr, sizeof(trail_t));     /* not listed yet */
        else
            trail_pages_back(tr);
        return NULL;
    }
    if (fresh) {
        /* new: on the list (lock-free: a handler on this thread may map
         * its own while this one is half made) */
        trail_t *old = ht_load_relaxed(&g_trail_all);
        do
            tr->all_next = old;
        while (!__atomic_compare_exchange_n(&g_trail_all, &old, tr, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    t_trail = tr;
    return tr;
}

/* The thread's trail for one walk, or NULL (a walk nested in a signal
 * handler, trails off, or no memory). */
static HT_ALWAYS_INLINE trail_t *trail_acquire(void)
{
    if (t_trail_busy)
        return NULL;
    trail_t *tr = t_trail;
    if (ht_unlikely(tr == NULL) && !(tr = trail_new()))
        return NULL;
    t_trail_busy = 1;
    ht_compiler_barrier();
    return tr;
}

static HT_ALWAYS_INLINE void trail_release(void)
{
    ht_compiler_barrier();
    t_trail_busy = 0;
}

/* A recorded walk paid (its joins verified enough, or a capture replayed
 * a trail): the thread records every walk again, and its rests start
 * short. */
static HT_ALWAYS_INLINE void trail_paid(trail_t *tr)
{
    tr->useless = 0;
    tr->rest_len = TRAIL_REST;
}

static HT_ALWAYS_INLINE void tcopy(tbuf_t *to, int t, const tbuf_t *from, int f)
{
    to->sp[t] = from->sp[f];
    to->pc[t] = from->pc[f];
    to->bp[t] = from->bp[f];
    to->sval[t] = from->sval[f];
    to->fl[t] = from->fl[f];
}

/* What marking a state carries up from the state below it: TF_NEEDS_BP
 * as it flows in, and the rbp-reload count and hash sum of the prefix.
 * Kept in registers: read back from the arrays, each state's sum waited
 * for the last one's store to be forwarded (and the flag bytes stored in
 * between may alias anything), a chain through the whole of a trail
 * being marked. */
typedef struct {
    unsigned need, rc;
    uint64_t d;
} mark_t;

/* Marks state `at` of buffer bi, whose state below is marked (`m`): its
 * flags f (without TF_NEEDS_BP) with TF_NEEDS_BP as it flows in from
 * below, its rbp slot offset, its prefix count and sum, its join-table
 * slot. Beyond the trail (and at a terminal state), rbp is assumed
 * needed. */
static HT_ALWAYS_INLINE void mark_state(trail_t *tr, int bi, int at, uintptr_t pc, uintptr_t sp, unsigned f,
                                        mark_t *m)
{
    tbuf_t *b = &tr->b[bi];
    if (f & (TF_USES_BP | TF_TERMINAL))
        m->need = TF_NEEDS_BP;
    else if (f & TF_RELOADS_BP)
        m->need = 0;
    b->fl[at] = (uint8_t)(f | m->need);
    b->soff[at] = (uint8_t)(8 + ((f >> 4) << 3));
    m->rc += (f & TF_RELOADS_BP) != 0;
    b->rcnt[at + 1] = (uint8_t)m->rc;
    m->d += ht_hash_mix(pc) * g_rinv[at];
    b->dsum[at + 1] = m->d;
    tr->join[JOIN_SLOT(sp)] = (uint16_t)(bi << 8 | at);
}

/* Sets a trail's top (its innermost state, in its header: replay()'s
 * lookup) after its states changed, and clears its memo: the stack it
 * replays is another. A trail that does not end the stack (its outermost
 * state not TF_END) cannot be replayed: its top stays 0, so no capture
 * reads its states to find that out (python3 under tests/capture's
 * agent: 2.8 million of its 6.9 million captures did, at start-up trails
 * whose record a slow step had ended). */
static HT_ALWAYS_INLINE void set_top(trail_t *tr, int bi)
{
    thead_t *H = &tr->h[bi];
    const tbuf_t *T = &tr->b[bi];
    int top = H->base + H->len - 1;
    tr->top_sp[bi] = (T->fl[H->base] & TF_END) ? T->sp[top] : 0;
    tr->top_pc[bi] = T->pc[top];
    H->memo = 0;
}

/* Marks the states of buffer bi's whole trail (mark_state). */
static void trail_mark(trail_t *tr, int bi)
{
    tbuf_t *b = &tr->b[bi];
    int base = tr->h[bi].base, end = base + tr->h[bi].len;
    mark_t m = { TF_NEEDS_BP, 0, 0 };
    b->dsum[base] = 0;
    b->rcnt[base] = 0;
    for (int at = base; at < end; at++)
        mark_state(tr, bi, at, b->pc[at], b->sp[at], b->fl[at] & ~(unsigned)TF_NEEDS_BP, &m);
    set_top(tr, bi);
}

/* The record (the spare buffer) becomes a trail; the least recently used
 * trail's buffer becomes the spare. */
static void adopt_record(trail_t *tr, uint32_t gen, uint32_t now)
{
    thead_t *R = &tr->h[tr->spare];
    R->gen = gen;
    R->used = now;
    trail_mark(tr, tr->spare);
    int victim = -1;
    for (int b = 0; b <= TRAILS; b++) {
        if (b == tr->spare)
            continue;
        if (tr->h[b].len == 0) {
            victim = b;
            break;
        }
        if (victim < 0 || tr->h[b].used < tr->h[victim].used)
            victim = b;
    }
    head_clear(tr, victim);
    tr->spare = victim;
}

/* ---- the walk ---------------------------------------------------------- */

/* If `at` is in registered JIT code, puts the registration's serial into
 * the high bits of frames[i] (and the hash sum). Returns 1 if it is. */
static int tag_jit(const walk_t *w, void **frames, int i, uintptr_t at, uint64_t *sum,
                   ht_jit_range_t *jr)
{
    ht_jit_range_t j;
    if (!jit_find_w(w, at, &j))
        return 0;
    if (jr)
        *jr = j;
    uintptr_t f = (uintptr_t)frames[i], tagged = HT_FRAME_ADDRESS(f) | (uintptr_t)j.serial << 48;
    *sum += (ht_hash_mix(tagged) - ht_hash_mix(f)) * pow_at((uint64_t)i);
    frames[i] = (void *)tagged;
    return 1;
}

#define MAX_STEPS 4096

/* Everything a walk keeps besides its hot registers (pc, sp, rbp, the
 * output), so the inner loop has few live values. */
typedef struct wstate_s {
    uintptr_t pc, sp, bp;       /* the state, passed to and from slow paths */
    int n;                      /* frames stored, likewise */
    uint64_t sum;               /* their hash sum, likewise */
    walk_t w;
    const uint64_t *fast;       /* NULL: no fast steps (tables off, or the
                                   red zone below sp is not all readable) */
    uint64_t gentag;            /* generation bits of the fast-table tag */
    uint32_t gen;
    int exact;                  /* pc is an interrupted instruction */
    ht_regs_t regs;             /* every register known, for slow steps */
    int has_sig;                /* sig holds the last interrupted frame's */
    ht_regs_t sig;              /* registers (a signal frame's ucontext) */
    /* the trail */
    trail_t *tr;
    tbuf_t *T, *R;              /* previous walk; this walk's record */
    int ti;                     /* T is tr->b[ti] */
    int tb;                     /* T index x is T->field[tb + x] */
    int ri;                     /* states recorded; R index x at TRAIL_CAP - 1 - x */
    int rec;                    /* still recording (only consecutive fast steps) */
    int spec_j, spec_k, spec_i, spec_rec, appended;   /* the last join */
    int gain;                   /* frames verified by all joins */
    /* set by slow_step when its step was a JIT frame's with a fast form
     * (CFI or frame pointer): what the trail records for it, as for a
     * fast step, so later walks verify through JIT frames too */
    uint64_t step_e;             /* slow_step: the step's fast form, when it has one */
    uintptr_t step_sval;         /* (a JIT frame, or a frame the fast table missed) */
    int outermost;              /* slow_step stopped at the stack's outermost frame */
    uintptr_t join_bp;
} wstate_t;

enum { FS_OK, FS_SLOW, FS_STOP };

/* One step with the fast table. FS_OK: *pc, *sp, *bp are the caller's, and
 * *ep, *sval what the step used (for the trail). FS_SLOW: the slow path
 * must take it. FS_STOP: the stack ends here (outermost frame, or a CFA
 * outside the stack). */
static HT_ALWAYS_INLINE int fast_step(const uint64_t *fast, uint64_t gentag, uintptr_t hi,
                                      uintptr_t *pc, uintptr_t *sp, uintptr_t *bp, uint64_t *ep,
                                      uintptr_t *svalp)
{
    uint64_t e = fast[*pc & ((1u << FAST_BITS) - 1)];
    uint64_t tag = ((*pc >> FAST_BITS) | gentag) << FAST_TAGSHIFT;
    uintptr_t cfa, slot;
    uint64_t reload;        /* e & 4: the step reloads rbp */
    if (ht_likely(e == (tag | FAST_FPSTD))) {
        /* a frame-pointer frame: a constant rule, so the CPU can run ahead
         * on rbp while the rule load is still checking. The reload flag
         * is a constant the compiler cannot see: it used e & 4 (true here
         * too), and every frame waited for the rule load (3.1 against 2.5
         * ns a frame on varied frame-pointer stacks) */
        cfa = *bp + 16;
        slot = *bp;
        reload = 4;
        __asm__("" : "+r"(reload));
    } else if (ht_likely(((e ^ tag) >> FAST_TAGSHIFT) == 0 && (e & 1))) {
        cfa = ((e & 2) ? *bp : *sp) + (e & 0xfff8);
        slot = cfa - 8 - ((e >> 13) & 0x78);
        reload = e & 4;
    } else {
        return e == (tag | FAST_END) ? FS_STOP : FS_SLOW;
    }
    /* cfa in [sp + 8, hi]: the RA slot is in the stack, and the rbp slot
     * too, since it is at most 128 bytes below the CFA and the walk may
     * read down to sp - 128. Two comparisons: as one unsigned one, cfa -
     * (sp + 8) > hi - (sp + 8), it let any cfa through once a frame's CFA
     * had been the stack's very end (sp + 8 > hi wrapped), and the next
     * step read wherever a saved rbp pointed (capture_corrupt's
     * stack_end) */
    if (ht_unlikely(cfa < *sp + 8 || cfa > hi))
        return FS_STOP;
    uintptr_t ra = *(const uintptr_t *)(cfa - 8), sval = *(const uintptr_t *)slot;
    if (reload)
        *bp = sval;
    *sp = cfa;
    *pc = ra;
    *ep = e;
    *svalp = sval;
    return FS_OK;
}

/* Appends a state to the record; `e` and `sval` describe its fast step, or
 * e = 0 for a terminal state (its step is not a fast one). */
static HT_ALWAYS_INLINE void record(wstate_t *st, uintptr_t pc, uintptr_t sp, uintptr_t bp, uint64_t e,
                                    uintptr_t sval)
{
    if (st->ri == TRAIL_CAP) {
        st->rec = 0;
        return;
    }
    tbuf_t *R = st->R;
    int x = TRAIL_CAP - 1 - st->ri++;
    R->sp[x] = sp;
    R->pc[x] = pc;
    R->bp[x] = bp;
    R->sval[x] = sval;
    /* fast-entry bit 1 (CFA on rbp) is TF_USES_BP, bit 2 (rbp reloaded)
     * TF_RELOADS_BP, bits 16..19 (the rbp slot) the high nibble */
    R->fl[x] = e ? (uint8_t)(((e >> 1) & 3) | ((e >> 12) & 0xf0)) : TF_TERMINAL;
}

/* After a join verified T[spec_j .. spec_k], the walk records again: the
 * verified states go into the record first, with the rbp they really had
 * (until a step reloaded it, the join's). */
static HT_NOINLINE void append_verified(wstate_t *st)
{
    const tbuf_t *T = st->T;
    int seen = 0;
    st->appended = 1;
    for (int k = st->spec_j; k > st->spec_k && st->ri < TRAIL_CAP; k--) {
        int x = TRAIL_CAP - 1 - st->ri++;
        tcopy(st->R, x, T, st->tb + k);
        if (!seen)
            st->R->bp[x] = st->join_bp;
        seen |= T->fl[st->tb + k] & TF_RELOADS_BP;
    }
}

/* The walk reached state T[j] (st->pc/sp/bp): verifies the steps of the
 * previous walk from there with independent loads, emitting their frames,
 * and leaves the last verified state in st. Returns 0 when `max` frames
 * are out. */
static HT_NOINLINE int speculate(wstate_t *st, int j, void **frames, int max)
{
    const tbuf_t *T = st->T;
    const uintptr_t *tsp = T->sp + st->tb, *tpc = T->pc + st->tb, *tsval = T->sval + st->tb;
    const uint8_t *tsoff = T->soff + st->tb;
    int n = st->n;
    /* verify down to state kmin at most: the frames left room for */
    int kmin = j - (max - n) > 0 ? j - (max - n) : 0, k = j;
    st->spec_j = j;
    st->spec_i = st->ri;
    st->spec_rec = st->rec;
    st->join_bp = st->bp;
    void **out = frames + n;
    for (; k > kmin; k--) {
        /* npc is the frame to emit: a JIT frame's carries its serial tag,
         * the return-address slot holds the bare address */
        uintptr_t npc = tpc[k - 1], cfa = tsp[k - 1];
        if (*(const uintptr_t *)(cfa - 8) != HT_FRAME_ADDRESS(npc) ||
            *(const uintptr_t *)(cfa - tsoff[k]) != tsval[k])
            break;
        *out++ = (void *)npc;
    }
    n = (int)(out - frames);
    /* the frames of states x in [k, j) went to positions E - (tb + x) */
    uint64_t E = (uint64_t)st->n + (uint64_t)j - 1 + (uint64_t)st->tb;
    if (k < j)
        st->sum += pow_at(E) * (T->dsum[st->tb + j] - T->dsum[st->tb + k]);
    st->spec_k = k;
    st->gain += j - k;
    st->n = n;
    st->pc = HT_FRAME_ADDRESS(tpc[k]);
    st->sp = tsp[k];
    /* a step from a state in (k, j] reloaded rbp */
    if (T->rcnt[st->tb + j + 1] != T->rcnt[st->tb + k + 1])
        st->bp = T->bp[st->tb + k];
    return n < max;
}

/* The walk's first state is the innermost of a trail that holds a whole
 * stack (its outermost state's step found no caller): if every step
 * verifies as in speculate(), and the step from the outermost state stops
 * again, the stack is that trail's, frame for frame. Taken before the walk
 * records or joins anything, so such a capture pays only the verifying
 * loads: a program allocating in a loop (93% of sqlite3's captures under
 * the agent). Not tried while the thread rests (its stacks have not been
 * repeating). bi is a buffer whose header says its trail's top is the
 * walk's state (pc and sp; checked again against the trail itself).
 * Returns the frame count, or 0 to walk as usual (nothing was changed but
 * frames[] and *sum). */
static HT_NOINLINE int replay(trail_t *tr, int bi, const wstate_t *st, uintptr_t pc, uintptr_t sp,
                              uintptr_t bp, int max, void **frames, uint64_t *sum)
{
    const tbuf_t *T = &tr->b[bi];
    thead_t *H = &tr->h[bi];
    int base = H->base, top = base + H->len - 1;
    /* walk()'s join test, narrowed to a whole trail entered at its top,
     * and below speculate()'s step check. Both are copies: written as
     * helpers shared with those, the compiler stopped unrolling this loop
     * and spilled in it (+31 of a replayed 15-frame capture's ~465
     * instructions by callgrind); change them together */
    if (H->len <= 0 || T->sp[top] != sp || T->pc[top] != pc || H->gen != st->gen ||
        !(T->fl[base] & TF_END) || T->sval[base] != st->w.hi || T->sp[base] > st->w.hi || H->len >= max ||
        (T->bp[top] != bp && (T->fl[top] & TF_NEEDS_BP)))
        return 0;
    const uintptr_t *tsp = T->sp, *tpc = T->pc, *tsval = T->sval;
    const uint8_t *tsoff = T->soff, *tfl = T->fl;
    frames[0] = (void *)pc;
    /* Unlike speculate(), a changed rbp slot fails the replay only where
     * the rbp it gives is needed (TF_NEEDS_BP at the state it leads to):
     * every return address out to the end is verified, so the steps are
     * the trail's and so are the states that read rbp. (In code without
     * frame pointers rbp is just a register: 12% of sqlite3's captures
     * differed from a trail only in a saved rbp nothing reads.) A
     * speculation verifies part of a stack and walks on from there with
     * the trail's rbp, so the flags of the trail's outer states say
     * nothing about the walk's: it needs the whole check. */
#pragma GCC unroll 2
    for (int k = top, i = 1; k > base; k--, i++) {
        uintptr_t npc = tpc[k - 1], cfa = tsp[k - 1];
        if (*(const uintptr_t *)(cfa - 8) != HT_FRAME_ADDRESS(npc) ||
            ((tfl[k - 1] & TF_NEEDS_BP) && *(const uintptr_t *)(cfa - tsoff[k]) != tsval[k]))
            return 0;
        frames[i] = (void *)npc;
    }
    /* The outermost state is now the one whose step stopped the walk
     * that recorded it: the same pc in the same code generation, the same
     * sp, and the same rbp (TF_NEEDS_BP holds at a terminal state and
     * flows in until a step reloads rbp: either the join compared it or
     * the reload was verified), and the same stack bound (kept in its
     * sval). So the step stops again, without taking it. */
    /* frame p is state top - p: sum of mix(pc[x]) R^(top - x) */
    *sum = pow_at((uint64_t)top) * T->dsum[top + 1];
    H->used = ++tr->clock;
    return H->len;
}

enum { SLOW_STOP, SLOW_OK, SLOW_UNKNOWN };

/* Every register at the walk's state (st->pc, st->sp), where a complex
 * rule needs more than the pc, sp and rbp the walk carries from frame to
 * frame: stepped again with the full interpreter from the last
 * interrupted frame's registers (st->sig), which keeps the callee-saved
 * registers each frame saved. Returns 1 with st->regs set, 0 if those
 * steps fail or do not reach the state within the walk's step limit. Only
 * walks through a signal frame (or from a ucontext) have such registers;
 * such a frame is rare, so the steps are not cached. */
static HT_NOINLINE int regs_again(wstate_t *st)
{
    ht_regs_t r = st->sig;
    for (int steps = 0, exact = 1; steps < MAX_STEPS; steps++, exact = 0) {
        if (!exact && r.r[HT_DW_RA] == st->pc && r.r[HT_DW_RSP] == st->sp) {
            st->regs = r;
            return 1;
        }
        if (r.r[HT_DW_RSP] > st->sp || !step_full(&st->w, &r, exact))
            return 0;
    }
    return 0;
}

/* A step the fast table cannot take (from st->pc/sp/bp, to them): rules
 * without fast form, signal frames, interrupted instructions, JIT code,
 * code without CFI. Tags the frame just emitted (frames[last], -1 if
 * skipped) if it is JIT code.
 * Returns SLOW_OK, SLOW_STOP, or SLOW_UNKNOWN: stopped in code nobody
 * vouches for (the caller marks the end). */
static HT_NOINLINE int slow_step(wstate_t *st, void **frames, int last)
{
    uint64_t *sum = &st->sum;
    uintptr_t *pc = &st->pc, *sp = &st->sp, *bp = &st->bp;
    ht_regs_t *r = &st->regs;
    int unknown_code = 0, fp_only = 0, jit = 0, nomodule = 0;
    st->step_e = 0;
    st->outermost = 0;
    if (!st->exact) {
        rule_t ru = rule_lookup(*pc, st->gen);
        ht_jit_range_t j;
        if ((ru.s.how & HOW_JIT) && last >= 0 && tag_jit(&st->w, frames, last, *pc - 1, sum, &j)) {
            jit = 1;
            fp_only = ru.s.kind == K_NOCFI && !j.eh;  /* registered without CFI */
        }
        /* module code no FDE covers (the rule says so for this code
         * generation): node's V8 builtins, hand-written assembly. step_full
         * would find the module and search its FDEs again, every time:
         * 175,000 of node's 244,000 FDE searches in tests/jit/deflate.js */
        if (ru.s.kind == K_NOCFI && !(ru.s.how & HOW_JIT))
            fp_only = 1;
        unknown_code = ru.s.kind == K_NOMODULE;
        nomodule = unknown_code && !(ru.s.how & HOW_REFUSED);
        if (ru.s.kind == K_NORMAL) {
            if (!step_compact(&st->w, ru, pc, sp, bp) || !*pc)
                return SLOW_STOP;
            /* its fast form, for the trail: a JIT frame's, and a frame's
             * whose fast-table entry another return address holds (the
             * table is direct-mapped: two return addresses of one stack
             * sharing an entry ended every record there, so the stack was
             * never replayed -- allocbench 2x slower in a build where the
             * malloc hook's return address shared one with
             * __libc_start_main's) */
            uint64_t e = !(ru.s.how & HOW_JIT) || jit ? fast_form(ru) : 0;
            if (e && rd_stack(&st->w, *sp - 8 - 8 * ((e >> 16) & 0xf), &st->step_sval))
                st->step_e = e;
            return SLOW_OK;
        }
        if (ru.s.kind == K_OUTERMOST || ru.s.kind == K_BAD) {
            st->outermost = ru.s.kind == K_OUTERMOST;
            return SLOW_STOP;
        }
        if (ru.s.kind == K_SIGNAL) {
            /* the handler's CFA is the ucontext the kernel pushed; the
             * interrupted frame may be on another stack */
            int ok;
            if (!regs_from_ucontext(*sp, r, rd_stack, &st->w) || !(ok = set_stack(&st->w, r->r[HT_DW_RSP])))
                return SLOW_STOP;
            st->sig = *r;
            st->has_sig = 1;
            if (ok != 2)
                st->fast = NULL;
            *pc = r->r[HT_DW_RA];
            *sp = r->r[HT_DW_RSP];
            *bp = r->r[HT_DW_RBP];
            st->exact = 1;
            return *pc ? SLOW_OK : SLOW_STOP;
        }
        /* K_COMPLEX, K_NOCFI, K_NOMODULE: only rsp, rbp, pc are known,
         * unless the registers can be derived again from an interrupted
         * frame further in (a CFA in rbx: ld.so's lazy-binding trampoline) */
        if (ru.s.kind != K_COMPLEX || !st->has_sig || !regs_again(st))
            r->valid = (1u << HT_DW_RA) | (1u << HT_DW_RSP) | (1u << HT_DW_RBP);
    } else if (last >= 0) {
        /* an interrupted instruction: the pc itself, not pc - 1 */
        ht_module_t m;
        int tok = ht__module_enter(), found = tok && ht__module_find(*pc, &m) == 0;
        ht__module_leave(tok);
        if (!found)
            unknown_code = !tag_jit(&st->w, frames, last, *pc, sum, NULL);
        nomodule = tok && unknown_code;
    }
    /* an ELF object the loader does not know yet (dlopen relocating it
     * runs its IFUNC resolvers) is compiled code, seldom with frame
     * pointers: a frame-pointer step from a resolver that keeps no frame
     * took its caller's rbp and skipped _dl_relocate_object. Its CFI
     * cannot be found without a lookup that is not async-signal-safe:
     * stop, and say so. (tests/capture/ifunc.c) */
    if (nomodule && ht__jit_unloaded_elf(st->exact ? *pc : *pc - 1))
        return SLOW_UNKNOWN;
    r->r[HT_DW_RA] = *pc;
    r->r[HT_DW_RSP] = *sp;
    r->r[HT_DW_RBP] = *bp;
    /* code without CFI (JIT code registered without it, module code no
     * FDE covers, code in no module and not registered): a frame-pointer
     * step, as step_full would take after looking the pc up again in the
     * modules, their FDEs and the registry. (Code in no module: node's
     * unregistered V8 code, 58,000 frames in tests/jit/deflate.js, each
     * looked up twice.) Not where the modules could not be read (a
     * dlclose under way): step_full stops there, as it did before. */
    if (!(fp_only || nomodule ? step_fp(&st->w, r) : step_full(&st->w, r, st->exact)))
        return unknown_code ? SLOW_UNKNOWN : SLOW_STOP;
    *pc = r->r[HT_DW_RA];
    *sp = r->r[HT_DW_RSP];
    *bp = (r->valid & (1u << HT_DW_RBP)) ? r->r[HT_DW_RBP] : 0;
    /* such a step is the standard frame-pointer rule: the saved rbp it
     * reloaded is at the new CFA - 16 (so a trail can go on through it) */
    if (fp_only && rd_stack(&st->w, *sp - 16, &st->step_sval))
        st->step_e = FAST_FPSTD;
    st->exact = 0;
    return *pc ? SLOW_OK : SLOW_STOP;
}

/* Keeps this walk's states as a trail. */
static HT_NOINLINE void trail_update(wstate_t *st)
{
    trail_t *tr = st->tr;
    uint32_t now = ++tr->clock;
    if (st->spec_j >= 0)
        tr->h[st->ti].used = now;   /* the joined trail paid: keep it */
    if (!st->ri && !st->spec_rec)
        return;                 /* recorded nothing (resting) */
    if (st->gain >= 2 && st->gain >= st->ri) {
        trail_paid(tr);
    } else if (++tr->useless >= TRAIL_USELESS) {
        tr->useless = TRAIL_USELESS - 1;    /* one more miss rests again */
        tr->rest = tr->rest_len;
        if (tr->rest_len < TRAIL_REST_MAX)
            tr->rest_len = 2 * tr->rest_len + 1;
    }
    tbuf_t *R = &tr->b[tr->spare];
    thead_t *RH = &tr->h[tr->spare];
    if (st->spec_j >= 0 && st->spec_rec && !st->appended) {
        /* joined after consecutive fast steps, recorded nothing past the
         * join: the i new states go on top of T[0..j] */
        int j = st->spec_j, i = st->spec_i;
        tbuf_t *T = st->T;
        thead_t *TH = &tr->h[st->ti];
        /* one such walk in TRAIL_ADOPT_EVERY makes a trail of its own:
         * rewriting in place keeps the joined trail's outer states but
         * loses the variant it rewrites, and a thread whose walks all
         * rewrite in place never adopts, so never evicts what its
         * start-up left (python3 under the agent: one whole trail,
         * rewritten by every capture, beside seven start-up fragments;
         * 5,300 of 6.9 million captures replayed, 4.8 million now) */
        if (i <= TRAIL_INPLACE && TH->base + j + i < TRAIL_CAP && (now & (TRAIL_ADOPT_EVERY - 1)) != 0) {
            /* in place; outermost new state first, so TF_NEEDS_BP flows in */
            int at = TH->base + j + 1;
            mark_t m = { T->fl[at - 1] & TF_NEEDS_BP, T->rcnt[at], T->dsum[at] };
            for (int x = i - 1; x >= 0; x--, at++) {
                int from = TRAIL_CAP - 1 - x;
                T->sp[at] = R->sp[from];
                T->pc[at] = R->pc[from];
                T->bp[at] = R->bp[from];
                T->sval[at] = R->sval[from];
                mark_state(tr, st->ti, at, R->pc[from], R->sp[from], R->fl[from], &m);
            }
            TH->len = j + i + 1;
            set_top(tr, st->ti);
            return;
        }
        /* a path of its own: the record on top of a copy of T[0..j],
         * keeping the innermost TRAIL_CAP states */
        int keep = j + 1 > TRAIL_CAP - i ? TRAIL_CAP - i : j + 1;
        RH->base = TRAIL_CAP - i - keep;
        for (int x = 0; x < keep; x++)
            tcopy(R, RH->base + x, T, TH->base + j + 1 - keep + x);
        RH->len = i + keep;
        adopt_record(tr, st->gen, now);
    } else if (st->ri > 0) {
        RH->base = TRAIL_CAP - st->ri;
        RH->len = st->ri;
        adopt_record(tr, st->gen, now);
    }
}

/* A resting walk's state, in and out of rest_steps; fp and steps count
 * its frame-pointer frames among the steps rest_steps took. */
typedef struct {
    uintptr_t pc, sp, bp;
    uint64_t sum;
    int fp, steps;
} pstate_t;

/* ht_hash_mix with the 128-bit product taken by one mul: in rest_steps gcc
 * stored __uint128_t's halves to the stack and read them back. */
static HT_ALWAYS_INLINE uint64_t mix_mul(uint64_t f)
{
    uint64_t lo = f + HT_HASH_K1, hi;
    __asm__("mulq %3" : "=a"(lo), "=d"(hi) : "0"(lo), "r"((uint64_t)HT_HASH_K2) : "cc");
    return lo ^ hi;
}

/* plain_walk's loop, over frames below POW_N: stores frames at f until
 * end, with R^n from pw. Returns where it stopped (f), and why in *why:
 * -1 end reached (that state's frame stored, its step not taken), 0 a
 * step it cannot take, 1 the stack's end.
 *
 * A function of its own, written so that its state fits in registers.
 * As plain_walk's body inlined into walk(), whose other loops keep much
 * alive, gcc kept pc, rbp, the frame count and the stack bound in memory:
 * 51 instructions a frame-pointer frame by callgrind, and the spilled rbp
 * on the chain of loads a walk is. Here 29: the frame and R^n are read
 * with one index, and the fast word's tag is checked with one xor. (It
 * repeats fast_step's arithmetic: written as calls of fast_step, with a
 * flag for the frame-pointer branch, it spilled the table, the tag and
 * the stack bound again, 40 instructions a frame.) A
 * varied frame-pointer stack (capture_bench's ticks column: TSC ticks a
 * capture at depth 10 / 30 / 100) went from 125 / 260 / 670 to 90 / 186
 * / 420 with the rests below that grow.
 *
 * Two versions. `fpfirst` takes a frame-pointer frame by a branch of its
 * own, so the CPU runs ahead on rbp while the rule load that confirms it
 * is in flight: about one dependent load a frame. Where frame-pointer
 * frames come mixed with others at random (code without frame pointers
 * has them wherever a function uses alloca or a VLA), that branch
 * mispredicts, and the other version, which computes every CFA from the
 * rule, is faster: capture_bench's varied stacks without frame pointers
 * (one frame in four on rbp), 230 / 545 / 1430 -> 159 / 327 / 960 ticks,
 * while with frame pointers the branch makes 84 / 368 of 150 / 1144.
 * plain_walk chooses by the thread's last resting walk (tr NULL: no
 * trail, this walk is nested in a signal handler's). */
static HT_ALWAYS_INLINE void **rest_body(const uint64_t *fast, uint64_t gtag, uintptr_t hi, pstate_t *ps,
                                        void **f, void **end, const uint64_t *pw, int *why, const int fpfirst)
{
    uintptr_t pc = ps->pc, sp = ps->sp, bp = ps->bp;
    uint64_t sum = ps->sum;
    int r, other = 0, fp = 0;
    /* one index for both cursors, counting up to 0 */
    long i = f - end, i0;
    f = end, pw += -i, i0 = i;
    for (;;) {
        f[i] = (void *)pc;
        sum += mix_mul(pc) * pw[i];
        if (ht_unlikely(++i >= 0)) {
            r = -1;
            break;
        }
        /* x: the word's rule bits when its tag is this pc's. The CFA is
         * computed from e itself: from x it waited for one more xor, a
         * cycle a frame on the chain of dependent loads that code without
         * frame pointers walks (varied depth-10 stacks took 291 TSC ticks
         * a capture against 275) */
        uint64_t e = fast[pc & ((1u << FAST_BITS) - 1)];
        uint64_t x = e ^ ((pc >> FAST_BITS) << FAST_TAGSHIFT) ^ gtag;
        uintptr_t cfa;
        if (fpfirst && ht_likely(x == FAST_FPSTD)) {
            /* a frame-pointer frame: its loads wait for rbp only, the rule
             * load's check runs beside them (as fast_step) */
            cfa = bp + 16;
            if (ht_unlikely(cfa < sp + 8 || cfa > hi)) {
                r = 1;
                break;
            }
            pc = *(const uintptr_t *)(cfa - 8);
            bp = *(const uintptr_t *)(cfa - 16);
        } else if (ht_likely(x < (1u << FAST_TAGSHIFT) && (x & 1))) {
            if (fpfirst)
                other++;
            else
                fp += x == FAST_FPSTD;
            cfa = ((e & 2) ? bp : sp) + (e & 0xfff8);
            if (ht_unlikely(cfa < sp + 8 || cfa > hi)) {
                r = 1;
                break;
            }
            uintptr_t sval = *(const uintptr_t *)(cfa - 8 - ((e >> 13) & 0x78));
            pc = *(const uintptr_t *)(cfa - 8);
            if (e & 4)
                bp = sval;
        } else {
            r = x == FAST_END;
            break;
        }
        if (ht_unlikely(!pc)) {
            r = 1;
            sp = cfa;
            break;
        }
        sp = cfa;
    }
    ps->pc = pc, ps->sp = sp, ps->bp = bp, ps->sum = sum;
    ps->steps = (int)(i - i0);
    ps->fp = fpfirst ? ps->steps - other : fp;
    *why = r;
    return f + i;
}

static HT_NOINLINE void **rest_steps_fp(const uint64_t *fast, uint64_t gtag, uintptr_t hi, pstate_t *ps,
                                        void **f, void **end, const uint64_t *pw, int *why)
{
    return rest_body(fast, gtag, hi, ps, f, end, pw, why, 1);
}

static HT_NOINLINE void **rest_steps_mixed(const uint64_t *fast, uint64_t gtag, uintptr_t hi, pstate_t *ps,
                                           void **f, void **end, const uint64_t *pw, int *why)
{
    return rest_body(fast, gtag, hi, ps, f, end, pw, why, 0);
}

/* The walk's loop for a walk that neither records nor joins (its thread
 * rests: stacks have not been repeating), fast steps only. Stores the
 * frame of each state it reaches; returns 1 when the walk is over (max
 * frames, the stack's end), 0 at a state whose step it cannot take (that
 * state's frame stored, pc, sp and rbp unchanged). Frames below POW_N go
 * through rest_steps, the rest through fast_step. Inlined into walk():
 * as a call of its own, python3's captures under the capture test agent
 * took 5-7% longer (and before rest_steps, replayed stacks 1.6x as long,
 * a layout effect we could not pin down). */
static HT_ALWAYS_INLINE int plain_walk(const uint64_t *fast, uint64_t gentag, uintptr_t hi, uintptr_t *pcp,
                                       uintptr_t *spp, uintptr_t *bpp, int *np, uint64_t *sump, void **frames,
                                       int max, trail_t *tr)
{
    uintptr_t pc = *pcp, sp = *spp, bp = *bpp, sval;
    uint64_t sum = *sump, e;
    int n = *np, over, lim = max < POW_N ? max : POW_N, pending = 0;
    if (n < lim) {
        int why;
        pstate_t ps = { pc, sp, bp, sum, 0, 0 };
        void **f = (tr && tr->mixed ? rest_steps_mixed : rest_steps_fp)(fast, gentag << FAST_TAGSHIFT, hi, &ps,
                                                                        frames + n, frames + lim, g_pow + n,
                                                                        &why);
        /* frame-pointer frames first while 3 of 4 frames are */
        if (tr && ps.steps >= 8)
            tr->mixed = ps.fp * 4 < ps.steps * 3;
        pc = ps.pc, sp = ps.sp, bp = ps.bp, sum = ps.sum, n = (int)(f - frames);
        if (why >= 0 || n >= max) {
            over = why >= 0 ? why : 1;
            goto out;
        }
        pending = 1;            /* the last state's frame stored, its step not taken */
    }
    /* POW_N frames stored, more wanted */
    for (;; pending = 0) {
        if (!pending) {
            frames[n] = (void *)pc;
            sum += ht_hash_mix(pc) * pow_at((uint64_t)n);
            if (++n >= max) {
                over = 1;
                break;
            }
        }
        int fs = fast_step(fast, gentag, hi, &pc, &sp, &bp, &e, &sval);
        if (ht_likely(fs == FS_OK)) {
            if (ht_likely(pc != 0))
                continue;
            over = 1;
            break;
        }
        over = fs == FS_STOP;
        break;
    }
out:
    *pcp = pc, *spp = sp, *bpp = bp, *np = n, *sump = sum;
    return over;
}

/* Walks from the frame at pc, sp, rbp; see ht_capture. r is NULL, or the
 * interrupted frame's every register (ucontext): then pc is an
 * interrupted instruction, not a return address. (ht_capture passes the
 * three values, not a register set it would have to build: with the stack
 * bounds' check inlined, 21 of a replayed 15-frame capture's 485
 * instructions.) Inlined into its two callers, so each is compiled for its
 * own `r` (NULL from ht_capture: every `exact` test folds away): a
 * replayed 15-frame capture 478 -> 466 instructions and 4-5% faster
 * (capture loop, 15 paired runs), for 5 KB more code. */
static HT_ALWAYS_INLINE int walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, const ht_regs_t *r, int skip, int max,
                                 void **frames, uint64_t *hash, uint32_t **memo)
{
    wstate_t st;
    int n = 0, last = -1, exact = r != NULL;
    uint64_t sum = 0;
    uint64_t e;
    uintptr_t sval;

    if (max <= 0 || !pc)
        goto out;
    st.w.jc = NULL;             /* until the walk owns the thread's trail */
    st.w.tc = NULL;
    int stack = set_stack(&st.w, sp);
    if (!stack) {
        /* unknown stack: only the first frame is certain */
        if (skip == 0) {
            frames[n++] = (void *)pc;
            sum = ht_hash_term(pc, 0);
        }
        goto out;
    }
    if (ht_unlikely(ht_load_acquire(&g_tables_state) == 0))
        tables_init();
    st.fast = stack == 2 ? ht_load_relaxed(&g_fast) : NULL;
    st.gen = ht_load_acquire(&ht__code_gen);
    st.w.gen = st.gen;
    st.gentag = fast_gentag(st.gen);
    st.exact = exact;
    st.has_sig = exact;
    if (exact)
        st.regs = st.sig = *r;  /* an interrupted frame needs every register */
    else
        st.regs.valid = 0;

    /* skipped frames: stepped, not emitted, not recorded */
    for (int steps = 0; skip > 0; skip--) {
        if (++steps > MAX_STEPS)
            goto out;
        int fs = st.fast && !st.exact
                     ? fast_step(st.fast, st.gentag, st.w.hi, &pc, &sp, &bp, &e, &sval) : FS_SLOW;
        if (fs == FS_SLOW) {
            st.pc = pc, st.sp = sp, st.bp = bp;
            if (slow_step(&st, frames, -1) != SLOW_OK)
                goto out;
            pc = st.pc, sp = st.sp, bp = st.bp;
        }
        if (fs == FS_STOP)
            goto out;
        if (!pc)
            goto out;
    }

    trail_t *tr = trail_acquire();
    st.rec = 0;
    if (tr) {
        st.rec = 1;
        if (tr->rest > 0) {
            tr->rest--;
            st.rec = 0;
        }
        /* a whole trail from its top? Found through top_sp and top_pc
         * (five lines for all), not the join table: that keeps one state
         * per sp, the last marked, and sqlite3's stacks pass through the
         * sp of one another's tops so often that replays found that way
         * were 204,000 of its 655,000 captures, against 608,000 now */
        if (st.rec && st.fast && !st.exact) {
            /* the scan starts at the hinted buffer and wraps round */
            uint8_t *hint = &tr->top_hint[((sp ^ pc) * 0x9e3779b97f4a7c15ull) >> (64 - TOP_HINT_BITS)];
            int b = *hint <= TRAILS ? *hint : 0;
            for (int i = 0; i <= TRAILS; i++, b = b == TRAILS ? 0 : b + 1) {
                if (tr->top_sp[b] != sp || tr->top_pc[b] != pc)
                    continue;
                n = replay(tr, b, &st, pc, sp, bp, max, frames, &sum);
                if (n > 0) {
                    /* stacks repeat (without this, a thread whose rests
                     * had grown recorded one walk, counted it useless as
                     * it had joined nothing, and rested again for up to
                     * 255 captures of the very stack it had just
                     * recorded). useless is 0 whenever rest_len is short:
                     * a thread that replays all the time writes nothing */
                    if (ht_unlikely(tr->useless))
                        trail_paid(tr);
                    *hint = (uint8_t)b;
                    if (memo)
                        *memo = &tr->h[b].memo;     /* held: ht__capture_release() */
                    else
                        trail_release();
                    goto out;
                }
            }
        }
        st.w.jc = tr->jc;
        st.w.tc = tr->tc;
    }
    /* a resting walk that needs no slow step ends here, before the set-up
     * of everything a recording walk keeps */
    int resumed = 0;
    if (tr && !st.rec && st.fast && !st.exact) {
        if (plain_walk(st.fast, st.gentag, st.w.hi, &pc, &sp, &bp, &n, &sum, frames, max, tr)) {
            ++tr->clock;        /* all trail_update does for a walk that kept nothing */
            trail_release();
            goto out;
        }
        resumed = 1;            /* its slow step below */
    }
    st.tr = tr;
    st.R = tr ? &tr->b[tr->spare] : NULL;
    st.ri = 0;
    st.spec_j = -1;
    st.spec_k = st.spec_i = st.spec_rec = 0;
    st.gain = 0;
    st.appended = 0;
    st.join_bp = 0;
    st.T = NULL;
    st.ti = 0;
    st.tb = 0;
    /* fast and hi change only where a slow step crossed a signal frame
     * onto another stack (below) */
    const uint64_t *fast = st.fast;
    const uint64_t gentag = st.gentag;
    uintptr_t hi = st.w.hi;
    /* a resting walk neither records nor joins: the next recording walk
     * tries the joins that tell whether stacks repeat again */
    const uint16_t *join = tr && fast && !exact && st.rec ? tr->join : NULL;

    for (int steps = 0; steps < MAX_STEPS; steps++) {
        uintptr_t opc, osp, obp;    /* the state before a step */
        if (!join && !st.rec && fast && !st.exact) {
            int over = !resumed && plain_walk(fast, gentag, hi, &pc, &sp, &bp, &n, &sum, frames, max, tr);
            resumed = 0;
            if (over)
                goto done;
            last = n - 1;
            opc = pc, osp = sp, obp = bp;
            goto slow;
        }
        frames[n] = (void *)pc;
        /* R^n from a table: a running product would be a chain of
         * multiplications through the whole walk */
        sum += ht_hash_mix(pc) * pow_at((uint64_t)n);
        last = n;
        if (++n >= max)
            goto done;

        /* joined an earlier walk? verify the rest of it */
        if (join) {
            unsigned je = join[JOIN_SLOT(sp)];
            tbuf_t *J = &tr->b[je >> 8];
            const thead_t *JH = &tr->h[je >> 8];
            int at = (int)(je & 0xff);
            if (ht_unlikely(J->sp[at] == sp) && JH->len > 0 && at >= JH->base && at < JH->base + JH->len &&
                JH->gen == st.gen && J->pc[at] == pc && (J->bp[at] == bp || !(J->fl[at] & TF_NEEDS_BP)) &&
                J->sp[JH->base] <= hi && !st.exact) {
                /* a later join may follow where this one's verification
                 * fails (several trails share inner frames); the record
                 * must stay consecutive, so it takes the states this join
                 * verified first */
                if (st.spec_j >= 0 && st.rec && !st.appended)
                    append_verified(&st);
                st.appended = 0;
                st.T = J;
                st.ti = (int)(je >> 8);
                st.tb = JH->base;
                st.pc = pc, st.sp = sp, st.bp = bp, st.n = n, st.sum = sum;
                int more = speculate(&st, at - JH->base, frames, max);
                pc = st.pc, sp = st.sp, bp = st.bp, n = st.n, sum = st.sum;
                if (!more)
                    goto done;
                last = n - 1;
            }
        }

        opc = pc, osp = sp, obp = bp;
        int fs = fast && !st.exact ? fast_step(fast, gentag, hi, &pc, &sp, &bp, &e, &sval) : FS_SLOW;
        if (ht_likely(fs == FS_OK)) {
            if (st.rec) {
                if (ht_unlikely(st.spec_j >= 0 && !st.appended))
                    append_verified(&st);
                record(&st, opc, osp, obp, e, sval);
            }
            if (!pc)
                break;
            continue;
        }
        if (fs == FS_STOP) {
            if (st.rec) {
                /* the trail ends at this state, and so does the stack; a
                 * terminal state has no rbp slot: its sval keeps the stack
                 * bound the step was checked against (replay()) */
                record(&st, pc, sp, bp, 0, hi);
                if (st.rec)
                    st.R->fl[TRAIL_CAP - st.ri] |= TF_END;
            }
            break;
        }
    slow:
        st.pc = pc, st.sp = sp, st.bp = bp, st.sum = sum;
        int ss = slow_step(&st, frames, last);
        if (st.rec) {
            if (ss == SLOW_OK && st.step_e && last >= 0) {
                /* a step with a fast form (a JIT frame, or one the fast
                 * table missed): recorded like a fast step, with the frame
                 * it emitted (a JIT frame's is tagged) */
                if (ht_unlikely(st.spec_j >= 0 && !st.appended))
                    append_verified(&st);
                record(&st, (uintptr_t)frames[last], osp, obp, st.step_e, st.step_sval);
            } else if (ss == SLOW_STOP && st.outermost) {
                /* the stack's end, as a fast step's FS_STOP records it */
                record(&st, opc, osp, obp, 0, hi);
                if (st.rec)
                    st.R->fl[TRAIL_CAP - st.ri] |= TF_END;
            } else {
                record(&st, opc, osp, obp, 0, 0);   /* the trail ends at this state */
                st.rec = 0;
            }
        }
        pc = st.pc, sp = st.sp, bp = st.bp, sum = st.sum;
        /* a signal frame may have moved the walk to another stack (from a
         * sigaltstack handler to the interrupted code): bound the steps by
         * that stack, and take none that read below sp if its red zone is
         * not all readable. (Bounded by the handler's stack, which lies
         * below the main stack, every address above sp passed: a garbage
         * rbp made the walk fault.) */
        fast = st.fast;
        hi = st.w.hi;
        if (!fast)
            join = NULL;
        if (ss == SLOW_OK)
            continue;
        if (ss == SLOW_UNKNOWN) {
            /* code nobody vouches for, and no frame pointer to leave it by:
             * say so rather than end the stack silently */
            frames[n] = HT_FRAME_UNWIND_STOPPED;
            sum += ht_hash_mix((uintptr_t)HT_FRAME_UNWIND_STOPPED) * pow_at((uint64_t)n);
            n++;
        }
        break;
    }
done:
    if (st.tr) {
        if (st.ri || st.spec_rec || st.spec_j >= 0)
            trail_update(&st);
        else
            ++st.tr->clock;     /* all trail_update does for a walk that kept nothing */
        trail_release();
    }
out:
    if (hash)
        *hash = ht_hash_finish(sum, (uint64_t)n);
    return n;
}

/* Called by capture.S with the caller's pc, sp and rbp. */
HT_INTERNAL int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash,
                                 const uintptr_t *regs3, uint32_t **memo);

int ht__capture_regs(int skip, int max, void **frames, uint64_t *hash, const uintptr_t *regs3,
                     uint32_t **memo)
{
    if (memo)
        *memo = NULL;
    return walk(regs3[0], regs3[1], regs3[2], NULL, skip < 0 ? 0 : skip, max, frames, hash, memo);
}

void ht__capture_release(void) { trail_release(); }

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
    return walk(r.r[HT_DW_RA], r.r[HT_DW_RSP], r.r[HT_DW_RBP], &r, 0, max, frames, hash, NULL);
}
