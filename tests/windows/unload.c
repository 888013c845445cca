/* unload.c -- cached rules must not outlive their code: a DLL is loaded,
 * captured through (so its return addresses get rules in this thread's
 * cache), unloaded, and another DLL with the same layout but a different
 * frame size is loaded at the same base and captured through. Every
 * capture must equal the reference walk by RtlVirtualUnwind; a rule kept
 * across the unload would put the second DLL's return address at the
 * first one's offset and derail the walk. Then heaptrail.dll itself is
 * loaded, used and unloaded, and DLLs are loaded and unloaded after it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include "heaptrail.h"
#include "check.h"
#include "windows/refwalk.h"

#define MAXF 64

typedef struct cap_s {
    void *ours[MAXF], *ref[MAXF + 2];
    int n, m;
} cap_t;

__attribute__((noinline)) static void capture_pair(cap_t *c)
{
    c->n = ht_capture(1, MAXF, c->ours, NULL);
    c->m = ref_walk(c->ref, MAXF + 2);
}

static int cb(void *arg)
{
    capture_pair(arg);
    return 0;
}

static int same_as_reference(const char *what, const cap_t *c)
{
    int ok = c->n == c->m - 1 && memcmp(c->ours, c->ref + 1, (size_t)c->n * sizeof(void *)) == 0;
    if (!ok) {
        fprintf(stderr, "%s: differs from RtlVirtualUnwind\n", what);
        for (int i = 0; i < c->n || i < c->m - 1; i++)
            fprintf(stderr, "  #%-2d %p %p\n", i, i < c->n ? c->ours[i] : NULL,
                    i < c->m - 1 ? c->ref[i + 1] : NULL);
    }
    return ok;
}

int main(void)
{
    char dir[MAX_PATH], path[MAX_PATH];
    DWORD len = GetModuleFileNameA(NULL, dir, sizeof dir);
    CHECK(len > 0 && len < sizeof dir);
    *strrchr(dir, '\\') = 0;
    uintptr_t base[2] = { 0, 0 }, ra[2] = { 0, 0 };
    static cap_t caps[2][2];
    for (int v = 0; v < 2; v++) {
        snprintf(path, sizeof path, "%s\\unload_%c.dll", dir, v ? 'b' : 'a');
        HMODULE m = LoadLibraryA(path);
        CHECK(m != NULL);
        if (!m)
            return check_done();
        int (*call)(int (*)(void *), void *) =
            (int (*)(int (*)(void *), void *))(void *)GetProcAddress(m, "unload_call");
        CHECK(call != NULL);
        for (int k = 0; k < 2; k++) {       /* the second time from the cache */
            call(cb, &caps[v][k]);
            CHECK(same_as_reference(v ? "unload_b.dll" : "unload_a.dll", &caps[v][k]));
        }
        base[v] = (uintptr_t)m;
        ra[v] = (uintptr_t)caps[v][0].ours[1];
        CHECK(FreeLibrary(m));
    }
    /* the scenario is real only if b took a's place */
    CHECK(base[0] == base[1]);
    CHECK(ra[0] == ra[1] && ra[0] > base[0]);
    fprintf(stderr, "unload_a.dll and unload_b.dll at %p, return address %p in both\n",
            (void *)base[0], (void *)ra[0]);

    /* heaptrail.dll itself loaded, used and unloaded: its DLL notification
     * and TLS slots must go with it (a callback left registered would be
     * called, unmapped, at the next load or unload below) */
    snprintf(path, sizeof path, "%s\\heaptrail.dll", dir);
    HMODULE ht = LoadLibraryA(path);
    CHECK(ht != NULL);
    if (ht) {
        int (*cap)(int, int, void **, uint64_t *) =
            (int (*)(int, int, void **, uint64_t *))(void *)GetProcAddress(ht, "ht_capture");
        void *f[MAXF];
        CHECK(cap != NULL && cap(0, MAXF, f, NULL) >= 2);
        CHECK(FreeLibrary(ht));
        snprintf(path, sizeof path, "%s\\unload_a.dll", dir);
        HMODULE m = LoadLibraryA(path);
        CHECK(m != NULL && FreeLibrary(m));
        fprintf(stderr, "heaptrail.dll loaded, used and unloaded; later loads and unloads run\n");
    }
    return check_done();
}
