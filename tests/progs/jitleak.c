/* jitleak.c -- allocations whose stacks pass through JIT code: a thunk
 * emitted into executable anonymous memory and registered with
 * ht_register_code("jit_thunk") calls leak_via_jit, which leaks 3 blocks
 * of 64 bytes. The code is unregistered and unmapped before exit (the
 * mapping is no leak); the trace must still name the frame. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "heaptrail.h"

static const unsigned char thunk[] = {
    0x55,                   /* push rbp */
    0x48, 0x89, 0xe5,       /* mov rbp, rsp */
    0x48, 0x89, 0xf8,       /* mov rax, rdi */
    0x48, 0x89, 0xf7,       /* mov rdi, rsi */
    0xff, 0xd0,             /* call rax */
    0x5d,                   /* pop rbp */
    0xc3,                   /* ret */
};
static void *volatile sink;

__attribute__((noinline)) static void leak_via_jit(void *arg) { (void)arg; sink = malloc(64); }

int main(void)
{
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, thunk, sizeof thunk);
    if (!ht_register_code(code, sizeof thunk, "jit_thunk"))
        return 1;
    void (*f)(void (*)(void *), void *) = (void (*)(void (*)(void *), void *))code;
    for (int i = 0; i < 3; i++)
        f(leak_via_jit, NULL);
    ht_unregister_code(code);
    munmap(code, 4096);
    return 0;
}
