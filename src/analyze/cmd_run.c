/* cmd_run.c -- `heaptrail run` (start a program under the agent, wait,
 * print the leak summary) and `heaptrail snapshot PID` (ask a traced
 * process for a snapshot through its control socket).
 *
 * Nothing read from a trace reaches a shell: the program is started with
 * execvp on the user's own argv, and trace strings are printed with
 * control characters replaced. */
#include "commands.h"
#include <elfutils/libdwfl.h>
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
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define TOP_STACKS 5
#define TOP_FRAMES 12

static int run_usage(void)
{
    fprintf(stderr, "usage: heaptrail run [-o FILE] [--interval S] [--follow-exec] -- PROG ARGS...\n"
                    "  -o FILE          trace file (default heaptrail.<prog>.<pid>.ht)\n"
                    "  --interval S     also write a snapshot every S seconds\n"
                    "  --follow-exec    trace programs it executes too (default: only this one)\n");
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
static void put_clean(FILE *f, const char *s)
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
static int find_preload(char *out, size_t cap)
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

static void sanitize(char *dst, size_t cap, const char *s)
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

typedef struct { const ht_tsite_t *s; } leak_t;

static int by_bytes(const void *a, const void *b)
{
    const ht_tsite_t *x = ((const leak_t *)a)->s, *y = ((const leak_t *)b)->s;
    if (x->live_bytes != y->live_bytes)
        return x->live_bytes > y->live_bytes ? -1 : 1;
    return x->live_blocks > y->live_blocks ? -1 : x->live_blocks < y->live_blocks;
}

/* Function names for the few frames the summary prints: each module's
 * ELF file is opened once, on first use, with libdw (offline, at the
 * recorded bias). A module whose file is gone or changed prints as
 * module+offset only. */
typedef struct {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    int tried;
} symmod_t;

/* The summary's search for separate debug info: local files by build-id
 * only (/usr/lib/debug/.build-id/xx/rest.debug, where Debian's -dbgsym
 * packages put them). libdw's standard callback would also load
 * libdebuginfod and with it libcurl, gnutls and kerberos (15 of the 20 ms
 * the sqlite3 summary took) and, where DEBUGINFOD_URLS is set, ask a
 * server: neither belongs in the exit of every run. */
static int local_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                           const char *file_name, const char *debuglink, GElf_Word crc,
                           char **debuginfo_file_name)
{
    (void)userdata, (void)modname, (void)base, (void)file_name, (void)debuglink, (void)crc;
    const unsigned char *bid;
    GElf_Addr va;
    int n = dwfl_module_build_id(mod, &bid, &va);
    if (n < 2 || n > 64)
        return -1;
    char path[sizeof "/usr/lib/debug/.build-id/" + 2 * 64 + 8];
    int k = sprintf(path, "/usr/lib/debug/.build-id/%02x/", bid[0]);
    for (int i = 1; i < n; i++)
        k += sprintf(path + k, "%02x", bid[i]);
    strcpy(path + k, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && !(*debuginfo_file_name = strdup(path))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static const char *symbolize(const ht_trace_t *t, symmod_t *cache, const ht_tnode_t *nd)
{
    symmod_t *c = &cache[nd->module];
    const ht_tmodule_t *m = &t->modules[nd->module];
    if (!c->tried) {
        static char *dip;
        static const Dwfl_Callbacks cb = {
            .find_elf = dwfl_build_id_find_elf,
            .find_debuginfo = local_debuginfo,
            .section_address = dwfl_offline_section_address,
            .debuginfo_path = &dip,
        };
        c->tried = 1;
        if (m->path && m->path[0] == '/' && (c->dwfl = dwfl_begin(&cb)) != NULL) {
            c->mod = dwfl_report_elf(c->dwfl, base_name(m->path), m->path, -1, m->bias, false);
            dwfl_report_end(c->dwfl, NULL, NULL);
            const unsigned char *bid;
            GElf_Addr va;
            int n = c->mod ? dwfl_module_build_id(c->mod, &bid, &va) : -1;
            /* a rebuilt file would name the wrong functions */
            if (c->mod && m->build_id_len && (n != (int)m->build_id_len || memcmp(bid, m->build_id, (size_t)n)))
                c->mod = NULL;
        }
    }
    return c->mod ? dwfl_module_addrname(c->mod, nd->addr - 1) : NULL;
}

static void print_frame(const ht_trace_t *t, symmod_t *cache, uint32_t node)
{
    const ht_tnode_t *nd = &t->nodes[node];
    fprintf(stderr, "      ");
    if (nd->module < t->nmodules) {
        const ht_tmodule_t *m = &t->modules[nd->module];
        const char *fn = symbolize(t, cache, nd);
        if (fn) {
            put_clean(stderr, fn);
            fputs(" (", stderr);
        }
        put_clean(stderr, base_name(m->path));
        fprintf(stderr, "+0x%llx%s\n", (unsigned long long)(nd->addr - m->bias), fn ? ")" : "");
    } else if (HT_FRAME_JIT_SERIAL(nd->addr)) {
        /* JIT code: the latest registration with this frame's serial */
        const ht_tjit_t *j = NULL;
        for (size_t i = t->njit; i-- > 0 && !j;)
            if (t->jit[i].serial == HT_FRAME_JIT_SERIAL(nd->addr))
                j = &t->jit[i];
        uint64_t a = HT_FRAME_ADDRESS(nd->addr);
        if (j && a >= j->start && a - j->start <= j->size) {
            put_clean(stderr, j->name);
            fprintf(stderr, "+0x%llx (JIT code)\n", (unsigned long long)(a - j->start));
        } else {
            fprintf(stderr, "0x%llx (JIT code)\n", (unsigned long long)a);
        }
    } else {
        fprintf(stderr, "0x%llx\n", (unsigned long long)nd->addr);
    }
}

/* The end-of-run summary: one line, then the top leak stacks. Cheap: one
 * pass over the last snapshot's sites, frames printed only for the few
 * stacks shown. */
static void summarize(const char *path)
{
    ht_trace_t t;
    char err[512];
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) {
        fprintf(stderr, "heaptrail: no trace: ");
        put_clean(stderr, path);
        fprintf(stderr, " was not written (a statically linked or setuid program ignores the agent; "
                        "or the directory is not writable)\n");
        return;
    }
    if (ht_trace_read(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "heaptrail: no trace: ");
        put_clean(stderr, err);
        fputc('\n', stderr);
        return;
    }
    if (t.nsnaps == 0) {
        fprintf(stderr, "heaptrail: trace ");
        put_clean(stderr, path);
        fprintf(stderr, " holds no snapshot%s", t.truncated ? " (damaged)" : t.complete ? "" : " (cut short)");
        if (t.drops.write_errors)
            fprintf(stderr, "; %llu trace bytes could not be written (disk full?)",
                    (unsigned long long)t.drops.write_errors);
        fputc('\n', stderr);
        ht_trace_free(&t);
        return;
    }
    const ht_tsnapshot_t *s = &t.snaps[t.nsnaps - 1];
    leak_t *leaks = calloc(s->nsites ? s->nsites : 1, sizeof *leaks);
    size_t nleaks = 0;
    uint64_t bytes = 0, blocks = 0;
    for (size_t i = 0; leaks && i < s->nsites; i++) {
        if (s->sites[i].live_blocks == 0)
            continue;
        leaks[nleaks++].s = &s->sites[i];
        bytes += s->sites[i].live_bytes;
        blocks += s->sites[i].live_blocks;
    }
    char b1[32], b2[32], b3[32];
    fprintf(stderr, "heaptrail: %s bytes leaked in %s blocks from %s allocation sites (unique stacks); trace: ",
            commas(bytes, b1), commas(blocks, b2), commas(nleaks, b3));
    put_clean(stderr, path);
    fputc('\n', stderr);
    if (!t.complete || t.truncated)
        fprintf(stderr, "heaptrail: the trace was cut short%s; figures from its last snapshot\n",
                t.truncated ? " (damaged tail)" : " (the program was killed?)");
    else if (s->reason == HT_SNAP_CRASH)
        fprintf(stderr, "heaptrail: the program crashed; figures from the crash snapshot\n");
    else if (s->reason == HT_SNAP_EXEC)
        fprintf(stderr, "heaptrail: the program replaced itself with exec; figures from just before "
                        "(with --follow-exec the new program writes its own trace)\n");
    if (t.drops.overflow_allocs || t.drops.unknown_frees || t.drops.write_errors || t.drops.other)
        fprintf(stderr, "heaptrail: not recorded: %llu allocations without stack (database full), "
                        "%llu frees of unknown pointers, %llu trace bytes lost, %llu other\n",
                (unsigned long long)t.drops.overflow_allocs, (unsigned long long)t.drops.unknown_frees,
                (unsigned long long)t.drops.write_errors, (unsigned long long)t.drops.other);
    if (leaks)
        qsort(leaks, nleaks, sizeof *leaks, by_bytes);
    symmod_t *cache = calloc(t.nmodules + 1, sizeof *cache);
    for (size_t i = 0; i < nleaks && i < TOP_STACKS; i++) {
        const ht_tsite_t *x = leaks[i].s;
        fprintf(stderr, "  %s bytes in %s blocks (%s)%s\n", commas(x->live_bytes, b1),
                commas(x->live_blocks, b2), x->kind == HT_KIND_MMAP ? "mmap" : "heap",
                x->stack == 0xffffffffu ? ": stack not recorded (database full)" : ":");
        uint32_t id = x->stack;
        for (int k = 0; id != 0 && id < t.nnodes && k < TOP_FRAMES; k++) {
            if (cache)
                print_frame(&t, cache, id);
            id = t.nodes[id].parent;
        }
        if (id != 0 && id < t.nnodes)
            fprintf(stderr, "      ...\n");
    }
    for (size_t i = 0; cache && i < t.nmodules; i++)
        if (cache[i].dwfl)
            dwfl_end(cache[i].dwfl);
    free(cache);
    free(leaks);
    ht_trace_free(&t);
}

/* Other traces written during the run next to the main one: forked
 * children's, and with --follow-exec executed programs'. Found by name
 * pattern and modification time (a concurrent run in the same directory
 * would be listed too). */
static void list_other_traces(const char *path, const struct timespec *start)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *main_base = slash ? slash + 1 : path;
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d)
        return;
    int n = 0;
    char shown[5][256];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 14 || strncmp(e->d_name, "heaptrail.", 10) != 0 || strcmp(e->d_name + len - 3, ".ht") != 0 ||
            strcmp(e->d_name, main_base) == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (st.st_mtim.tv_sec < start->tv_sec ||
            (st.st_mtim.tv_sec == start->tv_sec && st.st_mtim.tv_nsec < start->tv_nsec))
            continue;
        if (n < 5)
            snprintf(shown[n], sizeof shown[n], "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (!n)
        return;
    fprintf(stderr, "heaptrail: %d more trace%s from processes it started:", n, n > 1 ? "s" : "");
    for (int i = 0; i < n && i < 5; i++) {
        fputc(' ', stderr);
        put_clean(stderr, shown[i]);
    }
    fprintf(stderr, "%s\n", n > 5 ? " ..." : "");
}

