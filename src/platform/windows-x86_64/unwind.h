/* unwind.h -- internals of the windows-x86_64 unwinder shared between its
 * files: register sets, compact rules, the x64 unwind-code interpreter
 * (xdata.c), and the process/thread lifecycle (lifecycle.c).
 *
 * Everything declared here is async-signal-safe in the Windows sense: it
 * may run inside a malloc/HeapAlloc hook or a vectored exception handler,
 * never allocates from the process heap, and takes no lock of its own. */
#ifndef HT_WINDOWS_X86_64_UNWIND_H
#define HT_WINDOWS_X86_64_UNWIND_H

#include "../../core/util.h"
#include <windows.h>

/* x64 register numbers as UNWIND_CODE and CONTEXT order them. */
enum {
    HT_RAX = 0, HT_RCX, HT_RDX, HT_RBX, HT_RSP, HT_RBP, HT_RSI, HT_RDI,
    HT_R8, HT_R9, HT_R10, HT_R11, HT_R12, HT_R13, HT_R14, HT_R15,
    HT_NGPR = 16
};
/* The registers the Windows x64 ABI makes callee-saved (besides rsp). */
#define HT_NONVOL_MASK ((1u << HT_RBX) | (1u << HT_RBP) | (1u << HT_RSI) | (1u << HT_RDI) | \
                        (1u << HT_R12) | (1u << HT_R13) | (1u << HT_R14) | (1u << HT_R15))

/* A register set: values of the general registers, which of them are
 * known (bit per register number), and the pc. */
typedef struct ht_wregs_s {
    uintptr_t r[HT_NGPR];
    uintptr_t pc;
    uint32_t valid;
} ht_wregs_t;

/* A word of the current thread's TEB (gs points at it on x64): StackBase at
 * 0x08, StackLimit at 0x10, its own address at 0x30, LastErrorValue at
 * 0x68, TlsSlots at 0x1480. Inline assembly rather
 * than __readgsqword, which gcc 12 flags with a false -Warray-bounds. */
#define HT_TEB_STACK_BASE  0x08
#define HT_TEB_STACK_LIMIT 0x10
#define HT_TEB_SELF        0x30
#define HT_TEB_LAST_ERROR  0x68    /* a DWORD */
#define HT_TEB_TLS_SLOTS   0x1480
static HT_ALWAYS_INLINE uintptr_t ht__teb_word(uintptr_t off)
{
    uintptr_t v;
    __asm__("movq %%gs:(%1), %0" : "=r"(v) : "r"(off));
    return v;
}
static HT_ALWAYS_INLINE uint32_t ht__teb_dword(uintptr_t off)
{
    uint32_t v;
    __asm__ volatile("movl %%gs:(%1), %0" : "=r"(v) : "r"(off) : "memory");
    return v;
}

/* The readable stack of a walk: [lo, hi). */
typedef struct ht_bounds_s {
    uintptr_t lo, hi;
} ht_bounds_t;

static HT_ALWAYS_INLINE int ht__rd(const ht_bounds_t *b, uintptr_t addr, uintptr_t *out)
{
    if (addr < b->lo || addr > b->hi - sizeof(uintptr_t) || (addr & 7))
        return 0;
    *out = *(const uintptr_t *)addr;
    return 1;
}

/* ---- compact rules -----------------------------------------------------
 * The rule in force at a call site (a return address): the return address
 * is stored at base + ra_off, where base is rsp or rbp (rbp as the frame
 * register: RSP at the call is not fixed then, alloca); the caller's rsp is
 * that slot + 8; rbp is either unchanged or saved at slot + rbp_off.
 * Anything else (a machine frame, a frame register other than rbp, saves
 * relative to two different bases) is K_COMPLEX: the interpreter steps
 * that frame with the registers the walk knows. */
enum {
    HT_K_EMPTY = 0,
    HT_K_NORMAL,      /* the compact rule applies */
    HT_K_COMPLEX,     /* step with ht__xdata_step */
    HT_K_STOP,        /* malformed or unknown unwind data: end the trace */
    HT_K_NOENTRY      /* outside any image, no function entry: a checked
                         leaf or frame-pointer step (never cached) */
};
#define HT_RF_BASE_RBP  1   /* base is rbp, not rsp */
#define HT_RF_RBP_SAVED 2   /* rbp is restored from slot + rbp_off */
#define HT_RF_JIT       4   /* registered JIT code (never cached): tag the
                               frame with the walk's jit_serial */

