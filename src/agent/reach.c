/* reach.c -- reachability at exit: which of the blocks still allocated
 * when the program ends can it no longer reach? The answer LeakSanitizer
 * and memcheck give ("definitely lost", "indirectly lost", "possibly lost", "still
 * reachable"), computed inside the process at a normal exit, and on
 * demand while it runs (then in a forked copy: attempt_forked).
 *
 * Conservative marking, as a garbage collector does it:
 *  - candidates: every live heap block of the live table (mmap regions are
 *    not candidates), and every block the program announced with
 *    ht_custom_alloc (custom.c; indexed apart, as they lie inside heap
 *    blocks or roots, which are read less them: each_part_outside_custom),
 *    sorted by address so that any word can be looked up
 *    (an interior pointer counts: it points anywhere inside the block,
 *    but only through start pointers, or what start_like() takes for
 *    them, is a block reached; one reached otherwise is possibly lost);
 *  - roots: the program's writable memory, from /proc/self/maps: module
 *    data and bss, its anonymous mappings, TLS, stacks. Not roots: the
 *    heap itself ([heap] and glibc's per-thread arena heaps, recognized by
 *    their heap_info header, also inside a larger mapping; their blocks
 *    are scanned only once reached, and free chunks never; attached, the
 *    chunks in use that are no live block are roots: scan_heap_roots),
 *    the ranges of live blocks inside other
 *    mappings (glibc's mmap'd chunks, which the kernel may merge with a
 *    neighbouring mapping), shared file mappings, and heaptrail's own
 *    memory (sys.c notes every mapping it makes; the live table holds
 *    every block's address). Pages never touched read as zero and are
 *    skipped through /proc/self/pagemap;
 *  - stacks: the exiting thread's above the program's exit call (or, once
 *    main has returned, above __libc_stack_end), with the registers the
 *    exit hook saved; the other threads', asleep or parked by a signal
 *    (below), from their stack pointers, with the parked ones' registers; a dead thread's stack
 *    (glibc caches them) only from its TCB up;
 *  - every aligned 8-byte word of a root or of a reached block that points
 *    into a block reaches it, except glibc's free-list pointers to the
 *    header of the chunk after a block; an obstack's current chunk is
 *    read only below its next_free (obstack_chunk).
 * Blocks not reached are lost. Among them, as memcheck does: a lost block
 * not yet visited heads a clique -- it is "directly lost" and everything
 * lost it leads to is "indirectly lost" (a cycle's first member in address
 * order, or a later block pointing at it, heads it).
 *
 * Roots are read with process_vm_readv (under a seccomp filter: write()
 * into a pipe), which fail instead of faulting on a page that is gone or
 * a file mapping cut short; reached blocks are read directly after a
 * check that they lie in a readable mapping. docs/ARCHITECTURE.md has the
 * reasons and what the scan cannot see.
 *
 * Memory: 24 bytes a live block (the sorted copy) + 8 (the search index)
 * + 4 (the queue of blocks hit only in their middle)
 * + 4 (the work stack) + 24 temporary (the sort), mapped for the scan and
 * released after it; the big ones populated at once (MAP_POPULATE: a
 * fault per page cost more than the copy itself, 70 of 250 ms for a
 * million blocks). */
#include "agent.h"
#include "../format/trace.h"
#include "../platform/linux-x86_64/unwind.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <malloc.h>
#include <signal.h>
#include <sys/auxv.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>

#define PAGE        4096ull
#define HEAP_MAX    (64ull << 20)    /* glibc's HEAP_MAX_SIZE on 64-bit */
#define BUF_BYTES   (1u << 20)
#define OWN_MAX     4096
#define MAP_MAX_BYTES (64u << 20)    /* /proc/self/maps text we accept */

/* A block's mark: its state in the low bits, what start_like() learnt of
 * it above them (once a block). */
enum {
    M_NONE = 0, M_REACHED = 1, M_LEADER = 2, M_INDIRECT = 3,
    M_PCAND = 4,                /* phase 1: so far only pointers into its middle */
    M_POSSIBLE = 5,             /* reached only through such a pointer (phase 3) */
    M_STATE = 7u,
    M_SEEN = 1u << 8,           /* start_like() looked at it: */
    M_LOADER = 1u << 9,         /*   the dynamic loader allocated it */
    M_COUNT = 1u << 10,         /*   its first word a count that divides the rest */
    M_VTABLE = 1u << 11,        /*   its first word a primary C++ vtable pointer */
    M_STRING = 1u << 12,        /*   an old-ABI std::string's representation */
    M_HOLDS = 1u << 13,         /* a heap block with custom blocks inside */
    M_UPTO_SHIFT = 14           /* above: the words of an obstack's current
                                   chunk in use (obstack_chunk); 0: all */
};

typedef struct {
    uintptr_t start, end;
    uint8_t r, w, x, shared, skip, anon, brk;    /* brk: [heap] */
} map_t;

static ht_reach_t R;

static struct {
    ht_live_block_t *b;         /* heap blocks [0, n), then custom ones [n, n + nc) */
    size_t n, nc, cap;
    uint64_t *keys, *sample;    /* find_block's index */
    size_t nsample;
    const map_t *last_map;      /* drain's last mapping */
    uintptr_t lo, span;         /* heap candidates lie in [lo, lo + span) */
    uintptr_t clo, cspan;       /* custom ones in [clo, clo + cspan) */
    uint32_t *stack;
    size_t top;
    uint32_t *cand;             /* blocks marked M_PCAND, in order */
    size_t ncand;
    size_t nnone;               /* blocks still M_NONE: hit by no word yet */
    map_t *maps;
    size_t nmaps, maps_cap;
    char *maps_text;            /* /proc/self/maps as read, kept mapped (scan) */
    size_t maps_text_cap;
    int nown;                   /* heaptrail's mappings in s_own */
    uint8_t *buf;
    size_t buf_ready;           /* its bytes faulted in (buf_for) */
    uintptr_t ld_lo, ld_hi;     /* the dynamic loader's mapping (start_like) */
    int pid;
    int mode;                   /* 1 process_vm_readv, 2 a pipe, 3 /proc/self/mem */
    int pipe[2], pagemap_fd, mem_fd;
    int parent_pagemap_fd;      /* a scan child: its parent's, for shared mappings */
    uint64_t scanned;
    uint32_t leader;
    size_t tid_off;             /* of struct pthread's thread id (find_tid_off) */
    int direct;                 /* every other thread parked: blocks read in place */
} S;
/* out of S, whose reset at each attempt would touch all 64 KiB */
static uintptr_t s_own[OWN_MAX][2];

ht_reach_t *ht__reach_result(void) { return R.status ? &R : NULL; }

/* Where the program stands on the scanning thread: the stack pointer in
 * the hook it called (so the registers the hook's prologue saved are
 * above it), the callee-saved registers, the thread. Or, where an ending
 * signal interrupted it (ht__reach_note_signal): every register, the
 * vector registers' save area, and the stack from the interrupted stack
 * pointer less the red zone (the handler runs on a stack of the agent's). */
typedef struct {
    uintptr_t lo;
    uintptr_t regs[16];
    int nregs;                  /* 6 callee-saved; 16 at a signal */
    uintptr_t fp, fp_len;       /* at a signal: the vector registers' save area */
    int tid;
} caller_t;
static caller_t E;              /* where it called exit (exit, _exit, _Exit), or a signal ended it */
static caller_t C;              /* where it called ht_leak_check (while it runs) */

/* The thread that scans: this one, or in a scan child (attempt_forked),
 * the parent's thread that forked it (its TCB and notes are the copies). */
static int g_scan_tid;

static int scan_tid(void) { return g_scan_tid ? g_scan_tid : ht__gettid(); }

static void note_caller(caller_t *c, uintptr_t lo, const uintptr_t *regs)
{
    ht_store_relaxed(&c->lo, 0);
    __builtin_memcpy(c->regs, regs, 6 * sizeof *regs);
    c->nregs = 6;
    c->fp = c->fp_len = 0;
    c->tid = ht__gettid();
    ht_store_release(&c->lo, lo);
}

/* An interrupted thread's registers from its signal frame: the sixteen
 * general ones (the instruction pointer for the stack pointer, which it
 * returns) and where its vector registers were saved. Those (SSE/AVX)
 * stay in the signal frame while the handler runs: memcpy and memmove
 * hold pointers they move in them, glibc's memmove up to eight 32-byte
 * chunks for the whole copy. The kernel's XSAVE layout: its
 * software-reserved bytes at 464 say how much it saved. */
static uintptr_t context_regs(const void *ucv, uintptr_t regs[16], uintptr_t *fp, uintptr_t *fp_len)
{
    const ucontext_t *uc = ucv;
    const greg_t *g = uc->uc_mcontext.gregs;
    static const int which[16] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                   REG_RBP, REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12,
                                   REG_R13, REG_R14, REG_R15, REG_RIP };
    for (int i = 0; i < 16; i++)
        regs[i] = (uintptr_t)g[which[i]];
    *fp = *fp_len = 0;
    if (uc->uc_mcontext.fpregs) {
        const uint32_t *sw = (const uint32_t *)((const char *)uc->uc_mcontext.fpregs + 464);
        size_t len = sizeof *uc->uc_mcontext.fpregs;
        if (sw[0] == 0x46505853u && sw[1] > len && sw[1] <= (64u << 10))    /* FP_XSTATE_MAGIC1 */
            len = sw[1];
        *fp = (uintptr_t)uc->uc_mcontext.fpregs;
        *fp_len = len & ~(size_t)7;
    }
    return (uintptr_t)g[REG_RSP];
}

void ht__reach_note_signal(const void *uc)
{
    ht_store_relaxed(&E.lo, 0);
    uintptr_t sp = context_regs(uc, E.regs, &E.fp, &E.fp_len);
    E.nregs = 16;
    E.tid = ht__gettid();
    ht_store_release(&E.lo, (sp - 128) & ~(uintptr_t)7);
}

/* The stack pointer a scan takes for this thread's: where an ending
 * signal interrupted the program, if one did (the scan runs in its
 * handler, on the agent's stack), else the scanning code's own. */
static uintptr_t scan_sp(uintptr_t sp)
{
    uintptr_t lo = ht_load_acquire(&E.lo);
    return lo && E.nregs == 16 && E.tid == ht__gettid() ? lo : sp;
}

void ht__reach_note_exit(uintptr_t lo, const uintptr_t *regs)
{
    /* the latest call: a vfork child's _exit writes here too (its tid
     * tells it apart), and its parent's exit comes later */
    note_caller(&E, lo, regs);
}

extern void *__libc_stack_end;

/* The dynamic loader's object, found at its load address (AT_BASE).
 * Not by the address of its variable __libc_stack_end: a program built
 * without PIE that names it (the Boehm collector does; so did
 * tests/progs/stalelink.c) holds its own copy (a copy relocation), and
 * the "loader" found was the program itself: its every block took pointers
 * into its middle as the loader's blocks do, and a lost block read
 * reachable. Run as `ld.so PROG` (AT_BASE 0), by the address of a
 * function of the loader's own. */
static int loader_object(struct dl_find_object *fo)
{
    uintptr_t base = getauxval(AT_BASE);
    return _dl_find_object(base ? (void *)base : (void *)_dl_find_object, fo);
}

/* Whether every frame of this thread's stack is in libc, the loader or
 * heaptrail: main has returned, the program's frames are gone. The
 * outermost frame may be the program's entry code (_start, which calls
 * __libc_start_main a few bytes in and keeps nothing of the program's):
 * until the forty-sixth session it counted as a program frame, so the
 * check never held (nor did it for libc, below) and the exit scan after
 * main's return read from the stack pointer, stale words of main's
 * callees included (tests/progs/stalelink's third block read reachable
 * in every run). */
static int program_frames_gone(void)
{
    void *f[HT_MAX_FRAMES];
    int n = ht_capture(0, HT_MAX_FRAMES, f, NULL);
    struct dl_find_object libc, ld, me, x;
    if (n <= 0 || ht__libc_object(&libc) != 0 ||
        loader_object(&ld) != 0 ||
        _dl_find_object((void *)program_frames_gone, &me) != 0)
        return 0;
    uintptr_t entry = getauxval(AT_ENTRY);
    for (int i = 0; i < n; i++) {
        if (i == n - 1 && entry && (uintptr_t)f[i] - entry < 64)
            break;
        if (_dl_find_object((char *)f[i] - 1, &x) != 0)
            return 0;           /* JIT code, the vdso: not ours to judge */
        if (x.dlfo_link_map != libc.dlfo_link_map && x.dlfo_link_map != ld.dlfo_link_map &&
            x.dlfo_link_map != me.dlfo_link_map)
            return 0;
    }
    return n < HT_MAX_FRAMES;
}

/* Whether site record `site` allocated from code in [lo, hi): its
 * stack's innermost return address. */
static int made_in(uint32_t site, uintptr_t lo, uintptr_t hi)
{
    const ht_site_t *s = ht__site_at(site);
    ht_stacknode_t n;
    return s && ht__stackdb_node(s->stack, &n) == 0 && n.addr > lo && n.addr <= hi;
}

/* ---- raw system calls ---------------------------------------------------- */

static int sys_open(const char *path)
{
    long fd = ht__sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    return fd < 0 ? -1 : (int)fd;
}

static void sys_close(int fd) { ht__sys1(SYS_close, fd); }

/* Reads a whole /proc file into a mapping (grown by doubling). Returns its
 * length, or -1; *out and *cap describe the mapping. */
