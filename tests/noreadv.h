/* noreadv.h -- for test programs: a seccomp filter that kills the process
 * on process_vm_readv, the way systemd's SystemCallFilter= kills on a call
 * it does not expect. The agent must then read memory another way
 * (gdbjit.c, reach.c: write() into a pipe). Exits with status 2 if the
 * filter cannot be installed. */
#ifndef HT_TEST_NOREADV_H
#define HT_TEST_NOREADV_H
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void forbid_process_vm_readv(const char *who)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
        perror(who);
        _exit(2);
    }
}
#endif
