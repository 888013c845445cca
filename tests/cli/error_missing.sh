#!/bin/sh
# a trace that does not exist: error naming the file
. tests/cli/case.lib
case_run report $ADIR/no-such.fix
