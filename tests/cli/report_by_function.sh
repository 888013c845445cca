#!/bin/sh
# report --by function: sites grouped by their origin function
. tests/cli/case.lib
case_run report --by function $ADIR/symfix.fix
