/* sigentry.S -- functions whose first instruction traps
 * (tests/capture/sigentry.c): a signal arrives with the pc at the very
 * start of an FDE. The byte before it belongs to no FDE (after_gap: the
 * padding between functions, as before libm's IFUNC resolvers) or to
 * another function's FDE with another CFA (after_push: it ends in a call
 * that does not return), so the rule at pc - 1 is the wrong one. And a
 * frame whose CFA is kept in rbx (rbx_frame), further out. */
    .text
    .globl  sigentry_after_gap
    .type   sigentry_after_gap, @function
    .p2align 4
    nop                         /* padding no FDE covers */
    nop
    nop
sigentry_after_gap:
    .cfi_startproc
    ud2                         /* the handler resumes after it */
    ret
    .cfi_endproc
    .size   sigentry_after_gap, .-sigentry_after_gap

    .type   sigentry_noreturn, @function
sigentry_noreturn:
    .cfi_startproc
    pushq   %rbp
    .cfi_def_cfa_offset 40
    .cfi_offset %rbp, -40
    call    abort
    .cfi_endproc
    .size   sigentry_noreturn, .-sigentry_noreturn

    .globl  sigentry_after_push
    .type   sigentry_after_push, @function
sigentry_after_push:
    .cfi_startproc
    ud2
    ret
    .cfi_endproc
    .size   sigentry_after_push, .-sigentry_after_push

/* void sigentry_rbx_frame(void (*fn)(void)): calls fn with the CFA kept
 * in rbx and the stack realigned below it, as ld.so's lazy-binding
 * trampoline (_dl_runtime_resolve_xsavec) does. */
    .globl  sigentry_rbx_frame
    .type   sigentry_rbx_frame, @function
    .p2align 4
sigentry_rbx_frame:
    .cfi_startproc
    pushq   %rbx
    .cfi_def_cfa_offset 16
    .cfi_offset %rbx, -16
    movq    %rsp, %rbx
    .cfi_def_cfa_register %rbx
    andq    $-64, %rsp
    subq    $192, %rsp
    call    *%rdi
    movq    %rbx, %rsp
    .cfi_def_cfa_register %rsp
    popq    %rbx
    .cfi_def_cfa_offset 8
    .cfi_restore %rbx
    ret
    .cfi_endproc
    .size   sigentry_rbx_frame, .-sigentry_rbx_frame

    .section .note.GNU-stack,"",@progbits
