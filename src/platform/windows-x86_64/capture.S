/* capture.S -- the entries of ht_capture() and ht_CaptureStackBackTrace()
 * on Windows x64: record the caller's registers exactly as they will be
 * when the entry returns (pc = the return address, sp = rsp after the
 * return, and the callee-saved rbx, rbp, rsi, rdi, r12-r15, which the
 * caller's frame still holds) and hand them to the C walk as a fifth
 * argument. Written in assembly so no compiler prologue can disturb what
 * is recorded; the .seh_ directives give both entries unwind data like any
 * other function.
 *
 * Frame: 32 bytes of home space, the fifth argument at 32, regs[10] at 40;
 * 120 bytes keep rsp 16-aligned at the call. */

.macro HT_ENTRY name, target
    .text
    .p2align 4
    .globl  \name
    .def    \name; .scl 2; .type 32; .endef
    .seh_proc \name
\name:
    subq    $120, %rsp
    .seh_stackalloc 120
    .seh_endprologue
    movq    120(%rsp), %rax
    movq    %rax, 40(%rsp)          /* pc */
    leaq    128(%rsp), %rax
    movq    %rax, 48(%rsp)          /* sp after the return */
    movq    %rbx, 56(%rsp)
    movq    %rbp, 64(%rsp)
    movq    %rsi, 72(%rsp)
    movq    %rdi, 80(%rsp)
    movq    %r12, 88(%rsp)
    movq    %r13, 96(%rsp)
    movq    %r14, 104(%rsp)
    movq    %r15, 112(%rsp)
    leaq    40(%rsp), %rax
    movq    %rax, 32(%rsp)          /* fifth argument: regs */
    call    \target
    addq    $120, %rsp
    ret
    .seh_endproc
#ifdef HT_BUILDING
    .section .drectve
    .ascii " -export:\name"
#endif
.endm

    HT_ENTRY ht_capture, ht__capture_regs
    HT_ENTRY ht_CaptureStackBackTrace, ht__capture_bt
