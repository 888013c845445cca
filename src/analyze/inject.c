/* inject.c -- makes a running process load a shared library and call one of
 * its functions (heaptrail attach), with ptrace and no debugger.
 *
 * The method: stop one thread of the process where it waits in a system
 * call that holds none of the C library's locks (a safe point: dlopen and
 * the entry take malloc's and the loader's locks, and a thread stopped
 * holding one would wait for itself), make it call dlopen, dlsym and the
 * entry as if the program had, each returning to address 0 where the fault
 * stops it again, then put back every register and its signal mask and let
 * it restart the system call it waited in. The program sees no EINTR, no
 * lost or early signal, no changed register.
 *
 * Linux x86-64, glibc's dlopen (in libc from 2.34, in libdl before). Every
 * path after a PTRACE_SEIZE ends in a restore and a detach: the process is
 * never left stopped, and never left to run on our registers. */
#include "inject.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SECONDS 5            /* for a thread at a safe point; then the note on a call */
#define RED_ZONE 128              /* below rsp, the program's own (System V ABI) */
#define STACK_ROOM (256 * 1024)   /* left below our strings for dlopen and the entry */
#define STACK_GUARD_GAP (1 << 20) /* the kernel's default gap below a growing [stack] */
#define MAX_ARG (64 * 1024)
#define XSTATE_MAX (64 * 1024)    /* above any XSAVE area (AMX's is about 11 KiB) */
#define PAGE 4096ULL

/* The kernel's restart codes, seen in rax at a stop inside a system call
 * (include/linux/errno.h; never returned to user space). */
enum { ERESTARTSYS_ = 512, ERESTARTNOINTR_ = 513, ERESTARTNOHAND_ = 514, ERESTART_RESTARTBLOCK_ = 516 };

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

/* The safe points: system calls a thread waits in with no C library lock
 * held. SAFE_EINTR: interrupted by our stop it returns EINTR, not a restart
 * code, yet nothing happened; we turn that into a restart (the wait starts
 * over: a timeout starts again from the full value). SAFE_FD: a read, safe
 * only from a pipe, socket, terminal... (the loader reads libraries with
 * read and pread64 while holding its lock, and a regular file on a slow
 * file system can keep it there). Left out: futex (a lock's wait), the
 * memory calls (malloc holds its lock around them), write and open (stdio
 * and the loader hold theirs), connect and sendto (syslog holds its lock
 * there), io_uring_enter (its EINTR cannot be undone: another submit). */
enum { SAFE_WAIT = 1, SAFE_EINTR = 2, SAFE_FD = 4 };
#define READS (SAFE_WAIT | SAFE_EINTR | SAFE_FD)
static const struct { long nr; unsigned flags; } safe_calls[] = {
    { SYS_read, READS },
    { SYS_readv, READS },
    { SYS_pread64, READS },
    { SYS_preadv, READS },
    { SYS_preadv2, READS },
    { SYS_poll, SAFE_WAIT },
    { SYS_ppoll, SAFE_WAIT },
    { SYS_select, SAFE_WAIT },
    { SYS_pselect6, SAFE_WAIT },
    { SYS_epoll_wait, SAFE_WAIT | SAFE_EINTR },
    { SYS_epoll_pwait, SAFE_WAIT | SAFE_EINTR },
    { SYS_epoll_pwait2, SAFE_WAIT | SAFE_EINTR },
    { SYS_nanosleep, SAFE_WAIT },
    { SYS_clock_nanosleep, SAFE_WAIT },
    { SYS_pause, SAFE_WAIT },
    { SYS_rt_sigsuspend, SAFE_WAIT },
    { SYS_rt_sigtimedwait, SAFE_WAIT | SAFE_EINTR },
    { SYS_accept, SAFE_WAIT | SAFE_EINTR },
    { SYS_accept4, SAFE_WAIT | SAFE_EINTR },
    { SYS_recvfrom, SAFE_WAIT | SAFE_EINTR },
    { SYS_recvmsg, SAFE_WAIT | SAFE_EINTR },
    { SYS_recvmmsg, SAFE_WAIT | SAFE_EINTR },
    { SYS_wait4, SAFE_WAIT },
    { SYS_waitid, SAFE_WAIT },
    { SYS_msgrcv, SAFE_WAIT },
    { SYS_io_getevents, SAFE_WAIT | SAFE_EINTR },
};

/* Signals the calls run with unblocked: the kernel forces a fault signal on
 * a thread, resetting the program's handler if the thread blocks it
 * (force_sig_info_to_task), and seccomp's SIGSYS may be the program's way
 * of emulating a call. */
#define SIGBIT(s) (1ULL << ((s) - 1))
#define SYNC_SIGNALS (SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | SIGBIT(SIGTRAP) | SIGBIT(SIGSYS))

enum { MEM_VM, MEM_PROC, MEM_PTRACE };

struct inj {
    int pid;
    char lib[PATH_MAX];        /* absolute */
    char *err;
    size_t errlen;
    int failed;                /* err holds the first failure */
    char *maps;                /* /proc/PID/maps, read again each round */
    uint64_t fn_dlopen, fn_dlsym, fn_dlerror, fn_dlclose;
    int mem_first;             /* the first way mem_write/mem_read try */
    int memfd;                 /* /proc/PID/mem, or -1 */
    size_t strings;            /* bytes of our strings on the stack */
    sigset_t guard_old;        /* the caller's mask while a thread is ours */
    int guarded;
    /* the thread taken, stopped */
    int tid;                   /* 0: none */
    int gone;                  /* it ended under us: nothing to restore */
    struct user_regs_struct saved; /* as it stopped, rax a restart code */
    unsigned char *xstate;     /* its FPU/SSE/AVX... state */
    size_t xlen;
    int xnote;                 /* NT_X86_XSTATE, NT_PRFPREG, 0: none saved */
    uint64_t mask;             /* its signal mask to put back */
    uint64_t call_sp;          /* rsp at a called function's entry (holds 0) */
    uint64_t a_lib, a_entry, a_arg; /* our strings in the process */
};

