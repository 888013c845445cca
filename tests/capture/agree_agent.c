/* agree_agent.c -- an LD_PRELOAD test agent for real programs: at malloc,
 * calloc and realloc calls it captures the stack with ht_capture and with
 * libunwind's unw_backtrace from the same frame and compares them frame
 * for frame, and the hash against ht_stack_hash of the frames. At exit it
 * writes one line to $AGREE_OUT:
 *     stacks N agree A frames F stopped S
 * and the first few disagreements (with dladdr names) to stderr. S counts
 * the disagreements that are libunwind's stack and then our
 * HT_FRAME_UNWIND_STOPPED (code in no module and no registration that a
 * frame pointer could not leave: libunwind ends there silently).
 *
 * $AGREE_EVERY=k compares every k-th allocation (default 1); $AGREE_MAX
 * stops comparing after that many stacks (default 100000); $AGREE_SHOW
 * disagreements are described (default 3). A "%p" in
 * $AGREE_OUT is replaced by the process id, so that a program which forks
 * or runs others (make, gcc, git) leaves one file per process (its line
 * ends "prog NAME"); a fork child starts its counts at zero.
 * $AGREE_SIGNAL=us also compares from a SIGPROF handler every us
 * microseconds, through the signal frame into
 * whatever the thread was running (any instruction, not a call site); the
 * line then adds "signal N agree A stopped S skipped K" (K: the thread was
 * in this agent) and those disagreements are described at exit.
 * $AGREE_TIME=1 instead times ht_capture alone at every allocation and
 * reports the mean cost per capture and per frame (TSC ticks);
 * $AGREE_TIME=libunwind times unw_backtrace the same way.
 *
 * This is test code: the product's agent is src/agent. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include "heaptrail.h"

#define MAXF 256

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static __thread int in_hook;
static char boot[1 << 16];
static size_t boot_used;

static unsigned long every = 1, max_stacks = 100000, show = 3, calls;
static int timing;      /* 1: time ht_capture, 2: time unw_backtrace */
static unsigned long stacks, agree, frames_total, reported, stopped;
#define ADD(var, n) __atomic_add_fetch(&(var), (n), __ATOMIC_RELAXED)
/* Samples taken in the SIGPROF handler ($AGREE_SIGNAL): counted apart,
 * their first disagreements kept here and printed at exit (no stdio, no
 * dladdr in a handler). */
static unsigned long sig_stacks, sig_agree, sig_stopped, sig_skipped, sig_kept;
static struct { int n, m; void *ours[MAXF], *ref[MAXF + 1]; } sig_bad[4];
static unsigned long long cycles_total, captures, captured_frames;

/* a fork child reports its own stacks, not its parent's again */
static void forked(void)
{
    calls = stacks = agree = frames_total = reported = stopped = 0;
    sig_stacks = sig_agree = sig_stopped = sig_skipped = sig_kept = 0;
    cycles_total = captures = captured_frames = 0;
}

static void on_prof(int sig, siginfo_t *si, void *uc);

/* A timer sending the process SIGPROF every `usec` microseconds (of real
 * time: CPU-time timers fire once a scheduler tick at most). The kernel
 * gives it to the main thread unless that one already has it pending.
 * timer_create's timers, unlike setitimer's, end at exec: a program
 * exec'd before its agent set the handler would die of SIGPROF's default
 * action. */
static void start_prof(long usec)
{
    struct sigaction sa = { .sa_sigaction = on_prof, .sa_flags = SA_SIGINFO | SA_RESTART };
    struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGPROF };
    struct itimerspec it = { { usec / 1000000, usec % 1000000 * 1000 }, { usec / 1000000, usec % 1000000 * 1000 } };
    timer_t t;
    sigemptyset(&sa.sa_mask);
    if (usec <= 0 || sigaction(SIGPROF, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &ev, &t) != 0 ||
        timer_settime(t, 0, &it, NULL) != 0)
        fprintf(stderr, "agree_agent: no SIGPROF timer\n");
}

