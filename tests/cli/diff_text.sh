#!/bin/sh
# diff: what changed between snapshot 4 and the exit snapshot, UMDH style
. tests/cli/case.lib
case_run diff $ADIR/symfix.fix:4 $ADIR/symfix.fix:6
