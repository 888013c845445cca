/* main.c -- the heaptrail command line: dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>
#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
} commands[] = {
    { "run", ht_cmd_run, "run [OPTIONS] -- PROG ARGS...     track a program (run -h: its options)" },
    { "attach", ht_cmd_attach, "attach [OPTIONS] PID              track a running program from now on (attach -h)" },
    { "detach", ht_cmd_detach, "detach PID                        stop tracking a process attach joined (a last snapshot)" },
    { "snapshot", ht_cmd_snapshot, "snapshot [--leaks] PID          ask a traced process for a snapshot (--leaks: and a leak check)" },
    { "report", ht_cmd_report, "report TRACE [options]          leaks or in-use memory by stack" },
    { "diff", ht_cmd_diff, "diff TRACE:N TRACE:M             what grew between two snapshots" },
    { "growth", ht_cmd_growth, "growth TRACE                    stacks that grow across snapshots" },
};

static int usage(FILE *f)
{
    fprintf(f, "usage: heaptrail COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n", commands[i].usage);
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help"))
        return usage(stdout);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        if (!commands[i].fn) {
            fprintf(stderr, "heaptrail: '%s' is not built into this binary\n", argv[1]);
            return 2;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "heaptrail: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
