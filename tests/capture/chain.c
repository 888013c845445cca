/* chain.c -- differential test of ht_capture() against libunwind's
 * unw_backtrace() on call chains of many shapes: recursion, VLAs, alloca,
 * tail calls, realigned stacks, calls across a shared library through the
 * PLT, a signal handler (also on a sigaltstack), asynchronous signals that
 * interrupt arbitrary instructions (ht_capture_context), and 8 threads at
 * once. Built once per compiler, optimisation level and frame-pointer
 * setting (see the Makefile); every captured stack must equal libunwind's
 * frame for frame.
 *
 * `chain gdb` instead runs one chain and prints ht_capture's frames at
 * oracle_point() for tests/capture/gdb_oracle.sh to compare with gdb. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "heaptrail.h"
#include "check.h"
#include "capture/chain.h"

/* past unwind.c's POW_N (1024): frames beyond it take another loop */
#define MAXF 1600

static volatile int sink;
static int compared, frames_compared, mismatches;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void print_stack(const char *label, void **f, int n)
{
    fprintf(stderr, "  %s (%d frames):\n", label, n);
    for (int i = 0; i < n; i++) {
        Dl_info di;
        const char *name = "?";
        if (dladdr((char *)f[i] - 1, &di) && di.dli_sname)
            name = di.dli_sname;
        fprintf(stderr, "    #%-3d %p %s\n", i, f[i], name);
    }
}

/* Compares our frames with libunwind's, where ref[off..] corresponds to
 * ours[0..]. */
static void compare(const char *what, void **ours, int n, void **ref, int m, int off)
{
    int ok = off >= 0 && n == m - off;
    for (int i = 0; ok && i < n; i++)
        ok = ours[i] == ref[off + i];
    pthread_mutex_lock(&report_lock);
    compared++;
    frames_compared += n;
    if (!ok) {
        mismatches++;
        if (mismatches <= 5) {
            fprintf(stderr, "MISMATCH in %s (offset %d)\n", what, off);
            print_stack("ht_capture", ours, n);
            print_stack("unw_backtrace", ref, m);
        }
    }
    pthread_mutex_unlock(&report_lock);
}

/* Captures with both unwinders from the same frame. unw_backtrace's first
 * frame is the return address into this function; ht_capture skips this
 * function, so ours[0] corresponds to ref[1]. */
__attribute__((noinline)) static void capture_pair(void **ours, int *n, uint64_t *h, void **ref,
                                                   int *m)
{
    *n = ht_capture(1, MAXF, ours, h);
    *m = unw_backtrace(ref, MAXF + 2);
}

/* ht_capture vs unw_backtrace from this point. Also checks the hash, skip
 * and max contracts on the same stack. */
__attribute__((noinline)) static void check_point(const char *what)
{
    void *ours[MAXF], *ref[MAXF + 2], *part[MAXF];
    uint64_t h = 0;
    int n, m;
    capture_pair(ours, &n, &h, ref, &m);
    compare(what, ours, n, ref, m, 1);
    n = ht_capture(1, MAXF, ours, &h);
    CHECK(h == ht_stack_hash(ours, n));
    /* skip = 3 drops exactly three frames */
    uint64_t h3;
    int k = ht_capture(4, MAXF, part, &h3);
    CHECK_EQ(k, n > 3 ? n - 3 : 0);
    CHECK(k <= 0 || memcmp(part, ours + 3, (size_t)k * sizeof(void *)) == 0);
    CHECK(h3 == ht_stack_hash(part, k));
    /* max = 2 keeps the two innermost */
    k = ht_capture(1, 2, part, NULL);
    CHECK_EQ(k, n < 2 ? n : 2);
    CHECK(k <= 0 || memcmp(part, ours, (size_t)k * sizeof(void *)) == 0);
    sink++;
}

/* ---- chain shapes ----------------------------------------------------- */

#include "capture/shapes.inc"

/* ---- signals ---------------------------------------------------------- */

static void on_usr1(int sig)
{
    check_point("signal handler");
}

__attribute__((noinline)) static int raise_in_chain(int d)
{
    if (d > 0)
        return raise_in_chain(d - 1) + 1;
    raise(SIGUSR1);
    return 0;
}

static volatile sig_atomic_t async_hits, async_in_vdso;

/* From an asynchronous signal: ht_capture through the signal frame, and
 * ht_capture_context from the interrupted instruction, both against
 * libunwind. Runs in the signal handler; the interrupted code never calls
 * libunwind itself, so this cannot deadlock it. */
static void on_alrm(int sig, siginfo_t *si, void *ucv)
{
    void *ours[MAXF], *ref[MAXF + 2], *ctx[MAXF];
    uint64_t h;
    int n, m;
    capture_pair(ours, &n, &h, ref, &m);
    compare("async signal (through the signal frame)", ours, n, ref, m, 1);
    int k = ht_capture_context(ucv, MAXF, ctx, NULL);
    /* ctx[0] is the interrupted pc: find it in libunwind's walk */
    int off = -1;
    for (int i = 0; i < m; i++)
        if (ref[i] == ctx[0]) {
            off = i;
            break;
        }
    compare("async signal (ht_capture_context)", ctx, k, ref, m, off);
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (k > 0 && vdso && (uintptr_t)ctx[0] >= vdso && (uintptr_t)ctx[0] < vdso + 0x4000)
        async_in_vdso++;
    async_hits++;
}

__attribute__((noinline)) static long busy_leaf(long x)
{
    for (int i = 0; i < 200; i++)
        x = x * 6364136223846793005L + 1442695040888963407L;
    return x;
}

__attribute__((noinline)) static long busy(int d, long x)
{
    if (d <= 0)
        return busy_leaf(x);
    long r = busy(d - 1, x + d);
    return r ^ x;
}

/* spends most of its time inside the vdso */
__attribute__((noinline)) static long in_vdso(int d)
{
    if (d > 0)
        return in_vdso(d - 1) + 1;
    struct timespec ts;
    long x = 0;
    for (int i = 0; i < 50; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x += ts.tv_nsec;
    }
    return x;
}

static void run_async(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_alrm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = { { 0, 200 }, { 0, 200 } };
    setitimer(ITIMER_PROF, &it, NULL);
    long x = 1;
    while (async_hits < 400)
        x += busy((int)(x & 7), x);
    /* then interrupt the vdso, whose frames only its own CFI describes */
    while (async_hits < 800)
        x += in_vdso((int)(x & 3));
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_PROF, &off, NULL);
    signal(SIGPROF, SIG_IGN);
    sink += (int)x;
    fprintf(stderr, "async signals: %d, %d of them inside the vdso\n", (int)async_hits, (int)async_in_vdso);
    CHECK(async_in_vdso >= 20);
}

/* ---- varied paths: resting walks ------------------------------------ */

/* Each level picks one of four frame layouts from a random path, so no
 * capture repeats its predecessor: the thread's trails stop recording and
 * its walks rest (unwind.c's plain_walk). The tall stacks that follow
 * are walked resting too: with plain_walk's step past POW_N frames
 * broken (a frame stored twice), every variant of this test failed. */
#define VARIED_LEAF() check_point("varied")
#include "capture/varied.inc"

static unsigned long path_of(unsigned long seed)
{
    return seed * 0x9e3779b97f4a7c15ul + 1;
}

/* recursion no optimiser turns into a loop (deep() becomes one at -O2) */
__attribute__((noinline)) static int tall(int d)
{
    if (d <= 0) {
        check_point("tall");
        return 0;
    }
    int r = tall(d - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}


/* ---- driver ----------------------------------------------------------- */

static void run_chains(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        ping(i % 9, i);
        with_alloca(16 + i % 40, i % 5);
        call_tailer(i % 4, i);
        realigned(i, 2, 3, 4, 5, 6, 7, 8);
        through_lib(i % 3);
        deep(40 + i % 3);
        for (int k = 0; k < 8; k++)
            varied(path_of((unsigned long)i * 8 + k), 10 + (i + k) % 25);
        if (i % 25 == 0)
            for (int k = 0; k < 4; k++) {
                varied(path_of((unsigned long)i + 1000 + k), 20);    /* rest, then */
                tall(1100 + k);     /* past POW_N (1024 frames) */
            }
    }
}

static void *thread_main(void *arg)
{
    run_chains(200);
    return arg;
}

/* For gdb_oracle.sh: gdb stops in oracle_stop(), called from
 * oracle_point() right after it printed what ht_capture saw there. gdb's
 * frame #2 is then ht_capture's frame #1 (the caller of oracle_point). */
__attribute__((noinline)) void oracle_stop(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void oracle_point(void)
{
    void *f[MAXF];
    int n = ht_capture(0, MAXF, f, NULL);
    for (int i = 0; i < n; i++)
        printf("HTFRAME %p\n", f[i]);
    fflush(stdout);
    oracle_stop();
    sink++;
}

static int gdb_leaf(int d, int x)
{
    oracle_point();
    return x;
}

/* a realigned frame (CFA expression with gcc) on the path gdb checks */
__attribute__((noinline)) static int gdb_realigned(int a, int b, int c, int d, int e, int f,
                                                   int g, int h)
{
    char buf[64] __attribute__((aligned(64)));
    memset(buf, a + h, sizeof buf);
    int r = chainlib_recurse(gdb_leaf, 3, b + c + d + e + f + g);
    return r + buf[1];
}

static int gdb_realigned_cb(int d, int x)
{
    return gdb_realigned(x, 2, 3, 4, 5, 6, 7, 8) + 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "gdb") == 0) {
        /* main -> libchain -> chain.c -> libchain (recursing) -> oracle */
        chainlib_call(gdb_realigned_cb, 2, 1);
        return 0;
    }
    run_chains(50);

    /* through a signal frame, on the thread stack and on a sigaltstack */
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 20; i++)
        raise_in_chain(i % 5);
    stack_t ss;
    ss.ss_sp = malloc(1 << 16);
    ss.ss_size = 1 << 16;
    ss.ss_flags = 0;
    CHECK(sigaltstack(&ss, NULL) == 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; i < 20; i++)
        raise_in_chain(i % 5);

    run_async();

    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, NULL) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);

    fprintf(stderr, "compared %d stacks (%d frames) with libunwind: %d mismatches\n",
            compared, frames_compared, mismatches);
    CHECK_EQ(mismatches, 0);
    CHECK(compared > 3000);
    return check_done();
}
