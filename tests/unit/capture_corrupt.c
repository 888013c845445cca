/* capture_corrupt.c -- ht_capture on stacks and unwind tables that lie.
 *
 * Corrupt stacks must give what can be verified and never fault:
 *  - a garbage rbp under code with and without frame pointers: frames
 *    exactly equal to the same capture with a sane rbp;
 *  - an overwritten return address (0, a heap pointer, the middle of a
 *    function, a kernel address, a pointer into the stack): the frames
 *    inside the corrupted frame are exact, the walk stops without faulting;
 *  - a stack pointer pivoted onto junk (random words, self-pointers, real
 *    return addresses), and fake signal contexts pointing anywhere;
 *  - a handler on a sigaltstack whose interrupted frame has a garbage rbp
 *    under a frame-pointer caller: the walk moves to the main stack and
 *    must bound its reads by that stack, not the handler's;
 *  - a stack captured again whole (replayed from the thread's trail) with
 *    a return address or a saved rbp changed in between: seen, and the
 *    replayed frames and hash equal the walked ones;
 *  - a frame whose CFA is the end of its stack, and a saved rbp past it;
 *  - contract edges: max <= 0, skip beyond the stack, NULL hash.
 * And the CFI parser on mutated copies of a real .eh_frame: never a fault,
 * and the unmutated copy gives the same rows as the original. */
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ucontext.h>
#include "heaptrail.h"
#include "check.h"
#include "core/stackdb.h"
#include "platform/linux-x86_64/cfi.h"
#include "platform/linux-x86_64/unwind.h"

#define MAXF 128

/* call_with_rbp(fn, v): calls fn() with rbp = v; restores rbp (CFI says
 * where it saved it). call_on_stack(fn, top): calls fn() with rsp = top,
 * and deliberately describes its frame as if it had not switched stacks,
 * so unwinders walk into the junk above `top`. */
__asm__(".text\n"
        ".globl call_with_rbp\n.type call_with_rbp,@function\n"
        "call_with_rbp:\n"
        ".cfi_startproc\n"
        "push %rbp\n.cfi_adjust_cfa_offset 8\n.cfi_offset rbp, -16\n"
        "push %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_offset rbx, -24\n"
        "sub $8, %rsp\n.cfi_adjust_cfa_offset 8\n"       /* keep the call 16-aligned */
        "mov %rsi, %rbp\n"
        "call *%rdi\n"
        "add $8, %rsp\n.cfi_adjust_cfa_offset -8\n"
        "pop %rbx\n.cfi_adjust_cfa_offset -8\n"
        "pop %rbp\n.cfi_adjust_cfa_offset -8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size call_with_rbp, .-call_with_rbp\n"
        ".globl call_on_stack\n.type call_on_stack,@function\n"
        "call_on_stack:\n"
        ".cfi_startproc\n"
        "push %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_offset rbx, -16\n"
        "mov %rsp, %rbx\n"
        "mov %rsi, %rsp\n"
        "call *%rdi\n"
        "mov %rbx, %rsp\n"
        "pop %rbx\n.cfi_adjust_cfa_offset -8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size call_on_stack, .-call_on_stack\n");
void call_with_rbp(void (*fn)(void), uintptr_t rbp);
void call_on_stack(void (*fn)(void), uintptr_t top);

static void *g_frames[MAXF];
static int g_n;
static volatile int sink;

/* ---- garbage rbp ------------------------------------------------------ */

