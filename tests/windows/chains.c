/* chains.c -- the call chains of the Windows capture tests, one source
 * built for Windows (mingw-w64, run under Wine) and for Linux.
 *
 * On Windows, every capture point compares ht_capture() frame for frame
 * with a reference walk by ntdll's RtlLookupFunctionEntry/RtlVirtualUnwind
 * from the same frame (refwalk.h), checks ht_CaptureStackBackTrace()
 * against ht_capture(), and the skip/max/hash contracts. Chains: recursion
 * through callee-saved registers, VLAs, alloca, tail calls, a realigned
 * stack, calls into a DLL through its import thunks and back, deep
 * recursion, the generated chains of genchains.py (frame sizes, saved
 * registers, xmm saves, stack arguments, calls through pointers), a
 * vectored exception handler (through the exception dispatcher, and
 * ht_capture_context from the faulting context), and 4 threads at once.
 *
 * `chains symbols` (both systems) instead runs each portable chain once and
 * prints the frames of every capture point as module + offset, for
 * capture.sh to symbolize and compare between the Windows and Linux
 * builds of this file: the same sequence of functions up to main. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "heaptrail.h"
#include "check.h"
#include "capture/chain.h"
#include "windows/genchains.h"
#ifdef _WIN32
#include <windows.h>
#include "windows/refwalk.h"
#else
#include <dlfcn.h>
#include <pthread.h>
#endif

#define MAXF 256

static volatile int sink;
static int symbols_mode;

#ifdef _WIN32
static int compared, frames_compared, mismatches;
static CRITICAL_SECTION report_lock;

static void print_stack(const char *label, void **f, int n)
{
    fprintf(stderr, "  %s (%d frames):\n", label, n);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "    #%-3d %p\n", i, f[i]);
}

/* Our frames against the reference's, where ref[off..] corresponds to
 * ours[0..]. */
static void compare(const char *what, void **ours, int n, void **ref, int m, int off)
{
    int ok = off >= 0 && n == m - off;
    for (int i = 0; ok && i < n; i++)
        ok = ours[i] == ref[off + i];
    EnterCriticalSection(&report_lock);
    compared++;
    frames_compared += n;
    if (!ok) {
        mismatches++;
        if (mismatches <= 5) {
            fprintf(stderr, "MISMATCH in %s (offset %d)\n", what, off);
            print_stack("ht_capture", ours, n);
            print_stack("RtlVirtualUnwind", ref, m);
        }
    }
    LeaveCriticalSection(&report_lock);
}

/* Both walks from the same frame: ref[0] is the return address into this
 * function, ours skips this function, so ours[0] is ref[1]. */
__attribute__((noinline)) static void capture_pair(void **ours, int *n, uint64_t *h, void **ref,
                                                   int *m)
{
    *n = ht_capture(1, MAXF, ours, h);
    *m = ref_walk(ref, MAXF + 2);
}

/* ht_CaptureStackBackTrace from the same place as ht_capture(1, ...). */
__attribute__((noinline)) static void capture_bt_pair(void **ours, int *n, void **bt, int *k,
                                                      unsigned long *h32)
{
    *n = ht_capture(1, MAXF, ours, NULL);
    *k = ht_CaptureStackBackTrace(1, MAXF, bt, h32);
}
#endif

static void print_symbols(const char *label, void **f, int n)
{
    printf("CAPTURE %s\n", label);
    for (int i = 0; i < n; i++) {
        const char *name = "?";
        uintptr_t off = 0;
#ifdef _WIN32
        static char path[MAX_PATH];
        HMODULE m = NULL;
        if (GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                   GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                               (const char *)f[i] - 1, &m) &&
            GetModuleFileNameA(m, path, sizeof path)) {
            const char *s = strrchr(path, '\\');
            name = s ? s + 1 : path;
            off = (uintptr_t)f[i] - (uintptr_t)m;
        }
#else
        Dl_info di;
        if (dladdr((char *)f[i] - 1, &di) && di.dli_fname) {
            const char *s = strrchr(di.dli_fname, '/');
            name = s ? s + 1 : di.dli_fname;
            off = (uintptr_t)f[i] - (uintptr_t)di.dli_fbase;
        }
#endif
        printf("FRAME %s %llx\n", name, (unsigned long long)off);
    }
    printf("END\n");
}

