/* t_reach.c -- reachability (REACH, trace.h's lost_* and reach) in the
 * analyzer, against known truths:
 *
 * - the report model on symfix's fixture with lost blocks set in memory:
 *   totals, rows ranked by unreachable bytes, rows that merge sites (by
 *   function, by module) summing them, and reports that must not change
 *   (in-use, folded, no REACH, reachability not computed);
 * - `heaptrail run`'s end-of-run summary (ht__run_summary) on binary
 *   traces this file writes with a miniature writer (stored blocks, the
 *   records of docs/format.md), read back by the real reader;
 * - REACH records that contradict their snapshot (more lost than live, a
 *   site position past the list, entries when not computed): damage at
 *   an exact offset, the snapshot dropped;
 * - leak checks made while the program runs (a request snapshot with
 *   REACH, `heaptrail snapshot --leaks`): the in-use report of that
 *   snapshot with its reachability, the exit snapshot after it unchanged,
 *   the "now" summary, and the client against a fake agent on the
 *   control socket (the request it sends, ok and error replies);
 * - possibly lost blocks (POSSIBLE records, plost_*, has_possible): read
 *   per site; records that contradict their snapshot (more than live less
 *   lost and indirectly lost, out of order, no computed REACH before them,
 *   a REACH after them) damage at the offset of their block; reports,
 *   JSON and diffs that say them, and say nothing of them when a snapshot
 *   (of a diff: either) did not count them;
 * - custom allocator blocks judged by the check (REACH's flags): read,
 *   the run summary's custom clause and stacks, the "now" summary, the
 *   --error-exitcode verdict, the report's sums; not judged without the
 *   flag, whatever the entries. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "analyze/cmd.h"
#include "analyze/commands.h"
#include "analyze/model.h"
#include "analyze/fixture.h"
#include "format/wire.h"
#include "check.h"

#define ADIR "build/tests/analyze"
#define SYMFIX ADIR "/symfix.fix"

static int streq(const char *a, const char *b)
{
    if (!a || !b || strcmp(a, b)) {
        fprintf(stderr, "    got:\n%s\n    want:\n%s\n", a ? a : "(null)", b ? b : "(null)");
        return 0;
    }
    return 1;
}

/*------------------------------------------------------------ the model */

/* symfix's exit snapshot (the last) lists stacks 1..9 in order; stack 4
 * was freed. Lost blocks per stack (case.lib's reach_fixture has the same
 * truth): LOST_BLOCKS LOST_BYTES ILOST_BLOCKS ILOST_BYTES. */
static const uint64_t symfix_lost[9][4] = {
    { 3, 300, 0, 0 },           /* 1 leak_small: 3 blocks, 300 bytes */
    { 0, 0, 0, 0 },             /* 2 leak_big: 4096, still reachable */
    { 0, 0, 1, 64 },            /* 3 inlined_helper: 64 */
    { 0, 0, 0, 0 },             /* 4 freed */
    { 2, 2000, 1, 1000 },       /* 5 grow_steady: 5 blocks, 5000 */
    { 0, 0, 0, 0 },             /* 6 churn: 500, still reachable */
    { 1, 700, 1, 700 },         /* 7 plateau: 2 blocks, 1400 */
    { 1, 200, 0, 0 },           /* 8 plugin_a_alloc: 200 */
    { 0, 0, 1, 300 },           /* 9 plugin_b_alloc: 300 */
};

static void set_reach(ht_trace_t *t, int status, uint32_t threads)
{
    ht_tsnapshot_t *s = &t->snaps[t->nsnaps - 1];
    s->reach = (uint8_t)status;
    s->reach_threads = threads;
    for (size_t i = 0; i < s->nsites && i < 9; i++) {
        ht_tsite_t *x = &s->sites[i];
        int on = status == HT_REACH_DONE;
        x->lost_blocks = on ? symfix_lost[i][0] : 0;
        x->lost_bytes = on ? symfix_lost[i][1] : 0;
        x->ilost_blocks = on ? symfix_lost[i][2] : 0;
        x->ilost_bytes = on ? symfix_lost[i][3] : 0;
    }
}

/* A report of the last snapshot with these options. */
static void build(const ht_trace_t *t, ht_opts_t *o, int mode, ht_session_t *s, ht_report_t *r)
{
    char err[256];
    ht__session_init(s, o, NULL, stderr);
    ht__session_add(s, SYMFIX, t);
    CHECK_EQ(ht__report_build(s, -1, mode, r, err, sizeof err), 0);
}

static void done(ht_session_t *s, ht_report_t *r)
{
    ht__report_free(r);
    ht__session_free(s);
}

static void test_model(void)
{
    ht_trace_t t;
    char err[256];
    if (fixture_load(SYMFIX, &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        CHECK(0);
        return;
    }
    CHECK_EQ(t.snaps[t.nsnaps - 1].nsites, 9);
    set_reach(&t, HT_REACH_DONE, 0);
    ht_session_t s;
    ht_report_t r;

    /* by stack: totals, and the order by unreachable bytes, then bytes,
     * then blocks (leak_small's 3 blocks before plugin_b's 1) */
    ht_opts_t o = { .top = 0 };
    build(&t, &o, HT_RMODE_AUTO, &s, &r);
    CHECK_EQ(r.type, HT_REPORT_LEAKS);
    CHECK_EQ(r.reach, HT_REACH_DONE);
    CHECK_EQ(r.total_lost.lost_bytes, 3200);
    CHECK_EQ(r.total_lost.lost_blocks, 7);
    CHECK_EQ(r.total_lost.ilost_bytes, 2064);
    CHECK_EQ(r.total_lost.ilost_blocks, 4);
    CHECK_EQ(r.lost_sites, 4);
    CHECK_EQ(r.heap_bytes, 11860);
    CHECK_EQ(r.heap_blocks, 15);
    static const int64_t order[8][3] = {    /* bytes, blocks, lost + ilost bytes */
        { 5000, 5, 3000 }, { 1400, 2, 1400 }, { 300, 3, 300 }, { 300, 1, 300 },
        { 200, 1, 200 }, { 64, 1, 64 }, { 4096, 1, 0 }, { 500, 1, 0 },
    };
    CHECK_EQ(r.nshown, 8);
    for (size_t i = 0; i < 8 && i < r.nshown; i++) {
        const ht_row_t *row = &r.rows[i];
        CHECK(row->lost != NULL);
        if (!row->lost)
            continue;
        CHECK_EQ(row->bytes, order[i][0]);
        CHECK_EQ(row->blocks, order[i][1]);
        CHECK_EQ(row->lost->lost_bytes + row->lost->ilost_bytes, order[i][2]);
    }
    if (r.nshown && r.rows[0].lost) {
        CHECK_EQ(r.rows[0].lost->lost_bytes, 2000);
        CHECK_EQ(r.rows[0].lost->lost_blocks, 2);
        CHECK_EQ(r.rows[0].lost->ilost_bytes, 1000);
        CHECK_EQ(r.rows[0].lost->ilost_blocks, 1);
    }
    char line[512];
    CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                "unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks indirectly"
                "; still reachable: 6596 bytes in 4 blocks"));
    done(&s, &r);

    /* --top 2 keeps the two with the most unreachable bytes (the
     * sites-are-rows path picks them with a heap) */
    o.top = 2;
    build(&t, &o, HT_RMODE_AUTO, &s, &r);
    CHECK_EQ(r.nshown, 2);
    if (r.nshown == 2) {
        CHECK_EQ(r.rows[0].bytes, 5000);
        CHECK_EQ(r.rows[1].bytes, 1400);
    }
    CHECK_EQ(r.total_lost.lost_bytes, 3200);    /* totals still over every row */
    done(&s, &r);
    o.top = 0;

    /* by function, the plugins well-tested: both plugin sites merge into
     * use_plugin and their lost blocks add up */
    char *wt[] = { "libplugin*" };
    ht_opts_t of = { .top = 0, .by = HT_BY_FUNCTION, .well_tested = wt, .nwell_tested = 1 };
    build(&t, &of, HT_RMODE_AUTO, &s, &r);
    int found = 0;
    for (size_t i = 0; i < r.nshown; i++) {
        const ht_row_t *row = &r.rows[i];
        if (!row->label || strcmp(row->label, "use_plugin"))
            continue;
        found = 1;
        CHECK_EQ(i, 2);         /* after grow_steady (3000) and plateau (1400) */
        CHECK_EQ(row->nstacks, 2);
        CHECK_EQ(row->bytes, 500);
        CHECK(row->lost != NULL);
        if (row->lost) {
            CHECK_EQ(row->lost->lost_bytes, 200);
            CHECK_EQ(row->lost->lost_blocks, 1);
            CHECK_EQ(row->lost->ilost_bytes, 300);
            CHECK_EQ(row->lost->ilost_blocks, 1);
        }
    }
    CHECK(found);
    CHECK_EQ(r.total_lost.ilost_bytes, 2064);
    done(&s, &r);

    /* by module: symfix's six sites */
    ht_opts_t om = { .top = 0, .by = HT_BY_MODULE };
    build(&t, &om, HT_RMODE_AUTO, &s, &r);
    CHECK(r.nshown >= 1);
    if (r.nshown >= 1 && r.rows[0].lost) {
        CHECK_EQ(r.rows[0].nstacks, 6);
        CHECK_EQ(r.rows[0].lost->lost_bytes, 3000);
        CHECK_EQ(r.rows[0].lost->lost_blocks, 6);
        CHECK_EQ(r.rows[0].lost->ilost_bytes, 1764);
        CHECK_EQ(r.rows[0].lost->ilost_blocks, 3);
    }
    done(&s, &r);

    /* what must not change: in-use and allocated reports, folded and
     * pprof exports (no place for it: order and rows by live bytes) */
    int modes[2] = { HT_RMODE_IN_USE, HT_RMODE_ALLOCATED };
    for (int m = 0; m < 2; m++) {
        build(&t, &o, modes[m], &s, &r);
        CHECK_EQ(r.reach, HT_REACH_NONE);
        CHECK(r.losts == NULL);
        CHECK(r.nshown > 0 && r.rows[0].lost == NULL);
        CHECK(ht__reach_summary(&r, line, sizeof line) == NULL);
        done(&s, &r);
    }
    int fmts[2] = { HT_FMT_FOLDED, HT_FMT_PPROF };
    for (int k = 0; k < 2; k++) {
        ht_opts_t ox = { .top = 0, .format = fmts[k] };
        build(&t, &ox, HT_RMODE_AUTO, &s, &r);
        CHECK(r.losts == NULL);
        CHECK(r.nshown == 8 && r.rows[0].bytes == 5000 && r.rows[1].bytes == 4096);
        done(&s, &r);
    }

    /* not computed: the reason, no lost rows, the order of live bytes */
    set_reach(&t, HT_REACH_THREADS, 3);
    build(&t, &o, HT_RMODE_AUTO, &s, &r);
    CHECK_EQ(r.reach, HT_REACH_THREADS);
    CHECK(r.losts == NULL);
    CHECK(r.nshown == 8 && r.rows[1].bytes == 4096);
    CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                "reachability not computed: 3 other threads were running at exit and could not be paused"));
    done(&s, &r);
    const char *why[] = {
        [HT_REACH_UNREADABLE] = "the process could not read its own memory",
        [HT_REACH_NOMEM] = "there was not enough memory for the scan",
        [HT_REACH_INCOMPLETE] = "the tracker had lost track of some blocks or of its own mappings",
        [HT_REACH_INSIDE] = "the program exited from inside an allocator call (a signal handler)",
    };
    for (int st = HT_REACH_UNREADABLE; st <= HT_REACH_INSIDE; st++) {
        ht_tsnapshot_t sn = { .reach = (uint8_t)st };
        CHECK(streq(ht__reach_why(&sn, line, sizeof line), why[st]));
    }
    ht_tsnapshot_t one = { .reach = HT_REACH_THREADS, .reach_threads = 1 };
    CHECK(streq(ht__reach_why(&one, line, sizeof line), "1 other thread was running at exit and could not be paused"));
    /* sleepers that woke are not threads that could not be paused */
    ht_tsnapshot_t woke = { .reach = HT_REACH_WOKE, .reach_threads = 1 };
    CHECK(streq(ht__reach_why(&woke, line, sizeof line),
                "1 other thread, asleep in a system call at exit, woke during every try of the scan"));
    woke.reach_threads = 4;
    woke.reason = HT_SNAP_REQUEST;
    CHECK(streq(ht__reach_why(&woke, line, sizeof line),
                "4 other threads, asleep in system calls, woke during every try of the scan"));
    CHECK(streq(ht__reach_name(HT_REACH_WOKE), "sleepers_woke"));
    CHECK(streq(ht__reach_name(HT_REACH_YOUNG_CHILD), "young_fork_child"));

    /* no REACH: nothing new */
    set_reach(&t, HT_REACH_NONE, 0);
    build(&t, &o, HT_RMODE_AUTO, &s, &r);
    CHECK_EQ(r.reach, HT_REACH_NONE);
    CHECK(r.losts == NULL);
    CHECK(ht__reach_summary(&r, line, sizeof line) == NULL);
    done(&s, &r);
    fixture_free(&t);
}

