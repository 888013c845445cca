/* render_pprof.c -- the pprof format: a gzip'd profile.proto message
 * (github.com/google/pprof, proto/profile.proto), written by hand: varints
 * and length-delimited fields into a buffer, then zlib's gzip wrapper.
 *
 * Sample types inuse_objects/inuse_space/alloc_objects/alloc_space (count,
 * bytes), like Go's heap profiles, so `go tool pprof`, Pyroscope and Parca
 * read it as a heap profile (--temporary: temporary_objects/_space first,
 * the default type temporary_objects; --peak: peak_objects/_space, what
 * each stack held at the process's peak, the default peak_space). For diff and growth the values are changes
 * (they can be negative, as in pprof's own -diff_base). Locations are
 * symbolized here (has_functions etc. set) and keep their mapping's
 * build-id, so a backend can also re-symbolize. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "model.h"

/*------------------------------------------------------- protobuf encoding */

static void varint(ht_buf_t *b, uint64_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    ht__buf_add(b, tmp, n);
}

static void key(ht_buf_t *b, unsigned field, unsigned wire)
{
    varint(b, (uint64_t)field << 3 | wire);
}

static void f_varint(ht_buf_t *b, unsigned field, uint64_t v)
{
    if (!v)
        return;     /* proto3: zero is the default and is not written */
    key(b, field, 0);
    varint(b, v);
}

static void f_bytes(ht_buf_t *b, unsigned field, const void *p, size_t n)
{
    key(b, field, 2);
    varint(b, n);
    ht__buf_add(b, p, n);
}

static void f_msg(ht_buf_t *b, unsigned field, ht_buf_t *sub)
{
    f_bytes(b, field, sub->p, sub->len);
    sub->len = 0;
}

/*---------------------------------------------------------------- tables */

typedef struct idmap_s {
    uint64_t *k1, *k2;
    uint32_t *v;            /* 0: empty */
    size_t n, cap;
} idmap_t;