/* The check at every capture point. */
__attribute__((noinline)) void check_point(const char *what)
{
    void *ours[MAXF];
    if (symbols_mode) {
        int n = ht_capture(0, MAXF, ours, NULL);
        print_symbols(what, ours, n);
        return;
    }
#ifdef _WIN32
    void *ref[MAXF + 2], *part[MAXF], *bt[MAXF];
    uint64_t h = 0;
    int n, m;
    capture_pair(ours, &n, &h, ref, &m);
    compare(what, ours, n, ref, m, 1);
    CHECK(h == ht_stack_hash(ours, n));
    /* skip and max, on the same stack (skip 1 drops this function, whose
     * return addresses differ between the calls) */
    n = ht_capture(1, MAXF, ours, &h);
    uint64_t h3;
    int k = ht_capture(4, MAXF, part, &h3);
    CHECK_EQ(k, n > 3 ? n - 3 : 0);
    CHECK(k <= 0 || memcmp(part, ours + 3, (size_t)k * sizeof(void *)) == 0);
    CHECK(h3 == ht_stack_hash(part, k));
    k = ht_capture(1, 2, part, NULL);
    CHECK_EQ(k, n < 2 ? n : 2);
    CHECK(k <= 0 || memcmp(part, ours, (size_t)k * sizeof(void *)) == 0);
    /* the CaptureStackBackTrace drop-in: same frames, folded hash */
    unsigned long h32 = 0;
    capture_bt_pair(ours, &n, bt, &k, &h32);
    CHECK_EQ(k, n);
    CHECK(memcmp(bt, ours, (size_t)n * sizeof(void *)) == 0);
    uint64_t hb = ht_stack_hash(bt, k);
    CHECK_EQ(h32, (unsigned long)(uint32_t)(hb ^ (hb >> 32)));
#endif
    sink++;
}

/* ---- chain shapes ------------------------------------------------------- */

#include "capture/shapes.inc"

__attribute__((noinline)) static void run_chains(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        ping(i % 9, i);
        with_alloca(16 + i % 40, i % 5);
        call_tailer(i % 4, i);
        realigned(i, 2, 3, 4, 5, 6, 7, 8);
        through_lib(i % 3);
        deep(40 + i % 3);
        for (int k = 0; k < GEN_ENTRIES; k++)
            gen_entry(k, i);
    }
}

/* ---- Windows only: exceptions, threads ---------------------------------- */
#ifdef _WIN32
static volatile int in_fault_test;
static int fault_contexts_checked;

/* A vectored handler for the ud2 below: captures through the exception
 * dispatcher (ht_capture against the reference), and from the faulting
 * context (ht_capture_context against a reference walk from a copy of
 * it), then skips the 2-byte ud2. */
static LONG CALLBACK on_exception(EXCEPTION_POINTERS *ep)
{
    if (!in_fault_test || ep->ExceptionRecord->ExceptionCode != STATUS_ILLEGAL_INSTRUCTION)
        return EXCEPTION_CONTINUE_SEARCH;
    check_point("vectored exception handler");
    void *ours[MAXF], *ref[MAXF];
    int n = ht_capture_context(ep->ContextRecord, MAXF, ours, NULL);
    CONTEXT copy = *ep->ContextRecord;
    int m = ref_walk_from(&copy, ref, MAXF);
    CHECK(n >= 1 && ours[0] == (void *)ep->ContextRecord->Rip);
    compare("ht_capture_context", ours + 1, n - 1, ref, m, 0);
    fault_contexts_checked++;
    ep->ContextRecord->Rip += 2;
    return EXCEPTION_CONTINUE_EXECUTION;
}

__attribute__((noinline)) static int faulting(int d)
{
    if (d > 0)
        return faulting(d - 1) + 1;
    __asm__ volatile("ud2");
    return 0;
}

static DWORD WINAPI thread_main(void *arg)
{
    run_chains(40);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "symbols") == 0) {
        symbols_mode = 1;
        run_chains(1);
        return 0;
    }
#ifdef _WIN32
    InitializeCriticalSection(&report_lock);
    run_chains(20);

    PVOID veh = AddVectoredExceptionHandler(1, on_exception);
    CHECK(veh != NULL);
    in_fault_test = 1;
    for (int i = 0; i < 10; i++)
        faulting(i % 4);
    in_fault_test = 0;
    RemoveVectoredExceptionHandler(veh);
    CHECK_EQ(fault_contexts_checked, 10);

    HANDLE t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = CreateThread(NULL, 0, thread_main, NULL, 0, NULL);
        CHECK(t[i] != NULL);
    }
    WaitForMultipleObjects(4, t, TRUE, INFINITE);
    for (int i = 0; i < 4; i++)
        CloseHandle(t[i]);

    fprintf(stderr, "compared %d stacks (%d frames) with RtlVirtualUnwind: %d mismatches\n",
            compared, frames_compared, mismatches);
    CHECK_EQ(mismatches, 0);
    CHECK(compared > 1000);
    return check_done();
#else
    fprintf(stderr, "chains: the Linux build only prints symbols (chains symbols)\n");
    return 2;
#endif
}
