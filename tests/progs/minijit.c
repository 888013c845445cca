/* minijit.c -- a mini JIT run under the agent (tests/jit/minijit.sh):
 * allocations whose stacks pass through emitted x86-64 code announced in
 * each way a JIT can announce it, and code re-emitted at the same address.
 *
 * The functions (tests/jitcode.h shapes, 64-byte slots of one mapping):
 *   jit_a_fp      keeps a frame pointer, no CFI; ht_register_code
 *   jit_b_libgcc  no frame pointer; CFI through libgcc's __register_frame,
 *                 named by a perf map line (/tmp/perf-PID.map)
 *   jit_c_api     no frame pointer; ht_register_code + ht_register_unwind
 *   jit_d_gdb, jit_e_gdb
 *                 no frame pointer; announced only through the GDB JIT
 *                 interface (our own __jit_debug_descriptor, an in-memory
 *                 ELF symfile: .text at its sh_addr, .symtab, .strtab, and
 *                 an .eh_frame with pc-relative pointers, loaded at its
 *                 sh_addr) -- one symfile, two functions
 * Each allocation is made through main -> run_chain -> OUTER -> c_mid ->
 * INNER -> c_leaf -> malloc (JIT -> C -> JIT -> C), a chain a distinct
 * number of times:
 *   jit_a_fp   -> jit_b_libgcc   3      jit_b_libgcc -> jit_c_api   5
 *   jit_c_api  -> jit_d_gdb      7      jit_e_gdb    -> jit_a_fp   11
 * Then code freed and re-emitted at the same address under another name,
 * each chain OUTER -> jit_a_fp:
 *   ht_register_code:  jit_fp_old 2; unregistered, re-emitted as jit_fp_new 4
 *   GDB JIT, waiting:  gdb_wait_old 6; its entry unregistered and the
 *                      symfile wiped; after a wait, a new entry and symfile
 *                      announce gdb_wait_new at the same address: 8
 *   GDB JIT, no wait:  gdb_nowait_old 9; unregistered and, at once, the
 *                      same entry and symfile buffer re-filled for
 *                      gdb_nowait_new: 10 allocations straight away (the
 *                      agent has not looked yet: the old name), then
 *                      after a wait 12 (the new name)
 * "After a wait" is 50 ms (the agent looks every 20 ms), then as long as
 * an ht_capture through the code does not yet show the new registration
 * (a busy machine), at most 3 s; the extra time is printed.
 *
 * With the argument "seccomp" a filter that kills the process on
 * process_vm_readv is installed before anything else runs (from
 * .preinit_array, so the agent's control thread inherits it): the agent
 * must read the JIT's memory another way. */
#define _GNU_SOURCE
#include <elf.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "heaptrail.h"
#include "jitcode.h"
#include "noreadv.h"

void __register_frame(void *begin);
void __deregister_frame(void *begin);

/* ---- the GDB JIT interface (the gdb manual, "JIT Compilation Interface") */

typedef enum { JIT_NOACTION = 0, JIT_REGISTER_FN, JIT_UNREGISTER_FN } jit_actions_t;
struct jit_code_entry {
    struct jit_code_entry *next, *prev;
    const char *symfile_addr;
    uint64_t symfile_size;
};
struct jit_descriptor {
    uint32_t version;
    uint32_t action_flag;
    struct jit_code_entry *relevant_entry, *first_entry;
};
/* not exported (no -rdynamic): the agent finds it in our .symtab */
__attribute__((used)) struct jit_descriptor __jit_debug_descriptor = { 1, 0, 0, 0 };
__attribute__((noinline, used)) void __jit_debug_register_code(void) { __asm__ volatile(""); }

static void gdb_register(struct jit_code_entry *e)
{
    e->prev = NULL;
    e->next = __jit_debug_descriptor.first_entry;
    if (e->next)
        e->next->prev = e;
    __jit_debug_descriptor.first_entry = e;
    __jit_debug_descriptor.relevant_entry = e;
    __jit_debug_descriptor.action_flag = JIT_REGISTER_FN;
    __jit_debug_register_code();
}

