/* lifecycle.c MODE -- how a traced process ends or multiplies. Each mode
 * first leaks 3 blocks of 50 bytes from leak_before_end.
 *   exit | _exit | quick_exit | segv | abort | trap | kill   end that way ("kill": ht_snapshot(),
 *                                        one more leak, then SIGKILL)
 *   report    segv, with a crash reporter's handler of its own: it says
 *             "REPORTED" and raises SIGSEGV again, the default put back
 *             (SA_RESETHAND); the process ends once the handler returns
 *   wait      prints "READY", then waits for a signal (pause)
 *   pipe      writes lines to standard output until it fails
 *   termexit  300,000 live blocks (a long exit snapshot), then exit(0)
 *             while another thread sends the process SIGTERM 5 ms later
 *   overflow [LEAVE]  as Rust's runtime does: asks SIGSEGV's disposition
 *             and, if SIG_DFL ("QUERY dfl=1"), installs a handler on an
 *             alternate stack with a guard page below; then overflows the
 *             stack. The handler says "OVERFLOWED", takes all of its stack
 *             but the SIGABRT signal frame (AT_MINSIGSTKSZ) and LEAVE bytes
 *             (1024), and aborts. (Here the agent's crash snapshot needs
 *             2-4 KiB of stack: run on what is left it overran the guard,
 *             139; with LEAVE 512-2048 the agent's own stack gives 134.)
 *   fork      leak_parent 1x111; a child leaks leak_child 2x222 and exits
 *   forkold   as fork, the child first sleeping 1.1 s
 *   dropuid | chroot | dropclose   as fork, but the child first gives up
 *             rights: setgroups, setgid and setuid to nobody (65534);
 *             chroot into ./jail through syscall(); or the first, then it
 *             closes every descriptor from 3 up (needs root)
 *   dropself  setgroups, setgid and setuid to nobody, then leak_child
 *             2x222 and exit (needs root)
 *   keepcaps  as setpriv(1) does: PR_SET_KEEPCAPS, setresuid to nobody,
 *             the capabilities made effective again (capset: this thread
 *             only), then setresgid, which needs them; leak_child 2x222
 *             (needs root). glibc applies a set-id call to every thread and
 *             aborts if one thread's fails. Then prints "CONTROL N UID":
 *             the threads named "heaptrail" and the last one's uid
 *   userns    unshare(CLONE_NEWUSER) through libc, then a child does it
 *             through syscall(), each leaks leak_child 1x222 and prints
 *             "USERNS rc" and CONTROL as keepcaps does; the kernel refuses
 *             a process with more than one thread (EINVAL)
 *   alone     asks how many threads it has as Chromium's zygote does
 *             before it forks (the link count of /proc/self/task, less 2),
 *             six ways: fstatat(/proc, "self/task/"), stat of
 *             /proc/self/task and of /proc/PID/task, fstatat(/proc/self,
 *             "task"), statx, and __xstat as programs built against glibc
 *             before 2.33 call it; and by the count in /proc/self/stat
 *             (fopen and fread, as Python 3.12+ does at os.fork), in
 *             /proc/PID/stat (read through the stream's descriptor, as
 *             libstdc++'s ifstream does) and in /proc/self/status (fgets);
 *             prints "ALONE n n n n n n n n n"; then CONTROL as keepcaps
 *             does; then the same with a thread of its own running ("TWO
 *             n ..."); a forked child asks once more ("CHILDALONE n");
 *             leak_child 1x222
 *   forklazy  a child that waits, then allocates, then waits again; the
 *             parent counts the child's threads (in /proc/PID/task) at each
 *             wait: "LAZY before after" (the agent's control thread starts
 *             with a fork child's first allocation: 1 2)
 *   forkidle  leak_parent 1x111; a child that exits at once, then one that
 *             _exits at once, then one that frees the parent's block and
 *             exits; prints "CHILDREN pid pid pid"
 *   forkstorm a thread allocates without pause while main forks 20 children
 *             that allocate and _exit: no deadlock
 *   exec      leak_parent 1x333, then fork+exec itself as "execchild"
 *   execchild leak_child 1x444
 *   execenv   leak_parent 1x333, then starts itself as "envchild" five
 *             times, each with an environment of its own, as env -i or
 *             Python's subprocess.run(env=...) do: execve with {PATH}, execve
 *             with a NULL environment, posix_spawn with an empty LD_PRELOAD,
 *             execle with none, and execv after unsetenv("LD_PRELOAD");
 *             prints "CHILDREN pid..."
 *   envchild  leak_child 1x444; prints "ENVCHILD follow=VALUE" (its
 *             HEAPTRAIL_FOLLOW_EXEC)
 *   execself  leak_parent 1x333, then execs itself as "execchild" (no fork);
 *             first a failed exec of a missing file, after which the
 *             process goes on (and must keep being traced)
 *   execfail  leak_parent 1x333, a failed exec, then leak_child 1x444 and exit
 *   forkloop N LIB [MORE...]  loads the libraries MORE (more objects for
 *             the agent to scan: a longer window), then N times: dlopen and
 *             dlclose LIB (so the agent's
 *             control thread rescans the loaded objects at each look, inside
 *             dl_iterate_phdr), then fork a child that calls dl_iterate_phdr
 *             and exits at once. A child must never inherit the loader's
 *             lock held by the parent's control thread: it would wait
 *             forever (after 20 s the parent kills it and exits 3). The
 *             program's own dlopen runs in the forking thread: a fork from
 *             one thread while another is inside dlopen deadlocks the child
 *             the same way, without heaptrail (glibc 2.36)
 *   forkjit N  a thread registers and unregisters JIT code every 20 us
 *             (ht_register_code: the registry's writer lock); main forks N
 *             children that register code and exit: the child must not
 *             inherit that lock held (it would spin forever; after 20 s
 *             the parent kills it and exits 3)
 *   doublefree  frees a block twice (glibc aborts: SIGABRT)
 *   badfree     frees a pointer malloc never returned (glibc aborts) */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <dlfcn.h>