/*--------------------------------------------- the run summary, binary traces */

typedef struct wbuf_s {
    uint8_t *p;
    size_t n, cap;
} wbuf_t;

static void w_bytes(wbuf_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void w_var(wbuf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    w_bytes(b, tmp, ht_put_varint(tmp, v));
}

static void w_str(wbuf_t *b, const char *s)
{
    w_var(b, strlen(s));
    w_bytes(b, s, strlen(s));
}

/* Appends a record (type, length, body) to a block's payload; empties body. */
static void w_rec(wbuf_t *payload, int type, wbuf_t *body)
{
    uint8_t t = (uint8_t)type;
    w_bytes(payload, &t, 1);
    w_var(payload, body->n);
    w_bytes(payload, body->p, body->n);
    body->n = 0;
}

/* Writes a file: header, then each payload as a stored block. */
static uint32_t g_version = 1;  /* most traces here have version 1's records */

static int w_file_blocks(const char *path, const wbuf_t *payloads, int n)
{
    uint8_t fh[HT_FILE_HEADER_LEN] = { 0 }, bh[HT_BLOCK_HEADER_LEN];
    memcpy(fh, HT_FILE_MAGIC, 8);
    ht_wr_u32(fh + 8, g_version);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(fh, 1, sizeof fh, f);
    for (int i = 0; i < n; i++) {
        const wbuf_t *payload = &payloads[i];
        ht_wr_u32(bh, HT_BLOCK_MAGIC);
        ht_wr_u32(bh + 4, HT_CODEC_STORED);
        ht_wr_u32(bh + 8, (uint32_t)payload->n);
        ht_wr_u32(bh + 12, (uint32_t)payload->n);
        ht_wr_u32(bh + 16, ht_checksum(payload->p, payload->n));
        ht_wr_u32(bh + 20, ht_checksum(bh, 20));
        fwrite(bh, 1, sizeof bh, f);
        fwrite(payload->p, 1, payload->n, f);
    }
    return fclose(f);
}

/* Writes a file: header, then the payload as one stored block. */
static int w_file(const char *path, const wbuf_t *payload)
{
    return w_file_blocks(path, payload, 1);
}

/* The sites of the summary's traces: stack node, kind, live blocks and
 * bytes, then lost blocks/bytes and indirectly lost blocks/bytes. Nodes:
 * 1 = 0x401000; 2 = 0x402000 <- 1; 3 = 0x403000 <- 1; 4 = 0x404000. A
 * site with nothing live allocated 4 blocks of 100 bytes once. */
typedef uint64_t site_t[8];
static const site_t sum_sites[6] = {
    { 2, HT_KIND_HEAP, 2, 400000, 2, 400000, 0, 0 },      /* all definitely lost */
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },         /* biggest, still reachable */
    { 4, HT_KIND_HEAP, 3, 96, 0, 0, 3, 96 },              /* indirectly lost */
    { 1, HT_KIND_HEAP, 5, 5000, 1, 1000, 2, 2000 },       /* both, 2 blocks reachable */
    { 2, HT_KIND_MMAP, 1, 8192, 0, 0, 0, 0 },             /* never checked */
    { 3, HT_KIND_HEAP, 0, 0, 0, 0, 0, 0 },                /* freed: not listed */
};

/* Damage write_snapshot can put into its REACH record. */
enum { BAD_NONE = 0, BAD_LOST_OVER_LIVE, BAD_POS, BAD_ENTRY_NOT_DONE, BAD_ILOST_WRAP };
static int g_bad;

/* A TEMP record write_snapshot can add after its SITES: none, a valid one
 * (3 of the freed site's 4 blocks, 300 of its 400 bytes, and 1 of the
 * indirectly lost site's 3 blocks), or damage: more temporary blocks than
 * the site ever allocated, positions out of order. */
enum { TEMP_NONE = 0, TEMP_OK, TEMP_OVER_TOTAL, TEMP_UNORDERED };
static int g_temp;

/* A POSSIBLE record write_snapshot can add: none; after its REACH record
 * (as the agent writes it, also when there is no REACH record: damage);
 * before the REACH record; or after it with a second REACH after that.
 * Its entries, as written: (position, plost_blocks, plost_bytes); the
 * count written is g_poss_count when not 0 (a count the body cannot
 * hold), else g_poss_n. */
enum { POSS_NONE = 0, POSS_AFTER, POSS_BEFORE_REACH, POSS_REACH_AFTER };
static int g_poss, g_poss_n, g_poss_count;
static uint64_t g_poss_e[4][3];

/* REACH's trailing flags write_snapshot writes after its entries
 * (wire.h's HT_REACH_F_*), or none when G_FLAGS_ABSENT (agents before
 * the fifty-second session). */
#define G_FLAGS_ABSENT UINT64_MAX
static uint64_t g_reach_flags = G_FLAGS_ABSENT;

/* Sets the next POSSIBLE record: where it goes and its n entries. */
static void set_possible(int where, int n, const uint64_t (*e)[3])
{
    g_poss = where;
    g_poss_n = n;
    g_poss_count = 0;
    for (int i = 0; i < n && i < 4; i++)
        memcpy(g_poss_e[i], e[i], sizeof g_poss_e[i]);
}

/* The PROCESS and NODES records every trace here starts with. */
static void write_process(wbuf_t *p, wbuf_t *b)
{
    w_var(b, 4242), w_var(b, 1), w_var(b, 1700000000000000000ull);
    w_str(b, "/bin/leaky");
    w_var(b, 6), w_bytes(b, "leaky\0", 6);     /* cmdline: NUL-separated */
    w_rec(p, HT_REC_PROCESS, b);
    static const uint64_t nodes[4][2] = { { 1, 0x401000 }, { 1, 0x402000 }, { 2, 0x403000 }, { 4, 0x404000 } };
    w_var(b, 1), w_var(b, 4);     /* first id, count; then (id - parent, addr) */
    for (int i = 0; i < 4; i++)
        w_var(b, nodes[i][0]), w_var(b, nodes[i][1]);
    w_rec(p, HT_REC_NODES, b);
}

/* The POSSIBLE record set_possible described, for snapshot `seq`. */
static void write_possible(wbuf_t *p, wbuf_t *b, uint64_t seq)
{
    w_var(b, seq), w_var(b, (uint64_t)(g_poss_count ? g_poss_count : g_poss_n));
    for (int i = 0; i < g_poss_n; i++)
        w_var(b, g_poss_e[i][0]), w_var(b, g_poss_e[i][1]), w_var(b, g_poss_e[i][2]);
    w_rec(p, HT_REC_POSSIBLE, b);
}

/* A snapshot of sites[0..n): the writer's number `seq`, `reason`; a REACH
 * record with `status` unless it is HT_REACH_NONE (lost entries only when
 * done, or with BAD_ENTRY_NOT_DONE). */
static void write_snapshot(wbuf_t *p, wbuf_t *b, uint64_t seq, int reason, const site_t *sites, int n,
                           int status, uint32_t threads)
{
    uint64_t lb = 0, lB = 0, tb = 0, tB = 0;
    for (int i = 0; i < n; i++) {
        if (sites[i][1] == HT_KIND_CUSTOM)
            continue;   /* inside heap blocks or mappings: not in the totals */
        lb += sites[i][2], lB += sites[i][3];
        tb += sites[i][2] ? sites[i][2] : 4, tB += sites[i][2] ? sites[i][3] : 400;
    }
    uint64_t begin[10] = { seq, (uint64_t)reason, 5000000 * (seq + 1), lb, lB, tb, tB, tb - lb, lB, lb };
    for (int i = 0; i < 10; i++)
        w_var(b, begin[i]);
    w_rec(p, HT_REC_SNAP_BEGIN, b);
    w_var(b, seq), w_var(b, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        const uint64_t *x = sites[i];
        uint64_t v[7] = { x[0], x[1], x[2], x[3], x[2] ? x[2] : 4, x[2] ? x[3] : 400, x[3] };
        for (int k = 0; k < 7; k++)
            w_var(b, v[k]);
    }
    w_rec(p, HT_REC_SITES, b);
    if (g_temp != TEMP_NONE) {
        /* (seq, count, then position, blocks, bytes) */
        uint64_t e[2][3] = { { 2, 1, 32 }, { 5, g_temp == TEMP_OVER_TOTAL ? 5 : 3, 300 } };
        w_var(b, seq), w_var(b, 2);
        for (int i = 0; i < 2; i++) {
            int k = g_temp == TEMP_UNORDERED ? 1 - i : i;
            w_var(b, e[k][0]), w_var(b, e[k][1]), w_var(b, e[k][2]);
        }
        w_rec(p, HT_REC_TEMP, b);
    }
    if (g_poss == POSS_BEFORE_REACH)
        write_possible(p, b, seq);
    if (status != HT_REACH_NONE) {
        int k = 0, entries = status == HT_REACH_DONE || g_bad == BAD_ENTRY_NOT_DONE;
        for (int i = 0; entries && i < n; i++)
            k += sites[i][4] || sites[i][6];
        w_var(b, seq), w_var(b, (uint64_t)status), w_var(b, threads), w_var(b, 1 << 20), w_var(b, 2000000);
        w_var(b, (uint64_t)k);
        for (int i = 0; entries && i < n; i++)
            if (sites[i][4] || sites[i][6]) {
                w_var(b, g_bad == BAD_POS ? (uint64_t)n : (uint64_t)i);   /* n sites listed: 0..n-1 */
                for (int f = 4; f < 8; f++)
                    w_var(b, g_bad == BAD_ILOST_WRAP && f == 6 && sites[i][4]
                                 ? UINT64_MAX   /* + lost wraps to less than live */
                                 : sites[i][f] + (g_bad == BAD_LOST_OVER_LIVE && f == 4 ? sites[i][2] : 0));
            }
        if (g_reach_flags != G_FLAGS_ABSENT)
            w_var(b, g_reach_flags);
        w_rec(p, HT_REC_REACH, b);
    }
    if (g_poss == POSS_AFTER || g_poss == POSS_REACH_AFTER)
        write_possible(p, b, seq);
    if (g_poss == POSS_REACH_AFTER) {
        /* a computed REACH naming no site, after the POSSIBLE record */
        w_var(b, seq), w_var(b, HT_REACH_DONE), w_var(b, 0), w_var(b, 1 << 20), w_var(b, 2000000);
        w_var(b, 0);
        w_rec(p, HT_REC_REACH, b);
    }
    w_var(b, seq), w_var(b, (uint64_t)n);
    w_rec(p, HT_REC_SNAP_END, b);
}

/* The END record of a trace whose program ended, and the file. */
static int write_end(const char *path, wbuf_t *p, wbuf_t *b, int ended)
{
    if (ended) {
        w_var(b, 60000000), w_var(b, 0);
        w_rec(p, HT_REC_END, b);
    }
    int rc = w_file(path, p);
    free(p->p);
    free(b->p);
    return rc;
}

/* A trace with one exit snapshot of sum_sites; a REACH record with
 * `status` unless it is HT_REACH_NONE. */
static int write_summary_trace(const char *path, int status, uint32_t threads)
{
    wbuf_t p = { 0 }, b = { 0 };
    write_process(&p, &b);
    write_snapshot(&p, &b, 0, HT_SNAP_EXIT, sum_sites, 6, status, threads);
    return write_end(path, &p, &b, 1);
}

