/* dlreuse.c -- cached unwind rules must not outlive their code.
 *
 * Two libraries with the same layout but a different frame size at one
 * call site (dlreuse_lib.c) are loaded in turn, each dlclose'd before the
 * next dlopen, so the loader maps them at the same addresses and the same
 * return address needs a different rule. Every capture through them must
 * be exactly: the return address into our callback, inner + 9 (after
 * `sub $imm32, %rsp; call *%rdi`), the fixed return address into
 * lib_entry, then main's frames -- learned in the first round, where
 * libunwind (fresh) agrees. libunwind is no oracle after that: it keeps
 * stale rules across dlclose even after unw_flush_cache, and returns
 * garbage frames. Meanwhile a second thread captures continuously from its
 * own code while the code generation churns, checked against libunwind. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "heaptrail.h"
#include "check.h"

#define MAXF 128
static int watcher_mismatches, watcher_compared, watcher_stopped;
static volatile int stop;
static void *g_frames[MAXF], *g_ref[MAXF + 1];
static int g_n, g_m;

__attribute__((noinline)) static void capture_here(void)
{
    g_n = ht_capture(1, MAXF, g_frames, NULL);
    g_m = unw_backtrace(g_ref, MAXF + 1);
}

__attribute__((noinline)) static void cb(void)
{
    capture_here();
    __asm__ volatile("" ::: "memory");  /* not a tail call: cb keeps a frame */
}

__attribute__((noinline)) static void spin_chain(int d)
{
    if (d > 0) {
        spin_chain(d - 1);
        __asm__ volatile("" ::: "memory");
        return;
    }
    void *ours[MAXF], *ref[MAXF];
    int n = ht_capture(0, MAXF, ours, NULL);
    int m = unw_backtrace(ref, MAXF);
    /* both start at the return address into this frame, from different
     * calls: compare from the caller on. Every dlclose makes the cached
     * rules of all code stale, so this thread computes its rules again,
     * and one it needs while the other thread's dlclose has run for over
     * 10 ms (a loaded machine) ends the capture with the documented
     * "unwinding stopped" frame: the frames before it must be libunwind's */
    int ok;
    if (n > 1 && ours[n - 1] == HT_FRAME_UNWIND_STOPPED) {
        __atomic_fetch_add(&watcher_stopped, 1, __ATOMIC_RELAXED);
        ok = n - 1 <= m && memcmp(ours + 1, ref + 1, (size_t)(n - 2) * sizeof(void *)) == 0;
    } else {
        ok = n == m && n > 1 && memcmp(ours + 1, ref + 1, (size_t)(n - 1) * sizeof(void *)) == 0;
    }
    __atomic_fetch_add(&watcher_compared, 1, __ATOMIC_RELAXED);
    if (!ok && __atomic_fetch_add(&watcher_mismatches, 1, __ATOMIC_RELAXED) < 3) {
        fprintf(stderr, "watcher mismatch: ht_capture %d frames, unw_backtrace %d\n", n, m);
        for (int i = 0; i < n || i < m; i++) {
            Dl_info di;
            void *a = i < n ? ours[i] : ref[i];
            const char *name = dladdr((char *)a - 1, &di) && di.dli_sname ? di.dli_sname : "?";
            fprintf(stderr, "  #%d %p %p  %s\n", i, i < n ? ours[i] : NULL, i < m ? ref[i] : NULL, name);
        }
    }
}

static void *churn_watcher(void *arg)
{
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
        spin_chain(5);
    return arg;
}

int main(int argc, char **argv)
{
    char path[2][4096];
    const char *dir = argc > 1 ? argv[1] : "build/tests";
    snprintf(path[0], sizeof path[0], "%s/libdlreuse1.so", dir);
    snprintf(path[1], sizeof path[1], "%s/libdlreuse2.so", dir);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, churn_watcher, NULL) == 0);

    void *expect[MAXF];
    int expect_n = 0, bad = 0, same_inner = 0;
    uintptr_t entry_off = 0, prev_inner = 0;
    for (int round = 0; round < 200; round++) {
        int v = round & 1;
        void *h = dlopen(path[v], RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            break;
        }
        void (*entry)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(h, "lib_entry");
        uintptr_t inner = (uintptr_t)dlsym(h, "inner");
        CHECK(entry && inner);
        same_inner += inner == prev_inner;
        prev_inner = inner;
        for (int k = 0; k < 5; k++) {
            entry(cb);          /* one call site: the outer frames repeat */
            if (round == 0 && k == 0) {
                /* fresh: libunwind agrees, and gives the layout to expect */
                CHECK(g_n == g_m - 1 && memcmp(g_frames, g_ref + 1, (size_t)g_n * sizeof(void *)) == 0);
                CHECK(g_n > 4 && (uintptr_t)g_frames[1] == inner + 9);
                entry_off = (uintptr_t)g_frames[2] - (uintptr_t)entry;
                CHECK(entry_off > 0 && entry_off < 64);
                expect_n = g_n;
                memcpy(expect, g_frames, sizeof expect);
                continue;
            }
            expect[1] = (void *)(inner + 9);
            expect[2] = (void *)((uintptr_t)entry + entry_off);
            if (g_n != expect_n || memcmp(g_frames, expect, (size_t)g_n * sizeof(void *)) != 0) {
                if (bad++ < 3) {
                    fprintf(stderr, "round %d: wrong frames (%d, expected %d)\n", round, g_n, expect_n);
                    for (int i = 0; i < g_n || i < expect_n; i++)
                        fprintf(stderr, "  #%d %p expected %p\n", i, i < g_n ? g_frames[i] : NULL,
                                i < expect_n ? expect[i] : NULL);
                }
            }
        }
        CHECK(dlclose(h) == 0);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    fprintf(stderr, "reloads reusing the same address for `inner`: %d of 199; wrong captures: %d; "
            "watcher thread: %d captures, %d mismatches with libunwind, %d stopped during a dlclose\n",
            same_inner, bad, watcher_compared, watcher_mismatches, watcher_stopped);
    CHECK_EQ(bad, 0);
    CHECK(same_inner > 100);      /* the test really exercised address reuse */
    CHECK_EQ(watcher_mismatches, 0);
    CHECK(watcher_compared > 100);
    return check_done();
}
