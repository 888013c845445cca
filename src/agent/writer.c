/* writer.c -- the trace file: naming and creating it, staging records,
 * compressing blocks with a static zstd context, writing them with raw
 * system calls; the module map; snapshots.
 *
 * No writer thread: records are staged and written by whoever takes a
 * snapshot (exit, crash handler, control thread, ht_snapshot), under one
 * spin lock that malloc hooks never take. The file is opened for each
 * flush and closed again, so the traced program never sees a descriptor of
 * ours; before writing, the descriptor's inode is checked against the file
 * we created (O_EXCL|O_NOFOLLOW, 0600), so a replaced file is never
 * written. A failed or partial write is cut back to the last whole block
 * (the file stays readable) and counted; the stack nodes and modules it
 * carried are sent again with the next block.
 *
 * Modules are discovered from the stack nodes themselves: each new node's
 * address is looked up in the known modules and, if new, with glibc's
 * lock-free _dl_find_object (never dl_iterate_phdr, which takes the loader
 * lock), so the same code runs in the crash handler. dlclose (wrapped in
 * src/platform/.../modules.c) calls in before and after the real call: the
 * closing library's nodes and module record are staged before it goes, and
 * its unload time is recorded after.
 *
 * Async-signal-safe except ht__writer_init. Never allocates. */
#include "agent.h"
#include "../format/trace.h"
#include "../format/wire.h"
#include "../platform/linux-x86_64/cfi.h"
#include "../platform/linux-x86_64/jit.h"
#include "../platform/linux-x86_64/unwind.h"
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#define RAW_CAP   (512u << 10)      /* staging buffer: one block's payload */
#define REC_ROOM  (96u << 10)       /* room guaranteed before each record */
#define PATH_MAX_ 4096
#define MAX_MODULES 65536       /* fewer under an address-space limit: W.max_mods */
#define PATHS_CAP   (16u << 20) /* likewise: W.paths_cap */
#define JIT_PENDING 4096
#define NODE_BATCH 2048         /* nodes per NODES record */

typedef struct {
    uint64_t start, end, bias;
    uint64_t load_ns, unload_ns;
    const struct link_map *map; /* for its program headers */
    uint32_t id;
    uint32_t path_off;          /* in W.paths */
    uint32_t orig;              /* an alias: the module it copies; else id */
    uint8_t loaded;             /* still mapped as far as we know */
    uint8_t written;            /* MODULE record flushed */
    uint8_t unload_written;     /* MODULE_UNLOAD record flushed */
    uint8_t staged;             /* a record is in the staging buffer */
} module_t;

static struct {
    ht_spinlock_t lock;
    int owner;                  /* tid holding the lock */
    int initialised;
    int created;                /* the file exists and is ours */
    int create_failed;
    int finished;               /* END written: no more snapshots */
    int ending;                 /* the END block is being appended: it may
                                   use the room kept for it (END_ROOM) */
    uint64_t dev, ino;
    int held_fd;                /* the file kept open (-1: opened per write) */
    uint64_t size;              /* bytes in the file (whole blocks) */
    uint32_t seq;
    uint32_t node_mark;         /* nodes [1, node_mark) staged or written */
    uint32_t node_mark_ok;      /* nodes [1, node_mark_ok) written */
    uint8_t *raw;
    size_t raw_len;
    uint8_t *out;
    size_t out_cap;
    ZSTD_CCtx *cctx;
    void *ws;                   /* cctx's workspace, ws_len bytes */
    size_t ws_len;
    module_t *mods;
    uint32_t nmods;
    char *paths;                /* module paths, NUL-terminated, bumped */
    uint32_t paths_len;
    uint32_t max_mods, paths_cap;   /* MAX_MODULES, PATHS_CAP or what fits a
                                       sixteenth of the reserve allowance */
    uint32_t last_mod;
    char path[PATH_MAX_];
    char dir[PATH_MAX_];        /* where this process's first trace went
                                   (absolute, with the '/'): a forked child's
                                   goes there too, whatever its cwd */
    char exe[PATH_MAX_];
    char prog[80];
    char cmdline[4096];
    size_t cmdline_len;
    /* per serial, the registration last recorded with it (jit_key; 0:
     * none): serials wrap after 32767 registrations, so one serial can
     * name different code over a run, even two live ranges at once */
    uint64_t jit_seen[HT_JIT_SERIAL_MAX + 1];
    uint32_t jit_seen_top;      /* serials [0, top) may be set: what a reset
                                   clears (256 KiB in all: a forked child
                                   touched every page of it) */
    uint32_t jit_pending[JIT_PENDING];  /* nodes in JIT code not yet registered */
    uint32_t njit_pending;
    uint32_t jn_node[NODE_BATCH];       /* untagged nodes of a batch named ... */
    uint16_t jn_serial[NODE_BATCH];     /* ... by these registrations */
    uint32_t njn;
    int ppid;
    /* snapshots list what changed since the last one (docs/format.md) */
    uint32_t base;              /* sites the last snapshot written whole listed
                                   (0: the next one starts a fresh list) */
    uint32_t base_epoch;        /* the peak epoch that snapshot read */
    int in_snapshot;            /* a snapshot is being staged ... */
    int abandoned;              /* ... and one of its blocks failed: the
                                   rest of it is dropped, not written, and
                                   the next one starts a fresh list */
    uint64_t at_peak[1024][3];  /* a chunk's sites' position and bytes and blocks at the peak */
    uint64_t temp[1024][3];     /* its sites with temporary blocks: position, blocks, bytes */
} W;

/* ---- small libc-free helpers ------------------------------------------ */

size_t ht__strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

