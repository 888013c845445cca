/* reach.c -- blocks left allocated at exit with a known reachability:
 * each site's function name says what its blocks are, and the program
 * prints the truth for tests/agent/reach.sh, summed over the sites whose
 * innermost frame is NAME:
 *   TRUTH site=NAME live=K lost=D ilost=I plost=P
 * (live blocks, directly lost, indirectly lost, possibly lost). No stdio before the
 * blocks are made (so libc's own buffers do not mix in), printf at the end.
 *
 *   reach [exit|signal|thread-running|thread-busy|thread-vector|thread-futex|thread-timedwait|thread-masked|thread-spinning|in-handler|seccomp|reraise|reraise-onstack|rekill|killself|raise-blocked|exit-thread|exit-rbx|epoll-many|leakcheck|api|ticking|restless|restless-masked|dontfork]
 * exit: as above, ending with exit() from a function whose frame holds a
 * pointer; thread-running: a second thread is still there at exit, asleep
 * in a read() of a pipe, holding a block's only pointer in its frame (its
 * stack is read as it stands, without a signal); thread-futex: it sleeps
 * in a futex wait instead, the only pointer to another block in r12 (the
 * agent parks it with a signal, the wait restarts unseen);
 * thread-timedwait: it sleeps in sem_timedwait, which a signal would end
 * with EINTR (printed "SEM EINTR"): it must be read as it stands; thread-busy: it spins instead,
 * the only pointer to another block in a register (the agent parks it
 * with a signal and reads its registers); thread-vector: the same with the
 * pointer only in a vector register (xmm7); thread-masked: that thread blocks every signal and waits in
 * sigwaitinfo for any (it cannot be parked, must not be sent a signal, and
 * sleeps in a system call: its stack is scanned without its registers); thread-spinning: it blocks every signal and spins (not
 * computed); in-handler: _exit from a signal
 * handler that interrupted nothing of heaptrail's (computed); seccomp: as
 * exit, under a filter that kills the process on process_vm_readv;
 * exit-thread: as exit, but a second thread calls exit while main waits
 * in pthread_join; exit-rbx: as exit, the only pointer to a block in rbx
 * at the exit call; epoll-many: as exit, with 70 more epoll descriptors
 * open (past the agent's list of them);
 * signal: ended by a signal while main spins (spin_until_signal);
 * reraise: the same, the signal taken by a handler of the program's
 * (SA_RESETHAND) that raises it again, as node's does; reraise-onstack:
 * that handler on the alternate signal stack; rekill: as reraise, the
 * handler sending the signal with kill(getpid()) (bash's way);
 * killself: after the scripted sites, main puts SIGINT's default back and
 * sends it with kill(getpid()), as Python ends after an uncaught Ctrl-C
 * (19 sites: none held in the exiting frame); raise-blocked: as exit,
 * main first raises SIGTERM while blocking it and takes it with
 * sigwaitinfo (prints "TOOK 15"): it ends nothing;
 * leakcheck: a leak check on demand while the program runs (`heaptrail
 * snapshot --leaks`): the blocks above, plus one whose only pointer is
 * the buffer argument of a read() a thread sleeps in, and one whose only
 * pointer is in a register of a spinning thread; it prints TRUTH lines
 * for the check, then "READY", and waits for a line on standard input;
 * then it frees the hidden block, drops one global pointer, and exits
 * with its TRUTH lines for exit prefixed "EXIT"; api: as exit, with a
 * call of ht_leak_check() first, from a frame holding the only pointer to
 * a block: prints its TRUTH lines prefixed "CHECK" and "API N", what the
 * call returned; ticking: as leakcheck, but the thread beside main wakes
 * from a timed wait every 10 ms (a JVM's periodic threads do) holding the
 * only pointer to a block in its frame, and 32 MiB of touched anonymous
 * memory make every scan of the roots take longer than that: a check
 * that scanned in place, with the thread asleep as it stands, was
 * spoiled by its waking every time; restless: eight threads that sleep 30
 * us at a time (timed waits: never parked), so a fork for a scan finds
 * one of them woke: the check looks again at those (parking the ones it
 * finds running) and forks anew, until one fork was not spoiled;
 * restless-masked: the same threads blocking every signal, so they can
 * never be parked and every fork is spoiled: the checks say why they were
 * not computed; dontfork: as ticking without the
 * ticker, the only pointer to a block kept in a mapping marked
 * MADV_DONTFORK (V8 marks its heap so), which a forked copy lacks: the
 * check must still reach the block (it scans in place), and the block a
 * spinning thread holds only in a register. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "heaptrail.h"
#include "noreadv.h"

#define NOINLINE __attribute__((noinline))

struct node { struct node *next; char pad[40]; };

/* Roots, with external linkage so the compiler keeps the stores (and the
 * allocations: gcc drops a malloc whose block is never used). */
