/* live.c -- the agent's live-allocation table (src/agent/live.c) against a
 * plain array holding the truth, through the change of layout a table
 * makes once it is large (blocks grouped by 256-byte region, narrow
 * entries) and under the allocation pattern that layout is for: blocks
 * packed 32 bytes apart, freed in address order, at random, and handed
 * out again. Twice: with blocks from a few (site, size) pairs, so large
 * tables hold narrow entries, then with a new pair nearly every block,
 * which fills the pair table and turns shards back to wide entries. Then
 * blocks the narrow form cannot hold, and the memory large tables are
 * mapped in (ht__map_table).
 *
 * Addresses are never dereferenced by the table, so they are made up. */
#include "agent/live.c"
#include "check.h"
#include <stdlib.h>

/* what live.c needs from the rest of the agent */
ht_agent_drops_t ht__drops;
HT_TLS int ht__t_solo;

#define DENSE  (1u << 20)       /* 32 bytes apart: 8 blocks a region */
#define SPARSE (1u << 16)       /* 4 KiB apart: one a region */
#define N      (DENSE + SPARSE)

static uint64_t size_of[N];
static uint32_t site_of[N];
static uint8_t alive[N];
static uint64_t nalive;

static uintptr_t addr_of(uint32_t i)
{
    if (i < DENSE)
        return 0x560000000000ull + (uintptr_t)i * 32;
    return 0x7f0000000010ull + (uintptr_t)(i - DENSE) * 4096;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static int insert_failures, remove_failures;
static int few_pairs;           /* 1: 40 sizes x 50 sites */

static void put_at(uint32_t i, uintptr_t addr);
static void put(uint32_t i) { put_at(i, addr_of(i)); }

static void put_at(uint32_t i, uintptr_t addr)
{
    uint64_t size = few_pairs ? 16 + next() % 40 * 8 : 1 + next() % 100000;
    uint32_t site = (uint32_t)(next() % (few_pairs ? 50 : 3000000));
    uint32_t osite = 0;
    uint64_t osize = 0;
    int rc = ht__live_insert(addr, size, site, &osite, &osize);
    if (alive[i]) {
        /* present already: the old entry comes back and is replaced */
        if (rc != 1 || osite != site_of[i] || osize != size_of[i])
            insert_failures++;
    } else {
        if (rc != 0)
            insert_failures++;
        alive[i] = 1;
        nalive++;
    }
    size_of[i] = size;
    site_of[i] = site;
}

static void take(uint32_t i)
{
    uint64_t size = 0;
    uint32_t site = 0;
    int rc = ht__live_remove(addr_of(i), &size, &site);
    if (alive[i]) {
        if (rc != 1 || size != size_of[i] || site != site_of[i])
            remove_failures++;
        alive[i] = 0;
        nalive--;
    } else if (rc != 0) {
        remove_failures++;
    }
}

static int cmp_addr(const void *a, const void *b)
{
    uint64_t x = ((const ht_live_block_t *)a)->addr, y = ((const ht_live_block_t *)b)->addr;
    return (x > y) - (x < y);
}

/* the whole table equals the truth: count, and every entry once */
static void check_whole(const char *when)
{
    CHECK_EQ(ht__live_count(), nalive);
    ht_live_block_t *b = malloc((nalive + 1) * sizeof *b);
    size_t n = ht__live_copy(b, nalive + 1);
    CHECK_EQ(n, nalive);
    qsort(b, n, sizeof *b, cmp_addr);
    size_t k = 0, wrong = 0;
    for (uint32_t i = 0; i < N && k <= n; i++) {
        if (!alive[i])
            continue;
        /* addr_of is increasing in i: dense below sparse */
        if (k == n || b[k].addr != addr_of(i) || b[k].size != size_of[i] || b[k].site != site_of[i])
            wrong++;
        k++;
    }
    if (wrong)
        fprintf(stderr, "%s: %zu entries differ\n", when, wrong);
    CHECK_EQ(wrong, 0);
    free(b);
}

static uint64_t max_mask(void)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < NSHARDS; i++)
        if (g_shards[i].mask > m)
            m = g_shards[i].mask;
    return m;
}

static unsigned shards_where(int narrow, int wide_only)
{
    unsigned n = 0;
    for (unsigned i = 0; i < NSHARDS; i++)
        n += is_large(g_shards[i].mask) && g_shards[i].narrow == narrow &&
             g_shards[i].wide_only == wide_only;
    return n;
}