size_t ht__fmt_u64(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

static size_t cat(char *dst, size_t pos, size_t cap, const char *s)
{
    while (*s && pos + 1 < cap)
        dst[pos++] = *s++;
    dst[pos] = 0;
    return pos;
}

uint64_t ht__now_ns(void)
{
    uint64_t now = ht__mono_ns();
    return now > ht__agent.t0_ns ? now - ht__agent.t0_ns : 0;
}

/* ---- staging ----------------------------------------------------------- */

static void put_varint(uint64_t v) { W.raw_len += ht_put_varint(W.raw + W.raw_len, v); }

static void put_bytes(const void *p, size_t n)
{
    __builtin_memcpy(W.raw + W.raw_len, p, n);
    W.raw_len += n;
}

static void put_str(const char *s, size_t n)
{
    put_varint(n);
    put_bytes(s, n);
}

static int flush(void);

static void forget_jit_seen(void)
{
    if (!W.jit_seen_top)
        return;                 /* (a fork child's page not copied: see HT_RESET) */
    __builtin_memset(W.jit_seen, 0, W.jit_seen_top * sizeof W.jit_seen[0]);
    W.jit_seen_top = 0;
}

/* Starts a record: makes room, writes the type and a 3-byte length
 * placeholder. Returns the offset of the placeholder. */
static size_t rec_begin(int type)
{
    if (W.raw_len + REC_ROOM > RAW_CAP)
        flush();
    W.raw[W.raw_len++] = (uint8_t)type;
    size_t at = W.raw_len;
    W.raw_len += 3;
    return at;
}

static void rec_end(size_t at)
{
    size_t len = W.raw_len - at - 3;    /* < 2^21: a 3-byte LEB128 */
    W.raw[at] = (uint8_t)(0x80 | (len & 0x7f));
    W.raw[at + 1] = (uint8_t)(0x80 | ((len >> 7) & 0x7f));
    W.raw[at + 2] = (uint8_t)((len >> 14) & 0x7f);
}

/* ---- file I/O ---------------------------------------------------------- */

/* Whether fd is open on our trace file. */
static int is_ours(int fd)
{
    struct stat st;
    return ht__sys2(SYS_fstat, fd, &st) == 0 && (uint64_t)st.st_dev == W.dev &&
           (uint64_t)st.st_ino == W.ino && S_ISREG(st.st_mode);
}

/* The file, opened by its name for one write (the agent holds no
 * descriptor of the program's table between writes), or the descriptor
 * held since the program gave up rights (ht__writer_create). */
static int open_checked(void)
{
    int held = W.held_fd;
    if (held >= 0) {
        if (is_ours(held))
            return held;
        /* the program closed it: the number is its own now (the control
         * thread, in a table of its own, cannot tell for the program) */
        if (!ht__own_files)
            W.held_fd = -1;
    }
    int fd = (int)ht__sys3(SYS_open, W.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (!is_ours(fd)) {
        ht__sys1(SYS_close, fd);
        return -1;
    }
    return fd;
}

HT_TLS int ht__own_files;

/* For the control thread's own table (agent.c): the descriptor held, and
 * whether a descriptor is open on the trace. */
int ht__writer_held_fd(void) { return ht_load_relaxed(&W.held_fd); }
int ht__writer_is_ours(int fd) { return is_ours(fd); }

static void close_checked(int fd)
{
    if (fd != W.held_fd)
        ht__sys1(SYS_close, fd);
}

/* Closes the held descriptor, if it is still ours. */
static void drop_held(void)
{
    if (W.held_fd >= 0 && is_ours(W.held_fd))
        ht__sys1(SYS_close, W.held_fd);
    W.held_fd = -1;
}

static int write_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n > 0) {
        long r = ht__sys4(SYS_pwrite64, fd, p, n, off);
        if (r == -EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Under a file size limit, every block but END leaves room for an END
 * block of its own (ht__trace_finish stages it alone: a 24-byte header
 * and at most 24 bytes of record, stored), so a trace whose last blocks
 * meet the limit still ends with END and reads complete, its lost bytes
 * counted there. Before, whether END fitted depended on how well the
 * blocks before it compressed: tests/agent/fsize.sh at a 285,000-byte
 * limit left about 1 trace in 20 without it ("the program ended without
 * passing through exit()"). */
#define END_ROOM (HT_BLOCK_HEADER_LEN + 24)

/* Appends bytes at W.size; on failure cuts the file back to W.size. */
static int append(const uint8_t *p, size_t n)
{
    if (!W.created)
        return -1;
    struct rlimit rl;
    /* never provoke SIGXFSZ: stay under RLIMIT_FSIZE */
    if (ht__sys4(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        W.size + n + (W.ending ? 0 : END_ROOM) > rl.rlim_cur)
        return -1;
    int fd = open_checked();
    if (fd < 0)
        return -1;
    int rc = write_all(fd, p, n, W.size);
    if (rc != 0)
        ht__sys2(SYS_ftruncate, fd, W.size);
    else
        W.size += n;
    close_checked(fd);
    return rc;
}

/* Compresses and writes the staged records as one block. */
static int flush(void)
{
    if (W.raw_len == 0)
        return 0;
    if (W.abandoned) {
        /* the rest of a snapshot a lost block began: alone, a reader
         * would take it for damage (records without their SNAP_BEGIN) or,
         * worse, for the whole of a leak check's REACH records */
        ht_fetch_add(&ht__drops.write_errors, W.raw_len);
        W.raw_len = 0;
        return -1;
    }
    uint8_t *hdr = W.out;
    uint8_t *payload = W.out + HT_BLOCK_HEADER_LEN;
    size_t cap = W.out_cap - HT_BLOCK_HEADER_LEN;
    uint32_t codec = HT_CODEC_STORED;
    size_t stored = W.raw_len;
    if (W.cctx) {
        size_t z = ZSTD_compressCCtx(W.cctx, payload, cap, W.raw, W.raw_len, 1);
        if (!ZSTD_isError(z) && z < W.raw_len &&
            W.raw_len <= (uint64_t)HT_BLOCK_MAX_RATIO * z + 4096) {
            codec = HT_CODEC_ZSTD;
            stored = z;
        }
    }
    if (codec == HT_CODEC_STORED)
        __builtin_memcpy(payload, W.raw, W.raw_len);
    ht_wr_u32(hdr, HT_BLOCK_MAGIC);
    ht_wr_u32(hdr + 4, codec);
    ht_wr_u32(hdr + 8, (uint32_t)stored);
    ht_wr_u32(hdr + 12, (uint32_t)W.raw_len);
    ht_wr_u32(hdr + 16, ht_checksum(payload, stored));
    ht_wr_u32(hdr + 20, ht_checksum(hdr, 20));
    int rc = append(W.out, HT_BLOCK_HEADER_LEN + stored);
    W.raw_len = 0;
    if (rc == 0) {
        W.node_mark_ok = W.node_mark;
        for (uint32_t i = 0; i < W.nmods; i++) {
            module_t *m = &W.mods[i];
            if (m->staged & 1)
                m->written = 1;
            if (m->staged & 2)
                m->unload_written = 1;
            m->staged = 0;
        }
    } else {
        W.abandoned = W.in_snapshot;
        ht_fetch_add(&ht__drops.write_errors, HT_BLOCK_HEADER_LEN + stored);
        /* what the lost block carried goes out again with the next one */
        W.node_mark = W.node_mark_ok;
        for (uint32_t i = 0; i < W.nmods; i++)
            W.mods[i].staged = 0;
        forget_jit_seen();      /* sent again if still there */
    }
    return rc;
}

/* ---- modules ----------------------------------------------------------- */

static void read_build_id_in(const module_t *m, uint8_t *id, size_t *idlen)
{
    const ElfW(Phdr) *ph;
    int phnum = ht__module_phdrs(m->map, m->start, m->end, &ph);
    for (int i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        uint64_t p = m->bias + ph[i].p_vaddr, e = p + ph[i].p_memsz;
        /* only notes the loader mapped: inside a readable PT_LOAD */
        int mapped = 0;
        for (int k = 0; k < phnum && !mapped; k++)
            mapped = ph[k].p_type == PT_LOAD && (ph[k].p_flags & PF_R) &&
                     ph[i].p_vaddr >= ph[k].p_vaddr &&
                     ph[i].p_vaddr + ph[i].p_memsz <= ph[k].p_vaddr + ph[k].p_filesz;
        if (!mapped || e < p)
            continue;
        while (p + sizeof(ElfW(Nhdr)) <= e) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            uint64_t name = p + sizeof *nh, desc = name + ((nh->n_namesz + 3) & ~3u);
            uint64_t next = desc + ((nh->n_descsz + 3) & ~3u);
            if (next > e || next <= p)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                __builtin_memcmp((const void *)name, "GNU", 4) == 0 && nh->n_descsz <= 64) {
                __builtin_memcpy(id, (const void *)desc, nh->n_descsz);
                *idlen = nh->n_descsz;
                return;
            }
            p = next;
        }
    }
}

/* The module's GNU build-id note, read in a module read section: a
 * dlclose on another thread may be unmapping it (then: no build-id; the
 * closing module itself was staged before its dlclose began). */
static void read_build_id(const module_t *m, uint8_t *id, size_t *idlen)
{
    *idlen = 0;
    int tok = ht__module_enter();
    if (tok)
        read_build_id_in(m, id, idlen);
    ht__module_leave(tok);
}

static void stage_module(module_t *m)
{
    const char *path = W.paths + m->path_off;
    uint8_t bid[64];
    size_t bidlen;
    read_build_id(&W.mods[m->orig], bid, &bidlen);
    size_t at = rec_begin(HT_REC_MODULE);
    put_varint(m->id);
    put_varint(m->load_ns);
    put_varint(m->start);
    put_varint(m->end);
    put_varint(m->bias);
    size_t plen = ht__strlen(path);
    put_str(path, plen < PATH_MAX_ ? plen : PATH_MAX_);
    put_str((const char *)bid, bidlen);
    rec_end(at);
    m->staged |= 1;
}

static module_t *find_known(uint64_t addr)
{
    if (W.last_mod < W.nmods) {
        module_t *m = &W.mods[W.last_mod];
        if (m->loaded && addr >= m->start && addr < m->end)
            return m;
    }
    for (uint32_t i = W.nmods; i-- > 0;) {
        module_t *m = &W.mods[i];
        if (m->loaded && addr >= m->start && addr < m->end) {
            W.last_mod = i;
            return m;
        }
    }
    return NULL;
}

static module_t *new_module(uint64_t start, uint64_t end, uint64_t bias)
{
    if (W.nmods >= W.max_mods)
        return NULL;
    module_t *m = &W.mods[W.nmods];
    __builtin_memset(m, 0, sizeof *m);
    m->start = start;
    m->end = end;
    m->bias = bias;
    m->id = m->orig = W.nmods;
    m->loaded = 1;
    m->load_ns = ht__now_ns();
    W.last_mod = W.nmods++;
    return m;
}

static uint32_t keep_path(const char *name)
{
    size_t len = ht__strlen(name);
    if (len >= PATH_MAX_)
        len = PATH_MAX_ - 1;
    if (W.paths_len + len + 1 > W.paths_cap)
        return 0;               /* "" */
    uint32_t off = W.paths_len;
    __builtin_memcpy(W.paths + off, name, len);
    W.paths[off + len] = 0;
    W.paths_len += (uint32_t)len + 1;
    return off;
}

/* The module holding `addr`, learned now if new: a loaded object, or an
 * alias of one (a copy of its code elsewhere; its bias is chosen so that
 * address - bias is the original's link-time address). NULL if addr is in
 * neither, or the table is full. */
static module_t *module_of(uint64_t addr)
{
    module_t *m = find_known(addr);
    if (m)
        return m;
    /* the link map (and its name) is the loader's memory, which a dlclose
     * on another thread frees: read it in a module read section */
    struct dl_find_object fo;
    int tok = ht__module_enter();
    if (tok && _dl_find_object((void *)addr, &fo) == 0) {
        m = new_module((uint64_t)fo.dlfo_map_start, (uint64_t)fo.dlfo_map_end,
                       fo.dlfo_link_map ? (uint64_t)fo.dlfo_link_map->l_addr : 0);
        if (m) {
            m->map = fo.dlfo_link_map;
            const char *name = fo.dlfo_link_map && fo.dlfo_link_map->l_name ?
                               fo.dlfo_link_map->l_name : "";
            m->path_off = keep_path(name[0] ? name : W.exe);   /* "": the main program */
        }
        ht__module_leave(tok);
        return m;
    }
    ht__module_leave(tok);
    uintptr_t lo, hi, orig;
    module_t *o;
    if (!ht__jit_alias((uintptr_t)addr, &lo, &hi, &orig) || !(o = module_of(orig)) || o->orig != o->id)
        return NULL;
    uint32_t oi = o->id;
    m = new_module(lo, hi, o->bias + (addr - orig));
    if (!m)
        return NULL;
    m->orig = oi;
    m->path_off = W.mods[oi].path_off;
    return m;
}

/* Makes sure the module holding `addr` is known and its record staged.
 * Returns 0 if addr is in no loaded module. */
static int note_module(uint64_t addr)
{
    module_t *m = module_of(addr);
    if (!m)
        return W.nmods >= W.max_mods;
    if (m->orig != m->id) {
        module_t *o = &W.mods[m->orig];
        if (!o->written && !(o->staged & 1))
            stage_module(o);
    }
    if (!m->written && !(m->staged & 1))
        stage_module(m);
    return 1;
}

/* What tells registrations with the same serial apart: range and name
 * (names are copies in the registry's arena, one per registration). */
static uint64_t jit_key(const ht_jit_range_t *r)
{
    return (r->start ^ (uint64_t)(r->end - r->start) << 40 ^ (uint64_t)(uintptr_t)r->name * 0x9e3779b97f4a7c15ull) | 1;
}

/* Frames in registered JIT code carry the registration's serial: record
 * its range and name once (while it is still registered) so a reader can
 * name the frame even after the code is gone. A frame captured before its
 * code was registered (perf maps are read every few ms) has no serial: the
 * registration that covers it when the node is staged names it (a
 * JIT_NODE record after the node's), or, if none does yet, the first that
 * covers it at a later staging (pend_jit). Returns the serial that names
 * the frame, 0 if nothing covers it yet. */
static unsigned note_jit(uint64_t frame)
{
    unsigned serial = HT_FRAME_JIT_SERIAL(frame);
    ht_jit_range_t r;
    if (!ht__jit_find(HT_FRAME_ADDRESS(frame) - 1, &r))
        return serial;
    if (serial && r.serial != serial)
        return serial;          /* gone: replaced by other code */
    serial = r.serial;
    uint64_t key = jit_key(&r);
    if (W.jit_seen[serial] == key)
        return serial;
    size_t at = rec_begin(HT_REC_JIT);
    put_varint(serial);
    put_varint(r.start);
    put_varint(r.end - r.start);
    put_varint(ht__now_ns());
    const char *name = r.name ? r.name : "";
    size_t len = ht__strlen(name);
    put_str(name, len < 1024 ? len : 1024);
    rec_end(at);
    W.jit_seen[serial] = key;
    if (serial >= W.jit_seen_top)
        W.jit_seen_top = serial + 1u;
    return serial;
}

/* Says that untagged node `id` is named by registration `serial`. */
static void put_jit_node(uint32_t id, unsigned serial)
{
    size_t at = rec_begin(HT_REC_JIT_NODE);
    put_varint(id);
    put_varint(serial);
    rec_end(at);
}

/* An untagged node nothing covers yet: tried again at each later staging,
 * since its perf map line may still be on its way. (Past JIT_PENDING
 * waiting nodes, the rest stay unnamed.) */
static void pend_jit(uint32_t id)
{
    if (W.njit_pending < JIT_PENDING)
        W.jit_pending[W.njit_pending++] = id;
}

static void retry_pending_jit(void)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < W.njit_pending; i++) {
        ht_stacknode_t nd;
        unsigned serial = ht__stackdb_node(W.jit_pending[i], &nd) == 0 ? note_jit(nd.addr) : 0;
        if (serial)
            put_jit_node(W.jit_pending[i], serial);
        else
            W.jit_pending[k++] = W.jit_pending[i];
    }
    W.njit_pending = k;
}

/* Stages every stack node interned since the last call, and the modules
 * their addresses fall in. */
static void stage_nodes(void)
{
    uint32_t count = ht__stackdb_node_count();
    if (W.node_mark == 0)
        W.node_mark = W.node_mark_ok = 1;   /* node 0 is the root: never written */
    retry_pending_jit();
    while (W.node_mark < count) {
        uint32_t first = W.node_mark, n = count - first;
        if (n > NODE_BATCH)
            n = NODE_BATCH;
        /* modules and JIT code first, so a reader knows them before the
         * nodes */
        W.njn = 0;
        for (uint32_t i = 0; i < n; i++) {
            ht_stacknode_t nd;
            unsigned serial;
            if (ht__stackdb_node(first + i, &nd) != 0)
                continue;
            if (HT_FRAME_JIT_SERIAL(nd.addr))
                note_jit(nd.addr);
            else if (nd.addr <= 1 || note_module(nd.addr - 1))    /* 1: HT_FRAME_UNWIND_STOPPED */
                continue;
            else if ((serial = note_jit(nd.addr)) != 0) {
                W.jn_node[W.njn] = first + i;
                W.jn_serial[W.njn++] = (uint16_t)serial;
            } else {
                pend_jit(first + i);
            }
        }
        size_t at = rec_begin(HT_REC_NODES);
        put_varint(first);
        put_varint(n);
        for (uint32_t i = 0; i < n; i++) {
            ht_stacknode_t nd = { 0, 0 };
            ht__stackdb_node(first + i, &nd);
            put_varint(first + i - nd.parent);
            put_varint(nd.addr);
        }
        rec_end(at);
        for (uint32_t i = 0; i < W.njn; i++)
            put_jit_node(W.jn_node[i], W.jn_serial[i]);
        W.node_mark = first + n;
    }
}

/* Marks modules that are no longer mapped as unloaded. */
static void stage_unloads(void)
{
    for (uint32_t i = 0; i < W.nmods; i++) {
        module_t *m = &W.mods[i];
        if (!m->loaded)
            continue;
        struct dl_find_object fo;
        uintptr_t lo, hi, orig;
        if (m->orig == m->id ? _dl_find_object((void *)m->start, &fo) == 0 &&
                               (uint64_t)fo.dlfo_map_start == m->start && (uint64_t)fo.dlfo_map_end == m->end
                             : W.mods[m->orig].loaded && ht__jit_alias(m->start, &lo, &hi, &orig) &&
                               lo == m->start && hi == m->end)
            continue;
        m->loaded = 0;
        m->unload_ns = ht__now_ns();
    }
    for (uint32_t i = 0; i < W.nmods; i++) {
        module_t *m = &W.mods[i];
        if (m->loaded || m->unload_written || (m->staged & 2) || !(m->written || (m->staged & 1)))
            continue;
        size_t at = rec_begin(HT_REC_MODULE_UNLOAD);
        put_varint(m->id);
        put_varint(m->unload_ns);
        rec_end(at);
        m->staged |= 2;
    }
}

/* ---- locking ----------------------------------------------------------- */

static int wlock(int ctx)
{
    int tid = ht__gettid();
    if (ht_load_relaxed(&W.owner) == tid)
        return 0;               /* re-entered from a signal handler: give up */
    if (ctx == HT_WCTX_CRASH) {
        /* another thread may be stopped inside the writer: wait ~2 s at most */
        int ok = 0;
        for (unsigned i = 0; i < 20000 && !(ok = ht__spin_trylock(&W.lock)); i++) {
            struct timespec ts = { 0, 100000 };
            ht__sys2(SYS_nanosleep, &ts, NULL);
        }
        if (!ok)
            return 0;
    } else {
        ht__spin_lock(&W.lock);
    }
    ht_store_relaxed(&W.owner, tid);
    return 1;
}

static void wunlock(void)
{
    ht_store_relaxed(&W.owner, 0);
    ht__spin_unlock(&W.lock);
}

/* ---- the file ---------------------------------------------------------- */

static void sanitize_prog(const char *s)
{
    size_t n = 0;
    for (; *s && n < sizeof W.prog - 1; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        W.prog[n++] = ok ? c : '_';
    }
    if (n == 0)
        W.prog[n++] = 'p';
    W.prog[n] = 0;
}

/* dir + "/heaptrail.<prog>.<pid>[.<k>].ht" */
static void default_name(char *out, const char *dir, int pid, int k)
{
    size_t n = 0;
    char num[24];
    n = cat(out, 0, PATH_MAX_, dir);
    if (n && out[n - 1] != '/')
        n = cat(out, n, PATH_MAX_, "/");
    n = cat(out, n, PATH_MAX_, "heaptrail.");
    n = cat(out, n, PATH_MAX_, W.prog);
    n = cat(out, n, PATH_MAX_, ".");
    num[ht__fmt_u64(num, (uint64_t)pid)] = 0;
    n = cat(out, n, PATH_MAX_, num);
    if (k) {
        n = cat(out, n, PATH_MAX_, ".");
        num[ht__fmt_u64(num, (uint64_t)k)] = 0;
        n = cat(out, n, PATH_MAX_, num);
    }
    cat(out, n, PATH_MAX_, ".ht");
}

static uint64_t parse_u64(const char *s)
{
    uint64_t v = 0;
    if (!s)
        return 0;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

static int try_create(const char *path)
{
    int fd = (int)ht__sys3(SYS_open, path,
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fd;
    struct stat st;
    uint8_t hdr[HT_FILE_HEADER_LEN];
    __builtin_memcpy(hdr, HT_FILE_MAGIC, 8);
    ht_wr_u32(hdr + 8, HT_FORMAT_VERSION);
    ht_wr_u32(hdr + 12, 0);
    int ok = ht__sys2(SYS_fstat, fd, &st) == 0 && write_all(fd, hdr, sizeof hdr, 0) == 0;
    ht__sys1(SYS_close, fd);
    if (!ok)
        return -EIO;
    __builtin_memcpy(W.path, path, ht__strlen(path) + 1);
    size_t len = ht__path_dir_len(path);
    if (len > 0 && path[0] == '/') {
        __builtin_memcpy(W.dir, path, len);
        W.dir[len] = 0;
    }
    W.dev = (uint64_t)st.st_dev;
    W.ino = (uint64_t)st.st_ino;
    W.size = sizeof hdr;
    W.created = 1;
    return 0;
}

/* Picks the name and creates the file. HEAPTRAIL_OUTPUT names it for the
 * process whose pid is HEAPTRAIL_OUTPUT_PID (heaptrail run sets both);
 * other processes (forked or exec'd children) use the default name in the
 * same directory: a forked child the directory its parent's trace went to
 * (W.dir), not its cwd, which the program may have changed since (a
 * shell's `cd /; x=$(cmd)` put the subshell's trace in /). An existing
 * name gets a numeric suffix. */
static void create_file(void)
{
    if (W.created || W.create_failed)
        return;
    int pid = (int)ht__sys0(SYS_getpid);
    const char *out = ht__env("HEAPTRAIL_OUTPUT");
    uint64_t out_pid = parse_u64(ht__env("HEAPTRAIL_OUTPUT_PID"));
    char dir[PATH_MAX_], path[PATH_MAX_];
    size_t n = 0;
    if (W.dir[0] && out_pid != (uint64_t)pid) {
        /* a forked child: next to its parent's trace */
        n = cat(dir, 0, sizeof dir, W.dir);
        dir[n] = 0;
    } else {
        if (out && out[0] != '/') {
            if (ht__sys2(SYS_getcwd, dir, sizeof dir) > 0)
                n = ht__strlen(dir);
            n = cat(dir, n, sizeof dir, "/");
        }
        dir[n] = 0;
        if (out && *out) {
            n = cat(dir, n, sizeof dir, out);
            if (out_pid == (uint64_t)pid) {
                int rc = try_create(dir);
                if (rc == 0 || rc != -EEXIST) {
                    W.create_failed = rc != 0;
                    return;
                }
            }
            /* the directory part of the given name */
            while (n > 0 && dir[n - 1] != '/')
                n--;
            dir[n] = 0;
        } else if (ht__sys2(SYS_getcwd, dir, sizeof dir) <= 0) {
            W.create_failed = 1;
            return;
        }
    }
    for (int k = 0; k < 100; k++) {
        default_name(path, dir, pid, k);
        int rc = try_create(path);
        if (rc == 0)
            return;
        if (rc != -EEXIST)
            break;
    }
    W.create_failed = 1;
}

static void stage_process(void)
{
    size_t at = rec_begin(HT_REC_PROCESS);
    put_varint((uint64_t)ht__sys0(SYS_getpid));
    put_varint((uint64_t)(int64_t)ht__sys0(SYS_getppid));
    put_varint(ht__agent.start_realtime_ns);
    put_str(W.exe, ht__strlen(W.exe));
    put_str(W.cmdline, W.cmdline_len);
    /* appended fields (docs/format.md): allocator functions not ours */
    const char *fm = ht__agent.foreign_module;
    if (fm && !fm[0])
        fm = W.exe;             /* the program itself */
    put_varint(ht__agent.foreign);
    put_str(fm ? fm : "", fm ? ht__strlen(fm) : 0);
    put_varint((uint64_t)ht_load_relaxed(&ht__attached));  /* appended: heaptrail attach */
    put_varint(ht__agent.sample);   /* appended: sampling mode's mean spacing, 0 if off */
    rec_end(at);
}

static int ensure_file(void)
{
    if (!W.created) {
        create_file();
        if (!W.created)
            return -1;
        stage_process();
        /* a forked child: modules unloaded before the fork still name
         * the frames of old stacks */
        for (uint32_t i = 0; i < W.nmods; i++) {
            module_t *m = &W.mods[i];
            if (m->loaded || m->written)
                continue;
            stage_module(m);
            size_t at = rec_begin(HT_REC_MODULE_UNLOAD);
            put_varint(m->id);
            put_varint(m->unload_ns);
            rec_end(at);
            m->staged |= 2;
        }
    }
    return 0;
}

static void read_self(void)
{
    long r = ht__sys3(SYS_readlink, "/proc/self/exe", W.exe, sizeof W.exe - 1);
    W.exe[r > 0 ? r : 0] = 0;
    int fd = (int)ht__sys3(SYS_open, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
    W.cmdline_len = 0;
    if (fd >= 0) {
        for (;;) {
            long k = ht__sys3(SYS_read, fd, W.cmdline + W.cmdline_len,
                              sizeof W.cmdline - W.cmdline_len);
            if (k <= 0)
                break;
            W.cmdline_len += (size_t)k;
            if (W.cmdline_len == sizeof W.cmdline)
                break;
        }
        ht__sys1(SYS_close, fd);
    }
    extern char *program_invocation_short_name;
    const char *p = program_invocation_short_name;
    if (!p || !*p) {
        p = W.exe;
        for (const char *q = W.exe; *q; q++)
            if (*q == '/')
                p = q + 1;
    }
    sanitize_prog(p);
}

void ht__writer_init(void)
{
    if (W.initialised)
        return;
    W.held_fd = -1;
    W.raw = ht__map(RAW_CAP);
    W.out_cap = ZSTD_compressBound(RAW_CAP) + HT_BLOCK_HEADER_LEN;
    if (W.out_cap < RAW_CAP + HT_BLOCK_HEADER_LEN)
        W.out_cap = RAW_CAP + HT_BLOCK_HEADER_LEN;
    W.out = ht__map(W.out_cap);
    /* a sixteenth of heaptrail's address-space allowance at most, each */
    W.max_mods = (uint32_t)(ht__reserve_share(16, (uint64_t)MAX_MODULES * sizeof(module_t)) / sizeof(module_t));
    W.paths_cap = (uint32_t)ht__reserve_share(16, PATHS_CAP);
    if (W.max_mods < 1024)
        W.max_mods = 1024;
    if (W.paths_cap < (256u << 10))
        W.paths_cap = 256u << 10;
    W.mods = ht__reserve((size_t)W.max_mods * sizeof(module_t));
    W.paths = ht__reserve(W.paths_cap);
    W.paths_len = 1;            /* offset 0 is "" */
    ZSTD_compressionParameters cp = ZSTD_getCParams(1, RAW_CAP, 0);
    size_t ws = ZSTD_estimateCCtxSize_usingCParams(cp);
    const char *z = ht__env("HEAPTRAIL_COMPRESS");
    void *wsp = z && z[0] == '0' ? NULL : ht__map(ws);   /* "0": stored blocks */
    if (wsp) {
        W.cctx = ZSTD_initStaticCCtx(wsp, ws);
        W.ws = wsp;
        W.ws_len = ws;
    }
    if (!W.raw || !W.out || !W.mods || !W.paths) {
        W.create_failed = 1;
        return;
    }
    read_self();
    W.initialised = 1;
    wlock(HT_WCTX_NORMAL);
    if (ensure_file() == 0)
        flush();
    wunlock();
}

const char *ht__writer_path(void) { return W.created ? W.path : NULL; }

/* ---- snapshots --------------------------------------------------------- */

/* REACH records (docs/format.md): the header, then up to 1024 sites each,
 * then the flags (custom blocks judged: reach.c). */
static void stage_reach(uint32_t seq, const ht_reach_t *r, uint32_t nlost)
{
    uint32_t i = 0, left = r->status == HT_REACH_DONE ? nlost : 0;
    do {
        size_t at = rec_begin(HT_REC_REACH);
        put_varint(seq);
        put_varint((uint64_t)r->status);
        put_varint(r->threads);
        put_varint(r->scanned_bytes);
        put_varint(r->time_ns);
        uint32_t cnt = left < 1024 ? left : 1024;
        put_varint(cnt);
        for (uint32_t k = 0; k < cnt; i++) {
            const ht_reach_site_t *x = &r->sites[i];
            if (!(x->lost_blocks | x->ilost_blocks))
                continue;
            put_varint(x->pos);
            put_varint(x->lost_blocks);
            put_varint(x->lost_bytes);
            put_varint(x->ilost_blocks);
            put_varint(x->ilost_bytes);
            k++;
        }
        put_varint(HT_REACH_F_CUSTOM);
        left -= cnt;
        rec_end(at);
    } while (left);
}

/* POSSIBLE records after a computed check's REACH: up to 1024 sites
 * each, in site order (always one: its presence says they were counted). */
static void stage_possible(uint32_t seq, const ht_reach_t *r, uint32_t nposs)
{
    uint32_t i = 0, left = nposs;
    do {
        size_t at = rec_begin(HT_REC_POSSIBLE);
        put_varint(seq);
        uint32_t cnt = left < 1024 ? left : 1024;
        put_varint(cnt);
        for (uint32_t k = 0; k < cnt; i++) {
            const ht_reach_site_t *x = &r->sites[i];
            if (!x->plost_blocks)
                continue;
            put_varint(x->pos);
            put_varint(x->plost_blocks);
            put_varint(x->plost_bytes);
            k++;
        }
        left -= cnt;
        rec_end(at);
    } while (left);
}

/* One snapshot: its process figures, then its sites as changes to the
 * list the last snapshot written whole left in the file (W.base sites; 0:
 * a fresh list, in a new file or after a failed write). A site keeps the
 * position it was first listed at (ht__site_wpos); one is written again
 * only when the program changed it since (its dirty flag), so a quiet
 * program's snapshot is a few bytes per 1,024 sites, not ~1.2 a site. Its
 * figures at the peak follow, relative to its live ones when the peak
 * moved (or the list is fresh), else as changes; its temporary blocks as
 * changes. Returns the sites listed. */
static uint32_t stage_snapshot(int reason, ht_reach_t *reach)
{
    ht_totals_t t;
    ht__totals(&t);
    uint32_t seq = W.seq++;
    size_t at = rec_begin(HT_REC_SNAP_BEGIN);
    put_varint(seq);
    put_varint((uint64_t)reason);
    put_varint(ht__now_ns());
    put_varint(t.live_blocks);
    put_varint(t.live_bytes);
    put_varint(t.total_blocks);
    put_varint(t.total_bytes);
    put_varint(t.total_frees);
    put_varint(t.peak_bytes);
    put_varint(t.peak_blocks);
    put_varint(ht__peak_ns());      /* appended in the sixteenth session */
    rec_end(at);

    uint32_t n = ht__site_count(), i = 0, nlost = 0, nposs = 0;
    uint32_t *wpos = ht__site_wpos();
    uint32_t base = wpos ? W.base : 0, nsites = base;
    uint32_t epoch = ht__peak_epoch();
    int fresh = base == 0, peak_changes = !fresh && epoch == W.base_epoch;
    int reach_done = reach && reach->status == HT_REACH_DONE;
    do {
        at = rec_begin(HT_REC_SITE_DELTA);
        put_varint(seq);
        put_varint(base);
        size_t cnt_at = W.raw_len;
        W.raw_len += 3;         /* count placeholder, a 3-byte varint */
        uint32_t cnt = 0, ntemp = 0, npeak = 0;
        for (uint32_t end = n - i < 1024 ? n : i + 1024; i < end; i++) {
            ht_site_t *s = ht__site_at(i);
            ht_reach_site_t *r = reach_done && i < reach->nsites ? &reach->sites[i] : NULL;
            /* a site made since stage_nodes may name a stack whose nodes
             * the file does not hold yet (the program runs on while we
             * write): it waits for the next snapshot. Writing it made the
             * reader call the record damaged. A site not written has no
             * position for REACH and POSSIBLE to name. */
            if (!s || ht_load_relaxed(&s->total_blocks) == 0 ||
                (s->stack >= W.node_mark && s->stack != HT_STACK_ID_OVERFLOW)) {
                if (r)
                    __builtin_memset(r, 0, sizeof *r);
                if (fresh && wpos[i])
                    wpos[i] = 0;
                continue;
            }
            int added = fresh || wpos[i] == 0;
            /* written again when the program changed it since the last
             * write: the exchange (a full barrier) comes before the figures
             * are read, and an update sets the flag after its figures, so
             * an update this read misses sets it again. A fresh list does
             * not clear the flags: a fork child would copy every page of
             * the records. A site with lost blocks is written whatever its
             * flag, so that the counts are capped by the figures written. */
            int dirty = added || (r && (r->lost_blocks | r->ilost_blocks | r->plost_blocks));
            if (!fresh && ht_load_relaxed(&s->dirty) && __atomic_exchange_n(&s->dirty, 0, __ATOMIC_SEQ_CST))
                dirty = 1;
            uint32_t pos = added ? nsites++ : wpos[i] - 1;
            if (added)
                wpos[i] = pos + 1;
            uint64_t lk = ht_load_relaxed(&s->live_blocks), lb = ht_load_relaxed(&s->live_bytes);
            if (dirty) {
                uint64_t tk_all = ht_load_relaxed(&s->total_blocks), tb_all = ht_load_relaxed(&s->total_bytes);
                put_varint(pos);
                if (added) {
                    put_varint(s->stack);
                    put_varint(s->kind);
                }
                put_varint(lk);
                put_varint(lb);
                put_varint(tk_all);
                put_varint(tb_all);
                put_varint(ht_load_relaxed(&s->peak_bytes));
                cnt++;
                /* read after the totals, which the program may have raised
                 * since: never more than they say */
                uint64_t tb, tk = ht__site_temp(s, &tb);
                tk = tk < tk_all ? tk : tk_all;
                tb = tb < tb_all ? tb : tb_all;
                if (tk) {
                    W.temp[ntemp][0] = pos;
                    W.temp[ntemp][1] = tk;
                    W.temp[ntemp++][2] = tb;
                }
            }
            uint64_t pk, pb = ht__site_at_peak(s, epoch, &pk);
            if (peak_changes ? dirty : pb != lb || pk != lk) {
                W.at_peak[npeak][0] = pos;
                W.at_peak[npeak][1] = pb;
                W.at_peak[npeak++][2] = pk;
            }
            if (r) {
                r->pos = pos;
                /* the program ran on after the scan: a block it found lost
                 * may be freed since (through a pointer the scan could not
                 * see, e.g. a disguised one). What is counted lost is never
                 * more than what is live now. */
                r->lost_blocks = r->lost_blocks < lk ? r->lost_blocks : lk;
                r->ilost_blocks = r->ilost_blocks < lk - r->lost_blocks ? r->ilost_blocks : lk - r->lost_blocks;
                r->lost_bytes = r->lost_bytes < lb ? r->lost_bytes : lb;
                r->ilost_bytes = r->ilost_bytes < lb - r->lost_bytes ? r->ilost_bytes : lb - r->lost_bytes;
                uint64_t qk = lk - r->lost_blocks - r->ilost_blocks, qb = lb - r->lost_bytes - r->ilost_bytes;
                r->plost_blocks = r->plost_blocks < qk ? r->plost_blocks : qk;
                r->plost_bytes = r->plost_bytes < qb ? r->plost_bytes : qb;
                nlost += (r->lost_blocks | r->ilost_blocks) != 0;
                nposs += r->plost_blocks != 0;
            }
        }
        W.raw[cnt_at] = (uint8_t)(0x80 | (cnt & 0x7f));
        W.raw[cnt_at + 1] = (uint8_t)(0x80 | ((cnt >> 7) & 0x7f));
        W.raw[cnt_at + 2] = (uint8_t)((cnt >> 14) & 0x7f);
        rec_end(at);
        /* the chunk's sites' figures at the process's peak */
        at = rec_begin(HT_REC_PEAK_DELTA);
        put_varint(seq);
        put_varint((uint64_t)peak_changes);
        put_varint(npeak);
        for (uint32_t k = 0; k < npeak; k++) {
            put_varint(W.at_peak[k][0]);
            put_varint(W.at_peak[k][1]);
            put_varint(W.at_peak[k][2]);
        }
        rec_end(at);
        /* and the temporary blocks of those written (always a record: a
         * reader tells "none" from "not recorded" by its presence) */
        at = rec_begin(HT_REC_TEMP);
        put_varint(seq);
        put_varint(ntemp);
        for (uint32_t k = 0; k < ntemp; k++) {
            put_varint(W.temp[k][0]);
            put_varint(W.temp[k][1]);
            put_varint(W.temp[k][2]);
        }
        rec_end(at);
    } while (i < n && !W.abandoned);
    W.base_epoch = epoch;
    if (reach) {
        stage_reach(seq, reach, nlost);
        if (reach->status == HT_REACH_DONE)
            stage_possible(seq, reach, nposs);
    }
    at = rec_begin(HT_REC_SNAP_END);
    put_varint(seq);
    put_varint(nsites);
    rec_end(at);

    ht_stackdb_stats_t st;
    ht_stackdb_stats(&st);
    at = rec_begin(HT_REC_DROPS);
    put_varint(ht_load_relaxed(&ht__drops.overflow_allocs));
    put_varint(ht_load_relaxed(&ht__drops.unknown_frees));
    put_varint(ht_load_relaxed(&ht__drops.write_errors));
    put_varint(ht_load_relaxed(&ht__drops.reentrant) + ht_load_relaxed(&ht__drops.table_full));
    put_varint(ht_load_relaxed(&ht__drops.reentrant));
    put_varint(ht_load_relaxed(&ht__drops.table_full));
    put_varint(st.drops);
    rec_end(at);
    return nsites;
}

int ht__snapshot_write(int reason, int ctx, ht_reach_t *reach)
{
    if (!W.initialised || !wlock(ctx))
        return -1;
    int seq = -1;
    if (!W.finished && ensure_file() == 0) {
        stage_nodes();
        seq = (int)W.seq;
        W.in_snapshot = 1;
        uint32_t nsites = stage_snapshot(reason, reach);
        if (flush() != 0)
            seq = -1;
        /* the next snapshot lists changes to this one's sites if every
         * block of it reached the file, else a fresh list */
        W.base = W.abandoned ? 0 : nsites;
        W.in_snapshot = W.abandoned = 0;
    } else if (!W.finished) {
        ht_fetch_add(&ht__drops.write_errors, 1);
    }
    wunlock();
    return seq;
}

void ht__trace_finish(void)
{
    if (!W.initialised || !wlock(HT_WCTX_CRASH))
        return;
    if (!W.finished && W.created) {
        flush();                /* anything staged: END goes alone (END_ROOM) */
        size_t at = rec_begin(HT_REC_END);
        put_varint(ht__now_ns());
        /* so a reader learns of lost blocks even when the last DROPS was lost */
        put_varint(ht_load_relaxed(&ht__drops.write_errors));
        rec_end(at);
        W.ending = 1;
        flush();
        W.ending = 0;
    }
    W.finished = 1;
    drop_held();
    wunlock();
}

void ht__modules_rescan(void)
{
    if (!W.initialised || !wlock(HT_WCTX_NORMAL))
        return;
    if (!W.finished && W.created) {
        stage_nodes();
        stage_unloads();
    }
    wunlock();
}

/* No file yet: the next snapshot creates one and sends every node, module
 * and JIT record again (a fork child, or after a failed exec). */
static void forget_file(void)
{
    HT_RESET(W.created, 0);
    HT_RESET(W.create_failed, 0);
    HT_RESET(W.finished, 0);
    HT_RESET(W.size, 0);
    HT_RESET(W.seq, 0);
    HT_RESET(W.base, 0);
    HT_RESET(W.node_mark, 0);
    HT_RESET(W.node_mark_ok, 0);
    HT_RESET(W.raw_len, 0);
    for (uint32_t i = 0; i < W.nmods; i++) {
        HT_RESET(W.mods[i].written, 0);
        HT_RESET(W.mods[i].unload_written, 0);
        HT_RESET(W.mods[i].staged, 0);
    }
    forget_jit_seen();
    HT_RESET(W.njit_pending, 0);
}

/* After a failed exec (the trace was finished): the process goes on in a
 * new file, created at its next snapshot, with every node and module
 * again -- like a fork child's. */
void ht__writer_reopen(void)
{
    if (!W.initialised || !wlock(HT_WCTX_NORMAL))
        return;
    if (W.finished)
        forget_file();
    wunlock();
}

/* The lowest number the held descriptor takes: out of the way of a
 * program that closes 0-2 and expects open() to give them back, and of
 * the few files most programs have open */
#define HELD_FD_MIN 200

/* The program is about to give up rights (ht__agent_before_confine): the
 * trace file is created now if it is not there yet (a forked child's is
 * made at its first snapshot), and held open, since after a set-id call
 * the file (0600, the old owner's) may no longer open, and after chroot
 * its name no longer leads to it. */
void ht__writer_create(void)
{
    if (!W.initialised || !wlock(HT_WCTX_NORMAL))
        return;
    if (!W.finished && ensure_file() == 0) {
        flush();
        struct rlimit rl;
        int fd = W.held_fd < 0 ? open_checked() : -1;
        if (fd >= 0) {
            long min = HELD_FD_MIN;
            if (ht__sys4(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0 && rl.rlim_cur < 2 * HELD_FD_MIN)
                min = (long)rl.rlim_cur / 2;
            long h = ht__sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, min);
            ht__sys1(SYS_close, fd);
            W.held_fd = h >= 0 ? (int)h : -1;
        }
    }
    wunlock();
}

/* heaptrail attach: the file is made now, so that the CLI can say where
 * it is, or that the process cannot make it. */
int ht__writer_start_file(void)
{
    if (!W.initialised || !wlock(HT_WCTX_NORMAL))
        return -1;
    int r = !W.finished && ensure_file() == 0 ? 0 : -1;
    if (r == 0)
        flush();
    wunlock();
    return r;
}

/* heaptrail detach, after ht__trace_finish, once no thread can be inside
 * the agent (agent.c): the buffers go back. Every entry point finds the
 * writer uninitialised from then on; the path stays (the detach's answer
 * names it). */
void ht__writer_release(void)
{
    if (!W.initialised || !W.finished)
        return;
    W.initialised = 0;
    ht__unmap(W.raw, RAW_CAP);
    ht__unmap(W.out, W.out_cap);
    ht__unmap(W.mods, (size_t)W.max_mods * sizeof(module_t));
    ht__unmap(W.paths, W.paths_cap);
    if (W.ws)
        ht__unmap(W.ws, W.ws_len);
    W.raw = W.out = NULL;
    W.mods = NULL;
    W.paths = NULL;
    W.ws = NULL;
    W.cctx = NULL;
}

/* ---- fork -------------------------------------------------------------- */

void ht__writer_fork_prepare(void) { wlock(HT_WCTX_NORMAL); }
void ht__writer_fork_parent(void) { wunlock(); }

void ht__writer_fork_child(void)
{
    /* a new process, a new trace (created at its first snapshot): every
     * node and module goes out again */
    forget_file();
    drop_held();                /* the parent's trace */
    W.owner = 0;
    W.lock.v = 0;
}