/* The summary of a trace written with `status`, as a string (malloc'd). */
static char *summary_of(const char *path, int status, uint32_t threads)
{
    CHECK_EQ(write_summary_trace(path, status, threads), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ht__run_summary(path, HT_SUMMARY_AT_EXIT, -1, NULL, NULL, f);
    fclose(f);
    return text;
}

#define LINE1 "heaptrail: 1,405,096 bytes leaked in 60 blocks from 4 allocation sites (unique stacks); " \
              "anonymous mappings never unmapped: 8,192 bytes in 1 region from 1 site; trace: " \
              ADIR "/reach_summary.ht\n"

static void test_summary(void)
{
    const char *path = ADIR "/reach_summary.ht";

    /* the reader returns what the writer above wrote */
    CHECK_EQ(write_summary_trace(path, HT_REACH_DONE, 0), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    if (t.nsnaps == 1) {
        CHECK_EQ(t.snaps[0].reach, HT_REACH_DONE);
        CHECK_EQ(t.snaps[0].reach_roots_bytes, 1 << 20);
        CHECK_EQ(t.snaps[0].sites[3].ilost_bytes, 2000);
    } else {
        CHECK(0);
    }
    ht_trace_free(&t);

    /* computed: the line after the totals, stacks by unreachable bytes,
     * each header saying what of it is lost; mmap as before */
    char *s = summary_of(path, HT_REACH_DONE, 0);
    CHECK(streq(s,
        LINE1
        "heaptrail: unreachable at exit: 401,000 bytes in 3 blocks from 2 sites (definitely lost; plus "
        "2,096 bytes in 5 blocks reachable only through them); still reachable: 1,002,000 bytes in 52 "
        "blocks\n"
        "  400,000 bytes in 2 blocks (heap; definitely lost: 400,000 bytes in 2 blocks):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  5,000 bytes in 5 blocks (heap; definitely lost: 1,000 bytes in 1 block, indirectly lost: "
        "2,000 bytes in 2 blocks):\n"
        "      0x401000\n"
        "  96 bytes in 3 blocks (heap; indirectly lost: 96 bytes in 3 blocks):\n"
        "      0x404000\n"
        "  1,000,000 bytes in 50 blocks (heap; still reachable):\n"
        "      0x403000\n"
        "      0x401000\n"
        "  8,192 bytes in 1 region (mmap):\n"
        "      0x402000\n"
        "      0x401000\n"));
    free(s);

    /* not computed: the reason; stacks as without REACH */
    const char *before =
        "  1,000,000 bytes in 50 blocks (heap):\n"
        "      0x403000\n"
        "      0x401000\n"
        "  400,000 bytes in 2 blocks (heap):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  8,192 bytes in 1 region (mmap):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  5,000 bytes in 5 blocks (heap):\n"
        "      0x401000\n"
        "  96 bytes in 3 blocks (heap):\n"
        "      0x404000\n";
    char want[4096];
    s = summary_of(path, HT_REACH_THREADS, 3);
    snprintf(want, sizeof want, "%s%s%s", LINE1,
             "heaptrail: reachability not computed: 3 other threads were running at exit and could not be paused\n", before);
    CHECK(streq(s, want));
    free(s);
    s = summary_of(path, HT_REACH_WOKE, 2);
    snprintf(want, sizeof want, "%s%s%s", LINE1,
             "heaptrail: reachability not computed: 2 other threads, asleep in system calls at exit, "
             "woke during every try of the scan\n", before);
    CHECK(streq(s, want));
    free(s);
    s = summary_of(path, HT_REACH_UNREADABLE, 0);
    snprintf(want, sizeof want, "%s%s%s", LINE1,
             "heaptrail: reachability not computed: the process could not read its own memory\n", before);
    CHECK(streq(s, want));
    free(s);

    /* no REACH record (older agents, or not an exit): exactly as before */
    s = summary_of(path, HT_REACH_NONE, 0);
    snprintf(want, sizeof want, "%s%s", LINE1, before);
    CHECK(streq(s, want));
    free(s);
    remove(path);
}

/* A REACH record that contradicts its snapshot is damage: the reader
 * names the file and the offset of its block, reports the trace cut there
 * and drops the snapshot it belonged to. */
static void test_bad_reach(void)
{
    const char *path = ADIR "/reach_bad.ht";
    static const struct { int bad, status; } cases[] = {
        { BAD_LOST_OVER_LIVE, HT_REACH_DONE },  /* more lost blocks than live ones */
        { BAD_POS, HT_REACH_DONE },             /* a site position past the list */
        { BAD_ENTRY_NOT_DONE, HT_REACH_THREADS }, /* entries without a computed status */
        { BAD_ILOST_WRAP, HT_REACH_DONE },      /* indirectly lost past live, the sum wrapped */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_bad = cases[i].bad;
        CHECK_EQ(write_summary_trace(path, cases[i].status, 2), 0);
        ht_trace_t t;
        char err[256];
        CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
        CHECK_EQ(t.truncated, 1);
        CHECK_EQ(t.truncated_at, 16);           /* the block after the file header */
        CHECK_EQ(t.nsnaps, 0);                  /* the snapshot never completed */
        CHECK(streq(err, ADIR "/reach_bad.ht: offset 16: malformed record of type 12"));
        ht_trace_free(&t);
    }
    g_bad = BAD_NONE;
    /* the same trace undamaged reads */
    CHECK_EQ(write_summary_trace(path, HT_REACH_THREADS, 2), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 1);
    CHECK_EQ(t.snaps[0].reach, HT_REACH_THREADS);
    CHECK_EQ(t.snaps[0].reach_threads, 2);
    ht_trace_free(&t);
    /* the newest status reads; one past it is damage */
    CHECK_EQ(write_summary_trace(path, HT_REACH_YOUNG_CHILD, 3), 0);
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 1);
    CHECK_EQ(t.snaps[0].reach, HT_REACH_YOUNG_CHILD);
    CHECK_EQ(t.snaps[0].reach_threads, 3);
    ht_trace_free(&t);
    CHECK_EQ(write_summary_trace(path, HT_REACH_YOUNG_CHILD + 1, 3), 0);
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    CHECK_EQ(t.truncated, 1);
    CHECK_EQ(t.nsnaps, 0);
    ht_trace_free(&t);
}

/* Temporary allocations (TEMP records) read per site; a TEMP record that
 * contradicts its snapshot is damage, named by its offset, as REACH's. */
static void test_temp_record(void)
{
    const char *path = ADIR "/temp.ht";
    ht_trace_t t;
    char err[256];
    g_temp = TEMP_OK;
    CHECK_EQ(write_summary_trace(path, HT_REACH_NONE, 0), 0);
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    CHECK_EQ(t.truncated, 0);
    CHECK_EQ(t.nsnaps, 1);
    if (t.nsnaps == 1) {
        const ht_tsnapshot_t *sn = &t.snaps[0];
        CHECK_EQ(sn->has_temp, 1);
        CHECK_EQ(sn->nsites, 6);
        for (size_t i = 0; i < sn->nsites; i++) {
            CHECK_EQ(sn->sites[i].temp_blocks, i == 5 ? 3u : i == 2 ? 1u : 0u);
            CHECK_EQ(sn->sites[i].temp_bytes, i == 5 ? 300u : i == 2 ? 32u : 0u);
        }
    }
    ht_trace_free(&t);
    static const int bad[] = { TEMP_OVER_TOTAL, TEMP_UNORDERED };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g_temp = bad[i];
        CHECK_EQ(write_summary_trace(path, HT_REACH_NONE, 0), 0);
        CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
        CHECK_EQ(t.truncated, 1);
        CHECK_EQ(t.truncated_at, 16);
        CHECK_EQ(t.nsnaps, 0);
        CHECK(streq(err, ADIR "/temp.ht: offset 16: malformed record of type 14"));
        ht_trace_free(&t);
    }
    /* without a TEMP record: not counted (an older agent), not zeros */
    g_temp = TEMP_NONE;
    CHECK_EQ(write_summary_trace(path, HT_REACH_NONE, 0), 0);
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 1);
    if (t.nsnaps == 1)
        CHECK_EQ(t.snaps[0].has_temp, 0);
    ht_trace_free(&t);
    remove(path);
}

/*------------------------------------- leak checks while the program runs */

/* The sites of a leak check (a request snapshot with REACH) made before
 * sum_sites' exit: 2 blocks definitely lost at one site, the rest still
 * reachable or never checked. check_clean: the same, nothing lost. */
static const site_t check_sites[4] = {
    { 2, HT_KIND_HEAP, 2, 300, 2, 300, 0, 0 },            /* both blocks definitely lost */
    { 3, HT_KIND_HEAP, 10, 10000, 0, 0, 0, 0 },           /* still reachable */
    { 1, HT_KIND_MMAP, 1, 4096, 0, 0, 0, 0 },             /* never checked */
    { 4, HT_KIND_HEAP, 1, 64, 0, 0, 0, 0 },               /* still reachable */
};
static const site_t check_clean[4] = {
    { 2, HT_KIND_HEAP, 2, 300, 0, 0, 0, 0 },
    { 3, HT_KIND_HEAP, 10, 10000, 0, 0, 0, 0 },
    { 1, HT_KIND_MMAP, 1, 4096, 0, 0, 0, 0 },
    { 4, HT_KIND_HEAP, 1, 64, 0, 0, 0, 0 },
};

#define CHECK_TRACE ADIR "/reach_check.ht"

/* A trace with a leak check of `sites` (the writer's number `seq`, REACH
 * `status`), then, when `ended`, sum_sites' exit snapshot (number seq + 1,
 * reachability computed) and the END record; else it stops there, as the
 * trace of a program still running does. */
static int write_check_trace(const site_t *sites, uint64_t seq, int status, uint32_t threads, int ended)
{
    wbuf_t p = { 0 }, b = { 0 };
    write_process(&p, &b);
    write_snapshot(&p, &b, seq, HT_SNAP_REQUEST, sites, 4, status, threads);
    if (ended)
        write_snapshot(&p, &b, seq + 1, HT_SNAP_EXIT, sum_sites, 6, HT_REACH_DONE, 0);
    return write_end(CHECK_TRACE, &p, &b, ended);
}

/* A report rendered as text or JSON (malloc'd). */
static char *render(const ht_report_t *r, int format)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK_EQ(ht__render(r, format, f), 0);
    fclose(f);
    return text;
}

/* The text after the first line (the header names the file, the
 * snapshot and its time). */
static const char *after_line1(const char *s)
{
    const char *nl = s ? strchr(s, '\n') : NULL;
    return nl ? nl + 1 : "";
}