void *held[5];
struct node *list_head;
char *interior;
void **region;                        /* the program's own anonymous mapping */
void **shared_region;                 /* ... and a shared one */
void **guarded;                       /* a heap buffer with a guard page */
void **sealed;                        /* a read-only table of pointers */
__thread void *tls_ptr;               /* static TLS of the main thread */
struct node *arena_holder;            /* a block a thread allocated */
volatile uintptr_t hidden;            /* a pointer no scan can see */
volatile uintptr_t hidden2;

/* makes the compiler believe p escapes, storing it nowhere */
static inline void escape(void *p) { __asm__ volatile("" : : "g"(p) : "memory"); }

/* Zeroes 16 KiB of the stack below the caller's frame: what earlier calls
 * left there (a lost block's address in a dead frame) is stale, and a
 * conservative scan that later finds it inside a live frame -- slots a
 * signal frame (sized by the CPU's XSAVE features) or a handler leaves
 * unwritten, a new thread's frames on a cached stack -- rightly counts
 * the block reachable. Scrubbed where a test's truth would otherwise
 * depend on the machine (seen: in-handler and thread-busy failed 4 runs
 * in 5 on one machine, never on another). */
NOINLINE static void scrub_stack(void)
{
    volatile char pad[16384];
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = 0;
}
static int g_scrub_thread;      /* thread_main scrubs: its cached stack is reused */

static struct { const char *name; int live, lost, ilost, plost; } truth[32];
static int ntruth;
static void note_p(const char *name, int live, int lost, int ilost, int plost)
{
    truth[ntruth].name = name;
    truth[ntruth].live = live;
    truth[ntruth].lost = lost;
    truth[ntruth].ilost = ilost;
    truth[ntruth].plost = plost;
    ntruth++;
}
static void note(const char *name, int live, int lost, int ilost) { note_p(name, live, lost, ilost, 0); }

/* 10 blocks whose pointers are dropped */
NOINLINE static void lost_plain(void)
{
    for (int i = 0; i < 10; i++) {
        void *volatile p = malloc(40);
        (void)p;
    }
    note("lost_plain", 10, 10, 0);
}

NOINLINE static void held_global(void)
{
    for (int i = 0; i < 5; i++)
        held[i] = malloc(64);
    note("held_global", 5, 0, 0);
}

NOINLINE static struct node *make_list(int n)
{
    struct node *h = NULL;
    for (int i = 0; i < n; i++) {
        struct node *x = malloc(sizeof *x);
        x->next = h;
        h = x;
    }
    return h;
}

/* a 7-node list from a global: all reachable */
NOINLINE static void held_list(void)
{
    list_head = make_list(7);
}

/* a 6-node list whose head is dropped: 1 direct, 5 indirect */
NOINLINE static void lost_list(void)
{
    struct node *volatile h = make_list(6);
    (void)h;
}

/* a 3-cycle nothing points to: one head, two indirect */
NOINLINE static void lost_cycle(void)
{
    struct node *a = malloc(sizeof *a), *b = malloc(sizeof *b), *c = malloc(sizeof *c);
    a->next = b;
    b->next = c;
    c->next = a;
    escape(a);
    note("lost_cycle", 3, 1, 2);
}

/* only a pointer into the middle of the block: possibly lost */
NOINLINE static void held_interior(void)
{
    interior = (char *)malloc(256) + 100;
    note_p("held_interior", 1, 0, 0, 1);
}

/* Pointers 8 bytes into a block, as memcheck's heuristics take them:
 * after a count that divides the rest of the block (a C++ new[] cookie:
 * 5 elements of 24 bytes; a length prefix, as sqlite3's allocator keeps
 * one) they are as good as pointers to its start; after a word that does
 * not (7 does not divide 30) the block is possibly lost. */
