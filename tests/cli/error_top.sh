#!/bin/sh
# --top with a non-number
. tests/cli/case.lib
case_run report --top ten $ADIR/symfix.fix
