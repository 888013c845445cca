/* agent.c -- the agent's life: start-up (options, the trace file, crash
 * handlers, fork handlers, the control thread), the exit, exec and crash
 * snapshots, ht_snapshot(), dlclose and JIT-registry notifications.
 *
 * Options come from the environment (heaptrail run sets them):
 *   HEAPTRAIL_OUTPUT, HEAPTRAIL_OUTPUT_PID   trace file name (see writer.c)
 *   HEAPTRAIL_INTERVAL=S                     snapshot every S seconds
 *   HEAPTRAIL_FOLLOW_EXEC=1                  keep LD_PRELOAD for exec'd programs
 *   HEAPTRAIL_CONTROL=0                      no control socket/thread
 *   HEAPTRAIL_MAX_FRAMES=N                   stack depth (1..128, default 128)
 *   HEAPTRAIL_SAMPLE=BYTES                   sampling mode: a stack about every BYTES allocated (sample.c)
 *   HEAPTRAIL_SOLO=0                         no single-thread fast path (solo.c)
 *   HEAPTRAIL_COMPRESS=0                     stored blocks (writer.c)
 *   HEAPTRAIL_BENCH_MODE=hooks|capture|intern|nocapture  benchmarks only: cost split
 *
 * The control thread: `heaptrail snapshot PID` connects to the abstract
 * unix socket "\0heaptrail.PID" and asks for a snapshot; a thread of ours,
 * with every signal blocked, waits in poll() on it (and wakes for
 * --interval). A thread, not a signal, because a signal would interrupt the
 * program's system calls (EINTR from nanosleep, poll, ...) and could
 * collide with signals the program uses itself; the peer's uid is checked.
 *
 * The crash handler (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP; installed
 * only where the disposition is the default) writes a last snapshot, puts
 * the previous disposition back and lets the signal take its course. */
#include "agent.h"
#include "../format/trace.h"
#include "../platform/linux-x86_64/jit.h"
#include "../platform/linux-x86_64/unwind.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

ht_agent_t ht__agent = { .on = 1, .max_frames = HT_MAX_FRAMES };
ht_agent_drops_t ht__drops;

static struct {
    int started;
    int pid;
    int exit_done;
    int interval_ms;
    int filtered;               /* under a seccomp filter, as far as we know */
    int control;
    int follow_exec;
    int listen_fd;              /* the control socket, in the thread's own table if own_files */
    int own_files;              /* the control thread has a descriptor table of its own */
    int thread_up;
    int control_tid;            /* the control thread's, once it runs */
    int reach;                  /* compute reachability at exit */
    int forked;                 /* this process is a fork child */
    int ctl_quit, ctl_gone;     /* the control thread asked to end; it has */
    int detaching, detached;    /* heaptrail detach: under way; done (for good) */
    int released;               /* ... and the tables went back (give_back_tables) */
    void *ctl_stack;            /* the control thread's stack (CTL_STACK bytes) */
    ht_spinlock_t pause_lock;
    int pauses;                 /* set-id calls under way (the thread is paused) */
    int paused;                 /* the control thread was running before them */
    int ctl_deferred;           /* a fork child's: started at its first allocation or release */
    struct sigaction old[32];
    int hooked[32];
} A = { .listen_fd = -1 };

/* The signals whose default ends the process, where the agent writes a
 * last snapshot first: faults and abort (a crash), and those sent to end
 * it (a service stopped with SIGTERM, Ctrl-C, a closed pipe): without a
 * handler the process died with nothing written since its last snapshot
 * (a fork child: no trace at all). */
static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP,
                                     SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE };

/* Raised by a faulting instruction (si_code > 0), which re-executes on
 * return and takes the default; any other arrival is sent again. */
static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
}

/* A crash (a fault, abort, or a trap instruction: clang's
 * __builtin_trap and Chromium's CHECK are int3, which does not execute
 * again on return, so it is sent again), not a signal sent to end it */
static int is_crash(int sig)
{
    return is_fault(sig) || sig == SIGABRT || sig == SIGTRAP;
}

static int ht__strcmp(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return (unsigned char)*a - (unsigned char)*b;
}

static void set_clocks(void)
{
    struct timespec r;
    ht__agent.t0_ns = ht__mono_ns();
    ht__sys2(SYS_clock_gettime, CLOCK_REALTIME, &r);
    ht__agent.start_realtime_ns = (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
    ht__sys2(SYS_clock_gettime, CLOCK_REALTIME_COARSE, &r);
    ht__agent.start_coarse_ns = (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
}

/* "1", "0.5", "2.25" seconds -> ms; 0 when absent or malformed. */
static int parse_seconds_ms(const char *s)
{
    if (!s)
        return 0;
    uint64_t ms = 0, frac = 0, scale = 1000;
    for (; *s >= '0' && *s <= '9'; s++)
        if ((ms = ms * 10 + (uint64_t)(*s - '0')) > 86400000)
            return 0;
    ms *= 1000;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*s - '0') * scale;
            }
    if (*s)
        return 0;
    return (int)(ms + frac);
}

static void stop_control(int keep);
static void start_control(void);

/* How long a fork child must have lived for its exit to be checked */
#define YOUNG_CHILD_NS 1000000000ull
static int is_crash_handler(const struct sigaction *sa);

/* ---- exit and crash ---------------------------------------------------- */

/* The thread writing the last snapshot (0: none): an ending signal that
 * another thread takes waits for it before it ends the process */
static int g_exit_writer;
static void final_snapshot_write(int reason);

/* The interrupted context of the ending signal this thread handles (its
 * leak check reads the thread as it stood), or NULL */
static HT_TLS const void *t_signal_uc;

static void final_snapshot(int reason)
{
    if (ht_load_relaxed(&ht__sandboxed))
        return;                 /* its system calls may kill the program now */
    if ((int)ht__sys0(SYS_getpid) != A.pid)
        return;                 /* a vfork child sharing our memory */
    if (__atomic_exchange_n(&A.exit_done, 1, __ATOMIC_ACQ_REL)) {
        /* a detach writing its last snapshot (milliseconds; its leak
         * check is done before it takes exit_done): the process waits for
         * it rather than end with its trace cut short */
        struct timespec nap = { 0, 1000000 };
        for (int i = 0; i < 5000 && ht_load_acquire(&A.detaching); i++)
            ht__sys2(SYS_nanosleep, &nap, NULL);
        return;
    }
    ht_store_release(&g_exit_writer, ht__gettid());
    final_snapshot_write(reason);
    ht_store_release(&g_exit_writer, 0);
}

/* A program that ends with every descriptor its limit allows in use (one
 * leaking descriptors does) left the trace no descriptor to be written
 * through: its last snapshot was lost, and the reader said the trace was
 * cut short. For the writes and the leak check's reads, the soft limit is
 * raised by a few (up to the hard limit, which needs no privilege), and
 * put back after them (the program's atexit handlers, which run later,
 * see its own). Returns 1 if it was raised; *old is the limit before. */
static int spare_descriptors(struct rlimit *old)
{
    long fd = ht__sys4(SYS_openat, AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
    if (fd >= 0) {
        ht__sys1(SYS_close, fd);
        return 0;
    }
    if (fd != -EMFILE || ht__sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, old) != 0 ||
        old->rlim_cur >= old->rlim_max)
        return 0;
    struct rlimit more = *old;
    more.rlim_cur = old->rlim_max - old->rlim_cur > 16 ? old->rlim_cur + 16 : old->rlim_max;
    return ht__sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, &more, NULL) == 0;
}

/* A forked child that never allocated nor released anything and has no
 * trace yet: its heap is its parent's at the fork, which the parent's
 * trace holds. At its exit: no trace, no leak check (a shell's subshells:
 * 200 traces for `for i in $(seq 200); do x=$(echo $i); done`). */
static int silent_child(void)
{
    return A.forked && !ht_load_relaxed(&ht__agent.acted) && !ht__writer_path();
}

static void final_snapshot_write(int reason)
{
    if (reason == HT_SNAP_EXIT && silent_child())
        return;
    int g = ht__guard;
    /* a signal that ends the process (SIGTERM...) waits until the trace
     * is written: a pool worker terminated as it exited was cut off after
     * the file's header (in a handler every signal is blocked already) */
    sigset_t ending, old_mask;
    sigemptyset(&ending);
    for (size_t i = 0; i < HT_ARRAY_SIZE(crash_signals); i++)
        if (!is_crash(crash_signals[i]))
            sigaddset(&ending, crash_signals[i]);
    ht__sys4(SYS_rt_sigprocmask, SIG_BLOCK, &ending, &old_mask, 8);
    struct rlimit fds;
    int raised = spare_descriptors(&fds);
    /* after a leak check under way, if any (reach.c): waiting with the
     * guard down lets that check pause this thread instead of giving up
     * on it; it then finds the exit begun and writes nothing. An ending
     * signal (SIGTERM, Ctrl-C) gets the exit's check, as memcheck gives
     * it: a service is most often stopped so. Not a crash: the program's
     * memory, the agent's tables among it, may be what broke */
    int locked = (reason == HT_SNAP_EXIT || reason == HT_SNAP_SIGNAL) &&
                 ht__agent.on == HT_ON_FULL && A.reach && ht__reach_lock() == 0;
    ht__guard = 2;
    if (locked) {
        if (reason == HT_SNAP_SIGNAL && g == 0 && t_signal_uc)
            ht__reach_note_signal(t_signal_uc);
        /* a fork child within a second of its fork (its clock starts
         * there): no check. It would read the child's whole copy of the
         * parent's heap: a Python child forked beside 74 MB of objects
         * spent 141 ms in it, against 9 ms for the fork and exit alone */
        int young = A.forked && ht__now_ns() < YOUNG_CHILD_NS;
        ht__reach_compute(g != 0 ? HT_SCAN_EXIT_INSIDE : young ? HT_SCAN_EXIT_YOUNG_CHILD : HT_SCAN_EXIT);
        ht__snapshot_write(reason, HT_WCTX_CRASH, ht__reach_result());
        ht__reach_unlock();
    } else {
        ht__snapshot_write(reason, HT_WCTX_CRASH, NULL);
    }
    ht__trace_finish();
    if (raised)
        ht__sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, &fds, NULL);
    ht__sys4(SYS_rt_sigprocmask, SIG_SETMASK, &old_mask, NULL, 8);
    ht__guard = g;
}

