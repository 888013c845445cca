#!/bin/sh
# diff with one operand: usage
. tests/cli/case.lib
case_run diff $ADIR/symfix.fix