void *cookie_array, *length_prefixed, *not_a_cookie;
NOINLINE static void held_offset8(void)
{
    uint64_t *a = malloc(8 + 5 * 24), *b = malloc(8 + 64), *c = malloc(8 + 30);
    a[0] = 5;
    b[0] = 64;
    c[0] = 7;
    cookie_array = a + 1;
    length_prefixed = b + 1;
    not_a_cookie = c + 1;
    note_p("held_offset8", 3, 0, 0, 1);
}

/* A C++ object with two bases, held through a pointer to its second
 * base's subobject (16 bytes in), laid out as the Itanium ABI does: each
 * vtable pointer points past its offset-to-top (0, then -16) and RTTI
 * words. The same with a wrong offset-to-top is possibly lost. */
static void vfn(void) {}
static const uintptr_t vt_primary[3] = { 0, 0, (uintptr_t)vfn };
static const uintptr_t vt_second[3] = { (uintptr_t)-16, 0, (uintptr_t)vfn };
static const uintptr_t vt_wrong[3] = { (uintptr_t)-8, 0, (uintptr_t)vfn };
void *as_second_base, *as_wrong_base;
NOINLINE static void held_second_base(void)
{
    uintptr_t *o = malloc(32), *w = malloc(32);
    o[0] = w[0] = (uintptr_t)&vt_primary[2];
    o[1] = w[1] = 42;
    o[2] = (uintptr_t)&vt_second[2];
    w[2] = (uintptr_t)&vt_wrong[2];
    o[3] = w[3] = 7;
    as_second_base = o + 2;
    as_wrong_base = w + 2;
    note_p("held_second_base", 2, 0, 0, 1);
}

/* A 3-block list whose head only a pointer into its middle holds: all
 * three possibly lost (what only such a chain reaches is) */
char *chain_interior;
NOINLINE static void possible_chain(void)
{
    struct node *c = malloc(sizeof *c), *b = malloc(sizeof *b);
    struct node *a = malloc(64);
    c->next = NULL;
    b->next = c;
    a->next = b;
    chain_interior = (char *)a + 24;
    note_p("possible_chain", 3, 0, 0, 3);
}

NOINLINE static void held_tls(void)
{
    tls_ptr = malloc(72);
    note("held_tls", 1, 0, 0);
}

/* held from anonymous mappings the program made: a private one, and a
 * shared one of 1 MiB whose only touched page is 600 KiB in (a scan
 * skips the pages never touched, and a forked scan's child must not take
 * the shared mapping's for untouched: a fork does not copy its page
 * table entries) */
NOINLINE static void held_mmap(void)
{
    region = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    region[100] = malloc(88);
    shared_region = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || shared_region == MAP_FAILED)
        abort();
    shared_region[600 << 7] = malloc(56);
    note("held_mmap", 4, 0, 0);       /* the regions themselves and the blocks */
}

/* held only from a heap buffer whose first page the program made a
 * guard page (mprotect PROT_NONE, as for a stack taken from malloc): the
 * buffer spans two mappings, and its readable part must be scanned */
NOINLINE static void held_guarded(void)
{
    if (posix_memalign((void **)&guarded, 4096, 3 * 4096) != 0 || mprotect(guarded, 4096, PROT_NONE) != 0)
        abort();
    guarded[2 * 512 + 1] = malloc(40);  /* in its third page */
    note("held_guarded", 2, 0, 0);
}

/* held only by the kernel: the data word of an epoll registration (an
 * event loop's connection state) */
NOINLINE static void held_epoll(void)
{
    int ep = epoll_create1(EPOLL_CLOEXEC), p[2];
    if (ep < 0 || pipe(p) != 0)
        abort();
    struct epoll_event ev = { .events = EPOLLIN };
    ev.data.ptr = malloc(48);
    if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0)
        abort();
    *(void *volatile *)&ev.data.ptr = NULL;
    note("held_epoll", 1, 0, 0);
}

/* held only by the kernel: a POSIX timer's sigevent value (the timer's
 * context), never armed */
NOINLINE static void held_timer(void)
{
    timer_t t;
    struct sigevent se = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR2 };
    se.sigev_value.sival_ptr = malloc(24);
    if (timer_create(CLOCK_MONOTONIC, &se, &t) != 0)
        abort();
    *(void *volatile *)&se.sigev_value.sival_ptr = NULL;
    note("held_timer", 1, 0, 0);
}

/* held only by the kernel: this thread's alternate signal stack, taken
 * from malloc for a crash handler */