static uint32_t idmap_get(idmap_t *m, uint64_t a, uint64_t b, int *fresh)
{
    if (m->n * 2 >= m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        uint64_t *k1 = ht__xcalloc(nc, 8), *k2 = ht__xcalloc(nc, 8);
        uint32_t *v = ht__xcalloc(nc, 4);
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->v[i])
                continue;
            size_t j = ht__mix64(m->k1[i] * 31 + m->k2[i]) & (nc - 1);
            while (v[j])
                j = (j + 1) & (nc - 1);
            k1[j] = m->k1[i], k2[j] = m->k2[i], v[j] = m->v[i];
        }
        free(m->k1), free(m->k2), free(m->v);
        m->k1 = k1, m->k2 = k2, m->v = v, m->cap = nc;
    }
    size_t j = ht__mix64(a * 31 + b) & (m->cap - 1);
    while (m->v[j]) {
        if (m->k1[j] == a && m->k2[j] == b) {
            *fresh = 0;
            return m->v[j];
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->k1[j] = a, m->k2[j] = b, m->v[j] = (uint32_t)++m->n;
    *fresh = 1;
    return m->v[j];
}

static void idmap_free(idmap_t *m)
{
    free(m->k1), free(m->k2), free(m->v);
}

typedef struct pp_s {
    const ht_report_t *r;
    ht_pool_t strings;      /* index = string table index; "" is 0 */
    idmap_t funcs, locs;
    uint32_t *mod_mapping;  /* symbolizer module -> mapping id (0: none yet) */
    uint32_t nmappings;
    ht_buf_t mappings, locations, functions, tmp, tmp2;
} pp_t;

static int64_t str(pp_t *p, const char *s)
{
    uint32_t i;
    ht__pool_intern(&p->strings, s ? s : "", s ? strlen(s) : 0, &i);
    return i;
}

static uint32_t mapping_id(pp_t *p, uint32_t mod)
{
    if (mod == HT_NOMOD)
        return 0;
    if (p->mod_mapping[mod])
        return p->mod_mapping[mod];
    uint32_t id = ++p->nmappings;
    p->mod_mapping[mod] = id;
    const ht_smod_t *m = ht__sym_mod(p->r->ses->sym, mod);
    char hex[129];
    for (uint32_t i = 0; i < m->build_id_len; i++)
        sprintf(hex + 2 * i, "%02x", m->build_id[i]);
    hex[2 * m->build_id_len] = 0;
    ht_buf_t *t = &p->tmp2;
    t->len = 0;
    f_varint(t, 1, id);
    f_varint(t, 2, m->start);
    f_varint(t, 3, m->end);
    f_varint(t, 4, m->start - m->bias);
    f_varint(t, 5, (uint64_t)str(p, m->path));
    f_varint(t, 6, (uint64_t)str(p, hex));
    f_varint(t, 7, m->state == 1);
    f_varint(t, 8, m->state == 1);
    f_varint(t, 9, m->state == 1);
    f_varint(t, 10, m->state == 1);
    f_msg(&p->mappings, 3, t);
    return id;
}

static uint64_t function_id(pp_t *p, const char *name, const char *file)
{
    int fresh;
    uint32_t id = idmap_get(&p->funcs, (uintptr_t)name, (uintptr_t)file, &fresh);
    if (fresh) {
        ht_buf_t *t = &p->tmp2;
        t->len = 0;
        f_varint(t, 1, id);
        f_varint(t, 2, (uint64_t)str(p, name));
        f_varint(t, 3, (uint64_t)str(p, name));
        f_varint(t, 4, (uint64_t)str(p, file));
        f_msg(&p->functions, 5, t);
    }
    return id;
}

/* The location of frames[0..n) that share one address (an address and the
 * calls inlined at it). */
static uint64_t location_id(pp_t *p, const ht_rframe_t *fr, size_t n)
{
    int fresh;
    uint64_t k = fr->mod == HT_NOMOD ? UINT64_MAX : fr->mod;
    uint32_t id = idmap_get(&p->locs, k, fr->rel, &fresh);
    if (!fresh)
        return id;
    uint32_t map = mapping_id(p, fr->mod);
    /* the address in the mapping's coordinates (the first run's layout) */
    uint64_t addr = fr->mod == HT_NOMOD ? fr->addr : fr->rel + ht__sym_mod(p->r->ses->sym, fr->mod)->bias;
    ht_buf_t loc = { 0 };
    f_varint(&loc, 1, id);
    f_varint(&loc, 2, map);
    f_varint(&loc, 3, addr);
    for (size_t i = 0; i < n; i++) {
        const char *name = fr[i].sf && fr[i].sf->function ? fr[i].sf->function
                                                          : ht__frame_fallback(p->r, &fr[i]);
        ht_buf_t *t = &p->tmp;
        t->len = 0;
        f_varint(t, 1, function_id(p, name, fr[i].sf ? fr[i].sf->file : NULL));
        f_varint(t, 2, fr[i].sf ? fr[i].sf->line : 0);
        f_msg(&loc, 4, t);
    }
    f_msg(&p->locations, 4, &loc);
    ht__buf_free(&loc);
    return id;
}

static void value_type(pp_t *p, ht_buf_t *out, unsigned field, const char *type, const char *unit)
{
    ht_buf_t t = { 0 };
    f_varint(&t, 1, (uint64_t)str(p, type));
    f_varint(&t, 2, (uint64_t)str(p, unit));
    f_msg(out, field, &t);
    ht__buf_free(&t);
}

/* A synthetic location for a module row (by module). */
static uint64_t module_location(pp_t *p, const ht_row_t *row)
{
    int fresh;
    uint32_t id = idmap_get(&p->locs, (uintptr_t)row->label, UINT64_MAX, &fresh);
    if (fresh) {
        const char *s = strrchr(row->label, '/');
        ht_buf_t loc = { 0 }, t = { 0 };
        f_varint(&loc, 1, id);
        f_varint(&t, 1, function_id(p, s ? s + 1 : row->label, NULL));
        f_msg(&loc, 4, &t);
        f_msg(&p->locations, 4, &loc);
        ht__buf_free(&loc);
        ht__buf_free(&t);
    }
    return id;
}

static int write_gzip(FILE *f, const ht_buf_t *b)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    unsigned char out[65536];
    z.next_in = (unsigned char *)b->p;
    z.avail_in = (uInt)b->len;
    int rc;
    do {
        z.next_out = out;
        z.avail_out = sizeof out;
        rc = deflate(&z, Z_FINISH);
        fwrite(out, 1, sizeof out - z.avail_out, f);
    } while (rc == Z_OK || (rc == Z_BUF_ERROR && z.avail_out == 0));
    deflateEnd(&z);
    return rc == Z_STREAM_END && !ferror(f) ? 0 : -1;
}

