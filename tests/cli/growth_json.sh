#!/bin/sh
# growth --format json: with each stack's series
. tests/cli/case.lib
case_run growth --format json $ADIR/symfix.fix