static void scenario(void)
{
    /* grow from empty to large, in address order as an allocator's top
     * chunk hands blocks out, with the sparse blocks interleaved */
    for (uint32_t i = 0; i < DENSE; i++) {
        put(i);
        if (i % 16 == 0)
            put(DENSE + i / 16);
    }
    CHECK(max_mask() >= LOCAL_MIN - 1);     /* the region layout is in use */
    check_whole("filled");

    /* free a stretch in address order (a list going away), then every
     * third block at random, then put some back (addresses reused) and
     * overwrite others in place */
    for (uint32_t i = 1000; i < 300000; i++)
        take(i);
    for (uint32_t k = 0; k < N / 3; k++)
        take((uint32_t)(next() % N));
    check_whole("freed");
    for (uint32_t k = 0; k < N / 2; k++)
        put((uint32_t)(next() % N));
    check_whole("reused");

    /* churn: random inserts and removes; removal's backward shift must
     * keep every block findable under both layouts */
    for (uint32_t k = 0; k < 2 * N; k++) {
        uint32_t i = (uint32_t)(next() % N);
        if (next() & 1)
            take(i);
        else
            put(i);
    }
    check_whole("churned");

    /* empty it: nothing left, nothing found */
    for (uint32_t i = 0; i < N; i++)
        take(i);
    CHECK_EQ(nalive, 0);
    check_whole("emptied");
    CHECK_EQ(insert_failures, 0);
    CHECK_EQ(remove_failures, 0);
}

int main(void)
{
    /* a few pairs: every large table narrow, half a wide one's memory */
    few_pairs = 1;
    scenario();
    CHECK_EQ(shards_where(1, 0), NSHARDS);
    CHECK(g_npairs > 0 && g_npairs <= 40 * 50);
    CHECK(!g_pairs_full);
    uint64_t slots = 0;
    for (unsigned i = 0; i < NSHARDS; i++)
        slots += g_shards[i].mask + 1;
    CHECK(ht__live_bytes_mapped() < slots * 8 + (4u << 20));

    /* blocks the narrow form cannot hold widen their shard and stay
     * exact: an address not 8-aligned, one above 2^47 */
    for (uint32_t i = 0; i < DENSE; i += 2)
        put(i);
    uintptr_t odd[2] = {addr_of(1) + 4, 0xa00000000000ull};
    for (int k = 0; k < 2; k++) {
        uint32_t os = 0;
        uint64_t oz = 0, z = 0;
        uint32_t site = 0;
        CHECK(narrow_fits(odd[k]) == 0);
        CHECK(shard_of(odd[k])->narrow);
        CHECK_EQ(ht__live_insert(odd[k], 77 + k, 123456 + k, &os, &oz), 0);
        CHECK(!shard_of(odd[k])->narrow && shard_of(odd[k])->wide_only);
        CHECK_EQ(ht__live_remove(odd[k], &z, &site), 1);
        CHECK(z == 77u + k && site == 123456u + k);
    }
    CHECK(shards_where(0, 1) >= 1 && shards_where(0, 1) <= 2);
    check_whole("odd addresses");
    for (uint32_t i = 0; i < DENSE; i += 2)
        take(i);
    check_whole("odd emptied");

    /* a new pair nearly every block: the pair table fills (its numbers
     * are never taken back), and shards that meet a block it refuses go
     * wide; every block stays exact throughout */
    few_pairs = 0;
    scenario();
    CHECK(g_pairs_full);
    CHECK_EQ(g_npairs, g_pairs_cap);
    CHECK(shards_where(0, 1) > 2);

    /* a large table's memory: 2 MiB-aligned, zeroed, writable to its
     * end, one of heaptrail's own mappings (the leak check skips those),
     * and released whole; and a small one */
    for (size_t size = 2u << 20; size <= (6u << 20); size += 2u << 20) {
        char *m = ht__map_table(size);
        CHECK(m != NULL);
        if (!m)
            break;
        CHECK_EQ((uintptr_t)m & ((2u << 20) - 1), 0);
        size_t nonzero = 0;
        for (size_t i = 0; i < size; i += 4096)
            nonzero += m[i] != 0;
        CHECK_EQ(nonzero, 0);
        m[0] = 1, m[size - 1] = 2;
        static uintptr_t own[4096][2];
        int n = ht__own_mappings(own, 4096), found = 0;
        CHECK(n > 0);
        for (int i = 0; i < n; i++)
            found += own[i][0] == (uintptr_t)m && own[i][1] == (uintptr_t)m + size;
        CHECK_EQ(found, 1);
        ht__unmap(m, size);
    }
    char *small = ht__map_table(64u << 10);
    CHECK(small != NULL && small[(64u << 10) - 1] == 0);
    if (small)
        ht__unmap(small, 64u << 10);

    /* refused: addresses and sizes beyond 48 bits */
    uint32_t os;
    uint64_t oz;
    CHECK_EQ(ht__live_insert(1ull << 48, 8, 1, &os, &oz), -1);
    CHECK_EQ(ht__live_insert(0x1000, 1ull << 48, 1, &os, &oz), -1);
    CHECK_EQ(ht__live_count(), 0);
    return check_done();
}
