/* refwalk.h -- the reference the Windows tests and benchmark hold
 * ht_capture to: the documented walk with ntdll's unwinder,
 * RtlLookupFunctionEntry + RtlVirtualUnwind per frame, a frame without a
 * function entry being a leaf whose return address is at rsp, until the
 * return address is 0. This is the loop people write by hand (and what
 * RtlCaptureStackBackTrace does on Windows). */
#ifndef HT_TEST_REFWALK_H
#define HT_TEST_REFWALK_H
#include <windows.h>

/* Walks from *ctx (left at the last frame), storing at most `max` return
 * addresses of the frames above it. */
static __attribute__((noinline, unused)) int ref_walk_from(CONTEXT *ctx, void **out, int max)
{
    int m = 0;
    while (m < max) {
        DWORD64 base = 0;
        PRUNTIME_FUNCTION fn = RtlLookupFunctionEntry(ctx->Rip, &base, NULL);
        if (fn) {
            PVOID hd;
            DWORD64 est;
            RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, ctx->Rip, fn, ctx, &hd, &est, NULL);
        } else {
            ctx->Rip = *(DWORD64 *)ctx->Rsp;
            ctx->Rsp += 8;
        }
        if (!ctx->Rip)
            break;
        out[m++] = (void *)ctx->Rip;
    }
    return m;
}

/* out[0] is the return address into ref_walk's caller, like
 * unw_backtrace() and ht_capture(0, ...). */
static __attribute__((noinline, unused)) int ref_walk(void **out, int max)
{
    CONTEXT ctx;
    RtlCaptureContext(&ctx);
    return ref_walk_from(&ctx, out, max);
}
#endif
