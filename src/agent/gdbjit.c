/* gdbjit.c -- names and unwind tables of JIT code announced through the
 * GDB JIT interface (the gdb manual, "JIT Compilation Interface").
 *
 * A JIT that supports gdb (LLVM's MCJIT and ORC, LuaJIT built with
 * LUAJIT_USE_GDBJIT, wasmtime, ...) keeps a global __jit_debug_descriptor
 * {version, action_flag, relevant_entry, first_entry} heading a doubly
 * linked list of entries {next, prev, symfile_addr, symfile_size}. Each
 * symfile is an ELF object in memory: its section headers say where the
 * sections were loaded (sh_addr), its .symtab names the functions, and
 * an .eh_frame may carry their CFI. After each change the JIT calls
 * __jit_debug_register_code(), an empty function gdb breaks on. We cannot
 * interpose it (it is defined inside the JIT, called directly), so the
 * control thread polls the list (agent.c, every 20 ms, and once more at
 * exit):
 *  - an entry not seen before: each STT_FUNC symbol in an executable
 *    section becomes a named registration (ht__jit_add_many). If the
 *    symfile's .eh_frame equals the bytes at its sh_addr, our copy of it
 *    is their CFI (read with the bias that makes pc-relative pointers
 *    decode as at sh_addr, cfi.h): a copy, because the JIT frees the
 *    original whenever it likes and we would only notice at the next poll;
 *  - an entry gone from the list: its registrations are removed, each
 *    only if it is still the one we made (ht__jit_remove_many checks the
 *    serial), so nothing that replaced it is touched;
 *  - the entry of the last registration (relevant_entry) is re-read each
 *    poll: an entry and symfile freed and allocated again at the same
 *    addresses between two polls look like the old one but for contents.
 * The lag: until the next poll, frames in new code carry no serial (the
 * writer names them by address and time once the registration exists,
 * writer.c) and are unwound by frame pointers or __register_frame CFI;
 * code removed and reused within one poll is named after the old code
 * for that long.
 *
 * The descriptor is found with dlsym and in the symbol tables (.dynsym
 * and .symtab, as gdb looks) of the files of the main executable and of
 * every loaded object, again whenever objects were loaded: executables
 * rarely export it.
 *
 * Everything on the list is the JIT's memory, changed by other threads
 * without telling us and possibly freed while we read: it is copied with
 * process_vm_readv on our own pid (a bad address is an error code, never
 * a fault), never dereferenced, and every count, size and offset is
 * bounded. Where the call is refused, or the thread runs under a seccomp
 * filter (which might kill the process for a call it does not expect;
 * checked before each walk, so a filter installed during one walk is the
 * one case left), a write() of the memory into a pipe does the same. A
 * walk that does not look consistent (a broken back link, the head
 * changed meanwhile, too long) registers what it found but removes
 * nothing. A walk costs a system call per entry: the next one waits at
 * least 50 times the CPU time the last took (2% of a CPU at most).
 *
 * Control thread and the exiting thread only (under a lock): reads files,
 * maps memory, may block. Never from a hook or a signal handler. */
#include "agent.h"
#include "../core/hash.h"
#include "../platform/linux-x86_64/cfi.h"
#include "../platform/linux-x86_64/jit.h"
#include "../platform/linux-x86_64/unwind.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define DESC_MAX     8          /* descriptors polled (one per JIT library) */
#define OBJ_SEEN_MAX 2048       /* loaded objects whose files were searched */
#define WALK_MAX     65536      /* entries followed per list */
#define SYMFILE_MAX  (1ull << 32)
#define SHNUM_MAX    4096
#define TABLE_MAX    (16u << 20) /* .symtab, .strtab, .eh_frame read at most */
#define SHSTR_MAX    (64u << 10)
#define NAME_MAX_LEN 1024
#define BATCH        4096
#define EH_ARENA_MAX (64u << 20) /* copies of .eh_frame sections, never freed */
#define EH_CHUNK     (1u << 20)
#define WALK_BUDGET  50         /* a walk waits 50x the CPU time it took */
#define ROOM_MIN     64         /* new entries a walk takes in, at least */

enum { JIT_NOACTION = 0, JIT_REGISTER_FN = 1, JIT_UNREGISTER_FN = 2 };

typedef struct jit_descriptor_s {
    uint32_t version, action_flag;
    uint64_t relevant_entry, first_entry;
} jit_descriptor_t;

typedef struct jit_code_entry_s {
    uint64_t next, prev, symfile_addr, symfile_size;
} jit_code_entry_t;

