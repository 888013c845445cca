/* jitcode.h -- what the test mini JITs emit (tests/capture/jit.c,
 * tests/progs/minijit.c): two shapes of x86-64 function
 * `void f(void (*next)(void *), void *arg)` that call next(arg), and the
 * .eh_frame describing the shape without a frame pointer.
 *   FP:   push rbp; mov rbp,rsp; call; pop rbp; ret  (frame pointer, no CFI)
 *   CFI:  push rbp; sub rsp,16; rbp = junk; call; ...  (no frame pointer:
 *         only its CFI can unwind it; a frame-pointer step would fail) */
#ifndef HT_TEST_JITCODE_H
#define HT_TEST_JITCODE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { JIT_SHAPE_FP, JIT_SHAPE_CFI };
static const uint8_t jit_code_fp[] = {
    0x55,                               /* push rbp */
    0x48, 0x89, 0xe5,                   /* mov rbp, rsp */
    0x48, 0x89, 0xf8,                   /* mov rax, rdi */
    0x48, 0x89, 0xf7,                   /* mov rdi, rsi */
    0xff, 0xd0,                         /* call rax   -> return address at 12 */
    0x5d,                               /* pop rbp */
    0xc3,                               /* ret */
};
static const uint8_t jit_code_cfi[] = {
    0x55,                               /* 0: push rbp */
    0x48, 0x83, 0xec, 0x10,             /* 1: sub rsp, 16 */
    0x48, 0xbd, 0xef, 0xbe, 0x00, 0x00, 0xad, 0xde, 0x00, 0x00, /* 5: movabs rbp, junk */
    0x48, 0x89, 0xf8,                   /* 15: mov rax, rdi */
    0x48, 0x89, 0xf7,                   /* 18: mov rdi, rsi */
    0xff, 0xd0,                         /* 21: call rax -> return address at 23 */
    0x48, 0x83, 0xc4, 0x10,             /* 23: add rsp, 16 */
    0x5d,                               /* 27: pop rbp */
    0xc3,                               /* 28: ret */
};
static const int jit_ra_off[2] = { 12, 23 };
static const size_t jit_code_size[2] = { sizeof jit_code_fp, sizeof jit_code_cfi };

/* An .eh_frame for `n` CFI-shaped functions at code[0..n): one CIE, an FDE
 * each, zero-terminated, written to `out`. FDE addresses are absolute, or
 * with `pcrel` pc-relative 32-bit (as compilers and most JITs write them),
 * relative to where the section will be read: `at` (out itself, or where
 * a copy of it will live). Returns its size, terminator included. */
static inline size_t jit_eh_frame(uint8_t *out, uintptr_t at, const uintptr_t *code, size_t n, int pcrel)
{
    uint8_t *p = out;
    const uint8_t cie[] = {
        0x14, 0, 0, 0,          /* length 20 */
        0, 0, 0, 0,             /* CIE id */
        1, 'z', 'R', 0,         /* version, augmentation */
        1, 0x78, 16,            /* code align 1, data align -8, RA column 16 */
        1, (uint8_t)(pcrel ? 0x1b : 0x00), /* augmentation data: FDE pointers
                                   pcrel|sdata4, or absolute */
        0x0c, 7, 8,             /* DW_CFA_def_cfa rsp+8 */
        0x90, 1,                /* DW_CFA_offset RA at cfa-8 */
        0, 0,                   /* padding */
    };
    memcpy(p, cie, sizeof cie);
    p += sizeof cie;
    static const uint8_t insns[] = {
        0x41, 0x0e, 16, 0x86, 2,    /* +1: cfa = rsp+16, rbp at cfa-16 */
        0x44, 0x0e, 32,             /* +4: cfa = rsp+32 */
        0x56, 0x0e, 16,             /* +22 (at 27): cfa = rsp+16 */
        0x41, 0x0e, 8, 0xc6,        /* +1 (at 28): cfa = rsp+8, rbp restored */
    };
    for (size_t i = 0; i < n; i++) {
        uint8_t *fde = p;
        size_t addr = pcrel ? 4 : 8;             /* bytes of pc_begin, pc_range */
        uint32_t len = (uint32_t)(4 + 2 * addr + 1 + sizeof insns);
        len = (len + 3) & ~3u;                   /* DW_CFA_nop to a 4-byte boundary */
        memset(fde, 0, 4 + len);
        memcpy(fde, &len, 4);
        uint32_t cie_ptr = (uint32_t)(fde + 4 - out);
        memcpy(fde + 4, &cie_ptr, 4);
        if (pcrel) {
            int32_t begin = (int32_t)((intptr_t)code[i] - (intptr_t)(at + (uintptr_t)(fde + 8 - out)));
            uint32_t range = sizeof jit_code_cfi;
            memcpy(fde + 8, &begin, 4);
            memcpy(fde + 12, &range, 4);
        } else {
            uint64_t begin = code[i], range = sizeof jit_code_cfi;
            memcpy(fde + 8, &begin, 8);
            memcpy(fde + 16, &range, 8);
        }
        fde[8 + 2 * addr] = 0;                   /* augmentation data length */
        memcpy(fde + 8 + 2 * addr + 1, insns, sizeof insns);
        p = fde + 4 + len;
    }
    memset(p, 0, 4);            /* terminator */
    return (size_t)(p + 4 - out);
}

#endif