static void init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    in_hook = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    const char *e = getenv("AGREE_EVERY");
    if (e)
        every = strtoul(e, NULL, 10);
    if ((e = getenv("AGREE_MAX")))
        max_stacks = strtoul(e, NULL, 10);
    if ((e = getenv("AGREE_SHOW")))
        show = strtoul(e, NULL, 10);
    if ((e = getenv("AGREE_TIME")))
        timing = strcmp(e, "libunwind") == 0 ? 2 : 1;
    pthread_atfork(NULL, NULL, forked);
    if ((e = getenv("AGREE_SIGNAL")))
        start_prof(strtol(e, NULL, 10));
    in_hook = 0;
}

static void describe(const char *label, void **f, int n)
{
    fprintf(stderr, "  %s (%d):\n", label, n);
    for (int i = 0; i < n && i < 40; i++) {
        Dl_info di;
        const char *name = "?", *obj = "?";
        uintptr_t off = 0;
        if (dladdr((char *)f[i] - 1, &di)) {
            name = di.dli_sname ? di.dli_sname : "?";
            obj = di.dli_fname ? di.dli_fname : "?";
            off = (uintptr_t)f[i] - (uintptr_t)di.dli_fbase;
        }
        fprintf(stderr, "    #%-2d %p %s (%s+0x%lx)\n", i, f[i], name, obj, (unsigned long)off);
    }
}

/* A disagreement that is libunwind's stack, whole or cut short, then the
 * marker where ours stopped in code it could not leave exactly (JIT code
 * libunwind walked by frame pointers; a library dlopen is still
 * relocating, unknown to _dl_find_object: tests/capture/ifunc.c;
 * documented in include/heaptrail.h) */
static int stopped_marker(void **ours, int n, void **ref, int m, int ok)
{
    int marker = !ok && n > 0 && n <= m && ours[n - 1] == HT_FRAME_UNWIND_STOPPED;
    for (int i = 0; marker && i < n - 1; i++)
        marker = ours[i] == ref[i + 1];
    return marker;
}

static void compare_signal(void **ours, int n, void **ref, int m, int ok)
{
    ADD(sig_stacks, 1);
    ADD(sig_stopped, (unsigned long)stopped_marker(ours, n, ref, m, ok));
    if (ok) {
        ADD(sig_agree, 1);
        return;
    }
    unsigned long k = ADD(sig_kept, 1) - 1;
    if (k < sizeof sig_bad / sizeof sig_bad[0] && k < show) {
        sig_bad[k].n = n;
        sig_bad[k].m = m;
        memcpy(sig_bad[k].ours, ours, sizeof(void *) * (size_t)n);
        memcpy(sig_bad[k].ref, ref, sizeof(void *) * (size_t)m);
    }
}

/* Both unwinders from this frame: ours skips it (ours[0] = the return
 * address into the hook), libunwind's ref[0] is the return address into
 * this function, so ours[i] must equal ref[i + 1]. */
__attribute__((noinline)) static void compare_here(int sig)
{
    void *ours[MAXF], *ref[MAXF + 1];
    uint64_t h;
    int n = ht_capture(1, MAXF, ours, &h);
    int m = unw_backtrace(ref, MAXF + 1);
    /* the frames, and the hash of exactly them (a walk that verified part
     * of the stack against its trail adds that part's hash in one piece) */
    int ok = n == m - 1 && h == ht_stack_hash(ours, n);
    for (int i = 0; ok && i < n; i++)
        ok = ours[i] == ref[i + 1];
    if (sig) {
        compare_signal(ours, n, ref, m, ok);
        return;
    }
    /* the counters are shared by the program's threads */
    unsigned long at = ADD(stacks, 1);
    ADD(frames_total, (unsigned long)n);
    ADD(stopped, (unsigned long)stopped_marker(ours, n, ref, m, ok));
    if (ok) {
        ADD(agree, 1);
    } else if (ADD(reported, 1) <= show) {
        fprintf(stderr, "agree_agent: disagreement at stack %lu (pid %d)%s\n", at, (int)getpid(),
                h != ht_stack_hash(ours, n) ? " (hash)" : "");
        describe("ht_capture", ours, n);
        describe("unw_backtrace", ref + 1, m - 1);
    }
}

__attribute__((noinline)) static void time_here(void)
{
    void *f[MAXF];
    unsigned long long t0 = __rdtsc();
    int n = timing == 1 ? ht_capture(0, MAXF, f, NULL) : unw_backtrace(f, MAXF);
    cycles_total += __rdtsc() - t0;
    captures++;
    captured_frames += (unsigned long)n;
}

