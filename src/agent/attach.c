/* attach.c -- the agent loaded into a process that is already running
 * (`heaptrail attach PID`: the CLI makes one of its threads call dlopen,
 * then ht__attach).
 *
 * Loaded that late, the library is not in the lookup order the program's
 * calls bind through: every module's calls to malloc, free, exit, execve
 * and the rest already point at libc through its global offset table. So
 * the agent rewrites those slots, as heaptrack's injection does: in every
 * loaded module (but this one and the loader), each JUMP_SLOT, GLOB_DAT or
 * absolute 64-bit relocation against a name this library defines as a hook
 * gets the hook's address, if the slot holds what the name binds to (or a
 * lazy-binding stub of the module's own). A slot bound elsewhere (a module
 * opened with RTLD_DEEPBIND, a program's own allocator) is left alone: a
 * hook would pass its calls on to another allocator. Slots in the
 * read-only part after relocation (PT_GNU_RELRO) are made writable for the
 * write and read-only again.
 *
 * A module may be in the middle of its loading (another thread in dlopen:
 * listed, not yet relocated): its slots then hold neither the name's
 * definition nor a stub, and its RELRO part is still writable, to be made
 * read-only by the loader when it is done. Such a module is left for a
 * later pass: the agent never touches the protection of a RELRO part that
 * /proc/self/maps does not show read-only (changing it under the loader
 * would make its next write fault). A pass that wrote anything is
 * followed by one more (a lazy binding in another thread may have written
 * a slot back), and one that found unsettled slots by more, for a second.
 *
 * Hooks then resolve the real functions with RTLD_DEFAULT (hooks.c): this
 * library is loaded with RTLD_LOCAL, so the global scope still gives what
 * the program binds to. Modules loaded later are patched by the control
 * thread when the loader's count of loads changes (every 20 ms): their
 * allocations in between, and in their constructors, are not seen. A hook
 * on dlopen could do it at once, but dlopen takes its caller's return
 * address to pick the search path (RUNPATH, $ORIGIN): a wrapper would load
 * plugins from the wrong place.
 *
 * heaptrail detach runs the passes in reverse (P.undo): a slot that holds a
 * hook gets the real function back, and nothing patches again. An attach
 * after that loads a fresh copy of this library ("joining again", below).
 *
 * Not async-signal-safe: runs in the thread the CLI borrowed and in the
 * control thread, never in a hook. */
#include "agent.h"
#include "../platform/linux-x86_64/unwind.h"
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int ht__attached;

#define MAX_HOOKS 128
typedef struct {
    const char *name;
    uint32_t hash;
    uintptr_t ours, real;
    uintptr_t canon;            /* a non-PIE program's canonical PLT entry, or 0 */
} hook_t;

static struct {
    hook_t hooks[MAX_HOOKS];
    uint32_t nhooks;
    uint8_t table[256];         /* open addressing on hash: index + 1, 0 empty */
    uintptr_t self_lo, self_hi; /* this library's mapped span */
    unsigned long long adds;    /* the loader's load count at the last pass */
    ht_spinlock_t lock;
    uint64_t slots;             /* slots written, in all */
    unsigned retries;           /* passes still to make without a new load */
    int undo;                   /* heaptrail detach: passes put the slots back, for good */
} P;

#define RETRIES 50              /* polls: a second */

static int is_loader_or_vdso(const char *name);
static int other_instance(uintptr_t a);

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static const hook_t *find_hook(const char *name)
{
    uint32_t h = name_hash(name);
    for (uint32_t i = h & 255, n = 0; n < 256; i = (i + 1) & 255, n++) {
        if (!P.table[i])
            return NULL;
        const hook_t *k = &P.hooks[P.table[i] - 1];
        if (k->hash == h && !strcmp(k->name, name))
            return k;
    }
    return NULL;
}

/* A dynamic-section pointer: the loader has added the load bias to most
 * of them in place; the vdso's and some others' are left as offsets. */
