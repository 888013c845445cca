/* fixture.c -- see fixture.h. Stacks are interned into the node tree of
 * trace.h (node = parent + address, innermost node = stack id); the
 * fixture's stack numbers map to node ids. Snapshot totals are the sums
 * of their sites, custom ones aside (as the agent writes them). Lost counts are taken as written (the binary reader
 * rejects lost > live; fixtures are trusted). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fixture.h"
#include "format/wire.h"

static uint32_t intern(ht_trace_t *t, size_t *cap, uint32_t parent, uint64_t addr)
{
    for (size_t i = 1; i < t->nnodes; i++)   /* fixtures are small: linear */
        if (t->nodes[i].parent == parent && t->nodes[i].addr == addr)
            return (uint32_t)i;
    if (t->nnodes == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        t->nodes = realloc(t->nodes, *cap * sizeof *t->nodes);
    }
    t->nodes[t->nnodes] = (ht_tnode_t){ .parent = parent, .module = UINT32_MAX, .addr = addr };
    return (uint32_t)t->nnodes++;
}

int fixture_load(const char *path, ht_trace_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    size_t ncap = 0, mcap = 0, scap = 0, sitecap = 0;
    uint32_t map[1024] = { 0 };     /* fixture stack number -> node */
    intern(t, &ncap, 0, 0);         /* node 0: the root */
    t->nnodes = 1;
    t->version = 1;
    t->complete = 1;
    t->exe = strdup(path);
    t->cmdline = strdup(path);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *save, *w = strtok_r(line, " \n", &save);
        if (!w)
            continue;
        if (!strcmp(w, "module")) {
            if (t->nmodules == mcap)
                t->modules = realloc(t->modules, (mcap = mcap ? mcap * 2 : 16) * sizeof *t->modules);
            ht_tmodule_t *m = &t->modules[t->nmodules++];
            memset(m, 0, sizeof *m);
            m->start = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            m->end = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            m->bias = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            m->load_ns = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            m->unload_ns = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            char *bid = strtok_r(NULL, " ", &save);
            for (size_t i = 0; bid[0] != '-' && bid[2 * i] && bid[2 * i + 1] && i < 64; i++) {
                unsigned v;
                sscanf(bid + 2 * i, "%2x", &v);
                m->build_id[m->build_id_len++] = (uint8_t)v;
            }
            char *p = strtok_r(NULL, "\n", &save);
            m->path = strdup(p ? p : "");
        } else if (!strcmp(w, "drops")) {   /* drops OVERFLOW UNKNOWN_FREES WRITE_ERRORS OTHER */
            t->drops.overflow_allocs = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            t->drops.unknown_frees = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            t->drops.write_errors = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            t->drops.other = strtoull(strtok_r(NULL, " \n", &save), NULL, 0);
        } else if (!strcmp(w, "stack")) {
            unsigned id = (unsigned)atoi(strtok_r(NULL, " ", &save));
            int n = atoi(strtok_r(NULL, " ", &save));
            uint64_t fr[256];
            for (int i = 0; i < n && i < 256; i++)
                fr[i] = strtoull(strtok_r(NULL, " \n", &save), NULL, 0);
            uint32_t node = 0;
            for (int i = n; i-- > 0;)
                node = intern(t, &ncap, node, fr[i]);
            if (id < 1024)
                map[id] = node;
        } else if (!strcmp(w, "snapshot")) {
            if (t->nsnaps == scap)
                t->snaps = realloc(t->snaps, (scap = scap ? scap * 2 : 16) * sizeof *t->snaps);
            ht_tsnapshot_t *s = &t->snaps[t->nsnaps++];
            memset(s, 0, sizeof *s);
            s->seq = (uint32_t)atoi(strtok_r(NULL, " ", &save));
            s->file_seq = s->seq;
            s->reason = (uint8_t)atoi(strtok_r(NULL, " ", &save));
            s->time_ns = strtoull(strtok_r(NULL, " \n", &save), NULL, 0);
            sitecap = 0;
        } else if (!strcmp(w, "reach") && t->nsnaps) {
            /* reach STATUS THREADS [SCANNED_BYTES TIME_NS [FLAGS]]: the
             * snapshot's REACH header (trace.h's HT_REACH_*) and its
             * trailing flags (wire.h's HT_REACH_F_*; absent: an older
             * agent's, 0) */
            ht_tsnapshot_t *s = &t->snaps[t->nsnaps - 1];
            char *v[5];
            for (int k = 0; k < 5; k++)
                v[k] = strtok_r(NULL, " \n", &save);
            s->reach = (uint8_t)(v[0] ? atoi(v[0]) : 0);
            s->reach_threads = (uint32_t)(v[1] ? strtoul(v[1], NULL, 0) : 0);
            s->reach_roots_bytes = v[2] ? strtoull(v[2], NULL, 0) : 0;
            s->reach_ns = v[3] ? strtoull(v[3], NULL, 0) : 0;
            s->reach_custom = v[4] && (strtoull(v[4], NULL, 0) & HT_REACH_F_CUSTOM);
        } else if (!strcmp(w, "peak") && t->nsnaps) {
            /* peak PEAK_NS [PEAK_BYTES]: the snapshot records what was
             * live at the process's peak (PEAK records: has_peak), when
             * that was, and (else the most its sites hold) how much */
            ht_tsnapshot_t *s = &t->snaps[t->nsnaps - 1];
            char *ns = strtok_r(NULL, " \n", &save), *bytes = strtok_r(NULL, " \n", &save);
            s->has_peak = 1;
            s->peak_ns = ns ? strtoull(ns, NULL, 0) : 0;
            if (bytes && strtoull(bytes, NULL, 0) > s->peak_bytes)
                s->peak_bytes = strtoull(bytes, NULL, 0);
        } else if (!strcmp(w, "atpeak") && t->nsnaps) {
            /* atpeak STACK KIND BLOCKS BYTES: what the site (STACK, KIND)
             * of the snapshot, listed above, held at the peak */
            ht_tsnapshot_t *s = &t->snaps[t->nsnaps - 1];
            unsigned id = (unsigned)atoi(strtok_r(NULL, " ", &save));
            uint32_t stack = id < 1024 && map[id] ? map[id] : 0xffffffffu;
            int kind = atoi(strtok_r(NULL, " ", &save));
            uint64_t blocks = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            uint64_t bytes = strtoull(strtok_r(NULL, " \n", &save), NULL, 0);
            for (size_t i = 0; i < s->nsites; i++)
                if (s->sites[i].stack == stack && s->sites[i].kind == kind) {
                    s->sites[i].at_peak_blocks = blocks;
                    s->sites[i].at_peak_bytes = bytes;
                }
        } else if (!strcmp(w, "possible") && t->nsnaps) {
            /* the snapshot's check counted possibly lost blocks (it had
             * POSSIBLE records; the sites' PLOST_* fields) */
            t->snaps[t->nsnaps - 1].has_possible = 1;
        } else if (!strcmp(w, "site") && t->nsnaps) {
            ht_tsnapshot_t *s = &t->snaps[t->nsnaps - 1];
            if (s->nsites == sitecap)
                s->sites = realloc(s->sites, (sitecap = sitecap ? sitecap * 2 : 16) * sizeof *s->sites);
            ht_tsite_t *x = &s->sites[s->nsites++];
            unsigned id = (unsigned)atoi(strtok_r(NULL, " ", &save));
            /* an id beyond the fixture's stacks stands for
             * HT_STACK_ID_OVERFLOW: the tracker's database was full */
            x->stack = id < 1024 && map[id] ? map[id] : 0xffffffffu;
            x->kind = (uint8_t)atoi(strtok_r(NULL, " ", &save));
            x->live_blocks = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            x->live_bytes = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            x->total_blocks = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            x->total_bytes = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
            x->peak_bytes = strtoull(strtok_r(NULL, " \n", &save), NULL, 0);
            /* optional: LOST_BLOCKS LOST_BYTES ILOST_BLOCKS ILOST_BYTES
             * [PLOST_BLOCKS PLOST_BYTES] */
            uint64_t *lost[6] = { &x->lost_blocks, &x->lost_bytes, &x->ilost_blocks, &x->ilost_bytes,
                                  &x->plost_blocks, &x->plost_bytes };
            for (int k = 0; k < 6; k++) {
                char *v = strtok_r(NULL, " \n", &save);
                *lost[k] = v ? strtoull(v, NULL, 0) : 0;
            }
            /* custom blocks lie inside heap blocks or mappings: never
             * in the snapshot's totals (docs/format.md, SITES) */
            if (x->kind == HT_KIND_CUSTOM)
                continue;
            s->live_blocks += x->live_blocks;
            s->live_bytes += x->live_bytes;
            s->total_blocks += x->total_blocks;
            s->total_bytes += x->total_bytes;
            if (s->live_bytes > s->peak_bytes)
                s->peak_bytes = s->live_bytes;
        }
    }
    fclose(f);
    if (!t->nsnaps) {
        snprintf(err, errlen, "%s: no snapshot in the fixture", path);
        fixture_free(t);
        return -1;
    }
    return 0;
}

void fixture_free(ht_trace_t *t)
{
    for (size_t i = 0; i < t->nmodules; i++)
        free(t->modules[i].path);
    for (size_t i = 0; i < t->nsnaps; i++)
        free(t->snaps[i].sites);
    free(t->modules);
    free(t->nodes);
    free(t->snaps);
    free(t->exe);
    free(t->cmdline);
    memset(t, 0, sizeof *t);
}

int fixture_truth(const char *path, unsigned stack, char *fn, size_t fnlen, int *line)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[8192], name[256];
    unsigned id;
    int ln, rc = -1;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "truth %u %255s %d", &id, name, &ln) == 3 && id == stack) {
            snprintf(fn, fnlen, "%s", name);
            *line = ln;
            rc = 0;
            break;
        }
    fclose(f);
    return rc;
}
