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
#include <sys/auxv.h>
#include "heaptrail.h"

/* The main program: its link map and program headers (from the auxiliary
 * vector, read once at load time: getauxval is not for signal handlers). */
static const void *g_main_map;
static const ElfW(Phdr) *g_main_phdr;
static int g_main_phnum;

__attribute__((constructor)) static void modules_init(void)
{
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

int ht__module_is_text(const ht_module_t *m, uintptr_t pc)
{
    for (int i = 0; i < m->ntext; i++)
        if (pc >= m->text_lo[i] && pc < m->text_hi[i])
            return 1;
    return 0;
}

/* dlclose changes which code lives where: bump the generation before and
 * after, so that a rule computed while it runs is stale at once. dlopen is
 * deliberately not wrapped: glibc resolves $ORIGIN and RUNPATH from
 * dlopen's caller, so a wrapper would change which library is loaded.
 * It needs no bump either, because the unwinder never caches "no module
 * here" answers. (Modules glibc loads for itself, NSS and iconv, are never
 * unloaded.) */
/* The agent (src/agent) also needs to see dlclose: it records the
 * closing library and its unload time. Weak, so libheaptrail.so itself,
 * which has no agent, links without it. */
HT_INTERNAL void ht__dlclose_event(int after) __attribute__((weak));

HT_API int dlclose(void *handle)
{
    static int (*real)(void *);
    if (!real)
        real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    if (ht__dlclose_event)
        ht__dlclose_event(0);
    ht__code_changed();
    int r = real ? real(handle) : -1;
    ht__code_changed();
    if (ht__dlclose_event)
        ht__dlclose_event(1);
    return r;
}
