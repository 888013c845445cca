/* fixwriter.h -- a miniature tracker for analyzer tests, compiled into
 * test programs (C and C++). fix_alloc() captures the caller's real stack
 * with ht_capture, fix_free() releases it, fix_snapshot() aggregates live
 * allocations per stack like the agent does and prints them, and
 * fix_modules() records the loaded modules (path, build-id, bias, span,
 * load/unload times) from dl_iterate_phdr. The output is the fixture text
 * that tests/analyze/fixture.c turns into an ht_trace_t, so the analyzer
 * is tested on real addresses of real binaries with known truths
 * ("truth" lines: the function and line each site was allocated from).
 *
 * Stacks are cut at main()'s caller in libc, so nothing depends on how libc's startup
 * code is symbolized on the machine at hand.
 *
 * Format (one record per line, numbers decimal unless 0x):
 *   module START END BIAS LOAD_NS UNLOAD_NS BUILDID|- PATH
 *   stack ID N ADDR...                 (innermost first)
 *   snapshot SEQ REASON TIME_NS
 *   site STACK KIND LIVE_BLOCKS LIVE_BYTES TOTAL_BLOCKS TOTAL_BYTES PEAK_BYTES
 *        [LOST_BLOCKS LOST_BYTES ILOST_BLOCKS ILOST_BYTES [PLOST_BLOCKS PLOST_BYTES]]
 *        (reachability, possibly lost last; 0 if absent; KIND as trace.h's
 *        HT_KIND_*: 0 heap, 1 mmap, 2 custom, which the snapshot's totals leave out)
 *   reach STATUS THREADS [SCANNED_BYTES TIME_NS [FLAGS]]   (after a snapshot line: its
 *        REACH header, STATUS as trace.h's HT_REACH_*; FLAGS REACH's trailing flags,
 *        wire.h's HT_REACH_F_*: 1, the check judged custom allocator blocks too, whose
 *        sites' lost fields are then verdicts; absent, an older agent's; tests add it)
 *   possible                            (after a snapshot line: its check counted
 *        possibly lost blocks, has_possible; tests add it)
 *   peak PEAK_NS [PEAK_BYTES]           (after a snapshot line: it records what was live
 *        at the process's peak, has_peak, and when; PEAK_BYTES the peak itself, else
 *        the most its sites hold; tests add it)
 *   atpeak STACK KIND BLOCKS BYTES      (after that site's line: what it held at the
 *        peak; sites without one held nothing then; tests add it)
 *   truth STACK FUNCTION LINE           (the innermost frame's truth)
 *   drops OVERFLOW UNKNOWN_FREES WRITE_ERRORS OTHER   (tests add it)
 * A site whose STACK names no stack line stands for HT_STACK_ID_OVERFLOW.
 */
#ifndef HT_TEST_FIXWRITER_H
#define HT_TEST_FIXWRITER_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "heaptrail.h"

#define FIX_MAXF 64
/* snapshot reasons, as in src/format/trace.h */
#define HT_SNAP_EXIT_ 0
#define HT_SNAP_INTERVAL_ 2
#define FIX_MAXA 4096
#define FIX_MAXS 256
#define FIX_MAXM 64

struct fix_stack { int n; void *f[FIX_MAXF]; uint64_t live_blocks, live_bytes, total_blocks, total_bytes, peak; };
struct fix_alloc { int stack; uint64_t size; int live; };
struct fix_module { char path[512]; uint64_t start, end, bias, load, unload; char bid[129]; int present; };

static struct fix_stack fix_stacks[FIX_MAXS];
static int fix_nstacks;
static struct fix_alloc fix_allocs[FIX_MAXA];
static int fix_nallocs;
static struct fix_module fix_mods[FIX_MAXM];
static int fix_nmods;
static uint64_t fix_clock_ns = 1000000;    /* logical: +1 ms per event */
static int fix_seq;
static FILE *fix_out;

static void fix_init(FILE *out) { fix_out = out; }

/* Is pc in libc (where the stack above main starts)? */
static int fix_in_libc(void *pc)
{
    Dl_info di;
    const char *b;
    if (!dladdr((char *)pc - 1, &di) || !di.dli_fname)
        return 0;
    b = strrchr(di.dli_fname, '/');
    return !strncmp(b ? b + 1 : di.dli_fname, "libc.so", 7);
}

/* Records an allocation of `size` bytes from the caller; returns its id.
 * `fn` and `line` are the truth: where the call was written. */
