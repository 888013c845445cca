/* inject_tool.c -- inject_tool PID LIB ENTRY ARG: ht_inject alone
 * (src/analyze/inject.c); prints "ret=N" and exits 0, or "error: MSG" and
 * exits 1 (tests/attach/inject.sh). */
#include "analyze/inject.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: inject_tool PID LIB ENTRY ARG\n");
        return 2;
    }
    char err[4096];
    int ret = 0;
    if (ht_inject(atoi(argv[1]), argv[2], argv[3], argv[4], &ret, err, sizeof err) == 0) {
        printf("ret=%d\n", ret);
        return 0;
    }
    printf("error: %s\n", err);
    return 1;
}
