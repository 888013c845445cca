#!/bin/sh
# real trace: diff between snapshot 0 and 3 of grower, by function
. tests/cli/case.lib
record grower_d $P/grower
real_run diff --by function "$trace:0" "$trace:3"
