/* symbench.c -- symbolization speed: N distinct addresses spread evenly
 * over the code of a shared library (libc.so.6 by default, with its debug
 * info from libc6-dbg when installed), symbolized cold (module opened,
 * DWARF read, nothing cached) and then again from the cache.
 * Usage: symbench [N] [LIBRARY-SONAME]
 * Prints one result line per pass; bench/analyzer/run.sh collects them. */

#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include "analyze/sym.h"

struct target { const char *want; char path[512]; uint64_t lo, hi; uint8_t bid[64]; uint32_t bidlen; };

static int find(struct dl_phdr_info *info, size_t sz, void *arg)
{
    struct target *t = arg;
    if (!strstr(info->dlpi_name, t->want))
        return 0;
    snprintf(t->path, sizeof t->path, "%s", info->dlpi_name);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && !t->hi) {
            t->lo = ph->p_vaddr;
            t->hi = ph->p_vaddr + ph->p_memsz;
        }
        if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *e = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= e) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_descsz <= 64) {
                    memcpy(t->bid, desc, nh->n_descsz);
                    t->bidlen = nh->n_descsz;
                }
                p = desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    struct target t = { .want = argc > 2 ? argv[2] : "libc.so.6" };
    if (argc > 2 && !dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "symbench: %s\n", dlerror());
        return 1;
    }
    dl_iterate_phdr(find, &t);
    if (!t.hi) {
        fprintf(stderr, "symbench: %s is not loaded\n", t.want);
        return 1;
    }
    ht_sym_t *s = ht__sym_new(NULL, stderr);
    uint32_t h = ht__sym_module(s, t.path, t.bid, t.bidlen);
    uint64_t step = (t.hi - t.lo) / n;
    if (!step)
        step = 1;
    for (int pass = 0; pass < 2; pass++) {
        size_t named = 0, lined = 0, inl = 0, frames = 0;
        double t0 = ht__now();
        for (size_t i = 0; i < n; i++) {
            const ht_sloc_t *l = ht__sym_lookup(s, h, t.lo + 1 + i * step, 0);
            frames += l->n;
            if (l->n && l->f[0].function)
                named++;
            if (l->n && l->f[0].line)
                lined++;
            if (l->n > 1)
                inl++;
        }
        double dt = ht__now() - t0;
        printf("%s %s: %zu distinct addresses in %.3f s (%.2f us each): %zu named, %zu with file:line, "
               "%zu with inline frames, %zu source frames\n",
               pass ? "cached" : "cold", t.path, n, dt, dt * 1e6 / (double)n, named, lined, inl, frames);
    }
    ht__sym_free(s);
    return 0;
}