NOINLINE static void held_altstack(void)
{
    stack_t ss = { .ss_size = 64 << 10 };
    ss.ss_sp = malloc(ss.ss_size);
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
        abort();
    *(void *volatile *)&ss.ss_sp = NULL;
    note("held_altstack", 1, 0, 0);
}

/* held from a table the program sealed read-only (mprotect) after
 * filling it */
NOINLINE static void held_sealed(void)
{
    sealed = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sealed == MAP_FAILED)
        abort();
    sealed[7] = malloc(32);
    if (mprotect(sealed, 4096, PROT_READ) != 0)
        abort();
    note("held_sealed", 2, 0, 0);     /* the mapping itself and the block */
}

/* the pointer is stored xor-ed */
NOINLINE static void lost_hidden(void)
{
    hidden = (uintptr_t)malloc(24) ^ 0x5555555555555555ull;
    note("lost_hidden", 1, 1, 0);
}

/* the only pointer is in a block freed since: free memory is no root */
NOINLINE static void lost_freed_holder(void)
{
    void **holder = malloc(64);
    holder[4] = malloc(48);
    escape(holder);
    free(holder);
    note("lost_freed_holder", 1, 1, 0);
}

/* a thread's blocks come from another glibc arena: a reachable chain
 * (global -> block -> block) and a lost block, the thread joined before
 * exit (its cached stack still holds the lost block's address) */
NOINLINE static void thread_lost(void) { void *volatile p = malloc(120); (void)p; }
NOINLINE static struct node *thread_held(void) { return malloc(sizeof(struct node)); }
static void *thread_main(void *arg)
{
    (void)arg;
    arena_holder = thread_held();
    arena_holder->next = thread_held();
    thread_lost();
    if (g_scrub_thread)
        scrub_stack();
    return NULL;
}

static pthread_mutex_t never = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t ready;
NOINLINE static void *running_held(void) { return malloc(136); }
NOINLINE static void running_lost(void) { void *volatile p = malloc(152); (void)p; }
static volatile int spin = 1;
static volatile pid_t other_tid;

