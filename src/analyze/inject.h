/* inject.h -- loading a library into a running process (heaptrail attach).
 *
 * Linux x86-64 with glibc in the target; uses ptrace, no debugger. */
#ifndef HT_ANALYZE_INJECT_H
#define HT_ANALYZE_INJECT_H

#include <stddef.h>

/* Loads shared library `lib` into process `pid` and calls its function
 * `entry` with the string `arg`, in one thread of the process stopped at a
 * safe point. Returns 0 when entry was called (its int return value in
 * *ret), -1 with a message in err (no trailing newline, written to follow
 * "heaptrail attach: ") otherwise. The process is never left stopped and
 * never loses a signal or sees EINTR because of us.
 *
 * The safe point: a thread blocked in a system call of a fixed list (read,
 * poll, epoll_wait, nanosleep, accept, wait4, ... never futex, mmap or
 * write), where the C library holds none of the locks dlopen and the entry
 * take; `attach` waits up to 5 s for one, the main thread first. The calls
 * run with every signal but the synchronous ones blocked in that thread, so
 * the program's handlers never run on top of them (they run after, as if
 * the signal had come just then); threads the entry starts inherit that
 * mask. dlopen is called with RTLD_NOW | RTLD_LOCAL and the library's
 * absolute path; a failed dlsym unloads it again. While a call runs the
 * caller's SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGTSTP are held back (a
 * dead injector would let the thread return to address 0 and crash the
 * program); it waits for the call without a time limit, saying so on
 * stderr after 5 s. Not thread-safe; the caller must not be tracing pid. */
int ht_inject(int pid, const char *lib, const char *entry, const char *arg, int *ret, char *err, size_t errlen);

#endif
