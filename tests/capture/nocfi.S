/* nocfi.S -- hand-written code with no CFI (tests/capture/nocfi.c): no
 * FDE covers nocfi_call, so an unwinder must leave its frame by the frame
 * pointer it keeps. */
    .text
    .globl  nocfi_call
    .type   nocfi_call, @function
    .p2align 4
/* void nocfi_call(void (*fn)(long), long arg): calls fn(arg) */
nocfi_call:
    pushq   %rbp
    movq    %rsp, %rbp
    pushq   %rbx                /* a callee-saved register, and alignment */
    subq    $8, %rsp
    movq    %rdi, %rax
    movq    %rsi, %rdi
    call    *%rax
    addq    $8, %rsp
    popq    %rbx
    popq    %rbp
    ret
    .size   nocfi_call, .-nocfi_call

    .section .note.GNU-stack,"",@progbits