int ht_cmd_run(int argc, char **argv)
{
    const char *out = NULL, *interval = NULL;
    int follow = 0, i = 1;
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
    char preload[PATH_MAX];
    if (find_preload(preload, sizeof preload) != 0) {
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
    sanitize(prog, sizeof prog, base_name(argv[i]));
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        perror("heaptrail: pipe");
        return 2;
    }
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
        setenv("HEAPTRAIL_OUTPUT", name, 1);
        setenv("HEAPTRAIL_OUTPUT_PID", num, 1);
        if (interval)
            setenv("HEAPTRAIL_INTERVAL", interval, 1);
        if (follow)
            setenv("HEAPTRAIL_FOLLOW_EXEC", "1", 1);
        else
            unsetenv("HEAPTRAIL_FOLLOW_EXEC");
        execvp(argv[i], argv + i);
        int e = errno;
        (void)!write(ready[1], &e, sizeof e);
        _exit(127);
    }
    close(ready[1]);
    int exec_errno = 0;
    ssize_t got = read(ready[0], &exec_errno, sizeof exec_errno);
    close(ready[0]);
    /* the terminal's ^C and ^\ go to the program; we stay for the summary */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "heaptrail: cannot run %s: %s\n", argv[i], strerror(exec_errno));
        return 127;
    }
    char path[PATH_MAX];
    if (out)
        snprintf(path, sizeof path, "%s", out);
    else
        snprintf(path, sizeof path, "heaptrail.%s.%d.ht", prog, (int)pid);
    summarize(path);
    list_other_traces(path, &start);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* A connection to the agent of process `pid`, or -1. */
