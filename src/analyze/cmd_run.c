/* cmd_run.c -- `heaptrail run` (start a program under the agent, wait,
 * print the leak summary) and `heaptrail snapshot [--leaks] PID` (ask a
 * traced process for a snapshot through its control socket; with --leaks
 * a leak check, summarized like the end of a run).
 *
 * Nothing read from a trace reaches a shell: the program is started with
 * execvp on the user's own argv, and trace strings are printed with
 * control characters replaced. */
#include "commands.h"
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>
#include "cmd.h"
#include "model.h"
#include "suppress.h"
#include "sym.h"
#include "../core/util.h"
#include "../format/trace.h"
#include "heaptrail.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define TOP_STACKS 5
#define TOP_FRAMES 12

static int run_usage(void)
{
    fprintf(stderr, "usage: heaptrail run [-o FILE] [--interval S] [--follow-exec] [--suppressions FILE]\n"
                    "                     [--error-exitcode N] [--sample BYTES] -- PROG ARGS...\n"
                    "  -o FILE          trace file (default heaptrail.<prog>.<pid>.ht)\n"
                    "  --interval S     also write a snapshot every S seconds\n"
                    "  --follow-exec    trace programs it executes too (default: only this one)\n"
                    "  --sample BYTES   sampling mode: a stack for about one allocation in every\n"
                    "                   BYTES allocated (e.g. 512K); heap figures are estimates and\n"
                    "                   no leak check runs (default: every allocation, exact)\n"
                    "  --suppressions FILE  leaks to leave out of the summary: `leak:PATTERN` lines\n"
                    "                   (LeakSanitizer's format) matching a function, file or module,\n"
                    "                   or Valgrind memcheck's `{ ... }` blocks\n"
                    "  --error-exitcode N   exit with N if the program exits with 0 but its leak\n"
                    "                   check at exit finds unreachable blocks not suppressed\n");
    return 2;
}

/* 1234567 -> "1,234,567" */
static const char *commas(uint64_t v, char *buf)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

/* Prints a string from a trace with control characters neutralised. */
void ht__put_clean(FILE *f, const char *s)
{
    for (; s && *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static const char *base_name(const char *p)
{
    const char *b = p;
    for (; p && *p; p++)
        if (*p == '/')
            b = p + 1;
    return b;
}

/* The agent library: $HEAPTRAIL_PRELOAD, else next to this binary. */
int ht__find_preload(char *out, size_t cap)
{
    const char *env = getenv("HEAPTRAIL_PRELOAD");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return access(out, R_OK);
    }
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    const char *cands[] = { "%s/libheaptrail-preload.so", "%s/../lib/heaptrail/libheaptrail-preload.so" };
    for (size_t i = 0; i < 2; i++) {
        if (snprintf(out, cap, cands[i], self) >= (int)cap)
            continue;
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

void ht__sanitize_name(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        dst[n++] = ok ? c : '_';
    }
    if (!n)
        dst[n++] = 'p';
    dst[n] = 0;
}

/* A stack the summary may list, with what its snapshot's check found
 * unreachable (definitely + indirectly lost) and possibly lost in it: 0
 * for blocks the check did not judge (mappings; custom blocks unless it
 * judged them too). */
typedef struct { const ht_tsite_t *s; uint64_t unreach, plost; } leak_t;

static int by_bytes(const void *a, const void *b)
{
    const ht_tsite_t *x = ((const leak_t *)a)->s, *y = ((const leak_t *)b)->s;
    if (x->live_bytes != y->live_bytes)
        return x->live_bytes > y->live_bytes ? -1 : 1;
    return x->live_blocks > y->live_blocks ? -1 : x->live_blocks < y->live_blocks;
}

/* With reachability: by unreachable bytes (definitely + indirectly
 * lost) first, then by possibly lost bytes, then as by_bytes. */
static int by_lost(const void *a, const void *b)
{
    const leak_t *x = a, *y = b;
    if (x->unreach != y->unreach)
        return x->unreach > y->unreach ? -1 : 1;
    if (x->plost != y->plost)
        return x->plost > y->plost ? -1 : 1;
    return by_bytes(a, b);
}

/* Function names for the frames the summary prints: at most TOP_STACKS *
 * TOP_FRAMES, found in one pass over each module's symbol table. (libdw's
 * dwfl_module_addrname loads and sorts the whole table first: node's
 * 110,000 symbols took ~100 ms at the exit of every run, a third of a
 * short node program's own run time. Its search for separate debug info
 * also loaded libdebuginfod -- libcurl, gnutls, kerberos: 15 ms -- and,
 * where DEBUGINFOD_URLS is set, asked a server.)
 *
 * The table: the module's file's .symtab; if it has none, the one in the
 * debug file for its build-id under /usr/lib/debug (where Debian's -dbgsym
 * packages put them); else the file's .dynsym. A file whose build-id
 * differs from the trace's names nothing: a rebuilt file would name the
 * wrong functions. The symbol chosen for an address is the analyzer's
 * (sym.c): the highest function symbol at or below it, a global one first
 * among equals, then the larger; none if that symbol's size ends before
 * the address. C++ names are demangled. */
typedef struct want_s {
    uint32_t node;
    uint64_t pc;                /* link-time address looked up (return address - 1) */
    int found;
    GElf_Sym best;
    char *name;                 /* malloc'd */
} want_t;

static int by_pc(const void *a, const void *b)
{
    const want_t *x = *(want_t *const *)a, *y = *(want_t *const *)b;
    return x->pc < y->pc ? -1 : x->pc > y->pc;
}

/* Whether symbol c names an address better than b (both at or below it). */
static int better(const GElf_Sym *c, const GElf_Sym *b)
{
    if (c->st_value != b->st_value)
        return c->st_value > b->st_value;
    return ht__sym_tie(GELF_ST_BIND(c->st_info), c->st_size, GELF_ST_BIND(b->st_info), b->st_size) < 0;
}

static Elf_Scn *section_of_type(Elf *e, Elf64_Word type)
{
    for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == type && sh.sh_entsize)
            return scn;
    }
    return NULL;
}

/* Names w[0..n) (sorted by pc) from the symbol table scn of e. */
static void name_from(Elf *e, Elf_Scn *scn, want_t **w, size_t n)
{
    GElf_Shdr sh;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!gelf_getshdr(scn, &sh) || !d)
        return;
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 1; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym))
            break;
        if (sym.st_name == 0 || !ht__sym_is_function(&sym))
            continue;
        size_t lo = 0, hi = n;          /* the first address at or above it */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (w[mid]->pc < sym.st_value)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* the best value so far grows with the address: once it is above
         * this symbol's, it is for every later address too */
        for (size_t k = lo; k < n; k++) {
            if (w[k]->found && w[k]->best.st_value > sym.st_value)
                break;
            if (!w[k]->found || better(&sym, &w[k]->best)) {
                w[k]->found = 1;
                w[k]->best = sym;
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        const GElf_Sym *b = &w[k]->best;
        if (!w[k]->found || (b->st_size && w[k]->pc >= b->st_value + b->st_size))
            continue;
        const char *raw = elf_strptr(e, sh.sh_link, b->st_name);
        if (raw && *raw) {
            char *d = ht__demangle(raw);
            w[k]->name = d ? d : strdup(raw);
        }
    }
}

/* Opens path as ELF; checks its build-id against m's. Returns NULL when it
 * cannot be read or is another build. */
static Elf *open_elf(const char *path, const ht_tmodule_t *m, int *fd)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return NULL;
    Elf *e = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
    const void *bid;
    ssize_t n = e ? dwelf_elf_gnu_build_id(e, &bid) : -1;
    if (e && elf_kind(e) == ELF_K_ELF &&
        (!m->build_id_len || (n == (ssize_t)m->build_id_len && !memcmp(bid, m->build_id, (size_t)n))))
        return e;
    if (e)
        elf_end(e);
    close(*fd);
    return NULL;
}

