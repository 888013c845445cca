/* sys.c -- the platform primitives of src/core/util.h for Windows: memory
 * straight from VirtualAlloc (never the process heap, which a tracker may
 * be hooking), spin locks that yield with SwitchToThread, the thread id.
 * Safe inside heap hooks and vectored exception handlers. */
#include "../../core/util.h"
#include <windows.h>

void *ht__map(size_t size)
{
    return VirtualAlloc(NULL, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

/* Address space only: committing a reservation sized for the largest
 * budget would charge all of it against the commit limit. */
void *ht__reserve(size_t size)
{
    return VirtualAlloc(NULL, size, MEM_RESERVE, PAGE_READWRITE);
}

/* Reservations take no commit charge; a job object's memory limits
 * count committed memory only. */
uint64_t ht__reserve_allowance(void) { return UINT64_MAX; }

int ht__commit(void *p, size_t size)
{
    return VirtualAlloc(p, size, MEM_COMMIT, PAGE_READWRITE) ? 0 : -1;
}

void ht__unmap(void *p, size_t size)
{
    MEMORY_BASIC_INFORMATION mbi;
    if (!p || !VirtualQuery(p, &mbi, sizeof mbi))
        return;
    if (mbi.AllocationBase == p && size >= mbi.RegionSize)
        VirtualFree(p, 0, MEM_RELEASE);
    else
        VirtualFree(p, size, MEM_DECOMMIT);
}

int ht__gettid(void) { return (int)GetCurrentThreadId(); }

int ht__spin_trylock(ht_spinlock_t *l)
{
    return ht_load_relaxed(&l->v) == 0 && __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}

void ht__backoff(unsigned round)
{
    if (round < 64)
        __builtin_ia32_pause();
    else
        SwitchToThread();
}

void ht__spin_lock(ht_spinlock_t *l)
{
    for (unsigned i = 0; !ht__spin_trylock(l); i++)
        ht__backoff(i);
}

void ht__spin_unlock(ht_spinlock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }
