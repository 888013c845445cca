#!/bin/sh
# report --by module: sites grouped by their origin module
. tests/cli/case.lib
case_run report --by module $ADIR/symfix.fix