static uintptr_t dyn_ptr(uintptr_t v, uintptr_t bias)
{
    return v < bias ? v + bias : v;
}

/* What the patch reads from a module's dynamic section. */
typedef struct {
    const ElfW(Sym) *sym;
    const char *str;
    const uint32_t *gnu_hash;
    const ElfW(Rela) *rela, *jmprel;
    size_t relasz, pltsz;
    int pltrel;
} dyn_t;

static dyn_t read_dynamic(const ElfW(Dyn) *d, uintptr_t bias)
{
    dyn_t t = { .pltrel = DT_RELA };
    for (; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: t.sym = (const ElfW(Sym) *)dyn_ptr(d->d_un.d_ptr, bias); break;
        case DT_STRTAB: t.str = (const char *)dyn_ptr(d->d_un.d_ptr, bias); break;
        case DT_GNU_HASH: t.gnu_hash = (const uint32_t *)dyn_ptr(d->d_un.d_ptr, bias); break;
        case DT_RELA: t.rela = (const ElfW(Rela) *)dyn_ptr(d->d_un.d_ptr, bias); break;
        case DT_RELASZ: t.relasz = d->d_un.d_val; break;
        case DT_JMPREL: t.jmprel = (const ElfW(Rela) *)dyn_ptr(d->d_un.d_ptr, bias); break;
        case DT_PLTRELSZ: t.pltsz = d->d_un.d_val; break;
        case DT_PLTREL: t.pltrel = (int)d->d_un.d_val; break;
        }
    }
    return t;
}

/* Symbols in a GNU hash table's symbol table: one past the last chain's end. */
static uint32_t gnu_hash_count(const uint32_t *h)
{
    uint32_t nb = h[0], symoff = h[1], bloom = h[2];
    const uint32_t *buckets = (const uint32_t *)((const uint64_t *)(h + 4) + bloom);
    const uint32_t *chain = buckets + nb;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nb; i++)
        if (buckets[i] > last)
            last = buckets[i];
    if (last < symoff)
        return symoff;
    while (!(chain[last - symoff] & 1))
        last++;
    return last + 1;
}

/* A library loaded at start-up (not the program, this library, the vdso
 * or the loader), opened by name: dlsym on it finds what the program's
 * libraries define, past a canonical PLT entry of the program's. */
static int first_library(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    const char **name = arg;
    if (info->dlpi_addr == 0 && (!info->dlpi_name || !info->dlpi_name[0]))
        return 0;               /* the program (non-PIE) */
    if (!info->dlpi_name || !info->dlpi_name[0] || is_loader_or_vdso(info->dlpi_name) ||
        (info->dlpi_addr >= P.self_lo && info->dlpi_addr < P.self_hi) ||
        other_instance(info->dlpi_addr))
        return 0;
    *name = info->dlpi_name;
    return 1;
}

/* What `name` really is: what the program binds it to, unless that is a
 * canonical PLT entry (a non-PIE program that takes the function's
 * address: its calls jump through its own slot, which the patch makes a
 * hook's); then the libraries' definition. *canon gets the entry. */
static void *real_def(const char *name, void *lib, uintptr_t *canon)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    *canon = 0;
    if (f && dladdr1(f, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_shndx == SHN_UNDEF) {
        *canon = (uintptr_t)f;
        f = lib ? dlsym(lib, name) : NULL;
    }
    return f;
}

/* The real function behind a hook, for hooks.c once attached. */
void *ht__attach_real(const char *name)
{
    const hook_t *k = find_hook(name);
    if (k)
        return (void *)k->real;
    uintptr_t canon;
    return real_def(name, NULL, &canon);
}

/* The names to patch: every function this library exports but the public
 * API (ht_*) and ht__attach itself, each with our definition and what the
 * program binds the name to. */
