/* sandbox: a program that sandboxes itself with seccomp, as OpenSSH's
 * privilege-separated child, tor or a renderer do. Before the filter it
 * leaks 3 blocks of 111 bytes (leak_before); then, inside it, it
 * allocates, frees and leaks more (leak_after) and, with "fork", forks a
 * child that allocates and exits. The filter allows only the calls this
 * program makes itself, and kills on anything else ("kill") or fails it
 * with EPERM ("errno"); or ("mild") it kills only on ptrace,
 * process_vm_readv and connect, calls the agent does without under a
 * filter; or
 * ("nodents") it kills only on getdents64, which the agent's leak check
 * takes (listing the threads) and the program never does. With "thread"
 * it starts a thread inside, which allocates on its new stack (the
 * agent's first capture there looked its stack up in /proc/self/maps, a
 * call the filter kills). With "jit" it writes code without unwind
 * tables inside (two frame-pointer functions, one calling the other, the
 * inner one calling malloc): a walk through them checks each return
 * address is code, and one in no module made the agent re-read its
 * executable mappings, by calls the filter kills. With "pause" it stats
 * /proc/self/task and must see one thread: the agent's control thread
 * steps aside, and is not woken through its socket (connect) to do so.
 * heaptrail must not make the program die or fail.
 *   sandbox prctl|syscall kill|errno|mild [fork|thread|jit|pause]
 *   sandbox inherit      a filter killing on membarrier and ioctl and
 *                        refusing socket (calls the agent makes at
 *                        start-up, or could: PROCMAP_QUERY), then
 *                        exec of "sandbox child": the new image starts
 *                        under it
 * Prints "sandbox: done" (or "sandbox child: done"). */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void leak_before(void)
{
    for (int i = 0; i < 3; i++)
        sink = malloc(111);
}

__attribute__((noinline)) static void leak_after(void)
{
    for (int i = 0; i < 5; i++)
        sink = malloc(222);
}

#define ALLOW(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define DENY(n, act) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, (act))

static void *in_thread(void *arg)
{
    for (int i = 0; i < 4; i++)
        sink = malloc(333);
    return arg;
}

/* inner(fn, n): push rbp; mov rbp, rsp; mov rax, rdi; mov rdi, rsi;
 * call rax; pop rbp; ret. outer, 32 bytes on: push rbp; mov rbp, rsp;
 * call inner; pop rbp; ret. */
static const unsigned char jit_code[] = {
    0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48, 0x89, 0xf7, 0xff, 0xd0, 0x5d, 0xc3,
    [32] = 0x55, 0x48, 0x89, 0xe5, 0xe8, 0xd7, 0xff, 0xff, 0xff, 0x5d, 0xc3,
};

static int jit_malloc(void)
{
    unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    memcpy(p, jit_code, sizeof jit_code);
    if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    void *(*outer)(void *(*)(size_t), size_t) = (void *(*)(void *(*)(size_t), size_t))(p + 32);
    sink = outer(malloc, 444);
    return sink == NULL;
}

static int say(const char *m)
{
    return write(1, m, strlen(m)) < 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "child")) {
        sink = malloc(50);
        return say("sandbox child: done\n");
    }
    if (argc > 1 && !strcmp(argv[1], "inherit")) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            DENY(__NR_socket, SECCOMP_RET_ERRNO | 1),
            DENY(__NR_membarrier, SECCOMP_RET_KILL_PROCESS),
            DENY(__NR_ioctl, SECCOMP_RET_KILL_PROCESS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
            perror("seccomp");
            return 1;
        }
        execl(argv[0], argv[0], "child", (char *)NULL);
        perror("exec");
        return 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: sandbox prctl|syscall kill|errno|mild|nodents [fork|thread|jit|pause] | sandbox inherit\n");
        return 2;
    }
    struct sock_filter mild[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        DENY(__NR_ptrace, SECCOMP_RET_KILL_PROCESS),
        DENY(__NR_process_vm_readv, SECCOMP_RET_KILL_PROCESS),
        DENY(__NR_connect, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_filter nodents[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        DENY(__NR_getdents64, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    unsigned act = !strcmp(argv[2], "kill") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | 1;
    int forks = argc > 3 && !strcmp(argv[3], "fork");
    int thread = argc > 3 && !strcmp(argv[3], "thread");
    int jit = argc > 3 && !strcmp(argv[3], "jit");
    int pause = argc > 3 && !strcmp(argv[3], "pause");
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_read), ALLOW(__NR_write), ALLOW(__NR_exit), ALLOW(__NR_exit_group),
        ALLOW(__NR_brk), ALLOW(__NR_mmap), ALLOW(__NR_munmap), ALLOW(__NR_mprotect),
        ALLOW(__NR_futex), ALLOW(__NR_rt_sigreturn), ALLOW(__NR_madvise), ALLOW(__NR_getrandom),
        ALLOW(__NR_clone), ALLOW(__NR_clone3), ALLOW(__NR_rseq), ALLOW(__NR_rt_sigaction), ALLOW(__NR_wait4), ALLOW(__NR_set_robust_list),
        ALLOW(__NR_rt_sigprocmask), ALLOW(__NR_getpid), ALLOW(__NR_gettid),
        BPF_STMT(BPF_RET | BPF_K, act),
    };
    struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
    if (!strcmp(argv[2], "mild"))
        prog = (struct sock_fprog){ .len = sizeof mild / sizeof mild[0], .filter = mild };
    if (!strcmp(argv[2], "nodents"))
        prog = (struct sock_fprog){ .len = sizeof nodents / sizeof nodents[0], .filter = nodents };
    leak_before();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
        perror("no_new_privs");
        return 1;
    }
    int rc = !strcmp(argv[1], "syscall") ? (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
                                          : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
    if (rc) {
        perror("seccomp");
        return 1;
    }
    for (int i = 0; i < 1000; i++) {
        sink = malloc(64 + i);
        free(sink);
    }
    leak_after();
    if (pause) {
        /* the control thread steps aside (a stat of the task list): under
         * this filter, without waking it through its socket (connect) */
        struct stat st;
        if (stat("/proc/self/task", &st) != 0 || st.st_nlink != 3)
            return say("sandbox: not alone\n") + 3;
    }
    if (jit && jit_malloc())
        return say("sandbox: jit failed\n") + 3;
    if (thread) {
        pthread_t t;
        if (pthread_create(&t, NULL, in_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
            return say("sandbox: thread failed\n") + 3;
    }
    if (forks) {
        pid_t c = fork();
        if (c == 0) {
            sink = malloc(77);
            _exit(0);
        }
        int st;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return say("sandbox: child failed\n") + 3;
    }
    return say("sandbox: done\n");
}