/* exec: the image that calls it writes its final snapshot and END (its
 * trace would otherwise stop at the last flush). If exec fails, this
 * process goes on: its later snapshots go to a new file. */
void ht__agent_before_exec(void)
{
    /* only an image that has a trace file: a forked child about to exec
     * (fork + exec, the common way to start a program) has written
     * nothing of its own and leaves no file behind */
    if (A.started && ht__guard == 0 && ht__writer_path())
        final_snapshot(HT_SNAP_EXEC);
}

void ht__agent_exec_failed(void)
{
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht__guard != 0 || ht_load_acquire(&A.detached) ||
        (int)ht__sys0(SYS_getpid) != A.pid || !__atomic_load_n(&A.exit_done, __ATOMIC_ACQUIRE))
        return;
    ht__writer_reopen();
    __atomic_store_n(&A.exit_done, 0, __ATOMIC_RELEASE);
}

/* Whether thread tid has the calling thread's capabilities (0 if either
 * cannot be read, or tid is 0). */
static int same_caps(int tid)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct mine[2], its[2];
    if (tid <= 0 || ht__sys2(SYS_capget, &h, mine) != 0)
        return 0;
    h.pid = tid;
    h.version = _LINUX_CAPABILITY_VERSION_3;
    if (ht__sys2(SYS_capget, &h, its) != 0)
        return 0;
    return __builtin_memcmp(mine, its, sizeof mine) == 0;
}

/* The program is about to give up rights or change namespaces (hooks.c):
 * the trace file is opened (a forked child that has none yet creates it)
 * while it still may, and written later through that descriptor. A daemon
 * started as root drops to a user who cannot open the trace (0600, root's)
 * or create one in its directory, or chroots away from it: its trace, or
 * its workers', ended there.
 *
 * The control thread is a thread of the program's. A set-id call through
 * glibc changes every thread's credentials, the control thread's too;
 * should one thread's change fail while another's succeeds, glibc aborts
 * the process. Credentials and capabilities are per thread: setpriv keeps
 * its capabilities across its setresuid with PR_SET_KEEPCAPS, set in its
 * own thread, so the control thread lost them there, failed the setresgid
 * after, and setpriv died of SIGABRT. And unshare(CLONE_NEWUSER) and
 * setns refuse a process with more than one thread (EINVAL: `unshare -U`
 * failed). So the control thread ends before the call, and the calling
 * thread makes it anew after it (it takes that thread's credentials and
 * namespaces), when:
 * - the call needs the process alone (HT_CONFINE_ALONE), or reads how
 *   many threads it has (HT_CONFINE_COUNT: only the pause, no trace file
 *   opened or held, nothing flushed);
 * - the call changes the calling thread only (HT_CONFINE_SETID_THREAD);
 * - it is a set-id call and the two threads' capabilities differ (then it
 *   may fail in one and not the other).
 * Otherwise the control thread follows the change as every thread does: a
 * server that moves between users with seteuid at each request pays two
 * capget calls, not a thread. */
int ht__agent_before_confine(int kind)
{
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht__guard != 0 || ht_load_acquire(&A.detached) ||
        (int)ht__sys0(SYS_getpid) != A.pid)
        return 0;
    ht__guard = 2;
    if (kind != HT_CONFINE_COUNT)
        ht__writer_create();
    int counted = kind != HT_CONFINE_ROOT;
    if (counted) {
        ht__spin_lock(&A.pause_lock);
        if (A.pauses++ == 0) {
            A.paused = A.thread_up && (kind != HT_CONFINE_SETID ||
                                       !same_caps(ht_load_acquire(&A.control_tid)));
            if (A.paused)
                stop_control(1);
        }
        ht__spin_unlock(&A.pause_lock);
    }
    ht__guard = 0;
    return counted;
}

void ht__agent_after_confine(int kind)
{
    if (kind == HT_CONFINE_ROOT || !A.started || ht__guard != 0 || ht_load_acquire(&A.detached) ||
        (int)ht__sys0(SYS_getpid) != A.pid)
        return;
    ht__guard = 2;
    ht__spin_lock(&A.pause_lock);
    if (A.pauses > 0 && --A.pauses == 0 && A.paused && !ht_load_relaxed(&ht__sandboxed)) {
        A.paused = 0;
        start_control();
    }
    ht__spin_unlock(&A.pause_lock);
    ht__guard = 0;
}

/* The signal frame of the innermost handler this thread runs in, found
 * above the stack pointer `sp`: its ucontext, or NULL when the thread is
 * in no handler. The walk (ht_capture, which steps through signal frames)
 * names the handler's return address, the sigreturn trampoline, and the
 * interrupted instruction after it; the frame is the stack word holding
 * the one, followed by a ucontext whose saved instruction pointer is the
 * other, and the trampoline's code is `mov $15, %rax; syscall`. */
static const ucontext_t *handler_frame(uintptr_t sp)
{
    void *f[HT_MAX_FRAMES];
    uintptr_t lo, hi;
    int n = ht_capture(0, HT_MAX_FRAMES, f, NULL);
    if (n < 2 || ht__stack_range(sp, &lo, &hi) != 0)
        return NULL;
    static const unsigned char sigreturn[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
    size_t rip = offsetof(ucontext_t, uc_mcontext.gregs) + REG_RIP * sizeof(greg_t);
    /* each frame's return address lies above the last one found (the
     * agent's own frames lie below sp: not found, they move nothing) */
    uintptr_t a = (sp + 7) & ~(uintptr_t)7;
    for (int i = 0; i + 1 < n; i++) {
        for (uintptr_t b = a; b + 8 + rip + 8 <= hi; b += 8) {
            if (*(const uintptr_t *)b != (uintptr_t)f[i])
                continue;
            if (*(const uintptr_t *)(b + 8 + rip) == (uintptr_t)f[i + 1] &&
                __builtin_memcmp(f[i], sigreturn, sizeof sigreturn) == 0)
                return (const ucontext_t *)(b + 8);
            a = b + 8;
            break;
        }
    }
    return NULL;
}

/* The program raises signal `sig` (hooks.c's raise; lo and regs: the
 * caller's stack pointer and callee-saved registers). Where that ends the
 * process, the last snapshot is written first: the ending signal's
 * disposition is the default, which it is not while the agent's handler
 * is on it (that handler writes the snapshot). A program that handles the
 * signal itself often ends so, its handler putting the default back (or
 * SA_RESETHAND doing so) and raising the signal again: node does, on
 * SIGTERM and SIGINT, after it restores the terminal; a crash reporter
 * does, on SIGSEGV. In a handler the signal is blocked, and the raise
 * ends the process when the handler returns, unless the mask it returns
 * to (its signal frame's) blocks the signal too. A signal blocked outside
 * any handler is the program's to take (sigwait, signalfd): no snapshot.
 * kill_pid: -1 for raise, else kill's pid (hooks.c's kill): a kill of
 * this process is taken alike (Python ends so after an uncaught Ctrl-C,
 * bash after a signal it handled). (abort's SIGABRT is raised inside
 * libc, not through here: the agent's handler or the program's sees it.) */
void ht__agent_raise(int sig, int kill_pid, uintptr_t lo, const uintptr_t *regs)
{
    if (!A.started || sig <= 0 || sig >= 32 || ht_load_acquire(&A.detached) ||
        ht_load_relaxed(&A.exit_done))
        return;
    int ends = 0;
    for (size_t i = 0; i < HT_ARRAY_SIZE(crash_signals); i++)
        ends |= crash_signals[i] == sig;
    /* kill: to this process or its group. The signal goes to a thread
     * that does not block it, this one first: where this one does and is
     * in no handler, another thread, or nobody (a thread in sigwaitinfo
     * takes it), may get it: not known, so nothing is written */
    if (!ends || (kill_pid != -1 && kill_pid != 0 && kill_pid != (int)ht__sys0(SYS_getpid)))
        return;
    /* the raw call: hooks.c's sigaction would answer with the disposition
     * found before the agent's handler */
    struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } cur;
    uint64_t blocked;
    if (ht__sys4(SYS_rt_sigaction, sig, NULL, &cur, 8) != 0 || cur.handler != SIG_DFL ||
        ht__sys4(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &blocked, 8) != 0)
        return;
    const ucontext_t *uc = NULL;
    if ((blocked >> (sig - 1)) & 1) {
        uint64_t back;
        if (!(uc = handler_frame(lo)))
            return;
        __builtin_memcpy(&back, &uc->uc_sigmask, sizeof back);
        if ((back >> (sig - 1)) & 1)
            return;
    }
    /* the leak check reads this thread from the raise up: the handler's
     * frames, its signal frame (the interrupted registers) and the
     * interrupted code's stack above. A handler on an alternate stack:
     * from the interrupted context, as the agent's own handler does */
    uintptr_t slo, shi;
    uintptr_t isp = uc ? (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] : 0;
    if (uc && (ht__stack_range(lo, &slo, &shi) != 0 || isp < (uintptr_t)uc || isp >= shi))
        t_signal_uc = uc;
    else
        ht__reach_note_exit(lo, regs);
    final_snapshot(is_crash(sig) ? HT_SNAP_CRASH : HT_SNAP_SIGNAL);
    t_signal_uc = NULL;
}

