/* stackdb.c -- tests of the stack trace database (src/core/stackdb.c):
 * exact identity on adversarial sets (permutations, equal address sums,
 * prefixes, zero frames) with the full hash and with the hash weakened to
 * a few bits or none, round trips, the writer's watermark enumeration, the
 * memory budget, 16 threads interning from a shared pool, fork while
 * another thread inserts, and signal handlers that intern while their own
 * thread is inside an insert. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "heaptrail.h"
#include "core/stackdb.h"
#include "../check.h"

#define MAXD 128

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static uint32_t intern(void **f, int n)
{
    return ht__stackdb_intern(f, n, ht_stack_hash(f, n));
}

static ht_stackdb_info_t info(void)
{
    ht_stackdb_info_t i;
    ht__stackdb_info(&i);
    return i;
}

/* ---- a set of stacks and the exactness check -------------------------- */

typedef struct {
    int n;
    void *f[MAXD];
} stack_t_;

static stack_t_ *set;
static int nset;

static void add(void *const *f, int n)
{
    set[nset].n = n;
    memcpy(set[nset].f, f, (size_t)n * sizeof(void *));
    nset++;
}

static int same(const stack_t_ *a, const stack_t_ *b)
{
    return a->n == b->n && memcmp(a->f, b->f, (size_t)a->n * sizeof(void *)) == 0;
}

/* Builds the adversarial set: permutations of the same frames, stacks with
 * equal address sums, prefixes and suffixes of each other, zero and
 * repeated frames, exact duplicates. */
static void build_adversarial(void)
{
    nset = 0;
    void *f[MAXD];
    /* all permutations of 6 distinct frames (720) */
    uintptr_t base[6] = { 0x401000, 0x401234, 0x7f0000001000, 0x402000, 0x403fff, 0x1 };
    int idx[6] = { 0, 1, 2, 3, 4, 5 };
    for (;;) {
        for (int i = 0; i < 6; i++)
            f[i] = (void *)base[idx[i]];
        add(f, 6);
        /* next permutation */
        int i = 4;
        while (i >= 0 && idx[i] > idx[i + 1])
            i--;
        if (i < 0)
            break;
        int j = 5;
        while (idx[j] < idx[i])
            j--;
        int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
        for (int a = i + 1, b = 5; a < b; a++, b--) {
            t = idx[a]; idx[a] = idx[b]; idx[b] = t;
        }
    }
    /* equal sums: (a + d, b - d) for many d, depth 2..5 */
    for (int d = 0; d < 200; d++) {
        f[0] = (void *)(uintptr_t)(0x500000 + d * 16);
        f[1] = (void *)(uintptr_t)(0x600000 - d * 16);
        f[2] = (void *)0x700000;
        add(f, 2);
        add(f, 3);
        f[3] = (void *)(uintptr_t)(0x800000 + d);
        f[4] = (void *)(uintptr_t)(0x900000 - d);
        add(f, 5);
    }
    /* prefixes (outermost side) and innermost-side suffixes of one stack */
    for (int i = 0; i < 40; i++)
        f[i] = (void *)(uintptr_t)(0x10000 + i * 8);
    for (int n = 1; n <= 40; n++) {
        add(f + 40 - n, n);     /* the outermost n frames: a node on the path */
        add(f, n);              /* the innermost n frames */
    }
    /* zero frames, repeated frames, deep */
    memset(f, 0, sizeof f);
    for (int n = 1; n <= 8; n++)
        add(f, n);
    for (int i = 0; i < MAXD; i++)
        f[i] = (void *)0x401000;
    for (int n = 1; n <= MAXD; n += 9)
        add(f, n);
    for (int i = 0; i < MAXD; i++)
        f[i] = (void *)(uintptr_t)(0x402000 + (i % 3) * 4);
    for (int n = 100; n <= MAXD; n++)
        add(f, n);
    /* the same low 32 bits under 300 different high halves: more high
     * halves than the database's table of them holds (the rest are kept
     * whole) */
    for (uint64_t k = 0; k < 300; k++) {
        f[0] = (void *)(uintptr_t)(k << 32 | 0x1000);
        f[1] = (void *)(uintptr_t)((299 - k) << 32 | 0x2000);
        f[2] = (void *)(uintptr_t)0x7f0000001000ull;
        add(f, 3);
        add(f, 1);
    }
    /* exact duplicates of some of the above */
    int k = nset;
    for (int i = 0; i < k; i += 7)
        set[nset++] = set[i];
}