static int fail(struct inj *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct inj *in, const char *fmt, ...)
{
    if (!in->failed && in->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(in->err, in->errlen, fmt, ap);
        va_end(ap);
    }
    in->failed = 1;
    return -1;
}

#ifdef HT_INJECT_TESTING
/* tests/attach/inject.sh forces the fallbacks through the environment; the
 * CLI is built without this */
static const char *knob(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") ? v : NULL;
}
#else
#define knob(name) ((const char *)NULL)
#endif

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void nap(long ns)
{
    struct timespec ts = { 0, ns };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The whole of a small file (the /proc ones report size 0), NUL-ended, in
 * a malloc'd buffer; NULL with errno set. */
static char *slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            break;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = b;
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            buf = NULL;
            errno = e;
            break;
        }
        if (k == 0) {
            buf[n] = 0;
            break;
        }
        n += (size_t)k;
    }
    int e = errno;
    close(fd);
    errno = e;
    return buf;
}

/* The text after "key" on its line of /proc/PID[/task/TID]/status (tid 0:
 * the process), in out; 0, or -1 when absent. */
static int status_field(int pid, int tid, const char *key, char *out, size_t cap)
{
    char path[64];
    if (tid)
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    else
        snprintf(path, sizeof path, "/proc/%d/status", pid);
    char *s = slurp(path);
    if (!s)
        return -1;
    size_t kl = strlen(key);
    int rc = -1;
    for (char *line = s; *line;) {
        char *eol = strchr(line, '\n');
        if (strncmp(line, key, kl) == 0) {
            const char *v = line + kl;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = strcspn(v, "\n");
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = 0;
            rc = 0;
            break;
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    free(s);
    return rc;
}

static uint64_t status_hex(int pid, int tid, const char *key)
{
    char v[64];
    return status_field(pid, tid, key, v, sizeof v) == 0 ? strtoull(v, NULL, 16) : 0;
}

/* Why PTRACE_SEIZE (or a /proc file it guards) was refused for thread tid
 * of the process, as the error. Always -1. */
static int refused(struct inj *in, int tid)
{
    char v[64];
    long tracer = 0;
    if (status_field(in->pid, tid, "TracerPid:", v, sizeof v) == 0)
        tracer = strtol(v, NULL, 10);
    if (tracer > 0)
        return fail(in, "%d is already traced by process %ld (a debugger?)", in->pid, tracer);
    /* Yama (security/yama/yama_lsm.c): CAP_SYS_PTRACE passes scopes 1 and 2 */
    int scope = 0;
    char *y = slurp("/proc/sys/kernel/yama/ptrace_scope");
    if (y) {
        scope = atoi(y);
        free(y);
    }
    int cap_ptrace = (status_hex(getpid(), 0, "CapEff:") >> 19) & 1;
    if (scope == 3)
        return fail(in, "ptrace of %d refused by Yama (kernel.yama.ptrace_scope = 3: no process may attach, until the next boot)",
                    in->pid);
    if (scope == 2 && !cap_ptrace)
        return fail(in, "ptrace of %d refused by Yama (kernel.yama.ptrace_scope = 2: only with CAP_SYS_PTRACE; run as root)",
                    in->pid);
    if (scope == 1 && !cap_ptrace)
        return fail(in, "ptrace of %d refused by Yama (kernel.yama.ptrace_scope = 1: only an ancestor, or a process the "
                        "program names with prctl(PR_SET_PTRACER), may attach; run as root, or set it to 0)", in->pid);
    return fail(in, "ptrace of %d refused: needs CAP_SYS_PTRACE or the same user (and a program that is not set-user-ID)",
                in->pid);
}

/* ---- the process's memory ------------------------------------------------ */

/* Writes n bytes at addr in the process: process_vm_writev, else
 * /proc/PID/mem, else PTRACE_POKEDATA through the stopped thread tid (a
 * seccomp filter or an old kernel may refuse the first two). 0 or -1. */
static int mem_write(struct inj *in, int tid, uint64_t addr, const void *buf, size_t n)
{
    for (int way = in->mem_first; way <= MEM_PTRACE; way++) {
        if (way == MEM_VM) {
            struct iovec l = { (void *)buf, n }, r = { (void *)(uintptr_t)addr, n };
            if (process_vm_writev(in->pid, &l, 1, &r, 1, 0) == (ssize_t)n)
                return 0;
        } else if (way == MEM_PROC) {
            if (in->memfd < 0) {
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/mem", in->pid);
                in->memfd = open(path, O_RDWR | O_CLOEXEC);
            }
            if (in->memfd >= 0 && pwrite(in->memfd, buf, n, (off_t)addr) == (ssize_t)n)
                return 0;
        } else {
            /* whole aligned words, the bytes around ours read first */
            const unsigned char *p = buf;
            uint64_t a = addr;
            size_t left = n;
            while (left) {
                uint64_t w = a & ~7ULL;
                size_t at = (size_t)(a - w), k = 8 - at < left ? 8 - at : left;
                errno = 0;
                long word = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)w, NULL);
                if (errno)
                    return -1;
                memcpy((char *)&word + at, p, k);
                if (ptrace(PTRACE_POKEDATA, tid, (void *)(uintptr_t)w, (void *)word) < 0)
                    return -1;
                p += k;
                a += k;
                left -= k;
            }
            return 0;
        }
    }
    return -1;
}

/* Reads up to n bytes at addr, never across a page it cannot read; the
 * count read (0 when none), the same three ways as mem_write. */
