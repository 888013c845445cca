/* stack_demo.c -- captures its own stack with ht_capture() and prints it
 * symbolized (function, file:line) with elfutils libdw. */
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <unistd.h>
#include "heaptrail.h"

static void print_stack(void)
{
    void *frames[64];
    uint64_t hash;
    int n = ht_capture(0, 64, frames, &hash);

    static char *debuginfo_path;
    static const Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = dwfl_begin(&cb);
    dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, NULL, NULL);

    printf("ht_capture: %d frames, hash %016llx\n", n, (unsigned long long)hash);
    for (int i = 0; i < n; i++) {
        /* a return address points after the call: look up the call itself */
        Dwarf_Addr pc = (Dwarf_Addr)frames[i] - 1;
        Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
        const char *fn = mod ? dwfl_module_addrname(mod, pc) : NULL;
        const char *mname = mod ? dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
        Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, pc) : NULL;
        int lineno = 0;
        const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
        printf("  #%-2d %p %s", i, frames[i], fn ? fn : "??");
        if (file)
            printf(" at %s:%d", file, lineno);
        else if (mname)
            printf(" in %s", mname);
        printf("\n");
    }
    dwfl_end(dwfl);
}

__attribute__((noinline)) static void level3(void) { print_stack(); }
__attribute__((noinline)) static void level2(void) { level3(); __asm__ volatile(""); }
__attribute__((noinline)) static void level1(void) { level2(); __asm__ volatile(""); }

int main(void)
{
    level1();
    return 0;
}
