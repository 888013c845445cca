/* heaptrail.h -- the public API of heaptrail, a native memory-leak and
 * allocation tracker.
 *
 * Link with -lheaptrail (build/libheaptrail.so; on Windows x64
 * build/windows/heaptrail.dll through libheaptrail.dll.a, or the static
 * build/windows/libheaptrail.a). Every function here is
 * thread-safe. Functions marked "async-signal-safe" may be called from a
 * signal handler and from inside a malloc/free hook: they never allocate,
 * never take a lock that can block forever, and never fault on a corrupt
 * stack (every memory read they make is checked first).
 */
#ifndef HEAPTRAIL_H
#define HEAPTRAIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  if defined(HT_BUILDING)
#    define HT_API __declspec(dllexport)
#  else
#    define HT_API
#  endif
#else
#  define HT_API __attribute__((visibility("default")))
#endif

#define HT_VERSION_MAJOR 0
#define HT_VERSION_MINOR 1

/*-************************************************************************
 *  Stack capture
 **************************************************************************/

/*! ht_capture() :
 *  Captures the calling thread's stack as return addresses, innermost first,
 *  like Windows' CaptureStackBackTrace and libunwind's unw_backtrace().
 *  With `skip` = 0, frames[0] is the return address of this call to
 *  ht_capture (an address inside the caller); `skip` = k drops the first k
 *  frames. At most `max` frames are stored.
 *  Unwinds through code without frame pointers using the modules' DWARF CFI
 *  (.eh_frame), through signal frames and the vdso, and falls back to
 *  validated frame-pointer steps only where no unwind table exists. On
 *  Windows x64 it uses the x64 unwind data (.pdata/.xdata) that
 *  RtlLookupFunctionEntry finds, JIT code registered with
 *  RtlAddFunctionTable and friends included, and gives the same frames as
 *  a RtlVirtualUnwind walk.
 *  A corrupt stack ends the trace early; it never faults.
 *  @hash : if not NULL, receives ht_stack_hash(frames, returned count).
 *  @return : the number of frames stored (0 <= n <= max).
 *  Async-signal-safe. */
HT_API int ht_capture(int skip, int max, void **frames, uint64_t *hash);

/*! ht_capture_context() :
 *  The same walk, starting from a signal handler's context (a ucontext_t*
 *  as passed to an SA_SIGINFO handler; on Windows a CONTEXT*, such as an
 *  exception filter's ExceptionInfo->ContextRecord): frames[0] is the
 *  interrupted instruction's address, followed by the return addresses of
 *  its callers.
 *  @return : the number of frames stored. Async-signal-safe. */
HT_API int ht_capture_context(const void *ucontext, int max, void **frames,
                              uint64_t *hash);

#if defined(_WIN32)
/*! ht_CaptureStackBackTrace() :
 *  A drop-in for Windows' CaptureStackBackTrace/RtlCaptureStackBackTrace
 *  with the same signature and frames (FramesToSkip = 0: BackTrace[0] is
 *  the return address into the caller), walked by ht_capture(): faster,
 *  and through JIT code registered with RtlAddFunctionTable,
 *  RtlAddGrowableFunctionTable or RtlInstallFunctionTableCallback.
 *  @BackTraceHash : if not NULL, receives a 32-bit hash of the frames
 *  returned, folded from ht_stack_hash() (order-dependent, unlike
 *  Windows' sum of addresses).
 *  @return : the number of frames stored (at most 65535). */
HT_API unsigned short ht_CaptureStackBackTrace(unsigned long FramesToSkip,
                                               unsigned long FramesToCapture,
                                               void **BackTrace,
                                               unsigned long *BackTraceHash);
#endif

/*! ht_stack_hash() :
 *  The 64-bit hash ht_capture() reports for a frame array. It depends on
 *  the order of the frames (a permutation gives a different hash, unlike a
 *  sum of addresses) and on their count. Async-signal-safe. */
HT_API uint64_t ht_stack_hash(void *const *frames, int n);

/*-************************************************************************
 *  JIT-compiled code
 *  The loader knows nothing of code a JIT compiler emits. Tell heaptrail
 *  where it is (the Linux analog of Windows' RtlAddFunctionTable) and the
 *  unwinder walks through it: with the .eh_frame you give, or with
 *  validated frame-pointer steps where there is none. libgcc's
 *  __register_frame()/__deregister_frame() (LLVM ORC, wasmtime) are
 *  observed automatically. Code in executable anonymous memory that nobody
 *  registered (V8 keeps frame pointers) is walked with frame pointers too.
 *
 *  JIT code is freed and its addresses reused, so a frame in registered
 *  code carries the registration's serial number in bits 48..62: two
 *  functions that lived at one address at different times give different
 *  frames, stacks and ids. HT_FRAME_ADDRESS() strips it.
 *
 *  On Windows the walk takes JIT frames' unwind data from the system's own
 *  registrations (RtlAddFunctionTable, RtlAddGrowableFunctionTable,
 *  RtlInstallFunctionTableCallback); ht_register_code() adds the name and
 *  the serial tag, and ht_register_unwind() (DWARF) returns 0.
 **************************************************************************/

