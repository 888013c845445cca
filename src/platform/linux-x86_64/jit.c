/* jit.c -- code the dynamic loader does not know about: functions a JIT
 * compiler emitted into anonymous memory.
 *
 * Three sources: the registration API (ht_register_code,
 * ht_register_unwind, ht_unregister_code: the Linux analog of Windows'
 * RtlAddFunctionTable), libgcc's __register_frame/__deregister_frame
 * (which LLVM ORC, wasmtime and others call with the .eh_frame they
 * generated; we wrap them and pass the call on), and, for JITs that tell
 * nobody (V8 keeps frame pointers and writes a perf map), the process's
 * executable anonymous mappings, which let a frame-pointer step accept a
 * return address into JIT code.
 *
 * The registry is a sorted array of ranges that readers -- the unwinder,
 * in signal handlers and malloc hooks -- search without a lock. Writers
 * take a spin lock, build a new array, publish it with one store and
 * retire the old one, which is unmapped once no reader is inside any
 * array. Each registration gets a serial number; the unwinder puts it in
 * the high bits of a JIT frame, so two functions that lived at the same
 * address at different times never share a stack.
 *
 * Lookups are async-signal-safe and never allocate. Registration maps
 * memory (mmap) and may be called from any thread, not from a signal
 * handler that interrupted a registration on the same thread. */
#include "heaptrail.h"
#include "cfi.h"
#include "jit.h"
#include "unwind.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>

typedef struct jit_entry_s {
    uintptr_t start, end;
    const uint8_t *eh;          /* registered .eh_frame, or NULL */
    size_t eh_size;
    const char *name;           /* in the name arena, or NULL */
    uint32_t serial;
    uint32_t from_register_frame; /* learned from __register_frame(eh) */
} jit_entry_t;

typedef struct jit_table_s {
    struct jit_table_s *retired_next;
    size_t bytes;               /* of this mapping */
    size_t n;
    jit_entry_t e[];
} jit_table_t;

static jit_table_t *g_table;            /* current; NULL = empty */
static int g_readers;                   /* lookups in flight */
static jit_table_t *g_retired;
static ht_spinlock_t g_lock;
static uint32_t g_serial;               /* last serial handed out */

/* ---- names ------------------------------------------------------------ */

#define ARENA_CHUNK (256u << 10)
static char *g_arena;
static size_t g_arena_used, g_arena_size;

/* A copy of `name` (truncated to 4095 bytes) that lives forever, or NULL.
 * Under g_lock. */
static const char *keep_name(const char *name)
{
    if (!name)
        return NULL;
    size_t len = 0;
    while (len < 4095 && name[len])
        len++;
    if (!g_arena || g_arena_used + len + 1 > g_arena_size) {
        size_t size = len + 1 > ARENA_CHUNK ? len + 1 : ARENA_CHUNK;
        char *a = ht__map(size);
        if (!a)
            return NULL;
        g_arena = a;
        g_arena_size = size;
        g_arena_used = 0;
    }
    char *s = g_arena + g_arena_used;
    __builtin_memcpy(s, name, len);
    s[len] = 0;
    g_arena_used += len + 1;
    return s;
}

/* ---- lookups ------------------------------------------------------------ */

int ht__jit_find(uintptr_t pc, ht_jit_range_t *out)
{
    if (!ht_load_relaxed(&g_table))
        return 0;
    __atomic_fetch_add(&g_readers, 1, __ATOMIC_SEQ_CST);
    const jit_table_t *t = __atomic_load_n(&g_table, __ATOMIC_SEQ_CST);
    int found = 0;
    if (t) {
        size_t l = 0, r = t->n;
        while (l < r) {                 /* first entry with start > pc */
            size_t mid = l + (r - l) / 2;
            if (t->e[mid].start <= pc)
                l = mid + 1;
            else
                r = mid;
        }
        if (l > 0 && pc < t->e[l - 1].end) {
            const jit_entry_t *e = &t->e[l - 1];
            out->start = e->start;
            out->end = e->end;
            out->eh = e->eh;
            out->eh_size = e->eh_size;
            out->name = e->name;
            out->serial = e->serial;
            found = 1;
        }
    }
    __atomic_fetch_sub(&g_readers, 1, __ATOMIC_SEQ_CST);
    return found;
}

/* ---- updates ------------------------------------------------------------ */

/* Publishes `t` (may be NULL) and frees retired tables no reader can see.
 * Under g_lock. A reader counts itself before loading the table pointer,
 * and both are sequentially consistent, so once the count reads zero after
 * the publication no reader holds an older table. */
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

/* Replaces whatever overlapped [start, end) with `add` (if not NULL), or
 * removes what starts at `start` (remove_start). Returns the serial of the
 * added entry, 0 on failure. Under g_lock. */
