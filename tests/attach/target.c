/* target.c -- a program the injector (src/analyze/inject.c) joins while it
 * runs, for tests/attach/inject.sh. Each mode leaves exactly one kind of
 * thread at a safe point, so that the test knows which thread is taken.
 *
 *   target main      the main thread reads commands (standard input) with
 *                    a raw `syscall` holding known values in ymm0-15, MXCSR,
 *                    the x87 control word and r8-r14 across it; a thread
 *                    computes without system calls, one sleeps 2 ms at a
 *                    time (nanosleep). Commands, one a line:
 *                      watch PATH  the signal handlers count "after" when
 *                                  PATH exists as they run; says "watching"
 *                      ping        says "pong"
 *                      quit        ends: the summary line, exit 0 if no
 *                                  register changed across a read and no
 *                                  sleep ended early or with EINTR
 *                    SIGUSR1's handler has SA_RESTART, SIGUSR2's not (its
 *                    read returns EINTR, counted); other threads block both.
 *   target sleeper   only the sleeping thread waits (the main thread joins
 *                    it: futex); it ends when PATH (argv[2]) exists.
 *   target epoll     only a thread in epoll_wait on standard input waits;
 *                    reads commands there (ping, quit).
 *   target ppoll     only a thread in ppoll on standard input waits, with a
 *                    mask that lets SIGUSR2 in (blocked everywhere else);
 *                    reads commands there (watch, ping, quit); checks its
 *                    mask after each ppoll.
 *   target smallstack PATH   a thread with a 64 KiB stack reads commands
 *                    (ping, quit) in read(): no room for the calls; only
 *                    the sleeping thread (its default stack) is to be
 *                    taken; the sleeper ends when PATH exists.
 *   target busy S    every thread computes for S seconds (one waits in
 *                    futex with a 1 ms timeout, never a safe point), then
 *                    exits 0 if no futex wait ended early.
 *
 * At start: prctl(PR_SET_PTRACER_ANY) (Yama scope 1), then "ready pid=P
 * tid=T" (T: the thread that should be taken). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile unsigned long spins;
static volatile sig_atomic_t usr1, usr2, after;
static char watched[4096];
static int sleep_eintr, sleep_short, futex_bad;
static pid_t waiter_tid;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        usr1++;
    else
        usr2++;
    if (watched[0] && access(watched, F_OK) == 0)
        after++;
}

static void block_usr(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void *spin(void *arg)
{
    block_usr();
    double end = arg ? now() + *(double *)arg : 0;
    while (!stop && (!arg || now() < end))
        spins++;
    return NULL;
}

/* nanosleep 2 ms (20 ms when alone) at a time until stop, or until PATH
 * exists */
static void *sleeper(void *arg)
{
    block_usr();
    waiter_tid = (pid_t)syscall(SYS_gettid);
    long ms = arg ? 20 : 2;
    while (!stop) {
        struct timespec ts = { 0, ms * 1000000 };
        double t0 = now();
        if (nanosleep(&ts, NULL) != 0)
            sleep_eintr++;
        else if (now() - t0 < ms / 1000.0)
            sleep_short++;
        if (arg && access((const char *)arg, F_OK) == 0)
            break;
    }
    return NULL;
}

/* futex waits of 1 ms on a word nobody changes: each must time out */
static void *futex_waiter(void *arg)
{
    block_usr();
    static int word;
    while (!stop) {
        struct timespec ts = { 0, 1000000 };
        double t0 = now();
        long r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
        if (r != -1 || errno != ETIMEDOUT || now() - t0 < 0.001)
            futex_bad++;
    }
    return NULL;
}

/* ---- the main thread's read, registers checked across it ---------------- */

struct regs_check {
    unsigned char vin[16][32], vout[16][32];
    uint64_t gout[7];
    uint32_t mx, mxo;
    uint16_t cw, cwo;
};
static int have_avx, clobbered;
static const uint64_t gin[7] = { 0x1111111111111108, 0x2222222222222209, 0x333333333333330a, 0x444444444444440c,
                                 0x555555555555550d, 0x666666666666660e, 0x777777777777770b };

#define LOAD(i, op) op " " #i "*32(%%r15), %%" REG(i) "\n\t"
#define STORE(i, op) op " %%" REG(i) ", 512+" #i "*32(%%r15)\n\t"
#define ALL16(M, op) M(0, op) M(1, op) M(2, op) M(3, op) M(4, op) M(5, op) M(6, op) M(7, op) \
    M(8, op) M(9, op) M(10, op) M(11, op) M(12, op) M(13, op) M(14, op) M(15, op)
#define GPR_IN                                                                                            \
    "mov 1024(%%r15), %%r8\n\t mov 1032(%%r15), %%r9\n\t mov 1040(%%r15), %%r10\n\t"                     \
    "mov 1048(%%r15), %%r12\n\t mov 1056(%%r15), %%r13\n\t mov 1064(%%r15), %%r14\n\t"                   \
    "mov 1072(%%r15), %%rbx\n\t"