#include <grp.h>
#include <linux/capability.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <alloca.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "heaptrail.h"

static void *volatile sink;
__attribute__((noinline)) static void leak_before_end(void) { for (int i = 0; i < 3; i++) sink = malloc(50); }
__attribute__((noinline)) static void leak_parent(size_t n) { sink = malloc(n); }
__attribute__((noinline)) static void leak_child(size_t n) { sink = malloc(n); }
__attribute__((noinline)) static void leak_late(void) { sink = malloc(1000); }

static volatile int stop;
static void *churn(void *arg)
{
    (void)arg;
    while (!stop)
        { sink = malloc(64); free(sink); }
    return NULL;
}

static char jit_area[4096] __attribute__((aligned(4096)));
static void *jit_churn(void *arg)
{
    (void)arg;
    while (!stop) {
        ht_register_code(jit_area, 64, "churn");
        ht_unregister_code(jit_area);
        /* a JIT emits code between registrations: a thread that took the
         * lock back-to-back would starve the forking thread's wait for it
         * (our spin locks are not fair) */
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int count_obj(struct dl_phdr_info *info, size_t size, void *p)
{
    (void)info, (void)size;
    ++*(int *)p;
    return 0;
}

static volatile pid_t current_child;
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "lifecycle: a forked child hung\n";
    (void)!write(2, msg, sizeof msg - 1);
    if (current_child > 0)
        kill(current_child, SIGKILL);
    _exit(3);
}

/* Forks a child that ends at once with the status child_status() returns,
 * and waits for it, at most 20 s (on_alarm). Returns 0 if it exited 0. */
static int fork_and_wait(int (*child_status)(void))
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    pid_t c = fork();
    if (c == 0)
        syscall(SYS_exit_group, child_status());   /* no exit handlers: quick */
    current_child = c;
    int st;
    int ok = c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    alarm(0);
    return ok ? 0 : -1;
}