__attribute__((noinline)) static int fix_alloc_at(uint64_t size, const char *fn, int line)
{
    void *f[FIX_MAXF];
    int n = ht_capture(1, FIX_MAXF, f, NULL);
    for (int i = 0; i < n; i++)
        if (fix_in_libc(f[i])) {   /* main's caller: cut here */
            n = i;
            break;
        }
    int s;
    for (s = 0; s < fix_nstacks; s++)
        if (fix_stacks[s].n == n && !memcmp(fix_stacks[s].f, f, (size_t)n * sizeof(void *)))
            break;
    if (s == fix_nstacks) {
        if (fix_nstacks == FIX_MAXS)
            abort();
        fix_nstacks++;
        fix_stacks[s].n = n;
        memcpy(fix_stacks[s].f, f, (size_t)n * sizeof(void *));
        fprintf(fix_out, "stack %d %d", s + 1, n);
        for (int i = 0; i < n; i++)
            fprintf(fix_out, " 0x%llx", (unsigned long long)(uintptr_t)f[i]);
        fprintf(fix_out, "\ntruth %d %s %d\n", s + 1, fn, line);
    }
    struct fix_stack *st = &fix_stacks[s];
    st->live_blocks++, st->live_bytes += size, st->total_blocks++, st->total_bytes += size;
    if (st->live_bytes > st->peak)
        st->peak = st->live_bytes;
    if (fix_nallocs == FIX_MAXA)
        abort();
    fix_allocs[fix_nallocs].stack = s;
    fix_allocs[fix_nallocs].size = size;
    fix_allocs[fix_nallocs].live = 1;
    fix_clock_ns += 1000000;
    return fix_nallocs++;
}
#define fix_alloc(size) fix_alloc_at((size), __func__, __LINE__)

__attribute__((unused)) static void fix_free(int id)
{
    struct fix_alloc *a = &fix_allocs[id];
    if (!a->live)
        return;
    a->live = 0;
    fix_stacks[a->stack].live_blocks--;
    fix_stacks[a->stack].live_bytes -= a->size;
    fix_clock_ns += 1000000;
}

static int fix_phdr(struct dl_phdr_info *info, size_t sz, void *arg)
{
    char path[512];
    const char *name = info->dlpi_name;
    if (!name[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        path[n > 0 ? n : 0] = 0;
        name = path;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    char bid[129] = "-";
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *e = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= e) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p + sizeof *nh, "GNU", 4)) {
                    for (unsigned k = 0; k < nh->n_descsz && k < 64; k++)
                        sprintf(bid + 2 * k, "%02x", (unsigned char)desc[k]);
                }
                p = desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    for (int m = 0; m < fix_nmods; m++)
        if (fix_mods[m].unload == 0 && fix_mods[m].bias == info->dlpi_addr &&
            !strcmp(fix_mods[m].path, name)) {
            fix_mods[m].present = 1;
            return 0;
        }
    if (fix_nmods == FIX_MAXM)
        abort();
    struct fix_module *m = &fix_mods[fix_nmods++];
    snprintf(m->path, sizeof m->path, "%s", name);
    m->start = lo, m->end = hi, m->bias = info->dlpi_addr, m->load = fix_clock_ns, m->unload = 0;
    snprintf(m->bid, sizeof m->bid, "%s", bid);
    m->present = 1;
    return 0;
}

/* Notes modules loaded or unloaded since the last call. */
static void fix_modules(void)
{
    for (int m = 0; m < fix_nmods; m++)
        fix_mods[m].present = 0;
    dl_iterate_phdr(fix_phdr, NULL);
    for (int m = 0; m < fix_nmods; m++)
        if (!fix_mods[m].present && !fix_mods[m].unload)
            fix_mods[m].unload = fix_clock_ns;
    fix_clock_ns += 1000000;
}

static void fix_snapshot(int reason)
{
    fix_modules();
    fprintf(fix_out, "snapshot %d %d %llu\n", fix_seq++, reason, (unsigned long long)fix_clock_ns);
    for (int s = 0; s < fix_nstacks; s++) {
        struct fix_stack *st = &fix_stacks[s];
        fprintf(fix_out, "site %d 0 %llu %llu %llu %llu %llu\n", s + 1,
                (unsigned long long)st->live_blocks, (unsigned long long)st->live_bytes,
                (unsigned long long)st->total_blocks, (unsigned long long)st->total_bytes,
                (unsigned long long)st->peak);
    }
    fix_clock_ns += 1000000;
}

static void fix_finish(void)
{
    for (int m = 0; m < fix_nmods; m++)
        fprintf(fix_out, "module 0x%llx 0x%llx 0x%llx %llu %llu %s %s\n",
                (unsigned long long)fix_mods[m].start, (unsigned long long)fix_mods[m].end,
                (unsigned long long)fix_mods[m].bias, (unsigned long long)fix_mods[m].load,
                (unsigned long long)fix_mods[m].unload, fix_mods[m].bid, fix_mods[m].path);
}
#endif
