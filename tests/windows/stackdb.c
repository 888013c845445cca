/* stackdb.c -- the stack database (src/core/stackdb.c) on Windows, under
 * Wine: the same code as on Linux over the Windows primitives
 * (VirtualAlloc reservations committed as they are used, per-thread words
 * in TEB TLS slots).
 *   - exact ids on adversarial sets (all orders of 6 frames, equal address
 *     sums, prefixes and suffixes, zero and repeated frames), with the
 *     full hash and with the hash cut to 2 bits (every lookup collides),
 *     and every id's frames read back;
 *   - the budget from HEAPTRAIL_STACKDB_MAX: drops counted, bytes_mapped
 *     within the budget, and in the address space the database's
 *     reservations add up to bytes_reserved while exactly bytes_mapped of
 *     them is committed (a reservation committed up front would charge
 *     gigabytes against the commit limit);
 *   - 8 threads inserting new stacks at once, then interning a shared pool:
 *     one id per stack, and no drop (a re-entry flag shared between threads
 *     would make other threads' inserts look re-entrant);
 *   - the re-entry path: with this thread's flag set, known stacks are
 *     found and new ones dropped and counted;
 *   - stacks captured by ht_capture, interned and read back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "core/stackdb.h"
#include "check.h"

#define MAXD 128

typedef struct {
    int n;
    void *f[MAXD];
} stk_t;

static stk_t *set;
static int nset;

static void add(void *const *f, int n)
{
    set[nset].n = n;
    memcpy(set[nset].f, f, (size_t)n * sizeof(void *));
    nset++;
}

static uint32_t intern(void *const *f, int n) { return ht__stackdb_intern(f, n, ht_stack_hash(f, n)); }

static ht_stackdb_info_t info(void)
{
    ht_stackdb_info_t i;
    ht__stackdb_info(&i);
    return i;
}

static void build_adversarial(void)
{
    void *f[MAXD];
    nset = 0;
    /* every order of 6 frames */
    uintptr_t base[6] = { 0x140001000, 0x140001234, 0x7ff000001000, 0x6f401000, 0x140003fff, 0x1 };
    int idx[6] = { 0, 1, 2, 3, 4, 5 };
    for (;;) {
        for (int i = 0; i < 6; i++)
            f[i] = (void *)base[idx[i]];
        add(f, 6);
        int i = 4;
        while (i >= 0 && idx[i] > idx[i + 1])
            i--;
        if (i < 0)
            break;
        int j = 5;
        while (idx[j] < idx[i])
            j--;
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        for (int a = i + 1, b = 5; a < b; a++, b--) {
            t = idx[a];
            idx[a] = idx[b];
            idx[b] = t;
        }
    }
    /* equal sums */
    for (int d = 0; d < 150; d++) {
        f[0] = (void *)(uintptr_t)(0x140500000 + d * 16);
        f[1] = (void *)(uintptr_t)(0x140600000 - d * 16);
        f[2] = (void *)0x140700000;
        add(f, 2);
        add(f, 3);
    }
    /* the innermost and the outermost n frames of one stack */
    for (int i = 0; i < 40; i++)
        f[i] = (void *)(uintptr_t)(0x140010000 + i * 8);
    for (int n = 1; n <= 40; n++) {
        add(f + 40 - n, n);
        add(f, n);
    }
    /* zeros, repeats, deep */
    memset(f, 0, sizeof f);
    for (int n = 1; n <= 8; n++)
        add(f, n);
    for (int i = 0; i < MAXD; i++)
        f[i] = (void *)0x140401000;
    for (int n = 1; n <= MAXD; n += 9)
        add(f, n);
}

/* Interns the set twice: equal stacks equal ids, different stacks
 * different ids, frames read back. */
static void check_exact(const char *what)
{
    uint32_t *ids = malloc((size_t)nset * sizeof *ids);
    int again_bad = 0, readback_bad = 0, dup = 0;
    for (int i = 0; i < nset; i++)
        ids[i] = intern(set[i].f, set[i].n);
    for (int i = 0; i < nset; i++) {
        again_bad += intern(set[i].f, set[i].n) != ids[i];
        void *g[MAXD];
        int k = ht_stack_frames(ids[i], g, MAXD);
        readback_bad += k != set[i].n || memcmp(g, set[i].f, (size_t)k * sizeof(void *)) != 0;
    }
    /* ids equal exactly when the stacks are equal */
    for (int i = 0; i < nset; i++)
        for (int j = i + 1; j < nset; j++) {
            int eq = set[i].n == set[j].n &&
                     memcmp(set[i].f, set[j].f, (size_t)set[i].n * sizeof(void *)) == 0;
            dup += eq != (ids[i] == ids[j]);
        }
    fprintf(stderr, "%s: %d stacks, %d wrong ids, %d re-interned differently, %d bad read-backs\n",
            what, nset, dup, again_bad, readback_bad);
    CHECK_EQ(dup, 0);
    CHECK_EQ(again_bad, 0);
    CHECK_EQ(readback_bad, 0);
    CHECK_EQ(info().drops, 0);
    free(ids);
}

