/* fixht.c -- `fixht FIXTURE OUT`: writes the trace a fixture (fixwriter.h's
 * text, read by fixture.c) describes as a binary trace file, format
 * version 3 in stored blocks (docs/format.md), so that what reads real
 * traces -- the reader, `heaptrail run`'s summary -- can be tested on the
 * fixtures' known truths, real modules and symbols included.
 *
 * Records, per snapshot in order, in one block each: MODULE records of the
 * modules loaded by the snapshot's time, MODULE_UNLOAD of those unloaded
 * by then, NODES of the stacks it names first (the reader gives a node
 * the module that covers it then, else the last unloaded one that does:
 * symfix's two plugins, dlopen'd at one address one after the other,
 * keep their own frames), SNAP_BEGIN, SITES (the whole list), PEAK (has_peak),
 * REACH (reach set: an entry for each site with lost or indirectly lost
 * blocks, then the flags when reach_custom, none otherwise, as agents
 * before the fifty-second session wrote it), POSSIBLE (has_possible),
 * SNAP_END; then DROPS and END. A test tool: it trusts its input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fixture.h"
#include "format/wire.h"

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void put(buf_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void var(buf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    put(b, tmp, ht_put_varint(tmp, v));
}

static void str(buf_t *b, const void *s, size_t n)
{
    var(b, n);
    put(b, s, n);
}

/* Appends record `type` with body b to the payload; empties b. */
static void rec(buf_t *payload, int type, buf_t *b)
{
    uint8_t t = (uint8_t)type;
    put(payload, &t, 1);
    var(payload, b->n);
    put(payload, b->p, b->n);
    b->n = 0;
}

/* Writes the payload as one stored block; empties it. */
static void block(FILE *f, buf_t *payload)
{
    uint8_t h[HT_BLOCK_HEADER_LEN];
    ht_wr_u32(h, HT_BLOCK_MAGIC);
    ht_wr_u32(h + 4, HT_CODEC_STORED);
    ht_wr_u32(h + 8, (uint32_t)payload->n);
    ht_wr_u32(h + 12, (uint32_t)payload->n);
    ht_wr_u32(h + 16, ht_checksum(payload->p, payload->n));
    ht_wr_u32(h + 20, ht_checksum(h, 20));
    fwrite(h, 1, sizeof h, f);
    fwrite(payload->p, 1, payload->n, f);
    payload->n = 0;
}

/* The modules' records due by time `ns` (all when ns is UINT64_MAX):
 * loads first, then unloads. */
static void modules_until(const ht_trace_t *t, uint64_t ns, uint8_t *state, buf_t *pl, buf_t *b)
{
    for (size_t i = 0; i < t->nmodules; i++) {
        const ht_tmodule_t *m = &t->modules[i];
        if (state[i] == 0 && m->load_ns <= ns) {
            var(b, i), var(b, m->load_ns), var(b, m->start), var(b, m->end), var(b, m->bias);
            str(b, m->path, strlen(m->path));
            str(b, m->build_id, m->build_id_len);
            rec(pl, HT_REC_MODULE, b);
            state[i] = 1;
        }
    }
    for (size_t i = 0; i < t->nmodules; i++) {
        const ht_tmodule_t *m = &t->modules[i];
        if (state[i] == 1 && m->unload_ns && m->unload_ns <= ns) {
            var(b, i), var(b, m->unload_ns);
            rec(pl, HT_REC_MODULE_UNLOAD, b);
            state[i] = 2;
        }
    }
}

/* NODES up to the highest one snapshot sn's stacks name, from *next (the
 * first not written): a reader takes them in order, parents first (a
 * node's parent has a lower id); a fixture numbers them as its stacks
 * first appear, so each snapshot's new stacks come after the older ones. */
static void new_nodes(const ht_trace_t *t, const ht_tsnapshot_t *sn, uint32_t *next, buf_t *pl, buf_t *b)
{
    uint32_t end = *next;
    for (size_t j = 0; j < sn->nsites; j++)
        if (sn->sites[j].stack < t->nnodes && sn->sites[j].stack >= end)
            end = sn->sites[j].stack + 1;
    if (end <= *next)
        return;
    var(b, *next), var(b, end - *next);
    for (uint32_t id = *next; id < end; id++)
        var(b, id - t->nodes[id].parent), var(b, t->nodes[id].addr);
    rec(pl, HT_REC_NODES, b);
    *next = end;
}