/* Interns the whole set twice and checks: ids equal exactly when stacks
 * are equal, the second pass returns the first pass's ids, frames round
 * trip, and the stack count is the number of distinct stacks. */
static void check_exact(const char *what)
{
    uint32_t *ids = calloc((size_t)nset, sizeof *ids);
    for (int i = 0; i < nset; i++)
        ids[i] = intern(set[i].f, set[i].n);
    int distinct = 0, bad_pairs = 0, bad_again = 0, bad_frames = 0;
    for (int i = 0; i < nset; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) {
            int eq = same(&set[i], &set[j]);
            if (eq)
                first = 0;
            if (eq != (ids[i] == ids[j]))
                bad_pairs++;
        }
        distinct += first;
        if (intern(set[i].f, set[i].n) != ids[i])
            bad_again++;
        void *g[MAXD];
        int m = ht__stackdb_frames(ids[i], g, MAXD);
        if (m != set[i].n || memcmp(g, set[i].f, (size_t)m * sizeof(void *)) != 0)
            bad_frames++;
    }
    fprintf(stderr, "%s: %d stacks, %d distinct, %llu nodes\n", what, nset, distinct,
            (unsigned long long)info().nodes);
    CHECK_EQ(bad_pairs, 0);
    CHECK_EQ(bad_again, 0);
    CHECK_EQ(bad_frames, 0);
    CHECK_EQ(info().stacks, distinct);
    CHECK_EQ(info().drops, 0);
    CHECK(info().wide_addresses > 0);
    for (int i = 0; i < nset; i++)
        CHECK(ids[i] != HT_STACK_ID_OVERFLOW && ids[i] != HT_STACK_ID_EMPTY);
    free(ids);
}

/* ---- basic contracts -------------------------------------------------- */

static void test_basic(void)
{
    ht__stackdb_reset_for_test(0, ~0ull);
    void *f[4] = { (void *)0x1000, (void *)0x2000, (void *)0x3000, (void *)0x4000 };
    void *g[8];
    CHECK_EQ(ht_stack_id(f, 0), HT_STACK_ID_EMPTY);
    CHECK_EQ(ht__stackdb_frames(HT_STACK_ID_EMPTY, g, 8), 0);
    CHECK_EQ(ht__stackdb_frames(1, g, 8), -1);               /* nothing interned yet */
    CHECK_EQ(ht__stackdb_frames(HT_STACK_ID_OVERFLOW, g, 8), -1);
    uint32_t a = ht_stack_id(f, 4);
    /* a fresh database numbers the four nodes of the first stack 1..4,
     * outermost first, and the stack's id is its innermost node */
    CHECK_EQ(a, 4);
    CHECK_EQ(ht__stackdb_node_count(), 5);
    ht_stacknode_t node;
    CHECK_EQ(ht__stackdb_node(1, &node), 0);
    CHECK_EQ(node.parent, 0);
    CHECK_EQ(node.addr, 0x4000);
    CHECK_EQ(ht__stackdb_node(4, &node), 0);
    CHECK_EQ(node.parent, 3);
    CHECK_EQ(node.addr, 0x1000);
    CHECK_EQ(ht__stackdb_node(5, &node), -1);
    CHECK_EQ(ht_stack_frames(a, g, 8), 4);
    CHECK(memcmp(f, g, sizeof f) == 0);
    /* max smaller than the depth: the depth, the innermost frames stored */
    memset(g, 0, sizeof g);
    CHECK_EQ(ht_stack_frames(a, g, 2), 4);
    CHECK(g[0] == f[0] && g[1] == f[1] && g[2] == NULL);
    CHECK_EQ(ht_stack_id(f, 4), a);
    /* the outer three frames are node 3, already on the path: no new node */
    CHECK_EQ(ht_stack_id(f + 1, 3), 3);
    CHECK_EQ(ht__stackdb_node_count(), 5);
    /* the inner three frames are a different stack */
    uint32_t b = ht_stack_id(f, 3);
    CHECK(b != a && b != 3);
    CHECK_EQ(ht__stackdb_node_count(), 8);
    ht_stackdb_stats_t st;
    ht_stackdb_stats(&st);
    CHECK_EQ(st.stacks, 3);
    CHECK_EQ(st.nodes, 8);
    CHECK_EQ(st.drops, 0);
    CHECK_EQ(st.budget, 256ull << 20);
    CHECK(st.bytes_mapped > 0 && st.bytes_mapped <= st.budget);
    /* a wrong hash still finds the same node: the node table is the truth */
    CHECK_EQ(ht__stackdb_intern(f, 4, 12345), a);
    CHECK_EQ(ht__stackdb_intern(f, 4, 0), a);
}

