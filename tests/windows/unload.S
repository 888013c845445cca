/* unload.S -- the two DLLs of unload.c: unload_call(cb, arg) calls
 * cb(arg) from a frame of 0x80 bytes (VARIANT_a) or 0x180 bytes
 * (VARIANT_b). Both sizes take the imm32 form of sub/add, so the code has
 * the same layout and the call returns to the same offset: a rule cached
 * for variant a's return address is wrong for variant b's. */
#ifdef VARIANT_a
#define FRAME 0x80
#else
#define FRAME 0x180
#endif
    .text
    .p2align 4
    .globl  unload_call
    .def    unload_call; .scl 2; .type 32; .endef
    .seh_proc unload_call
unload_call:
    pushq   %rbx
    .seh_pushreg %rbx
    subq    $FRAME, %rsp
    .seh_stackalloc FRAME
    .seh_endprologue
    movq    %rcx, %rax
    movq    %rdx, %rcx
    call    *%rax
    addq    $FRAME, %rsp
    popq    %rbx
    ret
    .seh_endproc

    .section .drectve
    .ascii " -export:unload_call"