#define HT_FRAME_ADDRESS(f)    ((uintptr_t)(f) & 0xffffffffffffull)
#define HT_FRAME_JIT_SERIAL(f) ((unsigned)(((uintptr_t)(f) >> 48) & 0x7fff))
/* The last frame when the walk reached code it could neither unwind (no
 * unwind info, no valid frame pointer) nor attribute to any module or
 * registration, or needed a module's unwind tables while another thread's
 * dlclose had been running for over 10 ms (they may be going away): the
 * stack continues beyond, unknown. */
#define HT_FRAME_UNWIND_STOPPED ((void *)(uintptr_t)1)

/*! ht_register_code() :
 *  Announces JIT code at [start, start + size) called `name` (copied; may
 *  be NULL). New code: any registration overlapping the range is dropped.
 *  Frames in it are unwound with frame pointers unless unwind info is
 *  attached with ht_register_unwind().
 *  @return : the registration's serial (1..32767, wrapping), 0 on failure.
 *  Thread-safe; not from a signal handler. */
HT_API uint32_t ht_register_code(const void *start, size_t size, const char *name);

/*! ht_register_unwind() :
 *  Attaches DWARF unwind info to JIT code: eh_frame is an .eh_frame
 *  section (CIEs and FDEs, as a compiler emits them; a terminator is not
 *  needed) of eh_frame_size bytes covering [start, start + size). It must
 *  stay valid until the code is unregistered. If exactly that range is
 *  registered, it keeps its name and serial; otherwise this registers it.
 *  @return : the registration's serial, 0 on failure (always on Windows,
 *  where code is described to the system with RtlAddFunctionTable). */
HT_API uint32_t ht_register_unwind(const void *start, size_t size, const void *eh_frame,
                                   size_t eh_frame_size);

/*! ht_unregister_code() :
 *  The code registered at `start` is gone. @return : 0, or -1 if nothing
 *  was registered there. */
HT_API int ht_unregister_code(const void *start);

/*-************************************************************************
 *  Stack trace database
 *  Every distinct stack gets one small id; two different stacks never share
 *  one (the hash only speeds the search, frames are compared in full).
 **************************************************************************/

/* The id returned once the database's memory budget (HEAPTRAIL_STACKDB_MAX,
 * bytes, with K/M/G suffixes; default 256M) is exhausted. */
#define HT_STACK_ID_OVERFLOW 0xffffffffu
/* The id of the empty stack (n = 0). */
#define HT_STACK_ID_EMPTY 0u

/*! ht_stack_id() :
 *  Interns frames[0..n) (innermost first, as ht_capture returns them) in
 *  the process-wide stack database.
 *  @return : the stack's id, equal for equal stacks from any thread, or
 *            HT_STACK_ID_OVERFLOW when the budget is exhausted (the drop is
 *            counted). Async-signal-safe. */
HT_API uint32_t ht_stack_id(void *const *frames, int n);

/*! ht_stack_frames() :
 *  The frames of a stack id, innermost first.
 *  @return : the stack's depth; at most `max` frames are stored. 0 for
 *            HT_STACK_ID_EMPTY, -1 for an id never returned by
 *            ht_stack_id(). Async-signal-safe. */
HT_API int ht_stack_frames(uint32_t id, void **frames, int max);

typedef struct ht_stackdb_stats_s {
    uint64_t stacks;        /* distinct stacks interned */
    uint64_t nodes;         /* stored prefix-tree nodes */
    uint64_t bytes_mapped;  /* memory the database has mapped */
    uint64_t budget;        /* its limit in bytes */
    uint64_t drops;         /* interns answered with HT_STACK_ID_OVERFLOW */
} ht_stackdb_stats_t;

/*! ht_stackdb_stats() : the process-wide database's counters.
 *  Async-signal-safe. */
HT_API void ht_stackdb_stats(ht_stackdb_stats_t *out);

/*-************************************************************************
 *  Allocation tracking (under `heaptrail run`)
 **************************************************************************/

