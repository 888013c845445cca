#!/bin/sh
# diff --format json
. tests/cli/case.lib
case_run diff --format json $ADIR/symfix.fix:4 $ADIR/symfix.fix
