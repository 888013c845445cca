/* attachee.c -- a program that `heaptrail attach` joins while it runs
 * (tests/agent/attach.sh).
 *
 *   attachee LIB [mt|sb]   (commands on standard input, one per line;
 *                          sb: under a seccomp filter that kills the
 *                          process on process_vm_readv, tests/noreadv.h)
 *
 * At start: 10 blocks of 100 bytes kept for good and 16 of 200, some
 * freed or realloc'd later: all made before any attach. Prints "ready"
 * and reads commands, blocked in read() (where the attach takes its
 * thread):
 *   work   frees 5 of the 200-byte blocks, reallocs one to 555, keeps 7 x
 *          333 (malloc) and 3 x 444 (calloc), a strdup inside libc (6),
 *          makes and frees 20 more; prints "worked"
 *   lib    opens LIB (after the attach: the agent must find the new
 *          module), waits 200 ms, keeps 4 blocks of 77 from its
 *          dl_leak_site; prints "lib"
 *   leak   after the attach, for its leak checks: a block of 1000 that
 *          nothing points to (site_lost), holding the only pointer to
 *          one of 300 (site_inner: indirectly lost); one of 600
 *          (site_chain) whose only pointer is in a block made before
 *          the attach (with "mt", by the thread, in its arena's heap;
 *          reachable: those blocks are roots); one of 700
 *          (site_stale) whose only pointer is in a 48-byte block freed
 *          since, into the tcache (lost: a free chunk is no root); one
 *          of 800 (site_fast) whose only pointer is in an 88-byte block
 *          freed into a fastbin (lost too), and one of 900 (site_tfast)
 *          the same in a thread's arena; prints "leaked"
 *   where  prints "where M": the module malloc's address (as the program
 *          takes it, through its global offset table) is in; keeps that
 *          address and free's for "after" (tests/agent/detach.sh). In
 *          the non-PIE build, "where ?"
 *   after  after a detach: keeps 10 blocks of 123, frees 3 of site_a's,
 *          reallocs another to 999, allocates and frees through the
 *          addresses "where" kept, forks a child that allocates and
 *          exits; prints "after"
 *   lose   a block of 333 (site_lose) that nothing points to: prints
 *          "lost reused" if it has the address of one of site_a's blocks
 *          "after" freed (made while an agent that has since detached
 *          tracked it: tests/agent/reattach.sh), else "lost fresh"
 *   exit   exit(0)
 * Leaked after an attach before "work" and "lib": 4,532 bytes in 16
 * blocks from 5 sites; with "leak" too, 8,832 bytes in 22 blocks from
 * 11 sites, of which lost at exit 3,400 bytes in 4 blocks (site_lost,
 * site_stale, site_fast, site_tfast), indirectly 300 in 1 (site_inner). With "mt", a thread allocates and frees without a
 * pause, never in a system call, from start until "exit" stops it. A read() that fails
 * (EINTR: the attach's ptrace stop leaking into the program) exits 7. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/wait.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include "../noreadv.h"

static void *volatile keep[64];
static void **volatile many;    /* "many": blocks that fill the live table */
static volatile int n7 = 7, n3 = 3, n4 = 4;
static volatile unsigned long spins;
static volatile int stop;
static void *volatile tblock;   /* made by the thread ("mt"): in its arena */

__attribute__((noinline)) static void *site_a(void) { return malloc(333); }
__attribute__((noinline)) static void *site_b(void) { return calloc(1, 444); }
__attribute__((noinline)) static void *site_inner(void) { return malloc(300); }
__attribute__((noinline)) static void *site_chain(void) { return malloc(600); }
__attribute__((noinline)) static void *site_stale(void) { return malloc(700); }
__attribute__((noinline)) static void *site_fast(void) { return malloc(800); }
__attribute__((noinline)) static void *site_tfast(void) { return malloc(900); }
__attribute__((noinline)) static void *site_lose(void) { return malloc(333); }

/* site_a's blocks "after" frees (or reallocs), complemented: no root to
 * the block "lose" makes at one of their addresses */
static uintptr_t freed_a[4];

/* A block of site_a's size, lost at once: 1 if it has the address of one
 * "after" freed (the tcache gives the last freed first). */
__attribute__((noinline)) static int lose(void)
{
    uintptr_t p = (uintptr_t)site_lose();
    int reused = 0;
    for (int i = 0; i < 4; i++)
        reused |= ~p == freed_a[i];
    return reused;
}

/* A block whose only pointer is in `node`, freed into a fastbin: seven
 * chunks of its size freed first fill its tcache bin. */
__attribute__((noinline)) static void fast_leak(void *(*site)(void))
{
    void *fill[7];
    for (int i = 0; i < 7; i++)
        fill[i] = malloc(88);
    void **node = malloc(88);
    memset(node, 0, 88);
    node[1] = site();           /* a fastbin's free writes over node[0] only */
    __asm__ volatile("" : : "r"(node), "r"(fill) : "memory");
    for (int i = 0; i < 7; i++)
        free(fill[i]);
    free(node);
}

/* The same in a thread of its own, so in another arena (glibc gives a
 * new thread one of its own while there are few) */