/* The agent (src/agent) records registered code that frames point into
 * before a registration can disappear; weak, so libheaptrail.so links
 * without it. Called under g_lock; it may call ht__jit_find (lock-free). */
HT_INTERNAL void ht__jit_leaving(void) __attribute__((weak));

static uint32_t update(const jit_entry_t *add, uintptr_t remove_start, int removing)
{
    if (ht__jit_leaving)
        ht__jit_leaving();
    const jit_table_t *cur = g_table;
    size_t n = cur ? cur->n : 0;
    jit_table_t *t = table_new(n + 1);
    if (!t)
        return 0;
    int removed_any = 0;
    uint32_t serial = 0;
    for (size_t i = 0; i < n; i++) {
        const jit_entry_t *e = &cur->e[i];
        int drop = removing ? e->start == remove_start : (e->start < add->end && add->start < e->end);
        if (drop) {
            removed_any = 1;
            continue;
        }
        if (add && !serial && e->start > add->start) {
            t->e[t->n] = *add;
            serial = t->e[t->n++].serial = (g_serial = g_serial % HT_JIT_SERIAL_MAX + 1);
        }
        t->e[t->n++] = *e;
    }
    if (add && !serial) {
        t->e[t->n] = *add;
        serial = t->e[t->n++].serial = (g_serial = g_serial % HT_JIT_SERIAL_MAX + 1);
    }
    if (removing && !removed_any) {
        ht__unmap(t, t->bytes);
        return 0;
    }
    publish(t->n ? t : NULL);
    if (!t->n)
        ht__unmap(t, t->bytes);
    /* code went away (or was replaced): rules cached for it are stale */
    if (removed_any)
        ht__code_changed();
    return removing ? 1 : serial;
}

static uint32_t register_range(uintptr_t start, size_t size, const char *name, const void *eh,
                               size_t eh_size, int from_register_frame)
{
    if (!start || !size || start + size < start)
        return 0;
    jit_entry_t e = { start, start + size, eh, eh_size, NULL, 0, (uint32_t)from_register_frame };
    ht__spin_lock(&g_lock);
    e.name = keep_name(name);
    uint32_t serial = update(&e, 0, 0);
    ht__spin_unlock(&g_lock);
    return serial;
}

uint32_t ht_register_code(const void *start, size_t size, const char *name)
{
    return register_range((uintptr_t)start, size, name, NULL, 0, 0);
}

uint32_t ht_register_unwind(const void *start, size_t size, const void *eh_frame, size_t eh_frame_size)
{
    uintptr_t s = (uintptr_t)start;
    if (!eh_frame || !eh_frame_size || !s || !size || s + size < s)
        return 0;
    /* the same range, registered by name without unwind info: attach */
    ht__spin_lock(&g_lock);
    const jit_table_t *cur = g_table;
    for (size_t i = 0; cur && i < cur->n; i++) {
        const jit_entry_t *e = &cur->e[i];
        if (e->start == s && e->end == s + size && !e->eh) {
            jit_entry_t keep = *e;
            keep.eh = eh_frame;
            keep.eh_size = eh_frame_size;
            jit_table_t *t = table_new(cur->n);
            if (!t)
                break;
            __builtin_memcpy(t->e, cur->e, cur->n * sizeof(jit_entry_t));
            t->n = cur->n;
            t->e[i] = keep;
            publish(t);
            ht__code_changed();         /* its frame-pointer rules are stale */
            ht__spin_unlock(&g_lock);
            return keep.serial;
        }
    }
    ht__spin_unlock(&g_lock);
    return register_range(s, size, NULL, eh_frame, eh_frame_size, 0);
}

int ht_unregister_code(const void *start)
{
    ht__spin_lock(&g_lock);
    int r = update(NULL, (uintptr_t)start, 1) != 0;
    ht__spin_unlock(&g_lock);
    return r ? 0 : -1;
}

/* ---- __register_frame / __deregister_frame ------------------------------
 * libgcc's registration takes the start of a zero-terminated .eh_frame
 * (LLVM ORC and wasmtime call it with the section they generated). Each
 * FDE in it becomes a range whose unwind info is that section; we pass the
 * call on to libgcc so its own unwinder (C++ exceptions) keeps working.
 * The section belongs to the JIT; like libgcc we read it only while it is
 * registered. Not for signal handlers (neither is libgcc's). */

struct add_ctx { const uint8_t *eh; size_t size; int added; };

static void add_fde(void *p, uintptr_t begin, uintptr_t end)
{
    struct add_ctx *c = p;
    jit_entry_t e = { begin, end, c->eh, c->size, NULL, 0, 1 };
    if (update(&e, 0, 0))
        c->added++;
}