static size_t mem_read(struct inj *in, int tid, uint64_t addr, void *buf, size_t n)
{
    for (int way = in->mem_first; way <= MEM_PTRACE; way++) {
        ssize_t k = -1;
        if (way == MEM_VM) {
            struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };
            k = process_vm_readv(in->pid, &l, 1, &r, 1, 0);
        } else if (way == MEM_PROC) {
            if (in->memfd < 0) {
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/mem", in->pid);
                in->memfd = open(path, O_RDWR | O_CLOEXEC);
            }
            if (in->memfd >= 0)
                k = pread(in->memfd, buf, n, (off_t)addr);
        } else {
            size_t got = 0;
            while (got < n) {
                uint64_t a = addr + got, w = a & ~7ULL;
                size_t at = (size_t)(a - w), c = 8 - at < n - got ? 8 - at : n - got;
                errno = 0;
                long word = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)w, NULL);
                if (errno)
                    break;
                memcpy((char *)buf + got, (char *)&word + at, c);
                got += c;
            }
            k = (ssize_t)got;
        }
        if (k > 0)
            return (size_t)k;
    }
    return 0;
}

/* The NUL-ended string at addr (at most cap - 1 bytes), control characters
 * shown as '?'; "" if unreadable. */
static void mem_string(struct inj *in, uint64_t addr, char *out, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        uint64_t a = addr + n;
        size_t want = (size_t)(PAGE - (a & (PAGE - 1)));
        if (want > cap - 1 - n)
            want = cap - 1 - n;
        size_t k = mem_read(in, in->tid, a, out + n, want);
        if (!k)
            break;
        void *z = memchr(out + n, 0, k);
        if (z) {
            n = (size_t)((char *)z - out);
            break;
        }
        n += k;
    }
    out[n] = 0;
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

/* ---- /proc/PID/maps ------------------------------------------------------ */

struct mapping {
    uint64_t start, end, off, ino;
    unsigned maj, mnr;
    char perm[5];
    const char *path;          /* into the maps text; not NUL-ended: pathlen */
    size_t pathlen;            /* without " (deleted)" */
    int deleted;
};

/* The mapping whose line starts at *p, *p moved to the next; 0 at the end. */
static int next_mapping(const char **p, struct mapping *m)
{
    while (**p) {
        const char *line = *p, *eol = strchr(line, '\n');
        *p = eol ? eol + 1 : line + strlen(line);
        unsigned long long s, e, off, ino;
        int used = 0;
        if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &s, &e, m->perm, &off, &m->maj, &m->mnr, &ino, &used) < 7)
            continue;
        m->start = s;
        m->end = e;
        m->off = off;
        m->ino = ino;
        const char *path = line + used, *end = eol ? eol : path + strlen(path);
        if (path > end)
            path = end;
        m->path = path;
        m->pathlen = (size_t)(end - path);
        m->deleted = m->pathlen > 10 && memcmp(end - 10, " (deleted)", 10) == 0;
        if (m->deleted)
            m->pathlen -= 10;
        return 1;
    }
    return 0;
}

static int read_maps(struct inj *in)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", in->pid);
    free(in->maps);
    in->maps = slurp(path);
    if (!in->maps)
        return errno == EACCES || errno == EPERM ? refused(in, 0) : fail(in, "%s: %s", path, strerror(errno));
    return 0;
}

/* ---- ELF ------------------------------------------------------------------ */

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

/* Section i's header of the ELF file fd (header eh), or -1. */
static int section(int fd, const Elf64_Ehdr *eh, unsigned i, Elf64_Shdr *sh)
{
    if (eh->e_shentsize != sizeof *sh || i >= eh->e_shnum)
        return -1;
    return read_at(fd, sh, sizeof *sh, eh->e_shoff + (uint64_t)i * sizeof *sh);
}

/* A section's contents, malloc'd (NULL if absurd or unreadable). */
static void *section_data(int fd, const Elf64_Shdr *sh)
{
    if (sh->sh_size == 0 || sh->sh_size > (64u << 20))
        return NULL;
    void *p = malloc(sh->sh_size + 1);
    if (p && read_at(fd, p, sh->sh_size, sh->sh_offset) < 0) {
        free(p);
        return NULL;
    }
    if (p)
        ((char *)p)[sh->sh_size] = 0;
    return p;
}

/* Whether the ELF file fd has a section called name: 1, 0, -1 unreadable. */
static int has_section(int fd, const Elf64_Ehdr *eh, const char *name)
{
    Elf64_Shdr strs, sh;
    if (eh->e_shoff == 0 || eh->e_shnum == 0)
        return 0;
    if (section(fd, eh, eh->e_shstrndx, &strs) < 0)
        return -1;
    char *names = section_data(fd, &strs);
    if (!names)
        return -1;
    int found = 0;
    for (unsigned i = 0; i < eh->e_shnum && !found; i++)
        if (section(fd, eh, i, &sh) == 0 && sh.sh_name < strs.sh_size && strcmp(names + sh.sh_name, name) == 0)
            found = 1;
    free(names);
    return found;
}

/* Looks up the functions names[0..n) among the dynamic symbols of the ELF
 * file fd: their st_value in vals (0 if absent), each name's default
 * version preferred (dlopen@@GLIBC_2.34 over the compatibility
 * dlopen@GLIBC_2.2.5 of glibc 2.34+). *seg_vaddr: the page of p_vaddr of
 * the PT_LOAD whose file pages start at off (a mapping's offset), so that
 * that mapping's start minus it is the load base. 0, or -1 if fd is no
 * 64-bit ELF file with dynamic symbols or no segment starts at off. */
