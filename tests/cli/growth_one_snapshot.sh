#!/bin/sh
# growth on a trace with one snapshot: a clear error
. tests/cli/case.lib
case_run growth $ADIR/cxxfix.fix
