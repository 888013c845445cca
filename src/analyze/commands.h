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

#endif