static int elf_functions(int fd, const char *const *names, uint64_t *vals, int n, uint64_t off, uint64_t *seg_vaddr)
{
    Elf64_Ehdr eh;
    if (read_at(fd, &eh, sizeof eh, 0) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
        return -1;
    int seg = 0;
    for (unsigned i = 0; i < eh.e_phnum && !seg; i++) {
        Elf64_Phdr ph;
        if (read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph) < 0)
            return -1;
        if (ph.p_type == PT_LOAD && (ph.p_offset & ~(PAGE - 1)) == off) {
            *seg_vaddr = ph.p_vaddr & ~(PAGE - 1);
            seg = 1;
        }
    }
    if (!seg)
        return -1;
    Elf64_Shdr sym = { 0 }, str, ver = { 0 }, sh;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (section(fd, &eh, i, &sh) < 0)
            return -1;
        if (sh.sh_type == SHT_DYNSYM)
            sym = sh;
        else if (sh.sh_type == SHT_GNU_versym)
            ver = sh;
    }
    if (sym.sh_type != SHT_DYNSYM || sym.sh_entsize != sizeof(Elf64_Sym) || section(fd, &eh, sym.sh_link, &str) < 0)
        return -1;
    Elf64_Sym *syms = section_data(fd, &sym);
    char *strs = section_data(fd, &str);
    uint16_t *vers = ver.sh_type == SHT_GNU_versym ? section_data(fd, &ver) : NULL;
    size_t count = sym.sh_size / sizeof *syms, nver = vers ? ver.sh_size / 2 : 0;
    int rc = syms && strs ? 0 : -1;
    for (int k = 0; k < n; k++)
        vals[k] = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const Elf64_Sym *s = &syms[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_name >= str.sh_size)
            continue;
        int hidden = i < nver && (vers[i] & 0x8000);
        for (int k = 0; k < n; k++)
            if (strcmp(strs + s->st_name, names[k]) == 0 && (!hidden || !vals[k]))
                vals[k] = s->st_value;
    }
    free(syms);
    free(strs);
    free(vers);
    return rc;
}

/* ---- checks ---------------------------------------------------------------- */

/* The program file: a 64-bit x86-64 ELF, not Go. */
static int check_program(struct inj *in)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", in->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return fail(in, "process %d has no program file (a kernel thread, or exiting)", in->pid);
        if (errno == EACCES || errno == EPERM)
            return refused(in, 0);
        return fail(in, "%s: %s", path, strerror(errno));
    }
    Elf64_Ehdr eh;
    int rc = 0;
    if (read_at(fd, &eh, sizeof eh, 0) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        rc = fail(in, "process %d runs no ELF program", in->pid);
    else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
        rc = fail(in, "process %d is not a 64-bit x86-64 program", in->pid);
    /* Go's threads run goroutines on stacks of a few KiB that Go's runtime
     * moves, and a Go program need not call into libc at all */
    else if (has_section(fd, &eh, ".go.buildinfo") == 1)
        rc = fail(in, "Go programs cannot be attached: their threads run on goroutine stacks");
    close(fd);
    return rc;
}

/* What /proc/PID/status says against an attach. */
static int check_status(struct inj *in)
{
    char state[64], v[256];
    if (status_field(in->pid, 0, "State:", state, sizeof state) < 0)
        return fail(in, "no process %d", in->pid);
    long tracer = 0;
    if (status_field(in->pid, 0, "TracerPid:", v, sizeof v) == 0)
        tracer = strtol(v, NULL, 10);
    if (tracer > 0)
        return fail(in, "%d is already traced by process %ld (a debugger?)", in->pid, tracer);
    if (state[0] == 'T' || state[0] == 't')
        return fail(in, "process %d is stopped (SIGSTOP or job control): continue it first (kill -CONT %d)", in->pid, in->pid);
    if (state[0] == 'Z' || state[0] == 'X')
        return fail(in, "process %d is exiting", in->pid);
    /* the calls return by a fault at address 0: the kernel forces the
     * SIGSEGV, and would make an ignored one fatal for good */
    if (status_hex(in->pid, 0, "SigIgn:") & SIGBIT(SIGSEGV))
        return fail(in, "process %d ignores SIGSEGV, which attach's calls end with", in->pid);
    /* a shadow stack (CET) would reject our calls' returns */
    if (status_field(in->pid, 0, "x86_Thread_features:", v, sizeof v) == 0 && strstr(v, "shstk"))
        return fail(in, "process %d uses a shadow stack (CET), which attach does not handle", in->pid);
    return 0;
}

/* The library: the same file at the same path inside the process; and
 * nothing mapped at address 0. Needs in->maps. */
static int check_library(struct inj *in)
{
    struct stat here, there;
    if (stat(in->lib, &here) < 0)
        return fail(in, "%s: %s", in->lib, strerror(errno));
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "/proc/%d/root%s", in->pid, in->lib);
    int st = stat(path, &there);
    if (st < 0 && (errno == EACCES || errno == EPERM))
        return refused(in, 0);
    if (st < 0 || there.st_dev != here.st_dev || there.st_ino != here.st_ino)
        return fail(in, "the process sees another filesystem (a container?) where %s is not the same file", in->lib);
    /* a library loaded already (an earlier attach whose agent refused to
     * start: its trace could not be made) is no refusal: dlopen gives the
     * same handle, and the entry knows whether it runs */
    struct mapping m;
    for (const char *p = in->maps; next_mapping(&p, &m);) {
        /* our calls return to address 0, which must fault */
        if (m.start == 0)
            return fail(in, "process %d maps address 0, where attach's calls return", in->pid);
    }
    return 0;
}

/* Whether the mapping's file is libc (libc.so.6; libc-2.NN.so before glibc
 * 2.34 named its files by version) or libdl. */
static int is_lib(const struct mapping *m, const char *soname, const char *old_prefix)
{
    const char *b = m->path, *end = m->path + m->pathlen;
    for (const char *c = m->path; c < end; c++)
        if (*c == '/')
            b = c + 1;
    size_t n = (size_t)(end - b), sl = strlen(soname), pl = strlen(old_prefix);
    return (n == sl && memcmp(b, soname, sl) == 0) ||
           (n > pl + 3 && memcmp(b, old_prefix, pl) == 0 && memcmp(end - 3, ".so", 3) == 0);
}

/* Finds dlopen, dlsym, dlerror (and dlclose) in the process: in libc, else
 * in libdl. The file is read through /proc/PID/map_files (the very file
 * mapped, even if replaced on disk since; needs CAP_SYS_ADMIN), else by its
 * path inside the process's root (a container's files). Needs in->maps. */
