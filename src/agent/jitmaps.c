/* jitmaps.c -- names of JIT code that nobody registers: the perf map and
 * jitdump files JIT runtimes write for profilers.
 *
 * V8 (node --perf-basic-prof), the JVM's perf-map-agent and wasmtime
 * (--profile=perfmap) append "START SIZE NAME" lines to /tmp/perf-PID.map
 * as they emit code; V8's --perf-prof and JVM agents write a binary
 * jitdump file (jit-PID.dump) and map it so profilers can find it. The
 * control thread reads what was appended since its last look, every
 * JITMAPS_MS, and registers the new code in the JIT registry in one batch:
 * from then on frames in that code carry the registration's serial, so each
 * allocation names the code that was live when it was made, even after the
 * runtime frees the code and reuses the address (the registry replaces
 * what a new range overlaps, as a new perf map line overrides an old one).
 * The trace records each registration a frame points into (writer.c).
 *
 * Runs on the control thread (agent.c), and once more on the exiting
 * thread for what was announced since the last look; never in a hook or a
 * signal handler: it may block in read(), but allocates nothing from the
 * traced program's heap. A perf map is only read if this user owns it:
 * anyone may create files in /tmp. */
#include "agent.h"
#include "../platform/linux-x86_64/jit.h"
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (256u << 10)
#define BATCH 4096

static struct {
    int pid;
    int perf_state;             /* PERF_NONE, PERF_READING, PERF_FOREIGN */
    char perf_path[64];         /* /tmp/perf-PID.map */
    dev_t perf_dev;             /* the file we read (or do not: foreign) */
    ino_t perf_ino;
    uint64_t perf_mtime;        /* its mtime when last read (ns) */
    uint64_t perf_off;          /* bytes of it read */
    char prefix[64];            /* its first bytes, as read */
    size_t prefix_len;
    char *buf;                  /* CHUNK bytes, mapped on first use */
    size_t held;                /* bytes of an unfinished line kept in buf */
    int dump_found;             /* dump_path names the jitdump file */
    char dump_path[1024];
    dev_t dump_dev;
    ino_t dump_ino;
    uint64_t dump_size;         /* its size when last read */
    uint64_t dump_off;          /* next record's offset */
    int dump_looked;            /* polls since /proc/self/maps was last searched */
    ht_jit_add_t adds[BATCH];
    size_t nadds;
    char names[BATCH * 64];     /* perf-map names of the batch, NUL-terminated */
    size_t names_used;
    uint64_t registered;
    ht_spinlock_t lock;         /* the control thread and the exiting one */
} J;

enum { PERF_NONE, PERF_READING, PERF_FOREIGN };

static void flush_batch(void)
{
    if (J.nadds)
        J.registered += ht__jit_add_many(J.adds, J.nadds, NULL);
    J.nadds = 0;
    J.names_used = 0;
}

static void add(uintptr_t start, size_t size, const char *name, size_t len)
{
    if (J.nadds == BATCH || J.names_used + len + 1 > sizeof J.names)
        flush_batch();
    char *n = J.names + J.names_used;
    memcpy(n, name, len);
    n[len] = 0;
    J.names_used += len + 1;
    J.adds[J.nadds++] = (ht_jit_add_t){ .start = start, .size = size, .name = n };
}