/* Waits until the other thread sleeps in a system call (at most ~2 s). */
static void wait_asleep(void)
{
    char path[64], b[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)other_tid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        int n = f ? (int)fread(b, 1, sizeof b - 1, f) : 0;
        if (f)
            fclose(f);
        b[n > 0 ? n : 0] = 0;
        if (b[0] >= '0' && b[0] <= '9')
            return;
        usleep(1000);
    }
}
NOINLINE static void *register_held(void) { return malloc(168); }
NOINLINE static void *vector_held(void) { return malloc(176); }
volatile uintptr_t hidden3;
volatile uintptr_t hidden4;
int futex_word;                       /* stays 0: the futex wait never ends */
static int sleep_pipe[2];             /* nothing is written: a read sleeps */
NOINLINE static void *futex_held(void) { return malloc(232); }
static volatile int vector_loaded;
static void *blocked_main(void *arg)
{
    other_tid = (pid_t)syscall(SYS_gettid);
    if (arg == (void *)3) {
        /* the block's only pointer lives in a register: nothing stores it */
        void *r = register_held();
        pthread_barrier_wait(&ready);
        /* copies of it the calls left below the stack pointer: cleared */
        __asm__ volatile("lea -4096(%%rsp), %%rdi\n\tmov $512, %%ecx\n\txor %%eax, %%eax\n\trep stosq"
                         : "+r"(r)
                         :
                         : "rax", "rcx", "rdi", "memory");
        for (;;)
            __asm__ volatile("" : "+r"(r));
    }
    if (arg == (void *)4) {
        /* the block's only pointer lives in a vector register (as in a
         * memmove's), not in memory nor in a general register */
        hidden3 = (uintptr_t)vector_held() ^ 0x7777777777777777ull;
        pthread_barrier_wait(&ready);
        __asm__ volatile("mov hidden3(%%rip), %%rax\n\tmov $0x7777777777777777, %%rcx\n\t"
                         "xor %%rcx, %%rax\n\tmovq %%rax, %%xmm7\n\t"
                         "lea -4096(%%rsp), %%rdi\n\tmov $512, %%ecx\n\txor %%eax, %%eax\n\trep stosq"
                         :
                         :
                         : "rax", "rcx", "rdi", "xmm7", "memory");
        vector_loaded = 1;              /* main may exit now */
        for (;;)
            __asm__ volatile("" ::: "memory");
    }
    if (arg == (void *)5) {
        /* the block's only pointer lives in a callee-saved register (r12)
         * while the thread sleeps in a futex wait, as a pool's worker
         * waiting on a condition variable may: a futex wait is restarted
         * unseen after a signal, so the agent parks it and reads r12 */
        hidden4 = (uintptr_t)futex_held() ^ 0x1111111111111111ull;
        pthread_barrier_wait(&ready);
        __asm__ volatile("mov hidden4(%%rip), %%r12\n\tmov $0x1111111111111111, %%rax\n\t"
                         "xor %%rax, %%r12\n\t"
                         "lea -4096(%%rsp), %%rdi\n\tmov $512, %%ecx\n\txor %%eax, %%eax\n\trep stosq\n\t"
                         "1:\n\tlea futex_word(%%rip), %%rdi\n\tmov $128, %%esi\n\t"   /* FUTEX_WAIT_PRIVATE */
                         "xor %%edx, %%edx\n\txor %%r10d, %%r10d\n\tmov $202, %%eax\n\tsyscall\n\tjmp 1b"
                         :
                         :
                         : "rax", "rcx", "rdx", "rsi", "rdi", "r10", "r11", "r12", "memory");
    }
    if (arg == (void *)6) {
        /* sem_timedwait: a futex wait with a timeout, which a signal
         * handler would end with EINTR: must not be signalled */
        void *volatile held = running_held();
        pthread_barrier_wait(&ready);
        sem_t sem;
        sem_init(&sem, 0, 0);
        for (;;) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 60;
            if (sem_timedwait(&sem, &ts) != 0 && errno == EINTR)
                (void)!write(1, "SEM EINTR\n", 10);
        }
        (void)held;
    }
    if (arg) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    void *volatile mine = running_held();
    running_lost();
    pthread_barrier_wait(&ready);
    if (arg == (void *)2)
        while (spin)
            ;
    if (arg == (void *)1) {
        /* waits for any signal, as a signal-handling thread does: the
         * agent must not send it one (it would take it for its own) */
        sigset_t all;
        sigfillset(&all);
        for (;;) {
            siginfo_t si;
            int sig = sigwaitinfo(&all, &si);
            if (sig > 0) {
                char msg[] = "GOT SIGNAL 00\n";
                msg[11] = (char)('0' + sig / 10);
                msg[12] = (char)('0' + sig % 10);
                write(1, msg, sizeof msg - 1);
            }
        }
    }
    char c;
    (void)!read(sleep_pipe[0], &c, 1);  /* nothing comes: sleeps until exit */
    return (void *)mine;
}

static void report_as(const char *prefix)
{
    for (int i = 0; i < ntruth; i++)
        printf("%sTRUTH site=%s live=%d lost=%d ilost=%d plost=%d\n", prefix, truth[i].name, truth[i].live,
               truth[i].lost, truth[i].ilost, truth[i].plost);
    fflush(stdout);
}
static void report(void) { report_as(""); }

/* leakcheck: a thread asleep in read() on a pipe, the buffer's only
 * pointer in the system call's argument register (computed from a
 * disguised copy right before the call, kept nowhere else) */
static int wake_pipe[2];
void *syscall_holder;
NOINLINE static void *syscall_held(void) { return malloc(184); }
static void *reader_main(void *arg)
{
    (void)arg;
    hidden2 = (uintptr_t)syscall_held() ^ 0x3333333333333333ull;
    other_tid = (pid_t)syscall(SYS_gettid);
    pthread_barrier_wait(&ready);
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"((long)SYS_read), "D"((long)wake_pipe[0]),
                       "S"(hidden2 ^ 0x3333333333333333ull), "d"(1L)
                     : "rcx", "r11", "memory");
    (void)r;
    syscall_holder = (void *)(hidden2 ^ 0x3333333333333333ull);
    pthread_mutex_lock(&never);         /* held by main: blocks until exit */
    return NULL;
}

/* The truth of a check, READY, then waits for a line from standard
 * input (the checks are done). */