static int collect_hooks(void)
{
    struct dl_find_object fo;
    if (_dl_find_object((void *)collect_hooks, &fo) != 0 || !fo.dlfo_link_map)
        return -1;
    struct link_map *me = fo.dlfo_link_map;
    P.self_lo = (uintptr_t)fo.dlfo_map_start;
    P.self_hi = (uintptr_t)fo.dlfo_map_end;
    void *self = dlopen(me->l_name, RTLD_NOW | RTLD_NOLOAD);
    if (!self)
        return -1;
    dyn_t t = read_dynamic(me->l_ld, me->l_addr);
    const ElfW(Sym) *sym = t.sym;
    const char *str = t.str;
    if (!sym || !str || !t.gnu_hash) {
        dlclose(self);
        return -1;
    }
    const char *libname = NULL;
    dl_iterate_phdr(first_library, &libname);
    void *lib = libname ? dlopen(libname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    uint32_t n = gnu_hash_count(t.gnu_hash);
    for (uint32_t i = 1; i < n && P.nhooks < MAX_HOOKS; i++) {
        const ElfW(Sym) *s = &sym[i];
        const char *name = str + s->st_name;
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF ||
            ELF64_ST_VISIBILITY(s->st_other) != STV_DEFAULT || !strncmp(name, "ht_", 3) ||
            !strcmp(name, "ht__attach"))
            continue;
        void *ours = dlsym(self, name);
        uintptr_t canon;
        void *real = real_def(name, lib, &canon);
        if (!ours || !real || ours == real || find_hook(name))
            continue;           /* the program has no such function */
        hook_t *k = &P.hooks[P.nhooks];
        k->name = name;
        k->hash = name_hash(name);
        k->ours = (uintptr_t)ours;
        k->real = (uintptr_t)real;
        k->canon = canon;
        uint32_t j = k->hash & 255;
        while (P.table[j])
            j = (j + 1) & 255;
        P.table[j] = (uint8_t)(++P.nhooks);
    }
    if (lib)
        dlclose(lib);
    dlclose(self);              /* drops the references RTLD_NOLOAD took */
    return (int)P.nhooks;
}

typedef struct {
    uintptr_t lo, hi;           /* the module's mapped span */
    uintptr_t relro_lo, relro_hi;
    int relro_open;             /* made writable by this pass */
    int relro_busy;             /* still writable: the loader is at work */
    int unsettled;              /* a slot to look at again later */
    uint64_t written;
} module_pass_t;

typedef struct {
    uintptr_t addr;
    int found, write;
} perm_query_t;

static int perm_line(const ht_maps_line_t *l, void *arg)
{
    perm_query_t *q = arg;
    if (q->addr >= l->lo && q->addr < l->hi) {
        q->found = 1;
        q->write = l->write;
        return 1;
    }
    return l->lo > q->addr;
}