static int hex(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;
    if (s + 2 <= end && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    const char *d = s;
    for (; s < end; s++) {
        int c = *s, x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (x < 0)
            break;
        v = v << 4 | (uint64_t)x;
    }
    if (s == d)
        return 0;
    *p = s;
    *out = v;
    return 1;
}

/* One perf map line: "START SIZE NAME" (hex, hex, the rest). */
static void perf_line(const char *s, const char *end)
{
    uint64_t start, size;
    if (!hex(&s, end, &start) || s >= end || *s++ != ' ' || !hex(&s, end, &size) || s >= end ||
        *s++ != ' ')
        return;
    size_t len = (size_t)(end - s);
    if (len > 1024)
        len = 1024;
    add((uintptr_t)start, (size_t)size, s, len);
}

/* A perf map is named by the pid alone, and runtimes leave theirs behind
 * (node never removes its map): with pids reused, /tmp may already hold a
 * dead process's map under our name, and a runtime starting here
 * truncates it ("w+", V8 and wasmtime) or replaces it. So:
 *   - a map last written before this program started is stale: its lines
 *     are skipped, never registered (they would name our code after a dead
 *     process's functions);
 *   - every look checks that the path still names the file we read, that
 *     the file is not shorter than what we read, and that its first bytes
 *     are those we saw: else it was replaced or rewritten, and is read
 *     again from the start (a stale one no longer counts as stale).
 * The file is opened by a look that finds it changed (stat: size or
 * mtime) and closed before the look ends, so a look that finds nothing
 * new opens nothing, and no descriptor outlives a look: the control
 * thread's table may be its own (agent.c), the exiting thread's last look
 * is the program's. A path that is gone is read no more; one that comes
 * back as the same file is read on where we stopped. */
static uint64_t mtime_ns(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

static int same_prefix(int fd)
{
    char now[sizeof J.prefix];
    return J.prefix_len == 0 ||
           (pread(fd, now, J.prefix_len, 0) == (ssize_t)J.prefix_len &&
            memcmp(now, J.prefix, J.prefix_len) == 0);
}

static void perf_restart(void)
{
    HT_RESET(J.perf_off, 0);    /* (in a fork child too: see HT_RESET) */
    HT_RESET(J.held, 0);
    HT_RESET(J.prefix_len, 0);
}

static void poll_perf_map(void)
{
    struct stat st;
    if (lstat(J.perf_path, &st) != 0)
        return;                 /* not there (yet) */
    int same = J.perf_state != PERF_NONE && st.st_dev == J.perf_dev && st.st_ino == J.perf_ino;
    if (same && (J.perf_state == PERF_FOREIGN ||
                 ((uint64_t)st.st_size == J.perf_off && mtime_ns(&st) == J.perf_mtime)))
        return;                 /* someone else's, or as we left it */
    int fd = open(J.perf_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);  /* a FIFO must not block us */
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    if (J.perf_state == PERF_NONE || st.st_dev != J.perf_dev || st.st_ino != J.perf_ino) {
        perf_restart();         /* a new file (or replaced): from the start */
        J.perf_dev = st.st_dev;
        J.perf_ino = st.st_ino;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
            J.perf_state = PERF_FOREIGN;        /* never read, unless replaced */
            close(fd);
            return;
        }
        J.perf_state = PERF_READING;
        if (mtime_ns(&st) < ht__agent.start_coarse_ns) {   /* stale: skip what it holds */
            J.perf_off = (uint64_t)st.st_size;
            ssize_t n = pread(fd, J.prefix, sizeof J.prefix, 0);
            J.prefix_len = n > 0 ? (size_t)n : 0;
        }
    } else if ((uint64_t)st.st_size < J.perf_off || !same_prefix(fd)) {
        perf_restart();         /* truncated, or rewritten from the start */
    }
    J.perf_mtime = mtime_ns(&st);
    for (;;) {
        ssize_t n = pread(fd, J.buf + J.held, CHUNK - J.held, (off_t)J.perf_off);
        if (n <= 0)
            break;
        if (J.perf_off < sizeof J.prefix && J.prefix_len == J.perf_off) {
            /* the first bytes, to notice a rewrite by */
            size_t k = sizeof J.prefix - J.prefix_len;
            if (k > (size_t)n)
                k = (size_t)n;
            memcpy(J.prefix + J.prefix_len, J.buf + J.held, k);
            J.prefix_len += k;
        }
        J.perf_off += (uint64_t)n;
        size_t have = J.held + (size_t)n, line = 0;
        for (size_t i = 0; i < have; i++)
            if (J.buf[i] == '\n') {
                perf_line(J.buf + line, J.buf + i);
                line = i + 1;
            }
        /* an unfinished line waits for the rest; one longer than the buffer
         * is dropped */
        J.held = have - line;
        if (J.held == CHUNK)
            J.held = 0;
        else if (line)
            memmove(J.buf, J.buf + line, J.held);
    }
    close(fd);
}

/* ---- jitdump -------------------------------------------------------------
 * The format of perf's tools/perf/Documentation/jitdump-specification.txt:
 * a 40-byte header (magic 'JiTD'), then records {id u32, total_size u32,
 * timestamp u64, body}. JIT_CODE_LOAD (0): pid, tid, vma, code_addr,
 * code_size, code_index, name, code. JIT_CODE_MOVE (1): pid, tid, vma,
 * old_code_addr, new_code_addr, code_size, code_index. */

#define JITDUMP_MAGIC 0x4A695444u

/* The jitdump file a JIT mapped (that is how perf finds it too). */
static void find_dump(void)
{
    char want[32];
    int wl = snprintf(want, sizeof want, "/jit-%d.dump", J.pid);
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[4096];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, line + have, sizeof line - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (line[i] != '\n')
                continue;
            line[i] = 0;
            const char *path = strchr(line + start, '/');
            size_t pl = path ? strlen(path) : 0;
            if (path && pl >= (size_t)wl && pl < sizeof J.dump_path &&
                strcmp(path + pl - (size_t)wl, want) == 0) {
                memcpy(J.dump_path, path, pl + 1);
                J.dump_found = 1;
                close(fd);
                return;
            }
            start = i + 1;
        }
        have -= start;
        memmove(line, line + start, have);
        if (have == sizeof line - 1)
            have = 0;
    }
    close(fd);
}

