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
#include <sys/uio.h>
#include <time.h>

typedef struct jit_entry_s {
    uintptr_t start, end;
    const uint8_t *eh;          /* registered .eh_frame, or NULL */
    size_t eh_size;
    intptr_t eh_bias;           /* see ht__cfi_row_eh */
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
static uint64_t g_version = 1;          /* bumped after each publication */
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
            out->eh_bias = e->eh_bias;
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
    __atomic_add_fetch(&g_version, 1, __ATOMIC_RELEASE);
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
    jit_entry_t e = { start, start + size, eh, eh_size, 0, NULL, 0, (uint32_t)from_register_frame };
    ht__spin_lock(&g_lock);
    e.name = keep_name(name);
    uint32_t serial = update(&e, 0, 0);
    ht__spin_unlock(&g_lock);
    return serial;
}

/* ---- many at once ------------------------------------------------------
 * A perf map or jitdump file announces code by the thousand; one table
 * rebuild for a batch keeps that linear. Later entries of the batch win
 * over earlier ones they overlap, like separate registrations would.
 *
 * A name for code whose only unwind information came from
 * __register_frame (wasmtime writes a perf map and registers its
 * .eh_frame; LLVM ORC registers frames and announces names) keeps that
 * CFI: the name replaces the registration, and without the CFI a frame in
 * code that keeps no frame pointer would end the walk. The CFI is kept
 * when one registration with CFI holds the whole named range, and it came
 * from __register_frame (whose __deregister_frame removes by section, so
 * the named range goes with it) or starts where the name does (so
 * ht_unregister_code of that start still removes it). */

typedef struct { jit_entry_t e; size_t order; } add_t;

/* The entry of `t` (may be NULL) that holds pc, or NULL. Under g_lock. */
static const jit_entry_t *entry_at(const jit_table_t *t, uintptr_t pc)
{
    if (!t)
        return NULL;
    size_t l = 0, r = t->n;
    while (l < r) {
        size_t mid = l + (r - l) / 2;
        if (t->e[mid].start <= pc)
            l = mid + 1;
        else
            r = mid;
    }
    return l > 0 && pc < t->e[l - 1].end ? &t->e[l - 1] : NULL;
}

static void sort_adds(add_t *a, size_t n)
{
    /* shell sort by start, then arrival order: no allocation, fine here */
    for (size_t gap = n / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < n; i++) {
            add_t t = a[i];
            size_t j = i;
            while (j >= gap && (a[j - gap].e.start > t.e.start ||
                                (a[j - gap].e.start == t.e.start && a[j - gap].order > t.order))) {
                a[j] = a[j - gap];
                j -= gap;
            }
            a[j] = t;
        }
}