void ht__agent_exit_now(void)
{
    if (A.started)
        final_snapshot(HT_SNAP_EXIT);
}

extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void agent_stop_late(void *arg)
{
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || silent_child())
        return;
    /* The first time, from agent_stop: once more, to come after the
     * blocks of exit handlers glibc frees when it leaves them (below) */
    if (arg) {
        int g = ht__guard;
        ht__guard = 2;
        int r = __cxa_atexit(agent_stop_late, NULL, NULL);
        ht__guard = g;
        if (r == 0)
            return;
    }
    /* JIT code announced since the control thread's last look, so frames
     * in it get their names (not from _exit: it may run in a handler) */
    int g = ht__guard;
    ht__guard = 2;
    ht__jitmaps_poll(1);
    ht__gdbjit_poll(1);
    ht__guard = g;
    final_snapshot(HT_SNAP_EXIT);
}

/* The loader runs libraries' destructors (fini_array) in _dl_fini, itself
 * the first exit handler registered and so the last to run, each library
 * before those it depends on. Nothing depends on the agent, so its
 * destructor comes early among them, and what later destructors free
 * (gnutls's and libtasn1's trees, a plugin's registry) would be counted
 * as leaked: cmake --version showed 184,451 bytes in 697 blocks where
 * memcheck, which looks after every destructor, sees 76,833 in 3. An
 * exit handler registered now, while exit runs the handlers, is run
 * after _dl_fini returns (glibc starts its list over when one is added):
 * the last snapshot then sees the heap every destructor left, as
 * memcheck does, and blocks only a destructor's cleared pointer held are
 * unreachable. Registered with no library handle, so that no
 * __cxa_finalize runs it early, and with the guard up, so that a list
 * block glibc might allocate is not the program's. Where it cannot be
 * registered (exit's handlers are done: a destructor not run by exit),
 * the snapshot is written now.
 * glibc puts a handler added late just above the newest one not yet run
 * or finalized, and frees a block of 32 handlers (1,040 bytes, beyond
 * the first, static one) only when the run reaches its end. _dl_fini is
 * not always the first handler: libraries' constructors register their
 * C++ static destructors before __libc_start_main registers _dl_fini,
 * and their blocks lie below it. Their handlers are finalized by _dl_fini
 * but their blocks were freed only after our snapshot, which counted
 * them still reachable where memcheck sees them freed (clang, whose
 * LLVM libraries register 3,100 destructors: 100,880 bytes in 97 blocks;
 * tests/libs/exitlists.c). So the handler, when it first runs (arg not
 * NULL), registers itself once more: the handlers left are then those
 * _dl_fini finalized, glibc puts it in the first block, and it runs after
 * the others are freed (one registered before _dl_fini without a library
 * handle and not yet run would still come after it, as before). */
__attribute__((destructor)) static void agent_stop(void)
{
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht_load_acquire(&A.detached))
        return;
    int g = ht__guard;
    ht__guard = 2;
    int r = __cxa_atexit(agent_stop_late, &A, NULL);
    ht__guard = g;
    if (r != 0)
        agent_stop_late(NULL);
}

/* ---- seccomp: would this filter spare the agent? ------------------------ */

/* The system calls the agent may make once a filter is on: writing its
 * trace (exit, ht_snapshot, the crash handler), the leak check at exit
 * (maps, pipes, listing and pausing threads, the descriptors and timers
 * whose kernel-held words are roots), the control thread, solo mode's switch,
 * a new stack's bounds (stack.c: PROCMAP_QUERY, refused: the maps text;
 * mincore).
 * process_vm_readv is not among them: under a filter the agent reads its
 * memory through a pipe instead (reach.c, gdbjit.c). */
static const int agent_calls[] = {
    SYS_read, SYS_write, SYS_open, SYS_openat, SYS_close, SYS_fstat, SYS_newfstatat, SYS_lseek,
    SYS_pread64, SYS_pwrite64, SYS_ftruncate, SYS_fcntl, SYS_getcwd, SYS_readlink, SYS_pipe2, SYS_getdents64,
    SYS_mmap, SYS_munmap, SYS_mprotect, SYS_madvise, SYS_getpid, SYS_gettid, SYS_tgkill, SYS_kill,
    SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_futex, SYS_sched_yield,
    SYS_nanosleep, SYS_clock_gettime, SYS_clock_nanosleep, SYS_poll, SYS_ppoll, SYS_accept4,
    SYS_membarrier, SYS_prlimit64, SYS_clone, SYS_wait4, SYS_exit, SYS_exit_group,
    SYS_ioctl, SYS_mincore, SYS_getppid, SYS_capget,
};

/* Runs a classic BPF seccomp program on (nr, x86-64) with zero arguments.
 * Returns its action (SECCOMP_RET_ACTION_FULL bits), or -1 when it reads
 * the arguments or the instruction pointer (then the answer depends on
 * what the call passes) or does something this does not know. */