int ht__render_pprof(const ht_report_t *r, FILE *f)
{
    pp_t p = { .r = r };
    str(&p, "");
    p.mod_mapping = ht__xcalloc(ht__sym_nmods(r->ses->sym) + 1, sizeof *p.mod_mapping);
    ht_buf_t prof = { 0 }, samples = { 0 }, t = { 0 }, ids = { 0 };
    int temp = r->type == HT_REPORT_TEMPORARY, peak = r->type == HT_REPORT_PEAK;
    /* the first two values: in use (at the snapshot), at the process's
     * peak (--peak), or temporary allocations (--temporary) */
    const char *objects = temp ? "temporary_objects" : peak ? "peak_objects" : "inuse_objects";
    const char *space = temp ? "temporary_space" : peak ? "peak_space" : "inuse_space";
    value_type(&p, &prof, 1, objects, "count");
    value_type(&p, &prof, 1, space, "bytes");
    value_type(&p, &prof, 1, "alloc_objects", "count");
    value_type(&p, &prof, 1, "alloc_space", "bytes");
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    ht_progress_t pr;
    ht__progress_init(&pr, r->ses, "building the profile");
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        ht__progress_step(&pr, i, r->nshown);
        size_t n = ht__row_frames(r, row, &buf, &cap);
        ids.len = 0;
        if (r->by == HT_BY_MODULE)
            varint(&ids, module_location(&p, row));
        for (size_t k = 0; k < n;) {
            size_t e = k + 1;
            while (e < n && buf[e].addr == buf[k].addr && buf[e].mod == buf[k].mod &&
                   buf[e - 1].sf && buf[e - 1].sf->inlined)
                e++;
            varint(&ids, location_id(&p, &buf[k], e - k));
            k = e;
        }
        t.len = 0;
        if (ids.len)
            f_bytes(&t, 1, ids.p, ids.len);     /* packed location ids */
        ht_buf_t vals = { 0 };
        varint(&vals, (uint64_t)row->blocks);
        varint(&vals, (uint64_t)row->bytes);
        varint(&vals, (uint64_t)row->alloc_blocks);
        varint(&vals, (uint64_t)row->alloc_bytes);
        f_bytes(&t, 2, vals.p, vals.len);
        ht__buf_free(&vals);
        if (row->kind != HT_KIND_HEAP) {   /* kind=mmap, kind=custom */
            ht_buf_t lab = { 0 };
            f_varint(&lab, 1, (uint64_t)str(&p, "kind"));
            f_varint(&lab, 2, (uint64_t)str(&p, ht__kind_name(row->kind)));
            f_msg(&t, 3, &lab);
            ht__buf_free(&lab);
        }
        f_msg(&samples, 2, &t);
    }
    ht__progress_end(&pr);
    ht__buf_add(&prof, samples.p ? samples.p : "", samples.len);
    ht__buf_add(&prof, p.mappings.p ? p.mappings.p : "", p.mappings.len);
    ht__buf_add(&prof, p.locations.p ? p.locations.p : "", p.locations.len);
    ht__buf_add(&prof, p.functions.p ? p.functions.p : "", p.functions.len);
    /* comments and the default type before the string table is written */
    char c[200];
    snprintf(c, sizeof c, "heaptrail %s, snapshot %u (%s)",
             r->type == HT_REPORT_DIFF ? "diff" : r->type == HT_REPORT_GROWTH ? "growth"
             : r->type == HT_REPORT_LEAKS ? "leaks" : r->type == HT_REPORT_ALLOCATED ? "allocated"
             : r->type == HT_REPORT_PEAK ? "peak" : temp ? "temporary" : "in use",
             r->snap_b->seq, ht__snap_reason(r->snap_b->reason));
    int64_t comment = str(&p, c), deflt = str(&p, temp ? objects : space);
    const ht_trace_t *tr = r->ses->in[r->input_b].t;
    /* a sampled trace: its values are already scaled to estimates of the
     * whole (pprof does not rescale them); period names the mean spacing
     * of the samples in bytes, as Go's heap profiles give their rate */
    char sb[320];
    int64_t sampled = ht__sample_text(tr, sb, sizeof sb) ? str(&p, sb) : 0;
    int64_t space_s = str(&p, "space"), bytes = str(&p, "bytes");
    for (size_t i = 0; i < p.strings.n; i++)
        f_bytes(&prof, 6, p.strings.strs[i], strlen(p.strings.strs[i]));
    f_varint(&prof, 9, tr->start_realtime_ns + r->snap_b->time_ns);
    f_varint(&prof, 10, r->snap_b->time_ns);
    t.len = 0;
    f_varint(&t, 1, (uint64_t)space_s);
    f_varint(&t, 2, (uint64_t)bytes);
    f_msg(&prof, 11, &t);
    f_varint(&prof, 12, tr->sample ? tr->sample : 1);
    f_varint(&prof, 13, (uint64_t)comment);
    if (sampled)
        f_varint(&prof, 13, (uint64_t)sampled);
    f_varint(&prof, 14, (uint64_t)deflt);
    int rc = write_gzip(f, &prof);
    free(buf);
    ht__buf_free(&prof);
    ht__buf_free(&samples);
    ht__buf_free(&t);
    ht__buf_free(&ids);
    ht__buf_free(&p.mappings);
    ht__buf_free(&p.locations);
    ht__buf_free(&p.functions);
    ht__buf_free(&p.tmp);
    ht__buf_free(&p.tmp2);
    idmap_free(&p.funcs);
    idmap_free(&p.locs);
    ht__pool_free(&p.strings);
    free(p.mod_mapping);
    return rc;
}