static void test_check_report(void)
{
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_DONE, 0, 1), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(CHECK_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 2);
    if (t.nsnaps != 2) {
        ht_trace_free(&t);
        return;
    }
    CHECK_EQ(t.snaps[0].reason, HT_SNAP_REQUEST);
    CHECK_EQ(t.snaps[0].reach, HT_REACH_DONE);
    CHECK_EQ(t.snaps[0].file_seq, 0);
    CHECK_EQ(t.snaps[1].file_seq, 1);

    /* snapshot 0: an in-use report (not "leaked": the program ran on)
     * with the check's figures, ranked by unreachable bytes */
    ht_opts_t o = { .top = 0 };
    ht_session_t s;
    ht_report_t r;
    int modes[2] = { HT_RMODE_AUTO, HT_RMODE_IN_USE };
    for (int m = 0; m < 2; m++) {
        ht__session_init(&s, &o, NULL, stderr);
        ht__session_add(&s, CHECK_TRACE, &t);
        CHECK_EQ(ht__report_build(&s, 0, modes[m], &r, err, sizeof err), 0);
        CHECK_EQ(r.type, HT_REPORT_INUSE);
        CHECK_EQ(r.reach, HT_REACH_DONE);
        CHECK_EQ(r.total_bytes, 14460);
        CHECK_EQ(r.total_blocks, 14);
        CHECK_EQ(r.total_lost.lost_bytes, 300);
        CHECK_EQ(r.total_lost.lost_blocks, 2);
        CHECK_EQ(r.total_lost.ilost_bytes, 0);
        CHECK_EQ(r.total_lost.ilost_blocks, 0);
        CHECK_EQ(r.lost_sites, 1);
        CHECK_EQ(r.heap_bytes, 10364);
        CHECK_EQ(r.heap_blocks, 13);
        static const int64_t order[4][3] = {    /* bytes, blocks, lost bytes */
            { 300, 2, 300 }, { 10000, 10, 0 }, { 4096, 1, 0 }, { 64, 1, 0 },
        };
        CHECK_EQ(r.nshown, 4);
        for (size_t i = 0; i < 4 && i < r.nshown; i++) {
            const ht_row_t *row = &r.rows[i];
            CHECK(row->lost != NULL);
            CHECK_EQ(row->bytes, order[i][0]);
            CHECK_EQ(row->blocks, order[i][1]);
            if (row->lost) {
                CHECK_EQ(row->lost->lost_bytes, order[i][2]);
                CHECK_EQ(row->lost->lost_blocks, i == 0 ? 2 : 0);
                CHECK_EQ(row->lost->ilost_blocks, 0);
            }
        }
        char *text = render(&r, HT_FMT_TEXT);
        CHECK(streq(text,
            "heaptrail report: " CHECK_TRACE ", snapshot 0 (request) at 0.005 s\n"
            "10364 bytes in use in 13 blocks from 3 allocation sites; anonymous mappings live: 4096 bytes "
            "in 1 region from 1 site\n"
            "unreachable: 300 bytes in 2 blocks (definitely lost); still reachable: 10064 bytes in 11 blocks\n"
            "\n#1  300 bytes in 2 blocks (2.9%), definitely lost: 300 bytes in 2 blocks\n"
            "    0x402000\n    0x401000\n"
            "\n#2  10000 bytes in 10 blocks (96.5%), still reachable\n"
            "    0x403000\n    0x401000\n"
            "\n#3  4096 bytes in 1 block (100.0%)  [mmap]\n"
            "    0x401000\n"
            "\n#4  64 bytes in 1 block (0.6%), still reachable\n"
            "    0x404000\n"));
        free(text);
        text = render(&r, HT_FMT_JSON);
        CHECK(text && strstr(text, "\"mode\":\"in_use\""));
        CHECK(text && strstr(text, ",\"reach\":{\"status\":\"computed\",\"lost_bytes\":300,\"lost_blocks\":2,"
                                   "\"lost_sites\":1,\"indirectly_lost_bytes\":0,\"indirectly_lost_blocks\":0,"
                                   "\"reachable_bytes\":10064,\"reachable_blocks\":11,\"scanned_bytes\":1048576,"
                                   "\"time_ns\":2000000,\"threads_without_registers\":0},"));
        CHECK(text && strstr(text, "\n{\"bytes\":300,\"blocks\":2,\"kind\":\"heap\",\"stacks\":1,\"alloc_bytes\":300,"
                                   "\"alloc_blocks\":2,\"peak_bytes\":300,\"lost_bytes\":300,\"lost_blocks\":2,"
                                   "\"indirectly_lost_bytes\":0,\"indirectly_lost_blocks\":0,\"frames\":"));
        free(text);
        done(&s, &r);
    }
    /* --allocated ranks by what sites allocated: no reachability */
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, CHECK_TRACE, &t);
    CHECK_EQ(ht__report_build(&s, 0, HT_RMODE_ALLOCATED, &r, err, sizeof err), 0);
    CHECK_EQ(r.reach, HT_REACH_NONE);
    CHECK(r.losts == NULL);
    done(&s, &r);

    /* the exit snapshot after it: the leaks report of the same snapshot
     * alone in its trace, byte for byte after the header line */
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, CHECK_TRACE, &t);
    CHECK_EQ(ht__report_build(&s, -1, HT_RMODE_AUTO, &r, err, sizeof err), 0);
    CHECK_EQ(r.type, HT_REPORT_LEAKS);
    CHECK_EQ(r.total_lost.lost_bytes, 401000);
    char *both = render(&r, HT_FMT_TEXT);
    done(&s, &r);
    const char *alone_path = ADIR "/reach_alone.ht";
    CHECK_EQ(write_summary_trace(alone_path, HT_REACH_DONE, 0), 0);
    ht_trace_t a;
    CHECK_EQ(ht_trace_read(alone_path, &a, err, sizeof err), 0);
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, alone_path, &a);
    CHECK_EQ(ht__report_build(&s, -1, HT_RMODE_AUTO, &r, err, sizeof err), 0);
    char *alone = render(&r, HT_FMT_TEXT);
    done(&s, &r);
    CHECK(streq(after_line1(both), after_line1(alone)));
    CHECK(both && strstr(both, "1405096 bytes leaked in 60 blocks"));
    free(both);
    free(alone);
    ht_trace_free(&a);
    remove(alone_path);
    ht_trace_free(&t);

    /* not computed while it ran: the reason without "at exit" */
    ht_tsnapshot_t req = { .reason = HT_SNAP_REQUEST, .reach = HT_REACH_THREADS, .reach_threads = 1 };
    char line[256];
    CHECK(streq(ht__reach_why(&req, line, sizeof line), "1 other thread was running and could not be paused"));
    req.reach_threads = 3;
    CHECK(streq(ht__reach_why(&req, line, sizeof line), "3 other threads were running and could not be paused"));
    req.reach = HT_REACH_INSIDE;
    CHECK(streq(ht__reach_why(&req, line, sizeof line),
                "the snapshot was asked for from inside an allocator call (a signal handler)"));
}

/* The "now" summary of snapshot `seq` of CHECK_TRACE (malloc'd); *rc its
 * return value. */
static char *summary_now(int64_t seq, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *rc = ht__run_summary(CHECK_TRACE, HT_SUMMARY_NOW, seq, NULL, NULL, f);
    fclose(f);
    return text;
}

#define NOW_TOTALS \
    "heaptrail: in use now: 10,364 bytes in 13 blocks from 3 allocation sites; anonymous mappings live: " \
    "4,096 bytes in 1 region from 1 site\n"
#define NOW_LINES \
    NOW_TOTALS \
    "heaptrail: unreachable now: 300 bytes in 2 blocks from 1 site (definitely lost); still reachable: " \
    "10,064 bytes in 11 blocks\n"
#define NOW_STACKS \
    "  300 bytes in 2 blocks (heap; definitely lost: 300 bytes in 2 blocks):\n" \
    "      0x402000\n" \
    "      0x401000\n"

static void test_check_summary(void)
{
    int rc;
    /* a running program's trace (no END): figures, then only the stacks
     * with unreachable blocks; no "cut short" */
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_DONE, 0, 0), 0);
    char *s = summary_now(0, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_LINES NOW_STACKS));
    free(s);
    /* the same snapshot followed by the exit: still that one, not the last */
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_DONE, 0, 1), 0);
    s = summary_now(0, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_LINES NOW_STACKS));
    free(s);
    /* threads asleep in a system call */
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_DONE, 2, 0), 0);
    s = summary_now(0, &rc);
    CHECK(streq(s, NOW_LINES
                "heaptrail: 2 other threads slept in a system call: their stacks were scanned, their "
                "registers not (a pointer held only there would not count)\n" NOW_STACKS));
    free(s);
    /* nothing unreachable: no stacks */
    CHECK_EQ(write_check_trace(check_clean, 0, HT_REACH_DONE, 0, 0), 0);
    s = summary_now(0, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_TOTALS "heaptrail: unreachable now: none; still reachable: 10,364 bytes in 13 blocks\n"));
    free(s);
    /* not computed, and no REACH record at all (an older agent) */
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_THREADS, 1, 0), 0);
    s = summary_now(0, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_TOTALS
                   "heaptrail: reachability not computed: 1 other thread was running and could not be paused\n"));
    free(s);
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_NONE, 0, 0), 0);
    s = summary_now(0, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_TOTALS
                   "heaptrail: reachability not computed: the program's heaptrail agent predates leak "
                   "checks (it wrote a plain snapshot)\n"));
    free(s);
    /* the writer numbered it 2 (snapshots 0 and 1 never reached the
     * file): found by that number, and the report's number said */
    CHECK_EQ(write_check_trace(check_sites, 2, HT_REACH_DONE, 0, 0), 0);
    s = summary_now(2, &rc);
    CHECK_EQ(rc, 0);
    CHECK(streq(s, NOW_LINES "heaptrail: `heaptrail report --snapshot 0` shows it (earlier snapshots were "
                             "not written)\n" NOW_STACKS));
    free(s);
    /* a number the trace does not hold; a trace that is not there */
    s = summary_now(0, &rc);
    CHECK_EQ(rc, -1);
    CHECK(streq(s, "heaptrail: snapshot 0 is not in " CHECK_TRACE "\n"));
    free(s);
    remove(CHECK_TRACE);
    s = summary_now(0, &rc);
    CHECK_EQ(rc, -1);
    CHECK(streq(s, "heaptrail: cannot read the trace: " CHECK_TRACE ": No such file or directory\n"));
    free(s);
}

/* `heaptrail snapshot [--leaks] PID` against a fake agent: this process
 * listens on its own control socket name, a child accepts one connection,
 * passes what the client sent back through a pipe and answers `reply`
 * (NULL: closes without a word). The client's stderr comes back in
 * *out (malloc'd), what it sent in req. Returns its exit status. */