static long run_filter(const struct sock_filter *f, unsigned n, int nr)
{
    uint32_t data[16] = { (uint32_t)nr, AUDIT_ARCH_X86_64 };
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
    for (unsigned pc = 0; pc < n; pc++) {
        const struct sock_filter *i = &f[pc];
        uint32_t k = i->k, src = BPF_SRC(i->code) == BPF_X ? x : k;
        switch (BPF_CLASS(i->code)) {
        case BPF_LD:
            if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
                if (k >= 8 || (k & 3))
                    return -1;      /* the instruction pointer or the arguments */
                a = data[k / 4];
            } else if (i->code == (BPF_LD | BPF_W | BPF_LEN)) {
                a = sizeof(struct seccomp_data);
            } else if (i->code == (BPF_LD | BPF_IMM)) {
                a = k;
            } else if (i->code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS) {
                a = mem[k];
            } else {
                return -1;
            }
            break;
        case BPF_LDX:
            if (i->code == (BPF_LDX | BPF_IMM))
                x = k;
            else if (i->code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS)
                x = mem[k];
            else if (i->code == (BPF_LDX | BPF_W | BPF_LEN))
                x = sizeof(struct seccomp_data);
            else
                return -1;
            break;
        case BPF_ST:
        case BPF_STX:
            if (k >= BPF_MEMWORDS)
                return -1;
            mem[k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
            break;
        case BPF_ALU:
            switch (BPF_OP(i->code)) {
            case BPF_ADD: a += src; break;
            case BPF_SUB: a -= src; break;
            case BPF_MUL: a *= src; break;
            case BPF_DIV: if (!src) return -1; a /= src; break;
            case BPF_MOD: if (!src) return -1; a %= src; break;
            case BPF_OR: a |= src; break;
            case BPF_AND: a &= src; break;
            case BPF_XOR: a ^= src; break;
            case BPF_LSH: a = src < 32 ? a << src : 0; break;
            case BPF_RSH: a = src < 32 ? a >> src : 0; break;
            case BPF_NEG: a = -a; break;
            default: return -1;
            }
            break;
        case BPF_JMP: {
            int t;
            switch (BPF_OP(i->code)) {
            case BPF_JA: pc += k; continue;
            case BPF_JEQ: t = a == src; break;
            case BPF_JGT: t = a > src; break;
            case BPF_JGE: t = a >= src; break;
            case BPF_JSET: t = (a & src) != 0; break;
            default: return -1;
            }
            pc += t ? i->jt : i->jf;
            break;
        }
        case BPF_RET:
            if (BPF_RVAL(i->code) == BPF_K)
                return (long)(k & SECCOMP_RET_ACTION_FULL);
            if (BPF_RVAL(i->code) == BPF_A)
                return (long)(a & SECCOMP_RET_ACTION_FULL);
            return -1;
        case BPF_MISC:
            if (BPF_MISCOP(i->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        default:
            return -1;
        }
    }
    return -1;                      /* ran off the end: the kernel rejects it */
}

int ht__copy_in(void *dst, const void *src, size_t n)
{
    int fd[2];
    if (ht__sys2(SYS_pipe2, fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return 0;
    int ok = ht__pipe_copy(fd[0], fd[1], dst, (uintptr_t)src, n);
    ht__sys1(SYS_close, fd[0]);
    ht__sys1(SYS_close, fd[1]);
    return ok;
}

/* The calls that write the trace: refused, even with an error, they would
 * lose everything after the filter. */
static const int write_calls[] = { SYS_open, SYS_openat, SYS_fstat, SYS_pwrite64, SYS_close };

/* Whether the filter at `prog` (a struct sock_fprog of the program's)
 * lets every call the agent may make through, or fails it with an error
 * the agent copes with (not the calls that write the trace), and never
 * kills, traps or hands one to a tracer. */
static int filter_spares_agent(const void *prog)
{
    struct sock_fprog fp;
    static struct sock_filter f[BPF_MAXINSNS];
    if (!ht__copy_in(&fp, prog, sizeof fp) || !fp.len || fp.len > BPF_MAXINSNS ||
        !ht__copy_in(f, fp.filter, fp.len * sizeof *f))
        return 0;
    for (size_t i = 0; i < HT_ARRAY_SIZE(agent_calls); i++) {
        long act = run_filter(f, fp.len, agent_calls[i]);
        if (act != SECCOMP_RET_ALLOW && act != SECCOMP_RET_LOG && act != SECCOMP_RET_ERRNO)
            return 0;
    }
    for (size_t i = 0; i < HT_ARRAY_SIZE(write_calls); i++) {
        long act = run_filter(f, fp.len, write_calls[i]);
        if (act != SECCOMP_RET_ALLOW && act != SECCOMP_RET_LOG)
            return 0;
    }
    return 1;
}

/* The crash signals get the handlers they had before the agent's, unless
 * the program put its own there since (at a sandbox, at a detach). */
static void give_back_crash_handlers(void)
{
    for (size_t i = 0; i < HT_ARRAY_SIZE(crash_signals); i++) {
        int sig = crash_signals[i];
        struct sigaction cur;
        if (A.hooked[sig] && sigaction(sig, NULL, &cur) == 0 && is_crash_handler(&cur))
            sigaction(sig, &A.old[sig], NULL);
        A.hooked[sig] = 0;
    }
}

/* The program is about to install a seccomp filter (hooks.c's prctl and
 * syscall; `strict`: SECCOMP_MODE_STRICT, else `prog` is the filter).
 * A filter that fails or allows every call the agent may make changes
 * nothing (tests/noreadv.h's kills only process_vm_readv, which the agent
 * then avoids). Otherwise, from then on a call the filter refuses may
 * kill the program (SIGSYS). So, while it still may:
 * stop the control thread (a filter with TSYNC covers it too), end solo
 * mode (its switch needs membarrier), give the crash signals their old
 * handlers back, write the last snapshot and the trace's END; then record
 * on in memory only, taking memory from plain mmap (ht__sandboxed). The
 * summary says the figures are from just before the sandbox. */
void ht__agent_sandbox(int strict, const void *prog)
{
    static ht_spinlock_t lock;
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht_load_acquire(&A.detached))
        return;
    A.filtered = 1;             /* sparing the agent's calls, not wake_control's */
    int g = ht__guard;
    ht__guard = 2;
    ht__spin_lock(&lock);
    /* a filter already on (inherited, or an earlier one) might kill the
     * pipe the copy takes: then do not look */
    if (ht_load_relaxed(&ht__sandboxed) ||
        (!strict && prog && !ht__seccomp_filtered() && filter_spares_agent(prog))) {
        ht__spin_unlock(&lock);
        ht__guard = g;
        return;
    }
    stop_control(0);
    ht__solo_stop();
    give_back_crash_handlers();
    ht__guard = g;
    /* a forked child that wrote nothing yet writes nothing: no file */
    if (ht__writer_path())
        final_snapshot(HT_SNAP_SANDBOX);
    A.exit_done = 1;
    ht_store_relaxed(&ht__sandboxed, 1);    /* no more writing */
    ht__spin_unlock(&lock);
}

/* The crash snapshot runs on a stack of the agent's: the handler may run
 * on a small alternate stack with little left (Rust's stack overflow
 * handler has 8 KiB, then aborts: ours ran on what remained of it, overran
 * it into its guard page and the process died of SIGSEGV instead of
 * SIGABRT). One crash at a time takes it; a second thread's crash writes
 * nothing anyway (final_snapshot runs once). */
#define CRASH_STACK (128u << 10)
static void *g_crash_stack;     /* its lowest page is the guard */
static int g_crash_stack_taken;

static void crash_snapshot(void *arg)
{
    final_snapshot((int)(intptr_t)arg);
}

/* Calls fn(arg) with the stack pointer at `top` (16-byte aligned), and
 * comes back to this stack. */
static HT_NOINLINE void call_on_stack(void (*fn)(void *), void *arg, void *top)
{
    __asm__ volatile("mov %%rsp, %%rbx\n\t"
                     "mov %[top], %%rsp\n\t"
                     "call *%[fn]\n\t"
                     "mov %%rbx, %%rsp"
                     : [fn] "+a"(fn), [top] "+S"(top), "+D"(arg)
                     :
                     : "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
                       "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                       "xmm12", "xmm13", "xmm14", "xmm15");
}

static void crash_handler(int sig, siginfo_t *si, void *uc)
{
    int e = errno;
    int reason = is_crash(sig) ? HT_SNAP_CRASH : HT_SNAP_SIGNAL;
    t_signal_uc = uc;
    if (g_crash_stack && !__atomic_exchange_n(&g_crash_stack_taken, 1, __ATOMIC_ACQ_REL)) {
        call_on_stack(crash_snapshot, (void *)(intptr_t)reason, (char *)g_crash_stack + CRASH_STACK);
        __atomic_store_n(&g_crash_stack_taken, 0, __ATOMIC_RELEASE);
    } else if (!g_crash_stack) {
        final_snapshot(reason);
    }
    /* another thread is writing the last snapshot (the program is
     * exiting, or crashed there): the signal ends the process only once
     * it is written, at most 10 s later (asleep, this thread is read as
     * it stands by a leak check) */
    int me = ht__gettid(), w;
    struct timespec ms = { 0, 1000000 };
    for (int i = 0; i < 10000 && (w = ht_load_acquire(&g_exit_writer)) != 0 && w != me; i++)
        ht__sys2(SYS_nanosleep, &ms, NULL);
    struct sigaction *old = sig < 32 ? &A.old[sig] : NULL;
    if (old)
        sigaction(sig, old, NULL);
    if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
    } else if (old && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else if (si->si_code <= 0 || !is_fault(sig)) {
        /* sent, not raised by a faulting instruction (a terminal's SIGINT
         * comes with SI_KERNEL, > 0): send it again; it is delivered with
         * the old disposition once we return */
        ht__sys3(SYS_tgkill, ht__sys0(SYS_getpid), ht__sys0(SYS_gettid), sig);
    }
    /* a fault re-executes the faulting instruction and takes the default */
    errno = e;
}

static int is_crash_handler(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == crash_handler;
}

/* The program asked what a signal's disposition is (hooks.c's sigaction,
 * `old` holding the answer): where that is the agent's handler, it
 * hears what it would without heaptrail, the disposition found before
 * (SIG_DFL). Rust's runtime installs its stack overflow handler (which
 * says "thread 'main' has overflowed its stack" and aborts) only where it
 * finds SIG_DFL: under heaptrail it found ours and installed none, and a
 * stack overflow ended in a bare SIGSEGV (ours cannot run without an
 * alternate stack). A program that installs a handler gets the truth in
 * the same call (it may chain to ours). */
void ht__agent_sigaction_query(int sig, struct sigaction *old)
{
    if (sig > 0 && sig < 32 && A.hooked[sig] && is_crash_handler(old))
        *old = A.old[sig];
}

static void install_crash_handlers(void)
{
    g_crash_stack = ht__map(CRASH_STACK);
    if (g_crash_stack && ht__sys3(SYS_mprotect, g_crash_stack, 4096, PROT_NONE) != 0) {
        ht__unmap(g_crash_stack, CRASH_STACK);
        g_crash_stack = NULL;
    }
    for (size_t i = 0; i < HT_ARRAY_SIZE(crash_signals); i++) {
        int sig = crash_signals[i];
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
            cur.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = crash_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigfillset(&sa.sa_mask);
        A.old[sig] = cur;
        if (sigaction(sig, &sa, NULL) == 0)
            A.hooked[sig] = 1;
    }
}

/* ---- the control thread ------------------------------------------------ */

static socklen_t control_addr(struct sockaddr_un *a, int pid)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    static const char pre[] = "heaptrail.";
    memcpy(a->sun_path + 1, pre, sizeof pre - 1);
    size_t n = 1 + sizeof pre - 1;
    n += ht__fmt_u64(a->sun_path + n, (uint64_t)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

/* The control socket, listening; -1 if it cannot be made. */
static int open_control_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* in the program's table: keep clear of the low descriptor numbers
     * programs expect */
    struct rlimit rl;
    int lo = 512;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1024)
        lo = (int)(rl.rlim_cur / 2);
    int hi = A.own_files ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, lo);
    if (hi >= 0) {
        close(fd);
        fd = hi;
    }
    struct sockaddr_un a;
    socklen_t al = control_addr(&a, A.pid);
    if (bind(fd, (struct sockaddr *)&a, al) == 0 && listen(fd, 4) == 0)
        return fd;
    close(fd);
    return -1;
}

/* Whether A.listen_fd is still our socket (the program may have closed it
 * and reused the number). */
static int still_ours(void)
{
    struct sockaddr_un want, got;
    socklen_t wl = control_addr(&want, A.pid), gl = sizeof got;
    return getsockname(A.listen_fd, (struct sockaddr *)&got, &gl) == 0 && gl == wl &&
           memcmp(&got, &want, wl) == 0;
}

/* "ok SEQ PATH" for a snapshot written (seq >= 0), else an error line;
 * returns its length (reply holds 4200 bytes). A detach's answer has one
 * more number before the path, *freed: "ok SEQ FREED PATH". */
static size_t ok_reply_freed(char *reply, int seq, const int64_t *freed)
{
    const char *path = ht__writer_path();
    if (seq < 0 || !path) {
        static const char m[] = "error the trace cannot be written";
        memcpy(reply, m, sizeof m - 1);
        return sizeof m - 1;
    }
    memcpy(reply, "ok ", 3);
    size_t r = 3 + ht__fmt_u64(reply + 3, (uint64_t)seq);
    reply[r++] = ' ';
    if (freed) {
        if (*freed < 0)
            reply[r++] = '-';
        r += ht__fmt_u64(reply + r, (uint64_t)(*freed < 0 ? -*freed : *freed));
        reply[r++] = ' ';
    }
    size_t pl = ht__strlen(path);
    if (pl > 4096)
        pl = 4096;
    memcpy(reply + r, path, pl);
    return r + pl;
}

static size_t ok_reply(char *reply, int seq) { return ok_reply_freed(reply, seq, NULL); }

/* The resident bytes of the mappings heaptrail made (mincore). */
static uint64_t own_resident(void)
{
    static uintptr_t own[4096][2];
    static unsigned char vec[4096];
    int n = ht__own_mappings(own, (int)HT_ARRAY_SIZE(own));
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++)
        for (uintptr_t a = own[i][0]; a < own[i][1]; a += sizeof vec * 4096) {
            size_t len = own[i][1] - a < sizeof vec * 4096 ? own[i][1] - a : sizeof vec * 4096;
            if (ht__sys3(SYS_mincore, a, len, vec) != 0)
                break;
            for (size_t k = 0; k < (len + 4095) / 4096; k++)
                bytes += (vec[k] & 1) * 4096ull;
        }
    return bytes;
}

/* After a detach the tables (live blocks, sites, stacks, mapped regions:
 * what grows with the program) and the writer's buffers go back to the system, once no thread of
 * the program can be inside the agent any more (reach.c,
 * ht__reach_quiesce; the hooks read `on` off from now). A thread found
 * inside (an allocation under way, a thread parked in a hook) is waited
 * for: tries 10 ms apart for up to 2 s (a thread that cannot be stopped
 * costs each try the stop's 300 ms). Kept if none shows them all
 * outside: then the memory stays, as it did before detaches gave it
 * back; so do the pages of the threads' walk trails (their mappings
 * stay: a thread's exit still returns its trail to the free list). The
 * rest stays in any case: the capture's rule cache, the crash stack, the
 * stack the control thread runs on now. Returns the resident
 * bytes given back, or -1 (kept). */
static int64_t give_back_tables(void)
{
    struct dl_find_object fo;
    if (_dl_find_object((void *)give_back_tables, &fo) != 0)
        return -1;
    for (uint64_t until = ht__mono_ns() + 2000000000ull; ht__mono_ns() < until;) {
        int n = ht__reach_quiesce((uintptr_t)fo.dlfo_map_start, (uintptr_t)fo.dlfo_map_end);
        if (n < 0)
            return -1;
        if (n == 0) {
            uint64_t before = own_resident();
            ht_store_release(&A.released, 1);
            ht__sites_release();
            ht__live_release();
            ht__mmaps_release();
            ht__custom_release();
            ht__stackdb_release();
            ht__writer_release();
            ht__trails_release();
            uint64_t after = own_resident();
            return before > after ? (int64_t)(before - after) : 0;
        }
        struct timespec nap = { 0, 10 * 1000000 };
        ht__sys2(SYS_nanosleep, &nap, NULL);
    }
    return -1;
}

/* heaptrail detach (the control thread, at the CLI's request): the agent
 * leaves a process it was attached to. A last leak check while the hooks
 * still track, then every slot attach.c rewrote leads to libc again, the
 * hooks pass calls through (a thread inside one, or a function pointer
 * taken while attached, still reaches them), a last snapshot and END, and
 * the control socket closes and its thread ends. The agent's memory stays (a thread may still be
 * inside a hook, reading it) and so does the library (it can never be
 * unloaded safely); nothing it does writes again: exit, exec, fork, a crash
 * and ht_snapshot() find the trace ended. Not for a program `heaptrail
 * run` started: LD_PRELOAD cannot be undone. Returns NULL, *seq the
 * snapshot's number, or the error line. */
static const char *detach(int *seq, int64_t *freed)
{
    if (!ht_load_relaxed(&ht__attached))
        return "error heaptrail run started this program: its hooks come from LD_PRELOAD and cannot be "
               "taken out (only a process heaptrail attach joined can be detached from)";
    if (ht_load_relaxed(&ht__sandboxed) || ht_load_acquire(&A.exit_done))
        return "error the program is exiting, or its trace has ended";
    int locked = ht__agent.on == HT_ON_FULL && A.reach;
    if (locked && ht__reach_trylock() != 0)
        return "error a leak check is under way: try again";
    if (locked)
        ht__reach_compute(HT_SCAN_NOW);
    ht_store_release(&A.detaching, 1);
    if (__atomic_exchange_n(&A.exit_done, 1, __ATOMIC_ACQ_REL)) {
        /* an exit began during the check: it writes the last snapshot */
        ht_store_release(&A.detaching, 0);
        if (locked)
            ht__reach_unlock();
        return "error the program is exiting";
    }
    ht__attach_unpatch();
    give_back_crash_handlers();
    ht_store_release(&A.detached, 1);
    ht_store_release(&ht__agent.on, HT_ON_OFF);
    *seq = ht__snapshot_write(HT_SNAP_DETACH, HT_WCTX_NORMAL, locked ? ht__reach_result() : NULL);
    ht__trace_finish();
    if (!locked)
        locked = ht__reach_lock() == 0;     /* the quiesce stops threads as a leak check does */
    ht_store_release(&A.detaching, 0);
    *freed = locked ? give_back_tables() : -1;   /* (no lock: a scan runs; kept) */
    if (locked)
        ht__reach_unlock();
    /* the socket closes now, before the answer goes: an attach the moment
     * the CLI has it must find no agent here (under load one found this
     * socket before the thread had ended) */
    close(A.listen_fd);
    A.listen_fd = -1;
    ht_store_release(&A.ctl_quit, 1);     /* the thread ends after its answer */
    return NULL;
}

static void serve(int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
        (cr.uid != geteuid() && cr.uid != 0))
        return;
    char req[64];
    size_t n = 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    while (n < sizeof req - 1 && poll(&p, 1, 2000) == 1) {
        ssize_t k = read(fd, req + n, sizeof req - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        if (memchr(req, '\n', n))
            break;
    }
    req[n] = 0;
    char reply[4200];
    size_t r = 0;
    const char *err = NULL;
    if (strcmp(req, "snapshot leaks\n") == 0) {
        /* a leak check: reachability now, the program running on */
        int seq = -1;
        if (ht__agent.on != HT_ON_FULL || !A.reach)
            err = ht__agent.sample ? "error leak checks are off in sampling mode (HEAPTRAIL_SAMPLE)"
                                   : "error leak checks are turned off (HEAPTRAIL_REACH=0)";
        else if (ht_load_acquire(&A.exit_done) || ht__reach_trylock() != 0)
            err = "error the program is exiting, or a leak check is already under way";
        else {
            ht__reach_compute(HT_SCAN_NOW);
            if (ht_load_acquire(&A.exit_done))
                err = "error the program is exiting";
            else
                seq = ht__snapshot_write(HT_SNAP_REQUEST, HT_WCTX_NORMAL, ht__reach_result());
            ht__reach_unlock();
        }
        r = err ? 0 : ok_reply(reply, seq);
    } else if (strncmp(req, "snapshot", 8) == 0) {
        r = ok_reply(reply, ht__snapshot_write(HT_SNAP_REQUEST, HT_WCTX_NORMAL, NULL));
    } else if (strcmp(req, "detach\n") == 0) {
        int seq = -1;
        int64_t freed = -1;
        err = detach(&seq, &freed);
        r = err ? 0 : ok_reply_freed(reply, seq, &freed);
    } else if (strcmp(req, "trace\n") == 0) {
        r = ok_reply(reply, 0);     /* where the trace goes (heaptrail attach) */
    } else {
        err = "error unknown request";
    }
    if (err) {
        r = strlen(err);
        memcpy(reply, err, r);
    }
    reply[r++] = '\n';
    (void)!send(fd, reply, r, MSG_NOSIGNAL);
}

/* How often the control thread looks for JIT code announced in perf map
 * and jitdump files (jitmaps.c) and through the GDB JIT interface
 * (gdbjit.c): every JITMAPS_MS, and every JITMAPS_BUSY_MS (perf map and
 * jitdump only) for JITMAPS_BUSY_FOR ms after a look that found new code.
 * Until its line is read, a frame in new code at an address that older,
 * dead code was registered for is named after the old code (a perf map
 * never says code died): while a JIT is emitting, the short interval keeps
 * that window to a few ms. A look that finds nothing is one read(). */
#define JITMAPS_MS 20
#define JITMAPS_BUSY_MS 2
#define JITMAPS_BUSY_FOR 200

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif

/* Gives the calling (control) thread a descriptor table of its own, empty
 * but for the trace descriptor the writer holds since the program gave up
 * rights: what the thread opens (the control socket, the trace for a
 * snapshot, /proc files, a JIT's perf map) then never takes a number in
 * the program's table. There even a descriptor open for a moment changes
 * what the program sees: open() no longer returns the lowest free number,
 * dup2() onto a number being opened fails with EBUSY (bash's `exec 3>`
 * did, under heaptrail), and a program that closes every descriptor it
 * did not open closed the socket. close_range(CLOSE_RANGE_UNSHARE, Linux
 * 5.9) copies only the descriptors below the range, so the program's
 * files gain no reference (a pipe's reader still sees its end at once);
 * only a held trace descriptor takes the ones below it along, closed
 * again at once. Not under a seccomp filter, which may not expect the
 * call: there, and on older kernels, the thread shares the table. */
static int own_files(void)
{
    if (A.filtered)
        return 0;
    int keep = ht__writer_held_fd();
    if (ht__sys3(SYS_close_range, (unsigned)(keep + 1), ~0u, CLOSE_RANGE_UNSHARE) != 0)
        return 0;
    if (keep > 0)
        ht__sys3(SYS_close_range, 0, (unsigned)(keep - 1), 0);
    if (keep >= 0 && !ht__writer_is_ours(keep))
        ht__sys1(SYS_close, keep);      /* the program's since: not kept */
    return 1;
}

static void *control_main(void *arg)
{
    (void)arg;
    ht__guard = 2;              /* this thread is ours: nothing it does is tracked */
    A.own_files = own_files();
    ht__own_files = A.own_files;
    if (A.control && A.listen_fd < 0)
        A.listen_fd = open_control_socket();
    ht_store_release(&A.control_tid, ht__gettid());
    prctl(PR_SET_NAME, "heaptrail", 0, 0, 0);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t busy_until = 0, gdb_next = 0, reopen_next = 0;
    for (;;) {
        if (ht_load_acquire(&A.ctl_quit)) {
            /* the socket goes with the thread (its name is free for the
             * next one at once; a table of its own would close it only
             * after the thread is seen gone) */
            if (A.listen_fd >= 0)
                close(A.listen_fd);
            A.listen_fd = -1;
            ht_store_release(&A.ctl_gone, 1);
            return NULL;
        }
        uint64_t t = ht__now_ns();
        if (ht__jitmaps_poll(0))
            busy_until = t + JITMAPS_BUSY_FOR * 1000000ull;
        if (t >= gdb_next) {
            if (ht_load_relaxed(&ht__attached))
                ht__attach_poll();
            ht__gdbjit_poll(0);
            gdb_next = t + JITMAPS_MS * 1000000ull;
        }
        int timeout = t < busy_until ? JITMAPS_BUSY_MS : JITMAPS_MS;
        if (A.interval_ms > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t left = (int64_t)(next.tv_sec - now.tv_sec) * 1000 +
                           (next.tv_nsec - now.tv_nsec) / 1000000 + A.interval_ms;
            if (left <= 0) {
                ht__snapshot_write(HT_SNAP_INTERVAL, HT_WCTX_NORMAL, NULL);
                clock_gettime(CLOCK_MONOTONIC, &next);
                continue;
            }
            if (left < timeout)
                timeout = (int)left;
        }
        /* no socket: it could not be made, or (in a shared table) a
         * program that closes every descriptor it did not open (a daemon
         * starting up) closed it: a new one, at most once a second (a
         * program may keep closing) */
        if (A.listen_fd < 0 && A.control && t >= reopen_next) {
            A.listen_fd = open_control_socket();
            reopen_next = t + 1000000000ull;
        }
        if (A.listen_fd < 0) {
            poll(NULL, 0, timeout);
            continue;
        }
        struct pollfd p = { .fd = A.listen_fd, .events = POLLIN };
        int r = poll(&p, 1, timeout);
        if (r <= 0)
            continue;
        if ((p.revents & (POLLNVAL | POLLERR | POLLHUP)) || !still_ours()) {
            A.listen_fd = -1;   /* gone or no longer ours: never touch it again */
            continue;
        }
        int c = accept4(A.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        serve(c);
        close(c);
    }
    return NULL;                /* not reached */
}

#define CTL_STACK (256u << 10)

/* Wakes the control thread from its poll by a connection to its socket,
 * closed at once (it reads nothing, and its answer goes nowhere). Without
 * it the thread noticed it should end at its next look, up to JITMAPS_MS
 * later: a pause (a stat of /proc/self/task) took 15.8 ms. Not under a
 * seccomp filter: one that spares the agent's calls (agent_calls) may
 * still kill on connect; the thread then ends at its look. */
static void wake_control(void)
{
    if (A.listen_fd < 0 || A.filtered)
        return;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;                 /* no descriptor left: the thread ends at its look */
    struct sockaddr_un a;
    socklen_t al = control_addr(&a, A.pid);
    (void)!connect(fd, (struct sockaddr *)&a, al);
    close(fd);
}

/* Ends the control thread and waits (at most 2 s) until it has: it looks
 * at least every JITMAPS_MS, and is woken at once where it can be. It
 * closes its socket as it ends (`heaptrail snapshot` then finds nobody
 * listening until a new thread runs; it tries again for a second). With
 * `keep` the thread is waited for until it is gone from the kernel too
 * (at most 100 ms more), so that a new one can take its stack. */
static void stop_control(int keep)
{
    if (!A.thread_up)
        return;
    ht_store_release(&A.ctl_quit, 1);
    wake_control();
    struct timespec nap = { 0, 50000 };
    for (int i = 0; i < 40000 && !ht_load_acquire(&A.ctl_gone); i++)
        nanosleep(&nap, NULL);
    A.thread_up = 0;
    if (!ht_load_acquire(&A.ctl_gone))
        return;
    if (!keep)
        return;
    int tid = ht_load_acquire(&A.control_tid), i = 0;
    while (tid > 0 && ht__sys3(SYS_tgkill, A.pid, tid, 0) == 0 && i++ < 2000)
        nanosleep(&nap, NULL);
    if (i > 2000)
        A.ctl_stack = NULL;     /* still running on it: left to it */
    A.control_tid = 0;
    A.ctl_quit = A.ctl_gone = 0;
}

static void start_control(void)
{
    /* the thread also reads JIT runtimes' perf maps: it runs unless the
     * control socket is turned off and no interval was asked for */
    if (!A.control && A.interval_ms <= 0)
        return;
    int g = ht__guard;
    ht__guard = 2;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    /* its stack is a mapping of ours, so a leak check it runs (reach.c)
     * never takes its frames, or the stale words in them, for the
     * program's roots; its lowest page is the guard */
    void *stack = A.ctl_stack ? A.ctl_stack : ht__map(CTL_STACK);
    if (stack && (stack == A.ctl_stack || ht__sys3(SYS_mprotect, stack, 4096, PROT_NONE) == 0)) {
        pthread_attr_setstack(&at, stack, CTL_STACK);
        A.ctl_stack = stack;
    } else {
        pthread_attr_setstacksize(&at, 128 << 10);
    }
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    A.thread_up = pthread_create(&t, &at, control_main, NULL) == 0;
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ht__guard = g;
}

/* ---- fork -------------------------------------------------------------- */

static HT_TLS int t_fork_locked;

static void fork_prepare(void)
{
    if (ht_load_acquire(&A.released)) {
        t_fork_locked = 0;      /* nothing of the agent's runs again */
        return;
    }
    ht__reach_fork_prepare();
    t_fork_locked = !ht__guard;     /* inside our own code (a signal handler): don't wait */
    if (!t_fork_locked)
        return;
    ht__guard = 2;
    /* in lock order: a GDB JIT poll registers code (registry lock), and a
     * registration that retires code stages its names (writer lock) */
    ht__gdbjit_fork_prepare();
    ht__jit_fork_prepare();
    ht__writer_fork_prepare();
    ht__stackdb_fork_prepare();
    ht__mmaps_fork_prepare();
    ht__custom_fork_prepare();
    ht__live_fork_prepare();
}

static void fork_parent(void)
{
    if (!t_fork_locked)
        return;
    ht__live_fork_parent();
    ht__custom_fork_parent();
    ht__mmaps_fork_parent();
    ht__stackdb_fork_parent();
    ht__writer_fork_parent();
    ht__jit_fork_release();
    ht__gdbjit_fork_release();
    ht__guard = 0;
}

static void fork_child(void)
{
    if (ht_load_acquire(&A.released))
        return;                 /* the parent's trace ended at the detach: the child has none */
    if (t_fork_locked) {
        ht__jit_fork_release();
        ht__gdbjit_fork_release();   /* no poll was halfway: keep its state */
        ht__live_fork_child();
        ht__custom_fork_child();
        ht__mmaps_fork_child();
        ht__stackdb_fork_child();
    }
    ht__sites_fork_child();
    ht__writer_fork_child();
    ht__reach_fork_child();
    ht__jitmaps_forget();
    ht__gdbjit_forget();
    ht__hooks_fork_child();
    if (ht_load_relaxed(&A.detached))
        return;                 /* the parent's trace ended at the detach: the child has none */
    if (ht_load_relaxed(&ht__sandboxed))
        return;                 /* under the parent's filter: no system calls of ours */
    A.filtered = ht__seccomp_filtered();
    ht__solo_start(A.filtered); /* the child has one thread: the forking one */
    A.pid = (int)ht__sys0(SYS_getpid);
    A.exit_done = 0;
    A.forked = 1;
    ht__agent.acted = 0;
    A.control_tid = 0;          /* the parent's control thread is not ours */
    A.thread_up = 0;
    A.ctl_quit = A.ctl_gone = 0;
    A.pause_lock.v = 0;
    A.pauses = A.paused = 0;    /* a set-id call in another thread of the parent's */
    set_clocks();
    if (A.listen_fd >= 0 && !A.own_files)
        close(A.listen_fd);     /* the parent's socket, in the table the child copied */
    A.listen_fd = -1;           /* (in a table of its own, it is not in the child's) */
    A.own_files = 0;
    if (A.ctl_stack) {
        ht__unmap(A.ctl_stack, CTL_STACK);  /* the parent's control thread's */
        A.ctl_stack = NULL;
    }
    /* most children exec or exit without allocating (POSIX allows a
     * multithreaded program nothing else between fork and exec): such a
     * child has nothing to tell, and its control thread cost it 1.3 ms
     * here (made, then killed by the exec). It starts at the child's
     * first allocation or release (ht__agent_acted) */
    ht_store_release(&A.ctl_deferred, 1);
    ht__guard = 0;
}

/* The process's first allocation or release since start-up or its fork
 * (ht__note_acted), from a hook. */
void ht__agent_acted(void)
{
    ht_store_relaxed(&ht__agent.acted, 1);
    if (!ht_load_acquire(&A.ctl_deferred) || !__atomic_exchange_n(&A.ctl_deferred, 0, __ATOMIC_ACQ_REL))
        return;
    if (ht_load_relaxed(&ht__sandboxed) || ht_load_acquire(&A.detached))
        return;
    int g = ht__guard;
    ht__guard = 2;
    ht__spin_lock(&A.pause_lock);
    if (A.pauses > 0)
        A.paused = 1;           /* inside a set-id call's pause: it starts after */
    else
        start_control();
    ht__spin_unlock(&A.pause_lock);
    ht__guard = g;
}

/* ---- LD_PRELOAD -------------------------------------------------------- */

/* Whether the LD_PRELOAD entry s (len bytes) names this library: its path
 * as the loader has it, or a path ending in its file name. */
static int names_me(const char *s, size_t len, const char *me)
{
    const char *base = ht__path_base(me), *sb = s;
    for (const char *q = s; q < s + len; q++)
        if (*q == '/')
            sb = q + 1;
    size_t bl = strlen(base);
    return (strlen(me) == len && !strncmp(s, me, len)) || ((size_t)(s + len - sb) == bl && !strncmp(sb, base, bl));
}

/* The next entry of an LD_PRELOAD value (separated by spaces or colons)
 * from *r, or NULL at its end; *len its length; *r moves past it. */
static const char *preload_entry(const char **r, size_t *len)
{
    const char *p = *r;
    while (*p == ' ' || *p == ':')
        p++;
    const char *s = p;
    while (*p && *p != ' ' && *p != ':')
        p++;
    *r = p;
    *len = (size_t)(p - s);
    return *len ? s : NULL;
}

/* this library's path as the loader names it, or NULL */
static const char *my_path(void)
{
    struct dl_find_object fo;
    if (_dl_find_object((void *)my_path, &fo) != 0 || !fo.dlfo_link_map)
        return NULL;
    return fo.dlfo_link_map->l_name;
}

/* Removes this library from LD_PRELOAD, in place (no allocation), so that
 * programs the traced one executes run untraced. */
static void drop_preload(void)
{
    extern char **environ;
    const char *me = my_path();
    if (!me)
        return;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
            continue;
        char *v = *e + 11, *w = v;
        const char *r = v, *s;
        size_t len;
        while ((s = preload_entry(&r, &len)) != NULL) {
            if (names_me(s, len, me))
                continue;
            if (w != v)
                *w++ = ':';
            memmove(w, s, len);
            w += len;
        }
        *w = 0;
    }
}

/* ---- --follow-exec: what an executed program's environment must hold -----
 * Following exec relies on the environment: LD_PRELOAD loads the agent
 * into the new image and the HEAPTRAIL_* variables carry the options and
 * the trace's directory. A program may start another with an environment
 * of its own (env -i, Python's subprocess.run(env={...}), a sandbox that
 * unsets LD_PRELOAD): the exec and posix_spawn hooks then hand it a copy
 * with this library put first in LD_PRELOAD and the HEAPTRAIL_* variables
 * this process started with added where missing (the program's own values
 * kept). Saved at start-up, since the program may change its environment;
 * the copy is built on the caller's stack, no allocation (a vfork child
 * shares its parent's memory). */
#define EXEC_VARS_MAX 32
static struct {
    char buf[4096];
    const char *path;           /* this library, from the loader's name for it */
    const char *vars[EXEC_VARS_MAX];    /* "HEAPTRAIL_X=value" */
    size_t nvars;
} X;

static void save_exec_env(void)
{
    extern char **environ;
    const char *me = my_path();
    size_t used = 0, len;
    if (!me || !*me || (len = strlen(me) + 1) > sizeof X.buf)
        return;
    memcpy(X.buf, me, len);
    X.path = X.buf;
    used = len;
    for (char **e = environ; e && *e && X.nvars < EXEC_VARS_MAX; e++) {
        if (strncmp(*e, "HEAPTRAIL_", 10) != 0 || !strchr(*e, '=') || (len = strlen(*e) + 1) > sizeof X.buf - used)
            continue;
        memcpy(X.buf + used, *e, len);
        X.vars[X.nvars++] = X.buf + used;
        used += len;
    }
}

/* the length of a variable's name, up to its '=' */
static size_t var_name_len(const char *e)
{
    const char *q = strchr(e, '=');
    return q ? (size_t)(q - e) : strlen(e);
}

/* The first LD_PRELOAD entry of env, or NULL; *mine whether it names us. */
static const char *find_preload(char *const env[], size_t *at, int *mine)
{
    *mine = 0;
    for (size_t i = 0; env && env[i]; i++) {
        if (strncmp(env[i], "LD_PRELOAD=", 11) != 0)
            continue;
        const char *r = env[i] + 11, *s;
        size_t len;
        while (!*mine && (s = preload_entry(&r, &len)) != NULL)
            *mine = names_me(s, len, X.path);
        *at = i;
        return env[i];
    }
    return NULL;
}

/* whether env has a variable of the name of X.vars[k] */
static int has_var(char *const env[], size_t k)
{
    size_t nl = var_name_len(X.vars[k]);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], X.vars[k], nl) && env[i][nl] == '=')
            return 1;
    return 0;
}

