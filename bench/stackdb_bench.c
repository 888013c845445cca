/* stackdb_bench.c -- the stack database against a flat hash table of frame
 * arrays, side by side in one run (`make bench-stackdb`):
 *
 *  1. synthetic stacks at depths 10, 30, 100: ns per intern of a known
 *     stack and of a new one, 1 and 2 threads, and ht_capture's cost at the
 *     same depth for reference;
 *  2. stacks recorded from real programs (bench/stackrec.c): bytes per
 *     unique stack, ns per intern replaying the allocation stream, and the
 *     false merges a sum-of-addresses or crc32 identity would make.
 *
 * Usage: stackdb_bench [NAME=PREFIX ...]  where PREFIX.stream and
 * PREFIX.unique are stackrec files. Prints markdown. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "heaptrail.h"
#include "core/stackdb.h"

#define MAXD 256

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* ---- a set of stacks -------------------------------------------------- */

typedef struct {
    int n;
    uint64_t hash;
    void **f;
} stk_t;

typedef struct {
    stk_t *s;
    size_t n, cap;
} set_t;

static void set_add(set_t *set, void *const *f, int n)
{
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 1024;
        set->s = realloc(set->s, set->cap * sizeof *set->s);
    }
    stk_t *s = &set->s[set->n++];
    s->n = n;
    s->f = malloc((size_t)(n ? n : 1) * sizeof(void *));
    memcpy(s->f, f, (size_t)n * sizeof(void *));
    s->hash = ht_stack_hash(f, n);
}

static int load(const char *path, set_t *set)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    uint32_t hdr[2];
    uint64_t f[MAXD];
    while (fread(hdr, 8, 1, fp) == 1) {
        if (hdr[0] > MAXD || fread(f, 8, hdr[0], fp) != hdr[0])
            break;
        set_add(set, (void **)f, (int)hdr[0]);
    }
    fclose(fp);
    return 0;
}

/* ---- the reference: a flat hash table of frame arrays ----------------- */
/* Each stack stored once as [n][frames] in an arena, an id -> offset array,
 * and an open-addressing table of {hash high half, id} at the same 7/10
 * growth policy as the database; exact (full compare). Its bytes are
 * counted as 4 + 8n per stack (a 4-byte length), 4 per id and 8 per slot. */
typedef struct {
    uint64_t *tab;
    unsigned bits;
    uint64_t nstacks;
    uint64_t *arena;
    size_t used, cap;
    uint32_t *off;
    size_t offcap;
    uint64_t frames;
} flat_t;

static void flat_init(flat_t *t)
{
    memset(t, 0, sizeof *t);
    t->bits = 6;
    t->tab = calloc(1ull << t->bits, 8);
}

static void flat_free(flat_t *t)
{
    free(t->tab);
    free(t->arena);
    free(t->off);
}

static void flat_put(uint64_t *tab, unsigned bits, uint64_t e)
{
    uint64_t mask = (1ull << bits) - 1, i = (e >> 32) >> (32 - bits);
    while (tab[i])
        i = (i + 1) & mask;
    tab[i] = e;
}

static uint32_t flat_intern(flat_t *t, void *const *f, int n, uint64_t h)
{
    uint32_t hi = (uint32_t)(h >> 32);
    uint64_t mask = (1ull << t->bits) - 1, i = hi >> (32 - t->bits);
    for (;; i = (i + 1) & mask) {
        uint64_t e = t->tab[i];
        if (!e)
            break;
        if ((uint32_t)(e >> 32) != hi)
            continue;
        uint32_t id = (uint32_t)e;
        const uint64_t *r = t->arena + t->off[id];
        if (r[0] == (uint64_t)n && memcmp(r + 1, f, (size_t)n * 8) == 0)
            return id;
    }
    /* new */
    if ((t->nstacks + 2) * 10 > (7ull << t->bits)) {
        unsigned nb = t->bits + 1;
        uint64_t *nt = calloc(1ull << nb, 8);
        for (uint64_t k = 0; k < (1ull << t->bits); k++)
            if (t->tab[k])
                flat_put(nt, nb, t->tab[k]);
        free(t->tab);
        t->tab = nt;
        t->bits = nb;
    }
    uint32_t id = (uint32_t)++t->nstacks;
    if (id >= t->offcap) {
        t->offcap = t->offcap ? t->offcap * 2 : 1024;
        t->off = realloc(t->off, t->offcap * sizeof *t->off);
    }
    if (t->used + (size_t)n + 1 > t->cap) {
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->arena = realloc(t->arena, t->cap * 8);
    }
    t->off[id] = (uint32_t)t->used;
    t->arena[t->used] = (uint64_t)n;
    memcpy(t->arena + t->used + 1, f, (size_t)n * 8);
    t->used += (size_t)n + 1;
    t->frames += (uint64_t)n;
    flat_put(t->tab, t->bits, (uint64_t)hi << 32 | id);
    return id;
}