static int find_dl_functions(struct inj *in)
{
    static const char *const names[] = { "dlopen", "dlsym", "dlerror", "dlclose" };
    static const char *const libs[][2] = { { "libc.so.6", "libc-2." }, { "libdl.so.2", "libdl-2." } };
    for (int which = 0; which < 2; which++) {
        struct mapping m;
        const char *p = in->maps;
        int found = 0;
        while (!found && next_mapping(&p, &m))
            found = m.pathlen && m.path[0] == '/' && is_lib(&m, libs[which][0], libs[which][1]);
        if (!found)
            continue;
        char path[PATH_MAX + 64];
        int fd = -1;
        if (!knob("HT_INJECT_NO_MAPFILES")) {
            snprintf(path, sizeof path, "/proc/%d/map_files/%llx-%llx", in->pid, (unsigned long long)m.start,
                     (unsigned long long)m.end);
            fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        if (fd < 0 && !m.deleted && m.pathlen < PATH_MAX) {
            snprintf(path, sizeof path, "/proc/%d/root%.*s", in->pid, (int)m.pathlen, m.path);
            fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        if (fd < 0)
            return fail(in, "cannot read %.*s of process %d%s", (int)m.pathlen, m.path, in->pid,
                        m.deleted ? " (replaced on disk since it was loaded)" : "");
        uint64_t v[4], seg;
        int rc = elf_functions(fd, names, v, 4, m.off, &seg);
        close(fd);
        if (rc < 0)
            return fail(in, "%.*s of process %d: not an ELF library with dynamic symbols", (int)m.pathlen, m.path, in->pid);
        if (v[0] && v[1] && v[2]) {
            uint64_t base = m.start - seg;
            in->fn_dlopen = base + v[0];
            in->fn_dlsym = base + v[1];
            in->fn_dlerror = base + v[2];
            in->fn_dlclose = v[3] ? base + v[3] : 0;
            return 0;
        }
    }
    return fail(in, "no dlopen in the process (statically linked, or a C library other than glibc)");
}

/* ---- taking a thread ------------------------------------------------------- */

static unsigned call_flags(long nr)
{
    for (size_t i = 0; i < sizeof safe_calls / sizeof safe_calls[0]; i++)
        if (safe_calls[i].nr == nr)
            return safe_calls[i].flags;
    return 0;
}

/* The threads of the process, the main thread first; malloc'd, count in *n. */
static int *list_threads(int pid, int *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    *n = 0;
    if (!d)
        return NULL;
    int cap = 16, *t = malloc(cap * sizeof *t);
    if (t)
        t[(*n)++] = pid;
    for (struct dirent *e; t && (e = readdir(d));) {
        int tid = atoi(e->d_name);
        if (tid <= 0 || tid == pid)
            continue;
        if (*n == cap) {
            int *b = realloc(t, (cap *= 2) * sizeof *t);
            if (!b)
                break;
            t = b;
        }
        t[(*n)++] = tid;
    }
    closedir(d);
    return t;
}

/* Whether /proc says thread tid sleeps in a call of safe_calls (without
 * stopping it: interrupting a wait is not free, see SAFE_EINTR): 1 yes, 0 no,
 * -1 /proc would not say (then a stop tells). */
static int seems_waiting(int pid, int tid)
{
    char path[80];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    char *s = slurp(path);
    if (!s)
        return errno == ENOENT || errno == ESRCH ? 0 : -1;
    char *paren = strrchr(s, ')');
    int sleeping = paren && paren[1] == ' ' && paren[2] == 'S';
    free(s);
    if (!sleeping)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, tid);
    s = slurp(path);
    if (!s)
        return errno == ENOENT || errno == ESRCH ? 0 : -1;
    char *end;
    long nr = strtol(s, &end, 10);
    int in_call = end != s && nr >= 0 && call_flags(nr);
    free(s);
    return in_call;
}

/* Whether the thread has a signal pending that it does not block. */
static int signal_pending(int pid, int tid)
{
    uint64_t pend = status_hex(pid, tid, "SigPnd:") | status_hex(pid, tid, "ShdPnd:");
    return (pend & ~status_hex(pid, tid, "SigBlk:")) != 0;
}

/* Whether there are `need` bytes of stack below sp: in its mapping, or
 * where the main thread's [stack] may still grow (RLIMIT_STACK, and the
 * kernel's gap above the next mapping down). Needs in->maps. */
static int stack_room(struct inj *in, uint64_t sp, uint64_t need)
{
    struct mapping m, prev = { 0 };
    const char *p = in->maps;
    int found = 0;
    while (!found && next_mapping(&p, &m)) {
        if (m.start <= sp && sp < m.end)
            found = 1;
        else
            prev = m;
    }
    if (!found || m.perm[1] != 'w')
        return 0;
    uint64_t low = m.start;
    if (m.pathlen == 7 && memcmp(m.path, "[stack]", 7) == 0) {
        uint64_t limit = 8ULL << 20;
        char path[64], *s;
        snprintf(path, sizeof path, "/proc/%d/limits", in->pid);
        if ((s = slurp(path))) {
            char *l = strstr(s, "Max stack size");
            if (l) {
                l += strlen("Max stack size");
                while (*l == ' ')
                    l++;
                limit = strncmp(l, "unlimited", 9) == 0 ? m.end : strtoull(l, NULL, 10);
            }
            free(s);
        }
        uint64_t grow = m.end > limit ? m.end - limit : 0;
        uint64_t gap = prev.end + STACK_GUARD_GAP;
        uint64_t reach = grow > gap ? grow : gap;
        if (reach < low)
            low = reach;
    }
    return sp >= need && sp - need >= low;
}

/* Whether the two bytes before rip are `syscall` (0f 05): the stop is in a
 * 64-bit system call the kernel can restart by stepping back over it. */
static int after_syscall(struct inj *in, int tid, uint64_t rip)
{
    unsigned char b[2];
    return rip >= 2 && mem_read(in, tid, rip - 2, b, 2) == 2 && b[0] == 0x0f && b[1] == 0x05;
}

/* Holds back the signals that would end us while a thread runs on our
 * registers: dead, we would let it return to address 0. */
static void guard(struct inj *in, int on)
{
    if (on && !in->guarded) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGTERM);
        sigaddset(&s, SIGHUP);
        sigaddset(&s, SIGQUIT);
        sigaddset(&s, SIGTSTP);
        sigprocmask(SIG_BLOCK, &s, &in->guard_old);
        in->guarded = 1;
    } else if (!on && in->guarded) {
        sigprocmask(SIG_SETMASK, &in->guard_old, NULL);
        in->guarded = 0;
    }
}

