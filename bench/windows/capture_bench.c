/* capture_bench.c -- ns per frame of stack capture on Windows x64, side by
 * side in one run: ht_capture, ht_CaptureStackBackTrace,
 * RtlCaptureStackBackTrace (ntdll), CaptureStackBackTrace (kernel32's
 * export of the same name), the plain RtlLookupFunctionEntry +
 * RtlVirtualUnwind loop (with an unwind-history table), and StackWalk64
 * (dbghelp). Every method captures the same D frames from the innermost
 * function of the generated chain (tests/windows/genchains.py: gcc -O2
 * without frame pointers, 48 functions with assorted frames), so ns/frame
 * compare like for like; a third column puts 8 JIT frames (registered
 * with RtlAddFunctionTable) among the 32. Each figure is the best of 9 runs of about 30 ms,
 * the methods taking turns.
 *
 * Under Wine the absolute numbers are Wine's, not Windows': ntdll's
 * functions are Wine's implementations. Compare ratios. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include <dbghelp.h>
#include "heaptrail.h"
#include "windows/genchains.h"

#define RUNS 9
#define MAXD 64

typedef int (*method_fn)(int depth, void **out);

static USHORT(WINAPI *rtl_ntdll)(ULONG, ULONG, PVOID *, PULONG);
static USHORT(WINAPI *rtl_kernel32)(ULONG, ULONG, PVOID *, PULONG);

static int m_ht_capture(int d, void **out) { return ht_capture(0, d, out, NULL); }
static int m_ht_bt(int d, void **out) { return ht_CaptureStackBackTrace(0, (unsigned long)d, out, NULL); }
static int m_rtl(int d, void **out) { return rtl_ntdll(0, (ULONG)d, out, NULL); }
static int m_k32(int d, void **out) { return rtl_kernel32(0, (ULONG)d, out, NULL); }

__attribute__((noinline)) static int m_loop(int d, void **out)
{
    CONTEXT ctx;
    UNWIND_HISTORY_TABLE hist;
    memset(&hist, 0, sizeof hist);
    RtlCaptureContext(&ctx);
    int n = 0;
    while (n < d) {
        DWORD64 base = 0;
        PRUNTIME_FUNCTION fn = RtlLookupFunctionEntry(ctx.Rip, &base, &hist);
        if (fn) {
            PVOID hd;
            DWORD64 est;
            RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, ctx.Rip, fn, &ctx, &hd, &est, NULL);
        } else {
            ctx.Rip = *(DWORD64 *)ctx.Rsp;
            ctx.Rsp += 8;
        }
        if (!ctx.Rip)
            break;
        out[n++] = (void *)ctx.Rip;
    }
    return n;
}

__attribute__((noinline)) static int m_stackwalk(int d, void **out)
{
    CONTEXT ctx;
    RtlCaptureContext(&ctx);
    STACKFRAME64 f;
    memset(&f, 0, sizeof f);
    f.AddrPC.Offset = ctx.Rip;
    f.AddrPC.Mode = AddrModeFlat;
    f.AddrStack.Offset = ctx.Rsp;
    f.AddrStack.Mode = AddrModeFlat;
    f.AddrFrame.Offset = ctx.Rbp;
    f.AddrFrame.Mode = AddrModeFlat;
    HANDLE proc = GetCurrentProcess(), thread = GetCurrentThread();
    int n = 0;
    /* the first frame StackWalk64 reports is the context's own pc */
    if (!StackWalk64(IMAGE_FILE_MACHINE_AMD64, proc, thread, &f, &ctx, NULL,
                     SymFunctionTableAccess64, SymGetModuleBase64, NULL))
        return 0;
    while (n < d && StackWalk64(IMAGE_FILE_MACHINE_AMD64, proc, thread, &f, &ctx, NULL,
                                SymFunctionTableAccess64, SymGetModuleBase64, NULL) &&
           f.AddrPC.Offset)
        out[n++] = (void *)f.AddrPC.Offset;
    return n;
}

static const struct {
    const char *name;
    method_fn fn;
} methods[] = {
    { "ht_capture", m_ht_capture },
    { "ht_CaptureStackBackTrace", m_ht_bt },
    { "RtlCaptureStackBackTrace (ntdll)", m_rtl },
    { "CaptureStackBackTrace (kernel32)", m_k32 },
    { "RtlLookupFunctionEntry+RtlVirtualUnwind loop", m_loop },
    { "StackWalk64 (dbghelp)", m_stackwalk },
};
#define NMETHODS ((int)(sizeof methods / sizeof methods[0]))

static double now_ns(void)
{
    static LARGE_INTEGER freq;
    LARGE_INTEGER t;
    if (!freq.QuadPart)
        QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart * 1e9 / (double)freq.QuadPart;
}

/* columns: 8 and 32 native frames, then 32 frames of which 8 are JIT */
#define NCOLS 3
static const int depths[NCOLS] = { 8, 32, 32 };
static const int nmethods = NMETHODS;
static double result[NCOLS][16];
static int frames_got[NCOLS][16];

/* Times every method at depths[col], from here. The methods take turns,
 * run after run, so that a noisy moment on a shared machine hits them
 * alike; each figure is the best run. */
