#!/bin/sh
# two runs of grower (different ASLR): snapshot 1 of the first against the exit snapshot of the second
. tests/cli/case.lib
record grower_1 $P/grower
first=$trace
record grower_2 $P/grower
real_run diff --by function "$first:1" "$trace"