static void snapshot(const ht_tsnapshot_t *sn, buf_t *pl, buf_t *b)
{
    uint64_t begin[11] = { sn->seq, sn->reason, sn->time_ns, sn->live_blocks, sn->live_bytes,
                           sn->total_blocks, sn->total_bytes, sn->total_blocks - sn->live_blocks,
                           sn->peak_bytes, sn->live_blocks, sn->has_peak ? sn->peak_ns : 0 };
    for (int k = 0; k < 11; k++)
        var(b, begin[k]);
    rec(pl, HT_REC_SNAP_BEGIN, b);
    var(b, sn->seq), var(b, sn->nsites);
    for (size_t j = 0; j < sn->nsites; j++) {
        const ht_tsite_t *x = &sn->sites[j];
        uint64_t v[7] = { x->stack, x->kind, x->live_blocks, x->live_bytes, x->total_blocks, x->total_bytes,
                          x->peak_bytes };
        for (int k = 0; k < 7; k++)
            var(b, v[k]);
    }
    rec(pl, HT_REC_SITES, b);
    if (sn->has_peak) {
        var(b, sn->seq), var(b, 0), var(b, sn->nsites);
        for (size_t j = 0; j < sn->nsites; j++)
            var(b, sn->sites[j].at_peak_bytes), var(b, sn->sites[j].at_peak_blocks);
        rec(pl, HT_REC_PEAK, b);
    }
    if (sn->reach) {
        size_t n = 0;
        for (size_t j = 0; j < sn->nsites; j++)
            n += sn->sites[j].lost_blocks || sn->sites[j].ilost_blocks;
        var(b, sn->seq), var(b, sn->reach), var(b, sn->reach_threads), var(b, sn->reach_roots_bytes);
        var(b, sn->reach_ns), var(b, n);
        for (size_t j = 0; j < sn->nsites; j++) {
            const ht_tsite_t *x = &sn->sites[j];
            if (x->lost_blocks || x->ilost_blocks)
                var(b, j), var(b, x->lost_blocks), var(b, x->lost_bytes), var(b, x->ilost_blocks),
                    var(b, x->ilost_bytes);
        }
        if (sn->reach_custom)
            var(b, HT_REACH_F_CUSTOM);
        rec(pl, HT_REC_REACH, b);
    }
    if (sn->has_possible) {
        size_t n = 0;
        for (size_t j = 0; j < sn->nsites; j++)
            n += sn->sites[j].plost_blocks != 0;
        var(b, sn->seq), var(b, n);
        for (size_t j = 0; j < sn->nsites; j++)
            if (sn->sites[j].plost_blocks)
                var(b, j), var(b, sn->sites[j].plost_blocks), var(b, sn->sites[j].plost_bytes);
        rec(pl, HT_REC_POSSIBLE, b);
    }
    var(b, sn->seq), var(b, sn->nsites);
    rec(pl, HT_REC_SNAP_END, b);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fixht FIXTURE OUT\n");
        return 2;
    }
    ht_trace_t t;
    char err[512];
    if (fixture_load(argv[1], &t, err, sizeof err) != 0) {
        fprintf(stderr, "fixht: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "wbx");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    uint8_t fh[HT_FILE_HEADER_LEN] = { 0 };
    memcpy(fh, HT_FILE_MAGIC, 8);
    ht_wr_u32(fh + 8, HT_FORMAT_VERSION);
    fwrite(fh, 1, sizeof fh, f);
    buf_t pl = { 0 }, b = { 0 };
    /* PROCESS: pid, ppid, start, exe, cmdline (the fixture's path) */
    var(&b, 4242), var(&b, 1), var(&b, 1700000000000000000ull);
    str(&b, t.exe, strlen(t.exe));
    str(&b, t.cmdline, strlen(t.cmdline));
    rec(&pl, HT_REC_PROCESS, &b);
    uint8_t *state = calloc(t.nmodules + 1, 1);
    uint32_t next = 1;          /* node 0, the root, is never written */
    for (size_t k = 0; k < t.nsnaps; k++) {
        modules_until(&t, t.snaps[k].time_ns, state, &pl, &b);
        new_nodes(&t, &t.snaps[k], &next, &pl, &b);
        snapshot(&t.snaps[k], &pl, &b);
        block(f, &pl);
    }
    modules_until(&t, UINT64_MAX, state, &pl, &b);
    var(&b, t.drops.overflow_allocs), var(&b, t.drops.unknown_frees), var(&b, t.drops.write_errors);
    var(&b, t.drops.other);
    rec(&pl, HT_REC_DROPS, &b);
    uint64_t end_ns = t.nsnaps ? t.snaps[t.nsnaps - 1].time_ns + 1000000 : 0;
    var(&b, end_ns), var(&b, t.drops.write_errors);
    rec(&pl, HT_REC_END, &b);
    block(f, &pl);
    free(state);
    free(pl.p);
    free(b.p);
    fixture_free(&t);
    return fclose(f) == 0 ? 0 : 1;
}