static void *fast_thread(void *arg)
{
    (void)arg;
    fast_leak(site_tfast);
    return NULL;
}
__attribute__((noinline)) static void site_lost(void)
{
    void **p = malloc(1000);
    memset(p, 0, 1000);
    p[0] = site_inner();
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* The five kinds of "leak" above; `old` a block made before the attach. */
__attribute__((noinline)) static void leaks(void **old)
{
    site_lost();
    old[1] = site_chain();
    void **node = malloc(48);
    memset(node, 0, 48);
    node[2] = site_stale();     /* past the two words free() writes over */
    __asm__ volatile("" : : "r"(node) : "memory");  /* not a dead store */
    free(node);                 /* to the tcache */
    fast_leak(site_fast);
    pthread_t t;
    if (pthread_create(&t, NULL, fast_thread, NULL) == 0)
        pthread_join(t, NULL);
}

static void *churn(void *arg)
{
    (void)arg;
    tblock = malloc(256);
    memset(tblock, 0, 256);
    while (!stop) {
        void *p = malloc(64);
        *(volatile char *)p = 1;
        free(p);
        spins++;
    }
    return NULL;
}

static int read_line(char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t k = read(0, buf + n, 1);
        if (k < 0)
            exit(7);
        if (k == 0)
            break;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = 0;
    return (int)n;
}

static void *(*volatile kept_malloc)(size_t);
static void (*volatile kept_free)(void *);

int main(int argc, char **argv)
{
    if (argc < 2)
        return 1;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    pthread_t t;
    int mt = argc > 2 && !strcmp(argv[2], "mt");
    if (argc > 2 && !strcmp(argv[2], "sb"))
        forbid_process_vm_readv("attachee");   /* the attach must not call it */
    if (mt && pthread_create(&t, NULL, churn, NULL) != 0)
        return 2;
    while (mt && !tblock)
        sched_yield();
    void *before[16];
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    for (int i = 0; i < 16; i++)
        before[i] = malloc(200);
    printf("ready\n");
    fflush(stdout);
    char cmd[64];
    for (;;) {
        if (read_line(cmd, sizeof cmd) == 0 && !cmd[0])
            return 3;           /* end of input without "exit" */
        if (!strcmp(cmd, "work")) {
            for (int i = 0; i < 5; i++)
                free(before[i]);
            keep[10] = realloc(before[5], 555);
            for (int i = 0; i < n7; i++)
                keep[11 + i] = site_a();
            for (int i = 0; i < n3; i++)
                keep[18 + i] = site_b();
            keep[21] = strdup("hello");
            for (int i = 0; i < 20; i++)
                free(malloc(50 + i));
            printf("worked\n");
        } else if (!strcmp(cmd, "lib")) {
            void *h = dlopen(argv[1], RTLD_NOW);
            if (!h)
                return 4;
            void *(*leak)(size_t) = (void *(*)(size_t))dlsym(h, "dl_leak_site");
            if (!leak)
                return 5;
            struct timespec ts = { 0, 200 * 1000 * 1000 };
            nanosleep(&ts, NULL);
            for (int i = 0; i < n4; i++)
                keep[30 + i] = leak(77);
            printf("lib\n");
        } else if (!strcmp(cmd, "leak")) {
            leaks(mt ? tblock : before[15]);
            printf("leaked\n");
        } else if (!strcmp(cmd, "where")) {
#ifdef __PIE__
            /* (not in the non-PIE build: malloc's address taken there would
             * make a canonical PLT entry, which changes what it binds) */
            kept_malloc = malloc;
            kept_free = free;
            Dl_info di;
            const char *m = dladdr((void *)kept_malloc, &di) && di.dli_fname ? di.dli_fname : "?";
            printf("where %s\n", strrchr(m, '/') ? strrchr(m, '/') + 1 : m);
#else
            printf("where ?\n");
#endif
        } else if (!strcmp(cmd, "after")) {
            for (int i = 0; i < 10; i++)
                keep[40 + i] = malloc(123);
            for (int i = 0; i < 3; i++) {
                freed_a[i] = ~(uintptr_t)keep[11 + i];
                free(keep[11 + i]);
                keep[11 + i] = NULL;
            }
            uintptr_t was = (uintptr_t)keep[14];
            keep[14] = realloc(keep[14], 999);
            if ((uintptr_t)keep[14] != was)
                freed_a[3] = ~was;       /* moved: the old one freed */
            if (kept_malloc)
                kept_free(kept_malloc(50));
            pid_t c = fork();
            if (c == 0) {
                for (int i = 0; i < 100; i++)
                    free(malloc(64 + i));
                keep[50] = malloc(10);
                _exit(0);
            }
            int st = -1;
            if (c < 0 || waitpid(c, &st, 0) != c || st != 0)
                return 8;
            printf("after\n");
        } else if (!strcmp(cmd, "many")) {
            many = malloc(100000 * sizeof *many);
            for (int i = 0; many && i < 100000; i++)
                many[i] = malloc(24);
            printf("many\n");
        } else if (!strcmp(cmd, "lose")) {
            printf("lost %s\n", lose() ? "reused" : "fresh");
        } else if (!strcmp(cmd, "exit")) {
            if (mt) {           /* its last block freed before the count */
                stop = 1;
                pthread_join(t, NULL);
            }
            fflush(stdout);
            exit(0);
        } else {
            return 6;
        }
        fflush(stdout);
    }
}
