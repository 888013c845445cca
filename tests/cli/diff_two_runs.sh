#!/bin/sh
# diff of two runs of symfix (different ASLR layouts): stacks match by module and offset
. tests/cli/case.lib
case_run diff $ADIR/symfix.fix:4 $ADIR/symfix2.fix:6