static void ready_then_wait(void)
{
    report();
    printf("READY\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        abort();
}

/* ... then the truth of the exit, unchanged, and the exit */
static void checked_then_exit(void)
{
    ready_then_wait();
    report_as("EXIT");
    exit(0);
}

NOINLINE static void leakcheck(void)
{
    pthread_t t;
    pthread_mutex_lock(&never);
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&t, NULL, blocked_main, (void *)3);      /* spins, a pointer in a register */
    pthread_barrier_wait(&ready);
    note("register_held", 1, 0, 0);
    if (pipe(wake_pipe) != 0)
        abort();
    pthread_barrier_destroy(&ready);
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&t, NULL, reader_main, NULL);
    pthread_barrier_wait(&ready);
    wait_asleep();
    note("syscall_held", 1, 0, 0);
    ready_then_wait();
    /* the check is done: change the truth for the exit */
    free((void *)(hidden ^ 0x5555555555555555ull));
    for (int i = 0; i < ntruth; i++)
        if (!strcmp(truth[i].name, "lost_hidden"))
            truth[i].live = truth[i].lost = 0;
    held[0] = NULL;
    for (int i = 0; i < ntruth; i++)
        if (!strcmp(truth[i].name, "held_global"))
            truth[i].lost = 1;
    (void)!write(wake_pipe[1], "x", 1);  /* the reader keeps its block in a global */
    for (int i = 0; i < 1000 && !syscall_holder; i++)
        usleep(1000);
    report_as("EXIT");
    exit(0);
}


/* ticking: a thread that wakes every 10 ms, a block only in its frame */
static volatile int ticks;
NOINLINE static void *ticker_held(void) { return malloc(264); }
static void *ticker_main(void *arg)
{
    (void)arg;
    void *volatile mine = ticker_held();
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_barrier_wait(&ready);
    pthread_mutex_lock(&m);
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c, &m, &ts);
        ticks++;
    }
    (void)mine;
    return NULL;
}

NOINLINE static void ticking(void)
{
    pthread_t t;
    size_t big = 32u << 20;
    char *roots = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (roots == MAP_FAILED)
        abort();
    memset(roots, 1, big);
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&t, NULL, ticker_main, NULL);
    pthread_barrier_wait(&ready);
    while (ticks < 3)
        usleep(1000);
    note("ticker_held", 1, 0, 0);
    checked_then_exit();
}

