/* cmd.h -- the analyzer commands (report, diff, growth) with the trace
 * loader as a parameter, so tests can run the exact CLI code paths on
 * traces they construct in memory. */
#ifndef HT_ANALYZE_CMD_H
#define HT_ANALYZE_CMD_H

#include <stddef.h>
#include <stdio.h>
#include "../format/trace.h"
#include "util.h"

/* reads a trace, keeping the sites of the snapshots o names (NULL: all) */
typedef int (*ht_loader_fn)(const char *path, const ht_read_opts_t *o, ht_trace_t *t, char *err,
                            size_t errlen);
typedef void (*ht_unloader_fn)(ht_trace_t *t);

enum { HT_CMD_REPORT = 0, HT_CMD_DIFF, HT_CMD_GROWTH };

/* Runs a command: argv[0] is its name, options and operands follow.
 * Output goes to stdout (or -o FILE), errors to stderr.
 * @return : the exit status (0 ok, 1 failure, 2 usage error). */
HT_INTERNAL int ht__cmd_main(int cmd, int argc, char **argv, ht_loader_fn load,
                             ht_unloader_fn unload);

/* A summary of one snapshot of the trace at `path`, written to out (stderr
 * in the CLI), in one of two wordings (cmd_run.c):
 * - HT_SUMMARY_AT_EXIT, `heaptrail run`'s at the end of a run: the last
 *   snapshot (seq -1); what is live leaked; "unreachable at exit"; then
 *   the top stacks;
 * - HT_SUMMARY_NOW, `heaptrail snapshot --leaks`'s: the snapshot the agent
 *   numbered `seq` (ht_tsnapshot_t.file_seq); "in use now", "unreachable
 *   now", or why reachability was not computed (or that the agent wrote a
 *   plain snapshot); then only the stacks with unreachable blocks;
 * - HT_SUMMARY_EXITED, `heaptrail run`'s when the program's wait status
 *   says it exited (no signal ended it): as HT_SUMMARY_AT_EXIT, but a
 *   trace without its exit snapshot then means the program ended without
 *   passing through exit() or _exit() (a raw exit_group system call, as
 *   Go's runtime makes), and the summary says so instead of "cut short".
 * Tests call it on traces they write.
 * @return : 0, or -1 when the trace or the snapshot could not be read
 *           (said on out). */
enum { HT_SUMMARY_AT_EXIT = 0, HT_SUMMARY_NOW, HT_SUMMARY_EXITED };
struct ht_supp_s;
/* supp (may be NULL): leak suppressions (suppress.h); the sites they
 * match are counted apart and not listed. unreach (may be NULL) receives
 * 1 if the snapshot's leak check found unsuppressed unreachable blocks
 * (definitely or indirectly lost: heap blocks, and custom allocator
 * blocks when it judged them too), 0 if it found none, -1 if there was no
 * leak check (run --error-exitcode). */
HT_INTERNAL int ht__run_summary(const char *path, int when, int64_t seq, struct ht_supp_s *supp,
                                int *unreach, FILE *out);

#endif
