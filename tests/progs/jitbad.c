/* jitbad.c -- bad JIT announcements the agent must ignore without harm
 * (tests/jit/jitbad.sh). Emits two frame-pointer functions (slots 0 and
 * 1, tests/jitcode.h) and allocates through each, 3 and 5 times, after
 * announcing them in one of these ways:
 *   symlink  /tmp/perf-PID.map is a symbolic link to a file naming slot 0
 *            "evil_symlink": never followed (O_NOFOLLOW), both unnamed
 *   fifo     /tmp/perf-PID.map is a FIFO nobody writes: opening it must
 *            not block the agent (nor the program's exit), both unnamed
 *   dump     jit-PID.dump (perf's jitdump format) names slot 0 "dump_ok",
 *            then holds a record whose size runs past the end of the file,
 *            then one naming slot 1: slot 0 named, the rest never read
 *   stale    /tmp/perf-PID.map was left by an earlier process with our pid
 *            (tests/jit/jitbad.sh writes it, dated an hour ago, before it
 *            execs us), naming slots 0 and 1 at STALE_CODE, where we put
 *            the code: slot 0 stays unnamed; then we rewrite the map in
 *            place, as V8 does ("w": truncated, then longer than before)
 *            naming slot 1 "fresh_b"; then replace it by a new file naming
 *            slot 2 "fresh_c"
 * Removes what it created in /tmp, and first whatever an earlier process
 * with the same pid left there. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "jitcode.h"
#include "jitrun.h"

static void put(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n)
        exit(2);
}

static void load(int fd, const void *code, const char *name)
{
    struct { uint32_t id, size; uint64_t ts; uint32_t pid, tid; uint64_t vma, addr, csize, index; } r = { 0 };
    size_t nl = strlen(name) + 1;
    r.size = (uint32_t)(sizeof r + nl);
    r.pid = r.tid = (uint32_t)getpid();
    r.vma = r.addr = (uint64_t)(uintptr_t)code;
    r.csize = sizeof jit_code_fp;
    put(fd, &r, sizeof r);
    put(fd, name, nl);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

#define STALE_CODE 0x200000000000ul  /* tests/jit/jitbad.sh names it too */

static int write_map(const char *path, const char *how, uintptr_t code, int dummies, const char *name)
{
    FILE *f = fopen(path, how);
    if (!f)
        return 0;
    for (int i = 0; i < dummies; i++)     /* unused addresses in the page */
        fprintf(f, "%lx 8 dummy_%d\n", (unsigned long)(code + 2048 + 8 * (unsigned)i), i);
    fprintf(f, "%lx %zx %s\n", (unsigned long)code, sizeof jit_code_fp, name);
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int stale = !strcmp(mode, "stale");
    uint8_t *code = mmap(stale ? (void *)STALE_CODE : NULL, 4096, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | (stale ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (code == MAP_FAILED || (stale && code != (uint8_t *)STALE_CODE))
        return 2;
    memcpy(code, jit_code_fp, sizeof jit_code_fp);
    memcpy(code + 64, jit_code_fp, sizeof jit_code_fp);
    memcpy(code + 128, jit_code_fp, sizeof jit_code_fp);
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
        return 2;
    jit_fn a = (jit_fn)(void *)code, b = (jit_fn)(void *)(code + 64);
    char map[64], target[64], dump[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", (int)getpid());
    snprintf(target, sizeof target, "/tmp/heaptrail-jitbad-%d", (int)getpid());
    snprintf(dump, sizeof dump, "jit-%d.dump", (int)getpid());
    /* pid_max is 32768 here: a file left at these paths by an earlier
     * process with our pid (node --perf-basic-prof never removes its
     * map) would make symlink() or mkfifo() fail. They name our pid, so
     * whatever is there is stale (mode stale tests what the agent makes
     * of one). */
    if (!stale)
        unlink(map);
    unlink(target);
    if (!strcmp(mode, "symlink")) {
        FILE *f = fopen(target, "wx");
        if (!f)
            return 2;
        fprintf(f, "%lx %zx evil_symlink\n", (unsigned long)(uintptr_t)a, sizeof jit_code_fp);
        fclose(f);
        if (symlink(target, map) != 0)
            return 2;
    } else if (!strcmp(mode, "fifo")) {
        if (mkfifo(map, 0600) != 0)
            return 2;
    } else if (!strcmp(mode, "dump")) {
        int fd = open(dump, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
            return 2;
        struct { uint32_t magic, version, size, mach, pad, pid; uint64_t ts, flags; } h = {
            0x4A695444u, 1, 40, 62, 0, (uint32_t)getpid(), 0, 0
        };
        put(fd, &h, sizeof h);
        if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
            return 2;
        load(fd, a, "dump_ok");
        struct { uint32_t id, size; uint64_t ts; } bad = { 0, 0x7fffffffu, 0 };
        put(fd, &bad, sizeof bad);
        load(fd, b, "dump_unread");
        if (!wait_serial(a, 0))
            return 3;
    } else if (stale) {
        struct stat st;
        if (lstat(map, &st) != 0 || !S_ISREG(st.st_mode))
            return 2;       /* the test did not leave one */
    } else {
        fprintf(stderr, "usage: jitbad symlink|fifo|dump|stale\n");
        return 2;
    }
    sleep_ms(100);          /* the agent has looked several times */
    run(a, 24, 3);
    if (stale) {
        if (!write_map(map, "w", (uintptr_t)b, 8, "fresh_b") || !wait_serial(b, 0))
            return 3;
        run(b, 40, 5);
        jit_fn c = (jit_fn)(void *)(code + 128);
        if (unlink(map) != 0 || !write_map(map, "wx", (uintptr_t)c, 0, "fresh_c") || !wait_serial(c, 0))
            return 4;
        run(c, 56, 2);
    } else {
        run(b, 40, 5);
    }
    unlink(map);
    unlink(target);
    printf("jitbad %s: ok\n", mode);
    return 0;
}