size_t ht__exec_env_need(char *const env[], size_t *preload_bytes)
{
    *preload_bytes = 0;
    if (!A.follow_exec || !X.path)
        return 0;
    size_t n = 0, at = 0, missing = 0;
    int mine;
    while (env && env[n])
        n++;
    const char *pre = find_preload(env, &at, &mine);
    for (size_t k = 0; k < X.nvars; k++)
        missing += !has_var(env, k);
    if (mine && !missing)
        return 0;
    if (!mine)
        *preload_bytes = 11 + strlen(X.path) + (pre && pre[11] ? 1 + strlen(pre + 11) : 0) + 1;
    return n + missing + (pre ? 0 : 1) + 1;
}

char *const *ht__exec_env_fill(char *const env[], char **out, char *preload)
{
    size_t n = 0, at = 0;
    int mine;
    const char *pre = find_preload(env, &at, &mine);
    if (!mine) {
        size_t l = strlen(X.path);
        memcpy(preload, "LD_PRELOAD=", 11);
        memcpy(preload + 11, X.path, l);
        if (pre && pre[11]) {
            preload[11 + l] = ':';
            strcpy(preload + 12 + l, pre + 11);
        } else {
            preload[11 + l] = 0;
        }
    }
    for (size_t i = 0; env && env[i]; i++)
        out[n++] = pre && i == at && !mine ? preload : env[i];
    if (!pre)
        out[n++] = preload;
    for (size_t k = 0; k < X.nvars; k++)
        if (!has_var(env, k))
            out[n++] = (char *)X.vars[k];
    out[n] = NULL;
    return out;
}

