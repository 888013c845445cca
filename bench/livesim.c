/* livesim.c -- replays a heap-call log (bench/stackrec.c, HT_STACKREC_ADDRS)
 * against models of the agent's live table and counts what each costs:
 * slots read, distinct cache lines touched, and misses of a simulated
 * cache and TLB.
 * The model is one linear-probing table with backward-shift deletion,
 * doubled at 5/8 load (the agent has 64 shards of it: the same lines and
 * probes overall), and one of two layouts for where a block's probe starts:
 *
 *   block        its own hash: mix(address >> 4)
 *   region R G   the hash of its 2^R-byte region, then one slot per 2^G
 *                bytes of it: mix(address >> R) << (R - G) | address bits
 *                G..R-1 (the agent's large tables: R = 8, G = 5)
 *
 * Also prints how local the calls are: the share of calls within 256
 * bytes of one of the previous eight.
 *
 * Cache: 8 MiB, 16 ways, 64-byte lines, LRU; TLB: 1,536 entries, 12 ways,
 * 4 KiB pages. Only the table's own accesses are modelled: the program's
 * would evict more, so misses are a lower bound for every layout alike.
 *
 *   HT_STACKREC_ADDRS=/tmp/py.log PYTHONMALLOC=malloc \
 *       LD_PRELOAD=build/bench/stackrec.so /usr/bin/python3 ...
 *   build/bench/livesim /tmp/py.log block
 *   build/bench/livesim /tmp/py.log region 8 5 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t *g_tab, g_mask = 15, g_used;
static int g_r, g_g;            /* 0, 0: per-block layout */

static uint64_t mix(uint64_t x)
{
    uint64_t h = x * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

static uint64_t home(uint64_t a, uint64_t mask)
{
    if (!g_r)
        return mix(a >> 4) & mask;
    int k = g_r - g_g;
    return (mix(a >> g_r) << k | ((a >> g_g) & ((1ull << k) - 1))) & mask;
}

typedef struct {
    uint64_t *tag, *stamp, clock, misses;
    unsigned sets, ways, shift;
} cache_t;

static void cache_init(cache_t *c, uint64_t bytes, unsigned ways, unsigned shift)
{
    c->ways = ways;
    c->shift = shift;
    c->sets = (unsigned)((bytes >> shift) / ways);
    c->tag = calloc((size_t)c->sets * ways, 8);
    c->stamp = calloc((size_t)c->sets * ways, 8);
    if (!c->tag || !c->stamp)
        exit(1);
}

static void cache_access(cache_t *c, uint64_t addr)
{
    uint64_t unit = addr >> c->shift, set = mix(unit) % c->sets;
    uint64_t *tag = c->tag + set * c->ways, *stamp = c->stamp + set * c->ways;
    unsigned lru = 0;
    c->clock++;
    for (unsigned i = 0; i < c->ways; i++) {
        if (tag[i] == unit + 1) {
            stamp[i] = c->clock;
            return;
        }
        if (stamp[i] < stamp[lru])
            lru = i;
    }
    c->misses++;
    tag[lru] = unit + 1;
    stamp[lru] = c->clock;
}

static cache_t g_cache, g_tlb;
static uint64_t g_probes, g_lines, g_last_line;

/* slot i is read: a new line is one access of the cache and the TLB */
static void touch(uint64_t i)
{
    uint64_t a = (uint64_t)(uintptr_t)&g_tab[i], line = a >> 6;
    g_probes++;
    if (line == g_last_line)
        return;
    g_last_line = line;
    g_lines++;
    cache_access(&g_cache, a);
    cache_access(&g_tlb, a);
}

static void grow(void)
{
    uint64_t cap = (g_mask + 1) * 2, *t = calloc(cap, 8);
    if (!t)
        exit(1);
    for (uint64_t i = 0; i <= g_mask; i++) {
        if (!g_tab[i])
            continue;
        uint64_t j = home(g_tab[i], cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = t;
    g_mask = cap - 1;
}

static void insert(uint64_t a)
{
    if ((g_used + 1) * 8 > (g_mask + 1) * 5)
        grow();
    uint64_t i = home(a, g_mask);
    g_last_line = 0;
    for (;; i = (i + 1) & g_mask) {
        touch(i);
        if (!g_tab[i]) {
            g_used++;
            break;
        }
        if (g_tab[i] == a)
            break;
    }
    g_tab[i] = a;
}

static void erase(uint64_t a)
{
    uint64_t i = home(a, g_mask);
    g_last_line = 0;
    for (;; i = (i + 1) & g_mask) {
        touch(i);
        if (!g_tab[i])
            return;
        if (g_tab[i] == a)
            break;
    }
    uint64_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & g_mask;
        touch(j);
        uint64_t k = g_tab[j];
        if (!k)
            break;
        uint64_t h = home(k, g_mask);
        int stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!stays) {
            g_tab[hole] = k;
            hole = j;
        }
    }
    g_tab[hole] = 0;
    g_used--;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "block") && (strcmp(argv[2], "region") || argc < 5))) {
        fprintf(stderr, "usage: livesim LOG block | livesim LOG region R G\n");
        return 2;
    }
    if (!strcmp(argv[2], "region")) {
        g_r = atoi(argv[3]);
        g_g = atoi(argv[4]);
        if (g_g < 4 || g_r < g_g || g_r > 20) {
            fprintf(stderr, "livesim: want 4 <= G <= R <= 20\n");
            return 2;
        }
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    g_tab = calloc(g_mask + 1, 8);
    cache_init(&g_cache, 8u << 20, 16, 6);
    cache_init(&g_tlb, 1536ull << 12, 12, 12);
    uint64_t w, calls = 0, peak = 0, near = 0, recent[8] = { 0 };
    while (fread(&w, sizeof w, 1, f) == 1) {
        uint64_t a = w >> 1;
        for (int i = 0; i < 8; i++) {
            if ((a > recent[i] ? a - recent[i] : recent[i] - a) < 256) {
                near++;
                break;
            }
        }
        memmove(recent + 1, recent, 7 * sizeof *recent);
        recent[0] = a;
        if (w & 1)
            insert(w >> 1);
        else
            erase(w >> 1);
        calls++;
        if (g_used > peak)
            peak = g_used;
    }
    fclose(f);
    if (!calls)
        return 1;
    double c = (double)calls;
    printf("%s: %lu calls, %lu live at the peak, %.0f%% near one of the previous eight; "
           "a call: %.2f slots, %.3f lines, %.3f cache misses, %.3f TLB misses\n",
           argv[1], (unsigned long)calls, (unsigned long)peak, 100.0 * near / c, g_probes / c,
           g_lines / c, g_cache.misses / c, g_tlb.misses / c);
    return 0;
}
