/* step.c -- ht_capture_context at every instruction: the generated chains
 * (genchains.c) run under the trap flag, and at each single-step exception
 * a vectored handler walks the interrupted thread's stack from the
 * exception's CONTEXT with ht_capture_context and with the reference
 * (RtlVirtualUnwind from a copy of the context). Every instruction of
 * every function on the way -- each prolog instruction, each epilog
 * instruction -- must give the same frames, except in code without unwind
 * data that has pushed (libgcc's ___chkstk_ms), where the reference's leaf
 * step goes to an address that is no code and ht_capture_context must not
 * follow it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "check.h"
#include "windows/genchains.h"
#include "windows/refwalk.h"

#define MAXF 128
#define TF 0x100u

static volatile int stepping;
static long steps, agree, no_info, differ, in_prolog, at_epilog;
static volatile long long sink;

void check_point(const char *what)
{
    (void)what;
    sink++;
}

static int is_code(void *ra)
{
    void *b;
    return ra && RtlPcToFileHeader((char *)ra - 1, &b) != NULL;
}

/* 1 in a prolog, 2 at an epilog instruction, 0 elsewhere */
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

static LONG CALLBACK on_step(EXCEPTION_POINTERS *ep)
{
    if (ep->ExceptionRecord->ExceptionCode != STATUS_SINGLE_STEP)
        return EXCEPTION_CONTINUE_SEARCH;
    CONTEXT *ctx = ep->ContextRecord;
    if (!stepping) {
        ctx->EFlags &= ~TF;
        return EXCEPTION_CONTINUE_EXECUTION;
    }
    static void *ours[MAXF], *ref[MAXF];
    int n = ht_capture_context(ctx, MAXF, ours, NULL);
    CONTEXT copy = *ctx;
    int m = ref_walk_from(&copy, ref, MAXF);
    int ok = n >= 1 && ours[0] == (void *)ctx->Rip && n - 1 == m &&
             memcmp(ours + 1, ref, (size_t)m * sizeof(void *)) == 0;
    DWORD64 b;
    steps++;
    if (ok) {
        agree++;
        int p = position(ctx->Rip);
        in_prolog += p == 1;
        at_epilog += p == 2;
    } else if (!RtlLookupFunctionEntry(ctx->Rip, &b, NULL) && m > 0 && !is_code(ref[0])) {
        no_info++;
        if (!(n >= 1 && ours[0] == (void *)ctx->Rip && (n == 1 || ours[1] != ref[0])))
            differ++;
    } else if (++differ <= 3) {
        fprintf(stderr, "at rip %p (position %d):\n", (void *)ctx->Rip, position(ctx->Rip));
        for (int i = 0; i < n || i <= m; i++)
            fprintf(stderr, "  #%-2d %p %p\n", i, i < n ? ours[i] : NULL,
                    i == 0 ? (void *)ctx->Rip : i - 1 < m ? ref[i - 1] : NULL);
    }
    ctx->EFlags |= TF;
    return EXCEPTION_CONTINUE_EXECUTION;
}

__attribute__((noinline)) static void run_stepped(int k)
{
    stepping = 1;
    __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
    gen_entry(k, k + 1);
    stepping = 0;
    __asm__ volatile("nop");
}

int main(void)
{
    PVOID h = AddVectoredExceptionHandler(1, on_step);
    CHECK(h != NULL);
    for (int k = 0; k < GEN_ENTRIES; k++)
        run_stepped(k);
    RemoveVectoredExceptionHandler(h);
    fprintf(stderr, "%ld instructions stepped: %ld agree with RtlVirtualUnwind (%ld in a prolog, "
            "%ld at an epilog instruction), %ld in code without unwind data, %ld differ\n",
            steps, agree, in_prolog, at_epilog, no_info, differ);
    CHECK_EQ(differ, 0);
    CHECK(steps > 1000);
    CHECK(in_prolog > 100 && at_epilog > 100);
    return check_done();
}