/* ---- start-up ---------------------------------------------------------- */

/* The C library's object, found by the address of one of its functions.
 * Not the program's: one built without PIE that takes a function's
 * address in its code gets a canonical PLT entry, which every reference
 * to the function, ours too, then resolves to (a program that stored
 * `close` somewhere was found as "libc", read as loaded before the agent,
 * and ran untraced: "no trace ... was not written"). The program heads
 * the loader's list; three functions are tried, none of them wrapped
 * by heaptrail (it wraps fclose, which reach.c used until the
 * forty-sixth session: libc's frames read as the program's). */
extern int __libc_start_main(void);
int ht__libc_object(struct dl_find_object *fo)
{
    void *const fns[] = { (void *)__libc_start_main, (void *)close, (void *)getauxval };
    for (size_t i = 0; i < HT_ARRAY_SIZE(fns); i++)
        if (_dl_find_object(fns[i], fo) == 0 && fo->dlfo_link_map && fo->dlfo_link_map->l_prev)
            return 0;
    return -1;
}

/* Preloaded, the library comes before libc in the loader's list of
 * modules; opened later (heaptrail attach, or a program's own dlopen) it
 * comes after, and starts only when ht__attach asks. */
static int preloaded(void)
{
    struct dl_find_object me, libc;
    if (_dl_find_object((void *)preloaded, &me) != 0 || !me.dlfo_link_map || ht__libc_object(&libc) != 0)
        return 1;
    for (const struct link_map *l = me.dlfo_link_map->l_prev; l; l = l->l_prev)
        if (l == libc.dlfo_link_map)
            return 0;
    return 1;
}

