#!/bin/sh
# diff --by function
. tests/cli/case.lib
case_run diff --by function $ADIR/symfix.fix:0 $ADIR/symfix.fix:-1
