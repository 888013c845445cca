#!/bin/sh
# real trace of tests/progs/leaks: every leak under its function, exact bytes and blocks (the program's truth: 534678 bytes in 29 blocks)
. tests/cli/case.lib
record leaks $P/leaks
real_run report --by function --top 0 "$trace"