/* Names the wants w[0..n) of module m. */
static void name_module(const ht_tmodule_t *m, want_t **w, size_t n)
{
    int fd, dfd = -1;
    if (!m->path || m->path[0] != '/')
        return;
    Elf *e = open_elf(m->path, m, &fd), *de = NULL;
    if (!e)
        return;
    qsort(w, n, sizeof *w, by_pc);
    Elf_Scn *tab = section_of_type(e, SHT_SYMTAB);
    if (tab) {
        name_from(e, tab, w, n);
    } else {
        if (m->build_id_len >= 2) {
            char *path = ht__build_id_path("/usr/lib/debug", m->build_id, m->build_id_len);
            de = open_elf(path, m, &dfd);
            free(path);
        }
        Elf_Scn *dtab = de ? section_of_type(de, SHT_SYMTAB) : NULL;
        if (dtab)
            name_from(de, dtab, w, n);
        else if ((tab = section_of_type(e, SHT_DYNSYM)) != NULL)
            name_from(e, tab, w, n);
    }
    if (de) {
        elf_end(de);
        close(dfd);
    }
    elf_end(e);
    close(fd);
}

/* Names every want whose node lies in a module (one pass per module). */
static void name_wants(const ht_trace_t *t, want_t *w, size_t n)
{
    want_t **v = malloc((n ? n : 1) * sizeof *v);
    int *done = calloc(t->nmodules + 1, sizeof *done);
    if (!v || !done || elf_version(EV_CURRENT) == EV_NONE) {
        free(v);
        free(done);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t mi = t->nodes[w[i].node].module;
        if (mi >= t->nmodules || done[mi])
            continue;
        done[mi] = 1;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (t->nodes[w[j].node].module == mi)
                v[k++] = &w[j];
        name_module(&t->modules[mi], v, k);
    }
    free(v);
    free(done);
}

static void print_frame(FILE *out, const ht_trace_t *t, const want_t *w)
{
    const ht_tnode_t *nd = &t->nodes[w->node];
    fprintf(out, "      ");
    if (nd->module < t->nmodules) {
        const ht_tmodule_t *m = &t->modules[nd->module];
        if (w->name) {
            ht__put_clean(out, w->name);
            fputs(" (", out);
        }
        ht__put_clean(out, base_name(m->path));
        fprintf(out, "+0x%llx%s\n", (unsigned long long)(nd->addr - m->bias), w->name ? ")" : "");
    } else if (HT_FRAME_JIT_SERIAL(nd->addr)) {
        /* JIT code: the latest registration with this frame's serial */
        const ht_tjit_t *j = NULL;
        for (size_t i = t->njit; i-- > 0 && !j;)
            if (t->jit[i].serial == HT_FRAME_JIT_SERIAL(nd->addr))
                j = &t->jit[i];
        uint64_t a = HT_FRAME_ADDRESS(nd->addr);
        if (j && a >= j->start && a - j->start <= j->size) {
            ht__put_clean(out, j->name);
            fprintf(out, "+0x%llx (JIT code)\n", (unsigned long long)(a - j->start));
        } else {
            fprintf(out, "0x%llx (JIT code)\n", (unsigned long long)a);
        }
    } else {
        fprintf(out, "0x%llx\n", (unsigned long long)nd->addr);
    }
}

/* The program execvp would run for `name`, into found; 0 if found. */
static int find_program(const char *name, char *found, size_t cap)
{
    if (strchr(name, '/')) {
        snprintf(found, cap, "%s", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;; p++) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        struct stat st;
        if (n == 0)
            snprintf(found, cap, "%s", name);
        else
            snprintf(found, cap, "%.*s/%s", (int)n, p, name);
        if (stat(found, &st) == 0 && S_ISREG(st.st_mode) && access(found, X_OK) == 0)
            return 0;
        if (!e)
            return -1;
        p = e;
    }
}

/* Why the loader cannot have preloaded the agent into the program at
 * `file`, or NULL: a set-id bit or file capabilities that change this
 * user's rights (secure execution: the loader ignores LD_PRELOAD), or no
 * program interpreter (statically linked: no loader at all). */
static const char *untraceable(const char *file)
{
    struct stat st;
    if (stat(file, &st) != 0)
        return NULL;
    if ((st.st_mode & S_ISUID) && st.st_uid != geteuid())
        return "is set-user-ID: the loader ignores LD_PRELOAD in it (secure execution); "
               "trace a copy without the bit";
    if ((st.st_mode & S_ISGID) && st.st_gid != getegid())
        return "is set-group-ID: the loader ignores LD_PRELOAD in it (secure execution); "
               "trace a copy without the bit";
    if (getxattr(file, "security.capability", NULL, 0) > 0)
        return "has file capabilities: the loader ignores LD_PRELOAD in it (secure execution); "
               "trace a copy without them";
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    const char *why = NULL;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t n;
    if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &n) == 0) {
        int interp = 0;
        for (size_t i = 0; i < n && !interp; i++) {
            GElf_Phdr ph;
            interp = gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP;
        }
        if (!interp)
            why = "is statically linked: no loader starts it, so nothing can be preloaded into it";
    }
    elf_end(e);
    close(fd);
    return why;
}

/* Why a trace of a program that exited (HT_SUMMARY_EXITED) ends without
 * its exit snapshot: the agent takes it in exit() and _exit(), which a
 * raw exit_group bypasses (Go's runtime never calls libc's exit). */
#define NO_EXIT_CALL "the program ended without passing through exit() or _exit() (a raw exit_group system " \
                     "call, as Go's runtime makes), so the agent took no snapshot at its end"

/* One group's verdicts in a summary (the heap's; custom allocator
 * blocks' when the check judged them): definitely lost, indirectly lost
 * and possibly lost blocks, and the live blocks they were judged among
 * (less all three: still reachable). */
typedef struct {
    uint64_t lost, lost_n, lost_sites, ilost, ilost_n, ilost_sites, plost, plost_n, plost_sites;
    uint64_t live, live_n;
} verdicts_t;

static void verdicts_add(verdicts_t *v, const ht_tsite_t *x)
{
    v->lost += x->lost_bytes;
    v->lost_n += x->lost_blocks;
    v->ilost += x->ilost_bytes;
    v->ilost_n += x->ilost_blocks;
    v->lost_sites += x->lost_blocks > 0;
    v->ilost_sites += x->ilost_blocks > 0;
    v->plost += x->plost_bytes;
    v->plost_n += x->plost_blocks;
    v->plost_sites += x->plost_blocks > 0;
}

/* "1,000 bytes in 3 blocks from 2 sites (definitely lost; plus 96 bytes
 * in 3 blocks reachable only through them)", or "none"; then "; possibly
 * lost: ... (reached only through pointers into the middle of blocks)"
 * when there are such blocks; then "; still reachable: ...". A group
 * with indirectly lost blocks and no definitely lost one lost them
 * through the other group's lost blocks (a heap block only a lost pool
 * object points to, a pool object only a lost heap block points to):
 * "96 bytes in 3 blocks from 1 site (indirectly lost: reachable only
 * through lost `other`)". */