/* ---- the address space ---------------------------------------------------- */

#define MAXREG 4096
static uintptr_t before[MAXREG];
static int nbefore;

static int known(uintptr_t ab)
{
    for (int i = 0; i < nbefore; i++)
        if (before[i] == ab)
            return 1;
    return 0;
}

/* Allocation bases of the address space now (into before[]), or the
 * reserved and committed bytes of allocations not in before[]. */
static void address_space(int snapshot, uint64_t *reserved, uint64_t *committed)
{
    MEMORY_BASIC_INFORMATION m;
    uintptr_t a = 0;
    if (snapshot)
        nbefore = 0;
    else
        *reserved = *committed = 0;
    while (VirtualQuery((void *)a, &m, sizeof m) == sizeof m) {
        if (m.State != MEM_FREE) {
            uintptr_t ab = (uintptr_t)m.AllocationBase;
            if (snapshot) {
                if ((nbefore == 0 || before[nbefore - 1] != ab) && nbefore < MAXREG)
                    before[nbefore++] = ab;
            } else if (!known(ab)) {
                *reserved += m.RegionSize;
                if (m.State == MEM_COMMIT)
                    *committed += m.RegionSize;
            }
        }
        uintptr_t next = (uintptr_t)m.BaseAddress + m.RegionSize;
        if (next <= a)
            break;
        a = next;
    }
}

/* ---- threads ------------------------------------------------------------- */

enum { NT = 8, POOL = 3000 };
static stk_t *pool;
static uint32_t ids_seen[NT][POOL];
static uintptr_t *words_seen[NT];
static uintptr_t word_initial[NT];

static volatile LONG ready;
static uint32_t fresh_bad[NT];

static DWORD WINAPI thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    words_seen[t] = ht__thread_word(HT_TW_STACKDB_INSERT);
    word_initial[t] = *words_seen[t];
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
    /* all at once, each inserting stacks nobody else has: inserts overlap */
    InterlockedIncrement(&ready);
    while (ready < NT)
        ;
    for (int r = 0; r < 4000; r++) {
        void *f[12];
        for (int j = 0; j < 12; j++)
            f[j] = (void *)(uintptr_t)(0x150000000 + ((uint64_t)t << 24) + (uint64_t)r * 64 + j);
        uint32_t id = intern(f, 12);
        void *g[12];
        fresh_bad[t] += id == HT_STACK_ID_OVERFLOW || ht_stack_frames(id, g, 12) != 12 ||
                        memcmp(f, g, sizeof f) != 0;
    }
    for (int r = 0; r < 3 * POOL; r++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int k = (int)(s % POOL);
        uint32_t id = intern(pool[k].f, pool[k].n);
        if (ids_seen[t][k] && ids_seen[t][k] != id)
            ids_seen[t][k] = 0xfffffffe;        /* changed: wrong */
        else
            ids_seen[t][k] = id;
    }
    return 0;
}

/* ---- captured stacks ------------------------------------------------------ */

static uint32_t cap_id[3];
static void *cap_f[3][64];
static int cap_n[3];

__attribute__((noinline)) static void capture_into(int k)
{
    cap_n[k] = ht_capture(0, 64, cap_f[k], NULL);
    cap_id[k] = ht_stack_id(cap_f[k], cap_n[k]);
}
__attribute__((noinline)) static void path_a(int k) { capture_into(k); __asm__ volatile(""); }
__attribute__((noinline)) static void path_b(int k) { capture_into(k); __asm__ volatile(""); }