static long read_file(const char *path, char **out, size_t *cap)
{
    int fd = sys_open(path);
    if (fd < 0)
        return -1;
    size_t c = 64 << 10, len = 0;
    char *b = ht__map(c);
    while (b) {
        if (len == c) {
            if (c >= MAP_MAX_BYTES) {
                ht__unmap(b, c);
                b = NULL;
                break;
            }
            char *nb = ht__map(c * 2);
            if (nb)
                __builtin_memcpy(nb, b, len);
            ht__unmap(b, c);
            b = nb;
            c *= 2;
            continue;
        }
        long k = ht__sys3(SYS_read, fd, b + len, c - len);
        if (k == -4)            /* EINTR */
            continue;
        if (k < 0) {
            ht__unmap(b, c);
            b = NULL;
            break;
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    sys_close(fd);
    if (!b)
        return -1;
    *out = b;
    *cap = c;
    return (long)len;
}

/* ---- stopping the other threads ---------------------------------------------
 *
 * Another thread could hold the only pointer to a block in a register, or
 * move one while we read. A thread asleep in a system call is left alone
 * (a signal would end nanosleep, poll, epoll_wait... with EINTR, SA_RESTART
 * or not): /proc/self/task/TID/syscall gives its stack pointer, its stack
 * is read as it stands, without its registers, and its context-switch
 * counts, read again after the scan, must show it did not run meanwhile
 * (else the caller tries again). A thread running in user space is
 * parked: a real-time signal nobody handles (the highest with the default
 * disposition) runs a handler on it that saves its registers from the
 * signal context and waits on a futex until the scan is done; its stack
 * is then scanned from its stack pointer (less the 128-byte red zone),
 * its registers as roots. A thread interrupted inside heaptrail (it may
 * hold a live-table lock) does not park: it is signalled again shortly.
 * A thread that blocks the signal, or sleeps in sigwaitinfo (which
 * unblocks what it waits for), is never sent it (its sigwait or signalfd
 * would take it for its own); it is looked at again until it sleeps.
 * Threads are listed from /proc/self/task until a pass finds none new.
 * Nothing here waits without bound: a thread neither parked nor asleep
 * within STOP_WAIT_NS cancels the scan ("threads were running"). The
 * handler stays installed (a late signal must not kill the process); it
 * returns at once when it is not expected. The control thread is
 * heaptrail's own and is not stopped. */
#define STOP_MAX     1024
#define STOP_WAIT_NS (300 * 1000000ull)
enum { T_SENT = 1, T_PARKED, T_BUSY, T_GONE, T_BLOCKED, T_RUNNING };

typedef struct {
    int tid;
    int state;
    int sent;                   /* coordinator's: signal sent for this request */
    uintptr_t sp;               /* handler's, with regs; or T_BLOCKED's */
    uintptr_t regs[16];         /* T_BLOCKED: its system call's six arguments */
    uintptr_t fp, fp_len;       /* T_PARKED: its vector registers' save area */
    long nr;                    /* T_BLOCKED: the system call it sleeps in */
    uintptr_t pc;               /* T_BLOCKED: where it made that call */
    int inside;                 /* T_PARKED, in a quiesce: a frame in the agent */
    uint64_t switches;          /* ... and its context switches then */
} stopped_t;

static stopped_t T[STOP_MAX];
static int g_nt;
static int g_release;           /* bumped: threads parked before go on */
static int g_stopping;          /* a stop is under way (the handler parks) */
static int g_stop_sig;
static uintptr_t g_q_lo, g_q_hi;    /* a quiesce's agent code (0, 0: a leak check) */

static long futex(int *addr, int op, int val, const struct timespec *ts)
{
    return ht__syscall6(SYS_futex, (long)addr, op, val, (long)ts, 0, 0);
}

/* This thread's entry in T, or NULL. */
static stopped_t *my_entry(void)
{
    int tid = ht__gettid();
    int n = ht_load_acquire(&g_nt);
    for (int i = 0; i < n; i++)
        if (T[i].tid == tid)
            return &T[i];
    return NULL;
}

/* Marks t parked and waits until the scan that saw generation gen ends
 * (bounded: ~10 s even if the coordinator never says so). */
static void park_wait(stopped_t *t, int gen)
{
    ht_store_release(&t->state, T_PARKED);
    struct timespec ts = { 0, 100 * 1000000 };
    for (int k = 0; k < 100 && ht_load_acquire(&g_release) == gen; k++)
        futex(&g_release, FUTEX_WAIT_PRIVATE, gen, &ts);
}

static void stop_handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    stopped_t *t = my_entry();
    if (!t || ht_load_acquire(&t->state) != T_SENT || !ht_load_acquire(&g_stopping))
        return;
    int gen = ht_load_acquire(&g_release);
    if (ht__guard) {
        /* inside heaptrail: it may hold a lock the scan needs. The hook
         * parks it as it leaves (ht__reach_park); the coordinator also
         * signals again, for agent code that leaves otherwise */
        ht__park_pending = 1;
        ht_store_release(&t->state, T_BUSY);
        return;
    }
    t->sp = context_regs(ucv, t->regs, &t->fp, &t->fp_len);
    /* a quiesce (ht__reach_quiesce): any frame of the agent's, through
     * signal frames to the code a handler of the program's interrupted */
    t->inside = 0;
    uintptr_t qhi = ht_load_acquire(&g_q_hi);
    if (qhi) {
        void *f[64];
        int k = ht_capture_context(ucv, 64, f, NULL);
        for (int j = 0; j < k; j++)
            t->inside |= (uintptr_t)f[j] >= g_q_lo && (uintptr_t)f[j] < qhi;
    }
    park_wait(t, gen);
}

HT_TLS int ht__park_pending;

/* A hook leaving agent code after a stop signal found it inside: parks
 * here as the handler would, with every signal blocked (a handler of the
 * program's must not run on this thread during the scan). Its registers:
 * the callee-saved ones (the program's others are dead across its call
 * into the allocator); its stack from here up. */
void ht__reach_park(void)
{
    ht__park_pending = 0;
    if (!ht_load_acquire(&g_stopping))
        return;
    stopped_t *t = my_entry();
    if (!t || ht_load_acquire(&t->state) != T_BUSY)
        return;                 /* asked again meanwhile: the signal parks it */
    uint64_t all = ~0ull, old;
    if (ht__sys4(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8) != 0)
        return;
    int gen = ht_load_acquire(&g_release);
    uintptr_t regs[6];
    uintptr_t sp = ht__callee_saved(regs);
    __builtin_memset(t->regs, 0, sizeof t->regs);
    __builtin_memcpy(t->regs, regs, sizeof regs);
    t->fp = t->fp_len = 0;
    t->sp = sp;
    if (ht_load_acquire(&g_stopping) && ht_load_acquire(&t->state) == T_BUSY)
        park_wait(t, gen);
    ht__sys4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
}

static int pick_signal(void)
{
    struct sigaction sa, old;
    for (int s = SIGRTMAX; s >= SIGRTMIN + 3; s--) {
        if (sigaction(s, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        __builtin_memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = stop_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigfillset(&sa.sa_mask);
        if (sigaction(s, &sa, NULL) == 0)
            return s;
    }
    return -1;
}

/* Lists a /proc directory of numbered entries (/proc/self/task,
 * /proc/self/fd): calls fn for every number. -1 if unreadable. */
static int each_number(const char *path, void (*fn)(int))
{
    int fd = (int)ht__sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    char buf[4096];
    for (;;) {
        long n = ht__sys3(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) {
            sys_close(fd);
            return n < 0 ? -1 : 0;
        }
        for (long off = 0; off < n;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d =
                (void *)(buf + off);
            int v = 0;
            const char *c = d->name;
            for (; *c >= '0' && *c <= '9'; c++)
                v = v * 10 + (*c - '0');
            if (c > d->name && !*c)
                fn(v);
            off += d->reclen;
        }
    }
}

/* Lists /proc/self/task: calls fn for every thread id. -1 if unreadable. */
static int each_task(void (*fn)(int tid)) { return each_number("/proc/self/task", fn); }

static int g_self, g_ctl, g_new, g_full;

static void note_task(int tid)
{
    if (tid == g_self || tid == g_ctl)
        return;
    for (int i = 0; i < g_nt; i++)
        if (T[i].tid == tid)
            return;
    if (g_nt == STOP_MAX) {
        g_full = 1;
        return;
    }
    T[g_nt].tid = tid;
    T[g_nt].state = T_SENT;
    ht_store_release(&g_nt, g_nt + 1);
    g_new++;
}

static uintptr_t hex(const char **pp);

/* Reads /proc/self/task/TID/NAME into buf (NUL-terminated). */
static long read_task_file(int tid, const char *name, char *buf, size_t cap)
{
    char path[64] = "/proc/self/task/";
    size_t n = 16 + ht__fmt_u64(path + 16, (uint64_t)tid);
    path[n++] = '/';
    for (const char *c = name; *c && n < sizeof path - 1; c++)
        path[n++] = *c;
    path[n] = 0;
    int fd = sys_open(path);
    if (fd < 0)
        return -1;
    long got = ht__sys3(SYS_read, fd, buf, cap - 1);
    sys_close(fd);
    if (got < 0)
        return -1;
    buf[got] = 0;
    return got;
}

/* In /proc text s: what follows the first `key` and its blanks, or NULL. */
static const char *after_key(const char *s, const char *key)
{
    for (; *s; s++) {
        const char *a = s, *b = key;
        while (*b && *a == *b)
            a++, b++;
        if (*b)
            continue;
        while (*a == ' ' || *a == '\t')
            a++;
        return a;
    }
    return NULL;
}

static uint64_t dec_after(const char *s, const char *key)
{
    const char *a = after_key(s, key);
    if (!a)
        return UINT64_MAX;
    uint64_t v = 0;
    while (*a >= '0' && *a <= '9')
        v = v * 10 + (uint64_t)(*a++ - '0');
    return v;
}

/* The system call thread tid sleeps in (/proc/self/task/TID/syscall:
 * number, six arguments, sp, pc), its stack pointer and, if args is not
 * NULL, its six arguments (registers rdi, rsi, rdx, r10, r8, r9: a
 * read() buffer may be held nowhere else). Returns 0, or -1 when it is
 * not in one ("running", or "-1 ..."). */
static int task_syscall(int tid, long *nr, uintptr_t *sp, uintptr_t *args, uintptr_t *pc)
{
    char b[256];
    if (read_task_file(tid, "syscall", b, sizeof b) <= 0 || b[0] < '0' || b[0] > '9')
        return -1;
    const char *p = b;
    *nr = 0;
    while (*p >= '0' && *p <= '9')
        *nr = *nr * 10 + (*p++ - '0');
    uintptr_t f[8] = { 0 };
    for (int i = 0; i < 8 && *p; i++) {
        while (*p == ' ')
            p++;
        if (p[0] == '0' && p[1] == 'x')
            p += 2;
        f[i] = hex(&p);
    }
    *sp = f[6];
    if (pc)
        *pc = f[7];
    if (args)
        __builtin_memcpy(args, f, 6 * sizeof *args);
    return f[6] ? 0 : -1;
}

/* A thread asleep in a system call (state S: a wait a signal would
 * interrupt; a thread in D, an uninterruptible disk wait, or R, on its way
 * in or out, is soon running and gets the signal): its stack does not
 * change while it sleeps. /proc/self/task/TID/syscall gives the call, its arguments
 * (scanned as roots) and the stack pointer (not the other registers: the
 * callee-saved ones may hold pointers the scan cannot see); its
 * context-switch counts tell afterwards whether it ran meanwhile.
 * Returns 0 and fills t, or -1. */
static int sleeping_thread(stopped_t *t)
{
    long nr;
    uintptr_t sp, pc, args[6];
    char b[4096];
    const char *st;
    if (task_syscall(t->tid, &nr, &sp, args, &pc) != 0 || read_task_file(t->tid, "status", b, sizeof b) <= 0 ||
        !(st = after_key(b, "State:")) || *st != 'S')
        return -1;              /* running, or in a system call it will leave soon (R, D) */
    uint64_t v = dec_after(b, "voluntary_ctxt_switches:"), n = dec_after(b, "nonvoluntary_ctxt_switches:");
    if (v == UINT64_MAX || n == UINT64_MAX)
        return -1;
    t->nr = nr;
    t->sp = sp;
    t->pc = pc;
    __builtin_memcpy(t->regs, args, sizeof args);
    t->switches = v + n;
    return 0;
}

/* Whether the thread blocks signal sig (/proc/self/task/TID/status SigBlk). */
static int blocks_signal(int tid, int sig)
{
    char b[4096];
    const char *p;
    if (read_task_file(tid, "status", b, sizeof b) <= 0 || !(p = after_key(b, "SigBlk:")))
        return 0;
    return (hex(&p) >> (sig - 1)) & 1;
}

/* Whether the thread sleeps in sigwaitinfo/sigtimedwait (the kernel
 * unblocks the signals it waits for until it returns). */
static int in_sigwait(int tid)
{
    long nr;
    uintptr_t sp;
    return task_syscall(tid, &nr, &sp, NULL, NULL) == 0 && nr == SYS_rt_sigtimedwait;
}

/* After the scan: did a sleeping thread stay asleep in the same call? */
static int still_sleeping(stopped_t *t)
{
    stopped_t now = *t;
    return sleeping_thread(&now) == 0 && now.nr == t->nr && now.sp == t->sp &&
           now.switches == t->switches;
}

/* Whether a sleeping thread's system call is restarted unseen after our
 * handler (SA_RESTART): a futex wait without a timeout -- a mutex, a
 * condition variable, a join, sem_wait, where a thread pool's idle
 * workers sleep. The kernel answers a signal there with ERESTARTSYS,
 * which SA_RESTART restarts; a wait with a timeout needs a restart block,
 * which a handler turns into EINTR (sem_timedwait would return it). A
 * wake that comes while the handler runs changed the futex word first,
 * so the restarted wait returns at once. */
static int restarts_unseen(const stopped_t *t)
{
    long cmd = (long)(t->regs[1] & ~(uintptr_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME));
    return t->nr == SYS_futex && (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) && t->regs[3] == 0;
}

/* Parks every other thread. Returns 0, the number of threads that could
 * not be stopped, or -1 if the threads cannot be listed. */
static int stop_others(void)
{
    g_self = ht__gettid();
    g_ctl = ht__control_tid();
    if (g_ctl > 0 && ht__sys3(SYS_tgkill, S.pid, g_ctl, 0) != 0)
        g_ctl = 0;
    int first = 1;
    uint64_t deadline = ht__mono_ns() + STOP_WAIT_NS;
    for (;;) {
        g_new = 0;
        if (each_task(note_task) != 0)
            return -1;
        if (g_full)
            return g_nt;
        if (!g_new && !first)
            break;              /* every thread there is, is parked */
        if (g_nt && g_stop_sig == 0 && (g_stop_sig = pick_signal()) < 0)
            return g_nt;
        ht_store_release(&g_stopping, 1);
        first = 0;
        for (;;) {
            int waiting = 0;
            for (int i = 0; i < g_nt; i++) {
                int st = ht_load_acquire(&T[i].state);
                if (st == T_BUSY) {
                    T[i].sent = 0;      /* ask again */
                    ht_store_release(&T[i].state, T_SENT);
                    st = T_SENT;
                }
                if (st == T_SENT && !T[i].sent) {
                    T[i].sent = 1;
                    /* asleep in a system call: left alone (a signal ends
                     * poll, epoll_wait, select, nanosleep... with EINTR,
                     * SA_RESTART or not), its stack read as it stands --
                     * unless the kernel restarts the call unseen
                     * (restarts_unseen): then it is parked like a running
                     * thread and its registers are read */
                    if (sleeping_thread(&T[i]) == 0 && !restarts_unseen(&T[i])) {
                        ht_store_release(&T[i].state, T_BLOCKED);
                        continue;
                    }
                    /* never to a thread that blocks it: a sigwait or a
                     * signalfd there would take it for the program's own */
                    if (blocks_signal(T[i].tid, g_stop_sig) || in_sigwait(T[i].tid)) {
                        ht_store_release(&T[i].state, T_RUNNING);
                        continue;
                    }
                    if (ht__sys3(SYS_tgkill, S.pid, T[i].tid, g_stop_sig) != 0) {
                        ht_store_release(&T[i].state, T_GONE);
                        continue;
                    }
                }
                /* T_BUSY too: a handler that ran since the signal was
                 * sent (inside heaptrail) is asked again next round; not
                 * counting it let the scan start with that thread running */
                int now = ht_load_acquire(&T[i].state);
                waiting += now == T_SENT || now == T_BUSY;
            }
            /* one that blocks the signal and runs may be about to sleep
             * (a wait in a moment), or unblock it: looked at again every
             * ~1 ms, asleep or else by the round above, which sends it the
             * signal unless it still blocks it. (A thread a previous stop
             * parked blocks the signal until it has left the handler;
             * under load that can be after the next stop looked: it was
             * taken for one that blocks the signal for good, and a check
             * after a forked try that gave up failed with "1 other thread
             * was running".) */
            int running = 0;
            for (int i = 0; i < g_nt; i++)
                if (T[i].state == T_RUNNING) {
                    if (++T[i].sent % 20 != 0) {
                        running++;
                    } else if (sleeping_thread(&T[i]) == 0) {
                        ht_store_release(&T[i].state, T_BLOCKED);
                    } else {
                        T[i].sent = 0;
                        ht_store_release(&T[i].state, T_SENT);
                        waiting++;
                    }
                }
            if (!waiting && !running)
                break;
            if (ht__mono_ns() > deadline) {
                int n = running;
                for (int i = 0; i < g_nt; i++)
                    if (T[i].state == T_SENT || T[i].state == T_BUSY) {
                        if (sleeping_thread(&T[i]) == 0)
                            T[i].state = T_BLOCKED;
                        else
                            n++;
                    }
                if (n)
                    return n;
                break;
            }
            struct timespec ts = { 0, 50 * 1000 };
            ht__sys2(SYS_nanosleep, &ts, NULL);
        }
    }
    return 0;
}

static void release_others(void)
{
    ht_store_release(&g_stopping, 0);
    __atomic_fetch_add(&g_release, 1, __ATOMIC_ACQ_REL);
    futex(&g_release, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
}

/* The lowest stack pointer of a parked thread in [lo, hi), or 0. */
static uintptr_t parked_sp_in(uintptr_t lo, uintptr_t hi)
{
    uintptr_t best = 0;
    for (int i = 0; i < g_nt; i++)
        if ((T[i].state == T_PARKED || T[i].state == T_BLOCKED) && T[i].sp >= lo && T[i].sp < hi &&
            (!best || T[i].sp < best))
            best = T[i].sp;
    return best;
}

/* Reads [src, src + len) of this process into dst without faulting.
 * Returns the bytes read from the start (short at an unreadable page).
 * Under a seccomp filter, through a pipe (write() fails with EFAULT on a
 * bad page instead of faulting), 64 KiB at a time. */
static long read_mem(void *dst, uintptr_t src, size_t len)
{
    if (S.mode == 1) {
        struct iovec l = { dst, len }, r = { (void *)src, len };
        return ht__syscall6(SYS_process_vm_readv, S.pid, (long)&l, 1, (long)&r, 1, 0);
    }
    if (S.mode == 3)
        return ht__syscall6(SYS_pread64, S.mem_fd, (long)dst, (long)len, (long)src, 0, 0);
    size_t done = 0;
    while (done < len) {
        size_t n = len - done > (64u << 10) ? (64u << 10) : len - done;
        long w = ht__sys3(SYS_write, S.pipe[1], src + done, n);
        if (w <= 0)
            break;
        for (long got = 0; got < w;) {
            long r = ht__sys3(SYS_read, S.pipe[0], (char *)dst + done + got, (size_t)(w - got));
            if (r <= 0)
                return -1;  /* cannot happen: the pipe holds what was written */
            got += r;
        }
        done += (size_t)w;
        if ((size_t)w < n)
            break;
    }
    return (long)done;
}

static int pick_reader(void)
{
    uint64_t probe = 0, v = 0x5a5a;
    if (S.mem_fd >= 0) {        /* a scan child */
        S.mode = 3;
        if (read_mem(&probe, (uintptr_t)&v, sizeof v) == sizeof v && probe == v)
            return 0;
    }
    if (!ht__seccomp_filtered()) {
        S.mode = 1;
        if (read_mem(&probe, (uintptr_t)&v, sizeof v) == sizeof v && probe == v)
            return 0;
    }
    S.mode = 2;
    if (ht__sys2(SYS_pipe2, S.pipe, O_CLOEXEC) != 0)
        return -1;
    /* a pipe holds 64 KiB by default: enough for every piece we write */
    return read_mem(&probe, (uintptr_t)&v, sizeof v) == sizeof v && probe == v ? 0 : -1;
}

/* ---- candidates ---------------------------------------------------------- */

/* LSD radix sort by address (bits 4..47: blocks are 16-byte aligned and
 * user addresses have 47 bits), 11 bits a pass. */
static int sort_blocks(ht_live_block_t *b, size_t n)
{
    if (n < 2)
        return 0;
    ht_live_block_t *t = ht__map_populated(n * sizeof *t);
    if (!t)
        return -1;
    static size_t cnt[2048];
    ht_live_block_t *src = b, *dst = t;
    for (unsigned shift = 4; shift < 48; shift += 11) {
        __builtin_memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < n; i++)
            cnt[(src[i].addr >> shift) & 2047]++;
        if (cnt[(src[0].addr >> shift) & 2047] == n)
            continue;           /* every key has this digit */
        size_t sum = 0;
        for (unsigned d = 0; d < 2048; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[cnt[(src[i].addr >> shift) & 2047]++] = src[i];
        ht_live_block_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != b)
        __builtin_memcpy(b, src, n * sizeof *b);
    ht__unmap(t, n * sizeof *t);
    return 0;
}

static HT_ALWAYS_INLINE uint64_t block_end(const ht_live_block_t *x)
{
    return x->addr + (x->size ? x->size : 1);
}

/* The block holding address v, or -1. Two levels, so that a lookup among
 * a million blocks touches a few cache lines instead of twenty: every
 * SAMPLE-th block's address in a small array (kept in cache), then the
 * addresses alone (8 bytes each) between two samples. */
#define SAMPLE_BITS 6
static HT_ALWAYS_INLINE long find_block(uintptr_t v)
{
    size_t lo = 0, hi = S.nsample;  /* the last sample at or below v */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (S.sample[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    size_t a = lo << SAMPLE_BITS, b = a + ((size_t)1 << SAMPLE_BITS);
    if (b > S.n)
        b = S.n;
    while (b - a > 1) {             /* the last address at or below v */
        size_t mid = (a + b) / 2;
        if (S.keys[mid] <= v)
            a = mid;
        else
            b = mid;
    }
    return (S.keys[a] <= v && v < block_end(&S.b[a])) ? (long)a : -1;
}

/* The first block ending above v (S.n if none). */
static size_t first_ending_above(uintptr_t v)
{
    size_t lo = 0, hi = S.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (block_end(&S.b[mid]) <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Custom blocks (S.b[S.n, S.n + S.nc), by address): the first starting
 * above v. They lie inside heap blocks, mappings or static data, so they
 * have an index of their own; a program's announcements do not overlap
 * one another (where they do, an address counts toward the block
 * starting last at or below it). */
static size_t custom_above(uintptr_t v)
{
    size_t lo = S.n, hi = S.n + S.nc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (S.b[mid].addr <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The custom block holding address v, or -1. */
static HT_NOINLINE long find_custom(uintptr_t v)
{
    size_t i = custom_above(v);
    return i > S.n && v < block_end(&S.b[i - 1]) ? (long)(i - 1) : -1;
}

/* The first custom block ending above v (S.n + S.nc if none). */
static size_t first_custom_ending_above(uintptr_t v)
{
    size_t i = custom_above(v);
    return i > S.n && block_end(&S.b[i - 1]) > v ? i - 1 : i;
}

/* Calls fn on the parts of [a, end) (8-byte aligned) outside every custom
 * block: what a heap block holding custom blocks, or a root, is read as.
 * A custom block's memory is read once the block is reached, as its own. */
static void each_part_outside_custom(uintptr_t a, uintptr_t end, int phase,
                                     void (*fn)(uintptr_t, uintptr_t, int))
{
    for (size_t j = first_custom_ending_above(a); a < end && j < S.n + S.nc && S.b[j].addr < end; j++) {
        uintptr_t cs = S.b[j].addr & ~(uintptr_t)7, ce = (block_end(&S.b[j]) + 7) & ~(uint64_t)7;
        if (cs > a)
            fn(a, cs < end ? cs : end, phase);
        if (ce > a)
            a = ce;
    }
    if (a < end)
        fn(a, end, phase);
}

/* ---- marking ------------------------------------------------------------- */

static HT_ALWAYS_INLINE uint32_t state(const ht_live_block_t *x) { return x->mark & M_STATE; }

static HT_ALWAYS_INLINE void set_state(ht_live_block_t *x, uint32_t st)
{
    x->mark = (x->mark & ~M_STATE) | st;
}

static const map_t *map_of(uintptr_t a);

/* One aligned word: in place when every other thread is parked and a
 * readable mapping holds it (the python3 of PYTHONMALLOC=malloc points
 * 16 bytes into most of its blocks: a system call for each would cost
 * seconds at exit), else through the scan's reader. */
static int read_word(uintptr_t a, uint64_t *v)
{
    if (a & 7 || a < 4096)
        return 0;
    if (S.direct) {
        const map_t *m = map_of(a);
        if (!m || !m->r)
            return 0;
        *v = *(const volatile uint64_t *)a;
        return 1;
    }
    return read_mem(v, a, sizeof *v) == sizeof *v;
}

/* Whether vptr may be a C++ vtable pointer (into memory the program
 * cannot write: vtables live in .data.rel.ro) whose offset-to-top (the
 * word two before the one it points at, Itanium ABI) is `off`. */
static int vtable_offset_is(uint64_t vptr, int64_t off)
{
    uint64_t w;
    const map_t *m;
    return vptr >= 4096 + 16 && (m = map_of(vptr - 16)) && m->r && !m->w &&
           read_word(vptr - 16, &w) && (int64_t)w == off;
}

/* Whether a pointer v into the middle of block x counts as one to its
 * start, because the program keeps such pointers to live data as a rule.
 * memcheck's heuristics:
 *  - 8 bytes in, the first word a count that divides the rest of the
 *    block: a C++ new[] array's cookie (its element count), a length
 *    prefix (sqlite3's allocator keeps the size there and hands out the
 *    address after it);
 *  - a secondary C++ vtable pointer of an object whose first word is its
 *    primary one (multiple inheritance: a pointer to a base class
 *    subobject), told by the vtables' offset-to-top: 0 for the first,
 *    minus v's offset in the block for the second;
 *  - 24 bytes in, the block shaped as libstdc++'s old-ABI (copy-on-write)
 *    std::string representation: length, capacity, reference count, then
 *    the characters the string object points at, the block exactly
 *    24 + capacity + 1 bytes and the length at most the capacity (code
 *    built with _GLIBCXX_USE_CXX11_ABI=0, or before GCC 5).
 * And one of ours: any pointer into a block the dynamic loader allocated
 * itself (its stack's innermost return address in the loader): it keeps
 * pointers into their middle (a thread's DTV 16 bytes in,
 * _dl_find_object's segments) and they are never the program's to free
 * (memcheck calls every cached thread's DTV possibly lost).
 * What the block's allocator and first word say is found once and kept
 * in the mark. */
static HT_NOINLINE int start_like(ht_live_block_t *x, uintptr_t v)
{
    if (!(x->mark & M_SEEN)) {
        uint64_t w0;
        x->mark |= M_SEEN;
        if (made_in(x->site, S.ld_lo, S.ld_hi)) {
            x->mark |= M_LOADER;
        } else if (x->size >= 16 && read_word(x->addr, &w0)) {
            uint64_t rest = x->size - 8;
            if (w0 && w0 <= rest && rest % w0 == 0)
                x->mark |= M_COUNT;
            else if (vtable_offset_is(w0, 0))
                x->mark |= M_VTABLE;
            uint64_t cap;
            if (x->size > 24 && read_word(x->addr + 8, &cap) && cap == x->size - 25 && w0 <= cap)
                x->mark |= M_STRING;
        }
    }
    if (x->mark & M_LOADER)
        return 1;
    if (v & 7)
        return 0;
    if (v == x->addr + 8 && (x->mark & M_COUNT))
        return 1;
    if (v == x->addr + 24 && (x->mark & M_STRING))
        return 1;
    uint64_t vp;
    return (x->mark & M_VTABLE) && v + 8 <= x->addr + x->size && read_word(v, &vp) &&
           vtable_offset_is(vp, -(int64_t)(v - x->addr));
}

/* glibc (since 2.32) links a free chunk to the next of its tcache or
 * fastbin list through the chunk's first word, safe-linked: the word is
 * the next one's address (its user address in a tcache, its header in a
 * fastbin) xor the word's own address >> 12. malloc hands the chunk out
 * with that word as it was, and a program need not write it. Where the
 * heap lies low (a program built without PIE: the heap follows its bss,
 * about 1 GiB up at most) the shifted address is small, and the word
 * reads as the next chunk's address with its low bits scrambled: an
 * address in some block nearby, most often its middle, which made a lost
 * block read possibly lost now and then (tests/progs/stalelink.c; in
 * attachee_now under reattach.sh 1 run in 30-120). A word at the start of
 * a chunk that decodes so to a chunk of the same size (one list holds one
 * size) is not taken for a pointer into a block's middle; a pointer to a
 * block's start still counts. `at` is where the word lies, 0 if nowhere
 * (registers). Asked only where the word would change a block's state
 * (visit), not at every hit: pointers into blocks' middles are common
 * (sqlite3's page cache) and each answer costs up to three reads. */
static HT_NOINLINE int stale_link(uintptr_t at, uintptr_t v)
{
    uint64_t h, n;
    uintptr_t r = v ^ (at >> 12);
    if (!at || (at & 15) || (r & 15) || !read_word(at - 8, &h))
        return 0;
    uint64_t size = h & ~(uint64_t)7;
    if ((h & 2) || size < 32 || (size & 15))
        return 0;
    return (read_word(r - 8, &n) && (n & ~(uint64_t)5) == size) ||
           (read_word(r + 8, &n) && (n & ~(uint64_t)5) == size);
}

/* Whether v, a word at `at` that points into block x, is a stale link
 * into its middle rather than a pointer. */
static HT_ALWAYS_INLINE int stale_mid(const ht_live_block_t *x, uintptr_t v, uintptr_t at)
{
    return v != x->addr && stale_link(at, v);
}

/* When the words w[0..4) are a struct obstack's chunk, object_base,
 * next_free and chunk_limit (glibc's and libiberty's layout), w[0] the
 * start of block x and w[3] its end, notes in x's mark that only its
 * words below next_free are to be read: the rest of the chunk is none
 * of the obstack's. It holds what malloc left there: obstack_begin
 * writes the chunk's 16-byte header and nothing more, and a chunk glibc
 * took back from its tcache (never perturbed, even with
 * glibc.malloc.perturb) holds the freed block's words as they were. gdb
 * 13 frees a std::vector<char *>'s 256-byte buffer as the vector grows,
 * and a static obstack's first chunk is that buffer: 30 stale pointers
 * to strings lost at exit read reachable (memcheck's malloc never hands
 * freed memory back, and its scan skips words whose bits are undefined;
 * tests/progs/obstackstale). The chunk is known by its first word, its
 * limit (chunk_limit, the end of the block malloc was asked for), and
 * the obstack's pointers in order inside it. Only the current chunk:
 * the tails of earlier ones (reached through each chunk's prev word)
 * are read whole. Learnt where a pointer first reaches the block, which
 * for a current chunk is the obstack's own word, bar a stale one read
 * before it. */
static HT_NOINLINE void obstack_chunk(ht_live_block_t *x, const uintptr_t *w)
{
    uintptr_t base = w[1], next = w[2], limit = w[3];
    uint64_t first, words = (next - x->addr + 7) / 8;
    if (base >= x->addr + 16 && base <= next && next <= limit &&
        words < (1u << (32 - M_UPTO_SHIFT)) && read_word(x->addr, &first) && first == limit)
        x->mark |= (uint32_t)words << M_UPTO_SHIFT;
}

/* Phase 1 reaches blocks through pointers to their start (or what
 * start_like() accepts) and queues those hit only in their middle; phase
 * 3 reaches, from the queued ones still unreached, what only such
 * pointers lead to (possibly lost, as memcheck says); phase 2 groups what
 * neither reached into lost cliques. */
static HT_ALWAYS_INLINE void visit(long k, int phase, uintptr_t v, uintptr_t at,
                                   const uintptr_t *w, size_t left)
{
    ht_live_block_t *x = &S.b[k];
    uint32_t st = state(x);
    if (phase == 1) {
        if (st != M_NONE && st != M_PCAND)
            return;
        if (v == x->addr || start_like(x, v)) {
            S.nnone -= st == M_NONE;
            set_state(x, M_REACHED);
            if (left >= 4 && v == x->addr && w[3] == v + x->size)
                obstack_chunk(x, w);
            S.stack[S.top++] = (uint32_t)k;
        } else if (st == M_NONE && !stale_mid(x, v, at)) {
            S.nnone--;
            set_state(x, M_PCAND);
            S.cand[S.ncand++] = (uint32_t)k;
        }
    } else if (phase == 3) {
        if ((st == M_NONE || st == M_PCAND) && !stale_mid(x, v, at)) {
            S.nnone -= st == M_NONE;
            set_state(x, M_POSSIBLE);
            S.stack[S.top++] = (uint32_t)k;
        }
    } else if (st == M_NONE && !stale_mid(x, v, at)) {
        S.nnone--;
        set_state(x, M_INDIRECT);
        S.stack[S.top++] = (uint32_t)k;
    } else if (st == M_LEADER && (uint32_t)k != S.leader && !stale_mid(x, v, at)) {
        set_state(x, M_INDIRECT);   /* an earlier clique's head: now part of this one */
    }
}

/* glibc's free lists (in its arenas' malloc_state, in libc's data for the
 * main arena; and as stale words in reused memory) point at free chunks'
 * headers; the header of the chunk after a block lies 8 bytes before the
 * end of the block's usable size, inside the block when that much of it
 * was asked for. Such a word does not make the block reachable. */
static HT_NOINLINE int is_next_chunk_header(const ht_live_block_t *x, uintptr_t v)
{
    /* the usable size is at least the size asked for: only a word into
     * the block's last 8 bytes can be one. The chunk's size field (flags
     * in its low bits; an mmap'd chunk has 16 bytes of header, others 8
     * usable in the next chunk) is read without faulting: on demand a
     * thread may free the block meanwhile. A usable size out of bounds
     * (not glibc's allocator, or a freed chunk) keeps the word. */
    if (v == x->addr || v + 8 < x->addr + x->size)
        return 0;
    uint64_t hdr;
    if (read_mem(&hdr, x->addr - 8, sizeof hdr) != sizeof hdr)
        return 0;
    uint64_t usable = (hdr & ~7ull) - (hdr & 2 ? 16 : 8);
    return usable >= x->size && usable <= x->size + 64 && v + 8 == x->addr + usable;
}

/* The words w[0..nw), read from `at` (0: from registers, which hold no
 * obstack). */
static void scan_words(const uintptr_t *w, size_t nw, int phase, uintptr_t at)
{
    uintptr_t lo = S.lo, span = S.span, clo = S.clo, cspan = S.cspan;
    for (size_t i = 0; i < nw; i++) {
        uintptr_t v = w[i];
        if (v - lo < span) {
            long k = find_block(v);
            if (k >= 0 && (v & 7 || !is_next_chunk_header(&S.b[k], v)))
                visit(k, phase, v, at ? at + i * sizeof(uintptr_t) : 0, w + i, at ? nw - i : 0);
        }
        /* a pointer into a custom block also points into the heap block
         * around it: both are hit */
        if (ht_unlikely(v - clo < cspan)) {
            long k = find_custom(v);
            if (k >= 0)
                visit(k, phase, v, at ? at + i * sizeof(uintptr_t) : 0, w, 0);
        }
    }
    S.scanned += nw * sizeof(uintptr_t);
}

/* S.buf, its first `len` bytes faulted in (one madvise for the pages not
 * yet used instead of a page fault each: ht__populate). */
static uint8_t *buf_for(size_t len)
{
    if (len > S.buf_ready) {
        ht__populate(S.buf + S.buf_ready, len - S.buf_ready);
        S.buf_ready = (len + PAGE - 1) & ~(PAGE - 1);
    }
    return S.buf;
}

/* Reads [lo, hi) (8-byte aligned) in buffer-sized pieces and scans it. */
static void scan_read_phase(uintptr_t lo, uintptr_t hi, int phase)
{
    while (lo < hi) {
        size_t len = hi - lo > BUF_BYTES ? BUF_BYTES : hi - lo;
        long k = read_mem(buf_for(len), lo, len);
        if (k > 0)
            scan_words((const uintptr_t *)S.buf, (size_t)k / sizeof(uintptr_t), phase, lo);
        if (k == (long)len) {
            lo += len;
            continue;
        }
        /* an unreadable page: go on after it */
        uintptr_t at = lo + (k > 0 ? (uintptr_t)k : 0);
        lo = (at & ~(PAGE - 1)) + PAGE;
    }
}

static void scan_read(uintptr_t lo, uintptr_t hi) { scan_read_phase(lo, hi, 1); }

/* [lo, hi) read (or, `direct`, scanned in place), less the pages never
 * touched, neither present nor swapped out by /proc/self/pagemap: they
 * read as zeros and hold no pointer, and reading them would fault in
 * memory the program never used (xz -9's 674 MB of untouched dictionary
 * took the exit's leak check 1.8 s and the process's peak RSS from 70 to
 * 694 MB). All of it if pagemap cannot be read. [lo, hi) lies in one
 * mapping.
 *
 * A scan child reads its own page table, a copy of its parent's made by
 * the fork (a private mapping never written gets no entries: it holds
 * only its file's bytes), except for a shared mapping: a fork does not
 * copy those entries, and there (memory the parent goes on changing,
 * copy or not) it reads the parent's. The parent's for everything was wrong: a block
 * the parent moved or freed after the fork was unmapped there, and the
 * copy of it was skipped as untouched -- a growing array's 490-968
 * children called lost in 15 checks of 20 (tests/progs/regrow mmap), and
 * python3's json lists now and then in the soak. */
static void scan_touched(uintptr_t lo, uintptr_t hi, int phase, int direct)
{
    int fd = S.pagemap_fd;
    if (S.parent_pagemap_fd >= 0 && hi - lo > 16 * PAGE) {
        const map_t *m = map_of(lo);
        if (m && m->shared)
            fd = S.parent_pagemap_fd;
    }
    if (fd < 0 || hi - lo <= 16 * PAGE) {
        if (direct)
            scan_words((const uintptr_t *)lo, (hi - lo) / sizeof(uintptr_t), phase, lo);
        else
            scan_read_phase(lo, hi, phase);
        return;
    }
    static uint64_t pm[512];
    uintptr_t p = lo & ~(PAGE - 1);
    while (p < hi) {
        size_t npages = (hi - p + PAGE - 1) / PAGE;
        if (npages > 512)
            npages = 512;
        long k = ht__syscall6(SYS_pread64, fd, (long)pm, (long)(npages * 8),
                              (long)(p / PAGE * 8), 0, 0);
        if (k != (long)(npages * 8)) {
            uintptr_t a = p > lo ? p : lo;
            if (direct)
                scan_words((const uintptr_t *)a, (hi - a) / sizeof(uintptr_t), phase, a);
            else
                scan_read_phase(a, hi, phase);
            return;
        }
        for (size_t i = 0; i < npages;) {
            if (!(pm[i] >> 62)) {   /* neither present (63) nor swapped (62) */
                i++;
                continue;
            }
            size_t j = i + 1;
            while (j < npages && (pm[j] >> 62))
                j++;
            uintptr_t a = p + i * PAGE, e = p + j * PAGE;
            if (a < lo)
                a = lo;
            if (e > hi)
                e = hi;
            if (a < e) {
                if (direct)
                    scan_words((const uintptr_t *)a, (e - a) / sizeof(uintptr_t), phase, a);
                else
                    scan_read_phase(a, e, phase);
            }
            i = j;
        }
        p += npages * PAGE;
    }
}

/* A root range: the pages ever touched. */
static void scan_root_pages(uintptr_t lo, uintptr_t hi) { scan_touched(lo, hi, 1, 0); }

/* A root range less the live heap blocks inside it. */
static void scan_root_less_heap(uintptr_t lo, uintptr_t hi, int phase)
{
    (void)phase;
    for (size_t i = first_ending_above(lo); lo < hi && i < S.n && S.b[i].addr < hi; i++) {
        if (S.b[i].addr > lo)
            scan_root_pages(lo, S.b[i].addr & ~(uintptr_t)7);
        uint64_t e = (block_end(&S.b[i]) + 7) & ~7ull;
        if (e > lo)
            lo = e;
    }
    if (lo < hi)
        scan_root_pages(lo, hi);
}

/* A root range less the live blocks, heap and custom, inside it. */
static void scan_root(uintptr_t lo, uintptr_t hi)
{
    lo = (lo + 7) & ~(uintptr_t)7;
    hi &= ~(uintptr_t)7;
    if (S.nc)
        each_part_outside_custom(lo, hi, 1, scan_root_less_heap);
    else
        scan_root_less_heap(lo, hi, 1);
}

/* A root range less heaptrail's own mappings. */
static void scan_root_not_ours(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < S.nown && lo < hi; i++) {
        uintptr_t a = s_own[i][0], e = s_own[i][1];
        if (e <= lo || a >= hi)
            continue;
        if (a > lo)
            scan_root_not_ours(lo, a);
        lo = e;
    }
    if (lo < hi)
        scan_root(lo, hi);
}

static const map_t *map_of(uintptr_t a)
{
    size_t lo = 0, hi = S.nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (S.maps[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < S.nmaps && S.maps[lo].start <= a ? &S.maps[lo] : NULL;
}

/* Scans the blocks on the work stack, and the blocks they reach. With
 * every other thread parked nothing changes the heap meanwhile, and the
 * blocks are read in place; with a thread only asleep in a system call,
 * it may wake, free a block and unmap its memory while we read: then
 * they are read with read_mem, up to BATCH blocks a call (a wrong result
 * is caught by its context-switch count, a fault could not be).
 *
 * A block may span several mappings: a program that mprotects part of a
 * block it allocated (a guard page at the start of a stack or buffer
 * taken from malloc) splits the heap's mapping there. Its readable parts
 * are scanned, each in place or read; a part no mapping covers ends the
 * block (freed behind our back). Until the fifteenth session such a
 * block was skipped whole, and what only it held was called lost. */
#define BATCH 512
/* Whether reading the blocks on the stack can still change a mark.
 * Phase 3 marks, besides blocks queued as hit in their middle (each
 * marked in its own turn anyway), only blocks no word has hit yet: once
 * there are none, what is left to read cannot change a thing (sqlite3's
 * workload: 20 MB of page cache held through pointers into its blocks,
 * 4.6 ms of reading at exit for nothing). */
static HT_ALWAYS_INLINE int worth_reading(int phase) { return phase != 3 || S.nnone; }

/* [a, end) in place, each readable mapping's part of it. */
static void scan_in_place(uintptr_t a, uintptr_t end, int phase)
{
    const map_t *m = S.last_map;
    if (!m || a < m->start || a >= m->end)
        S.last_map = m = map_of(a);
    while (m && m->start <= a && a < end) {
        uintptr_t e = m->end < end ? m->end : end;
        if (m->r)
            scan_touched(a, e, phase, 1);
        a = e;
        m = m + 1 < S.maps + S.nmaps ? m + 1 : NULL;
    }
}

static void scan_read_touched(uintptr_t a, uintptr_t end, int phase) { scan_touched(a, end, phase, 0); }

/* A block's aligned words: [*a, return). A heap block is 16-aligned; a
 * custom block may lie anywhere (its straddling words are read with
 * neither it nor the memory around it: no pointer lies across them). An
 * obstack's current chunk: up to its next_free (obstack_chunk). */
static HT_ALWAYS_INLINE uintptr_t block_words(const ht_live_block_t *x, uintptr_t *a)
{
    *a = (x->addr + 7) & ~(uintptr_t)7;
    uintptr_t end = (x->addr + x->size) & ~(uintptr_t)7;
    uintptr_t upto = x->mark >> M_UPTO_SHIFT;
    if (ht_unlikely(upto) && *a + upto * 8 < end)
        end = *a + upto * 8;
    return end > *a ? end : *a;
}

static void drain(int phase)
{
    if (S.direct) {
        while (S.top && worth_reading(phase)) {
            ht_live_block_t *x = &S.b[S.stack[--S.top]];
            uintptr_t a, end = block_words(x, &a);
            if (ht_unlikely(x->mark & M_HOLDS))
                each_part_outside_custom(a, end, phase, scan_in_place);
            else if (a < end)
                scan_in_place(a, end, phase);
        }
        S.top = 0;              /* what phase 3 left unread */
        return;
    }
    struct iovec l[BATCH], r[BATCH];
    while (S.top && worth_reading(phase)) {
        size_t n = 0, used = 0;
        while (S.top && n < BATCH) {
            const ht_live_block_t *x = &S.b[S.stack[S.top - 1]];
            uintptr_t a, end = block_words(x, &a);
            size_t len = end - a;
            if (len > BUF_BYTES || (x->mark & M_HOLDS)) {
                if (n)
                    break;      /* alone, in pieces */
                S.top--;
                if (x->mark & M_HOLDS)
                    each_part_outside_custom(a, end, phase, scan_read_touched);
                else
                    scan_touched(a, end, phase, 0);
                continue;
            }
            if (used + len > BUF_BYTES)
                break;
            S.top--;
            if (!len)
                continue;
            l[n] = (struct iovec){ S.buf + used, len };
            r[n] = (struct iovec){ (void *)a, len };
            n++;
            used += len;
        }
        /* read: a failing block is skipped, the ones after it read again
         * (process_vm_readv stops at the first element it cannot read
         * whole) */
        buf_for(used);
        size_t ok_bytes[BATCH];
        for (size_t i = 0; i < n;) {
            if (S.mode != 1) {
                long k = read_mem(l[i].iov_base, (uintptr_t)r[i].iov_base, r[i].iov_len);
                ok_bytes[i++] = k > 0 ? (size_t)k & ~(size_t)7 : 0;
                continue;
            }
            long k = ht__syscall6(SYS_process_vm_readv, S.pid, (long)&l[i], (long)(n - i),
                                  (long)&r[i], (long)(n - i), 0);
            size_t got = k > 0 ? (size_t)k : 0;
            for (; i < n && got >= l[i].iov_len; i++) {
                ok_bytes[i] = l[i].iov_len;
                got -= l[i].iov_len;
            }
            if (i < n)
                ok_bytes[i++] = 0;
        }
        for (size_t i = 0; i < n; i++)
            if (ok_bytes[i])
                scan_words((const uintptr_t *)l[i].iov_base, ok_bytes[i] / sizeof(uintptr_t), phase,
                           (uintptr_t)r[i].iov_base);
        /* a block not read whole: the rest page by page, past the pages
         * that cannot be read (through S.buf: the batch is done with it) */
        for (size_t i = 0; i < n; i++)
            if (ok_bytes[i] < r[i].iov_len)
                scan_read_phase((uintptr_t)r[i].iov_base + ok_bytes[i],
                                (uintptr_t)r[i].iov_base + r[i].iov_len, phase);
    }
    S.top = 0;                  /* what phase 3 left unread */
}
/* ---- the process's mappings ---------------------------------------------- */

static uintptr_t hex(const char **pp)
{
    uintptr_t v = 0;
    const char *p = *pp;
    for (;; p++) {
        char c = *p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v << 4 | (uintptr_t)d;
    }
    *pp = p;
    return v;
}

static int has_prefix(const char *s, const char *end, const char *pre)
{
    for (; *pre; s++, pre++)
        if (s >= end || *s != *pre)
            return 0;
    return 1;
}

/* glibc's arena heaps (threads' arenas) are HEAP_MAX-aligned and start
 * with a heap_info {ar_ptr, prev, size, mprotect_size, ...} whose arena
 * lies at the start of a HEAP_MAX-aligned heap; `room`: the bytes mapped
 * from there on. */
static int heap_info_like(const uint64_t *h, uintptr_t room)
{
    return (h[0] & (HEAP_MAX - 1)) < 256 && (h[1] & (HEAP_MAX - 1)) == 0 && h[2] != 0 &&
           h[2] <= room && h[3] >= h[2] && h[3] <= HEAP_MAX;
}

/* A thread's stack as glibc lays it out holds its TCB (struct pthread) at
 * the top: a 64-byte aligned word that points to itself, as does the
 * third (tcbhead_t's tcb and self), followed at words 5 and 6 by the stack
 * and pointer guards, random values every thread copies from the first
 * (so no data can pass for a TCB by chance). A TCB whose thread id field
 * is 0 or -1 is a dead thread's (the kernel clears it when the thread
 * ends, glibc marks the stack free with -1 and caches it for reuse): its stack and static TLS are
 * stale, but the TCB itself still owns what glibc will reuse (the
 * thread's DTV). A live thread's TCB (the main thread's sits in a mapping
 * of the loader's, its static TLS below it) is not one of those.
 * Returns a dead thread's TCB address, or 0 for any other mapping. */
static uintptr_t other_thread_tcb(const map_t *m, const uintptr_t *me)
{
    if (!S.tid_off)
        return 0;
    uintptr_t lo = m->end - 3 * PAGE > m->start ? m->end - 3 * PAGE : m->start;
    lo = (lo + 63) & ~(uintptr_t)63;
    size_t len = m->end - lo;
    if (len > 3 * PAGE || read_mem(buf_for(len), lo, len) != (long)len)
        return 0;
    const uintptr_t *w = (const uintptr_t *)S.buf;
    for (size_t i = 0; i + 6 < len / 8; i += 8) {
        uintptr_t x = lo + i * 8;
        if (w[i] == x && w[i + 2] == x && w[i + 5] == me[5] && w[i + 6] == me[6]) {
            if (x == me[0] || i * 8 + S.tid_off + 4 > len)
                return 0;
            int32_t tid;
            __builtin_memcpy(&tid, (const char *)S.buf + i * 8 + S.tid_off, sizeof tid);
            return tid <= 0 ? x : 0;
        }
    }
    return 0;
}

/* Where struct pthread keeps the thread id: the one place in this
 * thread's TCB past its header that holds this thread's id (0x2d0 in
 * glibc 2.36), or 0 if that is not exactly one place. */
static size_t find_tid_off(const uintptr_t *me)
{
    int32_t tid = (int32_t)scan_tid();
    size_t off = 0;
    for (size_t k = 64; k < 2048; k += 4) {
        int32_t v;
        __builtin_memcpy(&v, (const char *)me + k, sizeof v);
        if (v == tid) {
            if (off)
                return 0;
            off = k;
        }
    }
    return off;
}

static int parse_maps(char *text, size_t len)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    S.maps = ht__map((lines + 1) * sizeof(map_t));
    if (!S.maps)
        return -1;
    S.maps_cap = lines + 1;
    const char *p = text, *end = text + len;
    ht_maps_line_t l;
    while (ht__maps_next(&p, end, &l)) {
        map_t m = { 0, 0, 0, 0, 0, 0, 0, 0, 0 };
        m.start = l.lo;
        m.end = l.hi;
        m.r = l.read;
        m.w = l.write;
        m.x = l.exec;
        m.shared = l.shared;
        m.anon = l.path == NULL;
        if (!m.anon) {
            const char *path = l.path, *pe = path + l.path_len;
            m.brk = has_prefix(path, pe, "[heap]");
            if (m.brk || has_prefix(path, pe, "[vvar]") ||
                has_prefix(path, pe, "[vsyscall]") || has_prefix(path, pe, "[vdso]"))
                m.skip = 1;
            if (m.shared && !has_prefix(path, pe, "/dev/zero") && !has_prefix(path, pe, "/SYSV"))
                m.skip = 1;     /* a shared file: nothing there points into our heap */
        }
        S.maps[S.nmaps++] = m;
    }
    return 0;
}

/* ---- attached: the heap the program made before --------------------------
 *
 * In a process heaptrail attached to, the blocks made before the attach
 * are in no table, and what they point to is as much the program's as
 * what a global points to: they are roots. glibc's heaps are walked by
 * their boundary tags (each chunk's size word; the next one's low bit
 * says whether it is in use), and the chunks in use that the live table
 * does not hold are scanned as roots: free chunks (in a bin, the top, a
 * tcache entry, known by the key glibc writes into its second word, a
 * fastbin entry, found from the arenas' fastbin heads) are skipped, for
 * what they still hold is stale (a freed struct still pointing at the
 * child it leaked). Without the arenas (not found at the attach) a
 * fastbin chunk looks in use and is scanned: it can hide a leak, never
 * invent one. Where the walk does not
 * add up (a size that runs past the heap, an allocator that is not
 * glibc's), the rest of the heap is scanned whole, less the live blocks:
 * leaks may hide, reachable blocks are never called lost. */

static uintptr_t g_tcache_key;  /* glibc's tcache key (2.34 on), or 0 */

/* glibc's arenas (struct malloc_state; the layout of 2.27 on, and the
 * fastbin links of 2.32 on, which the tcache key's 2.34 implies): the
 * fastbin heads, the unsorted bin's head (a fake chunk whose fd and bk
 * are bins[0] and bins[1]), the link to the next arena (a ring through
 * every arena, main_arena included). */
#define AR_FASTBINS 16
#define AR_NFAST 10             /* fastbin i holds chunks of (i + 2) * 16 bytes */
#define AR_UNSORTED 96
#define AR_NEXT 2160
#define AR_MAX 1024             /* arenas followed around the ring */
#define FAST_CAP ((size_t)1 << 20)      /* fastbin chunks noted (2 x 8 MiB, touched as used) */
#define FAST_POP 8192                   /* entries populated at a time */

static uintptr_t g_arena;       /* an arena found at the attach, or 0 */

/* An arena, through the real malloc and free: a chunk too large for the
 * tcache and the fastbins, freed between two chunks in use, goes to its
 * arena's unsorted bin, at the head: its bk is then the bin's head,
 * whose fd is the chunk. Taken if the ring of arenas from it closes.
 * Three chunks in a row: the middle one is between two in use when all
 * three came from the top, else the check fails (a chunk merged into a
 * neighbour keeps the zeros written into it) and the arenas stay
 * unknown: fastbin chunks are then scanned as roots. */
static void learn_arena(void *(*m)(size_t), void (*f)(void *))
{
    uintptr_t *a = m(1280), *b = m(1280), *c = m(1280);
    if (a && b && c) {
        volatile uintptr_t *p = b;
        p[0] = p[1] = 0;
        f(b);
        __asm__ volatile("" ::: "memory");
        uintptr_t u = p[1], ar = u - AR_UNSORTED, at = ar;
        uint64_t w;
        b = NULL;
        if (u && !(u & 7) && ht__copy_in(&w, (const void *)(u + 16), 8) && w == (uintptr_t)p - 16) {
            for (int i = 0; i < AR_MAX; i++) {
                if (!ht__copy_in(&w, (const void *)(at + AR_NEXT), 8) || (w & 7))
                    break;
                at = w;
                if (at == ar) {
                    g_arena = ar;
                    break;
                }
            }
        }
    }
    f(a);
    f(b);
    f(c);
}

/* Called once at the attach, before the hooks are in: frees three blocks
 * of sizes whose tcache bins are seldom full and reads the word glibc put
 * after the free-list link. Two equal values that lie in no module are
 * the key (a bin full would have sent the chunk to another list, whose
 * second word points into the arena, in libc or in a heap). Then finds
 * an arena (learn_arena). */
void ht__reach_learn_heap(void)
{
    if (ht__agent.foreign)
        return;
    void *(*m)(size_t) = (void *(*)(size_t))ht__next_def("malloc");
    void (*f)(void *) = (void (*)(void *))ht__next_def("free");
    if (!m || !f)
        return;
    static const size_t sizes[3] = { 40, 232, 1000 };
    uintptr_t k[3];
    for (int i = 0; i < 3; i++) {
        volatile uintptr_t *p = m(sizes[i]);
        if (!p)
            return;
        f((void *)p);
        __asm__ volatile("" ::: "memory");
        k[i] = p[1];
    }
    uintptr_t key = k[0] == k[1] || k[0] == k[2] ? k[0] : k[1] == k[2] ? k[1] : 0;
    struct dl_find_object fo;
    if (key && key > (1u << 20) && _dl_find_object((void *)key, &fo) != 0)
        g_tcache_key = key;
    if (g_tcache_key)
        learn_arena(m, f);
}

static uint64_t s_hwin[8192];   /* the heap as the walk reads it */
static uintptr_t s_hwin_lo, s_hwin_hi;

/* The heap word at a (below end, where the heap's reading ends). */
static int heap_word(uintptr_t a, uintptr_t end, uint64_t *v)
{
    if (a < s_hwin_lo || a + 8 > s_hwin_hi) {
        if (a + 8 > end)
            return -1;
        size_t len = end - a < sizeof s_hwin ? (end - a) & ~(size_t)7 : sizeof s_hwin;
        long k = read_mem(s_hwin, a, len);
        s_hwin_lo = s_hwin_hi = 0;
        if (k < 8)
            return -1;
        s_hwin_lo = a;
        s_hwin_hi = a + ((size_t)k & ~(size_t)7);
    }
    *v = s_hwin[(a - s_hwin_lo) / 8];
    return 0;
}

/* The chunks in the arenas' fastbins, sorted (collect_fastbins). */
static uintptr_t *s_fast;
static size_t s_nfast;
static size_t s_fast_at;        /* in_fastbin's last answer */

/* Notes the chunks of every fastbin of every arena. A list that does not
 * add up (a chunk misaligned, of another size, unreadable; more than
 * FAST_CAP in all) is dropped whole: its chunks are scanned. With every
 * other thread parked the lists are still: a thread stopped inside
 * malloc or free has taken a chunk off or put one on with one store. */
static void collect_fastbins(void)
{
    uintptr_t ar = g_arena;
    s_nfast = s_fast_at = 0;
    if (!ar || !(s_fast = ht__map(2 * FAST_CAP * sizeof *s_fast)))
        return;
    for (int k = 0; k < AR_MAX; k++) {
        for (int i = 0; i < AR_NFAST; i++) {
            uint64_t c = 0, hdr, e;
            size_t from = s_nfast;
            if (!read_word(ar + AR_FASTBINS + 8 * (uintptr_t)i, &c))
                break;
            while (c) {
                if ((c & 15) || s_nfast == FAST_CAP || !read_word(c + 8, &hdr) ||
                    (hdr & ~(uint64_t)7) != (uint64_t)(i + 2) * 16 || !read_word(c + 16, &e)) {
                    s_nfast = from;
                    break;
                }
                if (!(s_nfast & (FAST_POP - 1)))   /* a fault a page costs more */
                    ht__populate(s_fast + s_nfast, FAST_POP * sizeof *s_fast);
                s_fast[s_nfast++] = c;
                c = ((c + 16) >> 12) ^ e;   /* glibc's safe-linking */
            }
        }
        if (!read_word(ar + AR_NEXT, &ar) || ar == g_arena)
            break;
    }
    /* sorted by a radix sort on bits 4..47, 11 at a time, through the
     * second half of the mapping (a heapsort of 300,000 took 15 ms) */
    uintptr_t *from = s_fast, *to = s_fast + FAST_CAP;
    ht__populate(to, s_nfast * sizeof *to);
    for (int shift = 4; shift < 48; shift += 11) {
        static size_t count[1 << 11];
        __builtin_memset(count, 0, sizeof count);
        for (size_t i = 0; i < s_nfast; i++)
            count[(from[i] >> shift) & 2047]++;
        for (size_t d = 0, sum = 0; d < 2048; d++) {
            size_t k = count[d];
            count[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < s_nfast; i++)
            to[count[(from[i] >> shift) & 2047]++] = from[i];
        uintptr_t *t = from;
        from = to;
        to = t;
    }
    if (from != s_fast)
        __builtin_memcpy(s_fast, from, s_nfast * sizeof *s_fast);
}

/* Whether chunk c is in a fastbin. The scan asks in rising order of c
 * (heaps in address order, each walked upwards): the search goes on from
 * the last answer (s_fast_at), or starts over, binary, when c lies below
 * it. */
static int in_fastbin(uintptr_t c)
{
    size_t k = s_fast_at;
    if (k > 0 && s_fast[k - 1] >= c) {
        size_t lo = 0, hi = s_nfast;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s_fast[mid] < c)
                lo = mid + 1;
            else
                hi = mid;
        }
        k = lo;
    }
    while (k < s_nfast && s_fast[k] < c)
        k++;
    s_fast_at = k;
    return k < s_nfast && s_fast[k] == c;
}

static int tracked_at(uintptr_t a)
{
    if (!S.n || a - S.lo >= S.span)
        return 0;
    long k = find_block(a);
    return k >= 0 && S.b[k].addr == a;
}

/* Walks the chunks from c to end; returns where the walk stopped adding
 * up (end if it never did). With `steps`, it only checks that many
 * chunks (counting *steps down); without, the chunks in use that no live
 * block is are scanned as roots (adjacent ones in one range). */
static uintptr_t walk_chunks(uintptr_t c, uintptr_t end, int *steps)
{
    int scan = steps == NULL;
    uintptr_t rlo = 0, rhi = 0;
    uint64_t hdr, nhdr, w;
    s_hwin_lo = s_hwin_hi = 0;
    if (heap_word(c + 8, end, &hdr) != 0)
        return c;
    while (c < end && !(steps && *steps == 0)) {
        uint64_t size = hdr & ~(uint64_t)7;
        if (size < 32 || (size & 15) || (hdr & 2) || size > end - c)
            break;
        uintptr_t next = c + size;
        if (next == end) {      /* the top chunk: free */
            c = end;
            break;
        }
        /* the tcache's mark read first: the next header may lie past the
         * window, and the walk reads forward only */
        int tcached = scan && g_tcache_key && heap_word(c + 24, end, &w) == 0 && w == g_tcache_key;
        if (heap_word(next + 8, end, &nhdr) != 0)
            break;
        if (scan && (nhdr & 1) && !tcached && !tracked_at(c + 16) &&
            !(size <= (AR_NFAST + 1) * 16 && in_fastbin(c))) {
            if (rhi && c + 16 == rhi + 8) {
                rhi = next + 8;
            } else {
                if (rhi)
                    scan_root_pages(rlo, rhi);
                rlo = c + 16;
                rhi = next + 8;
            }
        }
        c = next;
        hdr = nhdr;
        if (steps)
            --*steps;
    }
    if (rhi)
        scan_root_pages(rlo, rhi);
    return c;
}

/* A glibc heap ([heap]; or a thread arena's heap, h its heap_info) as
 * roots, less its free chunks and the live blocks. Its first chunk: where glibc puts it for
 * the main arena (the start of the brk area), after the heap_info header
 * (32 bytes before glibc 2.35, 48 since) or, in an arena's first heap,
 * after the arena itself (2,200 bytes since 2.27); the first candidate
 * whose first 64 chunks add up. */
static void scan_heap_roots(uintptr_t start, uintptr_t mend, const uint64_t *h)
{
    uintptr_t end = mend, cand[3];
    int nc = 0;
    if (ht__agent.foreign) {
        scan_root_not_ours(start, mend);
        return;
    }
    if (!h) {
        cand[nc++] = (start + 15) & ~(uintptr_t)15;
    } else {
        if (h[2] < end - start)
            end = start + h[2];     /* heap_info.size: the rest is not in use */
        if (h[0] - start < PAGE) {
            uintptr_t a = h[0] + 2200;
            cand[nc++] = ((a + 16 + 15) & ~(uintptr_t)15) - 16;
        } else {
            cand[nc++] = start + 48;
            cand[nc++] = start + 32;
        }
    }
    for (int i = 0; i < nc; i++) {
        int steps = 64;
        uintptr_t stop = walk_chunks(cand[i], end, &steps);
        if (stop != end && steps != 0)
            continue;           /* fewer than 64 chunks that add up: not here */
        stop = walk_chunks(cand[i], end, NULL);
        if (stop < end)
            scan_root(stop, mend);
        return;
    }
    scan_root(start, mend);
}

static int is_ours(uintptr_t a)
{
    for (int i = 0; i < S.nown; i++)
        if (a >= s_own[i][0] && a < s_own[i][1])
            return 1;
    return 0;
}

/* An anonymous root range less heaptrail's own mappings and less glibc's
 * arena heaps in it: a heap's own mapping, or one the kernel merged with
 * a neighbouring anonymous mapping of the same protection (one of
 * heaptrail's, seen here). Such a heap is no root; attached, it is
 * walked (scan_heap_roots). */
static void scan_root_outside_heaps(uintptr_t lo, uintptr_t hi, int attached)
{
    for (uintptr_t a = (lo + HEAP_MAX - 1) & ~(HEAP_MAX - 1); a >= lo && a < hi; a += HEAP_MAX) {
        uint64_t h[4];
        if (is_ours(a) || read_mem(h, a, sizeof h) != sizeof h || !heap_info_like(h, hi - a))
            continue;
        uintptr_t e = a + h[3];     /* the part glibc made read-write */
        scan_root_not_ours(lo, a);
        if (attached)
            scan_heap_roots(a, e, h);
        lo = e;
    }
    if (lo < hi)
        scan_root_not_ours(lo, hi);
}

/* MemAvailable of /proc/meminfo in bytes, or 0 if unknown. */
static uint64_t mem_available(void)
{
    char *b;
    size_t cap;
    long len = read_file("/proc/meminfo", &b, &cap);
    if (len <= 0)
        return 0;
    b[len < (long)cap ? len : (long)cap - 1] = 0;
    uint64_t kib = dec_after(b, "MemAvailable:");
    ht__unmap(b, cap);
    return kib == UINT64_MAX ? 0 : kib << 10;
}

/* ---- roots the kernel holds ---------------------------------------------- */

/* epoll's registrations: the kernel keeps each one's 64-bit data word
 * (epoll_event.data, in an event loop often a pointer to a connection's
 * state, and may be the only one) out of the program's memory, so a scan
 * of that memory alone calls such a block lost (memcheck and
 * LeakSanitizer do too). /proc/self/fdinfo of an epoll descriptor lists
 * them ("tfd: 5 events: 19 data: 55d5c8f2a2a0 ..."): each data word is a
 * root. The descriptors are the ones the program made through the hooks
 * (epoll_create, epoll_create1, syscall), each checked to be an epoll
 * still (readlink); past EPOLL_FDS distinct numbers, every descriptor in
 * /proc/self/fd is looked at (~3 us each here: 2,000 sockets cost a
 * check 7.5 ms that way). A scan child shares its parent's descriptor
 * table (CLONE_FILES). */
#define EPOLL_FDS 64
static int g_epoll_fd[EPOLL_FDS];   /* fd + 1; 0: not written yet */
static int g_epoll_n;               /* entries taken; EPOLL_FDS + 1: too many */

void ht__reach_note_epoll(int fd)
{
    int n = ht_load_acquire(&g_epoll_n);
    for (int i = 0; i < n && i < EPOLL_FDS; i++)
        if (ht_load_relaxed(&g_epoll_fd[i]) == fd + 1)
            return;
    for (;;) {
        if (n >= EPOLL_FDS) {
            ht_store_release(&g_epoll_n, EPOLL_FDS + 1);
            return;
        }
        if (__atomic_compare_exchange_n(&g_epoll_n, &n, n + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            ht_store_release(&g_epoll_fd[n], fd + 1);
            return;
        }
    }
}

/* Reads /proc file `path` and takes as a root the hex word after each
 * `key`: after the blanks that follow it, or, with sep, after the first
 * sep on the same line. */
static void roots_after_key(const char *path, const char *key, char sep)
{
    size_t klen = __builtin_strlen(key);
    char *text;
    size_t cap;
    long len = read_file(path, &text, &cap);    /* a zero byte follows the text */
    if (len <= 0)
        return;
    for (long i = 0; i + (long)klen < len; i++) {
        if (__builtin_memcmp(text + i, key, klen) != 0)
            continue;
        const char *p = text + i + klen;
        if (sep) {
            while (*p && *p != sep && *p != '\n')
                p++;
            if (*p != sep)
                continue;
            p++;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        uintptr_t v = hex(&p);
        scan_words(&v, 1, 1, 0);
    }
    ht__unmap(text, cap);
}

/* The process whose scan this is: this one, or a scan child's parent
 * (attempt_forked); 0 for this one. */
static int g_scan_pid;

/* "/proc/PID/DIR/FD" (or "/proc/PID/DIR" for fd < 0) of the process
 * scanned, never of the calling thread's descriptor table: the program's
 * descriptors are in the process's table (its first thread's), and
 * neither in a scan child's nor in the control thread's, which may have
 * a table of its own (agent.c). */
static void proc_path(char *path, const char *dir, int fd)
{
    char *p = path;
    __builtin_memcpy(p, "/proc/", 6);
    p += 6;
    p += ht__fmt_u64(p, (uint64_t)(g_scan_pid ? g_scan_pid : S.pid));
    *p++ = '/';
    size_t dl = __builtin_strlen(dir);
    __builtin_memcpy(p, dir, dl);
    p += dl;
    if (fd >= 0) {
        *p++ = '/';
        p += ht__fmt_u64(p, (uint64_t)fd);
    }
    *p = 0;
}

/* The data words of epoll descriptor fd's registrations, as roots (none
 * if fd is no epoll descriptor). */
static void epoll_data_roots(int fd)
{
    static const char epoll_link[] = "anon_inode:[eventpoll]";
    char path[64], link[sizeof epoll_link];
    proc_path(path, "fd", fd);
    long ln = ht__sys3(SYS_readlink, path, link, sizeof link);
    if (ln != (long)sizeof epoll_link - 1 || __builtin_memcmp(link, epoll_link, sizeof epoll_link - 1))
        return;
    proc_path(path, "fdinfo", fd);
    roots_after_key(path, "data:", 0);
}

/* A descriptor that may be an epoll one: only an anonymous inode (epoll,
 * eventfd, timerfd...: no file type in its mode) is worth a readlink;
 * sockets, pipes and files, a server's thousands of descriptors, are not. */
static void epoll_candidate(int fd)
{
    struct stat st;
    char path[64];
    proc_path(path, "fd", fd);
    if (ht__sys4(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0 && (st.st_mode & S_IFMT) == 0)
        epoll_data_roots(fd);
}

static void scan_epoll_roots(void)
{
    int n = ht_load_acquire(&g_epoll_n);
    if (n > EPOLL_FDS) {
        char dir[64];
        proc_path(dir, "fd", -1);
        each_number(dir, epoll_candidate);
        return;
    }
    for (int i = 0; i < n; i++) {
        int fd = ht_load_acquire(&g_epoll_fd[i]) - 1;
        if (fd >= 0)
            epoll_data_roots(fd);
    }
}


/* Alternate signal stacks: the kernel keeps each thread's base, and a
 * program that took one from malloc (for a crash handler) and kept no
 * pointer of its own holds the block only there. The sigaltstack hook
 * notes them per thread; the bases of threads still alive are roots (a
 * thread that has exited no longer holds its stack: its block, unless
 * the program freed it, is lost). Up to ALT_MAX threads with one. */
#define ALT_MAX 256
static struct {
    int tid;
    uintptr_t sp;
} g_alt[ALT_MAX];

void ht__reach_note_altstack(int tid, uintptr_t sp)
{
    for (int i = 0; i < ALT_MAX; i++) {
        int t = ht_load_acquire(&g_alt[i].tid);
        if (t == tid) {
            ht_store_release(&g_alt[i].sp, sp);
            return;
        }
    }
    if (!sp)
        return;
    /* a free slot; failing that, one of a thread that has exited */
    long pid = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ALT_MAX; i++) {
            int expect = ht_load_relaxed(&g_alt[i].tid);
            if (expect != 0 && (pass == 0 || ht__sys3(SYS_tgkill, pid, expect, 0) == 0))
                continue;
            if (__atomic_compare_exchange_n(&g_alt[i].tid, &expect, tid, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                ht_store_release(&g_alt[i].sp, sp);
                return;
            }
        }
        pid = ht__sys0(SYS_getpid);
    }
}

static void scan_altstack_roots(void)
{
    int pid = g_scan_pid ? g_scan_pid : S.pid;
    for (int i = 0; i < ALT_MAX; i++) {
        int tid = ht_load_acquire(&g_alt[i].tid);
        uintptr_t sp = ht_load_acquire(&g_alt[i].sp);
        if (tid && sp && ht__sys3(SYS_tgkill, pid, tid, 0) == 0)
            scan_words(&sp, 1, 1, 0);
    }
}

/* POSIX timers' sigevent values: timer_create hands the kernel a value
 * (sigev_value.sival_ptr, often a pointer to the timer's context) that it
 * keeps and delivers with each expiry, and glibc's SIGEV_THREAD timers
 * pass their own heap record so. /proc/PID/timers shows each one
 * ("signal: 10/00005610f2d662a0"): each value is a root. A fork does not
 * copy timers: a scan child reads its parent's. */
static void scan_timer_roots(void)
{
    char path[64];
    proc_path(path, "timers", -1);
    roots_after_key(path, "signal:", '/');
}

/* ---- the scan ------------------------------------------------------------ */

static int own_cmp_sort(void)
{
    /* insertion sort: a few hundred ranges */
    for (int i = 1; i < S.nown; i++) {
        uintptr_t a = s_own[i][0], e = s_own[i][1];
        int j = i - 1;
        while (j >= 0 && s_own[j][0] > a) {
            s_own[j + 1][0] = s_own[j][0];
            s_own[j + 1][1] = s_own[j][1];
            j--;
        }
        s_own[j + 1][0] = a;
        s_own[j + 1][1] = e;
    }
    return 0;
}

/* Where this thread's stack holds what is still live of the program:
 * above the exit call (its registers scanned apart); above
 * __libc_stack_end once main has returned (argv, the environment);
 * else, not knowing, from the stack pointer (so stale values below the
 * program's frames may keep blocks reachable). */
/* Where c says this thread's live stack begins (its registers scanned),
 * or 0 when c is not noted, is another thread's, or lies outside m. */
static uintptr_t caller_lo(const caller_t *c, const map_t *m, uintptr_t sp)
{
    uintptr_t lo = ht_load_acquire(&c->lo);
    if (!lo || c->tid != scan_tid() || lo < sp || lo >= m->end)
        return 0;
    scan_words(c->regs, (size_t)c->nregs, 1, 0);
    if (c->fp_len)
        scan_read((c->fp + 7) & ~(uintptr_t)7, c->fp + c->fp_len);
    return lo & ~(uintptr_t)7;
}

static uintptr_t live_stack_lo(const map_t *m, uintptr_t sp)
{
    uintptr_t lo;
    if (ht_load_acquire(&C.lo))     /* a check from the program's code: its frames */
        return (lo = caller_lo(&C, m, sp)) ? lo : sp;
    if ((lo = caller_lo(&E, m, sp)) != 0)
        return lo;
    uintptr_t top = (uintptr_t)__libc_stack_end;
    if (top >= sp && top < m->end && program_frames_gone())
        return top & ~(uintptr_t)7;
    return sp;
}

static HT_NOINLINE int scan(uintptr_t sp)
{
    char *text;
    size_t tcap;
    long tlen = read_file("/proc/self/maps", &text, &tcap);
    if (tlen <= 0)
        return HT_REACH_UNREADABLE;
    int rc = parse_maps(text, (size_t)tlen);
    /* the text stays mapped until the scan ends: the maps it lists include
     * its own, and were it gone before heaptrail's mappings are noted
     * below, the scan would take that range for a root it cannot read
     * (16 failing reads a page at a time, at every exit) */
    S.maps_text = text;
    S.maps_text_cap = tcap;
    if (rc != 0)
        return HT_REACH_NOMEM;

    /* the candidates: room for blocks other threads allocate between the
     * count and the copy (an eighth more, and a copy that fills it all is
     * made again, larger); 64 bytes a block, populated at once, never more
     * than a quarter of the memory the system says is available (a scan
     * that pushed the process into the OOM killer would lose the exit
     * snapshot; under a MiB is not worth reading /proc/meminfo for) */
    uint64_t avail = 0;
    for (size_t want = (size_t)(ht__live_count() + ht__custom_count());; want = S.cap * 2) {
        S.cap = want + want / 8 + 256;
        uint64_t need = (uint64_t)S.cap * (2 * sizeof *S.b + sizeof *S.keys + 2 * sizeof *S.stack);
        if (need >= (1u << 20) && !avail)
            avail = mem_available();
        if (avail && need > avail / 4)
            return HT_REACH_NOMEM;
        S.b = ht__map_populated(S.cap * sizeof *S.b);
        S.stack = ht__map(S.cap * sizeof *S.stack);
        S.cand = ht__map(S.cap * sizeof *S.cand);
        if (!S.b || !S.stack || !S.cand)
            return HT_REACH_NOMEM;
        S.n = ht__live_copy(S.b, S.cap);
        S.nc = S.n < S.cap ? ht__custom_copy(S.b + S.n, S.cap - S.n) : 0;
        if (S.n + S.nc < S.cap)
            break;
        ht__unmap(S.b, S.cap * sizeof *S.b);
        ht__unmap(S.stack, S.cap * sizeof *S.stack);
        ht__unmap(S.cand, S.cap * sizeof *S.cand);
        S.b = NULL;
        S.stack = S.cand = NULL;
    }
    S.buf = ht__map(BUF_BYTES);
    if (!S.buf)
        return HT_REACH_NOMEM;
    S.nnone = S.n + S.nc;
    if (sort_blocks(S.b, S.n) != 0 || sort_blocks(S.b + S.n, S.nc) != 0)
        return HT_REACH_NOMEM;
    S.keys = ht__map_populated(S.cap * sizeof *S.keys);
    S.sample = ht__map(((S.cap >> SAMPLE_BITS) + 1) * sizeof *S.sample);
    if (!S.keys || !S.sample)
        return HT_REACH_NOMEM;
    if (S.n) {
        uintptr_t hi = 0;
        for (size_t i = 0; i < S.n; i++) {
            S.keys[i] = S.b[i].addr;
            if (!(i & ((1u << SAMPLE_BITS) - 1)))
                S.sample[S.nsample++] = S.b[i].addr;
            if (block_end(&S.b[i]) > hi)
                hi = block_end(&S.b[i]);
        }
        S.lo = S.b[0].addr;
        S.span = hi - S.lo;
    }
    if (S.nc) {
        uintptr_t hi = 0;
        for (size_t i = S.n; i < S.n + S.nc; i++) {
            if (block_end(&S.b[i]) > hi)
                hi = block_end(&S.b[i]);
            /* the heap blocks it lies in are read less their custom blocks */
            for (size_t k = first_ending_above(S.b[i].addr); k < S.n && S.b[k].addr < block_end(&S.b[i]); k++)
                S.b[k].mark |= M_HOLDS;
        }
        S.clo = S.b[S.n].addr;
        S.cspan = hi - S.clo;
    }
    if (S.pagemap_fd < 0 && !g_scan_tid)       /* a scan child has opened its own */
        S.pagemap_fd = sys_open("/proc/self/pagemap");

    /* heaptrail's own memory: its mappings (noted after the scan's own
     * are made: one of them may reuse the range of a mapping the maps
     * text listed), and this library's data (the bootstrap arena in it
     * holds program blocks: scanned apart); after a detach, the agent's
     * earlier instances too (attach.c): their tables hold blocks they
     * saw, some since freed and made again */
    S.nown = ht__agent_memory(s_own, OWN_MAX);
    if (S.nown < 0)
        return HT_REACH_INCOMPLETE;
    own_cmp_sort();
    /* the dynamic loader, whose own blocks start_like() accepts */
    struct dl_find_object fo;
    if (loader_object(&fo) == 0) {
        S.ld_lo = (uintptr_t)fo.dlfo_map_start;
        S.ld_hi = (uintptr_t)fo.dlfo_map_end;
    }

    /* phase 1: mark from the roots */
    const uintptr_t *me;        /* this thread's TCB */
    __asm__("mov %%fs:0, %0" : "=r"(me));
    S.tid_off = find_tid_off(me);
    int attached = ht_load_relaxed(&ht__attached);
    if (attached)
        collect_fastbins();
    for (size_t i = 0; i < S.nmaps; i++) {
        const map_t *m = &S.maps[i];
        if (m->brk) {           /* a root only attached; arena heaps: below */
            if (attached && m->r && m->w)
                scan_heap_roots(m->start, m->end, NULL);
            continue;
        }
        /* writable, or anonymous and read-only: a table the program
         * sealed with mprotect after filling it (memcheck does not count
         * those; code, a JIT's too, is no root) */
        if (!m->r || (!m->w && (!m->anon || m->x)) || m->skip)
            continue;
        uintptr_t lo = m->start, tcb, psp;
        if (sp >= m->start && sp < m->end)
            lo = live_stack_lo(m, sp);  /* this thread's stack: the live part */
        else if ((psp = parked_sp_in(m->start, m->end)) != 0)
            lo = psp - 128 > m->start ? psp - 128 : m->start;   /* a parked thread's, red zone too */
        else if (m->anon && (tcb = other_thread_tcb(m, me)) != 0)
            lo = tcb;
        if (m->anon)
            scan_root_outside_heaps(lo, m->end, attached);
        else
            scan_root_not_ours(lo, m->end);
    }
    for (int i = 0; i < g_nt; i++) {
        if (T[i].state == T_PARKED || T[i].state == T_BLOCKED)
            scan_words(T[i].regs, T[i].state == T_PARKED ? 16 : 6, 1, 0);
        if (T[i].state == T_PARKED && T[i].fp)
            scan_read((T[i].fp + 7) & ~(uintptr_t)7, T[i].fp + T[i].fp_len);
    }
    uintptr_t blo, bhi;
    ht__boot_range(&blo, &bhi);
    scan_root((blo + 7) & ~(uintptr_t)7, bhi);
    scan_epoll_roots();
    scan_timer_roots();
    scan_altstack_roots();
    drain(1);

    /* phase 3: what only pointers into the middle of blocks reach */
    for (size_t i = 0; i < S.ncand; i++) {
        ht_live_block_t *x = &S.b[S.cand[i]];
        if (state(x) == M_PCAND) {
            set_state(x, M_POSSIBLE);
            S.stack[S.top++] = S.cand[i];
            drain(3);
        }
    }

    /* phase 2: cliques of lost blocks */
    for (size_t i = 0; i < S.n + S.nc; i++) {
        if (state(&S.b[i]) != M_NONE)
            continue;
        set_state(&S.b[i], M_LEADER);
        S.nnone--;
        S.leader = (uint32_t)i;
        S.stack[S.top++] = (uint32_t)i;
        drain(2);
    }

    /* per site */
    R.nsites = ht__site_count();
    R.sites = ht__map((size_t)(R.nsites ? R.nsites : 1) * sizeof *R.sites);
    if (!R.sites)
        return HT_REACH_NOMEM;
    for (size_t i = 0; i < S.n + S.nc; i++) {
        const ht_live_block_t *x = &S.b[i];
        uint32_t st = state(x);
        if (x->site >= R.nsites || st == M_REACHED)
            continue;
        ht_reach_site_t *r = &R.sites[x->site];
        if (st == M_LEADER) {
            r->lost_blocks++;
            r->lost_bytes += x->size;
        } else if (st == M_POSSIBLE) {
            r->plost_blocks++;
            r->plost_bytes += x->size;
        } else {
            r->ilost_blocks++;
            r->ilost_bytes += x->size;
        }
    }
    return HT_REACH_DONE;
}

static void release(void)
{
    if (S.b)
        ht__unmap(S.b, S.cap * sizeof *S.b);
    if (S.stack)
        ht__unmap(S.stack, S.cap * sizeof *S.stack);
    if (S.cand)
        ht__unmap(S.cand, S.cap * sizeof *S.cand);
    if (S.keys)
        ht__unmap(S.keys, S.cap * sizeof *S.keys);
    if (S.sample)
        ht__unmap(S.sample, ((S.cap >> SAMPLE_BITS) + 1) * sizeof *S.sample);
    if (S.maps)
        ht__unmap(S.maps, S.maps_cap * sizeof *S.maps);
    if (S.maps_text)
        ht__unmap(S.maps_text, S.maps_text_cap);
    S.maps_text = NULL;
    if (S.pipe[0] >= 0) {
        sys_close(S.pipe[0]);
        sys_close(S.pipe[1]);
    }
    if (S.pagemap_fd >= 0)
        sys_close(S.pagemap_fd);
    if (S.buf)
        ht__unmap(S.buf, BUF_BYTES);
    S.buf = NULL;
    if (s_fast)
        ht__unmap(s_fast, 2 * FAST_CAP * sizeof *s_fast);
    s_fast = NULL;
    s_nfast = s_fast_at = 0;
    S.buf_ready = 0;
}

/* Parks or finds asleep every other thread: 0, or why the scan cannot
 * be made (HT_REACH_*). */
static int stop_all(void)
{
    int others = stop_others();
    if (others < 0)
        return HT_REACH_UNREADABLE;
    if (others > 0)
        R.threads = (uint32_t)others;
    return others > 0 ? HT_REACH_THREADS : HT_REACH_NONE;
}

/* The threads read asleep: how many, and in *woke how many of them ran
 * since (their reading of the memory is then stale). */
static int sleepers(int *woke)
{
    int slept = 0;
    for (int i = 0; i < g_nt; i++)
        if (T[i].state == T_BLOCKED) {
            slept++;
            *woke += !still_sleeping(&T[i]);
        }
    return slept;
}

/* Forgets the threads of a stop (they have been let go): the next stop
 * lists and signals them afresh. */
/* Entries from g_nt on are always zero (note_task fills in only tid and
 * state): only those in use are cleared (the whole table is 184 KiB: a
 * short-lived process's exit check spent its time faulting it in). */
static void forget_threads(void)
{
    __builtin_memset(T, 0, (size_t)g_nt * sizeof T[0]);
    ht_store_release(&g_nt, 0);
    g_full = 0;
}

/* One attempt: stop, scan, check the sleepers. Returns the status; *woke
 * says a sleeping thread ran meanwhile (worth another attempt). */
static int attempt(int now, int *woke)
{
    *woke = 0;
    int why = stop_all();
    if (why != HT_REACH_NONE)
        return why;
    if (pick_reader() != 0)
        return HT_REACH_UNREADABLE;
    /* the callee-saved registers, where the stack scan sees them; on
     * demand, this is the control thread, whose stack is heaptrail's own
     * mapping: none of it is a root */
    volatile uintptr_t regs[6];
    uintptr_t sp = scan_sp(ht__callee_saved((uintptr_t *)regs));
    if (now)
        sp = 0;
    /* nothing of the program's runs meanwhile unless a thread is only
     * asleep (it may wake): then blocks are read without faulting */
    S.direct = 1;
    for (int i = 0; i < g_nt; i++)
        if (T[i].state == T_BLOCKED)
            S.direct = 0;
    int status = scan(sp);
    (void)regs[0];
    /* the threads read asleep must not have run meanwhile */
    int slept = sleepers(woke);
    if (status == HT_REACH_DONE && *woke) {
        R.threads = (uint32_t)*woke;
        return HT_REACH_WOKE;
    }
    if (status == HT_REACH_DONE)
        R.threads = (uint32_t)slept;    /* scanned without their registers */
    return status;
}

/* heaptrail detach, before the agent gives its tables back (agent.c):
 * stops every other thread as a leak check does and tells whether each is
 * shown to stand outside the agent's code [lo, hi), so that it cannot
 * touch the tables again. The detach has set ht__agent.on off before: a
 * hook reads it before touching them, so a thread outside the agent when
 * the signal comes reads "off" at its next hook. Shown outside: a thread
 * parked by the signal with its guard down (else the handler left it busy
 * and it parked as it left the agent: not shown) and no frame in [lo, hi)
 * from the interrupted instruction up, through signal frames (a hook
 * frame above libc's malloc, or a hook between its test of `on` and its
 * raising the guard that a handler of the program's interrupted); a
 * thread asleep in a system call (not signalled: see stop_others) that
 * made the call outside [lo, hi): the agent's own waits are raw system
 * calls, and the libc calls it makes that can sleep are the control
 * thread's or on paths a detached agent no longer runs. Returns 0 if
 * every thread was shown outside, else > 0 (or -1: the threads cannot be
 * listed). The caller holds the reach lock. */
int ht__reach_quiesce(uintptr_t lo, uintptr_t hi)
{
    forget_threads();
    S.pid = (int)ht__sys0(SYS_getpid);
    g_q_lo = lo;
    ht_store_release(&g_q_hi, hi);
    int n = stop_others();
    for (int i = 0; n == 0 && i < g_nt; i++) {
        const stopped_t *t = &T[i];
        int out = t->state == T_GONE || (t->state == T_PARKED && t->regs[15] && !t->inside) ||
                  (t->state == T_BLOCKED && (t->pc < lo || t->pc >= hi));
        n = !out;
    }
    release_others();
    ht_store_release(&g_q_hi, 0);
    forget_threads();
    return n;
}

/* One scan at a time: the exit's and the control thread's share S, T, R. */
static int g_busy;

int ht__reach_trylock(void)
{
    int z = 0;
    return __atomic_compare_exchange_n(&g_busy, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ? 0 : -1;
}

int ht__reach_lock(void)
{
    /* a scan under way ends within its stop deadline and the scan itself
     * (in a child, on demand; from the exit path, whose guard is up, this thread cannot be
     * parked: that check gives up on it); 10 s bounds the wait against
     * anything unforeseen */
    for (int i = 0; i < 10000; i++) {
        if (ht__reach_trylock() == 0)
            return 0;
        struct timespec ts = { 0, 1000 * 1000 };
        ht__sys2(SYS_nanosleep, &ts, NULL);
    }
    return -1;
}

void ht__reach_unlock(void) { __atomic_store_n(&g_busy, 0, __ATOMIC_RELEASE); }

/* The thread that forks: in the child, its alternate signal stack (a
 * fork keeps the forking thread's) is the child's thread's. */
static int g_fork_tid;

void ht__reach_fork_prepare(void) { g_fork_tid = ht_load_relaxed(&ht__sandboxed) ? 0 : ht__gettid(); }

/* A fork while the control thread scanned: the child has neither that
 * thread nor its scan (else its exit would wait 10 s for the lock). */
void ht__reach_fork_child(void)
{
    HT_RESET(g_busy, 0);
    HT_RESET(g_stopping, 0);
    HT_RESET(g_nt, 0);
    /* (sandboxed: no system call of ours, and no scan either) */
    int me = g_fork_tid ? ht__gettid() : 0;
    for (int i = 0; i < ALT_MAX; i++) {
        if (g_alt[i].tid == g_fork_tid && g_fork_tid) {
            g_alt[i].tid = me;
        } else {
            HT_RESET(g_alt[i].tid, 0);
            HT_RESET(g_alt[i].sp, 0);
        }
    }
}

/* For ht_leak_check: the same as at exit, on the calling thread, its
 * stack from `lo` up (the stack pointer on entry to ht_leak_check, so
 * the registers its prologue saved are in) and the callee-saved
 * registers. Returns the blocks found lost (directly or not), or -1 when
 * not computed. */
long ht__reach_compute_call(uintptr_t lo, const uintptr_t *regs)
{
    note_caller(&C, lo, regs);
    ht__reach_compute(HT_SCAN_EXIT);
    ht_store_relaxed(&C.lo, 0);
    if (R.status != HT_REACH_DONE)
        return -1;
    long n = 0;
    for (uint32_t i = 0; i < R.nsites; i++)
        n += (long)(R.sites[i].lost_blocks + R.sites[i].ilost_blocks);
    return n;
}

/* ---- the scan in a child process ------------------------------------------
 * A check while the program runs (heaptrail snapshot --leaks,
 * ht_leak_check) parks the threads, forks, and lets them go on at once:
 * the child scans its copy of the memory, which no thread changes, while
 * the program runs on. The pause is the fork's (page tables, ~2 ms for
 * 200 MB touched), not the scan's (0.22 us a live block, 185 MB of roots
 * in a JVM: 45 ms). And a thread asleep in a system call that wakes
 * meanwhile no longer spoils the check: only one that woke before the
 * fork does. (A JVM's periodic threads wake from timed waits every few
 * ms: checks in place failed three attempts in a row.)
 *
 * The child is a raw clone without CLONE_VM whose exit sends no signal
 * (a program's waitpid(-1) or SIGCHLD handler never sees it); it runs
 * only the scan, which takes no lock a parked thread may hold, writes its
 * result into a shared mapping made before the fork and leaves with
 * exit_group. Not under a seccomp filter (one may kill the process for a
 * clone); when the clone fails, the check runs in place as before. */
typedef struct {
    int go;                     /* the parent's word: 1 scan, 2 leave at once */
    int done;                   /* the child's last store; futex word */
    int status;
    uint64_t scanned;
    uint32_t nsites;
    ht_reach_site_t sites[];
} shared_result_t;

/* Whether every readable, writable mapping of the parent's maps text
 * (read before the fork) is in the child's too. A mapping marked
 * MADV_DONTFORK is not copied into a child: node's V8 marks its heap so,
 * and the pointers there read missing (138 blocks called lost in each
 * check of a node run that in place lost none). /proc/PID/maps does not
 * show the flag, so the child compares. */
static int copied_whole(const char *pt, size_t plen, const char *ct, size_t clen)
{
    const char *p = pt, *pe = pt + plen, *c = ct, *ce = ct + clen;
    ht_maps_line_t l, cl = { 0 };
    while (ht__maps_next(&p, pe, &l)) {
        if (!l.read || !l.write)
            continue;
        /* the child's mappings, in address order, cover [lo, hi)? */
        for (uintptr_t lo = l.lo; lo < l.hi; lo = cl.hi) {
            while (cl.hi <= lo)
                if (!ht__maps_next(&c, ce, &cl))
                    return 0;
            if (cl.lo > lo)
                return 0;
        }
    }
    return 1;
}

/* A fork spoiled by threads read asleep that ran before it: the threads
 * read asleep are looked at again (asleep: read anew; running: parked),
 * while the threads parked stay parked. Returns 0, or why the stop
 * failed. */
static int restop_sleepers(void)
{
    for (int i = 0; i < g_nt; i++)
        if (T[i].state == T_BLOCKED) {
            T[i].sent = 0;
            ht_store_release(&T[i].state, T_SENT);
        }
    return stop_all();
}

/* Forks a try may make, the threads stopped, while threads read asleep
 * keep waking before the fork (each round parks those caught running; a
 * thread asleep 30 us at a time is caught running seldom, and with 8
 * rounds eight such threads spoiled a whole check in 4 of 60 runs) */
#define FORK_ROUNDS 16

/* Returns the status, or -1 when the scan must be made in place (no
 * child could be made, or it lacks part of the memory); the threads may
 * still be stopped then. */
static int attempt_forked(int now, int *woke)
{
    *woke = 0;
    if (ht__seccomp_filtered())
        return -1;
    int why = stop_all();
    if (why != HT_REACH_NONE)
        return why;
    S.pagemap_fd = sys_open("/proc/self/pagemap");      /* this process's page table (a child: for shared mappings) */
    for (int round = 1;; round++) {
        uint32_t nsites = ht__site_count();
        size_t bytes = (sizeof(shared_result_t) + (size_t)nsites * sizeof(ht_reach_site_t) + PAGE - 1) &
                       ~(size_t)(PAGE - 1);
        long a = ht__syscall6(SYS_mmap, 0, (long)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
        if (a < 0 && a > -4096)
            return -1;
        shared_result_t *res = (shared_result_t *)a;
        volatile uintptr_t regs[6];
        uintptr_t sp = scan_sp(ht__callee_saved((uintptr_t *)regs));
        if (now)
            sp = 0;
        char *ptext;
        size_t pcap;
        long plen = read_file("/proc/self/maps", &ptext, &pcap);
        if (plen <= 0) {
            ht__sys2(SYS_munmap, res, bytes);
            return -1;
        }
        int tid = ht__gettid();
        int ppid = (int)ht__sys0(SYS_getpid);
        /* the child starts with every signal blocked: it is in the program's
         * process group, and a Ctrl-C during the check must not run the
         * program's handler in the copy (a handler may unlink, write, exit) */
        sigset_t all, old;
        sigfillset(&all);
        ht__sys4(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
        long pid = ht__syscall6(SYS_clone, CLONE_FILES, 0, 0, 0, 0, 0);
        if (pid != 0)
            ht__sys4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
        if (pid == 0) {
            /* the child: the only thread of a copy nobody changes. It shares
             * the parent's file table (it holds no copies of the program's
             * files, and closes what it opens), and dies with the parent */
            ht__sys2(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
            while (!ht_load_acquire(&res->go) && ht__sys0(SYS_getppid) == ppid)
                futex(&res->go, FUTEX_WAIT, 0, NULL);
            if (ht_load_acquire(&res->go) != 1)
                for (;;)
                    ht__sys1(SYS_exit_group, 0);
            g_scan_tid = tid;
            g_scan_pid = ppid;
            S.pid = (int)ht__sys0(SYS_getpid);
            S.direct = 1;
            /* its own page table, its parent's for shared mappings
             * (scan_touched); without its own, every page is read */
            S.parent_pagemap_fd = S.pagemap_fd;
            S.pagemap_fd = sys_open("/proc/self/pagemap");
            /* roots through /proc/self/mem: process_vm_readv pins what it
             * reads, and a pin of a page shared with the parent copies it
             * (the whole of the roots, 200 MB read in 289 ms instead of 28);
             * the kernel's own mapping of the page also skips the first touch
             * through the child's new page tables, 10x slower on this VM */
            S.mem_fd = sys_open("/proc/self/mem");
            char *ctext;
            size_t ccap;
            long clen = read_file("/proc/self/maps", &ctext, &ccap);
            int st = clen <= 0 || !copied_whole(ptext, (size_t)plen, ctext, (size_t)clen) ? -1
                     : pick_reader() != 0 ? HT_REACH_UNREADABLE : scan(sp);
            (void)regs[0];
            if (S.pipe[0] >= 0) {
                sys_close(S.pipe[0]);
                sys_close(S.pipe[1]);
            }
            if (S.mem_fd >= 0)
                sys_close(S.mem_fd);
            if (S.pagemap_fd >= 0)
                sys_close(S.pagemap_fd);
            res->status = st;       /* -1: not all of it was copied, scan in place */
            res->scanned = S.scanned;
            if (st == HT_REACH_DONE && R.nsites <= nsites) {
                res->nsites = R.nsites;
                __builtin_memcpy(res->sites, R.sites, (size_t)R.nsites * sizeof *R.sites);
            } else if (st == HT_REACH_DONE) {
                res->status = HT_REACH_INCOMPLETE;
            }
            ht_store_release(&res->done, 1);
            futex(&res->done, FUTEX_WAKE, 1, NULL);
            for (;;)
                ht__sys1(SYS_exit_group, 0);
        }
        if (pid < 0) {
            ht__sys2(SYS_munmap, res, bytes);
            ht__unmap(ptext, pcap);
            return -1;              /* S.pagemap_fd is kept for the scan in place */
        }
        /* the threads read asleep must not have run before the fork; if
         * one did, the copy is spoiled: its child leaves, and unless the
         * rounds are out the threads stay stopped for another fork (a
         * JVM's or Python's threads waking every ms or less spoiled all ten
         * tries of a check often enough) */
        int slept = sleepers(woke);
        int again = *woke && round < FORK_ROUNDS;
        if (!again)
            release_others();
        ht_store_release(&res->go, *woke ? 2 : 1);
        futex(&res->go, FUTEX_WAKE, 1, NULL);
        int status;
        if (*woke) {
            R.threads = (uint32_t)*woke;
            status = HT_REACH_WOKE;
        } else {
            /* the child's answer; its exit, or a wake, ends each wait */
            struct timespec ts = { 0, 100 * 1000000 };
            while (!ht_load_acquire(&res->done)) {
                futex(&res->done, FUTEX_WAIT, 0, &ts);
                if (!ht_load_acquire(&res->done) &&
                    ht__syscall6(SYS_wait4, pid, 0, WNOHANG | __WCLONE, 0, 0, 0) != 0)
                    break;          /* gone (or reaped by someone else) without an answer */
            }
            status = ht_load_acquire(&res->done) ? res->status : HT_REACH_UNREADABLE;
            if (status == HT_REACH_DONE) {
                R.nsites = res->nsites;
                R.sites = ht__map((size_t)(R.nsites ? R.nsites : 1) * sizeof *R.sites);
                if (R.sites)
                    __builtin_memcpy(R.sites, res->sites, (size_t)R.nsites * sizeof *R.sites);
                else
                    status = HT_REACH_NOMEM, R.nsites = 0;
                R.threads = (uint32_t)slept;    /* scanned without their registers */
            }
            S.scanned = res->scanned;
        }
        /* reap it (a child that answered is at its exit_group) */
        while (ht__syscall6(SYS_wait4, pid, 0, __WCLONE, 0, 0, 0) == -EINTR)
            ;
        ht__sys2(SYS_munmap, res, bytes);
        ht__unmap(ptext, pcap);
        if (!again)
            return status;          /* -1: in place after all */
        *woke = 0;
        why = restop_sleepers();
        if (why != HT_REACH_NONE)
            return why;
    }
}

void ht__reach_compute(int how)
{
    uint64_t t0 = ht__mono_ns();
    uint64_t scanned = 0;
    int status;
    if (how == HT_SCAN_EXIT_INSIDE) {
        status = HT_REACH_INSIDE;
    } else if (how == HT_SCAN_EXIT_YOUNG_CHILD) {
        status = HT_REACH_YOUNG_CHILD;
    } else if (ht_load_relaxed(&ht__drops.table_full) != 0) {
        status = HT_REACH_INCOMPLETE;
    } else {
        /* a sleeping thread that woke during the scan (a timeout, a
         * wake-up) spoils it: up to three attempts in place; a scan in a
         * child is spoiled only by a wake before the fork, and each
         * attempt forks up to FORK_ROUNDS times, the threads stopped,
         * before it gives up: up to three attempts too */
        for (int k = 0;; k++) {
            __builtin_memset(&S, 0, sizeof S);
            S.pipe[0] = S.pipe[1] = S.pagemap_fd = S.mem_fd = S.parent_pagemap_fd = -1;
            S.pid = (int)ht__sys0(SYS_getpid);
            forget_threads();
            if (R.sites)
                ht__unmap(R.sites, (size_t)(R.nsites ? R.nsites : 1) * sizeof *R.sites);
            R.sites = NULL;
            R.nsites = 0;
            R.threads = 0;
            int woke;
            /* while the program runs: in a child when one can be made; at
             * exit in place (no fork to pay for), then in a child once a
             * sleeping thread has woken during a scan */
            int in_child = how == HT_SCAN_NOW || ht_load_acquire(&C.lo) || k > 0;
            status = in_child ? attempt_forked(how == HT_SCAN_NOW, &woke) : -1;
            if (status < 0) {
                /* let go whatever threads it stopped, and stop them
                 * afresh (their states are the forked try's) */
                release_others();
                forget_threads();
                status = attempt(how == HT_SCAN_NOW, &woke);
            }
            scanned += S.scanned;
            release_others();
            release();
            if (!woke || k == 2)
                break;
        }
    }
    R.scanned_bytes = scanned;
    R.time_ns = ht__mono_ns() - t0;
    R.status = status;
}
