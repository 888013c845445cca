/* t_reach.c -- reachability at exit (REACH, trace.h's lost_* and reach)
 * in the analyzer, against known truths:
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
 *   an exact offset, the snapshot dropped. */
#include <stdlib.h>
#include <string.h>
#include "analyze/cmd.h"
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

/* Writes a file: header, then the payload as one stored block. */
static int w_file(const char *path, const wbuf_t *payload)
{
    uint8_t fh[HT_FILE_HEADER_LEN] = { 0 }, bh[HT_BLOCK_HEADER_LEN];
    memcpy(fh, HT_FILE_MAGIC, 8);
    ht_wr_u32(fh + 8, HT_FORMAT_VERSION);
    ht_wr_u32(bh, HT_BLOCK_MAGIC);
    ht_wr_u32(bh + 4, HT_CODEC_STORED);
    ht_wr_u32(bh + 8, (uint32_t)payload->n);
    ht_wr_u32(bh + 12, (uint32_t)payload->n);
    ht_wr_u32(bh + 16, ht_checksum(payload->p, payload->n));
    ht_wr_u32(bh + 20, ht_checksum(bh, 20));
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(fh, 1, sizeof fh, f);
    fwrite(bh, 1, sizeof bh, f);
    fwrite(payload->p, 1, payload->n, f);
    return fclose(f);
}

/* The sites of the summary's traces: stack node, kind, live blocks and
 * bytes, then lost blocks/bytes and indirectly lost blocks/bytes. Nodes:
 * 1 = 0x401000; 2 = 0x402000 <- 1; 3 = 0x403000 <- 1; 4 = 0x404000. */
static const uint64_t sum_sites[6][8] = {
    { 2, HT_KIND_HEAP, 2, 400000, 2, 400000, 0, 0 },      /* all definitely lost */
    { 3, HT_KIND_HEAP, 50, 1000000, 0, 0, 0, 0 },         /* biggest, still reachable */
    { 4, HT_KIND_HEAP, 3, 96, 0, 0, 3, 96 },              /* indirectly lost */
    { 1, HT_KIND_HEAP, 5, 5000, 1, 1000, 2, 2000 },       /* both, 2 blocks reachable */
    { 2, HT_KIND_MMAP, 1, 8192, 0, 0, 0, 0 },             /* never checked */
    { 3, HT_KIND_HEAP, 0, 0, 0, 0, 0, 0 },                /* freed: not listed */
};

/* Damage write_summary_trace can put into its REACH record. */
enum { BAD_NONE = 0, BAD_LOST_OVER_LIVE, BAD_POS, BAD_ENTRY_NOT_DONE };
static int g_bad;

/* A trace with one exit snapshot of sum_sites; a REACH record with
 * `status` unless it is HT_REACH_NONE (lost entries only when done, or
 * with BAD_ENTRY_NOT_DONE). */
static int write_summary_trace(const char *path, int status, uint32_t threads)
{
    wbuf_t p = { 0 }, b = { 0 };
    w_var(&b, 4242), w_var(&b, 1), w_var(&b, 1700000000000000000ull);
    w_str(&b, "/bin/leaky");
    w_var(&b, 6), w_bytes(&b, "leaky\0", 6);     /* cmdline: NUL-separated */
    w_rec(&p, HT_REC_PROCESS, &b);
    static const uint64_t nodes[4][2] = { { 1, 0x401000 }, { 1, 0x402000 }, { 2, 0x403000 }, { 4, 0x404000 } };
    w_var(&b, 1), w_var(&b, 4);     /* first id, count; then (id - parent, addr) */
    for (int i = 0; i < 4; i++)
        w_var(&b, nodes[i][0]), w_var(&b, nodes[i][1]);
    w_rec(&p, HT_REC_NODES, &b);
    uint64_t lb = 0, lB = 0;
    for (int i = 0; i < 6; i++)
        lb += sum_sites[i][2], lB += sum_sites[i][3];
    uint64_t begin[10] = { 0, HT_SNAP_EXIT, 5000000, lb, lB, lb + 4, lB + 400, 4, lB, lb };
    for (int i = 0; i < 10; i++)
        w_var(&b, begin[i]);
    w_rec(&p, HT_REC_SNAP_BEGIN, &b);
    w_var(&b, 0), w_var(&b, 6);
    for (int i = 0; i < 6; i++) {
        const uint64_t *x = sum_sites[i];
        uint64_t v[7] = { x[0], x[1], x[2], x[3], x[2] + (i == 5 ? 4 : 0), x[3] + (i == 5 ? 400 : 0), x[3] };
        for (int k = 0; k < 7; k++)
            w_var(&b, v[k]);
    }
    w_rec(&p, HT_REC_SITES, &b);
    if (status != HT_REACH_NONE) {
        int n = 0, entries = status == HT_REACH_DONE || g_bad == BAD_ENTRY_NOT_DONE;
        for (int i = 0; entries && i < 6; i++)
            n += sum_sites[i][4] || sum_sites[i][6];
        w_var(&b, 0), w_var(&b, (uint64_t)status), w_var(&b, threads), w_var(&b, 1 << 20), w_var(&b, 2000000);
        w_var(&b, (uint64_t)n);
        for (int i = 0; entries && i < 6; i++)
            if (sum_sites[i][4] || sum_sites[i][6]) {
                w_var(&b, g_bad == BAD_POS ? 6 : (uint64_t)i);   /* 6 sites listed: 0..5 */
                for (int k = 4; k < 8; k++)
                    w_var(&b, sum_sites[i][k] + (g_bad == BAD_LOST_OVER_LIVE && k == 4 ? sum_sites[i][2] : 0));
            }
        w_rec(&p, HT_REC_REACH, &b);
    }
    w_var(&b, 0), w_var(&b, 6);
    w_rec(&p, HT_REC_SNAP_END, &b);
    w_var(&b, 6000000), w_var(&b, 0);
    w_rec(&p, HT_REC_END, &b);
    int rc = w_file(path, &p);
    free(p.p);
    free(b.p);
    return rc;
}

/* The summary of a trace written with `status`, as a string (malloc'd). */
static char *summary_of(const char *path, int status, uint32_t threads)
{
    CHECK_EQ(write_summary_trace(path, status, threads), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ht__run_summary(path, HT_SUMMARY_AT_EXIT, -1, f);
    fclose(f);
    return text;
}

#define LINE1 "heaptrail: 1,413,288 bytes leaked in 61 blocks from 5 allocation sites (unique stacks); trace: " \
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
        "blocks; mmap regions, not checked: 8,192 bytes in 1 blocks\n"
        "  400,000 bytes in 2 blocks (heap; definitely lost: 400,000 bytes in 2 blocks):\n"
        "      0x402000\n"
        "      0x401000\n"
        "  5,000 bytes in 5 blocks (heap; definitely lost: 1,000 bytes in 1 blocks, indirectly lost: "
        "2,000 bytes in 2 blocks):\n"
        "      0x401000\n"
        "  96 bytes in 3 blocks (heap; indirectly lost: 96 bytes in 3 blocks):\n"
        "      0x404000\n"
        "  1,000,000 bytes in 50 blocks (heap; still reachable):\n"
        "      0x403000\n"
        "      0x401000\n"
        "  8,192 bytes in 1 blocks (mmap):\n"
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
        "  8,192 bytes in 1 blocks (mmap):\n"
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
}

int main(void)
{
    test_model();
    test_summary();
    test_bad_reach();
    return check_done();
}