/*! ht_snapshot() :
 *  When the program runs under `heaptrail run` (the agent is preloaded),
 *  writes a snapshot of every allocation site to the trace file now and
 *  flushes it. Without the agent, does nothing.
 *  @return : the snapshot's sequence number in the trace (0, 1, ...), or -1
 *            if the program is not traced or the trace cannot be written.
 *  Thread-safe; async-signal-safe (it waits only for a snapshot another
 *  thread is writing). */
HT_API int ht_snapshot(void);

/*! ht_leak_check() :
 *  A leak check now, from the program's own code (as LeakSanitizer's
 *  __lsan_do_recoverable_leak_check): when the program runs under
 *  `heaptrail run`, finds the live heap blocks nothing in the program's
 *  memory points to any more -- as at exit: globals, stacks (the caller's
 *  from its own frame up), registers, TLS, the program's own mappings --
 *  writes a snapshot with that answer to the trace (`heaptrail report
 *  TRACE --snapshot N` shows the stacks) and returns. Other threads are
 *  paused meanwhile (those asleep in a system call are read as they
 *  stand); the program then goes on.
 *  @return : the number of unreachable blocks, heap blocks and blocks
 *            announced with ht_custom_alloc (definitely lost plus those
 *            reachable only through them; not the possibly lost ones,
 *            reached only through pointers into blocks' middles, which
 *            the trace counts apart), or -1 if the program is not
 *            traced, reachability is off (HEAPTRAIL_REACH=0), it could not
 *            be computed (another thread could not be paused, or one
 *            asleep in a system call woke during every try; the trace
 *            says which), or the trace cannot be written.
 *  Thread-safe; not async-signal-safe; takes about 0.2 us per live
 *  block. */
HT_API long ht_leak_check(void);

/*! ht_custom_alloc(), ht_custom_free() :
 *  For a program's own allocator (a pool, an arena, a free list over
 *  memory it got from malloc or mmap): announce each block it hands out
 *  and each one it takes back, as Valgrind's VALGRIND_MALLOCLIKE_BLOCK /
 *  VALGRIND_FREELIKE_BLOCK and heaptrack's heaptrack_report_alloc/free
 *  do. Under `heaptrail run` such a block gets the stack of the call to
 *  ht_custom_alloc (innermost frame: its caller, the allocator) and is
 *  counted per stack like a heap block, in a group of its own: "custom
 *  allocator blocks never freed" at exit, `[custom]` rows in reports.
 *  Its bytes lie inside memory already counted (the pool's own heap
 *  blocks or mappings), so they are never added to the heap's figures,
 *  the process's totals or its peak. The leak check judges them as
 *  blocks of their own, as memcheck does a mempool's: a custom block no
 *  pointer leads to is definitely (or indirectly, or possibly) lost, and
 *  the memory around it (the pool's superblock, static data) is read
 *  without it, so what only a lost custom block points to is lost with
 *  it. A pointer the pool keeps to the start of its superblock is one to
 *  the object at that address too (memcheck says the same). A pool that
 *  gives its memory back (frees a superblock, resets an arena) without
 *  ht_custom_free for each block must say so with ht_custom_free_range:
 *  else its blocks stay announced, and are called lost at exit.
 *  `p` NULL is ignored; `size` may be 0. Announcing an address that is
 *  live already ends the earlier block there (as a free); freeing an
 *  address never announced (or freed already) is counted with the
 *  trace's unknown frees and otherwise ignored. To follow a realloc,
 *  call ht_custom_free(old) then ht_custom_alloc(new, size).
 *  Without the agent (or after `heaptrail detach`, or in a program the
 *  agent was attached to, whose calls were bound to these stubs already)
 *  they do nothing.
 *  Thread-safe; async-signal-safe (a call made while the agent itself
 *  runs on that thread -- a signal handler interrupting a malloc -- is
 *  dropped and counted); each ht_custom_alloc costs a stack capture,
 *  as a malloc under the agent does. */
HT_API void ht_custom_alloc(const void *p, size_t size);
HT_API void ht_custom_free(const void *p);

/*! ht_custom_free_range() :
 *  Ends every announced block that starts in [start, start + len), as
 *  ht_custom_free on each would (Valgrind's VALGRIND_MEMPOOL_TRIM /
 *  VALGRIND_DESTROY_MEMPOOL): for a pool that frees a superblock or
 *  resets an arena at once. A range holding no announced block changes
 *  nothing (no unknown free is counted). It walks the agent's whole table
 *  of announced blocks (about 1 ns a slot, 2-4 slots a live block: 2 ms
 *  with a million blocks announced), and ends each block in ~20 ns: for
 *  a pool's teardown, not a hot path. Thread-safe; async-signal-safe as
 *  above; without the agent it does nothing. */
HT_API void ht_custom_free_range(const void *start, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HEAPTRAIL_H */