static void on_alloc(void)
{
    if (timing) {
        time_here();
        return;
    }
    if (stacks < max_stacks && ADD(calls, 1) % every == 0)
        compare_here(0);
}

/* SIGPROF: compare from wherever the thread was, through the signal
 * frame (skipped while the thread is in our own hook) */
static void on_prof(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    int e = errno;
    if (in_hook || sig_stacks >= max_stacks) {
        ADD(sig_skipped, 1);
    } else {
        in_hook = 1;
        compare_here(1);
        in_hook = 0;
    }
    errno = e;
}

void *malloc(size_t size)
{
    if (in_hook || !real_malloc) {
        if (!real_malloc && !in_hook)
            init();
        if (!real_malloc || in_hook) {
            if (real_malloc)
                return real_malloc(size);
            size_t at = (boot_used + 15) & ~(size_t)15;
            boot_used = at + size;
            return boot_used <= sizeof boot ? boot + at : NULL;
        }
    }
    in_hook = 1;
    on_alloc();
    in_hook = 0;
    return real_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    if (in_hook || !real_calloc) {
        if (!real_calloc && !in_hook)
            init();
        if (!real_calloc || in_hook) {
            if (real_calloc)
                return real_calloc(n, size);
            void *p = malloc(n * size);   /* the bootstrap arena is zeroed */
            return p;
        }
    }
    in_hook = 1;
    on_alloc();
    in_hook = 0;
    return real_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    if ((char *)p >= boot && (char *)p < boot + sizeof boot) {
        void *q = malloc(size);
        if (q && p)
            memcpy(q, p, size);
        return q;
    }
    if (in_hook || !real_realloc) {
        if (!real_realloc)
            init();
        return real_realloc(p, size);
    }
    in_hook = 1;
    on_alloc();
    in_hook = 0;
    return real_realloc(p, size);
}

void free(void *p)
{
    static void (*real_free)(void *);
    if ((char *)p >= boot && (char *)p < boot + sizeof boot)
        return;
    if (!real_free)
        real_free = dlsym(RTLD_NEXT, "free");
    real_free(p);
}

__attribute__((destructor)) static void report(void)
{
    in_hook = 1;
    const char *out = getenv("AGREE_OUT");
    char line[256];
    int len;
    if (timing)
        len = snprintf(line, sizeof line, "captures %llu frames %llu cycles_per_capture %.1f cycles_per_frame %.2f\n",
                       captures, captured_frames, captures ? (double)cycles_total / captures : 0.0,
                       captured_frames ? (double)cycles_total / captured_frames : 0.0);
    else if (!sig_stacks && !sig_skipped)
        len = snprintf(line, sizeof line, "stacks %lu agree %lu frames %lu stopped %lu\n", stacks, agree, frames_total,
                       stopped);
    else
        len = snprintf(line, sizeof line,
                       "stacks %lu agree %lu frames %lu stopped %lu signal %lu agree %lu stopped %lu skipped %lu\n",
                       stacks, agree, frames_total, stopped, sig_stacks, sig_agree, sig_stopped, sig_skipped);
    for (unsigned long k = 0; k < sig_kept && k < show && k < sizeof sig_bad / sizeof sig_bad[0]; k++) {
        fprintf(stderr, "agree_agent: disagreement in a SIGPROF handler (pid %d)\n", (int)getpid());
        describe("ht_capture", sig_bad[k].ours, sig_bad[k].n);
        describe("unw_backtrace", sig_bad[k].ref + 1, sig_bad[k].m - 1);
    }
    char path[4096];
    const char *pp = out ? strstr(out, "%p") : NULL;
    if (pp && snprintf(path, sizeof path, "%.*s%d%s", (int)(pp - out), out, (int)getpid(), pp + 2) < (int)sizeof path) {
        out = path;
        /* one file per process: say which program it was */
        if (len > 0 && (size_t)len < sizeof line)
            len += snprintf(line + len - 1, sizeof line - (size_t)len + 1, " prog %s\n", program_invocation_short_name) - 1;
    }
    if (out) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write(fd, line, (size_t)len) != len)
                fprintf(stderr, "agree_agent: short write to %s\n", out);
            close(fd);
        }
    } else {
        fputs(line, stderr);
    }
}