/* Addresses whose high halves overflow the table of high halves are kept
 * whole in a side array, also where such a node starts a segment (its lo
 * then numbers the segment): ids, parents and frames stay exact. */
static void test_wide_starts(void)
{
    ht__stackdb_reset_for_test(0, ~0ull);
    void *f[200], *g[200];
    /* 200 distinct high halves: the table holds 127, the rest go wide */
    for (int i = 0; i < 200; i++)
        f[i] = (void *)(uintptr_t)(((uint64_t)(i + 1) << 32) | (uint64_t)(0x100 + 16 * i));
    uint32_t a = ht_stack_id(f, 200);
    CHECK(info().wide_addresses > 0);
    /* new inner segments whose first nodes are wide, under a parent that is
     * itself wide and in the middle of the first segment */
    uint32_t ids[8];
    for (int k = 0; k < 8; k++) {
        void *h[200];
        memcpy(h, f, sizeof f);
        h[10 + k] = (void *)(uintptr_t)(((uint64_t)(1000 + k) << 32) | 0x5550u);
        h[9 + k] = (void *)(uintptr_t)(((uint64_t)(2000 + k) << 32) | 0x6660u);
        ids[k] = ht_stack_id(h + 9 + k, 191 - k);
        CHECK(ids[k] != a && ids[k] != HT_STACK_ID_OVERFLOW);
        CHECK_EQ(ht_stack_frames(ids[k], g, 200), 191 - k);
        CHECK(memcmp(g, h + 9 + k, (size_t)(191 - k) * sizeof(void *)) == 0);
        ht_stacknode_t node;
        CHECK_EQ(ht__stackdb_node(ids[k], &node), 0);
        CHECK_EQ(node.addr, (uint64_t)(uintptr_t)h[9 + k]);
        CHECK_EQ(ht__stackdb_node(node.parent, &node), 0);
        CHECK_EQ(node.addr, (uint64_t)(uintptr_t)h[10 + k]);
        CHECK_EQ(ht_stack_id(h + 9 + k, 191 - k), ids[k]);
    }
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < k; j++)
            CHECK(ids[k] != ids[j]);
    CHECK_EQ(ht_stack_id(f, 200), a);
    CHECK_EQ(ht_stack_frames(a, g, 200), 200);
    CHECK(memcmp(g, f, sizeof f) == 0);
}

static void test_adversarial(void)
{
    build_adversarial();
    ht__stackdb_reset_for_test(0, ~0ull);
    check_exact("full hash");
    /* 4 bits of hash left: long collision chains in both tables */
    ht__stackdb_reset_for_test(64ull << 20, 0xf00000000000000full);
    check_exact("hash weakened to 4+4 bits");
    /* no hash at all: every stack collides with every other */
    ht__stackdb_reset_for_test(64ull << 20, 0);
    check_exact("hash masked to 0");
}

