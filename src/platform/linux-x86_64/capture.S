/* capture.S -- ht_capture()'s entry: records the caller's registers
 * exactly as they will be when ht_capture returns (pc = return address,
 * sp = the stack pointer after the return, rbp unchanged because it is
 * callee-saved) and hands them to ht__capture_regs(skip, max, frames,
 * hash, regs, memo). The same for the agent's ht__capture_memo
 * (unwind.h). Written in assembly so no compiler-generated prologue can
 * disturb what is recorded. */

/* ENTRY name, memo: the memo variant passes its fifth argument on as
 * ht__capture_regs' sixth; ht_capture passes NULL */
    .macro ENTRY name, memo
    .globl  \name
    .type   \name, @function
    .p2align 4
\name:
    .cfi_startproc
    endbr64
    subq    $24, %rsp               /* regs[3]; keeps rsp 16-aligned for the call */
    .cfi_adjust_cfa_offset 24
    movq    24(%rsp), %rax
    movq    %rax, 0(%rsp)           /* pc */
    leaq    32(%rsp), %rax
    movq    %rax, 8(%rsp)           /* sp after return */
    movq    %rbp, 16(%rsp)          /* rbp */
    .if \memo
    movq    %r8, %r9
    .else
    xorl    %r9d, %r9d
    .endif
    movq    %rsp, %r8
    call    ht__capture_regs
    addq    $24, %rsp
    .cfi_adjust_cfa_offset -24
    ret
    .cfi_endproc
    .size   \name, .-\name
    .endm

    .text
    ENTRY ht_capture, 0
    .hidden ht__capture_memo
    ENTRY ht__capture_memo, 1

    .section .note.GNU-stack,"",@progbits