__attribute__((noinline, optimize("omit-frame-pointer"))) static void nofp_leaf(void)
{
    g_n = ht_capture(0, MAXF, g_frames, NULL);
    sink++;
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static void nofp_mid(void)
{
    nofp_leaf();
    sink++;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void fp_leaf(void)
{
    g_n = ht_capture(0, MAXF, g_frames, NULL);
    sink++;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void fp_mid(void)
{
    volatile char buf[32];
    buf[0] = 1;
    fp_leaf();
    sink += buf[0];
}

static void test_garbage_rbp(void)
{
    /* value 0 is replaced by a sane rbp: the reference capture */
    uintptr_t values[] = { 0, 0, 1, 0xdeadbeefdeadbeef, 0xffffffff81000000, 8, 0x7ffffffff000 };
    values[0] = (uintptr_t)__builtin_frame_address(0);
    void (*const fns[2])(void) = { nofp_mid, fp_mid };
    for (int f = 0; f < 2; f++) {
        void *clean[MAXF];
        int n = 0;
        for (size_t j = 0; j < sizeof values / sizeof values[0]; j++) {
            call_with_rbp(fns[f], values[j]);     /* one call site for all */
            if (j == 0) {
                n = g_n;
                memcpy(clean, g_frames, sizeof clean);
                CHECK(n >= 5);
                continue;
            }
            CHECK_EQ(g_n, n);
            CHECK(memcmp(g_frames, clean, (size_t)n * sizeof(void *)) == 0);
        }
    }
}

/* ---- through a signal frame onto another stack ----------------------- */

static volatile int *volatile g_fault_at;   /* a PROT_NONE page */
static volatile uintptr_t g_uc_rbp;         /* the interrupted rbp, 0: as it was */
static sigjmp_buf g_jb;

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    if (g_uc_rbp)
        uc->uc_mcontext.gregs[REG_RBP] = (greg_t)g_uc_rbp;
    g_n = ht_capture(0, MAXF, g_frames, NULL);
    siglongjmp(g_jb, 1);
}

/* faults without touching rbp, so the walk takes the rbp the handler left
 * in the context up to fp_faulter, whose CFA is rbp + 16 */
__attribute__((noinline, optimize("omit-frame-pointer"))) static void faulter(void)
{
    *g_fault_at = 1;
    sink++;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void fp_faulter(void)
{
    volatile char buf[32];
    buf[0] = 1;
    faulter();
    sink += buf[0];
}

/* the index of the return address into fp_faulter in g_frames, or -1 */
static int fp_faulter_at(void)
{
    for (int i = 0; i < g_n; i++)
        if ((uintptr_t)g_frames[i] > (uintptr_t)fp_faulter && (uintptr_t)g_frames[i] < (uintptr_t)fp_faulter + 256)
            return i;
    return -1;
}

static void test_altstack_switch(void)
{
    /* the handler's stack from the heap, below the main stack: a walk
     * bounded by the handler's stack would accept any address above it */
    stack_t ss = { .ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0 }, old_ss;
    CHECK(ss.ss_sp != NULL && sigaltstack(&ss, &old_ss) == 0);
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;     /* a fault inside the walk kills */
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    g_fault_at = page;
    /* rbp 0x1000: the CFA rbp + 16 is far below the main stack and
     * unmapped; 0x7ffffffff000: above it */
    uintptr_t values[] = { 0, 0x1000, 0x7ffffffff000, 0xdeadbeefdeadbeef };
    void *clean[MAXF];
    int clean_at = -1;
    for (size_t j = 0; j < sizeof values / sizeof values[0]; j++) {
        g_uc_rbp = values[j];
        g_n = 0;
        if (sigsetjmp(g_jb, 1) == 0)
            fp_faulter();
        int at = fp_faulter_at();
        if (j == 0) {
            clean_at = at;
            memcpy(clean, g_frames, sizeof clean);
            CHECK(at >= 2);             /* through the signal frame */
            CHECK(g_n > at + 1);        /* and on past fp_faulter */
            continue;
        }
        /* the frames up to fp_faulter's are verifiable; its CFA is not */
        CHECK_EQ(at, clean_at);
        CHECK(at >= 0 && memcmp(g_frames, clean, (size_t)(at + 1) * sizeof(void *)) == 0);
        CHECK_EQ(g_n, at + 1);
    }
    g_uc_rbp = 0;
    munmap(page, 4096);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    sigaltstack(&old_ss, NULL);
    free(ss.ss_sp);
}

/* ---- overwritten return address -------------------------------------- */

static uintptr_t g_bad_ra;

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void corrupted_frame(void)
{
    /* in asm: the compiler may assume the return-address slot is its own */
    uintptr_t saved;
    __asm__ volatile("mov 8(%%rbp), %0" : "=r"(saved));
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(g_bad_ra) : "memory");
    fp_mid();                   /* captures: fp_leaf, fp_mid, corrupted_frame, then bad */
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(saved) : "memory");
}

static void test_bad_return_address(void)
{
    static char heap_like[64];
    g_bad_ra = 0;
    corrupted_frame();
    /* the first three frames are inside corrupted_frame and its callees */
    void *inner[3];
    int n0 = g_n;
    memcpy(inner, g_frames, sizeof inner);
    CHECK_EQ(n0, 3);            /* a zero return address ends the stack */
    uintptr_t values[] = {
        (uintptr_t)heap_like, (uintptr_t)&test_garbage_rbp + 3, 0xffffffff81000000u,
        (uintptr_t)__builtin_frame_address(0) - 64, 0x10, (uintptr_t)-1,
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        g_bad_ra = values[i];
        corrupted_frame();
        CHECK(g_n >= 4 && g_n <= MAXF);
        CHECK(memcmp(g_frames, inner, sizeof inner) == 0);
        CHECK((uintptr_t)g_frames[3] == values[i]);
    }
}

/* ---- replayed stacks --------------------------------------------------
 * A capture whose first state starts a whole stack the thread walked
 * before verifies that stack instead of walking it (unwind.c replay()).
 * It must still see a return address or a saved rbp changed under it, and
 * the repeated stack's frames and hash must equal the walked one's. */

static uintptr_t g_bp_lie;      /* nonzero: replay_leaf's saved rbp while it captures */
static uint64_t g_hash;

/* Runs a replay test's rounds i = -1 .. rounds - 1: prepare(i), the
 * capturing chain, check(i). Every capture must come from one call site,
 * so that all share their outer frames: written out in each test, the
 * compiler copied the chain's call into the branches around it. Here the
 * calls are indirect, and noipa keeps them so. */
__attribute__((noipa)) static void replay_rounds(int rounds, void (*prepare)(int), void (*chain)(void),
                                                void (*check)(int))
{
    for (int i = -1; i < rounds; i++) {
        prepare(i);
        chain();
        check(i);
    }
}

/* A replay test's reference: its stack's first capture, which walks it.
 * Every capture's hash must equal ht_stack_hash of its frames. */
typedef struct {
    void *frames[MAXF];
    int n;
    uint64_t hash;
} ref_t;

static void ref_take(ref_t *r)
{
    CHECK_EQ(g_hash, ht_stack_hash(g_frames, g_n));
    r->n = g_n;
    r->hash = g_hash;
    memcpy(r->frames, g_frames, sizeof r->frames);
    CHECK(r->n >= 5 && r->n < MAXF);    /* three test frames, the test, main... */
}

/* the last capture equals the reference: all of it, or its first k frames */
static int ref_equal(const ref_t *r, int k)
{
    CHECK_EQ(g_hash, ht_stack_hash(g_frames, g_n));
    if (k < 0)
        return g_n == r->n && memcmp(g_frames, r->frames, (size_t)r->n * sizeof(void *)) == 0 &&
               g_hash == r->hash;
    return g_n == k && memcmp(g_frames, r->frames, (size_t)k * sizeof(void *)) == 0;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void replay_leaf(void)
{
    uintptr_t saved;
    __asm__ volatile("mov 0(%%rbp), %0" : "=r"(saved));
    if (g_bp_lie)
        __asm__ volatile("mov %0, 0(%%rbp)" ::"r"(g_bp_lie) : "memory");
    g_n = ht_capture(0, MAXF, g_frames, &g_hash);
    __asm__ volatile("mov %0, 0(%%rbp)" ::"r"(saved) : "memory");
}

/* alloca: its CFA is rbp + 16, the rbp replay_leaf saved */
__attribute__((noinline, optimize("omit-frame-pointer"))) static void replay_alloca(int k)
{
    volatile char *p = __builtin_alloca(16 + (k & 15));
    p[0] = 1;
    replay_leaf();
    sink += p[0];
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void replay_outer(void)
{
    uintptr_t saved;
    __asm__ volatile("mov 8(%%rbp), %0" : "=r"(saved));
    if (g_bad_ra)
        __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(g_bad_ra) : "memory");
    replay_alloca(sink);
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(saved) : "memory");
}

/* test_replay's rounds: clean captures, a bad return address, clean ones,
 * a lying saved rbp twice, a clean one; for each of three bad values */
enum { CLEAN, BAD_RA, BP_LIE };
static const unsigned char rr_round[] = { CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, BAD_RA,
                                          CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, BP_LIE,
                                          BP_LIE, CLEAN };
#define RR_N ((int)sizeof rr_round)
static uintptr_t rr_bad[3];
static ref_t rr_ref;
static int rr_clean, rr_same;

static int rr_what(int i) { return i < 0 ? CLEAN : rr_round[i % RR_N]; }

static void rr_prepare(int i)
{
    uintptr_t v = i < 0 ? 0 : rr_bad[i / RR_N];
    g_bad_ra = rr_what(i) == BAD_RA ? v : 0;
    g_bp_lie = rr_what(i) == BP_LIE ? (v == 0x10 ? 0x10 : 0x20) : 0;
}

static void rr_check(int i)
{
    g_bad_ra = g_bp_lie = 0;
    if (i < 0) {
        ref_take(&rr_ref);
    } else if (rr_what(i) == CLEAN) {
        rr_clean++;
        rr_same += ref_equal(&rr_ref, -1);
    } else if (rr_what(i) == BAD_RA) {
        /* replay_outer's frame and those inside it verify; the bad
         * address is the last frame */
        CHECK(g_n >= 4 && g_n < rr_ref.n);
        CHECK(memcmp(g_frames, rr_ref.frames, 3 * sizeof(void *)) == 0);
        CHECK_EQ((uintptr_t)g_frames[3], rr_bad[i / RR_N]);
    } else {
        /* replay_alloca's CFA is the saved rbp + 16, below sp: the
         * stack ends after its frame (and so does the trail the
         * repeated lie is captured from) */
        CHECK(ref_equal(&rr_ref, 2));
    }
}

static void test_replay(void)
{
    static char heap_like[64];
    rr_bad[0] = (uintptr_t)heap_like;
    rr_bad[1] = (uintptr_t)&test_replay + 5;
    rr_bad[2] = 0x10;
    replay_rounds(RR_N * 3, rr_prepare, replay_outer, rr_check);
    CHECK(rr_clean > 0);
    CHECK_EQ(rr_same, rr_clean);
}

/* A saved rbp in code without frame pointers is an ordinary register's
 * value, and a replay ignores it where nothing reads the rbp it restores:
 * rp_leaf and rp_mid keep rbp as a general register (saved by their
 * prologues, their only push), rp_mid's caller rp_alloca finds its CFA
 * from rbp. A lie in rp_leaf's slot is overwritten by rp_mid's step before
 * anything reads it: the stack is unchanged. A lie in rp_mid's slot is
 * what rp_alloca's CFA comes from: the stack ends after rp_alloca. */
static volatile uintptr_t g_lie_leaf, g_lie_mid, g_slot_ok = 1;
static uintptr_t *volatile g_slot, *volatile g_mid_slot;
static volatile uintptr_t g_saved, g_mid_saved;

/* points g_slot at the caller's saved-rbp slot (CFA - 16) and checks that
 * it holds the rbp the function was entered with */
#define RP_FIND_SLOT() \
    do { \
        uintptr_t in_; \
        __asm__ volatile("mov %%rbp, %0" : "=r"(in_)); \
        g_slot = (uintptr_t *)__builtin_dwarf_cfa() - 2; \
        __asm__ volatile("" ::: "rbp"); \
        if (*g_slot != in_) \
            g_slot_ok = 0; \
    } while (0)

__attribute__((noinline, optimize("omit-frame-pointer"))) static void rp_leaf(void)
{
    RP_FIND_SLOT();
    g_saved = *g_slot;
    if (g_lie_leaf)
        *g_slot = g_lie_leaf;
    g_n = ht_capture(0, MAXF, g_frames, &g_hash);
    *g_slot = g_saved;
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static void rp_mid(void)
{
    RP_FIND_SLOT();
    g_mid_slot = g_slot;        /* not locals: they would take callee-saved registers */
    g_mid_saved = *g_slot;
    if (g_lie_mid)
        *g_mid_slot = g_lie_mid;
    rp_leaf();
    *g_mid_slot = g_mid_saved;
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static void rp_alloca(int k)
{
    volatile char *p = __builtin_alloca(16 + (k & 15));
    p[0] = 1;
    rp_mid();
    sink += p[0];
}

static ref_t ru_ref;
static int ru_same, ru_ends, ru_rounds, ru_i;

static void ru_prepare(int i)
{
    int what = i < 0 ? 0 : i % 5;   /* 0-2 clean, 3 lie in rp_leaf's slot, 4 in rp_mid's */
    g_lie_leaf = what == 3 ? 0x10 + (uintptr_t)i : 0;
    g_lie_mid = what == 4 ? 0x10 + (uintptr_t)i : 0;
    ru_i = i;
}

static void ru_chain(void) { rp_alloca(ru_i); }

static void ru_check(int i)
{
    g_lie_leaf = g_lie_mid = 0;
    if (i < 0) {
        ref_take(&ru_ref);
        return;
    }
    ru_rounds++;
    if (i % 5 == 4)
        ru_ends += ref_equal(&ru_ref, 3);
    else
        ru_same += ref_equal(&ru_ref, -1);
}

static void test_replay_unread_rbp(void)
{
    replay_rounds(300, ru_prepare, ru_chain, ru_check);
    CHECK(g_slot_ok);           /* the test's own premise: rbp saved at CFA - 16 */
    CHECK_EQ(ru_rounds, 300);
    CHECK_EQ(ru_same, 240);
    CHECK_EQ(ru_ends, 60);
}

/* The agent's memo (ht__capture_memo): a replayed stack's trail keeps the
 * stack id the caller stored, until the trail changes. Four leaves called
 * from one place take turns, in runs of three: the trail a run replays had
 * another leaf's frame on top before the run's first capture changed it
 * in place. Every few rounds a return address further out is changed too.
 * Every id the memo gives must be the stack database's id of the frames
 * captured. */
static uint32_t *g_memo;
static int g_pick;

#define MM_LEAF(k) \
    __attribute__((noinline)) static void mm_leaf##k(void) \
    { \
        g_n = ht__capture_memo(0, MAXF, g_frames, &g_hash, &g_memo); \
        __asm__ volatile(""); \
    }
MM_LEAF(0)
MM_LEAF(1)
MM_LEAF(2)
MM_LEAF(3)

__attribute__((noinline)) static void mm_mid(void)
{
    static void (*const leaf[])(void) = { mm_leaf0, mm_leaf1, mm_leaf2, mm_leaf3 };
    leaf[g_pick]();
    __asm__ volatile("");
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void mm_outer(void)
{
    uintptr_t saved;
    __asm__ volatile("mov 8(%%rbp), %0" : "=r"(saved));
    if (g_bad_ra)
        __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(g_bad_ra) : "memory");
    mm_mid();
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(saved) : "memory");
}

static int mm_hits, mm_wrong, mm_replayed;
static uintptr_t mm_bad;

static void mm_prepare(int i)
{
    int r = i < 0 ? 0 : i;
    g_pick = (r / 3) % 4;
    g_bad_ra = r % 23 == 22 ? mm_bad : 0;
}

static void mm_check(int i)
{
    (void)i;
    g_bad_ra = 0;
    uint32_t truth = ht__stackdb_intern(g_frames, g_n, g_hash);
    if (!g_memo)
        return;
    mm_replayed++;
    if (*g_memo) {
        mm_hits++;
        mm_wrong += *g_memo != truth;
    } else {
        *g_memo = truth;
    }
    ht__capture_release();
}

static void test_capture_memo(void)
{
    mm_bad = (uintptr_t)&test_capture_memo + 7;
    replay_rounds(2000, mm_prepare, mm_outer, mm_check);
    CHECK_EQ(mm_wrong, 0);
    CHECK(mm_replayed > 1000);   /* two of each run of three replay */
    CHECK(mm_hits > 500);
    /* every replay released its trail: later rounds replay again (a trail
     * left held would make every walk go without the thread's trails) */
    int before = mm_replayed;
    replay_rounds(8, mm_prepare, mm_outer, mm_check);
    CHECK(mm_replayed - before >= 4);
    CHECK_EQ(mm_wrong, 0);
}

/* ---- junk stacks ------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#define JUNK_WORDS 4096
#define ROOM_WORDS 16384        /* 128 KiB of real stack below the junk */
static uintptr_t *junk, *junk_map;

static void fill_junk(void)
{
    uintptr_t code[] = { (uintptr_t)nofp_mid + 9, (uintptr_t)fp_mid + 17, (uintptr_t)call_with_rbp + 7,
                         (uintptr_t)&raise + 20, (uintptr_t)&memcpy + 1, (uintptr_t)&ht_capture + 30 };
    for (int i = 0; i < JUNK_WORDS; i++) {
        switch (rnd() % 6) {
        case 0: junk[i] = rnd(); break;
        case 1: junk[i] = (uintptr_t)&junk[rnd() % JUNK_WORDS]; break;
        case 2: junk[i] = code[rnd() % 6] + rnd() % 64; break;
        case 3: junk[i] = 0; break;
        case 4: junk[i] = (uintptr_t)&junk[i + 2 < JUNK_WORDS ? i + 2 : i]; break;
        default: junk[i] = rnd() & 0xffff; break;
        }
    }
}

static void capture_on_junk(void)
{
    g_n = ht_capture(0, MAXF, g_frames, NULL);
}

static void test_junk_stacks(void)
{
    junk_map = mmap(NULL, (ROOM_WORDS + JUNK_WORDS) * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    CHECK(junk_map != MAP_FAILED);
    junk = junk_map + ROOM_WORDS;
    int max_seen = 0;
    for (int it = 0; it < 3000; it++) {
        fill_junk();
        /* the pivoted stack: capture_on_junk runs with rsp inside junk */
        uintptr_t top = (uintptr_t)&junk[64 + rnd() % 256] & ~(uintptr_t)15;
        call_on_stack(capture_on_junk, top);
        CHECK(g_n >= 2 && g_n <= MAXF);
        if (g_n > max_seen)
            max_seen = g_n;

        /* a fake signal context pointing into junk, code or nowhere */
        ucontext_t uc;
        memset(&uc, 0, sizeof uc);
        uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(rnd() % 4 == 0 ? rnd() : (uintptr_t)&junk[rnd() % JUNK_WORDS]);
        uc.uc_mcontext.gregs[REG_RBP] = (greg_t)(rnd() % 2 ? rnd() : (uintptr_t)&junk[rnd() % JUNK_WORDS]);
        uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(rnd() % 3 ? (uintptr_t)nofp_leaf + rnd() % 40 : rnd());
        void *f[MAXF];
        uint64_t h;
        int n = ht_capture_context(&uc, MAXF, f, &h);
        CHECK(n >= 1 && n <= MAXF);
        CHECK((uintptr_t)f[0] == (uintptr_t)uc.uc_mcontext.gregs[REG_RIP]);
        CHECK(h == ht_stack_hash(f, n));
    }
    fprintf(stderr, "junk stacks: longest walk %d frames\n", max_seen);
}

/* A frame whose CFA is the very end of its stack, and whose saved rbp
 * then points past it: the next step's CFA must be checked against the
 * stack's end although sp already stands on it (sp + 8 beyond the end
 * wrapped the check's subtraction, and the walk read the guard page). */
static uintptr_t g_ra_cwr;      /* the return address in call_with_rbp */
static uintptr_t g_ra_fp;       /* the return address in fp_mid */

static void capture_cwr(void)
{
    void *f[4];
    if (ht_capture(0, 4, f, NULL) >= 2)
        g_ra_cwr = (uintptr_t)f[1];
}

static void test_stack_end(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *m = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK(mprotect(m + 2 * pg, (size_t)pg, PROT_NONE) == 0);
    uintptr_t end = (uintptr_t)(m + 2 * pg);
    call_with_rbp(capture_cwr, (uintptr_t)__builtin_frame_address(0));
    fp_mid();                   /* fp_leaf's capture: frames[1] is in fp_mid */
    g_ra_fp = (uintptr_t)g_frames[1];
    CHECK(g_ra_cwr != 0 && g_ra_fp != 0);
    /* capture_on_junk runs at top; call_on_stack's CFI sends the walk to
     * top + 8 for its caller's return address (g_ra_cwr), whose CFA is
     * sp + 32 with rbp saved at CFA - 16: rbp = end - 16 there, and the
     * return address g_ra_fp (CFA = rbp + 16 = end). At end - 8 another
     * g_ra_fp, at end - 16 an rbp inside the guard page. */
    uintptr_t *w = (uintptr_t *)(end - 256);
    uintptr_t top = (uintptr_t)w;
    for (int i = 0; i < 32; i++)
        w[i] = 0;
    w[1] = g_ra_cwr;                             /* at top + 8 */
    uintptr_t cfa1 = top + 16 + 32;
    ((uintptr_t *)cfa1)[-2] = end - 16;          /* rbp */
    ((uintptr_t *)cfa1)[-1] = g_ra_fp;           /* return address */
    ((uintptr_t *)end)[-1] = g_ra_fp;
    ((uintptr_t *)end)[-2] = end + 64;           /* inside the guard page */
    for (int it = 0; it < 4; it++) {             /* cold tables, then fast steps */
        call_on_stack(capture_on_junk, top);
        CHECK(g_n >= 4 && g_n <= 6);
        CHECK((uintptr_t)g_frames[g_n - 1] == g_ra_fp);
    }
    munmap(m, (size_t)pg * 3);
}

static void test_contract_edges(void)
{
    void *f[8];
    uint64_t h = 1;
    CHECK_EQ(ht_capture(0, 0, f, &h), 0);
    CHECK(h == ht_stack_hash(f, 0));
    CHECK_EQ(ht_capture(0, -5, f, NULL), 0);
    CHECK_EQ(ht_capture(100000, 8, f, NULL), 0);
    CHECK_EQ(ht_capture(-3, 8, f, NULL), ht_capture(0, 8, f, NULL));
    CHECK_EQ(ht_capture_context(NULL, 8, f, &h), 0);
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)nofp_leaf;
    uc.uc_mcontext.gregs[REG_RSP] = 16;     /* unmapped: only the pc is certain */
    CHECK_EQ(ht_capture_context(&uc, 8, f, NULL), 1);
}

/* ---- the CFI parser on mutated tables --------------------------------- */

static uintptr_t fake_stack[64];

static int rd_fake(void *ctx, uintptr_t addr, uintptr_t *out)
{
    (void)ctx;
    if (addr < (uintptr_t)fake_stack || addr > (uintptr_t)&fake_stack[63])
        return 0;
    memcpy(out, (const void *)addr, sizeof *out);
    return 1;
}

static void test_cfi_mutations(void)
{
    ht_module_t m;
    CHECK_EQ(ht__module_find((uintptr_t)&test_cfi_mutations, &m), 0);
    CHECK(m.eh_hdr != 0);
    /* copy the readable segment holding .eh_frame_hdr and .eh_frame:
     * both are encoded relative to their own addresses, so the copy parses
     * the same, for pcs shifted by the copy's offset */
    size_t size = m.rd_hi - m.rd_lo;
    if (size > (8u << 20))
        size = 8u << 20;
    uint8_t *copy = malloc(size), *orig = (uint8_t *)m.rd_lo;
    CHECK(copy != NULL);
    ht_module_t c = m;
    intptr_t delta = (intptr_t)copy - (intptr_t)m.rd_lo;
    c.rd_lo = (uintptr_t)copy;
    c.rd_hi = (uintptr_t)copy + size;
    c.eh_hdr = m.eh_hdr + (uintptr_t)delta;

    uintptr_t pcs[] = { (uintptr_t)nofp_mid + 5, (uintptr_t)fp_mid + 12, (uintptr_t)test_junk_stacks + 40,
                        (uintptr_t)test_contract_edges + 100, (uintptr_t)test_bad_return_address + 20, (uintptr_t)fill_junk + 30 };
    memcpy(copy, orig, size);
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++) {
        ht_cfi_row_t a, b;
        int ra = ht__cfi_row(&m, pcs[i], &a);
        int rb = ht__cfi_row(&c, pcs[i] + (uintptr_t)delta, &b);
        CHECK_EQ(ra, HT_CFI_OK);
        CHECK_EQ(rb, ra);
        CHECK(a.cfa.how == b.cfa.how && a.cfa.reg == b.cfa.reg && a.cfa.off == b.cfa.off);
        CHECK(a.reg[HT_DW_RA].how == b.reg[HT_DW_RA].how && a.reg[HT_DW_RA].off == b.reg[HT_DW_RA].off);
    }

    int ok = 0, none = 0, bad = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(copy, orig, size);
        int flips = 1 + (int)(rnd() % 8);
        for (int k = 0; k < flips; k++) {
            /* mostly near the tables we parse */
            size_t at = (size_t)(rnd() % 2 ? (m.eh_hdr - m.rd_lo) + rnd() % 4096 : rnd() % size);
            if (at < size)
                copy[at] = (uint8_t)rnd();
        }
        uintptr_t pc = pcs[rnd() % (sizeof pcs / sizeof pcs[0])] + (uintptr_t)delta + rnd() % 32;
        ht_cfi_row_t row;
        int r = ht__cfi_row(&c, pc, &row);
        if (r == HT_CFI_OK) {
            ok++;
            ht_regs_t in, out;
            for (int i = 0; i < HT_DW_NREGS; i++)
                in.r[i] = (uintptr_t)&fake_stack[rnd() % 64];
            in.valid = (1u << HT_DW_NREGS) - 1;
            int outermost;
            (void)ht__cfi_apply(&row, &in, &out, rd_fake, NULL, &outermost);
        } else if (r == HT_CFI_NONE) {
            none++;
        } else {
            CHECK_EQ(r, HT_CFI_BAD);
            bad++;
        }
    }
    fprintf(stderr, "cfi mutations: %d rows, %d no FDE, %d malformed\n", ok, none, bad);
    CHECK(ok > 0 && bad > 0);
    free(copy);
}

int main(void)
{
    test_garbage_rbp();
    test_bad_return_address();
    test_altstack_switch();
    test_replay();
    test_replay_unread_rbp();
    test_capture_memo();
    test_junk_stacks();
    test_stack_end();
    test_contract_edges();
    test_cfi_mutations();
    return check_done();
}