static int slot_write(module_pass_t *m, uintptr_t *slot, uintptr_t value)
{
    uintptr_t a = (uintptr_t)slot;
    if (a >= m->relro_lo && a < m->relro_hi && !m->relro_open) {
        if (m->relro_busy)
            return 0;
        perm_query_t q = { m->relro_lo, 0, 0 };
        if (ht__maps_each(perm_line, &q) <= 0 || !q.found || q.write) {
            m->relro_busy = 1;  /* not relocated yet (or not known): later */
            m->unsettled = 1;
            return 0;
        }
        if (ht__sys3(SYS_mprotect, m->relro_lo, m->relro_hi - m->relro_lo, PROT_READ | PROT_WRITE) != 0)
            return 0;
        m->relro_open = 1;
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    m->written++;
    return 1;
}

static void patch_relocs(module_pass_t *m, uintptr_t bias, const ElfW(Rela) *r, size_t bytes,
                         const ElfW(Sym) *sym, const char *str)
{
    for (size_t i = 0; i < bytes / sizeof *r; i++) {
        uint32_t type = (uint32_t)ELF64_R_TYPE(r[i].r_info);
        uint32_t si = (uint32_t)ELF64_R_SYM(r[i].r_info);
        if (si == 0 || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
                        !(type == R_X86_64_64 && r[i].r_addend == 0)))
            continue;
        const hook_t *k = find_hook(str + sym[si].st_name);
        if (!k)
            continue;
        uintptr_t *slot = (uintptr_t *)(bias + r[i].r_offset);
        if ((uintptr_t)slot < m->lo || (uintptr_t)slot + sizeof *slot > m->hi)
            continue;
        uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
        if (P.undo) {
            /* what the slot held, or what its lazy binding would have
             * written (a non-PIE program's canonical entry leads through
             * its own slot, which gets back the real function) */
            if (cur == k->ours)
                slot_write(m, slot, k->real);
            continue;
        }
        /* a canonical PLT entry leads through the program's own slot;
         * pointers to it must keep comparing equal */
        if (cur == k->ours || (k->canon && cur == k->canon))
            continue;
        /* bound to what the program binds the name to, or (lazy binding)
         * still at the module's own PLT stub; else not relocated yet, or
         * bound elsewhere (RTLD_DEEPBIND): looked at again, left alone */
        if (!(cur == k->real || (type == R_X86_64_JUMP_SLOT && cur >= m->lo && cur < m->hi))) {
            m->unsettled = 1;
            continue;
        }
        slot_write(m, slot, k->ours);
    }
}

static int is_loader_or_vdso(const char *name)
{
    const char *base = ht__path_base(name);
    return !strncmp(base, "ld-linux", 8) || !strncmp(base, "linux-vdso", 10) ||
           !strncmp(base, "ld64.so", 7);
}

typedef struct {
    uint64_t written;
    int unsettled;
} pass_t;

static int patch_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    pass_t *pass = arg;
    P.adds = info->dlpi_adds;
    if (info->dlpi_name && is_loader_or_vdso(info->dlpi_name))
        return 0;
    module_pass_t m = { UINTPTR_MAX, 0, 0, 0, 0, 0, 0, 0 };
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD) {
            if (lo < m.lo)
                m.lo = lo;
            if (hi > m.hi)
                m.hi = hi;
        } else if (ph->p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *)lo;
        } else if (ph->p_type == PT_GNU_RELRO) {
            /* as the loader protects it: both ends rounded down */
            m.relro_lo = lo & ~(uintptr_t)4095;
            m.relro_hi = hi & ~(uintptr_t)4095;
        }
    }
    if (!dyn || m.hi <= m.lo || (m.lo < P.self_hi && m.hi > P.self_lo) || other_instance(m.lo))
        return 0;               /* no dynamic section, or this library (or a copy of it) */
    uintptr_t bias = info->dlpi_addr;
    dyn_t t = read_dynamic(dyn, bias);
    if (!t.sym || !t.str)
        return 0;
    if (t.rela)
        patch_relocs(&m, bias, t.rela, t.relasz, t.sym, t.str);
    if (t.jmprel && t.pltrel == DT_RELA)
        patch_relocs(&m, bias, t.jmprel, t.pltsz, t.sym, t.str);
    if (m.relro_open)
        ht__sys3(SYS_mprotect, m.relro_lo, m.relro_hi - m.relro_lo, PROT_READ);
    P.slots += m.written;
    pass->written += m.written;
    pass->unsettled |= m.unsettled;
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;                   /* the count is the same in every entry */
}

/* One pass over every module (the caller holds P.lock); sets how many
 * more passes to make. */
static void patch_all(void)
{
    pass_t pass = { 0, 0 };
    dl_iterate_phdr(patch_module, &pass);
    if (!pass.unsettled)        /* else: the count the caller set */
        P.retries = pass.written ? (P.retries ? P.retries : 1) : 0;
}

/* The control thread, every 20 ms: modules loaded since the last pass,
 * and passes still due. */
