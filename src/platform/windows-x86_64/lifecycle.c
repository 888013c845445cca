/* lifecycle.c -- process and thread set-up of the Windows backend: the TLS
 * slot holding each thread's rule cache, the cache's creation and release,
 * the DLL-unload notification that keeps cached rules from outliving their
 * code, and util.h's per-thread words (each one a TLS slot).
 *
 * A TLS callback (the PE loader calls it for the executable or the DLL
 * heaptrail is linked into, on process attach and on every thread's
 * detach) does the set-up early and frees a thread's cache when it exits;
 * ht__win_init() also runs lazily from the first capture. Caches stay off
 * if the DLL notification cannot be registered (no way to learn of
 * unloads), if the TLS slot is not one of the 64 the TEB holds inline, or
 * if HEAPTRAIL_NO_RULE_CACHE is set.
 *
 * The capture path reads the slot straight from the TEB (TlsSlots at gs:0x1480,
 * documented layout since NT 4): TlsGetValue would call into kernel32 and
 * clear the last error. Nothing here allocates from the process heap. */
#include "unwind.h"

volatile uint32_t ht__code_gen;

#define CACHE_OFF ((ht_tcache_t *)1) /* slot value: no cache on this thread */

static DWORD g_tls = TLS_OUT_OF_INDEXES;
static volatile LONG g_init;        /* 0 not started, 1 running, 2 done */
static void *g_dll_cookie;

/* LdrRegisterDllNotification and friends: exported by ntdll since Vista,
 * not declared by the SDK headers. */
typedef VOID(CALLBACK *ht_dll_notification_fn)(ULONG reason, const void *data, PVOID ctx);
typedef LONG(NTAPI *ht_ldr_register_fn)(ULONG flags, ht_dll_notification_fn fn, PVOID ctx,
                                         PVOID *cookie);
typedef LONG(NTAPI *ht_ldr_unregister_fn)(PVOID cookie);
#define LDR_DLL_NOTIFICATION_REASON_UNLOADED 2

static VOID CALLBACK on_dll_notification(ULONG reason, const void *data, PVOID ctx)
{
    (void)data;
    (void)ctx;
    if (reason == LDR_DLL_NOTIFICATION_REASON_UNLOADED) {
        /* never 0: 0 means "caches off" */
        uint32_t g = __atomic_add_fetch(&ht__code_gen, 1, __ATOMIC_SEQ_CST);
        if (g == 0)
            __atomic_add_fetch(&ht__code_gen, 1, __ATOMIC_SEQ_CST);
    }
}

/* A TLS slot whose value lives in the TEB itself (the first 64). */
static DWORD slot_alloc(void)
{
    DWORD idx = TlsAlloc();
    if (idx != TLS_OUT_OF_INDEXES && idx >= TLS_MINIMUM_AVAILABLE) {
        TlsFree(idx);               /* the value would not be in the TEB */
        idx = TLS_OUT_OF_INDEXES;
    }
    return idx;
}

/* ---- per-thread words (util.h) -------------------------------------------
 * Word i is the TEB's TlsSlots[g_word_slot[i]]: zero in a new thread,
 * there for the thread's life, read and written without a call. Slots are
 * taken on first use with a compare-and-swap, so no thread ever waits for
 * another. Should TlsAlloc fail (64 slots in use at once), the word falls
 * back to one shared by every thread. */
#define WORD_UNSET 0xfffffffeu
static DWORD g_word_slot[HT_THREAD_WORDS] = { WORD_UNSET, WORD_UNSET, WORD_UNSET, WORD_UNSET };
static uintptr_t g_word_shared[HT_THREAD_WORDS];