static void gdb_unregister(struct jit_code_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        __jit_debug_descriptor.first_entry = e->next;
    if (e->next)
        e->next->prev = e->prev;
    __jit_debug_descriptor.relevant_entry = e;
    __jit_debug_descriptor.action_flag = JIT_UNREGISTER_FN;
    __jit_debug_register_code();
}

/* An ELF relocatable object as LuaJIT and LLVM hand gdb: .text (NOBITS) at
 * the code's address, symbols relative to it, an .eh_frame whose loaded
 * copy is at `eh_addr`. Functions code[i] (CFI shape) named names[i],
 * .text spanning them. Returns the size written to out. */
static size_t build_symfile(uint8_t *out, size_t room, const uintptr_t *code, const char *const *names, size_t n,
                            const uint8_t *eh, size_t eh_size, uintptr_t eh_addr)
{
    static const char shstr[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
    enum { S_TEXT = 1, S_EH = 7, S_SYMTAB = 17, S_STRTAB = 25, S_SHSTRTAB = 33 };
    uintptr_t lo = code[0], hi = code[0];
    for (size_t i = 0; i < n; i++) {
        lo = code[i] < lo ? code[i] : lo;
        hi = code[i] + sizeof jit_code_cfi > hi ? code[i] + sizeof jit_code_cfi : hi;
    }
    memset(out, 0, room);
    size_t off = sizeof(Elf64_Ehdr);
    size_t eh_off = off;
    memcpy(out + eh_off, eh, eh_size);
    off = (off + eh_size + 7) & ~(size_t)7;
    size_t sym_off = off;
    Elf64_Sym *sym = (Elf64_Sym *)(out + sym_off);
    off += (n + 1) * sizeof(Elf64_Sym);
    size_t str_off = off, str_len = 1;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(out + str_off + str_len, names[i], len);
        sym[i + 1] = (Elf64_Sym){ (uint32_t)str_len, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, 1,
                                  code[i] - lo, sizeof jit_code_cfi };
        str_len += len;
    }
    off = str_off + str_len;
    size_t shstr_off = off;
    memcpy(out + shstr_off, shstr, sizeof shstr);
    off = (off + sizeof shstr + 7) & ~(size_t)7;
    size_t sh_off = off;
    Elf64_Shdr *sh = (Elf64_Shdr *)(out + sh_off);
    off += 6 * sizeof(Elf64_Shdr);
    if (off > room)
        abort();
    sh[1] = (Elf64_Shdr){ S_TEXT, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, lo, 0, hi - lo, 0, 0, 16, 0 };
    sh[2] = (Elf64_Shdr){ S_EH, SHT_PROGBITS, SHF_ALLOC, eh_addr, eh_off, eh_size, 0, 0, 8, 0 };
    sh[3] = (Elf64_Shdr){ S_SYMTAB, SHT_SYMTAB, 0, 0, sym_off, (n + 1) * sizeof(Elf64_Sym), 4, 1, 8,
                          sizeof(Elf64_Sym) };
    sh[4] = (Elf64_Shdr){ S_STRTAB, SHT_STRTAB, 0, 0, str_off, str_len, 0, 0, 1, 0 };
    sh[5] = (Elf64_Shdr){ S_SHSTRTAB, SHT_STRTAB, 0, 0, shstr_off, sizeof shstr, 0, 0, 1, 0 };
    Elf64_Ehdr *h = (Elf64_Ehdr *)out;
    memcpy(h->e_ident, ELFMAG, SELFMAG);
    h->e_ident[EI_CLASS] = ELFCLASS64;
    h->e_ident[EI_DATA] = ELFDATA2LSB;
    h->e_ident[EI_VERSION] = EV_CURRENT;
    h->e_type = ET_REL;
    h->e_machine = EM_X86_64;
    h->e_version = EV_CURRENT;
    h->e_shoff = sh_off;
    h->e_ehsize = sizeof(Elf64_Ehdr);
    h->e_shentsize = sizeof(Elf64_Shdr);
    h->e_shnum = 6;
    h->e_shstrndx = 5;
    return off;
}