void ht__attach_poll(void)
{
    if (!ht__spin_trylock(&P.lock))
        return;
    if (P.undo) {
        ht__spin_unlock(&P.lock);
        return;
    }
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (adds != P.adds)
        P.retries = RETRIES;
    if (P.retries) {
        P.retries--;
        patch_all();
    }
    ht__spin_unlock(&P.lock);
}

/* Called once the agent runs (agent.c): the names, then every module.
 * 0 if some slot now leads to a hook. */
int ht__attach_patch(void)
{
    ht__spin_lock(&P.lock);
    int r = -1;
    if (collect_hooks() > 0) {
        P.retries = RETRIES;
        patch_all();
        r = P.slots > 0 ? 0 : -1;
    }
    ht__spin_unlock(&P.lock);
    return r;
}

/* heaptrail detach (agent.c): every slot that leads to a hook gets the
 * real function back, in every module, and no pass patches again. Passes
 * repeat while one still finds a slot to restore (at most 4: a module a
 * pass found busy being loaded was never patched). Modules dlclose'd
 * since keep nothing to restore. */
void ht__attach_unpatch(void)
{
    ht__spin_lock(&P.lock);
    P.undo = 1;
    P.retries = 0;
    for (int i = 0; i < 4; i++) {
        pass_t pass = { 0, 0 };
        dl_iterate_phdr(patch_module, &pass);
        if (!pass.written)
            break;
    }
    ht__spin_unlock(&P.lock);
}

/* ---- joining again after a detach --------------------------------------
 *
 * A detached agent cannot start again: its tables describe the process as
 * it was, threads may still be inside its hooks, and nothing tells when
 * they have all left. So `heaptrail attach` after a `heaptrail detach`
 * gets a new instance of the agent instead: ht__attach, called in the
 * first instance (the CLI's dlopen of the library's path finds it), makes
 * a copy of the library's file in a memfd and dlopens that. A different
 * file is a different module to the loader, with its own data, all of it
 * as a first start finds it; the copy patches the slots the detach gave
 * back to libc. The first instance keeps the list of its copies: the next
 * attach asks the newest (still running: 1, the CLI says so) and makes
 * another when that one has detached too.
 *
 * What the earlier instances still hold (their live tables: every block
 * they saw, some since freed and reused) must not make the new one's
 * blocks reachable: each instance is told of the ones before it, and its
 * leak check leaves out their modules and mappings with its own
 * (ht__agent_memory). Each copy takes its thread-local variables
 * (about 200 bytes) from the little room glibc keeps for libraries opened
 * late (rtld.optional_static_tls, 512 bytes by default): a few
 * re-attaches, then dlopen refuses and the CLI says to restart.
 *
 * Calls through a hook's address a program copied while an earlier
 * instance was attached (a function pointer taken from its slot) still
 * reach that instance, which passes them to libc unseen. */
#define MAX_INSTANCES 16

typedef int (*spans_fn)(uintptr_t (*out)[2], int max);

static struct {
    spans_fn spans;
    uintptr_t lo, hi;           /* its module's mapped span */
} g_prior[MAX_INSTANCES];       /* in a copy: the instances before it */
static int g_nprior;

static struct {
    int (*attach)(const char *opts);
    spans_fn spans;
} g_copies[MAX_INSTANCES];      /* in the first instance: its copies */
static int g_ncopies;

static int other_instance(uintptr_t a)
{
    for (int i = 0; i < g_nprior; i++)
        if (a >= g_prior[i].lo && a < g_prior[i].hi)
            return 1;
    return 0;
}

/* This instance's module span, then the mappings it made: what another
 * instance's leak check leaves out. Returns the count, -1 if they do not
 * fit in max. */
HT_API int ht__instance_spans(uintptr_t (*out)[2], int max)
{
    struct dl_find_object fo;
    if (max < 1 || _dl_find_object((void *)ht__instance_spans, &fo) != 0)
        return -1;
    out[0][0] = (uintptr_t)fo.dlfo_map_start;
    out[0][1] = (uintptr_t)fo.dlfo_map_end;
    int n = ht__own_mappings(out + 1, max - 1);
    return n < 0 ? -1 : n + 1;
}

