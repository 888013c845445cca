/* ifunc.c -- stacks from inside IFUNC resolvers that ld.so runs while
 * dlopen relocates their library, before _dl_find_object knows it
 * (glibc adds a dlopened object to its lookup data only after every
 * relocation is done: dl_open_worker_begin's _dl_find_object_update).
 * The agree agent's SIGPROF sampling met this in java, inside libm's
 * resolvers: ht_capture's stack lacked a frame libunwind's had.
 *
 * The resolvers (ifunc_lib.c, built with and without frame pointers)
 * trap with ud2, one as a leaf, one a frame further in. The SIGILL
 * handler walks from the ucontext (ht_capture_context against libunwind's
 * UNW_INIT_SIGNAL_FRAME cursor) and through the signal frame (ht_capture
 * against unw_backtrace), checks libunwind's stack reaches the return
 * address of this program's dlopen call, and resumes after the ud2. Each
 * library is opened and closed again many times, lazily and not. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include "heaptrail.h"
#include "check.h"

#define MAXF 64

/* dlopen(path, mode) from a call whose return address is known */
void *open_lib(const char *path, int mode);
extern char open_lib_ret[];
__asm__(".text\n"
        ".globl open_lib\n.type open_lib, @function\nopen_lib:\n"
        ".cfi_startproc\n"
        "\tsub $8, %rsp\n\t.cfi_def_cfa_offset 16\n"
        "\tcall dlopen@PLT\n"
        ".globl open_lib_ret\nopen_lib_ret:\n"
        "\tadd $8, %rsp\n\t.cfi_def_cfa_offset 8\n"
        "\tret\n"
        ".cfi_endproc\n.size open_lib, .-open_lib\n");

static int traps, exact, stopped, wrong, oracle_bad, unknown_to_loader;

/* libunwind's frames from the interrupted context: the pc, then return
 * addresses */
static int ref_context(ucontext_t *uc, void **f, int max)
{
    unw_cursor_t c;
    unw_word_t ip;
    int n = 0;
    if (unw_init_local2(&c, uc, UNW_INIT_SIGNAL_FRAME) < 0)
        return 0;
    do {
        if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        f[n++] = (void *)ip;
    } while (n < max && unw_step(&c) > 0);
    return n;
}

/* Equal (1), libunwind's frames cut short by the "unwinding stopped"
 * marker (2), or wrong (0). */
static int judge(const char *what, void **ours, int n, void **ref, int m)
{
    if (n == m && memcmp(ours, ref, sizeof *ours * (size_t)n) == 0)
        return 1;
    if (n >= 1 && n <= m && ours[n - 1] == HT_FRAME_UNWIND_STOPPED &&
        memcmp(ours, ref, sizeof *ours * (size_t)(n - 1)) == 0)
        return 2;
    if (wrong < 4) {
        fprintf(stderr, "%s, trap %d: ht %d frames, libunwind %d\n", what, traps, n, m);
        for (int k = 0; k < n || k < m; k++) {
            Dl_info di = { 0 };
            void *p = k < m ? ref[k] : ours[k];
            if (p != HT_FRAME_UNWIND_STOPPED)
                dladdr(p, &di);
            fprintf(stderr, "  %2d %18p %18p  %s\n", k, k < n ? ours[k] : NULL, k < m ? ref[k] : NULL,
                    di.dli_sname ? di.dli_sname : "?");
        }
    }
    return 0;
}

static void count(int verdict)
{
    if (verdict == 1)
        exact++;
    else if (verdict == 2)
        stopped++;
    else
        wrong++;
}

static void on_sigill(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    void *a[MAXF], *b[MAXF];
    uint64_t h;
    traps++;
    /* the mechanism: glibc (2.36 here) tells _dl_find_object about the
     * library only after relocating it (counted, not required) */
    struct dl_find_object fo;
    if (_dl_find_object((void *)uc->uc_mcontext.gregs[REG_RIP], &fo) != 0)
        unknown_to_loader++;

    int m = ref_context(uc, b, MAXF);
    int i = 0;
    while (i < m && b[i] != (void *)open_lib_ret)
        i++;
    if (i == m || m < 2 || (uintptr_t)b[0] != (uintptr_t)uc->uc_mcontext.gregs[REG_RIP])
        oracle_bad++;
    int n = ht_capture_context(uc, MAXF, a, &h);
    CHECK(h == ht_stack_hash(a, n));
    count(judge("ht_capture_context", a, n, b, m));

    /* through the signal frame: frame 0 of each is its own call site */
    n = ht_capture(0, MAXF, a, &h);
    m = unw_backtrace(b, MAXF);
    CHECK(h == ht_stack_hash(a, n));
    count(judge("ht_capture", a + 1, n - 1, b + 1, m - 1));

    uc->uc_mcontext.gregs[REG_RIP] += 2;  /* past the ud2 */
}

/* An argument names one library to load every time (for debugging). */
int main(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
    CHECK(len > 0);
    dir[len > 0 ? len : 0] = 0;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigill;
    sa.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGILL, &sa, NULL) == 0);

    static const char *const libs[] = { "libifunc_nofp.so", "libifunc_fp.so" };
    int opens = 0;
    for (int k = 0; k < 40; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, argc > 1 ? argv[1] : libs[k % 2]);
        void *h = open_lib(path, (k / 2) % 2 ? RTLD_NOW : RTLD_LAZY);
        CHECK(h != NULL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            continue;
        }
        opens++;
        int (*sum)(void) = (int (*)(void))dlsym(h, "ifunc_lib_sum");
        CHECK(sum && sum() == 12);
        CHECK_EQ(dlclose(h), 0);
    }
    fprintf(stderr, "%d traps (%d in code _dl_find_object did not know): %d walks exact, %d stopped, %d wrong\n",
            traps, unknown_to_loader, exact, stopped, wrong);
    CHECK_EQ(traps, 2 * opens);
    CHECK_EQ(oracle_bad, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(exact + stopped, 2 * traps);
    return check_done();
}
