#!/bin/sh
# an unknown --format: usage error naming the option
. tests/cli/case.lib
case_run report --format xml $ADIR/symfix.fix