/* A random tree of stacks: node k has a parent below k and an address
 * from a small alphabet (so the same address appears under many parents),
 * distinct among siblings, so every tree node is a distinct stack. */
typedef struct {
    int n;
    void **f;
} pool_t;

static pool_t *make_pool(int count, int alphabet, uint64_t seed)
{
    uint32_t *par = malloc((size_t)count * sizeof *par);
    uintptr_t *adr = malloc((size_t)count * sizeof *adr);
    int *depth = malloc((size_t)count * sizeof *depth);
    size_t setsz = 1;
    while (setsz < (size_t)count * 4)
        setsz <<= 1;
    uint64_t *seen = calloc(setsz, sizeof *seen);
    pool_t *pool = calloc((size_t)count, sizeof *pool);
    par[0] = 0;
    adr[0] = 0;
    depth[0] = 0;
    uint64_t s = seed;
    for (int k = 1; k < count; k++) {
        for (;;) {
            /* mostly recent parents: deep, shared prefixes */
            uint32_t p = (rnd(&s) & 3) ? (uint32_t)(k - 1 - (int)(rnd(&s) % (uint64_t)(k < 8 ? k : 8)))
                                       : (uint32_t)(rnd(&s) % (uint64_t)k);
            if (depth[p] >= MAXD - 1)
                p = 0;
            uintptr_t a = 0x400000 + (rnd(&s) % (uint64_t)alphabet) * 16;
            uint64_t key = ((uint64_t)p << 32 | (a >> 4)) + 1;
            size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (setsz - 1);
            while (seen[i] && seen[i] != key)
                i = (i + 1) & (setsz - 1);
            if (seen[i])
                continue;
            seen[i] = key;
            par[k] = p;
            adr[k] = a;
            depth[k] = depth[p] + 1;
            break;
        }
    }
    for (int k = 0; k < count; k++) {
        pool[k].n = depth[k];
        pool[k].f = malloc((size_t)(depth[k] + 1) * sizeof(void *));
        int i = 0;
        for (uint32_t x = (uint32_t)k; x != 0; x = par[x])
            pool[k].f[i++] = (void *)adr[x];
    }
    free(par);
    free(adr);
    free(depth);
    free(seen);
    return pool;
}

static void free_pool(pool_t *pool, int count)
{
    for (int k = 0; k < count; k++)
        free(pool[k].f);
    free(pool);
}

/* ---- the hot-stack cache with deep stacks ------------------------------ */

/* A cache slot keeps a deep stack's innermost frames and the node of the
 * rest: stacks with the same depth and the same innermost frames (and,
 * with the hash masked to 0, the same hash and slot) that differ further
 * out must keep their own ids, however the slot was last filled. */