/* restless: threads that wake every 30 us */
static void *restless_main(void *arg)
{
    if (arg) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    prctl(PR_SET_TIMERSLACK, 1ul, 0, 0, 0);
    pthread_barrier_wait(&ready);
    for (;;) {
        struct timespec ts = { 0, 30000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

NOINLINE static void restless(int masked)
{
    pthread_t t;
    pthread_barrier_init(&ready, NULL, 9);
    for (int i = 0; i < 8; i++)
        pthread_create(&t, NULL, restless_main, masked ? (void *)1 : NULL);
    pthread_barrier_wait(&ready);
    checked_then_exit();
}

/* dontfork: a block held only from a MADV_DONTFORK mapping */
NOINLINE static void *dontfork_held(void) { return malloc(280); }
NOINLINE static void dontfork(void)
{
    void **page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || madvise(page, 4096, MADV_DONTFORK) != 0)
        abort();
    page[7] = dontfork_held();
    note("dontfork_held", 1, 0, 0);
    /* and a running thread, which the scan in place must stop afresh
     * after the forked try stopped and released it */
    pthread_t t;
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&t, NULL, blocked_main, (void *)3);      /* spins, a pointer in a register */
    pthread_barrier_wait(&ready);
    note("register_held", 1, 0, 0);
    checked_then_exit();
}

/* exits with the only pointer to a block in this frame */
NOINLINE static void held_stack_then_exit(void)
{
    void *volatile p = malloc(200);
    note("held_stack_then_exit", 1, 0, 0);
    report();
    exit(0);
    (void)p;
}

/* api: ht_leak_check() from a frame that holds the only pointer to a
 * block; prints what it returned, then exits as in exit mode */
NOINLINE static void held_stack_then_check(void)
{
    void *volatile p = malloc(216);
    note("held_stack_then_check", 1, 0, 0);
    long lost = ht_leak_check();
    report_as("CHECK");
    printf("API %ld\n", lost);
    fflush(stdout);
    (void)p;
}

static void *exiting_main(void *arg)
{
    (void)arg;
    held_stack_then_exit();
    return NULL;
}

/* exit-rbx: exits with the only pointer to a block in rbx (a
 * callee-saved register the exit hook must read before it uses it) */
volatile uintptr_t hidden5;
NOINLINE static void *rbx_held(void) { return malloc(248); }
NOINLINE static void exit_with_rbx(void)
{
    hidden5 = (uintptr_t)rbx_held() ^ 0x2222222222222222ull;
    note("rbx_held", 1, 0, 0);
    report();
    __asm__ volatile("mov hidden5(%%rip), %%rbx\n\tmov $0x2222222222222222, %%rax\n\t"
                     "xor %%rax, %%rbx\n\t"
                     "lea -4096(%%rsp), %%rdi\n\tmov $512, %%ecx\n\txor %%eax, %%eax\n\trep stosq\n\t"
                     "and $-16, %%rsp\n\txor %%edi, %%edi\n\tcall exit@PLT"
                     :
                     :
                     : "rax", "rbx", "rcx", "rdi", "memory");
    __builtin_unreachable();
}

/* signal: ends by a signal (SIGTERM, Ctrl-C) that comes while main spins
 * with the only pointers to two blocks in r13 and xmm15 (disguised in
 * globals until the spin loads them, the stack below scrubbed): the leak
 * check the signal gets must read the registers it interrupted. Prints
 * SPINNING, by a system call that leaves r13 and xmm15 alone, once they
 * hold the pointers. The alternate signal stack is turned off first (its
 * block kept in a global): on it, the signal frame, which holds the
 * registers too, would lie in a block the scan reads anyway; here it lands
 * on the stack below the red zone, where the check does not look. */
NOINLINE static void *signal_r13_held(void) { return malloc(88); }
NOINLINE static void *signal_xmm_held(void) { return malloc(104); }
volatile uintptr_t hidden6, hidden7;
void *altstack_kept;
NOINLINE static void spin_until_signal(int onstack)
{
    stack_t ss, off = { .ss_flags = SS_DISABLE };
    if (sigaltstack(NULL, &ss) != 0 || (altstack_kept = ss.ss_sp) == NULL ||
        (!onstack && sigaltstack(&off, NULL) != 0))
        abort();
    hidden6 = (uintptr_t)signal_r13_held() ^ 0x3333333333333333ull;
    hidden7 = (uintptr_t)signal_xmm_held() ^ 0x4444444444444444ull;
    note("signal_r13_held", 1, 0, 0);
    note("signal_xmm_held", 1, 0, 0);
    report();
    scrub_stack();
    static const char spinning[] = "SPINNING\n";
    __asm__ volatile("mov hidden6(%%rip), %%r13\n\tmov $0x3333333333333333, %%rax\n\txor %%rax, %%r13\n\t"
                     "mov hidden7(%%rip), %%rdx\n\tmov $0x4444444444444444, %%rax\n\txor %%rax, %%rdx\n\t"
                     "movq %%rdx, %%xmm15\n\t"
                     "mov $1, %%eax\n\tmov $1, %%edi\n\tlea %[msg], %%rsi\n\tmov $9, %%edx\n\tsyscall\n\t"
                     "xor %%eax, %%eax\n\txor %%edx, %%edx\n"
                     "1:\tpause\n\tjmp 1b"
                     :
                     : [msg] "m"(spinning)
                     : "rax", "rcx", "rdx", "rsi", "rdi", "r11", "r13", "xmm15", "memory");
    __builtin_unreachable();
}

/* reraise: the program's own handler for the ending signals, which puts
 * the default back (SA_RESETHAND) and raises the signal again, ending the
 * process once it returns (node's SignalExit, after it restores the
 * terminal). The agent's handler is replaced: the raise must be seen. */
static int resend_by_kill;

static void reraise(int sig)
{
    static const char handled[] = "HANDLED\n";
    if (write(1, handled, sizeof handled - 1) < 0)
        _exit(3);
    if (resend_by_kill)
        kill(getpid(), sig);
    else
        raise(sig);
}

static void take_ending_signals(int onstack)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reraise;
    sa.sa_flags = SA_RESETHAND | (onstack ? SA_ONSTACK : 0);
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        abort();
}

/* raise-blocked: SIGTERM raised while blocked is the program's to take,
 * as a program with a signal-handling thread or a signalfd takes it. The
 * default disposition is set first (node sets every signal's at start),
 * replacing the agent's handler, as it would be for a raise that ends */
static void raise_blocked(void)
{
    sigset_t term;
    siginfo_t si;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    if (signal(SIGTERM, SIG_DFL) == SIG_ERR || sigprocmask(SIG_BLOCK, &term, NULL) != 0 || raise(SIGTERM) != 0 ||
        sigwaitinfo(&term, &si) != SIGTERM)
        abort();
    printf("TOOK %d\n", si.si_signo);
}

