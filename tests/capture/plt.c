/* plt.c -- ht_capture_context inside a PLT stub.
 *
 * A lazily bound call goes through a PLT stub whose CFI is a DWARF
 * expression (the CFA moves by 8 when the stub pushes the relocation
 * index). Linked with -z lazy, the GOT slot of a function never called yet
 * points back into its PLT stub, at the `push`. Contexts that stop there
 * (before the push: the return address is at rsp) and at the instruction
 * after it (the index is at rsp, the return address above) must both give
 * [stub pc, the return address], which only a correct evaluation of the
 * stub's CFA expression yields. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>
#include <ucontext.h>
#include "heaptrail.h"
#include "check.h"

/* a function this program calls only in dead code, so its GOT slot stays
 * unresolved */
extern int strverscmp(const char *, const char *);
static volatile int never;

static uintptr_t got_slot;

static int find_slot(struct dl_phdr_info *info, size_t size, void *data)
{
    if (info->dlpi_name && info->dlpi_name[0])
        return 0;               /* the executable has an empty name */
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Rela) *jmprel = NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t relsz = 0;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn->d_un.d_ptr; break;
        case DT_PLTRELSZ: relsz = dyn->d_un.d_val; break;
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn->d_un.d_ptr; break;
        case DT_STRTAB: strtab = (const char *)dyn->d_un.d_ptr; break;
        }
    }
    for (size_t i = 0; jmprel && symtab && strtab && i < relsz / sizeof *jmprel; i++) {
        const ElfW(Sym) *s = &symtab[ELF64_R_SYM(jmprel[i].r_info)];
        if (strcmp(strtab + s->st_name, "strverscmp") == 0)
            got_slot = info->dlpi_addr + jmprel[i].r_offset;
    }
    return 1;
}

__attribute__((noinline)) static void check_at(uintptr_t pc, int pushed)
{
    /* a fake stack: [index if pushed] [return address] [junk...] */
    uintptr_t stack[64];
    memset(stack, 0, sizeof stack);
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    stack[0] = pushed ? 7 : ra;
    stack[1] = pushed ? ra : 0;
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)stack;
    uc.uc_mcontext.gregs[REG_RBP] = 0;
    void *f[8];
    int n = ht_capture_context(&uc, 8, f, NULL);
    CHECK(n >= 2);
    CHECK(n >= 1 && (uintptr_t)f[0] == pc);
    CHECK(n >= 2 && (uintptr_t)f[1] == ra);
    if (n < 2 || (uintptr_t)f[1] != ra)
        fprintf(stderr, "at %#lx (%s the push): got %d frames, f[1] = %p, want %#lx\n", (unsigned long)pc,
                pushed ? "after" : "before", n, n > 1 ? f[1] : NULL, (unsigned long)ra);
}

int main(void)
{
    if (never)
        never = strverscmp("a", "b");
    dl_iterate_phdr(find_slot, NULL);
    CHECK(got_slot != 0);
    if (!got_slot)
        return check_done();
    uintptr_t stub = *(const uintptr_t *)got_slot;
    const uint8_t *code = (const uint8_t *)stub;
    /* lazy binding: the slot points at the stub's `push $index` (68 imm32) */
    CHECK(code[0] == 0x68);
    if (code[0] != 0x68)
        return check_done();
    fprintf(stderr, "strverscmp's PLT stub pushes at %#lx\n", (unsigned long)stub);
    check_at(stub, 0);
    check_at(stub + 5, 1);      /* the jump to PLT0, after the push */
    return check_done();
}