/* Told by the first instance, before ht__attach: an instance loaded
 * earlier, by its ht__instance_spans. */
HT_API void ht__note_instance(spans_fn fn)
{
    struct dl_find_object fo;
    if (g_nprior == MAX_INSTANCES || _dl_find_object((void *)fn, &fo) != 0)
        return;
    g_prior[g_nprior].spans = fn;
    g_prior[g_nprior].lo = (uintptr_t)fo.dlfo_map_start;
    g_prior[g_nprior].hi = (uintptr_t)fo.dlfo_map_end;
    g_nprior++;
}

int ht__agent_memory(uintptr_t (*out)[2], int max)
{
    int k = ht__instance_spans(out, max);
    for (int i = 0; i < g_nprior && k >= 0; i++) {
        int n = g_prior[i].spans(out + k, max - k);
        k = n < 0 ? -1 : k + n;
    }
    return k;
}

/* A copy of this library's file in a memfd, opened by the loader under a
 * name no earlier copy had ("/proc/self/fd/N" with `gen` "./" in it: the
 * loader takes a name it knows for the module it loaded). Returns the
 * handle, or NULL: *why 5 the loader refused it, 6 no copy was made. */
static void *load_copy(int gen, int *why)
{
    struct dl_find_object fo;
    *why = 6;
    if (_dl_find_object((void *)load_copy, &fo) != 0 || !fo.dlfo_link_map)
        return NULL;
    /* a filter may kill the process on memfd_create: it never made one */
    if (ht__seccomp_filtered())
        return NULL;
    int in = open(fo.dlfo_link_map->l_name, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return NULL;
    struct stat st;
    int fd = -1;
    if (fstat(in, &st) == 0 && (fd = memfd_create("heaptrail-preload", MFD_CLOEXEC)) >= 0) {
        off_t off = 0;
        while (off < st.st_size && sendfile(fd, in, &off, (size_t)(st.st_size - off)) > 0)
            ;
        if (off != st.st_size) {
            close(fd);
            fd = -1;
        }
    }
    close(in);
    if (fd < 0)
        return NULL;
    char path[96];
    snprintf(path, sizeof path, "/proc/self/fd/%.*s%d", 2 * gen,
             "./././././././././././././././././././././././././././././././.", fd);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    close(fd);                  /* the loader's mapping keeps the copy */
    *why = 5;
    return h;
}

/* ht__attach in a detached instance (agent.c): in the first, the newest
 * copy's answer, or a new copy's; in a copy, 5 (detached). Returns what
 * ht__attach returns; 5 no copy could be loaded (glibc's room for late
 * libraries' thread-local variables used up, or MAX_INSTANCES reached),
 * 6 none could be made (under a seccomp filter, no memfd). */
int ht__attach_again(const char *opts)
{
    if (g_nprior)
        return 5;               /* a copy: the first instance asks the next */
    if (g_ncopies) {
        int r = g_copies[g_ncopies - 1].attach(opts);
        if (r != 5)
            return r;           /* it runs (1), or it started now */
    }
    if (g_ncopies == MAX_INSTANCES - 1)
        return 5;
    int why;
    void *h = load_copy(g_ncopies + 1, &why);
    if (!h)
        return why;
    int (*attach)(const char *) = (int (*)(const char *))dlsym(h, "ht__attach");
    void (*note)(spans_fn) = (void (*)(spans_fn))dlsym(h, "ht__note_instance");
    spans_fn spans = (spans_fn)dlsym(h, "ht__instance_spans");
    if (!attach || !note || !spans)
        return 5;
    note(ht__instance_spans);
    for (int i = 0; i < g_ncopies; i++)
        note(g_copies[i].spans);
    g_copies[g_ncopies].attach = attach;
    g_copies[g_ncopies].spans = spans;
    g_ncopies++;
    return attach(opts);
}