static int fake_agent(const char *reply, int leaks, char *req, size_t reqcap, char **out)
{
    *out = NULL;
    req[0] = 0;
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "heaptrail.%d", (int)getpid());
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int pp[2];
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, al) != 0 || listen(ls, 1) != 0 || pipe(pp) != 0) {
        CHECK(0);
        return -1;
    }
    pid_t c = fork();
    if (c == 0) {
        alarm(20);              /* a client that never came must not hang the test */
        close(pp[0]);
        int fd = accept(ls, NULL, NULL);
        char buf[128];
        size_t got = 0;
        while (fd >= 0 && got < sizeof buf && !memchr(buf, '\n', got)) {
            ssize_t k = read(fd, buf + got, sizeof buf - got);
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        (void)!write(pp[1], buf, got);
        if (reply)
            (void)!write(fd, reply, strlen(reply));
        _exit(0);
    }
    close(pp[1]);
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    char a0[] = "snapshot", a1[] = "--leaks", pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    char *argv[] = { a0, leaks ? a1 : pid, leaks ? pid : NULL, NULL };
    int rc = ht_cmd_snapshot(leaks ? 3 : 2, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long len = ftell(tmp);
    *out = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    rewind(tmp);
    if (len > 0 && fread(*out, 1, (size_t)len, tmp) != (size_t)len)
        CHECK(0);
    fclose(tmp);
    ssize_t k = read(pp[0], req, reqcap - 1);
    req[k > 0 ? k : 0] = 0;
    close(pp[0]);
    waitpid(c, NULL, 0);
    close(ls);
    return rc;
}

static void test_check_client(void)
{
    char req[128], want[2048], ok[256];
    char *out;
    int me = (int)getpid();

    /* a leak check: "snapshot leaks", then the summary of the snapshot
     * the reply names */
    CHECK_EQ(write_check_trace(check_sites, 0, HT_REACH_DONE, 0, 0), 0);
    snprintf(ok, sizeof ok, "ok 0 %s\n", CHECK_TRACE);
    CHECK_EQ(fake_agent(ok, 1, req, sizeof req, &out), 0);
    CHECK(streq(req, "snapshot leaks\n"));
    snprintf(want, sizeof want, "heaptrail: snapshot 0 of process %d written to %s\n%s%s", me, CHECK_TRACE,
             NOW_LINES, NOW_STACKS);
    CHECK(streq(out, want));
    free(out);

    /* the agent says no: its words, control characters neutralised */
    CHECK_EQ(fake_agent("error a leak check is already under way\n", 1, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: process %d: a leak check is already under way\n", me);
    CHECK(streq(out, want));
    free(out);
    CHECK_EQ(fake_agent("error \x1b[2Jbusy\n", 1, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: process %d: ?[2Jbusy\n", me);
    CHECK(streq(out, want));
    free(out);
    /* no answer; an answer that is neither; a snapshot the trace lacks */
    CHECK_EQ(fake_agent(NULL, 1, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: process %d: no answer\n", me);
    CHECK(streq(out, want));
    free(out);
    CHECK_EQ(fake_agent("ok seven /x.ht\n", 1, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: process %d: unexpected answer: ok seven /x.ht\n", me);
    CHECK(streq(out, want));
    free(out);
    snprintf(ok, sizeof ok, "ok 7 %s\n", CHECK_TRACE);
    CHECK_EQ(fake_agent(ok, 1, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: snapshot 7 of process %d written to %s\n"
             "heaptrail: snapshot 7 is not in %s\n", me, CHECK_TRACE, CHECK_TRACE);
    CHECK(streq(out, want));
    free(out);

    /* without --leaks, as before: "snapshot", the reply's words */
    CHECK_EQ(fake_agent("ok 3 /some/trace.ht\n", 0, req, sizeof req, &out), 0);
    CHECK(streq(req, "snapshot\n"));
    snprintf(want, sizeof want, "heaptrail: snapshot 3 of process %d written to /some/trace.ht\n", me);
    CHECK(streq(out, want));
    free(out);
    CHECK_EQ(fake_agent("error the trace cannot be written\n", 0, req, sizeof req, &out), 1);
    snprintf(want, sizeof want, "heaptrail: process %d: error the trace cannot be written\n", me);
    CHECK(streq(out, want));
    free(out);
    remove(CHECK_TRACE);
}

/*------------------------------------------------ possibly lost (POSSIBLE) */

/* The POSSIBLE entries of the traces below: in the leak check (check_sites)
 * 1 of the still reachable site's 10 blocks; at the exit (sum_sites) 4 of
 * the biggest site's 50 blocks (80,000 bytes) and all that the site with
 * both kinds of lost blocks has left (2 blocks, 2,000 bytes: the most the
 * reader allows). Possibly lost: 1,000 bytes in 1 block at the check,
 * 82,000 bytes in 6 blocks at the exit. */
static const uint64_t poss_check[1][3] = { { 1, 1, 1000 } };
static const uint64_t poss_exit[2][3] = { { 1, 4, 80000 }, { 3, 2, 2000 } };

#define POSS_TRACE ADIR "/possible.ht"

/* A trace in two blocks: PROCESS, NODES and a leak check of check_sites
 * (with its POSSIBLE record when `check`), then sum_sites' exit snapshot
 * with REACH `status` and the POSSIBLE record set_possible describes
 * (`where`, entries e[0..n), a count of `count` when not 0), and the END
 * record. *second: the offset of the second block. */
static int write_possible_trace(int check, int where, int n, int count, const uint64_t (*e)[3], int status,
                                uint64_t *second)
{
    wbuf_t p[2] = { { 0 }, { 0 } }, b = { 0 };
    write_process(&p[0], &b);
    set_possible(check ? POSS_AFTER : POSS_NONE, 1, poss_check);
    write_snapshot(&p[0], &b, 0, HT_SNAP_REQUEST, check_sites, 4, HT_REACH_DONE, 0);
    set_possible(where, n, e);
    g_poss_count = count;
    write_snapshot(&p[1], &b, 1, HT_SNAP_EXIT, sum_sites, 6, status, 0);
    set_possible(POSS_NONE, 0, NULL);
    w_var(&b, 60000000), w_var(&b, 0);
    w_rec(&p[1], HT_REC_END, &b);
    *second = HT_FILE_HEADER_LEN + HT_BLOCK_HEADER_LEN + p[0].n;
    int rc = w_file_blocks(POSS_TRACE, p, 2);
    free(p[0].p);
    free(p[1].p);
    free(b.p);
    return rc;
}

/* POSSIBLE records read per site after a computed REACH; one that
 * contradicts its snapshot is damage named by the offset of its block
 * (the second here: the leak check in the first stays). */
static void test_possible_record(void)
{
    ht_trace_t t;
    char err[256], want[256];
    uint64_t second;
    CHECK_EQ(write_possible_trace(1, POSS_AFTER, 2, 0, poss_exit, HT_REACH_DONE, &second), 0);
    CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.truncated, 0);
    CHECK_EQ(t.nsnaps, 2);
    if (t.nsnaps == 2) {
        static const uint64_t blocks[6] = { 0, 4, 0, 2, 0, 0 }, bytes[6] = { 0, 80000, 0, 2000, 0, 0 };
        const ht_tsnapshot_t *sn = &t.snaps[1];
        CHECK_EQ(sn->has_possible, 1);
        CHECK_EQ(sn->nsites, 6);
        for (size_t i = 0; i < sn->nsites && i < 6; i++) {    /* sites not named: none */
            CHECK_EQ(sn->sites[i].plost_blocks, blocks[i]);
            CHECK_EQ(sn->sites[i].plost_bytes, bytes[i]);
        }
        CHECK_EQ(sn->sites[3].lost_bytes, 1000);              /* REACH's figures stay */
        CHECK_EQ(sn->sites[3].ilost_bytes, 2000);
        sn = &t.snaps[0];
        CHECK_EQ(sn->has_possible, 1);
        for (size_t i = 0; i < sn->nsites; i++) {
            CHECK_EQ(sn->sites[i].plost_blocks, i == 1 ? 1u : 0u);
            CHECK_EQ(sn->sites[i].plost_bytes, i == 1 ? 1000u : 0u);
        }
    }
    ht_trace_free(&t);

    /* damage, each in the exit snapshot's block */
    static const uint64_t over_blocks[2][3] = { { 1, 4, 80000 }, { 3, 3, 2000 } };  /* 2 blocks left */
    static const uint64_t over_bytes[2][3] = { { 1, 4, 80000 }, { 3, 2, 2001 } };   /* 2000 bytes left */
    static const uint64_t all_lost[1][3] = { { 0, 1, 1 } };     /* every block definitely lost */
    static const uint64_t unordered[2][3] = { { 3, 2, 2000 }, { 1, 4, 80000 } };
    static const uint64_t twice[2][3] = { { 1, 4, 80000 }, { 1, 4, 80000 } };
    static const uint64_t past[1][3] = { { 6, 1, 1 } };         /* 6 sites: 0..5 */
    static const struct {
        const char *what;
        int where, n, count, status, type;
        const uint64_t (*e)[3];
    } cases[] = {
        { "more blocks than live - lost - indirectly lost", POSS_AFTER, 2, 0, HT_REACH_DONE, 15, over_blocks },
        { "more bytes than live - lost - indirectly lost", POSS_AFTER, 2, 0, HT_REACH_DONE, 15, over_bytes },
        { "possibly lost where every block is lost", POSS_AFTER, 1, 0, HT_REACH_DONE, 15, all_lost },
        { "positions out of order", POSS_AFTER, 2, 0, HT_REACH_DONE, 15, unordered },
        { "a position twice", POSS_AFTER, 2, 0, HT_REACH_DONE, 15, twice },
        { "a position past the list", POSS_AFTER, 1, 0, HT_REACH_DONE, 15, past },
        { "a count the body cannot hold", POSS_AFTER, 2, 4, HT_REACH_DONE, 15, poss_exit },
        { "no REACH record in the snapshot", POSS_AFTER, 2, 0, HT_REACH_NONE, 15, poss_exit },
        { "REACH not computed", POSS_AFTER, 2, 0, HT_REACH_THREADS, 15, poss_exit },
        { "before the REACH record", POSS_BEFORE_REACH, 2, 0, HT_REACH_DONE, 15, poss_exit },
        { "a REACH record after it", POSS_REACH_AFTER, 2, 0, HT_REACH_DONE, 12, poss_exit },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(write_possible_trace(1, cases[i].where, cases[i].n, cases[i].count, cases[i].e,
                                      cases[i].status, &second), 0);
        CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
        if (!t.truncated)
            fprintf(stderr, "    not damage: %s\n", cases[i].what);
        CHECK_EQ(t.truncated, 1);
        CHECK_EQ(t.truncated_at, second);
        CHECK_EQ(t.nsnaps, 1);                  /* the check before it stays */
        if (t.nsnaps >= 1)
            CHECK_EQ(t.snaps[0].has_possible, 1);
        snprintf(want, sizeof want, POSS_TRACE ": offset %llu: malformed record of type %d",
                 (unsigned long long)second, cases[i].type);
        CHECK(streq(err, want));
        ht_trace_free(&t);
    }
    CHECK(second > HT_FILE_HEADER_LEN + HT_BLOCK_HEADER_LEN);

    /* without POSSIBLE records: not counted (an older agent), not zeros */
    CHECK_EQ(write_possible_trace(0, POSS_NONE, 0, 0, NULL, HT_REACH_DONE, &second), 0);
    CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.truncated, 0);
    CHECK_EQ(t.nsnaps, 2);
    for (size_t k = 0; k < t.nsnaps; k++) {
        CHECK_EQ(t.snaps[k].has_possible, 0);
        for (size_t i = 0; i < t.snaps[k].nsites; i++)
            CHECK_EQ(t.snaps[k].sites[i].plost_blocks, 0);
    }
    ht_trace_free(&t);
    /* an empty one: counted, none found */
    CHECK_EQ(write_possible_trace(0, POSS_AFTER, 0, 0, NULL, HT_REACH_DONE, &second), 0);
    CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 2);
    if (t.nsnaps == 2) {
        CHECK_EQ(t.snaps[0].has_possible, 0);
        CHECK_EQ(t.snaps[1].has_possible, 1);
    }
    ht_trace_free(&t);
    remove(POSS_TRACE);
}

/* A report (snapshot `snap`) or, when b >= 0, the diff snap -> b of
 * POSS_TRACE as read, rendered in `format` (malloc'd); *rp keeps the
 * report's figures. */
static char *possible_render(const ht_trace_t *t, int64_t snap, int64_t b, int format, ht_report_t *rp)
{
    ht_opts_t o = { .top = 0, .format = format };
    ht_session_t s;
    ht_report_t r;
    char err[256];
    ht__session_init(&s, &o, NULL, stderr);
    ht__session_add(&s, POSS_TRACE, t);
    if (b >= 0)
        CHECK_EQ(ht__diff_build(&s, snap, b, 0, &r, err, sizeof err), 0);
    else
        CHECK_EQ(ht__report_build(&s, snap, HT_RMODE_AUTO, &r, err, sizeof err), 0);
    char *text = render(&r, format);
    *rp = r;
    rp->rows = NULL;            /* freed below: only the totals are kept */
    rp->losts = NULL;
    rp->xs = NULL;
    done(&s, &r);
    return text;
}

/* Possibly lost blocks in the reports: the totals and the line that says
 * them, rows (still reachable now excludes them), JSON keys, the diff of
 * two checks that counted them; nothing of them when a snapshot (of a
 * diff: either) did not count them. */
static void test_possible_report(void)
{
    ht_trace_t t;
    char err[256], line[512];
    uint64_t second;
    ht_report_t r;
    CHECK_EQ(write_possible_trace(1, POSS_AFTER, 2, 0, poss_exit, HT_REACH_DONE, &second), 0);
    CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.nsnaps, 2);
    if (t.nsnaps != 2) {
        ht_trace_free(&t);
        return;
    }

    /* the exit: rows ranked by unreachable bytes as before */
    char *text = possible_render(&t, -1, -1, HT_FMT_TEXT, &r);
    CHECK_EQ(r.possible, 1);
    CHECK_EQ(r.total_lost.plost_bytes, 82000);
    CHECK_EQ(r.total_lost.plost_blocks, 6);
    CHECK(streq(after_line1(text),
        "1405096 bytes leaked in 60 blocks from 4 allocation sites; anonymous mappings never unmapped: "
        "8192 bytes in 1 region from 1 site\n"
        "unreachable: 401000 bytes in 3 blocks (definitely lost), 2096 bytes in 5 blocks indirectly; "
        "possibly lost: 82000 bytes in 6 blocks; still reachable: 920000 bytes in 46 blocks\n"
        "\n#1  400000 bytes in 2 blocks (28.5%), definitely lost: 400000 bytes in 2 blocks\n"
        "    0x402000\n    0x401000\n"
        "\n#2  5000 bytes in 5 blocks (0.4%), definitely lost: 1000 bytes in 1 block, indirectly lost: "
        "2000 bytes in 2 blocks, possibly lost: 2000 bytes in 2 blocks\n"
        "    0x401000\n"
        "\n#3  96 bytes in 3 blocks (0.0%), indirectly lost: 96 bytes in 3 blocks\n"
        "    0x404000\n"
        "\n#4  1000000 bytes in 50 blocks (71.2%), possibly lost: 80000 bytes in 4 blocks\n"
        "    0x403000\n    0x401000\n"
        "\n#5  8192 bytes in 1 block (100.0%)  [mmap]\n"
        "    0x402000\n    0x401000\n"));
    free(text);
    text = possible_render(&t, -1, -1, HT_FMT_JSON, &r);
    CHECK(text && strstr(text, "\"indirectly_lost_bytes\":2096,\"indirectly_lost_blocks\":5,"
                               "\"possibly_lost_bytes\":82000,\"possibly_lost_blocks\":6,"
                               "\"reachable_bytes\":920000,\"reachable_blocks\":46,"));
    CHECK(text && strstr(text, "\n{\"bytes\":1000000,\"blocks\":50,\"kind\":\"heap\",\"stacks\":1,"
                               "\"alloc_bytes\":1000000,\"alloc_blocks\":50,\"peak_bytes\":1000000,"
                               "\"lost_bytes\":0,\"lost_blocks\":0,\"indirectly_lost_bytes\":0,"
                               "\"indirectly_lost_blocks\":0,\"possibly_lost_bytes\":80000,"
                               "\"possibly_lost_blocks\":4,\"frames\":"));
    free(text);

    /* the leak check while it ran: 10,364 bytes in 13 blocks of heap */
    text = possible_render(&t, 0, -1, HT_FMT_TEXT, &r);
    CHECK_EQ(r.type, HT_REPORT_INUSE);
    CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                "unreachable: 300 bytes in 2 blocks (definitely lost); possibly lost: 1000 bytes in 1 block; "
                "still reachable: 9064 bytes in 10 blocks"));
    CHECK(text && strstr(text, "\n#2  10000 bytes in 10 blocks (96.5%), possibly lost: 1000 bytes in 1 block\n"));
    CHECK(text && strstr(text, "\n#4  64 bytes in 1 block (0.6%), still reachable\n"));
    free(text);

    /* check -> exit: each one's figures, the change; the row that grew
     * by 990,000 bytes has 79,000 more possibly lost */
    text = possible_render(&t, 0, 1, HT_FMT_TEXT, &r);
    CHECK_EQ(r.possible, 1);
    CHECK_EQ(r.total_lost_a.plost_bytes, 1000);
    CHECK_EQ(r.total_lost.plost_bytes, 82000);
    CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                "unreachable: +402796 bytes, +6 blocks: 300 bytes in 2 blocks before, 403096 bytes in 8 "
                "blocks after (definitely lost: +400700 bytes, +1 block; indirectly lost: +2096 bytes, +5 "
                "blocks); possibly lost: +81000 bytes, +5 blocks: 1000 bytes in 1 block before, 82000 bytes "
                "in 6 blocks after"));
    CHECK(text && strstr(text, "\n#1  +990000 bytes (1000000 - 10000), +40 blocks (50 - 10), possibly lost: "
                               "+79000 bytes, +3 blocks\n"));
    free(text);
    text = possible_render(&t, 0, 1, HT_FMT_JSON, &r);
    CHECK(text && strstr(text, "\"indirectly_lost_blocks\":5,\"possibly_lost_bytes\":81000,"
                               "\"possibly_lost_blocks\":5,\"before\":{"));
    CHECK(text && strstr(text, "\"possibly_lost_bytes\":79000,\"possibly_lost_blocks\":3,\"bytes_before\":10000,"));
    free(text);
    ht_trace_free(&t);

    /* the check did not count them (an older agent's), the exit did: the
     * diff has none of them; the exit's report still does */
    CHECK_EQ(write_possible_trace(0, POSS_AFTER, 2, 0, poss_exit, HT_REACH_DONE, &second), 0);
    CHECK_EQ(ht_trace_read(POSS_TRACE, &t, err, sizeof err), 0);
    static const int fmts[3] = { HT_FMT_TEXT, HT_FMT_JSON, HT_FMT_HTML };
    for (int k = 0; k < 3; k++) {
        text = possible_render(&t, 0, 1, fmts[k], &r);
        CHECK_EQ(r.possible, 0);
        CHECK_EQ(r.total_lost.plost_bytes, 0);
        CHECK(text && !strstr(text, "possibly"));
        free(text);
        text = possible_render(&t, 0, -1, fmts[k], &r);
        CHECK(text && !strstr(text, "possibly"));
        free(text);
        text = possible_render(&t, -1, -1, fmts[k], &r);
        CHECK(text && strstr(text, "possibly"));
        free(text);
    }
    ht_trace_free(&t);
    remove(POSS_TRACE);

    /* sums over merged sites: symfix's fixture by module, leak_big's one
     * block (4096 bytes) and 1 of grow_steady's 2 reachable ones (1000)
     * possibly lost; not counted without has_possible */
    if (fixture_load(SYMFIX, &t, err, sizeof err) != 0) {
        CHECK(0);
        return;
    }
    set_reach(&t, HT_REACH_DONE, 0);
    ht_tsnapshot_t *sn = &t.snaps[t.nsnaps - 1];
    sn->sites[1].plost_blocks = 1, sn->sites[1].plost_bytes = 4096;
    sn->sites[4].plost_blocks = 1, sn->sites[4].plost_bytes = 1000;
    ht_opts_t om = { .top = 0, .by = HT_BY_MODULE };
    ht_session_t s;
    for (int has = 0; has < 2; has++) {
        sn->has_possible = (uint8_t)has;
        build(&t, &om, HT_RMODE_AUTO, &s, &r);
        CHECK_EQ(r.possible, has);
        CHECK(r.nshown >= 1 && r.rows[0].lost);
        if (r.nshown >= 1 && r.rows[0].lost) {
            CHECK_EQ(r.rows[0].nstacks, 6);
            CHECK_EQ(r.rows[0].lost->lost_bytes, 3000);         /* as in test_model */
            CHECK_EQ(r.rows[0].lost->plost_bytes, has ? 5096 : 0);
            CHECK_EQ(r.rows[0].lost->plost_blocks, has ? 2 : 0);
        }
        CHECK_EQ(r.total_lost.plost_bytes, has ? 5096 : 0);
        CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                    has ? "unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks "
                          "indirectly; possibly lost: 5096 bytes in 2 blocks; still reachable: 1500 bytes in 2 blocks"
                        : "unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks "
                          "indirectly; still reachable: 6596 bytes in 4 blocks"));
        done(&s, &r);
    }
    fixture_free(&t);
}


/*------------------------------------------- version 2: snapshots as changes */

/* One snapshot of version 2: SITE_DELTA (base, entries: pos, stack and
 * kind when appended (stack 0: not), 5 figures), PEAK_DELTA (rel, entries
 * pos, bytes, blocks), TEMP (pos, blocks, bytes); n* < 0 leaves a record out. */
static void write_delta_snapshot(wbuf_t *p, wbuf_t *b, uint64_t seq, uint64_t base, uint64_t nsites,
                                 int ns, const uint64_t (*e)[7], int rel, int np, const uint64_t (*pk)[3],
                                 int nt, const uint64_t (*tp)[3])
{
    w_var(b, seq), w_var(b, HT_SNAP_INTERVAL), w_var(b, 1000 + seq);
    for (int i = 0; i < 7; i++)
        w_var(b, 0);            /* process figures: not checked here */
    w_rec(p, HT_REC_SNAP_BEGIN, b);
    w_var(b, seq), w_var(b, base), w_var(b, (uint64_t)ns);
    for (int i = 0; i < ns; i++) {
        w_var(b, e[i][0]);
        if (e[i][1])
            w_var(b, e[i][1]), w_var(b, HT_KIND_HEAP);
        for (int k = 2; k < 7; k++)
            w_var(b, e[i][k]);
    }
    w_rec(p, HT_REC_SITE_DELTA, b);
    if (np >= 0) {
        w_var(b, seq), w_var(b, (uint64_t)rel), w_var(b, (uint64_t)np);
        for (int i = 0; i < np; i++)
            w_var(b, pk[i][0]), w_var(b, pk[i][1]), w_var(b, pk[i][2]);
        w_rec(p, HT_REC_PEAK_DELTA, b);
    }
    if (nt >= 0) {
        w_var(b, seq), w_var(b, (uint64_t)nt);
        for (int i = 0; i < nt; i++)
            w_var(b, tp[i][0]), w_var(b, tp[i][1]), w_var(b, tp[i][2]);
        w_rec(p, HT_REC_TEMP, b);
    }
    w_var(b, seq), w_var(b, nsites);
    w_rec(p, HT_REC_SNAP_END, b);
}

/* Checks site i of snapshot k: live blocks, bytes, total blocks, bytes,
 * peak bytes, at-peak bytes, blocks, temporary blocks, bytes. */
static void check_site(const ht_trace_t *t, size_t k, size_t i, uint32_t stack, const uint64_t want[9])
{
    CHECK(k < t->nsnaps && i < t->snaps[k].nsites);
    if (k >= t->nsnaps || i >= t->snaps[k].nsites)
        return;
    const ht_tsite_t *x = &t->snaps[k].sites[i];
    CHECK_EQ(x->stack, stack);
    uint64_t got[9] = { x->live_blocks, x->live_bytes, x->total_blocks, x->total_bytes, x->peak_bytes,
                        x->at_peak_bytes, x->at_peak_blocks, x->temp_blocks, x->temp_bytes };
    for (int f = 0; f < 9; f++)
        CHECK_EQ(got[f], want[f]);
}

/* Version 2's snapshots list only what changed since the last one: a
 * site keeps its position; the figures at the peak are relative to the
 * live ones (rel 0) or to the last snapshot's (rel 1); temporary counts
 * carry over. A list whose base is not the last snapshot's length, a
 * position past the list's end, or PEAK_DELTA records of both modes in one
 * snapshot are damage. */
static void test_delta_records(void)
{
    const char *path = ADIR "/delta.ht";
    /* snapshot 0, fresh: two sites */
    static const uint64_t s0[2][7] = { { 0, 1, 2, 200, 3, 300, 300 }, { 1, 2, 1, 10, 1, 10, 10 } };
    static const uint64_t p0[1][3] = { { 0, 300, 3 } };
    static const uint64_t t0[1][3] = { { 0, 1, 100 } };
    /* snapshot 1: site 1 changed, site 2 appended, site 0 as it was */
    static const uint64_t s1[2][7] = { { 1, 0, 0, 0, 2, 20, 10 }, { 2, 3, 1, 4096, 1, 4096, 4096 } };
    static const uint64_t p1[1][3] = { { 2, 4096, 1 } };
    static const uint64_t t1[1][3] = { { 1, 1, 10 } };
    /* snapshot 2: a fresh list (after a failed write) of one site */
    static const uint64_t s2[1][7] = { { 0, 4, 1, 8, 1, 8, 8 } };
    /* snapshot 3, broken three ways */
    static const uint64_t s3[1][7] = { { 2, 0, 5, 5, 5, 5, 5 } };     /* pos 2 of a list of 1 */
    g_version = 2;
    for (int bad = 0; bad < 4; bad++) {
        wbuf_t pl[2] = { { 0 } }, b = { 0 };
        write_process(&pl[0], &b);
        write_delta_snapshot(&pl[0], &b, 0, 0, 2, 2, s0, 0, 1, p0, 1, t0);
        write_delta_snapshot(&pl[0], &b, 1, 2, 3, 2, s1, 1, 1, p1, 1, t1);
        write_delta_snapshot(&pl[0], &b, 2, 0, 1, 1, s2, 0, 0, NULL, 0, NULL);
        if (bad == 1)           /* base 5: not the last snapshot's 1 */
            write_delta_snapshot(&pl[1], &b, 3, 5, 5, 0, NULL, 1, 0, NULL, 0, NULL);
        else if (bad == 2)      /* a position past the end */
            write_delta_snapshot(&pl[1], &b, 3, 1, 2, 1, s3, 1, 0, NULL, 0, NULL);
        else if (bad == 3) {    /* PEAK_DELTA relative to live, then to the last snapshot */
            write_delta_snapshot(&pl[1], &b, 3, 1, 1, 0, NULL, 0, 0, NULL, -1, NULL);
            /* (a second PEAK_DELTA before the end: rebuilt by hand) */
            pl[1].n = 0;
            w_var(&b, 3), w_var(&b, HT_SNAP_INTERVAL), w_var(&b, 1003);
            for (int i = 0; i < 7; i++)
                w_var(&b, 0);
            w_rec(&pl[1], HT_REC_SNAP_BEGIN, &b);
            w_var(&b, 3), w_var(&b, 1), w_var(&b, 0);
            w_rec(&pl[1], HT_REC_SITE_DELTA, &b);
            w_var(&b, 3), w_var(&b, 0), w_var(&b, 0);
            w_rec(&pl[1], HT_REC_PEAK_DELTA, &b);
            w_var(&b, 3), w_var(&b, 1), w_var(&b, 0);
            w_rec(&pl[1], HT_REC_PEAK_DELTA, &b);
            w_var(&b, 3), w_var(&b, 1);
            w_rec(&pl[1], HT_REC_SNAP_END, &b);
        } else                  /* a fine one: nothing changed */
            write_delta_snapshot(&pl[1], &b, 3, 1, 1, 0, NULL, 1, 0, NULL, 0, NULL);
        w_rec(&pl[1], HT_REC_END, &b);
        CHECK_EQ(w_file_blocks(path, pl, 2), 0);
        ht_trace_t t;
        char err[256];
        CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), 0);
        CHECK_EQ(t.version, 2);
        CHECK_EQ(t.nsnaps, bad ? 3u : 4u);
        CHECK_EQ(t.truncated, bad != 0);
        if (bad)
            CHECK_EQ(t.truncated_at, 16 + 24 + pl[0].n);
        if (t.nsnaps >= 3) {
            CHECK_EQ(t.snaps[0].nsites, 2);
            check_site(&t, 0, 0, 1, (const uint64_t[9]){ 2, 200, 3, 300, 300, 300, 3, 1, 100 });
            check_site(&t, 0, 1, 2, (const uint64_t[9]){ 1, 10, 1, 10, 10, 10, 1, 0, 0 });
            CHECK_EQ(t.snaps[1].nsites, 3);
            check_site(&t, 1, 0, 1, (const uint64_t[9]){ 2, 200, 3, 300, 300, 300, 3, 1, 100 });
            check_site(&t, 1, 1, 2, (const uint64_t[9]){ 0, 0, 2, 20, 10, 10, 1, 1, 10 });
            check_site(&t, 1, 2, 3, (const uint64_t[9]){ 1, 4096, 1, 4096, 4096, 4096, 1, 0, 0 });
            CHECK_EQ(t.snaps[1].has_peak, 1);
            CHECK_EQ(t.snaps[1].has_temp, 1);
            CHECK_EQ(t.snaps[2].nsites, 1);
            check_site(&t, 2, 0, 4, (const uint64_t[9]){ 1, 8, 1, 8, 8, 8, 1, 0, 0 });
            CHECK_EQ(t.snaps[2].has_peak, 1);
        }
        if (t.nsnaps == 4)
            check_site(&t, 3, 0, 4, (const uint64_t[9]){ 1, 8, 1, 8, 8, 8, 1, 0, 0 });
        ht_trace_free(&t);
        free(pl[0].p), free(pl[1].p), free(b.p);
    }
    /* a later version: refused, by name */
    wbuf_t pl = { 0 }, b = { 0 };
    write_process(&pl, &b);
    g_version = 4;
    CHECK_EQ(w_file(path, &pl), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(path, &t, err, sizeof err), -1);
    CHECK(streq(err, ADIR "/delta.ht: offset 8: unsupported trace version 4 (this reader knows 1 to 3)"));
    free(pl.p), free(b.p);
    g_version = 1;
    remove(path);
}