static void on_usr1(int sig)
{
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (!strcmp(mode, "seccomp"))
        forbid_process_vm_readv("reach: seccomp");
    lost_plain();
    held_global();
    held_list();
    lost_list();
    note("make_list", 13, 1, 5);        /* 7 held + 6 lost */
    lost_cycle();
    held_interior();
    held_offset8();
    held_second_base();
    possible_chain();
    held_tls();
    held_mmap();
    held_guarded();
    held_epoll();
    held_timer();
    held_altstack();
    held_sealed();
    lost_hidden();
    lost_freed_holder();
    pthread_t t;
    /* the thread-* modes start a second thread, on the first one's
     * cached stack, where thread_lost's address lies stale */
    g_scrub_thread = !strncmp(mode, "thread-", 7);
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    note("thread_held", 2, 0, 0);
    note("thread_lost", 1, 1, 0);
    if (!strncmp(mode, "thread-", 7)) {
        if (pipe(sleep_pipe) != 0)
            abort();
        pthread_mutex_lock(&never);
        pthread_barrier_init(&ready, NULL, 2);
        pthread_create(&t, NULL, blocked_main,
                       !strcmp(mode, "thread-masked")     ? (void *)1
                       : !strcmp(mode, "thread-spinning") ? (void *)2
                       : !strcmp(mode, "thread-busy")     ? (void *)3
                       : !strcmp(mode, "thread-vector")   ? (void *)4
                       : !strcmp(mode, "thread-futex")    ? (void *)5
                       : !strcmp(mode, "thread-timedwait") ? (void *)6
                                                          : NULL);
        pthread_barrier_wait(&ready);
        if (!strcmp(mode, "thread-busy")) {
            note("register_held", 1, 0, 0);
        } else if (!strcmp(mode, "thread-futex")) {
            wait_asleep();
            note("futex_held", 1, 0, 0);
        } else if (!strcmp(mode, "thread-timedwait")) {
            wait_asleep();
            note("running_held", 1, 0, 0);
        } else if (!strcmp(mode, "thread-vector")) {
            while (!vector_loaded)
                usleep(1000);
            note("vector_held", 1, 0, 0);
        } else {
            if (strcmp(mode, "thread-spinning"))
                wait_asleep();
            note("running_held", 1, 0, 0);
            note("running_lost", 1, 1, 0);
        }
        report();
        exit(0);
    }
    if (!strcmp(mode, "leakcheck"))
        leakcheck();
    if (!strcmp(mode, "ticking"))
        ticking();
    if (!strcmp(mode, "dontfork"))
        dontfork();
    if (!strcmp(mode, "restless"))
        restless(0);
    if (!strcmp(mode, "restless-masked"))
        restless(1);
    if (!strcmp(mode, "api"))
        held_stack_then_check();
    if (!strcmp(mode, "exit-rbx"))
        exit_with_rbx();
    if (!strcmp(mode, "exit-thread")) {
        /* another thread calls exit while main waits for it: main's
         * static TLS (in a mapping of the loader's, beside its TCB) is
         * still a root */
        pthread_create(&t, NULL, exiting_main, NULL);
        pthread_join(t, NULL);
    }
    if (!strcmp(mode, "epoll-many")) {
        /* more epoll descriptors than the agent notes one by one: the
         * scan looks through every descriptor for them instead */
        for (int i = 0; i < 70; i++)
            if (epoll_create1(EPOLL_CLOEXEC) < 0)
                abort();
    }
    if (!strcmp(mode, "in-handler")) {
        report();
        scrub_stack();          /* the signal frame lands on dead frames */
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
    }
    if (!strcmp(mode, "signal"))
        spin_until_signal(0);
    if (!strcmp(mode, "reraise") || !strcmp(mode, "reraise-onstack") || !strcmp(mode, "rekill")) {
        int onstack = !strcmp(mode, "reraise-onstack");
        resend_by_kill = !strcmp(mode, "rekill");
        take_ending_signals(onstack);
        spin_until_signal(onstack);
    }
    if (!strcmp(mode, "killself")) {
        report();
        scrub_stack();
        if (signal(SIGINT, SIG_DFL) == SIG_ERR)
            abort();
        kill(getpid(), SIGINT);
        abort();
    }
    if (!strcmp(mode, "raise-blocked"))
        raise_blocked();
    held_stack_then_exit();
    return 0;
}