static void print_verdicts(FILE *out, const verdicts_t *v, const char *other)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    if (!v->lost_n && v->ilost_n) {
        fprintf(out, "%s bytes in %s %s from %s %s (indirectly lost: reachable only through lost %s)",
                commas(v->ilost, b1), commas(v->ilost_n, b2), ht__plural(v->ilost_n, "block", "blocks"),
                commas(v->ilost_sites, b3), ht__plural(v->ilost_sites, "site", "sites"), other);
    } else if (v->lost_n || v->ilost_n) {
        fprintf(out, "%s bytes in %s %s from %s %s (definitely lost", commas(v->lost, b1), commas(v->lost_n, b2),
                ht__plural(v->lost_n, "block", "blocks"), commas(v->lost_sites, b3),
                ht__plural(v->lost_sites, "site", "sites"));
        if (v->ilost_n)
            fprintf(out, "; plus %s bytes in %s %s reachable only through them", commas(v->ilost, b4),
                    commas(v->ilost_n, b5), ht__plural(v->ilost_n, "block", "blocks"));
        fputc(')', out);
    } else {
        fputs("none", out);
    }
    if (v->plost_n)
        fprintf(out, "; possibly lost: %s bytes in %s %s from %s %s (reached only through pointers "
                     "into the middle of blocks)",
                commas(v->plost, b4), commas(v->plost_n, b5), ht__plural(v->plost_n, "block", "blocks"),
                commas(v->plost_sites, b3), ht__plural(v->plost_sites, "site", "sites"));
    uint64_t rn = v->live_n - v->lost_n - v->ilost_n - v->plost_n;
    fprintf(out, "; still reachable: %s bytes in %s %s", commas(v->live - v->lost - v->ilost - v->plost, b6),
            commas(rn, b1), ht__plural(rn, "block", "blocks"));
}

/* The summary of one snapshot (cmd.h): `heaptrail run`'s at the end of a
 * run (the last snapshot, what is live there leaked, "at exit") and
 * `heaptrail snapshot --leaks`'s of the leak check the agent just wrote
 * (the snapshot the agent numbered `seq`, "now"). A totals line, the
 * reachability line (the heap's verdicts, then custom allocator blocks'
 * when the check judged them), notes, then the top stacks (at exit:
 * every live site; now: only those with unreachable blocks), by
 * unreachable bytes when there was a check. Cheap: one pass over
 * the snapshot's sites, frames named only for the few stacks shown
 * (with suppressions, every live site's frames are symbolized first:
 * suppress.h). */