static void start(int attach)
{
    ht__guard = 2;
    ht__reserve_allowance();    /* read now: later it might come after a filter */
    set_clocks();
    A.pid = (int)ht__sys0(SYS_getpid);
    const char *s = ht__env("HEAPTRAIL_MAX_FRAMES");
    if (s) {
        uint64_t v = ht__parse_size(s, HT_MAX_FRAMES);
        ht__agent.max_frames = v < 1 ? 1 : v > HT_MAX_FRAMES ? HT_MAX_FRAMES : (int)v;
    }
    /* benchmarks only: split the cost (docs/BENCHMARKS.md) */
    s = ht__env("HEAPTRAIL_BENCH_MODE");
    if (s && !ht__strcmp(s, "hooks"))
        ht__agent.on = HT_ON_OFF;
    else if (s && !ht__strcmp(s, "capture"))
        ht__agent.on = HT_ON_CAPTURE_ONLY;
    else if (s && !ht__strcmp(s, "nocapture"))
        ht__agent.on = HT_ON_NO_CAPTURE;
    else if (s && !ht__strcmp(s, "intern"))
        ht__agent.on = HT_ON_INTERN_ONLY;
    A.interval_ms = parse_seconds_ms(ht__env("HEAPTRAIL_INTERVAL"));
    s = ht__env("HEAPTRAIL_CONTROL");
    A.control = !(s && s[0] == '0');
    s = ht__env("HEAPTRAIL_REACH");
    A.reach = !(s && s[0] == '0');
    /* sampling mode (sample.c): no leak check, which needs every block */
    s = ht__env("HEAPTRAIL_SAMPLE");
    ht__agent.sample = s ? ht__parse_size(s, 0) : 0;
    if (ht__agent.sample)
        A.reach = 0;
    s = ht__env("HEAPTRAIL_FOLLOW_EXEC");
    A.follow_exec = s && s[0] == '1';
    ht__agent.foreign = ht__foreign_allocator(&ht__agent.foreign_module);
    ht__writer_init();
    ht__sites_start();
    /* under a filter inherited at start-up (a container's, a service's),
     * which may kill on a call the program never makes, the agent keeps to
     * calls it has long made: stack lookups read the maps text (no
     * PROCMAP_QUERY ioctl), and no solo mode (its membarrier) */
    A.filtered = ht__seccomp_filtered();
    if (A.filtered)
        ht__maps_no_query();
    ht__solo_start(A.filtered);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    install_crash_handlers();
    if (!A.follow_exec && !attach)
        drop_preload();
    else if (A.follow_exec)
        save_exec_env();
    A.started = 1;
    start_control();
    ht__guard = 0;
}

