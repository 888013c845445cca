/* jit_bench.c -- ht_capture through JIT frames vs native frames, side by
 * side in one run (`make bench-capture`, docs/BENCHMARKS.md).
 *
 * Every stack is 32 frames deep as a full walk sees it: a leaf (which
 * captures), a chain of positions each holding a native frame or a JIT
 * frame, then bench_base and its callers down to _start. Of the 32, 0, 8
 * or 16 are JIT frames, of one of three kinds:
 *   fp-named  code with a frame pointer, announced by name only
 *             (ht_register_code): the walk takes frame-pointer steps;
 *   cfi-api   code without a frame pointer (rbp holds junk), its .eh_frame
 *             given with ht_register_code + ht_register_unwind;
 *   cfi-libgcc the same code shape, its .eh_frame (one section, one FDE
 *             per function) given to libgcc's __register_frame, which
 *             libheaptrail wraps.
 * "spread": the JIT frames are spaced evenly among the chain's positions
 * (JIT -> native -> JIT, or JIT -> JIT when more than half the positions
 * are JIT), the innermost few frames native as under an allocator;
 * "outer": one block of JIT frames calling each other at the outer end of
 * the chain, the 24 inner frames native.
 *
 * The JIT functions are emitted here into anonymous executable memory
 * (each records its own return address, then calls the next frame through
 * a slot), so every frame's expected return address is known without any
 * unwinder: native frames record __builtin_return_address(0). The first
 * capture of every round is checked frame for frame against that (JIT
 * frames with their registration's serial), every timed capture must have
 * the same depth, and the last one the same frames; a wrong walk aborts
 * the benchmark. libunwind runs on the same stacks; where it cannot
 * unwind a stack fully the table says how far it got.
 *
 * Per round and configuration: the caches are emptied (a dlclose, which
 * heaptrail wraps to bump its code generation; unw_flush_cache for
 * libunwind), the first capture is timed alone (cold: rules computed from
 * the CFI), then ITERS captures of the same stack (repeated path: rules
 * cached, the thread's trail recorded). Rounds take turns over every
 * configuration and method; medians over the rounds.
 *
 * Usage: jit_bench [rounds [filter]]   rounds: default 9; filter: only the
 * stacks whose label contains it (and the native one), e.g. "fp-named" */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "heaptrail.h"

void __register_frame(void *begin);

#define DEPTH   32              /* frames in every stack */
#define MAXF    64              /* room to see a walk that goes too far */
#define NJIT    16              /* JIT functions per kind */
#define ITERS   20000           /* timed captures per round */
#define ROUNDS_MAX 31

enum { K_NATIVE = -1, K_FP = 0, K_CFI_API, K_CFI_LIBGCC, NKINDS };
static const char *kind_name[NKINDS] = { "fp-named", "cfi-api", "cfi-libgcc" };
enum { M_HT, M_LIBUNWIND, NMETHODS };