static void test_hot_deep(void)
{
    ht__stackdb_reset_for_test(64ull << 20, 0);
    /* other stacks first, so the database is big enough to be given
     * cache slots */
    pool_t *pool = make_pool(3000, 64, 11);
    for (int k = 1; k < 3000; k++)
        intern(pool[k].f, pool[k].n);
    free_pool(pool, 3000);
    enum { D = 100, NS = 5 };
    static void *st[NS][D];
    int depth[NS] = { D, D, D, 62, 61 };
    for (int i = 0; i < D; i++)
        st[0][i] = (void *)(uintptr_t)(0x500000 + i * 16);
    for (int k = 1; k < NS; k++)
        memcpy(st[k], st[0], sizeof st[0]);
    st[1][70] = (void *)0x5ff000;       /* differs in the rest */
    st[2][D - 1] = (void *)0x5ff010;    /* in the outermost frame */
    st[3][61] = (void *)0x5ff020;       /* the first frame past the slot's */
    uint32_t id[NS];
    for (int k = 0; k < NS; k++)
        id[k] = intern(st[k], depth[k]);
    for (int a = 0; a < NS; a++)
        for (int b = 0; b < a; b++)
            CHECK(id[a] != id[b]);
    /* runs of one stack (so the slot is filled with it), then the others */
    int wrong = 0;
    uint64_t s = 3;
    for (int r = 0; r < 400; r++) {
        int k = (int)(rnd(&s) % NS), len = 1 + (int)(rnd(&s) % 40);
        for (int i = 0; i < len; i++)
            wrong += intern(st[k], depth[k]) != id[k];
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(info().drops, 0);
}

/* ---- the writer's enumeration ----------------------------------------- */

static void test_watermark(void)
{
    ht__stackdb_reset_for_test(0, ~0ull);
    enum { P = 3000 };
    pool_t *pool = make_pool(P, 50, 7);
    uint32_t *ids = calloc(P, sizeof *ids);
    ht_stacknode_t *written = calloc(200000, sizeof *written);
    int *times = calloc(200000, sizeof *times);
    uint32_t wm = 0;
    int order_bad = 0;
    for (int k = 1; k < P; k++) {
        ids[k] = intern(pool[k].f, pool[k].n);
        if (k % 97 == 0 || k == P - 1) {
            uint32_t c = ht__stackdb_node_count();
            for (uint32_t id = wm; id < c; id++) {
                CHECK_EQ(ht__stackdb_node(id, &written[id]), 0);
                times[id]++;
                if (id && written[id].parent >= id)
                    order_bad++;     /* a parent is always written before its child */
            }
            wm = c;
        }
    }
    uint32_t c = ht__stackdb_node_count();
    CHECK_EQ(wm, c);
    int once_bad = 0, rebuild_bad = 0;
    for (uint32_t id = 0; id < c; id++)
        once_bad += times[id] != 1;
    /* every stack rebuilt from the written nodes alone */
    for (int k = 1; k < P; k++) {
        int i = 0, ok = 1;
        for (uint32_t x = ids[k]; x != 0 && ok; x = written[x].parent, i++)
            ok = i < pool[k].n && written[x].addr == (uint64_t)(uintptr_t)pool[k].f[i];
        rebuild_bad += !(ok && i == pool[k].n);
    }
    CHECK_EQ(once_bad, 0);
    CHECK_EQ(order_bad, 0);
    CHECK_EQ(rebuild_bad, 0);
    /* tree nodes are distinct stacks sharing prefixes: exactly one db node
     * per pool node */
    CHECK_EQ(c, P);
    CHECK_EQ(info().stacks, P - 1);
    free(ids);
    free(written);
    free(times);
    free_pool(pool, P);
}

/* ---- budget ----------------------------------------------------------- */

static void test_budget(void)
{
    /* from the environment, as a process would get it */
    setenv("HEAPTRAIL_STACKDB_MAX", "96K", 1);
    ht__stackdb_reset_for_test(0, ~0ull);
    CHECK_EQ(info().budget, 96 << 10);
    enum { D = 20, N = 20000 };
    void *f[D];
    uint64_t s = 99;
    uint32_t *ids = calloc(N, sizeof *ids);
    int accepted = 0, overflowed = 0, first_overflow = -1;
    for (int k = 0; k < N; k++) {
        for (int i = 0; i < D; i++)
            f[i] = (void *)(uintptr_t)(rnd(&s) | 1);   /* no sharing: D new nodes each */
        ids[k] = intern(f, D);
        if (ids[k] == HT_STACK_ID_OVERFLOW) {
            overflowed++;
            if (first_overflow < 0)
                first_overflow = k;
        } else {
            accepted++;
        }
    }
    ht_stackdb_info_t i = info();
    fprintf(stderr, "budget 96K: %d stacks of %d frames accepted, %d dropped, %llu bytes used\n",
            accepted, D, overflowed, (unsigned long long)i.bytes_mapped);
    CHECK(first_overflow > 0);
    CHECK_EQ(i.drops, overflowed);
    CHECK_EQ(i.stacks, accepted);
    CHECK_EQ(i.nodes, 1 + (uint64_t)accepted * D);
    CHECK(i.bytes_mapped <= i.budget);
    /* known stacks keep their ids, and the program runs on */
    s = 99;
    int same_id = 0;
    for (int k = 0; k < N; k++) {
        for (int j = 0; j < D; j++)
            f[j] = (void *)(uintptr_t)(rnd(&s) | 1);
        uint32_t id = intern(f, D);
        same_id += (ids[k] != HT_STACK_ID_OVERFLOW) ? id == ids[k] : id == HT_STACK_ID_OVERFLOW;
    }
    CHECK_EQ(same_id, N);
    CHECK_EQ(info().drops, 2 * overflowed);
    CHECK_EQ(ht_stack_id(f, 0), HT_STACK_ID_EMPTY);
    unsetenv("HEAPTRAIL_STACKDB_MAX");

    /* a budget too small for even the first tables: everything overflows */
    ht__stackdb_reset_for_test(1000, ~0ull);
    CHECK_EQ(intern(f, D), HT_STACK_ID_OVERFLOW);
    CHECK_EQ(intern(f, 3), HT_STACK_ID_OVERFLOW);
    CHECK_EQ(info().drops, 2);
    CHECK(info().bytes_mapped <= 1000);
    free(ids);
}

/* ---- 16 threads ------------------------------------------------------- */

enum { NT = 16 };
static pool_t *g_pool;
static int g_pool_n, g_draws;
static uint32_t *g_seen[NT];
static int g_bad[NT];
static volatile int g_stop_writer;

static void *stress_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t s = 1000 + (uint64_t)t;
    uint32_t *seen = g_seen[t];
    for (int d = 0; d < g_draws; d++) {
        int k = 1 + (int)(rnd(&s) % (uint64_t)(g_pool_n - 1));
        uint32_t id = (t & 1) ? ht_stack_id(g_pool[k].f, g_pool[k].n)
                              : intern(g_pool[k].f, g_pool[k].n);
        if (id == HT_STACK_ID_OVERFLOW || id == HT_STACK_ID_EMPTY)
            g_bad[t]++;
        else if (seen[k] == 0)
            seen[k] = id;
        else if (seen[k] != id)
            g_bad[t]++;
    }
    return NULL;
}

