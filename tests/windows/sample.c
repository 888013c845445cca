/* sample.c -- ht_capture_context at arbitrary instructions, the way a
 * sampling profiler uses it: a worker thread runs the generated chains
 * (genchains.c, their prologs and epilogs included) while the main thread
 * suspends it, takes its CONTEXT, walks its stack with ht_capture_context
 * and with the reference (RtlVirtualUnwind from a copy of the context),
 * and resumes it. Every sample must agree frame for frame, except in code
 * without unwind data that had pushed (libgcc's ___chkstk_ms), where the
 * reference's leaf step goes to an address that is no code: there
 * ht_capture_context must not take that step. The walks read the worker's
 * stack from another thread (bounds from VirtualQuery, not the TEB). Where
 * the samples land is printed; step.c covers every instruction.
 *
 * Then robustness: ht_capture_context from 20000 random contexts (rsp at
 * random places in this thread's stack, rip in random functions or at
 * random addresses, random registers) must return without faulting. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "check.h"
#include "windows/genchains.h"
#include "windows/refwalk.h"

#define MAXF 128
#define SAMPLES 3000

static volatile int stop;
static volatile long long spin_sink;

void check_point(const char *what)
{
    (void)what;
    spin_sink++;
}

static DWORD WINAPI worker(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++)
        gen_entry(i % GEN_ENTRIES, i);
    return 0;
}

/* Where in its function an interrupted pc is: 1 in the prolog, 2 at an
 * epilog instruction (add rsp / lea rsp / pop / ret), 0 elsewhere. */
static int position(uintptr_t pc)
{
    DWORD64 base;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry(pc, &base, NULL);
    if (!f)
        return 0;
    const uint8_t *info = (const uint8_t *)(base + f->UnwindData);
    if (pc - (base + f->BeginAddress) < info[1])
        return 1;
    const uint8_t *c = (const uint8_t *)pc;
    if (c[0] == 0xc3 || (c[0] >= 0x58 && c[0] <= 0x5f) || (c[0] == 0x41 && c[1] >= 0x58 && c[1] <= 0x5f) ||
        (c[0] == 0x48 && (c[1] == 0x83 || c[1] == 0x81) && c[2] == 0xc4) ||
        (c[0] == 0x48 && c[1] == 0x8d && ((c[2] >> 3) & 7) == 4))
        return 2;
    return 0;
}

/* Whether a return address leads into a loaded image. */
static int is_code(void *ra)
{
    void *b;
    return ra && RtlPcToFileHeader((char *)ra - 1, &b) != NULL;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    HANDLE t = CreateThread(NULL, 0, worker, NULL, 0, NULL);
    CHECK(t != NULL);
    Sleep(20);
    int agree = 0, differ = 0, no_info = 0, where[3] = { 0, 0, 0 };
    static void *ours[MAXF], *ref[MAXF];
    /* at least SAMPLES samples; more (up to 10x) while too few of them
     * landed in code with unwind data: in one `make test` run 2645 of the
     * first 3000 found the worker in ___chkstk_ms (or Wine's own code) */
    int s = 0;
    for (; s < 10 * SAMPLES && (s < SAMPLES || agree <= SAMPLES / 2); s++) {
        if (SuspendThread(t) == (DWORD)-1)
            break;
        CONTEXT ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.ContextFlags = CONTEXT_FULL;
        if (GetThreadContext(t, &ctx)) {
            int n = ht_capture_context(&ctx, MAXF, ours, NULL);
            CONTEXT copy = ctx;
            int m = ref_walk_from(&copy, ref, MAXF);
            int ok = n >= 1 && ours[0] == (void *)ctx.Rip && n - 1 == m &&
                     memcmp(ours + 1, ref, (size_t)m * sizeof(void *)) == 0;
            DWORD64 b;
            if (ok) {
                agree++;
                where[position(ctx.Rip)]++;
            } else if (!RtlLookupFunctionEntry(ctx.Rip, &b, NULL) && m > 0 && !is_code(ref[0])) {
                /* interrupted code without unwind data that had pushed
                 * (libgcc's ___chkstk_ms): the reference takes the leaf
                 * step to a "return address" that is no code and walks
                 * garbage; ht_capture_context must not take that step */
                no_info++;
                if (!(n >= 1 && ours[0] == (void *)ctx.Rip && (n == 1 || ours[1] != ref[0])))
                    differ++;
            } else if (++differ <= 3) {
                fprintf(stderr, "sample at rip %p (position %d) differs:\n", (void *)ctx.Rip,
                        position(ctx.Rip));
                for (int i = 0; i < n || i <= m; i++)
                    fprintf(stderr, "  #%-2d %p %p\n", i, i < n ? ours[i] : NULL,
                            i == 0 ? (void *)ctx.Rip : i - 1 < m ? ref[i - 1] : NULL);
            }
        }
        ResumeThread(t);
        if (s % 16 == 0)
            Sleep(0);
    }
    stop = 1;
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
    fprintf(stderr, "%d samples: %d agree with RtlVirtualUnwind (%d in a prolog, %d at an epilog "
            "instruction, %d elsewhere), %d in code without unwind data (refused the "
            "reference's step into no code), %d differ\n",
            s, agree, where[1], where[2], where[0], no_info, differ);
    CHECK_EQ(differ, 0);
    CHECK(agree > SAMPLES / 2);     /* (step.c covers every prolog and epilog) */

    /* robustness: random contexts */
    ULONG_PTR stack_lo, stack_hi;
    GetCurrentThreadStackLimits(&stack_lo, &stack_hi);
    uintptr_t here = (uintptr_t)&stack_lo, top = (uintptr_t)stack_hi;
    DWORD64 base;
    PRUNTIME_FUNCTION self = RtlLookupFunctionEntry((DWORD64)main, &base, NULL);
    ULONG count = 0;
    PRUNTIME_FUNCTION table = NULL;
    if (self) {
        /* this image's .pdata: random functions to start in */
        const IMAGE_NT_HEADERS64 *nt =
            (const IMAGE_NT_HEADERS64 *)(base + ((const IMAGE_DOS_HEADER *)base)->e_lfanew);
        const IMAGE_DATA_DIRECTORY *d = &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXCEPTION];
        table = (PRUNTIME_FUNCTION)(base + d->VirtualAddress);
        count = d->Size / sizeof(RUNTIME_FUNCTION);
    }
    CHECK(count > 100);
    int returned = 0, bounded = 1;
    for (int k = 0; k < 20000; k++) {
        CONTEXT c;
        memset(&c, 0, sizeof c);
        DWORD64 *gpr = &c.Rax;
        for (int i = 0; i < 16; i++) {
            uint64_t r = rnd();
            gpr[i] = (r & 3) == 0 ? here + (r >> 8) % (top - here) : (r & 3) == 1 ? r : r & 0xffff;
        }
        c.Rsp = here + (rnd() % (top - here)) / 8 * 8;
        uint64_t r = rnd();
        if (r & 1) {
            const RUNTIME_FUNCTION *f = &table[(r >> 1) % count];
            c.Rip = base + f->BeginAddress + (rnd() % (f->EndAddress - f->BeginAddress));
        } else {
            c.Rip = r >> 1;
        }
        int n = ht_capture_context(&c, MAXF, ours, NULL);
        bounded &= n >= 0 && n <= MAXF;
        returned++;
    }
    fprintf(stderr, "%d random contexts walked without a fault\n", returned);
    CHECK_EQ(returned, 20000);
    CHECK(bounded);
    return check_done();
}