/* Waits for thread tid to stop or end: 1 stopped (status in *st), 0 ended
 * (or no longer ours), -1 failed. After WAIT_SECONDS says once on stderr
 * what it waits for (why). */
static int wait_stop(struct inj *in, int tid, int *st, const char *why)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long ns = 20000;
    int said = 0;
    for (;;) {
        pid_t r = waitpid(tid, st, __WALL | WNOHANG);
        if (r == tid)
            return WIFSTOPPED(*st) ? 1 : 0;
        if (r < 0 && errno == ECHILD)
            return 0;
        if (r < 0 && errno != EINTR)
            return fail(in, "waitpid on thread %d of %d: %s", tid, in->pid, strerror(errno));
        if (!said && seconds_since(&t0) >= WAIT_SECONDS) {
            fprintf(stderr, "heaptrail attach: waiting for %d's thread %d %s\n", in->pid, tid, why);
            said = 1;
        }
        nap(ns);
        if (ns < 5000000)
            ns *= 2;
    }
}

/* A thread waiting in rt_sigsuspend, or in ppoll, pselect6, epoll_pwait(2)
 * with a mask, runs the wait with that mask and the program's own saved
 * aside: the kernel puts it back only on the way to user space, and
 * PTRACE_SETSIGMASK forgets it. PTRACE_GETSIGMASK reports the saved one
 * since Linux 5.0 ("ptrace: take into account saved_sigmask in
 * PTRACE{GET,SET}_SIGMASK"), the wait's before: there only program_mask
 * learns the mask to put back (on newer kernels it finds the same). */
static int swapped_mask(const struct user_regs_struct *r)
{
    long nr = (long)r->orig_rax;
    return nr == SYS_rt_sigsuspend || (nr == SYS_ppoll && r->r10) || (nr == SYS_pselect6 && r->r9) ||
           ((nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2) && r->r8);
}

/* Lets the thread (stopped in such a wait, in->saved its registers) go to
 * user space at address 0: no instruction runs, the fault stops it again,
 * its mask now the program's. 1 done (mask in *mask; the thread in that
 * SIGSEGV stop), 0 the thread given back (a signal came first: delivered
 * now, to the restartable wait, as it would have been; or a group stop),
 * -1 failed. */
static int program_mask(struct inj *in, int tid, uint64_t *mask)
{
    struct user_regs_struct r = in->saved;
    r.rip = 0;
    r.orig_rax = (unsigned long long)-1; /* no restart on the way */
    if (ptrace(PTRACE_SETREGS, tid, 0, &r) < 0 || ptrace(PTRACE_CONT, tid, 0, 0) < 0)
        return 0;
    int st, w = wait_stop(in, tid, &st, "to stop");
    if (w <= 0)
        return w;
    siginfo_t si;
    struct user_regs_struct now;
    int sig = st >> 16 ? 0 : WSTOPSIG(st);
    if (sig == SIGSEGV && ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && si.si_code > 0 &&
        ptrace(PTRACE_GETREGS, tid, 0, &now) == 0 && now.rip == 0 &&
        ptrace(PTRACE_GETSIGMASK, tid, sizeof *mask, mask) == 0)
        return 1;
    ptrace(PTRACE_SETREGS, tid, 0, &in->saved);
    ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
    return 0;
}

/* Stops thread tid and takes it if it is at a safe point (see safe_calls)
 * with room on its stack; late: a wait the kernel restarts through its
 * restart block (nanosleep, poll with a timeout) is taken too (not at
 * first: a call of ours that waited the same way, interrupted, would
 * replace the block). 1 taken (in->tid, saved, xstate, mask set; the
 * thread stopped), 0 not (running on as before), -1 failed. */