size_t ht__jit_add_many(const ht_jit_add_t *adds, size_t n, uint32_t *serials)
{
    if (serials)
        __builtin_memset(serials, 0, n * sizeof *serials);
    if (!n)
        return 0;
    size_t bytes = (n * sizeof(add_t) + 4095) & ~(size_t)4095;
    add_t *a = ht__map(bytes);
    if (!a)
        return 0;
    size_t m = 0;
    ht__spin_lock(&g_lock);
    for (size_t i = 0; i < n; i++) {
        if (!adds[i].start || !adds[i].size || adds[i].start + adds[i].size < adds[i].start)
            continue;
        a[m].e = (jit_entry_t){ adds[i].start, adds[i].start + adds[i].size, adds[i].eh,
                                adds[i].eh ? adds[i].eh_size : 0, adds[i].eh ? adds[i].eh_bias : 0,
                                keep_name(adds[i].name), 0, 0 };
        const jit_entry_t *old = a[m].e.eh ? NULL : entry_at(g_table, adds[i].start);
        if (old && old->eh && a[m].e.end <= old->end &&
            (old->from_register_frame || old->start == a[m].e.start)) {
            a[m].e.eh = old->eh;
            a[m].e.eh_size = old->eh_size;
            a[m].e.eh_bias = old->eh_bias;
            a[m].e.from_register_frame = old->from_register_frame;
        }
        a[m].order = i;
        m++;
    }
    sort_adds(a, m);
    /* among the batch, the later of two overlapping ranges wins */
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && a[k - 1].e.end > a[i].e.start) {
            if (a[i].order > a[k - 1].order)
                a[k - 1] = a[i];
            continue;
        }
        a[k++] = a[i];
    }
    if (ht__jit_leaving)
        ht__jit_leaving();
    const jit_table_t *cur = g_table;
    size_t old = cur ? cur->n : 0;
    jit_table_t *t = table_new(old + k);
    int removed_any = 0;
    if (t) {
        size_t x = 0;       /* next add to place */
        for (size_t i = 0; i < old; i++) {
            const jit_entry_t *e = &cur->e[i];
            while (x < k && a[x].e.start <= e->start) {
                a[x].e.serial = g_serial = g_serial % HT_JIT_SERIAL_MAX + 1;
                if (serials)
                    serials[a[x].order] = a[x].e.serial;
                t->e[t->n++] = a[x++].e;
            }
            /* dropped if an add overlaps it: the adds around its start */
            int drop = (x > 0 && a[x - 1].e.end > e->start) || (x < k && a[x].e.start < e->end);
            if (drop) {
                removed_any = 1;
                continue;
            }
            t->e[t->n++] = *e;
        }
        while (x < k) {
            a[x].e.serial = g_serial = g_serial % HT_JIT_SERIAL_MAX + 1;
            if (serials)
                serials[a[x].order] = a[x].e.serial;
            t->e[t->n++] = a[x++].e;
        }
        publish(t);
        if (removed_any)
            ht__code_changed();
    }
    ht__spin_unlock(&g_lock);
    ht__unmap(a, bytes);
    return t ? k : 0;
}

static void sort_regs(ht_jit_reg_t *r, size_t n)
{
    for (size_t gap = n / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < n; i++) {
            ht_jit_reg_t t = r[i];
            size_t j = i;
            while (j >= gap && r[j - gap].start > t.start) {
                r[j] = r[j - gap];
                j -= gap;
            }
            r[j] = t;
        }
}

size_t ht__jit_remove_many(const ht_jit_reg_t *regs, size_t n)
{
    if (!n)
        return 0;
    size_t bytes = (n * sizeof *regs + 4095) & ~(size_t)4095;
    ht_jit_reg_t *r = ht__map(bytes);
    if (!r)
        return 0;
    __builtin_memcpy(r, regs, n * sizeof *regs);
    sort_regs(r, n);
    size_t removed = 0;
    ht__spin_lock(&g_lock);
    const jit_table_t *cur = g_table;
    jit_table_t *t = cur ? table_new(cur->n) : NULL;
    if (t) {
        if (ht__jit_leaving)
            ht__jit_leaving();
        size_t x = 0;       /* both sorted by start: one merge */
        for (size_t i = 0; i < cur->n; i++) {
            const jit_entry_t *e = &cur->e[i];
            while (x < n && r[x].start < e->start)
                x++;
            int drop = 0;
            for (size_t y = x; y < n && r[y].start == e->start && !drop; y++)
                drop = r[y].serial == e->serial;
            if (drop)
                removed++;
            else
                t->e[t->n++] = *e;
        }
        if (removed) {
            publish(t->n ? t : NULL);
            if (!t->n)
                ht__unmap(t, t->bytes);
            ht__code_changed();
        } else {
            ht__unmap(t, t->bytes);
        }
    }
    ht__spin_unlock(&g_lock);
    ht__unmap(r, bytes);
    return removed;
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
            keep.eh_bias = 0;
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
    jit_entry_t e = { begin, end, c->eh, c->size, 0, NULL, 0, 1 };
    if (update(&e, 0, 0))
        c->added++;
}

void ht__jit_fork_prepare(void) { ht__spin_lock(&g_lock); }
void ht__jit_fork_release(void) { ht__spin_unlock(&g_lock); }