static uint64_t flat_bytes(const flat_t *t)
{
    return t->nstacks * 4 + t->frames * 8 + t->nstacks * 4 + (8ull << t->bits);
}

/* ---- reference identities --------------------------------------------- */

static uint32_t crc_table[256];
static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint64_t crc32_of(void *const *f, int n)
{
    const uint8_t *p = (const uint8_t *)f;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < (size_t)n * 8; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* RtlCaptureStackBackTrace's BackTraceHash: a 32-bit sum of the addresses */
static uint64_t sum_of(void *const *f, int n)
{
    uint32_t s = 0;
    for (int i = 0; i < n; i++)
        s += (uint32_t)(uintptr_t)f[i];
    return s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct values of `fn` over the set (whose stacks are all distinct). */
static size_t distinct_hashes(const set_t *u, uint64_t (*fn)(void *const *, int))
{
    uint64_t *v = malloc(u->n * sizeof *v);
    for (size_t i = 0; i < u->n; i++)
        v[i] = fn(u->s[i].f, u->s[i].n);
    qsort(v, u->n, sizeof *v, cmp_u64);
    size_t d = 0;
    for (size_t i = 0; i < u->n; i++)
        d += i == 0 || v[i] != v[i - 1];
    free(v);
    return d;
}

static uint64_t ht_hash_fn(void *const *f, int n) { return ht_stack_hash(f, n); }

/* ---- synthetic stacks ------------------------------------------------- */

/* `count` distinct stacks of depth d: each shares the outer part of an
 * earlier one and has 1..5 new inner frames, as recorded stacks do (3-6
 * new nodes a stack), so parent chains cross several segments. */
static void make_synthetic(set_t *set, int count, int d, uint64_t seed, const set_t *base)
{
    uint64_t s = seed;
    void *f[MAXD];
    for (int k = 0; k < count; k++) {
        const set_t *from = base ? base : set;
        if (from->n == 0) {
            for (int i = 0; i < d; i++)
                f[i] = (void *)(uintptr_t)(0x555555554000ull + (rnd(&s) % 100000) * 16);
        } else {
            const stk_t *p = &from->s[rnd(&s) % from->n];
            memcpy(f, p->f, (size_t)d * sizeof(void *));
            int r = 1 + (int)(rnd(&s) % 5);
            for (int i = 0; i < r && i < d; i++)
                f[i] = (void *)(uintptr_t)(0x7ffff7a00000ull + (rnd(&s) % 1000000) * 16);
        }
        set_add(set, f, d);
    }
}

/* ---- timing ----------------------------------------------------------- */

typedef struct {
    const set_t *set;
    const uint32_t *order;
    size_t count;
    int use_flat;
    flat_t *flat;
    double ns;
    uint64_t sink;
} job_t;

static pthread_barrier_t barrier;

static void *run_job(void *arg)
{
    job_t *j = arg;
    pthread_barrier_wait(&barrier);
    double t0 = now_ns();
    uint64_t sink = 0;
    for (size_t i = 0; i < j->count; i++) {
        const stk_t *s = &j->set->s[j->order ? j->order[i] : i];
        sink += j->use_flat ? flat_intern(j->flat, s->f, s->n, s->hash)
                            : ht__stackdb_intern(s->f, s->n, s->hash);
    }
    j->ns = (now_ns() - t0) / (double)j->count;
    j->sink = sink;
    return NULL;
}

/* Runs `threads` jobs at once; returns the mean ns per intern. */
static double run_jobs(job_t *jobs, int threads)
{
    pthread_t th[2];
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    for (int t = 1; t < threads; t++)
        pthread_create(&th[t], NULL, run_job, &jobs[t]);
    run_job(&jobs[0]);
    for (int t = 1; t < threads; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&barrier);
    double sum = 0;
    for (int t = 0; t < threads; t++)
        sum += jobs[t].ns;
    return sum / threads;
}

static volatile uint64_t capture_sink;
static int captured_depth;

__attribute__((noinline)) static void capture_at(int depth, int reps, double *ns)
{
    if (depth > 0) {
        capture_at(depth - 1, reps, ns);
        __asm__ volatile("" ::: "memory");
        return;
    }
    void *f[MAXD];
    uint64_t h;
    double t0 = now_ns();
    for (int i = 0; i < reps; i++)
        captured_depth = ht_capture(0, MAXD, f, &h);
    *ns = (now_ns() - t0) / reps;
    capture_sink += h;
}

/* ns per ht_capture of a stack of total depth d */
static double capture_cost(int d)
{
    double v[5], ns;
    capture_at(0, 1, &ns);
    int extra = captured_depth - 1;       /* frames above capture_at */
    for (int r = 0; r < 5; r++) {
        capture_at(d - 1 - extra, 20000, &ns);
        if (captured_depth != d)
            fprintf(stderr, "capture depth %d, wanted %d\n", captured_depth, d);
        v[r] = ns;
    }
    return median(v, 5);
}

static void synthetic(void)
{
    static const int depths[] = { 10, 30, 100 };
    enum { KNOWN = 1024, NEW = 20000, REPS = 5 };
    printf("### Synthetic stacks\n\n");
    printf("ns per intern; a known stack is one of %d interned stacks of that depth "
           "(each shares its outer frames with an earlier one and differs in 1-5 inner "
           "frames), cycled in a random order; a new stack differs from a known one in "
           "1-5 inner frames; a repeated stack is one known stack interned again and "
           "again (each thread its own). Median of %d runs. ht_capture: a repeated stack "
           "of the same depth, for reference (the varied shape is in the capture "
           "benchmark).\n\n", KNOWN, REPS);
    printf("| depth | threads | known: stackdb | known: flat | repeated: stackdb | new: stackdb | new: flat | "
           "ht_capture, repeated |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (unsigned di = 0; di < HT_ARRAY_SIZE(depths); di++) {
        int d = depths[di];
        set_t known = { 0 };
        make_synthetic(&known, KNOWN, d, 1 + (uint64_t)d, NULL);
        uint32_t *order = malloc(sizeof(uint32_t) * KNOWN * 200);
        uint32_t *same = malloc(sizeof(uint32_t) * KNOWN * 200);
        uint64_t s = 5;
        for (size_t i = 0; i < (size_t)KNOWN * 200; i++) {
            order[i] = (uint32_t)(rnd(&s) % KNOWN);
            same[i] = i < (size_t)KNOWN * 100 ? 7 : 8;
        }
        double cap = capture_cost(d);
        for (int threads = 1; threads <= 2; threads++) {
            double kdb[REPS], kfl[REPS], rdb[REPS], ndb[REPS], nfl[REPS];
            for (int r = 0; r < REPS; r++) {
                ht__stackdb_reset_for_test(256ull << 20, ~0ull);
                flat_t fl;
                flat_init(&fl);
                for (int k = 0; k < KNOWN; k++) {
                    ht__stackdb_intern(known.s[k].f, d, known.s[k].hash);
                    flat_intern(&fl, known.s[k].f, d, known.s[k].hash);
                }
                job_t jobs[2];
                for (int t = 0; t < threads; t++)
                    jobs[t] = (job_t){ &known, order + t * KNOWN * 100, (size_t)KNOWN * 100, 0, NULL, 0, 0 };
                kdb[r] = run_jobs(jobs, threads);
                for (int t = 0; t < threads; t++)
                    jobs[t] = (job_t){ &known, same + t * KNOWN * 100, (size_t)KNOWN * 100, 0, NULL, 0, 0 };
                rdb[r] = run_jobs(jobs, threads);
                /* the flat table is not thread-safe: its 2-thread figure is
                 * two private copies, a lower bound for any locked version */
                flat_t fl2;
                flat_init(&fl2);
                for (int k = 0; k < KNOWN; k++)
                    flat_intern(&fl2, known.s[k].f, d, known.s[k].hash);
                for (int t = 0; t < threads; t++)
                    jobs[t] = (job_t){ &known, order + t * KNOWN * 100, (size_t)KNOWN * 100, 1,
                                       t ? &fl2 : &fl, 0, 0 };
                kfl[r] = run_jobs(jobs, threads);
                /* new stacks: each thread its own */
                set_t fresh[2] = { { 0 }, { 0 } };
                for (int t = 0; t < threads; t++) {
                    make_synthetic(&fresh[t], NEW, d, 1000 + (uint64_t)(r * 2 + t), &known);
                    jobs[t] = (job_t){ &fresh[t], NULL, NEW, 0, NULL, 0, 0 };
                }
                ndb[r] = run_jobs(jobs, threads);
                for (int t = 0; t < threads; t++)
                    jobs[t] = (job_t){ &fresh[t], NULL, NEW, 1, t ? &fl2 : &fl, 0, 0 };
                nfl[r] = run_jobs(jobs, threads);
                for (int t = 0; t < threads; t++) {
                    for (size_t i = 0; i < fresh[t].n; i++)
                        free(fresh[t].s[i].f);
                    free(fresh[t].s);
                }
                flat_free(&fl);
                flat_free(&fl2);
            }
            printf("| %d | %d | %.1f | %.1f | %.1f | %.0f | %.0f | %.1f |\n", d, threads,
                   median(kdb, REPS), median(kfl, REPS), median(rdb, REPS), median(ndb, REPS),
                   median(nfl, REPS), cap);
        }
        free(order);
        free(same);
        for (size_t i = 0; i < known.n; i++)
            free(known.s[i].f);
        free(known.s);
    }
    printf("\n");
}

/* ---- recorded stacks -------------------------------------------------- */

typedef struct {
    const char *name;
    set_t stream, unique;
} rec_t;

static void recorded(rec_t *recs, int nrec)
{
    printf("### Stacks recorded from real programs\n\n");
    printf("| set | unique stacks | mean depth | nodes/stack | stackdb bytes/stack | flat bytes/stack | "
           "stackdb/flat | frames-only bytes/stack | stackdb ids = exact |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int r = 0; r < nrec; r++) {
        set_t *u = &recs[r].unique;
        ht__stackdb_reset_for_test(256ull << 20, ~0ull);
        flat_t fl;
        flat_init(&fl);
        uint64_t frames = 0;
        size_t wrong = 0;
        uint32_t *ids = malloc(u->n * sizeof *ids);
        for (size_t i = 0; i < u->n; i++) {
            ids[i] = ht__stackdb_intern(u->s[i].f, u->s[i].n, u->s[i].hash);
            uint32_t fid = flat_intern(&fl, u->s[i].f, u->s[i].n, u->s[i].hash);
            frames += (uint64_t)u->s[i].n;
            /* the flat table compares in full: it numbers distinct stacks
             * 1, 2, 3, ...; a recorded set may still hold duplicates if
             * its 64-bit dedup ever merged two stacks, so compare both ways */
            wrong += fid != (uint32_t)(i + 1) && ids[i] != ids[fid - 1];
        }
        for (size_t i = 0; i < u->n; i++) {
            void *g[MAXD];
            int m = ht__stackdb_frames(ids[i], g, MAXD);
            wrong += m != u->s[i].n || memcmp(g, u->s[i].f, (size_t)m * 8) != 0;
        }
        ht_stackdb_info_t in;
        ht__stackdb_info(&in);
        double n = (double)fl.nstacks;
        printf("| %s | %llu | %.1f | %.2f | %.1f (mapped: %.0f) | %.1f | %.0f%% | %.1f | %s |\n",
               recs[r].name, (unsigned long long)fl.nstacks, (double)frames / (double)u->n,
               (double)(in.nodes - 1) / n, (double)in.bytes_used / n,
               (double)in.bytes_mapped / n, (double)flat_bytes(&fl) / n,
               100.0 * (double)in.bytes_used / (double)flat_bytes(&fl), (double)frames * 8 / n,
               wrong == 0 && in.stacks == fl.nstacks ? "yes" : "NO");
        free(ids);
        flat_free(&fl);
    }
    printf("\nbytes/stack: everything each structure touches (stackdb: node arrays, segment "
           "and stack tables, the stack table's second region), without page rounding; "
           "\"mapped\" is page-rounded, what the budget counts. frames-only: 8 bytes a frame, "
           "no index at all.\n\n");

    printf("| set | allocations replayed | stackdb ns/intern | flat ns/intern | mean depth |\n");
    printf("| --- | ---: | ---: | ---: | ---: |\n");
    for (int r = 0; r < nrec; r++) {
        set_t *st = &recs[r].stream;
        if (!st->n)
            continue;
        double vdb[5], vfl[5];
        uint64_t frames = 0;
        for (size_t i = 0; i < st->n; i++)
            frames += (uint64_t)st->s[i].n;
        for (int rep = 0; rep < 5; rep++) {
            ht__stackdb_reset_for_test(256ull << 20, ~0ull);
            job_t j = { st, NULL, st->n, 0, NULL, 0, 0 };
            vdb[rep] = run_jobs(&j, 1);
            flat_t fl;
            flat_init(&fl);
            j = (job_t){ st, NULL, st->n, 1, &fl, 0, 0 };
            vfl[rep] = run_jobs(&j, 1);
            flat_free(&fl);
        }
        printf("| %s | %zu | %.1f | %.1f | %.1f |\n", recs[r].name, st->n, median(vdb, 5),
               median(vfl, 5), (double)frames / (double)st->n);
    }
    printf("\n");

    printf("| set | unique stacks | distinct 32-bit address sums | distinct crc32 | distinct ht_stack_hash (64-bit) | stackdb ids |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int r = 0; r < nrec; r++) {
        set_t *u = &recs[r].unique;
        size_t ds = distinct_hashes(u, sum_of), dc = distinct_hashes(u, crc32_of),
               dh = distinct_hashes(u, ht_hash_fn);
        ht__stackdb_reset_for_test(256ull << 20, ~0ull);
        uint64_t *ids = malloc(u->n * sizeof *ids);
        for (size_t i = 0; i < u->n; i++)
            ids[i] = ht__stackdb_intern(u->s[i].f, u->s[i].n, u->s[i].hash);
        qsort(ids, u->n, sizeof *ids, cmp_u64);
        size_t di = 0;
        for (size_t i = 0; i < u->n; i++)
            di += i == 0 || ids[i] != ids[i - 1];
        free(ids);
        printf("| %s | %zu | %zu (%zu merged) | %zu (%zu merged) | %zu | %zu |\n", recs[r].name,
               u->n, ds, u->n - ds, dc, u->n - dc, dh, di);
    }
    printf("\n\"merged\": stacks a database keyed by that hash alone would fold into another "
           "stack.\n\n");
}

int main(int argc, char **argv)
{
    crc_init();
    rec_t *recs = calloc((size_t)argc, sizeof *recs);
    int nrec = 0;
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "usage: %s [NAME=PREFIX ...]\n", argv[0]);
            return 2;
        }
        *eq = 0;
        rec_t *r = &recs[nrec];
        r->name = argv[i];
        char path[4096];
        snprintf(path, sizeof path, "%s.unique", eq + 1);
        if (load(path, &r->unique) != 0 || r->unique.n == 0) {
            fprintf(stderr, "stackdb_bench: cannot read %s\n", path);
            return 1;
        }
        snprintf(path, sizeof path, "%s.stream", eq + 1);
        load(path, &r->stream);
        nrec++;
    }
    printf("## Stack database\n\n");
    synthetic();
    if (nrec)
        recorded(recs, nrec);
    return 0;
}