/* The trace writer's view while threads insert: nodes below the count are
 * complete and never change. */
static void *writer_thread(void *arg)
{
    ht_stacknode_t *copy = calloc(4u << 20, sizeof *copy);
    uint32_t wm = 0;
    long bad = 0;
    for (;;) {
        int stop = g_stop_writer;
        uint32_t c = ht__stackdb_node_count();
        for (uint32_t id = wm; id < c && id < (4u << 20); id++) {
            if (ht__stackdb_node(id, &copy[id]) != 0 || (id && copy[id].parent >= id))
                bad++;
        }
        wm = c;
        if (stop)
            break;
        usleep(200);
    }
    for (uint32_t id = 1; id < wm && id < (4u << 20); id++) {
        ht_stacknode_t again;
        ht__stackdb_node(id, &again);
        bad += again.parent != copy[id].parent || again.addr != copy[id].addr;
    }
    free(copy);
    return (void *)bad;
}

static void run_stress(const char *what, int pool_n, int draws, uint64_t mask)
{
    ht__stackdb_reset_for_test(0, mask);
    g_pool_n = pool_n;
    g_draws = draws;
    g_pool = make_pool(pool_n, 400, 12345);
    g_stop_writer = 0;
    pthread_t w, th[NT];
    pthread_create(&w, NULL, writer_thread, NULL);
    for (int t = 0; t < NT; t++) {
        g_seen[t] = calloc((size_t)pool_n, sizeof(uint32_t));
        g_bad[t] = 0;
        pthread_create(&th[t], NULL, stress_thread, (void *)(intptr_t)t);
    }
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    g_stop_writer = 1;
    void *wbad;
    pthread_join(w, &wbad);
    int bad = 0, disagree = 0, seen_any = 0;
    for (int t = 0; t < NT; t++)
        bad += g_bad[t];
    /* every thread saw the same id for the same stack, and distinct pool
     * stacks have distinct ids */
    uint32_t *canon = calloc((size_t)pool_n, sizeof *canon);
    for (int k = 1; k < pool_n; k++) {
        for (int t = 0; t < NT; t++) {
            uint32_t id = g_seen[t][k];
            if (!id)
                continue;
            if (!canon[k])
                canon[k] = id;
            else if (canon[k] != id)
                disagree++;
        }
        seen_any += canon[k] != 0;
    }
    uint8_t *used = calloc(ht__stackdb_node_count(), 1);
    int dup = 0, frames_bad = 0;
    for (int k = 1; k < pool_n; k++) {
        if (!canon[k])
            continue;
        if (used[canon[k]]++)
            dup++;
        void *g[MAXD];
        int m = ht__stackdb_frames(canon[k], g, MAXD);
        if (m != g_pool[k].n || memcmp(g, g_pool[k].f, (size_t)m * sizeof(void *)) != 0)
            frames_bad++;
    }
    ht_stackdb_info_t i = info();
    fprintf(stderr, "%s: %d threads x %d interns, %d stacks seen, %llu nodes, %llu table rebuilds\n",
            what, NT, draws, seen_any, (unsigned long long)i.nodes,
            (unsigned long long)i.stack_table_rebuilds);
    CHECK_EQ(bad, 0);
    CHECK_EQ(disagree, 0);
    CHECK_EQ(dup, 0);
    CHECK_EQ(frames_bad, 0);
    CHECK_EQ((long)wbad, 0);
    CHECK_EQ(i.stacks, seen_any);
    CHECK_EQ(i.drops, 0);
    /* no more nodes than the pool's tree has */
    CHECK(i.nodes <= (uint64_t)pool_n);
    free(used);
    free(canon);
    for (int t = 0; t < NT; t++)
        free(g_seen[t]);
    free_pool(g_pool, pool_n);
}