static HT_NOINLINE DWORD word_slot_init(unsigned i)
{
    DWORD idx = slot_alloc(), expect = WORD_UNSET;
    if (!__atomic_compare_exchange_n(&g_word_slot[i], &expect, idx, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        if (idx != TLS_OUT_OF_INDEXES)
            TlsFree(idx);
        idx = expect;
    }
    return idx;
}

uintptr_t *ht__thread_word(unsigned i)
{
    DWORD idx = ht_load_acquire(&g_word_slot[i]);
    if (ht_unlikely(idx == WORD_UNSET))
        idx = word_slot_init(i);
    if (ht_unlikely(idx == TLS_OUT_OF_INDEXES))
        return &g_word_shared[i];
    return (uintptr_t *)(ht__teb_word(HT_TEB_SELF) + HT_TEB_TLS_SLOTS + idx * sizeof(void *));
}

/* ---- set-up -------------------------------------------------------------- */

void ht__win_init(void)
{
    if (ht_load_acquire(&g_init) == 2)
        return;
    if (InterlockedCompareExchange(&g_init, 1, 0) != 0)
        return;                     /* done or being done by another thread */
    for (unsigned i = 0; i < HT_THREAD_WORDS; i++)
        if (ht_load_acquire(&g_word_slot[i]) == WORD_UNSET)
            word_slot_init(i);
    if (!ht__env("HEAPTRAIL_NO_RULE_CACHE")) {
        HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
        ht_ldr_register_fn reg =
            ntdll ? (ht_ldr_register_fn)(void *)GetProcAddress(ntdll, "LdrRegisterDllNotification")
                  : NULL;
        DWORD idx = slot_alloc();
        if (reg && idx != TLS_OUT_OF_INDEXES && reg(0, on_dll_notification, NULL, &g_dll_cookie) >= 0) {
            ht_store_release(&ht__code_gen, 1);
            ht_store_release(&g_tls, idx);
        } else if (idx != TLS_OUT_OF_INDEXES) {
            TlsFree(idx);
        }
    }
    ht_store_release(&g_init, 2);
}

static HT_ALWAYS_INLINE ht_tcache_t *slot_get(DWORD idx)
{
    return (ht_tcache_t *)ht__teb_word(HT_TEB_TLS_SLOTS + idx * sizeof(void *));
}

static HT_NOINLINE ht_tcache_t *cache_create(DWORD idx)
{
    /* a nested capture (a hook on VirtualAlloc) runs uncached meanwhile */
    TlsSetValue(idx, CACHE_OFF);
    ht_tcache_t *c = VirtualAlloc(NULL, sizeof(ht_tcache_t), MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    TlsSetValue(idx, c ? c : CACHE_OFF);
    return c;
}

ht_tcache_t *ht__thread_cache(void)
{
    DWORD idx = ht_load_acquire(&g_tls);
    if (ht_unlikely(idx == TLS_OUT_OF_INDEXES)) {
        if (ht_load_acquire(&g_init) == 2)
            return NULL;
        ht__win_init();
        idx = ht_load_acquire(&g_tls);
        if (idx == TLS_OUT_OF_INDEXES)
            return NULL;
    }
    ht_tcache_t *c = slot_get(idx);
    if (ht_unlikely(c <= CACHE_OFF)) {
        if (c == CACHE_OFF)
            return NULL;
        c = cache_create(idx);
        if (!c)
            return NULL;
    }
    uint32_t gen = ht_load_acquire(&ht__code_gen);
    if (ht_unlikely(c->gen != gen)) {
        /* a DLL was unloaded since this thread last walked: forget all */
        __builtin_memset(c->e, 0, sizeof c->e);
        __builtin_memset(c->noimage, 0, sizeof c->noimage);
        c->gen = gen;
    }
    return c;
}

/* Frees the calling thread's cache; later captures on it run uncached. */
static void cache_release(void)
{
    DWORD idx = ht_load_acquire(&g_tls);
    if (idx == TLS_OUT_OF_INDEXES)
        return;
    ht_tcache_t *c = slot_get(idx);
    TlsSetValue(idx, CACHE_OFF);
    if (c > CACHE_OFF)
        VirtualFree(c, 0, MEM_RELEASE);
}

static void NTAPI tls_callback(PVOID module, DWORD reason, PVOID reserved)
{
    (void)module;
    switch (reason) {
    case DLL_PROCESS_ATTACH:
        ht__win_init();
        break;
    case DLL_THREAD_DETACH:
        cache_release();
        break;
    case DLL_PROCESS_DETACH:
        cache_release();
        if (!reserved && g_dll_cookie) {
            /* FreeLibrary of heaptrail.dll: the callback is about to go */
            HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
            ht_ldr_unregister_fn unreg =
                ntdll ? (ht_ldr_unregister_fn)(void *)GetProcAddress(ntdll, "LdrUnregisterDllNotification")
                      : NULL;
            if (unreg)
                unreg(g_dll_cookie);
            g_dll_cookie = NULL;
        }
        if (!reserved) {
            /* and its TLS slots (TlsFree clears them in every thread; other
             * threads' caches are not reachable from here and stay mapped) */
            DWORD idx = ht_load_acquire(&g_tls);
            ht_store_release(&g_tls, TLS_OUT_OF_INDEXES);
            if (idx != TLS_OUT_OF_INDEXES)
                TlsFree(idx);
            for (unsigned i = 0; i < HT_THREAD_WORDS; i++) {
                DWORD w = g_word_slot[i];
                g_word_slot[i] = WORD_UNSET;
                if (w != WORD_UNSET && w != TLS_OUT_OF_INDEXES)
                    TlsFree(w);
            }
        }
        break;
    default:
        break;
    }
}

/* The loader calls every pointer between the CRT's __xl_a and __xl_z
 * (sections .CRT$XLA..XLZ, sorted by name); referencing _tls_used makes
 * the linker emit the TLS directory that lists them. */
extern const IMAGE_TLS_DIRECTORY _tls_used;
__attribute__((section(".CRT$XLH"), used)) const PIMAGE_TLS_CALLBACK ht__tls_callback = tls_callback;
__attribute__((used)) const void *const ht__tls_directory_ref = &_tls_used;