typedef union ht_rule_u {
    struct {
        int32_t ra_off;
        int16_t rbp_off;
        uint8_t kind;
        uint8_t flags;
    } s;
    uint64_t u;
} ht_rule_t;

/* Where the unwind data of a code address comes from. */
typedef struct ht_fnent_s {
    uintptr_t base;                 /* image base (or dynamic table base) */
    const RUNTIME_FUNCTION *fn;     /* NULL: no entry, a leaf frame */
    uintptr_t image_end;            /* end of the image the data must lie
                                       in; 0 for dynamic (JIT) tables */
} ht_fnent_t;

/* The rule for returning from the frame whose return address is `ra`.
 * Reads only the unwind data of `e` (bounds-checked for images).
 * Never allocates. */
HT_INTERNAL ht_rule_t ht__xdata_rule(const ht_fnent_t *e, uintptr_t ra);

enum {
    HT_STEP_STOP = 0,
    HT_STEP_OK = 1,
    HT_STEP_NEED_FULL = 2,
    HT_STEP_STOP_NOENTRY = 3    /* outside images, no entry, no step into code */
};

/* Steps out of the frame at the call site r->pc with the documented
 * semantics of the unwind codes (prolog offsets, chained infos, saves
 * relative to the establisher frame, machine frames), every stack read
 * checked against *b. Updates *r (pc, rsp, restored registers, valid).
 * *exact_next is set when the new pc is an interrupted instruction (after a
 * machine frame) rather than a return address. Returns HT_STEP_OK,
 * HT_STEP_STOP (malformed data or a read outside the stack), or
 * HT_STEP_NEED_FULL when the frame needs a register r->valid lacks. */
HT_INTERNAL int ht__xdata_step(const ht_fnent_t *e, ht_wregs_t *r, const ht_bounds_t *b,
                               int *exact_next);

/* ---- JIT registry (jit.c) ------------------------------------------------
 * The serial of the ht_register_code() range holding pc, 0 if none.
 * Lock-free, never allocates. */
HT_INTERNAL uint32_t ht__jit_serial(uintptr_t pc);

/* The same for a frame whose pc is an interrupted instruction (looked up at
 * pc itself): in a prolog only the codes already executed are undone, in
 * an epilog its remaining instructions are emulated. Every read checked. */
HT_INTERNAL int ht__xdata_step_exact(const ht_fnent_t *e, ht_wregs_t *r, const ht_bounds_t *b,
                                     int *exact_next);

/* ---- lifecycle ----------------------------------------------------------
 * The process-wide code generation: bumped when a DLL is unloaded, so
 * rules cached for its addresses are never used again. 0 until the DLL
 * notification is registered: the caches are off then. */
HT_INTERNAL extern volatile uint32_t ht__code_gen;

/* Per-thread rule cache: 2-way set associative, 16-byte entries. */
#define HT_CACHE_SET_BITS 11
#define HT_CACHE_ENTRIES  (2u << HT_CACHE_SET_BITS)
typedef struct { uint64_t key, rule; } __attribute__((aligned(16))) ht_centry_t;

/* Per thread, next to the rules: 64 KB granules of address space known to
 * hold no loaded image (JIT code heaps), so that a JIT frame's lookup
 * skips RtlPcToFileHeader. Address space is handed out in 64 KB granules,
 * so a granule is either part of an image or not; and a stale entry only
 * keeps a rule out of the cache, never makes one wrong. */
#define HT_NOIMAGE_SLOTS 64
typedef struct ht_tcache_s {
    uint32_t gen;                   /* ht__code_gen the entries belong to */
    uint32_t pad[3];
    uint64_t noimage[HT_NOIMAGE_SLOTS];  /* granule number + 1, 0 empty */
    ht_centry_t e[HT_CACHE_ENTRIES];
} ht_tcache_t;

/* The calling thread's cache, created on first use; NULL when caches are
 * off, the thread is exiting, or this is a nested call during the cache's
 * creation. Emptied when a DLL was unloaded since the thread last used it. */
HT_INTERNAL ht_tcache_t *ht__thread_cache(void);

/* Process set-up (TLS slot, DLL notification). Idempotent, cheap after
 * the first call. */
HT_INTERNAL void ht__win_init(void);

#endif
