#!/bin/sh
# report --snapshot N: memory in use at an interval snapshot (not called leaked)
. tests/cli/case.lib
case_run report --snapshot 2 $ADIR/symfix.fix