__attribute__((noinline)) static void measure(int col)
{
    void *out[MAXD];
    int d = depths[col], iters[16];
    for (int m = 0; m < nmethods; m++) {
        int n = methods[m].fn(d, out);       /* warm up: caches, dbghelp's tables */
        frames_got[col][m] = n;
        /* enough iterations for about 30 ms a run */
        iters[m] = 1;
        for (;;) {
            double t0 = now_ns();
            for (int i = 0; i < iters[m]; i++)
                methods[m].fn(d, out);
            double t = now_ns() - t0;
            if (t > 3e6 || iters[m] >= (1 << 24)) {
                iters[m] = (int)(iters[m] * 3e7 / (t > 1 ? t : 1)) + 1;
                break;
            }
            iters[m] *= 4;
        }
        result[col][m] = 1e300;
    }
    for (int r = 0; r < RUNS; r++) {
        for (int m = 0; m < nmethods; m++) {
            int n = frames_got[col][m] ? frames_got[col][m] : 1;
            double t0 = now_ns();
            for (int i = 0; i < iters[m]; i++)
                methods[m].fn(d, out);
            double t = (now_ns() - t0) / iters[m] / n;
            if (t < result[col][m])
                result[col][m] = t;
        }
    }
}

/* ---- JIT frames -----------------------------------------------------------
 * JIT_FRAMES functions emitted into executable memory and registered with
 * RtlAddFunctionTable, each `push rbx; sub rsp, 0x20; call next`, the last
 * calling back into C. */
#define JIT_FRAMES 8
static void *jit_entry;

static int jit_point(void *arg)
{
    (void)arg;
    measure(2);
    return 0;
}

static int emit_jit(void)
{
    uint8_t *base = VirtualAlloc(NULL, 0x10000, MEM_RESERVE | MEM_COMMIT, PAGE_EXECUTE_READWRITE);
    if (!base)
        return 0;
    RUNTIME_FUNCTION *table = (RUNTIME_FUNCTION *)(base + 0x8000);
    uint8_t *info = base + 0x9000;      /* one UNWIND_INFO serves all */
    static const uint8_t ui[8] = { 1, 5, 2, 0, 5, 0x32, 1, 0x30 };
    /* version 1, prolog 5, 2 codes: ALLOC_SMALL 0x20 at 5, PUSH_NONVOL rbx at 1 */
    memcpy(info, ui, sizeof ui);
    for (int i = JIT_FRAMES - 1; i >= 0; i--) {
        uint8_t *f = base + 0x100 + 0x40 * i, *p = f;
        memcpy(p, "\x53\x48\x83\xec\x20", 5);
        p += 5;
        if (i == JIT_FRAMES - 1) {
            memcpy(p, "\x48\x89\xc8\x48\x89\xd1\xff\xd0", 8);   /* call cb(arg) */
            p += 8;
        } else {
            uint64_t next = (uint64_t)(uintptr_t)(f + 0x40);
            memcpy(p, "\x48\xb8", 2);
            memcpy(p + 2, &next, 8);
            memcpy(p + 10, "\xff\xd0", 2);                          /* call next */
            p += 12;
        }
        memcpy(p, "\x48\x83\xc4\x20\x5b\xc3", 6);
        p += 6;
        table[i].BeginAddress = (DWORD)(f - base);
        table[i].EndAddress = (DWORD)(p - base);
        table[i].UnwindData = (DWORD)(info - base);
    }
    FlushInstructionCache(GetCurrentProcess(), base, 0x10000);
    jit_entry = base + 0x100;
    return RtlAddFunctionTable(table, JIT_FRAMES, (DWORD64)base);
}

/* Runs at the bottom of the generated chain. */
void check_point(const char *what)
{
    (void)what;
    measure(0);
    measure(1);
    ((int (*)(int (*)(void *), void *))jit_entry)(jit_point, NULL);
}

int main(void)
{
    HMODULE ntdll = GetModuleHandleA("ntdll.dll"), k32 = GetModuleHandleA("kernel32.dll");
    rtl_ntdll = (void *)GetProcAddress(ntdll, "RtlCaptureStackBackTrace");
    rtl_kernel32 = (void *)GetProcAddress(k32, "RtlCaptureStackBackTrace");
    if (!rtl_ntdll || !rtl_kernel32 || !SymInitialize(GetCurrentProcess(), NULL, TRUE)) {
        fprintf(stderr, "capture_bench: missing RtlCaptureStackBackTrace or dbghelp\n");
        return 1;
    }
    SetThreadAffinityMask(GetCurrentThread(), 1);
    if (!emit_jit()) {
        fprintf(stderr, "capture_bench: cannot emit the JIT frames\n");
        return 1;
    }
    gen_entry(0, 1);

    printf("Stack capture, Windows x64 under Wine: ns per frame (best of %d runs)\n", RUNS);
    printf("from the bottom of a 48-function gcc -O2 chain without frame pointers\n");
    printf("kernel32's RtlCaptureStackBackTrace %s ntdll's\n\n",
           rtl_kernel32 == rtl_ntdll ? "is forwarded to" : "is not the same function as");
    printf("%-46s %24s %24s %24s\n", "", "8 frames", "32 frames", "32 frames, 8 of them JIT");
    printf("%-46s", "method");
    for (int col = 0; col < NCOLS; col++)
        printf("  %10s  %10s", "ns/frame", "x ht_capt");
    printf("\n");
    int bad = 0;
    for (int m = 0; m < nmethods; m++) {
        printf("%-46s", methods[m].name);
        for (int col = 0; col < NCOLS; col++) {
            if (frames_got[col][m] == depths[col]) {
                printf("  %10.1f  %10.1f", result[col][m], result[col][m] / result[col][0]);
            } else {
                char cell[32];
                snprintf(cell, sizeof cell, "stops after %d frames", frames_got[col][m]);
                printf("  %22s", cell);
            }
            /* ht_capture and its drop-in must always get every frame */
            bad |= m < 2 && frames_got[col][m] != depths[col];
        }
        printf("\n");
    }
    return bad;
}
