#!/bin/sh
# report --allocated --format json: mode "allocated", totals since the start
. tests/cli/case.lib
case_run report --allocated --top 2 --format json $ADIR/symfix.fix