#define GPR_OUT                                                                                           \
    "mov %%r8, 1024(%%r15)\n\t mov %%r9, 1032(%%r15)\n\t mov %%r10, 1040(%%r15)\n\t"                     \
    "mov %%r12, 1048(%%r15)\n\t mov %%r13, 1056(%%r15)\n\t mov %%r14, 1064(%%r15)\n\t"                   \
    "mov %%rbx, 1072(%%r15)\n\t"
#define FP_IN "ldmxcsr 1080(%%r15)\n\t fldcw 1088(%%r15)\n\t"
#define FP_OUT "stmxcsr 1084(%%r15)\n\t fnstcw 1090(%%r15)\n\t"
#define CLOBBERS "rcx", "r11", "r8", "r9", "r10", "r12", "r13", "r14", "rbx", "memory", "xmm0", "xmm1", "xmm2", \
    "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

/* read(2) by a bare `syscall` (glibc's wrapper is a call: the ABI would let
 * it clobber vector registers, the kernel does not) */
static long checked_read(int fd, void *buf, size_t n)
{
    static struct regs_check c;
    _Static_assert(__builtin_offsetof(struct regs_check, gout) == 1024, "layout");
    _Static_assert(__builtin_offsetof(struct regs_check, mx) == 1080, "layout");
    _Static_assert(__builtin_offsetof(struct regs_check, cw) == 1088, "layout");
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 32; j++)
            c.vin[i][j] = (unsigned char)(i * 32 + j + 1);
    memcpy(c.gout, gin, sizeof gin);
    c.mx = 0xff80; /* round toward zero, flush to zero */
    c.cw = 0x0c7f; /* round toward zero */
    long ret;
    register struct regs_check *p asm("r15") = &c;
    if (have_avx) {
#define REG(i) "ymm" #i
        asm volatile(ALL16(LOAD, "vmovdqu") GPR_IN FP_IN "syscall\n\t" ALL16(STORE, "vmovdqu") GPR_OUT FP_OUT
                     : "=a"(ret)
                     : "a"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(n), "r"(p)
                     : CLOBBERS);
#undef REG
    } else {
#define REG(i) "xmm" #i
        asm volatile(ALL16(LOAD, "movdqu") GPR_IN FP_IN "syscall\n\t" ALL16(STORE, "movdqu") GPR_OUT FP_OUT
                     : "=a"(ret)
                     : "a"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(n), "r"(p)
                     : CLOBBERS);
#undef REG
        for (int i = 0; i < 16; i++)
            memcpy(c.vout[i] + 16, c.vin[i] + 16, 16);
    }
    asm volatile("ldmxcsr %0\n\t fldcw %1" : : "m"((uint32_t){ 0x1f80 }), "m"((uint16_t){ 0x037f }));
    if (memcmp(c.vin, c.vout, sizeof c.vin) || memcmp(c.gout, gin, sizeof gin) || c.mxo != c.mx || c.cwo != c.cw) {
        if (!clobbered)
            fprintf(stderr, "registers changed across read: vec %d gpr %d mxcsr %#x x87cw %#x\n",
                    memcmp(c.vin, c.vout, sizeof c.vin) != 0, memcmp(c.gout, gin, sizeof gin) != 0, c.mxo, c.cwo);
        clobbered = 1;
    }
    return ret;
}

/* ---- commands ------------------------------------------------------------- */

static int eintr, reads;

/* One command line by `get` (a byte at a time): its length, -1 at the end. */
static int get_line(long (*get)(char *), char *buf, int cap)
{
    int n = 0;
    for (;;) {
        long k = get(buf + n);
        if (k == -EINTR) {
            eintr++;
            continue;
        }
        if (k <= 0)
            return n ? n : -1;
        if (buf[n] == '\n')
            break;
        if (n < cap - 1)
            n++;
    }
    buf[n] = 0;
    return n;
}

/* 1 to go on, 0 at quit */
static int command(const char *line)
{
    if (!strncmp(line, "watch ", 6)) {
        snprintf(watched, sizeof watched, "%s", line + 6);
        printf("watching\n");
    } else if (!strcmp(line, "ping")) {
        printf("pong\n");
    } else if (!strcmp(line, "quit")) {
        return 0;
    } else {
        printf("unknown command %s\n", line);
    }
    fflush(stdout);
    return 1;
}

static long get_main(char *c)
{
    reads++;
    return checked_read(0, c, 1);
}

static long get_plain(char *c)
{
    long k = read(0, c, 1);
    return k < 0 ? -errno : k;
}

static int epoll_eintr;
static void *epoller(void *arg)
{
    block_usr();
    waiter_tid = (pid_t)syscall(SYS_gettid);
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN }, got;
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
    char line[256];
    for (;;) {
        int k = epoll_wait(ep, &got, 1, -1);
        if (k < 0) {
            epoll_eintr++;
            continue;
        }
        if (get_line(get_plain, line, sizeof line) < 0 || !command(line))
            break;
    }
    return NULL;
}