static int summary(const char *path, int when, int64_t seq, ht_supp_t *supp, int *unreach, FILE *out)
{
    ht_trace_t t;
    if (unreach)
        *unreach = -1;
    char err[512];
    struct stat st;
    int now = when == HT_SUMMARY_NOW;
    int exited = when == HT_SUMMARY_EXITED;     /* no signal ended it */
    if (!now && lstat(path, &st) != 0 && errno == ENOENT) {
        fprintf(out, "heaptrail: no trace: ");
        ht__put_clean(out, path);
        fprintf(out, " was not written (a statically linked or setuid program ignores the agent; "
                     "or the directory is not writable)\n");
        return -1;
    }
    /* the last snapshot's sites only, unless one is asked for by number
     * (the writer's, known only once read) */
    const ht_read_opts_t last = { .nkeep = 1, .keep = { -1, 0 } };
    if (ht_trace_read_opts(path, seq < 0 ? &last : NULL, &t, err, sizeof err) != 0) {
        fprintf(out, now ? "heaptrail: cannot read the trace: " : "heaptrail: no trace: ");
        ht__put_clean(out, err);
        fputc('\n', out);
        return -1;
    }
    const ht_tsnapshot_t *s = NULL;
    if (seq < 0)
        s = t.nsnaps ? &t.snaps[t.nsnaps - 1] : NULL;
    for (size_t i = t.nsnaps; seq >= 0 && i-- > 0 && !s;)
        if (t.snaps[i].file_seq == seq)
            s = &t.snaps[i];
    if (!s && now) {
        fprintf(out, "heaptrail: snapshot %lld is not in ", (long long)seq);
        ht__put_clean(out, path);
        if (t.truncated)
            fprintf(out, " (damaged at byte %llu)", (unsigned long long)t.truncated_at);
        fputc('\n', out);
        ht_trace_free(&t);
        return -1;
    }
    if (!s) {
        fprintf(out, "heaptrail: trace ");
        ht__put_clean(out, path);
        if (exited && !t.truncated && !t.complete)
            fprintf(out, " holds no snapshot: " NO_EXIT_CALL "; no figures (`heaptrail run --interval S` "
                         "takes a snapshot every S seconds)");
        else
            fprintf(out, " holds no snapshot%s", t.truncated ? " (damaged)" : t.complete ? "" : " (cut short)");
        if (t.drops.write_errors)
            fprintf(out, "; %llu trace bytes could not be written (disk full?)",
                    (unsigned long long)t.drops.write_errors);
        fputc('\n', out);
        ht_trace_free(&t);
        return -1;
    }
    /* suppressed sites: matched with the full symbolizer (functions,
     * inlined ones, files), which only a suppression needs */
    int32_t *sup = NULL;
    ht_session_t ses;
    ht_opts_t sopts = { 0 };
    if (supp && supp->n) {
        /* offline, as `heaptrail report` without --debuginfod: libdwfl's
         * search would ask DEBUGINFOD_URLS' servers (the program, which
         * inherited it, has ended or is another process) */
        unsetenv("DEBUGINFOD_URLS");
        ht__session_init(&ses, &sopts, NULL, NULL);
        ht__session_add(&ses, path, &t);
        sup = ht__xmalloc((s->nsites ? s->nsites : 1) * sizeof *sup);
        for (size_t i = 0; i < supp->n; i++) {
            supp->sites[i] = supp->blocks[i] = supp->bytes[i] = 0;
            supp->custom_sites[i] = supp->custom_blocks[i] = supp->custom_bytes[i] = 0;
        }
        for (size_t i = 0; i < s->nsites; i++) {
            const ht_tsite_t *x = &s->sites[i];
            sup[i] = x->live_blocks && x->stack != 0xffffffffu ? ht__supp_match(supp, &ses, 0, x->stack, x->kind) : -1;
        }
        ht__session_free(&ses);
    }
    uint64_t sup_bytes = 0, sup_n = 0, sup_sites = 0, sup_lost = 0, sup_lost_n = 0;
    uint64_t sup_custom = 0, sup_custom_n = 0, sup_custom_sites = 0, sup_custom_lost = 0, sup_custom_lost_n = 0;
    /* the stacks to show: at exit every live site, now only those with
     * unreachable blocks (the point of a leak check) */
    leak_t *leaks = calloc(s->nsites ? s->nsites : 1, sizeof *leaks);
    size_t nleaks = 0;
    /* reachability (s->reach == HT_REACH_DONE): the heap's verdicts over
     * the live heap, and mmap regions (never checked); custom allocator
     * blocks' apart, when the check judged them too (s->reach_custom) */
    verdicts_t hv = { 0 }, cv = { 0 };
    uint64_t heap_sites = 0;
    int custom_judged = ht__site_judged(s, HT_KIND_CUSTOM);
    /* anonymous mappings, and custom allocator blocks: inside heap blocks
     * or mappings counted already, so apart from everything else */
    uint64_t map = 0, map_n = 0, map_sites = 0, custom_sites = 0;
    for (size_t i = 0; leaks && i < s->nsites; i++) {
        const ht_tsite_t *x = &s->sites[i];
        if (x->live_blocks == 0)
            continue;
        /* its lost_* are verdicts (0 where nothing was judged) */
        int judged = ht__site_judged(s, x->kind);
        if (sup && sup[i] >= 0)
            ht__supp_count(supp, sup[i], x->kind == HT_KIND_CUSTOM, x->live_blocks, x->live_bytes);
        if (sup && sup[i] >= 0 && x->kind == HT_KIND_CUSTOM) {
            sup_custom += x->live_bytes;
            sup_custom_n += x->live_blocks;
            sup_custom_sites++;
            if (judged) {
                sup_custom_lost += x->lost_bytes + x->ilost_bytes;
                sup_custom_lost_n += x->lost_blocks + x->ilost_blocks;
            }
            continue;
        }
        if (sup && sup[i] >= 0) {
            sup_bytes += x->live_bytes;
            sup_n += x->live_blocks;
            sup_sites++;
            sup_lost += x->lost_bytes + x->ilost_bytes;
            sup_lost_n += x->lost_blocks + x->ilost_blocks;
            continue;
        }
        if (!now || (judged && (x->lost_blocks || x->ilost_blocks || x->plost_blocks)))
            leaks[nleaks++] = (leak_t){ x, judged ? x->lost_bytes + x->ilost_bytes : 0,
                                        judged ? x->plost_bytes : 0 };
        if (x->kind == HT_KIND_CUSTOM) {
            cv.live += x->live_bytes;
            cv.live_n += x->live_blocks;
            custom_sites++;
            if (judged)
                verdicts_add(&cv, x);
            continue;
        }
        verdicts_add(&hv, x);
        if (x->kind == HT_KIND_HEAP) {
            hv.live += x->live_bytes;
            hv.live_n += x->live_blocks;
            heap_sites++;
        } else {
            map += x->live_bytes;
            map_n += x->live_blocks;
            map_sites++;
        }
    }
    /* heap blocks first, anonymous mappings apart: a JVM's or V8's
     * reserved gigabytes would drown the heap (java -version: 7,987 MB of
     * mappings beside 7.5 MB of heap); then custom allocator blocks, which
     * lie inside either (added to them, they would count twice) */
    char b1[32], b2[32], b3[32];
    const char *about = t.sample ? "about " : "";
    if (now)
        fprintf(out, "heaptrail: in use now: %s%s bytes in %s%s %s from %s allocation %s", about, commas(hv.live, b1),
                about, commas(hv.live_n, b2), ht__plural(hv.live_n, "block", "blocks"), commas(heap_sites, b3),
                ht__plural(heap_sites, "site", "sites"));
    else        /* sampled: estimates, and no leak check to call them leaked */
        fprintf(out, "heaptrail: %s%s bytes %s in %s%s %s from %s allocation %s (unique stacks)", about,
                commas(hv.live, b1), t.sample ? "in use at exit" : "leaked", about, commas(hv.live_n, b2),
                ht__plural(hv.live_n, "block", "blocks"), commas(heap_sites, b3),
                ht__plural(heap_sites, "site", "sites"));
    if (map_sites)
        fprintf(out, "; anonymous mappings %s: %s bytes in %s %s from %s %s", now ? "live" : "never unmapped",
                commas(map, b1), commas(map_n, b2), map_n == 1 ? "region" : "regions",
                commas(map_sites, b3), map_sites == 1 ? "site" : "sites");
    if (custom_sites)
        fprintf(out, "; custom allocator blocks %s: %s bytes in %s %s from %s %s", now ? "live" : "never freed",
                commas(cv.live, b1), commas(cv.live_n, b2), ht__plural(cv.live_n, "block", "blocks"),
                commas(custom_sites, b3), ht__plural(custom_sites, "site", "sites"));
    /* the process's peak (heaptrack's "peak heap memory consumption"),
     * when the agent timed it */
    if (s->has_peak && s->peak_ns)
        fprintf(out, "; peak%s: %s bytes (heap and mappings) at %.3f s", now ? " so far" : "",
                commas(s->peak_bytes, b1), (double)s->peak_ns / 1e9);
    if (!now) {
        fputs("; trace: ", out);
        ht__put_clean(out, path);
    }
    fputc('\n', out);
    if (t.sample)
        fprintf(out, "heaptrail: sampling mode: heap figures are estimates from about one allocation in every "
                     "%s bytes; sites allocating less may not appear; no leak check (it needs every block)\n",
                commas(t.sample, b1));
    char fw[640];
    int warn;
    if (ht__foreign_text(&t, &warn, fw, sizeof fw))
        fprintf(out, "heaptrail: %s%s\n", warn ? "warning: " : "", fw);
    int reach = s->reach == HT_REACH_DONE;
    if (reach) {
        fprintf(out, "heaptrail: unreachable %s: ", now ? "now" : "at exit");
        print_verdicts(out, &hv, "custom allocator blocks");
        /* custom allocator blocks judged as blocks of their own: the same
         * words, apart */
        if (custom_judged && custom_sites) {
            fputs("; custom allocator blocks unreachable: ", out);
            print_verdicts(out, &cv, "heap blocks");
        }
        fputc('\n', out);
        char unseen[256];
        if (ht__reach_unseen(s, unseen, sizeof unseen))
            fprintf(out, "heaptrail: %s\n", unseen);
        if (unreach)
            *unreach = hv.lost_n || hv.ilost_n || cv.lost_n || cv.ilost_n;
    } else if (s->reach != HT_REACH_NONE) {
        char why[160];
        fprintf(out, "heaptrail: reachability not computed: %s\n", ht__reach_why(s, why, sizeof why));
    } else if (now) {
        fprintf(out, "heaptrail: reachability not computed: the program's heaptrail agent predates "
                     "leak checks (it wrote a plain snapshot)\n");
    }
    if (sup_sites || sup_custom_sites) {
        fprintf(out, "heaptrail: suppressed: %s bytes in %s %s from %s %s", commas(sup_bytes, b1),
                commas(sup_n, b2), ht__plural(sup_n, "block", "blocks"), commas(sup_sites, b3),
                ht__plural(sup_sites, "site", "sites"));
        if (reach)
            fprintf(out, " (unreachable: %s bytes in %s %s)", commas(sup_lost, b1), commas(sup_lost_n, b2),
                    ht__plural(sup_lost_n, "block", "blocks"));
        if (sup_custom_sites)
            fprintf(out, "; custom allocator blocks: %s bytes in %s %s from %s %s", commas(sup_custom, b1),
                    commas(sup_custom_n, b2), ht__plural(sup_custom_n, "block", "blocks"),
                    commas(sup_custom_sites, b3), ht__plural(sup_custom_sites, "site", "sites"));
        if (sup_custom_sites && custom_judged)
            fprintf(out, " (unreachable: %s bytes in %s %s)", commas(sup_custom_lost, b1),
                    commas(sup_custom_lost_n, b2), ht__plural(sup_custom_lost_n, "block", "blocks"));
        fputs(", by\n", out);
        for (size_t i = 0; i < supp->n; i++) {
            if (!supp->sites[i] && !supp->custom_sites[i])
                continue;
            fputs("  ", out);
            ht__supp_put_name(out, supp, i);
            fprintf(out, "  %s %s, %s bytes in %s %s", commas(supp->sites[i], b1),
                    ht__plural(supp->sites[i], "site", "sites"), commas(supp->bytes[i], b2),
                    commas(supp->blocks[i], b3),
                    ht__plural(supp->blocks[i], "block", "blocks"));
            if (supp->custom_sites[i])
                fprintf(out, "; custom allocator blocks: %s %s, %s bytes in %s %s",
                        commas(supp->custom_sites[i], b1), ht__plural(supp->custom_sites[i], "site", "sites"),
                        commas(supp->custom_bytes[i], b2), commas(supp->custom_blocks[i], b3),
                        ht__plural(supp->custom_blocks[i], "block", "blocks"));
            fputc('\n', out);
        }
    }
    if (now) {
        /* the process is running: its trace is not complete, and the
         * writer may be amid a later block */
        if (s->seq != s->file_seq)
            fprintf(out, "heaptrail: `heaptrail report --snapshot %u` shows it (earlier snapshots were "
                         "not written)\n", s->seq);
    } else if (exited && !t.complete && !t.truncated)
        fprintf(out, "heaptrail: " NO_EXIT_CALL "; figures from its last snapshot, number %u (%s), taken at %.3f s\n",
                s->seq, ht__snap_reason(s->reason), (double)s->time_ns / 1e9);
    else if (!t.complete || t.truncated)
        fprintf(out, "heaptrail: the trace was cut short%s; figures from its last snapshot\n",
                t.truncated ? " (damaged tail)" : " (the program was killed?)");
    else if (s->reason == HT_SNAP_CRASH)
        fprintf(out, "heaptrail: the program crashed; figures from the crash snapshot\n");
    else if (s->reason == HT_SNAP_SIGNAL)
        fprintf(out, "heaptrail: the program was ended by a signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT or SIGPIPE); "
                     "figures from the snapshot taken as it came\n");
    else if (s->reason == HT_SNAP_SANDBOX)
        fprintf(out, "heaptrail: the program sandboxed itself with seccomp at %.3f s; figures from just "
                     "before (inside the sandbox heaptrail writes nothing: a system call the filter refuses "
                     "could kill the program)\n",
                (double)s->time_ns / 1e9);
    else if (s->reason == HT_SNAP_EXEC)
        fprintf(out, "heaptrail: the program replaced itself with exec; figures from just before "
                     "(with --follow-exec the new program writes its own trace)\n");
    if (t.drops.overflow_allocs || t.drops.unknown_frees || t.drops.write_errors || t.drops.other)
        fprintf(out, "heaptrail: not recorded: %llu allocations without stack (database full), "
                     "%llu frees of %s, %llu trace bytes lost, %llu other\n",
                (unsigned long long)t.drops.overflow_allocs, (unsigned long long)t.drops.unknown_frees,
                t.attached ? "blocks made before the attach" : "unknown pointers",
                (unsigned long long)t.drops.write_errors, (unsigned long long)t.drops.other);
    if (t.drops.table_full)
        fprintf(out, "heaptrail: %llu allocations were not recorded at all: the tracker could not grow its "
                     "tables (out of memory, or of address space under `ulimit -v`), so the figures above miss them\n",
                (unsigned long long)t.drops.table_full);
    if (leaks)
        qsort(leaks, nleaks, sizeof *leaks, reach ? by_lost : by_bytes);
    /* the frames to print, named all at once */
    want_t w[TOP_STACKS * TOP_FRAMES];
    size_t nw = 0;
    for (size_t i = 0; i < nleaks && i < TOP_STACKS; i++) {
        uint32_t id = leaks[i].s->stack;
        for (int k = 0; id != 0 && id < t.nnodes && k < TOP_FRAMES; k++, id = t.nodes[id].parent) {
            const ht_tnode_t *nd = &t.nodes[id];
            uint64_t bias = nd->module < t.nmodules ? t.modules[nd->module].bias : 0;
            w[nw++] = (want_t){ .node = id, .pc = nd->addr - 1 - bias };
        }
    }
    name_wants(&t, w, nw);
    for (size_t i = 0, at = 0; i < nleaks && i < TOP_STACKS; i++) {
        const ht_tsite_t *x = leaks[i].s;
        int region = x->kind == HT_KIND_MMAP;
        fprintf(out, "  %s bytes in %s %s (%s", commas(x->live_bytes, b1), commas(x->live_blocks, b2),
                region ? ht__plural(x->live_blocks, "region", "regions")
                       : ht__plural(x->live_blocks, "block", "blocks"),
                ht__kind_name(x->kind));
        /* mappings are never checked, custom blocks when judged */
        if (ht__site_judged(s, x->kind)) {
            if (x->lost_blocks)
                fprintf(out, "; definitely lost: %s bytes in %s %s", commas(x->lost_bytes, b1),
                        commas(x->lost_blocks, b2), ht__plural(x->lost_blocks, "block", "blocks"));
            if (x->ilost_blocks)
                fprintf(out, "%s indirectly lost: %s bytes in %s %s", x->lost_blocks ? "," : ";",
                        commas(x->ilost_bytes, b1), commas(x->ilost_blocks, b2),
                        ht__plural(x->ilost_blocks, "block", "blocks"));
            if (x->plost_blocks)
                fprintf(out, "%s possibly lost: %s bytes in %s %s", x->lost_blocks || x->ilost_blocks ? "," : ";",
                        commas(x->plost_bytes, b1), commas(x->plost_blocks, b2),
                        ht__plural(x->plost_blocks, "block", "blocks"));
            if (!x->lost_blocks && !x->ilost_blocks && !x->plost_blocks)
                fputs("; still reachable", out);
        }
        fprintf(out, ")%s\n", x->stack == 0xffffffffu ? ": stack not recorded (database full)" : ":");
        uint32_t id = x->stack;
        for (int k = 0; id != 0 && id < t.nnodes && k < TOP_FRAMES; k++, id = t.nodes[id].parent)
            print_frame(out, &t, &w[at++]);
        if (id != 0 && id < t.nnodes)
            fprintf(out, "      ...\n");
    }
    for (size_t i = 0; i < nw; i++)
        free(w[i].name);
    free(leaks);
    free(sup);
    ht_trace_free(&t);
    return 0;
}