static void die(const char *msg)
{
    fprintf(stderr, "jit_bench: %s\n", msg);
    exit(1);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- the JIT code ---------------------------------------------------------
 * void f(struct run *r): stores its own return address in jit_ra[kind][i],
 * calls jit_next[kind][i](r) (rdi passes through), returns. */

static void *jit_ra[NKINDS][NJIT];      /* written by the JIT code */
static void *jit_next[NKINDS][NJIT];    /* read by the JIT code */
static uint8_t *jit_fn[NKINDS][NJIT];
static uint32_t jit_serial[NKINDS][NJIT];

#define FP_SIZE   32
#define FP_RA     30            /* the return address of its call */
#define CFI_SIZE  48
#define CFI_RA    42

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* push rbp; mov rbp,rsp; mov rax,[rbp+8]; mov [ra],rax; mov rax,[next];
 * call rax; pop rbp; ret */
static void emit_fp(uint8_t *p, void **ra, void **next)
{
    static const uint8_t head[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x45, 0x08 };
    memcpy(p, head, sizeof head);
    p[8] = 0x48, p[9] = 0xa3, put64(p + 10, (uintptr_t)ra);             /* movabs [ra], rax */
    p[18] = 0x48, p[19] = 0xa1, put64(p + 20, (uintptr_t)next);         /* movabs rax, [next] */
    p[28] = 0xff, p[29] = 0xd0;                                         /* call rax */
    p[30] = 0x5d, p[31] = 0xc3;                                         /* pop rbp; ret */
}

/* push rbp; sub rsp,16; mov rax,[rsp+24]; mov [ra],rax; mov rbp,junk;
 * mov rax,[next]; call rax; add rsp,16; pop rbp; ret -- no frame pointer:
 * only the CFI unwinds it (a frame-pointer step would read junk) */
static void emit_cfi(uint8_t *p, void **ra, void **next)
{
    static const uint8_t head[] = { 0x55, 0x48, 0x83, 0xec, 0x10, 0x48, 0x8b, 0x44, 0x24, 0x18 };
    memcpy(p, head, sizeof head);
    p[10] = 0x48, p[11] = 0xa3, put64(p + 12, (uintptr_t)ra);
    p[20] = 0x48, p[21] = 0xbd, put64(p + 22, 0x00005eed0badbeefull);   /* movabs rbp, junk */
    p[30] = 0x48, p[31] = 0xa1, put64(p + 32, (uintptr_t)next);
    p[40] = 0xff, p[41] = 0xd0;
    static const uint8_t tail[] = { 0x48, 0x83, 0xc4, 0x10, 0x5d, 0xc3 };
    memcpy(p + 42, tail, sizeof tail);
}

/* A CIE for the CFI functions: code alignment 1, data alignment -8, return
 * address column 16, FDE addresses absolute; CFA = rsp + 8, ra at CFA - 8. */
static size_t put_cie(uint8_t *p)
{
    static const uint8_t cie[] = {
        20, 0, 0, 0,  0, 0, 0, 0,  1, 'z', 'R', 0,  1, 0x78, 16,  1, 0x00,
        0x0c, 7, 8,  0x90, 1,  0, 0,
    };
    memcpy(p, cie, sizeof cie);
    return sizeof cie;
}

/* An FDE for the CFI function at `code`, its CIE at `cie`. */
static size_t put_fde(uint8_t *p, const uint8_t *cie, uintptr_t code)
{
    static const uint8_t insns[] = {
        0x41, 0x0e, 16, 0x86, 2,        /* at 1: CFA = rsp + 16, rbp at CFA - 16 */
        0x44, 0x0e, 32,                 /* at 5: CFA = rsp + 32 */
        0x40 | 41, 0x0e, 16,            /* at 46 (pop rbp): CFA = rsp + 16 */
        0x41, 0x0e, 8, 0xc6,            /* at 47 (ret): CFA = rsp + 8, rbp restored */
        0,                              /* pad to 8 bytes */
    };
    uint32_t len = 4 + 8 + 8 + 1 + sizeof insns, cie_off = (uint32_t)(p + 4 - cie);
    memcpy(p, &len, 4);
    memcpy(p + 4, &cie_off, 4);
    put64(p + 8, code);
    put64(p + 16, CFI_SIZE);
    p[24] = 0;                          /* augmentation data: none */
    memcpy(p + 25, insns, sizeof insns);
    return 4 + len;
}

static uint8_t eh_api[NJIT][128];       /* one section per function */
static uint8_t eh_libgcc[32 + NJIT * 48 + 4];   /* one section, NJIT FDEs */

static void make_jit(void)
{
    uint8_t *area = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        die("mmap");
    memset(area, 0xcc, 3 * 4096);
    for (int k = 0; k < NKINDS; k++)
        for (int i = 0; i < NJIT; i++) {
            uint8_t *p = jit_fn[k][i] = area + 4096 * k + 64 * i;
            if (k == K_FP)
                emit_fp(p, &jit_ra[k][i], &jit_next[k][i]);
            else
                emit_cfi(p, &jit_ra[k][i], &jit_next[k][i]);
        }
    if (mprotect(area, 3 * 4096, PROT_READ | PROT_EXEC) != 0)
        die("mprotect");
    __builtin___clear_cache((char *)area, (char *)area + 3 * 4096);

    char name[32];
    for (int i = 0; i < NJIT; i++) {
        snprintf(name, sizeof name, "jit:fp_%d", i);
        jit_serial[K_FP][i] = ht_register_code(jit_fn[K_FP][i], FP_SIZE, name);
        snprintf(name, sizeof name, "jit:cfi_%d", i);
        uint8_t *e = eh_api[i];
        size_t n = put_cie(e);
        n += put_fde(e + n, e, (uintptr_t)jit_fn[K_CFI_API][i]);
        uint32_t s = ht_register_code(jit_fn[K_CFI_API][i], CFI_SIZE, name);
        if (!s || ht_register_unwind(jit_fn[K_CFI_API][i], CFI_SIZE, e, n) != s)
            die("ht_register_unwind failed");
        jit_serial[K_CFI_API][i] = s;
        if (!jit_serial[K_FP][i])
            die("ht_register_code failed");
    }
    size_t n = put_cie(eh_libgcc);
    for (int i = 0; i < NJIT; i++)
        n += put_fde(eh_libgcc + n, eh_libgcc, (uintptr_t)jit_fn[K_CFI_LIBGCC][i]);
    memset(eh_libgcc + n, 0, 4);        /* terminator */
    __register_frame(eh_libgcc);        /* serials learned from the first capture */
}

/* ---- the native frames and the chain -------------------------------------- */

struct run;
typedef void (*frame_fn)(struct run *);

struct run {
    int method, cold;
    /* the chain, outermost position first */
    int npos;                           /* positions between bench_base and the leaf */
    frame_fn first;                     /* bench_base calls it */
    frame_fn native_next[DEPTH];        /* what the k-th native step calls */
    int nstep;
    void *step_ra[DEPTH];               /* the k-th native step's return address */
    void *leaf_ra;
    signed char pos_kind[DEPTH];        /* K_NATIVE or the JIT kind, per position */
    signed char pos_fn[DEPTH];          /* JIT function index, per position */
    /* bench_base's callers (bench_base itself excluded) */
    void *outer[MAXF];
    int outer_n;
    /* results */
    int n;                              /* frames each capture returned */
    int good;                           /* leading frames equal to the expected ones */
    double cold_ns, ns;
};

static void leaf(struct run *r);

__attribute__((noinline)) void step(struct run *r)
{
    int k = r->nstep++;
    r->step_ra[k] = __builtin_return_address(0);
    r->native_next[k](r);
    __asm__ volatile("" ::: "memory");  /* a frame of its own, not a tail call */
}

__attribute__((noinline)) void bench_base(struct run *r)
{
    r->outer_n = ht_capture(1, MAXF, r->outer, NULL);
    if (r->first)
        r->first(r);
    __asm__ volatile("" ::: "memory");
}

/* Whether position p (0 = outermost) holds a JIT frame, for j JIT frames
 * among n positions: spread evenly counting from the innermost position,
 * the first one after (n / j) - 1 native frames; or a block at the outer
 * end. */
static int is_jit(int p, int n, int j, int outer)
{
    if (outer)
        return p < j;
    int q = n - 1 - p;
    return (q + 1) * j / n > q * j / n;
}

/* Sets up r's chain: npos positions, `njit` JIT frames of `kind`. */
static void wire(struct run *r, int kind, int njit, int outer)
{
    frame_fn fn[DEPTH + 1];
    int j = 0;
    for (int p = 0; p < r->npos; p++) {
        if (kind != K_NATIVE && is_jit(p, r->npos, njit, outer)) {
            r->pos_kind[p] = (signed char)kind;
            r->pos_fn[p] = (signed char)j;
            fn[p] = (frame_fn)(void *)jit_fn[kind][j++];
        } else {
            r->pos_kind[p] = K_NATIVE;
            fn[p] = step;
        }
    }
    if (kind != K_NATIVE && j != njit)
        die("wiring: wrong JIT frame count");
    fn[r->npos] = leaf;
    r->first = fn[0];
    int k = 0;
    for (int p = 0; p < r->npos; p++) {
        if (r->pos_kind[p] == K_NATIVE)
            r->native_next[k++] = fn[p + 1];
        else
            jit_next[kind][r->pos_fn[p]] = (void *)fn[p + 1];
    }
}

/* The frames every capture from the leaf must return, innermost first, as
 * ht_capture returns them (JIT frames tagged with their serial). The
 * cfi-libgcc serials, which nobody told us, are learned from `got` when
 * `learn` (ht_capture's first stack through them) and must be non-zero.
 * frames[0], the leaf's own call site, is taken from `got` and must lie in
 * the leaf. Returns the count, or -1 if the chain did not run as wired. */
static int expected(const struct run *r, void *const *got, int got_n, int learn, void **want)
{
    int n = 0, k = r->nstep;
    if (got_n < 1 || (uintptr_t)got[0] - (uintptr_t)(void *)leaf > 4096)
        return -1;
    want[n++] = got[0];
    /* position p's frame (p = npos: the leaf) returns to position p - 1
     * (bench_base for p = 0): its recorded return address is that frame's
     * pc */
    for (int p = r->npos; p >= 0; p--) {
        void *ra;
        if (p == r->npos) {
            ra = r->leaf_ra;
        } else if (r->pos_kind[p] == K_NATIVE) {
            ra = r->step_ra[--k];
        } else {
            int kind = r->pos_kind[p], i = r->pos_fn[p];
            ra = jit_ra[kind][i];
        }
        /* the frame of position p - 1 is a JIT frame: tag it */
        if (p > 0 && r->pos_kind[p - 1] != K_NATIVE) {
            int kind = r->pos_kind[p - 1], i = r->pos_fn[p - 1];
            uint32_t s = jit_serial[kind][i];
            if (!s && learn && n < got_n)
                s = jit_serial[kind][i] = HT_FRAME_JIT_SERIAL(got[n]);
            if (!s || HT_FRAME_ADDRESS(ra) != (uintptr_t)jit_fn[kind][i] + (kind == K_FP ? FP_RA : CFI_RA))
                return -1;
            ra = (void *)(HT_FRAME_ADDRESS(ra) | (uintptr_t)s << 48);
        }
        want[n++] = ra;
    }
    if (k != 0)
        return -1;
    for (int i = 0; i < r->outer_n && n < MAXF; i++)
        want[n++] = r->outer[i];
    return n;
}

static void print_stack(const char *what, void *const *f, int n)
{
    fprintf(stderr, "%s (%d frames):\n", what, n);
    for (int i = 0; i < n; i++) {
        Dl_info di;
        const char *s = dladdr((char *)HT_FRAME_ADDRESS(f[i]) - 1, &di) && di.dli_sname ? di.dli_sname : "";
        fprintf(stderr, "  #%-2d %p serial %u %s\n", i, f[i], HT_FRAME_JIT_SERIAL(f[i]), s);
    }
}

/* Checks the first capture; sets r->good and r->n. ht_capture must return
 * exactly the expected frames; libunwind gets as far as it gets. */
static void verify(struct run *r, void *const *f, int n)
{
    void *want[MAXF];
    int wn = expected(r, f, n, r->method == M_HT, want);
    if (wn != DEPTH) {
        print_stack("captured", f, n);
        die(wn < 0 ? "the chain did not run as wired" : "the stack is not DEPTH frames deep: adjust DEPTH");
    }
    int good = 0;
    if (r->method == M_HT) {
        while (good < n && good < wn && f[good] == want[good])
            good++;
    } else {
        /* libunwind: its own call site in the leaf, then untagged addresses */
        if (n > 0 && (uintptr_t)f[0] - (uintptr_t)(void *)leaf <= 4096)
            good = 1;
        while (good && good < n && good < wn && (uintptr_t)f[good] == HT_FRAME_ADDRESS(want[good]))
            good++;
    }
    r->n = n;
    r->good = good;
    if (r->method == M_HT && (n != wn || good != wn)) {
        print_stack("expected", want, wn);
        print_stack("ht_capture returned", f, n);
        die("ht_capture returned a wrong stack");
    }
}

static unw_addr_space_t unw_as;

/* Empties the unwind caches: heaptrail's (dlclose bumps its code
 * generation: every cached rule and trail is stale) and libunwind's. */
static void flush_caches(void)
{
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        die("dlopen libc.so.6");
    dlclose(h);
    unw_flush_cache(unw_as, 0, 0);
}

__attribute__((noinline)) static void leaf(struct run *r)
{
    r->leaf_ra = __builtin_return_address(0);
    void *f[MAXF], *first[MAXF];
    int n = 0, fn = 0;
    if (r->cold)
        flush_caches();
    double t0 = now_ns(), t1;
    const int ht = r->method == M_HT;     /* the same branch every time: predicted */
    for (int i = 0;; i++) {
        n = ht ? ht_capture(0, MAXF, f, NULL) : unw_backtrace(f, MAXF);
        __asm__ volatile("" ::"r"(f) : "memory");
        if (__builtin_expect(i == 0, 0)) {
            r->cold_ns = now_ns() - t0;
            memcpy(first, f, sizeof f);
            fn = n;
            t0 = now_ns();
        } else if (__builtin_expect(n != fn, 0)) {
            die(ht ? "ht_capture: a capture of a different depth"
                   : "unw_backtrace: a capture of a different depth");
        }
        if (i == ITERS)
            break;
    }
    t1 = now_ns();
    r->ns = (t1 - t0) / ITERS;
    if (memcmp(first, f, (size_t)n * sizeof(void *)) != 0)
        die("the last capture differs from the first");
    verify(r, first, fn);
}

/* One round of one configuration and method. */
__attribute__((noinline)) static void run_one(struct run *r)
{
    r->nstep = 0;
    bench_base(r);
    __asm__ volatile("" ::: "memory");
}

/* ---- the table ------------------------------------------------------------- */

struct config {
    int kind, njit, outer;
    char label[48];
    double ns[NMETHODS][ROUNDS_MAX], cold[NMETHODS][ROUNDS_MAX];
    int n[NMETHODS], good[NMETHODS];
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    const char *filter = argc > 2 ? argv[2] : "";
    if (rounds < 1 || rounds > ROUNDS_MAX)
        rounds = 9;
    unw_as = unw_local_addr_space;
    make_jit();
    {
        Dl_info di;
        void *rf = dlsym(RTLD_DEFAULT, "__register_frame");
        printf("__register_frame resolves to %s\n", rf && dladdr(rf, &di) ? di.dli_fname : "(none)");
    }

    /* bench_base's callers: how many positions make DEPTH frames */
    struct run probe;
    memset(&probe, 0, sizeof probe);
    run_one(&probe);
    int npos = DEPTH - 2 - probe.outer_n;   /* leaf, positions, bench_base, callers */
    if (npos < 17)
        die("too many frames outside the chain");

    struct config cfg[1 + 3 * NKINDS];
    int ncfg = 0;
    memset(cfg, 0, sizeof cfg);
    cfg[ncfg].kind = K_NATIVE;
    snprintf(cfg[ncfg++].label, sizeof cfg[0].label, "native only");
    for (int k = 0; k < NKINDS; k++) {
        static const int nj[3] = { 8, 16, 8 }, out[3] = { 0, 0, 1 };
        for (int v = 0; v < 3; v++) {
            cfg[ncfg].kind = k;
            cfg[ncfg].njit = nj[v];
            cfg[ncfg].outer = out[v];
            snprintf(cfg[ncfg].label, sizeof cfg[0].label, "%2d %s, %s", nj[v], kind_name[k],
                     out[v] ? "outer block" : "spread");
            if (strstr(cfg[ncfg].label, filter))
                ncfg++;
        }
    }

    for (int round = 0; round < rounds; round++)
        for (int c = 0; c < ncfg; c++)
            for (int m = 0; m < NMETHODS; m++) {
                struct run r;
                memset(&r, 0, sizeof r);
                r.method = m;
                r.cold = 1;
                r.npos = npos;
                wire(&r, cfg[c].kind, cfg[c].njit, cfg[c].outer);
                run_one(&r);
                if (r.outer_n != probe.outer_n)
                    die("bench_base's callers changed");
                if (round > 0 && (r.n != cfg[c].n[m] || r.good != cfg[c].good[m]))
                    die("a round got another depth than the first");
                cfg[c].n[m] = r.n;
                cfg[c].good[m] = r.good;
                cfg[c].ns[m][round] = r.ns;
                cfg[c].cold[m][round] = r.cold_ns;
            }
    if (cfg[0].good[M_LIBUNWIND] != DEPTH || cfg[0].n[M_LIBUNWIND] != DEPTH)
        die("libunwind does not agree with ht_capture on the native stack");

    printf("%d frames per stack (%d of them outside the chain: bench_base and its callers); "
           "%d captures per round, median of %d rounds; ns\n",
           DEPTH, probe.outer_n + 1, ITERS, rounds);
    printf("%-26s %8s %8s %8s %7s %8s %9s %9s %8s  %s\n", "stack", "ht/call", "ht/frame", "+per JIT", "vs nat",
           "ht cold", "unw/call", "unw/frame", "unw cold", "libunwind");
    double native_ns = 0;
    for (int c = 0; c < ncfg; c++) {
        double ht = median(cfg[c].ns[M_HT], rounds), htc = median(cfg[c].cold[M_HT], rounds);
        double uw = median(cfg[c].ns[M_LIBUNWIND], rounds), uwc = median(cfg[c].cold[M_LIBUNWIND], rounds);
        if (c == 0)
            native_ns = ht;
        char status[64];
        int g = cfg[c].good[M_LIBUNWIND], n = cfg[c].n[M_LIBUNWIND];
        if (g == DEPTH && n == DEPTH)
            snprintf(status, sizeof status, "all %d frames", DEPTH);
        else if (g == n)
            snprintf(status, sizeof status, "stops at a JIT frame: %d frames", n);
        else
            snprintf(status, sizeof status, "wrong after %d frames (%d returned)", g, n);
        char per_jit[16] = "-";
        if (cfg[c].njit)
            snprintf(per_jit, sizeof per_jit, "%.1f", (ht - native_ns) / cfg[c].njit);
        printf("%-26s %8.1f %8.2f %8s %6.2fx %8.0f %9.1f %9.2f %8.0f  %s\n", cfg[c].label, ht, ht / DEPTH, per_jit,
               ht / native_ns, htc, uw, uw / (n ? n : 1), uwc, status);
    }
    printf("(+per JIT: ht/call over the native stack's, per JIT frame; cold: the first capture after the\n"
           " caches were emptied; unw/frame: per frame libunwind returned)\n");
    return 0;
}