/* An entry of some list we registered code for. */
typedef struct known_s {
    uint64_t entry, symfile, size;  /* the key: where the entry and its symfile are */
    uint64_t fingerprint;           /* of the symfile parts we read */
    uint32_t reg_first, nreg;       /* its registrations: G.regs[reg_first..+nreg) */
    uint32_t seen;                  /* the last walk that saw it */
    uint8_t desc;                   /* index in G.desc */
    uint8_t used, dead;
} known_t;

/* A growable array in our own mappings. */
typedef struct vec_s {
    void *p;
    size_t n, cap;                  /* elements used, allocated */
    size_t size, bytes;             /* of an element; of the mapping */
} vec_t;
#define VEC(type) { NULL, 0, 0, sizeof(type), 0 }

static struct {
    ht_spinlock_t lock;
    int pid;
    int use_pipe;                   /* process_vm_readv is forbidden here */
    int pipe_rd, pipe_wr;           /* open during a walk, with use_pipe */
    /* descriptors */
    uintptr_t desc[DESC_MAX];
    int ndesc;
    unsigned long long objs_adds;   /* dlpi_adds when objects were last searched */
    int searched;
    uint64_t obj_seen[OBJ_SEEN_MAX];
    int nobj_seen;
    /* the known entries: open addressing, at most half full */
    known_t *tab;
    size_t cap, count;
    vec_t regs;                     /* ht_jit_reg_t */
    size_t orphans;                 /* of them, no longer any entry's */
    vec_t rm;                       /* ht_jit_reg_t to remove at the end of a poll */
    uint32_t walk;
    uint64_t next_walk_ns;          /* CLOCK_MONOTONIC */
    int table_full;                 /* this walk found more new entries than room */
    /* the batch of registrations being built */
    ht_jit_add_t adds[BATCH];
    uint32_t owner[BATCH];          /* index in tab */
    uint32_t serials[BATCH];
    size_t nadds;
    char names[BATCH * 64];
    size_t names_used;
    /* scratch for one symfile */
    Elf64_Shdr *shdrs;              /* SHNUM_MAX */
    uint8_t sec_ok[SHNUM_MAX / 8];  /* executable section checked readable */
    uint8_t sec_bad[SHNUM_MAX / 8];
    vec_t symtab, strtab, shstr, tmp;
    /* copies of .eh_frame sections */
    uint8_t *eh_chunk;
    size_t eh_used, eh_size, eh_total;
    uint64_t eh_dropped;            /* .eh_frame sections not copied: over EH_ARENA_MAX */
} G = { .pipe_rd = -1, .pipe_wr = -1, .regs = VEC(ht_jit_reg_t), .rm = VEC(ht_jit_reg_t),
        .symtab = VEC(uint8_t), .strtab = VEC(uint8_t), .shstr = VEC(uint8_t), .tmp = VEC(uint8_t) };

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- our own memory ----------------------------------------------------- */

/* Gives v's memory back (scratch that one search needed). */
static void vec_free(vec_t *v)
{
    if (v->p)
        ht__unmap(v->p, v->bytes);
    v->p = NULL;
    v->n = v->cap = v->bytes = 0;
}

/* Makes room for `n` elements in v (contents kept). Returns 0 or -1. */
static int vec_reserve(vec_t *v, size_t n)
{
    if (n <= v->cap)
        return 0;
    size_t cap = v->cap ? v->cap : 4096 / v->size;
    while (cap < n)
        cap *= 2;
    size_t bytes = (cap * v->size + 4095) & ~(size_t)4095;
    void *p = ht__map(bytes);
    if (!p)
        return -1;
    if (v->p) {
        memcpy(p, v->p, v->n * v->size);
        ht__unmap(v->p, v->bytes);
    }
    v->p = p;
    v->cap = bytes / v->size;
    v->bytes = bytes;
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* ---- reading the program's memory without faulting ---------------------- */

int ht__pipe_copy(int rd, int wr, void *dst, uintptr_t src, size_t n)
{
    uint8_t *d = dst;
    while (n) {
        size_t k = n < 4096 ? n : 4096;     /* PIPE_BUF: all or nothing */
        long w = ht__sys3(SYS_write, wr, src, k);
        if (w > 0 && ht__sys3(SYS_read, rd, d, w) != w)
            return 0;
        if (w != (long)k)
            return 0;               /* -EFAULT: not readable */
        d += k;
        src += k;
        n -= k;
    }
    return 1;
}

static int pipe_peek(void *dst, uintptr_t src, size_t n)
{
    if (G.pipe_rd < 0) {
        int fd[2];
        if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0)
            return 0;
        G.pipe_rd = fd[0];
        G.pipe_wr = fd[1];
    }
    return ht__pipe_copy(G.pipe_rd, G.pipe_wr, dst, src, n);
}

