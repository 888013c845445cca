/* modules.c -- which loaded module holds an address, its executable
 * segments and its unwind tables; and the code generation that
 * dlopen/dlclose bump so cached unwind rules never outlive their code.
 *
 * ht__module_find() is async-signal-safe: glibc's _dl_find_object() is
 * lock-free (about 3 ns, where dl_iterate_phdr takes the loader lock), and
 * the program headers are read from the module's first mapped page. */
#include "cfi.h"
#include "unwind.h"
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include "heaptrail.h"

/* The main program: its link map and program headers (from the auxiliary
 * vector, read once at load time: getauxval is not for signal handlers). */
static const void *g_main_map;
static const ElfW(Phdr) *g_main_phdr;
static int g_main_phnum;

static void sections_fork_child(void);

__attribute__((constructor)) static void modules_init(void)
{
    pthread_atfork(NULL, NULL, sections_fork_child);
    g_main_phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    g_main_phnum = (int)getauxval(AT_PHNUM);
    struct dl_find_object fo;
    if (g_main_phdr && _dl_find_object((void *)g_main_phdr, &fo) == 0)
        g_main_map = fo.dlfo_link_map;
    if (!g_main_map) {
        /* the headers are outside the span (non-PIE): the first link map
         * entry is the main program */
        extern struct r_debug _r_debug;
        g_main_map = _r_debug.r_map;
    }
}

int ht__module_phdrs(const struct link_map *map, uintptr_t start, uintptr_t end, const ElfW(Phdr) **out)
{
    /* The main program's come from the auxiliary vector: for a non-PIE
     * executable _dl_find_object's span starts at its text segment, not at
     * the ELF header (node: headers at 0x400000, span from 0xb72000). A
     * library's ELF header sits at its load bias (its first PT_LOAD has
     * address 0), else at the start of its span. */
    if (map && map == g_main_map && g_main_phdr) {
        *out = g_main_phdr;
        return g_main_phnum;
    }
    uintptr_t at[2] = { map ? (uintptr_t)map->l_addr : start, start };
    for (int k = 0; k < 2; k++) {
        const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)at[k];
        if (at[k] < start || at[k] + sizeof *eh > end ||
            __builtin_memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
            eh->e_phentsize != sizeof(ElfW(Phdr)) ||
            eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)) > 4096)
            continue;
        *out = (const ElfW(Phdr) *)(at[k] + eh->e_phoff);
        return eh->e_phnum;
    }
    *out = NULL;
    return 0;
}

int ht__module_find(uintptr_t pc, ht_module_t *m)
{
    struct dl_find_object fo;
    if (_dl_find_object((void *)pc, &fo) != 0)
        return -1;
    __builtin_memset(m, 0, sizeof *m);
    m->start = (uintptr_t)fo.dlfo_map_start;
    m->end = (uintptr_t)fo.dlfo_map_end;
    m->bias = fo.dlfo_link_map ? (uintptr_t)fo.dlfo_link_map->l_addr : 0;
    m->eh_hdr = (uintptr_t)fo.dlfo_eh_frame;

    const ElfW(Phdr) *ph = NULL;
    int phnum = ht__module_phdrs(fo.dlfo_link_map, m->start, m->end, &ph);
    int have_phdrs = ph != NULL;
    for (int i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        uintptr_t lo = m->bias + ph[i].p_vaddr;
        uintptr_t hi = lo + ph[i].p_memsz;
        if ((ph[i].p_flags & PF_X) && m->ntext < 4) {
            m->text_lo[m->ntext] = lo;
            m->text_hi[m->ntext] = hi;
            m->ntext++;
        }
        if ((ph[i].p_flags & PF_R) && m->eh_hdr >= lo && m->eh_hdr < hi) {
            m->rd_lo = lo;
            m->rd_hi = hi;
        }
    }
    if (!have_phdrs) {
        /* unusual layout: trust the whole span */
        m->ntext = 1;
        m->text_lo[0] = m->start;
        m->text_hi[0] = m->end;
        m->rd_lo = m->start;
        m->rd_hi = m->end;
    }
    if (m->eh_hdr && (m->eh_hdr < m->rd_lo || m->eh_hdr >= m->rd_hi))
        m->eh_hdr = 0;
    return 0;
}

int ht__module_text_seg(const ht_module_t *m, uintptr_t pc)
{
    for (int i = 0; i < m->ntext; i++)
        if (pc >= m->text_lo[i] && pc < m->text_hi[i])
            return i;
    return -1;
}

/* ---- module memory against a concurrent dlclose --------------------------
 * A walk reads a module's program headers and .eh_frame (and the agent its
 * build-id note) at addresses _dl_find_object gave it, without any lock:
 * another thread's dlclose could unmap the module in the middle of the
 * read. (The stack is live, so a return address can point into a closing
 * library only if the program is about to crash anyway, but a
 * frame-pointer step also validates garbage values, and any of them may.)
 * So such reads happen inside a read section, and our dlclose wrapper
 * announces itself, waits until no section is open, and only then calls
 * the real dlclose. A section that would open while a dlclose runs waits
 * for it to end -- rule-cache misses only, since cached rules stay valid
 * until the dlclose has returned -- but at most CLOSE_WAIT_NS: the real
 * dlclose runs the library's destructors, which may wait for a lock the
 * waiting thread's caller holds. After that the section is refused and
 * its reader treats the address as unknown code (the walk ends with an
 * "unwinding stopped" frame). Both sides announce themselves first
 * (g_readers, g_closing) and then read the other's word, with
 * sequentially consistent operations, so at least one sees the other.
 * Never waited for, nor waiting: the closing thread's own sections (it
 * allocates inside the real dlclose; they cannot overlap its own
 * unmapping, and glibc serialises dlcloses), and a thread's sections
 * nested in one it already holds (a signal handler's). */
