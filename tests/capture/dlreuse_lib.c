/* dlreuse_lib.c -- built twice (VARIANT 1 and 2) into two libraries with
 * byte-for-byte the same layout except one immediate: inner() reserves a
 * different frame size before calling back. Loaded at the same address,
 * the same return address then needs a different unwind rule, so a rule
 * cached for one library is wrong for the other. */
#if VARIANT == 1
#define FRAME "4008"
#else
#define FRAME "72"
#endif

/* inner(cb): sub $FRAME, %rsp (always the imm32 encoding); call *cb */
__asm__(".text\n"
        ".globl inner\n.type inner,@function\n"
        "inner:\n"
        ".cfi_startproc\n"
        ".byte 0x48, 0x81, 0xec\n.long " FRAME "\n"
        ".cfi_adjust_cfa_offset " FRAME "\n"
        "call *%rdi\n"
        ".byte 0x48, 0x81, 0xc4\n.long " FRAME "\n"
        ".cfi_adjust_cfa_offset -" FRAME "\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size inner, .-inner\n");
void inner(void (*cb)(void));

static volatile int sink;

__attribute__((noinline)) void lib_entry(void (*cb)(void))
{
    inner(cb);
    sink++;
}
