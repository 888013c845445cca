/* capture.S -- ht_capture()'s entry: records the caller's registers
 * exactly as they will be when ht_capture returns (pc = return address,
 * sp = the stack pointer after the return, rbp unchanged because it is
 * callee-saved) and hands them to ht__capture_regs(skip, max, frames,
 * hash, regs). Written in assembly so no compiler-generated prologue can
 * disturb what is recorded. */
    .text
    .globl  ht_capture
    .type   ht_capture, @function
    .p2align 4
ht_capture:
    .cfi_startproc
    endbr64
    subq    $24, %rsp               /* regs[3]; keeps rsp 16-aligned for the call */
    .cfi_adjust_cfa_offset 24
    movq    24(%rsp), %rax
    movq    %rax, 0(%rsp)           /* pc */
    leaq    32(%rsp), %rax
    movq    %rax, 8(%rsp)           /* sp after return */
    movq    %rbp, 16(%rsp)          /* rbp */
    movq    %rsp, %r8
    call    ht__capture_regs
    addq    $24, %rsp
    .cfi_adjust_cfa_offset -24
    ret
    .cfi_endproc
    .size   ht_capture, .-ht_capture

    .section .note.GNU-stack,"",@progbits
