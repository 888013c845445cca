/* sigentry.c -- stacks through a signal frame, in the two places the
 * agree agent's SIGPROF sampling ($AGREE_SIGNAL) found hard in real
 * programs:
 *  - the pc at the first instruction of a function: the interrupted
 *    frame's rule is the one at its pc, not at pc - 1 as for a return
 *    address (libm's IFUNC resolvers, run by ld.so in dlopen);
 *  - further out, a frame whose CFA is rbx + k (ld.so's lazy-binding
 *    trampoline, 80 of ~100 disagreements in make, gcc, git clone, ...).
 *    The walk keeps only pc, sp and rbp from frame to frame; rbx there is
 *    the one an inner frame saved, so the walk derives it again from the
 *    registers the signal frame holds. It used to end the stack there.
 * The functions (sigentry.S) start with ud2; the SIGILL handler captures
 * through the signal frame, compares with libunwind and with the frames
 * it knows (the interrupted pc, then the return address into caller() at
 * once, or after the frames of sigentry_rbx_frame and clobber_rbx), and
 * resumes after the ud2. Each trap is taken many times, so later captures
 * go through cached rules and trails. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include "heaptrail.h"
#include "check.h"

void sigentry_after_gap(void);
void sigentry_after_push(void);
void sigentry_rbx_frame(void (*fn)(void));

#define MAXF 64
static void *ret_addr;          /* where the function caller() called returns to */
static int ret_depth;           /* frames from the interrupted one to it */
static int bad_ours, bad_libunwind, captures;

static void on_sigill(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    void *a[MAXF], *b[MAXF];
    uint64_t h;
    int n = ht_capture(0, MAXF, a, &h);
    int m = unw_backtrace(b, MAXF);
    captures++;
    /* the interrupted pc, then the return address it was called with */
    int i = 0;
    while (i < n && (uintptr_t)a[i] != pc)
        i++;
    if (i + ret_depth >= n || a[i + ret_depth] != ret_addr || h != ht_stack_hash(a, n))
        bad_ours++;
    /* frame 0 of each is its own call site here: compare from 1 */
    if (n != m || memcmp(a + 1, b + 1, (size_t)(n - 1) * sizeof *a) != 0)
        bad_libunwind++;
    if ((bad_ours || bad_libunwind) && captures - bad_ours - bad_libunwind < 2) {
        fprintf(stderr, "capture %d at %p (expected %p after it): ht %d frames, libunwind %d\n", captures,
                (void *)pc, ret_addr, n, m);
        for (int k = 0; k < n || k < m; k++)
            fprintf(stderr, "  %2d %p %p\n", k, k < n ? a[k] : NULL, k < m ? b[k] : NULL);
    }
    uc->uc_mcontext.gregs[REG_RIP] += 2;  /* past the ud2 */
}

/* saves rbx, and changes it, before it traps */
__attribute__((noinline)) static void clobber_rbx(void)
{
    __asm__ volatile("mov $0x5a5a5a5a, %%ebx" ::: "rbx");
    sigentry_after_gap();
    __asm__ volatile("" ::: "memory");  /* not a tail call */
}

__attribute__((noinline)) static void rbx_frame(void)
{
    sigentry_rbx_frame(clobber_rbx);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void caller(void (*fn)(void), int depth)
{
    ret_depth = depth;
    ret_addr = __builtin_return_address(0);     /* overwritten below */
    __asm__ volatile("lea 1f(%%rip), %%rax\n\tmov %%rax, %0\n\tcall *%1\n1:"
                     : "=m"(ret_addr) : "r"(fn) : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
                       "memory", "cc");
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigill;
    sa.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGILL, &sa, NULL) == 0);
    for (int k = 0; k < 300; k++) {
        if (k % 3 == 2)
            caller(rbx_frame, 4);   /* after_gap, clobber_rbx, sigentry_rbx_frame, rbx_frame */
        else
            caller(k % 3 ? sigentry_after_push : sigentry_after_gap, 1);
        if (k % 50 == 0) {
            caller(sigentry_after_gap, 1);
            caller(rbx_frame, 4);
        }
    }
    CHECK_EQ(captures, 312);
    CHECK_EQ(bad_ours, 0);
    CHECK_EQ(bad_libunwind, 0);
    return check_done();
}
