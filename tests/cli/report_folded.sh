#!/bin/sh
# report --format folded: collapsed stacks for flamegraph.pl/speedscope
. tests/cli/case.lib
case_run report --format folded $ADIR/symfix.fix