static void pipe_close(void)
{
    if (G.pipe_rd >= 0) {
        close(G.pipe_rd);
        close(G.pipe_wr);
    }
    G.pipe_rd = G.pipe_wr = -1;
}

/* Whether this thread runs under a seccomp filter (or we cannot tell). A
 * filter may kill the process for a system call it does not expect
 * (systemd's SystemCallFilter= does, by default) instead of failing it:
 * then only write(), which every filter allows, is used to read memory.
 * Filters cannot be removed, so once set the answer stays. */
int ht__seccomp_filtered(void)
{
    char buf[2048];
    int fd = (int)ht__sys3(SYS_open, "/proc/thread-self/status", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 1;
    size_t have = 0;
    for (;;) {
        long r = ht__sys3(SYS_read, fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        if (have == sizeof buf - 1)
            break;
    }
    ht__sys1(SYS_close, fd);
    buf[have] = 0;
    static const char key[] = "\nSeccomp:";
    for (size_t i = 0; i + sizeof key - 1 < have; i++)
        if (memcmp(buf + i, key, sizeof key - 1) == 0) {
            const char *v = buf + i + sizeof key - 1;
            while (*v == ' ' || *v == '\t')
                v++;
            return *v != '0';
        }
    return 1;                       /* no line: an old kernel, or cut short */
}

/* Copies [src, src + n) of our own memory to dst. Returns 1, or 0 if any
 * of it is not readable. Never faults. */
static int peek(void *dst, uintptr_t src, size_t n)
{
    if (!n)
        return 1;
    if (!src || src + n < src)
        return 0;
    if (!G.use_pipe) {
        struct iovec l = { dst, n }, r = { (void *)src, n };
        long got = ht__syscall6(SYS_process_vm_readv, G.pid, (long)&l, 1, (long)&r, 1, 0);
        if (got == (long)n)
            return 1;
        if (got >= 0 || (got != -ENOSYS && got != -EPERM && got != -EACCES))
            return 0;
        G.use_pipe = 1;             /* seccomp or an LSM said no */
    }
    return pipe_peek(dst, src, n);
}

/* ---- finding the descriptors -------------------------------------------- */

static void add_desc(uintptr_t a)
{
    if (!a)
        return;
    for (int i = 0; i < G.ndesc; i++)
        if (G.desc[i] == a)
            return;
    if (G.ndesc < DESC_MAX)
        G.desc[G.ndesc++] = a;
}

static const char want_sym[] = "__jit_debug_descriptor";

/* Offsets in the string table [off, off + size) of fd where want_sym
 * starts (as a whole string or the tail of a longer one). Returns how many
 * (at most `max`). */
static int find_name(int fd, uint64_t off, uint64_t size, uint32_t *at, int max)
{
    const size_t need = sizeof want_sym;   /* with its NUL */
    /* 64 KiB a read, faulted in at once: most string tables fit in one
     * (libc's .dynstr: 32 KiB), and a page fault a page cost more than
     * the reads */
    enum { CHUNK = 64u << 10 };
    if (G.tmp.cap < CHUNK + need) {
        if (vec_reserve(&G.tmp, CHUNK + need) != 0)
            return 0;
        ht__populate(G.tmp.p, CHUNK);
    }
    char *buf = G.tmp.p;
    int found = 0;
    for (uint64_t pos = 0; pos < size && found < max;) {
        size_t len = size - pos < CHUNK ? (size_t)(size - pos) : CHUNK;
        if (len < need && pos > 0)
            break;
        ssize_t got = pread(fd, buf, len, (off_t)(off + pos));
        if (got != (ssize_t)len)
            break;
        for (const char *q = buf, *end = buf + len; found < max && end - q >= (ptrdiff_t)need;) {
            const char *hit = memmem(q, (size_t)(end - q), want_sym, need);
            if (!hit)
                break;
            at[found++] = (uint32_t)(pos + (size_t)(hit - buf));
            q = hit + 1;
        }
        if (pos + len >= size)
            break;
        pos += len - (need - 1);  /* chunks overlap by a name */
    }
    return found;
}

/* The value of __jit_debug_descriptor in the .dynsym or .symtab of the
 * ELF file at `path`, or 0. Reads the file with pread, checking every
 * offset against its size. */
static uint64_t file_symbol(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    uint64_t value = 0;
    struct stat st;
    Elf64_Ehdr eh;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || pread(fd, &eh, sizeof eh, 0) != sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > SHNUM_MAX ||
        eh.e_shoff > (uint64_t)st.st_size ||
        (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size - eh.e_shoff ||
        pread(fd, G.shdrs, eh.e_shnum * sizeof(Elf64_Shdr), (off_t)eh.e_shoff) !=
            (ssize_t)(eh.e_shnum * sizeof(Elf64_Shdr)))
        goto out;
    uint64_t fsize = (uint64_t)st.st_size;
    for (int pass = 0; pass < 2 && !value; pass++) {     /* .dynsym first: small */
        for (unsigned i = 0; i < eh.e_shnum && !value; i++) {
            const Elf64_Shdr *s = &G.shdrs[i];
            if (s->sh_type != (pass ? SHT_SYMTAB : SHT_DYNSYM) || s->sh_entsize != sizeof(Elf64_Sym) ||
                s->sh_link >= eh.e_shnum || s->sh_offset > fsize || s->sh_size > fsize - s->sh_offset)
                continue;
            const Elf64_Shdr *str = &G.shdrs[s->sh_link];
            if (str->sh_type != SHT_STRTAB || str->sh_offset > fsize || str->sh_size > fsize - str->sh_offset ||
                str->sh_size > UINT32_MAX)
                continue;
            uint32_t at[16];
            int nat = find_name(fd, str->sh_offset, str->sh_size, at, 16);
            if (!nat)
                continue;
            /* the symbols, a chunk at a time */
            enum { CH = 4096 };
            if (vec_reserve(&G.symtab, CH * sizeof(Elf64_Sym)) != 0)
                continue;
            Elf64_Sym *sym = G.symtab.p;
            uint64_t nsym = s->sh_size / sizeof(Elf64_Sym);
            for (uint64_t k = 0; k < nsym && !value; k += CH) {
                size_t m = nsym - k < CH ? (size_t)(nsym - k) : CH;
                if (pread(fd, sym, m * sizeof *sym, (off_t)(s->sh_offset + k * sizeof *sym)) !=
                    (ssize_t)(m * sizeof *sym))
                    break;
                for (size_t j = 0; j < m && !value; j++) {
                    int type = ELF64_ST_TYPE(sym[j].st_info);
                    if (sym[j].st_shndx == SHN_UNDEF || sym[j].st_value == 0 ||
                        (type != STT_OBJECT && type != STT_NOTYPE))
                        continue;
                    for (int a = 0; a < nat; a++)
                        if (sym[j].st_name == at[a])
                            value = sym[j].st_value;
                }
            }
        }
    }
out:
    close(fd);
    return value;
}

typedef struct obj_s { uintptr_t bias; uint32_t name; } obj_t;
struct objs_ctx { obj_t *o; size_t n, max; char *names; size_t used, room; unsigned long long adds; };

static int collect_obj(struct dl_phdr_info *info, size_t size, void *p)
{
    struct objs_ctx *c = p;
    c->adds = info->dlpi_adds;
    if (c->n == c->max)
        return 0;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    size_t len = strlen(name);
    /* the main program has no name; an object without a path (the vdso)
     * has no file to read */
    if (c->n > 0 && name[0] != '/')
        return 0;
    if (c->n == 0 && name[0] != '/')
        name = "/proc/self/exe", len = 14;
    if (c->used + len + 1 > c->room)
        return 0;
    memcpy(c->names + c->used, name, len + 1);
    c->o[c->n].bias = info->dlpi_addr;
    c->o[c->n].name = (uint32_t)c->used;
    c->used += len + 1;
    c->n++;
    return 0;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *p)
{
    *(unsigned long long *)p = info->dlpi_adds;
    return 1;
}

/* Looks for descriptors when objects were loaded since the last look
 * (each object's file is read once). */
static void find_descriptors(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(read_adds, &adds);
    if (G.searched && adds == G.objs_adds)
        return;
    G.searched = 1;
    add_desc((uintptr_t)dlsym(RTLD_DEFAULT, want_sym));
    enum { OBJS = 1024, NAMES = 256u << 10 };
    size_t bytes = OBJS * sizeof(obj_t) + NAMES;
    obj_t *o = ht__map(bytes);
    if (!o)
        return;
    struct objs_ctx c = { o, 0, OBJS, (char *)(o + OBJS), 0, NAMES, 0 };
    dl_iterate_phdr(collect_obj, &c);
    G.objs_adds = c.adds ? c.adds : adds;
    for (size_t i = 0; i < c.n; i++) {
        const char *name = c.names + o[i].name;
        uint64_t key = fnv(fnv(0xcbf29ce484222325ull, name, strlen(name)), &o[i].bias, sizeof o[i].bias);
        int seen = 0;
        for (int k = 0; k < G.nobj_seen && !seen; k++)
            seen = G.obj_seen[k] == key;
        if (seen)
            continue;
        if (G.nobj_seen < OBJ_SEEN_MAX)
            G.obj_seen[G.nobj_seen++] = key;
        uint64_t v = file_symbol(name);
        if (v)
            add_desc(o[i].bias + (uintptr_t)v);
    }
    ht__unmap(o, bytes);
    /* the files' read buffer: not resident in every traced program */
    vec_free(&G.tmp);
    vec_free(&G.symtab);
}

/* ---- the known entries -------------------------------------------------- */

static size_t slot_of(uint64_t entry, uint64_t symfile, uint64_t size)
{
    uint64_t h = ht_hash_finish(entry * 0x9e3779b97f4a7c15ull ^ symfile ^ (size << 17), entry);
    return (size_t)h & (G.cap - 1);
}

static known_t *lookup(int desc, uint64_t entry, uint64_t symfile, uint64_t size)
{
    if (!G.cap)
        return NULL;
    for (size_t i = slot_of(entry, symfile, size);; i = (i + 1) & (G.cap - 1)) {
        known_t *k = &G.tab[i];
        if (!k->used)
            return NULL;
        /* a dead entry stays until the next rebuild, as a tombstone: the
         * same entry coming back is a new one */
        if (!k->dead && k->entry == entry && k->symfile == symfile && k->size == size && k->desc == desc)
            return k;
    }
}

static known_t *insert(int desc, uint64_t entry, uint64_t symfile, uint64_t size)
{
    if (!G.cap || G.count + 1 > G.cap / 2)
        return NULL;
    size_t i = slot_of(entry, symfile, size);
    while (G.tab[i].used)
        i = (i + 1) & (G.cap - 1);
    known_t *k = &G.tab[i];
    *k = (known_t){ entry, symfile, size, 0, 0, 0, 0, (uint8_t)desc, 1, 0 };
    G.count++;
    return k;
}

/* Rebuilds the table with room for `want` entries, without the dead ones,
 * and their registrations packed. Returns 0 or -1 (nothing changed). */
static int rebuild(size_t want)
{
    size_t cap = 64;
    while (cap < 2 * want)
        cap *= 2;
    size_t bytes = cap * sizeof(known_t);
    known_t *tab = ht__map(bytes);
    vec_t regs = VEC(ht_jit_reg_t);
    size_t nregs = 0;
    for (size_t i = 0; i < G.cap; i++)
        if (G.tab[i].used && !G.tab[i].dead)
            nregs += G.tab[i].nreg;
    if (!tab || vec_reserve(&regs, nregs ? nregs : 1) != 0) {
        if (tab)
            ht__unmap(tab, bytes);
        return -1;
    }
    known_t *old = G.tab;
    size_t old_cap = G.cap;
    G.tab = tab;
    G.cap = cap;
    G.count = 0;
    ht_jit_reg_t *from = G.regs.p, *to = regs.p;
    for (size_t i = 0; i < old_cap; i++) {
        const known_t *o = &old[i];
        if (!o->used || o->dead)
            continue;
        known_t *k = insert(o->desc, o->entry, o->symfile, o->size);
        *k = *o;
        k->reg_first = (uint32_t)regs.n;
        memcpy(to + regs.n, from + o->reg_first, o->nreg * sizeof *to);
        regs.n += o->nreg;
    }
    if (old)
        ht__unmap(old, old_cap * sizeof(known_t));
    if (G.regs.p)
        ht__unmap(G.regs.p, G.regs.bytes);
    G.regs = regs;
    G.orphans = 0;
    return 0;
}

/* Queues k's registrations for removal. */
static void drop_regs(known_t *k)
{
    if (k->nreg && vec_reserve(&G.rm, G.rm.n + k->nreg) == 0) {
        memcpy((ht_jit_reg_t *)G.rm.p + G.rm.n, (ht_jit_reg_t *)G.regs.p + k->reg_first,
               k->nreg * sizeof(ht_jit_reg_t));
        G.rm.n += k->nreg;
    }
    G.orphans += k->nreg;
    k->nreg = 0;
}

/* ---- registering -------------------------------------------------------- */

static void flush_adds(void)
{
    if (!G.nadds)
        return;
    ht__jit_add_many(G.adds, G.nadds, G.serials);
    for (size_t i = 0; i < G.nadds; i++) {
        if (!G.serials[i] || vec_reserve(&G.regs, G.regs.n + 1) != 0)
            continue;
        /* an entry's adds are consecutive, so are its registrations */
        known_t *k = &G.tab[G.owner[i]];
        if (!k->nreg)
            k->reg_first = (uint32_t)G.regs.n;
        ((ht_jit_reg_t *)G.regs.p)[G.regs.n++] = (ht_jit_reg_t){ G.adds[i].start, G.serials[i] };
        k->nreg++;
    }
    G.nadds = 0;
    G.names_used = 0;
}

static void add(known_t *owner, uintptr_t start, size_t size, const char *name, size_t len,
                const uint8_t *eh, size_t eh_size, intptr_t eh_bias)
{
    if (G.nadds == BATCH || G.names_used + len + 1 > sizeof G.names)
        flush_adds();
    char *n = G.names + G.names_used;
    memcpy(n, name, len);
    n[len] = 0;
    G.names_used += len + 1;
    G.owner[G.nadds] = (uint32_t)(owner - G.tab);
    G.adds[G.nadds++] = (ht_jit_add_t){ start, size, n, eh, eh ? eh_size : 0, eh ? eh_bias : 0 };
}

/* Room for a copy of `n` bytes of .eh_frame that lives forever, or NULL;
 * eh_commit() keeps the last one asked for. */
static uint8_t *eh_room(size_t n)
{
    if (G.eh_total + n > EH_ARENA_MAX) {
        G.eh_dropped++;
        return NULL;
    }
    if (!G.eh_chunk || G.eh_used + n > G.eh_size) {
        size_t size = n > EH_CHUNK ? (n + 4095) & ~(size_t)4095 : EH_CHUNK;
        uint8_t *c = ht__map(size);
        if (!c)
            return NULL;
        G.eh_chunk = c;
        G.eh_size = size;
        G.eh_used = 0;
        G.eh_total += size;
    }
    return G.eh_chunk + G.eh_used;
}

static void eh_commit(size_t n) { G.eh_used += n; }

static void count_fde(void *p, uintptr_t begin, uintptr_t end) { (*(size_t *)p)++; }

/* Whether the executable section i (sh_addr, sh_size) is readable memory:
 * a symfile's symbols are trusted no further than that. */
static int section_mapped(unsigned i, const Elf64_Shdr *s)
{
    if (G.sec_ok[i / 8] & (1u << (i % 8)))
        return 1;
    if (G.sec_bad[i / 8] & (1u << (i % 8)))
        return 0;
    uint8_t b[2];
    int ok = peek(b, s->sh_addr, 1) && peek(b + 1, s->sh_addr + s->sh_size - 1, 1);
    if (ok)
        G.sec_ok[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        G.sec_bad[i / 8] |= (uint8_t)(1u << (i % 8));
    return ok;
}

/* Reads the section s of the symfile at `base` (`size` bytes) into v.
 * Returns its bytes, or NULL. */
static const uint8_t *read_section(vec_t *v, uint64_t base, uint64_t size, const Elf64_Shdr *s, size_t max)
{
    if (s->sh_type == SHT_NOBITS || s->sh_offset > size || s->sh_size > size - s->sh_offset ||
        s->sh_size > max || vec_reserve(v, s->sh_size + 1) != 0 ||
        !peek(v->p, base + s->sh_offset, s->sh_size))
        return NULL;
    ((uint8_t *)v->p)[s->sh_size] = 0;      /* strings end inside the buffer */
    return v->p;
}

/* Reads the symfile [base, base + size): its fingerprint (0: not a usable
 * ELF object, or unreadable), and with `owner`, its functions queued for
 * registration under that entry. */
static uint64_t read_symfile(uint64_t base, uint64_t size, known_t *owner)
{
    Elf64_Ehdr eh;
    if (size < sizeof eh || size > SYMFILE_MAX || !peek(&eh, base, sizeof eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > SHNUM_MAX ||
        eh.e_shoff > size || (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff ||
        !peek(G.shdrs, base + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr)))
        return 0;
    unsigned shnum = eh.e_shnum;
    uint64_t fp = fnv(0xcbf29ce484222325ull, &eh, sizeof eh);
    fp = fnv(fp, G.shdrs, shnum * sizeof(Elf64_Shdr));

    /* the symbols and their names */
    const Elf64_Sym *sym = NULL;
    const char *str = NULL;
    size_t nsym = 0, strsize = 0;
    for (unsigned i = 0; i < shnum && !sym; i++) {
        const Elf64_Shdr *s = &G.shdrs[i];
        if (s->sh_type != SHT_SYMTAB || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= shnum ||
            G.shdrs[s->sh_link].sh_type != SHT_STRTAB)
            continue;
        Elf64_Shdr ss = G.shdrs[s->sh_link];
        sym = (const Elf64_Sym *)read_section(&G.symtab, base, size, s, TABLE_MAX);
        str = (const char *)read_section(&G.strtab, base, size, &ss, TABLE_MAX);
        if (!sym || !str)
            return 0;
        nsym = s->sh_size / sizeof(Elf64_Sym);
        strsize = ss.sh_size;
        fp = fnv(fnv(fp, sym, s->sh_size), str, strsize);
    }

    /* its .eh_frame, if the section was loaded and is what it says */
    const Elf64_Shdr *ehs = NULL;
    if (eh.e_shstrndx != SHN_UNDEF && eh.e_shstrndx < shnum) {
        Elf64_Shdr ss = G.shdrs[eh.e_shstrndx];
        const char *names = ss.sh_type == SHT_STRTAB
                                ? (const char *)read_section(&G.shstr, base, size, &ss, SHSTR_MAX) : NULL;
        for (unsigned i = 0; names && i < shnum && !ehs; i++) {
            const Elf64_Shdr *s = &G.shdrs[i];
            if ((s->sh_type == SHT_PROGBITS || s->sh_type == SHT_X86_64_UNWIND) && s->sh_name < ss.sh_size &&
                strcmp(names + s->sh_name, ".eh_frame") == 0 && s->sh_addr && s->sh_size &&
                s->sh_addr + s->sh_size > s->sh_addr)
                ehs = s;
        }
    }
    const uint8_t *cfi = NULL;
    size_t cfi_size = 0;
    intptr_t cfi_bias = 0;
    if (ehs && ehs->sh_size <= TABLE_MAX && ehs->sh_offset <= size && ehs->sh_size <= size - ehs->sh_offset) {
        size_t n = ehs->sh_size;
        uint8_t *copy = owner ? eh_room(n) : NULL;
        uint8_t *mine = copy;
        if (!copy && vec_reserve(&G.tmp, n) == 0)
            mine = G.tmp.p;
        if (mine && peek(mine, base + ehs->sh_offset, n)) {
            fp = fnv(fp, mine, n);
            size_t fdes = 0;
            intptr_t bias = (intptr_t)(ehs->sh_addr - (uintptr_t)mine);
            /* the loaded section must be these bytes; a symfile whose
             * section holds them before relocation (LLVM's debug objects)
             * describes nothing we can use */
            if (copy && vec_reserve(&G.tmp, n) == 0 && peek(G.tmp.p, ehs->sh_addr, n) &&
                memcmp(G.tmp.p, copy, n) == 0 && ht__eh_frame_each(copy, n, bias, count_fde, &fdes) == 0 &&
                fdes > 0) {
                eh_commit(n);
                cfi = copy;
                cfi_size = n;
                cfi_bias = bias;
            }
        }
    }
    if (!owner)
        return fp ? fp : 1;

    /* every function in an executable section that is there */
    memset(G.sec_ok, 0, sizeof G.sec_ok);
    memset(G.sec_bad, 0, sizeof G.sec_bad);
    for (size_t i = 1; i < nsym; i++) {
        const Elf64_Sym *y = &sym[i];
        if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || !y->st_size || y->st_shndx == SHN_UNDEF ||
            y->st_shndx >= shnum || y->st_name >= strsize || !str[y->st_name])
            continue;
        const Elf64_Shdr *s = &G.shdrs[y->st_shndx];
        if (!(s->sh_flags & SHF_EXECINSTR) || !s->sh_addr || !s->sh_size || s->sh_addr + s->sh_size < s->sh_addr)
            continue;
        /* a relocatable object's symbols are offsets in their section */
        uint64_t start = eh.e_type == ET_REL ? s->sh_addr + y->st_value : y->st_value;
        if (start < s->sh_addr || start > s->sh_addr + s->sh_size || y->st_size > s->sh_addr + s->sh_size - start ||
            !section_mapped(y->st_shndx, s))
            continue;
        size_t len = strnlen(str + y->st_name, strsize - y->st_name);
        add(owner, (uintptr_t)start, (size_t)y->st_size, str + y->st_name, len < NAME_MAX_LEN ? len : NAME_MAX_LEN,
            cfi, cfi_size, cfi_bias);
    }
    return fp ? fp : 1;
}

/* ---- the walk ----------------------------------------------------------- */

/* Walks the list of descriptor d. Returns 1 if the walk looked consistent
 * from end to end (then entries it did not see are gone). */
static int walk_list(int d)
{
    jit_descriptor_t jd, again;
    if (!peek(&jd, G.desc[d], sizeof jd) || jd.version != 1)
        return 0;
    int clean = 1;
    uint64_t e = jd.first_entry, prev = 0;
    for (size_t n = 0; e; n++) {
        jit_code_entry_t ce;
        if (n == WALK_MAX || !peek(&ce, e, sizeof ce)) {
            clean = 0;
            break;
        }
        if (ce.prev != prev)
            clean = 0;
        known_t *k = lookup(d, e, ce.symfile_addr, ce.symfile_size);
        if (k) {
            k->seen = G.walk;
            /* the entry of the last registration: the same addresses may
             * hold another symfile now */
            if (e == jd.relevant_entry && jd.action_flag == JIT_REGISTER_FN) {
                uint64_t fp = read_symfile(ce.symfile_addr, ce.symfile_size, NULL);
                if (fp && fp != k->fingerprint) {
                    drop_regs(k);
                    k->fingerprint = read_symfile(ce.symfile_addr, ce.symfile_size, k);
                }
            }
        } else if ((k = insert(d, e, ce.symfile_addr, ce.symfile_size))) {
            k->seen = G.walk;
            k->fingerprint = read_symfile(ce.symfile_addr, ce.symfile_size, k);
        } else {
            clean = 0;              /* the table is full: next time */
            G.table_full = 1;
        }
        prev = e;
        e = ce.next;
    }
    if (!peek(&again, G.desc[d], sizeof again) || again.first_entry != jd.first_entry)
        clean = 0;
    return clean;
}

static void poll_locked(int force)
{
    if (!G.shdrs && !(G.shdrs = ht__map(SHNUM_MAX * sizeof(Elf64_Shdr))))
        return;
    find_descriptors();
    if (!G.ndesc)
        return;
    if (!force && clock_ns(CLOCK_MONOTONIC) < G.next_walk_ns)
        return;
    /* the cost of a walk is the CPU time it takes: time the thread spent
     * preempted is not, nor are the page faults of a table's first use */
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    /* room for this walk's new entries: as many as are known, at least
     * ROOM_MIN; more wait for the next walk, which comes at once */
    size_t room = G.count > ROOM_MIN ? G.count : ROOM_MIN;
    if (G.count + room > G.cap / 2 && rebuild(G.count + room) != 0 && !G.cap)
        return;
    G.table_full = 0;
    if (!G.use_pipe && ht__seccomp_filtered())
        G.use_pipe = 1;
    G.walk++;
    int clean[DESC_MAX];
    for (int d = 0; d < G.ndesc; d++)
        clean[d] = walk_list(d);
    flush_adds();
    /* what a consistent walk did not see has left its list */
    size_t dead = 0;
    for (size_t i = 0; i < G.cap; i++) {
        known_t *k = &G.tab[i];
        if (k->used && !k->dead && k->seen != G.walk && clean[k->desc]) {
            drop_regs(k);
            k->dead = 1;
            dead++;
        }
    }
    if (G.rm.n)
        ht__jit_remove_many(G.rm.p, G.rm.n);
    G.rm.n = 0;
    if (dead || G.orphans > 65536)
        rebuild(G.count - dead + ROOM_MIN);
    if (G.use_pipe)
        pipe_close();
    uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    G.next_walk_ns = G.table_full ? 0 : clock_ns(CLOCK_MONOTONIC) + WALK_BUDGET * (c1 - c0);
}

void ht__gdbjit_poll(int force)
{
    ht__spin_lock(&G.lock);
    if (!G.pid)
        G.pid = (int)ht__sys0(SYS_getpid);
    poll_locked(force);
    ht__spin_unlock(&G.lock);
}

/* fork: a poll calls dl_iterate_phdr and dlsym, which take the loader's
 * locks; a fork in the middle would leave them held in the child by a
 * thread that does not exist there (glibc 2.36 does not reset them), and
 * the child's first dl_iterate_phdr, dlopen or exit would wait forever.
 * So fork waits for a poll to end. */
void ht__gdbjit_fork_prepare(void) { ht__spin_lock(&G.lock); }
void ht__gdbjit_fork_release(void) { ht__spin_unlock(&G.lock); }

void ht__gdbjit_forget(void)
{
    /* a forked child: its own pid. What it knows is still true of its copy
     * of the memory, unless the fork caught a poll halfway: then start
     * afresh (the mappings of that state are left behind) */
    if (G.lock.v) {
        G.tab = NULL;
        G.cap = G.count = 0;
        G.regs = (vec_t)VEC(ht_jit_reg_t);
        G.rm = (vec_t)VEC(ht_jit_reg_t);
        G.orphans = 0;
        G.nadds = G.names_used = 0;
        G.symtab = (vec_t)VEC(uint8_t);
        G.strtab = (vec_t)VEC(uint8_t);
        G.shstr = (vec_t)VEC(uint8_t);
        G.tmp = (vec_t)VEC(uint8_t);
        G.eh_chunk = NULL;
        G.eh_used = G.eh_size = 0;
        if (G.pipe_rd >= 0)
            pipe_close();
        G.lock.v = 0;
    }
    G.pid = (int)ht__sys0(SYS_getpid);
    G.next_walk_ns = 0;
}
