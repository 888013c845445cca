/* fuzz_reader.c -- libFuzzer target for the trace reader: any input must
 * be read without a crash, hang or unbounded allocation, and what it
 * returns must satisfy the model's invariants (trace.h). Built with
 * clang -fsanitize=fuzzer,address,undefined and checksums off. */
#include <stdint.h>
#include <stdlib.h>
#include "format/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ht_trace_t t;
    char err[256];
    if (ht_trace_read_mem(data, size, "fuzz", &t, err, sizeof err) != 0)
        return 0;
    if (t.nnodes < 1 || t.nodes[0].parent != 0)
        abort();
    for (size_t i = 1; i < t.nnodes; i++)
        if (t.nodes[i].parent >= i || (t.nodes[i].module != UINT32_MAX && t.nodes[i].module >= t.nmodules))
            abort();
    for (size_t k = 0; k < t.nsnaps; k++) {
        if (t.snaps[k].seq != k)
            abort();
        for (size_t i = 0; i < t.snaps[k].nsites; i++) {
            uint32_t s = t.snaps[k].sites[i].stack;
            if (s >= t.nnodes && s != 0xffffffffu)
                abort();
        }
    }
    for (size_t i = 0; i < t.nmodules; i++)
        if (!t.modules[i].path || t.modules[i].build_id_len > 64)
            abort();
    for (size_t i = 0; i < t.njit; i++)
        if (!t.jit[i].name || t.jit[i].serial == 0 || t.jit[i].serial > 0x7fff)
            abort();
    size_t nsnaps = t.nsnaps;
    ht_trace_free(&t);
    /* the same with only two snapshots' sites kept and the changes listed
     * (report, diff, growth): the same snapshots, within bounds */
    ht_read_opts_t o = { .nkeep = 2, .keep = { 0, -1 }, .changes = 1 };
    if (ht_trace_read_mem_opts(data, size, "fuzz", &o, &t, err, sizeof err) != 0)
        return 0;
    for (size_t i = 0; i < t.nsnaps; i++) {
        int kept = i == 0 || i + 1 == t.nsnaps;
        if (kept ? t.snaps[i].nsites && !t.snaps[i].sites : t.snaps[i].sites != NULL)
            abort();
        for (size_t c = 0; c < t.snaps[i].nchanges; c++)
            if (t.snaps[i].changes[c].pos >= t.snaps[i].nsites ||
                (c && t.snaps[i].changes[c].pos <= t.snaps[i].changes[c - 1].pos))
                abort();
    }
    if (t.nsnaps != nsnaps || !t.node_seen_ns)
        abort();
    ht_trace_free(&t);
    return 0;
}
