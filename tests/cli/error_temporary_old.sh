#!/bin/sh
# --temporary on a trace whose agent did not count temporary allocations
# (the fixtures are written without TEMP records): an error, never zeros
. tests/cli/case.lib
case_run report --temporary $ADIR/symfix.fix