/*------------------------------------------------ custom allocator blocks */

/* sum_sites with custom allocator blocks (kind 2, format version 3): the
 * freed heap site's place taken by a custom site whose blocks were all
 * freed (4 blocks of 100 bytes made, as write_snapshot makes them), and a
 * custom site with 3 blocks of 4,000 bytes live. Neither may change a
 * heap, mapping or reachability figure. */
static const site_t custom_sites[7] = {
    { 2, HT_KIND_HEAP, 2, 400000, 2, 400000, 0, 0 },
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },
    { 4, HT_KIND_HEAP, 3, 96, 0, 0, 3, 96 },
    { 1, HT_KIND_HEAP, 5, 5000, 1, 1000, 2, 2000 },
    { 2, HT_KIND_MMAP, 1, 8192, 0, 0, 0, 0 },
    { 2, HT_KIND_CUSTOM, 0, 0, 0, 0, 0, 0 },              /* all freed */
    { 4, HT_KIND_CUSTOM, 3, 12000, 0, 0, 0, 0 },          /* never checked */
};

#define CUSTOM_TRACE ADIR "/custom_summary.ht"

/* A version 3 trace of custom_sites: a leak check (a request snapshot,
 * reachability computed) or the exit snapshot with `status`; with TEMP
 * records when `temp` (TEMP_OK's: 1 temporary block of 32 bytes at
 * position 2, 3 of 300 bytes at position 5, the freed custom site). */
