/* jit.h -- the JIT code registry as the unwinder sees it (jit.c). */
#ifndef HT_LINUX_X86_64_JIT_H
#define HT_LINUX_X86_64_JIT_H

#include "../../core/util.h"

#define HT_JIT_SERIAL_MAX 0x7fffu   /* serials 1..32767, then wrap */

typedef struct ht_jit_range_s {
    uintptr_t start, end;
    const uint8_t *eh;          /* its .eh_frame, or NULL: frame pointers */
    size_t eh_size;
    intptr_t eh_bias;           /* for ht__cfi_row_eh: 0, or a copy's distance */
    const char *name;
    uint32_t serial;
} ht_jit_range_t;

/* The registered range holding pc. Async-signal-safe, lock-free. */
HT_INTERNAL int ht__jit_find(uintptr_t pc, ht_jit_range_t *out);
/* Registers many JIT ranges with one table rebuild (perf maps, jitdump,
 * the GDB JIT interface): each replaces registrations it overlaps; within
 * the batch the later of two overlapping entries wins. Names are copied;
 * an .eh_frame is not (it must stay readable while registered). A range
 * without one keeps the CFI of a __register_frame registration holding
 * it (see jit.c). If `serials` is not NULL, serials[i] receives the serial
 * of adds[i], 0 if it was not registered. Returns how many were
 * registered. Not from a signal handler. */
typedef struct ht_jit_add_s {
    uintptr_t start;
    size_t size;
    const char *name;
    const uint8_t *eh;          /* its .eh_frame, or NULL */
    size_t eh_size;
    intptr_t eh_bias;           /* see ht__cfi_row_eh (cfi.h) */
} ht_jit_add_t;
HT_INTERNAL size_t ht__jit_add_many(const ht_jit_add_t *adds, size_t n, uint32_t *serials);
/* Removes, with one table rebuild, each registration that starts at
 * regs[i].start and still has serial regs[i].serial (one a later
 * registration replaced is left alone). Returns how many were removed.
 * Not from a signal handler. */
typedef struct ht_jit_reg_s {
    uintptr_t start;
    uint32_t serial;
} ht_jit_reg_t;
HT_INTERNAL size_t ht__jit_remove_many(const ht_jit_reg_t *regs, size_t n);

/* Whether pc is in an executable mapping the dynamic loader does not know
 * (re-read from /proc/self/maps at most every 2 ms; the registry is asked
 * separately, ht__jit_find). Async-signal-safe. */
HT_INTERNAL int ht__jit_in_exec(uintptr_t pc);
/* Whether pc is in a private file mapping of an ELF object that the loader
 * does not know (not yet: dlopen relocating it, running its IFUNC
 * resolvers; or not any more): compiled code whose frames only its own
 * CFI can step out of, which no loader lookup finds. A mapping newer than
 * the table is looked up in /proc/self/maps itself (none under a seccomp
 * filter: then 0). Async-signal-safe. */
HT_INTERNAL int ht__jit_unloaded_elf(uintptr_t pc);
/* Changes (acquire) after every change of the registry, never 0: a
 * ht__jit_find answer obtained after reading version V stays true while
 * the version is still V (the unwinder's per-thread lookup cache). */
HT_INTERNAL uint64_t ht__jit_version(void);
/* Whether pc is in an alias: a file-backed copy of a loaded module's code
 * mapped at another address (V8's remapped builtins). Sets the alias range
 * [*lo, *hi) and *orig, the address pc copies. Async-signal-safe. */
HT_INTERNAL int ht__jit_alias(uintptr_t pc, uintptr_t *lo, uintptr_t *hi, uintptr_t *orig);

/* fork: the agent's prepare handler takes the registry's writer lock
 * (after the GDB JIT poll lock: a poll registers under it), so a child
 * never inherits it held by a thread it does not have; parent and child
 * drop it. */
HT_INTERNAL void ht__jit_fork_prepare(void);
HT_INTERNAL void ht__jit_fork_release(void);

#endif