/* ---- fork ------------------------------------------------------------- */

static volatile int g_fork_stop;

static void *fork_inserter(void *arg)
{
    uint64_t s = 777;
    void *f[30];
    while (!g_fork_stop) {
        for (int i = 0; i < 30; i++)
            f[i] = (void *)(uintptr_t)(0x1000 + (rnd(&s) % 64) * 8);
        intern(f, 5 + (int)(rnd(&s) % 25));
    }
    return NULL;
}

static void test_fork(void)
{
    ht__stackdb_reset_for_test(0, ~0ull);
    pthread_atfork(ht__stackdb_fork_prepare, ht__stackdb_fork_parent, ht__stackdb_fork_child);
    enum { K = 200 };
    pool_t *pool = make_pool(K, 30, 31);
    uint32_t ids[K];
    for (int k = 1; k < K; k++)
        ids[k] = intern(pool[k].f, pool[k].n);
    g_fork_stop = 0;
    pthread_t th;
    pthread_create(&th, NULL, fork_inserter, NULL);
    int children_ok = 0;
    for (int round = 0; round < 20; round++) {
        usleep(2000);
        pid_t pid = fork();
        if (pid == 0) {
            /* the child: a consistent tree, the known ids, new inserts work */
            int bad = 0;
            uint32_t c = ht__stackdb_node_count();
            for (uint32_t id = 1; id < c; id++) {
                ht_stacknode_t nd;
                bad += ht__stackdb_node(id, &nd) != 0 || nd.parent >= id;
            }
            for (int k = 1; k < K; k++)
                bad += intern(pool[k].f, pool[k].n) != ids[k];
            void *f[3] = { (void *)0x77, (void *)(uintptr_t)(0x88 + round), (void *)0x99 };
            uint32_t a = intern(f, 3);
            void *g[3];
            bad += a == HT_STACK_ID_OVERFLOW || ht__stackdb_frames(a, g, 3) != 3 ||
                   memcmp(f, g, sizeof f) != 0 || intern(f, 3) != a;
            _exit(bad ? 1 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        children_ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    g_fork_stop = 1;
    pthread_join(th, NULL);
    CHECK_EQ(children_ok, 20);
    for (int k = 1; k < K; k++)
        CHECK_EQ(intern(pool[k].f, pool[k].n), ids[k]);
    free_pool(pool, K);
}

/* ---- signal handlers that intern -------------------------------------- */

enum { SIGMAX = 20000 };
static pool_t *g_sig_pool;
static uint32_t g_sig_known_id;
static volatile int g_sig_n;
static uint32_t g_sig_known[SIGMAX], g_sig_new[SIGMAX];
static void *g_sig_new_f[SIGMAX][4];
static volatile int g_sig_stop;

static void on_sig(int sig)
{
    int k = g_sig_n;
    if (k >= SIGMAX)
        return;
    g_sig_known[k] = intern(g_sig_pool[5].f, g_sig_pool[5].n);
    void **f = g_sig_new_f[k];
    f[0] = (void *)(uintptr_t)(0x5000000 + k);
    f[1] = (void *)0x5100000;
    f[2] = (void *)(uintptr_t)(0x5200000 + (k & 7));
    f[3] = (void *)0x5300000;
    g_sig_new[k] = intern(f, 4);
    g_sig_n = k + 1;
}

static pthread_t g_sig_target;
static void *sig_sender(void *arg)
{
    while (!g_sig_stop) {
        pthread_kill(g_sig_target, SIGUSR2);
        usleep(20);
    }
    return NULL;
}

static void test_signals(void)
{
    ht__stackdb_reset_for_test(0, ~0ull);
    g_sig_pool = make_pool(10, 10, 5);
    g_sig_known_id = intern(g_sig_pool[5].f, g_sig_pool[5].n);
    signal(SIGUSR2, on_sig);
    g_sig_target = pthread_self();
    g_sig_stop = 0;
    pthread_t th;
    pthread_create(&th, NULL, sig_sender, NULL);
    /* insert deep new stacks for a while: most of the time is spent
     * inside the insert, where the handlers land */
    uint64_t s = 4242;
    void *f[100];
    for (int r = 0; r < 60000 && g_sig_n < SIGMAX; r++) {
        for (int i = 0; i < 100; i++)
            f[i] = (void *)(uintptr_t)(rnd(&s) | 1);
        intern(f, 100);
    }
    g_sig_stop = 1;
    pthread_join(th, NULL);
    signal(SIGUSR2, SIG_IGN);
    int n = g_sig_n, over = 0, known_bad = 0, new_bad = 0;
    for (int k = 0; k < n; k++) {
        if (g_sig_known[k] == HT_STACK_ID_OVERFLOW)
            over++;
        else if (g_sig_known[k] != g_sig_known_id)
            known_bad++;
        if (g_sig_new[k] == HT_STACK_ID_OVERFLOW) {
            over++;
        } else {
            void *g[4];
            if (ht__stackdb_frames(g_sig_new[k], g, 4) != 4 ||
                memcmp(g, g_sig_new_f[k], sizeof g) != 0 ||
                intern(g_sig_new_f[k], 4) != g_sig_new[k])
                new_bad++;
        }
    }
    ht_stackdb_info_t i = info();
    fprintf(stderr, "signals: %d handlers ran, %d interns dropped inside their own thread's insert\n",
            n, over);
    CHECK(n > 100);
    CHECK_EQ(known_bad, 0);
    CHECK_EQ(new_bad, 0);
    CHECK_EQ(i.drops, over);
    CHECK_EQ(i.drops_reentrant, over);
    free_pool(g_sig_pool, 10);
}

int main(void)
{
    set = calloc(4000, sizeof *set);
    test_basic();
    test_wide_starts();
    test_adversarial();
    test_hot_deep();
    test_watermark();
    test_budget();
    run_stress("stress", 20000, 150000, ~0ull);
    run_stress("stress, hash weakened to 8 bits", 3000, 20000, 0xff00000000000000ull);
    test_fork();
    test_signals();
    free(set);
    (void)rng_state;
    return check_done();
}