static int write_custom_trace(int reason, int status, int temp)
{
    wbuf_t p = { 0 }, b = { 0 };
    g_version = 3;
    g_temp = temp ? TEMP_OK : TEMP_NONE;
    write_process(&p, &b);
    write_snapshot(&p, &b, 0, reason, custom_sites, 7, status, 0);
    int rc = write_end(CUSTOM_TRACE, &p, &b, reason == HT_SNAP_EXIT);
    g_version = 1;
    g_temp = TEMP_NONE;
    return rc;
}

/* heaptrail run's summary (`when`) of CUSTOM_TRACE (malloc'd); *unreach
 * (if not NULL) what it says for --error-exitcode. */
static char *custom_trace_summary(int when, int *unreach)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK_EQ(ht__run_summary(CUSTOM_TRACE, when, when == HT_SUMMARY_NOW ? 0 : -1, NULL, unreach, f), 0);
    fclose(f);
    return text;
}

static char *custom_summary(int when, int status)
{
    CHECK_EQ(write_custom_trace(when == HT_SUMMARY_NOW ? HT_SNAP_REQUEST : HT_SNAP_EXIT, status, 0), 0);
    return custom_trace_summary(when, NULL);
}

#define CUSTOM_LINE1 \
    "heaptrail: 1,405,096 bytes leaked in 60 blocks from 4 allocation sites (unique stacks); anonymous " \
    "mappings never unmapped: 8,192 bytes in 1 region from 1 site; custom allocator blocks never freed: " \
    "12,000 bytes in 3 blocks from 1 site; trace: " CUSTOM_TRACE "\n"

/* heaptrail run's summary and the reports of a trace with custom blocks:
 * the heap's, the mappings' and the reachability figures exactly those of
 * sum_sites (test_summary), the custom blocks in a clause and a stack of
 * their own, without reachability words. */
/* the reachability line and stacks of an exit summary whose check did
 * not judge the custom blocks: sum_sites' heap verdicts, the custom stack
 * without one (test_custom; test_custom_verdicts without the flag) */
#define CUSTOM_NOT_JUDGED \
        "heaptrail: unreachable at exit: 401,000 bytes in 3 blocks from 2 sites (definitely lost; plus " \
        "2,096 bytes in 5 blocks reachable only through them); still reachable: 1,002,000 bytes in 52 " \
        "blocks\n" \
        "  400,000 bytes in 2 blocks (heap; definitely lost: 400,000 bytes in 2 blocks):\n" \
        "      0x402000\n" \
        "      0x401000\n" \
        "  5,000 bytes in 5 blocks (heap; definitely lost: 1,000 bytes in 1 block, indirectly lost: " \
        "2,000 bytes in 2 blocks):\n" \
        "      0x401000\n" \
        "  96 bytes in 3 blocks (heap; indirectly lost: 96 bytes in 3 blocks):\n" \
        "      0x404000\n" \
        "  1,000,000 bytes in 50 blocks (heap; still reachable):\n" \
        "      0x403000\n" \
        "      0x401000\n" \
        "  12,000 bytes in 3 blocks (custom):\n" \
        "      0x404000\n"

static void test_custom(void)
{
    /* at exit, reachability computed: the stacks by unreachable bytes,
     * then by bytes; the custom one (custom) with no verdict */
    char *s = custom_summary(HT_SUMMARY_AT_EXIT, HT_REACH_DONE);
    CHECK(streq(s,
        CUSTOM_LINE1
        CUSTOM_NOT_JUDGED));
    free(s);
    /* no REACH: by bytes, the mapping and the custom blocks among them */
    s = custom_summary(HT_SUMMARY_AT_EXIT, HT_REACH_NONE);
    CHECK(streq(s,
        CUSTOM_LINE1
        "  1,000,000 bytes in 50 blocks (heap):\n"
        "      0x403000\n"
        "      0x401000\n"
        "  400,000 bytes in 2 blocks (heap):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  12,000 bytes in 3 blocks (custom):\n"
        "      0x404000\n"
        "  8,192 bytes in 1 region (mmap):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  5,000 bytes in 5 blocks (heap):\n"
        "      0x401000\n"));
    free(s);
    /* a leak check while the program runs: live, and only the stacks
     * with unreachable blocks (never a custom one) */
    s = custom_summary(HT_SUMMARY_NOW, HT_REACH_DONE);
    CHECK(streq(s,
        "heaptrail: in use now: 1,405,096 bytes in 60 blocks from 4 allocation sites; anonymous mappings "
        "live: 8,192 bytes in 1 region from 1 site; custom allocator blocks live: 12,000 bytes in 3 blocks "
        "from 1 site\n"
        "heaptrail: unreachable now: 401,000 bytes in 3 blocks from 2 sites (definitely lost; plus 2,096 "
        "bytes in 5 blocks reachable only through them); still reachable: 1,002,000 bytes in 52 blocks\n"
        "  400,000 bytes in 2 blocks (heap; definitely lost: 400,000 bytes in 2 blocks):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  5,000 bytes in 5 blocks (heap; definitely lost: 1,000 bytes in 1 block, indirectly lost: "
        "2,000 bytes in 2 blocks):\n"
        "      0x401000\n"
        "  96 bytes in 3 blocks (heap; indirectly lost: 96 bytes in 3 blocks):\n"
        "      0x404000\n"));
    free(s);

    /* the reader keeps the kind; the snapshot's totals leave custom
     * blocks out (the writer's, as the agent writes them) */
    CHECK_EQ(write_custom_trace(HT_SNAP_EXIT, HT_REACH_DONE, 1), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(CUSTOM_TRACE, &t, err, sizeof err), 0);
    CHECK_EQ(t.version, 3);
    CHECK_EQ(t.nsnaps, 1);
    if (t.nsnaps != 1) {
        ht_trace_free(&t);
        return;
    }
    CHECK_EQ(t.snaps[0].nsites, 7);
    CHECK_EQ(t.snaps[0].sites[6].kind, HT_KIND_CUSTOM);
    CHECK_EQ(t.snaps[0].live_bytes, 1413288);

    /* the leaks report: totals as sum_sites', the custom row apart */
    ht_opts_t o = { .top = 0 };
    ht_session_t ses;
    ht_report_t r;
    ht__session_init(&ses, &o, NULL, stderr);
    ht__session_add(&ses, CUSTOM_TRACE, &t);
    CHECK_EQ(ht__report_build(&ses, 0, HT_RMODE_AUTO, &r, err, sizeof err), 0);
    CHECK_EQ(r.total_bytes, 1413288);
    CHECK_EQ(r.total_blocks, 61);
    CHECK_EQ(r.map_bytes, 8192);
    CHECK_EQ(r.custom_bytes, 12000);
    CHECK_EQ(r.custom_blocks, 3);
    CHECK_EQ(r.custom_sites, 1);
    CHECK_EQ(r.heap_bytes, 1405096);
    CHECK_EQ(r.total_lost.lost_bytes, 401000);
    CHECK_EQ(r.total_lost.ilost_bytes, 2096);
    char *text = render(&r, HT_FMT_TEXT);
    CHECK(text && strstr(text, "\n1405096 bytes leaked in 60 blocks from 4 allocation sites; anonymous mappings "
                               "never unmapped: 8192 bytes in 1 region from 1 site; custom allocator blocks "
                               "never freed: 12000 bytes in 3 blocks from 1 site\n"));
    CHECK(text && strstr(text, "\n#5  12000 bytes in 3 blocks (100.0%)  [custom]\n    0x404000\n\n#6  8192 bytes in 1 block (100.0%)  [mmap]\n"));
    free(text);
    ht__report_free(&r);

    /* --temporary: the heap's temporary allocations alone (1 block of 32
     * bytes, of the heap sites' 60), never the custom site's 3 */
    CHECK_EQ(ht__report_build(&ses, 0, HT_RMODE_TEMPORARY, &r, err, sizeof err), 0);
    CHECK_EQ(r.total_blocks, 1);
    CHECK_EQ(r.all_blocks, 60);
    CHECK_EQ(r.custom_sites, 0);
    CHECK_EQ(r.nshown, 1);
    char line[512];
    CHECK(streq(ht__totals_line(&r, line, sizeof line),
                "1 temporary allocation of 60 (1.7%), 32 bytes, from 1 allocation site"));
    ht__report_free(&r);
    ht__session_free(&ses);
    ht_trace_free(&t);
    remove(CUSTOM_TRACE);
}

/*----------------------------------- custom allocator blocks with verdicts */

/* custom_sites with verdicts for its custom blocks, as a check that
 * judged them writes them (REACH's flags, bit 0): the custom site on node
 * 4 has 1 block definitely lost (4,000 bytes), 1 indirectly (4,000), 1
 * still reachable; one on node 3 (0x403000 <- 0x401000) 10 blocks of 64
 * bytes, all definitely lost. Custom totals: 12,640 bytes in 13 blocks
 * from 2 sites; definitely lost 4,640 bytes in 11 blocks from 2 sites,
 * indirectly 4,000 in 1, still reachable 4,000 in 1. The heap's figures
 * are sum_sites' (test_summary). */
static const site_t judged_sites[8] = {
    { 2, HT_KIND_HEAP, 2, 400000, 2, 400000, 0, 0 },
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },
    { 4, HT_KIND_HEAP, 3, 96, 0, 0, 3, 96 },
    { 1, HT_KIND_HEAP, 5, 5000, 1, 1000, 2, 2000 },
    { 2, HT_KIND_MMAP, 1, 8192, 0, 0, 0, 0 },
    { 2, HT_KIND_CUSTOM, 0, 0, 0, 0, 0, 0 },              /* all freed */
    { 4, HT_KIND_CUSTOM, 3, 12000, 1, 4000, 1, 4000 },
    { 3, HT_KIND_CUSTOM, 10, 640, 10, 640, 0, 0 },
};
/* a heap block lost only through a lost custom block (a pool object
 * holding the only pointer to it), a custom block only through a lost
 * heap block: each group's indirectly lost, none definitely */
