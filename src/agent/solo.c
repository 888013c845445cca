/* solo.c -- the single-thread fast path: while one thread (the "solo"
 * thread) is the only one that has ever entered the agent's bookkeeping,
 * it updates sites and the live table without their locks. The first
 * other thread that enters switches the process to locked mode for good:
 *
 *   newcomer                              solo thread, each operation
 *   solo_tid = 0  (CAS)                   busy = 1
 *   membarrier(PRIVATE_EXPEDITED)         compiler barrier
 *   wait while busy                       if solo_tid == me: unlocked update
 *   mode = MULTI                          busy = 0
 *
 * This is Dekker's protocol with the fence moved to the rare side:
 * membarrier makes every running thread of the process execute a full
 * barrier, so after it either the solo thread's busy = 1 is visible (the
 * newcomer waits for the section to end) or the solo thread's next read of
 * solo_tid sees 0 (it takes the locks). The solo thread pays two plain
 * stores per operation instead of two locked instructions.
 *
 * Threads that only read (a snapshot in the control thread or a signal
 * handler) are unaffected: they never took these locks. Enabled only if
 * membarrier works, the process has a single thread at start-up (or in a
 * fork child) and no seccomp filter. Async-signal-safe: a handler that
 * interrupts a section runs its hooks behind the re-entry guard, never in
 * here. */
#include "agent.h"
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

uint32_t ht__solo_tid;              /* 0: no solo thread */
uint32_t ht__solo_busy;
int ht__mode = HT_MODE_MULTI;
HT_TLS uint32_t ht__my_tid;
HT_TLS int ht__t_solo;

/* Threads in this process, from /proc/self/stat (field 20); -1 unknown. */
static int thread_count(void)
{
    char buf[1024];
    int fd = (int)ht__sys3(SYS_open, "/proc/self/stat", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    long n = ht__sys3(SYS_read, fd, buf, sizeof buf - 1);
    ht__sys1(SYS_close, fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    /* skip "pid (comm)": comm may hold spaces and parentheses */
    char *p = buf + n;
    while (p > buf && *p != ')')
        p--;
    if (*p != ')')
        return -1;
    int field = 2, count = 0;
    for (p++; *p && field < 20; p++)
        if (*p == ' ')
            field++;
    if (field != 20)
        return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        count = count * 10 + (*p - '0');
    return count;
}

void ht__solo_start(int filtered)
{
    ht__my_tid = (uint32_t)ht__gettid();
    ht_store_relaxed(&ht__solo_tid, 0);
    ht_store_release(&ht__mode, HT_MODE_MULTI);
    const char *off = ht__env("HEAPTRAIL_SOLO");
    if (off && off[0] == '0')
        return;
    /* under a seccomp filter (inherited: a container's, a service's) the
     * switch's membarrier might be refused, even by killing */
    if (filtered)
        return;
    if (ht__sys3(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0 ||
        thread_count() != 1)
        return;
    ht_store_relaxed(&ht__mode, HT_MODE_SOLO);
    ht_store_release(&ht__solo_tid, ht__my_tid);
}

/* Takes solo mode away from thread `s` (0: nobody has it) for good, then
 * waits until the process is in locked mode. The caller `me` fences the
 * solo thread unless it is that thread (then it is here, not in a
 * section). */
static void end_solo(uint32_t s, uint32_t me)
{
    if (s != 0 &&
        __atomic_compare_exchange_n(&ht__solo_tid, &s, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        ht_store_relaxed(&ht__mode, HT_MODE_SWITCHING);
        if (s != me) {
            if (ht__sys3(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
                /* cannot fence the solo thread: wait long enough for any
                 * section it may be in (sections are a few hundred ns) */
                for (int i = 0; i < 100; i++)
                    ht__sys0(SYS_sched_yield);
            }
            for (unsigned i = 0; ht_load_acquire(&ht__solo_busy); i++)
                ht__backoff(i);
        }
        ht_store_release(&ht__mode, HT_MODE_MULTI);
    }
    for (unsigned i = 0; ht_load_acquire(&ht__mode) != HT_MODE_MULTI; i++)
        ht__backoff(i);
}

int ht__solo_slow(void)
{
    uint32_t me = ht__my_tid;
    if (me == 0) {
        me = ht__my_tid = (uint32_t)ht__gettid();
        if (me == ht_load_relaxed(&ht__solo_tid)) {
            ht_store_relaxed(&ht__solo_busy, 1);
            ht_compiler_barrier();
            if (ht_load_relaxed(&ht__solo_tid) == me)
                return ht__t_solo = 1;
            ht_store_relaxed(&ht__solo_busy, 0);
        }
    }
    uint32_t s = ht_load_relaxed(&ht__solo_tid);
    end_solo(s != me ? s : 0, me);
    return ht__t_solo = 0;
}

/* Ends solo mode for good (the program is about to sandbox itself: a
 * later switch would need membarrier, which a seccomp filter may refuse). */
void ht__solo_stop(void)
{
    end_solo(ht_load_relaxed(&ht__solo_tid), ht__my_tid);
}