/* A JIT'd unit announced to gdb: its entry, symfile and loaded .eh_frame. */
typedef struct gdb_unit_s {
    struct jit_code_entry entry;
    uint8_t symfile[2048];
    uint8_t *eh;                        /* in the data pages: the "loaded" copy */
} gdb_unit_t;

/* ---- emitting ------------------------------------------------------------ */

typedef void (*jit_fn)(void (*)(void *), void *);
enum { CODE_PAGES = 1, DATA_PAGES = 1 };
static uint8_t *area;                   /* code page (RX), then data page (RW) */

static jit_fn emit(int slot, int shape)
{
    uint8_t *p = area + 64 * slot;
    if (mprotect(area, 4096 * CODE_PAGES, PROT_READ | PROT_WRITE) != 0)
        abort();
    memset(p, 0xcc, 64);
    memcpy(p, shape == JIT_SHAPE_FP ? jit_code_fp : jit_code_cfi, jit_code_size[shape]);
    if (mprotect(area, 4096 * CODE_PAGES, PROT_READ | PROT_EXEC) != 0)
        abort();
    __builtin___clear_cache((char *)p, (char *)p + 64);
    return (jit_fn)(void *)p;
}

/* Announces CFI-shaped code[0..n) named names[i] through the GDB JIT
 * interface in unit u, its .eh_frame at data slot eh_slot. */
static void gdb_announce(gdb_unit_t *u, int eh_slot, const uintptr_t *code, const char *const *names, size_t n)
{
    u->eh = area + 4096 * CODE_PAGES + 256 * eh_slot;
    uint8_t eh[256];
    size_t eh_size = jit_eh_frame(eh, (uintptr_t)u->eh, code, n, 1);
    memcpy(u->eh, eh, eh_size);
    size_t size = build_symfile(u->symfile, sizeof u->symfile, code, names, n, eh, eh_size, (uintptr_t)u->eh);
    u->entry.symfile_addr = (const char *)u->symfile;
    u->entry.symfile_size = size;
    gdb_register(&u->entry);
}

/* ---- the chains ------------------------------------------------------------ */

typedef struct chain_s {
    jit_fn outer, inner;
    size_t size;                        /* bytes to allocate; 0: capture instead */
    void *frames[64];
    int n;
} chain_t;

static void *volatile sink;

__attribute__((noinline)) void c_leaf(void *arg)
{
    chain_t *c = arg;
    if (c->size)
        sink = malloc(c->size);
    else
        c->n = ht_capture(0, 64, c->frames, NULL);
    __asm__ volatile("" ::: "memory");  /* no tail call: keep c_leaf's frame */
}

__attribute__((noinline)) void c_mid(void *arg)
{
    chain_t *c = arg;
    c->inner(c_leaf, c);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void run_chain(jit_fn outer, jit_fn inner, size_t size, int times)
{
    chain_t c = { outer, inner, size, { 0 }, 0 };
    for (int i = 0; i < times; i++)
        c.outer(c_mid, &c);
    __asm__ volatile("" ::: "memory");
}

/* The serial of the frame in `fn` when a capture goes through it as the
 * outer function (0: not registered, or the walk did not get there). */
static unsigned serial_in(jit_fn fn, jit_fn inner)
{
    chain_t c = { fn, inner, 0, { 0 }, 0 };
    c.outer(c_mid, &c);
    for (int i = 0; i < c.n; i++) {
        uintptr_t a = HT_FRAME_ADDRESS(c.frames[i]);
        if (a > (uintptr_t)(void *)fn && a <= (uintptr_t)(void *)fn + 64)
            return HT_FRAME_JIT_SERIAL(c.frames[i]);
    }
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Waits 50 ms, then while a capture through fn shows serial 0 or `old`. */
static void wait_registered(const char *what, jit_fn fn, jit_fn inner, unsigned old)
{
    sleep_ms(50);
    int extra = 0;
    unsigned s;
    while (((s = serial_in(fn, inner)) == 0 || s == old) && extra < 3000) {
        sleep_ms(10);
        extra += 10;
    }
    if (extra)
        fprintf(stderr, "minijit: %s: waited %d ms more (serial %u)\n", what, extra, s);
}

/* ---- seccomp --------------------------------------------------------------- */

static void no_process_vm_readv(int argc, char **argv, char **envp)
{
    if (argc < 2 || strcmp(argv[1], "seccomp") != 0)
        return;
    forbid_process_vm_readv("minijit: seccomp");
}
/* before any library's constructor: the agent's threads start filtered */
__attribute__((section(".preinit_array"), used)) static void (*preinit)(int, char **, char **) = no_process_vm_readv;

int main(int argc, char **argv)
{
    area = mmap(NULL, 4096 * (CODE_PAGES + DATA_PAGES), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        return 1;
    if (mprotect(area, 4096 * CODE_PAGES, PROT_READ | PROT_EXEC) != 0)
        return 1;

    /* (a) frame pointer, named */
    jit_fn a = emit(0, JIT_SHAPE_FP);
    if (!ht_register_code((void *)a, sizeof jit_code_fp, "jit_a_fp"))
        return 1;
    /* (b) CFI through libgcc, named by a perf map line */
    jit_fn b = emit(1, JIT_SHAPE_CFI);
    static uint8_t eh_b[256];
    uintptr_t code_b = (uintptr_t)(void *)b;
    jit_eh_frame(eh_b, (uintptr_t)eh_b, &code_b, 1, 0);
    __register_frame(eh_b);
    unsigned s_b = serial_in(b, a);
    char perf[64];
    snprintf(perf, sizeof perf, "/tmp/perf-%d.map", (int)getpid());
    FILE *pm = fopen(perf, "w");
    if (!pm)
        return 1;
    fprintf(pm, "%lx %zx jit_b_libgcc\n", (unsigned long)code_b, sizeof jit_code_cfi);
    fclose(pm);
    /* (c) CFI through the API */
    jit_fn c = emit(2, JIT_SHAPE_CFI);
    static uint8_t eh_c[256];
    uintptr_t code_c = (uintptr_t)(void *)c;
    size_t eh_c_size = jit_eh_frame(eh_c, (uintptr_t)eh_c, &code_c, 1, 0);
    if (!ht_register_code((void *)c, sizeof jit_code_cfi, "jit_c_api") ||
        !ht_register_unwind((void *)c, sizeof jit_code_cfi, eh_c, eh_c_size - 4))
        return 1;
    /* (d) the GDB JIT interface only: two functions in one symfile */
    jit_fn d = emit(3, JIT_SHAPE_CFI), e = emit(5, JIT_SHAPE_CFI);
    static gdb_unit_t unit_de;
    uintptr_t code_de[2] = { (uintptr_t)(void *)d, (uintptr_t)(void *)e };
    const char *names_de[2] = { "jit_d_gdb", "jit_e_gdb" };
    gdb_announce(&unit_de, 0, code_de, names_de, 2);

    wait_registered("perf map", b, a, s_b);
    unlink(perf);
    wait_registered("gdb jit", d, a, 0);
    wait_registered("gdb jit", e, a, 0);
    run_chain(a, b, 24, 3);
    run_chain(b, c, 40, 5);
    run_chain(c, d, 56, 7);
    run_chain(e, a, 72, 11);

    /* re-emitted under another name: ht_register_code */
    jit_fn f = emit(6, JIT_SHAPE_FP);
    ht_register_code((void *)f, sizeof jit_code_fp, "jit_fp_old");
    run_chain(f, a, 88, 2);
    ht_unregister_code((void *)f);
    f = emit(6, JIT_SHAPE_FP);
    ht_register_code((void *)f, sizeof jit_code_fp, "jit_fp_new");
    run_chain(f, a, 88, 4);

    /* re-emitted: the GDB JIT interface, waiting for the agent */
    static gdb_unit_t wait_old, wait_new;
    jit_fn g = emit(7, JIT_SHAPE_CFI);
    uintptr_t code_g = (uintptr_t)(void *)g;
    const char *name_wo = "gdb_wait_old", *name_wn = "gdb_wait_new";
    gdb_announce(&wait_old, 1, &code_g, &name_wo, 1);
    wait_registered("gdb_wait_old", g, a, 0);
    unsigned s_old = serial_in(g, a);
    run_chain(g, a, 104, 6);
    gdb_unregister(&wait_old.entry);
    memset(wait_old.symfile, 0, sizeof wait_old.symfile);     /* freed */
    memset(wait_old.eh, 0, 256);
    g = emit(7, JIT_SHAPE_CFI);
    gdb_announce(&wait_new, 2, &code_g, &name_wn, 1);
    wait_registered("gdb_wait_new", g, a, s_old);
    run_chain(g, a, 104, 8);

    /* re-emitted: the GDB JIT interface, not waiting. The same entry and
     * symfile buffer (freed and allocated again) announce the new code */
    static gdb_unit_t nowait;
    jit_fn h = emit(9, JIT_SHAPE_CFI);
    uintptr_t code_h = (uintptr_t)(void *)h;
    const char *name_no = "gdb_nowait_old", *name_nn = "gdb_nowait_new";
    gdb_announce(&nowait, 3, &code_h, &name_no, 1);
    wait_registered("gdb_nowait_old", h, a, 0);
    s_old = serial_in(h, a);
    run_chain(h, a, 120, 9);
    /* The agent may look between the unregistration and the announcement
     * (a busy machine can stop this thread there for a time slice): it
     * then knows no code at h until its next look, and the allocations of
     * the lag would have no stack past h. A capture after the announcement
     * tells (it allocates nothing): if it finds no registration, the old
     * name is announced again, and once the agent has it the re-emission
     * is tried again. The seccomp run sleeps in that window on its first
     * try, so both ways are taken on every test run. */
    for (int tries = 1;; tries++) {
        gdb_unregister(&nowait.entry);
        h = emit(9, JIT_SHAPE_CFI);
        if (tries == 1 && argc > 1 && strcmp(argv[1], "seccomp") == 0)
            sleep_ms(60);
        gdb_announce(&nowait, 3, &code_h, &name_nn, 1);
        if (serial_in(h, a) != 0 || tries == 5)
            break;
        fprintf(stderr, "minijit: gdb_nowait: the agent looked between unregistration and "
                        "announcement (try %d)\n", tries);
        gdb_unregister(&nowait.entry);
        gdb_announce(&nowait, 3, &code_h, &name_no, 1);
        wait_registered("gdb_nowait_old again", h, a, 0);
    }
    run_chain(h, a, 120, 10);           /* within the agent's lag */
    wait_registered("gdb_nowait_new", h, a, s_old);
    run_chain(h, a, 120, 12);

    /* all freed before exit: the trace must still name every frame */
    gdb_unregister(&unit_de.entry);
    gdb_unregister(&wait_new.entry);
    gdb_unregister(&nowait.entry);
    ht_unregister_code((void *)a);
    ht_unregister_code((void *)c);
    ht_unregister_code((void *)f);
    __deregister_frame(eh_b);
    munmap(area, 4096 * (CODE_PAGES + DATA_PAGES));
    printf("minijit %s ok\n", argc > 1 ? argv[1] : "plain");
    return 0;
}
