/* jitdump.c -- JIT code named only by a jitdump file (tests/jit/jitdump.sh).
 *
 * Writes jit-PID.dump in the working directory in the format of perf's
 * jitdump specification (tools/perf/Documentation/jitdump-specification.txt)
 * and maps it, as a JIT does so profilers find it. Emits frame-pointer
 * functions (tests/jitcode.h) into anonymous executable memory, announced
 * only by records of the dump, and allocates through them:
 *   main -> run -> JIT -> leaf -> malloc
 *   jd_alpha (slot 0)                    3 allocations of 24 bytes
 *   jd_beta  (slot 1)                    5 of 40
 *   jd_beta moved to slot 2 (JIT_CODE_MOVE) 7 of 56: named jd_beta
 *   then, once the agent has read all that (a capture through slot 0
 *   carries a serial), slot 0 re-emitted as jd_alpha2 (a new
 *   JIT_CODE_LOAD at the same address), and after the agent has read that
 *   too                                   4 of 72: named jd_alpha2, while
 *   the 3 made earlier keep jd_alpha.
 * The first 15 are made before the agent can have looked (it searches for
 * a dump every 25 polls of 20 ms): they are named when it reads the file,
 * at the latest at exit. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "jitcode.h"
#include "jitrun.h"

static int g_fd;
static uint8_t *g_code;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put(const void *p, size_t n)
{
    if (write(g_fd, p, n) != (ssize_t)n) {
        perror("jitdump: write");
        exit(2);
    }
}

static void header(void)
{
    struct { uint32_t magic, version, size, mach, pad, pid; uint64_t ts, flags; } h = {
        0x4A695444u, 1, 40, 62 /* EM_X86_64 */, 0, (uint32_t)getpid(), now_ns(), 0
    };
    put(&h, sizeof h);
}

static jit_fn slot(int i) { return (jit_fn)(void *)(g_code + 64 * i); }

static void load(int i, const char *name, uint64_t index)
{
    struct { uint32_t id, size; uint64_t ts; uint32_t pid, tid; uint64_t vma, addr, csize, index; } r;
    size_t nl = strlen(name) + 1;
    r.id = 0;   /* JIT_CODE_LOAD */
    r.size = (uint32_t)(sizeof r + nl + sizeof jit_code_fp);
    r.ts = now_ns();
    r.pid = (uint32_t)getpid();
    r.tid = (uint32_t)syscall(SYS_gettid);
    r.vma = r.addr = (uint64_t)(uintptr_t)slot(i);
    r.csize = sizeof jit_code_fp;
    r.index = index;
    put(&r, sizeof r);
    put(name, nl);
    put(jit_code_fp, sizeof jit_code_fp);
}

static void move(int from, int to, uint64_t index)
{
    struct { uint32_t id, size; uint64_t ts; uint32_t pid, tid; uint64_t vma, old, new_, csize, index; } r;
    r.id = 1;   /* JIT_CODE_MOVE */
    r.size = sizeof r;
    r.ts = now_ns();
    r.pid = (uint32_t)getpid();
    r.tid = (uint32_t)syscall(SYS_gettid);
    r.vma = r.new_ = (uint64_t)(uintptr_t)slot(to);
    r.old = (uint64_t)(uintptr_t)slot(from);
    r.csize = sizeof jit_code_fp;
    r.index = index;
    put(&r, sizeof r);
}

static void emit(int i)
{
    if (mprotect(g_code, 4096, PROT_READ | PROT_WRITE) != 0)
        exit(2);
    memcpy(g_code + 64 * i, jit_code_fp, sizeof jit_code_fp);
    if (mprotect(g_code, 4096, PROT_READ | PROT_EXEC) != 0)
        exit(2);
}

/* Waits until the agent has registered slot i under a serial other than
 * `old`; exits 3 if it never does. */
static unsigned wait_registered(int i, unsigned old)
{
    unsigned s = wait_serial(slot(i), old);
    if (!s) {
        fprintf(stderr, "jitdump: slot %d never registered\n", i);
        exit(3);
    }
    return s;
}

int main(void)
{
    char path[64];
    snprintf(path, sizeof path, "jit-%d.dump", (int)getpid());
    g_fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    g_code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_fd < 0 || g_code == MAP_FAILED) {
        perror("jitdump");
        return 2;
    }
    header();
    /* the marker perf looks for: the dump file mapped executable */
    if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, g_fd, 0) == MAP_FAILED) {
        perror("jitdump: mmap");
        return 2;
    }
    emit(0);
    emit(1);
    load(0, "jd_alpha", 1);
    load(1, "jd_beta", 2);
    run(slot(0), 24, 3);
    run(slot(1), 40, 5);
    emit(2);
    move(1, 2, 2);
    run(slot(2), 56, 7);

    unsigned s0 = wait_registered(0, 0);
    load(0, "jd_alpha2", 3);    /* re-emitted (same bytes, another function) */
    wait_registered(0, s0);
    run(slot(0), 72, 4);
    printf("jitdump: ok\n");
    return 0;
}