int main(void)
{
    set = malloc(2000 * sizeof *set);
    pool = malloc(POOL * sizeof *pool);

    /* ---- exactness, full hash and 2-bit hash ---- */
    build_adversarial();
    ht__stackdb_reset_for_test(64 << 20, ~0ull);
    check_exact("full hash");
    ht__stackdb_reset_for_test(64 << 20, 3);
    check_exact("2-bit hash");

    /* ---- budget from the environment, and what is committed ---- */
    CHECK(_putenv_s("HEAPTRAIL_STACKDB_MAX", "256K") == 0);
    ht__stackdb_reset_for_test(0, ~0ull);
    fprintf(stderr, "address space snapshot\n");
    address_space(1, NULL, NULL);
    enum { D = 20, N = 20000 };
    void *f[D];
    uint64_t s = 99;
    int accepted = 0, dropped = 0;
    for (int k = 0; k < N; k++) {
        for (int i = 0; i < D; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f[i] = (void *)(uintptr_t)(s | 1);
        }
        if (intern(f, D) == HT_STACK_ID_OVERFLOW)
            dropped++;
        else
            accepted++;
    }
    uint64_t reserved, committed;
    address_space(0, &reserved, &committed);
    ht_stackdb_info_t i = info();
    fprintf(stderr, "budget %llu: %d stacks accepted, %d dropped; bytes_mapped %llu, "
            "reserved %llu; in the address space: %llu reserved, %llu committed\n",
            (unsigned long long)i.budget, accepted, dropped, (unsigned long long)i.bytes_mapped,
            (unsigned long long)i.bytes_reserved, (unsigned long long)reserved,
            (unsigned long long)committed);
    CHECK_EQ(i.budget, 256 << 10);
    CHECK(accepted > 0 && dropped > 0);
    CHECK_EQ(i.drops, dropped);
    CHECK_EQ(i.stacks, accepted);
    CHECK(i.bytes_mapped <= i.budget);
    CHECK_EQ(reserved, i.bytes_reserved);
    CHECK_EQ(committed, i.bytes_mapped);
    CHECK(reserved > 4 * committed);
    CHECK(_putenv_s("HEAPTRAIL_STACKDB_MAX", "") == 0);

    /* ---- threads ---- */
    ht__stackdb_reset_for_test(64 << 20, ~0ull);
    s = 7;
    for (int k = 0; k < POOL; k++) {
        /* prefixes shared between stacks: 50 roots, random tails */
        int n = 3 + (int)(k % 30);
        pool[k].n = n;
        for (int j = 0; j < n; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            uintptr_t v = j >= n - 2 ? 0x140001000 + (uintptr_t)(k % 50) * 16 + (uintptr_t)j
                                     : 0x140100000 + (uintptr_t)(s & 0xffff0);
            pool[k].f[j] = (void *)v;
        }
    }
    HANDLE th[NT];
    for (int t = 0; t < NT; t++)
        th[t] = CreateThread(NULL, 0, thread_main, (void *)(intptr_t)t, 0, NULL);
    WaitForMultipleObjects(NT, th, TRUE, INFINITE);
    int inconsistent = 0, distinct_words = 1;
    for (int k = 0; k < POOL; k++) {
        uint32_t want = intern(pool[k].f, pool[k].n);
        for (int t = 0; t < NT; t++)
            inconsistent += ids_seen[t][k] && ids_seen[t][k] != want;
    }
    for (int t = 0; t < NT; t++) {
        CloseHandle(th[t]);
        CHECK_EQ(fresh_bad[t], 0);
        CHECK_EQ(word_initial[t], 0);
        for (int u = 0; u < t; u++)
            distinct_words &= words_seen[t] != words_seen[u];
    }
    i = info();
    fprintf(stderr, "%d threads: %d inconsistent ids, %llu drops (%llu re-entrant)\n", NT,
            inconsistent, (unsigned long long)i.drops, (unsigned long long)i.drops_reentrant);
    CHECK_EQ(inconsistent, 0);
    CHECK_EQ(i.drops, 0);
    CHECK(distinct_words);

    /* ---- the re-entry path ---- */
    uintptr_t *w = ht__thread_word(HT_TW_STACKDB_INSERT);
    uint32_t known_id = intern(pool[0].f, pool[0].n);
    void *fresh[3] = { (void *)0x140777000, (void *)0x140777010, (void *)0x140777020 };
    *w = 1;     /* as if a handler interrupted this thread's insert */
    uint32_t a = intern(pool[0].f, pool[0].n), b = intern(fresh, 3);
    *w = 0;
    i = info();
    CHECK_EQ(a, known_id);
    CHECK_EQ(b, HT_STACK_ID_OVERFLOW);
    CHECK_EQ(i.drops_reentrant, 1);
    CHECK(intern(fresh, 3) != HT_STACK_ID_OVERFLOW);

    /* ---- captured stacks ---- */
    path_a(0);
    path_b(1);
    path_a(2);
    CHECK(cap_id[0] != HT_STACK_ID_OVERFLOW && cap_id[1] != HT_STACK_ID_OVERFLOW);
    CHECK(cap_id[0] != cap_id[1]);
    CHECK(cap_n[0] == cap_n[2] && memcmp(cap_f[0], cap_f[2], (size_t)cap_n[0] * sizeof(void *)) == 0
              ? cap_id[0] == cap_id[2] : cap_id[0] != cap_id[2]);
    void *g[64];
    int k = ht_stack_frames(cap_id[1], g, 64);
    CHECK(k == cap_n[1] && memcmp(g, cap_f[1], (size_t)k * sizeof(void *)) == 0);
    ht_stackdb_stats_t st;
    ht_stackdb_stats(&st);
    CHECK(st.stacks >= 2 && st.bytes_mapped <= st.budget);
    return check_done();
}