/* The summary goes out in one write: stderr is unbuffered, and the ~70
 * lines of a summary are ~1,400 fprintf and fputc calls, each a write(2)
 * of its own (strace, sqlite3's workload: 1,356). Written to a memory
 * stream first, then to out; straight to out if that stream cannot be
 * had or fails. */
int ht__run_summary(const char *path, int when, int64_t seq, ht_supp_t *supp, int *unreach, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return summary(path, when, seq, supp, unreach, out);
    int r = summary(path, when, seq, supp, unreach, mem);
    if (fclose(mem) == 0)
        fwrite(text, 1, len, out);
    else                        /* the stream ran out of memory: not lost */
        r = summary(path, when, seq, supp, unreach, out);
    free(text);
    fflush(out);
    return r;
}

/* Other traces written during the run next to the main one: forked
 * children's, and with --follow-exec executed programs'. Found by name
 * pattern, among the files that were not there before the run (a trace
 * is never overwritten) and were modified since it started (a concurrent
 * run in the same directory would be listed too). */
typedef struct {
    dev_t dev;
    ino_t ino;
} fileid_t;

typedef struct {
    char dir[PATH_MAX];
    fileid_t *before;           /* traces in dir before the run */
    size_t nbefore;
} traces_t;

static int trace_name(const char *name)
{
    size_t len = strlen(name);
    return len >= 14 && strncmp(name, "heaptrail.", 10) == 0 && strcmp(name + len - 3, ".ht") == 0;
}

