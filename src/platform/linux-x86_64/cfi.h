/* cfi.h -- DWARF call frame information (.eh_frame) for x86-64: finding the
 * FDE that covers an address, running its CFA program to the row in force
 * there, and evaluating that row against a register set.
 *
 * Async-signal-safe and allocation-free: every byte read from a module's
 * unwind tables is bounds-checked against the segment that holds them, and
 * every read of process memory made while evaluating a row goes through the
 * caller's checked reader. */
#ifndef HT_LINUX_X86_64_CFI_H
#define HT_LINUX_X86_64_CFI_H

#include "../../core/util.h"
#include <link.h>

/* DWARF register numbers of x86-64 (System V psABI, figure 3.36). */
enum {
    HT_DW_RAX = 0, HT_DW_RDX, HT_DW_RCX, HT_DW_RBX, HT_DW_RSI, HT_DW_RDI,
    HT_DW_RBP = 6, HT_DW_RSP = 7, HT_DW_R8 = 8, HT_DW_R15 = 15,
    HT_DW_RA = 16,            /* the return address column */
    HT_DW_NREGS = 17
};

/* A loaded module as the unwinder needs it. */
typedef struct ht_module_s {
    uintptr_t start, end;     /* mapped span [start, end) */
    uintptr_t bias;           /* load bias: runtime = link-time + bias */
    uintptr_t text_lo[4], text_hi[4]; /* executable PT_LOAD segments */
    int ntext;
    uintptr_t eh_hdr;         /* .eh_frame_hdr at runtime, or 0 */
    uintptr_t rd_lo, rd_hi;   /* the readable PT_LOAD holding eh_frame_hdr */
} ht_module_t;

/* Finds the module containing `pc` (glibc's lock-free _dl_find_object).
 * Returns 0 and fills *m, or -1 if no loaded module contains pc. Reads the
 * module's memory: call it, and read what *m points to, only inside a
 * module read section. */
HT_INTERNAL int ht__module_find(uintptr_t pc, ht_module_t *m);
/* A module read section (see modules.c): ht__module_enter() returns 0 if
 * a dlclose is under way on another thread (then read nothing: treat the
 * address as unknown), else a token for ht__module_leave(). Sections may
 * nest and may be entered from signal handlers. Async-signal-safe. */
HT_INTERNAL int ht__module_enter(void);
HT_INTERNAL void ht__module_leave(int token);
/* The executable segment of *m that holds `pc` (text_lo/hi[i]), or -1. */
HT_INTERNAL int ht__module_text_seg(const ht_module_t *m, uintptr_t pc);
/* The program headers of the loaded object `map` (a struct link_map *)
 * whose _dl_find_object span is [start, end): sets *ph and returns their
 * number, or 0 if they cannot be found. Async-signal-safe. */
struct link_map;
HT_INTERNAL int ht__module_phdrs(const struct link_map *map, uintptr_t start, uintptr_t end,
                                 const ElfW(Phdr) **ph);

enum ht_rule_how {
    HT_RULE_SAME = 0,     /* unchanged (the default for callee-saved regs) */
    HT_RULE_UNDEFINED,    /* no value: for the RA, the outermost frame */
    HT_RULE_OFFSET,       /* saved at CFA + off */
    HT_RULE_VAL_OFFSET,   /* value is CFA + off */
    HT_RULE_REGISTER,     /* value is in register `reg` */
    HT_RULE_EXPR,         /* saved at the address the expression computes */
    HT_RULE_VAL_EXPR,     /* value is what the expression computes */
    HT_RULE_CFA_REG       /* for the CFA only: register `reg` + off */
};

typedef struct ht_cfi_rule_s {
    uint8_t how;              /* enum ht_rule_how */
    uint8_t reg;
    uint16_t exprlen;
    int32_t off;
    const uint8_t *expr;
} ht_cfi_rule_t;

typedef struct ht_cfi_row_s {
    ht_cfi_rule_t cfa;        /* HT_RULE_CFA_REG or HT_RULE_VAL_EXPR */
    ht_cfi_rule_t reg[HT_DW_NREGS];
    int signal_frame;         /* the CIE has the 'S' augmentation */
    uintptr_t pc_begin, pc_end; /* the FDE's range */
} ht_cfi_row_t;

enum { HT_CFI_OK = 0, HT_CFI_NONE = -1, HT_CFI_BAD = -2 };

/* Fills *row with the rule row in force at `pc` in module *m. For a return
 * address pass pc - 1 (the call instruction), for an interrupted
 * instruction pc itself. Returns HT_CFI_OK, HT_CFI_NONE when no FDE covers
 * pc (or the module has no .eh_frame_hdr), HT_CFI_BAD on malformed CFI. */
HT_INTERNAL int ht__cfi_row(const ht_module_t *m, uintptr_t pc, ht_cfi_row_t *row);

/* The same from a bare .eh_frame section [eh, eh + size) (no header), as
 * JIT compilers register them: a linear scan of its FDEs. `bias` is 0 for
 * a section read where it was loaded; for a copy, the loaded section's
 * address minus the copy's, so pc-relative pointers decode as they would
 * there. */
HT_INTERNAL int ht__cfi_row_eh(const uint8_t *eh, size_t size, intptr_t bias, uintptr_t pc,
                               ht_cfi_row_t *row);

/* The length of the zero-terminated .eh_frame at eh (terminator included),
 * reading at most `max` bytes; 0 if it is malformed. */
HT_INTERNAL size_t ht__eh_frame_length(const uint8_t *eh, size_t max);
/* Calls fn(ctx, begin, end) for each FDE's pc range in [eh, eh + size)
 * (`bias` as for ht__cfi_row_eh). Returns 0, or -1 if the section is
 * malformed. */
HT_INTERNAL int ht__eh_frame_each(const uint8_t *eh, size_t size, intptr_t bias,
                                  void (*fn)(void *, uintptr_t, uintptr_t), void *ctx);

/* A checked reader of process memory: returns 1 and stores the word at
 * addr, or 0 if addr is not known to be readable. */
typedef int (*ht_read_fn)(void *ctx, uintptr_t addr, uintptr_t *out);

/* A register set with a validity bit per DWARF register. */
typedef struct ht_regs_s {
    uintptr_t r[HT_DW_NREGS];
    uint32_t valid;
} ht_regs_t;

/* Evaluates a DWARF expression (the subset CFI uses; register-location ops
 * are rejected). If push_cfa, the CFA is pushed first, as for
 * DW_CFA_expression. Returns 1 and the result, or 0 on any failure. */
HT_INTERNAL int ht__dw_eval(const uint8_t *expr, size_t len, const ht_regs_t *regs,
                            int push_cfa, uintptr_t cfa, ht_read_fn rd, void *ctx,
                            uintptr_t *out);

/* Applies `row` to the registers of one frame, giving the caller's
 * registers (rsp = CFA, rip = return address). Caller-saved registers lose
 * their validity unless the row restores them. Returns 1, or 0 when the
 * CFA or the return address cannot be computed. *outermost is set when the
 * return address is undefined (the end of the stack). */
HT_INTERNAL int ht__cfi_apply(const ht_cfi_row_t *row, const ht_regs_t *in, ht_regs_t *out,
                              ht_read_fn rd, void *ctx, int *outermost);

#endif
