/* driver.c -- `htdrive CMD ARGS...`: runs the analyzer's report, diff or
 * growth command exactly as `heaptrail CMD ARGS...` would, but reads
 * traces with the fixture loader (fixture.c), so CLI behaviour -- options,
 * errors, every output format -- is tested before and independently of
 * the binary trace reader. */
#include <stdio.h>
#include <string.h>
#include "analyze/cmd.h"
#include "fixture.h"

/* the fixture reader keeps every snapshot's sites */
static int load_fixture(const char *path, const ht_read_opts_t *o, ht_trace_t *t, char *err, size_t errlen)
{
    (void)o;
    return fixture_load(path, t, err, errlen);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: htdrive report|diff|growth ARGS...\n");
        return 2;
    }
    int cmd = !strcmp(argv[1], "report") ? HT_CMD_REPORT : !strcmp(argv[1], "diff") ? HT_CMD_DIFF
            : !strcmp(argv[1], "growth") ? HT_CMD_GROWTH : -1;
    if (cmd < 0) {
        fprintf(stderr, "htdrive: unknown command %s\n", argv[1]);
        return 2;
    }
    return ht__cmd_main(cmd, argc - 1, argv + 1, load_fixture, fixture_free);
}