static int try_thread(struct inj *in, int tid, int late)
{
    if (!knob("HT_INJECT_NO_PREFILTER") && seems_waiting(in->pid, tid) == 0)
        return 0;
    guard(in, 1);
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
        int e = errno;
        guard(in, 0);
        if (e == ESRCH)
            return 0;
        if (e == EPERM)
            return refused(in, tid);
        return fail(in, "ptrace(PTRACE_SEIZE) of thread %d of %d: %s", tid, in->pid, strerror(e));
    }
    int st, w;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || (w = wait_stop(in, tid, &st, "to stop")) == 0) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        guard(in, 0);
        return 0;
    }
    if (w < 0) {
        guard(in, 0);
        return -1;
    }
    if (!(st >> 16)) {
        /* a signal came first: give it back with the thread */
        ptrace(PTRACE_DETACH, tid, 0, (void *)(long)WSTOPSIG(st));
        guard(in, 0);
        return 0;
    }
    if (WSTOPSIG(st) != SIGTRAP) {
        /* a group stop: the process is being stopped */
        ptrace(PTRACE_DETACH, tid, 0, 0);
        guard(in, 0);
        return fail(in, "process %d is stopped (SIGSTOP or job control): continue it first (kill -CONT %d)", in->pid,
                    in->pid);
    }
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        guard(in, 0);
        return 0;
    }
    long nr = (long)r.orig_rax, rv = (long)r.rax;
    unsigned flags = nr >= 0 ? call_flags(nr) : 0;
    int ok = flags && after_syscall(in, tid, r.rip), rewound = 0;
    if (ok && rv == -EINTR && (flags & SAFE_EINTR) && !signal_pending(in->pid, tid)) {
        /* our stop broke the wait (epoll_wait and the like do not restart
         * themselves): make the kernel start it again, as for a call that
         * no handler interrupted; with a signal pending the EINTR is the
         * signal's and stays */
        r.rax = (unsigned long long)-ERESTARTNOINTR_;
        rewound = 1;
    }
    rv = (long)r.rax;
    ok = ok && (rv == -ERESTARTSYS_ || rv == -ERESTARTNOINTR_ || rv == -ERESTARTNOHAND_ ||
                (rv == -ERESTART_RESTARTBLOCK_ && late));
    if (ok && (flags & SAFE_FD)) {
        char path[64];
        struct stat sb;
        snprintf(path, sizeof path, "/proc/%d/fd/%d", in->pid, (int)r.rdi);
        ok = stat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
    }
    uint64_t need = RED_ZONE + in->strings + 16 + STACK_ROOM;
    if (ok && !in->maps && read_maps(in) < 0) {
        if (rewound)
            ptrace(PTRACE_SETREGS, tid, 0, &r);
        ptrace(PTRACE_DETACH, tid, 0, 0);
        guard(in, 0);
        return -1;
    }
    ok = ok && stack_room(in, r.rsp, need);
    uint64_t mask = 0;
    ok = ok && ptrace(PTRACE_GETSIGMASK, tid, sizeof mask, &mask) == 0 && !(mask & SIGBIT(SIGSEGV));
    if (ok) {
        struct iovec iov = { in->xstate, XSTATE_MAX };
        in->xnote = 0;
        if (ptrace(PTRACE_GETREGSET, tid, NT_X86_XSTATE, &iov) == 0) {
            in->xnote = NT_X86_XSTATE;
        } else {
            iov.iov_len = sizeof(struct user_fpregs_struct);
            if (ptrace(PTRACE_GETREGSET, tid, NT_PRFPREG, &iov) == 0)
                in->xnote = NT_PRFPREG;
        }
        in->xlen = iov.iov_len;
        ok = in->xnote != 0;
    }
    if (!ok) {
        if (rewound)
            ptrace(PTRACE_SETREGS, tid, 0, &r);
        ptrace(PTRACE_DETACH, tid, 0, 0);
        guard(in, 0);
        return 0;
    }
    in->saved = r;
    if (swapped_mask(&r)) {
        int k = program_mask(in, tid, &mask);
        if (k <= 0) {
            guard(in, 0);
            return k;
        }
        if (mask & SIGBIT(SIGSEGV)) {
            ptrace(PTRACE_SETSIGMASK, tid, sizeof mask, &mask);
            ptrace(PTRACE_SETREGS, tid, 0, &in->saved);
            ptrace(PTRACE_DETACH, tid, 0, 0);
            guard(in, 0);
            return 0;
        }
    }
    in->mask = mask;
    in->tid = tid;
    return 1;
}

/* Takes a thread at a safe point: rounds over the threads every 2 ms for up
 * to WAIT_SECONDS. 0 (in->tid stopped), or -1. */
static int take_thread(struct inj *in)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int round = 0;; round++) {
        int n, *tids = list_threads(in->pid, &n);
        if (!tids)
            return fail(in, "process %d ended", in->pid);
        free(in->maps);
        in->maps = NULL;
        int r = 0;
        for (int i = 0; i < n && r == 0; i++)
            r = try_thread(in, tids[i], round > 0);
        free(tids);
        if (r)
            return r > 0 ? 0 : -1;
        if (seconds_since(&t0) >= WAIT_SECONDS)
            return fail(in, "found no thread of %d waiting in a system call within %d s (attach takes a thread only where "
                            "it holds no lock; a program computing in every thread cannot be attached: use heaptrail run)",
                        in->pid, WAIT_SECONDS);
        nap(2000000);
    }
}

/* ---- calls ------------------------------------------------------------------- */

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGTRAP: return "SIGTRAP";
    default: return "a signal";
    }
}

/* Calls fn(a0, a1, a2) on the thread taken: the System V ABI's entry state
 * (rsp % 16 == 8 under a return address, here 0), its registers otherwise
 * the thread's own. The return to 0 faults: that SIGSEGV stop ends the
 * call and is never delivered. Signals the call mask lets through (SIGSTOP,
 * a fault signal sent with kill, seccomp's SIGSYS) go on to the program; a
 * fault of the call ends it with an error. 0 (the result in *rv) or -1. */
static int remote_call(struct inj *in, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *rv, const char *what)
{
    struct user_regs_struct r = in->saved;
    r.rip = fn;
    r.rdi = a0;
    r.rsi = a1;
    r.rdx = a2;
    r.rax = 0;
    r.orig_rax = (unsigned long long)-1; /* not in a system call: nothing to restart */
    r.rsp = in->call_sp;
    r.eflags &= ~0x500ULL;               /* DF clear (the ABI), TF clear */
    int sig = 0;
    if (ptrace(PTRACE_SETREGS, in->tid, 0, &r) < 0)
        goto lost;
    for (;;) {
        if (ptrace(PTRACE_CONT, in->tid, 0, (void *)(long)sig) < 0)
            goto lost;
        sig = 0;
        int st, w = wait_stop(in, in->tid, &st, "to return from the call (it may wait for a lock)");
        if (w < 0)
            return -1;
        if (w == 0) {
            in->gone = 1;
            return fail(in, "process %d ended during the call to %s", in->pid, what);
        }
        if (st >> 16)
            continue; /* a group stop, or news of one: the call runs on */
        siginfo_t si;
        struct user_regs_struct now;
        if (ptrace(PTRACE_GETSIGINFO, in->tid, 0, &si) < 0 || ptrace(PTRACE_GETREGS, in->tid, 0, &now) < 0)
            goto lost;
        int s = WSTOPSIG(st);
        if (s == SIGSEGV && si.si_code > 0 && now.rip == 0 && now.rsp == in->call_sp + 8) {
            *rv = now.rax;
            return 0;
        }
        /* the kernel's own signals but SIGSYS (seccomp's; the program may
         * emulate the call) and a machine check's news (not of our code) */
        if (si.si_code > 0 && s != SIGSYS && !(s == SIGBUS && si.si_code == BUS_MCEERR_AO))
            return fail(in, "the call to %s faulted in %d (%s at 0x%llx, address %p); the program may be damaged", what,
                        in->pid, signal_name(s), (unsigned long long)now.rip, si.si_addr);
        sig = s;
    }
lost:
    if (errno == ESRCH) {
        in->gone = 1;
        return fail(in, "process %d ended during the call to %s", in->pid, what);
    }
    return fail(in, "ptrace on thread %d of %d during the call to %s: %s", in->tid, in->pid, what, strerror(errno));
}

