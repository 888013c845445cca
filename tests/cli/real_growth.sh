#!/bin/sh
# real trace of tests/progs/grower (a snapshot per round): only the steady leak grows
. tests/cli/case.lib
record grower $P/grower
real_run growth --by function "$trace"
