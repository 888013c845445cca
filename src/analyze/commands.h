/* commands.h -- the subcommands of the heaptrail CLI. Each takes the
 * arguments after its name (argv[0] is the subcommand) and returns the
 * process exit status. main.c dispatches; a command not built into this
 * binary is reported as such. */
#ifndef HT_ANALYZE_COMMANDS_H
#define HT_ANALYZE_COMMANDS_H

#define HT_WEAK __attribute__((weak))

int ht_cmd_run(int argc, char **argv) HT_WEAK;       /* heaptrail run [opts] -- PROG ARGS */
int ht_cmd_snapshot(int argc, char **argv) HT_WEAK;  /* heaptrail snapshot [--leaks] PID */
int ht_cmd_report(int argc, char **argv) HT_WEAK;    /* heaptrail report TRACE */
int ht_cmd_diff(int argc, char **argv) HT_WEAK;      /* heaptrail diff A B */
int ht_cmd_growth(int argc, char **argv) HT_WEAK;    /* heaptrail growth TRACE */
int ht_cmd_attach(int argc, char **argv) HT_WEAK;    /* heaptrail attach [opts] PID */
int ht_cmd_detach(int argc, char **argv) HT_WEAK;    /* heaptrail detach PID */

/* Shared by run, snapshot and attach (cmd_run.c). */
#include <stddef.h>
#include <stdio.h>
/* Writes s with control characters shown as '?' (text from a process). */
void ht__put_clean(FILE *f, const char *s);
/* A program's name as a file name part: anything but [A-Za-z0-9._-]
 * made '_' ("p" if empty). */
void ht__sanitize_name(char *dst, size_t cap, const char *s);
/* The agent library: $HEAPTRAIL_PRELOAD, else next to this binary; 0 or -1. */
int ht__find_preload(char *out, size_t cap);
/* A connection to process pid's agent (its control socket), or -1. */
int ht__connect_agent(long pid);
/* One reply line from the agent, NUL-ended; its length. */
size_t ht__read_reply(int fd, char *buf, size_t cap, int timeout_ms, int *timed_out);

#endif