static const site_t across_sites[4] = {
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },
    { 4, HT_KIND_HEAP, 1, 300, 0, 0, 1, 300 },
    { 4, HT_KIND_CUSTOM, 2, 128, 1, 64, 0, 0 },
    { 2, HT_KIND_CUSTOM, 3, 96, 0, 0, 2, 64 },
};
/* the same heap all still reachable: unreachable blocks only custom ones */
static const site_t custom_only_sites[3] = {
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },
    { 4, HT_KIND_CUSTOM, 3, 12000, 1, 4000, 1, 4000 },
    { 2, HT_KIND_HEAP, 2, 400000, 0, 0, 0, 0 },
};

/* A version 3 trace of n sites: one snapshot (a leak check while the
 * program ran, or the exit) whose computed REACH record has `flags`
 * (G_FLAGS_ABSENT: none). */
static int write_judged_trace(int reason, const site_t *sites, int n, uint64_t flags)
{
    wbuf_t p = { 0 }, b = { 0 };
    g_version = 3;
    g_reach_flags = flags;
    write_process(&p, &b);
    write_snapshot(&p, &b, 0, reason, sites, n, HT_REACH_DONE, 0);
    int rc = write_end(CUSTOM_TRACE, &p, &b, reason == HT_SNAP_EXIT);
    g_version = 1;
    g_reach_flags = G_FLAGS_ABSENT;
    return rc;
}

/* The summary (`when`) of such a trace (malloc'd); *unreach what it says
 * for --error-exitcode. */
static char *judged_summary(int when, const site_t *sites, int n, uint64_t flags, int *unreach)
{
    CHECK_EQ(write_judged_trace(when == HT_SUMMARY_NOW ? HT_SNAP_REQUEST : HT_SNAP_EXIT, sites, n, flags), 0);
    return custom_trace_summary(when, unreach);
}

#define JUDGED_LINE1 \
    "heaptrail: 1,405,096 bytes leaked in 60 blocks from 4 allocation sites (unique stacks); anonymous " \
    "mappings never unmapped: 8,192 bytes in 1 region from 1 site; custom allocator blocks never freed: " \
    "12,640 bytes in 13 blocks from 2 sites; trace: " CUSTOM_TRACE "\n"
#define JUDGED_UNREACH \
    "401,000 bytes in 3 blocks from 2 sites (definitely lost; plus 2,096 bytes in 5 blocks reachable " \
    "only through them); still reachable: 1,002,000 bytes in 52 blocks; custom allocator blocks " \
    "unreachable: 4,640 bytes in 11 blocks from 2 sites (definitely lost; plus 4,000 bytes in 1 block " \
    "reachable only through them); still reachable: 4,000 bytes in 1 block\n"
#define JUDGED_STACKS \
    "  400,000 bytes in 2 blocks (heap; definitely lost: 400,000 bytes in 2 blocks):\n" \
    "      0x402000\n" \
    "      0x401000\n" \
    "  12,000 bytes in 3 blocks (custom; definitely lost: 4,000 bytes in 1 block, indirectly lost: " \
    "4,000 bytes in 1 block):\n" \
    "      0x404000\n" \
    "  5,000 bytes in 5 blocks (heap; definitely lost: 1,000 bytes in 1 block, indirectly lost: " \
    "2,000 bytes in 2 blocks):\n" \
    "      0x401000\n" \
    "  640 bytes in 10 blocks (custom; definitely lost: 640 bytes in 10 blocks):\n" \
    "      0x403000\n" \
    "      0x401000\n" \
    "  96 bytes in 3 blocks (heap; indirectly lost: 96 bytes in 3 blocks):\n" \
    "      0x404000\n"

/* A leak check that judged custom allocator blocks (REACH's flags, bit
 * 0): the reader says so; heaptrail run's summary gives them a clause of
 * their own in the heap's words, their stacks verdicts, ranked among the
 * heap's by unreachable bytes; the "now" summary lists those with
 * unreachable blocks; unreachable custom blocks alone make
 * --error-exitcode's verdict. Without the flag (older agents; other bits
 * are reserved), custom blocks stay not checked, whatever the entries. */
static void test_custom_verdicts(void)
{
    /* the reader: bit 0 of the flags; absent or another bit, not judged */
    static const struct { uint64_t flags; int judged; } f[] = {
        { HT_REACH_F_CUSTOM, 1 }, { G_FLAGS_ABSENT, 0 }, { 0, 0 }, { 2, 0 }, { 3, 1 },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        CHECK_EQ(write_judged_trace(HT_SNAP_EXIT, judged_sites, 8, f[i].flags), 0);
        ht_trace_t t;
        char err[256];
        CHECK_EQ(ht_trace_read(CUSTOM_TRACE, &t, err, sizeof err), 0);
        CHECK_EQ(t.truncated, 0);
        CHECK_EQ(t.nsnaps, 1);
        if (t.nsnaps == 1) {
            CHECK_EQ(t.snaps[0].reach_custom, f[i].judged);
            CHECK_EQ(ht__site_judged(&t.snaps[0], HT_KIND_CUSTOM), f[i].judged);
            CHECK_EQ(ht__site_judged(&t.snaps[0], HT_KIND_HEAP), 1);
            CHECK_EQ(ht__site_judged(&t.snaps[0], HT_KIND_MMAP), 0);
            CHECK_EQ(t.snaps[0].sites[6].lost_bytes, 4000);   /* read either way */
        }
        ht_trace_free(&t);
    }

    /* at exit: the custom clause after the heap's; stacks by unreachable
     * bytes, custom ones among them with their verdicts */
    int unreach = -2;
    char *s = judged_summary(HT_SUMMARY_AT_EXIT, judged_sites, 8, HT_REACH_F_CUSTOM, &unreach);
    CHECK(streq(s, JUDGED_LINE1 "heaptrail: unreachable at exit: " JUDGED_UNREACH JUDGED_STACKS));
    CHECK_EQ(unreach, 1);
    free(s);

    /* a leak check while the program runs: the stacks with unreachable
     * blocks, custom ones too */
    s = judged_summary(HT_SUMMARY_NOW, judged_sites, 8, HT_REACH_F_CUSTOM, NULL);
    CHECK(streq(s,
        "heaptrail: in use now: 1,405,096 bytes in 60 blocks from 4 allocation sites; anonymous mappings "
        "live: 8,192 bytes in 1 region from 1 site; custom allocator blocks live: 12,640 bytes in 13 blocks "
        "from 2 sites\n"
        "heaptrail: unreachable now: " JUDGED_UNREACH JUDGED_STACKS));
    free(s);

    /* the same entries without the flag: not checked, no custom clause,
     * custom stacks without verdicts ranked as still reachable ones */
    s = judged_summary(HT_SUMMARY_AT_EXIT, judged_sites, 8, G_FLAGS_ABSENT, &unreach);
    CHECK(streq(s,
        JUDGED_LINE1
        CUSTOM_NOT_JUDGED));
    CHECK_EQ(unreach, 1);
    free(s);
    s = judged_summary(HT_SUMMARY_NOW, judged_sites, 8, G_FLAGS_ABSENT, NULL);
    CHECK(s && !strstr(s, "custom;") && !strstr(s, "custom allocator blocks unreachable"));
    free(s);

    /* unreachable blocks only custom ones: they decide --error-exitcode,
     * judged; not judged, nothing was found unreachable */
    s = judged_summary(HT_SUMMARY_AT_EXIT, custom_only_sites, 3, HT_REACH_F_CUSTOM, &unreach);
    CHECK(s && strstr(s, "\nheaptrail: unreachable at exit: none; still reachable: 1,400,000 bytes in 52 "
                         "blocks; custom allocator blocks unreachable: 4,000 bytes in 1 block from 1 site "
                         "(definitely lost; plus 4,000 bytes in 1 block reachable only through them); still "
                         "reachable: 4,000 bytes in 1 block\n"));
    CHECK_EQ(unreach, 1);
    free(s);
    s = judged_summary(HT_SUMMARY_AT_EXIT, across_sites, 4, HT_REACH_F_CUSTOM, &unreach);
    CHECK(s && strstr(s, "\nheaptrail: unreachable at exit: 300 bytes in 1 block from 1 site (indirectly lost: "
                         "reachable only through lost custom allocator blocks); still reachable: 1,000,000 "
                         "bytes in 50 blocks; custom allocator blocks unreachable: 64 bytes in 1 block from 1 "
                         "site (definitely lost; plus 64 bytes in 2 blocks reachable only through them); "
                         "still reachable: 96 bytes in 2 blocks\n"));
    CHECK_EQ(unreach, 1);
    free(s);
    s = judged_summary(HT_SUMMARY_AT_EXIT, across_sites, 4, G_FLAGS_ABSENT, &unreach);
    CHECK(s && strstr(s, "\nheaptrail: unreachable at exit: 300 bytes in 1 block from 1 site (indirectly lost: "
                         "reachable only through lost custom allocator blocks); still reachable: 1,000,000 "
                         "bytes in 50 blocks\n"));
    free(s);
    s = judged_summary(HT_SUMMARY_AT_EXIT, custom_only_sites, 3, G_FLAGS_ABSENT, &unreach);
    CHECK(s && strstr(s, "\nheaptrail: unreachable at exit: none; still reachable: 1,400,000 bytes in 52 "
                         "blocks\n"));
    CHECK_EQ(unreach, 0);
    free(s);

    /* the report of the judged trace: the custom group's sums apart from
     * the heap's (whose figures are sum_sites'), rows ranked among them */
    CHECK_EQ(write_judged_trace(HT_SNAP_EXIT, judged_sites, 8, HT_REACH_F_CUSTOM), 0);
    ht_trace_t t;
    char err[256];
    CHECK_EQ(ht_trace_read(CUSTOM_TRACE, &t, err, sizeof err), 0);
    ht_opts_t o = { .top = 0 };
    ht_session_t ses;
    ht_report_t r;
    ht__session_init(&ses, &o, NULL, stderr);
    ht__session_add(&ses, CUSTOM_TRACE, &t);
    CHECK_EQ(ht__report_build(&ses, 0, HT_RMODE_AUTO, &r, err, sizeof err), 0);
    CHECK_EQ(r.custom_reach, 1);
    CHECK_EQ(r.heap_bytes, 1405096);
    CHECK_EQ(r.total_lost.lost_bytes, 401000);
    CHECK_EQ(r.total_lost.ilost_bytes, 2096);
    CHECK_EQ(r.lost_sites, 2);
    CHECK_EQ(r.custom_bytes, 12640);
    CHECK_EQ(r.custom_blocks, 13);
    CHECK_EQ(r.custom_lost.lost_bytes, 4640);
    CHECK_EQ(r.custom_lost.lost_blocks, 11);
    CHECK_EQ(r.custom_lost.ilost_bytes, 4000);
    CHECK_EQ(r.custom_lost.ilost_blocks, 1);
    CHECK_EQ(r.custom_lost_sites, 2);
    CHECK_EQ(r.nshown, 7);
    /* by unreachable bytes: 400,000 heap, 12,000 custom (8,000), 5,000
     * heap (3,000), 640 custom, 96 heap, then by bytes */
    static const int64_t want[7][2] = { { 400000, HT_KIND_HEAP }, { 12000, HT_KIND_CUSTOM },
                                        { 5000, HT_KIND_HEAP },   { 640, HT_KIND_CUSTOM },
                                        { 96, HT_KIND_HEAP },     { 1000000, HT_KIND_HEAP },
                                        { 8192, HT_KIND_MMAP } };
    for (size_t i = 0; i < 7 && i < r.nshown; i++) {
        CHECK_EQ(r.rows[i].bytes, want[i][0]);
        CHECK_EQ(r.rows[i].kind, want[i][1]);
    }
    char line[1024];
    CHECK(streq(ht__reach_summary(&r, line, sizeof line),
                "unreachable: 401000 bytes in 3 blocks (definitely lost), 2096 bytes in 5 blocks indirectly; "
                "still reachable: 1002000 bytes in 52 blocks; custom allocator blocks unreachable: 4640 bytes "
                "in 11 blocks (definitely lost), 4000 bytes in 1 block indirectly; still reachable: 4000 bytes "
                "in 1 block"));
    ht__report_free(&r);
    ht__session_free(&ses);
    ht_trace_free(&t);
    remove(CUSTOM_TRACE);
}

int main(void)
{
    test_model();
    test_summary();
    test_bad_reach();
    test_temp_record();
    test_delta_records();
    test_check_report();
    test_check_summary();
    test_check_client();
    test_possible_record();
    test_possible_report();
    test_custom();
    test_custom_verdicts();
    return check_done();
}
