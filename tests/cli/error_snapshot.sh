#!/bin/sh
# a snapshot the trace does not have: error naming the file and the range
. tests/cli/case.lib
case_run report --snapshot 9 $ADIR/symfix.fix