/* dlerror()'s text, or a word that there was none. */
static void dl_message(struct inj *in, char *out, size_t cap)
{
    uint64_t msg = 0;
    snprintf(out, cap, "no message");
    if (remote_call(in, in->fn_dlerror, 0, 0, 0, &msg, "dlerror") == 0 && msg) {
        mem_string(in, msg, out, cap);
        if (!*out)
            snprintf(out, cap, "unreadable message");
    }
}

/* Puts the strings on the thread's stack below its red zone, then
 * dlopen(lib, RTLD_NOW), dlsym(handle, entry), entry(arg). */
static int run_calls(struct inj *in, const char *entry, const char *arg, int *ret)
{
    size_t ll = strlen(in->lib) + 1, el = strlen(entry) + 1, al = strlen(arg) + 1;
    uint64_t top = in->saved.rsp - RED_ZONE;
    uint64_t base = (top - in->strings) & ~15ULL;
    in->call_sp = base - 8;
    size_t n = (size_t)(top - in->call_sp);
    char *img = calloc(1, n);
    if (!img)
        return fail(in, "out of memory");
    memcpy(img + 8, in->lib, ll);
    memcpy(img + 8 + ll, entry, el);
    memcpy(img + 8 + ll + el, arg, al);
    in->a_lib = base;
    in->a_entry = base + ll;
    in->a_arg = base + ll + el;
    int w = mem_write(in, in->tid, in->call_sp, img, n);
    free(img);
    if (w < 0)
        return fail(in, "cannot write to the memory of process %d", in->pid);

    char msg[1024];
    uint64_t handle, fn, rv;
    if (remote_call(in, in->fn_dlopen, in->a_lib, RTLD_NOW | RTLD_LOCAL, 0, &handle, "dlopen") < 0)
        return -1;
    if (!handle) {
        dl_message(in, msg, sizeof msg);
        return in->failed ? -1 : fail(in, "dlopen failed in %d: %s", in->pid, msg);
    }
    if (remote_call(in, in->fn_dlsym, handle, in->a_entry, 0, &fn, "dlsym") < 0)
        return -1;
    if (!fn) {
        dl_message(in, msg, sizeof msg);
        /* unloaded again, so that a later attach does not find it loaded */
        if (!in->failed && in->fn_dlclose)
            remote_call(in, in->fn_dlclose, handle, 0, 0, &rv, "dlclose");
        return in->failed ? -1 : fail(in, "no function %s in %s (dlsym: %s)", entry, in->lib, msg);
    }
    if (remote_call(in, fn, in->a_arg, 0, 0, &rv, entry) < 0)
        return -1;
    *ret = (int)rv;
    return 0;
}

/* Gives the thread back as it was: its extended state, signal mask and
 * registers (rax a restart code, orig_rax its system call: the kernel
 * restarts the wait as it resumes), then detaches. */
static void give_back(struct inj *in)
{
    if (!in->tid || in->gone)
        return;
    if (in->xnote) {
        struct iovec iov = { in->xstate, in->xlen };
        ptrace(PTRACE_SETREGSET, in->tid, in->xnote, &iov);
    }
    ptrace(PTRACE_SETSIGMASK, in->tid, sizeof in->mask, &in->mask);
    ptrace(PTRACE_SETREGS, in->tid, 0, &in->saved);
    ptrace(PTRACE_DETACH, in->tid, 0, 0);
    in->tid = 0;
}

int ht_inject(int pid, const char *lib, const char *entry, const char *arg, int *ret, char *err, size_t errlen)
{
    struct inj in_, *in = &in_;
    memset(in, 0, sizeof *in);
    in->pid = pid;
    in->err = err;
    in->errlen = errlen;
    in->memfd = -1;
    if (errlen)
        err[0] = 0;
    const char *mem = knob("HT_INJECT_MEM");
    in->mem_first = !mem ? MEM_VM : strcmp(mem, "procmem") == 0 ? MEM_PROC : MEM_PTRACE;

    if (!lib || !entry || !arg || !*entry)
        return fail(in, "no library or function given");
    if (pid <= 0)
        return fail(in, "no process %d", pid);
    if (pid == getpid())
        return fail(in, "cannot attach to itself");
    if (strlen(entry) > 1024 || strlen(arg) > MAX_ARG)
        return fail(in, "function name or argument too long");
    if (!realpath(lib, in->lib))
        return fail(in, "%s: %s", lib, strerror(errno));
    in->strings = strlen(in->lib) + strlen(entry) + strlen(arg) + 3;
    char proc[32];
    struct stat sb;
    snprintf(proc, sizeof proc, "/proc/%d", pid);
    if (stat(proc, &sb) < 0)
        return fail(in, "no process %d", pid);

    int rc = -1;
    if (check_program(in) < 0 || check_status(in) < 0 || read_maps(in) < 0 || check_library(in) < 0 ||
        find_dl_functions(in) < 0)
        goto out;
    in->xstate = calloc(1, XSTATE_MAX);
    if (!in->xstate) {
        fail(in, "out of memory");
        goto out;
    }
    if (take_thread(in) < 0)
        goto out;
    /* from here the thread is ours: past here only through give_back */
    /* the call mask: what the kernel must not deliver while our calls run
     * (see SYNC_SIGNALS); pending ones wait for the thread's own mask */
    uint64_t call_mask = ~SYNC_SIGNALS;
    if (ptrace(PTRACE_SETSIGMASK, in->tid, sizeof call_mask, &call_mask) < 0)
        fail(in, "ptrace(PTRACE_SETSIGMASK) on thread %d of %d: %s", in->tid, pid, strerror(errno));
    else
        rc = run_calls(in, entry, arg, ret);
    give_back(in);
out:
    guard(in, 0);
    if (in->memfd >= 0)
        close(in->memfd);
    free(in->maps);
    free(in->xstate);
    return rc;
}