static int walk_objects(void)
{
    int k = 0;
    dl_iterate_phdr(count_obj, &k);
    return k > 0 ? 0 : 1;
}

static int register_code(void)
{
    return ht_register_code(jit_area + 1024, 64, "child") ? 0 : 1;
}

static char *alt_stack;            /* 64 KiB, a guard page below (as Rust's) */
static size_t alt_leave;

/* Uses all of the alternate stack but what abort() and the SIGABRT
 * signal frame need (AT_MINSIGSTKSZ) and alt_leave bytes more (Rust's
 * handler takes most of its 8 KiB before it aborts), then aborts. */
static void on_overflow(int sig)
{
    (void)sig;
    static const char m[] = "OVERFLOWED\n";
    (void)!write(1, m, sizeof m - 1);
    char here;
    size_t room = (size_t)((uintptr_t)&here - (uintptr_t)alt_stack);
    size_t leave = (size_t)getauxval(AT_MINSIGSTKSZ) + alt_leave;
    if (room > leave) {
        volatile char *p = alloca(room - leave);
        p[0] = 1;
        p[room - leave - 1] = 1;
    }
    abort();
}

static volatile int depth_limit = 1 << 30;
__attribute__((noinline)) static int deeper(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    return n < depth_limit ? deeper(n + 1) + pad[0] : 0;
}

static volatile int term_armed;
static void *term_later(void *arg)
{
    (void)arg;
    term_armed = 1;
    usleep(5000);
    kill(getpid(), SIGTERM);
    for (;;)
        pause();
    return NULL;
}

static int drop_to_nobody(void)
{
    return setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0 ? -1 : 0;
}

/* Prints "CONTROL N UID": how many threads are named "heaptrail" (the
 * agent's control thread; waits up to 1 s for one) and the real uid of
 * the last. */
static int count_control(long *uid_out);
/* what programs built against glibc before 2.33 call for stat (version 1) */
int __xstat(int ver, const char *path, struct stat *st);

/* field 20 of a stat file, read as Python 3.12+ does at os.fork (fopen,
 * fread, fclose), or through the stream's descriptor (libstdc++'s
 * ifstream); -1 if unread */
static long stat_threads(const char *path, int by_fd)
{
    char line[512];
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    /* the pause must last beyond fopen: the kernel writes the text now */
    usleep(20000);
    ssize_t n = by_fd ? read(fileno(f), line, sizeof line - 1) : (ssize_t)fread(line, 1, sizeof line - 1, f);
    fclose(f);
    if (n <= 0)
        return -1;
    line[n] = 0;
    char *p = strrchr(line, ')');       /* after the command's name */
    for (int field = 2; p && field < 20; field++)
        p = strchr(p + 1, ' ');
    return p ? atol(p + 1) : -1;
}

/* "Threads:" of /proc/self/status, read with fgets */
static long status_threads(void)
{
    char line[256];
    long n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            n = atol(line + 8);
    fclose(f);
    return n;
}

/* the threads of this process by the link count of its task list, six
 * ways, and by the count in its stat and status files, three (alone) */
static void count_threads(const char *tag)
{
    struct stat st;
    struct statx sx;
    char path[64], pid_stat[64];
    long n[6];
    int proc = open("/proc/", O_RDONLY | O_DIRECTORY), self = open("/proc/self", O_RDONLY | O_DIRECTORY);
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    snprintf(pid_stat, sizeof pid_stat, "/proc/%d/stat", (int)getpid());
    n[0] = fstatat(proc, "self/task/", &st, 0) == 0 ? (long)st.st_nlink - 2 : -1;
    n[1] = stat("/proc/self/task", &st) == 0 ? (long)st.st_nlink - 2 : -1;
    n[2] = stat(path, &st) == 0 ? (long)st.st_nlink - 2 : -1;
    n[3] = fstatat(self, "task", &st, 0) == 0 ? (long)st.st_nlink - 2 : -1;
    n[4] = statx(AT_FDCWD, "/proc/self/task", 0, STATX_NLINK, &sx) == 0 ? (long)sx.stx_nlink - 2 : -1;
    n[5] = __xstat(1, "/proc/self/task", &st) == 0 ? (long)st.st_nlink - 2 : -1;
    close(proc);
    close(self);
    printf("%s %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", tag, n[0], n[1], n[2], n[3], n[4], n[5],
           stat_threads("/proc/self/stat", 0), stat_threads(pid_stat, 1), status_threads());
}