/* Notes the traces in the directory that will hold `path`. */
static void traces_before(traces_t *tr, const char *path)
{
    snprintf(tr->dir, sizeof tr->dir, "%s", path);
    char *slash = strrchr(tr->dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(tr->dir, sizeof tr->dir, ".");
    tr->before = NULL;
    tr->nbefore = 0;
    DIR *d = opendir(tr->dir);
    if (!d)
        return;
    size_t cap = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL) {
        if (!trace_name(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (tr->nbefore == cap) {
            cap = cap ? 2 * cap : 64;
            fileid_t *v = realloc(tr->before, cap * sizeof *v);
            if (!v)
                break;
            tr->before = v;
        }
        tr->before[tr->nbefore++] = (fileid_t){ st.st_dev, st.st_ino };
    }
    closedir(d);
}

/* Whether a trace's default name, heaptrail.PROG.PID[.K].ht, carries pid
 * (PROG may hold dots and digits: the pid is the last number or, with a
 * suffix K, the one before). */
static int name_has_pid(const char *name, long pid)
{
    char num[32];
    snprintf(num, sizeof num, ".%ld.", pid);
    size_t len = strlen(name), nl = strlen(num);
    if (len > nl + 2 && strcmp(name + len - 3, ".ht") == 0 && strncmp(name + len - 2 - nl, num, nl) == 0)
        return 1;               /* ...PID.ht */
    const char *k = name + len - 3;
    while (k > name && k[-1] >= '0' && k[-1] <= '9')
        k--;
    return k < name + len - 3 && k > name && k[-1] == '.' && (size_t)(k - name) >= nl &&
           strncmp(k - nl, num, nl) == 0;  /* ...PID.K.ht */
}

/* After the run: the traces written next to the main one by the run's
 * processes (files that were not there before -- a trace is never
 * overwritten -- and modified since the start; a concurrent run in the
 * same directory would be listed too). `last` receives the newest of the
 * traced process's own other traces (pid in the name), the one it wrote
 * after replacing itself with exec (with --follow-exec) or after an exec
 * that failed; empty if none. */
typedef struct {
    int n;                      /* traces other than the main one */
    char shown[6][256];         /* the first six: five to list besides the summarized one */
    int own;                    /* of them, the traced process's own */
    char last[PATH_MAX + 256];
} others_t;

/* Keeps name among the first six in version order (heaptrail.sh.120.ht
 * before heaptrail.sh.1001.ht: pids in the order they were handed out,
 * until they wrap), not in the directory's order. */
static void keep_shown(others_t *o, const char *name)
{
    int cap = (int)(sizeof o->shown / sizeof o->shown[0]), n = o->n < cap ? o->n : cap, i = n;
    while (i > 0 && strverscmp(name, o->shown[i - 1]) < 0)
        i--;
    if (i == cap)
        return;
    memmove(o->shown[i + 1], o->shown[i], (size_t)(n - i - (n == cap)) * sizeof o->shown[0]);
    snprintf(o->shown[i], sizeof o->shown[i], "%s", name);
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void scan_other_traces(traces_t *tr, const char *path, long pid, const struct timespec *start,
                              others_t *o)
{
    const char *slash = strrchr(path, '/');
    const char *main_base = slash ? slash + 1 : path;
    struct timespec newest = { 0, 0 };
    memset(o, 0, sizeof *o);
    DIR *d = opendir(tr->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!trace_name(e->d_name) || strcmp(e->d_name, main_base) == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (ts_before(&st.st_mtim, start))
            continue;
        size_t k = 0;
        while (k < tr->nbefore && !(tr->before[k].dev == st.st_dev && tr->before[k].ino == st.st_ino))
            k++;
        if (k < tr->nbefore)
            continue;
        keep_shown(o, e->d_name);
        o->n++;
        if (name_has_pid(e->d_name, pid)) {
            o->own++;
            if (ts_before(&newest, &st.st_mtim)) {
                newest = st.st_mtim;
                if (strcmp(tr->dir, ".") == 0)
                    snprintf(o->last, sizeof o->last, "%s", e->d_name);
                else
                    snprintf(o->last, sizeof o->last, "%s/%s", tr->dir, e->d_name);
            }
        }
    }
    closedir(d);
    free(tr->before);
    tr->before = NULL;
}

/* Lists the other traces but `summarized` (a path), at most five by name.
 * among: whether `summarized` is one of them (o->last, after an exec):
 * then the count is one less wherever readdir put it (it was subtracted
 * only when among the first five names read: one too many otherwise). */
static void list_other_traces(const others_t *o, const char *summarized, int among)
{
    const char *slash = strrchr(summarized, '/');
    const char *skip = slash ? slash + 1 : summarized;
    int n = o->n - (among ? 1 : 0), shown = 0;
    if (n <= 0)
        return;
    fprintf(stderr, "heaptrail: %d more trace%s from processes it started:", n, n > 1 ? "s" : "");
    for (int i = 0; i < o->n && i < (int)(sizeof o->shown / sizeof o->shown[0]) && shown < 5; i++) {
        if (among && strcmp(o->shown[i], skip) == 0)
            continue;
        fputc(' ', stderr);
        ht__put_clean(stderr, o->shown[i]);
        shown++;
    }
    fprintf(stderr, "%s\n", n > shown ? " ..." : "");
}

/* The program heaptrail run waits for, for forward_signal. */
static volatile sig_atomic_t run_child;

/* A signal handler of heaptrail run's own process, while it waits: a
 * signal that ends a process by default, sent to heaptrail by another
 * process (`kill PID`, `timeout --foreground`, a supervisor that knows
 * only the pid it started), is passed on to the program, which ends as it
 * would have without heaptrail, and the summary still comes (such a
 * signal used to end heaptrail alone: no summary, and the program ran on,
 * orphaned). One the terminal sent (^C, ^\, a hangup: si_code SI_KERNEL)
 * went to the program's process group, the program included, and is not
 * sent again. run_child is 0 once the program is reaped (its pid may be
 * reused). Async-signal-safe. */
static void forward_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int e = errno;
    if (si->si_code != SI_KERNEL && run_child > 0)
        kill((pid_t)run_child, sig);
    errno = e;
}

int ht_cmd_run(int argc, char **argv)
{
    const char *out = NULL, *interval = NULL, *sample = NULL;
    int follow = 0, i = 1, errexit = 0, unreach = -1;
    static ht_supp_t supp;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                return run_usage();
            out = argv[i];
        } else if (!strncmp(a, "-o", 2)) {
            out = a + 2;
        } else if (!strcmp(a, "--interval")) {
            if (++i >= argc)
                return run_usage();
            interval = argv[i];
            char *end;
            double v = strtod(interval, &end);
            if (*end || !(v > 0) || v > 86400) {
                fprintf(stderr, "heaptrail: --interval: '%s' is not a number of seconds\n", interval);
                return 2;
            }
        } else if (!strcmp(a, "--follow-exec")) {
            follow = 1;
        } else if (!strcmp(a, "--sample")) {
            if (++i >= argc)
                return run_usage();
            sample = argv[i];
            if (ht__parse_size(sample, 0) == 0) {
                fprintf(stderr, "heaptrail: --sample: '%s' is not a number of bytes (e.g. 512K)\n", sample);
                return 2;
            }
        } else if (!strcmp(a, "--suppressions")) {
            char err[PATH_MAX + 200];
            if (++i >= argc)
                return run_usage();
            if (ht__supp_load(&supp, argv[i], err, sizeof err) != 0) {
                fprintf(stderr, "heaptrail: ");
                ht__put_clean(stderr, err);
                fputc('\n', stderr);
                return 2;
            }
        } else if (!strcmp(a, "--error-exitcode")) {
            char *end;
            if (++i >= argc)
                return run_usage();
            long v = strtol(argv[i], &end, 10);
            if (*end || end == argv[i] || v < 1 || v > 255) {
                fprintf(stderr, "heaptrail: --error-exitcode: '%s' is not a number from 1 to 255\n", argv[i]);
                return 2;
            }
            errexit = (int)v;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage();
            return 0;
        } else {
            fprintf(stderr, "heaptrail: run: unknown option '%s'\n", a);
            return run_usage();
        }
    }
    if (i >= argc)
        return run_usage();
    if (sample && errexit) {
        fprintf(stderr, "heaptrail: --error-exitcode needs the leak check at exit, which sampling mode "
                        "(--sample) does not run\n");
        return 2;
    }
    char preload[PATH_MAX];
    if (ht__find_preload(preload, sizeof preload) != 0) {
        fprintf(stderr, "heaptrail: cannot find libheaptrail-preload.so next to this program "
                        "(set HEAPTRAIL_PRELOAD)\n");
        return 2;
    }
    struct stat st;
    if (out && lstat(out, &st) == 0) {
        fprintf(stderr, "heaptrail: %s exists; heaptrail never overwrites a file\n", out);
        return 2;
    }
    char prog[80];
    ht__sanitize_name(prog, sizeof prog, base_name(argv[i]));
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        perror("heaptrail: pipe");
        return 2;
    }
    static traces_t traces;
    traces_before(&traces, out ? out : "heaptrail.ht");
    struct timespec start;
    clock_gettime(CLOCK_REALTIME, &start);
    start.tv_sec -= 1;          /* file system timestamps are coarser */
    pid_t pid = fork();
    if (pid < 0) {
        perror("heaptrail: fork");
        return 2;
    }
    if (pid == 0) {
        close(ready[0]);
        char name[PATH_MAX], num[32];
        if (!out)
            snprintf(name, sizeof name, "heaptrail.%s.%d.ht", prog, (int)getpid());
        else
            snprintf(name, sizeof name, "%s", out);
        snprintf(num, sizeof num, "%d", (int)getpid());
        const char *old = getenv("LD_PRELOAD");
        char *pre = malloc(strlen(preload) + (old ? strlen(old) : 0) + 2);
        if (!pre)
            _exit(127);
        sprintf(pre, old && *old ? "%s:%s" : "%s", preload, old);
        setenv("LD_PRELOAD", pre, 1);
        /* absolute: programs it starts with --follow-exec may run
         * elsewhere, yet their traces go next to this one */
        char abs[PATH_MAX * 2];
        if (name[0] != '/' && getcwd(abs, PATH_MAX)) {
            size_t k = strlen(abs);
            snprintf(abs + k, sizeof abs - k, "/%s", name);
            setenv("HEAPTRAIL_OUTPUT", abs, 1);
        } else {
            setenv("HEAPTRAIL_OUTPUT", name, 1);
        }
        setenv("HEAPTRAIL_OUTPUT_PID", num, 1);
        if (interval)
            setenv("HEAPTRAIL_INTERVAL", interval, 1);
        if (follow)
            setenv("HEAPTRAIL_FOLLOW_EXEC", "1", 1);
        else
            unsetenv("HEAPTRAIL_FOLLOW_EXEC");
        if (sample)
            setenv("HEAPTRAIL_SAMPLE", sample, 1);
        else
            unsetenv("HEAPTRAIL_SAMPLE");
        execvp(argv[i], argv + i);
        int e = errno;
        (void)!write(ready[1], &e, sizeof e);
        _exit(127);
    }
    close(ready[1]);
    /* the terminal's ^C and ^\ go to the program; we stay for the summary,
     * and pass on what another process sends us */
    run_child = pid;
    static const int forwarded[] = { SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2 };
    struct sigaction fw, was[HT_ARRAY_SIZE(forwarded)];
    memset(&fw, 0, sizeof fw);
    memset(was, 0, sizeof was);
    fw.sa_sigaction = forward_signal;
    fw.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&fw.sa_mask);
    for (size_t k = 0; k < HT_ARRAY_SIZE(forwarded); k++) {
        /* one we were started with ignored the program ignores too (nohup) */
        if (sigaction(forwarded[k], NULL, &was[k]) == 0 && was[k].sa_handler == SIG_IGN)
            continue;
        sigaction(forwarded[k], &fw, NULL);
    }
    int exec_errno = 0;
    ssize_t got = read(ready[0], &exec_errno, sizeof exec_errno);
    close(ready[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    run_child = 0;
    /* the summary: ^C and ^\ still leave it be; the others end it */
    for (size_t k = 0; k < HT_ARRAY_SIZE(forwarded); k++) {
        if (forwarded[k] == SIGINT || forwarded[k] == SIGQUIT)
            signal(forwarded[k], SIG_IGN);
        else
            sigaction(forwarded[k], &was[k], NULL);
    }
    if (got == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "heaptrail: cannot run %s: %s\n", argv[i], strerror(exec_errno));
        return 127;
    }
    char path[PATH_MAX];
    if (out)
        snprintf(path, sizeof path, "%s", out);
    else
        snprintf(path, sizeof path, "heaptrail.%s.%d.ht", prog, (int)pid);
    others_t others;
    scan_other_traces(&traces, path, (long)pid, &start, &others);
    int summarized_other = 0;   /* the summary is of one of `others` */
    if (others.own && strlen(others.last) < sizeof path) {
        /* the program called exec: its process went on writing into new
         * traces (the image exec started, with --follow-exec, a wrapper
         * script's program, say; or the same image after a failed exec).
         * The last one holds the figures that matter. */
        fprintf(stderr, "heaptrail: the program called exec; figures from the last of its process's %d traces (the first: ",
                others.own + 1);
        ht__put_clean(stderr, path);
        fprintf(stderr, ")\n");
        memcpy(path, others.last, strlen(others.last) + 1);
        summarized_other = 1;
    }
    int when = WIFEXITED(status) ? HT_SUMMARY_EXITED : HT_SUMMARY_AT_EXIT;
    if (ht__run_summary(path, when, -1, &supp, &unreach, stderr) != 0 && access(path, F_OK) != 0) {
        char file[PATH_MAX];
        const char *why = find_program(argv[i], file, sizeof file) == 0 ? untraceable(file) : NULL;
        if (why) {
            fprintf(stderr, "heaptrail: ");
            ht__put_clean(stderr, file);
            fprintf(stderr, " %s\n", why);
        }
    }
    list_other_traces(&others, path, summarized_other);
    ht__supp_free(&supp);
    if (errexit && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        /* the program succeeded: its leaks decide */
        if (unreach > 0) {
            fprintf(stderr, "heaptrail: exit status %d: unreachable blocks at exit (--error-exitcode)\n", errexit);
            fprintf(stderr, "heaptrail: to accept them as known leaks: heaptrail report ");
            ht__put_clean(stderr, path);
            fprintf(stderr, " --format suppressions >>FILE, then --suppressions FILE\n");
            return errexit;
        }
        if (unreach < 0)
            fprintf(stderr, "heaptrail: --error-exitcode: no leak check at exit (see above); the program's "
                            "exit status 0 stands\n");
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* A connection to the agent of process `pid`, or -1. */
int ht__connect_agent(long pid)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "heaptrail.%ld", pid);
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (connect(fd, (struct sockaddr *)&a, al) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The pid of `pid`'s only child, or -1 (none, several, or unknown). */
static long only_child(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *end;
    long c = strtol(buf, &end, 10);
    while (*end == ' ' || *end == '\n')
        end++;
    return c > 0 && *end == 0 ? c : -1;
}

static int snapshot_usage(FILE *f)
{
    fprintf(f, "usage: heaptrail snapshot [--leaks [--suppressions FILE]] PID\n"
               "  ask a traced process (PID, or the `heaptrail run` that started it) for a\n"
               "  snapshot now; it keeps running\n"
               "  --leaks    a leak check: the snapshot also says which live heap blocks are\n"
               "             unreachable now (the program's running threads are paused for the\n"
               "             scan), and a summary with their stacks follows\n"
               "  --suppressions FILE  leave the stacks its `leak:PATTERN` lines (or Valgrind\n"
               "             blocks) match out of that summary (as `heaptrail run --suppressions`)\n");
    return f == stdout ? 0 : 2;
}

/* Reads the agent's one-line reply into buf (NUL-terminated, the newline
 * dropped), waiting at most timeout_ms in all. Returns its length (0: no
 * answer); *timed_out says whether the time ran out (else the connection
 * closed or failed). */
size_t ht__read_reply(int fd, char *buf, size_t cap, int timeout_ms, int *timed_out)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t got = 0;
    *timed_out = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left = timeout_ms - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (got >= cap - 1)
            break;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int rc = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (rc < 0 && errno == EINTR)
            continue;
        *timed_out = rc == 0;
        if (rc != 1)
            break;
        ssize_t k = read(fd, buf + got, cap - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
        if (memchr(buf, '\n', got))
            break;
    }
    buf[got] = 0;
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = 0;
    return strlen(buf);
}

/* Whether the peer of a connected unix socket runs as this user (or we
 * are root): the agent's own rule for its clients, mirrored, so another
 * user's process listening under a traced process's name cannot make us
 * read and summarize a file of its choosing. */
static int peer_trusted(int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
           (cr.uid == geteuid() || geteuid() == 0);
}

/* "ok SEQ PATH" split in place: SEQ a decimal number, PATH the rest of the
 * line (not empty). Returns 0, or -1 when the reply is anything else. */
static int parse_ok(char *reply, uint64_t *seq, char **path)
{
    if (strncmp(reply, "ok ", 3) != 0 || reply[3] < '0' || reply[3] > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(reply + 3, &end, 10);
    if (errno || *end != ' ' || !end[1])
        return -1;
    *seq = v;
    *path = end + 1;
    return 0;
}

/* A connection to the agent of process *pid, or (*pid being `heaptrail
 * run` itself) of its only child, whose pid *pid then becomes; -1 after
 * saying why not. Nobody listening is tried again for a second while the
 * process lives: the agent's control thread closes its socket while it is
 * paused (the program changing its rights, or counting its threads: a
 * Python fork) and a new thread opens it again. */
static int connect_traced(long *pid)
{
    for (int tries = 0;; tries++) {
        int fd = ht__connect_agent(*pid);
        if (fd >= 0)
            return fd;
        long child = only_child(*pid);
        if (child > 0 && (fd = ht__connect_agent(child)) >= 0) {
            *pid = child;
            return fd;
        }
        if (kill((pid_t)*pid, 0) != 0 && errno == ESRCH) {
            fprintf(stderr, "heaptrail: no process %ld (it has exited?)\n", *pid);
            return -1;
        }
        if (tries == 20) {
            fprintf(stderr, "heaptrail: process %ld is not traced by heaptrail (no control socket; "
                            "`heaptrail attach %ld` joins it)\n", *pid, *pid);
            return -1;
        }
        struct timespec nap = { 0, 50 * 1000 * 1000 };
        nanosleep(&nap, NULL);
    }
}

/* Says why the agent's reply (got bytes) is not "ok SEQ PATH". */
static void say_bad_reply(long pid, const char *reply, size_t got, int timed_out, int timeout_ms)
{
    fprintf(stderr, "heaptrail: process %ld: ", pid);
    if (!got && timed_out) {
        fprintf(stderr, "no answer within %d s", timeout_ms / 1000);
    } else if (!got) {
        fputs("no answer", stderr);
    } else if (!strncmp(reply, "error ", 6)) {
        ht__put_clean(stderr, reply + 6);
    } else {
        fputs("unexpected answer: ", stderr);
        ht__put_clean(stderr, reply);
    }
    fputc('\n', stderr);
}

/* Sends req to the agent of process *pid (connect_traced: *pid may
 * become its child's) and reads its answer into reply (cap bytes; *got
 * read, *timed_out if the wait ran out). `trusted`: the socket must be
 * ours or root's, where the answer names a file this command then reads.
 * Returns 0, or 1 after saying why not. */
static int ask_agent(long *pid, const char *req, int trusted, int timeout_ms, char *reply, size_t cap,
                     size_t *got, int *timed_out)
{
    int fd = connect_traced(pid);
    if (fd < 0)
        return 1;
    if (trusted && !peer_trusted(fd)) {
        fprintf(stderr, "heaptrail: process %ld: the control socket belongs to another user\n", *pid);
        close(fd);
        return 1;
    }
    size_t rl = strlen(req);
    if (send(fd, req, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
        fprintf(stderr, "heaptrail: process %ld: %s\n", *pid, strerror(errno));
        close(fd);
        return 1;
    }
    *got = ht__read_reply(fd, reply, cap, timeout_ms, timed_out);
    close(fd);
    return 0;
}

int ht_cmd_snapshot(int argc, char **argv)
{
    int leaks = 0;
    const char *pid_arg = NULL;
    static ht_supp_t supp;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--leaks")) {
            leaks = 1;
        } else if (!strcmp(argv[i], "--suppressions")) {
            char err[PATH_MAX + 200];
            if (++i >= argc)
                return snapshot_usage(stderr);
            if (ht__supp_load(&supp, argv[i], err, sizeof err) != 0) {
                fprintf(stderr, "heaptrail: ");
                ht__put_clean(stderr, err);
                fputc('\n', stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return snapshot_usage(stdout);
        } else if (argv[i][0] == '-' || pid_arg) {
            return snapshot_usage(stderr);
        } else {
            pid_arg = argv[i];
        }
    }
    if (!pid_arg)
        return snapshot_usage(stderr);
    if (supp.n && !leaks) {
        fprintf(stderr, "heaptrail: snapshot: --suppressions is for the summary of --leaks\n");
        return 2;
    }
    char *end;
    long pid = strtol(pid_arg, &end, 10);
    if (*end || pid <= 0 || pid > INT_MAX) {
        fprintf(stderr, "heaptrail: snapshot: '%s' is not a process id\n", pid_arg);
        return 2;
    }
    /* an agent that knows no leak checks takes "snapshot leaks" for
     * "snapshot": its snapshot then has no REACH record (said below). A
     * leak check scans the heap before the agent answers: seconds on the
     * biggest */
    const char *req = leaks ? "snapshot leaks\n" : "snapshot\n";
    int timeout_ms = leaks ? 60000 : 30000;
    char reply[4300];
    int timed_out;
    size_t got;
    if (ask_agent(&pid, req, leaks, timeout_ms, reply, sizeof reply, &got, &timed_out) != 0)
        return 1;
    if (!leaks) {
        if (strncmp(reply, "ok ", 3) != 0) {
            fprintf(stderr, "heaptrail: process %ld: ", pid);
            ht__put_clean(stderr, got ? reply : "no answer");
            fputc('\n', stderr);
            return 1;
        }
        char *sp = strchr(reply + 3, ' ');
        if (sp)
            *sp++ = 0;
        fprintf(stderr, "heaptrail: snapshot %s of process %ld written to ", reply + 3, pid);
        ht__put_clean(stderr, sp ? sp : "?");
        fputc('\n', stderr);
        return 0;
    }
    uint64_t seq;
    char *path;
    if (parse_ok(reply, &seq, &path) != 0) {
        say_bad_reply(pid, reply, got, timed_out, timeout_ms);
        return 1;
    }
    fprintf(stderr, "heaptrail: snapshot %llu of process %ld written to ", (unsigned long long)seq, pid);
    ht__put_clean(stderr, path);
    fputc('\n', stderr);
    return ht__run_summary(path, HT_SUMMARY_NOW, (int64_t)(seq > INT64_MAX ? INT64_MAX : seq), &supp, NULL, stderr) ? 1 : 0;
}

/* `heaptrail detach PID`: the agent heaptrail attach put into PID leaves
 * it (src/agent/agent.c, detach()): a last leak check and snapshot, then
 * the program's calls go to libc again. Prints that snapshot's summary. */
int ht_cmd_detach(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: heaptrail detach PID\n"
               "  stop tracking a process `heaptrail attach` joined: a last leak check and\n"
               "  snapshot end its trace, and its allocator calls go straight to libc again\n");
        return 0;
    }
    char *end;
    long pid = argc == 2 ? strtol(argv[1], &end, 10) : 0;
    if (argc != 2 || *end || pid <= 0 || pid > INT_MAX) {
        fprintf(stderr, "usage: heaptrail detach PID\n");
        return 2;
    }
    /* its leak check scans the heap first: seconds on the biggest */
    const int timeout_ms = 60000;
    char reply[4300];
    int timed_out;
    size_t got;
    if (ask_agent(&pid, "detach\n", 1, timeout_ms, reply, sizeof reply, &got, &timed_out) != 0)
        return 1;
    uint64_t seq;
    char *path;
    if (parse_ok(reply, &seq, &path) != 0) {
        say_bad_reply(pid, reply, got, timed_out, timeout_ms);
        return 1;
    }
    /* "ok SEQ FREED PATH": what the agent's tables gave back (-1: kept) */
    char *fend;
    errno = 0;
    long long freed = strtoll(path, &fend, 10);
    if (errno || fend == path || *fend != ' ') {
        say_bad_reply(pid, reply, got, timed_out, timeout_ms);
        return 1;
    }
    path = fend + 1;
    fprintf(stderr, "heaptrail: detached from process %ld; its trace ends with snapshot %llu: ", pid,
            (unsigned long long)seq);
    ht__put_clean(stderr, path);
    fputc('\n', stderr);
    char hb[32];
    if (freed >= 0)
        fprintf(stderr, "heaptrail: the agent gave its tables back: %s of memory\n",
                ht__human_bytes((uint64_t)freed, hb));
    else
        fprintf(stderr, "heaptrail: the agent keeps its tables: a thread of the program was still inside it "
                        "(the memory stays until the program ends)\n");
    static ht_supp_t none;
    return ht__run_summary(path, HT_SUMMARY_NOW, (int64_t)(seq > INT64_MAX ? INT64_MAX : seq), &none, NULL, stderr) ? 1 : 0;
}