HT_API void __register_frame(void *begin)
{
    static void (*real)(void *);
    if (!real)
        real = (void (*)(void *))dlsym(RTLD_NEXT, "__register_frame");
    const uint8_t *eh = begin;
    size_t size = eh ? ht__eh_frame_length(eh, 64u << 20) : 0;
    if (size) {
        struct add_ctx c = { eh, size, 0 };
        ht__spin_lock(&g_lock);
        (void)ht__eh_frame_each(eh, size, add_fde, &c);
        ht__spin_unlock(&g_lock);
    }
    if (real)
        real(begin);
}

/* Removes every range registered from the section at `eh`. Under g_lock. */
static void remove_section(const uint8_t *eh)
{
    const jit_table_t *cur = g_table;
    if (!cur)
        return;
    jit_table_t *t = table_new(cur->n);
    if (!t)
        return;
    for (size_t i = 0; i < cur->n; i++)
        if (!(cur->e[i].from_register_frame && cur->e[i].eh == eh))
            t->e[t->n++] = cur->e[i];
    if (t->n == cur->n) {
        ht__unmap(t, t->bytes);
        return;
    }
    publish(t->n ? t : NULL);
    if (!t->n)
        ht__unmap(t, t->bytes);
    ht__code_changed();
}

HT_API void __deregister_frame(void *begin)
{
    static void (*real)(void *);
    if (!real)
        real = (void (*)(void *))dlsym(RTLD_NEXT, "__deregister_frame");
    ht__spin_lock(&g_lock);
    remove_section(begin);
    ht__spin_unlock(&g_lock);
    if (real)
        real(begin);
}

/* ---- executable anonymous memory ----------------------------------------
 * A JIT that registers nothing (V8 with --perf-basic-prof keeps frame
 * pointers and writes /tmp/perf-PID.map) still runs its code from
 * executable mappings. A frame-pointer step may accept a return address
 * there. The ranges come from /proc/self/maps (raw syscalls), re-read at
 * most every 50 ms when an address is not in the cached set, so a corrupt
 * stack full of garbage cannot make every step pay for the read. */

#define EXEC_MAX 64
static struct { uintptr_t lo, hi; } g_exec[EXEC_MAX];
static int g_nexec;
static uint64_t g_exec_read_ns;
static ht_spinlock_t g_exec_lock;

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Re-reads the executable mappings that are not files (anonymous or
 * [vdso]-like); under g_exec_lock. */
static void read_exec_maps(void)
{
    int fd = (int)ht__sys3(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    char buf[512];
    uintptr_t a = 0, b = 0;
    int field = 0, x = 0, n = 0, col = 0;
    for (;;) {
        long got = ht__sys3(SYS_read, fd, buf, sizeof buf);
        if (got <= 0)
            break;
        for (long i = 0; i < got; i++) {
            char c = buf[i];
            if (c == '\n') {
                /* field 5 reached: the path column; anonymous if nothing there */
                if (x && field >= 5 && col == 0 && n < EXEC_MAX) {
                    g_exec[n].lo = a;
                    g_exec[n].hi = b;
                    n++;
                }
                a = b = 0;
                field = x = col = 0;
                continue;
            }
            if (field == 0) {
                if (c == '-') field = 1;
                else if (hexval(c) >= 0) a = a * 16 + (uintptr_t)hexval(c);
            } else if (field == 1) {
                if (c == ' ') field = 2;
                else if (hexval(c) >= 0) b = b * 16 + (uintptr_t)hexval(c);
            } else if (field == 2) {
                if (c == ' ') field = 3;
                else if (c == 'x') x = 1;
            } else if (c == ' ') {
                if (field < 5) field++;
            } else if (field >= 5 && c != ' ') {
                col = 1;                /* a path: the loader's business */
            }
        }
    }
    ht__sys1(SYS_close, fd);
    ht_store_release(&g_nexec, n);
}

static int in_exec(uintptr_t pc)
{
    int n = ht_load_acquire(&g_nexec);
    for (int i = 0; i < n; i++)
        if (pc >= g_exec[i].lo && pc < g_exec[i].hi)
            return 1;
    return 0;
}

int ht__jit_is_code(uintptr_t pc)
{
    ht_jit_range_t r;
    if (ht__jit_find(pc, &r))
        return 1;
    if (in_exec(pc))
        return 1;
    struct timespec ts;
    if (ht__sys2(SYS_clock_gettime, CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now - ht_load_relaxed(&g_exec_read_ns) < 50000000u || !ht__spin_trylock(&g_exec_lock))
        return 0;
    ht_store_relaxed(&g_exec_read_ns, now);
    read_exec_maps();
    ht__spin_unlock(&g_exec_lock);
    return in_exec(pc);
}