static int read_at(int fd, void *p, size_t n, uint64_t off)
{
    return pread(fd, p, n, (off_t)off) == (ssize_t)n;
}

/* The records appended since the last look, from fd. */
static void read_records(int fd)
{
    for (;;) {
        struct { uint32_t id, size; uint64_t ts; } h;
        char last;
        /* a record is read once all of it is in the file */
        if (!read_at(fd, &h, sizeof h, J.dump_off) || h.size < sizeof h ||
            !read_at(fd, &last, 1, J.dump_off + h.size - 1))
            return;             /* not (all) written yet */
        uint64_t body = J.dump_off + sizeof h;
        if (h.id == 0) {        /* JIT_CODE_LOAD */
            struct { uint32_t pid, tid; uint64_t vma, addr, size, index; } l;
            char name[1024];
            size_t room = h.size - sizeof h - sizeof l;
            if (h.size < sizeof h + sizeof l || !read_at(fd, &l, sizeof l, body))
                return;
            size_t nl = room < sizeof name - 1 ? room : sizeof name - 1;
            if (nl && !read_at(fd, name, nl, body + sizeof l))
                return;
            name[nl] = 0;
            add((uintptr_t)l.addr, (size_t)l.size, name, strlen(name));
        } else if (h.id == 1) { /* JIT_CODE_MOVE */
            struct { uint32_t pid, tid; uint64_t vma, old_addr, new_addr, size, index; } m;
            if (h.size < sizeof h + sizeof m || !read_at(fd, &m, sizeof m, body))
                return;
            flush_batch();      /* the old range may be in this batch */
            ht_jit_range_t r;
            const char *name = ht__jit_find((uintptr_t)m.old_addr, &r) && r.name ? r.name : "";
            add((uintptr_t)m.new_addr, (size_t)m.size, name, strlen(name));
        } else if (h.id == 3) { /* JIT_CODE_CLOSE */
            J.dump_off += h.size;
            return;
        }
        J.dump_off += h.size;
    }
}

/* Opened by a look that finds the file grown, closed before it ends (as
 * the perf map is). */
static void poll_jitdump(int force)
{
    struct stat st;
    int fd;
    if (!J.dump_found) {
        if (J.dump_looked++ % 25 && !force)     /* search the maps every 25 polls */
            return;
        find_dump();
        if (!J.dump_found)
            return;
        fd = open(J.dump_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            J.dump_found = 0;
            return;
        }
        /* the header: magic, version, its own size, ... (40 bytes in
         * version 1; a later version may be longer) */
        uint32_t hdr[3];
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            !read_at(fd, hdr, sizeof hdr, 0) || hdr[0] != JITDUMP_MAGIC || hdr[2] < 40 || hdr[2] > 4096) {
            close(fd);
            J.dump_found = 0;
            return;
        }
        J.dump_dev = st.st_dev;
        J.dump_ino = st.st_ino;
        J.dump_off = hdr[2];
        J.dump_size = 0;
    } else {
        if (stat(J.dump_path, &st) != 0 || st.st_dev != J.dump_dev || st.st_ino != J.dump_ino ||
            (uint64_t)st.st_size == J.dump_size)
            return;             /* gone, replaced (read no more), or as we left it */
        fd = open(J.dump_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
            return;
        if (fstat(fd, &st) != 0 || st.st_dev != J.dump_dev || st.st_ino != J.dump_ino) {
            close(fd);
            return;
        }
    }
    J.dump_size = (uint64_t)st.st_size;
    read_records(fd);
    close(fd);
}

int ht__jitmaps_poll(int force)
{
    ht__spin_lock(&J.lock);
    if (!J.pid) {
        J.pid = getpid();
        snprintf(J.perf_path, sizeof J.perf_path, "/tmp/perf-%d.map", J.pid);
    }
    uint64_t before = J.registered;
    if (J.buf || (J.buf = ht__map(CHUNK))) {
        poll_perf_map();
        poll_jitdump(force);
        flush_batch();
    }
    int grew = J.registered != before;
    ht__spin_unlock(&J.lock);
    return grew;
}

void ht__jitmaps_forget(void)
{
    /* a forked child: its own pid, its own files */
    HT_RESET(J.lock.v, 0);
    HT_RESET(J.perf_state, PERF_NONE);     /* (no descriptor outlives a look) */
    HT_RESET(J.dump_found, 0);
    HT_RESET(J.pid, 0);
    perf_restart();
    HT_RESET(J.nadds, 0);
    HT_RESET(J.names_used, 0);
}