static int read_eintr;
static void *reader(void *arg)
{
    block_usr();
    char line[256];
    for (;;) {
        int n = get_line(get_plain, line, sizeof line);
        read_eintr += eintr;
        eintr = 0;
        if (n < 0 || !command(line))
            break;
    }
    return NULL;
}

static int ppoll_eintr, mask_bad;
static void *ppoller(void *arg)
{
    block_usr();
    waiter_tid = (pid_t)syscall(SYS_gettid);
    sigset_t during, cur;
    pthread_sigmask(SIG_BLOCK, NULL, &during);
    sigdelset(&during, SIGUSR2);
    char line[256];
    for (;;) {
        struct pollfd p = { 0, POLLIN, 0 };
        int k = ppoll(&p, 1, NULL, &during);
        pthread_sigmask(SIG_BLOCK, NULL, &cur);
        if (!sigismember(&cur, SIGUSR2))
            mask_bad++;
        if (k < 0) {
            ppoll_eintr++;
            continue;
        }
        if (get_line(get_plain, line, sizeof line) < 0 || !command(line))
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    __builtin_cpu_init();
    have_avx = __builtin_cpu_supports("avx");
    struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_flags = 0;
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t a, b, c;
    pid_t pid = getpid();

    if (!strcmp(mode, "main")) {
        pthread_create(&a, NULL, spin, NULL);
        pthread_create(&b, NULL, sleeper, NULL);
        printf("ready pid=%d tid=%d\n", pid, pid);
        char line[4200];
        while (get_line(get_main, line, sizeof line) >= 0 && command(line))
            ;
        stop = 1;
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        printf("main: eintr=%d usr1=%d usr2=%d after=%d regs=%s sleep_eintr=%d sleep_short=%d\n", eintr, (int)usr1,
               (int)usr2, (int)after, clobbered ? "CHANGED" : "kept", sleep_eintr, sleep_short);
        return clobbered || sleep_eintr || sleep_short ? 1 : 0;
    }
    if (!strcmp(mode, "sleeper")) {
        pthread_create(&a, NULL, spin, NULL);
        pthread_create(&b, NULL, sleeper, argv[2]);
        while (!waiter_tid)
            usleep(1000);
        printf("ready pid=%d tid=%d\n", pid, waiter_tid);
        pthread_join(b, NULL);
        stop = 1;
        pthread_join(a, NULL);
        printf("sleeper: eintr=%d short=%d\n", sleep_eintr, sleep_short);
        return sleep_eintr || sleep_short ? 1 : 0;
    }
    if (!strcmp(mode, "epoll") || !strcmp(mode, "ppoll")) {
        block_usr();
        int ep = !strcmp(mode, "epoll");
        pthread_create(&a, NULL, spin, NULL);
        pthread_create(&b, NULL, ep ? epoller : ppoller, NULL);
        while (!waiter_tid)
            usleep(1000);
        printf("ready pid=%d tid=%d\n", pid, waiter_tid);
        pthread_join(b, NULL);
        stop = 1;
        pthread_join(a, NULL);
        if (ep) {
            printf("epoll: eintr=%d\n", epoll_eintr + eintr);
            return epoll_eintr + eintr ? 1 : 0;
        }
        printf("ppoll: eintr=%d usr2=%d after=%d mask_bad=%d\n", ppoll_eintr + eintr, (int)usr2, (int)after, mask_bad);
        return mask_bad ? 1 : 0;
    }
    if (!strcmp(mode, "smallstack")) {
        pthread_attr_t small;
        pthread_attr_init(&small);
        pthread_attr_setstacksize(&small, 64 * 1024);
        pthread_create(&a, &small, reader, NULL);
        pthread_create(&b, NULL, sleeper, argv[2]);
        while (!waiter_tid)
            usleep(1000);
        printf("ready pid=%d tid=%d\n", pid, waiter_tid);
        pthread_join(b, NULL);
        pthread_join(a, NULL);
        printf("smallstack: read_eintr=%d sleep_eintr=%d short=%d\n", read_eintr, sleep_eintr, sleep_short);
        return read_eintr || sleep_eintr || sleep_short ? 1 : 0;
    }
    if (!strcmp(mode, "busy") && argc > 3) {
        double secs = atof(argv[3]);
        block_usr();
        pthread_create(&a, NULL, spin, &secs);
        pthread_create(&c, NULL, futex_waiter, NULL);
        printf("ready pid=%d tid=0\n", pid);
        fflush(stdout);
        spin(&secs);
        pthread_join(a, NULL);
        stop = 1;
        pthread_join(c, NULL);
        printf("busy: done futex_bad=%d\n", futex_bad);
        return futex_bad ? 1 : 0;
    }
    return 2;
}
