#!/bin/sh
# report --top and --min-bytes: only the rows asked for, and a 'shown' line
. tests/cli/case.lib
case_run report --top 3 --min-bytes 300 $ADIR/symfix.fix