#define CLOSE_WAIT_NS 10000000ull

static unsigned g_readers;          /* open sections, all threads */
static unsigned g_closing;          /* dlcloses announced, not yet done */
static HT_TLS int t_closing;        /* this thread is inside the real dlclose */
static HT_TLS int t_reading;        /* sections this thread holds in g_readers */

enum { SECTION_UNCOUNTED = 1, SECTION_COUNTED = 2 };

int ht__module_enter(void)
{
    if (t_closing)
        return SECTION_UNCOUNTED;
    uint64_t until = 0;
    for (unsigned spins = 0;; spins++) {
        __atomic_fetch_add(&g_readers, 1, __ATOMIC_SEQ_CST);
        if (ht_likely(__atomic_load_n(&g_closing, __ATOMIC_SEQ_CST) == 0) || t_reading) {
            t_reading++;
            return SECTION_COUNTED;
        }
        __atomic_fetch_sub(&g_readers, 1, __ATOMIC_RELEASE);
        uint64_t now = ht__mono_ns();
        if (!until)
            until = now + CLOSE_WAIT_NS;
        else if (now >= until)
            return 0;
        ht__backoff(spins);
    }
}

void ht__module_leave(int token)
{
    if (token == SECTION_COUNTED) {
        t_reading--;
        __atomic_fetch_sub(&g_readers, 1, __ATOMIC_RELEASE);
    }
}

/* For tests: how many sections are open, and dlcloses announced. */
HT_INTERNAL void ht__module_sections(unsigned *readers, unsigned *closing);
void ht__module_sections(unsigned *readers, unsigned *closing)
{
    *readers = __atomic_load_n(&g_readers, __ATOMIC_SEQ_CST);
    *closing = __atomic_load_n(&g_closing, __ATOMIC_SEQ_CST);
}

/* Announces a dlclose and waits for the open sections to close (not for
 * this thread's own: a dlclose from a signal handler that interrupted a
 * walk on this thread would wait for itself). */
static void closing_begin(void)
{
    __atomic_fetch_add(&g_closing, 1, __ATOMIC_SEQ_CST);
    for (unsigned spins = 0; __atomic_load_n(&g_readers, __ATOMIC_SEQ_CST) > (unsigned)t_reading;
         spins++)
        ht__backoff(spins);
}

static void closing_end(void)
{
    __atomic_fetch_sub(&g_closing, 1, __ATOMIC_SEQ_CST);
}

/* A fork child has one thread, the one that forked: the sections and
 * dlcloses of the others stay behind (counted, they would make every
 * dlclose in the child wait forever and every rule miss wait 10 ms). */
static void sections_fork_child(void)
{
    __atomic_store_n(&g_readers, (unsigned)t_reading, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_closing, (unsigned)t_closing, __ATOMIC_SEQ_CST);
}

/* dlclose changes which code lives where: bump the generation once the
 * real dlclose has returned, so no rule for the old code is used again.
 * (While it runs, rules cached before still hold: no thread has live
 * frames in a library being closed, and misses wait for the end, above.)
 * dlopen is deliberately not wrapped: glibc resolves $ORIGIN and RUNPATH
 * from dlopen's caller, so a wrapper would change which library is loaded.
 * It needs no bump either, because the unwinder never caches "no module
 * here" answers. (Modules glibc loads for itself, NSS and iconv, are never
 * unloaded.) */
/* The agent (src/agent) also needs to see dlclose: it records the
 * closing library and its unload time. Weak, so libheaptrail.so itself,
 * which has no agent, links without it. */
HT_INTERNAL void ht__dlclose_event(int after) __attribute__((weak));

/* The agent's (src/agent/attach.c); libheaptrail.so has none. */
HT_INTERNAL extern int ht__attached __attribute__((weak));
HT_INTERNAL void *ht__attach_real(const char *name) __attribute__((weak));

/* The definition a wrapper (an allocator hook, dlclose, __register_frame)
 * passes its call on to: the next after this library; in the agent loaded
 * late by heaptrail attach (outside the global scope: libgcc's
 * __register_frame is not after it, and the program may bind a name to a
 * definition of its own), what the program binds the name to. Never the
 * global definition otherwise: that may be this wrapper, or another copy of
 * it (libheaptrail.so under the preloaded agent) whose next is this one. */
void *ht__next_def(const char *name)
{
    if (&ht__attached && ht_load_relaxed(&ht__attached) && ht__attach_real)
        return ht__attach_real(name);
    return dlsym(RTLD_NEXT, name);
}

HT_API int dlclose(void *handle)
{
    static int (*real)(void *);
    if (!real)
        real = (int (*)(void *))ht__next_def("dlclose");
    if (ht__dlclose_event)
        ht__dlclose_event(0);
    closing_begin();
    t_closing++;
    int r = real ? real(handle) : -1;
    t_closing--;
    ht__code_changed();
    closing_end();
    if (ht__dlclose_event)
        ht__dlclose_event(1);
    return r;
}
