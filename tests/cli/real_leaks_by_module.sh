#!/bin/sh
# real trace: leaks by origin module (the first frame outside libc, libstdc++, ld.so)
. tests/cli/case.lib
record leaks_m $P/leaks
real_run report --by module "$trace"