HT_API void __register_frame(void *begin)
{
    static void (*real)(void *);
    if (!real)
        real = (void (*)(void *))ht__next_def("__register_frame");
    const uint8_t *eh = begin;
    size_t size = eh ? ht__eh_frame_length(eh, 64u << 20) : 0;
    if (size) {
        struct add_ctx c = { eh, size, 0 };
        ht__spin_lock(&g_lock);
        (void)ht__eh_frame_each(eh, size, 0, add_fde, &c);
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
        real = (void (*)(void *))ht__next_def("__deregister_frame");
    ht__spin_lock(&g_lock);
    remove_section(begin);
    ht__spin_unlock(&g_lock);
    if (real)
        real(begin);
}

/* ---- executable memory the loader does not know -----------------------
 * A JIT that registers nothing (V8 with --perf-basic-prof keeps frame
 * pointers and writes /tmp/perf-PID.map) still runs its code from
 * executable mappings, and a frame-pointer step may accept a return
 * address there. Two kinds:
 *   - anonymous (or a file nobody loaded: a memfd double mapping, for a
 *     JIT that keeps W^X): plain foreign code;
 *   - an alias: a file-backed copy of a loaded module's code at another
 *     address. V8 remaps its embedded builtins next to the JIT code
 *     (short builtin calls), so node's InterpreterEntryTrampoline, CEntry
 *     and friends run at an address no loader lookup knows. An alias
 *     records its distance from the original, so its frames can be named
 *     as the module's code.
 * A third kind is not foreign code at all: a private file mapping of an
 * ELF object the loader does not know (yet, or any more). glibc adds a
 * dlopened object to _dl_find_object's data only after relocating it
 * (dl_open_worker_begin calls _dl_find_object_update after the demarcation
 * point), so the IFUNC resolvers that relocation runs execute in such a
 * mapping. Its code is compiled code, usually without frame pointers, so
 * a frame-pointer step there is a guess: from a resolver that keeps no
 * frame it took _dl_relocate_object's rbp and skipped that frame (the
 * agree agent's sampling, in java loading libm). Such a range is marked
 * `elf`, and the unwinder stops there (ht__jit_unloaded_elf).
 * The ranges come from /proc/self/maps (raw syscalls), re-read at most
 * every 2 ms when an address is in none of them: often enough to see a
 * page of fresh code turn executable (V8 flips code pages between writable
 * and executable), rarely enough that a corrupt stack full of garbage
 * cannot make every step pay for the read (and never under a seccomp
 * filter that could kill for the calls: ht__sandboxed). Two tables
 * alternate so a reader is never inside the one being rewritten unless it
 * stalled for a whole re-read; a torn entry costs a wrong yes or no, never a fault. */

#define EXEC_MAX 256
typedef struct exec_range_s {
    uintptr_t lo, hi;
    uintptr_t delta;            /* alias: address - the original's; else 0 */
    uint64_t off, inode;        /* of a file-backed range, while reading */
    uintptr_t hdr;              /* while reading: where the same private file
                                   mapping holds offset 0, or 0 */
    int alias;
    int elf;                    /* a private mapping of an ELF object the
                                   loader does not know: not foreign code */
} exec_range_t;
static exec_range_t g_exec_buf[2][EXEC_MAX];
static exec_range_t *g_exec = g_exec_buf[0];
static int g_nexec;
static uint64_t g_exec_read_ns;
static ht_spinlock_t g_exec_lock;

struct exec_read {
    exec_range_t *t;
    int n, pending;
    uintptr_t hdr_lo;           /* the last private file mapping of offset 0 */
    uint64_t hdr_inode;         /* and its inode (0: none) */
};

/* Notes a private file mapping of offset 0: where an object mapped as the
 * loader maps it has its ELF header. The loader maps an object's span with
 * its first segment (offset 0) and the others over it, so that mapping
 * comes first in address order. */
static void note_hdr(struct exec_read *r, const ht_maps_line_t *l)
{
    if (l->path && l->inode && l->off == 0 && l->read && !l->shared) {
        r->hdr_lo = l->lo;
        r->hdr_inode = l->inode;
    }
}

/* The offset-0 mapping of the file of executable line l, if l is private
 * and of the same file as the last one noted; else 0. */
static uintptr_t hdr_of(const struct exec_read *r, const ht_maps_line_t *l)
{
    return l->path && l->inode && !l->shared && r->hdr_inode == l->inode ? r->hdr_lo : 0;
}

/* Whether an ELF header is at `hdr`, read without trusting that it is
 * still mapped (process_vm_readv on ourselves returns an error for an
 * address that is not). */
static int elf_magic_at(uintptr_t hdr)
{
    unsigned char b[4];
    struct iovec local = { b, sizeof b }, remote = { (void *)hdr, sizeof b };
    long pid = ht__sys0(SYS_getpid);
    return hdr && ht__syscall6(SYS_process_vm_readv, pid, (long)&local, 1, (long)&remote, 1, 0) == 4 &&
           b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

static int loader_knows(uintptr_t a)
{
    struct dl_find_object fo;
    return _dl_find_object((void *)a, &fo) == 0;
}

/* First pass: the executable ranges the loader does not know. */
static int collect_exec(const ht_maps_line_t *l, void *ctx)
{
    struct exec_read *r = ctx;
    note_hdr(r, l);
    if (!l->exec || (l->path && loader_knows(l->lo)))
        return 0;
    if (r->n > 0 && r->t[r->n - 1].hi == l->lo && !l->path && !r->t[r->n - 1].inode) {
        r->t[r->n - 1].hi = l->hi;              /* anonymous neighbours: one range */
        return 0;
    }
    if (r->n == EXEC_MAX)
        return 0;
    exec_range_t *x = &r->t[r->n++];
    x->lo = l->lo;
    x->hi = l->hi;
    x->delta = 0;
    x->alias = 0;
    x->elf = 0;
    x->hdr = hdr_of(r, l);
    x->off = l->off;
    x->inode = l->path ? l->inode : 0;
    if (x->inode)
        r->pending++;
    return 0;
}

/* Second pass: for each file-backed one, a mapping of the same file at
 * the same offset that the loader knows makes it an alias. */
static int find_originals(const ht_maps_line_t *l, void *ctx)
{
    struct exec_read *r = ctx;
    if (!l->path || !l->inode)
        return 0;
    for (int i = 0; i < r->n; i++) {
        exec_range_t *x = &r->t[i];
        if (x->alias || x->inode != l->inode || x->lo == l->lo ||
            x->off < l->off || x->off - l->off >= l->hi - l->lo)
            continue;
        uintptr_t orig = l->lo + (uintptr_t)(x->off - l->off);
        if (!loader_knows(orig))
            continue;
        x->delta = x->lo - orig;
        x->alias = 1;
    }
    return 0;
}

/* Re-reads the table; under g_exec_lock. */
static void read_exec_maps(void)
{
    struct exec_read r = { g_exec == g_exec_buf[0] ? g_exec_buf[1] : g_exec_buf[0], 0, 0, 0, 0 };
    if (ht__maps_each(collect_exec, &r) < 0)
        return;
    if (r.pending)
        ht__maps_each(find_originals, &r);
    for (int i = 0; i < r.n; i++)
        r.t[i].elf = !r.t[i].alias && elf_magic_at(r.t[i].hdr);
    ht_store_release(&g_nexec, 0);
    ht_store_release(&g_exec, r.t);
    ht_store_release(&g_nexec, r.n);
}

static const exec_range_t *in_exec(uintptr_t pc)
{
    int n = ht_load_acquire(&g_nexec);
    const exec_range_t *t = ht_load_acquire(&g_exec);
    for (int i = 0; i < n && i < EXEC_MAX; i++)
        if (pc >= t[i].lo && pc < t[i].hi)
            return &t[i];
    return NULL;
}

/* in_exec, re-reading the mappings first if pc is in none and the last
 * read is more than 2 ms old. */
static const exec_range_t *in_exec_fresh(uintptr_t pc)
{
    const exec_range_t *x = in_exec(pc);
    /* under a seccomp filter that could refuse the agent's system calls,
     * the table stays as it was */
    if (x || ht_load_relaxed(&ht__sandboxed))
        return x;
    struct timespec ts;
    if (ht__sys2(SYS_clock_gettime, CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return NULL;
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now - ht_load_relaxed(&g_exec_read_ns) < 2000000u || !ht__spin_trylock(&g_exec_lock))
        return NULL;
    ht_store_relaxed(&g_exec_read_ns, now);
    read_exec_maps();
    ht__spin_unlock(&g_exec_lock);
    return in_exec(pc);
}

int ht__jit_in_exec(uintptr_t pc) { return in_exec_fresh(pc) != NULL; }

/* The line of /proc/self/maps holding one address (a mapping newer than
 * the table), with the offset-0 mapping noted on the way. */
struct exec_line { struct exec_read r; uintptr_t pc, lo, hi; int elf; };

static int find_exec_line(const ht_maps_line_t *l, void *ctx)
{
    struct exec_line *f = ctx;
    note_hdr(&f->r, l);
    if (f->pc < l->lo || f->pc >= l->hi)
        return 0;
    f->lo = l->lo;
    f->hi = l->hi;
    f->elf = l->exec && !loader_knows(l->lo) && elf_magic_at(hdr_of(&f->r, l));
    return 1;
}

/* The thread's last such line, for 2 ms as the table, and at most one
 * read of the maps a thread in 2 ms whatever the pc: frames in code newer
 * than the table (V8's fresh code pages, walked by frame pointers), or
 * walks that end at a pc in no mapping at all (a corrupt stack), would
 * each read them. Within the 2 ms a pc outside the line is answered 0,
 * as before this check (not known to be an object's). `ns` is written
 * last, and cleared first, so a signal handler's walk on the thread sees
 * the old line or none. */
static HT_TLS struct { uintptr_t lo, hi; uint64_t ns; int elf; } t_line;

int ht__jit_unloaded_elf(uintptr_t pc)
{
    const exec_range_t *x = in_exec_fresh(pc);
    if (x) {
        exec_range_t c = *x;    /* one copy: the table may be rewritten */
        return c.elf && pc >= c.lo && pc < c.hi;
    }
    /* not in the table: a mapping made since it was read (the table is
     * re-read at most every 2 ms, and dlopen maps an object moments before
     * relocating it), or no executable mapping at all. Under a seccomp
     * filter nothing is read: not known to be an object's. */
    if (ht_load_relaxed(&ht__sandboxed))
        return 0;
    struct timespec ts;
    if (ht__sys2(SYS_clock_gettime, CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now - t_line.ns < 2000000u)
        return pc >= t_line.lo && pc < t_line.hi && t_line.elf;
    struct exec_line f;
    __builtin_memset(&f, 0, sizeof f);
    f.pc = pc;
    if (ht__maps_each(find_exec_line, &f) != 1)
        f.lo = f.hi = 0, f.elf = 0;     /* in no mapping: remembered as such */
    __atomic_store_n(&t_line.ns, 0, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_line.lo = f.lo;
    t_line.hi = f.hi;
    t_line.elf = f.elf;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t_line.ns, now ? now : 1, __ATOMIC_RELAXED);
    return f.elf;
}

uint64_t ht__jit_version(void) { return __atomic_load_n(&g_version, __ATOMIC_ACQUIRE); }

int ht__jit_alias(uintptr_t pc, uintptr_t *lo, uintptr_t *hi, uintptr_t *orig)
{
    const exec_range_t *x = in_exec_fresh(pc);
    if (!x || !x->alias)
        return 0;
    exec_range_t c = *x;        /* one copy: the table may be rewritten */
    if (!c.alias || pc < c.lo || pc >= c.hi)
        return 0;
    *lo = c.lo;
    *hi = c.hi;
    *orig = pc - c.delta;
    return 1;
}
