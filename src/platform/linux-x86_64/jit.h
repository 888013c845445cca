/* jit.h -- the JIT code registry as the unwinder sees it (jit.c). */
#ifndef HT_LINUX_X86_64_JIT_H
#define HT_LINUX_X86_64_JIT_H

#include "../../core/util.h"

#define HT_JIT_SERIAL_MAX 0x7fffu   /* serials 1..32767, then wrap */

typedef struct ht_jit_range_s {
    uintptr_t start, end;
    const uint8_t *eh;          /* its .eh_frame, or NULL: frame pointers */
    size_t eh_size;
    const char *name;
    uint32_t serial;
} ht_jit_range_t;

/* The registered range holding pc. Async-signal-safe, lock-free. */
HT_INTERNAL int ht__jit_find(uintptr_t pc, ht_jit_range_t *out);
/* Whether pc is in registered JIT code or in an executable anonymous
 * mapping (the latter re-read from /proc/self/maps at most every 50 ms).
 * Async-signal-safe. */
HT_INTERNAL int ht__jit_is_code(uintptr_t pc);

#endif