static int connect_agent(long pid)
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

int ht_cmd_snapshot(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: heaptrail snapshot PID\n");
        return 2;
    }
    char *end;
    long pid = strtol(argv[1], &end, 10);
    if (*end || pid <= 0 || pid > INT_MAX) {
        fprintf(stderr, "heaptrail: snapshot: '%s' is not a process id\n", argv[1]);
        return 2;
    }
    int fd = connect_agent(pid);
    if (fd < 0) {
        /* the pid of `heaptrail run` itself: ask its only child */
        long child = only_child(pid);
        if (child > 0 && (fd = connect_agent(child)) >= 0) {
            pid = child;
        } else {
            fprintf(stderr, "heaptrail: process %ld is not traced by heaptrail (no control socket)\n", pid);
            return 1;
        }
    }
    static const char req[] = "snapshot\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        fprintf(stderr, "heaptrail: process %ld: %s\n", pid, strerror(errno));
        close(fd);
        return 1;
    }
    char reply[4300];
    size_t got = 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    while (got < sizeof reply - 1 && poll(&p, 1, 30000) == 1) {
        ssize_t k = read(fd, reply + got, sizeof reply - 1 - got);
        if (k <= 0)
            break;
        got += (size_t)k;
        if (memchr(reply, '\n', got))
            break;
    }
    close(fd);
    reply[got] = 0;
    char *nl = strchr(reply, '\n');
    if (nl)
        *nl = 0;
    if (strncmp(reply, "ok ", 3) != 0) {
        fprintf(stderr, "heaptrail: process %ld: ", pid);
        put_clean(stderr, got ? reply : "no answer");
        fputc('\n', stderr);
        return 1;
    }
    char *sp = strchr(reply + 3, ' ');
    if (sp)
        *sp++ = 0;
    fprintf(stderr, "heaptrail: snapshot %s of process %ld written to ", reply + 3, pid);
    put_clean(stderr, sp ? sp : "?");
    fputc('\n', stderr);
    return 0;
}