static void *wait_for_stop(void *arg)
{
    while (!*(volatile int *)arg)
        usleep(1000);
    return NULL;
}

/* The threads of process `pid`, from outside it. */
static int task_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void control_thread(void)
{
    long uid = -1;
    int n = 0;
    /* the thread names itself when it first runs */
    for (int i = 0; i < 200 && (n = count_control(&uid)) == 0; i++)
        usleep(5000);
    printf("CONTROL %d %ld\n", n, uid);
}

static int count_control(long *uid_out)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    long uid = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], line[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int ours = fgets(line, sizeof line, f) && !strcmp(line, "heaptrail\n");
        fclose(f);
        if (!ours)
            continue;
        n++;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Uid:", 4))
                uid = strtol(line + 4, NULL, 10);
        fclose(f);
    }
    if (d)
        closedir(d);
    *uid_out = uid;
    return n;
}

/* report: a crash reporter's handler (it would write a minidump) */
static void on_segv_report(int sig)
{
    static const char msg[] = "REPORTED\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(3);
    raise(sig);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (!strcmp(mode, "execchild")) {
        leak_child(444);
        return 0;
    }
    if (!strcmp(mode, "envchild")) {
        leak_child(444);
        const char *f = getenv("HEAPTRAIL_FOLLOW_EXEC");
        printf("ENVCHILD follow=%s\n", f ? f : "unset");
        return 0;
    }
    if (!strcmp(mode, "execenv")) {
        leak_parent(333);
        char *args[] = { argv[0], (char *)"envchild", NULL };
        char *path_only[] = { (char *)"PATH=/usr/bin:/bin", NULL };
        char *empty_preload[] = { (char *)"LD_PRELOAD=", (char *)"LC_ALL=C", NULL };
        char *none[] = { NULL };
        pid_t kids[5];
        fflush(stdout);
        for (int k = 0; k < 5; k++) {
            if (k == 2) {
                int e = posix_spawn(&kids[k], "/proc/self/exe", NULL, NULL, args, empty_preload);
                if (e != 0) {
                    fprintf(stderr, "posix_spawn: %s\n", strerror(e));
                    return 2;
                }
                continue;
            }
            if (k == 4)
                unsetenv("LD_PRELOAD");
            kids[k] = fork();
            if (kids[k] == 0) {
                if (k == 0)
                    execve("/proc/self/exe", args, path_only);
                else if (k == 1)
                    execve("/proc/self/exe", args, NULL);
                else if (k == 3)
                    execle("/proc/self/exe", argv[0], "envchild", (char *)NULL, none);
                else
                    execv("/proc/self/exe", args);
                _exit(127);
            }
        }
        printf("CHILDREN");
        for (int k = 0; k < 5; k++) {
            int st;
            waitpid(kids[k], &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 3;
            printf(" %d", (int)kids[k]);
        }
        printf("\n");
        return 0;
    }
    leak_before_end();
    if (!strcmp(mode, "exit"))
        exit(5);
    if (!strcmp(mode, "_exit"))
        _exit(7);
    if (!strcmp(mode, "quick_exit"))
        quick_exit(6);
    if (!strcmp(mode, "report")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv_report;
        sa.sa_flags = SA_RESETHAND;
        if (sigaction(SIGSEGV, &sa, NULL) != 0)
            return 5;
    }
    if (!strcmp(mode, "segv") || !strcmp(mode, "report"))
        *(volatile int *)(uintptr_t)8 = 1;
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "trap"))
        __asm__ volatile("int3");
    if (!strcmp(mode, "wait")) {
        printf("READY\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "termexit")) {
        for (int i = 0; i < 300000; i++)
            leak_child(64);
        pthread_t t;
        pthread_create(&t, NULL, term_later, NULL);
        while (!term_armed)
            usleep(100);
        exit(0);
    }
    if (!strcmp(mode, "pipe")) {
        while (puts("line") >= 0 && fflush(stdout) == 0)
            ;
        return 9;
    }
    if (!strcmp(mode, "overflow")) {
        struct sigaction cur;
        sigaction(SIGSEGV, NULL, &cur);
        int dfl = !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
        printf("QUERY dfl=%d\n", dfl);
        fflush(stdout);
        if (dfl) {
            alt_leave = argc > 2 ? (size_t)atol(argv[2]) : 1024;
            char *m = mmap(NULL, 4096 + (1 << 16), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED || mprotect(m, 4096, PROT_NONE) != 0)
                return 5;
            alt_stack = m + 4096;
            stack_t ss = { .ss_sp = alt_stack, .ss_size = 1 << 16 };
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_overflow;
            sa.sa_flags = SA_ONSTACK;
            if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0)
                return 5;
        }
        return deeper(0);
    }
    if (!strcmp(mode, "kill")) {
        if (ht_snapshot() < 0)
            return 3;
        leak_late();
        kill(getpid(), SIGKILL);
    }
    if (!strcmp(mode, "doublefree")) {
        char *p = malloc(40);
        sink = p;
        free(p);
        free((void *)sink);
        return 0;
    }
    if (!strcmp(mode, "badfree")) {
        static char not_heap[64] __attribute__((aligned(16)));
        sink = not_heap + 16;
        free((void *)sink);
        return 0;
    }
    if (!strcmp(mode, "fork") || !strcmp(mode, "forkold") || !strcmp(mode, "dropuid") ||
        !strcmp(mode, "chroot") || !strcmp(mode, "dropclose")) {
        leak_parent(111);
        pid_t c = fork();
        if (c == 0) {
            if (!strcmp(mode, "chroot")) {
                if (syscall(SYS_chroot, "jail") != 0 || chdir("/") != 0)
                    _exit(10);
            } else if (!strcmp(mode, "forkold")) {
                usleep(1100 * 1000);
            } else if (strcmp(mode, "fork") != 0 && drop_to_nobody() != 0) {
                _exit(11);
            }
            if (!strcmp(mode, "dropclose"))
                for (int fd = 3; fd < 1024; fd++)
                    close(fd);
            leak_child(222);
            leak_child(222);
            exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        printf("CHILD %d\n", (int)c);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (!strcmp(mode, "dropself")) {
        if (drop_to_nobody() != 0)
            return 11;
        leak_child(222);
        leak_child(222);
        return 0;
    }
    if (!strcmp(mode, "keepcaps")) {
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2];
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 || setresuid(65534, 65534, 65534) != 0 ||
            syscall(SYS_capget, &h, d) != 0)
            return 11;
        d[0].effective = d[0].permitted;
        d[1].effective = d[1].permitted;
        if (syscall(SYS_capset, &h, d) != 0 || setresgid(65534, 65534, 65534) != 0)
            return 12;
        leak_child(222);
        leak_child(222);
        control_thread();
        return 0;
    }
    if (!strcmp(mode, "forklazy")) {
        int go[2], done[2];
        char b = 0;
        if (pipe(go) != 0 || pipe(done) != 0)
            return 1;
        pid_t c = fork();
        if (c == 0) {
            /* nothing here allocates: read and write only (the first
             * write says the fork's handlers are done) */
            if (write(done[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
                _exit(1);
            sink = malloc(10);
            free(sink);
            if (write(done[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
                _exit(1);
            _exit(0);
        }
        if (read(done[0], &b, 1) != 1)
            return 1;
        int before = task_count(c);
        if (write(go[1], &b, 1) != 1 || read(done[0], &b, 1) != 1)
            return 1;
        /* the thread is made in the malloc, before it returns */
        int after = task_count(c);
        if (write(go[1], &b, 1) != 1)
            return 1;
        int st;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
        printf("LAZY %d %d\n", before, after);
        return 0;
    }
    if (!strcmp(mode, "forkidle")) {
        leak_parent(111);
        pid_t c[3];
        for (int i = 0; i < 3; i++) {
            if ((c[i] = fork()) == 0) {
                if (i == 1)
                    _exit(0);
                if (i == 2)
                    free(sink);
                exit(0);
            }
            int st;
            if (waitpid(c[i], &st, 0) != c[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        printf("CHILDREN %d %d %d\n", (int)c[0], (int)c[1], (int)c[2]);
        return 0;
    }
    if (!strcmp(mode, "alone")) {
        count_threads("ALONE");
        control_thread();
        int quit = 0;
        pthread_t t;
        pthread_create(&t, NULL, wait_for_stop, &quit);
        count_threads("TWO");
        quit = 1;
        pthread_join(t, NULL);
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            struct stat st;
            printf("CHILDALONE %ld\n", stat("/proc/self/task/", &st) == 0 ? (long)st.st_nlink - 2 : -1);
            exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        leak_child(222);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (!strcmp(mode, "userns")) {
        pid_t c = fork();
        if (c == 0) {
            long rc = syscall(SYS_unshare, CLONE_NEWUSER);
            printf("USERNS %ld\n", rc);
            leak_child(222);
            control_thread();
            exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        printf("CHILD %d\n", (int)c);
        int rc = unshare(CLONE_NEWUSER);
        printf("USERNS %d\n", rc);
        leak_child(222);
        control_thread();
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (!strcmp(mode, "forkstorm")) {
        pthread_t t;
        pthread_create(&t, NULL, churn, NULL);
        for (int i = 0; i < 20; i++) {
            pid_t c = fork();
            if (c == 0) {
                sink = malloc(10); free(sink);
                sink = malloc(20);
                _exit(0);
            }
            int st;
            if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        stop = 1;
        pthread_join(t, NULL);
        return 0;
    }
    if (!strcmp(mode, "forkloop") && argc > 3) {
        int n = atoi(argv[2]);
        for (int k = 4; k < argc; k++)
            if (!dlopen(argv[k], RTLD_NOW))
                return 2;
        for (int i = 0; i < n; i++) {
            void *h = dlopen(argv[3], RTLD_NOW);
            if (!h || dlclose(h) != 0)
                return 2;
            if (fork_and_wait(walk_objects) != 0)
                return 1;
        }
        printf("FORKS %d\n", n);
        return 0;
    }
    if (!strcmp(mode, "forkjit") && argc > 2) {
        int n = atoi(argv[2]);
        pthread_t t;
        pthread_create(&t, NULL, jit_churn, NULL);
        for (int i = 0; i < n; i++)
            if (fork_and_wait(register_code) != 0)
                return 1;
        stop = 1;
        pthread_join(t, NULL);
        printf("FORKS %d\n", n);
        return 0;
    }
    if (!strcmp(mode, "execself") || !strcmp(mode, "execfail")) {
        leak_parent(333);
        execl("/nonexistent/program", "x", (char *)NULL);    /* fails: go on */
        if (!strcmp(mode, "execfail")) {
            leak_child(444);
            return 0;
        }
        execl("/proc/self/exe", argv[0], "execchild", (char *)NULL);
        return 127;
    }
    if (!strcmp(mode, "exec")) {
        leak_parent(333);
        pid_t c = fork();
        if (c == 0) {
            execl("/proc/self/exe", argv[0], "execchild", (char *)NULL);
            _exit(127);
        }
        int st;
        waitpid(c, &st, 0);
        printf("CHILD %d\n", (int)c);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    return 0;
}
