/* symfix.c -- writes an analyzer fixture (see tests/analyze/fixwriter.h)
 * from known allocation sites: plain functions, a function inlined into
 * another, steady growth, churn, a plateau, a temporary allocation freed
 * before the end, and allocations from two plugins of which the first is
 * dlclose'd before the second is loaded. Run by the analyzer tests; its
 * line numbers are the truths the expected outputs hold. */
#define _GNU_SOURCE
#include <libgen.h>
#include "analyze/fixwriter.h"

static volatile int sink, three = 3;

__attribute__((noinline)) void leak_small(void)
{
    for (int i = 0; i < three; i++)
        fix_alloc(100);
    sink++;
}

__attribute__((noinline)) void leak_big(void)
{
    fix_alloc(4096);
    sink++;
}

static inline __attribute__((always_inline)) void inlined_helper(void)
{
    fix_alloc(64);
    sink++;
}

__attribute__((noinline)) void calls_inline(void)
{
    inlined_helper();
    sink++;
}

__attribute__((noinline)) void grow_steady(void)
{
    fix_alloc(1000);
    sink++;
}

__attribute__((noinline)) int churn(void)
{
    int id = fix_alloc(500);
    sink++;
    return id;
}

__attribute__((noinline)) void plateau(int i)
{
    if (i < 2)
        fix_alloc(700);
    sink++;
}

__attribute__((noinline)) int temporary(void)
{
    int id = fix_alloc(2000);
    sink++;
    return id;
}

typedef int (*plugin_cb)(uint64_t size, const char *fn, int line);
typedef int (*plugin_fn)(plugin_cb cb, uint64_t size);

static void use_plugin(const char *dir, const char *lib, const char *sym, uint64_t size, int snap)
{
    char path[600];
    snprintf(path, sizeof path, "%s/../analyze/%s", dir, lib);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "symfix: %s\n", dlerror());
        exit(1);
    }
    fix_modules();
    plugin_fn fn = (plugin_fn)dlsym(h, sym);
    fn(fix_alloc_at, size);
    if (snap)
        fix_snapshot(HT_SNAP_INTERVAL_);
    dlclose(h);
    fix_modules();
}

int main(int argc, char **argv)
{
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *dir = dirname(exe);
    fix_init(stdout);
    fix_modules();
    leak_small();
    leak_big();
    calls_inline();
    int tmp = temporary();
    int churned = -1;
    for (int i = 0; i < 5; i++) {
        grow_steady();
        if (churned >= 0) {
            fix_free(churned);
            churned = -1;
        } else {
            churned = churn();
        }
        plateau(i);
        fix_snapshot(HT_SNAP_INTERVAL_);
    }
    use_plugin(dir, "libplugin_a.so", "plugin_a_alloc", 200, 1);
    use_plugin(dir, "libplugin_b.so", "plugin_b_alloc", 300, 0);
    fix_free(tmp);
    fix_snapshot(HT_SNAP_EXIT_);
    fix_finish();
    return 0;
}
