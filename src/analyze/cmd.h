/* cmd.h -- the analyzer commands (report, diff, growth) with the trace
 * loader as a parameter, so tests can run the exact CLI code paths on
 * traces they construct in memory. */
#ifndef HT_ANALYZE_CMD_H
#define HT_ANALYZE_CMD_H

#include <stddef.h>
#include <stdio.h>
#include "../format/trace.h"
#include "util.h"

typedef int (*ht_loader_fn)(const char *path, ht_trace_t *t, char *err, size_t errlen);
typedef void (*ht_unloader_fn)(ht_trace_t *t);

enum { HT_CMD_REPORT = 0, HT_CMD_DIFF, HT_CMD_GROWTH };

/* Runs a command: argv[0] is its name, options and operands follow.
 * Output goes to stdout (or -o FILE), errors to stderr.
 * @return : the exit status (0 ok, 1 failure, 2 usage error). */
HT_INTERNAL int ht__cmd_main(int cmd, int argc, char **argv, ht_loader_fn load,
                             ht_unloader_fn unload);

/* `heaptrail run`'s end-of-run summary of the trace at `path`, written to
 * out (stderr in the CLI): the totals line, reachability at exit when the
 * trace holds it, notes, then the top stacks (cmd_run.c). Tests call it on
 * traces they write. */
HT_INTERNAL void ht__run_summary(const char *path, FILE *out);

#endif
