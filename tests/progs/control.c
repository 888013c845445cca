/* control.c MODE -- programs for snapshots on demand, at intervals and
 * from signal handlers.
 *   wait FILE  has handlers of its own for SIGUSR1 and SIGRTMIN, leaks
 *              1x99 from leak_waiting, prints "READY pid", then sleeps in
 *              10 ms steps until FILE exists; prints "EINTR=n" (system
 *              calls interrupted: must stay 0 under the agent)
 *   waitclosed FILE  as wait, after closing every descriptor from 3 up
 *              (as daemons do at start-up: heaptrail's control socket too)
 *   signals    a SIGALRM every 100 us whose handler maps and unmaps a page
 *              (from sig_map) and every 50th time calls ht_snapshot(), while
 *              main allocates and frees 200,000 blocks (churn_site) and
 *              leaks 5x10 (leak_sig); prints "HANDLER calls=n snaps=m"
 *   threads    300 threads created and joined one after another, each
 *              leaking 1x32 from leak_thread
 *   fdorder    counts descriptors in /proc/self/fd besides 0-2 (the
 *              agent's, and any inherited), then for 1.5 s opens /dev/null
 *              expecting the lowest free number and dup2()s it onto the
 *              next free one (EBUSY while another thread opens a file that
 *              gets that number); prints
 *              "FDORDER foreign=F bad=B"; with `map`, also writes a perf
 *              map (/tmp/perf-PID.map, descriptor 100) a line at a time,
 *              every 100 ms, for the agent to read, and removes it */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "heaptrail.h"

static void *volatile sink;
static volatile sig_atomic_t usr;
static volatile unsigned calls, snaps;

static void on_usr(int sig) { (void)sig; usr++; }
__attribute__((noinline)) static void leak_waiting(void) { sink = malloc(99); }
__attribute__((noinline)) static void leak_sig(void) { sink = malloc(10); }
__attribute__((noinline)) static void churn_site(unsigned i) { sink = malloc(i % 500 + 1); free(sink); }
__attribute__((noinline)) static void *sig_map(void)
{
    return mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
__attribute__((noinline)) static void leak_thread(void) { sink = malloc(32); }

static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    void *p = sig_map();
    if (p != MAP_FAILED)
        munmap(p, 4096);
    if (++calls % 50 == 0 && ht_snapshot() >= 0)
        snaps++;
    errno = e;
}

static void *thread_main(void *arg)
{
    (void)arg;
    leak_thread();
    sink = malloc(100);
    free(sink);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "waitclosed") && argc > 2) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
        mode = "wait";
    }
    if (!strcmp(mode, "wait") && argc > 2) {
        signal(SIGUSR1, on_usr);
        signal(SIGRTMIN, on_usr);
        leak_waiting();
        printf("READY %d\n", (int)getpid());
        fflush(stdout);
        int eintr = 0;
        for (int i = 0; i < 3000 && access(argv[2], F_OK) != 0; i++) {
            struct timespec ts = { 0, 10000000 };
            if (nanosleep(&ts, NULL) != 0 && errno == EINTR)
                eintr++;
        }
        printf("EINTR=%d\n", eintr);
        return 0;
    }
    if (!strcmp(mode, "signals")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = { { 0, 100 }, { 0, 100 } };
        setitimer(ITIMER_REAL, &it, NULL);
        for (unsigned i = 0; i < 200000; i++)
            churn_site(i);
        for (int i = 0; i < 5; i++)
            leak_sig();
        struct itimerval off = { { 0, 0 }, { 0, 0 } };
        setitimer(ITIMER_REAL, &off, NULL);
        printf("HANDLER calls=%u snaps=%u\n", calls, snaps);
        return 0;
    }
    if (!strcmp(mode, "fdorder")) {
        int foreign = 0, bad = 0, map = argc > 2 && !strcmp(argv[2], "map");
        char path[64];
        snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
        if (map) {
            int m = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (m < 0 || dup2(m, 100) != 100)
                return 3;
            close(m);
        }
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            if (e->d_name[0] != '.' && atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d) &&
                !(map && atoi(e->d_name) == 100))
                foreign++;
        if (d)
            closedir(d);
        int lo = open("/dev/null", O_RDONLY | O_CLOEXEC), lo2 = open("/dev/null", O_RDONLY | O_CLOEXEC);
        close(lo);
        close(lo2);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long lines = 0, ns = 0;
        do {
            if (map && ns >= lines * 100000000L) {      /* a line every 100 ms */
                char l[64];
                int n = snprintf(l, sizeof l, "%lx 10 jitfn%ld\n", 0x1000 + 0x100 * lines, lines);
                if (write(100, l, (size_t)n) != n)
                    return 3;
                lines++;
            }
            for (int i = 0; i < 1000; i++) {
                int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fd != lo)
                    bad++;
                if (fd >= 0 && dup2(fd, lo2) != lo2)
                    bad++;
                close(fd);
                close(lo2);
            }
            clock_gettime(CLOCK_MONOTONIC, &t);
            ns = (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec);
        } while (ns < 1500000000L);
        if (map)
            unlink(path);
        printf("FDORDER foreign=%d bad=%d\n", foreign, bad);
        return 0;
    }
    if (!strcmp(mode, "threads")) {
        for (int i = 0; i < 300; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread_main, NULL) != 0)
                return 1;
            pthread_join(t, NULL);
        }
        return 0;
    }
    return 2;
}
