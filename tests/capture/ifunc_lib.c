/* ifunc_lib.c -- a library whose IFUNC resolvers ld.so runs while
 * dlopen relocates it (tests/capture/ifunc.c). The references below are
 * local, so they become R_X86_64_IRELATIVE relocations, which glibc
 * resolves eagerly inside _dl_relocate_object even under lazy binding.
 * Each resolver traps with ud2; the program's SIGILL handler walks the
 * stack from there and resumes after the ud2. Nothing here needs a
 * relocation itself (the resolvers run before the library's own are all
 * done). Built with and without frame pointers (-DFRAMED: gcc keeps no
 * frame in a leaf even with -mno-omit-leaf-frame-pointer, unless the
 * leaf asks for its frame's address). */
#ifdef FRAMED
#define TRAP() __asm__ volatile("ud2" : : "r"(__builtin_frame_address(0)) : "memory")
#else
#define TRAP() __asm__ volatile("ud2" ::: "memory")
#endif

static int impl_leaf(void) { return 1; }
static int impl_call(void) { return 2; }

/* a leaf: no frame without frame pointers (libm's resolvers are such
 * leaves) */
static void *resolve_leaf(void)
{
    TRAP();
    return (void *)impl_leaf;
}

/* the trap one frame further in: the resolver is a frame with a return
 * address into it */
__attribute__((noinline)) static void trap_inner(void)
{
    TRAP();
}

static void *resolve_call(void)
{
    trap_inner();
    __asm__ volatile("" ::: "memory");  /* not a tail call */
    return (void *)impl_call;
}

__attribute__((visibility("hidden"))) int ifunc_leaf(void) __attribute__((ifunc("resolve_leaf")));
__attribute__((visibility("hidden"))) int ifunc_call(void) __attribute__((ifunc("resolve_call")));

int ifunc_lib_sum(void)
{
    return ifunc_leaf() * 10 + ifunc_call();
}