__attribute__((constructor(101))) static void agent_start(void)
{
    if (A.started || !preloaded())
        return;
    start(0);
}

/* heaptrail attach: the CLI's injected call, in a thread of the running
 * program it borrowed (src/analyze/inject.c). `opts` holds the options as
 * HEAPTRAIL_NAME=value lines (the environment is the program's). Returns
 * 0; 1 the agent already runs here; 2 the options do not fit; 3 no call
 * of the program could be sent to the hooks; 4 the process cannot create
 * the trace file (nothing started when the directory says so at once;
 * else the agent idles: no call reaches it). After a heaptrail detach
 * this instance cannot start again: a fresh copy of it does
 * (ht__attach_again), or 5 none could be loaded, 6 none made. The CLI
 * words each (src/analyze/cmd_attach.c). */
HT_API int ht__attach(const char *opts)
{
    static char env[4096];
    static const char *vars[32];
    if (ht_load_acquire(&A.detached))
        return ht__attach_again(opts);
    if (A.started)
        return 1;
    size_t n = opts ? ht__strlen(opts) : 0, nv = 0;
    if (n >= sizeof env)
        return 2;
    memcpy(env, opts, n);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || env[i - 1] == 0) {
            if (nv + 1 >= HT_ARRAY_SIZE(vars))
                return 2;
            vars[nv++] = &env[i];
        }
        if (env[i] == '\n')
            env[i] = 0;
    }
    ht__env_extra = vars;
    /* a trace it cannot create: nothing starts, so that the CLI can try
     * again with another -o (faccessat2 asks as the process, with its
     * effective ids) */
    const char *out = ht__env("HEAPTRAIL_OUTPUT");
    if (out && out[0] == '/') {
        char dir[4096];
        size_t k = ht__path_dir_len(out);   /* "/a/b/": the slash kept */
        memcpy(dir, out, k);
        dir[k] = 0;
        long e = ht__sys4(SYS_faccessat2, AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS);
        if (e < 0 && e != -ENOSYS && e != -EPERM) {
            ht__env_extra = NULL;
            return 4;
        }
    }
    ht_store_release(&ht__attached, 1);
    start(1);
    if (ht__writer_start_file() != 0)
        return 4;               /* the agent idles: nothing reaches it */
    ht__guard = 2;              /* the hooks pass through while slots change */
    int r = ht__attach_patch();
    ht__guard = 0;
    ht__reach_learn_heap();     /* through the real functions: untracked */
    return r == 0 ? 0 : 3;
}

/* The control thread notes its id when it starts; a short program may end
 * before it has run at all: then wait for it (at most 100 ms). */
int ht__control_tid(void)
{
    for (int i = 0; i < 1000 && A.thread_up && !ht_load_acquire(&A.control_tid); i++) {
        struct timespec ts = { 0, 100 * 1000 };
        nanosleep(&ts, NULL);
    }
    return ht_load_acquire(&A.control_tid);
}

/* ---- public API and dlclose -------------------------------------------- */

HT_API int ht_snapshot(void)
{
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht_load_acquire(&A.detached))
        return -1;
    int g = ht__guard;
    ht__guard = 2;
    int r = ht__snapshot_write(HT_SNAP_API, HT_WCTX_NORMAL, NULL);
    ht__guard = g;
    return r;
}

HT_API __attribute__((noinline)) long ht_leak_check(void)
{
    /* where the caller stands: its frames (from this stack pointer up,
     * with the registers this function's prologue saved) and registers
     * stay roots */
    uintptr_t regs[6];
    uintptr_t sp = ht__callee_saved(regs);
    if (!A.started || ht_load_relaxed(&ht__sandboxed) || ht__guard || ht__agent.on != HT_ON_FULL ||
        !A.reach)
        return -1;
    /* waits for a check under way with the guard down: that check can
     * then pause this thread instead of giving up on it */
    if (ht__reach_lock() != 0)
        return -1;
    long lost = -1;
    ht__guard = 2;
    if (!ht_load_acquire(&A.exit_done)) {
        long n = ht__reach_compute_call(sp, regs);
        if (ht__snapshot_write(HT_SNAP_API, HT_WCTX_NORMAL, ht__reach_result()) >= 0)
            lost = n;
    }
    ht__reach_unlock();
    ht__guard = 0;
    return lost;
}

/* Stages the stack nodes and modules seen so far (and unloads), as agent
 * code: what the program is about to unmap or replace is recorded while it
 * is still there. */
static void stage_now(void)
{
    if (!A.started || ht_load_acquire(&A.detached))
        return;
    int g = ht__guard;
    ht__guard = 2;
    ht__modules_rescan();
    ht__guard = g;
}

/* Called by the JIT registry (src/platform/.../jit.c) before a
 * registration may be dropped or replaced: the nodes pointing into it and
 * its name are staged while it is still registered. */
HT_INTERNAL void ht__jit_leaving(void);
void ht__jit_leaving(void)
{
    stage_now();
}

/* Called by the dlclose wrapper (src/platform/.../modules.c) before and
 * after the real dlclose. */
HT_INTERNAL void ht__dlclose_event(int after);
void ht__dlclose_event(int after)
{
    (void)after;
    stage_now();
}
