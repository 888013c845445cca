#!/bin/sh
# report --in-use: the exit snapshot, worded as in-use memory
. tests/cli/case.lib
case_run report --in-use --top 2 $ADIR/symfix.fix
