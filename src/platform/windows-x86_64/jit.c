/* jit.c -- heaptrail's JIT code registry on Windows (ht_register_code,
 * ht_unregister_code; see heaptrail.h): names and serial numbers for
 * ranges of JIT code.
 *
 * On Windows the unwinder learns how to walk JIT frames from the system's
 * own registrations (RtlAddFunctionTable and friends, which
 * RtlLookupFunctionEntry consults), so this registry carries no unwind
 * data: it gives a frame in registered code its registration's serial in
 * bits 48..62, as on Linux, so that two functions that lived at one address
 * at different times never share a stack; and it tells the walk that code
 * without a function entry is known JIT code. ht_register_unwind() takes
 * DWARF unwind info, which Windows code does not use: it returns 0.
 *
 * The registry is a sorted array that readers (the unwinder, inside heap
 * hooks and exception handlers) search without a lock; writers take a spin
 * lock, build a new array, publish it with one store and retire the old
 * one, unmapped once no reader is inside any array. Lookups never allocate;
 * registration maps memory with VirtualAlloc. */
#include "heaptrail.h"
#include "unwind.h"

#define SERIAL_MAX 0x7fffu          /* serials 1..32767, then wrap */

typedef struct jit_entry_s {
    uintptr_t start, end;
    const char *name;           /* in the name arena, or NULL */
    uint32_t serial;
} jit_entry_t;

typedef struct jit_table_s {
    struct jit_table_s *retired_next;
    size_t bytes;
    size_t n;
    jit_entry_t e[];
} jit_table_t;

static jit_table_t *g_table;    /* current; NULL = empty */
static int g_readers;           /* lookups in flight */
static jit_table_t *g_retired;
static ht_spinlock_t g_lock;
static uint32_t g_serial;

/* ---- names -------------------------------------------------------------- */

#define ARENA_CHUNK (256u << 10)
static char *g_arena;
static size_t g_arena_used, g_arena_size;

/* A copy of `name` (at most 4095 bytes) that lives forever, or NULL. Under
 * g_lock. */
static const char *keep_name(const char *name)
{
    if (!name)
        return NULL;
    size_t len = 0;
    while (len < 4095 && name[len])
        len++;
    if (!g_arena || g_arena_used + len + 1 > g_arena_size) {
        char *a = ht__map(ARENA_CHUNK);
        if (!a)
            return NULL;
        g_arena = a;
        g_arena_size = ARENA_CHUNK;
        g_arena_used = 0;
    }
    char *s = g_arena + g_arena_used;
    __builtin_memcpy(s, name, len);
    s[len] = 0;
    g_arena_used += len + 1;
    return s;
}

/* ---- lookups ------------------------------------------------------------- */

uint32_t ht__jit_serial(uintptr_t pc)
{
    if (!ht_load_relaxed(&g_table))
        return 0;
    __atomic_fetch_add(&g_readers, 1, __ATOMIC_SEQ_CST);
    const jit_table_t *t = __atomic_load_n(&g_table, __ATOMIC_SEQ_CST);
    uint32_t serial = 0;
    if (t) {
        size_t l = 0, r = t->n;
        while (l < r) {                 /* first entry with start > pc */
            size_t mid = l + (r - l) / 2;
            if (t->e[mid].start <= pc)
                l = mid + 1;
            else
                r = mid;
        }
        if (l > 0 && pc < t->e[l - 1].end)
            serial = t->e[l - 1].serial;
    }
    __atomic_fetch_sub(&g_readers, 1, __ATOMIC_SEQ_CST);
    return serial;
}

/* ---- updates -------------------------------------------------------------- */

/* Publishes `t` (may be NULL) and frees the retired tables no reader can
 * see: a reader counts itself before loading the table pointer, both
 * sequentially consistent, so once the count reads zero after the
 * publication no reader holds an older table. Under g_lock. */
static void publish(jit_table_t *t)
{
    jit_table_t *old = g_table;
    __atomic_store_n(&g_table, t, __ATOMIC_SEQ_CST);
    if (old) {
        old->retired_next = g_retired;
        g_retired = old;
    }
    if (__atomic_load_n(&g_readers, __ATOMIC_SEQ_CST) == 0) {
        while (g_retired) {
            jit_table_t *r = g_retired;
            g_retired = r->retired_next;
            ht__unmap(r, r->bytes);
        }
    }
}

static jit_table_t *table_new(size_t n)
{
    size_t bytes = sizeof(jit_table_t) + (n ? n : 1) * sizeof(jit_entry_t);
    bytes = (bytes + 4095) & ~(size_t)4095;
    jit_table_t *t = ht__map(bytes);
    if (t) {
        t->bytes = bytes;
        t->n = 0;
        t->retired_next = NULL;
    }
    return t;
}

/* Adds `add` in place of whatever overlapped it, or (add == NULL) removes
 * the entry starting at `remove_start`. Returns the new serial, 1 for a
 * removal, 0 on failure. Under g_lock. */
static uint32_t update(const jit_entry_t *add, uintptr_t remove_start)
{
    const jit_table_t *cur = g_table;
    size_t n = cur ? cur->n : 0;
    jit_table_t *t = table_new(n + 1);
    if (!t)
        return 0;
    int removed = 0;
    uint32_t serial = 0;
    for (size_t i = 0; i < n; i++) {
        const jit_entry_t *e = &cur->e[i];
        int drop = add ? e->start < add->end && add->start < e->end : e->start == remove_start;
        if (drop) {
            removed = 1;
            continue;
        }
        if (add && !serial && e->start > add->start) {
            t->e[t->n] = *add;
            serial = t->e[t->n++].serial = (g_serial = g_serial % SERIAL_MAX + 1);
        }
        t->e[t->n++] = *e;
    }
    if (add && !serial) {
        t->e[t->n] = *add;
        serial = t->e[t->n++].serial = (g_serial = g_serial % SERIAL_MAX + 1);
    }
    if (!add && !removed) {
        ht__unmap(t, t->bytes);
        return 0;
    }
    publish(t->n ? t : NULL);
    if (!t->n)
        ht__unmap(t, t->bytes);
    return add ? serial : 1;
}

uint32_t ht_register_code(const void *start, size_t size, const char *name)
{
    uintptr_t s = (uintptr_t)start;
    if (!s || !size || s + size < s || ((s + size) >> 48))
        return 0;
    jit_entry_t e = { s, s + size, NULL, 0 };
    ht__spin_lock(&g_lock);
    e.name = keep_name(name);
    uint32_t serial = update(&e, 0);
    ht__spin_unlock(&g_lock);
    return serial;
}

uint32_t ht_register_unwind(const void *start, size_t size, const void *eh_frame,
                            size_t eh_frame_size)
{
    /* Windows code is described by UNWIND_INFO registered with
     * RtlAddFunctionTable, RtlAddGrowableFunctionTable or
     * RtlInstallFunctionTableCallback, not by DWARF */
    (void)start;
    (void)size;
    (void)eh_frame;
    (void)eh_frame_size;
    return 0;
}

int ht_unregister_code(const void *start)
{
    ht__spin_lock(&g_lock);
    int r = update(NULL, (uintptr_t)start) != 0;
    ht__spin_unlock(&g_lock);
    return r ? 0 : -1;
}
